//! The log writer: appends records to the open segment through DRAM write
//! buffers and makes them durable with group commit.
//!
//! Appending copies the record into the active buffer under a short lock
//! and returns its grain address and a log position. A writer then waits
//! for that position to become durable: the first waiter to find no flush
//! in progress becomes the *leader*, takes every buffer filled so far,
//! writes them with `O_DIRECT` and flushes the devices, while later writers
//! keep appending to fresh buffers and will be covered by the next flush.
//! So concurrent writers share one `fdatasync`.
//!
//! Buffers always end on the device alignment (a pad record fills the gap)
//! so no block is ever written twice.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nvdepot_io::AlignedBuf;
use parking_lot::Mutex;

use crate::aio::{self, now, Mode};
use crate::group_commit::CommitState;
use crate::sync::Condvar;

use crate::error::{Error, Result};
use crate::format::{
    self, FlushMark, RecordHeader, RecordKind, SegmentHeader, SegmentKind, SEGMENT_HEADER_BYTES,
};
use crate::layout::Layout;
use crate::segments::{SegState, Segments};

mod commit;
mod seal;

/// Size of a write buffer (a record larger than this gets its own).
const BUFFER_BYTES: usize = 1 << 20;

/// Longest buffer of a big record kept for reuse.
const BIG_BUFFER_BYTES_MAX: usize = 17 << 20;
/// Buffers of big records kept: a large put's batch of chunks (32 MiB,
/// four 8 MiB chunks) reuses them all.
const BIG_BUFFERS_KEPT: usize = 4;

/// Write-behind puts wait for their write instead once this many bytes of
/// acknowledged records are not yet written (bounds their DRAM copies and
/// what a crash can lose).
const UNWRITTEN_BYTES_MAX: usize = 32 << 20;

/// Log writes in flight at most (group commit batches, each written and
/// flushed by its leader): the device keeps working while the writers of
/// a finished batch append the next. Measured with 4 KiB puts at QD 128
/// (`nvdepot bench engine --op put`, bench/results/engine-vs-fio.md).
const BATCHES_IN_FLIGHT: usize = 4;

/// Records that must wait behind the batches in flight before another
/// batch overlaps them (`group_commit::Log::RECORDS_TO_OVERLAP`).
const RECORDS_TO_OVERLAP: u64 = 32;

/// How far (in grains) the durable position moves before a batch carries
/// a seal saying so (`take_batch`): what a crash can leave unaccounted for
/// beyond the batches in flight and the last one acknowledged.
const SEAL_EVERY_GRAINS: u64 = 32;

/// Free segments kept back for garbage collection to relocate into.
pub(crate) const GC_RESERVE_SEGMENTS: usize = 2;

/// Who is appending: decides how deep into the reserve it may go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Appender {
    /// User puts: leave the whole reserve to GC.
    Put,
    /// Tombstones: may take all but one reserved segment, so that a full
    /// store can still delete and so make room.
    Delete,
    /// GC relocation: may take every free segment.
    Gc,
}

impl Appender {
    /// Free segments this appender must leave untouched.
    fn reserve(self) -> usize {
        match self {
            Appender::Put => GC_RESERVE_SEGMENTS,
            Appender::Delete => GC_RESERVE_SEGMENTS - 1,
            Appender::Gc => 0,
        }
    }
}

/// A record to append.
pub(crate) struct RecordParts<'a> {
    pub header: RecordHeader,
    pub key: &'a [u8],
    pub value: &'a [u8],
}

/// Where an appended record went. While it lives, its segment counts an
/// append in flight, and GC leaves the segment alone: the record may not be
/// durable or indexed yet. Drop it once the index points to the record (or
/// the operation gave up).
pub(crate) struct Appended {
    pub pba: u64,
    pub grains: u64,
    /// Log position to wait for with [`Writer::wait_durable`].
    pub lsn: u64,
    _in_flight: InFlight,
}

impl Appended {
    /// Where it went, without the hold on its segment.
    pub fn placed(&self) -> Placed {
        Placed {
            pba: self.pba,
            grains: self.grains,
            lsn: self.lsn,
        }
    }
}

/// A scheduled write-behind task's hold on the writer: if the task is
/// dropped unrun (its runtime ended), the next put schedules another.
struct Scheduled(Arc<Writer>);

impl Drop for Scheduled {
    fn drop(&mut self) {
        self.0.ring_write_scheduled.store(false, Ordering::Release);
    }
}

/// Where a write-behind put's record went.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Placed {
    pub pba: u64,
    pub grains: u64,
    /// Log position to wait for with [`Writer::wait_durable_in`].
    pub lsn: u64,
}

/// Records acknowledged before their device write (write-behind), kept
/// readable by grain address until the batch holding them is written.
/// Each keeps its segment's in-flight count up meanwhile, so GC and
/// eviction leave the segment alone.
#[derive(Default)]
struct Unwritten {
    by_pba: HashMap<u64, Buffered>,
    /// (log position, grain address) in append order.
    order: VecDeque<(u64, u64)>,
    bytes: usize,
}

struct Buffered {
    record: Box<[u8]>,
    _in_flight: InFlight,
}

struct InFlight {
    segments: Arc<Segments>,
    segment: u32,
}

impl InFlight {
    /// Counts an append in flight in `segment` until dropped.
    fn enter(segments: &Arc<Segments>, segment: u32) -> InFlight {
        segments
            .get(segment)
            .in_flight
            .fetch_add(1, Ordering::Acquire);
        InFlight {
            segments: segments.clone(),
            segment,
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let prev = self
            .segments
            .get(self.segment)
            .in_flight
            .fetch_sub(1, Ordering::Release);
        debug_assert!(prev > 0);
    }
}

pub(crate) struct Pending {
    buf: AlignedBuf,
    segment: u32,
    /// The segment's sequence number.
    segment_seq: u64,
    /// Offset in the segment of `buf[0]`.
    offset: u64,
    len: usize,
    /// Keeps GC off the segment while a seal in the buffer is unwritten
    /// (records hold their own guards, a seal has no caller to hold one).
    seal_guard: Option<InFlight>,
}

struct OpenSegment {
    id: u32,
    seq: u64,
    /// Next free byte in the segment.
    next: u64,
}

pub(crate) struct State {
    open: Option<OpenSegment>,
    active: Option<Pending>,
    queued: Vec<Pending>,
    /// Log position of the last appended record.
    appended: u64,
    /// Durable position, flush in progress, failure, parked waiters.
    commit: CommitState<Vec<Pending>>,
    /// Log position (segment sequence number, offset) the last completed
    /// batch wrote up to.
    written: Option<(u64, u64)>,
    /// Log position up to which everything is on the device: flushed (the
    /// end of the last flushed batch, or what a periodic flush covered),
    /// or, before the first flush of this process, the start of the first
    /// segment it opened (recovery flushed what came before). Every
    /// record carries it as its [`FlushMark`].
    flushed: Option<(u64, u64)>,
    /// The flushed position the last seal appended carries.
    sealed: Option<(u64, u64)>,
    /// The log's end just after the last idle seal (`seal_durable`).
    idle_sealed_end: Option<(u64, u64)>,
    pool: Vec<AlignedBuf>,
    /// Buffers of records longer than `BUFFER_BYTES` (a large value's
    /// chunks, 8 MiB each), kept for the next such record: a fresh one
    /// costs a page fault per 4 KiB on first touch.
    big_pool: Vec<AlignedBuf>,
}

/// Counters the writer keeps.
#[derive(Default)]
pub(crate) struct WriterStats {
    pub device_bytes: AtomicU64,
    pub flushes: AtomicU64,
    pub pad_bytes: AtomicU64,
    pub idle_seals: AtomicU64,
}

pub(crate) struct Writer {
    layout: Arc<Layout>,
    segments: Arc<Segments>,
    uuid: u128,
    sync: bool,
    /// Flush on the leader's thread even on a ring, when nothing else of
    /// its runtime is ready ([`Options::flush_inline`]).
    ///
    /// [`Options::flush_inline`]: crate::Options::flush_inline
    flush_inline: bool,
    /// The store-wide sequence counter.
    seq: Arc<AtomicU64>,
    state: Mutex<State>,
    done: Condvar,
    /// Write-behind records not yet written (lock order: after `state`).
    unwritten: Mutex<Unwritten>,
    /// `unwritten.order.len()`, read without the lock on every read.
    unwritten_records: AtomicUsize,
    /// The log-writer thread, woken when the first record is buffered
    /// after it has written everything (it sleeps while nothing is).
    log_writer: std::sync::OnceLock<std::thread::Thread>,
    /// A ring task is about to lead a write of the buffered records.
    ring_write_scheduled: AtomicBool,
    pub stats: WriterStats,
}

impl Writer {
    pub fn new(
        layout: Arc<Layout>,
        segments: Arc<Segments>,
        uuid: u128,
        sync: bool,
        flush_inline: bool,
        seq: Arc<AtomicU64>,
    ) -> Writer {
        Writer {
            layout,
            segments,
            uuid,
            sync,
            flush_inline,
            seq,
            state: Mutex::new(State {
                open: None,
                active: None,
                queued: Vec::new(),
                appended: 0,
                commit: CommitState::default(),
                written: None,
                flushed: None,
                sealed: None,
                idle_sealed_end: None,
                pool: Vec::new(),
                big_pool: Vec::new(),
            }),
            done: Condvar::new(),
            unwritten: Mutex::new(Unwritten::default()),
            unwritten_records: AtomicUsize::new(0),
            log_writer: std::sync::OnceLock::new(),
            ring_write_scheduled: AtomicBool::new(false),
            stats: WriterStats::default(),
        }
    }

    /// Appends a record. Waits (outside the lock) for GC when no segment
    /// is free to `who`, and fails with `StoreFull` when GC cannot help.
    pub fn append(&self, rec: &RecordParts<'_>, who: Appender) -> Result<Appended> {
        loop {
            if let Some(app) = self.try_append(rec, who)? {
                return Ok(app);
            }
            self.wait_for_space(who)?;
        }
    }

    /// Appends a record if a segment is free to `who`; `Ok(None)` if not.
    /// Never blocks on GC, so it is safe to call holding stripe locks (GC
    /// needs them to free space): on `None`, release them, call
    /// [`Writer::wait_for_space`] and retry.
    pub fn try_append(&self, rec: &RecordParts<'_>, who: Appender) -> Result<Option<Appended>> {
        let len = self.record_len(rec);
        let mut st = self.state.lock();
        if !self.make_room(&mut st, len, who)? {
            return Ok(None);
        }
        Ok(Some(self.copy_in(&mut st, rec, len)))
    }

    /// Appends `recs` as one crash-atomic batch: a [`RecordKind::Batch`]
    /// frame, then each record marked a member, all in one segment with
    /// nothing but pads between them (the state lock is held throughout),
    /// so recovery can tell a whole batch from a cut one
    /// (docs/FORMAT.md, "Batches"). `frame` is the frame's header (its
    /// sequence number and namespace; kind and lengths are set here).
    /// `Ok(None)`: no segment is free to `who`.
    pub fn try_append_batch(
        &self,
        frame: RecordHeader,
        recs: &[RecordParts<'_>],
        who: Appender,
    ) -> Result<Option<Vec<Appended>>> {
        Ok(self
            .append_batch(frame, recs, who, false)?
            .map(|(apps, _)| apps))
    }

    /// [`Writer::try_append_batch`] whose members stay readable through
    /// [`Writer::unwritten_record`] until written (as
    /// [`Writer::try_append_buffered`] keeps one record), so the caller may
    /// point the index at them before they are durable. Also says whether
    /// they are the first records buffered since the last write.
    pub fn try_append_batch_buffered(
        &self,
        frame: RecordHeader,
        recs: &[RecordParts<'_>],
        who: Appender,
    ) -> Result<Option<(Vec<Appended>, bool)>> {
        self.append_batch(frame, recs, who, true)
    }

    fn append_batch(
        &self,
        frame: RecordHeader,
        recs: &[RecordParts<'_>],
        who: Appender,
        buffered: bool,
    ) -> Result<Option<(Vec<Appended>, bool)>> {
        let lens: Vec<usize> = recs.iter().map(|r| self.record_len(r)).collect();
        let member_bytes: usize = lens.iter().sum();
        let frame_value = format::BatchFrame {
            members: u32::try_from(recs.len()).expect("batch of at most u32::MAX records"),
            member_bytes: member_bytes as u64,
        }
        .encode();
        let frame = RecordParts {
            header: RecordHeader {
                kind: RecordKind::Batch,
                member: false,
                key_len: 0,
                value_len: format::BATCH_FRAME_BYTES as u32,
                ..frame
            },
            key: &[],
            value: &frame_value,
        };
        let frame_len = self.record_len(&frame);
        let worst = self.batch_bytes_worst(frame_len + member_bytes, recs.len());
        assert!(
            worst <= self.layout.segment_bytes - SEGMENT_HEADER_BYTES,
            "batch of {worst} bytes exceeds a segment (callers check batch_fits)"
        );
        let mut st = self.state.lock();
        if !self.make_room(&mut st, worst as usize, who)? {
            return Ok(None);
        }
        let _frame = self.copy_in(&mut st, &frame, frame_len);
        let mut out = Vec::with_capacity(recs.len());
        let mut first = false;
        for (r, &len) in recs.iter().zip(&lens) {
            let member = RecordParts {
                header: RecordHeader {
                    member: true,
                    ..r.header
                },
                key: r.key,
                value: r.value,
            };
            let app = self.copy_in(&mut st, &member, len);
            if buffered {
                first |= self.keep_buffered(&st, &app, len);
            }
            out.push(app);
        }
        Ok(Some((out, first)))
    }

    /// The most log bytes a batch of `bytes` (frame and members, each
    /// padded to grains) in `members` records can take: a record that does
    /// not fit the write buffer's room starts a new buffer (of at least
    /// `BUFFER_BYTES`), padding the last one to the alignment. A switch
    /// leaves the buffer it ends at least half full unless the record that
    /// caused it is over half a buffer itself, so there are at most
    /// 4 × bytes / `BUFFER_BYTES` + 2 switches, and at most one per record.
    fn batch_bytes_worst(&self, bytes: usize, members: usize) -> u64 {
        let switches = (members + 1).min(4 * bytes / BUFFER_BYTES + 2);
        (bytes + switches * self.layout.align) as u64
    }

    /// Whether a batch of records with these (key, value) lengths fits one
    /// segment ([`Writer::try_append_batch`]).
    pub fn batch_fits(&self, lens: impl Iterator<Item = (usize, usize)>) -> bool {
        let grain = self.layout.grain_bytes as usize;
        let (mut bytes, mut n) = (format::record_bytes(0, format::BATCH_FRAME_BYTES, grain), 0);
        for (k, v) in lens {
            bytes += format::record_bytes(k, v, grain);
            n += 1;
        }
        self.batch_bytes_worst(bytes, n) <= self.layout.segment_bytes - SEGMENT_HEADER_BYTES
    }

    /// Bytes `rec` takes in the log (grain-aligned); at most a segment's
    /// data area (callers check sizes first: a larger one is a bug).
    fn record_len(&self, rec: &RecordParts<'_>) -> usize {
        let len = format::record_bytes(
            rec.key.len(),
            rec.value.len(),
            self.layout.grain_bytes as usize,
        );
        let data_bytes = self.layout.segment_bytes - SEGMENT_HEADER_BYTES;
        assert!(
            len as u64 <= data_bytes,
            "record of {len} bytes exceeds a segment"
        );
        len
    }

    /// Sees that a record of `len` bytes fits the open segment, opening a
    /// free one (if one is free to `who`) when it does not. False: none is.
    fn make_room(&self, st: &mut State, len: usize, who: Appender) -> Result<bool> {
        if let Some(why) = &st.commit.failed {
            return Err(Error::Unusable(why.clone()));
        }
        let fits = st
            .open
            .as_ref()
            .is_some_and(|o| o.next + len as u64 <= self.layout.segment_bytes);
        if !fits {
            match self.segments.take_free(who.reserve()) {
                Some(id) => self.switch_segment(st, id),
                None => return Ok(false),
            }
        }
        Ok(true)
    }

    /// Appends a write-behind record (as [`Writer::try_append`]) and keeps
    /// a copy readable through [`Writer::unwritten_record`] until it is
    /// written. `Ok(None)`: no segment is free (callers first check
    /// [`Writer::unwritten_over_budget`] and append and wait instead).
    /// Also says whether it is the first record buffered since the last
    /// write (see [`Writer::write_behind`]).
    pub fn try_append_buffered(
        &self,
        rec: &RecordParts<'_>,
        who: Appender,
    ) -> Result<Option<(Appended, bool)>> {
        let len = self.record_len(rec);
        let mut st = self.state.lock();
        if !self.make_room(&mut st, len, who)? {
            return Ok(None);
        }
        let app = self.copy_in(&mut st, rec, len);
        let first = self.keep_buffered(&st, &app, len);
        Ok(Some((app, first)))
    }

    /// Keeps a copy of the record `app` just copied into the active
    /// buffer (its last `len` bytes) readable until it is written; true if
    /// it is the first record buffered since the last write.
    fn keep_buffered(&self, st: &State, app: &Appended, len: usize) -> bool {
        // Copied under the same lock, so no leader can take the buffer
        // first.
        let active = st.active.as_ref().expect("the record's buffer");
        let record: Box<[u8]> = active.buf[active.len - len..active.len].into();
        let mut u = self.unwritten.lock();
        u.bytes += record.len();
        u.order.push_back((app.lsn, app.pba));
        // Two holds on the segment: the buffered copy's, until it is
        // written, and the caller's (`app`), until the index points to the
        // record. The buffer may be written before the caller indexes the
        // record; with one hold, GC could then evict or collect the sealed
        // segment, not see the record (not indexed yet), and free the
        // segment the index is about to point into.
        let segment = self.layout.segment_of(app.pba);
        u.by_pba.insert(
            app.pba,
            Buffered {
                record,
                _in_flight: InFlight::enter(&self.segments, segment),
            },
        );
        self.unwritten_records
            .store(u.order.len(), Ordering::Release);
        u.order.len() == 1
    }

    /// Sees that a just buffered write-behind record gets written. On an
    /// io_uring runtime (a server worker): a task on that ring leads the
    /// write, unless one is scheduled already, so the write is submitted
    /// in the same `io_uring_enter` as the worker's sends and receives of
    /// this loop turn, and every record buffered meanwhile joins it: no
    /// thread wake, no extra system call. Elsewhere: the log-writer thread
    /// is woken for the first record of a batch.
    pub fn write_behind(self: &Arc<Self>, mode: Mode, first: bool) {
        if mode == Mode::Ring && aio::runtime_keeps_running() {
            if self.ring_write_scheduled.swap(true, Ordering::AcqRel) {
                return;
            }
            let scheduled = Scheduled(Arc::clone(self));
            drop(nvdepot_io::uring::spawn(async move {
                let w = &scheduled.0;
                // Cleared before the target is read: a record appended
                // after this either is covered or schedules another task.
                w.ring_write_scheduled.store(false, Ordering::Release);
                let lsn = w.state.lock().appended;
                if let Err(e) = w.wait_durable_in(Mode::Ring, lsn).await {
                    // The writer is failed for good; every later write
                    // says why.
                    tracing::debug!("write-behind write failed: {e}");
                }
            }));
        } else if first {
            if let Some(t) = self.log_writer.get() {
                t.unpark();
            }
        }
    }

    /// Registers the thread that writes write-behind records out.
    pub fn set_log_writer(&self, thread: std::thread::Thread) {
        let _ = self.log_writer.set(thread);
    }

    /// Whether write-behind puts should wait instead (too much buffered).
    pub fn unwritten_over_budget(&self) -> bool {
        self.unwritten_records.load(Ordering::Acquire) > 0
            && self.unwritten.lock().bytes >= UNWRITTEN_BYTES_MAX
    }

    /// Whether any write-behind record still waits for its write.
    pub fn has_unwritten(&self) -> bool {
        self.unwritten_records.load(Ordering::Acquire) > 0
    }

    /// The bytes of the write-behind record at `pba`, if it is not written
    /// yet (the device does not hold it).
    pub fn unwritten_record(&self, pba: u64) -> Option<Vec<u8>> {
        if self.unwritten_records.load(Ordering::Acquire) == 0 {
            return None;
        }
        self.unwritten
            .lock()
            .by_pba
            .get(&pba)
            .map(|b| b.record.to_vec())
    }

    /// Forgets the write-behind records up to log position `lsn`, now
    /// written.
    fn release_unwritten(&self, lsn: u64) {
        if self.unwritten_records.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut u = self.unwritten.lock();
        while let Some(&(at, pba)) = u.order.front() {
            if at > lsn {
                break;
            }
            u.order.pop_front();
            if let Some(b) = u.by_pba.remove(&pba) {
                u.bytes -= b.record.len();
            }
        }
        self.unwritten_records
            .store(u.order.len(), Ordering::Release);
    }

    /// Waits until a segment is free to `who`, or fails with `StoreFull`
    /// when GC cannot free one (or `Unusable` when GC failed).
    pub fn wait_for_space(&self, who: Appender) -> Result<()> {
        now(self.wait_for_space_in(Mode::Blocking, who))
    }

    /// [`Writer::wait_for_space`], waiting as `mode` says: a task of the
    /// async API parks (the runtime's other tasks go on), a blocking
    /// caller blocks.
    pub async fn wait_for_space_in(&self, mode: Mode, who: Appender) -> Result<()> {
        let gave_up = self.segments.gc_gave_up.load(Ordering::Relaxed);
        // Real time, not wait steps: every freed segment ends a step early
        // (and another writer may take it first), so counting steps as
        // 50 ms each gave up after a fraction of the 10 s while GC was
        // freeing segments on a loaded host (`SERVER_ERROR store full`
        // with 4 % of the grains live, cache mode).
        let started = std::time::Instant::now();
        loop {
            if self.segments.free_count() > who.reserve() {
                return Ok(());
            }
            if let Some(why) = self.segments.gc_failed.lock().clone() {
                return Err(Error::Unusable(format!(
                    "no free segment and garbage collection failed: {why}"
                )));
            }
            let hopeless = self.segments.gc_gave_up.load(Ordering::Relaxed) != gave_up;
            if hopeless || started.elapsed() >= Duration::from_secs(10) || who == Appender::Gc {
                let (mut by_state, mut in_flight) = ([0usize; 5], 0u64);
                for s in self.segments.infos.iter() {
                    by_state[s.state() as usize] += 1;
                    in_flight += s.in_flight.load(Ordering::Relaxed);
                }
                tracing::warn!(
                    "no free segment for {who:?}: gc gave up {hopeless}, waited {:?}, \
                     segments free/open/sealed/checkpoint/collecting {by_state:?}, \
                     appends in flight {in_flight}",
                    started.elapsed()
                );
                return Err(self.full_error());
            }
            let step = Duration::from_millis(50);
            match mode {
                Mode::Ring if nvdepot_io::uring::in_runtime() => self.segments.freed_in(step).await,
                _ => self.segments.wait_freed(step),
            }
        }
    }

    pub fn full_error(&self) -> Error {
        let total = self.segments.len();
        let used = total - self.segments.free_count();
        let grains: u64 = self
            .segments
            .infos
            .iter()
            .map(|s| s.valid_grains.load(Ordering::Relaxed))
            .sum();
        let cap = (used as u64 * self.layout.grains_per_segment()).max(1);
        Error::StoreFull {
            used_segments: used,
            total_segments: total,
            valid_percent: grains * 100 / cap,
        }
    }

    /// Seals the open segment and opens `id`, whose header goes at the
    /// front of the first buffer.
    fn switch_segment(&self, st: &mut State, id: u32) {
        self.close_active(st);
        if let Some(old) = st.open.take() {
            let info = self.segments.get(old.id);
            info.sealed_at
                .store(self.seq.load(Ordering::Relaxed), Ordering::Relaxed);
            info.set_state(SegState::Sealed);
        }
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        let info = self.segments.get(id);
        info.seq.store(seq, Ordering::Relaxed);
        info.valid_grains.store(0, Ordering::Relaxed);
        info.tombstone_grains.store(0, Ordering::Relaxed);
        info.min_seq.store(u64::MAX, Ordering::Relaxed);
        info.set_state(SegState::Open);
        let mut buf = self.take_buffer(st, BUFFER_BYTES);
        let header = SegmentHeader {
            kind: SegmentKind::Kv,
            uuid: self.uuid,
            seq,
            part: 0,
            parts: 0,
            payload_bytes: 0,
            payload_crc: 0,
        };
        buf[..SEGMENT_HEADER_BYTES as usize].fill(0);
        header.encode(&mut buf);
        st.active = Some(Pending {
            buf,
            segment: id,
            segment_seq: seq,
            offset: 0,
            len: SEGMENT_HEADER_BYTES as usize,
            seal_guard: None,
        });
        st.flushed.get_or_insert((seq, 0));
        st.open = Some(OpenSegment {
            id,
            seq,
            next: SEGMENT_HEADER_BYTES,
        });
    }

    fn take_buffer(&self, st: &mut State, len: usize) -> AlignedBuf {
        if len <= BUFFER_BYTES {
            if let Some(b) = st.pool.pop() {
                return b;
            }
            return self.layout.buffer(BUFFER_BYTES);
        }
        if let Some(i) = st.big_pool.iter().position(|b| b.len() >= len) {
            return st.big_pool.swap_remove(i);
        }
        self.layout.buffer(len)
    }

    fn copy_in(&self, st: &mut State, rec: &RecordParts<'_>, len: usize) -> Appended {
        let room = st.active.as_ref().map_or(0, |a| a.buf.len() - a.len);
        if room < len {
            self.close_active(st);
            let open = st.open.as_ref().expect("open segment");
            let (id, segment_seq, at) = (open.id, open.seq, open.next);
            let buf = self.take_buffer(st, len);
            st.active = Some(Pending {
                buf,
                segment: id,
                segment_seq,
                offset: at,
                len: 0,
                seal_guard: None,
            });
        }
        let (mark_seq, mark_offset) = st.flushed.expect("set when the segment was opened");
        let flushed = FlushMark::at(mark_seq, mark_offset, self.layout.segment_bytes);
        let open = st.open.as_mut().expect("open segment");
        let (id, seg_seq, at) = (open.id, open.seq, open.next);
        open.next += len as u64;
        let active = st.active.as_mut().expect("active buffer");
        debug_assert_eq!(active.offset + active.len as u64, at);
        let out = &mut active.buf[active.len..active.len + len];
        let header = RecordHeader {
            segment_seq: seg_seq,
            flushed,
            ..rec.header
        };
        let used = format::encode_record(out, &header, rec.key, rec.value);
        out[used..].fill(0);
        active.len += len;
        let info = self.segments.get(id);
        info.min_seq.fetch_min(rec.header.seq, Ordering::Relaxed);
        st.appended += 1;
        Appended {
            _in_flight: InFlight::enter(&self.segments, id),
            pba: self.layout.pba(id, at),
            grains: (len as u64) / self.layout.grain_bytes,
            lsn: st.appended,
        }
    }

    /// Moves the active buffer to the flush queue, padded to the alignment.
    fn close_active(&self, st: &mut State) {
        let Some(mut p) = st.active.take() else {
            return;
        };
        let align = self.layout.align;
        let end = p.offset as usize + p.len;
        let pad = end.next_multiple_of(align) - end;
        if pad > 0 {
            let open = st.open.as_mut().expect("open segment");
            debug_assert_eq!(open.next as usize, end);
            if p.len + pad > p.buf.len() {
                let mut bigger = self.layout.buffer(p.len + pad);
                bigger[..p.len].copy_from_slice(&p.buf[..p.len]);
                p.buf = bigger;
            }
            format::encode_pad(&mut p.buf[p.len..p.len + pad], open.seq);
            open.next += pad as u64;
            p.len += pad;
            self.stats
                .pad_bytes
                .fetch_add(pad as u64, Ordering::Relaxed);
        }
        if p.len > 0 {
            st.queued.push(p);
        } else {
            st.pool.push(p.buf);
        }
    }

    /// Group-commit batches being written now.
    pub fn batches_in_flight(&self) -> usize {
        self.state.lock().commit.in_flight()
    }

    /// Log position of the last appended record (changes with every
    /// append: the GC thread watches it to see the log idle).
    pub fn appended(&self) -> u64 {
        self.state.lock().appended
    }
}
