//! Correcting one flipped bit in a record, found by its checksums.
//!
//! CRC32C's Hamming distance is at least 3 for any message shorter than
//! 2^31 bits, so two different one-bit corrections can never both check:
//! a correction that checks is the one. Recovery uses this in two places:
//! to learn the key of a record whose value is lost (so that the key's
//! older value stays hidden), and to restore an evictions record whole
//! (its value lists the keys whose older values it hides; without it they
//! would come back) or a namespace registry record (without it its whole
//! namespace would be lost). docs/FORMAT.md, "Damage".

use crate::format::{
    check_record, check_record_head, get_u32, put_u32, RecordCheck, RecordHeader, RecordKind,
    RECORD_HEADER_BYTES,
};
use crate::namespace::SYSTEM_NS;

/// Longest key [`repair_head`] tries to correct a bit of (the work grows
/// with the square of the header and key's length).
const REPAIR_KEY_MAX: usize = 1024;

/// Castagnoli's polynomial, bit-reflected (as `crc32c` computes).
const POLY: u32 = 0x82F6_3B78;

/// Where one flipped bit in a record's head (header fields, key, header
/// checksum) is: the byte and the bit's mask; `None` if the head checks
/// already, or no single flip makes it check.
fn head_bit(buf: &[u8]) -> Option<(usize, u8)> {
    if matches!(check_record_head(buf), RecordCheck::Valid(_)) {
        return None;
    }
    let span = buf.len().min(RECORD_HEADER_BYTES + REPAIR_KEY_MAX);
    let mut scratch = buf[..span].to_vec();
    for byte in 4..span {
        for bit in 0..8 {
            scratch[byte] ^= 1 << bit;
            if let RecordCheck::Valid(h) = check_record_head(&scratch) {
                if h.kind != RecordKind::Pad {
                    return Some((byte, 1 << bit));
                }
            }
            scratch[byte] ^= 1 << bit;
        }
    }
    None
}

/// The header and key of a record whose header checksum fails because of
/// one flipped bit (in the header fields, the key, or the checksum
/// itself), corrected; `None` if the head checks already, or no single
/// flip makes it check.
pub(crate) fn repair_head(buf: &[u8]) -> Option<(RecordHeader, Vec<u8>)> {
    let (byte, mask) = head_bit(buf)?;
    let span = buf.len().min(RECORD_HEADER_BYTES + REPAIR_KEY_MAX);
    let mut scratch = buf[..span].to_vec();
    scratch[byte] ^= mask;
    match check_record_head(&scratch) {
        RecordCheck::Valid(h) => {
            let k = RECORD_HEADER_BYTES;
            Some((h, scratch[k..k + h.key_len as usize].to_vec()))
        }
        _ => None,
    }
}

/// The bit (`byte * 8 + bit`, bit 0 the least significant) whose flip
/// makes `crc32c(data)` equal `expected`, if one does.
///
/// The CRC is affine in the data, so flipping bit `t` changes it by a
/// value that depends only on `t` and the length: the CRC register (no
/// initial value, no final xor) of a message of zeros but for that bit.
/// Reflected, a one fed into an empty register leaves the polynomial
/// there, and each bit after it steps the register once. Walking `t`
/// from the last bit back computes them all in one pass, with no second
/// checksum of the data.
fn flipped_bit(data: &[u8], expected: u32) -> Option<usize> {
    let syndrome = crc32c::crc32c(data) ^ expected;
    if syndrome == 0 {
        return None;
    }
    let mut delta = POLY;
    for t in (0..data.len() * 8).rev() {
        if delta == syndrome {
            return Some(t);
        }
        delta = (delta >> 1) ^ if delta & 1 != 0 { POLY } else { 0 };
    }
    None
}

/// An evictions record or a namespace registry record at the start of
/// `buf` that fails its checksums because of one flipped bit anywhere in
/// it, corrected: its header and bytes. `None` if it is not one, checks
/// already, or no single flip makes both its checksums hold.
///
/// Only these records are restored from the record checksum alone, each
/// because losing it loses far more than itself: an evictions record
/// hides the older values of the keys it lists, and a registry record
/// (a put in namespace 0 naming a namespace's ids, 8 bytes of value) is
/// the only record of its namespace's name, so dropping it would drop
/// every key of the namespace. A torn write, many bits wrong, passes a
/// one-bit correction with probability about (its bits) / 2^32; a wrongly
/// restored evictions record at worst hides keys that do not exist, and
/// registry records are written only when a namespace is created or
/// cleared. A restored user put, in contrast, could serve garbage.
pub(crate) fn repair_system_record(buf: &[u8]) -> Option<(RecordHeader, Vec<u8>)> {
    // Cheap first: the kind byte, key length, namespace and value length
    // as stored must be an evictions record's (4, no key) or a registry
    // record's (1, namespace 0, 8-byte value) but for one bit at most.
    // This spares every other damaged or torn record the search below.
    if buf.len() < RECORD_HEADER_BYTES {
        return None;
    }
    let kind_off = |k: RecordKind| (buf[8] ^ k as u8).count_ones();
    let key_len = u16::from_le_bytes([buf[10], buf[11]]);
    let value_len = u32::from_le_bytes([buf[12], buf[13], buf[14], buf[15]]);
    let namespace = u32::from_le_bytes([buf[16], buf[17], buf[18], buf[19]]);
    let evictions = kind_off(RecordKind::Evictions) + key_len.count_ones() <= 1;
    let registry = kind_off(RecordKind::Put)
        + (value_len ^ REGISTRY_VALUE_BYTES).count_ones()
        + (namespace ^ SYSTEM_NS).count_ones()
        <= 1;
    if !evictions && !registry {
        return None;
    }
    let head_fix = match check_record_head(buf) {
        RecordCheck::Valid(_) => None,
        _ => {
            let (byte, mask) = head_bit(buf)?;
            if byte >= RECORD_HEADER_BYTES && !registry {
                // The flip is in a key: the corrected head has one, so it
                // is not an evictions record's.
                return None;
            }
            Some((byte, mask))
        }
    };
    let span = buf.len().min(RECORD_HEADER_BYTES + REPAIR_KEY_MAX);
    let mut head = buf[..span].to_vec();
    if let Some((byte, mask)) = head_fix {
        head[byte] ^= mask;
    }
    let RecordCheck::Valid(h) = check_record_head(&head) else {
        return None;
    };
    let end = h.body_bytes();
    if !restorable(&h) || end > buf.len() {
        return None;
    }
    let mut rec = buf[..end].to_vec();
    if let Some((byte, mask)) = head_fix {
        // The record checksum covers the head too: with the head
        // corrected, the record checks whole or the damage is wider.
        rec[byte] ^= mask;
    } else {
        let stored = get_u32(&rec, 0);
        let computed = crc32c::crc32c(&rec[4..]);
        if (stored ^ computed).count_ones() == 1 {
            // The flipped bit is in the stored checksum itself.
            put_u32(&mut rec, 0, computed);
        } else {
            let t = flipped_bit(&rec[4..], stored)?;
            rec[4 + t / 8] ^= 1 << (t % 8);
        }
    }
    match check_record(&rec) {
        RecordCheck::Valid(h) if restorable(&h) => Some((h, rec)),
        _ => None,
    }
}

/// Bytes of a namespace registry record's value (`namespace.rs`).
const REGISTRY_VALUE_BYTES: u32 = 8;

/// Whether [`repair_system_record`] restores a record of this header.
fn restorable(h: &RecordHeader) -> bool {
    h.kind == RecordKind::Evictions
        || (h.kind == RecordKind::Put
            && h.namespace == SYSTEM_NS
            && h.value_len == REGISTRY_VALUE_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{encode_evictions, encode_record, EvictedKey, FlushMark};

    #[test]
    fn one_flipped_bit_in_a_head_is_corrected() {
        let h = RecordHeader {
            kind: RecordKind::Put,
            member: false,
            key_len: 7,
            value_len: 20,
            namespace: 3,
            seq: 1234,
            segment_seq: 77,
            flushed: FlushMark::at(70, 1 << 20, 64 << 20),
        };
        let mut buf = vec![0u8; 512];
        let used = encode_record(&mut buf, &h, b"the-key", &[9; 20]);
        assert_eq!(repair_head(&buf), None, "nothing to repair");
        // Every bit of the head checksum, the fields and the key.
        for bit in 32..(RECORD_HEADER_BYTES + 7) * 8 {
            let mut bad = buf.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            let (fixed, key) = repair_head(&bad).unwrap_or_else(|| panic!("bit {bit}"));
            assert_eq!((fixed, key.as_slice()), (h, &b"the-key"[..]), "bit {bit}");
        }
        // A flip in the value leaves the head valid: nothing to repair.
        let mut bad = buf.clone();
        bad[used - 1] ^= 4;
        assert_eq!(repair_head(&bad), None);
        // Two flips are not one: no guess.
        let mut bad = buf.clone();
        bad[12] ^= 1;
        bad[45] ^= 2;
        assert_eq!(repair_head(&bad), None);
    }

    #[test]
    fn the_flipped_bit_is_located_by_the_checksum_alone() {
        let data: Vec<u8> = (0..300u32).map(|i| (i * 7 + 3) as u8).collect();
        let crc = crc32c::crc32c(&data);
        assert_eq!(flipped_bit(&data, crc), None);
        for t in 0..data.len() * 8 {
            let mut bad = data.clone();
            bad[t / 8] ^= 1 << (t % 8);
            assert_eq!(flipped_bit(&bad, crc), Some(t), "bit {t}");
        }
        let mut two = data.clone();
        two[3] ^= 1;
        two[200] ^= 0x40;
        assert_eq!(flipped_bit(&two, crc), None, "two flips located as one");
    }

    fn evictions(n: u64) -> (RecordHeader, Vec<u8>) {
        let keys: Vec<EvictedKey> = (0..n)
            .map(|i| EvictedKey {
                namespace: 1,
                hash: i.wrapping_mul(0x9E37_79B9_7F4A_7C15),
                hash2: !i,
            })
            .collect();
        let value = encode_evictions(&keys);
        let h = RecordHeader {
            kind: RecordKind::Evictions,
            member: false,
            key_len: 0,
            value_len: value.len() as u32,
            namespace: 0,
            seq: 99,
            segment_seq: 5,
            flushed: FlushMark::at(4, 1 << 20, 64 << 20),
        };
        let mut buf = vec![0u8; (RECORD_HEADER_BYTES + value.len()).next_multiple_of(512)];
        let used = encode_record(&mut buf, &h, b"", &value);
        buf.truncate(used);
        (h, buf)
    }

    /// `buf` (the record `h`) is left alone, and each of its bits flipped
    /// alone is corrected back to it.
    fn every_flipped_bit_is_corrected(h: &RecordHeader, buf: &[u8]) {
        assert_eq!(repair_system_record(buf), None, "nothing to repair");
        for bit in 0..buf.len() * 8 {
            let mut bad = buf.to_vec();
            bad[bit / 8] ^= 1 << (bit % 8);
            let (fixed, bytes) = repair_system_record(&bad).unwrap_or_else(|| panic!("bit {bit}"));
            assert_eq!((&fixed, &bytes[..]), (h, buf), "bit {bit}");
        }
    }

    #[test]
    fn one_flipped_bit_anywhere_in_an_evictions_record_is_corrected() {
        let (h, buf) = evictions(40);
        every_flipped_bit_is_corrected(&h, &buf);
        // Two flips, in the value or head and value: no guess.
        for (a, b) in [(100, 400), (9 * 8, 300 * 8), (2, 33)] {
            let mut bad = buf.clone();
            bad[a / 8] ^= 1 << (a % 8);
            bad[b / 8] ^= 1 << (b % 8);
            assert_eq!(repair_system_record(&bad), None, "bits {a} and {b}");
        }
        // A user put is never restored from its record checksum, even one
        // shaped like a registry record but for its namespace.
        let mut put = vec![0u8; 512];
        let hp = RecordHeader {
            kind: RecordKind::Put,
            member: false,
            key_len: 1,
            value_len: 8,
            namespace: 1,
            ..h
        };
        let used = encode_record(&mut put, &hp, b"k", &[1; 8]);
        put[used - 1] ^= 1;
        assert_eq!(repair_system_record(&put), None);
    }

    /// The record naming a namespace is its only one: one flipped bit
    /// anywhere in it must not lose the namespace (found by the crash
    /// test once seals made damage to recent records count as damage).
    #[test]
    fn one_flipped_bit_anywhere_in_a_namespace_registry_record_is_corrected() {
        let h = RecordHeader {
            kind: RecordKind::Put,
            member: false,
            key_len: 7,
            value_len: 8,
            namespace: SYSTEM_NS,
            seq: 7831,
            segment_seq: 21,
            flushed: FlushMark::at(20, 3 << 20, 64 << 20),
        };
        let value = crate::namespace::encode_registry_value(1, 1);
        let mut buf = vec![0u8; 512];
        let used = encode_record(&mut buf, &h, b"default", &value);
        buf.truncate(used);
        every_flipped_bit_is_corrected(&h, &buf);
        let mut two = buf.clone();
        two[50] ^= 1;
        two[used - 2] ^= 8;
        assert_eq!(repair_system_record(&two), None, "two flips");
    }

    /// Found by the `scan` fuzz target: an evictions kind with a key
    /// length of one set bit passed the cheap test, and the head's flipped
    /// bit was found in its key, past the header this function corrects.
    #[test]
    fn a_head_corrected_in_its_key_is_not_an_evictions_record() {
        let key = vec![b'k'; 1024];
        let h = RecordHeader {
            key_len: key.len() as u16,
            value_len: 16,
            ..evictions(1).0
        };
        let mut buf = vec![0u8; 2048];
        encode_record(&mut buf, &h, &key, &[0; 16]);
        buf[RECORD_HEADER_BYTES + 1020] ^= 0x10;
        assert_eq!(repair_system_record(&buf), None);
    }
}
