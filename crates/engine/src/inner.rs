//! What the store's threads share ([`Inner`]), and a key's hashes.
//!
//! Concurrency: writers of one key are serialised by a striped lock taken
//! on the key hash, held from the lookup of the old record until the index
//! points to the new, durable one. So record sequence numbers of a key
//! increase in the order the index sees them, which is the order recovery
//! replays. Readers take no lock: they read the candidate records and, if
//! none matches, look the key up again to tell "absent" from "moved".
//!
//! The operations on it live by seam: `lookup.rs` (finding a key's
//! record), `commit.rs` (the write step put, delete and `write_batch`
//! share), `namespace_admin.rs` (create, drop, clear).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use nvdepot_index::{Index, Location, GRAINS_MAX};
use parking_lot::{Mutex, RwLock};

use crate::error::{Error, Result};
use crate::format::{RecordHeader, RecordKind, RECORD_HEADER_BYTES};
use crate::layout::Layout;
use crate::loc_cache::{key_hash2, LocationCache};
use crate::namespace::{Namespace, Namespaces, SYSTEM_NS};
use crate::options::Options;
use crate::segments::Segments;
use crate::stats::Counters;
use crate::stripes::{StripeGuard, Stripes};
use crate::writer::Writer;

const STRIPES: usize = 4096;

/// The 64-bit hash of a key in a namespace (physical id).
pub(crate) fn key_hash(physical: u32, key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64_with_seed(key, physical as u64)
}

/// The index location of a record of `grains` grains at `pba` (the size
/// field saturates at `GRAINS_MAX`: such a record's header says how long
/// it is).
pub(crate) fn location_at(pba: u64, grains: u64) -> Location {
    Location {
        pba,
        grains: grains.min(GRAINS_MAX as u64) as u16,
    }
}

/// A key's hashes in its physical namespace: what the index, the stripe
/// locks and the location cache are keyed by.
pub(crate) struct KeyAt {
    pub physical: u32,
    pub h: u64,
    pub h2: u64,
    pub fp: u64,
}

impl KeyAt {
    pub fn new(physical: u32, key: &[u8]) -> KeyAt {
        let h = key_hash(physical, key);
        KeyAt {
            physical,
            h,
            h2: key_hash2(physical, key),
            fp: Index::fingerprint(h),
        }
    }
}

/// Everything the store's threads share.
pub(crate) struct Inner {
    pub layout: Arc<Layout>,
    pub segments: Arc<Segments>,
    pub index: Index,
    pub writer: Arc<Writer>,
    pub seq: Arc<AtomicU64>,
    pub namespaces: Namespaces,
    pub(crate) stripes: Stripes,
    pub opts: Options,
    pub uuid: u128,
    /// Held shared by iterators and namespace purges, exclusively by GC
    /// while it moves records.
    pub gc_pause: RwLock<()>,
    /// Serialises namespace create/drop/clear.
    pub(crate) ns_admin: Mutex<()>,
    /// Retired physical namespaces whose index entries the GC thread is to
    /// remove.
    pub pending_purge: Mutex<Vec<u32>>,
    /// Where recently written keys are (saves a read per overwrite).
    pub loc_cache: LocationCache,
    /// One garbage collector at a time (the GC thread and
    /// `Store::collect_garbage` must not pick the same victim).
    pub collector: Mutex<()>,
    pub counters: Counters,
}

/// An existing record of a key, found under its stripe lock.
#[derive(Clone, Copy)]
pub(crate) struct Existing {
    pub loc: Location,
    /// True size in grains (the index field saturates at `GRAINS_MAX`).
    pub grains: u64,
    /// The record's sequence number: the key's current version.
    pub seq: u64,
    /// For a large head: what it says (its chunks are dropped once a
    /// write that replaces it is durable). The location cache never holds
    /// large heads, so an entry from it has `None` here rightly.
    pub large: Option<crate::format::LargeDescriptor>,
}

/// A put whose record is linked: its version, and the log position it
/// must still wait for (unlocked) before it may be acknowledged.
pub(crate) struct Committed {
    pub version: u64,
    pub wait: Option<u64>,
}

impl Inner {
    pub fn new(
        layout: Arc<Layout>,
        segments: Arc<Segments>,
        index: Index,
        seq: Arc<AtomicU64>,
        namespaces: Namespaces,
        opts: Options,
        uuid: u128,
    ) -> Inner {
        let loc_cache = LocationCache::new(opts.location_cache_entries, STRIPES);
        let writer = Arc::new(Writer::new(
            layout.clone(),
            segments.clone(),
            uuid,
            opts.sync,
            opts.flush_inline,
            seq.clone(),
        ));
        Inner {
            layout,
            segments,
            index,
            writer,
            seq,
            namespaces,
            stripes: Stripes::new(STRIPES),
            opts,
            uuid,
            gc_pause: RwLock::new(()),
            ns_admin: Mutex::new(()),
            pending_purge: Mutex::new(Vec::new()),
            loc_cache,
            collector: Mutex::new(()),
            counters: Counters::default(),
        }
    }

    /// Keys in user namespaces (the index also holds the registry's).
    pub fn user_keys(&self) -> u64 {
        let system = self
            .namespaces
            .counter(SYSTEM_NS)
            .map_or(0, |c| c.load(Ordering::Relaxed).max(0) as u64);
        (self.index.len() as u64).saturating_sub(system)
    }

    pub fn stripe_of(&self, hash: u64) -> usize {
        (hash >> 35) as usize % STRIPES
    }

    pub fn lock_stripe(&self, hash: u64) -> StripeGuard<'_> {
        self.stripes.lock(self.stripe_of(hash))
    }

    /// Locks the stripes of several hashes in order (no deadlock).
    pub fn lock_stripes(&self, hashes: impl Iterator<Item = u64>) -> Vec<StripeGuard<'_>> {
        crate::aio::now(self.lock_stripes_in(crate::aio::Mode::Blocking, hashes))
    }

    /// [`Inner::lock_stripes`], waiting as `mode` says.
    pub async fn lock_stripes_in(
        &self,
        mode: crate::aio::Mode,
        hashes: impl Iterator<Item = u64>,
    ) -> Vec<StripeGuard<'_>> {
        let mut ids: Vec<usize> = hashes.map(|h| self.stripe_of(h)).collect();
        ids.sort_unstable();
        ids.dedup();
        let mut guards = Vec::with_capacity(ids.len());
        for i in ids {
            guards.push(self.stripes.lock_in(mode, i).await);
        }
        guards
    }

    pub fn grains_of(&self, header: &RecordHeader) -> u64 {
        (header.body_bytes() as u64).div_ceil(self.layout.grain_bytes)
    }

    pub(crate) fn check_sizes(&self, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        if key.len() > self.opts.key_bytes_max {
            return Err(Error::KeyTooLarge {
                len: key.len(),
                max: self.opts.key_bytes_max,
            });
        }
        if let Some(v) = value {
            let max = self.value_bytes_max();
            if v.len() > max {
                return Err(Error::ValueTooLarge { len: v.len(), max });
            }
            // A large value's chunk keys add their suffix to the key.
            let key_max = u16::MAX as usize - crate::format::CHUNK_KEY_SUFFIX_BYTES;
            if v.len() > self.record_value_bytes_max() && key.len() > key_max {
                return Err(Error::KeyTooLarge {
                    len: key.len(),
                    max: key_max,
                });
            }
        }
        Ok(())
    }

    /// Refuses, for `op`, a value longer than one record holds.
    pub(crate) fn check_one_record(&self, op: &'static str, len: usize) -> Result<()> {
        let max = self.record_value_bytes_max();
        if len > max {
            return Err(Error::TooLargeFor {
                op,
                len: len as u64,
                max,
            });
        }
        Ok(())
    }

    /// Longest value `put` accepts: [`Options::value_bytes_max`], at most
    /// [`crate::large::LARGE_VALUE_BYTES_MAX`].
    pub fn value_bytes_max(&self) -> usize {
        self.opts
            .value_bytes_max
            .min(crate::large::LARGE_VALUE_BYTES_MAX)
    }

    /// Longest value one record holds (a quarter of a segment, less the
    /// header and the longest key): longer ones are large values.
    pub fn record_value_bytes_max(&self) -> usize {
        (self.layout.segment_bytes / 4) as usize - RECORD_HEADER_BYTES - self.opts.key_bytes_max
    }

    pub(crate) fn resolve(
        &self,
        ns: Namespace,
    ) -> Result<(u32, Arc<std::sync::atomic::AtomicI64>)> {
        self.namespaces
            .resolve(ns)
            .ok_or_else(|| Error::NoSuchNamespace(format!("id {}", ns.0)))
    }

    pub fn header(
        &self,
        kind: RecordKind,
        physical: u32,
        key: &[u8],
        value_len: usize,
    ) -> RecordHeader {
        RecordHeader {
            kind,
            member: false,
            key_len: key.len() as u16,
            value_len: value_len as u32,
            namespace: physical,
            seq: self.seq.fetch_add(1, Ordering::Relaxed),
            segment_seq: 0,
            flushed: Default::default(),
        }
    }

    pub fn location(&self, pba: u64, header: &RecordHeader) -> Location {
        location_at(pba, self.grains_of(header))
    }
}
