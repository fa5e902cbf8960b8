//! The memcache server over real sockets on 127.0.0.1, with an in-memory
//! storage: requests and replies, pipelining, the connection limit, the
//! read-buffer bound and shutdown.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nvdepot_memcache::testing::WaitingStorage;
use nvdepot_memcache::{Limits, ServerStats};
use nvdepot_server::{
    MemcacheConfig, MemcacheServer, Shutdown, REQUEST_TOO_LARGE, TOO_MANY_CONNECTIONS,
};

/// A server running on a thread.
struct Running {
    addr: SocketAddr,
    stats: Arc<ServerStats>,
    shutdown: Shutdown,
    thread: JoinHandle<std::io::Result<()>>,
}

impl Running {
    fn start(config: MemcacheConfig) -> Running {
        let server = MemcacheServer::bind(config).expect("bind");
        let addr = server.local_addrs()[0];
        let stats = Arc::new(ServerStats::default());
        let shutdown = Shutdown::new().expect("shutdown handle");
        let thread = {
            let (stats, shutdown) = (Arc::clone(&stats), shutdown.clone());
            // Every storage call waits once, so every request makes its
            // connection's task yield and replies must stay in order.
            let storage = Arc::new(WaitingStorage::default());
            std::thread::spawn(move || server.serve(storage, stats, &shutdown))
        };
        Running {
            addr,
            stats,
            shutdown,
            thread,
        }
    }

    fn connect(&self) -> TcpStream {
        let stream = TcpStream::connect(self.addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        stream
    }

    /// Triggers shutdown and joins the server within `limit`.
    fn stop(self, limit: Duration) {
        self.shutdown.trigger();
        let deadline = Instant::now() + limit;
        while !self.thread.is_finished() {
            assert!(
                Instant::now() < deadline,
                "server did not stop in {limit:?}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        self.thread.join().expect("server thread").expect("serve");
    }
}

fn local_config() -> MemcacheConfig {
    MemcacheConfig {
        listen: vec!["127.0.0.1".to_owned()],
        port: 0,
        ..MemcacheConfig::default()
    }
}

/// Reads until the input ends with `suffix` (or EOF), returning it all.
fn read_until_suffix(stream: &mut TcpStream, suffix: &[u8]) -> Vec<u8> {
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    while !got.ends_with(suffix) {
        let n = stream.read(&mut chunk).expect("read reply");
        if n == 0 {
            break;
        }
        got.extend_from_slice(&chunk[..n]);
    }
    got
}

/// Reads until EOF (or a reset), returning what came before it.
fn read_to_close(stream: &mut TcpStream) -> Vec<u8> {
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => return got,
            Ok(n) => got.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return got,
            Err(e) => panic!("read until close: {e}"),
        }
    }
}

fn wait_for(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn set_then_get() {
    let server = Running::start(local_config());
    let mut client = server.connect();
    client
        .write_all(b"set greeting 5 0 5\r\nhello\r\n")
        .unwrap();
    assert_eq!(read_until_suffix(&mut client, b"\r\n"), b"STORED\r\n");
    client.write_all(b"get greeting\r\n").unwrap();
    assert_eq!(
        read_until_suffix(&mut client, b"END\r\n"),
        b"VALUE greeting 5 5\r\nhello\r\nEND\r\n"
    );
    client.write_all(b"get absent\r\n").unwrap();
    assert_eq!(read_until_suffix(&mut client, b"END\r\n"), b"END\r\n");
    assert!(server.stats.bytes_read.load(Ordering::Relaxed) > 0);
    assert!(server.stats.bytes_written.load(Ordering::Relaxed) > 0);
    server.stop(Duration::from_secs(10));
}

#[test]
fn large_value_grows_the_buffer() {
    let server = Running::start(local_config());
    let mut client = server.connect();
    let value = vec![b'v'; 1 << 20];
    let mut request = format!("set big 0 0 {}\r\n", value.len()).into_bytes();
    request.extend_from_slice(&value);
    request.extend_from_slice(b"\r\nget big\r\n");
    client.write_all(&request).unwrap();
    let reply = read_until_suffix(&mut client, b"END\r\n");
    let mut expected = b"STORED\r\nVALUE big 0 1048576\r\n".to_vec();
    expected.extend_from_slice(&value);
    expected.extend_from_slice(b"\r\nEND\r\n");
    assert!(reply == expected, "reply of {} bytes differs", reply.len());
    server.stop(Duration::from_secs(10));
}

#[test]
fn hundred_pipelined_requests_in_one_write() {
    let server = Running::start(local_config());
    let mut client = server.connect();
    let mut requests = Vec::new();
    let mut expected = Vec::new();
    for i in 0..50 {
        let value = format!("value-{i}");
        requests.extend(format!("set key-{i} {i} 0 {}\r\n{value}\r\n", value.len()).bytes());
        requests.extend(format!("get key-{i}\r\n").bytes());
        expected.extend(b"STORED\r\n");
        expected.extend(format!("VALUE key-{i} {i} {}\r\n{value}\r\nEND\r\n", value.len()).bytes());
    }
    client.write_all(&requests).unwrap();
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    while got.len() < expected.len() {
        let n = client.read(&mut chunk).expect("read replies");
        assert!(n > 0, "server closed after {} bytes", got.len());
        got.extend_from_slice(&chunk[..n]);
    }
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(&expected)
    );
    server.stop(Duration::from_secs(10));
}

#[test]
fn connections_beyond_the_limit_are_turned_away() {
    let server = Running::start(MemcacheConfig {
        connections_max: 2,
        ..local_config()
    });
    let first = server.connect();
    let _second = server.connect();
    let open = |n| server.stats.curr_connections.load(Ordering::SeqCst) == n;
    wait_for("two connections", || open(2));
    let mut third = server.connect();
    assert_eq!(read_to_close(&mut third), TOO_MANY_CONNECTIONS);
    assert_eq!(server.stats.rejected_connections.load(Ordering::SeqCst), 1);
    assert_eq!(server.stats.total_connections.load(Ordering::SeqCst), 2);

    drop(first);
    wait_for("one connection", || open(1));
    let mut fourth = server.connect();
    fourth.write_all(b"get nothing\r\n").unwrap();
    assert_eq!(read_until_suffix(&mut fourth, b"END\r\n"), b"END\r\n");
    assert_eq!(server.stats.total_connections.load(Ordering::SeqCst), 3);
    server.stop(Duration::from_secs(10));
}

#[test]
fn a_never_ending_line_is_cut_off() {
    let limits = Limits {
        item_bytes_max: 4096,
        ..Limits::default()
    };
    let server = Running::start(MemcacheConfig {
        limits,
        ..local_config()
    });
    let mut client = server.connect();
    let mut writer = client.try_clone().unwrap();
    let (done, written) = mpsc::channel();
    std::thread::spawn(move || {
        // "get " lines may be long in memcached; never end this one.
        let mut total = writer.write(b"get ").unwrap_or(0);
        let chunk = [b'k'; 8192];
        while total < 256 << 20 {
            match writer.write(&chunk) {
                Ok(n) => total += n,
                Err(_) => break,
            }
        }
        done.send(total).unwrap();
    });
    let reply = read_to_close(&mut client);
    let total = written
        .recv_timeout(Duration::from_secs(20))
        .expect("writer");
    assert!(
        total < 256 << 20,
        "the server read {total} bytes of one line"
    );
    // The protocol closes silently past its line limit, as memcached does;
    // the server's buffer bound is the backstop.
    let text = String::from_utf8_lossy(&reply);
    assert!(
        reply.is_empty() || reply == REQUEST_TOO_LARGE || text.contains("ERROR"),
        "reply {text:?}"
    );
    server.stop(Duration::from_secs(10));
}

#[test]
fn shutdown_closes_connections_and_joins() {
    let server = Running::start(local_config());
    let mut idle = server.connect();
    let mut busy = server.connect();
    busy.write_all(b"set k 0 0 1\r\nx\r\n").unwrap();
    assert_eq!(read_until_suffix(&mut busy, b"\r\n"), b"STORED\r\n");
    let stats = Arc::clone(&server.stats);
    wait_for("two connections", || {
        stats.curr_connections.load(Ordering::SeqCst) == 2
    });
    let addr = server.addr;
    server.stop(Duration::from_secs(10));
    assert_eq!(read_to_close(&mut idle), b"");
    assert_eq!(read_to_close(&mut busy), b"");
    assert_eq!(stats.curr_connections.load(Ordering::SeqCst), 0);
    let refused = TcpStream::connect(addr);
    assert!(refused.is_err(), "still accepting after shutdown");
}

#[test]
fn shutdown_of_an_idle_server_is_prompt() {
    let server = Running::start(local_config());
    server.stop(Duration::from_secs(2));
}

#[test]
fn an_address_in_use_is_named() {
    let server = Running::start(local_config());
    let config = MemcacheConfig {
        port: server.addr.port(),
        ..local_config()
    };
    let err = MemcacheServer::bind(config).expect_err("second bind");
    let message = err.to_string();
    assert!(
        message.contains(&server.addr.to_string()),
        "message {message:?} does not name {}",
        server.addr
    );
    server.stop(Duration::from_secs(10));
}
