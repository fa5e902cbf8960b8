//! The background expiry sweep (Redis's active expiry): expired keys are
//! never served (every read checks), and are removed when read (lazy
//! expiry) or by this sweep, so that they stop taking space and counting
//! in DBSIZE even if no one reads them again.
//!
//! Every `interval`, if any write with an expiry came since the last pass
//! or the last pass saw keys with an expiry still to come, one thread
//! scans each database's records (sequential reads of the log; GC waits
//! meanwhile) and removes the keys found expired, each by an atomic update
//! that deletes only if the key is still expired then.
//!
//! The same thread drops the pages of paged collections that are gone
//! (deleted, overwritten, expired): a pass over a database's pages
//! namespace (`list_pages::sweep_pages`, a read of every page) once after
//! a start, then in an interval only if a write replaced or deleted the
//! record of a key that held a paged collection since the last pass
//! (`RespStore::paged_owner_changes`). A collection written whole again
//! deletes its old pages in the same commit.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nvdepot_cache::resp::{unix_now_ms, Change, RespStore};
use tracing::{debug, warn};

use super::block_on;

pub struct Sweeper {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Sweeper {
    /// Starts the sweep of `store` every `interval`.
    pub fn start(store: &Arc<RespStore>, interval: Duration) -> std::io::Result<Sweeper> {
        let stop = Arc::new(AtomicBool::new(false));
        let (weak, flag) = (Arc::downgrade(store), Arc::clone(&stop));
        let thread = std::thread::Builder::new()
            .name("serve-expiry".into())
            .spawn(move || run(weak, flag, interval))?;
        Ok(Sweeper {
            stop,
            thread: Some(thread),
        })
    }

    /// Stops the sweep (mid-pass if one runs) and waits for its thread.
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(store: Weak<RespStore>, stop: Arc<AtomicBool>, interval: Duration) {
    let (mut seen_writes, mut pending) = (0u64, 0u64);
    // Per database, `paged_owner_changes` as the last page sweep that
    // finished began (none yet: the first pass after a start sweeps, for
    // pages a collection left dead before it).
    let mut swept_at: Vec<Option<u64>> = Vec::new();
    loop {
        let start = Instant::now();
        while start.elapsed() < interval {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50).min(interval));
        }
        let Some(store) = store.upgrade() else { return };
        swept_at.resize(store.databases(), None);
        for (db, swept) in swept_at.iter_mut().enumerate() {
            let changes = store.paged_owner_changes();
            if store.page_count(db) == 0 || *swept == Some(changes) || stop.load(Ordering::Relaxed)
            {
                continue;
            }
            match block_on(super::list_pages::sweep_pages(&store, db, unix_now_ms())) {
                Ok(n) => {
                    *swept = Some(changes);
                    if n > 0 {
                        debug!("page sweep: {n} pages of dead collections dropped in db {db}");
                    }
                }
                Err(e) => warn!("page sweep: {e}"),
            }
        }
        let writes = store.expiring_writes();
        if writes != seen_writes || pending != 0 {
            seen_writes = writes;
            match sweep(&store, &stop) {
                Ok((removed, live)) => {
                    pending = live;
                    debug!(
                        "expiry sweep: {removed} expired keys removed, {live} keys still to expire"
                    );
                }
                Err(e) => warn!("expiry sweep: {e}"),
            }
        }
        // The passes' scan buffers are not kept until the next one.
        nvdepot_io::AlignedBuf::release_recycled();
    }
}

/// One pass over every database: (keys removed, live keys with an expiry).
fn sweep(store: &RespStore, stop: &AtomicBool) -> Result<(u64, u64), nvdepot_cache::Error> {
    let (mut removed, mut live) = (0, 0);
    for db in 0..store.databases() {
        let now = unix_now_ms();
        let (expired, pending) = store.expiry_scan(db, now)?;
        live += pending;
        for key in expired {
            if stop.load(Ordering::Relaxed) {
                return Ok((removed, live));
            }
            // Keeping an expired key removes it; a key rewritten since the
            // scan is live and stays.
            let (_, done) =
                block_on(store.update(db, &key, unix_now_ms(), |_| (Change::Keep, ())))?;
            removed += u64::from(done == nvdepot_cache::resp::Updated::Deleted);
        }
    }
    Ok((removed, live))
}
