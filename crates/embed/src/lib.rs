//! The binding layer's core: what the C, Python and Java skins share, so
//! each is a thin translation of its language's conventions onto one
//! implementation (docs/ARCHITECTURE.md, "Bindings").
//!
//! - [`Handle`]: an open store that any thread may use and one may close;
//!   closing waits for operations in flight, refuses while cursors hold
//!   the store ([`Code::Busy`]), and makes later calls fail with
//!   [`Code::Closed`] instead of touching freed memory.
//! - [`Failure`]: every error as a stable [`Code`] plus the engine's
//!   message (the C API returns the code, Python and Java raise a class
//!   per code).
//! - [`set_option`]: the engine's [`Options`] by name and text, so a C
//!   caller, Python keyword arguments and a Java `Properties` configure a
//!   store the same way.
//! - [`Cursor`]: the engine's resumable scan as NVMKV's
//!   begin/next/get-current iterator that owns its share of the store.
//! - [`destroy`]: removing a store's data files (RocksDB's `DestroyDB`).
//! - The data operations on [`Handle`] (`ops.rs`), which keep the optional
//!   DRAM value cache (`value_cache.rs`) in step with the store: the skins
//!   call those, never the engine's writes directly.

mod code;
mod cursor;
mod destroy;
mod handle;
mod ops;
mod options;
mod size;
mod value_cache;

pub use code::{Code, Failure};
pub use cursor::Cursor;
pub use destroy::destroy;
pub use handle::Handle;
pub use nvdepot_engine::{
    DeleteOutcome, Error, Namespace, Options, PutMode, ScanItem, Stats, Store, WriteOp,
};
pub use options::{option_names, set_option, Config};
pub use size::parse_size;

/// The namespace of id `id`, if the store has one (`Error::NoSuchNamespace`
/// if not): for calls that would otherwise treat an unknown id as empty.
pub fn existing(store: &Store, id: u32) -> Result<Namespace, Error> {
    let ns = Namespace::from_id(id);
    if store.namespaces().iter().any(|(_, n, _)| *n == ns) {
        Ok(ns)
    } else {
        Err(Error::NoSuchNamespace(format!("id {id}")))
    }
}

/// A put's condition as the bindings number it across their boundary
/// (C's `NVDEPOT_ALWAYS` .. `NVDEPOT_IF_VERSION`, Java's Namespace modes):
/// 0 always, 1 if absent, 2 if present, 3 if the version is `version`.
pub fn put_mode(condition: i32, version: u64) -> Result<PutMode, Failure> {
    Ok(match condition {
        0 => PutMode::Upsert,
        1 => PutMode::IfAbsent,
        2 => PutMode::IfPresent,
        3 => PutMode::IfVersion(version),
        other => return Err(Failure::invalid(format!("unknown put condition {other}"))),
    })
}
