//! Many clients on one hot paged collection of each type at once (for
//! sorted sets and lists, the combined steps of
//! `crates/redis/src/combine.rs`: the lock holder applies every ZADD/ZREM,
//! or every push/pop, waiting for the key and commits them once): each client's every reply is what its own steps imply, and
//! afterwards each collection holds exactly what the replies say — every
//! pushed element popped once or still there once, every HINCRBY counted
//! once, every SADD/SREM/HSET/ZADD/ZREM answered as the membership or
//! score it changed, the sorted set's order whole.

mod common;

use std::collections::BTreeMap;
use std::thread;

use nvdepot_resp::Value;

use common::{temp_dir, Resp, Server};

const CLIENTS: usize = 16;
const STEPS: usize = 300;

fn int(v: Value) -> i64 {
    match v {
        Value::Integer(n) => n,
        other => panic!("not an integer: {other:?}"),
    }
}

fn bulks(v: Value) -> Vec<String> {
    match v {
        Value::Array(Some(items)) => items
            .into_iter()
            .map(|i| match i {
                Value::Bulk(Some(b)) => String::from_utf8(b).unwrap(),
                other => panic!("{other:?}"),
            })
            .collect(),
        Value::Bulk(Some(b)) => vec![String::from_utf8(b).unwrap()],
        Value::Bulk(None) | Value::Array(None) => Vec::new(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn hot_paged_collections_answer_every_client_exactly() {
    let dir = temp_dir();
    let server = Server::start_serve(
        &dir.path().join("store"),
        &["--size", "256M", "--segment-size", "8M"],
    );
    let mut c = Resp::connect(&server);
    // Paged from the start: past 16 KiB each.
    let pad = "p".repeat(100);
    for i in 0..400 {
        let e = format!("seed{i}{pad}");
        c.call(&["RPUSH", "l", &e]);
        c.call(&["HSET", "h", &e, "v"]);
        c.call(&["SADD", "s", &e]);
        c.call(&["ZADD", "z", &i.to_string(), &e]);
    }
    for k in ["l", "h", "s", "z"] {
        let enc = c.call(&["OBJECT", "ENCODING", k]);
        assert!(matches!(enc, Value::Bulk(Some(_))), "{k}: {enc:?}");
    }
    let workers: Vec<_> = (0..CLIENTS)
        .map(|w| {
            let mut c = Resp::connect(&server);
            let pad = pad.clone();
            thread::spawn(move || {
                let mut pushed = Vec::new();
                let mut popped = Vec::new();
                for i in 0..STEPS {
                    let e = format!("w{w}-{i}{pad}");
                    let cmd = if i % 2 == 0 { "RPUSH" } else { "LPUSH" };
                    assert!(int(c.call(&[cmd, "l", &e])) >= 1);
                    pushed.push(e.clone());
                    if i % 3 == 0 {
                        let cmd = if i % 2 == 0 { "LPOP" } else { "RPOP" };
                        popped.extend(bulks(c.call(&[cmd, "l"])));
                    }
                    assert_eq!(int(c.call(&["HSET", "h", &e, "x"])), 1, "new field {e}");
                    assert_eq!(int(c.call(&["HSET", "h", &e, "y"])), 0, "old field {e}");
                    c.call(&["HINCRBY", "h", &format!("counter{}", i % 7), "1"]);
                    assert_eq!(int(c.call(&["SADD", "s", &e])), 1, "new member {e}");
                    assert_eq!(int(c.call(&["SADD", "s", &e])), 0, "old member {e}");
                    let score = ((i * 7919 + w) % 1000).to_string();
                    assert_eq!(int(c.call(&["ZADD", "z", &score, &e])), 1, "new {e}");
                    assert_eq!(
                        int(c.call(&["ZADD", "z", "CH", "1e6", &e])),
                        1,
                        "rescored {e}"
                    );
                    assert_eq!(int(c.call(&["ZADD", "z", "1e6", &e])), 0, "same {e}");
                    if i % 4 == 0 {
                        assert_eq!(int(c.call(&["SREM", "s", &e])), 1, "member {e}");
                        assert_eq!(int(c.call(&["HDEL", "h", &e])), 1, "field {e}");
                        assert_eq!(int(c.call(&["ZREM", "z", &e])), 1, "zset member {e}");
                        assert_eq!(int(c.call(&["ZREM", "z", &e])), 0, "gone {e}");
                    }
                }
                (pushed, popped)
            })
        })
        .collect();
    let mut pushed = Vec::new();
    let mut popped = Vec::new();
    for t in workers {
        let (p, q) = t.join().unwrap();
        pushed.extend(p);
        popped.extend(q);
    }
    // The list: seeds and pushes, each either popped once or still there.
    let mut count: BTreeMap<String, i64> = BTreeMap::new();
    for i in 0..400 {
        *count.entry(format!("seed{i}{pad}")).or_default() += 1;
    }
    for e in &pushed {
        *count.entry(e.clone()).or_default() += 1;
    }
    let remaining = bulks(c.call(&["LRANGE", "l", "0", "-1"]));
    assert_eq!(int(c.call(&["LLEN", "l"])), remaining.len() as i64);
    for e in popped.iter().chain(&remaining) {
        *count.entry(e.clone()).or_default() -= 1;
    }
    assert!(
        count.values().all(|&n| n == 0),
        "every element popped or kept once"
    );
    // Each client's own pushes keep their relative order on each end.
    for w in 0..CLIENTS {
        let right: Vec<usize> = remaining
            .iter()
            .filter_map(|e| {
                let rest = e.strip_prefix(&format!("w{w}-"))?;
                let i: usize = rest.trim_end_matches('p').parse().ok()?;
                i.is_multiple_of(2).then_some(i)
            })
            .collect();
        assert!(
            right.windows(2).all(|p| p[0] < p[1]),
            "client {w}'s RPUSHes in order"
        );
    }
    // The hash and the set.
    let mut total = 0;
    for k in 0..7 {
        let v = bulks(c.call(&["HGET", "h", &format!("counter{k}")]));
        total += v[0].parse::<i64>().unwrap();
    }
    assert_eq!(
        total,
        (CLIENTS * STEPS) as i64,
        "every HINCRBY counted once"
    );
    let kept = (CLIENTS * STEPS - CLIENTS * STEPS.div_ceil(4)) as i64;
    assert_eq!(int(c.call(&["HLEN", "h"])), 400 + 7 + kept);
    assert_eq!(int(c.call(&["SCARD", "s"])), 400 + kept);
    assert_eq!(int(c.call(&["ZCARD", "z"])), 400 + kept);
    // The order whole: the seeds by score, then every kept member at 1e6
    // by name.
    let order = bulks(c.call(&["ZRANGE", "z", "0", "-1"]));
    assert_eq!(order.len() as i64, 400 + kept);
    let top: Vec<&String> = order[400..].iter().collect();
    assert!(
        top.windows(2).all(|p| p[0] < p[1]),
        "members at one score by name"
    );
    assert!(order[..400].iter().all(|m| m.starts_with("seed")));
    for e in pushed.iter().step_by(37) {
        let i: usize = e
            .split('-')
            .nth(1)
            .unwrap()
            .trim_end_matches('p')
            .parse()
            .unwrap();
        let there = i64::from(!i.is_multiple_of(4));
        assert_eq!(int(c.call(&["SISMEMBER", "s", e])), there, "{e}");
        assert_eq!(int(c.call(&["HEXISTS", "h", e])), there, "{e}");
        let score = c.call(&["ZSCORE", "z", e]);
        assert_eq!(score != Value::Bulk(None), there == 1, "{e}: {score:?}");
    }
    let info = match c.call(&["INFO", "nvdepot"]) {
        Value::Bulk(Some(b)) => String::from_utf8(b).unwrap(),
        other => panic!("{other:?}"),
    };
    let field = |name: &str| -> u64 {
        info.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("INFO nvdepot has no {name}"))
    };
    let (batches, steps) = (field("combined_batches"), field("combined_steps"));
    assert!(
        steps >= batches && batches > 0,
        "{batches} batches, {steps} steps"
    );
    eprintln!(
        "resp_combining: {CLIENTS} clients x {STEPS} steps on one list, hash, set and sorted set: {} pushed, {} popped, {} left; {steps} sorted-set and list steps in {batches} batches",
        pushed.len(),
        popped.len(),
        remaining.len()
    );
}

/// Pops and pushes at both ends of one paged list with few elements per
/// page, from many clients at once, so that combined batches pop a page
/// empty and push a new page of the same number in one commit (the new
/// page must survive the commit, not be deleted as the emptied one).
/// Afterwards the list holds exactly what was pushed and not popped, and
/// every page is readable.
#[test]
fn combined_pops_and_pushes_across_page_boundaries_keep_the_list_whole() {
    let dir = temp_dir();
    let server = Server::start_serve(
        &dir.path().join("store"),
        &["--size", "256M", "--segment-size", "8M"],
    );
    let mut c = Resp::connect(&server);
    // ~1 KiB elements: a handful per page, so page boundaries are crossed
    // every few steps.
    let pad = "q".repeat(1000);
    for i in 0..40 {
        c.call(&["RPUSH", "l", &format!("seed{i}{pad}")]);
    }
    let workers: Vec<_> = (0..CLIENTS)
        .map(|w| {
            let mut c = Resp::connect(&server);
            let pad = pad.clone();
            thread::spawn(move || {
                let (mut pushed, mut popped) = (Vec::new(), Vec::new());
                for i in 0..200 {
                    let left = (i / 2 + w) % 2 == 0;
                    if i % 2 == 0 {
                        popped.extend(bulks(c.call(&[if left { "LPOP" } else { "RPOP" }, "l"])));
                    } else {
                        let e = format!("w{w}-{i}{pad}");
                        let cmd = if left { "LPUSH" } else { "RPUSH" };
                        assert!(int(c.call(&[cmd, "l", &e])) >= 1, "{cmd}");
                        pushed.push(e);
                    }
                }
                (pushed, popped)
            })
        })
        .collect();
    let done: Vec<_> = workers.into_iter().map(|t| t.join().unwrap()).collect();
    let remaining = bulks(c.call(&["LRANGE", "l", "0", "-1"]));
    assert_eq!(int(c.call(&["LLEN", "l"])), remaining.len() as i64);
    let seeds = (0..40).map(|i| format!("seed{i}{pad}"));
    assert_each_taken_or_kept_once(seeds, done, &remaining);
}

/// ZADDs and ZPOPMIN/ZPOPMAX of one paged sorted set from many clients at
/// once (combined into batches): every member added is popped once or
/// still there once, and each pop answered members in order.
#[test]
fn combined_zadds_and_zpops_pop_each_member_once() {
    let dir = temp_dir();
    let server = Server::start_serve(
        &dir.path().join("store"),
        &["--size", "256M", "--segment-size", "8M"],
    );
    let mut c = Resp::connect(&server);
    let pad = "z".repeat(100);
    for i in 0..400 {
        c.call(&["ZADD", "z", &i.to_string(), &format!("seed{i}{pad}")]);
    }
    let workers: Vec<_> = (0..CLIENTS)
        .map(|w| {
            let mut c = Resp::connect(&server);
            let pad = pad.clone();
            thread::spawn(move || {
                let (mut added, mut popped) = (Vec::new(), Vec::new());
                for i in 0..200 {
                    let m = format!("w{w}-{i}{pad}");
                    let score = ((i * 7919 + w * 13) % 1000).to_string();
                    assert_eq!(int(c.call(&["ZADD", "z", &score, &m])), 1, "new {m}");
                    added.push(m);
                    if i % 2 == 0 {
                        let cmd = if i % 4 == 0 { "ZPOPMIN" } else { "ZPOPMAX" };
                        let got = bulks(c.call(&[cmd, "z", "2"]));
                        // member, score, member, score: in pop order.
                        let scores: Vec<f64> = got
                            .iter()
                            .skip(1)
                            .step_by(2)
                            .map(|s| s.parse().unwrap())
                            .collect();
                        let ordered = if cmd == "ZPOPMIN" {
                            scores.windows(2).all(|p| p[0] <= p[1])
                        } else {
                            scores.windows(2).all(|p| p[0] >= p[1])
                        };
                        assert!(ordered, "{cmd} answered {scores:?}");
                        popped.extend(got.into_iter().step_by(2));
                    }
                }
                (added, popped)
            })
        })
        .collect();
    let done: Vec<_> = workers.into_iter().map(|t| t.join().unwrap()).collect();
    let remaining = bulks(c.call(&["ZRANGE", "z", "0", "-1"]));
    assert_eq!(int(c.call(&["ZCARD", "z"])), remaining.len() as i64);
    let seeds = (0..400).map(|i| format!("seed{i}{pad}"));
    assert_each_taken_or_kept_once(seeds, done, &remaining);
}

/// SPOPs that empty a paged set while other clients add to it, at once
/// (combined batches whose steps after the emptying one run alone, on the
/// compact set that follows): every member is popped once or still
/// there once.
#[test]
fn combined_spops_that_empty_a_paged_set_lose_and_repeat_nothing() {
    let dir = temp_dir();
    let server = Server::start_serve(
        &dir.path().join("store"),
        &["--size", "256M", "--segment-size", "8M"],
    );
    let mut c = Resp::connect(&server);
    let pad = "s".repeat(100);
    for i in 0..400 {
        c.call(&["SADD", "s", &format!("seed{i}{pad}")]);
    }
    let workers: Vec<_> = (0..CLIENTS)
        .map(|w| {
            let mut c = Resp::connect(&server);
            let pad = pad.clone();
            thread::spawn(move || {
                let (mut added, mut popped) = (Vec::new(), Vec::new());
                for i in 0..60 {
                    popped.extend(bulks(c.call(&["SPOP", "s"])));
                    if i % 3 == 0 {
                        let m = format!("w{w}-{i}{pad}");
                        assert_eq!(int(c.call(&["SADD", "s", &m])), 1, "new {m}");
                        added.push(m);
                    }
                }
                (added, popped)
            })
        })
        .collect();
    let done: Vec<_> = workers.into_iter().map(|t| t.join().unwrap()).collect();
    let remaining = bulks(c.call(&["SMEMBERS", "s"]));
    assert_eq!(int(c.call(&["SCARD", "s"])), remaining.len() as i64);
    let seeds = (0..400).map(|i| format!("seed{i}{pad}"));
    assert_each_taken_or_kept_once(seeds, done, &remaining);
}

/// Every element put in (`seeds`, and each worker's first list) was
/// taken once (each worker's second list: popped) or is in `remaining`
/// once, and nothing else was taken or is there.
fn assert_each_taken_or_kept_once(
    seeds: impl Iterator<Item = String>,
    workers: Vec<(Vec<String>, Vec<String>)>,
    remaining: &[String],
) {
    let mut count: BTreeMap<String, i64> = BTreeMap::new();
    for e in seeds {
        *count.entry(e).or_default() += 1;
    }
    for (put, taken) in workers {
        for e in put {
            *count.entry(e).or_default() += 1;
        }
        for e in taken {
            *count.entry(e).or_default() -= 1;
        }
    }
    for e in remaining {
        *count.entry(e.clone()).or_default() -= 1;
    }
    assert!(
        count.values().all(|&n| n == 0),
        "every element popped or kept once"
    );
}
