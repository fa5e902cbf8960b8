//! Who listens to what (Pub/Sub's [`Hub`]), and each listener's
//! [`Mailbox`]: the server-wide state that PUBLISH, keyspace
//! notifications, client-side caching's invalidations and MONITOR write
//! into, and a connection's task sends from. The commands are in
//! `pubsub.rs`.
//!
//! A publisher composes each message into the listeners' mailboxes while
//! it holds the hub's lock, so every subscriber sees the messages of all
//! publishers in one order (Redis's single thread gives the same), and a
//! publisher never waits for a subscriber: it only appends bytes.
//!
//! A subscriber that does not read is disconnected at Redis's default
//! `client-output-buffer-limit pubsub 32mb 8mb 60`: over 32 MiB waiting,
//! or over 8 MiB for 60 s. Its messages are dropped then, as Redis drops
//! the client, so one slow reader cannot grow the server without bound.

use std::collections::{BTreeSet, HashMap};
use std::future::poll_fn;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use nvdepot_resp::{Reply, Version};

use super::clients::Client;
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
    pub(super) fn subscribed(self) -> &'static [u8] {
        match self {
            Kind::Channel => b"subscribe",
            Kind::Pattern => b"psubscribe",
            Kind::Shard => b"ssubscribe",
        }
    }

    pub(super) fn unsubscribed(self) -> &'static [u8] {
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
    pub(super) any: AtomicBool,
}

#[derive(Default)]
struct HubState {
    /// Each channel's subscribers, in the order they subscribed.
    pub(super) channels: HashMap<Vec<u8>, Vec<Arc<Mailbox>>>,
    /// Each pattern's subscribers.
    pub(super) patterns: HashMap<Vec<u8>, Vec<Arc<Mailbox>>>,
    pub(super) shard: HashMap<Vec<u8>, Vec<Arc<Mailbox>>>,
}

impl HubState {
    pub(super) fn table(&mut self, kind: Kind) -> &mut HashMap<Vec<u8>, Vec<Arc<Mailbox>>> {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Pattern => &mut self.patterns,
            Kind::Shard => &mut self.shard,
        }
    }

    pub(super) fn empty(&self) -> bool {
        self.channels.is_empty() && self.patterns.is_empty() && self.shard.is_empty()
    }
}

impl Hub {
    pub(super) fn add(&self, kind: Kind, name: &[u8], mailbox: &Arc<Mailbox>) {
        let mut st = self.state.lock();
        st.table(kind)
            .entry(name.to_vec())
            .or_default()
            .push(Arc::clone(mailbox));
        self.any.store(true, Ordering::Release);
    }

    pub(super) fn remove(&self, kind: Kind, name: &[u8], mailbox: &Arc<Mailbox>) {
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
            deliver_to_all(subs, |r| {
                r.push(3);
                r.bulk(b"message");
                r.bulk(channel);
                r.bulk(message);
            });
            n += subs.len();
        }
        for (pattern, subs) in &st.patterns {
            if glob::matches_strictly(pattern, channel) {
                deliver_to_all(subs, |r| {
                    r.push(4);
                    r.bulk(b"pmessage");
                    r.bulk(pattern);
                    r.bulk(channel);
                    r.bulk(message);
                });
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
        deliver_to_all(subs, |r| {
            r.push(3);
            r.bulk(b"smessage");
            r.bulk(channel);
            r.bulk(message);
        });
        subs.len()
    }

    /// Whether anyone listens (keyspace notifications are composed only
    /// then).
    pub fn any(&self) -> bool {
        self.any.load(Ordering::Acquire)
    }

    /// PUBSUB CHANNELS / SHARDCHANNELS: the channels with a subscriber,
    /// matching `pattern` if given.
    pub(super) fn channels(&self, kind: Kind, pattern: Option<&[u8]>) -> Vec<Vec<u8>> {
        let mut st = self.state.lock();
        st.table(kind)
            .keys()
            .filter(|c| pattern.is_none_or(|p| glob::matches_strictly(p, c)))
            .cloned()
            .collect()
    }

    pub(super) fn numsub(&self, kind: Kind, channel: &[u8]) -> usize {
        self.state
            .lock()
            .table(kind)
            .get(channel)
            .map_or(0, Vec::len)
    }

    pub(super) fn numpat(&self) -> usize {
        self.state.lock().patterns.len()
    }

    /// Channels, patterns and shard channels with a subscriber (INFO).
    pub(super) fn counts(&self) -> (usize, usize, usize) {
        let st = self.state.lock();
        (st.channels.len(), st.patterns.len(), st.shard.len())
    }
}

/// Delivers one message to every mailbox of `subs`: composed once per
/// protocol version (a RESP3 push and a RESP2 array differ in their first
/// byte), each mailbox copying those bytes (PUBLISH to 100 subscribers
/// composed it 100 times).
fn deliver_to_all(subs: &[Arc<Mailbox>], compose: impl Fn(&mut Reply<'_>)) {
    let mut by_version: [Vec<u8>; 2] = Default::default();
    for m in subs {
        m.deliver_composed(&mut by_version, &compose);
    }
}

/// What waits to be sent to one subscriber.
pub struct Mailbox {
    pub(super) client: Arc<Client>,
    inner: Mutex<Inbox>,
}

struct Inbox {
    pub(super) bytes: Vec<u8>,
    /// The connection's task, waiting for messages.
    pub(super) waker: Option<Waker>,
    pub(super) version: Version,
    /// Since when `bytes` has stayed past the soft limit.
    pub(super) soft_since: Option<Instant>,
    /// Over a limit: disconnected; later messages are dropped.
    pub(super) dropped: bool,
}

impl Mailbox {
    pub(super) fn new(client: Arc<Client>, version: Version) -> Mailbox {
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

    /// Later messages are composed in `version` (HELLO changed it).
    pub(super) fn set_version(&self, version: Version) {
        self.inner.lock().version = version;
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
        self.delivered(inbox);
    }

    /// As [`Mailbox::deliver`], for one message to many mailboxes
    /// ([`deliver_to_all`]): composed into `by_version`'s slot for this
    /// mailbox's protocol unless an earlier mailbox composed it there.
    fn deliver_composed(&self, by_version: &mut [Vec<u8>; 2], compose: impl Fn(&mut Reply<'_>)) {
        let mut inbox = self.inner.lock();
        if inbox.dropped {
            return;
        }
        let version = inbox.version;
        let bytes = &mut by_version[usize::from(version == Version::Resp3)];
        if bytes.is_empty() {
            compose(&mut Reply::new(bytes, version));
        }
        inbox.bytes.extend_from_slice(bytes);
        self.delivered(inbox);
    }

    /// After a message was appended: the output limits, then the wake.
    fn delivered(&self, mut inbox: parking_lot::MutexGuard<'_, Inbox>) {
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
    pub(super) fn take(&self, out: &mut Vec<u8>) -> bool {
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
    pub(super) async fn taken(&self, out: &mut Vec<u8>) {
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
    pub(super) mailbox: Arc<Mailbox>,
    pub(super) channels: BTreeSet<Vec<u8>>,
    pub(super) patterns: BTreeSet<Vec<u8>>,
    pub(super) shard: BTreeSet<Vec<u8>>,
}

impl Subscriber {
    pub(super) fn set(&mut self, kind: Kind) -> &mut BTreeSet<Vec<u8>> {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Pattern => &mut self.patterns,
            Kind::Shard => &mut self.shard,
        }
    }

    /// The count Redis's (un)subscribe replies carry: channels and
    /// patterns together, shard channels apart.
    pub(super) fn count(&self, kind: Kind) -> usize {
        match kind {
            Kind::Shard => self.shard.len(),
            _ => self.channels.len() + self.patterns.len(),
        }
    }

    pub(super) fn active(&self) -> bool {
        !(self.channels.is_empty() && self.patterns.is_empty() && self.shard.is_empty())
    }
}
