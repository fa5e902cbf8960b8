//! Pub/Sub: SUBSCRIBE, PSUBSCRIBE, SSUBSCRIBE and their UNSUBSCRIBE
//! forms, PUBLISH, SPUBLISH and PUBSUB, as Redis 7.0.
//!
//! The [`Hub`] holds who listens to what, for every worker. A publisher
//! composes each message into the listeners' [`Mailbox`]es while it holds
//! the hub's lock, so every subscriber sees the messages of all publishers
//! in one order (Redis's single thread gives the same), and a publisher
//! never waits for a subscriber: it only appends bytes. A subscriber's
//! connection task sends its mailbox whenever it is idle (the server kit
//! waits on `Session::pushed` beside its receive), and before each of its
//! own commands, so its replies and its messages keep Redis's order.
//!
//! A subscriber that does not read is disconnected at Redis's default
//! `client-output-buffer-limit pubsub 32mb 8mb 60`: over 32 MiB waiting,
//! or over 8 MiB for 60 s. Its messages are dropped then, as Redis drops
//! the client, so one slow reader cannot grow the server without bound.

use std::collections::{BTreeSet, HashMap};
use std::future::{poll_fn, Future};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use nvdepot_resp::{errors, Reply, Version};

use super::clients::Client;
use super::face::{arity, RespSession};
use super::glob;

/// Bytes waiting for a subscriber past which it is disconnected at once.
pub const HARD_LIMIT_BYTES: usize = 32 << 20;
/// Bytes waiting for a subscriber past which it is disconnected once
/// they have stayed past it for [`SOFT_LIMIT_FOR`].
pub const SOFT_LIMIT_BYTES: usize = 8 << 20;
pub const SOFT_LIMIT_FOR: Duration = Duration::from_secs(60);

/// The three kinds of subscription.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// SUBSCRIBE: a channel by name.
    Channel,
    /// PSUBSCRIBE: channels matching a glob pattern.
    Pattern,
    /// SSUBSCRIBE: a shard channel (in a cluster, the slot's node's).
    Shard,
}

impl Kind {
    fn subscribed(self) -> &'static [u8] {
        match self {
            Kind::Channel => b"subscribe",
            Kind::Pattern => b"psubscribe",
            Kind::Shard => b"ssubscribe",
        }
    }

    fn unsubscribed(self) -> &'static [u8] {
        match self {
            Kind::Channel => b"unsubscribe",
            Kind::Pattern => b"punsubscribe",
            Kind::Shard => b"sunsubscribe",
        }
    }
}

/// Who listens to what, server-wide.
#[derive(Default)]
pub struct Hub {
    state: Mutex<HubState>,
    /// Anyone subscribed to anything (PUBLISH skips the lock otherwise;
    /// keyspace notifications are free without listeners).
    any: AtomicBool,
}

#[derive(Default)]
struct HubState {
    /// Each channel's subscribers, in the order they subscribed.
    channels: HashMap<Vec<u8>, Vec<Arc<Mailbox>>>,
    /// Each pattern's subscribers.
    patterns: HashMap<Vec<u8>, Vec<Arc<Mailbox>>>,
    shard: HashMap<Vec<u8>, Vec<Arc<Mailbox>>>,
}

impl HubState {
    fn table(&mut self, kind: Kind) -> &mut HashMap<Vec<u8>, Vec<Arc<Mailbox>>> {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Pattern => &mut self.patterns,
            Kind::Shard => &mut self.shard,
        }
    }

    fn empty(&self) -> bool {
        self.channels.is_empty() && self.patterns.is_empty() && self.shard.is_empty()
    }
}

impl Hub {
    fn add(&self, kind: Kind, name: &[u8], mailbox: &Arc<Mailbox>) {
        let mut st = self.state.lock();
        st.table(kind)
            .entry(name.to_vec())
            .or_default()
            .push(Arc::clone(mailbox));
        self.any.store(true, Ordering::Release);
    }

    fn remove(&self, kind: Kind, name: &[u8], mailbox: &Arc<Mailbox>) {
        let mut st = self.state.lock();
        let table = st.table(kind);
        if let Some(list) = table.get_mut(name) {
            list.retain(|m| !Arc::ptr_eq(m, mailbox));
            if list.is_empty() {
                table.remove(name);
            }
        }
        if st.empty() {
            self.any.store(false, Ordering::Release);
        }
    }

    /// PUBLISH: delivers `message` to the subscribers of `channel` and of
    /// every pattern matching it; how many received it (a client counted
    /// once per subscription that matched).
    pub fn publish(&self, channel: &[u8], message: &[u8]) -> usize {
        if !self.any.load(Ordering::Acquire) {
            return 0;
        }
        let st = self.state.lock();
        let mut n = 0;
        if let Some(subs) = st.channels.get(channel) {
            for m in subs {
                m.deliver(|r| {
                    r.push(3);
                    r.bulk(b"message");
                    r.bulk(channel);
                    r.bulk(message);
                });
            }
            n += subs.len();
        }
        for (pattern, subs) in &st.patterns {
            if glob::matches_strictly(pattern, channel) {
                for m in subs {
                    m.deliver(|r| {
                        r.push(4);
                        r.bulk(b"pmessage");
                        r.bulk(pattern);
                        r.bulk(channel);
                        r.bulk(message);
                    });
                }
                n += subs.len();
            }
        }
        n
    }

    /// SPUBLISH: delivers to the subscribers of shard channel `channel`.
    pub fn spublish(&self, channel: &[u8], message: &[u8]) -> usize {
        if !self.any.load(Ordering::Acquire) {
            return 0;
        }
        let st = self.state.lock();
        let Some(subs) = st.shard.get(channel) else {
            return 0;
        };
        for m in subs {
            m.deliver(|r| {
                r.push(3);
                r.bulk(b"smessage");
                r.bulk(channel);
                r.bulk(message);
            });
        }
        subs.len()
    }

    /// Whether anyone listens (keyspace notifications are composed only
    /// then).
    pub fn any(&self) -> bool {
        self.any.load(Ordering::Acquire)
    }

    /// PUBSUB CHANNELS / SHARDCHANNELS: the channels with a subscriber,
    /// matching `pattern` if given.
    fn channels(&self, kind: Kind, pattern: Option<&[u8]>) -> Vec<Vec<u8>> {
        let mut st = self.state.lock();
        st.table(kind)
            .keys()
            .filter(|c| pattern.is_none_or(|p| glob::matches_strictly(p, c)))
            .cloned()
            .collect()
    }

    fn numsub(&self, kind: Kind, channel: &[u8]) -> usize {
        self.state
            .lock()
            .table(kind)
            .get(channel)
            .map_or(0, Vec::len)
    }

    fn numpat(&self) -> usize {
        self.state.lock().patterns.len()
    }

    /// Channels, patterns and shard channels with a subscriber (INFO).
    pub(super) fn counts(&self) -> (usize, usize, usize) {
        let st = self.state.lock();
        (st.channels.len(), st.patterns.len(), st.shard.len())
    }
}

/// What waits to be sent to one subscriber.
pub struct Mailbox {
    client: Arc<Client>,
    inner: Mutex<Inbox>,
}

struct Inbox {
    bytes: Vec<u8>,
    /// The connection's task, waiting for messages.
    waker: Option<Waker>,
    version: Version,
    /// Since when `bytes` has stayed past the soft limit.
    soft_since: Option<Instant>,
    /// Over a limit: disconnected; later messages are dropped.
    dropped: bool,
}

impl Mailbox {
    fn new(client: Arc<Client>, version: Version) -> Mailbox {
        Mailbox {
            client,
            inner: Mutex::new(Inbox {
                bytes: Vec::new(),
                waker: None,
                version,
                soft_since: None,
                dropped: false,
            }),
        }
    }

    /// The protocol its messages are composed in.
    pub(super) fn version(&self) -> Version {
        self.inner.lock().version
    }

    /// Appends one message composed by `compose`, and wakes the
    /// connection; disconnects it past the output limits.
    pub(super) fn deliver(&self, compose: impl FnOnce(&mut Reply<'_>)) {
        let mut inbox = self.inner.lock();
        if inbox.dropped {
            return;
        }
        let version = inbox.version;
        compose(&mut Reply::new(&mut inbox.bytes, version));
        let len = inbox.bytes.len();
        let over = if len > HARD_LIMIT_BYTES {
            true
        } else if len > SOFT_LIMIT_BYTES {
            let since = *inbox.soft_since.get_or_insert_with(Instant::now);
            since.elapsed() >= SOFT_LIMIT_FOR
        } else {
            inbox.soft_since = None;
            false
        };
        if over {
            inbox.dropped = true;
            inbox.bytes = Vec::new();
            drop(inbox);
            tracing::warn!(
                "resp: client {} disconnected: its pub/sub output passed \
                 client-output-buffer-limit pubsub ({} bytes waiting)",
                self.client.id,
                len
            );
            self.client.kill();
            return;
        }
        if let Some(w) = inbox.waker.take() {
            drop(inbox);
            w.wake();
        }
    }

    /// Moves what is waiting into `out` (nothing if nothing waits).
    fn take(&self, out: &mut Vec<u8>) -> bool {
        let mut inbox = self.inner.lock();
        if inbox.bytes.is_empty() {
            return false;
        }
        if out.is_empty() {
            std::mem::swap(out, &mut inbox.bytes);
        } else {
            out.append(&mut inbox.bytes);
        }
        inbox.soft_since = None;
        true
    }

    /// Waits until something waits, and moves it into `out`.
    async fn taken(&self, out: &mut Vec<u8>) {
        poll_fn(|cx| {
            let mut inbox = self.inner.lock();
            if inbox.bytes.is_empty() {
                inbox.waker = Some(cx.waker().clone());
                return Poll::Pending;
            }
            drop(inbox);
            self.take(out);
            Poll::Ready(())
        })
        .await
    }
}

/// One connection's subscriptions.
pub struct Subscriber {
    mailbox: Arc<Mailbox>,
    channels: BTreeSet<Vec<u8>>,
    patterns: BTreeSet<Vec<u8>>,
    shard: BTreeSet<Vec<u8>>,
}

impl Subscriber {
    fn set(&mut self, kind: Kind) -> &mut BTreeSet<Vec<u8>> {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Pattern => &mut self.patterns,
            Kind::Shard => &mut self.shard,
        }
    }

    /// The count Redis's (un)subscribe replies carry: channels and
    /// patterns together, shard channels apart.
    fn count(&self, kind: Kind) -> usize {
        match kind {
            Kind::Shard => self.shard.len(),
            _ => self.channels.len() + self.patterns.len(),
        }
    }

    fn active(&self) -> bool {
        !(self.channels.is_empty() && self.patterns.is_empty() && self.shard.is_empty())
    }
}

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
            sub.mailbox.inner.lock().version = version;
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
