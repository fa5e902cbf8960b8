//! Large values at a rebuild: what the log scan saw of heads and chunks,
//! and settling them in the key table (`large.rs` has the format side).

use std::collections::HashMap;

use super::keys::{KeyId, KeyTable};
use super::scan::HiddenKey;
use crate::format::{self, LargeDescriptor, RecordKind, CHUNK_SPACE};
use crate::inner::key_hash;
use crate::loc_cache::key_hash2;
use crate::namespace::owner_of;

/// A large head the log scan met.
pub(crate) struct HeadSeen {
    pub id: KeyId,
    pub seq: u64,
    pub generation: u64,
    pub chunks: u32,
    pub key: Vec<u8>,
}

/// What the log scan of a rebuild saw of large values.
#[derive(Default)]
pub(crate) struct LargeSeen {
    /// Every large head.
    pub heads: Vec<HeadSeen>,
    /// Every chunk record: (chunk key, sequence number, owner key,
    /// generation).
    pub chunks: Vec<(KeyId, u64, KeyId, u64)>,
}

impl LargeSeen {
    /// Notes a record met by the scan if it is a large head or a chunk.
    pub fn note(&mut self, id: KeyId, header: &format::RecordHeader, key: &[u8], value: &[u8]) {
        if header.kind == RecordKind::LargeHead {
            if let Some(d) = LargeDescriptor::decode(value) {
                self.heads.push(HeadSeen {
                    id,
                    seq: header.seq,
                    generation: d.generation,
                    chunks: d.chunks,
                    key: key.to_vec(),
                });
            }
        } else if header.kind == RecordKind::Put && header.namespace & CHUNK_SPACE != 0 {
            if let Some((owner, generation, _)) = format::parse_chunk_key(key) {
                let ns = owner_of(header.namespace);
                let owner_id = (ns, key_hash(ns, owner), key_hash2(ns, owner));
                self.chunks.push((id, header.seq, owner_id, generation));
            }
        }
    }

    pub fn extend(&mut self, other: LargeSeen) {
        self.heads.extend(other.heads);
        self.chunks.extend(other.chunks);
    }
}

/// What [`settle_large`] left out of a rebuild's index.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct LargeSettled {
    /// Heads with a chunk lost to damage (their keys are now absent).
    pub incomplete_heads: usize,
    /// Chunks no live head names.
    pub orphan_chunks: usize,
}

/// Settles large values in the key table of a rebuild, after damage has
/// hidden what it lost:
/// - a live head missing a chunk (lost to damage) is hidden like a lost
///   record, its key added to `hidden` so that a tombstone keeps its older
///   values hidden: the key is absent, never partly there;
/// - then every chunk whose owner's live record is not a head of its
///   generation (a large put cut by the crash, chunks of a replaced value
///   whose tombstones were not written, chunks of a hidden head) is left
///   out, so GC reclaims its space.
pub(crate) fn settle_large(
    found: &mut KeyTable,
    seen: &LargeSeen,
    hidden: &mut Vec<HiddenKey>,
) -> LargeSettled {
    let live = |found: &KeyTable, id: &KeyId, seq: u64| {
        found.get(id).is_some_and(|f| !f.tombstone && f.seq == seq)
    };
    let mut settled = LargeSettled::default();
    let mut present: HashMap<(KeyId, u64), u32> = HashMap::new();
    for &(chunk, seq, owner, generation) in &seen.chunks {
        if live(found, &chunk, seq) {
            *present.entry((owner, generation)).or_default() += 1;
        }
    }
    let mut generations: HashMap<(KeyId, u64), u64> = HashMap::new();
    for h in &seen.heads {
        generations.insert((h.id, h.seq), h.generation);
        if !live(found, &h.id, h.seq) {
            continue;
        }
        let have = present.get(&(h.id, h.generation)).copied().unwrap_or(0);
        if have < h.chunks {
            found.hide(h.id, h.seq);
            hidden.push((h.id.0, h.key.clone(), h.seq));
            settled.incomplete_heads += 1;
        }
    }
    for &(chunk, seq, owner, generation) in &seen.chunks {
        if !live(found, &chunk, seq) {
            continue;
        }
        let owner_generation = found
            .get(&owner)
            .filter(|f| !f.tombstone)
            .and_then(|f| generations.get(&(owner, f.seq)));
        if owner_generation != Some(&generation) {
            found.hide(chunk, seq);
            settled.orphan_chunks += 1;
        }
    }
    settled
}
