//! An open store shared by threads and closed by one of them.

use std::path::Path;
use std::sync::Arc;

use nvdepot_engine::Store;
use parking_lot::RwLock;

use crate::code::{Code, Failure};
use crate::options::Config;
use crate::value_cache::ValueCache;

/// An open store. Operations borrow it for their duration (a read lock,
/// uncontended unless a close is waiting); cursors hold a share of it.
pub struct Handle {
    store: RwLock<Option<Arc<Store>>>,
    /// The DRAM value cache, when `value_cache_bytes` is set.
    pub(crate) cache: Option<ValueCache>,
}

impl Handle {
    /// Opens (or, with `create_bytes` set, creates) the store at `path`.
    pub fn open(path: &Path, config: &Config) -> Result<Handle, Failure> {
        let store = Store::open(path, &config.engine)?;
        Ok(Handle {
            store: RwLock::new(Some(Arc::new(store))),
            cache: (config.value_cache_bytes > 0)
                .then(|| ValueCache::new(config.value_cache_bytes)),
        })
    }

    /// Runs `f` on the store, unless it was closed. For reads and
    /// administration only: writes of keys go through the data operations
    /// (`ops.rs`), which keep the value cache current.
    pub fn with<R>(
        &self,
        f: impl FnOnce(&Store) -> Result<R, nvdepot_engine::Error>,
    ) -> Result<R, Failure> {
        let guard = self.store.read();
        let store = guard.as_ref().ok_or_else(closed)?;
        Ok(f(store)?)
    }

    /// A share of the store for a cursor; the store cannot close while it
    /// lives.
    pub fn share(&self) -> Result<Arc<Store>, Failure> {
        self.store.read().clone().ok_or_else(closed)
    }

    /// A cursor over namespace id `ns` (`None`: every namespace) from
    /// `at`; `NoSuchNamespace` now, not an empty walk, for an id that
    /// names no namespace.
    pub fn cursor(&self, ns: Option<u32>, at: u64) -> Result<crate::Cursor, Failure> {
        let ns = ns
            .map(|id| self.with(|s| crate::existing(s, id)))
            .transpose()?;
        Ok(crate::Cursor::new(self.share()?, ns, at))
    }

    /// Writes everything out, saves the index checkpoint (the next open is
    /// fast) and closes; later calls fail with [`Code::Closed`]. Fails
    /// with [`Code::Busy`], the store still open, while cursors hold it.
    pub fn close(&self) -> Result<(), Failure> {
        let mut guard = self.store.write();
        let Some(store) = guard.take() else {
            return Ok(());
        };
        match Arc::try_unwrap(store) {
            Ok(store) => Ok(store.close()?),
            Err(shared) => {
                let cursors = Arc::strong_count(&shared) - 1;
                *guard = Some(shared);
                Err(Failure::new(
                    Code::Busy,
                    format!("cannot close the store: {cursors} iterator(s) still use it; free them first"),
                ))
            }
        }
    }

    /// Whether [`Handle::close`] succeeded.
    pub fn is_closed(&self) -> bool {
        self.store.read().is_none()
    }
}

fn closed() -> Failure {
    Failure::new(Code::Closed, "the store is closed")
}
