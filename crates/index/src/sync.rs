//! Synchronization primitives of the index, real ones.
//!
//! `directory.rs` names its atomics and locks only through `super::sync`.
//! In this crate they resolve here (parking_lot and std); under test the
//! same file is also compiled inside `crate::model`, whose `sync` is
//! `sync_shuttle.rs`, so shuttle can model-check the region-lock and
//! migration protocol (see `model.rs`). Slot arrays and counters that are
//! only touched under a region lock use std atomics in both builds.

pub(crate) use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};

pub(crate) use std::thread::yield_now;

/// A mutex (parking_lot: one byte, no poisoning).
pub(crate) struct Mutex<T>(parking_lot::Mutex<T>);

pub(crate) type MutexGuard<'a, T> = parking_lot::MutexGuard<'a, T>;

impl<T> Mutex<T> {
    pub(crate) fn new(value: T) -> Mutex<T> {
        Mutex(parking_lot::Mutex::new(value))
    }

    #[inline]
    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        self.0.lock()
    }
}
