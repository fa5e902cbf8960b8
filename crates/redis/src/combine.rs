//! Flat combining of the paged steps of one hot key: a step waiting for
//! its key's lock (`key_locks.rs`) leaves its operation in the key's
//! mailbox; whoever gets the lock takes every operation waiting there,
//! applies them in the order they came to one read of the collection, and
//! commits them as one crash-atomic batch, then hands each its answer. A
//! step a batch carries stops competing for the lock and only waits for
//! its answer.
//!
//! Used by every paged collection's writes: sorted sets (ZADD without
//! INCR, ZREM, ZPOPMIN/MAX: `zset_pages.rs`), lists (pushes and pops:
//! `list_combine.rs`), hashes and sets (`hash_combine.rs`). The lock's
//! taker yields once before it takes the mailbox when its worker has
//! other tasks ready, so the steps of the connections served in the same
//! loop turn join its batch: on one worker a step never waits between the
//! lock and its commit, and without the yield no step ever found another
//! waiting (lists, hashes and sets measured 0.92-0.96x at 128 connections
//! combined without it, bench/results/ab-combining.md).
//!
//! A step's answer is what it would answer alone after the steps before
//! it in the batch (each applied to the state the previous left). All of
//! a batch is durable when any of its steps is answered.

use std::future::{poll_fn, Future};
use std::pin::pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Poll, Waker};

use nvdepot_cache::Error;

use super::key_locks::{self, KeyGuard, PAGED};
use super::list_pages::Stop;

const STRIPES: usize = 1024;

/// Batches led and the steps they carried, since the process started
/// (INFO nvdepot `combined_batches`, `combined_steps`).
static BATCHES: AtomicU64 = AtomicU64::new(0);
static STEPS: AtomicU64 = AtomicU64::new(0);

/// (batches, steps) so far.
pub fn counts() -> (u64, u64) {
    (
        BATCHES.load(Ordering::Relaxed),
        STEPS.load(Ordering::Relaxed),
    )
}

/// Where a combined step's answer arrives.
struct Slot<R> {
    state: Mutex<SlotState<R>>,
}

struct SlotState<R> {
    answer: Option<R>,
    waker: Option<Waker>,
    /// A batch carries the step: its owner stops competing for the lock
    /// (it would only take it to find nothing of its own to do) and waits
    /// for the answer.
    taken: bool,
}

impl<R> Slot<R> {
    fn new() -> Slot<R> {
        Slot {
            state: Mutex::new(SlotState {
                answer: None,
                waker: None,
                taken: false,
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, SlotState<R>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn fill(&self, r: R) {
        let waker = {
            let mut s = self.state();
            s.answer = Some(r);
            s.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// The answer if it came; else whether a batch carries the step (the
    /// waker registered either way).
    fn poll_take(&self, waker: &Waker) -> Result<R, bool> {
        let mut s = self.state();
        match s.answer.take() {
            Some(r) => Ok(r),
            None => {
                s.waker = Some(waker.clone());
                Err(s.taken)
            }
        }
    }
}

struct Deposit<T, R> {
    scope: usize,
    db: usize,
    key: Vec<u8>,
    op: T,
    slot: Arc<Slot<R>>,
}

/// The steps waiting on the keys of one stripe.
type Mailbox<T, R> = Mutex<Vec<Deposit<T, R>>>;

/// The mailboxes of one kind of step (`T` its operation, `R` its answer).
pub struct Combiner<T, R> {
    stripes: Box<[Mailbox<T, R>]>,
}

impl<T, R> Default for Combiner<T, R> {
    fn default() -> Self {
        Combiner {
            stripes: (0..STRIPES).map(|_| Mutex::new(Vec::new())).collect(),
        }
    }
}

/// Answers the slots of a batch its leader dropped unanswered (a panic:
/// a bug), so no step waits for ever.
struct Unanswered<'a, R> {
    slots: &'a [Arc<Slot<R>>],
    answered: bool,
    failed: fn() -> R,
}

impl<R> Drop for Unanswered<'_, R> {
    fn drop(&mut self) {
        if !self.answered {
            for s in self.slots {
                s.fill((self.failed)());
            }
        }
    }
}

impl<T, R> Combiner<T, R> {
    fn mailbox(&self, db: usize, key: &[u8]) -> MutexGuard<'_, Vec<Deposit<T, R>>> {
        let h = xxhash_rust::xxh3::xxh3_64_with_seed(key, db as u64);
        self.stripes[h as usize & (STRIPES - 1)]
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `op` on `key` of `db` in `scope` (the store's address: two
    /// servers in one process never combine), combined with the other
    /// steps waiting for the key: `lead` is given a batch (in arrival
    /// order) and the key's lock, and answers each of its operations in
    /// order; `failed` is the answer of a step whose batch was dropped
    /// unanswered.
    #[allow(clippy::too_many_arguments)]
    pub async fn run(
        &self,
        scope: usize,
        db: usize,
        key: &[u8],
        op: T,
        failed: fn() -> R,
        mut lead: impl AsyncFnMut(Vec<T>, KeyGuard<'static>) -> Vec<R>,
    ) -> R {
        let slot = Arc::new(Slot::new());
        self.mailbox(db, key).push(Deposit {
            scope,
            db,
            key: key.to_vec(),
            op,
            slot: Arc::clone(&slot),
        });
        let guard = {
            let mut lock = pin!(PAGED.lock(db, key));
            let got = poll_fn(|cx| match slot.poll_take(cx.waker()) {
                Ok(r) => Poll::Ready(Err(r)),
                Err(true) => Poll::Pending,
                Err(false) => lock.as_mut().poll(cx).map(Ok),
            })
            .await;
            match got {
                // Another step's batch carried this one.
                Err(r) => return r,
                Ok(guard) => guard,
            }
        };
        // On one worker the steps of a hot key never queue by themselves:
        // a step runs from the lock to its commit without waiting, so the
        // next finds the lock free and commits alone. Yielding once, lock
        // held, lets the connections ready in this loop turn leave their
        // steps in the mailbox first, and this batch carries them.
        if nvdepot_io::uring::others_ready() {
            nvdepot_io::uring::yield_now().await;
        }
        let (ops, slots): (Vec<T>, Vec<Arc<Slot<R>>>) = {
            let mut mailbox = self.mailbox(db, key);
            let mut batch = Vec::new();
            let mut i = 0;
            while i < mailbox.len() {
                let d = &mailbox[i];
                if d.scope == scope && d.db == db && d.key == key {
                    let d = mailbox.remove(i);
                    d.slot.state().taken = true;
                    batch.push((d.op, d.slot));
                } else {
                    i += 1;
                }
            }
            batch.into_iter().unzip()
        };
        if !ops.is_empty() {
            BATCHES.fetch_add(1, Ordering::Relaxed);
            STEPS.fetch_add(ops.len() as u64, Ordering::Relaxed);
            let mut unanswered = Unanswered {
                slots: &slots,
                answered: false,
                failed,
            };
            let answers = lead(ops, guard).await;
            debug_assert_eq!(answers.len(), slots.len(), "an answer per step");
            unanswered.answered = true;
            for (s, a) in slots.iter().zip(answers) {
                s.fill(a);
            }
        } else {
            drop(guard);
        }
        // This step's answer: filled above, or by the batch that took it
        // while this step waited for the lock.
        poll_fn(|cx| match slot.poll_take(cx.waker()) {
            Ok(r) => Poll::Ready(r),
            Err(_) => Poll::Pending,
        })
        .await
    }
}

/// A paged collection read once for a batch of combined steps of kind
/// `S` (`hash_combine.rs`, `list_combine.rs`, `zset_pages.rs`): the
/// batch applies its steps to it in order and commits them together.
pub(crate) trait BatchEdit<S> {
    /// A step's answer when the batch carried it.
    type Answer;
    /// Whether a step emptied the collection: the commit deletes the key,
    /// so the steps after it are not applied (they run alone on what is
    /// left, as they would have after a batch of their own).
    fn emptied(&self) -> bool;
    /// Applies one step: whether it changed the collection, and its
    /// answer (a step that answers an error changes nothing).
    async fn apply(&mut self, step: &S) -> Result<(bool, Self::Answer), Stop>;
    /// Writes every change as one crash-atomic batch, under `held`.
    async fn commit(self, held: KeyGuard<'static>) -> Result<(), Stop>;
}

/// A step's outcome as [`BatchEdit::apply`] answers it, for steps that
/// may answer an error (which changed nothing).
pub(crate) fn or_error<O>(r: Result<(bool, O), &'static str>) -> (bool, Result<O, &'static str>) {
    match r {
        Ok((changed, out)) => (changed, Ok(out)),
        Err(msg) => (false, Err(msg)),
    }
}

/// What a batch's read of its key found.
pub(crate) enum Opened<E, A> {
    /// The paged collection, ready to edit.
    Paged(E),
    /// Not paged (absent, compact): every step runs alone.
    NotPaged,
    /// Every step answers this (WRONGTYPE).
    Every(fn() -> A),
}

/// A batch's steps applied in order to one read of the collection
/// (`open`) under `held`, the key's lock, and committed as one batch if
/// any changed it: each step's answer, `None` for a step to run alone.
/// From the top again (every step, the key read anew under a new turn of
/// its lock) if the collection changed meanwhile.
pub(crate) async fn edit_batch<S, E: BatchEdit<S>>(
    db: usize,
    key: &[u8],
    steps: &[S],
    held: KeyGuard<'static>,
    mut open: impl AsyncFnMut() -> Result<Opened<E, E::Answer>, Error>,
) -> Vec<Result<Option<E::Answer>, Error>> {
    let mut first = Some(held);
    let mut attempt = 1u32;
    loop {
        let held = match first.take() {
            Some(h) => h,
            None => key_locks::turn(&mut attempt, db, key).await,
        };
        let mut edit = match open().await {
            Err(e) => return fail_all(e, steps.len()),
            Ok(Opened::NotPaged) => return steps.iter().map(|_| Ok(None)).collect(),
            Ok(Opened::Every(answer)) => return steps.iter().map(|_| Ok(Some(answer()))).collect(),
            Ok(Opened::Paged(edit)) => edit,
        };
        let mut outs = Vec::with_capacity(steps.len());
        let mut changed = false;
        let mut stop = None;
        for step in steps {
            if edit.emptied() {
                break;
            }
            match edit.apply(step).await {
                Ok((c, answer)) => {
                    changed |= c;
                    outs.push(Ok(Some(answer)));
                }
                Err(s) => {
                    stop = Some(s);
                    break;
                }
            }
        }
        let committed = match stop {
            Some(s) => Err(s),
            None if changed => edit.commit(held).await,
            None => Ok(()),
        };
        match committed {
            Ok(()) => {
                outs.resize_with(steps.len(), || Ok(None));
                return outs;
            }
            Err(Stop::Retry) => continue,
            Err(Stop::Fail(e)) => return fail_all(e, steps.len()),
        }
    }
}

/// A batch's answers when its step failed: the error to the first, its
/// text to the others.
pub fn fail_all<T>(e: Error, n: usize) -> Vec<Result<T, Error>> {
    let shown = e.to_string();
    let mut out = vec![Err(e)];
    out.extend((1..n).map(|_| Err(Error::Envelope(shown.clone()))));
    out
}

/// Who may combine with whom: steps on one store (its address) and of
/// one kind of collection.
pub fn scope<S>(store: &S, kind: u8) -> usize {
    (store as *const S as usize) << 3 | usize::from(kind & 7)
}

/// A failed batch's answer for a step it carried (see [`Combiner::run`]).
pub fn interrupted<T>() -> Result<T, Error> {
    Err(Error::Envelope(
        "the combined step carrying this one failed".into(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lone_step_leads_its_own_batch() {
        let c: Combiner<u32, u32> = Combiner::default();
        let got = crate::block_on(c.run(
            1,
            0,
            b"k",
            7,
            || 0,
            async |ops: Vec<u32>, _held| ops.iter().map(|o| o * 2).collect(),
        ));
        assert_eq!(got, 14);
    }

    #[test]
    fn waiting_steps_are_carried_by_the_holder_in_order() {
        use std::task::Context;
        let c: Combiner<u32, u32> = Combiner::default();
        let cx = &mut Context::from_waker(Waker::noop());
        // Someone holds the key: three steps queue behind it.
        let held = crate::block_on(PAGED.lock(3, b"hot"));
        let batches = std::cell::RefCell::new(Vec::new());
        let lead = async |ops: Vec<u32>, _held| {
            batches.borrow_mut().push(ops.clone());
            ops.iter().map(|o| o + 100).collect::<Vec<_>>()
        };
        let mut a = Box::pin(c.run(1, 3, b"hot", 1, || 0, lead));
        let mut b = Box::pin(c.run(1, 3, b"hot", 2, || 0, lead));
        let mut d = Box::pin(c.run(1, 3, b"hot", 3, || 0, lead));
        assert!(a.as_mut().poll(cx).is_pending());
        assert!(b.as_mut().poll(cx).is_pending());
        assert!(d.as_mut().poll(cx).is_pending());
        drop(held);
        // Whoever polls first leads all three; the others find answers.
        assert_eq!(b.as_mut().poll(cx), Poll::Ready(102));
        assert_eq!(a.as_mut().poll(cx), Poll::Ready(101));
        assert_eq!(d.as_mut().poll(cx), Poll::Ready(103));
        assert_eq!(*batches.borrow(), vec![vec![1, 2, 3]]);
    }
}
