//! Large values: longer than one record holds (a quarter of a segment,
//! less the longest key), up to [`LARGE_VALUE_BYTES_MAX`], through the
//! same `put`/`get` API (uDepot stores up to 4 GiB; Redis takes 512 MiB).
//!
//! A large value is
//! - its *chunks*: ordinary put records in the key's chunk space (its
//!   physical namespace id with [`CHUNK_SPACE`] set), keyed by the key,
//!   the value's generation and the chunk's index ([`format::chunk_key`]),
//!   each holding `chunk_bytes` of the value (the last one the rest);
//! - its *head*: a record of kind `LargeHead` under the key itself, whose
//!   value is a [`LargeDescriptor`] (length, generation, chunk size and
//!   count). The head is the commit point: it is written by the write step
//!   every put takes (the key's stripe lock, the put's condition, group
//!   commit), and only after every chunk is durable. So a durable head
//!   implies durable chunks, and a crash leaves the value wholly there
//!   (its head was durable) or wholly absent (no head names its chunks).
//!
//! Chunks no head names (a put cut by a crash, or by an error after some
//! chunks) are dropped: by the put itself on an error, by recovery
//! ([`drop_orphans`]) after a crash. Once a write replacing a large head
//! (a put or a delete of the key) is durable, the old head's chunks are
//! deleted (tombstones). Generations come from the store's sequence
//! counter, taken before the chunks are written: never reused, since
//! recovery restarts the counter past every sequence number in the log.
//!
//! Readers take no lock. A reader that finds a chunk missing looks the
//! head up again: if it changed, the value was replaced meanwhile and the
//! read starts over; if not, the chunk is lost (damage: an error in store
//! mode, a miss in cache mode, where eviction may have taken it).

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::sync::atomic::AtomicI64;

use crate::aio::{now, Mode};
use crate::error::{Error, Result};
use crate::format::{self, LargeDescriptor, RecordKind, CHUNK_SPACE};
use crate::inner::{key_hash, Inner};
use crate::loc_cache::key_hash2;
use crate::namespace::{chunk_space, owner_of, SYSTEM_NS};
use crate::read::{Fetched, Record, Span};
use crate::recovery::keys::{Found, KeyId, KeyTable};
use crate::store::PutMode;

/// Longest value a store takes (and the default of
/// [`crate::Options::value_bytes_max`]).
pub const LARGE_VALUE_BYTES_MAX: usize = 1 << 30;

/// Largest chunk: a large put waits for one group commit per chunk, and a
/// ranged read of a chunk's middle reads at most this much before it.
const CHUNK_BYTES_MAX: usize = 8 << 20;

/// How many times a read starts over because the value was replaced
/// while it read the chunks.
const READ_ATTEMPTS: usize = 64;

/// A large value as its head named it when a read started.
#[derive(Clone, Copy)]
pub(crate) struct LargeAt<'a> {
    pub physical: u32,
    pub key: &'a [u8],
    /// The head's sequence number (the value's version).
    pub version: u64,
    pub d: LargeDescriptor,
}

/// What reading (part of) a large value's chunks gave.
pub(crate) enum Chunked {
    Bytes(Vec<u8>),
    /// The key's head changed meanwhile: start over.
    Replaced,
    /// A chunk is missing or unreadable and the head is unchanged.
    Lost(Error),
}

impl Inner {
    /// Bytes per chunk of a new large value: a chunk record (with the
    /// longer chunk key) must fit where any record fits.
    pub(crate) fn chunk_bytes(&self) -> usize {
        (self.record_value_bytes_max() - format::CHUNK_KEY_SUFFIX_BYTES).min(CHUNK_BYTES_MAX)
    }

    /// Puts a value longer than a record holds: chunks (each durable), then
    /// the head under the put's condition. Returns the new version, or
    /// `None` if the condition failed (the chunks are then dropped).
    pub(crate) async fn put_large(
        &self,
        mode: Mode,
        physical: u32,
        count: &AtomicI64,
        key: &[u8],
        value: &[u8],
        cond: PutMode,
    ) -> Result<Option<u64>> {
        // Refuse early what the condition refuses now, before writing the
        // chunks; the head's commit checks it again under the lock.
        if cond != PutMode::Upsert {
            let head = Span::Head { key_len: key.len() };
            let current = self.find_record(mode, physical, key, head).await?;
            let allowed = match cond {
                PutMode::Upsert => true,
                PutMode::IfAbsent => current.is_none(),
                PutMode::IfPresent => current.is_some(),
                PutMode::IfVersion(v) => current.is_some_and(|(r, _)| r.header.seq == v),
            };
            if !allowed {
                return Ok(None);
            }
        }
        let chunk_bytes = self.chunk_bytes();
        let d = LargeDescriptor {
            len: value.len() as u64,
            generation: self.seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            chunk_bytes: chunk_bytes as u32,
            chunks: value.len().div_ceil(chunk_bytes) as u32,
        };
        let system = self.system_count()?;
        let space = chunk_space(physical);
        let mut written = 0;
        let mut result = Ok(None);
        for (i, part) in value.chunks(chunk_bytes).enumerate() {
            let ck = format::chunk_key(key, d.generation, i as u32);
            let put = self.put_record(
                mode,
                space,
                &system,
                &ck,
                part,
                RecordKind::Put,
                PutMode::Upsert,
            );
            if let Err(e) = put.await {
                result = Err(e);
                break;
            }
            written = i as u32 + 1;
        }
        if written == d.chunks {
            let head = d.encode();
            let put = self.put_record(
                mode,
                physical,
                count,
                key,
                &head,
                RecordKind::LargeHead,
                cond,
            );
            result = put.await;
        }
        if !matches!(result, Ok(Some(_))) {
            let written = LargeDescriptor {
                chunks: written,
                ..d
            };
            if let Err(e) = self.drop_chunks(mode, physical, key, &written).await {
                tracing::error!(
                    "dropping the chunks of a large put that did not happen failed: {e}; \
                     they take space until the next crash recovery"
                );
            }
        }
        result
    }

    /// The registry's key counter, which counts chunk entries too.
    fn system_count(&self) -> Result<std::sync::Arc<AtomicI64>> {
        self.namespaces
            .counter(SYSTEM_NS)
            .ok_or_else(|| Error::Unusable("the system namespace has no counter".into()))
    }

    /// Deletes the chunks of a large value whose head was replaced (or
    /// never written).
    pub(crate) async fn drop_chunks(
        &self,
        mode: Mode,
        physical: u32,
        key: &[u8],
        d: &LargeDescriptor,
    ) -> Result<()> {
        let system = self.system_count()?;
        let space = chunk_space(physical);
        for i in 0..d.chunks {
            let ck = format::chunk_key(key, d.generation, i);
            // Chunks are never large heads: nothing more to drop.
            self.delete_one(mode, space, &system, &ck, None).await?;
        }
        Ok(())
    }

    /// After a write replacing `old` is durable: drops `old`'s chunks if it
    /// was a large head. The write is done and acknowledged whatever
    /// happens here; a failure leaves the chunks until crash recovery.
    pub(crate) async fn replaced(
        &self,
        mode: Mode,
        physical: u32,
        key: &[u8],
        old: Option<crate::inner::Existing>,
    ) {
        let Some(d) = old.and_then(|e| e.large) else {
            return;
        };
        if let Err(e) = self.drop_chunks(mode, physical, key, &d).await {
            tracing::error!("dropping the chunks of a replaced large value failed: {e}");
        }
    }

    /// The descriptor of large head `r` (read whole), or the error naming
    /// where it is if it does not decode.
    pub(crate) fn descriptor(
        &self,
        r: &Record,
        loc: nvdepot_index::Location,
    ) -> Result<LargeDescriptor> {
        LargeDescriptor::decode(r.value()).ok_or_else(|| {
            let (segment, offset) = self.layout.split(loc.pba);
            let (device, offset) = self.layout.describe(segment, offset);
            Error::Corrupt {
                device,
                offset,
                reason: "large head with an inconsistent descriptor".into(),
            }
        })
    }

    /// Bytes `[start, end)` of the large value `v`. Reads only the chunks
    /// the range touches: whole chunks whole (checksummed), the ends of
    /// the range as windows.
    pub(crate) async fn large_range(
        &self,
        mode: Mode,
        v: &LargeAt<'_>,
        start: u64,
        end: u64,
    ) -> Result<Chunked> {
        let LargeAt {
            physical,
            key,
            version: head_seq,
            d,
        } = *v;
        let d = &d;
        let end = end.min(d.len);
        let mut out = Vec::with_capacity(end.saturating_sub(start) as usize);
        if start >= end {
            return Ok(Chunked::Bytes(out));
        }
        let cb = u64::from(d.chunk_bytes);
        let space = chunk_space(physical);
        for i in (start / cb) as u32..=((end - 1) / cb) as u32 {
            let base = u64::from(i) * cb;
            let lo = (start.max(base) - base) as usize;
            let hi = (end.min(base + cb) - base) as usize;
            let ck = format::chunk_key(key, d.generation, i);
            let got = if lo == 0 && hi == d.chunk_len(i) {
                self.chunk_whole(mode, space, &ck, d.chunk_len(i)).await
            } else {
                self.chunk_window(mode, space, &ck, lo, hi).await
            };
            match got {
                Ok(Some(bytes)) => out.extend_from_slice(&bytes),
                Ok(None) | Err(_) => {
                    let head = Span::Head { key_len: key.len() };
                    let now = self.find_record(mode, physical, key, head).await?;
                    if now.is_none_or(|(r, _)| r.header.seq != head_seq) {
                        return Ok(Chunked::Replaced);
                    }
                    let err = got.err().unwrap_or_else(|| {
                        Error::Unusable(format!(
                            "chunk {i} of {} of a large value of {} bytes is missing",
                            d.chunks, d.len
                        ))
                    });
                    return Ok(Chunked::Lost(err));
                }
            }
        }
        Ok(Chunked::Bytes(out))
    }

    async fn chunk_whole(
        &self,
        mode: Mode,
        space: u32,
        ck: &[u8],
        len: usize,
    ) -> Result<Option<Vec<u8>>> {
        let Some((r, _)) = self.find_record(mode, space, ck, Span::Whole).await? else {
            return Ok(None);
        };
        Ok((r.value().len() == len).then(|| r.value().to_vec()))
    }

    /// Bytes `[lo, hi)` of a chunk's value: with its header and key in one
    /// read when the window starts near the front, else the header and key
    /// first, then only the window (and the index must still point to the
    /// chunk afterwards, so GC did not move it in between).
    async fn chunk_window(
        &self,
        mode: Mode,
        space: u32,
        ck: &[u8],
        lo: usize,
        hi: usize,
    ) -> Result<Option<Vec<u8>>> {
        const ONE_READ_BYTES: usize = 128 << 10;
        if hi <= ONE_READ_BYTES {
            let span = Span::Prefix {
                key_len: ck.len(),
                upto: hi as u64,
            };
            let Some((r, _)) = self.find_record(mode, space, ck, span).await? else {
                return Ok(None);
            };
            return Ok((r.value().len() >= hi).then(|| r.value()[lo..hi].to_vec()));
        }
        let head = Span::Head { key_len: ck.len() };
        let Some((r, loc)) = self.find_record(mode, space, ck, head).await? else {
            return Ok(None);
        };
        if (r.header.value_len as usize) < hi {
            return Ok(None);
        }
        let at = format::RECORD_HEADER_BYTES + ck.len() + lo;
        let bytes = crate::read::read_window(mode, &self.layout, loc, at, hi - lo).await?;
        let fp = nvdepot_index::Index::fingerprint(key_hash(space, ck));
        Ok(self.still_indexed(fp, loc).then_some(bytes))
    }

    /// A large value's chunk is gone: damage in store mode; in cache mode
    /// eviction may have taken it, and the key reads as a miss.
    pub(crate) fn lost(&self, e: Error) -> Result<()> {
        if self.opts.cache_mode {
            Ok(())
        } else {
            Err(e)
        }
    }

    /// The value of `key` and its version, large or not, read whole.
    pub(crate) async fn get_value(
        &self,
        mode: Mode,
        physical: u32,
        key: &[u8],
    ) -> Result<Option<(Vec<u8>, u64, nvdepot_index::Location)>> {
        for _ in 0..READ_ATTEMPTS {
            let Some((r, loc)) = self.find_record(mode, physical, key, Span::Whole).await? else {
                return Ok(None);
            };
            if r.header.kind != RecordKind::LargeHead {
                return Ok(Some((r.value().to_vec(), r.header.seq, loc)));
            }
            let d = self.descriptor(&r, loc)?;
            let v = LargeAt {
                physical,
                key,
                version: r.header.seq,
                d,
            };
            let range = self.large_range(mode, &v, 0, d.len);
            match range.await? {
                Chunked::Bytes(v) => return Ok(Some((v, r.header.seq, loc))),
                Chunked::Replaced => continue,
                Chunked::Lost(e) => {
                    self.lost(e)?;
                    return Ok(None);
                }
            }
        }
        Err(replaced_too_often())
    }

    /// The record of `key`, read whole: a small value, or a large value's
    /// descriptor.
    pub(crate) async fn head_of(&self, mode: Mode, physical: u32, key: &[u8]) -> Result<Head> {
        let Some((r, loc)) = self.find_record(mode, physical, key, Span::Whole).await? else {
            return Ok(Head::Absent);
        };
        if r.header.kind != RecordKind::LargeHead {
            return Ok(Head::Small(r.value().to_vec(), r.header.seq));
        }
        Ok(Head::Large(self.descriptor(&r, loc)?, r.header.seq))
    }
}

/// A key's record as a ranged or streaming read starts from it.
pub(crate) enum Head {
    Absent,
    /// A value in one record, and its version.
    Small(Vec<u8>, u64),
    /// A large value's descriptor, and its version.
    Large(LargeDescriptor, u64),
}

fn replaced_too_often() -> Error {
    Error::Unusable(format!(
        "large value replaced during each of {READ_ATTEMPTS} reads"
    ))
}

/// Bytes `[offset, offset + len)` of a key's value (clipped to its end).
pub(crate) fn get_range(
    inner: &Inner,
    physical: u32,
    key: &[u8],
    offset: u64,
    len: usize,
) -> Result<Option<Vec<u8>>> {
    let upto = offset.saturating_add(len as u64);
    for _ in 0..READ_ATTEMPTS {
        let span = Span::Prefix {
            key_len: key.len(),
            upto,
        };
        let Some((r, loc)) = now(inner.find_record(Mode::Blocking, physical, key, span))? else {
            return Ok(None);
        };
        if r.header.kind != RecordKind::LargeHead {
            let vlen = r.header.value_len as u64;
            let (start, end) = (offset.min(vlen) as usize, upto.min(vlen) as usize);
            return Ok(Some(r.value()[start..end].to_vec()));
        }
        // The head's descriptor, checksummed.
        let r = match now(inner.read_at(Mode::Blocking, loc, Span::Whole))? {
            Fetched::Record(r) if inner.holds(&r, physical, key) => r,
            _ => continue,
        };
        let v = LargeAt {
            physical,
            key,
            version: r.header.seq,
            d: inner.descriptor(&r, loc)?,
        };
        let range = inner.large_range(Mode::Blocking, &v, offset, upto);
        match now(range)? {
            Chunked::Bytes(v) => return Ok(Some(v)),
            Chunked::Replaced => continue,
            Chunked::Lost(e) => {
                inner.lost(e)?;
                return Ok(None);
            }
        }
    }
    Err(replaced_too_often())
}

/// A streaming read of one value ([`crate::Store::value_reader`]):
/// `std::io::Read` and `Seek` over the value as it was when the reader was
/// made. A large value is read one chunk at a time, only the chunks read
/// or seeked to; if the value is replaced or deleted meanwhile, reading a
/// chunk not yet read fails (`ErrorKind::Interrupted` is not used: the
/// error says the value changed).
pub struct ValueReader<'a> {
    inner: &'a Inner,
    physical: u32,
    key: Vec<u8>,
    version: u64,
    source: Source,
    pos: u64,
}

enum Source {
    Small(Vec<u8>),
    Large {
        d: LargeDescriptor,
        /// The chunk read last: its index and bytes.
        chunk: Option<(u32, Vec<u8>)>,
    },
}

impl<'a> ValueReader<'a> {
    pub(crate) fn open(inner: &'a Inner, physical: u32, key: &[u8]) -> Result<Option<Self>> {
        let (source, version) = match now(inner.head_of(Mode::Blocking, physical, key))? {
            Head::Absent => return Ok(None),
            Head::Small(v, seq) => (Source::Small(v), seq),
            Head::Large(d, seq) => (Source::Large { d, chunk: None }, seq),
        };
        Ok(Some(ValueReader {
            inner,
            physical,
            key: key.to_vec(),
            version,
            source,
            pos: 0,
        }))
    }

    /// The value's length in bytes.
    pub fn len(&self) -> u64 {
        match &self.source {
            Source::Small(v) => v.len() as u64,
            Source::Large { d, .. } => d.len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value's version (as [`crate::Store::get_versioned`] gives it).
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Whether the value is stored as a large value (chunks).
    pub fn is_large(&self) -> bool {
        matches!(self.source, Source::Large { .. })
    }
}

impl Read for ValueReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let pos = self.pos;
        let n = match &mut self.source {
            Source::Small(v) => {
                let from = (pos as usize).min(v.len());
                let n = buf.len().min(v.len() - from);
                buf[..n].copy_from_slice(&v[from..from + n]);
                n
            }
            Source::Large { d, chunk } => {
                if pos >= d.len {
                    return Ok(0);
                }
                let i = (pos / u64::from(d.chunk_bytes)) as u32;
                if chunk.as_ref().is_none_or(|(at, _)| *at != i) {
                    let base = u64::from(i) * u64::from(d.chunk_bytes);
                    let end = base + d.chunk_len(i) as u64;
                    let v = LargeAt {
                        physical: self.physical,
                        key: &self.key,
                        version: self.version,
                        d: *d,
                    };
                    let got = now(self.inner.large_range(Mode::Blocking, &v, base, end))
                        .map_err(std::io::Error::other)?;
                    match got {
                        Chunked::Bytes(b) => *chunk = Some((i, b)),
                        Chunked::Replaced => {
                            return Err(std::io::Error::other(
                                "the value was replaced or deleted while it was being read",
                            ))
                        }
                        Chunked::Lost(e) => return Err(std::io::Error::other(e)),
                    }
                }
                let (_, bytes) = chunk.as_ref().expect("chunk read above");
                let from = (pos - u64::from(i) * u64::from(d.chunk_bytes)) as usize;
                let n = buf.len().min(bytes.len() - from);
                buf[..n].copy_from_slice(&bytes[from..from + n]);
                n
            }
        };
        self.pos += n as u64;
        Ok(n)
    }
}

impl Seek for ValueReader<'_> {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        let target = match to {
            SeekFrom::Start(p) => Some(p),
            SeekFrom::End(d) => self.len().checked_add_signed(d),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
        };
        let Some(p) = target else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "seek before the start of the value",
            ));
        };
        self.pos = p;
        Ok(p)
    }
}

/// What the log scan of a rebuild saw of large values.
#[derive(Default)]
pub(crate) struct LargeSeen {
    /// Every large head: (key, sequence number, generation).
    pub heads: Vec<(KeyId, u64, u64)>,
    /// Every chunk record: (chunk key, sequence number, owner key,
    /// generation).
    pub chunks: Vec<(KeyId, u64, KeyId, u64)>,
}

impl LargeSeen {
    /// Notes a record met by the scan if it is a large head or a chunk.
    pub fn note(&mut self, id: KeyId, header: &format::RecordHeader, key: &[u8], value: &[u8]) {
        if header.kind == RecordKind::LargeHead {
            if let Some(d) = LargeDescriptor::decode(value) {
                self.heads.push((id, header.seq, d.generation));
            }
        } else if header.kind == RecordKind::Put && header.namespace & CHUNK_SPACE != 0 {
            if let Some((owner, generation, _)) = format::parse_chunk_key(key) {
                let ns = owner_of(header.namespace);
                let owner_id = (ns, key_hash(ns, owner), key_hash2(ns, owner));
                self.chunks.push((id, header.seq, owner_id, generation));
            }
        }
    }

    pub fn extend(&mut self, other: LargeSeen) {
        self.heads.extend(other.heads);
        self.chunks.extend(other.chunks);
    }
}

/// Hides, in the key table of a rebuild, every chunk whose owner's live
/// record is not a large head of its generation (a large put cut by the
/// crash, or chunks of a replaced value whose deletion had not happened):
/// they are not indexed, so GC reclaims their space. Returns how many.
pub(crate) fn drop_orphans(found: &mut KeyTable, seen: &LargeSeen) -> usize {
    let generations: HashMap<(KeyId, u64), u64> = seen
        .heads
        .iter()
        .map(|&(id, seq, generation)| ((id, seq), generation))
        .collect();
    let mut dropped = 0;
    for &(chunk, seq, owner, generation) in &seen.chunks {
        let live = found
            .get(&chunk)
            .is_some_and(|f| !f.tombstone && f.seq == seq);
        if !live {
            continue;
        }
        let owner_generation = found
            .get(&owner)
            .filter(|f| !f.tombstone)
            .and_then(|f| generations.get(&(owner, f.seq)));
        if owner_generation != Some(&generation) {
            let hidden = Found {
                seq,
                pba: 0,
                grains: 0,
                tombstone: true,
            };
            found.keep_newest(chunk, hidden);
            dropped += 1;
        }
    }
    dropped
}
