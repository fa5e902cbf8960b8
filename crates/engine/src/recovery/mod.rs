//! Opening a store: superblocks, then either the index checkpoint (clean
//! shutdown) or a rebuild of the index from the log (crash).
//!
//! The rebuild reads every KV segment in sequence order with large
//! sequential reads and keeps, per key, the record with the highest
//! sequence number (a tombstone hides older puts). Keys are told apart by
//! (namespace, two independent 64-bit hashes) so no key bytes are kept in
//! DRAM. An invalid record does not end a segment's scan: the scan finds
//! the next valid record and goes on, so a damaged record never takes
//! valid ones after it along. Each invalid stretch is classified
//! (`damage.rs`) as a torn tail (writes in flight at the crash) or damage
//! to acknowledged data; the latter makes a store-mode open fail unless
//! [`Options::salvage`] is set, and is always reported.
//!
//! Files: `devices.rs` (data files, superblocks, layout), `create.rs` (a
//! new store), `headers.rs` (segment headers), `scan.rs` (the log scan and
//! what it found); this file opens: the checkpoint or a rebuild from the
//! scan, then what damage requires (report, refuse, salvage).

mod batches;
mod create;
mod devices;
mod headers;
pub(crate) mod keys;
mod large;
pub(crate) mod scan;

pub use devices::{creating_file_name, data_file_name};
pub(crate) use devices::{load_layout, open_paths, read_superblocks};
pub(crate) use headers::{checkpoint_segments, read_segment_headers, SegmentHeaders};
pub(crate) use scan::{live_entries, registry, scan_log};

use create::format_store;
use headers::{mark_free, rewrite_headers};
use scan::HiddenKey;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use nvdepot_index::{Expect, Index, IndexConfig};
use nvdepot_io::Device;

use crate::checkpoint;
use crate::damage::{self, Damage, DamageKind};
use crate::error::{Error, Result};
use crate::format::{DecodeError, RecordKind, SegmentHeader, SegmentKind};
use crate::inner::{key_hash, Inner};
use crate::layout::Layout;
use crate::namespace::{Namespaces, SYSTEM_NS};
use crate::options::Options;
use crate::segments::{SegState, Segments};
use crate::store::OpenReport;

/// Opens or creates the store on `devices`.
pub(crate) fn open(
    devices: Vec<Arc<dyn Device>>,
    opts: &Options,
    may_create: bool,
) -> Result<(Inner, OpenReport)> {
    let started = Instant::now();
    if devices.is_empty() {
        return Err(Error::Config("no devices".into()));
    }
    if opts.key_bytes_max > u16::MAX as usize {
        // A record's key length is a u16 (docs/FORMAT.md).
        return Err(Error::Config(format!(
            "key_bytes_max {} exceeds the format's 65535",
            opts.key_bytes_max
        )));
    }
    let sbs = read_superblocks(&devices)?;
    if sbs.iter().all(|s| *s == Err(DecodeError::Absent)) {
        if !may_create {
            return Err(Error::NotAStore {
                device: devices[0].name().into(),
                reason: "no superblock".into(),
            });
        }
        let inner = format_store(devices, opts)?;
        let report = OpenReport {
            clean: true,
            created: true,
            seconds: started.elapsed().as_secs_f64(),
            ..Default::default()
        };
        return Ok((inner, report));
    }
    let (layout, sb) = load_layout(devices, sbs)?;
    let SegmentHeaders {
        headers,
        one_copy_damaged,
    } = read_segment_headers(&layout, sb.uuid)?;
    rewrite_headers(&layout, &one_copy_damaged)?;
    if let Some((inner, keys)) = try_checkpoint(&layout, &headers, opts, sb.uuid)? {
        let report = OpenReport {
            clean: true,
            created: false,
            seconds: started.elapsed().as_secs_f64(),
            keys,
            records_scanned: 0,
            scan_seconds: 0.0,
            damage: Vec::new(),
        };
        return Ok((inner, report));
    }
    let (inner, keys, records, scan_seconds, damage, hidden_keys) =
        rebuild(layout, &headers, opts, sb.uuid)?;
    // What the scan read is the log's durable past from now on (the flush
    // mark of new records starts after it): make sure the device has it,
    // not only its volatile cache, which a process crash leaves full.
    inner.layout.flush(u64::MAX)?;
    settle(&inner, &damage, &hidden_keys)?;
    let seconds = started.elapsed().as_secs_f64();
    tracing::info!(
        "index rebuilt from the log: {keys} keys from {records} records in {seconds:.2} s"
    );
    Ok((
        inner,
        OpenReport {
            clean: false,
            created: false,
            seconds,
            keys,
            records_scanned: records,
            scan_seconds,
            damage,
        },
    ))
}

/// Index sizing: tables sized so that 256 of them address every grain;
/// enough tables up front for `keys` (known when rebuilding), so a rebuild
/// does not pay for a cascade of grows.
pub(crate) fn index_config(layout: &Layout, keys: u64) -> IndexConfig {
    let per_table = (layout.grains() / 256).max(1);
    let table_entries_log2 = (64 - (per_table - 1).leading_zeros()).clamp(10, 27);
    // Aim for ~80 % occupancy after loading `keys`.
    let tables = (keys * 5 / 4) >> table_entries_log2;
    let initial_tables_log2 = (64 - tables.leading_zeros()).min(8);
    IndexConfig {
        table_entries_log2,
        initial_tables_log2,
        pba_bits: index_pba_bits(layout),
    }
}

/// The index's pba width for this layout: just wide enough for its
/// grains, so the rest of each entry's pba field holds fingerprint bits
/// (fewer keys share a fingerprint, so fewer reads of records that are
/// not the key's: docs/INDEX.md).
pub(crate) fn index_pba_bits(layout: &Layout) -> u32 {
    nvdepot_index::pba_bits_for(layout.grains().saturating_sub(1))
}

fn try_checkpoint(
    layout: &Arc<Layout>,
    headers: &[Option<SegmentHeader>],
    opts: &Options,
    uuid: u128,
) -> Result<Option<(Inner, u64)>> {
    let ckpt = checkpoint_segments(headers);
    if ckpt.is_empty() {
        return Ok(None);
    }
    let all: Vec<u32> = ckpt.iter().map(|(s, _)| *s).collect();
    let newest = ckpt.iter().map(|(_, h)| h.seq).max().expect("non-empty");
    let mut parts: Vec<(u32, SegmentHeader)> =
        ckpt.into_iter().filter(|(_, h)| h.seq == newest).collect();
    parts.sort_by_key(|(_, h)| h.part);
    let max_kv = headers
        .iter()
        .flatten()
        .filter(|h| h.kind == SegmentKind::Kv)
        .map(|h| h.seq)
        .max()
        .unwrap_or(0);
    let complete = parts
        .iter()
        .enumerate()
        .all(|(i, (_, h))| h.part as usize == i && h.parts as usize == parts.len());
    let restored = if complete && newest > max_kv {
        match checkpoint::read(layout, &parts) {
            Ok(r) => Some(r),
            Err(e) => {
                tracing::warn!("index checkpoint unusable, scanning the log instead: {e}");
                None
            }
        }
    } else {
        None
    };
    // From here on the checkpoint is stale: invalidate it before any write.
    mark_free(layout, uuid, &all)?;
    let Some(r) = restored else { return Ok(None) };
    // The segment table must agree with the headers on the device.
    for (i, (in_use, v)) in r.segments.iter().enumerate() {
        let on_disk = headers[i]
            .filter(|h| h.kind == SegmentKind::Kv)
            .map(|h| h.seq);
        if *in_use && on_disk != Some(v[0]) {
            tracing::warn!(
                "checkpoint disagrees with segment {i}'s header; scanning the log instead"
            );
            return Ok(None);
        }
    }
    let segs = Arc::new(Segments::new(layout.segments));
    for (i, (in_use, v)) in r.segments.iter().enumerate() {
        let info = segs.get(i as u32);
        if *in_use {
            info.seq.store(v[0], Ordering::Relaxed);
            info.valid_grains.store(v[1], Ordering::Relaxed);
            info.min_seq.store(v[2], Ordering::Relaxed);
            info.sealed_at.store(v[3], Ordering::Relaxed);
            info.tombstone_grains.store(v[4], Ordering::Relaxed);
            info.set_state(SegState::Sealed);
        } else {
            segs.release(i as u32);
        }
    }
    let namespaces = Namespaces::new(r.ns_next);
    for (name, logical, physical, count) in &r.namespaces {
        namespaces.insert(name, *logical, *physical, *count);
    }
    if let Some(c) = namespaces.counter(SYSTEM_NS) {
        c.store(r.system_count, Ordering::Relaxed);
    }
    let seq = Arc::new(AtomicU64::new(r.seq.max(newest + 1)));
    let inner = Inner::new(
        layout.clone(),
        segs,
        r.index,
        seq,
        namespaces,
        opts.clone(),
        uuid,
    );
    let keys = inner.user_keys();
    Ok(Some((inner, keys)))
}

/// What [`rebuild`] returns: the store, keys, records scanned, scan
/// seconds, the damage found, and keys dropped with damaged segments.
type Rebuilt = (Inner, u64, u64, f64, Vec<Damage>, Vec<HiddenKey>);

fn rebuild(
    layout: Arc<Layout>,
    headers: &[Option<SegmentHeader>],
    opts: &Options,
    uuid: u128,
) -> Result<Rebuilt> {
    let started = Instant::now();
    let scan = scan_log(&layout, headers, opts.progress.as_ref())?;
    let scan_seconds = started.elapsed().as_secs_f64();
    for r in &scan.repaired {
        tracing::warn!("recovery: DAMAGE (nothing lost) {r}");
    }
    report_damage(&scan.damage, opts)?;
    let (namespaces, system) = registry(&scan)?;
    if let Some(c) = namespaces.counter(SYSTEM_NS) {
        c.store(system, Ordering::Relaxed);
    }
    let index = Index::new(index_config(&layout, scan.found.len() as u64));
    let segs = scan.segs.clone();
    let live_ns = |ns: u32| ns == SYSTEM_NS || namespaces.is_live_physical(ns);
    // The index is concurrent: fill it from two threads, each taking every
    // other partition of the key table. A partition's keys share the low
    // bits of their hash, which pick the index table, so each thread's
    // inserts stay within a few tables at a time.
    let fill = |first: usize| -> Result<HashMap<u32, i64>> {
        let mut counts: HashMap<u32, i64> = HashMap::new();
        // Nearly every key is in one namespace: remember the last answer.
        let mut last_ns = (u32::MAX, false);
        for part in scan.found.partitions().iter().skip(first).step_by(2) {
            for (&(ns, h, _), f) in part {
                if last_ns.0 != ns {
                    last_ns = (ns, live_ns(ns));
                }
                if f.tombstone || !last_ns.1 {
                    continue;
                }
                let loc = f.location();
                let fp = Index::fingerprint(h);
                // Every entry of the key table is a distinct key: no lookup.
                if let Err(e) = index.insert(fp, loc, Expect::New) {
                    return Err(Error::Unusable(format!(
                        "index insert during recovery failed: {e:?}"
                    )));
                }
                segs.add_valid(layout.segment_of(loc.pba), f.grains);
                if ns != SYSTEM_NS {
                    *counts.entry(ns).or_default() += 1;
                }
            }
        }
        Ok(counts)
    };
    let (a, b) = std::thread::scope(|scope| {
        let other = scope.spawn(|| fill(1));
        let mine = fill(0);
        (mine, other.join().expect("index fill thread panicked"))
    });
    let mut counts = a?;
    for (ns, n) in b? {
        *counts.entry(ns).or_default() += n;
    }
    // Chunk entries of large values count with the registry's entries.
    let chunks: i64 = counts
        .iter()
        .filter(|(&ns, _)| ns & crate::format::CHUNK_SPACE != 0)
        .map(|(_, &n)| n)
        .sum();
    counts.retain(|&ns, _| ns & crate::format::CHUNK_SPACE == 0);
    let keys: u64 = counts.values().map(|&n| n as u64).sum();
    for (ns, n) in counts {
        if let Some(c) = namespaces.counter(ns) {
            c.store(n, Ordering::Relaxed);
        }
    }
    if let Some(c) = namespaces.counter(SYSTEM_NS) {
        c.fetch_add(chunks, Ordering::Relaxed);
    }
    if scan.large.orphan_chunks > 0 {
        tracing::info!(
            "recovery: {} chunk(s) of large values no head names (a large put cut by the crash) left out",
            scan.large.orphan_chunks
        );
    }
    if scan.batches_left_out.batches > 0 {
        // Cut by the crash (never acknowledged), or a record of theirs is
        // damaged (reported with the damage): all or nothing, so nothing.
        tracing::info!(
            "recovery: {} batch(es) cut short left out whole ({} of their records met)",
            scan.batches_left_out.batches,
            scan.batches_left_out.members
        );
    }
    if scan.large.incomplete_heads > 0 {
        tracing::warn!(
            "recovery: {} large value(s) lost a chunk to damage; their keys are now absent",
            scan.large.incomplete_heads
        );
    }
    // Everything else is free; KV segments that turned out empty too. A
    // segment with a damaged header is held back until `settle` has
    // marked it free on the device: a writer must not put new records in
    // it before that.
    let headless: Vec<u32> = scan
        .damage
        .iter()
        .filter(|d| d.segment_offset == 0)
        .map(|d| d.segment)
        .collect();
    for s in 0..layout.segments {
        let info = segs.get(s);
        let empty = info.min_seq.load(Ordering::Relaxed) == u64::MAX;
        if (info.state() != SegState::Sealed || empty) && !headless.contains(&s) {
            segs.release(s);
        }
    }
    let seq = Arc::new(AtomicU64::new(scan.max_seq + 1));
    let records = scan.records;
    let damage = scan.damage;
    let hidden_keys = scan.hidden_keys;
    tracing::info!(
        "log scan {scan_seconds:.2} s, index build {:.2} s",
        started.elapsed().as_secs_f64() - scan_seconds
    );
    let inner = Inner::new(layout, segs, index, seq, namespaces, opts.clone(), uuid);
    Ok((inner, keys, records, scan_seconds, damage, hidden_keys))
}

/// Logs every invalid stretch recovery found; in store mode, refuses to
/// open over damage to acknowledged data unless salvaging.
fn report_damage(damage: &[Damage], opts: &Options) -> Result<()> {
    for d in damage {
        match d.kind {
            DamageKind::TornTail => tracing::info!("recovery: {d}"),
            DamageKind::Lost => tracing::warn!("recovery: {d}"),
        }
    }
    let lost: Vec<&Damage> = damage
        .iter()
        .filter(|d| d.kind == DamageKind::Lost)
        .collect();
    let Some(first) = lost.first() else {
        return Ok(());
    };
    if opts.cache_mode || opts.salvage {
        tracing::warn!(
            "recovery: {} damaged stretch(es) of acknowledged data dropped; every other record kept",
            lost.len()
        );
        return Ok(());
    }
    Err(Error::Damaged {
        stretches: lost.len(),
        first: first.to_string(),
    })
}

/// Frees a segment or two for the tombstones `settle` appends for the keys
/// of segments dropped whole, when the crash left none free (garbage
/// collection, which normally keeps some, runs only once the open is
/// done). Segments holding damage are never collected here: their damaged records must stay until the tombstones
/// that hide their keys' older values are on the device.
fn make_room(inner: &Inner, damage: &[Damage]) -> Result<()> {
    let want = crate::writer::GC_RESERVE_SEGMENTS;
    if inner.segments.free_count() >= want {
        return Ok(());
    }
    let avoid: Vec<u32> = damage.iter().map(|d| d.segment).collect();
    let pass = crate::gc::collect_avoiding(inner, want, &avoid)?;
    tracing::info!(
        "recovery: freed {} segment(s) for the tombstones of damaged records",
        pass.freed
    );
    Ok(())
}

/// After a recovery that goes ahead: pads over every torn tail (before
/// any new write, so a crash meanwhile finds them still after the flush
/// mark); replaces each lost record whose key is known by a tombstone of
/// that key in its place, at its sequence number (its older values must
/// stay hidden once it is gone; newer ones stay), and pads over the other
/// lost stretches; logs a tombstone for each key of a segment dropped for
/// its damaged header (unless the key has a newer record), then frees
/// those segments. The next scan of the log is then clean, and a later
/// crash's recovery does not report the same stretches again.
fn settle(inner: &Inner, damage: &[Damage], hidden_keys: &[HiddenKey]) -> Result<()> {
    // A stretch at offset 0 is a damaged segment header: that segment is
    // dropped whole (reported) and marked free rather than padded, so the
    // next scan does not meet it again.
    let pick = |kind: DamageKind, header: bool| -> Vec<&Damage> {
        damage
            .iter()
            .filter(|d| d.kind == kind && (d.segment_offset == 0) == header)
            .collect()
    };
    // Marks the segments of damaged headers free on the device, then
    // gives them to the writer (`rebuild` held them back).
    let free = |list: Vec<&Damage>| -> Result<()> {
        let segs: Vec<u32> = list.iter().map(|d| d.segment).collect();
        mark_free(&inner.layout, inner.uuid, &segs)?;
        for s in segs {
            inner.segments.release(s);
        }
        Ok(())
    };
    // Torn: before any new write.
    free(pick(DamageKind::TornTail, true))?;
    damage::mend(&inner.layout, &pick(DamageKind::TornTail, false))?;
    // Lost records: a tombstone of the key in the record's place when the
    // key is known (its older values must stay hidden once the record is
    // gone), a pad otherwise.
    let lost = pick(DamageKind::Lost, false);
    for (segment, grains) in damage::bury(&inner.layout, &lost)? {
        // GC carries the tombstones of a segment it collects forward (and
        // frees a segment with neither live records nor tombstones
        // without reading it): count them.
        inner
            .segments
            .get(segment)
            .tombstone_grains
            .fetch_add(grains, Ordering::Relaxed);
    }
    // Segments dropped for a damaged header: their keys' tombstones go to
    // the log, on the device before the segments are marked free.
    if !hidden_keys.is_empty() {
        make_room(inner, damage)?;
    }
    let mut last = None;
    let mut cands = Vec::new();
    for (ns, key, _) in hidden_keys {
        // A key still indexed has a record newer than the dropped one (the
        // scan hid it otherwise): that record hides the older ones, and a
        // tombstone, which takes the next sequence number, would hide it
        // too at the next recovery.
        let (hash, hash2) = (key_hash(*ns, key), crate::loc_cache::key_hash2(*ns, key));
        let newer = crate::aio::now(inner.existing(
            crate::aio::Mode::Blocking,
            *ns,
            key,
            hash,
            hash2,
            &mut cands,
        ))?;
        if newer.is_some() {
            continue;
        }
        let header = inner.header(RecordKind::Tombstone, *ns, key, 0);
        let parts = crate::writer::RecordParts {
            header,
            key,
            value: &[],
        };
        // GC's reserve: garbage collection does not run before the open
        // ends, and these few records must not fail an open for want of
        // the room GC would make.
        let app = inner.append_hiding(&parts, crate::writer::Appender::Gc)?;
        last = Some(app.lsn);
    }
    if let Some(lsn) = last {
        inner.writer.wait_durable(lsn)?;
        inner.layout.flush(u64::MAX)?;
    }
    free(pick(DamageKind::Lost, true))
}
