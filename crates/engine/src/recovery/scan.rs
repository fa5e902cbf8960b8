//! The log scan of a rebuild: every segment's records in sequence order,
//! the newest record per key, and every damaged stretch, classified.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use nvdepot_index::Location;

use super::batches::{Batches, BatchesLeftOut, CutBatch};
use super::keys::{Found, KeyTable, Seen, PARTITIONS};
use super::large::LargeSeen;
use crate::damage::{self, Damage, DamageKind};
use crate::error::{Error, Result};
use crate::format::{
    self, DecodeError, RecordKind, SegmentHeader, SegmentKind, SEGMENT_HEADER_BYTES,
};
use crate::inner::key_hash;
use crate::iter::scan_segment;
use crate::layout::Layout;
use crate::namespace::{self, Namespaces, SYSTEM_NS};
use crate::options::Progress;
use crate::segments::{SegState, Segments};

/// What a scan of the whole log found.
pub(crate) struct LogScan {
    pub(super) found: KeyTable,
    pub segs: Arc<Segments>,
    pub max_seq: u64,
    pub max_ns: u32,
    pub records: u64,
    /// Invalid stretches of the log, classified, in device order.
    pub damage: Vec<Damage>,
    /// Keys of records in segments dropped for a damaged header
    /// (namespace, key, sequence number).
    pub hidden_keys: Vec<HiddenKey>,
    /// Large heads and chunks left out of the index.
    pub large: super::large::LargeSettled,
    /// Crash-atomic batches cut short (by the crash, or by damage to one
    /// of their records), left out whole.
    pub batches_left_out: BatchesLeftOut,
    /// Evictions and namespace registry records with one flipped bit,
    /// corrected in what the scan read (not on the device: the next scan
    /// corrects them again, and GC rewrites them whole), as "device
    /// offset" descriptions.
    pub repaired: Vec<String>,
    /// The namespace registry records the scan met, by grain address:
    /// (name, value), as read and, if need be, corrected (the device may
    /// still hold a flipped bit, so they are not read again).
    pub(crate) registry: HashMap<u64, (Vec<u8>, Vec<u8>)>,
    /// Grain addresses of the records in `repaired`.
    pub(crate) corrected: std::collections::HashSet<u64>,
}

/// A key whose records were dropped with their segment: (namespace, key,
/// sequence number).
pub(crate) type HiddenKey = (u32, Vec<u8>, u64);

/// Segments scanned so far, told to the caller's [`Progress`].
pub(crate) struct Scanned<'a> {
    done: AtomicU64,
    total: u64,
    progress: Option<&'a Progress>,
}

impl Scanned<'_> {
    fn one_more(&self) {
        let done = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        if let Some(p) = self.progress {
            p.report(done, self.total);
        }
    }
}

pub(crate) fn scan_log(
    layout: &Layout,
    headers: &[Option<SegmentHeader>],
    progress: Option<&Progress>,
) -> Result<LogScan> {
    let mut kv: Vec<(u64, u32)> = headers
        .iter()
        .enumerate()
        .filter_map(|(i, h)| {
            h.filter(|h| h.kind == SegmentKind::Kv)
                .map(|h| (h.seq, i as u32))
        })
        .collect();
    kv.sort_unstable();
    let segs = Arc::new(Segments::new(layout.segments));
    let scanned = Scanned {
        done: AtomicU64::new(0),
        total: kv.len() as u64,
        progress,
    };
    // Recovery is CPU-bound (checksums, hashing, the key map): scan every
    // other segment on a second thread, then merge the two maps.
    let (even, odd): (Vec<_>, Vec<_>) = kv.iter().enumerate().partition(|(i, _)| i % 2 == 0);
    let even: Vec<(u64, u32)> = even.into_iter().map(|(_, &x)| x).collect();
    let odd: Vec<(u64, u32)> = odd.into_iter().map(|(_, &x)| x).collect();
    let (a, b) = std::thread::scope(|scope| {
        let other = scope.spawn(|| scan_part(layout, &segs, &odd, &scanned));
        let mine = scan_part(layout, &segs, &even, &scanned);
        (mine, other.join().expect("recovery scan thread panicked"))
    });
    let (a, b) = (a?, b?);
    let mut found = KeyTable::build(vec![a.seen, b.seen]);
    let mut large = a.large;
    large.extend(b.large);
    let mut invalid = a.invalid;
    invalid.extend(b.invalid);
    let mut corrected = a.repaired;
    corrected.extend(b.repaired);
    corrected.sort_unstable();
    let corrected_pbas = corrected
        .iter()
        .map(|&(seg, offset)| layout.pba(seg, offset))
        .collect();
    let registry: HashMap<u64, (Vec<u8>, Vec<u8>)> = (a.registry.into_iter().chain(b.registry))
        .map(|(pba, name, value)| (pba, (name, value)))
        .collect();
    let repaired = corrected
        .into_iter()
        .map(|(seg, offset)| {
            let (device, at) = layout.describe(seg, offset);
            let what = if registry.contains_key(&layout.pba(seg, offset)) {
                "namespace registry record"
            } else {
                "evictions record"
            };
            format!(
                "{what} at {device} offset {at:#x}: one flipped bit, corrected \
                 (every open corrects it again until GC rewrites the record)"
            )
        })
        .collect();
    invalid.extend(damaged_headers(layout, headers)?);
    // The newest valid record of the log: in the newest segment that has
    // one, its last.
    let newest = a
        .last
        .into_iter()
        .chain(b.last)
        .max_by_key(|&(seg_seq, _)| seg_seq)
        .map(|(_, h)| h);
    let sealed = a.sealed.max(b.sealed);
    let damage = damage::classify(layout, invalid, newest.as_ref(), sealed);
    // A lost record whose key is known hides the key's older records: an
    // older value must not come back in its place.
    for d in damage.iter().filter(|d| d.kind == DamageKind::Lost) {
        if let (
            Some(key),
            Some(crate::format::RecordHeader {
                namespace: ns, seq, ..
            }),
        ) = (&d.key, d.head)
        {
            let id = (ns, key_hash(ns, key), crate::loc_cache::key_hash2(ns, key));
            found.hide(id, seq);
        }
    }
    // The keys of a segment dropped for its damaged header (not a torn
    // one: those records were never acknowledged, and the older ones are
    // right): hidden, so older records of them cannot come back.
    let mut hidden_keys = Vec::new();
    for d in damage
        .iter()
        .filter(|d| d.kind == DamageKind::Lost && d.segment_offset == 0)
    {
        scan_segment(layout, d.segment, d.segment_seq, |rec| {
            if rec.header.kind.is_value() {
                hidden_keys.push((rec.header.namespace, rec.key().to_vec(), rec.header.seq));
            }
            Ok(())
        })?;
    }
    // A batch cut by damage to an acknowledged record of it: its other
    // members were dropped with it, so their keys are hidden as the
    // damaged one's (an older value must not come back in their place).
    // Cut by a torn tail, it was never acknowledged: older values stay.
    let cut: Vec<CutBatch> = a.batches.cut.into_iter().chain(b.batches.cut).collect();
    let batches_left_out = BatchesLeftOut {
        batches: a.batches.left_out.batches + b.batches.left_out.batches,
        members: a.batches.left_out.members + b.batches.left_out.members,
    };
    for c in cut.iter().filter(|c| c.cut_by_damage(&damage)) {
        hidden_keys.extend(c.keys.iter().cloned());
    }
    for (ns, key, seq) in &hidden_keys {
        let id = (
            *ns,
            key_hash(*ns, key),
            crate::loc_cache::key_hash2(*ns, key),
        );
        found.hide(id, *seq);
    }
    // After damage has hidden what it lost: a head with a lost chunk is
    // hidden (its key gets a tombstone), and chunks no live head names
    // are left out.
    let large = super::large::settle_large(&mut found, &large, &mut hidden_keys);
    Ok(LogScan {
        hidden_keys,
        found,
        large,
        segs,
        max_seq: a
            .max_seq
            .max(b.max_seq)
            .max(kv.last().map_or(0, |&(s, _)| s)),
        max_ns: a.max_ns.max(b.max_ns),
        records: a.records + b.records,
        batches_left_out,
        damage,
        repaired,
        corrected: corrected_pbas,
        registry,
    })
}

/// Segments without a valid header that were in use: a header whose
/// checksum fails, or an unreadable one followed by a valid record. Their
/// records are not scanned (without the header, a freed segment's leftovers
/// cannot be told from live records), so each is reported as one damaged
/// stretch at the segment sequence number its first record carries (a
/// torn tail if that is past the flush mark, as for a new segment whose
/// header write was torn by a crash).
pub(crate) fn damaged_headers(
    layout: &Layout,
    headers: &[Option<SegmentHeader>],
) -> Result<Vec<damage::Found>> {
    let mut out = Vec::new();
    let mut buf = layout.buffer(SEGMENT_HEADER_BYTES as usize + layout.grain_bytes as usize);
    for (s, h) in headers.iter().enumerate() {
        if h.is_some() {
            continue;
        }
        let s = s as u32;
        let n = buf.len();
        layout.read(s, 0, &mut buf[..n])?;
        let first = &buf[SEGMENT_HEADER_BYTES as usize..];
        let first_seq = match format::check_record_head(first) {
            format::RecordCheck::Valid(h) => Some(h.segment_seq),
            _ => None,
        };
        let reason = match SegmentHeader::decode(&buf) {
            Err(DecodeError::BadChecksum { .. }) => "segment header checksum mismatch",
            Err(DecodeError::Absent)
                if matches!(
                    format::check_record_head(first),
                    format::RecordCheck::Valid(_)
                ) =>
            {
                "segment header unreadable, records follow it"
            }
            _ => continue,
        };
        out.push(damage::Found {
            segment: s,
            // Unknown: no record to tell it; not counted as acknowledged.
            segment_seq: first_seq.unwrap_or(u64::MAX),
            invalid: crate::iter::Invalid {
                offset: 0,
                len: layout.segment_bytes,
                reason,
                header: None,
                key: None,
            },
            followed: true,
        });
    }
    Ok(out)
}

/// What one recovery thread found in its share of the segments.
pub(crate) struct Part {
    seen: Seen,
    large: LargeSeen,
    max_seq: u64,
    max_ns: u32,
    records: u64,
    /// Invalid stretches, not yet classified.
    invalid: Vec<damage::Found>,
    /// The last valid record of the newest segment scanned that had one:
    /// (segment sequence number, its header).
    last: Option<(u64, crate::format::RecordHeader)>,
    /// Records corrected by one bit: (segment, offset).
    repaired: Vec<(u32, u64)>,
    /// The newest seal: (segment sequence number, offset).
    sealed: Option<(u64, u64)>,
    /// Namespace registry records: (grain address, name, value).
    registry: Vec<(u64, Vec<u8>, Vec<u8>)>,
    /// Batches cut short, left out whole.
    batches: Batches,
}

pub(crate) fn scan_part(
    layout: &Layout,
    segs: &Segments,
    kv: &[(u64, u32)],
    scanned: &Scanned<'_>,
) -> Result<Part> {
    let mut seen = Seen::new();
    let mut large = LargeSeen::default();
    let mut max_seq = 0u64;
    let mut max_ns = 1u32;
    let mut records = 0u64;
    let mut invalid = Vec::new();
    let mut last = None;
    let mut repaired = Vec::new();
    let mut sealed = None;
    let mut registry = Vec::new();
    let mut batches = Batches::new(layout.grain_bytes);
    for &(seq, seg) in kv {
        let info = segs.get(seg);
        info.seq.store(seq, Ordering::Relaxed);
        let mut newest = seq;
        let mut prev_end = SEGMENT_HEADER_BYTES;
        let end = scan_segment(layout, seg, seq, |rec| {
            records += 1;
            let h = rec.header;
            last = Some((seq, h));
            max_seq = max_seq.max(h.seq);
            newest = newest.max(h.seq);
            max_ns = max_ns.max(namespace::owner_of(h.namespace));
            info.min_seq.fetch_min(h.seq, Ordering::Relaxed);
            let grains = (h.body_bytes() as u64).div_ceil(layout.grain_bytes);
            let tombstone = matches!(h.kind, RecordKind::Tombstone | RecordKind::Evictions);
            if tombstone {
                info.tombstone_grains.fetch_add(grains, Ordering::Relaxed);
            }
            let f = Found {
                seq: h.seq,
                pba: rec.pba,
                grains,
                tombstone,
            };
            // Crash-atomic batches: a frame opens one; its members are
            // held back until the last one is met, and a batch cut short
            // (anything else met first, or the segment's end) is left out
            // whole (docs/FORMAT.md, "Batches").
            let at = layout.split(rec.pba).1;
            let end = at + grains * layout.grain_bytes;
            let before = std::mem::replace(&mut prev_end, end);
            if h.kind == RecordKind::Batch {
                batches.cut_short(at);
                batches.open(format::BatchFrame::decode(rec.value()), seg, at);
                return Ok(());
            }
            if !h.member {
                batches.cut_short(at);
            }
            if h.kind == RecordKind::Evictions {
                // Each evicted key: a tombstone at this record's seq.
                for k in format::decode_evictions(rec.value()) {
                    seen.push((k.namespace, k.hash, k.hash2), f);
                }
                return Ok(());
            }
            let id = (
                h.namespace,
                key_hash(h.namespace, rec.key()),
                crate::loc_cache::key_hash2(h.namespace, rec.key()),
            );
            if h.member {
                let head = (h.kind == RecordKind::LargeHead)
                    .then(|| (h, rec.key().to_vec(), rec.value().to_vec()));
                let key = (h.namespace, rec.key().to_vec(), h.seq);
                if let Some(done) = batches.member((id, f, head), key, seg, before, at, end) {
                    for (id, f, head) in done {
                        seen.push(id, f);
                        if let Some((h, key, value)) = head {
                            large.note(id, &h, &key, &value);
                        }
                    }
                }
                return Ok(());
            }
            if h.namespace == SYSTEM_NS && h.kind == RecordKind::Put {
                registry.push((rec.pba, rec.key().to_vec(), rec.value().to_vec()));
            }
            seen.push(id, f);
            large.note(id, &h, rec.key(), rec.value());
            Ok(())
        })?;
        batches.cut_short(layout.segment_bytes);
        let stretch = |invalid, followed| damage::Found {
            segment: seg,
            segment_seq: seq,
            invalid,
            followed,
        };
        invalid.extend(end.damaged.into_iter().map(|d| stretch(d, true)));
        invalid.extend(end.tail.map(|t| stretch(t, false)));
        repaired.extend(end.repaired.iter().map(|&o| (seg, o)));
        sealed = sealed.max(end.sealed);
        info.sealed_at.store(newest, Ordering::Relaxed);
        info.set_state(SegState::Sealed);
        scanned.one_more();
        if seg == kv[0].1 {
            // After the first segment, size the lists for this thread's
            // share of the log from its record count: growing lists of
            // millions of entries step by step copies them over and over.
            let expected = records.max(1).saturating_mul(kv.len() as u64).min(1 << 28);
            seen.reserve(expected as usize / PARTITIONS);
        }
    }
    Ok(Part {
        seen,
        large,
        batches,
        max_seq,
        max_ns,
        records,
        invalid,
        last,
        repaired,
        sealed,
        registry,
    })
}

/// The live entries of a log scan: (namespace, hash, location, true grains).
pub(crate) fn live_entries(
    scan: &LogScan,
    live_ns: impl Fn(u32) -> bool,
) -> Vec<(u32, u64, Location, u64)> {
    scan.found
        .iter()
        .filter(|((ns, _, _), f)| !f.tombstone && live_ns(*ns))
        .map(|(&(ns, h, _), f)| (ns, h, f.location(), f.grains))
        .collect()
}

/// Namespaces named by the registry records of a scan.
pub(crate) fn registry(scan: &LogScan) -> Result<(Namespaces, i64)> {
    let namespaces = Namespaces::new(scan.max_ns + 1);
    let mut system = 0i64;
    for (&(ns, _, _), f) in scan.found.iter() {
        if ns != SYSTEM_NS || f.tombstone {
            continue;
        }
        // Every registry record the scan met is in `scan.registry`, as
        // read (and corrected): no second read of the device.
        let Some((key, value)) = scan.registry.get(&f.pba) else {
            return Err(Error::Unusable(
                "namespace registry record unreadable".into(),
            ));
        };
        let name = String::from_utf8_lossy(key).into_owned();
        let (logical, physical) = namespace::decode_registry_value(value)
            .ok_or_else(|| Error::Unusable(format!("bad namespace registry value for {name:?}")))?;
        namespaces.insert(&name, logical, physical, 0);
        system += 1;
    }
    Ok((namespaces, system))
}
