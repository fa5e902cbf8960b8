//! The DRAM tier (memcached's `-m`): a read cache of hot items in front of
//! the flash store, shared by every face. Every item lives on flash; a hit
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
//! Consistency: every finished write bumps its shard's epoch and stamps
//! the key's slot in the shard's stamp array with it. A read records the
//! epoch before going to flash and fills only if the key's stamp is not
//! newer; a write records it before writing to flash and afterwards
//! caches the item it wrote only if no other write finished on a key with
//! the same stamp slot meanwhile (otherwise it drops the key). So a value
//! can only be cached if nothing that could have changed it happened
//! between reading or writing it and caching it: never stale.
//!
//! The stamps are per slot of [`STAMPS`], not per shard, because with one
//! epoch per shard any write to any of its keys made concurrent reads
//! and writes of every other key give up caching: measured under
//! memaslap (90 % gets, 128 connections, writes waiting on the device),
//! 2 % of gets missed the tier and each went to the device, most of them
//! for items that were written through and then dropped this way.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::envelope::{Envelope, Item, ItemRef};
use parking_lot::Mutex;

const SHARDS: usize = 64;
/// Stamp slots per shard (see the module comment): two keys share one
/// with probability 1/`STAMPS` within a shard.
const STAMPS: usize = 1024;
/// Bookkeeping per entry beyond key and value (map slot, ring slot,
/// allocation header).
const ENTRY_OVERHEAD: usize = 80;

/// An entry's key and value, with the item's fields.
struct Entry {
    /// The namespace (keyspace) the key is in.
    ns: u32,
    data: Data,
    key_len: u32,
    envelope: Envelope,
    cas: u64,
    referenced: bool,
    /// Which ring slot is this entry's (see [`Shard::ring`]).
    generation: u64,
}

/// Where an entry's bytes are.
enum Data {
    /// Key, then value, in one allocation (one cache miss for both).
    Inline(Box<[u8]>),
    /// A written record value kept as the writer encoded it, not copied
    /// (a collection's page: ~8 KiB whose copy here was 9 % of a paged
    /// HSET's CPU); the value is `raw[at..]`.
    Kept {
        key: Box<[u8]>,
        raw: Arc<Vec<u8>>,
        at: u32,
    },
}

/// An item to cache: borrowed (copied in) or a record value kept whole.
enum Payload<'a> {
    Copied(ItemRef<'a>),
    Kept {
        raw: Arc<Vec<u8>>,
        at: usize,
        envelope: Envelope,
        cas: u64,
    },
}

impl Payload<'_> {
    fn bytes(&self, key: &[u8]) -> usize {
        match self {
            Payload::Copied(item) => inline_bytes(key.len() + item.value.len()),
            Payload::Kept { raw, .. } => kept_bytes(key.len(), raw),
        }
    }
}

/// What a kept entry costs beyond an inline one: the key's own
/// allocation and the shared value's counts.
const KEPT_OVERHEAD: usize = ENTRY_OVERHEAD + 48;

/// What an inline entry of `data_len` bytes (key and value) counts
/// against the budget: [`Payload::bytes`] before it is made and
/// [`Entry::bytes`] after must agree.
fn inline_bytes(data_len: usize) -> usize {
    data_len + ENTRY_OVERHEAD
}

/// What a kept entry counts: see [`inline_bytes`].
fn kept_bytes(key_len: usize, raw: &Arc<Vec<u8>>) -> usize {
    key_len + raw.capacity() + KEPT_OVERHEAD
}

impl Entry {
    fn new(ns: u32, key: &[u8], payload: Payload<'_>, generation: u64) -> Entry {
        let (data, envelope, cas) = match payload {
            Payload::Copied(item) => {
                let mut data = Vec::with_capacity(key.len() + item.value.len());
                data.extend_from_slice(key);
                data.extend_from_slice(item.value);
                (
                    Data::Inline(data.into_boxed_slice()),
                    item.envelope,
                    item.cas,
                )
            }
            Payload::Kept {
                raw,
                at,
                envelope,
                cas,
            } => {
                debug_assert!(at <= raw.len());
                let data = Data::Kept {
                    key: key.into(),
                    raw,
                    at: at as u32,
                };
                (data, envelope, cas)
            }
        };
        Entry {
            ns,
            data,
            key_len: key.len() as u32,
            envelope,
            cas,
            referenced: false,
            generation,
        }
    }

    fn key(&self) -> &[u8] {
        match &self.data {
            Data::Inline(d) => &d[..self.key_len as usize],
            Data::Kept { key, .. } => key,
        }
    }

    fn value(&self) -> &[u8] {
        match &self.data {
            Data::Inline(d) => &d[self.key_len as usize..],
            Data::Kept { raw, at, .. } => &raw[*at as usize..],
        }
    }

    fn is(&self, ns: u32, key: &[u8]) -> bool {
        self.ns == ns && self.key() == key
    }

    fn item_ref(&self) -> ItemRef<'_> {
        ItemRef {
            value: self.value(),
            envelope: self.envelope,
            cas: self.cas,
        }
    }

    fn item(&self) -> Item {
        Item {
            value: self.value().to_vec(),
            envelope: self.envelope,
            cas: self.cas,
        }
    }

    fn bytes(&self) -> usize {
        match &self.data {
            Data::Inline(d) => inline_bytes(d.len()),
            Data::Kept { key, raw, .. } => kept_bytes(key.len(), raw),
        }
    }
}

/// For maps whose keys are already hashes (xxh3 of the item keys here;
/// the Redis face's name tables too): the key is its own hash.
#[derive(Default)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only u64 keys are hashed; fold anything else in for safety.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

struct Shard {
    /// Entries by the xxh3 hash of their key. Two keys with one hash share
    /// a slot: the later one replaces the other (a cache may forget), and
    /// a lookup compares the stored key.
    map: HashMap<u64, Entry, BuildHasherDefault<IdHasher>>,
    /// Hashes in insertion order, each with the generation of the entry it
    /// was pushed for; a slot whose generation differs from its entry's
    /// (or whose entry is gone) is stale.
    ring: VecDeque<(u64, u64)>,
    /// Stale slots in `ring`.
    stale: usize,
    next_generation: u64,
    bytes: usize,
    /// Bumped by every invalidation (see the module comment).
    epoch: u64,
    /// Per stamp slot, the epoch of the last invalidation of a key in it.
    stamps: Box<[u64]>,
    /// The epoch of the last `clear` (an invalidation of every slot).
    cleared: u64,
}

impl Default for Shard {
    fn default() -> Shard {
        Shard {
            map: HashMap::default(),
            ring: VecDeque::new(),
            stale: 0,
            next_generation: 0,
            bytes: 0,
            epoch: 0,
            stamps: vec![0; STAMPS].into_boxed_slice(),
            cleared: 0,
        }
    }
}

impl Shard {
    fn stamp_slot(hash: u64) -> usize {
        // The shard was chosen by the low bits; the slot uses others.
        (hash >> 32) as usize & (STAMPS - 1)
    }

    /// Whether a key with `hash` may have changed since `epoch`.
    fn changed_since(&self, hash: u64, epoch: u64) -> bool {
        self.stamps[Self::stamp_slot(hash)].max(self.cleared) > epoch
    }

    /// Records that the key with `hash` changed now.
    fn invalidate(&mut self, hash: u64) {
        self.epoch += 1;
        self.stamps[Self::stamp_slot(hash)] = self.epoch;
    }

    /// Removes the entry of `hash` (whatever its key); true if there was one.
    fn remove(&mut self, hash: u64) -> bool {
        match self.map.remove(&hash) {
            Some(e) => {
                self.bytes -= e.bytes();
                self.stale += 1;
                true
            }
            None => false,
        }
    }
}

/// Counters of the DRAM tier.
#[derive(Default, Debug)]
pub struct DramTierStats {
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    pub evictions: AtomicU64,
}

/// The tier: [`SHARDS`] independently locked CLOCK caches.
pub struct DramTier {
    shards: Vec<Mutex<Shard>>,
    shard_bytes_max: usize,
    pub stats: DramTierStats,
}

impl DramTier {
    /// A cache holding at most `bytes_max` bytes of items (0 disables it).
    pub fn new(bytes_max: usize) -> DramTier {
        DramTier {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            shard_bytes_max: bytes_max / SHARDS,
            stats: DramTierStats::default(),
        }
    }

    fn shard(&self, ns: u32, key: &[u8]) -> (u64, &Mutex<Shard>) {
        let h = xxhash_rust::xxh3::xxh3_64_with_seed(key, u64::from(ns));
        (h, &self.shards[(h as usize) % SHARDS])
    }

    /// The cached item, or `None` with the shard's epoch to pass to
    /// [`DramTier::fill`] after reading flash.
    pub fn get(&self, ns: u32, key: &[u8]) -> Result<Item, u64> {
        self.get_with(ns, key, |item| Item {
            value: item.value.to_vec(),
            envelope: item.envelope,
            cas: item.cas,
        })
    }

    /// [`DramTier::get`] lending the item to `f` instead of copying it
    /// out: for reads of a few of its bytes (EXISTS, TTL, TYPE), which
    /// copied whole values, however large, to learn their type and
    /// expiry. `f` runs under the shard's lock: it must be short.
    pub fn get_with<R>(
        &self,
        ns: u32,
        key: &[u8],
        f: impl FnOnce(ItemRef<'_>) -> R,
    ) -> Result<R, u64> {
        if self.shard_bytes_max == 0 {
            return Err(0);
        }
        let (h, shard) = self.shard(ns, key);
        let mut shard = shard.lock();
        if let Some(e) = shard.map.get_mut(&h).filter(|e| e.is(ns, key)) {
            e.referenced = true;
            let out = f(e.item_ref());
            drop(shard);
            self.stats.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(out);
        }
        let epoch = shard.epoch;
        drop(shard);
        self.stats.misses.fetch_add(1, Ordering::Relaxed);
        Err(epoch)
    }

    /// The cached item, if any, without counting a hit or a miss (an
    /// update's look at the copy it may decide on; not a client's read).
    pub fn peek(&self, ns: u32, key: &[u8]) -> Option<Item> {
        if self.shard_bytes_max == 0 {
            return None;
        }
        let (h, shard) = self.shard(ns, key);
        let shard = shard.lock();
        shard
            .map
            .get(&h)
            .filter(|e| e.is(ns, key))
            .map(|e| e.item())
    }

    /// Caches an item read from flash, unless the shard was invalidated
    /// since `epoch` was taken.
    pub fn fill(&self, ns: u32, key: &[u8], item: &Item, epoch: u64) {
        if self.shard_bytes_max == 0 {
            return;
        }
        let (h, shard) = self.shard(ns, key);
        let mut shard = shard.lock();
        if shard.changed_since(h, epoch) || shard.map.get(&h).is_some_and(|e| e.is(ns, key)) {
            return;
        }
        self.insert(&mut shard, h, ns, key, Payload::Copied(item.borrowed()));
    }

    /// The epoch to pass to [`DramTier::end_write`] (take it before the
    /// flash write).
    pub fn begin_write(&self, ns: u32, key: &[u8]) -> u64 {
        if self.shard_bytes_max == 0 {
            return 0;
        }
        self.shard(ns, key).1.lock().epoch
    }

    /// After a flash write of `key`: caches `written` (the item now on
    /// flash, `None` after a delete or a failed write) if no other write
    /// touched the shard since `epoch`; otherwise drops the key.
    pub fn end_write(&self, ns: u32, key: &[u8], written: Option<ItemRef<'_>>, epoch: u64) {
        self.end_write_with(ns, key, written.map(Payload::Copied), epoch);
    }

    /// [`DramTier::end_write`] of a record value the tier may keep without
    /// copying it: `raw` as written, the item's value `raw[at..]`.
    pub fn end_write_kept(
        &self,
        ns: u32,
        key: &[u8],
        raw: Arc<Vec<u8>>,
        at: usize,
        (envelope, cas): (Envelope, u64),
        epoch: u64,
    ) {
        let kept = Payload::Kept {
            raw,
            at,
            envelope,
            cas,
        };
        self.end_write_with(ns, key, Some(kept), epoch);
    }

    fn end_write_with(&self, ns: u32, key: &[u8], written: Option<Payload<'_>>, epoch: u64) {
        if self.shard_bytes_max == 0 {
            return;
        }
        let (h, shard) = self.shard(ns, key);
        let mut shard = shard.lock();
        let unchanged = !shard.changed_since(h, epoch);
        shard.invalidate(h);
        if shard.remove(h) {
            Self::compact(&mut shard);
        }
        if let (true, Some(item)) = (unchanged, written) {
            self.insert(&mut shard, h, ns, key, item);
        }
    }

    fn insert(&self, shard: &mut Shard, h: u64, ns: u32, key: &[u8], item: Payload<'_>) {
        let size = item.bytes(key);
        if size > self.shard_bytes_max / 4 {
            return;
        }
        if shard.remove(h) {
            // Another key with the same hash: it goes.
            Self::compact(shard);
        }
        while shard.bytes + size > self.shard_bytes_max {
            if !self.evict_one(shard) {
                return;
            }
        }
        let generation = shard.next_generation;
        shard.next_generation += 1;
        shard.ring.push_back((h, generation));
        let entry = Entry::new(ns, key, item, generation);
        shard.bytes += entry.bytes();
        shard.map.insert(h, entry);
    }

    /// Drops the stale ring slots once they outnumber the live entries
    /// (amortised O(1) per write).
    fn compact(shard: &mut Shard) {
        if shard.stale <= shard.map.len().max(64) {
            return;
        }
        let Shard { ring, map, .. } = shard;
        ring.retain(|(h, g)| map.get(h).is_some_and(|e| e.generation == *g));
        shard.stale = 0;
    }

    fn evict_one(&self, shard: &mut Shard) -> bool {
        while let Some((h, generation)) = shard.ring.pop_front() {
            let Some(e) = shard.map.get_mut(&h).filter(|e| e.generation == generation) else {
                shard.stale = shard.stale.saturating_sub(1);
                continue;
            };
            if e.referenced {
                e.referenced = false;
                shard.ring.push_back((h, generation));
                continue;
            }
            let e = shard.map.remove(&h).expect("present");
            shard.bytes -= e.bytes();
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
            s.cleared = s.epoch;
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
        let c = DramTier::new(64 << 20);
        for i in 0..100_000u64 {
            let key = format!("k{}", i % 10);
            let w = c.begin_write(0, key.as_bytes());
            c.end_write(0, key.as_bytes(), Some(item(b"v", i + 1).borrowed()), w);
        }
        let slots: usize = c.shards.iter().map(|s| s.lock().ring.len()).sum();
        assert!(slots <= SHARDS * 130, "{slots} ring slots for 10 keys");
        assert_eq!(c.items(), 10);
        assert_eq!(c.get(0, b"k3").unwrap().cas, 100_000 - 6);
    }

    fn item(v: &[u8], cas: u64) -> Item {
        Item {
            value: v.to_vec(),
            envelope: Envelope::default(),
            cas,
        }
    }

    #[test]
    fn fill_hit_invalidate_and_races() {
        let c = DramTier::new(1 << 20);
        let epoch = c.get(0, b"k").unwrap_err();
        c.fill(0, b"k", &item(b"v1", 1), epoch);
        assert_eq!(c.get(0, b"k").unwrap().value, b"v1");
        // A read that started before a write must not cache its old value.
        let w = c.begin_write(0, b"k");
        c.end_write(0, b"k", None, w);
        let stale_epoch = epoch;
        c.fill(0, b"k", &item(b"v1", 1), stale_epoch);
        assert!(c.get(0, b"k").is_err());
        // Write-through caches what was written...
        let w = c.begin_write(0, b"k");
        c.end_write(0, b"k", Some(item(b"v2", 2).borrowed()), w);
        assert_eq!(c.get(0, b"k").unwrap().value, b"v2");
        // ...unless another write overtook it: then nothing is cached.
        let slow = c.begin_write(0, b"k");
        let fast = c.begin_write(0, b"k");
        c.end_write(0, b"k", Some(item(b"v4", 4).borrowed()), fast);
        c.end_write(0, b"k", Some(item(b"v3", 3).borrowed()), slow);
        assert!(
            c.get(0, b"k").is_err(),
            "the older write must not stay cached"
        );
        c.clear();
        assert_eq!(c.items(), 0);
    }

    /// A write to another key of the same shard neither stops a write
    /// from caching what it wrote nor a read from filling (it did, with
    /// one epoch per shard, and the next reads of the key went to flash).
    #[test]
    fn writes_to_other_keys_of_a_shard_do_not_stop_caching() {
        let c = DramTier::new(1 << 20);
        let (ha, _) = c.shard(0, b"a");
        let other = (0..)
            .map(|i| format!("o{i}"))
            .find(|k| {
                let (h, _) = c.shard(0, k.as_bytes());
                h as usize % SHARDS == ha as usize % SHARDS
                    && Shard::stamp_slot(h) != Shard::stamp_slot(ha)
            })
            .unwrap();
        let other = other.as_bytes();
        let w = c.begin_write(0, b"a");
        let o = c.begin_write(0, other);
        c.end_write(0, other, Some(item(b"vo", 1).borrowed()), o);
        c.end_write(0, b"a", Some(item(b"va", 2).borrowed()), w);
        assert_eq!(c.get(0, b"a").unwrap().value, b"va");
        assert_eq!(c.get(0, other).unwrap().value, b"vo");
        // A read of "b" (a miss) racing with a write of `other`.
        let (hb, _) = c.shard(0, b"b");
        let read = c.get(0, b"b").unwrap_err();
        let o = c.begin_write(0, other);
        c.end_write(0, other, Some(item(b"vo2", 3).borrowed()), o);
        c.fill(0, b"b", &item(b"vb", 4), read);
        let (ho, _) = c.shard(0, other);
        let same_slot = hb as usize % SHARDS == ho as usize % SHARDS
            && Shard::stamp_slot(hb) == Shard::stamp_slot(ho);
        assert!(same_slot || c.get(0, b"b").is_ok());
        // After a clear, no read that started before it fills.
        let read = c.get(0, b"c").unwrap_err();
        c.clear();
        c.fill(0, b"c", &item(b"vc", 5), read);
        assert!(c.get(0, b"c").is_err());
    }

    /// Two keys with one 64-bit hash share a slot: a lookup never returns
    /// the other key's item, and the later key replaces the earlier.
    #[test]
    fn a_hash_collision_never_answers_for_the_other_key() {
        let c = DramTier::new(1 << 20);
        let e = c.get(0, b"a").unwrap_err();
        c.fill(0, b"a", &item(b"va", 1), e);
        let (h, shard) = c.shard(0, b"a");
        // "b" stored under "a"'s hash, as if the two collided.
        c.insert(
            &mut shard.lock(),
            h,
            0,
            b"b",
            Payload::Copied(item(b"vb", 2).borrowed()),
        );
        assert!(c.get(0, b"a").is_err(), "a's slot now holds b");
        let s = shard.lock();
        assert_eq!(s.map.len(), 1);
        assert_eq!(s.map[&h].key(), b"b");
        assert_eq!(s.bytes, s.map[&h].bytes());
    }

    /// A record value kept uncopied reads back as the item it holds,
    /// counts its whole allocation, and is replaced and dropped as a
    /// copied one is.
    #[test]
    fn a_kept_record_value_reads_back_and_counts_its_bytes() {
        let c = DramTier::new(1 << 20);
        let mut raw = vec![0xEEu8; 20];
        raw.extend_from_slice(&[7u8; 3000]);
        let raw = Arc::new(raw);
        let w = c.begin_write(0, b"page");
        let envelope = item(b"", 9).envelope;
        c.end_write_kept(0, b"page", raw.clone(), 20, (envelope, 9), w);
        let got = c.get(0, b"page").unwrap();
        assert_eq!(got.value, vec![7u8; 3000]);
        assert_eq!(got.cas, 9);
        assert!(c.bytes() >= 3020 + 4, "{}", c.bytes());
        assert_eq!(Arc::strong_count(&raw), 2, "kept, not copied");
        // A later write of the key replaces it (and lets the value go).
        let w = c.begin_write(0, b"page");
        c.end_write(0, b"page", Some(item(b"small", 10).borrowed()), w);
        assert_eq!(Arc::strong_count(&raw), 1);
        assert_eq!(c.get(0, b"page").unwrap().value, b"small");
        // An overtaken kept write caches nothing.
        let slow = c.begin_write(0, b"page");
        let fast = c.begin_write(0, b"page");
        c.end_write(0, b"page", Some(item(b"newer", 12).borrowed()), fast);
        c.end_write_kept(0, b"page", raw.clone(), 20, (envelope, 11), slow);
        assert!(c.get(0, b"page").is_err());
        assert_eq!(Arc::strong_count(&raw), 1);
    }

    #[test]
    fn stays_within_its_budget() {
        let c = DramTier::new(64 * 1024);
        for i in 0..10_000u32 {
            let k = format!("key{i}");
            let e = c.get(0, k.as_bytes()).unwrap_err();
            c.fill(0, k.as_bytes(), &item(&[7u8; 100], i as u64), e);
        }
        assert!(c.bytes() <= 64 * 1024, "{}", c.bytes());
        assert!(c.stats.evictions.load(Ordering::Relaxed) > 0);
        // Recently hit entries survive a sweep more often than cold ones.
        assert!(c.items() > 100);
    }
}
