//! The memcached shape-space generator and comparison, shared by
//! `tests/memcache_shapes.rs` (seeded runs) and the fuzz target
//! `crates/nvdepot/fuzz/fuzz_targets/memcache.rs` (libFuzzer's bytes
//! drive the generator's choices). See `memcache_shapes.rs` for what it
//! covers.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use rand::Rng;

pub const RSS_BOUND: u64 = 200 << 20;

/// memcached's `-I 1m`: the largest value of a key of `k` bytes with
/// non-zero flags is `ITEM_MAX - k - 59 - 4` (README, `-I`).
const ITEM_MAX: usize = 1 << 20;

const NUMBERS: &[&str] = &[
    "0",
    "1",
    "-1",
    "00",
    "+1",
    "4294967295",
    "4294967296",
    "-4294967296",
    "2147483647",
    "2147483648",
    "18446744073709551615",
    "18446744073709551616",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "2592000",
    "2592001",
    "abc",
    "1.5",
    "0x10",
    "1e3",
    "100",
];

pub struct Gen<R: Rng> {
    pub rng: R,
}

impl<R: Rng> Gen<R> {
    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.rng.gen_range(0..from.len())]
    }

    fn number(&mut self) -> String {
        match self.rng.gen_range(0..3) {
            0 => self.rng.gen_range(0..1000).to_string(),
            _ => self.pick(NUMBERS).to_string(),
        }
    }

    /// An expiry that never fires during the run (nor lands in the past
    /// by a clock tick between the servers): 0, far away, or invalid.
    fn exptime(&mut self) -> String {
        self.pick(&[
            "0",
            "0",
            "100000",
            "2592000",
            "-1",
            "abc",
            "4294967296",
            "1e3",
        ])
        .to_string()
    }

    fn key(&mut self) -> Vec<u8> {
        match self.rng.gen_range(0..100) {
            0..=69 => format!("k{}", self.rng.gen_range(0..8)).into_bytes(),
            70..=74 => vec![b'K'; 250],
            75..=78 => vec![b'K'; 251],
            79..=82 => b"\x01\x7f\xc3\xa9\t".to_vec(),
            83..=86 => b"a%b{c}".to_vec(),
            _ => format!("m{}", self.rng.gen_range(0..5000)).into_bytes(),
        }
    }

    fn value(&mut self) -> Vec<u8> {
        let len = match self.rng.gen_range(0..100) {
            0..=9 => 0,
            10..=59 => self.rng.gen_range(1..20),
            60..=84 => self.rng.gen_range(20..5000),
            85..=94 => self.rng.gen_range(5000..100_000),
            // Around the item limit: under, at and over it.
            _ => ITEM_MAX - self.rng.gen_range(0..400),
        };
        (0..len)
            .map(|_| match self.rng.gen_range(0..10) {
                0 => b'\r',
                1 => b'\n',
                2 => 0,
                _ => b'a' + self.rng.gen_range(0..26),
            })
            .collect()
    }

    fn noreply(&mut self, line: &mut Vec<u8>) {
        if self.rng.gen_range(0..6) == 0 {
            line.extend_from_slice(b" noreply");
        }
    }

    /// One request: its bytes.
    pub fn request(&mut self) -> Vec<u8> {
        let mut r = Vec::new();
        match self.rng.gen_range(0..24) {
            0..=7 => {
                let cmd = self.pick(&["set", "set", "add", "replace", "append", "prepend", "cas"]);
                let mut value = self.value();
                let key = self.key();
                let flags = if self.rng.gen_bool(0.7) {
                    self.rng.gen_range(0..100).to_string()
                } else {
                    self.number()
                };
                let exptime = self.exptime();
                // Never a length longer than the data that follows, past
                // one byte: both servers would wait for it (or swallow the
                // next requests as data, `mn` included).
                let declared = match self.rng.gen_range(0..20) {
                    0 => (value.len() + 1).to_string(),
                    1 => value.len().saturating_sub(1).to_string(),
                    2 => self
                        .pick(&["-1", "abc", "4294967296", "2147483647", "2147483646", "1.5"])
                        .to_string(),
                    _ => value.len().to_string(),
                };
                let unique =
                    self.pick(&["0", "abc", "-1", "18446744073709551615", "9999999999999"]);
                let header_valid = key.len() <= 250
                    && safe_strtoul(&flags)
                    && safe_strtol(&exptime)
                    && declared
                        .parse::<i32>()
                        .is_ok_and(|d| (0..=i32::MAX - 2).contains(&d))
                    && (cmd != "cas" || safe_strtoul(unique));
                if !header_valid {
                    // The data line is then read as a command: one short
                    // line of it (a megabyte of lines read as commands is
                    // its own study: see the closing note of issue 35).
                    value.truncate(self.rng.gen_range(0..200));
                    for b in &mut value {
                        if matches!(*b, b'\r' | b'\n' | 0) {
                            *b = b'.';
                        }
                    }
                }
                r.extend_from_slice(cmd.as_bytes());
                r.push(b' ');
                r.extend(key);
                r.extend(format!(" {flags} {exptime} {declared}").bytes());
                if cmd == "cas" {
                    // Never a unique either server gave out: both answer
                    // alike (EXISTS, NOT_FOUND or an error).
                    r.extend(format!(" {unique}").bytes());
                }
                self.noreply(&mut r);
                r.extend_from_slice(b"\r\n");
                let one_more = declared == (value.len() + 1).to_string();
                r.extend(value);
                r.extend_from_slice(b"\r\n");
                if one_more {
                    // The byte the length claims beyond the data, so that
                    // the next request (or the closing `mn`) is not eaten.
                    r.extend_from_slice(b"\r\n");
                }
            }
            8..=11 => {
                r.extend_from_slice(self.pick(&["get", "gets", "get", "get"]).as_bytes());
                let n = match self.rng.gen_range(0..20) {
                    0 => self.rng.gen_range(100..5000),
                    1..=3 => self.rng.gen_range(5..100),
                    _ => self.rng.gen_range(1..5),
                };
                for _ in 0..n {
                    r.push(b' ');
                    let k = if n > 50 {
                        format!("m{}", self.rng.gen_range(0..5000)).into_bytes()
                    } else {
                        self.key()
                    };
                    r.extend(k);
                }
                r.extend_from_slice(b"\r\n");
            }
            12 | 13 => {
                r.extend(format!("{} ", self.pick(&["incr", "decr"])).bytes());
                r.extend(self.key());
                r.extend(format!(" {}", self.number()).bytes());
                self.noreply(&mut r);
                r.extend_from_slice(b"\r\n");
            }
            14 => {
                r.extend_from_slice(b"delete ");
                r.extend(self.key());
                if self.rng.gen_range(0..8) == 0 {
                    r.extend_from_slice(b" 0");
                }
                self.noreply(&mut r);
                r.extend_from_slice(b"\r\n");
            }
            15 => {
                r.extend_from_slice(b"touch ");
                r.extend(self.key());
                r.extend(format!(" {}", self.exptime()).bytes());
                self.noreply(&mut r);
                r.extend_from_slice(b"\r\n");
            }
            16 => {
                r.extend(format!("{} {}", self.pick(&["gat", "gats"]), self.exptime()).bytes());
                for _ in 0..self.rng.gen_range(1..4) {
                    r.push(b' ');
                    r.extend(self.key());
                }
                r.extend_from_slice(b"\r\n");
            }
            17 => {
                // A known command at a random arity (storage commands at
                // most 3 arguments: with 4, a random length would have both
                // servers wait for, or swallow, that many bytes).
                let cmd = self.pick(&[
                    "set", "get", "incr", "delete", "touch", "gat", "cas", "append",
                ]);
                r.extend_from_slice(cmd.as_bytes());
                let most = if matches!(cmd, "set" | "cas" | "append") {
                    4
                } else {
                    7
                };
                for _ in 0..self.rng.gen_range(0..most) {
                    r.push(b' ');
                    r.extend(self.number().bytes());
                }
                r.extend_from_slice(b"\r\n");
            }
            18 => r.extend_from_slice(
                self.pick(&["bogus\r\n", "GET k1\r\n", "\r\n", " \r\n", "get\r\n"])
                    .as_bytes(),
            ),
            19 => {
                // Set a numeric value at a boundary (incr/decr's input).
                let v = self.pick(&[
                    "18446744073709551615",
                    "18446744073709551614",
                    "0",
                    "1",
                    " 1",
                    "1 ",
                    "007",
                    "-1",
                    "abc",
                ]);
                r.extend(
                    format!(
                        "set k{} 0 0 {}\r\n{v}\r\n",
                        self.rng.gen_range(0..8),
                        v.len()
                    )
                    .bytes(),
                );
            }
            20 => {
                // Many keys of the multi-get range at once.
                for _ in 0..self.rng.gen_range(1..200) {
                    let v = self.rng.gen_range(0..1000).to_string();
                    r.extend(
                        format!(
                            "set m{} 0 0 {} noreply\r\n{v}\r\n",
                            self.rng.gen_range(0..5000),
                            v.len()
                        )
                        .bytes(),
                    );
                }
            }
            21 => r.extend_from_slice(b"flush_all\r\n"),
            22 => {
                // A key longer than 250 bytes in a storage command: the
                // line is refused and the data line read as a command.
                // (Up to 2 000 bytes: a longer line without a newline closes
                // both, memcached without sending what it had queued.)
                let mut value = self.value();
                value.truncate(2000);

                r.extend(
                    format!(
                        "set {} 0 0 {}\r\n",
                        "L".repeat(251 + self.rng.gen_range(0..300)),
                        value.len()
                    )
                    .bytes(),
                );
                r.extend(
                    value
                        .iter()
                        .map(|&b| if b == b'\r' || b == b'\n' { b'.' } else { b }),
                );
                r.extend_from_slice(b"\r\n");
            }
            _ => {
                r.extend_from_slice(b"verbosity ");
                r.extend(self.number().bytes());
                r.extend_from_slice(b"\r\n");
            }
        }
        r
    }
}

/// Whether memcached's `safe_strtol` takes `s`: C's strtol (leading
/// spaces, a sign, digits, no overflow of a long), then only spaces or
/// the end (the value is cut to 32 bits, never refused for it).
pub fn safe_strtol(s: &str) -> bool {
    let t = s.trim_start();
    let digits = t.strip_prefix(['+', '-']).unwrap_or(t);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) && t.parse::<i64>().is_ok()
}

/// Whether memcached's `safe_strtoul` takes `s`: strtoul's grammar, no
/// overflow of 64 bits, and a '-' only where the value stays positive as
/// a long.
pub fn safe_strtoul(s: &str) -> bool {
    let t = s.trim_start();
    let (neg, digits) = match t.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return false;
    }
    let Ok(v) = digits.parse::<u64>() else {
        return false;
    };
    let v = if neg { v.wrapping_neg() } else { v };
    !((v as i64) < 0 && s.contains('-'))
}

/// A get-family request naming a key over 250 bytes.
pub fn drops_queued(r: &[u8]) -> bool {
    let line = r.split(|&b| b == b'\n').next().unwrap_or_default();
    let mut words = line
        .split(|&b| b == b' ' || b == b'\r')
        .filter(|w| !w.is_empty());
    matches!(words.next(), Some(b"get" | b"gets" | b"gat" | b"gats"))
        && words.any(|w| w.len() > 250)
}

pub struct Conn {
    name: &'static str,
    stream: TcpStream,
}

impl Conn {
    pub fn connect(name: &'static str, addr: SocketAddr) -> Conn {
        let stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        Conn { name, stream }
    }

    /// Sends `requests` and a closing `set`/`get` of a marker value no
    /// request can produce, and reads everything up to the marker's reply
    /// (or to the connection's close: then `true`). A closing `mn` was
    /// not enough: a data line read as a command may be an `mn` too.
    pub fn pipeline(&mut self, requests: &[u8]) -> (Vec<u8>, bool) {
        static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let marker = format!(
            "end-{}-{:x}",
            SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            std::process::id()
        );
        let mut bytes = requests.to_vec();
        bytes.extend(
            format!(
                "set zz-end 0 0 {} noreply\r\n{marker}\r\nget zz-end\r\n",
                marker.len()
            )
            .bytes(),
        );
        let done = format!("{marker}\r\nEND\r\n").into_bytes();
        let mut writer = self.stream.try_clone().unwrap();
        let sender = std::thread::spawn(move || {
            let _ = writer.write_all(&bytes);
        });
        let mut got = Vec::new();
        let mut chunk = vec![0u8; 1 << 16];
        let closed = loop {
            if got.ends_with(&done) {
                break false;
            }
            match self.stream.read(&mut chunk) {
                Ok(0) => break true,
                Ok(n) => got.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break true,
                Err(e) => panic!("{}: no reply: {e}", self.name),
            }
        };
        sender.join().unwrap();
        if !closed {
            // The marker's reply is the same in both; the key varies.
            let cut = got.len() - done.len();
            got.truncate(cut);
        }
        (got, closed)
    }
}

/// Replaces the CAS unique of `VALUE key flags bytes cas` lines with `#`,
/// and unpads a number padded with trailing spaces (its length shrinks to
/// match): memcached pads an incremented number to its old length only
/// when it can change the item in place, which depends on whether another
/// thread holds a reference to it then; nvdepot always pads (as
/// `differential.rs` masks it too).
pub fn mask_cas(stream: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(stream.len());
    let mut at = 0;
    while at < stream.len() {
        let end = match stream[at..].windows(2).position(|w| w == b"\r\n") {
            Some(i) => at + i + 2,
            None => stream.len(),
        };
        let line = &stream[at..end];
        let Some(rest) = line.strip_prefix(b"VALUE ") else {
            out.extend_from_slice(line);
            at = end;
            continue;
        };
        // key flags bytes [cas]: the key may hold odd bytes but no space.
        let rest = rest.strip_suffix(b"\r\n").unwrap_or(rest);
        let fields: Vec<&[u8]> = rest.split(|&b| b == b' ').collect();
        let bytes: usize = fields
            .get(2)
            .and_then(|b| std::str::from_utf8(b).ok()?.parse().ok())
            .unwrap_or(0);
        let data_end = (end + bytes).min(stream.len());
        let mut data = &stream[end..data_end];
        let digits = data.iter().take_while(|b| b.is_ascii_digit()).count();
        if digits > 0 && digits < data.len() && data[digits..].iter().all(|&b| b == b' ') {
            data = &data[..digits];
        }
        out.extend_from_slice(b"VALUE ");
        out.extend_from_slice(fields[0]);
        if let Some(flags) = fields.get(1) {
            out.push(b' ');
            out.extend_from_slice(flags);
        }
        out.extend(format!(" {}", data.len()).bytes());
        if fields.len() > 3 {
            out.extend_from_slice(b" #");
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(data);
        at = data_end;
    }
    out
}

pub fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib << 10
}

pub fn show(bytes: &[u8]) -> String {
    let s = String::from_utf8_lossy(bytes);
    if s.len() > 400 {
        format!(
            "{}… ({} bytes)",
            &s[..s.char_indices().nth(400).map_or(s.len(), |c| c.0)],
            bytes.len()
        )
    } else {
        s.into_owned()
    }
}

/// Where two streams first differ, with some context of each.
pub fn first_difference(a: &[u8], b: &[u8]) -> String {
    let i = a
        .iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(b.len()));
    let from = i.saturating_sub(120);
    let esc = |x: &[u8], lo: usize, hi: usize| {
        format!(
            "{:?} >>> {:?}",
            String::from_utf8_lossy(&x[lo..i.min(x.len())]),
            String::from_utf8_lossy(&x[i.min(x.len())..hi.min(x.len())])
        )
    };
    format!(
        "at byte {i}:\nmemcached: {}\nnvdepot:   {}",
        esc(a, from, i + 160),
        esc(b, from, i + 160)
    )
}

/// The next pipeline of up to `n` requests. A get with a key over 250
/// bytes goes in a pipeline of its own (`held` keeps it for the next):
/// memcached then drops every reply still queued on the connection
/// (conn_release_items, "Kill any stacked responses we had"), the earlier
/// requests' included; nvdepot answers every request (crates/memcache
/// README, differences).
pub fn next_pipeline<R: Rng>(g: &mut Gen<R>, n: usize, held: &mut Option<Vec<u8>>) -> Vec<Vec<u8>> {
    let mut requests: Vec<Vec<u8>> = Vec::new();
    while requests.len() < n {
        let r = held.take().unwrap_or_else(|| g.request());
        if drops_queued(&r) && !requests.is_empty() {
            *held = Some(r);
            break;
        }
        let alone = drops_queued(&r);
        requests.push(r);
        if alone {
            break;
        }
    }
    requests
}

/// Sends `requests` to memcached (`a`) and nvdepot (`b`): `Ok(closed)`
/// when the reply streams (CAS masked) and closes agree, else where they
/// differ.
pub fn compare(a: &mut Conn, b: &mut Conn, requests: &[Vec<u8>]) -> Result<bool, String> {
    let bytes = requests.concat();
    let (want, want_closed) = a.pipeline(&bytes);
    let (got, got_closed) = b.pipeline(&bytes);
    let (want, got) = (mask_cas(&want), mask_cas(&got));
    if want != got || want_closed != got_closed {
        return Err(format!(
            "replies differ (closed: memcached {want_closed}, nvdepot {got_closed}) {}",
            first_difference(&want, &got)
        ));
    }
    Ok(want_closed)
}
