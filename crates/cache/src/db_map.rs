//! Which engine namespaces hold each Redis database (SWAPDB).
//!
//! The store keeps database `n`'s keys in a namespace and its
//! collections' pages in another (`RespStore`). Which pair holds which
//! database is a permutation, identity until a SWAPDB: SWAPDB exchanges
//! two databases by exchanging their pairs, O(1) whatever they hold, as
//! Redis swaps two `redisDb` pointers. The permutation is one record
//! (`map` in namespace `dbmap`, docs/FORMAT.md "Database map"), written
//! durably before the swap is visible, so after a crash the databases are
//! as the last acknowledged SWAPDB left them. Absent, the map is the
//! identity.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{RwLock, RwLockReadGuard};

use nvdepot_engine::Namespace;

use crate::envelope::{self, Envelope};
use crate::store::CacheStore;
use crate::Error;

/// The map record's format version (its first byte).
const MAP_VERSION: u8 = 1;
const MAP_KEY: &[u8] = b"map";

/// The pairs of namespaces behind the databases, and which database each
/// pair holds now.
pub(crate) struct DbMap {
    /// Pair `p`'s keys' namespace (pair 0: the store's default one, then
    /// `db<p>`) …
    keys: Vec<Namespace>,
    /// … and its pages' (`pages<p>`).
    pages: Vec<Namespace>,
    /// Database → the pair holding it.
    pair_of: Box<[AtomicUsize]>,
    /// Databases served (the first `databases` of `pair_of`).
    databases: usize,
    /// Where the permutation is kept (`dbmap`).
    map: Namespace,
    /// Held (shared) by a pass of the page sweep over one database, which
    /// judges pages by their owners and must find both in one pair
    /// throughout; a swap takes it exclusively to change the pairs.
    stable: RwLock<()>,
}

impl DbMap {
    /// The namespaces of `databases` databases (created when missing) and
    /// the permutation last written.
    pub(crate) fn open(cache: &CacheStore, databases: usize) -> Result<DbMap, Error> {
        let engine = cache.engine();
        let named = |name: String| -> Result<Namespace, Error> {
            match engine.namespace(&name) {
                Some(ns) => Ok(ns),
                None => Ok(engine.create_namespace(&name)?),
            }
        };
        let map = named("dbmap".into())?;
        let mut stored = None;
        cache.for_each_record(map, |key, raw| {
            if key == MAP_KEY {
                stored = Some(raw.to_vec());
            }
        })?;
        let pairs = match stored {
            None => (0..databases).collect(),
            Some(raw) => decode(envelope::decode_ref(&raw, 0)?.value, databases)?,
        };
        // Every pair the map names, though fewer databases are served
        // now: a SWAPDB then keeps the others where they are.
        let mut keys = vec![cache.default_namespace()];
        for p in 1..pairs.len() {
            keys.push(named(format!("db{p}"))?);
        }
        let pages = (0..pairs.len())
            .map(|p| named(format!("pages{p}")))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(DbMap {
            keys,
            pages,
            pair_of: pairs.into_iter().map(AtomicUsize::new).collect(),
            databases,
            map,
            stable: RwLock::new(()),
        })
    }

    pub(crate) fn databases(&self) -> usize {
        self.databases
    }

    /// The pair holding database `db` now.
    pub(crate) fn pair(&self, db: usize) -> usize {
        self.pair_of[db].load(Ordering::Acquire)
    }

    /// The namespace of database `db`'s keys.
    pub(crate) fn keys(&self, db: usize) -> Namespace {
        self.keys[self.pair(db)]
    }

    /// The namespace of database `db`'s collection pages.
    pub(crate) fn pages(&self, db: usize) -> Namespace {
        self.pages[self.pair(db)]
    }

    /// No swap happens while the guard is held.
    pub(crate) fn hold(&self) -> RwLockReadGuard<'_, ()> {
        self.stable.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Exchanges databases `a` and `b`: the new permutation is on the
    /// device when this returns `Ok`, and visible from then on. The caller
    /// keeps every command out meanwhile (Redis's SWAPDB runs alone). Not
    /// staged: it is refused inside MULTI and scripts by the caller.
    pub(crate) async fn swap(&self, cache: &CacheStore, a: usize, b: usize) -> Result<(), Error> {
        let mut pairs: Vec<usize> = (0..self.pair_of.len()).map(|d| self.pair(d)).collect();
        pairs.swap(a, b);
        let raw = envelope::encode(&encode(&pairs), Envelope::default(), 0);
        cache.put_raw(self.map, MAP_KEY, &raw).await?;
        // Between two passes of the page sweep (it holds `stable`).
        let _changing = self.stable.write().unwrap_or_else(|e| e.into_inner());
        self.pair_of[a].store(pairs[a], Ordering::Release);
        self.pair_of[b].store(pairs[b], Ordering::Release);
        Ok(())
    }
}

/// The map record: its version, then the pair of each database as a
/// little-endian u16.
fn encode(pairs: &[usize]) -> Vec<u8> {
    let mut out = vec![MAP_VERSION];
    for &p in pairs {
        out.extend_from_slice(&(p as u16).to_le_bytes());
    }
    out
}

/// The permutation in a map record, extended to `databases` databases
/// (a store swapped with fewer databases than it serves now keeps the new
/// ones in their own pairs).
fn decode(data: &[u8], databases: usize) -> Result<Vec<usize>, Error> {
    let bad = |why: &str| Error::Envelope(format!("the database map (SWAPDB): {why}"));
    let Some((&MAP_VERSION, body)) = data.split_first() else {
        return Err(bad("unknown format version"));
    };
    if body.len() % 2 != 0 {
        return Err(bad("odd length"));
    }
    let mut pairs: Vec<usize> = body
        .chunks(2)
        .map(|c| usize::from(u16::from_le_bytes([c[0], c[1]])))
        .collect();
    let stored = pairs.len();
    let mut seen = vec![false; stored];
    for &p in &pairs {
        if p >= stored || std::mem::replace(&mut seen[p], true) {
            return Err(bad("not a permutation"));
        }
    }
    pairs.extend(stored..databases);
    Ok(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_map_round_trips_and_is_checked() {
        let pairs = vec![1, 0, 2, 5, 4, 3];
        assert_eq!(decode(&encode(&pairs), 6).unwrap(), pairs);
        // More databases now: the new ones hold their own pairs; fewer:
        // the map is kept whole.
        assert_eq!(
            decode(&encode(&pairs), 8).unwrap(),
            vec![1, 0, 2, 5, 4, 3, 6, 7]
        );
        assert_eq!(decode(&encode(&pairs), 3).unwrap(), pairs);
        assert!(decode(&encode(&[0, 0]), 2).is_err());
        assert!(decode(&encode(&[2, 0]), 2).is_err());
        assert!(decode(&[2, 0, 0], 1).is_err());
        assert!(decode(&[1, 0], 1).is_err());
        assert!(decode(&[], 1).is_err());
    }
}
