//! The in-DRAM segment table: state, live grains and sequence bounds of
//! every segment, and the pool of free segments.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};

use parking_lot::{Condvar, Mutex};

/// Life cycle of a segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum SegState {
    Free = 0,
    /// Being appended to by the writer.
    Open = 1,
    /// Full (or closed at restart); a GC candidate.
    Sealed = 2,
    /// Holds part of the index checkpoint.
    Checkpoint = 3,
    /// Being garbage collected.
    Collecting = 4,
}

impl SegState {
    /// True for segments whose KV records count (open, sealed, being collected).
    pub fn holds_records(self) -> bool {
        matches!(
            self,
            SegState::Open | SegState::Sealed | SegState::Collecting
        )
    }

    fn from_u8(v: u8) -> SegState {
        match v {
            0 => SegState::Free,
            1 => SegState::Open,
            2 => SegState::Sealed,
            3 => SegState::Checkpoint,
            _ => SegState::Collecting,
        }
    }
}

/// What the store knows about one segment.
pub(crate) struct SegmentInfo {
    state: AtomicU8,
    /// Segment sequence number (from its header).
    pub seq: AtomicU64,
    /// Grains of records the index points to.
    pub valid_grains: AtomicU64,
    /// Smallest record sequence number written into it (`u64::MAX` if none).
    pub min_seq: AtomicU64,
    /// Store sequence value when it was sealed (its age for GC).
    pub sealed_at: AtomicU64,
    /// Grains of tombstones in it.
    pub tombstone_grains: AtomicU64,
    /// Store sequence value at the last GET hit on it (segment recency).
    pub last_hit: AtomicU64,
    /// Appended records not yet indexed (see `writer::Appended`).
    pub in_flight: AtomicU64,
    /// Index changes under way that drop or repoint an entry into this
    /// segment and have not yet subtracted its grains from
    /// `valid_grains` (see [`Segments::unlinking`]).
    unlinking: AtomicU32,
    /// Cache-mode evictions this segment survived while sealed (in DRAM
    /// only; see `gc::choose_victim`).
    pub survived: AtomicU32,
}

/// An index change under way on an entry into a segment (see
/// [`Segments::unlinking`]).
pub(crate) struct Unlinking<'a> {
    info: &'a SegmentInfo,
}

impl Drop for Unlinking<'_> {
    fn drop(&mut self) {
        // After the subtraction: GC seeing the count fall sees it done.
        let prev = self.info.unlinking.fetch_sub(1, Ordering::SeqCst);
        debug_assert!(prev > 0);
    }
}

impl SegmentInfo {
    fn new() -> SegmentInfo {
        SegmentInfo {
            state: AtomicU8::new(SegState::Free as u8),
            seq: AtomicU64::new(0),
            valid_grains: AtomicU64::new(0),
            min_seq: AtomicU64::new(u64::MAX),
            sealed_at: AtomicU64::new(0),
            tombstone_grains: AtomicU64::new(0),
            last_hit: AtomicU64::new(0),
            in_flight: AtomicU64::new(0),
            unlinking: AtomicU32::new(0),
            survived: AtomicU32::new(0),
        }
    }

    pub fn state(&self) -> SegState {
        SegState::from_u8(self.state.load(Ordering::Acquire))
    }

    pub fn set_state(&self, s: SegState) {
        debug_assert!(
            s != SegState::Free || self.state() != SegState::Open,
            "freeing the open segment"
        );
        self.state.store(s as u8, Ordering::Release);
    }
}

/// All segments and the free pool.
pub(crate) struct Segments {
    pub infos: Vec<SegmentInfo>,
    free: Mutex<VecDeque<u32>>,
    /// Signalled when segments are freed (writers waiting for space) and
    /// when GC gives up (so they stop waiting).
    pub freed: Condvar,
    /// Tasks of the async API waiting for space (woken with `freed`).
    space_wakers: Mutex<nvdepot_io::wait_list::WaitList>,
    /// Bumped each time GC finds nothing worth collecting, so writers
    /// waiting for space give up instead of waiting out their timeout.
    pub gc_gave_up: AtomicU64,
    /// The last GC failure, if the last pass failed (writers waiting for
    /// space report it instead of waiting out their timeout).
    pub gc_failed: Mutex<Option<String>>,
    /// The GC thread, if one runs: woken when a segment is taken (free
    /// segments may have dropped below its low-water mark), so it need not
    /// poll for that.
    collector: std::sync::OnceLock<std::thread::Thread>,
}

impl Segments {
    pub fn new(count: u32) -> Segments {
        Segments {
            infos: (0..count).map(|_| SegmentInfo::new()).collect(),
            free: Mutex::new(VecDeque::new()),
            freed: Condvar::new(),
            space_wakers: Mutex::new(nvdepot_io::wait_list::WaitList::new()),
            gc_gave_up: AtomicU64::new(0),
            gc_failed: Mutex::new(None),
            collector: std::sync::OnceLock::new(),
        }
    }

    /// Registers the GC thread (see [`Segments::wake_collector`]).
    pub fn set_collector(&self, thread: std::thread::Thread) {
        let _ = self.collector.set(thread);
    }

    /// Wakes the GC thread, if one runs, to look at the free segments and
    /// its other work now rather than at its next deadline.
    pub fn wake_collector(&self) {
        if let Some(t) = self.collector.get() {
            t.unpark();
        }
    }

    pub fn len(&self) -> usize {
        self.infos.len()
    }

    pub fn get(&self, s: u32) -> &SegmentInfo {
        &self.infos[s as usize]
    }

    /// Marks a segment free and puts it in the pool.
    pub fn release(&self, s: u32) {
        let info = self.get(s);
        info.set_state(SegState::Free);
        info.valid_grains.store(0, Ordering::Relaxed);
        info.tombstone_grains.store(0, Ordering::Relaxed);
        info.min_seq.store(u64::MAX, Ordering::Relaxed);
        info.survived.store(0, Ordering::Relaxed);
        let mut free = self.free.lock();
        debug_assert!(!free.contains(&s));
        free.push_back(s);
        drop(free);
        self.notify_freed();
    }

    /// Wakes every writer waiting for space, blocked or parked.
    pub fn notify_freed(&self) {
        self.freed.notify_all();
        let wakers = self.space_wakers.lock().take_all();
        for w in wakers {
            w.wake();
        }
    }

    /// Resolves once a segment is freed (or GC gives up), or after
    /// `timeout`, whichever comes first, without blocking the thread (an
    /// io_uring runtime's other tasks run meanwhile). Spurious wakes are
    /// possible: the caller re-checks.
    pub async fn freed_in(&self, timeout: std::time::Duration) {
        use std::future::Future;
        let mut timer = Box::pin(nvdepot_io::uring::sleep(timeout));
        let mut ticket = None;
        std::future::poll_fn(|cx| {
            {
                let mut wakers = self.space_wakers.lock();
                match ticket {
                    Some(t) if wakers.woken(t) => return std::task::Poll::Ready(()),
                    // One entry per waiter, refreshed by every poll.
                    _ => ticket = Some(wakers.register(ticket, cx.waker()).0),
                }
            }
            timer.as_mut().poll(cx)
        })
        .await
    }

    /// Takes a free segment if more than `reserve` are free.
    pub fn take_free(&self, reserve: usize) -> Option<u32> {
        let mut free = self.free.lock();
        let taken = if free.len() > reserve {
            free.pop_front()
        } else {
            None
        };
        drop(free);
        if taken.is_some() {
            // Once per segment (64 MiB by default): cheap, and GC starts as
            // soon as the free pool runs low. Not on a failed take: the
            // take that brought the pool that low woke it already, and a
            // GC that found nothing to collect backs off (writers retrying
            // on a full store must not turn that into a busy loop).
            self.wake_collector();
        }
        taken
    }

    pub fn free_count(&self) -> usize {
        self.free.lock().len()
    }

    /// Waits until a segment is freed or the timeout passes.
    pub fn wait_freed(&self, timeout: std::time::Duration) {
        let mut free = self.free.lock();
        self.freed.wait_for(&mut free, timeout);
    }

    pub fn add_valid(&self, pba_segment: u32, grains: u64) {
        self.get(pba_segment)
            .valid_grains
            .fetch_add(grains, Ordering::Relaxed);
    }

    pub fn sub_valid(&self, pba_segment: u32, grains: u64) {
        let prev = self
            .get(pba_segment)
            .valid_grains
            .fetch_sub(grains, Ordering::Relaxed);
        debug_assert!(
            prev >= grains,
            "valid grains underflow in segment {pba_segment}"
        );
    }

    /// Marks an index change that drops or repoints an entry into
    /// `segment` as under way until the guard drops: take it before the
    /// index changes, drop it after subtracting the entry's grains.
    ///
    /// Why: GC skips a record its scan finds no longer indexed, so a
    /// writer that repointed the record's key just before the scan may
    /// still owe the victim its `sub_valid` when GC finishes. Without the
    /// guard GC checked the count while it was still owed (the
    /// `debug_assert` "still has live grains", a false alarm seen about
    /// once in 40 runs of tests/write_behind.rs on a loaded machine), and
    /// the late subtraction then landed on the released, maybe reused,
    /// segment: its count short by those grains, or wrapped below zero
    /// (a segment GC never picks again), or at zero with records live (a
    /// segment freed unread, its records lost). GC waits for the guards
    /// of its victim ([`Segments::wait_unlinked`]) before it checks and
    /// releases it.
    pub fn unlinking(&self, segment: u32) -> Unlinking<'_> {
        let info = self.get(segment);
        // Before the index change: GC, seeing the change under the
        // index's lock, sees this too.
        info.unlinking.fetch_add(1, Ordering::SeqCst);
        Unlinking { info }
    }

    /// Waits until no index change that drops or repoints an entry into
    /// `segment` is under way (see [`Segments::unlinking`]). The guards
    /// are held across a few index and counter operations, never across a
    /// wait, so this spins briefly.
    pub fn wait_unlinked(&self, segment: u32) {
        let info = self.get(segment);
        while info.unlinking.load(Ordering::SeqCst) > 0 {
            std::thread::yield_now();
        }
    }

    /// Smallest `min_seq` over segments in use other than `except`.
    pub fn oldest_record_seq(&self, except: u32) -> u64 {
        self.infos
            .iter()
            .enumerate()
            .filter(|(i, s)| {
                *i as u32 != except
                    && matches!(
                        s.state(),
                        SegState::Open | SegState::Sealed | SegState::Collecting
                    )
            })
            .map(|(_, s)| s.min_seq.load(Ordering::Relaxed))
            .min()
            .unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    /// GC's wait for a victim returns only once every index change under
    /// way on an entry into it has dropped its guard (after its
    /// `sub_valid`), and a guard on another segment does not hold it.
    #[test]
    fn wait_unlinked_waits_for_the_victims_guards_only() {
        let segs = Segments::new(3);
        segs.add_valid(1, 5);
        let other = segs.unlinking(2);
        let done = AtomicBool::new(false);
        std::thread::scope(|s| {
            let guard = segs.unlinking(1);
            let waiter = s.spawn(|| {
                segs.wait_unlinked(1);
                assert!(
                    done.load(Ordering::SeqCst),
                    "returned before the guard dropped"
                );
                segs.get(1).valid_grains.load(Ordering::SeqCst)
            });
            std::thread::sleep(std::time::Duration::from_millis(50));
            assert!(!waiter.is_finished(), "waited for no guard");
            segs.sub_valid(1, 5);
            done.store(true, Ordering::SeqCst);
            drop(guard);
            assert_eq!(waiter.join().unwrap(), 0, "the subtraction is seen");
        });
        drop(other);
        segs.wait_unlinked(2);
    }
}
