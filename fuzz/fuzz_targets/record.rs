//! `check_record` on arbitrary bytes.
//!
//! Properties: never panics; `Truncated { need }` asks for more than it
//! was given; a `Valid` put or tombstone lies within the input, its header
//! and key also pass `check_record_head`, and re-encoding the decoded
//! header with `encode_record` over the same key and value reproduces the
//! input byte for byte; a `Valid` pad (whose checksums cover its header
//! only, so it may claim more bytes than were given) re-encodes to the
//! same header with `encode_pad_header`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nvdepot_engine::format::{
    check_record_head, encode_pad_header, encode_record, record_bytes, FlushMark, RecordCheck,
    RecordKind, RECORD_HEADER_BYTES,
};
use nvdepot_engine::fuzzing::check_record;

fuzz_target!(|data: &[u8]| {
    let h = match check_record(data) {
        RecordCheck::Valid(h) => h,
        RecordCheck::Truncated { need } => {
            assert!(
                need > data.len(),
                "truncated, needs {need} of {}",
                data.len()
            );
            return;
        }
        RecordCheck::Invalid(_) => return,
    };
    let end = h.body_bytes();
    let k = RECORD_HEADER_BYTES + h.key_len as usize;
    if h.kind == RecordKind::Pad {
        assert!(data.len() >= RECORD_HEADER_BYTES && end >= RECORD_HEADER_BYTES);
        let mut out = [0u8; RECORD_HEADER_BYTES];
        encode_pad_header(&mut out, end, h.segment_seq);
        assert!(matches!(check_record(&out), RecordCheck::Valid(p)
            if p.value_len == h.value_len && p.segment_seq == h.segment_seq));
        // Only a canonical pad (no stray fields) re-encodes byte for byte.
        let canonical =
            h.key_len == 0 && h.namespace == 0 && h.seq == 0 && h.flushed == FlushMark::default();
        if canonical {
            assert_eq!(&out[..], &data[..RECORD_HEADER_BYTES]);
        }
        return;
    }
    assert!(end >= RECORD_HEADER_BYTES && end <= data.len());
    assert_eq!(
        check_record_head(&data[..k]),
        RecordCheck::Valid(h),
        "whole record valid, header and key not"
    );
    let (key, value) = (&data[RECORD_HEADER_BYTES..k], &data[k..end]);
    let mut out = vec![0u8; record_bytes(key.len(), value.len(), 512)];
    assert_eq!(encode_record(&mut out, &h, key, value), end);
    assert_eq!(&out[..end], &data[..end], "re-encoding {h:?} differs");
    assert!(out[end..].iter().all(|&b| b == 0));
});
