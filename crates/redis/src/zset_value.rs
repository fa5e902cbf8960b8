//! A sorted set's value as a compact record holds it: the members in
//! Redis's order (score, then bytes) with their scores, written as the
//! item pairs of `compact.rs` (member, then the score's 8 bytes, LE); the
//! listpack thresholds that decide its encoding; how a score is answered;
//! and ZADD's rule for one member, which compact and paged sets share.
//! The commands are in `zset.rs` and `zset_ops.rs`, the paged layout in
//! `zset_pages.rs`.

use std::cmp::Ordering;

use nvdepot_cache::resp::{Change, Kind, Value};
use nvdepot_cache::Error;
use nvdepot_resp::{errors, Reply};

use super::compact::Compact;
use super::session::Shared;

/// Redis's error for a score that is not a number.
pub const NOT_FLOAT: &str = errors::NOT_FLOAT;

/// A sorted set as its record holds it.
#[derive(Clone, Default)]
pub struct ZSet {
    pub large: bool,
    /// (score, member), ascending.
    pub items: Vec<(f64, Vec<u8>)>,
}

use super::compact_update::Fail;

/// The order of members: by score, then by bytes.
pub fn order(a: &(f64, Vec<u8>), b: &(f64, Vec<u8>)) -> Ordering {
    a.0.partial_cmp(&b.0)
        .unwrap_or(Ordering::Equal)
        .then_with(|| a.1.cmp(&b.1))
}

pub(crate) fn zset_of(v: Option<&Value>) -> Result<Option<ZSet>, Fail> {
    let Some(v) = v else { return Ok(None) };
    if v.kind() != Kind::ZSet {
        return Err(Fail::WrongType);
    }
    decode(v.data()).map(Some).map_err(Fail::Store)
}

pub(crate) fn decode(data: &[u8]) -> Result<ZSet, Error> {
    let c = Compact::decode(data)?;
    if c.items.len() % 2 != 0 {
        return Err(Error::Envelope(
            "a sorted set needs member, score pairs".into(),
        ));
    }
    let mut items = Vec::with_capacity(c.items.len() / 2);
    let mut it = c.items.into_iter();
    while let (Some(m), Some(s)) = (it.next(), it.next()) {
        let bits: [u8; 8] = s
            .as_slice()
            .try_into()
            .map_err(|_| Error::Envelope("a score is 8 bytes".into()))?;
        items.push((f64::from_le_bytes(bits), m));
    }
    Ok(ZSet {
        large: c.large,
        items,
    })
}

/// Redis's listpack thresholds for sorted sets, as set now.
#[derive(Clone, Copy)]
pub struct Limits {
    pub entries: usize,
    pub value: usize,
}

impl Limits {
    pub fn now(shared: &Shared) -> Limits {
        let t = &shared.tunables;
        let get = |n| usize::try_from(t.value(n)).unwrap_or(usize::MAX);
        Limits {
            entries: get("zset-max-listpack-entries"),
            value: get("zset-max-listpack-value"),
        }
    }
}

impl ZSet {
    pub fn find(&self, member: &[u8]) -> Option<usize> {
        self.items.iter().position(|(_, m)| m == member)
    }

    pub fn score(&self, member: &[u8]) -> Option<f64> {
        self.find(member).map(|i| self.items[i].0)
    }

    /// Inserts a member known to be absent; converts as Redis's zsetAdd
    /// (before the insert: the member that converts goes in as a double).
    pub fn insert(&mut self, score: f64, member: &[u8], limits: Limits) {
        if self.items.len() + 1 > limits.entries || member.len() > limits.value {
            self.large = true;
        }
        let item = (self.stored(score), member.to_vec());
        let at = self
            .items
            .binary_search_by(|x| order(x, &item))
            .unwrap_or_else(|i| i);
        self.items.insert(at, item);
    }

    /// A score as this set keeps it: a listpack keeps an integral score
    /// as an integer (Redis's zzlInsertAt and double2ll), so -0 goes in
    /// as 0 there, while a skiplist keeps the double. (Applied at each
    /// insert, as Redis: a -0 inserted while small stays 0 once large.)
    fn stored(&self, score: f64) -> f64 {
        if !self.large && score == 0.0 {
            0.0
        } else {
            score
        }
    }

    /// Moves member `i` to `score`.
    pub fn rescore(&mut self, i: usize, score: f64) {
        let (_, member) = self.items.remove(i);
        let item = (self.stored(score), member);
        let at = self
            .items
            .binary_search_by(|x| order(x, &item))
            .unwrap_or_else(|i| i);
        self.items.insert(at, item);
    }

    /// A computed set (the STORE commands): shaped by its content.
    pub fn computed(mut items: Vec<(f64, Vec<u8>)>, limits: Limits) -> ZSet {
        // (A reverse range comes highest first.)
        items.sort_by(order);
        let large =
            items.len() > limits.entries || items.iter().any(|(_, m)| m.len() > limits.value);
        ZSet { large, items }
    }

    pub fn change(self, expire_at_ms: u64) -> Change {
        if self.items.is_empty() {
            return Change::Delete;
        }
        let mut items = Vec::with_capacity(self.items.len() * 2);
        for (s, m) in self.items {
            // A listpack keeps an integral score as an integer (Redis's
            // zzlInsertAt and double2ll): -0 reads back as 0 there, while
            // a skiplist keeps the double.
            let s = if !self.large && s == 0.0 { 0.0 } else { s };
            items.push(m);
            items.push(s.to_le_bytes().to_vec());
        }
        Change::Put {
            kind: Kind::ZSet,
            data: Compact {
                large: self.large,
                items,
            }
            .encode(),
            expire_at_ms,
        }
    }
}

/// Writes a score as Redis does (RESP2 bulk `%.17g`, RESP3 double).
pub fn reply_score(r: &mut Reply<'_>, s: f64) {
    r.double(s);
}

/// Writes members, with their scores if `withscores` (RESP3: pairs).
pub fn reply_items(r: &mut Reply<'_>, items: &[(f64, Vec<u8>)], withscores: bool) {
    if !withscores {
        r.array(items.len());
        for (_, m) in items {
            r.bulk(m);
        }
    } else if r.resp3() {
        r.array(items.len());
        for (s, m) in items {
            r.array(2);
            r.bulk(m);
            reply_score(r, *s);
        }
    } else {
        r.array(items.len() * 2);
        for (s, m) in items {
            r.bulk(m);
            reply_score(r, *s);
        }
    }
}

/// What one member does to a sorted set under ZADD's flags, given its
/// current score (`None`: absent) and the score given.
pub(crate) enum Step {
    /// Left as it is (and INCR answers nil).
    Skip,
    /// Left as it is at this score.
    Same(f64),
    /// Added at this score.
    Add(f64),
    /// Moved to this score.
    Move(f64),
}

pub(crate) fn zadd_step(f: &AddFlags, cur: Option<f64>, s: f64) -> Result<Step, &'static str> {
    let Some(cur) = cur else {
        return Ok(if f.xx { Step::Skip } else { Step::Add(s) });
    };
    if f.nx {
        return Ok(Step::Skip);
    }
    let new = if f.incr { cur + s } else { s };
    if new.is_nan() {
        return Err("ERR resulting score is not a number (NaN)");
    }
    if (f.gt && new <= cur) || (f.lt && new >= cur) {
        return Ok(Step::Skip);
    }
    Ok(if new != cur {
        Step::Move(new)
    } else {
        Step::Same(new)
    })
}

/// ZADD's flags.
#[derive(Clone, Copy, Default)]
pub(crate) struct AddFlags {
    pub nx: bool,
    pub xx: bool,
    pub gt: bool,
    pub lt: bool,
    pub ch: bool,
    pub incr: bool,
}
