//! Keyspace notifications (`notify-keyspace-events`), as Redis 7.0's
//! `notify.c`: a command that changes a key publishes its event on
//! `__keyspace@<db>__:<key>` (the message is the event's name) and on
//! `__keyevent@<db>__:<event>` (the message is the key), for the classes
//! the setting enables.
//!
//! Each command names its events where Redis's does (same names, same
//! order, same conditions: an HDEL that removes nothing publishes
//! nothing; one that empties the hash publishes `hdel` then `del`).
//! Expired keys are reported by the store when it removes them (lazy
//! expiry or the sweep), through [`Notify::expired`].
//!
//! Free when off: a command's call costs one atomic load unless its class
//! is enabled and someone is subscribed.

use std::sync::atomic::{AtomicU32, Ordering};

use super::hub::Hub;

/// Event classes (Redis's `NOTIFY_*` bits).
pub const KEYSPACE: u32 = 1 << 0;
pub const KEYEVENT: u32 = 1 << 1;
pub const GENERIC: u32 = 1 << 2;
pub const STRING: u32 = 1 << 3;
pub const LIST: u32 = 1 << 4;
pub const SET: u32 = 1 << 5;
pub const HASH: u32 = 1 << 6;
pub const ZSET: u32 = 1 << 7;
pub const EXPIRED: u32 = 1 << 8;
pub const EVICTED: u32 = 1 << 9;
pub const STREAM: u32 = 1 << 10;
pub const KEY_MISS: u32 = 1 << 11;
pub const MODULE: u32 = 1 << 12;
pub const NEW: u32 = 1 << 13;
/// `A`: every class but key misses and new keys.
pub const ALL: u32 =
    GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

/// The classes in force (`CONFIG SET notify-keyspace-events`).
#[derive(Default)]
pub struct Notify {
    flags: AtomicU32,
}

/// What `CONFIG SET` answers to a class character Redis does not know.
pub const INVALID: &str = "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.";

impl Notify {
    /// Redis's `keyspaceEventsStringToFlags`; `None` for an unknown
    /// character.
    pub fn parse(classes: &[u8]) -> Option<u32> {
        classes.iter().try_fold(0, |flags, c| {
            Some(
                flags
                    | match c {
                        b'A' => ALL,
                        b'g' => GENERIC,
                        b'$' => STRING,
                        b'l' => LIST,
                        b's' => SET,
                        b'h' => HASH,
                        b'z' => ZSET,
                        b'x' => EXPIRED,
                        b'e' => EVICTED,
                        b'K' => KEYSPACE,
                        b'E' => KEYEVENT,
                        b't' => STREAM,
                        b'm' => KEY_MISS,
                        b'd' => MODULE,
                        b'n' => NEW,
                        _ => return None,
                    },
            )
        })
    }

    /// Redis's `keyspaceEventsFlagsToString` (what `CONFIG GET` shows).
    pub fn describe(&self) -> String {
        let flags = self.flags.load(Ordering::Relaxed);
        let mut s = String::new();
        if flags & ALL == ALL {
            s.push('A');
        } else {
            for (bit, c) in [
                (GENERIC, 'g'),
                (STRING, '$'),
                (LIST, 'l'),
                (SET, 's'),
                (HASH, 'h'),
                (ZSET, 'z'),
                (EXPIRED, 'x'),
                (EVICTED, 'e'),
                (STREAM, 't'),
                (MODULE, 'd'),
                (NEW, 'n'),
            ] {
                if flags & bit != 0 {
                    s.push(c);
                }
            }
        }
        for (bit, c) in [(KEYSPACE, 'K'), (KEYEVENT, 'E'), (KEY_MISS, 'm')] {
            if flags & bit != 0 {
                s.push(c);
            }
        }
        s
    }

    pub fn set(&self, flags: u32) {
        self.flags.store(flags, Ordering::Relaxed);
    }

    /// Whether an event of `class` would be published (a command may skip
    /// working out an event's details otherwise).
    pub fn wanted(&self, class: u32) -> bool {
        let flags = self.flags.load(Ordering::Relaxed);
        flags & class != 0 && flags & (KEYSPACE | KEYEVENT) != 0
    }

    /// Redis's `notifyKeyspaceEvent`: publishes `event` of `class` on
    /// `key` of `db` if the class is enabled.
    pub fn event(&self, hub: &Hub, class: u32, event: &str, db: usize, key: &[u8]) {
        let flags = self.flags.load(Ordering::Relaxed);
        if flags & class == 0 || !hub.any() {
            return;
        }
        if flags & KEYSPACE != 0 {
            let mut channel = format!("__keyspace@{db}__:").into_bytes();
            channel.extend_from_slice(key);
            hub.publish(&channel, event.as_bytes());
        }
        if flags & KEYEVENT != 0 {
            hub.publish(format!("__keyevent@{db}__:{event}").as_bytes(), key);
        }
    }
}

/// `command` (`name` with `args`) reporting its key misses as `keymiss`
/// events while that class is published (`notify-keyspace-events m`):
/// Redis's `lookupKeyRead` reports each key a command looks up with it
/// (every read, and the writes of [`READ_LOOKUP_WRITES`], as found,
/// before their own events); other writes look their keys up without it,
/// and OBJECT with `LOOKUP_NONOTIFY`. The command table is searched only
/// while the class is published (`published`: `Shared::notifies(KEY_MISS)`).
pub(super) fn reporting_misses<'a, F: std::future::Future>(
    store: &'a nvdepot_cache::resp::RespStore,
    published: bool,
    name: &[u8],
    args: &[&[u8]],
    command: F,
) -> nvdepot_cache::resp::ReportMisses<'a, F> {
    let spec = if published && name != b"OBJECT" {
        super::commands::find(name)
    } else {
        None
    };
    let reports = |spec: &super::commands::Spec| {
        // BITFIELD with only GETs reads its key as a read.
        let read_bitfield = name == b"BITFIELD"
            && !args[1..]
                .iter()
                .any(|a| a.eq_ignore_ascii_case(b"SET") || a.eq_ignore_ascii_case(b"INCRBY"));
        read_bitfield || !spec.write || READ_LOOKUP_WRITES.contains(&name)
    };
    let spec = spec.filter(|spec| reports(spec));
    let named = spec.map_or_else(Vec::new, |spec| named_keys(spec, name, args));
    let write = spec.is_some_and(|spec| spec.write);
    store.report_misses(spec.is_some(), write, &named, command)
}

/// The keys command `name` (`spec`) names, for `RespStore::report_misses`:
/// every argument for a command whose keys follow a count (ZINTER,
/// ZDIFFSTORE's sources, SINTERCARD, XREAD…; only keys are ever looked
/// up).
fn named_keys<'a>(spec: &super::commands::Spec, name: &[u8], args: &[&'a [u8]]) -> Vec<&'a [u8]> {
    // A STORE form's destination (and BITOP's) is looked up as a write.
    let from = match name {
        b"BITOP" => 3,
        n if n.ends_with(b"STORE") && READ_LOOKUP_WRITES.contains(&n) => 2,
        _ => 1,
    };
    if spec.first == 0 || READ_LOOKUP_WRITES.contains(&name) {
        args.get(from..).unwrap_or_default().to_vec()
    } else {
        super::commands::keys(name, args)
    }
}

/// Writes whose keys (or source keys) Redis 7.0 looks up with
/// `lookupKeyRead`, so a missing one is a `keymiss`. (GETEX's, GETDEL's
/// and SET … GET's updates report theirs themselves, in `keys.rs`.)
const READ_LOOKUP_WRITES: &[&[u8]] = &[
    b"GETEX",
    b"SORT",
    b"SINTERSTORE",
    b"SUNIONSTORE",
    b"SDIFFSTORE",
    b"ZUNIONSTORE",
    b"ZINTERSTORE",
    b"ZDIFFSTORE",
    b"ZRANGESTORE",
    b"GEOSEARCHSTORE",
    b"GEORADIUS",
    b"GEORADIUSBYMEMBER",
    b"BITOP",
    b"PFMERGE",
    b"PFCOUNT",
    b"XREADGROUP",
    b"XCLAIM",
    b"XAUTOCLAIM",
    b"XACK",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_read_and_print_as_redis_does() {
        let n = Notify::default();
        for (given, shown) in [
            ("", ""),
            ("KEA", "AKE"),
            ("Ex", "xE"),
            ("Kg$lshzxetd", "AK"),
            ("nmK", "nKm"),
            ("Eh", "hE"),
            ("AAg", "A"),
        ] {
            n.set(Notify::parse(given.as_bytes()).unwrap());
            assert_eq!(n.describe(), shown, "{given}");
        }
        assert_eq!(Notify::parse(b"KEA!"), None);
        assert_eq!(Notify::parse(b"a"), None);
    }

    #[test]
    fn nothing_is_wanted_without_a_channel_kind() {
        let n = Notify::default();
        n.set(Notify::parse(b"A").unwrap());
        assert!(!n.wanted(GENERIC));
        n.set(Notify::parse(b"Kg").unwrap());
        assert!(n.wanted(GENERIC) && !n.wanted(HASH));
    }
}
