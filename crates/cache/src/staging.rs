//! Staged writes: the writes of a Redis script or `MULTI`/`EXEC` kept in
//! DRAM while it runs and written at its end as one crash-atomic engine
//! batch (docs/FORMAT.md "Batches"), so that after a crash all of them
//! are there or none — as Redis's AOF holds a script's effects as one
//! `MULTI`/`EXEC`, which a truncated file loses whole.
//!
//! A [`Staging`] is made current for the code that runs the script's
//! commands ([`stage`], [`stage_async`]); while it is, every
//! [`CacheStore`] operation of that code reads through it (its own
//! writes first, then the engine) and writes into it instead of the
//! engine. [`CacheStore::commit_staged`] then writes what it holds: one
//! batch when the records fit one segment, else key by key (a crash in
//! the middle may then keep some of them; docs/REDIS.md says so).
//!
//! Isolation is the caller's: a staging is only sound while nothing else
//! writes the keys it holds (the Redis face runs scripts and `EXEC`
//! holding the exclusive pass of its gate). Staged writes get versions
//! of their own (from 2^62 up, never an engine sequence number), so the
//! face's version guards work within the staging; the batch gives the
//! records their real versions.
//!
//! The current staging is a thread-local, set only while the staged code
//! runs or its future is polled: other tasks polled on the same thread
//! between those polls (a worker's other connections) write to the engine
//! as always, and code that polls other tasks from inside staged code
//! (a worker's ring driven by a script's call) hides it with [`hidden`].

use std::cell::RefCell;
use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use nvdepot_engine::{self as engine, Namespace};
use parking_lot::Mutex;

use crate::envelope::{self, Item, ENVELOPE_BYTES};
use crate::store::{CacheStore, DramWrite};
use crate::Error;

/// Versions of staged writes: far above any engine sequence number (one
/// per record written: 2^62 is centuries of writes at any device's pace).
static NEXT_VERSION: AtomicU64 = AtomicU64::new(1 << 62);

thread_local! {
    static CURRENT: RefCell<Option<Arc<Staging>>> = const { RefCell::new(None) };
}

/// One staged write: the record value to write (envelope and data), and
/// its staged version; `None` deletes the key.
type Staged = Option<(Vec<u8>, u64)>;

/// The writes of one script or transaction, not yet in the engine.
#[derive(Default)]
pub struct Staging {
    /// Per namespace, per key (looked up by `&[u8]`, no copy of the key).
    writes: Mutex<HashMap<Namespace, HashMap<Vec<u8>, Staged>>>,
    /// The staging this one is a scratch layer over ([`Staging::over`]):
    /// read through, never written.
    parent: Option<Arc<Staging>>,
    /// What to do once the staged writes are visible
    /// ([`Staging::on_committed`]).
    committed: Mutex<Vec<Committed>>,
}

/// A call [`CacheStore::commit_staged`] makes once the writes are visible.
type Committed = Box<dyn FnOnce() + Send>;

impl Staging {
    /// A scratch staging over the current one, if any: reads see the
    /// current staging's writes, writes stay in the scratch (dropped
    /// unless committed). For a step whose effect on the store is none
    /// but which runs commands to learn its reply (LMOVE of a one-element
    /// list onto itself).
    pub fn scratch() -> Staging {
        Staging {
            writes: Mutex::default(),
            parent: current(),
            committed: Mutex::default(),
        }
    }

    /// Whether nothing is staged.
    pub fn is_empty(&self) -> bool {
        self.writes.lock().is_empty()
    }

    /// The staged state of `key`: `None` if it is not staged, else the
    /// item (`Some(None)`: staged as deleted).
    pub(crate) fn get(&self, ns: Namespace, key: &[u8]) -> Option<Option<Item>> {
        let own = {
            let writes = self.writes.lock();
            // A script that has not written: no hashing at all.
            let staged = (!writes.is_empty())
                .then(|| writes.get(&ns).and_then(|w| w.get(key)))
                .flatten();
            staged.map(|staged| {
                staged.as_ref().map(|(raw, version)| {
                    envelope::decode(raw.clone(), *version)
                        .expect("staged records are encoded here")
                })
            })
        };
        own.or_else(|| self.parent.as_ref().and_then(|p| p.get(ns, key)))
    }

    fn stage(&self, ns: Namespace, key: &[u8], staged: Staged) {
        let mut writes = self.writes.lock();
        let of_ns = writes.entry(ns).or_default();
        match of_ns.get_mut(key) {
            Some(s) => *s = staged,
            None => drop(of_ns.insert(key.to_vec(), staged)),
        }
    }

    /// Stages a put of the record value `raw`; gives its staged version.
    pub(crate) fn put(&self, ns: Namespace, key: &[u8], raw: Vec<u8>) -> u64 {
        debug_assert!(raw.len() >= ENVELOPE_BYTES);
        let version = NEXT_VERSION.fetch_add(1, Ordering::Relaxed);
        self.stage(ns, key, Some((raw, version)));
        version
    }

    /// Stages a delete of `key`.
    pub(crate) fn delete(&self, ns: Namespace, key: &[u8]) {
        self.stage(ns, key, None);
    }

    /// Has [`CacheStore::commit_staged`] call `f` once the writes are
    /// visible (or failed: they may be partly), for what must follow the
    /// writes themselves, not their staging. Dropped with a staging never
    /// committed.
    pub(crate) fn on_committed(&self, f: impl FnOnce() + Send + 'static) {
        self.committed.lock().push(Box::new(f));
    }

    /// Drops what is staged in `ns` (the namespace is being cleared).
    pub(crate) fn forget(&self, ns: Namespace) {
        self.writes.lock().remove(&ns);
    }

    /// The staged writes of `ns`: (key, record value or `None`).
    pub(crate) fn of_namespace(&self, ns: Namespace) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
        let writes = self.writes.lock();
        let Some(of_ns) = writes.get(&ns) else {
            return Vec::new();
        };
        of_ns
            .iter()
            .map(|(k, s)| (k.clone(), s.as_ref().map(|(raw, _)| raw.clone())))
            .collect()
    }

    /// Takes everything staged, leaving the staging empty.
    fn take(&self) -> Vec<((Namespace, Vec<u8>), Staged)> {
        let writes = std::mem::take(&mut *self.writes.lock());
        writes
            .into_iter()
            .flat_map(|(ns, of_ns)| of_ns.into_iter().map(move |(k, s)| ((ns, k), s)))
            .collect()
    }
}

/// The staging current on this thread, if any.
pub fn current() -> Option<Arc<Staging>> {
    CURRENT.with(|c| c.borrow().clone())
}

/// Restores the previous current staging when dropped (also on unwind).
struct Restore(Option<Arc<Staging>>);

impl Drop for Restore {
    fn drop(&mut self) {
        let previous = self.0.take();
        CURRENT.with(|c| *c.borrow_mut() = previous);
    }
}

fn make_current(staging: Option<Arc<Staging>>) -> Restore {
    Restore(CURRENT.with(|c| c.replace(staging)))
}

/// Runs `f` with `staging` current on this thread.
pub fn stage<R>(staging: &Arc<Staging>, f: impl FnOnce() -> R) -> R {
    let _restore = make_current(Some(Arc::clone(staging)));
    f()
}

/// Runs `f` with no staging current (it polls other tasks, whose writes
/// are their own).
pub fn hidden<R>(f: impl FnOnce() -> R) -> R {
    let _restore = make_current(None);
    f()
}

/// [`stage`] for a future: `staging` is current while the future is
/// polled, and only then.
pub fn stage_async<F: Future>(staging: &Arc<Staging>, future: F) -> StageAsync<'_, F> {
    StageAsync { staging, future }
}

pin_project_lite::pin_project! {
    /// The future of [`stage_async`]: a struct, not an `async fn`, which
    /// would hold the wrapped future twice (its argument, then pinned).
    pub struct StageAsync<'a, F> {
        staging: &'a Arc<Staging>,
        #[pin]
        future: F,
    }
}

impl<F: Future> Future for StageAsync<'_, F> {
    type Output = F::Output;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<F::Output> {
        let this = self.project();
        let future = this.future;
        stage(this.staging, || future.poll(cx))
    }
}

impl CacheStore {
    /// [`CacheStore::update`] inside a staging: the decision on the staged
    /// item or the engine's, and its write staged.
    pub(crate) async fn update_staged<R>(
        &self,
        staging: &Staging,
        ns: Namespace,
        key: &[u8],
        decide: impl FnOnce(Option<Item>) -> (crate::Change, R),
    ) -> Result<(R, crate::Updated), Error> {
        let item = self.get_in(staging, ns, key).await?;
        let present = item.is_some();
        let expired = item
            .as_ref()
            .is_some_and(|it| !it.envelope.is_live(crate::unix_now()));
        let (change, out) = decide(item);
        let done = match change {
            crate::Change::Keep => crate::Updated::Kept,
            // As the engine's: deleting an absent key writes nothing.
            crate::Change::Delete if !present => crate::Updated::Kept,
            crate::Change::Delete => {
                staging.delete(ns, key);
                if expired {
                    self.expired_reclaimed.fetch_add(1, Ordering::Relaxed);
                }
                crate::Updated::Deleted
            }
            crate::Change::Put(new) => {
                let kept = new.kept_cas.unwrap_or(0);
                let version =
                    staging.put(ns, key, envelope::encode(&new.value, new.envelope, kept));
                crate::Updated::Stored {
                    cas: new.kept_cas.unwrap_or(version),
                }
            }
        };
        Ok((out, done))
    }

    /// The item under `key` as the code inside `staging` sees it: the
    /// staged write's, else the engine's (`None`: absent).
    pub(crate) async fn get_in(
        &self,
        staging: &Staging,
        ns: Namespace,
        key: &[u8],
    ) -> Result<Option<Item>, Error> {
        match staging.get(ns, key) {
            Some(staged) => Ok(staged),
            None => self.get_unstaged(ns, key).await,
        }
    }

    /// The version of `key` as the code inside `staging` sees it.
    pub(crate) async fn staged_version(
        &self,
        staging: &Staging,
        ns: Namespace,
        key: &[u8],
    ) -> Result<Option<u64>, Error> {
        Ok(self.get_in(staging, ns, key).await?.map(|it| it.cas))
    }

    /// Items of `ns` as the code inside `staging` sees them: the engine's
    /// count, with each staged key counted as staged (a blocking lookup of
    /// each staged key of `ns`: for DBSIZE, rare inside a script).
    pub(crate) fn staged_items(&self, staging: &Staging, ns: Namespace) -> u64 {
        let mut count = self.engine().count(ns) as i64;
        for (key, staged) in staging.of_namespace(ns) {
            let stored = matches!(self.engine().get_versioned(ns, &key), Ok(Some(_)));
            count += i64::from(staged.is_some()) - i64::from(stored);
        }
        count.max(0) as u64
    }

    /// Writes everything `staging` holds, leaving it empty: one
    /// crash-atomic batch over every namespace when the records fit one
    /// segment (each value one record), else key by key (a single write
    /// is a plain record, atomic by itself). Returns when the
    /// writes are durable, or, inside `nvdepot_engine::defer_durability`,
    /// once reads see them (the caller then owes the wait). The DRAM tier
    /// caches the items written.
    pub async fn commit_staged(&self, staging: &Staging) -> Result<(), Error> {
        let writes = staging.take();
        let committed = std::mem::take(&mut *staging.committed.lock());
        let done = self.write_staged(writes).await;
        for f in committed {
            f();
        }
        done
    }

    async fn write_staged(&self, writes: Vec<((Namespace, Vec<u8>), Staged)>) -> Result<(), Error> {
        if writes.is_empty() {
            return Ok(());
        }
        let lens = writes.iter().map(|((_, key), staged)| {
            let data = staged
                .as_ref()
                .map_or(0, |(raw, _)| raw.len() - ENVELOPE_BYTES);
            (key.len(), data)
        });
        // One write is crash-atomic by itself: a plain record, no batch
        // frame (most scripts write one key).
        if writes.len() > 1 && self.batch_fits(lens) {
            let ops: Vec<(Namespace, engine::WriteOp<'_>)> = writes
                .iter()
                .map(|((ns, key), staged)| match staged {
                    Some((raw, _)) => (*ns, engine::WriteOp::Put { key, value: raw }),
                    None => (*ns, engine::WriteOp::Delete { key }),
                })
                .collect();
            let done = self
                .write_batch_direct(&ops, &[], None, None, || {})
                .await?;
            debug_assert!(done, "an unguarded batch is always applied");
            return Ok(());
        }
        // One write, or too many for one batch: key by key, in no
        // particular order.
        for ((ns, key), staged) in &writes {
            match staged {
                Some((raw, _)) => {
                    self.put_raw(*ns, key, raw).await?;
                }
                None => {
                    let write = DramWrite::begin(&self.dram, ns.id(), key);
                    let gone = self.engine().delete_versioned_async(*ns, key, None).await;
                    write.end(None);
                    gone?;
                }
            }
        }
        Ok(())
    }
}
