//! Synchronization primitives of the stripe locks under shuttle (tests
//! only). Same surface as `sync.rs`; every lock and atomic operation here
//! is a scheduling point that shuttle permutes.

pub(crate) use shuttle::sync::atomic::{AtomicUsize, Ordering};

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

    pub(crate) fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        self.0.try_lock().ok()
    }

    /// parking_lot's `is_locked`, as a try (a scheduling point too).
    pub(crate) fn is_locked(&self) -> bool {
        self.0.try_lock().is_err()
    }
}

/// Under the model every waiting task parks (the path a runtime takes).
pub(crate) fn may_park() -> bool {
    true
}

/// shuttle's condition variable, with `sync.rs`'s surface.
pub(crate) struct Condvar(shuttle::sync::Condvar);

impl Condvar {
    pub(crate) fn new() -> Condvar {
        Condvar(shuttle::sync::Condvar::new())
    }

    pub(crate) fn wait<'a, T>(&self, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
        self.0
            .wait(guard)
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(crate) fn notify_all(&self) {
        self.0.notify_all();
    }
}
