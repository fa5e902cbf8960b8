//! A storage whose every call waits once (as one on a device does,
//! `testing::WaitingStorage`): the connection suspends in the middle of a
//! request, resumes where it left off, and answers exactly as over a
//! storage that never waits.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use nvdepot_memcache::testing::{MemStorage, WaitingStorage};
use nvdepot_memcache::{Connection, Limits, ServerStats, Storage};

/// Polls `feed` until it completes; returns the bytes consumed, the
/// output and the number of times it was pending.
fn feed_counting<S: Storage>(conn: &mut Connection<S>, input: &[u8]) -> (usize, Vec<u8>, usize) {
    let mut out = Vec::new();
    let mut pending = 0;
    let consumed = {
        let mut fut = pin!(conn.feed(input, &mut out));
        let mut cx = Context::from_waker(Waker::noop());
        loop {
            match fut.as_mut().poll(&mut cx) {
                Poll::Ready(fed) => break fed.consumed,
                Poll::Pending => pending += 1,
            }
        }
    };
    (consumed, out, pending)
}

/// A connection over a ready storage and one over a waiting storage,
/// both fed `setup` (whole requests).
fn twins(setup: &[u8]) -> (Connection<MemStorage>, Connection<WaitingStorage>) {
    let stats = Arc::new(ServerStats::default());
    let mut ready = Connection::new(
        Arc::new(MemStorage::new()),
        stats.clone(),
        Limits::default(),
    );
    ready.feed_ready(setup, &mut Vec::new());
    let mut slow = Connection::new(
        Arc::new(WaitingStorage::default()),
        stats,
        Limits::default(),
    );
    feed_waiting(&mut slow, setup);
    (ready, slow)
}

/// [`feed_counting`] of input made of whole requests: all of it consumed.
fn feed_waiting<S: Storage>(conn: &mut Connection<S>, input: &[u8]) -> (Vec<u8>, usize) {
    let (consumed, out, pending) = feed_counting(conn, input);
    assert_eq!(consumed, input.len());
    (out, pending)
}

const SCRIPT: &[u8] = b"set a 0 0 3\r\nabc\r\nget a b\r\nincr n 1\r\n\
set n 0 0 1\r\n5\r\nincr n 10\r\nappend a 0 0 2\r\nde\r\ngets a\r\nadd a 0 0 1\r\nx\r\n\
ms m 2 T0\r\nhi\r\nmg m v k\r\nma n D2 v\r\nmd m q\r\nmn\r\ntouch a 100\r\ngat 0 a\r\n\
delete a\r\ndelete a\r\nget a n\r\n";

#[test]
fn waiting_storage_answers_as_a_ready_one() {
    let stats = Arc::new(ServerStats::default());
    let mut ready = Connection::new(
        Arc::new(MemStorage::new()),
        stats.clone(),
        Limits::default(),
    );
    let mut want = Vec::new();
    let fed = ready.feed_ready(SCRIPT, &mut want);
    assert_eq!(fed.consumed, SCRIPT.len());

    let mut slow = Connection::new(
        Arc::new(WaitingStorage::default()),
        stats,
        Limits::default(),
    );
    let (got, pending) = feed_waiting(&mut slow, SCRIPT);
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(&want)
    );
    // The 17 requests that reach the storage each wait once: one read, one
    // write or one read-modify-write (a multi-key get reads its keys
    // together).
    assert_eq!(pending, 17, "suspended {pending} times");
}

#[test]
#[should_panic(expected = "not ready")]
fn feed_ready_refuses_a_waiting_storage() {
    let stats = Arc::new(ServerStats::default());
    let mut slow = Connection::new(
        Arc::new(WaitingStorage::default()),
        stats,
        Limits::default(),
    );
    slow.feed_ready(b"get a\r\n", &mut Vec::new());
}

/// A multi-key get has all its reads in flight at once: over a storage
/// whose every read waits once, the whole line waits once, and answers as
/// over a ready storage (order, misses, expired items, a key over the limit).
#[test]
fn multi_key_get_reads_keys_together() {
    let setup =
        b"set a 1 0 1\r\nA\r\nset c 3 0 1\r\nC\r\nset old 0 -1 1\r\nO\r\nset e 5 0 1\r\nE\r\n";
    let long = "k".repeat(251);
    let lines: Vec<Vec<u8>> = vec![
        b"get a b c old e\r\n".to_vec(),
        b"gets e a a\r\n".to_vec(),
        format!("get a {long} c\r\n").into_bytes(),
    ];
    let (mut ready, mut slow) = twins(setup);
    for line in &lines {
        let mut want = Vec::new();
        ready.feed_ready(line, &mut want);
        let (got, pending) = feed_waiting(&mut slow, line);
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&want)
        );
        // One wait for the reads together; the expired item is read again
        // (an earlier request of the batch may have reclaimed it) and its
        // reclaiming delete waits once more.
        let expired = line.windows(4).any(|w| w == b" old");
        assert_eq!(pending, 1 + 2 * usize::from(expired), "{line:?}");
    }
}

/// Pipelined single-key gets have their reads in flight together: over a
/// storage whose every call waits once, a run of get lines waits once, a
/// write in between starts a new run, and the replies are those of a ready
/// storage executing the lines one by one.
#[test]
fn pipelined_gets_read_together() {
    let setup = b"set a 1 0 1\r\nA\r\nset c 3 0 1\r\nC\r\n";
    let long = "k".repeat(251);
    let cases: Vec<(Vec<u8>, usize)> = vec![
        // Six gets (one a miss, one two-key): one wait.
        (
            b"get a\r\nget b\r\ngets c\r\nget a c\r\nget a\r\nget c\r\n".to_vec(),
            1,
        ),
        // A set splits the run: gets, the set (one wait), gets.
        (
            b"get a\r\nget c\r\nset a 0 0 2\r\nA2\r\nget a\r\nget c\r\n".to_vec(),
            3,
        ),
        // A key over the limit ends the run; its line answers the error.
        (
            format!("get a\r\nget c\r\nget {long}\r\nget a\r\n").into_bytes(),
            2,
        ),
        // An incomplete last line is not read ahead.
        (b"get a\r\nget c\r\nget a".to_vec(), 1),
    ];
    let (mut ready, mut slow) = twins(setup);
    for (input, waits) in &cases {
        let mut want = Vec::new();
        let fed = ready.feed_ready(input, &mut want);
        let (consumed, got, pending) = feed_counting(&mut slow, input);
        assert_eq!(consumed, fed.consumed);
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&want)
        );
        assert_eq!(pending, *waits, "{:?}", String::from_utf8_lossy(input));
    }
}

/// One binary request frame.
fn frame(opcode: u8, extras: &[u8], key: &[u8], value: &[u8]) -> Vec<u8> {
    let body = extras.len() + key.len() + value.len();
    let mut f = vec![0x80, opcode];
    f.extend_from_slice(&(key.len() as u16).to_be_bytes());
    f.push(extras.len() as u8);
    f.extend_from_slice(&[0, 0, 0]);
    f.extend_from_slice(&(body as u32).to_be_bytes());
    f.extend_from_slice(&[0; 12]);
    f.extend_from_slice(extras);
    f.extend_from_slice(key);
    f.extend_from_slice(value);
    f
}

/// A binary multi-get (GetKQ... Noop) waits once for all its reads and
/// answers as a ready storage does.
#[test]
fn pipelined_binary_gets_read_together() {
    const SET: u8 = 0x01;
    const GETKQ: u8 = 0x0d;
    const GETK: u8 = 0x0c;
    const NOOP: u8 = 0x0a;
    let mut setup = frame(SET, &[0; 8], b"a", b"A");
    setup.extend(frame(SET, &[0; 8], b"c", b"C"));
    let mut multi = Vec::new();
    for key in [&b"a"[..], b"b", b"c", b"a"] {
        multi.extend(frame(GETKQ, &[], key, &[]));
    }
    multi.extend(frame(GETK, &[], b"c", &[]));
    multi.extend(frame(NOOP, &[], &[], &[]));
    let (mut ready, mut slow) = twins(&setup);
    let mut want = Vec::new();
    ready.feed_ready(&multi, &mut want);
    let (got, pending) = feed_waiting(&mut slow, &multi);
    assert_eq!(got, want);
    assert!(want.len() > 3 * 24, "hits answered: {want:?}");
    assert_eq!(pending, 1);
}
