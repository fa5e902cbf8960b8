//! The memcache face's binding: [`MemcacheStorage`] is the memcache
//! protocol crate's [`Storage`] over a [`CacheStore`].
//!
//! A memcache item is one enveloped cache item: the client flags are the
//! envelope's flags, `exptime` its expiry, and the meta marks its mark bits
//! (bit 0 stale, bit 1 win token sent, bit 2 key given in base64). The
//! store runs in cache mode: when space runs out the least recently used
//! segment is evicted whole (segment LRU; see docs/ARCHITECTURE.md). Writes
//! are acknowledged when the `O_DIRECT` write completes and the device
//! cache is flushed every 100 ms (`sync = false`); with `sync` every `set`
//! is flushed before `STORED`.

use nvdepot_engine::Namespace;
use nvdepot_memcache::{Access, Change, Item, ItemState, Storage, StorageError, Updated};

use crate::envelope::{self, Envelope};
use crate::store::{self, unix_now, CacheStore, NewItem};
use crate::Error;

const STALE: u8 = 1;
const TOKEN_SENT: u8 = 2;
const KEY_BINARY: u8 = 4;

/// The cache store, seen as a memcached item store.
pub struct MemcacheStorage {
    cache: CacheStore,
    /// Items live in the store's default namespace.
    ns: Namespace,
}

fn err(e: Error) -> StorageError {
    StorageError(e.to_string())
}

fn marks(state: ItemState) -> u8 {
    (u8::from(state.stale) * STALE)
        | (u8::from(state.token_sent) * TOKEN_SENT)
        | (u8::from(state.key_binary) * KEY_BINARY)
}

/// The memcache item of a cache item; refuses marks memcache never sets.
fn item(it: envelope::Item) -> Result<Item, StorageError> {
    let m = it.envelope.marks;
    if m & !(STALE | TOKEN_SENT | KEY_BINARY) != 0 {
        return Err(StorageError(format!("item has unknown marks {m:#04x}")));
    }
    Ok(Item {
        value: it.value,
        flags: it.envelope.flags,
        exptime: it.envelope.expires,
        cas: it.cas,
        state: ItemState {
            stale: m & STALE != 0,
            token_sent: m & TOKEN_SENT != 0,
            key_binary: m & KEY_BINARY != 0,
        },
    })
}

impl MemcacheStorage {
    pub fn new(cache: CacheStore) -> MemcacheStorage {
        let ns = cache.default_namespace();
        MemcacheStorage { cache, ns }
    }

    /// The cache store underneath.
    pub fn cache(&self) -> &CacheStore {
        &self.cache
    }

    /// Writes the index checkpoint and closes (fast warm restart).
    pub fn close(self) -> Result<(), Error> {
        self.cache.close()
    }
}

/// Inside a worker's io_uring runtime the engine's async calls wait for
/// device reads, writes, the key's stripe lock and group commit on the
/// worker's ring, parking the connection's task instead of the thread;
/// outside one (tests, tools) they block.
impl Storage for MemcacheStorage {
    fn prefetch(&self, key: &[u8]) {
        self.cache.prefetch(self.ns, key);
    }

    async fn get(&self, key: &[u8]) -> Result<Option<Item>, StorageError> {
        // A hit is followed by `fetched`: overlap its cache miss with the
        // lookup's.
        self.cache.prefetch_access(self.ns, key);
        match self.cache.get(self.ns, key).await.map_err(err)? {
            Some(it) => Ok(Some(item(it)?)),
            None => Ok(None),
        }
    }

    async fn set(
        &self,
        key: &[u8],
        value: &[u8],
        flags: u32,
        exptime: u32,
        state: ItemState,
    ) -> Result<u64, StorageError> {
        let envelope = Envelope {
            flags,
            expires: exptime,
            marks: marks(state),
        };
        self.cache
            .set(self.ns, key, &[value], envelope)
            .await
            .map_err(err)
    }

    async fn update<R>(
        &self,
        key: &[u8],
        mut decide: impl FnMut(Option<&Item>) -> (Change, R),
    ) -> Result<(R, Updated), StorageError> {
        let mut refused = None;
        let (out, done) = self
            .cache
            .update(self.ns, key, |current| {
                let current = match current.map(item) {
                    Some(Err(e)) => {
                        refused = Some(e);
                        return (store::Change::Keep, None);
                    }
                    Some(Ok(it)) => Some(it),
                    None => None,
                };
                let (change, out) = decide(current.as_ref());
                let change = match change {
                    Change::Keep => store::Change::Keep,
                    Change::Delete => store::Change::Delete,
                    Change::Write(new) => store::Change::Put(NewItem {
                        envelope: Envelope {
                            flags: new.flags,
                            expires: new.exptime,
                            marks: marks(new.state),
                        },
                        value: new.value,
                        kept_cas: new.kept_cas,
                        keeps_access: new.in_place,
                    }),
                };
                (change, Some(out))
            })
            .await
            .map_err(err)?;
        if let Some(e) = refused {
            return Err(e);
        }
        let out = out.expect("decided unless refused");
        let done = match done {
            store::Updated::Kept => Updated::Kept,
            store::Updated::Deleted => Updated::Deleted,
            store::Updated::Stored { cas } => Updated::Stored { cas },
        };
        Ok((out, done))
    }

    fn flush_all(&self) -> Result<(), StorageError> {
        self.cache.clear(self.ns).map_err(err)
    }

    fn now(&self) -> u32 {
        unix_now()
    }

    fn access(&self, key: &[u8]) -> Access {
        let a = self.cache.access(self.ns, key);
        Access {
            fetched: a.fetched,
            idle_secs: a.idle_secs,
        }
    }

    fn fetched(&self, key: &[u8]) {
        self.cache.fetched(self.ns, key)
    }

    fn stats(&self) -> Vec<(String, String)> {
        let engine = self.cache.engine().stats();
        let mut v: Vec<(String, String)> = vec![
            (
                "limit_maxbytes".into(),
                self.cache.memory_bytes().to_string(),
            ),
            ("curr_items".into(), self.cache.items(self.ns).to_string()),
            ("bytes".into(), engine.live_bytes.to_string()),
            ("evictions".into(), engine.evictions.to_string()),
            (
                "reclaimed".into(),
                self.cache.expired_reclaimed().to_string(),
            ),
        ];
        v.extend(self.cache.stats());
        v
    }
}
