//! Options fixed when a store is opened.

use std::sync::Arc;

/// How a store is created and run. Each field documents its default.
#[derive(Clone, Debug)]
pub struct Options {
    /// Grain: the allocation unit on the device, 512..=4096, a power of two.
    /// Only used when creating a store. Default: 512.
    pub grain_bytes: u32,
    /// Segment: the unit of allocation and garbage collection. Only used
    /// when creating a store. Default: 64 MiB.
    pub segment_bytes: u64,
    /// Size of the data file to create when the path holds no store.
    /// Default: none (opening an empty directory is then an error).
    pub create_bytes: Option<u64>,
    /// Longest key. Default (and maximum): 65535 bytes.
    pub key_bytes_max: usize,
    /// Longest value. Default and maximum: 1 GiB. A value longer than one
    /// record holds (a quarter of a segment, less the longest key) is
    /// stored as a large value: chunks, then a head naming them (see
    /// docs/FORMAT.md, "Large values"); read-modify-write (`update`) and
    /// `write_batch` take only values that fit one record.
    pub value_bytes_max: usize,
    /// Flush the device before acknowledging a write. Default: true.
    /// When false, a write is acknowledged once the `O_DIRECT` write
    /// completed (the device's volatile cache may still hold it) and the
    /// devices are flushed every [`Options::flush_interval_ms`].
    pub sync: bool,
    /// With `sync` off: milliseconds between device flushes. Default: 100.
    pub flush_interval_ms: u64,
    /// Entries of the location cache (40 bytes each), which lets an
    /// overwrite or delete of a recently written key skip reading its old
    /// record. 0 disables it. Default: 262144 (10 MiB).
    pub location_cache_entries: usize,
    /// Cache mode (the memcache face): when space runs low a segment is
    /// reclaimed whole (chosen by [`Options::eviction`]) and its keys are
    /// evicted, with no relocation writes; puts never fail with
    /// `StoreFull`. Default: false.
    pub cache_mode: bool,
    /// Which segment cache mode reclaims first. Default:
    /// [`Eviction::SegmentLru`].
    pub eviction: Eviction,
    /// Run garbage collection in a background thread. Default: true.
    pub background_gc: bool,
    /// Told how far the log scan of a rebuild is (segments scanned, of how
    /// many), from the scanning threads; the CLI draws a progress bar with
    /// it. Default: none.
    pub progress: Option<Progress>,
    /// Open a store whose log holds damage to acknowledged records (found
    /// by crash recovery; see `nvdepot check`) anyway, dropping only the
    /// damaged records. Without it a store-mode open fails with
    /// `Error::Damaged`; cache mode always salvages (and reports).
    /// Default: false.
    pub salvage: bool,
    /// Open the O_DIRECT files without O_DIRECT (for filesystems such as
    /// tmpfs that refuse it; never for production). Default: false.
    pub buffered_io: bool,
    /// Write-behind: acknowledge a put once its record is in the DRAM write
    /// buffer and the index points to it, before the device write, which
    /// starts in the same loop turn on an io_uring worker (else within
    /// 500 µs, from a log-writer thread); reads of a record not yet
    /// written are served from its buffered copy. A
    /// process crash (`kill -9`) or a power loss loses the puts of the last
    /// write (about a millisecond); deletes and updates still wait for
    /// their write (and so write out every put before them). Falls back to
    /// waiting when 32 MiB are buffered. Default: false.
    pub write_behind: bool,
    /// A put (or an update's write) releases its key's lock once the
    /// record is in the write buffer and the index points to it, then
    /// waits, unlocked, for the record to be durable before returning.
    /// Concurrent writers of one key then share a group commit instead of
    /// each waiting for its own flush under the lock. Readers may see a
    /// value before its writer is answered (served from the buffered copy
    /// until it is written), as Redis's `appendfsync always` lets them; a
    /// value is never acknowledged before it is durable. Default: false.
    pub unlock_before_durable: bool,
    /// On an io_uring runtime, a durable write's device flush
    /// (`fdatasync`) runs on the worker thread that leads the group
    /// commit, which blocks for it (as redis-server's event loop blocks on
    /// its `appendfsync always` fsync), when no other task of that worker
    /// is ready to run; otherwise, and always when off, the flush goes
    /// through the ring, which hands it to a kernel io-wq thread so the
    /// worker serves its other connections meanwhile, at three more
    /// context switches per flush (6 instead of 3 per durable SET at one
    /// connection). Measured (bench/results/resp-vs-redis-profile.md):
    /// durable SETs at 1 connection +35 %, at 128 +6 %; mixed 1:1 GET/SET
    /// at 64 connections unchanged (always inline, it lost 8 %, the GETs
    /// waiting behind the flushes). Default: true.
    pub flush_inline: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            grain_bytes: 512,
            segment_bytes: 64 << 20,
            create_bytes: None,
            key_bytes_max: u16::MAX as usize,
            value_bytes_max: crate::large::LARGE_VALUE_BYTES_MAX,
            sync: true,
            flush_interval_ms: 100,
            cache_mode: false,
            eviction: Eviction::SegmentLru,
            location_cache_entries: 1 << 18,
            background_gc: true,
            progress: None,
            salvage: false,
            buffered_io: false,
            write_behind: false,
            unlock_before_durable: false,
            flush_inline: true,
        }
    }
}

/// Cache mode's choice of the segment to reclaim. With the policies other
/// than `Fifo`, a segment is reclaimed anyway once it has survived two
/// turns of the log (twice as many evictions as there are segments), and
/// evicting out of write order logs the evicted keys (20 bytes each, see
/// docs/FORMAT.md) so a crash restart cannot bring back an older value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Eviction {
    /// The segment least recently read (a GET hit on any of its records)
    /// or written.
    SegmentLru,
    /// The oldest segment (write order), ignoring reads.
    Fifo,
}

impl Options {
    /// Sets [`Options::create_bytes`].
    pub fn create_bytes(mut self, bytes: u64) -> Self {
        self.create_bytes = Some(bytes);
        self
    }

    /// Sets [`Options::segment_bytes`].
    pub fn segment_bytes(mut self, bytes: u64) -> Self {
        self.segment_bytes = bytes;
        self
    }
}

/// A progress callback: `(done, total)` segments of the log scan. Called
/// from the scan's threads, once per segment.
#[derive(Clone)]
pub struct Progress(Arc<dyn Fn(u64, u64) + Send + Sync>);

impl Progress {
    pub fn new(f: impl Fn(u64, u64) + Send + Sync + 'static) -> Progress {
        Progress(Arc::new(f))
    }

    pub(crate) fn report(&self, done: u64, total: u64) {
        (self.0)(done, total)
    }
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Progress(..)")
    }
}
