//! The Redis-protocol face: the `nvdepot_resp` protocol crate served by the
//! server kit over the cache layer's Redis binding (`RespStore`). This file
//! holds the dispatch (authentication, the gate, cluster routing, MULTI,
//! blocking, BUSY scripts) and the connection and server commands; the
//! state they run against is in `session.rs`, the data commands are
//! dispatched by `keys::execute`.

use std::borrow::Cow;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use nvdepot_cache::resp::{unix_now_ms, RespStore};
use nvdepot_resp::{errors, parse_command, Parsed, Reply, Version};
use nvdepot_server::{Connection, Face, Fed, Session, Shutdown, OUTPUT_PAUSE_BYTES};

use super::args::{arity, upper};
use super::clients::Clients;
use super::cluster::{self, Cluster};
use super::gate::Gate;
use super::keys;
use super::session::{Config, Counters, RespSession, Shared, REDIS_VERSION};

/// The face the kit serves.
pub struct RespFace(Arc<Shared>);

impl RespFace {
    pub fn new(
        store: Arc<RespStore>,
        config: Config,
        cluster: Option<Arc<Cluster>>,
        shutdown: Shutdown,
    ) -> RespFace {
        let counters = Counters::default();
        counters.started_ms.store(unix_now_ms(), Ordering::Relaxed);
        let shared = Arc::new(Shared {
            store,
            config,
            counters,
            gate: Gate::default(),
            cluster,
            clients: Clients::default(),
            tunables: Default::default(),
            blocked: Default::default(),
            hub: Default::default(),
            scripts: Default::default(),
            notify: Default::default(),
            tracking: Default::default(),
            observed: Default::default(),
            pause: Default::default(),
            monitors: Default::default(),
            migrate_sockets: Default::default(),
            shutdown,
        });
        shared.observed.configure(&shared.tunables);
        let timeout = shared.config.timeout_secs.to_string();
        match super::tunables::Tunables::check("timeout", timeout.as_bytes()) {
            Ok(v) => shared.tunables.set(&[v]),
            Err(e) => tracing::warn!("--timeout {timeout}: {e}"),
        }
        let weak = Arc::downgrade(&shared);
        shared.store.on_expired(Box::new(move |db, key| {
            if let Some(shared) = weak.upgrade() {
                shared.counters.expired.fetch_add(1, Ordering::Relaxed);
                shared.notify(super::notify::EXPIRED, "expired", db, key);
            }
        }));
        let weak = Arc::downgrade(&shared);
        shared.store.on_missed(Box::new(move |db, key| {
            if let Some(shared) = weak.upgrade() {
                shared.notify(super::notify::KEY_MISS, "keymiss", db, key);
            }
        }));
        let weak = Arc::downgrade(&shared);
        shared.store.on_created(Box::new(move |db, key| {
            if let Some(shared) = weak.upgrade() {
                shared.notify(super::notify::NEW, "new", db, key);
            }
        }));
        // Every write calls this: the tracking table directly (one atomic
        // load while no client tracks), not through a weak `Shared`.
        let tracking = Arc::clone(&shared.tracking);
        shared
            .store
            .on_modified(Box::new(move |_db, key| tracking.changed(key)));
        start_clients_cron(Arc::downgrade(&shared));
        RespFace(shared)
    }
}

/// Once a second, as Redis's `clientsCron`: closes the clients idle past
/// CONFIG `timeout` (0: none). Ends with the server's state.
fn start_clients_cron(shared: std::sync::Weak<Shared>) {
    let cron = move || loop {
        std::thread::sleep(std::time::Duration::from_secs(1));
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let timeout = shared.tunables.value("timeout");
        if timeout > 0 {
            let monitors = &shared.monitors;
            let timeout_ms = timeout as u64 * 1000;
            shared
                .clients
                .close_idle(timeout_ms, |id| monitors.contains(id));
        }
    };
    if let Err(e) = std::thread::Builder::new()
        .name("serve-clients-cron".into())
        .spawn(cron)
    {
        tracing::warn!("no clients cron (CONFIG timeout has no effect): {e}");
    }
}

const TOO_MANY: &[u8] = b"-ERR max number of clients reached\r\n";
const TOO_LARGE: &[u8] = b"-ERR Protocol error: too big request\r\n";

impl Face for RespFace {
    type Session = RespSession;

    fn name(&self) -> &'static str {
        "resp"
    }

    fn session(&self, conn: &Connection) -> RespSession {
        RespSession {
            shared: Arc::clone(&self.0),
            db: 0,
            version: Version::Resp2,
            authed: self.0.config.password.is_none(),
            client: self.0.clients.open(conn),
            close: false,
            multi: None,
            watched: Vec::new(),
            asking: false,
            may_block: false,
            would_block: None,
            retry_args: None,
            subscriber: None,
            owed_durability: None,
            tracking: None,
            replies: Default::default(),
        }
    }

    fn request_bytes_max(&self) -> usize {
        // One bulk string at the limit plus room for the rest of the
        // command (an MSET of several large values is refused whole).
        self.0
            .config
            .limits
            .bulk_bytes_max
            .saturating_mul(2)
            .saturating_add(1 << 20)
    }

    fn too_many_connections(&self) -> &'static [u8] {
        TOO_MANY
    }

    fn request_too_large(&self) -> &'static [u8] {
        TOO_LARGE
    }

    fn connection_opened(&self) {
        let c = &self.0.counters;
        c.connected.fetch_add(1, Ordering::Relaxed);
        c.total_connections.fetch_add(1, Ordering::Relaxed);
    }

    fn connection_closed(&self) {
        self.0.counters.connected.fetch_sub(1, Ordering::Relaxed);
    }

    fn connection_rejected(&self) {
        self.0.counters.rejected.fetch_add(1, Ordering::Relaxed);
    }
}

impl Drop for RespSession {
    fn drop(&mut self) {
        self.shared.monitors.remove(self.client.id);
        self.unsubscribe_all();
        self.shared.tracking.closed(self.client.id);
        self.shared.clients.close(self.client.id);
    }
}

impl Session for RespSession {
    async fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> Fed {
        let mut pos = 0;
        let out_start = out.len();
        while pos < input.len() && !self.close {
            if out.len() - out_start >= OUTPUT_PAUSE_BYTES {
                // Send what is composed before answering more.
                self.end_turn(out);
                return Fed {
                    consumed: pos,
                    close: false,
                    more: true,
                };
            }
            match parse_command(&input[pos..], &self.shared.config.limits) {
                Ok(Parsed::Command(cmd, n)) => {
                    pos += n;
                    // A subscriber's messages so far go before the reply.
                    self.take_messages(out);
                    let args: Vec<&[u8]> = cmd.args.iter().map(Cow::as_ref).collect();
                    if self.shared.tracking.active() {
                        // Whose change a key's is, for NOLOOP (only then:
                        // the wrapper moves the command's future, a cost
                        // every GET paid when it was always there).
                        let id = self.client.id;
                        super::tracking::as_client(id, self.dispatch(&args, out)).await;
                    } else {
                        self.dispatch(&args, out).await;
                    }
                    if self.tracking.is_some() {
                        // Its own invalidations right after its reply, as
                        // Redis 7.0 defers them.
                        self.take_messages(out);
                    }
                }
                Ok(Parsed::Skip(n)) => pos += n,
                Ok(Parsed::Incomplete) => break,
                Err(e) => {
                    // Redis answers a protocol error and closes.
                    Reply::new(out, self.version).error(e.message());
                    return Fed {
                        consumed: input.len(),
                        close: true,
                        more: false,
                    };
                }
            }
        }
        self.end_turn(out);
        Fed {
            consumed: pos,
            close: self.close,
            more: false,
        }
    }

    async fn pushed(&mut self, out: &mut Vec<u8>) {
        self.messages(out).await
    }
}

impl RespSession {
    pub(super) fn shared(&self) -> Arc<Shared> {
        Arc::clone(&self.shared)
    }

    /// The end of a turn over the input read: BCAST invalidations of
    /// the keys its commands changed go out (one message per prefix and
    /// client, as Redis sends them before it sleeps), its own after its
    /// replies.
    fn end_turn(&mut self, out: &mut Vec<u8>) {
        if self.shared.tracking.active() {
            self.shared.tracking.broadcast();
            if self.tracking.is_some() {
                self.take_messages(out);
            }
        }
    }

    pub(super) fn version(&self) -> Version {
        self.version
    }

    /// Transaction commands and queueing inside MULTI; every other command
    /// runs holding a shared pass of the isolation gate.
    async fn dispatch(&mut self, args: &[&[u8]], out: &mut Vec<u8>) {
        use super::clients::Replies;
        let start = out.len();
        self.dispatch_replied(args, out).await;
        self.client.finished();
        match self.replies {
            Replies::On => {}
            Replies::Off => out.truncate(start),
            // Set by this command: the next one's reply is dropped.
            Replies::Skip => self.replies = Replies::Skipping,
            Replies::Skipping => {
                out.truncate(start);
                self.replies = Replies::On;
            }
        }
    }

    async fn dispatch_replied(&mut self, args: &[&[u8]], out: &mut Vec<u8>) {
        let name = upper(args[0]);
        self.client
            .executed(args, self.multi.as_ref().map(|m| m.queued.len()));
        if self.authed {
            if let Some(e) = self.subscriber_refusal(&name, args) {
                return Reply::new(out, self.version).error(e);
            }
            // The running script holds the gate: SCRIPT KILL is served
            // without it, and once the script is slow, the rest is BUSY.
            let kill = matches!(name.as_slice(), b"SCRIPT" | b"FUNCTION")
                && args.len() == 2
                && args[1].eq_ignore_ascii_case(b"KILL");
            if kill {
                let mut r = Reply::new(out, self.version);
                return super::script::script_kill(&self.shared.scripts, &mut r);
            }
            if self.shared.scripts.busy() {
                if name.as_slice() != b"SHUTDOWN" {
                    return Reply::new(out, self.version).error(super::script_state::BUSY);
                }
                // SHUTDOWN stops the script (its writes so far stay).
                self.shared
                    .scripts
                    .kill
                    .store(true, std::sync::atomic::Ordering::Release);
            }
        }
        if self.authed {
            self.wait_pause(&name, args).await;
        }
        let start = out.len();
        if self.authed && self.transaction(&name, args, out).await {
            // Shown as run (a queued command is shown when EXEC runs it).
            if matches!(
                name.as_slice(),
                b"MULTI" | b"EXEC" | b"DISCARD" | b"WATCH" | b"UNWATCH"
            ) {
                let client = &self.client;
                let addr = || client.addr().to_string();
                self.shared.monitors.feed(self.db, addr, args);
            }
            return self.pay_durability(start, out).await;
        }
        let shared = self.shared();
        let xread_block = matches!(name.as_slice(), b"XREAD" | b"XREADGROUP")
            && args.iter().any(|a| a.eq_ignore_ascii_case(b"BLOCK"));
        if super::blocking::is_blocking(&name) || xread_block {
            // Boxed, as the other rare large futures: see `Atomic::run`.
            return Box::pin(self.block(&name, args, out)).await;
        }
        if keys::needs_exclusive(&name) {
            let _pass = shared.gate.exclusive().await;
            self.execute(args, out).await;
        } else {
            let _pass = shared.gate.shared().await;
            self.execute(args, out).await;
        }
        self.pay_durability(start, out).await;
    }

    /// After a command whose writes deferred their durability (a script:
    /// see `nvdepot_engine::defer_durability`), with the gate released so
    /// that other clients' writes join the same group commit: waits for
    /// it, and answers an error instead of the reply (from `start` in
    /// `out`) if the writes cannot be made durable.
    async fn pay_durability(&mut self, start: usize, out: &mut Vec<u8>) {
        let Some(lsn) = self.owed_durability.take() else {
            return;
        };
        let engine = self.shared.store.cache().engine();
        if let Err(e) = engine.wait_durable_async(lsn).await {
            out.truncate(start);
            Reply::new(out, self.version).error(format!(
                "ERR the script's writes could not be made durable: {e}"
            ));
        }
    }

    /// Runs one command (the caller holds a pass of the gate), then
    /// remembers its keys for client tracking.
    pub(super) async fn execute(&mut self, args: &[&[u8]], out: &mut Vec<u8>) {
        let (start, began) = (out.len(), std::time::Instant::now());
        self.run(args, out).await;
        let usec = began.elapsed().as_micros() as u64;
        let client = &self.client;
        self.shared.observed.record(
            super::commands::index(&upper(args[0])),
            args,
            usec,
            out.get(start..).unwrap_or_default(),
            || (client.addr().to_string(), client.name()),
        );
        self.shared
            .monitors
            .feed(self.db, || client.addr().to_string(), args);
        if self.tracking.is_some() {
            self.tracked(&upper(args[0]), args);
        }
    }

    async fn run(&mut self, args: &[&[u8]], out: &mut Vec<u8>) {
        let shared = Arc::clone(&self.shared);
        shared.counters.commands.fetch_add(1, Ordering::Relaxed);
        let mut r = Reply::new(out, self.version);
        let name = upper(args[0]);
        if !self.authed && !matches!(name.as_slice(), b"AUTH" | b"HELLO" | b"QUIT" | b"RESET") {
            r.error(errors::NOAUTH);
            return;
        }
        if let Some(e) = super::command_info::subcommand_refusal(&name, args) {
            r.error(e);
            return;
        }
        if let Some(cluster) = &shared.cluster {
            let asking = std::mem::take(&mut self.asking) || name.as_slice() == b"RESTORE-ASKING";
            if let Some(e) = cluster::redirect(&shared.store, cluster, &name, args, asking).await {
                r.error(&e);
                return;
            }
        }
        match name.as_slice() {
            // Run from EXEC's queue: EXEC has already dropped the watches.
            b"UNWATCH" => r.ok(),
            b"PING" => {
                if arity(args, 1, Some(2), &mut r) && !self.subscribed_ping(args, &mut r) {
                    match args.get(1) {
                        Some(msg) => r.bulk(msg),
                        None => r.simple("PONG"),
                    }
                }
            }
            b"ECHO" => {
                if arity(args, 2, Some(2), &mut r) {
                    r.bulk(args[1]);
                }
            }
            b"QUIT" => {
                r.ok();
                self.close = true;
            }
            b"HELLO" => self.hello(args, &mut r),
            b"RESET" => {
                if arity(args, 1, Some(1), &mut r) {
                    self.reset();
                    self.shared.monitors.remove(self.client.id);
                    self.tracking_off();
                    self.unsubscribe_all();
                    r.version = Version::Resp2;
                    r.simple("RESET");
                }
            }
            b"AUTH" => {
                if arity(args, 2, Some(3), &mut r) {
                    let given = args[args.len() - 1];
                    let user_ok = args.len() == 2 || args[1] == b"default";
                    match &shared.config.password {
                        None => r.error(
                            "ERR AUTH <password> called without any password configured for the \
                             default user. Are you sure your configuration is correct?",
                        ),
                        Some(p) if user_ok && p.as_bytes() == given => {
                            self.authed = true;
                            r.ok();
                        }
                        Some(_) => r.error(errors::WRONGPASS),
                    }
                }
            }
            b"SELECT" if shared.cluster.is_some() => {
                if arity(args, 2, Some(2), &mut r) {
                    if args[1] == b"0" {
                        r.ok();
                    } else {
                        r.error("ERR SELECT is not allowed in cluster mode");
                    }
                }
            }
            b"CLUSTER" | b"CLUSTERX" | b"READONLY" | b"READWRITE" | b"ASKING" => {
                match &shared.cluster {
                    None => r.error("ERR This instance has cluster support disabled"),
                    Some(c) => match name.as_slice() {
                        b"CLUSTER" => {
                            let keys_in_slot = |slot: u16| {
                                cluster::keys_in_slots(&shared.store, unix_now_ms(), |s| s == slot)
                                    .map_err(|e| e.to_string())
                            };
                            c.cluster_command(args, &keys_in_slot, &mut r)
                        }
                        b"CLUSTERX"
                            if args.len() == 6 && args[1].eq_ignore_ascii_case(b"RESTORE") =>
                        {
                            let done = super::migrate::restore(&shared, &args[2..]).await;
                            match done {
                                Ok(()) => r.ok(),
                                Err(e) => r.error(format!("ERR {e}")),
                            }
                        }
                        b"CLUSTERX" => super::migrate::clusterx(&shared, c, args, &mut r),
                        b"ASKING" => {
                            self.asking = true;
                            r.ok();
                        }
                        _ => r.ok(),
                    },
                }
            }
            b"SELECT" => {
                if arity(args, 2, Some(2), &mut r) {
                    match super::args::int32_arg(args[1], &mut r) {
                        None => {}
                        Some(n) if n < 0 || n as usize >= shared.store.databases() => {
                            r.error(errors::INVALID_DB)
                        }
                        Some(n) => {
                            self.db = n as usize;
                            self.client.set_db(self.db);
                            r.ok();
                        }
                    }
                }
            }
            b"CLIENT" => self.client(args, &mut r),
            b"COMMAND" => super::command_info::command(args, &mut r),
            b"INFO" => {
                let sections: Vec<String> = args[1..]
                    .iter()
                    .map(|a| String::from_utf8_lossy(a).to_lowercase())
                    .collect();
                let text = self.info(&sections);
                r.verbatim("txt", text.as_bytes());
            }
            b"DBSIZE" => {
                if arity(args, 1, Some(1), &mut r) {
                    r.integer(shared.store.dbsize(self.db) as i64);
                }
            }
            b"FLUSHDB" | b"FLUSHALL" => {
                if arity(args, 1, Some(2), &mut r) {
                    keys::flush(&shared, self.db, name.as_slice() == b"FLUSHALL", &mut r);
                }
            }
            b"TIME" => super::admin::time(&mut r),
            b"CONFIG" => self.config(args, &mut r),
            b"WAIT" => {
                // Writes are on the device when answered; no replicas.
                if arity(args, 3, Some(3), &mut r) {
                    r.integer(0);
                }
            }
            b"SAVE" | b"BGSAVE" => match shared.store.cache().engine().flush() {
                Ok(()) if name.as_slice() == b"SAVE" => r.ok(),
                Ok(()) => r.simple("Background saving started"),
                Err(e) => r.error(format!("ERR {e}")),
            },
            b"LASTSAVE" => r.integer((unix_now_ms() / 1000) as i64),
            b"SHUTDOWN" => {
                // Redis closes the connection without a reply, then exits;
                // here the server stops gracefully (writing the index
                // checkpoint).
                shared.shutdown.trigger();
                self.close = true;
            }
            b"SWAPDB" => super::swapdb::swapdb(&shared, args, &mut r).await,
            b"SLOWLOG" => shared.observed.slowlog_command(args, &mut r),
            b"MONITOR" => {
                if arity(args, 1, Some(1), &mut r) {
                    self.open_mailbox(self.version);
                    if let Some(mailbox) = self.mailbox() {
                        shared.monitors.add(self.client.id, mailbox);
                    }
                    r.ok();
                }
            }
            b"LATENCY" => shared.observed.latency_command(args, &mut r),
            b"ROLE" => {
                if arity(args, 1, Some(1), &mut r) {
                    self.role(&mut r)
                }
            }
            b"MEMORY" => super::admin::memory(&shared, self.db, args, &mut r).await,
            b"MODULE" => super::admin::module(args, &mut r),
            b"LOLWUT" => super::admin::lolwut(&mut r),
            b"BGREWRITEAOF" => {
                if arity(args, 1, Some(1), &mut r) {
                    // The log is the store: nothing to rewrite; flushed.
                    match shared.store.cache().engine().flush() {
                        Ok(()) => r.simple("Background append only file rewriting started"),
                        Err(e) => r.error(format!("ERR {e}")),
                    }
                }
            }
            b"DEBUG" => match args.get(1).map(|a| upper(a)).as_deref() {
                Some(b"SLEEP") => r.ok(),
                // What client libraries' tests use to see an error of a
                // given kind (`DEBUG ERROR "LOADING …"`).
                Some(b"ERROR") if args.len() == 3 => r.error(args[2]),
                _ => r.error("ERR DEBUG subcommand not supported by nvdepot"),
            },
            n if super::pubsub::is_pubsub(n) => self.pubsub(n, args, &mut r),
            b"SCRIPT" => self.script(args, &mut r).await,
            b"EVAL" | b"EVALSHA" | b"EVAL_RO" | b"EVALSHA_RO" | b"FCALL" | b"FCALL_RO" => {
                self.eval(&name, args, &mut r).await
            }
            b"FUNCTION" => self.function(args, &mut r).await,
            b"XREAD" | b"XREADGROUP" | b"BLPOP" | b"BRPOP" | b"BLMOVE" | b"BRPOPLPUSH"
            | b"BLMPOP" | b"BZPOPMIN" | b"BZPOPMAX" | b"BZMPOP" => {
                self.try_blocking(&shared, &name, args, &mut r).await;
                self.wake_blocked(&shared, &name, args);
            }
            _ => {
                let command = keys::execute(&shared, self.db, &name, args, &mut r);
                if !super::notify::reporting_misses(
                    &shared.store,
                    shared.notifies(super::notify::KEY_MISS),
                    &name,
                    args,
                    command,
                )
                .await
                {
                    r.error(errors::unknown_command(args));
                }
                self.wake_blocked(&shared, &name, args);
            }
        }
    }

    /// After a command that may have given a key elements: signals the
    /// clients blocked on its keys.
    fn wake_blocked(&self, shared: &Shared, name: &[u8], args: &[&[u8]]) {
        if shared.blocked.any() && super::blocking::may_wake(name) {
            for k in super::commands::keys(name, args) {
                shared.blocked.signal(self.db, k);
            }
        }
    }

    fn hello(&mut self, args: &[&[u8]], r: &mut Reply<'_>) {
        let mut version = self.version;
        let mut i = 1;
        if let Some(v) = args.get(1) {
            match super::args::int_arg(v) {
                Some(2) => version = Version::Resp2,
                Some(3) => version = Version::Resp3,
                Some(_) => {
                    r.error("NOPROTO unsupported protocol version");
                    return;
                }
                None => {
                    r.error("ERR Protocol version is not an integer or out of range");
                    return;
                }
            }
            i = 2;
        }
        let mut authed = self.authed;
        let mut name = None;
        while i < args.len() {
            match upper(args[i]).as_slice() {
                b"AUTH" if i + 2 < args.len() => {
                    let ok = args[i + 1] == b"default"
                        && self
                            .shared
                            .config
                            .password
                            .as_ref()
                            .is_none_or(|p| p.as_bytes() == args[i + 2]);
                    if !ok {
                        r.error(errors::WRONGPASS);
                        return;
                    }
                    authed = true;
                    i += 3;
                }
                b"SETNAME" if i + 1 < args.len() => {
                    name = Some(args[i + 1].to_vec());
                    i += 2;
                }
                _ => {
                    r.error(format!(
                        "ERR Syntax error in HELLO option '{}'",
                        String::from_utf8_lossy(args[i])
                    ));
                    return;
                }
            }
        }
        if !authed {
            r.error(errors::NOAUTH);
            return;
        }
        self.authed = true;
        self.version = version;
        self.client.set_version(version);
        self.messages_in(version);
        r.version = version;
        if let Some(n) = name {
            self.client.set_name(n);
        }
        r.map(7);
        r.bulk(b"server");
        r.bulk(b"redis");
        r.bulk(b"version");
        r.bulk(REDIS_VERSION.as_bytes());
        r.bulk(b"proto");
        r.integer(if version == Version::Resp3 { 3 } else { 2 });
        r.bulk(b"id");
        r.integer(self.client.id as i64);
        r.bulk(b"mode");
        r.bulk(if self.shared.cluster.is_some() {
            &b"cluster"[..]
        } else {
            b"standalone"
        });
        r.bulk(b"role");
        r.bulk(b"master");
        r.bulk(b"modules");
        r.array(0);
    }

    /// `RESET`: the connection as a new one would be (Redis 6.2+): out
    /// of MULTI, nothing watched, database 0, RESP2, no name, and
    /// signed out where a password is required.
    fn reset(&mut self) {
        self.multi = None;
        self.watched.clear();
        self.db = 0;
        self.client.set_db(0);
        self.version = Version::Resp2;
        self.client.set_version(Version::Resp2);
        self.client.set_name(Vec::new());
        self.authed = self.shared.config.password.is_none();
        self.asking = false;
    }
}
