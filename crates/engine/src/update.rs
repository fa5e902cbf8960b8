//! Read-modify-write of one key, atomic per key: the update step.
//!
//! A conditional or computed write (memcached's `incr`, `append`, `add`,
//! `cas`, Redis's `INCR`, `SETNX`, ...) must not let another write of the
//! key come between its read and its write. The update step takes the
//! key's stripe lock (the one every put and delete of the key takes, held
//! until the index points to the new durable record), reads the current
//! record whole, asks the caller what to do with it and, if anything,
//! writes under the same lock. So:
//!
//! - no write of the key is lost or interleaved: the decision sees the
//!   state that every write acknowledged before it produced;
//! - it costs one device read (the location cache or the index gives the
//!   record's place; a fingerprint collision adds one per extra candidate)
//!   and, for a change, one durable write, with no retries;
//! - other keys of the stripe wait meanwhile (4 096 stripes).
//!
//! The decision is a closure, called once per attempt: again only if the
//! log had no free segment, the stripe was dropped to let GC make room, and
//! the record was read anew.

use nvdepot_index::Location;

use crate::aio::Mode;
use crate::commit::Record as NewRecord;
use crate::error::Result;
use crate::inner::{Existing, Inner, KeyAt};
use crate::namespace::Namespace;
use crate::read::{Fetched, Record, Span};
use crate::writer::Appender;

/// What an update does with the key, decided from its current value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// Leave the key as it is (nothing written).
    Keep,
    /// Write this value (a new version).
    Put(Vec<u8>),
    /// Delete the key (a tombstone, if it is present).
    Delete,
}

/// The key's current value and version, as an update sees it.
#[derive(Clone, Copy, Debug)]
pub struct Current<'a> {
    pub value: &'a [u8],
    /// The record's sequence number (see [`crate::Store::get_versioned`]).
    pub version: u64,
}

/// What an update did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Updated {
    /// Nothing written ([`Change::Keep`], or a delete of an absent key).
    Kept,
    /// Written, with this new version.
    Put(u64),
    /// The key was deleted.
    Deleted,
}

impl Inner {
    /// Runs `decide` on the key's current value under its stripe lock and
    /// applies its [`Change`] before unlocking; returns what `decide`
    /// returned with it and what was done.
    pub(crate) async fn update<R>(
        &self,
        mode: Mode,
        ns: Namespace,
        key: &[u8],
        mut decide: impl FnMut(Option<Current<'_>>) -> (Change, R),
    ) -> Result<(R, Updated)> {
        self.check_sizes(key, None)?;
        let (physical, count) = self.resolve(ns)?;
        let at = KeyAt::new(physical, key);
        loop {
            let stripe = self.stripes.lock_in(mode, self.stripe_of(at.h)).await;
            let mut cands = Vec::new();
            let current = self.current(mode, &at, key, &mut cands).await?;
            if let Some(d) = current.as_ref().and_then(|(e, _)| e.large) {
                self.check_one_record("update", d.len as usize)?;
            }
            let (change, out) = decide(current.as_ref().map(|(e, r)| Current {
                value: r.value(),
                version: e.seq,
            }));
            let existing = current.map(|(e, _)| e);
            let (done, who) = match change {
                Change::Keep => return Ok((out, Updated::Kept)),
                Change::Put(value) => {
                    self.check_sizes(key, Some(&value))?;
                    self.check_one_record("update", value.len())?;
                    let record = NewRecord::put(key, &value);
                    let put = self
                        .commit_put(mode, &at, record, existing, &cands, &count)
                        .await?;
                    if let Some(committed) = put {
                        drop(stripe);
                        let version = self.finish(mode, committed).await?;
                        return Ok((out, Updated::Put(version)));
                    }
                    (None, Appender::Put)
                }
                Change::Delete => match existing {
                    None => return Ok((out, Updated::Kept)),
                    Some(e) => {
                        let deleted = self.commit_delete(mode, &at, key, e, &count).await?;
                        (deleted.then_some(Updated::Deleted), Appender::Delete)
                    }
                },
            };
            if let Some(done) = done {
                return Ok((out, done));
            }
            // No free segment: GC may need this stripe to make room.
            drop(stripe);
            self.writer.wait_for_space_in(mode, who).await?;
        }
    }

    /// The key's record, read whole, and where it is. Caller holds the
    /// key's stripe lock, so the record cannot move meanwhile (GC takes
    /// the stripe to relocate it). Fills `cands` with the index candidates
    /// when it had to look them up (for [`Inner::commit_put`]).
    async fn current(
        &self,
        mode: Mode,
        at: &KeyAt,
        key: &[u8],
        cands: &mut Vec<Location>,
    ) -> Result<Option<(Existing, Record)>> {
        cands.clear();
        if let Some(e) = self.loc_cache.get(self.stripe_of(at.h), at.h, at.h2) {
            if self.still_indexed(at.fp, e.loc) {
                match self.read_at(mode, e.loc, Span::Whole).await? {
                    Fetched::Record(r) if self.holds(&r, at.physical, key) => {
                        return Ok(Some((e, r)));
                    }
                    // Indexed under our stripe and unreadable: damage.
                    Fetched::Invalid(err) => return Err(err),
                    // Not ours after all (cannot happen while the cache is
                    // kept under the stripe): look the key up instead.
                    Fetched::Record(_) => {}
                }
            }
        }
        self.find_indexed(mode, at.physical, key, at.fp, Span::Whole, cands)
            .await
    }
}
