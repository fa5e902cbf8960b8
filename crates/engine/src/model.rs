//! The stripe locks compiled over shuttle's primitives, and the update
//! step's protocol model-checked on them (tests only).
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
