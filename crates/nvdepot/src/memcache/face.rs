//! The memcache face: the memcache protocol crate's [`Connection`] served
//! by the server kit. The storage is the cache layer's binding
//! (`nvdepot_cache::memcache::MemcacheStorage`) in the server, anything
//! implementing [`Storage`] in tests.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use nvdepot_memcache::{Connection, Limits, ServerStats, Storage};
use nvdepot_server::{prometheus_line, Face, Fed, Session};

/// What memcached answers a connection beyond `-c`.
pub const TOO_MANY_CONNECTIONS: &[u8] = b"ERROR Too many open connections\r\n";
/// What a request larger than the read buffer may grow to gets (memcached's
/// wording when it cannot buffer a request).
pub const REQUEST_TOO_LARGE: &[u8] = b"SERVER_ERROR out of memory reading request\r\n";
/// Room beyond `item_bytes_max` for the command line or binary header (and
/// key) of the largest allowed request.
const REQUEST_SLACK_BYTES: usize = 4 << 10;
/// Longest multiget line (`get k1 k2 ...`) the protocol crate accepts;
/// memcached lets those grow without bound, so the buffer allows it even
/// when `item_bytes_max` is smaller.
const MULTIGET_LINE_BYTES_MAX: usize = 4 << 20;

/// The memcache protocol over `S`, with the server's counters.
pub struct MemcacheFace<S: Storage> {
    storage: Arc<S>,
    stats: Arc<ServerStats>,
    limits: Limits,
}

impl<S: Storage + 'static> MemcacheFace<S> {
    pub fn new(storage: Arc<S>, stats: Arc<ServerStats>, limits: Limits) -> MemcacheFace<S> {
        let _ = stats.started.compare_exchange(
            0,
            u64::from(storage.now()),
            Ordering::SeqCst,
            Ordering::SeqCst,
        );
        MemcacheFace {
            storage,
            stats,
            limits,
        }
    }
}

/// A connection's protocol state (the kit's [`Session`]).
pub struct MemcacheSession<S: Storage>(Connection<S>);

impl<S: Storage> Session for MemcacheSession<S> {
    async fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> Fed {
        let fed = self.0.feed(input, out).await;
        Fed {
            consumed: fed.consumed,
            close: fed.close,
            more: fed.more,
        }
    }
}

impl<S: Storage + 'static> Face for MemcacheFace<S> {
    type Session = MemcacheSession<S>;

    fn name(&self) -> &'static str {
        "memcache"
    }

    fn session(&self, _conn: &nvdepot_server::Connection) -> MemcacheSession<S> {
        MemcacheSession(Connection::new(
            Arc::clone(&self.storage),
            Arc::clone(&self.stats),
            self.limits,
        ))
    }

    fn request_bytes_max(&self) -> usize {
        self.limits
            .item_bytes_max
            .max(MULTIGET_LINE_BYTES_MAX)
            .saturating_add(REQUEST_SLACK_BYTES)
    }

    fn too_many_connections(&self) -> &'static [u8] {
        TOO_MANY_CONNECTIONS
    }

    fn request_too_large(&self) -> &'static [u8] {
        REQUEST_TOO_LARGE
    }

    fn connection_opened(&self) {
        self.stats.curr_connections.fetch_add(1, Ordering::Relaxed);
        self.stats.total_connections.fetch_add(1, Ordering::Relaxed);
    }

    fn connection_closed(&self) {
        self.stats.curr_connections.fetch_sub(1, Ordering::Relaxed);
    }

    fn connection_rejected(&self) {
        self.stats
            .rejected_connections
            .fetch_add(1, Ordering::Relaxed);
    }
}

/// Renders the memcache server's counters and the storage's stats in the
/// Prometheus text format. Server counters are `memcache_<memcached name>`;
/// storage stats are `nvdepot_<name>` (non-numeric ones are skipped).
pub fn render_metrics(stats: &ServerStats, storage: &[(String, String)]) -> String {
    let counters: [(&str, &AtomicU64, &str); 23] = [
        ("curr_connections", &stats.curr_connections, "gauge"),
        ("total_connections", &stats.total_connections, "counter"),
        (
            "rejected_connections",
            &stats.rejected_connections,
            "counter",
        ),
        ("cmd_get", &stats.cmd_get, "counter"),
        ("cmd_set", &stats.cmd_set, "counter"),
        ("cmd_flush", &stats.cmd_flush, "counter"),
        ("cmd_touch", &stats.cmd_touch, "counter"),
        ("get_hits", &stats.get_hits, "counter"),
        ("get_misses", &stats.get_misses, "counter"),
        ("get_expired", &stats.get_expired, "counter"),
        ("delete_hits", &stats.delete_hits, "counter"),
        ("delete_misses", &stats.delete_misses, "counter"),
        ("incr_hits", &stats.incr_hits, "counter"),
        ("incr_misses", &stats.incr_misses, "counter"),
        ("decr_hits", &stats.decr_hits, "counter"),
        ("decr_misses", &stats.decr_misses, "counter"),
        ("cas_hits", &stats.cas_hits, "counter"),
        ("cas_misses", &stats.cas_misses, "counter"),
        ("cas_badval", &stats.cas_badval, "counter"),
        ("touch_hits", &stats.touch_hits, "counter"),
        ("touch_misses", &stats.touch_misses, "counter"),
        ("bytes_read", &stats.bytes_read, "counter"),
        ("bytes_written", &stats.bytes_written, "counter"),
    ];
    let mut out = String::with_capacity(4096);
    for (name, value, kind) in counters {
        let value = value.load(Ordering::Relaxed);
        prometheus_line(&mut out, &format!("memcache_{name}"), kind, &value);
    }
    for (name, value) in storage {
        if value.parse::<f64>().is_err() {
            continue;
        }
        let name = name.strip_prefix("nvdepot_").unwrap_or(name);
        prometheus_line(&mut out, &format!("nvdepot_{name}"), "gauge", value);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_name_and_skip() {
        let stats = ServerStats::default();
        stats.get_hits.store(7, Ordering::Relaxed);
        let body = render_metrics(
            &stats,
            &[
                ("curr_items".into(), "3".into()),
                ("nvdepot_write_amplification".into(), "1.250".into()),
                ("version".into(), "1.6-nvdepot".into()),
            ],
        );
        assert!(body.contains("\nmemcache_get_hits 7\n"), "{body}");
        assert!(body.contains("\nnvdepot_curr_items 3\n"), "{body}");
        assert!(
            body.contains("\nnvdepot_write_amplification 1.250\n"),
            "{body}"
        );
        assert!(!body.contains("nvdepot_version"), "{body}");
    }
}
