//! One code path for the blocking and the async API.
//!
//! Store operations are written once, as `async fn`s taking a [`Mode`]. The
//! blocking API runs them with [`Mode::Blocking`]: every device call is the
//! device's own blocking call, so the future is ready on its first poll and
//! [`now`] drives it. The async API (`Store::*_async`) runs them with
//! [`Mode::Ring`]: device IO goes through the calling thread's
//! `nvdepot_io::uring` runtime (or blocks where there is none), and waits
//! for locks and group commit park the task instead of the thread.

use std::future::Future;

use nvdepot_io::{uring, AlignedBuf, Device};

use crate::error::Result;

/// How an operation waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Block the calling thread (pread/pwrite, condition variables).
    Blocking,
    /// Park the task on the thread's io_uring runtime.
    Ring,
}

/// Runs a future that cannot be pending (one built with
/// [`Mode::Blocking`]) to completion.
pub(crate) use nvdepot_io::uring::run_ready as now;

/// Runs an operation of the blocking API: with [`Mode::Blocking`], unless
/// `NVDEPOT_BACKEND=uring` is set in the environment, which runs it on a
/// per-thread io_uring runtime instead (so the whole test suite can be
/// rerun over the async paths: `NVDEPOT_BACKEND=uring cargo test`).
pub(crate) fn drive<F: Future>(op: impl FnOnce(Mode) -> F) -> F::Output {
    if ring_backend() && !uring::in_runtime() {
        DRIVING.with(|d| d.set(true));
        let out = RING.with(|rt| rt.as_ref().map(|rt| rt.block_on(op(Mode::Ring))));
        DRIVING.with(|d| d.set(false));
        if let Some(out) = out {
            return out;
        }
        unreachable!("NVDEPOT_BACKEND=uring but io_uring is unavailable");
    }
    now(op(Mode::Blocking))
}

fn ring_backend() -> bool {
    static RING_BACKEND: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *RING_BACKEND.get_or_init(|| {
        let on = std::env::var("NVDEPOT_BACKEND").is_ok_and(|v| v == "uring");
        // Refuse the setting where rings cannot be made, instead of failing
        // later in the middle of an operation.
        on && uring::Runtime::new().is_ok()
    })
}

thread_local! {
    static RING: Option<uring::Runtime> = uring::Runtime::new().ok();
    /// Inside [`drive`]: the thread's runtime runs only until this one
    /// operation ends, so it must not be left a task to finish later.
    static DRIVING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether a task spawned now on this thread's runtime will keep being
/// run: on a runtime that serves (a server worker), not one that
/// [`drive`] runs for one blocking call.
pub(crate) fn runtime_keeps_running() -> bool {
    uring::in_runtime() && !DRIVING.with(|d| d.get())
}

pub(crate) async fn read(
    mode: Mode,
    dev: &dyn Device,
    buf: AlignedBuf,
    offset: u64,
) -> Result<AlignedBuf> {
    let mut buf = buf;
    match mode {
        Mode::Blocking => dev.read_at(&mut buf, offset)?,
        Mode::Ring => {
            let (r, b) = uring::read_device(dev, buf, offset).await;
            buf = b;
            r?
        }
    }
    Ok(buf)
}

pub(crate) async fn write(
    mode: Mode,
    dev: &dyn Device,
    buf: AlignedBuf,
    len: usize,
    offset: u64,
) -> (Result<()>, AlignedBuf) {
    match mode {
        Mode::Blocking => (dev.write_at(&buf[..len], offset).map_err(Into::into), buf),
        Mode::Ring => {
            let (r, b) = uring::write_device(dev, buf, len, offset).await;
            (r.map_err(Into::into), b)
        }
    }
}

pub(crate) async fn flush(mode: Mode, dev: &dyn Device) -> Result<()> {
    match mode {
        Mode::Blocking => dev.flush()?,
        Mode::Ring => uring::flush_device(dev).await?,
    }
    Ok(())
}
