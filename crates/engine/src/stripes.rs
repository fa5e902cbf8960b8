//! Striped key locks that both threads and async tasks can wait for.
//!
//! A writer holds its key's stripe from the lookup of the old record until
//! the index points to the new, durable one: across a group commit. A
//! blocking caller waits in `parking_lot`; a task on an io_uring runtime
//! must not block its thread (the holder may be a task of the same
//! thread), so it parks its waker on the stripe and is woken by whoever
//! unlocks. Lost wakeups are ruled out by ordering: a waiter announces
//! itself (count, then waker) *before* re-checking the lock, and an
//! unlocker releases *before* reading the count.

use std::future::poll_fn;
use std::task::Poll;

use nvdepot_io::wait_list::{Ticket, WaitList};

use super::sync::{may_park, AtomicUsize, Mutex, MutexGuard, Ordering};
use crate::aio::Mode;

struct Stripe {
    lock: Mutex<()>,
    waiting: AtomicUsize,
    /// One entry per parked task, however often it is polled (a task
    /// joining many futures polls them all on each wake).
    wakers: Mutex<WaitList>,
}

pub(crate) struct Stripes {
    stripes: Box<[Stripe]>,
}

/// A held stripe; unlocking wakes the tasks parked on it.
pub(crate) struct StripeGuard<'a> {
    guard: Option<MutexGuard<'a, ()>>,
    stripe: &'a Stripe,
}

impl Drop for StripeGuard<'_> {
    fn drop(&mut self) {
        drop(self.guard.take());
        if self.stripe.waiting.load(Ordering::SeqCst) > 0 {
            let wakers = self.stripe.wakers.lock().take_all();
            self.stripe
                .waiting
                .fetch_sub(wakers.len(), Ordering::SeqCst);
            for w in wakers {
                w.wake();
            }
        }
    }
}

impl Stripes {
    pub fn new(n: usize) -> Stripes {
        Stripes {
            stripes: (0..n)
                .map(|_| Stripe {
                    lock: Mutex::new(()),
                    waiting: AtomicUsize::new(0),
                    wakers: Mutex::new(WaitList::new()),
                })
                .collect(),
        }
    }

    /// Blocks the thread until stripe `i` is ours.
    pub fn lock(&self, i: usize) -> StripeGuard<'_> {
        let stripe = &self.stripes[i];
        StripeGuard {
            guard: Some(stripe.lock.lock()),
            stripe,
        }
    }

    /// Takes stripe `i`, waiting as `mode` says (a task outside any
    /// runtime blocks).
    pub async fn lock_in(&self, mode: Mode, i: usize) -> StripeGuard<'_> {
        if mode == Mode::Blocking || !may_park() {
            return self.lock(i);
        }
        let stripe = &self.stripes[i];
        loop {
            if let Some(g) = stripe.lock.try_lock() {
                return StripeGuard {
                    guard: Some(g),
                    stripe,
                };
            }
            let mut parked: Option<Ticket> = None;
            poll_fn(|cx| {
                if let Some(ticket) = parked {
                    let mut wakers = stripe.wakers.lock();
                    if wakers.woken(ticket) {
                        // Woken by an unlock: try again.
                        return Poll::Ready(());
                    }
                    // Polled again before any unlock took the list (a
                    // joined sibling was woken): the entry stays, with
                    // this poll's waker; the unlock that is due wakes it.
                    parked = Some(wakers.register(parked, cx.waker()).0);
                    return Poll::Pending;
                }
                stripe.waiting.fetch_add(1, Ordering::SeqCst);
                parked = Some(stripe.wakers.lock().register(None, cx.waker()).0);
                if stripe.lock.is_locked() {
                    Poll::Pending
                } else {
                    // Released between try_lock and parking: our waker may
                    // get a spurious wake later, which is harmless.
                    Poll::Ready(())
                }
            })
            .await;
        }
    }
}
