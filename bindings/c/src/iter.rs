//! Iteration: NVMKV's begin / next / get-current, resumable by cursor.

use std::ffi::{c_int, c_void};

use nvdepot_embed::{Code, Cursor};

use crate::store::{handle, nvdepot_store, NVDEPOT_ALL_NAMESPACES};
use crate::{call, put_out, required, status, NVDEPOT_OK};

/// An iteration over one namespace or all (opaque). Use it from one
/// thread at a time; free it with `nvdepot_iter_free` before closing the
/// store.
pub struct nvdepot_iter {
    cursor: Cursor,
}

/// Starts an iteration over namespace `ns` (or `NVDEPOT_ALL_NAMESPACES`)
/// at `cursor`: 0 for the beginning, or a value `nvdepot_iter_cursor`
/// gave (in this process or another, before or after a restart). Call
/// `nvdepot_iter_next` to move to the first key. Every key present and
/// unmodified for the whole iteration comes exactly once (keys written
/// meanwhile may or may not); after a resume, keys of the page under way
/// when the cursor was taken may come again. Unordered.
#[no_mangle]
pub unsafe extern "C" fn nvdepot_iter_begin(
    store: *mut nvdepot_store,
    ns: u32,
    cursor: u64,
    out: *mut *mut nvdepot_iter,
) -> c_int {
    call(|| {
        let out = required(out, "out")?;
        // SAFETY: a store from nvdepot_open.
        let h = unsafe { handle(store)? };
        let ns = (ns != NVDEPOT_ALL_NAMESPACES).then_some(ns);
        let it = Box::new(nvdepot_iter {
            cursor: h.cursor(ns, cursor)?,
        });
        // SAFETY: checked non-null.
        unsafe { out.write(Box::into_raw(it)) };
        Ok(NVDEPOT_OK)
    })
}

/// Moves to the next key: `NVDEPOT_OK`, or `NVDEPOT_END` when there is
/// none. Reads a page of keys from the device when the last is used up.
#[no_mangle]
pub unsafe extern "C" fn nvdepot_iter_next(it: *mut nvdepot_iter) -> c_int {
    call(|| {
        // SAFETY: an iterator from nvdepot_iter_begin, used by one thread.
        let it = unsafe { required(it, "iterator")?.as_mut() }.expect("checked");
        if it.cursor.advance()? {
            Ok(NVDEPOT_OK)
        } else {
            status(Code::End, "the iteration is complete")
        }
    })
}

/// The key `nvdepot_iter_next` moved to: its bytes, its value's and its
/// namespace's id (any out-parameter may be null). The pointers stay valid
/// until the iterator's next call. `NVDEPOT_END` before the first
/// `nvdepot_iter_next` or after the last.
#[no_mangle]
pub unsafe extern "C" fn nvdepot_iter_current(
    it: *const nvdepot_iter,
    key: *mut *const c_void,
    key_len: *mut usize,
    value: *mut *const c_void,
    value_len: *mut usize,
    ns: *mut u32,
) -> c_int {
    call(|| {
        // SAFETY: an iterator from nvdepot_iter_begin.
        let it = unsafe { it.as_ref() }
            .ok_or_else(|| nvdepot_embed::Failure::invalid("iterator is null"))?;
        let Some(item) = it.cursor.current() else {
            return status(Code::End, "the iterator is not on a key");
        };
        // SAFETY: each may be null; the pointers point into the item, which
        // lives until the iterator moves.
        unsafe {
            put_out(key, item.key.as_ptr().cast::<c_void>());
            put_out(key_len, item.key.len());
            put_out(value, item.value.as_ptr().cast::<c_void>());
            put_out(value_len, item.value.len());
            put_out(ns, item.namespace.id());
        }
        Ok(NVDEPOT_OK)
    })
}

/// A cursor to resume this iteration from later with
/// `nvdepot_iter_begin`; `NVDEPOT_END` if nothing is left to resume.
#[no_mangle]
pub unsafe extern "C" fn nvdepot_iter_cursor(it: *const nvdepot_iter, cursor: *mut u64) -> c_int {
    call(|| {
        let cursor = required(cursor, "cursor")?;
        // SAFETY: an iterator from nvdepot_iter_begin.
        let it = unsafe { it.as_ref() }
            .ok_or_else(|| nvdepot_embed::Failure::invalid("iterator is null"))?;
        match it.cursor.resume_at() {
            Some(at) => {
                // SAFETY: checked non-null.
                unsafe { cursor.write(at) };
                Ok(NVDEPOT_OK)
            }
            None => status(Code::End, "the iteration is complete"),
        }
    })
}

/// Frees an iterator (null is ignored).
#[no_mangle]
pub unsafe extern "C" fn nvdepot_iter_free(it: *mut nvdepot_iter) {
    if !it.is_null() {
        // SAFETY: from nvdepot_iter_begin, freed once.
        drop(unsafe { Box::from_raw(it) });
    }
}
