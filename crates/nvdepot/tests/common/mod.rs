//! The `nvdepot memcache` binary under test: a server on a free port of
//! 127.0.0.1 with a store under `CARGO_TARGET_TMPDIR` (not /tmp, which may
//! be a tmpfs that refuses `O_DIRECT`), and a text-protocol client.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_nvdepot");

pub fn temp_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("memcache-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("create temp dir")
}

/// A running `nvdepot memcache`.
pub struct Server {
    pub child: Child,
    pub addr: SocketAddr,
    /// Everything it printed on stderr so far.
    pub stderr: Arc<Mutex<String>>,
}

impl Server {
    /// Starts the server on a store in `data` (created if missing) and
    /// waits for its "listening on" line.
    pub fn start(data: &Path) -> Server {
        Server::start_with(data, &[])
    }

    /// Like `start`, with extra command-line arguments.
    pub fn start_with(data: &Path, extra: &[&str]) -> Server {
        let args = [&["--size", "128M", "--segment-size", "8M"], extra].concat();
        Server::start_sized(data, &args)
    }

    /// Like `start`, with the store's size and segment size among `args`.
    pub fn start_sized(data: &Path, args: &[&str]) -> Server {
        let face = ["memcache", "-p", "0", "-l", "127.0.0.1", "--data"];
        Server::spawn(&face, data, args, "nvdepot memcache listening on ")
    }

    /// `nvdepot serve` (the Redis-protocol face) on a store in `data`.
    pub fn start_serve(data: &Path, args: &[&str]) -> Server {
        let face = ["serve", "--port", "0", "--bind", "127.0.0.1", "--data"];
        Server::spawn(&face, data, args, "nvdepot serve listening on ")
    }

    fn spawn(face: &[&str], data: &Path, args: &[&str], listening: &'static str) -> Server {
        let mut child = Command::new(BIN)
            .args(face)
            .arg(data)
            .args(args)
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn nvdepot");
        let stderr = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = mpsc::channel();
        let pipe = child.stderr.take().expect("piped stderr");
        let log = Arc::clone(&stderr);
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                // Logged before the address is handed over, so a caller
                // that reads the log after start-up finds this line.
                {
                    let mut log = log.lock().unwrap_or_else(|p| p.into_inner());
                    log.push_str(&line);
                    log.push('\n');
                }
                if let Some(rest) = line.strip_prefix(listening) {
                    let addr = rest.split([' ', ',']).next().unwrap_or("").to_owned();
                    let _ = tx.send(addr);
                }
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

    /// Its resident set, in bytes (VmRSS).
    pub fn rss(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
        let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        kib << 10
    }

    pub fn connect(&self) -> Client {
        let stream = TcpStream::connect(self.addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        Client { stream }
    }

    /// Sends SIGTERM and returns the exit code (within 30 s).
    pub fn terminate(mut self) -> i32 {
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

    pub fn kill_9(mut self) {
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
pub struct Client {
    pub stream: TcpStream,
}

impl Client {
    /// Sends `request` and reads until the reply ends with `end`.
    pub fn call(&mut self, request: &[u8], end: &[u8]) -> Vec<u8> {
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

    pub fn set(&mut self, key: &str, flags: u32, value: &str) {
        let request = format!("set {key} {flags} 0 {}\r\n{value}\r\n", value.len());
        let reply = self.call(request.as_bytes(), b"\r\n");
        assert_eq!(String::from_utf8_lossy(&reply), "STORED\r\n", "set {key}");
    }

    /// `Some((flags, value))` or `None` for a miss.
    pub fn get(&mut self, key: &str) -> Option<(u32, String)> {
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

/// A RESP client: sends commands as multibulk arrays, reads one value.
pub struct Resp {
    pub stream: TcpStream,
    pub buf: Vec<u8>,
}

impl Resp {
    pub fn connect(server: &Server) -> Resp {
        Resp::connect_to(server.addr)
    }

    pub fn connect_to(addr: SocketAddr) -> Resp {
        let stream = TcpStream::connect(addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        Resp {
            stream,
            buf: Vec::new(),
        }
    }

    pub fn send(&mut self, args: &[&str]) {
        let mut req = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            req.extend(format!("${}\r\n{a}\r\n", a.len()).bytes());
        }
        self.stream.write_all(&req).expect("send");
    }

    pub fn read(&mut self) -> nvdepot_resp::Value {
        loop {
            if let Some((v, n)) = nvdepot_resp::parse_value(&self.buf).expect("valid RESP") {
                self.buf.drain(..n);
                return v;
            }
            let mut chunk = [0u8; 4096];
            let n = self.stream.read(&mut chunk).expect("read");
            assert!(n > 0, "connection closed");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    pub fn call(&mut self, args: &[&str]) -> nvdepot_resp::Value {
        self.send(args);
        self.read()
    }

    /// [`Resp::call`] with binary arguments.
    pub fn call_bytes(&mut self, args: &[&[u8]]) -> nvdepot_resp::Value {
        let mut req = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            req.extend(format!("${}\r\n", a.len()).bytes());
            req.extend_from_slice(a);
            req.extend_from_slice(b"\r\n");
        }
        self.stream.write_all(&req).expect("send");
        self.read()
    }
}

/// A stock reference server (memcached, redis-server) on a free port of
/// 127.0.0.1, for the differential tests; killed when dropped.
pub struct RefServer {
    child: Child,
    pub addr: SocketAddr,
}

impl RefServer {
    /// Starts `program` with `args`, then `port_flag` and a free port;
    /// `None` if it is not installed.
    pub fn start(program: &str, args: &[&str], port_flag: &str) -> Option<RefServer> {
        let port = free_port();
        let child = Command::new(program)
            .args(args)
            .args([port_flag, &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(addr).is_err() {
            assert!(Instant::now() < deadline, "{program} did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(RefServer { child, addr })
    }

    /// The redis-server every differential test runs beside nvdepot: on
    /// 127.0.0.1, no persistence, DEBUG allowed from loopback (tests turn
    /// active expiry off with it); `None` where it is not installed (see
    /// [`RefServer::start_or_skip`]).
    pub fn redis_or_skip() -> Option<RefServer> {
        let args = [
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--enable-debug-command",
            "local",
        ];
        RefServer::start_or_skip("redis-server", &args, "--port", "redis-server")
    }

    /// [`RefServer::start`], or `None` with a note on stderr when `program` is
    /// not installed; under CI (`CI` set) a missing program fails the test
    /// instead (its Debian package is `package`).
    pub fn start_or_skip(
        program: &str,
        args: &[&str],
        port_flag: &str,
        package: &str,
    ) -> Option<RefServer> {
        let p = RefServer::start(program, args, port_flag);
        if p.is_none() {
            assert!(
                std::env::var_os("CI").is_none(),
                "{program} is not installed (apt-get install {package})"
            );
            eprintln!("{program} not installed; differential test skipped");
        }
        p
    }
}

impl Drop for RefServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// redis-server (as [`RefServer::redis_or_skip`]) and a fresh `nvdepot
/// serve` with `args` (its store in the directory returned with it), for
/// a differential test; `None` where redis-server is not installed.
pub fn serve_beside_redis(args: &[&str]) -> Option<(RefServer, tempfile::TempDir, Server)> {
    let redis = RefServer::redis_or_skip()?;
    let dir = temp_dir();
    let server = Server::start_serve(&dir.path().join("store"), args);
    Some((redis, dir, server))
}

/// A TCP port of 127.0.0.1 free right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Environment variable `name` parsed, or `default`.
pub fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A RESP value as text for comparisons and failure messages: bulk
/// strings as lossy UTF-8 (whole), simple strings `+…`, errors `-…`,
/// arrays `[…]`, pushes `>[…]`, sets `~[…]`, maps `%{k: v}`.
pub fn show_value(v: &nvdepot_resp::Value) -> String {
    use nvdepot_resp::Value;
    let list = |a: &[Value]| a.iter().map(show_value).collect::<Vec<_>>().join(", ");
    match v {
        Value::Bulk(Some(b)) => format!("{:?}", String::from_utf8_lossy(b)),
        Value::Simple(b) => format!("+{}", String::from_utf8_lossy(b)),
        Value::Error(b) => format!("-{}", String::from_utf8_lossy(b)),
        Value::Array(Some(a)) => format!("[{}]", list(a)),
        Value::Push(a) => format!(">[{}]", list(a)),
        Value::Set(a) => format!("~[{}]", list(a)),
        Value::Map(m) => format!(
            "%{{{}}}",
            m.iter()
                .map(|(k, v)| format!("{}: {}", show_value(k), show_value(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        v => format!("{v:?}"),
    }
}
