//! The memcached protocols, pure: bytes in, bytes out, no sockets, no
//! storage. Text (classic) commands, meta commands (mg ms md ma mn me) and
//! the binary protocol, auto-detected per connection, executed against a
//! [`Storage`] with memcached 1.6's semantics.
//!
//! Layout: [`Connection::feed`] (async: it awaits the storage's futures;
//! [`Connection::feed_ready`] polls it once for a storage that never
//! waits) detects the protocol from the first byte
//! and loops over complete requests. `text` parses and runs the classic
//! commands, `meta` the meta commands (flags parsed by `meta_flags`),
//! `binary` the binary protocol; all three run their commands through
//! `execute`, which builds read-modify-write commands (append, incr,
//! touch, ...) as one [`Storage::update`] each (atomic per key) and
//! applies memcached's expiry and delayed-flush rules. `stats` keeps per-connection counters and
//! writes the `stats` reply. Replies are composed straight into the
//! caller's output buffer; keys and values are borrowed from the input.
//!
//! Where memcached 1.6.18 behaves oddly on odd input (32-bit truncation of
//! numbers, space padding after `decr`, swallowing the payload of an
//! oversized `set`, closing on a line with no newline in 16 KiB, its read
//! buffer), this crate does the same, so replies compare byte for byte;
//! the known differences are listed in the crate's README.md.
#![forbid(unsafe_code)]

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

mod base64;
mod binary;
mod execute;
mod meta;
mod meta_flags;
mod num;
mod stats;
mod text;

#[doc(hidden)]
pub mod testing;

/// The version this server reports (`version`, `stats`, binary Version).
/// memcached 1.6.18's protocol behaviour, with a suffix naming the server.
pub const VERSION: &str = "1.6.18-nvdepot";

/// A key read ahead for a pipelined get, and what the read returned.
pub(crate) type Prefetched = (Vec<u8>, Result<Option<Item>, StorageError>);

/// One cached item as the storage holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Item {
    pub value: Vec<u8>,
    /// Opaque client flags.
    pub flags: u32,
    /// Absolute expiry time in Unix seconds; 0 = never.
    pub exptime: u32,
    /// CAS unique, assigned by the storage on every write (except
    /// [`StoreMode::Touch`] and [`StoreMode::Win`], which keep it); never 0.
    pub cas: u64,
    /// Meta-protocol marks, kept with the item.
    pub state: ItemState,
}

impl Item {
    /// Not expired at Unix time `now` (an `exptime` of 0 never expires).
    pub fn is_live(&self, now: u32) -> bool {
        self.exptime == 0 || self.exptime > now
    }
}

/// Meta-protocol marks on an item: memcached's `ITEM_STALE` and
/// `ITEM_TOKEN_SENT`, which `mg` reports as `X`, `W` and `Z`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ItemState {
    /// Invalidated (`md <key> I`, or `ms <key> I` with an older CAS): still
    /// served, marked `X`, and the first `mg` of it wins the recache.
    pub stale: bool,
    /// A client was handed the win token (`W`); later `mg`s see `Z`.
    pub token_sent: bool,
    /// Stored by `ms` with a base64 key (`b`): memcached's
    /// `ITEM_KEY_BINARY`, which makes `mg`'s `k` flag answer in base64.
    pub key_binary: bool,
}

/// Condition of a [`Storage::store`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreMode {
    /// Unconditional.
    Set,
    /// Only if absent (expired counts as absent).
    Add,
    /// Only if present (expired counts as absent).
    Replace,
    /// Only if present with this CAS unique (expired counts as absent).
    Cas(u64),
    /// As `Cas`, but the item keeps this CAS unique: touch and gat change
    /// only the expiry, and memcached leaves the CAS alone.
    Touch(u64),
    /// As `Touch`, and only if the item's win token has not been handed
    /// out (`NotStored` if it has): exactly one `mg` wins a recache.
    Win(u64),
}

impl StoreMode {
    /// The write's condition against the live item, given as its CAS
    /// unique and marks (`None`: absent or expired): `Ok` to write, or
    /// the outcome to answer instead. Every storage applies these rules.
    pub fn admits(self, live: Option<(u64, ItemState)>) -> Result<(), StoreOutcome> {
        match (self, live) {
            (StoreMode::Add, Some(_)) | (StoreMode::Replace, None) => Err(StoreOutcome::NotStored),
            (StoreMode::Cas(_) | StoreMode::Touch(_) | StoreMode::Win(_), None) => {
                Err(StoreOutcome::NotFound)
            }
            (
                StoreMode::Cas(want) | StoreMode::Touch(want) | StoreMode::Win(want),
                Some((have, _)),
            ) if want != have => Err(StoreOutcome::Exists),
            (StoreMode::Win(_), Some((_, state))) if state.token_sent => {
                Err(StoreOutcome::NotStored)
            }
            _ => Ok(()),
        }
    }

    /// The CAS unique the written item keeps (`Touch`, `Win`), if any.
    pub fn kept_cas(self) -> Option<u64> {
        match self {
            StoreMode::Touch(cas) | StoreMode::Win(cas) => Some(cas),
            _ => None,
        }
    }
}

/// Outcome of a conditional write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreOutcome {
    /// Written; the item's CAS unique (new, except for `Touch`).
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

/// An item to write, as a read-modify-write decides it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewItem {
    pub value: Vec<u8>,
    pub flags: u32,
    pub exptime: u32,
    pub state: ItemState,
    /// `Some`: the item keeps this CAS unique (touch, gat, a win);
    /// `None`: the storage assigns a new one.
    pub kept_cas: Option<u64>,
    /// memcached changes the item in place (touch, gat, a win, an
    /// invalidation, an increment that fits its length): its [`Access`]
    /// state carries over. Otherwise the write is a new item: never
    /// fetched, accessed now.
    pub in_place: bool,
}

/// An item's access state as memcached keeps it in its LRU, reported by
/// meta `mg` flags `h` and `l`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Access {
    /// Fetched since it was written (`h1`).
    pub fetched: bool,
    /// Seconds since it was last accessed (`l`).
    pub idle_secs: u32,
}

/// What a read-modify-write does with the live item ([`Storage::update`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// Leave the item as it is.
    Keep,
    /// Write this item in its place (or create it).
    Write(NewItem),
    /// Delete the item (nothing if it is absent).
    Delete,
}

/// What a [`Storage::update`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Updated {
    /// Nothing written.
    Kept,
    /// The item was written; its CAS unique.
    Stored { cas: u64 },
    /// The item was deleted.
    Deleted,
}

/// What the protocol needs from a store: `get`, an unconditional `set`,
/// and `update`, a read-modify-write that is atomic per key. Every other
/// write (add, replace, cas, append, incr, touch, delete, the meta marks)
/// is an `update` whose decision the executor makes, so the rules live in
/// one place and no write of the key can come between the read and the
/// write: a reply reflects every operation acknowledged before it on that
/// key, as in memcached.
///
/// The storage knows nothing of expiry: `get` returns expired items and
/// `update` hands them to its decision; the executor checks them against
/// `now()` ([`Item::is_live`]), treats them as absent, and may delete them
/// to reclaim their space.
///
/// `get`, `set` and `update` return futures, so that a storage whose data
/// lives on a device can wait for its IO without blocking the thread (the
/// server runs many connections per thread). A storage that answers at
/// once (from DRAM, or by blocking) returns a ready future
/// (`std::future::ready`, or an `async` block that never waits); such a
/// future completes on its first poll, and [`Connection::feed_ready`]
/// drives a connection over it without any executor. The futures need not
/// be `Send`: a connection is served by one thread.
pub trait Storage: Send + Sync {
    /// The item under `key`, if any.
    fn get(&self, key: &[u8]) -> impl Future<Output = Result<Option<Item>, StorageError>>;
    /// A hint that `key` is about to be read (one of the keys of a
    /// multi-key get, called for each before any is read): a storage may
    /// start loading what the read will touch. Changes nothing.
    fn prefetch(&self, key: &[u8]) {
        let _ = key;
    }
    /// Writes an item unconditionally (memcached `set`), without reading
    /// the old one; returns its new CAS unique.
    fn set(
        &self,
        key: &[u8],
        value: &[u8],
        flags: u32,
        exptime: u32,
        state: ItemState,
    ) -> impl Future<Output = Result<u64, StorageError>>;
    /// Read-modify-write of `key`, atomic per key: `decide` gets the stored
    /// item (`None`: absent; an expired one is passed as it is) and returns the [`Change`] to make
    /// and a result to hand back with what was done. No other write of the
    /// key comes between the read `decide` saw and the change. `decide`
    /// may be called more than once (each time with the item as it is
    /// then); only the last call's change is made.
    fn update<R>(
        &self,
        key: &[u8],
        decide: impl FnMut(Option<&Item>) -> (Change, R),
    ) -> impl Future<Output = Result<(R, Updated), StorageError>>;
    /// Writes an item with its meta-protocol marks under a condition (see
    /// [`StoreMode`]): `Set` is [`Storage::set`], the others an
    /// [`Storage::update`] applying [`StoreMode::admits`].
    fn store_item(
        &self,
        key: &[u8],
        value: &[u8],
        flags: u32,
        exptime: u32,
        state: ItemState,
        mode: StoreMode,
    ) -> impl Future<Output = Result<StoreOutcome, StorageError>> {
        async move {
            if mode == StoreMode::Set {
                let cas = self.set(key, value, flags, exptime, state).await?;
                return Ok(StoreOutcome::Stored { cas });
            }
            let now = self.now();
            let (refused, done) = self
                .update(key, |it| {
                    let live = it.filter(|it| it.is_live(now));
                    match mode.admits(live.map(|it| (it.cas, it.state))) {
                        Err(outcome) => (Change::Keep, Some(outcome)),
                        Ok(()) => {
                            let item = NewItem {
                                value: value.to_vec(),
                                flags,
                                exptime,
                                state,
                                kept_cas: mode.kept_cas(),
                                in_place: matches!(mode, StoreMode::Win(_)),
                            };
                            (Change::Write(item), None)
                        }
                    }
                })
                .await?;
            match (refused, done) {
                (Some(outcome), _) => Ok(outcome),
                (None, Updated::Stored { cas }) => Ok(StoreOutcome::Stored { cas }),
                (None, other) => Err(StorageError(format!(
                    "a conditional store ended as {other:?}"
                ))),
            }
        }
    }
    /// [`Storage::store_item`] of an item without marks.
    fn store(
        &self,
        key: &[u8],
        value: &[u8],
        flags: u32,
        exptime: u32,
        mode: StoreMode,
    ) -> impl Future<Output = Result<StoreOutcome, StorageError>> {
        self.store_item(key, value, flags, exptime, ItemState::default(), mode)
    }
    /// Deletes the live item under `key` (with `Some(cas)`, only if its
    /// unique matches): `Stored` = deleted, `NotFound`, or `Exists` (CAS
    /// mismatch).
    fn delete(
        &self,
        key: &[u8],
        cas: Option<u64>,
    ) -> impl Future<Output = Result<StoreOutcome, StorageError>> {
        async move {
            let now = self.now();
            let (outcome, _) = self
                .update(key, |it| match it.filter(|it| it.is_live(now)) {
                    None => (Change::Keep, StoreOutcome::NotFound),
                    Some(it) if cas.is_some_and(|c| c != it.cas) => {
                        (Change::Keep, StoreOutcome::Exists)
                    }
                    Some(it) => (Change::Delete, StoreOutcome::Stored { cas: it.cas }),
                })
                .await?;
            Ok(outcome)
        }
    }
    /// Invalidates every item (memcached `flush_all` without delay). O(1);
    /// synchronous (it is rare, and the engine's `clear` is one small
    /// durable write).
    fn flush_all(&self) -> Result<(), StorageError>;
    /// Current time in Unix seconds (a clock the tests can drive).
    fn now(&self) -> u32;
    /// The [`Access`] state of the item under `key`, as it was before this
    /// request's fetch (memcached reads `h` and `l` before its LRU bump).
    fn access(&self, key: &[u8]) -> Access;
    /// A fetch of the live item under `key` (memcached's LRU bump, made by
    /// get, gets, gat, touch and `mg` without `u`): the first marks it
    /// fetched; later ones make now its last access (memcached moves the
    /// time when a fetched item is hit again).
    fn fetched(&self, key: &[u8]);
    /// Extra `STAT name value` lines for the `stats` command (storage side:
    /// curr_items, bytes, limit_maxbytes, evictions, ...).
    fn stats(&self) -> Vec<(String, String)>;
}

/// Polls a future that is ready at once (one over a storage that never
/// waits) to its output, without an executor; panics if it was not ready.
pub(crate) fn poll_ready<F: Future>(fut: F) -> F::Output {
    match pin!(fut).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(out) => out,
        Poll::Pending => panic!("polled once a future over a storage that is not ready"),
    }
}

/// Limits fixed at start-up, enforced by the parser.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Longest key; memcached: 250.
    pub key_bytes_max: usize,
    /// Largest item value (`-I`); memcached default 1 MiB.
    pub item_bytes_max: usize,
}

/// memcached's per-item overhead against `-I`: the item header with its
/// CAS (48 + 8 bytes on 64-bit), the key's NUL and the value's CRLF. An
/// item's total is this plus the key, the value and, for non-zero client
/// flags, 4 bytes for them.
const ITEM_OVERHEAD_BYTES: usize = 48 + 8 + 1 + 2;

impl Limits {
    /// Whether an item of this key length, client flags and value length
    /// fits `item_bytes_max` as memcached counts it (so an item of exactly
    /// 1 MiB is refused under `-I 1m`, as memcached refuses it).
    pub fn item_fits(&self, key_len: usize, flags: u32, value_len: usize) -> bool {
        item_total(key_len, flags, value_len) <= self.item_bytes_max
    }

    /// Whether memcached would store this item in chunks (its total over
    /// the slab chunk limit: half a 1 MiB slab page, or the item limit if
    /// smaller). memcached refuses incr/decr on a chunked item as
    /// non-numeric ("too large to be a number", `do_add_delta`), whatever
    /// its bytes say.
    pub fn item_chunked(&self, key_len: usize, flags: u32, value_len: usize) -> bool {
        item_total(key_len, flags, value_len) > self.item_bytes_max.min(SLAB_CHUNK_BYTES_MAX)
    }
}

/// memcached's `slab_chunk_size_max` default: half its 1 MiB slab page.
const SLAB_CHUNK_BYTES_MAX: usize = 512 * 1024;

/// An item's size as memcached counts it against `-I`.
fn item_total(key_len: usize, flags: u32, value_len: usize) -> usize {
    let flags_len = if flags != 0 { 4 } else { 0 };
    ITEM_OVERHEAD_BYTES
        .saturating_add(key_len)
        .saturating_add(flags_len)
        .saturating_add(value_len)
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            key_bytes_max: 250,
            item_bytes_max: 1 << 20,
        }
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
    /// A pending `flush_all`: items last written at or before this Unix
    /// second are dead once it is reached (memcached's `oldest_live`); 0 =
    /// none. Shared by all connections, which call [`Storage::flush_all`]
    /// when they find it due.
    pub flush_at: AtomicU64,
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
    /// Paused after composing [`REPLY_PAUSE_BYTES`] or more of output:
    /// send it, then feed the unconsumed input again at once (it may start
    /// with a multi-get answered in part; the connection remembers where).
    pub more: bool,
}

/// Output one `feed` composes before it pauses ([`Fed::more`]), so that a
/// connection's output buffer stays near this size whatever its requests
/// ask (memcached streams a multi-get's values from its items instead).
pub const REPLY_PAUSE_BYTES: usize = 1 << 20;

/// Which protocol a connection speaks; fixed by its first byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Protocol {
    Text,
    Binary,
}

/// What one parse-and-execute step did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// The request at the start of the input is not complete yet.
    Incomplete,
    /// The request at the start of the input is answered in part (a
    /// multi-get paused at [`REPLY_PAUSE_BYTES`]); feed it again.
    Paused,
    /// A request of this many bytes was handled.
    Done(usize),
    /// Close the connection after this many bytes (memcached closes
    /// without reading further).
    Close(usize),
}

/// The protocol state of one client connection.
pub struct Connection<S: Storage> {
    pub(crate) storage: Arc<S>,
    pub(crate) stats: Arc<ServerStats>,
    pub(crate) limits: Limits,
    protocol: Option<Protocol>,
    /// Input bytes still to discard (the payload of a refused request).
    pub(crate) swallow: u64,
    /// Set once the connection must close; later input is ignored.
    closed: bool,
    /// Counters not yet added to the shared [`ServerStats`].
    pub(crate) counters: stats::Counters,
    /// Input of this `feed` from the request being run on, not yet in
    /// `counters.bytes_read` (what a `stats` adds to `bytes_read`).
    pub(crate) unread_bytes: u64,
    /// Scratch buffer for a decoded base64 key (reused, no allocation per
    /// request).
    pub(crate) key_buf: Vec<u8>,
    /// Reads of the keys of the pipelined `get`/`gets` lines after the one
    /// being executed, started together (`text::prefetch_gets`), in key
    /// order; taken by the gets as they execute, dropped by any other
    /// command and at the end of `feed`.
    pub(crate) prefetched: std::collections::VecDeque<Prefetched>,
    /// A multi-get paused ([`Step::Paused`]): the index of its next key.
    pub(crate) get_resume: Option<usize>,
}

impl<S: Storage> Connection<S> {
    /// A new connection; the protocol (text or binary) is detected from the
    /// first byte it receives.
    pub fn new(storage: Arc<S>, stats: Arc<ServerStats>, limits: Limits) -> Connection<S> {
        Connection {
            storage,
            stats,
            limits,
            protocol: None,
            swallow: 0,
            unread_bytes: 0,
            closed: false,
            counters: stats::Counters::default(),
            key_buf: Vec::new(),
            prefetched: std::collections::VecDeque::new(),
            get_resume: None,
        }
    }

    /// Parses and executes every complete request at the start of `input`,
    /// appending responses to `out` in request order. Waits for the
    /// storage's futures one request at a time, so replies stay in request
    /// order; a request served without waiting (a DRAM hit) never suspends.
    pub async fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> Fed {
        if self.closed {
            return Fed {
                consumed: input.len(),
                close: true,
                more: false,
            };
        }
        let mut pos = 0;
        let mut close = false;
        let mut more = false;
        let out_start = out.len();
        loop {
            if self.swallow > 0 {
                let n = self.swallow.min((input.len() - pos) as u64);
                pos += n as usize;
                self.swallow -= n;
                self.counters.bytes_read += n;
                if self.swallow > 0 {
                    break;
                }
            }
            if pos == input.len() {
                break;
            }
            let rest = &input[pos..];
            let protocol = match self.protocol {
                Some(p) => p,
                None => {
                    let p = if rest[0] == binary::MAGIC_REQUEST {
                        Protocol::Binary
                    } else {
                        Protocol::Text
                    };
                    self.protocol = Some(p);
                    p
                }
            };
            // memcached counts what it read from the socket before it runs
            // the commands in it; a `stats` here reports these bytes too.
            self.unread_bytes = rest.len() as u64;
            let out_before = out.len();
            let step = match protocol {
                Protocol::Text => self.text_step(rest, out).await,
                Protocol::Binary => self.binary_step(rest, out).await,
            };
            self.unread_bytes = 0;
            let n = match step {
                Step::Incomplete => break,
                Step::Paused => {
                    more = true;
                    self.counters.bytes_written += (out.len() - out_before) as u64;
                    break;
                }
                Step::Done(n) => n,
                Step::Close(n) => {
                    close = true;
                    n
                }
            };
            pos += n;
            self.counters.bytes_read += n as u64;
            self.counters.bytes_written += (out.len() - out_before) as u64;
            if close {
                break;
            }
            if out.len() - out_start >= REPLY_PAUSE_BYTES && pos < input.len() {
                more = true;
                break;
            }
        }
        debug_assert!(pos <= input.len());
        self.prefetched.clear();
        if close {
            self.closed = true;
        }
        self.counters.flush_into(&self.stats);
        Fed {
            consumed: pos,
            close,
            more,
        }
    }

    /// [`Connection::feed`] for a storage whose futures are always ready
    /// (tests, fuzzing, an in-memory store): polls it once, without an
    /// executor.
    ///
    /// Panics if the storage's future was not ready (a programmer error:
    /// such a storage needs an executor and `feed(..).await`).
    pub fn feed_ready(&mut self, input: &[u8], out: &mut Vec<u8>) -> Fed {
        poll_ready(self.feed(input, out))
    }

    /// Applies a pending `flush_all` as memcached's `oldest_live` does:
    /// items last written at or before second `flush_at` are dead once that
    /// second is reached. So every command during second `flush_at` runs
    /// [`Storage::flush_all`] first (items written in that second die too),
    /// and the first command after it flushes once more and clears the
    /// pending time. If that last flush fails it stays pending.
    #[inline]
    pub(crate) fn check_pending_flush(&self) {
        let at = self.stats.flush_at.load(Ordering::Relaxed);
        if at == 0 {
            return;
        }
        let now = u64::from(self.storage.now());
        if now < at {
            return;
        }
        if now == at {
            let _ = self.storage.flush_all();
        } else if self
            .stats
            .flush_at
            .compare_exchange(at, 0, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
            && self.storage.flush_all().is_err()
        {
            let _ =
                self.stats
                    .flush_at
                    .compare_exchange(0, at, Ordering::AcqRel, Ordering::Relaxed);
        }
    }
}
