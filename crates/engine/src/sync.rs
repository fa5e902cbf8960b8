//! Synchronization primitives of the stripe locks, real ones.
//!
//! `stripes.rs` names its locks and atomics only through `super::sync`. In
//! this crate they resolve here (parking_lot and std); under test the same
//! file is also compiled inside `crate::model`, whose `sync` is
//! `sync_shuttle.rs`, so shuttle can model-check the lock, the parking of
//! waiting tasks and the update step built on them (see `model.rs`).

pub(crate) use parking_lot::{Mutex, MutexGuard};
pub(crate) use std::sync::atomic::{AtomicUsize, Ordering};

/// Whether a waiter may park its task (it runs on an io_uring runtime)
/// instead of blocking its thread.
pub(crate) fn may_park() -> bool {
    nvdepot_io::uring::in_runtime()
}
