//! The write step: put, delete and `write_batch` append their records,
//! wait until they are durable, then point the index, the location cache
//! and the counters at them (one code path for all three).

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};

use nvdepot_index::{Expect, InsertError, Location};

use crate::aio::{now, Mode};
use crate::error::{Error, Result};
use crate::format::RecordKind;
use crate::inner::{key_hash, Committed, Existing, Inner, KeyAt};
use crate::namespace::Namespace;
use crate::store::{DeleteOutcome, PutMode, WriteOp};
use crate::writer::{Appended, Appender, Placed, RecordParts};

/// A record to write: its kind (a put, or a large value's head), key and
/// value.
#[derive(Clone, Copy)]
pub(crate) struct NewRecord<'a> {
    pub kind: RecordKind,
    pub key: &'a [u8],
    pub value: &'a [u8],
}

impl<'a> NewRecord<'a> {
    /// A put of `key` with `value`.
    pub fn put(key: &'a [u8], value: &'a [u8]) -> NewRecord<'a> {
        NewRecord {
            kind: RecordKind::Put,
            key,
            value,
        }
    }
}

impl Inner {
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
        if value.len() > self.record_value_bytes_max() {
            // Boxed: the large path's state would otherwise sit in every
            // put's future (and so in every connection task of a server).
            return Box::pin(self.put_large(mode, physical, &count, key, value, cond)).await;
        }
        self.put_record(mode, physical, &count, key, value, RecordKind::Put, cond)
            .await
    }

    /// Puts one record of `kind` (a put, or a large value's head) under
    /// `cond`; once it is durable, drops the chunks of a large value it
    /// replaced. `count`: the key counter of `physical`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn put_record(
        &self,
        mode: Mode,
        physical: u32,
        count: &AtomicI64,
        key: &[u8],
        value: &[u8],
        kind: RecordKind,
        cond: PutMode,
    ) -> Result<Option<u64>> {
        let at = KeyAt::new(physical, key);
        let early = self.opts.write_behind || self.opts.unlock_before_durable;
        loop {
            let stripe = self.stripes.lock_in(mode, self.stripe_of(at.h)).await;
            let mut cands = Vec::new();
            if cond == PutMode::Upsert && !early {
                // An unconditional put writes whatever the key held: its
                // record goes to the log first, and the read that finds
                // the old record (to replace its index entry) runs while
                // the record is written, not before (measured: most
                // overwrites read, bench/results/engine-put-profile.md).
                let header = self.header(kind, at.physical, key, value.len());
                let version = header.seq;
                let parts = RecordParts { header, key, value };
                if let Some(app) = self.writer.try_append(&parts, Appender::Put)? {
                    // Only when no batch is being written does this put
                    // start one alongside its read: otherwise the next
                    // batch takes the record anyway, and leading at once
                    // would make every batch a single record (measured:
                    // QD 128 fell from 97 k to 59 k puts/s).
                    let (existing, durable) = if self.writer.batches_in_flight() == 0 {
                        // Boxed: both futures live at once, and unboxed
                        // they would grow every task that can put (each
                        // memcache connection: 13.5 → 19.5 KB measured by
                        // tests/bounded.rs).
                        Box::pin(crate::large::join2(
                            self.existing(mode, physical, key, at.h, at.h2, &mut cands),
                            self.writer.wait_durable_in(mode, app.lsn),
                        ))
                        .await
                    } else {
                        let existing = self
                            .existing(mode, physical, key, at.h, at.h2, &mut cands)
                            .await;
                        (existing, self.writer.wait_durable_in(mode, app.lsn).await)
                    };
                    let existing = existing?;
                    durable?;
                    let placed = app.placed();
                    self.linked_put(&at, kind, placed, version, existing, &cands, count)?;
                    drop(app);
                    drop(stripe);
                    self.replaced(mode, physical, key, existing).await;
                    return Ok(Some(version));
                }
                // No segment free: wait without the stripe, as below.
                drop(stripe);
                self.writer.wait_for_space_in(mode, Appender::Put).await?;
                continue;
            }
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
            let record = NewRecord { kind, key, value };
            match self
                .commit_put(mode, &at, record, existing, &cands, count)
                .await?
            {
                Some(committed) => {
                    drop(stripe);
                    let version = self.finish(mode, committed).await?;
                    self.replaced(mode, physical, key, existing).await;
                    return Ok(Some(version));
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
        record: NewRecord<'_>,
        existing: Option<Existing>,
        cands: &[Location],
        count: &AtomicI64,
    ) -> Result<Option<Committed>> {
        let NewRecord { kind, key, value } = record;
        let header = self.header(kind, at.physical, key, value.len());
        let version = header.seq;
        let parts = RecordParts { header, key, value };
        // (A large value's chunks never come here: `write_chunks` makes
        // them durable itself, before its head comes here.)
        let early = self.opts.write_behind || self.opts.unlock_before_durable;
        if early && !self.writer.unwritten_over_budget() {
            // The index points to the record now; reads find its buffered
            // copy until it is written.
            let Some((app, first)) = self.writer.try_append_buffered(&parts, Appender::Put)? else {
                return Ok(None);
            };
            let placed = app.placed();
            self.linked_put(at, kind, placed, version, existing, cands, count)?;
            // Indexed: the segment's hold for this record can go.
            drop(app);
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
        let placed = app.placed();
        self.linked_put(at, kind, placed, version, existing, cands, count)?;
        Ok(Some(Committed {
            version,
            wait: None,
        }))
    }

    /// After a committed put has released its key's lock: waits for the
    /// durability it still owes (see [`Options::unlock_before_durable`]).
    pub(crate) async fn finish(&self, mode: Mode, c: Committed) -> Result<u64> {
        if let Some(lsn) = c.wait {
            if !crate::deferred::owe(lsn) {
                self.writer.wait_durable_in(mode, lsn).await?;
            }
        }
        Ok(c.version)
    }

    /// After a put's record is durable: the index, the location cache and
    /// the counters.
    #[allow(clippy::too_many_arguments)]
    fn linked_put(
        &self,
        at: &KeyAt,
        kind: RecordKind,
        app: Placed,
        version: u64,
        existing: Option<Existing>,
        cands: &[Location],
        count: &AtomicI64,
    ) -> Result<()> {
        let new = crate::inner::location_at(app.pba, app.grains);
        self.link(at.fp, new, app.grains, existing, cands)?;
        let stripe = self.stripe_of(at.h);
        if kind == RecordKind::Put {
            let now = Existing {
                loc: new,
                grains: app.grains,
                seq: version,
                large: None,
            };
            self.loc_cache.set(stripe, at.physical, at.h, at.h2, &now);
        } else {
            // Large heads are never cached: a writer must read one to
            // learn its chunks (`Existing::large`).
            self.loc_cache.clear(stripe, at.physical, at.h, at.h2);
        }
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

    /// Points the index at a new durable record, replacing `existing`.
    pub(crate) fn link(
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
        let _unlinking =
            existing.map(|e| self.segments.unlinking(self.layout.segment_of(e.loc.pba)));
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
        self.delete_record(mode, physical, &count, key, version)
            .await
    }

    /// Deletes `key` of namespace `physical` (if its version is `version`,
    /// when given); once the tombstone is durable, drops the chunks of a
    /// large value it deleted. `count`: the key counter of `physical`.
    pub(crate) async fn delete_record(
        &self,
        mode: Mode,
        physical: u32,
        count: &AtomicI64,
        key: &[u8],
        version: Option<u64>,
    ) -> Result<DeleteOutcome> {
        let (outcome, deleted) = self.delete_one(mode, physical, count, key, version).await?;
        self.replaced(mode, physical, key, deleted).await;
        Ok(outcome)
    }

    /// [`Inner::delete_record`] without dropping chunks: says what it
    /// deleted.
    pub(crate) async fn delete_one(
        &self,
        mode: Mode,
        physical: u32,
        count: &AtomicI64,
        key: &[u8],
        version: Option<u64>,
    ) -> Result<(DeleteOutcome, Option<Existing>)> {
        let at = KeyAt::new(physical, key);
        loop {
            let stripe = self.stripes.lock_in(mode, self.stripe_of(at.h)).await;
            let mut cands = Vec::new();
            let Some(existing) = self
                .existing(mode, physical, key, at.h, at.h2, &mut cands)
                .await?
            else {
                return Ok((DeleteOutcome::NotFound, None));
            };
            if version.is_some_and(|v| v != existing.seq) {
                return Ok((DeleteOutcome::VersionMismatch, None));
            }
            if self.commit_delete(mode, &at, key, existing, count).await? {
                return Ok((DeleteOutcome::Deleted, Some(existing)));
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
        count: &AtomicI64,
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
    fn unlinked(&self, at: &KeyAt, existing: Existing, app: &Appended, count: &AtomicI64) {
        self.unlink(at.fp, existing, app.pba, app.grains);
        self.loc_cache
            .clear(self.stripe_of(at.h), at.physical, at.h, at.h2);
        count.fetch_sub(1, Ordering::Relaxed);
        self.counters.deletes.fetch_add(1, Ordering::Relaxed);
    }

    fn unlink(&self, fp: u64, existing: Existing, tomb_pba: u64, tomb_grains: u64) {
        let seg = self.layout.segment_of(existing.loc.pba);
        let _unlinking = self.segments.unlinking(seg);
        if self.index.remove(fp, existing.loc) {
            self.segments.sub_valid(seg, existing.grains);
        }
        let tseg = self.layout.segment_of(tomb_pba);
        self.segments
            .get(tseg)
            .tombstone_grains
            .fetch_add(tomb_grains, Ordering::Relaxed);
    }

    pub fn write_batch(&self, ns: Namespace, ops: &[WriteOp<'_>]) -> Result<()> {
        now(self.write_batch_in(Mode::Blocking, ns, ops))
    }

    /// [`Inner::write_batch`], waiting as `mode` says.
    pub async fn write_batch_in(
        &self,
        mode: Mode,
        ns: Namespace,
        ops: &[WriteOp<'_>],
    ) -> Result<()> {
        let ops: Vec<(Namespace, WriteOp<'_>)> = ops.iter().map(|op| (ns, *op)).collect();
        self.write_batch_guarded_in(mode, &ops, None, |_| {})
            .await
            .map(|_| ())
    }

    /// A crash-atomic batch over any namespaces, applied only if `guard`'s
    /// key is still at the version it names (`None`: absent), checked under
    /// the stripe locks the batch holds until its records are linked. So a
    /// caller that read a key (its version) and other records, and decided
    /// a batch from them, commits it only if no write of that key came
    /// between: optimistic concurrency for a structure of several records
    /// whose every change also rewrites its guard key (a Redis
    /// collection's metadata and its pages). Returns `None` when the guard
    /// failed (nothing written), else each operation's new version (0 for
    /// a delete, and for an operation a later one on the same key
    /// overrides).
    ///
    /// `linked` runs once the index points to the batch's records (with
    /// their versions), before the call waits for them to be durable when
    /// `unlock_before_durable` (or `write_behind`) lets it link them from
    /// the write buffer: a caller's own lock on the structure can go
    /// there, so the next change of it shares this one's group commit.
    pub async fn write_batch_guarded_in(
        &self,
        mode: Mode,
        ops: &[(Namespace, WriteOp<'_>)],
        guard: Option<BatchGuard<'_>>,
        linked: impl FnOnce(&[u64]),
    ) -> Result<Option<Vec<u64>>> {
        for (_, op) in ops {
            match op {
                WriteOp::Put { key, value } => {
                    self.check_sizes(key, Some(value))?;
                    self.check_one_record("write_batch", value.len())?;
                }
                WriteOp::Delete { key } => self.check_sizes(key, None)?,
            }
        }
        let mut resolved = Vec::with_capacity(ops.len());
        for (ns, _) in ops {
            resolved.push(self.resolve(*ns)?);
        }
        let guard_at = match &guard {
            Some(g) => Some((KeyAt::new(self.resolve(g.ns)?.0, g.key), g)),
            None => None,
        };
        // Last operation on a key wins.
        let mut last: HashMap<(u32, &[u8]), usize> = HashMap::new();
        for (i, (_, op)) in ops.iter().enumerate() {
            last.insert((resolved[i].0, op.key()), i);
        }
        let mut order: Vec<usize> = last.into_values().collect();
        order.sort_unstable();
        // All or nothing after a crash needs the whole batch in one
        // segment (docs/FORMAT.md, "Batches").
        let lens = order.iter().map(|&i| match ops[i].1 {
            WriteOp::Put { key, value } => (key.len(), value.len()),
            WriteOp::Delete { key } => (key.len(), 0),
        });
        if !self.writer.batch_fits(lens) {
            return Err(Error::Config(format!(
                "a batch of {} operations is larger than a segment can hold \
                 (a batch is applied whole or not at all after a crash, so it \
                 must fit one segment of {} bytes); split it",
                order.len(),
                self.layout.segment_bytes
            )));
        }
        let hashes: Vec<u64> = order
            .iter()
            .map(|&i| key_hash(resolved[i].0, ops[i].1.key()))
            .chain(guard_at.as_ref().map(|(at, _)| at.h))
            .collect();
        // Best effort: make room first, since the stripes must not be held
        // while waiting for GC. If space still runs out, the batch dips
        // into the GC reserve.
        self.writer.wait_for_space_in(mode, Appender::Put).await?;
        let stripes = self.lock_stripes_in(mode, hashes.iter().copied()).await;
        if let Some((at, g)) = &guard_at {
            let mut cands = Vec::new();
            let found = self
                .existing(mode, at.physical, g.key, at.h, at.h2, &mut cands)
                .await?;
            if found.map(|e| e.seq) != g.version {
                return Ok(None);
            }
        }
        struct Planned {
            at: KeyAt,
            seq: u64,
            existing: Option<Existing>,
            cands: Vec<Location>,
            app: Option<Appended>,
        }
        let mut plan = Vec::with_capacity(order.len());
        let mut records: Vec<RecordParts<'_>> = Vec::new();
        let mut writes: Vec<usize> = Vec::new();
        for &i in &order {
            let physical = resolved[i].0;
            let at = KeyAt::new(physical, ops[i].1.key());
            let mut cands = Vec::new();
            let existing = self
                .existing(mode, physical, ops[i].1.key(), at.h, at.h2, &mut cands)
                .await?;
            let mut seq = 0;
            let record = match ops[i].1 {
                WriteOp::Put { key, value } => {
                    let header = self.header(RecordKind::Put, physical, key, value.len());
                    seq = header.seq;
                    Some(RecordParts { header, key, value })
                }
                WriteOp::Delete { key } if existing.is_some() => Some(RecordParts {
                    header: self.header(RecordKind::Tombstone, physical, key, 0),
                    key,
                    value: &[],
                }),
                WriteOp::Delete { .. } => None,
            };
            if let Some(r) = record {
                writes.push(plan.len());
                records.push(r);
            }
            plan.push(Planned {
                at,
                seq,
                existing,
                cands,
                app: None,
            });
        }
        // Linked from the write buffer, as `commit_put` links a put (the
        // old records' space cannot be reused before these are durable:
        // GC syncs everything appended before it frees a segment).
        let early = (self.opts.write_behind || self.opts.unlock_before_durable)
            && !self.writer.unwritten_over_budget();
        if !records.is_empty() {
            // Members carry their own namespaces; the frame takes the
            // first's (recovery reads members by their headers).
            let frame_ns = resolved[order[0]].0;
            let frame = self.header(RecordKind::Batch, frame_ns, &[], 0);
            let append = |who| {
                if early {
                    self.writer
                        .try_append_batch_buffered(frame, &records, who)
                        .map(|a| a.map(|(apps, _)| apps))
                } else {
                    self.writer.try_append_batch(frame, &records, who)
                }
            };
            let apps = match append(Appender::Put)? {
                Some(apps) => apps,
                None => append(Appender::Gc)?.ok_or_else(|| self.writer.full_error())?,
            };
            for (app, &p) in apps.into_iter().zip(&writes) {
                plan[p].app = Some(app);
            }
        }
        let owed = plan
            .iter()
            .filter_map(|p| p.app.as_ref().map(|a| a.lsn))
            .max();
        if let (Some(lsn), false) = (owed, early) {
            self.writer.wait_durable_in(mode, lsn).await?;
        }
        let mut versions = vec![0u64; ops.len()];
        let mut wrote = vec![false; plan.len()];
        for (n, (p, &i)) in plan.iter_mut().zip(&order).enumerate() {
            // Indexed below: the segment's hold for the record can go.
            let Some(app) = p.app.take() else { continue };
            wrote[n] = true;
            let count = &resolved[i].1;
            match ops[i].1 {
                WriteOp::Put { .. } => {
                    let placed = app.placed();
                    let kind = RecordKind::Put;
                    self.linked_put(&p.at, kind, placed, p.seq, p.existing, &p.cands, count)?;
                    versions[i] = p.seq;
                }
                WriteOp::Delete { .. } => {
                    let existing = p.existing.expect("delete planned only for present keys");
                    self.unlinked(&p.at, existing, &app, count);
                }
            }
        }
        drop(stripes);
        linked(&versions);
        if let (Some(lsn), true) = (owed, early) {
            if !crate::deferred::owe(lsn) {
                self.writer.wait_durable_in(mode, lsn).await?;
            }
        }
        for ((p, &i), wrote) in plan.iter().zip(&order).zip(wrote) {
            if wrote {
                self.replaced(mode, resolved[i].0, ops[i].1.key(), p.existing)
                    .await;
            }
        }
        Ok(Some(versions))
    }
}

/// The condition of [`crate::Store::write_batch_guarded_async`]: `key` of
/// `ns` is at `version` (`None`: absent).
#[derive(Clone, Copy, Debug)]
pub struct BatchGuard<'a> {
    pub ns: Namespace,
    pub key: &'a [u8],
    pub version: Option<u64>,
}
