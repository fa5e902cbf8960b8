//! nvdepot's error codes as Python exception classes, all subclasses of
//! `nvdepot.Error` (so `except nvdepot.Error` catches every one).

use nvdepot_embed::{Code, Failure};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(nvdepot, Error, PyException, "Every error nvdepot raises.");
create_exception!(
    nvdepot,
    InvalidArgumentError,
    Error,
    "A bad argument: an unknown option or a value it does not take."
);
create_exception!(
    nvdepot,
    KeyTooLargeError,
    Error,
    "The key is longer than the store's limit."
);
create_exception!(
    nvdepot,
    ValueTooLargeError,
    Error,
    "The value is too long for the store or the operation."
);
create_exception!(
    nvdepot,
    StoreFullError,
    Error,
    "No free space that garbage collection can make."
);
create_exception!(nvdepot, IoError, Error, "A device operation failed.");
create_exception!(
    nvdepot,
    CorruptError,
    Error,
    "A record failed its checksum."
);
create_exception!(
    nvdepot,
    DamagedError,
    Error,
    "The store holds damage to acknowledged data (open with salvage=True)."
);
create_exception!(
    nvdepot,
    FormatVersionError,
    Error,
    "The store was written by another format version."
);
create_exception!(
    nvdepot,
    NotAStoreError,
    Error,
    "No store at the path (pass create_bytes to create one)."
);
create_exception!(nvdepot, NoSuchNamespaceError, Error, "No such namespace.");
create_exception!(
    nvdepot,
    NamespaceExistsError,
    Error,
    "The namespace exists."
);
create_exception!(
    nvdepot,
    ConfigError,
    Error,
    "Options the store cannot work with."
);
create_exception!(
    nvdepot,
    UnusableError,
    Error,
    "The store failed; close and reopen it."
);
create_exception!(
    nvdepot,
    BusyError,
    Error,
    "The store cannot close while walks of it are alive."
);
create_exception!(nvdepot, ClosedError, Error, "The store was closed.");
create_exception!(nvdepot, InternalError, Error, "A bug in nvdepot.");

/// The exception for a failure (statuses such as NotFound never reach
/// here: the methods return None or raise KeyError for them).
pub(crate) fn fail(f: Failure) -> PyErr {
    let m = f.message;
    match f.code {
        Code::InvalidArgument => InvalidArgumentError::new_err(m),
        Code::KeyTooLarge => KeyTooLargeError::new_err(m),
        Code::ValueTooLarge => ValueTooLargeError::new_err(m),
        Code::StoreFull => StoreFullError::new_err(m),
        Code::Io => IoError::new_err(m),
        Code::Corrupt => CorruptError::new_err(m),
        Code::Damaged => DamagedError::new_err(m),
        Code::FormatVersion => FormatVersionError::new_err(m),
        Code::NotAStore => NotAStoreError::new_err(m),
        Code::NoSuchNamespace => NoSuchNamespaceError::new_err(m),
        Code::NamespaceExists => NamespaceExistsError::new_err(m),
        Code::Config => ConfigError::new_err(m),
        Code::Unusable => UnusableError::new_err(m),
        Code::Busy => BusyError::new_err(m),
        Code::Closed => ClosedError::new_err(m),
        Code::Ok
        | Code::NotFound
        | Code::ConditionFailed
        | Code::BufferTooSmall
        | Code::End
        | Code::Internal => InternalError::new_err(format!("{}: {m}", f.code.name())),
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("Error", py.get_type::<Error>())?;
    m.add(
        "InvalidArgumentError",
        py.get_type::<InvalidArgumentError>(),
    )?;
    m.add("KeyTooLargeError", py.get_type::<KeyTooLargeError>())?;
    m.add("ValueTooLargeError", py.get_type::<ValueTooLargeError>())?;
    m.add("StoreFullError", py.get_type::<StoreFullError>())?;
    m.add("IoError", py.get_type::<IoError>())?;
    m.add("CorruptError", py.get_type::<CorruptError>())?;
    m.add("DamagedError", py.get_type::<DamagedError>())?;
    m.add("FormatVersionError", py.get_type::<FormatVersionError>())?;
    m.add("NotAStoreError", py.get_type::<NotAStoreError>())?;
    m.add(
        "NoSuchNamespaceError",
        py.get_type::<NoSuchNamespaceError>(),
    )?;
    m.add(
        "NamespaceExistsError",
        py.get_type::<NamespaceExistsError>(),
    )?;
    m.add("ConfigError", py.get_type::<ConfigError>())?;
    m.add("UnusableError", py.get_type::<UnusableError>())?;
    m.add("BusyError", py.get_type::<BusyError>())?;
    m.add("ClosedError", py.get_type::<ClosedError>())?;
    m.add("InternalError", py.get_type::<InternalError>())?;
    Ok(())
}
