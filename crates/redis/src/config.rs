//! `CONFIG GET` / `CONFIG SET` / `CONFIG RESETSTAT` of `nvdepot serve`.
//!
//! The parameters are the ones clients and test suites probe. Their
//! values are fixed at start-up (command-line flags), so `CONFIG SET`
//! accepts a parameter's current value (what a suite does to make sure of
//! a setting: `CONFIG SET save ""`, `CONFIG SET appendonly yes`) and
//! refuses any other value, saying which flag sets it; it never answers OK
//! to a setting that is not in force. The encoding settings
//! (`tunables.rs`) are kept and read back as Redis keeps them.

use nvdepot_resp::{errors, Reply};

use super::session::RespSession;
use super::tunables::Tunables;

/// A parameter: its name, its value here, and why another value is
/// refused.
struct Param {
    name: &'static str,
    value: String,
    fixed_by: &'static str,
}

impl RespSession {
    fn params(&self) -> Vec<Param> {
        let shared = &self.shared;
        let c = &shared.config;
        let p = |name, value: String, fixed_by| Param {
            name,
            value,
            fixed_by,
        };
        vec![
            p("port", c.port.to_string(), "set with --port at start-up"),
            p("bind", c.bind.clone(), "set with --bind at start-up"),
            p(
                "databases",
                shared.store.databases().to_string(),
                "set with --databases at start-up",
            ),
            p(
                "maxclients",
                c.maxclients.to_string(),
                "set with --maxclients at start-up",
            ),
            p(
                "requirepass",
                c.password.clone().unwrap_or_default(),
                "set with --requirepass at start-up",
            ),
            p(
                "appendonly",
                "yes".into(),
                "every write goes to the log on the device",
            ),
            p(
                "appendfsync",
                c.appendfsync.into(),
                "set with --appendfsync at start-up",
            ),
            p(
                "save",
                String::new(),
                "nvdepot keeps every key on the device and takes no snapshots",
            ),
            p(
                "maxmemory",
                "0".into(),
                "every key lives on the device; DRAM holds an index entry per key and \
                 the --cache-mb read cache",
            ),
            p(
                "maxmemory-policy",
                "noeviction".into(),
                "nvdepot never evicts a key",
            ),
            p(
                "proto-max-bulk-len",
                c.limits.bulk_bytes_max.to_string(),
                "the store's largest value, fixed when it is created",
            ),
            p("notify-keyspace-events", shared.notify.describe(), ""),
            p(
                "cluster-enabled",
                if shared.cluster.is_some() {
                    "yes"
                } else {
                    "no"
                }
                .into(),
                "set with --cluster-enabled at start-up",
            ),
        ]
    }

    pub(super) fn config(&mut self, args: &[&[u8]], r: &mut Reply<'_>) {
        let sub = args.get(1).map(|a| a.to_ascii_uppercase());
        match sub.as_deref() {
            Some(b"GET") if args.len() >= 3 => {
                let params = self.params();
                let tunables = self.shared.tunables.all();
                let pairs = params
                    .iter()
                    .map(|p| (p.name, p.value.clone()))
                    .chain(tunables);
                let pairs: Vec<(&str, String)> = pairs.collect();
                // As Redis 7.0: a name without glob characters is looked up
                // (any case) and answered under the name as given; a
                // pattern matches the names, aliases included. Each once.
                let mut found: Vec<(Vec<u8>, &str)> = Vec::new();
                for pat in &args[2..] {
                    let lower = pat.to_ascii_lowercase();
                    if !pat.iter().any(|c| b"[*?".contains(c)) {
                        if let Some((_, v)) = pairs.iter().find(|(n, _)| n.as_bytes() == lower) {
                            if !found.iter().any(|(n, _)| n.eq_ignore_ascii_case(pat)) {
                                found.push((pat.to_vec(), v));
                            }
                        }
                        continue;
                    }
                    for (name, v) in &pairs {
                        if super::glob::matches(&lower, name.as_bytes())
                            && !found
                                .iter()
                                .any(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
                        {
                            found.push((name.as_bytes().to_vec(), v));
                        }
                    }
                }
                r.map(found.len());
                for (name, value) in found {
                    r.bulk(&name);
                    r.bulk(value.as_bytes());
                }
            }
            Some(b"SET") if args.len() >= 4 && args.len().is_multiple_of(2) => {
                self.config_set(args, r)
            }
            Some(b"SET") if args.len() >= 4 => r.error(errors::SYNTAX),
            Some(b"RESETSTAT") if args.len() == 2 => {
                self.shared.observed.reset();
                self.shared.counters.reset();
                r.ok();
            }
            Some(b"REWRITE") if args.len() == 2 => {
                // No configuration file: the settings are the command line's.
                r.error("ERR The server is running without a config file")
            }
            Some(b"HELP") if args.len() == 2 => r.simple_lines(&[
                "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "GET <pattern>",
                "    Return parameters matching the glob-like <pattern> and their values.",
                "SET <directive> <value>",
                "    Set the configuration <directive> to <value>.",
                "RESETSTAT",
                "    Reset statistics reported by the INFO command.",
                "REWRITE",
                "    Rewrite the configuration file.",
                "HELP",
                "    Prints this help.",
            ]),
            Some(b"GET" | b"SET" | b"RESETSTAT" | b"REWRITE" | b"HELP") => {
                r.error(errors::wrong_sub_arity("config", args[1]))
            }
            Some(_) => r.error(errors::unknown_subcommand("CONFIG", args[1])),
            None => r.error(errors::wrong_arity(args[0])),
        }
    }

    /// `CONFIG SET name value [name value …]`: all or nothing, as Redis 7.
    fn config_set(&mut self, args: &[&[u8]], r: &mut Reply<'_>) {
        let params = self.params();
        let mut tuned = Vec::new();
        let mut notify = None;
        for pair in args[2..].chunks(2) {
            let name = String::from_utf8_lossy(pair[0]).to_lowercase();
            if name == "notify-keyspace-events" {
                match super::notify::Notify::parse(pair[1]) {
                    Some(flags) => notify = Some(flags),
                    None => {
                        return r.error(format!(
                            "ERR CONFIG SET failed (possibly related to argument '{name}') - {}",
                            super::notify::INVALID
                        ))
                    }
                }
                continue;
            }
            if Tunables::knows(&name) {
                match Tunables::check(&name, pair[1]) {
                    Ok(v) => tuned.push(v),
                    Err(why) => {
                        return r.error(format!(
                            "ERR CONFIG SET failed (possibly related to argument '{name}') - {why}"
                        ))
                    }
                }
                continue;
            }
            let Some(p) = params.iter().find(|p| p.name == name) else {
                return r.error(format!(
                    "ERR Unknown option or number of arguments for CONFIG SET - '{name}'"
                ));
            };
            if !same_value(p, pair[1]) {
                return r.error(format!(
                    "ERR CONFIG SET failed (possibly related to argument '{name}') - \
                     nvdepot cannot change it while running ({}); it stays '{}'",
                    p.fixed_by, p.value
                ));
            }
        }
        self.shared.tunables.set(&tuned);
        self.shared.observed.configure(&self.shared.tunables);
        if let Some(flags) = notify {
            self.shared.notify.set(flags);
            // `new` events need to know which blind writes create keys.
            let new = super::notify::NEW;
            let channels = super::notify::KEYSPACE | super::notify::KEYEVENT;
            self.shared
                .store
                .track_created(flags & new != 0 && flags & channels != 0);
        }
        r.ok();
    }
}

/// Whether `given` is `p`'s current value as Redis would parse it (case
/// and surrounding blanks do not matter; `bind` lists in any order).
fn same_value(p: &Param, given: &[u8]) -> bool {
    let given = String::from_utf8_lossy(given);
    let given = given.trim();
    if p.name == "bind" {
        let mut a: Vec<&str> = given.split_whitespace().collect();
        let mut b: Vec<&str> = p.value.split_whitespace().collect();
        a.sort_unstable();
        b.sort_unstable();
        return a == b;
    }
    if p.name == "requirepass" {
        return given == p.value;
    }
    given.eq_ignore_ascii_case(&p.value)
}
