//! The server's workers: one thread per core, each running its
//! own `nvdepot_io::uring` runtime, with one task per connection.
//!
//! The acceptor thread hands a worker its connections through the worker's
//! [`Inbox`] (a short lock and a waker, once per connection, never per
//! request). From then on the connection lives on that worker's thread:
//! its receives, sends and storage IO all go through the worker's ring, and
//! a task that waits for any of them lets the worker run the others.

use std::future::{poll_fn, Future};
use std::io;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::panic::AssertUnwindSafe;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Poll, Waker};
use std::time::Duration;

use nvdepot_io::uring;
use parking_lot::Mutex;
use tracing::{debug, error};

use crate::server::{Registered, Shared};
use crate::{Connection, Face, Fed, Session};

/// Start size of a connection's read buffer.
const READ_BUFFER_BYTES: usize = 16 << 10;
/// Input handed to one `feed` call, at first: small, so that a burst of
/// tiny pipelined requests for large values (`get big\r\n` × 2000) cannot
/// build a huge reply in one go. Doubles while no request fits.
const FEED_WINDOW_BYTES: usize = 1 << 10;
/// Replies are sent once this many bytes are pending.
const WRITE_BATCH_BYTES: usize = 256 << 10;
/// Submission queue entries of a worker's ring: room for a receive or a
/// send of many connections per `io_uring_enter`.
const RING_ENTRIES: u32 = 1024;
/// How often a closing worker checks whether its connections have ended.
const CLOSE_POLL: Duration = Duration::from_millis(5);
/// Provided buffers of a worker's ring for multishot receives (see
/// `nvdepot_io::uring::RecvStream`): a power of two, shared by its
/// connections, each holding one only from an arrival to its copy.
const RECV_BUFFERS: u16 = 1024;
/// Bytes of each: a request of the common sizes in one.
const RECV_BUFFER_BYTES: usize = 4 << 10;

/// A connection the acceptor admitted, on its way to a worker.
pub(super) struct NewConn<F: Face> {
    pub stream: TcpStream,
    pub peer: SocketAddr,
    /// Undoes the admission (counters, registry, worker load) when the
    /// connection ends.
    pub guard: Registered<F>,
}

/// Where the acceptor leaves a worker's new connections.
pub(super) struct Inbox<F: Face> {
    state: Mutex<InboxState<F>>,
    /// Connections handed to this worker and not yet ended; the acceptor
    /// gives a new one to the least loaded worker.
    pub load: Arc<AtomicUsize>,
}

struct InboxState<F: Face> {
    queue: Vec<NewConn<F>>,
    /// The worker's task waiting for connections, if it waits.
    waker: Option<Waker>,
    /// No more connections will come: the worker ends once its
    /// connections have.
    closed: bool,
}

impl<F: Face> Inbox<F> {
    pub fn new() -> Inbox<F> {
        Inbox {
            state: Mutex::new(InboxState {
                queue: Vec::new(),
                waker: None,
                closed: false,
            }),
            load: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Hands `conn` to the worker (from the acceptor thread).
    pub fn push(&self, conn: NewConn<F>) {
        let waker = {
            let mut state = self.state.lock();
            state.queue.push(conn);
            state.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// Tells the worker to finish once its connections have ended.
    pub fn close(&self) {
        let waker = {
            let mut state = self.state.lock();
            state.closed = true;
            state.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// The connections queued so far; waits while there are none. `None`
    /// once closed and empty.
    async fn next(&self) -> Option<Vec<NewConn<F>>> {
        poll_fn(|cx| {
            let mut state = self.state.lock();
            if !state.queue.is_empty() {
                return Poll::Ready(Some(std::mem::take(&mut state.queue)));
            }
            if state.closed {
                return Poll::Ready(None);
            }
            state.waker = Some(cx.waker().clone());
            Poll::Pending
        })
        .await
    }
}

/// Starts worker `index`'s thread with its runtime. The ring is created on
/// the new thread, but before this returns, so a refused ring (io_uring
/// disabled, out of locked memory) fails the server's start.
pub(super) fn spawn_worker<F: Face>(
    index: usize,
    inbox: Arc<Inbox<F>>,
    shared: Arc<Shared<F>>,
    multishot: bool,
) -> io::Result<std::thread::JoinHandle<()>> {
    let name = shared.face.name();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let thread = std::thread::Builder::new()
        .name(format!("{name}-worker-{index}"))
        .spawn(move || {
            let ring = uring::Builder::default().entries(RING_ENTRIES);
            let built = if multishot {
                ring.clone()
                    .recv_buffers(RECV_BUFFERS, RECV_BUFFER_BYTES)
                    .build()
                    .or_else(|e| {
                        // Kernels before 5.19 have no buffer rings.
                        debug!(
                            "{name} worker {index}: no provided buffers ({e}); one-shot receives"
                        );
                        ring.build()
                    })
            } else {
                ring.build()
            };
            let rt = match built {
                Ok(rt) => {
                    let _ = ready_tx.send(Ok(()));
                    rt
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                    return;
                }
            };
            rt.block_on(run_worker(inbox, shared));
        })?;
    match ready_rx.recv() {
        Ok(Ok(())) => Ok(thread),
        Ok(Err(e)) => {
            let _ = thread.join();
            Err(io::Error::new(
                e.kind(),
                format!("{name} worker {index}: cannot create its io_uring: {e}"),
            ))
        }
        Err(_) => {
            let _ = thread.join();
            Err(io::Error::other(format!(
                "{name} worker {index} died while starting"
            )))
        }
    }
}

/// A worker's main task: spawns a task per connection it is given, and
/// once its inbox is closed, waits for them to end.
async fn run_worker<F: Face>(inbox: Arc<Inbox<F>>, shared: Arc<Shared<F>>) {
    while let Some(batch) = inbox.next().await {
        for conn in batch {
            uring::spawn(serve_connection(conn, Arc::clone(&shared)));
        }
    }
    // Every connection was shut down before the inbox was closed; their
    // tasks see it at their next receive or send.
    while inbox.load.load(Ordering::SeqCst) > 0 {
        uring::sleep(CLOSE_POLL).await;
    }
}

/// One connection's task. A panic while serving it (a bug) ends this
/// connection only: the worker and its other connections go on.
async fn serve_connection<F: Face>(conn: NewConn<F>, shared: Arc<Shared<F>>) {
    let NewConn {
        stream,
        peer,
        guard,
    } = conn;
    let id = guard.id;
    let name = shared.face.name();
    debug!("{name}: connection {id} from {peer}");
    let served = async {
        let conn = Connection {
            id,
            peer,
            local: stream.local_addr().ok(),
            closer: shared.closer(),
            probe: crate::face::Probe(std::os::fd::AsRawFd::as_raw_fd(&stream)),
        };
        let mut io = ConnectionIo::new(stream, &shared, &conn);
        match io.run().await {
            Ok(()) => debug!("{name}: connection {id} closed"),
            Err(e) => debug!("{name}: connection {id} closed: {e}"),
        }
    };
    let mut served = pin!(served);
    let finished = poll_fn(|cx| {
        match std::panic::catch_unwind(AssertUnwindSafe(|| served.as_mut().poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(())) => Poll::Ready(true),
            Err(_) => Poll::Ready(false),
        }
    })
    .await;
    if !finished {
        error!("{name}: connection {id} from {peer} panicked; closed it");
    }
    let last = guard.load.load(Ordering::SeqCst) == 1;
    drop(guard);
    crate::memory::closed_one(last);
}

/// One connection's socket, buffers and session.
struct ConnectionIo<F: Face> {
    stream: TcpStream,
    session: F::Session,
    /// Input received and not yet consumed.
    buf: Vec<u8>,
    /// What `buf` may hold now; doubles, up to `buf_bytes_max`, while a
    /// request does not fit.
    buf_bytes: usize,
    /// Largest `buf_bytes` may grow to.
    buf_bytes_max: usize,
    /// Replies not yet sent.
    out: Vec<u8>,
    /// The replies of the last requests, on their way: the connection
    /// receives its next request while they are sent, instead of arming
    /// its receive only once the send has completed, a loop turn later.
    sending: Option<Sending>,
    /// Input handed to the next `feed` (see [`FEED_WINDOW_BYTES`]).
    window: usize,
    /// The face's reply to a request larger than `buf_bytes_max`.
    too_large: &'static [u8],
}

impl<F: Face> ConnectionIo<F> {
    fn new(stream: TcpStream, shared: &Shared<F>, conn: &Connection) -> Self {
        let buf_bytes_max = shared.face.request_bytes_max().max(1);
        let buf_bytes = READ_BUFFER_BYTES.min(buf_bytes_max);
        ConnectionIo {
            stream,
            session: shared.face.session(conn),
            too_large: shared.face.request_too_large(),
            buf: Vec::with_capacity(buf_bytes),
            buf_bytes,
            buf_bytes_max,
            out: Vec::new(),
            sending: None,
            window: FEED_WINDOW_BYTES,
        }
    }

    fn fd(&self) -> RawFd {
        self.stream.as_raw_fd()
    }

    /// Receives, executes and answers requests until the client closes,
    /// the protocol closes, or an IO error. Receives through one
    /// multishot receive armed for the connection's life where the
    /// worker's ring has provided buffers, else a receive per read.
    async fn run(&mut self) -> io::Result<()> {
        let served = self.serve().await;
        // Whatever ended the connection, the replies already on their way
        // finish first (a client that closed its side still reads them).
        let sent = self.sent().await;
        served.and(sent)
    }

    async fn serve(&mut self) -> io::Result<()> {
        let mut stream =
            uring::recv_buffers_registered().then(|| uring::RecvStream::new(self.fd()));
        loop {
            // A multishot arrival may take the buffer past `buf_bytes`.
            if self.buf.len() >= self.buf_bytes && !self.grow() {
                self.out.extend_from_slice(self.too_large);
                return self.flush().await;
            }
            let fd = self.fd();
            let r = {
                let (buf, buf_bytes) = (&mut self.buf, self.buf_bytes);
                let recv = async {
                    match &mut stream {
                        Some(stream) => stream.recv(buf, buf_bytes).await,
                        None => {
                            let room = buf_bytes - buf.len();
                            let (r, b) = uring::recv(fd, std::mem::take(buf), room).await;
                            *buf = b;
                            r
                        }
                    }
                };
                // While the receive waits, the session's own output (messages
                // for a subscriber) goes out as it comes; the receive stays in
                // flight meanwhile.
                let mut recv = pin!(recv);
                loop {
                    let received = {
                        let sending = &mut self.sending;
                        let mut pushed = pin!(self.session.pushed(&mut self.out));
                        poll_fn(|cx| {
                            if let Poll::Ready(r) = recv.as_mut().poll(cx) {
                                return Poll::Ready(Woke::Received(r));
                            }
                            match sending {
                                // Pushed messages wait behind a send in
                                // flight where the session holds them (its
                                // output limit counts them there): one send
                                // at a time, in order.
                                Some(s) => s.as_mut().poll(cx).map(Woke::Sent),
                                None => pushed.as_mut().poll(cx).map(|()| Woke::Pushed),
                            }
                        })
                        .await
                    };
                    match received {
                        Woke::Received(r) => break r,
                        Woke::Sent((r, spare)) => {
                            self.sending = None;
                            sent_back(&mut self.out, spare);
                            r?;
                            start_send(fd, &mut self.out, &mut self.sending);
                        }
                        Woke::Pushed => start_send(fd, &mut self.out, &mut self.sending),
                    }
                }
            };
            match r {
                Ok(0) => return Ok(()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            let (consumed, close) = self.execute().await?;
            self.buf.drain(..consumed);
            if close {
                return Ok(());
            }
            if self.buf.is_empty() && self.buf_bytes > 4 * READ_BUFFER_BYTES {
                // A large value went through; give the memory back.
                self.buf_bytes = READ_BUFFER_BYTES;
                self.buf = Vec::with_capacity(READ_BUFFER_BYTES);
                self.out = Vec::new();
            }
        }
    }

    /// Doubles the full buffer; false when it is already at its limit.
    fn grow(&mut self) -> bool {
        if self.buf_bytes >= self.buf_bytes_max {
            return false;
        }
        self.buf_bytes = (self.buf_bytes * 2).min(self.buf_bytes_max);
        self.buf
            .reserve_exact(self.buf_bytes.saturating_sub(self.buf.len()));
        true
    }

    /// Feeds `buf` to the protocol window by window, sending the replies;
    /// returns the bytes consumed and whether to close.
    async fn execute(&mut self) -> io::Result<(usize, bool)> {
        // The replies before go out whole before these requests run: a
        // request may block (BLPOP) or take long, and a partly sent reply
        // only progresses while its send is polled. Its completion has
        // almost always been reaped with the receive that brought these
        // requests, so this rarely waits.
        self.sent().await?;
        let filled = self.buf.len();
        let mut pos = 0;
        while pos < filled {
            let end = filled.min(pos + self.window);
            let fed: Fed = self.session.feed(&self.buf[pos..end], &mut self.out).await;
            debug_assert!(fed.consumed <= end - pos, "feed consumed more than it got");
            pos += fed.consumed;
            if fed.close {
                self.flush().await?;
                return Ok((pos, true));
            }
            if fed.more {
                self.flush().await?;
                self.window = FEED_WINDOW_BYTES;
                continue;
            }
            if fed.consumed > 0 {
                self.window = FEED_WINDOW_BYTES;
            } else if end == filled {
                // The next request is incomplete: wait for more input, and
                // offer it whole next time.
                break;
            } else {
                self.window *= 2;
            }
            if self.out.len() >= WRITE_BATCH_BYTES {
                self.flush().await?;
            }
        }
        // Started, not awaited (none is in flight: every send above was
        // awaited): the connection's next receive is armed while the
        // replies go out.
        start_send(self.fd(), &mut self.out, &mut self.sending);
        Ok((pos, false))
    }

    /// Sends the pending replies, and waits until they are sent.
    async fn flush(&mut self) -> io::Result<()> {
        self.sent().await?;
        start_send(self.fd(), &mut self.out, &mut self.sending);
        self.sent().await
    }

    /// Waits for the send in flight, if any.
    async fn sent(&mut self) -> io::Result<()> {
        let Some(sending) = self.sending.take() else {
            return Ok(());
        };
        let (r, spare) = sending.await;
        sent_back(&mut self.out, spare);
        r
    }
}

/// Starts sending `out` (if not empty) on `fd`, without waiting for the
/// send; none may be in flight.
fn start_send(fd: RawFd, out: &mut Vec<u8>, sending: &mut Option<Sending>) {
    debug_assert!(sending.is_none(), "one send at a time");
    if out.is_empty() {
        return;
    }
    let out = std::mem::take(out);
    *sending = Some(Box::pin(uring::send_all(fd, out, 0)));
}

/// Takes back a sent buffer for the next replies (emptied), unless
/// replies were written meanwhile or it grew large (a multi-get of many
/// values went out: its buffer is not kept for the connection's life).
fn sent_back(out: &mut Vec<u8>, mut spare: Vec<u8>) {
    if out.is_empty() && spare.capacity() <= 4 * WRITE_BATCH_BYTES {
        spare.clear();
        *out = spare;
    }
}

/// A send in flight and the buffer it gives back.
type Sending = std::pin::Pin<Box<dyn Future<Output = (io::Result<()>, Vec<u8>)>>>;

/// What woke a connection waiting for its next request.
enum Woke {
    Received(io::Result<usize>),
    Sent((io::Result<()>, Vec<u8>)),
    Pushed,
}
