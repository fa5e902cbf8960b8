//! Meta commands: each input line gets a meta command chosen by its first
//! byte, so the fuzzer spends its time in flags and data blocks.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nvdepot_memcache_fuzz::{check, cuts, Grammar};

const COMMANDS: [&[u8]; 8] = [
    b"mg ", b"ms ", b"md ", b"ma ", b"me ", b"mn", b"ms k ", b"mg k ",
];

fuzz_target!(|data: &[u8]| {
    let (cuts, rest) = cuts(data);
    let mut input = b"mn\r\n".to_vec();
    for line in rest.split(|&b| b == b'\n') {
        if let Some((&sel, tail)) = line.split_first() {
            input.extend_from_slice(COMMANDS[usize::from(sel) % COMMANDS.len()]);
            input.extend_from_slice(tail);
        }
        input.extend_from_slice(b"\r\n");
    }
    check(&input, &cuts, Grammar::Text);
});
