//! Reading records back: one device read per candidate location.

use nvdepot_index::{Location, GRAINS_MAX};
use nvdepot_io::AlignedBuf;

use crate::aio::{now, Mode};
use crate::error::{Error, Result};
use crate::format::{self, RecordCheck, RecordHeader, RECORD_HEADER_BYTES};
use crate::layout::Layout;

/// A record read from the device and verified.
pub(crate) struct Record {
    buf: Option<AlignedBuf>,
    start: usize,
    pub header: RecordHeader,
    /// Whether the whole record's checksum was verified.
    whole: bool,
}

impl Drop for Record {
    fn drop(&mut self) {
        if let Some(b) = self.buf.take() {
            b.recycle();
        }
    }
}

impl Record {
    fn bytes(&self) -> &[u8] {
        self.buf
            .as_deref()
            .expect("record buffer present until drop")
    }

    pub fn key(&self) -> &[u8] {
        let k = self.start + RECORD_HEADER_BYTES;
        &self.bytes()[k..k + self.header.key_len as usize]
    }

    /// Whether the value was read whole and checksummed.
    pub fn value_checked(&self) -> bool {
        self.whole
    }

    /// The value, or as much of it as was read (a head read has none).
    pub fn value(&self) -> &[u8] {
        let v = self.start + RECORD_HEADER_BYTES + self.header.key_len as usize;
        let buf = self.bytes();
        let end = (v + self.header.value_len as usize).min(buf.len());
        &buf[v.min(end)..end]
    }
}

/// What a read found at a location.
pub(crate) enum Fetched {
    Record(Record),
    /// Not a valid record (corrupt, or overwritten since the lookup).
    Invalid(Error),
}

/// How much of a record to read.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Span {
    /// Header, key and the whole value; full checksum verified.
    Whole,
    /// Header and key only; header checksum verified.
    Head { key_len: usize },
    /// Header, key and value bytes `[..upto)`; header checksum verified.
    Prefix { key_len: usize, upto: u64 },
}

pub(crate) fn read_record(layout: &Layout, loc: Location, span: Span) -> Result<Fetched> {
    now(read_record_in(Mode::Blocking, layout, loc, span))
}

/// Reads and verifies the record at `loc` (one device read, two if the
/// record is longer than the index can say).
pub(crate) async fn read_record_in(
    mode: Mode,
    layout: &Layout,
    loc: Location,
    span: Span,
) -> Result<Fetched> {
    let (segment, offset) = layout.split(loc.pba);
    let grain = layout.grain_bytes as usize;
    let stored = loc.grains as usize * grain;
    let want = match span {
        Span::Whole => stored,
        Span::Head { key_len } => (RECORD_HEADER_BYTES + key_len).min(stored),
        Span::Prefix { key_len, upto } => {
            (RECORD_HEADER_BYTES + key_len + upto as usize).min(stored)
        }
    };
    let (mut buf, mut start) = layout.read_range_in(mode, segment, offset, want).await?;
    let invalid = |reason: String| invalid_at(layout, loc, reason);
    let Some(h) = RecordHeader::decode_fields(&buf[start..]) else {
        return Ok(invalid("bad record header".into()));
    };
    // A record longer than the index's 11-bit size field: read the rest now
    // that the header says how long it is.
    let body = h.body_bytes();
    if loc.grains == GRAINS_MAX && span == Span::Whole && body > buf.len() - start {
        if offset + body as u64 > layout.segment_bytes {
            return Ok(invalid(format!(
                "record length {body} runs past its segment"
            )));
        }
        let (bigger, at) = layout.read_range_in(mode, segment, offset, body).await?;
        std::mem::replace(&mut buf, bigger).recycle();
        start = at;
    }
    Ok(verify(layout, loc, span, buf, start))
}

/// `len` bytes at byte `at` of the record at `loc` (a window of its value:
/// not checksummed; the caller checked the record's head).
pub(crate) async fn read_window(
    mode: Mode,
    layout: &Layout,
    loc: Location,
    at: usize,
    len: usize,
) -> Result<Vec<u8>> {
    let (segment, offset) = layout.split(loc.pba);
    let (buf, start) = layout
        .read_range_in(mode, segment, offset + at as u64, len)
        .await?;
    let bytes = buf[start..start + len].to_vec();
    buf.recycle();
    Ok(bytes)
}

/// The record of a write-behind put whose buffer is not written yet:
/// `bytes` is its whole encoded record, verified as a device read is.
pub(crate) fn buffered_record(layout: &Layout, loc: Location, span: Span, bytes: &[u8]) -> Fetched {
    let mut buf = layout.buffer(bytes.len());
    buf[..bytes.len()].copy_from_slice(bytes);
    verify(layout, loc, span, buf, 0)
}

/// Checks the record read into `buf[start..]` from `loc`.
fn verify(layout: &Layout, loc: Location, span: Span, buf: AlignedBuf, start: usize) -> Fetched {
    let grain = layout.grain_bytes as usize;
    let stored = loc.grains as usize * grain;
    let invalid = |reason: String| invalid_at(layout, loc, reason);
    let Some(h) = RecordHeader::decode_fields(&buf[start..]) else {
        return invalid("bad record header".into());
    };
    let body = h.body_bytes();
    let check = match span {
        Span::Whole => format::check_record(&buf[start..]),
        _ => format::check_record_head(&buf[start..]),
    };
    match check {
        RecordCheck::Valid(header) => {
            if header.kind == format::RecordKind::Pad {
                return invalid("pad record where a key was expected".into());
            }
            if span == Span::Whole
                && loc.grains < GRAINS_MAX
                && body.div_ceil(grain) != loc.grains as usize
            {
                return invalid(format!(
                    "record spans {} grains, index says {}",
                    body.div_ceil(grain),
                    loc.grains
                ));
            }
            Fetched::Record(Record {
                buf: Some(buf),
                start,
                header,
                whole: span == Span::Whole,
            })
        }
        RecordCheck::Truncated { need } => {
            invalid(format!("record needs {need} bytes, {} stored", stored))
        }
        RecordCheck::Invalid(why) => invalid(why.to_string()),
    }
}

/// "Not a valid record at `loc`", naming the device and offset.
fn invalid_at(layout: &Layout, loc: Location, reason: String) -> Fetched {
    let (segment, offset) = layout.split(loc.pba);
    let (device, at) = layout.describe(segment, offset);
    Fetched::Invalid(Error::Corrupt {
        device,
        offset: at,
        reason,
    })
}
