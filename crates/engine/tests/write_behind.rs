//! Write-behind (`Options::write_behind`): puts are acknowledged from the
//! write buffer. Reads see them at once (from their buffered copy until the
//! log writer has written them), deletes and updates still wait for their
//! write, a clean close keeps everything, and a crash loses at most the
//! puts not yet written, never leaving a damaged or stale-over-newer key.

use std::sync::Arc;
use std::time::{Duration, Instant};

use nvdepot_engine::{Options, Store};
use nvdepot_io::{Device, MemDevice};

const MIB: u64 = 1 << 20;

fn opts(cache_mode: bool) -> Options {
    Options {
        segment_bytes: MIB,
        sync: false,
        cache_mode,
        write_behind: true,
        ..Options::default()
    }
}

fn open(dev: &Arc<MemDevice>, o: &Options, create: bool) -> Store {
    let o = if create {
        o.clone().create_bytes(0)
    } else {
        o.clone()
    };
    Store::open_devices(vec![dev.clone() as Arc<dyn Device>], &o).expect("open")
}

fn value(key: u32, round: u32) -> Vec<u8> {
    format!("value-{key}-{round}-")
        .repeat(1 + (key % 40) as usize)
        .into_bytes()
}

/// Waits until the log writer has written every buffered put.
fn written(dev: &MemDevice, before: u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while dev.writes() == before {
        assert!(Instant::now() < deadline, "the log writer never wrote");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn reads_see_buffered_puts_and_the_log_writer_writes_them() {
    let dev = Arc::new(MemDevice::named("wb", 32 * MIB, 512));
    let s = open(&dev, &opts(false), true);
    let ns = s.default_namespace();
    let before = dev.writes();
    for k in 0..200u32 {
        s.put(ns, &k.to_le_bytes(), &value(k, 0)).unwrap();
        // Read back at once: served from the buffered copy or the device.
        assert_eq!(s.get(ns, &k.to_le_bytes()).unwrap(), Some(value(k, 0)));
    }
    // Overwrites read back their newest value, never the older one.
    for k in 0..200u32 {
        s.put(ns, &k.to_le_bytes(), &value(k, 1)).unwrap();
        assert_eq!(s.get(ns, &k.to_le_bytes()).unwrap(), Some(value(k, 1)));
    }
    written(&dev, before);
    // A delete waits for its write (and so writes every put before it).
    assert!(s.delete(ns, &7u32.to_le_bytes()).unwrap());
    assert_eq!(s.get(ns, &7u32.to_le_bytes()).unwrap(), None);
    // An update reads the current value wherever it is.
    s.put(ns, b"ctr", b"1").unwrap();
    let v = s
        .update(ns, b"ctr", |cur| {
            let n: u32 = std::str::from_utf8(cur.unwrap().value)
                .unwrap()
                .parse()
                .unwrap();
            (
                nvdepot_engine::Change::Put((n + 1).to_string().into_bytes()),
                (),
            )
        })
        .unwrap();
    let _ = v;
    assert_eq!(s.get(ns, b"ctr").unwrap().as_deref(), Some(&b"2"[..]));
    s.close().unwrap();
    let s = open(&dev, &opts(false), false);
    for k in 0..200u32 {
        let want = (k != 7).then(|| value(k, 1));
        assert_eq!(s.get(ns, &k.to_le_bytes()).unwrap(), want, "key {k}");
    }
    assert_eq!(s.get(ns, b"ctr").unwrap().as_deref(), Some(&b"2"[..]));
}

#[test]
fn a_crash_loses_only_unwritten_puts_and_never_serves_an_older_value() {
    for seed in 0..30u64 {
        let dev = Arc::new(MemDevice::named("wb", 32 * MIB, 512));
        let s = open(&dev, &opts(false), true);
        let ns = s.default_namespace();
        let keys = 50 + (seed as u32 * 37) % 300;
        for round in 0..3u32 {
            for k in 0..keys {
                s.put(ns, &k.to_le_bytes(), &value(k, round)).unwrap();
            }
            if round == 1 {
                // Everything up to here is on the device before the crash.
                s.flush().unwrap();
            }
        }
        let (after, _) = dev.crash(seed);
        drop(s);
        let after = Arc::new(after);
        let s = open(&after, &opts(false), false);
        for k in 0..keys {
            let got = s.get(ns, &k.to_le_bytes()).unwrap();
            // Round 1 was written before the delete's write: at least it.
            assert!(
                got == Some(value(k, 1)) || got == Some(value(k, 2)),
                "seed {seed} key {k}: {:?}",
                got.map(|v| String::from_utf8_lossy(&v).into_owned())
            );
        }
    }
}

#[test]
fn cache_mode_eviction_and_gc_never_read_unwritten_data() {
    let dev = Arc::new(MemDevice::named("wb", 6 * MIB, 512));
    let s = Arc::new(open(&dev, &opts(true), true));
    let ns = s.default_namespace();
    std::thread::scope(|scope| {
        for t in 0..2u32 {
            let s = s.clone();
            scope.spawn(move || {
                let mut read_back = 0;
                for i in 0..20_000u32 {
                    let k = (i * 2 + t) % 3000;
                    s.put(ns, &k.to_le_bytes(), &value(k, i)).unwrap();
                    // A cache may evict even what was just written (this
                    // store has 5 segments, and the one just sealed may be
                    // the only one evictable); it never returns other data.
                    let got = s.get(ns, &k.to_le_bytes()).unwrap();
                    if got.is_some() {
                        assert_eq!(got, Some(value(k, i)), "read-your-write of {k}");
                        read_back += 1;
                    }
                    let other = (k * 7 + 1) % 3000;
                    if let Some(v) = s.get(ns, &other.to_le_bytes()).unwrap() {
                        let text = String::from_utf8(v).unwrap();
                        assert!(text.starts_with(&format!("value-{other}-")), "{text}");
                    }
                }
                assert!(read_back > 19_000, "only {read_back} of 20 000 read back");
            });
        }
    });
    assert!(s.stats().evictions > 0, "the store never filled up");
}

/// Synced puts that wait for durability after their key's lock
/// (`unlock_before_durable`, as `nvdepot serve` runs them).
fn synced_unlocked() -> Options {
    Options {
        segment_bytes: MIB,
        sync: true,
        unlock_before_durable: true,
        ..Options::default()
    }
}

/// `unlock_before_durable`: writers of one key share group commits, and
/// every put is durable when it returns (a crash right after keeps it).
#[test]
fn unlocked_puts_are_durable_when_they_return() {
    for seed in 0..10u64 {
        let dev = Arc::new(MemDevice::named("ub", 32 * MIB, 512));
        let o = synced_unlocked();
        let s = Arc::new(open(&dev, &o, true));
        let ns = s.default_namespace();
        std::thread::scope(|scope| {
            for t in 0..4u32 {
                let s = s.clone();
                scope.spawn(move || {
                    for i in 0..50u32 {
                        s.put(ns, b"shared", &value(t, i)).unwrap();
                        s.put(ns, &t.to_le_bytes(), &value(t, i)).unwrap();
                        assert_eq!(s.get(ns, &t.to_le_bytes()).unwrap(), Some(value(t, i)));
                    }
                });
            }
        });
        let shared = s.get(ns, b"shared").unwrap().expect("shared");
        let (after, _) = dev.crash(seed);
        drop(s);
        let s = open(&Arc::new(after), &o, false);
        for t in 0..4u32 {
            assert_eq!(
                s.get(ns, &t.to_le_bytes()).unwrap(),
                Some(value(t, 49)),
                "seed {seed}: thread {t}'s last acknowledged put"
            );
        }
        assert_eq!(s.get(ns, b"shared").unwrap(), Some(shared), "seed {seed}");
    }
}

/// `defer_durability`: puts inside it return before they are durable and
/// name the log position to wait for; once `wait_durable_async` returns,
/// every one of them survives a crash. (A crash before the wait may lose
/// them: nothing was acknowledged yet.)
#[test]
fn deferred_puts_are_durable_once_waited_for() {
    for seed in 0..10u64 {
        let dev = Arc::new(MemDevice::named("dd", 32 * MIB, 512));
        let o = synced_unlocked();
        let s = open(&dev, &o, true);
        let ns = s.default_namespace();
        let ((), owed) = nvdepot_engine::defer_durability(|| {
            for i in 0..20u32 {
                s.put(ns, &i.to_le_bytes(), &value(i, seed as u32)).unwrap();
                // Read-your-writes inside the scope.
                assert_eq!(
                    s.get(ns, &i.to_le_bytes()).unwrap(),
                    Some(value(i, seed as u32))
                );
            }
        });
        let lsn = owed.expect("the puts deferred their durability");
        nvdepot_io::uring::run_ready(s.wait_durable_async(lsn)).unwrap();
        let (after, _) = dev.crash(seed);
        drop(s);
        let s = open(&Arc::new(after), &o, false);
        for i in 0..20u32 {
            assert_eq!(
                s.get(ns, &i.to_le_bytes()).unwrap(),
                Some(value(i, seed as u32)),
                "seed {seed}: put {i}, waited for, lost"
            );
        }
    }
    // Outside a scope nothing is deferred.
    let dev = Arc::new(MemDevice::named("dd", 32 * MIB, 512));
    let o = synced_unlocked();
    let s = open(&dev, &o, true);
    let ((), owed) = nvdepot_engine::defer_durability(|| {});
    assert_eq!(owed, None);
    s.put(s.default_namespace(), b"k", b"v").unwrap();
    let (after, _) = dev.crash(1);
    drop(s);
    let s = open(&Arc::new(after), &o, false);
    assert_eq!(
        s.get(s.default_namespace(), b"k").unwrap(),
        Some(b"v".to_vec())
    );
}
