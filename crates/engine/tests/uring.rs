//! The async API on the io_uring backend: the same behaviour as the
//! blocking API (checked against a model), concurrent tasks on several
//! runtimes sharing group commits with blocking writers, and recovery of
//! what the async calls acknowledged.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use nvdepot_engine::{DeleteOutcome, Options, PutMode, Store};
use nvdepot_io::uring::{self, Runtime};
use nvdepot_io::{Device, FileDevice, MemDevice};
use rand::{Rng, SeedableRng};

const MIB: u64 = 1 << 20;

/// Key → (value, version).
type Model = HashMap<Vec<u8>, (Vec<u8>, u64)>;

fn opts() -> Options {
    Options {
        segment_bytes: MIB,
        ..Options::default()
    }
    .create_bytes(64 * MIB)
}

fn value(key: u32, round: u32) -> Vec<u8> {
    let len = (key as usize * 37 + round as usize * 11) % 9000;
    (0..len).map(|i| (i as u32 ^ key ^ round) as u8).collect()
}

/// Random puts, conditional puts, deletes and gets from `tasks` concurrent
/// tasks on one runtime, each on its own keys; checks every answer and
/// returns the model.
fn drive(store: &Arc<Store>, rt: &Runtime, seed: u64, tasks: u32) -> Model {
    let model: Rc<RefCell<Model>> = Rc::default();
    rt.block_on(async {
        let mut handles = Vec::new();
        for t in 0..tasks {
            let store = store.clone();
            let model = model.clone();
            handles.push(uring::spawn(async move {
                let ns = store.default_namespace();
                let mut rng = rand::rngs::StdRng::seed_from_u64(seed * 1000 + t as u64);
                for round in 0..150u32 {
                    let k = rng.gen_range(0..20u32);
                    let key = format!("t{t}-{seed}-k{k}").into_bytes();
                    let have = model.borrow().get(&key).cloned();
                    match rng.gen_range(0..10) {
                        0..=3 => {
                            let v = value(k, round);
                            let ver = store
                                .put_versioned_async(ns, &key, &v, PutMode::Upsert)
                                .await
                                .unwrap()
                                .expect("upsert writes");
                            model.borrow_mut().insert(key, (v, ver));
                        }
                        4 => {
                            let v = value(k, round + 1);
                            let r = store
                                .put_versioned_async(ns, &key, &v, PutMode::IfAbsent)
                                .await
                                .unwrap();
                            assert_eq!(r.is_some(), have.is_none());
                            if let Some(ver) = r {
                                model.borrow_mut().insert(key, (v, ver));
                            }
                        }
                        5 => {
                            // CAS with the current version, or a stale one.
                            let stale = rng.gen_bool(0.3);
                            let ver = have.as_ref().map_or(1, |h| h.1 - stale as u64);
                            let v = value(k, round + 2);
                            let r = store
                                .put_versioned_async(ns, &key, &v, PutMode::IfVersion(ver))
                                .await
                                .unwrap();
                            assert_eq!(r.is_some(), have.is_some() && !stale, "cas {key:?}");
                            if let Some(ver) = r {
                                model.borrow_mut().insert(key, (v, ver));
                            }
                        }
                        6 => {
                            let r = store.delete_versioned_async(ns, &key, None).await.unwrap();
                            let want = if have.is_some() {
                                DeleteOutcome::Deleted
                            } else {
                                DeleteOutcome::NotFound
                            };
                            assert_eq!(r, want);
                            model.borrow_mut().remove(&key);
                        }
                        _ => {
                            let got = store.get_versioned_async(ns, &key).await.unwrap();
                            assert_eq!(got, have, "get {key:?}");
                        }
                    }
                }
            }));
        }
        for h in handles {
            h.await;
        }
    });
    Rc::try_unwrap(model).ok().unwrap().into_inner()
}

fn verify(store: &Store, model: &Model) {
    let ns = store.default_namespace();
    for (k, (v, ver)) in model {
        let got = store.get_versioned(ns, k).unwrap();
        assert_eq!(got.as_ref(), Some(&(v.clone(), *ver)), "key {k:?}");
    }
}

/// Puts of several tasks that run in one loop turn share one group
/// commit: the first waiter to lead lets the rest of the turn append
/// before it takes the batch (each device write costs tens of
/// microseconds of CPU in a VM's doorbell).
#[test]
fn puts_of_one_loop_turn_share_one_batch() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(&dir.path().join("store"), &opts()).unwrap());
    let rt = Runtime::new().unwrap();
    let before = store.stats().flushes;
    rt.block_on(async {
        let tasks: Vec<_> = (0..8u32)
            .map(|t| {
                let store = store.clone();
                uring::spawn(async move {
                    let ns = store.default_namespace();
                    let key = format!("turn-{t}").into_bytes();
                    store
                        .put_versioned_async(ns, &key, &value(t, 1), PutMode::Upsert)
                        .await
                        .unwrap()
                        .expect("upsert writes");
                })
            })
            .collect();
        for t in tasks {
            t.await;
        }
    });
    assert_eq!(store.stats().flushes - before, 1, "{:?}", store.stats());
    for t in 0..8u32 {
        let key = format!("turn-{t}").into_bytes();
        let got = store.get(store.default_namespace(), &key).unwrap();
        assert_eq!(got.as_deref(), Some(&value(t, 1)[..]));
    }
}

#[test]
fn async_api_on_a_file_matches_the_model_and_survives_reopen() {
    model_survives_reopen(true);
}

#[test]
fn flushes_through_the_ring_keep_every_acknowledged_write() {
    model_survives_reopen(false);
}

/// A lone task's durable puts: with `flush_inline` each put's flush runs
/// on the worker thread (no ring completion), without it through the ring
/// (one more completion per put).
#[test]
fn a_lone_writer_flushes_inline_unless_told_not_to() {
    let completions = |flush_inline: bool| {
        let dir = tempfile::tempdir().unwrap();
        let opts = Options {
            flush_inline,
            ..opts()
        };
        let store = Store::open(&dir.path().join("store"), &opts).unwrap();
        let rt = Runtime::new().unwrap();
        let before = rt.stats().completions;
        rt.block_on(async {
            for i in 0..20u32 {
                let key = format!("k{i}").into_bytes();
                let ns = store.default_namespace();
                store.put_async(ns, &key, b"v").await.unwrap();
            }
        });
        let flushes = store.stats().flushes;
        assert!(flushes >= 20, "{flushes}");
        (rt.stats().completions - before, flushes)
    };
    let (inline, flushes) = completions(true);
    let (ring, ring_flushes) = completions(false);
    assert_eq!(flushes, ring_flushes);
    // One flush per put (a lone writer's batches hold one record each).
    assert_eq!(ring, inline + 20, "inline {inline}, ring {ring}");
}

fn model_survives_reopen(flush_inline: bool) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let opts = Options {
        flush_inline,
        ..opts()
    };
    let store = Arc::new(Store::open(&path, &opts).unwrap());
    let rt = Runtime::new().unwrap();
    let model = drive(&store, &rt, 1, 32);
    verify(&store, &model);
    let s = store.stats();
    // Concurrent tasks shared flushes.
    assert!(s.flushes < s.puts + s.deletes, "{s:?}");
    assert!(rt.stats().completions > 0);
    // Crash (no clean close): the log gives back everything acknowledged.
    drop(store);
    let store = Store::open(&path, &Options::default()).unwrap();
    assert!(!store.open_report().clean);
    verify(&store, &model);
    store.close().unwrap();
}

#[test]
fn async_api_falls_back_to_blocking_io_on_the_memory_device() {
    let dev = Arc::new(MemDevice::new(64 * MIB, 512));
    let store =
        Arc::new(Store::open_devices(vec![dev.clone() as Arc<dyn Device>], &opts()).unwrap());
    let rt = Runtime::new().unwrap();
    let model = drive(&store, &rt, 2, 8);
    verify(&store, &model);
    assert_eq!(
        rt.stats().completions,
        0,
        "no ring IO without a file descriptor"
    );
}

#[test]
fn runtimes_on_two_threads_and_blocking_writers_share_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let a = Arc::new(FileDevice::open(&dir.path().join("a"), Some(48 * MIB)).unwrap());
    let b = Arc::new(FileDevice::open(&dir.path().join("b"), Some(48 * MIB)).unwrap());
    let devices = vec![a.clone() as Arc<dyn Device>, b.clone() as Arc<dyn Device>];
    let store = Arc::new(Store::open_devices(devices, &opts()).unwrap());
    let mut threads = Vec::new();
    for seed in 10..12u64 {
        let store = store.clone();
        threads.push(std::thread::spawn(move || {
            let rt = Runtime::new().unwrap();
            drive(&store, &rt, seed, 16)
        }));
    }
    let blocking = {
        let store = store.clone();
        std::thread::spawn(move || {
            let ns = store.default_namespace();
            let mut model = HashMap::new();
            for i in 0..300u32 {
                let key = format!("blocking-{}", i % 50).into_bytes();
                let v = value(i, 7);
                store.put(ns, &key, &v).unwrap();
                model.insert(key, v);
            }
            model
        })
    };
    let mut model = HashMap::new();
    for t in threads {
        model.extend(t.join().unwrap());
    }
    let blocking = blocking.join().unwrap();
    verify(&store, &model);
    let ns = store.default_namespace();
    for (k, v) in &blocking {
        assert_eq!(store.get(ns, k).unwrap().as_ref(), Some(v));
    }
    drop(store);
    let devices = vec![a as Arc<dyn Device>, b as Arc<dyn Device>];
    let store = Store::open_devices(devices, &Options::default()).unwrap();
    verify(&store, &model);
}

#[test]
fn tasks_and_threads_contending_for_one_key_serialise_without_blocking_a_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(&dir.path().join("store"), &opts()).unwrap());
    let writer = |id: u64, tasks: u64| {
        let store = store.clone();
        std::thread::spawn(move || {
            let rt = Runtime::new().unwrap();
            rt.block_on(async {
                let handles: Vec<_> = (0..tasks)
                    .map(|t| {
                        let store = store.clone();
                        uring::spawn(async move {
                            let ns = store.default_namespace();
                            let mut best = (0, Vec::new());
                            for i in 0..20u64 {
                                let v = format!("{id}-{t}-{i}").into_bytes();
                                let ver = store
                                    .put_versioned_async(ns, b"hot", &v, PutMode::Upsert)
                                    .await
                                    .unwrap()
                                    .unwrap();
                                if ver > best.0 {
                                    best = (ver, v);
                                }
                            }
                            best
                        })
                    })
                    .collect();
                let mut best = (0, Vec::new());
                for h in handles {
                    best = best.max(h.await);
                }
                best
            })
        })
    };
    let a = writer(1, 24);
    let b = writer(2, 24);
    let blocking = {
        let store = store.clone();
        std::thread::spawn(move || {
            let ns = store.default_namespace();
            let mut best = (0, Vec::new());
            for i in 0..100u64 {
                let v = format!("blocking-{i}").into_bytes();
                let ver = store
                    .put_versioned(ns, b"hot", &v, PutMode::Upsert)
                    .unwrap()
                    .unwrap();
                best = best.max((ver, v));
            }
            best
        })
    };
    let best = [
        a.join().unwrap(),
        b.join().unwrap(),
        blocking.join().unwrap(),
    ]
    .into_iter()
    .max()
    .unwrap();
    let ns = store.default_namespace();
    // The write with the highest version is the one the key holds.
    assert_eq!(
        store.get_versioned(ns, b"hot").unwrap(),
        Some((best.1, best.0))
    );
    assert_eq!(store.count(ns), 1);
}

/// Tasks writing through the async path while the simulated device
/// completes their IO out of order (seeded latency), crashed at a random
/// moment: every put acknowledged before the crash is there after it, a
/// put in flight is wholly there or absent.
#[test]
fn async_writers_on_a_slow_device_lose_nothing_acknowledged_at_a_crash() {
    use std::sync::Mutex;
    use std::time::Duration;
    type Acked = HashMap<Vec<u8>, (Option<Vec<u8>>, Option<Vec<u8>>)>;
    for round in 0..6u64 {
        let dev = Arc::new(MemDevice::new(64 * MIB, 512));
        dev.set_latency(Duration::from_micros(400), round);
        let store =
            Arc::new(Store::open_devices(vec![dev.clone() as Arc<dyn Device>], &opts()).unwrap());
        // key -> (acknowledged value, value in flight)
        let acked: Arc<Mutex<Acked>> = Arc::default();
        let writer = {
            let (store, acked) = (store.clone(), acked.clone());
            std::thread::spawn(move || {
                let rt = Runtime::new().expect("io_uring");
                rt.block_on(async {
                    let mut tasks = Vec::new();
                    for t in 0..16u32 {
                        let (store, acked) = (store.clone(), acked.clone());
                        tasks.push(uring::spawn(async move {
                            let ns = store.default_namespace();
                            for i in 0u32.. {
                                let key = format!("t{t}-k{}", i % 7).into_bytes();
                                let v = value(t * 1000 + i, i);
                                acked.lock().unwrap().entry(key.clone()).or_default().1 =
                                    Some(v.clone());
                                if store.put_async(ns, &key, &v).await.is_err() {
                                    return i; // the device crashed
                                }
                                let mut m = acked.lock().unwrap();
                                let e = m.get_mut(&key).unwrap();
                                *e = (e.1.take(), None);
                            }
                            unreachable!()
                        }));
                    }
                    let mut puts = 0;
                    for t in tasks {
                        puts += t.await;
                    }
                    puts
                })
            })
        };
        std::thread::sleep(Duration::from_millis(40 + round * 15));
        let (after, _) = if round % 2 == 0 {
            dev.crash(round)
        } else {
            dev.crash_reordered(round)
        };
        let puts = writer.join().unwrap();
        drop(store);
        assert!(
            puts > 16,
            "round {round}: only {puts} puts before the crash"
        );
        let store = Store::open_devices(
            vec![Arc::new(after) as Arc<dyn Device>],
            &Options::default(),
        )
        .unwrap();
        let ns = store.default_namespace();
        for (key, (done, in_flight)) in acked.lock().unwrap().iter() {
            let got = store.get(ns, key).unwrap();
            assert!(
                got == *done || (in_flight.is_some() && got == *in_flight),
                "round {round}: key {:?} lost its acknowledged value",
                String::from_utf8_lossy(key)
            );
        }
    }
}
