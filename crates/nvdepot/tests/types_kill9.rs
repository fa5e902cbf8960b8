//! `kill -9` of `nvdepot serve` under a load of every collection type
//! (issue 36): writers each own a list, a hash, a set, a sorted set, a
//! stream and a counter, and record every reply they got; after the kill
//! and a restart, every acknowledged write is there, and nothing is there
//! that was not at least sent (a write in flight at the kill may or may
//! not have landed: the one write per writer that was sent without a
//! reply).
//!
//! `NVDEPOT_TYPES_KILLS` rounds (default 2), each a new store.

mod common;

use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{env_or, temp_dir, Resp, Server};
use nvdepot_resp::Value;

const ARGS: &[&str] = &["--size", "256M", "--segment-size", "8M"];

/// What one writer saw acknowledged.
#[derive(Default, Clone, Debug)]
struct Acked {
    /// The list's length after its last acknowledged RPUSH (of i values
    /// in order), and the pushes sent (acknowledged or not).
    list_len: i64,
    list_sent: Vec<u64>,
    hash: Vec<u64>,
    set: Vec<u64>,
    zset: Vec<u64>,
    stream: Vec<u64>,
    counter: i64,
    /// The command sent without a reply when the server died, if any.
    in_flight: Option<u64>,
}

fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Integer(n) => Some(*n),
        _ => None,
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::Bulk(Some(b)) | Value::Simple(b) => String::from_utf8_lossy(b).into_owned(),
        other => format!("{other:?}"),
    }
}

/// Reads one reply, or `None` once the server is gone.
fn reply(c: &mut Resp) -> Option<Value> {
    loop {
        if let Ok(Some((v, n))) = nvdepot_resp::parse_value(&c.buf) {
            c.buf.drain(..n);
            return Some(v);
        }
        let mut chunk = [0u8; 4096];
        match c.stream.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => c.buf.extend_from_slice(&chunk[..n]),
        }
    }
}

fn writer(mut c: Resp, w: usize, stop: Arc<AtomicBool>, acked: Arc<Mutex<Acked>>) {
    let mut i = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let n = i.to_string();
        let cmd: Vec<String> = match i % 6 {
            0 => vec!["RPUSH".into(), format!("list{w}"), n.clone()],
            1 => vec![
                "HSET".into(),
                format!("hash{w}"),
                format!("f{i}"),
                n.clone(),
            ],
            2 => vec!["SADD".into(), format!("set{w}"), n.clone()],
            3 => vec![
                "ZADD".into(),
                format!("zset{w}"),
                n.clone(),
                format!("m{i}"),
            ],
            4 => vec![
                "XADD".into(),
                format!("stream{w}"),
                format!("{}-1", i + 1),
                "f".into(),
                // Long enough entries that the stream goes paged
                // (past 16 KiB) within a round.
                format!("{n}:{}", "x".repeat(300)),
            ],
            _ => vec![
                "HINCRBY".into(),
                format!("counter{w}"),
                "c".into(),
                "1".into(),
            ],
        };
        let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
        c.send(&args);
        if i.is_multiple_of(6) {
            acked.lock().unwrap().list_sent.push(i);
        }
        acked.lock().unwrap().in_flight = Some(i);
        let Some(v) = reply(&mut c) else {
            return;
        };
        let mut a = acked.lock().unwrap();
        a.in_flight = None;
        match i % 6 {
            0 => a.list_len = int(&v).expect("RPUSH answers the length"),
            1 => a.hash.push(i),
            2 => a.set.push(i),
            3 => a.zset.push(i),
            4 => {
                assert_eq!(text(&v), format!("{}-1", i + 1), "XADD's ID");
                a.stream.push(i);
            }
            _ => a.counter = int(&v).expect("HINCRBY answers the count"),
        }
        i += 1;
    }
}

fn verify(c: &mut Resp, w: usize, a: &Acked) {
    // The list: a prefix of the pushes sent, at least the acknowledged.
    let Value::Array(Some(items)) = c.call(&["LRANGE", &format!("list{w}"), "0", "-1"]) else {
        panic!("list{w} is not a list");
    };
    let got: Vec<String> = items.iter().map(text).collect();
    assert!(
        got.len() as i64 >= a.list_len && got.len() <= a.list_sent.len(),
        "list{w}: {} elements, {} acknowledged, {} sent",
        got.len(),
        a.list_len,
        a.list_sent.len()
    );
    for (e, sent) in got.iter().zip(&a.list_sent) {
        assert_eq!(*e, sent.to_string(), "list{w} out of order");
    }
    for &i in &a.hash {
        let v = c.call(&["HGET", &format!("hash{w}"), &format!("f{i}")]);
        assert_eq!(text(&v), i.to_string(), "hash{w} lost f{i}");
    }
    for &i in &a.set {
        let v = c.call(&["SISMEMBER", &format!("set{w}"), &i.to_string()]);
        assert_eq!(v, Value::Integer(1), "set{w} lost {i}");
    }
    for &i in &a.zset {
        let v = c.call(&["ZSCORE", &format!("zset{w}"), &format!("m{i}")]);
        assert_eq!(text(&v), i.to_string(), "zset{w} lost m{i}");
    }
    let Value::Array(Some(entries)) = c.call(&["XRANGE", &format!("stream{w}"), "-", "+"]) else {
        panic!("stream{w} unreadable");
    };
    let ids: Vec<String> = entries
        .iter()
        .map(|e| match e {
            Value::Array(Some(parts)) => text(&parts[0]),
            other => panic!("stream{w} entry {other:?}"),
        })
        .collect();
    for &i in &a.stream {
        assert!(ids.contains(&format!("{}-1", i + 1)), "stream{w} lost {i}");
    }
    let count = c.call(&["HGET", &format!("counter{w}"), "c"]);
    let count: i64 = if a.counter == 0 && count == Value::Bulk(None) {
        0
    } else {
        text(&count).parse().expect("a count")
    };
    let in_flight_counter = a.in_flight.is_some_and(|i| i % 6 == 5);
    assert!(
        count == a.counter || (in_flight_counter && count == a.counter + 1),
        "counter{w}: {count}, acknowledged {}",
        a.counter
    );
    // Nothing was written that was not sent: the sets hold only sent
    // values (acknowledged, or the one in flight).
    let Value::Array(Some(members)) = c.call(&["SMEMBERS", &format!("set{w}")]) else {
        panic!("set{w}");
    };
    for m in members {
        let m: u64 = text(&m).parse().expect("a number");
        assert!(
            a.set.contains(&m) || a.in_flight == Some(m),
            "set{w} holds {m}, never acknowledged"
        );
    }
}

#[test]
fn acknowledged_collection_writes_survive_kill_9() {
    let rounds: usize = env_or("NVDEPOT_TYPES_KILLS", 2);
    for round in 0..rounds {
        let dir = temp_dir();
        let data = dir.path().join("store");
        let server = Server::start_serve(&data, ARGS);
        let stop = Arc::new(AtomicBool::new(false));
        let acked: Vec<Arc<Mutex<Acked>>> = (0..4).map(|_| Arc::default()).collect();
        let writers: Vec<_> = (0..4)
            .map(|w| {
                let c = Resp::connect(&server);
                let (stop, a) = (stop.clone(), acked[w].clone());
                std::thread::spawn(move || writer(c, w, stop, a))
            })
            .collect();
        std::thread::sleep(Duration::from_millis(300 + 200 * round as u64));
        server.kill_9();
        stop.store(true, Ordering::Relaxed);
        for w in writers {
            w.join().unwrap();
        }
        let server = Server::start_serve(&data, ARGS);
        let mut c = Resp::connect(&server);
        let (mut total, mut longest) = (0, 0);
        for (w, a) in acked.iter().enumerate() {
            let a = a.lock().unwrap().clone();
            total += a.hash.len() + a.set.len() + a.zset.len() + a.stream.len();
            longest = longest.max(a.stream.len());
            verify(&mut c, w, &a);
        }
        assert!(total > 0, "round {round}: nothing was acknowledged");
        eprintln!(
            "types_kill9: round {round}: {total} acknowledged collection writes, all there \
             (longest stream: {longest} entries of ~310 bytes; paged past ~50)"
        );
        assert_eq!(server.terminate(), 0);
    }
}

/// What a queue's user saw acknowledged: values `0..pushed` pushed at
/// the tail in order, `0..popped` popped from the head in order, and
/// how many the command in flight at the kill would have pushed or
/// popped.
#[derive(Default, Clone, Debug)]
struct Queue {
    pushed: u64,
    popped: u64,
    in_flight_push: u64,
    in_flight_pop: u64,
}

fn value(i: u64) -> String {
    format!("{i:012}")
}

/// Fills `q` past the paged threshold, then pushes 1-4 values and pops
/// 1-3 by turns, checking every reply against the model.
fn queue_user(mut c: Resp, q: String, stop: Arc<AtomicBool>, seen: Arc<Mutex<Queue>>) {
    let fill: Vec<String> = (0..3000).map(value).collect();
    let mut args = vec!["RPUSH", &q];
    args.extend(fill.iter().map(String::as_str));
    c.send(&args);
    assert_eq!(reply(&mut c), Some(Value::Integer(3000)));
    seen.lock().unwrap().pushed = 3000;
    let mut i = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let (pushed, popped) = {
            let s = seen.lock().unwrap();
            (s.pushed, s.popped)
        };
        if i % 3 != 2 {
            let k = i % 4 + 1;
            let vals: Vec<String> = (pushed..pushed + k).map(value).collect();
            let mut args = vec!["RPUSH", &q];
            args.extend(vals.iter().map(String::as_str));
            seen.lock().unwrap().in_flight_push = k;
            c.send(&args);
            let Some(v) = reply(&mut c) else { return };
            assert_eq!(
                int(&v),
                Some((pushed + k - popped) as i64),
                "{q}: RPUSH's length"
            );
            let mut s = seen.lock().unwrap();
            (s.pushed, s.in_flight_push) = (pushed + k, 0);
        } else {
            let k = i % 3 + 1;
            seen.lock().unwrap().in_flight_pop = k;
            c.send(&["LPOP", &q, &k.to_string()]);
            let Some(v) = reply(&mut c) else { return };
            let Value::Array(Some(items)) = v else {
                panic!("{q}: LPOP answered {v:?}");
            };
            for (n, e) in items.iter().enumerate() {
                assert_eq!(
                    text(e),
                    value(popped + n as u64),
                    "{q}: popped out of order"
                );
            }
            let mut s = seen.lock().unwrap();
            (s.popped, s.in_flight_pop) = (popped + items.len() as u64, 0);
        }
        i += 1;
    }
}

/// After the restart: queue `u` is exactly the values pushed and not
/// popped, but for the one command in flight. Returns the operations
/// acknowledged.
fn verify_queue(c: &mut Resp, u: usize, s: &Queue) -> u64 {
    let Value::Array(Some(items)) = c.call(&["LRANGE", &format!("queue{u}"), "0", "-1"]) else {
        panic!("queue{u} is not a list");
    };
    let got: Vec<String> = items.iter().map(text).collect();
    let first: u64 = got
        .first()
        .map_or(s.popped, |v| v.parse().expect("a number"));
    assert!(
        first >= s.popped && first <= s.popped + s.in_flight_pop,
        "queue{u}: starts at {first}, {s:?}"
    );
    let end = first + got.len() as u64;
    assert!(
        end >= s.pushed && end <= s.pushed + s.in_flight_push,
        "queue{u}: ends at {end}, {s:?}"
    );
    for (n, e) in got.iter().enumerate() {
        assert_eq!(*e, value(first + n as u64), "queue{u}: a gap or a stranger");
    }
    let llen = c.call(&["LLEN", &format!("queue{u}")]);
    assert_eq!(int(&llen), Some(got.len() as i64), "queue{u}: LLEN");
    s.pushed + s.popped
}

/// Rounds of: three users (each on its own key: two on one key would
/// break the models), `kill -9` of the server under them, a restart, and
/// `verify` of what each saw acknowledged; the collections must have
/// been paged. Returns nothing: every check asserts.
fn kill_rounds<S: Default + Clone + Send + 'static>(
    what: &str,
    user: fn(Resp, String, Arc<AtomicBool>, Arc<Mutex<S>>),
    verify: fn(&mut Resp, usize, &S) -> u64,
) {
    let rounds: usize = env_or("NVDEPOT_TYPES_KILLS", 2);
    for round in 0..rounds {
        let dir = temp_dir();
        let data = dir.path().join("store");
        let server = Server::start_serve(&data, ARGS);
        let stop = Arc::new(AtomicBool::new(false));
        let seen: Vec<Arc<Mutex<S>>> = (0..3).map(|_| Arc::default()).collect();
        let users: Vec<_> = (0..3)
            .map(|u| {
                let c = Resp::connect(&server);
                let (stop, s) = (stop.clone(), seen[u].clone());
                let key = format!("{what}{u}");
                std::thread::spawn(move || user(c, key, stop, s))
            })
            .collect();
        std::thread::sleep(Duration::from_millis(400 + 300 * round as u64));
        server.kill_9();
        stop.store(true, Ordering::Relaxed);
        for u in users {
            u.join().unwrap();
        }
        let server = Server::start_serve(&data, ARGS);
        let mut c = Resp::connect(&server);
        let mut ops = 0;
        for (u, s) in seen.iter().enumerate() {
            let s = s.lock().unwrap().clone();
            ops += verify(&mut c, u, &s);
        }
        let Value::Bulk(Some(info)) = c.call(&["INFO", "nvdepot"]) else {
            panic!("INFO nvdepot");
        };
        let info = String::from_utf8_lossy(&info).into_owned();
        assert!(
            !info.contains("collection_pages:0\r"),
            "the {what}s are paged:\n{info}"
        );
        eprintln!(
            "types_kill9: round {round}: {ops} acknowledged {what} writes, all as acknowledged"
        );
        assert_eq!(server.terminate(), 0);
    }
}

/// `kill -9` while clients push to and pop from long (paged) lists: after
/// the restart each list is exactly the values pushed and not popped,
/// allowing only for the one command in flight.
#[test]
fn a_paged_queue_survives_kill_9() {
    kill_rounds("queue", queue_user, verify_queue);
}

/// What a hash's user saw acknowledged: fields `f{n}` set for `n` in
/// `deleted..set` (those below `deleted` deleted again), and the field the
/// command in flight at the kill would have set or deleted.
#[derive(Default, Clone, Debug)]
struct HashSeen {
    set: u64,
    deleted: u64,
    in_flight: Option<u64>,
}

/// Fills `h` past the paged threshold, then sets a new field and deletes
/// the oldest by turns.
fn hash_user(mut c: Resp, h: String, stop: Arc<AtomicBool>, seen: Arc<Mutex<HashSeen>>) {
    let fill: Vec<String> = (0..3000)
        .flat_map(|n| [format!("f{n}"), value(n)])
        .collect();
    let mut args = vec!["HSET", &h];
    args.extend(fill.iter().map(String::as_str));
    c.send(&args);
    assert_eq!(reply(&mut c), Some(Value::Integer(3000)));
    seen.lock().unwrap().set = 3000;
    let mut i = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let (set, deleted) = {
            let s = seen.lock().unwrap();
            (s.set, s.deleted)
        };
        let add = i % 3 != 2;
        let n = if add { set } else { deleted };
        seen.lock().unwrap().in_flight = Some(n);
        if add {
            c.send(&["HSET", &h, &format!("f{n}"), &value(n)]);
        } else {
            c.send(&["HDEL", &h, &format!("f{n}")]);
        }
        let Some(v) = reply(&mut c) else { return };
        assert_eq!(
            v,
            Value::Integer(1),
            "{h}: {} f{n}",
            if add { "HSET" } else { "HDEL" }
        );
        let mut s = seen.lock().unwrap();
        if add {
            s.set += 1;
        } else {
            s.deleted += 1;
        }
        s.in_flight = None;
        i += 1;
    }
}

/// After the restart: hash `u` holds exactly the fields acknowledged set
/// and not deleted (but for the command in flight), with their values.
fn verify_hash(c: &mut Resp, u: usize, s: &HashSeen) -> u64 {
    let h = format!("hash{u}");
    for n in 0..s.set + 1 {
        let got = c.call(&["HGET", &h, &format!("f{n}")]);
        let maybe = s.in_flight == Some(n);
        if n < s.deleted {
            assert!(
                got == Value::Bulk(None) || maybe,
                "{h}: f{n} deleted, yet {got:?}"
            );
        } else if n < s.set {
            assert!(
                text(&got) == value(n) || (maybe && got == Value::Bulk(None)),
                "{h}: f{n} lost: {got:?} ({s:?})"
            );
        } else {
            assert!(
                got == Value::Bulk(None) || maybe,
                "{h}: f{n} never set, yet {got:?}"
            );
        }
    }
    let len = int(&c.call(&["HLEN", &h])).expect("HLEN");
    let want = (s.set - s.deleted) as i64;
    assert!(
        (len - want).abs() <= i64::from(s.in_flight.is_some()),
        "{h}: HLEN {len}, {want} acknowledged ({s:?})"
    );
    s.set + s.deleted
}

/// `kill -9` while clients set and delete fields of large (paged)
/// hashes: after the restart each holds exactly the fields acknowledged
/// set and not deleted (but for the command in flight), with their values.
#[test]
fn a_paged_hash_survives_kill_9() {
    kill_rounds("hash", hash_user, verify_hash);
}

/// What a sorted set's user saw acknowledged: members `m{n}` (score n)
/// added for `n` in `popped..added` (those below `popped` popped again
/// by ZPOPMIN), and whether the command in flight at the kill was an add.
#[derive(Default, Clone, Debug)]
struct ZSetSeen {
    added: u64,
    popped: u64,
    in_flight: Option<bool>,
}

fn member(n: u64) -> String {
    format!("m{n:08}:{}", "z".repeat((n % 40) as usize))
}

/// Fills `z` past the paged threshold, then adds a new highest member and
/// pops the lowest by turns (every pop moves the tree's first leaf; every
/// add its last).
fn zset_user(mut c: Resp, z: String, stop: Arc<AtomicBool>, seen: Arc<Mutex<ZSetSeen>>) {
    let fill: Vec<String> = (0..3000).flat_map(|n| [n.to_string(), member(n)]).collect();
    let mut args = vec!["ZADD", &z];
    args.extend(fill.iter().map(String::as_str));
    c.send(&args);
    assert_eq!(reply(&mut c), Some(Value::Integer(3000)));
    seen.lock().unwrap().added = 3000;
    let mut i = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let (added, popped) = {
            let s = seen.lock().unwrap();
            (s.added, s.popped)
        };
        let add = i % 3 != 2;
        seen.lock().unwrap().in_flight = Some(add);
        if add {
            c.send(&["ZADD", &z, &added.to_string(), &member(added)]);
        } else {
            c.send(&["ZPOPMIN", &z]);
        }
        let Some(v) = reply(&mut c) else { return };
        if add {
            assert_eq!(v, Value::Integer(1), "{z}: ZADD {added}");
        } else {
            let want = Value::Array(Some(vec![
                Value::Bulk(Some(member(popped).into_bytes())),
                Value::Bulk(Some(popped.to_string().into_bytes())),
            ]));
            assert_eq!(v, want, "{z}: ZPOPMIN");
        }
        let mut s = seen.lock().unwrap();
        if add {
            s.added += 1;
        } else {
            s.popped += 1;
        }
        s.in_flight = None;
        i += 1;
    }
}

/// After the restart: sorted set `u` holds exactly the members
/// acknowledged added and not popped, in order, with their scores (the
/// command in flight may or may not have landed), and ranks and scores
/// answer from its pages as its range does.
fn verify_zset(c: &mut Resp, u: usize, s: &ZSetSeen) -> u64 {
    let z = format!("zset{u}");
    let Value::Array(Some(all)) = c.call(&["ZRANGE", &z, "0", "-1", "WITHSCORES"]) else {
        panic!("{z}: ZRANGE");
    };
    let got: Vec<(String, String)> = all.chunks(2).map(|p| (text(&p[0]), text(&p[1]))).collect();
    let lo = match got.first() {
        Some((m, _)) => m[1..9].parse::<u64>().expect("a member's number"),
        None => s.popped,
    };
    let hi = lo + got.len() as u64;
    let lo_ok = lo == s.popped || (s.in_flight == Some(false) && lo == s.popped + 1);
    let hi_ok = hi == s.added || (s.in_flight == Some(true) && hi == s.added + 1);
    assert!(
        lo_ok && hi_ok,
        "{z}: members {lo}..{hi}, acknowledged {s:?}"
    );
    for (i, (m, score)) in got.iter().enumerate() {
        let n = lo + i as u64;
        assert_eq!(
            (m.as_str(), score.as_str()),
            (member(n).as_str(), n.to_string().as_str()),
            "{z}"
        );
    }
    for n in [lo, (lo + hi) / 2, hi.saturating_sub(1)] {
        if n < hi {
            let rank = c.call(&["ZRANK", &z, &member(n)]);
            assert_eq!(int(&rank), Some((n - lo) as i64), "{z}: ZRANK m{n}");
            let score = c.call(&["ZSCORE", &z, &member(n)]);
            assert_eq!(text(&score), n.to_string(), "{z}: ZSCORE m{n}");
        }
    }
    let card = c.call(&["ZCARD", &z]);
    assert_eq!(int(&card), Some(got.len() as i64), "{z}: ZCARD");
    s.added + s.popped
}

/// `kill -9` while clients add to and pop from large (paged) sorted sets:
/// after the restart each holds exactly the members acknowledged added
/// and not popped (but for the command in flight), with their scores.
#[test]
fn a_paged_sorted_set_survives_kill_9() {
    kill_rounds("zset", zset_user, verify_zset);
}

/// Items moved between two keys per mover ([`move_rounds`]): 300, each
/// 125 bytes, so both keys are paged collections.
const MOVED: usize = 300;

/// The `i`th item of a mover's pair of keys.
fn moved_item(i: usize) -> String {
    format!("{i:04}-{}", "m".repeat(120))
}

/// `kill -9` rounds while 3 clients each move items between their keys
/// `a{u}` and `b{u}`: `fill` (RPUSH, SADD) puts the [`MOVED`] items into
/// `a{u}`, `step(a, b, n)` is the mover's `n`th command (each reply must
/// pass `moved`), `read` (LRANGE … 0 -1, SMEMBERS) lists a key after the
/// restart: every item must then be in one of its two keys exactly once.
fn move_rounds(
    what: &str,
    fill: &'static str,
    step: fn(&str, &str, usize) -> Vec<String>,
    moved: fn(&Value) -> bool,
    read: &[&str],
) {
    let rounds: usize = env_or("NVDEPOT_TYPES_KILLS", 2);
    for round in 0..rounds {
        let dir = temp_dir();
        let data = dir.path().join("store");
        let server = Server::start_serve(&data, ARGS);
        let mut c = Resp::connect(&server);
        for u in 0..3 {
            for chunk in (0..MOVED).collect::<Vec<_>>().chunks(100) {
                let mut args = vec![fill.to_string(), format!("a{u}")];
                args.extend(chunk.iter().map(|&i| moved_item(i)));
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                assert!(int(&c.call(&args)).is_some());
            }
        }
        let stop = Arc::new(AtomicBool::new(false));
        let movers: Vec<_> = (0..3)
            .map(|u| {
                let mut c = Resp::connect(&server);
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let (a, b) = (format!("a{u}"), format!("b{u}"));
                    let mut moves = 0usize;
                    while !stop.load(Ordering::Relaxed) {
                        let args = step(&a, &b, moves);
                        let args: Vec<&str> = args.iter().map(String::as_str).collect();
                        c.send(&args);
                        match reply(&mut c) {
                            Some(v) if moved(&v) => moves += 1,
                            Some(v) => panic!("mover {u}: {v:?}"),
                            None => return moves,
                        }
                    }
                    moves
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(500 + 300 * round as u64));
        server.kill_9();
        stop.store(true, Ordering::Relaxed);
        let moves: Vec<usize> = movers.into_iter().map(|m| m.join().unwrap()).collect();
        let server = Server::start_serve(&data, ARGS);
        let mut c = Resp::connect(&server);
        for u in 0..3 {
            let mut all = Vec::new();
            for key in [format!("a{u}"), format!("b{u}")] {
                let mut args = read.to_vec();
                args.insert(1, &key);
                let Value::Array(Some(items)) = c.call(&args) else {
                    panic!("{} {key}", read[0]);
                };
                all.extend(items.iter().map(text));
            }
            all.sort();
            let want: Vec<String> = (0..MOVED).map(moved_item).collect();
            assert_eq!(
                all.len(),
                MOVED,
                "round {round} mover {u}: {} items",
                all.len()
            );
            assert_eq!(all, want, "round {round} mover {u}");
        }
        eprintln!("types_kill9: round {round}: {what} moves {moves:?}, every item once");
        assert_eq!(server.terminate(), 0);
    }
}

/// `kill -9` while 3 clients move elements with RPOPLPUSH and LMOVE
/// between two long (paged) lists each: after the restart every element
/// is in one of its two lists exactly once (LMOVE's pop and push are one
/// crash-atomic batch: none lost in flight, none doubled).
#[test]
fn lmove_never_loses_an_element_in_flight_across_kill_9() {
    let step = |a: &str, b: &str, n: usize| {
        let (from, to) = if n % 700 < 350 { (a, b) } else { (b, a) };
        let cmd: &[&str] = if n.is_multiple_of(2) {
            &["RPOPLPUSH", from, to]
        } else {
            &["LMOVE", from, to, "LEFT", "RIGHT"]
        };
        cmd.iter().map(|s| s.to_string()).collect()
    };
    move_rounds("list", "RPUSH", step, |_| true, &["LRANGE", "0", "-1"]);
}

/// `kill -9` while 3 clients move members with SMOVE between two long
/// (paged) sets each: after the restart every member is in one of its two
/// sets exactly once (SMOVE's removal and addition are one crash-atomic
/// commit).
#[test]
fn smove_never_loses_a_member_in_flight_across_kill_9() {
    // Each member over to b, then back to a, in turn.
    let step = |a: &str, b: &str, n: usize| {
        let (from, to) = if (n / MOVED).is_multiple_of(2) {
            (a, b)
        } else {
            (b, a)
        };
        vec![
            "SMOVE".into(),
            from.into(),
            to.into(),
            moved_item(n % MOVED),
        ]
    };
    let moved = |v: &Value| *v == Value::Integer(1);
    move_rounds("set", "SADD", step, moved, &["SMEMBERS"]);
}
