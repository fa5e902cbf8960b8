//! Behaviour of the store's API on the in-memory device and on a real file.

use std::sync::Arc;

use nvdepot_engine::{check_devices, Error, Options, Progress, PutMode, Store, WriteOp};
use nvdepot_io::{Device, MemDevice};

const MIB: u64 = 1 << 20;

fn opts() -> Options {
    Options {
        segment_bytes: MIB,
        ..Options::default()
    }
    .create_bytes(0)
}

fn mem_store(capacity: u64) -> (Arc<MemDevice>, Store) {
    let dev = Arc::new(MemDevice::new(capacity, 512));
    let store =
        Store::open_devices(vec![dev.clone() as Arc<dyn Device>], &opts()).expect("create store");
    (dev, store)
}

fn reopen(dev: Arc<MemDevice>) -> Store {
    Store::open_devices(vec![dev as Arc<dyn Device>], &Options::default()).expect("reopen")
}

#[test]
fn put_get_delete_and_conditions() {
    let (_dev, s) = mem_store(32 * MIB);
    let ns = s.default_namespace();
    assert_eq!(s.get(ns, b"k").unwrap(), None);
    s.put(ns, b"k", b"v1").unwrap();
    assert_eq!(s.get(ns, b"k").unwrap().as_deref(), Some(&b"v1"[..]));
    assert!(!s.put_with(ns, b"k", b"v2", PutMode::IfAbsent).unwrap());
    assert!(s.put_with(ns, b"k", b"v3", PutMode::IfPresent).unwrap());
    assert_eq!(s.get(ns, b"k").unwrap().as_deref(), Some(&b"v3"[..]));
    assert!(!s.put_with(ns, b"other", b"x", PutMode::IfPresent).unwrap());
    assert!(s.put_with(ns, b"other", b"x", PutMode::IfAbsent).unwrap());
    assert_eq!(s.count(ns), 2);
    assert!(s.delete(ns, b"k").unwrap());
    assert!(!s.delete(ns, b"k").unwrap());
    assert_eq!(s.get(ns, b"k").unwrap(), None);
    assert_eq!(s.count(ns), 1);
    // Empty values are values.
    s.put(ns, b"empty", b"").unwrap();
    assert_eq!(s.get(ns, b"empty").unwrap().as_deref(), Some(&b""[..]));
}

#[test]
fn limits_give_clear_errors() {
    let (_dev, s) = mem_store(32 * MIB);
    let ns = s.default_namespace();
    let big_key = vec![b'k'; 70_000];
    assert!(matches!(
        s.put(ns, &big_key, b"v"),
        Err(Error::KeyTooLarge { len: 70_000, .. })
    ));
    // The empty key is a key (Redis and RocksDB take it).
    s.put(ns, b"", b"empty").unwrap();
    assert_eq!(s.get(ns, b"").unwrap().as_deref(), Some(&b"empty"[..]));
    assert!(s.iter(ns).any(|kv| kv.unwrap().0.is_empty()));
    assert!(s.delete(ns, b"").unwrap());
    assert_eq!(s.get(ns, b"").unwrap(), None);
    let dev = Arc::new(MemDevice::new(32 * MIB, 512));
    let limited = Options {
        value_bytes_max: 300_000,
        ..opts()
    };
    let s = Store::open_devices(vec![dev as Arc<dyn Device>], &limited).unwrap();
    let ns = s.default_namespace();
    let big = vec![0u8; MIB as usize];
    let err = s.put(ns, b"k", &big).unwrap_err();
    assert!(matches!(err, Error::ValueTooLarge { .. }), "{err}");
    assert!(err.to_string().contains("value too large"), "{err}");
}

#[test]
fn values_of_many_sizes_round_trip_and_ranges() {
    let (_dev, s) = mem_store(64 * MIB);
    let ns = s.default_namespace();
    for (i, len) in [0usize, 1, 471, 472, 473, 512, 4096, 65_536, 150_000]
        .into_iter()
        .enumerate()
    {
        let v: Vec<u8> = (0..len).map(|j| (j * 31 + i) as u8).collect();
        let key = format!("key{i}");
        s.put(ns, key.as_bytes(), &v).unwrap();
        assert_eq!(s.get(ns, key.as_bytes()).unwrap().unwrap(), v, "len {len}");
        let r = s.get_range(ns, key.as_bytes(), 3, 100).unwrap().unwrap();
        assert_eq!(r, v[3.min(len)..103.min(len)]);
    }
    assert_eq!(s.get_range(ns, b"nope", 0, 10).unwrap(), None);
}

#[test]
fn batches_namespaces_iteration() {
    let (dev, s) = mem_store(64 * MIB);
    let ns = s.default_namespace();
    let users = s.create_namespace("users").unwrap();
    assert!(matches!(
        s.create_namespace("users"),
        Err(Error::NamespaceExists(_))
    ));
    s.put(ns, b"a", b"default-a").unwrap();
    s.put(users, b"a", b"users-a").unwrap();
    assert_eq!(s.get(ns, b"a").unwrap().as_deref(), Some(&b"default-a"[..]));
    assert_eq!(
        s.get(users, b"a").unwrap().as_deref(),
        Some(&b"users-a"[..])
    );
    let keys: Vec<String> = (0..100).map(|i| format!("u{i}")).collect();
    let ops: Vec<WriteOp> = keys
        .iter()
        .map(|k| WriteOp::Put {
            key: k.as_bytes(),
            value: k.as_bytes(),
        })
        .collect();
    s.write_batch(users, &ops).unwrap();
    s.write_batch(
        users,
        &[
            WriteOp::Delete { key: b"u0" },
            WriteOp::Put {
                key: b"u1",
                value: b"new",
            },
        ],
    )
    .unwrap();
    assert_eq!(s.count(users), 100);
    let got = s.get_many(users, &[b"u0", b"u1", b"u2"]).unwrap();
    assert_eq!(got, vec![None, Some(b"new".to_vec()), Some(b"u2".to_vec())]);
    // More keys than one prefetch batch, in order, absent ones included.
    let many: Vec<String> = (0..40).map(|i| format!("u{}", i * 3)).collect();
    let keys: Vec<&[u8]> = many.iter().map(|k| k.as_bytes()).collect();
    for k in &keys {
        s.prefetch(users, k); // a hint: changes nothing
    }
    let got = s.get_many(users, &keys).unwrap();
    for (k, v) in many.iter().zip(&got) {
        let want = match k.as_str() {
            "u0" => None,
            "u1" => Some(b"new".to_vec()),
            k if k[1..].parse::<u32>().unwrap() < 100 => Some(k.as_bytes().to_vec()),
            _ => None,
        };
        assert_eq!(v, &want, "{k}");
    }
    let mut seen: Vec<Vec<u8>> = s.iter(users).map(|r| r.unwrap().0).collect();
    seen.sort();
    assert_eq!(seen.len(), 100);
    seen.dedup();
    assert_eq!(seen.len(), 100);
    let names: Vec<String> = s.namespaces().into_iter().map(|n| n.0).collect();
    assert_eq!(names, vec!["default".to_string(), "users".to_string()]);

    s.clear(users).unwrap();
    assert_eq!(s.count(users), 0);
    assert_eq!(s.get(users, b"a").unwrap(), None);
    assert_eq!(s.iter(users).count(), 0);
    s.put(users, b"after", b"clear").unwrap();
    let tmp = s.create_namespace("tmp").unwrap();
    s.put(tmp, b"x", b"y").unwrap();
    s.drop_namespace("tmp").unwrap();
    assert!(s.namespace("tmp").is_none());
    assert!(matches!(s.get(tmp, b"x"), Err(Error::NoSuchNamespace(_))));

    // Both a clean reopen and a crash reopen keep all of that.
    s.close().unwrap();
    for crash in [false, true] {
        let dev2 = if crash {
            Arc::new(dev.snapshot().unwrap())
        } else {
            dev.clone()
        };
        let s = reopen(dev2.clone());
        assert_eq!(s.open_report().clean, !crash);
        let users = s.namespace("users").unwrap();
        assert_eq!(
            s.get(users, b"after").unwrap().as_deref(),
            Some(&b"clear"[..])
        );
        assert_eq!(s.get(users, b"u5").unwrap(), None);
        assert!(s.namespace("tmp").is_none());
        assert_eq!(s.count(users), 1);
        assert_eq!(
            s.get(s.default_namespace(), b"a").unwrap().as_deref(),
            Some(&b"default-a"[..])
        );
        drop(s);
        let report = check_devices(vec![dev2 as Arc<dyn Device>], &Options::default()).unwrap();
        assert!(report.is_ok(), "{report}");
    }
}

#[test]
fn clean_reopen_uses_checkpoint_and_crash_reopen_scans() {
    let (dev, s) = mem_store(64 * MIB);
    let ns = s.default_namespace();
    for i in 0..2000u32 {
        s.put(ns, format!("k{i}").as_bytes(), &i.to_le_bytes())
            .unwrap();
    }
    for i in 0..500u32 {
        s.delete(ns, format!("k{i}").as_bytes()).unwrap();
    }
    s.close().unwrap();
    let report = check_devices(vec![dev.clone() as Arc<dyn Device>], &Options::default()).unwrap();
    assert!(report.is_ok() && report.checkpoint_compared, "{report}");
    let s = reopen(dev.clone());
    assert!(s.open_report().clean);
    assert_eq!(s.open_report().keys, 1500);
    assert_eq!(s.get(ns, b"k1999").unwrap().unwrap(), 1999u32.to_le_bytes());
    s.put(ns, b"later", b"x").unwrap();
    // Crash: no checkpoint (it was invalidated at open), the log has it all.
    // The log scan tells the caller's progress callback each segment.
    drop(s);
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let o = Options {
        progress: Some(Progress::new({
            let seen = seen.clone();
            move |done, total| seen.lock().unwrap().push((done, total))
        })),
        ..Options::default()
    };
    let s = Store::open_devices(vec![dev as Arc<dyn Device>], &o).unwrap();
    assert!(!s.open_report().clean);
    let mut seen = seen.lock().unwrap().clone();
    seen.sort_unstable();
    let total = seen[0].1;
    assert!(total >= 1, "{seen:?}");
    assert_eq!(
        seen,
        (1..=total).map(|d| (d, total)).collect::<Vec<_>>(),
        "one report per scanned segment"
    );
    assert_eq!(s.open_report().keys, 1501);
    assert_eq!(s.get(ns, b"k10").unwrap(), None);
    assert_eq!(s.get(ns, b"later").unwrap().as_deref(), Some(&b"x"[..]));
}

#[test]
fn gc_reclaims_overwritten_space_and_reports_write_amplification() {
    // 16 MiB store, 1 MiB segments: overwrite a 4 MiB working set many times.
    let (dev, s) = mem_store(16 * MIB);
    let ns = s.default_namespace();
    let value = vec![7u8; 3000];
    for round in 0..12u32 {
        for i in 0..1000u32 {
            let mut v = value.clone();
            v[..4].copy_from_slice(&round.to_le_bytes());
            s.put(ns, format!("key{i}").as_bytes(), &v).unwrap();
        }
    }
    let st = s.stats();
    assert!(st.gc_segments_collected > 0, "{st}");
    assert!(st.write_amplification >= 1.0, "{st}");
    for i in 0..1000u32 {
        let v = s.get(ns, format!("key{i}").as_bytes()).unwrap().unwrap();
        assert_eq!(&v[..4], &11u32.to_le_bytes());
    }
    drop(s);
    let s = reopen(dev.clone());
    assert_eq!(s.open_report().keys, 1000);
    for i in (0..1000u32).step_by(37) {
        let v = s.get(ns, format!("key{i}").as_bytes()).unwrap().unwrap();
        assert_eq!(&v[..4], &11u32.to_le_bytes());
    }
    drop(s);
    let report = check_devices(vec![dev as Arc<dyn Device>], &Options::default()).unwrap();
    assert!(report.is_ok(), "{report}");
}

#[test]
fn deleted_keys_stay_deleted_across_gc_and_recovery() {
    let (dev, s) = mem_store(16 * MIB);
    let ns = s.default_namespace();
    let v = vec![1u8; 2000];
    for i in 0..300u32 {
        s.put(ns, format!("gone{i}").as_bytes(), &v).unwrap();
    }
    for i in 0..300u32 {
        s.delete(ns, format!("gone{i}").as_bytes()).unwrap();
    }
    // Churn so that GC collects the segments holding puts and tombstones.
    for round in 0..10u32 {
        for i in 0..1000u32 {
            s.put(
                ns,
                format!("churn{i}").as_bytes(),
                &round.to_le_bytes().repeat(700),
            )
            .unwrap();
        }
    }
    assert!(s.stats().gc_segments_collected > 0);
    drop(s);
    let s = reopen(dev);
    for i in 0..300u32 {
        assert_eq!(
            s.get(ns, format!("gone{i}").as_bytes()).unwrap(),
            None,
            "gone{i} came back"
        );
    }
    assert_eq!(s.count(ns), 1000);
}

#[test]
fn store_full_is_an_error_not_a_hang() {
    let (_dev, s) = mem_store(8 * MIB);
    let ns = s.default_namespace();
    let v = vec![3u8; 60_000];
    let mut err = None;
    for i in 0..1000u32 {
        if let Err(e) = s.put(ns, format!("fill{i}").as_bytes(), &v) {
            err = Some(e);
            break;
        }
    }
    let err = err.expect("an 8 MiB store cannot hold 60 MB");
    assert!(matches!(err, Error::StoreFull { .. }), "{err}");
    // Deleting makes room again.
    for i in 0..20u32 {
        s.delete(ns, format!("fill{i}").as_bytes()).unwrap();
    }
    s.collect_garbage().unwrap();
    s.put(ns, b"after-full", b"ok").unwrap();
}

#[test]
fn file_store_round_trip() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = dir.path().join("store");
    let o = Options::default()
        .create_bytes(256 * MIB)
        .segment_bytes(8 * MIB);
    let s = Store::open(&path, &o).unwrap();
    assert!(s.open_report().created);
    let ns = s.default_namespace();
    for i in 0..100u32 {
        s.put(ns, format!("f{i}").as_bytes(), &vec![i as u8; 5000])
            .unwrap();
    }
    s.close().unwrap();
    let s = Store::open(&path, &Options::default()).unwrap();
    assert!(s.open_report().clean);
    assert_eq!(s.get(ns, b"f42").unwrap().unwrap(), vec![42u8; 5000]);
    drop(s);
    let report = nvdepot_engine::check(&path, &Options::default()).unwrap();
    assert!(report.is_ok(), "{report}");
    let err = Store::open(&dir.path().join("empty"), &Options::default())
        .err()
        .unwrap();
    assert!(err.to_string().contains("no nvdepot store here"), "{err}");
}

#[test]
fn striping_over_two_devices() {
    let a = Arc::new(MemDevice::named("a", 16 * MIB, 512));
    let b = Arc::new(MemDevice::named("b", 16 * MIB, 512));
    let devs = || vec![a.clone() as Arc<dyn Device>, b.clone() as Arc<dyn Device>];
    let s = Store::open_devices(devs(), &opts()).unwrap();
    let ns = s.default_namespace();
    for i in 0..3000u32 {
        s.put(ns, format!("s{i}").as_bytes(), &vec![i as u8; 3000])
            .unwrap();
    }
    // Segments alternate between the devices, so both took writes.
    assert!(a.bytes_written() > 4 * MIB && b.bytes_written() > 4 * MIB);
    drop(s);
    // Order of the devices given does not matter: superblocks say.
    let swapped = vec![b.clone() as Arc<dyn Device>, a.clone() as Arc<dyn Device>];
    let s = Store::open_devices(swapped, &Options::default()).unwrap();
    for i in (0..3000u32).step_by(7) {
        assert_eq!(
            s.get(ns, format!("s{i}").as_bytes()).unwrap().unwrap(),
            vec![i as u8; 3000]
        );
    }
    drop(s);
    let err = Store::open_devices(vec![a.clone() as Arc<dyn Device>], &Options::default())
        .err()
        .unwrap();
    assert!(
        err.to_string().contains("2 devices") || err.to_string().contains("device"),
        "{err}"
    );
    assert!(check_devices(devs(), &Options::default()).unwrap().is_ok());
}

#[test]
fn versions_make_compare_and_swap() {
    let (_dev, s) = mem_store(32 * MIB);
    let ns = s.default_namespace();
    let v1 = s
        .put_versioned(ns, b"k", b"a", PutMode::Upsert)
        .unwrap()
        .unwrap();
    let (val, ver) = s.get_versioned(ns, b"k").unwrap().unwrap();
    assert_eq!((val.as_slice(), ver), (&b"a"[..], v1));
    let v2 = s
        .put_versioned(ns, b"k", b"b", PutMode::IfVersion(v1))
        .unwrap()
        .unwrap();
    assert!(v2 > v1);
    assert_eq!(
        s.put_versioned(ns, b"k", b"c", PutMode::IfVersion(v1))
            .unwrap(),
        None
    );
    assert_eq!(
        s.put_versioned(ns, b"absent", b"c", PutMode::IfVersion(v1))
            .unwrap(),
        None
    );
    use nvdepot_engine::DeleteOutcome;
    assert_eq!(
        s.delete_versioned(ns, b"k", Some(v1)).unwrap(),
        DeleteOutcome::VersionMismatch
    );
    assert_eq!(
        s.delete_versioned(ns, b"k", Some(v2)).unwrap(),
        DeleteOutcome::Deleted
    );
    assert_eq!(
        s.delete_versioned(ns, b"k", None).unwrap(),
        DeleteOutcome::NotFound
    );
}

#[test]
fn cache_mode_evicts_oldest_segments_and_never_resurrects_stale_values() {
    let dev = Arc::new(MemDevice::new(12 * MIB, 512));
    let o = Options {
        cache_mode: true,
        sync: false,
        ..opts()
    };
    let s = Store::open_devices(vec![dev.clone() as Arc<dyn Device>], &o).unwrap();
    let ns = s.default_namespace();
    // 40 MB of writes into an 11 MiB store: puts never fail.
    for round in 0..4u32 {
        for i in 0..2500u32 {
            let mut v = vec![round as u8; 4000];
            v[..4].copy_from_slice(&i.to_le_bytes());
            s.put(ns, format!("c{i}").as_bytes(), &v).unwrap();
        }
    }
    let st = s.stats();
    assert!(st.evictions > 0, "{st}");
    assert!(s.count(ns) < 2500 && s.count(ns) > 0);
    // Whatever is present holds the newest value. (GC may still be
    // evicting while we look, so the count can only fall meanwhile.)
    let before = s.count(ns);
    let mut present = 0;
    for i in 0..2500u32 {
        if let Some(v) = s.get(ns, format!("c{i}").as_bytes()).unwrap() {
            assert_eq!(v[4], 3, "c{i} holds a stale value");
            present += 1;
        }
    }
    let after = s.count(ns);
    assert!(
        after <= present && present <= before,
        "{after} <= {present} <= {before}"
    );
    drop(s);
    // After a crash: still only newest values, never an evicted one's older copy.
    let s = Store::open_devices(vec![dev as Arc<dyn Device>], &o).unwrap();
    for i in 0..2500u32 {
        if let Some(v) = s.get(ns, format!("c{i}").as_bytes()).unwrap() {
            assert_eq!(v[4], 3, "c{i} came back stale after restart");
        }
    }
}

#[test]
fn overwrites_via_the_location_cache_stay_exact_across_gc() {
    for entries in [0usize, 1 << 12] {
        let dev = Arc::new(MemDevice::new(16 * MIB, 512));
        let o = Options {
            location_cache_entries: entries,
            ..opts()
        };
        let s = Store::open_devices(vec![dev.clone() as Arc<dyn Device>], &o).unwrap();
        let ns = s.default_namespace();
        for round in 0..8u32 {
            for i in 0..800u32 {
                let v = [round.to_le_bytes().to_vec(), vec![0u8; 3000]].concat();
                s.put(ns, format!("k{i}").as_bytes(), &v).unwrap();
            }
            if round % 3 == 2 {
                s.collect_garbage().unwrap();
            }
            for i in (0..800u32).step_by(5) {
                assert!(s.delete(ns, format!("k{i}").as_bytes()).unwrap());
            }
        }
        assert!(s.stats().gc_segments_collected > 0);
        assert_eq!(s.count(ns), 640, "entries {entries}");
        assert_eq!(s.stats().keys, 640);
        for i in 0..800u32 {
            let got = s.get(ns, format!("k{i}").as_bytes()).unwrap();
            if i % 5 == 0 {
                assert_eq!(got, None);
            } else {
                assert_eq!(&got.unwrap()[..4], &7u32.to_le_bytes());
            }
        }
        drop(s);
        let s = Store::open_devices(vec![dev as Arc<dyn Device>], &Options::default()).unwrap();
        assert_eq!(s.count(ns), 640);
    }
}

/// `clear` then writes of the keys it removed: the namespace's count is
/// the number of keys in it, whatever the background purge of the old
/// records does meanwhile (found by tests/resp_shapes.rs: FLUSHALL then
/// an MSET of keys that existed left DBSIZE short for good).
#[test]
fn count_after_clear_and_rewrites_is_exact() {
    let (_dev, s) = mem_store(64 * MIB);
    let ns = s.default_namespace();
    for round in 0..50u32 {
        for i in 0..300u32 {
            s.put(ns, format!("m{}", (i * 7 + round) % 300).as_bytes(), b"v")
                .unwrap();
        }
        s.clear(ns).unwrap();
        let keys: std::collections::HashSet<u32> =
            (0..74u32).map(|i| (i * 13 + round * 5) % 300).collect();
        for k in &keys {
            s.put(ns, format!("m{k}").as_bytes(), b"w").unwrap();
        }
        assert_eq!(s.count(ns), keys.len() as u64, "round {round}");
    }
}

/// `clear` gives the namespace a fresh physical id in one step: a put or
/// get racing it never finds the namespace missing (it did: between the
/// old id's removal and the new one's insertion, a racing write failed
/// with "no such namespace").
#[test]
fn writes_racing_a_clear_never_find_the_namespace_missing() {
    let (_dev, s) = mem_store(64 * MIB);
    let ns = s.default_namespace();
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        for t in 0..2u32 {
            let (s, done) = (&s, &done);
            scope.spawn(move || {
                let mut i = 0u32;
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    let k = format!("r{t}-{}", i % 64);
                    s.put(ns, k.as_bytes(), b"v").unwrap();
                    s.get(ns, k.as_bytes()).unwrap();
                    i += 1;
                }
            });
        }
        for _ in 0..3000 {
            s.clear(ns).unwrap();
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
    });
}

/// Keys of neighbouring namespaces whose two hashes collide (xxh3 seeded
/// with the namespace id folds the seed in linearly for short keys:
/// namespace 1's `m10` and namespace 2's `m11` hash alike). A write of one
/// must never take the other's record for its own: it replaced it, and
/// the first key was lost (issue 35; found as a DBSIZE difference).
#[test]
fn keys_whose_hashes_collide_across_namespaces_stay_apart() {
    let (dev, s) = mem_store(64 * MIB);
    let a = s.default_namespace();
    let b = s.create_namespace("second").unwrap();
    for i in 0..200u32 {
        s.put(a, format!("m{i}").as_bytes(), format!("a{i}").as_bytes())
            .unwrap();
    }
    for i in 0..200u32 {
        s.put(b, format!("m{i}").as_bytes(), format!("b{i}").as_bytes())
            .unwrap();
    }
    let check = |s: &Store| {
        for i in 0..200u32 {
            let k = format!("m{i}");
            assert_eq!(
                s.get(a, k.as_bytes()).unwrap(),
                Some(format!("a{i}").into_bytes()),
                "{k} in a"
            );
            assert_eq!(
                s.get(b, k.as_bytes()).unwrap(),
                Some(format!("b{i}").into_bytes()),
                "{k} in b"
            );
        }
        assert_eq!((s.count(a), s.count(b)), (200, 200));
    };
    check(&s);
    // And after a crash (the index rebuilt from the log).
    drop(s);
    let s = reopen(dev);
    check(&s);
}

/// Iteration reads either every segment or, when few keys are indexed,
/// each indexed record: both must yield exactly the namespace's live keys
/// and values (overwritten, deleted, other namespaces', cleared ones' and
/// large values' chunks left out; a large value whole).
#[test]
fn iteration_by_index_and_by_scan_agree() {
    use nvdepot_engine::IterPlan;
    use std::collections::BTreeMap;
    let (_dev, s) = mem_store(64 * MIB);
    let ns = s.default_namespace();
    let other = s.create_namespace("other").unwrap();
    let gone = s.create_namespace("gone").unwrap();
    let mut want: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    for i in 0..300u32 {
        let key = format!("k{}", i % 120).into_bytes();
        let value = format!("v{i}")
            .repeat(1 + (i as usize % 7) * 50)
            .into_bytes();
        s.put(ns, &key, &value).unwrap();
        want.insert(key.clone(), value);
        s.put(other, &key, b"other").unwrap();
        s.put(gone, &key, b"gone").unwrap();
        if i % 9 == 0 {
            let k = format!("k{}", (i * 7) % 120).into_bytes();
            s.delete(ns, &k).unwrap();
            want.remove(&k);
        }
    }
    s.put(ns, b"", b"the empty key").unwrap();
    want.insert(Vec::new(), b"the empty key".to_vec());
    let big: Vec<u8> = (0..3 * MIB as usize).map(|i| (i % 251) as u8).collect();
    s.put(ns, b"big", &big).unwrap();
    s.put(ns, b"big", &big[1..]).unwrap();
    want.insert(b"big".to_vec(), big[1..].to_vec());
    s.clear(gone).unwrap();
    for plan in [IterPlan::Scan, IterPlan::Index, IterPlan::Cheaper] {
        let mut got: Vec<(Vec<u8>, Vec<u8>)> = s.iter_by(ns, plan).map(Result::unwrap).collect();
        got.sort();
        let expected: Vec<(Vec<u8>, Vec<u8>)> = want.clone().into_iter().collect();
        assert_eq!(got.len(), expected.len(), "{plan:?}");
        assert!(got == expected, "{plan:?}: the keys and values differ");
        assert_eq!(s.iter_by(gone, plan).count(), 0, "{plan:?}");
        assert_eq!(s.iter_by(other, plan).count(), 120, "{plan:?}");
    }
}

/// A cleared namespace's space is reused: the background purge runs even
/// while writers wait for space (it defers to collection only while
/// collection can free something).
#[test]
fn space_of_a_cleared_namespace_is_reused_at_once() {
    let (_dev, s) = mem_store(24 * MIB);
    let ns = s.create_namespace("flushed").unwrap();
    let value = vec![7u8; 100_000];
    for round in 0..4 {
        for i in 0..140 {
            s.put(ns, format!("k{round}-{i}").as_bytes(), &value)
                .unwrap_or_else(|e| panic!("round {round}, put {i}: {e}"));
        }
        s.clear(ns).unwrap();
    }
    assert_eq!(s.count(ns), 0);
}
