//! The compact layout of a collection: the whole collection in the key's
//! own record, as Redis keeps small collections in one listpack. Any
//! operation on it is one read of the record and at most one write.
//!
//! ```text
//! u8     shape: 0 = small (Redis would use its compact encoding:
//!        listpack, intset), 1 = large (Redis would have converted it:
//!        hashtable, skiplist; never goes back, as in Redis)
//! items  each a LEB128 length, then its bytes (a hash: field, value,
//!        field, value …; a set: its members)
//! ```
//!
//! Documented in docs/FORMAT.md ("Redis collections").

use nvdepot_cache::Error;

/// A decoded compact collection.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Compact {
    /// Past Redis's compact thresholds once (OBJECT ENCODING).
    pub large: bool,
    pub items: Vec<Vec<u8>>,
}

/// Bytes of a length prefix at most.
const LEN_BYTES_MAX: usize = 5;

impl Compact {
    /// Decodes a record's data (after its expiry).
    pub fn decode(data: &[u8]) -> Result<Compact, Error> {
        let bad = |what: &str| Error::Envelope(format!("compact collection: {what}"));
        let (&shape, mut rest) = data.split_first().ok_or_else(|| bad("empty"))?;
        if shape > 1 {
            return Err(bad("unknown shape"));
        }
        let mut items = Vec::new();
        while !rest.is_empty() {
            let (len, used) = read_len(rest).ok_or_else(|| bad("bad length"))?;
            rest = &rest[used..];
            if rest.len() < len {
                return Err(bad("item past the end"));
            }
            items.push(rest[..len].to_vec());
            rest = &rest[len..];
        }
        Ok(Compact {
            large: shape == 1,
            items,
        })
    }

    /// The record's data.
    pub fn encode(&self) -> Vec<u8> {
        let bytes: usize = self.items.iter().map(|i| i.len() + LEN_BYTES_MAX).sum();
        let mut out = Vec::with_capacity(1 + bytes);
        out.push(u8::from(self.large));
        for item in &self.items {
            write_len(&mut out, item.len());
            out.extend_from_slice(item);
        }
        out
    }
}

/// Checks encoded data whole without copying it: its shape byte and every
/// item's length. Returns (large, items). For the readers that then walk
/// [`items`] answering as they go, so a damaged record is an error before
/// any half of a reply.
pub fn check_items(data: &[u8]) -> Result<(bool, usize), Error> {
    let large = match data.first() {
        Some(0) => false,
        Some(1) => true,
        _ => return Err(Error::Envelope("compact collection: unknown shape".into())),
    };
    let count = items(data).try_fold(0usize, |n, i| i.map(|_| n + 1))?;
    Ok((large, count))
}

/// Appends one item (its length, then its bytes) to encoded data.
pub fn push_item(out: &mut Vec<u8>, item: &[u8]) {
    write_len(out, item.len());
    out.extend_from_slice(item);
}

/// The items of encoded data (after its shape byte), borrowed, each with
/// the offset where its length prefix starts: no allocation per item.
pub fn items(data: &[u8]) -> Items<'_> {
    Items { data, at: 1 }
}

/// See [`items`].
pub struct Items<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Iterator for Items<'a> {
    /// (offset of the item's length prefix, the item), or the damage.
    type Item = Result<(usize, &'a [u8]), Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.at >= self.data.len() {
            return None;
        }
        let start = self.at;
        match item_at(self.data, start) {
            Ok((end, item)) => {
                self.at = end;
                Some(Ok((start, item)))
            }
            Err(e) => {
                self.at = self.data.len();
                Some(Err(e))
            }
        }
    }
}

/// The item of encoded data whose length prefix starts at `at`: (where it
/// ends, the item), or the damage.
pub fn item_at(data: &[u8], at: usize) -> Result<(usize, &[u8]), Error> {
    let bad = |what: &str| Error::Envelope(format!("compact collection: {what}"));
    let rest = data.get(at..).unwrap_or_default();
    let (len, used) = read_len(rest).ok_or_else(|| bad("bad length"))?;
    if rest.len() - used < len {
        return Err(bad("item past the end"));
    }
    Ok((at + used + len, &rest[used..used + len]))
}

fn write_len(out: &mut Vec<u8>, n: usize) {
    let (prefix, used) = len_prefix(n);
    out.extend_from_slice(&prefix[..used]);
}

/// The LEB128 length prefix of an item of `n` bytes: (its bytes, how
/// many of them it takes).
pub fn len_prefix(mut n: usize) -> ([u8; LEN_BYTES_MAX], usize) {
    let mut out = [0u8; LEN_BYTES_MAX];
    let mut used = 0;
    while n >= 0x80 {
        out[used] = (n as u8) | 0x80;
        n >>= 7;
        used += 1;
    }
    out[used] = n as u8;
    (out, used + 1)
}

/// A LEB128 length at the start of `b`: (length, bytes it took).
pub fn read_len(b: &[u8]) -> Option<(usize, usize)> {
    let mut n = 0usize;
    for (i, &byte) in b.iter().take(LEN_BYTES_MAX).enumerate() {
        n |= usize::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((n, i + 1));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let c = Compact {
            large: true,
            items: vec![vec![], vec![7; 300], b"x".to_vec(), vec![0; 70_000]],
        };
        assert_eq!(Compact::decode(&c.encode()).unwrap(), c);
        let empty = Compact::default();
        assert_eq!(Compact::decode(&empty.encode()).unwrap(), empty);
    }

    #[test]
    fn damage_is_an_error() {
        for bad in [
            &[][..],
            &[2],
            &[0, 5, b'a'],
            &[0, 0x80, 0x80, 0x80, 0x80, 0x80],
        ] {
            assert!(Compact::decode(bad).is_err(), "{bad:?}");
            assert!(check_items(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn checked_items_count_as_decoded() {
        let c = Compact {
            large: false,
            items: vec![vec![], vec![7; 300], b"x".to_vec()],
        };
        assert_eq!(check_items(&c.encode()).unwrap(), (false, 3));
        assert_eq!(check_items(&[1]).unwrap(), (true, 0));
    }
}
