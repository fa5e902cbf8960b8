//! A bounded cache of where recently written keys' records are, so that
//! overwriting or deleting a hot key needs no read of its old record.
//!
//! Without it, a put of an existing key reads the old record's header to
//! compare keys (the index holds fingerprints, not keys): one device read
//! per overwrite. The cache maps a key's identity (its physical namespace
//! and two 64-bit hashes of namespace and key) to its record's location,
//! size and version. It is a hint checked against the index: a hit is
//! used only if the index still holds that location under the key's
//! fingerprint.
//!
//! The namespace is compared, not only the hashes: both hashes are xxh3
//! seeded with the namespace id, and for short keys xxh3 folds the seed
//! in linearly, so neighbouring ids collide on both at once (namespace 1's
//! `m10` and namespace 2's `m11` have the same two hashes; 792 such pairs
//! among 1 000 keys in 16 namespaces). Without the namespace, a write of
//! `m11` in Redis database 1 took `m10`'s entry of database 0 for its own
//! and replaced it: `m10` was lost (issue 35's shape generator found it).
//!
//! Entries are only read and written under the key's stripe lock: the slot
//! of a key is chosen within its stripe's block, so every key that can use
//! a slot shares that slot's stripe lock. Every path that moves or removes
//! a key's index entry while holding that lock (put, delete, batch, GC
//! relocation, eviction) updates or clears the entry, so a hit never names
//! a location that was freed and reused for another key. Namespace purges
//! need no update: a retired namespace's id is never looked up again.
//!
//! Memory is fixed at open: 40 bytes an entry, not per key.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::inner::Existing;

/// `[hash, second hash, pba << 24 | grains, version, physical namespace]`;
/// hash 0 = empty.
type Slot = [AtomicU64; 5];

pub(crate) struct LocationCache {
    slots: Box<[Slot]>,
    ways: usize,
}

const GRAIN_BITS: u32 = 24;

impl LocationCache {
    /// About `entries` entries over `stripes` stripes (0 disables it).
    pub fn new(entries: usize, stripes: usize) -> LocationCache {
        let ways = (entries / stripes).next_power_of_two();
        let ways = if entries == 0 { 0 } else { ways };
        let slots = (0..ways * stripes)
            .map(|_| std::array::from_fn(|_| AtomicU64::new(0)))
            .collect();
        LocationCache { slots, ways }
    }

    fn slot(&self, stripe: usize, hash: u64) -> Option<&Slot> {
        if self.ways == 0 {
            return None;
        }
        let way = (hash as usize) & (self.ways - 1);
        Some(&self.slots[stripe * self.ways + way])
    }

    /// The cached location of the key with identity (`physical`, `hash`,
    /// `hash2`). Caller holds the key's stripe lock.
    pub fn get(&self, stripe: usize, physical: u32, hash: u64, hash2: u64) -> Option<Existing> {
        let s = self.slot(stripe, hash)?;
        if hash == 0
            || s[0].load(Ordering::Relaxed) != hash
            || s[1].load(Ordering::Relaxed) != hash2
            || s[4].load(Ordering::Relaxed) != u64::from(physical)
        {
            return None;
        }
        let packed = s[2].load(Ordering::Relaxed);
        let grains = packed & ((1 << GRAIN_BITS) - 1);
        Some(Existing {
            loc: crate::inner::location_at(packed >> GRAIN_BITS, grains),
            grains,
            seq: s[3].load(Ordering::Relaxed),
            large: None,
        })
    }

    /// Records where the key's record now is. Caller holds the stripe lock.
    pub fn set(&self, stripe: usize, physical: u32, hash: u64, hash2: u64, e: &Existing) {
        let Some(s) = self.slot(stripe, hash) else {
            return;
        };
        if hash == 0 || e.grains >= 1 << GRAIN_BITS {
            self.clear(stripe, physical, hash, hash2);
            return;
        }
        s[4].store(u64::from(physical), Ordering::Relaxed);
        s[0].store(hash, Ordering::Relaxed);
        s[1].store(hash2, Ordering::Relaxed);
        s[2].store(e.loc.pba << GRAIN_BITS | e.grains, Ordering::Relaxed);
        s[3].store(e.seq, Ordering::Relaxed);
    }

    /// Forgets the key (if it holds the slot). Caller holds the stripe lock.
    pub fn clear(&self, stripe: usize, physical: u32, hash: u64, hash2: u64) {
        let Some(s) = self.slot(stripe, hash) else {
            return;
        };
        if s[0].load(Ordering::Relaxed) == hash
            && s[1].load(Ordering::Relaxed) == hash2
            && s[4].load(Ordering::Relaxed) == u64::from(physical)
        {
            s[0].store(0, Ordering::Relaxed);
        }
    }
}

impl LocationCache {
    /// Forgets whichever key with first hash `hash` holds its slot (when
    /// the second hash is not at hand). Caller holds the stripe lock.
    pub fn clear_hash(&self, stripe: usize, hash: u64) {
        let Some(s) = self.slot(stripe, hash) else {
            return;
        };
        if s[0].load(Ordering::Relaxed) == hash {
            s[0].store(0, Ordering::Relaxed);
        }
    }
}

/// The second identity hash of a key (the first is `store::key_hash`).
pub(crate) fn key_hash2(physical: u32, key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64_with_seed(key, !(physical as u64))
}
