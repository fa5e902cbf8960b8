//! The paged layout of a large sorted set: the key's record holds only
//! the set's metadata; its members lie twice in pages of the database's
//! pages namespace (as a paged list's, `list_pages.rs`): in member
//! buckets under linear hashing (a paged hash's, `hash_pages.rs`: field
//! the member, value its score), so ZSCORE, and ZADD's and ZREM's look-up
//! of a member's old score, read one bucket; and in the order, a counted
//! B+-tree of (score, member) (`zset_tree.rs`), so ZRANK and the start of
//! any ZRANGE are one descent, ZRANGE of m members ⌈m / per leaf⌉ leaf
//! reads. A sorted set goes paged once Redis would call it a `skiplist`
//! and its compact record (`compact.rs`) would pass
//! [`list_pages::PAGE_AT_BYTES`](super::list_pages::PAGE_AT_BYTES).
//!
//! ```text
//! metadata (the key's record, after its expiry):
//! the paged hash's 30 bytes (shape 2, stamp, members, level, split,
//!     per bucket): the member buckets, pages 0, 1, …
//! u64  root node id, u8 height (0: the root is a leaf), u64 next node id
//!     (node n is page -1 - n)
//! ```
//!
//! Every change commits the metadata, the buckets and the nodes it
//! touched as one crash-atomic batch guarded by the metadata's version,
//! under the key's lock (`key_locks.rs`); pages of dead sets are the
//! sweeper's, freed nodes of a live one are deleted in the change that
//! frees them. The commands this file has no step for (ZREMRANGEBY* past
//! a few members aside, the multi-key ones, ZRANDMEMBER) read the set
//! whole and, if they change it, write it whole; ZSCAN steps through the
//! member buckets (`paged_scan.rs`).

use nvdepot_cache::resp::{Kind, RespStore, Value};
use nvdepot_cache::Error;

use super::combine::{BatchEdit, Combiner, Opened};
use super::hash_pages::{self as hpages, Whole};
use super::key_locks::KeyGuard;
use super::list_pages::{commit_records, page_key, Stop, SHAPE_PAGED};
use super::zset_range::{Range, RangeQuery};
use super::zset_tree::{self as tree, damaged, Item, Shape, Tree};
use super::zset_value::{zadd_step, AddFlags, Step, ZSet};

const META_BYTES: usize = hpages::META_BYTES + 17;

/// A paged sorted set's metadata.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meta {
    pub members: hpages::Meta,
    pub tree: Shape,
}

impl Meta {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = self.members.encode();
        out.extend_from_slice(&self.tree.root.to_le_bytes());
        out.push(self.tree.height);
        out.extend_from_slice(&self.tree.next_node.to_le_bytes());
        out
    }

    pub fn decode(data: &[u8]) -> Result<Meta, Error> {
        if data.len() != META_BYTES {
            return Err(damaged("metadata of the wrong size"));
        }
        let members = hpages::Meta::decode(&data[..hpages::META_BYTES])?;
        let at = hpages::META_BYTES;
        let u64_at = |at: usize| u64::from_le_bytes(data[at..at + 8].try_into().expect("8"));
        let tree = Shape {
            root: u64_at(at),
            height: data[at + 8],
            next_node: u64_at(at + 9),
        };
        if tree.height > tree::HEIGHT_MAX
            || tree.root >= tree.next_node
            || tree.next_node > tree::NODE_ID_MAX
        {
            return Err(damaged("metadata out of shape"));
        }
        Ok(Meta { members, tree })
    }
}

/// Whether `v` is a paged sorted set.
pub fn is_paged(v: &Value) -> bool {
    v.kind() == Kind::ZSet && v.data().first() == Some(&SHAPE_PAGED)
}

/// Whether a sorted set with compact record data of `bytes` goes paged.
pub fn should_page(large: bool, bytes: usize, key: &[u8]) -> bool {
    hpages::should_page(large, bytes, key)
}

fn score_of(v: &[u8]) -> Result<f64, Stop> {
    let bits: [u8; 8] = v
        .try_into()
        .map_err(|_| Stop::Fail(damaged("a member's score is not 8 bytes")))?;
    Ok(f64::from_le_bytes(bits))
}

/// A change (or read) of a paged sorted set in progress.
pub struct Edit<'a> {
    store: &'a RespStore,
    db: usize,
    key: &'a [u8],
    version: u64,
    members: hpages::Edit<'a>,
    tree: Tree<'a>,
}

impl<'a> Edit<'a> {
    pub fn new(store: &'a RespStore, db: usize, key: &'a [u8], meta: Meta, version: u64) -> Self {
        let stamp = meta.members.stamp;
        Edit {
            store,
            db,
            key,
            version,
            members: hpages::Edit::new(store, Kind::ZSet, db, key, meta.members, version),
            tree: Tree::new(store, db, key, (stamp, version), meta.tree),
        }
    }

    pub fn count(&self) -> u64 {
        self.members.meta.count
    }

    async fn score(&mut self, m: &[u8]) -> Result<Option<f64>, Stop> {
        match self.members.get(m).await? {
            Some(v) => score_of(&v).map(Some),
            None => Ok(None),
        }
    }

    /// Gives member `m` (at `old`, or new) the score `new`.
    async fn put(&mut self, m: &[u8], old: Option<f64>, new: f64) -> Result<(), Stop> {
        if let Some(old) = old {
            if !self.tree.remove((old, m)).await? {
                return Err(Stop::Fail(damaged("a member missing from the order")));
            }
        }
        self.tree.insert((new, m)).await?;
        self.members.set(m, &new.to_le_bytes()).await?;
        Ok(())
    }

    /// Removes member `m`; false if absent.
    async fn remove(&mut self, m: &[u8]) -> Result<bool, Stop> {
        let Some(s) = self.score(m).await? else {
            return Ok(false);
        };
        if !self.tree.remove((s, m)).await? {
            return Err(Stop::Fail(damaged("a member missing from the order")));
        }
        self.members.del(m).await?;
        Ok(true)
    }

    /// The ranks a..b (ascending) `range` covers (`rev`: a rank range
    /// counts from the highest).
    async fn window(&mut self, range: &Range, rev: bool) -> Result<(u64, u64), Stop> {
        if let Some(w) = range.rank_window(self.count(), rev) {
            return Ok(w);
        }
        if !range.may_hold() {
            return Ok((0, 0));
        }
        let a = self.tree.rank_where(|it| range.reached(it)).await?;
        let b = self.tree.rank_where(|it| range.past(it)).await?;
        Ok((a, b.max(a)))
    }

    /// The items `q` selects, in reply order.
    async fn query(&mut self, q: &RangeQuery) -> Result<Vec<Item>, Stop> {
        let (mut a, mut b) = self.window(&q.range, q.rev).await?;
        let limit = q.limit.filter(|_| !matches!(q.range, Range::Rank(..)));
        if let Some((off, count)) = limit {
            let n = b - a;
            let off = u64::try_from(off).map_or(n, |o| o.min(n));
            let take = u64::try_from(count).map_or(n - off, |c| c.min(n - off));
            (a, b) = if q.rev {
                (b - off - take, b - off)
            } else {
                (a + off, a + off + take)
            };
        }
        let mut items = self.tree.items(a, b).await?;
        if q.rev {
            items.reverse();
        }
        Ok(items)
    }

    /// Every member, ascending.
    async fn all(&mut self) -> Result<Vec<Item>, Stop> {
        let items = self.tree.items(0, self.count()).await?;
        if items.len() as u64 != self.count() {
            return Err(Stop::Fail(damaged(
                "the order holds another number of members",
            )));
        }
        Ok(items)
    }

    /// Commits (metadata, changed buckets and nodes, freed nodes: one
    /// guarded crash-atomic batch); an emptied set deletes its key (its
    /// pages are left to the sweep). `held` goes once it is visible.
    async fn commit(mut self, expire_at_ms: u64, held: KeyGuard<'static>) -> Result<(), Stop> {
        let mut writes = self.members.writes().await?;
        let meta = if self.count() > 0 {
            writes.extend(self.tree.writes());
            let meta = Meta {
                members: self.members.meta,
                tree: self.tree.shape,
            };
            Some((Kind::ZSet, meta.encode(), expire_at_ms))
        } else {
            None
        };
        let version = Some(self.version);
        commit_records(self.store, self.db, self.key, version, meta, &writes, held).await
    }
}

/// A write command with a step of its own on a paged sorted set.
pub enum Op<'a> {
    Add {
        flags: &'a AddFlags,
        pairs: &'a [(f64, &'a [u8])],
    },
    Rem(&'a [&'a [u8]]),
    /// ZPOPMIN / ZPOPMAX (`max`) of up to `count`.
    Pop {
        max: bool,
        count: usize,
    },
    /// ZREMRANGEBYRANK / SCORE / LEX.
    RemRange(&'a Range),
}

/// What a write command answers.
pub enum Out {
    /// ZADD: the count it answers, and the last score set (INCR).
    /// ZADD's count, the last score, whether any member was added or
    /// rescored.
    Added(i64, Option<f64>, bool),
    Count(i64),
    Items(Vec<Item>),
}

impl Op<'_> {
    /// Applies the command: whether it changed the set, and its answer
    /// (or the error to answer).
    async fn apply(&self, e: &mut Edit<'_>) -> Result<Result<(bool, Out), &'static str>, Stop> {
        Ok(Ok(match *self {
            Op::Add { flags, pairs } => {
                let (mut added, mut changed, mut last) = (0, 0, None);
                for &(s, m) in pairs {
                    let cur = e.score(m).await?;
                    last = match zadd_step(flags, cur, s) {
                        Err(msg) => return Ok(Err(msg)),
                        Ok(Step::Skip) => None,
                        Ok(Step::Same(v)) => Some(v),
                        Ok(Step::Add(v)) => {
                            e.put(m, None, v).await?;
                            added += 1;
                            Some(v)
                        }
                        Ok(Step::Move(v)) => {
                            e.put(m, cur, v).await?;
                            changed += 1;
                            Some(v)
                        }
                    };
                }
                let n = if flags.ch { added + changed } else { added };
                (
                    added + changed > 0,
                    Out::Added(n, last, added + changed > 0),
                )
            }
            Op::Rem(members) => {
                let mut n = 0;
                for m in members {
                    n += i64::from(e.remove(m).await?);
                }
                (n > 0, Out::Count(n))
            }
            Op::Pop { max, count } => {
                let len = e.count();
                let n = (count as u64).min(len);
                let mut items = if max {
                    e.tree.items(len - n, len).await?
                } else {
                    e.tree.items(0, n).await?
                };
                if max {
                    items.reverse();
                }
                for (_, m) in &items {
                    e.remove(m).await?;
                }
                (n > 0, Out::Items(items))
            }
            Op::RemRange(range) => {
                let (a, b) = e.window(range, false).await?;
                let items = e.tree.items(a, b).await?;
                for (_, m) in &items {
                    e.remove(m).await?;
                }
                (a < b, Out::Count((b - a) as i64))
            }
        }))
    }
}

/// A read with a step of its own on a paged sorted set.
pub enum Query<'a> {
    Scores(&'a [&'a [u8]]),
    Card,
    /// ZRANK / ZREVRANK (`rev`).
    Rank(&'a [u8], bool),
    Range(&'a RangeQuery),
    /// ZCOUNT / ZLEXCOUNT.
    Count(&'a Range),
    /// Every member (the commands without a step of their own).
    All,
}

/// What a read found.
pub enum Answer {
    Scores(Vec<Option<f64>>),
    Int(Option<i64>),
    Items(Vec<Item>),
}

impl Query<'_> {
    async fn run(&self, e: &mut Edit<'_>) -> Result<Answer, Stop> {
        Ok(match *self {
            Query::Scores(members) => {
                let mut out = Vec::with_capacity(members.len());
                for m in members {
                    out.push(e.score(m).await?);
                }
                Answer::Scores(out)
            }
            Query::Card => Answer::Int(Some(e.count() as i64)),
            Query::Rank(m, rev) => match e.score(m).await? {
                None => Answer::Int(None),
                Some(s) => {
                    let rank = e.tree.rank_where(|k| tree::cmp(k, (s, m)).is_ge()).await?;
                    let rank = if rev { e.count() - 1 - rank } else { rank };
                    Answer::Int(Some(rank as i64))
                }
            },
            Query::Range(q) => Answer::Items(e.query(q).await?),
            Query::Count(range) => {
                let (a, b) = e.window(range, false).await?;
                Answer::Int(Some((b - a) as i64))
            }
            Query::All => Answer::Items(e.all().await?),
        })
    }
}

/// `key`'s value and a step on it, if it is a paged sorted set.
async fn find<'a>(
    store: &'a RespStore,
    db: usize,
    key: &'a [u8],
    now: u64,
) -> Result<Option<(Value, Edit<'a>)>, Error> {
    let (v, version) = store.get_for_write(db, key, now).await?;
    match v {
        Some(v) if is_paged(&v) => {
            let meta = Meta::decode(v.data())?;
            let version = version.expect("a live value has a record");
            let edit = Edit::new(store, db, key, meta, version);
            Ok(Some((v, edit)))
        }
        _ => Ok(None),
    }
}

/// A step's outcome: `None` when it must read again.
fn settle<T>(r: Result<T, Stop>) -> Result<Option<T>, Error> {
    match r {
        Ok(t) => Ok(Some(t)),
        Err(Stop::Fail(e)) => Err(e),
        Err(Stop::Retry) => Ok(None),
    }
}

/// A write step that may be combined with others on its key
/// (`combine.rs`), owned, as another task may carry it: ZADD without
/// INCR (which never fails half way) and ZREM.
enum Owned {
    Add {
        flags: AddFlags,
        pairs: Vec<(f64, Vec<u8>)>,
    },
    Rem(Vec<Vec<u8>>),
    Pop {
        max: bool,
        count: usize,
    },
}

impl Owned {
    fn of(op: &Op<'_>) -> Option<Owned> {
        match *op {
            Op::Add { flags, pairs } if !flags.incr => Some(Owned::Add {
                flags: *flags,
                pairs: pairs.iter().map(|&(s, m)| (s, m.to_vec())).collect(),
            }),
            Op::Rem(members) => Some(Owned::Rem(members.iter().map(|m| m.to_vec()).collect())),
            Op::Pop { max, count } => Some(Owned::Pop { max, count }),
            _ => None,
        }
    }
}

/// What [`write`] answers.
type Written = Result<Option<Result<Out, &'static str>>, Error>;

static COMBINER: std::sync::LazyLock<Combiner<Owned, Written>> =
    std::sync::LazyLock::new(Combiner::default);

/// Runs a batch of combined steps (`combine.rs`) under `held`, the key's
/// lock (see [`run_ops`]).
async fn write_batch(
    store: &RespStore,
    db: usize,
    key: &[u8],
    now: u64,
    batch: &[Owned],
    held: KeyGuard<'static>,
) -> Vec<Written> {
    let pairs: Vec<Vec<(f64, &[u8])>> = batch
        .iter()
        .map(|o| match o {
            Owned::Add { pairs, .. } => pairs.iter().map(|(s, m)| (*s, m.as_slice())).collect(),
            Owned::Rem(_) | Owned::Pop { .. } => Vec::new(),
        })
        .collect();
    let members: Vec<Vec<&[u8]>> = batch
        .iter()
        .map(|o| match o {
            Owned::Rem(ms) => ms.iter().map(Vec::as_slice).collect(),
            Owned::Add { .. } | Owned::Pop { .. } => Vec::new(),
        })
        .collect();
    let ops: Vec<Op<'_>> = batch
        .iter()
        .zip(pairs.iter().zip(&members))
        .map(|(o, (p, m))| match o {
            Owned::Add { flags, .. } => Op::Add { flags, pairs: p },
            Owned::Rem(_) => Op::Rem(m),
            &Owned::Pop { max, count } => Op::Pop { max, count },
        })
        .collect();
    run_ops(store, db, key, now, &ops, held).await
}

/// Applies `ops` in order to one read of the set, under `held` (the key's
/// lock), and commits them as one batch if any changed it
/// (`combine::edit_batch`): each op's answer, or `None` for all when the
/// key is not a paged sorted set. An op that answers an error changed
/// nothing (ZADD's INCR fails before it writes).
async fn run_ops(
    store: &RespStore,
    db: usize,
    key: &[u8],
    now: u64,
    ops: &[Op<'_>],
    held: KeyGuard<'static>,
) -> Vec<Written> {
    super::combine::edit_batch(db, key, ops, held, async || {
        Ok(match find(store, db, key, now).await? {
            None => Opened::NotPaged,
            Some((v, edit)) => Opened::Paged(Batch {
                edit,
                expire_at_ms: v.expire_at_ms(),
            }),
        })
    })
    .await
}

/// A paged sorted set read for a batch, and its expiry.
struct Batch<'a> {
    edit: Edit<'a>,
    expire_at_ms: u64,
}

impl<'o> BatchEdit<Op<'o>> for Batch<'_> {
    type Answer = Result<Out, &'static str>;

    /// Never: an add after a pop that emptied the set goes on in the same
    /// edit, and the commit deletes the key only if the set ends empty.
    fn emptied(&self) -> bool {
        false
    }

    async fn apply(&mut self, op: &Op<'o>) -> Result<(bool, Self::Answer), Stop> {
        Ok(super::combine::or_error(op.apply(&mut self.edit).await?))
    }

    async fn commit(self, held: KeyGuard<'static>) -> Result<(), Stop> {
        self.edit.commit(self.expire_at_ms, held).await
    }
}

/// Runs `op` on `key` if it is a paged sorted set: `None` when it is not
/// (the caller's compact path), else its answer or error. ZADD (without
/// INCR), ZREM and the pops are combined with the others waiting for the
/// key; the other ops run alone.
pub async fn write(
    store: &RespStore,
    db: usize,
    key: &[u8],
    now: u64,
    op: &Op<'_>,
) -> Result<Option<Result<Out, &'static str>>, Error> {
    if let Some(owned) = Owned::of(op) {
        let scope = super::combine::scope(store, Kind::ZSet as u8);
        let failed = super::combine::interrupted;
        return COMBINER
            .run(
                scope,
                db,
                key,
                owned,
                failed,
                async |batch: Vec<Owned>, held| {
                    write_batch(store, db, key, now, &batch, held).await
                },
            )
            .await;
    }
    let held = super::key_locks::turn(&mut 0, db, key).await;
    let mut answers = run_ops(store, db, key, now, std::slice::from_ref(op), held).await;
    answers.pop().expect("an answer per op")
}

/// Runs `q` on `key` under its lock (no commit half visible) if it is a
/// paged sorted set: `None` when it is not.
pub async fn read(
    store: &RespStore,
    db: usize,
    key: &[u8],
    now: u64,
    q: &Query<'_>,
) -> Result<Option<Answer>, Error> {
    let mut attempt = 0u32;
    loop {
        let _held = super::key_locks::turn_shared(&mut attempt, db, key).await;
        let Some((_, mut edit)) = find(store, db, key, now).await? else {
            return Ok(None);
        };
        let got = q.run(&mut edit).await;
        if let Some(a) = settle(got)? {
            return Ok(Some(a));
        }
    }
}

/// One change of paged sorted set `key` by a command without a step of
/// its own: `apply` sees it whole (as `update` in zset.rs does),
/// and a change is written whole. `None` when `key` is not paged.
pub async fn rewrite<T>(
    store: &RespStore,
    db: usize,
    key: &[u8],
    now: u64,
    apply: &mut impl FnMut(&mut Option<ZSet>) -> Result<(bool, T), &'static str>,
) -> Result<Option<Result<T, &'static str>>, Error> {
    let mut attempt = 0u32;
    loop {
        let held = super::key_locks::turn(&mut attempt, db, key).await;
        let Some((v, mut edit)) = find(store, db, key, now).await? else {
            return Ok(None);
        };
        let version = edit.version;
        let Some(items) = settle(edit.all().await)? else {
            continue;
        };
        let mut z = Some(ZSet { large: true, items });
        let out = match apply(&mut z) {
            Ok((true, t)) => t,
            Ok((false, t)) => return Ok(Some(Ok(t))),
            Err(msg) => return Ok(Some(Err(msg))),
        };
        let items = z.map(|z| z.items).unwrap_or_default();
        if write_whole(store, db, key, Some(version), items, v.expire_at_ms(), held).await? {
            return Ok(Some(Ok(out)));
        }
    }
}

/// Writes `items` (ascending, distinct members) under `key` in place of
/// what `version` (`None`: nothing) held: paged, or compact (large) when
/// small, or a delete when empty. `Ok(false)`: the key changed since it
/// was read.
pub async fn write_whole(
    store: &RespStore,
    db: usize,
    key: &[u8],
    version: Option<u64>,
    items: Vec<Item>,
    expire_at_ms: u64,
    held: KeyGuard<'static>,
) -> Result<bool, Error> {
    let z = ZSet { large: true, items };
    if let nvdepot_cache::resp::Change::Put { data, .. } = z.clone().change(0) {
        if !should_page(true, data.len(), key) {
            let meta = Some((Kind::ZSet, data.as_slice(), expire_at_ms));
            return store
                .commit(db, key, version, meta, &[], move || drop(held))
                .await;
        }
    } else {
        return store
            .commit(db, key, version, None, &[], move || drop(held))
            .await;
    }
    let scores: Vec<[u8; 8]> = z.items.iter().map(|(s, _)| s.to_le_bytes()).collect();
    let pairs: Vec<(&[u8], &[u8])> = z
        .items
        .iter()
        .zip(&scores)
        .map(|((_, m), s)| (m.as_slice(), &s[..]))
        .collect();
    let elements = pairs.len();
    let (members, buckets) = hpages::plan(&pairs);
    let (shape, nodes) = tree::build(&z.items);
    let stamp = members.stamp;
    let mut pages: Vec<(Vec<u8>, Vec<u8>)> = buckets
        .into_iter()
        .enumerate()
        .map(|(b, d)| (page_key(key, stamp, b as i64), d))
        .collect();
    pages.extend(
        nodes
            .iter()
            .map(|(id, n)| (tree::node_page(key, stamp, *id), n.encode())),
    );
    let meta = Meta {
        members,
        tree: shape,
    };
    let whole = Whole {
        kind: Kind::ZSet,
        meta: meta.encode(),
        pages,
        elements,
    };
    whole
        .commit(store, db, key, version, expire_at_ms, held)
        .await
}

/// Writes the compact sorted set `z` paged in place of `version` (`None`:
/// absent), under the key's lock: false if the key changed meanwhile.
pub async fn convert(
    store: &RespStore,
    db: usize,
    key: &[u8],
    version: Option<u64>,
    z: ZSet,
    at: u64,
) -> Result<bool, Error> {
    let held = super::key_locks::PAGED.lock(db, key).await;
    write_whole(store, db, key, version, z.items, at, held).await
}

/// For a paged sorted set `v` under `key`: the whole set in the compact
/// layout (large), as RENAME, COPY, MOVE and a migration write it
/// elsewhere. `None` for any other value.
pub async fn compact_data(
    store: &RespStore,
    db: usize,
    key: &[u8],
    v: &Value,
) -> Result<Option<Vec<u8>>, Error> {
    if !is_paged(v) {
        return Ok(None);
    }
    let Some(Answer::Items(items)) = read(store, db, key, 0, &Query::All).await? else {
        return Err(Error::Envelope(
            "a paged sorted set vanished while read whole".into(),
        ));
    };
    match (ZSet { large: true, items }).change(0) {
        nvdepot_cache::resp::Change::Put { data, .. } => Ok(Some(data)),
        _ => Err(damaged("a paged sorted set with no members")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_round_trips_and_checks_its_shape() {
        let m = Meta {
            members: hpages::Meta {
                stamp: 5,
                count: 1000,
                level: 3,
                split: 2,
                per_bucket: 100,
            },
            tree: Shape {
                root: 12,
                height: 2,
                next_node: 40,
            },
        };
        assert_eq!(Meta::decode(&m.encode()).unwrap(), m);
        let bad = |tree| Meta { tree, ..m }.encode();
        assert!(Meta::decode(&bad(Shape { root: 40, ..m.tree })).is_err());
        assert!(Meta::decode(&bad(Shape {
            height: 65,
            ..m.tree
        }))
        .is_err());
        assert!(Meta::decode(&m.encode()[..40]).is_err());
        // A paged hash's metadata is not a sorted set's.
        assert!(Meta::decode(&m.members.encode()).is_err());
    }
}
