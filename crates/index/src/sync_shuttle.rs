//! Synchronization primitives of the index under shuttle (tests only).
//!
//! Same surface as `sync.rs`; every lock and atomic operation here is a
//! scheduling point that shuttle permutes.

pub(crate) use shuttle::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};

pub(crate) use shuttle::thread::yield_now;

pub(crate) struct Mutex<T>(shuttle::sync::Mutex<T>);

pub(crate) type MutexGuard<'a, T> = shuttle::sync::MutexGuard<'a, T>;

impl<T> Mutex<T> {
    pub(crate) fn new(value: T) -> Mutex<T> {
        Mutex(shuttle::sync::Mutex::new(value))
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
