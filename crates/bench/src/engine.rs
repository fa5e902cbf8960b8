//! `bench engine`: the store's microbenchmark of uDepot §5.2, in process.
//!
//! Keys of 8–32 bytes (the first 8 name the key's number, the rest are
//! derived from it), values of `value_bytes` whose first 8 bytes repeat the
//! key's number, so every GET checks it got its own key's value. The load
//! phase writes keys `0..keys` (skipped for keys a reused store already
//! holds); the measured phase does uniform random GETs, overwriting PUTs
//! of loaded keys, or INSERTs (PUTs of keys the store does not hold yet,
//! the next numbers past the loaded ones: uDepot's PUT benchmark, which
//! puts into an empty store) at a fixed queue depth:
//! - `sync` backend: `qd` threads, each one blocking call at a time (the
//!   thread-pool model: pread/pwrite);
//! - `uring` backend: `threads` threads (thread per core), each with its
//!   own io_uring runtime running `qd / threads` tasks of one call at a
//!   time, so `qd` operations are in flight.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use nvdepot_engine::{Namespace, Options, Store};
use nvdepot_io::uring::{self, Runtime};
use nvdepot_io::{Device, FileDevice};

use crate::rng::{splitmix64, Rng};

/// How the benchmark calls the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// Blocking calls from a thread per outstanding operation.
    Sync,
    /// Async calls from tasks on one io_uring runtime per thread.
    Uring,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Sync => "sync",
            Backend::Uring => "uring",
        }
    }
}

/// The measured operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EngineOp {
    Get,
    /// Overwrites of loaded keys, chosen at random.
    Put,
    /// Puts of new keys (numbers past every key the store holds).
    Insert,
}

impl EngineOp {
    pub fn name(self) -> &'static str {
        match self {
            EngineOp::Get => "get",
            EngineOp::Put => "put",
            EngineOp::Insert => "insert",
        }
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Data files or block devices (several: segments striped over them).
    pub paths: Vec<PathBuf>,
    /// Bytes of each file to create (ignored for block devices and for an
    /// existing store).
    pub device_bytes: u64,
    /// Segment size of a store this creates.
    pub segment_bytes: u64,
    /// Grain size of a store this creates (512..=4096).
    pub grain_bytes: u32,
    pub backend: Backend,
    pub op: EngineOp,
    /// Operations in flight.
    pub qd: usize,
    /// Threads of the uring backend (the sync backend uses `qd`).
    pub threads: usize,
    pub value_bytes: usize,
    pub keys: u64,
    pub duration: Duration,
    /// Durable puts (flush before acknowledging); off: flushed every 100 ms.
    pub sync_puts: bool,
    pub seed: u64,
}

/// Results of one measured phase.
#[derive(Clone, Debug)]
pub struct EngineReport {
    pub backend: Backend,
    pub op: EngineOp,
    pub qd: usize,
    pub threads: usize,
    pub value_bytes: usize,
    pub keys: u64,
    pub seconds: f64,
    pub ops: u64,
    pub ops_per_sec: f64,
    /// Latency percentiles in microseconds: p50, p99, p99.9, p99.99, max.
    pub latency_us: [f64; 5],
    /// GETs that found no value or another key's value.
    pub errors: u64,
    /// Device bytes written per PUT in the phase (write amplification × record).
    pub device_bytes_per_op: f64,
    /// Operations per device flush in the phase (group commit batch size).
    pub ops_per_flush: f64,
}

/// Results of the load phase.
#[derive(Clone, Debug)]
pub struct LoadReport {
    pub keys_written: u64,
    pub seconds: f64,
}

/// The key of number `i`: 8–32 bytes, unique because its first 8 bytes
/// are `i` in hex (keys < 2^32).
pub fn key(i: u64, out: &mut Vec<u8>) {
    out.clear();
    let h = splitmix64(i);
    let len = 8 + (h % 25) as usize;
    let _ = write!(ByteWriter(out), "{:08x}", i as u32);
    let mut x = h;
    while out.len() < len {
        out.push(b'a' + (x % 26) as u8);
        x = x / 26 + 0x9e37;
    }
}

struct ByteWriter<'a>(&'a mut Vec<u8>);
impl std::fmt::Write for ByteWriter<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

/// The value of key `i`, version `round`.
pub fn value(i: u64, round: u64, len: usize) -> Vec<u8> {
    let mut v = vec![(i ^ round) as u8; len];
    let tag = i.to_le_bytes();
    let n = len.min(8);
    v[..n].copy_from_slice(&tag[..n]);
    v
}

/// [`value`] into `v`, reusing its bytes: of a value over 4 KiB only the
/// first 4 KiB are rewritten, so generating a large value does not weigh
/// on the put measured.
fn next_value(v: &mut Vec<u8>, i: u64, round: u64, len: usize) {
    if v.len() != len || len <= 4096 {
        *v = value(i, round, len);
        return;
    }
    v[..4096].copy_from_slice(&value(i, round, 4096));
}

fn value_is_of(v: &[u8], i: u64, len: usize) -> bool {
    let n = len.min(8);
    v.len() == len && v[..n] == i.to_le_bytes()[..n]
}

/// Opens (creating if needed) the store the benchmark runs on.
pub fn open_store(cfg: &EngineConfig) -> Result<Store, String> {
    let opts = Options {
        sync: cfg.sync_puts,
        segment_bytes: cfg.segment_bytes,
        grain_bytes: cfg.grain_bytes,
        ..Options::default()
    };
    if cfg.paths.len() == 1 {
        let opts = opts.create_bytes(cfg.device_bytes);
        return Store::open(&cfg.paths[0], &opts).map_err(|e| e.to_string());
    }
    let mut devices = Vec::new();
    for p in &cfg.paths {
        let d = FileDevice::open(p, Some(cfg.device_bytes)).map_err(|e| e.to_string())?;
        devices.push(Arc::new(d) as Arc<dyn Device>);
    }
    Store::open_devices(devices, &opts.create_bytes(cfg.device_bytes)).map_err(|e| e.to_string())
}

/// Writes the keys the store does not hold yet (keys `count..keys`), 128
/// puts in flight over two uring threads.
pub fn load(store: &Arc<Store>, cfg: &EngineConfig) -> Result<LoadReport, String> {
    let ns = store.default_namespace();
    let have = store.count(ns);
    let start = Instant::now();
    if have >= cfg.keys {
        return Ok(LoadReport {
            keys_written: 0,
            seconds: 0.0,
        });
    }
    let next = Arc::new(AtomicU64::new(have));
    let failed: Arc<parking_lot::Mutex<Option<String>>> = Arc::default();
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let (store, next, failed, cfg) =
                (store.clone(), next.clone(), failed.clone(), cfg.clone());
            std::thread::spawn(move || {
                let rt = Runtime::new().map_err(|e| format!("io_uring setup: {e}"))?;
                rt.block_on(async {
                    let tasks: Vec<_> = (0..64)
                        .map(|_| {
                            let (store, next, failed) =
                                (store.clone(), next.clone(), failed.clone());
                            let (keys, len) = (cfg.keys, cfg.value_bytes);
                            uring::spawn(async move {
                                let mut k = Vec::new();
                                loop {
                                    let i = next.fetch_add(1, Ordering::Relaxed);
                                    if i >= keys || failed.lock().is_some() {
                                        return;
                                    }
                                    key(i, &mut k);
                                    if let Err(e) = store.put_async(ns, &k, &value(i, 0, len)).await
                                    {
                                        *failed.lock() = Some(e.to_string());
                                    }
                                }
                            })
                        })
                        .collect();
                    for t in tasks {
                        t.await;
                    }
                });
                Ok::<(), String>(())
            })
        })
        .collect();
    for t in threads {
        t.join().map_err(|_| "load thread panicked".to_string())??;
    }
    if let Some(e) = failed.lock().take() {
        return Err(format!("load failed: {e}"));
    }
    Ok(LoadReport {
        keys_written: cfg.keys - have,
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// Per-worker tallies, merged at the end.
struct Tally {
    hist: Histogram<u64>,
    ops: u64,
    errors: u64,
}

impl Tally {
    fn new() -> Tally {
        Tally {
            hist: Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("histogram bounds"),
            ops: 0,
            errors: 0,
        }
    }

    fn merge(&mut self, other: &Tally) {
        self.hist.add(&other.hist).expect("histograms of one shape");
        self.ops += other.ops;
        self.errors += other.errors;
    }
}

/// The key numbers an insert phase hands out: `next..end`, `end` chosen
/// so that the new records fit in the store's free segments.
struct NewKeys {
    next: AtomicU64,
    end: u64,
}

impl NewKeys {
    fn for_store(store: &Store, cfg: &EngineConfig) -> NewKeys {
        let s = store.stats();
        let start = s.keys.max(cfg.keys);
        // A record is the value, a key of at most 32 bytes and its header,
        // rounded up to grains; budget 1 KiB over the value, and leave a
        // few segments free for the log's own needs.
        let record = cfg.value_bytes as u64 + 1024;
        let room = s.segments_free.saturating_sub(4) * s.segment_bytes;
        NewKeys {
            next: AtomicU64::new(start),
            end: (start + room / record).min(u32::MAX as u64),
        }
    }
}

/// One operation of the measured phase; `Ok(false)` = wrong answer,
/// `Ok(None)` = no new key left to insert.
#[allow(clippy::too_many_arguments)]
async fn one_op(
    store: &Store,
    ns: Namespace,
    cfg: &EngineConfig,
    new_keys: &NewKeys,
    rng: &mut Rng,
    k: &mut Vec<u8>,
    v: &mut Vec<u8>,
    blocking: bool,
) -> Result<Option<bool>, String> {
    let i = if cfg.op == EngineOp::Insert {
        let i = new_keys.next.fetch_add(1, Ordering::Relaxed);
        if i >= new_keys.end {
            return Ok(None);
        }
        i
    } else {
        rng.below(cfg.keys)
    };
    key(i, k);
    match cfg.op {
        EngineOp::Get => {
            let got = if blocking {
                store.get(ns, k)
            } else {
                store.get_async(ns, k).await
            }
            .map_err(|e| e.to_string())?;
            Ok(Some(
                got.is_some_and(|v| value_is_of(&v, i, cfg.value_bytes)),
            ))
        }
        EngineOp::Put | EngineOp::Insert => {
            next_value(v, i, rng.next_u64() | 1, cfg.value_bytes);
            if blocking {
                store.put(ns, k, v)
            } else {
                store.put_async(ns, k, v).await
            }
            .map_err(|e| e.to_string())?;
            Ok(Some(true))
        }
    }
}

/// A worker's loop: operations one at a time until `stop`.
async fn worker(
    store: Arc<Store>,
    cfg: Arc<EngineConfig>,
    new_keys: Arc<NewKeys>,
    seed: u64,
    stop: Arc<AtomicBool>,
    blocking: bool,
) -> Result<Tally, String> {
    let ns = store.default_namespace();
    let mut rng = Rng::new(seed);
    let mut k = Vec::with_capacity(32);
    let mut v = Vec::new();
    let mut t = Tally::new();
    while !stop.load(Ordering::Relaxed) {
        let start = Instant::now();
        let Some(ok) = one_op(
            &store, ns, &cfg, &new_keys, &mut rng, &mut k, &mut v, blocking,
        )
        .await?
        else {
            // The store is as full as an insert phase may make it.
            stop.store(true, Ordering::Relaxed);
            break;
        };
        let ns_taken = start.elapsed().as_nanos() as u64;
        t.hist.saturating_record(ns_taken.max(1));
        t.ops += 1;
        t.errors += u64::from(!ok);
    }
    Ok(t)
}

/// Runs the measured phase on a loaded store.
pub fn run(store: &Arc<Store>, cfg: &EngineConfig) -> Result<EngineReport, String> {
    assert!(cfg.qd >= 1 && cfg.threads >= 1);
    let cfg = Arc::new(cfg.clone());
    let stop = Arc::new(AtomicBool::new(false));
    let new_keys = Arc::new(NewKeys::for_store(store, &cfg));
    let before = store.stats();
    let start = Instant::now();
    let handles: Vec<std::thread::JoinHandle<Result<Tally, String>>> = match cfg.backend {
        Backend::Sync => (0..cfg.qd)
            .map(|w| {
                let (store, cfg, stop) = (store.clone(), cfg.clone(), stop.clone());
                let new_keys = new_keys.clone();
                std::thread::spawn(move || {
                    let seed = cfg.seed * 7919 + w as u64;
                    uring::run_ready(worker(store, cfg, new_keys, seed, stop, true))
                })
            })
            .collect(),
        Backend::Uring => {
            let threads = cfg.threads.min(cfg.qd);
            (0..threads)
                .map(|th| {
                    let (store, cfg, stop) = (store.clone(), cfg.clone(), stop.clone());
                    let new_keys = new_keys.clone();
                    // Spread qd over the threads: the first qd % threads get one more.
                    let tasks = cfg.qd / threads + usize::from(th < cfg.qd % threads);
                    std::thread::spawn(move || {
                        let rt = Runtime::new().map_err(|e| format!("io_uring setup: {e}"))?;
                        rt.block_on(async {
                            let handles: Vec<_> = (0..tasks)
                                .map(|t| {
                                    let seed = cfg.seed * 7919 + (th * 4096 + t) as u64;
                                    uring::spawn(worker(
                                        store.clone(),
                                        cfg.clone(),
                                        new_keys.clone(),
                                        seed,
                                        stop.clone(),
                                        false,
                                    ))
                                })
                                .collect();
                            let mut all = Tally::new();
                            for h in handles {
                                all.merge(&h.await?);
                            }
                            Ok(all)
                        })
                    })
                })
                .collect()
        }
    };
    // Until the duration is over, or an insert phase ran out of room.
    while start.elapsed() < cfg.duration && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(5).min(cfg.duration));
    }
    stop.store(true, Ordering::Relaxed);
    let mut all = Tally::new();
    let mut first_err = None;
    for h in handles {
        match h.join() {
            Ok(Ok(t)) => all.merge(&t),
            Ok(Err(e)) => first_err = first_err.or(Some(e)),
            Err(_) => first_err = first_err.or(Some("worker panicked".to_string())),
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    if let Some(e) = first_err {
        return Err(e);
    }
    let us = |q: f64| all.hist.value_at_quantile(q) as f64 / 1000.0;
    let after = store.stats();
    let written = after.device_bytes_written - before.device_bytes_written;
    let flushes = after.flushes - before.flushes;
    Ok(EngineReport {
        backend: cfg.backend,
        op: cfg.op,
        qd: cfg.qd,
        threads: match cfg.backend {
            Backend::Sync => cfg.qd,
            Backend::Uring => cfg.threads.min(cfg.qd),
        },
        value_bytes: cfg.value_bytes,
        keys: cfg.keys,
        seconds,
        ops: all.ops,
        ops_per_sec: all.ops as f64 / seconds,
        latency_us: [
            us(0.5),
            us(0.99),
            us(0.999),
            us(0.9999),
            all.hist.max() as f64 / 1000.0,
        ],
        errors: all.errors,
        device_bytes_per_op: written as f64 / all.ops.max(1) as f64,
        ops_per_flush: if flushes == 0 {
            0.0
        } else {
            all.ops as f64 / flushes as f64
        },
    })
}

/// Header of [`table_row`].
pub fn table_header() -> String {
    format!(
        "{:<7}{:<5}{:>5}{:>5}{:>8}{:>12}{:>9}{:>9}{:>9}{:>10}{:>9}",
        "backend",
        "op",
        "qd",
        "thr",
        "value",
        "ops/s",
        "p50us",
        "p99us",
        "p999us",
        "p9999us",
        "errors"
    )
}

/// One human-readable line of a report.
pub fn table_row(r: &EngineReport) -> String {
    format!(
        "{:<7}{:<5}{:>5}{:>5}{:>8}{:>12.0}{:>9.1}{:>9.1}{:>9.1}{:>10.1}{:>9}",
        r.backend.name(),
        r.op.name(),
        r.qd,
        r.threads,
        r.value_bytes,
        r.ops_per_sec,
        r.latency_us[0],
        r.latency_us[1],
        r.latency_us[2],
        r.latency_us[3],
        r.errors
    )
}

/// Reports as a JSON array (numbers and plain names only).
pub fn json(load: &LoadReport, reports: &[EngineReport]) -> String {
    let mut out = String::from("{\n");
    let _ = writeln!(
        out,
        "  \"load\": {{\"keys_written\": {}, \"seconds\": {:.3}}},",
        load.keys_written, load.seconds
    );
    out.push_str("  \"runs\": [\n");
    for (i, r) in reports.iter().enumerate() {
        let _ = write!(
            out,
            "    {{\"backend\": \"{}\", \"op\": \"{}\", \"qd\": {}, \"threads\": {}, \"value_bytes\": {}, \
             \"keys\": {}, \"seconds\": {:.3}, \"ops\": {}, \"ops_per_sec\": {:.1}, \
             \"p50_us\": {:.2}, \"p99_us\": {:.2}, \"p999_us\": {:.2}, \"p9999_us\": {:.2}, \"max_us\": {:.2}, \
             \"errors\": {}, \"device_bytes_per_op\": {:.1}, \"ops_per_flush\": {:.1}}}",
            r.backend.name(),
            r.op.name(),
            r.qd,
            r.threads,
            r.value_bytes,
            r.keys,
            r.seconds,
            r.ops,
            r.ops_per_sec,
            r.latency_us[0],
            r.latency_us[1],
            r.latency_us[2],
            r.latency_us[3],
            r.latency_us[4],
            r.errors,
            r.device_bytes_per_op,
            r.ops_per_flush
        );
        out.push_str(if i + 1 < reports.len() { ",\n" } else { "\n" });
    }
    out.push_str("  ]\n}\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_unique_and_8_to_32_bytes() {
        let mut seen = std::collections::HashSet::new();
        let mut k = Vec::new();
        for i in 0..20_000 {
            key(i, &mut k);
            assert!((8..=32).contains(&k.len()), "{k:?}");
            assert!(seen.insert(k.clone()));
        }
    }

    #[test]
    fn a_small_run_on_both_backends_reads_back_what_it_loaded() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = EngineConfig {
            paths: vec![dir.path().join("store")],
            device_bytes: 64 << 20,
            segment_bytes: 1 << 20,
            grain_bytes: 512,
            backend: Backend::Sync,
            op: EngineOp::Get,
            qd: 4,
            threads: 2,
            value_bytes: 4096,
            keys: 2000,
            duration: Duration::from_millis(200),
            sync_puts: true,
            seed: 1,
        };
        let store = Arc::new(open_store(&cfg).unwrap());
        let l = load(&store, &cfg).unwrap();
        assert_eq!(l.keys_written, 2000);
        assert_eq!(load(&store, &cfg).unwrap().keys_written, 0, "reused");
        for backend in [Backend::Sync, Backend::Uring] {
            for op in [EngineOp::Get, EngineOp::Put] {
                let r = run(
                    &store,
                    &EngineConfig {
                        backend,
                        op,
                        ..cfg.clone()
                    },
                )
                .unwrap();
                assert!(r.ops > 0, "{r:?}");
                assert_eq!(r.errors, 0, "{r:?}");
            }
        }
        let j = json(&l, &[]);
        assert!(j.contains("\"keys_written\": 2000"));
    }

    #[test]
    fn an_insert_phase_adds_new_keys_and_stops_when_the_store_has_no_room() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = EngineConfig {
            paths: vec![dir.path().join("store")],
            device_bytes: 16 << 20,
            segment_bytes: 1 << 20,
            grain_bytes: 512,
            backend: Backend::Uring,
            op: EngineOp::Insert,
            qd: 8,
            threads: 2,
            value_bytes: 4096,
            keys: 100,
            duration: Duration::from_secs(60),
            sync_puts: false,
            seed: 1,
        };
        let store = Arc::new(open_store(&cfg).unwrap());
        load(&store, &cfg).unwrap();
        let room = NewKeys::for_store(&store, &cfg);
        let expected = room.end - 100;
        assert!(expected > 100, "{expected}");
        let r = run(&store, &cfg).unwrap();
        // It ran out of new keys long before the minute was over.
        assert!(r.seconds < 30.0, "{r:?}");
        assert_eq!(r.ops, expected, "{r:?}");
        assert_eq!(store.count(store.default_namespace()), 100 + expected);
        let mut k = Vec::new();
        for i in [100, 100 + expected - 1] {
            key(i, &mut k);
            let v = store.get(store.default_namespace(), &k).unwrap().unwrap();
            assert_eq!(&v[..8], &i.to_le_bytes());
        }
    }
}
