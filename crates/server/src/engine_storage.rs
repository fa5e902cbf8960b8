//! The memcache face's [`Storage`] over the engine.
//!
//! The item layout below is also documented, as part of the on-device
//! format, in docs/FORMAT.md ("Memcache items"); keep the two in step.
//!
//! Every item is one engine record in the default namespace. The value is
//! prefixed with the memcached metadata, so nothing but the index entry
//! lives in DRAM:
//!
//! ```text
//!  0  u32  client flags (LE)
//!  4  u32  absolute expiry, Unix seconds (0 = never)
//!  8  u64  CAS unique kept by a touch (LE), or 0
//! 16  u8   meta marks: bit 0 stale, bit 1 win token sent, bit 2 key
//!           given in base64 when stored (ms b); other bits 0
//! 17  [u8; 3] reserved, 0
//! 20  ...  the item's data
//! ```
//!
//! The CAS unique is the record's version (its sequence number): it changes
//! on every write, never repeats, and survives restarts. A touch (or gat)
//! rewrites the item with a new expiry but, as memcached, the same CAS: the
//! record then carries the CAS it keeps (a version of an earlier record of
//! the key, so still unique), and conditional writes compare the client's
//! CAS with it while conditioning the engine write on the record version.
//! The store runs in cache mode: when space runs out the least recently
//! used segment is evicted whole (segment LRU; see docs/ARCHITECTURE.md). By
//! default writes are acknowledged when the `O_DIRECT` write completes and
//! the device cache is flushed every 100 ms (`sync = false`); with `sync`
//! every `set` is flushed before `STORED`.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use nvdepot_engine::{self as engine, Namespace, Options, PutMode, Store};
use nvdepot_memcache::{Change, Item, ItemState, Storage, StorageError, Updated};

use crate::hot_cache::HotCache;

const META_BYTES: usize = 20;
const STALE: u8 = 1;
const TOKEN_SENT: u8 = 2;
const KEY_BINARY: u8 = 4;

/// The engine, seen as a memcached item store.
pub struct EngineStorage {
    store: Store,
    /// The DRAM tier (`-m`): hot items, so a hit costs no IO.
    hot: HotCache,
    ns: Namespace,
    limit_maxbytes: u64,
    expired_reclaimed: AtomicU64,
}

fn err(e: nvdepot_engine::Error) -> StorageError {
    StorageError(e.to_string())
}

/// The record value of an item; `kept_cas` 0 = the record's version.
fn encode(value: &[u8], flags: u32, exptime: u32, kept_cas: u64, state: ItemState) -> Vec<u8> {
    let mut v = Vec::with_capacity(META_BYTES + value.len());
    v.extend_from_slice(&flags.to_le_bytes());
    v.extend_from_slice(&exptime.to_le_bytes());
    v.extend_from_slice(&kept_cas.to_le_bytes());
    let marks = (u8::from(state.stale) * STALE)
        | (u8::from(state.token_sent) * TOKEN_SENT)
        | (u8::from(state.key_binary) * KEY_BINARY);
    v.extend_from_slice(&[marks, 0, 0, 0]);
    v.extend_from_slice(value);
    v
}

/// The item in a record value of version `version`.
fn decode(mut raw: Vec<u8>, version: u64) -> Result<Item, StorageError> {
    if raw.len() < META_BYTES {
        return Err(StorageError(format!(
            "item of {} bytes lacks its {META_BYTES}-byte header",
            raw.len()
        )));
    }
    let flags = u32::from_le_bytes(raw[0..4].try_into().expect("4 bytes"));
    let exptime = u32::from_le_bytes(raw[4..8].try_into().expect("4 bytes"));
    let kept = u64::from_le_bytes(raw[8..16].try_into().expect("8 bytes"));
    let marks = raw[16];
    if marks & !(STALE | TOKEN_SENT | KEY_BINARY) != 0 || raw[17..20] != [0, 0, 0] {
        return Err(StorageError(format!(
            "item header has unknown marks {:#04x} {:?}",
            marks,
            &raw[17..20]
        )));
    }
    raw.drain(..META_BYTES);
    Ok(Item {
        value: raw,
        flags,
        exptime,
        cas: if kept != 0 { kept } else { version },
        state: ItemState {
            stale: marks & STALE != 0,
            token_sent: marks & TOKEN_SENT != 0,
            key_binary: marks & KEY_BINARY != 0,
        },
    })
}

fn unix_now() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as u32)
        .unwrap_or(0)
}

impl EngineStorage {
    /// Opens (or creates, `size_bytes` large) the store at `data` in cache
    /// mode with the memcache face's defaults. `memory_mb` is memcached's
    /// `-m`, reported as `limit_maxbytes`.
    pub fn open(
        data: &Path,
        size_bytes: u64,
        memory_mb: u64,
    ) -> Result<EngineStorage, nvdepot_engine::Error> {
        let opts = Self::default_options().create_bytes(size_bytes);
        Self::open_with_options(data, opts, memory_mb)
    }

    /// The engine options [`EngineStorage::open`] uses: cache mode, 250-byte
    /// keys, writes flushed every 100 ms. Adjust and pass to
    /// [`EngineStorage::open_with_options`].
    pub fn default_options() -> Options {
        Options {
            cache_mode: true,
            sync: false,
            flush_interval_ms: 100,
            key_bytes_max: 250,
            progress: true,
            ..Options::default()
        }
    }

    /// Opens with explicit engine options (`cache_mode` should stay on).
    pub fn open_with_options(
        data: &Path,
        opts: Options,
        memory_mb: u64,
    ) -> Result<EngineStorage, nvdepot_engine::Error> {
        let store = Store::open(data, &opts)?;
        let ns = store.default_namespace();
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
        Ok(EngineStorage {
            store,
            hot: HotCache::new((memory_mb as usize) << 20),
            ns,
            limit_maxbytes: memory_mb << 20,
            expired_reclaimed: AtomicU64::new(0),
        })
    }

    /// The engine underneath (for stats and tests).
    pub fn engine(&self) -> &Store {
        &self.store
    }

    /// Largest item value the engine accepts (memcache `-I` must not
    /// exceed it): the engine's value limit less the 8-byte header.
    pub fn item_bytes_max(&self) -> usize {
        self.store.value_bytes_max().saturating_sub(META_BYTES)
    }

    /// Writes the index checkpoint and closes (fast warm restart).
    pub fn close(self) -> Result<(), nvdepot_engine::Error> {
        self.store.close()
    }
}

/// A flash write's bracket in the DRAM tier ([`HotCache::begin_write`] ..
/// [`HotCache::end_write`]). If the write's future is dropped before it
/// ends (a panicking connection), the key is dropped from the tier, since
/// the flash may or may not hold the new item.
struct HotWrite<'a> {
    hot: &'a HotCache,
    key: &'a [u8],
    epoch: u64,
    ended: bool,
}

impl<'a> HotWrite<'a> {
    fn begin(hot: &'a HotCache, key: &'a [u8]) -> HotWrite<'a> {
        let epoch = hot.begin_write(key);
        HotWrite {
            hot,
            key,
            epoch,
            ended: false,
        }
    }

    /// Caches `written` (the item now on flash) unless another write
    /// overtook this one; `None` drops the key.
    fn end(mut self, written: Option<&Item>) {
        self.ended = true;
        self.hot.end_write(self.key, written, self.epoch);
    }

    /// Nothing was written: whatever the tier holds is still the flash's.
    fn unchanged(mut self) {
        self.ended = true;
    }
}

impl Drop for HotWrite<'_> {
    fn drop(&mut self) {
        if !self.ended {
            self.hot.end_write(self.key, None, self.epoch);
        }
    }
}

/// The engine calls. Inside a worker's io_uring runtime the engine's async
/// twins wait for device reads, writes, the key's stripe lock and group
/// commit on the worker's ring, parking the connection's task instead of
/// the thread; outside one (tests, tools) they block.
impl Storage for EngineStorage {
    /// A DRAM-tier hit answers on the first poll, without IO; a miss reads
    /// the device (through the ring inside a worker) and fills the tier.
    async fn get(&self, key: &[u8]) -> Result<Option<Item>, StorageError> {
        let epoch = match self.hot.get(key) {
            Ok(item) => return Ok(Some(item)),
            Err(epoch) => epoch,
        };
        match self
            .store
            .get_versioned_async(self.ns, key)
            .await
            .map_err(err)?
        {
            Some((raw, cas)) => {
                let item = decode(raw, cas)?;
                self.hot.fill(key, &item, epoch);
                Ok(Some(item))
            }
            None => Ok(None),
        }
    }

    /// One blind engine put (no read); write-through to the DRAM tier, as
    /// the item just stored is the hottest there is.
    async fn set(
        &self,
        key: &[u8],
        value: &[u8],
        flags: u32,
        exptime: u32,
        state: ItemState,
    ) -> Result<u64, StorageError> {
        let write = HotWrite::begin(&self.hot, key);
        let raw = encode(value, flags, exptime, 0, state);
        let put = self
            .store
            .put_versioned_async(self.ns, key, &raw, PutMode::Upsert)
            .await;
        let cas = match put {
            Ok(Some(cas)) => cas,
            Ok(None) => unreachable!("an upsert always writes"),
            Err(e) => {
                write.end(None);
                return Err(err(e));
            }
        };
        let item = Item {
            value: value.to_vec(),
            flags,
            exptime,
            cas,
            state,
        };
        write.end(Some(&item));
        Ok(cas)
    }

    /// The engine's update step: under the key's stripe lock, one device
    /// read of the record, the decision, and at most one durable write.
    async fn update<R>(
        &self,
        key: &[u8],
        mut decide: impl FnMut(Option<&Item>) -> (Change, R),
    ) -> Result<(R, Updated), StorageError> {
        let write = HotWrite::begin(&self.hot, key);
        let mut expired = false;
        let result = self
            .store
            .update_async(self.ns, key, |current| {
                let item = match current.map(|c| decode(c.value.to_vec(), c.version)) {
                    Some(Err(e)) => return (engine::Change::Keep, Err(e)),
                    Some(Ok(item)) => Some(item),
                    None => None,
                };
                expired = item.as_ref().is_some_and(|it| !it.is_live(unix_now()));
                let (change, out) = decide(item.as_ref());
                match change {
                    Change::Keep => (engine::Change::Keep, Ok((out, None))),
                    Change::Delete => (engine::Change::Delete, Ok((out, None))),
                    Change::Write(new) => {
                        let kept = new.kept_cas.unwrap_or(0);
                        let raw = encode(&new.value, new.flags, new.exptime, kept, new.state);
                        (engine::Change::Put(raw), Ok((out, Some(new))))
                    }
                }
            })
            .await;
        let (decided, done) = match result {
            Ok(r) => r,
            Err(e) => {
                write.end(None);
                return Err(err(e));
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
                let item = Item {
                    value: new.value,
                    flags: new.flags,
                    exptime: new.exptime,
                    cas,
                    state: new.state,
                };
                write.end(Some(&item));
                Updated::Stored { cas }
            }
            (engine::Updated::Put(_), None) => unreachable!("a put is decided with its item"),
        };
        Ok((out, done))
    }

    fn flush_all(&self) -> Result<(), StorageError> {
        let result = self.store.clear(self.ns).map_err(err);
        self.hot.clear();
        result
    }

    fn now(&self) -> u32 {
        unix_now()
    }

    fn stats(&self) -> Vec<(String, String)> {
        let s = self.store.stats();
        // What the last crash recovery found (cache mode drops damaged
        // records and goes on; each stretch was also logged at open).
        let damage = &self.store.open_report().damage;
        let lost = damage
            .iter()
            .filter(|d| d.kind == engine::DamageKind::Lost)
            .count();
        let torn = damage.len() - lost;
        let mut v: Vec<(String, String)> = vec![
            ("limit_maxbytes".into(), self.limit_maxbytes.to_string()),
            ("curr_items".into(), self.store.count(self.ns).to_string()),
            ("bytes".into(), s.live_bytes.to_string()),
            ("evictions".into(), s.evictions.to_string()),
            (
                "reclaimed".into(),
                self.expired_reclaimed.load(Ordering::Relaxed).to_string(),
            ),
        ];
        let ours = [
            ("nvdepot_capacity_bytes", s.capacity_bytes.to_string()),
            ("nvdepot_segments_total", s.segments_total.to_string()),
            ("nvdepot_segments_free", s.segments_free.to_string()),
            (
                "nvdepot_device_bytes_written",
                s.device_bytes_written.to_string(),
            ),
            (
                "nvdepot_user_bytes_written",
                s.user_bytes_written.to_string(),
            ),
            (
                "nvdepot_write_amplification",
                format!("{:.3}", s.write_amplification),
            ),
            ("nvdepot_flushes", s.flushes.to_string()),
            ("nvdepot_evictions_logged", s.evictions_logged.to_string()),
            ("nvdepot_recovery_torn_stretches", torn.to_string()),
            ("nvdepot_recovery_damaged_stretches", lost.to_string()),
            ("nvdepot_dram_items", self.hot.items().to_string()),
            ("nvdepot_dram_bytes", self.hot.bytes().to_string()),
            (
                "nvdepot_dram_hits",
                self.hot.stats.hits.load(Ordering::Relaxed).to_string(),
            ),
            (
                "nvdepot_dram_misses",
                self.hot.stats.misses.load(Ordering::Relaxed).to_string(),
            ),
            ("nvdepot_index_bytes", s.index_memory_bytes.to_string()),
            (
                "nvdepot_index_bytes_per_key",
                format!("{:.2}", s.index_bytes_per_key),
            ),
        ];
        v.extend(ours.into_iter().map(|(k, val)| (k.to_string(), val)));
        v
    }
}
