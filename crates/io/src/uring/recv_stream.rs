//! Multishot receives: one submission keeps a socket's receive armed, and
//! each arrival completes into a buffer the kernel picks from the
//! runtime's provided-buffer ring (`IORING_OP_RECV` with
//! `IORING_RECV_MULTISHOT` and a `io_uring_buf_ring`).
//!
//! Why: a one-shot receive posted after each reply usually finds nothing
//! yet (the client has not sent its next request), so the kernel tries the
//! socket, fails, arms a poll, and on arrival runs the receive again and
//! tears the poll down: that, and the submission, for every request. A
//! multishot receive arms once per connection, as an epoll registration
//! does.
//!
//! The buffers belong to the runtime (one ring of `count` buffers of `size`
//! bytes, shared by its connections), so a connection copies what arrived
//! into its own buffer and gives the provided one straight back; idle
//! connections hold none. Two bounds keep one connection from holding the
//! ring: a stream whose unread completions exceed [`QUEUED_MAX`] is
//! cancelled (re-armed once its owner has read them), and when the ring is
//! empty (`ENOBUFS`) the stream falls back to a one-shot receive into the
//! caller's buffer for that call.

use std::cell::Cell;
use std::future::poll_fn;
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU16, Ordering};
use std::task::Poll;

use io_uring::types::BufRingEntry;
use io_uring::{cqueue, opcode, types, IoUring};

use super::runtime::{with_core, Core};
use crate::AlignedBuf;

/// Buffer group id of a runtime's provided-buffer ring (one per runtime).
const BUF_GROUP: u16 = 0;
/// Unread completions beyond which a stream is cancelled (see the module
/// comment): with 4 KiB buffers, 256 KiB of a client's input waiting for
/// a connection that is busy sending.
pub(crate) const QUEUED_MAX: usize = 64;

/// A runtime's provided-buffer ring: `count` buffers of `size` bytes and
/// the ring of their descriptors the kernel takes them from.
pub(crate) struct ProvidedBufs {
    /// Owns the descriptor ring (page-aligned, `count` entries of 16
    /// bytes; the first entry's reserved field is the tail), used through
    /// `entries`.
    _ring: AlignedBuf,
    /// Owns the buffers, `size` bytes each, buffer id `i` at `i * size`,
    /// used through `base`.
    _mem: AlignedBuf,
    /// `ring` and `mem` as raw pointers, taken once from exclusive
    /// borrows: the kernel reads and writes this memory while `self` is
    /// shared, so no reference to all of it is made afterwards (only to a
    /// buffer the kernel has finished with).
    entries: *mut BufRingEntry,
    base: *mut u8,
    count: u16,
    size: usize,
    /// Our copy of the tail: descriptors added so far.
    tail: Cell<u16>,
}

impl ProvidedBufs {
    /// Registers a ring of `count` (a power of two, at most 32 768)
    /// buffers of `size` bytes with `ring`, every buffer given to the
    /// kernel.
    pub fn register(ring: &IoUring, count: u16, size: usize) -> io::Result<ProvidedBufs> {
        if !count.is_power_of_two() || count > 1 << 15 || size == 0 || size > u32::MAX as usize {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("provided buffers: {count} x {size} bytes is not a valid ring"),
            ));
        }
        let page = 4096;
        let ring_bytes = (usize::from(count) * std::mem::size_of::<BufRingEntry>()).max(page);
        let mut ring_mem = AlignedBuf::new(ring_bytes, page);
        let mut mem = AlignedBuf::new(usize::from(count) * size, page);
        // The heap memory of an `AlignedBuf` does not move with it.
        let entries = ring_mem.as_mut_ptr() as *mut BufRingEntry;
        let base = mem.as_mut_ptr();
        let bufs = ProvidedBufs {
            _ring: ring_mem,
            _mem: mem,
            entries,
            base,
            count,
            size,
            tail: Cell::new(0),
        };
        // SAFETY: the descriptor ring is page-aligned, zeroed and lives as
        // long as `self`, which the runtime's `Core` drops only after its
        // ring (field order), so the kernel never sees it freed.
        unsafe {
            ring.submitter().register_buf_ring_with_flags(
                bufs.entries as u64,
                count,
                BUF_GROUP,
                0,
            )?;
        }
        for bid in 0..count {
            bufs.add(bid);
        }
        bufs.publish();
        Ok(bufs)
    }

    /// Writes buffer `bid`'s descriptor at the tail (not yet visible to
    /// the kernel: see [`Self::publish`]).
    fn add(&self, bid: u16) {
        let t = self.tail.get();
        let i = usize::from(t & (self.count - 1));
        // SAFETY: `i < count`, inside the descriptor ring; the kernel only
        // reads descriptors between its head and the published tail, and
        // this one is past the published tail.
        let e = unsafe { &mut *self.entries.add(i) };
        e.set_addr(self.base as u64 + (usize::from(bid) * self.size) as u64);
        e.set_len(self.size as u32);
        e.set_bid(bid);
        self.tail.set(t.wrapping_add(1));
    }

    /// Makes the descriptors added so far visible to the kernel.
    fn publish(&self) {
        // SAFETY: the tail is the u16 at offset 14 of the page-aligned
        // ring (`BufRingEntry::tail`), naturally aligned; the kernel reads
        // it with an acquire load, so a release store orders the
        // descriptors written before it.
        unsafe {
            let tail = BufRingEntry::tail(self.entries) as *const AtomicU16;
            (*tail).store(self.tail.get(), Ordering::Release);
        }
    }

    /// Gives buffer `bid` back to the kernel.
    pub fn recycle(&self, bid: u16) {
        debug_assert!(bid < self.count, "buffer id {bid} out of range");
        self.add(bid);
        self.publish();
    }

    /// The first `len` bytes of buffer `bid`, which the kernel has filled
    /// and not been given back yet.
    fn data(&self, bid: u16, len: usize) -> &[u8] {
        assert!(bid < self.count, "buffer id {bid} out of range");
        let at = usize::from(bid) * self.size;
        // SAFETY: inside `mem` (bid < count, len clamped to size); the
        // kernel wrote this buffer before posting the completion that named
        // it and will not touch it again until it is recycled, which needs
        // `&self` and so comes after this borrow ends at the caller's copy.
        unsafe { std::slice::from_raw_parts(self.base.add(at), len.min(self.size)) }
    }
}

/// What a completion of a multishot receive carries.
enum Arrival {
    /// Bytes in a provided buffer.
    Data {
        bid: u16,
        len: usize,
    },
    /// The peer closed.
    Eof,
    /// The ring had no buffer.
    NoBuffers,
    /// The op ended without data (cancelled for backpressure, or ended by
    /// the kernel): arm again.
    Ended,
    Error(io::Error),
}

fn arrival(result: i32, flags: u32) -> Arrival {
    if result > 0 {
        let bid = cqueue::buffer_select(flags).expect("a multishot receive names its buffer");
        return Arrival::Data {
            bid,
            len: result as usize,
        };
    }
    match -result {
        0 => Arrival::Eof,
        libc::ENOBUFS => Arrival::NoBuffers,
        libc::ECANCELED | libc::EINTR | libc::EAGAIN => Arrival::Ended,
        e => Arrival::Error(io::Error::from_raw_os_error(e)),
    }
}

/// A socket's multishot receive on the current runtime (which must have
/// been built with [`super::Builder::recv_buffers`]). Dropping it cancels
/// the receive; buffers that arrive afterwards go back to the ring.
pub struct RecvStream {
    fd: RawFd,
    /// The op slot, reused across re-arms.
    slot: usize,
    /// A submission is in flight (its last completion not yet seen).
    armed: bool,
    /// The last arm ended for want of buffers: the next receive is a
    /// one-shot one into the caller's buffer.
    starved: bool,
    /// An end (the peer closed, or an error) that arrived after data the
    /// last call returned: the next call reports it.
    end: Option<io::Result<usize>>,
}

/// True if the current thread's runtime has provided buffers, so a
/// [`RecvStream`] may be made on it.
pub fn recv_buffers_registered() -> bool {
    with_core(|core| core.recv_bufs.is_some()).unwrap_or(false)
}

impl RecvStream {
    /// A multishot receive on `fd`, armed at the first [`Self::recv`].
    ///
    /// Panics outside a runtime, or on one without provided buffers (a
    /// programmer error).
    pub fn new(fd: RawFd) -> RecvStream {
        let slot = with_core(|core| {
            assert!(
                core.recv_bufs.is_some(),
                "RecvStream on a runtime built without recv_buffers"
            );
            core.ops.borrow_mut().insert_multi(QUEUED_MAX)
        })
        .expect("RecvStream outside a runtime");
        RecvStream {
            fd,
            slot,
            armed: false,
            starved: false,
            end: None,
        }
    }

    fn arm(&mut self, core: &Core) {
        let entry = opcode::RecvMulti::new(types::Fd(self.fd), BUF_GROUP)
            .build()
            .user_data(self.slot as u64);
        core.push(&entry);
        self.armed = true;
    }

    /// Appends what arrived to `buf`: waits for at least one arrival, then
    /// takes every one already there, while `buf` stays under `max` bytes
    /// (or has none yet). `Ok(0)`: the peer closed.
    pub async fn recv(&mut self, buf: &mut Vec<u8>, max: usize) -> io::Result<usize> {
        if let Some(end) = self.end.take() {
            return end;
        }
        loop {
            if self.starved && !self.armed {
                // No provided buffer was free: receive once into ours.
                self.starved = false;
                let room = max.saturating_sub(buf.len()).max(1);
                let (r, b) = super::recv(self.fd, std::mem::take(buf), room).await;
                *buf = b;
                return r;
            }
            let got = poll_fn(|cx| {
                with_core(|core| {
                    if !self.armed {
                        self.arm(core);
                    }
                    let bufs = core.recv_bufs.as_ref().expect("provided buffers");
                    let mut ops = core.ops.borrow_mut();
                    let mut taken = 0;
                    loop {
                        let next = if taken == 0 {
                            ops.multi_next(self.slot, cx.waker())
                        } else if buf.len() < max {
                            ops.multi_try_next(self.slot)
                        } else {
                            None
                        };
                        let Some((result, flags)) = next else {
                            return if taken > 0 {
                                Poll::Ready(Ok(Some(taken)))
                            } else {
                                Poll::Pending
                            };
                        };
                        if !cqueue::more(flags) {
                            self.armed = false;
                        }
                        match arrival(result, flags) {
                            Arrival::Data { bid, len } => {
                                buf.extend_from_slice(bufs.data(bid, len));
                                bufs.recycle(bid);
                                taken += len;
                            }
                            // An end after data: the data now, the end at
                            // the next call.
                            Arrival::Eof if taken == 0 => return Poll::Ready(Ok(Some(0))),
                            Arrival::Error(e) if taken == 0 => return Poll::Ready(Err(e)),
                            Arrival::Eof => {
                                self.end = Some(Ok(0));
                                return Poll::Ready(Ok(Some(taken)));
                            }
                            Arrival::Error(e) => {
                                self.end = Some(Err(e));
                                return Poll::Ready(Ok(Some(taken)));
                            }
                            Arrival::NoBuffers => {
                                core.stats.borrow_mut().recv_buffers_exhausted += 1;
                                self.starved = true;
                                return Poll::Ready(Ok(if taken > 0 { Some(taken) } else { None }));
                            }
                            Arrival::Ended => {
                                if taken > 0 {
                                    return Poll::Ready(Ok(Some(taken)));
                                }
                                // Arm again and wait.
                                self.arm(core);
                            }
                        }
                    }
                })
                .expect("RecvStream polled outside its runtime")
            })
            .await?;
            if let Some(n) = got {
                return Ok(n);
            }
        }
    }
}

impl Drop for RecvStream {
    fn drop(&mut self) {
        let (armed, slot) = (self.armed, self.slot);
        // Outside the runtime (it is being dropped) there is nothing to
        // hand back to: the runtime leaks its buffers then (`Core`'s drop).
        with_core(|core| {
            let bufs: *const ProvidedBufs = core.recv_bufs.as_ref().expect("provided buffers");
            // Completions still queued or yet to come hand their buffers
            // back to the ring.
            let stray = Box::new(move |result: i32, flags: u32| {
                if result > 0 {
                    if let Some(bid) = cqueue::buffer_select(flags) {
                        // SAFETY: the ring lives in the runtime's `Core`,
                        // which outlives its op slots' callbacks: they run
                        // only while it reaps, and are forgotten, not run,
                        // when it is dropped.
                        unsafe { (*bufs).recycle(bid) };
                    }
                }
            });
            core.ops.borrow_mut().multi_orphan(slot, armed, stray);
            if armed {
                core.cancel(slot as u64);
            }
        });
    }
}

impl std::fmt::Debug for RecvStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecvStream")
            .field("fd", &self.fd)
            .field("armed", &self.armed)
            .finish()
    }
}
