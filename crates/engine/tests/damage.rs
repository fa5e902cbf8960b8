//! Damage vs a torn tail: a flipped bit in an acknowledged record, after a
//! crash, loses exactly that record; every valid record after it is kept,
//! the damage is reported (by `check` and at open), a store-mode open
//! refuses until told to salvage, and a salvaged store reopens clean.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use nvdepot_engine::{check, DamageKind, Error, Options, Store};

const MIB: u64 = 1 << 20;
const KEYS: usize = 3000;

fn opts() -> Options {
    Options {
        segment_bytes: MIB,
        background_gc: false,
        ..Options::default()
    }
}

fn key(i: usize) -> Vec<u8> {
    format!("key-{i:05}").into_bytes()
}

fn value(i: usize, round: u8) -> Vec<u8> {
    let mut v = format!("value-{i:05}-{round}-").into_bytes();
    v.resize(700, b'a' + (i % 26) as u8);
    v
}

/// A store of `KEYS` keys (key `old` written twice, so an older value of
/// it exists), left as a crash leaves it: no checkpoint.
fn crashed_store(dir: &Path, old: usize) -> PathBuf {
    crashed_store_with(dir, old, &opts(), |_| {})
}

/// As `crashed_store`, opened with `o`; `before_crash` runs last.
fn crashed_store_with(
    dir: &Path,
    old: usize,
    o: &Options,
    before_crash: impl FnOnce(&Store),
) -> PathBuf {
    let s = Store::open(dir, &o.clone().create_bytes(16 * MIB)).unwrap();
    let ns = s.default_namespace();
    s.put(ns, &key(old), &value(old, 0)).unwrap();
    for i in 0..KEYS {
        s.put(ns, &key(i), &value(i, 1)).unwrap();
    }
    before_crash(&s);
    drop(s); // no close: no checkpoint, the next open scans the log
    dir.join("nvdepot.0")
}

/// Flips one bit in the value of the newest record of key `i`.
fn flip_bit_in(file: &Path, i: usize) -> u64 {
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(file)
        .unwrap();
    let mut image = Vec::new();
    f.read_to_end(&mut image).unwrap();
    // Key and the value's start up to its round: the newest record only.
    let needle = [key(i), value(i, 1)[..14].to_vec()].concat();
    let at = image
        .windows(needle.len())
        .position(|w| w == needle)
        .expect("the record is in the file") as u64
        + needle.len() as u64
        + 100;
    f.seek(SeekFrom::Start(at)).unwrap();
    let mut b = [0u8];
    f.read_exact(&mut b).unwrap();
    b[0] ^= 0x10;
    f.seek(SeekFrom::Start(at)).unwrap();
    f.write_all(&b).unwrap();
    f.sync_all().unwrap();
    at
}

/// Every key but `lost` has its newest value; `lost` is gone, and the
/// older value it had (see `crashed_store`) does not come back.
fn assert_all_but(s: &Store, lost: usize) {
    let ns = s.default_namespace();
    let mut missing = Vec::new();
    for i in 0..KEYS {
        match s.get(ns, &key(i)).unwrap() {
            Some(v) => assert_eq!(v, value(i, 1), "key {i}"),
            None => missing.push(i),
        }
    }
    assert_eq!(missing, vec![lost], "only the damaged record is lost");
}

fn damaged_store_round_trip(damaged_key: usize) {
    let dir = tempfile::tempdir().unwrap();
    let file = crashed_store(dir.path(), damaged_key);
    flip_bit_in(&file, damaged_key);
    damaged_store_is_reported_and_salvaged(dir.path(), damaged_key);
}

fn damaged_store_is_reported_and_salvaged(dir: &Path, damaged_key: usize) {
    // `check` reports it as damage to acknowledged data, naming the key.
    let report = check(dir, &opts()).unwrap();
    assert!(!report.is_ok(), "{report}");
    let lost: Vec<_> = report
        .damage
        .iter()
        .filter(|d| d.kind == DamageKind::Lost)
        .collect();
    assert_eq!(lost.len(), 1, "{report}");
    assert_eq!(lost[0].key.as_deref(), Some(&key(damaged_key)[..]));
    assert!(report.to_string().contains("DAMAGE"), "{report}");

    // A store-mode open refuses, naming `nvdepot check` and salvage.
    match Store::open(dir, &opts()) {
        Err(e @ Error::Damaged { .. }) => {
            let msg = e.to_string();
            assert!(
                msg.contains("nvdepot check") && msg.contains("salvage"),
                "{msg}"
            );
        }
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("opened over damage"),
    }

    // Salvage drops exactly the damaged record, and not an older value of
    // its key in its place.
    let salvage = Options {
        salvage: true,
        ..opts()
    };
    let s = Store::open(dir, &salvage).unwrap();
    assert_all_but(&s, damaged_key);
    drop(s); // crash again

    // The salvaged store is clean: a crash reopen needs no salvage.
    let report = check(dir, &opts()).unwrap();
    assert!(report.is_ok(), "{report}");
    let s = Store::open(dir, &opts()).unwrap();
    assert_all_but(&s, damaged_key);
    s.close().unwrap();
}

#[test]
fn bit_flip_in_the_newest_segment_loses_only_that_record() {
    damaged_store_round_trip(KEYS - 40);
}

#[test]
fn bit_flip_in_the_middle_of_the_log_loses_only_that_record() {
    damaged_store_round_trip(KEYS / 2);
}

/// The newest records of a log have no later record whose flush mark
/// covers them (and a mark is coarse: a 256th of a segment). Once the
/// store has been idle, the seal the GC thread appends does: a flipped bit
/// in the very last acknowledged record is then damage, not a torn tail.
#[test]
fn bit_flip_in_the_newest_record_of_a_sealed_log_is_damage() {
    let dir = tempfile::tempdir().unwrap();
    let newest = KEYS - 1;
    let with_gc = Options {
        background_gc: true,
        ..opts()
    };
    let file = crashed_store_with(dir.path(), newest, &with_gc, |s| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while s.stats().log_idle_seals == 0 {
            assert!(std::time::Instant::now() < deadline, "no seal written");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        // One seal per idle spell: the seal itself is nothing new to seal.
        std::thread::sleep(std::time::Duration::from_millis(400));
        assert_eq!(s.stats().log_idle_seals, 1, "an idle log sealed again");
    });
    flip_bit_in(&file, newest);
    damaged_store_is_reported_and_salvaged(dir.path(), newest);
}

/// The control: without a seal (no GC thread, crash right after the last
/// put) the same flip reads as a torn tail, which is what a seal changes.
#[test]
fn bit_flip_in_the_newest_record_of_an_unsealed_log_reads_as_torn() {
    let dir = tempfile::tempdir().unwrap();
    let newest = KEYS - 1;
    let file = crashed_store(dir.path(), newest);
    flip_bit_in(&file, newest);
    let report = check(dir.path(), &opts()).unwrap();
    assert!(
        report.damage.iter().all(|d| d.kind == DamageKind::TornTail),
        "{report}"
    );
    assert!(
        report
            .damage
            .iter()
            .any(|d| d.key.as_deref() == Some(&key(newest)[..])),
        "{report}"
    );
}

#[test]
fn cache_mode_drops_the_damaged_record_and_opens() {
    let dir = tempfile::tempdir().unwrap();
    let damaged = KEYS - 10;
    let file = crashed_store(dir.path(), damaged);
    flip_bit_in(&file, damaged);
    let cache = Options {
        cache_mode: true,
        ..opts()
    };
    let s = Store::open(dir.path(), &cache).unwrap();
    assert_all_but(&s, damaged);
}

/// The start of the segment holding the newest record of key `i`.
fn segment_of_newest(image: &[u8], i: usize) -> usize {
    use nvdepot_engine::format::DEVICE_HEADER_BYTES;
    let needle = [key(i), value(i, 1)[..14].to_vec()].concat();
    let at = image
        .windows(needle.len())
        .position(|w| w == needle)
        .expect("the record is in the file") as u64;
    ((at - DEVICE_HEADER_BYTES) / MIB * MIB + DEVICE_HEADER_BYTES) as usize
}

/// One damaged copy of a segment header (each copy in its own grain):
/// the other is used, every record is served, `check` reports the damage
/// as losing nothing, and the open rewrites the header.
#[test]
fn one_damaged_segment_header_copy_loses_nothing() {
    use nvdepot_engine::format::SEGMENT_HEADER_COPY_AT;
    for copy in [0, SEGMENT_HEADER_COPY_AT] {
        let dir = tempfile::tempdir().unwrap();
        let old = KEYS / 2;
        let file = crashed_store(dir.path(), old);
        let mut image = std::fs::read(&file).unwrap();
        let start = segment_of_newest(&image, old);
        image[start + copy + 36] ^= 0x01;
        std::fs::write(&file, &image).unwrap();

        let report = check(dir.path(), &opts()).unwrap();
        assert!(report.is_ok(), "{report}");
        assert!(
            report.to_string().contains("DAMAGE (nothing lost)"),
            "{report}"
        );
        let s = Store::open(dir.path(), &opts()).unwrap();
        assert_all_but_none(&s);
        drop(s);
        let report = check(dir.path(), &opts()).unwrap();
        assert!(
            !report.to_string().contains("DAMAGE"),
            "rewritten: {report}"
        );
    }
}

fn assert_all_but_none(s: &Store) {
    let ns = s.default_namespace();
    for i in 0..KEYS {
        assert_eq!(s.get(ns, &key(i)).unwrap(), Some(value(i, 1)), "key {i}");
    }
}

/// Both copies of a segment header damaged: the segment cannot be trusted
/// (a freed segment's leftovers look like live records), so it is dropped
/// whole — reported, refused in store mode, salvaged on request — and the
/// keys it held are hidden rather than served at an older value.
#[test]
fn a_damaged_segment_header_is_reported_and_never_resurrects() {
    use nvdepot_engine::format::SEGMENT_HEADER_COPY_AT;
    let dir = tempfile::tempdir().unwrap();
    let old = KEYS / 2;
    let file = crashed_store(dir.path(), old);
    let mut image = std::fs::read(&file).unwrap();
    let segment_start = segment_of_newest(&image, old);
    image[segment_start + 36] ^= 0x01;
    image[segment_start + SEGMENT_HEADER_COPY_AT + 36] ^= 0x01;
    std::fs::write(&file, &image).unwrap();

    let report = check(dir.path(), &opts()).unwrap();
    assert!(!report.is_ok(), "{report}");
    assert!(report.to_string().contains("segment header"), "{report}");
    assert!(matches!(
        Store::open(dir.path(), &opts()),
        Err(Error::Damaged { .. })
    ));
    let salvage = Options {
        salvage: true,
        ..opts()
    };
    let s = Store::open(dir.path(), &salvage).unwrap();
    let ns = s.default_namespace();
    let mut missing = 0;
    for i in 0..KEYS {
        match s.get(ns, &key(i)).unwrap() {
            Some(v) => assert_eq!(v, value(i, 1), "key {i}: never an older value"),
            None => missing += 1,
        }
    }
    assert!(s.get(ns, &key(old)).unwrap().is_none());
    assert!(missing > 0 && missing < KEYS / 2, "{missing} missing");
    drop(s);
    // Salvaged: the next crash reopen is clean and still hides them.
    let report = check(dir.path(), &opts()).unwrap();
    assert!(report.is_ok(), "{report}");
    let s = Store::open(dir.path(), &opts()).unwrap();
    assert!(s.get(s.default_namespace(), &key(old)).unwrap().is_none());
}

/// A device aligned to 4 KiB gets 4 KiB grains (a store never has an
/// alignment above its grain), so its seals are 4 KiB: with records above
/// the 1 MiB write buffer (each in a buffer of its own) and small ones
/// between them, the store reopens from its log with nothing reported and
/// every value intact.
#[test]
fn seals_on_a_device_aligned_to_4k_round_trip() {
    use nvdepot_io::{Device, MemDevice};
    use std::sync::Arc;
    let dev = Arc::new(MemDevice::new(96 * MIB, 4096));
    let o = Options {
        segment_bytes: 8 * MIB,
        background_gc: false,
        ..Options::default()
    };
    let s = Store::open_devices(
        vec![dev.clone() as Arc<dyn Device>],
        &o.clone().create_bytes(0),
    )
    .unwrap();
    let ns = s.default_namespace();
    let big = |i: usize| vec![b'a' + (i % 26) as u8; (1 << 20) + 1000 + 600 * i];
    for i in 0..12 {
        s.put(ns, &key(i), &big(i)).unwrap();
        s.put(ns, &key(100 + i), &value(i, 1)).unwrap();
    }
    drop(s); // no close: the next open scans the log
    let report = nvdepot_engine::check_devices(vec![dev.clone() as Arc<dyn Device>], &o).unwrap();
    assert!(report.is_ok() && report.damage.is_empty(), "{report}");
    let s = Store::open_devices(vec![dev as Arc<dyn Device>], &o).unwrap();
    for i in 0..12 {
        assert_eq!(s.get(ns, &key(i)).unwrap(), Some(big(i)));
        assert_eq!(s.get(ns, &key(100 + i)).unwrap(), Some(value(i, 1)));
    }
}

/// The namespace registry record is the only record naming a namespace:
/// one flipped bit anywhere in it (here: every 7th bit of its head, key
/// and value, one at a time) is corrected, so after a crash the namespace
/// and every key in it are served, and `check` says nothing was lost.
#[test]
fn one_flipped_bit_in_a_namespace_registry_record_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let name = "registry-under-test";
    {
        let s = Store::open(dir.path(), &opts().create_bytes(16 * MIB)).unwrap();
        let ns = s.create_namespace(name).unwrap();
        for i in 0..200 {
            s.put(ns, &key(i), &value(i, 1)).unwrap();
        }
        drop(s); // crash: no checkpoint
    }
    let file = dir.path().join("nvdepot.0");
    let clean = std::fs::read(&file).unwrap();
    let at = clean
        .windows(name.len())
        .position(|w| w == name.as_bytes())
        .expect("the registry record is in the file");
    let start = at - nvdepot_engine::format::RECORD_HEADER_BYTES;
    let end = at + name.len() + 8;
    for bit in (start * 8..end * 8).step_by(7) {
        let mut image = clean.clone();
        image[bit / 8] ^= 1 << (bit % 8);
        std::fs::write(&file, &image).unwrap();
        let report = check(dir.path(), &opts()).unwrap();
        assert!(report.is_ok(), "bit {bit}: {report}");
        assert!(
            report.repaired.iter().any(|r| r.contains("registry")),
            "bit {bit}: {report}"
        );
        let s = Store::open(dir.path(), &opts()).unwrap();
        let ns = s
            .namespace(name)
            .unwrap_or_else(|| panic!("bit {bit}: namespace lost"));
        for i in 0..200 {
            assert_eq!(s.get(ns, &key(i)).unwrap(), Some(value(i, 1)), "bit {bit}");
        }
        drop(s); // no close: the device keeps the flip for the next round
        std::fs::write(&file, &clean).unwrap();
    }
}
