//! Memory and insert latency of the index as it grows.
//!
//! `cargo run --release -p nvdepot-index --example memory_curve -- N [SEED] [nobg]`
//!
//! `nobg` turns the background resize helper off (operations then migrate
//! every region themselves).
//!
//! Inserts N random fingerprints with fake locations into a default index
//! (2^20-entry tables, one table at the start) and prints, at each grow and
//! every 1M keys: keys, tables, occupancy, memory_bytes per key and the max
//! insert latency since the previous line; then insert latency percentiles.
//! The insert is timed alone (the lookup that gathers `seen` is not).

use nvdepot_index::{Expect, Index, IndexConfig, Location};
use rand::{Rng, SeedableRng};
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args
        .next()
        .map_or(20_000_000, |a| a.parse().expect("N: number of keys"));
    let seed: u64 = args
        .next()
        .map_or_else(rand::random, |a| a.parse().expect("SEED: u64"));
    println!("memory_curve: N={n} seed={seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let config = IndexConfig::default();
    let index = Index::new(config);
    let background = args.next().as_deref() != Some("nobg");
    index.set_background_resize(background);
    println!("background resize helper: {background}");
    let table_entries = 1usize << config.table_entries_log2;
    let mut lat_ns: Vec<u32> = Vec::with_capacity(n);
    let mut seen = Vec::new();
    let mut max_ns = 0u64;
    let mut max_bytes_per_key_after_first_grow = 0f64;
    let mut fullest: Vec<f64> = Vec::new();
    let mut grown = false;
    println!(
        "{:>10} {:>6} {:>9} {:>9} {:>12}  event",
        "keys", "tables", "occupancy", "B/key", "max_ins_us"
    );
    let line = |event: &str, keys: usize, max_ns: u64, index: &Index| {
        let tables = 1usize << index.geometry().tables_log2;
        let bytes = index.memory_bytes();
        println!(
            "{keys:>10} {tables:>6} {:>9.4} {:>9.3} {:>12.1}  {event}",
            keys as f64 / (tables * table_entries) as f64,
            bytes as f64 / keys.max(1) as f64,
            max_ns as f64 / 1000.0,
        );
    };
    let t0 = Instant::now();
    let mut was_resizing = false;
    let mut tables_log2 = index.geometry().tables_log2;
    // The fullest point of a generation is where memory per key is lowest:
    // keys only grow, and memory only jumps when a resize allocates.
    let mut epoch_min = (f64::MAX, 0usize, 0f64);
    for i in 0..n {
        let fp = Index::fingerprint(rng.gen());
        let loc = Location {
            pba: i as u64,
            grains: 1 + (i % 2047) as u16,
        };
        seen.clear();
        index.lookup(fp, &mut seen);
        if i > 0 {
            let tables = 1usize << tables_log2;
            let per_key = index.memory_bytes() as f64 / i as f64;
            if per_key < epoch_min.0 {
                epoch_min = (per_key, i, i as f64 / (tables * table_entries) as f64);
            }
        }
        let start = Instant::now();
        index
            .insert(fp, loc, Expect::Absent { seen: &seen })
            .expect("insert");
        let ns = start.elapsed().as_nanos() as u64;
        lat_ns.push(ns.min(u32::MAX as u64) as u32);
        max_ns = max_ns.max(ns);
        let resizing = index.resize_in_progress();
        if resizing && !was_resizing {
            line(
                "resize started (helper or this insert)",
                i + 1,
                max_ns,
                &index,
            );
            grown = true;
        }
        was_resizing = resizing;
        let now_log2 = index.geometry().tables_log2;
        if now_log2 != tables_log2 {
            let (per_key, keys, occupancy) = epoch_min;
            fullest.push(per_key);
            println!(
                "{keys:>10} {:>6} {occupancy:>9.4} {per_key:>9.3} {:>12}  fullest point before that resize",
                1usize << tables_log2,
                "",
            );
            line("resize done", i + 1, max_ns, &index);
            tables_log2 = now_log2;
            epoch_min = (f64::MAX, 0, 0.0);
        }
        if grown && i % 4096 == 0 {
            let per_key = index.memory_bytes() as f64 / (i + 1) as f64;
            max_bytes_per_key_after_first_grow = max_bytes_per_key_after_first_grow.max(per_key);
        }
        if (i + 1) % 1_000_000 == 0 {
            let event = if index.resize_in_progress() {
                "resizing"
            } else {
                ""
            };
            line(event, i + 1, max_ns, &index);
            max_ns = 0;
        }
    }
    let elapsed = t0.elapsed();
    index.finish_resize();
    line("end (after finish_resize)", n, max_ns, &index);
    let t = Instant::now();
    let len = index.len();
    println!("len() = {len} in {:.1} us", t.elapsed().as_secs_f64() * 1e6);
    assert_eq!(len, n);
    lat_ns.sort_unstable();
    let pct =
        |p: f64| lat_ns[((lat_ns.len() as f64 * p) as usize).min(lat_ns.len() - 1)] as f64 / 1000.0;
    println!(
        "insert latency us: p50 {:.3}  p99 {:.3}  p99.9 {:.3}  p99.99 {:.3}  max {:.1}",
        pct(0.5),
        pct(0.99),
        pct(0.999),
        pct(0.9999),
        *lat_ns.last().unwrap() as f64 / 1000.0
    );
    let over = |us: u32| {
        lat_ns
            .iter()
            .rev()
            .take_while(|&&ns| ns > us * 1000)
            .count()
    };
    println!(
        "inserts over 100 us: {}, over 1 ms: {}, over 2 ms: {}",
        over(100),
        over(1000),
        over(2000)
    );
    println!(
        "{n} lookups+inserts in {:.2} s ({:.2} M/s)",
        elapsed.as_secs_f64(),
        n as f64 / elapsed.as_secs_f64() / 1e6
    );
    // Machine hiccups (preemption, VM steal) hit any code: time an empty
    // section for as long as the inserts ran, for comparison.
    let mut hiccups = [0usize; 3];
    let mut worst = 0u64;
    let t1 = Instant::now();
    let mut i = 0u64;
    while t1.elapsed() < elapsed {
        i += 1;
        let start = Instant::now();
        std::hint::black_box(i);
        let ns = start.elapsed().as_nanos() as u64;
        worst = worst.max(ns);
        for (h, limit) in hiccups.iter_mut().zip([100_000, 1_000_000, 2_000_000]) {
            *h += (ns > limit) as usize;
        }
    }
    println!(
        "baseline (empty timed section, {:.1} s): over 100 us: {}, over 1 ms: {}, over 2 ms: {}, max {:.1} us",
        elapsed.as_secs_f64(),
        hiccups[0],
        hiccups[1],
        hiccups[2],
        worst as f64 / 1000.0
    );
    let worst_fullest = fullest.iter().cloned().fold(0.0, f64::max);
    println!("B/key at the fullest point before each grow: {fullest:.3?} (max {worst_fullest:.3})");
    println!("max B/key after the first grow (sampled every 4096 inserts): {max_bytes_per_key_after_first_grow:.3}");
}
