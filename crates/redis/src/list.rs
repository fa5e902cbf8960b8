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

fn change(list: VecDeque<Vec<u8>>, expire_at_ms: u64) -> Change {
    if list.is_empty() {
        return Change::Delete;
    }
    Change::Put {
        kind: Kind::List,
        data: Compact {
            large: true,
            items: list.into(),
        }
        .encode(),
        expire_at_ms,
    }
}

/// Whether `data` is a list record's data.
pub fn check(data: &[u8]) -> Result<(), Error> {
    Compact::decode(data).map(|_| ())
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
}

pub(crate) fn pop(list: &mut VecDeque<Vec<u8>>, end: End) -> Option<Vec<u8>> {
    match end {
        End::Left => list.pop_front(),
        End::Right => list.pop_back(),
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
/// to answer (WRONGTYPE is one too).
pub(crate) async fn update<T>(
    store: &RespStore,
    db: usize,
    key: &[u8],
    now: u64,
    mut apply: impl FnMut(&mut Option<VecDeque<Vec<u8>>>) -> Result<(bool, T), &'static str>,
) -> Result<Result<T, &'static str>, Error> {
    let mut damage = None;
    let (out, _) = store
        .update(db, key, now, |cur| {
            let (mut l, at) = match list_of(cur) {
                Ok(l) => (l, cur.map_or(0, Value::expire_at_ms)),
                Err(Fail::WrongType) => return (Change::Keep, Err(errors::WRONGTYPE)),
                Err(Fail::Store(e)) => {
                    damage = Some(e);
                    return (Change::Keep, Err(""));
                }
            };
            match apply(&mut l) {
                Ok((true, t)) => (change(l.unwrap_or_default(), at), Ok(t)),
                Ok((false, t)) => (Change::Keep, Ok(t)),
                Err(msg) => (Change::Keep, Err(msg)),
            }
        })
        .await?;
    match damage {
        Some(e) => Err(e),
        None => Ok(out),
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

/// Reads list `key`: `Ok(Err(()))` once WRONGTYPE is answered.
pub(crate) async fn read(
    store: &RespStore,
    db: usize,
    key: &[u8],
    now: u64,
    r: &mut Reply<'_>,
) -> Result<Result<Option<VecDeque<Vec<u8>>>, ()>, Error> {
    let v = store.get(db, key, now).await?;
    match list_of(v.as_ref()) {
        Ok(l) => Ok(Ok(l)),
        Err(Fail::WrongType) => {
            r.error(errors::WRONGTYPE);
            Ok(Err(()))
        }
        Err(Fail::Store(e)) => Err(e),
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
            let left = name[0] == b'L';
            let only_existing = name.ends_with(b"X");
            let added: usize = args[2..].iter().map(|e| e.len() + 5).sum();
            // On the encoded list: the new items spliced at one end, no
            // decoding of the others (a push costs one copy of the list).
            update_raw(store, db, args[1], now, |old| {
                if only_existing && old.is_none() {
                    return Ok((Raw::Keep, 0));
                }
                let old = old.unwrap_or(&[1]);
                let len = compact::items(old).try_fold(0usize, |n, i| i.map(|_| n + 1));
                let len = len.map_err(|_| "ERR list record damaged")?;
                let mut out = Vec::with_capacity(old.len() + added);
                if left {
                    out.push(old[0]);
                    for e in args[2..].iter().rev() {
                        compact::push_item(&mut out, e);
                    }
                    out.extend_from_slice(&old[1..]);
                } else {
                    out.extend_from_slice(old);
                    for e in &args[2..] {
                        compact::push_item(&mut out, e);
                    }
                }
                Ok((Raw::Put(out), (len + args.len() - 2) as i64))
            })
            .await
            .map(|out| out.map(|n| r.integer(n)))
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
            let left = name[0] == b'L';
            // On the encoded list: the popped items copied out, the rest
            // kept as bytes (no decoding of the others).
            update_raw(store, db, args[1], now, |old| {
                let Some(old) = old else {
                    return Ok((Raw::Keep, None));
                };
                // A left pop reads only the items it takes (and where the
                // next starts); a right pop must find the last ones.
                let want = count.unwrap_or(1).saturating_add(1);
                let all: Vec<(usize, &[u8])> = if left {
                    compact::items(old).take(want).collect::<Result<_, _>>()
                } else {
                    compact::items(old).collect::<Result<_, _>>()
                }
                .map_err(|_| "ERR list record damaged")?;
                let n = count.unwrap_or(1).min(all.len());
                if n == 0 {
                    return Ok((Raw::Keep, Some(Vec::new())));
                }
                let (popped, rest): (Vec<Vec<u8>>, Vec<u8>) = if left {
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
            .await
            .map(|out| {
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
            update(store, db, args[1], now, |l| {
                let Some(l) = l else {
                    return Err(errors::NO_SUCH_KEY);
                };
                let index = string2ll(args[2]).ok_or(errors::NOT_INTEGER)?;
                let Some(i) = normalize(index, l.len()) else {
                    return Err("ERR index out of range");
                };
                l[i] = args[3].to_vec();
                Ok((true, ()))
            })
            .await
            .map(|out| out.map(|()| r.ok()))
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
            update(store, db, args[1], now, |l| {
                let Some(l) = l else { return Ok((false, 0)) };
                let removed = remove(l, count, elem);
                Ok((removed > 0, removed as i64))
            })
            .await
            .map(|out| out.map(|n| r.integer(n)))
        }
        b"LTRIM" => {
            if !arity(args, 4, Some(4), r) {
                return Some(Ok(()));
            }
            let (Some(start), Some(stop)) = (string2ll(args[2]), string2ll(args[3])) else {
                r.error(errors::NOT_INTEGER);
                return Some(Ok(()));
            };
            update(store, db, args[1], now, |l| {
                let Some(l) = l else { return Ok((false, ())) };
                let before = l.len();
                match range(start, stop, l.len()) {
                    None => l.clear(),
                    Some((a, b)) => {
                        l.truncate(b + 1);
                        l.drain(..a);
                    }
                }
                Ok((l.len() != before, ()))
            })
            .await
            .map(|out| out.map(|()| r.ok()))
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
            .map(|out| out.map(|n| r.integer(n)))
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
                lmove(store, db, args[1], args[2], from, to, now, r)
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
            return Some(mpop(store, db, &spec, now, r).await.map(|_| ()));
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
    store: &RespStore,
    db: usize,
    src: &[u8],
    dst: &[u8],
    from: End,
    to: End,
    now: u64,
    r: &mut Reply<'_>,
) -> Result<Option<Vec<u8>>, Error> {
    let Ok(l) = read(store, db, src, now, r).await? else {
        return Ok(None);
    };
    let Some(mut l) = l.filter(|l| !l.is_empty()) else {
        r.null();
        return Ok(None);
    };
    let Ok(_) = read(store, db, dst, now, r).await? else {
        return Ok(None);
    };
    let e = pop(&mut l, from).expect("not empty");
    let moved = e.clone();
    if src == dst {
        update(store, db, src, now, |cur| {
            let cur = cur.get_or_insert_with(VecDeque::new);
            pop(cur, from);
            push(cur, to, e.clone());
            Ok((true, ()))
        })
        .await?
        .ok();
    } else {
        update(store, db, src, now, |cur| {
            let gone = cur.as_mut().and_then(|c| pop(c, from)).is_some();
            Ok((gone, ()))
        })
        .await?
        .ok();
        update(store, db, dst, now, |cur| {
            push(cur.get_or_insert_with(VecDeque::new), to, e.clone());
            Ok((true, ()))
        })
        .await?
        .ok();
    }
    r.bulk(&moved);
    Ok(Some(moved))
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
    store: &RespStore,
    db: usize,
    spec: &MPop<'_>,
    now: u64,
    r: &mut Reply<'_>,
) -> Result<Result<bool, ()>, Error> {
    for key in &spec.keys {
        let Ok(l) = read(store, db, key, now, r).await? else {
            return Ok(Err(()));
        };
        if l.is_none_or(|l| l.is_empty()) {
            continue;
        }
        let popped = update(store, db, key, now, |l| {
            let Some(l) = l else {
                return Ok((false, Vec::new()));
            };
            let n = spec.count.min(l.len());
            Ok((n > 0, (0..n).filter_map(|_| pop(l, spec.end)).collect()))
        })
        .await?;
        let Ok(popped) = popped else { continue };
        if popped.is_empty() {
            continue;
        }
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
    store: &RespStore,
    db: usize,
    spec: &MPop<'_>,
    now: u64,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    if try_mpop(store, db, spec, now, r).await? == Ok(false) {
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
