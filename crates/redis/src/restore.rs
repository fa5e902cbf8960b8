//! DUMP and RESTORE (Redis's `cluster.c`): a key's value as an RDB object
//! in Redis's payload framing (`dump.rs`), so keys move between
//! redis-server 7.0 and nvdepot both ways — what redis-shake, RIOT and
//! `redis-cli --cluster import` do with them. The objects are in
//! `rdb_object.rs`.
//!
//! RESTORE runs holding the exclusive pass of the isolation gate (as
//! RENAME does): its presence check and its write are one step.

use std::collections::VecDeque;

use nvdepot_cache::resp::{Change, Kind, RespStore, Value};
use nvdepot_cache::Error;
use nvdepot_resp::{errors, Reply};

use super::args::{arity, int_arg};
use super::compact::Compact;
use super::notify;
use super::rdb_object::{Object, Thresholds};
use super::session::Shared;

/// Commands that need the exclusive pass.
pub fn needs_exclusive(name: &[u8]) -> bool {
    matches!(name, b"RESTORE" | b"RESTORE-ASKING")
}

/// Runs `name` if it is DUMP or RESTORE (`None` if not).
pub async fn execute(
    shared: &Shared,
    db: usize,
    name: &[u8],
    args: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> Option<Result<(), Error>> {
    match name {
        b"DUMP" => {
            if !arity(args, 2, Some(2), r) {
                return Some(Ok(()));
            }
            Some(dump(&shared.store, db, args[1], now, r).await)
        }
        // RESTORE-ASKING: a migrating cluster node's RESTORE, served for
        // an importing slot as after ASKING (`face.rs`).
        b"RESTORE" | b"RESTORE-ASKING" => {
            if !arity(args, 4, None, r) {
                return Some(Ok(()));
            }
            Some(restore(shared, db, args, now, r).await)
        }
        _ => None,
    }
}

/// The value `v` under `key` as DUMP carries it.
pub async fn object_of(
    store: &RespStore,
    db: usize,
    key: &[u8],
    v: &Value,
) -> Result<Object, Error> {
    // A paged collection whole; `None` for a string or a compact one.
    let whole = super::types::compact_data(store, db, key, v).await?;
    let data = whole.as_deref().unwrap_or(v.data());
    Ok(match v.kind() {
        Kind::String => Object::String(data.to_vec()),
        Kind::List => Object::List(Compact::decode(data)?.items),
        Kind::Set => {
            let c = Compact::decode(data)?;
            Object::Set {
                members: c.items,
                compact: !c.large,
            }
        }
        Kind::Hash => {
            let c = Compact::decode(data)?;
            let mut it = c.items.into_iter();
            let mut pairs = Vec::new();
            while let (Some(f), Some(v)) = (it.next(), it.next()) {
                pairs.push((f, v));
            }
            Object::Hash {
                pairs,
                compact: !c.large,
            }
        }
        Kind::ZSet => {
            let z = super::zset_value::decode(data)?;
            Object::ZSet {
                items: z.items,
                compact: !z.large,
            }
        }
        Kind::Stream => Object::Stream(Box::new(super::stream_log::decode(data)?)),
    })
}

async fn dump(
    store: &RespStore,
    db: usize,
    key: &[u8],
    now: u64,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    let Some(v) = store.get(db, key, now).await? else {
        r.null();
        return Ok(());
    };
    let object = object_of(store, db, key, &v).await?;
    r.bulk(&super::dump::seal(object.encode()));
    Ok(())
}

/// The thresholds of Redis's compact encodings, as set now (the ones the
/// hash, set and sorted set commands shape their values by).
fn thresholds(shared: &Shared) -> Thresholds {
    let hash = super::hash::Limits::now(shared);
    let zset = super::zset_value::Limits::now(shared);
    Thresholds {
        hash_entries: hash.entries,
        hash_value: hash.value,
        set_intset_entries: super::set::max_intset(shared),
        zset_entries: zset.entries,
        zset_value: zset.value,
    }
}

/// An integer argument of RESTORE in `range`: Redis's error for a
/// non-integer, else `out_of_range` outside it.
fn bounded(
    a: &[u8],
    range: std::ops::RangeInclusive<i64>,
    out_of_range: &'static str,
) -> Result<i64, &'static str> {
    match int_arg(a) {
        None => Err(errors::NOT_INTEGER),
        Some(n) if !range.contains(&n) => Err(out_of_range),
        Some(n) => Ok(n),
    }
}

/// RESTORE key ttl payload [REPLACE] [ABSTTL] [IDLETIME s] [FREQ f], its
/// checks in Redis's order (`restoreCommand`). IDLETIME and FREQ are
/// checked and otherwise ignored: nvdepot keeps no LRU clock or LFU
/// counter to set (docs/REDIS.md).
async fn restore(
    shared: &Shared,
    db: usize,
    args: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    let store = &*shared.store;
    let key = args[1];
    let (mut replace, mut absttl) = (false, false);
    let (mut idle, mut freq) = (false, false);
    let mut j = 4;
    while j < args.len() {
        let more = j + 1 < args.len();
        match args[j].to_ascii_uppercase().as_slice() {
            b"REPLACE" => replace = true,
            b"ABSTTL" => absttl = true,
            b"IDLETIME" if more && !freq => {
                let msg = "ERR Invalid IDLETIME value, must be >= 0";
                if let Err(e) = bounded(args[j + 1], 0..=i64::MAX, msg) {
                    r.error(e);
                    return Ok(());
                }
                idle = true;
                j += 1;
            }
            b"FREQ" if more && !idle => {
                let msg = "ERR Invalid FREQ value, must be >= 0 and <= 255";
                if let Err(e) = bounded(args[j + 1], 0..=255, msg) {
                    r.error(e);
                    return Ok(());
                }
                freq = true;
                j += 1;
            }
            _ => {
                r.error(errors::SYNTAX);
                return Ok(());
            }
        }
        j += 1;
    }
    let existing = store.get(db, key, now).await?;
    if !replace && existing.is_some() {
        r.error("BUSYKEY Target key name already exists.");
        return Ok(());
    }
    let ttl = match bounded(args[2], 0..=i64::MAX, "ERR Invalid TTL value, must be >= 0") {
        Ok(t) => t as u64,
        Err(e) => {
            r.error(e);
            return Ok(());
        }
    };
    if super::dump::verify(args[3]).is_none() {
        r.error("ERR DUMP payload version or checksum are wrong");
        return Ok(());
    }
    // Read from the whole payload, footer included, as Redis's reader
    // is given it: an object cut short reads on into the footer (and
    // bytes after a whole object are ignored).
    let Some(object) = Object::decode(args[3], &thresholds(shared)) else {
        r.error("ERR Bad data format");
        return Ok(());
    };
    let at = match ttl {
        0 => 0,
        t if absttl => t,
        t => t.saturating_add(now),
    };
    if at != 0 && at <= now {
        // Already expired: the old key goes (REPLACE), nothing is added.
        if existing.is_some() {
            store.update(db, key, now, |_| (Change::Delete, ())).await?;
            shared.notify(notify::GENERIC, "del", db, key);
        }
        r.ok();
        return Ok(());
    }
    write(store, db, key, object, at, now).await?;
    shared.notify(notify::GENERIC, "restore", db, key);
    r.ok();
    Ok(())
}

/// Stores `object` under `key` with expiry `at`, replacing whatever is
/// there: a list through the list writer (paged when long); a hash, set
/// or sorted set compact, or paged when its compact record would pass a
/// page (as its own writes would have paged it: so a collection of any
/// size restores, in several batches when one cannot hold it,
/// `paged_commit::commit_whole`), each shaped as its own commands shape it.
async fn write(
    store: &RespStore,
    db: usize,
    key: &[u8],
    object: Object,
    at: u64,
    now: u64,
) -> Result<(), Error> {
    // `large`: a hashtable (skiplist) Redis would not keep in a listpack.
    let (kind, data, large) = match object {
        Object::String(s) => (Kind::String, s, false),
        Object::List(items) => {
            let list: VecDeque<Vec<u8>> = items.into();
            return super::list::write_whole(store, db, key, &list, at, now).await;
        }
        Object::Set { members, compact } => {
            let set = super::set::Set {
                large: !compact,
                members,
            };
            (Kind::Set, record_data(set.change(at)), !compact)
        }
        Object::Hash { pairs, compact } => (
            Kind::Hash,
            Compact {
                large: !compact,
                items: pairs.into_iter().flat_map(|(f, v)| [f, v]).collect(),
            }
            .encode(),
            !compact,
        ),
        Object::ZSet { items, compact } => {
            // As ZADD writes it (a compact set's -0 kept as 0, as
            // Redis's listpack keeps it).
            let z = super::zset_value::ZSet {
                large: !compact,
                items,
            };
            let data = record_data(z.clone().change(at));
            if super::zset_pages::should_page(z.large, data.len(), key) {
                loop {
                    let (_, version) = store.get_for_write(db, key, now).await?;
                    if super::zset_pages::convert(store, db, key, version, z.clone(), at).await? {
                        return Ok(());
                    }
                }
            }
            (Kind::ZSet, data, z.large)
        }
        Object::Stream(s) => (Kind::Stream, s.encode(), false),
    };
    let hash_like = matches!(kind, Kind::Hash | Kind::Set);
    if hash_like && super::hash_pages::should_page(large, data.len(), key) {
        loop {
            let (_, version) = store.get_for_write(db, key, now).await?;
            if super::hash_pages::convert(store, kind, db, key, version, &data, at).await? {
                return Ok(());
            }
        }
    }
    store.set_kind(db, key, kind, &data, at).await
}

/// The record data of a collection's write (never empty here: RESTORE
/// refuses an empty collection).
fn record_data(change: Change) -> Vec<u8> {
    match change {
        Change::Put { data, .. } => data,
        _ => unreachable!("a restored collection is never empty"),
    }
}
