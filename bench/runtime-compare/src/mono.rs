//! Variant (c): monoio with its io_uring driver, `qd` tasks each looping
//! `File::read_at` into a 4 KiB-aligned buffer (O_DIRECT needs one; a
//! `Vec<u8>` is not aligned, so `Aligned` wraps the repo's `AlignedBuf`).

use std::cell::RefCell;
use std::io;
use std::rc::Rc;
use std::time::{Duration, Instant};

use monoio::buf::IoBufMut;
use nvdepot_io::AlignedBuf;

use crate::common::{running, Outcome, Rec, Rng, BS};

struct Aligned(AlignedBuf);

// SAFETY: the pointer is to a heap allocation owned by `AlignedBuf` that
// does not move when the wrapper does, and is valid for `len()` bytes.
unsafe impl IoBufMut for Aligned {
    fn write_ptr(&mut self) -> *mut u8 {
        self.0.as_mut_ptr()
    }
    fn bytes_total(&mut self) -> usize {
        self.0.len()
    }
    unsafe fn set_init(&mut self, _pos: usize) {
        // Always fully initialised (AlignedBuf is zeroed on allocation).
    }
}

pub fn run(path: &str, blocks: u64, qd: usize, secs: f64) -> io::Result<Outcome> {
    // 256 entries like the other variants (monoio's default is 1024).
    let mut rt = monoio::RuntimeBuilder::<monoio::IoUringDriver>::new()
        .with_entries(256)
        .build()?;
    let std_file = crate::open_direct(path)?;
    let rec = Rc::new(RefCell::new(Rec::new()));
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(secs);
    let res: io::Result<()> = rt.block_on(async {
        let file = Rc::new(monoio::fs::File::from_std(std_file)?);
        let handles: Vec<_> = (0..qd)
            .map(|t| {
                let rec = rec.clone();
                let file = file.clone();
                monoio::spawn(async move {
                    let mut rng = Rng::new(t as u64 + 1);
                    let mut buf = Aligned(AlignedBuf::new(BS, BS));
                    loop {
                        let t0 = Instant::now();
                        if !running(t0, deadline) {
                            return Ok::<(), io::Error>(());
                        }
                        let (r, b) = file.read_at(buf, rng.offset(blocks)).await;
                        buf = b;
                        if r? != BS {
                            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "short"));
                        }
                        rec.borrow_mut().record(t0.elapsed());
                    }
                })
            })
            .collect();
        let mut first = Ok(());
        for h in handles {
            first = first.and(h.await);
        }
        first
    });
    let elapsed = start.elapsed();
    res?;
    let rec = Rc::try_unwrap(rec).ok().expect("tasks done").into_inner();
    Ok(Outcome {
        rec,
        elapsed,
        extra: String::new(),
    })
}
