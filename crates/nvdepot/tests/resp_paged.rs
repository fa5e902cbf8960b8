//! Paged collections (issue 36): long lists and large hashes side by side
//! with a stock redis-server.
//!
//! Lists (the paged layout of `crates/redis/src/list_pages.rs`): grown by bulk pushes
//! to thousands of elements, far past the size at which nvdepot pages
//! them, with elements from a small vocabulary of sizes from 0 bytes to
//! 20 KiB (so pages hold from one element to thousands), and every list
//! command on them: pushes and pops at both ends with counts, LINDEX,
//! LRANGE and LSET at indexes across the whole list and past it, LTRIM,
//! LREM, LINSERT, LPOS, LMOVE/RPOPLPUSH (also onto itself), LMPOP, and
//! DEL, RENAME, COPY, MOVE, EXPIRE, TYPE and WRONGTYPE across them.
//!
//! Asserted: every reply equal to redis-server's; after each seed every
//! list equal (LRANGE 0 -1), in both databases; the server's RSS bounded;
//! no panic; the lists paged (INFO nvdepot `collection_pages`); and, once
//! every list is deleted and the sweeper (every second here) had its
//! turn, no page left behind.
//!
//! Hashes (`crates/redis/src/hash_pages.rs`): grown by HSETs of up to
//! 600 fields to thousands of fields (values of 0 B to 5 KiB), with every
//! hash command but HSCAN on them (HGETALL, HKEYS, HVALS compared as
//! multisets: Redis's order is its hash table's; HRANDFIELD by size),
//! HINCRBY/HINCRBYFLOAT on numeric fields, and DEL, RENAME, COPY, EXPIRE,
//! OBJECT ENCODING across them; after each seed every hash equal.
//!
//! `NVDEPOT_LISTS_OPS` (`NVDEPOT_HASHES_OPS`) commands per seed (default
//! 2 000), `NVDEPOT_LISTS_SEEDS` (`NVDEPOT_HASHES_SEEDS`) seeds (default
//! 2), `NVDEPOT_LISTS_SEED0` the first.

mod common;
#[path = "shapes/resp.rs"]
mod shapes;

use nvdepot_resp::Value;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[path = "shapes/paged.rs"]
mod paged;

use common::{env_or, temp_dir, RefServer, Server};
use paged::{differential, pages};
use shapes::{brief, pipeline, prepare, show, Cmd, Conn, RSS_BOUND};

const KEYS: [&str; 4] = ["la", "lb", "lc", "{la}d"];

struct ListGen {
    rng: StdRng,
    vocab: Vec<Vec<u8>>,
}

impl ListGen {
    fn new(seed: u64) -> ListGen {
        let mut rng = StdRng::seed_from_u64(seed);
        let vocab = (0..40)
            .map(|i| {
                let len = match i % 10 {
                    0 => 0,
                    1..=6 => rng.gen_range(1..24),
                    7 | 8 => rng.gen_range(100..2_000),
                    _ => rng.gen_range(5_000..20_000),
                };
                let mut e = format!("e{i}-").into_bytes();
                e.resize(len.max(e.len()), b'a' + (i % 26) as u8);
                if len == 0 {
                    e.clear();
                }
                e
            })
            .collect();
        ListGen { rng, vocab }
    }

    fn key(&mut self) -> Vec<u8> {
        KEYS[self.rng.gen_range(0..KEYS.len())].as_bytes().to_vec()
    }

    /// Mostly short elements, so lists grow long; the big ones now and
    /// then.
    fn elem(&mut self) -> Vec<u8> {
        let i = if self.rng.gen_bool(0.9) {
            let small = [1, 2, 3, 4, 5, 6, 11, 12, 13, 14, 15, 16];
            small[self.rng.gen_range(0..small.len())]
        } else {
            self.rng.gen_range(0..self.vocab.len())
        };
        self.vocab[i].clone()
    }

    fn index(&mut self, len: i64) -> Vec<u8> {
        let span = len + 5;
        let i = match self.rng.gen_range(0..4) {
            0 => self.rng.gen_range(0..3),
            1 => -self.rng.gen_range(1..4),
            _ => self.rng.gen_range(-span..=span),
        };
        i.to_string().into_bytes()
    }

    /// One command, knowing (from redis-server) the key's length.
    fn command(&mut self, len_of: &mut impl FnMut(&[u8]) -> i64) -> Cmd {
        let key = self.key();
        let len = len_of(&key);
        let s = |x: &str| x.as_bytes().to_vec();
        let end = |g: &mut ListGen| s(if g.rng.gen_bool(0.5) { "LEFT" } else { "RIGHT" });
        match self.rng.gen_range(0..100) {
            0..=24 => {
                let name = ["RPUSH", "LPUSH", "RPUSHX", "LPUSHX"][self.rng.gen_range(0..4)];
                let n = if self.rng.gen_bool(0.3) {
                    self.rng.gen_range(100..600)
                } else {
                    self.rng.gen_range(1..8)
                };
                let mut c = vec![s(name), key];
                c.extend((0..n).map(|_| self.elem()));
                c
            }
            25..=34 => {
                let name = if self.rng.gen_bool(0.5) {
                    "LPOP"
                } else {
                    "RPOP"
                };
                let mut c = vec![s(name), key];
                if self.rng.gen_bool(0.5) {
                    let n = if self.rng.gen_bool(0.2) {
                        self.rng.gen_range(0..800)
                    } else {
                        self.rng.gen_range(0..4)
                    };
                    c.push(n.to_string().into_bytes());
                }
                c
            }
            35..=44 => vec![s("LINDEX"), key, self.index(len)],
            45..=54 => {
                let (a, b) = (self.index(len), self.index(len));
                vec![s("LRANGE"), key, a, b]
            }
            55..=59 => {
                let e = self.elem();
                vec![s("LSET"), key, self.index(len), e]
            }
            60..=63 => {
                let a = self.rng.gen_range(-3..((len / 10) + 3)).to_string();
                let b = (-self.rng.gen_range(1..((len / 10) + 3))).to_string();
                vec![s("LTRIM"), key, s(&a), s(&b)]
            }
            64..=66 => {
                let n = self.rng.gen_range(-3..4).to_string();
                let e = self.elem();
                vec![s("LREM"), key, s(&n), e]
            }
            67..=68 => {
                let w = if self.rng.gen_bool(0.5) {
                    "BEFORE"
                } else {
                    "AFTER"
                };
                let (p, e) = (self.elem(), self.elem());
                vec![s("LINSERT"), key, s(w), p, e]
            }
            69..=71 => {
                let mut c = vec![s("LPOS"), key, self.elem()];
                if self.rng.gen_bool(0.5) {
                    c.extend([
                        s("RANK"),
                        self.rng.gen_range(-3..4i64).max(1).to_string().into_bytes(),
                    ]);
                }
                if self.rng.gen_bool(0.5) {
                    c.extend([
                        s("COUNT"),
                        self.rng.gen_range(0..5).to_string().into_bytes(),
                    ]);
                }
                c
            }
            72..=77 => {
                let dst = self.key();
                if self.rng.gen_bool(0.3) {
                    vec![s("RPOPLPUSH"), key, dst]
                } else {
                    vec![s("LMOVE"), key, dst, end(self), end(self)]
                }
            }
            78..=80 => {
                let other = self.key();
                let mut c = vec![s("LMPOP"), s("2"), key, other, end(self)];
                if self.rng.gen_bool(0.5) {
                    c.extend([
                        s("COUNT"),
                        self.rng.gen_range(1..300).to_string().into_bytes(),
                    ]);
                }
                c
            }
            81..=84 => vec![s("LLEN"), key],
            85 => vec![s("DEL"), key],
            86 => vec![s("RENAME"), key, self.key()],
            87 => vec![s("COPY"), key, self.key(), s("REPLACE")],
            88 => vec![s("EXPIRE"), key, s("1000")],
            89 => vec![s("PERSIST"), key],
            90 => vec![s("TYPE"), key],
            91 => vec![s("OBJECT"), s("ENCODING"), key],
            92 => vec![s("SET"), key, s("a string")],
            93 => vec![s("GET"), key],
            94 => vec![s("MOVE"), key, s("1")],
            95 => vec![s("EXISTS"), key],
            _ => vec![s("LLEN"), key],
        }
    }
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Integer(n) => *n,
        _ => 0,
    }
}

/// Every key's type and, for a list, its elements, in both databases.
fn snapshot(conn: &mut Conn) -> Vec<Value> {
    let mut cmds: Vec<Cmd> = Vec::new();
    for db in ["0", "1"] {
        cmds.push(vec![b"SELECT".to_vec(), db.as_bytes().to_vec()]);
        for k in KEYS {
            cmds.push(vec![b"TYPE".to_vec(), k.as_bytes().to_vec()]);
            cmds.push(vec![b"LLEN".to_vec(), k.as_bytes().to_vec()]);
            let all = ["LRANGE", k, "0", "-1"];
            cmds.push(all.iter().map(|a| a.as_bytes().to_vec()).collect());
        }
    }
    cmds.push(vec![b"SELECT".to_vec(), b"0".to_vec()]);
    pipeline(conn, &cmds)
}

#[test]
fn long_lists_answer_as_redis() {
    let Some(redis) = RefServer::redis_or_skip() else {
        return;
    };
    let dir = temp_dir();
    let server = Server::start_serve(
        &dir.path().join("store"),
        &[
            "--size",
            "1G",
            "--segment-size",
            "16M",
            "--expiry-sweep-secs",
            "1",
        ],
    );
    let ops: usize = env_or("NVDEPOT_LISTS_OPS", 2000);
    let seeds: u64 = env_or("NVDEPOT_LISTS_SEEDS", 2);
    let seed0: u64 = env_or("NVDEPOT_LISTS_SEED0", 0);
    let mut peak = 0;
    for seed in seed0..seed0 + seeds {
        let mut g = ListGen::new(seed);
        let (mut a, mut b) = (
            Conn::connect("redis-server", redis.addr),
            Conn::connect("nvdepot", server.addr),
        );
        prepare(&mut a, &mut b);
        let mut recent: Vec<String> = Vec::new();
        let mut longest = 0;
        for sent in 0..ops {
            let cmd = {
                let a = &mut a;
                let mut len_of = |k: &[u8]| {
                    let llen = vec![b"LLEN".to_vec(), k.to_vec()];
                    int(&pipeline(a, &[llen])[0])
                };
                g.command(&mut len_of)
            };
            let want = pipeline(&mut a, std::slice::from_ref(&cmd));
            let got = pipeline(&mut b, std::slice::from_ref(&cmd));
            if want != got {
                panic!(
                    "seed {seed}, command {sent}: {}\n redis-server: {}\n nvdepot:      {}\n \
                     before it:\n  {}",
                    show(&cmd),
                    brief(&want[0]),
                    brief(&got[0]),
                    recent.join("\n  ")
                );
            }
            if let Value::Integer(n) = want[0] {
                if cmd[0].ends_with(b"PUSH") || cmd[0].ends_with(b"PUSHX") {
                    longest = longest.max(n);
                }
            }
            recent.push(show(&cmd).chars().take(160).collect());
            let keep = recent.len().saturating_sub(12);
            recent.drain(..keep);
            if sent % 100 == 0 {
                peak = peak.max(server.rss());
                assert!(peak < RSS_BOUND, "RSS {peak} past {RSS_BOUND}");
            }
        }
        let (want, got) = (snapshot(&mut a), snapshot(&mut b));
        for (i, (w, g)) in want.iter().zip(&got).enumerate() {
            assert!(
                w == g,
                "seed {seed}: snapshot item {i} differs: {} vs {}",
                brief(w),
                brief(g)
            );
        }
        eprintln!(
            "resp_paged lists: seed {seed}: {ops} commands, every reply the same (longest list {longest})"
        );
        assert!(
            longest > 2_000,
            "the lists grew long enough to page ({longest})"
        );
        assert!(pages(&mut b) > 0, "some lists are paged");
    }
    // Every list gone: the sweeper drops every page.
    let mut b = Conn::connect("nvdepot", server.addr);
    let flush: Vec<Cmd> = ["0", "1"]
        .iter()
        .flat_map(|db| {
            let select = vec![b"SELECT".to_vec(), db.as_bytes().to_vec()];
            let del = std::iter::once(b"DEL".to_vec())
                .chain(KEYS.iter().map(|k| k.as_bytes().to_vec()))
                .collect();
            [select, del]
        })
        .collect();
    pipeline(&mut b, &flush);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while pages(&mut b) > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "{} pages never swept",
            pages(&mut b)
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    eprintln!("resp_paged lists: peak RSS {} MB", peak >> 20);
    let log = server.stderr.lock().unwrap().clone();
    assert!(
        !log.contains("panicked"),
        "the server logged a panic:\n{log}"
    );
}

fn text(v: &Value) -> String {
    match v {
        Value::Bulk(Some(b)) => String::from_utf8_lossy(b).into_owned(),
        other => panic!("not a bulk string: {other:?}"),
    }
}

/// Producers push to both ends of one paged list while consumers pop
/// from both ends (LPOP with a count, RPOP, BLPOP, LMOVE into a second
/// list) at once: every value comes out exactly once, none is lost or
/// duplicated, whatever the interleaving of the guarded page commits.
#[test]
fn many_clients_share_a_paged_queue() {
    use std::collections::HashMap;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let dir = temp_dir();
    let server = Server::start_serve(
        &dir.path().join("store"),
        &["--size", "1G", "--segment-size", "16M"],
    );
    let mut c = common::Resp::connect(&server);
    let pre: Vec<String> = (0..3000).map(|i| format!("pre-{i:08}")).collect();
    let mut args = vec!["RPUSH", "jobs"];
    args.extend(pre.iter().map(String::as_str));
    assert_eq!(c.call(&args), Value::Integer(3000));
    let producing = Arc::new(AtomicUsize::new(4));
    let producers: Vec<_> = (0..4)
        .map(|w| {
            let mut c = common::Resp::connect(&server);
            let producing = producing.clone();
            std::thread::spawn(move || {
                let mut made = Vec::new();
                let mut i = 0;
                while i < 1500 {
                    let k = (i % 3 + 1).min(1500 - i);
                    let vals: Vec<String> = (i..i + k).map(|j| format!("p{w}-{j:06}")).collect();
                    let push = if i % 2 == 0 { "RPUSH" } else { "LPUSH" };
                    let mut args = vec![push, "jobs"];
                    args.extend(vals.iter().map(String::as_str));
                    assert!(matches!(c.call(&args), Value::Integer(n) if n >= 1));
                    made.extend(vals);
                    i += k;
                }
                producing.fetch_sub(1, Ordering::SeqCst);
                made
            })
        })
        .collect();
    let consumers: Vec<_> = (0..4)
        .map(|w| {
            let mut c = common::Resp::connect(&server);
            let producing = producing.clone();
            std::thread::spawn(move || {
                let mut got = Vec::new();
                let mut turn = w;
                loop {
                    let empty_before = producing.load(Ordering::SeqCst) == 0;
                    let before = got.len();
                    match turn % 4 {
                        0 => match c.call(&["LPOP", "jobs", "2"]) {
                            Value::Array(Some(items)) => got.extend(items.iter().map(text)),
                            Value::Array(None) => {}
                            other => panic!("LPOP answered {other:?}"),
                        },
                        1 => match c.call(&["RPOP", "jobs"]) {
                            Value::Bulk(None) => {}
                            v => got.push(text(&v)),
                        },
                        2 => match c.call(&["BLPOP", "jobs", "0.05"]) {
                            Value::Array(Some(kv)) => got.push(text(&kv[1])),
                            Value::Array(None) => {}
                            other => panic!("BLPOP answered {other:?}"),
                        },
                        _ => match c.call(&["LMOVE", "jobs", "done", "RIGHT", "LEFT"]) {
                            // Counted from `done` at the end.
                            Value::Bulk(None) => {}
                            v => drop(text(&v)),
                        },
                    }
                    turn += 1;
                    // Done once the producers were done and a turn found
                    // nothing (LMOVE's moves count as something).
                    let llen = c.call(&["LLEN", "jobs"]);
                    if empty_before && got.len() == before && llen == Value::Integer(0) {
                        return got;
                    }
                }
            })
        })
        .collect();
    let mut want: Vec<String> = pre;
    for p in producers {
        want.extend(p.join().unwrap());
    }
    let mut out: Vec<String> = Vec::new();
    for cons in consumers {
        out.extend(cons.join().unwrap());
    }
    let Value::Array(Some(done)) = c.call(&["LRANGE", "done", "0", "-1"]) else {
        panic!("done is not a list");
    };
    out.extend(done.iter().map(text));
    let count = |v: &[String]| {
        let mut m: HashMap<String, usize> = HashMap::new();
        for s in v {
            *m.entry(s.clone()).or_default() += 1;
        }
        m
    };
    let (w, o) = (count(&want), count(&out));
    let dup = o.iter().find(|(_, &n)| n > 1);
    assert!(dup.is_none(), "a value came out twice: {dup:?}");
    let lost: Vec<&String> = w.keys().filter(|k| !o.contains_key(*k)).take(5).collect();
    assert!(
        lost.is_empty(),
        "values lost: {lost:?} ({} of {})",
        w.len() - o.len(),
        w.len()
    );
    assert_eq!(out.len(), want.len(), "nothing came out that went not in");
    assert_eq!(c.call(&["LLEN", "jobs"]), Value::Integer(0));
    eprintln!(
        "resp_paged lists: {} values through one paged queue by 8 clients, each once",
        out.len()
    );
}

const HASHES: [&str; 3] = ["ha", "hb", "{ha}c"];

/// The hash commands' generator.
struct HashGen {
    rng: StdRng,
}

impl HashGen {
    fn key(&mut self) -> Vec<u8> {
        HASHES[self.rng.gen_range(0..HASHES.len())]
            .as_bytes()
            .to_vec()
    }

    fn field(&mut self) -> Vec<u8> {
        let n = self.rng.gen_range(0..6000);
        format!("field:{n}").into_bytes()
    }

    fn value(&mut self) -> Vec<u8> {
        let len = match self.rng.gen_range(0..20) {
            0 => 0,
            1 => self.rng.gen_range(1_000..5_000),
            _ => self.rng.gen_range(1..80),
        };
        let c = b'a' + self.rng.gen_range(0..26u8);
        vec![c; len]
    }

    fn command(&mut self) -> Cmd {
        let key = self.key();
        let s = |x: &str| x.as_bytes().to_vec();
        match self.rng.gen_range(0..100) {
            0..=29 => {
                let n = if self.rng.gen_bool(0.3) {
                    self.rng.gen_range(100..600)
                } else {
                    self.rng.gen_range(1..5)
                };
                let name = if self.rng.gen_bool(0.8) {
                    "HSET"
                } else {
                    "HMSET"
                };
                let mut c = vec![s(name), key];
                for _ in 0..n {
                    c.push(self.field());
                    c.push(self.value());
                }
                c
            }
            30..=34 => vec![s("HSETNX"), key, self.field(), self.value()],
            35..=44 => vec![s("HGET"), key, self.field()],
            45..=49 => {
                let mut c = vec![s("HMGET"), key];
                let n = self.rng.gen_range(1..20);
                c.extend((0..n).map(|_| self.field()));
                c
            }
            50..=56 => {
                let mut c = vec![s("HDEL"), key];
                let n = if self.rng.gen_bool(0.2) {
                    self.rng.gen_range(50..400)
                } else {
                    self.rng.gen_range(1..4)
                };
                c.extend((0..n).map(|_| self.field()));
                c
            }
            57..=59 => vec![s("HEXISTS"), key, self.field()],
            60..=61 => vec![s("HSTRLEN"), key, self.field()],
            62..=65 => vec![s("HLEN"), key],
            66..=70 => {
                let f = format!("num:{}", self.rng.gen_range(0..20));
                let by = self.rng.gen_range(-1000..1000).to_string();
                vec![s("HINCRBY"), key, s(&f), s(&by)]
            }
            71..=72 => {
                let f = format!("fl:{}", self.rng.gen_range(0..10));
                vec![s("HINCRBYFLOAT"), key, s(&f), s("1.5")]
            }
            73..=75 => vec![s("HGETALL"), key],
            76 => vec![s("HKEYS"), key],
            77 => vec![s("HVALS"), key],
            78..=79 => {
                let n = self.rng.gen_range(-5..6).to_string();
                vec![s("HRANDFIELD"), key, s(&n)]
            }
            80 => vec![s("DEL"), key],
            81 => vec![s("RENAME"), key, self.key()],
            82 => vec![s("COPY"), key, self.key(), s("REPLACE")],
            83 => vec![s("EXPIRE"), key, s("1000")],
            84..=86 => vec![s("OBJECT"), s("ENCODING"), key],
            87 => vec![s("TYPE"), key],
            88 => vec![s("SET"), key, s("a string")],
            89 => vec![s("LPUSH"), key, s("x")],
            _ => vec![s("HLEN"), key],
        }
    }
}

/// Every hash's type and sorted contents.
fn hash_snapshot(conn: &mut Conn) -> Vec<Value> {
    paged::snapshot(conn, &HASHES, &[&["HGETALL", "$"]])
}

#[test]
fn large_hashes_answer_as_redis() {
    differential(
        "hashes",
        env_or("NVDEPOT_HASHES_OPS", 2000),
        env_or("NVDEPOT_HASHES_SEEDS", 2),
        |seed| {
            let mut g = HashGen {
                rng: StdRng::seed_from_u64(seed),
            };
            Box::new(move || g.command())
        },
        hash_snapshot,
        b"HLEN",
        1_000,
    );
}

const SETS: [&str; 3] = ["sa", "sb", "{sa}c"];

struct SetGen {
    rng: StdRng,
}

impl SetGen {
    fn key(&mut self) -> Vec<u8> {
        SETS[self.rng.gen_range(0..SETS.len())].as_bytes().to_vec()
    }

    fn member(&mut self) -> Vec<u8> {
        let n = self.rng.gen_range(0..8000);
        if self.rng.gen_bool(0.05) {
            n.to_string().into_bytes()
        } else {
            format!("member:{n}:{}", "x".repeat(n % 17)).into_bytes()
        }
    }

    fn command(&mut self) -> Cmd {
        let key = self.key();
        let s = |x: &str| x.as_bytes().to_vec();
        let many = |g: &mut SetGen, lo: usize, hi: usize| -> Vec<Vec<u8>> {
            let n = g.rng.gen_range(lo..hi);
            (0..n).map(|_| g.member()).collect()
        };
        match self.rng.gen_range(0..100) {
            0..=29 => {
                let n = if self.rng.gen_bool(0.3) {
                    (200, 800)
                } else {
                    (1, 5)
                };
                let mut c = vec![s("SADD"), key];
                c.extend(many(self, n.0, n.1));
                c
            }
            30..=39 => {
                let n = if self.rng.gen_bool(0.2) {
                    (50, 400)
                } else {
                    (1, 4)
                };
                let mut c = vec![s("SREM"), key];
                c.extend(many(self, n.0, n.1));
                c
            }
            40..=49 => vec![s("SISMEMBER"), key, self.member()],
            50..=54 => {
                let mut c = vec![s("SMISMEMBER"), key];
                c.extend(many(self, 1, 20));
                c
            }
            55..=59 => vec![s("SCARD"), key],
            60..=62 => vec![s("SMEMBERS"), key],
            63..=64 => {
                let mut c = vec![s("SPOP"), key];
                if self.rng.gen_bool(0.5) {
                    c.push(self.rng.gen_range(0..50).to_string().into_bytes());
                }
                c
            }
            65..=66 => {
                let n = self.rng.gen_range(-5..6).to_string();
                vec![s("SRANDMEMBER"), key, s(&n)]
            }
            67..=70 => vec![s("SMOVE"), key, self.key(), self.member()],
            71..=72 => vec![s("SINTER"), key, self.key()],
            73 => vec![s("SUNION"), key, self.key()],
            74 => vec![s("SDIFF"), key, self.key()],
            75 => vec![s("SINTERSTORE"), self.key(), key, self.key()],
            76 => vec![s("SUNIONSTORE"), self.key(), key, self.key()],
            77 => vec![s("DEL"), key],
            78 => vec![s("RENAME"), key, self.key()],
            79 => vec![s("COPY"), key, self.key(), s("REPLACE")],
            80 => vec![s("EXPIRE"), key, s("1000")],
            81..=83 => vec![s("OBJECT"), s("ENCODING"), key],
            84 => vec![s("TYPE"), key],
            85 => vec![s("HSET"), key, s("f"), s("v")],
            _ => vec![s("SCARD"), key],
        }
    }
}

/// Every set's type and sorted members.
fn set_snapshot(conn: &mut Conn) -> Vec<Value> {
    paged::snapshot(conn, &SETS, &[&["SMEMBERS", "$"]])
}

#[test]
fn large_sets_answer_as_redis() {
    differential(
        "sets",
        env_or("NVDEPOT_SETS_OPS", 2000),
        env_or("NVDEPOT_SETS_SEEDS", 2),
        |seed| {
            let mut g = SetGen {
                rng: StdRng::seed_from_u64(seed),
            };
            Box::new(move || g.command())
        },
        set_snapshot,
        b"SCARD",
        1_000,
    );
}

/// Clients at once on one paged hash (and one paged set): HINCRBY on
/// shared counters, HSET and HDEL of their own fields, SADD and SREM:
/// every increment counted once, every client's fields and members exactly
/// what it left, whatever the interleaving of bucket commits and splits.
#[test]
fn many_clients_share_a_paged_hash_and_set() {
    let dir = temp_dir();
    let server = Server::start_serve(
        &dir.path().join("store"),
        &["--size", "1G", "--segment-size", "16M"],
    );
    let mut c = common::Resp::connect(&server);
    let fill: Vec<String> = (0..3000)
        .flat_map(|i| [format!("pre{i}"), "x".repeat(20)])
        .collect();
    let mut args = vec!["HSET", "h"];
    args.extend(fill.iter().map(String::as_str));
    assert_eq!(c.call(&args), Value::Integer(3000));
    let members: Vec<String> = (0..3000).map(|i| format!("pre-member-{i}")).collect();
    let mut args = vec!["SADD", "s"];
    args.extend(members.iter().map(String::as_str));
    assert_eq!(c.call(&args), Value::Integer(3000));
    let clients: Vec<_> = (0..8)
        .map(|w| {
            let mut c = common::Resp::connect(&server);
            std::thread::spawn(move || {
                let mut mine = std::collections::BTreeSet::new();
                for i in 0..600 {
                    let counter = format!("c{}", i % 50);
                    assert!(matches!(
                        c.call(&["HINCRBY", "h", &counter, "1"]),
                        Value::Integer(_)
                    ));
                    let f = format!("w{w}-{i}");
                    assert_eq!(c.call(&["HSET", "h", &f, &f]), Value::Integer(1));
                    assert_eq!(c.call(&["SADD", "s", &f]), Value::Integer(1));
                    mine.insert(i);
                    if i % 3 == 0 {
                        let old = format!("w{w}-{}", i / 2);
                        if mine.remove(&(i / 2)) {
                            assert_eq!(c.call(&["HDEL", "h", &old]), Value::Integer(1));
                            assert_eq!(c.call(&["SREM", "s", &old]), Value::Integer(1));
                        }
                    }
                }
                mine
            })
        })
        .collect();
    let kept: Vec<_> = clients.into_iter().map(|t| t.join().unwrap()).collect();
    let mut total = 0;
    for i in 0..50 {
        let v = c.call(&["HGET", "h", &format!("c{i}")]);
        total += text(&v).parse::<i64>().expect("a count");
    }
    assert_eq!(total, 8 * 600, "every HINCRBY counted once");
    let mut fields = 3000 + 50;
    let mut set_members = 3000;
    for (w, mine) in kept.iter().enumerate() {
        for i in 0..600 {
            let f = format!("w{w}-{i}");
            let want = mine.contains(&i);
            let got = c.call(&["HGET", "h", &f]);
            assert_eq!(got != Value::Bulk(None), want, "h {f}");
            let is = c.call(&["SISMEMBER", "s", &f]);
            assert_eq!(is, Value::Integer(i64::from(want)), "s {f}");
        }
        fields += mine.len() as i64;
        set_members += mine.len() as i64;
    }
    assert_eq!(c.call(&["HLEN", "h"]), Value::Integer(fields));
    assert_eq!(c.call(&["SCARD", "s"]), Value::Integer(set_members));
    let Value::Array(Some(all)) = c.call(&["HGETALL", "h"]) else {
        panic!("HGETALL");
    };
    assert_eq!(all.len() as i64, 2 * fields, "HGETALL agrees with HLEN");
    eprintln!("resp_paged: 8 clients on one paged hash and set: {fields} fields, {set_members} members, all as written");
}

/// One SCAN-family reply: the next cursor and the flat entries.
fn scan_reply(v: Value) -> (String, Vec<String>) {
    let Value::Array(Some(parts)) = v else {
        panic!("not a scan reply: {v:?}")
    };
    let [cursor, Value::Array(Some(items))] = &parts[..] else {
        panic!("not a scan reply: {parts:?}")
    };
    (text(cursor), items.iter().map(text).collect())
}

/// HSCAN, SSCAN and ZSCAN on paged collections (5 000 entries) answer a
/// few buckets per call, not the whole collection, and a full iteration
/// returns every entry present throughout with its value (a sorted set's
/// score as ZSCORE writes it), while other clients add fields (bucket
/// splits) between the calls; MATCH filters; a cursor of a collection
/// written whole since starts over instead of missing entries.
#[test]
fn paged_scans_iterate_in_pieces_and_miss_nothing() {
    let dir = temp_dir();
    let server = Server::start_serve(&dir.path().join("store"), &["--size", "1G"]);
    let mut c = common::Resp::connect(&server);
    let mut w = common::Resp::connect(&server);
    const N: usize = 5000;
    let fields: Vec<String> = (0..N).map(|i| format!("field:{i}")).collect();
    let mut hset = vec!["HSET".to_string(), "h".into()];
    let mut sadd = vec!["SADD".to_string(), "s".into()];
    let mut zadd = vec!["ZADD".to_string(), "z".into()];
    for (i, f) in fields.iter().enumerate() {
        hset.extend([f.clone(), format!("value-{i}")]);
        sadd.push(f.clone());
        zadd.extend([format!("{}.25", i as i64 - 2500), f.clone()]);
    }
    for cmd in [&hset, &sadd, &zadd] {
        let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
        assert_eq!(c.call(&args), Value::Integer(N as i64), "{}", cmd[0]);
    }
    for (key, what) in [("h", "hashtable"), ("s", "hashtable"), ("z", "skiplist")] {
        assert_eq!(text(&c.call(&["OBJECT", "ENCODING", key])), what);
    }
    for (cmd, key, per) in [("HSCAN", "h", 2), ("SSCAN", "s", 1), ("ZSCAN", "z", 2)] {
        let mut seen = std::collections::HashMap::new();
        let (mut cursor, mut calls, mut most) = ("0".to_string(), 0, 0);
        loop {
            let (next, items) = scan_reply(c.call(&[cmd, key, &cursor, "COUNT", "10"]));
            calls += 1;
            most = most.max(items.len() / per);
            for e in items.chunks(per) {
                seen.insert(e[0].clone(), e.get(1).cloned());
            }
            // Another client grows the collection meanwhile.
            let extra = format!("extra:{calls}");
            match cmd {
                "HSCAN" => w.call(&["HSET", key, &extra, "x"]),
                "SSCAN" => w.call(&["SADD", key, &extra]),
                _ => w.call(&["ZADD", key, "7", &extra]),
            };
            if next == "0" {
                break;
            }
            assert!(calls < 10 * N, "{cmd}: the cursor never came back to 0");
            cursor = next;
        }
        assert!(calls > 5, "{cmd}: {calls} calls: not in pieces");
        assert!(most < N / 4, "{cmd}: one call answered {most} entries");
        for (i, f) in fields.iter().enumerate() {
            let got = seen.get(f).unwrap_or_else(|| panic!("{cmd} missed {f}"));
            match cmd {
                "HSCAN" => assert_eq!(got.as_deref(), Some(format!("value-{i}").as_str())),
                "ZSCAN" => assert_eq!(got, &Some(text(&c.call(&["ZSCORE", key, f])))),
                _ => assert_eq!(got, &None),
            }
        }
    }
    // MATCH: only matching fields, still every one of them.
    let mut matched = std::collections::BTreeSet::new();
    let mut cursor = "0".to_string();
    loop {
        let (next, items) = scan_reply(c.call(&["HSCAN", "h", &cursor, "MATCH", "field:12*"]));
        for e in items.chunks(2) {
            assert!(e[0].starts_with("field:12"), "{}", e[0]);
            matched.insert(e[0].clone());
        }
        if next == "0" {
            break;
        }
        cursor = next;
    }
    assert_eq!(
        matched.len(),
        111,
        "field:12, field:120..129, field:1200..1299"
    );
    // A cursor from before the hash was written whole (RENAME keeps the
    // pages; DEL and a new HSET do not): the scan starts over.
    let (stale, _) = scan_reply(c.call(&["HSCAN", "h", "0"]));
    assert_ne!(stale, "0");
    assert_eq!(c.call(&["DEL", "h"]), Value::Integer(1));
    let args: Vec<&str> = hset.iter().map(String::as_str).collect();
    assert_eq!(c.call(&args), Value::Integer(N as i64));
    let mut again = std::collections::BTreeSet::new();
    let mut cursor = stale;
    loop {
        let (next, items) = scan_reply(c.call(&["HSCAN", "h", &cursor]));
        again.extend(items.chunks(2).map(|e| e[0].clone()));
        if next == "0" {
            break;
        }
        cursor = next;
    }
    assert_eq!(again.len(), N, "a stale cursor missed fields");
    assert!(matches!(c.call(&["HSCAN", "h", "-1"]), Value::Error(_)));
}
