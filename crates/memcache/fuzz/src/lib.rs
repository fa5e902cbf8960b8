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
pub fn check_text(mut out: &[u8]) {
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
    }
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
