//! Checks shared by the fuzz targets: beyond "no panic", every target
//! checks the protocol's rules and the connection's limits.
//!
//! * `Fed::consumed` never exceeds the input;
//! * the output is well-formed: text replies are `\r\n`-terminated lines,
//!   with `VALUE`/`VA` data blocks of the announced length; binary replies
//!   are whole response packets (magic 0x81, consistent lengths);
//! * nothing stored breaks the limits (key length, value size);
//! * the same input cut into reads at fuzzer-chosen points gives the same
//!   output (framing does not depend on how bytes arrive).

use std::sync::Arc;

use nvdepot_memcache::testing::MemStorage;
use nvdepot_memcache::{Connection, Limits, ServerStats};

/// Small limits so that oversized keys and values are cheap to reach.
pub const LIMITS: Limits = Limits {
    key_bytes_max: 250,
    item_bytes_max: 64,
};

/// Which reply grammar to check.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Grammar {
    Text,
    Binary,
}

/// Feeds `input` in chunks ending at `cuts` (as a server would: unconsumed
/// bytes are fed again with the next chunk). Returns the output, whether
/// the connection closed, and the storage.
pub fn run(input: &[u8], cuts: &[usize]) -> (Vec<u8>, bool, Arc<MemStorage>) {
    let storage = Arc::new(MemStorage::new());
    let stats = Arc::new(ServerStats::default());
    let mut conn = Connection::new(storage.clone(), stats, LIMITS);
    let mut ends: Vec<usize> = cuts.iter().map(|&c| c.min(input.len())).collect();
    ends.sort_unstable();
    ends.push(input.len());
    let (mut buf, mut out, mut start) = (Vec::new(), Vec::new(), 0);
    for end in ends {
        buf.extend_from_slice(&input[start..end]);
        start = end;
        loop {
            let fed = conn.feed_ready(&buf, &mut out);
            assert!(
                fed.consumed <= buf.len(),
                "consumed {} of {}",
                fed.consumed,
                buf.len()
            );
            buf.drain(..fed.consumed);
            if fed.close {
                return (out, true, storage);
            }
            // Paused with output to send: fed again at once, as the kit does.
            if !fed.more {
                break;
            }
        }
    }
    (out, false, storage)
}

/// Runs `input` whole and cut at `cuts`, and checks every rule.
pub fn check(input: &[u8], cuts: &[usize], grammar: Grammar) {
    let (out, closed, storage) = run(input, &[]);
    match grammar {
        Grammar::Text => check_text(&out),
        Grammar::Binary => check_binary(&out),
    }
    for (key, item) in storage.items() {
        assert!(
            key.len() <= LIMITS.key_bytes_max,
            "stored key of {} bytes",
            key.len()
        );
        assert!(!key.is_empty(), "stored an empty key");
        assert!(
            item.value.len() <= LIMITS.item_bytes_max,
            "stored {} bytes",
            item.value.len()
        );
        assert_ne!(item.cas, 0);
    }
    let (split_out, split_closed, _) = run(input, cuts);
    assert_eq!(closed, split_closed, "close differs when cut at {cuts:?}");
    assert_eq!(
        mask(&out, grammar),
        mask(&split_out, grammar),
        "output differs when cut at {cuts:?}"
    );
}

/// Byte counters in `stats` depend on how input was cut; hide them.
fn mask(out: &[u8], grammar: Grammar) -> Vec<u8> {
    let names: [&[u8]; 2] = [b"bytes_read", b"bytes_written"];
    match grammar {
        Grammar::Text => {
            let mut v = Vec::with_capacity(out.len());
            for line in out.split_inclusive(|&b| b == b'\n') {
                if names
                    .iter()
                    .any(|n| line.starts_with(&[b"STAT ", *n].concat()))
                {
                    continue;
                }
                v.extend_from_slice(line);
            }
            v
        }
        Grammar::Binary => {
            let mut v = Vec::with_capacity(out.len());
            for p in packets(out) {
                let (kl, el) = (
                    usize::from(u16::from_be_bytes([p[2], p[3]])),
                    usize::from(p[4]),
                );
                if p[1] == 0x10 && names.contains(&&p[24 + el..24 + el + kl]) {
                    continue;
                }
                v.extend_from_slice(p);
            }
            v
        }
    }
}

/// Checks text replies: lines end in `\r\n`; `VALUE` and `VA` lines are
/// followed by a data block of the announced length and `\r\n`.
pub fn check_text(out: &[u8]) {
    text_units(out);
}

/// Splits binary output into packets, checking each header.
fn packets(mut out: &[u8]) -> Vec<&[u8]> {
    let mut v = Vec::new();
    while !out.is_empty() {
        assert!(out.len() >= 24, "truncated response header");
        assert_eq!(out[0], 0x81, "response magic");
        let kl = usize::from(u16::from_be_bytes([out[2], out[3]]));
        let el = usize::from(out[4]);
        let bl = u32::from_be_bytes([out[8], out[9], out[10], out[11]]) as usize;
        assert!(kl + el <= bl, "key and extras longer than the body");
        assert!(out.len() >= 24 + bl, "truncated response body");
        v.push(&out[..24 + bl]);
        out = &out[24 + bl..];
    }
    v
}

/// Checks binary replies are whole, well-formed packets.
pub fn check_binary(out: &[u8]) {
    let _ = packets(out);
}

/// Cut points from the fuzzer's first bytes: returns (cuts, rest).
pub fn cuts(data: &[u8]) -> (Vec<usize>, &[u8]) {
    let Some((&n, rest)) = data.split_first() else {
        return (Vec::new(), data);
    };
    let n = usize::from(n % 4).min(rest.len() / 2);
    let (raw, rest) = rest.split_at(n * 2);
    let cuts = raw
        .chunks(2)
        .map(|c| usize::from(u16::from_le_bytes([c[0], c[1]])))
        .collect();
    (cuts, rest)
}

// ---- the reply rules ----

/// A generated meta request, as the reply rules see it.
pub struct MetaRequest {
    /// `b'g'`, `b's'`, `b'd'`, `b'a'` or `b'n'` (mg ms md ma mn).
    pub cmd: u8,
    /// Has a `q` flag.
    pub quiet: bool,
    /// Has an `N` flag (an `ma` that creates the item answers `HD` even
    /// under `q`, as memcached).
    pub vivify: bool,
    /// Its `O` flag, when within the length limit (echoed by a status).
    pub opaque: Option<Vec<u8>>,
}

/// Text output as reply units: each line, its data block skipped;
/// panics on a malformed reply (see [`check_text`]).
fn text_units(mut out: &[u8]) -> Vec<&[u8]> {
    let mut v = Vec::new();
    while !out.is_empty() {
        let end = out
            .windows(2)
            .position(|w| w == b"\r\n")
            .unwrap_or_else(|| panic!("reply without \\r\\n: {:?}", String::from_utf8_lossy(out)));
        let line = &out[..end];
        out = &out[end + 2..];
        let len_token = if line.starts_with(b"VALUE ") {
            Some(3)
        } else if line.starts_with(b"VA ") {
            Some(1)
        } else {
            None
        };
        if let Some(i) = len_token {
            let tok = line.split(|&b| b == b' ').nth(i).expect("length token");
            let n: usize = std::str::from_utf8(tok).unwrap().parse().unwrap();
            assert!(out.len() >= n + 2, "short data block");
            assert_eq!(&out[n..n + 2], b"\r\n", "data block not terminated");
            out = &out[n + 2..];
        } else {
            assert!(!line.is_empty(), "empty reply line");
        }
        v.push(line);
    }
    v
}

/// The reply rules of meta requests, each sent followed by an `mn`
/// barrier (after the leading `mn` every input starts with): between two
/// barriers' `MN` is exactly the one reply of the request in between, in
/// order, except that `q` hides memcached's nominal code (mg: `EN`; ms,
/// md, ma: `HD`, but not the `HD` of an `ma` that created its item), and
/// then nothing is sent. A status reply echoes the
/// request's opaque; an error is one `ERROR`/`CLIENT_ERROR`/`SERVER_ERROR`
/// line.
pub fn check_meta_rules(out: &[u8], reqs: &[MetaRequest]) {
    let units = text_units(out);
    let show = |u: &[u8]| String::from_utf8_lossy(u).into_owned();
    let mut it = units.into_iter();
    assert_eq!(it.next().map(show).as_deref(), Some("MN"), "leading mn");
    for (i, r) in reqs.iter().enumerate() {
        let mut replies = Vec::new();
        loop {
            let u = it
                .next()
                .unwrap_or_else(|| panic!("request {i}: output ends before its barrier"));
            if u == b"MN" && !(r.cmd == b'n' && replies.is_empty()) {
                break;
            }
            replies.push(u);
        }
        match replies.as_slice() {
            [] => assert!(r.quiet, "request {i} (m{}) got no reply", r.cmd as char),
            [u] if r.cmd == b'n' => assert_eq!(*u, b"MN", "request {i}: mn"),
            [u] => {
                let code = &u[..u.len().min(2)];
                if [&b"HD"[..], b"VA", b"EN", b"NF", b"NS", b"EX"].contains(&code) {
                    let nominal: &[u8] = if r.cmd == b'g' { b"EN" } else { b"HD" };
                    let shown = r.cmd == b'a' && r.vivify;
                    assert!(
                        !(r.quiet && code == nominal && !shown),
                        "request {i}: quiet, yet answered {}",
                        show(u)
                    );
                    if let Some(o) = &r.opaque {
                        assert!(
                            u.split(|&b| b == b' ').any(|t| t == &o[..]),
                            "request {i}: reply {} lacks its opaque",
                            show(u)
                        );
                    }
                } else {
                    assert!(
                        u == b"ERROR"
                            || u.starts_with(b"CLIENT_ERROR ")
                            || u.starts_with(b"SERVER_ERROR "),
                        "request {i}: reply {}",
                        show(u)
                    );
                }
            }
            many => panic!(
                "request {i} got {} replies: {:?}",
                many.len(),
                many.iter().map(|u| show(u)).collect::<Vec<_>>()
            ),
        }
    }
    if let Some(u) = it.next() {
        panic!("a reply after the last request: {}", show(u));
    }
}

/// A generated binary request, as the reply rules see it.
pub struct BinaryRequest {
    pub opcode: u8,
    /// Unique per request.
    pub opaque: u32,
}

/// memcached's quiet opcodes: no reply on success (a hit still answers
/// the quiet gets; their miss is silent).
fn quiet(op: u8) -> bool {
    matches!(op, 0x09 | 0x0d | 0x11..=0x1a | 0x1e | 0x24)
}

fn quiet_get(op: u8) -> bool {
    matches!(op, 0x09 | 0x0d | 0x1e | 0x24)
}

/// The reply rules of binary requests, each with its own opaque: replies
/// come in request order, carrying their request's opaque; a request gets
/// one reply (`stat` one or more), except the quiet ones: no reply for a
/// success (quiet gets: for a miss), one otherwise (a quiet mutation's
/// reply is an error). A quit that is not refused closes the connection,
/// and nothing after it is answered; after an unknown opcode (whose body
/// memcached over-reads) nothing more is checked. `all`: `reqs` are all
/// the requests (otherwise replies after theirs are not checked).
pub fn check_binary_rules(out: &[u8], reqs: &[BinaryRequest], closed: bool, all: bool) {
    let replies = packets(out);
    let opaque = |p: &[u8]| u32::from_be_bytes([p[12], p[13], p[14], p[15]]);
    let status = |p: &[u8]| u16::from_be_bytes([p[6], p[7]]);
    let mut at = 0;
    let trace = || {
        let asked: Vec<String> = reqs
            .iter()
            .map(|r| format!("{:#04x}/{}", r.opcode, r.opaque))
            .collect();
        let got: Vec<String> = replies
            .iter()
            .map(|p| format!("{:#04x}/{}:{:#x}", p[1], opaque(p), status(p)))
            .collect();
        format!("requests (opcode/opaque) {asked:?}, replies (opcode/opaque:status) {got:?}, closed {closed}")
    };
    for (i, r) in reqs.iter().enumerate() {
        let start = at;
        // Only stat answers with several packets.
        while at < replies.len()
            && opaque(replies[at]) == r.opaque
            && (at == start || r.opcode == 0x10)
        {
            at += 1;
        }
        let mine = &replies[start..at];
        for p in mine {
            assert_eq!(p[1], r.opcode, "request {i}: reply opcode");
        }
        let op = r.opcode;
        if closed && mine.is_empty() && at == replies.len() && !quiet(op) {
            // The connection closed at or before this request.
            break;
        }
        match mine.len() {
            0 => assert!(
                quiet(op),
                "request {i} (opcode {op:#04x}) got no reply; {}",
                trace()
            ),
            1 => {
                if quiet(op) && !quiet_get(op) {
                    assert_ne!(status(mine[0]), 0, "request {i}: a quiet success answered");
                }
                if quiet_get(op) {
                    assert_ne!(status(mine[0]), 1, "request {i}: a quiet miss answered");
                }
            }
            _ => {} // stat's several packets
        }
        // An unknown opcode's body is swallowed from after its key, as
        // memcached over-reads it: the framing of what follows is lost.
        if mine.iter().any(|p| status(p) == 0x81) {
            return;
        }
        // A quit that is not refused (bad extras, key or value) closes.
        if (op == 0x07 || op == 0x17) && mine.iter().all(|p| status(p) == 0) {
            assert!(closed, "request {i}: quit did not close");
            break;
        }
    }
    if all && at < replies.len() {
        panic!(
            "reply {at} (opaque {}) matches no request in order",
            opaque(replies[at])
        );
    }
}
