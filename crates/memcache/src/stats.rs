//! Command counters and the `stats` reply.
//!
//! Each connection counts into plain integers and adds them to the shared
//! [`ServerStats`] atomics once per [`Connection::feed`] call, so a
//! pipelined batch costs one atomic add per counter touched instead of one
//! per command, and connections on different cores do not bounce the
//! counters' cache lines on every request.

use std::sync::atomic::Ordering;

use crate::{Connection, ServerStats, Storage, VERSION};

macro_rules! counters {
    ($($name:ident),* $(,)?) => {
        /// Per-connection command counters, named as in [`ServerStats`].
        #[derive(Debug, Default)]
        pub(crate) struct Counters {
            $(pub(crate) $name: u64,)*
        }

        impl Counters {
            /// Adds the counts to `stats` and zeroes them.
            pub(crate) fn flush_into(&mut self, stats: &ServerStats) {
                $(
                    if self.$name != 0 {
                        stats.$name.fetch_add(self.$name, Ordering::Relaxed);
                        self.$name = 0;
                    }
                )*
            }
        }

        /// Zeroes every counter `stats reset` clears.
        fn reset_shared(stats: &ServerStats) {
            $(stats.$name.store(0, Ordering::Relaxed);)*
            stats.total_connections.store(0, Ordering::Relaxed);
            stats.rejected_connections.store(0, Ordering::Relaxed);
        }
    };
}

counters!(
    cmd_get,
    cmd_set,
    cmd_flush,
    cmd_touch,
    get_hits,
    get_misses,
    get_expired,
    delete_hits,
    delete_misses,
    incr_hits,
    incr_misses,
    decr_hits,
    decr_misses,
    cas_hits,
    cas_misses,
    cas_badval,
    touch_hits,
    touch_misses,
    bytes_read,
    bytes_written,
);

/// Which `stats` group a request asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Group {
    General,
    Settings,
    /// Groups memcached has that do not apply here (`items`, `slabs`,
    /// `conns`): an empty list.
    Empty,
    Sizes,
}

impl<S: Storage> Connection<S> {
    /// Calls `f(name, value)` for every line of a `stats` group, in
    /// memcached's order.
    pub(crate) fn stats_lines(&mut self, group: Group, f: &mut dyn FnMut(&[u8], &[u8])) {
        // Make this connection's own counts visible first.
        self.counters.flush_into(&self.stats);
        let mut num = Vec::with_capacity(24);
        let mut put = |name: &str, v: u64, f: &mut dyn FnMut(&[u8], &[u8])| {
            num.clear();
            crate::num::put_u64(&mut num, v);
            f(name.as_bytes(), &num);
        };
        match group {
            Group::General => {
                let s = &*self.stats;
                let now = u64::from(self.storage.now());
                let started = s.started.load(Ordering::Relaxed);
                put("pid", u64::from(std::process::id()), f);
                put("uptime", now.saturating_sub(started), f);
                put("time", now, f);
                f(b"version", VERSION.as_bytes());
                put("pointer_size", 64, f);
                let l = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
                for (name, v) in [
                    ("curr_connections", l(&s.curr_connections)),
                    ("total_connections", l(&s.total_connections)),
                    ("rejected_connections", l(&s.rejected_connections)),
                    ("cmd_get", l(&s.cmd_get)),
                    ("cmd_set", l(&s.cmd_set)),
                    ("cmd_flush", l(&s.cmd_flush)),
                    ("cmd_touch", l(&s.cmd_touch)),
                    ("get_hits", l(&s.get_hits)),
                    ("get_misses", l(&s.get_misses)),
                    ("get_expired", l(&s.get_expired)),
                    ("delete_misses", l(&s.delete_misses)),
                    ("delete_hits", l(&s.delete_hits)),
                    ("incr_misses", l(&s.incr_misses)),
                    ("incr_hits", l(&s.incr_hits)),
                    ("decr_misses", l(&s.decr_misses)),
                    ("decr_hits", l(&s.decr_hits)),
                    ("cas_misses", l(&s.cas_misses)),
                    ("cas_hits", l(&s.cas_hits)),
                    ("cas_badval", l(&s.cas_badval)),
                    ("touch_hits", l(&s.touch_hits)),
                    ("touch_misses", l(&s.touch_misses)),
                    ("bytes_read", l(&s.bytes_read) + self.unread_bytes),
                    ("bytes_written", l(&s.bytes_written)),
                ] {
                    put(name, v, f);
                }
                for (name, value) in self.storage.stats() {
                    f(name.as_bytes(), value.as_bytes());
                }
            }
            Group::Settings => {
                put("item_size_max", self.limits.item_bytes_max as u64, f);
                put("key_size_max", self.limits.key_bytes_max as u64, f);
                f(b"cas_enabled", b"yes");
                f(b"flush_enabled", b"yes");
                f(b"binding_protocol", b"auto-negotiate");
            }
            Group::Sizes => f(b"sizes_status", b"disabled"),
            Group::Empty => {}
        }
    }

    /// `stats reset`.
    pub(crate) fn stats_reset(&mut self) {
        self.counters = Default::default();
        reset_shared(&self.stats);
    }
}
