//! Single-thread insert and lookup throughput of the index.
//!
//! `cargo run --release -p nvdepot-index --example throughput -- N [T]`
//! (T: table_entries_log2, default 20; small T keeps the index in cache)
//!
//! Inserts N random fingerprints (lookup first, as the engine does, for
//! `seen`), then looks up N present and N absent fingerprints.

use nvdepot_index::{Expect, Index, IndexConfig, Location};
use rand::{Rng, SeedableRng};
use std::time::Instant;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .map_or(10_000_000, |a| a.parse().expect("N"));
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let fps: Vec<u64> = (0..n).map(|_| Index::fingerprint(rng.gen())).collect();
    let t_log2 = std::env::args()
        .nth(2)
        .map_or(20, |a| a.parse().expect("T"));
    let index = Index::new(IndexConfig {
        table_entries_log2: t_log2,
        ..IndexConfig::default()
    });
    let mut seen = Vec::new();
    let t = Instant::now();
    for (i, &fp) in fps.iter().enumerate() {
        seen.clear();
        index.lookup(fp, &mut seen);
        let loc = Location {
            pba: i as u64,
            grains: 1,
        };
        index
            .insert(fp, loc, Expect::Absent { seen: &seen })
            .unwrap();
    }
    let dt = t.elapsed().as_secs_f64();
    println!(
        "lookup+insert: {:.2} M/s ({:.0} ns each)",
        n as f64 / dt / 1e6,
        dt * 1e9 / n as f64
    );
    index.finish_resize();
    let t = Instant::now();
    let mut found = 0;
    for &fp in &fps {
        seen.clear();
        index.lookup(fp, &mut seen);
        found += seen.len();
    }
    let dt = t.elapsed().as_secs_f64();
    println!(
        "lookup (present): {:.2} M/s ({:.0} ns each)",
        n as f64 / dt / 1e6,
        dt * 1e9 / n as f64
    );
    assert!(found >= n);
    let t = Instant::now();
    for _ in 0..n {
        seen.clear();
        index.lookup(Index::fingerprint(rng.gen()), &mut seen);
    }
    let dt = t.elapsed().as_secs_f64();
    println!(
        "lookup (random): {:.2} M/s ({:.0} ns each)",
        n as f64 / dt / 1e6,
        dt * 1e9 / n as f64
    );
    println!(
        "{} entries, {:.2} B/key",
        index.len(),
        index.memory_bytes() as f64 / index.len() as f64
    );
}
