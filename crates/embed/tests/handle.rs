//! The handle, cursor and destroy as the bindings use them.

use nvdepot_embed::{destroy, set_option, Code, Cursor, Handle, Options};

fn options() -> Options {
    let mut o = Options::default();
    for (k, v) in [
        ("create_bytes", "32M"),
        ("segment_bytes", "1M"),
        ("buffered_io", "true"),
    ] {
        set_option(&mut o, k, v).unwrap();
    }
    o
}

#[test]
fn close_waits_for_cursors_and_later_calls_fail_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let h = Handle::open(&path, &options()).unwrap();
    let ns = h.with(|s| Ok(s.default_namespace())).unwrap();
    for i in 0..100u32 {
        h.with(|s| s.put(ns, &i.to_le_bytes(), b"v")).unwrap();
    }
    let mut c = Cursor::new(h.share().unwrap(), Some(ns), 0);
    assert!(c.advance().unwrap());
    assert_eq!(c.current().unwrap().value, b"v");
    let busy = h.close().unwrap_err();
    assert_eq!(busy.code, Code::Busy, "{busy}");
    assert!(!h.is_closed());
    let mut n = 1;
    while c.advance().unwrap() {
        n += 1;
    }
    assert_eq!(n, 100);
    assert_eq!(c.resume_at(), None);
    drop(c);
    h.close().unwrap();
    let e = h.with(|s| s.get(ns, b"x")).unwrap_err();
    assert_eq!(e.code, Code::Closed);
    // Reopened from the checkpoint, then destroyed.
    let h = Handle::open(&path, &options()).unwrap();
    assert_eq!(h.with(|s| Ok(s.count(ns))).unwrap(), 100);
    h.close().unwrap();
    destroy(&path).unwrap();
    assert!(!path.exists());
    let e = destroy(&path).unwrap_err();
    assert_eq!(e.code, Code::NotAStore);
}

#[test]
fn destroy_refuses_a_file_that_is_not_a_store() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("precious");
    std::fs::write(&file, b"not a store at all").unwrap();
    let e = destroy(&file).unwrap_err();
    assert_eq!(e.code, Code::NotAStore);
    assert!(file.exists());
    let e = destroy(dir.path()).unwrap_err();
    assert_eq!(e.code, Code::NotAStore, "{e}");
}

#[test]
fn a_resumed_cursor_finishes_the_walk() {
    let dir = tempfile::tempdir().unwrap();
    let h = Handle::open(dir.path(), &options()).unwrap();
    let ns = h.with(|s| Ok(s.default_namespace())).unwrap();
    for i in 0..5000u32 {
        h.with(|s| s.put(ns, &i.to_le_bytes(), b"v")).unwrap();
    }
    let mut seen = std::collections::HashSet::new();
    let mut c = Cursor::new(h.share().unwrap(), None, 0);
    for _ in 0..1500 {
        assert!(c.advance().unwrap());
        seen.insert(c.current().unwrap().key.clone());
    }
    let at = c.resume_at().unwrap();
    drop(c);
    let mut c = Cursor::new(h.share().unwrap(), None, at);
    while c.advance().unwrap() {
        seen.insert(c.current().unwrap().key.clone());
    }
    assert_eq!(seen.len(), 5000);
}
