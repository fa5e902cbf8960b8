//! LSET and LTRIM: the list commands that change a list away from its
//! ends. A paged list rewrites only the pages they touch (LSET the one
//! holding the index, LTRIM whole pages dropped unread and the two it cuts);
//! a compact one is rewritten whole through `list::update`.

use nvdepot_cache::resp::RespStore;
use nvdepot_cache::Error;
use nvdepot_resp::{errors, string2ll, Reply};

use super::args::arity;
use super::key_locks;
use super::list::{normalize, normalize_u64, range, range_u64, update};
use super::list_pages::{self as pages, Found, Stop};
use super::notify;
use super::session::Shared;

/// Runs LSET or LTRIM (`None` for any other command).
pub async fn execute(
    shared: &Shared,
    db: usize,
    name: &[u8],
    args: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> Option<Result<(), Error>> {
    let store = &*shared.store;
    let done = match name {
        b"LSET" => {
            if !arity(args, 4, Some(4), r) {
                return Some(Ok(()));
            }
            // The key is looked up before the index is read (Redis's order).
            lset(store, db, args[1], args[2], args[3], now)
                .await
                .map(|out| {
                    out.map(|()| {
                        shared.notify(notify::LIST, "lset", db, args[1]);
                        r.ok()
                    })
                })
        }
        b"LTRIM" => {
            if !arity(args, 4, Some(4), r) {
                return Some(Ok(()));
            }
            let (Some(start), Some(stop)) = (string2ll(args[2]), string2ll(args[3])) else {
                r.error(errors::NOT_INTEGER);
                return Some(Ok(()));
            };
            let out = ltrim(store, db, args[1], start, stop, now).await;
            if let Ok(Ok(existed)) = out {
                shared
                    .notify_removal(notify::LIST, "ltrim", db, args[1], existed, now)
                    .await;
            }
            out.map(|out| out.map(|_| r.ok()))
        }
        _ => return None,
    };
    Some(done.map(|out| {
        if let Err(msg) = out {
            r.error(msg);
        }
    }))
}

/// LSET: a paged list rewrites the one page holding the index.
pub(super) async fn lset(
    store: &RespStore,
    db: usize,
    key: &[u8],
    index: &[u8],
    elem: &[u8],
    now: u64,
) -> Result<Result<(), &'static str>, Error> {
    let mut attempt = 0u32;
    loop {
        let _held = key_locks::turn(&mut attempt, db, key).await;
        let (v, m, version) = match pages::find(store, db, key, now).await? {
            Found::Paged(v, m, version) => (v, m, version),
            Found::WrongType => return Ok(Err(errors::WRONGTYPE)),
            Found::Missing(_) => return Ok(Err(errors::NO_SUCH_KEY)),
            Found::Compact(..) => {
                drop(_held);
                return update(store, db, key, now, |l| {
                    let Some(l) = l else {
                        return Err(errors::NO_SUCH_KEY);
                    };
                    let index = string2ll(index).ok_or(errors::NOT_INTEGER)?;
                    let Some(i) = normalize(index, l.len()) else {
                        return Err("ERR index out of range");
                    };
                    l[i] = elem.to_vec();
                    Ok((true, ()))
                })
                .await;
            }
        };
        let Some(index) = string2ll(index) else {
            return Ok(Err(errors::NOT_INTEGER));
        };
        let Some(i) = normalize_u64(index, m.len) else {
            return Ok(Err("ERR index out of range"));
        };
        let mut edit = pages::Edit::new(store, db, key, m, version);
        let done = match edit.set(i, elem).await {
            Ok(()) => edit.commit(v.expire_at_ms(), _held).await,
            Err(stop) => Err(stop),
        };
        match done {
            Ok(()) => return Ok(Ok(())),
            Err(Stop::Retry) => continue,
            Err(Stop::Fail(e)) => return Err(e),
        }
    }
}

/// LTRIM: a paged list drops whole pages from either end unread and
/// rewrites at most the two it cuts.
pub(super) async fn ltrim(
    store: &RespStore,
    db: usize,
    key: &[u8],
    start: i64,
    stop: i64,
    now: u64,
) -> Result<Result<bool, &'static str>, Error> {
    let mut attempt = 0u32;
    loop {
        let _held = key_locks::turn(&mut attempt, db, key).await;
        let (v, m, version) = match pages::find(store, db, key, now).await? {
            Found::Paged(v, m, version) => (v, m, version),
            Found::WrongType => return Ok(Err(errors::WRONGTYPE)),
            Found::Missing(_) => return Ok(Ok(false)),
            Found::Compact(..) => {
                drop(_held);
                return update(store, db, key, now, |l| {
                    let Some(l) = l else {
                        return Ok((false, false));
                    };
                    let before = l.len();
                    match range(start, stop, l.len()) {
                        None => l.clear(),
                        Some((a, b)) => {
                            l.truncate(b + 1);
                            l.drain(..a);
                        }
                    }
                    Ok((l.len() != before, true))
                })
                .await;
            }
        };
        let (front, back) = match range_u64(start, stop, m.len) {
            None => (m.len, 0),
            Some((a, b)) => (a, m.len - 1 - b),
        };
        if front == 0 && back == 0 {
            return Ok(Ok(true));
        }
        let mut edit = pages::Edit::new(store, db, key, m, version);
        let trimmed = async {
            edit.trim_front(front).await?;
            edit.trim_back(back).await
        }
        .await;
        let done = match trimmed {
            Ok(()) => edit.commit(v.expire_at_ms(), _held).await,
            Err(stop) => Err(stop),
        };
        match done {
            Ok(()) => return Ok(Ok(true)),
            Err(Stop::Retry) => continue,
            Err(Stop::Fail(e)) => return Err(e),
        }
    }
}
