//! [`Shutdown`]: the handle that stops a running server.

use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Stops a server from any thread (a signal-handling thread, a test).
///
/// A stop flag plus a wake-up socket pair: [`Shutdown::trigger`] sets the
/// flag and writes one byte, which makes the accept loop's `poll` return at
/// once, without a polling interval. Clones share the same state; a
/// trigger is permanent.
#[derive(Clone, Debug)]
pub struct Shutdown {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    stop: AtomicBool,
    /// Written by `trigger`.
    wake_tx: UnixStream,
    /// Polled by the accept loop; readable once triggered.
    wake_rx: UnixStream,
}

impl Shutdown {
    /// A new, untriggered handle. Fails only when no file descriptor is
    /// left for the socket pair.
    pub fn new() -> io::Result<Shutdown> {
        let (wake_tx, wake_rx) = UnixStream::pair()?;
        wake_tx.set_nonblocking(true)?;
        wake_rx.set_nonblocking(true)?;
        Ok(Shutdown {
            inner: Arc::new(Inner {
                stop: AtomicBool::new(false),
                wake_tx,
                wake_rx,
            }),
        })
    }

    /// Asks the server to stop: it stops accepting, lets connections finish
    /// the requests they have read, closes them and returns. Idempotent.
    pub fn trigger(&self) {
        if !self.inner.stop.swap(true, Ordering::SeqCst) {
            // One byte is enough; a full buffer (WouldBlock) means the
            // reader is already awake.
            let _ = (&self.inner.wake_tx).write(&[1]);
        }
    }

    /// Whether [`Shutdown::trigger`] was called.
    pub fn is_triggered(&self) -> bool {
        self.inner.stop.load(Ordering::SeqCst)
    }

    /// The descriptor that becomes readable on trigger (for `poll`).
    pub(crate) fn wake_fd(&self) -> BorrowedFd<'_> {
        self.inner.wake_rx.as_fd()
    }

    /// Empties the wake socket (after a spurious or handled wake-up).
    pub(crate) fn drain_wake(&self) {
        let mut sink = [0u8; 16];
        while matches!((&self.inner.wake_rx).read(&mut sink), Ok(n) if n > 0) {}
    }
}
