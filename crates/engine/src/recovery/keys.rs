//! The rebuild's key table: the newest record of every key the log scan
//! saw, keyed by (namespace, two 64-bit hashes) so no key bytes are kept.
//!
//! With millions of keys one map is as large as the index (hundreds of
//! megabytes), and each insert is a cache and TLB miss. So the table is
//! split in [`PARTITIONS`] by the low byte of the key hash: the scan
//! threads only append to per-partition lists (sequential writes), then
//! each partition's map is built on its own, small enough to stay in the
//! cache, on both cores. The low bits of the hash are also what picks a
//! key's index table, so filling the index partition by partition keeps
//! its writes local too.

use std::collections::HashMap;

use nvdepot_index::Location;

/// Partitions of the key table (a power of two).
pub(crate) const PARTITIONS: usize = 256;

/// Hashes the key table's keys, which are already uniform hashes, by
/// folding them instead of running SipHash over them.
#[derive(Default)]
pub(crate) struct FoldHasher(u64);

impl std::hash::Hasher for FoldHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ *b as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.0 ^= v as u64;
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0 ^ v).rotate_left(29);
    }
}

pub(crate) type FoldMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<FoldHasher>>;

/// A key: its physical namespace and its two hashes
/// (`inner::key_hash`, `loc_cache::key_hash2`).
pub(crate) type KeyId = (u32, u64, u64);

/// The newest record of a key found while scanning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Found {
    pub seq: u64,
    pub pba: u64,
    pub grains: u64,
    pub tombstone: bool,
}

impl Found {
    /// Its index location (the grain count saturates, as the index's does).
    pub fn location(&self) -> Location {
        crate::inner::location_at(self.pba, self.grains)
    }

    /// Whether `self` hides `other` (a record of the same key): it is
    /// newer, or as new and a tombstone (a buried record's tombstone has
    /// the lost record's sequence number).
    fn beats(&self, other: &Found) -> bool {
        self.seq > other.seq || (self.seq == other.seq && self.tombstone && !other.tombstone)
    }
}

fn partition(id: &KeyId) -> usize {
    (id.1 as usize) & (PARTITIONS - 1)
}

/// What one scan thread saw, appended in log order, per partition.
pub(crate) struct Seen {
    parts: Vec<Vec<(KeyId, Found)>>,
}

impl Seen {
    pub fn new() -> Seen {
        Seen {
            parts: (0..PARTITIONS).map(|_| Vec::new()).collect(),
        }
    }

    /// Makes room for `per_partition` more entries in each partition.
    pub fn reserve(&mut self, per_partition: usize) {
        for p in &mut self.parts {
            p.reserve(per_partition);
        }
    }

    pub fn push(&mut self, id: KeyId, f: Found) {
        self.parts[partition(&id)].push((id, f));
    }
}

/// The newest record per key.
pub(crate) struct KeyTable {
    parts: Vec<FoldMap<KeyId, Found>>,
}

impl KeyTable {
    /// Builds the table from what the scan threads saw, one partition at a
    /// time, on two threads.
    pub fn build(seen: Vec<Seen>) -> KeyTable {
        let mut by_part: Vec<Vec<Vec<(KeyId, Found)>>> =
            (0..PARTITIONS).map(|_| Vec::new()).collect();
        for s in seen {
            for (p, list) in s.parts.into_iter().enumerate() {
                by_part[p].push(list);
            }
        }
        let build_one = |lists: Vec<Vec<(KeyId, Found)>>| {
            let mut map = FoldMap::default();
            map.reserve(lists.iter().map(Vec::len).sum());
            for list in lists {
                for (id, f) in list {
                    keep_newest(&mut map, id, f);
                }
            }
            map.shrink_to_fit();
            map
        };
        let upper = by_part.split_off(PARTITIONS / 2);
        let (mut parts, upper) = std::thread::scope(|scope| {
            let other = scope.spawn(|| upper.into_iter().map(build_one).collect::<Vec<_>>());
            let mine: Vec<_> = by_part.into_iter().map(build_one).collect();
            (mine, other.join().expect("key table thread panicked"))
        });
        parts.extend(upper);
        KeyTable { parts }
    }

    /// Keys in the table (tombstones included).
    pub fn len(&self) -> usize {
        self.parts.iter().map(HashMap::len).sum()
    }

    /// Records `f` for `id` unless the table holds a record that beats it.
    pub fn keep_newest(&mut self, id: KeyId, f: Found) {
        keep_newest(&mut self.parts[partition(&id)], id, f)
    }

    /// Hides `id`'s records up to sequence number `seq` (a tombstone
    /// there: a lost record's, or a value recovery leaves out).
    pub fn hide(&mut self, id: KeyId, seq: u64) {
        let tombstone = Found {
            seq,
            pba: 0,
            grains: 0,
            tombstone: true,
        };
        self.keep_newest(id, tombstone);
    }

    /// The newest record of `id`, if any.
    pub fn get(&self, id: &KeyId) -> Option<&Found> {
        self.parts[partition(id)].get(id)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&KeyId, &Found)> {
        self.parts.iter().flat_map(|m| m.iter())
    }

    /// The partitions, each holding the keys whose hash has its index as
    /// low byte.
    pub fn partitions(&self) -> &[FoldMap<KeyId, Found>] {
        &self.parts
    }
}

fn keep_newest(map: &mut FoldMap<KeyId, Found>, id: KeyId, f: Found) {
    match map.entry(id) {
        std::collections::hash_map::Entry::Occupied(mut o) => {
            if f.beats(o.get()) {
                o.insert(f);
            }
        }
        std::collections::hash_map::Entry::Vacant(v) => {
            v.insert(f);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(seq: u64, tombstone: bool) -> Found {
        Found {
            seq,
            pba: seq * 8,
            grains: 1,
            tombstone,
        }
    }

    #[test]
    fn newest_wins_across_threads_and_partitions() {
        let mut a = Seen::new();
        let mut b = Seen::new();
        // 1000 keys over every partition; each written by both threads.
        for k in 0..1000u64 {
            let id = (1, k.wrapping_mul(0x9e37_79b9_7f4a_7c15), k);
            a.push(id, found(2 * k + (k % 2), false));
            b.push(id, found(2 * k + 1 - (k % 2), k % 3 == 0));
        }
        let t = KeyTable::build(vec![a, b]);
        assert_eq!(t.len(), 1000);
        for (id, f) in t.iter() {
            let k = id.2;
            assert_eq!(f.seq, 2 * k + 1, "key {k}");
            assert_eq!(partition(id), (id.1 as usize) % PARTITIONS);
        }
        for (p, m) in t.partitions().iter().enumerate() {
            assert!(m.keys().all(|id| partition(id) == p));
        }
    }

    #[test]
    fn a_tombstone_of_the_same_sequence_number_wins() {
        let id = (1, 7, 7);
        let mut a = Seen::new();
        a.push(id, found(5, false));
        let mut t = KeyTable::build(vec![a]);
        t.keep_newest(id, found(5, true));
        assert!(t.iter().next().unwrap().1.tombstone);
        t.keep_newest(id, found(4, false));
        assert_eq!(t.iter().next().unwrap().1.seq, 5);
    }
}
