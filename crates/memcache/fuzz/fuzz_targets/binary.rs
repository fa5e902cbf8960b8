//! Binary connections: mostly well-framed requests built from the fuzz
//! input (so the fuzzer reaches the commands rather than the framing
//! checks), with raw bytes mixed in.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nvdepot_memcache_fuzz::{check, cuts, Grammar};

/// Extras length each opcode expects (0x00..=0x24).
fn extras_len(op: u8) -> usize {
    match op {
        0x01..=0x03 | 0x11..=0x13 => 8,
        0x05 | 0x06 | 0x15 | 0x16 => 20,
        0x1c..=0x1e | 0x23 | 0x24 => 4,
        _ => 0,
    }
}

/// Takes `n` bytes from `data` (fewer at its end).
fn take<'a>(data: &mut &'a [u8], n: usize) -> &'a [u8] {
    let (a, b) = data.split_at(n.min(data.len()));
    *data = b;
    a
}

fuzz_target!(|data: &[u8]| {
    let (cuts, mut rest) = cuts(data);
    let mut input = vec![
        0x80, 0x0a, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];
    while rest.len() >= 4 {
        let h = take(&mut rest, 4);
        if h[0] == 0xff {
            // Raw bytes, as the fuzzer gives them.
            let n = usize::from(h[1]);
            input.extend_from_slice(take(&mut rest, n));
            continue;
        }
        let op = h[0] % 0x26;
        let key = take(&mut rest, usize::from(h[1] % 6));
        let extras = if h[3] & 0x80 == 0 {
            take(&mut rest, extras_len(op)).to_vec()
        } else {
            take(&mut rest, usize::from(h[3] % 24)).to_vec()
        };
        let value = take(&mut rest, usize::from(h[2] % 80));
        let body = extras.len() + key.len() + value.len();
        input.extend_from_slice(&[0x80, op]);
        input.extend_from_slice(&(key.len() as u16).to_be_bytes());
        input.push(extras.len() as u8);
        input.extend_from_slice(&[0, 0, 0]);
        input.extend_from_slice(&(body as u32).to_be_bytes());
        input.extend_from_slice(&[0, 0, 0, h[3]]);
        // A small CAS now and then, so CAS paths can match.
        let cas = if h[3] & 0x40 != 0 {
            u64::from(h[3] & 0x07)
        } else {
            0
        };
        input.extend_from_slice(&cas.to_be_bytes());
        input.extend_from_slice(&extras);
        input.extend_from_slice(key);
        input.extend_from_slice(value);
    }
    check(&input, &cuts, Grammar::Binary);
});
