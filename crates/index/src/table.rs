//! Hopscotch neighborhood operations on a locked window of table slots.
//!
//! A [`Window`] is the contiguous run of slots covered by the one or two
//! lock regions an operation holds (each region's entries are a separate
//! allocation, so the window is two slices). Everything here runs under
//! those locks and knows nothing about generations or resizing.

use crate::entry::{FpGeometry, HashEntry, Tag, H};
use crate::{Expect, Location};

/// An entry that did not fit in its neighborhood (see `directory.rs`,
/// "Overflow"). It lives in the overflow list of its home slot's region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Overflow {
    pub(crate) home: u32,
    /// The entry as it would be stored at offset 0.
    pub(crate) entry: HashEntry,
}

/// The slots `[base, base + a.len() + b.len())` of one table, and the
/// overflow list of the region of slot `base` (the region of every home an
/// operation on this window works for).
pub(crate) struct Window<'a> {
    base: usize,
    a: &'a mut [u64],
    b: &'a mut [u64],
    ovf: &'a mut Vec<Overflow>,
    /// Change in entries of region `a` (slots and overflow) and of `b`.
    pub(crate) delta: [i64; 2],
}

/// Where a matching entry is.
#[derive(Clone, Copy)]
enum Pos {
    /// Offset from home in the neighborhood.
    Slot(usize),
    /// Index in the overflow list.
    Ovf(usize),
}

impl<'a> Window<'a> {
    pub(crate) fn new(
        base: usize,
        a: &'a mut [u64],
        b: &'a mut [u64],
        ovf: &'a mut Vec<Overflow>,
    ) -> Window<'a> {
        Window {
            base,
            a,
            b,
            ovf,
            delta: [0; 2],
        }
    }

    /// One past the last slot of the window.
    #[inline]
    pub(crate) fn end(&self) -> usize {
        self.base + self.a.len() + self.b.len()
    }

    /// Capacity of the overflow list (for memory accounting).
    pub(crate) fn overflow_capacity(&self) -> usize {
        self.ovf.capacity()
    }

    #[inline]
    fn get(&self, slot: usize) -> HashEntry {
        let i = slot - self.base;
        HashEntry(if i < self.a.len() {
            self.a[i]
        } else {
            self.b[i - self.a.len()]
        })
    }

    #[inline]
    fn set(&mut self, slot: usize, e: HashEntry) {
        let i = slot - self.base;
        let (cell, part) = if i < self.a.len() {
            (&mut self.a[i], 0)
        } else {
            (&mut self.b[i - self.a.len()], 1)
        };
        let was_free = HashEntry(*cell).is_free();
        *cell = e.0;
        self.delta[part] += was_free as i64 - e.is_free() as i64;
    }

    /// The neighborhood `[home, home + H)` as (at most) two slices.
    #[inline]
    fn neighborhood(&self, home: usize) -> (&[u64], &[u64]) {
        let i = home - self.base;
        debug_assert!(home >= self.base && home + H <= self.end());
        if i + H <= self.a.len() {
            (&self.a[i..i + H], &[])
        } else if i >= self.a.len() {
            let j = i - self.a.len();
            (&self.b[j..j + H], &[])
        } else {
            (&self.a[i..], &self.b[..i + H - self.a.len()])
        }
    }

    /// Every entry with fingerprint (home, tag), and where it is.
    #[inline]
    fn matches(&self, home: usize, tag: Tag) -> impl Iterator<Item = (Pos, HashEntry)> + '_ {
        let (x, y) = self.neighborhood(home);
        let in_slots = x
            .iter()
            .chain(y)
            .enumerate()
            .filter_map(move |(off, &raw)| {
                let e = HashEntry(raw);
                tag.matches(off, e).then_some((Pos::Slot(off), e))
            });
        let in_ovf = self.ovf.iter().enumerate().filter_map(move |(i, o)| {
            (o.home as usize == home && tag.matches(0, o.entry)).then_some((Pos::Ovf(i), o.entry))
        });
        in_slots.chain(in_ovf)
    }

    /// The neighborhood at `home` as one array, when it lies in one of the
    /// window's two slices (all but the few that straddle a region
    /// boundary).
    #[inline]
    fn one_slice(&self, home: usize) -> Option<&[u64; H]> {
        let (x, y) = self.neighborhood(home);
        if !y.is_empty() {
            return None;
        }
        x.try_into().ok()
    }

    fn free_offset(&self, home: usize) -> Option<usize> {
        let (x, y) = self.neighborhood(home);
        first_free(x.iter().chain(y))
    }
}

/// The offset from home of the first free slot of a neighborhood (its
/// slots in order, home first).
#[inline]
pub(crate) fn first_free<'a>(slots: impl IntoIterator<Item = &'a u64>) -> Option<usize> {
    slots.into_iter().position(|&raw| HashEntry(raw).is_free())
}

/// Whether a neighborhood (its slots in order, home first) or its
/// region's overflow list `ovf` holds an entry of fingerprint (home, tag)
/// whose location is not in `seen`: the condition on which
/// `Expect::Absent { seen }` fails.
#[inline]
pub(crate) fn unseen_entry<'a>(
    slots: impl IntoIterator<Item = &'a u64>,
    ovf: &[Overflow],
    home: usize,
    tag: Tag,
    seen: &[Location],
) -> bool {
    let unseen = |e: HashEntry| !seen.contains(&tag.location(e));
    // A per-slot loop, not `match_bits`: in the insert's conflict check
    // that measured 3 % slower (lookups gained from it;
    // bench/results/index.md).
    let in_slots = slots
        .into_iter()
        .enumerate()
        .any(|(off, &raw)| tag.matches(off, HashEntry(raw)) && unseen(HashEntry(raw)));
    in_slots
        || (!ovf.is_empty()
            && ovf
                .iter()
                .any(|o| o.home as usize == home && tag.matches(0, o.entry) && unseen(o.entry)))
}

/// Appends the location of every entry with fingerprint (home, tag).
pub(crate) fn lookup(w: &Window<'_>, home: usize, tag: Tag, out: &mut Vec<Location>) {
    if let Some(slots) = w.one_slice(home) {
        return lookup_slots(slots, w.ovf, home, tag, out);
    }
    let (x, y) = w.neighborhood(home);
    for (off, &raw) in x.iter().chain(y).enumerate() {
        let e = HashEntry(raw);
        if tag.matches(off, e) {
            out.push(tag.location(e));
        }
    }
    lookup_overflow(w.ovf, home, tag, out);
}

/// [`lookup`] of a neighborhood held as one array, `ovf` being its
/// region's overflow list: the hot path, one branch-free
/// [`Tag::match_bits`] pass rather than a compare and branch per slot.
#[inline]
pub(crate) fn lookup_slots(
    slots: &[u64; H],
    ovf: &[Overflow],
    home: usize,
    tag: Tag,
    out: &mut Vec<Location>,
) {
    let mut bits = tag.match_bits(slots);
    while bits != 0 {
        let off = bits.trailing_zeros() as usize;
        bits &= bits - 1;
        out.push(tag.location(HashEntry(slots[off])));
    }
    lookup_overflow(ovf, home, tag, out);
}

#[inline]
fn lookup_overflow(ovf: &[Overflow], home: usize, tag: Tag, out: &mut Vec<Location>) {
    if !ovf.is_empty() {
        let hits = ovf
            .iter()
            .filter(|o| o.home as usize == home && tag.matches(0, o.entry));
        out.extend(hits.map(|o| tag.location(o.entry)));
    }
}

/// What an insert did in one window.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Insert {
    Done(Option<Location>),
    Conflict,
    /// The neighborhood is full and no hop sequence inside the window frees
    /// a slot in it. Nothing was added; the caller may grow, or call
    /// [`insert_overflow`] under the same locks.
    NoSpace,
}

/// [`crate::Index::insert`] inside one window.
pub(crate) fn insert(
    w: &mut Window<'_>,
    home: usize,
    tag: Tag,
    new: Location,
    expect: Expect<'_>,
) -> Insert {
    match expect {
        Expect::Replace(old) => {
            let Some((pos, _)) = w.matches(home, tag).find(|&(_, e)| tag.location(e) == old) else {
                return Insert::Conflict;
            };
            match pos {
                Pos::Slot(off) => w.set(home + off, tag.entry(off, new)),
                Pos::Ovf(i) => w.ovf[i].entry = tag.entry(0, new),
            }
            Insert::Done(Some(old))
        }
        Expect::Absent { .. } | Expect::New => {
            if let Expect::Absent { seen } = expect {
                let (x, y) = w.neighborhood(home);
                if unseen_entry(x.iter().chain(y), w.ovf, home, tag, seen) {
                    return Insert::Conflict;
                }
            }
            let Some(off) = w.free_offset(home).or_else(|| displace(w, home)) else {
                return Insert::NoSpace;
            };
            w.set(home + off, tag.entry(off, new));
            Insert::Done(None)
        }
    }
}

/// Adds an entry to the overflow list, after `insert` said `NoSpace` (so
/// its condition was checked under the same locks).
pub(crate) fn insert_overflow(w: &mut Window<'_>, home: usize, tag: Tag, new: Location) {
    debug_assert!(home >= w.base && home < w.base + w.a.len());
    w.ovf.push(Overflow {
        home: home as u32,
        entry: tag.entry(0, new),
    });
    w.delta[0] += 1;
}

pub(crate) fn overflow_len(w: &Window<'_>) -> usize {
    w.ovf.len()
}

/// Removes the entry with fingerprint (home, tag) at `old`. A slot freed
/// this way is offered to the overflow list.
pub(crate) fn remove(w: &mut Window<'_>, home: usize, tag: Tag, old: Location) -> bool {
    let Some((pos, _)) = w.matches(home, tag).find(|&(_, e)| tag.location(e) == old) else {
        return false;
    };
    match pos {
        Pos::Slot(off) => {
            w.set(home + off, HashEntry::FREE);
            drain_overflow(w);
        }
        Pos::Ovf(i) => {
            w.ovf.swap_remove(i);
            w.delta[0] -= 1;
        }
    }
    true
}

/// Moves overflow entries whose neighborhood (inside the window) has a
/// free slot back into the table.
pub(crate) fn drain_overflow(w: &mut Window<'_>) {
    let mut i = 0;
    while i < w.ovf.len() {
        let o = w.ovf[i];
        let home = o.home as usize;
        let fits = home >= w.base && home + H <= w.end();
        match if fits { w.free_offset(home) } else { None } {
            Some(off) => {
                w.ovf.swap_remove(i);
                w.delta[0] -= 1;
                w.set(home + off, o.entry.with_off(off));
            }
            None => i += 1,
        }
    }
}

/// Hopscotch displacement for a full neighborhood at `home`: find the first
/// free slot after it (inside the window, so never past the locks held)
/// and hop entries forward into it, each within its own neighborhood, until
/// the free slot is inside `home`'s neighborhood. Returns its offset.
///
/// Greedy hopping (farthest-back movable entry first) fails only when no
/// placement of the entries homed before the free slot exists at all, so a
/// smarter search would not help. A failed attempt may leave some hops
/// done; every entry is still inside its neighborhood.
fn displace(w: &mut Window<'_>, home: usize) -> Option<usize> {
    let mut free = (home + H..w.end()).find(|&s| w.get(s).is_free())?;
    while free >= home + H {
        // Every slot in [home, free) is occupied. Take the farthest-back
        // entry that may still live at `free`, to close the gap fastest.
        let from = (free + 1 - H..free).find(|&s| {
            let e = w.get(s);
            debug_assert!(!e.is_free());
            free - (s - e.off()) < H
        })?;
        let e = w.get(from);
        let home_of_e = from - e.off();
        w.set(free, e.with_off(free - home_of_e));
        w.set(from, HashEntry::FREE);
        free = from;
    }
    Some(free - home)
}

/// Appends `(fp, location)` for every entry whose home slot is in
/// `[lo, hi)`, `lo` being the window's base. The window must hold every
/// slot such entries may occupy.
pub(crate) fn collect(
    w: &Window<'_>,
    fpg: FpGeometry,
    lo: usize,
    hi: usize,
    out: &mut Vec<(u64, Location)>,
) {
    debug_assert!(lo == w.base && hi + H - 1 <= w.end());
    for s in lo..hi + H - 1 {
        let e = w.get(s);
        if e.is_free() || s < e.off() {
            continue;
        }
        let h = s - e.off();
        if (lo..hi).contains(&h) {
            out.push((fpg.reconstruct(s, e), fpg.location(e)));
        }
    }
    for o in w.ovf.iter() {
        debug_assert!((lo..hi).contains(&(o.home as usize)));
        out.push((
            fpg.reconstruct(o.home as usize, o.entry),
            fpg.location(o.entry),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(pba: u64) -> Location {
        Location { pba, grains: 1 }
    }

    const G: FpGeometry = FpGeometry {
        table_entries_log2: 7,
        pba_bits: 40,
    };

    fn t(tag: u64) -> Tag {
        G.tag_of(tag)
    }

    fn absent(w: &mut Window<'_>, home: usize, tag: u64, pba: u64) -> Insert {
        let mut seen = Vec::new();
        lookup(w, home, t(tag), &mut seen);
        insert(w, home, t(tag), loc(pba), Expect::Absent { seen: &seen })
    }

    #[test]
    fn displacement_hops_entries_back_into_the_neighborhood() {
        let mut a = vec![u64::MAX; 64];
        let mut b = vec![u64::MAX; 64 + H - 1];
        let mut ovf = Vec::new();
        let mut w = Window::new(0, &mut a, &mut b, &mut ovf);
        // Fill slots 10..=41 with entries homed at 10, then 42..=73 homed at 42..
        for i in 0..H as u64 {
            assert_eq!(absent(&mut w, 10, i, i), Insert::Done(None));
        }
        for i in 0..H as u64 {
            assert_eq!(
                absent(&mut w, 42 + i as usize, 7, 100 + i),
                Insert::Done(None)
            );
        }
        // Home 10 is full, and every entry behind the first free slot (74)
        // is at offset 0 of a home >= 42: hopping frees slot 42.
        assert_eq!(absent(&mut w, 10, 200, 999), Insert::NoSpace);
        // Home 11 can use slot 42 once the entry homed at 42 hops to 74.
        assert_eq!(absent(&mut w, 11, 200, 999), Insert::Done(None));
        let mut out = Vec::new();
        lookup(&w, 42, t(7), &mut out);
        assert_eq!(out, vec![loc(100)]);
        out.clear();
        lookup(&w, 11, t(200), &mut out);
        assert_eq!(out, vec![loc(999)]);
        assert_eq!(w.delta.iter().sum::<i64>(), 2 * H as i64 + 1);
        let mut all = Vec::new();
        collect(&w, G, 0, 128, &mut all);
        assert_eq!(all.len(), 2 * H + 1);
        // A full neighborhood spills to the overflow list, and a freed slot
        // takes it back.
        assert_eq!(absent(&mut w, 10, 201, 5000), Insert::NoSpace);
        insert_overflow(&mut w, 10, t(201), loc(5000));
        assert!(remove(&mut w, 10, t(0), loc(0)));
        assert_eq!(overflow_len(&w), 0);
        out.clear();
        lookup(&w, 10, t(201), &mut out);
        assert_eq!(out, vec![loc(5000)]);
    }

    #[test]
    fn conditions() {
        let mut a = vec![u64::MAX; 32 + H - 1];
        let mut ovf = Vec::new();
        let mut w = Window::new(0, &mut a, &mut [], &mut ovf);
        assert_eq!(absent(&mut w, 3, 9, 1), Insert::Done(None));
        assert_eq!(
            insert(&mut w, 3, t(9), loc(2), Expect::Absent { seen: &[] }),
            Insert::Conflict
        );
        assert_eq!(
            insert(&mut w, 3, t(9), loc(2), Expect::Replace(loc(5))),
            Insert::Conflict
        );
        assert_eq!(
            insert(&mut w, 3, t(9), loc(2), Expect::Replace(loc(1))),
            Insert::Done(Some(loc(1)))
        );
        // `New` adds beside an entry of the same fingerprint, unchecked.
        assert_eq!(
            insert(&mut w, 3, t(9), loc(6), Expect::New),
            Insert::Done(None)
        );
        let mut both = Vec::new();
        lookup(&w, 3, t(9), &mut both);
        both.sort_by_key(|l| l.pba);
        assert_eq!(both, vec![loc(2), loc(6)]);
        assert!(remove(&mut w, 3, t(9), loc(6)));
        assert!(!remove(&mut w, 3, t(9), loc(1)));
        assert!(!remove(&mut w, 4, t(9), loc(2)));
        assert!(remove(&mut w, 3, t(9), loc(2)));
        assert_eq!(w.delta, [0, 0]);
        // Overflow entries match, replace and remove like slot entries.
        insert_overflow(&mut w, 3, t(9), loc(7));
        assert_eq!(
            insert(&mut w, 3, t(9), loc(8), Expect::Absent { seen: &[] }),
            Insert::Conflict
        );
        assert_eq!(
            insert(&mut w, 3, t(9), loc(8), Expect::Replace(loc(7))),
            Insert::Done(Some(loc(7)))
        );
        let mut out = Vec::new();
        lookup(&w, 3, t(9), &mut out);
        assert_eq!(out, vec![loc(8)]);
        assert!(remove(&mut w, 3, t(9), loc(8)));
        assert_eq!((w.delta, overflow_len(&w)), ([0, 0], 0));
    }
}
