//! The directory compiled over shuttle's primitives, for model checking.
#![allow(dead_code)]

#[path = "sync_shuttle.rs"]
pub(crate) mod sync;

#[allow(clippy::duplicate_mod)]
#[path = "directory.rs"]
pub(crate) mod directory;

#[cfg(test)]
mod tests {
    //! Model checks of the region-lock + migration protocol: one thread
    //! fills a neighborhood and triggers a grow, another inserts and looks
    //! up across region boundaries meanwhile, a third plays the background
    //! helper. Shuttle explores their interleavings.

    use super::directory::{marks, Inner};
    use crate::{Expect, Location};
    use shuttle::sync::atomic::{AtomicBool, Ordering};
    use shuttle::sync::Arc;
    use std::collections::HashSet;
    use std::sync::atomic::AtomicUsize;

    /// Operations of thread B that began and ended while a resize was in
    /// progress (summed over all explored executions).
    static DURING_RESIZE: AtomicUsize = AtomicUsize::new(0);

    fn loc(n: u64) -> Location {
        Location {
            pba: n,
            grains: 1 + (n % 7) as u16,
        }
    }

    fn fp(tag: u64, home: u64) -> u64 {
        tag | home << 8
    }

    fn count(inner: &Inner, fp: u64, l: Location) -> usize {
        let mut out = Vec::new();
        inner.lookup(fp, &mut out);
        out.iter().filter(|&&x| x == l).count()
    }

    fn absent(inner: &Inner, fp: u64, l: Location) {
        let mut seen = Vec::new();
        inner.lookup(fp, &mut seen);
        let r = inner
            .insert(fp, l, Expect::Absent { seen: &seen }, false)
            .result;
        assert_eq!(r, Ok(None), "insert {fp:#x}");
    }

    fn scenario() {
        // 4 tables of 2^10 slots in lock regions of 256: 16 regions, so a
        // resize to 8 tables migrates one region at a time. No overflow
        // list: the first failed insert grows.
        let inner = Arc::new(Inner::new(10, 2, 40, 8, 0));
        let mut expected: Vec<(u64, Location)> = Vec::new();
        // 32 entries homed at slot 5 of table 0 (tags = 0 mod 4): full.
        for i in 0..32 {
            expected.push((fp(i * 4, 5), loc(i)));
        }
        // Entries in every table, some spanning regions 0-1 and the end.
        for (i, home) in [250u64, 255, 600, 1020].into_iter().enumerate() {
            for tag in 1..4 {
                expected.push((fp(tag + 4 * i as u64, home), loc(100 + 4 * i as u64 + tag)));
            }
        }
        for &(f, l) in &expected {
            absent(&inner, f, l);
        }
        let grown = Arc::new(AtomicBool::new(false));
        let a = {
            let (inner, grown) = (inner.clone(), grown.clone());
            shuttle::thread::spawn(move || {
                // Tag 128 = 0 mod 4, home 5: no room, no hop possible.
                let f = fp(128, 5);
                let out = inner.insert(f, loc(1000), Expect::Absent { seen: &[] }, false);
                assert_eq!(out.result, Ok(None));
                assert_eq!(out.resize, super::directory::ResizeAction::Started);
                grown.store(true, Ordering::SeqCst);
                let more = vec![
                    (f, loc(1000)),
                    (fp(9, 251), loc(1001)),
                    (fp(6, 600), loc(1002)),
                ];
                for &(f, l) in &more[1..] {
                    absent(&inner, f, l);
                }
                more
            })
        };
        let b = {
            let inner = inner.clone();
            let stable = expected.clone();
            shuttle::thread::spawn(move || {
                let mut mine = Vec::new();
                for (i, &(f, l)) in stable.iter().enumerate().skip(28).step_by(3) {
                    let before = inner.resize_in_progress();
                    assert_eq!(count(&inner, f, l), 1, "stable {f:#x} {l:?}");
                    let n = fp(3 + 4 * (i as u64 % 3), 240 + i as u64);
                    absent(&inner, n, loc(2000 + i as u64));
                    mine.push((n, loc(2000 + i as u64)));
                    assert_eq!(count(&inner, n, loc(2000 + i as u64)), 1);
                    if before && inner.resize_in_progress() {
                        DURING_RESIZE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                }
                mine
            })
        };
        let c = {
            let (inner, grown) = (inner.clone(), grown.clone());
            shuttle::thread::spawn(move || {
                while !grown.load(Ordering::SeqCst) {
                    shuttle::thread::yield_now();
                }
                inner.finish_resize(true);
            })
        };
        expected.extend(a.join().unwrap());
        expected.extend(b.join().unwrap());
        c.join().unwrap();
        assert!(!inner.resize_in_progress());
        assert_eq!(inner.geometry().tables_log2, 3);
        let mut seen = HashSet::new();
        inner.for_each(&mut |f, l| assert!(seen.insert((f, l)), "{f:#x} {l:?} twice"));
        let want: HashSet<_> = expected.iter().copied().collect();
        assert_eq!(seen, want);
        assert_eq!(inner.len(), expected.len());
    }

    fn coverage() -> [usize; 5] {
        let get = |c: &AtomicUsize| c.load(std::sync::atomic::Ordering::Relaxed);
        [
            &DURING_RESIZE,
            &marks::HOP,
            &marks::MIGRATE_BY_OP,
            &marks::MIXED,
            &marks::POPULATE,
        ]
        .map(get)
    }

    /// Runs `check`, then asserts that the racy paths were taken in it: the
    /// test is only worth something if they were.
    fn assert_covers(check: impl FnOnce()) {
        let before = coverage();
        check();
        let after = coverage();
        let got: Vec<usize> = after.iter().zip(before).map(|(a, b)| a - b).collect();
        eprintln!("coverage [during resize, hop, migrate by op, mixed, populate]: {got:?}");
        assert!(got[0] > 0, "no operation ran during a resize");
        assert!(got[1] > 0, "no operation went to the next generation");
        assert!(got[2] > 0, "no operation migrated a region");
        assert!(
            got[3] > 0,
            "never locked a LIVE and a MIGRATED region together"
        );
    }

    // One test, so that the coverage counters see only its executions.
    #[test]
    fn resize_protocol() {
        assert_covers(|| shuttle::check_random(scenario, 1000));
        assert_covers(|| shuttle::check_pct(scenario, 1000, 3));
    }
}
