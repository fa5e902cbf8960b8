//! In-flight operations: a slot per submission, owning the buffers the
//! kernel reads or writes until the completion arrives.
//!
//! The rule that makes the ownership model sound: memory an SQE points at
//! belongs to the op's `data`, which lives in the [`Op`] future while it is
//! polled and moves into the slot if the future is dropped early, so it is
//! freed only after the kernel has posted the completion.

use std::any::Any;
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
}

/// What reaping a completion asks of the runtime.
pub(crate) enum Reaped {
    Nothing,
    Wake(Waker),
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
    pub fn leak_in_flight(&mut self) {
        for slot in self.slots.drain(..) {
            if let Slot::Orphaned(data) = slot {
                std::mem::forget(data);
            }
        }
    }

    pub fn complete(&mut self, user_data: u64, result: i32, flags: u32) -> Reaped {
        let i = user_data as usize;
        let Some(slot) = self.slots.get_mut(i) else {
            debug_assert!(false, "completion for unknown op {i}");
            return Reaped::Nothing;
        };
        match std::mem::replace(slot, Slot::Done { result, flags }) {
            Slot::Waiting(w) => w.map_or(Reaped::Nothing, Reaped::Wake),
            Slot::Orphaned(_) => {
                self.release(i);
                Reaped::Nothing
            }
            Slot::Free | Slot::Done { .. } => {
                debug_assert!(false, "completion for op {i} that is not in flight");
                Reaped::Nothing
            }
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
