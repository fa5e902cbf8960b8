//! Smoke test of `nvdepot bench memcache` and `nvdepot bench resp` end to
//! end: the real binary against a spawned `nvdepot memcache` (or `nvdepot
//! serve`) on a free port of 127.0.0.1 with a store under
//! `CARGO_TARGET_TMPDIR`. Short (a few seconds): the real
//! benchmark is `bench/memcache-vs-memcached.sh`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_nvdepot");

/// A running `nvdepot memcache`, killed on drop.
struct Server {
    child: Child,
    addr: String,
}

impl Server {
    fn start(data: &Path) -> Server {
        let face = [
            "memcache",
            "-p",
            "0",
            "-l",
            "127.0.0.1",
            "-m",
            "8",
            "--data",
        ];
        Server::spawn(&face, data, "nvdepot memcache listening on ")
    }

    /// `nvdepot serve`, the Redis-protocol face.
    fn start_serve(data: &Path) -> Server {
        let face = ["serve", "--port", "0", "--bind", "127.0.0.1", "--data"];
        Server::spawn(&face, data, "nvdepot serve listening on ")
    }

    fn spawn(face: &[&str], data: &Path, listening: &'static str) -> Server {
        let mut child = Command::new(BIN)
            .args(face)
            .arg(data)
            .args(["--size", "64M", "--segment-size", "8M"])
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn nvdepot memcache");
        let pipe = child.stderr.take().expect("piped stderr");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                if let Some(rest) = line.strip_prefix(listening) {
                    let addr = rest.split([' ', ',']).next().unwrap_or("").to_owned();
                    let _ = tx.send(addr);
                }
            }
        });
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(addr) => Server { child, addr },
            Err(_) => {
                let _ = child.kill();
                panic!("{face:?} printed no listening line");
            }
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn bench(args: &[&str]) -> Output {
    bench_in("memcache", args)
}

fn bench_in(protocol: &str, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(["bench", protocol])
        .args(args)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("run nvdepot bench")
}

/// The number after `"field": ` in the `section` object of the JSON report.
fn field(json: &str, section: &str, field: &str) -> f64 {
    let at = json.find(&format!("\"{section}\": {{")).expect("section");
    let rest = &json[at..];
    let at = rest.find(&format!("\"{field}\": ")).expect("field") + field.len() + 4;
    let end = rest[at..].find([',', '}']).expect("end of number") + at;
    rest[at..end].parse().expect("a number")
}

#[test]
fn bench_memcache_against_nvdepot_memcache() {
    let dir = tempfile::Builder::new()
        .prefix("bench-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("temp dir");
    let server = Server::start(&dir.path().join("data"));
    let json = dir.path().join("run.json");
    let out = bench(&[
        "--server",
        &server.addr,
        "--connections",
        "6",
        "--pipeline",
        "4",
        "--keys",
        "2000",
        "--value-size",
        "700",
        "--preload",
        "--requests",
        "6000",
        "--verify",
        "0.5",
        "--json",
        json.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("preload: 2000 sets"), "{stdout}");
    assert!(stdout.contains("p99.9_us"), "{stdout}");
    let json = std::fs::read_to_string(&json).unwrap();
    assert_eq!(field(&json, "preload", "sets"), 2000.0, "{json}");
    assert_eq!(field(&json, "run", "ops"), 6000.0, "{json}");
    assert_eq!(field(&json, "run", "mismatches"), 0.0, "{json}");
    assert_eq!(field(&json, "run", "errors"), 0.0, "{json}");
    // Every key was preloaded: every get hits, and about half are checked.
    assert_eq!(field(&json, "run", "hit_ratio"), 1.0, "{json}");
    let gets = field(&json, "run", "gets");
    assert!(gets > 4500.0, "{json}");
    assert!(field(&json, "run", "verified") > gets * 0.3, "{json}");
    let run = &json[json.find("\"run\":").unwrap()..];
    assert!(field(run, "get", "p99_us") > 0.0, "{json}");

    // Zipfian keys over a duration, gets only.
    let out = bench(&[
        "--server",
        &server.addr,
        "--connections",
        "2",
        "--keys",
        "2000",
        "--value-size",
        "700",
        "--ratio",
        "1:0",
        "--distribution",
        "zipf:0.9",
        "--duration",
        "1",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("hit ratio 1.0000"), "{stdout}");

    // Look-aside: gets only over 3000 keys, 1000 of them never set; each
    // miss is followed by a set, so each key misses at most once.
    let json2 = dir.path().join("miss.json");
    let out = bench(&[
        "--server",
        &server.addr,
        "--connections",
        "1",
        "--keys",
        "3000",
        "--value-size",
        "700",
        "--ratio",
        "1:0",
        "--set-on-miss",
        "--requests",
        "20000",
        "--json",
        json2.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("+ set on miss"), "{stdout}");
    let json2 = std::fs::read_to_string(&json2).unwrap();
    let misses = field(&json2, "run", "misses");
    assert!(misses > 500.0 && misses <= 1000.0, "{json2}");
    assert_eq!(field(&json2, "run", "sets"), misses, "{json2}");

    // A value that is not the key's: every checked get is a mismatch, exit 1.
    let mut raw = TcpStream::connect(server.addr.as_str()).unwrap();
    raw.write_all(b"set key:0000000000 0 0 700\r\n").unwrap();
    raw.write_all(&[b'x'; 700]).unwrap();
    raw.write_all(b"\r\n").unwrap();
    let mut reply = [0u8; 8];
    raw.read_exact(&mut reply).unwrap();
    assert_eq!(&reply, b"STORED\r\n");
    let out = bench(&[
        "--server",
        &server.addr,
        "--connections",
        "1",
        "--keys",
        "1",
        "--value-size",
        "700",
        "--ratio",
        "1:0",
        "--requests",
        "20",
        "--verify",
        "1",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("verified 20 values, 20 mismatches"),
        "{stdout}"
    );

    // Nothing listens there: exit 2 with a message.
    drop(server);
    let out = bench(&["--server", "127.0.0.1:1", "--requests", "1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("error: connecting to"));
}

#[test]
fn bench_resp_against_nvdepot_serve() {
    let dir = tempfile::Builder::new()
        .prefix("bench-resp-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("temp dir");
    let server = Server::start_serve(&dir.path().join("data"));
    let json = dir.path().join("run.json");
    let out = bench_in(
        "resp",
        &[
            "--server",
            &server.addr,
            "--connections",
            "4",
            "--pipeline",
            "4",
            "--keys",
            "1000",
            "--value-size",
            "300",
            "--preload",
            "--requests",
            "4000",
            "--verify",
            "1",
            "--json",
            json.to_str().unwrap(),
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.starts_with("resp bench: "), "{stdout}");
    let json = std::fs::read_to_string(&json).unwrap();
    assert_eq!(field(&json, "preload", "sets"), 1000.0, "{json}");
    assert_eq!(field(&json, "run", "ops"), 4000.0, "{json}");
    assert_eq!(field(&json, "run", "hit_ratio"), 1.0, "{json}");
    assert_eq!(field(&json, "run", "mismatches"), 0.0, "{json}");
    assert_eq!(field(&json, "run", "errors"), 0.0, "{json}");
    assert_eq!(
        field(&json, "run", "verified"),
        field(&json, "run", "gets"),
        "{json}"
    );
}
