//! `RespStore::paged_owner_changes`, what the page sweep of `nvdepot
//! serve` waits on: it moves when a write replaces or deletes the record
//! of a key whose collection is paged, and stands still for every other
//! write (so a store whose collections only grow and shrink is never
//! scanned for dead pages).

use std::sync::Arc;

use nvdepot_cache::resp::{Change, Kind, RespStore};
use nvdepot_cache::CacheStore;
use nvdepot_engine::Store;
use nvdepot_io::uring::run_ready as run;
use nvdepot_io::{Device, MemDevice};

const MIB: u64 = 1 << 20;
const NOW: u64 = 1_000;

fn open() -> RespStore {
    let dev = Arc::new(MemDevice::named("paged-owners", 32 * MIB, 512));
    let mut opts = CacheStore::default_options()
        .segment_bytes(MIB)
        .create_bytes(0);
    opts.background_gc = false;
    let store = Store::open_devices(vec![dev as Arc<dyn Device>], &opts).expect("open");
    RespStore::new(CacheStore::over(store, 1 << 20), 2).unwrap()
}

/// A paged collection's metadata as the Redis face writes it: shape byte
/// 2, the stamp, then the rest.
fn paged_meta(stamp: u64) -> Vec<u8> {
    let mut m = vec![2u8];
    m.extend_from_slice(&stamp.to_le_bytes());
    m.extend_from_slice(&[0; 20]);
    m
}

/// Commits `key` as a paged list of one page.
fn commit_paged(resp: &RespStore, db: usize, key: &[u8], stamp: u64) {
    let (_, version) = run(resp.get_for_write(db, key, NOW)).unwrap();
    let meta = paged_meta(stamp);
    let mut page = key.to_vec();
    page.extend_from_slice(&stamp.to_le_bytes());
    let pages: [(&[u8], Option<&[u8]>); 1] = [(&page, Some(b"items"))];
    let done = run(resp.commit(
        db,
        key,
        version,
        Some((Kind::List, &meta, 0)),
        &pages,
        || {},
    ))
    .unwrap();
    assert!(done);
}

fn put(resp: &RespStore, db: usize, key: &[u8], kind: Kind, data: Vec<u8>, at: u64) {
    run(resp.update(db, key, NOW, |_| {
        let change = Change::Put {
            kind,
            data: data.clone(),
            expire_at_ms: at,
        };
        (change, ())
    }))
    .unwrap();
}

#[test]
fn only_writes_replacing_a_paged_collection_move_the_count() {
    let resp = open();
    let c0 = resp.paged_owner_changes();
    // No collection paged: strings and commits leave it.
    run(resp.set(0, b"s", b"1", 0)).unwrap();
    commit_paged(&resp, 0, b"list", 7);
    commit_paged(&resp, 0, b"list", 7);
    run(resp.set(0, b"other", b"2", 0)).unwrap();
    put(&resp, 0, b"other", Kind::List, vec![1, 3, b'a'], 0);
    assert_eq!(resp.paged_owner_changes(), c0);
    // EXPIRE of the paged list rewrites its record, same collection.
    put(&resp, 0, b"list", Kind::List, paged_meta(7), NOW + 60_000);
    assert_eq!(resp.paged_owner_changes(), c0);
    // The same key in another database is another key.
    run(resp.set(1, b"list", b"x", 0)).unwrap();
    assert_eq!(resp.paged_owner_changes(), c0);

    // SET over it, DEL of it, a new stamp by a write that is no commit,
    // RENAME from it, MSET over it: each may have left its pages dead.
    // (Each commit_paged below, a new stamp, counts too.)
    run(resp.set(0, b"list", b"now a string", 0)).unwrap();
    let c1 = resp.paged_owner_changes();
    assert!(c1 > c0);
    commit_paged(&resp, 0, b"list", 8);
    run(resp.update(0, b"list", NOW, |_| (Change::Delete, ()))).unwrap();
    let c2 = resp.paged_owner_changes();
    assert!(c2 > c1);
    commit_paged(&resp, 0, b"list", 9);
    put(&resp, 0, b"list", Kind::List, paged_meta(10), 0);
    let c3 = resp.paged_owner_changes();
    assert!(c3 > c2);
    commit_paged(&resp, 0, b"list", 11);
    run(resp.rename(0, b"list", b"dst", Kind::String, b"v", 0)).unwrap();
    let c4 = resp.paged_owner_changes();
    assert!(c4 > c3);
    commit_paged(&resp, 0, b"list", 12);
    run(resp.set_many(0, &[(b"list", b"v"), (b"k2", b"w")])).unwrap();
    let c5 = resp.paged_owner_changes();
    assert!(c5 > c4);

    // A commit writing it whole again under a new stamp, or deleting it,
    // leaves the old pages to the sweep.
    commit_paged(&resp, 0, b"list", 13);
    let c6 = resp.paged_owner_changes();
    assert!(c6 > c5);
    commit_paged(&resp, 0, b"list", 14);
    let c7 = resp.paged_owner_changes();
    assert!(c7 > c6);
    let (_, version) = run(resp.get_for_write(0, b"list", NOW)).unwrap();
    assert!(run(resp.commit(0, b"list", version, None, &[], || {})).unwrap());
    let c8 = resp.paged_owner_changes();
    assert!(c8 > c7);
    // A commit of a compact collection, never paged, does not.
    let compact = [1u8, 1, b'a'];
    assert!(run(resp.commit(
        0,
        b"small",
        None,
        Some((Kind::Set, &compact, 0)),
        &[],
        || {}
    ))
    .unwrap());
    assert_eq!(resp.paged_owner_changes(), c8);

    // Forgotten (the sweep found the key holds no paged collection):
    // its writes no longer count.
    resp.forget_paged(0, b"list");
    run(resp.set(0, b"list", b"again", 0)).unwrap();
    run(resp.update(0, b"list", NOW, |_| (Change::Delete, ()))).unwrap();
    assert_eq!(resp.paged_owner_changes(), c8);
}

#[test]
fn a_staged_write_counts_once_its_staging_is_committed() {
    use nvdepot_cache::staging::{self, Staging};
    let resp = open();
    commit_paged(&resp, 0, b"list", 7);
    let c0 = resp.paged_owner_changes();
    let s = Arc::new(Staging::default());
    staging::stage(&s, || {
        run(resp.update(0, b"list", NOW, |_| (Change::Delete, ()))).unwrap();
    });
    // Staged: a sweep now would still find the pages live.
    assert_eq!(resp.paged_owner_changes(), c0);
    run(resp.cache().commit_staged(&s)).unwrap();
    assert!(resp.paged_owner_changes() > c0);
    assert!(run(resp.get(0, b"list", NOW)).unwrap().is_none());

    // A staging dropped uncommitted counts nothing.
    commit_paged(&resp, 0, b"list", 8);
    let c1 = resp.paged_owner_changes();
    let s = Arc::new(Staging::default());
    staging::stage(&s, || {
        run(resp.set(0, b"list", b"x", 0)).unwrap();
    });
    drop(s);
    assert_eq!(resp.paged_owner_changes(), c1);
}
