//! FileDevice on a real file with O_DIRECT. The temp dirs live under the
//! target dir (on /work's ext4), not /tmp, which may be a tmpfs.

use nvdepot_io::{AlignedBuf, Device, FileDevice, IoError};
use std::path::PathBuf;

const MIB: u64 = 1 << 20;

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir")
}

fn filled(len: usize, align: usize, seed: u8) -> AlignedBuf {
    let mut b = AlignedBuf::new(len, align);
    for (i, x) in b.iter_mut().enumerate() {
        *x = (i as u8).wrapping_mul(31).wrapping_add(seed);
    }
    b
}

#[test]
fn round_trip_at_aligned_offsets() {
    let dir = tempdir();
    let path = dir.path().join("dev");
    let dev = FileDevice::open(&path, Some(4 * MIB)).unwrap();
    let a = dev.alignment();
    assert!(a >= 512 && a.is_power_of_two(), "alignment {a}");
    assert!(dev.is_direct());
    assert!(!dev.is_block_device());
    assert_eq!(dev.capacity(), 4 * MIB);
    assert_eq!(dev.capacity() % a as u64, 0);
    assert_eq!(dev.path(), path.as_path());
    assert_eq!(dev.name(), path.display().to_string());

    let offsets = [0, a as u64, 7 * a as u64, MIB, 4 * MIB - 64 * 1024];
    for (i, &off) in offsets.iter().enumerate() {
        let w = filled(64 * 1024, a, i as u8);
        dev.write_at(&w, off).unwrap();
        let mut r = AlignedBuf::new(64 * 1024, a);
        dev.read_at(&mut r, off).unwrap();
        assert_eq!(&r[..], &w[..], "offset {off:#x}");
    }
    // A single aligned block, between the extents written above.
    let w = filled(a, a, 99);
    dev.write_at(&w, 200 * a as u64).unwrap();
    let mut r = AlignedBuf::new(a, a);
    dev.read_at(&mut r, 200 * a as u64).unwrap();
    assert_eq!(&r[..], &w[..]);
    dev.flush().unwrap();
    // Never-written space reads as zeros.
    dev.read_at(&mut r, 2 * MIB).unwrap();
    assert!(r.iter().all(|&b| b == 0));
}

#[test]
fn reopen_keeps_data_and_never_shrinks() {
    let dir = tempdir();
    let path = dir.path().join("dev");
    let w = filled(8192, 4096, 5);
    {
        let dev = FileDevice::open(&path, Some(2 * MIB)).unwrap();
        dev.write_at(&w, MIB).unwrap();
        dev.flush().unwrap();
    }
    // No size: the existing length is used.
    let dev = FileDevice::open(&path, None).unwrap();
    assert_eq!(dev.capacity(), 2 * MIB);
    let mut r = AlignedBuf::new(8192, 4096);
    dev.read_at(&mut r, MIB).unwrap();
    assert_eq!(&r[..], &w[..]);
    drop(dev);
    // A smaller size does not shrink; a larger one grows and keeps data.
    assert_eq!(
        FileDevice::open(&path, Some(MIB)).unwrap().capacity(),
        2 * MIB
    );
    let dev = FileDevice::open(&path, Some(3 * MIB)).unwrap();
    assert_eq!(dev.capacity(), 3 * MIB);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 3 * MIB);
    dev.read_at(&mut r, MIB).unwrap();
    assert_eq!(&r[..], &w[..]);
}

#[test]
fn capacity_rounds_down_to_alignment() {
    let dir = tempdir();
    let path = dir.path().join("dev");
    let dev = FileDevice::open(&path, Some(MIB + 100)).unwrap();
    assert_eq!(dev.capacity(), MIB);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), MIB + 100);
}

#[test]
fn missing_file_without_size_is_an_error_naming_the_path() {
    let dir = tempdir();
    let path = dir.path().join("nope");
    let err = FileDevice::open(&path, None).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, IoError::Open { .. }), "{err:?}");
    assert!(msg.contains(&path.display().to_string()), "{msg}");
    assert!(msg.contains("no size"), "{msg}");
    assert!(!path.exists(), "a failed open must not create the file");
}

#[test]
fn open_errors_name_the_path() {
    let dir = tempdir();
    // A directory is neither a file nor a block device.
    let err = FileDevice::open(dir.path(), Some(MIB)).unwrap_err();
    assert!(
        err.to_string().contains(&dir.path().display().to_string()),
        "{err}"
    );
    // Too small for one aligned block.
    let path = dir.path().join("tiny");
    let err = FileDevice::open(&path, Some(100)).unwrap_err();
    assert!(err.to_string().contains("tiny"), "{err}");
    // A missing parent directory.
    let path: PathBuf = dir.path().join("no/such/dir/dev");
    let err = FileDevice::open(&path, Some(MIB)).unwrap_err();
    assert!(
        err.to_string().contains(&path.display().to_string()),
        "{err}"
    );
}

#[test]
fn read_past_end_of_file_is_short() {
    let dir = tempdir();
    let path = dir.path().join("dev");
    let dev = FileDevice::open(&path, Some(MIB)).unwrap();
    let a = dev.alignment();
    // Shrink the file behind the device's back: reads past the new end
    // return 0 bytes, which must be reported, not looped on or ignored.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(a as u64)
        .unwrap();
    let mut r = AlignedBuf::new(2 * a, a);
    match dev.read_at(&mut r, 0).unwrap_err() {
        IoError::Short {
            op,
            device,
            offset,
            len,
            done,
        } => {
            assert_eq!((op, offset, len, done), ("read", 0, 2 * a, a));
            assert_eq!(device, path.display().to_string());
        }
        e => panic!("expected a short read, got {e:?}"),
    }
}

#[test]
fn buffered_open_round_trips() {
    let dir = tempdir();
    let path = dir.path().join("dev");
    let dev = FileDevice::open_buffered(&path, Some(MIB)).unwrap();
    assert!(!dev.is_direct());
    let a = dev.alignment();
    let w = filled(a, a, 3);
    dev.write_at(&w, a as u64).unwrap();
    dev.flush().unwrap();
    drop(dev);
    let dev = FileDevice::open(&path, None).unwrap();
    let mut r = AlignedBuf::new(a, a);
    dev.read_at(&mut r, a as u64).unwrap();
    assert_eq!(&r[..], &w[..]);
}

#[test]
fn concurrent_writers_on_disjoint_blocks() {
    let dir = tempdir();
    let dev = FileDevice::open(&dir.path().join("dev"), Some(MIB)).unwrap();
    let a = dev.alignment();
    std::thread::scope(|s| {
        for t in 0..4u8 {
            let dev = &dev;
            s.spawn(move || {
                for i in 0..16 {
                    let off = (i * 4 + t as u64) * a as u64;
                    dev.write_at(&filled(a, a, t), off).unwrap();
                }
            });
        }
    });
    let mut r = AlignedBuf::new(a, a);
    for i in 0..64u64 {
        dev.read_at(&mut r, i * a as u64).unwrap();
        assert_eq!(&r[..], &filled(a, a, (i % 4) as u8)[..], "block {i}");
    }
}

#[test]
fn write_cache_is_reported_for_this_disk() {
    let dir = tempdir();
    let dev = FileDevice::open(&dir.path().join("dev"), Some(MIB)).unwrap();
    // Unknown is allowed (no sysfs, a virtual filesystem); print it so a
    // run shows what this machine says.
    eprintln!("volatile write cache: {:?}", dev.volatile_write_cache());
}

#[cfg(debug_assertions)]
#[test]
#[should_panic(expected = "must be multiples of the alignment")]
fn misaligned_offset_panics_in_debug_builds() {
    let dir = tempdir();
    let dev = FileDevice::open(&dir.path().join("dev"), Some(MIB)).unwrap();
    let mut r = AlignedBuf::new(4096, 4096);
    let _ = dev.read_at(&mut r, 100);
}

#[cfg(debug_assertions)]
#[test]
#[should_panic(expected = "must be multiples of the alignment")]
fn misaligned_buffer_panics_in_debug_builds() {
    let dir = tempdir();
    let dev = FileDevice::open(&dir.path().join("dev"), Some(MIB)).unwrap();
    let b = AlignedBuf::new(8192, 4096);
    let _ = dev.write_at(&b[1..4097], 0);
}

#[cfg(debug_assertions)]
#[test]
#[should_panic(expected = "past the capacity")]
fn access_past_capacity_panics_in_debug_builds() {
    let dir = tempdir();
    let dev = FileDevice::open(&dir.path().join("dev"), Some(MIB)).unwrap();
    let mut r = AlignedBuf::new(4096, 4096);
    let _ = dev.read_at(&mut r, MIB);
}

/// A block device: a loop device over a file. Needs root and `losetup`, so
/// it runs only with `NVDEPOT_TEST_LOOP=1` (and `--ignored`).
#[test]
#[ignore = "needs root and losetup; set NVDEPOT_TEST_LOOP=1"]
fn loop_block_device() {
    if std::env::var("NVDEPOT_TEST_LOOP").as_deref() != Ok("1") {
        eprintln!("skipped: set NVDEPOT_TEST_LOOP=1");
        return;
    }
    let dir = tempdir();
    let backing = dir.path().join("backing");
    std::fs::File::create(&backing)
        .unwrap()
        .set_len(8 * MIB)
        .unwrap();
    let losetup = |args: &[&str]| {
        let out = std::process::Command::new("losetup")
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "losetup {args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    let loopdev = losetup(&["-f", "--show", backing.to_str().unwrap()]);
    struct Detach(String);
    impl Drop for Detach {
        fn drop(&mut self) {
            let _ = std::process::Command::new("losetup")
                .args(["-d", &self.0])
                .status();
        }
    }
    let _detach = Detach(loopdev.clone());
    let path = PathBuf::from(&loopdev);
    let dev = FileDevice::open(&path, Some(123)).unwrap(); // size ignored
    assert!(dev.is_block_device());
    assert_eq!(dev.capacity(), 8 * MIB);
    let a = dev.alignment();
    assert!(a >= 512 && a.is_power_of_two());
    let w = filled(4 * a, a, 7);
    dev.write_at(&w, MIB).unwrap();
    dev.flush().unwrap();
    let mut r = AlignedBuf::new(4 * a, a);
    dev.read_at(&mut r, MIB).unwrap();
    assert_eq!(&r[..], &w[..]);
    eprintln!(
        "{loopdev}: alignment {a}, write cache {:?}",
        dev.volatile_write_cache()
    );
    // O_EXCL: a second opener is refused while the first holds it.
    let err = FileDevice::open(&path, None).unwrap_err();
    assert!(err.to_string().contains("in use"), "{err}");
}

#[test]
fn a_second_open_of_the_same_file_is_refused() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = dir.path().join("locked");
    let first = nvdepot_io::FileDevice::open(&path, Some(1 << 20)).unwrap();
    // Refused after waiting (bounded) for the holder to go away.
    let err = nvdepot_io::FileDevice::open(&path, None).expect_err("second open must fail");
    assert!(
        err.to_string().contains("in use by another process"),
        "{err}"
    );
    drop(first);
    nvdepot_io::FileDevice::open(&path, None).expect("free again once closed");
}

#[test]
fn an_open_waits_for_a_lock_that_goes_away() {
    // As after `kill -9`: the old holder's lock is released a little
    // later (here by another thread dropping its device).
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = dir.path().join("locked");
    let first = nvdepot_io::FileDevice::open(&path, Some(1 << 20)).unwrap();
    let holder = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(150));
        drop(first);
    });
    let started = std::time::Instant::now();
    nvdepot_io::FileDevice::open(&path, None).expect("opens once the holder is gone");
    let waited = started.elapsed();
    assert!(
        waited >= std::time::Duration::from_millis(100),
        "{waited:?}"
    );
    holder.join().unwrap();
}
