//! Arbitrary bytes on a text connection (fixed by a leading `mn`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use nvdepot_memcache_fuzz::{check, cuts, Grammar};

fuzz_target!(|data: &[u8]| {
    let (cuts, rest) = cuts(data);
    let mut input = b"mn\r\n".to_vec();
    input.extend_from_slice(rest);
    check(&input, &cuts, Grammar::Text);
});
