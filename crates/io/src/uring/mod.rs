//! The async backend: a thin thread-per-core executor over io_uring.
//!
//! Each core runs one [`Runtime`]: one ring, one run queue, no work
//! stealing, so a request's network and storage completions are handled on
//! the core that started it. Operations take ownership of their buffers
//! and give them back with the result (the kernel writes into them after
//! the call returns, so a borrowed slice would not do).
//!
//! Device IO ([`read_device`], [`write_device`], [`flush_device`]) goes to
//! the ring when called inside a runtime on a device with a file
//! descriptor, and falls back to the device's blocking call otherwise (the
//! in-memory test device, or a caller outside any runtime), so the same
//! async code runs in tests and in production.
//!
//! Why not a maintained runtime: see `docs/RUNTIME.md` (measured against
//! monoio on the same benchmark).

mod fixed;
mod net;
mod op;
mod recv_stream;
mod runtime;

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use io_uring::{opcode, types};

pub use fixed::{FixedBuf, FixedPool};
pub use net::{accept, recv, send_all, TcpListenerExt};
pub use recv_stream::{recv_buffers_registered, RecvStream};
pub use runtime::{
    drive, in_runtime, others_ready, pump, run_ready, spawn, yield_now, Builder, JoinHandle,
    Runtime, RuntimeStats,
};

use crate::{AlignedBuf, Device, IoError, IoResult};
use op::Op;
use runtime::with_core;

/// An fd as the ring should name it: the registered slot if the file was
/// registered with [`Runtime::register_files`].
fn target(fd: RawFd) -> Target {
    with_core(|core| {
        core.files
            .borrow()
            .iter()
            .position(|&f| f == fd)
            .map_or(Target::Fd(fd), |i| Target::Fixed(i as u32))
    })
    .unwrap_or(Target::Fd(fd))
}

#[derive(Clone, Copy)]
enum Target {
    Fd(RawFd),
    Fixed(u32),
}

macro_rules! with_target {
    ($t:expr, $op:ident, |$f:ident| $build:expr) => {
        match $t {
            Target::Fd(fd) => {
                let $f = types::Fd(fd);
                $build
            }
            Target::Fixed(i) => {
                let $f = types::Fixed(i);
                $build
            }
        }
    };
}

fn errno(result: i32) -> io::Result<usize> {
    if result < 0 {
        Err(io::Error::from_raw_os_error(-result))
    } else {
        Ok(result as usize)
    }
}

/// One `read` of up to `len` bytes at `offset` into `buf[at..at + len]`.
pub async fn read_at(
    fd: RawFd,
    buf: AlignedBuf,
    at: usize,
    len: usize,
    offset: u64,
) -> (io::Result<usize>, AlignedBuf) {
    let mut buf = buf;
    assert!(at + len <= buf.len(), "read past the end of its buffer");
    // SAFETY (pointer validity): the pointer is into the heap allocation of
    // `buf`, which the op owns until completion.
    let ptr = buf[at..].as_mut_ptr();
    let entry = with_target!(target(fd), Read, |f| opcode::Read::new(f, ptr, len as u32)
        .offset(offset)
        .build());
    let c = Op::submit(buf, entry).await;
    (errno(c.result), c.data)
}

/// One `write` of `buf[at..at + len]` at `offset`.
pub async fn write_at(
    fd: RawFd,
    buf: AlignedBuf,
    at: usize,
    len: usize,
    offset: u64,
) -> (io::Result<usize>, AlignedBuf) {
    assert!(at + len <= buf.len(), "write past the end of its buffer");
    let ptr = buf[at..].as_ptr();
    let entry = with_target!(target(fd), Write, |f| opcode::Write::new(
        f, ptr, len as u32
    )
    .offset(offset)
    .build());
    let c = Op::submit(buf, entry).await;
    (errno(c.result), c.data)
}

/// `fdatasync(fd)` through the ring.
pub async fn fdatasync(fd: RawFd) -> io::Result<()> {
    let entry = with_target!(target(fd), Fsync, |f| opcode::Fsync::new(f)
        .flags(types::FsyncFlags::DATASYNC)
        .build());
    errno(Op::submit((), entry).await.result).map(|_| ())
}

/// Sleeps for `d` without blocking the thread.
pub async fn sleep(d: Duration) {
    let ts = Box::new(
        types::Timespec::new()
            .sec(d.as_secs())
            .nsec(d.subsec_nanos()),
    );
    let entry = opcode::Timeout::new(&*ts as *const types::Timespec).build();
    // -ETIME is the normal outcome of a timeout.
    let _ = Op::submit(ts, entry).await;
}

/// Waits out a simulated device's completion delay (a device without a
/// file descriptor, inside a runtime), letting other tasks run.
async fn simulated_completion(dev: &dyn Device) {
    if in_runtime() {
        if let Some(d) = dev.completion_delay() {
            sleep(d).await;
        }
    }
}

/// Reads `buf.len()` bytes of `dev` at `offset`: through the ring inside a
/// runtime when the device has a file descriptor, else with the device's
/// blocking call. Retries short reads; errors name the device.
pub async fn read_device(
    dev: &dyn Device,
    buf: AlignedBuf,
    offset: u64,
) -> (IoResult<()>, AlignedBuf) {
    let mut buf = buf;
    let Some(fd) = dev.raw_fd().filter(|_| in_runtime()) else {
        let r = dev.read_at(&mut buf, offset);
        simulated_completion(dev).await;
        return (r, buf);
    };
    transfer(dev, fd, "read", buf, offset, true).await
}

/// Writes `buf[..len]` to `dev` at `offset` (ring or blocking, as
/// [`read_device`]).
pub async fn write_device(
    dev: &dyn Device,
    buf: AlignedBuf,
    len: usize,
    offset: u64,
) -> (IoResult<()>, AlignedBuf) {
    let Some(fd) = dev.raw_fd().filter(|_| in_runtime()) else {
        let r = dev.write_at(&buf[..len], offset);
        simulated_completion(dev).await;
        return (r, buf);
    };
    let (r, buf) = transfer_len(dev, fd, "write", buf, len, offset, false).await;
    (r, buf)
}

/// Makes `dev`'s completed writes durable (ring `fdatasync`, or the
/// device's blocking flush).
pub async fn flush_device(dev: &dyn Device) -> IoResult<()> {
    let Some(fd) = dev.raw_fd().filter(|_| in_runtime()) else {
        let r = dev.flush();
        simulated_completion(dev).await;
        return r;
    };
    loop {
        match fdatasync(fd).await {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(os_error(dev, "flush", 0, 0, e)),
        }
    }
}

async fn transfer(
    dev: &dyn Device,
    fd: RawFd,
    op: &'static str,
    buf: AlignedBuf,
    offset: u64,
    read: bool,
) -> (IoResult<()>, AlignedBuf) {
    let len = buf.len();
    transfer_len(dev, fd, op, buf, len, offset, read).await
}

async fn transfer_len(
    dev: &dyn Device,
    fd: RawFd,
    op: &'static str,
    buf: AlignedBuf,
    len: usize,
    offset: u64,
    read: bool,
) -> (IoResult<()>, AlignedBuf) {
    debug_assert!(
        crate::aligned::contract_violation(
            dev.name(),
            op,
            (buf.as_ptr(), len, offset),
            (dev.alignment(), dev.capacity())
        )
        .is_none(),
        "device contract violated"
    );
    let mut buf = buf;
    let mut done = 0;
    while done < len {
        let (r, b) = if read {
            read_at(fd, buf, done, len - done, offset + done as u64).await
        } else {
            write_at(fd, buf, done, len - done, offset + done as u64).await
        };
        buf = b;
        match r {
            Ok(0) => {
                let e = IoError::Short {
                    op,
                    device: dev.name().to_string(),
                    offset,
                    len,
                    done,
                };
                return (Err(e), buf);
            }
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return (Err(os_error(dev, op, offset, len, e)), buf),
        }
    }
    (Ok(()), buf)
}

fn os_error(dev: &dyn Device, op: &'static str, offset: u64, len: usize, e: io::Error) -> IoError {
    IoError::Os {
        op,
        device: dev.name().to_string(),
        offset,
        len,
        source: e,
    }
}
