//! Seals: pads that say exactly how far the log was durable
//! (docs/FORMAT.md, "Seal"), so recovery can tell damage to acknowledged
//! records from a torn tail.

use std::sync::atomic::Ordering;

use crate::error::Result;
use crate::format;
use crate::segments::SegState;

use super::{InFlight, Pending, State, Writer};

impl Writer {
    /// Appends a *seal* and writes it out, if everything appended is on
    /// the device and no seal says so yet: a pad (docs/FORMAT.md, "Seal")
    /// carrying the exact log position up to which everything was durable.
    /// The seals leaders add to their batches (`take_batch`) cover all but
    /// the last batch; this one covers that too once the log is idle.
    /// Without it, the newest records of a log are followed by nothing
    /// that says they were flushed, so recovery cannot tell damage to them
    /// (acknowledged data lost) from a torn tail (writes in flight at a
    /// crash) and must report it as the latter. The GC thread calls this
    /// once nothing has been appended for `SEAL_AFTER`: one small write
    /// (and flush) per idle spell. Returns whether it appended one.
    pub fn seal_durable(&self) -> Result<bool> {
        let lsn = {
            let mut st = self.state.lock();
            let Some(open) = st.open.as_ref() else {
                return Ok(false);
            };
            let end = (open.seq, open.next);
            let idle = st.active.as_ref().is_none_or(|a| a.len == 0)
                && st.queued.is_empty()
                && st.commit.durable == st.appended
                && st.commit.in_flight() == 0
                && st.commit.failed.is_none();
            // Nothing to say if a seal already covers the whole log, or
            // the last idle seal is the end of it (it covers all before
            // itself, and nothing came after).
            if !idle
                || st.flushed != Some(end)
                || st.sealed == Some(end)
                || st.idle_sealed_end == Some(end)
            {
                return Ok(false);
            }
            if !self.append_seal(&mut st, end) {
                return Ok(false);
            }
            let open = st.open.as_ref().expect("open segment");
            st.idle_sealed_end = Some((open.seq, open.next));
            st.appended += 1;
            st.appended
        };
        self.wait_durable(lsn)?;
        self.stats.idle_seals.fetch_add(1, Ordering::Relaxed);
        Ok(true)
    }

    /// Appends a seal carrying `flushed` (a log position up to which
    /// everything is on the device) at the log's end; false if the open
    /// segment has no room left for one.
    pub(super) fn append_seal(&self, st: &mut State, flushed: (u64, u64)) -> bool {
        let len = (self.layout.grain_bytes as usize).max(self.layout.align);
        let room = st.active.as_ref().map_or(0, |a| a.buf.len() - a.len);
        if room < len {
            // Before reading the log's end: closing pads the buffer to the
            // device alignment, which would move it (not today: a store's
            // alignment never exceeds its grain, so there is no padding).
            self.close_active(st);
        }
        let Some(open) = st.open.as_ref() else {
            return false;
        };
        let (id, seq, at) = (open.id, open.seq, open.next);
        if at + len as u64 > self.layout.segment_bytes {
            return false;
        }
        if st.active.is_none() {
            let buf = self.take_buffer(st, len);
            st.active = Some(Pending {
                buf,
                segment: id,
                segment_seq: seq,
                offset: at,
                len: 0,
                seal_guard: None,
            });
        }
        let grain = self.layout.grain_bytes;
        let active = st.active.as_mut().expect("active buffer");
        debug_assert_eq!(active.offset + active.len as u64, at);
        format::encode_seal(
            &mut active.buf[active.len..active.len + len],
            seq,
            flushed,
            grain,
        );
        active.len += len;
        if active.seal_guard.is_none() {
            active.seal_guard = Some(InFlight::enter(&self.segments, id));
        }
        st.open.as_mut().expect("open segment").next += len as u64;
        st.sealed = Some(flushed);
        true
    }

    /// Seals the open segment (after `sync_all`), e.g. before a checkpoint.
    pub fn seal(&self) {
        let mut st = self.state.lock();
        self.close_active(&mut st);
        debug_assert!(st.queued.is_empty(), "seal with unwritten buffers");
        if let Some(old) = st.open.take() {
            let info = self.segments.get(old.id);
            info.sealed_at
                .store(self.seq.load(Ordering::Relaxed), Ordering::Relaxed);
            info.set_state(SegState::Sealed);
        }
    }
}
