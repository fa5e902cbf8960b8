//! MemDevice: read-your-writes, flush, crashes (torn and reordered) and
//! injected faults. Randomised tests print their seed.

use nvdepot_io::{AlignedBuf, Device, IoError, MemDevice};
use std::sync::Arc;

const A: usize = 512;
const MIB: u64 = 1 << 20;

/// An exactly `len`-byte buffer, 4 KiB-aligned when `len` allows.
fn buf(len: usize) -> AlignedBuf {
    AlignedBuf::new(len, if len & 4095 == 0 { 4096 } else { A })
}

fn block(len: usize, byte: u8) -> AlignedBuf {
    let mut b = buf(len);
    b.fill(byte);
    b
}

fn read(dev: &MemDevice, offset: u64, len: usize) -> Vec<u8> {
    let mut b = buf(len);
    dev.read_at(&mut b, offset).unwrap();
    b.to_vec()
}

#[test]
fn read_your_writes_across_pages() {
    let dev = MemDevice::new(256 * MIB, A);
    assert_eq!((dev.capacity(), dev.alignment()), (256 * MIB, A));
    assert!(read(&dev, 0, 8192).iter().all(|&b| b == 0));
    // Straddles a 4 KiB page boundary, then partly overwritten.
    dev.write_at(&block(8192, 1), 4096 - 512).unwrap();
    dev.write_at(&block(512, 2), 4096).unwrap();
    let r = read(&dev, 0, 12288);
    assert!(r[..3584].iter().all(|&b| b == 0));
    assert!(r[3584..4096].iter().all(|&b| b == 1));
    assert!(r[4096..4608].iter().all(|&b| b == 2));
    assert!(r[4608..11776].iter().all(|&b| b == 1));
    assert!(r[11776..].iter().all(|&b| b == 0));
    // The last block of the device.
    dev.write_at(&block(A, 9), 256 * MIB - A as u64).unwrap();
    assert_eq!(read(&dev, 256 * MIB - 4096, 4096)[4096 - A..], [9; A]);
    dev.flush().unwrap();
    assert_eq!(read(&dev, 4096, 512), vec![2; 512]);
    assert_eq!((dev.writes(), dev.flushes()), (3, 1));
    assert_eq!(dev.bytes_written(), 8192 + 512 + A as u64);
    assert_eq!(dev.reads(), 4);
}

#[test]
fn many_large_devices_are_cheap() {
    // Sparse: 100 devices of 256 MiB must not allocate 25 GiB.
    let devs: Vec<_> = (0..100).map(|_| MemDevice::new(256 * MIB, 4096)).collect();
    for d in &devs {
        d.write_at(&block(4096, 1), 255 * MIB).unwrap();
    }
    let names: std::collections::HashSet<_> = devs.iter().map(|d| d.name().to_string()).collect();
    assert_eq!(names.len(), 100, "default names are distinct");
}

#[test]
fn crash_drops_unflushed_and_keeps_flushed() {
    for seed in 0..64 {
        let dev = MemDevice::named("d0", MIB, A);
        dev.write_at(&block(4096, 1), 0).unwrap();
        dev.flush().unwrap();
        dev.write_at(&block(4096, 2), 0).unwrap(); // unflushed overwrite
        dev.write_at(&block(4096, 3), 8192).unwrap(); // unflushed
        dev.write_at(&block(4096, 4), 16384).unwrap(); // unflushed, the last
        assert_eq!(dev.unflushed_writes(), 3);
        let (after, report) = dev.crash(seed);
        assert_eq!(after.name(), "d0");
        assert_eq!(report.seed, seed);
        assert_eq!(
            read(&after, 0, 4096),
            vec![1; 4096],
            "seed {seed}: flushed data lost"
        );
        assert_eq!(read(&after, 8192, 4096), vec![0; 4096], "seed {seed}");
        let last = read(&after, 16384, 4096);
        match report.torn {
            Some((off, len, kept)) => {
                assert_eq!((off, len), (16384, 4096), "seed {seed}");
                assert!(0 < kept && kept < len, "seed {seed}");
                assert!(last[..kept].iter().all(|&b| b == 4), "seed {seed}");
                assert!(last[kept..].iter().all(|&b| b == 0), "seed {seed}");
                assert_eq!((report.dropped_writes, report.kept_writes), (2, 0));
            }
            None if report.kept_writes == 1 => {
                assert_eq!(last, vec![4; 4096], "seed {seed}");
                assert_eq!(report.dropped_writes, 2);
            }
            None => {
                assert_eq!(last, vec![0; 4096], "seed {seed}");
                assert_eq!(report.dropped_writes, 3);
            }
        }
        assert_eq!(after.unflushed_writes(), 0);
    }
}

#[test]
fn torn_write_keeps_a_prefix_over_old_durable_bytes() {
    // Find a seed that tears, then check it replays identically.
    let run = |seed: u64| {
        let dev = MemDevice::new(MIB, A);
        dev.write_at(&block(8192, 0xAA), 4096).unwrap();
        dev.flush().unwrap();
        dev.write_at(&block(8192, 0xBB), 4096).unwrap();
        let (after, report) = dev.crash(seed);
        (read(&after, 4096, 8192), report)
    };
    let seed = (0..1000)
        .find(|&s| run(s).1.torn.is_some())
        .expect("some seed tears");
    let (bytes, report) = run(seed);
    let (off, len, kept) = report.torn.unwrap();
    eprintln!("seed {seed}: torn at {kept} of {len}");
    assert_eq!((off, len), (4096, 8192));
    assert!(bytes[..kept].iter().all(|&b| b == 0xBB), "seed {seed}");
    assert!(bytes[kept..].iter().all(|&b| b == 0xAA), "seed {seed}");
    let (again, report2) = run(seed);
    assert_eq!(again, bytes, "seed {seed} does not replay");
    assert_eq!(report2.torn, report.torn);
    // Over many seeds every outcome happens.
    let outcomes: Vec<_> = (0..200).map(|s| run(s).1).collect();
    assert!(outcomes.iter().any(|r| r.torn.is_some()));
    assert!(outcomes.iter().any(|r| r.kept_writes == 1));
    assert!(outcomes.iter().any(|r| r.dropped_writes == 1));
    let kepts: std::collections::HashSet<_> = outcomes
        .iter()
        .filter_map(|r| r.torn.map(|t| t.2))
        .collect();
    assert!(kepts.len() > 10, "tear points vary: {kepts:?}");
}

#[test]
fn crash_with_nothing_unflushed_changes_nothing() {
    let dev = MemDevice::new(MIB, A);
    dev.write_at(&block(4096, 7), 4096).unwrap();
    dev.flush().unwrap();
    let (after, report) = dev.crash(1);
    assert_eq!(
        (report.dropped_writes, report.kept_writes, report.torn),
        (0, 0, None)
    );
    assert_eq!(read(&after, 4096, 4096), vec![7; 4096]);
    // The new device works and can crash in turn.
    after.write_at(&block(512, 8), 0).unwrap();
    let (again, _) = after.crash(2);
    assert_eq!(read(&again, 4096, 4096), vec![7; 4096]);
}

#[test]
fn ops_on_a_crashed_device_fail() {
    let dev = MemDevice::named("gone", MIB, A);
    dev.write_at(&block(512, 1), 0).unwrap();
    let _ = dev.crash(0);
    assert!(dev.is_crashed());
    let mut b = buf(512);
    let crashed = |r: Result<(), IoError>| match r {
        Err(IoError::Crashed { device }) => assert_eq!(device, "gone"),
        other => panic!("expected Crashed, got {other:?}"),
    };
    crashed(dev.read_at(&mut b, 0));
    crashed(dev.write_at(&b, 0));
    crashed(dev.flush());
    assert!(matches!(dev.snapshot(), Err(IoError::Crashed { .. })));
}

#[test]
#[should_panic(expected = "already crashed")]
fn crashing_twice_panics() {
    let dev = MemDevice::new(MIB, A);
    let _ = dev.crash(0);
    let _ = dev.crash(1);
}

#[test]
fn reordered_crash_keeps_any_subset_in_order() {
    // Eight unflushed writes to distinct blocks plus two to one block.
    let mut seen_gaps = false;
    for seed in 0..200 {
        let dev = MemDevice::new(MIB, A);
        for i in 0..8u8 {
            dev.write_at(&block(A, i + 1), i as u64 * 4096).unwrap();
        }
        dev.write_at(&block(A, 0x10), 64 * 1024).unwrap();
        dev.write_at(&block(A, 0x20), 64 * 1024).unwrap();
        let (after, r) = dev.crash_reordered(seed);
        assert_eq!(
            r.dropped_writes + r.kept_writes + r.torn.is_some() as usize,
            10
        );
        let mut survived = Vec::new();
        for i in 0..8u8 {
            let got = read(&after, i as u64 * 4096, A);
            let torn = r.torn.filter(|t| t.0 == i as u64 * 4096);
            if let Some((_, _, kept)) = torn {
                assert!(got[..kept].iter().all(|&b| b == i + 1), "seed {seed}");
                assert!(got[kept..].iter().all(|&b| b == 0), "seed {seed}");
            } else {
                assert!(got == vec![i + 1; A] || got == vec![0; A], "seed {seed}");
                survived.push(got[0] != 0);
            }
        }
        seen_gaps |= survived.windows(2).any(|w| !w[0] && w[1]);
        // The overlapping pair: each byte is 0, 0x10 or 0x20, a prefix of
        // at most one of them torn.
        let got = read(&after, 64 * 1024, A);
        assert!(
            got.iter().all(|&b| [0, 0x10, 0x20].contains(&b)),
            "seed {seed}"
        );
    }
    assert!(
        seen_gaps,
        "an earlier write was lost while a later one survived"
    );
}

#[test]
fn reordered_survivors_apply_in_return_order() {
    // Both overlapping writes survive whole: the later must win.
    let both = (0..500).find_map(|seed| {
        let dev = MemDevice::new(MIB, A);
        dev.write_at(&block(A, 1), 0).unwrap();
        dev.write_at(&block(A, 2), 0).unwrap();
        let (after, r) = dev.crash_reordered(seed);
        (r.kept_writes == 2).then(|| read(&after, 0, A))
    });
    assert_eq!(both.expect("some seed keeps both"), vec![2; A]);
}

#[test]
fn injected_faults() {
    let dev = MemDevice::named("f", MIB, A);
    let b = block(4096, 5);
    dev.fail_writes_after(2);
    dev.write_at(&b, 0).unwrap();
    dev.write_at(&b, 4096).unwrap();
    let err = dev.write_at(&b, 8192).unwrap_err();
    assert!(
        matches!(
            err,
            IoError::Injected {
                op: "write",
                offset: 8192,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        read(&dev, 8192, 4096),
        vec![0; 4096],
        "a failed write writes nothing"
    );
    assert_eq!(dev.writes(), 2);

    dev.fail_reads_at(4096 + 100..4096 + 101);
    assert!(matches!(
        dev.read_at(&mut AlignedBuf::new(4096, 4096), 4096),
        Err(IoError::Injected { op: "read", .. })
    ));
    assert_eq!(
        read(&dev, 0, 4096),
        vec![5; 4096],
        "reads outside the range work"
    );

    dev.fail_flush_after(0);
    assert!(matches!(
        dev.flush(),
        Err(IoError::Injected { op: "flush", .. })
    ));
    assert_eq!(
        dev.unflushed_writes(),
        2,
        "a failed flush makes nothing durable"
    );
    dev.clear_faults();
    dev.write_at(&b, 8192).unwrap();
    dev.flush().unwrap();
    assert_eq!(dev.unflushed_writes(), 0);
    let (after, _) = dev.crash(3);
    assert_eq!(read(&after, 0, 12288), vec![5; 12288]);
}

#[test]
fn snapshot_and_from_image() {
    let dev = MemDevice::new(64 * 1024, A);
    dev.write_at(&block(A, 1), 0).unwrap();
    dev.flush().unwrap();
    dev.write_at(&block(A, 2), 4096).unwrap();
    let snap = dev.snapshot().unwrap();
    assert_eq!(snap.unflushed_writes(), 0);
    let (after, _) = snap.crash(0);
    assert_eq!(read(&after, 0, A), vec![1; A]);
    assert_eq!(
        read(&after, 4096, A),
        vec![2; A],
        "a snapshot is all durable"
    );

    let mut image = vec![0u8; 64 * 1024];
    image[8192..8192 + A].fill(3);
    let dev = MemDevice::from_image(&image, A);
    assert_eq!(dev.capacity(), 64 * 1024);
    assert_eq!(read(&dev, 0, 64 * 1024), image);
}

#[test]
#[should_panic(expected = "must be multiples of the alignment")]
fn misaligned_access_panics() {
    let dev = MemDevice::new(MIB, 4096);
    let _ = dev.write_at(&block(512, 1), 0);
}

#[test]
fn concurrent_writers_and_a_crash_from_another_thread() {
    let seed: u64 = std::env::var("SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(42);
    eprintln!("seed {seed}");
    let dev = Arc::new(MemDevice::new(64 * MIB, A));
    let writers: Vec<_> = (0..4u8)
        .map(|t| {
            let dev = Arc::clone(&dev);
            std::thread::spawn(move || {
                let b = block(4096, t + 1);
                let mut ok = 0u64;
                for i in 0u64.. {
                    let off = (i % 1024 * 4 + t as u64) * 4096;
                    match dev.write_at(&b, off) {
                        Ok(()) => ok += 1,
                        Err(IoError::Crashed { .. }) => return ok,
                        Err(e) => panic!("unexpected {e}"),
                    }
                    if i % 8 == 7 {
                        match dev.flush() {
                            Ok(()) | Err(IoError::Crashed { .. }) => {}
                            Err(e) => panic!("unexpected {e}"),
                        }
                    }
                    let mut r = AlignedBuf::new(4096, 4096);
                    match dev.read_at(&mut r, off) {
                        Ok(()) => assert!(r.iter().all(|&x| x == t + 1)),
                        Err(IoError::Crashed { .. }) => return ok,
                        Err(e) => panic!("unexpected {e}"),
                    }
                }
                unreachable!()
            })
        })
        .collect();
    while dev.writes() < 2000 {
        std::thread::yield_now();
    }
    let (after, report) = dev.crash(seed);
    let total: u64 = writers.into_iter().map(|w| w.join().unwrap()).sum();
    eprintln!("{total} writes, crash: {report:?}");
    assert!(total >= 2000);
    // Every block holds zeros or its writer's byte, except a torn one.
    for blk in 0..4096u64 {
        let got = read(&after, blk * 4096, 4096);
        let want = (blk % 4) as u8 + 1;
        if report.torn.is_some_and(|t| t.0 == blk * 4096) {
            continue;
        }
        assert!(
            got.iter().all(|&x| x == 0) || got.iter().all(|&x| x == want),
            "block {blk}"
        );
    }
}

#[test]
fn a_full_device_refuses_writes_with_enospc() {
    let dev = MemDevice::named("full", MIB, A);
    dev.fail_writes_no_space_after(1);
    dev.write_at(&block(4096, 1), 0).unwrap();
    let err = dev.write_at(&block(4096, 2), 4096).unwrap_err();
    match &err {
        IoError::Os { source, offset, .. } => {
            assert_eq!(source.raw_os_error(), Some(28), "ENOSPC");
            assert_eq!(*offset, 4096);
        }
        other => panic!("not an OS error: {other:?}"),
    }
    let msg = err.to_string();
    assert!(
        msg.contains("full") && msg.contains("No space left"),
        "{msg}"
    );
    assert_eq!(read(&dev, 4096, 4096), vec![0; 4096], "nothing written");
    assert_eq!(read(&dev, 0, 4096), vec![1; 4096], "reads go on");
}

#[test]
fn silent_corruption_on_read_leaves_the_stored_bytes() {
    let dev = MemDevice::new(MIB, A);
    dev.write_at(&block(4096, 0x40), 0).unwrap();
    dev.corrupt_reads_at(1000..1001);
    let got = read(&dev, 0, 4096);
    assert_eq!(got[1000], 0x41, "one bit flipped");
    assert_eq!(got.iter().filter(|&&b| b != 0x40).count(), 1);
    assert_eq!(read(&dev, 2048, 2048), vec![0x40; 2048], "outside: clean");
    dev.clear_faults();
    assert_eq!(read(&dev, 0, 4096), vec![0x40; 4096], "stored bytes intact");
}

#[test]
fn corruption_at_rest_is_seen_now_and_after_a_crash() {
    let dev = MemDevice::new(MIB, A);
    dev.write_at(&block(4096, 7), 0).unwrap();
    dev.flush().unwrap();
    dev.write_at(&block(4096, 9), 4096).unwrap(); // unflushed
    assert_eq!(dev.corrupt_at_rest(10, 0x80), 7 ^ 0x80);
    assert_eq!(dev.corrupt_at_rest(5000, 0x01), 9 ^ 0x01);
    assert_eq!(read(&dev, 0, 512)[10], 7 ^ 0x80);
    assert_eq!(read(&dev, 4096, 4096)[5000 - 4096], 9 ^ 0x01);
    dev.flush().unwrap();
    let (after, _) = dev.crash(1);
    let r = read(&after, 0, 8192);
    assert_eq!(r[10], 7 ^ 0x80, "the medium stays damaged");
    assert_eq!(r[5000], 9 ^ 0x01);
    assert_eq!(r.iter().filter(|&&b| b != 7 && b != 9).count(), 2);
}

#[test]
fn latency_completes_async_operations_out_of_order() {
    use nvdepot_io::uring::{self, Runtime};
    use std::cell::RefCell;
    use std::rc::Rc;
    use std::time::{Duration, Instant};
    let Ok(rt) = Runtime::new() else {
        eprintln!("io_uring unavailable: nothing to test");
        return;
    };
    let dev = Arc::new(MemDevice::new(MIB, A));
    dev.set_latency(Duration::from_millis(4), 42);
    let order: Rc<RefCell<Vec<u64>>> = Rc::default();
    let started = Instant::now();
    rt.block_on(async {
        let mut tasks = Vec::new();
        for i in 0..32u64 {
            let (dev, order) = (dev.clone(), order.clone());
            tasks.push(uring::spawn(async move {
                let (r, _) = uring::write_device(&*dev, block(4096, i as u8), 4096, i * 4096).await;
                r.unwrap();
                order.borrow_mut().push(i);
            }));
        }
        for t in tasks {
            t.await;
        }
    });
    let took = started.elapsed();
    let order = order.borrow().clone();
    let mut sorted = order.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..32).collect::<Vec<_>>(), "every write completed");
    assert_ne!(order, sorted, "completions came out of issue order");
    // The delays overlapped (32 waits of up to 4 ms each, not in series).
    assert!(took < Duration::from_millis(60), "took {took:?}");
    for i in 0..32u64 {
        assert_eq!(read(&dev, i * 4096, 4096), vec![i as u8; 4096]);
    }
    // Blocking calls wait in the call.
    let t = Instant::now();
    for _ in 0..20 {
        read(&dev, 0, 512);
    }
    assert!(t.elapsed() > Duration::from_millis(10), "{:?}", t.elapsed());
}
