//! The time a command reads (Unix ms, for expiry): the clock's, or for a
//! command a script calls, the script's start. Redis 7.0 fixes the time
//! for a script's calls (`fixed_time_expire`), so a key a script has seen
//! does not expire between two of its calls; and the script's calls skip
//! a clock read each.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use nvdepot_cache::resp::unix_now_ms;

thread_local! {
    /// The fixed time while a script's call is polled on this thread.
    static FIXED: Cell<Option<u64>> = const { Cell::new(None) };
}

/// The time for the command starting now.
pub(super) fn command_now_ms() -> u64 {
    FIXED.with(Cell::get).unwrap_or_else(unix_now_ms)
}

/// The clock's time for a command deciding at `now` (from
/// [`command_now_ms`]): `now` itself, unless the time is fixed, when the
/// clock is read (never before `now`). What TTL and PTTL count from, as
/// Redis 7.0's `ttlGenericCommand` reads `mstime()` in a script too.
pub(super) fn clock_ms(now: u64) -> u64 {
    match FIXED.with(Cell::get) {
        Some(_) => unix_now_ms().max(now),
        None => now,
    }
}

/// `future` with the time fixed at `at` while it is polled, and only
/// then: other tasks that run on the thread while it waits read the clock.
pub(super) fn fixed_at<F: Future>(at: u64, future: F) -> FixedAt<F> {
    FixedAt { at, future }
}

pin_project_lite::pin_project! {
    /// The future of [`fixed_at`].
    pub(super) struct FixedAt<F> {
        at: u64,
        #[pin]
        future: F,
    }
}

impl<F: Future> Future for FixedAt<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let _restore = Restore(FIXED.with(|f| f.replace(Some(*this.at))));
        this.future.poll(cx)
    }
}

/// Puts the time back as it was when dropped (also when the poll panics).
struct Restore(Option<u64>);

impl Drop for Restore {
    fn drop(&mut self) {
        FIXED.with(|f| f.set(self.0));
    }
}
