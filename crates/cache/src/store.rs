//! [`CacheStore`]: the engine in cache mode with the DRAM tier in front,
//! holding enveloped items. Every face's binding goes through its three
//! item operations: `get`, a blind `set`, and `update` (one device read,
//! the face's decision and at most one write, atomic per key).

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use nvdepot_engine::{self as engine, Namespace, Options, PutMode, Store};

use crate::access::{Access, AccessTable};
use crate::dram::DramTier;
use crate::envelope::{self, Envelope, Item, ItemRef, ENVELOPE_BYTES};
use crate::staging;
use crate::Error;

/// Record values from this size on are kept by the DRAM tier as written
/// (shared, not copied) when a guarded batch writes them: below it a copy
/// costs less than the shared value's and the key's own allocations.
const KEEP_AT_BYTES: usize = 1024;

/// An item to write: its data and envelope, and the CAS unique it keeps
/// (`None`: the write's version becomes its CAS).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewItem {
    pub value: Vec<u8>,
    pub envelope: Envelope,
    pub kept_cas: Option<u64>,
    /// The same item changed (memcached changes it in place): its access
    /// state carries over. Otherwise it is a new item, never fetched.
    pub keeps_access: bool,
}

/// What an update decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// Leave the key as it is.
    Keep,
    /// Write this item.
    Put(NewItem),
    /// Remove the key.
    Delete,
}

/// What an update did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Updated {
    Kept,
    Deleted,
    /// Written; the item's CAS unique.
    Stored {
        cas: u64,
    },
}

/// The engine, seen as a store of enveloped items, with the DRAM tier.
pub struct CacheStore {
    store: Store,
    /// The DRAM tier (`-m`): hot items, so a hit costs no IO.
    pub(crate) dram: DramTier,
    /// Fetched-since-written and last access per item (memcache `mg h l`).
    access: AccessTable,
    memory_bytes: u64,
    /// Expired items an update deleted (memcached's `reclaimed`).
    pub(crate) expired_reclaimed: AtomicU64,
}

/// Unix time in seconds, as item expiry counts it. Read from the
/// kernel's coarse clock (the time of the last tick, a few milliseconds
/// behind at most, as memcached's own once-a-second clock is further):
/// every fetch reads it for the access table, and the precise clock
/// costs several times more in this VM.
pub fn unix_now() -> u32 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes only the timespec passed, which lives
    // on this frame.
    if unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &mut ts) } == 0 {
        return ts.tv_sec as u32;
    }
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as u32)
        .unwrap_or(0)
}

impl CacheStore {
    /// The engine options for a cache: cache mode, 250-byte keys, writes
    /// flushed every 100 ms. Adjust and pass to [`CacheStore::open`].
    pub fn default_options() -> Options {
        Options {
            cache_mode: true,
            sync: false,
            flush_interval_ms: 100,
            key_bytes_max: 250,
            ..Options::default()
        }
    }

    /// Opens (or creates) the store at `data` with `opts`, with a DRAM
    /// tier of `memory_bytes`.
    pub fn open(data: &Path, opts: Options, memory_bytes: u64) -> Result<CacheStore, Error> {
        let store = Store::open(data, &opts)?;
        let r = store.open_report();
        tracing::info!(
            "store at {} opened in {:.2} s ({}), {} items",
            data.display(),
            r.seconds,
            if r.created {
                "created"
            } else if r.clean {
                "index checkpoint"
            } else {
                "log scan after a crash"
            },
            r.keys
        );
        Ok(CacheStore::over(store, memory_bytes))
    }

    /// A cache over an open store (any device, the fault-injecting one
    /// included). Items live in the namespaces the faces pass. Of
    /// `memory_bytes`, 1/16 (64 KiB to 64 MiB) holds the access table and
    /// the rest the DRAM tier.
    pub fn over(store: Store, memory_bytes: u64) -> CacheStore {
        let memory = usize::try_from(memory_bytes).unwrap_or(usize::MAX);
        let access = AccessTable::new((memory / 16).clamp(64 << 10, 64 << 20), unix_now());
        CacheStore {
            store,
            dram: DramTier::new(memory.saturating_sub(access.bytes())),
            access,
            memory_bytes,
            expired_reclaimed: AtomicU64::new(0),
        }
    }

    /// The engine underneath (for stats and tests).
    pub fn engine(&self) -> &Store {
        &self.store
    }

    /// The DRAM tier's budget in bytes.
    pub fn memory_bytes(&self) -> u64 {
        self.memory_bytes
    }

    /// Largest item data the engine accepts: its value limit less the
    /// envelope.
    pub fn item_bytes_max(&self) -> usize {
        self.store.value_bytes_max().saturating_sub(ENVELOPE_BYTES)
    }

    /// Writes the index checkpoint and closes (fast warm restart).
    pub fn close(self) -> Result<(), Error> {
        Ok(self.store.close()?)
    }

    fn key_hash(ns: Namespace, key: &[u8]) -> u64 {
        xxhash_rust::xxh3::xxh3_64_with_seed(key, u64::from(ns.id()))
    }

    /// The access state of the item under `key` (see [`AccessTable`]).
    pub fn access(&self, ns: Namespace, key: &[u8]) -> Access {
        self.access.get(Self::key_hash(ns, key), unix_now())
    }

    /// Starts loading the access-table entry of `key` into the CPU cache
    /// ahead of a [`fetched`](Self::fetched) (see [`AccessTable::prefetch`]).
    pub fn prefetch_access(&self, ns: Namespace, key: &[u8]) {
        self.access.prefetch(Self::key_hash(ns, key))
    }

    /// A hint that `key` is about to be read: starts loading its
    /// access-table entry and the engine's index entry (see
    /// [`Store::prefetch`](nvdepot_engine::Store::prefetch)), so that the
    /// misses of a batch of gets overlap.
    pub fn prefetch(&self, ns: Namespace, key: &[u8]) {
        self.prefetch_access(ns, key);
        self.store.prefetch(ns, key);
    }

    /// Counts a fetch of the item under `key` (see [`AccessTable`]).
    pub fn fetched(&self, ns: Namespace, key: &[u8]) {
        self.access.fetched(Self::key_hash(ns, key), unix_now())
    }

    /// The item under `key`, expired or not (expiry is the face's rule).
    /// A DRAM-tier hit answers on the first poll, without IO; a miss reads
    /// the device (through the ring inside a worker) and fills the tier.
    pub async fn get(&self, ns: Namespace, key: &[u8]) -> Result<Option<Item>, Error> {
        match staging::current() {
            Some(staging) => self.get_in(&staging, ns, key).await,
            None => self.get_unstaged(ns, key).await,
        }
    }

    /// [`CacheStore::get`] for a read of a few of the item's bytes: `f`
    /// sees the item borrowed where the DRAM tier keeps it, not copied out
    /// (a tier miss reads the record and caches it, as `get` does).
    pub async fn get_with<R>(
        &self,
        ns: Namespace,
        key: &[u8],
        f: impl FnOnce(ItemRef<'_>) -> R,
    ) -> Result<Option<R>, Error> {
        if let Some(staging) = staging::current() {
            let item = self.get_in(&staging, ns, key).await?;
            return Ok(item.map(|item| f(item.borrowed())));
        }
        let mut f = Some(f);
        let lent = self
            .dram
            .get_with(ns.id(), key, |item| (f.take().expect("called once"))(item));
        let epoch = match lent {
            Ok(out) => return Ok(Some(out)),
            Err(epoch) => epoch,
        };
        let f = f.expect("not called on a miss");
        let item = self.read_and_fill(ns, key, epoch).await?;
        Ok(item.map(|item| f(item.borrowed())))
    }

    /// [`CacheStore::get`] of the engine's item (the DRAM tier's copy of
    /// it), whatever is staged.
    pub(crate) async fn get_unstaged(
        &self,
        ns: Namespace,
        key: &[u8],
    ) -> Result<Option<Item>, Error> {
        match self.dram.get(ns.id(), key) {
            Ok(item) => Ok(Some(item)),
            Err(epoch) => self.read_and_fill(ns, key, epoch).await,
        }
    }

    /// A DRAM tier miss: the item read from the engine, and cached unless
    /// the tier was invalidated since `epoch`.
    async fn read_and_fill(
        &self,
        ns: Namespace,
        key: &[u8],
        epoch: u64,
    ) -> Result<Option<Item>, Error> {
        match self.store.get_versioned_async(ns, key).await? {
            Some((raw, version)) => {
                let item = envelope::decode(raw, version)?;
                self.dram.fill(ns.id(), key, &item, epoch);
                Ok(Some(item))
            }
            None => Ok(None),
        }
    }

    /// One blind engine put (no read); write-through to the DRAM tier, as
    /// the item just stored is the hottest there is. The item's data is
    /// `value`'s parts one after the other (a face's prefix, the client's
    /// bytes): copied once into the record value, which the tier copies
    /// from. Returns its CAS.
    pub async fn set(
        &self,
        ns: Namespace,
        key: &[u8],
        value: &[&[u8]],
        envelope: Envelope,
    ) -> Result<u64, Error> {
        let raw = envelope::encode_parts(value, envelope, 0);
        if let Some(staging) = staging::current() {
            return Ok(staging.put(ns, key, raw));
        }
        self.put_raw(ns, key, &raw).await
    }

    /// Upserts the encoded item `raw` (envelope and value) in the engine,
    /// the DRAM tier's copy of `key` bracketing the write: its version.
    pub(crate) async fn put_raw(
        &self,
        ns: Namespace,
        key: &[u8],
        raw: &[u8],
    ) -> Result<u64, Error> {
        let write = DramWrite::begin(&self.dram, ns.id(), key);
        let put = self
            .store
            .put_versioned_async(ns, key, raw, PutMode::Upsert)
            .await;
        let cas = match put {
            Ok(Some(cas)) => cas,
            Ok(None) => unreachable!("an upsert always writes"),
            Err(e) => {
                write.end(None);
                return Err(e.into());
            }
        };
        // The tier copies the item out of the record value itself.
        write.end(envelope::decode_ref(raw, cas).ok());
        self.written(ns, key);
        Ok(cas)
    }

    /// Counts a write of the item under `key` (see [`AccessTable`]).
    pub(crate) fn written(&self, ns: Namespace, key: &[u8]) {
        self.access.written(Self::key_hash(ns, key), unix_now());
    }

    /// Whether [`CacheStore::write_many`] can store these (key, data
    /// length) pairs as one crash-atomic batch (their records fit one
    /// segment; each value one record).
    pub fn batch_fits(&self, items: impl Iterator<Item = (usize, usize)>) -> bool {
        let record_max = self.store.record_value_bytes_max();
        let mut all_small = true;
        let fits = self.store.batch_fits(items.map(|(k, v)| {
            all_small &= ENVELOPE_BYTES + v <= record_max;
            (k, ENVELOPE_BYTES + v)
        }));
        fits && all_small
    }

    /// Blind writes of several items and deletes of several keys as one
    /// crash-atomic batch (the engine's `write_batch`: after a crash all
    /// are there or none; one group-committed flush). Each item is `(key,
    /// data parts, envelope)`; the last write of a key counts (deletes
    /// after puts). The DRAM tier drops the keys (they are read back from
    /// flash). Callers check [`CacheStore::batch_fits`] first.
    pub async fn write_many(
        &self,
        ns: Namespace,
        items: &[BatchItem<'_>],
        deletes: &[&[u8]],
    ) -> Result<(), Error> {
        let raws: Vec<Vec<u8>> = items
            .iter()
            .map(|(_, parts, envelope)| envelope::encode_parts(parts, *envelope, 0))
            .collect();
        if let Some(staging) = staging::current() {
            for ((key, _, _), raw) in items.iter().zip(raws) {
                staging.put(ns, key, raw);
            }
            for key in deletes {
                staging.delete(ns, key);
            }
            return Ok(());
        }
        let keys = items
            .iter()
            .map(|(key, _, _)| *key)
            .chain(deletes.iter().copied());
        let writes: Vec<DramWrite<'_>> = keys
            .map(|key| DramWrite::begin(&self.dram, ns.id(), key))
            .collect();
        let ops: Vec<engine::WriteOp<'_>> = items
            .iter()
            .zip(&raws)
            .map(|((key, _, _), raw)| engine::WriteOp::Put { key, value: raw })
            .chain(deletes.iter().map(|key| engine::WriteOp::Delete { key }))
            .collect();
        let done = self.store.write_batch_async(ns, &ops).await;
        for w in writes {
            w.end(None);
        }
        done?;
        let now = unix_now();
        for (key, _, _) in items {
            self.access.written(Self::key_hash(ns, key), now);
        }
        Ok(())
    }

    /// A crash-atomic batch of puts (`Some(item)`) and deletes (`None`)
    /// over several namespaces, applied only if `guard` (namespace, key,
    /// version; `None` = absent) still holds under the batch's locks (the
    /// engine's `write_batch_guarded`): `Ok(false)` when it did not,
    /// nothing written. Written items are cached in the DRAM tier as
    /// written (the structure just changed is the hottest there is), as
    /// soon as the index points to them; then `linked` runs (before the
    /// wait for durability, when the engine links from its write buffer).
    pub async fn write_guarded(
        &self,
        ops: &[GuardedOp<'_>],
        guard: (Namespace, &[u8], Option<u64>),
        linked: impl FnOnce(),
    ) -> Result<bool, Error> {
        // Shared with the DRAM tier, which keeps a large one as it is
        // instead of copying it.
        let raws: Vec<Option<Arc<Vec<u8>>>> = ops
            .iter()
            .map(|(_, _, put)| {
                put.map(|(parts, env)| Arc::new(envelope::encode_parts(parts, env, 0)))
            })
            .collect();
        if let Some(staging) = staging::current() {
            if self.staged_version(&staging, guard.0, guard.1).await? != guard.2 {
                return Ok(false);
            }
            for ((ns, key, _), raw) in ops.iter().zip(raws) {
                match raw {
                    Some(raw) => {
                        let raw = Arc::try_unwrap(raw).unwrap_or_else(|raw| raw.to_vec());
                        let _version = staging.put(*ns, key, raw);
                    }
                    None => staging.delete(*ns, key),
                }
            }
            linked();
            return Ok(true);
        }
        let engine_ops: Vec<(Namespace, engine::WriteOp<'_>)> = ops
            .iter()
            .zip(&raws)
            .map(|((ns, key, _), raw)| match raw {
                Some(value) => (*ns, engine::WriteOp::Put { key, value }),
                None => (*ns, engine::WriteOp::Delete { key }),
            })
            .collect();
        let guard = engine::BatchGuard {
            ns: guard.0,
            key: guard.1,
            version: guard.2,
        };
        // Only the guard's namespace holds items a face asks the access
        // state of (the collection's key); its pages are the structure's
        // inside, and marking each cost a cache miss in the table per page
        // written (2-4 % of a ZADD's CPU).
        let tracked = Some(guard.ns);
        self.write_batch_direct(&engine_ops, &raws, Some(guard), tracked, linked)
            .await
    }

    /// The engine's guarded batch of `ops` (record values), the DRAM tier
    /// kept in step: see [`CacheStore::write_guarded`]. Puts count as
    /// writes in the access table if in namespace `tracked` (`None`: in
    /// any).
    pub(crate) async fn write_batch_direct(
        &self,
        ops: &[(Namespace, engine::WriteOp<'_>)],
        kept: &[Option<Arc<Vec<u8>>>],
        guard: Option<engine::BatchGuard<'_>>,
        tracked: Option<Namespace>,
        linked: impl FnOnce(),
    ) -> Result<bool, Error> {
        let writes: Vec<DramWrite<'_>> = ops
            .iter()
            .map(|(ns, op)| {
                let key = match op {
                    engine::WriteOp::Put { key, .. } | engine::WriteOp::Delete { key } => key,
                };
                DramWrite::begin(&self.dram, ns.id(), key)
            })
            .collect();
        let mut writes = Some(writes);
        let done = self
            .store
            .write_batch_guarded_async(ops, guard, |versions| {
                let now = unix_now();
                let writes = writes.take().expect("linked once");
                let ended = writes.into_iter().zip(ops).zip(versions);
                for (i, ((w, (ns, op)), &version)) in ended.enumerate() {
                    match op {
                        // A later operation on the same key overrode this one.
                        engine::WriteOp::Put { .. } if version == 0 => w.end(None),
                        engine::WriteOp::Put { key, value } => {
                            let raw = kept.get(i).and_then(Option::as_ref);
                            // `kept[i]` is op i's value (the op was made
                            // from it), so the tier may keep it for `value`.
                            debug_assert!(raw.is_none_or(|r| std::ptr::eq(r.as_slice(), *value)));
                            match (envelope::decode_ref(value, version), raw) {
                                (Ok(item), Some(raw)) if raw.len() >= KEEP_AT_BYTES => {
                                    let at = raw.len() - item.value.len();
                                    w.end_kept(raw.clone(), at, (item.envelope, item.cas))
                                }
                                (Ok(item), _) => w.end(Some(item)),
                                (Err(_), _) => w.end(None),
                            }
                            if tracked.is_none_or(|t| t == *ns) {
                                self.access.written(Self::key_hash(*ns, key), now);
                            }
                        }
                        engine::WriteOp::Delete { .. } => w.end(None),
                    }
                }
                linked();
            })
            .await;
        match done {
            Ok(Some(_)) => Ok(true),
            Ok(None) => {
                for w in writes.take().into_iter().flatten() {
                    w.unchanged();
                }
                Ok(false)
            }
            // Dropped undecided writes drop their keys from the tier.
            Err(e) => Err(e.into()),
        }
    }

    /// The engine's update step: under the key's stripe lock, one device
    /// read of the record, the decision, and at most one durable write.
    /// `decide` sees the item expired or not.
    pub async fn update<R>(
        &self,
        ns: Namespace,
        key: &[u8],
        mut decide: impl FnMut(Option<Item>) -> (Change, R),
    ) -> Result<(R, Updated), Error> {
        if let Some(staging) = staging::current() {
            return self.update_staged(&staging, ns, key, decide).await;
        }
        // The DRAM tier's copy, as the record value it came from (its CAS
        // as the kept one decodes to the same item): if the key is still
        // at that version the engine decides on it without a device read.
        // An item with a kept CAS (not its record's version) never
        // matches, and reads.
        let copy = self
            .dram
            .peek(ns.id(), key)
            .map(|it| (it.cas, envelope::encode(&it.value, it.envelope, it.cas)));
        let known = copy.as_ref().map(|(version, raw)| engine::Known {
            version: *version,
            value: raw,
        });
        let write = DramWrite::begin(&self.dram, ns.id(), key);
        let mut expired = false;
        let result = self
            .store
            .update_known_async(ns, key, known, |current| {
                let item = match current.map(|c| envelope::decode(c.value.to_vec(), c.version)) {
                    Some(Err(e)) => return (engine::Change::Keep, Err(e)),
                    Some(Ok(item)) => Some(item),
                    None => None,
                };
                expired = item
                    .as_ref()
                    .is_some_and(|it| !it.envelope.is_live(unix_now()));
                let (change, out) = decide(item);
                match change {
                    Change::Keep => (engine::Change::Keep, Ok((out, None))),
                    Change::Delete => (engine::Change::Delete, Ok((out, None))),
                    Change::Put(new) => {
                        let kept = new.kept_cas.unwrap_or(0);
                        let raw = envelope::encode(&new.value, new.envelope, kept);
                        (engine::Change::Put(raw), Ok((out, Some(new))))
                    }
                }
            })
            .await;
        let (decided, done) = match result {
            Ok(r) => r,
            Err(e) => {
                write.end(None);
                return Err(e.into());
            }
        };
        let (out, new) = match decided {
            Ok(d) => d,
            Err(e) => {
                write.unchanged();
                return Err(e);
            }
        };
        let done = match (done, new) {
            (engine::Updated::Kept, _) => {
                write.unchanged();
                Updated::Kept
            }
            (engine::Updated::Deleted, _) => {
                write.end(None);
                if expired {
                    self.expired_reclaimed.fetch_add(1, Ordering::Relaxed);
                }
                Updated::Deleted
            }
            (engine::Updated::Put(version), Some(new)) => {
                let cas = new.kept_cas.unwrap_or(version);
                if !new.keeps_access {
                    self.access.written(Self::key_hash(ns, key), unix_now());
                }
                let item = Item {
                    value: new.value,
                    envelope: new.envelope,
                    cas,
                };
                write.end(Some(item.borrowed()));
                Updated::Stored { cas }
            }
            (engine::Updated::Put(_), None) => unreachable!("a put is decided with its item"),
        };
        Ok((out, done))
    }

    /// Removes every item of `ns` (memcached's `flush_all`, Redis's
    /// `FLUSHDB`). The DRAM tier is emptied whole (rare; simpler than
    /// finding one namespace's entries).
    pub fn clear(&self, ns: Namespace) -> Result<(), Error> {
        // Staged writes of the namespace go with it (the clear itself is
        // not staged: it takes effect on the device at once).
        if let Some(staging) = staging::current() {
            staging.forget(ns);
        }
        let result = self.store.clear(ns);
        self.dram.clear();
        Ok(result?)
    }

    /// Items stored in `ns` (expired ones not yet removed included).
    pub fn items(&self, ns: Namespace) -> u64 {
        if let Some(staging) = staging::current() {
            return self.staged_items(&staging, ns);
        }
        self.store.count(ns)
    }

    /// Every item of `ns` as (key, record value: envelope and data): the
    /// engine's in log order (a full scan), then those the current
    /// staging holds in their place or in addition.
    pub fn for_each_record(
        &self,
        ns: Namespace,
        mut f: impl FnMut(Vec<u8>, &[u8]),
    ) -> Result<(), Error> {
        let staged = staging::current()
            .map(|s| s.of_namespace(ns))
            .unwrap_or_default();
        let shadowed: std::collections::HashSet<&[u8]> =
            staged.iter().map(|(k, _)| k.as_slice()).collect();
        // The engine finds a namespace's records by reading every segment
        // (or every index entry's record), whatever the namespace holds:
        // an empty one is not read at all. (The expiry sweep read the
        // whole log once per database, 16 times per pass, for one
        // database in use.)
        if self.store.count(ns) > 0 {
            for entry in self.store.iter(ns) {
                let (key, raw) = entry?;
                if !shadowed.contains(key.as_slice()) {
                    f(key, &raw);
                }
            }
        }
        for (key, raw) in &staged {
            if let Some(raw) = raw {
                f(key.clone(), raw);
            }
        }
        Ok(())
    }

    /// The store's default namespace.
    pub fn default_namespace(&self) -> Namespace {
        self.store.default_namespace()
    }

    /// Expired items deleted by updates.
    pub fn expired_reclaimed(&self) -> u64 {
        self.expired_reclaimed.load(Ordering::Relaxed)
    }

    /// The engine's and the DRAM tier's figures, named `nvdepot_<what>`,
    /// for a face's stats reply or metrics.
    pub fn stats(&self) -> Vec<(String, String)> {
        let s = self.store.stats();
        // What the last crash recovery found (cache mode drops damaged
        // records and goes on; each stretch was also logged at open).
        let damage = &self.store.open_report().damage;
        let lost = damage
            .iter()
            .filter(|d| d.kind == engine::DamageKind::Lost)
            .count();
        let torn = damage.len() - lost;
        let ours = [
            ("capacity_bytes", s.capacity_bytes.to_string()),
            ("live_bytes", s.live_bytes.to_string()),
            ("segments_total", s.segments_total.to_string()),
            ("segments_free", s.segments_free.to_string()),
            ("device_bytes_written", s.device_bytes_written.to_string()),
            ("user_bytes_written", s.user_bytes_written.to_string()),
            (
                "write_amplification",
                format!("{:.3}", s.write_amplification),
            ),
            ("flushes", s.flushes.to_string()),
            ("evictions", s.evictions.to_string()),
            ("evictions_logged", s.evictions_logged.to_string()),
            ("recovery_torn_stretches", torn.to_string()),
            ("recovery_damaged_stretches", lost.to_string()),
            ("dram_items", self.dram.items().to_string()),
            ("dram_bytes", self.dram.bytes().to_string()),
            (
                "dram_hits",
                self.dram.stats.hits.load(Ordering::Relaxed).to_string(),
            ),
            (
                "dram_misses",
                self.dram.stats.misses.load(Ordering::Relaxed).to_string(),
            ),
            ("index_bytes", s.index_memory_bytes.to_string()),
            (
                "index_bytes_per_key",
                format!("{:.2}", s.index_bytes_per_key),
            ),
        ];
        ours.into_iter()
            .map(|(k, v)| (format!("nvdepot_{k}"), v))
            .collect()
    }
}

/// One item of [`CacheStore::write_many`]: key, data parts, envelope.
pub type BatchItem<'a> = (&'a [u8], &'a [&'a [u8]], Envelope);

/// One operation of [`CacheStore::write_guarded`]: namespace, key, and
/// the item's data parts and envelope (`None`: delete the key).
pub type GuardedOp<'a> = (Namespace, &'a [u8], Option<(&'a [&'a [u8]], Envelope)>);

/// A flash write's bracket in the DRAM tier ([`DramTier::begin_write`] ..
/// [`DramTier::end_write`]). If the write's future is dropped before it
/// ends (a panicking connection), the key is dropped from the tier, since
/// the flash may or may not hold the new item.
pub(crate) struct DramWrite<'a> {
    dram: &'a DramTier,
    ns: u32,
    key: &'a [u8],
    epoch: u64,
    ended: bool,
}

impl<'a> DramWrite<'a> {
    pub(crate) fn begin(dram: &'a DramTier, ns: u32, key: &'a [u8]) -> DramWrite<'a> {
        let epoch = dram.begin_write(ns, key);
        DramWrite {
            dram,
            ns,
            key,
            epoch,
            ended: false,
        }
    }

    /// Caches `written` (the item now on flash) unless another write
    /// overtook this one; `None` drops the key.
    pub(crate) fn end(mut self, written: Option<ItemRef<'_>>) {
        self.ended = true;
        self.dram.end_write(self.ns, self.key, written, self.epoch);
    }

    /// [`DramWrite::end`] of a record value the tier keeps uncopied (see
    /// [`DramTier::end_write_kept`]).
    pub(crate) fn end_kept(mut self, raw: Arc<Vec<u8>>, at: usize, item: (Envelope, u64)) {
        self.ended = true;
        self.dram
            .end_write_kept(self.ns, self.key, raw, at, item, self.epoch);
    }

    /// Nothing was written: whatever the tier holds is still the flash's.
    fn unchanged(mut self) {
        self.ended = true;
    }
}

impl Drop for DramWrite<'_> {
    fn drop(&mut self) {
        if !self.ended {
            self.dram.end_write(self.ns, self.key, None, self.epoch);
        }
    }
}
