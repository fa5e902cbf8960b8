//! A minimal level-triggered epoll set for the load generators' loops.
//!
//! Why not `poll(2)`: a client thread drives tens of connections, and
//! `poll` registers on, checks and unregisters from every one of them on
//! each call. Profiled in the big scenario (64 connections on 2 threads,
//! `perf record` of `nvdepot bench resp`): `sock_poll`, `tcp_poll`,
//! `do_sys_poll`, `fdget`/`fput`, `__pollwait` and `poll_freewait` took
//! 17 % of the client's CPU, on the 2 cores it shares with the server.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

pub(crate) struct Epoll {
    fd: OwnedFd,
    events: Vec<libc::epoll_event>,
}

/// Readiness of the connection registered as `token`.
pub(crate) struct Ready {
    pub token: usize,
    /// Input, an error or a hang-up: a read says which.
    pub readable: bool,
}

impl Epoll {
    pub(crate) fn new(capacity: usize) -> io::Result<Epoll> {
        // SAFETY: plain system call; a returned fd is ours to own.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Epoll {
            // SAFETY: `fd` was just created and is owned by nobody else.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            events: vec![libc::epoll_event { events: 0, u64: 0 }; capacity.max(1)],
        })
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, token: usize, output: bool) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | if output { libc::EPOLLOUT } else { 0 }) as u32,
            u64: token as u64,
        };
        // SAFETY: `ev` is a valid epoll_event for the call's duration.
        if unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), op, fd, &mut ev) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Watches `fd` for input (and, with `output`, for room to write).
    pub(crate) fn add(&self, fd: RawFd, token: usize, output: bool) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, token, output)
    }

    /// Changes whether `fd` is also watched for room to write.
    pub(crate) fn modify(&self, fd: RawFd, token: usize, output: bool) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd, token, output)
    }

    /// Waits up to `timeout_ms` for readiness; returns what is ready.
    pub(crate) fn wait(&mut self, timeout_ms: i32) -> io::Result<impl Iterator<Item = Ready> + '_> {
        // SAFETY: `events` is a valid, writable array of `len` entries.
        let n = unsafe {
            libc::epoll_wait(
                self.fd.as_raw_fd(),
                self.events.as_mut_ptr(),
                self.events.len() as libc::c_int,
                timeout_ms,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let readable = (libc::EPOLLIN | libc::EPOLLERR | libc::EPOLLHUP) as u32;
        Ok(self.events[..n as usize].iter().map(move |e| Ready {
            token: e.u64 as usize,
            readable: e.events & readable != 0,
        }))
    }
}
