//! Opening a store: superblocks, then either the index checkpoint (clean
//! shutdown) or a rebuild of the index from the log (crash).
//!
//! The rebuild reads every KV segment in sequence order with large
//! sequential reads and keeps, per key, the record with the highest
//! sequence number (a tombstone hides older puts). Keys are told apart by
//! (namespace, two independent 64-bit hashes) so no key bytes are kept in
//! DRAM. An invalid record does not end a segment's scan: the scan finds
//! the next valid record and goes on, so a damaged record never takes
//! valid ones after it along. Each invalid stretch is classified
//! (`damage.rs`) as a torn tail (writes in flight at the crash) or damage
//! to acknowledged data; the latter makes a store-mode open fail unless
//! [`Options::salvage`] is set, and is always reported.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use nvdepot_index::{Expect, Index, IndexConfig, Location, GRAINS_MAX};
use nvdepot_io::{Device, FileDevice};

use crate::checkpoint;
use crate::damage::{self, Damage, DamageKind};
use crate::error::{Error, Result};
use crate::format::{
    self, DecodeError, RecordKind, SegmentHeader, SegmentKind, Superblock, FORMAT_VERSION,
    SEGMENT_HEADER_BYTES,
};
use crate::inner::{key_hash, Inner};
use crate::iter::scan_segment;
use crate::layout::Layout;
use crate::namespace::{self, Namespace, Namespaces, DEFAULT_NAME, SYSTEM_NS};
use crate::options::Options;
use crate::read::{read_record, Fetched, Span};
use crate::segments::{SegState, Segments};
use crate::store::{OpenReport, PutMode};
use crate::writer::GC_RESERVE_SEGMENTS;

/// Name of the n-th data file in a store directory.
pub(crate) fn data_file_name(n: usize) -> String {
    format!("nvdepot.{n}")
}

/// Opens the devices behind a path; true if they were just created.
pub(crate) fn open_paths(path: &Path, opts: &Options) -> Result<(Vec<Arc<dyn Device>>, bool)> {
    use std::os::unix::fs::FileTypeExt;
    let open = |p: &Path, size: Option<u64>| -> Result<Arc<dyn Device>> {
        let dev = if opts.buffered_io {
            FileDevice::open_buffered(p, size)?
        } else {
            FileDevice::open(p, size)?
        };
        Ok(Arc::new(dev))
    };
    match std::fs::metadata(path) {
        Ok(m) if m.file_type().is_block_device() || m.is_file() => {
            Ok((vec![open(path, None)?], false))
        }
        Ok(m) if !m.is_dir() => Err(Error::NotAStore {
            device: path.display().to_string(),
            reason: "not a directory, regular file or block device".into(),
        }),
        _ => {
            std::fs::create_dir_all(path).map_err(|e| Error::NotAStore {
                device: path.display().to_string(),
                reason: format!("cannot create directory: {e}"),
            })?;
            let mut devices = Vec::new();
            while path.join(data_file_name(devices.len())).exists() {
                devices.push(open(&path.join(data_file_name(devices.len())), None)?);
            }
            if !devices.is_empty() {
                return Ok((devices, false));
            }
            let Some(size) = opts.create_bytes else {
                return Err(Error::NotAStore {
                    device: path.display().to_string(),
                    reason: "no nvdepot store here (no data files); a store is created only when a size is given".into(),
                });
            };
            Ok((vec![open(&path.join(data_file_name(0)), Some(size))?], true))
        }
    }
}

fn read_block(dev: &dyn Device, offset: u64, len: usize) -> Result<nvdepot_io::AlignedBuf> {
    let mut buf = nvdepot_io::AlignedBuf::new(len, dev.alignment());
    let n = buf.len();
    dev.read_at(&mut buf[..n], offset)?;
    Ok(buf)
}

/// Opens or creates the store on `devices`.
pub(crate) fn open(
    devices: Vec<Arc<dyn Device>>,
    opts: &Options,
    may_create: bool,
) -> Result<(Inner, OpenReport)> {
    let started = Instant::now();
    if devices.is_empty() {
        return Err(Error::Config("no devices".into()));
    }
    let sbs = read_superblocks(&devices)?;
    if sbs.iter().all(|s| *s == Err(DecodeError::Absent)) {
        if !may_create {
            return Err(Error::NotAStore {
                device: devices[0].name().into(),
                reason: "no superblock".into(),
            });
        }
        let inner = format_store(devices, opts)?;
        let report = OpenReport {
            clean: true,
            created: true,
            seconds: started.elapsed().as_secs_f64(),
            ..Default::default()
        };
        return Ok((inner, report));
    }
    let (layout, sb) = load_layout(devices, sbs)?;
    let SegmentHeaders {
        headers,
        one_copy_damaged,
    } = read_segment_headers(&layout, sb.uuid)?;
    rewrite_headers(&layout, &one_copy_damaged)?;
    if let Some((inner, keys)) = try_checkpoint(&layout, &headers, opts, sb.uuid)? {
        let report = OpenReport {
            clean: true,
            created: false,
            seconds: started.elapsed().as_secs_f64(),
            keys,
            records_scanned: 0,
            scan_seconds: 0.0,
            damage: Vec::new(),
        };
        return Ok((inner, report));
    }
    let (inner, keys, records, scan_seconds, damage, hidden_keys) =
        rebuild(layout, &headers, opts, sb.uuid)?;
    // What the scan read is the log's durable past from now on (the flush
    // mark of new records starts after it): make sure the device has it,
    // not only its volatile cache, which a process crash leaves full.
    inner.layout.flush(u64::MAX)?;
    settle(&inner, &damage, &hidden_keys)?;
    let seconds = started.elapsed().as_secs_f64();
    tracing::info!(
        "index rebuilt from the log: {keys} keys from {records} records in {seconds:.2} s"
    );
    Ok((
        inner,
        OpenReport {
            clean: false,
            created: false,
            seconds,
            keys,
            records_scanned: records,
            scan_seconds,
            damage,
        },
    ))
}

/// Checks the superblocks of a store's devices and builds its layout.
pub(crate) fn load_layout(
    devices: Vec<Arc<dyn Device>>,
    sbs: Vec<std::result::Result<Superblock, DecodeError>>,
) -> Result<(Arc<Layout>, Superblock)> {
    let mut ordered: Vec<Option<(Arc<dyn Device>, Superblock)>> = vec![None; devices.len()];
    let mut first: Option<Superblock> = None;
    for (d, sb) in devices.into_iter().zip(sbs) {
        let sb = match sb {
            Ok(sb) => sb,
            Err(DecodeError::Version(v)) => {
                return Err(Error::FormatVersion {
                    device: d.name().into(),
                    found: v,
                    supported: FORMAT_VERSION,
                })
            }
            Err(e) => {
                return Err(Error::NotAStore {
                    device: d.name().into(),
                    reason: format!("superblock: {e:?}"),
                })
            }
        };
        let f = *first.get_or_insert(sb);
        if sb.uuid != f.uuid
            || sb.device_count != f.device_count
            || sb.segment_bytes != f.segment_bytes
        {
            return Err(Error::NotAStore {
                device: d.name().into(),
                reason: "belongs to another store".into(),
            });
        }
        let i = sb.device_index as usize;
        if i >= ordered.len() || ordered[i].is_some() || sb.device_count as usize != ordered.len() {
            return Err(Error::NotAStore {
                device: d.name().into(),
                reason: format!(
                    "device {} of {}, but {} devices were given",
                    i,
                    sb.device_count,
                    ordered.len()
                ),
            });
        }
        ordered[i] = Some((d, sb));
    }
    let sb = first.expect("at least one device");
    let devices: Vec<Arc<dyn Device>> = ordered
        .into_iter()
        .map(|o| o.expect("all devices present").0)
        .collect();
    let align = devices.iter().map(|d| d.alignment()).max().unwrap_or(512);
    if align as u64 > sb.grain_bytes as u64 {
        return Err(Error::Config(format!(
            "device alignment {align} exceeds the store's grain of {}",
            sb.grain_bytes
        )));
    }
    let layout = Arc::new(Layout {
        segments: Layout::segments_for(sb.device_bytes, devices.len(), sb.segment_bytes),
        devices,
        grain_bytes: sb.grain_bytes as u64,
        segment_bytes: sb.segment_bytes,
        align,
    });
    Ok((layout, sb))
}

/// Reads the superblock of every device.
pub(crate) fn read_superblocks(
    devices: &[Arc<dyn Device>],
) -> Result<Vec<std::result::Result<Superblock, DecodeError>>> {
    let mut sbs = Vec::with_capacity(devices.len());
    for d in devices {
        let buf = read_block(d.as_ref(), 0, 4096)?;
        sbs.push(Superblock::decode(&buf));
    }
    Ok(sbs)
}

/// Index sizing: tables sized so that 256 of them address every grain;
/// enough tables up front for `keys` (known when rebuilding), so a rebuild
/// does not pay for a cascade of grows.
fn index_config(layout: &Layout, keys: u64) -> IndexConfig {
    let grains = layout.segments as u64 * layout.grains_per_segment();
    let per_table = (grains / 256).max(1);
    let table_entries_log2 = (64 - (per_table - 1).leading_zeros()).clamp(10, 27);
    // Aim for ~80 % occupancy after loading `keys`.
    let tables = (keys * 5 / 4) >> table_entries_log2;
    let initial_tables_log2 = (64 - tables.leading_zeros()).min(8);
    IndexConfig {
        table_entries_log2,
        initial_tables_log2,
    }
}

/// Hashes the rebuild map's keys, which are already uniform hashes, by
/// folding them instead of running SipHash over them.
#[derive(Default)]
struct FoldHasher(u64);

impl std::hash::Hasher for FoldHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ *b as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.0 ^= v as u64;
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0 ^ v).rotate_left(29);
    }
}

type FoldMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<FoldHasher>>;

fn format_store(devices: Vec<Arc<dyn Device>>, opts: &Options) -> Result<Inner> {
    let align = devices.iter().map(|d| d.alignment()).max().unwrap_or(512);
    let grain = (opts.grain_bytes as usize).max(align);
    if !grain.is_power_of_two() || !(512..=4096).contains(&grain) {
        return Err(Error::Config(format!(
            "grain size {grain} must be a power of two in 512..=4096"
        )));
    }
    let seg = opts.segment_bytes;
    if seg < 1 << 20 || !seg.is_multiple_of(grain as u64) {
        return Err(Error::Config(format!(
            "segment size {seg} must be at least 1 MiB and a multiple of {grain}"
        )));
    }
    let device_bytes = devices.iter().map(|d| d.capacity()).min().unwrap_or(0);
    let segments = Layout::segments_for(device_bytes, devices.len(), seg);
    let need = GC_RESERVE_SEGMENTS as u32 + 3;
    if segments < need {
        return Err(Error::Config(format!(
            "devices too small: {segments} segments of {} MiB fit, at least {need} are needed (1 MiB + {need} × segment size per device)",
            seg >> 20
        )));
    }
    let uuid: u128 = rand::random();
    let created_secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    for (i, d) in devices.iter().enumerate() {
        let mut buf = nvdepot_io::AlignedBuf::new(4096, d.alignment());
        Superblock {
            format_version: FORMAT_VERSION,
            uuid,
            device_index: i as u32,
            device_count: devices.len() as u32,
            grain_bytes: grain as u32,
            segment_bytes: seg,
            device_bytes,
            created_secs,
        }
        .encode(&mut buf);
        d.write_at(&buf, 0)?;
        d.flush()?;
    }
    let layout = Arc::new(Layout {
        devices,
        grain_bytes: grain as u64,
        segment_bytes: seg,
        segments,
        align,
    });
    let segs = Arc::new(Segments::new(segments));
    for s in 0..segments {
        segs.release(s);
    }
    let index = Index::new(index_config(&layout, 0));
    let namespaces = Namespaces::new(2);
    let inner = Inner::new(
        layout,
        segs,
        index,
        Arc::new(AtomicU64::new(1)),
        namespaces,
        opts.clone(),
        uuid,
    );
    let value = namespace::encode_registry_value(1, 1);
    crate::aio::now(inner.put(
        crate::aio::Mode::Blocking,
        Namespace(SYSTEM_NS),
        DEFAULT_NAME.as_bytes(),
        &value,
        PutMode::Upsert,
    ))?;
    inner.namespaces.insert(DEFAULT_NAME, 1, 1, 0);
    Ok(inner)
}

/// Header of every segment; `None` for segments holding no valid header
/// of this store (free).
pub(crate) struct SegmentHeaders {
    pub headers: Vec<Option<SegmentHeader>>,
    /// Segments with one damaged header copy and one intact (damage that
    /// lost nothing): segment, header, which copy was damaged.
    pub one_copy_damaged: Vec<(u32, SegmentHeader, &'static str)>,
}

pub(crate) fn read_segment_headers(layout: &Layout, uuid: u128) -> Result<SegmentHeaders> {
    let mut headers = Vec::with_capacity(layout.segments as usize);
    let mut one_copy_damaged = Vec::new();
    let mut buf = layout.buffer(SEGMENT_HEADER_BYTES as usize);
    for s in 0..layout.segments {
        let n = buf.len();
        layout.read(s, 0, &mut buf[..n])?;
        headers.push(match SegmentHeader::decode_copies(&buf) {
            Ok((h, from_copy)) if h.uuid == uuid => {
                if from_copy {
                    one_copy_damaged.push((s, h, "its first copy is damaged, its second was used"));
                } else if SegmentHeader::copy_damaged(&buf) {
                    one_copy_damaged.push((
                        s,
                        h,
                        "its second copy is damaged, its first is intact",
                    ));
                }
                (h.kind != SegmentKind::Free).then_some(h)
            }
            _ => None,
        });
    }
    Ok(SegmentHeaders {
        headers,
        one_copy_damaged,
    })
}

/// Rewrites the header blocks with a damaged copy (from the intact one),
/// and flushes, so the next open reads two good copies again.
fn rewrite_headers(layout: &Layout, repaired: &[(u32, SegmentHeader, &'static str)]) -> Result<()> {
    for (s, _, which) in repaired {
        let (device, offset) = layout.describe(*s, 0);
        tracing::warn!(
            "recovery: segment {s} header damaged at {device} offset {offset:#x}: {which}; nothing lost, header rewritten"
        );
    }
    write_headers(layout, repaired.iter().map(|&(s, h, _)| (s, h)))
}

/// Writes each segment's header block (both copies, the rest zero) and
/// flushes the devices written.
fn write_headers(
    layout: &Layout,
    headers: impl Iterator<Item = (u32, SegmentHeader)>,
) -> Result<()> {
    let mut buf = layout.buffer(SEGMENT_HEADER_BYTES as usize);
    let mut mask = 0;
    for (s, h) in headers {
        buf.fill(0);
        h.encode(&mut buf);
        layout.write(s, 0, &buf)?;
        mask |= layout.device_bit(s);
    }
    if mask == 0 {
        return Ok(());
    }
    layout.flush(mask)
}

/// Overwrites segment headers with "free" headers and flushes.
pub(crate) fn mark_free(layout: &Layout, uuid: u128, segs: &[u32]) -> Result<()> {
    let free = SegmentHeader {
        kind: SegmentKind::Free,
        uuid,
        seq: 0,
        part: 0,
        parts: 0,
        payload_bytes: 0,
        payload_crc: 0,
    };
    write_headers(layout, segs.iter().map(|&s| (s, free)))
}

fn try_checkpoint(
    layout: &Arc<Layout>,
    headers: &[Option<SegmentHeader>],
    opts: &Options,
    uuid: u128,
) -> Result<Option<(Inner, u64)>> {
    let ckpt: Vec<(u32, SegmentHeader)> = headers
        .iter()
        .enumerate()
        .filter_map(|(i, h)| {
            h.filter(|h| h.kind == SegmentKind::Checkpoint)
                .map(|h| (i as u32, h))
        })
        .collect();
    if ckpt.is_empty() {
        return Ok(None);
    }
    let all: Vec<u32> = ckpt.iter().map(|(s, _)| *s).collect();
    let newest = ckpt.iter().map(|(_, h)| h.seq).max().expect("non-empty");
    let mut parts: Vec<(u32, SegmentHeader)> =
        ckpt.into_iter().filter(|(_, h)| h.seq == newest).collect();
    parts.sort_by_key(|(_, h)| h.part);
    let max_kv = headers
        .iter()
        .flatten()
        .filter(|h| h.kind == SegmentKind::Kv)
        .map(|h| h.seq)
        .max()
        .unwrap_or(0);
    let complete = parts
        .iter()
        .enumerate()
        .all(|(i, (_, h))| h.part as usize == i && h.parts as usize == parts.len());
    let restored = if complete && newest > max_kv {
        match checkpoint::read(layout, &parts) {
            Ok(r) => Some(r),
            Err(e) => {
                tracing::warn!("index checkpoint unusable, scanning the log instead: {e}");
                None
            }
        }
    } else {
        None
    };
    // From here on the checkpoint is stale: invalidate it before any write.
    mark_free(layout, uuid, &all)?;
    let Some(r) = restored else { return Ok(None) };
    // The segment table must agree with the headers on the device.
    for (i, (in_use, v)) in r.segments.iter().enumerate() {
        let on_disk = headers[i]
            .filter(|h| h.kind == SegmentKind::Kv)
            .map(|h| h.seq);
        if *in_use && on_disk != Some(v[0]) {
            tracing::warn!(
                "checkpoint disagrees with segment {i}'s header; scanning the log instead"
            );
            return Ok(None);
        }
    }
    let segs = Arc::new(Segments::new(layout.segments));
    for (i, (in_use, v)) in r.segments.iter().enumerate() {
        let info = segs.get(i as u32);
        if *in_use {
            info.seq.store(v[0], Ordering::Relaxed);
            info.valid_grains.store(v[1], Ordering::Relaxed);
            info.min_seq.store(v[2], Ordering::Relaxed);
            info.sealed_at.store(v[3], Ordering::Relaxed);
            info.tombstone_grains.store(v[4], Ordering::Relaxed);
            info.set_state(SegState::Sealed);
        } else {
            segs.release(i as u32);
        }
    }
    let namespaces = Namespaces::new(r.ns_next);
    for (name, logical, physical, count) in &r.namespaces {
        namespaces.insert(name, *logical, *physical, *count);
    }
    if let Some(c) = namespaces.counter(SYSTEM_NS) {
        c.store(r.system_count, Ordering::Relaxed);
    }
    let seq = Arc::new(AtomicU64::new(r.seq.max(newest + 1)));
    let inner = Inner::new(
        layout.clone(),
        segs,
        r.index,
        seq,
        namespaces,
        opts.clone(),
        uuid,
    );
    let keys = inner.user_keys();
    Ok(Some((inner, keys)))
}

/// The newest record of a key found while scanning.
#[derive(Clone, Copy)]
struct Found {
    seq: u64,
    pba: u64,
    grains: u64,
    tombstone: bool,
}

/// What a scan of the whole log found.
pub(crate) struct LogScan {
    found: FoldMap<(u32, u64, u64), Found>,
    pub segs: Arc<Segments>,
    pub max_seq: u64,
    pub max_ns: u32,
    pub records: u64,
    /// Invalid stretches of the log, classified, in device order.
    pub damage: Vec<Damage>,
    /// Keys of records in segments dropped for a damaged header
    /// (namespace, key, sequence number).
    pub hidden_keys: Vec<HiddenKey>,
}

/// A key whose records were dropped with their segment: (namespace, key,
/// sequence number).
pub(crate) type HiddenKey = (u32, Vec<u8>, u64);

pub(crate) fn scan_log(
    layout: &Layout,
    headers: &[Option<SegmentHeader>],
    progress: bool,
) -> Result<LogScan> {
    let mut kv: Vec<(u64, u32)> = headers
        .iter()
        .enumerate()
        .filter_map(|(i, h)| {
            h.filter(|h| h.kind == SegmentKind::Kv)
                .map(|h| (h.seq, i as u32))
        })
        .collect();
    kv.sort_unstable();
    let segs = Arc::new(Segments::new(layout.segments));
    let bar = if progress {
        indicatif::ProgressBar::new(kv.len() as u64)
    } else {
        indicatif::ProgressBar::hidden()
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "recovering {bar:40} {pos}/{len} segments {per_sec} eta {eta}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    // Recovery is CPU-bound (checksums, hashing, the key map): scan every
    // other segment on a second thread, then merge the two maps.
    let (even, odd): (Vec<_>, Vec<_>) = kv.iter().enumerate().partition(|(i, _)| i % 2 == 0);
    let even: Vec<(u64, u32)> = even.into_iter().map(|(_, &x)| x).collect();
    let odd: Vec<(u64, u32)> = odd.into_iter().map(|(_, &x)| x).collect();
    let (a, b) = std::thread::scope(|scope| {
        let other = scope.spawn(|| scan_part(layout, &segs, &odd, &bar));
        let mine = scan_part(layout, &segs, &even, &bar);
        (mine, other.join().expect("recovery scan thread panicked"))
    });
    bar.finish_and_clear();
    let (mut a, b) = (a?, b?);
    let (mut found, other) = if a.found.len() >= b.found.len() {
        (std::mem::take(&mut a.found), b.found)
    } else {
        (b.found, std::mem::take(&mut a.found))
    };
    found.reserve(other.len());
    for (id, f) in other {
        keep_newest(&mut found, id, f);
    }
    let mut invalid = a.invalid;
    invalid.extend(b.invalid);
    invalid.extend(damaged_headers(layout, headers)?);
    // The newest valid record of the log: in the newest segment that has
    // one, its last.
    let newest = a
        .last
        .into_iter()
        .chain(b.last)
        .max_by_key(|&(seg_seq, _)| seg_seq)
        .map(|(_, h)| h);
    let damage = damage::classify(layout, invalid, newest.as_ref());
    // A lost record whose key is known hides the key's older records: an
    // older value must not come back in its place.
    for d in damage.iter().filter(|d| d.kind == DamageKind::Lost) {
        if let (
            Some(key),
            Some(crate::format::RecordHeader {
                namespace: ns, seq, ..
            }),
        ) = (&d.key, d.head)
        {
            let id = (ns, key_hash(ns, key), crate::loc_cache::key_hash2(ns, key));
            let hidden = Found {
                seq,
                pba: 0,
                grains: 0,
                tombstone: true,
            };
            keep_newest(&mut found, id, hidden);
        }
    }
    // The keys of a segment dropped for its damaged header (not a torn
    // one: those records were never acknowledged, and the older ones are
    // right): hidden, so older records of them cannot come back.
    let mut hidden_keys = Vec::new();
    for d in damage
        .iter()
        .filter(|d| d.kind == DamageKind::Lost && d.segment_offset == 0)
    {
        scan_segment(layout, d.segment, d.segment_seq, |rec| {
            if rec.header.kind == RecordKind::Put {
                hidden_keys.push((rec.header.namespace, rec.key().to_vec(), rec.header.seq));
            }
            Ok(())
        })?;
    }
    for (ns, key, seq) in &hidden_keys {
        let id = (
            *ns,
            key_hash(*ns, key),
            crate::loc_cache::key_hash2(*ns, key),
        );
        let hidden = Found {
            seq: *seq,
            pba: 0,
            grains: 0,
            tombstone: true,
        };
        keep_newest(&mut found, id, hidden);
    }
    Ok(LogScan {
        hidden_keys,
        found,
        segs,
        max_seq: a
            .max_seq
            .max(b.max_seq)
            .max(kv.last().map_or(0, |&(s, _)| s)),
        max_ns: a.max_ns.max(b.max_ns),
        records: a.records + b.records,
        damage,
    })
}

/// Segments without a valid header that were in use: a header whose
/// checksum fails, or an unreadable one followed by a valid record. Their
/// records are not scanned (without the header, a freed segment's leftovers
/// cannot be told from live records), so each is reported as one damaged
/// stretch at the segment sequence number its first record carries (a
/// torn tail if that is past the flush mark, as for a new segment whose
/// header write was torn by a crash).
fn damaged_headers(
    layout: &Layout,
    headers: &[Option<SegmentHeader>],
) -> Result<Vec<damage::Found>> {
    let mut out = Vec::new();
    let mut buf = layout.buffer(SEGMENT_HEADER_BYTES as usize + layout.grain_bytes as usize);
    for (s, h) in headers.iter().enumerate() {
        if h.is_some() {
            continue;
        }
        let s = s as u32;
        let n = buf.len();
        layout.read(s, 0, &mut buf[..n])?;
        let first = &buf[SEGMENT_HEADER_BYTES as usize..];
        let first_seq = match format::check_record_head(first) {
            format::RecordCheck::Valid(h) => Some(h.segment_seq),
            _ => None,
        };
        let reason = match SegmentHeader::decode(&buf) {
            Err(DecodeError::BadChecksum { .. }) => "segment header checksum mismatch",
            Err(DecodeError::Absent)
                if matches!(
                    format::check_record_head(first),
                    format::RecordCheck::Valid(_)
                ) =>
            {
                "segment header unreadable, records follow it"
            }
            _ => continue,
        };
        out.push(damage::Found {
            segment: s,
            // Unknown: no record to tell it; not counted as acknowledged.
            segment_seq: first_seq.unwrap_or(u64::MAX),
            invalid: crate::iter::Invalid {
                offset: 0,
                len: layout.segment_bytes,
                reason,
                header: None,
                key: None,
            },
            followed: true,
        });
    }
    Ok(out)
}

/// Records `f` for key `id` unless a newer record of it was seen.
fn keep_newest(found: &mut FoldMap<(u32, u64, u64), Found>, id: (u32, u64, u64), f: Found) {
    match found.entry(id) {
        std::collections::hash_map::Entry::Occupied(mut o) => {
            if o.get().seq < f.seq {
                o.insert(f);
            }
        }
        std::collections::hash_map::Entry::Vacant(v) => {
            v.insert(f);
        }
    }
}

/// What one recovery thread found in its share of the segments.
struct Part {
    found: FoldMap<(u32, u64, u64), Found>,
    max_seq: u64,
    max_ns: u32,
    records: u64,
    /// Invalid stretches, not yet classified.
    invalid: Vec<damage::Found>,
    /// The last valid record of the newest segment scanned that had one:
    /// (segment sequence number, its header).
    last: Option<(u64, crate::format::RecordHeader)>,
}

fn scan_part(
    layout: &Layout,
    segs: &Segments,
    kv: &[(u64, u32)],
    bar: &indicatif::ProgressBar,
) -> Result<Part> {
    let mut found: FoldMap<(u32, u64, u64), Found> = FoldMap::default();
    let mut max_seq = 0u64;
    let mut max_ns = 1u32;
    let mut records = 0u64;
    let mut invalid = Vec::new();
    let mut last = None;
    for &(seq, seg) in kv {
        let info = segs.get(seg);
        info.seq.store(seq, Ordering::Relaxed);
        let mut newest = seq;
        let end = scan_segment(layout, seg, seq, |rec| {
            records += 1;
            let h = rec.header;
            last = Some((seq, h));
            max_seq = max_seq.max(h.seq);
            newest = newest.max(h.seq);
            max_ns = max_ns.max(h.namespace);
            info.min_seq.fetch_min(h.seq, Ordering::Relaxed);
            let grains = (h.body_bytes() as u64).div_ceil(layout.grain_bytes);
            let tombstone = h.kind != RecordKind::Put;
            if tombstone {
                info.tombstone_grains.fetch_add(grains, Ordering::Relaxed);
            }
            let f = Found {
                seq: h.seq,
                pba: rec.pba,
                grains,
                tombstone,
            };
            if h.kind == RecordKind::Evictions {
                // Each evicted key: a tombstone at this record's seq.
                for k in format::decode_evictions(rec.value()) {
                    keep_newest(&mut found, (k.namespace, k.hash, k.hash2), f);
                }
                return Ok(());
            }
            let id = (
                h.namespace,
                key_hash(h.namespace, rec.key()),
                crate::loc_cache::key_hash2(h.namespace, rec.key()),
            );
            keep_newest(&mut found, id, f);
            Ok(())
        })?;
        let stretch = |invalid, followed| damage::Found {
            segment: seg,
            segment_seq: seq,
            invalid,
            followed,
        };
        invalid.extend(end.damaged.into_iter().map(|d| stretch(d, true)));
        invalid.extend(end.tail.map(|t| stretch(t, false)));
        info.sealed_at.store(newest, Ordering::Relaxed);
        info.set_state(SegState::Sealed);
        bar.inc(1);
        if seg == kv[0].1 {
            // After the first segment, size the map for the whole log from
            // its average record size: growing a map of millions of entries
            // step by step costs more than the scan itself.
            let per_segment = records.max(1);
            let expected = per_segment.saturating_mul(kv.len() as u64).min(1 << 28);
            found.reserve(expected.saturating_sub(found.len() as u64) as usize);
        }
    }
    Ok(Part {
        found,
        max_seq,
        max_ns,
        records,
        invalid,
        last,
    })
}

/// The live entries of a log scan: (namespace, hash, location, true grains).
pub(crate) fn live_entries(
    scan: &LogScan,
    live_ns: impl Fn(u32) -> bool,
) -> Vec<(u32, u64, Location, u64)> {
    scan.found
        .iter()
        .filter(|((ns, _, _), f)| !f.tombstone && live_ns(*ns))
        .map(|(&(ns, h, _), f)| {
            (
                ns,
                h,
                Location {
                    pba: f.pba,
                    grains: f.grains.min(GRAINS_MAX as u64) as u16,
                },
                f.grains,
            )
        })
        .collect()
}

/// Namespaces named by the registry records of a scan.
pub(crate) fn registry(layout: &Layout, scan: &LogScan) -> Result<(Namespaces, i64)> {
    let namespaces = Namespaces::new(scan.max_ns + 1);
    let mut system = 0i64;
    for (&(ns, _, _), f) in scan.found.iter() {
        if ns != SYSTEM_NS || f.tombstone {
            continue;
        }
        let loc = Location {
            pba: f.pba,
            grains: f.grains.min(GRAINS_MAX as u64) as u16,
        };
        let Fetched::Record(r) = read_record(layout, loc, Span::Whole)? else {
            return Err(Error::Unusable(
                "namespace registry record unreadable".into(),
            ));
        };
        let name = String::from_utf8_lossy(r.key()).into_owned();
        let (logical, physical) = namespace::decode_registry_value(r.value())
            .ok_or_else(|| Error::Unusable(format!("bad namespace registry value for {name:?}")))?;
        namespaces.insert(&name, logical, physical, 0);
        system += 1;
    }
    Ok((namespaces, system))
}

/// What [`rebuild`] returns: the store, keys, records scanned, scan
/// seconds, the damage found, and keys dropped with damaged segments.
type Rebuilt = (Inner, u64, u64, f64, Vec<Damage>, Vec<HiddenKey>);

fn rebuild(
    layout: Arc<Layout>,
    headers: &[Option<SegmentHeader>],
    opts: &Options,
    uuid: u128,
) -> Result<Rebuilt> {
    let started = Instant::now();
    let scan = scan_log(&layout, headers, opts.progress)?;
    let scan_seconds = started.elapsed().as_secs_f64();
    report_damage(&scan.damage, opts)?;
    let (namespaces, system) = registry(&layout, &scan)?;
    if let Some(c) = namespaces.counter(SYSTEM_NS) {
        c.store(system, Ordering::Relaxed);
    }
    let index = Index::new(index_config(&layout, scan.found.len() as u64));
    let segs = scan.segs.clone();
    let live = live_entries(&scan, |ns| {
        ns == SYSTEM_NS || namespaces.is_live_physical(ns)
    });
    // The index is concurrent: fill it from two threads.
    let halves = live.split_at(live.len() / 2);
    let fill = |part: &[(u32, u64, Location, u64)]| -> Result<HashMap<u32, i64>> {
        let mut counts: HashMap<u32, i64> = HashMap::new();
        let mut cands = Vec::new();
        for &(ns, h, loc, grains) in part {
            let fp = Index::fingerprint(h);
            // Every entry is a distinct key; a Conflict only means the other
            // thread just added an entry with the same fingerprint.
            loop {
                cands.clear();
                index.lookup(fp, &mut cands);
                match index.insert(fp, loc, Expect::Absent { seen: &cands }) {
                    Ok(_) => break,
                    Err(nvdepot_index::InsertError::Conflict) => continue,
                    Err(e) => {
                        return Err(Error::Unusable(format!(
                            "index insert during recovery failed: {e:?}"
                        )))
                    }
                }
            }
            segs.add_valid(layout.segment_of(loc.pba), grains);
            if ns != SYSTEM_NS {
                *counts.entry(ns).or_default() += 1;
            }
        }
        Ok(counts)
    };
    let (a, b) = std::thread::scope(|scope| {
        let other = scope.spawn(|| fill(halves.1));
        let mine = fill(halves.0);
        (mine, other.join().expect("index fill thread panicked"))
    });
    let mut counts = a?;
    for (ns, n) in b? {
        *counts.entry(ns).or_default() += n;
    }
    let keys: u64 = counts.values().map(|&n| n as u64).sum();
    drop(live);
    for (ns, n) in counts {
        if let Some(c) = namespaces.counter(ns) {
            c.store(n, Ordering::Relaxed);
        }
    }
    // Everything else is free; KV segments that turned out empty too. A
    // segment with a damaged header is held back until `settle` has
    // marked it free on the device: a writer must not put new records in
    // it before that.
    let headless: Vec<u32> = scan
        .damage
        .iter()
        .filter(|d| d.segment_offset == 0)
        .map(|d| d.segment)
        .collect();
    for s in 0..layout.segments {
        let info = segs.get(s);
        let empty = info.min_seq.load(Ordering::Relaxed) == u64::MAX;
        if (info.state() != SegState::Sealed || empty) && !headless.contains(&s) {
            segs.release(s);
        }
    }
    let seq = Arc::new(AtomicU64::new(scan.max_seq + 1));
    let records = scan.records;
    let damage = scan.damage;
    let hidden_keys = scan.hidden_keys;
    tracing::info!(
        "log scan {scan_seconds:.2} s, index build {:.2} s",
        started.elapsed().as_secs_f64() - scan_seconds
    );
    let inner = Inner::new(layout, segs, index, seq, namespaces, opts.clone(), uuid);
    Ok((inner, keys, records, scan_seconds, damage, hidden_keys))
}

/// Logs every invalid stretch recovery found; in store mode, refuses to
/// open over damage to acknowledged data unless salvaging.
fn report_damage(damage: &[Damage], opts: &Options) -> Result<()> {
    for d in damage {
        match d.kind {
            DamageKind::TornTail => tracing::info!("recovery: {d}"),
            DamageKind::Lost => tracing::warn!("recovery: {d}"),
        }
    }
    let lost: Vec<&Damage> = damage
        .iter()
        .filter(|d| d.kind == DamageKind::Lost)
        .collect();
    let Some(first) = lost.first() else {
        return Ok(());
    };
    if opts.cache_mode || opts.salvage {
        tracing::warn!(
            "recovery: {} damaged stretch(es) of acknowledged data dropped; every other record kept",
            lost.len()
        );
        return Ok(());
    }
    Err(Error::Damaged {
        stretches: lost.len(),
        first: first.to_string(),
    })
}

/// Frees a segment or two for the tombstones `settle` appends for the keys
/// of segments dropped whole, when the crash left none free (garbage
/// collection, which normally keeps some, runs only once the open is
/// done). Segments holding damage are never collected here: their damaged records must stay until the tombstones
/// that hide their keys' older values are on the device.
fn make_room(inner: &Inner, damage: &[Damage]) -> Result<()> {
    let want = crate::writer::GC_RESERVE_SEGMENTS;
    if inner.segments.free_count() >= want {
        return Ok(());
    }
    let avoid: Vec<u32> = damage.iter().map(|d| d.segment).collect();
    let pass = crate::gc::collect_avoiding(inner, want, &avoid)?;
    tracing::info!(
        "recovery: freed {} segment(s) for the tombstones of damaged records",
        pass.freed
    );
    Ok(())
}

/// After a recovery that goes ahead: pads over every torn tail (before
/// any new write, so a crash meanwhile finds them still after the flush
/// mark); replaces each lost record whose key is known by a tombstone of
/// that key in its place, at its sequence number (its older values must
/// stay hidden once it is gone; newer ones stay), and pads over the other
/// lost stretches; logs a tombstone for each key of a segment dropped for
/// its damaged header (unless the key has a newer record), then frees
/// those segments. The next scan of the log is then clean, and a later
/// crash's recovery does not report the same stretches again.
fn settle(inner: &Inner, damage: &[Damage], hidden_keys: &[HiddenKey]) -> Result<()> {
    // A stretch at offset 0 is a damaged segment header: that segment is
    // dropped whole (reported) and marked free rather than padded, so the
    // next scan does not meet it again.
    let pick = |kind: DamageKind, header: bool| -> Vec<&Damage> {
        damage
            .iter()
            .filter(|d| d.kind == kind && (d.segment_offset == 0) == header)
            .collect()
    };
    // Marks the segments of damaged headers free on the device, then
    // gives them to the writer (`rebuild` held them back).
    let free = |list: Vec<&Damage>| -> Result<()> {
        let segs: Vec<u32> = list.iter().map(|d| d.segment).collect();
        mark_free(&inner.layout, inner.uuid, &segs)?;
        for s in segs {
            inner.segments.release(s);
        }
        Ok(())
    };
    // Torn: before any new write.
    free(pick(DamageKind::TornTail, true))?;
    damage::mend(&inner.layout, &pick(DamageKind::TornTail, false))?;
    // Lost records: a tombstone of the key in the record's place when the
    // key is known (its older values must stay hidden once the record is
    // gone), a pad otherwise.
    let lost = pick(DamageKind::Lost, false);
    damage::bury(&inner.layout, &lost)?;
    // Segments dropped for a damaged header: their keys' tombstones go to
    // the log, on the device before the segments are marked free.
    if !hidden_keys.is_empty() {
        make_room(inner, damage)?;
    }
    let mut last = None;
    let mut cands = Vec::new();
    for (ns, key, _) in hidden_keys {
        // A key still indexed has a record newer than the dropped one (the
        // scan hid it otherwise): that record hides the older ones, and a
        // tombstone, which takes the next sequence number, would hide it
        // too at the next recovery.
        let (hash, hash2) = (key_hash(*ns, key), crate::loc_cache::key_hash2(*ns, key));
        let newer = crate::aio::now(inner.existing(
            crate::aio::Mode::Blocking,
            *ns,
            key,
            hash,
            hash2,
            &mut cands,
        ))?;
        if newer.is_some() {
            continue;
        }
        let header = inner.header(RecordKind::Tombstone, *ns, key, 0);
        let parts = crate::writer::RecordParts {
            header,
            key,
            value: &[],
        };
        // GC's reserve: garbage collection does not run before the open
        // ends, and these few records must not fail an open for want of
        // the room GC would make.
        let app = inner.append_hiding(&parts, crate::writer::Appender::Gc)?;
        last = Some(app.lsn);
    }
    if let Some(lsn) = last {
        inner.writer.wait_durable(lsn)?;
        inner.layout.flush(u64::MAX)?;
    }
    free(pick(DamageKind::Lost, true))
}
