//! An in-memory [`Storage`] for tests (this crate's and the server's):
//! a `HashMap` behind a `Mutex`, a clock the test drives, and a switch
//! that makes every call fail. Its futures are always ready, so
//! [`crate::Connection::feed_ready`] drives it without an executor.
//! [`WaitingStorage`] is the same store behaving as one on a device: every
//! call waits once.

use std::collections::HashMap;
use std::future::{poll_fn, ready, Future};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Mutex;
use std::task::Poll;

use crate::{Item, ItemState, Storage, StorageError, StoreMode, StoreOutcome};

/// The clock's starting time: 2023-11-14, well past the 30-day boundary
/// between relative and absolute exptimes.
pub const START_TIME: u32 = 1_700_000_000;

#[derive(Default)]
struct Inner {
    map: HashMap<Vec<u8>, Item>,
    /// Last CAS unique handed out.
    cas: u64,
}

/// In-memory storage with a settable clock. Expired items are kept until
/// overwritten or deleted (as a real store may), but count as absent for
/// `Add`, `Replace`, `Cas` and `delete`.
pub struct MemStorage {
    inner: Mutex<Inner>,
    clock: AtomicU32,
    failing: AtomicBool,
}

impl Default for MemStorage {
    fn default() -> Self {
        MemStorage::new()
    }
}

impl MemStorage {
    /// Empty, with the clock at [`START_TIME`].
    pub fn new() -> MemStorage {
        MemStorage {
            inner: Mutex::new(Inner::default()),
            clock: AtomicU32::new(START_TIME),
            failing: AtomicBool::new(false),
        }
    }

    /// Sets the clock.
    pub fn set_time(&self, now: u32) {
        self.clock.store(now, Ordering::Relaxed);
    }

    /// Moves the clock forward.
    pub fn advance(&self, secs: u32) {
        self.clock.fetch_add(secs, Ordering::Relaxed);
    }

    /// Makes every later call fail (`true`) or work again (`false`).
    pub fn set_failing(&self, failing: bool) {
        self.failing.store(failing, Ordering::Relaxed);
    }

    /// Every stored item, expired ones included.
    pub fn items(&self) -> Vec<(Vec<u8>, Item)> {
        let inner = self.inner.lock().unwrap();
        inner
            .map
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// The item under `key`, expired or not.
    pub fn peek(&self, key: &[u8]) -> Option<Item> {
        self.inner.lock().unwrap().map.get(key).cloned()
    }

    fn check(&self) -> Result<(), StorageError> {
        if self.failing.load(Ordering::Relaxed) {
            Err(StorageError("injected failure".into()))
        } else {
            Ok(())
        }
    }

    fn live<'a>(&self, inner: &'a Inner, key: &[u8]) -> Option<&'a Item> {
        let now = self.now();
        inner
            .map
            .get(key)
            .filter(|it| it.exptime == 0 || it.exptime > now)
    }
}

/// The synchronous operations; the [`Storage`] methods wrap them in ready
/// futures (a test storage that blocks or fails on purpose can call them).
impl MemStorage {
    /// [`Storage::get`], answered at once.
    pub fn get_now(&self, key: &[u8]) -> Result<Option<Item>, StorageError> {
        self.check()?;
        Ok(self.inner.lock().unwrap().map.get(key).cloned())
    }

    /// [`Storage::store`], answered at once.
    pub fn store_now(
        &self,
        key: &[u8],
        value: &[u8],
        flags: u32,
        exptime: u32,
        mode: StoreMode,
    ) -> Result<StoreOutcome, StorageError> {
        self.store_item_now(key, value, flags, exptime, ItemState::default(), mode)
    }

    /// [`Storage::store_item`], answered at once.
    pub fn store_item_now(
        &self,
        key: &[u8],
        value: &[u8],
        flags: u32,
        exptime: u32,
        state: ItemState,
        mode: StoreMode,
    ) -> Result<StoreOutcome, StorageError> {
        self.check()?;
        let mut inner = self.inner.lock().unwrap();
        let current = self.live(&inner, key).map(|it| (it.cas, it.state));
        if let Err(outcome) = mode.admits(current) {
            return Ok(outcome);
        }
        let cas = mode.kept_cas().unwrap_or_else(|| {
            inner.cas += 1;
            inner.cas
        });
        let item = Item {
            value: value.to_vec(),
            flags,
            exptime,
            cas,
            state,
        };
        inner.map.insert(key.to_vec(), item);
        Ok(StoreOutcome::Stored { cas })
    }

    /// [`Storage::delete`], answered at once.
    pub fn delete_now(&self, key: &[u8], cas: Option<u64>) -> Result<StoreOutcome, StorageError> {
        self.check()?;
        let mut inner = self.inner.lock().unwrap();
        let Some(it) = inner.map.get(key) else {
            return Ok(StoreOutcome::NotFound);
        };
        if cas.is_some_and(|c| c != it.cas) {
            return Ok(StoreOutcome::Exists);
        }
        let it = inner.map.remove(key).expect("present");
        Ok(StoreOutcome::Stored { cas: it.cas })
    }
}

impl Storage for MemStorage {
    fn get(&self, key: &[u8]) -> impl Future<Output = Result<Option<Item>, StorageError>> {
        ready(self.get_now(key))
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
        ready(self.store_item_now(key, value, flags, exptime, state, mode))
    }

    fn delete(
        &self,
        key: &[u8],
        cas: Option<u64>,
    ) -> impl Future<Output = Result<StoreOutcome, StorageError>> {
        ready(self.delete_now(key, cas))
    }

    fn flush_all(&self) -> Result<(), StorageError> {
        self.check()?;
        self.inner.lock().unwrap().map.clear();
        Ok(())
    }

    fn now(&self) -> u32 {
        self.clock.load(Ordering::Relaxed)
    }

    fn stats(&self) -> Vec<(String, String)> {
        let inner = self.inner.lock().unwrap();
        let bytes: usize = inner.map.iter().map(|(k, v)| k.len() + v.value.len()).sum();
        vec![
            ("curr_items".into(), inner.map.len().to_string()),
            ("bytes".into(), bytes.to_string()),
        ]
    }
}

/// [`MemStorage`], but every `get`, `store_item` and `delete` returns
/// `Pending` once (waking its waker, as an IO completion would) before
/// answering, so every request makes its connection wait. Inside a
/// runtime that is one yield to the other tasks.
#[derive(Default)]
pub struct WaitingStorage {
    pub inner: MemStorage,
}

/// `value`, after one `Pending`.
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

impl Storage for WaitingStorage {
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
