//! Damage found while scanning the log: telling a torn tail (writes that
//! were in flight at a crash, never acknowledged as durable) from damage
//! to data that was on the device (acknowledged data lost).
//!
//! Every record carries a flush mark (docs/FORMAT.md): the log position up
//! to which everything was on the device when it was appended. A crash can
//! only tear what was not yet on the device, which lies after the flush
//! position at the crash, and that is at or after the newest valid
//! record's mark. So an invalid stretch that starts before the newest
//! record's mark is damage; one at or after it is a torn tail (it may also
//! be damage of the last flushed writes: it is still reported, as torn).
//! A mark is coarse (a 256th of a segment) and only a later record carries
//! it, so the newest records of a log would always read as possibly torn;
//! *seals*, pads carrying an exact durable position (added to a batch
//! every 32 grains of durable progress, and to an idle log by
//! `Writer::seal_durable`), move the known-flushed position up to it, so
//! damage to them is told apart as well.
//! The scan never stops at either: valid records after an invalid stretch
//! are kept (`iter::scan_segment`).

use std::fmt;

use crate::format::{RecordHeader, RECORD_HEADER_BYTES};
use crate::iter::Invalid;
use crate::layout::Layout;

/// What an invalid stretch of the log is taken to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DamageKind {
    /// In the unflushed tail of the log at the crash: a write in flight,
    /// never acknowledged as durable (or, rarely, damage to the very last
    /// flushed writes).
    TornTail,
    /// Before the flushed position: records that were on the device and
    /// acknowledged are lost.
    Lost,
}

/// One invalid stretch of a segment, as recovery and `check` report it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Damage {
    pub kind: DamageKind,
    /// The data file (or block device) and the byte offset in it.
    pub device: String,
    pub offset: u64,
    /// Bytes up to the next valid record (or the end of the segment).
    pub len: u64,
    pub reason: String,
    /// The damaged record's key, when its header and key still check.
    pub key: Option<Vec<u8>>,
    /// Its header fields, when they decode (checked, or corrected, when
    /// `key` is known).
    pub(crate) head: Option<RecordHeader>,
    /// Where it is in the log: segment, its sequence number, offset in it.
    pub(crate) segment: u32,
    pub(crate) segment_seq: u64,
    pub(crate) segment_offset: u64,
}

impl fmt::Display for Damage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            DamageKind::TornTail => {
                "torn tail (writes in flight at a crash, not acknowledged as durable)"
            }
            DamageKind::Lost => "DAMAGE (acknowledged data lost)",
        };
        write!(
            f,
            "{what}: {} bytes at {} offset {:#x}: {}",
            self.len, self.device, self.offset, self.reason
        )?;
        if let Some(k) = &self.key {
            let shown: String = String::from_utf8_lossy(&k[..k.len().min(64)]).into();
            write!(
                f,
                "; key {shown:?}{}",
                if k.len() > 64 { "..." } else { "" }
            )?;
            if let Some(h) = self.head {
                write!(f, " (record sequence number {})", h.seq)?;
            }
        }
        Ok(())
    }
}

/// An invalid stretch met in a segment, before it is classified.
pub(crate) struct Found {
    pub segment: u32,
    pub segment_seq: u64,
    pub invalid: Invalid,
    /// True if valid records of the segment follow it.
    pub followed: bool,
}

impl Found {
    /// Whether it is worth reporting: a stretch with valid records after
    /// it, or one at the end that starts with a header of this segment's
    /// (a record whose checksum failed, rather than space never written).
    pub fn reportable(&self) -> bool {
        self.followed || self.invalid.header.is_some()
    }
}

/// Classifies what the scan found against `newest`, the newest valid
/// record of the log (in log order), and `sealed`, the newest seal's
/// (segment sequence number, offset), and describes it.
pub(crate) fn classify(
    layout: &Layout,
    found: Vec<Found>,
    newest: Option<&RecordHeader>,
    sealed: Option<(u64, u64)>,
) -> Vec<Damage> {
    // Everything before this (segment sequence number, offset) was on the
    // device; without any valid record or seal, nothing is known to be.
    let marked = newest.map_or((0, 0), |h| {
        h.flushed.position(h.segment_seq, layout.segment_bytes)
    });
    let flushed = marked.max(sealed.unwrap_or((0, 0)));
    let mut out: Vec<Damage> = found
        .into_iter()
        .filter(Found::reportable)
        .map(|f| {
            let kind = if (f.segment_seq, f.invalid.offset) < flushed {
                DamageKind::Lost
            } else {
                DamageKind::TornTail
            };
            let (device, offset) = layout.describe(f.segment, f.invalid.offset);
            Damage {
                kind,
                device,
                offset,
                len: f.invalid.len,
                reason: f.invalid.reason.to_string(),
                key: f.invalid.key,
                head: f.invalid.header,
                segment: f.segment,
                segment_seq: f.segment_seq,
                segment_offset: f.invalid.offset,
            }
        })
        .collect();
    out.sort_by(|a, b| (&a.device, a.offset).cmp(&(&b.device, b.offset)));
    out
}

/// Replaces each lost record whose key is known with a tombstone of that
/// key at the record's own place and sequence number (then a pad over the
/// rest of its stretch), and flushes; the stretches whose key is unknown
/// get a pad only ([`mend`]). In place, the tombstone needs no free
/// segment, and at the lost record's sequence number it hides exactly the
/// key's older records: never a newer one.
/// Returns the (segment, grains) of each tombstone written, for the
/// segments' tombstone counts.
pub(crate) fn bury(layout: &Layout, lost: &[&Damage]) -> crate::Result<Vec<(u32, u64)>> {
    let grain = layout.grain_bytes as usize;
    let mut padded = Vec::new();
    let mut buried = Vec::new();
    for d in lost {
        let (Some(key), Some(head)) = (&d.key, d.head) else {
            padded.push(*d);
            continue;
        };
        let tomb = crate::format::record_bytes(key.len(), 0, grain);
        let stretch = usize::try_from(d.len).unwrap_or(usize::MAX);
        if stretch < tomb {
            padded.push(*d);
            continue;
        }
        let pad = stretch.min(u32::MAX as usize) - tomb;
        let want = tomb + if pad > 0 { RECORD_HEADER_BYTES } else { 0 };
        let (mut buf, at) = layout.read_range(d.segment, d.segment_offset, want)?;
        let header = RecordHeader {
            kind: crate::format::RecordKind::Tombstone,
            member: false,
            key_len: key.len() as u16,
            value_len: 0,
            ..head
        };
        buf[at..at + tomb].fill(0);
        crate::format::encode_record(&mut buf[at..at + tomb], &header, key, &[]);
        if pad > 0 {
            crate::format::encode_pad_header(&mut buf[at + tomb..], pad, d.segment_seq);
        }
        layout.write(d.segment, d.segment_offset - at as u64, &buf)?;
        buried.push((d.segment, (tomb / grain) as u64));
    }
    mend(layout, &padded)?;
    if !buried.is_empty() {
        layout.flush(u64::MAX)?;
    }
    Ok(buried)
}

/// Overwrites each stretch with a pad record (its header only: a pad's
/// checksum covers nothing else) and flushes, so that later scans pass
/// over it as over padding. Recovery does this before the first new write,
/// for torn tails (which would otherwise sit before the next crash's flush
/// mark and read as damage) and for damage it was told to salvage.
pub(crate) fn mend(layout: &Layout, stretches: &[&Damage]) -> crate::Result<()> {
    for d in stretches {
        let (mut buf, at) = layout.read_range(d.segment, d.segment_offset, RECORD_HEADER_BYTES)?;
        let total = usize::try_from(d.len)
            .unwrap_or(usize::MAX)
            .min(u32::MAX as usize);
        crate::format::encode_pad_header(&mut buf[at..], total, d.segment_seq);
        layout.write(d.segment, d.segment_offset - at as u64, &buf)?;
    }
    if !stretches.is_empty() {
        layout.flush(u64::MAX)?;
    }
    Ok(())
}
