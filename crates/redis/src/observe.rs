//! What an operator observes of the commands run, as Redis 7.0 keeps it:
//! per-command calls and time (`INFO commandstats`), error replies by
//! their first word (`INFO errorstats`), the slow log (`SLOWLOG`) and the
//! latency monitor's `command` event (`LATENCY`).
//!
//! Every command run is timed (two clock reads) and counted in a slot of
//! the command table (no lock); the slow log and the latency samples take
//! a lock only for a command past their thresholds
//! (`slowlog-log-slower-than`, 10 ms by default; `latency-monitor-threshold`,
//! off by default), error counts only for an error reply.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use nvdepot_cache::resp::unix_now_ms;
use nvdepot_resp::{errors, Reply};
use parking_lot::Mutex;

use super::commands::COMMANDS;

/// Most arguments a slow log entry keeps (Redis's SLOWLOG_ENTRY_MAX_ARGC).
const SLOWLOG_ARGS_MAX: usize = 32;
/// Most bytes of one argument a slow log entry keeps (SLOWLOG_ENTRY_MAX_STRING).
const SLOWLOG_ARG_BYTES_MAX: usize = 128;
/// Samples the latency monitor keeps per event (LATENCY_TS_LEN).
const LATENCY_SAMPLES_MAX: usize = 160;

/// Calls and time of one command.
#[derive(Default)]
struct CommandStat {
    calls: AtomicU64,
    usec: AtomicU64,
    failed: AtomicU64,
}

/// One slow log entry.
struct SlowEntry {
    id: u64,
    unix_s: i64,
    usec: i64,
    args: Vec<Vec<u8>>,
    addr: String,
    name: Vec<u8>,
}

/// The latency monitor's samples of one event.
#[derive(Default)]
struct LatencyEvent {
    /// (unix seconds, milliseconds), oldest first; one per second.
    samples: VecDeque<(i64, u64)>,
    max_ms: u64,
}

/// The server-wide record (`Shared::observed`).
pub struct Observed {
    commands: Vec<CommandStat>,
    errors: Mutex<BTreeMap<String, u64>>,
    error_replies: AtomicU64,
    slowlog: Mutex<VecDeque<SlowEntry>>,
    slowlog_next: AtomicU64,
    latency: Mutex<BTreeMap<&'static str, LatencyEvent>>,
    /// `slowlog-log-slower-than` (µs; negative: off), `slowlog-max-len`
    /// and `latency-monitor-threshold` (ms; 0: off), as last set.
    slowlog_us: AtomicI64,
    slowlog_len: AtomicU64,
    latency_ms: AtomicI64,
}

impl Default for Observed {
    fn default() -> Observed {
        Observed {
            commands: COMMANDS.iter().map(|_| CommandStat::default()).collect(),
            errors: Mutex::new(BTreeMap::new()),
            error_replies: AtomicU64::new(0),
            slowlog: Mutex::new(VecDeque::new()),
            slowlog_next: AtomicU64::new(0),
            latency: Mutex::new(BTreeMap::new()),
            // Set from the settings at start (`RespFace::new`) and by
            // CONFIG SET: `configure`.
            slowlog_us: AtomicI64::new(-1),
            slowlog_len: AtomicU64::new(0),
            latency_ms: AtomicI64::new(0),
        }
    }
}

impl Observed {
    /// Takes the thresholds from `CONFIG SET`'s settings; a shorter
    /// `slowlog-max-len` drops the oldest entries now, as Redis does.
    pub fn configure(&self, t: &super::tunables::Tunables) {
        let len = t.value("slowlog-max-len").max(0) as u64;
        self.slowlog_us
            .store(t.value("slowlog-log-slower-than"), Ordering::Relaxed);
        self.slowlog_len.store(len, Ordering::Relaxed);
        self.latency_ms
            .store(t.value("latency-monitor-threshold"), Ordering::Relaxed);
        self.slowlog.lock().truncate(len as usize);
    }

    /// Records one command run: `index` its slot in the command table,
    /// `reply` the start of what it answered.
    pub fn record(
        &self,
        index: Option<usize>,
        args: &[&[u8]],
        usec: u64,
        reply: &[u8],
        client: impl FnOnce() -> (String, Vec<u8>),
    ) {
        let failed = reply.first() == Some(&b'-');
        if let Some(stat) = index.and_then(|i| self.commands.get(i)) {
            stat.calls.fetch_add(1, Ordering::Relaxed);
            stat.usec.fetch_add(usec, Ordering::Relaxed);
            if failed {
                stat.failed.fetch_add(1, Ordering::Relaxed);
            }
        }
        if failed {
            self.error(reply);
        }
        let slow_us = self.slowlog_us.load(Ordering::Relaxed);
        if slow_us >= 0 && usec >= slow_us as u64 && !skips_slowlog(args[0]) {
            let (addr, name) = client();
            let len = self.slowlog_len.load(Ordering::Relaxed) as usize;
            self.slow(args, usec, addr, name, len);
        }
        let latency_ms = self.latency_ms.load(Ordering::Relaxed);
        if latency_ms > 0 && usec / 1000 >= latency_ms as u64 {
            self.latency_sample("command", usec / 1000);
        }
    }

    /// Counts an error reply under its first word (`-WRONGTYPE …`).
    fn error(&self, reply: &[u8]) {
        self.error_replies.fetch_add(1, Ordering::Relaxed);
        let word: Vec<u8> = reply[1..]
            .iter()
            .take_while(|&&b| b != b' ' && b != b'\r')
            .copied()
            .collect();
        let word = String::from_utf8_lossy(&word).into_owned();
        *self.errors.lock().entry(word).or_insert(0) += 1;
    }

    fn slow(&self, args: &[&[u8]], usec: u64, addr: String, name: Vec<u8>, max: usize) {
        let mut kept: Vec<Vec<u8>> = Vec::new();
        for (i, a) in args.iter().enumerate() {
            if i == SLOWLOG_ARGS_MAX - 1 && args.len() > SLOWLOG_ARGS_MAX {
                let more = args.len() - i;
                kept.push(format!("... ({more} more arguments)").into_bytes());
                break;
            }
            if a.len() > SLOWLOG_ARG_BYTES_MAX {
                let mut s = a[..SLOWLOG_ARG_BYTES_MAX].to_vec();
                let more = a.len() - SLOWLOG_ARG_BYTES_MAX;
                s.extend_from_slice(format!("... ({more} more bytes)").as_bytes());
                kept.push(s);
            } else {
                kept.push(a.to_vec());
            }
        }
        let entry = SlowEntry {
            id: self.slowlog_next.fetch_add(1, Ordering::Relaxed),
            unix_s: (unix_now_ms() / 1000) as i64,
            usec: usec as i64,
            args: kept,
            addr,
            name,
        };
        let mut log = self.slowlog.lock();
        log.push_front(entry);
        log.truncate(max);
    }

    fn latency_sample(&self, event: &'static str, ms: u64) {
        let now = (unix_now_ms() / 1000) as i64;
        let mut events = self.latency.lock();
        let e = events.entry(event).or_default();
        match e.samples.back_mut() {
            // One sample per second: the worst of that second.
            Some((t, worst)) if *t == now => *worst = (*worst).max(ms),
            _ => {
                e.samples.push_back((now, ms));
                if e.samples.len() > LATENCY_SAMPLES_MAX {
                    e.samples.pop_front();
                }
            }
        }
        e.max_ms = e.max_ms.max(ms);
    }

    /// `CONFIG RESETSTAT`: command and error counts start again.
    pub fn reset(&self) {
        for c in &self.commands {
            c.calls.store(0, Ordering::Relaxed);
            c.usec.store(0, Ordering::Relaxed);
            c.failed.store(0, Ordering::Relaxed);
        }
        self.errors.lock().clear();
        self.error_replies.store(0, Ordering::Relaxed);
    }

    /// `total_error_replies` of INFO stats.
    pub fn error_replies(&self) -> u64 {
        self.error_replies.load(Ordering::Relaxed)
    }

    /// `INFO commandstats` lines (commands called since the last reset).
    pub fn commandstats(&self) -> Vec<(String, String)> {
        let mut lines: Vec<(String, String)> = COMMANDS
            .iter()
            .zip(&self.commands)
            .filter_map(|(spec, c)| {
                let calls = c.calls.load(Ordering::Relaxed);
                (calls > 0).then(|| {
                    let usec = c.usec.load(Ordering::Relaxed);
                    (
                        format!("cmdstat_{}", spec.name.to_ascii_lowercase()),
                        format!(
                            "calls={calls},usec={usec},usec_per_call={:.2},rejected_calls=0,\
                             failed_calls={}",
                            usec as f64 / calls as f64,
                            c.failed.load(Ordering::Relaxed)
                        ),
                    )
                })
            })
            .collect();
        lines.sort();
        lines
    }

    /// `INFO errorstats` lines.
    pub fn errorstats(&self) -> Vec<(String, String)> {
        self.errors
            .lock()
            .iter()
            .map(|(w, n)| (format!("errorstat_{w}"), format!("count={n}")))
            .collect()
    }
}

/// Commands Redis keeps out of the slow log (their arguments may hold
/// passwords, or they are logged command by command).
fn skips_slowlog(name: &[u8]) -> bool {
    [&b"AUTH"[..], b"HELLO", b"EXEC", b"MIGRATE"]
        .iter()
        .any(|n| name.eq_ignore_ascii_case(n))
}

/// The commands that read what is observed.
impl Observed {
    /// `SLOWLOG GET [count] | LEN | RESET | HELP`.
    pub(super) fn slowlog_command(&self, args: &[&[u8]], r: &mut Reply<'_>) {
        let sub = args.get(1).map(|a| a.to_ascii_uppercase());
        match (sub.as_deref(), args.len()) {
            (Some(b"GET"), 2 | 3) => {
                let count = match args.get(2) {
                    None => 10,
                    Some(a) => match std::str::from_utf8(a)
                        .ok()
                        .and_then(|s| s.parse::<i64>().ok())
                    {
                        Some(n) if n >= -1 => n,
                        _ => return r.error("ERR count should be greater than or equal to -1"),
                    },
                };
                let log = self.slowlog.lock();
                let n = if count == -1 {
                    log.len()
                } else {
                    (count as usize).min(log.len())
                };
                r.array(n);
                for e in log.iter().take(n) {
                    r.array(6);
                    r.integer(e.id as i64);
                    r.integer(e.unix_s);
                    r.integer(e.usec);
                    r.array(e.args.len());
                    for a in &e.args {
                        r.bulk(a);
                    }
                    r.bulk(e.addr.as_bytes());
                    r.bulk(&e.name);
                }
            }
            (Some(b"LEN"), 2) => r.integer(self.slowlog.lock().len() as i64),
            (Some(b"RESET"), 2) => {
                self.slowlog.lock().clear();
                r.ok();
            }
            (Some(b"HELP"), 2) => r.simple_lines(&[
                "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "GET [<count>]",
                "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
                "    Entries are made of:",
                "    id, timestamp, time in microseconds, arguments array, client IP and port,",
                "    client name",
                "LEN",
                "    Return the length of the slowlog.",
                "RESET",
                "    Reset the slowlog.",
                "HELP",
                "    Prints this help.",
            ]),
            (Some(b"GET" | b"LEN" | b"RESET" | b"HELP"), _) => {
                r.error(errors::wrong_sub_arity("slowlog", args[1]))
            }
            (Some(_), _) => r.error(errors::unknown_subcommand("SLOWLOG", args[1])),
            (None, _) => r.error(errors::wrong_arity(args[0])),
        }
    }

    /// `LATENCY LATEST | HISTORY event | RESET [event…] | DOCTOR | HELP`
    /// (the `command` event: commands past `latency-monitor-threshold`).
    pub(super) fn latency_command(&self, args: &[&[u8]], r: &mut Reply<'_>) {
        let sub = args.get(1).map(|a| a.to_ascii_uppercase());
        match (sub.as_deref(), args.len()) {
            (Some(b"LATEST"), 2) => {
                let events = self.latency.lock();
                r.array(events.len());
                for (name, e) in events.iter() {
                    let (t, ms) = e.samples.back().copied().unwrap_or((0, 0));
                    r.array(4);
                    r.bulk(name.as_bytes());
                    r.integer(t);
                    r.integer(ms as i64);
                    r.integer(e.max_ms as i64);
                }
            }
            (Some(b"HISTORY"), 3) => {
                let events = self.latency.lock();
                let name = String::from_utf8_lossy(args[2]).to_lowercase();
                match events.get(name.as_str()) {
                    None => r.array(0),
                    Some(e) => {
                        r.array(e.samples.len());
                        for &(t, ms) in &e.samples {
                            r.array(2);
                            r.integer(t);
                            r.integer(ms as i64);
                        }
                    }
                }
            }
            (Some(b"RESET"), _) => {
                let mut events = self.latency.lock();
                let n = if args.len() == 2 {
                    let n = events.len();
                    events.clear();
                    n
                } else {
                    args[2..]
                        .iter()
                        .filter(|a| {
                            let name = String::from_utf8_lossy(a).to_lowercase();
                            events.remove(name.as_str()).is_some()
                        })
                        .count()
                };
                r.integer(n as i64);
            }
            (Some(b"DOCTOR"), 2) => {
                let events = self.latency.lock();
                let text = if events.is_empty() {
                    "Dave, no latency spike was observed during the lifetime of this Redis \
                     instance, not in the slightest bit. I honestly think you ought to sleep \
                     better.\n"
                        .to_string()
                } else {
                    let mut t = String::from(
                        "Dave, I have observed latency spikes in this Redis instance.\n\n",
                    );
                    for (i, (name, e)) in events.iter().enumerate() {
                        let avg = e.samples.iter().map(|s| s.1).sum::<u64>()
                            / e.samples.len().max(1) as u64;
                        t.push_str(&format!(
                            "{}. {name}: {} latency spikes (average {avg}ms, max {}ms).\n",
                            i + 1,
                            e.samples.len(),
                            e.max_ms
                        ));
                    }
                    t
                };
                r.verbatim("txt", text.as_bytes());
            }
            (Some(b"HELP"), 2) => r.simple_lines(&[
                "LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "DOCTOR",
                "    Return a human readable latency analysis report.",
                "HISTORY <event>",
                "    Return time-latency samples for the <event> class.",
                "LATEST",
                "    Return the latest latency samples for all events.",
                "RESET [<event> ...]",
                "    Reset latency data of one or more <event> classes.",
                "    (default: reset all data for all event classes)",
                "HELP",
                "    Prints this help.",
            ]),
            (Some(b"LATEST" | b"HISTORY" | b"DOCTOR" | b"HELP"), _) => {
                r.error(errors::wrong_sub_arity("latency", args[1]))
            }
            (Some(_), _) => r.error(errors::unknown_subcommand("LATENCY", args[1])),
            (None, _) => r.error(errors::wrong_arity(args[0])),
        }
    }
}
