//! Crash-atomic batches at a rebuild (docs/FORMAT.md, "Batches"): a
//! frame's members are held back until all are met, in a row; a batch cut
//! short is left out whole.
//!
//! What cut it decides what its keys show. Cut by the crash (the gap is a
//! torn tail: the batch was never acknowledged), the keys keep their older
//! values. Cut by damage to an acknowledged batch (the gap is damage
//! classified as lost), its other members' keys are hidden as the damaged
//! record's is: absent, never an older value, which a dropped tombstone or
//! put of the batch would otherwise let come back.

use super::keys::{Found, KeyId};
use crate::damage::{Damage, DamageKind};
use crate::format::{BatchFrame, RecordHeader};

/// A batch member's effect on the key table: its key, what was found, and
/// for a large head (header, key, value) to note.
pub(crate) type MemberSeen = (KeyId, Found, Option<(RecordHeader, Vec<u8>, Vec<u8>)>);

/// A key of a dropped member: (namespace, key, sequence number), as
/// recovery hides keys.
pub(crate) type MemberKey = (u32, Vec<u8>, u64);

/// Batches a recovery thread left out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct BatchesLeftOut {
    pub batches: u64,
    /// Their members the scan met (valid records dropped with them).
    pub members: u64,
}

/// A batch left out: where it lay (segment, byte range from its frame, or
/// from the gap before its first orphan member, to the record or end that
/// cut it) and the keys of the members that were met.
#[derive(Debug)]
pub(crate) struct CutBatch {
    pub segment: u32,
    pub from: u64,
    pub to: u64,
    pub keys: Vec<MemberKey>,
}

impl CutBatch {
    /// Whether damage classified as lost (not a torn tail) lies in its gap.
    pub fn cut_by_damage(&self, damage: &[Damage]) -> bool {
        damage.iter().any(|d| {
            d.kind == DamageKind::Lost
                && d.segment == self.segment
                && d.segment_offset < self.to
                && d.segment_offset + d.len > self.from
        })
    }
}

struct Open {
    frame: BatchFrame,
    segment: u32,
    members: Vec<MemberSeen>,
    keys: Vec<MemberKey>,
    /// Where its frame starts (segment offset): damage anywhere from there
    /// to where the batch was cut is what cut it.
    start: u64,
}

/// The batch being read by a recovery thread: its frame says how many
/// members follow and their bytes; they are kept only when all are met,
/// in a row, and their bytes agree.
pub(crate) struct Batches {
    grain_bytes: u64,
    open: Option<Open>,
    pub left_out: BatchesLeftOut,
    pub cut: Vec<CutBatch>,
    /// Where the last orphan member (one without a frame) ended.
    orphans_end: Option<(u32, u64)>,
}

impl Batches {
    pub fn new(grain_bytes: u64) -> Batches {
        Batches {
            grain_bytes,
            open: None,
            left_out: BatchesLeftOut::default(),
            cut: Vec::new(),
            orphans_end: None,
        }
    }

    /// A frame in `segment`, starting at `start`: a batch begins (`None`:
    /// a frame whose value does not decode; its members will be met as
    /// orphans and left out).
    pub fn open(&mut self, frame: Option<BatchFrame>, segment: u32, start: u64) {
        match frame {
            Some(frame) => {
                self.open = Some(Open {
                    frame,
                    segment,
                    members: Vec::new(),
                    keys: Vec::new(),
                    start,
                })
            }
            None => self.left_out.batches += 1,
        }
    }

    /// A member in `segment` at `[at, end)`; `prev_end` is where the
    /// record before it ended. `Some(members)` when it completes its batch.
    pub fn member(
        &mut self,
        seen: MemberSeen,
        key: MemberKey,
        segment: u32,
        prev_end: u64,
        at: u64,
        end: u64,
    ) -> Option<Vec<MemberSeen>> {
        let Some(open) = &mut self.open else {
            // No frame before it: the frame was lost (to damage, or torn).
            // Members in a row share the gap before the first of them.
            self.left_out.members += 1;
            match self.cut.last_mut() {
                Some(run) if self.orphans_end == Some((segment, prev_end)) => run.keys.push(key),
                _ => self.cut.push(CutBatch {
                    segment,
                    from: prev_end,
                    to: at,
                    keys: vec![key],
                }),
            }
            self.orphans_end = Some((segment, end));
            return None;
        };
        open.members.push(seen);
        open.keys.push(key);
        if open.members.len() < open.frame.members as usize {
            return None;
        }
        let open = self.open.take().expect("open batch");
        let bytes: u64 =
            open.members.iter().map(|(_, f, _)| f.grains).sum::<u64>() * self.grain_bytes;
        if bytes != open.frame.member_bytes {
            // Not the batch its frame describes: left out, its keys kept as
            // they were (no damage to point at).
            self.left_out.batches += 1;
            self.left_out.members += open.members.len() as u64;
            return None;
        }
        Some(open.members)
    }

    /// Anything but the next member at `at` (or the segment's end): an
    /// open batch was cut short.
    pub fn cut_short(&mut self, at: u64) {
        if let Some(open) = self.open.take() {
            self.left_out.batches += 1;
            self.left_out.members += open.members.len() as u64;
            self.cut.push(CutBatch {
                segment: open.segment,
                from: open.start,
                to: at,
                keys: open.keys,
            });
        }
    }
}
