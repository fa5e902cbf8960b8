//! The Redis-protocol face's binding: [`RespStore`] keeps Redis databases
//! (`SELECT n`) as engine namespaces over one [`CacheStore`].
//!
//! A Redis string is one enveloped cache item whose envelope flags hold the
//! value type (0 = string; the only type so far) and whose envelope expiry
//! is the expiry in whole seconds, rounded up (for the cache layer's
//! accounting); the item's data is the expiry in Unix milliseconds (u64 LE,
//! 0 = none, Redis's `PEXPIREAT` precision) followed by the value. Layout
//! documented in docs/FORMAT.md ("Redis items").
//!
//! Expired keys are never returned; an update that finds one removes it
//! (lazy expiry, as Redis's).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use nvdepot_engine::Namespace;

use crate::db_map::DbMap;
use crate::envelope::{Envelope, Item, ItemRef};
use crate::store::{self, CacheStore, NewItem};
use crate::Error;

/// A Redis value's type, kept as the item's envelope flags (its code).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    String = 0,
    Hash = 1,
    List = 2,
    Set = 3,
    ZSet = 4,
    Stream = 5,
}

impl Kind {
    /// The type of code `code` (the envelope flags), if it is one.
    pub fn from_code(code: u32) -> Option<Kind> {
        Some(match code {
            0 => Kind::String,
            1 => Kind::Hash,
            2 => Kind::List,
            3 => Kind::Set,
            4 => Kind::ZSet,
            5 => Kind::Stream,
            _ => return None,
        })
    }

    /// The name TYPE answers.
    pub fn name(self) -> &'static str {
        match self {
            Kind::String => "string",
            Kind::Hash => "hash",
            Kind::List => "list",
            Kind::Set => "set",
            Kind::ZSet => "zset",
            Kind::Stream => "stream",
        }
    }
}
/// Bytes of the expiry in front of a value.
const EXPIRY_BYTES: usize = 8;

/// A collection page's envelope: no flags, no expiry of its own (its
/// collection's metadata holds that).
const PAGE_ENVELOPE: Envelope = Envelope {
    flags: 0,
    expires: 0,
    marks: 0,
};

/// A live value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Value {
    /// Expiry, then the value.
    raw: Vec<u8>,
    /// The record's version: changes on every write of the key (WATCH).
    version: u64,
    kind: Kind,
}

impl Value {
    /// The value's bytes.
    pub fn data(&self) -> &[u8] {
        &self.raw[EXPIRY_BYTES..]
    }

    /// Unix milliseconds at which it expires; 0 = never.
    pub fn expire_at_ms(&self) -> u64 {
        u64::from_le_bytes(self.raw[..EXPIRY_BYTES].try_into().expect("8 bytes"))
    }

    /// Changes on every write of the key, never repeats.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The value's type.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// The same value with another expiry (EXPIRE, PERSIST, GETEX).
    pub fn with_expiry(&self, expire_at_ms: u64) -> Change {
        Change::Put {
            kind: self.kind,
            data: self.data().to_vec(),
            expire_at_ms,
        }
    }
}

/// What an update decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    Keep,
    /// Store this value of this type with this expiry (Unix ms, 0 = none).
    Put {
        kind: Kind,
        data: Vec<u8>,
        expire_at_ms: u64,
    },
    Delete,
}

/// What an update did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Updated {
    Kept,
    Deleted,
    Stored,
}

/// Buckets of write stamps ([`RespStore::write_stamp`]): 128 KiB.
const STAMP_BUCKETS: usize = 1 << 14;
/// Shards of the set of paged collections' keys ([`RespStore::mark_paged`]).
const OWNER_SHARDS: usize = 64;

/// The cache store seen as Redis databases.
pub struct RespStore {
    cache: CacheStore,
    /// Per database, the namespace of its keys and that of its
    /// collections' pages (records of the paged layout, never keys of
    /// the database), which SWAPDB exchanges.
    dbs: DbMap,
    /// Bumped by every write of a key hashing to the bucket (WATCH).
    stamps: Box<[AtomicU64]>,
    /// Writes that stored an expiry ([`RespStore::expiring_writes`]).
    expiring_writes: AtomicU64,
    /// The keys (hashed with their database) whose record may be a paged
    /// collection's metadata, with the collection's stamp: noted by every
    /// commit of a paged collection and by the page sweep for the live
    /// ones it finds, forgotten by the sweep for keys it finds holding
    /// none ([`RespStore::mark_paged`]).
    paged_owners: Box<[Mutex<HashMap<u64, u64>>]>,
    /// Keys in `paged_owners`, so that writes skip the look-up while no
    /// collection is paged.
    paged_owner_count: AtomicUsize,
    /// Writes to a key of `paged_owners` that may have left pages dead
    /// ([`RespStore::paged_owner_changes`]).
    paged_owner_changes: Arc<AtomicU64>,
    /// Passes of the page sweep finished ([`RespStore::page_sweeps`]).
    page_sweeps: AtomicU64,
    /// Told of each key removed because it expired ([`RespStore::on_expired`]).
    expired_hook: std::sync::OnceLock<KeyHook>,
    /// Told of each key written ([`RespStore::on_modified`]).
    modified_hook: std::sync::OnceLock<KeyHook>,
    /// Told of each key created ([`RespStore::on_created`]), while
    /// `track_created` is on.
    created_hook: std::sync::OnceLock<KeyHook>,
    /// Told of each key [`RespStore::get`] finds absent inside
    /// [`RespStore::report_misses`] ([`RespStore::on_missed`]).
    missed_hook: std::sync::OnceLock<KeyHook>,
    track_created: std::sync::atomic::AtomicBool,
}

/// What [`RespStore::on_expired`] and [`RespStore::on_modified`] call:
/// (database, key).
pub type KeyHook = Box<dyn Fn(usize, &[u8]) + Send + Sync>;

fn encode(kind: Kind, data: &[u8], expire_at_ms: u64) -> (Vec<u8>, Envelope) {
    let mut raw = Vec::with_capacity(EXPIRY_BYTES + data.len());
    raw.extend_from_slice(&expire_at_ms.to_le_bytes());
    raw.extend_from_slice(data);
    (raw, envelope_of(kind, expire_at_ms))
}

/// The envelope of a string expiring at `expire_at_ms` (0: never).
fn string_envelope(expire_at_ms: u64) -> Envelope {
    envelope_of(Kind::String, expire_at_ms)
}

/// The envelope of a value of type `kind` expiring at `expire_at_ms`.
fn envelope_of(kind: Kind, expire_at_ms: u64) -> Envelope {
    let expires = if expire_at_ms == 0 {
        0
    } else {
        u32::try_from(expire_at_ms.div_ceil(1000)).unwrap_or(u32::MAX)
    };
    Envelope {
        flags: kind as u32,
        expires,
        marks: 0,
    }
}

/// The live value of an item at `now_ms`; `Ok(None)` when it expired.
fn live(item: Item, now_ms: u64) -> Result<Option<Value>, Error> {
    let (kind, at) = head_of(item.borrowed())?;
    let v = Value {
        raw: item.value,
        version: item.cas,
        kind,
    };
    Ok(lives(at, now_ms).then_some(v))
}

/// Whether an item expiring at `at` (0: never) is live at `now_ms`.
fn lives(at: u64, now_ms: u64) -> bool {
    at == 0 || at > now_ms
}

/// An item's type and expiry; damage if it is not a Redis item.
fn head_of(item: ItemRef<'_>) -> Result<(Kind, u64), Error> {
    let kind = Kind::from_code(item.envelope.flags);
    match (kind, item.value.get(..EXPIRY_BYTES)) {
        (Some(kind), Some(expiry)) => Ok((
            kind,
            u64::from_le_bytes(expiry.try_into().expect("8 bytes")),
        )),
        _ => Err(Error::Envelope(format!(
            "not a Redis item (type {}, {} bytes)",
            item.envelope.flags,
            item.value.len()
        ))),
    }
}

/// The hash under which `key` of `db` is noted in
/// [`RespStore::mark_paged`]'s set.
fn owner_hash(db: usize, key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64_with_seed(key, !(db as u64))
}

/// The shape byte that opens a paged collection's metadata, its stamp
/// after it (docs/FORMAT.md "Redis collections").
pub const PAGED_SHAPE: u8 = 2;

/// The stamp of a paged collection's metadata `data`; `None` for any
/// other record.
pub fn paged_stamp(data: &[u8]) -> Option<u64> {
    (data.len() >= 9 && data[0] == PAGED_SHAPE)
        .then(|| u64::from_le_bytes(data[1..9].try_into().expect("8")))
}

/// Whether a record of `kind` holding `data` is the same collection as
/// `old`: the same type and, for a paged collection's metadata, the same
/// shape byte and stamp (its first 9 bytes, docs/FORMAT.md "Redis
/// collections"), so that its pages stay live (EXPIRE, PERSIST).
fn same_collection(old: &Value, kind: Kind, data: &[u8]) -> bool {
    kind != Kind::String
        && old.kind() == kind
        && data.len() >= 9
        && old.data().get(..9) == Some(&data[..9])
}

/// Unix time in milliseconds.
pub fn unix_now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl RespStore {
    /// Redis databases 0..`databases` over `cache`: 0 is the store's
    /// default namespace, n the namespace `db<n>` (created when missing).
    pub fn new(cache: CacheStore, databases: usize) -> Result<RespStore, Error> {
        let dbs = DbMap::open(&cache, databases)?;
        Ok(RespStore {
            cache,
            dbs,
            expiring_writes: AtomicU64::new(0),
            paged_owners: (0..OWNER_SHARDS).map(|_| Mutex::default()).collect(),
            paged_owner_count: AtomicUsize::new(0),
            paged_owner_changes: Arc::new(AtomicU64::new(0)),
            page_sweeps: AtomicU64::new(0),
            stamps: (0..STAMP_BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            expired_hook: std::sync::OnceLock::new(),
            modified_hook: std::sync::OnceLock::new(),
            created_hook: std::sync::OnceLock::new(),
            missed_hook: std::sync::OnceLock::new(),
            track_created: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Has `hook` called with (database, key) whenever `key` is written,
    /// deleted or found expired, once the change is visible to reads
    /// (Redis's `signalModifiedKey`, which client tracking invalidates
    /// on). Set once; a second hook is ignored.
    pub fn on_modified(&self, hook: KeyHook) {
        let _ = self.modified_hook.set(hook);
    }

    /// Has `hook` called for every key this store removes because it
    /// expired (found expired by a read or a write, or by the expiry
    /// sweep), after the removal: Redis's `expired` keyspace event. Set
    /// once; a second hook is ignored.
    pub fn on_expired(&self, hook: KeyHook) {
        let _ = self.expired_hook.set(hook);
    }

    /// Has `hook` called with (database, key) for every key a write
    /// creates (absent or expired before it, there after it: Redis's
    /// `new` keyspace event, published from `dbAdd`), before the write
    /// returns, while [`RespStore::track_created`] is on. Set once.
    pub fn on_created(&self, hook: KeyHook) {
        let _ = self.created_hook.set(hook);
    }

    /// Has `hook` called with (database, key) for every key
    /// [`RespStore::get`] finds absent or expired inside
    /// [`RespStore::report_misses`] (Redis's `keymiss` event, published
    /// from `lookupKeyRead`). Set once.
    pub fn on_missed(&self, hook: KeyHook) {
        let _ = self.missed_hook.set(hook);
    }

    /// Inside [`RespStore::report_misses`]: notes the miss on the first
    /// unreported naming of `key`.
    fn missed(&self, db: usize, key: &[u8]) {
        let now = REPORTING_MISSES.with(|m| {
            let mut m = m.borrow_mut();
            let budget = m.as_mut()?;
            let slot = budget
                .keys
                .iter_mut()
                .find(|(k, d)| k == key && d.is_none())?;
            slot.1 = Some(db);
            Some(budget.immediately)
        });
        if now == Some(true) {
            if let Some(hook) = self.missed_hook.get() {
                hook(db, key);
            }
        }
    }

    /// Turns the created-key hook on or off. While it is on, a blind
    /// write (SET, MSET, RENAME's destination) reads its key first, to
    /// know whether it creates it.
    pub fn track_created(&self, on: bool) {
        self.track_created.store(on, Ordering::Relaxed);
    }

    fn tracks_created(&self) -> bool {
        self.track_created.load(Ordering::Relaxed) && self.created_hook.get().is_some()
    }

    fn created(&self, db: usize, key: &[u8]) {
        if let Some(hook) = self.created_hook.get() {
            hook(db, key);
        }
    }

    /// Whether `key` is absent or expired now (a blind write's check for
    /// [`RespStore::on_created`]; `false` when not tracking).
    async fn absent_for_created(&self, db: usize, key: &[u8]) -> Result<bool, Error> {
        if !self.tracks_created() {
            return Ok(false);
        }
        self.is_absent(db, key).await
    }

    /// Whether `key` is absent or expired now (no lazy removal).
    pub async fn is_absent(&self, db: usize, key: &[u8]) -> Result<bool, Error> {
        let item = self.cache.get(self.ns(db), key).await?;
        Ok(match item {
            None => true,
            Some(item) => live(item, unix_now_ms())?.is_none(),
        })
    }

    pub fn databases(&self) -> usize {
        self.dbs.databases()
    }

    /// The cache store underneath.
    pub fn cache(&self) -> &CacheStore {
        &self.cache
    }

    /// Writes the index checkpoint and closes.
    pub fn close(self) -> Result<(), Error> {
        self.cache.close()
    }

    fn ns(&self, db: usize) -> Namespace {
        self.dbs.keys(db)
    }

    /// Keeps every database in its namespaces while held (no SWAPDB
    /// completes meanwhile): for a pass of the page sweep.
    pub fn hold_databases(&self) -> std::sync::RwLockReadGuard<'_, ()> {
        self.dbs.hold()
    }

    /// Exchanges databases `a` and `b` (SWAPDB), durably: see
    /// `db_map.rs`. The caller runs it alone (no command between), never
    /// staged.
    pub async fn swap_databases(&self, a: usize, b: usize) -> Result<(), Error> {
        self.dbs.swap(&self.cache, a, b).await
    }

    /// The live value of `key`, or `None` (absent or expired). An expired
    /// key found here is removed (Redis's lazy expiry), so it stops
    /// counting in DBSIZE.
    /// Inside [`RespStore::report_misses`], a key found absent or expired
    /// is reported ([`RespStore::on_missed`]).
    pub async fn get(&self, db: usize, key: &[u8], now_ms: u64) -> Result<Option<Value>, Error> {
        let Some(item) = self.cache.get(self.ns(db), key).await? else {
            self.missed(db, key);
            return Ok(None);
        };
        let value = live(item, now_ms)?;
        match value {
            // Its last access (OBJECT IDLETIME): one store at most per
            // key and second.
            Some(_) => self.cache.fetched(self.ns(db), key),
            // An update that keeps an expired key removes it.
            None => {
                self.update(db, key, now_ms, |_| (Change::Keep, ())).await?;
                self.missed(db, key);
            }
        }
        Ok(value)
    }

    /// What EXISTS, TTL and TYPE read of `key`: its type and expiry (Unix
    /// ms, 0 = never), or `None` (absent or expired), read without a copy
    /// of its value and without marking an access (Redis's
    /// `LOOKUP_NOTOUCH`: OBJECT IDLETIME goes on counting). An expired key
    /// is removed and a miss reported, as by [`RespStore::get`].
    pub async fn head(
        &self,
        db: usize,
        key: &[u8],
        now_ms: u64,
    ) -> Result<Option<(Kind, u64)>, Error> {
        let Some(head) = self.cache.get_with(self.ns(db), key, head_of).await? else {
            self.missed(db, key);
            return Ok(None);
        };
        let (kind, at) = head?;
        if !lives(at, now_ms) {
            self.update(db, key, now_ms, |_| (Change::Keep, ())).await?;
            self.missed(db, key);
            return Ok(None);
        }
        Ok(Some((kind, at)))
    }

    /// For a write decided outside the update step: the live value of
    /// `key` (`None`: absent or expired) and the version of its record
    /// (present even when expired), the guard of [`RespStore::commit`].
    pub async fn get_for_write(
        &self,
        db: usize,
        key: &[u8],
        now_ms: u64,
    ) -> Result<(Option<Value>, Option<u64>), Error> {
        let Some(item) = self.cache.get(self.ns(db), key).await? else {
            return Ok((None, None));
        };
        let version = item.cas;
        match live(item, now_ms)? {
            Some(v) => Ok((Some(v), Some(version))),
            // Removed first, as Redis's lookupKeyWrite does (its `expired`
            // event comes before the write's own).
            None => {
                self.update(db, key, now_ms, |_| (Change::Keep, ())).await?;
                Ok((None, None))
            }
        }
    }

    /// A page of a collection of `db` (its record's data), if stored.
    pub async fn page(&self, db: usize, page_key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        Ok(self
            .cache
            .get(self.dbs.pages(db), page_key)
            .await?
            .map(|it| it.value))
    }

    /// One crash-atomic write of a collection: `key`'s record becomes
    /// `meta` (type, data, expiry; `None` deletes it) and each page is put
    /// (`Some(data)`) or deleted, applied only if `key`'s record is still
    /// at `version` (`None`: absent), as [`RespStore::get_for_write`] gave
    /// it. `Ok(false)`: it was not (nothing written; read again).
    /// `linked` runs once reads see the change (before it is durable,
    /// with `unlock_before_durable`): the caller's lock on the collection
    /// can go there.
    pub async fn commit(
        &self,
        db: usize,
        key: &[u8],
        version: Option<u64>,
        meta: Option<(Kind, &[u8], u64)>,
        pages: &[(&[u8], Option<&[u8]>)],
        linked: impl FnOnce(),
    ) -> Result<bool, Error> {
        let expire_at_ms = meta.map_or(0, |m| m.2);
        let prefix = expire_at_ms.to_le_bytes();
        let meta_parts = meta.map(|(_, data, _)| [&prefix[..], data]);
        let page_parts: Vec<Option<[&[u8]; 1]>> =
            pages.iter().map(|(_, d)| d.map(|d| [d])).collect();
        let mut ops: Vec<crate::GuardedOp<'_>> = Vec::with_capacity(1 + pages.len());
        ops.push((
            self.ns(db),
            key,
            meta.zip(meta_parts.as_ref())
                .map(|((kind, _, at), parts)| (&parts[..], envelope_of(kind, at))),
        ));
        for ((page_key, _), parts) in pages.iter().zip(&page_parts) {
            ops.push((
                self.dbs.pages(db),
                page_key,
                parts.as_ref().map(|p| (&p[..], PAGE_ENVELOPE)),
            ));
        }
        if expire_at_ms != 0 {
            self.expiring_writes.fetch_add(1, Ordering::Relaxed);
        }
        // Noted before the change can be seen, so that a write replacing
        // it afterwards finds the key noted; counted once it is visible,
        // so that a sweep that starts after the count sees it (a commit
        // that fails counts too: what it noted may be wrong).
        let leaves_dead = self.note_commit(db, key, meta.map(|m| m.1));
        let creates = version.is_none() && meta.is_some() && self.tracks_created();
        let done = self
            .cache
            .write_guarded(&ops, (self.ns(db), key, version), || {
                self.touch(db, key);
                if creates {
                    self.created(db, key);
                }
                linked();
            })
            .await;
        if done.is_err() {
            self.touch(db, key);
        }
        if leaves_dead || !matches!(done, Ok(true)) && self.is_noted(db, key) {
            self.count_owner_change();
        }
        done
    }

    /// Writes pages of `db`'s collections as one crash-atomic batch, only
    /// while `owner`'s record is at `version` (`None`: absent), and waits
    /// until they are on the device: the leading part of a paged
    /// collection too large for one batch, written whole under a stamp no
    /// record names yet ([`RespStore::commit`] writes its metadata last).
    /// Pages no metadata names are dead: if this batch does not apply, or
    /// the metadata never follows (a crash), the page sweep drops them.
    pub async fn put_pages(
        &self,
        db: usize,
        owner: &[u8],
        version: Option<u64>,
        pages: &[(&[u8], &[u8])],
    ) -> Result<bool, Error> {
        let parts: Vec<[&[u8]; 1]> = pages.iter().map(|(_, d)| [*d]).collect();
        let ops: Vec<crate::GuardedOp<'_>> = pages
            .iter()
            .zip(&parts)
            .map(|((k, _), p)| (self.dbs.pages(db), *k, Some((&p[..], PAGE_ENVELOPE))))
            .collect();
        let done = self
            .cache
            .write_guarded(&ops, (self.ns(db), owner, version), || {})
            .await;
        if !matches!(done, Ok(true)) {
            // Pages may be left that nothing names: the next sweep runs.
            self.count_owner_change();
        }
        done
    }

    /// Whether a commit of these (key, data length) records fits one
    /// crash-atomic batch.
    pub fn commit_fits(&self, records: impl Iterator<Item = (usize, usize)>) -> bool {
        self.cache
            .batch_fits(records.map(|(k, v)| (k, v + EXPIRY_BYTES)))
    }

    /// Pages stored for `db`'s collections, live and dead (O(1)).
    pub fn page_count(&self, db: usize) -> u64 {
        self.cache.items(self.dbs.pages(db))
    }

    /// The page keys of `db`'s collections (a full scan of its pages
    /// namespace: for the sweeper that drops dead collections' pages).
    pub fn page_keys(&self, db: usize) -> Result<Vec<Vec<u8>>, Error> {
        let mut keys = Vec::new();
        self.cache
            .for_each_record(self.dbs.pages(db), |key, _| keys.push(key))?;
        Ok(keys)
    }

    /// Deletes pages `page_keys` of `db`, all or none, only while
    /// `owner`'s record is at `version` (`None`: absent): the sweeper's
    /// drop of a dead collection's pages, which a collection created or
    /// rewritten meanwhile stops.
    pub async fn drop_pages(
        &self,
        db: usize,
        page_keys: &[Vec<u8>],
        owner: &[u8],
        version: Option<u64>,
    ) -> Result<bool, Error> {
        let pages = self.dbs.pages(db);
        let ops: Vec<crate::GuardedOp<'_>> = page_keys
            .iter()
            .map(|pk| (pages, pk.as_slice(), None))
            .collect();
        self.cache
            .write_guarded(&ops, (self.ns(db), owner, version), || {})
            .await
    }

    /// Seconds since `key` was last read or written, as far as the access
    /// table knows (`CacheStore::access`).
    pub fn idle_secs(&self, db: usize, key: &[u8]) -> u32 {
        self.cache.access(self.ns(db), key).idle_secs
    }

    /// Stores the string `data` unconditionally (one blind write).
    pub async fn set(
        &self,
        db: usize,
        key: &[u8],
        data: &[u8],
        expire_at_ms: u64,
    ) -> Result<(), Error> {
        self.set_kind(db, key, Kind::String, data, expire_at_ms)
            .await
    }

    /// Stores `data` as a value of type `kind` unconditionally.
    pub async fn set_kind(
        &self,
        db: usize,
        key: &[u8],
        kind: Kind,
        data: &[u8],
        expire_at_ms: u64,
    ) -> Result<(), Error> {
        let creates = self.absent_for_created(db, key).await?;
        self.set_kind_unreported(db, key, kind, data, expire_at_ms)
            .await?;
        if creates {
            self.created(db, key);
        }
        Ok(())
    }

    /// [`RespStore::set_kind`] without telling [`RespStore::on_created`]
    /// (a caller that reports created keys in its own order).
    pub async fn set_kind_unreported(
        &self,
        db: usize,
        key: &[u8],
        kind: Kind,
        data: &[u8],
        expire_at_ms: u64,
    ) -> Result<(), Error> {
        let envelope = envelope_of(kind, expire_at_ms);
        if expire_at_ms != 0 {
            self.expiring_writes.fetch_add(1, Ordering::Relaxed);
        }
        let prefix = expire_at_ms.to_le_bytes();
        let done = self
            .cache
            .set(self.ns(db), key, &[&prefix, data], envelope)
            .await;
        // Even after a failure: the key may have been written.
        self.touch_record(db, key, true);
        done?;
        Ok(())
    }

    /// Whether [`RespStore::set_many`] takes these (key, data length)
    /// pairs as one crash-atomic batch.
    pub fn batch_fits(&self, pairs: impl Iterator<Item = (usize, usize)>) -> bool {
        self.cache
            .batch_fits(pairs.map(|(k, v)| (k, v + EXPIRY_BYTES)))
    }

    /// Stores every `(key, data)` pair without expiry as one crash-atomic
    /// batch (MSET): after a crash all are there or none. The last pair of
    /// a key counts. Callers check [`RespStore::batch_fits`] first. Keys it
    /// creates are not reported to [`RespStore::on_created`]: the caller
    /// knows their order among its own events ([`RespStore::is_absent`]).
    pub async fn set_many(&self, db: usize, pairs: &[(&[u8], &[u8])]) -> Result<(), Error> {
        let envelope = string_envelope(0);
        let prefix = 0u64.to_le_bytes();
        let parts: Vec<[&[u8]; 2]> = pairs.iter().map(|(_, data)| [&prefix[..], data]).collect();
        let items: Vec<crate::BatchItem<'_>> = pairs
            .iter()
            .zip(&parts)
            .map(|((key, _), p)| (*key, &p[..], envelope))
            .collect();
        let done = self.cache.write_many(self.ns(db), &items, &[]).await;
        // Even after a failure: the keys may have been written.
        for (key, _) in pairs {
            self.touch_record(db, key, true);
        }
        done
    }

    /// RENAME's write: `dst` gets `data` with its expiry and `src` is
    /// deleted, as one crash-atomic batch when it fits one (else the put,
    /// then the delete: a crash between leaves both keys).
    pub async fn rename(
        &self,
        db: usize,
        src: &[u8],
        dst: &[u8],
        kind: Kind,
        data: &[u8],
        expire_at_ms: u64,
    ) -> Result<(), Error> {
        let fits = self
            .cache
            .batch_fits([(dst.len(), data.len() + EXPIRY_BYTES), (src.len(), 0)].into_iter());
        if !fits {
            self.set_kind(db, dst, kind, data, expire_at_ms).await?;
            return self
                .update(db, src, 0, |_| (Change::Delete, ()))
                .await
                .map(|_| ());
        }
        let creates = self.absent_for_created(db, dst).await?;
        if expire_at_ms != 0 {
            self.expiring_writes.fetch_add(1, Ordering::Relaxed);
        }
        let prefix = expire_at_ms.to_le_bytes();
        let parts: [&[u8]; 2] = [&prefix, data];
        let items = [(dst, &parts[..], envelope_of(kind, expire_at_ms))];
        let done = self.cache.write_many(self.ns(db), &items, &[src]).await;
        self.touch_record(db, dst, true);
        self.touch_record(db, src, true);
        if creates && done.is_ok() {
            self.created(db, dst);
        }
        done
    }

    /// A number that changes whenever `key` is written, deleted or found
    /// expired (and, rarely, when another key of its bucket is): what
    /// WATCH compares at EXEC, as Redis marks a watched key's clients
    /// dirty on every change, including a change undone before EXEC (a
    /// key created and deleted again), which the key's record version
    /// alone cannot show.
    pub fn write_stamp(&self, db: usize, key: &[u8]) -> u64 {
        self.stamp(db, key).load(Ordering::Acquire)
    }

    fn stamp(&self, db: usize, key: &[u8]) -> &AtomicU64 {
        let h = xxhash_rust::xxh3::xxh3_64_with_seed(key, db as u64);
        &self.stamps[h as usize & (STAMP_BUCKETS - 1)]
    }

    fn touch(&self, db: usize, key: &[u8]) {
        self.stamp(db, key).fetch_add(1, Ordering::AcqRel);
        if let Some(hook) = self.modified_hook.get() {
            hook(db, key);
        }
    }

    /// [`RespStore::touch`] for a write of `key`'s record other than a
    /// collection's commit; `replaces`: it may have replaced or deleted a
    /// paged collection (every such write but one keeping the
    /// collection, as EXPIRE does).
    fn touch_record(&self, db: usize, key: &[u8], replaces: bool) {
        self.touch(db, key);
        if replaces && self.is_noted(db, key) {
            self.count_owner_change();
        }
    }

    /// Counts a write that may have left pages dead in
    /// [`RespStore::paged_owner_changes`] once it is visible: now, or for
    /// a staged write once its staging is committed (a sweep between the
    /// two would find the pages still live).
    fn count_owner_change(&self) {
        match crate::staging::current() {
            Some(staging) => {
                let changes = Arc::clone(&self.paged_owner_changes);
                staging.on_committed(move || {
                    changes.fetch_add(1, Ordering::AcqRel);
                });
            }
            None => {
                self.paged_owner_changes.fetch_add(1, Ordering::AcqRel);
            }
        }
    }

    fn owners(&self, db: usize, key: &[u8]) -> (u64, MutexGuard<'_, HashMap<u64, u64>>) {
        // By the namespace pair, which a SWAPDB does not change.
        let h = owner_hash(self.dbs.pair(db), key);
        let shard = &self.paged_owners[(h >> 58) as usize % OWNER_SHARDS];
        // A map of hashes to stamps, never half changed.
        (h, shard.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn is_noted(&self, db: usize, key: &[u8]) -> bool {
        self.paged_owner_count.load(Ordering::Acquire) > 0 && {
            let (h, owners) = self.owners(db, key);
            owners.contains_key(&h)
        }
    }

    /// A collection's commit writing `meta` (`None`: deleting the key):
    /// notes its stamp if paged; whether the collection noted before
    /// may leave pages behind (it is gone, or stamped otherwise).
    fn note_commit(&self, db: usize, key: &[u8], meta: Option<&[u8]>) -> bool {
        let stamp = meta.and_then(paged_stamp);
        if stamp.is_none() && self.paged_owner_count.load(Ordering::Acquire) == 0 {
            return false;
        }
        let (h, mut owners) = self.owners(db, key);
        let old = match stamp {
            Some(s) => owners.insert(h, s),
            None => owners.get(&h).copied(),
        };
        if old.is_none() && stamp.is_some() {
            self.paged_owner_count.fetch_add(1, Ordering::AcqRel);
        }
        old.is_some_and(|old| Some(old) != stamp)
    }

    /// Notes that `key`'s record is a paged collection's metadata of
    /// stamp `stamp`, so that a write replacing or deleting it counts in
    /// [`RespStore::paged_owner_changes`]. For the page sweep, holding the
    /// collection's key lock (as every commit does): before it reads the
    /// record (any stamp), then with the record's.
    pub fn mark_paged(&self, db: usize, key: &[u8], stamp: u64) {
        let (h, mut owners) = self.owners(db, key);
        if owners.insert(h, stamp).is_none() {
            self.paged_owner_count.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// Notes that `key`'s record is no paged collection's (the page
    /// sweep, holding the key's lock, found it so).
    pub fn forget_paged(&self, db: usize, key: &[u8]) {
        let (h, mut owners) = self.owners(db, key);
        if owners.remove(&h).is_some() {
            self.paged_owner_count.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// A count that moves, once the write is visible, whenever a write
    /// replaces or deletes the record of a key noted as a paged
    /// collection's (by a commit, or [`RespStore::mark_paged`]) other than
    /// by keeping the collection (its next step, EXPIRE): while it stands
    /// still, no pages died since the last sweep, and the page sweep has
    /// nothing to do.
    pub fn paged_owner_changes(&self) -> u64 {
        self.paged_owner_changes.load(Ordering::Acquire)
    }

    /// Counts a pass of the page sweep over one database.
    pub fn count_page_sweep(&self) {
        self.page_sweeps.fetch_add(1, Ordering::Relaxed);
    }

    /// Passes of the page sweep so far (`INFO nvdepot` `page_sweeps`).
    pub fn page_sweeps(&self) -> u64 {
        self.page_sweeps.load(Ordering::Relaxed)
    }

    /// Removes `key` (DEL): whether it was live (an expired one is
    /// removed too, but does not count).
    pub async fn delete(&self, db: usize, key: &[u8], now_ms: u64) -> Result<bool, Error> {
        let (live, _) = self
            .update(db, key, now_ms, |cur| match cur {
                Some(_) => (Change::Delete, true),
                None => (Change::Keep, false),
            })
            .await?;
        Ok(live)
    }

    /// One atomic read-modify-write of `key`: `decide` sees the live value
    /// (an expired one is absent, and is removed if `decide` keeps it).
    pub async fn update<R>(
        &self,
        db: usize,
        key: &[u8],
        now_ms: u64,
        mut decide: impl FnMut(Option<&Value>) -> (Change, R),
    ) -> Result<(R, Updated), Error> {
        let mut refused = None;
        let mut found_expired = false;
        let mut was_live = false;
        // Whether the change may leave a paged collection's pages dead.
        let mut replaces = true;
        let (out, done) = self
            .cache
            .update(self.ns(db), key, |current| {
                let present = current.is_some();
                let value = match current.map(|it| live(it, now_ms)) {
                    Some(Err(e)) => {
                        refused = Some(e);
                        return (store::Change::Keep, None);
                    }
                    Some(Ok(v)) => v,
                    None => None,
                };
                found_expired = present && value.is_none();
                was_live = value.is_some();
                let (change, out) = decide(value.as_ref());
                let change = match change {
                    // An expired key the decision leaves alone goes now.
                    Change::Keep if present && value.is_none() => store::Change::Delete,
                    Change::Keep => store::Change::Keep,
                    Change::Delete => store::Change::Delete,
                    Change::Put {
                        kind,
                        data,
                        expire_at_ms,
                    } => {
                        if expire_at_ms != 0 {
                            self.expiring_writes.fetch_add(1, Ordering::Relaxed);
                        }
                        replaces = !value
                            .as_ref()
                            .is_some_and(|v| same_collection(v, kind, &data));
                        let (raw, envelope) = encode(kind, &data, expire_at_ms);
                        store::Change::Put(NewItem {
                            value: raw,
                            envelope,
                            kept_cas: None,
                            keeps_access: false,
                        })
                    }
                };
                (change, Some(out))
            })
            .await
            .inspect_err(|_| self.touch_record(db, key, true))?;
        if let Some(e) = refused {
            return Err(e);
        }
        if !matches!(done, store::Updated::Kept) {
            self.touch_record(db, key, replaces);
            if found_expired {
                if let Some(hook) = self.expired_hook.get() {
                    hook(db, key);
                }
            }
            if !was_live && matches!(done, store::Updated::Stored { .. }) && self.tracks_created() {
                self.created(db, key);
            }
        }
        let done = match done {
            store::Updated::Kept => Updated::Kept,
            store::Updated::Deleted => Updated::Deleted,
            store::Updated::Stored { .. } => Updated::Stored,
        };
        Ok((out.expect("decided unless refused"), done))
    }

    /// Keys stored in `db`, expired ones not yet removed included.
    pub fn dbsize(&self, db: usize) -> u64 {
        self.cache.items(self.ns(db))
    }

    /// Removes every key of `db` (and its collections' pages).
    pub fn flushdb(&self, db: usize) -> Result<(), Error> {
        let done = self
            .cache
            .clear(self.ns(db))
            .and_then(|()| self.cache.clear(self.dbs.pages(db)));
        // Every key of the database changed (stamps are not per database:
        // the others' watchers abort too, which costs only a retry).
        for s in self.stamps.iter() {
            s.fetch_add(1, Ordering::AcqRel);
        }
        done
    }

    /// Every stored key of `db` with its type and expiry (Unix ms, 0 =
    /// none), in log order: a full scan of the database's records.
    fn scan(&self, db: usize, mut f: impl FnMut(Vec<u8>, Kind, u64)) -> Result<(), Error> {
        self.cache.for_each_record(self.ns(db), |key, raw| {
            if raw.len() < crate::ENVELOPE_BYTES + EXPIRY_BYTES {
                return;
            }
            let flags = u32::from_le_bytes(raw[..4].try_into().expect("4 bytes"));
            let Some(kind) = Kind::from_code(flags) else {
                return;
            };
            let at = u64::from_le_bytes(
                raw[crate::ENVELOPE_BYTES..crate::ENVELOPE_BYTES + EXPIRY_BYTES]
                    .try_into()
                    .expect("8 bytes"),
            );
            f(key, kind, at);
        })
    }

    /// The live keys of `db` at `now_ms`, in log order (a full scan: for
    /// KEYS and SCAN).
    pub fn keys(&self, db: usize, now_ms: u64) -> Result<Vec<Vec<u8>>, Error> {
        Ok(self
            .typed_keys(db, now_ms)?
            .into_iter()
            .map(|(k, _)| k)
            .collect())
    }

    /// [`RespStore::keys`] with each key's type (SCAN … TYPE).
    pub fn typed_keys(&self, db: usize, now_ms: u64) -> Result<Vec<(Vec<u8>, Kind)>, Error> {
        let mut keys = Vec::new();
        self.scan(db, |key, kind, at| {
            if at == 0 || at > now_ms {
                keys.push((key, kind));
            }
        })?;
        Ok(keys)
    }

    /// For the background expiry sweep (a full scan): the keys of `db`
    /// expired at `now_ms`, and how many live keys have an expiry.
    pub fn expiry_scan(&self, db: usize, now_ms: u64) -> Result<(Vec<Vec<u8>>, u64), Error> {
        let (mut expired, mut live_with_ttl) = (Vec::new(), 0);
        self.scan(db, |key, _, at| {
            if at != 0 && at <= now_ms {
                expired.push(key);
            } else if at != 0 {
                live_with_ttl += 1;
            }
        })?;
        Ok((expired, live_with_ttl))
    }

    /// Writes with an expiry so far (the sweep skips its scan while none
    /// came and none is pending).
    pub fn expiring_writes(&self) -> u64 {
        self.expiring_writes.load(Ordering::Relaxed)
    }
}

/// The keys a command names, one entry per time it names each, with the
/// database of a miss found for it.
/// With `immediately`, a miss is reported when found (a write's lookups,
/// sequential, before its own events) rather than when the command is
/// done (a read's, which may finish in any order).
struct MissBudget {
    immediately: bool,
    keys: Vec<(Vec<u8>, Option<usize>)>,
}

thread_local! {
    /// While a future wrapped by [`RespStore::report_misses`] is polled:
    /// its budget.
    static REPORTING_MISSES: std::cell::RefCell<Option<MissBudget>> =
        const { std::cell::RefCell::new(None) };
}

impl RespStore {
    /// Runs `future`, reporting (when `on`, to [`RespStore::on_missed`])
    /// the keys of `keys` that [`RespStore::get`] finds absent or
    /// expired while it is polled: a read command's key misses, Redis's
    /// `keymiss` events (`notify-keyspace-events m`). Reported when the
    /// future is done, in the order `keys` names them (a read command's
    /// reads may finish in any order) — or, `immediately`, when found (a
    /// write's, before its own events) — each at most as many times as
    /// `keys` names it (a command here may read a key twice: its kind,
    /// then its pages); keys it does not name (pages) never.
    pub fn report_misses<'a, F: std::future::Future>(
        &'a self,
        on: bool,
        immediately: bool,
        keys: &[&[u8]],
        future: F,
    ) -> ReportMisses<'a, F> {
        let budget = on.then(|| MissBudget {
            immediately,
            keys: keys.iter().map(|k| (k.to_vec(), None)).collect(),
        });
        ReportMisses {
            store: self,
            budget,
            future,
        }
    }
}

pin_project_lite::pin_project! {
    /// The future of [`RespStore::report_misses`].
    pub struct ReportMisses<'a, F> {
        store: &'a RespStore,
        budget: Option<MissBudget>,
        #[pin]
        future: F,
    }
}

impl<F: std::future::Future> std::future::Future for ReportMisses<'_, F> {
    type Output = F::Output;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<F::Output> {
        let this = self.project();
        if this.budget.is_none() {
            return this.future.poll(cx);
        }
        let outer = REPORTING_MISSES.with(|m| m.replace(this.budget.take()));
        let polled = this.future.poll(cx);
        *this.budget = REPORTING_MISSES.with(|m| m.replace(outer));
        if polled.is_ready() {
            if let (Some(budget), Some(hook)) = (this.budget.take(), this.store.missed_hook.get()) {
                if !budget.immediately {
                    for (key, db) in budget.keys {
                        if let Some(db) = db {
                            hook(db, &key);
                        }
                    }
                }
            }
        }
        polled
    }
}
