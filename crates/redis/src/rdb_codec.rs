//! The compact encodings Redis nests inside the RDB objects of a DUMP
//! payload: listpack (Redis 7's, `listpack.c`), ziplist (Redis 6's, which
//! Redis 7.0 still reads, `ziplist.c`) and intset (`intset.c`). Readers
//! check every bound and answer `None` for anything malformed (RESTORE's
//! "Bad data format"); the listpack writer is for DUMP's streams, whose
//! RDB form has no other encoding.

use nvdepot_resp::string2ll;

/// Listpack: `u32` total bytes, `u16` element count (65535: unknown),
/// then elements (an encoding, its data, a back length) and `0xFF`.
const LP_HEADER: usize = 6;
const LP_EOF: u8 = 0xFF;

/// The bytes of an element's back length for an element of `l` bytes
/// (`lpEncodeBacklen`): 7 bits per byte, the first byte holding the top.
fn lp_backlen(l: usize, out: &mut Vec<u8>) {
    let n = match l {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2097150 => 3,
        2097151..=268435454 => 4,
        _ => 5,
    };
    // The top 7 bits first, without the continuation bit; every later
    // byte (towards the element's end) with it.
    for i in (0..n).rev() {
        let b = ((l >> (7 * i)) & 127) as u8;
        out.push(if i == n - 1 { b } else { b | 128 });
    }
}

/// The elements of a listpack, each as Redis hands it back (an integer
/// element as its decimal text), or `None` if it is malformed.
pub fn listpack_elements(lp: &[u8]) -> Option<Vec<Vec<u8>>> {
    let total = u32::from_le_bytes(lp.get(..4)?.try_into().ok()?) as usize;
    let count = u16::from_le_bytes(lp.get(4..6)?.try_into().ok()?);
    if total != lp.len() || lp.last() != Some(&LP_EOF) {
        return None;
    }
    let mut out = Vec::new();
    let mut at = LP_HEADER;
    let mut backlen = Vec::with_capacity(5);
    loop {
        let b = *lp.get(at)?;
        if b == LP_EOF {
            break;
        }
        let (element, used) = lp_element(&lp[at..])?;
        backlen.clear();
        lp_backlen(used, &mut backlen);
        if lp.get(at + used..at + used + backlen.len())? != backlen.as_slice() {
            return None;
        }
        out.push(element);
        at += used + backlen.len();
    }
    if at != lp.len() - 1 || (count != u16::MAX && usize::from(count) != out.len()) {
        return None;
    }
    Some(out)
}

/// One listpack element at the start of `p`: its value and the bytes of
/// its encoding and data (without the back length).
fn lp_element(p: &[u8]) -> Option<(Vec<u8>, usize)> {
    let b = p[0];
    let int = |v: i64, used: usize| Some((v.to_string().into_bytes(), used));
    let le = |n: usize| -> Option<i64> {
        let bytes = p.get(1..1 + n)?;
        let mut v: u64 = 0;
        for (i, &x) in bytes.iter().enumerate() {
            v |= u64::from(x) << (8 * i);
        }
        // Sign-extend from n bytes.
        let shift = 64 - 8 * n as u32;
        Some(((v << shift) as i64) >> shift)
    };
    let string = |len: usize, head: usize| {
        let s = p.get(head..head.checked_add(len)?)?;
        Some((s.to_vec(), head + len))
    };
    match b {
        0x00..=0x7F => int(i64::from(b), 1),
        0x80..=0xBF => string(usize::from(b & 0x3f), 1),
        0xC0..=0xDF => {
            let uv = (u64::from(b & 0x1f) << 8) | u64::from(*p.get(1)?);
            let v = if uv >= 1 << 12 {
                uv as i64 - (1 << 13)
            } else {
                uv as i64
            };
            int(v, 2)
        }
        0xE0..=0xEF => string((usize::from(b & 0x0f) << 8) | usize::from(*p.get(1)?), 2),
        0xF0 => string(
            u32::from_le_bytes(p.get(1..5)?.try_into().ok()?) as usize,
            5,
        ),
        0xF1 => int(le(2)?, 3),
        0xF2 => int(le(3)?, 4),
        0xF3 => int(le(4)?, 5),
        0xF4 => int(le(8)?, 9),
        _ => None,
    }
}

/// Builds a listpack as Redis's `lpAppend` would: strings that read as
/// integers (`string2ll`) stored as integers.
#[derive(Default)]
pub struct ListpackWriter {
    body: Vec<u8>,
    count: usize,
}

impl ListpackWriter {
    pub fn push_int(&mut self, v: i64) {
        let start = self.body.len();
        if (0..=127).contains(&v) {
            self.body.push(v as u8);
        } else if (-4096..=4095).contains(&v) {
            let uv = if v < 0 { v + (1 << 13) } else { v } as u64;
            self.body.push(0xC0 | (uv >> 8) as u8);
            self.body.push(uv as u8);
        } else {
            let (tag, n) = if i16::try_from(v).is_ok() {
                (0xF1, 2)
            } else if (-(1 << 23)..(1 << 23)).contains(&v) {
                (0xF2, 3)
            } else if i32::try_from(v).is_ok() {
                (0xF3, 4)
            } else {
                (0xF4, 8)
            };
            self.body.push(tag);
            self.body.extend_from_slice(&v.to_le_bytes()[..n]);
        }
        let used = self.body.len() - start;
        lp_backlen(used, &mut self.body);
        self.count += 1;
    }

    pub fn push(&mut self, s: &[u8]) {
        if s.len() <= 20 {
            if let Some(v) = string2ll(s) {
                return self.push_int(v);
            }
        }
        let start = self.body.len();
        let len = s.len();
        if len < 64 {
            self.body.push(0x80 | len as u8);
        } else if len < 4096 {
            self.body.push(0xE0 | (len >> 8) as u8);
            self.body.push(len as u8);
        } else {
            self.body.push(0xF0);
            self.body.extend_from_slice(&(len as u32).to_le_bytes());
        }
        self.body.extend_from_slice(s);
        let used = self.body.len() - start;
        lp_backlen(used, &mut self.body);
        self.count += 1;
    }

    pub fn finish(self) -> Vec<u8> {
        let total = LP_HEADER + self.body.len() + 1;
        let mut out = Vec::with_capacity(total);
        out.extend_from_slice(&(total as u32).to_le_bytes());
        let count = u16::try_from(self.count).unwrap_or(u16::MAX);
        out.extend_from_slice(&count.to_le_bytes());
        out.extend_from_slice(&self.body);
        out.push(LP_EOF);
        out
    }
}

/// The entries of a ziplist (`u32` bytes, `u32` tail offset, `u16`
/// count, entries each with the previous one's length, `0xFF`), or `None`
/// if it is malformed.
pub fn ziplist_elements(zl: &[u8]) -> Option<Vec<Vec<u8>>> {
    let total = u32::from_le_bytes(zl.get(..4)?.try_into().ok()?) as usize;
    let count = u16::from_le_bytes(zl.get(8..10)?.try_into().ok()?);
    if total != zl.len() || zl.last() != Some(&0xFF) {
        return None;
    }
    let mut out = Vec::new();
    let mut at = 10;
    let mut prev = 0usize;
    loop {
        let start = at;
        let first = *zl.get(at)?;
        if first == 0xFF {
            break;
        }
        // The previous entry's length: one byte, or 0xFE and four.
        let prevlen = if first < 0xFE {
            at += 1;
            usize::from(first)
        } else if first == 0xFE {
            at += 5;
            u32::from_le_bytes(zl.get(start + 1..start + 5)?.try_into().ok()?) as usize
        } else {
            return None;
        };
        if prevlen != prev {
            return None;
        }
        let enc = *zl.get(at)?;
        let le = |from: usize, n: usize| -> Option<i64> {
            let bytes = zl.get(from..from + n)?;
            let mut v: u64 = 0;
            for (i, &x) in bytes.iter().enumerate() {
                v |= u64::from(x) << (8 * i);
            }
            let shift = 64 - 8 * n as u32;
            Some(((v << shift) as i64) >> shift)
        };
        let (value, end) = match enc >> 6 {
            0 => {
                let len = usize::from(enc & 0x3f);
                (zl.get(at + 1..at + 1 + len)?.to_vec(), at + 1 + len)
            }
            1 => {
                let len = (usize::from(enc & 0x3f) << 8) | usize::from(*zl.get(at + 1)?);
                (zl.get(at + 2..at + 2 + len)?.to_vec(), at + 2 + len)
            }
            2 if enc == 0x80 => {
                let len = u32::from_be_bytes(zl.get(at + 1..at + 5)?.try_into().ok()?) as usize;
                (
                    zl.get(at + 5..(at + 5).checked_add(len)?)?.to_vec(),
                    at + 5 + len,
                )
            }
            2 => return None,
            _ => {
                let (v, n) = match enc {
                    0xC0 => (le(at + 1, 2)?, 2),
                    0xD0 => (le(at + 1, 4)?, 4),
                    0xE0 => (le(at + 1, 8)?, 8),
                    0xF0 => (le(at + 1, 3)?, 3),
                    0xFE => (le(at + 1, 1)?, 1),
                    0xF1..=0xFD => (i64::from(enc & 0x0f) - 1, 0),
                    _ => return None,
                };
                (v.to_string().into_bytes(), at + 1 + n)
            }
        };
        out.push(value);
        prev = end - start;
        at = end;
    }
    if at != zl.len() - 1 || (count != u16::MAX && usize::from(count) != out.len()) {
        return None;
    }
    Some(out)
}

/// The members of an intset (`u32` width 2, 4 or 8, `u32` count, the
/// integers little endian, ascending and distinct), or `None`.
pub fn intset_members(is: &[u8]) -> Option<Vec<i64>> {
    let width = u32::from_le_bytes(is.get(..4)?.try_into().ok()?) as usize;
    let count = u32::from_le_bytes(is.get(4..8)?.try_into().ok()?) as usize;
    if !matches!(width, 2 | 4 | 8) || is.len() != 8 + width.checked_mul(count)? {
        return None;
    }
    let members: Vec<i64> = is[8..]
        .chunks_exact(width)
        .map(|c| match width {
            2 => i64::from(i16::from_le_bytes([c[0], c[1]])),
            4 => i64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]])),
            _ => i64::from_le_bytes(c.try_into().unwrap_or_default()),
        })
        .collect();
    members.windows(2).all(|w| w[0] < w[1]).then_some(members)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listpacks_round_trip_every_encoding() {
        let long = vec![b'x'; 5000];
        let mid = vec![b'y'; 300];
        let values: Vec<Vec<u8>> = vec![
            b"".to_vec(),
            b"a".to_vec(),
            b"0".to_vec(),
            b"127".to_vec(),
            b"128".to_vec(),
            b"-1".to_vec(),
            b"-4096".to_vec(),
            b"4095".to_vec(),
            b"-32768".to_vec(),
            b"32767".to_vec(),
            b"8388607".to_vec(),
            b"-8388608".to_vec(),
            b"2147483647".to_vec(),
            b"-2147483649".to_vec(),
            i64::MIN.to_string().into_bytes(),
            i64::MAX.to_string().into_bytes(),
            b"007".to_vec(),
            mid,
            long,
        ];
        let mut w = ListpackWriter::default();
        for v in &values {
            w.push(v);
        }
        let lp = w.finish();
        assert_eq!(listpack_elements(&lp), Some(values));
        // Any damage is refused or read as some elements, never a panic.
        for i in 0..lp.len() {
            let mut bad = lp.clone();
            bad[i] ^= 0x5a;
            let _ = listpack_elements(&bad);
            let _ = listpack_elements(&lp[..i]);
        }
    }

    #[test]
    fn backlen_matches_redis() {
        let mut b = Vec::new();
        lp_backlen(127, &mut b);
        assert_eq!(b, [127]);
        b.clear();
        lp_backlen(128, &mut b);
        assert_eq!(b, [1, 128]);
        b.clear();
        lp_backlen(5005, &mut b);
        assert_eq!(b, [(5005u32 >> 7) as u8, ((5005u32 & 127) | 128) as u8]);
    }

    /// A ziplist as Redis 6 wrote `RPUSH l hello 12 -5 70000 …`.
    fn ziplist(entries: &[&[u8]]) -> Vec<u8> {
        let mut body = Vec::new();
        let mut prev = 0usize;
        for e in entries {
            let start = body.len();
            if prev < 254 {
                body.push(prev as u8);
            } else {
                body.push(0xFE);
                body.extend_from_slice(&(prev as u32).to_le_bytes());
            }
            match string2ll(e) {
                Some(v @ 0..=12) => body.push(0xF1 + v as u8),
                Some(v) if i8::try_from(v).is_ok() => {
                    body.push(0xFE);
                    body.push(v as u8);
                }
                Some(v) if i16::try_from(v).is_ok() => {
                    body.push(0xC0);
                    body.extend_from_slice(&(v as i16).to_le_bytes());
                }
                Some(v) if (-(1 << 23)..(1 << 23)).contains(&v) => {
                    body.push(0xF0);
                    body.extend_from_slice(&v.to_le_bytes()[..3]);
                }
                Some(v) if i32::try_from(v).is_ok() => {
                    body.push(0xD0);
                    body.extend_from_slice(&(v as i32).to_le_bytes());
                }
                Some(v) => {
                    body.push(0xE0);
                    body.extend_from_slice(&v.to_le_bytes());
                }
                None if e.len() < 64 => {
                    body.push(e.len() as u8);
                    body.extend_from_slice(e);
                }
                None if e.len() < 16384 => {
                    body.push(0x40 | (e.len() >> 8) as u8);
                    body.push(e.len() as u8);
                    body.extend_from_slice(e);
                }
                None => {
                    body.push(0x80);
                    body.extend_from_slice(&(e.len() as u32).to_be_bytes());
                    body.extend_from_slice(e);
                }
            }
            prev = body.len() - start;
        }
        let total = 10 + body.len() + 1;
        let mut out = (total as u32).to_le_bytes().to_vec();
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&(entries.len() as u16).to_le_bytes());
        out.extend_from_slice(&body);
        out.push(0xFF);
        out
    }

    #[test]
    fn ziplists_read_every_encoding() {
        let long = vec![b'z'; 20000];
        let mid = vec![b'm'; 300];
        let entries: Vec<&[u8]> = vec![
            b"hello",
            b"0",
            b"12",
            b"13",
            b"-5",
            b"300",
            b"70000",
            b"-3000000000",
            b"",
            &mid,
            &long,
            b"x",
        ];
        let zl = ziplist(&entries);
        let read = ziplist_elements(&zl).expect("valid");
        let want: Vec<Vec<u8>> = entries.iter().map(|e| e.to_vec()).collect();
        assert_eq!(read, want);
        for i in 0..zl.len().min(400) {
            let mut bad = zl.clone();
            bad[i] ^= 0x33;
            let _ = ziplist_elements(&bad);
        }
    }

    #[test]
    fn intsets_are_checked() {
        let mut is = 2u32.to_le_bytes().to_vec();
        is.extend_from_slice(&3u32.to_le_bytes());
        for v in [-5i16, 1, 300] {
            is.extend_from_slice(&v.to_le_bytes());
        }
        assert_eq!(intset_members(&is), Some(vec![-5, 1, 300]));
        let mut unsorted = is.clone();
        unsorted[8..10].copy_from_slice(&400i16.to_le_bytes());
        assert_eq!(intset_members(&unsorted), None);
        assert_eq!(intset_members(&is[..is.len() - 1]), None);
    }
}
