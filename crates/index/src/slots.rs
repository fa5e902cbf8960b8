//! Memory for the tables' slots, on transparent huge pages where it can be.
//!
//! Why: the tables of a large index are hundreds of MiB touched at random
//! (50 M keys: 0.5 GiB). On 4 KiB pages nearly every probe also misses the
//! TLB, and in a VM each miss is a two-dimensional page walk. uDepot backs
//! its index with huge pages for the same reason.
//!
//! A lock region's slots (64 KiB with the default regions) are cut from a
//! 2 MiB block, aligned to 2 MiB and advised `MADV_HUGEPAGE` before its
//! first touch, so that the kernel backs it with one huge page when
//! transparent huge pages are `always` or `madvise` (with `never`, or where
//! no huge page is free, it is ordinary memory and nothing else changes).
//! Slot runs whose size does not divide a block (the last region of each
//! table carries `H - 1` extra slots; test-sized regions are small), and
//! the first 2 MiB of an index (a small index would leave most of a block
//! unused), are plain heap allocations.
//!
//! A block lives as long as any run cut from it (each holds an `Arc` of
//! it). Runs are never handed back one by one: the index frees slot memory
//! only when it is dropped (a resize moves every run to the next
//! generation), so a block has no free list.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::ptr::NonNull;
use std::sync::Arc;

use parking_lot::Mutex;

/// Bytes of a block: one x86-64 huge page.
pub(crate) const BLOCK_BYTES: usize = 2 << 20;

/// A 2 MiB, 2 MiB-aligned allocation, uninitialised until carved.
struct Block {
    ptr: NonNull<u8>,
}

// SAFETY: a Block is plain memory owned by this value; its runs are handed
// out disjointly (`SlotArena::alloc`), each to one owner.
unsafe impl Send for Block {}
// SAFETY: shared references to a Block never touch its memory.
unsafe impl Sync for Block {}

impl Block {
    fn layout() -> Layout {
        Layout::from_size_align(BLOCK_BYTES, BLOCK_BYTES).expect("a valid layout")
    }

    fn new() -> Block {
        let layout = Block::layout();
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { alloc(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            handle_alloc_error(layout)
        };
        #[cfg(all(target_os = "linux", not(miri)))]
        // SAFETY: advice about memory this block owns, whole and aligned
        // to a page; it changes how the kernel backs the range, never its
        // contents. A refusal (THP off, an old kernel) is harmless.
        unsafe {
            libc::madvise(raw.cast(), BLOCK_BYTES, libc::MADV_HUGEPAGE);
        }
        Block { ptr }
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        // SAFETY: allocated in `Block::new` with this layout, freed once.
        unsafe { dealloc(self.ptr.as_ptr(), Block::layout()) }
    }
}

/// One run of slots: `[u64]` that a region owns alone.
pub(crate) struct Slots {
    ptr: NonNull<u64>,
    len: usize,
    /// The block the run was cut from; `None`: a heap allocation of its
    /// own (`Box<[u64]>`), freed on drop.
    block: Option<Arc<Block>>,
}

// SAFETY: a Slots owns its run exclusively, like a Box<[u64]>: no other
// value aliases it (runs of one block are disjoint), and the Arc keeps the
// block alive.
unsafe impl Send for Slots {}
// SAFETY: `&Slots` only gives `&[u64]`.
unsafe impl Sync for Slots {}

impl Slots {
    fn boxed(v: Box<[u64]>) -> Slots {
        let len = v.len();
        let ptr = NonNull::new(Box::into_raw(v).cast::<u64>()).expect("Box is non-null");
        Slots {
            ptr,
            len,
            block: None,
        }
    }
}

impl std::ops::Deref for Slots {
    type Target = [u64];

    fn deref(&self) -> &[u64] {
        // SAFETY: `ptr` is valid for `len` initialised u64s for as long
        // as `self` lives (owned Box, or a run of a live block written in
        // full when carved), and `&self` excludes `&mut` use.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl std::ops::DerefMut for Slots {
    fn deref_mut(&mut self) -> &mut [u64] {
        // SAFETY: as for `deref`; `&mut self` makes the access unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for Slots {
    fn drop(&mut self) {
        if self.block.is_none() {
            let run = std::ptr::slice_from_raw_parts_mut(self.ptr.as_ptr(), self.len);
            // SAFETY: made by `Box::into_raw` of a `Box<[u64]>` of `len`
            // in `Slots::boxed`, and freed only here.
            drop(unsafe { Box::from_raw(run) });
        }
        // A run of a block is freed with the block, when its last run goes.
    }
}

/// What a new run of slots holds.
#[derive(Clone, Copy)]
pub(crate) enum Init<'a> {
    /// `len` slots of `value`.
    Fill { len: usize, value: u64 },
    /// A copy of these words (a table loaded from a checkpoint).
    Copy(&'a [u64]),
}

impl Init<'_> {
    fn len(self) -> usize {
        match self {
            Init::Fill { len, .. } => len,
            Init::Copy(words) => words.len(),
        }
    }
}

/// Hands out runs of slots, cutting those of a block-dividing size from
/// 2 MiB blocks (see the module comment).
pub(crate) struct SlotArena {
    /// The block being cut and the byte offset of its first free run.
    current: Mutex<Option<(Arc<Block>, usize)>>,
}

impl SlotArena {
    pub(crate) fn new() -> SlotArena {
        SlotArena {
            current: Mutex::new(None),
        }
    }

    /// A run of slots holding `init`, and the bytes of memory it newly
    /// takes (a whole block when it starts one, 0 for a further run of a
    /// block, else its own size). Without `carve`, a heap allocation.
    pub(crate) fn alloc(&self, init: Init<'_>, carve: bool) -> (Slots, usize) {
        let len = init.len();
        let bytes = len * std::mem::size_of::<u64>();
        if !(carve && bytes.is_power_of_two() && (4096..=BLOCK_BYTES).contains(&bytes)) {
            let run = match init {
                Init::Fill { len, value } => vec![value; len].into_boxed_slice(),
                Init::Copy(words) => words.into(),
            };
            return (Slots::boxed(run), bytes);
        }
        let mut cur = self.current.lock();
        let mut taken = 0;
        let (block, offset) = match cur.take() {
            Some((b, off)) if off + bytes <= BLOCK_BYTES => (b, off),
            _ => {
                taken = BLOCK_BYTES;
                (Arc::new(Block::new()), 0)
            }
        };
        // SAFETY: `offset + bytes <= BLOCK_BYTES`, so the run is inside
        // the block. `offset` is a sum of earlier runs' sizes, each a
        // power of two of at least 4096, so the run is 4 KiB-aligned.
        let run = unsafe { block.ptr.as_ptr().add(offset) }.cast::<u64>();
        debug_assert!((run as usize).is_multiple_of(4096));
        match init {
            Init::Fill { value, .. } => {
                for i in 0..len {
                    // SAFETY: slot `i < len` of the run, which lies in the
                    // block and overlaps no other run (`offset` only
                    // grows); written through the raw pointer, since the
                    // memory is uninitialised until this loop ends.
                    unsafe { run.add(i).write(value) };
                }
            }
            // SAFETY: `words` has `len` u64s; the run has room for `len`,
            // overlaps no other run, and cannot overlap `words` (borrowed
            // from elsewhere while the run is fresh).
            Init::Copy(words) => unsafe { std::ptr::copy_nonoverlapping(words.as_ptr(), run, len) },
        }
        let ptr = NonNull::new(run).expect("inside a non-null block");
        let slots = Slots {
            ptr,
            len,
            block: Some(block.clone()),
        };
        if offset + bytes < BLOCK_BYTES {
            *cur = Some((block, offset + bytes));
        }
        (slots, taken)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_of_a_block_are_disjoint_filled_and_outlive_the_arena() {
        let arena = SlotArena::new();
        let len = 8192; // 64 KiB: 32 runs per block
        let mut runs = Vec::new();
        let mut taken = 0;
        for _ in 0..40 {
            let (r, t) = arena.alloc(
                Init::Fill {
                    len,
                    value: u64::MAX,
                },
                true,
            );
            taken += t;
            runs.push(r);
        }
        assert_eq!(taken, 2 * BLOCK_BYTES, "40 runs of 64 KiB take two blocks");
        assert!(runs
            .iter()
            .all(|r| r.len() == len && r.iter().all(|&w| w == u64::MAX)));
        for (i, r) in runs.iter_mut().enumerate() {
            r.fill(i as u64);
        }
        drop(arena);
        for (i, r) in runs.iter().enumerate() {
            assert!(r.iter().all(|&w| w == i as u64), "run {i} was overwritten");
        }
        // The first 32 share one 2 MiB-aligned block.
        let base = runs[0].as_ptr() as usize;
        assert_eq!(base % BLOCK_BYTES, 0);
        assert_eq!(runs[31].as_ptr() as usize, base + 31 * len * 8);
        runs.truncate(5);
        runs[4][len - 1] = 7;
        assert_eq!(runs[4][len - 1], 7);
    }

    #[test]
    fn copied_runs_hold_their_source_carved_or_not() {
        let arena = SlotArena::new();
        let words: Vec<u64> = (0..8192).map(|i| i * 3 + 1).collect();
        for carve in [true, false] {
            let (r, _) = arena.alloc(Init::Copy(&words), carve);
            assert_eq!(&r[..], &words[..], "carve {carve}");
        }
        let odd = &words[..8192 - 31];
        let (r, taken) = arena.alloc(Init::Copy(odd), true);
        assert_eq!((&r[..], taken), (odd, odd.len() * 8));
    }

    #[test]
    fn odd_sizes_and_uncarved_runs_are_heap_allocations() {
        let arena = SlotArena::new();
        let (r, taken) = arena.alloc(
            Init::Fill {
                len: 8192 + 31,
                value: 3,
            },
            true,
        );
        assert_eq!((r.len(), taken), (8223, 8223 * 8));
        assert!(r.iter().all(|&w| w == 3));
        let (small, taken) = arena.alloc(Init::Fill { len: 256, value: 5 }, true);
        assert_eq!((small.len(), taken), (256, 2048));
        assert!(small.iter().all(|&w| w == 5));
        let (r, taken) = arena.alloc(
            Init::Fill {
                len: 8192,
                value: 9,
            },
            false,
        );
        assert_eq!((r.len(), taken), (8192, 65536), "not carved: its own size");
        assert!(r.iter().all(|&w| w == 9));
    }
}
