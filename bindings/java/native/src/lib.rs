//! nvdepot's Java skin: the native half of `io.nvdepot` (see
//! bindings/java/src/main/java/io/nvdepot/Native.java for the Java half of
//! each call). A store handle crosses the boundary as a `long` holding a
//! `Box<Handle>`; a namespace as its `int` id; a cursor as a `long`
//! holding a `Box<Cursor>`. Byte arrays are copied in and out. Every
//! failure is thrown as `io.nvdepot.NvdepotException` with the core's
//! code; a panic is caught and thrown as code INTERNAL, never unwound
//! into the JVM.
//!
//! Lifetimes: `Store.close()` closes the store (later calls throw
//! CLOSED) but the small handle is freed only when the Java object is
//! unreachable (a `Cleaner`), so a call racing a close never touches freed
//! memory.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use jni::objects::{JByteArray, JClass, JLongArray, JObject, JObjectArray, JString, JValue};
use jni::sys::{jboolean, jbyteArray, jint, jlong, jlongArray, jobjectArray, JNI_FALSE, JNI_TRUE};
use jni::JNIEnv;
use nvdepot_embed::{
    set_option, Code, Config, Cursor, DeleteOutcome, Failure, Handle, Namespace, WriteOp,
};

/// `ns` meaning every namespace (cursors).
const ALL_NAMESPACES: jint = -1;

/// Runs one native call: its result, or `fallback` after throwing the
/// failure (or a caught panic) as an NvdepotException.
fn run<'l, R>(
    env: &mut JNIEnv<'l>,
    fallback: R,
    f: impl FnOnce(&mut JNIEnv<'l>) -> Result<R, Failure>,
) -> R {
    let failure = match catch_unwind(AssertUnwindSafe(|| f(env))) {
        Ok(Ok(r)) => return r,
        Ok(Err(failure)) => failure,
        Err(panic) => Failure::from_panic(&*panic),
    };
    // A JNI error already pending (an OutOfMemoryError, say) is the one
    // the caller sees.
    if !env.exception_check().unwrap_or(true) {
        throw(env, &failure);
    }
    fallback
}

fn throw(env: &mut JNIEnv<'_>, failure: &Failure) {
    let made = (|| -> jni::errors::Result<()> {
        let name = env.new_string(failure.code.name())?;
        let message = env.new_string(&failure.message)?;
        let e = env.new_object(
            "io/nvdepot/NvdepotException",
            "(ILjava/lang/String;Ljava/lang/String;)V",
            &[
                JValue::Int(failure.code as jint),
                JValue::Object(&name),
                JValue::Object(&message),
            ],
        )?;
        env.throw(jni::objects::JThrowable::from(e))
    })();
    if made.is_err() && !env.exception_check().unwrap_or(true) {
        let _ = env.throw_new("java/lang/RuntimeException", &failure.message);
    }
}

/// A JNI call's error as a failure (a Java exception may be pending:
/// `run` then leaves it to the caller).
fn jni_failed(e: jni::errors::Error) -> Failure {
    Failure::new(Code::Internal, format!("JNI: {e}"))
}

/// The handle behind a store's `long`.
fn handle<'a>(h: jlong) -> Result<&'a Handle, Failure> {
    if h == 0 {
        return Err(Failure::invalid("the store's handle is null"));
    }
    // SAFETY: the Java side passes only values `open` returned, and frees
    // them (`free`) only once the Store object is unreachable.
    Ok(unsafe { &*(h as *const Handle) })
}

fn bytes(env: &mut JNIEnv<'_>, array: &JByteArray<'_>, what: &str) -> Result<Vec<u8>, Failure> {
    if array.is_null() {
        return Err(Failure::invalid(format!("{what} is null")));
    }
    env.convert_byte_array(array).map_err(jni_failed)
}

fn text(env: &mut JNIEnv<'_>, s: &JString<'_>, what: &str) -> Result<String, Failure> {
    if s.is_null() {
        return Err(Failure::invalid(format!("{what} is null")));
    }
    Ok(env.get_string(s).map_err(jni_failed)?.into())
}

fn new_bytes(env: &mut JNIEnv<'_>, v: &[u8]) -> Result<jbyteArray, Failure> {
    Ok(env.byte_array_from_slice(v).map_err(jni_failed)?.into_raw())
}

/// One data operation of the handle on namespace `ns`.
fn on<R>(
    h: jlong,
    ns: jint,
    f: impl FnOnce(&Handle, Namespace) -> Result<R, Failure>,
) -> Result<R, Failure> {
    f(handle(h)?, Namespace::from_id(ns as u32))
}

#[no_mangle]
pub extern "system" fn Java_io_nvdepot_Native_open<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    path: JString<'l>,
    names: JObjectArray<'l>,
    values: JObjectArray<'l>,
) -> jlong {
    run(&mut env, 0, |env| {
        let path = text(env, &path, "path")?;
        let mut opts = Config::default();
        let n = if names.is_null() {
            0
        } else {
            env.get_array_length(&names).map_err(jni_failed)?
        };
        for i in 0..n {
            let name = JString::from(
                env.get_object_array_element(&names, i)
                    .map_err(jni_failed)?,
            );
            let value = JString::from(
                env.get_object_array_element(&values, i)
                    .map_err(jni_failed)?,
            );
            let (name, value) = (
                text(env, &name, "an option's name")?,
                text(env, &value, "an option's value")?,
            );
            set_option(&mut opts, &name, &value)?;
        }
        let h = Handle::open(Path::new(&path), &opts)?;
        Ok(Box::into_raw(Box::new(h)) as jlong)
    })
}

#[no_mangle]
pub extern "system" fn Java_io_nvdepot_Native_close<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    h: jlong,
) {
    run(&mut env, (), |_| handle(h)?.close())
}

#[no_mangle]
pub extern "system" fn Java_io_nvdepot_Native_free<'l>(_env: JNIEnv<'l>, _: JClass<'l>, h: jlong) {
    if h != 0 {
        // SAFETY: called once, by the Store's Cleaner, when no Java code
        // can reach the handle any more.
        let handle = unsafe { Box::from_raw(h as *mut Handle) };
        let _ = catch_unwind(AssertUnwindSafe(|| {
            let _ = handle.close(); // a store never closed is closed now
            drop(handle);
        }));
    }
}

#[no_mangle]
pub extern "system" fn Java_io_nvdepot_Native_destroy<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    path: JString<'l>,
) {
    run(&mut env, (), |env| {
        let path = text(env, &path, "path")?;
        nvdepot_embed::destroy(Path::new(&path))
    })
}

#[no_mangle]
pub extern "system" fn Java_io_nvdepot_Native_flush<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    h: jlong,
) {
    run(&mut env, (), |_| handle(h)?.with(|s| s.flush()))
}

#[no_mangle]
pub extern "system" fn Java_io_nvdepot_Native_namespace<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    h: jlong,
    name: JString<'l>,
    create: jboolean,
) -> jint {
    run(&mut env, 0, |env| {
        let name = text(env, &name, "name")?;
        let ns = handle(h)?.with(|s| match s.namespace(&name) {
            Some(ns) => Ok(ns),
            None if create == JNI_TRUE => s.create_namespace(&name),
            None => Err(nvdepot_embed::Error::NoSuchNamespace(name.clone())),
        })?;
        Ok(ns.id() as jint)
    })
}

#[no_mangle]
pub extern "system" fn Java_io_nvdepot_Native_dropNamespace<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    h: jlong,
    name: JString<'l>,
) {
    run(&mut env, (), |env| {
        let name = text(env, &name, "name")?;
        handle(h)?.drop_namespace(&name)
    })
}

#[no_mangle]
pub extern "system" fn Java_io_nvdepot_Native_namespaceNames<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    h: jlong,
) -> jobjectArray {
    run(&mut env, std::ptr::null_mut(), |env| {
        let all = handle(h)?.with(|s| Ok(s.namespaces()))?;
        let array = env
            .new_object_array(all.len() as jint, "java/lang/String", JObject::null())
            .map_err(jni_failed)?;
        for (i, (name, _, _)) in all.iter().enumerate() {
            let s = env.new_string(name).map_err(jni_failed)?;
            env.set_object_array_element(&array, i as jint, &s)
                .map_err(jni_failed)?;
            env.delete_local_ref(s).map_err(jni_failed)?;
        }
        Ok(array.into_raw())
    })
}

#[no_mangle]
pub extern "system" fn Java_io_nvdepot_Native_count<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    h: jlong,
    ns: jint,
) -> jlong {
    run(&mut env, 0, |_| {
        handle(h)?.with(|s| nvdepot_embed::existing(s, ns as u32).map(|ns| s.count(ns) as jlong))
    })
}

#[no_mangle]
pub extern "system" fn Java_io_nvdepot_Native_clear<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    h: jlong,
    ns: jint,
) {
    run(&mut env, (), |_| on(h, ns, |h, ns| h.clear(ns)))
}

/// The value, or null; `version[0]` receives its version when `version`
/// is not null.
#[no_mangle]
pub extern "system" fn Java_io_nvdepot_Native_get<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    h: jlong,
    ns: jint,
    key: JByteArray<'l>,
    version: JLongArray<'l>,
) -> jbyteArray {
    run(&mut env, std::ptr::null_mut(), |env| {
        let key = bytes(env, &key, "key")?;
        let Some((value, v)) = on(h, ns, |h, ns| h.get_versioned(ns, &key))? else {
            return Ok(std::ptr::null_mut());
        };
        if !version.is_null() {
            env.set_long_array_region(&version, 0, &[v as jlong])
                .map_err(jni_failed)?;
        }
        new_bytes(env, &value)
    })
}

/// The new version, or -1 if the condition failed.
#[no_mangle]
pub extern "system" fn Java_io_nvdepot_Native_put<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    h: jlong,
    ns: jint,
    key: JByteArray<'l>,
    value: JByteArray<'l>,
    mode: jint,
    version: jlong,
) -> jlong {
    run(&mut env, -1, |env| {
        let (key, value) = (bytes(env, &key, "key")?, bytes(env, &value, "value")?);
        // Namespace.java numbers its modes as nvdepot_embed::put_mode does.
        let mode = nvdepot_embed::put_mode(mode, version as u64)?;
        let written = on(h, ns, |h, ns| h.put_versioned(ns, &key, &value, mode))?;
        Ok(written.map_or(-1, |v| v as jlong))
    })
}

/// 0: deleted; 1: absent; 2: present with another version.
#[no_mangle]
pub extern "system" fn Java_io_nvdepot_Native_delete<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    h: jlong,
    ns: jint,
    key: JByteArray<'l>,
    has_version: jboolean,
    version: jlong,
) -> jint {
    run(&mut env, 1, |env| {
        let key = bytes(env, &key, "key")?;
        let version = (has_version == JNI_TRUE).then_some(version as u64);
        Ok(
            match on(h, ns, |h, ns| h.delete_versioned(ns, &key, version))? {
                DeleteOutcome::Deleted => 0,
                DeleteOutcome::NotFound => 1,
                DeleteOutcome::VersionMismatch => 2,
            },
        )
    })
}

#[no_mangle]
pub extern "system" fn Java_io_nvdepot_Native_getRange<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    h: jlong,
    ns: jint,
    key: JByteArray<'l>,
    offset: jlong,
    len: jint,
) -> jbyteArray {
    run(&mut env, std::ptr::null_mut(), |env| {
        let key = bytes(env, &key, "key")?;
        if offset < 0 || len < 0 {
            return Err(Failure::invalid(format!(
                "offset {offset} and length {len} must not be negative"
            )));
        }
        match on(h, ns, |h, ns| {
            h.get_range(ns, &key, offset as u64, len as usize)
        })? {
            Some(part) => new_bytes(env, &part),
            None => Ok(std::ptr::null_mut()),
        }
    })
}

#[no_mangle]
pub extern "system" fn Java_io_nvdepot_Native_putRange<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    h: jlong,
    ns: jint,
    key: JByteArray<'l>,
    offset: jlong,
    data: JByteArray<'l>,
) -> jlong {
    run(&mut env, 0, |env| {
        let (key, data) = (bytes(env, &key, "key")?, bytes(env, &data, "data")?);
        if offset < 0 {
            return Err(Failure::invalid(format!(
                "offset {offset} must not be negative"
            )));
        }
        Ok(on(h, ns, |h, ns| h.put_range(ns, &key, offset as u64, &data))? as jlong)
    })
}

/// Elements of a `byte[][]` (a null element stays `None`).
fn byte_arrays(
    env: &mut JNIEnv<'_>,
    arrays: &JObjectArray<'_>,
    what: &str,
) -> Result<Vec<Option<Vec<u8>>>, Failure> {
    if arrays.is_null() {
        return Err(Failure::invalid(format!("{what} is null")));
    }
    let n = env.get_array_length(arrays).map_err(jni_failed)?;
    let mut out = Vec::with_capacity(n as usize);
    for i in 0..n {
        let e = JByteArray::from(
            env.get_object_array_element(arrays, i)
                .map_err(jni_failed)?,
        );
        out.push(if e.is_null() {
            None
        } else {
            Some(env.convert_byte_array(&e).map_err(jni_failed)?)
        });
        env.delete_local_ref(e).map_err(jni_failed)?;
    }
    Ok(out)
}

#[no_mangle]
pub extern "system" fn Java_io_nvdepot_Native_getMany<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    h: jlong,
    ns: jint,
    keys: JObjectArray<'l>,
) -> jobjectArray {
    run(&mut env, std::ptr::null_mut(), |env| {
        let keys = byte_arrays(env, &keys, "keys")?;
        let keys: Vec<Vec<u8>> = keys
            .into_iter()
            .map(|k| k.ok_or_else(|| Failure::invalid("a key is null")))
            .collect::<Result<_, _>>()?;
        let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_slice()).collect();
        let values = on(h, ns, |h, ns| h.get_many(ns, &refs))?;
        let array = env
            .new_object_array(values.len() as jint, "[B", JObject::null())
            .map_err(jni_failed)?;
        for (i, v) in values.iter().enumerate() {
            if let Some(v) = v {
                let b = env.byte_array_from_slice(v).map_err(jni_failed)?;
                env.set_object_array_element(&array, i as jint, &b)
                    .map_err(jni_failed)?;
                env.delete_local_ref(b).map_err(jni_failed)?;
            }
        }
        Ok(array.into_raw())
    })
}

/// Puts `keys[i] = values[i]`, deleting where `values[i]` is null.
#[no_mangle]
pub extern "system" fn Java_io_nvdepot_Native_writeBatch<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    h: jlong,
    ns: jint,
    keys: JObjectArray<'l>,
    values: JObjectArray<'l>,
) {
    run(&mut env, (), |env| {
        let keys = byte_arrays(env, &keys, "keys")?;
        let values = byte_arrays(env, &values, "values")?;
        if keys.len() != values.len() {
            return Err(Failure::invalid("keys and values differ in length"));
        }
        let mut ops = Vec::with_capacity(keys.len());
        for (k, v) in keys.iter().zip(&values) {
            let key = k
                .as_deref()
                .ok_or_else(|| Failure::invalid("a key is null"))?;
            ops.push(match v {
                Some(value) => WriteOp::Put { key, value },
                None => WriteOp::Delete { key },
            });
        }
        on(h, ns, |h, ns| h.write_batch(ns, &ops))
    })
}

#[no_mangle]
pub extern "system" fn Java_io_nvdepot_Native_cursorOpen<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    h: jlong,
    ns: jint,
    at: jlong,
) -> jlong {
    run(&mut env, 0, |_| {
        let ns = (ns != ALL_NAMESPACES).then_some(ns as u32);
        let cursor = handle(h)?.cursor(ns, at as u64)?;
        Ok(Box::into_raw(Box::new(cursor)) as jlong)
    })
}

fn cursor<'a>(c: jlong) -> Result<&'a mut Cursor, Failure> {
    if c == 0 {
        return Err(Failure::new(Code::Closed, "the cursor is closed"));
    }
    // SAFETY: a value cursorOpen returned, not freed yet; Cursor.java uses
    // it from one thread at a time (its methods are synchronized).
    Ok(unsafe { &mut *(c as *mut Cursor) })
}

#[no_mangle]
pub extern "system" fn Java_io_nvdepot_Native_cursorNext<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    c: jlong,
) -> jboolean {
    run(&mut env, JNI_FALSE, |_| {
        Ok(if cursor(c)?.advance()? {
            JNI_TRUE
        } else {
            JNI_FALSE
        })
    })
}

/// The current key (`which` 0), value (1), or null.
#[no_mangle]
pub extern "system" fn Java_io_nvdepot_Native_cursorBytes<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    c: jlong,
    which: jint,
) -> jbyteArray {
    run(&mut env, std::ptr::null_mut(), |env| {
        let Some(item) = cursor(c)?.current() else {
            return Ok(std::ptr::null_mut());
        };
        new_bytes(env, if which == 0 { &item.key } else { &item.value })
    })
}

#[no_mangle]
pub extern "system" fn Java_io_nvdepot_Native_cursorNamespace<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    c: jlong,
) -> jint {
    run(&mut env, -1, |_| {
        Ok(cursor(c)?
            .current()
            .map_or(-1, |i| i.namespace.id() as jint))
    })
}

/// `[1, cursor]` to resume from, or `[0, 0]` when nothing is left.
#[no_mangle]
pub extern "system" fn Java_io_nvdepot_Native_cursorResumeAt<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    c: jlong,
) -> jlongArray {
    run(&mut env, std::ptr::null_mut(), |env| {
        let pair = match cursor(c)?.resume_at() {
            Some(at) => [1, at as jlong],
            None => [0, 0],
        };
        let a = env.new_long_array(2).map_err(jni_failed)?;
        env.set_long_array_region(&a, 0, &pair)
            .map_err(jni_failed)?;
        Ok(a.into_raw())
    })
}

#[no_mangle]
pub extern "system" fn Java_io_nvdepot_Native_cursorFree<'l>(
    _env: JNIEnv<'l>,
    _: JClass<'l>,
    c: jlong,
) {
    if c != 0 {
        // SAFETY: from cursorOpen, freed once (Cursor.java zeroes its
        // handle under its lock).
        drop(unsafe { Box::from_raw(c as *mut Cursor) });
    }
}

/// Counters, in the order Store.java's Stats names them.
#[no_mangle]
pub extern "system" fn Java_io_nvdepot_Native_stats<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    h: jlong,
) -> jlongArray {
    run(&mut env, std::ptr::null_mut(), |env| {
        let handle = handle(h)?;
        let s = handle.with(|s| Ok(s.stats()))?;
        let (hits, misses) = handle.cache_counters().unwrap_or_default();
        let values = [
            s.keys,
            s.namespaces,
            s.capacity_bytes,
            s.live_bytes,
            s.gets,
            s.puts,
            s.deletes,
            s.user_bytes_written,
            s.device_bytes_written,
            s.gc_bytes_written,
            s.flushes,
            s.index_memory_bytes,
            hits,
            misses,
        ]
        .map(|v| v as jlong);
        let a = env
            .new_long_array(values.len() as jint)
            .map_err(jni_failed)?;
        env.set_long_array_region(&a, 0, &values)
            .map_err(jni_failed)?;
        Ok(a.into_raw())
    })
}
