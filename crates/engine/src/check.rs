//! Offline verification of a store: `nvdepot check`.
//!
//! Reads every segment header and every record (checking each CRC),
//! rebuilds the key → record map from the log exactly as crash recovery
//! would, and, if the store was closed cleanly, compares the index
//! checkpoint with it entry by entry. Never writes.

use std::collections::HashSet;
use std::fmt;
use std::path::Path;
use std::sync::Arc;

use nvdepot_io::Device;

use nvdepot_index::Index;

use crate::error::Result;
use crate::format::SegmentKind;
use crate::namespace::SYSTEM_NS;
use crate::options::Options;
use crate::recovery;

/// What `check` found.
#[derive(Clone, Debug, Default)]
pub struct CheckReport {
    pub devices: usize,
    pub segments: u64,
    pub kv_segments: u64,
    pub checkpoint_segments: u64,
    /// Valid records read.
    pub records: u64,
    /// Keys live according to the log.
    pub live_keys: u64,
    pub namespaces: u64,
    /// True if an index checkpoint was present and compared.
    pub checkpoint_compared: bool,
    /// Every invalid stretch of the log, torn tails included, classified
    /// as recovery would (damage to acknowledged data is also a problem).
    pub damage: Vec<crate::Damage>,
    /// Everything wrong, one line each. Empty means the store is sound.
    pub problems: Vec<String>,
    /// Damage that lost nothing (a segment header read from its second
    /// copy), one line each: reported, but the store is sound.
    pub repaired: Vec<String>,
}

impl CheckReport {
    /// True if no problem was found.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }
}

impl fmt::Display for CheckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "devices {}", self.devices)?;
        writeln!(
            f,
            "segments {} (kv {}, checkpoint {})",
            self.segments, self.kv_segments, self.checkpoint_segments
        )?;
        writeln!(f, "records {}", self.records)?;
        writeln!(f, "live_keys {}", self.live_keys)?;
        writeln!(f, "namespaces {}", self.namespaces)?;
        writeln!(
            f,
            "checkpoint {}",
            if self.checkpoint_compared {
                "compared"
            } else {
                "none"
            }
        )?;
        for d in &self.damage {
            if d.kind == crate::DamageKind::TornTail {
                writeln!(f, "torn {d}")?;
            }
        }
        for r in &self.repaired {
            writeln!(f, "DAMAGE (nothing lost) {r}")?;
        }
        for p in &self.problems {
            writeln!(f, "PROBLEM {p}")?;
        }
        write!(f, "{}", if self.is_ok() { "ok" } else { "CORRUPT" })
    }
}

/// Verifies the store at `path` without modifying it.
pub fn check(path: &Path, opts: &Options) -> Result<CheckReport> {
    let opts = Options {
        create_bytes: None,
        ..opts.clone()
    };
    let (devices, _) = recovery::open_paths(path, &opts)?;
    check_devices(devices, &opts)
}

/// Verifies the store on `devices` without modifying it.
pub fn check_devices(devices: Vec<Arc<dyn Device>>, opts: &Options) -> Result<CheckReport> {
    let sbs = recovery::read_superblocks(&devices)?;
    let (layout, sb) = recovery::load_layout(devices, sbs)?;
    let recovery::SegmentHeaders {
        headers,
        one_copy_damaged,
    } = recovery::read_segment_headers(&layout, sb.uuid)?;
    let mut report = CheckReport {
        repaired: one_copy_damaged
            .iter()
            .map(|(s, _, which)| {
                let (device, offset) = layout.describe(*s, 0);
                format!("segment {s} header at {device} offset {offset:#x}: {which} (the next open rewrites it)")
            })
            .collect(),
        devices: layout.devices.len(),
        segments: layout.segments as u64,
        kv_segments: headers
            .iter()
            .flatten()
            .filter(|h| h.kind == SegmentKind::Kv)
            .count() as u64,
        checkpoint_segments: headers
            .iter()
            .flatten()
            .filter(|h| h.kind == SegmentKind::Checkpoint)
            .count() as u64,
        ..Default::default()
    };
    let scan = recovery::scan_log(&layout, &headers, opts.progress.as_ref())?;
    report.records = scan.records;
    report.repaired.extend(scan.repaired.iter().cloned());
    for d in &scan.damage {
        if d.kind == crate::DamageKind::Lost {
            report.problems.push(d.to_string());
        }
    }
    report.damage = scan.damage.clone();
    let (namespaces, _) = match recovery::registry(&scan) {
        Ok(r) => r,
        Err(e) => {
            report.problems.push(format!("namespace registry: {e}"));
            return Ok(report);
        }
    };
    report.namespaces = namespaces.list().len() as u64;
    let live = recovery::live_entries(&scan, |ns| {
        ns == SYSTEM_NS || namespaces.is_live_physical(ns)
    });
    report.live_keys = live
        .iter()
        .filter(|e| e.0 != SYSTEM_NS && e.0 & crate::format::CHUNK_SPACE == 0)
        .count() as u64;
    // Every live record must read back whole (its CRC was checked by the
    // scan; this checks the location arithmetic the index will use). A
    // registry record the scan corrected reads back with its flipped bit:
    // the scan's copy is the one used.
    for &(_, _, loc, _) in &live {
        if scan.corrected.contains(&loc.pba) {
            continue;
        }
        if let crate::read::Fetched::Invalid(e) =
            crate::read::read_record(&layout, loc, crate::read::Span::Whole)?
        {
            report.problems.push(format!("live record unreadable: {e}"));
        }
    }
    // Compare with the checkpoint, if the store was closed cleanly.
    let mut parts = recovery::checkpoint_segments(&headers);
    if let Some(newest) = parts.iter().map(|(_, h)| h.seq).max() {
        parts.retain(|(_, h)| h.seq == newest);
        parts.sort_by_key(|(_, h)| h.part);
        match crate::checkpoint::read(&layout, &parts) {
            Ok(r) => {
                report.checkpoint_compared = true;
                let mut in_ckpt = HashSet::new();
                r.index.for_each(|_, loc| {
                    in_ckpt.insert(loc.pba);
                });
                let mut cands = Vec::new();
                let mut missing = 0;
                for &(_, h, loc, _) in &live {
                    cands.clear();
                    r.index.lookup(Index::fingerprint(h), &mut cands);
                    if !cands.contains(&loc) {
                        missing += 1;
                        if missing <= 10 {
                            report.problems.push(format!(
                                "log has a live record at grain {} that the checkpoint index lacks",
                                loc.pba
                            ));
                        }
                    }
                    in_ckpt.remove(&loc.pba);
                }
                for pba in in_ckpt.iter().take(10) {
                    report.problems.push(format!(
                        "checkpoint index points to grain {pba}, which the log does not hold live"
                    ));
                }
            }
            Err(e) => report.problems.push(format!("index checkpoint: {e}")),
        }
    }
    Ok(report)
}
