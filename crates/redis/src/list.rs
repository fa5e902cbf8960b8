//! The list type (Redis 7.0's `t_list.c`): pushes, pops, ranges, LPOS,
//! LMOVE and LMPOP, over the compact layout of `compact.rs` (one record
//! per list, its elements head first). Redis 7.0 reports every list as a
//! `quicklist` (OBJECT ENCODING). The blocking forms are in `blocking.rs`:
//! they retry this module's pops.
//!
//! Commands over two keys (LMOVE, RPOPLPUSH) and over several (LMPOP) run
//! holding the exclusive pass of the isolation gate, as one step.

use std::collections::VecDeque;

use nvdepot_cache::resp::{Change, Kind, RespStore, Value};
use nvdepot_cache::Error;
use nvdepot_resp::{errors, string2ll, Reply};

use super::compact::{self, Compact};
use super::face::{arity, Shared};
use super::key_locks;
use super::list_pages::{self as pages, Found, Stop};
use super::notify;

/// Commands that must see several keys as one step.
pub fn needs_exclusive(name: &[u8]) -> bool {
    matches!(
        name,
        b"LMOVE" | b"RPOPLPUSH" | b"LMPOP" | b"BLMOVE" | b"BRPOPLPUSH" | b"BLMPOP"
    )
}

/// Commands after which a list key may have elements for blocked clients.
pub fn may_push(name: &[u8]) -> bool {
    matches!(
        name,
        b"LPUSH"
            | b"RPUSH"
            | b"LPUSHX"
            | b"RPUSHX"
            | b"LINSERT"
            | b"LMOVE"
            | b"RPOPLPUSH"
            | b"BLMOVE"
            | b"BRPOPLPUSH"
    )
}

enum Fail {
    WrongType,
    Store(Error),
}

fn list_of(v: Option<&Value>) -> Result<Option<VecDeque<Vec<u8>>>, Fail> {
    let Some(v) = v else { return Ok(None) };
    if v.kind() != Kind::List {
        return Err(Fail::WrongType);
    }
    let c = Compact::decode(v.data()).map_err(Fail::Store)?;
    Ok(Some(c.items.into()))
}

/// Whether `data` is a list record's data (as a migration sends it:
/// compact, see [`compact_data`]).
pub fn check(data: &[u8]) -> Result<(), Error> {
    Compact::decode(data).map(|_| ())
}

/// For a paged list `v` under `key`: its elements, read from all its
/// pages (under its lock). `None` for any other value.
pub(crate) async fn paged_elements(
    store: &RespStore,
    db: usize,
    key: &[u8],
    v: &Value,
) -> Result<Option<VecDeque<Vec<u8>>>, Error> {
    if v.kind() != Kind::List || !pages::is_paged(v.data()) {
        return Ok(None);
    }
    let mut attempt = 0u32;
    loop {
        let _held = key_locks::turn_shared(&mut attempt, db, key).await;
        let (m, version) = match pages::find(store, db, key, 0).await? {
            Found::Paged(_, m, version) => (m, version),
            Found::Compact(v, _) => return Ok(Some(Compact::decode(v.data())?.items.into())),
            Found::Missing(_) | Found::WrongType => {
                return Err(Error::Envelope(
                    "a paged list vanished while read whole".into(),
                ))
            }
        };
        match pages::load_all(store, db, key, m, version).await {
            Ok(l) => return Ok(Some(l)),
            Err(Stop::Retry) => continue,
            Err(Stop::Fail(e)) => return Err(e),
        }
    }
}

/// For a paged list `v` under `key`: the whole list in the compact
/// layout (what a migration sends). `None` for any other value.
pub(crate) async fn compact_data(
    store: &RespStore,
    db: usize,
    key: &[u8],
    v: &Value,
) -> Result<Option<Vec<u8>>, Error> {
    let elements = paged_elements(store, db, key, v).await?;
    Ok(elements.map(|l| {
        Compact {
            large: true,
            items: l.into(),
        }
        .encode()
    }))
}

/// Writes `list` under `key` whatever it held, paged if long (RENAME,
/// COPY, MOVE of a paged list).
pub(crate) async fn write_whole(
    store: &RespStore,
    db: usize,
    key: &[u8],
    list: &VecDeque<Vec<u8>>,
    expire_at_ms: u64,
    now: u64,
) -> Result<(), Error> {
    let mut attempt = 0u32;
    loop {
        let _held = key_locks::turn(&mut attempt, db, key).await;
        let (_, version) = store.get_for_write(db, key, now).await?;
        if pages::write_whole(store, db, key, version, None, list, expire_at_ms, _held).await? {
            return Ok(());
        }
    }
}

/// A pop's end.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum End {
    Left,
    Right,
}

impl End {
    pub fn parse(a: &[u8]) -> Option<End> {
        if a.eq_ignore_ascii_case(b"LEFT") {
            Some(End::Left)
        } else if a.eq_ignore_ascii_case(b"RIGHT") {
            Some(End::Right)
        } else {
            None
        }
    }

    /// The keyspace event of a push at this end.
    pub fn push_event(self) -> &'static str {
        match self {
            End::Left => "lpush",
            End::Right => "rpush",
        }
    }

    /// The keyspace event of a pop from this end.
    pub fn pop_event(self) -> &'static str {
        match self {
            End::Left => "lpop",
            End::Right => "rpop",
        }
    }
}

fn push(list: &mut VecDeque<Vec<u8>>, end: End, e: Vec<u8>) {
    match end {
        End::Left => list.push_front(e),
        End::Right => list.push_back(e),
    }
}

/// One atomic update of list `key`: `apply` sees the list (`None` when
/// missing) and says whether it changed and what to answer, or the error
/// to answer (WRONGTYPE is one too). The list is read whole (a paged one
/// from all its pages) and, if changed, written whole as one crash-atomic
/// step guarded by the version read (read again if another write came
/// between): for the commands that are O(N) in Redis too.
pub(crate) async fn update<T>(
    store: &RespStore,
    db: usize,
    key: &[u8],
    now: u64,
    mut apply: impl FnMut(&mut Option<VecDeque<Vec<u8>>>) -> Result<(bool, T), &'static str>,
) -> Result<Result<T, &'static str>, Error> {
    let mut attempt = 0u32;
    loop {
        let _held = key_locks::turn(&mut attempt, db, key).await;
        let (mut l, version, old, at) = match pages::find(store, db, key, now).await? {
            Found::WrongType => return Ok(Err(errors::WRONGTYPE)),
            Found::Missing(version) => (None, version, None, 0),
            Found::Compact(v, version) => {
                let items = Compact::decode(v.data())?.items.into();
                (Some(items), Some(version), None, v.expire_at_ms())
            }
            Found::Paged(v, m, version) => {
                match pages::load_all(store, db, key, m, version).await {
                    Ok(l) => (Some(l), Some(version), Some(m), v.expire_at_ms()),
                    Err(Stop::Retry) => continue,
                    Err(Stop::Fail(e)) => return Err(e),
                }
            }
        };
        match apply(&mut l) {
            Ok((true, t)) => {
                let l = l.unwrap_or_default();
                if pages::write_whole(store, db, key, version, old, &l, at, _held).await? {
                    return Ok(Ok(t));
                }
            }
            Ok((false, t)) => return Ok(Ok(t)),
            Err(msg) => return Ok(Err(msg)),
        }
    }
}

/// What a raw update does with a list's encoded data.
enum Raw {
    Keep,
    Put(Vec<u8>),
    Delete,
}

/// One atomic update of list `key` on its encoded data (`None` when
/// missing): the hot pushes and pops, without decoding every element.
async fn update_raw<T>(
    store: &RespStore,
    db: usize,
    key: &[u8],
    now: u64,
    mut apply: impl FnMut(Option<&[u8]>) -> Result<(Raw, T), &'static str>,
) -> Result<Result<T, &'static str>, Error> {
    let (out, _) = store
        .update(db, key, now, |cur| {
            let (data, at) = match cur {
                Some(v) if v.kind() != Kind::List => return (Change::Keep, Err(errors::WRONGTYPE)),
                Some(v) => (Some(v.data()), v.expire_at_ms()),
                None => (None, 0),
            };
            match apply(data) {
                Ok((Raw::Keep, t)) => (Change::Keep, Ok(t)),
                Ok((Raw::Delete, t)) => (Change::Delete, Ok(t)),
                Ok((Raw::Put(data), t)) => (
                    Change::Put {
                        kind: Kind::List,
                        data,
                        expire_at_ms: at,
                    },
                    Ok(t),
                ),
                Err(msg) => (Change::Keep, Err(msg)),
            }
        })
        .await?;
    Ok(out)
}

/// Reads list `key` whole: `Ok(Err(()))` once WRONGTYPE is answered.
pub(crate) async fn read(
    store: &RespStore,
    db: usize,
    key: &[u8],
    now: u64,
    r: &mut Reply<'_>,
) -> Result<Result<Option<VecDeque<Vec<u8>>>, ()>, Error> {
    let mut attempt = 0u32;
    loop {
        let _held = key_locks::turn_shared(&mut attempt, db, key).await;
        let v = store.get(db, key, now).await?;
        if let Some(v) = v
            .as_ref()
            .filter(|v| v.kind() == Kind::List && pages::is_paged(v.data()))
        {
            let m = pages::Meta::decode(v.data())?;
            match pages::load_all(store, db, key, m, v.version()).await {
                Ok(l) => return Ok(Ok(Some(l))),
                Err(Stop::Retry) => continue,
                Err(Stop::Fail(e)) => return Err(e),
            }
        }
        return match list_of(v.as_ref()) {
            Ok(l) => Ok(Ok(l)),
            Err(Fail::WrongType) => {
                r.error(errors::WRONGTYPE);
                Ok(Err(()))
            }
            Err(Fail::Store(e)) => Err(e),
        };
    }
}

/// The length of list `key` (`None`: missing): `Ok(Err(()))` once
/// WRONGTYPE is answered. One read of its record, whatever its layout.
pub(crate) async fn len_of(
    store: &RespStore,
    db: usize,
    key: &[u8],
    now: u64,
    r: &mut Reply<'_>,
) -> Result<Result<Option<u64>, ()>, Error> {
    let v = store.get(db, key, now).await?;
    let Some(v) = v else { return Ok(Ok(None)) };
    if v.kind() != Kind::List {
        r.error(errors::WRONGTYPE);
        return Ok(Err(()));
    }
    if pages::is_paged(v.data()) {
        return Ok(Ok(Some(pages::Meta::decode(v.data())?.len)));
    }
    let n = compact::items(v.data()).try_fold(0u64, |n, i| i.map(|_| n + 1))?;
    Ok(Ok(Some(n)))
}

/// Pushes `elems` at `end` of list `key` (only if it exists, for the X
/// forms): the new length, or WRONGTYPE. A compact list takes them
/// spliced into its record's bytes (one update, no decoding of the
/// others); one that would pass the paged threshold, and a paged one,
/// take them into its end page and metadata as one guarded commit.
pub(crate) async fn push_n(
    store: &RespStore,
    db: usize,
    key: &[u8],
    now: u64,
    end: End,
    elems: &[&[u8]],
    only_existing: bool,
) -> Result<Result<i64, &'static str>, Error> {
    let added: usize = elems.iter().map(|e| e.len() + 5).sum();
    let mut paged = false;
    let out = update_raw(store, db, key, now, |old| {
        if only_existing && old.is_none() {
            return Ok((Raw::Keep, 0));
        }
        let old = old.unwrap_or(&[1]);
        if pages::is_paged(old)
            || (old.len() + added > pages::PAGE_AT_BYTES && pages::may_page(key))
        {
            paged = true;
            return Ok((Raw::Keep, 0));
        }
        let len = compact::items(old).try_fold(0usize, |n, i| i.map(|_| n + 1));
        let len = len.map_err(|_| "ERR list record damaged")?;
        let mut out = Vec::with_capacity(old.len() + added);
        if end == End::Left {
            out.push(old[0]);
            for e in elems.iter().rev() {
                compact::push_item(&mut out, e);
            }
            out.extend_from_slice(&old[1..]);
        } else {
            out.extend_from_slice(old);
            for e in elems {
                compact::push_item(&mut out, e);
            }
        }
        Ok((Raw::Put(out), (len + elems.len()) as i64))
    })
    .await?;
    if !paged {
        return Ok(out);
    }
    let mut attempt = 0u32;
    loop {
        let _held = key_locks::turn(&mut attempt, db, key).await;
        let (list, version, at) = match pages::find(store, db, key, now).await? {
            Found::WrongType => return Ok(Err(errors::WRONGTYPE)),
            Found::Missing(_) if only_existing => return Ok(Ok(0)),
            Found::Missing(version) => (VecDeque::new(), version, 0),
            Found::Compact(v, version) => {
                let items = Compact::decode(v.data())?.items.into();
                (items, Some(version), v.expire_at_ms())
            }
            Found::Paged(v, m, version) => {
                let mut edit = pages::Edit::new(store, db, key, m, version);
                let pushed = async {
                    for e in elems {
                        match end {
                            End::Left => edit.push_front(e).await?,
                            End::Right => edit.push_back(e).await?,
                        }
                    }
                    Ok::<_, Stop>(edit.meta.len)
                }
                .await;
                let done = match pushed {
                    Ok(len) => edit.commit(v.expire_at_ms(), _held).await.map(|()| len),
                    Err(stop) => Err(stop),
                };
                match done {
                    Ok(len) => return Ok(Ok(len as i64)),
                    Err(Stop::Retry) => continue,
                    Err(Stop::Fail(e)) => return Err(e),
                }
            }
        };
        let mut list = list;
        for e in elems {
            push(&mut list, end, e.to_vec());
        }
        if pages::write_whole(store, db, key, version, None, &list, at, _held).await? {
            return Ok(Ok(list.len() as i64));
        }
    }
}

/// Pops up to `count` elements from `end` of list `key`: `None` when it
/// is missing, else what was popped (in pop order), or WRONGTYPE. A
/// paged list reads and writes only its end pages and metadata.
pub(crate) async fn pop_n(
    store: &RespStore,
    db: usize,
    key: &[u8],
    now: u64,
    end: End,
    count: usize,
) -> Result<Result<Option<Vec<Vec<u8>>>, &'static str>, Error> {
    let mut paged = false;
    let out = update_raw(store, db, key, now, |old| {
        let Some(old) = old else {
            return Ok((Raw::Keep, None));
        };
        if pages::is_paged(old) {
            paged = true;
            return Ok((Raw::Keep, None));
        }
        // A left pop reads only the items it takes (and where the next
        // starts); a right pop must find the last ones.
        let want = count.saturating_add(1);
        let all: Vec<(usize, &[u8])> = if end == End::Left {
            compact::items(old).take(want).collect::<Result<_, _>>()
        } else {
            compact::items(old).collect::<Result<_, _>>()
        }
        .map_err(|_| "ERR list record damaged")?;
        let n = count.min(all.len());
        if n == 0 {
            return Ok((Raw::Keep, Some(Vec::new())));
        }
        let (popped, rest): (Vec<Vec<u8>>, Vec<u8>) = if end == End::Left {
            let popped = all[..n].iter().map(|(_, e)| e.to_vec()).collect();
            let cut = all.get(n).map_or(old.len(), |(at, _)| *at);
            (popped, [&old[..1], &old[cut..]].concat())
        } else {
            let first = all.len() - n;
            let popped = all[first..].iter().rev().map(|(_, e)| e.to_vec()).collect();
            (popped, old[..all[first].0].to_vec())
        };
        let raw = if rest.len() <= 1 {
            Raw::Delete
        } else {
            Raw::Put(rest)
        };
        Ok((raw, Some(popped)))
    })
    .await?;
    if !paged {
        return Ok(out);
    }
    let mut attempt = 0u32;
    loop {
        let _held = key_locks::turn(&mut attempt, db, key).await;
        let (v, m, version) = match pages::find(store, db, key, now).await? {
            Found::WrongType => return Ok(Err(errors::WRONGTYPE)),
            Found::Missing(_) => return Ok(Ok(None)),
            // Written whole and small again meanwhile: the compact path.
            Found::Compact(..) => {
                drop(_held);
                return Box::pin(pop_n(store, db, key, now, end, count)).await;
            }
            Found::Paged(v, m, version) => (v, m, version),
        };
        let mut edit = pages::Edit::new(store, db, key, m, version);
        let popped = async {
            let mut popped = Vec::with_capacity(count.min(m.len as usize));
            for _ in 0..count {
                let e = match end {
                    End::Left => edit.pop_front().await?,
                    End::Right => edit.pop_back().await?,
                };
                match e {
                    Some(e) => popped.push(e),
                    None => break,
                }
            }
            Ok::<_, Stop>(popped)
        }
        .await;
        let done = match popped {
            Ok(p) if p.is_empty() => return Ok(Ok(Some(p))),
            Ok(p) => edit.commit(v.expire_at_ms(), _held).await.map(|()| p),
            Err(stop) => Err(stop),
        };
        match done {
            Ok(p) => return Ok(Ok(Some(p))),
            Err(Stop::Retry) => continue,
            Err(Stop::Fail(e)) => return Err(e),
        }
    }
}

/// A count Redis reads with `getPositiveLongFromObjectOrReply`, or the
/// error to answer (its message for a non-integer too).
fn positive(a: &[u8], msg: &'static str) -> Result<i64, &'static str> {
    match string2ll(a) {
        Some(n) if n >= 0 => Ok(n),
        _ => Err(msg),
    }
}

/// Runs `name` if it is a (non-blocking) list command (`None` if not).
pub async fn execute(
    shared: &Shared,
    db: usize,
    name: &[u8],
    args: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> Option<Result<(), Error>> {
    let store = &*shared.store;
    let done = match name {
        b"LPUSH" | b"RPUSH" | b"LPUSHX" | b"RPUSHX" => {
            if !arity(args, 3, None, r) {
                return Some(Ok(()));
            }
            let end = if name[0] == b'L' {
                End::Left
            } else {
                End::Right
            };
            let only_existing = name.ends_with(b"X");
            push_n(store, db, args[1], now, end, &args[2..], only_existing)
                .await
                .map(|out| {
                    out.map(|n| {
                        if n > 0 {
                            shared.notify(notify::LIST, end.push_event(), db, args[1]);
                        }
                        r.integer(n)
                    })
                })
        }
        b"LPOP" | b"RPOP" => {
            if !arity(args, 2, Some(3), r) {
                return Some(Ok(()));
            }
            let count = match args.get(2) {
                None => None,
                Some(a) => match positive(a, "ERR value is out of range, must be positive") {
                    Ok(n) => Some(n as usize),
                    Err(msg) => {
                        r.error(msg);
                        return Some(Ok(()));
                    }
                },
            };
            let end = if name[0] == b'L' {
                End::Left
            } else {
                End::Right
            };
            let out = pop_n(store, db, args[1], now, end, count.unwrap_or(1)).await;
            if let Ok(Ok(Some(p))) = &out {
                shared
                    .notify_removal(
                        notify::LIST,
                        end.pop_event(),
                        db,
                        args[1],
                        !p.is_empty(),
                        now,
                    )
                    .await;
            }
            out.map(|out| {
                out.map(|popped| match (popped, count) {
                    (None, None) => r.null(),
                    (None, Some(_)) => r.null_array(),
                    (Some(p), None) => r.bulk(&p[0]),
                    (Some(p), Some(_)) => {
                        r.array(p.len());
                        for e in &p {
                            r.bulk(e);
                        }
                    }
                })
            })
        }
        b"LSET" => {
            if !arity(args, 4, Some(4), r) {
                return Some(Ok(()));
            }
            // The key is looked up before the index is read (Redis's order).
            lset(store, db, args[1], args[2], args[3], now)
                .await
                .map(|out| {
                    out.map(|()| {
                        shared.notify(notify::LIST, "lset", db, args[1]);
                        r.ok()
                    })
                })
        }
        b"LREM" => {
            if !arity(args, 4, Some(4), r) {
                return Some(Ok(()));
            }
            let Some(count) = string2ll(args[2]) else {
                r.error(errors::NOT_INTEGER);
                return Some(Ok(()));
            };
            let elem = args[3];
            let out = update(store, db, args[1], now, |l| {
                let Some(l) = l else { return Ok((false, 0)) };
                let removed = remove(l, count, elem);
                Ok((removed > 0, removed as i64))
            })
            .await;
            if let Ok(Ok(n)) = out {
                shared
                    .notify_removal(notify::LIST, "lrem", db, args[1], n > 0, now)
                    .await;
            }
            out.map(|out| out.map(|n| r.integer(n)))
        }
        b"LTRIM" => {
            if !arity(args, 4, Some(4), r) {
                return Some(Ok(()));
            }
            let (Some(start), Some(stop)) = (string2ll(args[2]), string2ll(args[3])) else {
                r.error(errors::NOT_INTEGER);
                return Some(Ok(()));
            };
            let out = ltrim(store, db, args[1], start, stop, now).await;
            if let Ok(Ok(existed)) = out {
                shared
                    .notify_removal(notify::LIST, "ltrim", db, args[1], existed, now)
                    .await;
            }
            out.map(|out| out.map(|_| r.ok()))
        }
        b"LINSERT" => {
            if !arity(args, 5, Some(5), r) {
                return Some(Ok(()));
            }
            let after = if args[2].eq_ignore_ascii_case(b"AFTER") {
                true
            } else if args[2].eq_ignore_ascii_case(b"BEFORE") {
                false
            } else {
                r.error(errors::SYNTAX);
                return Some(Ok(()));
            };
            let (pivot, elem) = (args[3], args[4]);
            update(store, db, args[1], now, |l| {
                let Some(l) = l else { return Ok((false, 0)) };
                match l.iter().position(|e| e == pivot) {
                    None => Ok((false, -1)),
                    Some(i) => {
                        l.insert(i + usize::from(after), elem.to_vec());
                        Ok((true, l.len() as i64))
                    }
                }
            })
            .await
            .map(|out| {
                out.map(|n| {
                    if n > 0 {
                        shared.notify(notify::LIST, "linsert", db, args[1]);
                    }
                    r.integer(n)
                })
            })
        }
        b"LMOVE" | b"RPOPLPUSH" => {
            let (from, to) = if name == b"LMOVE" {
                if !arity(args, 5, Some(5), r) {
                    return Some(Ok(()));
                }
                match (End::parse(args[3]), End::parse(args[4])) {
                    (Some(f), Some(t)) => (f, t),
                    _ => {
                        r.error(errors::SYNTAX);
                        return Some(Ok(()));
                    }
                }
            } else {
                if !arity(args, 3, Some(3), r) {
                    return Some(Ok(()));
                }
                (End::Right, End::Left)
            };
            return Some(
                lmove(shared, db, args[1], args[2], from, to, now, r)
                    .await
                    .map(|_| ()),
            );
        }
        b"LMPOP" => {
            if !arity(args, 4, None, r) {
                return Some(Ok(()));
            }
            let spec = match MPop::parse(args, 1) {
                Ok(s) => s,
                Err(msg) => {
                    r.error(msg);
                    return Some(Ok(()));
                }
            };
            return Some(mpop(shared, db, &spec, now, r).await.map(|_| ()));
        }
        b"LLEN" | b"LINDEX" | b"LRANGE" | b"LPOS" => {
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

/// LSET: a paged list rewrites the one page holding the index.
async fn lset(
    store: &RespStore,
    db: usize,
    key: &[u8],
    index: &[u8],
    elem: &[u8],
    now: u64,
) -> Result<Result<(), &'static str>, Error> {
    let mut attempt = 0u32;
    loop {
        let _held = key_locks::turn(&mut attempt, db, key).await;
        let (v, m, version) = match pages::find(store, db, key, now).await? {
            Found::Paged(v, m, version) => (v, m, version),
            Found::WrongType => return Ok(Err(errors::WRONGTYPE)),
            Found::Missing(_) => return Ok(Err(errors::NO_SUCH_KEY)),
            Found::Compact(..) => {
                drop(_held);
                return update(store, db, key, now, |l| {
                    let Some(l) = l else {
                        return Err(errors::NO_SUCH_KEY);
                    };
                    let index = string2ll(index).ok_or(errors::NOT_INTEGER)?;
                    let Some(i) = normalize(index, l.len()) else {
                        return Err("ERR index out of range");
                    };
                    l[i] = elem.to_vec();
                    Ok((true, ()))
                })
                .await;
            }
        };
        let Some(index) = string2ll(index) else {
            return Ok(Err(errors::NOT_INTEGER));
        };
        let Some(i) = normalize_u64(index, m.len) else {
            return Ok(Err("ERR index out of range"));
        };
        let mut edit = pages::Edit::new(store, db, key, m, version);
        let done = match edit.set(i, elem).await {
            Ok(()) => edit.commit(v.expire_at_ms(), _held).await,
            Err(stop) => Err(stop),
        };
        match done {
            Ok(()) => return Ok(Ok(())),
            Err(Stop::Retry) => continue,
            Err(Stop::Fail(e)) => return Err(e),
        }
    }
}

/// LTRIM: a paged list drops whole pages from either end unread and
/// rewrites at most the two it cuts.
async fn ltrim(
    store: &RespStore,
    db: usize,
    key: &[u8],
    start: i64,
    stop: i64,
    now: u64,
) -> Result<Result<bool, &'static str>, Error> {
    let mut attempt = 0u32;
    loop {
        let _held = key_locks::turn(&mut attempt, db, key).await;
        let (v, m, version) = match pages::find(store, db, key, now).await? {
            Found::Paged(v, m, version) => (v, m, version),
            Found::WrongType => return Ok(Err(errors::WRONGTYPE)),
            Found::Missing(_) => return Ok(Ok(false)),
            Found::Compact(..) => {
                drop(_held);
                return update(store, db, key, now, |l| {
                    let Some(l) = l else {
                        return Ok((false, false));
                    };
                    let before = l.len();
                    match range(start, stop, l.len()) {
                        None => l.clear(),
                        Some((a, b)) => {
                            l.truncate(b + 1);
                            l.drain(..a);
                        }
                    }
                    Ok((l.len() != before, true))
                })
                .await;
            }
        };
        let (front, back) = match range_u64(start, stop, m.len) {
            None => (m.len, 0),
            Some((a, b)) => (a, m.len - 1 - b),
        };
        if front == 0 && back == 0 {
            return Ok(Ok(true));
        }
        let mut edit = pages::Edit::new(store, db, key, m, version);
        let trimmed = async {
            edit.trim_front(front).await?;
            edit.trim_back(back).await
        }
        .await;
        let done = match trimmed {
            Ok(()) => edit.commit(v.expire_at_ms(), _held).await,
            Err(stop) => Err(stop),
        };
        match done {
            Ok(()) => return Ok(Ok(true)),
            Err(Stop::Retry) => continue,
            Err(Stop::Fail(e)) => return Err(e),
        }
    }
}

/// [`normalize`] for a list length past `usize` on any machine.
fn normalize_u64(i: i64, len: u64) -> Option<u64> {
    let len = i64::try_from(len).ok()?;
    let i = if i < 0 { i.checked_add(len)? } else { i };
    (0..len).contains(&i).then_some(i as u64)
}

/// [`range`] for a paged list's length.
fn range_u64(start: i64, stop: i64, len: u64) -> Option<(u64, u64)> {
    let len = usize::try_from(len).ok()?;
    range(start, stop, len).map(|(a, b)| (a as u64, b as u64))
}

/// Index `i` (negative from the end) in a list of `len`, if inside.
fn normalize(i: i64, len: usize) -> Option<usize> {
    let i = if i < 0 { i + len as i64 } else { i };
    (0..len as i64).contains(&i).then_some(i as usize)
}

/// LRANGE's and LTRIM's `start..=stop` in a list of `len`, or `None`
/// when empty (Redis's clamping).
fn range(start: i64, stop: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    let mut start = if start < 0 {
        start.saturating_add(len)
    } else {
        start
    };
    let mut stop = if stop < 0 {
        stop.saturating_add(len)
    } else {
        stop
    };
    if start < 0 {
        start = 0;
    }
    if start > stop || start >= len {
        return None;
    }
    if stop >= len {
        stop = len - 1;
    }
    Some((start as usize, stop as usize))
}

/// LREM: removes up to |count| (0: all) elements equal to `elem`, from
/// the head when count >= 0, else from the tail.
fn remove(l: &mut VecDeque<Vec<u8>>, count: i64, elem: &[u8]) -> usize {
    let limit = if count == 0 {
        usize::MAX
    } else {
        count.unsigned_abs().min(usize::MAX as u64) as usize
    };
    let mut removed = 0;
    if count >= 0 {
        let mut i = 0;
        while i < l.len() && removed < limit {
            if l[i] == elem {
                l.remove(i);
                removed += 1;
            } else {
                i += 1;
            }
        }
    } else {
        let mut i = l.len();
        while i > 0 && removed < limit {
            i -= 1;
            if l[i] == elem {
                l.remove(i);
                removed += 1;
            }
        }
    }
    removed
}

/// LMOVE `src` `dst` (the caller holds the exclusive pass): the element
/// moved, if any (its reply already written).
#[allow(clippy::too_many_arguments)]
pub async fn lmove(
    shared: &Shared,
    db: usize,
    src: &[u8],
    dst: &[u8],
    from: End,
    to: End,
    now: u64,
    r: &mut Reply<'_>,
) -> Result<Option<Vec<u8>>, Error> {
    let store = &*shared.store;
    let Ok(len) = len_of(store, db, src, now, r).await? else {
        return Ok(None);
    };
    if len.unwrap_or(0) == 0 {
        r.null();
        return Ok(None);
    }
    let Ok(_) = len_of(store, db, dst, now, r).await? else {
        return Ok(None);
    };
    if src == dst && len == Some(1) {
        // Rotating a one-element list onto itself leaves it as it is
        // (Redis pushes onto the same object: never emptied, so no `del`
        // or `new` event). The element is learnt by a pop staged in a
        // scratch layer that is dropped; its write stamp is bumped (a
        // change to WATCH and client tracking, as Redis signals it).
        let scratch = std::sync::Arc::new(nvdepot_cache::staging::Staging::scratch());
        let popped = nvdepot_cache::staging::stage_async(
            &scratch,
            Box::pin(pop_n(store, db, src, now, from, 1)),
        )
        .await?;
        let Some(e) = popped.ok().flatten().and_then(|mut p| p.pop()) else {
            r.null();
            return Ok(None);
        };
        shared.notify(notify::LIST, to.push_event(), db, dst);
        shared.notify(notify::LIST, from.pop_event(), db, src);
        r.bulk(&e);
        return Ok(Some(e));
    }
    // Under the exclusive pass: nothing comes between the pop and the
    // push. Both are staged and written as one crash-atomic batch, so a
    // crash never loses the element in flight (inside a script or EXEC,
    // with theirs).
    let step = async {
        let popped = pop_n(store, db, src, now, from, 1).await?;
        let Some(e) = popped.ok().flatten().and_then(|mut p| p.pop()) else {
            return Ok(None);
        };
        push_n(store, db, dst, now, to, &[&e], false).await?.ok();
        Ok::<_, Error>(Some(e))
    };
    let atomic = super::atomic::Atomic::begin();
    let moved = atomic.run(Box::pin(step)).await;
    atomic.commit(store).await?;
    let moved = moved?;
    let Some(e) = moved else {
        r.null();
        return Ok(None);
    };
    // Redis's order: the push, then the pop (and the source's `del`).
    shared.notify(notify::LIST, to.push_event(), db, dst);
    shared
        .notify_removal(notify::LIST, from.pop_event(), db, src, true, now)
        .await;
    r.bulk(&e);
    Ok(Some(e))
}

/// LMPOP's (and BLMPOP's) arguments.
pub struct MPop<'a> {
    pub keys: Vec<&'a [u8]>,
    pub end: End,
    pub count: usize,
}

impl<'a> MPop<'a> {
    /// Parses `args` whose numkeys is at `at` (LMPOP 1, BLMPOP 2).
    pub fn parse(args: &[&'a [u8]], at: usize) -> Result<MPop<'a>, &'static str> {
        if args.len() < at + 3 {
            return Err(errors::SYNTAX);
        }
        let numkeys = match string2ll(args[at]) {
            Some(n) if n > 0 => n as usize,
            _ => return Err("ERR numkeys should be greater than 0"),
        };
        if numkeys > args.len() - at - 2 {
            return Err(errors::SYNTAX);
        }
        let keys = args[at + 1..at + 1 + numkeys].to_vec();
        let end = End::parse(args[at + 1 + numkeys]).ok_or(errors::SYNTAX)?;
        let mut count = None;
        let mut i = at + 2 + numkeys;
        while i < args.len() {
            if count.is_none() && args[i].eq_ignore_ascii_case(b"COUNT") && i + 1 < args.len() {
                match string2ll(args[i + 1]) {
                    Some(n) if n > 0 => count = Some(n as usize),
                    _ => return Err("ERR count should be greater than 0"),
                }
                i += 2;
            } else {
                return Err(errors::SYNTAX);
            }
        }
        Ok(MPop {
            keys,
            end,
            count: count.unwrap_or(1),
        })
    }
}

/// LMPOP once parsed (the caller holds the exclusive pass): pops from the
/// first non-empty list; true if it popped (its reply written), false
/// when every list is empty (nothing written).
pub async fn try_mpop(
    shared: &Shared,
    db: usize,
    spec: &MPop<'_>,
    now: u64,
    r: &mut Reply<'_>,
) -> Result<Result<bool, ()>, Error> {
    let store = &*shared.store;
    for key in &spec.keys {
        let Ok(len) = len_of(store, db, key, now, r).await? else {
            return Ok(Err(()));
        };
        if len.unwrap_or(0) == 0 {
            continue;
        }
        let popped = pop_n(store, db, key, now, spec.end, spec.count).await?;
        let Ok(Some(popped)) = popped else { continue };
        if popped.is_empty() {
            continue;
        }
        shared
            .notify_removal(notify::LIST, spec.end.pop_event(), db, key, true, now)
            .await;
        r.array(2);
        r.bulk(key);
        r.array(popped.len());
        for e in &popped {
            r.bulk(e);
        }
        return Ok(Ok(true));
    }
    Ok(Ok(false))
}

async fn mpop(
    shared: &Shared,
    db: usize,
    spec: &MPop<'_>,
    now: u64,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    if try_mpop(shared, db, spec, now, r).await? == Ok(false) {
        r.null_array();
    }
    Ok(())
}

/// The commands that read one list.
async fn read_command(
    store: &RespStore,
    db: usize,
    name: &[u8],
    args: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    let (min, max) = match name {
        b"LLEN" => (2, Some(2)),
        b"LINDEX" => (3, Some(3)),
        b"LRANGE" => (4, Some(4)),
        _ => (3, None),
    };
    if !arity(args, min, max, r) {
        return Ok(());
    }
    // LINDEX reads its index after the key (Redis's order).
    let ints = match name {
        b"LRANGE" => string2ll(args[2]).zip(string2ll(args[3])),
        _ => Some((0, 0)),
    };
    let Some((a, b)) = ints else {
        r.error(errors::NOT_INTEGER);
        return Ok(());
    };
    let pos = if name == b"LPOS" {
        match Pos::parse(&args[3..]) {
            Ok(p) => Some(p),
            Err(msg) => {
                r.error(msg);
                return Ok(());
            }
        }
    } else {
        None
    };
    if name != b"LPOS" && read_paged(store, db, name, args, (a, b), now, r).await? {
        return Ok(());
    }
    let Ok(l) = read(store, db, args[1], now, r).await? else {
        return Ok(());
    };
    if name == b"LINDEX" && l.is_none() {
        r.null();
        return Ok(());
    }
    let l = l.unwrap_or_default();
    match name {
        b"LLEN" => r.integer(l.len() as i64),
        b"LINDEX" => match string2ll(args[2]).map(|i| normalize(i, l.len())) {
            None => r.error(errors::NOT_INTEGER),
            Some(None) => r.null(),
            Some(Some(i)) => r.bulk(&l[i]),
        },
        b"LRANGE" => match range(a, b, l.len()) {
            None => r.array(0),
            Some((a, b)) => {
                r.array(b - a + 1);
                for e in l.range(a..=b) {
                    r.bulk(e);
                }
            }
        },
        _ => pos.expect("parsed").answer(&l, args[2], r),
    }
    Ok(())
}

/// LLEN, LINDEX and LRANGE of a paged list: the metadata, then only the
/// pages the answer needs (checked against the metadata after reading
/// them). False (nothing answered) when the key is not a paged list.
async fn read_paged(
    store: &RespStore,
    db: usize,
    name: &[u8],
    args: &[&[u8]],
    (start, stop): (i64, i64),
    now: u64,
    r: &mut Reply<'_>,
) -> Result<bool, Error> {
    let mut attempt = 0u32;
    loop {
        let _held = key_locks::turn_shared(&mut attempt, db, args[1]).await;
        let Some(v) = store.get(db, args[1], now).await? else {
            return Ok(false);
        };
        if v.kind() != Kind::List || !pages::is_paged(v.data()) {
            return Ok(false);
        }
        let m = pages::Meta::decode(v.data())?;
        let mut edit = pages::Edit::new(store, db, args[1], m, v.version());
        let got = match name {
            b"LLEN" => {
                r.integer(m.len as i64);
                return Ok(true);
            }
            b"LINDEX" => {
                let Some(i) = string2ll(args[2]) else {
                    r.error(errors::NOT_INTEGER);
                    return Ok(true);
                };
                let Some(i) = normalize_u64(i, m.len) else {
                    r.null();
                    return Ok(true);
                };
                edit.get(i).await.map(|e| vec![e])
            }
            _ => match range_u64(start, stop, m.len) {
                None => Ok(Vec::new()),
                Some((a, b)) => edit.range(a, b).await,
            },
        };
        let got = match got {
            Ok(got) if edit.unchanged().await? => got,
            Ok(_) | Err(Stop::Retry) => continue,
            Err(Stop::Fail(e)) => return Err(e),
        };
        if name == b"LINDEX" {
            r.bulk(&got[0]);
        } else {
            r.array(got.len());
            for e in &got {
                r.bulk(e);
            }
        }
        return Ok(true);
    }
}

/// LPOS's options.
struct Pos {
    rank: i64,
    count: Option<usize>,
    maxlen: usize,
}

impl Pos {
    fn parse(opts: &[&[u8]]) -> Result<Pos, &'static str> {
        let mut p = Pos {
            rank: 1,
            count: None,
            maxlen: 0,
        };
        let mut i = 0;
        while i < opts.len() {
            let Some(arg) = opts.get(i + 1) else {
                return Err(errors::SYNTAX);
            };
            let opt = opts[i].to_ascii_uppercase();
            match opt.as_slice() {
                b"RANK" => {
                    p.rank = string2ll(arg).ok_or(errors::NOT_INTEGER)?;
                    if p.rank == 0 {
                        return Err("ERR RANK can't be zero: use 1 to start from the first \
                                    match, 2 from the second ... or use negative to start \
                                    from the end of the list");
                    }
                }
                b"COUNT" => p.count = Some(positive(arg, "ERR COUNT can't be negative")? as usize),
                b"MAXLEN" => p.maxlen = positive(arg, "ERR MAXLEN can't be negative")? as usize,
                _ => return Err(errors::SYNTAX),
            }
            i += 2;
        }
        Ok(p)
    }

    fn answer(&self, l: &VecDeque<Vec<u8>>, elem: &[u8], r: &mut Reply<'_>) {
        let want = match self.count {
            Some(0) => usize::MAX,
            Some(n) => n,
            None => 1,
        };
        let scan = if self.maxlen == 0 {
            l.len()
        } else {
            self.maxlen.min(l.len())
        };
        // Redis negates a negative rank in a C long: i64::MIN stays
        // negative, and every match then counts (as rank -1).
        let mut skip = match self.rank {
            i64::MIN => 0,
            rank => rank.unsigned_abs() - 1,
        };
        let mut found = Vec::new();
        let indices: Box<dyn Iterator<Item = usize>> = if self.rank > 0 {
            Box::new(0..scan)
        } else {
            Box::new((l.len() - scan..l.len()).rev())
        };
        for i in indices {
            if l[i] != elem {
                continue;
            }
            if skip > 0 {
                skip -= 1;
                continue;
            }
            found.push(i);
            if found.len() >= want {
                break;
            }
        }
        match self.count {
            None => match found.first() {
                Some(&i) => r.integer(i as i64),
                None => r.null(),
            },
            Some(_) => {
                r.array(found.len());
                for i in found {
                    r.integer(i as i64);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_as_redis_clamps_them() {
        assert_eq!(range(0, -1, 3), Some((0, 2)));
        assert_eq!(range(-100, 100, 3), Some((0, 2)));
        assert_eq!(range(2, 1, 3), None);
        assert_eq!(range(3, 5, 3), None);
        assert_eq!(range(i64::MIN, i64::MAX, 3), Some((0, 2)));
        assert_eq!(range(0, 0, 0), None);
    }

    #[test]
    fn lrem_from_either_end() {
        let mut l: VecDeque<Vec<u8>> = ["a", "b", "a", "c", "a"]
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .collect();
        assert_eq!(remove(&mut l, -2, b"a"), 2);
        assert_eq!(l, ["a", "b", "c"].map(|s| s.as_bytes().to_vec()));
        assert_eq!(remove(&mut l, 0, b"a"), 1);
        assert_eq!(remove(&mut l, i64::MIN, b"b"), 1);
    }
}
