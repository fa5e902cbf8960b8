//! Registered buffers (`IORING_REGISTER_BUFFERS`): the kernel pins them
//! once, so a read into one skips the per-IO page pinning and mapping.

use std::cell::RefCell;
use std::io;
use std::ops::Deref;
use std::os::fd::RawFd;
use std::rc::Rc;

use io_uring::{opcode, types};

use super::op::Op;
use super::runtime::Runtime;
use super::{errno, target, Target};
use crate::AlignedBuf;

/// A pool of equal-sized aligned buffers registered with one runtime's ring.
#[derive(Clone)]
pub struct FixedPool {
    inner: Rc<PoolInner>,
}

struct PoolInner {
    size: usize,
    free: RefCell<Vec<(u16, AlignedBuf)>>,
}

/// A registered buffer holding the bytes of a completed read. Goes back to
/// its pool when dropped.
pub struct FixedBuf {
    index: u16,
    buf: Option<AlignedBuf>,
    len: usize,
    pool: Rc<PoolInner>,
}

impl Deref for FixedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf.as_ref().expect("fixed buffer present")[..self.len]
    }
}

impl Drop for FixedBuf {
    fn drop(&mut self) {
        if let Some(b) = self.buf.take() {
            self.pool.free.borrow_mut().push((self.index, b));
        }
    }
}

impl FixedPool {
    /// Registers `count` buffers of `size` bytes aligned to `align` with
    /// `rt`'s ring (at most one pool per ring; the kernel caps `count` at
    /// 16 384 and the pinned memory at RLIMIT_MEMLOCK on old kernels).
    pub fn register(rt: &Runtime, count: u16, size: usize, align: usize) -> io::Result<FixedPool> {
        let bufs: Vec<AlignedBuf> = (0..count).map(|_| AlignedBuf::new(size, align)).collect();
        let iovecs: Vec<libc::iovec> = bufs
            .iter()
            .map(|b| libc::iovec {
                iov_base: b.as_ptr() as *mut _,
                iov_len: b.len(),
            })
            .collect();
        // SAFETY: the buffers stay allocated for as long as the pool lives,
        // and the pool keeps them (free or lent out) until it is dropped;
        // dropping the runtime's ring unregisters them.
        unsafe { rt.ring_submitter(|s| s.register_buffers(&iovecs))? };
        let size = bufs.first().map_or(size, |b| b.len());
        Ok(FixedPool {
            inner: Rc::new(PoolInner {
                size,
                free: RefCell::new(
                    bufs.into_iter()
                        .enumerate()
                        .map(|(i, b)| (i as u16, b))
                        .collect(),
                ),
            }),
        })
    }

    /// Bytes per buffer.
    pub fn buffer_size(&self) -> usize {
        self.inner.size
    }

    /// Buffers not lent out.
    pub fn available(&self) -> usize {
        self.inner.free.borrow().len()
    }

    /// Reads `len` bytes at `offset` into a registered buffer
    /// (`READ_FIXED`). `None` if every buffer is lent out or `len` is too
    /// big: use a plain read then.
    pub async fn read(&self, fd: RawFd, len: usize, offset: u64) -> Option<io::Result<FixedBuf>> {
        if len > self.inner.size {
            return None;
        }
        let (index, mut buf) = self.inner.free.borrow_mut().pop()?;
        let ptr = buf.as_mut_ptr();
        let entry = match target(fd) {
            Target::Fd(fd) => opcode::ReadFixed::new(types::Fd(fd), ptr, len as u32, index)
                .offset(offset)
                .build(),
            Target::Fixed(i) => opcode::ReadFixed::new(types::Fixed(i), ptr, len as u32, index)
                .offset(offset)
                .build(),
        };
        // The op owns the buffer as a FixedBuf, so that if this future is
        // dropped mid-read the buffer still goes back to the pool once the
        // kernel is done with it.
        let lent = FixedBuf {
            index,
            buf: Some(buf),
            len,
            pool: self.inner.clone(),
        };
        let c = Op::submit(lent, entry).await;
        let fixed = c.data;
        Some(match errno(c.result) {
            Ok(n) if n == len => Ok(fixed),
            Ok(n) => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("short fixed read: {n} of {len} bytes"),
            )),
            Err(e) => Err(e),
        })
    }
}
