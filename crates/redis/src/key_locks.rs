//! Per-key locks for the paged layout (`list_pages.rs`): every step that
//! reads or changes a paged collection's pages holds its key's lock
//! (steps that only read hold it shared, with each other), so within
//! the server no step ever sees another's pages half committed (the
//! engine makes a commit's records visible one by one, and the DRAM tier
//! catches up after the engine returns). Writes of the key's record alone
//! (DEL, SET, EXPIRE, a compact push) take no lock: they never touch
//! pages, and a paged step they overtake fails its guarded commit and
//! reads again.
//!
//! 4 096 stripes of one async lock each; waiting parks the task, never the
//! worker thread. A holder never waits for a second key's lock (LMOVE and
//! RENAME take one key's, then the other's), so there is no deadlock.

use std::future::poll_fn;
use std::sync::{LazyLock, Mutex, MutexGuard};
use std::task::Poll;
use std::time::Duration;

use nvdepot_io::wait_list::WaitList;

const STRIPES: usize = 4096;

#[derive(Default)]
struct Stripe {
    /// Held by one step that may change pages.
    held: bool,
    /// Steps that only read pages, holding the lock shared.
    readers: u32,
    /// A step waits to hold the lock alone: new readers queue behind it
    /// (so a stream of reads cannot starve a write). Cleared when such a
    /// step gets the lock; a waiter that gives up leaves it set until
    /// then, which only makes readers take turns meanwhile.
    writer_waiting: bool,
    waiters: WaitList,
}

pub struct KeyLocks {
    stripes: Box<[Mutex<Stripe>]>,
}

/// The process's key locks (a server's keys; two stores in one process
/// only share stripes).
pub static PAGED: LazyLock<KeyLocks> = LazyLock::new(|| KeyLocks {
    stripes: (0..STRIPES).map(|_| Mutex::default()).collect(),
});

/// A held key lock.
pub struct KeyGuard<'a> {
    locks: &'a KeyLocks,
    stripe: usize,
    shared: bool,
}

impl KeyLocks {
    fn stripe(&self, i: usize) -> MutexGuard<'_, Stripe> {
        // Every update is a flag and a waiter list: never half done.
        self.stripes[i].lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for `key` of `db`'s lock, held alone.
    pub async fn lock(&self, db: usize, key: &[u8]) -> KeyGuard<'_> {
        self.acquire(db, key, false).await
    }

    /// Waits for `key` of `db`'s lock, held shared with other readers:
    /// for steps that read pages and change nothing.
    pub async fn lock_shared(&self, db: usize, key: &[u8]) -> KeyGuard<'_> {
        self.acquire(db, key, true).await
    }

    async fn acquire(&self, db: usize, key: &[u8], shared: bool) -> KeyGuard<'_> {
        let h = xxhash_rust::xxh3::xxh3_64_with_seed(key, db as u64);
        let i = h as usize & (STRIPES - 1);
        let mut ticket = None;
        poll_fn(|cx| {
            let mut s = self.stripe(i);
            if shared {
                // Behind a waiting writer only while other readers hold
                // it (never waiting on a flag nobody will clear).
                if !(s.held || s.writer_waiting && s.readers > 0) {
                    s.readers += 1;
                    return Poll::Ready(());
                }
            } else if !s.held && s.readers == 0 {
                s.held = true;
                s.writer_waiting = false;
                return Poll::Ready(());
            } else {
                s.writer_waiting = true;
            }
            ticket = Some(s.waiters.register(ticket, cx.waker()).0);
            Poll::Pending
        })
        .await;
        KeyGuard {
            locks: self,
            stripe: i,
            shared,
        }
    }
}

impl Drop for KeyGuard<'_> {
    fn drop(&mut self) {
        let waiters = {
            let mut s = self.locks.stripe(self.stripe);
            if self.shared {
                debug_assert!(s.readers > 0 && !s.held, "a shared holder is counted");
                s.readers -= 1;
                if s.readers > 0 {
                    return;
                }
            } else {
                debug_assert!(s.held && s.readers == 0, "an exclusive holder is alone");
                s.held = false;
            }
            s.waiters.take_all()
        };
        for w in waiters {
            w.wake();
        }
    }
}

/// One turn of a paged step's retry loop on `key` of `db`: after a
/// first attempt, the [`backoff`]; then the key's lock.
pub async fn turn(attempt: &mut u32, db: usize, key: &[u8]) -> KeyGuard<'static> {
    if *attempt > 0 {
        backoff(*attempt).await;
    }
    *attempt += 1;
    PAGED.lock(db, key).await
}

/// [`turn`] for a step that only reads pages: the lock shared.
pub async fn turn_shared(attempt: &mut u32, db: usize, key: &[u8]) -> KeyGuard<'static> {
    if *attempt > 0 {
        backoff(*attempt).await;
    }
    *attempt += 1;
    PAGED.lock_shared(db, key).await
}

/// Waits before reading again after a commit found its key changed (a
/// write of the key's record alone came between; its DRAM-tier entry
/// catches up right after): 50 µs, doubling to 2 ms.
pub async fn backoff(attempt: u32) {
    let d = Duration::from_micros(50 << attempt.min(6)).min(Duration::from_millis(2));
    if nvdepot_io::uring::in_runtime() {
        nvdepot_io::uring::sleep(d).await;
    } else {
        std::thread::sleep(d);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_holder_per_key() {
        let locks = KeyLocks {
            stripes: (0..STRIPES).map(|_| Mutex::default()).collect(),
        };
        let a = crate::block_on(locks.lock(0, b"k"));
        use std::future::Future;
        let mut second = Box::pin(locks.lock(0, b"k"));
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        assert!(second.as_mut().poll(&mut cx).is_pending(), "held");
        drop(a);
        assert!(second.as_mut().poll(&mut cx).is_ready(), "released");
    }

    #[test]
    fn readers_share_and_a_waiting_writer_goes_next() {
        use std::future::Future;
        let locks = KeyLocks {
            stripes: (0..STRIPES).map(|_| Mutex::default()).collect(),
        };
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        let r1 = crate::block_on(locks.lock_shared(0, b"k"));
        let r2 = crate::block_on(locks.lock_shared(0, b"k"));
        let mut w = Box::pin(locks.lock(0, b"k"));
        assert!(w.as_mut().poll(&mut cx).is_pending(), "readers hold it");
        let mut r3 = Box::pin(locks.lock_shared(0, b"k"));
        assert!(r3.as_mut().poll(&mut cx).is_pending(), "behind the writer");
        drop(r1);
        assert!(w.as_mut().poll(&mut cx).is_pending(), "one reader left");
        drop(r2);
        let Poll::Ready(held) = w.as_mut().poll(&mut cx) else {
            panic!("the writer goes once the readers are done");
        };
        assert!(
            r3.as_mut().poll(&mut cx).is_pending(),
            "the writer holds it"
        );
        drop(held);
        assert!(r3.as_mut().poll(&mut cx).is_ready(), "then the reader");
        // A writer that gives up leaves no reader stuck.
        let r4 = crate::block_on(locks.lock_shared(0, b"j"));
        let mut gone = Box::pin(locks.lock(0, b"j"));
        assert!(gone.as_mut().poll(&mut cx).is_pending());
        drop(gone);
        drop(r4);
        let r5 = crate::block_on(locks.lock_shared(0, b"j"));
        let mut r6 = Box::pin(locks.lock_shared(0, b"j"));
        drop(r5);
        assert!(
            r6.as_mut().poll(&mut cx).is_ready(),
            "not stuck behind a writer that left"
        );
    }
}
