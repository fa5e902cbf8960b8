//! The server commands operators and their tools send that are not about
//! data: ROLE, LOLWUT, MODULE, MEMORY, BGREWRITEAOF, and CLIENT PAUSE /
//! UNPAUSE / REPLY / NO-EVICT / NO-TOUCH / HELP — as Redis 7.0 answers
//! them, where this server has the thing asked about, and saying what it
//! is where it differs (docs/REDIS.md).

use std::sync::atomic::Ordering;
use std::time::Duration;

use nvdepot_cache::resp::unix_now_ms;
use nvdepot_resp::{errors, Reply};

use super::client_command::CLIENT_HELP;
use super::clients::Replies;
use super::session::{RespSession, Shared, REDIS_VERSION};

/// Commands a write pause holds besides the `write` ones (Redis 7.0: the
/// ones that may replicate).
fn may_write(name: &[u8]) -> bool {
    super::commands::find(name).is_some_and(|c| c.write)
        || matches!(
            name,
            b"PUBLISH" | b"SPUBLISH" | b"PFCOUNT" | b"EVAL" | b"EVALSHA" | b"FCALL"
        )
}

impl RespSession {
    /// Waits while `CLIENT PAUSE` holds this command (the pausing client
    /// too, as Redis). Commands that end a pause are never held.
    pub(super) async fn wait_pause(&self, name: &[u8], args: &[&[u8]]) {
        let pause = &self.shared.pause;
        if pause.until_ms.load(Ordering::Relaxed) == 0 {
            return;
        }
        let unpause = name == b"CLIENT"
            && args
                .get(1)
                .is_some_and(|a| a.eq_ignore_ascii_case(b"UNPAUSE"));
        if unpause {
            return;
        }
        let write = may_write(name);
        while pause.holds(write) {
            nvdepot_io::uring::sleep(Duration::from_millis(5)).await;
        }
    }

    /// `CLIENT PAUSE timeout [WRITE|ALL]`, `CLIENT UNPAUSE`, `CLIENT REPLY
    /// ON|OFF|SKIP`, `CLIENT NO-EVICT`, `CLIENT NO-TOUCH`, `CLIENT HELP`;
    /// false for another subcommand.
    pub(super) fn client_admin(&mut self, sub: &[u8], args: &[&[u8]], r: &mut Reply<'_>) -> bool {
        let pause = &self.shared.pause;
        match (sub, args.len()) {
            (b"PAUSE", 3 | 4) => {
                let ms = match std::str::from_utf8(args[2])
                    .ok()
                    .and_then(|s| s.parse::<i64>().ok())
                {
                    Some(ms) if ms >= 0 => ms as u64,
                    Some(_) => {
                        r.error("ERR timeout is negative");
                        return true;
                    }
                    None => {
                        r.error("ERR timeout is not an integer or out of range");
                        return true;
                    }
                };
                let all = match args.get(3).map(|a| a.to_ascii_uppercase()).as_deref() {
                    None | Some(b"ALL") => true,
                    Some(b"WRITE") => false,
                    Some(_) => {
                        r.error(errors::SYNTAX);
                        return true;
                    }
                };
                // A pause replaces a shorter one, never a longer one; ALL
                // wins over WRITE while both would hold (as Redis).
                let until = unix_now_ms().saturating_add(ms);
                let held = pause.until_ms.load(Ordering::Acquire);
                let live = held > unix_now_ms();
                if !live || until > held {
                    pause.until_ms.store(until, Ordering::Release);
                }
                if !live || all {
                    pause.all.store(all, Ordering::Relaxed);
                }
                r.ok();
            }
            (b"UNPAUSE", 2) => {
                pause.until_ms.store(0, Ordering::Release);
                r.ok();
            }
            (b"REPLY", 3) => match args[2].to_ascii_uppercase().as_slice() {
                b"ON" => {
                    self.replies = Replies::On;
                    r.ok();
                }
                b"OFF" => self.replies = Replies::Off,
                b"SKIP" => self.replies = Replies::Skip,
                _ => r.error(errors::SYNTAX),
            },
            // No eviction of clients and no LRU/LFU touch to avoid here:
            // accepted, as the setting changes nothing this server does.
            (b"NO-EVICT" | b"NO-TOUCH", 3) => match args[2].to_ascii_uppercase().as_slice() {
                b"ON" | b"OFF" => r.ok(),
                _ => r.error(errors::SYNTAX),
            },
            (b"HELP", 2) => r.simple_lines(CLIENT_HELP),
            (b"PAUSE" | b"UNPAUSE" | b"REPLY" | b"NO-EVICT" | b"NO-TOUCH" | b"HELP", _) => {
                r.error(errors::wrong_sub_arity("client", args[1]))
            }
            _ => return false,
        }
        true
    }

    /// `ROLE`: always a primary (no replication yet).
    pub(super) fn role(&self, r: &mut Reply<'_>) {
        r.array(3);
        r.bulk(b"master");
        r.integer(0);
        r.array(0);
    }
}

/// `MEMORY USAGE key [SAMPLES n] | STATS | DOCTOR | MALLOC-STATS |
/// PURGE | HELP` (`db`: the caller's database; from a session or a
/// script).
pub(super) async fn memory(shared: &Shared, db: usize, args: &[&[u8]], r: &mut Reply<'_>) {
    let sub = args.get(1).map(|a| a.to_ascii_uppercase());
    match (sub.as_deref(), args.len()) {
        (Some(b"USAGE"), 3..) => {
            // Redis's option loop: `SAMPLES n`, any number of times.
            let mut j = 3;
            while j < args.len() {
                if !args[j].eq_ignore_ascii_case(b"SAMPLES") || j + 1 == args.len() {
                    return r.error(errors::SYNTAX);
                }
                match super::args::int_arg(args[j + 1]) {
                    None => return r.error(errors::NOT_INTEGER),
                    Some(n) if n < 0 => return r.error(errors::SYNTAX),
                    Some(_) => {}
                }
                j += 2;
            }
            let store = &shared.store;
            match store.get(db, args[2], unix_now_ms()).await {
                // The key's record on the device: key, value (a paged
                // collection's metadata, not its pages) and the
                // record's header and index entry.
                Ok(Some(v)) => r.integer((args[2].len() + v.data().len() + 48) as i64),
                Ok(None) => r.null(),
                Err(e) => r.error(format!("ERR {e}")),
            }
        }
        (Some(b"STATS"), 2) => {
            let m = process_memory();
            let s = shared;
            let engine = s.store.cache().engine().stats();
            let dbs: Vec<(usize, u64)> = (0..s.store.databases())
                .map(|db| (db, s.store.dbsize(db)))
                .filter(|&(_, n)| n > 0)
                .collect();
            let keys: u64 = dbs.iter().map(|&(_, n)| n).sum();
            r.map(9 + dbs.len());
            let int = |r: &mut Reply<'_>, k: &str, v: u64| {
                r.bulk(k.as_bytes());
                r.integer(v as i64);
            };
            int(r, "peak.allocated", m.peak);
            int(r, "total.allocated", m.rss);
            int(r, "startup.allocated", 0);
            int(r, "replication.backlog", 0);
            int(r, "clients.slaves", 0);
            int(r, "clients.normal", 0);
            int(r, "aof.buffer", 0);
            for (db, n) in dbs {
                r.bulk(format!("db.{db}").as_bytes());
                r.map(2);
                int(
                    r,
                    "overhead.hashtable.main",
                    engine.index_memory_bytes / keys.max(1) * n,
                );
                int(r, "overhead.hashtable.expires", 0);
            }
            int(r, "keys.count", keys);
            int(
                r,
                "keys.bytes-per-key",
                engine.index_memory_bytes / keys.max(1),
            );
        }
        (Some(b"DOCTOR"), 2) => r.verbatim(
            "txt",
            b"Hi Sam, I can't find any memory issue in your instance. I can only account \
              for what occurs on this base.\n",
        ),
        (Some(b"MALLOC-STATS"), 2) => {
            r.verbatim("txt", b"Stats not supported for the current allocator\n")
        }
        (Some(b"PURGE"), 2) => r.ok(),
        (Some(b"HELP"), 2) => r.simple_lines(&[
            "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "DOCTOR",
            "    Return memory problems reports.",
            "MALLOC-STATS",
            "    Return internal statistics report from the memory allocator.",
            "PURGE",
            "    Attempt to purge dirty pages for reclamation by the allocator.",
            "STATS",
            "    Return information about the memory usage of the server.",
            "USAGE <key> [SAMPLES <count>]",
            "    Return memory in bytes used by <key> and its value. Nested values are",
            "    sampled up to <count> times (default: 5, 0 means sample all).",
            "HELP",
            "    Prints this help.",
        ]),
        (Some(b"USAGE" | b"STATS" | b"DOCTOR" | b"MALLOC-STATS" | b"PURGE" | b"HELP"), _) => {
            r.error(errors::wrong_sub_arity("memory", args[1]))
        }
        (Some(_), _) => r.error(errors::unknown_subcommand("MEMORY", args[1])),
        (None, _) => r.error(errors::wrong_arity(args[0])),
    }
}

/// `MODULE LIST | HELP` (no modules); loading one is refused.
pub(super) fn module(args: &[&[u8]], r: &mut Reply<'_>) {
    let sub = args.get(1).map(|a| a.to_ascii_uppercase());
    match (sub.as_deref(), args.len()) {
        (Some(b"LIST"), 2) => r.array(0),
        (Some(b"HELP"), 2) => r.simple_lines(&[
            "MODULE <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "LIST",
            "    Return a list of loaded modules.",
            "HELP",
            "    Prints this help.",
        ]),
        (Some(b"LOAD" | b"LOADEX" | b"UNLOAD"), _) => {
            r.error("ERR nvdepot does not load Redis modules")
        }
        (Some(b"LIST" | b"HELP"), _) => r.error(errors::wrong_sub_arity("module", args[1])),
        (Some(_), _) => r.error(errors::unknown_subcommand("MODULE", args[1])),
        (None, _) => r.error(errors::wrong_arity(args[0])),
    }
}

/// `LOLWUT [VERSION v] [...]`: Redis prints art and its version; this
/// prints the version line Redis ends with.
pub(super) fn lolwut(r: &mut Reply<'_>) {
    let text = format!(
        "nvdepot {} (Redis ver. {REDIS_VERSION} protocol)\n",
        env!("CARGO_PKG_VERSION")
    );
    r.verbatim("txt", text.as_bytes());
}

/// The process's resident memory now and at its peak (`/proc/self/status`).
pub(super) struct ProcessMemory {
    pub rss: u64,
    pub peak: u64,
}

pub(super) fn process_memory() -> ProcessMemory {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb = |field: &str| {
        status
            .lines()
            .find(|l| l.starts_with(field))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
            * 1024
    };
    ProcessMemory {
        rss: kb("VmRSS:"),
        peak: kb("VmHWM:"),
    }
}

/// TIME: seconds and microseconds since the epoch.
pub(super) fn time(r: &mut Reply<'_>) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    r.array(2);
    r.bulk(now.as_secs().to_string().as_bytes());
    r.bulk(now.subsec_micros().to_string().as_bytes());
}
