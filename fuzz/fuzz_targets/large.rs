//! The large-value parsers on arbitrary bytes: `LargeDescriptor::decode`
//! (a large head's value) and `parse_chunk_key` (a chunk record's key).
//!
//! Properties: never panics; a decoded descriptor is consistent (chunk
//! count = ⌈length / chunk bytes⌉, every chunk 1..=chunk bytes long, the
//! chunk lengths summing to the length) and re-encodes to the input byte
//! for byte; a parsed chunk key rebuilds with `chunk_key` to the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nvdepot_engine::format::{chunk_key, parse_chunk_key, LargeDescriptor};

fuzz_target!(|data: &[u8]| {
    if let Some(d) = LargeDescriptor::decode(data) {
        assert_eq!(&d.encode()[..], data, "re-encoding {d:?} differs");
        assert!(d.chunk_bytes > 0);
        assert_eq!(d.len.div_ceil(u64::from(d.chunk_bytes)), u64::from(d.chunks));
        // The lengths of a few chunks (a descriptor may name billions).
        let last = d.chunks.saturating_sub(1);
        let mut total = 0u64;
        for i in (0..d.chunks.min(64)).chain(last.max(64)..d.chunks) {
            let n = d.chunk_len(i) as u64;
            assert!(n >= 1 && n <= u64::from(d.chunk_bytes), "chunk {i} of {d:?}: {n}");
            total += n;
        }
        if d.chunks <= 64 {
            assert_eq!(total, d.len, "{d:?}");
        }
    }
    if let Some((owner, generation, index)) = parse_chunk_key(data) {
        assert_eq!(chunk_key(owner, generation, index), data);
    }
});
