//! Growing the directory: a failed insert's decision to grow, the new
//! generation, and the migration of regions into it (by operations, by
//! `finish_resize`, or by the background helper). Part of `directory.rs`
//! (and compiled with it, twice; see there), whose header describes the
//! protocol.

#[cfg(test)]
use super::marks;
use super::{
    Chunk, Gen, Inner, Ordering, Region, GROW_OCCUPANCY_PERCENT, LIVE, MIGRATED, UNPOPULATED,
};
use crate::entry::{FpGeometry, HashEntry, TABLES_LOG2_MAX};
use crate::table::{self, Overflow, Window};

impl Inner {
    /// Makes region `k` of `table` in generation `d` LIVE by migrating its
    /// source region in generation `d - 1` (populating that one first if
    /// needed). Called with no locks held.
    pub(super) fn populate(&self, d: usize, table: usize, k: usize) {
        let src_d = d - 1;
        let src_table = table & ((1 << src_d) - 1);
        let gen = self.gen(src_d);
        let r = &gen.regions[src_table << self.regions_per_table_log2 | k];
        loop {
            let mut g = r.slots.lock();
            match r.state.load(Ordering::Acquire) {
                LIVE => {
                    mark!(POPULATE);
                    return self.migrate(gen, src_table, k, &mut g);
                }
                MIGRATED => return,
                _ => {
                    drop(g);
                    self.populate(src_d, src_table, k);
                }
            }
        }
    }

    /// Moves LIVE region `(table, k)` of `gen`, whose lock is `g`, into the
    /// next generation: entries with tag bit `d` clear stay in the same
    /// allocation (now table `table` of the next generation), the others
    /// are copied to a new one (table `table + 2^d`), at the same slots.
    pub(super) fn migrate(&self, gen: &Gen, table: usize, k: usize, g: &mut Option<Chunk>) {
        let d = gen.tables_log2;
        let next = self.gen(d as usize + 1);
        let mut lo = g.take().expect("live region has slots");
        let mut hi = self.alloc_chunk(k);
        let bit = 1u64 << d;
        let (mut n_lo, mut n_hi) = (0u32, 0u32);
        // Branch-free: which half an entry goes to is its tag bit, a coin
        // flip the branch predictor would miss every other entry.
        for (raw, out) in lo.slots.iter_mut().zip(hi.slots.iter_mut()) {
            let e = HashEntry(*raw);
            let used = !e.is_free();
            debug_assert!(
                !used || FpGeometry::table(e.tag(), d) == table,
                "entry in the wrong table"
            );
            let go = used & (e.tag() & bit != 0);
            *out = if go { e.0 } else { HashEntry::FREE.0 };
            *raw = if go { HashEntry::FREE.0 } else { e.0 };
            n_hi += go as u32;
            n_lo += (used & !go) as u32;
        }
        // Overflow entries follow their tag bit, and move back into the
        // (now half-empty) slots where their neighborhood is in this region.
        let base = k << self.region_log2;
        let capacity_before = lo.overflow.capacity();
        let (stay, go): (Vec<Overflow>, Vec<Overflow>) = lo
            .overflow
            .drain(..)
            .partition(|o| o.entry.tag() & bit == 0);
        for (chunk, list, n) in [(&mut lo, stay, &mut n_lo), (&mut hi, go, &mut n_hi)] {
            *n += list.len() as u32;
            chunk.overflow = list;
            let mut w = Window::new(base, &mut chunk.slots, &mut [], &mut chunk.overflow);
            table::drain_overflow(&mut w);
            chunk.overflow.shrink_to_fit();
        }
        self.account_overflow(
            capacity_before,
            lo.overflow.capacity() + hi.overflow.capacity(),
        );
        let src = &gen.regions[table << self.regions_per_table_log2 | k];
        debug_assert_eq!(src.count.load(Ordering::Relaxed), n_lo + n_hi);
        for (t, chunk, n) in [(table, lo, n_lo), (table | 1 << d, hi, n_hi)] {
            let idx = t << self.regions_per_table_log2 | k;
            let r = &next.regions[idx];
            let mut slots = r.slots.lock();
            debug_assert!(slots.is_none() && r.state.load(Ordering::Relaxed) == UNPOPULATED);
            next.set_hint(idx, Some(&chunk));
            *slots = Some(chunk);
            r.count.store(n, Ordering::Relaxed);
            r.state.store(LIVE, Ordering::Release);
        }
        src.count.store(0, Ordering::Relaxed);
        gen.set_hint(table << self.regions_per_table_log2 | k, None);
        src.state.store(MIGRATED, Ordering::Release);
        if gen.remaining.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.advance();
        }
    }

    /// Moves `current` past every generation whose migration is complete.
    pub(super) fn advance(&self) {
        loop {
            let d = self.current.load(Ordering::SeqCst);
            let gen = self.gen(d);
            if !gen.next_ready.load(Ordering::SeqCst) || gen.remaining.load(Ordering::SeqCst) != 0 {
                return;
            }
            let _ = self
                .current
                .compare_exchange(d, d + 1, Ordering::SeqCst, Ordering::SeqCst);
        }
    }

    /// Starts doubling generation `d` unless that already happened. Returns
    /// true if this call started it.
    pub(super) fn grow(&self, d: usize) -> bool {
        let _serialize = self.grow_lock.lock();
        let gen = self.gen(d);
        if d >= TABLES_LOG2_MAX as usize || gen.next_ready.load(Ordering::Acquire) {
            return false;
        }
        let count = 1 << (d + 1 + self.regions_per_table_log2 as usize);
        let regions = (0..count)
            .map(|_| Region::new(UNPOPULATED, None, 0))
            .collect();
        self.install_gen(d as u32 + 1, regions);
        gen.remaining.store(gen.regions.len(), Ordering::SeqCst);
        gen.next_ready.store(true, Ordering::SeqCst);
        true
    }

    /// Runs the grow an insert returned `ResizeAction::Requested(d)` for.
    pub(crate) fn grow_requested(&self, d: usize) {
        self.grow(d);
        let _ = self
            .grow_pending
            .compare_exchange(d + 1, 0, Ordering::AcqRel, Ordering::Acquire);
    }

    /// Whether a failed insert in generation `d` should double it rather
    /// than use the overflow list (see "Overflow" in docs/INDEX.md).
    pub(super) fn should_grow(&self, d: usize, overflow_len: usize) -> bool {
        let capacity = 1usize << (d as u32 + self.fpg.table_entries_log2);
        // An estimate is enough here, and bounds the cost of a failed insert.
        let len = self.sampled_len(256);
        overflow_len >= self.overflow_max || len * 100 >= capacity * GROW_OCCUPANCY_PERCENT
    }

    pub(crate) fn resize_in_progress(&self) -> bool {
        let d = self.current.load(Ordering::Acquire);
        self.gen(d).next_ready.load(Ordering::Acquire)
    }

    /// Migrates every remaining region (of every resize in flight). As the
    /// `background` helper, stops if the index is dropped and yields the CPU
    /// after each region so that foreground operations are not preempted.
    /// A grow that an insert requested but whose helper has not run yet is
    /// done first (so that no resize can start after this returns, unless
    /// new inserts ask for one).
    pub(crate) fn finish_resize(&self, background: bool) {
        let pending = self.grow_pending.load(Ordering::Acquire);
        if pending != 0 {
            self.grow_requested(pending - 1);
        }
        loop {
            let d = self.current.load(Ordering::SeqCst);
            let gen = self.gen(d);
            if !gen.next_ready.load(Ordering::SeqCst) {
                return;
            }
            for (idx, r) in gen.regions.iter().enumerate() {
                if background && self.closing.load(Ordering::Relaxed) {
                    return;
                }
                if r.state.load(Ordering::Acquire) == MIGRATED {
                    continue;
                }
                let mut g = r.slots.lock();
                // `current` is fully populated, so the region is LIVE
                // unless someone migrated it meanwhile.
                if r.state.load(Ordering::Acquire) == LIVE {
                    let (table, k) = (idx >> self.regions_per_table_log2, idx & (self.rpt() - 1));
                    self.migrate(gen, table, k, &mut g);
                    drop(g);
                    if background {
                        super::super::sync::yield_now();
                    }
                }
            }
            self.advance();
        }
    }
}
