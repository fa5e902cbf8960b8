//! EngineStorage: the memcache Storage semantics over the real engine.

use nvdepot_memcache::{Storage, StoreMode, StoreOutcome};
use nvdepot_server::EngineStorage;

fn storage() -> (tempfile::TempDir, EngineStorage) {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let opts = EngineStorage::default_options()
        .create_bytes(64 << 20)
        .segment_bytes(4 << 20);
    let s = EngineStorage::open_with_options(&dir.path().join("d"), opts, 64).unwrap();
    (dir, s)
}

#[test]
fn set_get_flags_exptime_cas() {
    let (_d, s) = storage();
    let StoreOutcome::Stored { cas } = s.store(b"k", b"hello", 42, 0, StoreMode::Set).unwrap()
    else {
        panic!()
    };
    let item = s.get(b"k").unwrap().unwrap();
    assert_eq!(
        (item.value.as_slice(), item.flags, item.exptime, item.cas),
        (&b"hello"[..], 42, 0, cas)
    );
    assert_eq!(
        s.store(b"k", b"x", 0, 0, StoreMode::Add).unwrap(),
        StoreOutcome::NotStored
    );
    assert_eq!(
        s.store(b"nope", b"x", 0, 0, StoreMode::Replace).unwrap(),
        StoreOutcome::NotStored
    );
    assert_eq!(
        s.store(b"k", b"x", 0, 0, StoreMode::Cas(cas + 1000))
            .unwrap(),
        StoreOutcome::Exists
    );
    assert_eq!(
        s.store(b"nope", b"x", 0, 0, StoreMode::Cas(cas)).unwrap(),
        StoreOutcome::NotFound
    );
    assert!(matches!(
        s.store(b"k", b"y", 1, 0, StoreMode::Cas(cas)).unwrap(),
        StoreOutcome::Stored { .. }
    ));
    // Expired items count as absent for add.
    s.store(b"old", b"v", 0, 1, StoreMode::Set).unwrap();
    assert!(matches!(
        s.store(b"old", b"w", 0, 0, StoreMode::Add).unwrap(),
        StoreOutcome::Stored { .. }
    ));
    assert_eq!(s.get(b"old").unwrap().unwrap().value, b"w");
    assert_eq!(s.delete(b"k", Some(1)).unwrap(), StoreOutcome::Exists);
    assert!(matches!(
        s.delete(b"k", None).unwrap(),
        StoreOutcome::Stored { .. }
    ));
    assert_eq!(s.delete(b"k", None).unwrap(), StoreOutcome::NotFound);
    s.flush_all().unwrap();
    assert_eq!(s.get(b"old").unwrap(), None);
    let stats = s.stats();
    assert!(
        stats.iter().any(|(k, v)| k == "curr_items" && v == "0"),
        "{stats:?}"
    );
}
