//! Faults on the real paths, injected by the in-memory device: a failed
//! flush or write acknowledges nothing and stops writes for good (never
//! retried as if it had succeeded), while reads go on; a read error is an
//! error for that read only.

use std::sync::Arc;

use nvdepot_engine::{Error, Options, Store};
use nvdepot_io::{Device, FileDevice, MemDevice};

const MIB: u64 = 1 << 20;

fn store(sync: bool) -> (Arc<MemDevice>, Store) {
    let dev = Arc::new(MemDevice::named("faulty", 32 * MIB, 512));
    let opts = Options {
        segment_bytes: MIB,
        sync,
        background_gc: false,
        ..Options::default()
    }
    .create_bytes(0);
    let s = Store::open_devices(vec![dev.clone() as Arc<dyn Device>], &opts).unwrap();
    (dev, s)
}

#[test]
fn a_failed_flush_acknowledges_nothing_and_stops_writes() {
    let (dev, s) = store(true);
    let ns = s.default_namespace();
    s.put(ns, b"before", b"1").unwrap();
    dev.fail_flush_after(0);
    let err = s.put(ns, b"during", b"2").unwrap_err();
    assert!(err.to_string().contains("flush"), "{err}");
    // The device works again, but the store does not pretend the lost
    // flush happened: every later write fails, saying why.
    dev.clear_faults();
    let again = s.put(ns, b"after", b"3").unwrap_err();
    assert!(matches!(again, Error::Unusable(_)), "{again}");
    assert!(s.delete(ns, b"before").is_err());
    // Reads go on.
    assert_eq!(s.get(ns, b"before").unwrap().as_deref(), Some(&b"1"[..]));
    // A crash now: what was acknowledged is there, the rest may be absent.
    drop(s);
    let (after, _) = dev.crash(1);
    let after: Arc<dyn Device> = Arc::new(after);
    let s = Store::open_devices(vec![after], &Options::default()).unwrap();
    assert_eq!(s.get(ns, b"before").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(s.get(ns, b"after").unwrap(), None);
}

#[test]
fn a_failed_periodic_flush_stops_writes_in_cache_mode() {
    let (dev, s) = store(false);
    let ns = s.default_namespace();
    s.put(ns, b"k", b"v").unwrap();
    dev.fail_flush_after(0);
    // What the background thread does every flush interval.
    assert!(s.flush().is_err());
    dev.clear_faults();
    let err = s.put(ns, b"k2", b"v").unwrap_err();
    assert!(err.to_string().contains("device flush failed"), "{err}");
    assert_eq!(s.get(ns, b"k").unwrap().as_deref(), Some(&b"v"[..]));
}

#[test]
fn a_failed_write_acknowledges_nothing_and_stops_writes() {
    let (dev, s) = store(true);
    let ns = s.default_namespace();
    s.put(ns, b"a", b"1").unwrap();
    dev.fail_writes_after(0);
    assert!(s.put(ns, b"b", b"2").is_err());
    dev.clear_faults();
    assert!(s.put(ns, b"c", b"3").is_err());
    assert_eq!(s.get(ns, b"a").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(s.get(ns, b"b").unwrap(), None);
}

#[test]
fn a_read_error_fails_that_read_only() {
    let (dev, s) = store(true);
    let ns = s.default_namespace();
    for i in 0..100u32 {
        s.put(ns, format!("k{i}").as_bytes(), &[i as u8; 700])
            .unwrap();
    }
    dev.fail_reads_at(0..32 * MIB);
    let err = s.get(ns, b"k7").unwrap_err();
    assert!(
        err.to_string().contains("faulty"),
        "names the device: {err}"
    );
    dev.clear_faults();
    assert_eq!(s.get(ns, b"k7").unwrap(), Some(vec![7; 700]));
    s.put(ns, b"k100", b"still writable").unwrap();
}

#[test]
fn a_full_file_system_fails_writes_and_keeps_reads() {
    let (dev, s) = store(true);
    let ns = s.default_namespace();
    s.put(ns, b"a", b"1").unwrap();
    dev.fail_writes_no_space_after(0);
    let err = s.put(ns, b"b", b"2").unwrap_err();
    assert!(err.to_string().contains("No space left"), "{err}");
    // No retry as if it had worked: writes keep failing, saying why.
    dev.clear_faults();
    let again = s.put(ns, b"c", b"3").unwrap_err();
    assert!(again.to_string().contains("No space left"), "{again}");
    assert_eq!(s.get(ns, b"a").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(s.get(ns, b"b").unwrap(), None);
}

/// Where key `k`'s 700-byte value of `i`s sits on the device.
fn find(dev: &MemDevice, key: &[u8]) -> u64 {
    let image = dev.snapshot().unwrap();
    let mut buf = nvdepot_io::AlignedBuf::new(32 * MIB as usize, 4096);
    image.read_at(&mut buf, 0).unwrap();
    buf.windows(key.len() + 4)
        .position(|w| &w[..key.len()] == key && w[key.len()..] == [7; 4])
        .expect("record on the device") as u64
}

#[test]
fn silent_corruption_is_an_error_never_wrong_data() {
    let (dev, s) = store(true);
    let ns = s.default_namespace();
    for i in 0..100u32 {
        s.put(ns, format!("k{i}").as_bytes(), &[i as u8; 700])
            .unwrap();
    }
    let at = find(&dev, b"k7") + 300;

    // On read: the bytes on the device are fine, the transfer is not.
    dev.corrupt_reads_at(at..at + 1);
    let err = s.get(ns, b"k7").unwrap_err();
    assert!(matches!(err, Error::Corrupt { .. }), "{err}");
    assert!(
        err.to_string().contains("faulty"),
        "names the device: {err}"
    );
    assert_eq!(s.get(ns, b"k8").unwrap(), Some(vec![8; 700]));
    dev.clear_faults();
    assert_eq!(s.get(ns, b"k7").unwrap(), Some(vec![7; 700]));

    // At rest: the medium changed under a live store.
    dev.corrupt_at_rest(at, 0x20);
    let err = s.get(ns, b"k7").unwrap_err();
    assert!(matches!(err, Error::Corrupt { .. }), "{err}");
    assert_eq!(s.get(ns, b"k9").unwrap(), Some(vec![9; 700]));
    // A new value replaces the damaged one.
    s.put(ns, b"k7", b"again").unwrap();
    assert_eq!(s.get(ns, b"k7").unwrap().as_deref(), Some(&b"again"[..]));
}

/// A real file system filling up (a 6 MiB tmpfs; needs root to mount it,
/// as in CI): creating a store larger than the free space fails with a
/// clear error, and a store on a sparse file (one made before the disk
/// filled, or copied sparse) answers writes with `ENOSPC` once the file
/// system is full, while every acknowledged value stays readable.
#[test]
fn a_real_file_system_that_fills_up() {
    use std::process::Command;
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=6m", "tmpfs"])
        .arg(&mnt)
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("SKIPPED: cannot mount a tmpfs here (needs root); CI runs it");
        return;
    }
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(mnt.clone());
    let opts = Options {
        segment_bytes: MIB,
        background_gc: false,
        ..Options::default()
    };

    let Err(err) = Store::open(&mnt.join("big"), &opts.clone().create_bytes(64 * MIB)) else {
        panic!("a 64 MiB store created on a 6 MiB file system");
    };
    assert!(err.to_string().contains("No space left"), "{err}");

    let path = mnt.join("sparse");
    std::fs::File::create(&path)
        .unwrap()
        .set_len(32 * MIB)
        .unwrap();
    let dev = FileDevice::open(&path, None)
        .or_else(|_| FileDevice::open_buffered(&path, None))
        .unwrap();
    let s = Store::open_devices(
        vec![Arc::new(dev) as Arc<dyn Device>],
        &opts.create_bytes(0),
    )
    .unwrap();
    let ns = s.default_namespace();
    let mut acked = 0u32;
    let err = loop {
        match s.put(ns, format!("k{acked}").as_bytes(), &[acked as u8; 3000]) {
            Ok(()) => acked += 1,
            Err(e) => break e,
        }
        assert!(acked < 20_000, "6 MiB never filled");
    };
    assert!(err.to_string().contains("No space left"), "{err}");
    assert!(
        acked > 100,
        "only {acked} puts before the file system filled"
    );
    assert!(s.put(ns, b"later", b"x").is_err(), "writes stay refused");
    for i in 0..acked {
        let v = s.get(ns, format!("k{i}").as_bytes()).unwrap();
        assert_eq!(v, Some(vec![i as u8; 3000]), "key k{i}");
    }
}
