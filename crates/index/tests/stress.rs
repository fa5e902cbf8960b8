//! Multi-threaded stress: 4 writer threads on disjoint and shared
//! fingerprints across several grows (prefetching random fingerprints
//! between operations), a 5th thread iterating, then the final contents
//! checked against what every thread says it left behind.

use nvdepot_index::{Expect, Index, IndexConfig, InsertError, Location};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

const THREADS: u64 = 4;
const OPS: usize = 40_000;
/// Fingerprints every thread inserts its own entries under.
const SHARED: u64 = 16;
/// Entries each thread inserts first and never touches again.
const STABLE: usize = 200;
const FP_MASK: u64 = (1 << 18) - 1;

fn loc(thread: u64, n: u64) -> Location {
    Location {
        pba: thread << 32 | n,
        grains: (n % 2047) as u16 + 1,
    }
}

fn shared_fp(i: u64) -> u64 {
    // Spread over tags and homes (bits 0..18 for 2^10-entry tables).
    (i * 0x9e37_79b9) & FP_MASK
}

/// Inserts `new` under `fp` as a reader-then-writer would: read the
/// candidates, insert with them as `seen`, retry on conflict.
fn insert_absent(index: &Index, fp: u64, new: Location, conflicts: &AtomicUsize) {
    let mut seen = Vec::new();
    loop {
        seen.clear();
        index.lookup(fp, &mut seen);
        match index.insert(fp, new, Expect::Absent { seen: &seen }) {
            Ok(None) => return,
            Err(InsertError::Conflict) => {
                conflicts.fetch_add(1, Ordering::Relaxed);
            }
            other => panic!("insert {fp:#x} {new:?}: {other:?}"),
        }
    }
}

fn count(index: &Index, fp: u64, l: Location) -> usize {
    let mut out = Vec::new();
    index.lookup(fp, &mut out);
    out.iter().filter(|&&x| x == l).count()
}

fn worker(
    index: &Index,
    t: u64,
    seed: u64,
    stable_done: &AtomicUsize,
    conflicts: &AtomicUsize,
) -> Vec<(u64, Location)> {
    let mut rng = StdRng::seed_from_u64(seed ^ t);
    let mut n = 0u64;
    let mut fresh = || {
        n += 1;
        loc(t, n)
    };
    // Stable entries: their own fingerprints (low 2 bits = thread).
    let stable: Vec<(u64, Location)> = (0..STABLE)
        .map(|_| ((rng.gen::<u64>() & FP_MASK & !3) | t, fresh()))
        .collect();
    for &(fp, l) in &stable {
        insert_absent(index, fp, l, conflicts);
    }
    stable_done.fetch_add(1, Ordering::SeqCst);
    let mut mine: Vec<(u64, Location)> = Vec::new();
    for i in 0..OPS {
        // A prefetch hint, of any fingerprint, at any point of a resize,
        // changes nothing (the final contents are checked below).
        index.prefetch(rng.gen());
        match rng.gen_range(0..10) {
            0..=3 => {
                let fp = (rng.gen::<u64>() & FP_MASK & !3) | t;
                let l = fresh();
                insert_absent(index, fp, l, conflicts);
                mine.push((fp, l));
            }
            4 | 5 => {
                // At most 2 own entries per shared fingerprint.
                let fp = shared_fp(rng.gen_range(0..SHARED));
                if mine.iter().filter(|e| e.0 == fp).count() < 2 {
                    let l = fresh();
                    insert_absent(index, fp, l, conflicts);
                    mine.push((fp, l));
                }
            }
            6 | 7 if !mine.is_empty() => {
                let j = rng.gen_range(0..mine.len());
                let (fp, old) = mine[j];
                let new = fresh();
                // Only this thread changes its own locations: never a conflict.
                assert_eq!(index.insert(fp, new, Expect::Replace(old)), Ok(Some(old)));
                mine[j].1 = new;
            }
            8 if !mine.is_empty() => {
                let (fp, old) = mine.swap_remove(rng.gen_range(0..mine.len()));
                assert!(index.remove(fp, old), "remove {fp:#x} {old:?}");
            }
            _ => {
                // Linearizability spot checks: what this thread wrote and
                // did not remove is visible exactly once.
                if let Some(&(fp, l)) = mine.get(i % mine.len().max(1)) {
                    assert_eq!(count(index, fp, l), 1, "own entry {fp:#x} {l:?}");
                }
                let (fp, l) = stable[i % STABLE];
                assert_eq!(count(index, fp, l), 1, "stable entry {fp:#x} {l:?}");
            }
        }
    }
    mine.extend(stable);
    mine
}

#[test]
fn four_threads_across_grows() {
    let seed: u64 =
        std::env::var("STRESS_SEED").map_or_else(|_| rand::random(), |s| s.parse().unwrap());
    eprintln!("stress seed {seed} (STRESS_SEED={seed} to replay the inputs)");
    let config = IndexConfig {
        table_entries_log2: 10,
        initial_tables_log2: 0,
        ..Default::default()
    };
    let index = Arc::new(Index::with_tuning(config, 8, 16));
    let stable_done = Arc::new(AtomicUsize::new(0));
    let conflicts = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (index, stable_done, conflicts) =
                (index.clone(), stable_done.clone(), conflicts.clone());
            std::thread::spawn(move || worker(&index, t, seed, &stable_done, &conflicts))
        })
        .collect();
    // Iterate concurrently: no entry twice, and every stable entry once.
    let iterator = {
        let (index, stable_done, stop) = (index.clone(), stable_done.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut rounds = 0;
            while !stop.load(Ordering::SeqCst) {
                let mut seen = HashSet::new();
                index.for_each(|fp, l| {
                    assert!(seen.insert((fp, l)), "for_each saw {fp:#x} {l:?} twice")
                });
                rounds += 1;
                let _ = stable_done.load(Ordering::SeqCst);
            }
            rounds
        })
    };
    let mut expected: Vec<(u64, Location)> = Vec::new();
    for w in writers {
        expected.extend(w.join().unwrap());
    }
    stop.store(true, Ordering::SeqCst);
    let rounds = iterator.join().unwrap();
    index.finish_resize();
    let mut actual = Vec::new();
    index.for_each(|fp, l| actual.push((fp, l)));
    let key = |e: &(u64, Location)| (e.0, e.1.pba);
    actual.sort_unstable_by_key(key);
    expected.sort_unstable_by_key(key);
    assert_eq!(actual.len(), expected.len());
    assert!(
        actual == expected,
        "final contents differ from what the threads left"
    );
    assert_eq!(index.len(), expected.len());
    let tables_log2 = index.geometry().tables_log2;
    eprintln!(
        "{} entries, 2^{tables_log2} tables, {} conflicts retried, {rounds} for_each rounds",
        expected.len(),
        conflicts.load(Ordering::Relaxed)
    );
    assert!(
        tables_log2 >= 4,
        "expected several grows, got 2^{tables_log2} tables"
    );
}
