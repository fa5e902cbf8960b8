//! The writes of a paged hash or set, combined (`combine.rs`): the steps
//! waiting for one key's lock are applied in order to one edit and
//! committed as one batch, so a hot collection's metadata is written once
//! per batch (and a bucket two steps share, once) instead of once per
//! step.
//!
//! A step that finds the key not paged (missing, compact), or that comes
//! after a step which emptied it (the commit deletes the key), is
//! answered `None` and takes the caller's compact path, as a step alone
//! would.

use std::sync::LazyLock;

use nvdepot_cache::resp::{Change, Kind, RespStore, Value};
use nvdepot_cache::Error;

use super::combine::{self, BatchEdit, Combiner, Opened};
use super::compact_update::{try_once, Escalate, Fail, Shape};
use super::hash_pages::{self as hpages, Edit, Meta, Op, Out};
use super::key_locks::KeyGuard;
use super::list_pages::{is_paged, Stop};

/// A write command's operation, owned (it waits in a mailbox).
enum Owned {
    Set(Vec<Vec<u8>>),
    SetNx(Vec<u8>, Vec<u8>),
    IncrBy(Vec<u8>, i64),
    IncrByFloat(Vec<u8>, f64),
    Del(Vec<Vec<u8>>),
    Pop(u64),
}

impl Owned {
    fn of(op: &Op<'_>) -> Owned {
        let all = |xs: &[&[u8]]| xs.iter().map(|x| x.to_vec()).collect();
        match *op {
            Op::Set(pairs) => Owned::Set(all(pairs)),
            Op::SetNx(f, v) => Owned::SetNx(f.to_vec(), v.to_vec()),
            Op::IncrBy(f, by) => Owned::IncrBy(f.to_vec(), by),
            Op::IncrByFloat(f, by) => Owned::IncrByFloat(f.to_vec(), by),
            Op::Del(fields) => Owned::Del(all(fields)),
            Op::Pop(n) => Owned::Pop(n),
        }
    }
}

/// What [`write`] answers.
type Written = Result<Option<Result<Out, &'static str>>, Error>;

static COMBINER: LazyLock<Combiner<Owned, Written>> = LazyLock::new(Combiner::default);

/// Runs `op` on hash or set (`kind`) `key` if it is paged: `None` when it
/// is not (absent, compact: the caller's compact path), else its answer
/// or error (WRONGTYPE for another type). Combined with the other steps
/// waiting for the key.
pub async fn write(
    store: &RespStore,
    kind: Kind,
    db: usize,
    key: &[u8],
    now: u64,
    op: &Op<'_>,
) -> Written {
    let scope = combine::scope(store, kind as u8);
    COMBINER
        .run(
            scope,
            db,
            key,
            Owned::of(op),
            combine::interrupted,
            async |batch: Vec<Owned>, held| {
                write_batch(store, kind, db, key, now, &batch, held).await
            },
        )
        .await
}

/// One atomic update of hash or set (`kind`) `key`: while compact,
/// `apply` on the value `read` gives (WRONGTYPE is `read`'s), its change
/// encoded by `change`; a compact one the change takes past the paged
/// threshold is written paged; a paged one runs `op` (its answer made by
/// `out`, combined with the others waiting for the key).
#[allow(clippy::too_many_arguments)]
pub async fn update<V, T>(
    store: &RespStore,
    kind: Kind,
    db: usize,
    key: &[u8],
    now: u64,
    read: impl Fn(Option<&Value>) -> Result<V, Fail>,
    change: impl Fn(V, u64) -> Change,
    op: &Op<'_>,
    mut apply: impl FnMut(&mut V) -> Result<(bool, T), &'static str>,
    out: impl Fn(Out) -> T,
) -> Result<Result<T, &'static str>, Error> {
    let shape = Shape {
        is_paged: |v: &Value| v.kind() == kind && is_paged(v.data()),
        read,
        change,
        should_page: |data: &[u8]| hpages::should_page(data[0] == 1, data.len(), key),
    };
    loop {
        match try_once(store, db, key, now, &shape, &mut apply).await? {
            (done, None) => return Ok(done),
            (done, Some(Escalate::Convert(version, data, at))) => {
                if hpages::convert(store, kind, db, key, version, &data, at).await? {
                    return Ok(done);
                }
            }
            (_, Some(Escalate::Paged)) => {
                if let Some(r) = write(store, kind, db, key, now, op).await? {
                    return Ok(r.map(&out));
                }
            }
        }
    }
}

/// Runs a batch of combined steps under `held`, the key's lock.
async fn write_batch(
    store: &RespStore,
    kind: Kind,
    db: usize,
    key: &[u8],
    now: u64,
    batch: &[Owned],
    held: KeyGuard<'static>,
) -> Vec<Written> {
    let lists: Vec<Vec<&[u8]>> = batch
        .iter()
        .map(|o| match o {
            Owned::Set(xs) | Owned::Del(xs) => xs.iter().map(Vec::as_slice).collect(),
            _ => Vec::new(),
        })
        .collect();
    let ops: Vec<Op<'_>> = batch
        .iter()
        .zip(&lists)
        .map(|(o, l)| match o {
            Owned::Set(_) => Op::Set(l),
            Owned::Del(_) => Op::Del(l),
            Owned::SetNx(f, v) => Op::SetNx(f, v),
            &Owned::IncrBy(ref f, by) => Op::IncrBy(f, by),
            &Owned::IncrByFloat(ref f, by) => Op::IncrByFloat(f, by),
            &Owned::Pop(n) => Op::Pop(n),
        })
        .collect();
    run_ops(store, kind, db, key, now, &ops, held).await
}

/// Applies `ops` in order to one edit of the paged collection under
/// `held` (its lock) and commits them as one batch (`combine::edit_batch`).
async fn run_ops(
    store: &RespStore,
    kind: Kind,
    db: usize,
    key: &[u8],
    now: u64,
    ops: &[Op<'_>],
    held: KeyGuard<'static>,
) -> Vec<Written> {
    combine::edit_batch(db, key, ops, held, async || {
        let (v, version) = store.get_for_write(db, key, now).await?;
        let Some(v) = v else {
            return Ok(Opened::NotPaged);
        };
        if v.kind() != kind {
            return Ok(Opened::Every(|| Err(nvdepot_resp::errors::WRONGTYPE)));
        }
        if !is_paged(v.data()) {
            return Ok(Opened::NotPaged);
        }
        let meta = Meta::decode(v.data())?;
        let version = version.expect("a live value has a record");
        Ok(Opened::Paged(Batch {
            edit: Edit::new(store, kind, db, key, meta, version),
            expire_at_ms: v.expire_at_ms(),
        }))
    })
    .await
}

/// A paged hash or set read for a batch, and its expiry.
struct Batch<'a> {
    edit: Edit<'a>,
    expire_at_ms: u64,
}

impl<'o> BatchEdit<Op<'o>> for Batch<'_> {
    type Answer = Result<Out, &'static str>;

    fn emptied(&self) -> bool {
        self.edit.meta.count == 0
    }

    async fn apply(&mut self, op: &Op<'o>) -> Result<(bool, Self::Answer), Stop> {
        Ok(combine::or_error(op.apply(&mut self.edit).await?))
    }

    async fn commit(self, held: KeyGuard<'static>) -> Result<(), Stop> {
        self.edit.commit(self.expire_at_ms, held).await
    }
}
