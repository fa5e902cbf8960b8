//! MONITOR: every command the server runs, as Redis 7.0 streams it to
//! monitoring clients — one simple-string line per command, after it ran:
//! `+<unix s>.<µs> [<db> <addr>|lua] "arg" "arg"…`, the arguments quoted
//! and escaped as Redis's `sdscatrepr` does. Commands a script calls show
//! `lua` as their client. Administrative commands (CONFIG, DEBUG, …) are
//! not shown, and AUTH and HELLO are not shown with their password.
//!
//! A monitoring connection gets lines through the mailbox Pub/Sub uses
//! (same output limits); while none is open, a command pays one atomic
//! load.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::hub::Mailbox;

/// The open monitoring connections.
#[derive(Default)]
pub struct Monitors {
    list: Mutex<Vec<(u64, Arc<Mailbox>)>>,
    any: AtomicBool,
}

impl Monitors {
    /// Client `id` monitors from now on, through `mailbox`.
    pub fn add(&self, id: u64, mailbox: Arc<Mailbox>) {
        let mut list = self.list.lock();
        if !list.iter().any(|(i, _)| *i == id) {
            list.push((id, mailbox));
        }
        self.any.store(true, Ordering::Release);
    }

    /// Whether client `id` monitors.
    pub fn contains(&self, id: u64) -> bool {
        self.any.load(Ordering::Acquire) && self.list.lock().iter().any(|(i, _)| *i == id)
    }

    /// Client `id` stops monitoring (RESET, its connection closed).
    pub fn remove(&self, id: u64) {
        if !self.any.load(Ordering::Acquire) {
            return;
        }
        let mut list = self.list.lock();
        list.retain(|(i, _)| *i != id);
        self.any.store(!list.is_empty(), Ordering::Release);
    }

    /// Shows command `args`, run in database `db` by `who` (the client's
    /// address, or `lua`), to every monitoring connection.
    pub fn feed(&self, db: usize, who: impl FnOnce() -> String, args: &[&[u8]]) {
        if !self.any.load(Ordering::Acquire) || hidden(args[0]) {
            return;
        }
        let line = line(db, &who(), args);
        for (_, mailbox) in self.list.lock().iter() {
            mailbox.deliver(|r| r.simple(&line));
        }
    }
}

/// Commands Redis 7.0 keeps out of MONITOR: the administrative ones and
/// those carrying a password.
fn hidden(name: &[u8]) -> bool {
    const HIDDEN: &[&[u8]] = &[
        b"AUTH",
        b"HELLO",
        b"MONITOR",
        b"CONFIG",
        b"DEBUG",
        b"SHUTDOWN",
        b"SAVE",
        b"BGSAVE",
        b"BGREWRITEAOF",
        b"SLOWLOG",
        b"LATENCY",
        b"MODULE",
        b"CLUSTERX",
        b"REPLICAOF",
        b"SLAVEOF",
        b"FAILOVER",
        b"PSYNC",
        b"SYNC",
        b"REPLCONF",
    ];
    HIDDEN.iter().any(|h| name.eq_ignore_ascii_case(h))
}

/// One MONITOR line (without the `+` and the line end).
fn line(db: usize, who: &str, args: &[&[u8]]) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let mut s = format!("{}.{:06} [{db} {who}]", now.as_secs(), now.subsec_micros());
    for a in args {
        s.push_str(" \"");
        repr(&mut s, a);
        s.push('"');
    }
    s
}

/// Redis's `sdscatrepr` of `a`, without its surrounding quotes.
fn repr(s: &mut String, a: &[u8]) {
    for &b in a {
        match b {
            b'\\' => s.push_str("\\\\"),
            b'"' => s.push_str("\\\""),
            b'\n' => s.push_str("\\n"),
            b'\r' => s.push_str("\\r"),
            b'\t' => s.push_str("\\t"),
            7 => s.push_str("\\a"),
            8 => s.push_str("\\b"),
            0x20..=0x7e => s.push(b as char),
            _ => {
                let _ = write!(s, "\\x{b:02x}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_escape_as_redis() {
        let l = line(3, "lua", &[b"GET", b"foo\"bar", b"a\\b\n\x92 \x07"]);
        let (_, rest) = l.split_once(' ').unwrap();
        assert_eq!(rest, r#"[3 lua] "GET" "foo\"bar" "a\\b\n\x92 \a""#);
        assert!(hidden(b"config") && !hidden(b"GET"));
    }
}
