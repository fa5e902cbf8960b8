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

use super::{Gen, Inner, Region, LIVE};
use crate::entry::{FpGeometry, Tag, H};
use crate::table;
use crate::{Expect, InsertError, Location};
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

    /// Region `k` of `fp`'s table in the current generation, with the
    /// slots of the neighborhood at `home` already being loaded (as
    /// `lock_live`: their misses start before the lock's).
    #[inline]
    fn current_region(&self, fp: u64, home: usize, k: usize) -> (&Gen, &Region) {
        let d = self.current.load(Ordering::Acquire);
        let gen = self.gen(d);
        let idx = FpGeometry::table(fp, d as u32) << self.regions_per_table_log2 | k;
        self.prefetch_neighborhood(gen, idx, home, k);
        (gen, &gen.regions[idx])
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
        let (_, region) = self.current_region(fp, home, k);
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

    /// Adds the entry for `expect` (`Absent` or `New`) if the neighborhood
    /// at `home` lies in one region that is LIVE in the current generation,
    /// no resize is under way, and the neighborhood has a free slot.
    /// `None`: nothing was done (always for `Replace`), take the general
    /// path.
    #[inline]
    pub(super) fn insert_one_region(
        &self,
        fp: u64,
        home: usize,
        tag: Tag,
        new: Location,
        expect: Expect<'_>,
    ) -> Option<Result<Option<Location>, InsertError>> {
        let seen = match expect {
            Expect::Absent { seen } => Some(seen),
            Expect::New => None,
            Expect::Replace(_) => return None,
        };
        let (k, range) = self.one_region(home)?;
        let (gen, region) = self.current_region(fp, home, k);
        let mut guard = region.slots.lock();
        // A write during a resize migrates first: the general path's job.
        if region.state.load(Ordering::Acquire) != LIVE || gen.next_ready.load(Ordering::Acquire) {
            return None;
        }
        let chunk = guard.as_mut().expect("a LIVE region has slots");
        let slots: &mut [u64; H] = (&mut chunk.slots[range]).try_into().expect("H slots");
        if seen.is_some_and(|seen| table::unseen_entry(&*slots, &chunk.overflow, home, tag, seen)) {
            return Some(Err(InsertError::Conflict));
        }
        let off = table::first_free(&*slots)?;
        slots[off] = tag.entry(off, new).0;
        region.add_count(1);
        self.entries.add(1);
        Some(Ok(None))
    }
}
