//! Read-modify-write commands under concurrent writers: the CAS retry
//! loop, its bound, and no lost updates across threads.

mod common;

use std::future::{ready, Future};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::Harness;
use nvdepot_memcache::testing::MemStorage;
use nvdepot_memcache::{Item, ItemState, Limits, Storage, StorageError, StoreMode, StoreOutcome};

/// A storage where another writer rewrites the key right before each of
/// the next `races` CAS-conditional stores (and touches), so they fail
/// with Exists.
struct Racy {
    inner: MemStorage,
    races: AtomicUsize,
    /// What the other writer stores.
    other: Vec<u8>,
}

impl Storage for Racy {
    fn get(&self, key: &[u8]) -> impl Future<Output = Result<Option<Item>, StorageError>> {
        self.inner.get(key)
    }
    fn store_item(
        &self,
        key: &[u8],
        value: &[u8],
        flags: u32,
        exptime: u32,
        state: ItemState,
        mode: StoreMode,
    ) -> impl Future<Output = Result<StoreOutcome, StorageError>> {
        if let StoreMode::Cas(_) | StoreMode::Touch(_) | StoreMode::Win(_) = mode {
            let left = self.races.load(Ordering::Relaxed);
            if left > 0 {
                self.races.store(left - 1, Ordering::Relaxed);
                if let Err(e) = self.inner.store_now(key, &self.other, 0, 0, StoreMode::Set) {
                    return ready(Err(e));
                }
            }
        }
        ready(
            self.inner
                .store_item_now(key, value, flags, exptime, state, mode),
        )
    }
    fn delete(
        &self,
        key: &[u8],
        cas: Option<u64>,
    ) -> impl Future<Output = Result<StoreOutcome, StorageError>> {
        self.inner.delete(key, cas)
    }
    fn flush_all(&self) -> Result<(), StorageError> {
        self.inner.flush_all()
    }
    fn now(&self) -> u32 {
        self.inner.now()
    }
    fn stats(&self) -> Vec<(String, String)> {
        self.inner.stats()
    }
}

fn racy(races: usize, other: &[u8]) -> Harness<Racy> {
    let s = Racy {
        inner: MemStorage::new(),
        races: AtomicUsize::new(0),
        other: other.to_vec(),
    };
    let mut h = Harness::over(Arc::new(s), Limits::default());
    h.run(b"set k 0 0 2\r\n10\r\n");
    h.storage.races.store(races, Ordering::Relaxed);
    h
}

#[test]
fn rmw_retries_after_losing_races() {
    let mut h = racy(3, b"20");
    assert_eq!(h.run(b"incr k 1\r\n"), "21\r\n");
    let mut h = racy(3, b"ab");
    assert_eq!(
        h.run(b"append k 0 0 1\r\nc\r\nget k\r\n"),
        "STORED\r\nVALUE k 0 3\r\nabc\r\nEND\r\n"
    );
    let mut h = racy(15, b"x");
    assert_eq!(h.run(b"touch k 10\r\n"), "TOUCHED\r\n");
    assert_eq!(h.storage.inner.peek(b"k").unwrap().value, b"x");
}

#[test]
fn rmw_gives_up_after_bounded_retries() {
    let mut h = racy(1000, b"20");
    let out = h.run(b"incr k 1\r\nprepend k 0 0 1\r\nx\r\ngat 0 k\r\nmn\r\n");
    let err = "SERVER_ERROR too many concurrent updates of this key, try again\r\n";
    assert_eq!(out, format!("{err}{err}{err}MN\r\n"));
    // 16 attempts each.
    assert_eq!(h.storage.races.load(Ordering::Relaxed), 1000 - 48);
}

#[test]
fn cas_race_between_clients() {
    let mut h = Harness::new();
    let mut other = h.connect();
    h.run(b"set k 0 0 1\r\na\r\n");
    let gets = h.run(b"gets k\r\n");
    let cas: u64 = gets.split_whitespace().nth(4).unwrap().parse().unwrap();
    let mut out = Vec::new();
    other.feed_ready(format!("cas k 0 0 1 {cas}\r\nb\r\n").as_bytes(), &mut out);
    assert_eq!(out, b"STORED\r\n");
    assert_eq!(
        h.run(format!("cas k 0 0 1 {cas}\r\nc\r\n").as_bytes()),
        "EXISTS\r\n"
    );
    assert_eq!(h.run(b"get k\r\n"), "VALUE k 0 1\r\nb\r\nEND\r\n");
}

#[test]
fn no_lost_updates_across_threads() {
    let h = Harness::new();
    let mut setup = h.connect();
    setup.feed_ready(b"set n 0 0 1\r\n0\r\nset s 0 0 0\r\n\r\n", &mut Vec::new());
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let mut conn = h.connect();
            std::thread::spawn(move || {
                let reqs: [&[u8]; 3] =
                    [b"incr n 1\r\n", b"append s 0 0 1\r\nx\r\n", b"ma n D2\r\n"];
                for _ in 0..250 {
                    for req in reqs {
                        // A client retries a command that lost too many
                        // races (possible, if rare, with 4 writers).
                        loop {
                            let mut out = Vec::new();
                            conn.feed_ready(req, &mut out);
                            if !out.starts_with(b"SERVER_ERROR") {
                                break;
                            }
                        }
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let n = h.storage.peek(b"n").unwrap().value;
    assert_eq!(String::from_utf8_lossy(&n).trim(), "3000");
    assert_eq!(h.storage.peek(b"s").unwrap().value.len(), 1000);
}
