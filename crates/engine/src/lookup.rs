//! Finding a key's record: index candidates, the location cache, reads
//! that tell "absent" from "moved by GC" without a lock.

use std::sync::atomic::Ordering;

use nvdepot_index::{Index, Location};

use crate::aio::Mode;
use crate::error::{Error, Result};
use crate::format::RecordKind;
use crate::inner::{key_hash, Existing, Inner};
use crate::read::{buffered_record, read_record_in, Fetched, Record, Span};

impl Inner {
    /// Finds the record of `key` among the index candidates, reading
    /// `span` of each (headers and keys only for `Span::Head`). Caller
    /// holds the key's stripe lock.
    pub async fn find_indexed(
        &self,
        mode: Mode,
        physical: u32,
        key: &[u8],
        fp: u64,
        span: Span,
        cands: &mut Vec<Location>,
    ) -> Result<Option<(Existing, Record)>> {
        cands.clear();
        self.index.lookup(fp, cands);
        for &loc in cands.iter() {
            match self.read_at(mode, loc, span).await? {
                Fetched::Record(r) => {
                    if self.holds(&r, physical, key) {
                        let large = self.large_of(mode, &r, loc).await?;
                        let e = Existing {
                            loc,
                            grains: self.grains_of(&r.header),
                            seq: r.header.seq,
                            large,
                        };
                        return Ok(Some((e, r)));
                    }
                }
                Fetched::Invalid(e) => {
                    // Another key's record may have been moved by GC since
                    // the lookup; only a record still indexed is corrupt.
                    if self.still_indexed(fp, loc) {
                        return Err(e);
                    }
                }
            }
        }
        Ok(None)
    }

    /// Whether `r` is a put (or large head) of `key` in namespace
    /// `physical`.
    pub(crate) fn holds(&self, r: &Record, physical: u32, key: &[u8]) -> bool {
        r.header.kind.is_value() && r.header.namespace == physical && r.key() == key
    }

    /// The descriptor of `r` if it is a large head (read whole again if
    /// `r` was read in part). Caller holds the key's stripe lock.
    async fn large_of(
        &self,
        mode: Mode,
        r: &Record,
        loc: Location,
    ) -> Result<Option<crate::format::LargeDescriptor>> {
        if r.header.kind != RecordKind::LargeHead {
            return Ok(None);
        }
        if let Some(d) = crate::format::LargeDescriptor::decode(r.value()) {
            if r.value_checked() {
                return Ok(Some(d));
            }
        }
        // Boxed: this sits in every writer's lookup (see `Inner::put`).
        match Box::pin(self.read_at(mode, loc, Span::Whole)).await? {
            Fetched::Record(whole) => self.descriptor(&whole, loc).map(Some),
            Fetched::Invalid(e) => Err(e),
        }
    }

    /// The key's existing record: from the location cache if the index
    /// confirms it, else by reading candidates (`find_indexed`). Caller holds
    /// the key's stripe lock.
    pub async fn existing(
        &self,
        mode: Mode,
        physical: u32,
        key: &[u8],
        hash: u64,
        hash2: u64,
        cands: &mut Vec<Location>,
    ) -> Result<Option<Existing>> {
        let fp = Index::fingerprint(hash);
        if let Some(e) = self
            .loc_cache
            .get(self.stripe_of(hash), physical, hash, hash2)
        {
            if self.still_indexed(fp, e.loc) {
                cands.clear();
                return Ok(Some(e));
            }
        }
        let head = Span::Head { key_len: key.len() };
        Ok(self
            .find_indexed(mode, physical, key, fp, head, cands)
            .await?
            .map(|(e, _)| e))
    }

    pub fn still_indexed(&self, fp: u64, loc: Location) -> bool {
        let mut v = Vec::new();
        self.index.lookup(fp, &mut v);
        v.contains(&loc)
    }

    /// The record of `key` (read with `span`) and where it is, or `None`.
    /// Readers take no lock: if no candidate holds the key, the lookup is
    /// repeated, and only an unchanged candidate set means "absent" (a
    /// record may have moved under us, or a candidate may be corrupt).
    pub(crate) async fn find_record(
        &self,
        mode: Mode,
        physical: u32,
        key: &[u8],
        span: Span,
    ) -> Result<Option<(crate::read::Record, Location)>> {
        let fp = Index::fingerprint(key_hash(physical, key));
        let mut cands = Vec::new();
        let mut again = Vec::new();
        for _ in 0..64 {
            cands.clear();
            self.index.lookup(fp, &mut cands);
            let mut corrupt = None;
            for &loc in &cands {
                match self.read_at(mode, loc, span).await? {
                    Fetched::Record(r) => {
                        if self.holds(&r, physical, key) {
                            return Ok(Some((r, loc)));
                        }
                    }
                    Fetched::Invalid(e) => corrupt = Some(e),
                }
            }
            again.clear();
            self.index.lookup(fp, &mut again);
            if again == cands {
                return match corrupt {
                    Some(e) => Err(e),
                    None => Ok(None),
                };
            }
        }
        Err(Error::Unusable("key kept moving during 64 lookups".into()))
    }

    /// The value and version (record sequence number) of a key.
    pub async fn get(
        &self,
        mode: Mode,
        physical: u32,
        key: &[u8],
    ) -> Result<Option<(Vec<u8>, u64)>> {
        Ok(self
            .get_value(mode, physical, key)
            .await?
            .map(|(value, seq, loc)| {
                self.touch(loc);
                (value, seq)
            }))
    }

    /// Notes a hit on the segment holding `loc` (segment LRU).
    pub(crate) fn touch(&self, loc: Location) {
        if !self.opts.cache_mode {
            return;
        }
        let seg = self.segments.get(self.layout.segment_of(loc.pba));
        let now = self.seq.load(Ordering::Relaxed);
        // Skip the store while the mark is nearly current: a hot segment's
        // line then stays shared between the cores reading it.
        if seg.last_hit.load(Ordering::Relaxed) + 64 < now {
            seg.last_hit.store(now, Ordering::Relaxed);
        }
    }

    /// Reads the record at `loc`: from the write buffer if it is a
    /// write-behind record not yet written, else from the device.
    pub(crate) async fn read_at(&self, mode: Mode, loc: Location, span: Span) -> Result<Fetched> {
        if let Some(bytes) = self.writer.unwritten_record(loc.pba) {
            return Ok(buffered_record(&self.layout, loc, span, &bytes));
        }
        read_record_in(mode, &self.layout, loc, span).await
    }
}
