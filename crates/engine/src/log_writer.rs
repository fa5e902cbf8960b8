//! The log-writer thread of write-behind stores ([`Options::write_behind`]):
//! puts are acknowledged from the write buffer. A put made on an io_uring
//! runtime has a task on that ring write the buffers out
//! (`Writer::write_behind`); for the others this thread writes them
//! [`INTERVAL`] after the first of them was buffered, leading a group
//! commit as any waiting writer would (and it looks every 100 ms anyway). Deletes and updates still wait
//! for their own write, which writes out every buffered put before them.
//!
//! Why a wake only for the first buffered record, and then a fixed delay:
//! the puts that follow within the interval cost no system call at all
//! (one wake per batch, not per put), the batch's write covers them all,
//! the interval bounds both the DRAM the buffered copies take and what a
//! crash can lose, and an idle store's thread sleeps.
//!
//! [`Options::write_behind`]: crate::Options::write_behind

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::inner::Inner;

/// How long a write-behind put waits, at most, before its write starts.
pub(crate) const INTERVAL: Duration = Duration::from_micros(500);

/// How often an idle log writer looks anyway (a missed wake costs no more).
const IDLE_CHECK: Duration = Duration::from_millis(100);

pub(crate) struct LogWriterThread {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl LogWriterThread {
    pub fn start(inner: Arc<Inner>) -> LogWriterThread {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let writer_inner = inner.clone();
        let handle = std::thread::Builder::new()
            .name("nvdepot-log-writer".into())
            .spawn(move || {
                let mut failed = false;
                loop {
                    let stopping = flag.load(Ordering::Relaxed);
                    if !stopping && !inner.writer.has_unwritten() {
                        // Woken by the next first buffered record (or stop).
                        std::thread::park_timeout(IDLE_CHECK);
                        continue;
                    }
                    if !stopping {
                        // Let the batch gather.
                        std::thread::park_timeout(INTERVAL);
                    }
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
                }
            })
            .expect("spawn log-writer thread");
        writer_inner.writer.set_log_writer(handle.thread().clone());
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
