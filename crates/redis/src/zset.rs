//! The sorted set type (Redis 7.0's `t_zset.c`), over the compact layout
//! of `compact.rs`: members ordered by (score, member) — the order Redis
//! answers in at any encoding — each item pair a member and its score as
//! the 8 bytes of an f64 (LE). This file holds the type, ZADD and the
//! commands on one key; `zset_ops.rs` those over several keys, the pops
//! and the random picks.
//!
//! OBJECT ENCODING answers `listpack` until Redis would convert (more
//! than `zset-max-listpack-entries` members, or one longer than
//! `zset-max-listpack-value`, inserted), then `skiplist` for good; a set
//! computed by a STORE command is shaped by its content, as Redis's
//! `zsetConvertToListpackIfNeeded`.

use std::cmp::Ordering;

use nvdepot_cache::resp::{Kind, RespStore, Value};
use nvdepot_cache::Error;
use nvdepot_resp::{errors, Reply};

use super::args::arity;
use super::compact::Compact;
use super::compact_update::{try_once, Escalate, Fail, Shape};
use super::notify;
use super::session::Shared;
use super::zset_pages::{self, Answer, Query};
pub use super::zset_range::{parse_score, LexRange, Range, RangeQuery, ScoreRange};
use super::zset_value::{
    decode, order, reply_items, reply_score, zadd_step, zset_of, AddFlags, Limits, Step, ZSet,
    NOT_FLOAT,
};

/// Whether `data` is a sorted set record's data.
pub fn check(data: &[u8]) -> Result<(), Error> {
    let z = decode(data)?;
    let sorted = z
        .items
        .windows(2)
        .all(|w| order(&w[0], &w[1]) == Ordering::Less);
    if !sorted || z.items.iter().any(|(s, _)| s.is_nan()) {
        return Err(Error::Envelope("sorted set members out of order".into()));
    }
    Ok(())
}

/// OBJECT ENCODING of a sorted set value.
pub fn encoding(v: &Value) -> Result<&'static str, Error> {
    if zset_pages::is_paged(v) {
        return Ok("skiplist");
    }
    let c = Compact::decode(v.data())?;
    Ok(if c.large { "skiplist" } else { "listpack" })
}

/// One atomic update of sorted set `key`: `apply` sees it (`None` when
/// missing) and says whether it changed and what to answer, or the error
/// to answer (WRONGTYPE is one too). A paged set runs `op` instead (its
/// answer made by `out`), or without one `apply` on the set read whole
/// (`zset_pages::rewrite`); a compact one the change takes past the paged
/// threshold is written paged.
pub(crate) async fn update<T>(
    store: &RespStore,
    db: usize,
    key: &[u8],
    now: u64,
    op: Option<zset_pages::Op<'_>>,
    out: impl Fn(zset_pages::Out) -> T,
    mut apply: impl FnMut(&mut Option<ZSet>) -> Result<(bool, T), &'static str>,
) -> Result<Result<T, &'static str>, Error> {
    let shape = Shape {
        is_paged: zset_pages::is_paged,
        read: zset_of,
        change: |z: Option<ZSet>, at| z.unwrap_or_default().change(at),
        should_page: |data: &[u8]| zset_pages::should_page(data[0] == 1, data.len(), key),
    };
    loop {
        match try_once(store, db, key, now, &shape, &mut apply).await? {
            (done, None) => return Ok(done),
            (done, Some(Escalate::Convert(version, data, at))) => {
                if zset_pages::convert(store, db, key, version, decode(&data)?, at).await? {
                    return Ok(done);
                }
            }
            (_, Some(Escalate::Paged)) => {
                let r = match &op {
                    Some(op) => zset_pages::write(store, db, key, now, op)
                        .await?
                        .map(|r| r.map(&out)),
                    None => zset_pages::rewrite(store, db, key, now, &mut apply).await?,
                };
                if let Some(r) = r {
                    return Ok(r);
                }
            }
        }
    }
}

/// What a read of sorted set `key` found: compact (`None` when missing),
/// or paged with this many members (read by `zset_pages::read`).
pub(crate) enum Peek {
    Compact(Option<ZSet>),
    Paged(u64),
}

/// Looks at sorted set `key`: `Ok(Err(()))` once WRONGTYPE is answered.
pub(crate) async fn peek(
    store: &RespStore,
    db: usize,
    key: &[u8],
    now: u64,
    r: &mut Reply<'_>,
) -> Result<Result<Peek, ()>, Error> {
    let v = store.get(db, key, now).await?;
    peek_value(v.as_ref(), r)
}

/// [`peek`] of a value already read.
fn peek_value(v: Option<&Value>, r: &mut Reply<'_>) -> Result<Result<Peek, ()>, Error> {
    if let Some(v) = v.filter(|v| zset_pages::is_paged(v)) {
        let meta = zset_pages::Meta::decode(v.data())?;
        return Ok(Ok(Peek::Paged(meta.members.count)));
    }
    match zset_of(v) {
        Ok(z) => Ok(Ok(Peek::Compact(z))),
        Err(Fail::WrongType) => {
            r.error(errors::WRONGTYPE);
            Ok(Err(()))
        }
        Err(Fail::Store(e)) => Err(e),
    }
}

/// The members of sorted set `key` (0 when missing): `Ok(Err(()))` once
/// WRONGTYPE is answered.
pub(crate) async fn card(
    store: &RespStore,
    db: usize,
    key: &[u8],
    now: u64,
    r: &mut Reply<'_>,
) -> Result<Result<u64, ()>, Error> {
    Ok(peek(store, db, key, now, r).await?.map(|p| match p {
        Peek::Compact(z) => z.map_or(0, |z| z.items.len() as u64),
        Peek::Paged(n) => n,
    }))
}

/// Reads sorted set `key` whole: `Ok(Err(()))` once WRONGTYPE is
/// answered.
pub(crate) async fn read(
    store: &RespStore,
    db: usize,
    key: &[u8],
    now: u64,
    r: &mut Reply<'_>,
) -> Result<Result<Option<ZSet>, ()>, Error> {
    loop {
        match peek(store, db, key, now, r).await? {
            Ok(Peek::Compact(z)) => return Ok(Ok(z)),
            Err(()) => return Ok(Err(())),
            Ok(Peek::Paged(_)) => {
                if let Some(Answer::Items(items)) =
                    zset_pages::read(store, db, key, now, &Query::All).await?
                {
                    return Ok(Ok(Some(ZSet { large: true, items })));
                }
            }
        }
    }
}

/// The answer of a paged step that counts.
fn count_of(o: zset_pages::Out) -> i64 {
    match o {
        zset_pages::Out::Count(n) => n,
        _ => unreachable!("a counting command"),
    }
}

/// Runs `name` if it is one of this file's commands (`None` if not).
pub async fn execute(
    shared: &Shared,
    db: usize,
    name: &[u8],
    args: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> Option<Result<(), Error>> {
    let store = &*shared.store;
    let limits = Limits::now(shared);
    let done = match name {
        b"ZADD" => return Some(zadd(shared, db, args, now, limits, r).await),
        b"ZINCRBY" => {
            if !arity(args, 4, Some(4), r) {
                return Some(Ok(()));
            }
            let a = [args[0], args[1], b"INCR", args[2], args[3]];
            return Some(zadd(shared, db, &a, now, limits, r).await);
        }
        b"ZREM" => {
            if !arity(args, 3, None, r) {
                return Some(Ok(()));
            }
            let op = zset_pages::Op::Rem(&args[2..]);
            let out = update(store, db, args[1], now, Some(op), count_of, |z| {
                let Some(z) = z else { return Ok((false, 0)) };
                let before = z.items.len();
                for m in &args[2..] {
                    if let Some(i) = z.find(m) {
                        z.items.remove(i);
                    }
                }
                let n = before - z.items.len();
                Ok((n > 0, n as i64))
            })
            .await;
            if let Ok(Ok(n)) = out {
                shared
                    .notify_removal(notify::ZSET, "zrem", db, args[1], n > 0, now)
                    .await;
            }
            out.map(|out| out.map(|n| r.integer(n)))
        }
        b"ZREMRANGEBYRANK" | b"ZREMRANGEBYSCORE" | b"ZREMRANGEBYLEX" => {
            if !arity(args, 4, Some(4), r) {
                return Some(Ok(()));
            }
            let range = match Range::parse(name, args[2], args[3]) {
                Ok(range) => range,
                Err(msg) => {
                    r.error(msg);
                    return Some(Ok(()));
                }
            };
            let op = zset_pages::Op::RemRange(&range);
            let out = update(store, db, args[1], now, Some(op), count_of, |z| {
                let Some(z) = z else { return Ok((false, 0)) };
                let hit = range.select(z, false);
                let n = hit.len();
                let mut i = 0;
                z.items.retain(|_| {
                    let keep = !hit.contains(&i);
                    i += 1;
                    keep
                });
                Ok((n > 0, n as i64))
            })
            .await;
            if let Ok(Ok(n)) = out {
                let event = String::from_utf8_lossy(name).to_lowercase();
                shared
                    .notify_removal(notify::ZSET, &event, db, args[1], n > 0, now)
                    .await;
            }
            out.map(|out| out.map(|n| r.integer(n)))
        }
        _ => return read_command(shared, db, name, args, now, limits, r).await,
    };
    Some(done.map(|out| {
        if let Err(msg) = out {
            r.error(msg);
        }
    }))
}

pub(crate) async fn zadd(
    shared: &Shared,
    db: usize,
    args: &[&[u8]],
    now: u64,
    limits: Limits,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    let store = &*shared.store;
    if !arity(args, 4, None, r) {
        return Ok(());
    }
    let mut f = AddFlags::default();
    let mut i = 2;
    while i < args.len() {
        match args[i].to_ascii_uppercase().as_slice() {
            b"NX" => f.nx = true,
            b"XX" => f.xx = true,
            b"GT" => f.gt = true,
            b"LT" => f.lt = true,
            b"CH" => f.ch = true,
            b"INCR" => f.incr = true,
            _ => break,
        }
        i += 1;
    }
    let pairs = &args[i..];
    if pairs.is_empty() || !pairs.len().is_multiple_of(2) {
        r.error(errors::SYNTAX);
        return Ok(());
    }
    if f.nx && f.xx {
        r.error("ERR XX and NX options at the same time are not compatible");
        return Ok(());
    }
    if (f.nx && (f.gt || f.lt)) || (f.gt && f.lt) {
        r.error("ERR GT, LT, and/or NX options at the same time are not compatible");
        return Ok(());
    }
    if f.incr && pairs.len() > 2 {
        r.error("ERR INCR option supports a single increment-element pair");
        return Ok(());
    }
    let mut scored = Vec::with_capacity(pairs.len() / 2);
    for p in pairs.chunks(2) {
        let Some(s) = parse_score(p[0]) else {
            r.error(NOT_FLOAT);
            return Ok(());
        };
        scored.push((s, p[1]));
    }
    let op = zset_pages::Op::Add {
        flags: &f,
        pairs: &scored,
    };
    let paged_out = |o| match o {
        zset_pages::Out::Added(n, last, changed) => (n, last, changed),
        _ => unreachable!("ZADD answers a count"),
    };
    let out = update(store, db, args[1], now, Some(op), paged_out, |z| {
        if z.is_none() && f.xx {
            return Ok((false, (0, None, false)));
        }
        let z = z.get_or_insert_with(ZSet::default);
        let (mut added, mut changed, mut last) = (0, 0, None);
        for &(s, m) in &scored {
            let at = z.find(m);
            last = match zadd_step(&f, at.map(|i| z.items[i].0), s)? {
                Step::Skip => None,
                Step::Same(v) => Some(v),
                Step::Add(v) => {
                    z.insert(v, m, limits);
                    added += 1;
                    Some(v)
                }
                Step::Move(v) => {
                    z.rescore(at.expect("present"), v);
                    changed += 1;
                    Some(v)
                }
            };
        }
        let n = if f.ch { added + changed } else { added };
        Ok((added + changed > 0, (n, last, added + changed > 0)))
    })
    .await?;
    if let Ok((_, _, true)) = out {
        let event = if f.incr { "zincr" } else { "zadd" };
        shared.notify(notify::ZSET, event, db, args[1]);
    }
    match out {
        Err(msg) => r.error(msg),
        Ok((_, Some(s), _)) if f.incr => reply_score(r, s),
        Ok((_, None, _)) if f.incr => r.null(),
        Ok((n, _, _)) => r.integer(n),
    }
    Ok(())
}

/// The commands that read one sorted set (and ZRANGESTORE, which writes
/// another).
async fn read_command(
    shared: &Shared,
    db: usize,
    name: &[u8],
    args: &[&[u8]],
    now: u64,
    limits: Limits,
    r: &mut Reply<'_>,
) -> Option<Result<(), Error>> {
    let store = &*shared.store;
    let (min, max) = match name {
        b"ZCARD" => (2, Some(2)),
        b"ZSCORE" | b"ZRANK" | b"ZREVRANK" => (3, Some(3)),
        b"ZMSCORE" => (3, None),
        b"ZCOUNT" | b"ZLEXCOUNT" => (4, Some(4)),
        b"ZRANGE" | b"ZREVRANGE" | b"ZRANGEBYSCORE" | b"ZREVRANGEBYSCORE" | b"ZRANGEBYLEX"
        | b"ZREVRANGEBYLEX" => (4, None),
        b"ZRANGESTORE" => (5, None),
        _ => return None,
    };
    if !arity(args, min, max, r) {
        return Some(Ok(()));
    }
    let query = match name {
        b"ZCOUNT" => ScoreRange::parse(args[2], args[3])
            .map(|s| (Range::Score(s), false))
            .ok_or("ERR min or max is not a float"),
        b"ZLEXCOUNT" => LexRange::parse(args[2], args[3])
            .map(|l| (Range::Lex(l), false))
            .ok_or("ERR min or max not valid string range item"),
        _ => Ok((Range::Rank(0, 0), false)),
    };
    let count_range = match query {
        Ok((range, _)) => range,
        Err(msg) => {
            r.error(msg);
            return Some(Ok(()));
        }
    };
    let ranged = match name {
        b"ZRANGESTORE" => Some(RangeQuery::parse(b"ZRANGESTORE", &args[2..], true)),
        b"ZRANGE" | b"ZREVRANGE" | b"ZRANGEBYSCORE" | b"ZREVRANGEBYSCORE" | b"ZRANGEBYLEX"
        | b"ZREVRANGEBYLEX" => Some(RangeQuery::parse(name, &args[1..], false)),
        _ => None,
    };
    let ranged = match ranged.transpose() {
        Ok(q) => q,
        Err(msg) => {
            r.error(msg);
            return Some(Ok(()));
        }
    };
    let src = if name == b"ZRANGESTORE" {
        args[2]
    } else {
        args[1]
    };
    let z = loop {
        let v = match store.get(db, src, now).await {
            Ok(v) => v,
            Err(e) => return Some(Err(e)),
        };
        // A compact set's scores and size: from its record's bytes.
        if let Some(v) = v.as_ref().filter(|v| {
            matches!(name, b"ZSCORE" | b"ZMSCORE" | b"ZCARD")
                && v.kind() == Kind::ZSet
                && !zset_pages::is_paged(v)
        }) {
            return Some(super::zset_range::scores_compact(
                name,
                v.data(),
                &args[2..],
                r,
            ));
        }
        match peek_value(v.as_ref(), r) {
            Err(e) => return Some(Err(e)),
            Ok(Err(())) => return Some(Ok(())),
            Ok(Ok(Peek::Compact(z))) => break z,
            Ok(Ok(Peek::Paged(_))) => {}
        }
        let q = match name {
            b"ZCARD" => Query::Card,
            b"ZSCORE" | b"ZMSCORE" => Query::Scores(&args[2..]),
            b"ZRANK" | b"ZREVRANK" => Query::Rank(args[2], name == b"ZREVRANK"),
            b"ZCOUNT" | b"ZLEXCOUNT" => Query::Count(&count_range),
            _ => Query::Range(ranged.as_ref().expect("parsed")),
        };
        match zset_pages::read(store, db, src, now, &q).await {
            Err(e) => return Some(Err(e)),
            // No longer paged: look again.
            Ok(None) => continue,
            Ok(Some(Answer::Items(items))) if name == b"ZRANGESTORE" => {
                let event = "zrangestore";
                return Some(store_range(shared, event, db, args[1], items, limits, now, r).await);
            }
            Ok(Some(Answer::Items(items))) => {
                reply_items(r, &items, ranged.expect("parsed").withscores)
            }
            Ok(Some(Answer::Int(Some(n)))) => r.integer(n),
            Ok(Some(Answer::Int(None))) => r.null(),
            Ok(Some(Answer::Scores(scores))) => {
                if name == b"ZMSCORE" {
                    r.array(scores.len());
                }
                for s in scores {
                    match s {
                        Some(s) => reply_score(r, s),
                        None => r.null(),
                    }
                }
            }
        }
        return Some(Ok(()));
    };
    if name == b"ZRANGESTORE" {
        let items = z
            .map(|z| ranged.expect("parsed").run(&z))
            .unwrap_or_default();
        let event = "zrangestore";
        return Some(store_range(shared, event, db, args[1], items, limits, now, r).await);
    }
    match name {
        b"ZCARD" => r.integer(z.map_or(0, |z| z.items.len() as i64)),
        b"ZSCORE" => match z.and_then(|z| z.score(args[2])) {
            Some(s) => reply_score(r, s),
            None => r.null(),
        },
        b"ZMSCORE" => {
            r.array(args.len() - 2);
            for m in &args[2..] {
                match z.as_ref().and_then(|z| z.score(m)) {
                    Some(s) => reply_score(r, s),
                    None => r.null(),
                }
            }
        }
        b"ZRANK" | b"ZREVRANK" => match z.as_ref().and_then(|z| z.find(args[2]).map(|i| (z, i))) {
            Some((z, i)) => r.integer(if name == b"ZRANK" {
                i as i64
            } else {
                (z.items.len() - 1 - i) as i64
            }),
            None => r.null(),
        },
        b"ZCOUNT" | b"ZLEXCOUNT" => {
            r.integer(z.map_or(0, |z| count_range.select(&z, false).len() as i64))
        }
        _ => {
            let q = ranged.expect("parsed");
            let items = z.map(|z| q.run(&z)).unwrap_or_default();
            reply_items(r, &items, q.withscores);
        }
    }
    Some(Ok(()))
}

/// ZRANGESTORE's (and GEOSEARCHSTORE's) write of the `items` it selected
/// to `dst`, with keyspace event `event` (or `del` if the empty result
/// removed `dst`).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn store_range(
    shared: &Shared,
    event: &str,
    db: usize,
    dst: &[u8],
    items: Vec<(f64, Vec<u8>)>,
    limits: Limits,
    now: u64,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    let n = items.len();
    let z = ZSet::computed(items, limits);
    let (_, done) = shared
        .store
        .update(db, dst, now, |_| (z.clone().change(0), ()))
        .await?;
    shared.notify_stored(notify::ZSET, event, db, dst, n, done);
    r.integer(n as i64);
    Ok(())
}
