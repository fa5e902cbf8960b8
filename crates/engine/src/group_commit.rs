//! The group commit: a writer waits until the log position of its record
//! is durable. A waiter whose record no batch has taken yet *leads* one
//! when fewer than `Log::BATCHES_IN_FLIGHT` are being written: under the
//! log's lock it takes everything appended so far as one batch, then
//! writes and flushes it without the lock, while later waiters *follow*
//! (a blocking thread waits on the condition variable, an async task
//! parks with its waker) and the next batch gathers behind it.
//!
//! Several batches may be in flight at once, so the device is never idle
//! while a leader's writers wake and append again (one batch at a time
//! left the device idle for the turnaround: unflushed 4 KiB puts at QD 128
//! reached half of fio's 4 KiB writes). But a batch overlaps those in
//! flight only once `Log::RECORDS_TO_OVERLAP` records wait for it (or its
//! waiter is alone and records are rare): otherwise, under load, every
//! waiter that found room led its own batch of one or two records, each
//! with its own write and flush (durable SETs from 128 connections: 14
//! per flush, against 25 with a threshold and 15 % less server CPU per
//! SET; 4 KiB puts at QD 128 also gained 4-10 %). Batches finish in any order but
//! are *retired* in log order: a finished batch waits until every earlier
//! one has finished, and only then does the durable position move over it
//! (a record is acknowledged only when the whole log before it is on the
//! device, so the flush mark the records carry stays a true prefix and a
//! crash leaves at most the batches in flight torn). A failure is
//! retired like a success but moves nothing: every later position fails
//! with it, for good (a failed flush is never taken for a later success),
//! while waiters of earlier batches still get their own batch's outcome.
//! A leader dropped mid-write (a cancelled async task) takes its batch
//! with it: the batch is finished as failed (`Leading`), so later waits
//! fail instead of waiting forever for it.
//!
//! Its synchronization goes through `super::sync` only: in the engine that
//! is parking_lot (`sync.rs`); under test this file is compiled a second
//! time inside `crate::model` over shuttle (`sync_shuttle.rs`), which
//! explores the interleavings of leaders, followers, blocking threads,
//! parked tasks, out-of-order completions and failed writes (lost wakeups
//! show as deadlocks).

use std::collections::VecDeque;
use std::task::Poll;
use std::time::Instant;

use nvdepot_io::wait_list::{Ticket, WaitList};

use super::sync::{Condvar, Mutex};
use crate::aio::Mode;
use crate::error::{Error, Result};

/// A batch taken by a leader and not yet retired.
struct Taken<B> {
    /// Log position the batch ends at.
    target: u64,
    /// When its leader took it (its write's duration feeds `Pace`).
    taken_at: Instant,
    /// Set when its write has finished: whether it succeeded, and the
    /// batch back (retired in log order); no batch when its leader was
    /// dropped mid-write (the batch went with it).
    finished: Option<(bool, Option<B>)>,
}

/// What the protocol keeps under the log's lock.
pub(crate) struct CommitState<B> {
    /// Log position up to which everything is durable.
    pub durable: u64,
    /// Log position the last batch taken ends at.
    taken: u64,
    /// Batches taken and not retired, in log order; the front one is
    /// number `first_batch`.
    batches: VecDeque<Taken<B>>,
    first_batch: u64,
    /// Why the log failed: every wait for a position after `failed_after`
    /// fails with it.
    pub failed: Option<String>,
    failed_after: u64,
    /// Tasks waiting for a batch to finish (blocking callers wait on the
    /// condition variable instead), one entry per task's wait.
    wakers: WaitList,
    /// How fast records come and batches are written.
    pace: Pace,
}

/// Moving averages of the time between records and of a batch's write:
/// whether a lone waiter should wait behind the batches in flight.
///
/// A waiter whose record is the only one since the last batch leads a
/// batch of one when it may overlap those in flight: right when records
/// are rare (at 4 connections of a 9:1 memcache mix, waiting only added
/// the rest of the write ahead to a SET's latency: 10-25 % fewer ops/s),
/// wasteful when they come faster than writes finish (at 16 connections
/// every SET was written alone: one device write each, each with its
/// doorbell and interrupt, tens of microseconds of CPU in a VM; waiting
/// there wrote 35 % fewer batches for up to 30 % more ops/s,
/// bench/results/percore-profile.md). So a lone waiter waits only when
/// records come at least `LONE_WAITS_AT` times per write, on average:
/// the batch it then leads is likely to carry more than itself.
#[derive(Default)]
struct Pace {
    last_take: Option<Instant>,
    /// Nanoseconds between records, averaged.
    record_ns: f64,
    /// Nanoseconds of a batch's write (take to finish), averaged.
    write_ns: f64,
}

impl Pace {
    /// Weight of the newest sample in the averages.
    const ALPHA: f64 = 0.125;

    fn took(&mut self, now: Instant, records: u64) {
        if let Some(last) = self.last_take {
            let ns = now.duration_since(last).as_nanos() as f64 / records.max(1) as f64;
            self.record_ns += Self::ALPHA * (ns - self.record_ns);
        }
        self.last_take = Some(now);
    }

    fn wrote(&mut self, ns: f64) {
        self.write_ns += Self::ALPHA * (ns - self.write_ns);
    }

    /// Records arriving during a write, on average, from which a lone
    /// waiter waits (measured, bench/results/percore-profile.md: 0.46-0.59
    /// at 4 memcache connections, 0.94-1.33 at 16, 1.1-1.8 at 64).
    const LONE_WAITS_AT: f64 = 0.75;

    /// Whether records come often enough, during a write, that a lone
    /// waiter's batch will likely carry more than itself.
    fn lone_waits(&self) -> bool {
        self.record_ns > 0.0 && self.write_ns >= Self::LONE_WAITS_AT * self.record_ns
    }
}

impl<B> Default for CommitState<B> {
    fn default() -> Self {
        CommitState {
            durable: 0,
            taken: 0,
            batches: VecDeque::new(),
            first_batch: 0,
            failed: None,
            failed_after: 0,
            wakers: WaitList::new(),
            pace: Pace::default(),
        }
    }
}

impl<B> CommitState<B> {
    /// Fails the log for good from the durable position on (a failure
    /// outside a batch: the periodic flush). Keeps an earlier failure.
    pub fn fail(&mut self, why: impl FnOnce() -> String) {
        if self.failed.is_none() {
            self.failed = Some(why());
            self.failed_after = self.durable;
        }
    }

    /// Batches taken and not yet retired.
    #[allow(dead_code)] // the model's
    pub fn in_flight(&self) -> usize {
        self.batches.len()
    }
}

/// The log whose writes are group-committed.
pub(crate) trait Log {
    /// What the log's lock holds; the commit state is part of it.
    type State;
    /// A batch of appended records to write.
    type Batch;
    /// Batches written at once at most.
    const BATCHES_IN_FLIGHT: usize;
    /// While a batch is in flight, a waiter leads another only once this
    /// many records (its own included) wait behind it, or when it waits
    /// alone while records are rare (`Pace`): under load batches grow to
    /// this size instead of each waiter leading its own small batch
    /// (every batch costs a doorbell and, durable, a device flush), while
    /// a lone waiter at low concurrency still overlaps the batch ahead of
    /// it. 1: always overlap. (The threshold was once the last batch's
    /// size, at most this: a small batch then let the next overlap as
    /// soon as as few waited, and batches stayed small: 16 connections
    /// pushing to one Redis list made 4 LPUSHes per flush, 8 with this
    /// rule.)
    const RECORDS_TO_OVERLAP: u64;
    fn commit(st: &mut Self::State) -> &mut CommitState<Self::Batch>;
    /// Under the lock, as a leader starts: the batch of everything
    /// appended so far, and the log position it ends at.
    fn take_batch(&self, st: &mut Self::State) -> (Self::Batch, u64);
    /// Without the lock: writes the batch and flushes the device (a
    /// suspension point for async callers). Other batches may be written
    /// meanwhile, earlier and later ones.
    async fn write(&self, mode: Mode, batch: Self::Batch) -> (Result<()>, Self::Batch);
    /// Under the lock, as a batch retires (in log order, after every
    /// earlier batch), before its outcome is published. `ok` is false for
    /// a failed write, and for every batch retired after one. Not called
    /// for a batch whose leader was dropped mid-write (the batch went with
    /// its future).
    fn written(&self, st: &mut Self::State, ok: bool, batch: Self::Batch);
    /// Whether an async leader that finds a batch already being written
    /// first yields once to the other ready tasks of its runtime, so that
    /// the writers of the same loop turn append before it takes its batch
    /// (fewer, larger writes: each device write costs a doorbell).
    fn gathers(&self) -> bool {
        false
    }
    /// Without the lock, after the durable position moved to `durable`.
    fn published(&self, durable: u64);
}

/// Waits until log position `lsn` is durable, leading a batch when its
/// record is in none and fewer than `L::BATCHES_IN_FLIGHT` are in flight.
/// A blocking waiter on a runtime's thread must not wait for a batch a
/// task of that same runtime leads (it would block the task): inside a
/// runtime, use `Mode::Async`.
pub(crate) async fn wait_durable<L: Log>(
    log: &L,
    lock: &Mutex<L::State>,
    done: &Condvar,
    mode: Mode,
    lsn: u64,
) -> Result<()> {
    let mut gathered = false;
    loop {
        let lead = {
            let mut st = lock.lock();
            let c = L::commit(&mut st);
            if c.durable >= lsn {
                return Ok(());
            }
            if let Some(why) = &c.failed {
                if lsn > c.failed_after {
                    return Err(Error::Unusable(why.clone()));
                }
            }
            let busy = !c.batches.is_empty();
            // Records waiting for a batch, its own included: a batch
            // overlaps those in flight only once enough wait, or when its
            // waiter is alone and records are rare (see `Pace`).
            let waiting = lsn.saturating_sub(c.taken);
            let overlaps =
                waiting >= L::RECORDS_TO_OVERLAP || (waiting == 1 && !c.pace.lone_waits());
            if lsn <= c.taken || c.batches.len() >= L::BATCHES_IN_FLIGHT || (busy && !overlaps) {
                if mode == Mode::Blocking {
                    drop(done.wait(st));
                    continue;
                }
                None
            } else if mode == Mode::Ring
                && !gathered
                && (busy || nvdepot_io::uring::others_ready())
                && log.gathers()
            {
                // The device is busy with an earlier batch anyway, or other
                // tasks of this loop turn are still to run (other
                // connections' sets, say): let them append first, so that
                // one device write carries them all (each write costs tens
                // of microseconds of CPU in a VM's doorbell).
                gathered = true;
                Some(None)
            } else {
                let number = c.first_batch + c.batches.len() as u64;
                let (batch, target) = log.take_batch(&mut st);
                let c = L::commit(&mut st);
                debug_assert!(target >= lsn && target > c.taken);
                let now = Instant::now();
                c.pace.took(now, target - c.taken);
                c.taken = target;
                c.batches.push_back(Taken {
                    target,
                    taken_at: now,
                    finished: None,
                });
                Some(Some((number, batch)))
            }
        };
        // None: wait for a batch; Some(None): gather, then look again.
        let (number, batch) = match lead {
            None => {
                batch_finished::<L>(lock).await;
                continue;
            }
            Some(None) => {
                // Executor-neutral (the task wakes itself): shuttle too.
                nvdepot_io::uring::yield_now().await;
                continue;
            }
            Some(Some(lead)) => lead,
        };
        // Should this future be dropped while its write is under way (a
        // cancelled task), the guard finishes the batch as failed.
        let mut leading = Leading {
            log,
            lock,
            done,
            number,
            armed: true,
        };
        let (result, batch) = log.write(mode, batch).await;
        leading.armed = false;
        let failure = result
            .as_ref()
            .err()
            .map(|e| format!("log write failed: {e}"));
        finish(log, lock, done, number, failure, Some(batch));
        result?;
    }
}

/// Records how batch `number` ended (`failure` says why it failed), retires
/// what can retire, and wakes every waiter.
fn finish<L: Log>(
    log: &L,
    lock: &Mutex<L::State>,
    done: &Condvar,
    number: u64,
    failure: Option<String>,
    batch: Option<L::Batch>,
) {
    let (moved, wakers) = {
        let mut st = lock.lock();
        let c = L::commit(&mut st);
        let i = (number - c.first_batch) as usize;
        c.batches[i].finished = Some((failure.is_none(), batch));
        let write_ns = c.batches[i].taken_at.elapsed().as_nanos() as f64;
        c.pace.wrote(write_ns);
        if let Some(why) = failure {
            // The batches before this one may still succeed.
            let after = if i == 0 {
                c.durable
            } else {
                c.batches[i - 1].target
            };
            match c.failed {
                None => {
                    c.failed = Some(why);
                    c.failed_after = after;
                }
                Some(_) => c.failed_after = c.failed_after.min(after),
            }
        }
        let moved = retire(log, &mut st);
        (moved, L::commit(&mut st).wakers.take_all())
    };
    if let Some(durable) = moved {
        log.published(durable);
    }
    done.notify_all();
    for w in wakers {
        w.wake();
    }
}

/// A leader whose write has not returned yet. If its future is dropped
/// there (an async caller cancelled mid-write), the batch's records went
/// with it: the log has a hole, so the batch is finished as failed, which
/// fails every later position for good (nothing after a hole may be
/// acknowledged) and wakes the waiters, who would otherwise wait forever
/// for a batch that never finishes.
struct Leading<'a, L: Log> {
    log: &'a L,
    lock: &'a Mutex<L::State>,
    done: &'a Condvar,
    number: u64,
    armed: bool,
}

impl<L: Log> Drop for Leading<'_, L> {
    fn drop(&mut self) {
        if self.armed {
            let why = "a group-commit batch was dropped before its write finished (its \
                       writer's task was cancelled): records after it cannot be made \
                       durable; restart the store"
                .to_owned();
            finish(self.log, self.lock, self.done, self.number, Some(why), None);
        }
    }
}

/// Under the lock: retires the finished batches at the front, in log
/// order, moving the durable position over each that succeeded while no
/// earlier one failed. Returns the new durable position if it moved.
fn retire<L: Log>(log: &L, st: &mut L::State) -> Option<u64> {
    let mut moved = None;
    loop {
        let c = L::commit(st);
        if c.batches.front().is_none_or(|b| b.finished.is_none()) {
            break;
        }
        let Taken {
            target, finished, ..
        } = c.batches.pop_front().expect("a finished front");
        c.first_batch += 1;
        let (ok, batch) = finished.expect("finished");
        // A batch after a failed one may have reached the device, but the
        // log before it did not: it is never durable.
        let ok = ok && (c.failed.is_none() || target <= c.failed_after);
        if ok {
            debug_assert!(target > c.durable);
            c.durable = target;
            moved = Some(target);
        }
        if let Some(batch) = batch {
            log.written(st, ok, batch);
        }
    }
    moved
}

/// Resolves once a batch in flight (if any) has finished (or on a
/// spurious wake: the caller looks again).
fn batch_finished<L: Log>(lock: &Mutex<L::State>) -> impl std::future::Future<Output = ()> + '_ {
    let mut registered: Option<Ticket> = None;
    std::future::poll_fn(move |cx| {
        let mut st = lock.lock();
        let c = L::commit(&mut st);
        if let Some(t) = registered {
            if c.wakers.woken(t) {
                return Poll::Ready(());
            }
            // Polled again before the batch finished (a joined sibling
            // was woken): keep the one entry, with this poll's waker.
            c.wakers.register(registered, cx.waker());
            return Poll::Pending;
        }
        if c.batches.is_empty() {
            return Poll::Ready(());
        }
        registered = Some(c.wakers.register(None, cx.waker()).0);
        Poll::Pending
    })
}
