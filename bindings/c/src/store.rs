//! Opening, closing and destroying a store; its options, namespaces and
//! statistics.

use std::ffi::{c_char, c_int, c_void};
use std::path::Path;

use nvdepot_embed::{set_option, Code, Config, Failure, Handle, Namespace};

use crate::{call, malloc_copy, required, text, NVDEPOT_OK};

/// An open store (opaque). Any number of threads may use one; it is freed
/// by `nvdepot_close`.
pub struct nvdepot_store {
    pub(crate) handle: Handle,
}

/// Options for `nvdepot_open` (opaque).
pub struct nvdepot_options {
    config: Config,
}

/// Namespace id meaning "every namespace" (`nvdepot_iter_begin`).
pub const NVDEPOT_ALL_NAMESPACES: u32 = u32::MAX;

/// A namespace as `nvdepot_ns_list` lists it.
#[repr(C)]
pub struct nvdepot_ns_info {
    /// The id the data calls take.
    pub id: u32,
    /// Keys in it.
    pub keys: u64,
    /// Its name, NUL-terminated (freed with the list).
    pub name: *mut c_char,
}

/// Counters and gauges of a store (`nvdepot_stats`).
#[repr(C)]
#[derive(Default)]
pub struct nvdepot_stats {
    pub keys: u64,
    pub namespaces: u64,
    pub capacity_bytes: u64,
    pub segment_bytes: u64,
    pub grain_bytes: u64,
    pub segments_total: u64,
    pub segments_free: u64,
    /// Bytes of records the index points to.
    pub live_bytes: u64,
    pub gets: u64,
    pub puts: u64,
    pub deletes: u64,
    /// Record bytes written for the caller's writes.
    pub user_bytes_written: u64,
    /// Bytes the log wrote to the devices (user writes, GC, headers).
    pub device_bytes_written: u64,
    pub gc_bytes_written: u64,
    pub gc_segments_collected: u64,
    /// Keys evicted (cache mode).
    pub evictions: u64,
    /// Device cache flushes.
    pub flushes: u64,
    /// DRAM the index takes.
    pub index_memory_bytes: u64,
    /// Reads the value cache answered (`value_cache_bytes`; 0 when off).
    pub value_cache_hits: u64,
    /// Reads the value cache sent to the store.
    pub value_cache_misses: u64,
}

/// A new set of options, all defaults (see `nvdepot_options_set`). Null
/// only if memory ran out.
#[no_mangle]
pub extern "C" fn nvdepot_options_new() -> *mut nvdepot_options {
    std::panic::catch_unwind(|| {
        Box::into_raw(Box::new(nvdepot_options {
            config: Config::default(),
        }))
    })
    .unwrap_or(std::ptr::null_mut())
}

/// Sets option `name` from text: `create_bytes` (e.g. `"1G"`; a store is
/// created only when it is set), `segment_bytes`, `grain_bytes`,
/// `key_bytes_max`, `value_bytes_max`, `sync` (`"true"`/`"false"`),
/// `flush_interval_ms`, `location_cache_entries`, `cache_mode`,
/// `eviction` (`"segment_lru"`/`"fifo"`), `background_gc`, `salvage`,
/// `buffered_io`, `write_behind`, `unlock_before_durable`, and
/// `value_cache_bytes` (a DRAM cache of values in front of the store,
/// e.g. `"256M"`; default 0, off).
/// `NVDEPOT_INVALID_ARGUMENT` for an unknown name or a bad value.
#[no_mangle]
pub unsafe extern "C" fn nvdepot_options_set(
    options: *mut nvdepot_options,
    name: *const c_char,
    value: *const c_char,
) -> c_int {
    call(|| {
        // SAFETY: the caller passes options from nvdepot_options_new.
        let o = unsafe { required(options, "options")?.as_mut() }.expect("checked");
        // SAFETY: NUL-terminated strings, per the header.
        let (name, value) = unsafe { (text(name, "name")?, text(value, "value")?) };
        set_option(&mut o.config, name, value)?;
        Ok(NVDEPOT_OK)
    })
}

/// Frees options (null is ignored).
#[no_mangle]
pub unsafe extern "C" fn nvdepot_options_free(options: *mut nvdepot_options) {
    if !options.is_null() {
        // SAFETY: from nvdepot_options_new, freed once.
        drop(unsafe { Box::from_raw(options) });
    }
}

/// Opens the store at `path` (a directory of data files, one data file or
/// a block device), creating it when `create_bytes` is set and there is
/// none; `options` may be null (defaults: open only). On success `*out`
/// is the store.
#[no_mangle]
pub unsafe extern "C" fn nvdepot_open(
    path: *const c_char,
    options: *const nvdepot_options,
    out: *mut *mut nvdepot_store,
) -> c_int {
    call(|| {
        let out = required(out, "out")?;
        // SAFETY: a NUL-terminated path, per the header.
        let path = unsafe { text(path, "path")? };
        let defaults = Config::default();
        // SAFETY: null or options from nvdepot_options_new.
        let config = unsafe { options.as_ref() }.map_or(&defaults, |o| &o.config);
        let handle = Handle::open(Path::new(path), config)?;
        let store = Box::into_raw(Box::new(nvdepot_store { handle }));
        // SAFETY: checked non-null; the caller's pointer to write.
        unsafe { out.write(store) };
        Ok(NVDEPOT_OK)
    })
}

/// Writes everything out, saves the index checkpoint (the next open is
/// fast), closes and frees the store. `NVDEPOT_BUSY` while iterators of it
/// are not freed: the store is then still open and usable. Any other code
/// frees it too (an error says what failed while closing). No other call
/// may use the store during or after this one.
#[no_mangle]
pub unsafe extern "C" fn nvdepot_close(store: *mut nvdepot_store) -> c_int {
    call(|| {
        required(store, "store")?;
        // SAFETY: a store from nvdepot_open, not freed yet.
        let closed = unsafe { &*store }.handle.close();
        if let Err(f) = &closed {
            if f.code == Code::Busy {
                return Err(f.clone());
            }
        }
        // SAFETY: closed (or failed closing): freed once, here.
        drop(unsafe { Box::from_raw(store) });
        closed.map(|()| NVDEPOT_OK)
    })
}

/// Removes the store at `path` (which must not be open): a directory's
/// data files, then the directory if it is left empty; or a data file.
/// Files that do not start with a store's superblock are left alone
/// (`NVDEPOT_NOT_A_STORE`). Block devices are refused.
#[no_mangle]
pub unsafe extern "C" fn nvdepot_destroy(path: *const c_char) -> c_int {
    call(|| {
        // SAFETY: a NUL-terminated path, per the header.
        let path = unsafe { text(path, "path")? };
        nvdepot_embed::destroy(Path::new(path))?;
        Ok(NVDEPOT_OK)
    })
}

/// Makes every write acknowledged so far durable (with `sync` off, writes
/// return before the device flush; this waits for one).
#[no_mangle]
pub unsafe extern "C" fn nvdepot_flush(store: *mut nvdepot_store) -> c_int {
    // SAFETY: a store from nvdepot_open.
    with_store(store, |s| s.flush().map(|()| NVDEPOT_OK))
}

/// Creates namespace `name` (NVMKV's pools); `*ns` is its id.
/// `NVDEPOT_NAMESPACE_EXISTS` if it exists.
#[no_mangle]
pub unsafe extern "C" fn nvdepot_ns_create(
    store: *mut nvdepot_store,
    name: *const c_char,
    ns: *mut u32,
) -> c_int {
    call(|| {
        let ns = required(ns, "ns")?;
        // SAFETY: a NUL-terminated name, per the header.
        let name = unsafe { text(name, "name")? };
        // SAFETY: a store from nvdepot_open.
        let id = unsafe { handle(store)? }
            .with(|s| s.create_namespace(name))?
            .id();
        // SAFETY: checked non-null.
        unsafe { ns.write(id) };
        Ok(NVDEPOT_OK)
    })
}

/// The id of namespace `name` (every store has `"default"`).
/// `NVDEPOT_NO_SUCH_NAMESPACE` if there is none.
#[no_mangle]
pub unsafe extern "C" fn nvdepot_ns_open(
    store: *mut nvdepot_store,
    name: *const c_char,
    ns: *mut u32,
) -> c_int {
    call(|| {
        let ns = required(ns, "ns")?;
        // SAFETY: a NUL-terminated name, per the header.
        let name = unsafe { text(name, "name")? };
        // SAFETY: a store from nvdepot_open.
        let found = unsafe { handle(store)? }.with(|s| Ok(s.namespace(name)))?;
        let id = found
            .ok_or_else(|| {
                Failure::new(Code::NoSuchNamespace, format!("no such namespace: {name}"))
            })?
            .id();
        // SAFETY: checked non-null.
        unsafe { ns.write(id) };
        Ok(NVDEPOT_OK)
    })
}

/// Drops namespace `name` and every key in it (durable on return).
#[no_mangle]
pub unsafe extern "C" fn nvdepot_ns_drop(store: *mut nvdepot_store, name: *const c_char) -> c_int {
    call(|| {
        // SAFETY: a NUL-terminated name, per the header.
        let name = unsafe { text(name, "name")? };
        // SAFETY: a store from nvdepot_open.
        unsafe { handle(store)? }.drop_namespace(name)?;
        Ok(NVDEPOT_OK)
    })
}

/// Deletes every key of namespace `ns` (durable on return).
#[no_mangle]
pub unsafe extern "C" fn nvdepot_ns_clear(store: *mut nvdepot_store, ns: u32) -> c_int {
    // SAFETY: a store from nvdepot_open.
    with_store(store, |s| {
        s.clear(Namespace::from_id(ns)).map(|()| NVDEPOT_OK)
    })
}

/// Keys in namespace `ns`.
#[no_mangle]
pub unsafe extern "C" fn nvdepot_ns_count(
    store: *mut nvdepot_store,
    ns: u32,
    keys: *mut u64,
) -> c_int {
    call(|| {
        let keys = required(keys, "keys")?;
        // SAFETY: a store from nvdepot_open.
        let h = unsafe { handle(store)? };
        // An id that names no namespace is refused rather than counted 0.
        let n = h.with(|s| {
            let ns = nvdepot_embed::existing(s, ns)?;
            Ok(s.count(ns))
        })?;
        // SAFETY: checked non-null.
        unsafe { keys.write(n) };
        Ok(NVDEPOT_OK)
    })
}

/// Every namespace, sorted by name: `*list` is an array of `*count`
/// entries, freed with `nvdepot_ns_list_free`.
#[no_mangle]
pub unsafe extern "C" fn nvdepot_ns_list(
    store: *mut nvdepot_store,
    list: *mut *mut nvdepot_ns_info,
    count: *mut usize,
) -> c_int {
    call(|| {
        let (list, count) = (required(list, "list")?, required(count, "count")?);
        // SAFETY: a store from nvdepot_open.
        let all = unsafe { handle(store)? }.with(|s| Ok(s.namespaces()))?;
        let mut infos = Vec::with_capacity(all.len());
        for (name, ns, keys) in all {
            let mut bytes = name.into_bytes();
            bytes.push(0);
            infos.push(nvdepot_ns_info {
                id: ns.id(),
                keys,
                name: malloc_copy(&bytes)?.cast(),
            });
        }
        let n = infos.len();
        let array = Box::into_raw(infos.into_boxed_slice()).cast::<nvdepot_ns_info>();
        // SAFETY: both checked non-null.
        unsafe {
            list.write(array);
            count.write(n);
        }
        Ok(NVDEPOT_OK)
    })
}

/// Frees a list from `nvdepot_ns_list` (null is ignored).
#[no_mangle]
pub unsafe extern "C" fn nvdepot_ns_list_free(list: *mut nvdepot_ns_info, count: usize) {
    if list.is_null() {
        return;
    }
    // SAFETY: the array nvdepot_ns_list made, with its count, freed once.
    let infos = unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(list, count)) };
    for info in infos.iter() {
        // SAFETY: each name was malloc'ed by nvdepot_ns_list.
        unsafe { crate::nvdepot_free(info.name.cast::<c_void>()) };
    }
}

/// The store's counters and gauges.
#[no_mangle]
pub unsafe extern "C" fn nvdepot_stats_get(
    store: *mut nvdepot_store,
    out: *mut nvdepot_stats,
) -> c_int {
    call(|| {
        let out = required(out, "out")?;
        // SAFETY: a store from nvdepot_open.
        let h = unsafe { handle(store)? };
        let s = h.with(|s| Ok(s.stats()))?;
        let (value_cache_hits, value_cache_misses) = h.cache_counters().unwrap_or_default();
        let stats = nvdepot_stats {
            keys: s.keys,
            namespaces: s.namespaces,
            capacity_bytes: s.capacity_bytes,
            segment_bytes: s.segment_bytes,
            grain_bytes: s.grain_bytes,
            segments_total: s.segments_total,
            segments_free: s.segments_free,
            live_bytes: s.live_bytes,
            gets: s.gets,
            puts: s.puts,
            deletes: s.deletes,
            user_bytes_written: s.user_bytes_written,
            device_bytes_written: s.device_bytes_written,
            gc_bytes_written: s.gc_bytes_written,
            gc_segments_collected: s.gc_segments_collected,
            evictions: s.evictions,
            flushes: s.flushes,
            index_memory_bytes: s.index_memory_bytes,
            value_cache_hits,
            value_cache_misses,
        };
        // SAFETY: checked non-null.
        unsafe { out.write(stats) };
        Ok(NVDEPOT_OK)
    })
}

/// The handle behind a store pointer.
///
/// # Safety
/// `store` must be null or a store from `nvdepot_open` not yet freed.
pub(crate) unsafe fn handle<'a>(store: *mut nvdepot_store) -> Result<&'a Handle, Failure> {
    // SAFETY: the caller's contract above.
    unsafe { store.as_ref() }
        .map(|s| &s.handle)
        .ok_or_else(|| Failure::invalid("store is null"))
}

/// One call on the store.
///
/// # Safety
/// As [`handle`].
pub(crate) unsafe fn with_store(
    store: *mut nvdepot_store,
    f: impl FnOnce(&nvdepot_embed::Store) -> Result<c_int, nvdepot_embed::Error>,
) -> c_int {
    call(|| {
        // SAFETY: the caller's contract.
        unsafe { handle(store)? }.with(f)
    })
}
