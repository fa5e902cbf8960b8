//! The 8-byte hash table entry and the fingerprint arithmetic.
//!
//! Everything here is pure bit manipulation: no locks, no allocation.

use crate::{Location, GRAINS_MAX, PBA_MAX};

/// Neighborhood size H: an entry lives within H slots of its home slot.
pub(crate) const H: usize = 32;

/// Bits of the fingerprint tag (the low bits of a fingerprint).
pub(crate) const TAG_BITS: u32 = 8;

/// Largest `tables_log2`: the table is selected by tag bits only.
pub(crate) const TABLES_LOG2_MAX: u32 = TAG_BITS;

/// Bounds of `table_entries_log2`: 27 index bits + 8 tag bits = 35.
pub(crate) const TABLE_ENTRIES_LOG2_MIN: u32 = 10;
pub(crate) const TABLE_ENTRIES_LOG2_MAX: u32 = 27;

/// Bounds of the pba width: 40 is the whole pba field (8-bit tags only);
/// fewer leave the rest of the field to the extended tag.
pub(crate) const PBA_BITS_MIN: u32 = 8;
pub(crate) const PBA_BITS_MAX: u32 = 40;

/// Default lock region: 8192 entries (64 KiB of entries).
pub(crate) const REGION_LOG2_DEFAULT: u32 = 13;

const PBA_SHIFT: u32 = 0;
const SIZE_SHIFT: u32 = 40;
const TAG_SHIFT: u32 = 51;
const OFF_SHIFT: u32 = 59;
const PBA_MASK: u64 = (1 << 40) - 1;
const SIZE_MASK: u64 = (1 << 11) - 1;
const TAG_MASK: u64 = (1 << TAG_BITS) - 1;

/// One slot of a hash table.
///
/// Layout (64 bits, most significant first):
///
/// ```text
///   63..59  neigh_off  5 bits   slot - home slot (0..H)
///   58..51  fp_tag     8 bits   low 8 bits of the fingerprint
///   50..40  kv_size   11 bits   record size in grains (1..=2047)
///   39..0   pba       40 bits   first grain of the record
/// ```
///
/// A slot whose pba is all ones is free. The only free value we ever write
/// (and the only one `Index::load` accepts) is all 64 bits set, so a fresh
/// table is a plain `0xff` fill. kv_size 0 is uDepot's "deleted" marker; we
/// delete by freeing the slot (lookups always scan the whole neighborhood,
/// so no tombstones are needed) and never store kv_size 0.
///
/// The top 13 bits `neigh_off:fp_tag` are exactly what a probe compares:
/// an entry belongs to fingerprint `fp` probed from home slot `i` iff its
/// top bits equal `((slot - i) << 8) | tag(fp)` and it is not free.
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(transparent)]
pub(crate) struct HashEntry(pub(crate) u64);

// The entry is the unit of the in-DRAM memory budget (≤ 9 B/key).
const _: () = assert!(std::mem::size_of::<HashEntry>() == 8);
// neigh_off must be able to express every offset inside a neighborhood.
const _: () = assert!(H <= 1 << (64 - OFF_SHIFT));
// `Tag::match_bits` answers with a bit per slot of a neighborhood.
const _: () = assert!(H <= 32);
const _: () = assert!(PBA_MAX == PBA_MASK - 1 && GRAINS_MAX as u64 == SIZE_MASK);

impl HashEntry {
    /// The free slot.
    pub(crate) const FREE: HashEntry = HashEntry(u64::MAX);

    pub(crate) fn new(off: usize, tag: u64, loc: Location) -> HashEntry {
        debug_assert!(off < H && tag <= TAG_MASK);
        debug_assert!(loc.pba <= PBA_MAX && (1..=GRAINS_MAX).contains(&loc.grains));
        HashEntry(
            (off as u64) << OFF_SHIFT
                | tag << TAG_SHIFT
                | (loc.grains as u64) << SIZE_SHIFT
                | loc.pba << PBA_SHIFT,
        )
    }

    #[inline]
    pub(crate) fn is_free(self) -> bool {
        self.0 & PBA_MASK == PBA_MASK
    }

    #[inline]
    pub(crate) fn off(self) -> usize {
        (self.0 >> OFF_SHIFT) as usize
    }

    #[inline]
    pub(crate) fn tag(self) -> u64 {
        (self.0 >> TAG_SHIFT) & TAG_MASK
    }

    #[inline]
    pub(crate) fn kv_size(self) -> u16 {
        ((self.0 >> SIZE_SHIFT) & SIZE_MASK) as u16
    }

    /// The location the entry names, its pba being the pba field's bits
    /// under `pba_mask` (the rest is extended tag).
    #[inline]
    pub(crate) fn location(self, pba_mask: u64) -> Location {
        Location {
            pba: (self.0 >> PBA_SHIFT) & pba_mask,
            grains: self.kv_size(),
        }
    }

    /// The probe key `neigh_off:fp_tag` (top 13 bits).
    #[inline]
    pub(crate) fn probe_key(self) -> u64 {
        self.0 >> TAG_SHIFT
    }

    /// The same entry at another offset from its home (a hopscotch hop).
    #[inline]
    pub(crate) fn with_off(self, off: usize) -> HashEntry {
        debug_assert!(off < H);
        HashEntry(self.0 & !(u64::MAX << OFF_SHIFT) | (off as u64) << OFF_SHIFT)
    }
}

/// The probe key an entry of tag `tag` at offset `off` from home has.
#[inline]
pub(crate) fn probe_key(off: usize, tag: u64) -> u64 {
    (off as u64) << TAG_BITS | tag
}

impl std::fmt::Debug for HashEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if *self == HashEntry::FREE {
            return write!(f, "HashEntry(free)");
        }
        write!(
            f,
            "HashEntry(off {}, tag {:#04x}, kv_size {}, pba field {:#x})",
            self.off(),
            self.tag(),
            self.kv_size(),
            (self.0 >> PBA_SHIFT) & PBA_MASK
        )
    }
}

/// How a fingerprint splits for a given table size and pba width.
///
/// ```text
///   fp (64 bits):  [ .. : ignored ][ xtag ][ 8+t-1 .. 8 : home slot ][ 7..0 : tag ]
///   table number:  tag & (2^tables_log2 - 1)
/// ```
///
/// The *extended tag* (`xtag`, the `40 - pba_bits` fingerprint bits above
/// the home slot, at most what is left of 64) is stored in the entry's pba
/// field above the store's pba width: a store of 2^24 grains keeps 16 more
/// fingerprint bits per entry for free, so two keys share a fingerprint
/// (and a lookup or an overwrite reads a record that is not theirs) 2^16
/// times less often. Bits above it are not stored, so two fingerprints
/// that differ only there are the same fingerprint to the index.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FpGeometry {
    pub(crate) table_entries_log2: u32,
    /// Bits of the pba field that hold the pba (8..=40); the rest hold
    /// the extended tag.
    pub(crate) pba_bits: u32,
}

/// The part of a fingerprint an entry stores: the tag (8 bits, in the tag
/// field) and the extended tag (in the pba field above `pba_bits`), with
/// the mask that separates the pba from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Tag {
    pub(crate) tag: u64,
    /// The extended tag, shifted to its place in the pba field.
    xbits: u64,
    pba_mask: u64,
}

impl Tag {
    /// Whether `e`, at offset `off` from the home slot probed, holds this
    /// fingerprint (`off` 0 for an overflow entry).
    #[inline]
    pub(crate) fn matches(self, off: usize, e: HashEntry) -> bool {
        e.probe_key() == probe_key(off, self.tag)
            && e.0 & PBA_MASK & !self.pba_mask == self.xbits
            && !e.is_free()
    }

    /// Bit `off` set for each slot of a whole neighborhood `slots` (home
    /// slot first) that holds this fingerprint: [`Tag::matches`] for all
    /// `H` slots in one pass with no branch per slot (the compiler unrolls
    /// and vectorizes it), where a loop of `matches` pays a compare and a
    /// branch chain per slot.
    #[inline]
    pub(crate) fn match_bits(self, slots: &[u64; H]) -> u32 {
        // The probe key (top 13 bits) and the extended tag's bits, at once.
        let mask = (u64::MAX << TAG_SHIFT) | (PBA_MASK & !self.pba_mask);
        let want = (self.tag << TAG_SHIFT) | self.xbits;
        let mut bits = 0u32;
        for (off, &raw) in slots.iter().enumerate() {
            let hit = raw & mask == want | (off as u64) << OFF_SHIFT;
            bits |= (hit as u32) << off;
        }
        // A free slot (all ones) can look like offset 31, tag 255: rare,
        // so checked per hit, not per slot.
        let mut free_hits = 0u32;
        let mut m = bits;
        while m != 0 {
            let off = m.trailing_zeros() as usize;
            m &= m - 1;
            free_hits |= (HashEntry(slots[off]).is_free() as u32) << off;
        }
        bits & !free_hits
    }

    /// The entry of this fingerprint at offset `off` for `loc`.
    #[inline]
    pub(crate) fn entry(self, off: usize, loc: Location) -> HashEntry {
        debug_assert!(loc.pba < self.pba_mask, "pba {} too wide", loc.pba);
        HashEntry::new(
            off,
            self.tag,
            Location {
                pba: loc.pba | self.xbits,
                grains: loc.grains,
            },
        )
    }

    /// The location an entry of this fingerprint names.
    #[inline]
    pub(crate) fn location(self, e: HashEntry) -> Location {
        e.location(self.pba_mask)
    }
}

impl FpGeometry {
    /// Bits of extended tag an entry stores.
    #[inline]
    fn xtag_bits(self) -> u32 {
        (40 - self.pba_bits).min(64 - TAG_BITS - self.table_entries_log2)
    }

    /// What an entry of fingerprint `fp` stores of it.
    #[inline]
    pub(crate) fn tag_of(self, fp: u64) -> Tag {
        let x = self.xtag_bits();
        let xtag = (fp >> (TAG_BITS + self.table_entries_log2)) & ((1 << x) - 1);
        Tag {
            tag: fp & TAG_MASK,
            xbits: xtag << self.pba_bits,
            pba_mask: self.pba_mask(),
        }
    }

    /// The pba field's bits that hold the pba.
    #[inline]
    fn pba_mask(self) -> u64 {
        (1 << self.pba_bits) - 1
    }

    /// Largest pba an entry can hold (all ones marks a free entry).
    pub(crate) fn pba_max(self) -> u64 {
        self.pba_mask() - 1
    }

    #[inline]
    pub(crate) fn home(self, fp: u64) -> usize {
        ((fp >> TAG_BITS) & ((1 << self.table_entries_log2) - 1)) as usize
    }

    #[inline]
    pub(crate) fn table(fp: u64, tables_log2: u32) -> usize {
        (fp & ((1 << tables_log2) - 1)) as usize
    }

    /// The fingerprint of the entry at `slot`, as the geometry stores it.
    #[inline]
    pub(crate) fn reconstruct(self, slot: usize, e: HashEntry) -> u64 {
        debug_assert!(slot >= e.off());
        let xtag = ((e.0 >> PBA_SHIFT) & PBA_MASK) >> self.pba_bits;
        e.tag()
            | ((slot - e.off()) as u64) << TAG_BITS
            | xtag << (TAG_BITS + self.table_entries_log2)
    }

    /// The location the entry `e` names.
    #[inline]
    pub(crate) fn location(self, e: HashEntry) -> Location {
        e.location(self.pba_mask())
    }

    /// Slots per table: 2^t homes plus H-1 overflow slots at the end, so the
    /// last neighborhoods need no wrap-around (lock order stays ascending).
    #[inline]
    pub(crate) fn table_slots(self) -> usize {
        (1 << self.table_entries_log2) + H - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_fields_round_trip() {
        let loc = Location {
            pba: PBA_MAX,
            grains: GRAINS_MAX,
        };
        let g = FpGeometry {
            table_entries_log2: 10,
            pba_bits: 40,
        };
        let t = g.tag_of(0xab);
        let e = t.entry(31, loc);
        assert!(!e.is_free());
        assert_eq!((e.off(), e.tag(), t.location(e)), (31, 0xab, loc));
        assert!(t.matches(31, e) && !t.matches(30, e));
        let e2 = e.with_off(3);
        assert_eq!((e2.off(), e2.tag(), g.location(e2)), (3, 0xab, loc));
        assert!(HashEntry::FREE.is_free());
        let fp = 0x3_ffff_ffff;
        assert_eq!(g.home(fp), 1023);
        assert_eq!(g.tag_of(fp).tag, 0xff);
        assert_eq!(FpGeometry::table(fp, 3), 7);
        assert_eq!(g.reconstruct(1023 + 5, e2.with_off(5)), 0xab | 1023 << 8);
    }

    #[test]
    fn a_narrow_pba_leaves_room_for_an_extended_tag() {
        let g = FpGeometry {
            table_entries_log2: 10,
            pba_bits: 24,
        };
        let loc = Location {
            pba: g.pba_max(),
            grains: 9,
        };
        // Same tag and home, different bits above the home: two keys the
        // 8-bit tag alone would confuse.
        let (fp1, fp2) = (0x5_a3ab_u64 | 1 << 20, 0x5_a3ab_u64 | 2 << 20);
        assert_eq!(
            (g.home(fp1), g.tag_of(fp1).tag),
            (g.home(fp2), g.tag_of(fp2).tag)
        );
        let (t1, t2) = (g.tag_of(fp1), g.tag_of(fp2));
        let e = t1.entry(4, loc);
        assert!(t1.matches(4, e) && !t2.matches(4, e));
        assert_eq!((t1.location(e), g.location(e)), (loc, loc));
        // 16 extended bits survive a round trip through the entry.
        let fp = 0xffff_u64 << 18 | 0x3ff << 8 | 0x5c;
        let e = g.tag_of(fp).entry(0, loc);
        assert_eq!(g.reconstruct(0x3ff, e), fp);
        assert!(!e.is_free());
    }

    proptest::proptest! {
        /// The one-pass `match_bits` answers as `matches` slot by slot,
        /// over neighborhoods of free slots, entries of this fingerprint at
        /// their offset or another, of fingerprints differing only in the
        /// tag or the extended tag, and the free slot's look-alike (offset
        /// 31, tag 255, every pba bit but one set).
        #[test]
        fn match_bits_is_matches_for_every_slot(
            pba_bits in 8u32..=40,
            fp in proptest::prelude::any::<u64>(),
            kinds in proptest::collection::vec(0u8..6, H),
            pbas in proptest::collection::vec(proptest::prelude::any::<u64>(), H),
        ) {
            let g = FpGeometry { table_entries_log2: 20, pba_bits };
            let t = g.tag_of(fp);
            let other_tag = g.tag_of(fp ^ 1);
            let other_xtag = g.tag_of(fp ^ 1 << (TAG_BITS + 20));
            let mut slots = [0u64; H];
            for off in 0..H {
                let loc = Location { pba: pbas[off] % g.pba_max(), grains: 1 };
                slots[off] = match kinds[off] {
                    0 => HashEntry::FREE.0,
                    1 => t.entry(off, loc).0,
                    2 => t.entry((off + 1) % H, loc).0,
                    3 => other_tag.entry(off, loc).0,
                    4 => other_xtag.entry(off, loc).0,
                    _ => HashEntry::FREE.0 & !1,
                };
            }
            let want = (0..H).fold(0u32, |m, off| {
                m | (t.matches(off, HashEntry(slots[off])) as u32) << off
            });
            proptest::prop_assert_eq!(t.match_bits(&slots), want);
        }
    }

    #[test]
    fn match_bits_skips_a_free_slot_that_looks_like_offset_31_tag_255() {
        let g = FpGeometry {
            table_entries_log2: 20,
            pba_bits: 40,
        };
        let t = g.tag_of(0xff);
        let mut slots = [HashEntry::FREE.0; H];
        assert_eq!(t.match_bits(&slots), 0, "all free");
        let loc = Location { pba: 7, grains: 1 };
        slots[31] = t.entry(31, loc).0;
        assert_eq!(t.match_bits(&slots), 1 << 31);
    }
}
