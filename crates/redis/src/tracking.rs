//! Client-side caching as Redis 7.0's `tracking.c`: who tracks which keys,
//! and the invalidations sent when they change (the `CLIENT TRACKING`,
//! `CACHING`, `GETREDIR` and `TRACKINGINFO` commands that set it up are in
//! `client_command.rs`).
//! redis-py's and Lettuce's near caches rest on it: a client keeps the
//! values it read, and the server tells it when one changes.
//!
//! Default mode: the keys a tracking client reads (read-only commands,
//! their key positions from the command table) are remembered, key →
//! clients, across databases as Redis does; the first change of such a
//! key sends each of those clients one `invalidate` message and forgets
//! the key. BCAST mode: every change of a key under one of the client's
//! prefixes is sent, nothing is remembered. FLUSHDB/FLUSHALL send a null
//! invalidation (all keys) to every tracking client.
//!
//! A change is what the store reports for every write, deletion or
//! expiry (`RespStore::on_modified`, Redis's `signalModifiedKey`); the
//! client making it is the one whose command the worker is polling
//! (`as_client`, wrapped around commands only while some client tracks:
//! a command that began before the first CLIENT TRACKING ON counts as
//! nobody's, so NOLOOP may send its change back), for NOLOOP. Messages go into the target connection's
//! mailbox (the one Pub/Sub uses): RESP3 push messages on the tracking
//! connection, or — with REDIRECT — to another connection, as
//! `__redis__:invalidate` Pub/Sub messages if it speaks RESP2. A client's
//! own invalidations come right after its reply, as Redis 7.0 defers them.

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use nvdepot_resp::{Reply, Version};
use parking_lot::Mutex;

use super::hub::Mailbox;

thread_local! {
    /// The client whose command this thread is running (0: none).
    static CURRENT: Cell<u64> = const { Cell::new(0) };
}

/// Runs `f`, the command of client `id`: a key it changes is its own
/// change (NOLOOP does not send it back).
pub fn as_client<F: Future>(id: u64, f: F) -> AsClient<F> {
    AsClient { id, f }
}

pin_project_lite::pin_project! {
    /// The future of [`as_client`]: a struct, not an `async fn`, which
    /// would hold the command's future twice (its argument, then pinned).
    pub struct AsClient<F> {
        id: u64,
        #[pin]
        f: F,
    }
}

impl<F: Future> Future for AsClient<F> {
    type Output = F::Output;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<F::Output> {
        let this = self.project();
        let before = CURRENT.replace(*this.id);
        let polled = this.f.poll(cx);
        CURRENT.set(before);
        polled
    }
}

/// One connection's tracking settings (its session's copy).
#[derive(Clone, Default)]
pub struct Mode {
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    pub noloop: bool,
    /// CLIENT CACHING YES (OPTIN) / NO (OPTOUT) for the next command.
    pub caching: bool,
    /// Client id messages go to (0: this connection).
    pub redirect: u64,
    pub prefixes: BTreeSet<Vec<u8>>,
}

/// Server-wide tracking state.
#[derive(Default)]
pub struct Tracking {
    /// Any client tracking (changes cost one atomic load otherwise).
    on: AtomicBool,
    /// BCAST invalidations wait in `State::pending`.
    pending: AtomicBool,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Default mode: key → clients that read it since its last change.
    keys: HashMap<Vec<u8>, BTreeSet<u64>>,
    /// BCAST mode: prefix → clients.
    prefixes: BTreeMap<Vec<u8>, BTreeSet<u64>>,
    /// BCAST mode: prefix → keys changed under it since the last
    /// broadcast, each with the client that changed it last (for
    /// NOLOOP); sent as one message per prefix and client at the end of
    /// the changing connection's turn (Redis's beforeSleep broadcast).
    pending: BTreeMap<Vec<u8>, BTreeMap<Vec<u8>, u64>>,
    trackers: HashMap<u64, Tracker>,
    /// Every connection with a mailbox (a redirect's possible targets).
    mailboxes: HashMap<u64, Weak<Mailbox>>,
}

struct Tracker {
    bcast: bool,
    noloop: bool,
    redirect: u64,
    broken: bool,
}

impl Tracking {
    /// Whether any client tracks.
    pub fn active(&self) -> bool {
        self.on.load(Ordering::Acquire)
    }

    /// Connection `id` has a mailbox (it subscribed, or tracks).
    pub fn mailbox_opened(&self, id: u64, mailbox: &Arc<Mailbox>) {
        self.state
            .lock()
            .mailboxes
            .insert(id, Arc::downgrade(mailbox));
    }

    /// Connection `id` closed: its tracking and its mailbox go.
    pub fn closed(&self, id: u64) {
        let mut st = self.state.lock();
        st.mailboxes.remove(&id);
        self.stop(&mut st, id);
    }

    /// `CLIENT TRACKING OFF` (or RESET) of connection `id`.
    pub(super) fn off(&self, id: u64) {
        self.stop(&mut self.state.lock(), id);
    }

    fn stop(&self, st: &mut State, id: u64) {
        if st.trackers.remove(&id).is_none() {
            return;
        }
        st.forget_prefixes(id);
        self.on.store(!st.trackers.is_empty(), Ordering::Release);
    }

    /// `CLIENT TRACKING ON` of connection `id` with `mode`.
    pub(super) fn start(&self, id: u64, mode: &Mode) {
        let mut st = self.state.lock();
        st.forget_prefixes(id);
        if mode.bcast {
            if mode.prefixes.is_empty() {
                st.prefixes.entry(Vec::new()).or_default().insert(id);
            }
            for p in &mode.prefixes {
                st.prefixes.entry(p.clone()).or_default().insert(id);
            }
        }
        st.trackers.insert(
            id,
            Tracker {
                bcast: mode.bcast,
                noloop: mode.noloop,
                redirect: mode.redirect,
                broken: false,
            },
        );
        self.on.store(true, Ordering::Release);
    }

    /// Remembers that client `id` read `keys` (default mode).
    pub(super) fn remember(&self, id: u64, keys: &[&[u8]]) {
        let mut st = self.state.lock();
        for k in keys {
            st.keys.entry(k.to_vec()).or_default().insert(id);
        }
    }

    /// Key `key` changed (in any database: tracking keys are global).
    pub fn changed(&self, key: &[u8]) {
        if !self.on.load(Ordering::Acquire) {
            return;
        }
        let by = CURRENT.get();
        let mut st = self.state.lock();
        let mut targets = Vec::new();
        let st = &mut *st;
        for (prefix, ids) in &st.prefixes {
            if key.starts_with(prefix) {
                if by != 0 {
                    // A client's command: broadcast with the others of
                    // its turn (`broadcast`).
                    let keys = st.pending.entry(prefix.clone()).or_default();
                    keys.insert(key.to_vec(), by);
                    self.pending.store(true, Ordering::Release);
                } else {
                    targets.extend(ids.iter().copied());
                }
            }
        }
        if let Some(ids) = st.keys.remove(key) {
            targets.extend(
                ids.into_iter()
                    .filter(|id| st.trackers.get(id).is_some_and(|t| !t.bcast)),
            );
        }
        // One message per client even if several of its prefixes match.
        targets.sort_unstable();
        targets.dedup();
        for id in targets {
            if st.trackers.get(&id).is_some_and(|t| t.noloop && id == by) {
                continue;
            }
            st.send(id, Some(&[key]));
        }
    }

    /// Sends the BCAST invalidations pending (Redis's
    /// `trackingBroadcastInvalidationMessages`): for each prefix, each of
    /// its clients one message with the keys changed under it, in byte
    /// order, but those a NOLOOP client changed last itself.
    pub fn broadcast(&self) {
        if !self.pending.swap(false, Ordering::AcqRel) {
            return;
        }
        let mut st = self.state.lock();
        let pending = std::mem::take(&mut st.pending);
        for (prefix, keys) in pending {
            let ids: Vec<u64> = match st.prefixes.get(&prefix) {
                Some(ids) => ids.iter().copied().collect(),
                None => continue,
            };
            for id in ids {
                let noloop = st.trackers.get(&id).is_some_and(|t| t.noloop);
                let some: Vec<&[u8]> = keys
                    .iter()
                    .filter(|(_, by)| !(noloop && **by == id))
                    .map(|(k, _)| k.as_slice())
                    .collect();
                if !some.is_empty() {
                    st.send(id, Some(&some));
                }
            }
        }
    }

    /// FLUSHDB / FLUSHALL: every tracking client is told all keys changed.
    pub fn flushed(&self) {
        if !self.on.load(Ordering::Acquire) {
            return;
        }
        let mut st = self.state.lock();
        st.keys.clear();
        let ids: Vec<u64> = st.trackers.keys().copied().collect();
        for id in ids {
            st.send(id, None);
        }
    }

    /// Whether client `id` redirects to a connection that is gone.
    pub(super) fn broken(&self, id: u64) -> bool {
        self.state
            .lock()
            .trackers
            .get(&id)
            .is_some_and(|t| t.broken)
    }
}

impl State {
    /// Client `id` off every BCAST prefix (a prefix nobody has goes).
    fn forget_prefixes(&mut self, id: u64) {
        self.prefixes.retain(|_, ids| {
            ids.remove(&id);
            !ids.is_empty()
        });
    }

    /// Sends tracking client `id` the invalidation of `key` (`None`: all
    /// keys), where its settings say.
    fn send(&mut self, id: u64, key: Option<&[&[u8]]>) {
        let Some(t) = self.trackers.get_mut(&id) else {
            return;
        };
        let own = self.mailboxes.get(&id).and_then(Weak::upgrade);
        if t.redirect == 0 {
            if let Some(m) = own.filter(|m| m.version() == Version::Resp3) {
                invalidate(&m, key);
            }
            return;
        }
        let redirect = t.redirect;
        match self.mailboxes.get(&redirect).and_then(Weak::upgrade) {
            Some(target) if target.version() == Version::Resp3 => invalidate(&target, key),
            // RESP2: as a Pub/Sub message of `__redis__:invalidate`.
            Some(target) => target.deliver(|r| {
                r.array(3);
                r.bulk(b"message");
                r.bulk(b"__redis__:invalidate");
                keys_part(r, key);
            }),
            None => {
                t.broken = true;
                if let Some(m) = own.filter(|m| m.version() == Version::Resp3) {
                    m.deliver(|r| {
                        r.push(2);
                        r.bulk(b"tracking-redir-broken");
                        r.integer(redirect as i64);
                    });
                }
            }
        }
    }
}

fn invalidate(m: &Mailbox, key: Option<&[&[u8]]>) {
    m.deliver(|r| {
        r.push(2);
        r.bulk(b"invalidate");
        keys_part(r, key);
    });
}

fn keys_part(r: &mut Reply<'_>, keys: Option<&[&[u8]]>) {
    match keys {
        Some(keys) => {
            r.array(keys.len());
            for k in keys {
                r.bulk(k);
            }
        }
        None => r.null(),
    }
}

/// Redis's check that a client's prefixes do not overlap: the error, if
/// one starts another (`existing` first, then the new ones among
/// themselves).
pub(super) fn prefix_collision(existing: &BTreeSet<Vec<u8>>, new: &[&[u8]]) -> Option<String> {
    let overlap = |a: &[u8], b: &[u8]| {
        let n = a.len().min(b.len());
        a[..n] == b[..n]
    };
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    for (i, p) in new.iter().enumerate() {
        if let Some(e) = existing.iter().find(|e| overlap(e, p)) {
            return Some(format!(
                "ERR Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single \
                 client must not overlap.",
                text(p),
                text(e)
            ));
        }
        if let Some(q) = new[i + 1..].iter().find(|q| overlap(p, q)) {
            return Some(format!(
                "ERR Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a \
                 single client must not overlap.",
                text(p),
                text(q)
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_prefixes_are_refused_as_redis_does() {
        let existing: BTreeSet<Vec<u8>> = [b"user:".to_vec()].into();
        assert!(prefix_collision(&existing, &[b"user:1"]).is_some());
        assert!(prefix_collision(&existing, &[b"us"]).is_some());
        assert!(prefix_collision(&existing, &[b"obj:"]).is_none());
        assert!(prefix_collision(&BTreeSet::new(), &[b"a", b"ab"]).is_some());
        assert!(prefix_collision(&BTreeSet::new(), &[b"a", b"b"]).is_none());
    }

    #[test]
    fn a_change_is_sent_once_and_then_forgotten() {
        let t = Tracking::default();
        t.start(7, &Mode::default());
        t.remember(7, &[b"k"]);
        assert!(t.state.lock().keys.contains_key(&b"k"[..]));
        t.changed(b"k");
        assert!(!t.state.lock().keys.contains_key(&b"k"[..]));
        t.closed(7);
        assert!(!t.on.load(Ordering::Acquire));
    }
}
