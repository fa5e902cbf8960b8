//! Heap buffers aligned for `O_DIRECT`.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// A zero-initialised byte buffer whose address and length are multiples of
/// an alignment (as `O_DIRECT` requires).
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    /// The allocation: `len` bytes at the memory alignment of
    /// [`memory_align`], which is at least `align`.
    layout: Layout,
    /// The alignment asked for: the length is a multiple of it.
    align: usize,
}

/// Memory pages: what a buffer's physical segments are made of.
const PAGE_BYTES: usize = 4096;

/// Where a buffer of `len` bytes (a multiple of `align`) starts: on a
/// boundary that lets it span the fewest memory pages. A buffer of at most
/// a page never crosses one; a larger one starts on a page.
///
/// Why: a device IO carries one physical segment per page its buffer
/// touches, and a virtio disk serves each segment on its own. fio's 4 KiB
/// random reads at QD 128 on this VM's disk: 133 k/s into page-aligned
/// buffers, 113 k/s into buffers starting 512 bytes into a page (0.85),
/// which is where a 512-aligned 4 KiB buffer from the allocator usually
/// starts.
fn memory_align(len: usize, align: usize) -> usize {
    align.max(len.next_power_of_two().min(PAGE_BYTES))
}

// SAFETY: AlignedBuf owns its allocation exclusively, like a Vec<u8>.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared access only hands out &[u8].
unsafe impl Sync for AlignedBuf {}

/// The programmer-error rules of the `Device` contract: `None` if an IO of
/// `len` bytes at `offset` from buffer `addr` obeys them, else the message
/// naming what is wrong.
pub(crate) fn contract_violation(
    device: &str,
    op: &str,
    (addr, len, offset): (*const u8, usize, u64),
    (align, capacity): (usize, u64),
) -> Option<String> {
    if !is_aligned(offset, len, addr, align) {
        return Some(format!(
            "{op} on {device}: offset {offset:#x}, length {len} and buffer address {addr:p} \
             must be multiples of the alignment {align}"
        ));
    }
    if offset
        .checked_add(len as u64)
        .is_none_or(|end| end > capacity)
    {
        return Some(format!(
            "{op} on {device}: offset {offset:#x} + {len} bytes is past the capacity {capacity:#x}"
        ));
    }
    None
}

impl AlignedBuf {
    /// Allocates `len` bytes (rounded up to `align`) aligned to `align`.
    ///
    /// Panics if `align` is not a power of two (a programmer error).
    pub fn new(len: usize, align: usize) -> AlignedBuf {
        assert!(
            align.is_power_of_two(),
            "alignment {align} is not a power of two"
        );
        let len = len.div_ceil(align).max(1) * align;
        let layout = Layout::from_size_align(len, memory_align(len, align)).expect("buffer layout");
        // SAFETY: layout has a non-zero size (len >= align >= 1).
        let raw = unsafe { alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        AlignedBuf { ptr, layout, align }
    }

    /// Length in bytes (a multiple of the alignment).
    pub fn len(&self) -> usize {
        self.layout.size()
    }

    /// Always false: a buffer holds at least one aligned block.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The alignment this buffer was made with.
    pub fn align(&self) -> usize {
        self.align
    }

    /// A buffer like [`AlignedBuf::new`]'s, taken from this thread's
    /// recycled buffers when one of the same size and alignment is there
    /// (its bytes are then whatever it held: use it for reads that fill it).
    /// Saves an allocation and a zeroing per device read on hot paths.
    pub fn take(len: usize, align: usize) -> AlignedBuf {
        let want = len.div_ceil(align).max(1) * align;
        let pool = if want > RECYCLE_BYTES_MAX {
            &RECYCLED_BIG
        } else {
            &RECYCLED
        };
        let reused = pool.with(|r| {
            let mut r = r.borrow_mut();
            let i = r
                .iter()
                .rposition(|b| b.len() == want && b.align() == align)?;
            Some(r.swap_remove(i))
        });
        reused.unwrap_or_else(|| AlignedBuf::new(len, align))
    }

    /// Gives the buffer back for [`AlignedBuf::take`] on this thread (a
    /// bounded number of small buffers, and the last two bigger ones).
    pub fn recycle(self) {
        if self.len() > RECYCLE_BYTES_MAX {
            if self.len() <= RECYCLE_BIG_BYTES_MAX {
                RECYCLED_BIG.with(|r| {
                    let mut r = r.borrow_mut();
                    if r.len() == RECYCLE_BIG_COUNT_MAX {
                        r.remove(0);
                    }
                    r.push(self);
                });
            }
            return;
        }
        RECYCLED.with(|r| {
            let mut r = r.borrow_mut();
            if r.len() < RECYCLE_COUNT_MAX {
                r.push(self);
            }
        });
    }

    /// Frees the buffers this thread keeps for [`AlignedBuf::take`]. For a
    /// thread that scans now and then (the Redis face's expiry and page
    /// sweeper): its last two 4 MiB scan buffers stayed resident between
    /// passes, 8 MiB of a server whose data is on flash.
    pub fn release_recycled() {
        RECYCLED.with(|r| r.borrow_mut().clear());
        RECYCLED_BIG.with(|r| r.borrow_mut().clear());
    }
}

/// Largest buffer [`AlignedBuf::recycle`] keeps.
const RECYCLE_BYTES_MAX: usize = 64 << 10;
/// Buffers kept per thread.
const RECYCLE_COUNT_MAX: usize = 64;
/// Largest of the bigger buffers kept per thread (the last two recycled):
/// reads of a large value's 8 MiB chunks, two in flight, reuse them
/// instead of faulting in fresh pages for every chunk.
const RECYCLE_BIG_BYTES_MAX: usize = 17 << 20;
const RECYCLE_BIG_COUNT_MAX: usize = 2;

thread_local! {
    static RECYCLED: std::cell::RefCell<Vec<AlignedBuf>> = const { std::cell::RefCell::new(Vec::new()) };
    static RECYCLED_BIG: std::cell::RefCell<Vec<AlignedBuf>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: ptr is valid for layout.size() initialised bytes for as
        // long as self lives.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.layout.size()) }
    }
}

impl DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in deref, and &mut self guarantees exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.layout.size()) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: ptr was allocated with exactly this layout.
        unsafe { dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "AlignedBuf({} bytes, align {})",
            self.len(),
            self.align()
        )
    }
}

/// True if `offset`, `len` and the address `addr` are all multiples of
/// `align` (a power of two): the `Device` rule for every IO.
pub(crate) fn is_aligned(offset: u64, len: usize, addr: *const u8, align: usize) -> bool {
    let mask = align - 1;
    (offset & mask as u64) | (len & mask) as u64 | (addr as usize & mask) as u64 == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_span_the_fewest_memory_pages() {
        // Many allocations, so an allocator that happened to hand out
        // page-aligned blocks once does not pass by luck.
        let bufs: Vec<AlignedBuf> = (0..64)
            .flat_map(|_| {
                [512, 1024, 3584, 4096, 4608, 8192, 12800].map(|n| AlignedBuf::new(n, 512))
            })
            .collect();
        for b in &bufs {
            let start = b.as_ptr() as usize;
            let pages = (start + b.len() - 1) / PAGE_BYTES - start / PAGE_BYTES + 1;
            assert_eq!(pages, b.len().div_ceil(PAGE_BYTES), "{b:?} at {start:#x}");
            assert_eq!(start % 512, 0);
            assert_eq!(b.align(), 512);
        }
    }

    #[test]
    fn recycled_buffers_are_reused_by_size_and_alignment() {
        let b = AlignedBuf::take(4608, 512);
        let addr = b.as_ptr() as usize;
        b.recycle();
        // Another size or alignment does not get it...
        let other = AlignedBuf::take(4096, 512);
        assert_ne!(other.as_ptr() as usize, addr);
        let other_align = AlignedBuf::take(4608, 4096);
        assert_eq!(other_align.as_ptr() as usize % 4096, 0);
        assert_eq!(other_align.len(), 8192);
        // ...the same does.
        let again = AlignedBuf::take(4608, 512);
        assert_eq!(again.as_ptr() as usize, addr);
        assert_eq!(again.len(), 4608);
        // Large buffers are not kept.
        let big = AlignedBuf::take(1 << 20, 512);
        let big_addr = big.as_ptr() as usize;
        big.recycle();
        let big2 = AlignedBuf::take(1 << 20, 512);
        assert!(big2.iter().all(|&x| x == 0) || big2.as_ptr() as usize != big_addr);
    }

    #[test]
    fn released_buffers_are_not_handed_out_again() {
        for len in [4608, 4 << 20] {
            let mut b = AlignedBuf::take(len, 512);
            b[0] = 0xab;
            b.recycle();
            // Kept: the same bytes come back.
            let mut kept = AlignedBuf::take(len, 512);
            assert_eq!(kept[0], 0xab, "len {len}");
            kept[0] = 0xcd;
            kept.recycle();
            AlignedBuf::release_recycled();
            // Released: a fresh, zeroed buffer.
            let fresh = AlignedBuf::take(len, 512);
            assert_eq!(fresh[0], 0, "len {len}");
        }
    }

    #[test]
    fn aligned_and_zeroed() {
        for align in [512, 4096] {
            let mut b = AlignedBuf::new(1000, align);
            assert_eq!(b.as_ptr() as usize % align, 0);
            assert_eq!(b.len() % align, 0);
            assert!(b.len() >= 1000);
            assert!(b.iter().all(|&x| x == 0));
            b[999] = 7;
            assert_eq!(b[999], 7);
        }
    }
}
