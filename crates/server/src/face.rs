//! What a face (a protocol served over the kit) gives the kit: a
//! [`Face`] for the server as a whole and a [`Session`] per connection.
//!
//! The kit owns sockets, threads, buffers, limits and shutdown; a face owns
//! the bytes: it parses requests out of what the kit received, executes
//! them against its storage and composes the replies into the kit's output
//! buffer. The split is Pelikan's (`core/server` bound only by the
//! protocol's `Parse`/`Compose`/`Execute` traits): the kit never names a
//! protocol, so the memcache face and the Redis-protocol face run on the
//! same acceptor and workers.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;

use parking_lot::Mutex;

/// What [`Session::feed`] did with the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fed {
    /// Bytes of input consumed (complete requests). The kit keeps the rest
    /// and feeds it again with more bytes appended.
    pub consumed: usize,
    /// Close the connection once the output is sent (`quit`, or a protocol
    /// error after which the protocol's reference server closes).
    pub close: bool,
    /// The face paused because it composed much output: requests remain
    /// after `consumed`, or the request there is half answered (a large
    /// multi-get; the session remembers where it stopped). The kit sends
    /// the output, then feeds the unconsumed input again at once. This is
    /// what bounds a connection's output buffer whatever its requests ask.
    pub more: bool,
}

/// Output a face composes before it pauses ([`Fed::more`]).
pub const OUTPUT_PAUSE_BYTES: usize = 1 << 20;

/// What the kit tells a face about a connection it admitted.
#[derive(Clone, Debug)]
pub struct Connection {
    /// The kit's number for it, unique while the server runs (what
    /// [`Closer::close`] takes).
    pub id: u64,
    pub peer: SocketAddr,
    /// The address it was accepted on, if the socket could say.
    pub local: Option<SocketAddr>,
    /// Closes any connection of this server (an admin command such as
    /// Redis's `CLIENT KILL`).
    pub closer: Closer,
    /// Tells whether the peer has gone (a session waiting long without
    /// reading, as a blocked Redis client does).
    pub probe: Probe,
}

/// Looks at a connection's socket without reading it.
#[derive(Clone, Copy, Debug)]
pub struct Probe(pub(crate) std::os::fd::RawFd);

impl Probe {
    /// Whether the peer closed the connection (or it was shut down, or
    /// failed): a receive that peeks finds the end of the stream or an
    /// error. Pending input counts as open. Valid while the connection's
    /// session lives (the kit closes the socket only after dropping it).
    pub fn peer_closed(&self) -> bool {
        let mut byte = 0u8;
        // SAFETY: the descriptor is the connection's socket, open while
        // its session (which holds this probe) lives; the call writes at
        // most one byte into `byte` and, with MSG_PEEK, consumes nothing.
        let n = unsafe {
            libc::recv(
                self.0,
                (&mut byte as *mut u8).cast(),
                1,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        if n > 0 {
            return false;
        }
        if n == 0 {
            return true;
        }
        let e = std::io::Error::last_os_error();
        !matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
        )
    }
}

/// Closes connections of one server by [`Connection::id`].
#[derive(Clone)]
pub struct Closer(pub(crate) Arc<Mutex<HashMap<u64, TcpStream>>>);

impl Closer {
    /// Shuts connection `id`'s socket down, both ways: its task ends at
    /// its next receive or send (at once when it is idle), after the
    /// request it is executing, if any. False if no such connection is
    /// open. To close the calling connection after its reply, a session
    /// returns [`Fed::close`] instead.
    pub fn close(&self, id: u64) -> bool {
        match self.0.lock().get(&id) {
            Some(stream) => {
                let _ = stream.shutdown(std::net::Shutdown::Both);
                true
            }
            None => false,
        }
    }
}

impl fmt::Debug for Closer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Closer")
    }
}

/// One connection's protocol state.
///
/// Sessions live on one worker thread (each worker runs a single-threaded
/// io_uring runtime), so neither they nor their futures need be `Send`.
pub trait Session {
    /// Executes the complete requests at the start of `input`, appending
    /// their replies to `out` in request order. A request that is not
    /// complete yet is left unconsumed. The future may wait for storage
    /// IO; the worker runs other connections meanwhile.
    fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> impl Future<Output = Fed>;

    /// Waits until the session has output that answers no request of its
    /// own (a message for a Redis subscriber, published by another
    /// connection) and appends it to `out`. The kit waits on this beside
    /// its receive, between requests, so such output goes out while the
    /// connection is otherwise idle. The kit drops the future when input
    /// arrives first: it must lose nothing then. The default, for faces
    /// without such output, never ends.
    fn pushed(&mut self, out: &mut Vec<u8>) -> impl Future<Output = ()> {
        let _ = out;
        std::future::pending()
    }
}

/// A protocol served by the kit, shared by every worker.
pub trait Face: Send + Sync + 'static {
    /// Per-connection state.
    type Session: Session;

    /// Short name for thread names and logs (`memcache`, `resp`).
    fn name(&self) -> &'static str;

    /// The state of a new connection.
    fn session(&self, conn: &Connection) -> Self::Session;

    /// Bytes the largest request the face accepts may take, whole. A
    /// connection's read buffer grows up to this; a request that does not
    /// fit is answered [`Face::request_too_large`] and the connection
    /// closed, so one client cannot grow the server's memory without bound.
    fn request_bytes_max(&self) -> usize;

    /// Sent to a connection turned away over the connection limit, before
    /// it is closed.
    fn too_many_connections(&self) -> &'static [u8];

    /// Sent when a request outgrows [`Face::request_bytes_max`], before the
    /// connection is closed.
    fn request_too_large(&self) -> &'static [u8];

    /// A connection was admitted (for the face's own counters).
    fn connection_opened(&self) {}

    /// An admitted connection ended.
    fn connection_closed(&self) {}

    /// A connection was turned away over the limit.
    fn connection_rejected(&self) {}
}
