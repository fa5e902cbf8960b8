//! Blocking pops (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP): a client
//! whose keys are empty waits, without holding a pass of the isolation
//! gate, until a write may have given one of them elements, its timeout
//! passes, or it is killed, unblocked or gone.
//!
//! Each key has a queue of its waiters, in the order they blocked. A
//! command that may add elements (`may_wake`) signals its keys: the first
//! waiter of each key not yet woken is woken and retries its pop under a
//! pass of the gate; if it finds nothing (another client was faster) it
//! waits again in its place. A waiter that pops signals the key again (it
//! may hold more), and one that leaves after a wake-up it did not use
//! passes it on, so an element never waits while a client blocked on its
//! key does. Pushes inside MULTI/EXEC wake the waiters, which run once
//! EXEC releases the exclusive pass — as Redis serves them after EXEC.
//!
//! A waiter registers before its first attempt, so a push between the
//! attempt and the wait is not missed. Inside MULTI a blocking pop does not
//! block: it answers at once, as Redis's does.

use std::sync::Arc;

use nvdepot_cache::resp::unix_now_ms;
use nvdepot_cache::Error;
use nvdepot_resp::{errors, Reply};

use super::args::arity;
use super::blocked::{timeout_arg, Cancel, Deadline, Waiter};
use super::list::{len_of, pop_n, End};
use super::list_move::{lmove, try_mpop, MPop};
use super::notify;
use super::session::{RespSession, Shared};

/// The blocking commands.
pub fn is_blocking(name: &[u8]) -> bool {
    matches!(
        name,
        b"BLPOP"
            | b"BRPOP"
            | b"BLMOVE"
            | b"BRPOPLPUSH"
            | b"BLMPOP"
            | b"BZPOPMIN"
            | b"BZPOPMAX"
            | b"BZMPOP"
    )
}

/// Commands after which one of their keys may have elements for a waiter.
pub fn may_wake(name: &[u8]) -> bool {
    super::list::may_push(name)
        || super::zset_ops::may_add(name)
        || name == b"XADD"
        || matches!(
            name,
            b"RENAME" | b"RENAMENX" | b"COPY" | b"SORT" | b"RESTORE"
        )
}

impl RespSession {
    /// A blocking pop outside MULTI: tries, and while its keys are empty
    /// waits (holding no pass) for a signal of them, its timeout, or its
    /// end (`blocking.rs`).
    pub(super) async fn block(&mut self, name: &[u8], args: &[&[u8]], out: &mut Vec<u8>) {
        let shared = self.shared();
        let keys = super::blocking::keys_of(name, args);
        let waiter = Arc::new(Waiter::default());
        let db = self.db;
        shared.blocked.register(db, &keys, &waiter);
        *self.client.blocked.lock() = Some(Arc::clone(&waiter));
        let mut deadline = None;
        let mut popped = false;
        // XREAD's retries read after the IDs its first try resolved `$` to.
        let mut again: Option<Vec<Vec<u8>>> = None;
        'tries: loop {
            waiter.rearm();
            self.may_block = true;
            self.would_block = None;
            let owned: Vec<&[u8]>;
            let now_args: &[&[u8]] = match &again {
                Some(a) => {
                    owned = a.iter().map(Vec::as_slice).collect();
                    &owned
                }
                None => args,
            };
            if super::keys::needs_exclusive(name) {
                let _pass = shared.gate.exclusive().await;
                self.execute(now_args, out).await;
            } else {
                let _pass = shared.gate.shared().await;
                self.execute(now_args, out).await;
            }
            self.may_block = false;
            if let Some(a) = self.retry_args.take() {
                again = Some(a);
            }
            let Some(timeout) = self.would_block.take() else {
                popped = true;
                break;
            };
            let deadline = deadline.get_or_insert_with(|| Deadline::after(timeout));
            loop {
                let mut r = Reply::new(out, self.version);
                let Some(slice) = deadline.slice() else {
                    r.null_array();
                    break 'tries;
                };
                let woken = waiter.wait(slice).await;
                match waiter.cancelled() {
                    Cancel::None => {}
                    Cancel::Timeout => {
                        r.null_array();
                        break 'tries;
                    }
                    Cancel::Error => {
                        r.error(super::blocked::UNBLOCKED);
                        break 'tries;
                    }
                    Cancel::Killed => {
                        self.close = true;
                        break 'tries;
                    }
                }
                // A client gone meanwhile must not take an element.
                if self.client.probe.peer_closed() {
                    self.close = true;
                    break 'tries;
                }
                if woken {
                    continue 'tries;
                }
            }
        }
        *self.client.blocked.lock() = None;
        let unused = waiter.rearm() && !popped;
        shared.blocked.unregister(db, &keys, &waiter, unused);
        if popped {
            // The key may hold more for the next waiter.
            for k in &keys {
                shared.blocked.signal(db, k);
            }
        }
    }
    /// One try of a blocking command (XREAD too), from `execute` (the
    /// caller holds its pass): replies, or, where it may wait
    /// (`may_block`), leaves `would_block` (and XREAD's `retry_args`) set
    /// and writes nothing; inside MULTI it answers the timeout's reply.
    pub(super) async fn try_blocking(
        &mut self,
        shared: &Shared,
        name: &[u8],
        args: &[&[u8]],
        r: &mut Reply<'_>,
    ) {
        let now = unix_now_ms();
        let store = &*shared.store;
        if name == b"XREAD" {
            if !arity(args, 4, None, r) {
                return;
            }
            let a = match super::stream::parse_read(args, false) {
                Ok(a) => a,
                Err(msg) => return r.error(&msg),
            };
            match super::stream::try_read(store, self.db, &a, now, r).await {
                Ok(None) => {}
                Ok(Some(resolved)) => match a.block {
                    Some(t) if self.may_block => {
                        self.would_block = Some(t);
                        // Retries read after the IDs of this first try.
                        let head = args.len() - resolved.len();
                        let mut again: Vec<Vec<u8>> =
                            args[..head].iter().map(|a| a.to_vec()).collect();
                        again.extend(resolved);
                        self.retry_args = Some(again);
                    }
                    _ => r.null_array(),
                },
                Err(e) => r.error(format!("ERR {e}")),
            }
            return;
        }
        if name == b"XREADGROUP" {
            if !arity(args, 7, None, r) {
                return;
            }
            let a = match super::stream::parse_read(args, true) {
                Ok(a) => a,
                Err(msg) => return r.error(&msg),
            };
            match super::stream_readgroup::try_readgroup(shared, self.db, &a, now, r).await {
                Ok(true) => {}
                Ok(false) => match a.block {
                    Some(t) if self.may_block => self.would_block = Some(t),
                    _ => r.null_array(),
                },
                Err(e) => r.error(format!("ERR {e}")),
            }
            return;
        }
        match try_blocking(shared, self.db, name, args, now, r).await {
            Ok(Attempt::Replied) => {}
            Ok(Attempt::Empty(t)) if self.may_block => self.would_block = Some(t),
            Ok(Attempt::Empty(_)) => r.null_array(),
            Err(e) => r.error(format!("ERR {e}")),
        }
    }
}

/// The keys a blocking command waits on (none when its arguments are
/// malformed: its try then answers the error).
pub fn keys_of<'a>(name: &[u8], args: &[&'a [u8]]) -> Vec<&'a [u8]> {
    match name {
        b"BLPOP" | b"BRPOP" | b"BZPOPMIN" | b"BZPOPMAX" if args.len() >= 3 => {
            args[1..args.len() - 1].to_vec()
        }
        b"BZMPOP" => match super::zset_ops::MPop::parse(args, 2) {
            Ok(spec) => spec.keys,
            Err(_) => Vec::new(),
        },
        b"XREAD" => super::stream::parse_read(args, false).map_or(Vec::new(), |a| a.keys),
        b"XREADGROUP" => super::stream::parse_read(args, true).map_or(Vec::new(), |a| a.keys),
        b"BLMOVE" | b"BRPOPLPUSH" if args.len() >= 3 => vec![args[1]],
        b"BLMPOP" => match super::list_move::MPop::parse(args, 2) {
            Ok(spec) => spec.keys,
            Err(_) => Vec::new(),
        },
        _ => Vec::new(),
    }
}

/// What one try of a blocking pop did.
pub enum Attempt {
    /// Its reply is written: popped, or an error.
    Replied,
    /// Every key is empty; the client may wait this long (`None`: no
    /// limit). Nothing is written.
    Empty(Option<std::time::Duration>),
}

/// One try of BLPOP, BRPOP, BLMOVE, BRPOPLPUSH or BLMPOP (the caller
/// holds the exclusive pass for the last three).
pub async fn try_blocking(
    shared: &Shared,
    db: usize,
    name: &[u8],
    args: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> Result<Attempt, Error> {
    let store = &*shared.store;
    let min = match name {
        b"BLPOP" | b"BRPOP" | b"BZPOPMIN" | b"BZPOPMAX" => 3,
        b"BRPOPLPUSH" => 4,
        b"BLMOVE" => 6,
        _ => 5,
    };
    let max = matches!(name, b"BRPOPLPUSH" | b"BLMOVE").then_some(min);
    if !arity(args, min, max, r) {
        return Ok(Attempt::Replied);
    }
    let timeout_at = match name {
        b"BLMPOP" | b"BZMPOP" => 1,
        _ => args.len() - 1,
    };
    // Redis reads the other arguments first (BLMOVE's ends, BLMPOP's
    // numkeys and COUNT), then the timeout.
    let ends = if name == b"BLMOVE" {
        match (End::parse(args[3]), End::parse(args[4])) {
            (Some(f), Some(t)) => Some((f, t)),
            _ => {
                r.error(errors::SYNTAX);
                return Ok(Attempt::Replied);
            }
        }
    } else {
        None
    };
    let spec = if name == b"BLMPOP" {
        match MPop::parse(args, 2) {
            Ok(s) => Some(s),
            Err(msg) => {
                r.error(msg);
                return Ok(Attempt::Replied);
            }
        }
    } else {
        None
    };
    let zspec = if name == b"BZMPOP" {
        match super::zset_ops::MPop::parse(args, 2) {
            Ok(s) => Some(s),
            Err(msg) => {
                r.error(msg);
                return Ok(Attempt::Replied);
            }
        }
    } else {
        None
    };
    let timeout = match timeout_arg(args[timeout_at]) {
        Ok(t) => t,
        Err(msg) => {
            r.error(msg);
            return Ok(Attempt::Replied);
        }
    };
    let popped = match name {
        b"BLPOP" | b"BRPOP" => {
            let end = if name == b"BLPOP" {
                End::Left
            } else {
                End::Right
            };
            let keys = &args[1..args.len() - 1];
            let mut done = false;
            for key in keys {
                let Ok(len) = len_of(store, db, key, now, r).await? else {
                    return Ok(Attempt::Replied);
                };
                if len.unwrap_or(0) == 0 {
                    continue;
                }
                let popped = pop_n(store, db, key, now, end, 1).await?;
                let popped = popped.map(|p| p.and_then(|mut p| p.pop()));
                if let Ok(Some(e)) = popped {
                    shared
                        .notify_removal(notify::LIST, end.pop_event(), db, key, true, now)
                        .await;
                    r.array(2);
                    r.bulk(key);
                    r.bulk(&e);
                    done = true;
                    break;
                }
            }
            done
        }
        b"BLMOVE" | b"BRPOPLPUSH" => {
            let (from, to) = ends.unwrap_or((End::Right, End::Left));
            let Ok(len) = len_of(store, db, args[1], now, r).await? else {
                return Ok(Attempt::Replied);
            };
            if len.unwrap_or(0) == 0 {
                false
            } else {
                lmove(shared, db, args[1], args[2], from, to, now, r).await?;
                true
            }
        }
        b"BZPOPMIN" | b"BZPOPMAX" => {
            let max = name == b"BZPOPMAX";
            let keys = &args[1..args.len() - 1];
            let mut done = false;
            for key in keys {
                let Ok(n) = super::zset::card(store, db, key, now, r).await? else {
                    return Ok(Attempt::Replied);
                };
                if n == 0 {
                    continue;
                }
                if let Ok(popped) = super::zset_ops::pop(shared, db, key, max, 1, now).await? {
                    if let Some((s, m)) = popped.first() {
                        r.array(3);
                        r.bulk(key);
                        r.bulk(m);
                        super::zset_value::reply_score(r, *s);
                        done = true;
                        break;
                    }
                }
            }
            done
        }
        // WRONGTYPE answered counts as a reply.
        b"BZMPOP" => super::zset_ops::try_mpop(shared, db, &zspec.expect("parsed"), now, r)
            .await?
            .unwrap_or(true),
        _ => try_mpop(shared, db, &spec.expect("parsed"), now, r)
            .await?
            .unwrap_or(true),
    };
    Ok(if popped {
        Attempt::Replied
    } else {
        Attempt::Empty(timeout)
    })
}
