//! Garbage collection: frees segments by relocating the records the index
//! still points to (papers/000 §4.1).
//!
//! Victims are chosen by a generalised greedy policy with an age factor
//! (cost-benefit, as in SALSA): score = (1 - u) * age / (1 + u), where `u`
//! is the live fraction and `age` the sequence distance since sealing.
//!
//! Relocated puts get a fresh sequence number under the key's stripe lock,
//! exactly like a user put, so record order on the device stays the order
//! the index saw. A tombstone is dropped when no other segment in use
//! holds a record older than it (so no older version of its key can
//! resurface at recovery); otherwise it is relocated keeping its sequence
//! number. Before a victim returns to the free pool its header is
//! overwritten with a "free" header and flushed, so recovery never reads
//! its stale records.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use nvdepot_index::{Expect, Index, Location};

use crate::error::Result;
use crate::format::{
    encode_evictions, EvictedKey, RecordKind, SegmentHeader, SegmentKind, SEGMENT_HEADER_BYTES,
};
use crate::inner::{key_hash, Inner};
use crate::iter::scan_segment;
use crate::options::Eviction;
use crate::segments::{SegState, SegmentInfo};
use crate::writer::{Appender, RecordParts, GC_RESERVE_SEGMENTS};

/// A live record copied out of a victim.
struct Live {
    hash: u64,
    old: Location,
    grains: u64,
    header: crate::format::RecordHeader,
    key: Vec<u8>,
    value: Vec<u8>,
}

/// Segments a purge of cleared namespaces scans per turn of the GC
/// thread, between which it collects if space runs short.
const PURGE_SEGMENTS_PER_TURN: usize = 4;

/// Index entries a purge through the index reads per turn.
const PURGE_ENTRIES_PER_TURN: usize = 512;

/// A purge of cleared namespaces under way on the GC thread, done a few
/// segments (or index entries) per turn.
struct Purge {
    retired: Vec<u32>,
    /// Through the index: every entry when the purge started (else empty:
    /// a scan of the segments).
    entries: Vec<(u64, Location)>,
    by_index: bool,
    /// The next segment or entry.
    next: usize,
}

impl Purge {
    fn start(inner: &Inner) -> Option<Purge> {
        let retired = std::mem::take(&mut *inner.pending_purge.lock());
        if retired.is_empty() {
            return None;
        }
        let by_index = crate::iter::index_cheaper(inner);
        let entries = if by_index {
            crate::iter::index_entries(inner)
        } else {
            Vec::new()
        };
        Some(Purge {
            retired,
            entries,
            by_index,
            next: 0,
        })
    }

    /// One turn's share; `Ok(true)` when the purge is done.
    fn step(&mut self, inner: &Inner) -> Result<bool> {
        if self.by_index {
            let end = (self.next + PURGE_ENTRIES_PER_TURN).min(self.entries.len());
            inner.purge_entries(&self.retired, &self.entries[self.next..end])?;
            self.next = end;
            return Ok(end == self.entries.len());
        }
        let end = (self.next + PURGE_SEGMENTS_PER_TURN).min(inner.segments.len());
        for s in self.next..end {
            inner.purge_segment(&self.retired, s as u32)?;
        }
        self.next = end;
        Ok(end == inner.segments.len())
    }
}

/// Relocate in batches of about this many bytes (one flush each).
const BATCH_BYTES: usize = 4 << 20;

/// Free segments below which GC runs.
pub(crate) fn low_water(inner: &Inner) -> usize {
    GC_RESERVE_SEGMENTS + 2 + inner.segments.len() / 32
}

/// How long the log stays idle (nothing appended) before the GC thread
/// seals it. Damage to records acknowledged this close to a crash reads
/// as a torn tail (docs/RELIABILITY.md); a seal per idle spell costs one
/// grain and one flush, at most every `SEAL_AFTER`.
pub(crate) const SEAL_AFTER: Duration = Duration::from_millis(100);

/// Longest the GC thread sleeps with nothing to collect. Taking a segment
/// and queueing a namespace purge wake it at once, and it wakes for the
/// next seal or periodic flush on time; this bounds only how late it sees
/// that appends started again. It used to poll every 5 ms: 200 wakeups a
/// second, measured at 7-12 % of a core of an idle server on this VM
/// (`perf record -t` of the thread: timer wakeups and futex waits).
const IDLE_POLL: Duration = Duration::from_millis(50);

pub(crate) struct GcThread {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl GcThread {
    pub fn start(inner: Arc<Inner>) -> GcThread {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let registrar = Arc::clone(&inner);
        let handle = std::thread::Builder::new()
            .name("nvdepot-gc".into())
            .spawn(move || {
                let interval = Duration::from_millis(inner.opts.flush_interval_ms.max(1));
                let mut last_flush = std::time::Instant::now();
                let mut appended = inner.writer.appended();
                let mut appended_at = std::time::Instant::now();
                let mut purge: Option<Purge> = None;
                // The last collection found nothing to gain while a purge
                // was pending.
                let mut starved = false;
                while !flag.load(Ordering::Relaxed) {
                    let now = inner.writer.appended();
                    if now != appended {
                        (appended, appended_at) = (now, std::time::Instant::now());
                    } else if appended_at.elapsed() >= SEAL_AFTER {
                        // Idle: a seal tells damage to the newest records
                        // from a torn tail (`Writer::seal_durable`).
                        if let Err(e) = inner.writer.seal_durable() {
                            tracing::error!("writing a log seal failed: {e}");
                        }
                        appended_at = std::time::Instant::now();
                    }
                    if !inner.opts.sync && last_flush.elapsed() >= interval {
                        // Writes were acknowledged before a flush: bound how
                        // long they sit in the device's volatile cache.
                        if let Err(e) = inner.writer.flush_devices() {
                            tracing::error!("periodic device flush failed: {e}");
                        }
                        last_flush = std::time::Instant::now();
                    }
                    let want = low_water(&inner);
                    // Purging cleared namespaces scans the whole log: a
                    // few segments per turn, and only while no writer may
                    // be short of space (a pipeline of flush_all amid
                    // large sets kept the thread scanning while writers
                    // waited: memcache answered `store full` with 3 % of
                    // the grains live). Collection forgets the records of
                    // retired namespaces itself, so deferring is safe;
                    // but when collection finds nothing to gain, the purge
                    // is what makes dead grains countable (store mode's
                    // victims are chosen by live grains), so it goes on.
                    if inner.segments.free_count() >= want || starved {
                        if purge.is_none() {
                            purge = Purge::start(&inner);
                        }
                        if let Some(p) = &mut purge {
                            match p.step(&inner) {
                                Ok(false) => {}
                                Ok(true) => purge = None,
                                Err(e) => {
                                    tracing::error!("purging cleared namespaces failed: {e}");
                                    let p = purge.take().expect("purging");
                                    inner.pending_purge.lock().extend(p.retired);
                                }
                            }
                        }
                    }
                    starved = false;
                    if inner.segments.free_count() < want {
                        match collect(&inner, want) {
                            Ok(Pass {
                                exhausted: true, ..
                            }) if purge.is_some() || !inner.pending_purge.lock().is_empty() => {
                                // A purge may free space: on with it.
                                starved = true;
                            }
                            Ok(Pass {
                                exhausted: true, ..
                            }) => {
                                // Nothing to gain: let waiting writers fail fast.
                                inner.segments.gc_gave_up.fetch_add(1, Ordering::Relaxed);
                                inner.segments.notify_freed();
                                std::thread::park_timeout(Duration::from_millis(20));
                            }
                            Ok(pass) => {
                                *inner.segments.gc_failed.lock() = None;
                                if pass.freed == 0 {
                                    // Waiting for appends in flight to land.
                                    std::thread::park_timeout(Duration::from_millis(1));
                                }
                            }
                            Err(e) => {
                                tracing::error!("garbage collection failed: {e}");
                                *inner.segments.gc_failed.lock() = Some(e.to_string());
                                inner.segments.gc_gave_up.fetch_add(1, Ordering::Relaxed);
                                inner.segments.notify_freed();
                                std::thread::park_timeout(Duration::from_millis(200));
                            }
                        }
                    } else if purge.is_none() {
                        // Nothing to collect: sleep until the next seal or
                        // periodic flush is due, at most `IDLE_POLL`.
                        let mut sleep =
                            IDLE_POLL.min(SEAL_AFTER.saturating_sub(appended_at.elapsed()));
                        if !inner.opts.sync {
                            sleep = sleep.min(interval.saturating_sub(last_flush.elapsed()));
                        }
                        std::thread::park_timeout(sleep.max(Duration::from_millis(1)));
                    }
                }
            })
            .expect("spawn GC thread");
        registrar.segments.set_collector(handle.thread().clone());
        GcThread {
            stop,
            handle: Some(handle),
        }
    }

    pub fn stop(self) {
        drop(self);
    }
}

impl Drop for GcThread {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            h.thread().unpark();
            let _ = h.join();
        }
    }
}

/// Outcome of a collection pass.
pub(crate) struct Pass {
    /// Net segments freed.
    pub freed: usize,
    /// True if there was nothing worth collecting: less than two segments'
    /// worth of dead grains in all sealed segments together (the store is
    /// full of live data).
    pub exhausted: bool,
}

/// Collects victims until `target` segments are free, there is nothing
/// worth collecting, or every segment has been tried once.
pub(crate) fn collect(inner: &Inner, target: usize) -> Result<Pass> {
    collect_with(inner, target, &[], false)
}

/// Recovery's collection when a crash left no segment free: never takes a
/// segment of `avoid` as a victim, and takes the emptiest first in cache
/// mode too (a segment whose records GC had already relocated, the usual
/// reason nothing is free, is freed with no write; evicting by age could
/// need room to log evictions).
pub(crate) fn collect_avoiding(inner: &Inner, target: usize, avoid: &[u32]) -> Result<Pass> {
    collect_with(inner, target, avoid, true)
}

fn collect_with(inner: &Inner, target: usize, avoid: &[u32], emptiest: bool) -> Result<Pass> {
    let _one_collector = inner.collector.lock();
    let start = inner.segments.free_count();
    let mut exhausted = false;
    for _ in 0..inner.segments.len() {
        let free = inner.segments.free_count();
        if free >= target {
            break;
        }
        // Nearly out of space: take the emptiest segment, ignoring age.
        let greedy = free <= GC_RESERVE_SEGMENTS + 1;
        let victim = if inner.opts.cache_mode && !emptiest {
            choose_victim(inner, inner.opts.eviction)
        } else {
            pick_victim(inner, greedy || emptiest, avoid)
        };
        let Some(victim) = victim else {
            // A segment passed over only because appends to it are still
            // in flight (write-behind puts not yet written) becomes a
            // candidate in a moment: not a reason for writers to give up.
            exhausted = !appends_in_flight_to_sealed(inner);
            break;
        };
        collect_segment(inner, victim)?;
    }
    let freed = inner.segments.free_count().saturating_sub(start);
    Ok(Pass { freed, exhausted })
}

/// Whether some sealed segment still has appends in flight.
fn appends_in_flight_to_sealed(inner: &Inner) -> bool {
    inner
        .segments
        .infos
        .iter()
        .any(|s| s.state() == SegState::Sealed && s.in_flight.load(Ordering::Acquire) > 0)
}

/// Sealed segments with no appends in flight: what cache mode may evict.
fn evictable(inner: &Inner) -> impl Iterator<Item = (u32, &SegmentInfo)> {
    inner
        .segments
        .infos
        .iter()
        .enumerate()
        .filter(|(_, s)| s.state() == SegState::Sealed && s.in_flight.load(Ordering::Acquire) == 0)
        .map(|(i, s)| (i as u32, s))
}

/// Cache mode's victim under `policy` (see [`Eviction`]). A segment that
/// survived two turns of the log (twice as many evictions as there are
/// segments) goes first whatever the policy: keys evicted out of write
/// order are logged until no older segment could hold a stale copy of
/// them, and a segment kept forever would keep those logs (and relocate
/// them) forever. Every other candidate then ages by one eviction.
fn choose_victim(inner: &Inner, policy: Eviction) -> Option<u32> {
    let n = inner.segments.len() as u32;
    let seq = |s: &SegmentInfo| s.seq.load(Ordering::Relaxed);
    let overdue = evictable(inner)
        .filter(|(_, s)| s.survived.load(Ordering::Relaxed) >= 2 * n)
        .min_by_key(|(_, s)| seq(s));
    let victim = match (overdue, policy) {
        (Some(v), _) => Some(v),
        (None, Eviction::Fifo) => evictable(inner).min_by_key(|(_, s)| seq(s)),
        (None, Eviction::SegmentLru) => evictable(inner).min_by_key(|(_, s)| {
            let used = s
                .last_hit
                .load(Ordering::Relaxed)
                .max(s.sealed_at.load(Ordering::Relaxed));
            (used, seq(s))
        }),
    }?
    .0;
    for (i, s) in evictable(inner) {
        if i != victim {
            s.survived.fetch_add(1, Ordering::Relaxed);
        }
    }
    Some(victim)
}

fn pick_victim(inner: &Inner, greedy: bool, avoid: &[u32]) -> Option<u32> {
    let cap = inner.layout.grains_per_segment();
    let now = inner.seq.load(Ordering::Relaxed);
    let mut best: Option<(f64, u32)> = None;
    let mut dead = 0u64;
    for (i, s) in inner.segments.infos.iter().enumerate() {
        if s.state() != SegState::Sealed || avoid.contains(&(i as u32)) {
            continue;
        }
        let valid = s.valid_grains.load(Ordering::Relaxed).min(cap);
        dead += cap - valid;
        let u = valid as f64 / cap as f64;
        // Appends still in flight: the segment's tail may be neither on the
        // device nor in the index yet.
        if u >= 0.999 || s.in_flight.load(Ordering::Acquire) > 0 {
            continue;
        }
        let score = if greedy {
            1.0 - u
        } else {
            let age = (now.saturating_sub(s.sealed_at.load(Ordering::Relaxed)) + 1) as f64;
            (1.0 - u) * age / (1.0 + u)
        };
        if best.is_none_or(|(b, _)| score > b) {
            best = Some((score, i as u32));
        }
    }
    if dead < 2 * cap {
        return None;
    }
    best.map(|(_, i)| i)
}

fn collect_segment(inner: &Inner, victim: u32) -> Result<()> {
    // The victim is sealed, so nothing more is appended to it; write out
    // whatever of it is still in buffers so the scan sees all of it.
    inner.writer.sync_all()?;
    let _pause = inner.gc_pause.write();
    let info = inner.segments.get(victim);
    info.set_state(SegState::Collecting);
    let seg_seq = info.seq.load(Ordering::Relaxed);
    let oldest_elsewhere = inner.segments.oldest_record_seq(victim);
    let mut batch: Vec<Live> = Vec::new();
    // Cache mode: records to drop from the index once the victim is marked
    // free on the device. Dropping them first would let a `delete` of such
    // a key find nothing, write no tombstone, and a crash before the free
    // header then bring the evicted value back.
    let mut evicted: Vec<(u64, Location, crate::format::RecordHeader)> = Vec::new();
    // Evicted keys an older segment may still hold a stale put of: their
    // eviction is logged before the victim is freed (see `log_evictions`).
    let mut to_log: Vec<(Location, EvictedKey)> = Vec::new();
    let mut batch_bytes = 0;
    // Neither live records nor tombstones (a large value's replaced
    // chunks, typically): nothing to move, so free it without reading it.
    let dead = info.valid_grains.load(Ordering::Relaxed) == 0
        && info.tombstone_grains.load(Ordering::Relaxed) == 0;
    let result = if dead {
        inner
            .counters
            .gc_segments_unread
            .fetch_add(1, Ordering::Relaxed);
        Ok(crate::iter::ScanEnd::default())
    } else {
        scan_segment(&inner.layout, victim, seg_seq, |rec| {
            let h = &rec.header;
            match h.kind {
                RecordKind::Put | RecordKind::LargeHead => {
                    let Some(_) = inner.namespaces.counter(h.namespace) else {
                        // Namespace dropped or cleared: forget the entry.
                        let fp = Index::fingerprint(key_hash(h.namespace, rec.key()));
                        let loc = inner.location(rec.pba, h);
                        if inner.index.remove(fp, loc) {
                            inner.segments.sub_valid(victim, inner.grains_of(h));
                        }
                        return Ok(());
                    };
                    let hash = key_hash(h.namespace, rec.key());
                    let old = inner.location(rec.pba, h);
                    if !inner.still_indexed(Index::fingerprint(hash), old) {
                        return Ok(());
                    }
                    // The namespace registry is never evicted, only moved.
                    if inner.opts.cache_mode && h.namespace != crate::namespace::SYSTEM_NS {
                        if h.seq > oldest_elsewhere {
                            let hash2 = crate::loc_cache::key_hash2(h.namespace, rec.key());
                            to_log.push((
                                old,
                                EvictedKey {
                                    namespace: h.namespace,
                                    hash,
                                    hash2,
                                },
                            ));
                        }
                        evicted.push((hash, old, *h));
                        return Ok(());
                    }
                    batch_bytes += rec.bytes.len();
                    batch.push(Live {
                        hash,
                        old,
                        grains: inner.grains_of(h),
                        header: *h,
                        key: rec.key().to_vec(),
                        value: rec.value().to_vec(),
                    });
                }
                RecordKind::Tombstone | RecordKind::Evictions => {
                    if h.seq < oldest_elsewhere {
                        inner
                            .counters
                            .gc_tombstones_dropped
                            .fetch_add(1, Ordering::Relaxed);
                        return Ok(());
                    }
                    append_hiding_record(
                        inner,
                        &RecordParts {
                            // The copy stands alone (its batch is whole).
                            header: crate::format::RecordHeader {
                                member: false,
                                ..*h
                            },
                            key: rec.key(),
                            value: rec.value(),
                        },
                    )?;
                }
                // A batch's frame matters only until the batch is on the
                // device whole; its live members move as plain records.
                RecordKind::Pad | RecordKind::Batch => {}
            }
            if batch_bytes >= BATCH_BYTES {
                relocate(inner, victim, &mut batch)?;
                batch_bytes = 0;
            }
            Ok(())
        })
    };
    if let Ok(end) = &result {
        for d in &end.damaged {
            let (device, offset) = inner.layout.describe(victim, d.offset);
            tracing::warn!(
                "garbage collection: {} unreadable bytes at {device} offset {offset:#x} ({}); \
                 the valid records after them are kept",
                d.len,
                d.reason
            );
        }
    }
    let outcome = result
        .and_then(|_| relocate(inner, victim, &mut batch))
        .and_then(|_| log_evictions(inner, &to_log))
        .and_then(|_| inner.writer.sync_all())
        .and_then(|_| {
            // The eviction log must be on the device before the free
            // header (with `sync`, sync_all flushed it already).
            if to_log.is_empty() || inner.opts.sync {
                Ok(())
            } else {
                inner.layout.flush(u64::MAX)
            }
        });
    if let Err(e) = outcome {
        info.set_state(SegState::Sealed);
        return Err(e);
    }
    // Mark it free on the device before reuse (see the module comment).
    let mut buf = inner.layout.buffer(SEGMENT_HEADER_BYTES as usize);
    SegmentHeader {
        kind: SegmentKind::Free,
        uuid: inner.uuid,
        seq: 0,
        part: 0,
        parts: 0,
        payload_bytes: 0,
        payload_crc: 0,
    }
    .encode(&mut buf);
    inner.layout.write(victim, 0, &buf)?;
    // All devices: relocated copies may sit on others, and without `sync`
    // nothing else has flushed them yet.
    inner.layout.flush(u64::MAX)?;
    for (hash, old, h) in evicted {
        evict(inner, victim, hash, old, &h);
    }
    // A writer that repointed a key away from the victim before the scan
    // (which then skipped the record) may still owe it the grains.
    inner.segments.wait_unlinked(victim);
    debug_assert_eq!(
        info.valid_grains.load(Ordering::Relaxed),
        0,
        "segment {victim} still has live grains"
    );
    inner.segments.release(victim);
    inner.counters.gc_segments.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

/// Keys per Evictions record (20 bytes each: about 20 KiB).
const EVICTIONS_PER_RECORD: usize = 1024;

/// Writes Evictions records naming the keys about to be evicted whose
/// older puts may survive in other segments, so that recovery hides those
/// puts. Each record's sequence number is taken *before* its keys are
/// checked (under their stripe locks) to still be indexed where the victim
/// holds them: a put racing with the eviction either finished before the
/// check (the key is skipped) or takes a higher sequence number and wins.
fn log_evictions(inner: &Inner, to_log: &[(Location, EvictedKey)]) -> Result<()> {
    for chunk in to_log.chunks(EVICTIONS_PER_RECORD) {
        let seq = inner.seq.fetch_add(1, Ordering::Relaxed);
        let keys: Vec<EvictedKey> = chunk
            .iter()
            .filter(|(old, k)| {
                let _stripe = inner.lock_stripe(k.hash);
                inner.still_indexed(Index::fingerprint(k.hash), *old)
            })
            .map(|(_, k)| *k)
            .collect();
        if keys.is_empty() {
            continue;
        }
        let value = encode_evictions(&keys);
        let header = crate::format::RecordHeader {
            kind: RecordKind::Evictions,
            member: false,
            key_len: 0,
            value_len: value.len() as u32,
            namespace: crate::namespace::SYSTEM_NS,
            seq,
            segment_seq: 0,
            flushed: Default::default(),
        };
        append_hiding_record(
            inner,
            &RecordParts {
                header,
                key: &[],
                value: &value,
            },
        )?;
        inner
            .counters
            .evictions_logged
            .fetch_add(keys.len() as u64, Ordering::Relaxed);
    }
    Ok(())
}

/// GC's append of a tombstone or Evictions record (records that hide
/// older puts), counted as tombstone grains of its segment and GC bytes.
fn append_hiding_record(inner: &Inner, parts: &RecordParts<'_>) -> Result<()> {
    let app = inner.append_hiding(parts, Appender::Gc)?;
    inner
        .counters
        .gc_bytes
        .fetch_add(app.grains * inner.layout.grain_bytes, Ordering::Relaxed);
    Ok(())
}

/// Drops a live record from the index (cache mode): no relocation.
fn evict(inner: &Inner, victim: u32, hash: u64, old: Location, h: &crate::format::RecordHeader) {
    let _stripe = inner.lock_stripe(hash);
    if inner.index.remove(Index::fingerprint(hash), old) {
        inner.loc_cache.clear_hash(inner.stripe_of(hash), hash);
        inner.segments.sub_valid(victim, inner.grains_of(h));
        if let Some(count) = inner.namespaces.counter(h.namespace) {
            count.fetch_sub(1, Ordering::Relaxed);
        }
        inner.counters.evictions.fetch_add(1, Ordering::Relaxed);
    }
}

/// Re-appends live records under their stripe locks, then repoints the index.
fn relocate(inner: &Inner, victim: u32, batch: &mut Vec<Live>) -> Result<()> {
    if batch.is_empty() {
        return Ok(());
    }
    let _stripes = inner.lock_stripes(batch.iter().map(|l| l.hash));
    let mut moved = Vec::with_capacity(batch.len());
    let mut last = 0;
    for live in batch.iter() {
        let fp = Index::fingerprint(live.hash);
        // A user write may have replaced it since the scan.
        if !inner.still_indexed(fp, live.old) {
            continue;
        }
        let header = inner.header(
            live.header.kind,
            live.header.namespace,
            &live.key,
            live.value.len(),
        );
        let app = inner.writer.append(
            &RecordParts {
                header,
                key: &live.key,
                value: &live.value,
            },
            Appender::Gc,
        )?;
        last = last.max(app.lsn);
        moved.push((live, app, header.seq));
    }
    if last > 0 {
        inner.writer.wait_durable(last)?;
    }
    for (live, app, seq) in moved {
        let fp = Index::fingerprint(live.hash);
        let new = crate::inner::location_at(app.pba, app.grains);
        let new_seg = inner.layout.segment_of(app.pba);
        if inner
            .index
            .insert(fp, new, Expect::Replace(live.old))
            .is_ok()
        {
            inner.segments.add_valid(new_seg, app.grains);
            inner.segments.sub_valid(victim, live.grains);
            // Large heads are never cached (see `Existing::large`).
            if live.header.kind == RecordKind::Put {
                let now = crate::inner::Existing {
                    loc: new,
                    grains: app.grains,
                    seq,
                    large: None,
                };
                let h2 = crate::loc_cache::key_hash2(live.header.namespace, &live.key);
                inner.loc_cache.set(
                    inner.stripe_of(live.hash),
                    live.header.namespace,
                    live.hash,
                    h2,
                    &now,
                );
            }
            inner
                .counters
                .gc_bytes
                .fetch_add(app.grains * inner.layout.grain_bytes, Ordering::Relaxed);
        }
    }
    batch.clear();
    Ok(())
}
