//! A DRAM cache of whole values in front of the store: what an embedded
//! store's memory budget buys, as RocksDB's block cache (and the page
//! cache under it) do. The engine reads every GET from the device (one IO,
//! uDepot's design); an application with a skewed working set and DRAM to
//! spare is served its hot keys from memory instead.
//!
//! Consistency: a cached value is always the key's current value, or
//! absent. A write drops the entries of its keys when it starts, and
//! until it finishes no read may fill them. A reader that missed fills an
//! entry with what it read from the store only if no write of the key's
//! stripe started or finished since before its read: each stripe counts
//! writes in flight (`writing`) and writes started or finished
//! (`changes`); the reader notes `changes` before its device read and
//! fills, under the shard's lock, only if nothing is in flight and the
//! count is unchanged. A write raises both counts before it drops the
//! entries (under the same lock), and raises `changes` again before it
//! leaves `writing`. So a fill either lands before the write's drop (which
//! removes it) or sees the write and fills nothing.
//!
//! A put, once the store has it, fills its own value (write-through:
//! YCSB's read-latest and read-modify-write workloads, and any
//! application that reads what it just wrote, would otherwise miss on the
//! first read after every write): under the shard's lock, and only if it
//! is the one write in flight in its stripe and no other write started or
//! finished there since it started (`changes` as its start left it). Any
//! write that could be ordered after it in the store is then either
//! still to start (its start drops the entry) or visible in the counts.
//!
//! Writers are not serialised here: writers of one key share the engine's
//! group commits as they would without the cache.
//!
//! Eviction: CLOCK (second chance) per shard, by bytes (key, value and a
//! fixed overhead per entry).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

/// Shards of the cache (each its own lock and CLOCK).
const SHARDS: usize = 64;

/// Stripes of the write counters (keys hash to one each).
const STRIPES: usize = 4096;

/// Bytes an entry costs beyond its key and value (map slot, queue slot,
/// allocation headers), counted against the budget.
const ENTRY_OVERHEAD: usize = 96;

/// A value larger than this share of a shard's budget is not cached.
const LARGEST_SHARE: usize = 8;

/// Cache key: namespace id and key.
type Key = (u32, Box<[u8]>);

struct Entry {
    value: Box<[u8]>,
    version: u64,
    /// Read since the CLOCK hand last passed.
    referenced: bool,
    /// Which queue slot is this entry's (older slots of a key replaced
    /// since are skipped).
    ticket: u64,
}

#[derive(Default)]
struct Shard {
    map: HashMap<Key, Entry>,
    /// Insertion order for CLOCK: (key, ticket).
    queue: VecDeque<(Key, u64)>,
    bytes: usize,
    next_ticket: u64,
}

/// The cache. Cheap to consult when disabled (`None` in the handle).
pub(crate) struct ValueCache {
    shards: Box<[Mutex<Shard>]>,
    /// Writes in flight per stripe (see the module docs).
    writing: Box<[AtomicU64]>,
    /// Writes started or finished per stripe.
    changes: Box<[AtomicU64]>,
    shard_budget: usize,
    hits: AtomicU64,
    misses: AtomicU64,
}

fn hash(ns: u32, key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64_with_seed(key, ns as u64)
}

fn shard_of(h: u64) -> usize {
    (h as usize) % SHARDS
}

fn stripe_of(h: u64) -> usize {
    ((h >> 32) as usize) % STRIPES
}

/// An entry's bytes: its value, its key twice (the map's and the CLOCK
/// queue's copies) and the fixed overhead.
fn cost(key: &[u8], value: &[u8]) -> usize {
    2 * key.len() + value.len() + ENTRY_OVERHEAD
}

/// A reader's note of its key's stripe before it read the device (see
/// [`ValueCache::fill`]).
#[derive(Debug)]
pub(crate) struct Before {
    h: u64,
    changes: u64,
}

/// A write in flight: its stripes counted in `writing` until dropped.
pub(crate) struct Writing<'a> {
    cache: &'a ValueCache,
    /// Its stripes, each with `changes` as its own start left it.
    stripes: Vec<(usize, u64)>,
}

impl ValueCache {
    pub(crate) fn new(bytes: u64) -> ValueCache {
        ValueCache {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            writing: (0..STRIPES).map(|_| AtomicU64::new(0)).collect(),
            changes: (0..STRIPES).map(|_| AtomicU64::new(0)).collect(),
            shard_budget: (bytes as usize) / SHARDS,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// The cached value and version of a key; else the note a later
    /// [`ValueCache::fill`] needs.
    pub(crate) fn get(&self, ns: u32, key: &[u8]) -> Result<(Vec<u8>, u64), Before> {
        let h = hash(ns, key);
        let before = Before {
            h,
            changes: self.changes[stripe_of(h)].load(Ordering::Acquire),
        };
        let mut shard = self.shards[shard_of(h)].lock();
        // The map is keyed by an owned key; a lookup by borrowed parts
        // would need a custom Borrow impl for the tuple: build the key.
        let k: Key = (ns, key.into());
        if let Some(e) = shard.map.get_mut(&k) {
            e.referenced = true;
            let found = (e.value.to_vec(), e.version);
            drop(shard);
            self.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(found);
        }
        drop(shard);
        self.misses.fetch_add(1, Ordering::Relaxed);
        Err(before)
    }

    /// Caches what a reader read from the store after `before`, unless a
    /// write of the key's stripe is in flight or came since (what it read
    /// may be older than the key's value).
    pub(crate) fn fill(&self, before: Before, ns: u32, key: &[u8], value: &[u8], version: u64) {
        if cost(key, value) > self.shard_budget / LARGEST_SHARE {
            return;
        }
        let stripe = stripe_of(before.h);
        let mut shard = self.shards[shard_of(before.h)].lock();
        // `writing` first: a write leaving it has raised `changes` before.
        if self.writing[stripe].load(Ordering::Acquire) != 0
            || self.changes[stripe].load(Ordering::Acquire) != before.changes
        {
            return;
        }
        self.set(&mut shard, ns, key, value, version);
    }

    /// Starts a write of `keys`: counts it in their stripes and drops
    /// their entries. Hold the result across the store's write; dropping
    /// it ends the write.
    pub(crate) fn writing<'a>(&'a self, ns: u32, keys: &[&[u8]]) -> Writing<'a> {
        let mut indexes: Vec<usize> = keys.iter().map(|k| stripe_of(hash(ns, k))).collect();
        indexes.sort_unstable();
        indexes.dedup();
        let mut stripes = Vec::with_capacity(indexes.len());
        for s in indexes {
            self.writing[s].fetch_add(1, Ordering::AcqRel);
            let changes = self.changes[s].fetch_add(1, Ordering::AcqRel) + 1;
            stripes.push((s, changes));
        }
        for k in keys {
            let mut shard = self.shards[shard_of(hash(ns, k))].lock();
            ValueCache::remove(&mut shard, ns, k);
        }
        Writing {
            cache: self,
            stripes,
        }
    }

    /// Marks every stripe changed: no read that started before fills.
    pub(crate) fn change_all(&self) {
        for c in self.changes.iter() {
            c.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// Drops every entry of namespace `ns` (after the store cleared or
    /// dropped it; call [`ValueCache::change_all`] before the store's
    /// change too) and stops fills of reads that started before.
    pub(crate) fn purge(&self, ns: u32) {
        self.change_all();
        for shard in self.shards.iter() {
            let mut shard = shard.lock();
            let Shard { map, bytes, .. } = &mut *shard;
            map.retain(|(n, k), e| {
                let keep = *n != ns;
                if !keep {
                    *bytes -= cost(k, &e.value);
                }
                keep
            });
        }
    }

    /// (hits, misses) so far.
    pub(crate) fn counters(&self) -> (u64, u64) {
        (
            self.hits.load(Ordering::Relaxed),
            self.misses.load(Ordering::Relaxed),
        )
    }

    fn set(&self, shard: &mut Shard, ns: u32, key: &[u8], value: &[u8], version: u64) {
        let k: Key = (ns, key.into());
        let ticket = shard.next_ticket;
        shard.next_ticket += 1;
        let new_cost = cost(key, value);
        if let Some(old) = shard.map.insert(
            k.clone(),
            Entry {
                value: value.into(),
                version,
                referenced: false,
                ticket,
            },
        ) {
            shard.bytes -= cost(key, &old.value);
        }
        shard.bytes += new_cost;
        shard.queue.push_back((k, ticket));
        self.evict(shard);
    }

    fn remove(shard: &mut Shard, ns: u32, key: &[u8]) {
        let k: Key = (ns, key.into());
        if let Some(old) = shard.map.remove(&k) {
            shard.bytes -= cost(key, &old.value);
        }
    }

    /// CLOCK: until the shard fits its budget, the oldest entry goes
    /// unless read since the hand last passed (then it gets another turn).
    fn evict(&self, shard: &mut Shard) {
        while shard.bytes > self.shard_budget {
            let Some((k, ticket)) = shard.queue.pop_front() else {
                break;
            };
            let Some(e) = shard.map.get_mut(&k) else {
                continue; // removed since
            };
            if e.ticket != ticket {
                continue; // replaced since: its newer slot is further back
            }
            if e.referenced {
                e.referenced = false;
                shard.queue.push_back((k, ticket));
                continue;
            }
            let e = shard.map.remove(&k).expect("present");
            shard.bytes -= cost(&k.1, &e.value);
        }
        // Stale slots (of removed or replaced entries) are dropped as the
        // hand meets them; bound them when nothing needs evicting.
        if shard.queue.len() > 2 * shard.map.len() + 1024 {
            let map = &shard.map;
            shard
                .queue
                .retain(|(k, t)| map.get(k).is_some_and(|e| e.ticket == *t));
        }
    }
}

impl Writing<'_> {
    /// Caches `value` (at `version`) that this write just put under `key`
    /// (one of its keys), unless another write of the key's stripe is in
    /// flight or started or finished since this one began (see the module
    /// docs).
    pub(crate) fn fill_written(&self, ns: u32, key: &[u8], value: &[u8], version: u64) {
        let cache = self.cache;
        if cost(key, value) > cache.shard_budget / LARGEST_SHARE {
            return;
        }
        let h = hash(ns, key);
        let stripe = stripe_of(h);
        let Some(&(_, changes)) = self.stripes.iter().find(|(s, _)| *s == stripe) else {
            debug_assert!(false, "a key this write did not announce");
            return;
        };
        let mut shard = cache.shards[shard_of(h)].lock();
        if cache.writing[stripe].load(Ordering::Acquire) != 1
            || cache.changes[stripe].load(Ordering::Acquire) != changes
        {
            return;
        }
        cache.set(&mut shard, ns, key, value, version);
    }
}

impl Drop for Writing<'_> {
    /// Ends the write: `changes` raised before `writing` lowered, so a
    /// reader that sees no write in flight sees the change count moved.
    fn drop(&mut self) {
        for &(s, _) in &self.stripes {
            self.cache.changes[s].fetch_add(1, Ordering::AcqRel);
            self.cache.writing[s].fetch_sub(1, Ordering::AcqRel);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_racing_a_write_are_refused() {
        let c = ValueCache::new(1 << 20);
        // A write finishes while a reader is at the device.
        let before = c.get(1, b"k").unwrap_err();
        drop(c.writing(1, &[b"k"]));
        c.fill(before, 1, b"k", b"old", 1);
        assert!(c.get(1, b"k").is_err(), "a fill older than a write");
        // A reader that starts while a write is in flight.
        let w = c.writing(1, &[b"k"]);
        let before = c.get(1, b"k").unwrap_err();
        c.fill(before, 1, b"k", b"maybe old", 1);
        drop(w);
        assert!(c.get(1, b"k").is_err(), "a fill during a write");
        // Quiet: a fill stays, and the next write drops it.
        let before = c.get(1, b"k").unwrap_err();
        c.fill(before, 1, b"k", b"new", 2);
        assert_eq!(c.get(1, b"k").unwrap(), (b"new".to_vec(), 2));
        let w = c.writing(1, &[b"k"]);
        assert!(c.get(1, b"k").is_err());
        drop(w);
    }

    #[test]
    fn a_put_fills_its_value_only_when_no_other_write_raced_it() {
        let c = ValueCache::new(1 << 20);
        // Alone: the value it wrote is cached, and a read hits it.
        let w = c.writing(1, &[b"k"]);
        w.fill_written(1, b"k", b"v1", 1);
        drop(w);
        assert_eq!(c.get(1, b"k").unwrap(), (b"v1".to_vec(), 1));
        // Two writes of the key in flight: neither may cache (the store
        // may order either last).
        let a = c.writing(1, &[b"k"]);
        let b = c.writing(1, &[b"k"]);
        b.fill_written(1, b"k", b"b", 3);
        drop(b);
        a.fill_written(1, b"k", b"a", 2);
        drop(a);
        assert!(c.get(1, b"k").is_err(), "a fill racing another write");
        // A write that started and finished while this one was in flight
        // (a delete, say): this one's fill is refused.
        let a = c.writing(1, &[b"k"]);
        drop(c.writing(1, &[b"k"]));
        a.fill_written(1, b"k", b"a", 4);
        drop(a);
        assert!(c.get(1, b"k").is_err(), "a fill after another write");
        // A write starting after the fill drops it.
        let a = c.writing(1, &[b"k"]);
        a.fill_written(1, b"k", b"a", 5);
        drop(a);
        let d = c.writing(1, &[b"k"]);
        assert!(c.get(1, b"k").is_err());
        drop(d);
        // A reader that missed before the write cannot fill its old value.
        let before = c.get(1, b"k").unwrap_err();
        let a = c.writing(1, &[b"k"]);
        a.fill_written(1, b"k", b"new", 6);
        drop(a);
        c.fill(before, 1, b"k", b"old", 5);
        assert_eq!(c.get(1, b"k").unwrap(), (b"new".to_vec(), 6));
    }

    #[test]
    fn eviction_keeps_the_budget_and_prefers_read_entries() {
        let c = ValueCache::new((SHARDS * 64 * 1024) as u64);
        let value = vec![7u8; 1000];
        let hot: Vec<Vec<u8>> = (0..50u32).map(|i| format!("hot{i}").into_bytes()).collect();
        for k in &hot {
            let b = c.get(0, k).unwrap_err();
            c.fill(b, 0, k, &value, 1);
        }
        for i in 0..20_000u32 {
            for k in &hot {
                let _ = c.get(0, k);
            }
            let k = format!("cold{i}").into_bytes();
            let b = c.get(0, &k).unwrap_err();
            c.fill(b, 0, &k, &value, 1);
        }
        for shard in c.shards.iter() {
            let s = shard.lock();
            assert!(
                s.bytes <= c.shard_budget,
                "{} > {}",
                s.bytes,
                c.shard_budget
            );
            assert!(s.queue.len() <= 2 * s.map.len() + 1024 + 1);
        }
        let kept = hot.iter().filter(|k| c.get(0, k).is_ok()).count();
        assert_eq!(kept, hot.len(), "hot entries evicted");
        c.purge(0);
        assert!(c.get(0, &hot[0]).is_err());
    }
}
