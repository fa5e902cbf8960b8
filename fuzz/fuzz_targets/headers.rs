//! Superblock and segment header decoding on arbitrary bytes.
//!
//! Properties: never panics; an `Ok` result respects the format's limits
//! (`docs/FORMAT.md`) and re-encodes to exactly the bytes it came from.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nvdepot_engine::format::{
    DecodeError, FORMAT_VERSION, SEGMENT_HEADER_ENCODED, SUPERBLOCK_BYTES,
};
use nvdepot_engine::fuzzing::{decode_segment_header, decode_superblock};

fuzz_target!(|data: &[u8]| {
    match decode_superblock(data) {
        Ok(sb) => {
            assert_eq!(sb.format_version, FORMAT_VERSION);
            assert!(sb.grain_bytes.is_power_of_two());
            assert!((512..=4096).contains(&sb.grain_bytes));
            assert!(sb.segment_bytes >= 1 << 20);
            assert_eq!(sb.segment_bytes % sb.grain_bytes as u64, 0);
            assert!(sb.device_index < sb.device_count);
            let mut out = [0u8; SUPERBLOCK_BYTES];
            sb.encode(&mut out);
            assert_eq!(&out[..], &data[..SUPERBLOCK_BYTES], "{sb:?}");
        }
        Err(DecodeError::BadChecksum { stored, computed }) => assert_ne!(stored, computed),
        Err(_) => {}
    }
    match decode_segment_header(data) {
        Ok(h) => {
            let mut out = [0u8; SEGMENT_HEADER_ENCODED];
            h.encode(&mut out);
            assert_eq!(&out[..], &data[..SEGMENT_HEADER_ENCODED], "{h:?}");
        }
        Err(DecodeError::BadChecksum { stored, computed }) => assert_ne!(stored, computed),
        Err(_) => {}
    }
});
