//! One run of one read-path variant: 4 KiB O_DIRECT random reads at a given
//! queue depth for a given time, on one thread, printing one JSON line
//! (ops/s, p50/p99 latency). `run.sh` repeats it across variants, queue
//! depths and repetitions, with fio in between, and `summarize.py` turns
//! the lines into the tables of docs/RUNTIME.md.
//!
//! Latency is measured from just before the read is issued to just after
//! its task (or loop) sees the completion, so it includes the executor's
//! own cost; it corresponds to fio's `lat` (not `clat`).

mod common;
mod mono;
mod nv;
mod raw;

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::process::ExitCode;

use clap::Parser;
use nvdepot_io::AlignedBuf;

use common::{json_line, load1, BS};

#[derive(Parser)]
#[command(about = "4 KiB O_DIRECT random reads: raw io-uring vs nvdepot_io::uring vs monoio")]
struct Args {
    /// File read with O_DIRECT; created and filled if shorter than --size.
    #[arg(long, default_value = "/work/rtcmp/data.bin")]
    file: String,
    /// Bytes of the file to read from (and to create).
    #[arg(long, default_value_t = 2 << 30)]
    size: u64,
    /// raw | raw-fixed | raw-taskrun | nv | nv-regfile | nv-fixed | monoio | prepare
    #[arg(long, default_value = "nv")]
    variant: String,
    #[arg(long, default_value_t = 32)]
    qd: usize,
    /// Seconds to run.
    #[arg(long, default_value_t = 10.0)]
    secs: f64,
    /// IORING_SETUP_SQPOLL with this idle time in ms (raw and nv variants).
    #[arg(long)]
    sqpoll: Option<u32>,
    /// IORING_SETUP_IOPOLL (raw and nv variants).
    #[arg(long)]
    iopoll: bool,
    /// Open without O_DIRECT. On a file already in the page cache every
    /// read completes inline, so the run measures the runtime's CPU cost
    /// per op rather than the disk.
    #[arg(long)]
    buffered: bool,
}

/// Set once from `--buffered` before any variant opens the file.
static BUFFERED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

pub fn open_direct(path: &str) -> io::Result<File> {
    let buffered = BUFFERED.load(std::sync::atomic::Ordering::Relaxed);
    OpenOptions::new()
        .read(true)
        .custom_flags(if buffered { 0 } else { libc::O_DIRECT })
        .open(path)
}

/// Creates (or extends) the file with non-zero data so every block is
/// really allocated on the disk: reads of holes or of zeroes that a host
/// might deduplicate would measure nothing.
fn prepare(path: &str, size: u64) -> io::Result<()> {
    if let Some(dir) = std::path::Path::new(path).parent() {
        std::fs::create_dir_all(dir)?;
    }
    let have = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    if have >= size {
        return Ok(());
    }
    eprintln!("filling {path} to {size} bytes");
    let f = OpenOptions::new()
        .write(true)
        .create(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)?;
    const CHUNK: usize = 1 << 20;
    let mut buf = AlignedBuf::new(CHUNK, BS);
    let mut x = 0x1234_5678_9abc_def1u64;
    let mut off = have / CHUNK as u64 * CHUNK as u64;
    while off < size {
        for w in buf.chunks_exact_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            w.copy_from_slice(&x.to_le_bytes());
        }
        f.write_all_at(&buf, off)?;
        off += CHUNK as u64;
    }
    f.sync_all()
}

fn main() -> ExitCode {
    let a = Args::parse();
    match run(&a) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // One JSON line even on failure, so run.sh records what happened
            // (e.g. IOPOLL refused by the device).
            println!(
                "{{\"tool\":\"rtcmp\",\"variant\":\"{}\",\"qd\":{},\"error\":\"{}\"}}",
                label(&a),
                a.qd,
                e.to_string().replace('"', "'")
            );
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

/// Variant name plus polling modes, e.g. `nv+sqpoll`.
fn label(a: &Args) -> String {
    let mut s = a.variant.clone();
    if a.sqpoll.is_some() {
        s.push_str("+sqpoll");
    }
    if a.iopoll {
        s.push_str("+iopoll");
    }
    if a.buffered {
        s.push_str("+cached");
    }
    s
}

fn run(a: &Args) -> io::Result<()> {
    prepare(&a.file, a.size)?;
    if a.variant == "prepare" {
        return Ok(());
    }
    BUFFERED.store(a.buffered, std::sync::atomic::Ordering::Relaxed);
    let blocks = a.size / BS as u64;
    let file = open_direct(&a.file)?;
    let fd = file.as_raw_fd();
    let load = load1();
    let cpu0 = common::cpu_time();
    let nv_mode = |register_file, bufs| nv::Mode {
        register_file,
        bufs,
        sqpoll_ms: a.sqpoll,
        iopoll: a.iopoll,
    };
    let raw_mode = |fixed, taskrun| raw::Mode {
        fixed,
        sqpoll_ms: a.sqpoll,
        iopoll: a.iopoll,
        taskrun,
    };
    let out = match a.variant.as_str() {
        "raw" => raw::run(fd, blocks, a.qd, a.secs, &raw_mode(false, false))?,
        "raw-fixed" => raw::run(fd, blocks, a.qd, a.secs, &raw_mode(true, false))?,
        // The raw loop with fio's ring setup flags (see raw::Mode::taskrun).
        "raw-taskrun" => raw::run(fd, blocks, a.qd, a.secs, &raw_mode(false, true))?,
        "nv" => nv::run(fd, blocks, a.qd, a.secs, &nv_mode(false, nv::Bufs::Plain))?,
        "nv-regfile" => nv::run(fd, blocks, a.qd, a.secs, &nv_mode(true, nv::Bufs::Plain))?,
        // Registered buffers on top of the registered file.
        "nv-fixed" => nv::run(fd, blocks, a.qd, a.secs, &nv_mode(true, nv::Bufs::Fixed))?,
        "monoio" => {
            if a.sqpoll.is_some() || a.iopoll {
                return Err(io::Error::other("polling modes are not wired for monoio"));
            }
            mono::run(&a.file, blocks, a.qd, a.secs)?
        }
        v => return Err(io::Error::other(format!("unknown variant {v}"))),
    };
    let cpu = common::cpu_time() - cpu0;
    println!("{}", json_line(&label(a), a.qd, load, cpu, &out));
    Ok(())
}
