//! SORT and SORT_RO: the elements of a list, set or sorted set, ordered by
//! their own value or by weights looked up through a `BY` pattern,
//! numerically or (ALPHA) by bytes, cut by LIMIT, each given as itself or
//! as the values `GET` patterns look up, or stored as a list (STORE), as
//! Redis 7.0's `sort.c` does (its option parsing, LIMIT clamping,
//! tie-breaks, errors and `BY nosort` orders).
//!
//! The command runs holding the exclusive pass of the gate (`face.rs`
//! `needs_exclusive`): its reads of the key and of every pattern's keys
//! see one state, as in Redis; the stored list is one commit.

use std::cmp::Ordering;

use nvdepot_cache::resp::Kind;
use nvdepot_cache::Error;
use nvdepot_resp::{errors, Reply};

use super::args::{arity, int_arg};
use super::session::Shared;

enum Source {
    List(Vec<Vec<u8>>),
    Set(Vec<Vec<u8>>),
    ZSet(Vec<Vec<u8>>),
}

/// SORT key [BY pattern] [LIMIT offset count] [GET pattern …] [ASC|DESC]
/// [ALPHA] [STORE destination], and SORT_RO (no STORE).
pub async fn sort(
    shared: &Shared,
    db: usize,
    args: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    if !arity(args, 2, None, r) {
        return Ok(());
    }
    let readonly = args[0].eq_ignore_ascii_case(b"SORT_RO");
    let cluster = shared.cluster.is_some();
    let (mut desc, mut alpha, mut dontsort) = (false, false, false);
    let (mut limit_start, mut limit_count) = (0i64, -1i64);
    let mut by: Option<&[u8]> = None;
    let mut gets: Vec<&[u8]> = Vec::new();
    let mut store: Option<&[u8]> = None;
    let mut j = 2;
    while j < args.len() {
        let left = args.len() - j - 1;
        let opt = args[j].to_ascii_uppercase();
        match opt.as_slice() {
            b"ASC" => desc = false,
            b"DESC" => desc = true,
            b"ALPHA" => alpha = true,
            b"LIMIT" if left >= 2 => {
                let (Some(a), Some(b)) = (int_arg(args[j + 1]), int_arg(args[j + 2])) else {
                    r.error(errors::NOT_INTEGER);
                    return Ok(());
                };
                (limit_start, limit_count) = (a, b);
                j += 2;
            }
            b"STORE" if !readonly && left >= 1 => {
                store = Some(args[j + 1]);
                j += 1;
            }
            b"BY" if left >= 1 => {
                by = Some(args[j + 1]);
                // A pattern without `*` sorts nothing: the natural order.
                if !c_str(args[j + 1]).contains(&b'*') {
                    dontsort = true;
                } else if cluster {
                    r.error("ERR BY option of SORT denied in Cluster mode.");
                    return Ok(());
                }
                j += 1;
            }
            b"GET" if left >= 1 => {
                if cluster {
                    r.error("ERR GET option of SORT denied in Cluster mode.");
                    return Ok(());
                }
                gets.push(args[j + 1]);
                j += 1;
            }
            _ => {
                r.error(errors::SYNTAX);
                return Ok(());
            }
        }
        j += 1;
    }
    let Some(source) = load(shared, db, args[1], now, r).await? else {
        return Ok(());
    };
    // A set has no order of its own: stored or in a script, it is sorted
    // (as bytes) so that the result is the same everywhere (Redis 7.0).
    if dontsort && matches!(source, Source::Set(_)) && store.is_some() {
        (dontsort, alpha, by) = (false, true, None);
    }
    let (natural, elements) = match source {
        Source::List(e) | Source::ZSet(e) => (true, e),
        Source::Set(e) => (false, e),
    };
    let len = elements.len() as i64;
    let mut start = limit_start.max(0);
    let mut end = if limit_count < 0 {
        len - 1
    } else {
        start.saturating_add(limit_count - 1)
    };
    if start >= len {
        start = len - 1;
        end = len - 2;
    }
    end = end.min(len - 1);
    let mut order: Vec<usize> = (0..elements.len()).collect();
    if dontsort {
        // Lists and sorted sets keep their order, DESC reversing it.
        if natural && desc {
            order.reverse();
        }
    } else {
        let weights = match weights(shared, db, &elements, by, alpha, now).await? {
            Ok(w) => w,
            Err(()) => {
                r.error("ERR One or more scores can't be converted into double");
                return Ok(());
            }
        };
        order.sort_by(|&a, &b| {
            let c = compare(&weights[a], &weights[b], &elements[a], &elements[b]);
            if desc {
                c.reverse()
            } else {
                c
            }
        });
    }
    let chosen: &[usize] = if end >= start && start >= 0 {
        &order[start as usize..=end as usize]
    } else {
        &[]
    };
    // Each chosen element, or what each GET pattern finds for it.
    let mut out: Vec<Option<Vec<u8>>> = Vec::new();
    for &i in chosen {
        if gets.is_empty() {
            out.push(Some(elements[i].clone()));
        }
        for pattern in &gets {
            out.push(lookup(shared, db, pattern, &elements[i], now).await?);
        }
    }
    match store {
        None => {
            r.array(out.len());
            for v in &out {
                match v {
                    Some(v) => r.bulk(v),
                    None => r.null(),
                }
            }
        }
        Some(dest) => {
            let list: std::collections::VecDeque<Vec<u8>> =
                out.into_iter().map(Option::unwrap_or_default).collect();
            let n = list.len();
            if n == 0 {
                // An empty result deletes the destination (DEL's event).
                if shared.store.delete(db, dest, now).await? {
                    shared.notify(super::notify::GENERIC, "del", db, dest);
                }
            } else {
                super::list::write_whole(&shared.store, db, dest, &list, 0, now).await?;
                shared.notify(super::notify::LIST, "sortstore", db, dest);
            }
            r.integer(n as i64);
        }
    }
    Ok(())
}

/// A pattern or element up to its first NUL byte (Redis reads them as C
/// strings).
fn c_str(b: &[u8]) -> &[u8] {
    b.iter().position(|&c| c == 0).map_or(b, |i| &b[..i])
}

/// The elements of `key` (`None` once an error is answered; a missing
/// key is an empty list).
async fn load(
    shared: &Shared,
    db: usize,
    key: &[u8],
    now: u64,
    r: &mut Reply<'_>,
) -> Result<Option<Source>, Error> {
    let store = &*shared.store;
    let Some(v) = store.get(db, key, now).await? else {
        return Ok(Some(Source::List(Vec::new())));
    };
    Ok(match v.kind() {
        Kind::List => match super::list::read(store, db, key, now, r).await? {
            Ok(l) => Some(Source::List(l.map(Vec::from).unwrap_or_default())),
            Err(()) => None,
        },
        Kind::Set => match super::set::read(store, db, key, now, r).await? {
            Ok(s) => Some(Source::Set(s.map(|s| s.members).unwrap_or_default())),
            Err(()) => None,
        },
        Kind::ZSet => match super::zset::read(store, db, key, now, r).await? {
            Ok(z) => Some(Source::ZSet(
                z.map(|z| z.items.into_iter().map(|(_, m)| m).collect())
                    .unwrap_or_default(),
            )),
            Err(()) => None,
        },
        _ => {
            r.error(errors::WRONGTYPE);
            None
        }
    })
}

/// What an element is sorted by.
enum Weight {
    Score(f64),
    /// ALPHA: the bytes compared (`None`: BY found nothing).
    Bytes(Option<Vec<u8>>),
    /// ALPHA without BY: the element itself.
    Element,
}

async fn weights(
    shared: &Shared,
    db: usize,
    elements: &[Vec<u8>],
    by: Option<&[u8]>,
    alpha: bool,
    now: u64,
) -> Result<Result<Vec<Weight>, ()>, Error> {
    let mut out = Vec::with_capacity(elements.len());
    for e in elements {
        let looked = match by {
            Some(p) => lookup(shared, db, p, e, now).await?,
            None => None,
        };
        out.push(if alpha {
            match by {
                Some(_) => Weight::Bytes(looked.map(|v| c_str(&v).to_vec())),
                None => Weight::Element,
            }
        } else {
            let value = match by {
                Some(_) => looked,
                None => Some(e.clone()),
            };
            match value {
                // A weight BY does not find counts as 0.
                None => Weight::Score(0.0),
                Some(v) => match strtod(&v) {
                    Some(s) => Weight::Score(s),
                    None => return Ok(Err(())),
                },
            }
        });
    }
    Ok(Ok(out))
}

/// A weight as Redis checks one: C's `strtod` to the end of the C string
/// (an empty value is 0), no overflow or underflow (ERANGE), not NaN.
fn strtod(v: &[u8]) -> Option<f64> {
    let (d, consumed, range) = super::zset_range::strtod(v)?;
    (consumed == c_str(v).len() && !range && !d.is_nan()).then_some(d)
}

/// Redis's `sortCompare`.
fn compare(a: &Weight, b: &Weight, ea: &[u8], eb: &[u8]) -> Ordering {
    match (a, b) {
        (Weight::Score(x), Weight::Score(y)) => x
            .partial_cmp(y)
            .unwrap_or(Ordering::Equal)
            .then_with(|| ea.cmp(eb)),
        (Weight::Bytes(x), Weight::Bytes(y)) => match (x, y) {
            (None, None) => Ordering::Equal,
            (None, Some(_)) => Ordering::Less,
            (Some(_), None) => Ordering::Greater,
            (Some(x), Some(y)) => x.cmp(y),
        },
        _ => c_str(ea).cmp(c_str(eb)),
    }
}

/// Redis's `lookupKeyByPattern`: `#` is the element; otherwise the first
/// `*` of the pattern is replaced by it and the key's string value read,
/// or with `->field` after the `*`, that field of the key's hash. `None`
/// for a pattern without `*`, a missing key or field, or another type.
async fn lookup(
    shared: &Shared,
    db: usize,
    pattern: &[u8],
    element: &[u8],
    now: u64,
) -> Result<Option<Vec<u8>>, Error> {
    let pattern = c_str(pattern);
    if pattern == b"#" {
        return Ok(Some(element.to_vec()));
    }
    let Some(star) = pattern.iter().position(|&c| c == b'*') else {
        return Ok(None);
    };
    let rest = &pattern[star + 1..];
    let (suffix, field) = match rest.windows(2).position(|w| w == b"->") {
        Some(i) if i + 2 < rest.len() => (&rest[..i], Some(&rest[i + 2..])),
        _ => (rest, None),
    };
    let key = [&pattern[..star], c_str(element), suffix].concat();
    // GET or HGET, whatever each key's layout: a key of another type
    // finds nothing, as in Redis.
    match field {
        None => Ok(super::strings::get_string(shared, db, &key, now)
            .await?
            .ok()
            .flatten()
            .map(|v| v.data().to_vec())),
        Some(f) => {
            let mut scratch = Vec::new();
            let mut r = Reply::new(&mut scratch, nvdepot_resp::Version::Resp2);
            let args: [&[u8]; 3] = [b"HGET", &key, f];
            if let Some(done) = super::hash::execute(shared, db, b"HGET", &args, now, &mut r).await
            {
                done?;
            }
            Ok(match nvdepot_resp::parse_value(&scratch) {
                Ok(Some((nvdepot_resp::Value::Bulk(b), _))) => b,
                _ => None,
            })
        }
    }
}
