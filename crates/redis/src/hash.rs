//! The hash type (Redis 7.0's `t_hash.c`): HSET and the rest, over the
//! compact layout of `compact.rs` (fields and values alternating, in
//! insertion order, as Redis's listpack keeps them). Each command is one
//! atomic update of its key (one read, the decision, at most one write).
//!
//! OBJECT ENCODING answers `listpack` until the hash passes Redis's
//! thresholds (`hash-max-listpack-entries` fields, or a field or value
//! longer than `hash-max-listpack-value` stored, or given to HSET, HSETNX
//! or HMSET), then `hashtable` for good, as Redis converts and never
//! converts back.

use nvdepot_cache::resp::{Change, Kind, RespStore, Value};
use nvdepot_cache::Error;
use nvdepot_resp::{errors, string2ll, Reply};
use rand::Rng;

use super::args::{arity, format_float, parse_float};
use super::compact::{self, Compact};
use super::compact_update::{Escalate, Fail};
use super::hash_pages as hpages;
use super::list_pages::is_paged;
use super::notify;
use super::paged_scan;
use super::session::Shared;

/// The commands of this module.
pub fn is_hash_command(name: &[u8]) -> bool {
    matches!(
        name,
        b"HSET"
            | b"HMSET"
            | b"HSETNX"
            | b"HGET"
            | b"HMGET"
            | b"HGETALL"
            | b"HKEYS"
            | b"HVALS"
            | b"HDEL"
            | b"HLEN"
            | b"HEXISTS"
            | b"HSTRLEN"
            | b"HINCRBY"
            | b"HINCRBYFLOAT"
            | b"HRANDFIELD"
            | b"HSCAN"
    )
}

/// A hash as its record holds it.
#[derive(Default)]
struct Hash {
    large: bool,
    /// Field, value, in insertion order.
    pairs: Vec<(Vec<u8>, Vec<u8>)>,
}

/// The hash a value holds (`None` for a missing key).
fn hash_of(v: Option<&Value>) -> Result<Option<Hash>, Fail> {
    let Some(v) = v else { return Ok(None) };
    if v.kind() != Kind::Hash {
        return Err(Fail::WrongType);
    }
    let c = Compact::decode(v.data()).map_err(Fail::Store)?;
    if c.items.len() % 2 != 0 {
        return Err(Fail::Store(Error::Envelope(
            "hash record with an odd number of items".into(),
        )));
    }
    let mut items = c.items.into_iter();
    let mut pairs = Vec::with_capacity(items.len() / 2);
    while let (Some(f), Some(v)) = (items.next(), items.next()) {
        pairs.push((f, v));
    }
    Ok(Some(Hash {
        large: c.large,
        pairs,
    }))
}

impl Hash {
    fn find(&self, field: &[u8]) -> Option<usize> {
        self.pairs.iter().position(|(f, _)| f == field)
    }

    fn get(&self, field: &[u8]) -> Option<&[u8]> {
        self.find(field).map(|i| self.pairs[i].1.as_slice())
    }

    /// Sets `field`; true if it is new. A new field goes last, an update
    /// stays in place (listpack order). A field or value too long for a
    /// listpack makes the hash large (Redis's `hashTypeSet`).
    fn set(&mut self, field: &[u8], value: &[u8], limits: &Limits) -> bool {
        self.large |= limits.too_long(&[field, value]);
        match self.find(field) {
            Some(i) => {
                self.pairs[i].1 = value.to_vec();
                false
            }
            None => {
                self.pairs.push((field.to_vec(), value.to_vec()));
                true
            }
        }
    }

    /// The change storing this hash (deleting the key when empty).
    fn change(self, expire_at_ms: u64, limits: &Limits) -> Change {
        if self.pairs.is_empty() {
            return Change::Delete;
        }
        let large = self.large || self.pairs.len() > limits.entries;
        let items = self.pairs.into_iter().flat_map(|(f, v)| [f, v]).collect();
        Change::Put {
            kind: Kind::Hash,
            data: Compact { large, items }.encode(),
            expire_at_ms,
        }
    }
}

/// Redis's listpack thresholds for hashes, as set now.
pub struct Limits {
    pub(crate) entries: usize,
    pub(crate) value: usize,
}

impl Limits {
    pub(crate) fn now(shared: &Shared) -> Limits {
        let t = &shared.tunables;
        let get = |n| usize::try_from(t.value(n)).unwrap_or(usize::MAX);
        Limits {
            entries: get("hash-max-listpack-entries"),
            value: get("hash-max-listpack-value"),
        }
    }

    /// Whether any of `args` is too long for a listpack
    /// (`hashTypeTryConversion`).
    fn too_long(&self, args: &[&[u8]]) -> bool {
        args.iter().any(|a| a.len() > self.value)
    }
}

/// Whether `data` is a hash record's data.
pub fn check(data: &[u8]) -> Result<(), Error> {
    let c = Compact::decode(data)?;
    if c.items.len() % 2 != 0 {
        return Err(Error::Envelope("a hash needs field, value pairs".into()));
    }
    Ok(())
}

/// OBJECT ENCODING of a hash value.
pub fn encoding(v: &Value) -> Result<&'static str, Error> {
    if is_paged(v.data()) {
        return Ok("hashtable");
    }
    let c = Compact::decode(v.data())?;
    Ok(if c.large { "hashtable" } else { "listpack" })
}

/// Runs `name` if it is a hash command (`None` if not).
pub async fn execute(
    shared: &Shared,
    db: usize,
    name: &[u8],
    args: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> Option<Result<(), Error>> {
    if !is_hash_command(name) {
        return None;
    }
    let store = &*shared.store;
    let limits = Limits::now(shared);
    let done = match name {
        b"HSET" | b"HMSET" => {
            if !arity(args, 4, None, r) {
                return Some(Ok(()));
            }
            if args.len() % 2 == 1 {
                r.error(errors::wrong_arity(args[0]));
                return Some(Ok(()));
            }
            let pairs = &args[2..];
            set_raw(store, db, args[1], now, &limits, pairs)
                .await
                .map(|out| {
                    out.map(|added| {
                        shared.notify(notify::HASH, "hset", db, args[1]);
                        if name == b"HSET" {
                            r.integer(added as i64)
                        } else {
                            r.ok()
                        }
                    })
                })
        }
        b"HSETNX" => {
            if !arity(args, 4, Some(4), r) {
                return Some(Ok(()));
            }
            update(
                store,
                db,
                args[1],
                now,
                &limits,
                hpages::Op::SetNx(args[2], args[3]),
                |h| {
                    // Redis converts on the arguments' lengths first, set or not.
                    h.large |= limits.too_long(&args[2..4]);
                    if h.find(args[2]).is_some() {
                        return Ok((false, 0));
                    }
                    h.set(args[2], args[3], &limits);
                    Ok((true, 1))
                },
                hpages::Out::int,
            )
            .await
            .map(|out| {
                out.map(|n| {
                    if n == 1 {
                        shared.notify(notify::HASH, "hset", db, args[1]);
                    }
                    r.integer(n)
                })
            })
        }
        b"HINCRBY" => {
            if !arity(args, 4, Some(4), r) {
                return Some(Ok(()));
            }
            let Some(by) = string2ll(args[3]) else {
                r.error(errors::NOT_INTEGER);
                return Some(Ok(()));
            };
            update(
                store,
                db,
                args[1],
                now,
                &limits,
                hpages::Op::IncrBy(args[2], by),
                |h| {
                    let old = match h.get(args[2]) {
                        Some(v) => match string2ll(v) {
                            Some(n) => n,
                            None => return Err("ERR hash value is not an integer"),
                        },
                        None => 0,
                    };
                    let Some(n) = old.checked_add(by) else {
                        return Err(errors::OVERFLOW);
                    };
                    h.set(args[2], n.to_string().as_bytes(), &limits);
                    Ok((true, n))
                },
                hpages::Out::int,
            )
            .await
            .map(|out| {
                out.map(|n| {
                    shared.notify(notify::HASH, "hincrby", db, args[1]);
                    r.integer(n)
                })
            })
        }
        b"HINCRBYFLOAT" => {
            if !arity(args, 4, Some(4), r) {
                return Some(Ok(()));
            }
            let Some(by) = parse_float(args[3]) else {
                r.error(errors::NOT_FLOAT);
                return Some(Ok(()));
            };
            if !by.is_finite() {
                r.error("ERR value is NaN or Infinity");
                return Some(Ok(()));
            }
            update(
                store,
                db,
                args[1],
                now,
                &limits,
                hpages::Op::IncrByFloat(args[2], by),
                |h| {
                    let old = match h.get(args[2]) {
                        Some(v) => match parse_float(v) {
                            Some(f) => f,
                            None => return Err("ERR hash value is not a float"),
                        },
                        None => 0.0,
                    };
                    let sum = old + by;
                    if !sum.is_finite() {
                        return Err("ERR increment would produce NaN or Infinity");
                    }
                    let text = format_float(sum);
                    h.set(args[2], text.as_bytes(), &limits);
                    Ok((true, text))
                },
                hpages::Out::text,
            )
            .await
            .map(|out| {
                out.map(|text| {
                    shared.notify(notify::HASH, "hincrbyfloat", db, args[1]);
                    r.bulk(text.as_bytes())
                })
            })
        }
        b"HDEL" => {
            if !arity(args, 3, None, r) {
                return Some(Ok(()));
            }
            let out = update(
                store,
                db,
                args[1],
                now,
                &limits,
                hpages::Op::Del(&args[2..]),
                |h| {
                    let before = h.pairs.len();
                    for f in &args[2..] {
                        if let Some(i) = h.find(f) {
                            h.pairs.remove(i);
                        }
                    }
                    let removed = before - h.pairs.len();
                    Ok((removed > 0, removed as i64))
                },
                hpages::Out::int,
            )
            .await;
            if let Ok(Ok(n)) = out {
                shared
                    .notify_removal(notify::HASH, "hdel", db, args[1], n > 0, now)
                    .await;
            }
            out.map(|out| out.map(|n| r.integer(n)))
        }
        _ => return read_command(store, db, name, args, now, r).await,
    };
    Some(done.map(|out| {
        if let Err(msg) = out {
            r.error(msg);
        }
    }))
}

/// One atomic update of hash `key`: `apply` sees the hash (empty when
/// missing) and says whether it changed and what to answer, or the error
/// to answer (WRONGTYPE is one too). A paged hash runs `op` instead (one
/// bucket, `hash_pages.rs`); a compact one the change would take past the
/// paged threshold is written paged.
#[allow(clippy::too_many_arguments)]
async fn update<T>(
    store: &RespStore,
    db: usize,
    key: &[u8],
    now: u64,
    limits: &Limits,
    op: hpages::Op<'_>,
    apply: impl FnMut(&mut Hash) -> Result<(bool, T), &'static str>,
    out: impl Fn(hpages::Out) -> T,
) -> Result<Result<T, &'static str>, Error> {
    super::hash_combine::update(
        store,
        Kind::Hash,
        db,
        key,
        now,
        |v| hash_of(v).map(Option::unwrap_or_default),
        |h: Hash, at| h.change(at, limits),
        &op,
        apply,
        out,
    )
    .await
}

/// HSET's write on the encoded hash: the fields it names are found by
/// scanning the record's bytes (no allocation per field), values replaced
/// in place and new fields appended, in Redis's listpack order: the
/// number of new fields.
async fn set_raw(
    store: &RespStore,
    db: usize,
    key: &[u8],
    now: u64,
    limits: &Limits,
    pairs: &[&[u8]],
) -> Result<Result<usize, &'static str>, Error> {
    loop {
        let mut escalate = None;
        let (out, _) = store
            .update(db, key, now, |cur| {
                // Only the store's last decision counts (it may decide again).
                escalate = None;
                if cur.is_some_and(|v| v.kind() == Kind::Hash && is_paged(v.data())) {
                    escalate = Some(Escalate::Paged);
                    return (Change::Keep, Ok(0));
                }
                let (old, at) = match cur {
                    Some(v) if v.kind() != Kind::Hash => {
                        return (Change::Keep, Err(errors::WRONGTYPE))
                    }
                    Some(v) => (v.data(), v.expire_at_ms()),
                    None => (&[0u8][..], 0),
                };
                let items: Result<Vec<&[u8]>, Error> = compact::items(old)
                    .map(|i| i.map(|(_, item)| item))
                    .collect();
                let Ok(items) =
                    items
                        .map_err(|_| ())
                        .and_then(|i| if i.len() % 2 == 0 { Ok(i) } else { Err(()) })
                else {
                    return (Change::Keep, Err("ERR hash record damaged"));
                };
                let mut values: Vec<&[u8]> = items.iter().skip(1).step_by(2).copied().collect();
                let fields: Vec<&[u8]> = items.iter().step_by(2).copied().collect();
                let mut added: Vec<(&[u8], &[u8])> = Vec::new();
                let mut large = old.first() == Some(&1) || limits.too_long(pairs);
                for p in pairs.chunks(2) {
                    let (f, v) = (p[0], p[1]);
                    large |= limits.too_long(&[f, v]);
                    if let Some(i) = fields.iter().position(|x| *x == f) {
                        values[i] = v;
                    } else if let Some(a) = added.iter_mut().find(|(x, _)| *x == f) {
                        a.1 = v;
                    } else {
                        added.push((f, v));
                    }
                }
                let count = fields.len() + added.len();
                large |= count > limits.entries;
                let bytes: usize = fields
                    .iter()
                    .chain(&values)
                    .map(|x| x.len() + 5)
                    .sum::<usize>()
                    + pairs.iter().map(|x| x.len() + 5).sum::<usize>();
                let mut data = Vec::with_capacity(1 + bytes);
                data.push(u8::from(large));
                for (f, v) in fields
                    .iter()
                    .zip(&values)
                    .chain(added.iter().map(|(f, v)| (f, v)))
                {
                    compact::push_item(&mut data, f);
                    compact::push_item(&mut data, v);
                }
                if hpages::should_page(large, data.len(), key) {
                    escalate = Some(Escalate::Convert(cur.map(Value::version), data, at));
                    return (Change::Keep, Ok(added.len()));
                }
                let change = Change::Put {
                    kind: Kind::Hash,
                    data,
                    expire_at_ms: at,
                };
                (change, Ok(added.len()))
            })
            .await?;
        match escalate {
            None => return Ok(out),
            Some(Escalate::Convert(version, data, at)) => {
                if hpages::convert(store, Kind::Hash, db, key, version, &data, at).await? {
                    return Ok(out);
                }
            }
            Some(Escalate::Paged) => {
                let op = hpages::Op::Set(pairs);
                if let Some(r) =
                    super::hash_combine::write(store, Kind::Hash, db, key, now, &op).await?
                {
                    return Ok(r.map(|o| match o {
                        hpages::Out::Int(n) => n as usize,
                        _ => unreachable!("HSET counts"),
                    }));
                }
            }
        }
    }
}

/// The reads of a compact hash but HRANDFIELD and HSCAN, on its encoded
/// bytes (no allocation per field).
fn point_read(name: &[u8], data: Option<&[u8]>, args: &[&[u8]], r: &mut Reply<'_>) -> bool {
    let pairs: Option<Vec<(&[u8], &[u8])>> = match data {
        None => Some(Vec::new()),
        Some(d) => {
            let items: Result<Vec<&[u8]>, Error> =
                compact::items(d).map(|i| i.map(|(_, item)| item)).collect();
            match items {
                Ok(items) if items.len() % 2 == 0 => {
                    Some(items.chunks(2).map(|p| (p[0], p[1])).collect())
                }
                _ => None,
            }
        }
    };
    let Some(pairs) = pairs else { return false };
    let get = |f: &[u8]| pairs.iter().find(|(x, _)| *x == f).map(|(_, v)| *v);
    match name {
        b"HGET" => match get(args[2]) {
            Some(v) => r.bulk(v),
            None => r.null(),
        },
        b"HEXISTS" => r.integer(i64::from(get(args[2]).is_some())),
        b"HSTRLEN" => r.integer(get(args[2]).map_or(0, |v| v.len() as i64)),
        b"HLEN" => r.integer(pairs.len() as i64),
        b"HGETALL" => {
            r.map(pairs.len());
            for (f, v) in &pairs {
                r.bulk(f);
                r.bulk(v);
            }
        }
        b"HKEYS" | b"HVALS" => {
            r.array(pairs.len());
            for (f, v) in &pairs {
                r.bulk(if name == b"HKEYS" { f } else { v });
            }
        }
        _ => {
            r.array(args.len() - 2);
            for f in &args[2..] {
                match get(f) {
                    Some(v) => r.bulk(v),
                    None => r.null(),
                }
            }
        }
    }
    true
}

/// The read-only commands: one read of the key.
async fn read_command(
    store: &RespStore,
    db: usize,
    name: &[u8],
    args: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> Option<Result<(), Error>> {
    let (min, max) = match name {
        b"HGET" | b"HEXISTS" | b"HSTRLEN" => (3, Some(3)),
        b"HMGET" => (3, None),
        b"HGETALL" | b"HKEYS" | b"HVALS" | b"HLEN" => (2, Some(2)),
        b"HRANDFIELD" => (2, None),
        b"HSCAN" => (3, None),
        _ => return None,
    };
    if !arity(args, min, max, r) {
        return Some(Ok(()));
    }
    // Arguments Redis checks before it looks the key up.
    let mut rand_count = None;
    let mut cursor = 0;
    match name {
        b"HRANDFIELD" if args.len() > 2 => {
            // Redis's order: the count, the option, the count's range.
            let Some(n) = string2ll(args[2]) else {
                r.error(errors::NOT_INTEGER);
                return Some(Ok(()));
            };
            if n == i64::MIN {
                r.error(
                    "ERR value is out of range, value must between -9223372036854775807 \
                     and 9223372036854775807",
                );
                return Some(Ok(()));
            }
            let withvalues = match args.len() {
                3 => false,
                4 if args[3].eq_ignore_ascii_case(b"WITHVALUES") => true,
                _ => {
                    r.error(errors::SYNTAX);
                    return Some(Ok(()));
                }
            };
            // Twice as many replies as the count: it must stay in range.
            if withvalues && n.unsigned_abs() > (i64::MAX / 2) as u64 {
                r.error("ERR value is out of range");
                return Some(Ok(()));
            }
            rand_count = Some((n, withvalues));
        }
        b"HSCAN" => match super::scan::parse_cursor(args[2]) {
            Some(c) => cursor = c,
            None => {
                r.error("ERR invalid cursor");
                return Some(Ok(()));
            }
        },
        _ => {}
    }
    let v = match store.get(db, args[1], now).await {
        Ok(v) => v,
        Err(e) => return Some(Err(e)),
    };
    let paged = v
        .as_ref()
        .is_some_and(|v| v.kind() == Kind::Hash && is_paged(v.data()));
    if paged {
        return Some(read_paged(store, db, name, args, now, rand_count, cursor, r).await);
    }
    if matches!(
        name,
        b"HGET" | b"HEXISTS" | b"HSTRLEN" | b"HLEN" | b"HMGET" | b"HGETALL" | b"HKEYS" | b"HVALS"
    ) {
        match &v {
            Some(v) if v.kind() != Kind::Hash => r.error(errors::WRONGTYPE),
            v => {
                if !point_read(name, v.as_ref().map(Value::data), args, r) {
                    return Some(Err(Error::Envelope("hash record damaged".into())));
                }
            }
        }
        return Some(Ok(()));
    }
    let h = match hash_of(v.as_ref()) {
        Ok(h) => h,
        Err(Fail::WrongType) => {
            r.error(errors::WRONGTYPE);
            return Some(Ok(()));
        }
        Err(Fail::Store(e)) => return Some(Err(e)),
    };
    // The others were answered by `point_read` above.
    match name {
        b"HRANDFIELD" => randfield(h, rand_count, r),
        b"HSCAN" => return Some(scan(h, cursor, args, r)),
        _ => unreachable!("the other reads are point reads"),
    }
    Some(Ok(()))
}

/// The read commands on a paged hash: the point reads read the fields'
/// buckets, the others the whole hash (O(N) in Redis too).
#[allow(clippy::too_many_arguments)]
async fn read_paged(
    store: &RespStore,
    db: usize,
    name: &[u8],
    args: &[&[u8]],
    now: u64,
    rand_count: Option<(i64, bool)>,
    cursor: u64,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    if name == b"HSCAN" {
        let value = |v: &[u8]| Ok(Some(v.to_vec()));
        let meta_of = hpages::Meta::decode;
        let done =
            paged_scan::answer_step(store, Kind::Hash, db, args, cursor, now, meta_of, r, value);
        if done.await? {
            return Ok(());
        }
        // No longer paged: read it again.
        return match Box::pin(read_command(store, db, name, args, now, r)).await {
            Some(done) => done,
            None => Ok(()),
        };
    }
    let point = matches!(name, b"HGET" | b"HEXISTS" | b"HSTRLEN" | b"HLEN" | b"HMGET");
    let fields: &[&[u8]] = match name {
        b"HLEN" => &[],
        b"HMGET" => &args[2..],
        _ if point => &args[2..3],
        _ => &[],
    };
    let read = hpages::read(store, Kind::Hash, db, args[1], now, point.then_some(fields)).await?;
    let h = match read {
        // No longer paged (deleted or rewritten meanwhile): read again.
        None => {
            return match Box::pin(read_command(store, db, name, args, now, r)).await {
                Some(done) => done,
                None => Ok(()),
            };
        }
        Some(hpages::Read::Fields(vals, count)) => {
            match name {
                b"HGET" => match &vals[0] {
                    Some(v) => r.bulk(v),
                    None => r.null(),
                },
                b"HEXISTS" => r.integer(i64::from(vals[0].is_some())),
                b"HSTRLEN" => r.integer(vals[0].as_ref().map_or(0, |v| v.len() as i64)),
                b"HLEN" => r.integer(count as i64),
                _ => {
                    r.array(vals.len());
                    for v in &vals {
                        match v {
                            Some(v) => r.bulk(v),
                            None => r.null(),
                        }
                    }
                }
            }
            return Ok(());
        }
        Some(hpages::Read::All(pairs)) => Hash { large: true, pairs },
    };
    match name {
        b"HGETALL" => {
            r.map(h.pairs.len());
            for (f, v) in &h.pairs {
                r.bulk(f);
                r.bulk(v);
            }
        }
        b"HKEYS" | b"HVALS" => {
            r.array(h.pairs.len());
            for (f, v) in &h.pairs {
                r.bulk(if name == b"HKEYS" { f } else { v });
            }
        }
        b"HRANDFIELD" => randfield(Some(h), rand_count, r),
        b"HSCAN" => return scan(Some(h), cursor, args, r),
        _ => unreachable!("the hash reads"),
    }
    Ok(())
}

/// HRANDFIELD key [count [WITHVALUES]] once the key is read.
fn randfield(h: Option<Hash>, count: Option<(i64, bool)>, r: &mut Reply<'_>) {
    let mut rng = rand::thread_rng();
    let Some((n, withvalues)) = count else {
        match h {
            Some(h) => r.bulk(&h.pairs[rng.gen_range(0..h.pairs.len())].0),
            None => r.null(),
        }
        return;
    };
    let pairs = h.map(|h| h.pairs).unwrap_or_default();
    let chosen = super::args::random_picks(pairs.len(), n);
    if withvalues && r.resp3() {
        r.array(chosen.len());
        for i in chosen {
            r.array(2);
            r.bulk(&pairs[i].0);
            r.bulk(&pairs[i].1);
        }
    } else if withvalues {
        r.array(chosen.len() * 2);
        for i in chosen {
            r.bulk(&pairs[i].0);
            r.bulk(&pairs[i].1);
        }
    } else {
        r.array(chosen.len());
        for i in chosen {
            r.bulk(&pairs[i].0);
        }
    }
}

/// HSCAN of a compact hash once the key is read: the whole hash in one
/// reply (cursor 0), as Redis answers for a listpack; MATCH filters by
/// field. (A paged hash's goes through `paged_scan.rs`.)
fn scan(h: Option<Hash>, _cursor: u64, args: &[&[u8]], r: &mut Reply<'_>) -> Result<(), Error> {
    let Some(h) = h else {
        r.array(2);
        r.bulk(b"0");
        r.array(0);
        return Ok(());
    };
    let opts = match super::scan::ScanOptions::parse(&args[3..], false) {
        Ok(o) => o,
        Err(msg) => {
            r.error(msg);
            return Ok(());
        }
    };
    let hits: Vec<&(Vec<u8>, Vec<u8>)> = h.pairs.iter().filter(|(f, _)| opts.matches(f)).collect();
    r.array(2);
    r.bulk(b"0");
    r.array(hits.len() * 2);
    for (f, v) in hits {
        r.bulk(f);
        r.bulk(v);
    }
    Ok(())
}
