//! Commits of a paged collection (list, hash, set, sorted set) written
//! whole: one crash-atomic batch of its metadata and pages when one can
//! hold them, else its pages first in several batches and its metadata
//! last; and the refusal of what one batch cannot hold where it must.

use nvdepot_cache::resp::{Kind, RespStore};
use nvdepot_cache::Error;

use super::key_locks::KeyGuard;

/// `Err(Error::Envelope)` naming `what` (e.g. "a list of 5 elements")
/// when a commit of the metadata `meta_len` bytes long and `pages` (key
/// and data lengths) exceeds what one crash-atomic batch can hold.
pub fn ensure_fits(
    store: &RespStore,
    key: &[u8],
    meta_len: usize,
    pages: impl Iterator<Item = (usize, usize)>,
    what: impl FnOnce() -> String,
) -> Result<(), Error> {
    if store.commit_fits(std::iter::once((key.len(), meta_len)).chain(pages)) {
        Ok(())
    } else {
        Err(too_large(what))
    }
}

/// The (key, data length) of each page write (a deletion's data: none).
fn lens<'a>(pages: &'a [(&[u8], Option<&[u8]>)]) -> impl Iterator<Item = (usize, usize)> + 'a {
    pages
        .iter()
        .map(|(k, d)| (k.len(), d.map_or(0, <[u8]>::len)))
}

/// The refusal of a write too large for one crash-atomic batch.
fn too_large(what: impl FnOnce() -> String) -> Error {
    Error::Envelope(format!(
        "{} is too large to write as one crash-atomic step",
        what()
    ))
}

/// Commits a collection written whole under `key` in place of what
/// `version` (`None`: nothing) held: its metadata `meta` (`None`: the
/// key deleted) and page writes (`None` deletes a page). Every page it
/// writes must carry a stamp no record names yet (a collection written
/// whole takes a new one): those are what may land before the metadata.
/// One crash-atomic batch when it fits one. A larger one (a big RESTORE,
/// a conversion to pages, LINSERT or LREM of a list past a segment)
/// writes its new pages first, in batches each on the device before the
/// next begins, then the metadata with the last of them and every
/// deletion: the metadata can never outlive a page it names, so after a
/// crash the collection is whole or as it was, and the pages of a batch
/// no metadata names (a crash before the last) are dead, dropped by the
/// page sweep. `held`, the key's lock, is kept throughout, so the sweep
/// never judges the pages in flight. Inside a script or EXEC, and in
/// RENAME, COPY and MOVE (staged: written as one batch at the end), a
/// collection too large for one batch is refused, naming `what`.
/// `Ok(false)`: the key changed since it was read.
#[allow(clippy::too_many_arguments)]
pub async fn commit_whole(
    store: &RespStore,
    db: usize,
    key: &[u8],
    version: Option<u64>,
    meta: Option<(Kind, &[u8], u64)>,
    pages: &[(&[u8], Option<&[u8]>)],
    held: KeyGuard<'static>,
    what: impl FnOnce() -> String,
) -> Result<bool, Error> {
    let meta_len = meta.map_or(0, |m| m.1.len());
    let with_meta = |ps: &[(&[u8], Option<&[u8]>)]| {
        store.commit_fits(std::iter::once((key.len(), meta_len)).chain(lens(ps)))
    };
    let one_batch = with_meta(pages);
    if one_batch || meta.is_none() || nvdepot_cache::staging::current().is_some() {
        // One batch: it fits, or it must (a deletion; staged writes).
        if !one_batch {
            return Err(too_large(what));
        }
        return store
            .commit(db, key, version, meta, pages, move || drop(held))
            .await;
    }
    let (puts, deletes): (Vec<_>, Vec<_>) = pages.iter().copied().partition(|(_, d)| d.is_some());
    let mut rest = &puts[..];
    loop {
        let last: Vec<(&[u8], Option<&[u8]>)> = rest.iter().chain(&deletes).copied().collect();
        if with_meta(&last) {
            return store
                .commit(db, key, version, meta, &last, move || drop(held))
                .await;
        }
        // The longest run of the pages left that one batch holds.
        let (mut fits, mut over) = (0, rest.len() + 1);
        while over - fits > 1 {
            let mid = (fits + over) / 2;
            if store.commit_fits(lens(&rest[..mid])) {
                fits = mid;
            } else {
                over = mid;
            }
        }
        if fits == 0 {
            // Not one page fits a batch (records are capped far below):
            // refused as a batch too large.
            return Err(too_large(what));
        }
        let batch: Vec<(&[u8], &[u8])> = rest[..fits]
            .iter()
            .filter_map(|&(k, d)| Some((k, d?)))
            .collect();
        if !store.put_pages(db, key, version, &batch).await? {
            return Ok(false);
        }
        rest = &rest[fits..];
    }
}
