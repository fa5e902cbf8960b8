//! Staged writes (`nvdepot_cache::staging`, what Redis scripts and
//! `EXEC` write through) over the in-memory fault-injecting device: the
//! staged code reads its own writes, nothing else sees them before the
//! commit, and after a crash in the middle of the commit all of them are
//! there or none.

use std::sync::Arc;

use nvdepot_cache::resp::{Change, Kind, RespStore};
use nvdepot_cache::staging::{self, Staging};
use nvdepot_cache::CacheStore;
use nvdepot_engine::Store;
use nvdepot_io::uring::run_ready as run;
use nvdepot_io::{Device, MemDevice};

const MIB: u64 = 1 << 20;
const NOW: u64 = 1_000;

fn open(dev: &Arc<MemDevice>, create: bool) -> RespStore {
    let mut opts = CacheStore::default_options().segment_bytes(MIB);
    opts.sync = true;
    opts.background_gc = false;
    if create {
        opts = opts.create_bytes(0);
    }
    let store = Store::open_devices(vec![Arc::clone(dev) as Arc<dyn Device>], &opts).expect("open");
    RespStore::new(CacheStore::over(store, 1 << 20), 2).unwrap()
}

fn get(resp: &RespStore, key: &str) -> Option<Vec<u8>> {
    run(resp.get(0, key.as_bytes(), NOW))
        .unwrap()
        .map(|v| v.data().to_vec())
}

fn incr(resp: &RespStore, key: &str) -> i64 {
    let (n, _) = run(resp.update(0, key.as_bytes(), NOW, |v| {
        let n = v.map_or(0, |v| {
            std::str::from_utf8(v.data()).unwrap().parse().unwrap()
        }) + 1i64;
        let put = Change::Put {
            kind: Kind::String,
            data: n.to_string().into_bytes(),
            expire_at_ms: 0,
        };
        (put, n)
    }))
    .unwrap();
    n
}

#[test]
fn staged_writes_are_read_back_inside_and_seen_outside_only_after_the_commit() {
    let dev = Arc::new(MemDevice::named("staging", 32 * MIB, 512));
    let resp = open(&dev, true);
    run(resp.set(0, b"old", b"1", 0)).unwrap();
    run(resp.set(0, b"gone", b"x", 0)).unwrap();
    let s = Arc::new(Staging::default());
    staging::stage(&s, || {
        run(resp.set(0, b"new", b"v", 0)).unwrap();
        assert_eq!(incr(&resp, "old"), 2);
        assert_eq!(incr(&resp, "old"), 3);
        let (_, done) = run(resp.update(0, b"gone", NOW, |_| (Change::Delete, ()))).unwrap();
        assert_eq!(done, nvdepot_cache::resp::Updated::Deleted);
        assert_eq!(get(&resp, "old").as_deref(), Some(&b"3"[..]));
        assert_eq!(get(&resp, "gone"), None);
        // Whole-database views merge the staged writes in.
        assert_eq!(resp.dbsize(0), 2);
        let mut keys = resp.keys(0, NOW).unwrap();
        keys.sort();
        assert_eq!(keys, vec![b"new".to_vec(), b"old".to_vec()]);
        // A guarded commit checks the staged version.
        let (_, version) = run(resp.get_for_write(0, b"new", NOW)).unwrap();
        let meta = Some((Kind::String, &b"w"[..], 0));
        assert!(!run(resp.commit(0, b"new", Some(1), meta, &[], || {})).unwrap());
        assert!(
            run(resp.commit(0, b"new", version, meta, &[(b"p", Some(b"page"))], || {})).unwrap()
        );
        assert_eq!(
            run(resp.page(0, b"p")).unwrap().as_deref(),
            Some(&b"page"[..])
        );
        // Code outside the staging sees the store as it was.
        staging::hidden(|| {
            assert_eq!(get(&resp, "old").as_deref(), Some(&b"1"[..]));
            assert_eq!(get(&resp, "gone").as_deref(), Some(&b"x"[..]));
            assert_eq!(get(&resp, "new"), None);
            assert_eq!(resp.dbsize(0), 2);
        });
    });
    assert_eq!(get(&resp, "new"), None, "nothing written before the commit");
    run(resp.cache().commit_staged(&s)).unwrap();
    assert!(s.is_empty());
    assert_eq!(get(&resp, "old").as_deref(), Some(&b"3"[..]));
    assert_eq!(get(&resp, "new").as_deref(), Some(&b"w"[..]));
    assert_eq!(get(&resp, "gone"), None);
    assert_eq!(
        run(resp.page(0, b"p")).unwrap().as_deref(),
        Some(&b"page"[..])
    );
    assert_eq!(resp.dbsize(0), 2);
    // ... and so does a restart.
    drop(resp);
    let resp = open(&dev, false);
    assert_eq!(get(&resp, "old").as_deref(), Some(&b"3"[..]));
    assert_eq!(get(&resp, "new").as_deref(), Some(&b"w"[..]));
    assert_eq!(get(&resp, "gone"), None);
}

/// The commit's flush fails and the device then loses, keeps or tears its
/// unflushed writes in any order: every staged key is at its new value
/// or every one at its old (a fresh key absent), in both databases and
/// the pages namespace.
#[test]
fn a_commit_cut_by_a_crash_leaves_all_of_its_writes_or_none() {
    let rounds: u64 = std::env::var("NVDEPOT_CACHE_CRASH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    let (mut all, mut none) = (0, 0);
    for seed in 0..rounds {
        let dev = Arc::new(MemDevice::named("staging", 32 * MIB, 512));
        let resp = open(&dev, true);
        let keys = 8 + (seed % 40) as usize;
        for i in 0..keys {
            run(resp.set(0, format!("k{i}").as_bytes(), b"old", 0)).unwrap();
        }
        let s = Arc::new(Staging::default());
        staging::stage(&s, || {
            for i in 0..keys {
                let value = vec![b'n'; 100 + 97 * i];
                run(resp.set(0, format!("k{i}").as_bytes(), &value, 0)).unwrap();
            }
            run(resp.set(1, b"fresh", b"f", 0)).unwrap();
            let (_, v) = run(resp.get_for_write(0, b"k0", NOW)).unwrap();
            let meta = Some((Kind::String, &b"n"[..], 0));
            assert!(run(resp.commit(0, b"k0", v, meta, &[(b"pg", Some(b"page"))], || {})).unwrap());
        });
        dev.fail_flush_after(0);
        assert!(run(resp.cache().commit_staged(&s)).is_err());
        drop(resp);
        let (after, _) = if seed % 2 == 0 {
            dev.crash(seed)
        } else {
            dev.crash_reordered(seed)
        };
        let resp = open(&Arc::new(after), false);
        let fresh = run(resp.get(1, b"fresh", NOW)).unwrap().is_some();
        let page = run(resp.page(0, b"pg")).unwrap().is_some();
        for i in 0..keys {
            let got = get(&resp, &format!("k{i}")).expect("every key was set before");
            let new = got != b"old";
            assert_eq!(new, fresh, "seed {seed}: k{i} new {new}, fresh key {fresh}");
            assert_eq!(new, page, "seed {seed}: k{i} new {new}, page {page}");
        }
        if fresh {
            all += 1;
        } else {
            none += 1;
        }
    }
    eprintln!("staged commits cut by a crash: {all} kept whole, {none} dropped whole");
}

/// Staged writes too large for one batch (values of a quarter segment)
/// are written key by key: all there after the commit.
#[test]
fn a_staging_too_large_for_one_batch_is_written_key_by_key() {
    let dev = Arc::new(MemDevice::named("staging", 64 * MIB, 512));
    let resp = open(&dev, true);
    let s = Arc::new(Staging::default());
    let value = vec![7u8; 200 << 10];
    staging::stage(&s, || {
        for i in 0..12 {
            run(resp.set(0, format!("big{i}").as_bytes(), &value, 0)).unwrap();
        }
        assert_eq!(resp.dbsize(0), 12);
    });
    assert!(!resp.batch_fits((0..12).map(|_| (4, value.len()))));
    run(resp.cache().commit_staged(&s)).unwrap();
    for i in 0..12 {
        assert_eq!(get(&resp, &format!("big{i}")).as_deref(), Some(&value[..]));
    }
    assert_eq!(resp.dbsize(0), 12);
}

/// A scratch staging over the current one reads its writes and keeps its
/// own: dropped, they never reach the parent or the store.
#[test]
fn a_scratch_staging_reads_through_and_writes_nothing() {
    let dev = Arc::new(MemDevice::named("staging", 32 * MIB, 512));
    let resp = open(&dev, true);
    run(resp.set(0, b"base", b"1", 0)).unwrap();
    let s = Arc::new(Staging::default());
    staging::stage(&s, || {
        run(resp.set(0, b"staged", b"2", 0)).unwrap();
        let scratch = Arc::new(Staging::scratch());
        staging::stage(&scratch, || {
            assert_eq!(get(&resp, "staged").as_deref(), Some(&b"2"[..]));
            assert_eq!(incr(&resp, "base"), 2);
            assert_eq!(incr(&resp, "staged"), 3);
        });
        assert_eq!(get(&resp, "base").as_deref(), Some(&b"1"[..]));
        assert_eq!(get(&resp, "staged").as_deref(), Some(&b"2"[..]));
    });
    run(resp.cache().commit_staged(&s)).unwrap();
    assert_eq!(get(&resp, "base").as_deref(), Some(&b"1"[..]));
    assert_eq!(get(&resp, "staged").as_deref(), Some(&b"2"[..]));
}
