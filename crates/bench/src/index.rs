//! `bench index`: the nvdepot index against general-purpose concurrent hash
//! maps, after uDepot's Fig. 5 (FAST'19, `shared/papers/000`): inserts and
//! lookups per second with every key fitting a pre-sized table ("no grow")
//! and with a table that must double several times during the load
//! ("grows"), latency percentiles of both operations (Fig. 5c), and DRAM
//! bytes per key.
//!
//! Like for like: a key is a 64-bit hash (what the engine hands the index)
//! and its value is the 8-byte location. The competitors are
//! - `dashmap`: `DashMap<u64, u64>` (sharded RwLocks over hashbrown tables,
//!   its default shard count);
//! - `hashbrown+rwlock`: one `parking_lot::RwLock<hashbrown::HashMap<u64,
//!   u64>>`, a single lock, as the issue names it (lookups take it shared).
//!
//! Both get a pass-through hasher: the keys already are uniform hashes, so
//! hashing them again would only slow the competitors down.
//!
//! A run is one (structure, scenario, thread count): `threads` threads
//! insert disjoint ranges of `keys` keys, then look each of their keys up
//! once. Throughput is wall time from a common start to the last thread's
//! end; for nvdepot it includes finishing a resize still in flight, so
//! deferred migration is not left out of the insert rate. One operation in
//! `latency_sample` is timed (`Instant`, ~20 ns on a TSC clock), so every
//! structure pays the same small timing overhead.

mod probe;
pub mod report;
mod tables;

use std::sync::Barrier;
use std::time::Instant;

use dashmap::DashMap;
use hdrhistogram::Histogram;
use nvdepot_index::PBA_MAX;
use parking_lot::RwLock;

pub use tables::{Identity, PREFETCH_BATCH};
use tables::{NvdepotTable, PassThrough, Table};

use crate::rng::splitmix64;
use crate::BenchError;

/// Which table is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Structure {
    Nvdepot,
    /// nvdepot's index driven in batches: the fingerprints of
    /// [`PREFETCH_BATCH`] operations are prefetched (`Index::prefetch`)
    /// before the operations run, as a multi-get does in the engine.
    NvdepotPrefetch,
    DashMap,
    HashbrownRwLock,
    /// Not an index: the bound any table with uDepot's 32-slot
    /// neighbourhoods meets on this machine (`index/probe.rs`).
    ProbeBound,
}

impl Structure {
    pub const ALL: [Structure; 5] = [
        Structure::Nvdepot,
        Structure::NvdepotPrefetch,
        Structure::DashMap,
        Structure::HashbrownRwLock,
        Structure::ProbeBound,
    ];

    /// The structure of this [`Structure::name`], if any.
    pub fn from_name(name: &str) -> Option<Structure> {
        Structure::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Not nvdepot's index: dashmap, hashbrown+rwlock, and the bound
    /// (which means something only next to dashmap).
    pub fn is_competitor(self) -> bool {
        !matches!(self, Structure::Nvdepot | Structure::NvdepotPrefetch)
    }

    pub fn name(self) -> &'static str {
        match self {
            Structure::Nvdepot => "nvdepot",
            Structure::NvdepotPrefetch => "nvdepot-prefetch",
            Structure::DashMap => "dashmap",
            Structure::HashbrownRwLock => "hashbrown+rwlock",
            Structure::ProbeBound => "h32-probe",
        }
    }
}

/// How the table is sized before the load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// Sized for every key up front: no grow during the load.
    Presized,
    /// Sized for `keys / 2^grows`, so the load doubles it `grows` times.
    Grows(u32),
}

impl Scenario {
    pub fn name(self) -> String {
        match self {
            Scenario::Presized => "no-grow".to_owned(),
            Scenario::Grows(n) => format!("grows-{n}"),
        }
    }
}

/// What to measure.
#[derive(Debug, Clone)]
pub struct IndexBenchConfig {
    /// Keys inserted (then looked up) per run.
    pub keys: u64,
    /// Thread counts; each gets its own runs.
    pub threads: Vec<usize>,
    /// Run the pre-sized scenario.
    pub presized: bool,
    /// Doublings wanted in the grow scenario (0: do not run it).
    pub grows: u32,
    /// Also measure dashmap and hashbrown+rwlock.
    pub competitors: bool,
    /// Measure only these (empty: every structure `competitors` allows);
    /// to profile one of them alone.
    pub only: Vec<Structure>,
    /// Time one operation in this many (a power of two; 1 = all).
    pub latency_sample: u64,
    /// Repetitions of the whole set of runs.
    pub repeats: u32,
    /// Key stream seed.
    pub seed: u64,
}

impl Default for IndexBenchConfig {
    fn default() -> Self {
        IndexBenchConfig {
            keys: 50_000_000,
            threads: vec![1, 2],
            presized: true,
            grows: 4,
            competitors: true,
            only: Vec::new(),
            latency_sample: 8,
            repeats: 1,
            seed: 1,
        }
    }
}

impl IndexBenchConfig {
    fn check(&self) -> Result<(), BenchError> {
        let bad = |m: String| Err(BenchError::Config(m));
        if self.keys == 0 || self.keys > PBA_MAX {
            return bad(format!("keys must be in 1..={PBA_MAX}, not {}", self.keys));
        }
        if self.threads.is_empty() || self.threads.iter().any(|&t| t == 0 || t > 1024) {
            return bad(format!(
                "thread counts must be 1..=1024: {:?}",
                self.threads
            ));
        }
        if !self.latency_sample.is_power_of_two() {
            return bad(format!(
                "latency sample must be a power of two, not {}",
                self.latency_sample
            ));
        }
        if !self.presized && self.grows == 0 {
            return bad("no scenario left to run".to_owned());
        }
        if self.grows > 0 {
            nvdepot_geometry(self.keys, self.grows).map_err(BenchError::Config)?;
        }
        Ok(())
    }

    pub fn scenarios(&self) -> Vec<Scenario> {
        let mut out = Vec::new();
        if self.presized {
            out.push(Scenario::Presized);
        }
        if self.grows > 0 {
            out.push(Scenario::Grows(self.grows));
        }
        out
    }

    pub fn structures(&self) -> Vec<Structure> {
        Structure::ALL
            .into_iter()
            .filter(|s| self.competitors || !s.is_competitor())
            .filter(|s| self.only.is_empty() || self.only.contains(s))
            .collect()
    }
}

/// Latency percentiles of one operation kind, in nanoseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Latency {
    /// Operations timed.
    pub count: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub p9999_ns: u64,
    pub max_ns: u64,
}

impl Latency {
    fn of(h: &Histogram<u64>) -> Latency {
        if h.is_empty() {
            return Latency::default();
        }
        Latency {
            count: h.len(),
            p50_ns: h.value_at_quantile(0.50),
            p99_ns: h.value_at_quantile(0.99),
            p999_ns: h.value_at_quantile(0.999),
            p9999_ns: h.value_at_quantile(0.9999),
            max_ns: h.max(),
        }
    }
}

/// One phase (all inserts, or all lookups) of a run.
#[derive(Debug, Clone, Copy, Default)]
pub struct Phase {
    pub ops: u64,
    pub seconds: f64,
    pub latency: Latency,
}

impl Phase {
    /// Million operations per second per thread: the headline figure.
    pub fn mops_per_thread(&self, threads: usize) -> f64 {
        self.ops as f64 / self.seconds.max(1e-9) / 1e6 / threads as f64
    }
}

/// One measured (structure, scenario, threads, repetition).
#[derive(Debug, Clone)]
pub struct Run {
    pub structure: Structure,
    pub scenario: Scenario,
    pub threads: usize,
    pub repetition: u32,
    pub insert: Phase,
    pub lookup: Phase,
    /// Doublings that happened during the inserts.
    pub grows: u32,
    /// nvdepot: `Index::memory_bytes() / len`; the others: bucket-array
    /// arithmetic from `capacity()` (17 B per bucket, 7/8 max load).
    pub bytes_per_key: f64,
    /// The lowest `bytes / len` seen during the inserts (sampled by the
    /// first thread every 65536 of its inserts, and at the end): for a
    /// growing table, its fullest point before a grow.
    pub min_bytes_per_key: f64,
    /// Resident set growth from before the table was built to after the
    /// inserts (with freed memory handed back first), per key.
    pub rss_bytes_per_key: f64,
    /// nvdepot inserts that met an entry with the same fingerprint (as far
    /// as the index keeps it: 8 + table_entries_log2 bits) and had to look
    /// it up and retry, as the engine would after reading
    /// that record.
    pub fingerprint_conflicts: u64,
}

/// Every run, in the order they were made.
#[derive(Debug, Clone)]
pub struct IndexReport {
    pub config: IndexBenchConfig,
    pub runs: Vec<Run>,
}

/// Runs the benchmark; `progress` sees each run as it ends.
pub fn run(
    config: &IndexBenchConfig,
    mut progress: impl FnMut(&Run),
) -> Result<IndexReport, BenchError> {
    config.check()?;
    let mut runs = Vec::new();
    // Structures alternate inside each (scenario, threads) so that a burst
    // of load from elsewhere on the machine hits all of them alike.
    for repetition in 0..config.repeats {
        for scenario in config.scenarios() {
            for &threads in &config.threads {
                for structure in config.structures() {
                    let run = run_one(config, structure, scenario, threads, repetition)?;
                    progress(&run);
                    runs.push(run);
                }
            }
        }
    }
    Ok(IndexReport {
        config: config.clone(),
        runs,
    })
}

fn run_one(
    config: &IndexBenchConfig,
    structure: Structure,
    scenario: Scenario,
    threads: usize,
    repetition: u32,
) -> Result<Run, BenchError> {
    let keys = config.keys;
    let grows_wanted = match scenario {
        Scenario::Presized => 0,
        Scenario::Grows(n) => n,
    };
    // The competitors start sized for the key count halved `n` times.
    let start_keys = (keys >> grows_wanted).max(1) as usize;
    let env = RunEnv {
        keys,
        threads,
        seed: config.seed,
        sample_mask: config.latency_sample - 1,
    };
    let (m, grows) = match structure {
        Structure::Nvdepot | Structure::NvdepotPrefetch => {
            let batch = if structure == Structure::NvdepotPrefetch {
                PREFETCH_BATCH
            } else {
                1
            };
            let (t, d) = nvdepot_geometry(keys, grows_wanted).map_err(BenchError::Config)?;
            let m = measure(&env, || Ok(NvdepotTable::new(t, d, keys, batch)))?;
            let grows = m.table.index.geometry().tables_log2 - d;
            (m.erase(), grows)
        }
        Structure::ProbeBound => {
            // The slots nvdepot's pre-sized index gets; a bound does not
            // grow, so the grow scenario measures the same table.
            let (t, d) = nvdepot_geometry(keys, 0).map_err(BenchError::Config)?;
            let homes = 1usize << (t + d);
            let m = measure(&env, || {
                probe::ProbeBound::new(homes, PREFETCH_BATCH).map_err(|e| {
                    BenchError::Config(format!("cannot map {} MiB for h32-probe: {e}", homes >> 17))
                })
            })?;
            (m.erase(), 0)
        }
        Structure::DashMap => {
            let new = || DashMap::with_capacity_and_hasher(start_keys, PassThrough::default());
            let start = Table::bytes_and_len(&new()).0;
            let m = measure(&env, || Ok(new()))?;
            let grows = doublings(start, m.table.bytes_and_len().0);
            (m.erase(), grows)
        }
        Structure::HashbrownRwLock => {
            let new = || {
                RwLock::new(hashbrown::HashMap::with_capacity_and_hasher(
                    start_keys,
                    PassThrough::default(),
                ))
            };
            let start = new().bytes_and_len().0;
            let m = measure(&env, || Ok(new()))?;
            let grows = doublings(start, m.table.bytes_and_len().0);
            (m.erase(), grows)
        }
    };
    let per_key = |bytes: usize| bytes as f64 / keys as f64;
    Ok(Run {
        structure,
        scenario,
        threads,
        repetition,
        insert: m.insert,
        lookup: m.lookup,
        grows,
        bytes_per_key: per_key(m.bytes),
        // A table that keeps no entry count (`h32-probe`) is never sampled
        // during the load: its memory is fixed, so it is its end figure.
        min_bytes_per_key: if m.min_bytes_per_key.is_finite() {
            m.min_bytes_per_key
        } else {
            per_key(m.bytes)
        },
        rss_bytes_per_key: per_key(m.rss as usize),
        fingerprint_conflicts: m.conflicts,
    })
}

/// The nvdepot geometry `(table_entries_log2, tables_log2)` whose tables
/// hold `keys` at ≤ 90 % occupancy (the index grows at 92 %) after `grows`
/// doublings. Tables keep the engine's default 2^20 entries while that is
/// possible.
pub fn nvdepot_geometry(keys: u64, grows: u32) -> Result<(u32, u32), String> {
    const TABLE_LOG2: u32 = 20;
    const TABLES_LOG2_MAX: u32 = 8;
    let needed = keys.saturating_mul(10).div_ceil(9);
    let final_log2 = needed.next_power_of_two().trailing_zeros().max(10);
    let start_log2 = final_log2
        .checked_sub(grows)
        .filter(|&s| s >= 10)
        .ok_or_else(|| {
            format!("{keys} keys are too few for {grows} grows of the index (tables of >= 2^10)")
        })?;
    if grows > TABLES_LOG2_MAX {
        return Err(format!("the index doubles at most {TABLES_LOG2_MAX} times"));
    }
    let tables_log2 = start_log2
        .saturating_sub(TABLE_LOG2)
        .min(TABLES_LOG2_MAX - grows);
    let table_log2 = start_log2 - tables_log2;
    if table_log2 > 27 {
        return Err(format!("{keys} keys are too many for the index"));
    }
    Ok((table_log2, tables_log2))
}

/// `log2(end / start)`, rounded: how many times a table doubled.
fn doublings(start: usize, end: usize) -> u32 {
    ((end.max(1) as f64 / start.max(1) as f64).log2().round()).max(0.0) as u32
}

struct RunEnv {
    keys: u64,
    threads: usize,
    seed: u64,
    sample_mask: u64,
}

impl RunEnv {
    /// Key number `i`: SplitMix64 is a bijection, so keys are distinct.
    fn key(&self, i: u64) -> u64 {
        splitmix64(self.seed.wrapping_mul(1 << 40).wrapping_add(i))
    }

    /// The key numbers of thread `t`.
    fn range(&self, t: usize) -> std::ops::Range<u64> {
        let per = self.keys.div_ceil(self.threads as u64);
        (per * t as u64).min(self.keys)..(per * (t as u64 + 1)).min(self.keys)
    }
}

struct Measured<T> {
    table: T,
    insert: Phase,
    lookup: Phase,
    bytes: usize,
    min_bytes_per_key: f64,
    rss: u64,
    conflicts: u64,
}

impl<T> Measured<T> {
    /// The numbers without the table, which is dropped here.
    fn erase(self) -> Measured<()> {
        Measured {
            table: (),
            insert: self.insert,
            lookup: self.lookup,
            bytes: self.bytes,
            min_bytes_per_key: self.min_bytes_per_key,
            rss: self.rss,
            conflicts: self.conflicts,
        }
    }
}

/// Builds the table, then times the insert phase and the lookup phase.
fn measure<T: Table>(
    env: &RunEnv,
    build: impl FnOnce() -> Result<T, BenchError>,
) -> Result<Measured<T>, BenchError> {
    let mut hists: Vec<_> = (0..env.threads).map(|_| histogram()).collect();
    release_free_memory();
    let rss_before = rss_bytes()?;
    let table = build()?;
    let min_per_key = parking_lot::Mutex::new(f64::INFINITY);
    let sample_memory = || {
        let (bytes, len) = table.bytes_and_len();
        if len > 0 {
            let mut min = min_per_key.lock();
            *min = min.min(bytes as f64 / len as f64);
        }
    };
    let (mut insert, conflicts) = phase(env, &mut hists, |range, hist| {
        let mut scratch = Vec::new();
        let mut conflicts = 0;
        let first = range.start == 0;
        for_each_batch(&table, env, range, |i, key| {
            if first && i & 0xffff == 0xffff {
                sample_memory();
            }
            if i & env.sample_mask == 0 {
                let start = Instant::now();
                conflicts += table.insert(key, i, &mut scratch);
                record(hist, start);
            } else {
                conflicts += table.insert(key, i, &mut scratch);
            }
        });
        conflicts
    });
    // A resize still in flight is part of the cost of the inserts.
    let settle = Instant::now();
    table.settle();
    insert.seconds += settle.elapsed().as_secs_f64();
    sample_memory();
    let bytes = table.bytes_and_len().0;
    release_free_memory();
    let rss = rss_bytes()?.saturating_sub(rss_before);
    for h in &mut hists {
        h.reset();
    }
    let (lookup, misses) = phase(env, &mut hists, |range, hist| {
        let mut scratch = Vec::new();
        let mut misses = 0;
        for_each_batch(&table, env, range, |i, key| {
            let hit = if i & env.sample_mask == 0 {
                let start = Instant::now();
                let hit = table.lookup(key, i, &mut scratch);
                record(hist, start);
                hit
            } else {
                table.lookup(key, i, &mut scratch)
            };
            misses += u64::from(!hit);
        });
        misses
    });
    if misses > 0 {
        // A table that loses keys is a bug, not a result.
        return Err(BenchError::Config(format!(
            "{misses} of {} keys not found after inserting them",
            env.keys
        )));
    }
    let min_bytes_per_key = *min_per_key.lock();
    Ok(Measured {
        table,
        insert,
        lookup,
        bytes,
        min_bytes_per_key,
        rss,
        conflicts,
    })
}

/// Calls `op(i, key)` for the key numbers of `range` in order; for a
/// table that batches, first prefetches each batch's keys. (A rolling
/// window, each key prefetched `batch` operations ahead, was tried: the
/// probe gained 28 % and nvdepot's index lost 10-23 %, its region lock's
/// atomic waiting for the prefetches just issued; bench/results/index.md.)
#[inline]
fn for_each_batch<T: Table>(
    table: &T,
    env: &RunEnv,
    range: std::ops::Range<u64>,
    mut op: impl FnMut(u64, u64),
) {
    let batch = table.batch() as u64;
    if batch <= 1 {
        for i in range {
            op(i, env.key(i));
        }
        return;
    }
    assert!(
        batch <= PREFETCH_BATCH as u64,
        "batch {batch} over the key buffer"
    );
    let mut keys = [0u64; PREFETCH_BATCH];
    let mut start = range.start;
    while start < range.end {
        let end = (start + batch).min(range.end);
        for (slot, i) in keys.iter_mut().zip(start..end) {
            *slot = env.key(i);
            table.prefetch(*slot);
        }
        for (&key, i) in keys.iter().zip(start..end) {
            op(i, key);
        }
        start = end;
    }
}

/// Runs `work` on every thread from a common start; returns the phase and
/// the sum of what the threads returned.
fn phase<F>(env: &RunEnv, hists: &mut [Histogram<u64>], work: F) -> (Phase, u64)
where
    F: Fn(std::ops::Range<u64>, &mut Histogram<u64>) -> u64 + Sync,
{
    let barrier = Barrier::new(env.threads + 1);
    let (seconds, total) = std::thread::scope(|s| {
        let handles: Vec<_> = hists
            .iter_mut()
            .enumerate()
            .map(|(t, hist)| {
                let (barrier, work) = (&barrier, &work);
                let range = env.range(t);
                s.spawn(move || {
                    barrier.wait();
                    work(range, hist)
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        let total: u64 = handles
            .into_iter()
            .map(|h| h.join().expect("benchmark thread panicked"))
            .sum();
        (start.elapsed().as_secs_f64(), total)
    });
    let mut all = histogram();
    for h in hists.iter() {
        all.add(h).expect("same histogram bounds");
    }
    let phase = Phase {
        ops: env.keys,
        seconds,
        latency: Latency::of(&all),
    };
    (phase, total)
}

/// Nanoseconds, 3 significant digits, up to 100 s.
fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("valid histogram bounds")
}

#[inline]
fn record(hist: &mut Histogram<u64>, start: Instant) {
    let ns = start.elapsed().as_nanos() as u64;
    hist.saturating_record(ns.max(1));
}

/// The process's resident set in bytes (`/proc/self/statm`).
fn rss_bytes() -> Result<u64, BenchError> {
    let io = |source| BenchError::Io {
        op: "reading /proc/self/statm",
        source,
    };
    let text = std::fs::read_to_string("/proc/self/statm").map_err(io)?;
    let pages: u64 = text
        .split_whitespace()
        .nth(1)
        .and_then(|f| f.parse().ok())
        .ok_or_else(|| BenchError::Config(format!("unexpected /proc/self/statm: {text:?}")))?;
    // SAFETY: sysconf only reads a system constant.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Ok(pages * page.max(1) as u64)
}

/// Hands memory freed by earlier runs (and by a table's own grows) back to
/// the kernel, so the RSS delta counts what the table holds, not what the
/// allocator kept.
fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free heap pages; no pointer is
    // touched.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geometry() {
        // 50 M keys need 2^26 entries: 64 tables of 2^20.
        assert_eq!(nvdepot_geometry(50_000_000, 0), Ok((20, 6)));
        assert_eq!(nvdepot_geometry(50_000_000, 4), Ok((20, 2)));
        assert_eq!(nvdepot_geometry(50_000_000, 6), Ok((20, 0)));
        assert_eq!(nvdepot_geometry(50_000_000, 8), Ok((18, 0)));
        assert_eq!(nvdepot_geometry(200_000, 4), Ok((14, 0)));
        assert!(nvdepot_geometry(1000, 4).is_err());
        assert!(nvdepot_geometry(1 << 40, 0).is_err());
    }

    #[test]
    fn hashbrown_arithmetic() {
        let map = hashbrown::HashMap::<u64, u64, PassThrough>::with_capacity_and_hasher(
            1000,
            PassThrough::default(),
        );
        // 1000 * 8/7 rounds up to 2048 buckets.
        assert_eq!(tables::hashbrown_bytes(map.capacity()), 2048 * 17 + 16);
        assert_eq!(doublings(map.capacity(), map.capacity() * 16 + 15), 4);
    }

    #[test]
    fn only_filters_the_structures() {
        let config = IndexBenchConfig {
            only: vec![Structure::NvdepotPrefetch, Structure::DashMap],
            ..IndexBenchConfig::default()
        };
        assert_eq!(
            config.structures(),
            [Structure::NvdepotPrefetch, Structure::DashMap]
        );
        let config = IndexBenchConfig {
            competitors: false,
            ..config
        };
        assert_eq!(config.structures(), [Structure::NvdepotPrefetch]);
        assert_eq!(
            Structure::from_name("hashbrown+rwlock"),
            Some(Structure::HashbrownRwLock)
        );
        assert_eq!(Structure::from_name("btree"), None);
    }

    #[test]
    fn small_run_finds_every_key() {
        let config = IndexBenchConfig {
            keys: 20_000,
            threads: vec![1, 2],
            grows: 3,
            latency_sample: 1,
            ..IndexBenchConfig::default()
        };
        let report = run(&config, |_| {}).unwrap();
        // Scenarios x thread counts x structures (two nvdepot variants,
        // two competitors, the bound).
        assert_eq!(report.runs.len(), 2 * 2 * 5);
        let json = report::json(&report);
        assert_eq!(json.matches("\"repetition\":").count(), 20);
        assert!(json.contains(
            "{\"structure\": \"nvdepot-prefetch\", \"scenario\": \"grows-3\", \"threads\": 2, \"insert\": "
        ));
        let line = report::ratio_line(&report);
        assert!(line.starts_with("ratio vs_dashmap="), "{line}");
        assert!(!line.contains("n/a"), "{line}");
        assert!(report::goals(&report).ends_with(&format!("{line}\n")));
        for r in &report.runs {
            assert_eq!(r.insert.ops, 20_000);
            assert_eq!(r.insert.latency.count, 20_000);
            assert!(r.min_bytes_per_key.is_finite(), "{r:?}");
            if r.structure == Structure::ProbeBound {
                assert_eq!(r.grows, 0, "a bound does not grow: {r:?}");
            } else if let Scenario::Grows(_) = r.scenario {
                assert!(r.grows >= 3, "{r:?}");
            } else {
                assert_eq!(r.grows, 0, "{r:?}");
            }
        }
    }
}
