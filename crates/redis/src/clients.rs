//! The connections of `nvdepot serve` as Redis's `CLIENT` command sees
//! them: a registry of every open connection (`CLIENT LIST`, `CLIENT
//! KILL`), `CLIENT PAUSE`'s state and a connection's `CLIENT REPLY` mode.
//! The `CLIENT` subcommands are in `client_command.rs` and `admin.rs`.
//!
//! A connection's own state stays in its session (read on every command
//! without a lock); the registry holds what other connections may ask
//! about, published as each command starts (an uncontended lock and a
//! clock read).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use nvdepot_cache::resp::unix_now_ms;
use std::time::Instant;

use nvdepot_resp::Version;
use nvdepot_server::{Closer, Connection, Probe};
use parking_lot::Mutex;

use super::blocked::{Cancel, Waiter};

/// Every open connection, by client id.
#[derive(Default)]
pub struct Clients {
    map: Mutex<BTreeMap<u64, Arc<Client>>>,
    next_id: AtomicU64,
}

impl Clients {
    /// Registers a new connection under the next client id.
    pub(super) fn open(&self, conn: &Connection) -> Arc<Client> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let client = Arc::new(Client {
            id,
            conn: conn.id,
            addr: conn.peer,
            laddr: conn.local,
            closer: conn.closer.clone(),
            probe: conn.probe,
            blocked: Mutex::new(None),
            created: Instant::now(),
            last_ms: AtomicU64::new(0),
            busy: AtomicBool::new(false),
            db: AtomicU64::new(0),
            resp: AtomicU8::new(2),
            multi: AtomicI64::new(-1),
            name: Mutex::new(Vec::new()),
            cmd: Mutex::new(b"NULL".to_vec()),
            subs: AtomicU64::new(0),
            ssubs: AtomicU64::new(0),
        });
        self.map.lock().insert(id, Arc::clone(&client));
        client
    }

    /// Removes a closed connection.
    pub(super) fn close(&self, id: u64) {
        self.map.lock().remove(&id);
    }

    /// Whether a connection with client id `id` is open.
    pub(super) fn exists(&self, id: i64) -> bool {
        u64::try_from(id).is_ok_and(|id| self.map.lock().contains_key(&id))
    }

    /// Connections now blocked (BLPOP and the rest), for INFO.
    pub(super) fn blocked(&self) -> usize {
        let map = self.map.lock();
        map.values().filter(|c| c.blocked.lock().is_some()).count()
    }

    pub(super) fn all(&self) -> Vec<Arc<Client>> {
        self.map.lock().values().cloned().collect()
    }

    /// Closes the connections idle for more than `timeout_ms` (CONFIG
    /// `timeout`), as Redis's `clientsCronHandleTimeout`: not one that is
    /// blocked (its own timeout rules), subscribed, or monitoring
    /// (`monitoring(id)`), nor one running a command. How many it closed.
    pub(super) fn close_idle(&self, timeout_ms: u64, monitoring: impl Fn(u64) -> bool) -> usize {
        let mut closed = 0;
        for c in self.all() {
            let idle = c.idle_ms().is_some_and(|ms| ms > timeout_ms);
            let subscribed =
                c.subs.load(Ordering::Relaxed) != 0 || c.ssubs.load(Ordering::Relaxed) != 0;
            if idle && !subscribed && c.blocked.lock().is_none() && !monitoring(c.id) && c.kill() {
                tracing::debug!("closing idle client id={} addr={}", c.id, c.addr);
                closed += 1;
            }
        }
        closed
    }
}

/// What other connections can see of one connection.
pub struct Client {
    pub id: u64,
    /// The server kit's number for it (what its closer takes).
    pub(super) conn: u64,
    addr: SocketAddr,
    pub(super) laddr: Option<SocketAddr>,
    pub(super) closer: Closer,
    /// Whether its peer is gone (checked by a blocked client).
    pub(super) probe: Probe,
    /// Its wait, while it is blocked (CLIENT KILL and UNBLOCK end it).
    pub(super) blocked: Mutex<Option<Arc<Waiter>>>,
    created: Instant,
    /// Milliseconds after `created` of its last command's start or end.
    last_ms: AtomicU64,
    /// A command of its is running (never closed as idle then).
    busy: AtomicBool,
    db: AtomicU64,
    resp: AtomicU8,
    /// Commands queued in MULTI, or -1 outside one.
    multi: AtomicI64,
    name: Mutex<Vec<u8>>,
    /// Its last command, as `CLIENT LIST` names it (`client|list`).
    cmd: Mutex<Vec<u8>>,
    /// Channels (low half) and patterns (high half) subscribed to.
    subs: AtomicU64,
    /// Shard channels subscribed to.
    ssubs: AtomicU64,
}

impl Client {
    pub(super) fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub(super) fn name(&self) -> Vec<u8> {
        self.name.lock().clone()
    }

    pub(super) fn set_name(&self, name: Vec<u8>) {
        *self.name.lock() = name;
    }

    pub(super) fn set_db(&self, db: usize) {
        self.db.store(db as u64, Ordering::Relaxed);
    }

    /// Its subscriptions' counts (`CLIENT LIST`'s sub, psub, ssub).
    pub(super) fn set_subscriptions(&self, channels: usize, patterns: usize, shard: usize) {
        let pack = |n: usize| n.min(u32::MAX as usize) as u64;
        self.subs
            .store(pack(channels) | pack(patterns) << 32, Ordering::Relaxed);
        self.ssubs.store(pack(shard), Ordering::Relaxed);
    }

    /// Closes its connection, as `CLIENT KILL` does (ending a wait).
    pub(super) fn kill(&self) -> bool {
        if let Some(w) = self.blocked.lock().as_ref() {
            w.cancel(Cancel::Killed);
        }
        self.closer.close(self.conn)
    }

    pub(super) fn set_version(&self, v: Version) {
        let n = if v == Version::Resp3 { 3 } else { 2 };
        self.resp.store(n, Ordering::Relaxed);
    }

    /// Publishes the command starting now (`args`: its name and, for a
    /// container command, its subcommand) and the transaction state.
    pub(super) fn executed(&self, args: &[&[u8]], multi: Option<usize>) {
        let ms = self.created.elapsed().as_millis() as u64;
        self.last_ms.store(ms, Ordering::Relaxed);
        self.busy.store(true, Ordering::Relaxed);
        self.multi
            .store(multi.map_or(-1, |n| n as i64), Ordering::Relaxed);
        let mut cmd = self.cmd.lock();
        cmd.clear();
        cmd.extend(args[0].iter().map(u8::to_ascii_lowercase));
        if let Some(sub) = args.get(1) {
            if is_container(args[0]) {
                cmd.push(b'|');
                cmd.extend(sub.iter().map(u8::to_ascii_lowercase));
            }
        }
    }

    /// Its command ended (its reply composed): idle from now.
    pub(super) fn finished(&self) {
        let ms = self.created.elapsed().as_millis() as u64;
        self.last_ms.store(ms, Ordering::Relaxed);
        self.busy.store(false, Ordering::Relaxed);
    }

    /// Milliseconds since its last command started or ended (or since it
    /// connected); `None` while a command of its runs.
    fn idle_ms(&self) -> Option<u64> {
        if self.busy.load(Ordering::Relaxed) {
            return None;
        }
        let now = self.created.elapsed().as_millis() as u64;
        Some(now.saturating_sub(self.last_ms.load(Ordering::Relaxed)))
    }

    /// Its line of `CLIENT LIST` (Redis 7.0's fields; the buffer fields,
    /// which the server kit does not track per connection, are 0).
    pub(super) fn line(&self, out: &mut String) {
        let age = self.created.elapsed();
        let idle = age
            .as_millis()
            .saturating_sub(self.last_ms.load(Ordering::Relaxed) as u128)
            / 1000;
        let multi = self.multi.load(Ordering::Relaxed);
        let laddr = self.laddr.map_or_else(String::new, |a| a.to_string());
        let (subs, ssubs) = (
            self.subs.load(Ordering::Relaxed),
            self.ssubs.load(Ordering::Relaxed),
        );
        let flags = match (multi >= 0, subs != 0 || ssubs != 0) {
            (true, _) => "x",
            (false, true) => "P",
            (false, false) => "N",
        };
        let _ = writeln!(
            out,
            "id={} addr={} laddr={laddr} fd=-1 name={} age={} idle={idle} flags={} db={} \
             sub={} psub={} ssub={} multi={multi} qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 \
             rbs=0 rbp=0 obl=0 oll=0 omem=0 tot-mem=0 events=r cmd={} user=default \
             redir=-1 resp={}",
            self.id,
            self.addr,
            String::from_utf8_lossy(&self.name.lock()),
            age.as_secs(),
            flags,
            self.db.load(Ordering::Relaxed),
            subs & u64::from(u32::MAX),
            subs >> 32,
            ssubs,
            String::from_utf8_lossy(&self.cmd.lock()),
            self.resp.load(Ordering::Relaxed),
        );
    }
}

/// Commands whose first argument is a subcommand (`CLIENT LIST` is
/// `client|list` in Redis's listings and errors).
pub(super) fn is_container(name: &[u8]) -> bool {
    let container = [
        &b"client"[..],
        b"config",
        b"command",
        b"cluster",
        b"debug",
        b"pubsub",
        b"object",
        b"script",
        b"function",
        b"xinfo",
        b"xgroup",
    ];
    container.iter().any(|c| c.eq_ignore_ascii_case(name))
}

/// `CLIENT PAUSE`: until when, and whether every command waits or only
/// the writes.
#[derive(Default)]
pub struct Pause {
    pub(super) until_ms: AtomicU64,
    pub(super) all: AtomicBool,
}

impl Pause {
    /// Whether a command (`write`: it may change data) waits now.
    pub(super) fn holds(&self, write: bool) -> bool {
        let until = self.until_ms.load(Ordering::Acquire);
        until != 0 && unix_now_ms() < until && (write || self.all.load(Ordering::Relaxed))
    }
}

/// What `CLIENT REPLY` asked for this connection's replies.
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub enum Replies {
    #[default]
    On,
    Off,
    /// The next command's reply is dropped.
    Skip,
    /// This command's reply is dropped (the one after `SKIP`).
    Skipping,
}
