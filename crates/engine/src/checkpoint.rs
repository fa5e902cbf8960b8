//! The index checkpoint: written at clean shutdown into free segments,
//! restored at the next open so it needs no log scan.
//!
//! A checkpoint is valid only if nothing was written after it: the open
//! that restores it overwrites its segment headers with "free" headers
//! (durably) before the store accepts a write, so a later crash falls back
//! to the log. Payload layout: `docs/FORMAT.md`.

use std::sync::atomic::Ordering;

use nvdepot_index::{Geometry, Index};

use crate::error::{Error, Result};
use crate::format::{get_u32, get_u64, SegmentHeader, SegmentKind, SEGMENT_HEADER_BYTES};
use crate::inner::Inner;
use crate::layout::Layout;
use crate::segments::SegState;

/// Version 2 added the index's pba width. A checkpoint of another version
/// is unusable: the open scans the log instead (nothing is lost).
const CKPT_MAGIC: u64 = u64::from_le_bytes(*b"NVCKPT02");

/// Serialises the store's DRAM state.
fn encode(inner: &Inner) -> Vec<u8> {
    inner.index.finish_resize();
    let g = inner.index.geometry();
    let mut out = Vec::with_capacity(inner.index.memory_bytes() + 4096);
    out.extend_from_slice(&CKPT_MAGIC.to_le_bytes());
    out.extend_from_slice(&inner.seq.load(Ordering::Relaxed).to_le_bytes());
    out.extend_from_slice(&inner.namespaces.next_id().to_le_bytes());
    let list = inner.namespaces.list();
    out.extend_from_slice(&(list.len() as u32).to_le_bytes());
    for (name, logical, physical, count) in &list {
        out.extend_from_slice(&(name.len() as u16).to_le_bytes());
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(&logical.to_le_bytes());
        out.extend_from_slice(&physical.to_le_bytes());
        out.extend_from_slice(&count.to_le_bytes());
    }
    let system = inner
        .namespaces
        .counter(crate::namespace::SYSTEM_NS)
        .map_or(0, |c| c.load(Ordering::Relaxed));
    out.extend_from_slice(&system.to_le_bytes());
    out.extend_from_slice(&(inner.segments.len() as u32).to_le_bytes());
    for s in &inner.segments.infos {
        let in_use = s.state().holds_records();
        out.push(in_use as u8);
        for v in [
            &s.seq,
            &s.valid_grains,
            &s.min_seq,
            &s.sealed_at,
            &s.tombstone_grains,
        ] {
            out.extend_from_slice(&v.load(Ordering::Relaxed).to_le_bytes());
        }
    }
    out.extend_from_slice(&g.table_entries_log2.to_le_bytes());
    out.extend_from_slice(&g.tables_log2.to_le_bytes());
    out.extend_from_slice(&g.pba_bits.to_le_bytes());
    inner.index.dump(|_, entries| {
        out.extend_from_slice(&(entries.len() as u64).to_le_bytes());
        for e in entries {
            out.extend_from_slice(&e.to_le_bytes());
        }
    });
    out
}

/// Writes a checkpoint (the writer is sealed and idle). Skips it, with a
/// warning, if there are not enough free segments.
pub(crate) fn write(inner: &Inner) -> Result<()> {
    let payload = encode(inner);
    let per_segment = (inner.layout.segment_bytes - SEGMENT_HEADER_BYTES) as usize;
    let parts = payload.len().div_ceil(per_segment);
    let mut segs = Vec::with_capacity(parts);
    for _ in 0..parts {
        match inner.segments.take_free(0) {
            Some(s) => segs.push(s),
            None => {
                for s in segs {
                    inner.segments.release(s);
                }
                tracing::warn!(
                    "no room for an index checkpoint ({} bytes); the next open will scan the log",
                    payload.len()
                );
                return Ok(());
            }
        }
    }
    let seq = inner.seq.fetch_add(1, Ordering::Relaxed);
    let layout = &inner.layout;
    let mut mask = 0;
    for (part, (&seg, chunk)) in segs.iter().zip(payload.chunks(per_segment)).enumerate() {
        let mut buf = layout.buffer(SEGMENT_HEADER_BYTES as usize + chunk.len());
        SegmentHeader {
            kind: SegmentKind::Checkpoint,
            uuid: inner.uuid,
            seq,
            part: part as u32,
            parts: parts as u32,
            payload_bytes: chunk.len() as u64,
            payload_crc: crc32c::crc32c(chunk),
        }
        .encode(&mut buf);
        let h = SEGMENT_HEADER_BYTES as usize;
        buf[h..h + chunk.len()].copy_from_slice(chunk);
        layout.write(seg, 0, &buf)?;
        mask |= layout.device_bit(seg);
        inner.segments.get(seg).set_state(SegState::Checkpoint);
    }
    layout.flush(mask)?;
    tracing::info!(
        "index checkpoint written: {} bytes in {} segment(s)",
        payload.len(),
        parts
    );
    Ok(())
}

/// What a checkpoint restores.
pub(crate) struct Restored {
    pub seq: u64,
    pub ns_next: u32,
    /// (name, logical, physical, count)
    pub namespaces: Vec<(String, u32, u32, i64)>,
    pub system_count: i64,
    /// Per segment: (in use, seq, valid, min_seq, sealed_at, tombstone grains).
    pub segments: Vec<(bool, [u64; 5])>,
    pub index: Index,
}

/// Reads and decodes the checkpoint in `segs` (sorted by part).
pub(crate) fn read(layout: &Layout, headers: &[(u32, SegmentHeader)]) -> Result<Restored> {
    let mut payload = Vec::new();
    for (seg, h) in headers {
        let (buf, start) =
            layout.read_range(*seg, SEGMENT_HEADER_BYTES, h.payload_bytes as usize)?;
        let chunk = &buf[start..start + h.payload_bytes as usize];
        if crc32c::crc32c(chunk) != h.payload_crc {
            let (device, offset) = layout.describe(*seg, SEGMENT_HEADER_BYTES);
            return Err(Error::Corrupt {
                device,
                offset,
                reason: "checkpoint payload checksum mismatch".into(),
            });
        }
        payload.extend_from_slice(chunk);
    }
    let restored = decode(&payload, layout.segments).map_err(|reason| {
        let (device, offset) = layout.describe(headers[0].0, SEGMENT_HEADER_BYTES);
        Error::Corrupt {
            device,
            offset,
            reason: format!("checkpoint: {reason}"),
        }
    })?;
    let want = crate::recovery::index_pba_bits(layout);
    let have = restored.index.geometry().pba_bits;
    if have != want {
        return Err(Error::Unusable(format!(
            "checkpoint index has {have}-bit pbas, this store's layout needs {want}"
        )));
    }
    Ok(restored)
}

struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn take(&mut self, n: usize) -> std::result::Result<&[u8], String> {
        let s = self
            .at
            .checked_add(n)
            .and_then(|end| self.b.get(self.at..end))
            .ok_or_else(|| format!("truncated at byte {}", self.at))?;
        self.at += n;
        Ok(s)
    }
    /// At most how many items of `min_bytes` each the rest can hold: a
    /// capacity from an untrusted count is clamped to it.
    fn fits(&self, min_bytes: usize) -> usize {
        (self.b.len() - self.at) / min_bytes
    }
    fn u16(&mut self) -> std::result::Result<u16, String> {
        Ok(u16::from_le_bytes(
            self.take(2)?.try_into().expect("2 bytes"),
        ))
    }
    fn u32(&mut self) -> std::result::Result<u32, String> {
        Ok(get_u32(self.take(4)?, 0))
    }
    fn u64(&mut self) -> std::result::Result<u64, String> {
        Ok(get_u64(self.take(8)?, 0))
    }
}

pub(crate) fn decode(b: &[u8], segments: u32) -> std::result::Result<Restored, String> {
    let mut c = Cursor { b, at: 0 };
    if c.u64()? != CKPT_MAGIC {
        return Err("bad magic".into());
    }
    let seq = c.u64()?;
    let ns_next = c.u32()?;
    let n = c.u32()? as usize;
    let mut namespaces = Vec::with_capacity(n.min(c.fits(18)));
    for _ in 0..n {
        let len = c.u16()? as usize;
        let name =
            String::from_utf8(c.take(len)?.to_vec()).map_err(|_| "namespace name not UTF-8")?;
        namespaces.push((name, c.u32()?, c.u32()?, c.u64()? as i64));
    }
    let system_count = c.u64()? as i64;
    let count = c.u32()?;
    if count != segments {
        return Err(format!(
            "checkpoint has {count} segments, store has {segments}"
        ));
    }
    let mut segs = Vec::with_capacity((count as usize).min(c.fits(41)));
    for _ in 0..count {
        let in_use = c.take(1)?[0] != 0;
        let mut v = [0u64; 5];
        for x in &mut v {
            *x = c.u64()?;
        }
        segs.push((in_use, v));
    }
    let geometry = Geometry {
        table_entries_log2: c.u32()?,
        tables_log2: c.u32()?,
        pba_bits: c.u32()?,
    };
    if geometry.tables_log2 > 16 || geometry.table_entries_log2 > 40 {
        return Err(format!("implausible geometry {geometry:?}"));
    }
    let mut tables = Vec::with_capacity((1 << geometry.tables_log2).min(c.fits(8)));
    for t in 0..1u64 << geometry.tables_log2 {
        let len = c.u64()? as usize;
        // Every table holds at least its 2^t slots; checking it here keeps
        // what `Index::load` allocates for a geometry proportional to the
        // bytes actually given (a forged geometry cannot make it allocate).
        if len < 1usize << geometry.table_entries_log2 {
            return Err(format!(
                "table {t}: {len} words, fewer than its 2^{} slots",
                geometry.table_entries_log2
            ));
        }
        let raw = c.take(len.checked_mul(8).ok_or("table length overflow")?)?;
        tables.push(
            raw.chunks_exact(8)
                .map(|x| u64::from_le_bytes(x.try_into().expect("8 bytes")))
                .collect(),
        );
    }
    if c.at != b.len() {
        return Err(format!("{} trailing bytes", b.len() - c.at));
    }
    let index = Index::load(geometry, tables)?;
    Ok(Restored {
        seq,
        ns_next,
        namespaces,
        system_count,
        segments: segs,
        index,
    })
}
