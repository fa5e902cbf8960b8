//! A blocking RESP2 connection to another server (a cluster node a
//! migration moves slots to, or MIGRATE's target), and the connections
//! MIGRATE keeps open.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nvdepot_resp::{parse_value, Value};

/// Redis's `MIGRATE_SOCKET_CACHE_ITEMS` and `MIGRATE_SOCKET_CACHE_TTL`.
const CACHE_ITEMS: usize = 64;
const CACHE_TTL: Duration = Duration::from_secs(10);

/// The connections MIGRATE keeps open to its targets (`host:port`).
#[derive(Default)]
pub struct Sockets {
    cached: Mutex<HashMap<String, Cached>>,
}

pub struct Cached {
    pub client: Client,
    /// The database SELECTed on it (`None`: not known).
    pub db: Option<i64>,
    pub used: Instant,
}

impl Sockets {
    pub fn take(&self, addr: &str) -> Option<Cached> {
        let mut cached = self.cached.lock().unwrap_or_else(|e| e.into_inner());
        cached.retain(|_, c| c.used.elapsed() < CACHE_TTL);
        cached.remove(addr)
    }

    pub fn keep(&self, addr: String, mut c: Cached) {
        c.used = Instant::now();
        let mut cached = self.cached.lock().unwrap_or_else(|e| e.into_inner());
        if cached.len() >= CACHE_ITEMS {
            let oldest = cached
                .iter()
                .min_by_key(|(_, c)| c.used)
                .map(|(a, _)| a.clone());
            oldest.map(|a| cached.remove(&a));
        }
        cached.insert(addr, c);
    }
}

/// Whether an IO error is a socket timeout's.
fn timed_out(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}

/// Appends a command as a RESP multibulk.
pub fn encode(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// A blocking RESP2 connection to another node.
pub struct Client {
    stream: TcpStream,
    buf: Vec<u8>,
    /// The last send or read failed by its timeout.
    pub timed_out: bool,
}

impl Client {
    pub fn connect(addr: &str, password: Option<&str>) -> Result<Client, String> {
        let stream = TcpStream::connect(addr).map_err(|e| format!("connecting to {addr}: {e}"))?;
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .map_err(|e| e.to_string())?;
        let mut c = Client::over(stream);
        if let Some(p) = password {
            c.expect_ok(&[b"AUTH", p.as_bytes()])?;
        }
        Ok(c)
    }

    /// A client over a connected `stream` (its timeouts as they are).
    pub fn over(stream: TcpStream) -> Client {
        let _ = stream.set_nodelay(true);
        Client {
            stream,
            buf: Vec::new(),
            timed_out: false,
        }
    }

    /// The connection, to set its timeouts.
    pub fn stream(&self) -> &TcpStream {
        &self.stream
    }

    pub fn send(&mut self, bytes: &[u8]) -> Result<(), String> {
        let sent = self.stream.write_all(bytes);
        self.timed_out = sent.as_ref().is_err_and(timed_out);
        sent.map_err(|e| format!("sending to the destination: {e}"))
    }

    pub fn read(&mut self) -> Result<Value, String> {
        loop {
            match parse_value(&self.buf) {
                Ok(Some((v, n))) => {
                    self.buf.drain(..n);
                    return Ok(v);
                }
                Ok(None) => {}
                Err(e) => return Err(format!("destination sent bad RESP: {e:?}")),
            }
            let mut chunk = [0u8; 16 << 10];
            let got = self.stream.read(&mut chunk);
            self.timed_out = got.as_ref().is_err_and(timed_out);
            let n = got.map_err(|e| format!("reading from the destination: {e}"))?;
            if n == 0 {
                return Err("the destination closed the connection".into());
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    pub fn expect_ok(&mut self, args: &[&[u8]]) -> Result<(), String> {
        let mut out = Vec::new();
        encode(&mut out, args);
        self.send(&out)?;
        match self.read()? {
            Value::Simple(s) if s == b"OK" => Ok(()),
            Value::Error(e) => Err(format!(
                "destination refused {}: {}",
                String::from_utf8_lossy(args[1]),
                String::from_utf8_lossy(&e)
            )),
            other => Err(format!("destination answered {other:?}")),
        }
    }
}
