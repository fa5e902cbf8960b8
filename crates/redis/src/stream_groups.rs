//! Stream consumer groups (Redis 7.0's `t_stream.c`): XGROUP CREATE,
//! SETID, DESTROY, CREATECONSUMER and DELCONSUMER, XREADGROUP (COUNT,
//! NOACK, BLOCK through `blocking.rs`, history by ID or new entries by
//! `>`: `stream_readgroup.rs`), XACK, XPENDING (summary and extended, IDLE, by consumer), XCLAIM
//! (IDLE, TIME, RETRYCOUNT, FORCE, JUSTID, LASTID) and XAUTOCLAIM. A
//! group lives in its stream's record (`stream_log.rs`: last delivered
//! ID, pending entries list, consumers), so every change of it is one
//! atomic update of the stream, durable as any write.

use nvdepot_cache::resp::RespStore;
use nvdepot_cache::Error;
use nvdepot_resp::{errors, string2ll, Reply};

use super::notify;
use super::session::Shared;
use super::stream::{read, read_loading, reply_entry, update, update_loading};
use super::stream_log::{
    interval_end, interval_start, no_group, no_such_group, parse_id, Entry, Group, Id, IdForm,
    Pending, Stream, INVALID_ID,
};
use super::stream_pages::Need;

/// An entry as a group command answers it: its fields, or `None` when
/// deleted since it was delivered.
pub(crate) type Served = (Id, Option<Entry>);

pub(crate) fn reply_served(r: &mut Reply<'_>, items: &[Served]) {
    r.array(items.len());
    for (id, e) in items {
        match e {
            Some(e) => reply_entry(r, e),
            None => {
                r.array(2);
                r.bulk(&id.text());
                r.null_array();
            }
        }
    }
}

/// What XCLAIM and XAUTOCLAIM claimed: the entries, or with JUSTID their
/// IDs alone.
fn reply_claimed(r: &mut Reply<'_>, served: &[Served], justid: bool) {
    if !justid {
        return reply_served(r, served);
    }
    r.array(served.len());
    for (id, _) in served {
        r.bulk(&id.text());
    }
}

/// Runs `name` if it is a consumer group command (`None` if not;
/// XREADGROUP runs through `blocking.rs`).
pub async fn execute(
    shared: &Shared,
    db: usize,
    name: &[u8],
    args: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> Option<Result<(), Error>> {
    let store = &*shared.store;
    Some(match name {
        b"XGROUP" => xgroup(shared, db, args, now, r).await,
        b"XACK" => xack(store, db, args, now, r).await,
        b"XPENDING" => xpending(store, db, args, now, r).await,
        b"XCLAIM" => xclaim(shared, db, args, now, r).await,
        b"XAUTOCLAIM" => xautoclaim(shared, db, args, now, r).await,
        b"XINFO" => super::stream_info::xinfo(store, db, args, now, r).await,
        _ => return None,
    })
}

/// The arity Redis 7.0 gives each XGROUP subcommand (negative: at least).
fn sub_arity(sub: &[u8]) -> Option<i64> {
    Some(match sub {
        b"CREATE" | b"SETID" => -5,
        b"DESTROY" => 4,
        b"CREATECONSUMER" | b"DELCONSUMER" => 5,
        b"HELP" => 2,
        _ => return None,
    })
}

async fn xgroup(
    shared: &Shared,
    db: usize,
    args: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    let store = &*shared.store;
    if args.len() < 2 {
        r.error(errors::wrong_arity(args[0]));
        return Ok(());
    }
    let sub = args[1].to_ascii_uppercase();
    let lower = String::from_utf8_lossy(args[1]).to_ascii_lowercase();
    let Some(arity) = sub_arity(&sub) else {
        r.error(errors::unknown_subcommand("XGROUP", args[1]));
        return Ok(());
    };
    let n = args.len() as i64;
    if (arity > 0 && n != arity) || (arity < 0 && n < -arity) {
        r.error(format!(
            "ERR wrong number of arguments for 'xgroup|{lower}' command"
        ));
        return Ok(());
    }
    if sub.as_slice() == b"HELP" {
        r.simple_lines(&[
            "XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "CREATE <key> <groupname> <id|$> [option]",
            "    Create a new consumer group. Options are:",
            "    * MKSTREAM",
            "      Create the empty stream if it does not exist.",
            "    * ENTRIESREAD entries_read",
            "      Set the group's entries_read counter (internal use).",
            "CREATECONSUMER <key> <groupname> <consumer>",
            "    Create a new consumer in the specified group.",
            "DELCONSUMER <key> <groupname> <consumer>",
            "    Remove the specified consumer.",
            "DESTROY <key> <groupname>",
            "    Remove the specified group.",
            "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
            "    Set the current group ID and entries_read counter.",
            "HELP",
            "    Prints this help.",
        ]);
        return Ok(());
    }
    let bad_sub = || {
        format!(
            "ERR unknown subcommand or wrong number of arguments for '{lower}'. Try XGROUP HELP."
        )
    };
    let entries_read_of = |a: &[u8]| match string2ll(a) {
        None => Err(errors::NOT_INTEGER),
        Some(v) if v < -1 => Err("ERR value for ENTRIESREAD must be positive or -1"),
        Some(v) => Ok(u64::try_from(v).ok()),
    };
    let (key, group) = (args[2], args[3]);
    // As Redis's xgroupCommand: CREATE's options, the key's type, the key
    // and the group, then the subcommand's own arguments.
    let (mut mkstream, mut entries_read) = (false, None);
    if sub.as_slice() == b"CREATE" {
        let mut i = 5;
        while i < args.len() {
            if args[i].eq_ignore_ascii_case(b"MKSTREAM") {
                mkstream = true;
                i += 1;
            } else if args[i].eq_ignore_ascii_case(b"ENTRIESREAD") && i + 1 < args.len() {
                match entries_read_of(args[i + 1]) {
                    Ok(v) => entries_read = v,
                    Err(msg) => {
                        r.error(msg);
                        return Ok(());
                    }
                }
                i += 2;
            } else {
                r.error(bad_sub());
                return Ok(());
            }
        }
    }
    let Ok(s) = read(store, db, key, now, r).await? else {
        return Ok(());
    };
    if !mkstream {
        let Some(s) = &s else {
            r.error(
                "ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you \
                 may want to use the MKSTREAM option to create an empty stream automatically.",
            );
            return Ok(());
        };
        let needs_group = matches!(
            sub.as_slice(),
            b"SETID" | b"CREATECONSUMER" | b"DELCONSUMER"
        );
        if needs_group && !s.groups.contains_key(group) {
            r.error(no_such_group(group, key));
            return Ok(());
        }
    }
    let fits = match sub.as_slice() {
        b"CREATE" => n <= 8,
        b"SETID" => n == 5 || n == 7,
        _ => true,
    };
    if !fits {
        r.error(bad_sub());
        return Ok(());
    }
    let id_arg = match sub.as_slice() {
        b"CREATE" | b"SETID" if args[4] != b"$" => {
            // CREATE takes a strict ID, SETID also `-` and `+`.
            let form = if sub.as_slice() == b"CREATE" {
                IdForm::Strict
            } else {
                IdForm::Loose
            };
            match parse_id(args[4], 0, form, false) {
                Some((id, _)) => Some(id),
                None => {
                    r.error(INVALID_ID);
                    return Ok(());
                }
            }
        }
        _ => None,
    };
    if sub.as_slice() == b"SETID" && n == 7 {
        if !args[5].eq_ignore_ascii_case(b"ENTRIESREAD") {
            r.error(bad_sub());
            return Ok(());
        }
        match entries_read_of(args[6]) {
            Ok(v) => entries_read = v,
            Err(msg) => {
                r.error(msg);
                return Ok(());
            }
        }
    }
    // Whether Redis would publish this subcommand's keyspace event.
    let mut fired = false;
    let out = update(store, db, key, now, |s| {
        let created = s.is_none();
        let s = s.get_or_insert_with(Stream::default);
        let id = id_arg.unwrap_or(s.last);
        fired = true;
        Ok(match sub.as_slice() {
            b"CREATE" => {
                if s.groups.contains_key(group) {
                    return Err("BUSYGROUP Consumer Group name already exists");
                }
                let g = Group {
                    last: id,
                    entries_read,
                    ..Group::default()
                };
                s.groups.insert(group.to_vec(), g);
                (true, Reply2::Ok)
            }
            b"SETID" => {
                let Some(g) = s.groups.get_mut(group) else {
                    return Err("NOGROUP");
                };
                g.last = id;
                g.entries_read = entries_read;
                (true, Reply2::Ok)
            }
            b"DESTROY" => {
                let gone = s.groups.remove(group).is_some();
                fired = gone;
                (gone || created, Reply2::Int(i64::from(gone)))
            }
            b"CREATECONSUMER" => {
                let Some(g) = s.groups.get_mut(group) else {
                    return Err("NOGROUP");
                };
                let new = !g.consumers.contains_key(args[4]);
                if new {
                    g.consumers.insert(args[4].to_vec(), now);
                }
                fired = new;
                (new, Reply2::Int(i64::from(new)))
            }
            _ => {
                let Some(g) = s.groups.get_mut(group) else {
                    return Err("NOGROUP");
                };
                if g.consumers.remove(args[4]).is_none() {
                    fired = false;
                    return Ok((false, Reply2::Int(0)));
                }
                let before = g.pending.len();
                g.pending.retain(|_, p| p.consumer != args[4]);
                (true, Reply2::Int((before - g.pending.len()) as i64))
            }
        })
    })
    .await?;
    if fired && out.is_ok() {
        let event = match sub.as_slice() {
            b"CREATE" => "xgroup-create",
            b"SETID" => "xgroup-setid",
            b"DESTROY" => "xgroup-destroy",
            b"CREATECONSUMER" => "xgroup-createconsumer",
            _ => "xgroup-delconsumer",
        };
        shared.notify(notify::STREAM, event, db, key);
    }
    match out {
        Ok(Reply2::Ok) => r.ok(),
        Ok(Reply2::Int(n)) => r.integer(n),
        Err("NOGROUP") => r.error(no_such_group(group, key)),
        Err(msg) => r.error(msg),
    }
    Ok(())
}

enum Reply2 {
    Ok,
    Int(i64),
}

async fn xack(
    store: &RespStore,
    db: usize,
    args: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    if args.len() < 4 {
        r.error(errors::wrong_arity(args[0]));
        return Ok(());
    }
    // As Redis: the key's type, then a missing key or group answers 0,
    // then the IDs. (The pending list is in the metadata: no page read.)
    let Ok(s) = read_loading(store, db, args[1], now, Need::Nothing, r).await? else {
        return Ok(());
    };
    if !s.is_some_and(|s| s.groups.contains_key(args[2])) {
        r.integer(0);
        return Ok(());
    }
    let mut ids = Vec::with_capacity(args.len() - 3);
    for a in &args[3..] {
        match parse_id(a, 0, IdForm::Strict, false) {
            Some((id, _)) => ids.push(id),
            None => {
                r.error(INVALID_ID);
                return Ok(());
            }
        }
    }
    let group = args[2];
    let out = update_loading(store, db, args[1], now, Need::Nothing, |s| {
        let Some(g) = s.as_mut().and_then(|s| s.groups.get_mut(group)) else {
            return Ok((false, 0));
        };
        let n = ids
            .iter()
            .filter(|id| g.pending.remove(id).is_some())
            .count();
        Ok((n > 0, n as i64))
    })
    .await?;
    match out {
        Ok(n) => r.integer(n),
        Err(msg) => r.error(msg),
    }
    Ok(())
}

async fn xpending(
    store: &RespStore,
    db: usize,
    args: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    let n = args.len();
    if n < 3 {
        r.error(errors::wrong_arity(args[0]));
        return Ok(());
    }
    if n != 3 && !(6..=9).contains(&n) {
        r.error(errors::SYNTAX);
        return Ok(());
    }
    let mut range = None;
    if n >= 6 {
        let mut at = 3;
        let mut min_idle = 0i64;
        if args[3].eq_ignore_ascii_case(b"IDLE") {
            let Some(v) = string2ll(args[4]) else {
                r.error(errors::NOT_INTEGER);
                return Ok(());
            };
            min_idle = v;
            if n < 8 {
                r.error(errors::SYNTAX);
                return Ok(());
            }
            at += 2;
        }
        let Some(count) = string2ll(args[at + 2]) else {
            r.error(errors::NOT_INTEGER);
            return Ok(());
        };
        let (start, end) = match (interval_start(args[at]), interval_end(args[at + 1])) {
            (Err(msg), _) | (_, Err(msg)) => {
                r.error(msg);
                return Ok(());
            }
            (Ok(start), Ok(end)) => (start, end),
        };
        let consumer = args.get(at + 3).copied();
        range = Some((min_idle, start, end, count.max(0) as u64, consumer));
    }
    // Only the pending list: no page read.
    let Ok(s) = read_loading(store, db, args[1], now, Need::Nothing, r).await? else {
        return Ok(());
    };
    let Some(g) = s.as_ref().and_then(|s| s.groups.get(args[2])) else {
        r.error(no_group(args[1], args[2]));
        return Ok(());
    };
    let Some((min_idle, start, end, mut count, consumer)) = range else {
        r.array(4);
        r.integer(g.pending.len() as i64);
        let (Some((first, _)), Some((last, _))) =
            (g.pending.first_key_value(), g.pending.last_key_value())
        else {
            r.null();
            r.null();
            r.null_array();
            return Ok(());
        };
        r.bulk(&first.text());
        r.bulk(&last.text());
        let mut per: std::collections::BTreeMap<&[u8], u64> = Default::default();
        for p in g.pending.values() {
            *per.entry(p.consumer.as_slice()).or_default() += 1;
        }
        r.array(per.len());
        for (c, k) in per {
            r.array(2);
            r.bulk(c);
            r.bulk(k.to_string().as_bytes());
        }
        return Ok(());
    };
    if consumer.is_some_and(|c| !g.consumers.contains_key(c)) {
        r.array(0);
        return Ok(());
    }
    let mut hits = Vec::new();
    for (id, p) in g.pending.range(start..) {
        if count == 0 || *id > end {
            break;
        }
        if consumer.is_some_and(|c| c != p.consumer.as_slice()) {
            continue;
        }
        let idle = now.saturating_sub(p.delivered);
        if min_idle != 0 && (idle as i64) < min_idle {
            continue;
        }
        count -= 1;
        hits.push((id, p, idle));
    }
    r.array(hits.len());
    for (id, p, idle) in hits {
        r.array(4);
        r.bulk(&id.text());
        r.bulk(&p.consumer);
        r.integer(idle as i64);
        r.integer(p.deliveries as i64);
    }
    Ok(())
}

/// Gives pending entry `id` (`p`) to `consumer` at `delivered`, counting
/// a delivery unless `keep_count` (JUSTID), or setting it to `retry`.
fn claim(p: &mut Pending, consumer: &[u8], delivered: u64, retry: Option<u64>, keep_count: bool) {
    p.consumer = consumer.to_vec();
    p.delivered = delivered;
    match retry {
        Some(n) => p.deliveries = n,
        None if !keep_count => p.deliveries += 1,
        None => {}
    }
}

async fn xclaim(
    shared: &Shared,
    db: usize,
    args: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    let store = &*shared.store;
    if args.len() < 6 {
        r.error(errors::wrong_arity(args[0]));
        return Ok(());
    }
    let (key, group, consumer) = (args[1], args[2], args[3]);
    let Ok(s) = read(store, db, key, now, r).await? else {
        return Ok(());
    };
    if !s.is_some_and(|s| s.groups.contains_key(group)) {
        r.error(no_group(key, group));
        return Ok(());
    }
    let Some(min_idle) = string2ll(args[4]) else {
        r.error("ERR Invalid min-idle-time argument for XCLAIM");
        return Ok(());
    };
    let min_idle = min_idle.max(0) as u64;
    let mut ids = Vec::new();
    let mut j = 5;
    while j < args.len() {
        match parse_id(args[j], 0, IdForm::Strict, false) {
            Some((id, _)) => ids.push(id),
            None => break,
        }
        j += 1;
    }
    let (mut force, mut justid) = (false, false);
    let (mut delivered, mut retry, mut last_id) = (None::<i64>, None, Id::default());
    while j < args.len() {
        let more = j + 1 < args.len();
        let opt = args[j].to_ascii_uppercase();
        let num = |a: &[u8], what: &str| {
            string2ll(a).ok_or_else(|| format!("ERR Invalid {what} option argument for XCLAIM"))
        };
        match opt.as_slice() {
            b"FORCE" => force = true,
            b"JUSTID" => justid = true,
            b"IDLE" | b"TIME" | b"RETRYCOUNT" if more => {
                j += 1;
                let what = String::from_utf8_lossy(&opt).into_owned();
                let v = match num(args[j], &what) {
                    Ok(v) => v,
                    Err(msg) => {
                        r.error(msg);
                        return Ok(());
                    }
                };
                match opt.as_slice() {
                    b"IDLE" => delivered = Some((now as i64).saturating_sub(v)),
                    b"TIME" => delivered = Some(v),
                    _ => retry = Some(v),
                }
            }
            b"LASTID" if more => {
                j += 1;
                match parse_id(args[j], 0, IdForm::Strict, false) {
                    Some((id, _)) => last_id = id,
                    None => {
                        r.error(INVALID_ID);
                        return Ok(());
                    }
                }
            }
            _ => {
                r.error(format!(
                    "ERR Unrecognized XCLAIM option '{}'",
                    String::from_utf8_lossy(args[j])
                ));
                return Ok(());
            }
        }
        j += 1;
    }
    let delivered = match delivered {
        Some(t) if t >= 0 && t as u64 <= now => t as u64,
        _ => now,
    };
    // A negative RETRYCOUNT counts as not given (Redis: -1 means absent).
    let retry = retry.and_then(|n| u64::try_from(n).ok());
    // A consumer made by the claim (Redis's `xgroup-createconsumer`).
    let mut new_consumer = false;
    let out = update(store, db, key, now, |s| {
        new_consumer = false;
        let Some(s) = s.as_mut() else {
            return Err("NOGROUP");
        };
        let Some(g) = s.groups.get(group) else {
            return Err("NOGROUP");
        };
        let mut g = g.clone();
        let mut changed = false;
        if last_id > g.last {
            g.last = last_id;
            changed = true;
        }
        let mut served: Vec<Served> = Vec::new();
        for &id in &ids {
            let Some(e) = s.entry(id).cloned() else {
                changed |= g.pending.remove(&id).is_some();
                continue;
            };
            let fresh = !g.pending.contains_key(&id);
            if fresh && !force {
                continue;
            }
            if !fresh && min_idle > 0 {
                let idle = now.saturating_sub(g.pending[&id].delivered);
                if idle < min_idle {
                    continue;
                }
            }
            new_consumer |= g.consumers.insert(consumer.to_vec(), now).is_none();
            // A pending entry FORCE creates starts at one delivery.
            let p = g.pending.entry(id).or_insert_with(|| Pending {
                deliveries: 1,
                ..Pending::default()
            });
            claim(p, consumer, delivered, retry, justid);
            changed = true;
            served.push((id, (!justid).then_some(e)));
        }
        if changed {
            s.groups.insert(group.to_vec(), g);
        }
        Ok((changed, served))
    })
    .await?;
    if new_consumer && out.is_ok() {
        shared.notify(notify::STREAM, "xgroup-createconsumer", db, key);
    }
    match out {
        Ok(served) => reply_claimed(r, &served, justid),
        Err(_) => r.error(no_group(key, group)),
    }
    Ok(())
}

async fn xautoclaim(
    shared: &Shared,
    db: usize,
    args: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    let store = &*shared.store;
    if args.len() < 6 {
        r.error(errors::wrong_arity(args[0]));
        return Ok(());
    }
    let (key, group, consumer) = (args[1], args[2], args[3]);
    let Some(min_idle) = string2ll(args[4]) else {
        r.error("ERR Invalid min-idle-time argument for XAUTOCLAIM");
        return Ok(());
    };
    let min_idle = min_idle.max(0) as u64;
    let start = match interval_start(args[5]) {
        Ok(start) => start,
        Err(msg) => {
            r.error(msg);
            return Ok(());
        }
    };
    let (mut count, mut justid) = (100u64, false);
    let mut j = 6;
    while j < args.len() {
        if args[j].eq_ignore_ascii_case(b"COUNT") && j + 1 < args.len() {
            let max = (i64::MAX / 16) as u64;
            match string2ll(args[j + 1]) {
                Some(n) if n >= 1 && n as u64 <= max => count = n as u64,
                _ => {
                    r.error("ERR COUNT must be > 0");
                    return Ok(());
                }
            }
            j += 1;
        } else if args[j].eq_ignore_ascii_case(b"JUSTID") {
            justid = true;
        } else {
            r.error(errors::SYNTAX);
            return Ok(());
        }
        j += 1;
    }
    // A consumer made by the claim (Redis's `xgroup-createconsumer`).
    let mut new_consumer = false;
    let out = update(store, db, key, now, |s| {
        new_consumer = false;
        let Some(s) = s.as_mut() else {
            return Err("NOGROUP");
        };
        let Some(g) = s.groups.get(group) else {
            return Err("NOGROUP");
        };
        let mut g = g.clone();
        let candidates: Vec<Id> = g.pending.range(start..).map(|(id, _)| *id).collect();
        let (mut attempts, mut left) = (count.saturating_mul(10), count);
        let (mut served, mut deleted) = (Vec::new(), Vec::new());
        let mut i = 0;
        while attempts > 0 && left > 0 && i < candidates.len() {
            attempts -= 1;
            let id = candidates[i];
            i += 1;
            let Some(e) = s.entry(id).cloned() else {
                g.pending.remove(&id);
                deleted.push(id);
                left -= 1;
                continue;
            };
            if min_idle > 0 && now.saturating_sub(g.pending[&id].delivered) < min_idle {
                continue;
            }
            new_consumer |= g.consumers.insert(consumer.to_vec(), now).is_none();
            let p = g.pending.get_mut(&id).expect("a candidate is pending");
            claim(p, consumer, now, None, justid);
            served.push((id, (!justid).then_some(e)));
            left -= 1;
        }
        let cursor = candidates.get(i).copied().unwrap_or_default();
        let changed = !served.is_empty() || !deleted.is_empty();
        if changed {
            s.groups.insert(group.to_vec(), g);
        }
        Ok((changed, (cursor, served, deleted)))
    })
    .await?;
    if new_consumer && out.is_ok() {
        shared.notify(notify::STREAM, "xgroup-createconsumer", db, key);
    }
    // A missing key or group: (WRONGTYPE, or) NOGROUP.
    let (cursor, served, deleted) = match out {
        Ok(x) => x,
        Err(msg) if msg == errors::WRONGTYPE => {
            r.error(msg);
            return Ok(());
        }
        Err(_) => {
            r.error(no_group(key, group));
            return Ok(());
        }
    };
    r.array(3);
    r.bulk(&cursor.text());
    reply_claimed(r, &served, justid);
    r.array(deleted.len());
    for id in deleted {
        r.bulk(&id.text());
    }
    Ok(())
}
