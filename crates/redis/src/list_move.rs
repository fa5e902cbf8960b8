//! The list commands over two keys or more: LMOVE (and RPOPLPUSH) and
//! LMPOP, each one step under the exclusive pass of the isolation gate;
//! the blocking forms (`blocking.rs`) retry them.

use nvdepot_cache::Error;
use nvdepot_resp::{errors, Reply};

use super::args::arity;
use super::list::{len_of, pop_n, push_n, End};
use super::notify;
use super::session::Shared;

/// Runs LMOVE, RPOPLPUSH or LMPOP (`None` for any other command).
pub async fn execute(
    shared: &Shared,
    db: usize,
    name: &[u8],
    args: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> Option<Result<(), Error>> {
    Some(match name {
        b"LMOVE" | b"RPOPLPUSH" => {
            let (from, to) = if name == b"LMOVE" {
                if !arity(args, 5, Some(5), r) {
                    return Some(Ok(()));
                }
                match (End::parse(args[3]), End::parse(args[4])) {
                    (Some(f), Some(t)) => (f, t),
                    _ => {
                        r.error(errors::SYNTAX);
                        return Some(Ok(()));
                    }
                }
            } else {
                if !arity(args, 3, Some(3), r) {
                    return Some(Ok(()));
                }
                (End::Right, End::Left)
            };
            lmove(shared, db, args[1], args[2], from, to, now, r)
                .await
                .map(|_| ())
        }
        b"LMPOP" => {
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
            mpop(shared, db, &spec, now, r).await.map(|_| ())
        }
        _ => return None,
    })
}

/// LMOVE `src` `dst` (the caller holds the exclusive pass): the element
/// moved, if any (its reply already written).
#[allow(clippy::too_many_arguments)]
pub async fn lmove(
    shared: &Shared,
    db: usize,
    src: &[u8],
    dst: &[u8],
    from: End,
    to: End,
    now: u64,
    r: &mut Reply<'_>,
) -> Result<Option<Vec<u8>>, Error> {
    let store = &*shared.store;
    let Ok(len) = len_of(store, db, src, now, r).await? else {
        return Ok(None);
    };
    if len.unwrap_or(0) == 0 {
        r.null();
        return Ok(None);
    }
    let Ok(_) = len_of(store, db, dst, now, r).await? else {
        return Ok(None);
    };
    if src == dst && len == Some(1) {
        // Rotating a one-element list onto itself leaves it as it is
        // (Redis pushes onto the same object: never emptied, so no `del`
        // or `new` event). The element is learnt by a pop staged in a
        // scratch layer that is dropped; its write stamp is bumped (a
        // change to WATCH and client tracking, as Redis signals it).
        let scratch = std::sync::Arc::new(nvdepot_cache::staging::Staging::scratch());
        let popped = nvdepot_cache::staging::stage_async(
            &scratch,
            Box::pin(pop_n(store, db, src, now, from, 1)),
        )
        .await?;
        let Some(e) = popped.ok().flatten().and_then(|mut p| p.pop()) else {
            r.null();
            return Ok(None);
        };
        shared.notify(notify::LIST, to.push_event(), db, dst);
        shared.notify(notify::LIST, from.pop_event(), db, src);
        r.bulk(&e);
        return Ok(Some(e));
    }
    // Under the exclusive pass: nothing comes between the pop and the
    // push. Both are staged and written as one crash-atomic batch, so a
    // crash never loses the element in flight (inside a script or EXEC,
    // with theirs).
    let step = async {
        let popped = pop_n(store, db, src, now, from, 1).await?;
        let Some(e) = popped.ok().flatten().and_then(|mut p| p.pop()) else {
            return Ok(None);
        };
        push_n(store, db, dst, now, to, &[&e], false).await?.ok();
        Ok::<_, Error>(Some(e))
    };
    let atomic = super::atomic::Atomic::begin();
    let moved = atomic.run(Box::pin(step)).await;
    atomic.commit(store).await?;
    let moved = moved?;
    let Some(e) = moved else {
        r.null();
        return Ok(None);
    };
    // Redis's order: the push, then the pop (and the source's `del`).
    shared.notify(notify::LIST, to.push_event(), db, dst);
    shared
        .notify_removal(notify::LIST, from.pop_event(), db, src, true, now)
        .await;
    r.bulk(&e);
    Ok(Some(e))
}

/// LMPOP's (and BLMPOP's) arguments.
pub struct MPop<'a> {
    pub keys: Vec<&'a [u8]>,
    pub end: End,
    pub count: usize,
}

impl<'a> MPop<'a> {
    /// Parses `args` whose numkeys is at `at` (LMPOP 1, BLMPOP 2).
    pub fn parse(args: &[&'a [u8]], at: usize) -> Result<MPop<'a>, &'static str> {
        if args.len() < at + 3 {
            return Err(errors::SYNTAX);
        }
        let (keys, end, count) = super::args::mpop_args(args, at, End::parse)?;
        Ok(MPop { keys, end, count })
    }
}

/// LMPOP once parsed (the caller holds the exclusive pass): pops from the
/// first non-empty list; true if it popped (its reply written), false
/// when every list is empty (nothing written).
pub async fn try_mpop(
    shared: &Shared,
    db: usize,
    spec: &MPop<'_>,
    now: u64,
    r: &mut Reply<'_>,
) -> Result<Result<bool, ()>, Error> {
    let store = &*shared.store;
    for key in &spec.keys {
        let Ok(len) = len_of(store, db, key, now, r).await? else {
            return Ok(Err(()));
        };
        if len.unwrap_or(0) == 0 {
            continue;
        }
        let popped = pop_n(store, db, key, now, spec.end, spec.count).await?;
        let Ok(Some(popped)) = popped else { continue };
        if popped.is_empty() {
            continue;
        }
        shared
            .notify_removal(notify::LIST, spec.end.pop_event(), db, key, true, now)
            .await;
        r.array(2);
        r.bulk(key);
        r.array(popped.len());
        for e in &popped {
            r.bulk(e);
        }
        return Ok(Ok(true));
    }
    Ok(Ok(false))
}

pub(super) async fn mpop(
    shared: &Shared,
    db: usize,
    spec: &MPop<'_>,
    now: u64,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    if try_mpop(shared, db, spec, now, r).await? == Ok(false) {
        r.null_array();
    }
    Ok(())
}
