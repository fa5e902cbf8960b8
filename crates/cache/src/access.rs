//! The access table: per item, whether it was fetched since it was
//! written and when it was last accessed (memcached's `ITEM_FETCHED` bit
//! and `it->time`, which meta `mg` reports as `h` and `l`).
//!
//! The state lives in DRAM only and is bounded: a fixed array of 8-byte
//! entries in buckets of 8 (one cache line), keyed by the item key's hash.
//! Keeping it with the item on flash would cost a device write on a
//! fetch; keeping it for every item would cost DRAM per key, which the
//! 8-byte index entry exists to avoid. So a write or a fetch takes an
//! entry in its bucket (a free one, else the least recently accessed),
//! and an item whose entry was taken reads as "not fetched, idle since
//! the table started". `h` and `l` are thus exact for the items written
//! or fetched most recently (a few per bucket) and a best guess beyond,
//! much as memcached's own `l` depends on when its LRU thread ran.
//!
//! Entry (64 bits): `tag:32 | fetched:1 | time:31`, time in seconds since
//! the table was made; 0 = free (a tag is never 0). Entries are updated
//! with plain atomic stores: two writers racing in one bucket may lose
//! one's update, which only makes that item's state a guess.

use std::sync::atomic::{AtomicU64, Ordering};

/// Entries per bucket (one 64-byte cache line).
const WAYS: usize = 8;
const FETCHED: u64 = 1 << 31;
const TIME_MASK: u64 = FETCHED - 1;

/// An item's access state ([`AccessTable::get`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Access {
    /// Fetched since it was written.
    pub fetched: bool,
    /// Seconds since its last access.
    pub idle_secs: u32,
}

/// Bounded per-item access state; see the module comment.
pub struct AccessTable {
    slots: Box<[AtomicU64]>,
    /// Buckets - 1 (a power of two less one).
    bucket_mask: u64,
    /// Unix time the table's clock counts from.
    base: u32,
}

impl AccessTable {
    /// A table of about `bytes` (rounded down to a power of two, at least
    /// one bucket), clock starting at Unix time `now`.
    pub fn new(bytes: usize, now: u32) -> AccessTable {
        let wanted = (bytes / 8 / WAYS).max(1);
        let buckets = if wanted.is_power_of_two() {
            wanted
        } else {
            wanted.next_power_of_two() / 2
        };
        AccessTable {
            slots: (0..buckets * WAYS).map(|_| AtomicU64::new(0)).collect(),
            bucket_mask: buckets as u64 - 1,
            base: now,
        }
    }

    /// Bytes of DRAM the table holds.
    pub fn bytes(&self) -> usize {
        self.slots.len() * 8
    }

    fn bucket(&self, hash: u64) -> &[AtomicU64] {
        let b = (hash & self.bucket_mask) as usize;
        &self.slots[b * WAYS..(b + 1) * WAYS]
    }

    fn tag(hash: u64) -> u64 {
        ((hash >> 32) | 1) << 32
    }

    fn clock(&self, now: u32) -> u64 {
        u64::from(now.saturating_sub(self.base)) & TIME_MASK
    }

    /// The slot holding `hash`'s entry, and the entry.
    fn find(&self, hash: u64) -> Option<(&AtomicU64, u64)> {
        let tag = Self::tag(hash);
        self.bucket(hash).iter().find_map(|s| {
            let e = s.load(Ordering::Relaxed);
            (e & !(FETCHED | TIME_MASK) == tag).then_some((s, e))
        })
    }

    /// Stores `hash`'s entry: in its slot, else a free one, else over the
    /// least recently accessed of the bucket.
    fn put(&self, hash: u64, fetched: bool, now: u32) {
        let entry = Self::tag(hash) | if fetched { FETCHED } else { 0 } | self.clock(now);
        let slot = match self.find(hash) {
            Some((s, _)) => s,
            None => self
                .bucket(hash)
                .iter()
                .min_by_key(|s| {
                    let e = s.load(Ordering::Relaxed);
                    // Free slots first, then the oldest access.
                    if e == 0 {
                        0
                    } else {
                        1 + (e & TIME_MASK)
                    }
                })
                .expect("a bucket has slots"),
        };
        slot.store(entry, Ordering::Relaxed);
    }

    /// Starts loading `hash`'s bucket into the CPU cache, so that a
    /// [`fetched`](Self::fetched) after the item's lookup does not wait
    /// for a second cache miss of its own (the table is tens of MiB,
    /// touched at random: every access misses).
    pub fn prefetch(&self, hash: u64) {
        let bucket = self.bucket(hash).as_ptr();
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            // SAFETY: SSE is part of the x86_64 baseline, and a prefetch
            // only hints the cache: it never faults and reads nothing into
            // the program (the pointer is into `slots` anyway).
            unsafe { _mm_prefetch::<_MM_HINT_T0>(bucket.cast()) };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = bucket;
    }

    /// A new item was written under `hash`: not fetched, accessed now.
    pub fn written(&self, hash: u64, now: u32) {
        self.put(hash, false, now);
    }

    /// The item under `hash` was fetched: the first fetch marks it
    /// fetched; later ones make `now` its last access (memcached moves
    /// the time when an already fetched item is hit again).
    pub fn fetched(&self, hash: u64, now: u32) {
        match self.find(hash) {
            Some((slot, e)) if e & FETCHED == 0 => slot.store(e | FETCHED, Ordering::Relaxed),
            Some((slot, e)) => {
                // Hits within the same second leave the entry as it is: no
                // store, so that workers reading one hot item do not pull
                // its cache line back and forth between cores.
                let updated = (e & !TIME_MASK) | self.clock(now);
                if updated != e {
                    slot.store(updated, Ordering::Relaxed);
                }
            }
            None => self.put(hash, true, now),
        }
    }

    /// The access state of the item under `hash` at `now`.
    pub fn get(&self, hash: u64, now: u32) -> Access {
        let since = match self.find(hash) {
            Some((_, e)) => {
                return Access {
                    fetched: e & FETCHED != 0,
                    idle_secs: (self.clock(now).saturating_sub(e & TIME_MASK)) as u32,
                }
            }
            None => self.clock(now),
        };
        Access {
            fetched: false,
            idle_secs: since as u32,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: u32 = 1_700_000_000;

    #[test]
    fn prefetch_changes_nothing() {
        let t = AccessTable::new(4096, T0);
        for h in [0, 1, u64::MAX, 0xdead_beef_u64 << 20] {
            t.prefetch(h);
            assert_eq!(
                t.get(h, T0 + 3),
                Access {
                    fetched: false,
                    idle_secs: 3
                }
            );
        }
        t.written(7, T0);
        t.prefetch(7);
        t.fetched(7, T0 + 1);
        // The first fetch marks it; the time stays (memcached).
        assert_eq!(
            t.get(7, T0 + 1),
            Access {
                fetched: true,
                idle_secs: 1
            }
        );
    }

    #[test]
    fn written_then_fetched() {
        let t = AccessTable::new(4096, T0);
        assert_eq!(t.bytes(), 4096);
        let h = 0x1234_5678_9abc_def0;
        t.written(h, T0 + 10);
        assert_eq!(
            t.get(h, T0 + 12),
            Access {
                fetched: false,
                idle_secs: 2
            }
        );
        // The first fetch marks it; the time stays (memcached).
        t.fetched(h, T0 + 13);
        assert_eq!(
            t.get(h, T0 + 13),
            Access {
                fetched: true,
                idle_secs: 3
            }
        );
        // A second fetch moves the time.
        t.fetched(h, T0 + 15);
        assert_eq!(t.get(h, T0 + 16).idle_secs, 1);
        // A new write starts over.
        t.written(h, T0 + 20);
        assert_eq!(
            t.get(h, T0 + 20),
            Access {
                fetched: false,
                idle_secs: 0
            }
        );
    }

    #[test]
    fn an_unknown_item_is_unfetched_since_the_start() {
        let t = AccessTable::new(64, T0);
        assert_eq!(
            t.get(42, T0 + 7),
            Access {
                fetched: false,
                idle_secs: 7
            }
        );
    }

    #[test]
    fn a_full_bucket_gives_up_its_least_recent_entry() {
        // One bucket: every hash lands in it.
        let t = AccessTable::new(64, T0);
        let hashes: Vec<u64> = (1..=WAYS as u64 + 1).map(|i| i << 40).collect();
        for (i, &h) in hashes.iter().enumerate() {
            t.written(h, T0 + i as u32);
            t.fetched(h, T0 + i as u32);
        }
        // The first (oldest) was replaced by the ninth; the others stay.
        assert!(!t.get(hashes[0], T0 + 20).fetched);
        for &h in &hashes[1..] {
            assert!(t.get(h, T0 + 20).fetched, "{h:#x}");
        }
    }
}
