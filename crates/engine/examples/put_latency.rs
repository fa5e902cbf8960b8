//! Concurrent upserts of existing keys: throughput and mean latency, to see
//! what a memcache `set` costs in the engine.
//! `put_latency DIR THREADS SECONDS [sync]`

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nvdepot_engine::{Options, Store};
use rand::{Rng, SeedableRng};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a: Vec<String> = std::env::args().collect();
    let (dir, threads, secs) = (&a[1], a[2].parse::<u64>()?, a[3].parse::<u64>()?);
    let sync = a.get(4).is_some_and(|s| s == "sync");
    let opts = Options {
        sync,
        cache_mode: true,
        ..Options::default()
    }
    .create_bytes(2 << 30);
    let store = Arc::new(Store::open(dir.as_ref(), &opts)?);
    let ns = store.default_namespace();
    let keys = 20_000u64;
    let value = vec![1u8; 1024];
    for i in 0..keys {
        store.put(ns, format!("key:{i:010}").as_bytes(), &value)?;
    }
    let ops = AtomicU64::new(0);
    let nanos = AtomicU64::new(0);
    let end = Instant::now() + Duration::from_secs(secs);
    std::thread::scope(|s| {
        for t in 0..threads {
            let (store, ops, nanos, value) = (&store, &ops, &nanos, &value);
            s.spawn(move || {
                let mut rng = rand::rngs::StdRng::seed_from_u64(t);
                while Instant::now() < end {
                    let k = if std::env::var_os("FRESH").is_some() {
                        format!("new:{:016x}", rng.gen::<u64>())
                    } else {
                        format!("key:{:010}", rng.gen_range(0..keys))
                    };
                    let t0 = Instant::now();
                    store.put(ns, k.as_bytes(), value).expect("put");
                    nanos.fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
                    ops.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
    });
    let n = ops.load(Ordering::Relaxed);
    println!(
        "threads {threads} sync {sync}: {:.0} puts/s, mean {:.0} us",
        n as f64 / secs as f64,
        nanos.load(Ordering::Relaxed) as f64 / n as f64 / 1000.0
    );
    Ok(())
}
