//! The directory of hash tables, its region locks and incremental resize.
//!
//! This file is compiled twice: as `crate::directory` over the real
//! primitives (`crate::sync`), and, in tests, as `crate::model::directory`
//! over shuttle's (`crate::model::sync`), so that the lock + migration
//! protocol below is model-checked exactly as it ships. It must therefore
//! only name its primitives through `super::sync`.
//!
//! # Structure
//!
//! A *generation* is the directory for one table count: `2^d` tables of
//! `2^t + H - 1` slots, each cut into lock regions of `R` slots (the last
//! region of a table also owns the `H - 1` overflow slots). A region is a
//! mutex over its own slot allocation, a state byte and an occupancy count.
//! Generations are kept in `gens[d]`; `current` names the one that new
//! operations start from. Generation metadata (32 bytes per region) lives
//! as long as the index; slot memory moves from old to new.
//!
//! # Resize
//!
//! Doubling the table count splits old table `j` into new tables `j` and
//! `j + 2^d` by tag bit `d`; an entry keeps its slot (and so its neighborhood
//! offset). Region `(j, k)` of generation `d` therefore migrates to regions
//! `(j, k)` and `(j + 2^d, k)` of generation `d + 1` by a copy, with no
//! displacement. Region states:
//!
//! ```text
//!   UNPOPULATED --(source migrated)--> LIVE --(migrated)--> MIGRATED
//! ```
//!
//! Invariant: the slots of a region are valid only while it is LIVE, and
//! are read or written only by a thread that holds its lock and saw LIVE.
//! Every entry is in exactly one LIVE region. Migration runs under the
//! lock of the LIVE source and installs the children (each under its own
//! lock) before marking the source MIGRATED, so a thread that finds a
//! region MIGRATED can go to the next generation and find it LIVE there.
//! Locks are taken in (generation, table, region) order: a thread never
//! holds a lock of generation `d + 1` while acquiring one of generation `d`.

use super::sync::{AtomicBool, AtomicU8, AtomicUsize, Mutex, MutexGuard, Ordering};
use crate::count::EntryCount;
use crate::entry::{
    FpGeometry, HashEntry, H, PBA_BITS_MAX, PBA_BITS_MIN, TABLES_LOG2_MAX, TABLE_ENTRIES_LOG2_MAX,
    TABLE_ENTRIES_LOG2_MIN,
};
use crate::slots::{Init, SlotArena, Slots, BLOCK_BYTES};
use crate::table::{self, Overflow, Window};
use crate::{Expect, Geometry, InsertError, Location, GRAINS_MAX};
use std::sync::atomic::{AtomicBool as StdAtomicBool, AtomicU32, AtomicUsize as StdAtomicUsize};
use std::sync::OnceLock;

#[path = "checkpoint.rs"]
mod checkpoint;
#[path = "one_region.rs"]
mod one_region;

/// Hints the CPU to load `[addr, addr + len)` into the cache, a line at a
/// time. Any address is fine: a prefetch never faults. Public (as
/// `nvdepot_index::prefetch_lines`) for structures measured beside the
/// index, which must prefetch the same way.
#[inline(always)]
pub fn prefetch_lines(addr: usize, len: usize) {
    #[cfg(target_arch = "x86_64")]
    for line in (addr & !63..addr + len).step_by(64) {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: a prefetch is only a hint; it does not access memory
        // architecturally and cannot fault, whatever the address.
        #[allow(unused_unsafe)]
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(line as *const i8)
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (addr, len);
}

/// Counts a rare path taken (see `marks` at the end of this file).
macro_rules! mark {
    ($name:ident) => {
        #[cfg(test)]
        marks::$name.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    };
}

#[path = "resize.rs"]
mod resize; // after `mark!`, which it uses

const UNPOPULATED: u8 = 0;
const LIVE: u8 = 1;
const MIGRATED: u8 = 2;

/// Grow at a failed insert only once the tables are this full (percent);
/// below it the entry goes to its region's overflow list.
const GROW_OCCUPANCY_PERCENT: usize = 92;

/// Overflow entries per region beyond which a failed insert grows anyway
/// (a hot spot of equal fingerprints that only a grow can split).
pub(crate) const OVERFLOW_MAX_DEFAULT: usize = 128;

/// The memory of one region.
struct Chunk {
    slots: Slots,
    /// Entries homed in this region whose neighborhood was full.
    overflow: Vec<Overflow>,
}

#[repr(align(64))] // one cache line: no false sharing between regions
struct Region {
    state: AtomicU8,
    /// Entries (slots and overflow); written only under `slots`' lock,
    /// read racily by len.
    count: AtomicU32,
    /// `Some` exactly while LIVE.
    slots: Mutex<Option<Chunk>>,
}

impl Region {
    fn new(state: u8, slots: Option<Chunk>, count: u32) -> Region {
        Region {
            state: AtomicU8::new(state),
            count: AtomicU32::new(count),
            slots: Mutex::new(slots),
        }
    }

    fn add_count(&self, delta: i64) {
        // Under the region lock: a plain read-modify-write, no RMW atomic.
        let c = self.count.load(Ordering::Relaxed) as i64 + delta;
        debug_assert!(c >= 0);
        self.count.store(c as u32, Ordering::Relaxed);
    }
}

/// One directory generation (`2^tables_log2` tables).
struct Gen {
    tables_log2: u32,
    /// Index `table << regions_per_table_log2 | region`.
    regions: Box<[Region]>,
    /// Set once `gens[tables_log2 + 1]` exists: this generation is being
    /// migrated away.
    next_ready: AtomicBool,
    /// Regions of this generation not yet MIGRATED (valid once next_ready).
    remaining: AtomicUsize,
    /// Address of each region's slots (0 if none), read without the lock
    /// only to prefetch a neighborhood while the lock is being taken. Dense
    /// (8 bytes per region), so it stays in cache where `regions` may not.
    slot_hints: Box<[StdAtomicUsize]>,
}

impl Gen {
    fn set_hint(&self, idx: usize, chunk: Option<&Chunk>) {
        let addr = chunk.map_or(0, |c| c.slots.as_ptr() as usize);
        self.slot_hints[idx].store(addr, Ordering::Relaxed);
    }
}

/// Why a lock attempt must be retried.
enum Retry {
    /// Same generation (a region had to be populated first).
    Same,
    /// The regions live in the next generation now.
    Next,
}

/// One or two locked, LIVE, adjacent regions of one table.
struct Locked<'a> {
    gen: &'a Gen,
    table: usize,
    k0: usize,
    guards: [Option<MutexGuard<'a, Option<Chunk>>>; 2],
}

impl Locked<'_> {
    fn regions(&self) -> usize {
        1 + self.guards[1].is_some() as usize
    }
}

pub(crate) struct Inner {
    fpg: FpGeometry,
    region_log2: u32,
    regions_per_table_log2: u32,
    overflow_max: usize,
    gens: [OnceLock<Gen>; TABLES_LOG2_MAX as usize + 1],
    current: AtomicUsize,
    grow_lock: Mutex<()>,
    /// Where slot memory comes from (2 MiB blocks on huge pages).
    arena: SlotArena,
    table_bytes: StdAtomicUsize,
    meta_bytes: StdAtomicUsize,
    /// Set when the owning `Index` is dropped: background migration stops.
    closing: StdAtomicBool,
    /// `d + 1` while a `ResizeAction::Requested(d)` is pending, else 0.
    grow_pending: StdAtomicUsize,
    /// Entries in the index: changed by inserts and removes only, never by
    /// migration, so `len` is exact even while a resize moves regions
    /// (summing region counts would briefly count a migrating region in
    /// both generations).
    entries: EntryCount,
}

/// Result of [`Inner::insert`]: the outcome, and whether this call started
/// a resize (the caller may then start a background migration).
pub(crate) struct InsertOutcome {
    pub(crate) result: Result<Option<Location>, InsertError>,
    pub(crate) resize: ResizeAction,
}

/// What an insert did about growing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ResizeAction {
    None,
    /// It started a resize (created the next generation).
    Started,
    /// It wants generation `.0` doubled, but put its entry in an overflow
    /// list meanwhile: the caller should run `grow_requested` off the hot
    /// path (it won a flag: no other insert asks until that runs).
    Requested(usize),
}

impl Inner {
    /// An empty index; `region_log2` is the lock region size (13 in
    /// production, smaller in tests to exercise region boundaries).
    pub(crate) fn new(
        table_entries_log2: u32,
        tables_log2: u32,
        pba_bits: u32,
        region_log2: u32,
        overflow_max: usize,
    ) -> Inner {
        let inner = Inner::empty(
            table_entries_log2,
            tables_log2,
            pba_bits,
            region_log2,
            overflow_max,
        );
        let rpt = 1usize << inner.regions_per_table_log2;
        let regions = (0..rpt << tables_log2)
            .map(|i| Region::new(LIVE, Some(inner.alloc_chunk(i & (rpt - 1))), 0))
            .collect();
        inner.install_gen(tables_log2, regions);
        inner
    }

    fn empty(
        table_entries_log2: u32,
        tables_log2: u32,
        pba_bits: u32,
        region_log2: u32,
        overflow_max: usize,
    ) -> Inner {
        assert!(
            (TABLE_ENTRIES_LOG2_MIN..=TABLE_ENTRIES_LOG2_MAX).contains(&table_entries_log2),
            "table_entries_log2 {table_entries_log2} out of range {TABLE_ENTRIES_LOG2_MIN}..={TABLE_ENTRIES_LOG2_MAX}"
        );
        assert!(
            tables_log2 <= TABLES_LOG2_MAX,
            "tables_log2 {tables_log2} > {TABLES_LOG2_MAX}"
        );
        assert!(
            (PBA_BITS_MIN..=PBA_BITS_MAX).contains(&pba_bits),
            "pba_bits {pba_bits} out of range {PBA_BITS_MIN}..={PBA_BITS_MAX}"
        );
        // A neighborhood must span at most two regions.
        assert!(
            1 << region_log2 >= H,
            "lock region of 2^{region_log2} entries < H"
        );
        let region_log2 = region_log2.min(table_entries_log2);
        Inner {
            fpg: FpGeometry {
                table_entries_log2,
                pba_bits,
            },
            region_log2,
            regions_per_table_log2: table_entries_log2 - region_log2,
            overflow_max,
            gens: Default::default(),
            current: AtomicUsize::new(tables_log2 as usize),
            grow_lock: Mutex::new(()),
            arena: SlotArena::new(),
            table_bytes: StdAtomicUsize::new(0),
            meta_bytes: StdAtomicUsize::new(std::mem::size_of::<Inner>()),
            closing: StdAtomicBool::new(false),
            grow_pending: StdAtomicUsize::new(0),
            entries: EntryCount::new(),
        }
    }

    fn install_gen(&self, tables_log2: u32, regions: Box<[Region]>) {
        let bytes = std::mem::size_of::<Gen>() + regions.len() * std::mem::size_of::<Region>();
        let hint = |r: &Region| {
            r.slots
                .lock()
                .as_ref()
                .map_or(0, |c| c.slots.as_ptr() as usize)
        };
        let slot_hints = regions
            .iter()
            .map(|r| StdAtomicUsize::new(hint(r)))
            .collect();
        let bytes = bytes + regions.len() * std::mem::size_of::<StdAtomicUsize>();
        let gen = Gen {
            tables_log2,
            regions,
            next_ready: AtomicBool::new(false),
            remaining: AtomicUsize::new(0),
            slot_hints,
        };
        let set = self.gens[tables_log2 as usize].set(gen);
        assert!(set.is_ok(), "generation {tables_log2} created twice");
        self.meta_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    fn rpt(&self) -> usize {
        1 << self.regions_per_table_log2
    }

    fn gen(&self, d: usize) -> &Gen {
        self.gens[d].get().expect("generation exists")
    }

    /// Slots in region `k` of a table (the last one owns the overflow).
    fn region_len(&self, k: usize) -> usize {
        (1 << self.region_log2) + if k + 1 == self.rpt() { H - 1 } else { 0 }
    }

    fn alloc_chunk(&self, k: usize) -> Chunk {
        Chunk {
            slots: self.alloc_slots(Init::Fill {
                len: self.region_len(k),
                value: HashEntry::FREE.0,
            }),
            overflow: Vec::new(),
        }
    }

    /// A run of slots holding `init`, the memory it takes counted. The
    /// first 2 MiB of an index are heap memory: a small index does not
    /// take a whole block it would mostly leave unused.
    fn alloc_slots(&self, init: Init<'_>) -> Slots {
        let carve = self.table_bytes.load(Ordering::Relaxed) >= BLOCK_BYTES;
        let (slots, taken) = self.arena.alloc(init, carve);
        self.table_bytes.fetch_add(taken, Ordering::Relaxed);
        slots
    }

    fn account_overflow(&self, capacity_before: usize, capacity_after: usize) {
        if capacity_before == capacity_after {
            // The common case: no atomic read-modify-write (a full barrier
            // on x86, which would stall the misses a batch has in flight).
            return;
        }
        let size = std::mem::size_of::<Overflow>();
        if capacity_after > capacity_before {
            self.table_bytes
                .fetch_add((capacity_after - capacity_before) * size, Ordering::Relaxed);
        } else {
            self.table_bytes
                .fetch_sub((capacity_before - capacity_after) * size, Ordering::Relaxed);
        }
    }

    /// The region of slot `slot` (overflow slots belong to the last one).
    fn region_of(&self, slot: usize) -> usize {
        (slot >> self.region_log2).min(self.rpt() - 1)
    }

    /// Regions to lock for the neighborhood at `home`: the one or two it
    /// spans, or with `extend` also the next one (room for displacement).
    fn span(&self, home: usize, extend: bool) -> (usize, usize) {
        let k0 = self.region_of(home);
        let k1 = self.region_of(home + H - 1);
        let n = if k1 == k0 && extend && k0 + 1 < self.rpt() {
            2
        } else {
            k1 - k0 + 1
        };
        (k0, n)
    }

    /// Locks regions `k0..k0 + n` of `table` in generation `d` and returns
    /// them if they are LIVE and may be used as they are. A write during a
    /// resize first migrates them (that is what drives the resize).
    fn lock_span(
        &self,
        d: usize,
        table: usize,
        k0: usize,
        n: usize,
        write: bool,
    ) -> Result<Locked<'_>, Retry> {
        let gen = self.gen(d);
        let idx = table << self.regions_per_table_log2 | k0;
        let regions = &gen.regions[idx..idx + n];
        let mut guards = [Some(regions[0].slots.lock()), None];
        if n == 2 {
            guards[1] = Some(regions[1].slots.lock());
        }
        let states = [
            regions[0].state.load(Ordering::Acquire),
            regions[n - 1].state.load(Ordering::Acquire),
        ];
        if let Some(i) = states.iter().position(|&s| s == UNPOPULATED) {
            drop(guards);
            self.populate(d, table, k0 + i);
            return Err(Retry::Same);
        }
        let migrated = states.contains(&MIGRATED);
        if migrated || (write && gen.next_ready.load(Ordering::Acquire)) {
            if migrated && states.contains(&LIVE) {
                mark!(MIXED);
            }
            if states == [MIGRATED; 2] {
                mark!(HOP);
            }
            for (i, g) in guards.iter_mut().enumerate() {
                if let Some(g) = g.as_mut().filter(|_| states[i] == LIVE) {
                    mark!(MIGRATE_BY_OP);
                    self.migrate(gen, table, k0 + i, g);
                }
            }
            return Err(Retry::Next);
        }
        Ok(Locked {
            gen,
            table,
            k0,
            guards,
        })
    }

    /// Locks the LIVE regions holding the neighborhood of `fp`.
    fn lock_live(&self, fp: u64, extend: bool, write: bool) -> Locked<'_> {
        let home = self.fpg.home(fp);
        let (k0, n) = self.span(home, extend);
        let mut d = self.current.load(Ordering::Acquire);
        loop {
            let table = FpGeometry::table(fp, d as u32);
            // MIGRATED is final: skip the lock of a region known to be gone.
            let idx = table << self.regions_per_table_log2 | k0;
            let gen = self.gen(d);
            // Start the (likely) cache misses on the slots before the one on
            // the region lock, so that they overlap.
            self.prefetch_neighborhood(gen, idx, home, k0);
            let regions = &gen.regions[idx..idx + n];
            if regions
                .iter()
                .all(|r| r.state.load(Ordering::Acquire) == MIGRATED)
            {
                mark!(HOP);
                d += 1;
                continue;
            }
            match self.lock_span(d, table, k0, n, write) {
                Ok(locked) => return locked,
                Err(Retry::Same) => {}
                Err(Retry::Next) => d += 1,
            }
        }
    }

    fn window<'a>(&self, l: &'a mut Locked<'_>) -> Window<'a> {
        let base = l.k0 << self.region_log2;
        let [g0, g1] = &mut l.guards;
        let a = g0.as_mut().and_then(|g| g.as_mut()).expect("live region");
        let b: &mut [u64] = match g1 {
            Some(g) => &mut g.as_mut().expect("live region").slots,
            None => &mut [],
        };
        Window::new(base, &mut a.slots, b, &mut a.overflow)
    }

    fn apply(&self, l: &Locked<'_>, delta: [i64; 2]) {
        let idx = l.table << self.regions_per_table_log2 | l.k0;
        for (i, &d) in delta.iter().enumerate().take(l.regions()) {
            if d != 0 {
                l.gen.regions[idx + i].add_count(d);
                self.entries.add(d);
            }
        }
    }

    /// Starts the cache misses an operation on `fp` will take (its region's
    /// lock word and state, its neighborhood's slots) without waiting for
    /// them, so that the misses of a batch of operations overlap. Reads
    /// only the dense hint of the region's slot address; takes no lock.
    pub(crate) fn prefetch(&self, fp: u64) {
        let home = self.fpg.home(fp);
        let k0 = self.region_of(home);
        let d = self.current.load(Ordering::Acquire);
        let gen = self.gen(d);
        let idx = FpGeometry::table(fp, d as u32) << self.regions_per_table_log2 | k0;
        prefetch_lines(&gen.regions[idx] as *const Region as usize, 1);
        self.prefetch_neighborhood(gen, idx, home, k0);
    }

    /// Starts loading the slots of the neighborhood at `home` from region
    /// `idx` of `gen` (region `k0` of its table), if that region has slots.
    /// Reads only the region's dense slot-address hint, without its lock.
    fn prefetch_neighborhood(&self, gen: &Gen, idx: usize, home: usize, k0: usize) {
        let base = gen.slot_hints[idx].load(Ordering::Relaxed);
        if base != 0 {
            prefetch_lines(base + (home - (k0 << self.region_log2)) * 8, H * 8);
        }
    }

    pub(crate) fn lookup(&self, fp: u64, out: &mut Vec<Location>) {
        let (home, tag) = (self.fpg.home(fp), self.fpg.tag_of(fp));
        if self.lookup_one_region(fp, home, tag, out) {
            return;
        }
        let mut l = self.lock_live(fp, false, false);
        let w = self.window(&mut l);
        table::lookup(&w, home, tag, out);
    }

    /// With `defer_grow`, an insert that should grow but has room in the
    /// overflow list uses it and returns `ResizeAction::Requested`, so that
    /// the next generation is allocated off the hot path.
    pub(crate) fn insert(
        &self,
        fp: u64,
        new: Location,
        expect: Expect<'_>,
        defer_grow: bool,
    ) -> InsertOutcome {
        assert!(
            new.pba <= self.fpg.pba_max() && (1..=GRAINS_MAX).contains(&new.grains),
            "unstorable location {new:?}"
        );
        let (home, tag) = (self.fpg.home(fp), self.fpg.tag_of(fp));
        if let Some(result) = self.insert_one_region(fp, home, tag, new, expect) {
            return InsertOutcome {
                result,
                resize: ResizeAction::None,
            };
        }
        let mut extend = false;
        let mut resize = ResizeAction::None;
        loop {
            let mut l = self.lock_live(fp, extend, true);
            let d = l.gen.tables_log2 as usize;
            // Displacement may use one more region if the neighborhood is in one.
            let can_extend = !extend && l.regions() == 1 && l.k0 + 1 < self.rpt();
            let mut w = self.window(&mut l);
            let capacity_before = w.overflow_capacity();
            let mut done = table::insert(&mut w, home, tag, new, expect);
            let mut grow = false;
            if done == table::Insert::NoSpace && !can_extend {
                // Displacement failed with all the room two regions give.
                let room = table::overflow_len(&w) < self.overflow_max;
                if d < TABLES_LOG2_MAX as usize && self.should_grow(d, table::overflow_len(&w)) {
                    if defer_grow && room {
                        table::insert_overflow(&mut w, home, tag, new);
                        done = table::Insert::Done(None);
                        let pending = self.grow_pending.compare_exchange(
                            0,
                            d + 1,
                            Ordering::AcqRel,
                            Ordering::Acquire,
                        );
                        if pending.is_ok() {
                            resize = ResizeAction::Requested(d);
                        }
                    } else {
                        grow = true;
                    }
                } else if room {
                    table::insert_overflow(&mut w, home, tag, new);
                    done = table::Insert::Done(None);
                }
            }
            let (delta, capacity_after) = (w.delta, w.overflow_capacity());
            self.apply(&l, delta);
            self.account_overflow(capacity_before, capacity_after);
            drop(l);
            let result = match done {
                table::Insert::Done(r) => Ok(r),
                table::Insert::Conflict => Err(InsertError::Conflict),
                table::Insert::NoSpace if can_extend => {
                    extend = true;
                    continue;
                }
                table::Insert::NoSpace if grow => {
                    if self.grow(d) {
                        resize = ResizeAction::Started;
                    }
                    extend = false;
                    continue;
                }
                table::Insert::NoSpace => Err(InsertError::Full),
            };
            return InsertOutcome { result, resize };
        }
    }

    pub(crate) fn remove(&self, fp: u64, old: Location) -> bool {
        let mut l = self.lock_live(fp, false, true);
        let mut w = self.window(&mut l);
        let capacity_before = w.overflow_capacity();
        let removed = table::remove(&mut w, self.fpg.home(fp), self.fpg.tag_of(fp), old);
        let (delta, capacity_after) = (w.delta, w.overflow_capacity());
        self.apply(&l, delta);
        self.account_overflow(capacity_before, capacity_after);
        removed
    }

    /// Entries in the index (the sharded count, `count.rs`). Exact when no
    /// insert or remove runs concurrently, a resize in flight included.
    pub(crate) fn len(&self) -> usize {
        self.entries.get()
    }

    /// Sets the entry count (after loading a checkpoint).
    pub(crate) fn set_len(&self, n: usize) {
        self.entries.set(n);
    }

    /// `len` estimated from at most `samples` evenly spaced regions per
    /// generation (exact if they have no more regions than that).
    fn sampled_len(&self, samples: usize) -> usize {
        let d0 = self.current.load(Ordering::Acquire);
        let gens = self.gens[d0..].iter().map_while(|g| g.get());
        gens.map(|g| {
            let stride = g.regions.len().div_ceil(samples);
            let sum: usize = (g.regions.iter().step_by(stride))
                .filter(|r| r.state.load(Ordering::Acquire) == LIVE)
                .map(|r| r.count.load(Ordering::Relaxed) as usize)
                .sum();
            sum * stride
        })
        .sum()
    }

    pub(crate) fn memory_bytes(&self) -> usize {
        self.table_bytes.load(Ordering::Relaxed) + self.meta_bytes.load(Ordering::Relaxed)
    }

    pub(crate) fn geometry(&self) -> Geometry {
        Geometry {
            table_entries_log2: self.fpg.table_entries_log2,
            tables_log2: self.current.load(Ordering::Acquire) as u32,
            pba_bits: self.fpg.pba_bits,
        }
    }

    pub(crate) fn close(&self) {
        self.closing.store(true, Ordering::Relaxed);
    }

    /// Calls `f` for every entry; see `Index::for_each`.
    pub(crate) fn for_each(&self, f: &mut dyn FnMut(u64, Location)) {
        let d = self.current.load(Ordering::Acquire);
        let mut buf = Vec::new();
        for table in 0..1 << d {
            for k in 0..self.rpt() {
                self.visit(d, table, k, &mut buf, f);
            }
        }
    }

    /// Reports every entry of tables `table (mod 2^d)` whose home slot is in
    /// region `k`. Those entries lie in regions `k` and `k + 1`, which are
    /// read under their locks at once, so an entry hopping across the
    /// boundary concurrently is seen exactly once. Locks are released before
    /// `f` runs, so `f` may call back into the index.
    fn visit(
        &self,
        d: usize,
        table: usize,
        k: usize,
        buf: &mut Vec<(u64, Location)>,
        f: &mut dyn FnMut(u64, Location),
    ) {
        let n = if k + 1 < self.rpt() { 2 } else { 1 };
        loop {
            match self.lock_span(d, table, k, n, false) {
                Ok(mut l) => {
                    let lo = k << self.region_log2;
                    let hi = if n == 2 {
                        lo + (1 << self.region_log2)
                    } else {
                        1 << self.fpg.table_entries_log2
                    };
                    debug_assert!(hi - lo == 1 << self.region_log2);
                    table::collect(&self.window(&mut l), self.fpg, lo, hi, buf);
                    drop(l);
                    for (fp, loc) in buf.drain(..) {
                        f(fp, loc);
                    }
                    return;
                }
                Err(Retry::Same) => {}
                Err(Retry::Next) => {
                    self.visit(d + 1, table, k, buf, f);
                    self.visit(d + 1, table | 1 << d, k, buf, f);
                    return;
                }
            }
        }
    }
}

/// Coverage marks: counters of rare paths, so that tests can assert they
/// were taken (each compilation of this file has its own).
#[cfg(test)]
pub(crate) mod marks {
    use std::sync::atomic::AtomicUsize;
    /// An operation found its regions migrated and went to the next
    /// generation without migrating them itself.
    pub(crate) static HOP: AtomicUsize = AtomicUsize::new(0);
    /// An operation (not `finish_resize`) migrated a region.
    pub(crate) static MIGRATE_BY_OP: AtomicUsize = AtomicUsize::new(0);
    /// A region was populated on demand from the previous generation.
    pub(crate) static POPULATE: AtomicUsize = AtomicUsize::new(0);
    /// Two locked regions were in different states (LIVE and MIGRATED).
    pub(crate) static MIXED: AtomicUsize = AtomicUsize::new(0);
}
