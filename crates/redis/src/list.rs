//! The list type (Redis 7.0's `t_list.c`): pushes and pops, LINSERT,
//! LREM and the whole-list steps, over the compact layout of `compact.rs`
//! (one record per list, its elements head first) or the paged one of
//! `list_pages.rs`. Redis 7.0 reports every list as a `quicklist` (OBJECT
//! ENCODING). Beside it: the reads (`list_read.rs`: LLEN, LINDEX, LRANGE,
//! LPOS), LSET and LTRIM (`list_edit.rs`), the commands over several keys
//! (`list_move.rs`: LMOVE, RPOPLPUSH, LMPOP, each one step under the
//! exclusive pass of the isolation gate), and the blocking forms
//! (`blocking.rs`), which retry this module's pops.

use std::collections::VecDeque;

use nvdepot_cache::resp::{Change, Kind, RespStore, Value};
use nvdepot_cache::Error;
use nvdepot_resp::{errors, string2ll, Reply};

use super::args::arity;
use super::compact::{self, Compact};
use super::compact_update::Fail;
use super::key_locks;
use super::list_combine::{self, Done, Step};
use super::list_pages::{self as pages, Found, Stop};
use super::notify;
use super::session::Shared;

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
        // Only the store's last decision counts (it may decide again).
        paged = false;
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
    let step = Step::Push {
        left: end == End::Left,
        elems: elems.iter().map(|e| e.to_vec()).collect(),
    };
    match list_combine::run(store, db, key, now, step).await? {
        Some(Done::Pushed(len)) => return Ok(Ok(len)),
        Some(Done::Popped(_)) => unreachable!("a push answered as a pop"),
        None => {}
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
        // Only the store's last decision counts (it may decide again).
        paged = false;
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
    if count > 0 {
        let left = end == End::Left;
        match list_combine::run(store, db, key, now, Step::Pop { left, count }).await? {
            Some(Done::Popped(p)) => return Ok(Ok(Some(p))),
            Some(Done::Pushed(_)) => unreachable!("a pop answered as a push"),
            None => {}
        }
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
pub(super) fn positive(a: &[u8], msg: &'static str) -> Result<i64, &'static str> {
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
        _ => return None,
    };
    Some(done.map(|out| {
        if let Err(msg) = out {
            r.error(msg);
        }
    }))
}

/// [`normalize`] for a list length past `usize` on any machine.
pub(super) fn normalize_u64(i: i64, len: u64) -> Option<u64> {
    let len = i64::try_from(len).ok()?;
    let i = if i < 0 { i.checked_add(len)? } else { i };
    (0..len).contains(&i).then_some(i as u64)
}

/// [`range`] for a paged list's length.
pub(super) fn range_u64(start: i64, stop: i64, len: u64) -> Option<(u64, u64)> {
    let len = usize::try_from(len).ok()?;
    range(start, stop, len).map(|(a, b)| (a as u64, b as u64))
}

/// Index `i` (negative from the end) in a list of `len`, if inside.
pub(super) fn normalize(i: i64, len: usize) -> Option<usize> {
    let i = if i < 0 { i + len as i64 } else { i };
    (0..len as i64).contains(&i).then_some(i as usize)
}

/// LRANGE's and LTRIM's `start..=stop` in a list of `len`, or `None`
/// when empty (Redis's clamping).
pub(super) fn range(start: i64, stop: i64, len: usize) -> Option<(usize, usize)> {
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
