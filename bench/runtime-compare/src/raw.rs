//! Variant (a): the io-uring crate with no executor at all. One loop keeps
//! `qd` reads in flight: wait for at least one completion, record it,
//! queue the slot's next read, and hand every queued read to the kernel
//! in the same `io_uring_enter` that waits. No tasks, wakers or op
//! slots: this is the floor any executor's overhead is measured against.

use std::io;
use std::os::fd::RawFd;
use std::time::Instant;

use io_uring::{opcode, squeue, types, IoUring};
use nvdepot_io::AlignedBuf;

use crate::common::{Outcome, Rec, Rng, BS};

pub struct Mode {
    /// Registered file and registered buffers (`READ_FIXED`).
    pub fixed: bool,
    pub sqpoll_ms: Option<u32>,
    pub iopoll: bool,
    /// COOP_TASKRUN | SINGLE_ISSUER | DEFER_TASKRUN, the setup fio (3.3x)
    /// uses: completions are run when the thread enters the ring to wait,
    /// instead of interrupting it with task work. Safe here because this
    /// loop always enters with GETEVENTS (`submit_and_wait`).
    pub taskrun: bool,
}

pub fn run(fd: RawFd, blocks: u64, qd: usize, secs: f64, mode: &Mode) -> io::Result<Outcome> {
    // Same ring shape as nvdepot_io::uring's default (256 SQEs, CQ twice).
    let mut b = IoUring::builder();
    b.setup_cqsize(512);
    if let Some(ms) = mode.sqpoll_ms {
        b.setup_sqpoll(ms);
    }
    if mode.iopoll {
        b.setup_iopoll();
    }
    if mode.taskrun {
        b.setup_coop_taskrun()
            .setup_single_issuer()
            .setup_defer_taskrun();
    }
    // Buffers before the ring: locals drop in reverse order, so on every
    // path (early error returns included) the ring, and with it any read
    // still in flight, is gone before the memory it writes is freed.
    let mut bufs: Vec<AlignedBuf> = (0..qd).map(|_| AlignedBuf::new(BS, BS)).collect();
    let mut ring: IoUring = b.build(256)?;
    if mode.fixed {
        ring.submitter().register_files(&[fd])?;
        let iov: Vec<libc::iovec> = bufs
            .iter_mut()
            .map(|b| libc::iovec {
                iov_base: b.as_mut_ptr() as *mut _,
                iov_len: b.len(),
            })
            .collect();
        // SAFETY: `bufs` outlives `ring` (see above).
        unsafe { ring.submitter().register_buffers(&iov)? };
    }
    let mut rng = Rng::new(1);
    let mut rec = Rec::new();
    let mut started = vec![Instant::now(); qd];
    let sqe = |i: usize, buf: &mut AlignedBuf, off: u64| -> squeue::Entry {
        let p = buf.as_mut_ptr();
        if mode.fixed {
            opcode::ReadFixed::new(types::Fixed(0), p, BS as u32, i as u16)
                .offset(off)
                .build()
                .user_data(i as u64)
        } else {
            opcode::Read::new(types::Fd(fd), p, BS as u32)
                .offset(off)
                .build()
                .user_data(i as u64)
        }
    };
    let start = Instant::now();
    let deadline = start + std::time::Duration::from_secs_f64(secs);
    for i in 0..qd {
        let e = sqe(i, &mut bufs[i], rng.offset(blocks));
        started[i] = Instant::now();
        // SAFETY: the buffer lives in `bufs` until the loop has reaped
        // every completion.
        unsafe { ring.submission().push(&e).expect("sq has room for qd") };
    }
    let mut inflight = qd;
    let mut enters = 0u64;
    let mut done = Vec::with_capacity(qd);
    while inflight > 0 {
        match ring.submit_and_wait(1) {
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
            Err(e) => return Err(e),
        }
        enters += 1;
        let now = Instant::now();
        done.clear();
        done.extend(
            ring.completion()
                .map(|c| (c.user_data() as usize, c.result())),
        );
        for &(i, res) in &done {
            if res != BS as i32 {
                return Err(io_err(res));
            }
            rec.record(now - started[i]);
            if now < deadline {
                let e = sqe(i, &mut bufs[i], rng.offset(blocks));
                started[i] = now;
                // SAFETY: as above.
                unsafe { ring.submission().push(&e).expect("sq has room for qd") };
            } else {
                inflight -= 1;
            }
        }
    }
    let elapsed = start.elapsed();
    Ok(Outcome {
        extra: format!(
            ",\"enters_per_op\":{:.3}",
            enters as f64 / rec.ops.max(1) as f64
        ),
        rec,
        elapsed,
    })
}

fn io_err(res: i32) -> io::Error {
    if res < 0 {
        io::Error::from_raw_os_error(-res)
    } else {
        io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("short read: {res} bytes"),
        )
    }
}
