//! A regular file or a block device opened with `O_DIRECT`: the sync
//! backend, where the calling thread does `pread`/`pwrite` itself (the
//! paper's linux-directIO mode).
//!
//! Why `O_DIRECT`: the engine keeps its own index in DRAM and decides what
//! is worth caching; the page cache would hold a second copy of every
//! record and add a memcpy to every IO. The price is alignment: offsets,
//! lengths and buffer addresses must be multiples of the device's DIO
//! alignment, which we ask the kernel for (statx `STATX_DIOALIGN`, or
//! `BLKSSZGET` on a block device) instead of guessing.
//!
//! Durability: a completed `O_DIRECT` write may still sit in the disk's
//! volatile write cache; [`Device::flush`] is `fdatasync`, which the kernel
//! turns into a cache FLUSH where the disk has one.
//! [`FileDevice::volatile_write_cache`] tells which case applies.

use crate::{Device, IoError, IoResult};
use std::fs::{File, Metadata, OpenOptions};
use std::io::ErrorKind;
use std::mem::MaybeUninit;
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

/// Alignment used when the kernel does not say (statx without
/// `STATX_DIOALIGN`, or a filesystem that reports 0): 4 KiB suits every
/// device we know of.
const FALLBACK_ALIGNMENT: usize = 4096;
/// The smallest alignment we ever report (the `Device` contract).
const MIN_ALIGNMENT: usize = 512;

/// A file or block device opened with `O_DIRECT`.
///
/// Every IO is one `pread`/`pwrite` on the calling thread (looped on short
/// transfers and `EINTR`); there is no buffering of our own, so many
/// threads may use one `FileDevice` at once.
#[derive(Debug)]
pub struct FileDevice {
    file: File,
    path: PathBuf,
    name: String,
    capacity: u64,
    alignment: usize,
    direct: bool,
    block_device: bool,
    write_cache: Option<bool>,
}

impl FileDevice {
    /// Opens (creating and sizing a regular file to `size` bytes if it does
    /// not exist, or if `size` is larger than its current length) with
    /// O_DIRECT. For a block device, `size` is ignored and the device's size
    /// is used. Alignment comes from statx(STATX_DIOALIGN) or BLKSSZGET.
    ///
    /// A regular file is never shrunk: its capacity is its length rounded
    /// down to the alignment. A file that does not exist (or is empty) needs
    /// a `size`. A block device is opened with `O_EXCL`, so a mounted or
    /// otherwise exclusively held device is refused. A filesystem that
    /// refuses `O_DIRECT` is reported as such (see
    /// [`FileDevice::open_buffered`] for tests on such filesystems).
    pub fn open(path: &Path, size: Option<u64>) -> IoResult<FileDevice> {
        FileDevice::open_with(path, size, true)
    }

    /// Like [`FileDevice::open`] but *without* `O_DIRECT`: IO goes through
    /// the page cache. For tests on filesystems without `O_DIRECT` (e.g.
    /// an old tmpfs); **not for production**: it doubles memory use and
    /// hides alignment bugs. The alignment rules are still reported (and
    /// asserted in debug builds) as for `open`, so code tested this way
    /// also runs with `O_DIRECT`. `flush` still calls `fdatasync`, so the
    /// durability contract holds.
    pub fn open_buffered(path: &Path, size: Option<u64>) -> IoResult<FileDevice> {
        FileDevice::open_with(path, size, false)
    }

    /// The path this device was opened with.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// True if opened with `O_DIRECT` (false only via
    /// [`FileDevice::open_buffered`]).
    pub fn is_direct(&self) -> bool {
        self.direct
    }

    /// True if the path is a block device rather than a regular file.
    pub fn is_block_device(&self) -> bool {
        self.block_device
    }

    /// Whether the disk under this file has a volatile write cache
    /// (`/sys/dev/block/MAJ:MIN/queue/write_cache` reads `write back`), so
    /// that completed writes need a [`Device::flush`] to be durable.
    /// `None` if unknown (e.g. a virtual filesystem, or no sysfs); callers
    /// should then assume `Some(true)`. Read once at open.
    pub fn volatile_write_cache(&self) -> Option<bool> {
        self.write_cache
    }

    fn open_with(path: &Path, size: Option<u64>, direct: bool) -> IoResult<FileDevice> {
        let name = path.display().to_string();
        let open_err = |reason: String| IoError::Open {
            device: name.clone(),
            reason,
        };
        let existing = match std::fs::metadata(path) {
            Ok(m) => Some(m),
            Err(e) if e.kind() == ErrorKind::NotFound => None,
            Err(e) => return Err(open_err(format!("cannot stat: {e}"))),
        };
        let block_device = existing
            .as_ref()
            .is_some_and(|m| m.file_type().is_block_device());
        if let Some(m) = &existing {
            if !block_device && !m.file_type().is_file() {
                return Err(open_err("not a regular file or a block device".into()));
            }
        }
        if existing.is_none() && size.is_none() {
            return Err(open_err(
                "the file does not exist and no size was given to create it".into(),
            ));
        }
        let file = open_file(path, direct, block_device, existing.is_none()).map_err(&open_err)?;
        if !block_device {
            lock_exclusive(&file, path).map_err(&open_err)?;
        }
        let meta = file
            .metadata()
            .map_err(|e| open_err(format!("cannot fstat: {e}")))?;
        let len = if block_device {
            block_device_size(&file).map_err(|e| open_err(format!("BLKGETSIZE64: {e}")))?
        } else {
            size_regular_file(&file, &meta, size).map_err(&open_err)?
        };
        let stx = statx_fd(&file);
        let alignment = dio_alignment(&file, stx.as_ref(), block_device);
        let capacity = len / alignment as u64 * alignment as u64;
        if capacity == 0 {
            return Err(open_err(format!(
                "{len} bytes is smaller than one aligned block of {alignment} bytes"
            )));
        }
        let write_cache = stx.as_ref().and_then(|s| {
            let (major, minor) = if block_device {
                (s.stx_rdev_major, s.stx_rdev_minor)
            } else {
                (s.stx_dev_major, s.stx_dev_minor)
            };
            read_write_cache(major, minor)
        });
        Ok(FileDevice {
            file,
            path: path.to_path_buf(),
            name,
            capacity,
            alignment,
            direct,
            block_device,
            write_cache,
        })
    }

    /// The programmer-error checks of the `Device` contract.
    #[inline]
    fn debug_check(&self, op: &str, addr: *const u8, len: usize, offset: u64) {
        if cfg!(debug_assertions) {
            let io = (addr, len, offset);
            let limits = (self.alignment, self.capacity);
            if let Some(why) = crate::aligned::contract_violation(&self.name, op, io, limits) {
                panic!("{why}");
            }
        }
    }

    /// Repeats `io(done)` (a pread or pwrite of the rest) until `len`
    /// bytes moved, retrying on EINTR; 0 bytes moved is `Short`.
    fn transfer(
        &self,
        op: &'static str,
        len: usize,
        offset: u64,
        mut io: impl FnMut(usize) -> std::io::Result<usize>,
    ) -> IoResult<()> {
        let mut done = 0;
        while done < len {
            match io(done) {
                Ok(0) => {
                    let device = self.name.clone();
                    return Err(IoError::Short {
                        op,
                        device,
                        offset,
                        len,
                        done,
                    });
                }
                Ok(n) => done += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(self.os_error(op, offset, len, e)),
            }
        }
        Ok(())
    }

    fn os_error(&self, op: &'static str, offset: u64, len: usize, e: std::io::Error) -> IoError {
        IoError::Os {
            op,
            device: self.name.clone(),
            offset,
            len,
            source: e,
        }
    }
}

impl Device for FileDevice {
    fn capacity(&self) -> u64 {
        self.capacity
    }

    fn alignment(&self) -> usize {
        self.alignment
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> IoResult<()> {
        self.debug_check("read", buf.as_ptr(), buf.len(), offset);
        let len = buf.len();
        self.transfer("read", len, offset, |done| {
            self.file.read_at(&mut buf[done..], offset + done as u64)
        })
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> IoResult<()> {
        self.debug_check("write", buf.as_ptr(), buf.len(), offset);
        let len = buf.len();
        self.transfer("write", len, offset, |done| {
            self.file.write_at(&buf[done..], offset + done as u64)
        })
    }

    fn flush(&self) -> IoResult<()> {
        loop {
            match self.file.sync_data() {
                Ok(()) => return Ok(()),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(self.os_error("flush", 0, 0, e)),
            }
        }
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        use std::os::fd::AsRawFd;
        Some(self.file.as_raw_fd())
    }
}

/// How long an open waits for another process's lock on the file to go
/// away before refusing. A process killed with `kill -9` releases its
/// lock only once the kernel has torn down its io_uring instances (tens of
/// milliseconds after the process is reaped), so a supervisor restarting
/// at once would otherwise find the store still locked.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Takes an exclusive advisory lock on a regular file for the life of the
/// descriptor, so two processes cannot open one store (block devices get
/// the same protection from `O_EXCL`). Waits up to [`LOCK_WAIT`] for a
/// holder to go away, saying so once.
fn lock_exclusive(file: &File, path: &Path) -> Result<(), String> {
    use std::os::fd::AsRawFd;
    let started = std::time::Instant::now();
    let mut said = false;
    loop {
        // SAFETY: flock on a descriptor we own; no memory is passed.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc == 0 {
            if said {
                tracing::info!(
                    "got the lock on {} after {} ms",
                    path.display(),
                    started.elapsed().as_millis()
                );
            }
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
            return Err(format!("flock failed: {e}"));
        }
        if started.elapsed() >= LOCK_WAIT {
            return Err(format!(
                "the file is in use by another process (it holds an exclusive lock on it; \
                 waited {} s for it to go away)",
                LOCK_WAIT.as_secs()
            ));
        }
        if !said {
            tracing::warn!(
                "{} is locked by another process; waiting up to {} s for it to exit",
                path.display(),
                LOCK_WAIT.as_secs()
            );
            said = true;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// Opens read-write with `O_CLOEXEC` (and `O_DIRECT`, and `O_EXCL` for a
/// block device), creating a regular file if `create`. Errors are turned
/// into sentences that say what to do.
fn open_file(path: &Path, direct: bool, block: bool, create: bool) -> Result<File, String> {
    let mut flags = libc::O_CLOEXEC;
    if direct {
        flags |= libc::O_DIRECT;
    }
    if block {
        // On a block device O_EXCL (without O_CREAT) fails with EBUSY if the
        // device is mounted or held by another exclusive opener.
        flags |= libc::O_EXCL;
    }
    let result = OpenOptions::new()
        .read(true)
        .write(true)
        .create(create)
        .mode(0o644)
        .custom_flags(flags)
        .open(path);
    result.map_err(|e| match e.raw_os_error() {
        Some(libc::EINVAL) if direct => {
            if create {
                // Some kernels create the file before refusing O_DIRECT; do
                // not leave an empty file behind.
                let _ = std::fs::remove_file(path);
            }
            "the filesystem does not support O_DIRECT (open returned EINVAL); put the \
             store on a filesystem that does (ext4, xfs, btrfs) or on a block device"
                .to_string()
        }
        Some(libc::EBUSY) if block => {
            "the block device is in use (mounted, or opened exclusively elsewhere)".to_string()
        }
        _ => format!("open failed: {e}"),
    })
}

/// Grows a regular file to `size` if it is shorter, and returns its length.
fn size_regular_file(file: &File, meta: &Metadata, size: Option<u64>) -> Result<u64, String> {
    let len = meta.len();
    let Some(size) = size else {
        if len == 0 {
            return Err("the file is empty and no size was given".into());
        }
        return Ok(len);
    };
    if size <= len {
        return Ok(len);
    }
    let (start, grow) = match (i64::try_from(len), i64::try_from(size - len)) {
        (Ok(s), Ok(g)) => (s, g),
        _ => return Err(format!("size {size} is too large")),
    };
    // Allocate the blocks now (fallocate) so that later O_DIRECT writes do
    // not allocate; fall back to a sparse ftruncate where unsupported.
    // SAFETY: the fd is open for as long as `file` lives; fallocate takes
    // only integers and touches no memory of ours.
    let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, start, grow) };
    if rc == 0 {
        write_zeros(file, len, size)?;
        return Ok(size);
    }
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) => file
            .set_len(size)
            .map(|()| size)
            .map_err(|e| format!("cannot extend the file to {size} bytes: {e}")),
        _ => Err(format!("cannot allocate {size} bytes for the file: {e}")),
    }
}

/// Writes zeros over `[from, to)` of a freshly allocated file, once, at
/// creation. Why: fallocate leaves *unwritten* extents, and on ext4 the
/// first O_DIRECT write into one converts it under the inode lock taken
/// exclusively; io_uring reads and writes that then cannot take it without
/// waiting fall back to kernel worker threads (measured: 21 % of the
/// server's CPU in io-wq workers with reads from the device, a third of
/// the device's read rate lost). Zeroed once, every later write is an
/// overwrite. Costs one sequential write of the file (≈ 0.4 s per GiB
/// here).
fn write_zeros(file: &File, from: u64, to: u64) -> Result<(), String> {
    use std::os::unix::fs::FileExt;
    const CHUNK: usize = 8 << 20;
    // Aligned for O_DIRECT (4 KiB covers every logical block size).
    let buf = crate::AlignedBuf::new(CHUNK, 4096);
    // Whole blocks only: a partial block at `from` holds existing bytes.
    let mut at = from.next_multiple_of(4096);
    while at < to {
        let n = (to - at).min(CHUNK as u64) as usize;
        // A tail shorter than the alignment stays unwritten (the store
        // never uses it: capacity is rounded down to the alignment).
        let n = n / 4096 * 4096;
        if n == 0 {
            break;
        }
        file.write_all_at(&buf[..n], at)
            .map_err(|e| format!("cannot write the new file's blocks at {at}: {e}"))?;
        at += n as u64;
    }
    Ok(())
}

/// `_IOR(0x12, 114, size_t)`: the size in bytes of a block device.
const BLKGETSIZE64: libc::Ioctl = {
    // The direction field is 2 bits at bit 30 on most architectures, 3 bits
    // at bit 29 on mips, powerpc and sparc (where "read" is also 2).
    #[cfg(any(
        target_arch = "mips",
        target_arch = "mips64",
        target_arch = "powerpc",
        target_arch = "powerpc64",
        target_arch = "sparc",
        target_arch = "sparc64"
    ))]
    const READ: u64 = 2 << 29;
    #[cfg(not(any(
        target_arch = "mips",
        target_arch = "mips64",
        target_arch = "powerpc",
        target_arch = "powerpc64",
        target_arch = "sparc",
        target_arch = "sparc64"
    )))]
    const READ: u64 = 2 << 30;
    let size = std::mem::size_of::<usize>() as u64;
    (READ | (size << 16) | (0x12 << 8) | 114) as libc::Ioctl
};

fn block_device_size(file: &File) -> std::io::Result<u64> {
    let mut size: u64 = 0;
    // SAFETY: BLKGETSIZE64 writes one u64 through the pointer, which points
    // to a live, writable u64; the fd is open for as long as `file` lives.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), BLKGETSIZE64, &mut size as *mut u64) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(size)
}

fn block_logical_sector_size(file: &File) -> Option<usize> {
    let mut sector: libc::c_int = 0;
    // SAFETY: BLKSSZGET writes one int through the pointer, which points to
    // a live, writable c_int; the fd is open for as long as `file` lives.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), libc::BLKSSZGET, &mut sector as *mut _) };
    (rc == 0 && sector > 0).then_some(sector as usize)
}

/// statx on the open fd, asking for the DIO alignment. `None` if the call
/// fails (old kernel or libc).
fn statx_fd(file: &File) -> Option<libc::statx> {
    let mut stx = MaybeUninit::<libc::statx>::zeroed();
    // SAFETY: the fd is open for as long as `file` lives; with
    // AT_EMPTY_PATH the empty NUL-terminated path means the fd itself; the
    // kernel writes at most size_of::<statx>() bytes into `stx`.
    let rc = unsafe {
        libc::statx(
            file.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            libc::STATX_DIOALIGN,
            stx.as_mut_ptr(),
        )
    };
    if rc != 0 {
        return None;
    }
    // SAFETY: statx is plain integers, so the zeroed value was already
    // valid, and the kernel filled in the rest.
    Some(unsafe { stx.assume_init() })
}

/// The alignment for offsets, lengths and buffer addresses: the largest of
/// the DIO offset and memory alignments (and the logical sector size of a
/// block device), at least 512, a power of two; 4096 if nothing is known.
fn dio_alignment(file: &File, stx: Option<&libc::statx>, block_device: bool) -> usize {
    let mut align = 0;
    if let Some(s) = stx {
        let (offset, mem) = (s.stx_dio_offset_align, s.stx_dio_mem_align);
        if s.stx_mask & libc::STATX_DIOALIGN != 0 && offset != 0 && mem != 0 {
            align = (offset.max(mem) as usize).max(MIN_ALIGNMENT);
        }
    }
    if block_device {
        if let Some(sector) = block_logical_sector_size(file) {
            align = align.max(sector).max(MIN_ALIGNMENT);
        }
    }
    if align == 0 {
        align = FALLBACK_ALIGNMENT;
    }
    align.next_power_of_two()
}

/// Reads `queue/write_cache` of the disk with this device number (or of the
/// whole disk if it is a partition).
fn read_write_cache(major: u32, minor: u32) -> Option<bool> {
    if major == 0 {
        return None; // anonymous device: tmpfs, overlayfs, btrfs subvolume
    }
    let dev = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    let text = std::fs::read_to_string(dev.join("queue/write_cache"))
        .or_else(|_| std::fs::read_to_string(dev.join("../queue/write_cache")))
        .ok()?;
    match text.trim() {
        "write back" => Some(true),
        "write through" => Some(false),
        _ => None,
    }
}
