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
use std::task::{Poll, Waker};

use super::sync::{may_park, AtomicUsize, Mutex, MutexGuard, Ordering};
use crate::aio::Mode;

struct Stripe {
    lock: Mutex<()>,
    waiting: AtomicUsize,
    wakers: Mutex<Vec<Waker>>,
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
            let wakers = std::mem::take(&mut *self.stripe.wakers.lock());
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
                    wakers: Mutex::new(Vec::new()),
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
            let mut parked = false;
            poll_fn(|cx| {
                if parked {
                    // Woken by an unlock (or spuriously): try again.
                    return Poll::Ready(());
                }
                stripe.waiting.fetch_add(1, Ordering::SeqCst);
                stripe.wakers.lock().push(cx.waker().clone());
                parked = true;
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
