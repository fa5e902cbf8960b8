//! `h32-probe`: not an index, a bound. The least work any table with
//! uDepot's hopscotch neighbourhood does per operation on this machine:
//! an operation's key may sit in any of the H = 32 eight-byte slots after
//! its home slot (256 bytes: 4 or 5 cache lines), so a lookup compares all
//! 32, and an insert compares all 32 (is the key already there?) and then
//! claims the first free one. Nothing else: no directory, no lock, no
//! fingerprint arithmetic, no entry count, no moving of entries to make
//! room (the rare key whose 32 slots are full goes to a side set), no
//! growing, and the same prefetched batches of 16 as
//! `nvdepot-prefetch`. Its slots are the ones nvdepot's pre-sized index
//! gets for the same keys (huge pages, same occupancy).
//!
//! Its rate is therefore an upper bound for nvdepot's index (and for any
//! design keeping uDepot's 8-byte entries in 32-slot neighbourhoods): the
//! gap between the two is what the index's own work costs; the probe's
//! rate over dashmap's is the most the ≥ 2× goal can reach without a
//! different table layout.

use std::sync::atomic::{AtomicU64, Ordering};

use nvdepot_index::Location;
use parking_lot::Mutex;

use super::tables::{PassThrough, Table};

/// Neighbourhood size, as in `nvdepot_index` (uDepot's H).
const H: usize = 32;
/// A free slot (a key is never `u64::MAX`: see [`ProbeBound::slot_value`]).
const FREE: u64 = u64::MAX;
/// Huge page size: the slots are allocated and advised in these.
const HUGE_PAGE: usize = 2 << 20;

pub(super) struct ProbeBound {
    /// `len + H` slots (the last neighbourhood does not wrap), in a
    /// huge-page-aligned anonymous mapping.
    slots: &'static [AtomicU64],
    map: *mut libc::c_void,
    map_len: usize,
    /// Homes are `0..len`.
    len: usize,
    /// Keys whose 32 slots were all taken (about 1 in 1 000 at nvdepot's
    /// occupancy: the probe does not move entries to make room, as
    /// hopscotch does), kept so that a lookup never misses. A hash set:
    /// a list scanned by every such lookup once took 9 µs each.
    overflow: Mutex<hashbrown::HashSet<u64, PassThrough>>,
    batch: usize,
}

// SAFETY: the raw mapping pointer is only used to unmap in `drop`; the
// slots are atomics, shared by reference like any `&[AtomicU64]`.
unsafe impl Sync for ProbeBound {}
// SAFETY: as above; the mapping belongs to the value, not to a thread.
unsafe impl Send for ProbeBound {}

impl ProbeBound {
    /// A table of `len` homes, all free, prefetched in batches of `batch`.
    pub(super) fn new(len: usize, batch: usize) -> std::io::Result<ProbeBound> {
        let bytes = (len + H) * 8;
        let map_len = bytes.next_multiple_of(HUGE_PAGE) + HUGE_PAGE;
        // SAFETY: an anonymous private mapping; no pointer is passed in and
        // the result is checked before use.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let start = (map as usize).next_multiple_of(HUGE_PAGE);
        // SAFETY: `start..start + bytes` lies inside the mapping (it was
        // over-allocated by a huge page for the alignment); madvise only
        // advises, and the slots are filled before anything reads them.
        let slots = unsafe {
            libc::madvise(start as *mut libc::c_void, bytes, libc::MADV_HUGEPAGE);
            std::ptr::write_bytes(start as *mut u8, 0xff, bytes);
            std::slice::from_raw_parts(start as *const AtomicU64, len + H)
        };
        Ok(ProbeBound {
            slots,
            map,
            map_len,
            len,
            overflow: Mutex::new(hashbrown::HashSet::with_hasher(PassThrough::default())),
            batch,
        })
    }

    #[inline]
    fn home(&self, key: u64) -> usize {
        // Keys are SplitMix64 outputs: uniformly spread already.
        ((key as u128 * self.len as u128) >> 64) as usize
    }

    /// What a slot holds for `key`: the key itself, `FREE` moved aside.
    #[inline]
    fn slot_value(key: u64) -> u64 {
        if key == FREE {
            0
        } else {
            key
        }
    }

    #[inline]
    fn neighbourhood(&self, key: u64) -> &[AtomicU64] {
        let home = self.home(key);
        &self.slots[home..home + H]
    }
}

impl Drop for ProbeBound {
    fn drop(&mut self) {
        // SAFETY: `map`/`map_len` are this value's own mapping, unmapped
        // once; `slots` points into it and is not used after this.
        unsafe { libc::munmap(self.map, self.map_len) };
    }
}

impl Table for ProbeBound {
    #[inline]
    fn insert(&self, key: u64, _value: u64, _: &mut Vec<Location>) -> u64 {
        let v = Self::slot_value(key);
        let n = self.neighbourhood(key);
        // Two passes, as the index does: a fused one mispredicts (see
        // bench/results/index.md).
        if n.iter().any(|s| s.load(Ordering::Relaxed) == v) {
            return 1;
        }
        for s in n {
            if s.load(Ordering::Relaxed) == FREE
                && s.compare_exchange(FREE, v, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
            {
                return 0;
            }
        }
        self.overflow.lock().insert(v);
        0
    }

    #[inline]
    fn lookup(&self, key: u64, _value: u64, _: &mut Vec<Location>) -> bool {
        let v = Self::slot_value(key);
        self.neighbourhood(key)
            .iter()
            .any(|s| s.load(Ordering::Relaxed) == v)
            || self.overflow.lock().contains(&v)
    }

    fn bytes_and_len(&self) -> (usize, usize) {
        // No entry count (it would be work the bound does not do): the
        // memory figures of this row are the slots over the keys.
        (self.slots.len() * 8, 0)
    }

    fn batch(&self) -> usize {
        self.batch
    }

    #[inline]
    fn prefetch(&self, key: u64) {
        // The same hint, line by line, as the index's own prefetch.
        nvdepot_index::prefetch_lines(self.neighbourhood(key).as_ptr() as usize, H * 8);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_what_it_holds_even_past_full_neighbourhoods() {
        // 4 homes: most keys overflow their 32 slots.
        let t = ProbeBound::new(4, 16).unwrap();
        let mut scratch = Vec::new();
        let keys: Vec<u64> = (0..200).map(crate::rng::splitmix64).collect();
        for &k in &keys {
            assert_eq!(t.insert(k, 0, &mut scratch), 0);
        }
        assert_eq!(t.insert(keys[7], 0, &mut scratch), 1, "already there");
        assert!(keys.iter().all(|&k| t.lookup(k, 0, &mut scratch)));
        assert!(!t.lookup(crate::rng::splitmix64(1000), 0, &mut scratch));
        assert!(!t.overflow.lock().is_empty());
    }
}
