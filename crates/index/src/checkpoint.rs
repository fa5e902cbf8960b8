//! Checkpoint support of the directory: `dump` and the validating `load`.
//! Part of `directory.rs` (and compiled with it, twice; see there).

use super::{Chunk, Inner, Region, LIVE};
use crate::entry::{
    FpGeometry, HashEntry, PBA_BITS_MAX, PBA_BITS_MIN, TABLES_LOG2_MAX, TABLE_ENTRIES_LOG2_MAX,
    TABLE_ENTRIES_LOG2_MIN,
};
use crate::slots::Init;
use crate::table::Overflow;
use crate::Geometry;
use std::sync::atomic::Ordering;

impl Inner {
    /// Calls `f(table, raw words)` per table of the current generation:
    /// the table's slots, then `[home, entry]` per overflow entry.
    pub(crate) fn dump(&self, f: &mut dyn FnMut(usize, &[u64])) {
        self.finish_resize(false);
        let gen = self.gen(self.current.load(Ordering::Acquire));
        let mut buf = Vec::with_capacity(self.fpg.table_slots());
        let mut overflow = Vec::new();
        for table in 0..1 << gen.tables_log2 {
            buf.clear();
            for k in 0..self.rpt() {
                let chunk = gen.regions[table << self.regions_per_table_log2 | k]
                    .slots
                    .lock();
                let chunk = chunk.as_ref().expect("dump during a resize");
                buf.extend_from_slice(&chunk.slots);
                overflow.extend(
                    chunk
                        .overflow
                        .iter()
                        .flat_map(|o| [o.home as u64, o.entry.0]),
                );
            }
            buf.append(&mut overflow);
            f(table, &buf);
        }
    }

    /// Rebuilds an index from dumped tables, validating every word.
    pub(crate) fn load(
        geometry: Geometry,
        tables: Vec<Vec<u64>>,
        region_log2: u32,
        overflow_max: usize,
    ) -> Result<Inner, String> {
        let Geometry {
            table_entries_log2: t,
            tables_log2: d,
            pba_bits,
        } = geometry;
        if !(TABLE_ENTRIES_LOG2_MIN..=TABLE_ENTRIES_LOG2_MAX).contains(&t)
            || d > TABLES_LOG2_MAX
            || !(PBA_BITS_MIN..=PBA_BITS_MAX).contains(&pba_bits)
        {
            return Err(format!("bad geometry {geometry:?}"));
        }
        if tables.len() != 1 << d {
            return Err(format!(
                "{} tables for tables_log2 {d} (want {})",
                tables.len(),
                1usize << d
            ));
        }
        let inner = Inner::empty(t, d, pba_bits, region_log2, overflow_max);
        let table_slots = inner.fpg.table_slots();
        let mut regions = Vec::with_capacity(tables.len() << inner.regions_per_table_log2);
        for (j, words) in tables.into_iter().enumerate() {
            if words.len() < table_slots || (words.len() - table_slots) & 1 != 0 {
                return Err(format!(
                    "table {j}: {} words (want {table_slots} + 2 per overflow entry)",
                    words.len()
                ));
            }
            let (slots, overflow) = words.split_at(table_slots);
            for (s, &raw) in slots.iter().enumerate() {
                inner.validate(d, j, s, raw)?;
            }
            let mut lists = vec![Vec::new(); inner.rpt()];
            for (i, pair) in overflow.chunks_exact(2).enumerate() {
                let o = inner.validate_overflow(d, j, i, pair[0], pair[1])?;
                lists[inner.region_of(o.home as usize)].push(o);
            }
            let mut rest = slots;
            for (k, overflow) in lists.into_iter().enumerate() {
                let (slots, tail) = rest.split_at(inner.region_len(k));
                rest = tail;
                let count = slots
                    .iter()
                    .filter(|&&raw| !HashEntry(raw).is_free())
                    .count()
                    + overflow.len();
                let bytes = overflow.capacity() * std::mem::size_of::<Overflow>();
                inner.table_bytes.fetch_add(bytes, Ordering::Relaxed);
                let chunk = Chunk {
                    slots: inner.alloc_slots(Init::Copy(slots)),
                    overflow,
                };
                regions.push(Region::new(LIVE, Some(chunk), count as u32));
            }
        }
        let total = regions
            .iter()
            .map(|r| r.count.load(Ordering::Relaxed) as usize)
            .sum();
        inner.install_gen(d, regions.into_boxed_slice());
        inner.set_len(total);
        Ok(inner)
    }

    fn validate(&self, d: u32, table: usize, slot: usize, raw: u64) -> Result<(), String> {
        let e = HashEntry(raw);
        let bad = |why: String| {
            Err(format!(
                "table {table} slot {slot}: entry {raw:#018x}: {why}"
            ))
        };
        if e.is_free() {
            return if e == HashEntry::FREE {
                Ok(())
            } else {
                bad("non-canonical free entry".into())
            };
        }
        if e.off() > slot || slot - e.off() >= 1 << self.fpg.table_entries_log2 {
            return bad(format!(
                "neighborhood offset {} puts its home outside the table",
                e.off()
            ));
        }
        if e.kv_size() == 0 {
            return bad("kv_size 0".into());
        }
        if FpGeometry::table(e.tag(), d) != table {
            return bad(format!(
                "tag {:#04x} belongs to table {}",
                e.tag(),
                FpGeometry::table(e.tag(), d)
            ));
        }
        Ok(())
    }

    fn validate_overflow(
        &self,
        d: u32,
        table: usize,
        i: usize,
        home: u64,
        raw: u64,
    ) -> Result<Overflow, String> {
        let e = HashEntry(raw);
        let bad = |why: &str| {
            Err(format!(
                "table {table} overflow entry {i}: home {home}, entry {raw:#018x}: {why}"
            ))
        };
        if home >= 1 << self.fpg.table_entries_log2 {
            return bad("home outside the table");
        }
        if e.is_free() || e.off() != 0 || e.kv_size() == 0 {
            return bad("free, nonzero offset or kv_size 0");
        }
        if FpGeometry::table(e.tag(), d) != table {
            return bad("tag belongs to another table");
        }
        Ok(Overflow {
            home: home as u32,
            entry: e,
        })
    }
}
