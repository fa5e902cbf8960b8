//! The memcached protocols, pure: bytes in, bytes out, no sockets, no
//! storage. Text (classic) commands, meta commands (mg ms md ma mn me) and
//! the binary protocol, auto-detected per connection, executed against a
//! [`Storage`] with memcached 1.6's semantics.
//!
//! STUB: the API below is fixed; the implementation is in progress.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// One cached item as the storage holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Item {
    pub value: Vec<u8>,
    /// Opaque client flags.
    pub flags: u32,
    /// Absolute expiry time in Unix seconds; 0 = never.
    pub exptime: u32,
    /// CAS unique, assigned by the storage on every write; never 0.
    pub cas: u64,
}

/// Condition of a [`Storage::store`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreMode {
    /// Unconditional.
    Set,
    /// Only if absent (expired counts as absent).
    Add,
    /// Only if present.
    Replace,
    /// Only if present with this CAS unique.
    Cas(u64),
}

/// Outcome of a conditional write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreOutcome {
    /// Written; the item's new CAS unique.
    Stored { cas: u64 },
    /// Add on a present key, or Replace/Cas on an absent one.
    NotStored,
    /// Cas with a different unique.
    Exists,
    /// Cas on an absent key.
    NotFound,
}

/// A storage failure: becomes `SERVER_ERROR <message>` on the wire.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct StorageError(pub String);

/// What the protocol needs from a store. Read-modify-write commands
/// (append, prepend, incr, decr, touch, gat) are built by the executor from
/// `get` + `store(.., Cas(old))` with retries, so a storage only needs
/// these few primitives. Expired items may be returned by `get`; the
/// executor checks `exptime` against `now()` and treats them as absent
/// (and may call `delete` to reclaim them).
pub trait Storage: Send + Sync {
    /// The item under `key`, if any.
    fn get(&self, key: &[u8]) -> Result<Option<Item>, StorageError>;
    /// Writes an item under a condition; the storage assigns the CAS.
    fn store(&self, key: &[u8], value: &[u8], flags: u32, exptime: u32, mode: StoreMode)
        -> Result<StoreOutcome, StorageError>;
    /// Deletes `key` if present (and, with `Some(cas)`, only if its unique
    /// matches). Ok(StoreOutcome::Stored{..}) = deleted; NotFound; Exists
    /// (cas mismatch).
    fn delete(&self, key: &[u8], cas: Option<u64>) -> Result<StoreOutcome, StorageError>;
    /// Invalidates every item (memcached `flush_all` without delay). O(1).
    fn flush_all(&self) -> Result<(), StorageError>;
    /// Current time in Unix seconds (a clock the tests can drive).
    fn now(&self) -> u32;
    /// Extra `STAT name value` lines for the `stats` command (storage side:
    /// curr_items, bytes, limit_maxbytes, evictions, ...).
    fn stats(&self) -> Vec<(String, String)>;
}

/// Limits fixed at start-up, enforced by the parser.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Longest key; memcached: 250.
    pub key_bytes_max: usize,
    /// Largest item value (`-I`); memcached default 1 MiB.
    pub item_bytes_max: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { key_bytes_max: 250, item_bytes_max: 1 << 20 }
    }
}

/// Counters shared by all connections of a server (memcached `stats`),
/// named as memcached names them. The server updates the connection
/// counters; the executor updates the command counters.
#[derive(Debug, Default)]
pub struct ServerStats {
    pub curr_connections: AtomicU64,
    pub total_connections: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub cmd_get: AtomicU64,
    pub cmd_set: AtomicU64,
    pub cmd_flush: AtomicU64,
    pub cmd_touch: AtomicU64,
    pub get_hits: AtomicU64,
    pub get_misses: AtomicU64,
    pub get_expired: AtomicU64,
    pub delete_hits: AtomicU64,
    pub delete_misses: AtomicU64,
    pub incr_hits: AtomicU64,
    pub incr_misses: AtomicU64,
    pub decr_hits: AtomicU64,
    pub decr_misses: AtomicU64,
    pub cas_hits: AtomicU64,
    pub cas_misses: AtomicU64,
    pub cas_badval: AtomicU64,
    pub touch_hits: AtomicU64,
    pub touch_misses: AtomicU64,
    pub bytes_read: AtomicU64,
    pub bytes_written: AtomicU64,
    /// Unix time the server started (for `uptime`).
    pub started: AtomicU64,
}

/// What [`Connection::feed`] did with the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fed {
    /// Bytes of input consumed (complete requests); keep the rest and feed
    /// it again with more bytes appended.
    pub consumed: usize,
    /// Close the connection after writing the output (`quit`, or a
    /// protocol error after which memcached closes).
    pub close: bool,
}

/// The protocol state of one client connection.
pub struct Connection<S: Storage> {
    _storage: Arc<S>,
}

impl<S: Storage> Connection<S> {
    /// A new connection; the protocol (text or binary) is detected from the
    /// first byte it receives.
    pub fn new(storage: Arc<S>, stats: Arc<ServerStats>, limits: Limits) -> Connection<S> {
        let _ = (stats, limits);
        Connection { _storage: storage }
    }

    /// Parses and executes every complete request at the start of `input`,
    /// appending responses to `out` in request order.
    pub fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> Fed {
        let _ = (input, out);
        unimplemented!()
    }
}
