//! SORT and SORT_RO against redis-server 7.0, differentially: seeded
//! random lists, sets and sorted sets (numbers, floats, words, the empty
//! string, `inf`), weight strings and hashes for BY and GET patterns, and
//! random SORT commands over them (BY with `*`, `*->field`, `nosort`,
//! patterns finding nothing; LIMIT in and out of range and negative; GET
//! `#`, strings, hash fields, a pattern without `*`; ASC/DESC, ALPHA,
//! STORE, a bad option) on both servers: every reply and every stored
//! list the same, except where Redis leaves the order unspecified —
//! elements whose ALPHA weights from a BY pattern compare equal (Redis's
//! qsort orders them as it happens to; compared as a multiset, and only
//! the count when LIMIT picks among them), and a set's `BY nosort` order.
//! Also a paged list, set and sorted set of 5 000 elements each.
//!
//! `NVDEPOT_SORT_DIFF_SEEDS` sets the seeds (default 3).

mod common;

use nvdepot_resp::Value;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use common::{env_or, show_value, temp_dir, RefServer, Resp, Server};

fn value(rng: &mut StdRng) -> String {
    match rng.gen_range(0..4) {
        0 => rng.gen_range(-50i64..50).to_string(),
        1 => format!("{:.3}", rng.gen_range(-100.0f64..100.0)),
        _ => [
            "a", "b", "abc", "Zed", "", "10", "1e3", "inf", "-inf", "x y", "3.0",
        ][rng.gen_range(0..11)]
        .to_string(),
    }
}

/// Both servers' replies to `args`.
fn both(a: &mut Resp, b: &mut Resp, args: &[String]) -> (Value, Value) {
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    (a.call(&words), b.call(&words))
}

/// The array's items sorted (a multiset), or the value itself.
fn unordered(v: &Value) -> Value {
    match v {
        Value::Array(Some(items)) => {
            let mut shown: Vec<String> = items.iter().map(show_value).collect();
            shown.sort();
            Value::Array(Some(
                shown
                    .into_iter()
                    .map(|s| Value::Bulk(Some(s.into_bytes())))
                    .collect(),
            ))
        }
        other => other.clone(),
    }
}

fn count(v: &Value) -> Value {
    match v {
        Value::Array(Some(items)) => Value::Integer(items.len() as i64),
        other => other.clone(),
    }
}

#[test]
fn sort_answers_as_redis() {
    let Some(redis) = RefServer::redis_or_skip() else {
        return;
    };
    let dir = temp_dir();
    let server = Server::start_serve(
        &dir.path().join("store"),
        &["--size", "64M", "--segment-size", "4M"],
    );
    let (mut a, mut b) = (Resp::connect_to(redis.addr), Resp::connect(&server));
    let s = |x: &str| x.to_string();
    let seeds: u64 = env_or("NVDEPOT_SORT_DIFF_SEEDS", 3);
    let mut sent = 0;
    for seed in 0..seeds {
        let mut rng = StdRng::seed_from_u64(seed);
        for _round in 0..15 {
            both(&mut a, &mut b, &[s("FLUSHALL")]);
            let vals: Vec<String> = (0..rng.gen_range(0..30)).map(|_| value(&mut rng)).collect();
            if !vals.is_empty() {
                let mut push = vec![s("RPUSH"), s("l")];
                push.extend(vals.iter().cloned());
                both(&mut a, &mut b, &push);
                push[0] = s("SADD");
                push[1] = s("s");
                both(&mut a, &mut b, &push);
                let mut zadd = vec![s("ZADD"), s("z")];
                for v in &vals {
                    zadd.push(rng.gen_range(-5..5).to_string());
                    zadd.push(v.clone());
                }
                both(&mut a, &mut b, &zadd);
            }
            both(&mut a, &mut b, &[s("SET"), s("str"), s("x")]);
            for v in &vals {
                if rng.gen_bool(0.7) {
                    let w = ["-3", "7", "abc", "1.5", ""][rng.gen_range(0..5)];
                    both(&mut a, &mut b, &[s("SET"), format!("w_{v}"), s(w)]);
                }
                if rng.gen_bool(0.7) {
                    let f = rng.gen_range(0..9).to_string();
                    let cmd = [
                        s("HSET"),
                        format!("h_{v}"),
                        s("f"),
                        f,
                        s("g"),
                        format!("v{v}"),
                    ];
                    both(&mut a, &mut b, &cmd);
                }
                if rng.gen_bool(0.5) {
                    both(
                        &mut a,
                        &mut b,
                        &[s("SET"), format!("o_{v}"), format!("obj{v}")],
                    );
                }
            }
            for _ in 0..60 {
                let key = ["l", "s", "z", "missing", "str", "l", "z"][rng.gen_range(0..7)];
                let name = if rng.gen_bool(0.8) { "SORT" } else { "SORT_RO" };
                let mut opts: Vec<String> = Vec::new();
                if rng.gen_bool(0.4) {
                    let by = [
                        "w_*",
                        "h_*->f",
                        "h_*->g",
                        "nosort",
                        "w_*->",
                        "x*y",
                        "h_*->none",
                    ];
                    opts.extend([s("BY"), s(by[rng.gen_range(0..by.len())])]);
                }
                if rng.gen_bool(0.3) {
                    opts.push(s("LIMIT"));
                    opts.push(rng.gen_range(-2..12).to_string());
                    opts.push(rng.gen_range(-2..12).to_string());
                }
                for _ in 0..rng.gen_range(0..3) {
                    let get = ["#", "o_*", "h_*->g", "w_*", "nostar"];
                    opts.extend([s("GET"), s(get[rng.gen_range(0..get.len())])]);
                }
                if rng.gen_bool(0.4) {
                    opts.push(s(["ASC", "DESC"][rng.gen_range(0..2)]));
                }
                if rng.gen_bool(0.5) {
                    opts.push(s("ALPHA"));
                }
                if rng.gen_bool(0.05) {
                    opts.push(s("BOGUS"));
                }
                let store = name == "SORT" && rng.gen_bool(0.2);
                if store {
                    opts.extend([s("STORE"), s("dst")]);
                    both(&mut a, &mut b, &[s("DEL"), s("dst")]);
                }
                let by = opts
                    .iter()
                    .position(|o| o == "BY")
                    .map(|i| opts[i + 1].clone());
                let alpha_ties =
                    opts.contains(&s("ALPHA")) && by.as_ref().is_some_and(|p| p.contains('*'));
                let set_nosort = key == "s" && by.as_deref() == Some("nosort") && !store;
                let limited = opts.contains(&s("LIMIT"));
                let loose = |v: &Value| match (alpha_ties || set_nosort, limited) {
                    (false, _) => v.clone(),
                    (true, false) => unordered(v),
                    (true, true) => count(v),
                };
                let mut cmd = vec![s(name), s(key)];
                cmd.extend(opts.iter().cloned());
                let (ra, rb) = both(&mut a, &mut b, &cmd);
                sent += 1;
                assert_eq!(
                    loose(&ra),
                    loose(&rb),
                    "seed {seed}: `{}`: redis-server {}, nvdepot {}",
                    cmd.join(" "),
                    show_value(&ra),
                    show_value(&rb)
                );
                if store {
                    let (la, lb) = both(&mut a, &mut b, &[s("LRANGE"), s("dst"), s("0"), s("-1")]);
                    assert_eq!(
                        loose(&la),
                        loose(&lb),
                        "seed {seed}: stored by `{}`",
                        cmd.join(" ")
                    );
                }
            }
        }
    }
    // Collections past their compact thresholds (paged here).
    let mut rng = StdRng::seed_from_u64(99);
    both(&mut a, &mut b, &[s("FLUSHALL")]);
    let big: Vec<String> = (0..5000)
        .map(|_| rng.gen_range(-1_000_000i64..1_000_000).to_string())
        .collect();
    for chunk in big.chunks(500) {
        let mut push = vec![s("RPUSH"), s("bl")];
        push.extend(chunk.iter().cloned());
        both(&mut a, &mut b, &push);
        push[0] = s("SADD");
        push[1] = s("bs");
        both(&mut a, &mut b, &push);
        let mut zadd = vec![s("ZADD"), s("bz")];
        for v in chunk {
            zadd.push(rng.gen_range(0..100).to_string());
            zadd.push(v.clone());
        }
        both(&mut a, &mut b, &zadd);
    }
    for cmd in [
        "SORT bl",
        "SORT bs DESC",
        "SORT bz",
        "SORT bl DESC LIMIT 100 50",
        "SORT bz BY nosort",
        "SORT bz BY nosort DESC LIMIT 5 10",
        "SORT bl BY nosort DESC LIMIT 0 7",
        "SORT bs ALPHA STORE d",
        "LRANGE d 0 -1",
        "SORT bz ALPHA DESC LIMIT 4990 100",
    ] {
        let words: Vec<String> = cmd.split(' ').map(String::from).collect();
        let (ra, rb) = both(&mut a, &mut b, &words);
        sent += 1;
        assert_eq!(ra, rb, "`{cmd}`");
    }
    eprintln!("resp_sort: {sent} SORT commands, every reply the same");
}
