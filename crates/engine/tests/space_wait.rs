//! A full store: an async put waiting for space parks its task, so the
//! other tasks of its io_uring runtime go on. (Before, it blocked the
//! worker thread on a condition variable until GC freed a segment or gave
//! up, stalling every connection of that worker.)

use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;

use nvdepot_engine::{Error, Options, Store};
use nvdepot_io::uring::{self, Runtime};

#[test]
fn an_async_put_waiting_for_space_does_not_stall_its_runtime() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let opts = Options {
        segment_bytes: 1 << 20,
        sync: false,
        ..Options::default()
    }
    .create_bytes(8 << 20);
    let store = Arc::new(Store::open(dir.path(), &opts).unwrap());
    let ns = store.default_namespace();
    let value = vec![7u8; 64 << 10];
    // Fill with live data until GC cannot help.
    let mut n = 0;
    loop {
        match store.put(ns, format!("k{n}").as_bytes(), &value) {
            Ok(()) => n += 1,
            Err(Error::StoreFull { .. }) => break,
            Err(e) => panic!("filling: {e}"),
        }
    }
    assert!(n > 10, "only {n} values fit");
    let rt = Runtime::new().expect("io_uring runtime");
    rt.block_on(async {
        let done = Rc::new(Cell::new(false));
        let reads = Rc::new(Cell::new(0u32));
        let reads_while_waiting = Rc::new(Cell::new(0u32));
        let waiter = {
            let (store, done, reads, at) = (
                store.clone(),
                done.clone(),
                reads.clone(),
                reads_while_waiting.clone(),
            );
            let value = value.clone();
            uring::spawn(async move {
                let r = store.put_async(ns, b"one-more", &value).await;
                at.set(reads.get());
                done.set(true);
                r
            })
        };
        let reader = {
            let (store, done, reads) = (store.clone(), done.clone(), reads.clone());
            uring::spawn(async move {
                while !done.get() {
                    let got = store.get_async(ns, b"k0").await.unwrap();
                    assert_eq!(got.map(|v| v.len()), Some(64 << 10));
                    reads.set(reads.get() + 1);
                }
            })
        };
        let r = waiter.await;
        reader.await;
        assert!(
            matches!(r, Err(Error::StoreFull { .. })),
            "the put should wait, then find the store full: {r:?}"
        );
        assert!(
            reads_while_waiting.get() >= 3,
            "only {} reads ran on the runtime while the put waited for space",
            reads_while_waiting.get()
        );
    });
}
