//! Checkpoint round trip (`dump` → `load`) and `load` rejecting corrupt
//! tables with a message that names the table and slot.

use nvdepot_index::{Expect, Geometry, Index, IndexConfig, InsertError, Location};

const T_LOG2: u32 = 10;
const SLOTS: usize = (1 << T_LOG2) + 31;

fn loc(n: u64) -> Location {
    Location {
        pba: n,
        grains: (n % 2047) as u16 + 1,
    }
}

fn contents(index: &Index) -> Vec<(u64, u64, u16)> {
    let mut v = Vec::new();
    index.for_each(|fp, l| v.push((fp, l.pba, l.grains)));
    v.sort_unstable();
    v
}

fn dump(index: &Index) -> (Geometry, Vec<Vec<u64>>) {
    index.finish_resize();
    let mut tables = Vec::new();
    index.dump(|j, raw| {
        assert_eq!(j, tables.len());
        tables.push(raw.to_vec());
    });
    (index.geometry(), tables)
}

/// An index that grew twice and has overflow entries (a crowd of 40
/// fingerprints homed at slot 7 of one table).
fn sample() -> Index {
    let config = IndexConfig {
        table_entries_log2: T_LOG2,
        initial_tables_log2: 1,
        ..Default::default()
    };
    let index = Index::new(config);
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for n in 0..3000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let fp = x & ((1 << (8 + T_LOG2)) - 1);
        let mut seen = Vec::new();
        index.lookup(fp, &mut seen);
        index
            .insert(fp, loc(n), Expect::Absent { seen: &seen })
            .unwrap();
    }
    for n in 0..40 {
        let fp = (n * 4) | 7 << 8; // tags = 0 mod 4: all in table 0 of 4
        let mut seen = Vec::new();
        index.lookup(fp, &mut seen);
        index
            .insert(fp, loc(10_000 + n), Expect::Absent { seen: &seen })
            .unwrap();
    }
    index
}

#[test]
fn round_trip() {
    let index = sample();
    let (geometry, tables) = dump(&index);
    assert!(geometry.tables_log2 >= 2, "{geometry:?}");
    assert_eq!(tables.len(), 1 << geometry.tables_log2);
    assert!(tables
        .iter()
        .all(|t| t.len() >= SLOTS && (t.len() - SLOTS) & 1 == 0));
    let overflow_words: usize = tables.iter().map(|t| t.len() - SLOTS).sum();
    assert_eq!(geometry.tables_log2, 2);
    assert!(
        overflow_words >= 2 * 8,
        "40 entries in a 32-slot neighborhood"
    );
    let loaded = Index::load(geometry, tables.clone()).unwrap();
    assert_eq!(loaded.geometry(), geometry);
    assert_eq!(loaded.len(), index.len());
    assert_eq!(contents(&loaded), contents(&index));
    // Lookups and updates work on the loaded index, overflow included.
    let mut out = Vec::new();
    loaded.lookup(7 << 8, &mut out);
    assert_eq!(out, vec![loc(10_000)]);
    let r = loaded.insert(7 << 8, loc(1), Expect::Replace(loc(10_000)));
    assert_eq!(r, Ok(Some(loc(10_000))));
    assert_eq!(
        loaded.insert(7 << 8, loc(2), Expect::Absent { seen: &[] }),
        Err(InsertError::Conflict)
    );
    // A second dump of an unchanged index is identical.
    let (_, again) = dump(&Index::load(geometry, tables.clone()).unwrap());
    assert_eq!(again, tables);
    eprintln!(
        "{} tables, {} overflow entries",
        1 << geometry.tables_log2,
        overflow_words / 2
    );
}

#[test]
fn empty_round_trip() {
    let index = Index::new(IndexConfig {
        table_entries_log2: T_LOG2,
        initial_tables_log2: 0,
        ..Default::default()
    });
    let (geometry, tables) = dump(&index);
    assert_eq!(tables, vec![vec![u64::MAX; SLOTS]]);
    let loaded = Index::load(geometry, tables).unwrap();
    assert!(loaded.is_empty());
}

fn load_err(geometry: Geometry, tables: Vec<Vec<u64>>) -> String {
    match Index::load(geometry, tables) {
        Ok(_) => panic!("corrupt input accepted"),
        Err(e) => e,
    }
}

#[test]
fn load_rejects_corruption() {
    let index = sample();
    let (geometry, tables) = dump(&index);
    // The first used slot of table 1 (beyond slot 40, so offsets can point
    // outside), and the entry there.
    let s = (40..SLOTS).find(|&s| tables[1][s] != u64::MAX).unwrap();
    let e = tables[1][s];
    let off = e >> 59;
    let corrupt = |f: &dyn Fn(&mut Vec<Vec<u64>>)| {
        let mut t = tables.clone();
        f(&mut t);
        load_err(geometry, t)
    };
    let msg = corrupt(&|t| t[1][s] = e & !(0x7ff << 40)); // kv_size 0
    assert!(
        msg.contains(&format!("table 1 slot {s}")) && msg.contains("kv_size 0"),
        "{msg}"
    );
    let msg = corrupt(&|t| t[1][s] = e ^ 1 << 51); // tag bit 0 flipped: wrong table
    assert!(
        msg.contains(&format!("table 1 slot {s}")) && msg.contains("belongs to table"),
        "{msg}"
    );
    let msg = corrupt(&|t| t[1][3] = e & !(0x1f << 59) | 31 << 59); // home before slot 0
    assert!(
        msg.contains("table 1 slot 3") && msg.contains("offset 31"),
        "{msg}"
    );
    let msg = corrupt(&|t| t[1][SLOTS - 1] = e & !(0x1f << 59)); // home past the table end
    assert!(
        msg.contains(&format!("table 1 slot {}", SLOTS - 1)),
        "{msg}"
    );
    let msg = corrupt(&|t| t[1][5] = u64::MAX ^ 1 << 63); // free pba, other bits not
    assert!(
        msg.contains("table 1 slot 5") && msg.contains("non-canonical"),
        "{msg}"
    );
    let msg = corrupt(&|t| t[2].pop().map(drop).unwrap());
    assert!(msg.contains("table 2"), "{msg}");
    let msg = corrupt(&|t| t[0].extend([5000, e])); // overflow home outside the table
    assert!(msg.contains("table 0 overflow entry"), "{msg}");
    let msg = corrupt(&|t| drop(t.pop()));
    assert!(msg.contains("tables"), "{msg}");
    let bad = Geometry {
        table_entries_log2: 9,
        ..geometry
    };
    assert!(load_err(bad, tables.clone()).contains("geometry"));
    let bad = Geometry {
        pba_bits: 41,
        ..geometry
    };
    assert!(load_err(bad, tables.clone()).contains("geometry"));
    // The untouched tables still load, and the offset we moved was real.
    assert!(off < 32);
    assert!(Index::load(geometry, tables).is_ok());
}

#[test]
fn full_only_at_256_tables() {
    // 256 tables: a neighborhood crowded by one fingerprint cannot be
    // split by growing; after the overflow list, the index is full.
    let index = Index::new(IndexConfig {
        table_entries_log2: T_LOG2,
        initial_tables_log2: 8,
        ..Default::default()
    });
    let fp = 3 | 100 << 8;
    let mut n = 0;
    let err = loop {
        let mut seen = Vec::new();
        index.lookup(fp, &mut seen);
        match index.insert(fp, loc(n), Expect::Absent { seen: &seen }) {
            Ok(_) => n += 1,
            Err(e) => break e,
        }
    };
    assert_eq!(err, InsertError::Full);
    assert_eq!(n, 32 + 128, "32 slots + 128 overflow entries");
    assert_eq!(index.len(), n as usize);
    assert_eq!(index.geometry().tables_log2, 8);
}

#[test]
fn finish_resize_leaves_nothing_pending() {
    // An insert that finds the tables ≥ 92 % full parks its entry in an
    // overflow list and leaves the grow to a helper thread; finish_resize
    // (run before a checkpoint) must do that grow itself, so that nothing
    // starts a resize after it returns.
    for trial in 0..20u64 {
        let index = Index::new(IndexConfig {
            table_entries_log2: T_LOG2,
            initial_tables_log2: 0,
            ..Default::default()
        });
        let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ trial;
        for n in 0..(950 + trial * 3) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let fp = x & ((1 << (8 + T_LOG2)) - 1);
            let mut seen = Vec::new();
            index.lookup(fp, &mut seen);
            index
                .insert(fp, loc(n), Expect::Absent { seen: &seen })
                .unwrap();
        }
        index.finish_resize();
        let geometry = index.geometry();
        let (_, tables) = dump(&index);
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(!index.resize_in_progress(), "trial {trial}");
        assert_eq!(index.geometry(), geometry, "trial {trial}");
        assert_eq!(dump(&index).1, tables, "trial {trial}");
    }
}
