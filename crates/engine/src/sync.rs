//! Synchronization primitives of the stripe locks and the group commit,
//! real ones.
//!
//! `stripes.rs` and `group_commit.rs` name their locks and atomics only
//! through `super::sync`. In
//! this crate they resolve here (parking_lot and std); under test the same
//! file is also compiled inside `crate::model`, whose `sync` is
//! `sync_shuttle.rs`, so shuttle can model-check the lock, the parking of
//! waiting tasks and the update step built on them (see `model.rs`).

pub(crate) use parking_lot::{Mutex, MutexGuard};

/// A condition variable whose `wait` takes and gives back the guard (the
/// surface shuttle's has too).
pub(crate) struct Condvar(parking_lot::Condvar);

impl Condvar {
    pub(crate) const fn new() -> Condvar {
        Condvar(parking_lot::Condvar::new())
    }

    pub(crate) fn wait<'a, T>(&self, mut guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
        self.0.wait(&mut guard);
        guard
    }

    pub(crate) fn notify_all(&self) {
        self.0.notify_all();
    }
}
pub(crate) use std::sync::atomic::{AtomicUsize, Ordering};

/// Whether a waiter may park its task (it runs on an io_uring runtime)
/// instead of blocking its thread.
pub(crate) fn may_park() -> bool {
    nvdepot_io::uring::in_runtime()
}
