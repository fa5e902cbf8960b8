//! Namespaces (NVMKV's "pools"): independent key spaces in one store.
//!
//! A namespace has a name, a *logical* id (the [`Namespace`] handle, stable
//! for its life) and a *physical* id written in its records. `clear`
//! gives the namespace a fresh physical id, so deleting everything is one
//! durable registry write; records with a retired physical id are dead and
//! are purged from the index. Physical ids are never reused.
//!
//! The registry itself is ordinary records in the system namespace
//! (physical id 0): key = name, value = logical id and physical id
//! (u32 LE each).

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU32, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;

/// A handle on a namespace. Cheap to copy; valid until the namespace is
/// dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Namespace(pub(crate) u32);

impl Namespace {
    /// The namespace's logical id.
    pub fn id(self) -> u32 {
        self.0
    }

    /// The namespace of a logical id that [`Namespace::id`] gave (the
    /// handle the bindings pass across their boundary). An id is not
    /// reused while the store is open: one whose namespace was dropped, or
    /// that never named one, makes operations fail with
    /// `Error::NoSuchNamespace`.
    pub fn from_id(id: u32) -> Namespace {
        Namespace(id)
    }
}

/// Physical id of the registry.
pub(crate) const SYSTEM_NS: u32 = 0;

pub(crate) use crate::format::CHUNK_SPACE;

/// The physical namespace a record of namespace id `ns` belongs to: `ns`
/// itself, or for a chunk of a large value, the namespace of its owner.
pub(crate) fn owner_of(ns: u32) -> u32 {
    ns & !CHUNK_SPACE
}

/// The chunk space of physical namespace `physical`.
pub(crate) fn chunk_space(physical: u32) -> u32 {
    physical | CHUNK_SPACE
}
/// Name of the namespace every store has.
pub(crate) const DEFAULT_NAME: &str = "default";

pub(crate) struct NsEntry {
    pub name: String,
    pub physical: u32,
    pub count: Arc<AtomicI64>,
}

#[derive(Default)]
struct Maps {
    by_name: HashMap<String, u32>,
    /// Logical id → entry.
    by_id: HashMap<u32, NsEntry>,
    /// Physical id → key count (only live physical ids, incl. SYSTEM_NS).
    counts: HashMap<u32, Arc<AtomicI64>>,
}

pub(crate) struct Namespaces {
    maps: RwLock<Maps>,
    next_id: AtomicU32,
}

pub(crate) fn encode_registry_value(logical: u32, physical: u32) -> [u8; 8] {
    let mut v = [0u8; 8];
    v[..4].copy_from_slice(&logical.to_le_bytes());
    v[4..].copy_from_slice(&physical.to_le_bytes());
    v
}

pub(crate) fn decode_registry_value(v: &[u8]) -> Option<(u32, u32)> {
    if v.len() != 8 {
        return None;
    }
    let logical = u32::from_le_bytes(v[..4].try_into().ok()?);
    let physical = u32::from_le_bytes(v[4..].try_into().ok()?);
    (physical != SYSTEM_NS && logical != SYSTEM_NS).then_some((logical, physical))
}

impl Namespaces {
    pub fn new(next_id: u32) -> Namespaces {
        let ns = Namespaces {
            maps: RwLock::new(Maps::default()),
            next_id: AtomicU32::new(next_id.max(1)),
        };
        ns.maps
            .write()
            .counts
            .insert(SYSTEM_NS, Arc::new(AtomicI64::new(0)));
        ns
    }

    /// Registers a namespace (at open or after its registry record is durable).
    pub fn insert(&self, name: &str, logical: u32, physical: u32, count: i64) {
        let mut m = self.maps.write();
        let c = Arc::new(AtomicI64::new(count));
        m.by_name.insert(name.to_string(), logical);
        m.counts.insert(physical, c.clone());
        m.by_id.insert(
            logical,
            NsEntry {
                name: name.to_string(),
                physical,
                count: c,
            },
        );
        self.next_id
            .fetch_max(logical.max(physical) + 1, Ordering::Relaxed);
    }

    /// Removes a namespace (or its old physical id, when `clear` replaced
    /// it); returns the retired physical id.
    pub fn remove(&self, logical: u32) -> Option<u32> {
        let mut m = self.maps.write();
        let e = m.by_id.remove(&logical)?;
        m.by_name.remove(&e.name);
        m.counts.remove(&e.physical);
        Some(e.physical)
    }

    /// Gives live namespace `logical` a fresh, empty physical id in one
    /// step (CLEAR): a reader never finds the namespace missing between
    /// the old id and the new. The old physical id, to purge.
    pub fn renew(&self, logical: u32, physical: u32) -> Option<u32> {
        let mut m = self.maps.write();
        let e = m.by_id.get_mut(&logical)?;
        let old = std::mem::replace(&mut e.physical, physical);
        let count = Arc::new(AtomicI64::new(0));
        e.count = count.clone();
        m.counts.remove(&old);
        m.counts.insert(physical, count);
        self.next_id.fetch_max(physical + 1, Ordering::Relaxed);
        Some(old)
    }

    pub fn allocate_id(&self) -> u32 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    pub fn next_id(&self) -> u32 {
        self.next_id.load(Ordering::Relaxed)
    }

    pub fn lookup(&self, name: &str) -> Option<u32> {
        self.maps.read().by_name.get(name).copied()
    }

    /// Physical id and key counter of a live namespace.
    pub fn resolve(&self, ns: Namespace) -> Option<(u32, Arc<AtomicI64>)> {
        let m = self.maps.read();
        if ns.0 == SYSTEM_NS {
            return m.counts.get(&SYSTEM_NS).map(|c| (SYSTEM_NS, c.clone()));
        }
        m.by_id.get(&ns.0).map(|e| (e.physical, e.count.clone()))
    }

    pub fn name_of(&self, ns: Namespace) -> Option<String> {
        self.maps.read().by_id.get(&ns.0).map(|e| e.name.clone())
    }

    /// Key counter of a physical id, if it is live. A chunk space's
    /// entries (see [`owner_of`]) count with the registry's, as index
    /// entries that are not user keys.
    pub fn counter(&self, physical: u32) -> Option<Arc<AtomicI64>> {
        let m = self.maps.read();
        if physical & CHUNK_SPACE != 0 {
            if !m.counts.contains_key(&owner_of(physical)) {
                return None;
            }
            return m.counts.get(&SYSTEM_NS).cloned();
        }
        m.counts.get(&physical).cloned()
    }

    /// Whether records of `physical` are live: its namespace (the owner's,
    /// for a chunk space) exists.
    pub fn is_live_physical(&self, physical: u32) -> bool {
        self.maps.read().counts.contains_key(&owner_of(physical))
    }

    /// (name, logical, physical, count) of every user namespace.
    pub fn list(&self) -> Vec<(String, u32, u32, i64)> {
        let m = self.maps.read();
        let mut v: Vec<_> = m
            .by_id
            .iter()
            .map(|(&l, e)| {
                (
                    e.name.clone(),
                    l,
                    e.physical,
                    e.count.load(Ordering::Relaxed),
                )
            })
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }
}
