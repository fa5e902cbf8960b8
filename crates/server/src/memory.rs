//! Giving freed memory back to the OS.
//!
//! glibc keeps what threads free in its arenas; with many short-lived
//! connections and bursts of IO buffers that memory stays resident: 10 000
//! connections opened and closed left the server 120 MB larger for good,
//! and a sustained set load held ~100 MB of freed buffers (measured: RSS
//! 137 MB during a 16-connection pipelined load on `-m 0`, 39 MB once the
//! allocator was trimmed). So workers trim after many closes, the
//! acceptor every [`TRIM_INTERVAL`], and a face's background threads after
//! their passes ([`trim_allocator`]).

use std::time::Duration;

/// How often the acceptor trims the allocator.
pub(crate) const TRIM_INTERVAL: Duration = Duration::from_secs(10);

/// Closes on one worker between two returns of free memory to the OS.
const TRIM_EVERY_CLOSES: u32 = 512;

thread_local! {
    static CLOSED_SINCE_TRIM: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Counts a closed connection (on its worker's thread); every
/// [`TRIM_EVERY_CLOSES`], and when the worker's last connection (`last`)
/// closes after others did, asks the allocator to give its free pages back.
pub(crate) fn closed_one(last: bool) {
    let trim = CLOSED_SINCE_TRIM.with(|c| {
        let n = c.get() + 1;
        let trim = n == TRIM_EVERY_CLOSES || (last && n > 1);
        c.set(if trim { 0 } else { n });
        trim
    });
    if trim {
        trim_allocator();
    }
}

/// Allocations from this size on are their own mappings, given back to
/// the OS when freed.
const MMAP_THRESHOLD_BYTES: i32 = 256 << 10;

/// Fixes glibc's mmap threshold. By default glibc raises it each time a
/// mapped block is freed (up to 32 MiB), so after the first large request
/// or value every later one up to that size comes from the heap arenas,
/// where freed blocks stay resident and fragment. Measured on `nvdepot
/// serve` under the shape generator (tests/resp_shapes.rs: values up to
/// 1 MiB, pipelines of up to 3 000 commands, scans): peak RSS 277-517 MB
/// across runs of the same seed with the default, 32-34 MB fixed at
/// 256 KiB. The hot path's large buffers are pooled (the writer's 1 MiB
/// batch buffers), so this costs no mapping per request.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub(crate) fn fix_mmap_threshold() {
    // SAFETY: mallopt only changes the allocator's tuning; called before
    // the server's threads allocate, and valid at any time anyway.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub(crate) fn fix_mmap_threshold() {}

/// The global allocator's own way to give free pages back, when the
/// program that runs the server chose one other than the system's (the
/// server kit cannot know it: the binary picks the allocator).
static ALLOCATOR_TRIM: std::sync::OnceLock<fn()> = std::sync::OnceLock::new();

/// Registers how the program's global allocator returns its free memory
/// to the OS, called (on the calling thread) wherever the server trims:
/// after many closes on a worker, every 10 s (`TRIM_INTERVAL`) on the acceptor,
/// and wherever a face calls [`trim_allocator`]. The first registration
/// holds.
pub fn set_allocator_trim(trim: fn()) {
    let _ = ALLOCATOR_TRIM.set(trim);
}

/// Gives the calling thread's free memory back to the OS: the system
/// allocator's, and the registered allocator's ([`set_allocator_trim`]).
/// For a face's background threads that free much and then sleep (a
/// sweep's pass): a thread-caching allocator such as mimalloc returns a
/// thread's freed pages only when that thread allocates or collects
/// again, so a sleeping thread would hold them until its next pass.
pub fn trim_allocator() {
    trim_system_allocator();
    if let Some(trim) = ALLOCATOR_TRIM.get() {
        trim();
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim_system_allocator() {
    // SAFETY: malloc_trim only walks the allocator's own free lists and
    // returns whole free pages to the kernel; no memory in use moves.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim_system_allocator() {}
