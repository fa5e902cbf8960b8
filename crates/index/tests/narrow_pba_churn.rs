//! The engine's cache-mode churn on an index with narrow pbas: writers
//! re-insert their keys (Absent) at new locations or replace them, while a
//! collector thread removes entries it finds (as GC eviction does), each
//! key touched by one thread at a time (a lock per key, as the engine's
//! stripes). Every entry a thread put must stay findable until removed.

use nvdepot_index::{Expect, Index, IndexConfig, Location};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

#[test]
fn churn_as_cache_mode_gc() {
    for round in 0..10u64 {
        let index = Index::new(IndexConfig {
            table_entries_log2: 10,
            initial_tables_log2: 0,
            pba_bits: 14,
        });
        let keys: Vec<(u64, Mutex<Option<Location>>)> = (0..3000u32)
            .map(|k| {
                (
                    StdRng::seed_from_u64(round << 32 | u64::from(k)).gen::<u64>(),
                    Mutex::new(None),
                )
            })
            .collect();
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            let (index, keys, stop) = (&index, &keys, &stop);
            let mut writers = Vec::new();
            for t in 0..2u64 {
                writers.push(s.spawn(move || {
                    let mut rng = StdRng::seed_from_u64(round * 7 + t);
                    for i in 0..40_000u32 {
                        let k = ((i * 2 + t as u32) % 3000) as usize;
                        let (fp, slot) = &keys[k];
                        let mut at = slot.lock().unwrap();
                        let new = Location {
                            pba: rng.gen_range(0..12_288),
                            grains: rng.gen_range(1..3),
                        };
                        match *at {
                            Some(old) if old != new => {
                                index
                                    .insert(*fp, new, Expect::Replace(old))
                                    .expect("replace");
                            }
                            Some(_) => continue,
                            None => {
                                let mut seen = Vec::new();
                                index.lookup(*fp, &mut seen);
                                index
                                    .insert(*fp, new, Expect::Absent { seen: &seen })
                                    .expect("insert");
                            }
                        }
                        *at = Some(new);
                        let mut v = Vec::new();
                        index.lookup(*fp, &mut v);
                        assert!(
                            v.contains(&new),
                            "round {round}: {fp:x} at {new:?} not found right after: {v:?}"
                        );
                    }
                }));
            }
            s.spawn(move || {
                let mut rng = StdRng::seed_from_u64(round);
                while !stop.load(Ordering::Relaxed) {
                    let k = rng.gen_range(0..3000);
                    let (fp, slot) = &keys[k];
                    let mut at = slot.lock().unwrap();
                    if let Some(old) = *at {
                        assert!(index.remove(*fp, old), "remove {fp:x} {old:?}");
                        *at = None;
                    }
                }
            });
            for w in writers {
                w.join().unwrap();
            }
            stop.store(true, Ordering::Relaxed);
        });
        for (fp, slot) in &keys {
            if let Some(l) = *slot.lock().unwrap() {
                let mut v = Vec::new();
                index.lookup(*fp, &mut v);
                assert!(
                    v.contains(&l),
                    "round {round} end: {fp:x} at {l:?} lost: {v:?}"
                );
            }
        }
    }
}
