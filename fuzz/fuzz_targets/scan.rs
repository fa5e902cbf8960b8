//! The segment scanner over an arbitrary segment.
//!
//! Input: 8 bytes of segment sequence number (little-endian; missing bytes
//! are zero), then the bytes of the segment from offset 4096, where records
//! start (the header area is not read by the scanner).
//!
//! Properties: never panics; every yielded record is not a pad and is one
//! that `check_record` accepts with the same header, carries the segment's
//! sequence number, starts on a grain at or after the header area, lies
//! within the segment, does not overlap the previous one, and is exactly
//! the bytes of the image at its offset (an evictions record restored by
//! correcting one flipped bit: but for one bit); every invalid stretch the scan
//! went past lies on grains between two records, before the next one; the
//! scan stops (if it does) on a grain after the last record.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nvdepot_engine::format::{RecordCheck, RecordKind, SEGMENT_HEADER_BYTES};
use nvdepot_engine::fuzzing::{check_record, scan_image, SCAN_GRAIN_BYTES};

fuzz_target!(|data: &[u8]| {
    let (seq, records) = data.split_at(data.len().min(8));
    let header = SEGMENT_HEADER_BYTES as usize;
    let mut image = vec![0u8; header + records.len()];
    image[32..32 + seq.len()].copy_from_slice(seq);
    image[header..].copy_from_slice(records);
    let scan = scan_image(&image);
    // Invalid stretches: on grains, in order, apart, within the segment,
    // and clear of every record.
    let mut free_from = SEGMENT_HEADER_BYTES;
    for &(offset, len) in &scan.damaged {
        assert_eq!(offset % SCAN_GRAIN_BYTES, 0);
        assert!(len > 0 && offset >= free_from && offset + len <= scan.segment_bytes);
        free_from = offset + len;
        for r in &scan.records {
            let end = r.offset + r.bytes.len() as u64;
            assert!(end <= offset || r.offset >= offset + len, "stretch over a record");
        }
    }
    let mut next = SEGMENT_HEADER_BYTES;
    for r in &scan.records {
        // Pads are skipped; every other kind is a record (puts,
        // tombstones, evictions, large heads, batch frames and members).
        assert!(r.header.kind != RecordKind::Pad);
        assert_eq!(check_record(&r.bytes), RecordCheck::Valid(r.header));
        assert_eq!(r.bytes.len(), r.header.body_bytes());
        assert_eq!(r.header.segment_seq, scan.segment_seq);
        assert_eq!(r.offset % SCAN_GRAIN_BYTES, 0);
        assert!(
            r.offset >= next,
            "record at {} overlaps, next free {next}",
            r.offset
        );
        let end = r.offset + r.bytes.len() as u64;
        assert!(end <= scan.segment_bytes);
        let at = r.offset as usize;
        let mut expect = vec![0u8; r.bytes.len()];
        if at < image.len() {
            let n = (image.len() - at).min(expect.len());
            expect[..n].copy_from_slice(&image[at..at + n]);
        }
        if scan.repaired.contains(&r.offset) {
            // An evictions record restored by correcting one bit.
            assert_eq!(r.header.kind, RecordKind::Evictions);
            let flipped: u32 = expect
                .iter()
                .zip(&r.bytes)
                .map(|(a, b)| (a ^ b).count_ones())
                .sum();
            assert_eq!(flipped, 1, "record at {at} corrected by {flipped} bits");
        } else {
            assert!(expect == r.bytes, "record at {at} is not the image's bytes");
        }
        next = end.div_ceil(SCAN_GRAIN_BYTES) * SCAN_GRAIN_BYTES;
    }
    if let Some((offset, _)) = scan.stopped {
        assert!(offset >= next && offset < scan.segment_bytes);
        assert_eq!(offset % SCAN_GRAIN_BYTES, 0);
    }
});
