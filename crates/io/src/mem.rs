//! STUB: in-memory crashing device.
use crate::{Device, IoResult};

/// What a crash did (for test logs).
#[derive(Debug, Clone, Default)]
pub struct CrashReport {
    /// Unflushed writes that were dropped.
    pub dropped_writes: usize,
    /// The write that was torn: (offset, len, bytes kept).
    pub torn: Option<(u64, usize, usize)>,
}

/// An in-memory device with a volatile write cache.
pub struct MemDevice {
    _private: (),
}

impl MemDevice {
    /// A zeroed device of `capacity` bytes with the given alignment.
    pub fn new(capacity: u64, alignment: usize) -> MemDevice {
        let _ = (capacity, alignment);
        unimplemented!()
    }

    /// Crashes the device: from now on every operation on `self` fails with
    /// `IoError::Crashed`. Returns a new device holding what survived: all
    /// flushed data, none of the unflushed writes except that the last
    /// write (flushed or not, if unflushed) may survive torn at a random
    /// byte chosen from `seed`.
    pub fn crash(&self, seed: u64) -> (MemDevice, CrashReport) {
        let _ = seed;
        unimplemented!()
    }
}

impl Device for MemDevice {
    fn capacity(&self) -> u64 { unimplemented!() }
    fn alignment(&self) -> usize { unimplemented!() }
    fn read_at(&self, _buf: &mut [u8], _offset: u64) -> IoResult<()> { unimplemented!() }
    fn write_at(&self, _buf: &[u8], _offset: u64) -> IoResult<()> { unimplemented!() }
    fn flush(&self) -> IoResult<()> { unimplemented!() }
    fn name(&self) -> &str { unimplemented!() }
}
