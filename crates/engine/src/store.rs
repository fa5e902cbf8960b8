//! The store: GET/PUT/DELETE and friends over the index, the log writer and
//! the devices.
//!
//! Concurrency: writers of one key are serialised by a striped lock taken
//! on the key hash, held from the lookup of the old record until the index
//! points to the new, durable one. So record sequence numbers of a key
//! increase in the order the index sees them, which is the order recovery
//! replays. Readers take no lock: they read the candidate records and, if
//! none matches, look the key up again to tell "absent" from "moved".

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use nvdepot_index::{Expect, Index, InsertError, Location, GRAINS_MAX};
use nvdepot_io::Device;
use parking_lot::{Mutex, RwLock};

use crate::aio::{drive, now, Mode};
use crate::error::{Error, Result};
use crate::format::{RecordHeader, RecordKind, RECORD_HEADER_BYTES};
use crate::layout::Layout;
use crate::loc_cache::{key_hash2, LocationCache};
use crate::namespace::{self, Namespace, Namespaces, DEFAULT_NAME, SYSTEM_NS};
use crate::options::Options;
use crate::read::{buffered_record, read_record_in, Fetched, Record, Span};
use crate::segments::Segments;
use crate::stats::Counters;
use crate::stripes::{StripeGuard, Stripes};
use crate::update::{Change, Current, Updated};
use crate::writer::{Appended, Appender, Placed, RecordParts, Writer};

const STRIPES: usize = 4096;

/// Condition for [`Store::put_with`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PutMode {
    /// Insert or overwrite.
    Upsert,
    /// Only if the key is absent (memcached `add`, Redis `SET NX`).
    IfAbsent,
    /// Only if the key is present (memcached `replace`, Redis `SET XX`).
    IfPresent,
    /// Only if the key is present and its current version (see
    /// [`Store::get_versioned`]) is this one (memcached `cas`).
    IfVersion(u64),
}

/// Outcome of [`Store::delete_versioned`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeleteOutcome {
    Deleted,
    NotFound,
    /// Present, but with another version.
    VersionMismatch,
}

/// One operation of [`Store::write_batch`].
#[derive(Clone, Copy, Debug)]
pub enum WriteOp<'a> {
    Put { key: &'a [u8], value: &'a [u8] },
    Delete { key: &'a [u8] },
}

impl WriteOp<'_> {
    fn key(&self) -> &[u8] {
        match self {
            WriteOp::Put { key, .. } | WriteOp::Delete { key } => key,
        }
    }
}

/// How the last open went.
#[derive(Clone, Debug, Default)]
pub struct OpenReport {
    /// True if the index was restored from a checkpoint (clean shutdown).
    pub clean: bool,
    /// True if the store was created by this open.
    pub created: bool,
    /// Wall-clock seconds the open took.
    pub seconds: f64,
    /// Keys in the store after opening.
    pub keys: u64,
    /// Records read while rebuilding the index (0 on a clean open).
    pub records_scanned: u64,
    /// Of `seconds`, the time spent reading the log (0 on a clean open).
    pub scan_seconds: f64,
    /// Invalid stretches the log scan found (torn tails and, when the open
    /// went ahead anyway, damage to acknowledged records, then dropped).
    pub damage: Vec<crate::Damage>,
}

/// The 64-bit hash of a key in a namespace (physical id).
pub(crate) fn key_hash(physical: u32, key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64_with_seed(key, physical as u64)
}

/// A key's hashes in its physical namespace: what the index, the stripe
/// locks and the location cache are keyed by.
pub(crate) struct KeyAt {
    pub physical: u32,
    pub h: u64,
    pub h2: u64,
    pub fp: u64,
}

impl KeyAt {
    pub fn new(physical: u32, key: &[u8]) -> KeyAt {
        let h = key_hash(physical, key);
        KeyAt {
            physical,
            h,
            h2: key_hash2(physical, key),
            fp: Index::fingerprint(h),
        }
    }
}

/// Everything the store's threads share.
pub(crate) struct Inner {
    pub layout: Arc<Layout>,
    pub segments: Arc<Segments>,
    pub index: Index,
    pub writer: Arc<Writer>,
    pub seq: Arc<AtomicU64>,
    pub namespaces: Namespaces,
    pub(crate) stripes: Stripes,
    pub opts: Options,
    pub uuid: u128,
    /// Held shared by iterators and namespace purges, exclusively by GC
    /// while it moves records.
    pub gc_pause: RwLock<()>,
    /// Serialises namespace create/drop/clear.
    ns_admin: Mutex<()>,
    /// Retired physical namespaces whose index entries the GC thread is to
    /// remove.
    pub pending_purge: Mutex<Vec<u32>>,
    /// Where recently written keys are (saves a read per overwrite).
    pub loc_cache: LocationCache,
    /// One garbage collector at a time (the GC thread and
    /// `Store::collect_garbage` must not pick the same victim).
    pub collector: Mutex<()>,
    pub counters: Counters,
}

/// An existing record of a key, found under its stripe lock.
#[derive(Clone, Copy)]
pub(crate) struct Existing {
    pub loc: Location,
    /// True size in grains (the index field saturates at `GRAINS_MAX`).
    pub grains: u64,
    /// The record's sequence number: the key's current version.
    pub seq: u64,
}

/// A put whose record is linked: its version, and the log position it
/// must still wait for (unlocked) before it may be acknowledged.
pub(crate) struct Committed {
    pub version: u64,
    pub wait: Option<u64>,
}

impl Inner {
    pub fn new(
        layout: Arc<Layout>,
        segments: Arc<Segments>,
        index: Index,
        seq: Arc<AtomicU64>,
        namespaces: Namespaces,
        opts: Options,
        uuid: u128,
    ) -> Inner {
        let loc_cache = LocationCache::new(opts.location_cache_entries, STRIPES);
        let writer = Arc::new(Writer::new(
            layout.clone(),
            segments.clone(),
            uuid,
            opts.sync,
            seq.clone(),
        ));
        Inner {
            layout,
            segments,
            index,
            writer,
            seq,
            namespaces,
            stripes: Stripes::new(STRIPES),
            opts,
            uuid,
            gc_pause: RwLock::new(()),
            ns_admin: Mutex::new(()),
            pending_purge: Mutex::new(Vec::new()),
            loc_cache,
            collector: Mutex::new(()),
            counters: Counters::default(),
        }
    }

    /// Keys in user namespaces (the index also holds the registry's).
    pub fn user_keys(&self) -> u64 {
        let system = self
            .namespaces
            .counter(SYSTEM_NS)
            .map_or(0, |c| c.load(Ordering::Relaxed).max(0) as u64);
        (self.index.len() as u64).saturating_sub(system)
    }

    pub fn stripe_of(&self, hash: u64) -> usize {
        (hash >> 35) as usize % STRIPES
    }

    pub fn lock_stripe(&self, hash: u64) -> StripeGuard<'_> {
        self.stripes.lock(self.stripe_of(hash))
    }

    /// Locks the stripes of several hashes in order (no deadlock).
    pub fn lock_stripes(&self, hashes: impl Iterator<Item = u64>) -> Vec<StripeGuard<'_>> {
        let mut ids: Vec<usize> = hashes.map(|h| self.stripe_of(h)).collect();
        ids.sort_unstable();
        ids.dedup();
        ids.into_iter().map(|i| self.stripes.lock(i)).collect()
    }

    pub fn grains_of(&self, header: &RecordHeader) -> u64 {
        (header.body_bytes() as u64).div_ceil(self.layout.grain_bytes)
    }

    pub(crate) fn check_sizes(&self, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        if key.is_empty() {
            return Err(Error::KeyEmpty);
        }
        if key.len() > self.opts.key_bytes_max {
            return Err(Error::KeyTooLarge {
                len: key.len(),
                max: self.opts.key_bytes_max,
            });
        }
        if let Some(v) = value {
            let max = self.value_bytes_max();
            if v.len() > max {
                return Err(Error::ValueTooLarge { len: v.len(), max });
            }
        }
        Ok(())
    }

    pub fn value_bytes_max(&self) -> usize {
        let seg_cap = (self.layout.segment_bytes / 4) as usize
            - RECORD_HEADER_BYTES
            - self.opts.key_bytes_max;
        self.opts.value_bytes_max.min(seg_cap)
    }

    pub(crate) fn resolve(
        &self,
        ns: Namespace,
    ) -> Result<(u32, Arc<std::sync::atomic::AtomicI64>)> {
        self.namespaces
            .resolve(ns)
            .ok_or_else(|| Error::NoSuchNamespace(format!("id {}", ns.0)))
    }

    /// Finds the record of `key` among the index candidates, reading
    /// `span` of each (headers and keys only for `Span::Head`). Caller
    /// holds the key's stripe lock.
    pub async fn find_indexed(
        &self,
        mode: Mode,
        physical: u32,
        key: &[u8],
        fp: u64,
        span: Span,
        cands: &mut Vec<Location>,
    ) -> Result<Option<(Existing, Record)>> {
        cands.clear();
        self.index.lookup(fp, cands);
        for &loc in cands.iter() {
            match self.read_at(mode, loc, span).await? {
                Fetched::Record(r) => {
                    if self.holds(&r, physical, key) {
                        let e = Existing {
                            loc,
                            grains: self.grains_of(&r.header),
                            seq: r.header.seq,
                        };
                        return Ok(Some((e, r)));
                    }
                }
                Fetched::Invalid(e) => {
                    // Another key's record may have been moved by GC since
                    // the lookup; only a record still indexed is corrupt.
                    if self.still_indexed(fp, loc) {
                        return Err(e);
                    }
                }
            }
        }
        Ok(None)
    }

    /// Whether `r` is a put of `key` in namespace `physical`.
    pub(crate) fn holds(&self, r: &Record, physical: u32, key: &[u8]) -> bool {
        r.header.kind == RecordKind::Put && r.header.namespace == physical && r.key() == key
    }

    /// The key's existing record: from the location cache if the index
    /// confirms it, else by reading candidates (`find_indexed`). Caller holds
    /// the key's stripe lock.
    pub async fn existing(
        &self,
        mode: Mode,
        physical: u32,
        key: &[u8],
        hash: u64,
        hash2: u64,
        cands: &mut Vec<Location>,
    ) -> Result<Option<Existing>> {
        let fp = Index::fingerprint(hash);
        if let Some(e) = self.loc_cache.get(self.stripe_of(hash), hash, hash2) {
            if self.still_indexed(fp, e.loc) {
                cands.clear();
                return Ok(Some(e));
            }
        }
        let head = Span::Head { key_len: key.len() };
        Ok(self
            .find_indexed(mode, physical, key, fp, head, cands)
            .await?
            .map(|(e, _)| e))
    }

    pub fn still_indexed(&self, fp: u64, loc: Location) -> bool {
        let mut v = Vec::new();
        self.index.lookup(fp, &mut v);
        v.contains(&loc)
    }

    /// The record of `key` (read with `span`) and where it is, or `None`.
    /// Readers take no lock: if no candidate holds the key, the lookup is
    /// repeated, and only an unchanged candidate set means "absent" (a
    /// record may have moved under us, or a candidate may be corrupt).
    async fn find_record(
        &self,
        mode: Mode,
        physical: u32,
        key: &[u8],
        span: Span,
    ) -> Result<Option<(crate::read::Record, Location)>> {
        let fp = Index::fingerprint(key_hash(physical, key));
        let mut cands = Vec::new();
        let mut again = Vec::new();
        for _ in 0..64 {
            cands.clear();
            self.index.lookup(fp, &mut cands);
            let mut corrupt = None;
            for &loc in &cands {
                match self.read_at(mode, loc, span).await? {
                    Fetched::Record(r) => {
                        if self.holds(&r, physical, key) {
                            return Ok(Some((r, loc)));
                        }
                    }
                    Fetched::Invalid(e) => corrupt = Some(e),
                }
            }
            again.clear();
            self.index.lookup(fp, &mut again);
            if again == cands {
                return match corrupt {
                    Some(e) => Err(e),
                    None => Ok(None),
                };
            }
        }
        Err(Error::Unusable("key kept moving during 64 lookups".into()))
    }

    /// The value and version (record sequence number) of a key.
    pub async fn get(
        &self,
        mode: Mode,
        physical: u32,
        key: &[u8],
    ) -> Result<Option<(Vec<u8>, u64)>> {
        Ok(self
            .find_record(mode, physical, key, Span::Whole)
            .await?
            .map(|(r, loc)| {
                self.touch(loc);
                (r.value().to_vec(), r.header.seq)
            }))
    }

    /// Notes a hit on the segment holding `loc` (segment LRU).
    fn touch(&self, loc: Location) {
        if !self.opts.cache_mode {
            return;
        }
        let seg = self.segments.get(self.layout.segment_of(loc.pba));
        let now = self.seq.load(Ordering::Relaxed);
        // Skip the store while the mark is nearly current: a hot segment's
        // line then stays shared between the cores reading it.
        if seg.last_hit.load(Ordering::Relaxed) + 64 < now {
            seg.last_hit.store(now, Ordering::Relaxed);
        }
    }

    /// Writes one record durably and points the index at it. Returns the
    /// new version, or `None` if the condition failed (nothing written).
    // The stripe guard is held across awaits on purpose (until the index
    // points to the durable record); async callers wait for it without
    // blocking the thread (`Stripes::lock_in`).
    pub async fn put(
        &self,
        mode: Mode,
        ns: Namespace,
        key: &[u8],
        value: &[u8],
        cond: PutMode,
    ) -> Result<Option<u64>> {
        self.check_sizes(key, Some(value))?;
        let (physical, count) = self.resolve(ns)?;
        let at = KeyAt::new(physical, key);
        loop {
            let stripe = self.stripes.lock_in(mode, self.stripe_of(at.h)).await;
            let mut cands = Vec::new();
            let existing = self
                .existing(mode, physical, key, at.h, at.h2, &mut cands)
                .await?;
            let allowed = match cond {
                PutMode::Upsert => true,
                PutMode::IfAbsent => existing.is_none(),
                PutMode::IfPresent => existing.is_some(),
                PutMode::IfVersion(v) => existing.is_some_and(|e| e.seq == v),
            };
            if !allowed {
                return Ok(None);
            }
            match self
                .commit_put(mode, &at, key, value, existing, &cands, &count)
                .await?
            {
                Some(committed) => {
                    drop(stripe);
                    return self.finish(mode, committed).await.map(Some);
                }
                None => {
                    // GC may need this stripe to make room: wait without it.
                    drop(stripe);
                    self.writer.wait_for_space_in(mode, Appender::Put).await?;
                }
            }
        }
    }

    /// The write step every put shares (put, `write_batch`, update): the
    /// caller holds the key's stripe and has found `existing`. Appends the
    /// record, waits until it is durable, then points the index and the
    /// location cache at it. `Ok(None)`: no segment is free; the caller
    /// must drop its stripe, wait for space and start over.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn commit_put(
        &self,
        mode: Mode,
        at: &KeyAt,
        key: &[u8],
        value: &[u8],
        existing: Option<Existing>,
        cands: &[Location],
        count: &std::sync::atomic::AtomicI64,
    ) -> Result<Option<Committed>> {
        let header = self.header(RecordKind::Put, at.physical, key, value.len());
        let version = header.seq;
        let parts = RecordParts { header, key, value };
        let early = self.opts.write_behind || self.opts.unlock_before_durable;
        if early && !self.writer.unwritten_over_budget() {
            // The index points to the record now; reads find its buffered
            // copy until it is written.
            let Some((placed, first)) = self.writer.try_append_buffered(&parts, Appender::Put)?
            else {
                return Ok(None);
            };
            self.linked_put(at, placed, version, existing, cands, count)?;
            if self.opts.write_behind {
                // Acknowledged from the write buffer.
                self.writer.write_behind(mode, first);
                return Ok(Some(Committed {
                    version,
                    wait: None,
                }));
            }
            // Acknowledged once durable, waited for without the lock.
            return Ok(Some(Committed {
                version,
                wait: Some(placed.lsn),
            }));
        }
        let Some(app) = self.writer.try_append(&parts, Appender::Put)? else {
            return Ok(None);
        };
        self.writer.wait_durable_in(mode, app.lsn).await?;
        let placed = Placed {
            pba: app.pba,
            grains: app.grains,
            lsn: app.lsn,
        };
        self.linked_put(at, placed, version, existing, cands, count)?;
        Ok(Some(Committed {
            version,
            wait: None,
        }))
    }

    /// After a committed put has released its key's lock: waits for the
    /// durability it still owes (see [`Options::unlock_before_durable`]).
    pub(crate) async fn finish(&self, mode: Mode, c: Committed) -> Result<u64> {
        if let Some(lsn) = c.wait {
            self.writer.wait_durable_in(mode, lsn).await?;
        }
        Ok(c.version)
    }

    /// Reads the record at `loc`: from the write buffer if it is a
    /// write-behind record not yet written, else from the device.
    pub(crate) async fn read_at(&self, mode: Mode, loc: Location, span: Span) -> Result<Fetched> {
        if let Some(bytes) = self.writer.unwritten_record(loc.pba) {
            return Ok(buffered_record(&self.layout, loc, span, &bytes));
        }
        read_record_in(mode, &self.layout, loc, span).await
    }

    /// After a put's record is durable: the index, the location cache and
    /// the counters.
    fn linked_put(
        &self,
        at: &KeyAt,
        app: Placed,
        version: u64,
        existing: Option<Existing>,
        cands: &[Location],
        count: &std::sync::atomic::AtomicI64,
    ) -> Result<()> {
        let new = Location {
            pba: app.pba,
            grains: app.grains.min(GRAINS_MAX as u64) as u16,
        };
        self.link(at.fp, new, app.grains, existing, cands)?;
        let now = Existing {
            loc: new,
            grains: app.grains,
            seq: version,
        };
        self.loc_cache.set(self.stripe_of(at.h), at.h, at.h2, &now);
        if existing.is_none() {
            count.fetch_add(1, Ordering::Relaxed);
        }
        self.counters.puts.fetch_add(1, Ordering::Relaxed);
        self.counters
            .user_bytes
            .fetch_add(app.grains * self.layout.grain_bytes, Ordering::Relaxed);
        Ok(())
    }

    /// Appends a record that hides older puts (a tombstone, an Evictions
    /// record) outside any user write, waiting for space as `who` may,
    /// and counts it as tombstone grains of its segment.
    pub(crate) fn append_hiding(&self, parts: &RecordParts<'_>, who: Appender) -> Result<Appended> {
        let app = self.writer.append(parts, who)?;
        let seg = self.layout.segment_of(app.pba);
        self.segments
            .get(seg)
            .tombstone_grains
            .fetch_add(app.grains, Ordering::Relaxed);
        Ok(app)
    }

    pub fn header(
        &self,
        kind: RecordKind,
        physical: u32,
        key: &[u8],
        value_len: usize,
    ) -> RecordHeader {
        RecordHeader {
            kind,
            key_len: key.len() as u16,
            value_len: value_len as u32,
            namespace: physical,
            seq: self.seq.fetch_add(1, Ordering::Relaxed),
            segment_seq: 0,
            flushed: Default::default(),
        }
    }

    /// Points the index at a new durable record, replacing `existing`.
    fn link(
        &self,
        fp: u64,
        new: Location,
        grains: u64,
        existing: Option<Existing>,
        cands: &[Location],
    ) -> Result<()> {
        let expect = match existing {
            Some(e) => Expect::Replace(e.loc),
            None => Expect::Absent { seen: cands },
        };
        match self.index.insert(fp, new, expect) {
            Ok(_) => {}
            Err(InsertError::Full) => {
                return Err(Error::Unusable(format!(
                    "index full at {} keys",
                    self.index.len()
                )));
            }
            Err(InsertError::Conflict) => {
                // Under the stripe lock only a namespace purge can change
                // this key's entries; it removed the old one.
                let mut now = Vec::new();
                self.index.lookup(fp, &mut now);
                self.index
                    .insert(fp, new, Expect::Absent { seen: &now })
                    .map_err(|e| Error::Unusable(format!("index insert failed: {e:?}")))?;
            }
        }
        self.segments
            .add_valid(self.layout.segment_of(new.pba), grains);
        if let Some(e) = existing {
            self.segments
                .sub_valid(self.layout.segment_of(e.loc.pba), e.grains);
        }
        Ok(())
    }

    // The stripe guard is held across awaits on purpose (until the index
    // points to the durable record); async callers wait for it without
    // blocking the thread (`Stripes::lock_in`).
    pub async fn delete(
        &self,
        mode: Mode,
        ns: Namespace,
        key: &[u8],
        version: Option<u64>,
    ) -> Result<DeleteOutcome> {
        self.check_sizes(key, None)?;
        let (physical, count) = self.resolve(ns)?;
        let at = KeyAt::new(physical, key);
        loop {
            let stripe = self.stripes.lock_in(mode, self.stripe_of(at.h)).await;
            let mut cands = Vec::new();
            let Some(existing) = self
                .existing(mode, physical, key, at.h, at.h2, &mut cands)
                .await?
            else {
                return Ok(DeleteOutcome::NotFound);
            };
            if version.is_some_and(|v| v != existing.seq) {
                return Ok(DeleteOutcome::VersionMismatch);
            }
            if self.commit_delete(mode, &at, key, existing, &count).await? {
                return Ok(DeleteOutcome::Deleted);
            }
            drop(stripe);
            self.writer
                .wait_for_space_in(mode, Appender::Delete)
                .await?;
        }
    }

    /// The delete step every delete shares: as [`Inner::commit_put`], for a
    /// tombstone of the `existing` record. `Ok(false)`: no segment is free.
    pub(crate) async fn commit_delete(
        &self,
        mode: Mode,
        at: &KeyAt,
        key: &[u8],
        existing: Existing,
        count: &std::sync::atomic::AtomicI64,
    ) -> Result<bool> {
        let header = self.header(RecordKind::Tombstone, at.physical, key, 0);
        let parts = RecordParts {
            header,
            key,
            value: &[],
        };
        let Some(app) = self.writer.try_append(&parts, Appender::Delete)? else {
            return Ok(false);
        };
        self.writer.wait_durable_in(mode, app.lsn).await?;
        self.unlinked(at, existing, &app, count);
        Ok(true)
    }

    /// After a tombstone is durable: the index, the location cache and the
    /// counters.
    fn unlinked(
        &self,
        at: &KeyAt,
        existing: Existing,
        app: &Appended,
        count: &std::sync::atomic::AtomicI64,
    ) {
        self.unlink(at.fp, existing, app.pba, app.grains);
        self.loc_cache.clear(self.stripe_of(at.h), at.h, at.h2);
        count.fetch_sub(1, Ordering::Relaxed);
        self.counters.deletes.fetch_add(1, Ordering::Relaxed);
    }

    fn unlink(&self, fp: u64, existing: Existing, tomb_pba: u64, tomb_grains: u64) {
        if self.index.remove(fp, existing.loc) {
            self.segments
                .sub_valid(self.layout.segment_of(existing.loc.pba), existing.grains);
        }
        let tseg = self.layout.segment_of(tomb_pba);
        self.segments
            .get(tseg)
            .tombstone_grains
            .fetch_add(tomb_grains, Ordering::Relaxed);
    }

    pub fn write_batch(&self, ns: Namespace, ops: &[WriteOp<'_>]) -> Result<()> {
        for op in ops {
            match op {
                WriteOp::Put { key, value } => self.check_sizes(key, Some(value))?,
                WriteOp::Delete { key } => self.check_sizes(key, None)?,
            }
        }
        let (physical, count) = self.resolve(ns)?;
        // Last operation on a key wins.
        let mut last: HashMap<&[u8], usize> = HashMap::new();
        for (i, op) in ops.iter().enumerate() {
            last.insert(op.key(), i);
        }
        let mut order: Vec<usize> = last.into_values().collect();
        order.sort_unstable();
        let hashes: Vec<u64> = order
            .iter()
            .map(|&i| key_hash(physical, ops[i].key()))
            .collect();
        // Best effort: make room first, since the stripes must not be held
        // while waiting for GC. If space still runs out mid-batch, the rest
        // of the batch dips into the GC reserve.
        self.writer.wait_for_space(Appender::Put)?;
        let _stripes = self.lock_stripes(hashes.iter().copied());
        let append = |parts: &RecordParts<'_>, who: Appender| -> Result<Appended> {
            match self.writer.try_append(parts, who)? {
                Some(app) => Ok(app),
                None => self
                    .writer
                    .try_append(parts, Appender::Gc)?
                    .ok_or_else(|| self.writer.full_error()),
            }
        };
        struct Planned {
            at: KeyAt,
            seq: u64,
            existing: Option<Existing>,
            cands: Vec<Location>,
            app: Option<Appended>,
        }
        let mut plan = Vec::with_capacity(order.len());
        for &i in &order {
            let at = KeyAt::new(physical, ops[i].key());
            let mut cands = Vec::new();
            let existing = now(self.existing(
                Mode::Blocking,
                physical,
                ops[i].key(),
                at.h,
                at.h2,
                &mut cands,
            ))?;
            let mut seq = 0;
            let app = match ops[i] {
                WriteOp::Put { key, value } => {
                    let header = self.header(RecordKind::Put, physical, key, value.len());
                    seq = header.seq;
                    Some(append(&RecordParts { header, key, value }, Appender::Put)?)
                }
                WriteOp::Delete { key } if existing.is_some() => {
                    let header = self.header(RecordKind::Tombstone, physical, key, 0);
                    Some(append(
                        &RecordParts {
                            header,
                            key,
                            value: &[],
                        },
                        Appender::Delete,
                    )?)
                }
                WriteOp::Delete { .. } => None,
            };
            plan.push(Planned {
                at,
                seq,
                existing,
                cands,
                app,
            });
        }
        if let Some(lsn) = plan
            .iter()
            .filter_map(|p| p.app.as_ref().map(|a| a.lsn))
            .max()
        {
            self.writer.wait_durable(lsn)?;
        }
        for (p, &i) in plan.iter().zip(&order) {
            let Some(app) = &p.app else { continue };
            match ops[i] {
                WriteOp::Put { .. } => {
                    let placed = Placed {
                        pba: app.pba,
                        grains: app.grains,
                        lsn: app.lsn,
                    };
                    self.linked_put(&p.at, placed, p.seq, p.existing, &p.cands, &count)?
                }
                WriteOp::Delete { .. } => {
                    let existing = p.existing.expect("delete planned only for present keys");
                    self.unlinked(&p.at, existing, app, &count);
                }
            }
        }
        Ok(())
    }

    pub fn get_range(
        &self,
        physical: u32,
        key: &[u8],
        offset: u64,
        len: usize,
    ) -> Result<Option<Vec<u8>>> {
        let upto = offset.saturating_add(len as u64);
        let span = Span::Prefix {
            key_len: key.len(),
            upto,
        };
        Ok(
            drive(|m| self.find_record(m, physical, key, span))?.map(|(r, _)| {
                let vlen = r.header.value_len as u64;
                let (start, end) = (offset.min(vlen) as usize, upto.min(vlen) as usize);
                r.value()[start..end].to_vec()
            }),
        )
    }

    // ---- namespaces ----

    pub fn create_namespace(&self, name: &str) -> Result<Namespace> {
        validate_ns_name(name)?;
        let _admin = self.ns_admin.lock();
        if self.namespaces.lookup(name).is_some() {
            return Err(Error::NamespaceExists(name.to_string()));
        }
        let id = self.namespaces.allocate_id();
        let value = namespace::encode_registry_value(id, id);
        now(self.put(
            Mode::Blocking,
            Namespace(SYSTEM_NS),
            name.as_bytes(),
            &value,
            PutMode::Upsert,
        ))?;
        self.namespaces.insert(name, id, id, 0);
        Ok(Namespace(id))
    }

    pub fn drop_namespace(&self, name: &str) -> Result<()> {
        let _admin = self.ns_admin.lock();
        let logical = self
            .namespaces
            .lookup(name)
            .ok_or_else(|| Error::NoSuchNamespace(name.to_string()))?;
        now(self.delete(Mode::Blocking, Namespace(SYSTEM_NS), name.as_bytes(), None))?;
        if let Some(physical) = self.namespaces.remove(logical) {
            self.purge(physical)?;
        }
        Ok(())
    }

    pub fn clear(&self, ns: Namespace) -> Result<()> {
        let _admin = self.ns_admin.lock();
        let name = self
            .namespaces
            .name_of(ns)
            .ok_or_else(|| Error::NoSuchNamespace(format!("id {}", ns.0)))?;
        let new_physical = self.namespaces.allocate_id();
        let value = namespace::encode_registry_value(ns.0, new_physical);
        now(self.put(
            Mode::Blocking,
            Namespace(SYSTEM_NS),
            name.as_bytes(),
            &value,
            PutMode::Upsert,
        ))?;
        let old = self.namespaces.remove(ns.0);
        self.namespaces.insert(&name, ns.0, new_physical, 0);
        if let Some(old) = old {
            self.purge(old)?;
        }
        Ok(())
    }

    /// Removes from the index every record of a retired physical
    /// namespace: now, or (with background GC) soon, on the GC thread, so
    /// that `clear` and `drop_namespace` are O(1) for the caller.
    fn purge(&self, physical: u32) -> Result<()> {
        if self.opts.background_gc {
            self.pending_purge.lock().push(physical);
            return Ok(());
        }
        self.purge_now(&[physical])
    }

    /// Scans the log once and unlinks the records of retired namespaces.
    pub fn purge_now(&self, retired: &[u32]) -> Result<()> {
        let _pause = self.gc_pause.read();
        for s in 0..self.segments.len() as u32 {
            if !self.segments.get(s).state().holds_records() {
                continue;
            }
            let seg_seq = self.segments.get(s).seq.load(Ordering::Relaxed);
            crate::iter::scan_segment(&self.layout, s, seg_seq, |rec| {
                let physical = rec.header.namespace;
                if rec.header.kind == RecordKind::Put && retired.contains(&physical) {
                    let fp = Index::fingerprint(key_hash(physical, rec.key()));
                    let loc = self.location(rec.pba, &rec.header);
                    if self.index.remove(fp, loc) {
                        self.segments.sub_valid(s, self.grains_of(&rec.header));
                    }
                }
                Ok(())
            })?;
        }
        Ok(())
    }

    pub fn location(&self, pba: u64, header: &RecordHeader) -> Location {
        Location {
            pba,
            grains: self.grains_of(header).min(GRAINS_MAX as u64) as u16,
        }
    }
}

fn validate_ns_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > 255 || name.bytes().any(|b| b < 0x20) {
        return Err(Error::Config(format!(
            "namespace name {name:?} must be 1-255 bytes without control characters"
        )));
    }
    Ok(())
}

/// An open store. Share it between threads with `Arc`; every method takes
/// `&self` except [`Store::close`].
pub struct Store {
    pub(crate) inner: Arc<Inner>,
    gc: Option<crate::gc::GcThread>,
    /// Write-behind stores only.
    log_writer: Option<crate::log_writer::LogWriterThread>,
    report: OpenReport,
}

impl Store {
    /// Opens the store at `path`: a directory holding `nvdepot.N` data
    /// files (created, with one file of `opts.create_bytes`, when there are
    /// none), a single data file, or a block device.
    pub fn open(path: &Path, opts: &Options) -> Result<Store> {
        let (devices, fresh) = crate::recovery::open_paths(path, opts)?;
        Self::open_devices_inner(devices, opts, fresh)
    }

    /// Opens (or, if every device is blank and `opts.create_bytes` is set,
    /// creates) a store on the given devices.
    pub fn open_devices(devices: Vec<Arc<dyn Device>>, opts: &Options) -> Result<Store> {
        let fresh = opts.create_bytes.is_some();
        Self::open_devices_inner(devices, opts, fresh)
    }

    fn open_devices_inner(
        devices: Vec<Arc<dyn Device>>,
        opts: &Options,
        may_create: bool,
    ) -> Result<Store> {
        let (inner, report) = crate::recovery::open(devices, opts, may_create)?;
        let inner = Arc::new(inner);
        let gc = opts
            .background_gc
            .then(|| crate::gc::GcThread::start(inner.clone()));
        // Write-behind needs it; with unlock-before-durable it writes out a
        // linked record whose writer went away before its flush.
        let log_writer = (opts.write_behind || opts.unlock_before_durable)
            .then(|| crate::log_writer::LogWriterThread::start(inner.clone()));
        Ok(Store {
            inner,
            gc,
            log_writer,
            report,
        })
    }

    /// Longest value `put` accepts (`Options::value_bytes_max`, capped at a
    /// quarter of a segment less the longest key).
    pub fn value_bytes_max(&self) -> usize {
        self.inner.value_bytes_max()
    }

    /// How the open went (clean or recovered, how long).
    pub fn open_report(&self) -> &OpenReport {
        &self.report
    }

    /// The namespace every store has, named "default".
    pub fn default_namespace(&self) -> Namespace {
        self.namespace(DEFAULT_NAME)
            .expect("the default namespace exists")
    }

    /// The value of `key`, or `None`. One device read if no other key shares
    /// its fingerprint.
    pub fn get(&self, ns: Namespace, key: &[u8]) -> Result<Option<Vec<u8>>> {
        drive(|m| self.get_in(m, ns, key)).map(|r| r.map(|(v, _)| v))
    }

    /// The value and version of `key`. The version is the record's sequence
    /// number: it changes on every write, never repeats, and survives
    /// restarts (a memcached CAS unique).
    pub fn get_versioned(&self, ns: Namespace, key: &[u8]) -> Result<Option<(Vec<u8>, u64)>> {
        drive(|m| self.get_in(m, ns, key))
    }

    /// The value and version of `key`, waiting as `mode` says.
    async fn get_in(
        &self,
        mode: Mode,
        ns: Namespace,
        key: &[u8],
    ) -> Result<Option<(Vec<u8>, u64)>> {
        self.inner.check_sizes(key, None)?;
        let (physical, _) = self.inner.resolve(ns)?;
        self.inner.counters.gets.fetch_add(1, Ordering::Relaxed);
        self.inner.get(mode, physical, key).await
    }

    /// Bytes `[offset, offset + len)` of the value (clipped to its end), or
    /// `None` if the key is absent. Reads only the record's prefix up to the
    /// end of the range; the header and key are checksummed, the value bytes
    /// of a partial read are not (a full `get` verifies them).
    pub fn get_range(
        &self,
        ns: Namespace,
        key: &[u8],
        offset: u64,
        len: usize,
    ) -> Result<Option<Vec<u8>>> {
        self.inner.check_sizes(key, None)?;
        let (physical, _) = self.inner.resolve(ns)?;
        self.inner.counters.gets.fetch_add(1, Ordering::Relaxed);
        self.inner.get_range(physical, key, offset, len)
    }

    /// Values of several keys.
    pub fn get_many(&self, ns: Namespace, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        keys.iter().map(|k| self.get(ns, k)).collect()
    }

    /// Inserts or overwrites. Returns once the record is durable.
    pub fn put(&self, ns: Namespace, key: &[u8], value: &[u8]) -> Result<()> {
        drive(|m| self.inner.put(m, ns, key, value, PutMode::Upsert)).map(|_| ())
    }

    /// Conditional put; `Ok(false)` if the condition failed (nothing written).
    pub fn put_with(&self, ns: Namespace, key: &[u8], value: &[u8], mode: PutMode) -> Result<bool> {
        drive(|m| self.inner.put(m, ns, key, value, mode)).map(|v| v.is_some())
    }

    /// Conditional put returning the new version, or `None` if the
    /// condition failed (nothing written).
    pub fn put_versioned(
        &self,
        ns: Namespace,
        key: &[u8],
        value: &[u8],
        mode: PutMode,
    ) -> Result<Option<u64>> {
        drive(|m| self.inner.put(m, ns, key, value, mode))
    }

    /// Deletes `key` (a durable tombstone); `Ok(false)` if it was absent.
    pub fn delete(&self, ns: Namespace, key: &[u8]) -> Result<bool> {
        drive(|m| self.inner.delete(m, ns, key, None)).map(|o| o == DeleteOutcome::Deleted)
    }

    /// Deletes `key` only if its version is `version` (when given).
    pub fn delete_versioned(
        &self,
        ns: Namespace,
        key: &[u8],
        version: Option<u64>,
    ) -> Result<DeleteOutcome> {
        drive(|m| self.inner.delete(m, ns, key, version))
    }

    /// Read-modify-write of one key, atomic per key: `decide` sees the
    /// key's current value and version (`None`: absent) and returns the
    /// [`Change`] to make and a result to hand back. No other write of the
    /// key comes between the read and the change, which is durable when
    /// this returns. One device read (plus one per fingerprint collision)
    /// and at most one write; `decide` runs again only if the log was full
    /// and the key had to be read anew. See `update.rs`.
    pub fn update<R>(
        &self,
        ns: Namespace,
        key: &[u8],
        decide: impl FnMut(Option<Current<'_>>) -> (Change, R),
    ) -> Result<(R, Updated)> {
        drive(|m| self.inner.update(m, ns, key, decide))
    }

    // ---- async twins (see "Async API" in the crate docs) ----

    /// [`Store::get`] for a task on an `nvdepot_io::uring` runtime: the
    /// device read goes through the thread's ring.
    pub async fn get_async(&self, ns: Namespace, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.get_versioned_async(ns, key).await?.map(|(v, _)| v))
    }

    /// [`Store::get_versioned`] through the thread's ring.
    pub async fn get_versioned_async(
        &self,
        ns: Namespace,
        key: &[u8],
    ) -> Result<Option<(Vec<u8>, u64)>> {
        self.get_in(Mode::Ring, ns, key).await
    }

    /// [`Store::put`] through the thread's ring: resolves once the record
    /// is durable (the flush it waits for may be led by another task or
    /// thread; concurrent puts share it).
    pub async fn put_async(&self, ns: Namespace, key: &[u8], value: &[u8]) -> Result<()> {
        self.put_versioned_async(ns, key, value, PutMode::Upsert)
            .await
            .map(|_| ())
    }

    /// [`Store::put_versioned`] through the thread's ring.
    pub async fn put_versioned_async(
        &self,
        ns: Namespace,
        key: &[u8],
        value: &[u8],
        mode: PutMode,
    ) -> Result<Option<u64>> {
        self.inner.put(Mode::Ring, ns, key, value, mode).await
    }

    /// [`Store::delete_versioned`] through the thread's ring.
    pub async fn delete_versioned_async(
        &self,
        ns: Namespace,
        key: &[u8],
        version: Option<u64>,
    ) -> Result<DeleteOutcome> {
        self.inner.delete(Mode::Ring, ns, key, version).await
    }

    /// [`Store::update`] through the thread's ring: the read, the lock
    /// wait and the group commit park the task, not the thread.
    pub async fn update_async<R>(
        &self,
        ns: Namespace,
        key: &[u8],
        decide: impl FnMut(Option<Current<'_>>) -> (Change, R),
    ) -> Result<(R, Updated)> {
        self.inner.update(Mode::Ring, ns, key, decide).await
    }

    /// Applies puts and deletes with one shared flush. Each operation is
    /// individually durable when this returns; after a crash *during* the
    /// call, any subset of them may be present (no atomicity across keys).
    pub fn write_batch(&self, ns: Namespace, ops: &[WriteOp<'_>]) -> Result<()> {
        self.inner.write_batch(ns, ops)
    }

    /// Creates a namespace.
    pub fn create_namespace(&self, name: &str) -> Result<Namespace> {
        self.inner.create_namespace(name)
    }

    /// Looks a namespace up by name.
    pub fn namespace(&self, name: &str) -> Option<Namespace> {
        self.inner.namespaces.lookup(name).map(Namespace)
    }

    /// Drops a namespace and all its keys. The drop is durable when this
    /// returns; it then scans the log to free the index entries (O(store)).
    pub fn drop_namespace(&self, name: &str) -> Result<()> {
        self.inner.drop_namespace(name)
    }

    /// Deletes every key of a namespace (durable, then O(store) cleanup).
    pub fn clear(&self, ns: Namespace) -> Result<()> {
        self.inner.clear(ns)
    }

    /// (name, handle, key count) of every namespace, sorted by name.
    pub fn namespaces(&self) -> Vec<(String, Namespace, u64)> {
        self.inner
            .namespaces
            .list()
            .into_iter()
            .map(|(name, logical, _, count)| (name, Namespace(logical), count.max(0) as u64))
            .collect()
    }

    /// Keys in a namespace.
    pub fn count(&self, ns: Namespace) -> u64 {
        self.inner
            .resolve(ns)
            .map(|(_, c)| c.load(Ordering::Relaxed).max(0) as u64)
            .unwrap_or(0)
    }

    /// Unordered iteration over a namespace's keys and values (see
    /// [`crate::NamespaceIter`] for the consistency it gives).
    pub fn iter(&self, ns: Namespace) -> crate::NamespaceIter<'_> {
        crate::NamespaceIter::new(&self.inner, self.inner.resolve(ns).ok().map(|(p, _)| p))
    }

    /// Counters and gauges.
    pub fn stats(&self) -> crate::Stats {
        crate::stats::collect(&self.inner)
    }

    /// Writes out what write-behind puts left in the write buffer, then
    /// flushes the devices' volatile caches. With `sync` off, every write
    /// acknowledged before the call is then on the device (the background
    /// threads do this every 500 µs and `flush_interval_ms`). If the flush
    /// fails, the store accepts no more writes (a failed flush is never
    /// retried as if it had succeeded); reads go on.
    pub fn flush(&self) -> Result<()> {
        self.inner.writer.sync_all()?;
        self.inner.writer.flush_devices()
    }

    /// Runs one garbage-collection pass now (also done in the background).
    /// Returns the number of segments freed.
    pub fn collect_garbage(&self) -> Result<usize> {
        crate::gc::collect(&self.inner, usize::MAX).map(|p| p.freed)
    }

    /// Writes everything out, saves the index checkpoint so the next open
    /// is fast, and closes.
    pub fn close(mut self) -> Result<()> {
        if let Some(gc) = self.gc.take() {
            gc.stop();
        }
        drop(self.log_writer.take());
        self.inner.writer.sync_all()?;
        self.inner.writer.seal();
        crate::checkpoint::write(&self.inner)
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        if let Some(gc) = self.gc.take() {
            gc.stop();
        }
        // Writes out what write-behind puts left buffered.
        drop(self.log_writer.take());
    }
}
