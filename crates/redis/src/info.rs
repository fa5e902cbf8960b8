//! INFO: the sections clients and tools read (server, clients, memory,
//! persistence, stats, cluster, keyspace, and nvdepot's own) in Redis
//! 7.0's format, from the counters every connection shares.

use std::sync::atomic::{AtomicU64, Ordering};

use nvdepot_cache::resp::unix_now_ms;

use super::face::{RespSession, REDIS_VERSION};

impl RespSession {
    pub(super) fn info(&self, section: Option<&str>) -> String {
        let s = &self.shared;
        let c = &s.counters;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let all = matches!(
            section,
            None | Some("all") | Some("everything") | Some("default")
        );
        let want = |name: &str| all || section == Some(name);
        let mut out = String::new();
        let mut add = |title: &str, lines: Vec<(String, String)>| {
            if !out.is_empty() {
                out.push_str("\r\n");
            }
            out.push_str(&format!("# {title}\r\n"));
            for (k, v) in lines {
                out.push_str(&format!("{k}:{v}\r\n"));
            }
        };
        let uptime = (unix_now_ms().saturating_sub(l(&c.started_ms))) / 1000;
        if want("server") {
            add(
                "Server",
                vec![
                    ("redis_version".into(), REDIS_VERSION.into()),
                    ("nvdepot_version".into(), env!("CARGO_PKG_VERSION").into()),
                    (
                        "redis_mode".into(),
                        if s.cluster.is_some() {
                            "cluster"
                        } else {
                            "standalone"
                        }
                        .into(),
                    ),
                    ("os".into(), std::env::consts::OS.into()),
                    ("process_id".into(), std::process::id().to_string()),
                    ("tcp_port".into(), s.config.port.to_string()),
                    ("uptime_in_seconds".into(), uptime.to_string()),
                ],
            );
        }
        if want("clients") {
            add(
                "Clients",
                vec![("connected_clients".into(), l(&c.connected).to_string())],
            );
        }
        let engine = s.store.cache().engine().stats();
        if want("memory") {
            add(
                "Memory",
                vec![
                    ("used_memory".into(), engine.index_memory_bytes.to_string()),
                    ("maxmemory".into(), "0".into()),
                ],
            );
        }
        if want("persistence") {
            add(
                "Persistence",
                vec![
                    ("loading".into(), "0".into()),
                    ("aof_enabled".into(), "1".into()),
                    ("appendfsync".into(), s.config.appendfsync.into()),
                ],
            );
        }
        if want("stats") {
            add(
                "Stats",
                vec![
                    (
                        "total_connections_received".into(),
                        l(&c.total_connections).to_string(),
                    ),
                    (
                        "total_commands_processed".into(),
                        l(&c.commands).to_string(),
                    ),
                    ("rejected_connections".into(), l(&c.rejected).to_string()),
                    ("keyspace_hits".into(), l(&c.hits).to_string()),
                    ("keyspace_misses".into(), l(&c.misses).to_string()),
                ],
            );
        }
        if want("cluster") {
            add(
                "Cluster",
                vec![(
                    "cluster_enabled".into(),
                    u8::from(s.cluster.is_some()).to_string(),
                )],
            );
        }
        if want("keyspace") {
            let lines = (0..s.store.databases())
                .filter_map(|db| {
                    let n = s.store.dbsize(db);
                    (n > 0).then(|| (format!("db{db}"), format!("keys={n},expires=0,avg_ttl=0")))
                })
                .collect();
            add("Keyspace", lines);
        }
        if want("nvdepot") {
            let mut lines = s.store.cache().stats();
            // Pages of paged collections, live and not yet swept.
            let pages: u64 = (0..s.store.databases())
                .map(|db| s.store.page_count(db))
                .sum();
            lines.push(("collection_pages".into(), pages.to_string()));
            lines.push(("page_sweeps".into(), s.store.page_sweeps().to_string()));
            add("nvdepot", lines);
        }
        out
    }
}
