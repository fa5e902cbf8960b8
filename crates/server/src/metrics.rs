//! A Prometheus endpoint: `GET /metrics` over plain HTTP/1.1 on its own
//! port, answered by one small thread (scrapes are rare; nothing on the
//! data path waits for it).

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::Shutdown;

/// Appends one sample in the Prometheus text format, with its `# TYPE`
/// line: `kind` is `counter` or `gauge`. Characters a metric name may not
/// hold become `_`.
pub fn prometheus_line(out: &mut String, name: &str, kind: &str, value: &dyn std::fmt::Display) {
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
    out.push_str(&format!("# TYPE {clean} {kind}\n{clean} {value}\n"));
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
        let shutdown = Shutdown::new().unwrap();
        let render = || {
            let mut out = String::new();
            prometheus_line(&mut out, "kit_hits", "counter", &7);
            prometheus_line(&mut out, "kit.ratio", "gauge", &"1.250");
            out
        };
        let (addr, handle) = spawn_metrics("127.0.0.1:0", render, shutdown.clone()).unwrap();
        let body = get(addr, "/metrics");
        assert!(body.starts_with("HTTP/1.1 200 OK"), "{body}");
        assert!(
            body.contains("# TYPE kit_hits counter\nkit_hits 7\n"),
            "{body}"
        );
        assert!(body.contains("\nkit_ratio 1.250\n"), "{body}");
        assert!(get(addr, "/other").starts_with("HTTP/1.1 404"));
        shutdown.trigger();
        handle.join().unwrap();
    }
}
