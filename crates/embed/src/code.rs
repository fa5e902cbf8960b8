//! Error codes: one per thing a caller can act on differently.

use std::ffi::CStr;

use nvdepot_engine::Error;

/// What went wrong (or what an operation found), as a number that stays
/// the same across releases: the C API's return values, and the key to
/// Python's and Java's exception classes. 0 is success.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Code {
    /// Success.
    Ok = 0,
    /// The key is absent (get, delete, get_range).
    NotFound = 1,
    /// A conditional write's condition did not hold; nothing was written.
    ConditionFailed = 2,
    /// The caller's buffer is shorter than the value; the needed length is
    /// reported and the buffer holds the value's first bytes.
    BufferTooSmall = 3,
    /// An iteration has no more keys.
    End = 4,
    /// A bad argument: a null pointer, a name that is not UTF-8, an
    /// unknown option or a value it does not take.
    InvalidArgument = 10,
    /// The key is longer than the store's limit.
    KeyTooLarge = 11,
    /// The value (or the end of a range write) is past the store's limit,
    /// or too long for the operation (batches take one-record values).
    ValueTooLarge = 12,
    /// No free space that garbage collection can make.
    StoreFull = 13,
    /// A device operation failed (EIO, ENOSPC, a failed flush).
    Io = 14,
    /// A record failed its checksum.
    Corrupt = 15,
    /// The store holds damage to acknowledged data (open with `salvage`).
    Damaged = 16,
    /// The store was written by another format version.
    FormatVersion = 17,
    /// The path holds no nvdepot store (or one not created: give
    /// `create_bytes`).
    NotAStore = 18,
    /// No namespace of that name or id.
    NoSuchNamespace = 19,
    /// A namespace of that name exists.
    NamespaceExists = 20,
    /// Options the store cannot work with.
    Config = 21,
    /// The store failed (a background thread, a failed flush); reopen it.
    Unusable = 22,
    /// The store cannot close yet: cursors still hold it.
    Busy = 23,
    /// The store was closed.
    Closed = 24,
    /// A bug in nvdepot (a panic, caught at the boundary).
    Internal = 99,
}

impl Code {
    /// The code's name, as the C header spells it without its prefix,
    /// NUL-terminated for the C API's `nvdepot_strerror`.
    pub fn c_name(self) -> &'static CStr {
        match self {
            Code::Ok => c"OK",
            Code::NotFound => c"NOT_FOUND",
            Code::ConditionFailed => c"CONDITION_FAILED",
            Code::BufferTooSmall => c"BUFFER_TOO_SMALL",
            Code::End => c"END",
            Code::InvalidArgument => c"INVALID_ARGUMENT",
            Code::KeyTooLarge => c"KEY_TOO_LARGE",
            Code::ValueTooLarge => c"VALUE_TOO_LARGE",
            Code::StoreFull => c"STORE_FULL",
            Code::Io => c"IO",
            Code::Corrupt => c"CORRUPT",
            Code::Damaged => c"DAMAGED",
            Code::FormatVersion => c"FORMAT_VERSION",
            Code::NotAStore => c"NOT_A_STORE",
            Code::NoSuchNamespace => c"NO_SUCH_NAMESPACE",
            Code::NamespaceExists => c"NAMESPACE_EXISTS",
            Code::Config => c"CONFIG",
            Code::Unusable => c"UNUSABLE",
            Code::Busy => c"BUSY",
            Code::Closed => c"CLOSED",
            Code::Internal => c"INTERNAL",
        }
    }

    /// The code's name, as the C header spells it without its prefix.
    pub fn name(self) -> &'static str {
        self.c_name().to_str().expect("ASCII names")
    }

    /// Every code, for the skins' tables and their tests.
    pub const ALL: [Code; 21] = [
        Code::Ok,
        Code::NotFound,
        Code::ConditionFailed,
        Code::BufferTooSmall,
        Code::End,
        Code::InvalidArgument,
        Code::KeyTooLarge,
        Code::ValueTooLarge,
        Code::StoreFull,
        Code::Io,
        Code::Corrupt,
        Code::Damaged,
        Code::FormatVersion,
        Code::NotAStore,
        Code::NoSuchNamespace,
        Code::NamespaceExists,
        Code::Config,
        Code::Unusable,
        Code::Busy,
        Code::Closed,
        Code::Internal,
    ];
}

/// An error crossing the boundary: its code and a message saying what
/// happened with the numbers needed to act on it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    pub code: Code,
    pub message: String,
}

impl Failure {
    pub fn new(code: Code, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
        }
    }

    /// A bad argument.
    pub fn invalid(message: impl Into<String>) -> Failure {
        Failure::new(Code::InvalidArgument, message)
    }

    /// A panic caught at a binding's boundary (a bug in nvdepot), as
    /// [`Code::Internal`] with the panic's message: what the C and JNI
    /// entry points report instead of unwinding into their caller.
    pub fn from_panic(payload: &(dyn std::any::Any + Send)) -> Failure {
        let what = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        Failure::new(
            Code::Internal,
            format!("internal error in nvdepot (a bug; please report it): {what}"),
        )
    }
}

#[cfg(test)]
#[test]
fn a_caught_panic_is_internal_with_its_message() {
    let payload = std::panic::catch_unwind(|| panic!("boom {}", 7)).unwrap_err();
    let f = Failure::from_panic(&*payload);
    assert_eq!(f.code, Code::Internal);
    assert!(f.message.ends_with("boom 7"), "{}", f.message);
    assert_eq!(Code::NotAStore.name(), "NOT_A_STORE");
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        let code = match &e {
            Error::Io(_) => Code::Io,
            Error::KeyTooLarge { .. } => Code::KeyTooLarge,
            Error::ValueTooLarge { .. } | Error::TooLargeFor { .. } => Code::ValueTooLarge,
            Error::StoreFull { .. } => Code::StoreFull,
            Error::Corrupt { .. } => Code::Corrupt,
            Error::Damaged { .. } => Code::Damaged,
            Error::FormatVersion { .. } => Code::FormatVersion,
            Error::NotAStore { .. } => Code::NotAStore,
            Error::NoSuchNamespace(_) => Code::NoSuchNamespace,
            Error::NamespaceExists(_) => Code::NamespaceExists,
            Error::Config(_) => Code::Config,
            Error::Unusable(_) => Code::Unusable,
        };
        Failure::new(code, e.to_string())
    }
}
