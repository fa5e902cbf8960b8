//! Large values (longer than one record holds): round trips, ranges and
//! streaming reads that read only what they need, replacement and space,
//! conditions, and crash atomicity on the simulated device.

use std::io::{Read, Seek, SeekFrom};
use std::sync::Arc;

use nvdepot_engine::{Change, Error, Options, PutMode, Store, Updated, WriteOp};
use nvdepot_io::{Device, MemDevice};

const MIB: u64 = 1 << 20;

fn opts() -> Options {
    Options {
        segment_bytes: MIB,
        key_bytes_max: 1024,
        ..Options::default()
    }
    .create_bytes(0)
}

fn mem_store(capacity: u64) -> (Arc<MemDevice>, Store) {
    let dev = Arc::new(MemDevice::new(capacity, 512));
    let store =
        Store::open_devices(vec![dev.clone() as Arc<dyn Device>], &opts()).expect("create store");
    (dev, store)
}

fn reopen(dev: Arc<MemDevice>) -> Store {
    let opts = Options {
        key_bytes_max: 1024,
        ..Options::default()
    };
    Store::open_devices(vec![dev as Arc<dyn Device>], &opts).expect("reopen")
}

/// A value whose every byte depends on its position and `seed`.
fn value(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[1] ^ seed)
        .collect()
}

#[test]
fn a_large_value_round_trips_and_ranges_read_only_its_chunks() {
    let (dev, s) = mem_store(64 * MIB);
    let ns = s.default_namespace();
    let record_max = s.record_value_bytes_max();
    assert!(record_max < 300_000, "1 MiB segments: {record_max}");
    let v = value(3 * MIB as usize + 12_345, 7);
    s.put(ns, b"big", &v).unwrap();
    s.put(ns, b"small", b"x").unwrap();
    assert_eq!(s.count(ns), 2, "chunks are not keys");
    assert_eq!(s.stats().keys, 2);
    assert_eq!(s.get(ns, b"big").unwrap().unwrap(), v);
    let (got, version) = s.get_versioned(ns, b"big").unwrap().unwrap();
    assert_eq!(got, v);
    // Ranges: inside a chunk, across a chunk boundary, at the end, past it.
    let len = v.len() as u64;
    for (offset, n) in [
        (0u64, 10usize),
        (100_000, 50_000),
        (record_max as u64 - 100, 300),
        (1_000_000, 1_500_000),
        (len - 5, 100),
        (len, 10),
        (len + 10, 10),
    ] {
        let r = s.get_range(ns, b"big", offset, n).unwrap().unwrap();
        let (a, b) = (
            (offset.min(len)) as usize,
            (offset + n as u64).min(len) as usize,
        );
        assert_eq!(r, v[a..b], "range {offset}+{n}");
    }
    // A short range far into the value reads about what it asks for.
    let before = dev.bytes_read();
    let r = s.get_range(ns, b"big", 2_500_000, 4096).unwrap().unwrap();
    assert_eq!(r, v[2_500_000..2_504_096]);
    let read = dev.bytes_read() - before;
    assert!(read < 64 * 1024, "a 4 KiB range read {read} bytes");
    // Streaming: whole, and after a seek.
    let mut reader = s.value_reader(ns, b"big").unwrap().unwrap();
    assert!(reader.is_large());
    assert_eq!(reader.len(), len);
    assert_eq!(reader.version(), version);
    let mut all = Vec::new();
    reader.read_to_end(&mut all).unwrap();
    assert_eq!(all, v);
    reader.seek(SeekFrom::Start(2_000_000)).unwrap();
    let mut buf = vec![0u8; 5000];
    reader.read_exact(&mut buf).unwrap();
    assert_eq!(buf, v[2_000_000..2_005_000]);
    let before = dev.bytes_read();
    let mut reader = s.value_reader(ns, b"big").unwrap().unwrap();
    reader.seek(SeekFrom::End(-10)).unwrap();
    let mut tail = Vec::new();
    reader.read_to_end(&mut tail).unwrap();
    assert_eq!(tail, v[v.len() - 10..]);
    let read = dev.bytes_read() - before;
    assert!(
        read < 2 * record_max as u64,
        "streaming the last 10 bytes read {read} bytes"
    );
    // A small value streams too.
    let mut small = s.value_reader(ns, b"small").unwrap().unwrap();
    assert!(!small.is_large());
    let mut out = String::new();
    small.read_to_string(&mut out).unwrap();
    assert_eq!(out, "x");
    assert!(s.value_reader(ns, b"absent").unwrap().is_none());
    // Iteration gives the whole value.
    let mut seen: Vec<(Vec<u8>, Vec<u8>)> = s.iter(ns).map(Result::unwrap).collect();
    seen.sort();
    assert_eq!(
        seen,
        vec![
            (b"big".to_vec(), v.clone()),
            (b"small".to_vec(), b"x".to_vec())
        ]
    );
    // Clean restart (checkpoint) and crash restart (log scan) keep it.
    s.close().unwrap();
    let s = reopen(dev.clone());
    assert!(s.open_report().clean);
    assert_eq!(s.get(ns, b"big").unwrap().unwrap(), v);
    assert_eq!(s.stats().keys, 2);
    drop(s);
    let s = reopen(dev);
    assert!(!s.open_report().clean);
    assert_eq!(s.get(ns, b"big").unwrap().unwrap(), v);
    assert_eq!(s.count(ns), 2);
    assert_eq!(s.stats().keys, 2);
}

#[test]
fn replacing_and_deleting_large_values_frees_their_chunks() {
    // 24 MiB of log; each 4 MiB value would fill it in a few puts if
    // replaced chunks stayed live.
    let (dev, s) = mem_store(24 * MIB);
    let ns = s.default_namespace();
    for round in 0..40u8 {
        let v = value(4 * MIB as usize - round as usize * 1000, round);
        s.put(ns, b"k", &v).unwrap();
        assert_eq!(s.get(ns, b"k").unwrap().unwrap(), v, "round {round}");
    }
    // Segments of replaced chunks hold nothing live and no tombstone: GC
    // frees them without reading them.
    let stats = s.stats();
    assert!(stats.gc_segments_unread > 0, "{stats:?}");
    // Large to small and back, and delete.
    s.put(ns, b"k", b"small now").unwrap();
    assert_eq!(s.get(ns, b"k").unwrap().unwrap(), b"small now");
    let v = value(2 * MIB as usize, 99);
    s.put(ns, b"k", &v).unwrap();
    assert_eq!(s.get(ns, b"k").unwrap().unwrap(), v);
    assert!(s.delete(ns, b"k").unwrap());
    assert_eq!(s.get(ns, b"k").unwrap(), None);
    assert_eq!(s.count(ns), 0);
    assert_eq!(s.stats().keys, 0, "no chunk is left in the index");
    assert!(s.stats().live_bytes < 64 * 1024, "{}", s.stats().live_bytes);
    // Over 4 MiB: its GET buffer is advised for huge pages.
    let v = value(5 * MIB as usize, 5);
    s.put(ns, b"k2", &v).unwrap();
    drop(s);
    let s = reopen(dev);
    assert_eq!(s.get(ns, b"k").unwrap(), None);
    assert_eq!(s.get(ns, b"k2").unwrap().unwrap(), v);
    assert_eq!(s.stats().keys, 1);
}

#[test]
fn conditions_hold_for_large_puts_and_leave_no_chunks_behind() {
    let (_dev, s) = mem_store(32 * MIB);
    let ns = s.default_namespace();
    let a = value(MIB as usize, 1);
    let b = value(MIB as usize + 1, 2);
    assert!(s.put_with(ns, b"k", &a, PutMode::IfAbsent).unwrap());
    assert!(!s.put_with(ns, b"k", &b, PutMode::IfAbsent).unwrap());
    assert!(!s.put_with(ns, b"other", &b, PutMode::IfPresent).unwrap());
    let (_, version) = s.get_versioned(ns, b"k").unwrap().unwrap();
    assert!(s
        .put_versioned(ns, b"k", &b, PutMode::IfVersion(version + 1))
        .unwrap()
        .is_none());
    let new = s
        .put_versioned(ns, b"k", &b, PutMode::IfVersion(version))
        .unwrap()
        .expect("version matched");
    assert!(new > version);
    assert_eq!(s.get(ns, b"k").unwrap().unwrap(), b);
    assert_eq!(s.stats().keys, 1);
    // Read-modify-write sees a large value whole, and may write one.
    let (len, done) = s
        .update(ns, b"k", |c| (Change::Keep, c.map(|c| c.value.len())))
        .unwrap();
    assert_eq!((len, done), (Some(b.len()), Updated::Kept));
    let (_, done) = s
        .update(ns, b"k", |c| {
            let mut v = c.expect("present").value.to_vec();
            v.extend_from_slice(b"appended");
            (Change::Put(v), ())
        })
        .unwrap();
    assert!(matches!(done, Updated::Put(_)), "{done:?}");
    let mut appended = b.clone();
    appended.extend_from_slice(b"appended");
    assert_eq!(s.get(ns, b"k").unwrap().unwrap(), appended);
    // Large to small and small to large through update.
    s.update(ns, b"k", |_| (Change::Put(b"tiny".to_vec()), ()))
        .unwrap();
    assert_eq!(s.get(ns, b"k").unwrap().unwrap(), b"tiny");
    s.update(ns, b"k", |_| (Change::Put(a.clone()), ()))
        .unwrap();
    assert_eq!(s.get(ns, b"k").unwrap().unwrap(), a);
    let (_, done) = s.update(ns, b"k", |_| (Change::Delete, ())).unwrap();
    assert_eq!(done, Updated::Deleted);
    assert_eq!(s.get(ns, b"k").unwrap(), None);
    assert_eq!(s.stats().keys, 0);
    assert!(s.stats().live_bytes < 64 * 1024, "{}", s.stats().live_bytes);
    // Batches take one-record values only, clearly.
    let err = s
        .write_batch(
            ns,
            &[WriteOp::Put {
                key: b"x",
                value: &a,
            }],
        )
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::TooLargeFor {
                op: "write_batch",
                ..
            }
        ),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("write_batch takes values of up to"),
        "{err}"
    );
    // Over the store's limit.
    let (_dev, s) = {
        let dev = Arc::new(MemDevice::new(32 * MIB, 512));
        let o = Options {
            value_bytes_max: 2 * MIB as usize,
            ..opts()
        };
        let s = Store::open_devices(vec![dev.clone() as Arc<dyn Device>], &o).unwrap();
        (dev, s)
    };
    let ns = s.default_namespace();
    let err = s
        .put(ns, b"k", &value(2 * MIB as usize + 1, 0))
        .unwrap_err();
    assert!(matches!(err, Error::ValueTooLarge { .. }), "{err}");
}

#[test]
fn clearing_a_namespace_drops_its_large_values() {
    let (_dev, s) = mem_store(32 * MIB);
    let ns = s.create_namespace("blobs").unwrap();
    let keep = s.default_namespace();
    s.put(ns, b"a", &value(2 * MIB as usize, 1)).unwrap();
    s.put(keep, b"b", &value(2 * MIB as usize, 2)).unwrap();
    s.clear(ns).unwrap();
    assert_eq!(s.get(ns, b"a").unwrap(), None);
    assert_eq!(
        s.get(keep, b"b").unwrap().unwrap(),
        value(2 * MIB as usize, 2)
    );
    // The GC thread purges the cleared namespace's entries, chunks too.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let purged = |st: &nvdepot_engine::Stats| st.keys == 1 && st.live_bytes < 3 * MIB;
    while !purged(&s.stats()) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let stats = s.stats();
    assert_eq!(stats.keys, 1);
    assert!(stats.live_bytes < 3 * MIB, "{}", stats.live_bytes);
}

/// A crash at any point of a large put leaves the old value or the new one,
/// whole, and no chunk of the lost one in the index.
#[test]
fn a_crash_during_a_large_put_leaves_the_old_value_or_the_new_whole() {
    let old = value(MIB as usize + 777, 1);
    let new = value(2 * MIB as usize + 333, 2);
    let mut outcomes = [0usize; 2];
    for cut in 0..24u64 {
        let dev = Arc::new(MemDevice::new(32 * MIB, 512));
        let s = Store::open_devices(vec![dev.clone() as Arc<dyn Device>], &opts()).unwrap();
        let ns = s.default_namespace();
        s.put(ns, b"k", &old).unwrap();
        s.put(ns, b"neighbour", b"n").unwrap();
        // Writes after this many fail: the put stops part way.
        dev.fail_writes_after(cut);
        let acked = s.put(ns, b"k", &new).is_ok();
        let (crashed, _) = dev.crash(cut * 7919 + 1);
        drop(s);
        let s = reopen(Arc::new(crashed));
        let got = s.get(ns, b"k").unwrap().expect("the key survives");
        if got == new {
            outcomes[1] += 1;
        } else {
            assert!(
                !acked,
                "cut {cut}: acknowledged, yet the old value came back"
            );
            assert_eq!(got, old, "cut {cut}: neither value, whole");
            outcomes[0] += 1;
        }
        assert_eq!(s.get(ns, b"neighbour").unwrap().unwrap(), b"n");
        assert_eq!(s.stats().keys, 2, "cut {cut}");
        // The chunks of the put that did not happen are not live.
        let live = s.stats().live_bytes;
        let expect = got.len() as u64;
        assert!(
            live < expect + 64 * 1024,
            "cut {cut}: {live} live bytes for a value of {expect}"
        );
    }
    assert!(
        outcomes[0] > 0 && outcomes[1] > 0,
        "both ends seen: {outcomes:?}"
    );
}

/// Readers racing a writer that replaces a large value see one value or
/// the other, whole; concurrent read-modify-writes of one large value lose
/// no update.
#[test]
fn readers_never_see_a_mix_and_updates_are_atomic() {
    let (_dev, s) = mem_store(64 * MIB);
    let s = Arc::new(s);
    let ns = s.default_namespace();
    let a = Arc::new(value(MIB as usize + 100, 1));
    let b = Arc::new(value(2 * MIB as usize + 200, 2));
    s.put(ns, b"k", &a).unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Readers that have read once: the writer starts only then, so that
    // it races them (on a busy machine it could finish before a reader
    // thread first ran).
    let reading = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (s, a, b, stop) = (s.clone(), a.clone(), b.clone(), stop.clone());
            let reading = reading.clone();
            std::thread::spawn(move || {
                let mut reads = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let v = s.get(ns, b"k").unwrap().expect("always present");
                    assert!(v == *a || v == *b, "a mix of {} bytes", v.len());
                    let r = s.get_range(ns, b"k", 300_000, 10).unwrap().unwrap();
                    assert!(r == a[300_000..300_010] || r == b[300_000..300_010]);
                    if reads == 0 {
                        reading.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    }
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    // (A reader that failed ends: its join below reports it.)
    while reading.load(std::sync::atomic::Ordering::SeqCst) < 2
        && !readers.iter().any(|r| r.is_finished())
    {
        std::thread::yield_now();
    }
    for i in 0..20 {
        s.put(ns, b"k", if i % 2 == 0 { &b } else { &a }).unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
    // Two threads each append 10 times to one large value.
    s.put(ns, b"log", &a).unwrap();
    let writers: Vec<_> = (0..2u8)
        .map(|t| {
            let s = s.clone();
            std::thread::spawn(move || {
                for _ in 0..10 {
                    s.update(ns, b"log", |c| {
                        let mut v = c.expect("present").value.to_vec();
                        v.push(b'0' + t);
                        (Change::Put(v), ())
                    })
                    .unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let v = s.get(ns, b"log").unwrap().unwrap();
    assert_eq!(v.len(), a.len() + 20, "no append lost");
    assert_eq!(v[..a.len()], a[..]);
    assert_eq!(v[a.len()..].iter().filter(|&&c| c == b'0').count(), 10);
    assert_eq!(s.stats().keys, 2);
}

/// Cache mode: eviction takes whole segments, heads and chunks alike; a
/// large value then reads whole or as a miss, never partly, never an
/// error, and space keeps being reclaimed.
#[test]
fn cache_mode_evicts_large_values_whole_or_not_at_all() {
    let dev = Arc::new(MemDevice::new(16 * MIB, 512));
    let o = Options {
        cache_mode: true,
        ..opts()
    };
    let s = Store::open_devices(vec![dev.clone() as Arc<dyn Device>], &o).unwrap();
    let ns = s.default_namespace();
    let values: Vec<Vec<u8>> = (0..30u8)
        .map(|i| value(MIB as usize + i as usize * 997, i))
        .collect();
    for (i, v) in values.iter().enumerate() {
        s.put(ns, format!("k{i}").as_bytes(), v).unwrap();
        // Reading an early key keeps its segments (head and chunks) warm.
        if i % 3 == 2 {
            let _ = s.get(ns, b"k0").unwrap();
        }
    }
    let stats = s.stats();
    assert!(stats.evictions > 0, "{stats:?}");
    // Checked first: the reads below make older values more recently used
    // than the newest one, and background eviction may still be making
    // room (under load it lags the puts), so it may take it after them.
    assert!(
        s.get(ns, b"k29").unwrap().is_some(),
        "the newest value survives"
    );
    let mut present = 0;
    for (i, v) in values.iter().enumerate() {
        if let Some(got) = s.get(ns, format!("k{i}").as_bytes()).unwrap() {
            assert_eq!(&got, v, "k{i}");
            present += 1;
        }
    }
    assert!(present > 0 && present < values.len(), "{present} present");
    drop(s);
    // After a crash restart: the same rule.
    let o = Options {
        cache_mode: true,
        key_bytes_max: 1024,
        ..Options::default()
    };
    let s = Store::open_devices(vec![dev as Arc<dyn Device>], &o).unwrap();
    for (i, v) in values.iter().enumerate() {
        if let Some(got) = s.get(ns, format!("k{i}").as_bytes()).unwrap() {
            assert_eq!(&got, v, "k{i} after restart");
        }
    }
}

/// Write-behind (acknowledged before the device write): a crash may lose
/// the last large put, as write-behind allows, but the value it replaced
/// is then whole, never absent or partial (its chunks leave the index at
/// once, but the device only when GC frees their segment, after it has
/// made the log durable).
#[test]
fn write_behind_replacement_keeps_the_old_value_whole_until_durable() {
    let a = value(MIB as usize + 5, 1);
    let b = value(MIB as usize + 9, 2);
    let (mut saw_a, mut saw_b) = (0, 0);
    for seed in 0..12u64 {
        let dev = Arc::new(MemDevice::new(32 * MIB, 512));
        let o = Options {
            write_behind: true,
            ..opts()
        };
        let s = Store::open_devices(vec![dev.clone() as Arc<dyn Device>], &o).unwrap();
        let ns = s.default_namespace();
        s.put(ns, b"k", &a).unwrap();
        s.flush().unwrap();
        s.put(ns, b"k", &b).unwrap();
        if seed % 3 == 0 {
            // GC may free the replaced chunks' segments now.
            s.collect_garbage().unwrap();
        }
        let (crashed, _) = if seed % 2 == 0 {
            dev.crash(seed)
        } else {
            dev.crash_reordered(seed)
        };
        drop(s);
        let s = reopen(Arc::new(crashed));
        let got = s.get(ns, b"k").unwrap().expect("one of the two values");
        if got == a {
            saw_a += 1;
        } else {
            assert_eq!(got, b, "seed {seed}: neither value whole");
            saw_b += 1;
        }
    }
    assert!(saw_a + saw_b == 12, "{saw_a} {saw_b}");
}
