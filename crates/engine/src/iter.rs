//! Walking the records of a segment in order, and iteration over a
//! namespace built on it.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;

use nvdepot_index::{Index, Location};
use parking_lot::RwLockReadGuard;

use crate::aio::{now, Mode};
use crate::error::Result;
use crate::format::{
    self, RecordCheck, RecordHeader, RecordKind, RECORD_HEADER_BYTES, SEGMENT_HEADER_BYTES,
};
use crate::inner::{key_hash, Inner};
use crate::layout::Layout;
use crate::read::{Fetched, Span};

/// Bytes read at a time when scanning a segment.
const SCAN_CHUNK: usize = 4 << 20;

/// A namespace iteration reads record by record through the index when
/// the index's entries times this is less than the bytes of the segments
/// it would scan. A random 4 KiB read costs about what 64 KiB of a
/// sequential scan does on this project's devices (fio: ~14 k random
/// reads/s at QD 1 against ~1 GB/s of 4 MiB reads).
const BY_INDEX_BYTES_PER_ENTRY: u64 = 64 << 10;

/// Most index entries an iteration or purge lists to read through the
/// index (16 bytes each: 16 MiB of DRAM at most, while it runs).
const BY_INDEX_ENTRIES_MAX: usize = 1 << 20;

/// Index entries read per refill of an index-driven iteration.
const BY_INDEX_BATCH: usize = 256;

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

/// A stretch of a segment holding no valid record of it: damage, a torn
/// write, or (at the end) space never written in this use of the segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Invalid {
    pub offset: u64,
    pub len: u64,
    pub reason: &'static str,
    /// The header there, if it decodes as a record of this segment (the
    /// fields only: its checksums failed).
    pub header: Option<RecordHeader>,
    /// Its key, if the header checksum (which covers the key) holds.
    pub key: Option<Vec<u8>>,
}

/// What a scan met besides valid records.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct ScanEnd {
    /// Invalid stretches with valid records after them, in order: the scan
    /// found the next valid record and went on.
    pub damaged: Vec<Invalid>,
    /// Where the valid records end, if before the segment end: the rest of
    /// the segment holds no valid record of it.
    pub tail: Option<Invalid>,
    /// Offsets of evictions records restored by correcting one flipped
    /// bit (`repair::repair_system_record`): damage that lost nothing.
    pub repaired: Vec<u64>,
    /// The latest position a seal in the segment carries (a pad saying
    /// everything in the log before that position was on the device:
    /// `format::SEAL_NAMESPACE`), as (segment sequence number, offset).
    pub sealed: Option<(u64, u64)>,
}

/// Calls `f` for every valid KV record (puts, tombstones, evictions; pads
/// are skipped) of a segment written with sequence number `seg_seq`, in
/// order. An invalid record does not end the scan: the next valid record
/// of the segment, if any, is found grain by grain and the scan goes on
/// from there, so no valid record is ever dropped because an earlier one
/// is damaged.
pub(crate) fn scan_segment(
    layout: &Layout,
    segment: u32,
    seg_seq: u64,
    mut f: impl FnMut(ScanRecord<'_>) -> Result<()>,
) -> Result<ScanEnd> {
    let seg_bytes = layout.segment_bytes;
    let grain = layout.grain_bytes;
    let align = layout.align as u64;
    // From the thread's pool of big buffers, back to it at the end: a
    // fresh 4 MiB buffer per segment was zeroed and page-faulted in each
    // time (28 % of all CPU in a run of frequent FLUSHDBs and KEYS).
    let mut buf = nvdepot_io::AlignedBuf::take(SCAN_CHUNK.min(seg_bytes as usize), layout.align);
    let mut wstart = 0u64;
    let mut wlen = 0usize;
    let mut pos = SEGMENT_HEADER_BYTES;
    let mut end = ScanEnd::default();
    let refill = |buf: &mut nvdepot_io::AlignedBuf, at: u64, need: usize| -> Result<(u64, usize)> {
        let start = at / align * align;
        let len = ((at - start) as usize + need)
            .max(SCAN_CHUNK)
            .next_multiple_of(align as usize);
        let len = len.min((seg_bytes - start) as usize);
        if buf.len() < len {
            std::mem::replace(buf, nvdepot_io::AlignedBuf::take(len, layout.align)).recycle();
        }
        layout.read(segment, start, &mut buf[..len])?;
        Ok((start, len))
    };
    while pos + RECORD_HEADER_BYTES as u64 <= seg_bytes {
        let mut rel = (pos - wstart) as usize;
        if pos < wstart || rel + RECORD_HEADER_BYTES > wlen {
            (wstart, wlen) = refill(&mut buf, pos, RECORD_HEADER_BYTES)?;
            rel = (pos - wstart) as usize;
        }
        let mut check = format::check_record(&buf[rel..wlen]);
        let mut past_end = false;
        if let RecordCheck::Truncated { need } = check {
            if pos + need as u64 > seg_bytes {
                past_end = true;
            } else {
                (wstart, wlen) = refill(&mut buf, pos, need)?;
                rel = (pos - wstart) as usize;
                check = format::check_record(&buf[rel..wlen]);
            }
        }
        let repairable = !matches!(check, RecordCheck::Valid(_));
        let reason = match check {
            RecordCheck::Valid(h) if h.segment_seq == seg_seq => {
                let body = h.body_bytes();
                if let Some(at) = h.seal_position(grain) {
                    // Never later than the seal itself.
                    end.sealed = end.sealed.max(Some(at.min((seg_seq, pos))));
                }
                if h.kind != RecordKind::Pad {
                    f(ScanRecord {
                        pba: layout.pba(segment, pos),
                        header: h,
                        bytes: &buf[rel..rel + body],
                    })?;
                }
                pos += (body as u64).div_ceil(grain) * grain;
                continue;
            }
            _ if past_end => "record runs past the segment end",
            RecordCheck::Invalid(reason) => reason,
            RecordCheck::Valid(_) => "record from an earlier use",
            RecordCheck::Truncated { .. } => "truncated",
        };
        // An evictions or namespace registry record with one flipped bit
        // (which may also make it seem to run past the segment's end) is
        // restored: without it, the older values of the keys it lists
        // would come back, or its namespace would be lost.
        if repairable {
            if let Some((h, bytes)) = crate::repair::repair_system_record(&buf[rel..wlen]) {
                if h.segment_seq == seg_seq {
                    f(ScanRecord {
                        pba: layout.pba(segment, pos),
                        header: h,
                        bytes: &bytes,
                    })?;
                    end.repaired.push(pos);
                    pos += (h.body_bytes() as u64).div_ceil(grain) * grain;
                    continue;
                }
            }
        }
        let (header, key) = invalid_head(&buf[rel..wlen], seg_seq);
        let next = next_valid(layout, segment, seg_seq, pos + grain)?;
        let invalid = Invalid {
            offset: pos,
            len: next.unwrap_or(seg_bytes) - pos,
            reason,
            header,
            key,
        };
        match next {
            Some(at) => {
                end.damaged.push(invalid);
                pos = at;
                // `next_valid` read the device afresh: the window may be
                // older than what it found (a segment being written while
                // it is scanned, as iterations and purges do), and judging
                // the record at `at` by the stale window took each grain of
                // an open segment's tail for damage, with a 4 MiB read per
                // grain (3 802 "invalid stretches" in one scan).
                wlen = 0;
            }
            None => {
                end.tail = Some(invalid);
                buf.recycle();
                return Ok(end);
            }
        }
    }
    buf.recycle();
    if pos < seg_bytes {
        // Less than a header's worth of room was left: slack, not a record.
        end.tail = Some(Invalid {
            offset: pos,
            len: seg_bytes - pos,
            reason: "end of the segment",
            header: None,
            key: None,
        });
    }
    Ok(end)
}

/// The header (fields only) of an invalid record, if it claims to be a
/// record of this segment, and its key if the header checksum holds, or
/// holds once one flipped bit is corrected (then the header is the
/// corrected one).
fn invalid_head(buf: &[u8], seg_seq: u64) -> (Option<RecordHeader>, Option<Vec<u8>>) {
    if let Some((h, key)) = crate::repair::repair_head(buf) {
        if h.segment_seq == seg_seq {
            return (Some(h), Some(key));
        }
    }
    match RecordHeader::decode_fields(buf) {
        Some(h) if h.segment_seq == seg_seq && h.kind != RecordKind::Pad => {
            let key = match format::check_record_head(buf) {
                RecordCheck::Valid(_) => {
                    let k = RECORD_HEADER_BYTES;
                    Some(buf[k..k + h.key_len as usize].to_vec())
                }
                _ => None,
            };
            (Some(h), key)
        }
        _ => (None, None),
    }
}

/// The offset of the first valid record of the segment at or after
/// `from` (on a grain), if any.
pub(crate) fn next_valid(layout: &Layout, seg: u32, seq: u64, from: u64) -> Result<Option<u64>> {
    let grain = layout.grain_bytes;
    let from = from.next_multiple_of(grain);
    let mut start = from;
    let align = layout.align as u64;
    // One pooled buffer for every chunk (a fresh buffer per chunk was
    // zeroed and faulted in each time).
    let mut buf = nvdepot_io::AlignedBuf::take(SCAN_CHUNK + layout.align, layout.align);
    while start + RECORD_HEADER_BYTES as u64 <= layout.segment_bytes {
        let len = (SCAN_CHUNK as u64).min(layout.segment_bytes - start) as usize;
        let aligned = start / align * align;
        let at = (start - aligned) as usize;
        let read = (at + len).next_multiple_of(layout.align);
        layout.read(seg, aligned, &mut buf[..read])?;
        let mut pos = 0;
        while pos + RECORD_HEADER_BYTES <= len {
            let b = &buf[at + pos..at + len];
            let ours = RecordHeader::decode_fields(b).is_some_and(|h| h.segment_seq == seq);
            if ours {
                let offset = start + pos as u64;
                let valid = match format::check_record(b) {
                    RecordCheck::Valid(_) => true,
                    RecordCheck::Invalid(_) => false,
                    // Runs past this chunk: read the whole record.
                    RecordCheck::Truncated { need } => {
                        offset + need as u64 <= layout.segment_bytes && {
                            let (whole, at) = layout.read_range(seg, offset, need)?;
                            matches!(
                                format::check_record(&whole[at..at + need]),
                                RecordCheck::Valid(_)
                            )
                        }
                    }
                };
                if valid {
                    buf.recycle();
                    return Ok(Some(offset));
                }
            }
            pos += grain as usize;
        }
        start += len as u64;
    }
    buf.recycle();
    Ok(None)
}

/// How a [`NamespaceIter`] reads the records.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IterPlan {
    /// Whichever reads fewer bytes (see `BY_INDEX_BYTES_PER_ENTRY`).
    Cheaper,
    /// Every segment holding records, in log order.
    Scan,
    /// The record of every index entry, in address order.
    Index,
}

/// Whether reading the record of every index entry costs less than
/// scanning every segment that holds records (see
/// `BY_INDEX_BYTES_PER_ENTRY`).
pub(crate) fn index_cheaper(inner: &Inner) -> bool {
    if inner.index.len() > BY_INDEX_ENTRIES_MAX {
        return false;
    }
    let holding = inner
        .segments
        .infos
        .iter()
        .filter(|s| s.state().holds_records())
        .count() as u64;
    (inner.index.len() as u64).saturating_mul(BY_INDEX_BYTES_PER_ENTRY)
        < holding * inner.layout.segment_bytes
}

/// Every index entry (fingerprint, location), in address order.
pub(crate) fn index_entries(inner: &Inner) -> Vec<(u64, Location)> {
    let mut entries = Vec::with_capacity(inner.index.len());
    inner.index.for_each(|fp, loc| entries.push((fp, loc)));
    entries.sort_unstable_by_key(|&(_, loc)| loc.pba);
    entries
}

/// (physical namespace, key, value) of a live record.
pub(crate) type EntryValue = (u32, Vec<u8>, Vec<u8>);

/// The live value an index entry points to, if its record holds a value
/// of a physical namespace `accept` takes: (physical namespace, key,
/// value). `None` for a record of another namespace, a tombstone, or one
/// replaced since the entry was listed; damage where the index still
/// points is an error (a segment scan would have skipped the record
/// without a word).
pub(crate) fn read_entry(
    inner: &Inner,
    fp: u64,
    loc: Location,
    accept: impl Fn(u32) -> bool,
) -> Result<Option<EntryValue>> {
    let r = match now(inner.read_at(Mode::Blocking, loc, Span::Whole))? {
        Fetched::Record(r) => r,
        Fetched::Invalid(e) if inner.still_indexed(fp, loc) => return Err(e),
        Fetched::Invalid(_) => return Ok(None),
    };
    let physical = r.header.namespace;
    if !r.header.kind.is_value() || !accept(physical) || !inner.still_indexed(fp, loc) {
        return Ok(None);
    }
    if r.header.kind == RecordKind::LargeHead {
        // The chunks' bytes, if the head read is still the key's value.
        let value = now(inner.get_value(Mode::Blocking, physical, r.key()))?;
        return Ok(match value {
            Some((v, seq, _)) if seq == r.header.seq => Some((physical, r.key().to_vec(), v)),
            _ => None,
        });
    }
    Ok(Some((physical, r.key().to_vec(), r.value().to_vec())))
}

/// Unordered iteration over the keys and values of a namespace.
///
/// Reads the log segment by segment (large sequential reads) and yields the
/// records the index still points to; or, when the index holds few enough
/// entries that reading each one's record costs less than reading every
/// segment (`BY_INDEX_BYTES_PER_ENTRY`), reads just those records in
/// address order. A store that is mostly garbage (values overwritten, a
/// database flushed) then costs a read per live key, not the whole log.
/// Garbage collection is paused while the iterator lives, so every key
/// present and unmodified for the whole iteration is returned exactly once;
/// keys written or deleted meanwhile may or may not be. Do not write so
/// much while iterating that the store needs GC to make room: writers would
/// wait for the iterator to be dropped.
pub struct NamespaceIter<'a> {
    inner: &'a Inner,
    _pause: Option<RwLockReadGuard<'a, ()>>,
    physical: Option<u32>,
    segments: Vec<(u64, u32)>,
    /// Index-driven: every index entry (fingerprint, location) in address
    /// order, read `BY_INDEX_BATCH` at a time; empty when scanning.
    entries: Vec<(u64, Location)>,
    next: usize,
    ready: VecDeque<(Vec<u8>, Vec<u8>)>,
    failed: bool,
}

impl<'a> NamespaceIter<'a> {
    pub(crate) fn new(
        inner: &'a Inner,
        physical: Option<u32>,
        plan: IterPlan,
    ) -> NamespaceIter<'a> {
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
        let mut entries = Vec::new();
        let by_index = match plan {
            IterPlan::Scan => false,
            IterPlan::Index => true,
            IterPlan::Cheaper => index_cheaper(inner),
        };
        if physical.is_some() && by_index {
            entries = index_entries(inner);
            segments.clear();
        }
        NamespaceIter {
            inner,
            _pause: Some(pause),
            physical,
            segments,
            entries,
            next: 0,
            ready: VecDeque::new(),
            failed: false,
        }
    }

    /// Reads the records of `entries[from..upto]`, keeping this
    /// namespace's that the index still points to.
    fn fill_by_index(&mut self, from: usize, upto: usize) -> Result<()> {
        let Some(physical) = self.physical else {
            return Ok(());
        };
        for &(fp, loc) in &self.entries[from..upto] {
            if let Some((_, key, value)) = read_entry(self.inner, fp, loc, |p| p == physical)? {
                self.ready.push_back((key, value));
            }
        }
        Ok(())
    }

    fn fill(&mut self, seq: u64, segment: u32) -> Result<()> {
        let Some(physical) = self.physical else {
            return Ok(());
        };
        let inner = self.inner;
        let ready = &mut self.ready;
        scan_segment(&inner.layout, segment, seq, |rec| {
            if rec.header.kind.is_value() && rec.header.namespace == physical {
                let fp = Index::fingerprint(key_hash(physical, rec.key()));
                let loc = inner.location(rec.pba, &rec.header);
                if !inner.still_indexed(fp, loc) {
                    return Ok(());
                }
                if rec.header.kind == RecordKind::LargeHead {
                    // The chunks' bytes; `None`: replaced since (the new
                    // record comes later in the log) or lost in cache mode.
                    let key = rec.key();
                    let value = now(inner.get_value(Mode::Blocking, physical, key))?;
                    if let Some((v, seq, _)) = value {
                        if seq == rec.header.seq {
                            ready.push_back((key.to_vec(), v));
                        }
                    }
                    return Ok(());
                }
                ready.push_back((rec.key().to_vec(), rec.value().to_vec()));
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
            if self.failed {
                return None;
            }
            let filled = if !self.entries.is_empty() {
                if self.next >= self.entries.len() {
                    return None;
                }
                let upto = (self.next + BY_INDEX_BATCH).min(self.entries.len());
                let done = self.fill_by_index(self.next, upto);
                self.next = upto;
                done
            } else {
                if self.next >= self.segments.len() {
                    return None;
                }
                let (seq, segment) = self.segments[self.next];
                self.next += 1;
                self.fill(seq, segment)
            };
            if let Err(e) = filled {
                self.failed = true;
                return Some(Err(e));
            }
        }
    }
}
