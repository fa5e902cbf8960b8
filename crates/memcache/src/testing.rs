//! An in-memory [`Storage`] for tests (this crate's and the server's):
//! a `HashMap` behind a `Mutex`, a clock the test drives, and a switch
//! that makes every call fail. Its futures are always ready, so
//! [`crate::Connection::feed_ready`] drives it without an executor; its
//! `update` runs under the map's lock, so it is atomic as the trait asks.
//! [`WaitingStorage`] is the same store behaving as one on a device: every
//! call waits once.

use std::collections::HashMap;
use std::future::{poll_fn, ready, Future};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Mutex;
use std::task::Poll;

use crate::{
    Access, Change, Item, ItemState, Storage, StorageError, StoreMode, StoreOutcome, Updated,
};

/// The clock's starting time: 2023-11-14, well past the 30-day boundary
/// between relative and absolute exptimes.
pub const START_TIME: u32 = 1_700_000_000;

#[derive(Default)]
struct Inner {
    map: HashMap<Vec<u8>, Item>,
    /// Last CAS unique handed out.
    cas: u64,
    /// Per key: fetched since written, and the last access time.
    access: HashMap<Vec<u8>, (bool, u32)>,
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
}

/// The synchronous operations; the [`Storage`] methods wrap them in ready
/// futures (a test storage that blocks or fails on purpose can call them).
impl MemStorage {
    /// [`Storage::get`], answered at once.
    pub fn get_now(&self, key: &[u8]) -> Result<Option<Item>, StorageError> {
        self.check()?;
        Ok(self.inner.lock().unwrap().map.get(key).cloned())
    }

    /// [`Storage::set`], answered at once.
    pub fn set_now(
        &self,
        key: &[u8],
        value: &[u8],
        flags: u32,
        exptime: u32,
        state: ItemState,
    ) -> Result<u64, StorageError> {
        self.check()?;
        let now = self.now();
        let mut inner = self.inner.lock().unwrap();
        inner.cas += 1;
        let cas = inner.cas;
        inner.access.insert(key.to_vec(), (false, now));
        let item = Item {
            value: value.to_vec(),
            flags,
            exptime,
            cas,
            state,
        };
        inner.map.insert(key.to_vec(), item);
        Ok(cas)
    }

    /// [`Storage::update`], answered at once: `decide` runs under the
    /// map's lock, so the update is atomic.
    pub fn update_now<R>(
        &self,
        key: &[u8],
        mut decide: impl FnMut(Option<&Item>) -> (Change, R),
    ) -> Result<(R, Updated), StorageError> {
        self.check()?;
        let now = self.now();
        let mut inner = self.inner.lock().unwrap();
        let (change, out) = decide(inner.map.get(key));
        let done = match change {
            Change::Keep => Updated::Kept,
            Change::Delete => match inner.map.remove(key) {
                Some(_) => Updated::Deleted,
                None => Updated::Kept,
            },
            Change::Write(new) => {
                let cas = new.kept_cas.unwrap_or_else(|| {
                    inner.cas += 1;
                    inner.cas
                });
                if !new.in_place {
                    inner.access.insert(key.to_vec(), (false, now));
                }
                let item = Item {
                    value: new.value,
                    flags: new.flags,
                    exptime: new.exptime,
                    cas,
                    state: new.state,
                };
                inner.map.insert(key.to_vec(), item);
                Updated::Stored { cas }
            }
        };
        Ok((out, done))
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
        crate::poll_ready(self.store_item(key, value, flags, exptime, state, mode))
    }

    /// [`Storage::delete`], answered at once.
    pub fn delete_now(&self, key: &[u8], cas: Option<u64>) -> Result<StoreOutcome, StorageError> {
        crate::poll_ready(self.delete(key, cas))
    }
}

impl Storage for MemStorage {
    fn get(&self, key: &[u8]) -> impl Future<Output = Result<Option<Item>, StorageError>> {
        ready(self.get_now(key))
    }

    fn set(
        &self,
        key: &[u8],
        value: &[u8],
        flags: u32,
        exptime: u32,
        state: ItemState,
    ) -> impl Future<Output = Result<u64, StorageError>> {
        ready(self.set_now(key, value, flags, exptime, state))
    }

    fn update<R>(
        &self,
        key: &[u8],
        decide: impl FnMut(Option<&Item>) -> (Change, R),
    ) -> impl Future<Output = Result<(R, Updated), StorageError>> {
        ready(self.update_now(key, decide))
    }

    fn flush_all(&self) -> Result<(), StorageError> {
        self.check()?;
        self.inner.lock().unwrap().map.clear();
        Ok(())
    }

    fn now(&self) -> u32 {
        self.clock.load(Ordering::Relaxed)
    }

    fn access(&self, key: &[u8]) -> Access {
        let now = self.now();
        match self.inner.lock().unwrap().access.get(key) {
            Some(&(fetched, at)) => Access {
                fetched,
                idle_secs: now.saturating_sub(at),
            },
            None => Access::default(),
        }
    }

    fn fetched(&self, key: &[u8]) {
        let now = self.now();
        let mut inner = self.inner.lock().unwrap();
        let e = inner.access.entry(key.to_vec()).or_insert((false, now));
        if e.0 {
            e.1 = now;
        }
        e.0 = true;
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

/// [`MemStorage`], but every `get`, `set` and `update` returns
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

    fn set(
        &self,
        key: &[u8],
        value: &[u8],
        flags: u32,
        exptime: u32,
        state: ItemState,
    ) -> impl Future<Output = Result<u64, StorageError>> {
        after_a_wait(self.inner.set_now(key, value, flags, exptime, state))
    }

    fn update<R>(
        &self,
        key: &[u8],
        decide: impl FnMut(Option<&Item>) -> (Change, R),
    ) -> impl Future<Output = Result<(R, Updated), StorageError>> {
        // Waits before the update, as a device read would.
        let inner = &self.inner;
        async move {
            after_a_wait(()).await;
            inner.update_now(key, decide)
        }
    }

    fn flush_all(&self) -> Result<(), StorageError> {
        self.inner.flush_all()
    }

    fn now(&self) -> u32 {
        self.inner.now()
    }

    fn access(&self, key: &[u8]) -> Access {
        self.inner.access(key)
    }

    fn fetched(&self, key: &[u8]) {
        self.inner.fetched(key)
    }

    fn stats(&self) -> Vec<(String, String)> {
        self.inner.stats()
    }
}
