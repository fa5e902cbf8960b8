//! A Prometheus endpoint: `GET /metrics` over plain HTTP/1.1 on its own
//! port, answered by one small thread (scrapes are rare; nothing on the
//! data path waits for it).

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::Duration;

use nvdepot_memcache::ServerStats;

use crate::Shutdown;

/// Renders the memcache server's counters and the storage's stats in the
/// Prometheus text format. Server counters are `memcache_<memcached name>`;
/// storage stats are `nvdepot_<name>` (non-numeric ones are skipped).
pub fn render_memcache_metrics(stats: &ServerStats, storage: &[(String, String)]) -> String {
    let counters: [(&str, &std::sync::atomic::AtomicU64, &str); 23] = [
        ("curr_connections", &stats.curr_connections, "gauge"),
        ("total_connections", &stats.total_connections, "counter"),
        (
            "rejected_connections",
            &stats.rejected_connections,
            "counter",
        ),
        ("cmd_get", &stats.cmd_get, "counter"),
        ("cmd_set", &stats.cmd_set, "counter"),
        ("cmd_flush", &stats.cmd_flush, "counter"),
        ("cmd_touch", &stats.cmd_touch, "counter"),
        ("get_hits", &stats.get_hits, "counter"),
        ("get_misses", &stats.get_misses, "counter"),
        ("get_expired", &stats.get_expired, "counter"),
        ("delete_hits", &stats.delete_hits, "counter"),
        ("delete_misses", &stats.delete_misses, "counter"),
        ("incr_hits", &stats.incr_hits, "counter"),
        ("incr_misses", &stats.incr_misses, "counter"),
        ("decr_hits", &stats.decr_hits, "counter"),
        ("decr_misses", &stats.decr_misses, "counter"),
        ("cas_hits", &stats.cas_hits, "counter"),
        ("cas_misses", &stats.cas_misses, "counter"),
        ("cas_badval", &stats.cas_badval, "counter"),
        ("touch_hits", &stats.touch_hits, "counter"),
        ("touch_misses", &stats.touch_misses, "counter"),
        ("bytes_read", &stats.bytes_read, "counter"),
        ("bytes_written", &stats.bytes_written, "counter"),
    ];
    let mut out = String::with_capacity(4096);
    for (name, value, kind) in counters {
        out.push_str(&format!(
            "# TYPE memcache_{name} {kind}\nmemcache_{name} {}\n",
            value.load(Ordering::Relaxed)
        ));
    }
    for (name, value) in storage {
        if value.parse::<f64>().is_err() {
            continue;
        }
        let name = name.strip_prefix("nvdepot_").unwrap_or(name);
        let clean: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        out.push_str(&format!(
            "# TYPE nvdepot_{clean} gauge\nnvdepot_{clean} {value}\n"
        ));
    }
    out
}

/// Serves `GET /metrics` on `addr` until `shutdown` triggers. Returns the
/// bound address (port 0 picks one) and the thread.
pub fn spawn_metrics(
    addr: &str,
    render: impl Fn() -> String + Send + 'static,
    shutdown: Shutdown,
) -> io::Result<(SocketAddr, JoinHandle<()>)> {
    let listener = TcpListener::bind(addr).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("cannot listen for metrics on {addr}: {e}"),
        )
    })?;
    listener.set_nonblocking(true)?;
    let local = listener.local_addr()?;
    let handle = std::thread::Builder::new()
        .name("metrics".into())
        .spawn(move || {
            while !shutdown.is_triggered() {
                match listener.accept() {
                    Ok((stream, _)) => {
                        if let Err(e) = answer(stream, &render) {
                            tracing::debug!("metrics request failed: {e}");
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    Err(e) => {
                        tracing::warn!("metrics accept failed: {e}");
                        std::thread::sleep(Duration::from_millis(200));
                    }
                }
            }
        })?;
    Ok((local, handle))
}

fn answer(mut stream: TcpStream, render: &impl Fn() -> String) -> io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    let mut req = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    // Read the request head (bounded: 8 KiB).
    while !req.windows(4).any(|w| w == b"\r\n\r\n") && req.len() < 8192 {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            break;
        }
        req.extend_from_slice(&buf[..n]);
    }
    let (status, body) = if req.starts_with(b"GET /metrics ") || req.starts_with(b"GET /metrics?") {
        ("200 OK", render())
    } else {
        (
            "404 Not Found",
            "only GET /metrics is served here\n".to_string(),
        )
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(addr: SocketAddr, path: &str) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }

    #[test]
    fn serves_metrics_and_stops() {
        let stats = std::sync::Arc::new(ServerStats::default());
        stats.get_hits.store(7, Ordering::Relaxed);
        let shutdown = Shutdown::new().unwrap();
        let s2 = stats.clone();
        let render = move || {
            render_memcache_metrics(
                &s2,
                &[
                    ("curr_items".into(), "3".into()),
                    ("nvdepot_write_amplification".into(), "1.250".into()),
                    ("version".into(), "1.6-nvdepot".into()),
                ],
            )
        };
        let (addr, handle) = spawn_metrics("127.0.0.1:0", render, shutdown.clone()).unwrap();
        let body = get(addr, "/metrics");
        assert!(body.starts_with("HTTP/1.1 200 OK"), "{body}");
        assert!(body.contains("\nmemcache_get_hits 7\n"), "{body}");
        assert!(body.contains("\nnvdepot_curr_items 3\n"), "{body}");
        assert!(
            body.contains("\nnvdepot_write_amplification 1.250\n"),
            "{body}"
        );
        assert!(!body.contains("nvdepot_version"), "{body}");
        assert!(get(addr, "/other").starts_with("HTTP/1.1 404"));
        shutdown.trigger();
        handle.join().unwrap();
    }
}
