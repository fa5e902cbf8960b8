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

    #[inline]
    pub(crate) fn location(self) -> Location {
        Location {
            pba: (self.0 >> PBA_SHIFT) & PBA_MASK,
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
            "HashEntry(off {}, tag {:#04x}, kv_size {}, pba {:#x})",
            self.off(),
            self.tag(),
            self.kv_size(),
            self.location().pba
        )
    }
}

/// How a fingerprint splits for a given table size.
///
/// ```text
///   fp (35 bits):  [ 34 .. 8+t : ignored ][ 8+t-1 .. 8 : home slot ][ 7..0 : tag ]
///   table number:  tag & (2^tables_log2 - 1)
/// ```
///
/// Bits above `8 + table_entries_log2` are not stored, so two fingerprints
/// that differ only there are the same fingerprint to the index.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FpGeometry {
    pub(crate) table_entries_log2: u32,
}

impl FpGeometry {
    #[inline]
    pub(crate) fn tag(fp: u64) -> u64 {
        fp & TAG_MASK
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
        e.tag() | ((slot - e.off()) as u64) << TAG_BITS
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
        let e = HashEntry::new(31, 0xab, loc);
        assert!(!e.is_free());
        assert_eq!((e.off(), e.tag(), e.location()), (31, 0xab, loc));
        assert_eq!(e.probe_key(), probe_key(31, 0xab));
        let e2 = e.with_off(3);
        assert_eq!((e2.off(), e2.tag(), e2.location()), (3, 0xab, loc));
        assert!(HashEntry::FREE.is_free());
        let g = FpGeometry {
            table_entries_log2: 10,
        };
        let fp = 0x3_ffff_ffff;
        assert_eq!(g.home(fp), 1023);
        assert_eq!(FpGeometry::tag(fp), 0xff);
        assert_eq!(FpGeometry::table(fp, 3), 7);
        assert_eq!(g.reconstruct(1023 + 5, e2.with_off(5)), 0xab | 1023 << 8);
    }
}
