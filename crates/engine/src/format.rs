//! The on-device format, version [`FORMAT_VERSION`]. `docs/FORMAT.md` is the
//! one document that describes it; keep the two in step.
//!
//! Every integer is little-endian. Every structure carries a CRC32C.

/// Bumped on any incompatible change of anything in this file.
pub const FORMAT_VERSION: u32 = 5;

/// Bytes reserved at the start of every device for the superblock.
pub const DEVICE_HEADER_BYTES: u64 = 1 << 20;
/// Bytes reserved at the start of every segment for its header.
pub const SEGMENT_HEADER_BYTES: u64 = 4096;

/// What every data file and device of a store starts with.
pub const SUPERBLOCK_MAGIC: &[u8; 8] = b"NVDEPOT\0";
const SEGMENT_MAGIC: u32 = u32::from_le_bytes(*b"SEGH");

/// Length of the superblock's encoded form.
pub const SUPERBLOCK_BYTES: usize = 76;

/// Written once, at offset 0 of every device, when the store is created.
///
/// ```text
///  0  [u8; 8]  magic "NVDEPOT\0"
///  8  u32      format version
/// 12  u32      reserved (0)
/// 16  u128     store uuid (the same on every device of a store)
/// 32  u32      device index
/// 36  u32      device count
/// 40  u32      grain bytes
/// 44  u32      reserved (0)
/// 48  u64      segment bytes
/// 56  u64      device bytes used by the store
/// 64  u64      creation time, seconds since the Unix epoch
/// 72  u32      crc32c of bytes 0..72
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Superblock {
    pub format_version: u32,
    pub uuid: u128,
    pub device_index: u32,
    pub device_count: u32,
    pub grain_bytes: u32,
    pub segment_bytes: u64,
    pub device_bytes: u64,
    pub created_secs: u64,
}

/// Why a structure did not decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// Not this kind of structure at all (magic mismatch, zeroes).
    Absent,
    /// Right magic, wrong checksum.
    BadChecksum { stored: u32, computed: u32 },
    /// Other format version.
    Version(u32),
    /// Fields out of range.
    Invalid(&'static str),
}

impl Superblock {
    pub fn encode(&self, out: &mut [u8]) {
        assert!(out.len() >= SUPERBLOCK_BYTES);
        out[..SUPERBLOCK_BYTES].fill(0);
        out[0..8].copy_from_slice(SUPERBLOCK_MAGIC);
        put_u32(out, 8, self.format_version);
        out[16..32].copy_from_slice(&self.uuid.to_le_bytes());
        put_u32(out, 32, self.device_index);
        put_u32(out, 36, self.device_count);
        put_u32(out, 40, self.grain_bytes);
        put_u64(out, 48, self.segment_bytes);
        put_u64(out, 56, self.device_bytes);
        put_u64(out, 64, self.created_secs);
        let crc = crc32c::crc32c(&out[0..72]);
        put_u32(out, 72, crc);
    }

    pub fn decode(buf: &[u8]) -> Result<Superblock, DecodeError> {
        if buf.len() < SUPERBLOCK_BYTES || &buf[0..8] != SUPERBLOCK_MAGIC {
            return Err(DecodeError::Absent);
        }
        let stored = get_u32(buf, 72);
        let computed = crc32c::crc32c(&buf[0..72]);
        if stored != computed {
            return Err(DecodeError::BadChecksum { stored, computed });
        }
        let sb = Superblock {
            format_version: get_u32(buf, 8),
            uuid: u128::from_le_bytes(buf[16..32].try_into().expect("16 bytes")),
            device_index: get_u32(buf, 32),
            device_count: get_u32(buf, 36),
            grain_bytes: get_u32(buf, 40),
            segment_bytes: get_u64(buf, 48),
            device_bytes: get_u64(buf, 56),
            created_secs: get_u64(buf, 64),
        };
        if sb.format_version != FORMAT_VERSION {
            return Err(DecodeError::Version(sb.format_version));
        }
        if get_u32(buf, 12) != 0 || get_u32(buf, 44) != 0 {
            return Err(DecodeError::Invalid("reserved bytes not zero"));
        }
        if !sb.grain_bytes.is_power_of_two() || !(512..=4096).contains(&sb.grain_bytes) {
            return Err(DecodeError::Invalid("grain size"));
        }
        if !sb.segment_bytes.is_multiple_of(sb.grain_bytes as u64) || sb.segment_bytes < 1 << 20 {
            return Err(DecodeError::Invalid("segment size"));
        }
        if sb.device_index >= sb.device_count {
            return Err(DecodeError::Invalid("device index"));
        }
        Ok(sb)
    }
}

/// What a segment holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SegmentKind {
    /// Free: its bytes are garbage.
    Free = 0,
    /// KV records.
    Kv = 1,
    /// Part of an index checkpoint.
    Checkpoint = 2,
}

/// Length of the segment header's encoded form.
pub const SEGMENT_HEADER_ENCODED: usize = 64;

/// Where in the 4 KiB header block the second copy of a segment header
/// sits: in another 512-byte grain than the first, so that one damaged
/// grain (or sector) leaves one copy readable.
pub const SEGMENT_HEADER_COPY_AT: usize = 2048;

/// The first bytes of every segment (the rest of its first
/// [`SEGMENT_HEADER_BYTES`] are zero).
///
/// ```text
///  0  u32   magic "SEGH"
///  4  u32   format version
///  8  u8    kind (0 free, 1 kv, 2 checkpoint)
///  9  [u8;7] reserved (0)
/// 16  u128  store uuid
/// 32  u64   sequence number: the store-wide sequence value taken when the
///           segment was opened; every record in it carries this value
/// 40  u32   checkpoint part index      (checkpoint segments only, else 0)
/// 44  u32   checkpoint part count      (checkpoint segments only, else 0)
/// 48  u64   checkpoint payload bytes   (checkpoint segments only, else 0)
/// 56  u32   crc32c of the checkpoint payload in this segment
/// 60  u32   crc32c of bytes 0..60
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentHeader {
    pub kind: SegmentKind,
    pub uuid: u128,
    pub seq: u64,
    pub part: u32,
    pub parts: u32,
    pub payload_bytes: u64,
    pub payload_crc: u32,
}

impl SegmentHeader {
    /// Encodes the header at the start of `out` and, when `out` holds the
    /// header block (4 KiB, as every write of one does), its copy at
    /// [`SEGMENT_HEADER_COPY_AT`].
    pub fn encode(&self, out: &mut [u8]) {
        self.encode_one(out);
        if out.len() >= SEGMENT_HEADER_COPY_AT + SEGMENT_HEADER_ENCODED {
            self.encode_one(&mut out[SEGMENT_HEADER_COPY_AT..]);
        }
    }

    fn encode_one(&self, out: &mut [u8]) {
        assert!(out.len() >= SEGMENT_HEADER_ENCODED);
        out[..SEGMENT_HEADER_ENCODED].fill(0);
        put_u32(out, 0, SEGMENT_MAGIC);
        put_u32(out, 4, FORMAT_VERSION);
        out[8] = self.kind as u8;
        out[16..32].copy_from_slice(&self.uuid.to_le_bytes());
        put_u64(out, 32, self.seq);
        put_u32(out, 40, self.part);
        put_u32(out, 44, self.parts);
        put_u64(out, 48, self.payload_bytes);
        put_u32(out, 56, self.payload_crc);
        let crc = crc32c::crc32c(&out[0..60]);
        put_u32(out, 60, crc);
    }

    /// Decodes the header at the start of `buf`, or its copy when the
    /// first fails and `buf` holds the copy too.
    pub fn decode(buf: &[u8]) -> Result<SegmentHeader, DecodeError> {
        Self::decode_copies(buf).map(|(h, _)| h)
    }

    /// [`SegmentHeader::decode`], saying whether the first copy was
    /// unreadable and the second was used. The first copy wins when both
    /// check: they differ only after a write of the block torn between
    /// them, and the first is then the newer.
    pub fn decode_copies(buf: &[u8]) -> Result<(SegmentHeader, bool), DecodeError> {
        match Self::decode_one(buf) {
            Ok(h) => Ok((h, false)),
            Err(e) => {
                let copy = buf
                    .get(SEGMENT_HEADER_COPY_AT..)
                    .map(Self::decode_one)
                    .and_then(Result::ok);
                copy.map(|h| (h, true)).ok_or(e)
            }
        }
    }

    /// True if `buf` holds a second copy that is damaged (its magic is
    /// there but it does not decode); a block without one (written before
    /// the copy existed) is not damaged.
    pub fn copy_damaged(buf: &[u8]) -> bool {
        buf.get(SEGMENT_HEADER_COPY_AT..).is_some_and(|copy| {
            copy.len() >= 4 && get_u32(copy, 0) == SEGMENT_MAGIC && Self::decode_one(copy).is_err()
        })
    }

    fn decode_one(buf: &[u8]) -> Result<SegmentHeader, DecodeError> {
        if buf.len() < SEGMENT_HEADER_ENCODED || get_u32(buf, 0) != SEGMENT_MAGIC {
            return Err(DecodeError::Absent);
        }
        let stored = get_u32(buf, 60);
        let computed = crc32c::crc32c(&buf[0..60]);
        if stored != computed {
            return Err(DecodeError::BadChecksum { stored, computed });
        }
        let version = get_u32(buf, 4);
        if version != FORMAT_VERSION {
            return Err(DecodeError::Version(version));
        }
        if buf[9..16].iter().any(|&b| b != 0) {
            return Err(DecodeError::Invalid("reserved bytes not zero"));
        }
        let kind = match buf[8] {
            0 => SegmentKind::Free,
            1 => SegmentKind::Kv,
            2 => SegmentKind::Checkpoint,
            _ => return Err(DecodeError::Invalid("segment kind")),
        };
        Ok(SegmentHeader {
            kind,
            uuid: u128::from_le_bytes(buf[16..32].try_into().expect("16 bytes")),
            seq: get_u64(buf, 32),
            part: get_u32(buf, 40),
            parts: get_u32(buf, 44),
            payload_bytes: get_u64(buf, 48),
            payload_crc: get_u32(buf, 56),
        })
    }
}

/// Bytes of a record header.
pub const RECORD_HEADER_BYTES: usize = 40;

/// What a record is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordKind {
    /// A key and its value.
    Put = 1,
    /// A deletion of a key (no value).
    Tombstone = 2,
    /// Filler up to an alignment boundary; `value_len` counts the filler
    /// bytes after the header.
    Pad = 3,
    /// Keys a cache-mode eviction dropped out of write order (no key; the
    /// value is a list of [`EvictedKey`]s). At recovery each entry hides
    /// older puts of its key exactly like a tombstone of this record's
    /// sequence number.
    Evictions = 4,
    /// The head of a large value (version 4): a put of the key whose value
    /// is a [`LargeDescriptor`]; the value's bytes are in chunk records
    /// (see [`chunk_key`]).
    LargeHead = 5,
    /// The frame of a crash-atomic batch (version 5): no key; the value is
    /// a [`BatchFrame`]. The batch's records follow it in the same
    /// segment, each marked a member ([`RecordHeader::member`]); recovery
    /// keeps them only if every one is there and valid.
    Batch = 6,
}

/// Bytes of an encoded [`BatchFrame`].
pub const BATCH_FRAME_BYTES: usize = 12;

/// The value of a [`RecordKind::Batch`] record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchFrame {
    /// Member records that follow the frame (in order; pads may come
    /// between them, nothing else).
    pub members: u32,
    /// The members' bytes, each padded to whole grains.
    pub member_bytes: u64,
}

impl BatchFrame {
    pub fn encode(&self) -> [u8; BATCH_FRAME_BYTES] {
        let mut out = [0u8; BATCH_FRAME_BYTES];
        put_u32(&mut out, 0, self.members);
        put_u64(&mut out, 4, self.member_bytes);
        out
    }

    pub fn decode(value: &[u8]) -> Option<BatchFrame> {
        if value.len() != BATCH_FRAME_BYTES {
            return None;
        }
        let f = BatchFrame {
            members: get_u32(value, 0),
            member_bytes: get_u64(value, 4),
        };
        (f.members > 0).then_some(f)
    }
}

impl RecordKind {
    /// Whether a record of this kind gives its key a value (a put or a
    /// large head): the kinds a lookup may answer with.
    pub fn is_value(self) -> bool {
        matches!(self, RecordKind::Put | RecordKind::LargeHead)
    }
}

/// Bytes of an encoded [`LargeDescriptor`].
pub const LARGE_DESCRIPTOR_BYTES: usize = 24;

/// Bytes a chunk key adds to its owner's key: generation and index.
pub const CHUNK_KEY_SUFFIX_BYTES: usize = 12;

/// What a large head's value says (version 4):
///
/// ```text
///  0  u64  value length in bytes
///  8  u64  generation: names this value's chunks (never reused)
/// 16  u32  chunk bytes: every chunk but the last holds this many
/// 20  u32  chunk count
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LargeDescriptor {
    pub len: u64,
    pub generation: u64,
    pub chunk_bytes: u32,
    pub chunks: u32,
}

impl LargeDescriptor {
    pub fn encode(&self) -> [u8; LARGE_DESCRIPTOR_BYTES] {
        let mut out = [0u8; LARGE_DESCRIPTOR_BYTES];
        put_u64(&mut out, 0, self.len);
        put_u64(&mut out, 8, self.generation);
        put_u32(&mut out, 16, self.chunk_bytes);
        put_u32(&mut out, 20, self.chunks);
        out
    }

    /// Decodes a descriptor whose fields agree with each other.
    pub fn decode(value: &[u8]) -> Option<LargeDescriptor> {
        if value.len() != LARGE_DESCRIPTOR_BYTES {
            return None;
        }
        let d = LargeDescriptor {
            len: get_u64(value, 0),
            generation: get_u64(value, 8),
            chunk_bytes: get_u32(value, 16),
            chunks: get_u32(value, 20),
        };
        let consistent =
            d.chunk_bytes > 0 && d.len.div_ceil(u64::from(d.chunk_bytes)) == u64::from(d.chunks);
        consistent.then_some(d)
    }

    /// Length of chunk `i`.
    pub fn chunk_len(&self, i: u32) -> usize {
        let start = u64::from(i) * u64::from(self.chunk_bytes);
        (self.len - start).min(u64::from(self.chunk_bytes)) as usize
    }
}

/// The key of chunk `index` of generation `generation` of `owner`'s large
/// value: the owner's key, then the generation and the index (LE). Chunks
/// live in the owner namespace's chunk space (its physical id with
/// [`CHUNK_SPACE`] set), so they never meet user keys.
pub fn chunk_key(owner: &[u8], generation: u64, index: u32) -> Vec<u8> {
    let mut k = Vec::with_capacity(owner.len() + CHUNK_KEY_SUFFIX_BYTES);
    k.extend_from_slice(owner);
    k.extend_from_slice(&generation.to_le_bytes());
    k.extend_from_slice(&index.to_le_bytes());
    k
}

/// A chunk key's owner key, generation and index.
pub fn parse_chunk_key(key: &[u8]) -> Option<(&[u8], u64, u32)> {
    let owner_len = key.len().checked_sub(CHUNK_KEY_SUFFIX_BYTES)?;
    let (owner, suffix) = key.split_at(owner_len);
    Some((owner, get_u64(suffix, 0), get_u32(suffix, 8)))
}

/// Set in the namespace id of chunk records: namespace `p`'s large-value
/// chunks are in namespace `p | CHUNK_SPACE` (version 4). Namespace ids
/// are allocated below it.
pub const CHUNK_SPACE: u32 = 1 << 31;

/// One entry of an [`RecordKind::Evictions`] record: a key named by the
/// two hashes recovery tells keys apart by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EvictedKey {
    pub namespace: u32,
    pub hash: u64,
    pub hash2: u64,
}

/// Bytes of one encoded [`EvictedKey`].
pub const EVICTED_KEY_BYTES: usize = 20;

/// Encodes eviction entries as an Evictions record's value.
pub fn encode_evictions(keys: &[EvictedKey]) -> Vec<u8> {
    let mut out = Vec::with_capacity(keys.len() * EVICTED_KEY_BYTES);
    for k in keys {
        out.extend_from_slice(&k.namespace.to_le_bytes());
        out.extend_from_slice(&k.hash.to_le_bytes());
        out.extend_from_slice(&k.hash2.to_le_bytes());
    }
    out
}

/// Decodes an Evictions record's value (a trailing partial entry, which a
/// checksummed record never has, is ignored).
pub fn decode_evictions(value: &[u8]) -> impl Iterator<Item = EvictedKey> + '_ {
    value.chunks_exact(EVICTED_KEY_BYTES).map(|c| EvictedKey {
        namespace: get_u32(c, 0),
        hash: get_u64(c, 4),
        hash2: get_u64(c, 12),
    })
}

/// The kind byte's bit marking a batch member.
const MEMBER_BIT: u8 = 0x80;

/// The header in front of every record.
///
/// ```text
///  0  u32  crc32c of bytes 4..end of value (for Pad: bytes 4..40 only)
///  4  u32  crc32c of bytes 8..40 followed by the key (checks a partial read)
///  8  u8   kind (1 put, 2 tombstone, 3 pad, 4 evictions, 5 large head,
///          6 batch frame); top bit: a batch member
/// 10  u16  key length
/// 12  u32  value length
/// 16  u32  namespace id
///  9  u8   flush mark: offset in the mark's segment, in 256ths of a segment
/// 20  u32  flush mark: low 32 bits of the sequence number of its segment
/// 24  u64  record sequence number (orders records of one key; newest wins)
/// 32  u64  sequence number of the segment it was written into (a record
///          left over from an earlier use of the segment does not match)
/// 40  key, then value, then zeroes up to a whole number of grains
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordHeader {
    pub kind: RecordKind,
    /// A member of a crash-atomic batch (version 5; the kind byte's top
    /// bit): valid only with its [`RecordKind::Batch`] frame and every
    /// other member. Copies GC makes are not members.
    pub member: bool,
    pub key_len: u16,
    pub value_len: u32,
    pub namespace: u32,
    pub seq: u64,
    pub segment_seq: u64,
    /// How far the log was on the device when this record was appended
    /// (set by the writer).
    pub flushed: FlushMark,
}

/// A log position up to which everything was on the device (written and,
/// in sync mode, flushed) when a record was appended: every record before
/// it was durable, so damage before it is damage to acknowledged data,
/// while damage after the newest record's mark may be a torn tail (writes
/// in flight at the crash). Kept in 5 bytes: the low 32 bits of the
/// sequence number of the segment holding the position (the full number
/// is recovered from the record's own segment sequence number, which is at
/// most 2^32 newer) and the offset in 256ths of a segment, rounded down
/// (so a mark is never later than the position it stands for).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FlushMark {
    pub segment_seq_low: u32,
    pub fraction: u8,
}

impl FlushMark {
    /// The mark of position `offset` in the segment of sequence number
    /// `segment_seq`.
    pub fn at(segment_seq: u64, offset: u64, segment_bytes: u64) -> FlushMark {
        let fraction = (u128::from(offset.min(segment_bytes)) * 256 / u128::from(segment_bytes))
            .min(255) as u8;
        FlushMark {
            segment_seq_low: segment_seq as u32,
            fraction,
        }
    }

    /// The position it stands for, as (segment sequence number, offset),
    /// given the sequence number of the segment of the record carrying it.
    pub fn position(self, record_segment_seq: u64, segment_bytes: u64) -> (u64, u64) {
        let high = record_segment_seq & !0xFFFF_FFFF;
        let mut seq = high | u64::from(self.segment_seq_low);
        if seq > record_segment_seq {
            seq = seq.wrapping_sub(1 << 32);
        }
        let offset = (u128::from(self.fraction) * u128::from(segment_bytes) / 256) as u64;
        (seq, offset)
    }
}

impl RecordHeader {
    /// If this is a seal (a pad saying how far the log was durable), the
    /// position it carries as (segment sequence number, offset); the full
    /// sequence number is the largest with those low 32 bits not above the
    /// seal's own segment's.
    pub fn seal_position(&self, grain: u64) -> Option<(u64, u64)> {
        if self.kind != RecordKind::Pad || self.namespace != SEAL_NAMESPACE {
            return None;
        }
        let high = self.segment_seq & !0xFFFF_FFFF;
        let mut seq = high | (self.seq >> 32);
        if seq > self.segment_seq {
            seq = seq.wrapping_sub(1 << 32);
        }
        Some((seq, (self.seq & 0xFFFF_FFFF) * grain))
    }

    /// Bytes of header, key and value (without the padding to a grain).
    pub fn body_bytes(&self) -> usize {
        match self.kind {
            RecordKind::Pad => RECORD_HEADER_BYTES + self.value_len as usize,
            _ => RECORD_HEADER_BYTES + self.key_len as usize + self.value_len as usize,
        }
    }

    fn encode_fields(&self, out: &mut [u8]) {
        out[8] = self.kind as u8 | if self.member { MEMBER_BIT } else { 0 };
        out[9] = self.flushed.fraction;
        out[10..12].copy_from_slice(&self.key_len.to_le_bytes());
        put_u32(out, 12, self.value_len);
        put_u32(out, 16, self.namespace);
        put_u32(out, 20, self.flushed.segment_seq_low);
        put_u64(out, 24, self.seq);
        put_u64(out, 32, self.segment_seq);
    }

    /// Decodes the fixed fields without checking any checksum.
    pub fn decode_fields(buf: &[u8]) -> Option<RecordHeader> {
        if buf.len() < RECORD_HEADER_BYTES {
            return None;
        }
        let member = buf[8] & MEMBER_BIT != 0;
        let kind = match buf[8] & !MEMBER_BIT {
            1 => RecordKind::Put,
            2 => RecordKind::Tombstone,
            3 => RecordKind::Pad,
            4 => RecordKind::Evictions,
            5 => RecordKind::LargeHead,
            6 => RecordKind::Batch,
            _ => return None,
        };
        // Only puts, tombstones and large heads are ever batch members.
        if member
            && !matches!(
                kind,
                RecordKind::Put | RecordKind::Tombstone | RecordKind::LargeHead
            )
        {
            return None;
        }
        Some(RecordHeader {
            kind,
            member,
            key_len: u16::from_le_bytes([buf[10], buf[11]]),
            value_len: get_u32(buf, 12),
            namespace: get_u32(buf, 16),
            seq: get_u64(buf, 24),
            segment_seq: get_u64(buf, 32),
            flushed: FlushMark {
                segment_seq_low: get_u32(buf, 20),
                fraction: buf[9],
            },
        })
    }
}

/// Encodes a put or tombstone record into `out` (which must hold
/// `padded_len` bytes, see [`record_bytes`]) and returns the bytes used
/// before padding.
pub fn encode_record(out: &mut [u8], header: &RecordHeader, key: &[u8], value: &[u8]) -> usize {
    debug_assert_eq!(header.key_len as usize, key.len());
    debug_assert_eq!(header.value_len as usize, value.len());
    debug_assert!(header.kind != RecordKind::Pad);
    let end = header.body_bytes();
    header.encode_fields(out);
    let k = RECORD_HEADER_BYTES;
    out[k..k + key.len()].copy_from_slice(key);
    let hcrc = crc32c::crc32c_append(crc32c::crc32c(&out[8..RECORD_HEADER_BYTES]), key);
    put_u32(out, 4, hcrc);
    // The value is checksummed block by block as it is copied, while each
    // block is still in cache: a large value's 8 MiB chunk is read from
    // memory once, not twice.
    let v = k + key.len();
    let mut crc = crc32c::crc32c(&out[4..v]);
    for (i, block) in value.chunks(COPY_BLOCK_BYTES).enumerate() {
        let at = v + i * COPY_BLOCK_BYTES;
        let dst = &mut out[at..at + block.len()];
        dst.copy_from_slice(block);
        crc = crc32c::crc32c_append(crc, dst);
    }
    put_u32(out, 0, crc);
    end
}

/// Bytes of a value copied, then checksummed, at a time by
/// [`encode_record`] (fits the L2 cache).
const COPY_BLOCK_BYTES: usize = 64 << 10;

/// Encodes a pad record covering exactly `out.len()` bytes (at least a
/// header's worth).
pub fn encode_pad(out: &mut [u8], segment_seq: u64) {
    assert!(out.len() >= RECORD_HEADER_BYTES);
    encode_pad_header(out, out.len(), segment_seq);
    out[RECORD_HEADER_BYTES..].fill(0);
}

/// Encodes the header of a pad record covering `total` bytes into the
/// first [`RECORD_HEADER_BYTES`] of `out`. A pad's checksum covers only its
/// header, so the bytes it covers may hold anything (recovery pads over
/// torn stretches of the log this way).
pub fn encode_pad_header(out: &mut [u8], total: usize, segment_seq: u64) {
    encode_pad_fields(out, total, segment_seq, 0, 0);
}

/// The namespace field of a pad that is a *seal* (docs/FORMAT.md, "Seal"):
/// its sequence number field holds a log position up to which everything
/// was on the device when the seal was appended. Other pads have 0 there;
/// readers that predate seals skip every pad, so a seal changes nothing
/// for them.
pub const SEAL_NAMESPACE: u32 = u32::from_be_bytes(*b"SEAL");

/// Encodes a seal (a pad of `out.len()` bytes whose namespace field is
/// [`SEAL_NAMESPACE`]) carrying `flushed`, a (segment sequence number,
/// offset) position, as the low 32 bits of the sequence number and the
/// offset in grains, rounded down.
pub fn encode_seal(out: &mut [u8], segment_seq: u64, flushed: (u64, u64), grain: u64) {
    assert!(out.len() >= RECORD_HEADER_BYTES);
    let grains = u32::try_from(flushed.1 / grain).expect("segment offset in grains fits u32");
    let carried = (flushed.0 & 0xFFFF_FFFF) << 32 | u64::from(grains);
    encode_pad_fields(out, out.len(), segment_seq, SEAL_NAMESPACE, carried);
    out[RECORD_HEADER_BYTES..].fill(0);
}

fn encode_pad_fields(out: &mut [u8], total: usize, segment_seq: u64, namespace: u32, seq: u64) {
    assert!(total >= RECORD_HEADER_BYTES && out.len() >= RECORD_HEADER_BYTES);
    let header = RecordHeader {
        kind: RecordKind::Pad,
        member: false,
        key_len: 0,
        value_len: (total - RECORD_HEADER_BYTES) as u32,
        namespace,
        seq,
        segment_seq,
        flushed: FlushMark::default(),
    };
    header.encode_fields(out);
    let hcrc = crc32c::crc32c(&out[8..RECORD_HEADER_BYTES]);
    put_u32(out, 4, hcrc);
    let crc = crc32c::crc32c(&out[4..RECORD_HEADER_BYTES]);
    put_u32(out, 0, crc);
}

/// Bytes a record of this key and value length occupies on the device.
pub fn record_bytes(key_len: usize, value_len: usize, grain: usize) -> usize {
    (RECORD_HEADER_BYTES + key_len + value_len).div_ceil(grain) * grain
}

/// Outcome of checking a record in a buffer.
#[derive(Debug, PartialEq, Eq)]
pub enum RecordCheck {
    /// A whole, checksummed record.
    Valid(RecordHeader),
    /// `buf` ends before the record does; `need` bytes are required.
    Truncated { need: usize },
    /// Not a record, or a damaged one.
    Invalid(&'static str),
}

/// Checks the record at the start of `buf` completely (both checksums).
pub fn check_record(buf: &[u8]) -> RecordCheck {
    let Some(h) = RecordHeader::decode_fields(buf) else {
        return RecordCheck::Invalid("bad header");
    };
    let end = h.body_bytes();
    // A pad's checksums cover its header only: it checks without the
    // bytes it covers (which may be many, over a mended torn stretch).
    if end > buf.len() && h.kind != RecordKind::Pad {
        return RecordCheck::Truncated { need: end };
    }
    let stored = get_u32(buf, 0);
    let computed = match h.kind {
        RecordKind::Pad => crc32c::crc32c(&buf[4..RECORD_HEADER_BYTES]),
        _ => crc32c::crc32c(&buf[4..end]),
    };
    if stored != computed {
        return RecordCheck::Invalid("checksum mismatch");
    }
    // The header checksum too (the first one covers it without checking
    // it): a put or tombstone valid here also passes `check_record_head`.
    let key = match h.kind {
        RecordKind::Pad => &[][..],
        _ => &buf[RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + h.key_len as usize],
    };
    let computed = crc32c::crc32c_append(crc32c::crc32c(&buf[8..RECORD_HEADER_BYTES]), key);
    if get_u32(buf, 4) != computed {
        return RecordCheck::Invalid("header checksum mismatch");
    }
    RecordCheck::Valid(h)
}

/// Checks only the header and key of the record at the start of `buf`
/// (for partial reads that do not fetch the whole value).
pub fn check_record_head(buf: &[u8]) -> RecordCheck {
    let Some(h) = RecordHeader::decode_fields(buf) else {
        return RecordCheck::Invalid("bad header");
    };
    let end = RECORD_HEADER_BYTES + h.key_len as usize;
    if end > buf.len() {
        return RecordCheck::Truncated { need: end };
    }
    let key = if h.kind == RecordKind::Pad {
        &[][..]
    } else {
        &buf[RECORD_HEADER_BYTES..end]
    };
    let computed = crc32c::crc32c_append(crc32c::crc32c(&buf[8..RECORD_HEADER_BYTES]), key);
    if get_u32(buf, 4) != computed {
        return RecordCheck::Invalid("header checksum mismatch");
    }
    RecordCheck::Valid(h)
}

pub(crate) fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}
pub(crate) fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}
pub(crate) fn get_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
pub(crate) fn get_u64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seal_carries_its_flushed_position_across_the_32_bit_wrap() {
        let grain = 512;
        for (own, flushed) in [
            (9u64, (8u64, 3u64 << 20)),
            (9, (9, 0)),
            ((1 << 32) + 2, ((1 << 32) - 1, 64 << 20)),
        ] {
            let mut buf = vec![0u8; 512];
            encode_seal(&mut buf, own, flushed, grain);
            let RecordCheck::Valid(h) = check_record(&buf) else {
                panic!("seal does not check");
            };
            assert_eq!(h.kind, RecordKind::Pad);
            assert_eq!(h.body_bytes(), 512);
            assert_eq!(h.seal_position(grain), Some(flushed));
        }
        // An ordinary pad is not a seal.
        let mut buf = vec![0u8; 512];
        encode_pad(&mut buf, 9);
        let RecordCheck::Valid(h) = check_record(&buf) else {
            panic!("pad does not check");
        };
        assert_eq!(h.seal_position(grain), None);
    }

    #[test]
    fn record_round_trip_and_corruption() {
        let h = RecordHeader {
            kind: RecordKind::Put,
            member: false,
            key_len: 3,
            value_len: 5,
            namespace: 7,
            seq: 42,
            segment_seq: 9,
            flushed: FlushMark::at(8, 3 << 20, 64 << 20),
        };
        let mut buf = vec![0u8; record_bytes(3, 5, 512)];
        assert_eq!(buf.len(), 512);
        let used = encode_record(&mut buf, &h, b"abc", b"hello");
        assert_eq!(used, 48);
        assert_eq!(check_record(&buf), RecordCheck::Valid(h));
        assert_eq!(check_record_head(&buf[..43]), RecordCheck::Valid(h));
        assert_eq!(
            check_record(&buf[..47]),
            RecordCheck::Truncated { need: 48 }
        );
        for i in 0..used {
            let mut bad = buf.clone();
            bad[i] ^= 0x10;
            assert!(
                !matches!(check_record(&bad), RecordCheck::Valid(x) if x == h),
                "flip at {i}"
            );
        }
    }

    #[test]
    fn pad_and_headers_round_trip() {
        let mut buf = vec![0xffu8; 1024];
        encode_pad(&mut buf, 5);
        match check_record(&buf) {
            RecordCheck::Valid(h) => {
                assert_eq!(h.kind, RecordKind::Pad);
                assert_eq!(h.body_bytes(), 1024);
            }
            other => panic!("{other:?}"),
        }
        let sb = Superblock {
            format_version: FORMAT_VERSION,
            uuid: 0x1234_5678_9abc_def0_1122_3344_5566_7788,
            device_index: 1,
            device_count: 2,
            grain_bytes: 512,
            segment_bytes: 64 << 20,
            device_bytes: 1 << 30,
            created_secs: 99,
        };
        let mut b = vec![0u8; 4096];
        sb.encode(&mut b);
        assert_eq!(Superblock::decode(&b), Ok(sb));
        b[40] ^= 1;
        assert!(matches!(
            Superblock::decode(&b),
            Err(DecodeError::BadChecksum { .. })
        ));
        let sh = SegmentHeader {
            kind: SegmentKind::Checkpoint,
            uuid: 3,
            seq: 77,
            part: 1,
            parts: 2,
            payload_bytes: 1000,
            payload_crc: 0xdead,
        };
        sh.encode(&mut b);
        assert_eq!(SegmentHeader::decode(&b), Ok(sh));
        assert_eq!(SegmentHeader::decode(&[0u8; 64]), Err(DecodeError::Absent));
    }
}
