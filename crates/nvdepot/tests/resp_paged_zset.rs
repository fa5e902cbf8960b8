//! Paged sorted sets (issue 36, `crates/redis/src/zset_pages.rs` and
//! `zset_tree.rs`) side by side with a stock redis-server: sorted sets
//! grown by ZADDs of up to 600 members to thousands, far past the size at
//! which nvdepot pages them (member buckets and a counted B+-tree), with
//! integral, fractional and infinite scores, members of 3 B to 4 KiB
//! (long ones make trees several levels deep), and every sorted set command
//! on them: ZADD with every flag (and their invalid combinations),
//! ZINCRBY, ZREM, ZSCORE, ZMSCORE, ZCARD, ZRANK/ZREVRANK, ZRANGE by rank,
//! score and lex (REV, LIMIT, WITHSCORES) and the legacy forms, ZCOUNT,
//! ZLEXCOUNT, ZPOPMIN/MAX with counts, ZMPOP, ZREMRANGEBYRANK/SCORE/LEX,
//! ZRANGESTORE, ZUNIONSTORE, ZRANDMEMBER (by size), and DEL, RENAME,
//! COPY, EXPIRE, OBJECT ENCODING, TYPE and WRONGTYPE across them. Lex
//! ranges run on a set whose scores are all equal (Redis's precondition
//! for them).
//!
//! Asserted: every reply equal to redis-server's; after each seed every
//! set equal (ZRANGE 0 -1 WITHSCORES); RSS bounded; no panic; the sets
//! paged; and 8 clients at once on one paged set (ZINCRBY, ZADD, ZREM):
//! every change counted once. `NVDEPOT_ZSETS_OPS` commands per seed (default 2 000),
//! `NVDEPOT_ZSETS_SEEDS` seeds (default 2).

mod common;
#[path = "shapes/paged.rs"]
mod paged;
#[path = "shapes/resp.rs"]
mod shapes;

use nvdepot_resp::Value;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use common::env_or;
use paged::differential;
use shapes::{Cmd, Conn};

const ZSETS: [&str; 3] = ["za", "zb", "{za}c"];
/// A sorted set whose members all score 0: the lex ranges' set.
const LEX: &str = "zl";

struct ZSetGen {
    rng: StdRng,
    /// Every member 0.3-0.6 KiB: some 16 to a node, trees as deep as
    /// a set of millions of short members.
    long: bool,
}

impl ZSetGen {
    fn key(&mut self) -> Vec<u8> {
        ZSETS[self.rng.gen_range(0..ZSETS.len())]
            .as_bytes()
            .to_vec()
    }

    /// A member; one in 40 long (0.5-4 KiB), so leaves hold few and
    /// inner nodes carry long separators: trees several levels deep.
    fn member(&mut self) -> Vec<u8> {
        let n = self.rng.gen_range(0..6000);
        let pad = if self.long {
            300 + n % 300
        } else if n % 40 == 7 {
            500 + n % 3600
        } else {
            n % 23
        };
        format!("m:{n}:{}", "y".repeat(pad)).into_bytes()
    }

    fn score(&mut self) -> Vec<u8> {
        match self.rng.gen_range(0..40) {
            0 => b"inf".to_vec(),
            1 => b"-inf".to_vec(),
            2..=11 => format!("{}", f64::from(self.rng.gen_range(-400..400)) / 8.0).into_bytes(),
            _ => self.rng.gen_range(-300..300).to_string().into_bytes(),
        }
    }

    /// A score bound: inclusive, exclusive or infinite.
    fn bound(&mut self) -> Vec<u8> {
        match self.rng.gen_range(0..10) {
            0 => b"-inf".to_vec(),
            1 => b"+inf".to_vec(),
            2..=4 => [b"(".to_vec(), self.score()].concat(),
            _ => self.score(),
        }
    }

    fn lex_bound(&mut self) -> Vec<u8> {
        match self.rng.gen_range(0..10) {
            0 => b"-".to_vec(),
            1 => b"+".to_vec(),
            2..=4 => [b"(".to_vec(), self.member()].concat(),
            _ => [b"[".to_vec(), self.member()].concat(),
        }
    }

    fn index(&mut self) -> Vec<u8> {
        let n: i64 = match self.rng.gen_range(0..4) {
            0 => self.rng.gen_range(-20..20),
            1 => self.rng.gen_range(-6000..6000),
            _ => self.rng.gen_range(0..3000),
        };
        n.to_string().into_bytes()
    }

    fn limit(&mut self, c: &mut Cmd) {
        if self.rng.gen_bool(0.4) {
            c.push(b"LIMIT".to_vec());
            c.push(self.rng.gen_range(-1..300).to_string().into_bytes());
            c.push(self.rng.gen_range(-2..200).to_string().into_bytes());
        }
    }

    fn command(&mut self) -> Cmd {
        let key = self.key();
        let s = |x: &str| x.as_bytes().to_vec();
        match self.rng.gen_range(0..110) {
            0..=24 => {
                let n = if self.rng.gen_bool(0.3) {
                    self.rng.gen_range(100..600)
                } else {
                    self.rng.gen_range(1..5)
                };
                let mut c = vec![s("ZADD"), key];
                for flag in ["NX", "XX", "GT", "LT", "CH"] {
                    if self.rng.gen_bool(0.07) {
                        c.push(s(flag));
                    }
                }
                for _ in 0..n {
                    c.push(self.score());
                    c.push(self.member());
                }
                c
            }
            25..=26 => {
                let mut c = vec![s("ZADD"), key, s("INCR")];
                if self.rng.gen_bool(0.3) {
                    c.push(s(["GT", "LT", "XX", "NX"][self.rng.gen_range(0..4)]));
                }
                c.push(self.score());
                c.push(self.member());
                c
            }
            27..=29 => vec![s("ZINCRBY"), key, self.score(), self.member()],
            30..=35 => {
                let n = if self.rng.gen_bool(0.2) {
                    self.rng.gen_range(50..300)
                } else {
                    self.rng.gen_range(1..4)
                };
                let mut c = vec![s("ZREM"), key];
                c.extend((0..n).map(|_| self.member()));
                c
            }
            36..=40 => vec![s("ZSCORE"), key, self.member()],
            41..=42 => {
                let mut c = vec![s("ZMSCORE"), key];
                let n = self.rng.gen_range(1..10);
                c.extend((0..n).map(|_| self.member()));
                c
            }
            43..=45 => vec![s("ZCARD"), key],
            46..=48 => vec![s("ZRANK"), key, self.member()],
            49..=50 => vec![s("ZREVRANK"), key, self.member()],
            51..=54 => {
                let mut c = vec![s("ZRANGE"), key, self.index(), self.index()];
                if self.rng.gen_bool(0.3) {
                    c.push(s("REV"));
                }
                if self.rng.gen_bool(0.5) {
                    c.push(s("WITHSCORES"));
                }
                c
            }
            55..=56 => vec![
                s("ZREVRANGE"),
                key,
                self.index(),
                self.index(),
                s("WITHSCORES"),
            ],
            57..=60 => {
                let mut c = vec![s("ZRANGEBYSCORE"), key, self.bound(), self.bound()];
                if self.rng.gen_bool(0.5) {
                    c.push(s("WITHSCORES"));
                }
                self.limit(&mut c);
                c
            }
            61..=62 => {
                let mut c = vec![s("ZREVRANGEBYSCORE"), key, self.bound(), self.bound()];
                self.limit(&mut c);
                c
            }
            63..=64 => {
                let mut c = vec![s("ZRANGE"), key, self.bound(), self.bound(), s("BYSCORE")];
                if self.rng.gen_bool(0.5) {
                    c.push(s("REV"));
                }
                self.limit(&mut c);
                c
            }
            65..=67 => vec![s("ZCOUNT"), key, self.bound(), self.bound()],
            68..=70 => {
                let name = if self.rng.gen_bool(0.5) {
                    "ZPOPMIN"
                } else {
                    "ZPOPMAX"
                };
                let mut c = vec![s(name), key];
                if self.rng.gen_bool(0.6) {
                    c.push(self.rng.gen_range(0..80).to_string().into_bytes());
                }
                c
            }
            71 => vec![
                s("ZMPOP"),
                s("2"),
                key,
                self.key(),
                s("MIN"),
                s("COUNT"),
                s("5"),
            ],
            72..=73 => vec![s("ZREMRANGEBYRANK"), key, self.index(), self.index()],
            74..=75 => vec![s("ZREMRANGEBYSCORE"), key, self.bound(), self.bound()],
            76 => vec![
                s("ZRANGESTORE"),
                self.key(),
                key,
                self.index(),
                self.index(),
            ],
            77 => vec![s("ZUNIONSTORE"), self.key(), s("2"), key, self.key()],
            78..=79 => {
                let n = self.rng.gen_range(-5..6).to_string();
                vec![s("ZRANDMEMBER"), key, s(&n)]
            }
            80 => vec![s("DEL"), key],
            81 => vec![s("RENAME"), key, self.key()],
            82 => vec![s("COPY"), key, self.key(), s("REPLACE")],
            83 => vec![s("EXPIRE"), key, s("1000")],
            84..=85 => vec![s("OBJECT"), s("ENCODING"), key],
            86 => vec![s("TYPE"), key],
            87 => vec![s("SET"), key, s("a string")],
            88..=93 => {
                let n = if self.rng.gen_bool(0.3) {
                    self.rng.gen_range(100..600)
                } else {
                    self.rng.gen_range(1..5)
                };
                let mut c = vec![s("ZADD"), s(LEX)];
                for _ in 0..n {
                    c.push(s("0"));
                    c.push(self.member());
                }
                c
            }
            94..=97 => {
                let name = if self.rng.gen_bool(0.6) {
                    "ZRANGEBYLEX"
                } else {
                    "ZREVRANGEBYLEX"
                };
                let mut c = vec![s(name), s(LEX), self.lex_bound(), self.lex_bound()];
                self.limit(&mut c);
                c
            }
            98..=99 => vec![s("ZLEXCOUNT"), s(LEX), self.lex_bound(), self.lex_bound()],
            100 => vec![
                s("ZREMRANGEBYLEX"),
                s(LEX),
                self.lex_bound(),
                self.lex_bound(),
            ],
            101 => vec![s("ZREM"), s(LEX), self.member(), self.member()],
            102 => vec![s("ZRANK"), s(LEX), self.member()],
            103 => vec![s("OBJECT"), s("ENCODING"), s(LEX)],
            _ => vec![s("ZCARD"), key],
        }
    }
}

/// Every sorted set's type and members with scores.
fn zset_snapshot(conn: &mut Conn) -> Vec<Value> {
    let keys: Vec<&str> = ZSETS.iter().chain([&LEX]).copied().collect();
    paged::snapshot(conn, &keys, &[&["ZRANGE", "$", "0", "-1", "WITHSCORES"]])
}

#[test]
fn large_sorted_sets_answer_as_redis() {
    differential(
        "sorted sets",
        env_or("NVDEPOT_ZSETS_OPS", 2000),
        env_or("NVDEPOT_ZSETS_SEEDS", 2),
        |seed| {
            let mut g = ZSetGen {
                rng: StdRng::seed_from_u64(seed),
                long: false,
            };
            Box::new(move || g.command())
        },
        zset_snapshot,
        b"ZCARD",
        1_000,
    );
}

#[test]
fn deep_sorted_set_trees_answer_as_redis() {
    differential(
        "deep sorted sets",
        env_or("NVDEPOT_ZSETS_OPS", 2000),
        env_or("NVDEPOT_ZSETS_SEEDS", 2),
        |seed| {
            let mut g = ZSetGen {
                rng: StdRng::seed_from_u64(seed + 1000),
                long: true,
            };
            Box::new(move || g.command())
        },
        zset_snapshot,
        b"ZCARD",
        1_000,
    );
}

/// Clients at once on one paged sorted set: ZINCRBY on shared members,
/// ZADD and ZREM of their own: every increment counted once, every
/// client's members exactly what it left, ranks agreeing with the order,
/// whatever the interleaving of leaf splits, merges and bucket commits.
#[test]
fn many_clients_share_a_paged_sorted_set() {
    use common::{temp_dir, Resp, Server};
    let dir = temp_dir();
    let server = Server::start_serve(
        &dir.path().join("store"),
        &["--size", "1G", "--segment-size", "16M"],
    );
    let mut c = Resp::connect(&server);
    let fill: Vec<String> = (0..3000)
        .flat_map(|i| [(i % 97).to_string(), format!("pre-{i:05}")])
        .collect();
    let mut args = vec!["ZADD", "z"];
    args.extend(fill.iter().map(String::as_str));
    assert_eq!(c.call(&args), Value::Integer(3000));
    let clients: Vec<_> = (0..8)
        .map(|w| {
            let mut c = Resp::connect(&server);
            std::thread::spawn(move || {
                let mut mine = std::collections::BTreeSet::new();
                for i in 0..500u64 {
                    let shared = format!("counter-{}", i % 20);
                    assert!(matches!(
                        c.call(&["ZINCRBY", "z", "1", &shared]),
                        Value::Bulk(Some(_))
                    ));
                    let m = format!("w{w}-{i:04}");
                    let score = ((i * 7919) % 1000).to_string();
                    assert_eq!(c.call(&["ZADD", "z", &score, &m]), Value::Integer(1));
                    mine.insert(i);
                    if i % 3 == 0 && mine.remove(&(i / 2)) {
                        let old = format!("w{w}-{:04}", i / 2);
                        assert_eq!(c.call(&["ZREM", "z", &old]), Value::Integer(1));
                    }
                }
                mine
            })
        })
        .collect();
    let kept: Vec<_> = clients.into_iter().map(|t| t.join().unwrap()).collect();
    let mut total = 0;
    for i in 0..20 {
        let v = c.call(&["ZSCORE", "z", &format!("counter-{i}")]);
        let Value::Bulk(Some(s)) = v else {
            panic!("ZSCORE counter-{i}: {v:?}")
        };
        total += String::from_utf8_lossy(&s).parse::<i64>().expect("a count");
    }
    assert_eq!(total, 8 * 500, "every ZINCRBY counted once");
    let mut members = 3000 + 20;
    for (w, mine) in kept.iter().enumerate() {
        for i in 0..500u64 {
            let m = format!("w{w}-{i:04}");
            let got = c.call(&["ZSCORE", "z", &m]);
            assert_eq!(got != Value::Bulk(None), mine.contains(&i), "z {m}");
        }
        members += mine.len() as i64;
    }
    assert_eq!(c.call(&["ZCARD", "z"]), Value::Integer(members));
    let Value::Array(Some(all)) = c.call(&["ZRANGE", "z", "0", "-1"]) else {
        panic!("ZRANGE");
    };
    assert_eq!(all.len() as i64, members, "ZRANGE agrees with ZCARD");
    for at in [0, members / 3, members - 1] {
        let Value::Bulk(Some(m)) = &all[at as usize] else {
            panic!("a member")
        };
        let m = String::from_utf8_lossy(m).into_owned();
        assert_eq!(c.call(&["ZRANK", "z", &m]), Value::Integer(at), "ZRANK {m}");
    }
    eprintln!("resp_paged: 8 clients on one paged sorted set: {members} members, all as written");
}
