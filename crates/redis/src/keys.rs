//! String and key commands of the Redis-protocol face, each one storage
//! call: a read, a blind write, or one atomic update of its key
//! (`RespStore::update`: one device read, the decision, at most one write,
//! under the key's lock). Commands naming several keys (MGET, MSET, DEL,
//! EXISTS) run their keys' calls together (reads in flight at once, writes
//! sharing one group commit): each key is atomic, the command as a whole
//! is not (Redis runs it in one step).
//!
//! `execute` is also the dispatch of every data command: what it does not
//! run itself it hands to the type files in turn (the connection and
//! server commands are dispatched by `face.rs`). `needs_exclusive` says
//! which data commands take the gate's exclusive pass.

use nvdepot_cache::resp::{Change, Kind, Updated, Value};
use nvdepot_cache::Error;
use nvdepot_resp::{errors, string2ll, Reply};

use super::args::{arity, int_arg};
use super::glob;
use super::join::{join_all, last_of_each};
use super::notify;
use super::session::Shared;

fn storage_error(r: &mut Reply<'_>, e: &Error) {
    r.error(format!("ERR {e}"));
}

/// Whether a type's `execute` ran the command (`Some`), answering a
/// storage error it met.
fn answered(result: Option<Result<(), Error>>, r: &mut Reply<'_>) -> bool {
    match result {
        None => false,
        Some(done) => {
            if let Err(e) = done {
                storage_error(r, &e);
            }
            true
        }
    }
}

/// Runs `name` if it is a string or key command; false if it is not one.
pub async fn execute(
    shared: &Shared,
    db: usize,
    name: &[u8],
    args: &[&[u8]],
    r: &mut Reply<'_>,
) -> bool {
    let store = &*shared.store;
    let now = super::clock::command_now_ms();
    let cluster = shared.cluster.is_some();
    // The string and key commands of `own` first, before the families'
    // chain (each family's `execute` checks the name and declines): the
    // most common commands skip it, and no name is answered by both.
    if own(shared, db, name, args, now, r).await {
        return true;
    }
    if (name.starts_with(b"BIT") || name == b"SETBIT" || name == b"GETBIT")
        && answered(
            super::bitmap::execute(shared, db, name, args, now, r).await,
            r,
        )
    {
        return true;
    }
    if name == b"MIGRATE" {
        let done = super::migrate_keys::migrate(shared, db, args, now, r).await;
        return answered(Some(done), r);
    }
    if matches!(name, b"DUMP" | b"RESTORE" | b"RESTORE-ASKING") {
        return answered(
            super::restore::execute(shared, db, name, args, now, r).await,
            r,
        );
    }
    if name == b"LCS" {
        let result = super::lcs::lcs(store, db, args, now, r).await;
        return answered(Some(result), r);
    }
    if name == b"SORT" || name == b"SORT_RO" {
        let result = Box::pin(super::sort::sort(shared, db, args, now, r)).await;
        return answered(Some(result), r);
    }
    if name.starts_with(b"GEO")
        && answered(super::geo::execute(shared, db, name, args, now, r).await, r)
    {
        return true;
    }
    if name.starts_with(b"PF")
        && answered(
            super::hyperloglog::execute(shared, db, name, args, now, r).await,
            r,
        )
    {
        return true;
    }
    if name.first() == Some(&b'X') {
        let done = match super::stream::execute(shared, db, name, args, now, r).await {
            Some(done) => Some(done),
            None => super::stream_groups::execute(shared, db, name, args, now, r).await,
        };
        if answered(done, r) {
            return true;
        }
    }
    if name.first() == Some(&b'Z') {
        let done = match super::zset::execute(shared, db, name, args, now, r).await {
            Some(done) => Some(done),
            None => super::zset_ops::execute(shared, db, name, args, now, r).await,
        };
        if answered(done, r) {
            return true;
        }
    }
    if answered(
        super::list::execute(shared, db, name, args, now, r).await,
        r,
    ) || answered(
        super::list_read::execute(store, db, name, args, now, r).await,
        r,
    ) || answered(
        super::list_edit::execute(shared, db, name, args, now, r).await,
        r,
    ) || answered(
        super::list_move::execute(shared, db, name, args, now, r).await,
        r,
    ) || answered(super::set::execute(shared, db, name, args, now, r).await, r)
        || answered(
            super::hash::execute(shared, db, name, args, now, r).await,
            r,
        )
        || answered(
            super::strings::execute(shared, db, name, args, now, cluster, r).await,
            r,
        )
    {
        return true;
    }
    false
}

/// The string and key commands this file answers itself; `false` if
/// `name` is not one.
async fn own(
    shared: &Shared,
    db: usize,
    name: &[u8],
    args: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> bool {
    let store = &*shared.store;
    let result = match name {
        b"GET" => {
            if !arity(args, 2, Some(2), r) {
                return true;
            }
            super::strings::get_string(shared, db, args[1], now)
                .await
                .map(|v| match v {
                    Err(e) => r.error(e),
                    Ok(Some(v)) => r.bulk(v.data()),
                    Ok(None) => r.null(),
                })
        }
        b"SET" => set(shared, db, args, now, r).await,
        // GETSET is SET … GET (the old value back, the expiry dropped).
        b"GETSET" => {
            if !arity(args, 3, Some(3), r) {
                return true;
            }
            set(shared, db, &[args[0], args[1], args[2], b"GET"], now, r).await
        }
        b"SETNX" => {
            if !arity(args, 3, Some(3), r) {
                return true;
            }
            let value = args[2];
            store
                .update(db, args[1], now, |cur| match cur {
                    Some(_) => (Change::Keep, 0),
                    None => (put(value, 0), 1),
                })
                .await
                .map(|(n, _)| {
                    if n == 1 {
                        shared.notify(notify::STRING, "set", db, args[1]);
                    }
                    r.integer(n)
                })
        }
        b"SETEX" | b"PSETEX" => {
            if !arity(args, 4, Some(4), r) {
                return true;
            }
            let Some(t) = int_arg(args[2]) else {
                r.error(errors::NOT_INTEGER);
                return true;
            };
            let ms = if name == b"SETEX" {
                t.checked_mul(1000)
            } else {
                Some(t)
            };
            match ms
                .filter(|&ms| ms > 0)
                .and_then(|ms| (now as i64).checked_add(ms))
            {
                None => {
                    r.error(format!(
                        "ERR invalid expire time in '{}' command",
                        String::from_utf8_lossy(args[0]).to_lowercase()
                    ));
                    return true;
                }
                Some(at) => store.set(db, args[1], args[3], at as u64).await.map(|()| {
                    shared.notify(notify::STRING, "set", db, args[1]);
                    shared.notify(notify::GENERIC, "expire", db, args[1]);
                    r.ok()
                }),
            }
        }
        b"GETDEL" => {
            if !arity(args, 2, Some(2), r) {
                return true;
            }
            store
                .update(db, args[1], now, |cur| match cur {
                    Some(v) if v.kind() != Kind::String => (Change::Keep, Err(())),
                    Some(v) => (Change::Delete, Ok(Some(v.data().to_vec()))),
                    None => {
                        shared.notify(notify::KEY_MISS, "keymiss", db, args[1]);
                        (Change::Keep, Ok(None))
                    }
                })
                .await
                .map(|(v, _)| match v {
                    Ok(v) => {
                        if v.is_some() {
                            shared.notify(notify::GENERIC, "del", db, args[1]);
                        }
                        bulk_or_null(r, v.as_deref())
                    }
                    Err(()) => r.error(errors::WRONGTYPE),
                })
        }
        b"GETEX" => getex(shared, db, args, now, r).await,
        b"MGET" => {
            if !arity(args, 2, None, r) {
                return true;
            }
            let reads = args[1..].iter().map(|k| store.get(db, k, now));
            let values: Result<Vec<_>, _> = join_all(reads).await.into_iter().collect();
            values.map(|values| {
                r.array(values.len());
                for v in values {
                    let string = v.as_ref().filter(|v| v.kind() == Kind::String);
                    bulk_or_null(r, string.map(Value::data));
                }
            })
        }
        b"MSET" => {
            if args.len() < 3 || args.len().is_multiple_of(2) {
                r.error(errors::wrong_arity(args[0]));
                return true;
            }
            super::strings::set_pairs(shared, db, &args[1..])
                .await
                .map(|_| r.ok())
        }
        b"APPEND" => {
            if !arity(args, 3, Some(3), r) {
                return true;
            }
            let tail = args[2];
            store
                .update(db, args[1], now, |cur| {
                    let (mut data, at) = match cur {
                        Some(v) if v.kind() != Kind::String => {
                            return (Change::Keep, Err(errors::WRONGTYPE))
                        }
                        Some(v) => (v.data().to_vec(), v.expire_at_ms()),
                        None => (Vec::new(), 0),
                    };
                    data.extend_from_slice(tail);
                    let len = data.len() as i64;
                    (put(&data, at), Ok(len))
                })
                .await
                .map(|(n, _)| match n {
                    Ok(n) => {
                        shared.notify(notify::STRING, "append", db, args[1]);
                        r.integer(n)
                    }
                    Err(e) => r.error(e),
                })
        }
        b"STRLEN" => {
            if !arity(args, 2, Some(2), r) {
                return true;
            }
            store.get(db, args[1], now).await.map(|v| match v {
                Some(v) if v.kind() != Kind::String => r.error(errors::WRONGTYPE),
                v => r.integer(v.map_or(0, |v| v.data().len() as i64)),
            })
        }
        b"INCR" | b"DECR" | b"INCRBY" | b"DECRBY" => {
            let by = matches!(name, b"INCRBY" | b"DECRBY");
            if !arity(
                args,
                if by { 3 } else { 2 },
                Some(if by { 3 } else { 2 }),
                r,
            ) {
                return true;
            }
            let delta = if by {
                match int_arg(args[2]) {
                    Some(d) => d,
                    None => {
                        r.error(errors::NOT_INTEGER);
                        return true;
                    }
                }
            } else {
                1
            };
            let delta = if name.starts_with(b"DECR") {
                match delta.checked_neg() {
                    Some(d) => d,
                    None => {
                        // Redis's own wording for DECRBY of i64::MIN.
                        r.error("ERR decrement would overflow");
                        return true;
                    }
                }
            } else {
                delta
            };
            store
                .update(db, args[1], now, |cur| {
                    let (old, at) = match cur {
                        Some(v) if v.kind() != Kind::String => {
                            return (Change::Keep, Err(errors::WRONGTYPE))
                        }
                        Some(v) => match string2ll(v.data()) {
                            Some(n) => (n, v.expire_at_ms()),
                            None => return (Change::Keep, Err(errors::NOT_INTEGER)),
                        },
                        None => (0, 0),
                    };
                    match old.checked_add(delta) {
                        Some(n) => (put(n.to_string().as_bytes(), at), Ok(n)),
                        None => (Change::Keep, Err(errors::OVERFLOW)),
                    }
                })
                .await
                .map(|(out, _)| match out {
                    Ok(n) => {
                        shared.notify(notify::STRING, "incrby", db, args[1]);
                        r.integer(n)
                    }
                    Err(msg) => r.error(msg),
                })
        }
        // SUBSTR: GETRANGE's old name, still served by Redis 7.
        b"GETRANGE" | b"SUBSTR" => {
            if !arity(args, 4, Some(4), r) {
                return true;
            }
            let (Some(start), Some(end)) = (int_arg(args[2]), int_arg(args[3])) else {
                r.error(errors::NOT_INTEGER);
                return true;
            };
            store.get(db, args[1], now).await.map(|v| match v {
                Some(v) if v.kind() != Kind::String => r.error(errors::WRONGTYPE),
                v => {
                    let data = v.as_ref().map_or(&[][..], Value::data);
                    r.bulk(range(data, start, end));
                }
            })
        }
        b"DEL" | b"UNLINK" => {
            if !arity(args, 2, None, r) {
                return true;
            }
            let keys = &args[1..];
            let last = last_of_each(keys);
            let deletes = last.iter().map(|&i| store.delete(db, keys[i], now));
            let done: Result<Vec<bool>, _> = join_all(deletes).await.into_iter().collect();
            // An expired key is removed too, but does not count.
            done.map(|d| {
                if shared.notifies(notify::GENERIC) {
                    // Events in the order Redis deletes: each key at its
                    // first mention.
                    let mut live: std::collections::HashMap<&[u8], bool> =
                        last.iter().zip(&d).map(|(&i, &l)| (keys[i], l)).collect();
                    for key in keys {
                        if live.remove(key) == Some(true) {
                            shared.notify(notify::GENERIC, "del", db, key);
                        }
                    }
                }
                r.integer(d.iter().filter(|&&live| live).count() as i64)
            })
        }
        // EXISTS reads without marking the access (Redis's NOTOUCH);
        // TOUCH is a read that only counts (the read marks the access).
        b"EXISTS" | b"TOUCH" => {
            if !arity(args, 2, None, r) {
                return true;
            }
            let touch = name == b"TOUCH";
            let reads = args[1..].iter().map(|k| async move {
                if touch {
                    store.get(db, k, now).await.map(|v| v.is_some())
                } else {
                    store.head(db, k, now).await.map(|v| v.is_some())
                }
            });
            let found: Result<Vec<bool>, _> = join_all(reads).await.into_iter().collect();
            // A key named twice counts twice, as in Redis.
            found.map(|f| r.integer(f.iter().filter(|&&live| live).count() as i64))
        }
        b"TYPE" => {
            if !arity(args, 2, Some(2), r) {
                return true;
            }
            store
                .head(db, args[1], now)
                .await
                .map(|v| r.simple(v.map_or("none", |(kind, _)| kind.name())))
        }
        b"EXPIRE" | b"PEXPIRE" | b"EXPIREAT" | b"PEXPIREAT" => {
            expire(shared, db, name, args, now, r).await
        }
        b"TTL" | b"PTTL" | b"EXPIRETIME" | b"PEXPIRETIME" => {
            if !arity(args, 2, Some(2), r) {
                return true;
            }
            store.head(db, args[1], now).await.map(|v| {
                // Whether the key lives is decided at `now` (a script's
                // fixed time); what is left of it by the clock, at least 0,
                // as Redis 7.0's `ttlGenericCommand`.
                let clock = super::clock::clock_ms(now);
                let left = |at: u64| at.saturating_sub(clock);
                let n = match v.map(|(_, at)| at) {
                    None => -2,
                    Some(0) => -1,
                    Some(at) => match name {
                        b"TTL" => ((left(at) + 500) / 1000) as i64,
                        b"PTTL" => left(at) as i64,
                        b"EXPIRETIME" => (at.div_ceil(1000)) as i64,
                        _ => at as i64,
                    },
                };
                r.integer(n);
            })
        }
        b"PERSIST" => {
            if !arity(args, 2, Some(2), r) {
                return true;
            }
            store
                .update(db, args[1], now, |cur| match cur {
                    Some(v) if v.expire_at_ms() != 0 => (v.with_expiry(0), 1),
                    _ => (Change::Keep, 0),
                })
                .await
                .map(|(n, _)| {
                    if n == 1 {
                        shared.notify(notify::GENERIC, "persist", db, args[1]);
                    }
                    r.integer(n)
                })
        }
        b"KEYS" => {
            if !arity(args, 2, Some(2), r) {
                return true;
            }
            store.keys(db, now).map(|keys| {
                let hits: Vec<_> = keys.iter().filter(|k| glob::matches(args[1], k)).collect();
                r.array(hits.len());
                for k in hits {
                    r.bulk(k);
                }
            })
        }
        b"SCAN" => super::scan::scan(store, db, args, now, r),
        b"RANDOMKEY" => {
            if !arity(args, 1, Some(1), r) {
                return true;
            }
            store
                .keys(db, now)
                .map(|keys| bulk_or_null(r, keys.first().map(Vec::as_slice)))
        }
        _ => return false,
    };
    if let Err(e) = result {
        storage_error(r, &e);
    }
    true
}

/// A string put.
fn put(data: &[u8], expire_at_ms: u64) -> Change {
    Change::Put {
        kind: Kind::String,
        data: data.to_vec(),
        expire_at_ms,
    }
}

fn bulk_or_null(r: &mut Reply<'_>, v: Option<&[u8]>) {
    match v {
        Some(v) => r.bulk(v),
        None => r.null(),
    }
}

/// Redis's GETRANGE index arithmetic.
fn range(data: &[u8], start: i64, end: i64) -> &[u8] {
    let len = data.len() as i64;
    if len == 0 || (start < 0 && end < 0 && start > end) {
        return &[];
    }
    let fix = |i: i64| if i < 0 { (len + i).max(0) } else { i };
    let (start, end) = (fix(start), fix(end).min(len - 1));
    if start > end || start >= len {
        return &[];
    }
    &data[start as usize..=end as usize]
}

/// The expiry options shared by SET and GETEX.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Expiry {
    Unset,
    At(u64),
    Keep,
    Persist,
}

/// SET's and GETEX's expiry options as Redis 7.0 reads them
/// (`parseExtendedStringArgumentsOrReply`): one kind among EX, PX, EXAT,
/// PXAT, KEEPTTL (SET) and PERSIST (GETEX), which may repeat (the last
/// value counts); the value is read only after every option parsed.
#[derive(Default)]
struct ExpiryOptions<'a> {
    kind: Option<&'static [u8]>,
    value: Option<&'a [u8]>,
}

impl<'a> ExpiryOptions<'a> {
    /// Takes option `opt` (upper case; `next` the argument after it) if it
    /// is an expiry option allowed here: KEEPTTL for SET, PERSIST for
    /// GETEX (`getex`), and no other kind given before. Returns how many
    /// arguments it took (the option, and its value if it has one).
    fn take(&mut self, opt: &[u8], next: Option<&'a [u8]>, getex: bool) -> Option<usize> {
        let (kind, takes_value): (&'static [u8], bool) = match opt {
            b"KEEPTTL" if !getex => (b"KEEPTTL", false),
            b"PERSIST" if getex => (b"PERSIST", false),
            b"EX" => (b"EX", true),
            b"PX" => (b"PX", true),
            b"EXAT" => (b"EXAT", true),
            b"PXAT" => (b"PXAT", true),
            _ => return None,
        };
        if self.kind.is_some_and(|k| k != kind) || (takes_value && next.is_none()) {
            return None;
        }
        self.kind = Some(kind);
        if takes_value {
            self.value = next;
            Some(2)
        } else {
            Some(1)
        }
    }

    /// The expiry the options give, or `command`'s error for its value.
    fn expiry(&self, command: &str, now: u64) -> Result<Expiry, String> {
        Ok(match (self.kind, self.value) {
            (None, _) => Expiry::Unset,
            (Some(b"KEEPTTL"), _) => Expiry::Keep,
            (Some(b"PERSIST"), _) => Expiry::Persist,
            (Some(kind), Some(v)) => Expiry::At(expiry_at(command, kind, v, now)?),
            (Some(_), None) => unreachable!("an expiry option takes its value"),
        })
    }
}

/// Parses the value of `command`'s EX/PX/EXAT/PXAT option into an
/// absolute time (ms), or the error to answer.
fn expiry_at(command: &str, kind: &[u8], arg: &[u8], now: u64) -> Result<u64, String> {
    let t = int_arg(arg).ok_or_else(|| errors::NOT_INTEGER.to_string())?;
    let invalid = || format!("ERR invalid expire time in '{command}' command");
    if t <= 0 {
        return Err(invalid());
    }
    let ms = match kind {
        b"EX" | b"EXAT" => t.checked_mul(1000).ok_or_else(invalid)?,
        _ => t,
    };
    let at = match kind {
        b"EX" | b"PX" => (now as i64).checked_add(ms).ok_or_else(invalid)?,
        _ => ms,
    };
    Ok(at as u64)
}

async fn set(
    shared: &Shared,
    db: usize,
    args: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    if !arity(args, 3, None, r) {
        return Ok(());
    }
    let (mut nx, mut xx, mut get) = (false, false, false);
    let mut opts = ExpiryOptions::default();
    let mut i = 3;
    while i < args.len() {
        let opt = args[i].to_ascii_uppercase();
        match opt.as_slice() {
            b"NX" if !xx => nx = true,
            b"XX" if !nx => xx = true,
            b"GET" => get = true,
            _ => match opts.take(&opt, args.get(i + 1).copied(), false) {
                Some(taken) => {
                    i += taken;
                    continue;
                }
                None => {
                    r.error(errors::SYNTAX);
                    return Ok(());
                }
            },
        }
        i += 1;
    }
    let expiry = match opts.expiry("set", now) {
        Ok(e) => e,
        Err(msg) => {
            r.error(&msg);
            return Ok(());
        }
    };
    let store = &*shared.store;
    let value = args[2];
    // Redis's events of a SET that stored: `set`, then `expire` if it
    // was given one.
    let stored_events = || {
        shared.notify(notify::STRING, "set", db, args[1]);
        if matches!(expiry, Expiry::At(_)) {
            shared.notify(notify::GENERIC, "expire", db, args[1]);
        }
    };
    if !nx && !xx && !get && expiry != Expiry::Keep {
        // The common case: one blind write, no read.
        let at = match expiry {
            Expiry::At(at) => at,
            _ => 0,
        };
        store.set(db, args[1], value, at).await?;
        stored_events();
        r.ok();
        return Ok(());
    }
    let ((stored, old), _) = store
        .update(db, args[1], now, |cur| {
            if get && cur.is_some_and(|v| v.kind() != Kind::String) {
                return (Change::Keep, (false, Err(())));
            }
            // GET looks the key up as a read (Redis's getGenericCommand):
            // a miss is a `keymiss`, before the write's own events.
            if get && cur.is_none() {
                shared.notify(notify::KEY_MISS, "keymiss", db, args[1]);
            }
            let old = Ok(cur.map(|v| v.data().to_vec()));
            if (nx && cur.is_some()) || (xx && cur.is_none()) {
                return (Change::Keep, (false, old));
            }
            let at = match expiry {
                Expiry::At(at) => at,
                Expiry::Keep => cur.map_or(0, Value::expire_at_ms),
                _ => 0,
            };
            (put(value, at), (true, old))
        })
        .await?;
    let Ok(old) = old else {
        r.error(errors::WRONGTYPE);
        return Ok(());
    };
    if stored {
        stored_events();
    }
    if get {
        bulk_or_null(r, old.as_deref());
    } else if stored {
        r.ok();
    } else {
        r.null();
    }
    Ok(())
}

async fn getex(
    shared: &Shared,
    db: usize,
    args: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    if !arity(args, 2, None, r) {
        return Ok(());
    }
    let store = &*shared.store;
    let mut opts = ExpiryOptions::default();
    let mut i = 2;
    while i < args.len() {
        let opt = args[i].to_ascii_uppercase();
        let Some(taken) = opts.take(&opt, args.get(i + 1).copied(), true) else {
            r.error(errors::SYNTAX);
            return Ok(());
        };
        i += taken;
    }
    let expiry = match opts.expiry("getex", now) {
        Ok(e) => e,
        Err(msg) => {
            // Redis looks the key up before it reads the time: a missing
            // key answers nil whatever the time says.
            match store.get(db, args[1], now).await? {
                None => r.null(),
                Some(v) if v.kind() != Kind::String => r.error(errors::WRONGTYPE),
                Some(_) => r.error(&msg),
            }
            return Ok(());
        }
    };
    if expiry == Expiry::Unset {
        match store.get(db, args[1], now).await? {
            Some(v) if v.kind() != Kind::String => r.error(errors::WRONGTYPE),
            v => bulk_or_null(r, v.as_ref().map(Value::data)),
        }
        return Ok(());
    }
    let (old, _) = store
        .update(db, args[1], now, |cur| match cur {
            None => {
                shared.notify(notify::KEY_MISS, "keymiss", db, args[1]);
                (Change::Keep, Ok((None, None)))
            }
            Some(v) if v.kind() != Kind::String => (Change::Keep, Err(())),
            Some(v) => {
                let old = Some(v.data().to_vec());
                match expiry {
                    // A time already past deletes the key at once, as Redis's
                    // checkAlreadyExpired (else DBSIZE counts it until read).
                    Expiry::At(at) if at <= now => (Change::Delete, Ok((old, Some("del")))),
                    Expiry::At(at) => (v.with_expiry(at), Ok((old, Some("expire")))),
                    // PERSIST: an event only if there was an expiry to drop.
                    _ => (
                        v.with_expiry(0),
                        Ok((old, (v.expire_at_ms() != 0).then_some("persist"))),
                    ),
                }
            }
        })
        .await?;
    match old {
        Ok((old, event)) => {
            if let Some(event) = event {
                shared.notify(notify::GENERIC, event, db, args[1]);
            }
            bulk_or_null(r, old.as_deref())
        }
        Err(()) => r.error(errors::WRONGTYPE),
    }
    Ok(())
}

async fn expire(
    shared: &Shared,
    db: usize,
    name: &[u8],
    args: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    if !arity(args, 3, None, r) {
        return Ok(());
    }
    // Redis reads the options before the time.
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for opt in &args[3..] {
        match opt.to_ascii_uppercase().as_slice() {
            b"NX" => nx = true,
            b"XX" => xx = true,
            b"GT" => gt = true,
            b"LT" => lt = true,
            _ => {
                r.error(errors::quoting(
                    "ERR Unsupported option ",
                    opt,
                    usize::MAX,
                    "",
                ));
                return Ok(());
            }
        }
    }
    if nx && (xx || gt || lt) {
        r.error("ERR NX and XX, GT or LT options at the same time are not compatible");
        return Ok(());
    }
    if gt && lt {
        r.error("ERR GT and LT options at the same time are not compatible");
        return Ok(());
    }
    let Some(t) = int_arg(args[2]) else {
        r.error(errors::NOT_INTEGER);
        return Ok(());
    };
    let ms = if name == b"EXPIRE" || name == b"EXPIREAT" {
        t.checked_mul(1000)
    } else {
        Some(t)
    };
    let at = ms.and_then(|ms| {
        if name.ends_with(b"AT") {
            Some(ms)
        } else {
            (now as i64).checked_add(ms)
        }
    });
    let Some(at) = at else {
        r.error(format!(
            "ERR invalid expire time in '{}' command",
            String::from_utf8_lossy(args[0]).to_lowercase()
        ));
        return Ok(());
    };
    let (n, done) = shared
        .store
        .update(db, args[1], now, |cur| {
            let Some(v) = cur else {
                return (Change::Keep, 0);
            };
            let current = v.expire_at_ms();
            let has = current != 0;
            let new = at.max(0) as u64;
            let refused = (nx && has)
                || (xx && !has)
                || (gt && (!has || new <= current))
                || (lt && has && new >= current);
            if refused {
                return (Change::Keep, 0);
            }
            if at <= now as i64 {
                // Redis deletes a key given a time in the past at once.
                return (Change::Delete, 1);
            }
            (v.with_expiry(new), 1)
        })
        .await?;
    if n == 1 {
        let event = if done == Updated::Deleted {
            "del"
        } else {
            "expire"
        };
        shared.notify(notify::GENERIC, event, db, args[1]);
    }
    r.integer(n);
    Ok(())
}

/// FLUSHDB (database `db`) or FLUSHALL: every database asked for is
/// flushed; the last error, if any, is the reply.
pub(super) fn flush(shared: &Shared, db: usize, all: bool, r: &mut Reply<'_>) {
    let dbs = if all {
        0..shared.store.databases()
    } else {
        db..db + 1
    };
    let mut failed = None;
    for db in dbs {
        if let Err(e) = shared.store.flushdb(db) {
            failed = Some(e);
        }
    }
    // Tracked keys are global, as in Redis: all are invalid now.
    shared.tracking.flushed();
    match failed {
        Some(e) => r.error(format!("ERR {e}")),
        None => r.ok(),
    }
}

/// Commands that run holding the exclusive pass: they see and change
/// several keys as one step.
pub(super) fn needs_exclusive(name: &[u8]) -> bool {
    super::strings::needs_exclusive(name)
        || super::restore::needs_exclusive(name)
        || matches!(
            name,
            b"EVAL" | b"EVALSHA" | b"EVAL_RO" | b"EVALSHA_RO" | b"FCALL" | b"FCALL_RO"
        )
        || super::set::needs_exclusive(name)
        || super::list::needs_exclusive(name)
        || super::zset_ops::needs_exclusive(name)
        || super::bitmap::needs_exclusive(name)
        || super::hyperloglog::needs_exclusive(name)
        || super::geo::needs_exclusive(name)
        || name == b"LCS"
        || name == b"SWAPDB"
        // As Redis's blocks the server until the target answered: no
        // command sees a key between its copy and its deletion.
        || name == b"MIGRATE"
        // Its reads of the key and of its patterns' keys see one state.
        || name == b"SORT"
        || name == b"SORT_RO"
}

#[cfg(test)]
mod tests {
    use super::range;

    #[test]
    fn getrange_as_redis() {
        let s = b"This is a string";
        assert_eq!(range(s, 0, 3), b"This");
        assert_eq!(range(s, -3, -1), b"ing");
        assert_eq!(range(s, 0, -1), s);
        assert_eq!(range(s, 10, 100), b"string");
        assert_eq!(range(s, 5, 2), b"");
        assert_eq!(range(b"", 0, -1), b"");
    }
}
