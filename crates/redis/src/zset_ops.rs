//! Sorted set commands over several keys (ZUNION, ZINTER, ZDIFF and their
//! STORE forms, ZINTERCARD, ZMPOP), the pops (ZPOPMIN/MAX and the tries of
//! the blocking forms, see `blocking.rs`), ZRANDMEMBER and ZSCAN. The
//! multi-key ones run holding the exclusive pass of the isolation gate.

use std::collections::HashMap;

use nvdepot_cache::resp::{Kind, RespStore};
use nvdepot_cache::Error;
use nvdepot_resp::{errors, string2ll, Reply};
use rand::Rng;

use super::args::arity;
use super::notify;
use super::paged_scan;
use super::scan::ScanOptions;
use super::session::Shared;
use super::zset::{self, parse_score, read, update};
use super::zset_pages;
use super::zset_value::{reply_items, reply_score, Limits, ZSet};

/// Commands that must see several keys as one step.
pub fn needs_exclusive(name: &[u8]) -> bool {
    matches!(
        name,
        b"ZUNION"
            | b"ZINTER"
            | b"ZDIFF"
            | b"ZUNIONSTORE"
            | b"ZINTERSTORE"
            | b"ZDIFFSTORE"
            | b"ZINTERCARD"
            | b"ZMPOP"
            | b"BZMPOP"
            | b"ZRANGESTORE"
    )
}

/// Commands after which a key may have members for a blocked client.
pub fn may_add(name: &[u8]) -> bool {
    matches!(
        name,
        b"ZADD"
            | b"ZINCRBY"
            | b"ZUNIONSTORE"
            | b"ZINTERSTORE"
            | b"ZDIFFSTORE"
            | b"ZRANGESTORE"
            | b"GEOADD"
            | b"GEOSEARCHSTORE"
    )
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
    Some(match name {
        b"ZPOPMIN" | b"ZPOPMAX" => {
            if !arity(args, 2, None, r) {
                return Some(Ok(()));
            }
            if args.len() > 3 {
                r.error(errors::SYNTAX);
                return Some(Ok(()));
            }
            let count = match args.get(2) {
                None => None,
                Some(a) => match string2ll(a) {
                    Some(n) if n >= 0 => Some(n as usize),
                    _ => {
                        r.error("ERR value is out of range, must be positive");
                        return Some(Ok(()));
                    }
                },
            };
            let max = name == b"ZPOPMAX";
            match pop(shared, db, args[1], max, count.unwrap_or(1), now).await {
                Err(e) => Err(e),
                Ok(Err(msg)) => {
                    r.error(msg);
                    Ok(())
                }
                Ok(Ok(items)) => {
                    if count.is_some() {
                        reply_items(r, &items, true);
                    } else {
                        // Without a count: one flat [member, score].
                        r.array(items.len() * 2);
                        for (s, m) in &items {
                            r.bulk(m);
                            reply_score(r, *s);
                        }
                    }
                    Ok(())
                }
            }
        }
        b"ZMPOP" => {
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
            match try_mpop(shared, db, &spec, now, r).await {
                Ok(Ok(false)) => {
                    r.null_array();
                    Ok(())
                }
                Ok(_) => Ok(()),
                Err(e) => Err(e),
            }
        }
        b"ZUNION" | b"ZINTER" | b"ZDIFF" | b"ZINTERCARD" => {
            if !arity(args, 3, None, r) {
                return Some(Ok(()));
            }
            combine(shared, db, name, args, None, now, limits, r).await
        }
        b"ZUNIONSTORE" | b"ZINTERSTORE" | b"ZDIFFSTORE" => {
            if !arity(args, 4, None, r) {
                return Some(Ok(()));
            }
            let op = &name[..name.len() - 5];
            let dst = Some(args[1]);
            combine(shared, db, op, &args[1..], dst, now, limits, r).await
        }
        b"ZRANDMEMBER" => randmember(store, db, args, now, r).await,
        b"ZSCAN" => zscan(store, db, args, now, r).await,
        _ => return None,
    })
}

/// Pops `count` members from the low (or, `max`, high) end of `key`,
/// with its keyspace events (`zpopmin`/`zpopmax`, then `del` if emptied).
pub async fn pop(
    shared: &Shared,
    db: usize,
    key: &[u8],
    max: bool,
    count: usize,
    now: u64,
) -> Result<Result<Vec<(f64, Vec<u8>)>, &'static str>, Error> {
    let store = &*shared.store;
    let op = zset_pages::Op::Pop { max, count };
    let out = |o| match o {
        zset_pages::Out::Items(items) => items,
        _ => unreachable!("a pop answers members"),
    };
    let out = update(store, db, key, now, Some(op), out, |z| {
        let Some(z) = z else {
            return Ok((false, Vec::new()));
        };
        let n = count.min(z.items.len());
        let popped: Vec<(f64, Vec<u8>)> = if max {
            let at = z.items.len() - n;
            z.items.drain(at..).rev().collect()
        } else {
            z.items.drain(..n).collect()
        };
        Ok((n > 0, popped))
    })
    .await;
    if let Ok(Ok(popped)) = &out {
        let event = if max { "zpopmax" } else { "zpopmin" };
        shared
            .notify_removal(notify::ZSET, event, db, key, !popped.is_empty(), now)
            .await;
    }
    out
}

/// ZMPOP's (and BZMPOP's) arguments.
pub struct MPop<'a> {
    pub keys: Vec<&'a [u8]>,
    pub max: bool,
    pub count: usize,
}

impl<'a> MPop<'a> {
    /// Parses `args` whose numkeys is at `at` (ZMPOP 1, BZMPOP 2).
    pub fn parse(args: &[&'a [u8]], at: usize) -> Result<MPop<'a>, &'static str> {
        let (keys, max, count) = super::args::mpop_args(args, at, |end| {
            if end.eq_ignore_ascii_case(b"MAX") {
                Some(true)
            } else if end.eq_ignore_ascii_case(b"MIN") {
                Some(false)
            } else {
                None
            }
        })?;
        Ok(MPop { keys, max, count })
    }
}

/// ZMPOP once parsed: pops from the first non-empty sorted set; true if
/// it popped (its reply written), false when all are empty (nothing
/// written), `Err(())` once WRONGTYPE is answered.
pub async fn try_mpop(
    shared: &Shared,
    db: usize,
    spec: &MPop<'_>,
    now: u64,
    r: &mut Reply<'_>,
) -> Result<Result<bool, ()>, Error> {
    let store = &*shared.store;
    for key in &spec.keys {
        let Ok(n) = zset::card(store, db, key, now, r).await? else {
            return Ok(Err(()));
        };
        if n == 0 {
            continue;
        }
        let Ok(popped) = pop(shared, db, key, spec.max, spec.count, now).await? else {
            continue;
        };
        if popped.is_empty() {
            continue;
        }
        r.array(2);
        r.bulk(key);
        r.array(popped.len());
        for (s, m) in &popped {
            r.array(2);
            r.bulk(m);
            reply_score(r, *s);
        }
        return Ok(Ok(true));
    }
    Ok(Ok(false))
}

/// How ZUNION and ZINTER combine a member's scores.
#[derive(Clone, Copy)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

fn aggregate(how: Aggregate, a: f64, b: f64) -> f64 {
    match how {
        Aggregate::Sum => {
            let s = a + b;
            // Redis: inf + -inf is 0, not NaN.
            if s.is_nan() {
                0.0
            } else {
                s
            }
        }
        Aggregate::Min => a.min(b),
        Aggregate::Max => a.max(b),
    }
}

/// Reads an input of ZUNION & co.: a sorted set, or a set (members score
/// 1), or missing (empty); `Ok(Err(()))` once WRONGTYPE is answered.
async fn input(
    store: &RespStore,
    db: usize,
    key: &[u8],
    now: u64,
    r: &mut Reply<'_>,
) -> Result<Result<Vec<(f64, Vec<u8>)>, ()>, Error> {
    let Some(v) = store.get(db, key, now).await? else {
        return Ok(Ok(Vec::new()));
    };
    match v.kind() {
        Kind::ZSet => Ok(read(store, db, key, now, r)
            .await?
            .map(|z| z.map(|z| z.items).unwrap_or_default())),
        Kind::Set => Ok(super::set::read(store, db, key, now, r).await?.map(|s| {
            s.map_or_else(Vec::new, |s| {
                s.members.into_iter().map(|m| (1.0, m)).collect()
            })
        })),
        _ => {
            r.error(errors::WRONGTYPE);
            Ok(Err(()))
        }
    }
}

/// ZUNION, ZINTER, ZDIFF, ZINTERCARD (`op`; `args` from the numkeys on,
/// after the command name for the plain forms, after the destination for
/// the STORE forms: `args[0]` is skipped either way).
#[allow(clippy::too_many_arguments)]
async fn combine(
    shared: &Shared,
    db: usize,
    op: &[u8],
    args: &[&[u8]],
    dst: Option<&[u8]>,
    now: u64,
    limits: Limits,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    let store = &*shared.store;
    let full = match dst {
        Some(_) => [&op.to_ascii_lowercase()[..], b"store"].concat(),
        None => op.to_ascii_lowercase(),
    };
    let card = op == b"ZINTERCARD";
    let Some(n) = string2ll(args[1]) else {
        r.error(errors::NOT_INTEGER);
        return Ok(());
    };
    if n < 1 {
        r.error(format!(
            "ERR at least 1 input key is needed for '{}' command",
            String::from_utf8_lossy(&full)
        ));
        return Ok(());
    }
    let n = n as usize;
    if n > args.len() - 2 {
        r.error(errors::SYNTAX);
        return Ok(());
    }
    let keys = &args[2..2 + n];
    let mut inputs = Vec::with_capacity(n);
    for k in keys {
        let Ok(items) = input(store, db, k, now, r).await? else {
            return Ok(());
        };
        inputs.push(items);
    }
    let mut weights = vec![1.0; n];
    let mut how = Aggregate::Sum;
    let mut withscores = false;
    let mut limit = 0usize;
    let mut j = 2 + n;
    while j < args.len() {
        let left = args.len() - j;
        let opt = args[j].to_ascii_uppercase();
        let plain = op != b"ZDIFF" && !card;
        match opt.as_slice() {
            b"WEIGHTS" if plain && left > n => {
                for (i, w) in weights.iter_mut().enumerate() {
                    match parse_score(args[j + 1 + i]) {
                        Some(v) => *w = v,
                        None => {
                            r.error("ERR weight value is not a float");
                            return Ok(());
                        }
                    }
                }
                j += 1 + n;
            }
            b"AGGREGATE" if plain && left >= 2 => {
                how = match args[j + 1].to_ascii_uppercase().as_slice() {
                    b"SUM" => Aggregate::Sum,
                    b"MIN" => Aggregate::Min,
                    b"MAX" => Aggregate::Max,
                    _ => {
                        r.error(errors::SYNTAX);
                        return Ok(());
                    }
                };
                j += 2;
            }
            b"WITHSCORES" if dst.is_none() && !card => {
                withscores = true;
                j += 1;
            }
            b"LIMIT" if card && left >= 2 => {
                match string2ll(args[j + 1]) {
                    Some(l) if l >= 0 => limit = l as usize,
                    _ => {
                        r.error("ERR LIMIT can't be negative");
                        return Ok(());
                    }
                }
                j += 2;
            }
            _ => {
                r.error(errors::SYNTAX);
                return Ok(());
            }
        }
    }
    if op != b"ZDIFF" {
        // Redis combines the inputs smallest first (glibc's qsort is a
        // stable merge sort here): the order of a float sum's terms.
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by_key(|&i| inputs[i].len());
        inputs = order
            .iter()
            .map(|&i| std::mem::take(&mut inputs[i]))
            .collect();
        weights = order.iter().map(|&i| weights[i]).collect();
    }
    let weighted = |w: f64, s: f64| {
        let v = w * s;
        if v.is_nan() {
            0.0
        } else {
            v
        }
    };
    let mut result: Vec<(f64, Vec<u8>)> = match op {
        b"ZUNION" => {
            let mut acc: HashMap<Vec<u8>, f64> = HashMap::new();
            for (items, &w) in inputs.iter().zip(&weights) {
                for (s, m) in items {
                    let v = weighted(w, *s);
                    acc.entry(m.clone())
                        .and_modify(|cur| *cur = aggregate(how, *cur, v))
                        .or_insert(v);
                }
            }
            acc.into_iter().map(|(m, s)| (s, m)).collect()
        }
        b"ZDIFF" => {
            let others: std::collections::HashSet<&[u8]> = inputs[1..]
                .iter()
                .flat_map(|i| i.iter().map(|(_, m)| m.as_slice()))
                .collect();
            inputs[0]
                .iter()
                .filter(|(_, m)| !others.contains(m.as_slice()))
                .cloned()
                .collect()
        }
        _ => {
            let maps: Vec<HashMap<&[u8], f64>> = inputs
                .iter()
                .map(|i| i.iter().map(|(s, m)| (m.as_slice(), *s)).collect())
                .collect();
            let mut out = Vec::new();
            for (s, m) in &inputs[0] {
                let mut v = weighted(weights[0], *s);
                let mut all = true;
                for (i, map) in maps.iter().enumerate().skip(1) {
                    match map.get(m.as_slice()) {
                        Some(&o) => v = aggregate(how, v, weighted(weights[i], o)),
                        None => {
                            all = false;
                            break;
                        }
                    }
                }
                if all {
                    out.push((v, m.clone()));
                }
            }
            out
        }
    };
    if card {
        let c = result.len();
        r.integer(if limit == 0 { c } else { c.min(limit) } as i64);
        return Ok(());
    }
    result.sort_by(super::zset_value::order);
    match dst {
        None => reply_items(r, &result, withscores),
        Some(dst) => {
            let n = result.len();
            let z = ZSet::computed(result, limits);
            let (_, done) = store
                .update(db, dst, now, |_| (z.clone().change(0), ()))
                .await?;
            let event = String::from_utf8_lossy(&full).into_owned();
            shared.notify_stored(notify::ZSET, &event, db, dst, n, done);
            r.integer(n as i64);
        }
    }
    Ok(())
}

async fn randmember(
    store: &RespStore,
    db: usize,
    args: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    if !arity(args, 2, None, r) {
        return Ok(());
    }
    let mut count = None;
    if args.len() > 2 {
        let Some(n) = string2ll(args[2]) else {
            r.error(errors::NOT_INTEGER);
            return Ok(());
        };
        if n == i64::MIN {
            r.error(
                "ERR value is out of range, value must between -9223372036854775807 \
                 and 9223372036854775807",
            );
            return Ok(());
        }
        let withscores = match args.len() {
            3 => false,
            4 if args[3].eq_ignore_ascii_case(b"WITHSCORES") => true,
            _ => {
                r.error(errors::SYNTAX);
                return Ok(());
            }
        };
        if withscores && n.unsigned_abs() > (i64::MAX / 2) as u64 {
            r.error("ERR value is out of range");
            return Ok(());
        }
        count = Some((n, withscores));
    }
    let Ok(z) = read(store, db, args[1], now, r).await? else {
        return Ok(());
    };
    let items = z.map(|z| z.items).unwrap_or_default();
    let mut rng = rand::thread_rng();
    let Some((n, withscores)) = count else {
        match items.len() {
            0 => r.null(),
            len => r.bulk(&items[rng.gen_range(0..len)].1),
        }
        return Ok(());
    };
    let chosen: Vec<(f64, Vec<u8>)> = super::args::random_picks(items.len(), n)
        .into_iter()
        .map(|i| items[i].clone())
        .collect();
    reply_items(r, &chosen, withscores);
    Ok(())
}

/// ZSCAN: a compact sorted set whole at once, cursor 0 (as Redis answers
/// for a listpack), a paged one a few member buckets per call
/// (`paged_scan.rs`); scores as `%.17g` text.
async fn zscan(
    store: &RespStore,
    db: usize,
    args: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    if !arity(args, 3, None, r) {
        return Ok(());
    }
    let Some(cursor) = super::scan::parse_cursor(args[2]) else {
        r.error("ERR invalid cursor");
        return Ok(());
    };
    // A paged sorted set: a few member buckets per call (`paged_scan.rs`).
    let v = store.get(db, args[1], now).await?;
    if v.is_some_and(|v| v.kind() == Kind::ZSet && zset_pages::is_paged(&v)) {
        let score = |v: &[u8]| match <[u8; 8]>::try_from(v) {
            Ok(bits) => Ok(Some(
                nvdepot_resp::format_double(f64::from_le_bytes(bits)).into_bytes(),
            )),
            Err(_) => Err(Error::Envelope(
                "paged sorted set: a member's score is not 8 bytes".into(),
            )),
        };
        let meta_of = |d: &[u8]| zset_pages::Meta::decode(d).map(|m| m.members);
        let done =
            paged_scan::answer_step(store, Kind::ZSet, db, args, cursor, now, meta_of, r, score);
        if done.await? {
            return Ok(());
        }
    }
    let Ok(z) = read(store, db, args[1], now, r).await? else {
        return Ok(());
    };
    let Some(z) = z else {
        r.array(2);
        r.bulk(b"0");
        r.array(0);
        return Ok(());
    };
    let opts = match ScanOptions::parse(&args[3..], false) {
        Ok(o) => o,
        Err(msg) => {
            r.error(msg);
            return Ok(());
        }
    };
    let hits: Vec<&(f64, Vec<u8>)> = z.items.iter().filter(|(_, m)| opts.matches(m)).collect();
    r.array(2);
    r.bulk(b"0");
    r.array(hits.len() * 2);
    for (s, m) in hits {
        r.bulk(m);
        r.bulk(nvdepot_resp::format_double(*s).as_bytes());
    }
    Ok(())
}
