//! XREADGROUP (Redis 7.0's `xreadCommand` with GROUP): a consumer's own
//! pending history after an ID, or the entries its group has not
//! delivered yet (`>`), which become pending for it unless NOACK. Blocks
//! through `blocking.rs` while nothing is new. Groups are
//! `stream_groups.rs`'s.

use nvdepot_cache::Error;
use nvdepot_resp::Reply;

use super::notify;
use super::session::Shared;
use super::stream::{read_loading, update_loading, ReadArgs};
use super::stream_groups::{reply_served, Served};
use super::stream_log::{no_group, parse_id, Group, Id, IdForm, Pending, Stream, INVALID_ID};
use super::stream_pages::Need;

/// One try of XREADGROUP: `Ok(true)` once its reply is written (entries
/// or an error), `Ok(false)` when no stream had anything for it (nothing
/// written: the caller blocks or answers nil).
pub async fn try_readgroup(
    shared: &Shared,
    db: usize,
    a: &ReadArgs<'_>,
    now: u64,
    r: &mut Reply<'_>,
) -> Result<bool, Error> {
    let store = &*shared.store;
    // Every key and its group first, then every ID, in argument order.
    let mut after = Vec::with_capacity(a.keys.len());
    for (k, id) in a.keys.iter().zip(&a.ids) {
        // The type and the group: the metadata is enough.
        let Ok(s) = read_loading(store, db, k, now, Need::Nothing, r).await? else {
            return Ok(true);
        };
        if !s.is_some_and(|s| s.groups.contains_key(a.group)) {
            r.error(format!(
                "{} in XREADGROUP with GROUP option",
                no_group(k, a.group)
            ));
            return Ok(true);
        }
        after.push(match *id {
            b"$" => {
                r.error(
                    "ERR The $ ID is meaningless in the context of XREADGROUP: you want to read \
                     the history of this consumer by specifying a proper ID, or use the > ID to \
                     get new messages. The $ ID would just return an empty result set.",
                );
                return Ok(true);
            }
            b">" => None,
            id => match parse_id(id, 0, IdForm::Strict, false) {
                Some((id, _)) => Some(id),
                None => {
                    r.error(INVALID_ID);
                    return Ok(true);
                }
            },
        });
    }
    let limit = if a.count == 0 { usize::MAX } else { a.count };
    let mut found: Vec<(&[u8], Vec<Served>)> = Vec::new();
    for (k, after) in a.keys.iter().zip(after) {
        let mut new_consumer = false;
        // New entries (`>`) need only the stream's ends and what follows
        // the group's last ID; a history read looks entries up anywhere.
        let need = match after {
            Some(_) => Need::All,
            None => Need::Group {
                group: a.group,
                limit,
            },
        };
        let out = update_loading(store, db, k, now, need, |s| {
            new_consumer = false;
            let Some(s) = s.as_mut() else {
                return Err("NOGROUP");
            };
            let Some(mut g) = s.groups.remove(a.group) else {
                return Err("NOGROUP");
            };
            let served = match after {
                Some(after) => Some(history(s, &mut g, a.consumer, after, limit, now)),
                None => fresh(s, &mut g, a.consumer, limit, a.noack, now),
            };
            // As Redis 7.0: the consumer is created (or seen) only when
            // served, not by a read that finds nothing new.
            if served.is_some() {
                new_consumer = g.consumers.insert(a.consumer.to_vec(), now).is_none();
            }
            s.groups.insert(a.group.to_vec(), g);
            Ok((served.is_some(), served))
        })
        .await?;
        if new_consumer && out.is_ok() {
            shared.notify(notify::STREAM, "xgroup-createconsumer", db, k);
        }
        match out {
            Ok(Some(served)) => found.push((k, served)),
            Ok(None) => {}
            Err(_) => {
                r.error(format!(
                    "{} in XREADGROUP with GROUP option",
                    no_group(k, a.group)
                ));
                return Ok(true);
            }
        }
    }
    if found.is_empty() {
        return Ok(false);
    }
    if r.resp3() {
        r.map(found.len());
    } else {
        r.array(found.len());
    }
    for (k, served) in found {
        if !r.resp3() {
            r.array(2);
        }
        r.bulk(k);
        reply_served(r, &served);
    }
    Ok(true)
}

/// A consumer's own pending entries after `after`: redelivered (the
/// delivery counted), or `None` in place of an entry deleted since.
fn history(
    s: &Stream,
    g: &mut Group,
    consumer: &[u8],
    after: Id,
    limit: usize,
    now: u64,
) -> Vec<Served> {
    let Some(start) = after.next() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (id, p) in g.pending.range_mut(start..) {
        if out.len() >= limit {
            break;
        }
        if p.consumer != consumer {
            continue;
        }
        let e = s.entry(*id).cloned();
        if e.is_some() {
            p.delivered = now;
            p.deliveries += 1;
        }
        out.push((*id, e));
    }
    out
}

/// Entries the group has not delivered yet (`None` when there are
/// none): delivered to `consumer`, pending unless `noack`.
fn fresh(
    s: &Stream,
    g: &mut Group,
    consumer: &[u8],
    limit: usize,
    noack: bool,
    now: u64,
) -> Option<Vec<Served>> {
    let top = s.entries().next_back()?.id;
    if top <= g.last {
        return None;
    }
    let mut out = Vec::new();
    for e in s
        .entries()
        .filter(|e| e.id > g.last)
        .take(limit)
        .cloned()
        .collect::<Vec<_>>()
    {
        let id = e.id;
        if g.entries_read.is_some() && !s.tombstones_from(id) {
            g.entries_read = g.entries_read.map(|n| n + 1);
        } else if s.added > 0 {
            g.entries_read = s.entries_read_at(id);
        }
        g.last = id;
        if !noack {
            g.pending.insert(
                id,
                Pending {
                    consumer: consumer.to_vec(),
                    delivered: now,
                    deliveries: 1,
                },
            );
        }
        out.push((id, Some(e)));
    }
    Some(out)
}
