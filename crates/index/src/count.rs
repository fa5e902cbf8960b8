//! The exact entry count, sharded so that threads do not share its line.
//!
//! Every insert and remove changes the count. As one atomic, its cache line
//! moved between the cores on every operation: with 2 threads inserting,
//! each did 6.9 M inserts/s against 11.6 M alone (`nvdepot bench index`,
//! 50 M keys, batched). Here each thread adds to its own shard (a line of
//! its own, picked once per thread), and `get` sums the shards: exact
//! whenever no insert or remove is in flight, as a single counter was.
//!
//! The first `SHARDS - 1` threads of the process that change a count each
//! own a shard alone and add with a plain load and store: an atomic
//! read-modify-write is a full barrier on x86, and it was 2-5 % of a
//! batched insert (`nvdepot bench index --only nvdepot-prefetch`, 1
//! thread: 9.3 → 9.8 M inserts/s while growing). Later threads share the
//! last shard and add atomically.

use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};

/// Shards: more than the cores of the machines this runs on is no help;
/// threads beyond it share shards (still exact: the adds are atomic).
const SHARDS: usize = 16;

/// One shard on a cache-line pair of its own (the adjacent-line
/// prefetcher pairs lines).
#[repr(align(128))]
struct Shard(AtomicI64);

pub(crate) struct EntryCount {
    shards: [Shard; SHARDS],
}

/// Numbers the threads that change a count, in the order they first do.
static NEXT_THREAD: AtomicUsize = AtomicUsize::new(0);

/// The shard every thread numbered `SHARDS - 1` or later shares.
const SHARED: usize = SHARDS - 1;

thread_local! {
    /// This thread's shard: its own below [`SHARED`] (no other thread
    /// ever writes it), else the shared one.
    static SHARD: usize = NEXT_THREAD.fetch_add(1, Ordering::Relaxed).min(SHARED);
}

impl EntryCount {
    pub(crate) fn new() -> EntryCount {
        EntryCount {
            shards: std::array::from_fn(|_| Shard(AtomicI64::new(0))),
        }
    }

    /// Adds `delta` (negative for removals) on the calling thread's shard.
    #[inline]
    pub(crate) fn add(&self, delta: i64) {
        let i = SHARD.with(|s| *s);
        let shard = &self.shards[i].0;
        if i == SHARED {
            shard.fetch_add(delta, Ordering::Relaxed);
        } else {
            // Single writer: this thread alone ever stores to shard `i`
            // (of any count), so a load and a store lose no add; `get`
            // reads the stored value atomically.
            shard.store(shard.load(Ordering::Relaxed) + delta, Ordering::Relaxed);
        }
    }

    /// The sum of the shards.
    pub(crate) fn get(&self) -> usize {
        let sum: i64 = self
            .shards
            .iter()
            .map(|s| s.0.load(Ordering::Relaxed))
            .sum();
        debug_assert!(sum >= 0, "entry count {sum}");
        sum.max(0) as usize
    }

    /// Sets the count (an index loaded from a checkpoint, before it is
    /// shared: no `add` may run concurrently, as shard owners' adds are
    /// plain stores).
    pub(crate) fn set(&self, n: usize) {
        for s in &self.shards[1..] {
            s.0.store(0, Ordering::Relaxed);
        }
        self.shards[0].0.store(n as i64, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_from_many_threads_sum_exactly() {
        let c = EntryCount::new();
        std::thread::scope(|s| {
            for t in 0..40i64 {
                let c = &c;
                s.spawn(move || {
                    for _ in 0..1000 {
                        c.add(2);
                    }
                    // A thread may remove what another inserted.
                    c.add(-(t % 3));
                });
            }
        });
        let removed: i64 = (0..40).map(|t| t % 3).sum();
        assert_eq!(c.get() as i64, 40 * 2000 - removed);
        c.set(7);
        assert_eq!(c.get(), 7);
        c.add(-7);
        assert_eq!(c.get(), 0);
    }
}
