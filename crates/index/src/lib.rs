//! The in-DRAM index of nvdepot: a two-level directory of hopscotch hash
//! tables with 8-byte entries (uDepot, FAST'19, §4.2–4.3).
//!
//! The index maps a 35-bit key *fingerprint* to the location of a record on
//! the device. It never stores keys: several keys may share a fingerprint
//! tag, so a lookup returns every candidate [`Location`] and the caller
//! reads the records to compare full keys. Mutations are conditional
//! ([`Expect`]) so that a caller who read candidates without holding a lock
//! can detect a concurrent change and retry.
//!
//! The index grows by doubling its directory incrementally (no
//! stop-the-world rehash, no IO): entries are migrated one lock region at a
//! time by the inserts that touch them.
//!
//! STUB: the API below is fixed; the implementation is in progress.

/// Where a record lives: its first grain and its size in grains.
///
/// `grains` is the 11-bit `kv_size` field: 1..=2047. The engine stores
/// `min(actual, 2047)`; 2047 means "at least 2047 grains, read the record
/// header to learn the size". 0 is reserved (uDepot's "deleted" marker).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Location {
    /// Grain address, < 2^40 - 1 (all ones marks a free entry).
    pub pba: u64,
    /// Size in grains, 1..=2047.
    pub grains: u16,
}

/// Largest storable `Location::pba` (2^40 - 2).
pub const PBA_MAX: u64 = (1 << 40) - 2;
/// Largest storable `Location::grains`.
pub const GRAINS_MAX: u16 = 2047;

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
}

impl Default for IndexConfig {
    fn default() -> Self {
        IndexConfig { table_entries_log2: 20, initial_tables_log2: 0 }
    }
}

/// The shape of an index, as saved with a checkpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub table_entries_log2: u32,
    pub tables_log2: u32,
}

/// The concurrent index. All methods take `&self`; share it with `Arc`.
pub struct Index {
    _private: (),
}

impl Index {
    /// A new, empty index.
    pub fn new(config: IndexConfig) -> Index {
        let _ = config;
        unimplemented!()
    }

    /// The 35-bit fingerprint of a 64-bit key hash (its low 35 bits).
    pub fn fingerprint(hash: u64) -> u64 {
        hash & ((1 << 35) - 1)
    }

    /// Appends to `out` the location of every entry whose fingerprint
    /// equals `fp` (same tag, same neighborhood). `out` is not cleared.
    pub fn lookup(&self, fp: u64, out: &mut Vec<Location>) {
        let _ = (fp, out);
        unimplemented!()
    }

    /// Conditionally adds or replaces an entry (see [`Expect`]). Returns the
    /// replaced location for `Expect::Replace`, `None` for `Absent`.
    /// Grows the directory (incrementally) when the neighborhood is full.
    pub fn insert(&self, fp: u64, new: Location, expect: Expect<'_>) -> Result<Option<Location>, InsertError> {
        let _ = (fp, new, expect);
        unimplemented!()
    }

    /// Removes the entry with fingerprint `fp` and location `old`; false if
    /// there is none.
    pub fn remove(&self, fp: u64, old: Location) -> bool {
        let _ = (fp, old);
        unimplemented!()
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        unimplemented!()
    }

    /// True if there are no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of DRAM held by tables, directory and locks.
    pub fn memory_bytes(&self) -> usize {
        unimplemented!()
    }

    /// Calls `f(fp, location)` for every entry. Entries inserted or removed
    /// concurrently may or may not be seen; no entry is seen twice.
    pub fn for_each(&self, f: impl FnMut(u64, Location)) {
        let _ = f;
        unimplemented!()
    }

    /// Completes any resize in progress (used before a checkpoint).
    pub fn finish_resize(&self) {
        unimplemented!()
    }

    /// Current geometry (after `finish_resize`, stable while no insert runs).
    pub fn geometry(&self) -> Geometry {
        unimplemented!()
    }

    /// Calls `f(table_number, raw_entries)` for each table in order. The
    /// caller guarantees no concurrent mutation and no resize in progress.
    pub fn dump(&self, f: impl FnMut(usize, &[u64])) {
        let _ = f;
        unimplemented!()
    }

    /// Rebuilds an index from a geometry and the raw tables `dump` gave.
    /// Validates every entry (neighborhood offsets, sizes); `Err` names the
    /// first bad one.
    pub fn load(geometry: Geometry, tables: Vec<Vec<u64>>) -> Result<Index, String> {
        let _ = (geometry, tables);
        unimplemented!()
    }
}
