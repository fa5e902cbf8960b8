//! Bytes in and buffers out without extra copies: a key or value is
//! borrowed from the `bytes` object or the buffer (a NumPy array, a
//! bytearray) it arrives in, and range reads fill the caller's buffer.
//! Both are used with the GIL released, which is why they hold raw
//! pointers kept valid by their owners.

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyMemoryView, PyString};

/// What keeps a [`Bytes`]' memory alive and in place.
enum Owner {
    /// An immutable `bytes` object.
    Object(#[allow(dead_code)] Py<PyBytes>),
    /// A `str`'s UTF-8 encoding.
    Vec(#[allow(dead_code)] Vec<u8>),
    /// An exported buffer: the exporter keeps it in place (a bytearray
    /// cannot resize) until the export is released.
    Buffer(#[allow(dead_code)] PyBuffer<u8>),
}

/// A key or value passed in: `bytes`, `str` (as UTF-8), or any
/// C-contiguous buffer.
pub(crate) struct Bytes {
    _owner: Owner,
    ptr: *const u8,
    len: usize,
}

// SAFETY: the pointer is into memory the owner keeps alive and in place;
// it is only read.
unsafe impl Send for Bytes {}
// SAFETY: as above.
unsafe impl Sync for Bytes {}

impl Bytes {
    pub(crate) fn as_slice(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: `len` readable bytes at `ptr`, kept alive by `_owner`.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

/// A buffer of bytes: as exported, or through `memoryview(obj).cast("B")`
/// for one of other items (a NumPy float array).
fn byte_buffer(obj: &Bound<'_, PyAny>) -> PyResult<PyBuffer<u8>> {
    if let Ok(b) = PyBuffer::<u8>::get(obj) {
        return Ok(b);
    }
    let view = PyMemoryView::from(obj).map_err(|_| {
        PyTypeError::new_err(format!(
            "expected bytes, str or a buffer, got {}",
            type_name(obj)
        ))
    })?;
    let bytes = view.call_method1("cast", ("B",))?;
    PyBuffer::<u8>::get(&bytes)
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_default()
}

impl<'py> FromPyObject<'py> for Bytes {
    fn extract_bound(obj: &Bound<'py, PyAny>) -> PyResult<Self> {
        if let Ok(b) = obj.downcast::<PyBytes>() {
            let s = b.as_bytes();
            return Ok(Bytes {
                ptr: s.as_ptr(),
                len: s.len(),
                _owner: Owner::Object(b.clone().unbind()),
            });
        }
        if let Ok(s) = obj.downcast::<PyString>() {
            let v = s.to_str()?.as_bytes().to_vec();
            return Ok(Bytes {
                ptr: v.as_ptr(),
                len: v.len(),
                _owner: Owner::Vec(v),
            });
        }
        let buf = byte_buffer(obj)?;
        if !buf.is_c_contiguous() {
            return Err(PyTypeError::new_err("the buffer is not C-contiguous"));
        }
        Ok(Bytes {
            ptr: buf.buf_ptr() as *const u8,
            len: buf.len_bytes(),
            _owner: Owner::Buffer(buf),
        })
    }
}

/// A writable, C-contiguous buffer a range read fills.
pub(crate) struct Writable {
    buf: PyBuffer<u8>,
}

impl Writable {
    pub(crate) fn new(obj: &Bound<'_, PyAny>) -> PyResult<Writable> {
        let buf = byte_buffer(obj)?;
        if buf.readonly() {
            return Err(PyTypeError::new_err(format!(
                "{} is read-only; pass a writable buffer",
                type_name(obj)
            )));
        }
        if !buf.is_c_contiguous() {
            return Err(PyTypeError::new_err("the buffer is not C-contiguous"));
        }
        Ok(Writable { buf })
    }

    pub(crate) fn len(&self) -> usize {
        self.buf.len_bytes()
    }

    /// Copies `part` to the buffer's start; how many bytes.
    pub(crate) fn fill(&mut self, part: &[u8]) -> usize {
        let n = part.len().min(self.len());
        // SAFETY: a writable, C-contiguous buffer of len() bytes, exported
        // (so kept in place) while `self.buf` lives.
        unsafe { std::ptr::copy_nonoverlapping(part.as_ptr(), self.buf.buf_ptr() as *mut u8, n) };
        n
    }
}
