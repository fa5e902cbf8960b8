//! Redis's DUMP payload framing, for FUNCTION DUMP / RESTORE: RDB-encoded
//! items, then the RDB version (2 bytes, little endian) and a CRC-64
//! (Jones, `crc64.c`, little endian) of everything before it. Payloads
//! pass between redis-server 7.0 and nvdepot both ways: nvdepot reads
//! Redis's strings in every RDB string encoding (plain, integer, LZF),
//! and writes plain ones (which Redis reads).

/// The RDB version Redis 7.0 writes (`RDB_VERSION`).
pub const RDB_VERSION: u16 = 10;

/// `RDB_OPCODE_FUNCTION2`: a function library's code follows.
pub const OPCODE_FUNCTION2: u8 = 245;

const CRC64: crc::Crc<u64> = crc::Crc::<u64>::new(&crc::CRC_64_REDIS);

/// Appends RDB length `n` (`rdbSaveLen`).
pub fn put_len(out: &mut Vec<u8>, n: u64) {
    if n < 1 << 6 {
        out.push(n as u8);
    } else if n < 1 << 14 {
        out.push(0x40 | (n >> 8) as u8);
        out.push(n as u8);
    } else if n <= u64::from(u32::MAX) {
        out.push(0x80);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// Appends `s` as an RDB string (plain encoding).
pub fn put_string(out: &mut Vec<u8>, s: &[u8]) {
    put_len(out, s.len() as u64);
    out.extend_from_slice(s);
}

/// Closes a payload: RDB version and CRC-64.
pub fn seal(mut payload: Vec<u8>) -> Vec<u8> {
    payload.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = CRC64.checksum(&payload);
    payload.extend_from_slice(&crc.to_le_bytes());
    payload
}

/// The items of a payload (without its footer) if its version is one this
/// server reads and its checksum holds (Redis's `verifyDumpPayload`).
pub fn verify(payload: &[u8]) -> Option<&[u8]> {
    if payload.len() < 10 {
        return None;
    }
    let body = payload.len() - 10;
    let version = u16::from_le_bytes([payload[body], payload[body + 1]]);
    let crc = u64::from_le_bytes(payload[body + 2..].try_into().ok()?);
    (version <= RDB_VERSION && CRC64.checksum(&payload[..body + 2]) == crc)
        .then_some(&payload[..body])
}

/// A reader of RDB items.
pub struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    pub fn new(data: &'a [u8]) -> Reader<'a> {
        Reader { data, at: 0 }
    }

    pub fn done(&self) -> bool {
        self.at >= self.data.len()
    }

    pub fn byte(&mut self) -> Option<u8> {
        let b = *self.data.get(self.at)?;
        self.at += 1;
        Some(b)
    }

    /// The next `n` bytes as they are.
    pub fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.at.checked_add(n)?;
        let s = self.data.get(self.at..end)?;
        self.at = end;
        Some(s)
    }

    /// An RDB length, or the special encoding (`Err`) it announces.
    fn len(&mut self) -> Option<Result<u64, u8>> {
        let b = self.byte()?;
        Some(match b >> 6 {
            0 => Ok(u64::from(b & 0x3f)),
            1 => Ok(u64::from(b & 0x3f) << 8 | u64::from(self.byte()?)),
            2 if b == 0x80 => Ok(u64::from(u32::from_be_bytes(
                self.take(4)?.try_into().ok()?,
            ))),
            2 if b == 0x81 => Ok(u64::from_be_bytes(self.take(8)?.try_into().ok()?)),
            2 => return None,
            _ => Err(b & 0x3f),
        })
    }

    /// A plain RDB length (`rdbLoadLen` without an encoding).
    pub fn length(&mut self) -> Option<u64> {
        self.len()?.ok()
    }

    /// A count of things that follow, each at least a byte: refused when
    /// more than the bytes left could hold (so a damaged count cannot ask
    /// for a huge allocation).
    pub fn count(&mut self) -> Option<usize> {
        let n = usize::try_from(self.length()?).ok()?;
        (n <= self.data.len() - self.at).then_some(n)
    }

    /// An RDB string in any of Redis's encodings (`rdbGenericLoadStringObject`).
    pub fn string(&mut self) -> Option<Vec<u8>> {
        match self.len()? {
            Ok(n) => Some(self.take(usize::try_from(n).ok()?)?.to_vec()),
            // Integers stored as 1, 2 or 4 bytes, little endian.
            Err(0) => Some((self.byte()? as i8).to_string().into_bytes()),
            Err(1) => {
                let v = i16::from_le_bytes(self.take(2)?.try_into().ok()?);
                Some(v.to_string().into_bytes())
            }
            Err(2) => {
                let v = i32::from_le_bytes(self.take(4)?.try_into().ok()?);
                Some(v.to_string().into_bytes())
            }
            Err(3) => {
                let clen = usize::try_from(self.len()?.ok()?).ok()?;
                let len = usize::try_from(self.len()?.ok()?).ok()?;
                lzf_decompress(self.take(clen)?, len)
            }
            Err(_) => None,
        }
    }
}

/// LZF decompression (liblzf's `lzf_decompress`, which Redis uses for RDB
/// strings): `None` unless `input` decodes to exactly `len` bytes. Written
/// out (20 lines) rather than a dependency: it only reads, and checks
/// every bound.
fn lzf_decompress(input: &[u8], len: usize) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(len.min(input.len().saturating_mul(256)));
    let mut i = 0;
    while i < input.len() {
        let ctrl = usize::from(input[i]);
        i += 1;
        if ctrl < 32 {
            // A literal run of ctrl + 1 bytes.
            let run = input.get(i..i + ctrl + 1)?;
            if out.len() + run.len() > len {
                return None;
            }
            out.extend_from_slice(run);
            i += ctrl + 1;
        } else {
            // A back reference: length (3 bits, extended), distance.
            let mut n = ctrl >> 5;
            if n == 7 {
                n += usize::from(*input.get(i)?);
                i += 1;
            }
            n += 2;
            let back = ((ctrl & 0x1f) << 8) + usize::from(*input.get(i)?) + 1;
            i += 1;
            if back > out.len() || out.len() + n > len {
                return None;
            }
            let start = out.len() - back;
            for k in 0..n {
                let b = out[start + k];
                out.push(b);
            }
        }
    }
    (out.len() == len).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc64_is_redis_jones() {
        // crc64.c's test vector.
        assert_eq!(CRC64.checksum(b"123456789"), 0xe9c6d914c4b8d9ca);
    }

    #[test]
    fn payloads_round_trip_and_damage_is_refused() {
        let mut items = vec![OPCODE_FUNCTION2];
        let code = vec![b'x'; 300];
        put_string(&mut items, &code);
        let sealed = seal(items.clone());
        assert_eq!(verify(&sealed), Some(&items[..]));
        let mut r = Reader::new(verify(&sealed).unwrap());
        assert_eq!(r.byte(), Some(OPCODE_FUNCTION2));
        assert_eq!(r.string(), Some(code));
        assert!(r.done());
        let mut bad = sealed.clone();
        bad[3] ^= 1;
        assert_eq!(verify(&bad), None);
        let mut newer = items;
        newer.extend_from_slice(&(RDB_VERSION + 1).to_le_bytes());
        let crc = CRC64.checksum(&newer);
        newer.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(verify(&newer), None);
        assert_eq!(verify(b"short"), None);
    }

    /// The payload parser on damaged and random input (a fuzz target's
    /// property, as the parsers' property tests): never a panic, every
    /// string read bounded by the input.
    #[test]
    fn any_bytes_give_items_or_a_refusal() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut items = vec![OPCODE_FUNCTION2];
        put_string(&mut items, &[b'a'; 100]);
        items.extend_from_slice(&[OPCODE_FUNCTION2, 0xC3, 4, 12, 2, b'a', b'b', b'c', 224]);
        for round in 0..20_000 {
            let mut data = if round % 2 == 0 {
                items.clone()
            } else {
                (0..rng.gen_range(0..64)).map(|_| rng.gen()).collect()
            };
            for _ in 0..rng.gen_range(0..4) {
                if !data.is_empty() {
                    let i = rng.gen_range(0..data.len());
                    data[i] = rng.gen();
                }
            }
            let sealed = seal(data.clone());
            let body = verify(&sealed).expect("sealed here");
            let mut r = Reader::new(body);
            while !r.done() {
                if r.byte().is_none() {
                    break;
                }
                match r.string() {
                    Some(s) => assert!(s.len() <= body.len() * 256 + 20),
                    None => break,
                }
            }
        }
    }

    #[test]
    fn lzf_reads_literals_and_back_references() {
        // "abcabcabcabc": literal "abc", then a back reference of 9 at 3.
        let packed = [2, b'a', b'b', b'c', (7 << 5), 0, 2];
        assert_eq!(
            lzf_decompress(&packed, 12).as_deref(),
            Some(&b"abcabcabcabc"[..])
        );
        assert_eq!(lzf_decompress(&packed, 11), None);
        assert_eq!(lzf_decompress(&[(1 << 5), 5], 4), None);
    }
}
