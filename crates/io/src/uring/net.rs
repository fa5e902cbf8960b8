//! Sockets through the ring: accept, receive, send.
//!
//! Sockets stay ordinary blocking-mode descriptors; the ring does the
//! waiting (io_uring arms its own poll when a socket has no data yet).

use std::io;
use std::net::TcpListener;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};

use io_uring::{opcode, types};

use super::errno;
use super::op::Op;

/// Accepts one connection on a listening socket.
pub async fn accept(listener: RawFd) -> io::Result<std::net::TcpStream> {
    let entry = opcode::Accept::new(
        types::Fd(listener),
        std::ptr::null_mut(),
        std::ptr::null_mut(),
    )
    .flags(libc::SOCK_CLOEXEC)
    .build();
    let fd = errno(Op::submit((), entry).await.result)?;
    // SAFETY: the kernel just created this descriptor for us; nothing else
    // owns it.
    Ok(unsafe { std::net::TcpStream::from_raw_fd(fd as RawFd) })
}

/// Receives into the spare capacity of `buf` (at most `max` bytes),
/// growing its length by what arrived. `Ok(0)`: the peer closed.
pub async fn recv(fd: RawFd, buf: Vec<u8>, max: usize) -> (io::Result<usize>, Vec<u8>) {
    let mut buf = buf;
    buf.reserve(max);
    let len = buf.len();
    let room = (buf.capacity() - len).min(max).min(u32::MAX as usize);
    // Pointer into the heap allocation of `buf`, which the op owns until
    // completion (the Vec is moved, its allocation is not).
    let ptr = buf.spare_capacity_mut().as_mut_ptr() as *mut u8;
    let entry = opcode::Recv::new(types::Fd(fd), ptr, room as u32).build();
    let c = Op::submit(buf, entry).await;
    let mut buf = c.data;
    let r = errno(c.result);
    if let Ok(n) = r {
        debug_assert!(n <= room);
        // SAFETY: the kernel initialised `n` bytes of the spare capacity.
        unsafe { buf.set_len(len + n) };
    }
    (r, buf)
}

/// Sends all of `buf[from..]`; gives the buffer back.
pub async fn send_all(fd: RawFd, buf: Vec<u8>, from: usize) -> (io::Result<()>, Vec<u8>) {
    let mut buf = buf;
    let mut at = from;
    while at < buf.len() {
        let ptr = buf[at..].as_ptr();
        let n = (buf.len() - at).min(u32::MAX as usize) as u32;
        let entry = opcode::Send::new(types::Fd(fd), ptr, n)
            .flags(libc::MSG_NOSIGNAL)
            .build();
        let c = Op::submit(buf, entry).await;
        buf = c.data;
        match errno(c.result) {
            Ok(0) => return (Err(io::ErrorKind::WriteZero.into()), buf),
            Ok(n) => at += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return (Err(e), buf),
        }
    }
    (Ok(()), buf)
}

/// Async accept on a std listener.
pub trait TcpListenerExt {
    /// Accepts one connection through the current runtime's ring.
    fn accept_async(&self) -> impl std::future::Future<Output = io::Result<std::net::TcpStream>>;
}

impl TcpListenerExt for TcpListener {
    fn accept_async(&self) -> impl std::future::Future<Output = io::Result<std::net::TcpStream>> {
        accept(self.as_raw_fd())
    }
}
