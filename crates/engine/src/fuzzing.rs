//! The on-device parsers, exposed for fuzzing and tests only.
//!
//! Not part of nvdepot's API (the module is `#[doc(hidden)]`) and not
//! stable: it exists so that `fuzz/` and `tests/parsers.rs` can drive the
//! real decoding code with arbitrary bytes, including the crate-private
//! checkpoint decoder and segment scanner, without widening the real API.

use std::sync::Arc;

use nvdepot_io::{AlignedBuf, Device, MemDevice};

use crate::format::{
    self, DecodeError, RecordCheck, RecordHeader, SegmentHeader, Superblock, DEVICE_HEADER_BYTES,
};
use crate::iter::scan_segment;
use crate::layout::Layout;

/// Grain of the segment that [`scan_image`] scans.
pub const SCAN_GRAIN_BYTES: u64 = 512;

/// Decodes an index checkpoint payload for a store of `segments` segments
/// (the concatenated payload of all parts, as `checkpoint::read` passes
/// it), and drops what it restored.
pub fn decode_checkpoint(bytes: &[u8], segments: u32) -> Result<(), String> {
    crate::checkpoint::decode(bytes, segments).map(drop)
}

/// Checks the record at the start of `bytes` ([`format::check_record`]).
pub fn check_record(bytes: &[u8]) -> RecordCheck {
    format::check_record(bytes)
}

/// Decodes a superblock ([`Superblock::decode`]).
pub fn decode_superblock(bytes: &[u8]) -> Result<Superblock, DecodeError> {
    Superblock::decode(bytes)
}

/// Decodes a segment header ([`SegmentHeader::decode`]).
pub fn decode_segment_header(bytes: &[u8]) -> Result<SegmentHeader, DecodeError> {
    SegmentHeader::decode(bytes)
}

/// A record that [`scan_image`] yielded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScannedRecord {
    /// Byte offset of the record in the segment.
    pub offset: u64,
    pub header: RecordHeader,
    /// The record as the scanner passed it on: header, key and value.
    pub bytes: Vec<u8>,
}

/// What [`scan_image`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScanResult {
    /// Bytes of the scanned segment: the image plus a grain, rounded up
    /// to 4 KiB, zero-filled past the image.
    pub segment_bytes: u64,
    /// The sequence number records had to carry (see [`scan_image`]).
    pub segment_seq: u64,
    /// The puts and tombstones yielded, in order.
    pub records: Vec<ScannedRecord>,
    /// Where the valid records end and why, if before the end of the
    /// segment.
    pub stopped: Option<(u64, &'static str)>,
    /// Invalid stretches the scan went past (valid records follow each):
    /// offset and length.
    pub damaged: Vec<(u64, u64)>,
    /// Offsets of evictions records yielded after correcting one flipped
    /// bit (their bytes differ from the image's in that bit).
    pub repaired: Vec<u64>,
}

/// Runs the real segment scanner (`iter::scan_segment`) over `image`, the
/// bytes of one segment from its start (header area included), on an
/// in-memory device with 512-byte grains.
///
/// The scanner needs the segment's sequence number; it is read from
/// where a segment header keeps it (bytes 32..40 of `image`, zero if
/// shorter) whether or not the header is valid, so that a fuzzer reaches
/// the records without forging a header checksum.
pub fn scan_image(image: &[u8]) -> ScanResult {
    // The segment: the image and at least one grain of zeros after it
    // (where a scan that read every record stops), rounded up to 4 KiB.
    // Short, so the scanner's walk through the zeros stays short: a 1 MiB
    // segment held the fuzzer to 480 executions/s.
    const STEP: u64 = 4 << 10;
    let segment_bytes = (image.len() as u64 + SCAN_GRAIN_BYTES).div_ceil(STEP) * STEP;
    let mut seq = [0u8; 8];
    if let Some(b) = image.get(32..40) {
        seq.copy_from_slice(b);
    }
    let segment_seq = u64::from_le_bytes(seq);
    // Written to a zeroed device rather than built with `from_image`, whose
    // scan of the whole zero-filled device would dominate a fuzzer's run.
    let device = MemDevice::new(DEVICE_HEADER_BYTES + segment_bytes, 512);
    let mut buf = AlignedBuf::new(image.len(), 512);
    buf[..image.len()].copy_from_slice(image);
    device
        .write_at(&buf, DEVICE_HEADER_BYTES)
        .and_then(|()| device.flush())
        .expect("an in-memory device without faults does not fail");
    let device: Arc<dyn Device> = Arc::new(device);
    let layout = Layout {
        devices: vec![device],
        grain_bytes: SCAN_GRAIN_BYTES,
        segment_bytes,
        segments: 1,
        align: 512,
    };
    let mut records = Vec::new();
    let end = scan_segment(&layout, 0, segment_seq, |rec| {
        records.push(ScannedRecord {
            offset: (rec.pba % layout.grains_per_segment()) * SCAN_GRAIN_BYTES,
            header: rec.header,
            bytes: rec.bytes.to_vec(),
        });
        Ok(())
    })
    .expect("an in-memory device without faults does not fail");
    ScanResult {
        segment_bytes,
        segment_seq,
        records,
        stopped: end.tail.map(|t| (t.offset, t.reason)),
        damaged: end.damaged.iter().map(|d| (d.offset, d.len)).collect(),
        repaired: end.repaired,
    }
}
