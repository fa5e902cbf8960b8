//! The tables `bench index` drives, behind one trait: nvdepot's index
//! (one operation at a time or in prefetched batches), dashmap, and
//! hashbrown behind a lock, with the memory arithmetic of the last two.

use std::hash::{BuildHasherDefault, Hasher};

use dashmap::DashMap;
use nvdepot_index::{Expect, Index, IndexConfig, InsertError, Location};
use parking_lot::RwLock;

/// Bytes of a hashbrown table of `(u64, u64)` with this capacity: buckets
/// (a power of two, at most 7/8 full) of 16 bytes plus one control byte
/// each, and one group (16 bytes) of trailing control bytes.
pub(super) fn hashbrown_bytes(capacity: usize) -> usize {
    if capacity == 0 {
        return 0;
    }
    let buckets = if capacity < 8 {
        (capacity + 1).next_power_of_two()
    } else {
        (capacity * 8 / 7).next_power_of_two()
    };
    buckets * 17 + 16
}

/// dashmap's default shard count (its `default_shard_amount`).
fn dashmap_shards() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (cores * 4).next_power_of_two()
}

/// A hasher that returns the `u64` it is given: the keys are hashes.
#[derive(Default, Clone, Copy)]
pub struct Identity(u64);

impl Hasher for Identity {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used for u64 keys; anything else folds in.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

pub(super) type PassThrough = BuildHasherDefault<Identity>;

/// What a benchmark thread does to a table.
pub(super) trait Table: Sync {
    /// Inserts `key -> value` (new); returns the fingerprint conflicts met.
    fn insert(&self, key: u64, value: u64, scratch: &mut Vec<Location>) -> u64;
    /// True if `key` maps to `value`.
    fn lookup(&self, key: u64, value: u64, scratch: &mut Vec<Location>) -> bool;
    /// Finishes deferred work (nvdepot's resize in flight).
    fn settle(&self) {}
    /// Bytes held (as in [`super::Run::bytes_per_key`]) and entries.
    fn bytes_and_len(&self) -> (usize, usize);
    /// Operations per batch: above 1, the keys of a batch are passed to
    /// [`Table::prefetch`] before its operations run.
    fn batch(&self) -> usize {
        1
    }
    /// A hint that `key` comes soon.
    fn prefetch(&self, _key: u64) {}
}

/// Operations per batch of [`super::Structure::NvdepotPrefetch`]: about the keys
/// of a multi-get, or the requests one event-loop turn reads.
pub const PREFETCH_BATCH: usize = 16;

/// nvdepot's index, one operation at a time (`batch` 1) or in
/// prefetched batches ([`super::Structure::NvdepotPrefetch`]).
pub(super) struct NvdepotTable {
    pub(super) index: Index,
    batch: usize,
}

impl NvdepotTable {
    /// Pbas as wide as the engine makes them for a store of `keys`
    /// records of 4.5 KiB (nine 512-byte grains) kept half full; the rest
    /// of the pba field holds fingerprint bits, as in the engine.
    pub(super) fn new(
        table_entries_log2: u32,
        initial_tables_log2: u32,
        keys: u64,
        batch: usize,
    ) -> NvdepotTable {
        NvdepotTable {
            index: Index::new(IndexConfig {
                table_entries_log2,
                initial_tables_log2,
                pba_bits: nvdepot_index::pba_bits_for(keys.saturating_mul(18)),
            }),
            batch,
        }
    }
}

fn location(value: u64) -> Location {
    Location {
        pba: value,
        grains: 1,
    }
}

impl Table for NvdepotTable {
    #[inline]
    fn insert(&self, key: u64, value: u64, scratch: &mut Vec<Location>) -> u64 {
        let fp = Index::fingerprint(key);
        // A new key is inserted unseen (`seen: []`), which the index checks
        // against its neighborhood anyway, like a map's insert. A key whose
        // stored fingerprint bits are taken conflicts: the engine would read the
        // other record, see a different key, and insert with it as `seen`.
        match self
            .index
            .insert(fp, location(value), Expect::Absent { seen: &[] })
        {
            Ok(_) => 0,
            Err(InsertError::Conflict) => {
                scratch.clear();
                self.index.lookup(fp, scratch);
                let seen = Expect::Absent { seen: scratch };
                self.index
                    .insert(fp, location(value), seen)
                    .expect("insert");
                1
            }
            Err(InsertError::Full) => panic!("the index is full"),
        }
    }

    #[inline]
    fn lookup(&self, key: u64, value: u64, scratch: &mut Vec<Location>) -> bool {
        scratch.clear();
        self.index.lookup(Index::fingerprint(key), scratch);
        scratch.iter().any(|l| l.pba == value)
    }

    fn settle(&self) {
        self.index.finish_resize();
    }

    fn bytes_and_len(&self) -> (usize, usize) {
        (self.index.memory_bytes(), self.index.len())
    }

    fn batch(&self) -> usize {
        self.batch
    }

    #[inline]
    fn prefetch(&self, key: u64) {
        self.index.prefetch(Index::fingerprint(key))
    }
}

impl Table for DashMap<u64, u64, PassThrough> {
    #[inline]
    fn insert(&self, key: u64, value: u64, _: &mut Vec<Location>) -> u64 {
        DashMap::insert(self, key, value);
        0
    }

    #[inline]
    fn lookup(&self, key: u64, value: u64, _: &mut Vec<Location>) -> bool {
        self.get(&key).is_some_and(|v| *v == value)
    }

    fn bytes_and_len(&self) -> (usize, usize) {
        let shards = dashmap_shards();
        (
            hashbrown_bytes(self.capacity() / shards) * shards,
            self.len(),
        )
    }
}

impl Table for RwLock<hashbrown::HashMap<u64, u64, PassThrough>> {
    #[inline]
    fn insert(&self, key: u64, value: u64, _: &mut Vec<Location>) -> u64 {
        self.write().insert(key, value);
        0
    }

    #[inline]
    fn lookup(&self, key: u64, value: u64, _: &mut Vec<Location>) -> bool {
        self.read().get(&key) == Some(&value)
    }

    fn bytes_and_len(&self) -> (usize, usize) {
        let map = self.read();
        (hashbrown_bytes(map.capacity()), map.len())
    }
}
