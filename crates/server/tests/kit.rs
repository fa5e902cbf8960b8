//! The server kit over real sockets on 127.0.0.1, serving a toy face:
//! requests and replies, pipelining, the connection limit, the read-buffer
//! bound and shutdown. The kit knows no protocol; this face is a line
//! echo whose every request waits once, so replies must stay in order
//! while tasks interleave.
//!
//! Requests: `<text>\r\n` answers `<text>\r\n`; `blob <n>\r\n` followed by
//! n bytes and `\r\n` answers `blob <n> <byte sum>\r\n`; `many <n>\r\n`
//! answers n bytes `x` then `\r\n`, composed 64 KiB per call with a pause
//! (`Fed::more`) between; `quit\r\n` closes.

use std::future::poll_fn;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::task::Poll;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nvdepot_server::{Connection, Face, Fed, Server, ServerConfig, Session, Shutdown};

const TOO_MANY: &[u8] = b"BUSY\r\n";
const TOO_LARGE: &[u8] = b"TOO LARGE\r\n";

/// The toy face and its connection counters.
#[derive(Default)]
struct Echo {
    request_bytes_max: usize,
    curr: AtomicU64,
    total: AtomicU64,
    rejected: AtomicU64,
}

#[derive(Default)]
struct EchoSession {
    /// Bytes of a `many` request still to compose.
    many_left: Option<usize>,
}

const MANY_STEP: usize = 64 << 10;

/// Returns `Pending` once (waking itself), as a storage read would.
async fn yield_once() {
    let mut yielded = false;
    poll_fn(|cx| {
        if yielded {
            Poll::Ready(())
        } else {
            yielded = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    })
    .await
}

impl Session for EchoSession {
    async fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> Fed {
        let mut pos = 0;
        while let Some(end) = input[pos..].windows(2).position(|w| w == b"\r\n") {
            let line = &input[pos..pos + end];
            let mut next = pos + end + 2;
            yield_once().await;
            if line == b"quit" {
                return Fed {
                    consumed: next,
                    close: true,
                    more: false,
                };
            }
            if let Some(n) = line.strip_prefix(b"many ") {
                let left = self
                    .many_left
                    .take()
                    .unwrap_or_else(|| std::str::from_utf8(n).unwrap().parse().unwrap());
                let now = left.min(MANY_STEP);
                out.resize(out.len() + now, b'x');
                if left > now {
                    // Paused inside this request: it is fed again.
                    self.many_left = Some(left - now);
                    return Fed {
                        consumed: pos,
                        close: false,
                        more: true,
                    };
                }
                out.extend_from_slice(b"\r\n");
                pos = next;
                continue;
            }
            if let Some(n) = line.strip_prefix(b"blob ") {
                let n: usize = std::str::from_utf8(n).unwrap().parse().unwrap();
                if input.len() < next + n + 2 {
                    break;
                }
                let sum: u64 = input[next..next + n].iter().map(|&b| u64::from(b)).sum();
                out.extend_from_slice(format!("blob {n} {sum}\r\n").as_bytes());
                next += n + 2;
            } else {
                out.extend_from_slice(&input[pos..next]);
            }
            pos = next;
        }
        Fed {
            consumed: pos,
            close: false,
            more: false,
        }
    }
}

impl Face for Echo {
    type Session = EchoSession;
    fn name(&self) -> &'static str {
        "echo"
    }
    fn session(&self, _conn: &Connection) -> EchoSession {
        EchoSession::default()
    }
    fn request_bytes_max(&self) -> usize {
        self.request_bytes_max
    }
    fn too_many_connections(&self) -> &'static [u8] {
        TOO_MANY
    }
    fn request_too_large(&self) -> &'static [u8] {
        TOO_LARGE
    }
    fn connection_opened(&self) {
        self.curr.fetch_add(1, Ordering::SeqCst);
        self.total.fetch_add(1, Ordering::SeqCst);
    }
    fn connection_closed(&self) {
        self.curr.fetch_sub(1, Ordering::SeqCst);
    }
    fn connection_rejected(&self) {
        self.rejected.fetch_add(1, Ordering::SeqCst);
    }
}

/// A server running on a thread.
struct Running {
    addr: SocketAddr,
    face: Arc<Echo>,
    shutdown: Shutdown,
    thread: JoinHandle<std::io::Result<()>>,
}

impl Running {
    fn start(config: ServerConfig) -> Running {
        Running::start_limited(config, 4 << 20)
    }

    fn start_limited(config: ServerConfig, request_bytes_max: usize) -> Running {
        let mut server = Server::bind(config).expect("bind");
        // Bound is not listening: connections are refused until then.
        server.listen().expect("listen");
        let addr = server.local_addrs()[0];
        let face = Arc::new(Echo {
            request_bytes_max,
            ..Echo::default()
        });
        let shutdown = Shutdown::new().expect("shutdown handle");
        let thread = {
            let (face, shutdown) = (Arc::clone(&face), shutdown.clone());
            std::thread::spawn(move || server.serve(face, &shutdown))
        };
        Running {
            addr,
            face,
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

fn local_config() -> ServerConfig {
    ServerConfig {
        listen: vec!["127.0.0.1".to_owned()],
        port: 0,
        ..ServerConfig::default()
    }
}

/// One multishot receive per connection instead of a receive per read.
fn multishot_config() -> ServerConfig {
    ServerConfig {
        multishot_recv: true,
        ..local_config()
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
fn a_request_and_its_reply() {
    a_request_and_its_reply_with(local_config());
}

#[test]
fn a_request_and_its_reply_multishot_receives() {
    a_request_and_its_reply_with(multishot_config());
}

fn a_request_and_its_reply_with(config: ServerConfig) {
    let server = Running::start(config);
    let mut client = server.connect();
    client.write_all(b"hello\r\n").unwrap();
    assert_eq!(read_until_suffix(&mut client, b"\r\n"), b"hello\r\n");
    client.write_all(b"quit\r\n").unwrap();
    assert_eq!(read_to_close(&mut client), b"");
    server.stop(Duration::from_secs(10));
}

#[test]
fn a_large_request_grows_the_buffer() {
    a_large_request_grows_the_buffer_with(local_config());
}

#[test]
fn a_large_request_grows_the_buffer_multishot_receives() {
    a_large_request_grows_the_buffer_with(multishot_config());
}

fn a_large_request_grows_the_buffer_with(config: ServerConfig) {
    let server = Running::start(config);
    let mut client = server.connect();
    let blob = vec![3u8; 1 << 20];
    let mut request = format!("blob {}\r\n", blob.len()).into_bytes();
    request.extend_from_slice(&blob);
    request.extend_from_slice(b"\r\nafter\r\n");
    client.write_all(&request).unwrap();
    let reply = read_until_suffix(&mut client, b"after\r\n");
    assert_eq!(
        reply,
        format!("blob 1048576 {}\r\nafter\r\n", 3 << 20).as_bytes()
    );
    server.stop(Duration::from_secs(10));
}

#[test]
fn hundred_pipelined_requests_in_one_write() {
    hundred_pipelined_requests_in_one_write_with(local_config());
}

#[test]
fn hundred_pipelined_requests_in_one_write_multishot_receives() {
    hundred_pipelined_requests_in_one_write_with(multishot_config());
}

fn hundred_pipelined_requests_in_one_write_with(config: ServerConfig) {
    let server = Running::start(config);
    let mut client = server.connect();
    let mut requests = Vec::new();
    let mut expected = Vec::new();
    for i in 0..100 {
        let line = format!("request-{i}\r\n");
        requests.extend(line.bytes());
        expected.extend(line.bytes());
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
fn a_paused_reply_is_sent_and_the_request_fed_again() {
    let server = Running::start(local_config());
    let mut c = server.connect();
    let n = 5 * MANY_STEP + 123;
    c.write_all(format!("one\r\nmany {n}\r\ntwo\r\n").as_bytes())
        .unwrap();
    let reply = read_until_suffix(&mut c, b"two\r\n");
    let mut want = b"one\r\n".to_vec();
    want.resize(want.len() + n, b'x');
    want.extend_from_slice(b"\r\ntwo\r\n");
    assert_eq!(reply.len(), want.len());
    assert!(reply == want, "the paused reply is whole and in order");
    server.stop(Duration::from_secs(10));
}

#[test]
fn connections_beyond_the_limit_are_turned_away() {
    let server = Running::start(ServerConfig {
        connections_max: 2,
        ..local_config()
    });
    let first = server.connect();
    let _second = server.connect();
    let open = |n| server.face.curr.load(Ordering::SeqCst) == n;
    wait_for("two connections", || open(2));
    let mut third = server.connect();
    assert_eq!(read_to_close(&mut third), TOO_MANY);
    assert_eq!(server.face.rejected.load(Ordering::SeqCst), 1);
    assert_eq!(server.face.total.load(Ordering::SeqCst), 2);

    drop(first);
    wait_for("one connection", || open(1));
    let mut fourth = server.connect();
    fourth.write_all(b"still here\r\n").unwrap();
    assert_eq!(read_until_suffix(&mut fourth, b"\r\n"), b"still here\r\n");
    assert_eq!(server.face.total.load(Ordering::SeqCst), 3);
    server.stop(Duration::from_secs(10));
}

#[test]
fn a_never_ending_line_is_cut_off() {
    a_never_ending_line_is_cut_off_with(local_config());
}

#[test]
fn a_never_ending_line_is_cut_off_multishot_receives() {
    a_never_ending_line_is_cut_off_with(multishot_config());
}

fn a_never_ending_line_is_cut_off_with(config: ServerConfig) {
    let server = Running::start_limited(config, 64 << 10);
    let mut client = server.connect();
    let mut writer = client.try_clone().unwrap();
    let (done, written) = mpsc::channel();
    std::thread::spawn(move || {
        let mut total = 0;
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
    assert_eq!(reply, TOO_LARGE);
    server.stop(Duration::from_secs(10));
}

#[test]
fn shutdown_closes_connections_and_joins() {
    let server = Running::start(local_config());
    let mut idle = server.connect();
    let mut busy = server.connect();
    busy.write_all(b"x\r\n").unwrap();
    assert_eq!(read_until_suffix(&mut busy, b"\r\n"), b"x\r\n");
    let face = Arc::clone(&server.face);
    wait_for("two connections", || face.curr.load(Ordering::SeqCst) == 2);
    let addr = server.addr;
    server.stop(Duration::from_secs(10));
    assert_eq!(read_to_close(&mut idle), b"");
    assert_eq!(read_to_close(&mut busy), b"");
    assert_eq!(face.curr.load(Ordering::SeqCst), 0);
    let refused = TcpStream::connect(addr);
    assert!(refused.is_err(), "still accepting after shutdown");
}

#[test]
fn shutdown_of_an_idle_server_is_prompt() {
    let server = Running::start(local_config());
    server.stop(Duration::from_secs(2));
}

#[test]
fn a_bound_server_refuses_connections_until_it_listens() {
    let mut server = Server::bind(local_config()).expect("bind");
    let addr = server.local_addrs()[0];
    let err = TcpStream::connect(addr).expect_err("connected before listen");
    assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused, "{err}");
    server.listen().expect("listen");
    TcpStream::connect(addr).expect("connect once listening");
}

#[test]
fn an_address_in_use_is_named() {
    let server = Running::start(local_config());
    let config = ServerConfig {
        port: server.addr.port(),
        ..local_config()
    };
    let err = Server::bind(config).expect_err("second bind");
    let message = err.to_string();
    assert!(
        message.contains(&server.addr.to_string()),
        "message {message:?} does not name {}",
        server.addr
    );
    server.stop(Duration::from_secs(10));
}
