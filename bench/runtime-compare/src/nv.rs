//! Variant (b): nvdepot_io::uring, the thin executor this repo ships. `qd`
//! tasks, each looping one read at a time, exactly as the engine's GET
//! path will use it (one task per request, owned buffers).

use std::cell::RefCell;
use std::io;
use std::os::fd::RawFd;
use std::rc::Rc;
use std::time::{Duration, Instant};

use nvdepot_io::uring::{self, Builder, FixedPool};
use nvdepot_io::AlignedBuf;

use crate::common::{running, Outcome, Rec, Rng, BS};

#[derive(Clone, Copy, PartialEq)]
pub enum Bufs {
    /// `uring::read_at` into a task-owned `AlignedBuf`.
    Plain,
    /// `FixedPool::read` (`READ_FIXED` into registered buffers).
    Fixed,
}

pub struct Mode {
    pub register_file: bool,
    pub bufs: Bufs,
    pub sqpoll_ms: Option<u32>,
    pub iopoll: bool,
}

pub fn run(fd: RawFd, blocks: u64, qd: usize, secs: f64, mode: &Mode) -> io::Result<Outcome> {
    let mut b = Builder::default().entries(256);
    if let Some(ms) = mode.sqpoll_ms {
        b = b.sqpoll(ms);
    }
    let rt = b.iopoll(mode.iopoll).build()?;
    if mode.register_file {
        rt.register_files(&[fd])?;
    }
    let pool = match mode.bufs {
        Bufs::Fixed => Some(FixedPool::register(&rt, qd as u16, BS, BS)?),
        Bufs::Plain => None,
    };
    let rec = Rc::new(RefCell::new(Rec::new()));
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(secs);
    let errors: io::Result<()> = rt.block_on(async {
        let handles: Vec<_> = (0..qd)
            .map(|t| {
                let rec = rec.clone();
                let pool = pool.clone();
                uring::spawn(worker(fd, blocks, t as u64, deadline, rec, pool))
            })
            .collect();
        let mut first_err = Ok(());
        for h in handles {
            if let Err(e) = h.await {
                first_err = first_err.and(Err(e));
            }
        }
        first_err
    });
    let elapsed = start.elapsed();
    errors?;
    let st = rt.stats();
    let rec = Rc::try_unwrap(rec).ok().expect("tasks done").into_inner();
    let per = |x: u64| x as f64 / rec.ops.max(1) as f64;
    Ok(Outcome {
        extra: format!(
            ",\"enters_per_op\":{:.3},\"polls_per_op\":{:.3}",
            per(st.enters),
            per(st.polls)
        ),
        rec,
        elapsed,
    })
}

async fn worker(
    fd: RawFd,
    blocks: u64,
    seed: u64,
    deadline: Instant,
    rec: Rc<RefCell<Rec>>,
    pool: Option<FixedPool>,
) -> io::Result<()> {
    let mut rng = Rng::new(seed + 1);
    let mut buf = AlignedBuf::new(BS, BS);
    loop {
        let t0 = Instant::now();
        if !running(t0, deadline) {
            return Ok(());
        }
        let off = rng.offset(blocks);
        match &pool {
            None => {
                let (r, b) = uring::read_at(fd, buf, 0, BS, off).await;
                buf = b;
                if r? != BS {
                    return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "short read"));
                }
            }
            Some(pool) => {
                // One registered buffer per task, so the pool never runs dry.
                let fixed = pool.read(fd, BS, off).await.expect("a free fixed buffer")?;
                drop(fixed);
            }
        }
        rec.borrow_mut().record(t0.elapsed());
    }
}
