//! In-flight operations: a slot per submission, owning the buffers the
//! kernel reads or writes until the completion arrives.
//!
//! The rule that makes the ownership model sound: memory an SQE points at
//! belongs to the op's `data`, which lives in the [`Op`] future while it is
//! polled and moves into the slot if the future is dropped early, so it is
//! freed only after the kernel has posted the completion.

use std::any::Any;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use io_uring::squeue;

use super::runtime::{with_core, Core};

enum Slot {
    Free,
    /// Submitted; the waker of the task waiting, if it has polled.
    Waiting(Option<Waker>),
    /// Completed, result not yet taken.
    Done {
        result: i32,
        flags: u32,
    },
    /// The future was dropped before completion: keep its buffers until
    /// the kernel is done with them.
    Orphaned(#[allow(dead_code)] Box<dyn Any>),
    /// A multishot op (one submission, many completions): completions
    /// queue up until its owner takes them.
    Multi(Multi),
    /// A multishot op whose owner went away: each late completion is
    /// handed to the closure (which gives back what it carries, such as
    /// a provided buffer); the last one (no `F_MORE`) frees the slot.
    MultiOrphaned(Box<dyn FnMut(i32, u32)>),
}

#[derive(Default)]
struct Multi {
    queue: VecDeque<(i32, u32)>,
    waker: Option<Waker>,
    /// Completions queued beyond which the op asks to be cancelled
    /// (backpressure: an owner that does not take them holds whatever
    /// they carry); 0 = no limit.
    limit: usize,
    /// A cancellation was asked for and has not ended the op yet.
    cancelling: bool,
}

/// What reaping a completion asks of the runtime.
pub(crate) enum Reaped {
    Nothing,
    Wake(Waker),
    /// A multishot op queued more than its limit: cancel it (and wake its
    /// owner, if it waits).
    Cancel(Option<Waker>),
}

#[derive(Default)]
pub(crate) struct OpSlots {
    slots: Vec<Slot>,
    free: Vec<usize>,
}

impl OpSlots {
    fn insert(&mut self) -> usize {
        match self.free.pop() {
            Some(i) => {
                self.slots[i] = Slot::Waiting(None);
                i
            }
            None => {
                self.slots.push(Slot::Waiting(None));
                self.slots.len() - 1
            }
        }
    }

    fn release(&mut self, i: usize) {
        self.slots[i] = Slot::Free;
        self.free.push(i);
    }

    /// Leaks the buffers of operations still in flight: the ring is going
    /// away, and the kernel may finish such an operation (write into its
    /// buffer) after the ring's descriptor is closed.
    ///
    /// Returns whether a multishot op may still be in flight (its
    /// completions may still write into provided buffers).
    pub fn leak_in_flight(&mut self) -> bool {
        let mut multishot = false;
        for slot in self.slots.drain(..) {
            match slot {
                Slot::Orphaned(data) => std::mem::forget(data),
                Slot::MultiOrphaned(f) => {
                    std::mem::forget(f);
                    multishot = true;
                }
                Slot::Multi(_) => multishot = true,
                _ => {}
            }
        }
        multishot
    }

    pub fn complete(&mut self, user_data: u64, result: i32, flags: u32) -> Reaped {
        let i = user_data as usize;
        let Some(slot) = self.slots.get_mut(i) else {
            debug_assert!(false, "completion for unknown op {i}");
            return Reaped::Nothing;
        };
        match slot {
            Slot::Multi(m) => {
                m.queue.push_back((result, flags));
                let more = io_uring::cqueue::more(flags);
                if more && m.limit > 0 && m.queue.len() > m.limit && !m.cancelling {
                    m.cancelling = true;
                    return Reaped::Cancel(m.waker.take());
                }
                if !more {
                    m.cancelling = false;
                }
                return m.waker.take().map_or(Reaped::Nothing, Reaped::Wake);
            }
            Slot::MultiOrphaned(f) => {
                f(result, flags);
                if !io_uring::cqueue::more(flags) {
                    self.release(i);
                }
                return Reaped::Nothing;
            }
            _ => {}
        }
        match std::mem::replace(slot, Slot::Done { result, flags }) {
            Slot::Waiting(w) => w.map_or(Reaped::Nothing, Reaped::Wake),
            Slot::Orphaned(_) => {
                self.release(i);
                Reaped::Nothing
            }
            Slot::Free | Slot::Done { .. } | Slot::Multi(_) | Slot::MultiOrphaned(_) => {
                debug_assert!(false, "completion for op {i} that is not in flight");
                Reaped::Nothing
            }
        }
    }

    /// A slot for an op whose completion nobody awaits (it is freed when
    /// the completion arrives).
    pub fn insert_detached(&mut self) -> usize {
        let i = self.insert();
        self.slots[i] = Slot::Orphaned(Box::new(()));
        i
    }

    /// A slot for a multishot op that asks to be cancelled once more
    /// than `limit` completions wait in its queue (0: never).
    pub fn insert_multi(&mut self, limit: usize) -> usize {
        let i = self.insert();
        self.slots[i] = Slot::Multi(Multi {
            limit,
            ..Multi::default()
        });
        i
    }

    /// The oldest queued completion of multishot op `i`; if there is none,
    /// `waker` is woken by the next.
    pub fn multi_next(&mut self, i: usize, waker: &Waker) -> Option<(i32, u32)> {
        let Slot::Multi(m) = &mut self.slots[i] else {
            unreachable!("multishot op {i} in a bad state");
        };
        let next = m.queue.pop_front();
        if next.is_none() {
            match &m.waker {
                Some(w) if w.will_wake(waker) => {}
                _ => m.waker = Some(waker.clone()),
            }
        }
        next
    }

    /// The oldest queued completion of multishot op `i`, without waiting.
    pub fn multi_try_next(&mut self, i: usize) -> Option<(i32, u32)> {
        let Slot::Multi(m) = &mut self.slots[i] else {
            unreachable!("multishot op {i} in a bad state");
        };
        m.queue.pop_front()
    }

    /// Its owner lets multishot op `i` go. Queued completions go to
    /// `stray` now; if the op is still `in_flight`, later ones will (the
    /// caller cancels it), and the last frees the slot.
    pub fn multi_orphan(&mut self, i: usize, in_flight: bool, mut stray: Box<dyn FnMut(i32, u32)>) {
        let Slot::Multi(m) = std::mem::replace(&mut self.slots[i], Slot::Free) else {
            unreachable!("multishot op {i} in a bad state");
        };
        for (result, flags) in m.queue {
            stray(result, flags);
        }
        if in_flight {
            self.slots[i] = Slot::MultiOrphaned(stray);
        } else {
            self.release(i);
        }
    }
}

/// A submitted operation: resolves to the kernel's result (a byte count
/// or a negated errno) and gives back the data the op owned.
pub(crate) struct Op<T: 'static> {
    slot: usize,
    data: Option<T>,
}

impl<T: 'static> Op<T> {
    /// Submits `entry`, whose pointers must point into `data` (heap memory
    /// that does not move when `data` does) or be otherwise valid until
    /// completion.
    ///
    /// Panics outside a runtime.
    pub fn submit(data: T, entry: squeue::Entry) -> Op<T> {
        with_core(|core| Op::submit_on(core, data, entry))
            .expect("nvdepot_io::uring operation outside a runtime")
    }

    fn submit_on(core: &Core, data: T, entry: squeue::Entry) -> Op<T> {
        let slot = core.ops.borrow_mut().insert();
        core.push(&entry.user_data(slot as u64));
        Op {
            slot,
            data: Some(data),
        }
    }
}

/// The outcome of an op: the raw result, the CQE flags and the op's data.
pub(crate) struct Completion<T> {
    pub result: i32,
    #[allow(dead_code)]
    pub flags: u32,
    pub data: T,
}

impl<T: 'static> Future for Op<T> {
    type Output = Completion<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Completion<T>> {
        // Op is Unpin (T is only held, never pinned).
        let this = self.get_mut();
        let done = with_core(|core| {
            let mut ops = core.ops.borrow_mut();
            match &mut ops.slots[this.slot] {
                Slot::Done { result, flags } => {
                    let r = (*result, *flags);
                    ops.release(this.slot);
                    Some(r)
                }
                Slot::Waiting(w) => {
                    match w {
                        Some(w) if w.will_wake(cx.waker()) => {}
                        _ => *w = Some(cx.waker().clone()),
                    }
                    None
                }
                _ => unreachable!("op polled in a bad state"),
            }
        })
        .expect("op polled outside its runtime");
        match done {
            Some((result, flags)) => Poll::Ready(Completion {
                result,
                flags,
                data: this.data.take().expect("op polled after completion"),
            }),
            None => Poll::Pending,
        }
    }
}

impl<T: 'static> Unpin for Op<T> {}

impl<T: 'static> Drop for Op<T> {
    fn drop(&mut self) {
        let Some(data) = self.data.take() else { return };
        if !super::runtime::in_runtime() {
            // The op outlived its runtime's block_on: leak the data rather
            // than free memory the kernel may still write.
            std::mem::forget(data);
            return;
        }
        // Dropped while in flight: park the data in the slot until the
        // completion arrives (or free the slot if it already has).
        with_core(|core| {
            let mut ops = core.ops.borrow_mut();
            match ops.slots[self.slot] {
                Slot::Done { .. } => ops.release(self.slot),
                _ => ops.slots[self.slot] = Slot::Orphaned(Box::new(data)),
            }
        });
    }
}
