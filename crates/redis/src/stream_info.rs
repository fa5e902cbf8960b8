//! XINFO (Redis 7.0's `xinfoCommand`): STREAM (and FULL [COUNT]), GROUPS
//! (with the entries-read counter and the lag Redis derives from it) and
//! CONSUMERS. `radix-tree-keys` answers the stream's node count (the
//! nodes model Redis's listpacks, `stream_log.rs`); `radix-tree-nodes`,
//! the internal nodes of Redis's radix tree, has no counterpart here and
//! answers one more than that (Redis's count for a stream of one node,
//! and of none).

use nvdepot_cache::resp::RespStore;
use nvdepot_cache::Error;
use nvdepot_resp::{errors, Reply};

use super::stream::{read, reply_entry};
use super::stream_log::{Group, Stream};

/// Redis's `streamReplyWithCGLag`: the entries added after the group's
/// last delivered one, when that can be known (negative, as Redis's, when
/// a group's entries-read was set past the entries added).
fn lag(s: &Stream, g: &Group) -> Option<i64> {
    if s.added == 0 {
        return Some(0);
    }
    let since = |read: u64| (s.added as i64).wrapping_sub(read as i64);
    if let Some(read) = g.entries_read {
        if !s.tombstones_from(g.last) {
            return Some(since(read));
        }
    }
    s.entries_read_at(g.last).map(since)
}

fn opt_int(r: &mut Reply<'_>, v: Option<i64>) {
    match v {
        Some(n) => r.integer(n),
        None => r.null(),
    }
}

pub async fn xinfo(
    store: &RespStore,
    db: usize,
    args: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    if args.len() < 2 {
        r.error(errors::wrong_arity(args[0]));
        return Ok(());
    }
    let sub = args[1].to_ascii_uppercase();
    let lower = String::from_utf8_lossy(args[1]).to_ascii_lowercase();
    let arity: i64 = match sub.as_slice() {
        b"CONSUMERS" => 4,
        b"GROUPS" => 3,
        b"STREAM" => -3,
        b"HELP" => 2,
        _ => {
            r.error(errors::unknown_subcommand("XINFO", args[1]));
            return Ok(());
        }
    };
    let n = args.len() as i64;
    if (arity > 0 && n != arity) || (arity < 0 && n < -arity) {
        r.error(format!(
            "ERR wrong number of arguments for 'xinfo|{lower}' command"
        ));
        return Ok(());
    }
    if sub.as_slice() == b"HELP" {
        let lines = [
            "XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "CONSUMERS <key> <groupname>",
            "    Show consumers of <groupname>.",
            "GROUPS <key>",
            "    Show the stream consumer groups.",
            "STREAM <key> [FULL [COUNT <count>]",
            "    Show information about the stream.",
            "HELP",
            "    Prints this help.",
        ];
        r.array(lines.len());
        for l in lines {
            r.simple(l);
        }
        return Ok(());
    }
    let key = args[2];
    let Ok(s) = read(store, db, key, now, r).await? else {
        return Ok(());
    };
    let Some(s) = s else {
        r.error("ERR no such key");
        return Ok(());
    };
    match sub.as_slice() {
        b"CONSUMERS" => {
            let Some(g) = s.groups.get(args[3]) else {
                r.error(super::stream_log::no_such_group(args[3], key));
                return Ok(());
            };
            r.array(g.consumers.len());
            for (name, seen) in &g.consumers {
                let pending = g.pending.values().filter(|p| &p.consumer == name).count();
                r.map(3);
                r.bulk(b"name");
                r.bulk(name);
                r.bulk(b"pending");
                r.integer(pending as i64);
                r.bulk(b"idle");
                r.integer(now.saturating_sub(*seen) as i64);
            }
        }
        b"GROUPS" => {
            r.array(s.groups.len());
            for (name, g) in &s.groups {
                r.map(6);
                r.bulk(b"name");
                r.bulk(name);
                r.bulk(b"consumers");
                r.integer(g.consumers.len() as i64);
                r.bulk(b"pending");
                r.integer(g.pending.len() as i64);
                r.bulk(b"last-delivered-id");
                r.bulk(&g.last.text());
                r.bulk(b"entries-read");
                opt_int(r, g.entries_read.map(|n| n as i64));
                r.bulk(b"lag");
                opt_int(r, lag(&s, g));
            }
        }
        _ => {
            let syntax = || {
                format!(
                    "ERR unknown subcommand or wrong number of arguments for '{}'. Try XINFO HELP.",
                    String::from_utf8_lossy(args[1])
                )
            };
            let opts = &args[3..];
            if !opts.is_empty() {
                if !(opts.len() == 1 || opts.len() == 3) || !opts[0].eq_ignore_ascii_case(b"FULL") {
                    r.error(syntax());
                    return Ok(());
                }
                let mut count = 10;
                if opts.len() == 3 {
                    if !opts[1].eq_ignore_ascii_case(b"COUNT") {
                        r.error(syntax());
                        return Ok(());
                    }
                    let Some(n) = nvdepot_resp::string2ll(opts[2]) else {
                        r.error(errors::NOT_INTEGER);
                        return Ok(());
                    };
                    count = if n < 0 { 10 } else { n as usize };
                }
                full(&s, count, r);
                return Ok(());
            }
            r.map(10);
            stream_head(&s, r);
            r.bulk(b"groups");
            r.integer(s.groups.len() as i64);
            for (label, e) in [
                ("first-entry", s.entries().next()),
                ("last-entry", s.entries().next_back()),
            ] {
                r.bulk(label.as_bytes());
                match e {
                    Some(e) => reply_entry(r, e),
                    None => r.null(),
                }
            }
        }
    }
    Ok(())
}

/// The fields XINFO STREAM answers with and without FULL.
fn stream_head(s: &Stream, r: &mut Reply<'_>) {
    r.bulk(b"length");
    r.integer(s.len() as i64);
    r.bulk(b"radix-tree-keys");
    r.integer(s.nodes.len() as i64);
    r.bulk(b"radix-tree-nodes");
    r.integer(s.nodes.len() as i64 + 1);
    r.bulk(b"last-generated-id");
    r.bulk(&s.last.text());
    r.bulk(b"max-deleted-entry-id");
    r.bulk(&s.max_deleted.text());
    r.bulk(b"entries-added");
    r.integer(s.added as i64);
    r.bulk(b"recorded-first-entry-id");
    r.bulk(&s.first_id().text());
}

/// XINFO STREAM key FULL [COUNT n]: the first `count` entries (0: all),
/// and every group with its first `count` pending entries and every
/// consumer with its own first `count` (Redis's
/// `xinfoReplyWithStreamInfo`).
fn full(s: &Stream, count: usize, r: &mut Reply<'_>) {
    let limit = if count == 0 { usize::MAX } else { count };
    r.map(9);
    stream_head(s, r);
    r.bulk(b"entries");
    let entries: Vec<_> = s.entries().take(limit).collect();
    r.array(entries.len());
    for e in entries {
        reply_entry(r, e);
    }
    r.bulk(b"groups");
    r.array(s.groups.len());
    for (name, g) in &s.groups {
        r.map(7);
        r.bulk(b"name");
        r.bulk(name);
        r.bulk(b"last-delivered-id");
        r.bulk(&g.last.text());
        r.bulk(b"entries-read");
        opt_int(r, g.entries_read.map(|n| n as i64));
        r.bulk(b"lag");
        opt_int(r, lag(s, g));
        r.bulk(b"pel-count");
        r.integer(g.pending.len() as i64);
        r.bulk(b"pending");
        let pel: Vec<_> = g.pending.iter().take(limit).collect();
        r.array(pel.len());
        for (id, p) in pel {
            r.array(4);
            r.bulk(&id.text());
            r.bulk(&p.consumer);
            r.integer(p.delivered as i64);
            r.integer(p.deliveries as i64);
        }
        r.bulk(b"consumers");
        r.array(g.consumers.len());
        for (consumer, seen) in &g.consumers {
            let own: Vec<_> = g
                .pending
                .iter()
                .filter(|(_, p)| &p.consumer == consumer)
                .collect();
            r.map(4);
            r.bulk(b"name");
            r.bulk(consumer);
            r.bulk(b"seen-time");
            r.integer(*seen as i64);
            r.bulk(b"pel-count");
            r.integer(own.len() as i64);
            r.bulk(b"pending");
            let shown = own.len().min(limit);
            r.array(shown);
            for (id, p) in own.into_iter().take(limit) {
                r.array(3);
                r.bulk(&id.text());
                r.integer(p.delivered as i64);
                r.integer(p.deliveries as i64);
            }
        }
    }
}
