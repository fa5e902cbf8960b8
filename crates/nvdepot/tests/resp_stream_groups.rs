//! Stream consumer groups (`crates/redis/src/stream_groups.rs`) side by
//! side with a stock redis-server: random XADD, XGROUP (CREATE with `$`,
//! IDs, MKSTREAM, ENTRIESREAD; SETID; DESTROY; CREATECONSUMER;
//! DELCONSUMER), XREADGROUP (`>` and history, COUNT, NOACK, two streams),
//! XACK, XPENDING (summary, extended, IDLE, by consumer), XCLAIM (FORCE,
//! JUSTID, RETRYCOUNT, LASTID, min-idle), XAUTOCLAIM (COUNT, JUSTID, the
//! cursor, deleted entries), XDEL and XTRIM under the PELs, and the
//! errors in between (NOGROUP, BUSYGROUP, WRONGTYPE, `$` in XREADGROUP,
//! bad IDs and options), and XINFO STREAM, GROUPS (entries read, lag)
//! (and FULL [COUNT]) and CONSUMERS. Every reply equal to redis-server's, but idle times
//! (wall-clock ms since a delivery) and XINFO STREAM's radix-tree-nodes,
//! which are compared for being integers only. Entry IDs are explicit (`*` is the clock's).
//!
//! `NVDEPOT_GROUPS_OPS` commands per seed (default 3 000),
//! `NVDEPOT_GROUPS_SEEDS` seeds (default 3).

mod common;
#[path = "shapes/resp.rs"]
mod shapes;

use nvdepot_resp::Value;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use common::{env_or, temp_dir, RefServer, Server};
use shapes::{brief, pipeline, prepare, show, Cmd, Conn};

struct Gen {
    rng: StdRng,
    /// The last entry ID's milliseconds given to XADD.
    ms: u64,
}

impl Gen {
    fn key(&mut self) -> Vec<u8> {
        ["s1", "s2", "{s1}x"][self.rng.gen_range(0..3)]
            .as_bytes()
            .to_vec()
    }

    fn group(&mut self) -> Vec<u8> {
        format!("g{}", self.rng.gen_range(0..3)).into_bytes()
    }

    fn consumer(&mut self) -> Vec<u8> {
        format!("c{}", self.rng.gen_range(0..4)).into_bytes()
    }

    /// An ID near the ones the streams hold.
    fn id(&mut self) -> Vec<u8> {
        match self.rng.gen_range(0..12) {
            0 => b"0".to_vec(),
            1 => b"0-0".to_vec(),
            2 => b"bad".to_vec(),
            _ => format!(
                "{}-{}",
                self.rng.gen_range(0..self.ms + 2),
                self.rng.gen_range(0..2)
            )
            .into_bytes(),
        }
    }

    fn ids(&mut self, c: &mut Cmd) {
        for _ in 0..self.rng.gen_range(1..5) {
            let id = self.id();
            c.push(if id == b"bad" { b"1-0".to_vec() } else { id });
        }
    }

    fn command(&mut self) -> Cmd {
        let s = |x: &str| x.as_bytes().to_vec();
        let key = self.key();
        match self.rng.gen_range(0..100) {
            0..=19 => {
                self.ms += 1;
                let id = format!("{}-{}", self.ms, self.rng.gen_range(0..2));
                vec![
                    s("XADD"),
                    key,
                    s(&id),
                    s("f"),
                    format!("v{}", self.ms).into_bytes(),
                ]
            }
            20..=25 => {
                let start = match self.rng.gen_range(0..4) {
                    0 => s("$"),
                    1 => s("0"),
                    _ => self.id(),
                };
                let mut c = vec![s("XGROUP"), s("CREATE"), key, self.group(), start];
                if self.rng.gen_bool(0.4) {
                    c.push(s("MKSTREAM"));
                }
                if self.rng.gen_bool(0.2) {
                    c.push(s("ENTRIESREAD"));
                    c.push(self.rng.gen_range(-2..5).to_string().into_bytes());
                }
                c
            }
            26..=27 => {
                let id = if self.rng.gen_bool(0.3) {
                    s("$")
                } else {
                    self.id()
                };
                vec![s("XGROUP"), s("SETID"), key, self.group(), id]
            }
            28 => vec![s("XGROUP"), s("DESTROY"), key, self.group()],
            29..=30 => vec![
                s("XGROUP"),
                s("CREATECONSUMER"),
                key,
                self.group(),
                self.consumer(),
            ],
            31 => vec![
                s("XGROUP"),
                s("DELCONSUMER"),
                key,
                self.group(),
                self.consumer(),
            ],
            32..=49 => {
                let mut c = vec![s("XREADGROUP"), s("GROUP"), self.group(), self.consumer()];
                if self.rng.gen_bool(0.5) {
                    c.push(s("COUNT"));
                    c.push(self.rng.gen_range(0..6).to_string().into_bytes());
                }
                if self.rng.gen_bool(0.15) {
                    c.push(s("NOACK"));
                }
                c.push(s("STREAMS"));
                let two = self.rng.gen_bool(0.2);
                c.push(key);
                if two {
                    c.push(self.key());
                }
                for _ in 0..(1 + usize::from(two)) {
                    c.push(match self.rng.gen_range(0..10) {
                        0..=6 => s(">"),
                        7 => s("$"),
                        _ => self.id(),
                    });
                }
                c
            }
            50..=59 => {
                let mut c = vec![s("XACK"), key, self.group()];
                self.ids(&mut c);
                c
            }
            60..=63 => vec![s("XPENDING"), key, self.group()],
            64..=69 => {
                let mut c = vec![s("XPENDING"), key, self.group()];
                if self.rng.gen_bool(0.3) {
                    c.push(s("IDLE"));
                    c.push(s(["0", "100000000"][self.rng.gen_range(0..2)]));
                }
                c.push(s("-"));
                c.push(s("+"));
                c.push(self.rng.gen_range(-1..12).to_string().into_bytes());
                if self.rng.gen_bool(0.4) {
                    c.push(self.consumer());
                }
                c
            }
            70..=77 => {
                let idle = ["0", "0", "100000000", "x"][self.rng.gen_range(0..4)];
                let mut c = vec![s("XCLAIM"), key, self.group(), self.consumer(), s(idle)];
                self.ids(&mut c);
                for opt in ["JUSTID", "FORCE"] {
                    if self.rng.gen_bool(0.2) {
                        c.push(s(opt));
                    }
                }
                if self.rng.gen_bool(0.2) {
                    c.push(s("RETRYCOUNT"));
                    c.push(self.rng.gen_range(0..9).to_string().into_bytes());
                }
                if self.rng.gen_bool(0.1) {
                    c.push(s("LASTID"));
                    c.push(self.id());
                }
                c
            }
            78..=84 => {
                let idle = ["0", "0", "100000000"][self.rng.gen_range(0..3)];
                let start = if self.rng.gen_bool(0.5) {
                    s("0-0")
                } else {
                    self.id()
                };
                let mut c = vec![
                    s("XAUTOCLAIM"),
                    key,
                    self.group(),
                    self.consumer(),
                    s(idle),
                    start,
                ];
                if self.rng.gen_bool(0.6) {
                    c.push(s("COUNT"));
                    c.push(self.rng.gen_range(0..5).to_string().into_bytes());
                }
                if self.rng.gen_bool(0.2) {
                    c.push(s("JUSTID"));
                }
                c
            }
            85..=88 => {
                let mut c = vec![s("XDEL"), key];
                self.ids(&mut c);
                c
            }
            89 => vec![
                s("XTRIM"),
                key,
                s("MAXLEN"),
                self.rng.gen_range(0..8).to_string().into_bytes(),
            ],
            90..=92 => vec![s("XRANGE"), key, s("-"), s("+")],
            93 => vec![s("XLEN"), key],
            94 => vec![s("DEL"), key],
            95 => vec![s("SET"), key, s("x")],
            96 => vec![s("RENAME"), key, self.key()],
            97 if self.rng.gen_bool(0.5) => vec![s("XINFO"), s("GROUPS"), key],
            97 if self.rng.gen_bool(0.5) => {
                let mut c = vec![s("XINFO"), s("STREAM"), key];
                match self.rng.gen_range(0..8) {
                    0..=2 => {}
                    3 | 4 => c.push(s("FULL")),
                    5 | 6 => {
                        let n = ["0", "1", "2", "5", "-1", "x"][self.rng.gen_range(0..6)];
                        c.extend([s("FULL"), s("COUNT"), s(n)]);
                    }
                    _ => c.push(s(["full", "COUNT", "FULL COUNT"][self.rng.gen_range(0..3)])),
                }
                c
            }
            97 => vec![s("XINFO"), s("CONSUMERS"), key, self.group()],
            98 => vec![s("COPY"), key, self.key()],
            _ => vec![s("TYPE"), key],
        }
    }
}

/// A reply as compared: XPENDING's and XINFO CONSUMERS' idle times
/// (wall-clock) as 0, XINFO STREAM's radix-tree-nodes (Redis's radix
/// tree internals) as 0.
fn comparable(cmd: &Cmd, v: &Value) -> Value {
    if cmd[0] == b"XINFO" {
        if cmd[1] == b"STREAM" {
            // FULL's delivery and seen times are wall-clock ms.
            return unix_ms_masked(&masked(v, b"radix-tree-nodes"));
        }
        return masked(v, b"idle");
    }
    if !cmd[0].eq_ignore_ascii_case(b"XPENDING") || cmd.len() == 3 {
        return v.clone();
    }
    match v {
        Value::Array(Some(rows)) => Value::Array(Some(
            rows.iter()
                .map(|row| match row {
                    Value::Array(Some(f)) if f.len() == 4 => {
                        let mut f = f.clone();
                        if matches!(f[2], Value::Integer(_)) {
                            f[2] = Value::Integer(0);
                        }
                        Value::Array(Some(f))
                    }
                    other => other.clone(),
                })
                .collect(),
        )),
        other => other.clone(),
    }
}

/// A reply as text (bulk strings as text, not bytes).
fn readable(v: &Value) -> String {
    match v {
        Value::Bulk(Some(b)) => format!("{:?}", String::from_utf8_lossy(b)),
        Value::Array(Some(items)) => {
            let inner: Vec<String> = items.iter().map(readable).collect();
            format!("[{}]", inner.join(", "))
        }
        other => brief(other),
    }
}

/// `v` with every integer that is a Unix time in ms (past 2001) as 0.
fn unix_ms_masked(v: &Value) -> Value {
    match v {
        Value::Array(Some(items)) => Value::Array(Some(items.iter().map(unix_ms_masked).collect())),
        Value::Integer(n) if *n >= 1_000_000_000_000 => Value::Integer(0),
        other => other.clone(),
    }
}

/// `v` with the integer after every `label` (in flat key, value arrays,
/// at any depth) as 0.
fn masked(v: &Value, label: &[u8]) -> Value {
    match v {
        Value::Array(Some(items)) => {
            let mut out: Vec<Value> = items.iter().map(|i| masked(i, label)).collect();
            for i in 1..out.len() {
                if out[i - 1] == Value::Bulk(Some(label.to_vec())) {
                    if let Value::Integer(_) = out[i] {
                        out[i] = Value::Integer(0);
                    }
                }
            }
            Value::Array(Some(out))
        }
        other => other.clone(),
    }
}

#[test]
fn consumer_groups_answer_as_redis() {
    let Some(redis) = RefServer::redis_or_skip() else {
        return;
    };
    let dir = temp_dir();
    let server = Server::start_serve(
        &dir.path().join("store"),
        &["--size", "256M", "--segment-size", "8M"],
    );
    let ops: usize = env_or("NVDEPOT_GROUPS_OPS", 3000);
    for seed in 0..env_or("NVDEPOT_GROUPS_SEEDS", 3u64) {
        let (mut a, mut b) = (
            Conn::connect("redis-server", redis.addr),
            Conn::connect("nvdepot", server.addr),
        );
        prepare(&mut a, &mut b);
        let mut g = Gen {
            rng: StdRng::seed_from_u64(seed),
            ms: 0,
        };
        let mut recent: Vec<String> = Vec::new();
        let mut served = 0;
        for sent in 0..ops {
            let cmd = g.command();
            let want = comparable(&cmd, &pipeline(&mut a, std::slice::from_ref(&cmd))[0]);
            let got = comparable(&cmd, &pipeline(&mut b, std::slice::from_ref(&cmd))[0]);
            assert!(
                want == got,
                "seed {seed}, command {sent}: {}\n redis-server: {}\n nvdepot:      {}\n before it:\n  {}",
                show(&cmd),
                readable(&want),
                readable(&got),
                recent.join("\n  ")
            );
            if cmd[0] == b"XREADGROUP" && matches!(want, Value::Array(Some(_)) | Value::Map(_)) {
                served += 1;
            }
            recent.push(show(&cmd).chars().take(160).collect());
            let keep = recent.len().saturating_sub(env_or("NVDEPOT_RECENT", 16));
            recent.drain(..keep);
        }
        eprintln!("resp_stream_groups: seed {seed}: {ops} commands, every reply the same ({served} XREADGROUPs served)");
        assert!(served > ops / 50, "groups were read from ({served})");
    }
    let log = server.stderr.lock().unwrap().clone();
    assert!(
        !log.contains("panicked"),
        "the server logged a panic:\n{log}"
    );
}

/// A blocked XREADGROUP (`>`, BLOCK) is served by the next XADD from
/// another client, the entry pending for it; one with a timeout and
/// nothing new answers nil after it.
#[test]
fn a_blocked_xreadgroup_is_served_by_xadd() {
    use common::Resp;
    let dir = temp_dir();
    let server = Server::start_serve(
        &dir.path().join("store"),
        &["--size", "256M", "--segment-size", "8M"],
    );
    let mut c = Resp::connect(&server);
    assert_eq!(
        c.call(&["XGROUP", "CREATE", "jobs", "workers", "$", "MKSTREAM"]),
        Value::Simple(b"OK".to_vec())
    );
    let t = std::time::Instant::now();
    let nil = c.call(&[
        "XREADGROUP",
        "GROUP",
        "workers",
        "w0",
        "BLOCK",
        "200",
        "STREAMS",
        "jobs",
        ">",
    ]);
    assert_eq!(nil, Value::Array(None), "a timeout answers nil");
    assert!(t.elapsed() >= std::time::Duration::from_millis(190));
    let mut waiter = Resp::connect(&server);
    let blocked = std::thread::spawn(move || {
        waiter.call(&[
            "XREADGROUP",
            "GROUP",
            "workers",
            "w1",
            "BLOCK",
            "0",
            "STREAMS",
            "jobs",
            ">",
        ])
    });
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert_eq!(
        c.call(&["XADD", "jobs", "7-1", "job", "a"]),
        Value::Bulk(Some(b"7-1".to_vec()))
    );
    let got = blocked.join().unwrap();
    let want = Value::Array(Some(vec![Value::Array(Some(vec![
        Value::Bulk(Some(b"jobs".to_vec())),
        Value::Array(Some(vec![Value::Array(Some(vec![
            Value::Bulk(Some(b"7-1".to_vec())),
            Value::Array(Some(vec![
                Value::Bulk(Some(b"job".to_vec())),
                Value::Bulk(Some(b"a".to_vec())),
            ])),
        ]))])),
    ]))]));
    assert_eq!(got, want);
    let Value::Array(Some(summary)) = c.call(&["XPENDING", "jobs", "workers"]) else {
        panic!("XPENDING");
    };
    assert_eq!(summary[0], Value::Integer(1), "the entry is pending");
    assert_eq!(
        c.call(&["XACK", "jobs", "workers", "7-1"]),
        Value::Integer(1)
    );
}
