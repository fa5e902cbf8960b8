//! The update step (`Store::update`, `update_async`): read-modify-write of
//! one key, atomic per key, against concurrent updaters and blind writers,
//! from threads and from tasks on several io_uring runtimes, and across a
//! crash.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use nvdepot_engine::{Change, Current, Options, Store, Updated};
use nvdepot_io::uring::{self, Runtime};
use nvdepot_io::{Device, MemDevice};

const MIB: u64 = 1 << 20;

fn mem_store() -> (Arc<MemDevice>, Arc<Store>) {
    let dev = Arc::new(MemDevice::new(32 * MIB, 512));
    let opts = Options {
        segment_bytes: MIB,
        ..Options::default()
    }
    .create_bytes(0);
    let store = Store::open_devices(vec![dev.clone() as Arc<dyn Device>], &opts).expect("create");
    (dev, Arc::new(store))
}

/// `incr` as an update: the counter's next value (absent counts as 0).
fn incr(cur: Option<Current<'_>>) -> (Change, u64) {
    let n = cur.map_or(0, |c| {
        std::str::from_utf8(c.value)
            .expect("utf-8")
            .parse::<u64>()
            .expect("a number")
    }) + 1;
    (Change::Put(n.to_string().into_bytes()), n)
}

#[test]
fn update_keeps_puts_and_deletes() {
    let (_dev, s) = mem_store();
    let ns = s.default_namespace();
    // Absent: the closure sees None; Keep writes nothing.
    let (seen, done) = s.update(ns, b"k", |c| (Change::Keep, c.is_none())).unwrap();
    assert!(seen);
    assert_eq!(done, Updated::Kept);
    assert_eq!(s.get(ns, b"k").unwrap(), None);
    // Delete of an absent key: nothing.
    let ((), done) = s.update(ns, b"k", |_| (Change::Delete, ())).unwrap();
    assert_eq!(done, Updated::Kept);
    // Put creates, with the version get_versioned then reports.
    let ((), done) = s
        .update(ns, b"k", |_| (Change::Put(b"v1".to_vec()), ()))
        .unwrap();
    let Updated::Put(v1) = done else {
        panic!("{done:?}")
    };
    assert_eq!(
        s.get_versioned(ns, b"k").unwrap(),
        Some((b"v1".to_vec(), v1))
    );
    assert_eq!(s.count(ns), 1);
    // The closure sees the value and version; a put replaces.
    let ((), done) = s
        .update(ns, b"k", |c| {
            let c = c.expect("present");
            assert_eq!((c.value, c.version), (&b"v1"[..], v1));
            (Change::Put([c.value, b"+"].concat()), ())
        })
        .unwrap();
    assert!(matches!(done, Updated::Put(v2) if v2 > v1));
    assert_eq!(s.get(ns, b"k").unwrap().as_deref(), Some(&b"v1+"[..]));
    assert_eq!(s.count(ns), 1);
    let ((), done) = s.update(ns, b"k", |_| (Change::Delete, ())).unwrap();
    assert_eq!(done, Updated::Deleted);
    assert_eq!(s.get(ns, b"k").unwrap(), None);
    assert_eq!(s.count(ns), 0);
    // Limits are errors, never panics.
    let too_long = vec![b'k'; 70_000];
    assert!(s.update(ns, &too_long, |_| (Change::Keep, ())).is_err());
    let big = vec![0u8; s.value_bytes_max() + 1];
    assert!(s
        .update(ns, b"k", |_| (Change::Put(big.clone()), ()))
        .is_err());
}

/// Threads incrementing one counter while another thread overwrites an
/// unrelated key of the same store and reads the counter: no increment is
/// lost and every increment returns a distinct number.
#[test]
fn concurrent_increments_from_threads_are_never_lost() {
    let (dev, s) = mem_store();
    let ns = s.default_namespace();
    const THREADS: u64 = 4;
    const EACH: u64 = 250;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let s = s.clone();
            let seen = seen.clone();
            std::thread::spawn(move || {
                let mut mine = Vec::new();
                for i in 0..EACH {
                    let (n, done) = s.update(ns, b"ctr", incr).unwrap();
                    assert!(matches!(done, Updated::Put(_)));
                    mine.push(n);
                    if i % 16 == t {
                        s.put(ns, format!("other-{t}").as_bytes(), b"x").unwrap();
                    }
                }
                seen.lock().unwrap().extend(mine);
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let seen = seen.lock().unwrap();
    let distinct: HashSet<u64> = seen.iter().copied().collect();
    assert_eq!(distinct.len() as u64, THREADS * EACH, "duplicate replies");
    assert_eq!(distinct, (1..=THREADS * EACH).collect());
    assert_eq!(
        s.get(ns, b"ctr").unwrap(),
        Some((THREADS * EACH).to_string().into_bytes())
    );
    // Every acknowledged increment survives a crash.
    let s = Arc::try_unwrap(s).ok().expect("sole owner");
    drop(s);
    let (crashed, _) = dev.crash(7);
    let crashed: Arc<dyn Device> = Arc::new(crashed);
    let s = Store::open_devices(vec![crashed], &Options::default()).unwrap();
    let ns = s.default_namespace();
    assert_eq!(
        s.get(ns, b"ctr").unwrap(),
        Some((THREADS * EACH).to_string().into_bytes())
    );
}

/// Tasks on two io_uring runtimes (so two threads), many per runtime, each
/// appending its own byte to one key, while a blocking thread does the
/// same: every append is in the final value exactly once.
#[test]
fn concurrent_appends_from_tasks_on_two_runtimes() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        segment_bytes: MIB,
        ..Options::default()
    }
    .create_bytes(64 * MIB);
    let s = Arc::new(Store::open(dir.path(), &opts).unwrap());
    let ns = s.default_namespace();
    const TASKS: usize = 8;
    const EACH: usize = 40;
    let runtimes: Vec<_> = (0..2u8)
        .map(|r| {
            let s = s.clone();
            std::thread::spawn(move || {
                let Ok(rt) = Runtime::new() else {
                    return; // no io_uring here: the blocking thread still runs
                };
                rt.block_on(async move {
                    let tasks: Vec<_> = (0..TASKS)
                        .map(|t| {
                            let s = s.clone();
                            uring::spawn(async move {
                                let byte = b'a' + (r * TASKS as u8) + t as u8;
                                for _ in 0..EACH {
                                    s.update_async(ns, b"log", |c| {
                                        let mut v = c.map_or(Vec::new(), |c| c.value.to_vec());
                                        v.push(byte);
                                        (Change::Put(v), ())
                                    })
                                    .await
                                    .unwrap();
                                }
                            })
                        })
                        .collect();
                    for t in tasks {
                        t.await;
                    }
                });
            })
        })
        .collect();
    for _ in 0..EACH {
        s.update(ns, b"log", |c| {
            let mut v = c.map_or(Vec::new(), |c| c.value.to_vec());
            v.push(b'Z');
            (Change::Put(v), ())
        })
        .unwrap();
    }
    for r in runtimes {
        r.join().unwrap();
    }
    let v = s.get(ns, b"log").unwrap().unwrap_or_default();
    let count = |b: u8| v.iter().filter(|&&x| x == b).count();
    assert_eq!(count(b'Z'), EACH);
    let ring_bytes = v.len() - EACH;
    assert!(
        ring_bytes == 0 || ring_bytes == 2 * TASKS * EACH,
        "{ring_bytes}"
    );
    if ring_bytes > 0 {
        for b in 0..(2 * TASKS) as u8 {
            assert_eq!(count(b'a' + b), EACH, "byte {}", (b'a' + b) as char);
        }
    }
}

/// `update_known_async`: given the caller's copy of the current version,
/// the update decides on it without reading the device; given a copy of
/// an older version, it reads the current record instead (and so never
/// decides on a stale copy).
#[test]
fn an_update_given_the_current_value_reads_nothing() {
    let (dev, s) = mem_store();
    let ns = s.default_namespace();
    s.put(ns, b"n", b"41").unwrap();
    let (_, v41) = s.get_versioned(ns, b"n").unwrap().unwrap();
    let Ok(rt) = Runtime::new() else {
        return; // no io_uring here
    };
    let known = |version, value| Some(nvdepot_engine::Known { version, value });
    let reads = dev.reads();
    let (n, _) = rt
        .block_on(s.update_known_async(ns, b"n", known(v41, b"41".as_slice()), incr))
        .unwrap();
    assert_eq!(n, 42);
    assert_eq!(
        dev.reads(),
        reads,
        "the current version's copy was read anyway"
    );
    // The copy is of version 41 now gone: the record is read.
    let (n, _) = rt
        .block_on(s.update_known_async(ns, b"n", known(v41, b"41".as_slice()), incr))
        .unwrap();
    assert_eq!(n, 43, "decided on a stale copy");
    assert!(dev.reads() > reads);
    // A copy that does not match any version (another key's) is read too.
    let (n, _) = rt
        .block_on(s.update_known_async(ns, b"n", known(1 << 60, b"7".as_slice()), incr))
        .unwrap();
    assert_eq!(n, 44);
    assert_eq!(s.get(ns, b"n").unwrap().unwrap(), b"44");
}
