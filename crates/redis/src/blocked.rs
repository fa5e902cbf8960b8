//! Who is blocked on which keys (BLPOP and the rest, XREAD BLOCK): a
//! queue of waiters per key, in the order they blocked, and each waiter's
//! wake-up and cancellation. The commands that block are in
//! `blocking.rs`; this is the server-wide state they share with the
//! writes that wake them and with CLIENT KILL / CLIENT UNBLOCK.

use std::collections::{HashMap, VecDeque};
use std::future::poll_fn;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::args::parse_float;

/// How long a waiter sleeps before it checks its connection is still
/// there (a client gone while blocked must not take an element).
const PROBE_EVERY: Duration = Duration::from_millis(500);

/// Why a waiter stopped waiting other than by its keys or its timeout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cancel {
    None = 0,
    /// CLIENT UNBLOCK … TIMEOUT: answer as if the timeout passed.
    Timeout = 1,
    /// CLIENT UNBLOCK … ERROR.
    Error = 2,
    /// CLIENT KILL.
    Killed = 3,
}

/// One blocked client.
#[derive(Default)]
pub struct Waiter {
    /// Woken and not yet retried.
    ready: AtomicBool,
    cancel: AtomicU8,
    waker: Mutex<Option<Waker>>,
}

impl Waiter {
    fn wake(&self) {
        self.ready.store(true, Ordering::Release);
        if let Some(w) = self.waker.lock().take() {
            w.wake();
        }
    }

    /// Stops the wait (CLIENT KILL, CLIENT UNBLOCK).
    pub fn cancel(&self, why: Cancel) {
        self.cancel.store(why as u8, Ordering::Release);
        self.wake();
    }

    pub fn cancelled(&self) -> Cancel {
        match self.cancel.load(Ordering::Acquire) {
            1 => Cancel::Timeout,
            2 => Cancel::Error,
            3 => Cancel::Killed,
            _ => Cancel::None,
        }
    }

    /// Waits until woken.
    async fn woken(&self) {
        poll_fn(|cx| {
            if self.ready.load(Ordering::Acquire) {
                return Poll::Ready(());
            }
            *self.waker.lock() = Some(cx.waker().clone());
            if self.ready.load(Ordering::Acquire) {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await
    }

    /// Waits until woken, or `limit` passes; true if woken.
    pub async fn wait(&self, limit: Duration) -> bool {
        use futures_util::future::{select, Either};
        let woken = std::pin::pin!(self.woken());
        let timer = std::pin::pin!(nvdepot_io::uring::sleep(limit));
        let woke = matches!(select(woken, timer).await, Either::Left(_));
        woke || self.ready.load(Ordering::Acquire)
    }

    /// Clears the wake-up before a retry.
    pub fn rearm(&self) -> bool {
        self.ready.swap(false, Ordering::AcqRel)
    }
}

/// A key in its database.
type KeyOf = (usize, Vec<u8>);

/// Every blocked client, by database and key.
#[derive(Default)]
pub struct Blocked {
    queues: Mutex<HashMap<KeyOf, VecDeque<Arc<Waiter>>>>,
    /// Registered waiters (a write checks this before it signals).
    waiting: AtomicUsize,
}

impl Blocked {
    /// Whether any client is blocked (writes skip signalling if not).
    pub fn any(&self) -> bool {
        self.waiting.load(Ordering::Acquire) > 0
    }

    pub fn register(&self, db: usize, keys: &[&[u8]], w: &Arc<Waiter>) {
        let mut q = self.queues.lock();
        for k in keys {
            q.entry((db, k.to_vec()))
                .or_default()
                .push_back(Arc::clone(w));
        }
        self.waiting.fetch_add(1, Ordering::AcqRel);
    }

    /// Removes `w`; a wake-up it did not use (`unused`) goes to the next
    /// waiter of each of its keys.
    pub fn unregister(&self, db: usize, keys: &[&[u8]], w: &Arc<Waiter>, unused: bool) {
        {
            let mut q = self.queues.lock();
            for k in keys {
                let id = (db, k.to_vec());
                if let Some(queue) = q.get_mut(&id) {
                    queue.retain(|x| !Arc::ptr_eq(x, w));
                    if queue.is_empty() {
                        q.remove(&id);
                    }
                }
            }
        }
        self.waiting.fetch_sub(1, Ordering::AcqRel);
        if unused {
            for k in keys {
                self.signal(db, k);
            }
        }
    }

    /// Every key of `db` may have elements (SWAPDB): wakes each one's
    /// first waiter not woken yet, to look again.
    pub fn signal_db(&self, db: usize) {
        let q = self.queues.lock();
        for ((d, _), queue) in q.iter() {
            if *d != db {
                continue;
            }
            if let Some(w) = queue.iter().find(|w| !w.ready.load(Ordering::Acquire)) {
                w.wake();
            }
        }
    }

    /// `key` may have elements: wakes its first waiter not woken yet.
    pub fn signal(&self, db: usize, key: &[u8]) {
        let q = self.queues.lock();
        let Some(queue) = q.get(&(db, key.to_vec())) else {
            return;
        };
        if let Some(w) = queue.iter().find(|w| !w.ready.load(Ordering::Acquire)) {
            w.wake();
        }
    }
}

/// A blocking command's timeout argument (seconds, a float; 0 = none), as
/// Redis's `getTimeoutFromObjectOrReply` reads it.
pub fn timeout_arg(a: &[u8]) -> Result<Option<Duration>, &'static str> {
    let f = parse_float(a).ok_or("ERR timeout is not a float or out of range")?;
    let ms = (f * 1000.0).ceil();
    // Redis 7.0 casts the milliseconds to a C long long: one past its
    // range (or infinite) becomes LLONG_MIN on x86-64, which it then
    // refuses as negative.
    if ms < 0.0 || ms >= i64::MAX as f64 {
        return Err("ERR timeout is negative");
    }
    Ok((ms > 0.0).then(|| Duration::from_millis(ms as u64)))
}

/// Where a blocked client's wait ends.
pub struct Deadline(Option<Instant>);

impl Deadline {
    pub fn after(timeout: Option<Duration>) -> Deadline {
        Deadline(timeout.map(|t| Instant::now() + t))
    }

    /// Time left, if the deadline has not passed (`PROBE_EVERY` at most).
    pub fn slice(&self) -> Option<Duration> {
        match self.0 {
            None => Some(PROBE_EVERY),
            Some(at) => {
                let now = Instant::now();
                (at > now).then(|| (at - now).min(PROBE_EVERY))
            }
        }
    }
}

/// The error CLIENT UNBLOCK … ERROR answers.
pub const UNBLOCKED: &str = "UNBLOCKED client unblocked via CLIENT UNBLOCK";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_as_redis_reads_them() {
        assert_eq!(timeout_arg(b"0"), Ok(None));
        assert_eq!(timeout_arg(b"0.0001"), Ok(Some(Duration::from_millis(1))));
        assert_eq!(timeout_arg(b"1.5"), Ok(Some(Duration::from_millis(1500))));
        assert!(timeout_arg(b"-1").is_err());
        assert!(timeout_arg(b"x").is_err());
        assert_eq!(timeout_arg(b"inf"), Err("ERR timeout is negative"));
        assert_eq!(
            timeout_arg(b"9223372036854775807"),
            Err("ERR timeout is negative")
        );
    }

    #[test]
    fn a_signal_wakes_the_first_waiter_then_passes_on() {
        let b = Blocked::default();
        let (w1, w2) = (Arc::new(Waiter::default()), Arc::new(Waiter::default()));
        b.register(0, &[b"k"], &w1);
        b.register(0, &[b"k", b"j"], &w2);
        b.signal(0, b"k");
        assert!(w1.ready.load(Ordering::Acquire));
        assert!(!w2.ready.load(Ordering::Acquire));
        // w1 leaves without using it: w2 gets it.
        b.unregister(0, &[b"k"], &w1, true);
        assert!(w2.ready.load(Ordering::Acquire));
        b.unregister(0, &[b"k", b"j"], &w2, false);
        assert!(!b.any());
        assert!(b.queues.lock().is_empty());
    }
}
