//! The fast paths of insert and lookup: a neighborhood inside one LIVE
//! region of the current generation (for an insert, with a free slot in
//! it), which is nearly every operation (all but the 31 homes in 8 192
//! whose neighborhood straddles a region boundary, those of a region being
//! migrated, and inserts that need a hop, a grow or an overflow entry).
//! Part of `directory.rs` (and compiled with it, twice; see there).
//!
//! Why a second path: `h32-probe` (`nvdepot bench index`), which does only
//! a neighborhood's scan and a compare-and-swap, ran 2.6× faster than the
//! general insert (and 2.5× faster than the general lookup); a region lock
//! alone cost it 10 %. The rest was the general path's walk: one or two
//! guards, a window of two slices whose every slot access picks a slice,
//! per-region deltas, overflow-capacity accounting. Here the neighborhood
//! is one `[u64; H]` under one guard. Anything unusual returns having
//! changed nothing, and the general path decides (so the resize protocol
//! is untouched: this takes the same lock and checks the same states as
//! `lock_span`).

use super::{Inner, LIVE};
use crate::entry::{FpGeometry, HashEntry, Tag, H};
use crate::table;
use crate::{InsertError, Location};
use std::ops::Range;
use std::sync::atomic::Ordering;

impl Inner {
    /// Where the neighborhood at `home` lies in its region: the region's
    /// number in its table and the neighborhood's slots in the region's
    /// allocation; `None` if it straddles two regions.
    #[inline]
    fn one_region(&self, home: usize) -> Option<(usize, Range<usize>)> {
        let k = self.region_of(home);
        let start = home - (k << self.region_log2);
        (start + H <= self.region_len(k)).then_some((k, start..start + H))
    }

    /// Appends the locations of `fp`'s entries, as `lookup`, if its
    /// neighborhood lies in one region that is LIVE in the current
    /// generation. False: nothing was read, take the general path.
    #[inline]
    pub(super) fn lookup_one_region(
        &self,
        fp: u64,
        home: usize,
        tag: Tag,
        out: &mut Vec<Location>,
    ) -> bool {
        let Some((k, range)) = self.one_region(home) else {
            return false;
        };
        let d = self.current.load(Ordering::Acquire);
        let gen = self.gen(d);
        let idx = FpGeometry::table(fp, d as u32) << self.regions_per_table_log2 | k;
        self.prefetch_neighborhood(gen, idx, home, k);
        let region = &gen.regions[idx];
        let guard = region.slots.lock();
        // A read may use a LIVE region even while a resize is under way.
        if region.state.load(Ordering::Acquire) != LIVE {
            return false;
        }
        let chunk = guard.as_ref().expect("a LIVE region has slots");
        let slots: &[u64; H] = chunk.slots[range].try_into().expect("H slots");
        table::lookup_slots(slots, &chunk.overflow, home, tag, out);
        true
    }

    /// Adds the entry for `Expect::Absent { seen }` (`seen: None` for
    /// `Expect::New`) if the neighborhood at `home` lies in one region that
    /// is LIVE in the current generation, no resize is under way, and the
    /// neighborhood has a free slot. `None`: nothing was done, take the
    /// general path.
    #[inline]
    pub(super) fn insert_one_region(
        &self,
        fp: u64,
        home: usize,
        tag: Tag,
        new: Location,
        seen: Option<&[Location]>,
    ) -> Option<Result<Option<Location>, InsertError>> {
        let (k, range) = self.one_region(home)?;
        let d = self.current.load(Ordering::Acquire);
        let gen = self.gen(d);
        let idx = FpGeometry::table(fp, d as u32) << self.regions_per_table_log2 | k;
        // As `lock_live`: the slots' misses start before the lock's.
        self.prefetch_neighborhood(gen, idx, home, k);
        let region = &gen.regions[idx];
        let mut guard = region.slots.lock();
        // A write during a resize migrates first: the general path's job.
        if region.state.load(Ordering::Acquire) != LIVE || gen.next_ready.load(Ordering::Acquire) {
            return None;
        }
        let chunk = guard.as_mut().expect("a LIVE region has slots");
        let slots: &mut [u64; H] = (&mut chunk.slots[range]).try_into().expect("H slots");
        if let Some(seen) = seen {
            let unseen = |e: HashEntry| !seen.contains(&tag.location(e));
            // The per-slot loop, not `Tag::match_bits`: see `table::insert`.
            let in_slots = slots
                .iter()
                .enumerate()
                .any(|(off, &raw)| tag.matches(off, HashEntry(raw)) && unseen(HashEntry(raw)));
            let in_overflow = || {
                chunk
                    .overflow
                    .iter()
                    .any(|o| o.home as usize == home && tag.matches(0, o.entry) && unseen(o.entry))
            };
            if in_slots || (!chunk.overflow.is_empty() && in_overflow()) {
                return Some(Err(InsertError::Conflict));
            }
        }
        let off = slots.iter().position(|&raw| HashEntry(raw).is_free())?;
        slots[off] = tag.entry(off, new).0;
        region.add_count(1);
        self.entries.add(1);
        Some(Ok(None))
    }
}
