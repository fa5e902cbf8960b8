//! The memcache binding: the memcache Storage semantics over the cache
//! store and the real engine.

use std::future::Future;

use nvdepot_cache::memcache::MemcacheStorage;
use nvdepot_cache::CacheStore;
use nvdepot_io::uring::Runtime;
use nvdepot_memcache::{ItemState, Storage, StoreMode, StoreOutcome};

thread_local! {
    static RUNTIME: Runtime = Runtime::new().expect("io_uring runtime");
}

/// Runs a storage call on this thread's io_uring runtime, as a server
/// worker does.
fn run<F: Future>(f: F) -> F::Output {
    RUNTIME.with(|rt| rt.block_on(f))
}

fn storage() -> (tempfile::TempDir, MemcacheStorage) {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let s = open(&dir.path().join("d"));
    (dir, s)
}

/// Opens (creating if needed) a 64 MiB store of 4 MiB segments at `path`.
fn open(path: &std::path::Path) -> MemcacheStorage {
    open_with_memory(path, 64 << 20)
}

fn open_with_memory(path: &std::path::Path, memory_bytes: u64) -> MemcacheStorage {
    let opts = CacheStore::default_options()
        .create_bytes(64 << 20)
        .segment_bytes(4 << 20);
    MemcacheStorage::new(CacheStore::open(path, opts, memory_bytes).unwrap())
}

#[test]
fn set_get_flags_exptime_cas() {
    let (_d, s) = storage();
    let StoreOutcome::Stored { cas } = run(s.store(b"k", b"hello", 42, 0, StoreMode::Set)).unwrap()
    else {
        panic!()
    };
    let item = run(s.get(b"k")).unwrap().unwrap();
    assert_eq!(
        (item.value.as_slice(), item.flags, item.exptime, item.cas),
        (&b"hello"[..], 42, 0, cas)
    );
    assert_eq!(
        run(s.store(b"k", b"x", 0, 0, StoreMode::Add)).unwrap(),
        StoreOutcome::NotStored
    );
    assert_eq!(
        run(s.store(b"nope", b"x", 0, 0, StoreMode::Replace)).unwrap(),
        StoreOutcome::NotStored
    );
    assert_eq!(
        run(s.store(b"k", b"x", 0, 0, StoreMode::Cas(cas + 1000))).unwrap(),
        StoreOutcome::Exists
    );
    assert_eq!(
        run(s.store(b"nope", b"x", 0, 0, StoreMode::Cas(cas))).unwrap(),
        StoreOutcome::NotFound
    );
    assert!(matches!(
        run(s.store(b"k", b"y", 1, 0, StoreMode::Cas(cas))).unwrap(),
        StoreOutcome::Stored { .. }
    ));
    // Expired items count as absent for add.
    run(s.store(b"old", b"v", 0, 1, StoreMode::Set)).unwrap();
    assert!(matches!(
        run(s.store(b"old", b"w", 0, 0, StoreMode::Add)).unwrap(),
        StoreOutcome::Stored { .. }
    ));
    assert_eq!(run(s.get(b"old")).unwrap().unwrap().value, b"w");
    assert_eq!(run(s.delete(b"k", Some(1))).unwrap(), StoreOutcome::Exists);
    assert!(matches!(
        run(s.delete(b"k", None)).unwrap(),
        StoreOutcome::Stored { .. }
    ));
    assert_eq!(run(s.delete(b"k", None)).unwrap(), StoreOutcome::NotFound);
    s.flush_all().unwrap();
    assert_eq!(run(s.get(b"old")).unwrap(), None);
    let stats = s.stats();
    assert!(
        stats.iter().any(|(k, v)| k == "curr_items" && v == "0"),
        "{stats:?}"
    );
}

/// touch/gat keep the CAS unique (as memcached); later writes change it;
/// CAS and delete-with-CAS compare against the kept unique, also after a
/// restart.
#[test]
fn touch_keeps_the_cas_unique() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = dir.path().join("d");
    let s = open(&path);
    let StoreOutcome::Stored { cas } = run(s.store(b"k", b"v", 7, 0, StoreMode::Set)).unwrap()
    else {
        panic!()
    };
    assert_eq!(
        run(s.store(b"k", b"v", 7, 100, StoreMode::Touch(cas + 1))).unwrap(),
        StoreOutcome::Exists
    );
    assert_eq!(
        run(s.store(b"k", b"v", 7, 4_000_000_000, StoreMode::Touch(cas))).unwrap(),
        StoreOutcome::Stored { cas }
    );
    s.close().unwrap();
    let s = open(&path);
    let item = run(s.get(b"k")).unwrap().unwrap();
    assert_eq!((item.exptime, item.cas), (4_000_000_000, cas));
    assert_eq!(
        run(s.store(b"k", b"v", 7, 0, StoreMode::Touch(cas))).unwrap(),
        StoreOutcome::Stored { cas }
    );
    let StoreOutcome::Stored { cas: new } =
        run(s.store(b"k", b"w", 7, 0, StoreMode::Cas(cas))).unwrap()
    else {
        panic!()
    };
    assert_ne!(new, cas);
    assert_eq!(run(s.get(b"k")).unwrap().unwrap().cas, new);
    run(s.store(b"k", b"w", 7, 0, StoreMode::Touch(new))).unwrap();
    assert_eq!(
        run(s.delete(b"k", Some(cas))).unwrap(),
        StoreOutcome::Exists
    );
    assert!(matches!(
        run(s.delete(b"k", Some(new))).unwrap(),
        StoreOutcome::Stored { .. }
    ));
    assert_eq!(run(s.get(b"k")).unwrap(), None);
}

/// Meta marks (stale, win token sent) live in the record: one winner per
/// item, kept CAS, and the marks survive a restart.
#[test]
fn meta_marks_are_stored_with_the_item() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = dir.path().join("d");
    let stale = ItemState {
        stale: true,
        token_sent: false,
        key_binary: true,
    };
    let s = open(&path);
    let StoreOutcome::Stored { cas } =
        run(s.store_item(b"k", b"v", 3, 0, stale, StoreMode::Set)).unwrap()
    else {
        panic!()
    };
    let won = ItemState {
        stale: true,
        token_sent: true,
        key_binary: true,
    };
    assert_eq!(
        run(s.store_item(b"k", b"v", 3, 0, won, StoreMode::Win(cas))).unwrap(),
        StoreOutcome::Stored { cas }
    );
    assert_eq!(
        run(s.store_item(b"k", b"v", 3, 0, won, StoreMode::Win(cas))).unwrap(),
        StoreOutcome::NotStored
    );
    s.close().unwrap();
    let s = open(&path);
    let item = run(s.get(b"k")).unwrap().unwrap();
    assert_eq!((item.cas, item.state, item.flags), (cas, won, 3));
    assert_eq!(
        run(s.store_item(b"k", b"v", 3, 0, won, StoreMode::Win(cas))).unwrap(),
        StoreOutcome::NotStored
    );
    // A plain set clears the marks.
    run(s.store(b"k", b"w", 0, 0, StoreMode::Set)).unwrap();
    assert_eq!(
        run(s.get(b"k")).unwrap().unwrap().state,
        ItemState::default()
    );
}

#[test]
fn dram_tier_never_serves_a_stale_item() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let s = open_with_memory(&dir.path().join("d"), 8 << 20);
    run(s.store(b"k", b"v1", 0, 0, StoreMode::Set)).unwrap();
    assert_eq!(run(s.get(b"k")).unwrap().unwrap().value, b"v1"); // fills the DRAM tier
    assert_eq!(run(s.get(b"k")).unwrap().unwrap().value, b"v1"); // served from it
    run(s.store(b"k", b"v2", 0, 0, StoreMode::Set)).unwrap();
    assert_eq!(run(s.get(b"k")).unwrap().unwrap().value, b"v2");
    run(s.delete(b"k", None)).unwrap();
    assert_eq!(run(s.get(b"k")).unwrap(), None);
    run(s.store(b"k", b"v3", 0, 0, StoreMode::Set)).unwrap();
    assert_eq!(run(s.get(b"k")).unwrap().unwrap().value, b"v3");
    s.flush_all().unwrap();
    assert_eq!(run(s.get(b"k")).unwrap(), None);
    let stats = s.stats();
    let hits = stats
        .iter()
        .find(|(k, _)| k == "nvdepot_dram_hits")
        .unwrap();
    assert_ne!(hits.1, "0", "{stats:?}");
    // Many threads writing and reading one key: reads only ever see a value
    // some writer wrote last or later, never an older one after a newer.
    let s = std::sync::Arc::new(s);
    std::thread::scope(|scope| {
        for t in 0..2u8 {
            let s = s.clone();
            scope.spawn(move || {
                for i in 0..300u32 {
                    let v = [t, (i >> 8) as u8, i as u8];
                    run(s.store(format!("w{t}").as_bytes(), &v, 0, 0, StoreMode::Set)).unwrap();
                    let got = run(s.get(format!("w{t}").as_bytes()))
                        .unwrap()
                        .unwrap()
                        .value;
                    assert_eq!(got, v, "read-your-write through the DRAM tier");
                }
            });
        }
    });
}
