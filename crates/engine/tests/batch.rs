//! Crash-atomic batches (`Store::write_batch`, docs/FORMAT.md "Batches"):
//! after a crash at any point of a batch, every one of its operations is
//! there or none is.
//!
//! Each round writes batches that set the same shared keys `s0..sN` to one
//! generation tag and create fresh keys `g{gen}-{i}` (each batch a
//! different number of records of different sizes, so batches span several
//! write buffers and device writes), makes the device fail after a random
//! number of writes in the middle of one, crashes it (unflushed writes
//! lost, torn, or destaged out of order), reopens and checks:
//! - every shared key holds the same generation, at least the last
//!   acknowledged one;
//! - each generation's fresh keys are all there (generations up to the one
//!   the shared keys hold) or all absent (later ones);
//! - `check` passes.
//!
//! The fresh keys live in a namespace of their own and every other batch
//! is written as a guarded batch over both namespaces
//! (`write_batch_guarded`), so atomicity holds across namespaces too.
//!
//! `NVDEPOT_BATCH_ROUNDS` sets the number of crashes (default 60).

use std::sync::Arc;

use nvdepot_engine::{check_devices, BatchGuard, Namespace, Options, Store, WriteOp};
use nvdepot_io::{Device, MemDevice};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const MIB: u64 = 1 << 20;
const SHARED: usize = 24;

thread_local! {
    /// This test thread's stores link batches from the write buffer
    /// (`unlock_before_durable`, as `nvdepot serve` runs).
    static UNLOCK_EARLY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn options() -> Options {
    Options {
        segment_bytes: 4 * MIB,
        unlock_before_durable: UNLOCK_EARLY.get(),
        ..Options::default()
    }
}

fn open(dev: &Arc<MemDevice>, create: bool) -> Store {
    let opts = if create {
        options().create_bytes(0)
    } else {
        options()
    };
    Store::open_devices(vec![dev.clone() as Arc<dyn Device>], &opts).expect("open")
}

fn value(gen: u64, len: usize) -> Vec<u8> {
    let mut v = format!("gen{gen:08}:").into_bytes();
    v.resize(len.max(v.len()), b'a' + (gen % 26) as u8);
    v
}

fn gen_of(v: &[u8]) -> u64 {
    std::str::from_utf8(&v[3..11]).unwrap().parse().unwrap()
}

#[test]
fn a_batch_cut_by_a_crash_is_all_there_or_absent() {
    crash_rounds();
}

/// The same with batches linked before they are durable.
#[test]
fn a_batch_linked_early_and_cut_by_a_crash_is_all_there_or_absent() {
    UNLOCK_EARLY.set(true);
    crash_rounds();
}

fn crash_rounds() {
    let rounds: u64 = std::env::var("NVDEPOT_BATCH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let mut dev = Arc::new(MemDevice::new(64 * MIB, 512));
    let mut store = open(&dev, true);
    let ns = store.default_namespace();
    let mut fresh_ns = store.create_namespace("fresh").unwrap();
    let mut acked = 0u64; // last acknowledged generation
    let mut gen = 0u64;
    // Fresh keys per generation, for the all-or-nothing check.
    let mut fresh: Vec<(u64, usize)> = Vec::new();
    for round in 0..rounds {
        let mut rng = StdRng::seed_from_u64(round);
        let batches = rng.gen_range(1..6);
        let fail_in = rng.gen_range(0..batches);
        for b in 0..batches {
            if b == fail_in {
                // Writes that land but are never flushed (the crash then
                // drops, keeps or tears each), or writes that fail part way.
                if rng.gen_bool(0.7) {
                    dev.fail_flush_after(0);
                } else {
                    dev.fail_writes_after(rng.gen_range(0..3));
                }
            }
            gen += 1;
            let n_fresh = rng.gen_range(0..40);
            let big = rng.gen_range(16..120_000);
            let keys: Vec<Vec<u8>> = (0..SHARED)
                .map(|i| format!("s{i}").into_bytes())
                .chain((0..n_fresh).map(|i| format!("g{gen}-{i}").into_bytes()))
                .collect();
            let values: Vec<Vec<u8>> = (0..keys.len())
                .map(|i| value(gen, if i % 7 == 0 { big } else { 20 + i }))
                .collect();
            let ops: Vec<(Namespace, WriteOp<'_>)> = keys
                .iter()
                .zip(&values)
                .enumerate()
                .map(|(i, (key, value))| {
                    let in_ns = if i < SHARED { ns } else { fresh_ns };
                    (in_ns, WriteOp::Put { key, value })
                })
                .collect();
            fresh.push((gen, n_fresh));
            let done = if gen.is_multiple_of(2) {
                // Guarded on a shared key's current version: it holds,
                // unless GC moved the key meanwhile (a relocation takes a
                // new version): then read it again.
                loop {
                    let version = store.get_versioned(ns, b"s1").unwrap().map(|(_, v)| v);
                    let guard = BatchGuard {
                        ns,
                        key: b"s1",
                        version,
                    };
                    match store.write_batch_guarded(&ops, Some(guard)) {
                        Ok(None) => continue,
                        done => break done.map(|_| ()),
                    }
                }
            } else {
                store.write_batch_guarded(&ops, None).map(|_| ())
            };
            match done {
                Ok(()) => acked = gen,
                Err(_) => break,
            }
        }
        // Crash: what the device had flushed survives; of the rest, some
        // writes whole, one torn, in or out of order.
        let crashed = if rng.gen_bool(0.5) {
            dev.crash(round).0
        } else {
            dev.crash_reordered(round).0
        };
        drop(store);
        dev = Arc::new(crashed);
        let report = check_devices(vec![dev.clone() as Arc<dyn Device>], &options()).unwrap();
        assert!(report.is_ok(), "round {round}: check failed:\n{report}");
        store = open(&dev, false);
        let ns2 = store.default_namespace();
        fresh_ns = store.namespace("fresh").expect("namespace kept");
        let shared: Vec<Option<Vec<u8>>> = (0..SHARED)
            .map(|i| store.get(ns2, format!("s{i}").as_bytes()).unwrap())
            .collect();
        let now = gen_of(shared[0].as_ref().expect("s0 present"));
        for (i, v) in shared.iter().enumerate() {
            let g = gen_of(v.as_ref().expect("shared key present"));
            assert_eq!(g, now, "round {round}: s{i} holds generation {g}, s0 {now}");
        }
        assert!(
            now >= acked,
            "round {round}: generation {now} is older than the acknowledged {acked}"
        );
        for &(g, n) in &fresh {
            let present = (0..n)
                .filter(|i| {
                    store
                        .get(fresh_ns, format!("g{g}-{i}").as_bytes())
                        .unwrap()
                        .is_some()
                })
                .count();
            let want = if g <= now { n } else { 0 };
            assert_eq!(
                present, want,
                "round {round}: generation {g} (shared keys at {now}) has {present} of {n} keys"
            );
        }
        // Generations past what survived were never acknowledged: forget
        // them, and go on from the survivor (so generations stay ordered).
        fresh.retain(|&(g, _)| g <= now);
        acked = now;
        gen = gen.max(now);
    }
}

/// A batch that cannot fit one segment is refused with a clear error
/// (never split: it would no longer be all or nothing).
#[test]
fn a_batch_larger_than_a_segment_is_refused() {
    let dev = Arc::new(MemDevice::new(64 * MIB, 512));
    let store = open(&dev, true);
    let ns = store.default_namespace();
    let v = vec![1u8; 200_000];
    let keys: Vec<Vec<u8>> = (0..30).map(|i| format!("k{i}").into_bytes()).collect();
    let ops: Vec<WriteOp<'_>> = keys
        .iter()
        .map(|key| WriteOp::Put { key, value: &v })
        .collect();
    let e = store.write_batch(ns, &ops).unwrap_err().to_string();
    assert!(e.contains("larger than a segment"), "{e}");
    assert_eq!(store.get(ns, b"k0").unwrap(), None);
    // One that fits goes through whole.
    store.write_batch(ns, &ops[..10]).unwrap();
    assert_eq!(store.count(ns), 10);
}

/// A guarded batch commits only while its guard key is at the version the
/// caller saw (or absent, as it saw), and reports each put's new version.
#[test]
fn a_guarded_batch_commits_only_on_the_version_seen() {
    let dev = Arc::new(MemDevice::new(64 * MIB, 512));
    let store = open(&dev, true);
    let meta = store.default_namespace();
    let pages = store.create_namespace("pages").unwrap();
    let put = |ns, key: &'static [u8], value: &'static [u8]| (ns, WriteOp::Put { key, value });
    // Absent, as seen: commits; the versions are the records'.
    let absent = BatchGuard {
        ns: meta,
        key: b"m",
        version: None,
    };
    let ops = [
        put(meta, b"m", b"v1"),
        put(pages, b"p0", b"a"),
        put(pages, b"p1", b"b"),
    ];
    let versions = store
        .write_batch_guarded(&ops, Some(absent))
        .unwrap()
        .unwrap();
    let (_, v1) = store.get_versioned(meta, b"m").unwrap().unwrap();
    assert_eq!(versions[0], v1);
    assert_eq!(
        versions[1],
        store.get_versioned(pages, b"p0").unwrap().unwrap().1
    );
    // Seen absent, but it is there now: nothing is written.
    let ops2 = [
        put(meta, b"m", b"v2"),
        (pages, WriteOp::Delete { key: b"p0" }),
    ];
    assert_eq!(
        store.write_batch_guarded(&ops2, Some(absent)).unwrap(),
        None
    );
    assert_eq!(store.get(meta, b"m").unwrap().as_deref(), Some(&b"v1"[..]));
    assert!(store.get(pages, b"p0").unwrap().is_some());
    // A stale version: nothing written either.
    let stale = BatchGuard {
        version: Some(v1 - 1),
        ..absent
    };
    assert_eq!(store.write_batch_guarded(&ops2, Some(stale)).unwrap(), None);
    // The version seen: both namespaces change together.
    let seen = BatchGuard {
        version: Some(v1),
        ..absent
    };
    let versions = store
        .write_batch_guarded(&ops2, Some(seen))
        .unwrap()
        .unwrap();
    assert_eq!(versions[1], 0, "a delete has no version");
    assert_eq!(store.get(meta, b"m").unwrap().as_deref(), Some(&b"v2"[..]));
    assert!(store.get(pages, b"p0").unwrap().is_none());
    assert_eq!(store.get(pages, b"p1").unwrap().as_deref(), Some(&b"b"[..]));
    // Guarded on a key the batch does not write: deleting a page only
    // while its owner is absent.
    let owner_gone = BatchGuard {
        ns: meta,
        key: b"other",
        version: None,
    };
    let del = [(pages, WriteOp::Delete { key: b"p1" })];
    assert!(store
        .write_batch_guarded(&del, Some(owner_gone))
        .unwrap()
        .is_some());
    assert!(store.get(pages, b"p1").unwrap().is_none());
}
