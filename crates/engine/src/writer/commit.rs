//! Making appended records durable: the group commit's side of the log
//! (`group_commit.rs` decides who leads; this writes a leader's batch and
//! flushes its devices), and the periodic flush of `--ack written`-style
//! modes that acknowledge before a flush.

use std::sync::atomic::Ordering;

use crate::aio::{self, now, Mode};
use crate::error::Result;
use crate::group_commit::{self, CommitState};

use super::{
    Pending, State, Writer, BATCHES_IN_FLIGHT, BIG_BUFFERS_KEPT, BIG_BUFFER_BYTES_MAX,
    BUFFER_BYTES, RECORDS_TO_OVERLAP, SEAL_EVERY_GRAINS,
};

impl Writer {
    /// Blocks until the record at `lsn` is on the device (written, and
    /// flushed when the store syncs).
    pub fn wait_durable(&self, lsn: u64) -> Result<()> {
        now(self.wait_durable_in(Mode::Blocking, lsn))
    }

    /// Waits until the record at `lsn` is on the device. The first waiter
    /// to find no flush in progress leads one (its IO waits as `mode`
    /// says); the others wait for it, parked as `mode` says.
    ///
    /// A blocking waiter on a runtime's thread must not wait for a flush a
    /// task of that same runtime leads (it would block the task): inside a
    /// runtime, use the async store calls.
    pub async fn wait_durable_in(&self, mode: Mode, lsn: u64) -> Result<()> {
        group_commit::wait_durable(self, &self.state, &self.done, mode, lsn).await
    }

    /// Writes the buffers of a batch and flushes their devices; gives the
    /// buffers back.
    async fn write_batch(&self, mode: Mode, batch: Vec<Pending>) -> (Result<()>, Vec<Pending>) {
        let mut mask = 0u64;
        let mut done = Vec::with_capacity(batch.len());
        let mut result = Ok(());
        for mut p in batch {
            if result.is_ok() {
                let (dev, start) = self.layout.segment_start(p.segment);
                let (r, buf) = aio::write(
                    mode,
                    &*self.layout.devices[dev],
                    p.buf,
                    p.len,
                    start + p.offset,
                )
                .await;
                p.buf = buf;
                result = r;
                if result.is_ok() {
                    mask |= self.layout.device_bit(p.segment);
                    self.stats
                        .device_bytes
                        .fetch_add(p.len as u64, Ordering::Relaxed);
                }
            }
            done.push(p);
        }
        if result.is_ok() && self.sync && mask != 0 {
            // Blocking the worker delays only what is ready on it now.
            let flush_mode = if self.flush_inline && !nvdepot_io::uring::others_ready() {
                Mode::Blocking
            } else {
                mode
            };
            for (i, d) in self.layout.devices.iter().enumerate() {
                if i >= 64 || mask & (1 << i) != 0 {
                    if let Err(e) = aio::flush(flush_mode, &**d).await {
                        result = Err(e);
                        break;
                    }
                }
            }
            if result.is_ok() {
                self.stats.flushes.fetch_add(1, Ordering::Relaxed);
            }
        }
        (result, done)
    }

    /// Flushes the devices' caches (the periodic flush when writes are
    /// acknowledged before a flush) and advances the flush mark over what
    /// was written before it began.
    ///
    /// A failed flush is not retried as if a later success covered it (the
    /// kernel may have dropped the unflushed pages: PostgreSQL's
    /// "fsyncgate"): the writer fails for good, so the store stops
    /// accepting writes and says why, while reads go on.
    pub fn flush_devices(&self) -> Result<()> {
        let written = self.state.lock().written;
        if let Err(e) = self.layout.flush(u64::MAX) {
            let mut st = self.state.lock();
            st.commit.fail(|| {
                format!(
                    "device flush failed ({e}); writes acknowledged since the last flush may \
                     be lost, and the store accepts no more writes: restart it"
                )
            });
            return Err(e);
        }
        let mut st = self.state.lock();
        if let Some(w) = written {
            if st.flushed.is_none_or(|f| f < w) {
                st.flushed = Some(w);
            }
        }
        Ok(())
    }

    /// Writes out everything appended so far and waits for it.
    pub fn sync_all(&self) -> Result<()> {
        let lsn = self.state.lock().appended;
        self.wait_durable(lsn)
    }
}

/// The log's side of the group commit (`group_commit.rs`).
impl group_commit::Log for Writer {
    type State = State;
    type Batch = Vec<Pending>;
    const BATCHES_IN_FLIGHT: usize = BATCHES_IN_FLIGHT;
    const RECORDS_TO_OVERLAP: u64 = RECORDS_TO_OVERLAP;

    fn gathers(&self) -> bool {
        // Only a runtime that keeps running will poll the yielded task
        // again (not one driving a single blocking call).
        crate::aio::runtime_keeps_running()
    }

    fn commit(st: &mut State) -> &mut CommitState<Vec<Pending>> {
        &mut st.commit
    }

    fn take_batch(&self, st: &mut State) -> (Vec<Pending>, u64) {
        // A seal saying how far the log is durable now: the flush marks
        // the records carry are coarse (a 256th of a segment: 256 KiB of
        // acknowledged records in a 64 MiB segment), so without it damage
        // to them would read as a torn tail. One grain in the same write,
        // once the durable position has moved `SEAL_EVERY_GRAINS` past the
        // last seal's (or into another segment): at most 1/32 of the log,
        // where one per batch would cost a third of it with small records
        // written one at a time.
        let records = st.active.as_ref().is_some_and(|a| a.len > 0) || !st.queued.is_empty();
        let every = SEAL_EVERY_GRAINS * self.layout.grain_bytes;
        let due = |f: (u64, u64)| {
            st.sealed
                .is_none_or(|s| f.0 != s.0 || f.1 >= s.1.saturating_add(every))
        };
        if let Some(flushed) = st.flushed.filter(|&f| records && due(f)) {
            self.append_seal(st, flushed);
        }
        self.close_active(st);
        (std::mem::take(&mut st.queued), st.appended)
    }

    async fn write(&self, mode: Mode, batch: Vec<Pending>) -> (Result<()>, Vec<Pending>) {
        self.write_batch(mode, batch).await
    }

    fn written(&self, st: &mut State, ok: bool, batch: Vec<Pending>) {
        let end = batch
            .last()
            .map(|p| (p.segment_seq, p.offset + p.len as u64));
        if ok && end.is_some() {
            st.written = end;
            if self.sync {
                st.flushed = end;
            }
        }
        for p in batch {
            if p.buf.len() == BUFFER_BYTES && st.pool.len() < BATCHES_IN_FLIGHT + 2 {
                st.pool.push(p.buf);
            } else if p.buf.len() > BUFFER_BYTES
                && p.buf.len() <= BIG_BUFFER_BYTES_MAX
                && st.big_pool.len() < BIG_BUFFERS_KEPT
            {
                st.big_pool.push(p.buf);
            }
        }
    }

    fn published(&self, durable: u64) {
        // Only now that the device holds them: a reader that misses them
        // here reads them there.
        self.release_unwritten(durable);
    }
}
