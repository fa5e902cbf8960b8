//! memcached fidelity by differential testing: seeded random sequences of
//! text, meta and binary commands over a handful of keys (so commands
//! collide) go to stock memcached and to `nvdepot memcache` side by side,
//! and every reply must be the same byte for byte, except what may
//! legitimately differ:
//!
//! - CAS uniques: each server's are renamed `#0`, `#1`, ... in order of
//!   first appearance (so equal stays equal and new stays new), and a
//!   request that quotes a CAS quotes each server its own (0, "no CAS",
//!   is compared as it is);
//! - remaining TTLs (`t<secs>` of the meta protocol) become `t*`, since a
//!   second may tick between the two servers, and so do seconds since
//!   the last access (`l<secs>` become `l*`), which memcached moves only
//!   on some hits (when its LRU thread last ran decides which);
//! - `me` (a debug dump) becomes `ME *`;
//! - a number padded with spaces loses the padding (and its length shrinks
//!   to match): memcached pads an incremented number to its old length
//!   only when it can change the item in place, which depends on whether
//!   another thread holds a reference to it at that moment; nvdepot always
//!   pads (as memcached's in-place path).
//!
//! Left out of the generated requests: `stats` and binary Stat (counters
//! differ by nature), `version` and binary Version (nvdepot says
//! `1.6.18-nvdepot`), quit (it ends the run's connection).
//!
//! A mismatch fails the test with the shortest request sequence found that
//! still reproduces it. `NVDEPOT_DIFF_OPS` sets the number of requests per
//! seed (default 1500), `NVDEPOT_DIFF_SEEDS` the seeds (default 3), and
//! `NVDEPOT_DIFF_PEER=memcached` runs the check against a second memcached
//! instead (which must agree 100 %, or the masking is wrong).

mod common;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use common::{env_or, temp_dir, RefServer, Server};

const KEYS: usize = 5;
/// The largest number the generator stores (2^62) and its largest delta:
/// a run of a few thousand requests cannot carry a value to 2^63 (see
/// `Gen::value`).
const BIG: u64 = 1 << 62;
const BIG_DELTA: &str = "1000000000";

/// One piece of a request: bytes, or the CAS unique a server gave out as
/// the `n`th distinct one (each server gets its own).
#[derive(Clone, Debug)]
enum Part {
    Bytes(Vec<u8>),
    Cas(usize),
    /// Key `i`, with the run's key prefix.
    Key(usize),
    /// Key `i` base64-encoded (meta `b` flag).
    Key64(usize),
    /// The 8-byte big-endian CAS of a binary header.
    BinCas(Option<usize>),
    /// A binary frame's body length (u32 BE) for a frame whose key is the
    /// run-prefixed key `key` and whose other body bytes number `rest`.
    BinBodyLen {
        key: usize,
        rest: usize,
    },
    /// A binary frame's key length (u16 BE).
    BinKeyLen(usize),
}

#[derive(Clone, Debug)]
struct Request {
    parts: Vec<Part>,
    binary: bool,
}

/// Per-server state of a run: its CAS uniques by order of appearance.
#[derive(Default)]
struct CasMap {
    ids: HashMap<u64, usize>,
    values: Vec<u64>,
}

impl CasMap {
    fn id(&mut self, cas: u64) -> usize {
        if let Some(&id) = self.ids.get(&cas) {
            return id;
        }
        self.values.push(cas);
        self.ids.insert(cas, self.values.len() - 1);
        self.values.len() - 1
    }
}

fn key_name(prefix: &str, i: usize) -> String {
    format!("{prefix}k{i}")
}

fn base64(data: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(T[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

impl Request {
    /// The bytes for one server, or `None` if it quotes a CAS that server
    /// never gave out (a shrunk sequence that lost its origin).
    fn render(&self, prefix: &str, cas: &CasMap) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        for p in &self.parts {
            match p {
                Part::Bytes(b) => out.extend_from_slice(b),
                Part::Cas(id) => out.extend_from_slice(cas.values.get(*id)?.to_string().as_bytes()),
                Part::Key(i) => out.extend_from_slice(key_name(prefix, *i).as_bytes()),
                Part::Key64(i) => {
                    out.extend_from_slice(base64(key_name(prefix, *i).as_bytes()).as_bytes())
                }
                Part::BinCas(id) => {
                    let v = match id {
                        Some(id) => *cas.values.get(*id)?,
                        None => 0,
                    };
                    out.extend_from_slice(&v.to_be_bytes());
                }
                Part::BinBodyLen { key, rest } => {
                    let n = key_name(prefix, *key).len() + rest;
                    out.extend_from_slice(&(n as u32).to_be_bytes());
                }
                Part::BinKeyLen(i) => {
                    out.extend_from_slice(&(key_name(prefix, *i).len() as u16).to_be_bytes())
                }
            }
        }
        Some(out)
    }
}

// ---- generation ----

struct Gen {
    rng: StdRng,
    /// CAS ids seen so far (on the reference server).
    cas_seen: usize,
}

impl Gen {
    fn key(&mut self) -> usize {
        self.rng.gen_range(0..KEYS)
    }

    fn cas(&mut self) -> Part {
        if self.cas_seen > 0 && self.rng.gen_bool(0.8) {
            let lo = self.cas_seen.saturating_sub(6);
            Part::Cas(self.rng.gen_range(lo..self.cas_seen))
        } else {
            Part::Bytes(b"987654321".to_vec())
        }
    }

    /// Numbers stay below 2^63 (the big value and the big deltas are far
    /// from it): memcached 1.6.18's `safe_strtoull`, for a number that
    /// is negative as an `i64`, looks for a '-' with `strchr` from the
    /// start of the item's data, past the value's "\r\n" into whatever
    /// the slab holds after it, up to a NUL byte. So its incr/decr of such
    /// a value answers `non-numeric value` or not by the memory after the
    /// item (seen in CI: `decr` of 18446744073709551615, not reproduced
    /// on a replay). Wrap-around at 2^64 is covered by the protocol
    /// crate's tests (crates/memcache/tests/text.rs).
    fn value(&mut self) -> Vec<u8> {
        match self.rng.gen_range(0..4) {
            0 => self.rng.gen_range(0u64..100).to_string().into_bytes(),
            1 => BIG.to_string().into_bytes(),
            2 => Vec::new(),
            _ => {
                let n = self.rng.gen_range(1..12);
                (0..n).map(|_| self.rng.gen_range(b'a'..=b'z')).collect()
            }
        }
    }

    fn exptime(&mut self) -> &'static str {
        ["0", "0", "0", "1000", "-1"][self.rng.gen_range(0..5)]
    }

    fn text(&mut self) -> Request {
        let b = |s: &str| Part::Bytes(s.as_bytes().to_vec());
        let noreply = if self.rng.gen_bool(0.1) {
            " noreply"
        } else {
            ""
        };
        let k = self.key();
        let parts = match self.rng.gen_range(0..16) {
            0 | 1 => {
                let cmd = ["get", "gets"][self.rng.gen_range(0..2)];
                let mut p = vec![b(&format!("{cmd} ")), Part::Key(k)];
                if self.rng.gen_bool(0.3) {
                    p.push(b(" "));
                    p.push(Part::Key(self.key()));
                }
                p.push(b("\r\n"));
                p
            }
            2..=5 => {
                let cmd = ["set", "add", "replace", "append", "prepend"][self.rng.gen_range(0..5)];
                let v = self.value();
                let flags = self.rng.gen_range(0..3);
                let e = self.exptime();
                let mut p = vec![b(&format!("{cmd} ")), Part::Key(k)];
                p.push(b(&format!(" {flags} {e} {}{noreply}\r\n", v.len())));
                p.push(Part::Bytes([v, b"\r\n".to_vec()].concat()));
                p
            }
            6 => {
                let v = self.value();
                let mut p = vec![b("cas "), Part::Key(k)];
                p.push(b(&format!(" 0 0 {} ", v.len())));
                p.push(self.cas());
                p.push(b(&format!("{noreply}\r\n")));
                p.push(Part::Bytes([v, b"\r\n".to_vec()].concat()));
                p
            }
            7 | 8 => {
                let cmd = ["incr", "decr"][self.rng.gen_range(0..2)];
                let d = ["1", "5", BIG_DELTA, "0"][self.rng.gen_range(0..4)];
                vec![
                    b(&format!("{cmd} ")),
                    Part::Key(k),
                    b(&format!(" {d}{noreply}\r\n")),
                ]
            }
            9 => vec![b("delete "), Part::Key(k), b(&format!("{noreply}\r\n"))],
            10 => {
                let e = self.exptime();
                vec![b("touch "), Part::Key(k), b(&format!(" {e}{noreply}\r\n"))]
            }
            11 => {
                let cmd = ["gat", "gats"][self.rng.gen_range(0..2)];
                let e = self.exptime();
                vec![b(&format!("{cmd} {e} ")), Part::Key(k), b("\r\n")]
            }
            // (`mn` follows every request: the runner's end marker.)
            12 => match self.rng.gen_range(0..10) {
                0 => vec![b(&format!("flush_all{noreply}\r\n"))],
                1..=3 => vec![b("verbosity 1\r\n")],
                // Not a command: short, and longer than memcached's
                // 2 KiB read buffer.
                4..=6 => vec![b("bogus command here\r\n")],
                7 => vec![b(&format!(
                    "{}\r\n",
                    "x".repeat(self.rng.gen_range(2000..2100))
                ))],
                // An opaque token around its 32-byte limit.
                _ => {
                    let n = self.rng.gen_range(28..36);
                    vec![
                        b("mg "),
                        Part::Key(k),
                        b(&format!(" v O{}\r\n", "o".repeat(n))),
                    ]
                }
            },
            _ => self.meta(k),
        };
        Request {
            parts,
            binary: false,
        }
    }

    fn meta(&mut self, k: usize) -> Vec<Part> {
        let b = |s: &str| Part::Bytes(s.as_bytes().to_vec());
        let base64 = self.rng.gen_bool(0.15);
        let key = if base64 { Part::Key64(k) } else { Part::Key(k) };
        let mut flags: Vec<Part> = Vec::new();
        if base64 {
            flags.push(b(" b"));
        }
        let mut pick = |rng: &mut StdRng, options: &[&str], p: f64| {
            for o in options {
                if rng.gen_bool(p) {
                    flags.push(Part::Bytes(format!(" {o}").into_bytes()));
                }
            }
        };
        match self.rng.gen_range(0..6) {
            // `me`: its line is masked (a debug dump), its miss is not.
            5 => {
                let mut p = vec![b("me "), key];
                if base64 {
                    p.push(b(" b"));
                }
                p.push(b("\r\n"));
                p
            }
            0 | 1 => {
                // R50, not R30: an item made by N30 or `md T30` has 30 s
                // left, and whether R30 wins it would depend on whether
                // each server's clock has ticked since (as `t` does).
                pick(
                    &mut self.rng,
                    &[
                        "v", "k", "c", "f", "s", "t", "q", "Oab", "T100", "N30", "R50", "u", "h",
                        "l",
                    ],
                    0.25,
                );
                [vec![b("mg "), key], flags, vec![b("\r\n")]].concat()
            }
            2 => {
                pick(
                    &mut self.rng,
                    &["c", "T100", "F7", "I", "q", "k", "Oxy"],
                    0.2,
                );
                if self.rng.gen_bool(0.3) {
                    let m = ["E", "A", "P", "R", "S"][self.rng.gen_range(0..5)];
                    flags.push(b(&format!(" M{m}")));
                }
                if self.rng.gen_bool(0.25) {
                    flags.push(b(" C"));
                    flags.push(self.cas());
                }
                let v = self.value();
                [
                    vec![b("ms "), key, b(&format!(" {}", v.len()))],
                    flags,
                    vec![b("\r\n"), Part::Bytes([v, b"\r\n".to_vec()].concat())],
                ]
                .concat()
            }
            3 => {
                pick(&mut self.rng, &["q", "I", "T30", "k", "Oq1"], 0.25);
                if self.rng.gen_bool(0.25) {
                    flags.push(b(" C"));
                    flags.push(self.cas());
                }
                [vec![b("md "), key], flags, vec![b("\r\n")]].concat()
            }
            _ => {
                pick(
                    &mut self.rng,
                    &[
                        "N100", "J13", "D3", "T100", "MD", "M+", "q", "t", "c", "v", "k", "Ozz",
                    ],
                    0.2,
                );
                if self.rng.gen_bool(0.15) {
                    flags.push(b(" C"));
                    flags.push(self.cas());
                }
                [vec![b("ma "), key], flags, vec![b("\r\n")]].concat()
            }
        }
    }

    /// A binary request: one command, or a quiet one; the runner closes
    /// every request with a Noop.
    fn binary(&mut self) -> Request {
        let k = self.key();
        let op: u8 = [
            0x00, 0x09, 0x0c, 0x0d, // get getq getk getkq
            0x01, 0x02, 0x03, 0x11, 0x12, 0x13, // set add replace (+ quiet)
            0x04, 0x14, // delete, deleteq
            0x05, 0x06, 0x15, 0x16, // incr decr (+ quiet)
            0x0e, 0x0f, 0x19, 0x1a, // append prepend (+ quiet)
            0x1c, 0x1d, 0x1e, // touch gat gatq
            0x23, 0x24, // gatk gatkq
        ][self.rng.gen_range(0..25)];
        let (extras, value): (Vec<u8>, Vec<u8>) = match op {
            0x01 | 0x02 | 0x03 | 0x11 | 0x12 | 0x13 => {
                let mut e = (self.rng.gen_range(0u32..3)).to_be_bytes().to_vec();
                let exp: u32 = [0, 0, 1000][self.rng.gen_range(0..3)];
                e.extend_from_slice(&exp.to_be_bytes());
                (e, self.value())
            }
            0x05 | 0x06 | 0x15 | 0x16 => {
                let delta: u64 = [1, 7, BIG_DELTA.parse().unwrap()][self.rng.gen_range(0..3)];
                let mut e = delta.to_be_bytes().to_vec();
                e.extend_from_slice(&self.rng.gen_range(0u64..50).to_be_bytes());
                let exp: u32 = [0, u32::MAX, 1000][self.rng.gen_range(0..3)];
                e.extend_from_slice(&exp.to_be_bytes());
                (e, Vec::new())
            }
            0x0e | 0x0f | 0x19 | 0x1a => (Vec::new(), self.value()),
            0x1c..=0x1e | 0x23 | 0x24 => ([0, 0, 3, 232].to_vec(), Vec::new()),
            _ => (Vec::new(), Vec::new()),
        };
        let cas = if self.rng.gen_bool(0.15) && self.cas_seen > 0 {
            Some(
                self.rng
                    .gen_range(self.cas_seen.saturating_sub(4)..self.cas_seen),
            )
        } else {
            None
        };
        let parts = vec![
            Part::Bytes(vec![0x80, op]),
            Part::BinKeyLen(k),
            Part::Bytes(vec![extras.len() as u8, 0, 0, 0]),
            Part::BinBodyLen {
                key: k,
                rest: extras.len() + value.len(),
            },
            Part::Bytes(vec![0, 0, 0, op]), // opaque
            Part::BinCas(cas),
            Part::Bytes(extras),
            Part::Key(k),
            Part::Bytes(value),
        ];
        Request {
            parts,
            binary: true,
        }
    }
}

// ---- servers and replies ----

/// A server under comparison and the connections of one run to it.
struct Peer {
    addr: SocketAddr,
    text: Option<TcpStream>,
    binary: Option<TcpStream>,
    cas: CasMap,
}

const NOOP: [u8; 24] = [
    0x80, 0x0a, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0,
];

impl Peer {
    fn new(addr: SocketAddr) -> Peer {
        Peer {
            addr,
            text: None,
            binary: None,
            cas: CasMap::default(),
        }
    }

    fn connect(&self) -> TcpStream {
        let s = TcpStream::connect(self.addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.set_nodelay(true).unwrap();
        s
    }

    /// Sends one request and returns its normalized reply.
    fn call(&mut self, req: &Request, prefix: &str) -> Option<String> {
        let bytes = req.render(prefix, &self.cas)?;
        Some(if req.binary {
            self.call_binary(&bytes)
        } else {
            self.call_text(&bytes)
        })
    }

    fn call_text(&mut self, bytes: &[u8]) -> String {
        let mut s = self.text.take().unwrap_or_else(|| self.connect());
        // `mn` after the request: its `MN` ends the request's replies,
        // quiet or not.
        s.write_all(&[bytes, b"mn\r\n"].concat()).unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        let closed = loop {
            if got.ends_with(b"MN\r\n") {
                break false;
            }
            match s.read(&mut buf) {
                Ok(0) | Err(_) => break true,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        };
        if !closed {
            got.truncate(got.len() - 4);
            self.text = Some(s);
        }
        let mut out = self.normalize_text(&got);
        if closed {
            out.push_str("<closed>");
        }
        out
    }

    fn normalize_text(&mut self, raw: &[u8]) -> String {
        let text = String::from_utf8_lossy(raw);
        let mut out = String::new();
        let mut data_next = false;
        let lines: Vec<&str> = text.split_inclusive("\r\n").collect();
        for (n, line) in lines.iter().enumerate() {
            let line = *line;
            if data_next {
                out.push_str(&unpad(line.trim_end_matches("\r\n")));
                out.push_str(if line.ends_with("\r\n") { "\r\n" } else { "" });
                data_next = false;
                continue;
            }
            // The length of a padded number's data, unpadded.
            let data_len = lines
                .get(n + 1)
                .map(|d| unpad(d.trim_end_matches("\r\n")).len().to_string());
            let body = line.trim_end_matches("\r\n");
            let mut words: Vec<String> = body.split(' ').map(str::to_owned).collect();
            match words[0].as_str() {
                "VALUE" => {
                    if words.len() == 5 {
                        if let Ok(c) = words[4].parse::<u64>() {
                            if c != 0 {
                                words[4] = format!("#{}", self.cas.id(c));
                            }
                        }
                    }
                    if let (Some(len), true) = (&data_len, words.len() >= 4) {
                        words[3] = len.clone();
                    }
                    data_next = true;
                }
                "ME" => words = vec!["ME".into(), "*".into()],
                "VA" | "HD" | "EN" | "NF" | "NS" | "EX" => {
                    data_next = words[0] == "VA";
                    if let (Some(len), true) = (&data_len, data_next && words.len() >= 2) {
                        words[1] = len.clone();
                    }
                    for w in words.iter_mut().skip(1) {
                        if let Some(n) = w
                            .strip_prefix('c')
                            .and_then(|d| d.parse::<u64>().ok())
                            .filter(|&n| n != 0)
                        {
                            *w = format!("c#{}", self.cas.id(n));
                        } else if w.starts_with('t') && w != "t-1" && w[1..].parse::<u64>().is_ok()
                        {
                            *w = "t*".into();
                        } else if w.starts_with('l') && w[1..].parse::<u64>().is_ok() {
                            *w = "l*".into();
                        }
                    }
                }
                _ => {}
            }
            out.push_str(&words.join(" "));
            out.push_str(if line.ends_with("\r\n") { "\r\n" } else { "" });
        }
        out
    }

    fn call_binary(&mut self, frame: &[u8]) -> String {
        let mut s = self.binary.take().unwrap_or_else(|| self.connect());
        s.write_all(&[frame, &NOOP[..]].concat()).unwrap();
        let mut out = String::new();
        loop {
            let mut h = [0u8; 24];
            if s.read_exact(&mut h).is_err() {
                out.push_str("<closed>");
                return out;
            }
            let body = u32::from_be_bytes([h[8], h[9], h[10], h[11]]) as usize;
            let mut b = vec![0u8; body];
            if s.read_exact(&mut b).is_err() {
                out.push_str("<closed>");
                return out;
            }
            if h[1] == 0x0a && h[12..16] == [0xff; 4] {
                self.binary = Some(s);
                return out;
            }
            let cas = u64::from_be_bytes(h[16..24].try_into().unwrap());
            let cas = if cas == 0 {
                "0".to_string()
            } else {
                format!("#{}", self.cas.id(cas))
            };
            let (klen, elen) = (u16::from_be_bytes([h[2], h[3]]) as usize, h[4] as usize);
            out.push_str(&format!(
                "[op {:#04x} status {:#06x} extras {:?} key {:?} value {:?} cas {cas}]",
                h[1],
                u16::from_be_bytes([h[6], h[7]]),
                &b[..elen.min(b.len())],
                String::from_utf8_lossy(&b[elen.min(b.len())..(elen + klen).min(b.len())]),
                unpad(&String::from_utf8_lossy(&b[(elen + klen).min(b.len())..])),
            ));
        }
    }
}

/// A number padded with trailing spaces, unpadded; anything else as is.
fn unpad(data: &str) -> String {
    let digits = data.trim_end_matches(' ');
    if digits.len() < data.len() && !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
    {
        digits.to_string()
    } else {
        data.to_string()
    }
}

// ---- running ----

/// Runs `requests` on fresh connections to both servers under key prefix
/// `prefix`; returns the index of the first differing reply, with both.
fn first_mismatch(
    reference: SocketAddr,
    subject: SocketAddr,
    requests: &[Request],
    prefix: &str,
) -> Option<(usize, String, String)> {
    let (mut a, mut b) = (Peer::new(reference), Peer::new(subject));
    for (i, r) in requests.iter().enumerate() {
        let Some(want) = a.call(r, prefix) else {
            return None; // quotes a CAS this sequence never produced
        };
        let Some(got) = b.call(r, prefix) else {
            return Some((i, want, "<cas never given out>".into()));
        };
        if want != got {
            return Some((i, want, got));
        }
    }
    None
}

/// The shortest sequence (greedy, one request at a time) that still shows
/// a mismatch, as it would be typed.
fn shrink(reference: SocketAddr, subject: SocketAddr, failing: &[Request]) -> String {
    let mut seq: Vec<Request> = failing.to_vec();
    let mut run = 0u64;
    let mut prefix = || {
        run += 1;
        format!("s{run}-")
    };
    // Cut to the first mismatch, then remove chunks of halving size
    // (ddmin-like) while a mismatch remains.
    if let Some((at, ..)) = first_mismatch(reference, subject, &seq, &prefix()) {
        seq.truncate(at + 1);
    }
    let mut chunk = seq.len().div_ceil(2).max(1);
    loop {
        let mut i = 0;
        while i < seq.len() {
            let mut shorter = seq.clone();
            shorter.drain(i..(i + chunk).min(seq.len()));
            let p = prefix();
            match first_mismatch(reference, subject, &shorter, &p) {
                Some((at, ..)) => {
                    shorter.truncate(at + 1);
                    seq = shorter;
                }
                None => i += chunk,
            }
        }
        if chunk == 1 {
            break;
        }
        chunk = chunk.div_ceil(2);
    }
    let p = prefix();
    let Some((_, want, got)) = first_mismatch(reference, subject, &seq, &p) else {
        return format!(
            "a mismatch that does not reproduce on a replay of the {} requests (timing?)",
            failing.len()
        );
    };
    // As typed (CAS uniques quoted as `<#n>`).
    let typed: Vec<String> = seq
        .iter()
        .map(|r| {
            let shown = Request {
                parts: r
                    .parts
                    .iter()
                    .map(|p| match p {
                        Part::Cas(id) => Part::Bytes(format!("<#{id}>").into_bytes()),
                        other => other.clone(),
                    })
                    .collect(),
                binary: r.binary,
            };
            let bytes = shown.render("", &CasMap::default()).unwrap_or_default();
            if r.binary {
                format!("binary {:02x?}", bytes)
            } else {
                format!("{:?}", String::from_utf8_lossy(&bytes))
            }
        })
        .collect();
    format!(
        "{} request(s):\n  {}\nlast reply, memcached: {want:?}\nlast reply, the other: {got:?}",
        seq.len(),
        typed.join("\n  ")
    )
}

fn compare(reference: SocketAddr, subject: SocketAddr) {
    let ops: usize = env_or("NVDEPOT_DIFF_OPS", 1500);
    let seeds: usize = env_or("NVDEPOT_DIFF_SEEDS", 3);
    for seed in 0..seeds as u64 {
        let mut gen = Gen {
            rng: StdRng::seed_from_u64(seed),
            cas_seen: 0,
        };
        let prefix = format!("r{seed}-");
        let (mut a, mut b) = (Peer::new(reference), Peer::new(subject));
        let mut sent = Vec::with_capacity(ops);
        // Requests per protocol: binary, classic text, meta.
        let mut kinds = [0usize; 3];
        for i in 0..ops {
            let r = if gen.rng.gen_bool(0.25) {
                gen.binary()
            } else {
                gen.text()
            };
            kinds[match &r.parts[0] {
                _ if r.binary => 0,
                Part::Bytes(b) if b.len() >= 2 && b[0] == b'm' && b"gsdane".contains(&b[1]) => 2,
                _ => 1,
            }] += 1;
            sent.push(r.clone());
            let want = a.call(&r, &prefix).expect("generated from seen CAS");
            let got = b.call(&r, &prefix);
            gen.cas_seen = a.cas.values.len();
            if got.as_deref() != Some(want.as_str()) {
                eprintln!(
                    "differential: seed {seed}, request {i} {:?}: memcached {want:?}, the other {got:?}; shrinking",
                    String::from_utf8_lossy(&r.render(&prefix, &a.cas).unwrap_or_default())
                );
                let report = shrink(reference, subject, &sent);
                panic!("seed {seed}, request {i}: replies differ.\n{report}");
            }
        }
        eprintln!(
            "differential: seed {seed}: {ops} requests ({} binary, {} text, {} meta), every reply the same",
            kinds[0], kinds[1], kinds[2]
        );
    }
}

/// Stock memcached, without its LRU background threads, which briefly
/// hold items and so make an `incr`'s in-place update (and its space
/// padding) depend on timing.
fn memcached() -> Option<RefServer> {
    let args = [
        "-l",
        "127.0.0.1",
        "-U",
        "0",
        "-m",
        "64",
        "-t",
        "2",
        "-u",
        "root",
        "-o",
        "no_lru_crawler,no_lru_maintainer",
    ];
    RefServer::start_or_skip("memcached", &args, "-p", "memcached")
}

#[test]
fn replies_match_memcached() {
    let Some(reference) = memcached() else {
        return;
    };
    if std::env::var("NVDEPOT_DIFF_PEER").as_deref() == Ok("memcached") {
        let other = memcached().expect("a second memcached");
        compare(reference.addr, other.addr);
        return;
    }
    let dir = temp_dir();
    let server = Server::start_with(&dir.path().join("store"), &[]);
    compare(reference.addr, server.addr);
}
