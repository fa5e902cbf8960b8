//! IO errors that say which device, which operation and where.

/// Result of a device operation.
pub type IoResult<T> = Result<T, IoError>;

/// A failed device operation.
#[derive(Debug, thiserror::Error)]
pub enum IoError {
    /// The operating system reported an error.
    #[error("{op} on {device} at offset {offset:#x} ({len} bytes): {source}")]
    Os {
        op: &'static str,
        device: String,
        offset: u64,
        len: usize,
        #[source]
        source: std::io::Error,
    },
    /// Opening or sizing a device failed.
    #[error("cannot open {device}: {reason}")]
    Open { device: String, reason: String },
    /// A read returned fewer bytes than asked (the device is shorter than
    /// its stated capacity).
    #[error("short {op} on {device} at offset {offset:#x}: {done} of {len} bytes")]
    Short {
        op: &'static str,
        device: String,
        offset: u64,
        len: usize,
        done: usize,
    },
    /// The in-memory test device has crashed; every operation fails until
    /// the store is reopened on the post-crash image.
    #[error("device {device} has crashed (fault injection)")]
    Crashed { device: String },
    /// An injected fault (tests only).
    #[error("injected {op} fault on {device} at offset {offset:#x}")]
    Injected {
        op: &'static str,
        device: String,
        offset: u64,
    },
}
