//! nvdepot's storage engine: a persistent, log-structured key-value store
//! for fast block devices, after uDepot (FAST'19).
//!
//! - One device IO per GET (if no fingerprint collision), one group-committed
//!   write per PUT.
//! - An 8-byte-per-entry DRAM index ([`nvdepot_index`]) that grows without IO.
//! - Records in segments of grains, checksummed, with garbage collection.
//! - Crash recovery from the log; fast clean restart from an index
//!   checkpoint.
//!
//! Durability: with [`Options::sync`] (the default) `put`, `delete` and
//! friends return only after the record is on the device: the `O_DIRECT`
//! write completed *and* the device cache was flushed (`fdatasync`).
//! Concurrent writers share one flush (group commit).
//!
//! # Async API
//!
//! `get_async`, `put_async` and friends are the same operations for tasks
//! on an `nvdepot_io::uring` runtime (thread per core): device reads and
//! writes go through the thread's io_uring, and waits (a key's stripe lock,
//! the group commit led by another task or thread) park the task, not the
//! thread. Both APIs are one implementation (`aio.rs`) and may be mixed on
//! one store from different threads. Inside a runtime, use the async
//! writes: a blocking write there could wait for a flush that a task of the
//! same thread leads. Outside a runtime, or on a device without a file
//! descriptor, the async calls do blocking IO.
//!
//! ```no_run
//! use nvdepot_engine::{Options, Store};
//! let store = Store::open("./data".as_ref(), &Options::default().create_bytes(1 << 30))?;
//! let ns = store.default_namespace();
//! store.put(ns, b"hello", b"world")?;
//! assert_eq!(store.get(ns, b"hello")?.as_deref(), Some(&b"world"[..]));
//! store.close()?;
//! # Ok::<(), nvdepot_engine::Error>(())
//! ```

mod aio;
mod check;
mod checkpoint;
mod commit;
mod cursor;
mod damage;
mod deferred;
mod error;
pub mod format;
#[doc(hidden)]
pub mod fuzzing;
mod gc;
mod group_commit;
mod inner;
mod iter;
mod large;
mod layout;
mod loc_cache;
mod log_writer;
mod lookup;
#[cfg(test)]
mod model;
mod namespace;
mod namespace_admin;
mod options;
mod read;
mod recovery;
mod repair;
mod segments;
mod stats;
mod store;
mod stripes;
pub(crate) mod sync;
mod update;
mod value_reader;
mod writer;

pub use check::{check, check_devices, CheckReport};
pub use commit::BatchGuard;
pub use cursor::{ScanItem, ScanPage};
pub use damage::{Damage, DamageKind};
pub use deferred::{defer_durability, defer_durability_async};
pub use error::{Error, Result};
pub use iter::{IterPlan, NamespaceIter};
pub use large::LARGE_VALUE_BYTES_MAX;
pub use namespace::Namespace;
pub use options::{Eviction, Options, Progress};
pub use recovery::{creating_file_name, data_file_name};
pub use stats::Stats;
pub use store::{DeleteOutcome, OpenReport, PutMode, Store, WriteOp};
pub use update::{Change, Current, Known, Updated};
pub use value_reader::ValueReader;
