//! The Redis shape-space generator and comparison, shared by
//! `tests/resp_shapes.rs` (seeded runs) and the fuzz target
//! `crates/nvdepot/fuzz/fuzz_targets/serve.rs` (libFuzzer's bytes drive
//! the generator's choices). See `resp_shapes.rs` for what it covers.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use nvdepot_resp::Value;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// One command, as its arguments.
pub type Cmd = Vec<Vec<u8>>;

/// The server's resident memory never exceeds this during the run: the
/// largest request is ~1 MiB, the largest pipeline ~3 000 commands, the
/// DRAM cache 64 MiB (measured peak: 32-34 MB, README "Limits").
pub const RSS_BOUND: u64 = 160 << 20;

/// nvdepot's key limit (docs/REDIS.md); Redis's is 512 MiB.
pub const KEY_BYTES_MAX: usize = 65_535;

const NUMBERS: &[&str] = &[
    "0",
    "-0",
    "+0",
    "1",
    "-1",
    "+1",
    "00",
    "007",
    " 1",
    "1 ",
    "",
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775806",
    "-9223372036854775807",
    "9223372036854775808",
    "-9223372036854775809",
    "18446744073709551615",
    "18446744073709551616",
    "2147483647",
    "2147483648",
    "-2147483648",
    "4294967295",
    "4294967296",
    "4611686018427387904",
    "9223372036854775",
    "9223372036854776",
    "922337203685477580",
    "536870911",
    "536870912",
    "1e3",
    "1.5",
    "-1.5",
    "0.1",
    "1e308",
    "1e309",
    "-1e309",
    "inf",
    "-inf",
    "+inf",
    "nan",
    "0x10",
    "1e",
    ".5",
    "5.",
    "abc",
    "3",
    "100",
    "1000",
];

pub struct Gen<R: Rng> {
    pub rng: R,
    /// A Unix time (seconds) far enough ahead to never pass in a run.
    pub exat: u64,
}

impl<R: Rng> Gen<R> {
    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.rng.gen_range(0..from.len())]
    }

    fn number(&mut self) -> Vec<u8> {
        match self.rng.gen_range(0..4) {
            0 => self.rng.gen_range(-20i64..20).to_string().into_bytes(),
            _ => self.pick(NUMBERS).as_bytes().to_vec(),
        }
    }

    fn binary(&mut self, len: usize) -> Vec<u8> {
        (0..len)
            .map(|_| match self.rng.gen_range(0..6) {
                0 => 0,
                1 => b'\r',
                2 => b'\n',
                3 => 0xff,
                _ => self.rng.gen(),
            })
            .collect()
    }

    fn key(&mut self) -> Vec<u8> {
        match self.rng.gen_range(0..100) {
            0..=69 => format!("k{}", self.rng.gen_range(0..8)).into_bytes(),
            70..=77 => Vec::new(),
            78..=85 => {
                // A few binary keys, each used again.
                let mut seeded = StdRng::seed_from_u64(self.rng.gen_range(0..4));
                let len = seeded.gen_range(1..12);
                (0..len).map(|_| seeded.gen()).collect()
            }
            86..=93 => vec![b'L'; [1000, 4096, 20_000][self.rng.gen_range(0..3)]],
            94..=97 => vec![b'M'; KEY_BYTES_MAX],
            _ => format!("m{}", self.rng.gen_range(0..10_000)).into_bytes(),
        }
    }

    fn value(&mut self) -> Vec<u8> {
        match self.rng.gen_range(0..100) {
            0..=34 => {
                let n = self.rng.gen_range(1..8);
                (0..n).map(|_| b'a' + self.rng.gen_range(0..4)).collect()
            }
            35..=54 => self.number(),
            55..=64 => Vec::new(),
            65..=79 => {
                let n = self.rng.gen_range(1..64);
                self.binary(n)
            }
            80..=94 => vec![b'v'; self.rng.gen_range(40..5000)],
            95..=98 => vec![b'w'; self.rng.gen_range(5000..70_000)],
            _ => vec![b'x'; self.rng.gen_range(256 << 10..1 << 20)],
        }
    }

    fn pattern(&mut self) -> Vec<u8> {
        if self.rng.gen_range(0..4) == 0 {
            return self.pick(&["*", "k*", "k[0-3]", "k?", "m1*", ""]).into();
        }
        let n = self.rng.gen_range(1..10);
        (0..n)
            .map(|_| b"*?[]^\\-ak0L"[self.rng.gen_range(0..11)])
            .collect()
    }

    /// Keys `m0..m9999`: the many-key commands' keys (small values only,
    /// so that an MGET of 10 000 of them stays a small reply).
    fn many_keys(&mut self, n: usize) -> Vec<Vec<u8>> {
        (0..n)
            .map(|_| format!("m{}", self.rng.gen_range(0..10_000)).into_bytes())
            .collect()
    }

    fn arity(&mut self) -> usize {
        match self.rng.gen_range(0..100) {
            0..=79 => self.rng.gen_range(1..5),
            80..=94 => self.rng.gen_range(5..200),
            _ => self.rng.gen_range(200..=10_000),
        }
    }

    pub fn command(&mut self) -> Vec<Vec<u8>> {
        let w = |s: &str| s.as_bytes().to_vec();
        let mut c: Vec<Vec<u8>>;
        match self.rng.gen_range(0..40) {
            0..=4 => {
                c = vec![w("SET"), self.key(), self.value()];
                for _ in 0..self.rng.gen_range(0..3) {
                    match self.rng.gen_range(0..9) {
                        0 => c.push(w("NX")),
                        1 => c.push(w("XX")),
                        2 => c.push(w("GET")),
                        3 => c.push(w("KEEPTTL")),
                        4 => c.extend([w("EX"), self.ttl()]),
                        5 => c.extend([w("PX"), self.ttl()]),
                        6 => c.extend([w("EXAT"), self.exat.to_string().into_bytes()]),
                        // Never a past time here: Redis keeps such a key
                        // until its active expiry samples it (at random
                        // times), so DBSIZE would differ by timing.
                        7 => {
                            let at = match self.rng.gen_range(0..4) {
                                0 => "0".to_string(),
                                1 => "-1".to_string(),
                                2 => "9223372036854775807".to_string(),
                                _ => (self.exat * 1000).to_string(),
                            };
                            c.extend([w("PXAT"), at.into_bytes()]);
                        }
                        _ => c.push(w("BOGUS")),
                    }
                }
            }
            5..=7 => {
                c = vec![
                    w(self.pick(&["GET", "STRLEN", "TYPE", "GETDEL"])),
                    self.key(),
                ]
            }
            8 => {
                c = vec![
                    w(self.pick(&["SETNX", "GETSET", "APPEND"])),
                    self.key(),
                    self.value(),
                ]
            }
            9 => {
                c = vec![
                    w(self.pick(&["SETEX", "PSETEX"])),
                    self.key(),
                    self.ttl(),
                    self.value(),
                ]
            }
            10 => {
                c = vec![w("GETEX"), self.key()];
                match self.rng.gen_range(0..5) {
                    0 => c.extend([w("EX"), self.ttl()]),
                    1 => c.extend([w("PX"), self.ttl()]),
                    2 => c.push(w("PERSIST")),
                    3 => c.extend([w("EXAT"), self.number()]),
                    _ => {}
                }
            }
            11..=13 => {
                let op = self.pick(&["INCR", "DECR", "INCRBY", "DECRBY", "INCRBYFLOAT"]);
                c = vec![w(op), self.key()];
                if op.ends_with("BY") || op == "INCRBYFLOAT" {
                    c.push(self.number());
                }
            }
            14 => {
                c = vec![
                    w(self.pick(&["GETRANGE", "SUBSTR"])),
                    self.key(),
                    self.number(),
                    self.number(),
                ]
            }
            15 => {
                // Offsets from the boundary list, but never one that makes
                // both servers build a 512 MiB string.
                let offset = match self.number() {
                    n if n == b"536870911" => b"536870912".to_vec(),
                    n => n,
                };
                c = vec![w("SETRANGE"), self.key(), offset, self.value()];
            }
            16..=18 => {
                let op = self.pick(&["DEL", "EXISTS", "TOUCH", "UNLINK", "MGET"]);
                let n = self.arity();
                c = vec![w(op)];
                if n > 8 {
                    c.extend(self.many_keys(n));
                } else {
                    for _ in 0..n {
                        c.push(self.key());
                    }
                }
            }
            19 | 20 => {
                let op = self.pick(&["MSET", "MSETNX"]);
                let n = self.arity();
                c = vec![w(op)];
                if n > 8 {
                    for k in self.many_keys(n) {
                        c.push(k);
                        c.push(format!("{}", self.rng.gen_range(0..1000)).into_bytes());
                    }
                } else {
                    for _ in 0..n {
                        c.push(self.key());
                        c.push(self.value());
                    }
                }
                if self.rng.gen_range(0..10) == 0 {
                    c.pop(); // an odd count: wrong arity
                }
            }
            21 => {
                c = vec![
                    w(self.pick(&["RENAME", "RENAMENX", "COPY"])),
                    self.key(),
                    self.key(),
                ];
                if c[0] == b"COPY" && self.rng.gen_bool(0.5) {
                    c.push(w("REPLACE"));
                }
            }
            22..=24 => {
                c = vec![
                    w(self.pick(&["EXPIRE", "PEXPIRE", "EXPIREAT", "PEXPIREAT"])),
                    self.key(),
                    self.ttl(),
                ];
                if self.rng.gen_bool(0.3) {
                    c.push(w(self.pick(&["NX", "XX", "GT", "LT", "XY"])));
                }
            }
            25 => {
                c = vec![
                    w(self.pick(&["TTL", "PTTL", "EXPIRETIME", "PEXPIRETIME", "PERSIST"])),
                    self.key(),
                ]
            }
            26 => c = vec![w("KEYS"), self.pattern()],
            27 => {
                c = vec![w("SCAN"), w("0"), w("COUNT"), w("20000")];
                if self.rng.gen_bool(0.7) {
                    c.extend([w("MATCH"), self.pattern()]);
                }
                if self.rng.gen_bool(0.2) {
                    // Invalid, or large enough for one page (pages of a
                    // small COUNT differ by design: docs/REDIS.md).
                    let count = self.pick(&[
                        "0",
                        "-1",
                        "abc",
                        "",
                        "1.5",
                        "9223372036854775807",
                        "9223372036854775808",
                        "100000",
                    ]);
                    c.extend([w("COUNT"), w(count)]);
                }
                if self.rng.gen_bool(0.2) {
                    c.extend([w("TYPE"), w(self.pick(&["string", "list", "x"]))]);
                }
            }
            28 => c = vec![w("DBSIZE")],
            29 => c = vec![w("ECHO"), self.value()],
            30 => {
                c = vec![w("PING")];
                for _ in 0..self.rng.gen_range(0..3) {
                    c.push(self.value());
                }
            }
            31 => c = vec![w("SELECT"), self.number()],
            32 => c = vec![w("MOVE"), self.key(), self.number()],
            33 => {
                // A known command at a random arity (0 to 4 arguments).
                let op = self.pick(&[
                    "GET", "SET", "INCR", "APPEND", "GETRANGE", "SETRANGE", "EXPIRE", "MSET",
                    "MGET", "DEL", "RENAME", "TTL", "SETEX", "GETEX", "ECHO", "DBSIZE", "KEYS",
                ]);
                c = vec![w(op)];
                for _ in 0..self.rng.gen_range(0..5) {
                    c.push(self.key());
                }
            }
            34 => {
                c = vec![self.binary(6)];
                c.push(self.key());
            }
            35 => c = vec![w("get"), self.key()],
            36 => c = vec![w("SELECT"), w(self.pick(&["0", "1"]))],
            37 => c = vec![w("FLUSHDB")],
            38 => {
                // One past the key limit: nvdepot refuses it (documented).
                c = vec![
                    w(self.pick(&["SET", "GET", "DEL", "EXISTS"])),
                    over_limit_key(),
                ];
                if c[0] == b"SET" {
                    c.push(self.value());
                }
            }
            _ => {
                c = vec![
                    w("SET"),
                    format!("m{}", self.rng.gen_range(0..10_000)).into_bytes(),
                    self.number(),
                ]
            }
        }
        c
    }

    /// A TTL-like number: the boundaries, or a long valid one: as
    /// milliseconds (PX, PSETEX, PEXPIRE) at least 2.7 hours, never short
    /// enough to fire during a long run (Redis and nvdepot remove expired
    /// keys on different accesses, so DBSIZE would depend on timing).
    fn ttl(&mut self) -> Vec<u8> {
        match self.rng.gen_range(0..3) {
            0 => self
                .rng
                .gen_range(10_000_000..90_000_000)
                .to_string()
                .into_bytes(),
            _ => self
                .pick(&[
                    "0",
                    "-1",
                    "-9223372036854775808",
                    "9223372036854775807",
                    "9223372036854775",
                    "9223372036854776",
                    "4611686018427387904",
                    "2147483648",
                    "abc",
                    "1.5",
                    "",
                    "100000000",
                ])
                .as_bytes()
                .to_vec(),
        }
    }
}

pub fn encode(cmd: &[Vec<u8>], out: &mut Vec<u8>) {
    out.extend(format!("*{}\r\n", cmd.len()).bytes());
    for a in cmd {
        out.extend(format!("${}\r\n", a.len()).bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// `INFO nvdepot`'s `collection_pages`.
pub fn pages(conn: &mut Conn) -> u64 {
    nvdepot_stat(conn, "collection_pages")
}

/// The figure `name` of `INFO nvdepot`.
pub fn nvdepot_stat(conn: &mut Conn, name: &str) -> u64 {
    let info = vec![b"INFO".to_vec(), b"nvdepot".to_vec()];
    let Value::Bulk(Some(text)) = &pipeline(conn, &[info])[0] else {
        panic!("INFO answers a bulk string");
    };
    let prefix = format!("{name}:");
    String::from_utf8_lossy(text)
        .lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()).map(str::to_owned))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("{name} in INFO nvdepot"))
}

/// Sends a pipeline (from a writer thread, so that neither side blocks on
/// a full socket buffer) and reads one reply per command.
pub fn pipeline(db: &mut Conn, cmds: &[Vec<Vec<u8>>]) -> Vec<Value> {
    let mut bytes = Vec::new();
    for c in cmds {
        encode(c, &mut bytes);
    }
    let mut writer = db.stream.try_clone().unwrap();
    let sender = std::thread::spawn(move || writer.write_all(&bytes).map(|_| ()));
    let replies = (0..cmds.len()).map(|_| db.read()).collect();
    sender.join().unwrap().expect("send");
    replies
}

pub struct Conn {
    name: &'static str,
    stream: TcpStream,
    buf: Vec<u8>,
    /// Bytes of `buf` already parsed up to a value's end.
    start: usize,
}

impl Conn {
    pub fn connect(name: &'static str, addr: SocketAddr) -> Conn {
        let stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        Conn {
            name,
            stream,
            buf: Vec::new(),
            start: 0,
        }
    }

    /// Sends `bytes` as they are (the replies are read with `read`).
    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
    }

    pub fn read(&mut self) -> Value {
        loop {
            if let Some((v, n)) =
                nvdepot_resp::parse_value(&self.buf[self.start..]).expect("valid RESP")
            {
                self.start += n;
                if self.start > 1 << 20 {
                    self.buf.drain(..self.start);
                    self.start = 0;
                }
                return v;
            }
            let mut chunk = vec![0u8; 1 << 16];
            let n = match self.stream.read(&mut chunk) {
                Ok(n) => n,
                Err(e) => panic!("{}: no reply: {e}", self.name),
            };
            assert!(n > 0, "{}: connection closed", self.name);
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

pub fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib << 10
}

/// Replies the same, up to what may legitimately differ.
pub fn same(cmd: &[Vec<u8>], want: &Value, got: &Value) -> bool {
    if want == got {
        return true;
    }
    let name = String::from_utf8_lossy(&cmd[0]).to_ascii_uppercase();
    match name.as_str() {
        "TTL" | "EXPIRETIME" | "PTTL" | "PEXPIRETIME" => {
            // The seconds between the two servers' handling of the same
            // command: a pipeline of KEYS and SCANs (each reads every key
            // from flash) can take a while on a loaded host.
            let tolerance = if name.starts_with('P') { 30_000 } else { 30 };
            matches!((want, got), (Value::Integer(a), Value::Integer(b)) if *a >= 0 && *b >= 0 && (a - b).abs() <= tolerance)
        }
        "KEYS" => sorted(want).is_some() && sorted(want) == sorted(got),
        "SCAN" => match (want, got) {
            (Value::Array(Some(a)), Value::Array(Some(b))) if a.len() == 2 && b.len() == 2 => {
                // One page holds every key in both (COUNT 20000): cursor 0.
                a[0] == b[0] && sorted(&a[1]) == sorted(&b[1])
            }
            _ => false,
        },
        "INCRBYFLOAT" => {
            let float = |v: &Value| match v {
                Value::Bulk(Some(b)) => std::str::from_utf8(b).ok()?.parse::<f64>().ok(),
                _ => None,
            };
            // 64-bit floats against Redis's long double (docs/REDIS.md):
            // the sum of two values each rounded to 64 bits may land a few
            // units in the last place of the larger operand away
            // (922337203685477580 + 100: Redis 922337203685477680, nvdepot
            // 922337203685477800; 9223372036854775808 - 9223372036854775807:
            // Redis 1, nvdepot 0).
            let by = cmd
                .get(2)
                .and_then(|b| std::str::from_utf8(b).ok()?.parse::<f64>().ok())
                .unwrap_or(0.0)
                .abs();
            // Past f64's range (an increment or a result such as 1e309,
            // which Redis's long double holds): nvdepot refuses it, the
            // documented deviation (seed 113: 1e309 + -1e309, Redis 0).
            let refused = matches!(got, Value::Error(e)
                if e.windows(8).any(|w| w == b"Infinity") || e.ends_with(b"not a valid float"));
            if refused && (by.is_infinite() || float(want).is_some_and(|w| w.is_infinite())) {
                return true;
            }
            matches!((float(want), float(got)),
                (Some(a), Some(b)) if a == b
                    || (a - b).abs() <= 4.0 * f64::EPSILON * a.abs().max(b.abs()).max(by))
        }
        _ => false,
    }
}

pub fn sorted(v: &Value) -> Option<Vec<Vec<u8>>> {
    match v {
        Value::Array(Some(items)) => {
            let mut keys: Vec<Vec<u8>> = items
                .iter()
                .map(|i| format!("{i:?}").into_bytes())
                .collect();
            keys.sort();
            Some(keys)
        }
        _ => None,
    }
}

pub fn show(cmd: &[Vec<u8>]) -> String {
    cmd.iter()
        .map(|a| {
            if a.len() > 60 {
                format!(
                    "<{} bytes {:?}…>",
                    a.len(),
                    String::from_utf8_lossy(&a[..20])
                )
            } else {
                format!("{:?}", String::from_utf8_lossy(a))
            }
        })
        .take(12)
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn brief(v: &Value) -> String {
    let s = match v {
        Value::Error(e) => format!("-{}", String::from_utf8_lossy(e)),
        Value::Simple(e) => format!("+{}", String::from_utf8_lossy(e)),
        Value::Bulk(Some(b)) => format!("${:?}", String::from_utf8_lossy(b)),
        v => format!("{v:?}"),
    };
    if s.len() > 300 {
        format!("{}… ({} chars)", &s[..300], s.len())
    } else {
        s
    }
}

/// Redis answered a float past f64's range; nvdepot refused it.
pub fn past_f64(want: &Value, got: &Value) -> bool {
    let big = match want {
        Value::Bulk(Some(b)) => std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse::<f64>().ok())
            .is_some_and(|f| f.is_infinite()),
        _ => false,
    };
    big && *got == Value::Error(b"ERR increment would produce NaN or Infinity".to_vec())
}

/// The key one byte past nvdepot's limit.
pub fn over_limit_key() -> Vec<u8> {
    vec![b'M'; KEY_BYTES_MAX + 1]
}

/// Names the over-limit key: nvdepot answers an error, Redis does it.
pub fn over_key_limit(cmd: &[Vec<u8>]) -> bool {
    cmd.iter()
        .skip(1)
        .any(|a| a.len() == KEY_BYTES_MAX + 1 && a[0] == b'M')
}

/// The next pipeline of up to `n` commands. An INCRBYFLOAT ends its
/// pipeline: where its result differs in the last digits (the documented
/// deviation), both servers get Redis's value before anything reads it.
/// So does a command naming the over-limit key (deleted from Redis after).
pub fn next_pipeline<R: Rng>(g: &mut Gen<R>, n: usize) -> Vec<Cmd> {
    let mut cmds: Vec<Cmd> = Vec::new();
    while cmds.len() < n {
        let c = g.command();
        let ends = c[0] == b"INCRBYFLOAT" || over_key_limit(&c);
        cmds.push(c);
        if ends {
            break;
        }
    }
    cmds
}

/// Readies a pair of connections: Redis's active expiry off (it removes
/// expired keys at random times, nvdepot's sweep once a minute; off, both
/// remove them only when touched, so DBSIZE counts the same keys), both
/// stores empty.
pub fn prepare(a: &mut Conn, b: &mut Conn) {
    let no_active_expiry = vec![vec![
        b"DEBUG".to_vec(),
        b"SET-ACTIVE-EXPIRE".to_vec(),
        b"0".to_vec(),
    ]];
    assert_eq!(
        pipeline(a, &no_active_expiry),
        vec![Value::Simple(b"OK".to_vec())]
    );
    let flush = vec![vec![b"FLUSHALL".to_vec()]];
    assert_eq!(pipeline(a, &flush), pipeline(b, &flush));
}

/// Where the two servers' replies differed.
pub struct Mismatch {
    pub index: usize,
    pub want: Value,
    pub got: Value,
}

/// Sends `cmds` to Redis (`a`) and nvdepot (`b`) and compares every
/// reply, bringing the two back in step after a documented deviation.
pub fn compare(a: &mut Conn, b: &mut Conn, cmds: &[Cmd]) -> Result<(), Mismatch> {
    let want = pipeline(a, cmds);
    let got = pipeline(b, cmds);
    for (i, cmd) in cmds.iter().enumerate() {
        if over_key_limit(cmd) {
            // nvdepot refuses the key; reads and deletes find it absent.
            let refused = matches!(&got[i], Value::Error(e) if e.starts_with(b"ERR"));
            if cmd[0] == b"SET" && !refused {
                return Err(Mismatch {
                    index: i,
                    want: want[i].clone(),
                    got: got[i].clone(),
                });
            }
            continue;
        }
        if cmd[0] == b"INCRBYFLOAT" && want[i] != got[i] && same(cmd, &want[i], &got[i]) {
            let Value::Bulk(Some(v)) = &want[i] else {
                unreachable!()
            };
            let set = vec![vec![
                b"SET".to_vec(),
                cmd[1].clone(),
                v.clone(),
                b"KEEPTTL".to_vec(),
            ]];
            assert_eq!(pipeline(a, &set), pipeline(b, &set));
            continue;
        }
        if cmd[0] == b"INCRBYFLOAT" && past_f64(&want[i], &got[i]) {
            // Documented: a result past ±1.8e308 (Redis's long double
            // holds it) is refused as Infinity. Both drop the key.
            let del = vec![vec![b"DEL".to_vec(), cmd[1].clone()]];
            pipeline(a, &del);
            pipeline(b, &del);
            continue;
        }
        if !same(cmd, &want[i], &got[i]) {
            return Err(Mismatch {
                index: i,
                want: want[i].clone(),
                got: got[i].clone(),
            });
        }
    }
    if cmds.iter().any(|c| over_key_limit(c)) {
        // Drop the over-limit key from Redis, as nvdepot never held it.
        let del = vec![vec![b"DEL".to_vec(), over_limit_key()]];
        pipeline(a, &del);
    }
    Ok(())
}
