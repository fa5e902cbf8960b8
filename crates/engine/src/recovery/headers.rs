//! Segment headers at open: read (with the second copy when the first is
//! damaged), rewritten when a copy was damaged, and marked free.

use crate::error::Result;
use crate::format::{SegmentHeader, SegmentKind, SEGMENT_HEADER_BYTES};
use crate::layout::Layout;

/// Header of every segment; `None` for segments holding no valid header
/// of this store (free).
pub(crate) struct SegmentHeaders {
    pub headers: Vec<Option<SegmentHeader>>,
    /// Segments with one damaged header copy and one intact (damage that
    /// lost nothing): segment, header, which copy was damaged.
    pub one_copy_damaged: Vec<(u32, SegmentHeader, &'static str)>,
}

pub(crate) fn read_segment_headers(layout: &Layout, uuid: u128) -> Result<SegmentHeaders> {
    let mut headers = Vec::with_capacity(layout.segments as usize);
    let mut one_copy_damaged = Vec::new();
    let mut buf = layout.buffer(SEGMENT_HEADER_BYTES as usize);
    for s in 0..layout.segments {
        let n = buf.len();
        layout.read(s, 0, &mut buf[..n])?;
        headers.push(match SegmentHeader::decode_copies(&buf) {
            Ok((h, from_copy)) if h.uuid == uuid => {
                if from_copy {
                    one_copy_damaged.push((s, h, "its first copy is damaged, its second was used"));
                } else if SegmentHeader::copy_damaged(&buf) {
                    one_copy_damaged.push((
                        s,
                        h,
                        "its second copy is damaged, its first is intact",
                    ));
                }
                (h.kind != SegmentKind::Free).then_some(h)
            }
            _ => None,
        });
    }
    Ok(SegmentHeaders {
        headers,
        one_copy_damaged,
    })
}

/// Rewrites the header blocks with a damaged copy (from the intact one),
/// and flushes, so the next open reads two good copies again.
pub(crate) fn rewrite_headers(
    layout: &Layout,
    repaired: &[(u32, SegmentHeader, &'static str)],
) -> Result<()> {
    for (s, _, which) in repaired {
        let (device, offset) = layout.describe(*s, 0);
        tracing::warn!(
            "recovery: segment {s} header damaged at {device} offset {offset:#x}: {which}; nothing lost, header rewritten"
        );
    }
    write_headers(layout, repaired.iter().map(|&(s, h, _)| (s, h)))
}

/// Writes each segment's header block (both copies, the rest zero) and
/// flushes the devices written.
pub(crate) fn write_headers(
    layout: &Layout,
    headers: impl Iterator<Item = (u32, SegmentHeader)>,
) -> Result<()> {
    let mut buf = layout.buffer(SEGMENT_HEADER_BYTES as usize);
    let mut mask = 0;
    for (s, h) in headers {
        buf.fill(0);
        h.encode(&mut buf);
        layout.write(s, 0, &buf)?;
        mask |= layout.device_bit(s);
    }
    if mask == 0 {
        return Ok(());
    }
    layout.flush(mask)
}

/// Overwrites segment headers with "free" headers and flushes.
pub(crate) fn mark_free(layout: &Layout, uuid: u128, segs: &[u32]) -> Result<()> {
    let free = SegmentHeader {
        kind: SegmentKind::Free,
        uuid,
        seq: 0,
        part: 0,
        parts: 0,
        payload_bytes: 0,
        payload_crc: 0,
    };
    write_headers(layout, segs.iter().map(|&s| (s, free)))
}

/// The segments holding index checkpoint parts, with their headers.
pub(crate) fn checkpoint_segments(headers: &[Option<SegmentHeader>]) -> Vec<(u32, SegmentHeader)> {
    headers
        .iter()
        .enumerate()
        .filter_map(|(i, h)| {
            h.filter(|h| h.kind == SegmentKind::Checkpoint)
                .map(|h| (i as u32, h))
        })
        .collect()
}
