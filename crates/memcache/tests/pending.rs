//! A storage whose every call waits once (as one on a device does): the
//! connection suspends in the middle of a request, resumes where it left
//! off, and answers exactly as over a storage that never waits.

use std::future::{poll_fn, Future};
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use nvdepot_memcache::testing::MemStorage;
use nvdepot_memcache::{
    Connection, Item, ItemState, Limits, ServerStats, Storage, StorageError, StoreMode,
    StoreOutcome,
};

/// [`MemStorage`], but each call returns `Pending` once before answering.
#[derive(Default)]
struct Slow {
    inner: MemStorage,
}

/// `value`, after one `Pending` (waking its waker, as an IO completion
/// would).
async fn after_a_wait<T>(value: T) -> T {
    let mut waited = false;
    poll_fn(|cx| {
        if waited {
            Poll::Ready(())
        } else {
            waited = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    })
    .await;
    value
}

impl Storage for Slow {
    fn get(&self, key: &[u8]) -> impl Future<Output = Result<Option<Item>, StorageError>> {
        after_a_wait(self.inner.get_now(key))
    }
    fn store_item(
        &self,
        key: &[u8],
        value: &[u8],
        flags: u32,
        exptime: u32,
        state: ItemState,
        mode: StoreMode,
    ) -> impl Future<Output = Result<StoreOutcome, StorageError>> {
        after_a_wait(
            self.inner
                .store_item_now(key, value, flags, exptime, state, mode),
        )
    }
    fn delete(
        &self,
        key: &[u8],
        cas: Option<u64>,
    ) -> impl Future<Output = Result<StoreOutcome, StorageError>> {
        after_a_wait(self.inner.delete_now(key, cas))
    }
    fn flush_all(&self) -> Result<(), StorageError> {
        self.inner.flush_all()
    }
    fn now(&self) -> u32 {
        self.inner.now()
    }
    fn stats(&self) -> Vec<(String, String)> {
        self.inner.stats()
    }
}

/// Polls `feed` until it completes; returns the output and the number of
/// times it was pending.
fn feed_waiting<S: Storage>(conn: &mut Connection<S>, input: &[u8]) -> (Vec<u8>, usize) {
    let mut out = Vec::new();
    let mut pending = 0;
    {
        let mut fut = pin!(conn.feed(input, &mut out));
        let mut cx = Context::from_waker(Waker::noop());
        loop {
            match fut.as_mut().poll(&mut cx) {
                Poll::Ready(fed) => {
                    assert_eq!(fed.consumed, input.len());
                    break;
                }
                Poll::Pending => pending += 1,
            }
        }
    }
    (out, pending)
}

const SCRIPT: &[u8] = b"set a 0 0 3\r\nabc\r\nget a b\r\nincr n 1\r\n\
set n 0 0 1\r\n5\r\nincr n 10\r\nappend a 0 0 2\r\nde\r\ngets a\r\nadd a 0 0 1\r\nx\r\n\
ms m 2 T0\r\nhi\r\nmg m v k\r\nma n D2 v\r\nmd m q\r\nmn\r\ntouch a 100\r\ngat 0 a\r\n\
delete a\r\ndelete a\r\nget a n\r\n";

#[test]
fn waiting_storage_answers_as_a_ready_one() {
    let stats = Arc::new(ServerStats::default());
    let mut ready = Connection::new(
        Arc::new(MemStorage::new()),
        stats.clone(),
        Limits::default(),
    );
    let mut want = Vec::new();
    let fed = ready.feed_ready(SCRIPT, &mut want);
    assert_eq!(fed.consumed, SCRIPT.len());

    let mut slow = Connection::new(Arc::new(Slow::default()), stats, Limits::default());
    let (got, pending) = feed_waiting(&mut slow, SCRIPT);
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(&want)
    );
    assert!(pending >= 20, "suspended only {pending} times");
}

#[test]
#[should_panic(expected = "not ready")]
fn feed_ready_refuses_a_waiting_storage() {
    let stats = Arc::new(ServerStats::default());
    let mut slow = Connection::new(Arc::new(Slow::default()), stats, Limits::default());
    slow.feed_ready(b"get a\r\n", &mut Vec::new());
}

/// A multi-key get has all its reads in flight at once: over a storage
/// whose every read waits once, the whole line waits once, and answers as
/// over a ready storage (order, misses, expired items, a key over the limit).
#[test]
fn multi_key_get_reads_keys_together() {
    let stats = Arc::new(ServerStats::default());
    let setup =
        b"set a 1 0 1\r\nA\r\nset c 3 0 1\r\nC\r\nset old 0 -1 1\r\nO\r\nset e 5 0 1\r\nE\r\n";
    let long = "k".repeat(251);
    let lines: Vec<Vec<u8>> = vec![
        b"get a b c old e\r\n".to_vec(),
        b"gets e a a\r\n".to_vec(),
        format!("get a {long} c\r\n").into_bytes(),
    ];
    let mut ready = Connection::new(
        Arc::new(MemStorage::new()),
        stats.clone(),
        Limits::default(),
    );
    ready.feed_ready(setup, &mut Vec::new());
    let mut slow = Connection::new(Arc::new(Slow::default()), stats, Limits::default());
    feed_waiting(&mut slow, setup);
    for line in &lines {
        let mut want = Vec::new();
        ready.feed_ready(line, &mut want);
        let (got, pending) = feed_waiting(&mut slow, line);
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&want)
        );
        // One wait for the reads together; the expired item's reclaiming
        // delete waits once more.
        let expired = line.windows(4).any(|w| w == b" old");
        assert_eq!(pending, 1 + usize::from(expired), "{line:?}");
    }
}
