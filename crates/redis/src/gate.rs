//! The isolation gate for transactions and scripts: every command runs
//! holding a shared pass, `EXEC` and a script run holding the exclusive
//! one, so no other client's command interleaves with them (Redis's
//! isolation, where one thread runs everything). Waiting parks the task,
//! never the worker thread. Writer-preferring: once an exclusive pass is
//! waited for, new commands wait behind it, so transactions and scripts
//! are not starved.
//!
//! Exclusive passes are handed over, not raced for: a release gives the
//! gate to one waiting writer and wakes only it (waking every waiter made
//! each script's release poll all the others, half of them on the other
//! worker: a cross-thread wake per waiter). The next writer is one of the
//! releasing thread's own while fewer than [`SAME_THREAD_RUN`] in a row
//! went that way, so a burst of scripts runs on one worker without a
//! wake-up of the other per script; otherwise the longest-waiting one.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::sync::{Mutex, MutexGuard};
use std::task::{Poll, Waker};

use nvdepot_io::wait_list::WaitList;

/// Exclusive passes handed in a row to writers of the releasing thread
/// before the longest-waiting writer of any thread gets its turn.
const SAME_THREAD_RUN: u32 = 16;

#[derive(Default)]
pub struct Gate {
    state: Mutex<State>,
}

impl Gate {
    /// The state; a panic elsewhere while holding it leaves it usable
    /// (every update is a few field writes, never half done).
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A task waiting for the exclusive pass.
struct Writer {
    id: u64,
    thread: u64,
    waker: Waker,
}

#[derive(Default)]
struct State {
    /// Commands running with a shared pass.
    readers: usize,
    /// The exclusive pass is held (or handed to `granted`).
    writer: bool,
    /// The writer the pass was handed to, not yet polled.
    granted: Option<u64>,
    /// Writers waiting, in arrival order.
    writers: VecDeque<Writer>,
    next_id: u64,
    /// Passes handed in a row to a writer of the releasing thread.
    same_thread_run: u32,
    /// Commands waiting for a shared pass: one entry per task.
    readers_waiting: WaitList,
}

impl State {
    /// Whether a new shared pass must wait.
    fn closed(&self) -> bool {
        self.writer || !self.writers.is_empty()
    }

    /// The gate is free (no writer, no reader): hand it to a waiting
    /// writer, or open it to the waiting readers.
    fn pass_on(&mut self) {
        debug_assert!(!self.writer && self.readers == 0);
        let here = thread_number();
        let pick = if self.same_thread_run < SAME_THREAD_RUN {
            self.writers.iter().position(|w| w.thread == here)
        } else {
            None
        };
        let next = match pick {
            Some(i) => {
                self.same_thread_run += 1;
                self.writers.remove(i)
            }
            None => {
                self.same_thread_run = 0;
                self.writers.pop_front()
            }
        };
        match next {
            Some(w) => {
                self.writer = true;
                self.granted = Some(w.id);
                w.waker.wake();
            }
            None => self.open_to_readers(),
        }
    }

    /// Wakes every command waiting for a shared pass.
    fn open_to_readers(&mut self) {
        for w in self.readers_waiting.take_all() {
            w.wake();
        }
    }
}

/// A small number naming the current thread (cheaper than `ThreadId`).
fn thread_number() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    thread_local! {
        static NUMBER: u64 = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    NUMBER.with(|n| *n)
}

/// A command's shared pass.
pub struct Shared<'a>(&'a Gate);

/// An `EXEC`'s or a script's exclusive pass.
pub struct Exclusive<'a>(&'a Gate);

/// Gives up a writer's place (or the pass handed to it) if its wait is
/// dropped.
struct Waiting<'a> {
    gate: &'a Gate,
    id: u64,
    done: bool,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let mut st = self.gate.lock();
        if st.granted == Some(self.id) {
            st.granted = None;
            st.writer = false;
            if st.readers == 0 {
                st.pass_on();
            }
        } else {
            st.writers.retain(|w| w.id != self.id);
            if !st.closed() {
                st.open_to_readers();
            }
        }
    }
}

impl Gate {
    pub async fn shared(&self) -> Shared<'_> {
        let mut ticket = None;
        poll_fn(|cx| {
            let mut st = self.lock();
            if !st.closed() {
                st.readers += 1;
                return Poll::Ready(());
            }
            ticket = Some(st.readers_waiting.register(ticket, cx.waker()).0);
            Poll::Pending
        })
        .await;
        Shared(self)
    }

    pub async fn exclusive(&self) -> Exclusive<'_> {
        let mut waiting = {
            let mut st = self.lock();
            if !st.closed() && st.readers == 0 {
                st.writer = true;
                return Exclusive(self);
            }
            let id = st.next_id;
            st.next_id += 1;
            Waiting {
                gate: self,
                id,
                done: false,
            }
        };
        let mut queued = false;
        poll_fn(|cx| {
            let mut st = self.lock();
            if !queued {
                queued = true;
                let w = Writer {
                    id: waiting.id,
                    thread: thread_number(),
                    waker: cx.waker().clone(),
                };
                st.writers.push_back(w);
                // Queued while the gate was free of writers and readers
                // drained meanwhile: nobody else would hand it over.
                if !st.writer && st.readers == 0 {
                    st.pass_on();
                }
            } else if let Some(w) = st.writers.iter_mut().find(|w| w.id == waiting.id) {
                w.waker.clone_from(cx.waker());
            }
            if st.granted == Some(waiting.id) {
                st.granted = None;
                waiting.done = true;
                return Poll::Ready(());
            }
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
        if st.readers == 0 && !st.writer && !st.writers.is_empty() {
            st.pass_on();
        }
    }
}

impl Drop for Exclusive<'_> {
    fn drop(&mut self) {
        let mut st = self.0.lock();
        st.writer = false;
        if st.readers == 0 {
            st.pass_on();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// Writers and readers on several threads: a writer never overlaps
    /// anyone, readers overlap only readers, and every task finishes.
    #[test]
    fn exclusive_passes_exclude_and_every_waiter_gets_through() {
        let gate = Arc::new(Gate::default());
        let inside = Arc::new(AtomicUsize::new(0));
        const WRITER: usize = 1 << 20;
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let (gate, inside) = (gate.clone(), inside.clone());
                std::thread::spawn(move || {
                    for i in 0..2000 {
                        if (i + t) % 3 == 0 {
                            let _p = crate::block_on(gate.exclusive());
                            assert_eq!(inside.fetch_add(WRITER, Ordering::SeqCst), 0);
                            std::hint::spin_loop();
                            inside.fetch_sub(WRITER, Ordering::SeqCst);
                        } else {
                            let _p = crate::block_on(gate.shared());
                            let was = inside.fetch_add(1, Ordering::SeqCst);
                            assert!(was < WRITER, "a reader inside with a writer");
                            inside.fetch_sub(1, Ordering::SeqCst);
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let st = gate.lock();
        assert!(!st.writer && st.readers == 0 && st.writers.is_empty());
    }

    /// A writer whose wait is dropped after the pass was handed to it
    /// passes it on.
    #[test]
    fn a_dropped_wait_passes_the_gate_on() {
        let gate = Gate::default();
        let held = crate::block_on(gate.exclusive());
        let noop = std::task::Context::from_waker(Waker::noop());
        let mut cx = noop;
        let mut second = Box::pin(gate.exclusive());
        assert!(second.as_mut().poll(&mut cx).is_pending());
        let mut third = Box::pin(gate.exclusive());
        assert!(third.as_mut().poll(&mut cx).is_pending());
        drop(held); // handed to `second`
        drop(second); // never polled again: on to `third`
        assert!(third.as_mut().poll(&mut cx).is_ready());
    }
}
