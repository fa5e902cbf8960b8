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
//! (`recovery/large.rs`) after a crash. Once a write replacing a large
//! head (a put or a delete of the key) is made, the old head's chunks
//! leave the index, without tombstones (`Inner::replaced` says why that
//! is safe). Generations come from the store's sequence
//! counter, taken before the chunks are written: never reused, since
//! recovery restarts the counter past every sequence number in the log.
//!
//! This file writes large values and reads them whole or by range;
//! `value_reader.rs` streams them, and `recovery/large.rs` settles them at
//! a rebuild.
//!
//! Readers take no lock. A reader that finds a chunk missing looks the
//! head up again: if it changed, the value was replaced meanwhile and the
//! read starts over; if not, the chunk is lost (damage: an error in store
//! mode, a miss in cache mode, where eviction may have taken it).

use std::future::Future;
use std::sync::atomic::AtomicI64;
use std::task::Poll;

use crate::aio::{now, Mode};
use crate::error::{Error, Result};
use crate::format::{self, LargeDescriptor, RecordKind};
use crate::inner::{key_hash, Inner};
use crate::namespace::{chunk_space, SYSTEM_NS};
use crate::read::{Fetched, Record, Span};
use crate::store::PutMode;
use crate::writer::{Appender, RecordParts};

/// Longest value a store takes (and the default of
/// [`crate::Options::value_bytes_max`]).
pub const LARGE_VALUE_BYTES_MAX: usize = 1 << 30;

/// Largest chunk: the unit a large value is written, checksummed and read
/// whole in (a batch of them shares one group commit).
const CHUNK_BYTES_MAX: usize = 8 << 20;

/// Chunks written before one group commit: a batch's buffers are the
/// writer's copy of them.
const CHUNK_BATCH_BYTES: usize = 32 << 20;

/// How many times a read starts over because the value was replaced
/// while it read the chunks.
const READ_ATTEMPTS: usize = 64;

/// Asks the kernel to back `buf`'s capacity with transparent huge pages
/// (where THP is `madvise`, as here): filling a fresh 256 MiB buffer page
/// by page costs a fault per 4 KiB, a quarter of a large GET's CPU time.
fn advise_huge_pages(buf: &mut Vec<u8>) {
    const HUGE: usize = 2 << 20;
    if buf.capacity() < 2 * HUGE {
        return;
    }
    let start = buf.as_mut_ptr() as usize;
    let (from, to) = (
        start.next_multiple_of(HUGE),
        (start + buf.capacity()) / HUGE * HUGE,
    );
    if to > from {
        // SAFETY: [from, to) lies within `buf`'s allocation, which we own;
        // MADV_HUGEPAGE is advice about how to back it and changes neither
        // its contents nor its mapping's validity. A failure is harmless.
        unsafe {
            libc::madvise(from as *mut libc::c_void, to - from, libc::MADV_HUGEPAGE);
        }
    }
}

/// Runs two futures together: on a ring, the IO of both is in flight at
/// once (a blocking future completes on its first poll, so the two run
/// one after the other).
pub(crate) async fn join2<A: Future, B: Future>(a: A, b: B) -> (A::Output, B::Output) {
    let (mut a, mut b) = (std::pin::pin!(a), std::pin::pin!(b));
    let (mut ra, mut rb) = (None, None);
    std::future::poll_fn(|cx| {
        if ra.is_none() {
            if let Poll::Ready(v) = a.as_mut().poll(cx) {
                ra = Some(v);
            }
        }
        if rb.is_none() {
            if let Poll::Ready(v) = b.as_mut().poll(cx) {
                rb = Some(v);
            }
        }
        if ra.is_some() && rb.is_some() {
            Poll::Ready((ra.take().expect("set"), rb.take().expect("set")))
        } else {
            Poll::Pending
        }
    })
    .await
}

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

    /// Puts a value longer than a record holds: chunks (durable), then
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
        let mut written = 0;
        let result = self
            .write_chunks(mode, physical, key, &d, value, &mut written)
            .await;
        let mut result = result.map(|()| None);
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

    /// Writes the chunks of large value `d`, durable and indexed, a batch
    /// of up to [`CHUNK_BATCH_BYTES`] at a time: appended together, one
    /// group commit, then indexed. No stripe lock: no one else writes a
    /// chunk key (its generation is new), and GC moves only indexed
    /// records. `written`: how many are indexed (to drop on an error).
    async fn write_chunks(
        &self,
        mode: Mode,
        physical: u32,
        key: &[u8],
        d: &LargeDescriptor,
        value: &[u8],
        written: &mut u32,
    ) -> Result<()> {
        let system = self.system_count()?;
        let space = chunk_space(physical);
        let per_batch = (CHUNK_BATCH_BYTES / d.chunk_bytes as usize).max(1);
        let chunks: Vec<&[u8]> = value.chunks(d.chunk_bytes as usize).collect();
        for (b, batch) in chunks.chunks(per_batch).enumerate() {
            let mut appended = Vec::with_capacity(batch.len());
            for (j, part) in batch.iter().enumerate() {
                let i = (b * per_batch + j) as u32;
                let ck = format::chunk_key(key, d.generation, i);
                let header = self.header(RecordKind::Put, space, &ck, part.len());
                let parts = RecordParts {
                    header,
                    key: &ck,
                    value: part,
                };
                let app = loop {
                    if let Some(app) = self.writer.try_append(&parts, Appender::Put)? {
                        break app;
                    }
                    self.writer.wait_for_space_in(mode, Appender::Put).await?;
                };
                appended.push((ck, app));
            }
            let last = appended.last().map_or(0, |(_, a)| a.lsn);
            self.writer.wait_durable_in(mode, last).await?;
            let mut cands = Vec::new();
            for (ck, app) in appended {
                let fp = nvdepot_index::Index::fingerprint(key_hash(space, &ck));
                let loc = crate::inner::location_at(app.pba, app.grains);
                cands.clear();
                self.index.lookup(fp, &mut cands);
                self.link(fp, loc, app.grains, None, &cands)?;
                system.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                self.counters.user_bytes.fetch_add(
                    app.grains * self.layout.grain_bytes,
                    std::sync::atomic::Ordering::Relaxed,
                );
                *written += 1;
            }
        }
        Ok(())
    }

    /// Drops the chunks of a large value whose head was replaced (or never
    /// written) from the index, under their stripe locks (GC may be moving
    /// one). No tombstones: a chunk no live head names is dropped by
    /// recovery anyway (`settle_large`), and it is never read meanwhile.
    pub(crate) async fn drop_chunks(
        &self,
        mode: Mode,
        physical: u32,
        key: &[u8],
        d: &LargeDescriptor,
    ) -> Result<()> {
        let system = self.system_count()?;
        let space = chunk_space(physical);
        let mut cands = Vec::new();
        for i in 0..d.chunks {
            let ck = format::chunk_key(key, d.generation, i);
            let at = crate::inner::KeyAt::new(space, &ck);
            let _stripe = self.stripes.lock_in(mode, self.stripe_of(at.h)).await;
            let found = self.existing(mode, space, &ck, at.h, at.h2, &mut cands);
            let Some(e) = found.await? else {
                continue;
            };
            let seg = self.layout.segment_of(e.loc.pba);
            let _unlinking = self.segments.unlinking(seg);
            if self.index.remove(at.fp, e.loc) {
                self.segments.sub_valid(seg, e.grains);
                system.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
            }
            self.loc_cache
                .clear(self.stripe_of(at.h), at.physical, at.h, at.h2);
        }
        Ok(())
    }

    /// After a write replacing `old` (durable, or buffered in write-behind
    /// mode): drops `old`'s chunks from the index if it was a large head. The write is done and acknowledged whatever
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
        // Even when the replacing write is not durable yet (write-behind),
        // this only unindexes the chunks: their records stay on the device
        // until GC frees their segment, and GC writes out and flushes the
        // log first (`collect_segment`), so a crash that loses the
        // replacing write finds the old value whole.
        // Boxed: this runs at the end of every put and delete (see `Inner::put`).
        if let Err(e) = Box::pin(self.drop_chunks(mode, physical, key, &d)).await {
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
        let corrupt = |reason: String| {
            let (segment, offset) = self.layout.split(loc.pba);
            let (device, offset) = self.layout.describe(segment, offset);
            Error::Corrupt {
                device,
                offset,
                reason,
            }
        };
        let d = LargeDescriptor::decode(r.value())
            .ok_or_else(|| corrupt("large head with an inconsistent descriptor".into()))?;
        // Checksummed, so written by a store; still, never allocate what
        // no store of this build writes.
        if d.len > LARGE_VALUE_BYTES_MAX as u64 {
            return Err(corrupt(format!(
                "large head of {} bytes, over this build's limit of {LARGE_VALUE_BYTES_MAX}",
                d.len
            )));
        }
        Ok(d)
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
            physical, key, d, ..
        } = *v;
        let d = &d;
        let end = end.min(d.len);
        let mut out = Vec::with_capacity(end.saturating_sub(start) as usize);
        advise_huge_pages(&mut out);
        if start >= end {
            return Ok(Chunked::Bytes(out));
        }
        let cb = u64::from(d.chunk_bytes);
        let space = chunk_space(physical);
        let bounds = |i: u32| {
            let base = u64::from(i) * cb;
            let lo = (start.max(base) - base) as usize;
            let hi = (end.min(base + cb) - base) as usize;
            (lo, hi, lo == 0 && hi == d.chunk_len(i))
        };
        let (first, last) = ((start / cb) as u32, ((end - 1) / cb) as u32);
        let mut i = first;
        while i <= last {
            let (lo, hi, whole) = bounds(i);
            let ck = format::chunk_key(key, d.generation, i);
            if whole && i < last && bounds(i + 1).2 {
                // Two whole chunks: both reads in flight at once (on a
                // ring; a blocking caller reads one after the other).
                let ck2 = format::chunk_key(key, d.generation, i + 1);
                let (a, b) = join2(
                    self.fetch_chunk(mode, space, &ck, d.chunk_len(i)),
                    self.fetch_chunk(mode, space, &ck2, d.chunk_len(i + 1)),
                )
                .await;
                match (a, b) {
                    (Ok(Some(a)), Ok(Some(b))) => {
                        out.extend_from_slice(a.value());
                        out.extend_from_slice(b.value());
                        i += 2;
                        continue;
                    }
                    (Ok(Some(_)), b) => return self.chunk_gone(mode, v, i + 1, b.err()).await,
                    (a, _) => return self.chunk_gone(mode, v, i, a.err()).await,
                }
            }
            let got = if whole {
                self.fetch_chunk(mode, space, &ck, d.chunk_len(i))
                    .await
                    .map(|r| r.map(|r| out.extend_from_slice(r.value())).is_some())
            } else {
                self.chunk_window(mode, space, &ck, lo, hi, &mut out).await
            };
            match got {
                Ok(true) => i += 1,
                Ok(false) => return self.chunk_gone(mode, v, i, None).await,
                Err(e) => return self.chunk_gone(mode, v, i, Some(e)).await,
            }
        }
        Ok(Chunked::Bytes(out))
    }

    /// Chunk `i` of `v` is missing or unreadable (`err`): if the key's
    /// head changed meanwhile, the value was replaced (start over); else
    /// the chunk is lost.
    async fn chunk_gone(
        &self,
        mode: Mode,
        v: &LargeAt<'_>,
        i: u32,
        err: Option<Error>,
    ) -> Result<Chunked> {
        let head = Span::Head {
            key_len: v.key.len(),
        };
        let now = self.find_record(mode, v.physical, v.key, head).await?;
        if now.is_none_or(|(r, _)| r.header.seq != v.version) {
            return Ok(Chunked::Replaced);
        }
        let err = err.unwrap_or_else(|| {
            Error::Unusable(format!(
                "chunk {i} of {} of a large value of {} bytes is missing",
                v.d.chunks, v.d.len
            ))
        });
        Ok(Chunked::Lost(err))
    }

    /// A whole chunk, read and checksummed; `None`: not there (or not of
    /// the length its head says).
    async fn fetch_chunk(
        &self,
        mode: Mode,
        space: u32,
        ck: &[u8],
        len: usize,
    ) -> Result<Option<Record>> {
        let Some((r, loc)) = self.find_record(mode, space, ck, Span::Whole).await? else {
            return Ok(None);
        };
        if r.value().len() != len {
            return Ok(None);
        }
        // Cache mode: a read chunk is as recently used as its head.
        self.touch(loc);
        Ok(Some(r))
    }

    /// Appends bytes `[lo, hi)` of a chunk's value to `out` (`false`: not
    /// there): with its header and key in one read when the window starts
    /// near the front, else the header and key first, then only the window
    /// (and the index must still point to the chunk afterwards, so GC did
    /// not move it in between).
    async fn chunk_window(
        &self,
        mode: Mode,
        space: u32,
        ck: &[u8],
        lo: usize,
        hi: usize,
        out: &mut Vec<u8>,
    ) -> Result<bool> {
        const ONE_READ_BYTES: usize = 128 << 10;
        if hi <= ONE_READ_BYTES {
            let span = Span::Prefix {
                key_len: ck.len(),
                upto: hi as u64,
            };
            let Some((r, loc)) = self.find_record(mode, space, ck, span).await? else {
                return Ok(false);
            };
            if r.value().len() < hi {
                return Ok(false);
            }
            self.touch(loc);
            out.extend_from_slice(&r.value()[lo..hi]);
            return Ok(true);
        }
        let head = Span::Head { key_len: ck.len() };
        let Some((r, loc)) = self.find_record(mode, space, ck, head).await? else {
            return Ok(false);
        };
        if (r.header.value_len as usize) < hi {
            return Ok(false);
        }
        let at = format::RECORD_HEADER_BYTES + ck.len() + lo;
        let bytes = crate::read::read_window(mode, &self.layout, loc, at, hi - lo).await?;
        let fp = nvdepot_index::Index::fingerprint(key_hash(space, ck));
        if !self.still_indexed(fp, loc) {
            return Ok(false);
        }
        self.touch(loc);
        out.extend_from_slice(&bytes);
        Ok(true)
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
            // Boxed: see `Inner::put`.
            let range = Box::pin(self.large_range(mode, &v, 0, d.len));
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
