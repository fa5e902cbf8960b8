//! The group commit: a writer waits until the log position of its record
//! is durable. The first waiter to find no flush in progress *leads* one:
//! under the log's lock it takes everything appended so far as one batch,
//! then writes and flushes it without the lock, while later waiters
//! *follow* (a blocking thread waits on the condition variable, an async
//! task parks with its waker) and the next batch gathers behind it. When
//! the leader is done it publishes the new durable position (or the
//! failure, which every later wait returns: a failed flush is never taken
//! for a later success) and wakes every follower, who look again.
//!
//! Its synchronization goes through `super::sync` only: in the engine that
//! is parking_lot (`sync.rs`); under test this file is compiled a second
//! time inside `crate::model` over shuttle (`sync_shuttle.rs`), which
//! explores the interleavings of leaders, followers, blocking threads,
//! parked tasks and failed writes (lost wakeups show as deadlocks).

use std::task::{Poll, Waker};

use super::sync::{Condvar, Mutex};
use crate::aio::Mode;
use crate::error::{Error, Result};

/// What the protocol keeps under the log's lock.
#[derive(Default)]
pub(crate) struct CommitState {
    /// Log position up to which everything is durable.
    pub durable: u64,
    /// A flush is in progress (its leader does the IO without the lock).
    pub leader: bool,
    /// Why the log failed: every later wait fails with it.
    pub failed: Option<String>,
    /// Tasks waiting for the flush in progress (blocking callers wait on
    /// the condition variable instead).
    pub wakers: Vec<Waker>,
}

/// The log whose writes are group-committed.
pub(crate) trait Log {
    /// What the log's lock holds; the commit state is part of it.
    type State;
    /// A batch of appended records to write.
    type Batch;
    fn commit(st: &mut Self::State) -> &mut CommitState;
    /// Under the lock, as a leader starts: the batch of everything
    /// appended so far, and the log position it ends at.
    fn take_batch(&self, st: &mut Self::State) -> (Self::Batch, u64);
    /// Without the lock: writes the batch and flushes the device (a
    /// suspension point for async callers).
    async fn write(&self, mode: Mode, batch: Self::Batch) -> (Result<()>, Self::Batch);
    /// Under the lock, after the write, before the result is published.
    fn written(&self, st: &mut Self::State, result: &Result<()>, batch: Self::Batch);
    /// Without the lock, after a successful write is published.
    fn published(&self, target: u64);
}

/// Waits until log position `lsn` is durable, leading a flush when none
/// is in progress. A blocking waiter on a runtime's thread must not wait
/// for a flush a task of that same runtime leads (it would block the
/// task): inside a runtime, use `Mode::Async`.
pub(crate) async fn wait_durable<L: Log>(
    log: &L,
    lock: &Mutex<L::State>,
    done: &Condvar,
    mode: Mode,
    lsn: u64,
) -> Result<()> {
    loop {
        let lead = {
            let mut st = lock.lock();
            let c = L::commit(&mut st);
            if c.durable >= lsn {
                return Ok(());
            }
            if let Some(why) = &c.failed {
                return Err(Error::Unusable(why.clone()));
            }
            if c.leader {
                if mode == Mode::Blocking {
                    drop(done.wait(st));
                    continue;
                }
                None
            } else {
                c.leader = true;
                Some(log.take_batch(&mut st))
            }
        };
        let Some((batch, target)) = lead else {
            flush_finished::<L>(lock).await;
            continue;
        };
        let (result, batch) = log.write(mode, batch).await;
        let wakers = {
            let mut st = lock.lock();
            log.written(&mut st, &result, batch);
            let c = L::commit(&mut st);
            c.leader = false;
            match &result {
                Ok(()) => c.durable = c.durable.max(target),
                Err(e) => c.failed = Some(format!("log write failed: {e}")),
            }
            std::mem::take(&mut c.wakers)
        };
        if result.is_ok() {
            log.published(target);
        }
        done.notify_all();
        for w in wakers {
            w.wake();
        }
        result?;
    }
}

/// Resolves once the flush in progress (if any) has finished (or on a
/// spurious wake: the caller looks again).
fn flush_finished<L: Log>(lock: &Mutex<L::State>) -> impl std::future::Future<Output = ()> + '_ {
    let mut registered = false;
    std::future::poll_fn(move |cx| {
        if registered {
            return Poll::Ready(());
        }
        let mut st = lock.lock();
        let c = L::commit(&mut st);
        if !c.leader {
            return Poll::Ready(());
        }
        c.wakers.push(cx.waker().clone());
        registered = true;
        Poll::Pending
    })
}
