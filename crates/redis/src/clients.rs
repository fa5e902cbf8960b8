//! The connections of `nvdepot serve` as Redis's `CLIENT` command sees
//! them: a registry of every open connection (`CLIENT LIST`, `CLIENT
//! KILL`), and the `CLIENT` subcommands.
//!
//! A connection's own state stays in its session (read on every command
//! without a lock); the registry holds what other connections may ask
//! about, published as each command starts (an uncontended lock and a
//! clock read).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Instant;

use nvdepot_resp::{errors, Reply, Version};
use nvdepot_server::{Closer, Connection, Probe};
use parking_lot::Mutex;

use super::blocking::{Cancel, Waiter};
use super::face::RespSession;

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

    fn all(&self) -> Vec<Arc<Client>> {
        self.map.lock().values().cloned().collect()
    }
}

/// What other connections can see of one connection.
pub struct Client {
    pub id: u64,
    /// The server kit's number for it (what its closer takes).
    conn: u64,
    addr: SocketAddr,
    laddr: Option<SocketAddr>,
    closer: Closer,
    /// Whether its peer is gone (checked by a blocked client).
    pub(super) probe: Probe,
    /// Its wait, while it is blocked (CLIENT KILL and UNBLOCK end it).
    pub(super) blocked: Mutex<Option<Arc<Waiter>>>,
    created: Instant,
    /// Milliseconds after `created` of its last command.
    last_ms: AtomicU64,
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

    /// Its line of `CLIENT LIST` (Redis 7.0's fields; the buffer fields,
    /// which the server kit does not track per connection, are 0).
    fn line(&self, out: &mut String) {
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

/// Which connections a `CLIENT KILL` with filters closes.
#[derive(Default)]
struct KillFilter {
    id: Option<u64>,
    addr: Option<Vec<u8>>,
    laddr: Option<Vec<u8>>,
    /// `TYPE` other than `normal`: no connection of this server is one.
    none: bool,
    skip_me: bool,
}

impl KillFilter {
    fn matches(&self, c: &Client, me: u64) -> bool {
        !(self.none || self.skip_me && c.id == me)
            && self.id.is_none_or(|id| c.id == id)
            && self
                .addr
                .as_ref()
                .is_none_or(|a| c.addr.to_string().as_bytes() == a.as_slice())
            && self.laddr.as_ref().is_none_or(|a| {
                c.laddr
                    .is_some_and(|l| l.to_string().as_bytes() == a.as_slice())
            })
    }
}

/// `CLIENT KILL`'s and `CLIENT LIST`'s `TYPE`: whether a normal client is
/// one, or Redis's error for an unknown type.
fn client_type(t: &[u8]) -> Result<bool, String> {
    match t.to_ascii_lowercase().as_slice() {
        b"normal" => Ok(true),
        b"master" | b"replica" | b"slave" | b"pubsub" => Ok(false),
        _ => Err(format!(
            "ERR Unknown client type '{}'",
            String::from_utf8_lossy(t)
        )),
    }
}

impl RespSession {
    pub(super) fn client(&mut self, args: &[&[u8]], r: &mut Reply<'_>) {
        let Some(sub) = args.get(1).map(|a| a.to_ascii_uppercase()) else {
            r.error(errors::wrong_arity(args[0]));
            return;
        };
        match (sub.as_slice(), args.len()) {
            (b"SETNAME", 3) => {
                if args[2].iter().any(|&b| b <= b' ' || b > b'~') {
                    r.error(
                        "ERR Client names cannot contain spaces, newlines or special characters.",
                    );
                } else {
                    self.client.set_name(args[2].to_vec());
                    r.ok();
                }
            }
            (b"GETNAME", 2) => {
                let name = self.client.name();
                if name.is_empty() {
                    r.null();
                } else {
                    r.bulk(&name);
                }
            }
            (b"ID", 2) => r.integer(self.client.id as i64),
            (b"SETINFO", 4) => r.ok(),
            (b"INFO", 2) => {
                let mut text = String::new();
                self.client.line(&mut text);
                r.verbatim("txt", text.as_bytes());
            }
            (b"LIST", _) => self.client_list(args, r),
            (b"TRACKING", n) if n >= 3 => self.client_tracking(args, r),
            (b"CACHING", n) if n >= 3 => self.client_caching(args, r),
            (b"GETREDIR", 2) => self.client_getredir(r),
            (b"TRACKINGINFO", 2) => self.client_trackinginfo(r),
            (b"KILL", n) if n >= 3 => self.client_kill(args, r),
            (b"UNBLOCK", 3 | 4) => self.client_unblock(args, r),
            (b"SETNAME" | b"GETNAME" | b"ID" | b"SETINFO" | b"INFO" | b"KILL", _) => {
                r.error(errors::wrong_sub_arity("client", args[1]));
            }
            (s, _) if self.client_admin(s, args, r) => {}
            _ => r.error(errors::unknown_subcommand("CLIENT", args[1])),
        }
    }

    /// `CLIENT UNBLOCK id [TIMEOUT|ERROR]`: ends a blocked client's wait
    /// as if its timeout passed, or with an error; 1 if it was blocked.
    fn client_unblock(&mut self, args: &[&[u8]], r: &mut Reply<'_>) {
        let Some(id) = super::keys::int_arg(args[2]) else {
            return r.error(errors::NOT_INTEGER);
        };
        let why = match args.get(3).map(|a| a.to_ascii_uppercase()).as_deref() {
            None | Some(b"TIMEOUT") => Cancel::Timeout,
            Some(b"ERROR") => Cancel::Error,
            Some(_) => {
                return r.error("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR");
            }
        };
        let target = self
            .shared
            .clients
            .all()
            .into_iter()
            .find(|c| c.id as i64 == id);
        let waiter = target.and_then(|c| c.blocked.lock().clone());
        match waiter {
            Some(w) => {
                w.cancel(why);
                r.integer(1);
            }
            None => r.integer(0),
        }
    }

    /// `CLIENT LIST [TYPE type] [ID id …]`.
    fn client_list(&mut self, args: &[&[u8]], r: &mut Reply<'_>) {
        let mut ids: Option<Vec<u64>> = None;
        let mut normal = true;
        match args.get(2).map(|a| a.to_ascii_uppercase()).as_deref() {
            None => {}
            Some(b"TYPE") if args.len() == 4 => match client_type(args[3]) {
                Ok(n) => normal = n,
                Err(e) => return r.error(&e),
            },
            Some(b"ID") if args.len() >= 4 => {
                let mut list = Vec::new();
                for a in &args[3..] {
                    match super::keys::int_arg(a) {
                        Some(id) if id > 0 => list.push(id as u64),
                        _ => return r.error("ERR Invalid client ID"),
                    }
                }
                ids = Some(list);
            }
            Some(_) => return r.error(errors::SYNTAX),
        }
        let mut text = String::new();
        if normal {
            for c in self.shared.clients.all() {
                if ids.as_ref().is_none_or(|l| l.contains(&c.id)) {
                    c.line(&mut text);
                }
            }
        }
        r.verbatim("txt", text.as_bytes());
    }

    /// `CLIENT KILL addr:port` (answers OK or an error), or `CLIENT KILL`
    /// with filters (answers how many it closed). A connection closed by
    /// another ends when its current request, if any, has been answered;
    /// the calling connection closes after this reply.
    fn client_kill(&mut self, args: &[&[u8]], r: &mut Reply<'_>) {
        let me = self.client.id;
        let mut f = KillFilter {
            skip_me: true,
            ..KillFilter::default()
        };
        let old_form = args.len() == 3;
        if old_form {
            f.addr = Some(args[2].to_vec());
            f.skip_me = false;
        } else {
            if !args.len().is_multiple_of(2) {
                return r.error(errors::SYNTAX);
            }
            for pair in args[2..].chunks(2) {
                let value = pair[1];
                match pair[0].to_ascii_uppercase().as_slice() {
                    b"ID" => match super::keys::int_arg(value) {
                        Some(id) if id > 0 => f.id = Some(id as u64),
                        _ => return r.error("ERR client-id should be greater than 0"),
                    },
                    b"ADDR" => f.addr = Some(value.to_vec()),
                    b"LADDR" => f.laddr = Some(value.to_vec()),
                    b"TYPE" => match client_type(value) {
                        Ok(normal) => f.none |= !normal,
                        Err(e) => return r.error(&e),
                    },
                    b"USER" => {
                        if value != b"default" {
                            return r.error(format!(
                                "ERR No such user '{}'",
                                String::from_utf8_lossy(value)
                            ));
                        }
                    }
                    b"SKIPME" => match value.to_ascii_lowercase().as_slice() {
                        b"yes" => f.skip_me = true,
                        b"no" => f.skip_me = false,
                        _ => return r.error(errors::SYNTAX),
                    },
                    _ => return r.error(errors::SYNTAX),
                }
            }
        }
        let mut killed = 0;
        for c in self.shared.clients.all() {
            if f.matches(&c, me) {
                if c.id == me {
                    self.close = true;
                    killed += 1;
                } else if c.closer.close(c.conn) {
                    // A blocked client ends its wait at once.
                    if let Some(w) = c.blocked.lock().as_ref() {
                        w.cancel(Cancel::Killed);
                    }
                    // Gone from CLIENT LIST at once, as in Redis, though
                    // its task ends a moment later.
                    self.shared.clients.close(c.id);
                    killed += 1;
                }
            }
        }
        match (old_form, killed) {
            (true, 0) => r.error("ERR No such client"),
            (true, _) => r.ok(),
            (false, n) => r.integer(n),
        }
    }
}
