//! MIGRATE (Redis 7.0's `migrateCommand`, `cluster.c`): moves keys to
//! another server (redis-server or nvdepot) as RESTORE commands carrying
//! their DUMP payloads, then deletes each one the target stored (unless
//! COPY). What `redis-cli --cluster import`, resharding scripts and
//! ad-hoc moves between instances send.
//!
//! As in Redis, the command runs holding the whole server (here: the
//! exclusive pass of the isolation gate) until the target has answered
//! or the timeout passed, so no command sees a key between its copy and
//! its deletion; a key is deleted here only once the target answered its
//! RESTORE with success (durably stored, if the target is nvdepot). The
//! network part runs on a thread of its own, so the worker's other
//! connections go on being received (they wait at the gate).
//!
//! Connections are cached per target as Redis caches them (at most 64,
//! each closed after 10 s unused, and on any socket error), remembering
//! the database last SELECTed there; a send or a read that fails other
//! than by the timeout, before the target answered anything, is retried
//! once on a new connection. Replies are Redis's: `+NOKEY` when no key
//! exists, `-IOERR error or timeout connecting to the client`, `-IOERR
//! error or timeout writing|reading to target instance`, and the first
//! error the target answers as `-ERR Target instance replied with error:
//! …` (the keys it did store are deleted here all the same).

use std::future::Future;
use std::net::{TcpStream, ToSocketAddrs};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use nvdepot_cache::resp::Change;
use nvdepot_cache::Error;
use nvdepot_resp::{errors, Reply, Value};

use super::args::{arity, int_arg};
use super::node_client::{encode, Cached, Client, Sockets};
use super::session::Shared;

/// What the network part sends: one RESTORE per key.
struct Transfer {
    host: String,
    port: String,
    db: i64,
    timeout: Duration,
    /// AUTH's arguments (AUTH2's user first).
    auth: Vec<Vec<u8>>,
    /// RESTORE-ASKING in cluster mode, as Redis.
    asking: bool,
    replace: bool,
    /// Key, TTL in ms (0: none) and DUMP payload.
    items: Vec<(Vec<u8>, u64, Vec<u8>)>,
}

/// `MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE]
/// [AUTH password | AUTH2 username password] [KEYS key…]`.
pub async fn migrate(
    shared: &Shared,
    db: usize,
    args: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    if !arity(args, 6, None, r) {
        return Ok(());
    }
    let (mut copy, mut replace, mut auth) = (false, false, Vec::new());
    let mut keys = &args[3..4];
    let mut j = 6;
    while j < args.len() {
        let more = args.len() - 1 - j;
        let a = args[j];
        if a.eq_ignore_ascii_case(b"COPY") {
            copy = true;
        } else if a.eq_ignore_ascii_case(b"REPLACE") {
            replace = true;
        } else if a.eq_ignore_ascii_case(b"AUTH") && more >= 1 {
            auth = vec![args[j + 1].to_vec()];
            j += 1;
        } else if a.eq_ignore_ascii_case(b"AUTH2") && more >= 2 {
            auth = vec![args[j + 1].to_vec(), args[j + 2].to_vec()];
            j += 2;
        } else if a.eq_ignore_ascii_case(b"KEYS") {
            if !args[3].is_empty() {
                r.error(
                    "ERR When using MIGRATE KEYS option, the key argument must be set to the \
                     empty string",
                );
                return Ok(());
            }
            keys = &args[j + 1..];
            break;
        } else {
            r.error(errors::SYNTAX);
            return Ok(());
        }
        j += 1;
    }
    let (Some(timeout), Some(target_db)) = (int_arg(args[5]), int_arg(args[4])) else {
        r.error(errors::NOT_INTEGER);
        return Ok(());
    };
    let timeout = if timeout <= 0 { 1000 } else { timeout };
    let store = &shared.store;
    let mut items = Vec::new();
    let mut versions = Vec::new();
    for &key in keys {
        let Some(v) = store.get(db, key, now).await? else {
            continue;
        };
        let at = v.expire_at_ms();
        if at != 0 && at < now {
            continue;
        }
        let ttl = if at == 0 { 0 } else { (at - now).max(1) };
        let object = super::restore::object_of(store, db, key, &v).await?;
        items.push((key.to_vec(), ttl, super::dump::seal(object.encode())));
        versions.push(v.version());
    }
    if items.is_empty() {
        r.simple("NOKEY");
        return Ok(());
    }
    let transfer = Transfer {
        host: String::from_utf8_lossy(args[1]).into_owned(),
        port: String::from_utf8_lossy(args[2]).into_owned(),
        db: target_db,
        timeout: Duration::from_millis(timeout as u64),
        auth,
        asking: shared.cluster.is_some(),
        replace,
        items,
    };
    let sockets = Arc::clone(&shared.migrate_sockets);
    let (transfer, outcome) = on_thread(move || {
        let outcome = transfer.run(&sockets);
        (transfer, outcome)
    })
    .map_err(|e| Error::Envelope(format!("MIGRATE could not start its thread: {e}")))?
    .await;
    let (reply, stored) = outcome;
    if !copy {
        // As Redis's dbDelete of each key the target stored.
        let moved = transfer.items.iter().zip(&versions).zip(&stored);
        for (((key, _, _), &version), _) in moved.filter(|(_, &s)| s) {
            let (gone, _) = store
                .update(db, key, now, |cur| match cur {
                    Some(c) if c.version() == version => (Change::Delete, true),
                    _ => (Change::Keep, false),
                })
                .await?;
            if gone {
                shared.notify(super::notify::GENERIC, "del", db, key);
            }
        }
    }
    match reply {
        Ok(()) => r.ok(),
        Err(e) => r.error(e),
    }
    Ok(())
}

impl Transfer {
    /// Sends the RESTOREs and reads their replies: the reply to give
    /// (`Err`: an error's text) and which keys the target stored.
    fn run(&self, sockets: &Sockets) -> (Result<(), String>, Vec<bool>) {
        let addr = format!("{}:{}", self.host, self.port);
        let mut may_retry = true;
        loop {
            let mut conn = match sockets.take(&addr) {
                Some(c) => c,
                None => match self.connect() {
                    Connected::Yes(client) => Cached {
                        client,
                        db: None,
                        used: Instant::now(),
                    },
                    // Redis connects without blocking and learns of a
                    // refusal when it writes: a write error (retried).
                    Connected::Refused => {
                        if std::mem::take(&mut may_retry) {
                            continue;
                        }
                        return (Err(io_error("writing")), Vec::new());
                    }
                    Connected::No => {
                        let e = "IOERR error or timeout connecting to the client";
                        return (Err(e.into()), Vec::new());
                    }
                },
            };
            let stream = conn.client.stream();
            let _ = stream.set_read_timeout(Some(self.timeout));
            let _ = stream.set_write_timeout(Some(self.timeout));
            let select = conn.db != Some(self.db);
            let mut cmd = Vec::new();
            if !self.auth.is_empty() {
                let mut a: Vec<&[u8]> = vec![b"AUTH"];
                a.extend(self.auth.iter().map(Vec::as_slice));
                encode(&mut cmd, &a);
            }
            let db = self.db.to_string();
            if select {
                encode(&mut cmd, &[b"SELECT", db.as_bytes()]);
            }
            let restore: &[u8] = if self.asking {
                b"RESTORE-ASKING"
            } else {
                b"RESTORE"
            };
            for (key, ttl, payload) in &self.items {
                let ttl = ttl.to_string();
                let mut a: Vec<&[u8]> = vec![restore, key, ttl.as_bytes(), payload];
                if self.replace {
                    a.push(b"REPLACE");
                }
                encode(&mut cmd, &a);
            }
            let mut stored = vec![false; self.items.len()];
            if conn.client.send(&cmd).is_err() {
                if !conn.client.timed_out && std::mem::take(&mut may_retry) {
                    continue;
                }
                return (Err(io_error("writing")), stored);
            }
            // The AUTH and SELECT replies: an error in either fails every
            // key, as Redis checks them with each RESTORE's.
            let preamble = usize::from(!self.auth.is_empty()) + usize::from(select);
            let mut first_error = None;
            let mut preamble_failed = false;
            for _ in 0..preamble {
                match conn.client.read() {
                    Ok(Value::Error(e)) => {
                        first_error.get_or_insert(e);
                    }
                    Ok(_) => {}
                    Err(_) => {
                        preamble_failed = true;
                        break;
                    }
                }
            }
            if preamble_failed {
                if !conn.client.timed_out && std::mem::take(&mut may_retry) {
                    continue;
                }
                return (Err(io_error("reading")), stored);
            }
            let preamble_error = first_error.is_some();
            let mut read = 0;
            let mut socket_error = false;
            for s in stored.iter_mut() {
                match conn.client.read() {
                    Err(_) => {
                        socket_error = true;
                        break;
                    }
                    Ok(Value::Error(e)) => {
                        first_error.get_or_insert(e);
                    }
                    Ok(_) => *s = !preamble_error,
                }
                read += 1;
            }
            // Retried only if nothing was answered (nothing stored).
            let unanswered = first_error.is_none() && socket_error && read == 0;
            if unanswered && !conn.client.timed_out && std::mem::take(&mut may_retry) {
                continue;
            }
            let reply = match first_error {
                Some(e) => Err(format!(
                    "ERR Target instance replied with error: {}",
                    String::from_utf8_lossy(&e)
                )),
                None if socket_error => Err(io_error("reading")),
                None => Ok(()),
            };
            if !socket_error {
                // After an error the database SELECTed there is not known.
                conn.db = reply.is_ok().then_some(self.db);
                sockets.keep(addr, conn);
            }
            return (reply, stored);
        }
    }

    /// A new connection to the target, within the timeout.
    fn connect(&self) -> Connected {
        // The port as C's `atoi` reads it, as Redis does.
        let digits = self.port.bytes().take_while(u8::is_ascii_digit);
        let port = digits.fold(0u16, |p, d| {
            p.wrapping_mul(10).wrapping_add(u16::from(d - b'0'))
        });
        let Ok(addrs) = (self.host.as_str(), port).to_socket_addrs() else {
            return Connected::No;
        };
        let mut refused = false;
        for a in addrs {
            match TcpStream::connect_timeout(&a, self.timeout) {
                Ok(s) => return Connected::Yes(Client::over(s)),
                Err(e) => refused |= e.kind() == std::io::ErrorKind::ConnectionRefused,
            }
        }
        if refused {
            Connected::Refused
        } else {
            Connected::No
        }
    }
}

enum Connected {
    Yes(Client),
    /// Refused (nothing listens there).
    Refused,
    /// Not resolved, unreachable, or not within the timeout.
    No,
}

fn io_error(doing: &str) -> String {
    format!("IOERR error or timeout {doing} to target instance")
}

/// Runs `work` on a thread of its own; the future is its result.
fn on_thread<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<OnThread<T>, std::io::Error> {
    let slot = Arc::new(Mutex::new(Slot {
        result: None,
        waker: None,
    }));
    let theirs = Arc::clone(&slot);
    std::thread::Builder::new()
        .name("serve-migrate-keys".into())
        .spawn(move || {
            let result = work();
            let mut s = theirs.lock().unwrap_or_else(|e| e.into_inner());
            s.result = Some(result);
            if let Some(w) = s.waker.take() {
                w.wake();
            }
        })?;
    Ok(OnThread { slot })
}

struct Slot<T> {
    result: Option<T>,
    waker: Option<Waker>,
}

struct OnThread<T> {
    slot: Arc<Mutex<Slot<T>>>,
}

impl<T> Future for OnThread<T> {
    type Output = T;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let mut s = self.slot.lock().unwrap_or_else(|e| e.into_inner());
        match s.result.take() {
            Some(r) => Poll::Ready(r),
            None => {
                s.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}
