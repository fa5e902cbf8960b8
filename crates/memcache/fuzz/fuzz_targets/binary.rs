//! Binary connections: mostly well-framed requests built from the fuzz
//! input (so the fuzzer reaches the commands rather than the framing
//! checks), with raw bytes and randomly shaped requests mixed in. Each
//! request has its own opaque, and the replies to the well-framed requests
//! before the first raw bytes or random shape must follow the rules
//! (`check_binary_rules`: one per request, in order, none for a quiet
//! success).
#![no_main]

use libfuzzer_sys::fuzz_target;
use nvdepot_memcache_fuzz::{check, check_binary_rules, cuts, run, BinaryRequest, Grammar};

/// Extras length each opcode expects (0x00..=0x24).
fn extras_len(op: u8) -> usize {
    match op {
        0x01..=0x03 | 0x11..=0x13 => 8,
        0x05 | 0x06 | 0x15 | 0x16 => 20,
        0x1c..=0x1e | 0x23 | 0x24 => 4,
        _ => 0,
    }
}

/// Opcodes whose request carries a value (set, add, replace, append,
/// prepend and their quiet forms); others read none, so a value there
/// would be taken for the next request.
fn takes_value(op: u8) -> bool {
    matches!(op, 0x01..=0x03 | 0x11..=0x13 | 0x0e | 0x0f | 0x19 | 0x1a)
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
    let mut requests = vec![BinaryRequest {
        opcode: 0x0a,
        opaque: 0,
    }];
    // Requests before the first raw bytes or randomly shaped request.
    let mut framed: Option<usize> = None;
    while rest.len() >= 4 {
        let h = take(&mut rest, 4);
        if h[0] == 0xff {
            // Raw bytes, as the fuzzer gives them.
            let n = usize::from(h[1]);
            input.extend_from_slice(take(&mut rest, n));
            framed.get_or_insert(requests.len());
            continue;
        }
        let op = h[0] % 0x26;
        let key = take(&mut rest, usize::from(h[1] % 6));
        let shaped = h[3] & 0x80 == 0;
        if !shaped {
            framed.get_or_insert(requests.len());
        }
        let extras = if shaped {
            take(&mut rest, extras_len(op)).to_vec()
        } else {
            take(&mut rest, usize::from(h[3] % 24)).to_vec()
        };
        let value = if shaped && !takes_value(op) {
            &[][..]
        } else {
            take(&mut rest, usize::from(h[2] % 80))
        };
        let body = extras.len() + key.len() + value.len();
        input.extend_from_slice(&[0x80, op]);
        input.extend_from_slice(&(key.len() as u16).to_be_bytes());
        input.push(extras.len() as u8);
        input.extend_from_slice(&[0, 0, 0]);
        input.extend_from_slice(&(body as u32).to_be_bytes());
        let opaque = requests.len() as u32;
        requests.push(BinaryRequest { opcode: op, opaque });
        input.extend_from_slice(&opaque.to_be_bytes());
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
    let (out, closed, _) = run(&input, &[]);
    let n = framed.unwrap_or(requests.len());
    check_binary_rules(&out, &requests[..n], closed, framed.is_none());
});
