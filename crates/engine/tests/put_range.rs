//! `Store::put_range`: a partial write of a value, as SETRANGE does it,
//! for values one record holds and for large values, across a reopen.

use nvdepot_engine::{Options, Store};

fn opts() -> Options {
    Options {
        segment_bytes: 1 << 20,
        buffered_io: true,
        ..Options::default().create_bytes(64 << 20)
    }
}

#[test]
fn put_range_patches_pads_and_creates_like_setrange() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &opts()).unwrap();
    let ns = store.default_namespace();
    store.put(ns, b"k", b"hello world").unwrap();
    assert_eq!(store.put_range(ns, b"k", 6, b"WORLD").unwrap(), 11);
    assert_eq!(store.get(ns, b"k").unwrap().unwrap(), b"hello WORLD");
    // Past the end: zero padding.
    assert_eq!(store.put_range(ns, b"k", 13, b"!").unwrap(), 14);
    assert_eq!(store.get(ns, b"k").unwrap().unwrap(), b"hello WORLD\0\0!");
    // Absent key: created.
    assert_eq!(store.put_range(ns, b"new", 2, b"ab").unwrap(), 4);
    assert_eq!(store.get(ns, b"new").unwrap().unwrap(), b"\0\0ab");
    // Empty data writes nothing, reports the length (0 when absent).
    assert_eq!(store.put_range(ns, b"k", 100, b"").unwrap(), 14);
    assert_eq!(store.put_range(ns, b"none", 5, b"").unwrap(), 0);
    assert_eq!(store.get(ns, b"none").unwrap(), None);
    // Past the value limit: a clear error, nothing written.
    let err = store.put_range(ns, b"k", u64::MAX - 1, b"xy").unwrap_err();
    assert!(err.to_string().contains("value too large"), "{err}");
    store.close().unwrap();
    let store = Store::open(dir.path(), &opts()).unwrap();
    assert_eq!(store.get(ns, b"k").unwrap().unwrap(), b"hello WORLD\0\0!");
}

#[test]
fn put_range_of_a_large_value_keeps_the_rest_and_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &opts()).unwrap();
    let ns = store.default_namespace();
    let len = store.record_value_bytes_max() * 3 + 123;
    let mut model: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    store.put(ns, b"big", &model).unwrap();
    for (off, n) in [
        (0usize, 10usize),
        (len / 2, 5000),
        (len - 3, 3),
        (len + 10, 7),
    ] {
        let data = vec![0xAB; n];
        let new_len = store.put_range(ns, b"big", off as u64, &data).unwrap();
        if model.len() < off + n {
            model.resize(off + n, 0);
        }
        model[off..off + n].copy_from_slice(&data);
        assert_eq!(new_len as usize, model.len());
        let got = store.get_range(ns, b"big", off as u64, n).unwrap().unwrap();
        assert_eq!(got, data);
    }
    assert_eq!(store.get(ns, b"big").unwrap().unwrap(), model);
    drop(store); // no clean close: the reopen replays the log
    let store = Store::open(dir.path(), &opts()).unwrap();
    assert_eq!(store.get(ns, b"big").unwrap().unwrap(), model);
}
