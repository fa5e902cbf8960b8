//! The paged layout of a long list: the key's record holds only the
//! list's metadata, its elements lie in pages (records of the database's
//! pages namespace), so a push or a pop at either end reads and writes one
//! page and the metadata whatever the list's length, as Redis's quicklist
//! touches one node. A list goes paged when its compact record
//! (`compact.rs`) would pass [`PAGE_AT_BYTES`].
//!
//! ```text
//! metadata (the key's record, after its expiry):
//! u8   shape 2 (paged)
//! u64  stamp: random, new for every list written whole; in its pages' keys
//! u64  elements
//! i64  head page, i64 tail page (pages head..=tail exist)
//! u32  elements in the head page, u32 in the tail page (the same when
//!      head = tail); every page between holds exactly `per page`
//! u32  per page (chosen when the list is written whole: ~8 KiB pages)
//! page key: the list's key, then stamp u64 LE, then page number i64 LE
//! page: the compact encoding (shape byte, then its elements head first)
//! ```
//!
//! Every change rewrites the metadata and commits with its pages as one
//! crash-atomic batch guarded by the metadata's version (`RespStore::
//! commit`), so a change decided on pages another client changed since
//! never commits: it reads again. Pages of a list deleted, overwritten,
//! expired or written whole again are dead (their stamp is not the key's);
//! the sweeper (`sweep_pages`) drops them. Documented in docs/FORMAT.md
//! ("Redis collections").

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use nvdepot_cache::resp::{paged_stamp, Kind, RespStore, Value};
use nvdepot_cache::Error;

use super::compact::{self, Compact};
use super::key_locks::KeyGuard;
use super::list_page::Page;

/// The shape byte of a paged list's metadata (and every paged
/// collection's: the store notes their stamps by it).
pub const SHAPE_PAGED: u8 = nvdepot_cache::resp::PAGED_SHAPE;
/// A list whose compact record would pass this many bytes goes paged.
pub const PAGE_AT_BYTES: usize = 16 * 1024;
/// A list written whole back below this size goes compact again.
const COMPACT_BELOW_BYTES: usize = PAGE_AT_BYTES / 2;
/// The page size a list's `per page` aims at (Redis's quicklist nodes
/// hold 8 KiB by default).
const PAGE_BYTES: usize = 8 * 1024;
const PER_PAGE_MAX: u64 = 4096;
/// Bytes a page key adds to the list's key.
const PAGE_KEY_SUFFIX: usize = 16;
/// Longest key whose list can go paged (its page keys must fit the
/// engine's key limit).
const KEY_BYTES_MAX: usize = u16::MAX as usize - PAGE_KEY_SUFFIX;
const META_BYTES: usize = 45;

/// Whether a list record's data is the paged layout's metadata.
pub fn is_paged(data: &[u8]) -> bool {
    data.first() == Some(&SHAPE_PAGED)
}

/// Whether a list under `key` may go paged.
pub fn may_page(key: &[u8]) -> bool {
    key.len() <= KEY_BYTES_MAX
}

fn damaged(what: &str) -> Error {
    Error::Envelope(format!("paged list: {what}"))
}

/// A paged list's metadata.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meta {
    pub stamp: u64,
    pub len: u64,
    pub head: i64,
    pub tail: i64,
    pub head_count: u32,
    pub tail_count: u32,
    pub per_page: u32,
}

impl Meta {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(META_BYTES);
        out.push(SHAPE_PAGED);
        out.extend_from_slice(&self.stamp.to_le_bytes());
        out.extend_from_slice(&self.len.to_le_bytes());
        out.extend_from_slice(&self.head.to_le_bytes());
        out.extend_from_slice(&self.tail.to_le_bytes());
        out.extend_from_slice(&self.head_count.to_le_bytes());
        out.extend_from_slice(&self.tail_count.to_le_bytes());
        out.extend_from_slice(&self.per_page.to_le_bytes());
        out
    }

    /// Decodes and checks the invariants (damage is an error).
    pub fn decode(data: &[u8]) -> Result<Meta, Error> {
        if data.len() != META_BYTES || data[0] != SHAPE_PAGED {
            return Err(damaged("metadata of the wrong size"));
        }
        let u64_at = |at: usize| u64::from_le_bytes(data[at..at + 8].try_into().expect("8"));
        let u32_at = |at: usize| u32::from_le_bytes(data[at..at + 4].try_into().expect("4"));
        let m = Meta {
            stamp: u64_at(1),
            len: u64_at(9),
            head: u64_at(17) as i64,
            tail: u64_at(25) as i64,
            head_count: u32_at(33),
            tail_count: u32_at(37),
            per_page: u32_at(41),
        };
        if !m.holds() {
            return Err(damaged("metadata out of shape"));
        }
        Ok(m)
    }

    /// The layout's invariants: pages head..=tail, full between the ends.
    fn holds(&self) -> bool {
        let p = u64::from(self.per_page);
        if p == 0 || self.len == 0 || self.head > self.tail {
            return false;
        }
        let (h, t) = (u64::from(self.head_count), u64::from(self.tail_count));
        if self.head == self.tail {
            return h == t && h == self.len;
        }
        // Damaged numbers may be anything: no overflow on the way.
        let Some(middle) = (self.tail as i128 - self.head as i128 - 1).try_into().ok() else {
            return false;
        };
        let middle: u64 = middle;
        (1..=p).contains(&h)
            && (1..=p).contains(&t)
            && middle
                .checked_mul(p)
                .and_then(|m| m.checked_add(h + t))
                .is_some_and(|n| n == self.len)
    }

    /// Elements in page `page` (head..=tail) as this metadata says.
    fn count_of(&self, page: i64) -> u64 {
        if page == self.head {
            u64::from(self.head_count)
        } else if page == self.tail {
            u64::from(self.tail_count)
        } else {
            u64::from(self.per_page)
        }
    }
}

/// The key of page `page` of the list under `key` stamped `stamp`.
pub fn page_key(key: &[u8], stamp: u64, page: i64) -> Vec<u8> {
    let mut k = Vec::with_capacity(key.len() + PAGE_KEY_SUFFIX);
    k.extend_from_slice(key);
    k.extend_from_slice(&stamp.to_le_bytes());
    k.extend_from_slice(&page.to_le_bytes());
    k
}

/// (list key, stamp, page) of a page key.
pub fn parse_page_key(pk: &[u8]) -> Option<(&[u8], u64, i64)> {
    let split = pk.len().checked_sub(PAGE_KEY_SUFFIX)?;
    let (key, suffix) = pk.split_at(split);
    let stamp = u64::from_le_bytes(suffix[..8].try_into().ok()?);
    let page = i64::from_le_bytes(suffix[8..].try_into().ok()?);
    Some((key, stamp, page))
}

fn encode_page<'a>(items: impl Iterator<Item = &'a Vec<u8>>) -> Vec<u8> {
    let mut out = vec![1u8];
    for e in items {
        compact::push_item(&mut out, e);
    }
    out
}

/// Why a paged step stopped.
pub enum Stop {
    /// The list changed under the step (a page gone, or the metadata's
    /// version moved): read again.
    Retry,
    Fail(Error),
}

impl From<Error> for Stop {
    fn from(e: Error) -> Stop {
        Stop::Fail(e)
    }
}

/// What the key holds, read for a write (or a consistent read).
pub enum Found {
    /// Absent or expired; the record's version if one is there (expired).
    Missing(Option<u64>),
    WrongType,
    Compact(Value, u64),
    Paged(Value, Meta, u64),
}

/// Reads `key` for a paged step.
pub async fn find(store: &RespStore, db: usize, key: &[u8], now: u64) -> Result<Found, Error> {
    let (v, version) = store.get_for_write(db, key, now).await?;
    let Some(v) = v else {
        return Ok(Found::Missing(version));
    };
    if v.kind() != Kind::List {
        return Ok(Found::WrongType);
    }
    let version = version.expect("a live value has a record");
    if is_paged(v.data()) {
        let m = Meta::decode(v.data())?;
        Ok(Found::Paged(v, m, version))
    } else {
        Ok(Found::Compact(v, version))
    }
}

/// A change (or read) of a paged list in progress: the pages it loaded,
/// changed and emptied, and the metadata as it will be.
pub struct Edit<'a> {
    store: &'a RespStore,
    db: usize,
    key: &'a [u8],
    /// The metadata as read (for the counts of pages not loaded).
    orig: Meta,
    pub meta: Meta,
    version: u64,
    pages: BTreeMap<i64, Page>,
    dirty: BTreeSet<i64>,
    gone: BTreeSet<i64>,
}

impl<'a> Edit<'a> {
    pub fn new(store: &'a RespStore, db: usize, key: &'a [u8], meta: Meta, version: u64) -> Self {
        Edit {
            store,
            db,
            key,
            orig: meta,
            meta,
            version,
            pages: BTreeMap::new(),
            dirty: BTreeSet::new(),
            gone: BTreeSet::new(),
        }
    }

    /// Elements in page `p` now.
    fn count(&self, p: i64) -> u64 {
        match self.pages.get(&p) {
            Some(page) => page.count as u64,
            None => self.orig.count_of(p),
        }
    }

    /// Page `p`, read once (a missing one means the list changed under
    /// the step, or damage: the caller's commit or check tells).
    async fn load(&mut self, p: i64) -> Result<&mut Page, Stop> {
        if !self.pages.contains_key(&p) {
            let pk = page_key(self.key, self.meta.stamp, p);
            let Some(data) = self.store.page(self.db, &pk).await? else {
                return Err(self.vanished().await);
            };
            let page = Page::parse(data)?;
            if page.count as u64 != self.orig.count_of(p) {
                return Err(self.vanished().await);
            }
            self.pages.insert(p, page);
        }
        Ok(self.pages.get_mut(&p).expect("loaded"))
    }

    /// A page not as the metadata says: the list changed since it was
    /// read (read again), or, if its metadata is still the one read,
    /// damage.
    async fn vanished(&self) -> Stop {
        match self.unchanged().await {
            Ok(false) => Stop::Retry,
            Ok(true) => Stop::Fail(damaged("a page is missing or not as its metadata says")),
            Err(e) => Stop::Fail(e),
        }
    }

    /// Whether the list's metadata is still the version read (a read
    /// that loaded several pages checks it after them).
    pub async fn unchanged(&self) -> Result<bool, Error> {
        let (_, version) = self.store.get_for_write(self.db, self.key, 0).await?;
        Ok(version == Some(self.version))
    }

    /// Element `i` (0 = head) of the list as it is now: (page, offset).
    fn locate(&self, i: u64) -> (i64, usize) {
        let hc = self.count(self.meta.head);
        if i < hc {
            return (self.meta.head, i as usize);
        }
        let j = i - hc;
        let p = u64::from(self.meta.per_page);
        (self.meta.head + 1 + (j / p) as i64, (j % p) as usize)
    }

    pub async fn get(&mut self, i: u64) -> Result<Vec<u8>, Stop> {
        let (p, off) = self.locate(i);
        let page = self.load(p).await?;
        Ok(page.nth(off)?.2.to_vec())
    }

    pub async fn set(&mut self, i: u64, e: &[u8]) -> Result<(), Stop> {
        let (p, off) = self.locate(i);
        self.load(p).await?.set(off, e)?;
        self.dirty.insert(p);
        Ok(())
    }

    /// Reads the pages holding elements `a..=b` (then check
    /// [`Edit::unchanged`] and visit them with [`Edit::each_in`]).
    pub async fn load_range(&mut self, a: u64, b: u64) -> Result<(), Stop> {
        let (first, _) = self.locate(a);
        let (last, _) = self.locate(b);
        for p in first..=last {
            self.load(p).await?;
        }
        Ok(())
    }

    /// Elements `a..=b`, head first, of pages [`Edit::load_range`] read:
    /// each handed to `f` as its page holds it, no copy (LRANGE of 600
    /// elements spent 40 % of its CPU in malloc and free when each was
    /// copied into a `Vec` of its own).
    pub fn each_in(&self, a: u64, b: u64, mut f: impl FnMut(&[u8])) -> Result<(), Error> {
        let (first, off) = self.locate(a);
        let (last, last_off) = self.locate(b);
        for p in first..=last {
            let page = self.pages.get(&p).expect("read by load_range");
            let from = if p == first { off } else { 0 };
            let to = if p == last { last_off } else { page.count - 1 };
            for e in page.range(from, to) {
                f(e?);
            }
        }
        Ok(())
    }

    pub async fn push_back(&mut self, e: &[u8]) -> Result<(), Stop> {
        let t = self.meta.tail;
        if self.count(t) < u64::from(self.meta.per_page) {
            self.load(t).await?.push_back(e);
            self.dirty.insert(t);
        } else {
            self.meta.tail += 1;
            self.new_page(self.meta.tail, e);
        }
        self.meta.len += 1;
        Ok(())
    }

    pub async fn push_front(&mut self, e: &[u8]) -> Result<(), Stop> {
        let h = self.meta.head;
        if self.count(h) < u64::from(self.meta.per_page) {
            self.load(h).await?.push_front(e);
            self.dirty.insert(h);
        } else {
            self.meta.head -= 1;
            self.new_page(self.meta.head, e);
        }
        self.meta.len += 1;
        Ok(())
    }

    pub async fn pop_front(&mut self) -> Result<Option<Vec<u8>>, Stop> {
        if self.meta.len == 0 {
            return Ok(None);
        }
        let h = self.meta.head;
        let page = self.load(h).await?;
        let e = page.pop_front()?;
        let emptied = page.count == 0;
        self.meta.len -= 1;
        if emptied {
            self.drop_page(h);
            if self.meta.len > 0 {
                self.meta.head += 1;
            }
        } else {
            self.dirty.insert(h);
        }
        Ok(Some(e))
    }

    pub async fn pop_back(&mut self) -> Result<Option<Vec<u8>>, Stop> {
        if self.meta.len == 0 {
            return Ok(None);
        }
        let t = self.meta.tail;
        let page = self.load(t).await?;
        let e = page.pop_back()?;
        let emptied = page.count == 0;
        self.meta.len -= 1;
        if emptied {
            self.drop_page(t);
            if self.meta.len > 0 {
                self.meta.tail -= 1;
            }
        } else {
            self.dirty.insert(t);
        }
        Ok(Some(e))
    }

    /// Removes `n` elements from the head (LTRIM): whole pages without
    /// reading them, then part of one.
    pub async fn trim_front(&mut self, mut n: u64) -> Result<(), Stop> {
        while n > 0 && self.meta.len > 0 {
            let h = self.meta.head;
            let c = self.count(h);
            if n >= c {
                self.drop_page(h);
                self.meta.len -= c;
                n -= c;
                if self.meta.len > 0 {
                    self.meta.head += 1;
                }
            } else {
                self.load(h).await?.drain_front(n as usize)?;
                self.dirty.insert(h);
                self.meta.len -= n;
                n = 0;
            }
        }
        Ok(())
    }

    /// Removes `n` elements from the tail (LTRIM).
    pub async fn trim_back(&mut self, mut n: u64) -> Result<(), Stop> {
        while n > 0 && self.meta.len > 0 {
            let t = self.meta.tail;
            let c = self.count(t);
            if n >= c {
                self.drop_page(t);
                self.meta.len -= c;
                n -= c;
                if self.meta.len > 0 {
                    self.meta.tail -= 1;
                }
            } else {
                let page = self.load(t).await?;
                page.truncate(page.count - n as usize)?;
                self.dirty.insert(t);
                self.meta.len -= n;
                n = 0;
            }
        }
        Ok(())
    }

    /// Starts page `p` at an end with element `e`. A pop of the same
    /// edit may have dropped a page of that number (a combined batch
    /// pops, then pushes): the new one replaces it, so it is no longer
    /// deleted at the commit.
    fn new_page(&mut self, p: i64, e: &[u8]) {
        self.pages.insert(p, Page::with(e));
        self.gone.remove(&p);
        self.dirty.insert(p);
    }

    fn drop_page(&mut self, p: i64) {
        self.pages.remove(&p);
        self.dirty.remove(&p);
        self.gone.insert(p);
    }

    /// Commits the change (metadata and pages as one crash-atomic batch,
    /// guarded by the metadata's version): `Err(Stop::Retry)` if the list
    /// changed since it was read.
    /// `held`, the list's lock, goes as soon as the change is visible
    /// (before it is durable), so the next change shares its flush.
    pub async fn commit(mut self, expire_at_ms: u64, held: KeyGuard<'static>) -> Result<(), Stop> {
        let meta = if self.meta.len == 0 {
            None
        } else {
            self.meta.head_count = self.count(self.meta.head) as u32;
            self.meta.tail_count = self.count(self.meta.tail) as u32;
            debug_assert!(self.meta.holds(), "{:?}", self.meta);
            if !self.meta.holds() {
                return Err(Stop::Fail(damaged("a change broke the layout")));
            }
            Some(self.meta.encode())
        };
        let stamp = self.meta.stamp;
        let page_keys: Vec<Vec<u8>> = (self.dirty.iter().chain(&self.gone))
            .map(|&p| page_key(self.key, stamp, p))
            .collect();
        // The pages' records are borrowed, not copied out of their
        // buffers (a head page keeps room before its record).
        let data = self.dirty.iter().map(|p| {
            let page = self.pages.get(p).expect("a dirty page is loaded");
            Some(page.record())
        });
        let pages: Vec<(&[u8], Option<&[u8]>)> = page_keys
            .iter()
            .map(Vec::as_slice)
            .zip(data.chain(self.gone.iter().map(|_| None)))
            .collect();
        let meta = meta.as_deref().map(|m| (Kind::List, m, expire_at_ms));
        commit_pages(
            self.store,
            self.db,
            self.key,
            Some(self.version),
            meta,
            &pages,
            held,
        )
        .await
    }
}

/// Commits a paged collection's change: its metadata (`None` deletes the
/// key) and page writes (`None` deletes a page), one crash-atomic batch
/// guarded by the metadata's version; `held`, the key's lock, goes once
/// the change is visible. `Err(Stop::Retry)` if the key changed since
/// `version` was read.
pub async fn commit_records(
    store: &RespStore,
    db: usize,
    key: &[u8],
    version: Option<u64>,
    meta: Option<(Kind, Vec<u8>, u64)>,
    writes: &[(Vec<u8>, Option<Vec<u8>>)],
    held: KeyGuard<'static>,
) -> Result<(), Stop> {
    let pages: Vec<(&[u8], Option<&[u8]>)> = writes
        .iter()
        .map(|(k, d)| (k.as_slice(), d.as_deref()))
        .collect();
    let meta = meta
        .as_ref()
        .map(|(kind, m, at)| (*kind, m.as_slice(), *at));
    commit_pages(store, db, key, version, meta, &pages, held).await
}

/// [`commit_records`] of borrowed metadata and pages.
pub async fn commit_pages(
    store: &RespStore,
    db: usize,
    key: &[u8],
    version: Option<u64>,
    meta: Option<(Kind, &[u8], u64)>,
    pages: &[(&[u8], Option<&[u8]>)],
    held: KeyGuard<'static>,
) -> Result<(), Stop> {
    let done = store
        .commit(db, key, version, meta, pages, move || drop(held))
        .await?;
    if done {
        Ok(())
    } else {
        Err(Stop::Retry)
    }
}

/// Every element of the paged list `meta` describes, head first, as of
/// the metadata version `version` (`Err(Stop::Retry)` if it changed while
/// the pages were read).
pub async fn load_all(
    store: &RespStore,
    db: usize,
    key: &[u8],
    meta: Meta,
    version: u64,
) -> Result<VecDeque<Vec<u8>>, Stop> {
    let mut edit = Edit::new(store, db, key, meta, version);
    let mut all = VecDeque::with_capacity(meta.len.min(1 << 20) as usize);
    for p in meta.head..=meta.tail {
        for e in edit.load(p).await?.range(0, usize::MAX - 1) {
            all.push_back(e?.to_vec());
        }
        edit.pages.remove(&p);
    }
    if !edit.unchanged().await? {
        return Err(Stop::Retry);
    }
    Ok(all)
}

/// Writes `list` whole under `key` in place of what `version` (`None`:
/// nothing) held, whose pages `old` were (deleted in the same batch):
/// compact when small, else paged with a new stamp. `Ok(false)`: the key
/// changed since it was read (nothing written). `held`: the list's lock,
/// released once the change is visible.
#[allow(clippy::too_many_arguments)]
pub async fn write_whole(
    store: &RespStore,
    db: usize,
    key: &[u8],
    version: Option<u64>,
    old: Option<Meta>,
    list: &VecDeque<Vec<u8>>,
    expire_at_ms: u64,
    held: KeyGuard<'static>,
) -> Result<bool, Error> {
    let compact_bytes: usize = 1 + list.iter().map(|e| e.len() + 5).sum::<usize>();
    let mut writes: Vec<(Vec<u8>, Option<Vec<u8>>)> = Vec::new();
    if let Some(old) = old {
        for p in old.head..=old.tail {
            writes.push((page_key(key, old.stamp, p), None));
        }
    }
    let meta = if list.is_empty() {
        None
    } else if compact_bytes < COMPACT_BELOW_BYTES || !may_page(key) {
        let items = list.iter().cloned().collect();
        Some(Compact { large: true, items }.encode())
    } else {
        let avg = compact_bytes.div_ceil(list.len());
        let per_page = ((PAGE_BYTES / avg.max(1)) as u64).clamp(1, PER_PAGE_MAX);
        let stamp = loop {
            let s: u64 = rand::random();
            if old.is_none_or(|o| o.stamp != s) {
                break s;
            }
        };
        let chunks: Vec<Vec<&Vec<u8>>> = list
            .iter()
            .collect::<Vec<_>>()
            .chunks(per_page as usize)
            .map(|c| c.to_vec())
            .collect();
        for (p, chunk) in chunks.iter().enumerate() {
            let data = encode_page(chunk.iter().copied());
            writes.push((page_key(key, stamp, p as i64), Some(data)));
        }
        let last = chunks.last().expect("not empty");
        let m = Meta {
            stamp,
            len: list.len() as u64,
            head: 0,
            tail: chunks.len() as i64 - 1,
            head_count: chunks[0].len() as u32,
            tail_count: last.len() as u32,
            per_page: per_page as u32,
        };
        debug_assert!(m.holds());
        Some(m.encode())
    };
    let pages: Vec<(&[u8], Option<&[u8]>)> = writes
        .iter()
        .map(|(k, d)| (k.as_slice(), d.as_deref()))
        .collect();
    let meta = meta.as_deref().map(|m| (Kind::List, m, expire_at_ms));
    super::paged_commit::commit_whole(store, db, key, version, meta, &pages, held, || {
        format!("a list of {} elements", list.len())
    })
    .await
}

/// A dead collection's owner as the sweep read it: its key and version.
type DeadOwner = (Vec<u8>, Option<u64>);

/// Dead pages a sweep drops in one write.
const DROP_BATCH: usize = 256;

/// Drops `pages` of `key`'s dead collections under the key's lock, while
/// its record is still at `version`: how many were dropped.
async fn drop_dead(
    store: &RespStore,
    db: usize,
    key: &[u8],
    version: Option<u64>,
    pages: &[Vec<u8>],
) -> Result<u64, Error> {
    if pages.is_empty() {
        return Ok(0);
    }
    let _held = super::key_locks::PAGED.lock(db, key).await;
    let done = store.drop_pages(db, pages, key, version).await?;
    Ok(if done { pages.len() as u64 } else { 0 })
}

/// One pass of the sweeper over `db`'s pages: drops every page whose list
/// or hash is gone, is no longer paged, or is stamped otherwise (deleted,
/// overwritten, expired, or written whole again). Each drop is guarded by
/// the owner's version as read, so a list written meanwhile keeps its
/// pages. Returns how many pages it dropped.
// The guard is a std lock held across the pass's awaits: the sweep runs on
// its own thread (`block_on`), and SWAPDB only waits for the pass to end.
#[allow(clippy::await_holding_lock)]
pub async fn sweep_pages(store: &RespStore, db: usize, now: u64) -> Result<u64, Error> {
    // One pair of namespaces throughout: a SWAPDB in the middle would have
    // this pass judge one pair's pages by another's owners (noting them
    // under the wrong pair, so their death went uncounted).
    let _same_pair = store.hold_databases();
    let mut dropped = 0;
    // Per list (key, stamp): dead or not, and its owner's version.
    let mut verdicts: std::collections::HashMap<(Vec<u8>, u64), (bool, Option<u64>)> =
        std::collections::HashMap::new();
    // Dead pages per owner (key, version), dropped together: one
    // group-committed write per DROP_BATCH pages, not one per page (the
    // listing comes in the index's order, owners interleaved).
    let mut dead_pages: std::collections::HashMap<DeadOwner, Vec<Vec<u8>>> =
        std::collections::HashMap::new();
    for pk in store.page_keys(db)? {
        let Some((key, stamp, _)) = parse_page_key(&pk) else {
            continue;
        };
        let verdict = verdicts.get(&(key.to_vec(), stamp)).copied();
        let (dead, version) = match verdict {
            Some(v) => v,
            None => {
                // The list's lock: no paged step of it is half committed now.
                let _held = super::key_locks::PAGED.lock(db, key).await;
                // Live while the key's record is a paged collection (a
                // list or a hash) with this stamp.
                // Noted for the sweeps to come (the first after a start
                // finds every paged collection): a write replacing a
                // noted key's record is what makes the next one run.
                // Noted before the read, so that such a write after it
                // counts.
                store.mark_paged(db, key, stamp);
                let (v, version) = store.get_for_write(db, key, now).await?;
                let current = v.as_ref().and_then(|v| paged_stamp(v.data()));
                match current {
                    Some(s) => store.mark_paged(db, key, s),
                    None => store.forget_paged(db, key),
                }
                let live = current == Some(stamp);
                let verdict = (!live, version);
                verdicts.insert((key.to_vec(), stamp), verdict);
                verdict
            }
        };
        if !dead {
            continue;
        }
        let pages = dead_pages.entry((key.to_vec(), version)).or_default();
        pages.push(pk.clone());
        if pages.len() >= DROP_BATCH {
            let pages = std::mem::take(pages);
            dropped += drop_dead(store, db, key, version, &pages).await?;
        }
    }
    for ((key, version), pages) in dead_pages {
        dropped += drop_dead(store, db, &key, version, &pages).await?;
    }
    // Counted once its drops are done: a reader of `page_sweeps` that saw
    // it grow sees the pass's work.
    store.count_page_sweep();
    Ok(dropped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_round_trips_and_checks_its_shape() {
        let m = Meta {
            stamp: 7,
            len: 10,
            head: -2,
            tail: 1,
            head_count: 1,
            tail_count: 3,
            per_page: 3,
        };
        assert_eq!(Meta::decode(&m.encode()).unwrap(), m);
        let bad = Meta { len: 11, ..m };
        assert!(Meta::decode(&bad.encode()).is_err());
        let one = Meta {
            head: 4,
            tail: 4,
            head_count: 5,
            tail_count: 5,
            len: 5,
            ..m
        };
        assert_eq!(Meta::decode(&one.encode()).unwrap(), one);
        assert!(Meta::decode(&[SHAPE_PAGED, 0]).is_err());
    }

    /// Damaged metadata and pages (random bytes, and valid encodings with
    /// bytes flipped) are errors, never a panic (the decoders read what
    /// the device gives back).
    #[test]
    fn damaged_metadata_and_pages_are_errors_not_panics() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let meta = Meta {
            stamp: 1,
            len: 10,
            head: 0,
            tail: 2,
            head_count: 3,
            tail_count: 3,
            per_page: 4,
        }
        .encode();
        let page = encode_page([b"ab".to_vec(), vec![], vec![7; 300]].iter());
        for _ in 0..20_000 {
            let mut m = meta.clone();
            let mut p = page.clone();
            if rng.gen_bool(0.5) {
                let n = rng.gen_range(0..60);
                m = (0..n).map(|_| rng.gen()).collect();
                p = (0..n).map(|_| rng.gen()).collect();
            } else {
                let i = rng.gen_range(0..m.len());
                m[i] ^= 1 << rng.gen_range(0..8);
                let j = rng.gen_range(0..p.len());
                p[j] ^= 1 << rng.gen_range(0..8);
            }
            if let Ok(m) = Meta::decode(&m) {
                assert!(m.holds());
            }
            if let Ok(mut pg) = Page::parse(p) {
                let n = pg.count;
                for i in 0..n {
                    assert!(pg.nth(i).is_ok());
                }
                if n > 0 {
                    assert!(pg.pop_back().is_ok() && pg.pop_front().is_ok() || n == 1);
                }
            }
        }
    }

    #[test]
    fn page_keys_parse_back() {
        let pk = page_key(b"queue", 99, -3);
        assert_eq!(parse_page_key(&pk), Some((&b"queue"[..], 99, -3)));
        assert_eq!(parse_page_key(&page_key(b"", 1, 0)), Some((&b""[..], 1, 0)));
        assert_eq!(parse_page_key(b"short"), None);
    }
}
