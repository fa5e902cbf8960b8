//! nvdepot's face-neutral cache layer over the engine: the item envelope
//! (flags, expiry, CAS, marks: the on-device item header), the DRAM tier,
//! and one binding per protocol (Pelikan's `entrystore/seg/{memcache,resp}`
//! shape).
//!
//! ```text
//!   memcache face ─► memcache::MemcacheStorage ─┐
//!                                               ├─► CacheStore ─► engine
//!   Redis face    ─► resp::RespStore  ──────────┘     │
//!                                                    DramTier (-m)
//! ```
//!
//! Every item operation of every face is one of [`CacheStore::get`],
//! [`CacheStore::set`] (a blind write) or [`CacheStore::update`] (one
//! device read, the face's decision, at most one write, atomic per key).

mod access;
mod db_map;
mod dram;
mod envelope;
pub mod memcache;
pub mod resp;
pub mod staging;
mod store;

pub use access::{Access, AccessTable};
pub use dram::{DramTier, DramTierStats, IdHasher};
pub use envelope::{Envelope, Item, ItemRef, ENVELOPE_BYTES};
pub use store::{unix_now, BatchItem, CacheStore, Change, GuardedOp, NewItem, Updated};

/// Why a cache operation failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Engine(#[from] nvdepot_engine::Error),
    /// A stored item's envelope does not parse (damage the record checksum
    /// did not catch, or a record written by something else).
    #[error("{0}")]
    Envelope(String),
}
