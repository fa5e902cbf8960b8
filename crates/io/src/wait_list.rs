//! Wakers of tasks waiting for one event (a lock's release, a batch's
//! flush), with at most one entry per waiter however often it is polled.
//!
//! A waiter that simply pushed `cx.waker()` on every poll grew the list by
//! one entry per spurious poll: a task joining hundreds of futures polls
//! each of them whenever any one is woken, so an MSET of 400 keys queued
//! millions of wakers and woke its own task once per entry (issue 35).
//! Here a waiter keeps a [`Ticket`]: the list's epoch when it registered
//! and its slot. Waking everyone starts a new epoch, so a ticket of an
//! older epoch means "woken"; a ticket of the current one is refreshed in
//! place (O(1)), never pushed twice.
//!
//! The list holds no lock of its own: callers keep it inside the mutex
//! that guards the state the waiters wait on, so registering and checking
//! the state are one step.

use std::task::Waker;

/// Where a waiter's waker sits in a [`WaitList`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ticket {
    epoch: u64,
    slot: usize,
}

/// The wakers of the current epoch.
#[derive(Debug, Default)]
pub struct WaitList {
    epoch: u64,
    wakers: Vec<Waker>,
}

impl WaitList {
    pub const fn new() -> WaitList {
        WaitList {
            epoch: 0,
            wakers: Vec::new(),
        }
    }

    /// Registers `waker` for the next [`take_all`](Self::take_all), or,
    /// when `ticket` is still of this epoch, refreshes its entry. Returns
    /// the ticket to pass next time, and whether a new entry was made.
    pub fn register(&mut self, ticket: Option<Ticket>, waker: &Waker) -> (Ticket, bool) {
        if let Some(t) = ticket {
            if t.epoch == self.epoch {
                let w = &mut self.wakers[t.slot];
                if !w.will_wake(waker) {
                    w.clone_from(waker);
                }
                return (t, false);
            }
        }
        let t = Ticket {
            epoch: self.epoch,
            slot: self.wakers.len(),
        };
        self.wakers.push(waker.clone());
        (t, true)
    }

    /// True when `ticket`'s entry was taken by a [`take_all`](Self::take_all)
    /// since it was registered (its waiter was, or is about to be, woken).
    pub fn woken(&self, ticket: Ticket) -> bool {
        ticket.epoch != self.epoch
    }

    /// Takes every registered waker (the caller wakes them after letting
    /// go of its lock) and starts a new epoch.
    pub fn take_all(&mut self) -> Vec<Waker> {
        self.epoch += 1;
        std::mem::take(&mut self.wakers)
    }

    pub fn len(&self) -> usize {
        self.wakers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.wakers.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn one_entry_per_waiter_however_often_polled() {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut list = WaitList::new();
        let (mut a, new) = list.register(None, &waker);
        assert!(new);
        for _ in 0..1000 {
            let (t, new) = list.register(Some(a), &waker);
            assert!(!new);
            a = t;
        }
        let (b, _) = list.register(None, &waker);
        assert_eq!(list.len(), 2);
        assert!(!list.woken(a) && !list.woken(b));
        for w in list.take_all() {
            w.wake();
        }
        assert_eq!(count.0.load(Ordering::SeqCst), 2);
        assert!(list.woken(a) && list.woken(b));
        // A woken waiter that waits again gets a new entry.
        let (a2, new) = list.register(Some(a), &waker);
        assert!(new && !list.woken(a2));
        assert_eq!(list.len(), 1);
    }

    #[test]
    fn refresh_replaces_a_changed_waker() {
        let first = Arc::new(Count(AtomicUsize::new(0)));
        let second = Arc::new(Count(AtomicUsize::new(0)));
        let mut list = WaitList::new();
        let (t, _) = list.register(None, &Waker::from(first.clone()));
        list.register(Some(t), &Waker::from(second.clone()));
        for w in list.take_all() {
            w.wake();
        }
        assert_eq!(first.0.load(Ordering::SeqCst), 0);
        assert_eq!(second.0.load(Ordering::SeqCst), 1);
    }
}
