//! The stripe locks and the group commit compiled over shuttle's
//! primitives, and model-checked (tests only).
//!
//! `stripes.rs` is the real file, compiled a second time with `sync` bound
//! to `sync_shuttle.rs`. The update step (`update.rs`) is modelled around
//! it: take the key's stripe, read the record (a device read: a suspension
//! point), decide, write and wait for the group commit (more suspension
//! points), point the index at the new record, unlock. Tasks that park on
//! the stripe and a thread that blocks on it run together; shuttle
//! explores their interleavings and reports a deadlock (a lost wakeup) or
//! a failed assertion (two updates that saw the same version: a lost
//! update).
#![allow(dead_code)]

#[path = "sync_shuttle.rs"]
pub(crate) mod sync;

#[allow(clippy::duplicate_mod)]
#[path = "stripes.rs"]
pub(crate) mod stripes;

#[allow(clippy::duplicate_mod)]
#[path = "group_commit.rs"]
pub(crate) mod group_commit;

/// The group commit (`group_commit.rs`, the real file) over a modelled
/// log: writers append (taking the next log position) and wait until it
/// is durable, as blocking threads and as tasks parked on one runtime
/// thread; the leader's write and flush are suspension points, and one
/// of them may fail. Shuttle explores the interleavings: a lost wakeup
/// shows as a deadlock; a wait that returns `Ok` before its position is on
/// the modelled device, or succeeds after the failure without a write
/// covering it, fails an assertion.
#[cfg(test)]
mod group_commit_model {
    use std::sync::atomic::Ordering;
    use std::sync::Arc;

    use shuttle::future::{block_on, spawn_local as spawn, yield_now};
    use shuttle::sync::atomic::AtomicU64;

    use super::group_commit::{wait_durable, CommitState, Log};
    use super::sync::{Condvar, Mutex};
    use crate::aio::Mode;
    use crate::error::{Error, Result};

    #[derive(Default)]
    struct State {
        commit: CommitState<(u64, u64)>,
        appended: u64,
        /// Batches taken by leaders, in order: (first, end) positions.
        batches: Vec<(u64, u64)>,
        taken: u64,
        /// Batches retired, in the order they were: (end, ok).
        retired: Vec<(u64, bool)>,
    }

    struct Model {
        state: Mutex<State>,
        done: Condvar,
        /// The stretches of the log (first, end] the modelled device holds
        /// (written and flushed), in the order their writes finished.
        on_device: Mutex<Vec<(u64, u64)>>,
        writes: AtomicU64,
        /// The write (counting from 0) that fails, if any.
        fail: Option<u64>,
    }

    impl Model {
        /// A fresh log; write number `fail` (counting from 0), if any, fails.
        fn new(fail: Option<u64>) -> Arc<Model> {
            Arc::new(Model {
                state: Mutex::new(State::default()),
                done: Condvar::new(),
                on_device: Mutex::new(Vec::new()),
                writes: AtomicU64::new(0),
                fail,
            })
        }

        /// The log position up to which the device holds every record.
        fn device_prefix(&self) -> u64 {
            let mut held = self.on_device.lock().clone();
            held.sort_unstable();
            let mut prefix = 0;
            for (first, end) in held {
                if first == prefix {
                    prefix = end;
                }
            }
            prefix
        }
    }

    impl Log for Model {
        type State = State;
        type Batch = (u64, u64);
        // Fewer than the writers, so that leaders also wait for room.
        const BATCHES_IN_FLIGHT: usize = 2;
        // Small enough that both a deferred and an overlapping lead occur.
        const RECORDS_TO_OVERLAP: u64 = 2;

        fn commit(st: &mut State) -> &mut CommitState<(u64, u64)> {
            &mut st.commit
        }

        fn take_batch(&self, st: &mut State) -> ((u64, u64), u64) {
            let first = st.taken;
            st.taken = st.appended;
            st.batches.push((first, st.appended));
            ((first, st.appended), st.appended)
        }

        async fn write(&self, _mode: Mode, batch: (u64, u64)) -> (Result<()>, (u64, u64)) {
            yield_now().await; // the write
            let n = self.writes.fetch_add(1, Ordering::SeqCst);
            if self.fail == Some(n) {
                return (Err(Error::Unusable("injected write error".into())), batch);
            }
            yield_now().await; // the flush
            self.on_device.lock().push(batch);
            (Ok(()), batch)
        }

        fn written(&self, st: &mut State, ok: bool, batch: (u64, u64)) {
            st.retired.push((batch.1, ok));
        }

        fn published(&self, _durable: u64) {}
    }

    /// Appends a record and waits for it; returns its position and result.
    async fn put(m: &Model, mode: Mode) -> (u64, bool) {
        let lsn = {
            let mut st = m.state.lock();
            st.appended += 1;
            st.appended
        };
        yield_now().await;
        let ok = wait_durable(m, &m.state, &m.done, mode, lsn).await.is_ok();
        if ok {
            assert!(
                m.device_prefix() >= lsn,
                "position {lsn} acknowledged before the device held the log up to it"
            );
        }
        (lsn, ok)
    }

    fn scenario(fail: Option<u64>) {
        let m = Model::new(fail);
        // Two threads with the blocking API, two puts each.
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let m = m.clone();
                shuttle::thread::spawn(move || {
                    block_on(async {
                        vec![put(&m, Mode::Blocking).await, put(&m, Mode::Blocking).await]
                    })
                })
            })
            .collect();
        // Two tasks of one runtime thread (this one), parking.
        let tasks: Vec<_> = (0..2)
            .map(|_| {
                let m = m.clone();
                spawn(async move { vec![put(&m, Mode::Ring).await, put(&m, Mode::Ring).await] })
            })
            .collect();
        let mut results = Vec::new();
        for t in tasks {
            results.extend(block_on(t).expect("task"));
        }
        for t in threads {
            results.extend(t.join().expect("thread"));
        }
        assert_eq!(results.len(), 8);
        let st = m.state.lock();
        // Batches are disjoint and in log order, and retire in that order.
        for w in st.batches.windows(2) {
            assert!(w[0].1 <= w[1].0, "batches overlap: {:?}", st.batches);
        }
        let ends: Vec<u64> = st.batches.iter().map(|b| b.1).collect();
        let retired: Vec<u64> = st.retired.iter().map(|r| r.0).collect();
        assert_eq!(ends, retired, "retired out of log order");
        assert_eq!(st.commit.in_flight(), 0);
        match fail {
            None => assert!(results.iter().all(|&(_, ok)| ok), "{results:?}"),
            Some(_) => {
                // Exactly what the device holds a whole prefix of the log
                // up to is acknowledged; nothing after the failure is,
                // even when its own write reached the device.
                let durable = m.device_prefix();
                for &(lsn, ok) in &results {
                    assert_eq!(ok, lsn <= durable, "{results:?}, durable {durable}");
                }
                // A batch retired as failed is never followed by one
                // retired as written.
                let first_bad = st.retired.iter().position(|r| !r.1);
                if let Some(i) = first_bad {
                    assert!(st.retired[i..].iter().all(|r| !r.1), "{:?}", st.retired);
                }
            }
        }
    }

    /// Polls `f` at most `polls` times, then drops it, as a runtime drops
    /// a cancelled task: `None` if it had not finished.
    async fn cancel_after<F: std::future::Future>(f: F, polls: usize) -> Option<F::Output> {
        let mut f = std::pin::pin!(f);
        let mut n = 0;
        std::future::poll_fn(move |cx| match f.as_mut().poll(cx) {
            std::task::Poll::Ready(v) => std::task::Poll::Ready(Some(v)),
            std::task::Poll::Pending => {
                n += 1;
                if n >= polls {
                    std::task::Poll::Ready(None)
                } else {
                    std::task::Poll::Pending
                }
            }
        })
        .await
    }

    /// Writers wait while one task's wait is dropped after `polls` polls,
    /// possibly as the leader of a batch whose write is under way.
    fn cancel_scenario(polls: usize) {
        let m = Model::new(None);
        let thread = {
            let m = m.clone();
            shuttle::thread::spawn(move || {
                block_on(async {
                    vec![put(&m, Mode::Blocking).await, put(&m, Mode::Blocking).await]
                })
            })
        };
        let tasks: Vec<_> = (0..2)
            .map(|_| {
                let m = m.clone();
                spawn(async move { vec![put(&m, Mode::Ring).await, put(&m, Mode::Ring).await] })
            })
            .collect();
        let cancelled = {
            let m = m.clone();
            spawn(async move {
                let lsn = {
                    let mut st = m.state.lock();
                    st.appended += 1;
                    st.appended
                };
                let waited = wait_durable(&*m, &m.state, &m.done, Mode::Ring, lsn);
                (lsn, cancel_after(waited, polls).await)
            })
        };
        // Every other wait returns (a batch left unfinished would hang
        // them: shuttle reports the deadlock).
        let mut results = thread.join().expect("thread");
        for t in tasks {
            results.extend(block_on(t).expect("task"));
        }
        let (lsn, outcome) = block_on(cancelled).expect("cancelled task");
        if let Some(r) = outcome {
            results.push((lsn, r.is_ok()));
        }
        let durable = m.device_prefix();
        for &(lsn, ok) in &results {
            assert!(
                !ok || lsn <= durable,
                "{lsn} acknowledged, device prefix {durable}"
            );
        }
        let st = m.state.lock();
        assert_eq!(st.commit.in_flight(), 0, "a batch never retired");
        let retired: Vec<u64> = st.retired.iter().map(|r| r.0).collect();
        assert!(retired.windows(2).all(|w| w[0] < w[1]), "{retired:?}");
        // Without a dropped leader, every wait succeeds.
        if st.retired.len() == st.batches.len() {
            assert!(results.iter().all(|&(_, ok)| ok), "{results:?}");
        }
    }

    #[test]
    fn a_dropped_group_commit_wait_never_hangs_the_others() {
        for polls in 1..5 {
            shuttle::check_random(move || cancel_scenario(polls), 500);
            shuttle::check_pct(move || cancel_scenario(polls), 500, 3);
        }
    }

    #[test]
    fn group_commit_acknowledges_only_durable_positions() {
        shuttle::check_random(|| scenario(None), 2000);
        shuttle::check_pct(|| scenario(None), 2000, 3);
    }

    #[test]
    fn a_failed_group_commit_fails_every_later_wait() {
        for fail in 0..3 {
            shuttle::check_random(move || scenario(Some(fail)), 500);
            shuttle::check_pct(move || scenario(Some(fail)), 500, 3);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use shuttle::future::{block_on, spawn_local as spawn, yield_now};
    use shuttle::sync::Mutex;

    use super::stripes::Stripes;
    use crate::aio::Mode;

    /// One key: its value and version as the index and device hold them,
    /// and the log of updates in the order their writes landed.
    #[derive(Default)]
    struct Key {
        value: u64,
        version: u64,
        /// (version the update read, version it wrote)
        log: Vec<(u64, u64)>,
    }

    /// The update step over a modelled device: returns the value written.
    async fn update(
        stripes: &Stripes,
        key: &Mutex<Key>,
        mode: Mode,
        decide: impl FnOnce(u64) -> u64,
    ) -> u64 {
        let _stripe = stripes.lock_in(mode, 0).await;
        let (value, version) = {
            let k = key.lock().unwrap();
            (k.value, k.version)
        };
        yield_now().await; // the device read completes
        let new = decide(value);
        yield_now().await; // the write and the group commit
        yield_now().await;
        let mut k = key.lock().unwrap();
        let written = k.version + 1;
        k.log.push((version, written));
        k.version = written;
        k.value = new;
        new
    }

    fn scenario() {
        let stripes = Arc::new(Stripes::new(1));
        let key = Arc::new(Mutex::new(Key::default()));
        // Two tasks incrementing twice each, parking on the stripe.
        let incrementers: Vec<_> = (0..2)
            .map(|_| {
                let (s, k) = (stripes.clone(), key.clone());
                spawn(async move {
                    let mut got = Vec::new();
                    for _ in 0..2 {
                        got.push(update(&s, &k, Mode::Ring, |v| v + 1).await);
                    }
                    got
                })
            })
            .collect();
        // A blind writer (memcached `set`), also a task.
        let setter = {
            let (s, k) = (stripes.clone(), key.clone());
            spawn(async move { update(&s, &k, Mode::Ring, |_| 100).await })
        };
        // A thread incrementing with the blocking API.
        let blocking = {
            let (s, k) = (stripes.clone(), key.clone());
            shuttle::thread::spawn(move || block_on(update(&s, &k, Mode::Blocking, |v| v + 1)))
        };
        let mut increments: Vec<u64> = Vec::new();
        for t in incrementers {
            increments.extend(block_on(t).expect("incrementer"));
        }
        block_on(setter).expect("setter");
        increments.push(blocking.join().expect("blocking thread"));

        let k = key.lock().unwrap();
        assert_eq!(k.log.len(), 6);
        // Serial: every update read the version the one before it wrote.
        for (i, &(read, wrote)) in k.log.iter().enumerate() {
            assert_eq!(
                read, i as u64,
                "update {i} read a stale version: {:?}",
                k.log
            );
            assert_eq!(wrote, i as u64 + 1);
        }
        // No increment handed out a value twice.
        let mut sorted = increments.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), increments.len(), "{increments:?}");
    }

    #[test]
    fn update_step_is_serial_under_every_interleaving() {
        shuttle::check_random(scenario, 2000);
        shuttle::check_pct(scenario, 2000, 3);
    }
}
