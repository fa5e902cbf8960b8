//! Concurrent writers on an index whose pba field is narrow (the rest of
//! the field holds fingerprint bits, as the engine configures a small
//! store): every key's entry must stay findable under its fingerprint.

use nvdepot_index::{Expect, Index, IndexConfig, Location};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[test]
fn entries_survive_concurrent_writes_with_narrow_pbas() {
    for round in 0..20u64 {
        let index = Index::new(IndexConfig {
            table_entries_log2: 10,
            initial_tables_log2: 0,
            pba_bits: 14,
        });
        index.set_background_resize(true);
        std::thread::scope(|s| {
            for t in 0..3u64 {
                let index = &index;
                s.spawn(move || {
                    let mut rng = StdRng::seed_from_u64(round * 10 + t);
                    let keys: Vec<u64> = (0..1500).map(|_| rng.gen()).collect();
                    let mut at: Vec<Option<Location>> = vec![None; keys.len()];
                    for _ in 0..60_000 {
                        let i = rng.gen_range(0..keys.len());
                        let fp = keys[i];
                        let new = Location {
                            pba: rng.gen_range(0..16_000),
                            grains: rng.gen_range(1..3),
                        };
                        match (at[i], rng.gen_range(0..4)) {
                            (Some(old), 0) => {
                                assert!(index.remove(fp, old), "remove {fp:x} {old:?}");
                                at[i] = None;
                            }
                            (Some(old), _) => {
                                if old == new {
                                    continue;
                                }
                                index
                                    .insert(fp, new, Expect::Replace(old))
                                    .unwrap_or_else(|e| panic!("replace {fp:x} {old:?}: {e:?}"));
                                at[i] = Some(new);
                            }
                            (None, _) => {
                                let mut seen = Vec::new();
                                index.lookup(fp, &mut seen);
                                index
                                    .insert(fp, new, Expect::Absent { seen: &seen })
                                    .unwrap_or_else(|e| panic!("insert {fp:x}: {e:?}"));
                                at[i] = Some(new);
                            }
                        }
                        if let Some(l) = at[i] {
                            let mut v = Vec::new();
                            index.lookup(fp, &mut v);
                            assert!(
                                v.contains(&l),
                                "round {round}: {fp:x} at {l:?} not found: {v:?}"
                            );
                        }
                    }
                    for (i, l) in at.iter().enumerate() {
                        if let Some(l) = l {
                            let mut v = Vec::new();
                            index.lookup(keys[i], &mut v);
                            assert!(
                                v.contains(l),
                                "round {round} end: {:x} at {l:?} lost: {v:?}",
                                keys[i]
                            );
                        }
                    }
                });
            }
        });
    }
}
