//! Base64 for meta commands' `b` flag, with memcached's decoder rules:
//! characters outside the alphabet are skipped, the count of alphabet
//! characters must be a non-zero multiple of four, and decoding stops at
//! the first block holding padding. Failure is `None` (memcached returns a
//! decoded length of 0).

const TABLE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// The 6-bit value of an alphabet byte; `=` decodes as 0; others are
/// skipped.
#[inline]
fn sextet(b: u8) -> Option<u8> {
    match b {
        b'A'..=b'Z' => Some(b - b'A'),
        b'a'..=b'z' => Some(b - b'a' + 26),
        b'0'..=b'9' => Some(b - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        b'=' => Some(0),
        _ => None,
    }
}

/// Decodes `src` into `out` (cleared first). `None` when memcached's
/// decoder would fail.
pub(crate) fn decode(src: &[u8], out: &mut Vec<u8>) -> Option<()> {
    out.clear();
    let count = src.iter().filter(|&&b| sextet(b).is_some()).count();
    if count == 0 || count % 4 != 0 {
        return None;
    }
    let mut block = [0u8; 4];
    let mut n = 0;
    let mut pad = 0;
    for &b in src {
        let Some(v) = sextet(b) else { continue };
        if b == b'=' {
            pad += 1;
        }
        block[n] = v;
        n += 1;
        if n == 4 {
            out.push((block[0] << 2) | (block[1] >> 4));
            out.push((block[1] << 4) | (block[2] >> 2));
            out.push((block[2] << 6) | block[3]);
            n = 0;
            if pad > 0 {
                match pad {
                    1 => out.truncate(out.len() - 1),
                    2 => out.truncate(out.len() - 2),
                    _ => return None,
                }
                break;
            }
        }
    }
    // A key that decodes to nothing fails as in memcached (length 0).
    if out.is_empty() {
        None
    } else {
        Some(())
    }
}

/// Appends the base64 encoding of `src`, padded.
pub(crate) fn encode(src: &[u8], out: &mut Vec<u8>) {
    let mut chunks = src.chunks_exact(3);
    for c in &mut chunks {
        out.push(TABLE[usize::from(c[0] >> 2)]);
        out.push(TABLE[usize::from(((c[0] & 0x03) << 4) | (c[1] >> 4))]);
        out.push(TABLE[usize::from(((c[1] & 0x0f) << 2) | (c[2] >> 6))]);
        out.push(TABLE[usize::from(c[2] & 0x3f)]);
    }
    match *chunks.remainder() {
        [a] => {
            out.push(TABLE[usize::from(a >> 2)]);
            out.push(TABLE[usize::from((a & 0x03) << 4)]);
            out.extend_from_slice(b"==");
        }
        [a, b] => {
            out.push(TABLE[usize::from(a >> 2)]);
            out.push(TABLE[usize::from(((a & 0x03) << 4) | (b >> 4))]);
            out.push(TABLE[usize::from((b & 0x0f) << 2)]);
            out.push(b'=');
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(s: &[u8]) -> Option<Vec<u8>> {
        let mut v = Vec::new();
        decode(s, &mut v).map(|()| v)
    }

    #[test]
    fn round_trip() {
        for len in 0..20u8 {
            let src: Vec<u8> = (0..len).map(|i| i.wrapping_mul(37)).collect();
            let mut enc = Vec::new();
            encode(&src, &mut enc);
            if len == 0 {
                assert!(enc.is_empty());
            } else {
                assert_eq!(dec(&enc).unwrap(), src);
            }
        }
    }

    #[test]
    fn memcached_rules() {
        assert_eq!(dec(b"Zm9v").unwrap(), b"foo");
        assert_eq!(dec(b"ZTE=").unwrap(), b"e1");
        assert_eq!(dec(b"Zm9vYmFy").unwrap(), b"foobar");
        assert_eq!(dec(b"ZTE"), None);
        assert_eq!(dec(b"foo"), None);
        assert_eq!(dec(b"e1"), None);
        assert_eq!(dec(b"===="), None);
        assert_eq!(dec(b"Zm!9v").unwrap(), b"foo");
    }
}
