//! The stream type's commands (Redis 7.0's `t_stream.c`; consumer groups
//! in `stream_groups.rs`): XADD, XLEN, XRANGE, XREVRANGE, XDEL, XTRIM, XREAD
//! (COUNT, BLOCK, `$`), XSETID, over one record per stream
//! (`stream_log.rs` holds the entries and their encoding), or for a long
//! one its metadata and pages (`stream_pages.rs`).

use nvdepot_cache::resp::{Kind, RespStore, Value};
use nvdepot_cache::Error;
use nvdepot_resp::{errors, Reply};

use super::args::arity;
use super::compact_update::Fail;
use super::key_locks::KeyGuard;
use super::list_pages::{commit_records, Stop};
use super::notify;
use super::session::Shared;
use super::stream_log::{
    decode, interval_end, interval_start, parse_add_or_trim, parse_id, Entry, Id, IdForm, Stream,
    INVALID_ID,
};
use super::stream_pages::{self, Loaded, Need};

/// The stream `v` holds (`None`: no key), loaded as `need` says when it
/// is paged (with what its write-back compares against).
async fn stream_of(
    store: &RespStore,
    db: usize,
    key: &[u8],
    v: Option<&Value>,
    need: Need<'_>,
) -> Result<Option<(Stream, Option<Loaded>)>, Fail> {
    let Some(v) = v else { return Ok(None) };
    if v.kind() != Kind::Stream {
        return Err(Fail::WrongType);
    }
    if stream_pages::is_paged(v.data()) {
        let (s, l) = stream_pages::load(store, db, key, v.data(), need)
            .await
            .map_err(Fail::Store)?;
        return Ok(Some((s, Some(l))));
    }
    decode(v.data())
        .map(|s| Some((s, None)))
        .map_err(Fail::Store)
}

/// Whether `data` is a stream record's data.
pub fn check(data: &[u8]) -> Result<(), Error> {
    if stream_pages::is_paged(data) {
        return stream_pages::decode_meta(data).map(|_| ());
    }
    decode(data).map(|_| ())
}

/// A paged stream `v` under `key` whole in the one-record layout (as a
/// migration, COPY or RENAME writes it); `None` for one not paged.
pub(crate) async fn compact_data(
    store: &RespStore,
    db: usize,
    key: &[u8],
    v: &Value,
) -> Result<Option<Vec<u8>>, Error> {
    if v.kind() != Kind::Stream || !stream_pages::is_paged(v.data()) {
        return Ok(None);
    }
    let (s, _) = stream_pages::load(store, db, key, v.data(), Need::All).await?;
    Ok(Some(s.encode()))
}

/// One atomic update of stream `key` (`None` when missing), with the
/// stream loaded whole.
pub(crate) async fn update<T>(
    store: &RespStore,
    db: usize,
    key: &[u8],
    now: u64,
    apply: impl FnMut(&mut Option<Stream>) -> Result<(bool, T), &'static str>,
) -> Result<Result<T, &'static str>, Error> {
    update_loading(store, db, key, now, Need::All, apply).await
}

/// One atomic update of stream `key`, a paged one loaded as `need` says:
/// read, `apply`, then the metadata and the changed pages committed as
/// one crash-atomic batch guarded by the key's version (again from the
/// read if the key changed meanwhile: `apply` may run more than once).
pub(crate) async fn update_loading<T>(
    store: &RespStore,
    db: usize,
    key: &[u8],
    now: u64,
    need: Need<'_>,
    mut apply: impl FnMut(&mut Option<Stream>) -> Result<(bool, T), &'static str>,
) -> Result<Result<T, &'static str>, Error> {
    loop {
        let held = super::key_locks::PAGED.lock(db, key).await;
        let (cur, version) = store.get_for_write(db, key, now).await?;
        let (mut s, loaded) = match stream_of(store, db, key, cur.as_ref(), need).await {
            Ok(Some((s, l))) => (Some(s), l),
            Ok(None) => (None, None),
            Err(Fail::WrongType) => return Ok(Err(errors::WRONGTYPE)),
            Err(Fail::Store(e)) => return Err(e),
        };
        let at = cur.as_ref().map_or(0, Value::expire_at_ms);
        let t = match apply(&mut s) {
            Ok((true, t)) => t,
            Ok((false, t)) => return Ok(Ok(t)),
            Err(msg) => return Ok(Err(msg)),
        };
        // A stream stays when emptied (Redis keeps an empty stream).
        let w = stream_pages::writes(key, s.as_mut(), loaded.as_ref());
        let what = || {
            let len = s.as_ref().map_or(0, Stream::len);
            format!("a change of a stream of {len} entries")
        };
        let held: KeyGuard<'static> = held;
        if loaded.is_none() && !w.pages.is_empty() {
            // Going paged: every page under a new stamp, so a stream of
            // any size is written, in several batches if it must be.
            let meta = w.meta.as_deref().map(|m| (Kind::Stream, m, at));
            let pages: Vec<(&[u8], Option<&[u8]>)> = w
                .pages
                .iter()
                .map(|(k, d)| (k.as_slice(), d.as_deref()))
                .collect();
            match super::paged_commit::commit_whole(
                store, db, key, version, meta, &pages, held, what,
            )
            .await?
            {
                true => return Ok(Ok(t)),
                false => continue,
            }
        }
        super::paged_commit::ensure_fits(
            store,
            key,
            w.meta.as_ref().map_or(0, Vec::len),
            w.pages
                .iter()
                .map(|(k, d)| (k.len(), d.as_ref().map_or(0, Vec::len))),
            what,
        )?;
        let meta = w.meta.map(|m| (Kind::Stream, m, at));
        match commit_records(store, db, key, version, meta, &w.pages, held).await {
            Ok(()) => return Ok(Ok(t)),
            Err(Stop::Retry) => continue,
            Err(Stop::Fail(e)) => return Err(e),
        }
    }
}

/// Stream `key` loaded whole (`Err(())` once a WRONGTYPE error is
/// written).
pub(crate) async fn read(
    store: &RespStore,
    db: usize,
    key: &[u8],
    now: u64,
    r: &mut Reply<'_>,
) -> Result<Result<Option<Stream>, ()>, Error> {
    read_loading(store, db, key, now, Need::All, r).await
}

/// Stream `key`, a paged one loaded as `need` says.
pub(crate) async fn read_loading(
    store: &RespStore,
    db: usize,
    key: &[u8],
    now: u64,
    need: Need<'_>,
    r: &mut Reply<'_>,
) -> Result<Result<Option<Stream>, ()>, Error> {
    let _held = super::key_locks::PAGED.lock_shared(db, key).await;
    let v = store.get(db, key, now).await?;
    match stream_of(store, db, key, v.as_ref(), need).await {
        Ok(s) => Ok(Ok(s.map(|(s, _)| s))),
        Err(Fail::WrongType) => {
            r.error(errors::WRONGTYPE);
            Ok(Err(()))
        }
        Err(Fail::Store(e)) => Err(e),
    }
}

pub(crate) fn reply_entry(r: &mut Reply<'_>, e: &Entry) {
    r.array(2);
    r.bulk(&e.id.text());
    r.array(e.fields.len() * 2);
    for (f, v) in &e.fields {
        r.bulk(f);
        r.bulk(v);
    }
}

fn node_entries(shared: &Shared) -> i64 {
    shared.tunables.value("stream-node-max-entries")
}

/// Runs `name` if it is a stream command (`None` if not).
pub async fn execute(
    shared: &Shared,
    db: usize,
    name: &[u8],
    args: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> Option<Result<(), Error>> {
    let store = &*shared.store;
    let per_node = node_entries(shared);
    let done = match name {
        b"XADD" => {
            if !arity(args, 5, None, r) {
                return Some(Ok(()));
            }
            let a = match parse_add_or_trim(args, true, per_node) {
                Ok(a) => a,
                Err(msg) => {
                    r.error(msg);
                    return Some(Ok(()));
                }
            };
            // (Options may use every argument: then no fields, an arity
            // error as in Redis.)
            let fields = args.get(a.id_at + 1..).unwrap_or(&[]);
            if fields.len() < 2 || !fields.len().is_multiple_of(2) {
                r.error(errors::wrong_arity(args[0]));
                return Some(Ok(()));
            }
            if let Some((id, true)) = a.id {
                if id == Id::default() {
                    r.error("ERR The ID specified in XADD must be greater than 0-0");
                    return Some(Ok(()));
                }
            }
            let per_node = u64::try_from(per_node).unwrap_or(0);
            // Appending needs only the last node, and approximate trimming
            // drops whole nodes by their counts: the rest stays unread.
            let need = match &a.trim {
                Some(t) if !t.approx => Need::All,
                _ => Need::Tail,
            };
            update_loading(store, db, args[1], now, need, |s| {
                if s.is_none() && a.nomkstream {
                    return Ok((false, None));
                }
                let s = s.get_or_insert_with(Stream::default);
                if s.last == Id::MAX {
                    return Err("ERR The stream has exhausted the last possible ID, unable to add more items");
                }
                let id = match a.id {
                    None => {
                        let ms = now.max(s.last.ms);
                        if ms == s.last.ms {
                            s.last.next().expect("not exhausted")
                        } else {
                            Id { ms, seq: 0 }
                        }
                    }
                    Some((id, true)) => id,
                    Some((id, false)) => {
                        // ms-*: the next sequence of that millisecond.
                        if id.ms == s.last.ms {
                            match s.last.seq.checked_add(1) {
                                Some(seq) => Id { ms: id.ms, seq },
                                None => return Err("ERR The ID specified in XADD is equal or smaller than the target stream top item"),
                            }
                        } else {
                            id
                        }
                    }
                };
                if id <= s.last {
                    return Err(
                        "ERR The ID specified in XADD is equal or smaller than the target stream top item",
                    );
                }
                let e = Entry {
                    id,
                    fields: fields.chunks(2).map(|p| (p[0].to_vec(), p[1].to_vec())).collect(),
                };
                s.append(e, per_node);
                let trimmed = a.trim.as_ref().is_some_and(|t| s.trim(t) > 0);
                Ok((true, Some((id, trimmed))))
            })
            .await
            .map(|out| {
                out.map(|id| match id {
                    Some((id, trimmed)) => {
                        shared.notify(notify::STREAM, "xadd", db, args[1]);
                        if trimmed {
                            shared.notify(notify::STREAM, "xtrim", db, args[1]);
                        }
                        r.bulk(&id.text())
                    }
                    None => r.null(),
                })
            })
        }
        b"XTRIM" => {
            if !arity(args, 4, None, r) {
                return Some(Ok(()));
            }
            let a = match parse_add_or_trim(args, false, per_node) {
                Ok(a) => a,
                Err(msg) => {
                    r.error(msg);
                    return Some(Ok(()));
                }
            };
            let trim = a.trim.expect("XTRIM has a strategy");
            update(store, db, args[1], now, |s| {
                let Some(s) = s else { return Ok((false, 0)) };
                let n = s.trim(&trim);
                Ok((n > 0, n as i64))
            })
            .await
            .map(|out| {
                out.map(|n| {
                    if n > 0 {
                        shared.notify(notify::STREAM, "xtrim", db, args[1]);
                    }
                    r.integer(n)
                })
            })
        }
        b"XDEL" => {
            if !arity(args, 3, None, r) {
                return Some(Ok(()));
            }
            // The key first (a missing one answers 0 whatever the IDs).
            let exists = match read(store, db, args[1], now, r).await {
                Ok(Ok(s)) => s.is_some(),
                Ok(Err(())) => return Some(Ok(())),
                Err(e) => return Some(Err(e)),
            };
            if !exists {
                r.integer(0);
                return Some(Ok(()));
            }
            let mut ids = Vec::new();
            for a in &args[2..] {
                match parse_id(a, 0, IdForm::Strict, false) {
                    Some((id, _)) => ids.push(id),
                    None => {
                        r.error(INVALID_ID);
                        return Some(Ok(()));
                    }
                }
            }
            update(store, db, args[1], now, |s| {
                let Some(s) = s else { return Ok((false, 0)) };
                let n = ids.iter().filter(|&&id| s.delete(id)).count();
                Ok((n > 0, n as i64))
            })
            .await
            .map(|out| {
                out.map(|n| {
                    if n > 0 {
                        shared.notify(notify::STREAM, "xdel", db, args[1]);
                    }
                    r.integer(n)
                })
            })
        }
        b"XSETID" => return Some(setid(shared, db, args, now, r).await),
        b"XLEN" | b"XRANGE" | b"XREVRANGE" => {
            return Some(read_command(store, db, name, args, now, r).await)
        }
        _ => return None,
    };
    Some(done.map(|out| {
        if let Err(msg) = out {
            r.error(msg);
        }
    }))
}

/// XSETID key last-id [ENTRIESADDED n] [MAXDELETEDID id].
async fn setid(
    shared: &Shared,
    db: usize,
    args: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    let store = &*shared.store;
    if !arity(args, 3, None, r) {
        return Ok(());
    }
    let Some((id, _)) = parse_id(args[2], 0, IdForm::Strict, false) else {
        r.error(INVALID_ID);
        return Ok(());
    };
    let (mut added, mut max_deleted) = (None, None);
    let mut i = 3;
    while i < args.len() {
        let Some(&v) = args.get(i + 1) else {
            r.error(errors::SYNTAX);
            return Ok(());
        };
        match args[i].to_ascii_uppercase().as_slice() {
            b"ENTRIESADDED" => match nvdepot_resp::string2ll(v) {
                Some(n) if n >= 0 => added = Some(n as u64),
                Some(_) => {
                    r.error("ERR entries_added must be positive");
                    return Ok(());
                }
                None => {
                    r.error(errors::NOT_INTEGER);
                    return Ok(());
                }
            },
            b"MAXDELETEDID" => match parse_id(v, 0, IdForm::Strict, false) {
                Some((m, _)) => {
                    if id < m {
                        r.error(
                            "ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id",
                        );
                        return Ok(());
                    }
                    max_deleted = Some(m);
                }
                None => {
                    r.error(INVALID_ID);
                    return Ok(());
                }
            },
            _ => {
                r.error(errors::SYNTAX);
                return Ok(());
            }
        }
        i += 2;
    }
    let out = update(store, db, args[1], now, |s| {
        let Some(s) = s else {
            return Err(errors::NO_SUCH_KEY);
        };
        let len = s.len() as u64;
        if len > 0 {
            let top = s.entries().next_back().expect("not empty").id;
            if id < top {
                return Err("ERR The ID specified in XSETID is smaller than the target stream top item");
            }
            if added.is_some_and(|a| len > a) {
                return Err(
                    "ERR The entries_added specified in XSETID is smaller than the target stream length",
                );
            }
        }
        s.last = id;
        if let Some(a) = added {
            s.added = a;
        }
        if let Some(m) = max_deleted {
            s.max_deleted = m;
        }
        Ok((true, ()))
    })
    .await?;
    match out {
        Ok(()) => {
            shared.notify(notify::STREAM, "xsetid", db, args[1]);
            r.ok()
        }
        Err(msg) => r.error(msg),
    }
    Ok(())
}

async fn read_command(
    store: &RespStore,
    db: usize,
    name: &[u8],
    args: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    if name == b"XLEN" {
        if !arity(args, 2, Some(2), r) {
            return Ok(());
        }
        let Ok(s) = read_loading(store, db, args[1], now, Need::Nothing, r).await? else {
            return Ok(());
        };
        r.integer(s.map_or(0, |s| s.len() as i64));
        return Ok(());
    }
    if !arity(args, 4, None, r) {
        return Ok(());
    }
    let rev = name == b"XREVRANGE";
    let (start_arg, end_arg) = if rev {
        (args[3], args[2])
    } else {
        (args[2], args[3])
    };
    let (start, end) = match (interval_start(start_arg), interval_end(end_arg)) {
        (Err(msg), _) | (_, Err(msg)) => {
            r.error(msg);
            return Ok(());
        }
        (Ok(start), Ok(end)) => (start, end),
    };
    let mut count: i64 = -1;
    let mut j = 4;
    while j < args.len() {
        if args[j].eq_ignore_ascii_case(b"COUNT") && j + 1 < args.len() {
            let Some(n) = nvdepot_resp::string2ll(args[j + 1]) else {
                r.error(errors::NOT_INTEGER);
                return Ok(());
            };
            count = n.max(0);
            j += 2;
        } else {
            r.error(errors::SYNTAX);
            return Ok(());
        }
    }
    let need = Need::Range {
        start,
        end,
        limit: usize::try_from(count).unwrap_or(usize::MAX),
        rev,
    };
    let Ok(s) = read_loading(store, db, args[1], now, need, r).await? else {
        return Ok(());
    };
    let Some(s) = s else {
        r.array(0);
        return Ok(());
    };
    if count == 0 {
        r.null_array();
        return Ok(());
    }
    let limit = if count < 0 {
        usize::MAX
    } else {
        count as usize
    };
    let hits: Vec<&Entry> = if rev {
        s.entries()
            .rev()
            .filter(|e| e.id >= start && e.id <= end)
            .take(limit)
            .collect()
    } else {
        s.entries()
            .filter(|e| e.id >= start && e.id <= end)
            .take(limit)
            .collect()
    };
    r.array(hits.len());
    for e in hits {
        reply_entry(r, e);
    }
    Ok(())
}

/// XREAD's and XREADGROUP's arguments.
pub struct ReadArgs<'a> {
    pub count: usize,
    pub block: Option<Option<std::time::Duration>>,
    pub keys: Vec<&'a [u8]>,
    /// The ID arguments, `$` (and `>`) included.
    pub ids: Vec<&'a [u8]>,
    /// XREADGROUP's GROUP group consumer (empty for XREAD), and NOACK.
    pub group: &'a [u8],
    pub consumer: &'a [u8],
    pub noack: bool,
}

/// Parses XREAD's arguments (XREADGROUP's with `grouped`: GROUP, which it
/// requires, and NOACK, which XREAD answers a syntax error to), or the
/// error to answer.
pub fn parse_read<'a>(args: &[&'a [u8]], grouped: bool) -> Result<ReadArgs<'a>, String> {
    let mut out = ReadArgs {
        count: 0,
        block: None,
        keys: Vec::new(),
        ids: Vec::new(),
        group: b"",
        consumer: b"",
        noack: false,
    };
    let mut has_group = false;
    let mut i = 1;
    while i < args.len() {
        let more = args.len() - 1 - i;
        match args[i].to_ascii_uppercase().as_slice() {
            b"BLOCK" if more > 0 => {
                i += 1;
                let Some(ms) = nvdepot_resp::string2ll(args[i]) else {
                    return Err("ERR timeout is not an integer or out of range".into());
                };
                if ms < 0 {
                    return Err("ERR timeout is negative".into());
                }
                out.block = Some((ms > 0).then(|| std::time::Duration::from_millis(ms as u64)));
            }
            b"COUNT" if more > 0 => {
                i += 1;
                let Some(n) = nvdepot_resp::string2ll(args[i]) else {
                    return Err(errors::NOT_INTEGER.into());
                };
                out.count = n.max(0) as usize;
            }
            b"STREAMS" if more > 0 => {
                let rest = &args[i + 1..];
                if !rest.len().is_multiple_of(2) {
                    return Err(
                        "ERR Unbalanced XREAD list of streams: for each stream key an ID \
                                or '$' must be specified."
                            .into(),
                    );
                }
                let half = rest.len() / 2;
                out.keys = rest[..half].to_vec();
                out.ids = rest[half..].to_vec();
                if grouped && !has_group {
                    return Err("ERR Missing GROUP option for XREADGROUP".into());
                }
                return Ok(out);
            }
            b"GROUP" if grouped && more >= 2 => {
                out.group = args[i + 1];
                out.consumer = args[i + 2];
                has_group = true;
                i += 2;
            }
            b"NOACK" if grouped => out.noack = true,
            _ => return Err(errors::SYNTAX.into()),
        }
        i += 1;
    }
    Err(errors::SYNTAX.into())
}

/// One try of XREAD: `Ok(Ok(None))` once its reply is written (entries,
/// or an error); `Ok(Ok(Some(ids)))` when no stream has entries past its
/// ID (nothing written), with `$` resolved to each stream's last ID, for
/// the retries of a blocked XREAD.
pub async fn try_read(
    store: &RespStore,
    db: usize,
    a: &ReadArgs<'_>,
    now: u64,
    r: &mut Reply<'_>,
) -> Result<Option<Vec<Vec<u8>>>, Error> {
    let mut streams = Vec::with_capacity(a.keys.len());
    let mut resolved = Vec::with_capacity(a.keys.len());
    let limit = if a.count == 0 { usize::MAX } else { a.count };
    for (k, id) in a.keys.iter().zip(&a.ids) {
        // Only the entries past the ID are read (the ID's errors come
        // after the key's type's, as in Redis).
        let need = match parse_id(id, 0, IdForm::Strict, false) {
            Some((after, _)) if *id != b"$" => match after.next() {
                Some(start) => Need::Range {
                    start,
                    end: Id::MAX,
                    limit,
                    rev: false,
                },
                None => Need::Nothing,
            },
            _ => Need::Nothing,
        };
        let Ok(s) = read_loading(store, db, k, now, need, r).await? else {
            return Ok(None);
        };
        let after = if *id == b"$" {
            s.as_ref().map_or(Id::default(), |s| s.last)
        } else {
            match parse_id(id, 0, IdForm::Strict, false) {
                Some((id, _)) => id,
                None => {
                    r.error(INVALID_ID);
                    return Ok(None);
                }
            }
        };
        resolved.push(after.text());
        streams.push((k, s, after));
    }
    let found: Vec<(&[u8], Vec<&Entry>)> = streams
        .iter()
        .filter_map(|(k, s, after)| {
            let s = s.as_ref()?;
            let hits: Vec<&Entry> = s.entries().filter(|e| e.id > *after).take(limit).collect();
            (!hits.is_empty()).then_some((**k, hits))
        })
        .collect();
    if found.is_empty() {
        return Ok(Some(resolved));
    }
    // RESP3: a map of key to entries; RESP2: [key, entries] pairs.
    if r.resp3() {
        r.map(found.len());
    } else {
        r.array(found.len());
    }
    for (k, hits) in found {
        if !r.resp3() {
            r.array(2);
        }
        r.bulk(k);
        r.array(hits.len());
        for e in hits {
            reply_entry(r, e);
        }
    }
    Ok(None)
}
