//! Per-key atomicity of `nvdepot memcache` over the real engine, through
//! its sockets (io_uring workers, two threads): many connections
//! send the same read-modify-write command to one key, and the final value
//! counts every acknowledged operation, with every `incr` reply distinct,
//! as memcached 1.6 guarantees. Text, meta and binary commands (quiet ones
//! too), with the DRAM tier off (`-m 0`) and on.
//!
//! `NVDEPOT_ATOMIC_ROUNDS=N` repeats every scenario N times (the long run
//! in README.md); the default run does one.

use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

mod common;

const CONNS: usize = 8;
const EACH: usize = 60;

/// `nvdepot memcache` with two workers on a fresh store.
struct Running {
    addr: SocketAddr,
    server: common::Server,
    _dir: tempfile::TempDir,
}

impl Running {
    fn start(memory_mb: u64) -> Running {
        let dir = common::temp_dir();
        let memory = memory_mb.to_string();
        let server = common::Server::start_sized(
            &dir.path().join("d"),
            &[
                "--size",
                "64M",
                "--segment-size",
                "8M",
                "-t",
                "2",
                "-m",
                &memory,
            ],
        );
        Running {
            addr: server.addr,
            server,
            _dir: dir,
        }
    }

    fn connect(&self) -> TcpStream {
        let s = TcpStream::connect(self.addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        s.set_nodelay(true).unwrap();
        s
    }

    fn stop(self) {
        assert_eq!(self.server.terminate(), 0, "clean exit");
    }

    /// One request, its whole reply (text: up to `end`).
    fn text(&self, req: &[u8], end: &[u8]) -> Vec<u8> {
        let mut s = self.connect();
        s.write_all(req).unwrap();
        read_until(&mut s, end)
    }

    /// Runs `op` on `CONNS` connections, `EACH` times each, concurrently;
    /// returns every reply.
    fn hammer(&self, op: fn(&mut TcpStream, usize) -> Vec<u8>) -> Vec<Vec<u8>> {
        let clients: Vec<_> = (0..CONNS)
            .map(|c| {
                let mut s = self.connect();
                std::thread::spawn(move || (0..EACH).map(|_| op(&mut s, c)).collect::<Vec<_>>())
            })
            .collect();
        clients
            .into_iter()
            .flat_map(|c| c.join().expect("client"))
            .collect()
    }
}

fn read_until(s: &mut TcpStream, end: &[u8]) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.ends_with(end) {
        let n = s.read(&mut buf).expect("read");
        assert!(
            n > 0,
            "connection closed after {:?}",
            String::from_utf8_lossy(&got)
        );
        got.extend_from_slice(&buf[..n]);
    }
    got
}

fn line(s: &mut TcpStream, req: &[u8]) -> Vec<u8> {
    s.write_all(req).unwrap();
    read_until(s, b"\r\n")
}

/// The value of `key` (text `get`).
fn value(r: &Running, key: &str) -> Vec<u8> {
    let got = r.text(format!("get {key}\r\n").as_bytes(), b"END\r\n");
    let text = got.splitn(2, |&b| b == b'\n').nth(1).unwrap_or_default();
    text[..text.len().saturating_sub(7)].to_vec()
}

fn number(v: &[u8]) -> u64 {
    String::from_utf8_lossy(v).trim().parse().expect("a number")
}

fn all_distinct(replies: &[Vec<u8>]) {
    let set: HashSet<&Vec<u8>> = replies.iter().collect();
    assert_eq!(
        set.len(),
        replies.len(),
        "a counter value was handed out twice"
    );
}

const N: u64 = (CONNS * EACH) as u64;

// ---- binary protocol ----

const OP_INCR: u8 = 0x05;
const OP_DECR: u8 = 0x06;
const OP_NOOP: u8 = 0x0a;
const OP_APPEND: u8 = 0x0e;
const OP_PREPEND: u8 = 0x0f;
const OP_INCRQ: u8 = 0x15;
const OP_APPENDQ: u8 = 0x19;

fn bin_request(op: u8, key: &[u8], extras: &[u8], value: &[u8]) -> Vec<u8> {
    let body = extras.len() + key.len() + value.len();
    let mut f = vec![0x80, op];
    f.extend_from_slice(&(key.len() as u16).to_be_bytes());
    f.push(extras.len() as u8);
    f.extend_from_slice(&[0, 0, 0]);
    f.extend_from_slice(&(body as u32).to_be_bytes());
    f.extend_from_slice(&[0; 12]);
    f.extend_from_slice(extras);
    f.extend_from_slice(key);
    f.extend_from_slice(value);
    f
}

/// Reads one binary response: (status, body).
fn bin_response(s: &mut TcpStream) -> (u16, Vec<u8>) {
    let mut h = [0u8; 24];
    s.read_exact(&mut h).unwrap();
    assert_eq!(h[0], 0x81, "response magic");
    let body = u32::from_be_bytes([h[8], h[9], h[10], h[11]]) as usize;
    let mut b = vec![0u8; body];
    s.read_exact(&mut b).unwrap();
    (u16::from_be_bytes([h[6], h[7]]), b)
}

/// Incr/decr extras: delta, initial, expiration all ones (no create).
fn arith_extras(delta: u64) -> Vec<u8> {
    let mut e = delta.to_be_bytes().to_vec();
    e.extend_from_slice(&0u64.to_be_bytes());
    e.extend_from_slice(&u32::MAX.to_be_bytes());
    e
}

fn bin_arith(s: &mut TcpStream, op: u8) -> Vec<u8> {
    s.write_all(&bin_request(op, b"ctr", &arith_extras(1), b""))
        .unwrap();
    let (status, body) = bin_response(s);
    assert_eq!(status, 0, "{body:?}");
    body
}

/// A quiet command, then a Noop: the Noop's reply is the only one.
fn bin_quiet(s: &mut TcpStream, frame: Vec<u8>) -> Vec<u8> {
    let mut both = frame;
    both.extend_from_slice(&bin_request(OP_NOOP, b"", b"", b""));
    s.write_all(&both).unwrap();
    let (status, body) = bin_response(s);
    assert_eq!(status, 0, "{}", String::from_utf8_lossy(&body));
    body
}

fn rounds() -> usize {
    std::env::var("NVDEPOT_ATOMIC_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
}

fn scenarios(memory_mb: u64) {
    for _ in 0..rounds() {
        let r = Running::start(memory_mb);
        // text incr / decr: exact, and every reply distinct.
        r.text(b"set ctr 0 0 1\r\n0\r\n", b"\r\n");
        let replies = r.hammer(|s, _| line(s, b"incr ctr 1\r\n"));
        all_distinct(&replies);
        assert_eq!(number(&value(&r, "ctr")), N, "text incr");
        let replies = r.hammer(|s, _| line(s, b"decr ctr 1\r\n"));
        all_distinct(&replies);
        assert_eq!(number(&value(&r, "ctr")), 0, "text decr");

        // meta ma (incr and decr modes, value returned).
        let replies = r.hammer(|s, _| {
            // "VA <len>\r\n<value>\r\n": read to the second line end.
            s.write_all(b"ma ctr v\r\n").unwrap();
            let mut got = read_until(s, b"\r\n");
            while got.iter().filter(|&&b| b == b'\n').count() < 2 {
                got.extend(read_until(s, b"\r\n"));
            }
            got
        });
        all_distinct(&replies);
        assert_eq!(number(&value(&r, "ctr")), N, "ma");
        r.hammer(|s, _| line(s, b"ma ctr MD\r\n"));
        assert_eq!(number(&value(&r, "ctr")), 0, "ma MD");

        // binary incr / decr / quiet incr.
        let replies = r.hammer(|s, _| bin_arith(s, OP_INCR));
        all_distinct(&replies);
        assert_eq!(number(&value(&r, "ctr")), N, "binary incr");
        r.hammer(|s, _| bin_arith(s, OP_DECR));
        assert_eq!(number(&value(&r, "ctr")), 0, "binary decr");
        r.hammer(|s, _| bin_quiet(s, bin_request(OP_INCRQ, b"ctr", &arith_extras(2), b"")));
        assert_eq!(number(&value(&r, "ctr")), 2 * N, "binary incrq");

        // touch, gat and mg T rewrite the item: they must not undo incrs.
        r.hammer(|s, c| match c % 4 {
            0 => line(s, b"touch ctr 1000\r\n"),
            1 => {
                s.write_all(b"gat 1000 ctr\r\n").unwrap();
                read_until(s, b"END\r\n")
            }
            2 => line(s, b"mg ctr T1000\r\n"),
            _ => line(s, b"incr ctr 1\r\n"),
        });
        assert_eq!(
            number(&value(&r, "ctr")),
            2 * N + N / 4,
            "incr among touches"
        );

        // append / prepend, text, meta (ms MA / MP) and binary (and quiet).
        r.text(b"set s 0 0 1\r\n|\r\n", b"\r\n");
        r.hammer(|s, c| match c % 4 {
            0 => line(s, b"append s 0 0 1\r\na\r\n"),
            1 => line(s, b"prepend s 0 0 1\r\np\r\n"),
            2 => line(s, b"ms s 1 MA\r\na\r\n"),
            _ => line(s, b"ms s 1 MP\r\np\r\n"),
        });
        r.hammer(|s, c| match c % 3 {
            0 => {
                s.write_all(&bin_request(OP_APPEND, b"s", b"", b"a"))
                    .unwrap();
                bin_response(s).1
            }
            1 => {
                s.write_all(&bin_request(OP_PREPEND, b"s", b"", b"p"))
                    .unwrap();
                bin_response(s).1
            }
            _ => bin_quiet(s, bin_request(OP_APPENDQ, b"s", b"", b"a")),
        });
        let v = value(&r, "s");
        assert_eq!(v.len() as u64, 1 + 2 * N, "appends and prepends");
        let bar = v.iter().position(|&b| b == b'|').expect("the seed byte");
        assert!(v[..bar].iter().all(|&b| b == b'p') && v[bar + 1..].iter().all(|&b| b == b'a'));

        // add / delete on one key: every STORED add is matched by one
        // DELETED, give or take the key's final presence.
        let replies = r.hammer(|s, c| {
            if c % 2 == 0 {
                line(s, b"add k 0 0 1\r\nx\r\n")
            } else {
                line(s, b"delete k\r\n")
            }
        });
        let added = replies.iter().filter(|r| *r == b"STORED\r\n").count() as i64;
        let deleted = replies.iter().filter(|r| *r == b"DELETED\r\n").count() as i64;
        let present = i64::from(!value(&r, "k").is_empty());
        assert_eq!(added - deleted, present, "add {added}, delete {deleted}");
        r.stop();
    }
}

#[test]
fn concurrent_rmw_on_one_key_without_dram_tier() {
    scenarios(0);
}

#[test]
fn concurrent_rmw_on_one_key_with_dram_tier() {
    scenarios(64);
}
