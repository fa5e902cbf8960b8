//! End-to-end tests of `nvdepot memcache`: the binary on a free port of
//! 127.0.0.1 with a store under `CARGO_TARGET_TMPDIR` (not /tmp, which may
//! be a tmpfs that refuses `O_DIRECT`), talked to over TCP.
//!
//! - SIGTERM stops it with exit 0, and a restart serves what was stored
//!   (warm restart from the index checkpoint);
//! - after `kill -9`, a restart serves every set that was answered
//!   `STORED` (recovery from the log), and after segment-LRU evictions out
//!   of write order it never serves an older value of an evicted key;
//! - start-up errors (UDP, a port in use, a bad `-I`) exit 2 with a message.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::Duration;

mod common;

use common::{temp_dir, Client, Server, BIN};

#[test]
fn sigterm_exits_0_and_a_restart_serves_the_items() {
    let dir = temp_dir();
    let data = dir.path().join("store");
    let server = Server::start(&data);
    let mut client = server.connect();
    client.set("greeting", 42, "hello, flash");
    client.set("other", 0, "x");
    assert_eq!(client.get("greeting"), Some((42, "hello, flash".into())));
    assert_eq!(client.get("absent"), None);
    assert_eq!(server.terminate(), 0, "exit code after SIGTERM");

    let server = Server::start(&data);
    let mut client = server.connect();
    assert_eq!(client.get("greeting"), Some((42, "hello, flash".into())));
    assert_eq!(client.get("other"), Some((0, "x".into())));
    assert_eq!(server.terminate(), 0, "exit code after the second SIGTERM");
}

#[test]
fn acknowledged_sets_survive_kill_9() {
    const COUNT: usize = 300;
    let dir = temp_dir();
    let data = dir.path().join("store");
    let server = Server::start(&data);
    let mut client = server.connect();
    for i in 0..COUNT {
        client.set(&format!("key-{i}"), i as u32, &format!("value-{i}"));
    }
    server.kill_9();

    let server = Server::start(&data);
    let mut client = server.connect();
    for i in 0..COUNT {
        let key = format!("key-{i}");
        let want = Some((i as u32, format!("value-{i}")));
        assert_eq!(client.get(&key), want, "{key} after kill -9");
    }
    assert_eq!(server.terminate(), 0);
}

/// Segment LRU evicts the segment holding the new versions of keys while
/// reads keep the segment with their old versions; after `kill -9` the
/// restart must not serve an old version (the eviction log hides them).
#[test]
fn lru_eviction_then_kill_9_never_serves_an_older_value() {
    const KEYS: usize = 300;
    let dir = temp_dir();
    let data = dir.path().join("store");
    let server = Server::start_with(&data, &["-m", "0", "--eviction", "lru"]);
    let mut client = server.connect();
    let value = |tag: &str, i: usize| format!("{tag}-{i}-{}", "x".repeat(4000));
    // Segment A: old versions between hot keys, then filler that seals
    // it, then the new versions in a later segment.
    for i in 0..KEYS {
        client.set(&format!("old-{i}"), 1, &value("v1", i));
        client.set(&format!("hot-{i}"), 0, &value("hot", i));
    }
    let mut fill = 0;
    let mut fill_some = |client: &mut Client, n: usize| {
        for _ in 0..n {
            client.set(&format!("fill-{fill}"), 3, &value("fill", fill));
            fill += 1;
        }
    };
    fill_some(&mut client, 2_100);
    for i in 0..KEYS {
        client.set(&format!("old-{i}"), 2, &value("v2", i));
    }
    // About 1.3 times the 128 MiB store more, reading the hot keys all
    // along: the unread segment of new versions goes, segment A stays.
    for _ in 0..200 {
        fill_some(&mut client, 200);
        for h in (0..KEYS).step_by(3) {
            client.get(&format!("hot-{h}"));
        }
    }
    let stats = client.call(b"stats\r\n", b"END\r\n");
    let stats = String::from_utf8_lossy(&stats).into_owned();
    let logged: u64 = stats
        .lines()
        .find_map(|l| l.strip_prefix("STAT nvdepot_evictions_logged "))
        .and_then(|n| n.trim().parse().ok())
        .expect("nvdepot_evictions_logged in stats");
    assert!(logged > 0, "no eviction out of write order:\n{stats}");
    // Let the periodic flush (100 ms) put the log on the device: cache
    // mode may lose the last flush interval to a crash, not more.
    std::thread::sleep(Duration::from_millis(300));
    server.kill_9();

    let server = Server::start(&data);
    let mut client = server.connect();
    let mut present = 0;
    for i in 0..KEYS {
        if let Some((flags, v)) = client.get(&format!("old-{i}")) {
            assert_eq!((flags, v), (2, value("v2", i)), "old-{i} after kill -9");
            present += 1;
        }
    }
    assert!(present < KEYS, "the new versions were never evicted");
    assert_eq!(server.terminate(), 0);
}

/// Runs the binary to completion: (exit code, stderr).
fn run(args: &[&str]) -> (i32, String) {
    let out = Command::new(BIN)
        .args(args)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("spawn nvdepot");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code().expect("exit code"), stderr)
}

#[test]
fn udp_is_refused() {
    let dir = temp_dir();
    let data = dir.path().join("store");
    let data = data.to_str().unwrap();
    let (code, stderr) = run(&["memcache", "-U", "11211", "-p", "0", "--data", data]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("UDP is not supported"), "{stderr}");
}

#[test]
fn a_port_in_use_is_named() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let dir = temp_dir();
    let data = dir.path().join("store");
    let data = data.to_str().unwrap();
    let (code, stderr) = run(&["memcache", "-p", &port, "--data", data]);
    assert_eq!(code, 2, "{stderr}");
    let addr = format!("127.0.0.1:{port}");
    assert!(
        stderr.starts_with("error: ") && stderr.contains(&addr),
        "{stderr}"
    );
}

#[test]
fn item_size_is_checked() {
    let (code, stderr) = run(&["memcache", "-I", "129m"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("out of range"), "{stderr}");
}

#[test]
fn prometheus_metrics_are_served() {
    let dir = temp_dir();
    let server = Server::start_with(&dir.path().join("data"), &["--metrics", "127.0.0.1:0"]);
    let mut client = server.connect();
    client.set("m1", 0, "v");
    assert_eq!(client.get("m1"), Some((0, "v".to_string())));
    // The "metrics at" line comes before the server accepts clients.
    let log = server.stderr.lock().unwrap().clone();
    let addr = log
        .lines()
        .find_map(|l| l.strip_prefix("nvdepot memcache metrics at http://"))
        .and_then(|rest| rest.strip_suffix("/metrics"))
        .unwrap_or_else(|| panic!("no metrics line in:\n{log}"))
        .to_string();
    let mut http = std::net::TcpStream::connect(addr.as_str()).unwrap();
    http.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut body = String::new();
    http.read_to_string(&mut body).unwrap();
    assert!(body.starts_with("HTTP/1.1 200 OK"), "{body}");
    assert!(body.contains("\nmemcache_get_hits 1\n"), "{body}");
    assert!(body.contains("\nnvdepot_curr_items 1\n"), "{body}");
    assert_eq!(server.terminate(), 0);
}

/// An item longer than one record (a quarter of an 8 MiB segment) under
/// `-I 8m`: stored as a large value, served whole, appended to, and still
/// there after `kill -9`.
#[test]
fn items_past_a_quarter_segment_are_large_values() {
    let dir = temp_dir();
    let data = dir.path().join("data");
    let server = Server::start_with(&data, &["-I", "8m"]);
    let mut c = server.connect();
    let big: String = (0..5_000_000u32)
        .map(|i| char::from(b'a' + (i.wrapping_mul(2_654_435_761) >> 27) as u8 % 26))
        .collect();
    c.set("big", 7, &big);
    assert_eq!(c.get("big"), Some((7, big.clone())));
    let reply = c.call(b"append big 0 0 3\r\nxyz\r\n", b"\r\n");
    assert_eq!(reply, b"STORED\r\n");
    server.kill_9();
    let server = Server::start_with(&data, &["-I", "8m"]);
    let mut c = server.connect();
    assert_eq!(c.get("big"), Some((7, format!("{big}xyz"))));
    let reply = c.call(b"delete big\r\n", b"\r\n");
    assert_eq!(reply, b"DELETED\r\n");
    assert_eq!(c.get("big"), None);
}
