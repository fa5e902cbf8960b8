//! Errors a user of the store can act on.

use nvdepot_io::IoError;

/// Result of a store operation.
pub type Result<T> = std::result::Result<T, Error>;

/// Everything that can go wrong in the engine, each with the numbers needed
/// to act on it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A device operation failed.
    #[error(transparent)]
    Io(#[from] IoError),
    /// The key is longer than the limit.
    #[error("key too large: {len} bytes (limit {max} bytes)")]
    KeyTooLarge { len: usize, max: usize },
    /// The value is longer than the limit.
    #[error("value too large: {len} bytes (limit {max} bytes)")]
    ValueTooLarge { len: usize, max: usize },
    /// The operation takes only values one record holds (read-modify-write
    /// and `write_batch`); longer ones are large values.
    #[error("{op} takes values of up to {max} bytes (one record); this one is {len} bytes")]
    TooLargeFor {
        op: &'static str,
        len: u64,
        max: usize,
    },
    /// No free segment and garbage collection cannot free one.
    #[error("store full: {used_segments} of {total_segments} segments in use, {valid_percent}% of their grains hold live data")]
    StoreFull {
        used_segments: usize,
        total_segments: usize,
        valid_percent: u64,
    },
    /// A record failed its checksum or is malformed.
    #[error("corrupt record at {device} offset {offset:#x}: {reason}")]
    Corrupt {
        device: String,
        offset: u64,
        reason: String,
    },
    /// Crash recovery found damage to acknowledged data (not a torn tail)
    /// and the store is not opened in cache mode or with
    /// [`crate::Options::salvage`].
    #[error("store damaged: {stretches} stretch(es) of acknowledged records are unreadable, first: {first}. Run `nvdepot check` to list them; open with salvage (`nvdepot kv --salvage`) to drop only the damaged records and keep everything else")]
    Damaged { stretches: usize, first: String },
    /// The device holds a store of another format version.
    #[error("format version mismatch on {device}: found {found}, this build reads {supported}")]
    FormatVersion {
        device: String,
        found: u32,
        supported: u32,
    },
    /// The device does not hold an nvdepot store (or belongs to another store).
    #[error("{device} is not part of this nvdepot store: {reason}")]
    NotAStore { device: String, reason: String },
    /// The namespace does not exist.
    #[error("no such namespace: {0}")]
    NoSuchNamespace(String),
    /// The namespace already exists.
    #[error("namespace already exists: {0}")]
    NamespaceExists(String),
    /// Bad configuration given at open.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The store was closed or a background thread failed; reopen it.
    #[error("store is unusable: {0}")]
    Unusable(String),
}
