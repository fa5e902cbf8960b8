//! `check_record` on arbitrary bytes.
//!
//! Properties: never panics; `Truncated { need }` asks for more than it
//! was given; a `Valid` record lies within the input, its header and key
//! also pass `check_record_head`, and re-encoding the decoded header with
//! `encode_record` (or `encode_pad`) over the same key and value
//! reproduces the input byte for byte.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nvdepot_engine::format::{
    check_record_head, encode_pad, encode_record, record_bytes, RecordCheck, RecordKind,
    RECORD_HEADER_BYTES,
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
    assert!(end >= RECORD_HEADER_BYTES && end <= data.len());
    let k = RECORD_HEADER_BYTES + h.key_len as usize;
    if h.kind == RecordKind::Pad {
        // A pad checksums its header only; its filler is not covered, so
        // only the header is compared, and only for a canonical pad.
        let mut out = vec![0xa5u8; end];
        encode_pad(&mut out, h.segment_seq);
        assert!(matches!(check_record(&out), RecordCheck::Valid(p)
            if p.value_len == h.value_len && p.segment_seq == h.segment_seq));
        if h.key_len == 0 && h.namespace == 0 && h.seq == 0 {
            assert_eq!(&out[..RECORD_HEADER_BYTES], &data[..RECORD_HEADER_BYTES]);
        }
        return;
    }
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
