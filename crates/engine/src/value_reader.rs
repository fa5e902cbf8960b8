//! Streaming reads of a value, a large value a chunk at a time
//! ([`crate::Store::value_reader`]).

use std::io::{Read, Seek, SeekFrom};

use crate::aio::{now, Mode};
use crate::error::Result;
use crate::format::LargeDescriptor;
use crate::inner::Inner;
use crate::large::{Chunked, Head, LargeAt};

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
