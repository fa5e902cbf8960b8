//! nvdepot's Python skin (`nvdepot._nvdepot`, wrapped by the pure-Python
//! package `nvdepot`): the engine through `nvdepot-embed`, with Python's
//! conventions — `with` blocks, `store[key]`, iterators, exceptions by
//! class, bytes in and out, and buffers (NumPy arrays, bytearrays) read
//! and filled in place.
//!
//! Every call that may touch the device releases the GIL, so Python
//! threads run their reads and writes in parallel (and share group
//! commits).

mod buffers;
mod errors;

use std::sync::Arc;

use nvdepot_embed::{
    set_option, Config, Cursor as CoreCursor, Failure, Handle, Namespace as Ns, PutMode, WriteOp,
};
use pyo3::exceptions::{PyKeyError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyList, PyTuple};

use buffers::{Bytes, Writable};
use errors::fail;

/// A namespace of a store (NVMKV's pool): a dict-like map of bytes to
/// bytes. `Store` is the store's default namespace.
#[pyclass(subclass, module = "nvdepot._nvdepot")]
pub struct Namespace {
    handle: Arc<Handle>,
    ns: Ns,
    name: String,
}

impl Namespace {
    /// Runs one of the handle's data operations with the GIL released.
    fn op<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&Handle, Ns) -> Result<R, Failure> + Send,
    ) -> PyResult<R> {
        let (handle, ns) = (&*self.handle, self.ns);
        py.allow_threads(|| f(handle, ns)).map_err(fail)
    }

    /// Runs `f` on the store with the GIL released.
    fn with<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&nvdepot_embed::Store, Ns) -> Result<R, nvdepot_embed::Error> + Send,
    ) -> PyResult<R> {
        let (handle, ns) = (&self.handle, self.ns);
        py.allow_threads(|| handle.with(|s| f(s, ns))).map_err(fail)
    }
}

#[pymethods]
impl Namespace {
    /// The namespace's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// The value of `key`, or `default` if it is absent. One device read.
    #[pyo3(signature = (key, default=None))]
    fn get(&self, py: Python<'_>, key: Bytes, default: Option<PyObject>) -> PyResult<PyObject> {
        let k = key.as_slice();
        match self.op(py, |h, ns| h.get(ns, k))? {
            Some(v) => Ok(PyBytes::new(py, &v).into_any().unbind()),
            None => Ok(default.unwrap_or_else(|| py.None())),
        }
    }

    /// `(value, version)` of `key`, or None; the version is what
    /// `put(..., version=v)` and `delete(..., version=v)` compare.
    fn get_versioned<'py>(
        &self,
        py: Python<'py>,
        key: Bytes,
    ) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let k = key.as_slice();
        let got = self.op(py, |h, ns| h.get_versioned(ns, k))?;
        got.map(|(v, ver)| (PyBytes::new(py, &v), ver).into_pyobject(py))
            .transpose()
    }

    /// Writes `value` under `key`, durable on return. With `only_if`
    /// (`"absent"` or `"present"`) or `version` (a compare-and-swap), the
    /// write happens only if the condition holds. Returns the new
    /// version, or None if the condition failed (nothing written).
    #[pyo3(signature = (key, value, *, only_if=None, version=None))]
    fn put(
        &self,
        py: Python<'_>,
        key: Bytes,
        value: Bytes,
        only_if: Option<&str>,
        version: Option<u64>,
    ) -> PyResult<Option<u64>> {
        let mode = match (only_if, version) {
            (None, None) => PutMode::Upsert,
            (None, Some(v)) => PutMode::IfVersion(v),
            (Some("absent"), None) => PutMode::IfAbsent,
            (Some("present"), None) => PutMode::IfPresent,
            (Some(other), None) => {
                return Err(PyValueError::new_err(format!(
                    "only_if must be \"absent\" or \"present\", not {other:?}"
                )))
            }
            (Some(_), Some(_)) => {
                return Err(PyValueError::new_err("give only_if or version, not both"))
            }
        };
        let (k, v) = (key.as_slice(), value.as_slice());
        self.op(py, |h, ns| h.put_versioned(ns, k, v, mode))
    }

    /// Deletes `key`; False if it was absent (or, with `version`, had
    /// another version).
    #[pyo3(signature = (key, *, version=None))]
    fn delete(&self, py: Python<'_>, key: Bytes, version: Option<u64>) -> PyResult<bool> {
        let k = key.as_slice();
        let outcome = self.op(py, |h, ns| h.delete_versioned(ns, k, version))?;
        Ok(outcome == nvdepot_embed::DeleteOutcome::Deleted)
    }

    /// Bytes `[offset, offset + length)` of the value (clipped to its end),
    /// or None if the key is absent. Reads only what the range needs.
    fn get_range<'py>(
        &self,
        py: Python<'py>,
        key: Bytes,
        offset: u64,
        length: usize,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let k = key.as_slice();
        let got = self.op(py, |h, ns| h.get_range(ns, k, offset, length))?;
        Ok(got.map(|v| PyBytes::new(py, &v)))
    }

    /// Reads bytes of the value from `offset` into `buffer` (any writable
    /// C-contiguous buffer: a bytearray, a NumPy array, a memoryview of
    /// either), filling it from its start; returns how many bytes were
    /// read (fewer than the buffer holds at the value's end), or None if
    /// the key is absent.
    fn get_range_into(
        &self,
        py: Python<'_>,
        key: Bytes,
        offset: u64,
        buffer: &Bound<'_, PyAny>,
    ) -> PyResult<Option<usize>> {
        let mut out = Writable::new(buffer)?;
        let k = key.as_slice();
        let len = out.len();
        let got = self.op(py, |h, ns| h.get_range(ns, k, offset, len))?;
        Ok(got.map(|part| out.fill(&part)))
    }

    /// Writes `data` (bytes or any C-contiguous buffer) over the value
    /// from `offset`, as Redis's SETRANGE: an absent key is empty, a
    /// shorter value is padded with zero bytes. Returns the new length.
    fn put_range(&self, py: Python<'_>, key: Bytes, offset: u64, data: Bytes) -> PyResult<u64> {
        let (k, d) = (key.as_slice(), data.as_slice());
        self.op(py, |h, ns| h.put_range(ns, k, offset, d))
    }

    /// The values of `keys` (None for an absent key), their index lookups
    /// overlapped.
    fn get_many<'py>(&self, py: Python<'py>, keys: Vec<Bytes>) -> PyResult<Bound<'py, PyList>> {
        let ks: Vec<&[u8]> = keys.iter().map(|k| k.as_slice()).collect();
        let got = self.op(py, |h, ns| h.get_many(ns, &ks))?;
        let items: Vec<PyObject> = got
            .into_iter()
            .map(|v| v.map_or_else(|| py.None(), |v| PyBytes::new(py, &v).into_any().unbind()))
            .collect();
        PyList::new(py, items)
    }

    /// Applies `(key, value)` puts and `(key, None)` deletes atomically
    /// with one shared flush: after a crash all or none are there.
    fn write_batch(&self, py: Python<'_>, ops: Vec<(Bytes, Option<Bytes>)>) -> PyResult<()> {
        let batch: Vec<WriteOp<'_>> = ops
            .iter()
            .map(|(k, v)| match v {
                Some(v) => WriteOp::Put {
                    key: k.as_slice(),
                    value: v.as_slice(),
                },
                None => WriteOp::Delete { key: k.as_slice() },
            })
            .collect();
        self.op(py, |h, ns| h.write_batch(ns, &batch))
    }

    /// Keys in the namespace.
    fn count(&self, py: Python<'_>) -> PyResult<u64> {
        let id = self.ns.id();
        self.with(py, |s, _| {
            nvdepot_embed::existing(s, id).map(|ns| s.count(ns))
        })
    }

    /// Deletes every key (durable on return).
    fn clear(&self, py: Python<'_>) -> PyResult<()> {
        self.op(py, |h, ns| h.clear(ns))
    }

    /// A resumable walk over `(key, value)` pairs, from `cursor` (0, or a
    /// walk's `cursor` attribute). Unordered; every key present and
    /// unmodified for the whole walk comes once.
    #[pyo3(signature = (cursor=0))]
    fn scan(&self, cursor: u64) -> PyResult<Scan> {
        let store = self.handle.share().map_err(fail)?;
        Ok(Scan {
            cursor: CoreCursor::new(store, Some(self.ns), cursor),
            shape: Shape::Items,
            names: None,
        })
    }

    /// The keys, as an iterator (a walk; see `scan`).
    fn keys(&self) -> PyResult<Scan> {
        Ok(Scan {
            shape: Shape::Keys,
            ..self.scan(0)?
        })
    }

    /// The values, as an iterator.
    fn values(&self) -> PyResult<Scan> {
        Ok(Scan {
            shape: Shape::Values,
            ..self.scan(0)?
        })
    }

    /// `(key, value)` pairs, as an iterator.
    fn items(&self) -> PyResult<Scan> {
        self.scan(0)
    }

    fn __iter__(&self) -> PyResult<Scan> {
        self.keys()
    }

    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(self.count(py)? as usize)
    }

    fn __contains__(&self, py: Python<'_>, key: Bytes) -> PyResult<bool> {
        let k = key.as_slice();
        self.op(py, |h, ns| h.exists(ns, k))
    }

    fn __getitem__<'py>(&self, py: Python<'py>, key: Bytes) -> PyResult<Bound<'py, PyBytes>> {
        let k = key.as_slice();
        match self.op(py, |h, ns| h.get(ns, k))? {
            Some(v) => Ok(PyBytes::new(py, &v)),
            None => Err(PyKeyError::new_err(PyBytes::new(py, k).unbind())),
        }
    }

    fn __setitem__(&self, py: Python<'_>, key: Bytes, value: Bytes) -> PyResult<()> {
        let (k, v) = (key.as_slice(), value.as_slice());
        self.op(py, |h, ns| h.put(ns, k, v))
    }

    fn __delitem__(&self, py: Python<'_>, key: Bytes) -> PyResult<()> {
        let k = key.as_slice();
        if self.op(py, |h, ns| h.delete(ns, k))? {
            Ok(())
        } else {
            Err(PyKeyError::new_err(PyBytes::new(py, k).unbind()))
        }
    }

    fn __repr__(&self) -> String {
        format!("<nvdepot.Namespace {:?}>", self.name)
    }
}

/// An open store; itself its default namespace. Any thread may use it.
#[pyclass(extends = Namespace, module = "nvdepot._nvdepot")]
pub struct Store {
    path: String,
}

/// An option's Python value as the text `set_option` takes.
fn option_text(name: &str, value: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(b) = value.downcast::<PyBool>() {
        return Ok(b.is_true().to_string());
    }
    if let Ok(i) = value.extract::<u64>() {
        return Ok(i.to_string());
    }
    if let Ok(s) = value.extract::<String>() {
        return Ok(s);
    }
    Err(PyTypeError::new_err(format!(
        "option {name}: expected a bool, a non-negative int or a str, got {}",
        value.get_type().name()?
    )))
}

#[pymethods]
impl Store {
    /// Opens the store at `path` (a directory of data files, a data file
    /// or a block device). Options are keyword arguments, as
    /// `nvdepot.OPTIONS` lists them: `create_bytes="1G"` creates a store
    /// when there is none; `sync=False` acknowledges writes before the
    /// device flush, and so on.
    #[new]
    #[pyo3(signature = (path, **options))]
    fn open(
        py: Python<'_>,
        path: std::path::PathBuf,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<(Store, Namespace)> {
        let mut opts = Config::default();
        if let Some(options) = options {
            for (name, value) in options.iter() {
                let name: String = name.extract()?;
                let text = option_text(&name, &value)?;
                set_option(&mut opts, &name, &text).map_err(fail)?;
            }
        }
        let handle = py
            .allow_threads(|| Handle::open(&path, &opts))
            .map_err(fail)?;
        let ns = handle.with(|s| Ok(s.default_namespace())).map_err(fail)?;
        let path = path.display().to_string();
        Ok((
            Store { path },
            Namespace {
                handle: Arc::new(handle),
                ns,
                name: "default".into(),
            },
        ))
    }

    /// Namespace `name`; created when `create` is true and it is absent
    /// (else NoSuchNamespaceError).
    #[pyo3(signature = (name, *, create=false))]
    fn namespace(
        self_: PyRef<'_, Self>,
        py: Python<'_>,
        name: String,
        create: bool,
    ) -> PyResult<Namespace> {
        let handle = self_.as_super().handle.clone();
        let ns = py
            .allow_threads(|| {
                handle.with(|s| match s.namespace(&name) {
                    Some(ns) => Ok(ns),
                    None if create => s.create_namespace(&name),
                    None => Err(nvdepot_embed::Error::NoSuchNamespace(name.clone())),
                })
            })
            .map_err(fail)?;
        Ok(Namespace { handle, ns, name })
    }

    /// Drops namespace `name` and its keys (durable on return).
    fn drop_namespace(self_: PyRef<'_, Self>, py: Python<'_>, name: String) -> PyResult<()> {
        self_.as_super().op(py, |h, _| h.drop_namespace(&name))
    }

    /// `{name: keys}` of every namespace.
    fn namespaces<'py>(self_: PyRef<'py, Self>, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let all = self_.as_super().with(py, |s, _| Ok(s.namespaces()))?;
        let d = PyDict::new(py);
        for (name, _, keys) in all {
            d.set_item(name, keys)?;
        }
        Ok(d)
    }

    /// A walk over every namespace: `(namespace name, key, value)`.
    #[pyo3(signature = (cursor=0))]
    fn scan_all(self_: PyRef<'_, Self>, py: Python<'_>, cursor: u64) -> PyResult<Scan> {
        let base = self_.as_super();
        let names = base.with(py, |s, _| Ok(s.namespaces()))?;
        let store = base.handle.share().map_err(fail)?;
        Ok(Scan {
            cursor: CoreCursor::new(store, None, cursor),
            shape: Shape::Triples,
            names: Some(names.into_iter().map(|(n, ns, _)| (ns, n)).collect()),
        })
    }

    /// Counters and gauges, as a dict.
    fn stats<'py>(self_: PyRef<'py, Self>, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let base = self_.as_super();
        let s = base.with(py, |s, _| Ok(s.stats()))?;
        let (hits, misses) = base.handle.cache_counters().unwrap_or_default();
        let d = PyDict::new(py);
        for (k, v) in [
            ("keys", s.keys),
            ("namespaces", s.namespaces),
            ("capacity_bytes", s.capacity_bytes),
            ("segment_bytes", s.segment_bytes),
            ("segments_total", s.segments_total),
            ("segments_free", s.segments_free),
            ("live_bytes", s.live_bytes),
            ("gets", s.gets),
            ("puts", s.puts),
            ("deletes", s.deletes),
            ("user_bytes_written", s.user_bytes_written),
            ("device_bytes_written", s.device_bytes_written),
            ("gc_bytes_written", s.gc_bytes_written),
            ("evictions", s.evictions),
            ("flushes", s.flushes),
            ("index_memory_bytes", s.index_memory_bytes),
            ("value_cache_hits", hits),
            ("value_cache_misses", misses),
        ] {
            d.set_item(k, v)?;
        }
        d.set_item("write_amplification", s.write_amplification)?;
        Ok(d)
    }

    /// Makes every write acknowledged so far durable (with sync=False).
    fn flush(self_: PyRef<'_, Self>, py: Python<'_>) -> PyResult<()> {
        self_.as_super().with(py, |s, _| s.flush())
    }

    /// Writes everything out, saves the index checkpoint and closes; later
    /// calls raise ClosedError. BusyError while walks of it are alive.
    fn close(self_: PyRef<'_, Self>, py: Python<'_>) -> PyResult<()> {
        let handle = self_.as_super().handle.clone();
        py.allow_threads(|| handle.close()).map_err(fail)
    }

    /// Whether the store is closed.
    #[getter]
    fn closed(self_: PyRef<'_, Self>) -> bool {
        self_.as_super().handle.is_closed()
    }

    /// The path it was opened at.
    #[getter]
    fn path(&self) -> &str {
        &self.path
    }

    fn __enter__(self_: PyRef<'_, Self>) -> PyRef<'_, Self> {
        self_
    }

    #[pyo3(signature = (_ty=None, _value=None, _tb=None))]
    fn __exit__(
        self_: PyRef<'_, Self>,
        py: Python<'_>,
        _ty: Option<PyObject>,
        _value: Option<PyObject>,
        _tb: Option<PyObject>,
    ) -> PyResult<bool> {
        Store::close(self_, py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!("<nvdepot.Store {:?}>", self.path)
    }
}

#[derive(Clone, Copy)]
enum Shape {
    Keys,
    Values,
    Items,
    Triples,
}

/// A walk (an iterator). `cursor` is where to resume it from later
/// (`scan(cursor)`), or None once it is complete.
#[pyclass(module = "nvdepot._nvdepot")]
pub struct Scan {
    cursor: CoreCursor,
    shape: Shape,
    /// Namespace names of a walk over all of them.
    names: Option<std::collections::HashMap<Ns, String>>,
}

#[pymethods]
impl Scan {
    fn __iter__(self_: PyRef<'_, Self>) -> PyRef<'_, Self> {
        self_
    }

    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<PyObject>> {
        let cursor = &mut self.cursor;
        if !py.allow_threads(|| cursor.advance()).map_err(fail)? {
            return Ok(None);
        }
        let item = self.cursor.current().expect("advance moved to a key");
        let key = PyBytes::new(py, &item.key);
        let value = || PyBytes::new(py, &item.value);
        Ok(Some(match self.shape {
            Shape::Keys => key.into_any().unbind(),
            Shape::Values => value().into_any().unbind(),
            Shape::Items => (key, value()).into_pyobject(py)?.into_any().unbind(),
            Shape::Triples => {
                let name = self
                    .names
                    .as_ref()
                    .and_then(|n| n.get(&item.namespace).cloned())
                    .unwrap_or_default();
                (name, key, value()).into_pyobject(py)?.into_any().unbind()
            }
        }))
    }

    /// Where to resume this walk from, or None when it is complete.
    #[getter]
    fn cursor(&self) -> Option<u64> {
        self.cursor.resume_at()
    }
}

/// Removes the store at `path` (not open): its data files, then the
/// directory if empty. Files that are not a store's are left alone.
#[pyfunction]
fn destroy(py: Python<'_>, path: std::path::PathBuf) -> PyResult<()> {
    py.allow_threads(|| nvdepot_embed::destroy(&path))
        .map_err(fail)
}

#[pymodule]
fn _nvdepot(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Namespace>()?;
    m.add_class::<Store>()?;
    m.add_class::<Scan>()?;
    m.add_function(wrap_pyfunction!(destroy, m)?)?;
    let options = PyDict::new(m.py());
    for (name, doc) in nvdepot_embed::option_names() {
        options.set_item(name, doc)?;
    }
    m.add("OPTIONS", options)?;
    errors::register(m)?;
    Ok(())
}
