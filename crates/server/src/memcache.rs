//! The memcache server: TCP listeners, an accept loop and one thread per
//! connection driving a [`nvdepot_memcache::Connection`].
//!
//! ```text
//!            poll(wake, listeners...)
//!  accept ──────────────┬──────────────────────────────┐
//!  thread               │ accept, over -c: "ERROR Too many open connections"
//!                       ▼
//!              conn thread 1 … N: read ─► Connection::feed ─► write_all
//!                                          │
//!                                          ▼
//!                                    Arc<S: Storage>
//! ```
//!
//! Each connection thread blocks in `read` into a buffer that starts at
//! 16 KiB and grows, for large values, up to the largest request the limits
//! allow (`item_bytes_max`, or the 4 MiB the protocol allows a multiget
//! line if that is more, + 4 KiB for the command line or binary header); a
//! request that does not fit by then is answered with
//! `SERVER_ERROR out of memory reading request` and the connection closed,
//! so one client cannot grow the server's memory without bound.
//!
//! Shutdown: [`Shutdown::trigger`] wakes the accept loop, which stops
//! accepting and shuts down the read side of every connection; a
//! connection finishes the requests it already read, writes their replies
//! and exits. After a grace period the remaining sockets are shut down
//! completely (a client that does not read its replies cannot hold the
//! server), every thread is joined and [`MemcacheServer::serve`] returns.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nvdepot_memcache::{Connection, Limits, ServerStats, Storage};
use parking_lot::Mutex;
use tracing::{debug, info, warn};

use crate::Shutdown;

/// Start size of a connection's read buffer.
const READ_BUFFER_BYTES: usize = 16 << 10;
/// Room beyond `item_bytes_max` for the command line or binary header (and
/// key) of the largest allowed request.
const REQUEST_SLACK_BYTES: usize = 4 << 10;
/// Longest multiget line (`get k1 k2 ...`) the protocol crate accepts;
/// memcached lets those grow without bound, so the buffer allows it even
/// when `item_bytes_max` is smaller.
const MULTIGET_LINE_BYTES_MAX: usize = 4 << 20;
/// Input handed to one `feed` call, at first: small, so that a burst of
/// tiny pipelined requests for large values (`get big\r\n` × 2000) cannot
/// build a huge reply in one go. Doubles while no request fits.
const FEED_WINDOW_BYTES: usize = 1 << 10;
/// Replies are written out once this many bytes are pending.
const WRITE_BATCH_BYTES: usize = 256 << 10;
/// How long connections get to finish the requests they read, at shutdown.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// What memcached answers a connection beyond `-c`.
pub const TOO_MANY_CONNECTIONS: &[u8] = b"ERROR Too many open connections\r\n";
/// What a request larger than the read buffer may grow to gets (memcached's
/// wording when it cannot buffer a request).
pub const REQUEST_TOO_LARGE: &[u8] = b"SERVER_ERROR out of memory reading request\r\n";

/// How the memcache server listens, fixed at start-up. Each field documents
/// its default (memcached's, except `listen`).
#[derive(Clone, Debug)]
pub struct MemcacheConfig {
    /// Addresses to listen on: an IP (`127.0.0.1`, `::1`, `[::1]`), a host
    /// name (`localhost`: every address it resolves to), either optionally
    /// with `:PORT` to override [`MemcacheConfig::port`]. Default:
    /// `127.0.0.1` (memcached's default is every interface).
    pub listen: Vec<String>,
    /// TCP port (`-p`); 0 lets the system choose one per address, see
    /// [`MemcacheServer::local_addrs`]. Default: 11211.
    pub port: u16,
    /// Most client connections open at once (`-c`); further ones get
    /// `ERROR Too many open connections` and are closed. Default: 1024.
    pub connections_max: usize,
    /// Worker threads (`-t`). The current model runs one thread per
    /// connection and does not use it; kept for the event-loop model.
    /// Default: 4.
    pub threads: usize,
    /// Protocol limits (`-I` sets `item_bytes_max`). Default: memcached's.
    pub limits: Limits,
}

impl Default for MemcacheConfig {
    fn default() -> Self {
        MemcacheConfig {
            listen: vec!["127.0.0.1".to_owned()],
            port: 11211,
            connections_max: 1024,
            threads: 4,
            limits: Limits::default(),
        }
    }
}

/// Binds `config`'s addresses and serves the memcache protocol on them
/// until `shutdown` is triggered; see [`MemcacheServer`] to learn the bound
/// addresses first.
pub fn serve_memcache<S: Storage + 'static>(
    config: MemcacheConfig,
    storage: Arc<S>,
    stats: Arc<ServerStats>,
    shutdown: Shutdown,
) -> io::Result<()> {
    MemcacheServer::bind(config)?.serve(storage, stats, &shutdown)
}

/// A memcache server whose sockets are bound but not yet accepting.
#[derive(Debug)]
pub struct MemcacheServer {
    config: MemcacheConfig,
    listeners: Vec<TcpListener>,
    addrs: Vec<SocketAddr>,
}

impl MemcacheServer {
    /// Binds every address of `config.listen`. Errors name the address
    /// (`cannot listen on 127.0.0.1:11211: Address already in use`).
    pub fn bind(config: MemcacheConfig) -> io::Result<MemcacheServer> {
        if config.listen.is_empty() {
            return Err(invalid("no address to listen on"));
        }
        if config.connections_max == 0 {
            return Err(invalid("connections_max must be at least 1"));
        }
        let mut listeners = Vec::new();
        let mut addrs = Vec::new();
        for entry in &config.listen {
            for addr in resolve(entry, config.port)? {
                let listener = TcpListener::bind(addr).map_err(|e| {
                    io::Error::new(e.kind(), format!("cannot listen on {addr}: {e}"))
                })?;
                addrs.push(listener.local_addr()?);
                listeners.push(listener);
            }
        }
        Ok(MemcacheServer {
            config,
            listeners,
            addrs,
        })
    }

    /// The bound addresses, with the ports the system chose for port 0.
    pub fn local_addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// Accepts and serves connections until `shutdown` is triggered, then
    /// closes every connection, joins every thread and returns. An error is
    /// an accept loop that could not go on (connections are closed first).
    pub fn serve<S: Storage + 'static>(
        self,
        storage: Arc<S>,
        stats: Arc<ServerStats>,
        shutdown: &Shutdown,
    ) -> io::Result<()> {
        for listener in &self.listeners {
            listener.set_nonblocking(true)?;
        }
        let _ = stats.started.compare_exchange(
            0,
            u64::from(storage.now()),
            Ordering::SeqCst,
            Ordering::SeqCst,
        );
        let shared = Arc::new(Shared {
            storage,
            stats,
            limits: self.config.limits,
            registry: Mutex::new(HashMap::new()),
            active: AtomicUsize::new(0),
        });
        let mut acceptor = Acceptor {
            shared: &shared,
            connections_max: self.config.connections_max,
            next_id: 0,
            workers: Vec::new(),
            last_accept_warning: None,
        };
        let result = acceptor.run(&self.listeners, shutdown);
        let workers = std::mem::take(&mut acceptor.workers);
        drop(self.listeners);
        info!("memcache: stopped accepting; closing connections");
        shared.close_all(workers);
        result
    }
}

fn invalid(message: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message.to_owned())
}

/// The socket addresses of one `listen` entry.
fn resolve(entry: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
    let entry = entry.trim();
    if let Ok(addr) = entry.parse::<SocketAddr>() {
        return Ok(vec![addr]);
    }
    let bare = entry
        .strip_prefix('[')
        .and_then(|e| e.strip_suffix(']'))
        .unwrap_or(entry);
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    let not_found = |e: Option<io::Error>| {
        let why = e.map_or_else(|| "no address".to_owned(), |e| e.to_string());
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("cannot listen on {entry:?}: {why}"),
        )
    };
    if entry.is_empty() {
        return Err(not_found(None));
    }
    let found: Vec<SocketAddr> = match entry.rsplit_once(':') {
        Some((host, p)) if !host.contains(':') => {
            let p: u16 = p.parse().map_err(|_| not_found(None))?;
            (host, p).to_socket_addrs()
        }
        _ => (entry, port).to_socket_addrs(),
    }
    .map_err(|e| not_found(Some(e)))?
    .collect();
    if found.is_empty() {
        return Err(not_found(None));
    }
    Ok(found)
}

/// What the accept loop and the connection threads share.
struct Shared<S> {
    storage: Arc<S>,
    stats: Arc<ServerStats>,
    limits: Limits,
    /// A clone of every open connection's socket, to shut it down.
    registry: Mutex<HashMap<u64, TcpStream>>,
    /// Open connections (the limit's count; `curr_connections` mirrors it).
    active: AtomicUsize,
}

impl<S: Storage + 'static> Shared<S> {
    /// Shuts down every connection (first the read side, then after the
    /// grace period both) and joins every connection thread.
    fn close_all(&self, workers: Vec<JoinHandle<()>>) {
        for stream in self.registry.lock().values() {
            let _ = stream.shutdown(std::net::Shutdown::Read);
        }
        let deadline = Instant::now() + SHUTDOWN_GRACE;
        while self.active.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        for stream in self.registry.lock().values() {
            let _ = stream.shutdown(std::net::Shutdown::Both);
        }
        for worker in workers {
            let _ = worker.join();
        }
    }
}

/// The accept loop's state.
struct Acceptor<'a, S> {
    shared: &'a Arc<Shared<S>>,
    connections_max: usize,
    next_id: u64,
    workers: Vec<JoinHandle<()>>,
    /// When the last "cannot accept" warning was logged (rate limit).
    last_accept_warning: Option<Instant>,
}

impl<S: Storage + 'static> Acceptor<'_, S> {
    /// Polls the wake socket and the listeners until shutdown.
    fn run(&mut self, listeners: &[TcpListener], shutdown: &Shutdown) -> io::Result<()> {
        let mut fds: Vec<libc::pollfd> = std::iter::once(shutdown.wake_fd().as_raw_fd())
            .chain(listeners.iter().map(|l| l.as_raw_fd()))
            .map(|fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        loop {
            if shutdown.is_triggered() {
                return Ok(());
            }
            for fd in &mut fds {
                fd.revents = 0;
            }
            // SAFETY: `fds` is a live, exclusively borrowed array of
            // `fds.len()` pollfd structs for the duration of the call, and
            // every descriptor in it stays open until this function returns.
            let ready = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) };
            if ready < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(io::Error::new(e.kind(), format!("poll: {e}")));
            }
            if fds[0].revents != 0 {
                shutdown.drain_wake();
                continue;
            }
            for (listener, fd) in listeners.iter().zip(&fds[1..]) {
                if fd.revents != 0 {
                    self.accept_ready(listener);
                }
            }
            self.workers.retain(|w| !w.is_finished());
        }
    }

    /// Accepts every pending connection of `listener`.
    fn accept_ready(&mut self, listener: &TcpListener) {
        loop {
            match listener.accept() {
                Ok((stream, peer)) => self.admit(stream, peer),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::Interrupted | io::ErrorKind::ConnectionAborted
                    ) => {}
                Err(e) => {
                    // Out of descriptors (EMFILE, ENFILE) or memory: the
                    // connection stays queued; back off instead of spinning.
                    let now = Instant::now();
                    let quiet = self
                        .last_accept_warning
                        .is_some_and(|t| now.duration_since(t) < Duration::from_secs(1));
                    if !quiet {
                        warn!("memcache: cannot accept a connection: {e}");
                        self.last_accept_warning = Some(now);
                    }
                    std::thread::sleep(Duration::from_millis(10));
                    return;
                }
            }
        }
    }

    /// Starts a thread for `stream`, or turns it away over the limit.
    fn admit(&mut self, stream: TcpStream, peer: SocketAddr) {
        let shared = self.shared;
        if shared.active.load(Ordering::SeqCst) >= self.connections_max {
            shared
                .stats
                .rejected_connections
                .fetch_add(1, Ordering::Relaxed);
            debug!(
                "memcache: rejecting {peer}: {} connections open",
                self.connections_max
            );
            // A fresh socket's send buffer takes the line; never block on it.
            let _ = stream.set_nonblocking(true);
            let _ = (&stream).write(TOO_MANY_CONNECTIONS);
            return;
        }
        let registered = stream.set_nonblocking(false).and_then(|()| {
            stream.set_nodelay(true)?;
            stream.try_clone()
        });
        let clone = match registered {
            Ok(clone) => clone,
            Err(e) => {
                warn!("memcache: dropping connection from {peer}: {e}");
                return;
            }
        };
        let id = self.next_id;
        self.next_id += 1;
        shared.active.fetch_add(1, Ordering::SeqCst);
        shared
            .stats
            .curr_connections
            .fetch_add(1, Ordering::Relaxed);
        shared
            .stats
            .total_connections
            .fetch_add(1, Ordering::Relaxed);
        shared.registry.lock().insert(id, clone);
        let guard = Registered {
            shared: Arc::clone(shared),
            id,
        };
        let spawned = std::thread::Builder::new()
            .name(format!("mc-conn-{id}"))
            .spawn(move || {
                debug!("memcache: connection {id} from {peer}");
                let mut conn = ConnectionIo::new(stream, &guard.shared);
                match conn.run() {
                    Ok(()) => debug!("memcache: connection {id} closed"),
                    Err(e) => debug!("memcache: connection {id} closed: {e}"),
                }
                drop(guard);
            });
        match spawned {
            Ok(handle) => self.workers.push(handle),
            // The closure, guard included, was dropped: counters are undone.
            Err(e) => warn!("memcache: no thread for the connection from {peer}: {e}"),
        }
    }
}

/// Undoes a connection's registration when its thread ends, even by panic.
struct Registered<S: Storage + 'static> {
    shared: Arc<Shared<S>>,
    id: u64,
}

impl<S: Storage + 'static> Drop for Registered<S> {
    fn drop(&mut self) {
        self.shared.registry.lock().remove(&self.id);
        self.shared.active.fetch_sub(1, Ordering::SeqCst);
        self.shared
            .stats
            .curr_connections
            .fetch_sub(1, Ordering::Relaxed);
    }
}

/// One connection's socket, buffers and protocol state.
struct ConnectionIo<S: Storage> {
    stream: TcpStream,
    conn: Connection<S>,
    /// Input; `buf[..filled]` is received and not yet consumed.
    buf: Vec<u8>,
    filled: usize,
    /// Largest `buf` may grow to.
    buf_bytes_max: usize,
    /// Replies not yet written.
    out: Vec<u8>,
    /// Input handed to the next `feed` (see [`FEED_WINDOW_BYTES`]).
    window: usize,
}

impl<S: Storage + 'static> ConnectionIo<S> {
    fn new(stream: TcpStream, shared: &Shared<S>) -> Self {
        let buf_bytes_max = shared
            .limits
            .item_bytes_max
            .max(MULTIGET_LINE_BYTES_MAX)
            .saturating_add(REQUEST_SLACK_BYTES);
        ConnectionIo {
            stream,
            conn: Connection::new(
                Arc::clone(&shared.storage),
                Arc::clone(&shared.stats),
                shared.limits,
            ),
            buf: vec![0; READ_BUFFER_BYTES.min(buf_bytes_max)],
            filled: 0,
            buf_bytes_max,
            out: Vec::new(),
            window: FEED_WINDOW_BYTES,
        }
    }

    /// Reads, executes and answers requests until the client closes, the
    /// protocol closes, or an IO error.
    fn run(&mut self) -> io::Result<()> {
        loop {
            if self.filled == self.buf.len() && !self.grow() {
                self.stream.write_all(REQUEST_TOO_LARGE)?;
                return Ok(());
            }
            let n = match self.stream.read(&mut self.buf[self.filled..]) {
                Ok(0) => return Ok(()),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            self.filled += n;
            let (consumed, close) = self.execute()?;
            self.buf.copy_within(consumed..self.filled, 0);
            self.filled -= consumed;
            if close {
                return Ok(());
            }
            if self.filled == 0 && self.buf.len() > 4 * READ_BUFFER_BYTES {
                // A large value went through; give the memory back.
                self.buf = vec![0; READ_BUFFER_BYTES];
                self.out = Vec::new();
            }
        }
    }

    /// Doubles the full buffer; false when it is already at its limit.
    fn grow(&mut self) -> bool {
        if self.buf.len() >= self.buf_bytes_max {
            return false;
        }
        let len = (self.buf.len() * 2).min(self.buf_bytes_max);
        self.buf.resize(len, 0);
        true
    }

    /// Feeds `buf[..filled]` to the protocol window by window, writing the
    /// replies; returns the bytes consumed and whether to close.
    fn execute(&mut self) -> io::Result<(usize, bool)> {
        let mut pos = 0;
        while pos < self.filled {
            let end = self.filled.min(pos + self.window);
            let fed = self.conn.feed(&self.buf[pos..end], &mut self.out);
            debug_assert!(fed.consumed <= end - pos, "feed consumed more than it got");
            pos += fed.consumed;
            if fed.close {
                self.flush()?;
                return Ok((pos, true));
            }
            if fed.consumed > 0 {
                self.window = FEED_WINDOW_BYTES;
            } else if end == self.filled {
                // The next request is incomplete: wait for more input, and
                // offer it whole next time.
                break;
            } else {
                self.window *= 2;
            }
            if self.out.len() >= WRITE_BATCH_BYTES {
                self.flush()?;
            }
        }
        self.flush()?;
        Ok((pos, false))
    }

    fn flush(&mut self) -> io::Result<()> {
        if !self.out.is_empty() {
            self.stream.write_all(&self.out)?;
            self.out.clear();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::resolve;

    #[test]
    fn listen_entries() {
        let one = |e: &str| resolve(e, 11211).unwrap();
        assert_eq!(one("127.0.0.1"), vec!["127.0.0.1:11211".parse().unwrap()]);
        assert_eq!(one("127.0.0.1:99"), vec!["127.0.0.1:99".parse().unwrap()]);
        assert_eq!(one("::1"), vec!["[::1]:11211".parse().unwrap()]);
        assert_eq!(one("[::1]"), vec!["[::1]:11211".parse().unwrap()]);
        assert_eq!(one("[::1]:7"), vec!["[::1]:7".parse().unwrap()]);
        assert!(!one("localhost").is_empty());
        assert!(one("localhost:5").iter().all(|a| a.port() == 5));
        assert!(resolve("", 1).is_err());
        assert!(resolve("127.0.0.1:notaport", 1).is_err());
    }
}
