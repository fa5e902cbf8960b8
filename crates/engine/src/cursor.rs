//! A resumable cursor over the store's keys (NVMKV's iterators, Redis's
//! SCAN): pages of keys and values in fingerprint order, each page
//! resumable from a `u64` cursor that survives garbage collection and the
//! index's growth, because a key's fingerprint never changes while the
//! key's place on the device and in the index may.
//!
//! A page lists the index entries whose fingerprints come next after the
//! cursor (one pass over the index, keeping the smallest), then reads each
//! one's record. All entries of one fingerprint land in the same page, so
//! keys sharing a fingerprint are never split across a resume. Guarantee,
//! as SCAN's: a key present and unmodified from the first page to the last
//! is returned exactly once; a key written or deleted meanwhile may or may
//! not be. Cost: a pass over the DRAM index per page (the pages are made
//! large enough that a whole walk is at most [`PASSES_MAX`] passes) and a
//! device read per key.

use std::collections::HashMap;

use nvdepot_index::Location;

use crate::error::Result;
use crate::inner::Inner;
use crate::iter::read_entry;
use crate::namespace::Namespace;

/// A whole walk makes at most about this many passes over the index: a
/// page holds at least 1/`PASSES_MAX` of the index's entries.
const PASSES_MAX: usize = 64;

/// Index entries a page lists at most (16 bytes each while it is read).
const PAGE_ENTRIES_MAX: usize = 1 << 20;

/// One key of a [`ScanPage`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScanItem {
    pub namespace: Namespace,
    pub key: Vec<u8>,
    pub value: Vec<u8>,
}

/// What [`crate::Store::scan`] returns: some keys, and where to go on.
#[derive(Clone, Debug, Default)]
pub struct ScanPage {
    /// Keys of the page, in no particular order (possibly none: a page
    /// whose entries were all of other namespaces or replaced).
    pub items: Vec<ScanItem>,
    /// The cursor of the next page; `None` once the walk is complete.
    pub next: Option<u64>,
}

/// The page of the walk at `cursor` (0 starts a walk), over one namespace
/// (`ns`) or all. `hint` is how many index entries the caller would like
/// per page; pages are larger when the index is large (see
/// [`PASSES_MAX`]).
pub(crate) fn scan(
    inner: &Inner,
    ns: Option<Namespace>,
    cursor: u64,
    hint: usize,
) -> Result<ScanPage> {
    // Physical id -> logical namespace of every namespace the walk takes.
    let wanted: HashMap<u32, Namespace> = match ns {
        Some(ns) => {
            let (physical, _) = inner.resolve(ns)?;
            HashMap::from([(physical, ns)])
        }
        None => inner
            .namespaces
            .list()
            .into_iter()
            .map(|(_, logical, physical, _)| (physical, Namespace(logical)))
            .collect(),
    };
    let page = hint
        .max(inner.index.len() / PASSES_MAX)
        .clamp(1, PAGE_ENTRIES_MAX);
    // GC moves records (their fingerprints stay); paused, it cannot move
    // one between the listing and the read, which would hide it.
    let _pause = inner.gc_pause.read();
    let (mut entries, complete) = smallest_from(inner, cursor, page);
    entries.sort_unstable_by_key(|&(fp, _)| fp);
    let next = match entries.last() {
        _ if complete => None,
        Some(&(fp, _)) => fp.checked_add(1),
        None => None,
    };
    // Read in address order: neighbours on the device come together.
    entries.sort_unstable_by_key(|&(_, loc)| loc.pba);
    let mut items = Vec::new();
    for (fp, loc) in entries {
        if let Some((physical, key, value)) =
            read_entry(inner, fp, loc, |p| wanted.contains_key(&p))?
        {
            items.push(ScanItem {
                namespace: wanted[&physical],
                key,
                value,
            });
        }
    }
    Ok(ScanPage { items, next })
}

/// The index entries with the `page` smallest fingerprints at or past
/// `from` (more when several share the last one: a fingerprint's entries
/// are never split), and whether they are all the entries past `from`.
fn smallest_from(inner: &Inner, from: u64, page: usize) -> (Vec<(u64, Location)>, bool) {
    let mut kept: Vec<(u64, Location)> = Vec::with_capacity(page.min(1 << 16) * 2);
    let mut dropped = false;
    inner.index.for_each(|fp, loc| {
        if fp < from {
            return;
        }
        kept.push((fp, loc));
        if kept.len() >= page * 2 {
            dropped |= keep_smallest(&mut kept, page);
        }
    });
    if kept.len() > page {
        dropped |= keep_smallest(&mut kept, page);
    }
    (kept, !dropped)
}

/// Keeps the entries whose fingerprints are among the `page` smallest
/// (all entries of the largest kept fingerprint); whether any was dropped.
fn keep_smallest(kept: &mut Vec<(u64, Location)>, page: usize) -> bool {
    let (_, &mut (pivot, _), _) = kept.select_nth_unstable_by_key(page - 1, |&(fp, _)| fp);
    let before = kept.len();
    kept.retain(|&(fp, _)| fp <= pivot);
    kept.len() < before
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use crate::{Options, Store};

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let opts = Options {
            segment_bytes: 1 << 20,
            buffered_io: true,
            ..Options::default().create_bytes(64 << 20)
        };
        let store = Store::open(dir.path(), &opts).unwrap();
        (dir, store)
    }

    fn walk(store: &Store, ns: Option<crate::Namespace>, hint: usize) -> Vec<Vec<u8>> {
        let mut keys = Vec::new();
        let mut cursor = Some(0);
        while let Some(c) = cursor {
            let page = store.scan(ns, c, hint).unwrap();
            keys.extend(page.items.into_iter().map(|i| i.key));
            cursor = page.next;
        }
        keys
    }

    #[test]
    fn a_walk_returns_every_key_once_across_gc_and_overwrites_of_others() {
        let (_dir, store) = store();
        let ns = store.default_namespace();
        let other = store.create_namespace("other").unwrap();
        for i in 0..3000u32 {
            store
                .put(ns, format!("k{i}").as_bytes(), &[7u8; 300])
                .unwrap();
        }
        store.put(other, b"elsewhere", b"x").unwrap();
        // A walk in small pages while another namespace churns and GC
        // moves records: every key of `ns` exactly once.
        let mut seen = Vec::new();
        let mut cursor = Some(0);
        let mut round = 0;
        while let Some(c) = cursor {
            let page = store.scan(Some(ns), c, 50).unwrap();
            for item in page.items {
                assert_eq!(item.namespace, ns);
                assert_eq!(item.value, vec![7u8; 300]);
                seen.push(item.key);
            }
            cursor = page.next;
            round += 1;
            for j in 0..20 {
                store
                    .put(other, format!("churn{j}").as_bytes(), &[round as u8; 2000])
                    .unwrap();
            }
            store.collect_garbage().unwrap();
        }
        assert!(round > 10, "small pages: {round}");
        let unique: HashSet<_> = seen.iter().cloned().collect();
        assert_eq!(unique.len(), seen.len(), "a key returned twice");
        assert_eq!(unique.len(), 3000);
        // All namespaces: both.
        let all = walk(&store, None, 1000);
        assert_eq!(all.len(), 3000 + 1 + 20);
        assert!(all.contains(&b"elsewhere".to_vec()));
    }

    #[test]
    fn an_empty_store_ends_at_once_and_deleted_keys_are_not_returned() {
        let (_dir, store) = store();
        let ns = store.default_namespace();
        let page = store.scan(Some(ns), 0, 10).unwrap();
        assert!(page.items.is_empty());
        assert_eq!(page.next, None);
        store.put(ns, b"a", b"1").unwrap();
        store.put(ns, b"b", b"2").unwrap();
        store.delete(ns, b"a").unwrap();
        assert_eq!(walk(&store, Some(ns), 1), vec![b"b".to_vec()]);
    }
}
