//! STUB: O_DIRECT file / block device.
use crate::{Device, IoResult};
use std::path::Path;

/// A file or block device opened with `O_DIRECT`.
pub struct FileDevice {
    _private: (),
}

impl FileDevice {
    /// Opens (creating and sizing a regular file to `size` bytes if it does
    /// not exist, or if `size` is larger than its current length) with
    /// O_DIRECT. For a block device, `size` is ignored and the device's size
    /// is used. Alignment comes from statx(STATX_DIOALIGN) or BLKSSZGET.
    pub fn open(path: &Path, size: Option<u64>) -> IoResult<FileDevice> {
        let _ = (path, size);
        unimplemented!()
    }
}

impl Device for FileDevice {
    fn capacity(&self) -> u64 { unimplemented!() }
    fn alignment(&self) -> usize { unimplemented!() }
    fn read_at(&self, _buf: &mut [u8], _offset: u64) -> IoResult<()> { unimplemented!() }
    fn write_at(&self, _buf: &[u8], _offset: u64) -> IoResult<()> { unimplemented!() }
    fn flush(&self) -> IoResult<()> { unimplemented!() }
    fn name(&self) -> &str { unimplemented!() }
}
