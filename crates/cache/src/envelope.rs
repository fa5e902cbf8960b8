//! The item envelope: what every face stores in front of an item's data,
//! inside the engine record's value. The layout is part of the on-device
//! format (docs/FORMAT.md, "Cache items"); keep the two in step.
//!
//! ```text
//!  0  u32  flags (LE): opaque to the cache layer (memcache: the client
//!           flags)
//!  4  u32  absolute expiry, Unix seconds (0 = never)
//!  8  u64  CAS unique kept by a touch (LE), or 0: the record's version is
//!           the CAS
//! 16  u8   marks: bits a face gives meaning to (memcache: bit 0 stale,
//!           bit 1 win token sent, bit 2 key given in base64); a face
//!           refuses bits it does not know
//! 17  [u8; 3] reserved, 0
//! 20  ...  the item's data
//! ```
//!
//! The CAS unique is the record's version (its sequence number): it changes
//! on every write, never repeats, and survives restarts. A touch rewrites
//! the item with a new expiry but, as memcached, the same CAS: the record
//! then carries the CAS it keeps (a version of an earlier record of the
//! key, so still unique).

use crate::Error;

/// Bytes of the envelope in front of the data.
pub const ENVELOPE_BYTES: usize = 20;

/// An item's metadata, as stored with it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Envelope {
    /// Opaque to the cache layer; the face's (memcache: client flags).
    pub flags: u32,
    /// Absolute expiry in Unix seconds; 0 = never.
    pub expires: u32,
    /// The face's marks (see the module comment).
    pub marks: u8,
}

impl Envelope {
    /// Not expired at Unix time `now`.
    pub fn is_live(&self, now: u32) -> bool {
        self.expires == 0 || self.expires > now
    }
}

/// An item as the cache layer hands it to a face.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Item {
    pub value: Vec<u8>,
    pub envelope: Envelope,
    /// The CAS unique: the kept one, or the record's version; never 0.
    pub cas: u64,
}

/// An item's parts, borrowed: what the DRAM tier copies in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ItemRef<'a> {
    pub value: &'a [u8],
    pub envelope: Envelope,
    pub cas: u64,
}

impl Item {
    /// The item's parts, borrowed.
    pub fn borrowed(&self) -> ItemRef<'_> {
        ItemRef {
            value: &self.value,
            envelope: self.envelope,
            cas: self.cas,
        }
    }
}

/// The record value of an item; `kept_cas` 0 = the record's version.
pub(crate) fn encode(value: &[u8], envelope: Envelope, kept_cas: u64) -> Vec<u8> {
    encode_parts(&[value], envelope, kept_cas)
}

/// [`encode`] of the item whose data is `parts` one after the other: a
/// face's own prefix and the client's bytes go into the record value in
/// one copy.
pub(crate) fn encode_parts(parts: &[&[u8]], envelope: Envelope, kept_cas: u64) -> Vec<u8> {
    let len = parts.iter().map(|p| p.len()).sum::<usize>();
    let mut v = Vec::with_capacity(ENVELOPE_BYTES + len);
    v.extend_from_slice(&envelope.flags.to_le_bytes());
    v.extend_from_slice(&envelope.expires.to_le_bytes());
    v.extend_from_slice(&kept_cas.to_le_bytes());
    v.extend_from_slice(&[envelope.marks, 0, 0, 0]);
    for p in parts {
        v.extend_from_slice(p);
    }
    v
}

/// The item in a record value of version `version`.
pub(crate) fn decode(mut raw: Vec<u8>, version: u64) -> Result<Item, Error> {
    let (envelope, cas) = {
        let it = decode_ref(&raw, version)?;
        (it.envelope, it.cas)
    };
    raw.drain(..ENVELOPE_BYTES);
    Ok(Item {
        value: raw,
        envelope,
        cas,
    })
}

/// [`decode`], borrowing the item's data from the record value.
pub(crate) fn decode_ref(raw: &[u8], version: u64) -> Result<ItemRef<'_>, Error> {
    if raw.len() < ENVELOPE_BYTES {
        return Err(Error::Envelope(format!(
            "item of {} bytes lacks its {ENVELOPE_BYTES}-byte envelope",
            raw.len()
        )));
    }
    let flags = u32::from_le_bytes(raw[0..4].try_into().expect("4 bytes"));
    let expires = u32::from_le_bytes(raw[4..8].try_into().expect("4 bytes"));
    let kept = u64::from_le_bytes(raw[8..16].try_into().expect("8 bytes"));
    let marks = raw[16];
    if raw[17..20] != [0, 0, 0] {
        return Err(Error::Envelope(format!(
            "item envelope has reserved bytes {:?}",
            &raw[17..20]
        )));
    }
    Ok(ItemRef {
        value: &raw[ENVELOPE_BYTES..],
        envelope: Envelope {
            flags,
            expires,
            marks,
        },
        cas: if kept != 0 { kept } else { version },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_damage() {
        let env = Envelope {
            flags: 0xdead_beef,
            expires: 17,
            marks: 5,
        };
        let raw = encode(b"data", env, 0);
        assert_eq!(raw.len(), ENVELOPE_BYTES + 4);
        let it = decode(raw.clone(), 99).unwrap();
        assert_eq!(
            (it.value.as_slice(), it.envelope, it.cas),
            (&b"data"[..], env, 99)
        );
        assert_eq!(decode(encode(b"", env, 7), 99).unwrap().cas, 7);
        assert_eq!(encode_parts(&[b"da", b"", b"ta"], env, 0), raw);
        let mut bad = raw.clone();
        bad[18] = 1;
        assert!(decode(bad, 1).is_err());
        assert!(decode(raw[..19].to_vec(), 1).is_err());
    }
}
