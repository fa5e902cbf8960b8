//! CLIENT and its subcommands about connections (ID, INFO, LIST, KILL,
//! UNBLOCK, SETNAME, GETNAME, SETINFO) and client-side caching's
//! (TRACKING, CACHING, GETREDIR, TRACKINGINFO), as Redis 7.0 answers
//! them; the rest (PAUSE, UNPAUSE, REPLY, NO-EVICT, NO-TOUCH, HELP) are
//! in `admin.rs`. The state they read and change is in `clients.rs` and
//! `tracking.rs`.

use nvdepot_resp::{errors, Reply};

use super::blocked::Cancel;
use super::clients::Client;
use super::session::RespSession;
use super::tracking::{prefix_collision, Mode};

pub(super) const CLIENT_HELP: &[&str] = &[
    "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CACHING (YES|NO)",
    "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
    "GETREDIR",
    "    Return the client ID we are redirecting to when tracking is enabled.",
    "GETNAME",
    "    Return the name of the current connection.",
    "ID",
    "    Return the ID of the current connection.",
    "INFO",
    "    Return information about the current client connection.",
    "KILL <ip:port>",
    "    Kill connection made from <ip:port>.",
    "KILL <option> <value> [<option> <value> [...]]",
    "    Kill connections. Options are:",
    "    * ADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made from the specified address",
    "    * LADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made to specified local address",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Kill connections by type.",
    "    * USER <username>",
    "      Kill connections authenticated by <username>.",
    "    * SKIPME (YES|NO)",
    "      Skip killing current connection (default: yes).",
    "LIST [options ...]",
    "    Return information about client connections. Options:",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Return clients of specified type.",
    "UNPAUSE",
    "    Stop the current client pause, resuming traffic.",
    "PAUSE <timeout> [WRITE|ALL]",
    "    Suspend all, or just write, clients for <timeout> milliseconds.",
    "REPLY (ON|OFF|SKIP)",
    "    Control the replies sent to the current connection.",
    "SETNAME <name>",
    "    Assign the name <name> to the current connection.",
    "UNBLOCK <clientid> [TIMEOUT|ERROR]",
    "    Unblock the specified blocked client.",
    "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
    "         [OPTIN] [OPTOUT] [NOLOOP]",
    "    Control server assisted client side caching.",
    "TRACKINGINFO",
    "    Report tracking status for the current connection.",
    "NO-EVICT (ON|OFF)",
    "    Protect current client connection from eviction.",
    "HELP",
    "    Prints this help.",
];

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
                .is_none_or(|a| c.addr().to_string().as_bytes() == a.as_slice())
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
        let Some(id) = super::args::int_arg(args[2]) else {
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
                    match super::args::int_arg(a) {
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
                    b"ID" => match super::args::int_arg(value) {
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

impl RespSession {
    /// `CLIENT TRACKING ON|OFF [REDIRECT id] [PREFIX p …] [BCAST] [OPTIN]
    /// [OPTOUT] [NOLOOP]`.
    pub(super) fn client_tracking(&mut self, args: &[&[u8]], r: &mut Reply<'_>) {
        let mut mode = Mode::default();
        let mut prefixes: Vec<&[u8]> = Vec::new();
        let mut j = 3;
        while j < args.len() {
            let more = j + 1 < args.len();
            match args[j].to_ascii_uppercase().as_slice() {
                b"REDIRECT" if more => {
                    j += 1;
                    if mode.redirect != 0 {
                        return r.error("ERR A client can only redirect to a single other client");
                    }
                    let Some(id) = super::args::int_arg(args[j]) else {
                        return r.error(errors::NOT_INTEGER);
                    };
                    if !self.shared.clients.exists(id) {
                        return r.error("ERR The client ID you want redirect to does not exist");
                    }
                    mode.redirect = id as u64;
                }
                b"BCAST" => mode.bcast = true,
                b"OPTIN" => mode.optin = true,
                b"OPTOUT" => mode.optout = true,
                b"NOLOOP" => mode.noloop = true,
                b"PREFIX" if more => {
                    j += 1;
                    prefixes.push(args[j]);
                }
                _ => return r.error(errors::SYNTAX),
            }
            j += 1;
        }
        let id = self.client.id;
        match args[2].to_ascii_uppercase().as_slice() {
            b"ON" => {
                if !mode.bcast && !prefixes.is_empty() {
                    return r.error("ERR PREFIX option requires BCAST mode to be enabled");
                }
                let old = self.tracking.clone();
                if old.as_ref().is_some_and(|o| o.bcast != mode.bcast) {
                    return r.error(
                        "ERR You can't switch BCAST mode on/off before disabling tracking for \
                         this client, and then re-enabling it with a different mode.",
                    );
                }
                if mode.bcast && (mode.optin || mode.optout) {
                    return r.error("ERR OPTIN and OPTOUT are not compatible with BCAST");
                }
                if mode.optin && mode.optout {
                    return r.error("ERR You can't specify both OPTIN mode and OPTOUT mode");
                }
                if old
                    .as_ref()
                    .is_some_and(|o| (mode.optin && o.optout) || (mode.optout && o.optin))
                {
                    return r.error(
                        "ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for \
                         this client, and then re-enabling it with a different mode.",
                    );
                }
                let existing = old.map(|o| o.prefixes).unwrap_or_default();
                if mode.bcast {
                    if let Some(e) = prefix_collision(&existing, &prefixes) {
                        return r.error(&e);
                    }
                }
                // Redis adds the new prefixes to those already set.
                mode.prefixes = existing;
                mode.prefixes.extend(prefixes.iter().map(|p| p.to_vec()));
                self.open_mailbox(r.version);
                self.shared.tracking.start(id, &mode);
                self.tracking = Some(mode);
                r.ok();
            }
            b"OFF" => {
                self.tracking_off();
                r.ok();
            }
            _ => r.error(errors::SYNTAX),
        }
    }

    /// Tracking ends (CLIENT TRACKING OFF, RESET).
    pub(super) fn tracking_off(&mut self) {
        if self.tracking.take().is_some() {
            self.shared.tracking.off(self.client.id);
        }
    }

    /// `CLIENT CACHING YES|NO`.
    pub(super) fn client_caching(&mut self, args: &[&[u8]], r: &mut Reply<'_>) {
        let Some(mode) = self.tracking.as_mut() else {
            return r.error(
                "ERR CLIENT CACHING can be called only when the client is in tracking mode with \
                 OPTIN or OPTOUT mode enabled",
            );
        };
        match args[2].to_ascii_uppercase().as_slice() {
            b"YES" if mode.optin => mode.caching = true,
            b"YES" => {
                return r.error(
                    "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.",
                )
            }
            b"NO" if mode.optout => mode.caching = true,
            b"NO" => {
                return r.error(
                    "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.",
                )
            }
            _ => return r.error(errors::SYNTAX),
        }
        r.ok();
    }

    /// `CLIENT GETREDIR`: the redirect id, 0 for none, -1 if not tracking.
    pub(super) fn client_getredir(&self, r: &mut Reply<'_>) {
        r.integer(self.tracking.as_ref().map_or(-1, |m| m.redirect as i64));
    }

    /// `CLIENT TRACKINGINFO`.
    pub(super) fn client_trackinginfo(&self, r: &mut Reply<'_>) {
        let m = self.tracking.as_ref();
        let mut flags: Vec<&str> = vec![if m.is_some() { "on" } else { "off" }];
        if let Some(m) = m {
            if m.bcast {
                flags.push("bcast");
            }
            if m.optin {
                flags.push("optin");
                if m.caching {
                    flags.push("caching-yes");
                }
            }
            if m.optout {
                flags.push("optout");
                if m.caching {
                    flags.push("caching-no");
                }
            }
            if m.noloop {
                flags.push("noloop");
            }
            if self.shared.tracking.broken(self.client.id) {
                flags.push("broken_redirect");
            }
        }
        r.map(3);
        r.bulk(b"flags");
        r.set(flags.len());
        for f in flags {
            r.bulk(f.as_bytes());
        }
        r.bulk(b"redirect");
        r.integer(m.map_or(-1, |m| m.redirect as i64));
        r.bulk(b"prefixes");
        let prefixes = m.map(|m| m.prefixes.clone()).unwrap_or_default();
        r.array(prefixes.len());
        for p in &prefixes {
            r.bulk(p);
        }
    }

    /// After a command ran (`name`, `args`): remembers the keys a
    /// read-only command read for this tracking client, and ends a
    /// CLIENT CACHING's one-command effect.
    pub(super) fn tracked(&mut self, name: &[u8], args: &[&[u8]]) {
        let Some(mode) = self.tracking.as_mut() else {
            return;
        };
        let caching = mode.caching;
        // Redis keeps CACHING across CLIENT commands and inside MULTI.
        if name != b"CLIENT" && self.multi.is_none() {
            mode.caching = false;
        }
        if mode.bcast || (mode.optin && !caching) || (mode.optout && caching) {
            return;
        }
        let Some(spec) = super::commands::find(name) else {
            return;
        };
        if spec.write || spec.first == 0 || super::pubsub::is_pubsub(name) {
            return;
        }
        let keys = super::commands::keys(name, args);
        if !keys.is_empty() {
            self.shared.tracking.remember(self.client.id, &keys);
        }
    }
}
