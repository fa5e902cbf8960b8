//! The log-writer thread of write-behind stores ([`Options::write_behind`]):
//! puts are acknowledged from the write buffer, and this thread writes the
//! buffers out every [`INTERVAL`], leading a group commit as any waiting
//! writer would. Deletes and updates still wait for their own write, which
//! writes out every buffered put before them.
//!
//! Why a thread on a timer rather than a wake per put: a put then costs no
//! system call at all (a wake would cost a futex call per put on the
//! serving core), and the interval bounds both the DRAM the buffered copies
//! take and what a crash can lose.
//!
//! [`Options::write_behind`]: crate::Options::write_behind

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::store::Inner;

/// How long a write-behind put waits, at most, before its write starts.
pub(crate) const INTERVAL: Duration = Duration::from_micros(500);

pub(crate) struct LogWriterThread {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl LogWriterThread {
    pub fn start(inner: Arc<Inner>) -> LogWriterThread {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::Builder::new()
            .name("nvdepot-log-writer".into())
            .spawn(move || {
                let mut failed = false;
                loop {
                    let stopping = flag.load(Ordering::Relaxed);
                    if inner.writer.has_unwritten() {
                        // A failed write fails the writer for good (every
                        // later write says why); say it here once.
                        if let Err(e) = inner.writer.sync_all() {
                            if !failed {
                                tracing::error!("write-behind log write failed: {e}");
                                failed = true;
                            }
                        }
                    }
                    if stopping {
                        return;
                    }
                    std::thread::park_timeout(INTERVAL);
                }
            })
            .expect("spawn log-writer thread");
        LogWriterThread {
            stop,
            handle: Some(handle),
        }
    }
}

impl Drop for LogWriterThread {
    /// Writes out what is buffered, then stops the thread.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            h.thread().unpark();
            let _ = h.join();
        }
    }
}
