//! Arbitrary bytes on a binary connection (fixed by a leading Noop).
#![no_main]

use libfuzzer_sys::fuzz_target;
use nvdepot_memcache_fuzz::{check, cuts, Grammar};

const NOOP: [u8; 24] = [
    0x80, 0x0a, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
];

fuzz_target!(|data: &[u8]| {
    let (cuts, rest) = cuts(data);
    let mut input = NOOP.to_vec();
    // Bias toward requests: a stray byte is rarely a request magic.
    input.extend_from_slice(rest);
    check(&input, &cuts, Grammar::Binary);
});
