//! Pub/Sub: SUBSCRIBE, PSUBSCRIBE, SSUBSCRIBE and their UNSUBSCRIBE
//! forms, PUBLISH, SPUBLISH and PUBSUB, as Redis 7.0.
//!
//! Who listens to what is the `Hub` (`hub.rs`), for every worker. A
//! subscriber's connection task sends its mailbox whenever it is idle (the
//! server kit waits on `Session::pushed` beside its receive), and before
//! each of its own commands, so its replies and its messages keep Redis's
//! order.

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::Arc;

use nvdepot_resp::{errors, Reply, Version};

use super::args::arity;
use super::hub::{Hub, Kind, Mailbox, Subscriber};
use super::session::RespSession;

/// Commands a RESP2 connection may run while subscribed.
fn allowed_subscribed(name: &[u8]) -> bool {
    matches!(
        name,
        b"SUBSCRIBE"
            | b"SSUBSCRIBE"
            | b"UNSUBSCRIBE"
            | b"SUNSUBSCRIBE"
            | b"PSUBSCRIBE"
            | b"PUNSUBSCRIBE"
            | b"PING"
            | b"QUIT"
            | b"RESET"
    )
}

/// Redis 7.0's arity of a container command's subcommand (both upper
/// case), for the subscriber context's checks; None if unknown.
fn subcommand_arity(name: &[u8], sub: &[u8]) -> Option<i32> {
    Some(match (name, sub) {
        (b"PUBSUB", b"CHANNELS" | b"NUMSUB" | b"SHARDCHANNELS" | b"SHARDNUMSUB") => -2,
        (b"PUBSUB" | b"CLIENT" | b"CONFIG" | b"COMMAND" | b"OBJECT", b"HELP") => 2,
        (b"PUBSUB", b"NUMPAT") => 2,
        (b"CLIENT", b"ID" | b"GETNAME" | b"INFO") => 2,
        (b"CLIENT", b"SETNAME") => 3,
        (b"CLIENT", b"LIST" | b"KILL") => -2,
        (b"CLIENT", b"UNBLOCK") => -3,
        (b"CONFIG", b"GET" | b"SET") => -3,
        (b"CONFIG", b"RESETSTAT" | b"REWRITE") => 2,
        (b"COMMAND", b"COUNT") => 2,
        (b"COMMAND", b"INFO" | b"DOCS") => -2,
        (b"OBJECT", b"ENCODING" | b"REFCOUNT" | b"IDLETIME" | b"FREQ") => 3,
        _ => return None,
    })
}

/// Whether `name` (upper case) is a command of this file.
pub fn is_pubsub(name: &[u8]) -> bool {
    matches!(
        name,
        b"SUBSCRIBE"
            | b"SSUBSCRIBE"
            | b"UNSUBSCRIBE"
            | b"SUNSUBSCRIBE"
            | b"PSUBSCRIBE"
            | b"PUNSUBSCRIBE"
            | b"PUBLISH"
            | b"SPUBLISH"
            | b"PUBSUB"
    )
}

impl RespSession {
    /// Subscribed, in RESP2: the subscriber context, where Redis refuses
    /// all but a few commands. The refusal for `args` if it is one of
    /// those (Redis checks the command's name and arity first).
    pub(super) fn subscriber_refusal(&self, name: &[u8], args: &[&[u8]]) -> Option<Vec<u8>> {
        let subscribed = self.subscriber.as_ref().is_some_and(|s| s.active());
        if !subscribed || self.version() == Version::Resp3 || allowed_subscribed(name) {
            return None;
        }
        let Some(spec) = super::commands::find(name) else {
            return Some(errors::unknown_command(args));
        };
        let n = args.len() as i32;
        if (spec.arity > 0 && n != spec.arity) || n < -spec.arity {
            return Some(errors::wrong_arity(args[0]).into_bytes());
        }
        let mut full = String::from_utf8_lossy(args[0]).to_lowercase();
        if let (Some(sub), true) = (args.get(1), super::clients::is_container(name)) {
            // An unknown subcommand, or a known one of the wrong arity, is
            // answered as such first: the command's own reply says so.
            match subcommand_arity(name, &sub.to_ascii_uppercase()) {
                Some(a) if (a > 0 && n == a) || (a < 0 && n >= -a) => {}
                _ => return None,
            }
            full.push('|');
            full.push_str(&String::from_utf8_lossy(sub).to_lowercase());
        }
        Some(
            format!(
                "ERR Can't execute '{full}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / \
                 QUIT / RESET are allowed in this context"
            )
            .into_bytes(),
        )
    }

    /// PING while subscribed in RESP2: `pong` and the message, as an
    /// array. None when the ordinary reply applies.
    pub(super) fn subscribed_ping(&self, args: &[&[u8]], r: &mut Reply<'_>) -> bool {
        let subscribed = self.subscriber.as_ref().is_some_and(|s| s.active());
        if !subscribed || r.resp3() || args.len() > 2 {
            return false;
        }
        r.array(2);
        r.bulk(b"pong");
        r.bulk(args.get(1).copied().unwrap_or(b""));
        true
    }

    /// The Pub/Sub commands.
    pub(super) fn pubsub(&mut self, name: &[u8], args: &[&[u8]], r: &mut Reply<'_>) {
        let shared = self.shared();
        let hub = &shared.hub;
        match name {
            b"SUBSCRIBE" | b"PSUBSCRIBE" | b"SSUBSCRIBE" => {
                if !arity(args, 2, None, r) {
                    return;
                }
                let kind = match name {
                    b"SUBSCRIBE" => Kind::Channel,
                    b"PSUBSCRIBE" => Kind::Pattern,
                    _ => Kind::Shard,
                };
                self.open_mailbox(r.version);
                let sub = self.subscriber.as_mut().expect("opened");
                for name in &args[1..] {
                    if sub.set(kind).insert(name.to_vec()) {
                        hub.add(kind, name, &sub.mailbox);
                    }
                    r.push(3);
                    r.bulk(kind.subscribed());
                    r.bulk(name);
                    r.integer(sub.count(kind) as i64);
                }
                self.client.set_subscriptions(
                    sub.channels.len(),
                    sub.patterns.len(),
                    sub.shard.len(),
                );
            }
            b"UNSUBSCRIBE" | b"PUNSUBSCRIBE" | b"SUNSUBSCRIBE" => {
                let kind = match name {
                    b"UNSUBSCRIBE" => Kind::Channel,
                    b"PUNSUBSCRIBE" => Kind::Pattern,
                    _ => Kind::Shard,
                };
                self.unsubscribe(kind, &args[1..], Some(r));
            }
            b"PUBLISH" | b"SPUBLISH" => {
                if arity(args, 3, Some(3), r) {
                    let n = if name == b"PUBLISH" {
                        hub.publish(args[1], args[2])
                    } else {
                        hub.spublish(args[1], args[2])
                    };
                    // A message to the publisher itself goes before its
                    // reply, as in Redis.
                    self.take_messages(r.out);
                    r.integer(n as i64);
                }
            }
            _ => pubsub_command(hub, args, r),
        }
    }

    /// Ends subscriptions of `kind`: those named, or all if none is;
    /// replies as Redis when `r` is given (RESET and a closing
    /// connection end them silently).
    pub(super) fn unsubscribe(
        &mut self,
        kind: Kind,
        names: &[&[u8]],
        mut r: Option<&mut Reply<'_>>,
    ) {
        let shared = self.shared();
        let Some(sub) = self.subscriber.as_mut() else {
            if let Some(r) = r {
                if names.is_empty() {
                    unsubscribed(r, kind, None, 0);
                }
                for n in names {
                    unsubscribed(r, kind, Some(n), 0);
                }
            }
            return;
        };
        let all: Vec<Vec<u8>>;
        let names: Vec<&[u8]> = if names.is_empty() {
            all = sub.set(kind).iter().cloned().collect();
            all.iter().map(Vec::as_slice).collect()
        } else {
            names.to_vec()
        };
        if names.is_empty() {
            if let Some(r) = r.as_deref_mut() {
                unsubscribed(r, kind, None, sub.count(kind));
            }
        }
        for n in names {
            if sub.set(kind).remove(n) {
                shared.hub.remove(kind, n, &sub.mailbox);
            }
            if let Some(r) = r.as_deref_mut() {
                unsubscribed(r, kind, Some(n), sub.count(kind));
            }
        }
        self.client
            .set_subscriptions(sub.channels.len(), sub.patterns.len(), sub.shard.len());
    }

    /// Gives this connection a mailbox for messages (Pub/Sub, tracking
    /// invalidations), if it has none, composed in `version`.
    pub(super) fn open_mailbox(&mut self, version: Version) {
        if self.subscriber.is_some() {
            return;
        }
        let mailbox = Arc::new(Mailbox::new(Arc::clone(&self.client), version));
        self.shared
            .tracking
            .mailbox_opened(self.client.id, &mailbox);
        self.subscriber = Some(Box::new(Subscriber {
            mailbox,
            channels: BTreeSet::new(),
            patterns: BTreeSet::new(),
            shard: BTreeSet::new(),
        }));
    }

    /// This connection's mailbox, once it has one.
    pub(super) fn mailbox(&self) -> Option<Arc<Mailbox>> {
        self.subscriber.as_ref().map(|s| Arc::clone(&s.mailbox))
    }

    /// Ends every subscription (RESET, a closed connection).
    pub(super) fn unsubscribe_all(&mut self) {
        for kind in [Kind::Channel, Kind::Pattern, Kind::Shard] {
            self.unsubscribe(kind, &[], None);
        }
        self.subscriber = None;
    }

    /// Moves the messages waiting for this connection into `out`, ahead
    /// of the reply to its next command.
    pub(super) fn take_messages(&self, out: &mut Vec<u8>) {
        if let Some(sub) = &self.subscriber {
            sub.mailbox.take(out);
        }
    }

    /// Waits for messages for this connection (never, if it subscribes to
    /// nothing) and moves them into `out`.
    pub(super) fn messages<'a>(&'a self, out: &'a mut Vec<u8>) -> impl Future<Output = ()> + 'a {
        let mailbox = self.subscriber.as_ref().map(|s| &s.mailbox);
        async move {
            match mailbox {
                Some(m) => m.taken(out).await,
                None => std::future::pending().await,
            }
        }
    }

    /// The protocol changed (HELLO): later messages are composed in it.
    pub(super) fn messages_in(&self, version: Version) {
        if let Some(sub) = &self.subscriber {
            sub.mailbox.set_version(version);
        }
    }
}

/// One (un)subscribe confirmation.
fn unsubscribed(r: &mut Reply<'_>, kind: Kind, name: Option<&[u8]>, count: usize) {
    r.push(3);
    r.bulk(kind.unsubscribed());
    match name {
        Some(n) => r.bulk(n),
        None => r.null(),
    }
    r.integer(count as i64);
}

/// `PUBSUB CHANNELS|NUMSUB|NUMPAT|SHARDCHANNELS|SHARDNUMSUB|HELP`.
fn pubsub_command(hub: &Hub, args: &[&[u8]], r: &mut Reply<'_>) {
    let Some(sub) = args.get(1) else {
        return r.error(errors::wrong_arity(args[0]));
    };
    let sub_upper = sub.to_ascii_uppercase();
    let wrong = |r: &mut Reply<'_>| r.error(errors::wrong_sub_arity("pubsub", sub));
    match sub_upper.as_slice() {
        b"CHANNELS" | b"SHARDCHANNELS" => {
            if args.len() > 3 {
                return wrong(r);
            }
            let kind = if sub_upper.as_slice() == b"CHANNELS" {
                Kind::Channel
            } else {
                Kind::Shard
            };
            let list = hub.channels(kind, args.get(2).copied());
            r.array(list.len());
            for c in &list {
                r.bulk(c);
            }
        }
        b"NUMSUB" | b"SHARDNUMSUB" => {
            let kind = if sub_upper.as_slice() == b"NUMSUB" {
                Kind::Channel
            } else {
                Kind::Shard
            };
            // An array in RESP3 too (Redis 7.0's reply).
            r.array(2 * (args.len() - 2));
            for c in &args[2..] {
                r.bulk(c);
                r.integer(hub.numsub(kind, c) as i64);
            }
        }
        b"NUMPAT" => {
            if args.len() != 2 {
                return wrong(r);
            }
            r.integer(hub.numpat() as i64);
        }
        b"HELP" => {
            let lines = [
                "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "CHANNELS [<pattern>]",
                "    Return the currently active channels matching a <pattern> (default: '*').",
                "NUMPAT",
                "    Return number of subscriptions to patterns.",
                "NUMSUB [<channel> ...]",
                "    Return the number of subscribers for the specified channels, excluding",
                "    pattern subscriptions(default: no channels).",
                "SHARDCHANNELS [<pattern>]",
                "    Return the currently active shard level channels matching a <pattern> (default: '*').",
                "SHARDNUMSUB [<shardchannel> ...]",
                "    Return the number of subscribers for the specified shard level channel(s)",
                "HELP",
                "    Prints this help.",
            ];
            r.simple_lines(&lines);
        }
        _ => r.error(errors::unknown_subcommand("PUBSUB", sub)),
    }
}
