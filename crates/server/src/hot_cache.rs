//! The DRAM tier of the memcache face (memcached's `-m`): a read cache of
//! hot items in front of the flash store. Every item lives on flash; a hit
//! here costs no IO.
//!
//! Sharded CLOCK: each shard is a map plus a ring of keys; a hit sets the
//! entry's reference bit, eviction sweeps the ring clearing bits and drops
//! the first unreferenced entry (second chance). A key dropped by a write
//! leaves a stale ring slot (its generation no longer matches the entry's);
//! the sweep skips those, and once they outnumber the live entries the
//! ring is compacted, so rewriting cached keys cannot grow it without
//! bound.
//!
//! Consistency: every write bumps its shard's epoch. A read records the
//! epoch before going to flash and fills only if it is unchanged; a write
//! records it before writing to flash and afterwards caches the item it
//! wrote only if no other write touched the shard meanwhile (otherwise it
//! drops the key). So a value can only be cached if nothing in its shard
//! changed between reading or writing it and caching it: never stale.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};

use nvdepot_memcache::Item;
use parking_lot::Mutex;

const SHARDS: usize = 64;
/// Bookkeeping per entry beyond key and value (map slot, ring slot, Item).
const ENTRY_OVERHEAD: usize = 96;

struct Entry {
    item: Item,
    referenced: bool,
    /// Which ring slot is this entry's (see [`Shard::ring`]).
    generation: u64,
}

#[derive(Default)]
struct Shard {
    map: HashMap<Vec<u8>, Entry>,
    /// Keys in insertion order, each with the generation of the entry it
    /// was pushed for; a slot whose generation differs from its key's
    /// entry (or whose key is gone) is stale.
    ring: VecDeque<(Vec<u8>, u64)>,
    /// Stale slots in `ring`.
    stale: usize,
    next_generation: u64,
    bytes: usize,
    /// Bumped by every invalidation (see the module comment).
    epoch: u64,
}

/// Counters of the DRAM tier.
#[derive(Default, Debug)]
pub struct HotCacheStats {
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    pub evictions: AtomicU64,
}

pub struct HotCache {
    shards: Vec<Mutex<Shard>>,
    shard_bytes_max: usize,
    pub stats: HotCacheStats,
}

fn entry_bytes(key: &[u8], item: &Item) -> usize {
    key.len() * 2 + item.value.len() + ENTRY_OVERHEAD
}

impl HotCache {
    /// A cache holding at most `bytes_max` bytes of items (0 disables it).
    pub fn new(bytes_max: usize) -> HotCache {
        HotCache {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            shard_bytes_max: bytes_max / SHARDS,
            stats: HotCacheStats::default(),
        }
    }

    fn shard(&self, key: &[u8]) -> &Mutex<Shard> {
        let h = xxhash_rust::xxh3::xxh3_64(key);
        &self.shards[(h as usize) % SHARDS]
    }

    /// The cached item, or `None` with the shard's epoch to pass to
    /// [`HotCache::fill`] after reading flash.
    pub fn get(&self, key: &[u8]) -> Result<Item, u64> {
        if self.shard_bytes_max == 0 {
            return Err(0);
        }
        let mut shard = self.shard(key).lock();
        if let Some(e) = shard.map.get_mut(key) {
            e.referenced = true;
            self.stats.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(e.item.clone());
        }
        self.stats.misses.fetch_add(1, Ordering::Relaxed);
        Err(shard.epoch)
    }

    /// Caches an item read from flash, unless the shard was invalidated
    /// since `epoch` was taken.
    pub fn fill(&self, key: &[u8], item: &Item, epoch: u64) {
        if self.shard_bytes_max == 0 {
            return;
        }
        let mut shard = self.shard(key).lock();
        if shard.epoch != epoch || shard.map.contains_key(key) {
            return;
        }
        self.insert(&mut shard, key, item);
    }

    /// The epoch to pass to [`HotCache::end_write`] (take it before the
    /// flash write).
    pub fn begin_write(&self, key: &[u8]) -> u64 {
        if self.shard_bytes_max == 0 {
            return 0;
        }
        self.shard(key).lock().epoch
    }

    /// After a flash write of `key`: caches `written` (the item now on
    /// flash, `None` after a delete or a failed write) if no other write
    /// touched the shard since `epoch`; otherwise drops the key.
    pub fn end_write(&self, key: &[u8], written: Option<&Item>, epoch: u64) {
        if self.shard_bytes_max == 0 {
            return;
        }
        let mut shard = self.shard(key).lock();
        let unchanged = shard.epoch == epoch;
        shard.epoch += 1;
        if let Some(e) = shard.map.remove(key) {
            shard.bytes -= entry_bytes(key, &e.item);
            shard.stale += 1;
            Self::compact(&mut shard);
        }
        if let (true, Some(item)) = (unchanged, written) {
            self.insert(&mut shard, key, item);
        }
    }

    fn insert(&self, shard: &mut Shard, key: &[u8], item: &Item) {
        let size = entry_bytes(key, item);
        if size > self.shard_bytes_max / 4 {
            return;
        }
        while shard.bytes + size > self.shard_bytes_max {
            if !self.evict_one(shard) {
                return;
            }
        }
        shard.bytes += size;
        let generation = shard.next_generation;
        shard.next_generation += 1;
        shard.ring.push_back((key.to_vec(), generation));
        let entry = Entry {
            item: item.clone(),
            referenced: false,
            generation,
        };
        if let Some(old) = shard.map.insert(key.to_vec(), entry) {
            shard.bytes -= entry_bytes(key, &old.item);
            shard.stale += 1;
            Self::compact(shard);
        }
    }

    /// Drops the stale ring slots once they outnumber the live entries
    /// (amortised O(1) per write).
    fn compact(shard: &mut Shard) {
        if shard.stale <= shard.map.len().max(64) {
            return;
        }
        let Shard { ring, map, .. } = shard;
        ring.retain(|(k, g)| map.get(k).is_some_and(|e| e.generation == *g));
        shard.stale = 0;
    }

    fn evict_one(&self, shard: &mut Shard) -> bool {
        while let Some((k, generation)) = shard.ring.pop_front() {
            let Some(e) = shard.map.get_mut(&k).filter(|e| e.generation == generation) else {
                shard.stale = shard.stale.saturating_sub(1);
                continue;
            };
            if e.referenced {
                e.referenced = false;
                shard.ring.push_back((k, generation));
                continue;
            }
            let e = shard.map.remove(&k).expect("present");
            shard.bytes -= entry_bytes(&k, &e.item);
            self.stats.evictions.fetch_add(1, Ordering::Relaxed);
            return true;
        }
        false
    }

    /// Drops everything (flush_all).
    pub fn clear(&self) {
        for s in &self.shards {
            let mut s = s.lock();
            s.epoch += 1;
            s.map.clear();
            s.ring.clear();
            s.stale = 0;
            s.bytes = 0;
        }
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.shards.iter().map(|s| s.lock().bytes).sum()
    }

    /// Items held.
    pub fn items(&self) -> usize {
        self.shards.iter().map(|s| s.lock().map.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewriting_cached_keys_keeps_the_ring_bounded() {
        let c = HotCache::new(64 << 20);
        for i in 0..100_000u64 {
            let key = format!("k{}", i % 10);
            let w = c.begin_write(key.as_bytes());
            c.end_write(key.as_bytes(), Some(&item(b"v", i + 1)), w);
        }
        let slots: usize = c.shards.iter().map(|s| s.lock().ring.len()).sum();
        assert!(slots <= SHARDS * 130, "{slots} ring slots for 10 keys");
        assert_eq!(c.items(), 10);
        assert_eq!(c.get(b"k3").unwrap().cas, 100_000 - 6);
    }

    fn item(v: &[u8], cas: u64) -> Item {
        Item {
            value: v.to_vec(),
            flags: 0,
            exptime: 0,
            cas,
            state: Default::default(),
        }
    }

    #[test]
    fn fill_hit_invalidate_and_races() {
        let c = HotCache::new(1 << 20);
        let epoch = c.get(b"k").unwrap_err();
        c.fill(b"k", &item(b"v1", 1), epoch);
        assert_eq!(c.get(b"k").unwrap().value, b"v1");
        // A read that started before a write must not cache its old value.
        let w = c.begin_write(b"k");
        c.end_write(b"k", None, w);
        let stale_epoch = epoch;
        c.fill(b"k", &item(b"v1", 1), stale_epoch);
        assert!(c.get(b"k").is_err());
        // Write-through caches what was written...
        let w = c.begin_write(b"k");
        c.end_write(b"k", Some(&item(b"v2", 2)), w);
        assert_eq!(c.get(b"k").unwrap().value, b"v2");
        // ...unless another write overtook it: then nothing is cached.
        let slow = c.begin_write(b"k");
        let fast = c.begin_write(b"k");
        c.end_write(b"k", Some(&item(b"v4", 4)), fast);
        c.end_write(b"k", Some(&item(b"v3", 3)), slow);
        assert!(c.get(b"k").is_err(), "the older write must not stay cached");
        c.clear();
        assert_eq!(c.items(), 0);
    }

    #[test]
    fn stays_within_its_budget() {
        let c = HotCache::new(64 * 1024);
        for i in 0..10_000u32 {
            let k = format!("key{i}");
            let e = c.get(k.as_bytes()).unwrap_err();
            c.fill(k.as_bytes(), &item(&[7u8; 100], i as u64), e);
        }
        assert!(c.bytes() <= 64 * 1024, "{}", c.bytes());
        assert!(c.stats.evictions.load(Ordering::Relaxed) > 0);
        // Recently hit entries survive a sweep more often than cold ones.
        assert!(c.items() > 100);
    }
}
