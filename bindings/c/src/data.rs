//! Reads and writes of keys: whole, conditional, by range, in batches.

use std::ffi::{c_int, c_void};

use nvdepot_embed::{Code, DeleteOutcome, Failure, Namespace, WriteOp};

use crate::store::{handle, nvdepot_store};
use crate::{bytes, call, malloc_copy, put_out, required, status, NVDEPOT_OK};

/// `nvdepot_put_if`: write whatever is there.
pub const NVDEPOT_ALWAYS: c_int = 0;
/// `nvdepot_put_if`: write only if the key is absent.
pub const NVDEPOT_IF_ABSENT: c_int = 1;
/// `nvdepot_put_if`: write only if the key is present.
pub const NVDEPOT_IF_PRESENT: c_int = 2;
/// `nvdepot_put_if`: write only if the key's version is the one given.
pub const NVDEPOT_IF_VERSION: c_int = 3;

/// `nvdepot_write_op.op`: put `value` under `key`.
pub const NVDEPOT_OP_PUT: c_int = 0;
/// `nvdepot_write_op.op`: delete `key`.
pub const NVDEPOT_OP_DELETE: c_int = 1;

/// One write of `nvdepot_write_batch`.
#[repr(C)]
pub struct nvdepot_write_op {
    /// `NVDEPOT_OP_PUT` or `NVDEPOT_OP_DELETE`.
    pub op: c_int,
    pub key: *const c_void,
    pub key_len: usize,
    /// Ignored for a delete.
    pub value: *const c_void,
    pub value_len: usize,
}

fn not_found() -> Result<c_int, Failure> {
    status(Code::NotFound, "key not found")
}

/// Reads the value of `key` into `buf` (`cap` bytes); `*value_len` is the
/// value's length. If the buffer is shorter, it holds the value's first
/// `cap` bytes and the code is `NVDEPOT_BUFFER_TOO_SMALL` (call again with
/// `*value_len` bytes). `version` (may be null) receives the value's
/// version for `nvdepot_put_if(NVDEPOT_IF_VERSION)`. `NVDEPOT_NOT_FOUND`
/// if the key is absent. One device read.
#[no_mangle]
pub unsafe extern "C" fn nvdepot_get(
    store: *mut nvdepot_store,
    ns: u32,
    key: *const c_void,
    key_len: usize,
    buf: *mut c_void,
    cap: usize,
    value_len: *mut usize,
    version: *mut u64,
) -> c_int {
    call(|| {
        let value_len = required(value_len, "value_len")?;
        // SAFETY: per the header, key_len bytes at key.
        let key = unsafe { bytes(key, key_len, "key")? };
        if cap > 0 && buf.is_null() {
            return Err(Failure::invalid("buf is null but cap is not 0"));
        }
        // SAFETY: a store from nvdepot_open.
        let h = unsafe { handle(store)? };
        let Some((value, v)) = h.get_versioned(Namespace::from_id(ns), key)? else {
            return not_found();
        };
        let n = value.len().min(cap);
        // SAFETY: buf holds cap >= n writable bytes (checked non-null when
        // cap > 0); value_len checked non-null; version may be null.
        unsafe {
            std::ptr::copy_nonoverlapping(value.as_ptr(), buf.cast::<u8>(), n);
            value_len.write(value.len());
            put_out(version, v);
        }
        if value.len() > cap {
            return status(
                Code::BufferTooSmall,
                &format!("the value is {} bytes; the buffer holds {cap}", value.len()),
            );
        }
        Ok(NVDEPOT_OK)
    })
}

/// Reads the value of `key` into memory nvdepot allocates: `*value`
/// (free it with `nvdepot_free`; never null on success, even for an empty
/// value) and `*value_len`. `version` may be null. `NVDEPOT_NOT_FOUND` if
/// the key is absent.
#[no_mangle]
pub unsafe extern "C" fn nvdepot_get_alloc(
    store: *mut nvdepot_store,
    ns: u32,
    key: *const c_void,
    key_len: usize,
    value: *mut *mut c_void,
    value_len: *mut usize,
    version: *mut u64,
) -> c_int {
    call(|| {
        let (value, value_len) = (required(value, "value")?, required(value_len, "value_len")?);
        // SAFETY: per the header, key_len bytes at key.
        let key = unsafe { bytes(key, key_len, "key")? };
        // SAFETY: a store from nvdepot_open.
        let h = unsafe { handle(store)? };
        let Some((v, ver)) = h.get_versioned(Namespace::from_id(ns), key)? else {
            return not_found();
        };
        let p = malloc_copy(&v)?;
        // SAFETY: checked non-null; version may be null.
        unsafe {
            value.write(p);
            value_len.write(v.len());
            put_out(version, ver);
        }
        Ok(NVDEPOT_OK)
    })
}

/// `NVDEPOT_OK` if `key` is present, `NVDEPOT_NOT_FOUND` if not.
#[no_mangle]
pub unsafe extern "C" fn nvdepot_exists(
    store: *mut nvdepot_store,
    ns: u32,
    key: *const c_void,
    key_len: usize,
) -> c_int {
    call(|| {
        // SAFETY: per the header, key_len bytes at key.
        let key = unsafe { bytes(key, key_len, "key")? };
        // SAFETY: a store from nvdepot_open.
        let h = unsafe { handle(store)? };
        if h.exists(Namespace::from_id(ns), key)? {
            Ok(NVDEPOT_OK)
        } else {
            not_found()
        }
    })
}

/// Inserts or overwrites; durable when it returns (with `sync` on, the
/// default).
#[no_mangle]
pub unsafe extern "C" fn nvdepot_put(
    store: *mut nvdepot_store,
    ns: u32,
    key: *const c_void,
    key_len: usize,
    value: *const c_void,
    value_len: usize,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe {
        nvdepot_put_if(
            store,
            ns,
            key,
            key_len,
            value,
            value_len,
            NVDEPOT_ALWAYS,
            0,
            std::ptr::null_mut(),
        )
    }
}

/// A conditional put: `cond` is `NVDEPOT_ALWAYS`, `NVDEPOT_IF_ABSENT`,
/// `NVDEPOT_IF_PRESENT` or `NVDEPOT_IF_VERSION` (with `version` from a
/// get: a compare-and-swap). `NVDEPOT_CONDITION_FAILED` if the condition
/// did not hold (nothing written). `new_version` (may be null) receives
/// the written value's version.
#[no_mangle]
pub unsafe extern "C" fn nvdepot_put_if(
    store: *mut nvdepot_store,
    ns: u32,
    key: *const c_void,
    key_len: usize,
    value: *const c_void,
    value_len: usize,
    cond: c_int,
    version: u64,
    new_version: *mut u64,
) -> c_int {
    call(|| {
        // SAFETY: per the header, the lengths' bytes at key and value.
        let (key, value) = unsafe {
            (
                bytes(key, key_len, "key")?,
                bytes(value, value_len, "value")?,
            )
        };
        let mode = nvdepot_embed::put_mode(cond, version)?;
        // SAFETY: a store from nvdepot_open.
        let h = unsafe { handle(store)? };
        match h.put_versioned(Namespace::from_id(ns), key, value, mode)? {
            Some(v) => {
                // SAFETY: may be null.
                unsafe { put_out(new_version, v) };
                Ok(NVDEPOT_OK)
            }
            None => status(
                Code::ConditionFailed,
                "the put's condition did not hold; nothing written",
            ),
        }
    })
}

/// Deletes `key` (durable on return); `NVDEPOT_NOT_FOUND` if it was
/// absent.
#[no_mangle]
pub unsafe extern "C" fn nvdepot_delete(
    store: *mut nvdepot_store,
    ns: u32,
    key: *const c_void,
    key_len: usize,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { delete(store, ns, key, key_len, None) }
}

/// Deletes `key` only if its version is `version`:
/// `NVDEPOT_CONDITION_FAILED` if it has another, `NVDEPOT_NOT_FOUND` if it
/// is absent.
#[no_mangle]
pub unsafe extern "C" fn nvdepot_delete_if_version(
    store: *mut nvdepot_store,
    ns: u32,
    key: *const c_void,
    key_len: usize,
    version: u64,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { delete(store, ns, key, key_len, Some(version)) }
}

unsafe fn delete(
    store: *mut nvdepot_store,
    ns: u32,
    key: *const c_void,
    key_len: usize,
    version: Option<u64>,
) -> c_int {
    call(|| {
        // SAFETY: per the header, key_len bytes at key.
        let key = unsafe { bytes(key, key_len, "key")? };
        // SAFETY: a store from nvdepot_open.
        let h = unsafe { handle(store)? };
        match h.delete_versioned(Namespace::from_id(ns), key, version)? {
            DeleteOutcome::Deleted => Ok(NVDEPOT_OK),
            DeleteOutcome::NotFound => not_found(),
            DeleteOutcome::VersionMismatch => status(
                Code::ConditionFailed,
                "the key has another version; nothing deleted",
            ),
        }
    })
}

/// Reads bytes `[offset, offset + len)` of the value into `buf` (clipped
/// to the value's end: `*got` says how many). Reads only what the range
/// needs. `NVDEPOT_NOT_FOUND` if the key is absent.
#[no_mangle]
pub unsafe extern "C" fn nvdepot_get_range(
    store: *mut nvdepot_store,
    ns: u32,
    key: *const c_void,
    key_len: usize,
    offset: u64,
    buf: *mut c_void,
    len: usize,
    got: *mut usize,
) -> c_int {
    call(|| {
        let got = required(got, "got")?;
        // SAFETY: per the header, key_len bytes at key.
        let key = unsafe { bytes(key, key_len, "key")? };
        if len > 0 && buf.is_null() {
            return Err(Failure::invalid("buf is null but len is not 0"));
        }
        // SAFETY: a store from nvdepot_open.
        let h = unsafe { handle(store)? };
        let Some(part) = h.get_range(Namespace::from_id(ns), key, offset, len)? else {
            return not_found();
        };
        debug_assert!(part.len() <= len);
        // SAFETY: buf holds len >= part.len() bytes; got checked non-null.
        unsafe {
            std::ptr::copy_nonoverlapping(part.as_ptr(), buf.cast::<u8>(), part.len().min(len));
            got.write(part.len().min(len));
        }
        Ok(NVDEPOT_OK)
    })
}

/// Writes `data` over bytes `[offset, offset + data_len)` of the value,
/// as Redis's SETRANGE: an absent key is an empty value, and a shorter
/// value is padded with zero bytes. `new_len` (may be null) receives the
/// value's length. Atomic per key, durable on return.
#[no_mangle]
pub unsafe extern "C" fn nvdepot_put_range(
    store: *mut nvdepot_store,
    ns: u32,
    key: *const c_void,
    key_len: usize,
    offset: u64,
    data: *const c_void,
    data_len: usize,
    new_len: *mut u64,
) -> c_int {
    call(|| {
        // SAFETY: per the header, the lengths' bytes at key and data.
        let (key, data) = unsafe { (bytes(key, key_len, "key")?, bytes(data, data_len, "data")?) };
        // SAFETY: a store from nvdepot_open.
        let h = unsafe { handle(store)? };
        let n = h.put_range(Namespace::from_id(ns), key, offset, data)?;
        // SAFETY: may be null.
        unsafe { put_out(new_len, n) };
        Ok(NVDEPOT_OK)
    })
}

/// Applies `count` puts and deletes with one shared flush, atomically:
/// after a crash during the call all of them or none is there. Values
/// must each fit one record and the batch one segment
/// (`NVDEPOT_VALUE_TOO_LARGE` / `NVDEPOT_CONFIG` say by how much). The
/// last operation on a key counts.
#[no_mangle]
pub unsafe extern "C" fn nvdepot_write_batch(
    store: *mut nvdepot_store,
    ns: u32,
    ops: *const nvdepot_write_op,
    count: usize,
) -> c_int {
    call(|| {
        if count > 0 && ops.is_null() {
            return Err(Failure::invalid("ops is null but count is not 0"));
        }
        let raw: &[nvdepot_write_op] = if count == 0 {
            &[]
        } else {
            // SAFETY: per the header, count ops at ops.
            unsafe { std::slice::from_raw_parts(ops, count) }
        };
        let mut batch = Vec::with_capacity(count);
        for (i, op) in raw.iter().enumerate() {
            // SAFETY: per the header, each op's lengths' bytes at its
            // pointers.
            let key = unsafe { bytes(op.key, op.key_len, "key")? };
            batch.push(match op.op {
                NVDEPOT_OP_PUT => WriteOp::Put {
                    key,
                    // SAFETY: as above.
                    value: unsafe { bytes(op.value, op.value_len, "value")? },
                },
                NVDEPOT_OP_DELETE => WriteOp::Delete { key },
                other => {
                    return Err(Failure::invalid(format!(
                        "ops[{i}].op is {other}, not NVDEPOT_OP_PUT or NVDEPOT_OP_DELETE"
                    )))
                }
            });
        }
        // SAFETY: a store from nvdepot_open.
        unsafe { handle(store)? }.write_batch(Namespace::from_id(ns), &batch)?;
        Ok(NVDEPOT_OK)
    })
}

/// Reads `count` keys: `values[i]` / `value_lens[i]` receive key i's
/// value in memory nvdepot allocates (free each with `nvdepot_free`), and
/// `codes[i]` is `NVDEPOT_OK` or `NVDEPOT_NOT_FOUND` (then `values[i]` is
/// null). Index lookups of neighbouring keys overlap. On an error no
/// value is left allocated.
#[no_mangle]
pub unsafe extern "C" fn nvdepot_get_batch(
    store: *mut nvdepot_store,
    ns: u32,
    count: usize,
    keys: *const *const c_void,
    key_lens: *const usize,
    values: *mut *mut c_void,
    value_lens: *mut usize,
    codes: *mut c_int,
) -> c_int {
    call(|| {
        if count == 0 {
            return Ok(NVDEPOT_OK);
        }
        for (p, what) in [
            (keys.cast::<c_void>(), "keys"),
            (key_lens.cast(), "key_lens"),
            (values.cast_const().cast(), "values"),
            (value_lens.cast_const().cast(), "value_lens"),
            (codes.cast_const().cast(), "codes"),
        ] {
            if p.is_null() {
                return Err(Failure::invalid(format!("{what} is null")));
            }
        }
        // SAFETY: per the header, count entries in each array.
        let (ks, ls) = unsafe {
            (
                std::slice::from_raw_parts(keys, count),
                std::slice::from_raw_parts(key_lens, count),
            )
        };
        let mut wanted = Vec::with_capacity(count);
        for (k, l) in ks.iter().zip(ls) {
            // SAFETY: per the header, key_lens[i] bytes at keys[i].
            wanted.push(unsafe { bytes(*k, *l, "a key")? });
        }
        // SAFETY: a store from nvdepot_open.
        let found = unsafe { handle(store)? }.get_many(Namespace::from_id(ns), &wanted)?;
        let mut out = Vec::with_capacity(count);
        for v in &found {
            match v.as_deref().map(malloc_copy).transpose() {
                Ok(p) => out.push(p),
                Err(e) => {
                    for p in out.into_iter().flatten() {
                        // SAFETY: malloc'ed just above, not handed out.
                        unsafe { crate::nvdepot_free(p) };
                    }
                    return Err(e);
                }
            }
        }
        for (i, (p, v)) in out.into_iter().zip(&found).enumerate() {
            // SAFETY: each array holds count entries (checked non-null).
            unsafe {
                values.add(i).write(p.unwrap_or(std::ptr::null_mut()));
                value_lens.add(i).write(v.as_ref().map_or(0, |v| v.len()));
                codes.add(i).write(if v.is_some() {
                    NVDEPOT_OK
                } else {
                    Code::NotFound as c_int
                });
            }
        }
        Ok(NVDEPOT_OK)
    })
}
