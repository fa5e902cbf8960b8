//! Geo commands on sorted sets (Redis 7.0's `geo.c`): GEOADD, GEOPOS,
//! GEOHASH, GEODIST, GEOSEARCH, GEOSEARCHSTORE and the GEORADIUS family.
//! A point is a member whose score is its 52-bit geohash, so every sorted
//! set command works on geo sets and the geo commands on any sorted set,
//! compact or paged, as in Redis. A search reads the nine geohash cells
//! around its centre as score ranges (on a paged set: nine descents of the
//! counted tree, each reading only its leaves), keeps the points inside the
//! shape and sorts them by distance.
//!
//! Ties in distance are ordered as glibc's (stable) `qsort` leaves them;
//! with COUNT below the number found Redis sorts partially with its own
//! unstable `pqsort`, so equally distant points past the cut may differ.

use nvdepot_cache::resp::RespStore;
use nvdepot_cache::Error;
use nvdepot_resp::{errors, string2ll, Reply};

use super::args::arity;
use super::geohash::{self, Search, Shape};
use super::session::Shared;
use super::zset::{self, Peek, Range, RangeQuery, ScoreRange};
use super::zset_pages::{self, Answer, Query};
use super::zset_value::{Limits, ZSet};

const NOT_FLOAT: &str = "ERR value is not a valid float";

/// Commands that must see their sorted set (and the one they store) as
/// one step: a search reads up to nine ranges.
pub fn needs_exclusive(name: &[u8]) -> bool {
    matches!(
        name,
        b"GEOSEARCH"
            | b"GEOSEARCHSTORE"
            | b"GEORADIUS"
            | b"GEORADIUSBYMEMBER"
            | b"GEORADIUS_RO"
            | b"GEORADIUSBYMEMBER_RO"
    )
}

/// Runs `name` if it is a geo command (`None` if not).
pub async fn execute(
    shared: &Shared,
    db: usize,
    name: &[u8],
    args: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> Option<Result<(), Error>> {
    let min = match name {
        b"GEOADD" => 5,
        b"GEODIST" => 4,
        b"GEOHASH" | b"GEOPOS" => 2,
        b"GEOSEARCH" => 7,
        b"GEOSEARCHSTORE" => 8,
        b"GEORADIUS" | b"GEORADIUS_RO" => 6,
        b"GEORADIUSBYMEMBER" | b"GEORADIUSBYMEMBER_RO" => 5,
        _ => return None,
    };
    if !arity(args, min, None, r) {
        return Some(Ok(()));
    }
    let store = &*shared.store;
    let limits = Limits::now(shared);
    Some(match name {
        b"GEOADD" => geoadd(shared, db, args, now, limits, r).await,
        b"GEOPOS" | b"GEOHASH" => positions(store, db, name, args, now, r).await,
        b"GEODIST" => geodist(store, db, args, now, r).await,
        _ => {
            let (src, flags) = match name {
                b"GEORADIUS" => (1, COORDS),
                b"GEORADIUSBYMEMBER" => (1, MEMBER),
                b"GEORADIUS_RO" => (1, COORDS | NOSTORE),
                b"GEORADIUSBYMEMBER_RO" => (1, MEMBER | NOSTORE),
                b"GEOSEARCH" => (1, SEARCH),
                _ => (2, SEARCH | SEARCHSTORE),
            };
            search(shared, db, args, src, flags, now, limits, r).await
        }
    })
}

/// A longitude, latitude pair (`extractLongLatOrReply`).
fn long_lat(a: &[&[u8]]) -> Result<(f64, f64), String> {
    let x = zset::parse_score(a[0]).ok_or(NOT_FLOAT)?;
    let y = zset::parse_score(a[1]).ok_or(NOT_FLOAT)?;
    if !(geohash::LONG_MIN..=geohash::LONG_MAX).contains(&x)
        || !(geohash::LAT_MIN..=geohash::LAT_MAX).contains(&y)
    {
        return Err(format!(
            "ERR invalid longitude,latitude pair {},{}",
            c_f(x),
            c_f(y)
        ));
    }
    Ok((x, y))
}

/// C's `%f`.
fn c_f(v: f64) -> String {
    if v.is_infinite() {
        return if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    format!("{v:.6}")
}

/// A unit's metres (`extractUnitOrReply`).
fn unit(a: &[u8]) -> Result<f64, String> {
    Ok(match a.to_ascii_lowercase().as_slice() {
        b"m" => 1.0,
        b"km" => 1000.0,
        b"ft" => 0.3048,
        b"mi" => 1609.34,
        _ => return Err("ERR unsupported unit provided. please use M, KM, FT, MI".into()),
    })
}

/// `radius unit`: (radius, metres per unit).
fn distance_arg(a: &[&[u8]]) -> Result<(f64, f64), String> {
    let d = zset::parse_score(a[0]).ok_or("ERR need numeric radius")?;
    if d < 0.0 {
        return Err("ERR radius cannot be negative".into());
    }
    Ok((d, unit(a[1])?))
}

/// `width height unit`.
fn box_arg(a: &[&[u8]]) -> Result<(f64, f64, f64), String> {
    let w = zset::parse_score(a[0]).ok_or("ERR need numeric width")?;
    let h = zset::parse_score(a[1]).ok_or("ERR need numeric height")?;
    if h < 0.0 || w < 0.0 {
        return Err("ERR height or width cannot be negative".into());
    }
    Ok((w, h, unit(a[2])?))
}

/// A distance as Redis answers it: four decimals, rounded half to even
/// (`fixedpoint_d2string`).
fn distance_text(d: f64) -> String {
    let v = (d * 10000.0).round_ties_even() as i64;
    let sign = if v < 0 { "-" } else { "" };
    let v = v.unsigned_abs();
    format!("{sign}{}.{:04}", v / 10000, v % 10000)
}

/// A coordinate as Redis answers it (`%.17Lf`, trailing zeros cut).
fn coordinate_text(d: f64) -> String {
    let s = format!("{d:.17}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.to_string()
    }
}

async fn geoadd(
    shared: &Shared,
    db: usize,
    args: &[&[u8]],
    now: u64,
    limits: Limits,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    let mut at = 2;
    let (mut nx, mut xx) = (false, false);
    while at < args.len() {
        match args[at].to_ascii_lowercase().as_slice() {
            b"nx" => nx = true,
            b"xx" => xx = true,
            b"ch" => {}
            _ => break,
        }
        at += 1;
    }
    if !(args.len() - at).is_multiple_of(3) || (xx && nx) {
        r.error(errors::SYNTAX);
        return Ok(());
    }
    let mut scores = Vec::new();
    for t in args[at..].chunks(3) {
        match long_lat(t) {
            Ok((x, y)) => {
                let s = geohash::score_of(x, y).expect("checked in range");
                scores.push(s.to_string().into_bytes());
            }
            Err(e) => {
                r.error(e);
                return Ok(());
            }
        }
    }
    // ZADD key [options] score member …, as Redis rewrites it.
    let mut zadd: Vec<&[u8]> = vec![b"ZADD"];
    zadd.extend_from_slice(&args[1..at]);
    for (t, s) in args[at..].chunks(3).zip(&scores) {
        zadd.push(s);
        zadd.push(t[2]);
    }
    zset::zadd(shared, db, &zadd, now, limits, r).await
}

/// The scores of `members` in sorted set `key` (`None`: no key);
/// `Ok(Err(()))` once WRONGTYPE is answered.
async fn scores(
    store: &RespStore,
    db: usize,
    key: &[u8],
    members: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> Result<Result<Option<Vec<Option<f64>>>, ()>, Error> {
    loop {
        let Ok(source) = Source::open(store, db, key, now, r).await? else {
            return Ok(Err(()));
        };
        if matches!(source, Source::Missing) {
            return Ok(Ok(None));
        }
        if let Some(found) = source.scores(store, db, key, members, now).await? {
            return Ok(Ok(Some(found)));
        }
    }
}

/// GEOPOS and GEOHASH.
async fn positions(
    store: &RespStore,
    db: usize,
    name: &[u8],
    args: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    let members = &args[2..];
    let Ok(found) = scores(store, db, args[1], members, now, r).await? else {
        return Ok(());
    };
    r.array(members.len());
    for i in 0..members.len() {
        let s = found.as_ref().and_then(|f| f[i]);
        if name == b"GEOHASH" {
            match s.and_then(geohash::standard_geohash) {
                Some(h) => r.bulk(h.as_bytes()),
                None => r.null(),
            }
        } else {
            match s.and_then(geohash::decode_score) {
                Some((x, y)) => {
                    r.array(2);
                    r.double_text(&coordinate_text(x));
                    r.double_text(&coordinate_text(y));
                }
                None => r.null_array(),
            }
        }
    }
    Ok(())
}

async fn geodist(
    store: &RespStore,
    db: usize,
    args: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    let to_meter = match args.len() {
        5 => match unit(args[4]) {
            Ok(u) => u,
            Err(e) => {
                r.error(e);
                return Ok(());
            }
        },
        4 => 1.0,
        _ => {
            r.error(errors::SYNTAX);
            return Ok(());
        }
    };
    let Ok(found) = scores(store, db, args[1], &args[2..4], now, r).await? else {
        return Ok(());
    };
    let points = found.and_then(|f| {
        let a = geohash::decode_score(f[0]?)?;
        let b = geohash::decode_score(f[1]?)?;
        Some((a, b))
    });
    match points {
        Some((a, b)) => {
            let d = geohash::distance(a.0, a.1, b.0, b.1) / to_meter;
            r.bulk(distance_text(d).as_bytes());
        }
        None => r.null(),
    }
    Ok(())
}

const COORDS: u8 = 1;
const MEMBER: u8 = 2;
const NOSTORE: u8 = 4;
const SEARCH: u8 = 8;
const SEARCHSTORE: u8 = 16;

/// The sorted set a geo command reads.
enum Source {
    Missing,
    Compact(ZSet),
    Paged,
}

impl Source {
    /// Looks at sorted set `key`: `Ok(Err(()))` once WRONGTYPE is
    /// answered.
    async fn open(
        store: &RespStore,
        db: usize,
        key: &[u8],
        now: u64,
        r: &mut Reply<'_>,
    ) -> Result<Result<Source, ()>, Error> {
        Ok(zset::peek(store, db, key, now, r).await?.map(|p| match p {
            Peek::Compact(None) => Source::Missing,
            Peek::Compact(Some(z)) => Source::Compact(z),
            Peek::Paged(_) => Source::Paged,
        }))
    }

    /// The scores of `members` (`None` each when absent); `None` when
    /// the set is no longer paged (open it again).
    async fn scores(
        &self,
        store: &RespStore,
        db: usize,
        key: &[u8],
        members: &[&[u8]],
        now: u64,
    ) -> Result<Option<Vec<Option<f64>>>, Error> {
        Ok(match self {
            Source::Missing => Some(vec![None; members.len()]),
            Source::Compact(z) => Some(members.iter().map(|m| z.score(m)).collect()),
            Source::Paged => {
                match zset_pages::read(store, db, key, now, &Query::Scores(members)).await? {
                    Some(Answer::Scores(s)) => Some(s),
                    _ => None,
                }
            }
        })
    }

    /// The point member `m` stands at, if it is in the set. (A search
    /// holds the exclusive pass: a paged set stays paged meanwhile.)
    async fn point(
        &self,
        store: &RespStore,
        db: usize,
        key: &[u8],
        m: &[u8],
        now: u64,
    ) -> Result<Option<(f64, f64)>, Error> {
        let found = self.scores(store, db, key, &[m], now).await?;
        Ok(found.and_then(|s| s[0]).and_then(geohash::decode_score))
    }

    /// The members with scores in [min, max), in the set's order.
    async fn range(
        &self,
        store: &RespStore,
        db: usize,
        key: &[u8],
        min: f64,
        max: f64,
        now: u64,
    ) -> Result<Vec<(f64, Vec<u8>)>, Error> {
        match self {
            Source::Missing => Ok(Vec::new()),
            Source::Compact(z) => {
                let from = z.items.partition_point(|(s, _)| *s < min);
                let to = z.items.partition_point(|(s, _)| *s < max);
                Ok(z.items[from..to.max(from)].to_vec())
            }
            Source::Paged => {
                let q = RangeQuery {
                    range: Range::Score(ScoreRange::new(min, false, max, true)),
                    rev: false,
                    withscores: true,
                    limit: None,
                };
                // Not paged any more cannot happen under the exclusive
                // pass; it would read as nothing found.
                match zset_pages::read(store, db, key, now, &Query::Range(&q)).await? {
                    Some(Answer::Items(items)) => Ok(items),
                    _ => Ok(Vec::new()),
                }
            }
        }
    }
}

/// One point found.
struct Point {
    member: Vec<u8>,
    score: f64,
    xy: (f64, f64),
    dist: f64,
}

#[derive(PartialEq, Clone, Copy)]
enum Sort {
    None,
    Asc,
    Desc,
}

/// `georadiusGeneric`: every GEORADIUS form, GEOSEARCH and GEOSEARCHSTORE.
/// The keyspace event of a search that stores its result.
fn store_event(search: bool) -> &'static str {
    if search {
        "geosearchstore"
    } else {
        "georadiusstore"
    }
}

#[allow(clippy::too_many_arguments)]
async fn search(
    shared: &Shared,
    db: usize,
    args: &[&[u8]],
    src: usize,
    flags: u8,
    now: u64,
    limits: Limits,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    let store = &*shared.store;
    let key = args[src];
    let Ok(source) = Source::open(store, db, key, now, r).await? else {
        return Ok(());
    };
    let missing = matches!(source, Source::Missing);
    macro_rules! fail {
        ($e:expr) => {{
            r.error($e);
            return Ok(());
        }};
    }
    let mut xy = (0.0, 0.0);
    let mut conversion = 0.0;
    let mut shape = None;
    let mut storekey: Option<&[u8]> = None;
    let mut storedist = false;
    let base;
    if flags & COORDS != 0 {
        base = 6;
        xy = match long_lat(&args[2..4]) {
            Ok(p) => p,
            Err(e) => fail!(e),
        };
        match distance_arg(&args[4..6]) {
            Ok((radius, c)) => {
                shape = Some(Shape::Circle { radius });
                conversion = c;
            }
            Err(e) => fail!(e),
        }
    } else if flags & MEMBER != 0 && missing {
        base = 5;
    } else if flags & MEMBER != 0 {
        base = 5;
        match source.point(store, db, key, args[2], now).await? {
            Some(p) => xy = p,
            None => fail!("ERR could not decode requested zset member"),
        }
        match distance_arg(&args[3..5]) {
            Ok((radius, c)) => {
                shape = Some(Shape::Circle { radius });
                conversion = c;
            }
            Err(e) => fail!(e),
        }
    } else {
        base = if flags & SEARCHSTORE != 0 {
            storekey = Some(args[1]);
            3
        } else {
            2
        };
    }
    let (mut withdist, mut withhash, mut withcoords) = (false, false, false);
    let (mut frommember, mut fromloc, mut byradius, mut bybox) = (false, false, false, false);
    let mut sort = Sort::None;
    let mut any = false;
    let mut count: i64 = 0;
    let search_flag = flags & SEARCH != 0;
    let rest = &args[base.min(args.len())..];
    let mut i = 0;
    while i < rest.len() {
        let arg = rest[i].to_ascii_lowercase();
        let remaining = rest.len();
        match arg.as_slice() {
            b"withdist" => withdist = true,
            b"withhash" => withhash = true,
            b"withcoord" => withcoords = true,
            b"any" => any = true,
            b"asc" => sort = Sort::Asc,
            b"desc" => sort = Sort::Desc,
            b"count" if i + 1 < remaining => {
                let Some(n) = string2ll(rest[i + 1]) else {
                    fail!(errors::NOT_INTEGER)
                };
                if n <= 0 {
                    fail!("ERR COUNT must be > 0");
                }
                count = n;
                i += 1;
            }
            b"store" | b"storedist"
                if i + 1 < remaining && flags & NOSTORE == 0 && !search_flag =>
            {
                storekey = Some(rest[i + 1]);
                storedist = arg == b"storedist";
                i += 1;
            }
            b"storedist" if search_flag && flags & SEARCHSTORE != 0 => storedist = true,
            b"frommember" if i + 1 < remaining && search_flag && !fromloc => {
                if !missing {
                    match source.point(store, db, key, rest[i + 1], now).await? {
                        Some(p) => xy = p,
                        None => fail!("ERR could not decode requested zset member"),
                    }
                }
                frommember = true;
                i += 1;
            }
            b"fromlonlat" if i + 2 < remaining && search_flag && !frommember => {
                xy = match long_lat(&rest[i + 1..i + 3]) {
                    Ok(p) => p,
                    Err(e) => fail!(e),
                };
                fromloc = true;
                i += 2;
            }
            b"byradius" if i + 2 < remaining && search_flag && !bybox => {
                match distance_arg(&rest[i + 1..i + 3]) {
                    Ok((radius, c)) => {
                        shape = Some(Shape::Circle { radius });
                        conversion = c;
                    }
                    Err(e) => fail!(e),
                }
                byradius = true;
                i += 2;
            }
            b"bybox" if i + 3 < remaining && search_flag && !byradius => {
                match box_arg(&rest[i + 1..i + 4]) {
                    Ok((width, height, c)) => {
                        shape = Some(Shape::Box { width, height });
                        conversion = c;
                    }
                    Err(e) => fail!(e),
                }
                bybox = true;
                i += 3;
            }
            _ => fail!(errors::SYNTAX),
        }
        i += 1;
    }
    if storekey.is_some() && (withdist || withhash || withcoords) {
        fail!(format!(
            "ERR {} is not compatible with WITHDIST, WITHHASH and WITHCOORD options",
            if flags & SEARCHSTORE != 0 {
                "GEOSEARCHSTORE"
            } else {
                "STORE option in GEORADIUS"
            }
        ));
    }
    let command = String::from_utf8_lossy(args[0]).into_owned();
    if search_flag && !(frommember || fromloc) {
        fail!(format!(
            "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for {command}"
        ));
    }
    if search_flag && !(byradius || bybox) {
        fail!(format!(
            "ERR exactly one of BYRADIUS and BYBOX can be specified for {command}"
        ));
    }
    if any && count == 0 {
        fail!("ERR the ANY argument requires COUNT argument");
    }
    if missing {
        match storekey {
            Some(dst) => {
                let event = store_event(search_flag);
                zset::store_range(shared, event, db, dst, Vec::new(), limits, now, r).await?
            }
            None => r.array(0),
        }
        return Ok(());
    }
    if count != 0 && sort == Sort::None && !any {
        sort = Sort::Asc;
    }
    let search = Search {
        xy,
        conversion,
        shape: shape.expect("a shape is set once the checks pass"),
    };
    let limit = if any { count as usize } else { 0 };
    let mut found: Vec<Point> = Vec::new();
    let cells = search.cells();
    let mut last: Option<usize> = None;
    for (i, cell) in cells.iter().enumerate() {
        if cell.is_zero() {
            continue;
        }
        if last.is_some_and(|l| cells[l] == *cell) {
            continue;
        }
        if limit > 0 && found.len() >= limit {
            break;
        }
        let (min, max) = geohash::score_range(*cell);
        for (score, member) in source
            .range(store, db, key, min as f64, max as f64, now)
            .await?
        {
            if let Some((xy, dist)) = search.within(score) {
                found.push(Point {
                    member,
                    score,
                    xy,
                    dist,
                });
            }
            if limit > 0 && found.len() >= limit {
                break;
            }
        }
        last = Some(i);
    }
    if found.is_empty() && storekey.is_none() {
        r.array(0);
        return Ok(());
    }
    match sort {
        Sort::Asc => found.sort_by(|a, b| a.dist.total_cmp(&b.dist)),
        Sort::Desc => found.sort_by(|a, b| b.dist.total_cmp(&a.dist)),
        Sort::None => {}
    }
    let returned = if count == 0 {
        found.len()
    } else {
        found.len().min(count as usize)
    };
    found.truncate(returned);
    if let Some(dst) = storekey {
        let items = found
            .into_iter()
            .map(|p| {
                let s = if storedist {
                    p.dist / conversion
                } else {
                    p.score
                };
                (s, p.member)
            })
            .collect();
        let event = store_event(search_flag);
        return zset::store_range(shared, event, db, dst, items, limits, now, r).await;
    }
    let options = usize::from(withdist) + usize::from(withcoords) + usize::from(withhash);
    r.array(returned);
    for p in found {
        if options > 0 {
            r.array(options + 1);
        }
        r.bulk(&p.member);
        if withdist {
            r.bulk(distance_text(p.dist / conversion).as_bytes());
        }
        if withhash {
            r.integer(p.score as i64);
        }
        if withcoords {
            r.array(2);
            r.double_text(&coordinate_text(p.xy.0));
            r.double_text(&coordinate_text(p.xy.1));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_as_redis_writes_them() {
        assert_eq!(distance_text(166274.15156960033), "166274.1516");
        assert_eq!(distance_text(0.0), "0.0000");
        assert_eq!(distance_text(0.00005), "0.0000");
        assert_eq!(coordinate_text(13.361389338970184), "13.36138933897018433");
        assert_eq!(coordinate_text(-0.0), "0");
        assert_eq!(coordinate_text(15.0), "15");
    }
}
