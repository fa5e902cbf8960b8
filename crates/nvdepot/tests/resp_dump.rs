//! DUMP and RESTORE against redis-server 7.0, both ways: seeded random
//! keys of every type (strings short, integer and long; lists, sets,
//! hashes and sorted sets from empty-ish to past every compact-encoding
//! threshold, integer and word members, long values; streams with
//! entries of different field sets, deletions, and consumer groups with
//! pending entries) built alike on both servers, then each key DUMPed by
//! redis-server and RESTOREd into nvdepot, and DUMPed by nvdepot and
//! RESTOREd into redis-server (and into nvdepot again): every copy reads
//! back as its original, with the encoding Redis names and the expiry
//! asked for. Then RESTORE's errors and options, each sent to both
//! servers with the same reply expected: BUSYKEY, REPLACE, bad TTLs,
//! IDLETIME/FREQ checks, a damaged checksum, a newer RDB version, a body
//! that is not an object, an expired ABSTTL.
//!
//! `NVDEPOT_DUMP_DIFF_SEEDS` sets the seeds (default 3).

mod common;

use nvdepot_resp::Value;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use common::{env_or, show_value, temp_dir, RefServer, Resp, Server};

fn word(rng: &mut StdRng, long: bool) -> String {
    match rng.gen_range(0..5) {
        0 => rng.gen_range(-70000i64..70000).to_string(),
        1 if long => "v".repeat(rng.gen_range(60..200)),
        2 => format!("{:.2}", rng.gen_range(-10.0f64..10.0)),
        _ => format!("w{}", rng.gen_range(0..100000)),
    }
}

/// Commands building key `k` of a random type and size (the same on
/// both servers; stream IDs explicit so both hold the same entries).
fn build(rng: &mut StdRng, k: &str) -> Vec<Vec<String>> {
    let s = |x: &str| x.to_string();
    let size = match rng.gen_range(0..10) {
        0..=5 => rng.gen_range(1..20),
        6..=8 => rng.gen_range(100..700),
        _ => rng.gen_range(1000..3000),
    };
    let long = rng.gen_bool(0.2);
    let ints = rng.gen_bool(0.3);
    let mut out = Vec::new();
    match rng.gen_range(0..6) {
        0 => {
            let v = match rng.gen_range(0..3) {
                0 => rng.gen_range(-100000i64..100000).to_string(),
                1 => "x".repeat(rng.gen_range(0..5000)),
                _ => word(rng, long),
            };
            out.push(vec![s("SET"), s(k), v]);
        }
        1 => {
            let mut c = vec![s("RPUSH"), s(k)];
            for _ in 0..size {
                c.push(word(rng, long));
            }
            out.push(c);
        }
        2 => {
            let mut c = vec![s("SADD"), s(k)];
            for _ in 0..size {
                c.push(if ints {
                    rng.gen_range(-100000i64..100000).to_string()
                } else {
                    word(rng, long)
                });
            }
            out.push(c);
        }
        3 => {
            let mut c = vec![s("HSET"), s(k)];
            for i in 0..size {
                c.push(format!("f{i}"));
                c.push(word(rng, long));
            }
            out.push(c);
        }
        4 => {
            let mut c = vec![s("ZADD"), s(k)];
            for i in 0..size {
                c.push(match rng.gen_range(0..6) {
                    0 => s("inf"),
                    1 => s("-inf"),
                    2 => rng.gen_range(-5i64..5).to_string(),
                    _ => format!("{}", rng.gen_range(-1e6f64..1e6)),
                });
                c.push(if long && i % 3 == 0 {
                    "m".repeat(80) + &i.to_string()
                } else {
                    format!("m{i}")
                });
            }
            out.push(c);
        }
        _ => {
            let n = size.min(400);
            for i in 1..=n {
                let id = format!("{}-{}", 1000 + i / 4, i % 4);
                let mut c = vec![s("XADD"), s(k), id];
                if i % 9 == 0 {
                    c.extend([s("other"), word(rng, long)]);
                } else {
                    c.extend([s("a"), word(rng, long), s("b"), i.to_string()]);
                }
                out.push(c);
            }
            for _ in 0..rng.gen_range(0..5) {
                let i = rng.gen_range(1..=n);
                out.push(vec![s("XDEL"), s(k), format!("{}-{}", 1000 + i / 4, i % 4)]);
            }
            if rng.gen_bool(0.6) {
                out.push(vec![s("XGROUP"), s("CREATE"), s(k), s("g1"), s("0")]);
                out.push(vec![s("XGROUP"), s("CREATE"), s(k), s("g2"), s("$")]);
                let count = rng.gen_range(1..20).to_string();
                out.push(vec![
                    s("XREADGROUP"),
                    s("GROUP"),
                    s("g1"),
                    s("alice"),
                    s("COUNT"),
                    count,
                    s("STREAMS"),
                    s(k),
                    s(">"),
                ]);
                out.push(vec![
                    s("XREADGROUP"),
                    s("GROUP"),
                    s("g1"),
                    s("bob"),
                    s("COUNT"),
                    s("3"),
                    s("STREAMS"),
                    s(k),
                    s(">"),
                ]);
                out.push(vec![
                    s("XGROUP"),
                    s("CREATECONSUMER"),
                    s(k),
                    s("g2"),
                    s("carol"),
                ]);
                out.push(vec![s("XACK"), s(k), s("g1"), s("1000-1"), s("1000-2")]);
            }
        }
    }
    if rng.gen_bool(0.2) {
        out.push(vec![s("PEXPIRE"), s(k), s("500000")]);
    }
    out
}

fn call(c: &mut Resp, args: &[String]) -> Value {
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    c.call(&words)
}

/// A reply with each map-like array's pairs sorted (HGETALL).
fn sorted_pairs(v: Value) -> Value {
    match v {
        Value::Array(Some(items)) => {
            let mut pairs: Vec<(String, String)> = items
                .chunks(2)
                .map(|p| (show_value(&p[0]), show_value(&p[1])))
                .collect();
            pairs.sort();
            Value::Bulk(Some(format!("{pairs:?}").into_bytes()))
        }
        other => other,
    }
}

fn sorted(v: Value) -> Value {
    match v {
        Value::Array(Some(items)) => {
            let mut shown: Vec<String> = items.iter().map(show_value).collect();
            shown.sort();
            Value::Bulk(Some(format!("{shown:?}").into_bytes()))
        }
        other => other,
    }
}

/// What `key` holds, read through the commands of its type (the key's
/// name left out of errors).
fn view(c: &mut Resp, key: &str) -> Vec<String> {
    let named = format!("'{key}'");
    view_named(c, key)
        .into_iter()
        .map(|s| s.replace(&named, "'KEY'"))
        .collect()
}

fn view_named(c: &mut Resp, key: &str) -> Vec<String> {
    let s = |x: &str| x.to_string();
    let t = show_value(&c.call(&["TYPE", key]));
    let mut out = vec![t.clone()];
    let enc = show_value(&c.call(&["OBJECT", "ENCODING", key]));
    out.push(enc);
    let pttl = match c.call(&["PTTL", key]) {
        Value::Integer(n) if n > 0 => s("ttl"),
        other => show_value(&other),
    };
    out.push(pttl);
    let v = match t.as_str() {
        "+string" | "string" => c.call(&["GET", key]),
        "+list" | "list" => c.call(&["LRANGE", key, "0", "-1"]),
        "+set" | "set" => sorted(c.call(&["SMEMBERS", key])),
        "+hash" | "hash" => sorted_pairs(c.call(&["HGETALL", key])),
        "+zset" | "zset" => c.call(&["ZRANGE", key, "0", "-1", "WITHSCORES"]),
        _ => {
            out.push(show_value(&c.call(&["XRANGE", key, "-", "+"])));
            let info = c.call(&["XINFO", "STREAM", key]);
            if let Value::Array(Some(items)) = &info {
                for p in items.chunks(2) {
                    let name = show_value(&p[0]);
                    if [
                        "length",
                        "last-generated-id",
                        "max-deleted-entry-id",
                        "entries-added",
                        "recorded-first-entry-id",
                        "groups",
                    ]
                    .iter()
                    .any(|f| name.contains(f))
                    {
                        out.push(format!("{name}={}", show_value(&p[1])));
                    }
                }
            }
            for g in ["g1", "g2"] {
                let pending = c.call(&["XPENDING", key, g, "-", "+", "1000"]);
                if let Value::Array(Some(items)) = pending {
                    for e in items {
                        if let Value::Array(Some(f)) = e {
                            // ID, consumer, delivery count (not the idle time).
                            out.push(format!(
                                "{} {} {}",
                                show_value(&f[0]),
                                show_value(&f[1]),
                                show_value(&f[3])
                            ));
                        }
                    }
                } else {
                    out.push(show_value(&pending));
                }
                let consumers = c.call(&["XINFO", "CONSUMERS", key, g]);
                if let Value::Array(Some(items)) = consumers {
                    for cons in items {
                        if let Value::Array(Some(f)) = cons {
                            // name and pending count.
                            out.push(format!("{} {}", show_value(&f[1]), show_value(&f[3])));
                        }
                    }
                } else {
                    out.push(show_value(&consumers));
                }
            }
            let groups = c.call(&["XINFO", "GROUPS", key]);
            out.push(show_value(&groups));
            return out;
        }
    };
    out.push(show_value(&v));
    out
}

fn dump(c: &mut Resp, key: &str) -> Vec<u8> {
    match c.call(&["DUMP", key]) {
        Value::Bulk(Some(p)) => p,
        other => panic!("DUMP {key}: {other:?}"),
    }
}

/// Redis's CRC-64 (Jones, reflected), for payloads made here.
fn crc64(data: &[u8]) -> u64 {
    let mut crc = 0u64;
    for &b in data {
        crc ^= u64::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x95ac_9329_ac4b_c9b5
            } else {
                crc >> 1
            };
        }
    }
    crc
}

fn sealed(body: &[u8], version: u16) -> Vec<u8> {
    let mut p = body.to_vec();
    p.extend_from_slice(&version.to_le_bytes());
    let crc = crc64(&p);
    p.extend_from_slice(&crc.to_le_bytes());
    p
}

#[test]
fn dump_and_restore_move_every_type_both_ways() {
    let Some(redis) = RefServer::redis_or_skip() else {
        return;
    };
    assert_eq!(crc64(b"123456789"), 0xe9c6_d914_c4b8_d9ca);
    let dir = temp_dir();
    let server = Server::start_serve(
        &dir.path().join("store"),
        &["--size", "256M", "--segment-size", "8M"],
    );
    let (mut a, mut b) = (Resp::connect_to(redis.addr), Resp::connect(&server));
    let seeds: u64 = env_or("NVDEPOT_DUMP_DIFF_SEEDS", 3);
    let mut keys_moved = 0;
    for seed in 0..seeds {
        let mut rng = StdRng::seed_from_u64(seed);
        for i in 0..40 {
            let k = format!("k{seed}:{i}");
            for c in build(&mut rng, &k) {
                let (x, y) = (call(&mut a, &c), call(&mut b, &c));
                // Stream reads answer with delivery-time-free entries alike.
                assert_eq!(show_value(&x), show_value(&y), "{c:?}");
            }
            let original = view(&mut a, &k);
            assert_eq!(original, view(&mut b, &k), "{k} built differently");
            let pttl = |c: &mut Resp| match c.call(&["PTTL", &k]) {
                Value::Integer(n) => n,
                other => panic!("{other:?}"),
            };
            let ttl = pttl(&mut a).max(0).to_string();
            // Redis's payload into nvdepot, nvdepot's into Redis and itself.
            let from_redis = dump(&mut a, &k);
            let from_nv = dump(&mut b, &k);
            let to = |p: &str| format!("{p}{k}");
            for (into_redis, key, payload) in [
                (false, to("r:"), &from_redis),
                (true, to("n:"), &from_nv),
                (false, to("n:"), &from_nv),
            ] {
                let c = if into_redis { &mut a } else { &mut b };
                let reply = c.call_bytes(&[b"RESTORE", key.as_bytes(), ttl.as_bytes(), payload]);
                assert_eq!(show_value(&reply), "+OK", "RESTORE {key}");
                assert_eq!(view(c, &key), original, "{key} restored differently");
            }
            keys_moved += 3;
        }
    }
    assert!(keys_moved >= 120);
    // A DUMP of a missing key.
    assert_eq!(
        show_value(&a.call(&["DUMP", "nope"])),
        show_value(&b.call(&["DUMP", "nope"]))
    );
    errors_as_redis(&mut a, &mut b);
}

fn errors_as_redis(a: &mut Resp, b: &mut Resp) {
    for c in [&mut *a, &mut *b] {
        c.call(&["SET", "s", "hello"]);
        c.call(&["RPUSH", "l", "x", "y"]);
    }
    let p = dump(a, "s");
    let pl = dump(a, "l");
    let mut damaged = p.clone();
    damaged[1] ^= 1;
    let body = &p[..p.len() - 10];
    let newer = sealed(body, 11);
    let truncated = sealed(&body[..body.len() - 2], 10);
    let unknown_type = sealed(&[42, 1, b'x'], 10);
    let empty_list = sealed(&[1, 0], 10);
    // A sorted set of one member scored -0 (RDB_TYPE_ZSET_2): Redis's
    // listpack reads it back as 0.
    let mut minus_zero = vec![5, 1, 1, b'a'];
    minus_zero.extend_from_slice(&(-0.0f64).to_le_bytes());
    let minus_zero = sealed(&minus_zero, 10);
    let cases: Vec<Vec<&[u8]>> = vec![
        vec![b"RESTORE", b"s", b"0", &p],
        vec![b"RESTORE", b"s", b"0", &p, b"REPLACE"],
        vec![b"RESTORE", b"t", b"-1", &p],
        vec![b"RESTORE", b"t", b"abc", &p],
        vec![b"RESTORE", b"t", b"0", &damaged],
        vec![b"RESTORE", b"t", b"0", &newer],
        vec![b"RESTORE", b"t", b"0", &truncated],
        vec![b"RESTORE", b"t", b"0", &unknown_type],
        vec![b"RESTORE", b"t", b"0", &empty_list],
        vec![b"RESTORE", b"t", b"0", b"short"],
        vec![b"RESTORE", b"t", b"0", &p, b"IDLETIME", b"-1"],
        vec![b"RESTORE", b"t", b"0", &p, b"IDLETIME", b"x"],
        vec![b"RESTORE", b"t", b"0", &p, b"FREQ", b"256"],
        vec![
            b"RESTORE",
            b"t",
            b"0",
            &p,
            b"FREQ",
            b"10",
            b"IDLETIME",
            b"5",
        ],
        vec![b"RESTORE", b"t", b"0", &p, b"IDLETIME"],
        vec![b"RESTORE", b"t", b"0", &p, b"BOGUS"],
        vec![b"RESTORE", b"t", b"0"],
        vec![b"RESTORE", b"t1", b"0", &p, b"IDLETIME", b"100"],
        vec![b"RESTORE", b"t2", b"0", &p, b"FREQ", b"100"],
        vec![b"RESTORE", b"t3", b"60000", &pl],
        vec![b"RESTORE", b"t4", b"1000", &p, b"ABSTTL"],
        vec![b"RESTORE", b"l", b"1000", &p, b"ABSTTL", b"REPLACE"],
        vec![b"RESTORE", b"s", b"0", &pl, b"REPLACE"],
        vec![b"EXISTS", b"t4", b"l"],
        vec![b"TYPE", b"s"],
        vec![b"LRANGE", b"s", b"0", b"-1"],
        vec![b"GET", b"t1"],
        vec![b"DUMP", b"s", b"extra"],
        vec![b"RESTORE", b"z0", b"0", &minus_zero],
        vec![b"ZSCORE", b"z0", b"a"],
        vec![b"OBJECT", b"ENCODING", b"z0"],
    ];
    for case in cases {
        let (x, y) = (a.call_bytes(&case), b.call_bytes(&case));
        let shown: Vec<String> = case
            .iter()
            .take(4)
            .map(|w| String::from_utf8_lossy(w).into_owned())
            .collect();
        assert_eq!(show_value(&x), show_value(&y), "{shown:?}");
    }
    for c in [&mut *a, &mut *b] {
        let ttl = c.call(&["PTTL", "t3"]);
        assert!(
            matches!(ttl, Value::Integer(n) if n > 50_000 && n <= 60_000),
            "{ttl:?}"
        );
    }
}
