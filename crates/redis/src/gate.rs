//! The isolation gate for transactions: every command runs holding a
//! shared pass, `EXEC` runs its queued commands holding the exclusive one,
//! so no other client's command interleaves with a transaction (Redis's
//! isolation, where one thread runs everything). Waiting parks the task,
//! never the worker thread. Writer-preferring: once an `EXEC` waits, new
//! commands wait behind it, so transactions are not starved.

use std::future::poll_fn;
use std::task::Poll;

use nvdepot_io::wait_list::WaitList;

use std::sync::{Mutex, MutexGuard};

#[derive(Default)]
pub struct Gate {
    state: Mutex<State>,
}

impl Gate {
    /// The state; a panic elsewhere while holding it leaves it usable
    /// (every update is a few integer writes, never half done).
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[derive(Default)]
struct State {
    /// Commands running with a shared pass.
    readers: usize,
    /// An `EXEC` runs.
    writer: bool,
    /// `EXEC`s waiting for their turn.
    writers_waiting: usize,
    /// One entry per waiting task, however often it is polled.
    waiters: WaitList,
}

impl State {
    fn wake_all(&mut self) {
        for w in self.waiters.take_all() {
            w.wake();
        }
    }
}

/// A command's shared pass.
pub struct Shared<'a>(&'a Gate);

/// An `EXEC`'s exclusive pass.
pub struct Exclusive<'a>(&'a Gate);

/// Undoes an `EXEC`'s place in the queue if its wait is dropped.
struct Waiting<'a> {
    gate: &'a Gate,
    done: bool,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if !self.done {
            let mut st = self.gate.lock();
            st.writers_waiting -= 1;
            st.wake_all();
        }
    }
}

impl Gate {
    pub async fn shared(&self) -> Shared<'_> {
        let mut ticket = None;
        poll_fn(|cx| {
            let mut st = self.lock();
            if !st.writer && st.writers_waiting == 0 {
                st.readers += 1;
                return Poll::Ready(());
            }
            ticket = Some(st.waiters.register(ticket, cx.waker()).0);
            Poll::Pending
        })
        .await;
        Shared(self)
    }

    pub async fn exclusive(&self) -> Exclusive<'_> {
        self.lock().writers_waiting += 1;
        let mut waiting = Waiting {
            gate: self,
            done: false,
        };
        let mut ticket = None;
        poll_fn(|cx| {
            let mut st = self.lock();
            if !st.writer && st.readers == 0 {
                st.writer = true;
                st.writers_waiting -= 1;
                waiting.done = true;
                return Poll::Ready(());
            }
            ticket = Some(st.waiters.register(ticket, cx.waker()).0);
            Poll::Pending
        })
        .await;
        Exclusive(self)
    }
}

impl Drop for Shared<'_> {
    fn drop(&mut self) {
        let mut st = self.0.lock();
        st.readers -= 1;
        if st.readers == 0 && st.writers_waiting > 0 {
            st.wake_all();
        }
    }
}

impl Drop for Exclusive<'_> {
    fn drop(&mut self) {
        let mut st = self.0.lock();
        st.writer = false;
        st.wake_all();
    }
}
