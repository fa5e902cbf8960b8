//! nvdepot's C API: `libnvdepot.so` / `libnvdepot.a` with
//! `include/nvdepot.h`, generated from this source by cbindgen.
//!
//! Conventions (as RocksDB's and SQLite's C APIs lead users to expect):
//! - every call returns an `int` code: `NVDEPOT_OK` (0), a status a caller
//!   branches on (`NVDEPOT_NOT_FOUND`, `NVDEPOT_CONDITION_FAILED`,
//!   `NVDEPOT_BUFFER_TOO_SMALL`, `NVDEPOT_END`), or an error; the text of
//!   the thread's last non-OK code is `nvdepot_errmsg()`;
//! - nothing aborts across the boundary: null pointers and bad arguments
//!   are `NVDEPOT_INVALID_ARGUMENT`, and a panic inside nvdepot (a bug) is
//!   caught and returned as `NVDEPOT_INTERNAL`;
//! - a store handle is shared by any number of threads; iterators are used
//!   by one thread at a time;
//! - who owns what: keys and values passed in stay the caller's (copied
//!   before the call returns); memory nvdepot allocates for the caller
//!   (`nvdepot_get_alloc`, `nvdepot_get_batch`, `nvdepot_ns_list`) is
//!   freed with `nvdepot_free` / `nvdepot_ns_list_free`; pointers an
//!   iterator hands out stay valid until its next call.

#![allow(non_camel_case_types)]
#![allow(clippy::missing_safety_doc)] // the header documents each call's contract

mod data;
mod iter;
mod store;

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use nvdepot_embed::{Code, Failure};

pub use data::*;
pub use iter::*;
pub use store::*;

/// Success.
pub const NVDEPOT_OK: c_int = 0;
/// The key is absent.
pub const NVDEPOT_NOT_FOUND: c_int = 1;
/// A conditional write's condition did not hold; nothing was written.
pub const NVDEPOT_CONDITION_FAILED: c_int = 2;
/// The buffer is shorter than the value: it holds the value's first bytes
/// and the length out-parameter says how long the value is.
pub const NVDEPOT_BUFFER_TOO_SMALL: c_int = 3;
/// An iteration has no more keys.
pub const NVDEPOT_END: c_int = 4;
/// A null pointer, a name that is not UTF-8, an unknown option or a value
/// it does not take.
pub const NVDEPOT_INVALID_ARGUMENT: c_int = 10;
/// The key is longer than the store's limit.
pub const NVDEPOT_KEY_TOO_LARGE: c_int = 11;
/// The value is too long for the store or the operation.
pub const NVDEPOT_VALUE_TOO_LARGE: c_int = 12;
/// No free space that garbage collection can make.
pub const NVDEPOT_STORE_FULL: c_int = 13;
/// A device operation failed.
pub const NVDEPOT_IO: c_int = 14;
/// A record failed its checksum.
pub const NVDEPOT_CORRUPT: c_int = 15;
/// The store holds damage to acknowledged data (open with `salvage`).
pub const NVDEPOT_DAMAGED: c_int = 16;
/// The store was written by another format version.
pub const NVDEPOT_FORMAT_VERSION: c_int = 17;
/// No store at the path (set `create_bytes` to create one).
pub const NVDEPOT_NOT_A_STORE: c_int = 18;
/// No such namespace.
pub const NVDEPOT_NO_SUCH_NAMESPACE: c_int = 19;
/// The namespace exists.
pub const NVDEPOT_NAMESPACE_EXISTS: c_int = 20;
/// Options the store cannot work with.
pub const NVDEPOT_CONFIG: c_int = 21;
/// The store failed; close and reopen it.
pub const NVDEPOT_UNUSABLE: c_int = 22;
/// The store cannot close while iterators use it.
pub const NVDEPOT_BUSY: c_int = 23;
/// The store was closed.
pub const NVDEPOT_CLOSED: c_int = 24;
/// A bug in nvdepot, caught at the boundary.
pub const NVDEPOT_INTERNAL: c_int = 99;

thread_local! {
    /// The message of this thread's last non-OK code.
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_message(message: &str) {
    let text = CString::new(message.replace('\0', "\\0")).unwrap_or_default();
    LAST_ERROR.with(|m| *m.borrow_mut() = text);
}

/// The message of the calling thread's last call that returned a code
/// other than `NVDEPOT_OK` (empty before any). Valid until the thread's
/// next nvdepot call; never null.
#[no_mangle]
pub extern "C" fn nvdepot_errmsg() -> *const c_char {
    LAST_ERROR.with(|m| m.borrow().as_ptr())
}

/// The name of a code (`"NOT_FOUND"`), or `"UNKNOWN"`. Static; never null.
#[no_mangle]
pub extern "C" fn nvdepot_strerror(code: c_int) -> *const c_char {
    let name: &'static CStr = match Code::ALL.iter().find(|c| **c as c_int == code) {
        Some(c) => c.c_name(),
        None => c"UNKNOWN",
    };
    name.as_ptr()
}

/// nvdepot's version (`"0.1.0"`). Static; never null.
#[no_mangle]
pub extern "C" fn nvdepot_version() -> *const c_char {
    const VERSION: &CStr =
        match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
            Ok(v) => v,
            Err(_) => panic!("version"),
        };
    VERSION.as_ptr()
}

/// Frees memory nvdepot allocated for the caller (a value of
/// `nvdepot_get_alloc` or `nvdepot_get_batch`). Null is ignored. It is
/// `malloc`ed memory: `free` does the same.
#[no_mangle]
pub unsafe extern "C" fn nvdepot_free(ptr: *mut c_void) {
    // SAFETY: the caller passes memory nvdepot allocated with malloc (or
    // null, which free ignores).
    unsafe { libc_free(ptr) }
}

extern "C" {
    #[link_name = "malloc"]
    fn libc_malloc(size: usize) -> *mut c_void;
    #[link_name = "free"]
    fn libc_free(ptr: *mut c_void);
}

/// Copies `bytes` into memory from `malloc` (the caller frees it with
/// `nvdepot_free`); one byte at least, so an empty value is not null.
fn malloc_copy(bytes: &[u8]) -> Result<*mut c_void, Failure> {
    // SAFETY: malloc of a non-zero size; checked for null below.
    let p = unsafe { libc_malloc(bytes.len().max(1)) };
    if p.is_null() {
        return Err(Failure::new(
            Code::Internal,
            format!("out of memory allocating {} bytes", bytes.len()),
        ));
    }
    // SAFETY: p holds at least bytes.len() bytes and does not overlap.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), p.cast::<u8>(), bytes.len()) };
    Ok(p)
}

/// Runs one call: its code, with the thread's message set for any code
/// but OK, and a panic caught (never unwinding into C).
fn call(f: impl FnOnce() -> Result<c_int, Failure>) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(code)) => code,
        Ok(Err(failure)) => {
            set_message(&failure.message);
            failure.code as c_int
        }
        Err(panic) => {
            set_message(&Failure::from_panic(&*panic).message);
            NVDEPOT_INTERNAL
        }
    }
}

/// A status that is not an error but is not OK either, with its message.
fn status(code: Code, message: &str) -> Result<c_int, Failure> {
    set_message(message);
    Ok(code as c_int)
}

/// `len` bytes at `ptr` (any pointer, null included, when `len` is 0).
///
/// # Safety
/// If `len > 0`, `ptr` must point to `len` readable bytes that live for
/// the call.
unsafe fn bytes<'a>(ptr: *const c_void, len: usize, what: &str) -> Result<&'a [u8], Failure> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(Failure::invalid(format!(
            "{what} is null but its length is {len}"
        )));
    }
    // SAFETY: the caller's contract above.
    Ok(unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) })
}

/// A NUL-terminated UTF-8 string.
///
/// # Safety
/// `ptr` must be null or point to a NUL-terminated string.
unsafe fn text<'a>(ptr: *const c_char, what: &str) -> Result<&'a str, Failure> {
    if ptr.is_null() {
        return Err(Failure::invalid(format!("{what} is null")));
    }
    // SAFETY: the caller's contract above.
    unsafe { CStr::from_ptr(ptr) }
        .to_str()
        .map_err(|_| Failure::invalid(format!("{what} is not UTF-8")))
}

/// `*out = value` for an optional out-parameter.
///
/// # Safety
/// `out` must be null or valid for a write of `T`.
unsafe fn put_out<T>(out: *mut T, value: T) {
    if !out.is_null() {
        // SAFETY: the caller's contract above.
        unsafe { out.write(value) }
    }
}

/// A required out-parameter.
fn required<T>(out: *mut T, what: &str) -> Result<*mut T, Failure> {
    if out.is_null() {
        Err(Failure::invalid(format!("{what} is null")))
    } else {
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_constants_are_the_cores_codes() {
        let constants = [
            NVDEPOT_OK,
            NVDEPOT_NOT_FOUND,
            NVDEPOT_CONDITION_FAILED,
            NVDEPOT_BUFFER_TOO_SMALL,
            NVDEPOT_END,
            NVDEPOT_INVALID_ARGUMENT,
            NVDEPOT_KEY_TOO_LARGE,
            NVDEPOT_VALUE_TOO_LARGE,
            NVDEPOT_STORE_FULL,
            NVDEPOT_IO,
            NVDEPOT_CORRUPT,
            NVDEPOT_DAMAGED,
            NVDEPOT_FORMAT_VERSION,
            NVDEPOT_NOT_A_STORE,
            NVDEPOT_NO_SUCH_NAMESPACE,
            NVDEPOT_NAMESPACE_EXISTS,
            NVDEPOT_CONFIG,
            NVDEPOT_UNUSABLE,
            NVDEPOT_BUSY,
            NVDEPOT_CLOSED,
            NVDEPOT_INTERNAL,
        ];
        use nvdepot_embed::{put_mode, PutMode};
        assert_eq!(put_mode(NVDEPOT_ALWAYS, 7).unwrap(), PutMode::Upsert);
        assert_eq!(put_mode(NVDEPOT_IF_ABSENT, 7).unwrap(), PutMode::IfAbsent);
        assert_eq!(put_mode(NVDEPOT_IF_PRESENT, 7).unwrap(), PutMode::IfPresent);
        assert_eq!(
            put_mode(NVDEPOT_IF_VERSION, 7).unwrap(),
            PutMode::IfVersion(7)
        );
        for (c, k) in Code::ALL.iter().zip(constants) {
            assert_eq!(*c as c_int, k, "{c:?}");
        }
    }
}
