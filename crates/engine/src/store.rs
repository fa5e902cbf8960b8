//! The store: GET/PUT/DELETE and friends over the index, the log writer and
//! the devices. This file is the public API; the work is done by
//! [`Inner`] (`inner.rs`, `lookup.rs`, `commit.rs`, `namespace_admin.rs`).
//!
//! Concurrency: writers of one key are serialised by a striped lock taken
//! on the key hash, held from the lookup of the old record until the index
//! points to the new, durable one. So record sequence numbers of a key
//! increase in the order the index sees them, which is the order recovery
//! replays. Readers take no lock: they read the candidate records and, if
//! none matches, look the key up again to tell "absent" from "moved".

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use nvdepot_io::Device;

use crate::aio::{drive, Mode};
use crate::error::Result;
use crate::namespace::{Namespace, DEFAULT_NAME};
use crate::options::Options;
use crate::update::{Change, Current, Known, Updated};

/// Keys whose index entries [`Store::get_many`] prefetches at a time: a
/// few more misses in flight than a core can track, no more.
const PREFETCH_BATCH: usize = 16;

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
    pub(crate) fn key(&self) -> &[u8] {
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

use crate::inner::Inner;

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
        let (devices, creating) = crate::recovery::open_paths(path, opts)?;
        let store = match Self::open_devices_inner(devices, opts, creating.is_some()) {
            Ok(store) => store,
            Err(e) => {
                if let Some(c) = creating {
                    c.abandon();
                }
                return Err(e);
            }
        };
        if let Some(c) = creating {
            // Formatted and flushed: only now does the store exist.
            c.publish()?;
        }
        Ok(store)
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

    /// Longest value `put` accepts (`Options::value_bytes_max`, at most
    /// [`crate::LARGE_VALUE_BYTES_MAX`]). Values longer than
    /// [`Store::record_value_bytes_max`] are stored as large values.
    pub fn value_bytes_max(&self) -> usize {
        self.inner.value_bytes_max()
    }

    /// Longest value one record holds (a quarter of a segment less the
    /// longest key); `update` and `write_batch` take values up to this.
    pub fn record_value_bytes_max(&self) -> usize {
        self.inner.record_value_bytes_max()
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
    /// `None` if the key is absent. Reads only what the range needs: of a
    /// value in one record, its prefix up to the end of the range; of a
    /// large value, the chunks the range touches (whole chunks whole, the
    /// range's ends as windows). Headers and keys are checksummed, the
    /// value bytes of a partial read are not (a full `get` verifies them).
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
        crate::large::get_range(&self.inner, physical, key, offset, len)
    }

    /// Writes `data` over bytes `[offset, offset + data.len())` of the
    /// value, as Redis's SETRANGE does: an absent key counts as an empty
    /// value, and a value shorter than `offset` is padded with zero bytes.
    /// Returns the value's new length. Atomic per key (the update step: no
    /// write of the key comes between the read and the write) and durable
    /// on return. One device read and one record written for a value one
    /// record holds; a large value is read and rewritten whole (its chunks
    /// are named by its generation, so a rewrite is a new generation).
    pub fn put_range(&self, ns: Namespace, key: &[u8], offset: u64, data: &[u8]) -> Result<u64> {
        let end = offset
            .checked_add(data.len() as u64)
            .filter(|&end| end <= self.value_bytes_max() as u64)
            .ok_or(crate::Error::ValueTooLarge {
                len: offset
                    .saturating_add(data.len() as u64)
                    .min(usize::MAX as u64) as usize,
                max: self.value_bytes_max(),
            })?;
        let (len, _) = self.update(ns, key, |current| {
            let mut value = current.map(|c| c.value.to_vec()).unwrap_or_default();
            if data.is_empty() {
                let len = value.len() as u64;
                return (Change::Keep, len);
            }
            if (value.len() as u64) < end {
                value.resize(end as usize, 0);
            }
            value[offset as usize..end as usize].copy_from_slice(data);
            let len = value.len() as u64;
            (Change::Put(value), len)
        })?;
        Ok(len)
    }

    /// One page of a resumable walk over the keys and values of namespace
    /// `ns` (or, with `None`, of every namespace): start with cursor 0 and
    /// go on with [`crate::ScanPage::next`] until it is `None`. A key
    /// present and unmodified for the whole walk is returned exactly once,
    /// whatever garbage collection or the index's growth do meanwhile; a
    /// key written or deleted during the walk may or may not be. `hint`:
    /// index entries wanted per page (pages are larger in a large store,
    /// so a walk makes at most 64 passes over the index). See `cursor.rs`.
    pub fn scan(&self, ns: Option<Namespace>, cursor: u64, hint: usize) -> Result<crate::ScanPage> {
        crate::cursor::scan(&self.inner, ns, cursor, hint)
    }

    /// A streaming read of `key`'s value (`std::io::Read + Seek`), or
    /// `None` if the key is absent: a large value is read a chunk at a
    /// time, only the chunks read. If the value is replaced or deleted
    /// while the reader lives, reading a chunk not read yet fails.
    pub fn value_reader(
        &self,
        ns: Namespace,
        key: &[u8],
    ) -> Result<Option<crate::value_reader::ValueReader<'_>>> {
        self.inner.check_sizes(key, None)?;
        let (physical, _) = self.inner.resolve(ns)?;
        self.inner.counters.gets.fetch_add(1, Ordering::Relaxed);
        crate::value_reader::ValueReader::open(&self.inner, physical, key)
    }

    /// Values of several keys. The index entries of each run of
    /// [`PREFETCH_BATCH`] keys are prefetched before the first is looked
    /// up (see [`Store::prefetch`]).
    pub fn get_many(&self, ns: Namespace, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        let mut out = Vec::with_capacity(keys.len());
        for batch in keys.chunks(PREFETCH_BATCH) {
            for k in batch {
                self.prefetch(ns, k);
            }
            for k in batch {
                out.push(self.get(ns, k)?);
            }
        }
        Ok(out)
    }

    /// A hint that `key` is about to be read or written: starts loading
    /// its index neighborhood into the CPU cache and returns at once
    /// (`nvdepot_index::Index::prefetch`). Called for each key of a batch
    /// (a multi-get, the requests of one event-loop turn) before any of
    /// them is served, it overlaps their DRAM misses. Changes nothing.
    pub fn prefetch(&self, ns: Namespace, key: &[u8]) {
        if let Some((physical, _)) = self.inner.namespaces.resolve(ns) {
            let fp = nvdepot_index::Index::fingerprint(crate::inner::key_hash(physical, key));
            self.inner.index.prefetch(fp);
        }
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
        drive(|m| self.inner.update(m, ns, key, None, decide))
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
        self.inner.update(Mode::Ring, ns, key, None, decide).await
    }

    /// [`Store::update_async`] given the caller's copy of the key's value
    /// at some version (a DRAM tier's): if the key is still at that
    /// version, `decide` sees the copy and the device is not read
    /// (see [`Known`]); otherwise as `update_async`.
    pub async fn update_known_async<R>(
        &self,
        ns: Namespace,
        key: &[u8],
        known: Option<Known<'_>>,
        decide: impl FnMut(Option<Current<'_>>) -> (Change, R),
    ) -> Result<(R, Updated)> {
        self.inner.update(Mode::Ring, ns, key, known, decide).await
    }

    /// Applies puts and deletes atomically with one shared flush: when this
    /// returns all are durable, and after a crash *during* the call either
    /// all of them or none is there (docs/FORMAT.md, "Batches"). The last
    /// operation on a key counts. The batch's records must fit one segment
    /// (else `Error::Config`, naming the segment size); values must fit one
    /// record each. Readers may see some of the operations before the call
    /// returns (there is no read isolation).
    pub fn write_batch(&self, ns: Namespace, ops: &[WriteOp<'_>]) -> Result<()> {
        self.inner.write_batch(ns, ops)
    }

    /// [`Store::write_batch`] through the thread's ring.
    pub async fn write_batch_async(&self, ns: Namespace, ops: &[WriteOp<'_>]) -> Result<()> {
        self.inner.write_batch_in(Mode::Ring, ns, ops).await
    }

    /// [`Store::write_batch`] over several namespaces, applied only if
    /// `guard`'s key is still at the version it names (`None`: absent),
    /// checked under the locks the batch takes: `Ok(None)` when it was not
    /// (nothing written), else each operation's new version (0 for a
    /// delete or an operation a later one on its key overrides).
    ///
    /// `linked` runs once the index points to the records (their versions
    /// given), which with [`crate::Options::unlock_before_durable`] is
    /// before they are durable: a caller may release its own lock on the
    /// structure there, so the next change shares this one's flush.
    pub async fn write_batch_guarded_async(
        &self,
        ops: &[(Namespace, WriteOp<'_>)],
        guard: Option<crate::BatchGuard<'_>>,
        linked: impl FnOnce(&[u64]),
    ) -> Result<Option<Vec<u64>>> {
        self.inner
            .write_batch_guarded_in(Mode::Ring, ops, guard, linked)
            .await
    }

    /// [`Store::write_batch_guarded_async`], blocking.
    pub fn write_batch_guarded(
        &self,
        ops: &[(Namespace, WriteOp<'_>)],
        guard: Option<crate::BatchGuard<'_>>,
    ) -> Result<Option<Vec<u64>>> {
        crate::aio::now(
            self.inner
                .write_batch_guarded_in(Mode::Blocking, ops, guard, |_| {}),
        )
    }

    /// Whether a batch of operations with these (key, value) lengths fits
    /// one segment, as [`Store::write_batch`] needs.
    pub fn batch_fits(&self, lens: impl Iterator<Item = (usize, usize)>) -> bool {
        self.inner.writer.batch_fits(lens)
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
        self.iter_by(ns, crate::IterPlan::Cheaper)
    }

    /// [`Store::iter`] with the way of reading forced (tests compare them).
    #[doc(hidden)]
    pub fn iter_by(&self, ns: Namespace, plan: crate::IterPlan) -> crate::NamespaceIter<'_> {
        let physical = self.inner.resolve(ns).ok().map(|(p, _)| p);
        crate::NamespaceIter::new(&self.inner, physical, plan)
    }

    /// Counters and gauges.
    pub fn stats(&self) -> crate::Stats {
        crate::stats::collect(&self.inner)
    }

    /// Waits, parked on the calling task's runtime (blocking outside
    /// one), until the log is on the device up to `lsn` (a position
    /// [`crate::defer_durability`] returned).
    pub async fn wait_durable_async(&self, lsn: u64) -> Result<()> {
        let mode = if nvdepot_io::uring::in_runtime() {
            crate::aio::Mode::Ring
        } else {
            crate::aio::Mode::Blocking
        };
        self.inner.writer.wait_durable_in(mode, lsn).await
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
