//! Reading a sorted set's arguments: scores as Redis's
//! `getDoubleFromObject`, score and lex ranges as `zslParseRange` and
//! `zslParseLexRange`, and ZRANGE's options (with the legacy forms'), and
//! the members a range selects — Redis's listpack walk, which is what
//! Redis answers at any encoding where scores are in order; and ZCARD,
//! ZSCORE and ZMSCORE of a compact set, read from its record's bytes.

use std::cmp::Ordering;

use nvdepot_cache::Error;
use nvdepot_resp::{errors, string2ll, Reply};

use super::compact;
use super::zset_value::{reply_score, ZSet};

/// A score as Redis's `getDoubleFromObject` reads one: `strtod` over the
/// whole argument, not empty, no leading space, not NaN, not past f64's
/// range (an overflow or an underflow to zero is refused).
pub fn parse_score(a: &[u8]) -> Option<f64> {
    if a.is_empty() || a[0].is_ascii_whitespace() {
        return None;
    }
    let (v, consumed, range) = strtod(a)?;
    if consumed != a.len() || v.is_nan() || (range && (v.is_infinite() || v == 0.0)) {
        return None;
    }
    Some(v)
}

/// C's `strtod` over `a` up to its first NUL: (value, bytes consumed,
/// ERANGE), or `None` if nothing could be read at all.
pub(super) fn strtod(a: &[u8]) -> Option<(f64, usize, bool)> {
    let end = a.iter().position(|&b| b == 0).unwrap_or(a.len());
    let c = std::ffi::CString::new(&a[..end]).ok()?;
    let mut stop: *mut libc::c_char = std::ptr::null_mut();
    // SAFETY: `c` is NUL-terminated and outlives the call; strtod writes
    // only `stop` (a pointer into `c`) and this thread's errno.
    let (v, range) = unsafe {
        *libc::__errno_location() = 0;
        let v = libc::strtod(c.as_ptr(), &mut stop);
        (v, *libc::__errno_location() == libc::ERANGE)
    };
    Some((v, stop as usize - c.as_ptr() as usize, range))
}

/// One end of a score range (`zslParseRange`): `(` exclusive, else
/// inclusive; `strtod` must reach the end of the C string (so an empty
/// bound is 0, as in Redis), NaN refused.
fn score_bound(a: &[u8]) -> Option<(f64, bool)> {
    let (body, ex) = match a.first() {
        Some(b'(') => (&a[1..], true),
        _ => (a, false),
    };
    let end = body.iter().position(|&b| b == 0).unwrap_or(body.len());
    let (v, consumed, _) = strtod(body)?;
    if consumed != end || v.is_nan() {
        return None;
    }
    Some((v, ex))
}

/// A score range [min, max] with exclusive ends.
#[derive(Clone, Copy)]
pub struct ScoreRange {
    min: f64,
    minex: bool,
    max: f64,
    maxex: bool,
}

impl ScoreRange {
    pub fn parse(min: &[u8], max: &[u8]) -> Option<ScoreRange> {
        let (min, minex) = score_bound(min)?;
        let (max, maxex) = score_bound(max)?;
        Some(ScoreRange::new(min, minex, max, maxex))
    }

    /// A range from its bounds (`minex`/`maxex`: the end is excluded).
    pub fn new(min: f64, minex: bool, max: f64, maxex: bool) -> ScoreRange {
        ScoreRange {
            min,
            minex,
            max,
            maxex,
        }
    }

    pub fn contains(&self, s: f64) -> bool {
        let above = if self.minex {
            s > self.min
        } else {
            s >= self.min
        };
        let below = if self.maxex {
            s < self.max
        } else {
            s <= self.max
        };
        above && below
    }
}

/// One end of a lex range.
#[derive(Clone, PartialEq, Eq)]
enum Lex {
    Min,
    Max,
    Incl(Vec<u8>),
    Excl(Vec<u8>),
}

fn lex_bound(a: &[u8]) -> Option<Lex> {
    match a.first() {
        Some(b'+') if a.len() == 1 => Some(Lex::Max),
        Some(b'-') if a.len() == 1 => Some(Lex::Min),
        Some(b'(') => Some(Lex::Excl(a[1..].to_vec())),
        Some(b'[') => Some(Lex::Incl(a[1..].to_vec())),
        _ => None,
    }
}

/// A lex range (`zslParseLexRange`).
#[derive(Clone)]
pub struct LexRange {
    min: Lex,
    max: Lex,
}

impl LexRange {
    pub fn parse(min: &[u8], max: &[u8]) -> Option<LexRange> {
        Some(LexRange {
            min: lex_bound(min)?,
            max: lex_bound(max)?,
        })
    }

    /// Redis's `zslIsInLexRange` check of the bounds alone: false when
    /// min is past max (or equal with an exclusive end).
    fn can_hold(&self) -> bool {
        let cmp = match (&self.min, &self.max) {
            (Lex::Min, Lex::Min) | (Lex::Max, Lex::Max) => Ordering::Equal,
            (Lex::Min, _) | (_, Lex::Max) => Ordering::Less,
            (Lex::Max, _) | (_, Lex::Min) => Ordering::Greater,
            (Lex::Incl(a) | Lex::Excl(a), Lex::Incl(b) | Lex::Excl(b)) => a.cmp(b),
        };
        let exclusive = matches!(self.min, Lex::Excl(_)) || matches!(self.max, Lex::Excl(_));
        !(cmp == Ordering::Greater || (cmp == Ordering::Equal && exclusive))
    }

    fn gte_min(&self, m: &[u8]) -> bool {
        match &self.min {
            Lex::Min => true,
            Lex::Max => false,
            Lex::Incl(b) => m >= b.as_slice(),
            Lex::Excl(b) => m > b.as_slice(),
        }
    }

    fn lte_max(&self, m: &[u8]) -> bool {
        match &self.max {
            Lex::Max => true,
            Lex::Min => false,
            Lex::Incl(b) => m <= b.as_slice(),
            Lex::Excl(b) => m < b.as_slice(),
        }
    }

    /// The indexes Redis's listpack walk selects, ascending. Lex ranges
    /// assume every score equal (Redis's documented precondition); over
    /// mixed scores Redis walks the (score, member) order: the last
    /// member must reach min and the first not pass max, then a run
    /// starts at the first member reaching min (from the tail going
    /// backwards for a reverse range) and ends at the first past max.
    fn walk(&self, z: &ZSet, rev: bool) -> Vec<usize> {
        let items = &z.items;
        let Some((first, last)) = items.first().zip(items.last()) else {
            return Vec::new();
        };
        if !self.can_hold() || !self.gte_min(&last.1) || !self.lte_max(&first.1) {
            return Vec::new();
        }
        let mut out = Vec::new();
        if !rev {
            let Some(start) = items.iter().position(|(_, m)| self.gte_min(m)) else {
                return out;
            };
            for (i, (_, m)) in items.iter().enumerate().skip(start) {
                if !self.lte_max(m) {
                    break;
                }
                out.push(i);
            }
        } else {
            let Some(start) = items.iter().rposition(|(_, m)| self.lte_max(m)) else {
                return out;
            };
            for i in (0..=start).rev() {
                if !self.gte_min(&items[i].1) {
                    break;
                }
                out.push(i);
            }
            out.reverse();
        }
        out
    }
}

/// A range of ZRANGE's kinds over a sorted set.
#[derive(Clone)]
pub enum Range {
    Rank(i64, i64),
    Score(ScoreRange),
    Lex(LexRange),
}

impl Range {
    /// The range of a ZREMRANGEBY* command (`name`) from its bounds.
    pub fn parse(name: &[u8], a: &[u8], b: &[u8]) -> Result<Range, &'static str> {
        match name {
            b"ZREMRANGEBYRANK" => match (string2ll(a), string2ll(b)) {
                (Some(a), Some(b)) => Ok(Range::Rank(a, b)),
                _ => Err(errors::NOT_INTEGER),
            },
            b"ZREMRANGEBYSCORE" => ScoreRange::parse(a, b)
                .map(Range::Score)
                .ok_or("ERR min or max is not a float"),
            _ => LexRange::parse(a, b)
                .map(Range::Lex)
                .ok_or("ERR min or max not valid string range item"),
        }
    }

    /// The indexes the range covers, ascending (`rev`: a rank range
    /// counts from the highest).
    pub fn select(&self, z: &ZSet, rev: bool) -> Vec<usize> {
        let len = z.items.len();
        match self {
            Range::Rank(a, b) => {
                let n = len as i64;
                let mut a = if *a < 0 { a.saturating_add(n) } else { *a };
                let mut b = if *b < 0 { b.saturating_add(n) } else { *b };
                if a < 0 {
                    a = 0;
                }
                if a > b || a >= n {
                    return Vec::new();
                }
                if b >= n {
                    b = n - 1;
                }
                let (a, b) = (a as usize, b as usize);
                if rev {
                    (len - 1 - b..=len - 1 - a).collect()
                } else {
                    (a..=b).collect()
                }
            }
            Range::Score(s) => (0..len).filter(|&i| s.contains(z.items[i].0)).collect(),
            Range::Lex(l) => l.walk(z, rev),
        }
    }
}

impl Range {
    /// For a rank range: the ranks a..b it covers, ascending (`rev`:
    /// counted from the highest), over `len` members. `None` for a score
    /// or lex range.
    pub fn rank_window(&self, len: u64, rev: bool) -> Option<(u64, u64)> {
        let Range::Rank(a, b) = *self else {
            return None;
        };
        let n = len as i64;
        let a = if a < 0 { a.saturating_add(n) } else { a }.max(0);
        let b = if b < 0 { b.saturating_add(n) } else { b };
        if a > b || a >= n {
            return Some((0, 0));
        }
        let (a, b) = (a as u64, b.min(n - 1) as u64);
        Some(if rev {
            (len - 1 - b, len - a)
        } else {
            (a, b + 1)
        })
    }

    /// Whether a score or lex range can hold anything at all (Redis's
    /// check of the bounds alone).
    pub fn may_hold(&self) -> bool {
        match self {
            Range::Lex(l) => l.can_hold(),
            Range::Score(s) => s.min <= s.max,
            Range::Rank(..) => true,
        }
    }

    /// Whether `it` has reached the range's low end: false, then true
    /// along the order (for a lex range, over equal scores).
    pub fn reached(&self, it: (f64, &[u8])) -> bool {
        match self {
            Range::Score(s) => {
                if s.minex {
                    it.0 > s.min
                } else {
                    it.0 >= s.min
                }
            }
            Range::Lex(l) => l.gte_min(it.1),
            Range::Rank(..) => unreachable!("a rank range has no bounds to reach"),
        }
    }

    /// Whether `it` is past the range's high end: false, then true.
    pub fn past(&self, it: (f64, &[u8])) -> bool {
        match self {
            Range::Score(s) => {
                if s.maxex {
                    it.0 >= s.max
                } else {
                    it.0 > s.max
                }
            }
            Range::Lex(l) => !l.lte_max(it.1),
            Range::Rank(..) => unreachable!("a rank range has no bounds to pass"),
        }
    }
}

/// ZRANGE's options (and the legacy forms', which fix some of them).
pub struct RangeQuery {
    pub range: Range,
    pub rev: bool,
    pub withscores: bool,
    /// LIMIT offset count (count < 0: all).
    pub limit: Option<(i64, i64)>,
}

impl RangeQuery {
    /// Parses `args` from the key on (key, min, max, options …) for the
    /// command `name`; `store`: ZRANGESTORE (no WITHSCORES).
    pub fn parse(name: &[u8], args: &[&[u8]], store: bool) -> Result<RangeQuery, &'static str> {
        #[derive(PartialEq, Clone, Copy)]
        enum By {
            Auto,
            Rank,
            Score,
            Lex,
        }
        let (mut by, mut rev) = match name {
            b"ZRANGE" | b"ZRANGESTORE" => (By::Auto, None),
            b"ZREVRANGE" => (By::Rank, Some(true)),
            b"ZRANGEBYSCORE" => (By::Score, Some(false)),
            b"ZREVRANGEBYSCORE" => (By::Score, Some(true)),
            b"ZRANGEBYLEX" => (By::Lex, Some(false)),
            _ => (By::Lex, Some(true)),
        };
        let (mut withscores, mut limit) = (false, None);
        let mut j = 3;
        while j < args.len() {
            let left = args.len() - j - 1;
            let opt = args[j].to_ascii_uppercase();
            match opt.as_slice() {
                b"WITHSCORES" if !store => withscores = true,
                b"LIMIT" if left >= 2 => {
                    let off = string2ll(args[j + 1]).ok_or(errors::NOT_INTEGER)?;
                    let count = string2ll(args[j + 2]).ok_or(errors::NOT_INTEGER)?;
                    limit = Some((off, count));
                    j += 2;
                }
                b"REV" if rev.is_none() => rev = Some(true),
                b"BYLEX" if by == By::Auto => by = By::Lex,
                b"BYSCORE" if by == By::Auto => by = By::Score,
                _ => return Err(errors::SYNTAX),
            }
            j += 1;
        }
        let by = if by == By::Auto { By::Rank } else { by };
        let rev = rev.unwrap_or(false);
        if limit.is_some_and(|(_, c)| c != -1) && by == By::Rank {
            return Err(
                "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
            );
        }
        if withscores && by == By::Lex {
            return Err("ERR syntax error, WITHSCORES not supported in combination with BYLEX");
        }
        let (lo, hi) = if rev && by != By::Rank {
            (args[2], args[1])
        } else {
            (args[1], args[2])
        };
        let range = match by {
            By::Rank => match (string2ll(lo), string2ll(hi)) {
                (Some(a), Some(b)) => Range::Rank(a, b),
                _ => return Err(errors::NOT_INTEGER),
            },
            By::Score => {
                Range::Score(ScoreRange::parse(lo, hi).ok_or("ERR min or max is not a float")?)
            }
            _ => Range::Lex(
                LexRange::parse(lo, hi).ok_or("ERR min or max not valid string range item")?,
            ),
        };
        Ok(RangeQuery {
            range,
            rev,
            withscores,
            limit,
        })
    }

    /// The items the query selects, in reply order.
    pub fn run(&self, z: &ZSet) -> Vec<(f64, Vec<u8>)> {
        let mut idx = self.range.select(z, self.rev);
        if self.rev {
            idx.reverse();
        }
        // A rank range ignores LIMIT (accepted there only with count -1,
        // and then unused, as Redis's genericZrangebyrankCommand).
        let limit = self
            .limit
            .filter(|_| !matches!(self.range, Range::Rank(..)));
        if let Some((off, count)) = limit {
            if off < 0 {
                return Vec::new();
            }
            let off = usize::try_from(off).unwrap_or(usize::MAX).min(idx.len());
            idx.drain(..off);
            if count >= 0 {
                idx.truncate(usize::try_from(count).unwrap_or(usize::MAX));
            }
        }
        idx.into_iter().map(|i| z.items[i].clone()).collect()
    }
}

/// ZCARD, ZSCORE and ZMSCORE of a compact sorted set, from its record's
/// bytes as they lie (checked whole first): decoding it took two `Vec`s
/// per member for every score looked up.
pub(super) fn scores_compact(
    name: &[u8],
    data: &[u8],
    members: &[&[u8]],
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    let bad = |what: &str| Error::Envelope(what.into());
    let (_, fields) = compact::check_items(data)?;
    if !fields.is_multiple_of(2) {
        return Err(bad("a sorted set needs member, score pairs"));
    }
    let mut scores = compact::items(data).flatten().skip(1).step_by(2);
    if scores.any(|(_, s)| s.len() != 8) {
        return Err(bad("a score is 8 bytes"));
    }
    // Every item parsed, every score 8 bytes: the walks below meet no error.
    let score = |m: &[u8]| {
        let mut items = compact::items(data).flatten().map(|(_, x)| x);
        while let (Some(member), Some(score)) = (items.next(), items.next()) {
            if member == m {
                return score.try_into().ok().map(f64::from_le_bytes);
            }
        }
        None
    };
    match name {
        b"ZCARD" => r.integer((fields / 2) as i64),
        b"ZSCORE" => match score(members[0]) {
            Some(s) => reply_score(r, s),
            None => r.null(),
        },
        _ => {
            r.array(members.len());
            for m in members {
                match score(m) {
                    Some(s) => reply_score(r, s),
                    None => r.null(),
                }
            }
        }
    }
    Ok(())
}
