//! Device access for nvdepot: one trait, [`Device`], through which every byte
//! the store keeps goes to and from storage.
//!
//! Implementations:
//! - [`FileDevice`]: a regular file or a block device opened with `O_DIRECT`
//!   (the sync backend: the calling thread does `pread`/`pwrite`).
//! - [`MemDevice`]: an in-memory device for tests that models a volatile
//!   write cache and can *crash*: unflushed writes are lost and the last
//!   in-flight write is torn at a random byte.
//!
//! Goals: no buffering or caching of our own (the engine decides what is
//! cached), alignment rules stated by the device, errors that name the
//! device, the operation and the offset.
//!
//! Async IO: [`uring`], a thread-per-core io_uring executor whose device
//! calls fall back to the blocking ones where there is no ring or no file
//! descriptor.
//!
//! Non-goals: striping (the engine places segments round-robin across
//! devices itself, see `crates/engine`).

mod aligned;
mod error;
mod file;
mod mem;
pub mod uring;
pub mod wait_list;

pub use aligned::AlignedBuf;
pub use error::{IoError, IoResult};
pub use file::FileDevice;
pub use mem::{CrashReport, MemDevice};

/// A byte-addressable storage device with direct (uncached) access.
///
/// Rules every caller obeys and every implementation may assert
/// (`debug_assert!`): the offset, the length and the buffer address of a
/// `read_at`/`write_at` are multiples of [`Device::alignment`], and
/// `offset + len <= capacity()`.
///
/// Durability contract: a write that returned `Ok` may still sit in a
/// volatile cache; it is durable once a later [`Device::flush`] returns
/// `Ok`. Writes that overlap are applied in the order they returned.
pub trait Device: Send + Sync + 'static {
    /// Usable bytes, a multiple of `alignment()`.
    fn capacity(&self) -> u64;
    /// Required alignment, in bytes, of offsets, lengths and buffer
    /// addresses (a power of two, at least 512).
    fn alignment(&self) -> usize;
    /// Reads exactly `buf.len()` bytes at `offset`.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> IoResult<()>;
    /// Writes all of `buf` at `offset`.
    fn write_at(&self, buf: &[u8], offset: u64) -> IoResult<()>;
    /// Makes every write that has returned durable (fdatasync / FLUSH).
    fn flush(&self) -> IoResult<()>;
    /// A human-readable name (the path) for error messages.
    fn name(&self) -> &str;
    /// The file descriptor async IO may use instead of the calls above, if
    /// the device is a file (`None`: async callers fall back to them).
    fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        None
    }
    /// A simulated device's time to complete the operation an async
    /// caller just made through its blocking call (see
    /// [`MemDevice::set_latency`]): the caller's task waits this long on
    /// its runtime, so the operations of other tasks complete meanwhile,
    /// out of order. Real devices: `None`.
    fn completion_delay(&self) -> Option<std::time::Duration> {
        None
    }
}
