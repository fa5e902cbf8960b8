//! The background expiry sweep (Redis's active expiry): expired keys are
//! never served (every read checks), and are removed when read (lazy
//! expiry) or by this sweep, so that they stop taking space and counting
//! in DBSIZE even if no one reads them again.
//!
//! Every `interval`, if any write with an expiry came since the last pass
//! or the last pass saw keys with an expiry still to come, one thread
//! scans each database's records (sequential reads of the log; GC waits
//! meanwhile) and removes the keys found expired, each by an atomic update
//! that deletes only if the key is still expired then. A pass that took
//! more than a quarter of the interval stretches the rest before the next
//! to three times its length ([`rest_after`]), so the sweep keeps at most
//! a quarter of the time however large the store.
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

/// The share of the time the sweep may spend in its passes: at most a
/// quarter, as Redis's active expiry takes at most 25 % of its CPU
/// (`ACTIVE_EXPIRE_CYCLE_SLOW_TIME_PERC`).
const BUSY_PERCENT_MAX: u32 = 25;

/// How long the sweep rests after a pass that took `spent`: the
/// interval, or longer once passes take more than a quarter of it, so
/// that a store too large to read in a fraction of the interval is not
/// read end to end over and over (a pass of 60 s rests 180 s).
fn rest_after(interval: Duration, spent: Duration) -> Duration {
    let busy = BUSY_PERCENT_MAX;
    interval.max(spent * (100 - busy) / busy)
}

fn run(store: Weak<RespStore>, stop: Arc<AtomicBool>, interval: Duration) {
    let (mut seen_writes, mut pending) = (0u64, 0u64);
    // Per database, `paged_owner_changes` as the last page sweep that
    // finished began (none yet: the first pass after a start sweeps, for
    // pages a collection left dead before it).
    let mut swept_at: Vec<Option<u64>> = Vec::new();
    let mut rest = interval;
    loop {
        let start = Instant::now();
        while start.elapsed() < rest {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50).min(rest));
        }
        let Some(store) = store.upgrade() else { return };
        let began = Instant::now();
        let mut passed = false;
        swept_at.resize(store.databases(), None);
        for (db, swept) in swept_at.iter_mut().enumerate() {
            let changes = store.paged_owner_changes();
            if store.page_count(db) == 0 || *swept == Some(changes) || stop.load(Ordering::Relaxed)
            {
                continue;
            }
            passed = true;
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
            passed = true;
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
        // The passes' scan buffers are not kept until the next one, nor
        // the memory a pass freed: this thread sleeps until the next, and
        // the allocator returns a sleeping thread's freed pages only when
        // asked (a page sweep of the 1/10 big scenario's 4 M elements left
        // ~9 MiB resident otherwise, bench/results/resp-types-big-allocator.md).
        nvdepot_io::AlignedBuf::release_recycled();
        if passed {
            nvdepot_server::trim_allocator();
        }
        let spent = began.elapsed();
        rest = rest_after(interval, spent);
        if rest > interval {
            debug!("sweep: a pass took {spent:?}, the next comes in {rest:?}");
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_pass_rests_three_times_its_length() {
        let minute = Duration::from_secs(60);
        assert_eq!(rest_after(minute, Duration::from_millis(5)), minute);
        assert_eq!(rest_after(minute, Duration::from_secs(20)), minute);
        assert_eq!(
            rest_after(minute, Duration::from_secs(30)),
            Duration::from_secs(90)
        );
        assert_eq!(
            rest_after(minute, Duration::from_secs(100)),
            Duration::from_secs(300)
        );
    }
}
