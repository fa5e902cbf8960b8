//! Index checkpoint decoding on arbitrary bytes.
//!
//! Input: the store's segment count (u32, little-endian), then the
//! checkpoint payload (`docs/FORMAT.md`, "Index checkpoint").
//!
//! Properties: never panics, and never allocates more than a fixed
//! multiple of the input plus a constant, whatever counts the input
//! claims: a decoder that trusts a count to size a buffer lets a few
//! corrupt bytes ask for gigabytes.
#![no_main]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use libfuzzer_sys::fuzz_target;
use nvdepot_engine::fuzzing::decode_checkpoint;

/// Counts the bytes the Rust code has allocated, and their peak.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards every call to `System` unchanged; the counters are
// only bookkeeping.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = LIVE.fetch_add(layout.size(), Relaxed) + layout.size();
            PEAK.fetch_max(now, Relaxed);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            let now = LIVE.fetch_add(layout.size(), Relaxed) + layout.size();
            PEAK.fetch_max(now, Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Relaxed);
            let now = LIVE.fetch_add(new_size, Relaxed) + new_size;
            PEAK.fetch_max(now, Relaxed);
        }
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Allowed allocation: the words of the index tables are held twice while
/// the index is built (as decoded and as installed), plus bookkeeping.
const BYTES_PER_INPUT_BYTE: usize = 4;
const BYTES_FIXED: usize = 64 << 10;

fuzz_target!(|data: &[u8]| {
    let (count, payload) = data.split_at(data.len().min(4));
    let mut segments = [0u8; 4];
    segments[..count.len()].copy_from_slice(count);
    let segments = u32::from_le_bytes(segments);
    let base = LIVE.load(Relaxed);
    PEAK.store(base, Relaxed);
    let result = decode_checkpoint(payload, segments);
    let used = PEAK.load(Relaxed) - base;
    let allowed = BYTES_PER_INPUT_BYTE * payload.len() + BYTES_FIXED;
    assert!(
        used <= allowed,
        "decoding {} bytes allocated {used} bytes at peak (allowed {allowed}): {result:?}",
        payload.len()
    );
});
