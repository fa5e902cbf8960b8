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
//!
//! Large values (see `large.rs`): a large current value is read whole from
//! its chunks under the lock. A large new value is written as a large put
//! conditioned on the version the decision saw: its chunks are written
//! without the lock (they may wait for GC, which needs stripes), and if
//! another write of the key came first the decision runs again on the new
//! value. Either way no acknowledged write is lost.

use nvdepot_index::Location;

use crate::aio::Mode;
use crate::commit::NewRecord;
use crate::error::Result;
use crate::inner::{Existing, Inner, KeyAt};
use crate::large::Chunked;
use crate::namespace::Namespace;
use crate::read::{Fetched, Record, Span};
use crate::store::PutMode;
use crate::writer::Appender;

/// The current value an update decides on: a record's, a large value's
/// bytes read from its chunks, or the caller's copy ([`Known`]).
enum Value<'r> {
    Record(&'r Record),
    Large(Vec<u8>),
    Known(&'r [u8]),
}

impl Value<'_> {
    fn bytes(&self) -> &[u8] {
        match self {
            Value::Record(r) => r.value(),
            Value::Large(v) => v,
            Value::Known(v) => v,
        }
    }
}

/// The caller's copy of a key's value at a version it had (a DRAM
/// tier's): an update that finds the key still at exactly that version
/// decides on the copy and reads nothing from the device.
///
/// Versions are record sequence numbers, unique in the store: a key at
/// `version` holds the record written with that number, so the copy is
/// what the device holds as long as the caller's pair is right (a copy
/// of another version's value under this one would be decided on as is).
#[derive(Clone, Copy, Debug)]
pub struct Known<'a> {
    pub version: u64,
    pub value: &'a [u8],
}

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
        known: Option<Known<'_>>,
        mut decide: impl FnMut(Option<Current<'_>>) -> (Change, R),
    ) -> Result<(R, Updated)> {
        self.check_sizes(key, None)?;
        let (physical, count) = self.resolve(ns)?;
        let at = KeyAt::new(physical, key);
        loop {
            let stripe = self.stripes.lock_in(mode, self.stripe_of(at.h)).await;
            let mut cands = Vec::new();
            let known_at = known.and_then(|k| Some((self.known_current(&at, k.version)?, k.value)));
            let found = match known_at {
                Some(_) => None,
                None => self.current(mode, &at, key, &mut cands).await?,
            };
            let existing = known_at.map(|(e, _)| e).or(found.as_ref().map(|(e, _)| *e));
            // A large value is read whole under the lock (its chunks take
            // no lock); one whose chunk eviction took reads as absent.
            let value = match (&found, known_at) {
                (_, Some((_, copy))) => Some(Value::Known(copy)),
                (None, None) => None,
                (Some((e, r)), None) => match e.large {
                    None => Some(Value::Record(r)),
                    // Boxed: see `Inner::put`.
                    Some(d) => Box::pin(self.large_current(mode, &at, key, e.seq, d)).await?,
                },
            };
            let (change, out) = decide(existing.zip(value.as_ref()).map(|(e, v)| Current {
                value: v.bytes(),
                version: e.seq,
            }));
            drop(value);
            let (done, who) = match change {
                Change::Keep => return Ok((out, Updated::Kept)),
                Change::Put(value) if value.len() > self.record_value_bytes_max() => {
                    // Chunks are written without the lock (they may wait for
                    // GC, which needs stripes); the head then commits only if
                    // the key is still as `decide` saw it, else decide again.
                    self.check_sizes(key, Some(&value))?;
                    drop(stripe);
                    let cond = existing.map_or(PutMode::IfAbsent, |e| PutMode::IfVersion(e.seq));
                    let put =
                        Box::pin(self.put_large(mode, at.physical, &count, key, &value, cond));
                    match put.await? {
                        Some(version) => return Ok((out, Updated::Put(version))),
                        None => continue,
                    }
                }
                Change::Put(value) => {
                    self.check_sizes(key, Some(&value))?;
                    let record = NewRecord::put(key, &value);
                    let put = self
                        .commit_put(mode, &at, record, existing, &cands, &count)
                        .await?;
                    if let Some(committed) = put {
                        drop(stripe);
                        let version = self.finish(mode, committed).await?;
                        self.replaced(mode, at.physical, key, existing).await;
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
                drop(stripe);
                self.replaced(mode, at.physical, key, existing).await;
                return Ok((out, done));
            }
            // No free segment: GC may need this stripe to make room.
            drop(stripe);
            self.writer.wait_for_space_in(mode, who).await?;
        }
    }

    /// The whole value of the large head `d` (version `seq`) of a key
    /// whose stripe lock the caller holds; `None` if a chunk is lost in
    /// cache mode (eviction took it: the key reads as absent).
    async fn large_current(
        &self,
        mode: Mode,
        at: &KeyAt,
        key: &[u8],
        seq: u64,
        d: crate::format::LargeDescriptor,
    ) -> Result<Option<Value<'static>>> {
        let v = crate::large::LargeAt {
            physical: at.physical,
            key,
            version: seq,
            d,
        };
        match self.large_range(mode, &v, 0, d.len).await? {
            Chunked::Bytes(bytes) => Ok(Some(Value::Large(bytes))),
            Chunked::Lost(e) => self.lost(e).map(|()| None),
            // Writers of the key hold the lock we hold.
            Chunked::Replaced => Err(crate::error::Error::Unusable(
                "a large value changed under its key's lock".into(),
            )),
        }
    }

    /// Where the key is, if the location cache says it is at `version`
    /// (a small record) and the index still points there: the caller's
    /// copy of that version is then the current value. Caller holds the
    /// key's stripe lock. (The location cache never holds large heads;
    /// an entry of another key colliding on the hash has another
    /// version, versions being unique.)
    fn known_current(&self, at: &KeyAt, version: u64) -> Option<Existing> {
        self.cached_location(at)
            .filter(|e| e.seq == version && e.large.is_none())
    }

    /// The location cache's entry for the key, if the index still points
    /// there. Caller holds the key's stripe lock.
    fn cached_location(&self, at: &KeyAt) -> Option<Existing> {
        self.loc_cache
            .get(self.stripe_of(at.h), at.physical, at.h, at.h2)
            .filter(|e| self.still_indexed(at.fp, e.loc))
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
        if let Some(e) = self.cached_location(at) {
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
        self.find_indexed(mode, at.physical, key, at.fp, Span::Whole, cands)
            .await
    }
}
