//! Cache mode's eviction policies: segment LRU keeps what is read, and
//! evicting out of write order never lets a crash restart bring back an
//! older value.

use std::sync::Arc;
use std::time::{Duration, Instant};

use nvdepot_engine::{Eviction, Options, Store};
use nvdepot_io::{Device, MemDevice};

const MIB: u64 = 1 << 20;

fn cache_opts(eviction: Eviction, sync: bool) -> Options {
    Options {
        segment_bytes: MIB,
        cache_mode: true,
        eviction,
        sync,
        ..Options::default()
    }
    .create_bytes(0)
}

fn value(tag: u32, version: u8) -> Vec<u8> {
    let mut v = vec![version; 4000];
    v[..4].copy_from_slice(&tag.to_le_bytes());
    v
}

/// Waits until background GC has freed room (evictions are asynchronous).
fn settle(s: &Store) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut last = s.stats().evictions;
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        let now = s.stats().evictions;
        if now == last {
            return;
        }
        last = now;
    }
}

/// Writes 100 hot keys, then 14 MiB of other keys into a 12 MiB store,
/// reading the hot keys all along; returns how many hot keys survive.
fn hot_keys_kept(eviction: Eviction) -> usize {
    let dev = Arc::new(MemDevice::new(12 * MIB, 512));
    let s =
        Store::open_devices(vec![dev as Arc<dyn Device>], &cache_opts(eviction, false)).unwrap();
    let ns = s.default_namespace();
    for i in 0..100u32 {
        s.put(ns, format!("hot{i}").as_bytes(), &value(i, 1))
            .unwrap();
    }
    for i in 0..3500u32 {
        s.put(ns, format!("fill{i}").as_bytes(), &value(i, 2))
            .unwrap();
        if i.is_multiple_of(20) {
            for h in 0..100u32 {
                if let Some(v) = s.get(ns, format!("hot{h}").as_bytes()).unwrap() {
                    assert_eq!(v, value(h, 1));
                }
            }
        }
    }
    settle(&s);
    assert!(s.stats().evictions > 1000, "{}", s.stats());
    (0..100u32)
        .filter(|h| s.get(ns, format!("hot{h}").as_bytes()).unwrap().is_some())
        .count()
}

#[test]
fn segment_lru_keeps_hot_keys_that_fifo_evicts() {
    let lru = hot_keys_kept(Eviction::SegmentLru);
    let fifo = hot_keys_kept(Eviction::Fifo);
    assert_eq!(lru, 100, "segment LRU evicted keys read all along");
    assert_eq!(fifo, 0, "FIFO kept keys of the oldest segment");
}

/// Old versions of keys `o0..o119` sit in a segment kept alive by reads
/// of hot keys; their new versions sit in an unread one. Fills the store
/// until LRU evicted the new versions' segment first (at least 100 keys
/// logged in evictions records); returns the store, GC settled.
fn evict_out_of_order(dev: &Arc<MemDevice>, o: &Options) -> Store {
    let s = Store::open_devices(vec![dev.clone() as Arc<dyn Device>], o).unwrap();
    let ns = s.default_namespace();
    // One segment: old versions of o-keys between hot keys.
    for i in 0..120u32 {
        s.put(ns, format!("o{i}").as_bytes(), &value(i, 1)).unwrap();
        s.put(ns, format!("hot{i}").as_bytes(), &value(i, 9))
            .unwrap();
    }
    // New versions, never read.
    for i in 0..120u32 {
        s.put(ns, format!("o{i}").as_bytes(), &value(i, 2)).unwrap();
    }
    let mut i = 0u32;
    while s.stats().evictions_logged < 100 {
        s.put(ns, format!("fill{i}").as_bytes(), &value(i, 3))
            .unwrap();
        if i.is_multiple_of(20) {
            for h in 0..120u32 {
                s.get(ns, format!("hot{h}").as_bytes()).unwrap();
            }
        }
        i += 1;
        assert!(i < 20_000, "no out-of-order eviction: {}", s.stats());
    }
    settle(&s);
    s
}

/// Old versions of keys sit in a segment kept alive by reads; their new
/// versions sit in an unread one, which LRU evicts first. Without the
/// eviction log a crash would resurrect the old versions.
#[test]
fn out_of_order_eviction_never_resurrects_older_values_after_a_crash() {
    for seed in 0..4u64 {
        let dev = Arc::new(MemDevice::new(12 * MIB, 512));
        let o = cache_opts(Eviction::SegmentLru, true);
        let s = evict_out_of_order(&dev, &o);
        let ns = s.default_namespace();
        let present_before = (0..120u32)
            .filter(|k| s.get(ns, format!("o{k}").as_bytes()).unwrap().is_some())
            .count();
        assert!(present_before < 120, "the new versions were not evicted");
        drop(s);
        let (crashed, _) = dev.crash(seed);
        let s = Store::open_devices(vec![Arc::new(crashed) as Arc<dyn Device>], &o).unwrap();
        for k in 0..120u32 {
            if let Some(v) = s.get(ns, format!("o{k}").as_bytes()).unwrap() {
                assert_eq!(v, value(k, 2), "o{k} came back with its older value");
            }
        }
        let hot = (0..120u32)
            .filter(|h| s.get(ns, format!("hot{h}").as_bytes()).unwrap().is_some())
            .count();
        assert_eq!(hot, 120, "hot keys lost across the restart");
    }
}

/// As above, and then one bit of every evictions record flips at rest
/// after the crash. A lost evictions record would let the older versions
/// of the keys it lists come back; a single flipped bit is corrected
/// (CRC32C locates it), so none may, and `check` reports the correction.
#[test]
fn a_flipped_bit_in_an_evictions_record_is_corrected() {
    use nvdepot_engine::format::{check_record, RecordCheck, RecordKind, RECORD_HEADER_BYTES};
    use nvdepot_io::AlignedBuf;
    for seed in 0..2u64 {
        let dev = Arc::new(MemDevice::new(12 * MIB, 512));
        let o = cache_opts(Eviction::SegmentLru, true);
        let s = evict_out_of_order(&dev, &o);
        let ns = s.default_namespace();
        drop(s);
        let (crashed, _) = dev.crash(seed);
        let mut image = AlignedBuf::new(crashed.capacity() as usize, 4096);
        crashed.read_at(&mut image, 0).unwrap();
        let mut flipped = 0;
        for (n, off) in (0..image.len()).step_by(512).enumerate() {
            if let RecordCheck::Valid(h) = check_record(&image[off..]) {
                if h.kind == RecordKind::Evictions && h.value_len > 0 {
                    let byte = RECORD_HEADER_BYTES + n % h.value_len as usize;
                    crashed.corrupt_at_rest((off + byte) as u64, 1 << (n % 8));
                    flipped += 1;
                }
            }
        }
        assert!(flipped > 0, "no evictions record on the device");
        let crashed = Arc::new(crashed);
        let report =
            nvdepot_engine::check_devices(vec![crashed.clone() as Arc<dyn Device>], &o).unwrap();
        assert!(report.is_ok(), "{report}");
        assert!(report.is_ok(), "{report}");
        assert!(
            report
                .to_string()
                .contains("DAMAGE (nothing lost) evictions record"),
            "the corrections are not reported:\n{report}"
        );
        let s = Store::open_devices(vec![crashed as Arc<dyn Device>], &o).unwrap();
        for k in 0..120u32 {
            if let Some(v) = s.get(ns, format!("o{k}").as_bytes()).unwrap() {
                assert!(
                    v == value(k, 2),
                    "seed {seed}: o{k} came back as version {} ({flipped} records hit)",
                    v[4]
                );
            }
        }
    }
}
