//! Pub/Sub (issue 37) against a stock redis-server, and what Redis's
//! single thread gives for free but a server with several workers must
//! earn: one order of messages for every subscriber, a publisher never
//! held up by a subscriber that does not read.
//!
//! The differential run drives five connections of each server (two of
//! them on RESP3) with seeded random SUBSCRIBE, PSUBSCRIBE, SSUBSCRIBE,
//! their UNSUBSCRIBE forms, PUBLISH, SPUBLISH, PUBSUB, PING, commands
//! refused in the subscriber context, arity errors, HELLO and RESET. After
//! each command every connection is sent a `PING` with a fresh marker and
//! read up to its answer: what it received before (replies and messages)
//! must be what redis-server's connection received, as a multiset within
//! the step (Redis's own order among patterns, or in an UNSUBSCRIBE of
//! all, is its hash table's), in order across steps.
//!
//! `NVDEPOT_PUBSUB_OPS` commands per seed (default 2 000),
//! `NVDEPOT_PUBSUB_SEEDS` seeds (default 2), `NVDEPOT_PUBSUB_SEED0` the
//! first seed.

mod common;

use std::io::Read;
use std::time::{Duration, Instant};

use nvdepot_resp::Value;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use common::{env_or, show_value as show, temp_dir, RefServer, Resp, Server};

const CHANNELS: &[&str] = &[
    "a", "b", "news.x", "news.y", "hello", "hallo", "x*", "", "é", "[ab]",
];
const PATTERNS: &[&str] = &[
    "*",
    "news.*",
    "h?llo",
    "[ab]",
    "x\\*",
    "a*",
    "[^a]",
    "h[a-e]llo",
];
const CONNS: usize = 5;

fn message(rng: &mut StdRng) -> String {
    match rng.gen_range(0..10) {
        0 => String::new(),
        1 => "m".repeat(rng.gen_range(1000..70_000)),
        _ => format!("msg{}", rng.gen_range(0..1000)),
    }
}

fn pick<'a>(rng: &mut StdRng, from: &[&'a str], most: usize) -> Vec<&'a str> {
    let n = rng.gen_range(1..=most);
    (0..n).map(|_| from[rng.gen_range(0..from.len())]).collect()
}

/// One random command.
fn command(rng: &mut StdRng) -> Vec<String> {
    let mut c: Vec<&str> = match rng.gen_range(0..100) {
        0..=11 => [vec!["SUBSCRIBE"], pick(rng, CHANNELS, 3)].concat(),
        12..=19 => [vec!["PSUBSCRIBE"], pick(rng, PATTERNS, 2)].concat(),
        20..=24 => [vec!["SSUBSCRIBE"], pick(rng, CHANNELS, 2)].concat(),
        25..=29 => [vec!["UNSUBSCRIBE"], pick(rng, CHANNELS, 2)].concat(),
        30..=31 => vec!["UNSUBSCRIBE"],
        32..=35 => [vec!["PUNSUBSCRIBE"], pick(rng, PATTERNS, 2)].concat(),
        36 => vec!["PUNSUBSCRIBE"],
        37..=38 => [vec!["SUNSUBSCRIBE"], pick(rng, CHANNELS, 2)].concat(),
        39 => vec!["SUNSUBSCRIBE"],
        40..=64 => vec!["PUBLISH", pick(rng, CHANNELS, 1)[0]],
        65..=69 => vec!["SPUBLISH", pick(rng, CHANNELS, 1)[0]],
        70..=71 => [vec!["PUBSUB", "NUMSUB"], pick(rng, CHANNELS, 3)].concat(),
        72 => [vec!["PUBSUB", "SHARDNUMSUB"], pick(rng, CHANNELS, 2)].concat(),
        73 => vec!["PUBSUB", "NUMPAT"],
        74 => vec!["PUBSUB", "CHANNELS"],
        75 => vec!["PUBSUB", "CHANNELS", pick(rng, PATTERNS, 1)[0]],
        76 => vec!["PUBSUB", "SHARDCHANNELS"],
        77 => vec!["PUBSUB", "NUMPAT", "extra"],
        78 => vec!["PUBSUB", "NOSUCH"],
        79..=81 => vec!["GET", "k"],
        82 => vec!["SET", "k", "v"],
        83 => vec!["CLIENT", "GETNAME"],
        84 => vec!["SUBSCRIBE"],
        85 => vec!["PUBLISH", "a"],
        86 => vec!["NOSUCHCOMMAND", "x"],
        87 => vec!["GET"],
        88..=89 => vec!["PING"],
        90 => vec!["RESET"],
        91 => vec!["HELLO", "3"],
        92 => vec!["HELLO", "2"],
        93 => vec!["ECHO", "e"],
        _ => vec!["PUBLISH", pick(rng, CHANNELS, 1)[0]],
    };
    let mut owned: Vec<String> = c.drain(..).map(str::to_string).collect();
    if matches!(owned[0].as_str(), "PUBLISH" | "SPUBLISH") && owned.len() == 2 {
        owned.push(message(rng));
    }
    owned
}

/// Masks what legitimately differs: HELLO's server version and client id.
fn masked(v: Value) -> Value {
    match v {
        Value::Map(pairs)
            if pairs
                .iter()
                .any(|(k, _)| *k == Value::Bulk(Some(b"proto".to_vec()))) =>
        {
            Value::Simple(b"<hello>".to_vec())
        }
        Value::Array(Some(a)) if a.len() == 14 && a[0] == Value::Bulk(Some(b"server".to_vec())) => {
            Value::Simple(b"<hello>".to_vec())
        }
        // PUBSUB CHANNELS lists in hash order.
        Value::Array(Some(mut a)) if a.iter().all(|x| matches!(x, Value::Bulk(Some(_)))) => {
            a.sort_by_key(|x| format!("{x:?}"));
            Value::Array(Some(a))
        }
        v => v,
    }
}

/// Reads `c` up to the answer to the barrier `PING marker`; what came
/// before, sorted.
fn until_barrier(c: &mut Resp, marker: &str) -> Vec<String> {
    let mut got = Vec::new();
    loop {
        let v = c.read();
        let is_marker = match &v {
            Value::Bulk(Some(b)) => b == marker.as_bytes(),
            Value::Array(Some(a)) => {
                a.len() == 2
                    && a[0] == Value::Bulk(Some(b"pong".to_vec()))
                    && a[1] == Value::Bulk(Some(marker.as_bytes().to_vec()))
            }
            _ => false,
        };
        if is_marker {
            break;
        }
        // An UNSUBSCRIBE of all lists channels in Redis's hash order,
        // with counts going down: channels and counts apart.
        if let Value::Array(Some(a)) | Value::Push(a) = &v {
            if a.len() == 3 && matches!(&a[0], Value::Bulk(Some(k)) if k.ends_with(b"unsubscribe"))
            {
                got.push(format!("{} {}", show(&a[0]), show(&a[1])));
                got.push(format!("{} count {}", show(&a[0]), show(&a[2])));
                continue;
            }
        }
        got.push(show(&masked(v)));
    }
    got.sort();
    got
}

fn brief(s: &[String]) -> String {
    let all = s.join(" | ");
    if all.len() > 600 {
        let head: String = all.chars().take(600).collect();
        format!("{head}… ({} bytes)", all.len())
    } else {
        all
    }
}

#[test]
fn pubsub_replies_and_messages_as_redis() {
    let Some(reference) = RefServer::redis_or_skip() else {
        return;
    };
    let ops: usize = env_or("NVDEPOT_PUBSUB_OPS", 2000);
    let seeds: u64 = env_or("NVDEPOT_PUBSUB_SEEDS", 2);
    let seed0: u64 = env_or("NVDEPOT_PUBSUB_SEED0", 0);
    let dir = temp_dir();
    let server = Server::start_serve(
        &dir.path().join("data"),
        &["--size", "256M", "--segment-size", "8M"],
    );
    for seed in seed0..seed0 + seeds {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut refs: Vec<Resp> = (0..CONNS)
            .map(|_| Resp::connect_to(reference.addr))
            .collect();
        let mut ours: Vec<Resp> = (0..CONNS).map(|_| Resp::connect(&server)).collect();
        for conns in [&mut refs, &mut ours] {
            for c in conns.iter_mut().skip(3) {
                c.call(&["HELLO", "3"]);
            }
        }
        for step in 0..ops {
            let i = rng.gen_range(0..CONNS);
            let cmd = command(&mut rng);
            let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
            let marker = format!("barrier-{seed}-{step}");
            let mut outputs = Vec::new();
            for conns in [&mut refs, &mut ours] {
                conns[i].send(&args);
                let mut seen = Vec::new();
                for j in std::iter::once(i).chain((0..CONNS).filter(|&j| j != i)) {
                    conns[j].send(&["PING", &marker]);
                    seen.push((j, until_barrier(&mut conns[j], &marker)));
                }
                outputs.push(seen);
            }
            for (want, got) in outputs[0].iter().zip(&outputs[1]) {
                assert_eq!(
                    want.1,
                    got.1,
                    "seed {seed} step {step}: connection {} after connection {i} sent {:?}:\n redis:   {}\n nvdepot: {}",
                    want.0,
                    args.iter().map(|a| if a.len() > 40 { "<long>" } else { a }).collect::<Vec<_>>(),
                    brief(&want.1),
                    brief(&got.1)
                );
            }
        }
        eprintln!("resp_pubsub: seed {seed}: {ops} commands, every reply and message the same");
    }
    assert!(server.rss() < 300 << 20, "RSS {} bytes", server.rss());
}

/// Two publishers on their own connections, four subscribers spread over
/// the workers: every subscriber gets every message, each publisher's in
/// its order, and all subscribers the same interleaving.
#[test]
fn every_subscriber_sees_one_order_across_workers() {
    let dir = temp_dir();
    let server = Server::start_serve(
        &dir.path().join("data"),
        &["--size", "128M", "--segment-size", "8M", "--threads", "2"],
    );
    let mut subs: Vec<Resp> = (0..4).map(|_| Resp::connect(&server)).collect();
    for s in &mut subs {
        s.call(&["SUBSCRIBE", "q"]);
    }
    const EACH: usize = 2000;
    let publishers: Vec<_> = (0..2)
        .map(|p| {
            let addr = server.addr;
            std::thread::spawn(move || {
                let mut c = Resp::connect_to(addr);
                for n in 0..EACH {
                    let v = c.call(&["PUBLISH", "q", &format!("{p}:{n}")]);
                    assert_eq!(v, Value::Integer(4));
                }
            })
        })
        .collect();
    for p in publishers {
        p.join().unwrap();
    }
    let mut orders = Vec::new();
    for s in &mut subs {
        let mut order = Vec::new();
        let mut next = [0usize; 2];
        for _ in 0..2 * EACH {
            let Value::Array(Some(a)) = s.read() else {
                panic!("not a message")
            };
            let Value::Bulk(Some(m)) = &a[2] else {
                panic!("no payload")
            };
            let m = String::from_utf8(m.clone()).unwrap();
            let (p, n) = m.split_once(':').unwrap();
            let (p, n): (usize, usize) = (p.parse().unwrap(), n.parse().unwrap());
            assert_eq!(n, next[p], "publisher {p}'s messages out of order");
            next[p] += 1;
            order.push(m);
        }
        orders.push(order);
    }
    assert!(
        orders.windows(2).all(|w| w[0] == w[1]),
        "subscribers saw different interleavings"
    );
}

/// A subscriber that never reads is disconnected once 32 MiB wait for it
/// (Redis's `client-output-buffer-limit pubsub 32mb`); the publisher is
/// never held up and the server's memory stays bounded.
#[test]
fn a_subscriber_that_does_not_read_is_disconnected_not_buffered() {
    let dir = temp_dir();
    let server = Server::start_serve(
        &dir.path().join("data"),
        &["--size", "128M", "--segment-size", "8M"],
    );
    let mut slow = Resp::connect(&server);
    slow.call(&["SUBSCRIBE", "big"]);
    let mut fast = Resp::connect(&server);
    fast.call(&["SUBSCRIBE", "big"]);
    let mut publisher = Resp::connect(&server);
    let payload = "p".repeat(1 << 20);
    let started = Instant::now();
    let mut delivered = Vec::new();
    for _ in 0..64 {
        delivered.push(publisher.call(&["PUBLISH", "big", &payload]));
        // The reading subscriber keeps up.
        let Value::Array(Some(a)) = fast.read() else {
            panic!("not a message")
        };
        assert_eq!(a[2], Value::Bulk(Some(payload.as_bytes().to_vec())));
    }
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "publisher held up"
    );
    // Both got the first messages; past the limit only the reader did.
    assert_eq!(delivered[0], Value::Integer(2));
    assert_eq!(delivered[63], Value::Integer(1));
    assert_eq!(
        publisher.call(&["PUBSUB", "NUMSUB", "big"]),
        Value::Array(Some(vec![
            Value::Bulk(Some(b"big".to_vec())),
            Value::Integer(1)
        ]))
    );
    // The slow one finds what the kernel had buffered, then the end.
    slow.stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut sink = vec![0u8; 1 << 20];
    loop {
        match slow.stream.read(&mut sink) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("slow subscriber not disconnected: {e}"),
        }
    }
    assert!(server.rss() < 200 << 20, "RSS {} bytes", server.rss());
}
