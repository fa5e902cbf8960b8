//! The server: TCP listeners, an accept thread, and worker threads (`-t`,
//! default one per core), each running its own io_uring runtime with one
//! task per connection. Generic over the [`Face`] it serves.
//!
//! ```text
//!            poll(wake, listeners...)
//!  accept ──────────────┬──────────────────────────────┐
//!  thread               │ accept; over -c: the face's rejection reply
//!                       │ else hand to the least loaded worker's inbox
//!          ┌────────────┴─────────────┐
//!          ▼                          ▼
//!   worker-0 (ring 0)          worker-1 (ring 1)          one per core
//!   task per connection:       ...
//!   recv ─► Session::feed ─► send     (all through the worker's ring)
//!                 │
//!                 ▼ await
//!        the face's storage: a DRAM hit answers at once; a miss or a
//!        write awaits device IO on the same ring, other connections run
//! ```
//!
//! Why one acceptor handing connections out rather than every worker
//! accepting on the shared socket: the acceptor gives each connection to
//! the worker with the fewest open ones, so load stays even however the
//! kernel would have woken competing accepts, the `-c` limit and the
//! rejection reply stay in one place, and the cost is one cross-thread
//! wake per connection, never per request (memcached's own design).
//!
//! Each connection task receives into a buffer that starts at 16 KiB and
//! grows up to the face's [`Face::request_bytes_max`]; a request that does
//! not fit by then is answered [`Face::request_too_large`] and the
//! connection closed, so one client cannot grow the server's memory
//! without bound. Requests are fed to the session in windows (1 KiB at
//! first), replies sent in request order once 256 KiB are pending or the
//! input is used up.
//!
//! Shutdown: [`Shutdown::trigger`] wakes the accept loop, which stops
//! accepting and shuts down the read side of every connection; a
//! connection finishes the requests it already read, sends their replies
//! and ends. After a grace period the remaining sockets are shut down
//! completely (a client that does not read its replies cannot hold the
//! server), the workers are told to finish, every thread is joined and
//! [`Server::serve`] returns.

use std::cmp::Reverse;
use std::collections::HashMap;
use std::io::{self, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tracing::{debug, info, warn};

use crate::worker::{self, Inbox, NewConn};
use crate::{Closer, Face, Shutdown};

/// How long connections get to finish the requests they read, at shutdown.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// How the server listens, fixed at start-up. Each field documents its
/// default (memcached's, except `listen`).
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Addresses to listen on: an IP (`127.0.0.1`, `::1`, `[::1]`), a host
    /// name (`localhost`: every address it resolves to), either optionally
    /// with `:PORT` to override [`ServerConfig::port`]. Default:
    /// `127.0.0.1` (memcached's default is every interface).
    pub listen: Vec<String>,
    /// TCP port; 0 lets the system choose one per address, see
    /// [`Server::local_addrs`]. Default: 11211.
    pub port: u16,
    /// Most client connections open at once (`-c`); further ones get the
    /// face's [`Face::too_many_connections`] reply and are closed.
    /// Default: 1024.
    pub connections_max: usize,
    /// Worker threads (`-t`), each with its own io_uring runtime serving
    /// its share of the connections. Default: the number of cores
    /// (`available_parallelism`).
    pub threads: usize,
    /// Receive through one multishot receive per connection (io_uring
    /// provided buffers; a receive per read where the kernel has none)
    /// instead of a receive per read. Default: false: it cut the kernel's
    /// work per request as counted (submissions, poll arms, system calls)
    /// but showed no throughput or CPU-per-request win in the A/B runs
    /// made so far (bench/results/README.md, "Multishot receives").
    pub multishot_recv: bool,
    /// Connections a worker takes before the next worker gets any: a new
    /// connection goes to the busiest worker still below this count, and
    /// once every worker has this many, to the least loaded. A handful of
    /// connections then share one worker, as they would a single-threaded
    /// server, instead of each worker sleeping and waking for one or two
    /// of them. 0 or 1: spread from the first connection (least loaded,
    /// ties round robin).
    pub pack_connections: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: vec!["127.0.0.1".to_owned()],
            port: 11211,
            connections_max: 1024,
            threads: default_threads(),
            multishot_recv: false,
            pack_connections: 0,
        }
    }
}

/// One worker per core (1 if the count is unknown).
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// A server whose sockets are bound but not yet accepting.
#[derive(Debug)]
pub struct Server {
    config: ServerConfig,
    listeners: Vec<TcpListener>,
    addrs: Vec<SocketAddr>,
    listening: bool,
}

/// Connections the kernel queues before they are accepted (memcached's
/// default backlog).
const BACKLOG: i32 = 1024;

/// Binds `addr` without listening: the port is ours (a port in use fails
/// here), yet a client that connects is refused, not left waiting on a
/// server that cannot serve yet.
fn bind_only(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    // As std's TcpListener::bind: a restart may rebind at once while the
    // last run's connections sit in TIME_WAIT.
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    Ok(socket.into())
}

impl Server {
    /// Binds every address of `config.listen`, without listening yet (see
    /// [`Server::listen`]): call it before the slow part of start-up (a
    /// store's recovery), so that a port in use fails at once. Errors name
    /// the address (`cannot listen on 127.0.0.1:11211: Address already in
    /// use`).
    pub fn bind(config: ServerConfig) -> io::Result<Server> {
        crate::memory::fix_mmap_threshold();
        if config.listen.is_empty() {
            return Err(invalid("no address to listen on"));
        }
        if config.connections_max == 0 {
            return Err(invalid("connections_max must be at least 1"));
        }
        if config.threads == 0 {
            return Err(invalid("threads must be at least 1"));
        }
        let mut listeners = Vec::new();
        let mut addrs = Vec::new();
        for entry in &config.listen {
            for addr in resolve(entry, config.port)? {
                let listener = bind_only(addr).map_err(|e| {
                    io::Error::new(e.kind(), format!("cannot listen on {addr}: {e}"))
                })?;
                addrs.push(listener.local_addr()?);
                listeners.push(listener);
            }
        }
        Ok(Server {
            config,
            listeners,
            addrs,
            listening: false,
        })
    }

    /// Starts listening on the bound addresses: from now on connections
    /// are queued for [`Server::serve`]. Call it once what serves them is
    /// ready (the store open), so that a client never sees the server up
    /// before it can answer.
    pub fn listen(&mut self) -> io::Result<()> {
        if !self.listening {
            for (l, addr) in self.listeners.iter().zip(&self.addrs) {
                socket2::SockRef::from(l).listen(BACKLOG).map_err(|e| {
                    io::Error::new(e.kind(), format!("cannot listen on {addr}: {e}"))
                })?;
            }
            self.listening = true;
        }
        Ok(())
    }

    /// The bound addresses, with the ports the system chose for port 0.
    pub fn local_addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// Accepts and serves connections until `shutdown` is triggered, then
    /// closes every connection, joins every thread and returns. An error is
    /// an accept loop that could not go on (connections are closed first).
    pub fn serve<F: Face>(mut self, face: Arc<F>, shutdown: &Shutdown) -> io::Result<()> {
        self.listen()?;
        for listener in &self.listeners {
            listener.set_nonblocking(true)?;
        }
        let name = face.name();
        let shared = Arc::new(Shared {
            face,
            registry: Arc::new(Mutex::new(HashMap::new())),
            active: AtomicUsize::new(0),
        });
        let mut workers = Vec::with_capacity(self.config.threads);
        for index in 0..self.config.threads {
            let inbox = Arc::new(Inbox::new());
            match worker::spawn_worker(
                index,
                Arc::clone(&inbox),
                Arc::clone(&shared),
                self.config.multishot_recv,
            ) {
                Ok(thread) => workers.push(Worker { inbox, thread }),
                Err(e) => {
                    stop_workers(workers);
                    return Err(e);
                }
            }
        }
        info!(
            "{name}: {} worker threads, one io_uring each",
            workers.len()
        );
        let mut acceptor = Acceptor {
            shared: &shared,
            workers: &workers,
            connections_max: self.config.connections_max,
            pack_connections: self.config.pack_connections,
            next_id: 0,
            next_worker: 0,
            last_accept_warning: None,
        };
        let result = acceptor.run(&self.listeners, shutdown);
        drop(self.listeners);
        info!("{name}: stopped accepting; closing connections");
        shared.close_all();
        stop_workers(workers);
        result
    }
}

/// A worker thread and the inbox the acceptor fills.
struct Worker<F: Face> {
    inbox: Arc<Inbox<F>>,
    thread: JoinHandle<()>,
}

/// Tells every worker to finish once its connections have ended, and joins
/// them.
fn stop_workers<F: Face>(workers: Vec<Worker<F>>) {
    for w in &workers {
        w.inbox.close();
    }
    for w in workers {
        if w.thread.join().is_err() {
            warn!("a worker thread panicked");
        }
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

/// What the accept loop and the workers share.
pub(crate) struct Shared<F> {
    pub(crate) face: Arc<F>,
    /// A clone of every open connection's socket, to shut it down.
    registry: Arc<Mutex<HashMap<u64, TcpStream>>>,
    /// Open connections (the limit's count).
    active: AtomicUsize,
}

impl<F: Face> Shared<F> {
    /// What a face uses to close this server's connections.
    pub(crate) fn closer(&self) -> Closer {
        Closer(Arc::clone(&self.registry))
    }

    /// Shuts down every connection: first the read side, then, once they
    /// have ended or after the grace period, both.
    fn close_all(&self) {
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
    }
}

/// The accept loop's state.
struct Acceptor<'a, F: Face> {
    shared: &'a Arc<Shared<F>>,
    workers: &'a [Worker<F>],
    connections_max: usize,
    pack_connections: usize,
    next_id: u64,
    /// Where the search for the least loaded worker starts (round robin
    /// among equals).
    next_worker: usize,
    /// When the last "cannot accept" warning was logged (rate limit).
    last_accept_warning: Option<Instant>,
}

impl<'a, F: Face> Acceptor<'a, F> {
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
        let mut last_trim = std::time::Instant::now();
        let trim_ms = crate::memory::TRIM_INTERVAL.as_millis() as i32;
        loop {
            if shutdown.is_triggered() {
                return Ok(());
            }
            if last_trim.elapsed() >= crate::memory::TRIM_INTERVAL {
                crate::memory::trim_allocator();
                last_trim = std::time::Instant::now();
            }
            for fd in &mut fds {
                fd.revents = 0;
            }
            // SAFETY: `fds` is a live, exclusively borrowed array of
            // `fds.len()` pollfd structs for the duration of the call, and
            // every descriptor in it stays open until this function returns.
            let ready = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, trim_ms) };
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
                        warn!(
                            "{}: cannot accept a connection: {e}",
                            self.shared.face.name()
                        );
                        self.last_accept_warning = Some(now);
                    }
                    std::thread::sleep(Duration::from_millis(10));
                    return;
                }
            }
        }
    }

    /// Hands `stream` to the least loaded worker, or turns it away over
    /// the limit.
    fn admit(&mut self, stream: TcpStream, peer: SocketAddr) {
        let shared = self.shared;
        if shared.active.load(Ordering::SeqCst) >= self.connections_max {
            shared.face.connection_rejected();
            debug!(
                "{}: rejecting {peer}: {} connections open",
                shared.face.name(),
                self.connections_max
            );
            // A fresh socket's send buffer takes the line; never block on it.
            let _ = stream.set_nonblocking(true);
            let _ = (&stream).write(shared.face.too_many_connections());
            return;
        }
        // Blocking mode: the ring does the waiting (it arms its own poll).
        let registered = stream.set_nonblocking(false).and_then(|()| {
            stream.set_nodelay(true)?;
            stream.try_clone()
        });
        let clone = match registered {
            Ok(clone) => clone,
            Err(e) => {
                warn!(
                    "{}: dropping connection from {peer}: {e}",
                    shared.face.name()
                );
                return;
            }
        };
        let worker = self.choose_worker();
        let id = self.next_id;
        self.next_id += 1;
        shared.active.fetch_add(1, Ordering::SeqCst);
        shared.face.connection_opened();
        shared.registry.lock().insert(id, clone);
        let load = Arc::clone(&worker.inbox.load);
        load.fetch_add(1, Ordering::SeqCst);
        let guard = Registered {
            shared: Arc::clone(shared),
            load,
            id,
        };
        worker.inbox.push(NewConn {
            stream,
            peer,
            guard,
        });
    }

    /// The worker a new connection goes to ([`pick_worker`]).
    fn choose_worker(&mut self) -> &'a Worker<F> {
        let loads = self
            .workers
            .iter()
            .map(|w| w.inbox.load.load(Ordering::SeqCst));
        let start = self.next_worker;
        self.next_worker = (start + 1) % self.workers.len();
        &self.workers[pick_worker(loads, self.pack_connections, start)]
    }
}

/// The index (among `loads`: connections per worker, at least one worker)
/// of the worker a new connection goes to: the busiest worker still below
/// `pack` connections (the first such, so workers fill in order), else the
/// least loaded, ties broken round robin from `start`.
fn pick_worker(
    loads: impl ExactSizeIterator<Item = usize> + Clone,
    pack: usize,
    start: usize,
) -> usize {
    let n = loads.len();
    let filling = loads
        .clone()
        .enumerate()
        .filter(|&(_, load)| load < pack)
        .max_by_key(|&(i, load)| (load, Reverse(i)));
    // Ties go to the first worker at or after `start`, round robin.
    let least = || {
        loads
            .enumerate()
            .min_by_key(|&(i, load)| (load, (i + n - start % n) % n))
    };
    filling.or_else(least).expect("at least one worker").0
}

/// Undoes a connection's registration when its task ends, even by panic.
pub(crate) struct Registered<F: Face> {
    shared: Arc<Shared<F>>,
    /// The serving worker's load count.
    pub(crate) load: Arc<AtomicUsize>,
    pub(crate) id: u64,
}

impl<F: Face> Drop for Registered<F> {
    fn drop(&mut self) {
        self.shared.registry.lock().remove(&self.id);
        self.shared.active.fetch_sub(1, Ordering::SeqCst);
        self.load.fetch_sub(1, Ordering::SeqCst);
        self.shared.face.connection_closed();
    }
}

#[cfg(test)]
mod tests {
    use super::{pick_worker, resolve};

    #[test]
    fn pick_worker_spreads_or_packs() {
        // Spread: the least loaded, ties round robin from `start`.
        assert_eq!(pick_worker([0, 0].into_iter(), 0, 0), 0);
        assert_eq!(pick_worker([0, 0].into_iter(), 0, 1), 1);
        assert_eq!(pick_worker([1, 0].into_iter(), 0, 0), 1);
        assert_eq!(pick_worker([3, 3, 2].into_iter(), 1, 0), 2);
        // Pack 4: the first worker fills to 4, then the next one.
        let mut loads = [0usize; 2];
        for start in 0..12 {
            let w = pick_worker(loads.into_iter(), 4, start % 2);
            loads[w] += 1;
            if start < 4 {
                assert_eq!(loads, [start + 1, 0]);
            } else if start < 8 {
                assert_eq!(loads, [4, start - 3]);
            }
        }
        assert_eq!(loads, [6, 6]);
        // The busiest worker below `pack` before an empty one; all full:
        // the least loaded.
        assert_eq!(pick_worker([4, 2, 0].into_iter(), 4, 0), 1);
        assert_eq!(pick_worker([9, 9].into_iter(), 4, 1), 1);
    }

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
