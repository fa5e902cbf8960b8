//! Paged streams (issue 36, `crates/redis/src/stream_pages.rs`) side by
//! side with a stock redis-server: streams grown by XADDs (explicit IDs,
//! so both servers agree; entries of 0 B to 2 KiB) to thousands of
//! entries, far past the size at which nvdepot pages them, with XADD's
//! trimming (MAXLEN and MINID, exact and `~`, LIMIT) and NOMKSTREAM,
//! XRANGE/XREVRANGE with and without COUNT, XLEN, XDEL, XTRIM, XREAD,
//! consumer groups (XGROUP CREATE/SETID/DESTROY, XREADGROUP new and
//! history, XACK, XPENDING's summary, XINFO GROUPS), XSETID, and DEL,
//! RENAME, COPY, EXPIRE, TYPE and WRONGTYPE across them. Both servers
//! split nodes by entry count only (`stream-node-max-bytes 0`), so `~`
//! trims alike.
//!
//! Asserted: every reply equal to redis-server's; after each seed every
//! stream equal (XRANGE - +, XINFO GROUPS); RSS bounded; no panic; the
//! streams paged. `NVDEPOT_STREAMS_OPS` commands per seed (default
//! 6 000), `NVDEPOT_STREAMS_SEEDS` seeds (default 2).

mod common;
#[path = "shapes/paged.rs"]
mod paged;
#[path = "shapes/resp.rs"]
mod shapes;

use std::collections::HashMap;

use nvdepot_resp::Value;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use common::env_or;
use paged::differential;
use shapes::{pipeline, Cmd, Conn};

const STREAMS: [&str; 3] = ["xa", "xb", "{xa}c"];

struct StreamGen {
    rng: StdRng,
    /// The next ID's millisecond part per key (both servers refuse an ID
    /// not above the top one alike, so a stale counter is harmless).
    next: HashMap<Vec<u8>, u64>,
    started: bool,
}

impl StreamGen {
    /// One stream in most commands, so it grows long.
    fn key(&mut self) -> Vec<u8> {
        let i = if self.rng.gen_bool(0.6) {
            0
        } else {
            self.rng.gen_range(0..STREAMS.len())
        };
        STREAMS[i].as_bytes().to_vec()
    }

    fn value(&mut self) -> Vec<u8> {
        let n = match self.rng.gen_range(0..20) {
            0 => 0,
            1 => self.rng.gen_range(500..2000),
            _ => self.rng.gen_range(1..40),
        };
        vec![b'v'; n]
    }

    /// An ID near the stream's current range (existing or not).
    fn id(&mut self, key: &[u8]) -> Vec<u8> {
        let top = *self.next.get(key).unwrap_or(&1);
        let ms = self.rng.gen_range(0..top + 5);
        format!("{ms}-{}", self.rng.gen_range(0..2)).into_bytes()
    }

    fn trim(&mut self, key: &[u8]) -> Vec<Vec<u8>> {
        let s = |x: &str| x.as_bytes().to_vec();
        let mut c = Vec::new();
        if self.rng.gen_bool(0.5) {
            c.push(s("MAXLEN"));
        } else {
            c.push(s("MINID"));
        }
        let approx = self.rng.gen_bool(0.6);
        c.push(s(if approx { "~" } else { "=" }));
        // Mostly trims that keep the stream long.
        if c[0] == b"MAXLEN" {
            let max = if self.rng.gen_bool(0.03) { 300 } else { 4000 };
            c.push(self.rng.gen_range(0..max).to_string().into_bytes());
        } else {
            let top = *self.next.get(key).unwrap_or(&1);
            let ms = self.rng.gen_range(0..top / 5 + 2);
            c.push(format!("{ms}-0").into_bytes());
        }
        if approx && self.rng.gen_bool(0.2) {
            c.push(s("LIMIT"));
            c.push(self.rng.gen_range(0..500).to_string().into_bytes());
        }
        c
    }

    fn command(&mut self) -> Cmd {
        let s = |x: &str| x.as_bytes().to_vec();
        if !self.started {
            self.started = true;
            return vec![s("CONFIG"), s("SET"), s("stream-node-max-bytes"), s("0")];
        }
        let key = self.key();
        match self.rng.gen_range(0..100) {
            0..=44 => {
                let mut c = vec![s("XADD"), key.clone()];
                if self.rng.gen_bool(0.03) {
                    c.push(s("NOMKSTREAM"));
                }
                if self.rng.gen_bool(0.05) {
                    c.extend(self.trim(&key));
                }
                let next = self.next.entry(key.clone()).or_insert(1);
                let id = format!("{}-0", *next);
                *next += 1;
                c.push(id.into_bytes());
                for i in 0..self.rng.gen_range(1..4) {
                    c.push(format!("f{i}").into_bytes());
                    c.push(self.value());
                }
                c
            }
            45..=49 => vec![s("XLEN"), key],
            50..=54 => {
                let mut c = vec![s("XRANGE"), key.clone()];
                if self.rng.gen_bool(0.5) {
                    c.extend([s("-"), s("+")]);
                } else {
                    let (a, b) = (self.id(&key), self.id(&key));
                    c.extend([a, b]);
                }
                if self.rng.gen_bool(0.7) {
                    c.extend([
                        s("COUNT"),
                        self.rng.gen_range(0..30).to_string().into_bytes(),
                    ]);
                }
                c
            }
            55..=58 => {
                let mut c = vec![s("XREVRANGE"), key, s("+"), s("-")];
                if self.rng.gen_bool(0.8) {
                    c.extend([
                        s("COUNT"),
                        self.rng.gen_range(1..5).to_string().into_bytes(),
                    ]);
                }
                c
            }
            59..=62 => {
                let mut c = vec![s("XDEL"), key.clone()];
                for _ in 0..self.rng.gen_range(1..6) {
                    let id = self.id(&key);
                    c.push(id);
                }
                c
            }
            63 => {
                let mut c = vec![s("XTRIM"), key.clone()];
                c.extend(self.trim(&key));
                c
            }
            65..=67 => {
                let id = self.id(&key);
                vec![s("XREAD"), s("COUNT"), s("20"), s("STREAMS"), key, id]
            }
            68..=69 => vec![s("XGROUP"), s("CREATE"), key, s("g"), s("0"), s("MKSTREAM")],
            70 => {
                let id = self.id(&key);
                vec![s("XGROUP"), s("SETID"), key, s("g"), id]
            }
            71..=76 => {
                let consumer = format!("c{}", self.rng.gen_range(0..3)).into_bytes();
                let from = if self.rng.gen_bool(0.8) {
                    s(">")
                } else {
                    s("0")
                };
                vec![
                    s("XREADGROUP"),
                    s("GROUP"),
                    s("g"),
                    consumer,
                    s("COUNT"),
                    self.rng.gen_range(1..40).to_string().into_bytes(),
                    s("STREAMS"),
                    key,
                    from,
                ]
            }
            77..=79 => {
                let mut c = vec![s("XACK"), key.clone(), s("g")];
                for _ in 0..self.rng.gen_range(1..10) {
                    let id = self.id(&key);
                    c.push(id);
                }
                c
            }
            80 => vec![s("XPENDING"), key, s("g")],
            81 => vec![s("XINFO"), s("GROUPS"), key],
            82 if self.rng.gen_bool(0.2) => {
                let next = *self.next.get(&key).unwrap_or(&1);
                vec![s("XSETID"), key, format!("{}-5", next + 10).into_bytes()]
            }
            // Rarely: they start a stream over.
            83 if self.rng.gen_bool(0.02) => vec![s("DEL"), key],
            84 if self.rng.gen_bool(0.02) => vec![s("RENAME"), key, self.key()],
            85 if self.rng.gen_bool(0.02) => vec![s("COPY"), key, self.key(), s("REPLACE")],
            86 => vec![s("EXPIRE"), key, s("1000")],
            87 => vec![s("TYPE"), key],
            88 => vec![s("LPUSHX"), key, s("x")],
            89 => vec![s("XGROUP"), s("DESTROY"), key, s("g")],
            _ => vec![s("XLEN"), key],
        }
    }
}

/// Every stream's type, entries and groups.
fn stream_snapshot(conn: &mut Conn) -> Vec<Value> {
    paged::snapshot(
        conn,
        &STREAMS,
        &[&["XRANGE", "$", "-", "+"], &["XINFO", "GROUPS", "$"]],
    )
}

#[test]
fn long_streams_answer_as_redis() {
    differential(
        "streams",
        env_or("NVDEPOT_STREAMS_OPS", 6000),
        env_or("NVDEPOT_STREAMS_SEEDS", 2),
        |seed| {
            let mut g = StreamGen {
                rng: StdRng::seed_from_u64(seed),
                next: HashMap::new(),
                started: false,
            };
            Box::new(move || g.command())
        },
        stream_snapshot,
        b"XLEN",
        // Entries of ~100 B: a stream pages past ~160 of them.
        300,
    );
}

/// A node emptied by an exact MINID trim (an entry of it past the bound
/// was deleted first) stays, as in Redis: the paged stream is read back
/// whole, ranged, and by a group's `>` read (which needs the first and
/// top entries) exactly as redis-server answers.
#[test]
fn a_node_emptied_by_an_exact_trim_answers_as_redis() {
    let Some(redis) = common::RefServer::redis_or_skip() else {
        return;
    };
    let dir = common::temp_dir();
    let server = common::Server::start_serve(
        &dir.path().join("store"),
        &["--size", "256M", "--segment-size", "16M"],
    );
    let (mut a, mut b) = (
        Conn::connect("redis-server", redis.addr),
        Conn::connect("nvdepot", server.addr),
    );
    shapes::prepare(&mut a, &mut b);
    let s = |x: &str| x.as_bytes().to_vec();
    let mut cmds: Vec<Cmd> = vec![vec![
        s("CONFIG"),
        s("SET"),
        s("stream-node-max-bytes"),
        s("0"),
    ]];
    for i in 1..=300 {
        cmds.push(vec![
            s("XADD"),
            s("x"),
            s(&format!("{i}-0")),
            s("f"),
            vec![b'v'; 200],
        ]);
    }
    for c in [
        "XDEL x 100-0",
        "XTRIM x MINID = 100-0",
        "XLEN x",
        "XRANGE x - + COUNT 2",
        "XREVRANGE x + - COUNT 2",
        "XGROUP CREATE x g 0",
        "XREADGROUP GROUP g c COUNT 3 STREAMS x >",
        "XINFO GROUPS x",
        "XADD x MAXLEN ~ 150 301-0 f v",
        "XLEN x",
        "XREAD COUNT 2 STREAMS x 150-0",
        "XRANGE x - + COUNT 1",
    ] {
        cmds.push(c.split(' ').map(s).collect());
    }
    for (i, c) in cmds.iter().enumerate() {
        let want = pipeline(&mut a, std::slice::from_ref(c));
        let got = pipeline(&mut b, std::slice::from_ref(c));
        assert_eq!(
            want,
            got,
            "command {i}: {}",
            shapes::show(c).chars().take(80).collect::<String>()
        );
    }
    assert!(paged::pages(&mut b) > 0, "the stream is paged");
}
