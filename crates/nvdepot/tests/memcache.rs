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

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_nvdepot");

fn temp_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("memcache-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("create temp dir")
}

/// A running `nvdepot memcache`.
struct Server {
    child: Child,
    addr: SocketAddr,
    /// Everything it printed on stderr so far.
    stderr: Arc<Mutex<String>>,
}

impl Server {
    /// Starts the server on a store in `data` (created if missing) and
    /// waits for its "listening on" line.
    fn start(data: &Path) -> Server {
        Server::start_with(data, &[])
    }

    /// Like `start`, with extra command-line arguments.
    fn start_with(data: &Path, extra: &[&str]) -> Server {
        let mut child = Command::new(BIN)
            .args(["memcache", "-p", "0", "-l", "127.0.0.1", "--data"])
            .arg(data)
            .args(["--size", "128M", "--segment-size", "8M"])
            .args(extra)
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn nvdepot memcache");
        let stderr = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = mpsc::channel();
        let pipe = child.stderr.take().expect("piped stderr");
        let log = Arc::clone(&stderr);
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                if let Some(rest) = line.strip_prefix("nvdepot memcache listening on ") {
                    let addr = rest.split([' ', ',']).next().unwrap_or("").to_owned();
                    let _ = tx.send(addr);
                }
                let mut log = log.lock().unwrap();
                log.push_str(&line);
                log.push('\n');
            }
        });
        let Ok(addr) = rx.recv_timeout(Duration::from_secs(120)) else {
            let _ = child.kill();
            let status = child.wait();
            panic!(
                "no listening line; {status:?}; stderr:\n{}",
                stderr.lock().unwrap()
            );
        };
        let addr = addr.parse().expect("listening address");
        Server {
            child,
            addr,
            stderr,
        }
    }

    fn connect(&self) -> Client {
        let stream = TcpStream::connect(self.addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        Client { stream }
    }

    /// Sends SIGTERM and returns the exit code (within 30 s).
    fn terminate(mut self) -> i32 {
        let pid = libc::pid_t::try_from(self.child.id()).expect("pid");
        // SAFETY: kill(2) with the pid of our own child and a valid signal.
        let rc = unsafe { libc::kill(pid, libc::SIGTERM) };
        assert_eq!(rc, 0, "kill -TERM");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                let log = self.stderr.lock().unwrap().clone();
                assert!(!log.contains("panicked"), "server panicked:\n{log}");
                let code = status.code();
                return code.unwrap_or_else(|| panic!("died from a signal:\n{log}"));
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("still running 30 s after SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn kill_9(mut self) {
        self.child.kill().expect("kill -9");
        self.child.wait().expect("wait");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A text-protocol client.
struct Client {
    stream: TcpStream,
}

impl Client {
    /// Sends `request` and reads until the reply ends with `end`.
    fn call(&mut self, request: &[u8], end: &[u8]) -> Vec<u8> {
        self.stream.write_all(request).expect("send");
        let mut reply = Vec::new();
        let mut chunk = [0u8; 4096];
        while !reply.ends_with(end) {
            let n = self.stream.read(&mut chunk).expect("read reply");
            assert!(n > 0, "connection closed after {reply:?}");
            reply.extend_from_slice(&chunk[..n]);
        }
        reply
    }

    fn set(&mut self, key: &str, flags: u32, value: &str) {
        let request = format!("set {key} {flags} 0 {}\r\n{value}\r\n", value.len());
        let reply = self.call(request.as_bytes(), b"\r\n");
        assert_eq!(String::from_utf8_lossy(&reply), "STORED\r\n", "set {key}");
    }

    /// `Some((flags, value))` or `None` for a miss.
    fn get(&mut self, key: &str) -> Option<(u32, String)> {
        let reply = self.call(format!("get {key}\r\n").as_bytes(), b"END\r\n");
        let text = String::from_utf8(reply).expect("utf-8 reply");
        if text == "END\r\n" {
            return None;
        }
        let (header, rest) = text.split_once("\r\n").expect("VALUE line");
        let fields: Vec<&str> = header.split(' ').collect();
        assert_eq!(fields[..2], ["VALUE", key], "reply {text:?}");
        let value = rest.strip_suffix("\r\nEND\r\n").expect("END").to_owned();
        Some((fields[2].parse().expect("flags"), value))
    }
}

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
