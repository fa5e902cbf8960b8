//! Read-modify-write commands under concurrent writers: each is one atomic
//! `Storage::update`, so it sees the latest write, never fails for
//! contention, and loses no update across threads.

mod common;

use std::collections::HashSet;
use std::future::{ready, Future};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::Harness;
use nvdepot_memcache::testing::MemStorage;
use nvdepot_memcache::{Change, Item, ItemState, Limits, Storage, StorageError, Updated};

/// A storage where another writer rewrites the key right before each of
/// the next `races` updates: between the client's request and its
/// read-modify-write, as a concurrent client would.
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
    fn set(
        &self,
        key: &[u8],
        value: &[u8],
        flags: u32,
        exptime: u32,
        state: ItemState,
    ) -> impl Future<Output = Result<u64, StorageError>> {
        self.inner.set(key, value, flags, exptime, state)
    }
    fn update<R>(
        &self,
        key: &[u8],
        decide: impl FnMut(Option<&Item>) -> (Change, R),
    ) -> impl Future<Output = Result<(R, Updated), StorageError>> {
        let left = self.races.load(Ordering::Relaxed);
        if left > 0 {
            self.races.store(left - 1, Ordering::Relaxed);
            let state = ItemState::default();
            if let Err(e) = self.inner.set_now(key, &self.other, 0, 0, state) {
                return ready(Err(e));
            }
        }
        ready(self.inner.update_now(key, decide))
    }
    fn flush_all(&self) -> Result<(), StorageError> {
        self.inner.flush_all()
    }
    fn now(&self) -> u32 {
        self.inner.now()
    }
    fn access(&self, key: &[u8]) -> nvdepot_memcache::Access {
        self.inner.access(key)
    }
    fn fetched(&self, key: &[u8]) {
        self.inner.fetched(key)
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
fn rmw_applies_to_the_latest_write() {
    let mut h = racy(1, b"20");
    assert_eq!(h.run(b"incr k 1\r\n"), "21\r\n");
    let mut h = racy(1, b"ab");
    assert_eq!(
        h.run(b"append k 0 0 1\r\nc\r\nget k\r\n"),
        "STORED\r\nVALUE k 0 3\r\nabc\r\nEND\r\n"
    );
    let mut h = racy(1, b"x");
    assert_eq!(h.run(b"touch k 10\r\n"), "TOUCHED\r\n");
    assert_eq!(h.storage.inner.peek(b"k").unwrap().value, b"x");
}

#[test]
fn rmw_never_fails_under_contention() {
    let mut h = racy(1000, b"20");
    let out = h.run(b"incr k 1\r\nprepend k 0 0 1\r\nx\r\ngat 0 k\r\nmn\r\n");
    // Each command applies to what the other writer left: "20".
    assert_eq!(out, "21\r\nSTORED\r\nVALUE k 0 2\r\n20\r\nEND\r\nMN\r\n");
    // One update each: the other writer got in once per command.
    assert_eq!(h.storage.races.load(Ordering::Relaxed), 1000 - 3);
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
    setup.feed_ready(
        b"set n 0 0 1\r\n0\r\nset s 0 0 0\r\n\r\nset c 0 0 1\r\n0\r\n",
        &mut Vec::new(),
    );
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let mut conn = h.connect();
            std::thread::spawn(move || {
                let reqs: [&[u8]; 3] =
                    [b"incr n 1\r\n", b"append s 0 0 1\r\nx\r\n", b"ma n D2\r\n"];
                let mut counted = Vec::new();
                for _ in 0..250 {
                    for req in reqs {
                        let mut out = Vec::new();
                        conn.feed_ready(req, &mut out);
                        assert!(!out.starts_with(b"SERVER_ERROR"), "{out:?}");
                    }
                    let mut out = Vec::new();
                    conn.feed_ready(b"incr c 1\r\n", &mut out);
                    counted.push(String::from_utf8(out).unwrap());
                }
                counted
            })
        })
        .collect();
    let mut counted = HashSet::new();
    for t in threads {
        for reply in t.join().unwrap() {
            assert!(counted.insert(reply.clone()), "{reply:?} handed out twice");
        }
    }
    assert_eq!(counted.len(), 1000);
    let n = h.storage.peek(b"n").unwrap().value;
    assert_eq!(String::from_utf8_lossy(&n).trim(), "3000");
    assert_eq!(h.storage.peek(b"s").unwrap().value.len(), 1000);
}
