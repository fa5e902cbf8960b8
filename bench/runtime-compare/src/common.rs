//! What every variant shares: the offset generator, the latency recorder
//! and the result line, so that the variants differ only in how a read is
//! submitted and completed.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

/// Bytes per read; also the O_DIRECT alignment of buffers and offsets.
pub const BS: usize = 4096;

/// xorshift64*: a few cycles per offset, so the generator does not show up
/// in the comparison (fio uses its own, equally cheap, generator).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        // Zero is xorshift's fixed point.
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// A block-aligned offset below `blocks * BS`.
    pub fn offset(&mut self, blocks: u64) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        // Multiply-shift instead of `%`: uniform enough, no division.
        let r = x.wrapping_mul(0x2545_F491_4F6C_DD1D);
        (((r >> 32) * blocks) >> 32) * BS as u64
    }
}

/// Latencies of one run, in nanoseconds, plus the op count.
pub struct Rec {
    pub hist: Histogram<u64>,
    pub ops: u64,
}

impl Rec {
    pub fn new() -> Rec {
        Rec {
            // 1 ns .. 10 s at 3 significant digits.
            hist: Histogram::new_with_bounds(1, 10_000_000_000, 3).expect("histogram bounds"),
            ops: 0,
        }
    }

    pub fn record(&mut self, d: Duration) {
        self.hist.saturating_record(d.as_nanos() as u64);
        self.ops += 1;
    }
}

/// How a variant's run went, printed as one JSON line.
pub struct Outcome {
    pub rec: Rec,
    pub elapsed: Duration,
    /// Runtime-specific counters (e.g. `io_uring_enter` calls per op).
    pub extra: String,
}

/// User + system CPU time of this process so far. Per op, it is the
/// executor's cost that the device's latency hides from ops/s when the
/// disk, not the core, is the bottleneck.
pub fn cpu_time() -> Duration {
    // SAFETY: getrusage writes into the zeroed struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// 1-minute load average when the run started (the VM is shared).
pub fn load1() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|x| x.parse().ok()))
        .unwrap_or(-1.0)
}

pub fn json_line(variant: &str, qd: usize, load: f64, cpu: Duration, o: &Outcome) -> String {
    let secs = o.elapsed.as_secs_f64();
    let h = &o.rec.hist;
    let us = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
    format!(
        "{{\"tool\":\"rtcmp\",\"variant\":\"{variant}\",\"qd\":{qd},\"ops\":{},\"secs\":{secs:.3},\
         \"iops\":{:.0},\"p50_us\":{:.1},\"p99_us\":{:.1},\"mean_us\":{:.1},\"cpu_us_per_op\":{:.2},\"load1\":{load:.2}{}}}",
        o.rec.ops,
        o.rec.ops as f64 / secs,
        us(0.50),
        us(0.99),
        h.mean() / 1000.0,
        cpu.as_secs_f64() * 1e6 / o.rec.ops.max(1) as f64,
        o.extra,
    )
}

/// Deadline check shared by the task-based variants: true while a worker
/// should issue another read.
pub fn running(now: Instant, deadline: Instant) -> bool {
    now < deadline
}
