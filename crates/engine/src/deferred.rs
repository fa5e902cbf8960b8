//! Deferred durability: a caller that makes several puts in a row (a
//! Redis script) and answers only after all of them may wait for their
//! durability once, at the end, instead of once per put. Inside
//! [`defer_durability`], a put whose durability would be waited for after
//! its key's lock is released ([`crate::Options::unlock_before_durable`])
//! returns at once and records its log position; the caller then waits
//! for the highest with [`crate::Store::wait_durable_async`] before it
//! answers, so nothing is acknowledged before it is on the device. Puts
//! that must be durable before they are linked (deletes, batches, puts
//! without `unlock_before_durable`) still wait inline.

use std::cell::Cell;

thread_local! {
    /// Inside `defer_durability`: the highest log position owed so far.
    static OWED: Cell<Option<u64>> = const { Cell::new(None) };
}

/// Runs `f` with durability deferred on this thread: its result and the
/// log position to wait for (none if no put deferred its wait).
pub fn defer_durability<R>(f: impl FnOnce() -> R) -> (R, Option<u64>) {
    let outer = OWED.with(|o| o.replace(Some(0)));
    let r = f();
    let owed = OWED.with(|o| o.replace(outer)).filter(|&lsn| lsn > 0);
    if let (Some(outer), Some(lsn)) = (outer, owed) {
        // Nested: the outer scope owes this too.
        OWED.with(|o| o.set(Some(outer.max(lsn))));
    }
    (r, owed)
}

/// A put owes durability up to `lsn`: true if a deferral scope took the
/// debt (the put need not wait).
pub(crate) fn owe(lsn: u64) -> bool {
    OWED.with(|o| match o.get() {
        Some(max) => {
            o.set(Some(max.max(lsn)));
            true
        }
        None => false,
    })
}

/// [`defer_durability`] for a future: durability is deferred while the
/// future is polled, and only then, so other tasks polled on the same
/// thread between its polls (a script's call driven on a worker, see
/// `nvdepot_io::uring::drive`) still wait for their own puts. Gives the
/// future's output and the log position owed.
pub fn defer_durability_async<F: std::future::Future>(future: F) -> DeferDurability<F> {
    DeferDurability { future, owed: 0 }
}

pin_project_lite::pin_project! {
    /// The future of [`defer_durability_async`]. A struct, not an `async
    /// fn`: that would hold the wrapped future twice (its argument, then
    /// pinned), and these wrap a Redis command's, the largest future a
    /// worker polls.
    pub struct DeferDurability<F> {
        #[pin]
        future: F,
        owed: u64,
    }
}

impl<F: std::future::Future> std::future::Future for DeferDurability<F> {
    type Output = (F::Output, Option<u64>);

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let this = self.project();
        let (polled, lsn) = defer_durability(|| this.future.poll(cx));
        if let Some(lsn) = lsn {
            *this.owed = (*this.owed).max(lsn);
        }
        let owed = *this.owed;
        polled.map(|out| (out, (owed > 0).then_some(owed)))
    }
}
