//! Client-side caching (CLIENT TRACKING, issue 37) side by side with a
//! stock redis-server: the same scripted sessions — a RESP3 tracking
//! client in default, BCAST (with prefixes), OPTIN, OPTOUT and NOLOOP
//! modes, a RESP2 client redirecting to a `__redis__:invalidate`
//! subscriber, a second client writing, expiring and deleting keys,
//! FLUSHALL, the CLIENT CACHING / GETREDIR / TRACKINGINFO replies and
//! the option errors — run on both servers.
//!
//! Asserted: every connection receives the same frames (replies and
//! push or Pub/Sub invalidation messages, in order) from both servers.
//! After each step every connection is sent a PING, and everything it
//! received before the PING's reply is that step's output.

mod common;
#[path = "shapes/resp.rs"]
mod shapes;

use nvdepot_resp::Value;

use common::{temp_dir, RefServer, Server};
use shapes::{encode, Conn};

/// One step: which connection (0, 1, 2) sends which commands (`;`
/// separates commands sent together, before the step's PINGs: CLIENT
/// CACHING lasts one command, and a PING is one). `$ID2` stands for
/// connection 2's client id.
type Step = (usize, &'static [&'static str]);

/// Runs `steps` on three fresh connections to `addr` (connection 0 in
/// RESP3 if `resp3`); each step's frames per connection, connection 2's
/// id written as -2.
fn run(
    name: &'static str,
    addr: std::net::SocketAddr,
    resp3: bool,
    steps: &[Step],
) -> Vec<Vec<Vec<Value>>> {
    let mut conns: Vec<Conn> = (0..3).map(|_| Conn::connect(name, addr)).collect();
    let call = |c: &mut Conn, args: &[&[u8]]| {
        let mut bytes = Vec::new();
        encode(
            &args.iter().map(|a| a.to_vec()).collect::<Vec<_>>(),
            &mut bytes,
        );
        c.send_raw(&bytes);
        c.read()
    };
    if resp3 {
        assert!(matches!(
            call(&mut conns[0], &[b"HELLO", b"3"]),
            Value::Map(_)
        ));
    }
    let Value::Integer(id2) = call(&mut conns[2], &[b"CLIENT", b"ID"]) else {
        panic!("CLIENT ID");
    };
    let id2_text = id2.to_string();
    let hide = |v: Value| hide_id(v, id2);
    let mut out = Vec::new();
    for (i, args) in steps {
        let mut frames = vec![Vec::new()];
        for cmd in args.split(|a| *a == ";") {
            let cmd: Vec<&[u8]> = cmd
                .iter()
                .map(|a| {
                    if *a == "$ID2" {
                        id2_text.as_bytes()
                    } else {
                        a.as_bytes()
                    }
                })
                .collect();
            frames[0].push(hide(call(&mut conns[*i], &cmd)));
        }
        for (j, c) in conns.iter_mut().enumerate() {
            let mut got = Vec::new();
            let mut ping = Vec::new();
            encode(&[b"PING".to_vec(), b"mark".to_vec()], &mut ping);
            c.send_raw(&ping);
            loop {
                let v = c.read();
                let pong = match &v {
                    Value::Bulk(Some(b)) => b == b"mark",
                    // A RESP2 subscriber answers PING with [pong, mark].
                    Value::Array(Some(a)) => {
                        a.len() == 2 && a[0] == Value::Bulk(Some(b"pong".to_vec()))
                    }
                    _ => false,
                };
                if pong {
                    break;
                }
                got.push(hide(v));
            }
            if j == *i {
                frames[0].extend(got);
            } else {
                frames.push(got);
            }
        }
        out.push(frames);
    }
    out
}

/// `v` with client id `id` (anywhere inside it) written as -2.
fn hide_id(v: Value, id: i64) -> Value {
    match v {
        Value::Integer(n) if n == id => Value::Integer(-2),
        Value::Array(Some(a)) => {
            Value::Array(Some(a.into_iter().map(|v| hide_id(v, id)).collect()))
        }
        Value::Map(m) => Value::Map(
            m.into_iter()
                .map(|(k, v)| (hide_id(k, id), hide_id(v, id)))
                .collect(),
        ),
        v => v,
    }
}

fn same_as_redis(resp3: bool, steps: &[Step]) {
    let Some(redis) = RefServer::redis_or_skip() else {
        return;
    };
    let dir = temp_dir();
    let server = Server::start_serve(
        &dir.path().join("store"),
        &["--size", "256M", "--segment-size", "8M"],
    );
    let want = run("redis-server", redis.addr, resp3, steps);
    let got = run("nvdepot", server.addr, resp3, steps);
    for (k, ((w, g), step)) in want.iter().zip(&got).zip(steps).enumerate() {
        assert_eq!(w, g, "step {k} {step:?}: redis-server then nvdepot");
    }
}

#[test]
fn default_mode_invalidates_each_read_key_once() {
    let steps: &[Step] = &[
        (0, &["CLIENT", "TRACKING", "ON"]),
        (0, &["GET", "k"]),
        (0, &["MGET", "k2", "k3"]),
        (0, &["HGET", "h", "f"]),
        (1, &["SET", "k", "v"]),
        // Forgotten after its invalidation: no second message.
        (1, &["SET", "k", "w"]),
        (0, &["GET", "k"]),
        (1, &["DEL", "k"]),
        (1, &["MSET", "k2", "a", "k3", "b"]),
        (1, &["HSET", "h", "f", "1"]),
        // Its own write of a key it reads: after its reply.
        (0, &["EXISTS", "own"]),
        (0, &["SET", "own", "1"]),
        (0, &["GET", "x"]),
        (1, &["EXPIRE", "x", "100"]),
        (1, &["SET", "x", "1", "PX", "100000"]),
        (0, &["TTL", "x"]),
        (1, &["PEXPIRE", "x", "0"]),
        (0, &["GET", "z"]),
        (1, &["FLUSHALL"]),
        (0, &["CLIENT", "TRACKINGINFO"]),
        (0, &["CLIENT", "GETREDIR"]),
        (0, &["CLIENT", "TRACKING", "OFF"]),
        (0, &["GET", "k"]),
        (1, &["SET", "k", "1"]),
        (0, &["CLIENT", "TRACKINGINFO"]),
        (0, &["CLIENT", "GETREDIR"]),
    ];
    same_as_redis(true, steps);
}

#[test]
fn bcast_optin_optout_and_noloop_as_redis() {
    let steps: &[Step] = &[
        (
            0,
            &[
                "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "user:", "PREFIX", "obj:",
            ],
        ),
        (1, &["SET", "user:1", "a"]),
        (1, &["SET", "other", "b"]),
        (1, &["SET", "obj:9", "c"]),
        (0, &["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "us"]),
        (0, &["CLIENT", "TRACKING", "ON", "PREFIX", "x"]),
        (0, &["CLIENT", "TRACKING", "ON"]),
        (0, &["CLIENT", "TRACKINGINFO"]),
        (0, &["CLIENT", "TRACKING", "OFF"]),
        (0, &["CLIENT", "TRACKING", "ON", "OPTIN"]),
        (0, &["GET", "a"]),
        (0, &["CLIENT", "CACHING", "YES", ";", "GET", "b"]),
        (1, &["MSET", "a", "1", "b", "2"]),
        (0, &["CLIENT", "CACHING", "NO"]),
        (0, &["CLIENT", "TRACKINGINFO"]),
        (0, &["CLIENT", "TRACKING", "ON", "OPTOUT"]),
        (0, &["CLIENT", "TRACKING", "OFF"]),
        (0, &["CLIENT", "TRACKING", "ON", "OPTOUT"]),
        (
            0,
            &["CLIENT", "CACHING", "NO", ";", "GET", "c", ";", "GET", "d"],
        ),
        (1, &["MSET", "c", "1", "d", "2"]),
        (0, &["CLIENT", "TRACKING", "OFF"]),
        (0, &["CLIENT", "TRACKING", "ON", "NOLOOP"]),
        (0, &["GET", "n"]),
        (0, &["SET", "n", "mine"]),
        (1, &["SET", "n", "theirs"]),
        (0, &["GET", "n"]),
        (1, &["SET", "n", "again"]),
        (0, &["CLIENT", "TRACKING", "OFF"]),
        (0, &["CLIENT", "TRACKING", "ON", "OPTIN", "OPTOUT"]),
        (0, &["CLIENT", "TRACKING", "ON", "BCAST", "OPTIN"]),
        (0, &["CLIENT", "TRACKING", "MAYBE"]),
        (0, &["CLIENT", "TRACKING", "ON", "REDIRECT", "999999"]),
        (0, &["CLIENT", "TRACKING", "ON", "REDIRECT", "x"]),
        (0, &["CLIENT", "TRACKING", "ON", "BOGUS"]),
        (0, &["CLIENT", "CACHING", "YES"]),
        (1, &["CLIENT", "CACHING", "MAYBE"]),
    ];
    same_as_redis(true, steps);
}

/// BCAST invalidations are batched as Redis sends them before it sleeps:
/// one message per prefix and client with every key changed under it by
/// a connection's commands read together (MSET, a pipeline, EXEC), in
/// byte order; a NOLOOP client's own keys left out.
#[test]
fn bcast_batches_a_turns_keys_as_redis() {
    let steps: &[Step] = &[
        (
            0,
            &[
                "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "u:", "PREFIX", "o:",
            ],
        ),
        (1, &["MSET", "u:3", "x", "o:1", "y", "u:1", "z", "w", "v"]),
        (
            1,
            &["SET", "u:b", "1", ";", "SET", "u:a", "2", ";", "DEL", "u:b"],
        ),
        (
            1,
            &[
                "MULTI", ";", "SET", "o:z", "1", ";", "SET", "o:a", "1", ";", "EXEC",
            ],
        ),
        (0, &["CLIENT", "TRACKING", "OFF"]),
        (0, &["CLIENT", "TRACKING", "ON", "BCAST", "NOLOOP"]),
        (0, &["MSET", "k1", "1", "k2", "2"]),
        (1, &["MSET", "k2", "1", "k3", "2"]),
        (0, &["SET", "k4", "1", ";", "SET", "k0", "1"]),
        (0, &["CLIENT", "TRACKING", "OFF"]),
        (0, &["CLIENT", "TRACKING", "ON", "BCAST"]),
        (0, &["MSET", "k1", "1", "k2", "2"]),
    ];
    same_as_redis(true, steps);
}

#[test]
fn a_resp2_client_redirects_to_a_subscriber() {
    // Connection 2 subscribes; connection 0 (RESP2) redirects to it.
    let steps: &[Step] = &[
        (2, &["SUBSCRIBE", "__redis__:invalidate"]),
        (0, &["CLIENT", "TRACKING", "ON", "REDIRECT", "$ID2"]),
        (0, &["CLIENT", "GETREDIR"]),
        (0, &["GET", "r"]),
        (1, &["SET", "r", "1"]),
        (0, &["GET", "r"]),
        (1, &["FLUSHALL"]),
        (
            0,
            &[
                "CLIENT", "TRACKING", "ON", "BCAST", "REDIRECT", "$ID2", "PREFIX", "p",
            ],
        ),
        (0, &["CLIENT", "TRACKING", "OFF"]),
        (
            0,
            &[
                "CLIENT", "TRACKING", "ON", "BCAST", "REDIRECT", "$ID2", "PREFIX", "p",
            ],
        ),
        (1, &["SET", "p1", "x"]),
        (1, &["SET", "q1", "x"]),
        (0, &["CLIENT", "TRACKINGINFO"]),
    ];
    same_as_redis(false, steps);
}
