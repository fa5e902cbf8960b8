//! String and key commands beyond the single-step ones of `keys.rs`:
//! SETRANGE and INCRBYFLOAT (one atomic update of their key each),
//! OBJECT, and the commands that must see and change several keys
//! as one step — RENAME, RENAMENX, MSETNX, COPY, MOVE. Those run holding
//! the exclusive pass of the isolation gate (the face's dispatch takes it
//! for them, as EXEC does), so no other command sees a half-done rename
//! or a partial MSETNX, as in Redis where one thread runs everything.

use nvdepot_cache::resp::{Change, Kind, RespStore, Updated, Value};
use nvdepot_cache::Error;
use nvdepot_resp::{errors, Reply};

use super::args::{arity, format_float, int_arg, parse_float};
use super::join::{join_all, last_of_each};
use super::notify;
use super::session::Shared;

/// GET's read of `key`: its value if it holds a string (`Ok(None)`:
/// absent), WRONGTYPE for another type; counted in `keyspace_hits` /
/// `keyspace_misses` as Redis's `lookupKeyRead` counts (a key of another
/// type is neither).
pub async fn get_string(
    shared: &Shared,
    db: usize,
    key: &[u8],
    now: u64,
) -> Result<Result<Option<Value>, &'static str>, Error> {
    let c = &shared.counters;
    Ok(match shared.store.get(db, key, now).await? {
        Some(v) if v.kind() != Kind::String => Err(errors::WRONGTYPE),
        Some(v) => {
            c.hits.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Ok(Some(v))
        }
        None => {
            c.misses.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Ok(None)
        }
    })
}

/// Commands that need the exclusive pass.
pub fn needs_exclusive(name: &[u8]) -> bool {
    matches!(
        name,
        b"RENAME" | b"RENAMENX" | b"MSETNX" | b"COPY" | b"MOVE"
    )
}

/// Largest string SETRANGE may make (Redis's `proto-max-bulk-len`).
const STRING_BYTES_MAX: i64 = 512 << 20;

/// Runs `name` if it is one of this module's commands (`None` if not),
/// with the storage result. `cluster`: the server runs in cluster mode
/// (one database).
pub async fn execute(
    shared: &Shared,
    db: usize,
    name: &[u8],
    args: &[&[u8]],
    now: u64,
    cluster: bool,
    r: &mut Reply<'_>,
) -> Option<Result<(), Error>> {
    let store = &*shared.store;
    Some(match name {
        b"COPY" => {
            if !arity(args, 3, None, r) {
                return Some(Ok(()));
            }
            let (mut to_db, mut replace) = (db, false);
            let mut i = 3;
            while i < args.len() {
                match args[i].to_ascii_uppercase().as_slice() {
                    b"REPLACE" => replace = true,
                    b"DB" if i + 1 < args.len() => {
                        let Some(n) = db_arg(store, args[i + 1], r) else {
                            return Some(Ok(()));
                        };
                        to_db = n;
                        i += 1;
                    }
                    _ => {
                        r.error(errors::SYNTAX);
                        return Some(Ok(()));
                    }
                }
                i += 1;
            }
            if cluster && to_db != 0 {
                r.error("ERR Copying to another database is not allowed in cluster mode");
                return Some(Ok(()));
            }
            let to = (to_db, args[2]);
            copy(shared, (db, args[1]), to, replace, false, now, r).await
        }
        b"MOVE" => {
            if !arity(args, 3, Some(3), r) {
                return Some(Ok(()));
            }
            if cluster {
                r.error("ERR MOVE is not allowed in cluster mode");
                return Some(Ok(()));
            }
            let Some(to_db) = db_arg(store, args[2], r) else {
                return Some(Ok(()));
            };
            copy(shared, (db, args[1]), (to_db, args[1]), false, true, now, r).await
        }
        b"OBJECT" => object(store, db, args, now, r).await,
        b"SETRANGE" => {
            if !arity(args, 4, Some(4), r) {
                return Some(Ok(()));
            }
            let Some(offset) = int_arg(args[2]) else {
                r.error(errors::NOT_INTEGER);
                return Some(Ok(()));
            };
            if offset < 0 {
                r.error("ERR offset is out of range");
                return Some(Ok(()));
            }
            let value = args[3];
            // Saturating: an offset near i64::MAX must not overflow (it
            // panicked here); an empty value writes nothing and is never
            // too long, as in Redis (which answers the length).
            // (Checked after the type, as Redis does.)
            let too_long =
                !value.is_empty() && offset.saturating_add(value.len() as i64) > STRING_BYTES_MAX;
            let offset = offset as usize;
            store
                .update(db, args[1], now, |cur| {
                    let (mut data, at) = match cur {
                        Some(v) if v.kind() != Kind::String => {
                            return (Change::Keep, Err(errors::WRONGTYPE))
                        }
                        Some(v) => (v.data().to_vec(), v.expire_at_ms()),
                        // An empty value on a missing key creates nothing.
                        None if value.is_empty() => return (Change::Keep, Ok(0)),
                        None => (Vec::new(), 0),
                    };
                    if value.is_empty() {
                        return (Change::Keep, Ok(data.len()));
                    }
                    if too_long {
                        return (
                            Change::Keep,
                            Err("ERR string exceeds maximum allowed size (proto-max-bulk-len)"),
                        );
                    }
                    if data.len() < offset + value.len() {
                        data.resize(offset + value.len(), 0);
                    }
                    data[offset..offset + value.len()].copy_from_slice(value);
                    let len = data.len();
                    (
                        Change::Put {
                            kind: Kind::String,
                            data,
                            expire_at_ms: at,
                        },
                        Ok(len),
                    )
                })
                .await
                .map(|(len, done)| match len {
                    Ok(len) => {
                        if done == Updated::Stored {
                            shared.notify(notify::STRING, "setrange", db, args[1]);
                        }
                        r.integer(len as i64)
                    }
                    Err(e) => r.error(e),
                })
        }
        b"INCRBYFLOAT" => {
            if !arity(args, 3, Some(3), r) {
                return Some(Ok(()));
            }
            let Some(by) = parse_float(args[2]) else {
                r.error("ERR value is not a valid float");
                return Some(Ok(()));
            };
            store
                .update(db, args[1], now, |cur| {
                    let (base, at) = match cur {
                        Some(v) if v.kind() != Kind::String => {
                            return (Change::Keep, Err(errors::WRONGTYPE))
                        }
                        Some(v) => match parse_float(v.data()) {
                            Some(f) => (f, v.expire_at_ms()),
                            None => return (Change::Keep, Err("ERR value is not a valid float")),
                        },
                        None => (0.0, 0),
                    };
                    let sum = base + by;
                    if !sum.is_finite() {
                        return (
                            Change::Keep,
                            Err("ERR increment would produce NaN or Infinity"),
                        );
                    }
                    let text = format_float(sum);
                    (
                        Change::Put {
                            kind: Kind::String,
                            data: text.clone().into_bytes(),
                            expire_at_ms: at,
                        },
                        Ok(text),
                    )
                })
                .await
                .map(|(out, _)| match out {
                    Ok(text) => {
                        shared.notify(notify::STRING, "incrbyfloat", db, args[1]);
                        r.bulk(text.as_bytes())
                    }
                    Err(e) => r.error(e),
                })
        }
        b"RENAME" | b"RENAMENX" => {
            if !arity(args, 3, Some(3), r) {
                return Some(Ok(()));
            }
            rename(shared, db, args[1], args[2], name == b"RENAMENX", now, r).await
        }
        b"MSETNX" => {
            if args.len() < 3 || args.len().is_multiple_of(2) {
                r.error(errors::wrong_arity(args[0]));
                return Some(Ok(()));
            }
            msetnx(shared, db, &args[1..], now, r).await
        }
        _ => return None,
    })
}

/// RENAME / RENAMENX `src` `dst` (the caller holds the exclusive pass).
async fn rename(
    shared: &Shared,
    db: usize,
    src: &[u8],
    dst: &[u8],
    nx: bool,
    now: u64,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    let store = &*shared.store;
    let Some(v) = store.get(db, src, now).await? else {
        r.error("ERR no such key");
        return Ok(());
    };
    if src == dst {
        if nx {
            r.integer(0);
        } else {
            r.ok();
        }
        return Ok(());
    }
    // Redis deletes an existing destination, then adds the key anew: a
    // `new` event either way (the store reports it when the key was not
    // there).
    let replaced = (nx || shared.notifies(notify::NEW)) && store.get(db, dst, now).await?.is_some();
    if nx && replaced {
        r.integer(0);
        return Ok(());
    }
    relocate(store, &v, (db, src), (db, dst), true, now).await?;
    if replaced {
        shared.notify(notify::NEW, "new", db, dst);
    }
    shared.notify(notify::GENERIC, "rename_from", db, src);
    shared.notify(notify::GENERIC, "rename_to", db, dst);
    if nx {
        r.integer(1);
    } else {
        r.ok();
    }
    Ok(())
}

/// A database number argument (COPY … DB n, MOVE key n), or `None` once
/// Redis's error is replied: not a 32-bit integer, or out of range.
fn db_arg(store: &RespStore, a: &[u8], r: &mut Reply<'_>) -> Option<usize> {
    let n = super::args::int32_arg(a, r)?;
    if n < 0 || n as usize >= store.databases() {
        r.error(errors::INVALID_DB);
        return None;
    }
    Some(n as usize)
}

/// COPY (or, with `remove`, MOVE) `from` to `to`, each a database and a
/// key, with its expiry (the caller holds the exclusive pass).
async fn copy(
    shared: &Shared,
    from: (usize, &[u8]),
    to: (usize, &[u8]),
    replace: bool,
    remove: bool,
    now: u64,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    let store = &*shared.store;
    if from == to {
        r.error("ERR source and destination objects are the same");
        return Ok(());
    }
    // COPY looks its source up as a read (a miss is a `keymiss`), its
    // destination as a write; MOVE both as writes (Redis's copyCommand,
    // moveCommand).
    let misses = !remove && shared.notifies(notify::KEY_MISS);
    let source = store.get(from.0, from.1, now);
    let source = store.report_misses(misses, true, &[from.1], source);
    let Some(v) = source.await? else {
        r.integer(0);
        return Ok(());
    };
    let existed =
        (!replace || shared.notifies(notify::NEW)) && store.get(to.0, to.1, now).await?.is_some();
    if !replace && existed {
        r.integer(0);
        return Ok(());
    }
    relocate(store, &v, from, to, remove, now).await?;
    // COPY … REPLACE deletes the destination, then adds it anew (`new`
    // reported by the store when it was not there).
    if existed {
        shared.notify(notify::NEW, "new", to.0, to.1);
    }
    if remove {
        shared.notify(notify::GENERIC, "move_from", from.0, from.1);
        shared.notify(notify::GENERIC, "move_to", to.0, to.1);
    } else {
        shared.notify(notify::GENERIC, "copy_to", to.0, to.1);
    }
    r.integer(1);
    Ok(())
}

/// Writes `v` (value and expiry) to `to` and, with `remove`, deletes
/// `from` (RENAME, COPY, MOVE; each a database and a key), as one
/// crash-atomic commit (`atomic.rs`): never both keys, never neither,
/// after a crash. The new one first: if the delete fails, the key exists
/// in both places rather than in neither.
async fn relocate(
    store: &RespStore,
    v: &Value,
    from: (usize, &[u8]),
    to: (usize, &[u8]),
    remove: bool,
    now: u64,
) -> Result<(), Error> {
    let atomic = super::atomic::Atomic::begin();
    let done = atomic
        .run(Box::pin(relocate_staged(store, v, from, to, remove, now)))
        .await;
    atomic.commit(store).await?;
    done
}

async fn relocate_staged(
    store: &RespStore,
    v: &Value,
    from: (usize, &[u8]),
    to: (usize, &[u8]),
    remove: bool,
    now: u64,
) -> Result<(), Error> {
    // A paged collection is written whole to its new key (its pages'
    // keys name their key, and COPY must not share them): a list paged
    // again, a hash, set or sorted set compact (its next write pages it). The old
    // key's pages are the sweeper's once it is deleted. The new key first,
    // as below.
    let whole = if let Some(list) = super::list::paged_elements(store, from.0, from.1, v).await? {
        super::list::write_whole(store, to.0, to.1, &list, v.expire_at_ms(), now).await?;
        true
    } else if let Some(data) = super::types::compact_data(store, from.0, from.1, v).await? {
        store
            .set_kind(to.0, to.1, v.kind(), &data, v.expire_at_ms())
            .await?;
        true
    } else {
        false
    };
    if whole {
        if remove {
            store
                .update(from.0, from.1, now, |_| (Change::Delete, ()))
                .await?;
        }
        return Ok(());
    }
    if remove && from.0 == to.0 {
        // RENAME: the new key and the old key's deletion in one
        // crash-atomic batch (never both keys, never neither, after a crash).
        return store
            .rename(from.0, from.1, to.1, v.kind(), v.data(), v.expire_at_ms())
            .await;
    }
    store
        .set_kind(to.0, to.1, v.kind(), v.data(), v.expire_at_ms())
        .await?;
    if remove {
        store
            .update(from.0, from.1, now, |_| (Change::Delete, ()))
            .await?;
    }
    Ok(())
}

const LFU_OFF: &str = "ERR An LFU maxmemory policy is not selected, access frequency not \
                       tracked. Please note that when switching between policies at runtime \
                       LRU and LFU data will take some time to adjust.";

/// Shared integer objects' reference count in Redis (`OBJ_SHARED_REFCOUNT`).
const SHARED_REFCOUNT: i64 = i32::MAX as i64;

/// OBJECT ENCODING | REFCOUNT | IDLETIME | FREQ key, OBJECT HELP. A
/// string's encoding is what Redis gives a value just SET: `int` for a
/// number Redis reads as one (20 bytes at most), `embstr` up to 44 bytes,
/// else `raw` (Redis also calls `raw` a short string grown in place by
/// APPEND or SETRANGE; nvdepot does not keep that history). IDLETIME comes
/// from the cache layer's access table (exact for recently used keys;
/// one whose entry was taken reads as idle since the server started).
async fn object(
    store: &RespStore,
    db: usize,
    args: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    if !arity(args, 2, None, r) {
        return Ok(());
    }
    let sub = args[1].to_ascii_uppercase();
    let expected = match &sub[..] {
        b"HELP" => 2,
        b"ENCODING" | b"REFCOUNT" | b"IDLETIME" | b"FREQ" => 3,
        _ => {
            r.error(errors::unknown_subcommand("OBJECT", args[1]));
            return Ok(());
        }
    };
    if args.len() != expected {
        // A container command's subcommand is its own command to Redis.
        let name = [&b"object|"[..], args[1]].concat();
        r.error(errors::wrong_arity(&name));
        return Ok(());
    }
    if sub == b"HELP" {
        let lines = [
            "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "ENCODING <key>",
            "    Return the kind of internal representation used in order to store the value",
            "    associated with a <key>.",
            "FREQ <key>",
            "    Return the access frequency index of the <key>. The returned integer is",
            "    proportional to the logarithm of the recent access frequency of the key.",
            "IDLETIME <key>",
            "    Return the idle time of the <key>, that is the approximated number of",
            "    seconds elapsed since the last access to the key.",
            "REFCOUNT <key>",
            "    Return the number of references of the value associated with the specified",
            "    <key>.",
            "HELP",
            "    Prints this help.",
        ];
        r.simple_lines(&lines);
        return Ok(());
    }
    let Some(v) = store.get(db, args[2], now).await? else {
        r.null();
        return Ok(());
    };
    if v.kind() != Kind::String {
        match &sub[..] {
            b"ENCODING" => r.bulk(super::types::encoding(&v)?.as_bytes()),
            b"REFCOUNT" => r.integer(1),
            b"IDLETIME" => r.integer(i64::from(store.idle_secs(db, args[2]))),
            _ => r.error(LFU_OFF),
        }
        return Ok(());
    }
    let data = v.data();
    let int = if data.len() <= 20 {
        int_arg(data)
    } else {
        None
    };
    match &sub[..] {
        b"ENCODING" => r.bulk(match int {
            Some(_) => b"int",
            None if data.len() <= 44 => b"embstr",
            None => b"raw",
        }),
        b"REFCOUNT" => r.integer(match int {
            Some(n) if (0..10_000).contains(&n) => SHARED_REFCOUNT,
            _ => 1,
        }),
        b"IDLETIME" => r.integer(i64::from(store.idle_secs(db, args[2]))),
        _ => r.error(LFU_OFF),
    }
    Ok(())
}

/// MSETNX k v [k v …]: all set, or none if any key exists (the caller
/// holds the exclusive pass).
async fn msetnx(
    shared: &Shared,
    db: usize,
    pairs: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    let store = &*shared.store;
    for k in pairs.iter().step_by(2) {
        if store.get(db, k, now).await?.is_some() {
            r.integer(0);
            return Ok(());
        }
    }
    set_pairs(shared, db, pairs).await?;
    r.integer(1);
    Ok(())
}

/// MSET's and MSETNX's write of `pairs` (k v k v …, without expiry; the
/// last pair of a key counts): one crash-atomic batch when its records fit
/// a segment, else key by key, at most `join::IN_FLIGHT_MAX` at once (a
/// crash during it may leave some keys set: docs/REDIS.md).
pub async fn set_pairs(shared: &Shared, db: usize, pairs: &[&[u8]]) -> Result<(), Error> {
    let store = &*shared.store;
    let kvs: Vec<(&[u8], &[u8])> = pairs.chunks(2).map(|kv| (kv[0], kv[1])).collect();
    // The pairs that create their key (the first of each absent key), for
    // `new` events in Redis's order: each before its pair's `set`.
    let mut creates = vec![false; kvs.len()];
    if shared.notifies(notify::NEW) {
        for (i, (k, _)) in kvs.iter().enumerate() {
            let first = !kvs[..i].iter().any(|(o, _)| o == k);
            creates[i] = first && store.is_absent(db, k).await?;
        }
    }
    if store.batch_fits(kvs.iter().map(|(k, v)| (k.len(), v.len()))) {
        store.set_many(db, &kvs).await?;
    } else {
        let keys: Vec<&[u8]> = kvs.iter().map(|(k, _)| *k).collect();
        let writes = last_of_each(&keys)
            .into_iter()
            .map(|i| store.set_kind_unreported(db, kvs[i].0, Kind::String, kvs[i].1, 0));
        join_all(writes)
            .await
            .into_iter()
            .collect::<Result<(), Error>>()?;
    }
    // A `set` per pair, in argument order (Redis's MSET and MSETNX).
    for ((k, _), created) in kvs.iter().zip(creates) {
        if created {
            shared.notify(notify::NEW, "new", db, k);
        }
        shared.notify(notify::STRING, "set", db, k);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_as_redis_writes_them() {
        assert_eq!(format_float(10.5 + 0.1), "10.6");
        assert_eq!(format_float(3.0), "3");
        assert_eq!(format_float(5.0e3), "5000");
        assert_eq!(format_float(1e20), "100000000000000000000");
        assert_eq!(format_float(-0.25), "-0.25");
        assert_eq!(parse_float(b" 1"), None);
        assert_eq!(parse_float(b"nan"), None);
        assert_eq!(parse_float(b"5.0e3"), Some(5000.0));
    }
}
