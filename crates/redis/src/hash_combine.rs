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

use nvdepot_cache::resp::{Kind, RespStore};
use nvdepot_cache::Error;

use super::combine::{self, Combiner};
use super::hash_pages::{Edit, Meta, Op, Out};
use super::key_locks::{self, KeyGuard};
use super::list_pages::{Stop, SHAPE_PAGED};

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
/// `held` (its lock) and commits them as one batch if any changed it;
/// from the top again if the key changed meanwhile. An op that answers an
/// error changed nothing.
async fn run_ops(
    store: &RespStore,
    kind: Kind,
    db: usize,
    key: &[u8],
    now: u64,
    ops: &[Op<'_>],
    held: KeyGuard<'static>,
) -> Vec<Written> {
    let fail_all = |e: Error| combine::fail_all(e, ops.len());
    let mut first = Some(held);
    let mut attempt = 1u32;
    loop {
        let held = match first.take() {
            Some(h) => h,
            None => key_locks::turn(&mut attempt, db, key).await,
        };
        let (v, version) = match store.get_for_write(db, key, now).await {
            Ok(found) => found,
            Err(e) => return fail_all(e),
        };
        let Some(v) = v else {
            return ops.iter().map(|_| Ok(None)).collect();
        };
        if v.kind() != kind {
            return ops
                .iter()
                .map(|_| Ok(Some(Err(nvdepot_resp::errors::WRONGTYPE))))
                .collect();
        }
        if v.data().first() != Some(&SHAPE_PAGED) {
            return ops.iter().map(|_| Ok(None)).collect();
        }
        let m = match Meta::decode(v.data()) {
            Ok(m) => m,
            Err(e) => return fail_all(e),
        };
        let version = version.expect("a live value has a record");
        let mut edit = Edit::new(store, kind, db, key, m, version);
        let mut outs: Vec<Written> = Vec::with_capacity(ops.len());
        let mut changed = false;
        let mut stop = None;
        for op in ops {
            if edit.meta.count == 0 {
                // Emptied: the commit deletes the key, and the steps
                // after it run alone on what is left.
                break;
            }
            match op.apply(&mut edit).await {
                Ok(Ok((c, out))) => {
                    changed |= c;
                    outs.push(Ok(Some(Ok(out))));
                }
                Ok(Err(msg)) => outs.push(Ok(Some(Err(msg)))),
                Err(s) => {
                    stop = Some(s);
                    break;
                }
            }
        }
        let done = match stop {
            Some(s) => Err(s),
            None if changed => edit.commit(v.expire_at_ms(), held).await,
            None => Ok(()),
        };
        match done {
            Ok(()) => {
                outs.resize_with(ops.len(), || Ok(None));
                return outs;
            }
            Err(Stop::Retry) => continue,
            Err(Stop::Fail(e)) => return fail_all(e),
        }
    }
}
