//! A store's creation under `kill -9` (issue 35): a supervisor's restart,
//! an OOM kill or a power cut at first boot can stop a process while it
//! zero-fills a new data file. The next start must open (or create) the
//! store as if nothing happened, never fail on a file without a
//! superblock. And a server is seen up only once its store is open.
//!
//! `NVDEPOT_CREATE_KILLS=N` runs N kills per command (default 4).

mod common;

use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{env_or, free_port, temp_dir, Resp, Server, BIN};

const SIZE: &str = "512M";

/// Starts `args` and kills it with SIGKILL after `delay`.
fn kill_after(args: &[&str], delay: Duration) {
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn nvdepot");
    std::thread::sleep(delay);
    let _ = child.kill();
    let _ = child.wait();
}

/// How long creating a store of `SIZE` takes here, to spread the kills
/// over it.
fn creation_time() -> Duration {
    let dir = temp_dir();
    let data = dir.path().join("store");
    let t = Instant::now();
    let out = Command::new(BIN)
        .args(["kv", "--data"])
        .arg(&data)
        .args(["--size", SIZE, "put", "k", "v"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    t.elapsed()
}

/// Delays from 0 to 1.2 × `span`, spread by a fixed generator.
fn delays(span: Duration, n: usize, seed: u64) -> Vec<Duration> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            span.mul_f64((x % 1200) as f64 / 1000.0)
        })
        .collect()
}

fn data_arg(data: &Path) -> &str {
    data.to_str().unwrap()
}

#[test]
fn a_kill_during_creation_leaves_a_store_that_opens() {
    let span = creation_time();
    let kills = env_or("NVDEPOT_CREATE_KILLS", 4usize);
    println!("creating a {SIZE} store takes {span:?}");
    for (n, delay) in delays(span, kills, 7).into_iter().enumerate() {
        // nvdepot kv: the put is either there or absent, never an error.
        let dir = temp_dir();
        let data = dir.path().join("store");
        let d = data_arg(&data);
        kill_after(&["kv", "--data", d, "--size", SIZE, "put", "k", "v"], delay);
        let kv = |args: &[&str]| {
            Command::new(BIN)
                .args(["kv", "--data", d, "--size", SIZE])
                .args(args)
                .output()
                .unwrap()
        };
        let put = kv(&["put", "k2", "v2"]);
        assert!(
            put.status.success(),
            "kv, kill {n} after {delay:?}: {put:?}"
        );
        let out = kv(&["get", "k"]);
        let code = out.status.code();
        assert!(
            code == Some(0) && out.stdout == b"v\n" || code == Some(1),
            "kv, kill {n} after {delay:?}: {out:?}"
        );

        // nvdepot memcache: restarts and serves.
        let dir = temp_dir();
        let data = dir.path().join("store");
        let d = data_arg(&data);
        kill_after(&["memcache", "-p", "0", "--data", d, "--size", SIZE], delay);
        let server = Server::start_sized(&data, &["--size", SIZE]);
        let mut c = server.connect();
        c.set("k", 0, "v");
        assert_eq!(c.get("k"), Some((0, "v".into())), "memcache, kill {n}");
        assert_eq!(server.terminate(), 0);

        // nvdepot serve: restarts and serves.
        let dir = temp_dir();
        let data = dir.path().join("store");
        let d = data_arg(&data);
        kill_after(
            &["serve", "--port", "0", "--data", d, "--size", SIZE],
            delay,
        );
        let server = Server::start_serve(&data, &["--size", SIZE]);
        let mut c = Resp::connect(&server);
        assert_eq!(
            c.call(&["SET", "k", "v"]),
            nvdepot_resp::Value::Simple(b"OK".to_vec()),
            "serve, kill {n}"
        );
        assert_eq!(server.terminate(), 0);
    }
}

/// Before the store is open, a client is refused; once it can connect,
/// the store exists under its real name (created whole).
#[test]
fn a_server_accepts_only_once_its_store_is_open() {
    for face in ["memcache", "serve"] {
        let dir = temp_dir();
        let data = dir.path().join("store");
        let port = free_port().to_string();
        let port_flag = if face == "memcache" { "-p" } else { "--port" };
        let mut child = Command::new(BIN)
            .args([
                face,
                port_flag,
                &port,
                "--data",
                data_arg(&data),
                "--size",
                "2G",
            ])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut refused = 0;
        loop {
            assert!(Instant::now() < deadline, "{face} never accepted");
            match TcpStream::connect(("127.0.0.1", port.parse::<u16>().unwrap())) {
                Ok(_) => break,
                Err(_) => {
                    refused += 1;
                    std::thread::sleep(Duration::from_millis(2));
                }
            }
        }
        assert!(
            data.join("nvdepot.0").exists(),
            "{face} accepted a connection before its store existed"
        );
        assert!(!data.join("nvdepot.0.creating").exists(), "{face}");
        println!("{face}: {refused} connection attempts refused before it was up");
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// A port in use fails at once (exit 2), before any store is created.
#[test]
fn a_port_in_use_fails_before_the_store_is_made() {
    let dir = temp_dir();
    let first = Server::start_sized(
        &dir.path().join("a"),
        &["--size", "64M", "--segment-size", "8M"],
    );
    let port = first.addr.port().to_string();
    for (face, flag) in [("memcache", "-p"), ("serve", "--port")] {
        let data = dir.path().join(format!("b-{face}"));
        let t = Instant::now();
        let out = Command::new(BIN)
            .args([face, flag, &port, "--data", data_arg(&data), "--size", "2G"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{face}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("Address already in use"),
            "{face}: {stderr}"
        );
        assert!(!data.join("nvdepot.0").exists(), "{face} made a store");
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "{face}: {:?}",
            t.elapsed()
        );
    }
    assert_eq!(first.terminate(), 0);
}
