//! What the store reports about itself.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::inner::Inner;
use crate::segments::SegState;

#[derive(Default)]
pub(crate) struct Counters {
    pub gets: AtomicU64,
    pub puts: AtomicU64,
    pub deletes: AtomicU64,
    /// Bytes (whole grains) of records written by user operations.
    pub user_bytes: AtomicU64,
    /// Bytes of records relocated by GC.
    pub gc_bytes: AtomicU64,
    pub gc_segments: AtomicU64,
    /// Of those, segments freed without reading them (nothing live in
    /// them, no tombstone).
    pub gc_segments_unread: AtomicU64,
    pub gc_tombstones_dropped: AtomicU64,
    /// Keys evicted in cache mode.
    pub evictions: AtomicU64,
    /// Of those, keys named in Evictions records (evicted out of order).
    pub evictions_logged: AtomicU64,
}

/// A snapshot of the store's counters and gauges.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    pub keys: u64,
    pub namespaces: u64,
    pub capacity_bytes: u64,
    pub segment_bytes: u64,
    pub grain_bytes: u64,
    pub segments_total: u64,
    pub segments_free: u64,
    /// Bytes of records the index points to.
    pub live_bytes: u64,
    pub gets: u64,
    pub puts: u64,
    pub deletes: u64,
    /// Record bytes written for user operations.
    pub user_bytes_written: u64,
    /// Bytes written to the devices by the log (user + GC + segment headers).
    pub device_bytes_written: u64,
    pub gc_bytes_written: u64,
    pub gc_segments_collected: u64,
    /// Of those, segments freed without reading them (nothing live, no
    /// tombstone: a large value's replaced chunks, typically).
    pub gc_segments_unread: u64,
    pub gc_tombstones_dropped: u64,
    /// Keys evicted in cache mode.
    pub evictions: u64,
    /// Of those, keys evicted out of write order and so logged in
    /// Evictions records (20 bytes each).
    pub evictions_logged: u64,
    pub flushes: u64,
    /// Seals the GC thread wrote once the log went idle (a pad saying how
    /// far the log is durable; leaders add one to every batch as well).
    pub log_idle_seals: u64,
    /// device_bytes_written / user_bytes_written.
    pub write_amplification: f64,
    pub index_memory_bytes: u64,
    pub index_bytes_per_key: f64,
}

pub(crate) fn collect(inner: &Inner) -> Stats {
    let c = &inner.counters;
    let segs = &inner.segments;
    let live_grains: u64 = segs
        .infos
        .iter()
        .filter(|s| s.state().holds_records())
        .map(|s| s.valid_grains.load(Ordering::Relaxed))
        .sum();
    let keys = inner.user_keys();
    let user = c.user_bytes.load(Ordering::Relaxed);
    let device = inner.writer.stats.device_bytes.load(Ordering::Relaxed);
    let mem = inner.index.memory_bytes() as u64;
    let free = segs
        .infos
        .iter()
        .filter(|s| s.state() == SegState::Free)
        .count() as u64;
    Stats {
        keys,
        namespaces: inner.namespaces.list().len() as u64,
        capacity_bytes: inner.layout.segments as u64 * inner.layout.segment_bytes,
        segment_bytes: inner.layout.segment_bytes,
        grain_bytes: inner.layout.grain_bytes,
        segments_total: segs.len() as u64,
        segments_free: free,
        live_bytes: live_grains * inner.layout.grain_bytes,
        gets: c.gets.load(Ordering::Relaxed),
        puts: c.puts.load(Ordering::Relaxed),
        deletes: c.deletes.load(Ordering::Relaxed),
        user_bytes_written: user,
        device_bytes_written: device,
        gc_bytes_written: c.gc_bytes.load(Ordering::Relaxed),
        gc_segments_collected: c.gc_segments.load(Ordering::Relaxed),
        gc_segments_unread: c.gc_segments_unread.load(Ordering::Relaxed),
        gc_tombstones_dropped: c.gc_tombstones_dropped.load(Ordering::Relaxed),
        evictions: c.evictions.load(Ordering::Relaxed),
        evictions_logged: c.evictions_logged.load(Ordering::Relaxed),
        flushes: inner.writer.stats.flushes.load(Ordering::Relaxed),
        log_idle_seals: inner.writer.stats.idle_seals.load(Ordering::Relaxed),
        write_amplification: if user == 0 {
            0.0
        } else {
            device as f64 / user as f64
        },
        index_memory_bytes: mem,
        index_bytes_per_key: if keys == 0 {
            0.0
        } else {
            mem as f64 / keys as f64
        },
    }
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rows: [(&str, String); 25] = [
            ("keys", self.keys.to_string()),
            ("namespaces", self.namespaces.to_string()),
            ("capacity_bytes", self.capacity_bytes.to_string()),
            ("segment_bytes", self.segment_bytes.to_string()),
            ("grain_bytes", self.grain_bytes.to_string()),
            ("segments_total", self.segments_total.to_string()),
            ("segments_free", self.segments_free.to_string()),
            ("live_bytes", self.live_bytes.to_string()),
            ("gets", self.gets.to_string()),
            ("puts", self.puts.to_string()),
            ("deletes", self.deletes.to_string()),
            ("user_bytes_written", self.user_bytes_written.to_string()),
            (
                "device_bytes_written",
                self.device_bytes_written.to_string(),
            ),
            ("gc_bytes_written", self.gc_bytes_written.to_string()),
            (
                "gc_segments_collected",
                self.gc_segments_collected.to_string(),
            ),
            ("gc_segments_unread", self.gc_segments_unread.to_string()),
            (
                "gc_tombstones_dropped",
                self.gc_tombstones_dropped.to_string(),
            ),
            ("evictions", self.evictions.to_string()),
            ("evictions_logged", self.evictions_logged.to_string()),
            ("flushes", self.flushes.to_string()),
            ("log_idle_seals", self.log_idle_seals.to_string()),
            (
                "write_amplification",
                format!("{:.3}", self.write_amplification),
            ),
            ("index_memory_bytes", self.index_memory_bytes.to_string()),
            (
                "index_bytes_per_key",
                format!("{:.2}", self.index_bytes_per_key),
            ),
            (
                "live_percent",
                format!(
                    "{:.1}",
                    self.live_bytes as f64 * 100.0 / self.capacity_bytes.max(1) as f64
                ),
            ),
        ];
        for (name, value) in rows {
            writeln!(f, "{name} {value}")?;
        }
        Ok(())
    }
}
