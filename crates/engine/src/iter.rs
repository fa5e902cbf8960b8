//! Walking the records of a segment in order, and iteration over a
//! namespace built on it.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;

use nvdepot_index::Index;
use parking_lot::RwLockReadGuard;

use crate::error::Result;
use crate::format::{
    self, RecordCheck, RecordHeader, RecordKind, RECORD_HEADER_BYTES, SEGMENT_HEADER_BYTES,
};
use crate::layout::Layout;
use crate::store::{key_hash, Inner};

/// Bytes read at a time when scanning a segment.
const SCAN_CHUNK: usize = 4 << 20;

/// A record met while scanning.
pub(crate) struct ScanRecord<'a> {
    pub pba: u64,
    pub header: RecordHeader,
    /// The whole record, header first (without padding).
    pub bytes: &'a [u8],
}

impl ScanRecord<'_> {
    pub fn key(&self) -> &[u8] {
        &self.bytes[RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + self.header.key_len as usize]
    }
    pub fn value(&self) -> &[u8] {
        &self.bytes[RECORD_HEADER_BYTES + self.header.key_len as usize..]
    }
}

/// Where a scan stopped.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ScanEnd {
    /// The last record ended exactly at the end of the segment.
    End,
    /// No valid record at `offset` (end of written data, a torn write, or
    /// corruption).
    Invalid { offset: u64, reason: &'static str },
}

/// Calls `f` for every valid KV record (puts and tombstones; pads are
/// skipped) of a segment written with sequence number `seg_seq`, in order,
/// until the first invalid one.
pub(crate) fn scan_segment(
    layout: &Layout,
    segment: u32,
    seg_seq: u64,
    mut f: impl FnMut(ScanRecord<'_>) -> Result<()>,
) -> Result<ScanEnd> {
    let seg_bytes = layout.segment_bytes;
    let grain = layout.grain_bytes;
    let align = layout.align as u64;
    let mut buf = layout.buffer(SCAN_CHUNK.min(seg_bytes as usize));
    let mut wstart = 0u64;
    let mut wlen = 0usize;
    let mut pos = SEGMENT_HEADER_BYTES;
    let refill = |buf: &mut nvdepot_io::AlignedBuf, at: u64, need: usize| -> Result<(u64, usize)> {
        let start = at / align * align;
        let len = ((at - start) as usize + need)
            .max(SCAN_CHUNK)
            .next_multiple_of(align as usize);
        let len = len.min((seg_bytes - start) as usize);
        if buf.len() < len {
            *buf = layout.buffer(len);
        }
        layout.read(segment, start, &mut buf[..len])?;
        Ok((start, len))
    };
    while pos < seg_bytes {
        let mut rel = (pos - wstart) as usize;
        if pos < wstart || rel + RECORD_HEADER_BYTES > wlen {
            (wstart, wlen) = refill(&mut buf, pos, RECORD_HEADER_BYTES)?;
            rel = (pos - wstart) as usize;
        }
        let mut check = format::check_record(&buf[rel..wlen]);
        if let RecordCheck::Truncated { need } = check {
            if pos + need as u64 > seg_bytes {
                return Ok(ScanEnd::Invalid {
                    offset: pos,
                    reason: "record runs past the segment end",
                });
            }
            (wstart, wlen) = refill(&mut buf, pos, need)?;
            rel = (pos - wstart) as usize;
            check = format::check_record(&buf[rel..wlen]);
        }
        let header = match check {
            RecordCheck::Valid(h) if h.segment_seq == seg_seq => h,
            RecordCheck::Valid(_) => {
                return Ok(ScanEnd::Invalid {
                    offset: pos,
                    reason: "record from an earlier use",
                })
            }
            RecordCheck::Truncated { .. } => {
                return Ok(ScanEnd::Invalid {
                    offset: pos,
                    reason: "truncated",
                })
            }
            RecordCheck::Invalid(reason) => {
                return Ok(ScanEnd::Invalid {
                    offset: pos,
                    reason,
                })
            }
        };
        let body = header.body_bytes();
        if header.kind != RecordKind::Pad {
            f(ScanRecord {
                pba: layout.pba(segment, pos),
                header,
                bytes: &buf[rel..rel + body],
            })?;
        }
        pos += (body as u64).div_ceil(grain) * grain;
    }
    Ok(ScanEnd::End)
}

/// Unordered iteration over the keys and values of a namespace.
///
/// Reads the log segment by segment (large sequential reads) and yields the
/// records the index still points to. Garbage collection is paused while
/// the iterator lives, so every key present and unmodified for the whole
/// iteration is returned exactly once; keys written or deleted meanwhile
/// may or may not be. Do not write so much while iterating that the store
/// needs GC to make room: writers would wait for the iterator to be dropped.
pub struct NamespaceIter<'a> {
    inner: &'a Inner,
    _pause: Option<RwLockReadGuard<'a, ()>>,
    physical: Option<u32>,
    segments: Vec<(u64, u32)>,
    next: usize,
    ready: VecDeque<(Vec<u8>, Vec<u8>)>,
    failed: bool,
}

impl<'a> NamespaceIter<'a> {
    pub(crate) fn new(inner: &'a Inner, physical: Option<u32>) -> NamespaceIter<'a> {
        let pause = inner.gc_pause.read();
        let mut segments: Vec<(u64, u32)> = inner
            .segments
            .infos
            .iter()
            .enumerate()
            .filter(|(_, s)| s.state().holds_records())
            .map(|(i, s)| (s.seq.load(Ordering::Relaxed), i as u32))
            .collect();
        segments.sort_unstable();
        NamespaceIter {
            inner,
            _pause: Some(pause),
            physical,
            segments,
            next: 0,
            ready: VecDeque::new(),
            failed: false,
        }
    }

    fn fill(&mut self, seq: u64, segment: u32) -> Result<()> {
        let Some(physical) = self.physical else {
            return Ok(());
        };
        let inner = self.inner;
        let ready = &mut self.ready;
        scan_segment(&inner.layout, segment, seq, |rec| {
            if rec.header.kind == RecordKind::Put && rec.header.namespace == physical {
                let fp = Index::fingerprint(key_hash(physical, rec.key()));
                if inner.still_indexed(fp, inner.location(rec.pba, &rec.header)) {
                    ready.push_back((rec.key().to_vec(), rec.value().to_vec()));
                }
            }
            Ok(())
        })?;
        Ok(())
    }
}

impl Iterator for NamespaceIter<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(kv) = self.ready.pop_front() {
                return Some(Ok(kv));
            }
            if self.failed || self.next >= self.segments.len() {
                return None;
            }
            let (seq, segment) = self.segments[self.next];
            self.next += 1;
            if let Err(e) = self.fill(seq, segment) {
                self.failed = true;
                return Some(Err(e));
            }
        }
    }
}
