//! What the Redis face's commands run against: the server's shared state
//! (`Shared`: the store, the settings, the connections, the subscriptions,
//! the scripts, the counters) and one connection's state (`RespSession`).
//! Only definitions: the commands are in their own files, the dispatch in
//! `face.rs`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use nvdepot_cache::resp::RespStore;
use nvdepot_resp::{Limits, Version};
use nvdepot_server::Shutdown;

use super::clients::{Client, Clients};
use super::cluster::Cluster;
use super::gate::Gate;

/// The version this server reports (`HELLO`, `INFO`): Redis 7.0's
/// behaviour, which the face follows.
pub const REDIS_VERSION: &str = "7.0.0";

/// Fixed at start-up.
pub struct Config {
    /// `--requirepass`: clients must `AUTH` first.
    pub password: Option<String>,
    pub limits: Limits,
    pub port: u16,
    /// What `INFO persistence` and `CONFIG GET appendfsync` report.
    pub appendfsync: &'static str,
    /// `--maxclients`, `--bind` (as `CONFIG GET` reports them).
    pub maxclients: u32,
    pub bind: String,
    /// `--timeout`: CONFIG `timeout` at start-up.
    pub timeout_secs: u32,
}

/// Server-wide counters (`INFO`).
#[derive(Default)]
pub struct Counters {
    pub connected: AtomicU64,
    pub total_connections: AtomicU64,
    pub rejected: AtomicU64,
    pub commands: AtomicU64,
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    /// Keys removed because they expired (read, written or swept).
    pub expired: AtomicU64,
    pub(super) started_ms: AtomicU64,
}

impl Counters {
    /// `CONFIG RESETSTAT`: the counts start again (not the gauges).
    pub fn reset(&self) {
        for c in [
            &self.total_connections,
            &self.rejected,
            &self.commands,
            &self.hits,
            &self.misses,
            &self.expired,
        ] {
            c.store(0, Ordering::Relaxed);
        }
    }
}

/// What every connection shares.
pub struct Shared {
    pub store: Arc<RespStore>,
    pub config: Config,
    pub counters: Counters,
    /// Transactions' isolation (see `gate.rs`).
    pub gate: Gate,
    /// `--cluster-enabled`: this node's Redis Cluster state.
    pub cluster: Option<Arc<Cluster>>,
    /// Every open connection (`CLIENT LIST`, `CLIENT KILL`).
    pub clients: Clients,
    /// The encoding settings `CONFIG SET` may change.
    pub tunables: super::tunables::Tunables,
    /// Clients blocked on keys (BLPOP and the rest).
    pub blocked: super::blocked::Blocked,
    /// Pub/Sub: who listens to what.
    pub hub: super::hub::Hub,
    /// The script cache and the running script (EVAL).
    pub scripts: Arc<super::script_state::ScriptState>,
    /// Client-side caching: who tracks which keys (CLIENT TRACKING).
    pub tracking: Arc<super::tracking::Tracking>,
    /// `notify-keyspace-events`: the keyspace notification classes on.
    pub notify: super::notify::Notify,
    /// Command and error counts, the slow log, the latency monitor.
    pub observed: super::observe::Observed,
    /// CLIENT PAUSE.
    pub pause: super::clients::Pause,
    /// The connections in MONITOR.
    pub monitors: super::monitor::Monitors,
    /// MIGRATE's connections to its targets.
    pub migrate_sockets: Arc<super::node_client::Sockets>,
    pub(super) shutdown: Shutdown,
}

impl Shared {
    /// Publishes keyspace event `event` of `class` (`notify.rs`) on `key`
    /// of `db`, if that class is on.
    pub fn notify(&self, class: u32, event: &str, db: usize, key: &[u8]) {
        self.notify.event(&self.hub, class, event, db, key);
    }
}

/// One connection's state.
pub struct RespSession {
    pub(super) shared: Arc<Shared>,
    pub db: usize,
    pub(super) version: Version,
    pub(super) authed: bool,
    /// What other connections see of this one (its id and name are
    /// there).
    pub(super) client: Arc<Client>,
    /// Close once the replies composed so far are sent.
    pub(super) close: bool,
    /// Inside MULTI: the queued commands.
    pub(super) multi: Option<Multi>,
    /// WATCHed keys.
    pub(super) watched: Vec<Watched>,
    /// The previous command was `ASKING` (cluster: serve an importing
    /// slot once).
    pub(super) asking: bool,
    /// A blocking pop may wait (outside MULTI) …
    pub(super) may_block: bool,
    /// … and found its keys empty: it may wait this long (`Some(None)`:
    /// no limit).
    pub(super) would_block: Option<Option<std::time::Duration>>,
    /// … and its retries run these arguments instead (XREAD's `$`
    /// resolved to the IDs it had at the first try).
    pub(super) retry_args: Option<Vec<Vec<u8>>>,
    /// Its subscriptions, once it has subscribed.
    pub(super) subscriber: Option<Box<super::hub::Subscriber>>,
    /// The log position its last command's writes must reach on the
    /// device before it is answered (a script's deferred durability).
    pub(super) owed_durability: Option<u64>,
    /// CLIENT TRACKING on: its settings.
    pub(super) tracking: Option<super::tracking::Mode>,
    /// CLIENT REPLY: whether its replies are sent.
    pub(super) replies: super::clients::Replies,
}

/// A transaction being queued.
#[derive(Default)]
pub struct Multi {
    pub queued: Vec<Vec<Vec<u8>>>,
    /// A queued command was refused: EXEC aborts.
    pub refused: bool,
}

/// A watched key and its version when watched (`None`: absent).
pub struct Watched {
    pub db: usize,
    pub key: Vec<u8>,
    pub version: Option<u64>,
    /// The key's write stamp when watched (`RespStore::write_stamp`).
    pub stamp: u64,
}

impl Shared {
    /// Whether an event of `class` would reach anyone now (a command may
    /// skip working out its events otherwise).
    pub fn notifies(&self, class: u32) -> bool {
        self.notify.wanted(class) && self.hub.any()
    }

    /// The events of a command storing a computed result at `key`
    /// (SINTERSTORE, ZUNIONSTORE, ZRANGESTORE, GEOSEARCHSTORE, BITOP):
    /// `event` when the result had elements, else `del` if that removed
    /// the key.
    pub fn notify_stored(
        &self,
        class: u32,
        event: &str,
        db: usize,
        key: &[u8],
        elements: usize,
        done: nvdepot_cache::resp::Updated,
    ) {
        if elements > 0 {
            self.notify(class, event, db, key);
        } else if done == nvdepot_cache::resp::Updated::Deleted {
            self.notify(super::notify::GENERIC, "del", db, key);
        }
    }

    /// The events of a command that removed elements from a collection
    /// (HDEL, SREM, LPOP, ZREM, …): `event` of `class` if it removed any,
    /// then `del` if that left the key empty (Redis deletes an emptied
    /// collection). Whether it did is read after the write, only when
    /// `del` events are wanted: exact unless another client writes the
    /// key in between (then the `del` may be missed or doubled).
    pub async fn notify_removal(
        &self,
        class: u32,
        event: &str,
        db: usize,
        key: &[u8],
        removed: bool,
        now: u64,
    ) {
        if !removed {
            return;
        }
        self.notify(class, event, db, key);
        if self.notifies(super::notify::GENERIC) {
            if let Ok(None) = self.store.get(db, key, now).await {
                self.notify(super::notify::GENERIC, "del", db, key);
            }
        }
    }
}
