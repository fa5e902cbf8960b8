//! The paged layout of a large hash: the key's record holds only the
//! hash's metadata, its fields lie in bucket pages (records of the
//! database's pages namespace, as a paged list's, `list_pages.rs`), found
//! by the field's hash under linear hashing, so HSET, HGET, HDEL and the
//! rest read and write one bucket and the metadata whatever the size. A
//! hash goes paged once Redis would call it a `hashtable` and its compact
//! record (`compact.rs`) would pass [`list_pages::PAGE_AT_BYTES`].
//!
//! ```text
//! metadata (the key's record, after its expiry):
//! u8   shape 2 (paged)
//! u64  stamp: random, new for every hash written whole; in its pages' keys
//! u64  fields
//! u8   level L, u64 split s: buckets 0 .. 2^L + s; a field of hash h
//!      lies in bucket h mod 2^L, or h mod 2^(L+1) if that is below s
//! u32  per bucket: the fields a bucket holds on average before the next
//!      split (chosen when the hash is written whole: ~2 KiB buckets)
//! bucket page: the compact encoding (shape byte 1, then field, value,
//!      field, value ...); every bucket below 2^L + s exists, maybe empty
//! ```
//!
//! Linear hashing grows one bucket at a time: when the fields pass
//! `per bucket` × buckets, bucket s is split into s and s + 2^L (two pages
//! written with the change that caused it), so no write rewrites the hash.
//! Commits, locks and the sweep of dead pages are the paged list's
//! (`list_pages.rs`): one crash-atomic batch guarded by the metadata's
//! version, the key's lock held by every paged step.

use std::collections::{BTreeMap, BTreeSet};

use nvdepot_cache::resp::{Kind, RespStore, Value};
use nvdepot_cache::Error;

use super::compact;
use super::key_locks::KeyGuard;
use super::list_pages::{commit_records, page_key, Stop, PAGE_AT_BYTES, SHAPE_PAGED};

/// Bytes a bucket aims at: a field's write rewrites its bucket, so small
/// (8 KiB buckets wrote 7.8 KiB per HSET, 2 KiB ones 3.2, with ~35 % more
/// HSETs per second: bench/results/ab-page-sizes.md); a hash paged when
/// this was 8 KiB keeps its `per bucket`.
const BUCKET_BYTES: usize = 2 * 1024;
const PER_BUCKET_MAX: u64 = 4096;
const LEVEL_MAX: u8 = 40;
/// Bytes of the metadata.
pub const META_BYTES: usize = 30;

fn damaged(what: &str) -> Error {
    Error::Envelope(format!("paged hash: {what}"))
}

/// Whether a hash with compact record data of `bytes` goes paged.
pub fn should_page(large: bool, bytes: usize, key: &[u8]) -> bool {
    large && bytes > PAGE_AT_BYTES && super::list_pages::may_page(key)
}

/// A paged hash's metadata.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meta {
    pub stamp: u64,
    pub count: u64,
    pub level: u8,
    pub split: u64,
    pub per_bucket: u32,
}

impl Meta {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(META_BYTES);
        out.push(SHAPE_PAGED);
        out.extend_from_slice(&self.stamp.to_le_bytes());
        out.extend_from_slice(&self.count.to_le_bytes());
        out.push(self.level);
        out.extend_from_slice(&self.split.to_le_bytes());
        out.extend_from_slice(&self.per_bucket.to_le_bytes());
        out
    }

    pub fn decode(data: &[u8]) -> Result<Meta, Error> {
        if data.len() != META_BYTES || data[0] != SHAPE_PAGED {
            return Err(damaged("metadata of the wrong size"));
        }
        let u64_at = |at: usize| u64::from_le_bytes(data[at..at + 8].try_into().expect("8"));
        let m = Meta {
            stamp: u64_at(1),
            count: u64_at(9),
            level: data[17],
            split: u64_at(18),
            per_bucket: u32::from_le_bytes(data[26..30].try_into().expect("4")),
        };
        if m.level > LEVEL_MAX || m.split >= 1 << m.level || m.per_bucket == 0 || m.count == 0 {
            return Err(damaged("metadata out of shape"));
        }
        Ok(m)
    }

    pub fn buckets(&self) -> u64 {
        (1u64 << self.level) + self.split
    }

    fn bucket_of(&self, field: &[u8]) -> u64 {
        let h = xxhash_rust::xxh3::xxh3_64(field);
        let b = h & ((1u64 << self.level) - 1);
        if b < self.split {
            h & ((1u64 << (self.level + 1)) - 1)
        } else {
            b
        }
    }
}

/// Where a field's pair lies in a bucket's bytes: (start of the field's
/// item, end of the value's item, the value).
type Found<'a> = Option<(usize, usize, &'a [u8])>;

/// A bucket's (field, value) pairs, borrowed.
type Pairs<'a> = Vec<(&'a [u8], &'a [u8])>;

fn find<'a>(bucket: &'a [u8], field: &[u8]) -> Result<Found<'a>, Error> {
    let base = bucket.as_ptr() as usize;
    let mut items = compact::items(bucket);
    while let Some(f) = items.next() {
        let (start, f) = f?;
        let Some(v) = items.next() else {
            return Err(damaged("a field without a value"));
        };
        let (_, v) = v?;
        if f == field {
            return Ok(Some((start, v.as_ptr() as usize - base + v.len(), v)));
        }
    }
    Ok(None)
}

/// The (field, value) pairs of a bucket.
pub(super) fn pairs(bucket: &[u8]) -> Result<Pairs<'_>, Error> {
    let items: Vec<&[u8]> = compact::items(bucket)
        .map(|i| i.map(|(_, e)| e))
        .collect::<Result<_, _>>()?;
    if !items.len().is_multiple_of(2) {
        return Err(damaged("a field without a value"));
    }
    Ok(items.chunks(2).map(|p| (p[0], p[1])).collect())
}

fn pair_item(field: &[u8], value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(field.len() + value.len() + 10);
    compact::push_item(&mut out, field);
    compact::push_item(&mut out, value);
    out
}

/// A change (or read) of a paged hash in progress.
pub struct Edit<'a> {
    store: &'a RespStore,
    /// Hash, or set (members as fields with empty values).
    kind: Kind,
    db: usize,
    key: &'a [u8],
    pub meta: Meta,
    version: u64,
    pub(super) buckets: BTreeMap<u64, Vec<u8>>,
    dirty: BTreeSet<u64>,
}

impl<'a> Edit<'a> {
    pub fn new(
        store: &'a RespStore,
        kind: Kind,
        db: usize,
        key: &'a [u8],
        meta: Meta,
        version: u64,
    ) -> Self {
        Edit {
            store,
            kind,
            db,
            key,
            meta,
            version,
            buckets: BTreeMap::new(),
            dirty: BTreeSet::new(),
        }
    }

    pub(super) async fn load(&mut self, b: u64) -> Result<&mut Vec<u8>, Stop> {
        if !self.buckets.contains_key(&b) {
            let pk = page_key(self.key, self.meta.stamp, b as i64);
            let Some(data) = self.store.page(self.db, &pk).await? else {
                return Err(match self.unchanged().await {
                    Ok(false) => Stop::Retry,
                    Ok(true) => Stop::Fail(damaged("a bucket page is missing")),
                    Err(e) => Stop::Fail(e),
                });
            };
            if data.first() != Some(&1) {
                return Err(Stop::Fail(damaged("a bucket of an unknown shape")));
            }
            self.buckets.insert(b, data);
        }
        Ok(self.buckets.get_mut(&b).expect("loaded"))
    }

    /// Whether the metadata is still the version read.
    pub async fn unchanged(&self) -> Result<bool, Error> {
        let (_, version) = self.store.get_for_write(self.db, self.key, 0).await?;
        Ok(version == Some(self.version))
    }

    pub async fn get(&mut self, field: &[u8]) -> Result<Option<Vec<u8>>, Stop> {
        let b = self.meta.bucket_of(field);
        let bucket = self.load(b).await?;
        Ok(find(bucket, field)?.map(|(_, _, v)| v.to_vec()))
    }

    /// Sets `field`; true if it is new.
    pub async fn set(&mut self, field: &[u8], value: &[u8]) -> Result<bool, Stop> {
        let b = self.meta.bucket_of(field);
        let bucket = self.load(b).await?;
        let new = match find(bucket, field)? {
            Some((start, end, _)) => {
                bucket.splice(start..end, pair_item(field, value));
                false
            }
            None => {
                bucket.extend_from_slice(&pair_item(field, value));
                true
            }
        };
        self.dirty.insert(b);
        if new {
            self.meta.count += 1;
        }
        Ok(new)
    }

    /// Deletes `field`; true if it was there.
    pub async fn del(&mut self, field: &[u8]) -> Result<bool, Stop> {
        let b = self.meta.bucket_of(field);
        let bucket = self.load(b).await?;
        let Some((start, end, _)) = find(bucket, field)? else {
            return Ok(false);
        };
        bucket.drain(start..end);
        self.dirty.insert(b);
        self.meta.count -= 1;
        Ok(true)
    }

    /// Removes and returns a random field (SPOP): from a random bucket,
    /// the next non-empty one after it.
    async fn pop_random(&mut self) -> Result<Vec<u8>, Stop> {
        use rand::Rng;
        let n = self.meta.buckets();
        let start = rand::thread_rng().gen_range(0..n);
        for i in 0..n {
            let b = (start + i) % n;
            let bucket = self.load(b).await?;
            let fields = pairs(bucket)?.len();
            if fields == 0 {
                continue;
            }
            let pick = rand::thread_rng().gen_range(0..fields);
            let f = pairs(bucket)?[pick].0.to_vec();
            self.del(&f).await?;
            return Ok(f);
        }
        Err(Stop::Fail(damaged(
            "no field in any bucket of a non-empty hash",
        )))
    }

    /// Splits buckets while the fields pass `per bucket` on average.
    async fn grow(&mut self) -> Result<(), Stop> {
        while self.meta.count > self.meta.buckets() * u64::from(self.meta.per_bucket)
            && self.meta.level < LEVEL_MAX
        {
            let (s, low) = (self.meta.split, 1u64 << self.meta.level);
            let old = std::mem::take(self.load(s).await?);
            let mut stay = vec![1u8];
            let mut go = vec![1u8];
            let next_level_mask = (low << 1) - 1;
            for (f, v) in pairs(&old)? {
                let h = xxhash_rust::xxh3::xxh3_64(f);
                let to = if h & next_level_mask == s {
                    &mut stay
                } else {
                    &mut go
                };
                to.extend_from_slice(&pair_item(f, v));
            }
            self.buckets.insert(s, stay);
            self.buckets.insert(s + low, go);
            self.dirty.insert(s);
            self.dirty.insert(s + low);
            self.meta.split += 1;
            if self.meta.split == low {
                self.meta.level += 1;
                self.meta.split = 0;
            }
        }
        Ok(())
    }

    /// Commits (metadata and changed buckets, one guarded crash-atomic
    /// batch); an emptied hash deletes its key (its buckets are left to
    /// the sweep). `held` goes once the change is visible.
    pub async fn commit(mut self, expire_at_ms: u64, held: KeyGuard<'static>) -> Result<(), Stop> {
        let writes = self.writes().await?;
        let meta = (self.meta.count > 0).then(|| (self.kind, self.meta.encode(), expire_at_ms));
        let version = Some(self.version);
        commit_records(self.store, self.db, self.key, version, meta, &writes, held).await
    }

    /// The bucket writes of the change (buckets split as the fields
    /// grew, then every changed one); none once the hash is empty.
    pub async fn writes(&mut self) -> Result<Vec<(Vec<u8>, Option<Vec<u8>>)>, Stop> {
        if self.meta.count == 0 {
            return Ok(Vec::new());
        }
        self.grow().await?;
        let mut writes = Vec::with_capacity(self.dirty.len());
        for &b in &self.dirty {
            let data = std::mem::take(self.buckets.get_mut(&b).expect("dirty"));
            writes.push((page_key(self.key, self.meta.stamp, b as i64), Some(data)));
        }
        self.dirty.clear();
        Ok(writes)
    }
}

/// Every (field, value) of the paged hash `meta` describes, as of its
/// version `version` (`Err(Stop::Retry)` if it changed meanwhile).
pub async fn load_all(
    store: &RespStore,
    db: usize,
    key: &[u8],
    meta: Meta,
    version: u64,
) -> Result<Vec<(Vec<u8>, Vec<u8>)>, Stop> {
    // Read only: its kind is never written.
    let mut edit = Edit::new(store, Kind::Hash, db, key, meta, version);
    let mut all = Vec::with_capacity(meta.count.min(1 << 20) as usize);
    for b in 0..meta.buckets() {
        let bucket = edit.load(b).await?;
        for (f, v) in pairs(bucket)? {
            all.push((f.to_vec(), v.to_vec()));
        }
        edit.buckets.remove(&b);
    }
    if !edit.unchanged().await? {
        return Err(Stop::Retry);
    }
    if all.len() as u64 != meta.count {
        return Err(Stop::Fail(damaged(
            "the buckets hold another number of fields",
        )));
    }
    Ok(all)
}

/// The metadata (a new stamp) and buckets of `pairs` (distinct fields)
/// written whole.
pub fn plan(pairs: &[(&[u8], &[u8])]) -> (Meta, Vec<Vec<u8>>) {
    let bytes: usize = pairs.iter().map(|(f, v)| f.len() + v.len() + 10).sum();
    let avg = bytes.div_ceil(pairs.len().max(1)).max(1);
    let per_bucket = ((BUCKET_BYTES / avg) as u64).clamp(1, PER_BUCKET_MAX);
    let mut level = 0u8;
    while (1u64 << level) * per_bucket < pairs.len() as u64 && level < LEVEL_MAX {
        level += 1;
    }
    let meta = Meta {
        stamp: rand::random(),
        count: pairs.len() as u64,
        level,
        split: 0,
        per_bucket: per_bucket as u32,
    };
    let mut buckets: Vec<Vec<u8>> = vec![vec![1u8]; meta.buckets() as usize];
    for (f, v) in pairs {
        let b = meta.bucket_of(f) as usize;
        buckets[b].extend_from_slice(&pair_item(f, v));
    }
    (meta, buckets)
}

/// Writes `pairs` (distinct fields) whole as a paged hash under `key`, in
/// place of what `version` (`None`: nothing) held. `Ok(false)`: the key
/// changed since it was read.
#[allow(clippy::too_many_arguments)]
pub async fn write_whole(
    store: &RespStore,
    kind: Kind,
    db: usize,
    key: &[u8],
    version: Option<u64>,
    pairs: &[(&[u8], &[u8])],
    expire_at_ms: u64,
    held: KeyGuard<'static>,
) -> Result<bool, Error> {
    let (meta, buckets) = plan(pairs);
    let pages = buckets
        .into_iter()
        .enumerate()
        .map(|(b, d)| (page_key(key, meta.stamp, b as i64), d))
        .collect();
    let whole = Whole {
        kind,
        meta: meta.encode(),
        pages,
        elements: pairs.len(),
    };
    whole
        .commit(store, db, key, version, expire_at_ms, held)
        .await
}

/// A paged collection written whole: its metadata and every page.
pub struct Whole {
    pub kind: Kind,
    pub meta: Vec<u8>,
    pub pages: Vec<(Vec<u8>, Vec<u8>)>,
    /// Its elements (for the error when it is too large).
    pub elements: usize,
}

impl Whole {
    /// Commits it under `key` in place of what `version` (`None`:
    /// nothing) held, whole or not at all after a crash
    /// (`paged_commit::commit_whole`). `Ok(false)`: the key changed since it
    /// was read.
    pub async fn commit(
        &self,
        store: &RespStore,
        db: usize,
        key: &[u8],
        version: Option<u64>,
        expire_at_ms: u64,
        held: KeyGuard<'static>,
    ) -> Result<bool, Error> {
        let pages: Vec<(&[u8], Option<&[u8]>)> = self
            .pages
            .iter()
            .map(|(k, d)| (k.as_slice(), Some(d.as_slice())))
            .collect();
        let meta = Some((self.kind, &self.meta[..], expire_at_ms));
        super::paged_commit::commit_whole(store, db, key, version, meta, &pages, held, || {
            format!("a {} of {} elements", self.kind.name(), self.elements)
        })
        .await
    }
}

/// A write command on a paged hash.
pub enum Op<'a> {
    /// HSET / HMSET: field, value, field, value …
    Set(&'a [&'a [u8]]),
    SetNx(&'a [u8], &'a [u8]),
    IncrBy(&'a [u8], i64),
    IncrByFloat(&'a [u8], f64),
    Del(&'a [&'a [u8]]),
    /// SPOP: up to this many random members.
    Pop(u64),
}

/// What a write command answers.
pub enum Out {
    Int(i64),
    Text(String),
    Members(Vec<Vec<u8>>),
}

impl Out {
    /// The answer of a counting command (HSET, HDEL, SADD, …).
    pub fn int(self) -> i64 {
        match self {
            Out::Int(n) => n,
            Out::Text(_) | Out::Members(_) => unreachable!("a counting command"),
        }
    }

    /// The answer of HINCRBYFLOAT.
    pub fn text(self) -> String {
        match self {
            Out::Text(t) => t,
            Out::Int(_) | Out::Members(_) => unreachable!("a float command"),
        }
    }

    /// The answer of SPOP.
    pub fn members(self) -> Vec<Vec<u8>> {
        match self {
            Out::Members(m) => m,
            Out::Int(_) | Out::Text(_) => unreachable!("SPOP pops members"),
        }
    }
}

impl Op<'_> {
    /// Applies the command: whether it changed the hash, and its answer
    /// (or the error to answer).
    pub(super) async fn apply(
        &self,
        e: &mut Edit<'_>,
    ) -> Result<Result<(bool, Out), &'static str>, Stop> {
        Ok(Ok(match *self {
            Op::Set(pairs) => {
                let mut added = 0;
                for p in pairs.chunks(2) {
                    added += i64::from(e.set(p[0], p[1]).await?);
                }
                (true, Out::Int(added))
            }
            Op::SetNx(f, v) => {
                if e.get(f).await?.is_some() {
                    (false, Out::Int(0))
                } else {
                    e.set(f, v).await?;
                    (true, Out::Int(1))
                }
            }
            Op::IncrBy(f, by) => {
                let old = match e.get(f).await? {
                    Some(v) => match nvdepot_resp::string2ll(&v) {
                        Some(n) => n,
                        None => return Ok(Err("ERR hash value is not an integer")),
                    },
                    None => 0,
                };
                let Some(n) = old.checked_add(by) else {
                    return Ok(Err(nvdepot_resp::errors::OVERFLOW));
                };
                e.set(f, n.to_string().as_bytes()).await?;
                (true, Out::Int(n))
            }
            Op::IncrByFloat(f, by) => {
                let old = match e.get(f).await? {
                    Some(v) => match super::args::parse_float(&v) {
                        Some(x) => x,
                        None => return Ok(Err("ERR hash value is not a float")),
                    },
                    None => 0.0,
                };
                let sum = old + by;
                if !sum.is_finite() {
                    return Ok(Err("ERR increment would produce NaN or Infinity"));
                }
                let text = super::args::format_float(sum);
                e.set(f, text.as_bytes()).await?;
                (true, Out::Text(text))
            }
            Op::Del(fields) => {
                let mut removed = 0;
                for f in fields {
                    removed += i64::from(e.del(f).await?);
                }
                (removed > 0, Out::Int(removed))
            }
            Op::Pop(n) => {
                let mut popped = Vec::new();
                while (popped.len() as u64) < n && e.meta.count > 0 {
                    popped.push(e.pop_random().await?);
                }
                (!popped.is_empty(), Out::Members(popped))
            }
        }))
    }
}

/// What a read of a paged hash found: the values of `fields` (HGET,
/// HMGET, HEXISTS, HSTRLEN) and the field count, or with `fields` `None`
/// every pair. `None` when the key is not a paged hash.
pub enum Read {
    Fields(Vec<Option<Vec<u8>>>, u64),
    All(Vec<(Vec<u8>, Vec<u8>)>),
}

/// The metadata (read by `meta_of`) and version of `key` if it is a
/// paged collection of `kind`, else `None`. The caller holds its lock.
pub(super) async fn paged_meta(
    store: &RespStore,
    kind: Kind,
    db: usize,
    key: &[u8],
    now: u64,
    meta_of: fn(&[u8]) -> Result<Meta, Error>,
) -> Result<Option<(Meta, u64)>, Error> {
    let (v, version) = store.get_for_write(db, key, now).await?;
    let Some(v) = v.filter(|v| v.kind() == kind && v.data().first() == Some(&SHAPE_PAGED)) else {
        return Ok(None);
    };
    Ok(Some((
        meta_of(v.data())?,
        version.expect("a live value has a record"),
    )))
}

/// Reads a paged hash under its key's lock (no commit half visible).
pub async fn read(
    store: &RespStore,
    kind: Kind,
    db: usize,
    key: &[u8],
    now: u64,
    fields: Option<&[&[u8]]>,
) -> Result<Option<Read>, Error> {
    let mut attempt = 0u32;
    loop {
        let _held = super::key_locks::turn_shared(&mut attempt, db, key).await;
        let Some((m, version)) = paged_meta(store, kind, db, key, now, Meta::decode).await? else {
            return Ok(None);
        };
        let got = match fields {
            None => load_all(store, db, key, m, version).await.map(Read::All),
            Some(fields) => {
                let mut edit = Edit::new(store, kind, db, key, m, version);
                let mut vals = Vec::with_capacity(fields.len());
                let mut got = Ok(());
                for f in fields {
                    match edit.get(f).await {
                        Ok(v) => vals.push(v),
                        Err(stop) => {
                            got = Err(stop);
                            break;
                        }
                    }
                }
                got.map(|()| Read::Fields(vals, m.count))
            }
        };
        match got {
            Ok(r) => return Ok(Some(r)),
            Err(Stop::Retry) => continue,
            Err(Stop::Fail(e)) => return Err(e),
        }
    }
}

/// Writes the compact hash or set `data` (its record's data) paged in
/// place of `version` (`None`: absent), under the key's lock: false if
/// the key changed meanwhile (decide again). A hash's items are field,
/// value, …; a set's members become fields with empty values.
#[allow(clippy::too_many_arguments)]
pub async fn convert(
    store: &RespStore,
    kind: Kind,
    db: usize,
    key: &[u8],
    version: Option<u64>,
    data: &[u8],
    at: u64,
) -> Result<bool, Error> {
    let items: Vec<&[u8]> = compact::items(data)
        .map(|i| i.map(|(_, e)| e))
        .collect::<Result<_, _>>()?;
    let pairs: Vec<(&[u8], &[u8])> = match kind {
        Kind::Set => items.iter().map(|m| (*m, &b""[..])).collect(),
        _ => items.chunks(2).map(|p| (p[0], p[1])).collect(),
    };
    let held = super::key_locks::PAGED.lock(db, key).await;
    write_whole(store, kind, db, key, version, &pairs, at, held).await
}

/// For a paged hash or set `v` under `key`: the whole collection in the
/// compact layout (large), as RENAME, COPY, MOVE and a migration write it
/// elsewhere. `None` for any other value.
pub async fn compact_data(
    store: &RespStore,
    db: usize,
    key: &[u8],
    v: &Value,
) -> Result<Option<Vec<u8>>, Error> {
    let kind = v.kind();
    if !matches!(kind, Kind::Hash | Kind::Set) || !super::list_pages::is_paged(v.data()) {
        return Ok(None);
    }
    let Some(Read::All(pairs)) = read(store, kind, db, key, 0, None).await? else {
        return Err(Error::Envelope(format!(
            "a paged {} vanished while read whole",
            kind.name()
        )));
    };
    let items = match kind {
        Kind::Set => pairs.into_iter().map(|(m, _)| m).collect(),
        _ => pairs.into_iter().flat_map(|(f, v)| [f, v]).collect(),
    };
    Ok(Some(compact::Compact { large: true, items }.encode()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_round_trips_and_buckets_cover_every_hash() {
        let m = Meta {
            stamp: 3,
            count: 100,
            level: 3,
            split: 5,
            per_bucket: 10,
        };
        assert_eq!(Meta::decode(&m.encode()).unwrap(), m);
        assert_eq!(m.buckets(), 13);
        for i in 0..1000 {
            let b = m.bucket_of(format!("f{i}").as_bytes());
            assert!(b < m.buckets(), "bucket {b} of {}", m.buckets());
        }
        assert!(Meta::decode(&Meta { split: 8, ..m }.encode()).is_err());
    }

    /// Damaged metadata and buckets are errors, never a panic.
    #[test]
    fn damaged_metadata_and_buckets_are_errors_not_panics() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let meta = Meta {
            stamp: 9,
            count: 40,
            level: 2,
            split: 1,
            per_bucket: 8,
        }
        .encode();
        let mut bucket = vec![1u8];
        bucket.extend_from_slice(&pair_item(b"field", b"value"));
        bucket.extend_from_slice(&pair_item(b"", &[3; 200]));
        for _ in 0..20_000 {
            let (mut m, mut b) = (meta.clone(), bucket.clone());
            if rng.gen_bool(0.5) {
                let n = rng.gen_range(0..40);
                m = (0..n).map(|_| rng.gen()).collect();
                b = (0..n).map(|_| rng.gen()).collect();
            } else {
                let i = rng.gen_range(0..m.len());
                m[i] ^= 1 << rng.gen_range(0..8);
                let j = rng.gen_range(0..b.len());
                b[j] ^= 1 << rng.gen_range(0..8);
            }
            if let Ok(m) = Meta::decode(&m) {
                assert!(m.bucket_of(b"x") < m.buckets());
            }
            let _ = find(&b, b"field");
            let _ = pairs(&b);
        }
    }

    #[test]
    fn a_bucket_finds_replaces_and_drops_pairs() {
        let mut b = vec![1u8];
        b.extend_from_slice(&pair_item(b"a", b"1"));
        b.extend_from_slice(&pair_item(b"bb", b"22"));
        let (s, e, v) = find(&b, b"bb").unwrap().unwrap();
        assert_eq!(v, b"22");
        b.splice(s..e, pair_item(b"bb", b"333"));
        assert_eq!(
            pairs(&b).unwrap(),
            vec![(&b"a"[..], &b"1"[..]), (&b"bb"[..], &b"333"[..])]
        );
        let (s, e, _) = find(&b, b"a").unwrap().unwrap();
        b.drain(s..e);
        assert_eq!(pairs(&b).unwrap(), vec![(&b"bb"[..], &b"333"[..])]);
        assert!(find(&b, b"zz").unwrap().is_none());
    }
}
