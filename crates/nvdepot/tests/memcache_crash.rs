//! `nvdepot memcache` after `kill -9`, as a supervisor and an operator meet
//! it:
//!
//! - restarted at once (as systemd's `Restart=always` does) while the
//!   killed process's kernel resources are still being torn down, it
//!   starts, and serves every set that was answered `STORED` before the
//!   kill; `NVDEPOT_RESTART_CYCLES=100` runs the long campaign;
//! - a flipped bit in one acknowledged item loses exactly that item: the
//!   restarted server serves every other one, says so on stderr and in
//!   `stats`, and `nvdepot check` names the damaged key.

mod common;

use std::collections::HashSet;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{temp_dir, Server, BIN};

fn cycles() -> usize {
    std::env::var("NVDEPOT_RESTART_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
}

#[test]
fn immediate_restarts_after_kill_9_under_load_serve_every_acknowledged_set() {
    let dir = temp_dir();
    let data = dir.path().join("store");
    let acked: Arc<Mutex<HashSet<String>>> = Arc::default();
    // Every restart opens a fresh segment: enough of them that no cycle's
    // keys are evicted (the face is a cache) before the campaign ends.
    let cycles = cycles();
    let size = format!("{}M", 64 + 8 * cycles);
    let sized = [
        "--size",
        size.as_str(),
        "--segment-size",
        "1M",
        "-I",
        "200k",
    ];
    let mut server = Server::start_sized(&data, &sized);
    let mut waited_for_lock = 0;
    for cycle in 0..cycles {
        // Four connections setting fresh keys until the kill.
        let stop = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..4)
            .map(|w| {
                let mut client = server.connect();
                let (stop, acked) = (stop.clone(), acked.clone());
                std::thread::spawn(move || {
                    let mut i = 0;
                    while !stop.load(Ordering::Relaxed) {
                        let key = format!("c{cycle}-w{w}-{i}");
                        let req = format!("set {key} 0 0 {}\r\n{key}\r\n", key.len());
                        use std::io::{Read, Write};
                        if client.stream.write_all(req.as_bytes()).is_err() {
                            break;
                        }
                        let mut reply = [0u8; 8];
                        match client.stream.read_exact(&mut reply) {
                            Ok(()) if &reply == b"STORED\r\n" => {
                                acked.lock().unwrap().insert(key);
                            }
                            _ => break, // killed mid-request
                        }
                        i += 1;
                    }
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(150 + 37 * (cycle as u64 % 7)));
        server.kill_9();
        stop.store(true, Ordering::Relaxed);
        for w in writers {
            w.join().unwrap();
        }
        // At once: no pause for the old process's lock to go away.
        server = Server::start_sized(&data, &sized);
        if server
            .stderr
            .lock()
            .unwrap()
            .contains("locked by another process")
        {
            waited_for_lock += 1;
        }
        // Every set of this cycle (the ones the kill could catch in
        // flight), and every 16th of the earlier ones.
        let mut client = server.connect();
        let acked = acked.lock().unwrap();
        let this_cycle = format!("c{cycle}-");
        let mut checked = 0;
        for (n, key) in acked.iter().enumerate() {
            if key.starts_with(&this_cycle) || n % 16 == 0 {
                assert_eq!(
                    client.get(key),
                    Some((0, key.clone())),
                    "cycle {cycle}: acknowledged {key} lost"
                );
                checked += 1;
            }
        }
        assert!(checked > 0, "cycle {cycle}: no set was acknowledged");
    }
    eprintln!("{cycles} restarts, {waited_for_lock} of them waited for the killed process's lock");
    // At the end, every one.
    let mut client = server.connect();
    for key in acked.lock().unwrap().iter() {
        assert_eq!(client.get(key), Some((0, key.clone())), "{key} lost");
    }
    let mut client = server.connect();
    let stats = String::from_utf8(client.call(b"stats\r\n", b"END\r\n")).unwrap();
    assert!(stats.contains("STAT evictions 0\r\n"), "{stats}");
    assert_eq!(server.terminate(), 0);
}

#[test]
fn a_flipped_bit_after_kill_9_loses_exactly_that_item_and_says_so() {
    const COUNT: usize = 4000;
    let dir = temp_dir();
    let data = dir.path().join("store");
    let server = Server::start(&data);
    let mut client = server.connect();
    let value = |i: usize| format!("v{i:05}-").repeat(20);
    for i in 0..COUNT {
        client.set(&format!("key-{i}"), 0, &value(i));
    }
    server.kill_9();

    // One bit of key-2000's value, in the newest part of the log.
    let file = data.join("nvdepot.0");
    let mut image = std::fs::read(&file).unwrap();
    let needle = value(2000);
    let at = image
        .windows(needle.len())
        .position(|w| w == needle.as_bytes())
        .expect("the item is in the data file");
    image[at + 30] ^= 0x04;
    std::fs::write(&file, &image).unwrap();

    let check = Command::new(BIN)
        .args(["check", "--data"])
        .arg(&data)
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&check.stdout);
    assert_eq!(check.status.code(), Some(1), "{report}");
    assert!(
        report.contains("DAMAGE") && report.contains("\"key-2000\""),
        "{report}"
    );

    let server = Server::start(&data);
    let mut client = server.connect();
    let mut missing = Vec::new();
    for i in 0..COUNT {
        match client.get(&format!("key-{i}")) {
            Some((_, v)) => assert_eq!(v, value(i)),
            None => missing.push(i),
        }
    }
    assert_eq!(missing, vec![2000]);
    let stats = String::from_utf8(client.call(b"stats\r\n", b"END\r\n")).unwrap();
    assert!(
        stats.contains("STAT nvdepot_recovery_damaged_stretches 1\r\n"),
        "{stats}"
    );
    let log = server.stderr.lock().unwrap().clone();
    assert!(log.contains("DAMAGE") && log.contains("key-2000"), "{log}");
    assert_eq!(server.terminate(), 0);
}

/// `--ack buffered`: sets are acknowledged from the write buffer and
/// written within about a millisecond, so a `kill -9` well after the last
/// set loses nothing, a restart serves every acknowledged value, and reads
/// before the write see the buffered copy.
#[test]
fn buffered_acks_are_written_within_moments_and_survive_kill_9() {
    let dir = temp_dir();
    let data = dir.path().join("store");
    let args = ["--size", "64M", "--segment-size", "8M", "--ack", "buffered"];
    let server = Server::start_sized(&data, &args);
    let log = server.stderr.lock().unwrap().clone();
    assert!(log.contains("writes acknowledged buffered"), "{log}");
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let mut client = server.connect();
            std::thread::spawn(move || {
                for i in 0..300 {
                    let key = format!("w{w}-{i}");
                    client.set(&key, w, &key);
                    // Read back at once: from the buffered copy or the disk.
                    assert_eq!(client.get(&key), Some((w, key.clone())));
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    std::thread::sleep(Duration::from_millis(200));
    server.kill_9();
    let server = Server::start_sized(&data, &args);
    let mut client = server.connect();
    for w in 0..4 {
        for i in 0..300 {
            let key = format!("w{w}-{i}");
            assert_eq!(client.get(&key), Some((w, key.clone())), "{key} lost");
        }
    }
    assert_eq!(server.terminate(), 0);
}
