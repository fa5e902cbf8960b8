//! The in-DRAM index of nvdepot: a two-level directory of hopscotch hash
//! tables with 8-byte entries (uDepot, FAST'19, §4.2–4.3).
//!
//! The index maps a key *fingerprint* (bits of the key's hash: the home
//! slot, an 8-bit tag, and as many more as the entry's pba field has room
//! for above the store's pba width) to the location of a record on the
//! device. It never stores keys: several keys may share a fingerprint, so
//! a lookup returns every candidate [`Location`] and the caller reads the
//! records to compare full keys. Mutations are conditional
//! ([`Expect`]) so that a caller who read candidates without holding a lock
//! can detect a concurrent change and retry.
//!
//! The index grows by doubling its directory incrementally (no
//! stop-the-world rehash, no IO): entries are migrated one lock region at a
//! time by the inserts that touch them and by a helper thread. An entry
//! whose neighborhood cannot be freed waits in a small per-region overflow
//! list until the tables are 92 % full, which is what lets the index reach
//! ≤ 9 bytes per key before it doubles.
//!
//! See `docs/INDEX.md` for the design: entry layout, lock regions,
//! displacement and the resize protocol with its concurrency argument.

mod count;
mod directory;
mod entry;
#[cfg(test)]
mod model;
mod slots;
pub(crate) mod sync;
mod table;

pub use directory::prefetch_lines;
use directory::{Inner, ResizeAction};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Where a record lives: its first grain and its size in grains.
///
/// `grains` is the 11-bit `kv_size` field: 1..=2047. The engine stores
/// `min(actual, 2047)`; 2047 means "at least 2047 grains, read the record
/// header to learn the size". 0 is reserved (uDepot's "deleted" marker).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Location {
    /// Grain address, at most the index's `pba_max` (2^pba_bits - 2: all
    /// ones marks a free entry).
    pub pba: u64,
    /// Size in grains, 1..=2047.
    pub grains: u16,
}

/// Largest storable `Location::pba` of an index of 40-bit pbas (2^40 - 2).
pub const PBA_MAX: u64 = (1 << 40) - 2;

/// Largest storable `Location::grains`.
pub const GRAINS_MAX: u16 = 2047;

/// The pba width an index needs for grain addresses up to `max_pba`: the
/// bits of the pba field it leaves free hold fingerprint bits instead
/// (see [`IndexConfig::pba_bits`]).
pub fn pba_bits_for(max_pba: u64) -> u32 {
    // pba_max = 2^bits - 2 >= max_pba.
    let bits = 64 - (max_pba + 1).leading_zeros();
    bits.clamp(entry::PBA_BITS_MIN, entry::PBA_BITS_MAX)
}

/// Condition for [`Index::insert`].
#[derive(Clone, Copy, Debug)]
pub enum Expect<'a> {
    /// Add a new entry, but only if every entry with the same fingerprint
    /// tag currently in the index is one of `seen` (the caller has read
    /// those records and knows they hold other keys). Otherwise a concurrent
    /// insert may have added this very key: `Conflict`.
    Absent { seen: &'a [Location] },
    /// Replace the entry with this fingerprint whose location is exactly
    /// `old`. If there is none (it was changed or removed): `Conflict`.
    Replace(Location),
    /// Add a new entry without looking at the others: the caller knows no
    /// entry of this key exists (a rebuild inserting distinct keys). Saves
    /// the lookup `Absent` needs; wrong use leaves two entries for a key.
    New,
}

/// Why a conditional insert did not happen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InsertError {
    /// The condition did not hold; re-read candidates and retry.
    Conflict,
    /// The directory is at its maximum size and the neighborhood is full.
    Full,
}

/// Sizing of the index.
#[derive(Clone, Copy, Debug)]
pub struct IndexConfig {
    /// log2 of the number of 8-byte entries in each hash table (10..=27).
    /// Default: 20 (8 MiB tables).
    pub table_entries_log2: u32,
    /// log2 of the number of tables to start with (0..=8). Default: 0.
    pub initial_tables_log2: u32,
    /// Bits of an entry's 40-bit pba field that hold the pba (8..=40):
    /// pbas up to 2^pba_bits - 2 ([`pba_bits_for`]). The other bits hold
    /// more of the fingerprint, so fewer keys share one (a store of 2^24
    /// grains: 16 more bits). Default: 40.
    pub pba_bits: u32,
}

impl Default for IndexConfig {
    fn default() -> Self {
        IndexConfig {
            table_entries_log2: 20,
            initial_tables_log2: 0,
            pba_bits: entry::PBA_BITS_MAX,
        }
    }
}

/// The shape of an index, as saved with a checkpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub table_entries_log2: u32,
    pub tables_log2: u32,
    pub pba_bits: u32,
}

/// The concurrent index. All methods take `&self`; share it with `Arc`.
pub struct Index {
    inner: Arc<Inner>,
    /// Finish a resize on a helper thread (default: true).
    background_resize: AtomicBool,
}

impl Index {
    /// A new, empty index.
    pub fn new(config: IndexConfig) -> Index {
        Index::with_tuning(
            config,
            entry::REGION_LOG2_DEFAULT,
            directory::OVERFLOW_MAX_DEFAULT,
        )
    }

    /// A new index with lock regions of `2^region_log2` entries (>= 32)
    /// instead of 8192 and at most `overflow_max` overflow entries per
    /// region before a failed insert grows the index regardless of its
    /// occupancy (default 128). Small values exercise region boundaries and
    /// resizes in tests.
    #[doc(hidden)]
    pub fn with_tuning(config: IndexConfig, region_log2: u32, overflow_max: usize) -> Index {
        let IndexConfig {
            table_entries_log2,
            initial_tables_log2,
            pba_bits,
        } = config;
        Index::from_inner(Inner::new(
            table_entries_log2,
            initial_tables_log2,
            pba_bits,
            region_log2,
            overflow_max,
        ))
    }

    fn from_inner(inner: Inner) -> Index {
        Index {
            inner: Arc::new(inner),
            background_resize: AtomicBool::new(true),
        }
    }

    /// Whether a resize started by an insert is finished by a helper thread
    /// (true, the default) or only by later operations and `finish_resize`.
    pub fn set_background_resize(&self, on: bool) {
        self.background_resize.store(on, Ordering::Relaxed);
    }

    /// True while a resize is in progress (two generations of tables).
    pub fn resize_in_progress(&self) -> bool {
        self.inner.resize_in_progress()
    }

    /// The fingerprint of a 64-bit key hash: the hash itself; an index
    /// keeps its low `8 + table_entries_log2` bits and as many above them
    /// as its pba width leaves room for.
    pub fn fingerprint(hash: u64) -> u64 {
        hash
    }

    /// A hint that `fp` is about to be looked up or inserted: starts
    /// loading the memory that operation touches first (its lock region
    /// and neighborhood) and returns at once. Prefetching a batch of
    /// fingerprints before operating on each overlaps their DRAM and TLB
    /// misses, which otherwise come one after another (a multi-get, or the
    /// requests of one event-loop turn). Changes nothing; any `fp` is fine.
    #[inline]
    pub fn prefetch(&self, fp: u64) {
        self.inner.prefetch(fp)
    }

    /// Appends to `out` the location of every entry whose fingerprint
    /// equals `fp` (same tag, same neighborhood). `out` is not cleared.
    pub fn lookup(&self, fp: u64, out: &mut Vec<Location>) {
        self.inner.lookup(fp, out)
    }

    /// Conditionally adds or replaces an entry (see [`Expect`]). Returns the
    /// replaced location for `Expect::Replace`, `None` for `Absent`.
    /// Grows the directory (incrementally) when the neighborhood is full.
    pub fn insert(
        &self,
        fp: u64,
        new: Location,
        expect: Expect<'_>,
    ) -> Result<Option<Location>, InsertError> {
        let background = self.background_resize.load(Ordering::Relaxed);
        let outcome = self.inner.insert(fp, new, expect, background);
        match outcome.resize {
            ResizeAction::None => {}
            ResizeAction::Started if !background => {}
            ResizeAction::Started => self.spawn_helper(None),
            ResizeAction::Requested(d) => self.spawn_helper(Some(d)),
        }
        outcome.result
    }

    /// Starts a thread that (optionally grows generation `grow`, then)
    /// finishes the resize. If it cannot be spawned, inserts do the work.
    fn spawn_helper(&self, grow: Option<usize>) {
        let inner = Arc::clone(&self.inner);
        let spawned = std::thread::Builder::new()
            .name("nvdepot-index-resize".into())
            .spawn(move || {
                if let Some(d) = grow {
                    inner.grow_requested(d);
                }
                inner.finish_resize(true)
            });
        if let (Err(_), Some(d)) = (spawned, grow) {
            self.inner.grow_requested(d);
        }
    }

    /// Removes the entry with fingerprint `fp` and location `old`; false if
    /// there is none.
    pub fn remove(&self, fp: u64, old: Location) -> bool {
        self.inner.remove(fp, old)
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.inner.len()
    }

    /// True if there are no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of DRAM held by tables, directory and locks.
    pub fn memory_bytes(&self) -> usize {
        self.inner.memory_bytes()
    }

    /// Calls `f(fp, location)` for every entry. Entries inserted or removed
    /// concurrently may or may not be seen; no entry is seen twice.
    pub fn for_each(&self, mut f: impl FnMut(u64, Location)) {
        self.inner.for_each(&mut f)
    }

    /// Completes any resize in progress (used before a checkpoint).
    pub fn finish_resize(&self) {
        self.inner.finish_resize(false)
    }

    /// Current geometry (after `finish_resize`, stable while no insert runs).
    pub fn geometry(&self) -> Geometry {
        self.inner.geometry()
    }

    /// Calls `f(table_number, raw_entries)` for each table in order. The
    /// caller guarantees no concurrent mutation and no resize in progress.
    ///
    /// Each table is `2^table_entries_log2 + 31` raw `HashEntry` words (the
    /// last 31 slots hold the spill of the last neighborhoods), followed by
    /// two words `[home slot, HashEntry]` per entry in the table's overflow
    /// lists (usually none or few; see docs/INDEX.md). Store the length.
    pub fn dump(&self, mut f: impl FnMut(usize, &[u64])) {
        self.inner.dump(&mut f)
    }

    /// Rebuilds an index from a geometry and the raw tables `dump` gave.
    /// Validates every entry (neighborhood offsets, sizes); `Err` names the
    /// first bad one.
    pub fn load(geometry: Geometry, tables: Vec<Vec<u64>>) -> Result<Index, String> {
        let (region_log2, overflow_max) =
            (entry::REGION_LOG2_DEFAULT, directory::OVERFLOW_MAX_DEFAULT);
        Inner::load(geometry, tables, region_log2, overflow_max).map(Index::from_inner)
    }
}

impl Drop for Index {
    fn drop(&mut self) {
        // A helper thread still migrating stops at its next region.
        self.inner.close();
    }
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index")
            .field("geometry", &self.geometry())
            .field("len", &self.len())
            .field("memory_bytes", &self.memory_bytes())
            .finish()
    }
}
