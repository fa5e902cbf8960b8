//! INFO: Redis 7.0's sections and fields, as monitoring tools and client
//! libraries read them (redis_exporter, Sidekiq's dashboard, redis-py's
//! own tests), with this server's values: DRAM figures are the process's
//! (the data lives on the device), persistence says the log is always on,
//! replication that this is a primary without replicas. Sections asked
//! for by name, several at once, or `default` / `all` / `everything`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use nvdepot_cache::resp::unix_now_ms;

use super::admin::process_memory;
use super::session::{RespSession, REDIS_VERSION};

/// Sections `INFO` / `INFO default` give, in Redis's order.
const DEFAULT: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "errorstats",
    "cluster",
    "keyspace",
    // This server's own: the store on the device, the DRAM tier, pages.
    "nvdepot",
];

/// A random 40-hex-digit id for this run of the server (`run_id`).
fn run_id() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| {
        let mut bytes = [0u8; 20];
        if std::fs::File::open("/dev/urandom")
            .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes))
            .is_err()
        {
            let seed = unix_now_ms() ^ u64::from(std::process::id()) << 32;
            for (i, b) in bytes.iter_mut().enumerate() {
                *b = (seed >> ((i % 8) * 8)) as u8 ^ i as u8;
            }
        }
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    })
}

/// Bytes as Redis's `*_human` fields write them.
fn human(n: u64) -> String {
    let n = n as f64;
    match n {
        n if n < 1024.0 => format!("{n}B"),
        n if n < 1024.0 * 1024.0 => format!("{:.2}K", n / 1024.0),
        n if n < 1024.0 * 1024.0 * 1024.0 => format!("{:.2}M", n / 1024.0 / 1024.0),
        n if n < 1024.0 * 1024.0 * 1024.0 * 1024.0 => {
            format!("{:.2}G", n / 1024.0 / 1024.0 / 1024.0)
        }
        n => format!("{:.2}T", n / 1024.0 / 1024.0 / 1024.0 / 1024.0),
    }
}

/// `uname -sr` and the machine, as Redis's `os` field.
fn os() -> String {
    let read = |f: &str| {
        std::fs::read_to_string(f)
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    format!(
        "Linux {} {}",
        read("/proc/sys/kernel/osrelease"),
        std::env::consts::ARCH
    )
}

/// The process's user and system CPU seconds (`getrusage`).
fn cpu_seconds() -> (f64, f64) {
    // SAFETY: getrusage writes into the zeroed struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_SELF is always valid.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return (0.0, 0.0);
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(ru.ru_utime), secs(ru.ru_stime))
}

fn total_system_memory() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            let line = m.lines().find(|l| l.starts_with("MemTotal:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .map_or(0, |kb| kb * 1024)
}

type Lines = Vec<(String, String)>;

fn kv(lines: &mut Lines, k: &str, v: impl ToString) {
    lines.push((k.to_string(), v.to_string()));
}

impl RespSession {
    /// The text of `INFO [section …]` (`sections` lower case; empty: the
    /// default sections).
    pub(super) fn info(&self, sections: &[String]) -> String {
        let everything = sections.iter().any(|s| s == "all" || s == "everything");
        let default = sections.is_empty() || sections.iter().any(|s| s == "default");
        let want = |name: &str| {
            everything || (default && DEFAULT.contains(&name)) || sections.iter().any(|s| s == name)
        };
        let mut out = String::new();
        let mut add = |title: &str, lines: Lines| {
            if !out.is_empty() {
                out.push_str("\r\n");
            }
            out.push_str(&format!("# {title}\r\n"));
            for (k, v) in lines {
                out.push_str(&format!("{k}:{v}\r\n"));
            }
        };
        if want("server") {
            add("Server", self.info_server());
        }
        if want("clients") {
            add("Clients", self.info_clients());
        }
        if want("memory") {
            add("Memory", self.info_memory());
        }
        if want("persistence") {
            add("Persistence", self.info_persistence());
        }
        if want("stats") {
            add("Stats", self.info_stats());
        }
        if want("replication") {
            let mut l = Lines::new();
            kv(&mut l, "role", "master");
            kv(&mut l, "connected_slaves", 0);
            kv(&mut l, "master_failover_state", "no-failover");
            kv(&mut l, "master_replid", run_id());
            kv(&mut l, "master_replid2", "0".repeat(40));
            kv(&mut l, "master_repl_offset", 0);
            kv(&mut l, "second_repl_offset", -1);
            kv(&mut l, "repl_backlog_active", 0);
            kv(&mut l, "repl_backlog_size", 1_048_576);
            kv(&mut l, "repl_backlog_first_byte_offset", 0);
            kv(&mut l, "repl_backlog_histlen", 0);
            add("Replication", l);
        }
        if want("cpu") {
            let (user, sys) = cpu_seconds();
            let mut l = Lines::new();
            kv(&mut l, "used_cpu_sys", format!("{sys:.6}"));
            kv(&mut l, "used_cpu_user", format!("{user:.6}"));
            kv(&mut l, "used_cpu_sys_children", "0.000000");
            kv(&mut l, "used_cpu_user_children", "0.000000");
            add("CPU", l);
        }
        if want("modules") {
            add("Modules", Lines::new());
        }
        if everything || sections.iter().any(|s| s == "commandstats") {
            add("Commandstats", self.shared.observed.commandstats());
        }
        if want("errorstats") {
            add("Errorstats", self.shared.observed.errorstats());
        }
        if want("cluster") {
            let mut l = Lines::new();
            kv(
                &mut l,
                "cluster_enabled",
                u8::from(self.shared.cluster.is_some()),
            );
            add("Cluster", l);
        }
        if want("keyspace") {
            let s = &self.shared;
            let lines = (0..s.store.databases())
                .filter_map(|db| {
                    let n = s.store.dbsize(db);
                    (n > 0).then(|| (format!("db{db}"), format!("keys={n},expires=0,avg_ttl=0")))
                })
                .collect();
            add("Keyspace", lines);
        }
        if want("nvdepot") {
            let s = &self.shared;
            let mut lines = s.store.cache().stats();
            // Pages of paged collections, live and not yet swept.
            let pages: u64 = (0..s.store.databases())
                .map(|db| s.store.page_count(db))
                .sum();
            lines.push(("collection_pages".into(), pages.to_string()));
            lines.push(("page_sweeps".into(), s.store.page_sweeps().to_string()));
            // Paged steps committed in batches (combine.rs), process-wide.
            let (batches, steps) = super::combine::counts();
            lines.push(("combined_batches".into(), batches.to_string()));
            lines.push(("combined_steps".into(), steps.to_string()));
            add("nvdepot", lines);
        }
        out
    }

    fn info_server(&self) -> Lines {
        let s = &self.shared;
        let l_ = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let now = unix_now_ms();
        let uptime = now.saturating_sub(l_(&s.counters.started_ms)) / 1000;
        let mut l = Lines::new();
        kv(&mut l, "redis_version", REDIS_VERSION);
        kv(&mut l, "nvdepot_version", env!("CARGO_PKG_VERSION"));
        kv(&mut l, "redis_git_sha1", "00000000");
        kv(&mut l, "redis_git_dirty", 0);
        kv(&mut l, "redis_build_id", &run_id()[..16]);
        let mode = if s.cluster.is_some() {
            "cluster"
        } else {
            "standalone"
        };
        kv(&mut l, "redis_mode", mode);
        kv(&mut l, "os", os());
        kv(&mut l, "arch_bits", usize::BITS);
        kv(&mut l, "monotonic_clock", "POSIX clock_gettime");
        kv(&mut l, "multiplexing_api", "io_uring");
        kv(&mut l, "atomicvar_api", "c11-builtin");
        kv(&mut l, "gcc_version", "0.0.0");
        kv(&mut l, "process_id", std::process::id());
        kv(&mut l, "process_supervised", "no");
        kv(&mut l, "run_id", run_id());
        kv(&mut l, "tcp_port", s.config.port);
        kv(&mut l, "server_time_usec", now * 1000);
        kv(&mut l, "uptime_in_seconds", uptime);
        kv(&mut l, "uptime_in_days", uptime / 86_400);
        kv(&mut l, "hz", 10);
        kv(&mut l, "configured_hz", 10);
        kv(&mut l, "lru_clock", (now / 1000) & ((1 << 24) - 1));
        let exe = std::env::current_exe()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        kv(&mut l, "executable", exe);
        kv(&mut l, "config_file", "");
        kv(&mut l, "io_threads_active", 0);
        l
    }

    fn info_clients(&self) -> Lines {
        let s = &self.shared;
        let mut l = Lines::new();
        kv(
            &mut l,
            "connected_clients",
            s.counters.connected.load(Ordering::Relaxed),
        );
        kv(&mut l, "cluster_connections", 0);
        kv(&mut l, "maxclients", s.config.maxclients);
        kv(&mut l, "client_recent_max_input_buffer", 0);
        kv(&mut l, "client_recent_max_output_buffer", 0);
        kv(&mut l, "blocked_clients", s.clients.blocked());
        kv(&mut l, "tracking_clients", u8::from(s.tracking.active()));
        kv(&mut l, "clients_in_timeout_table", 0);
        l
    }

    fn info_memory(&self) -> Lines {
        let s = &self.shared;
        let m = process_memory();
        let engine = s.store.cache().engine().stats();
        let system = total_system_memory();
        let mut l = Lines::new();
        // DRAM is the process's: index, read cache, buffers. The data is on
        // the device (INFO nvdepot has its figures).
        kv(&mut l, "used_memory", m.rss);
        kv(&mut l, "used_memory_human", human(m.rss));
        kv(&mut l, "used_memory_rss", m.rss);
        kv(&mut l, "used_memory_rss_human", human(m.rss));
        kv(&mut l, "used_memory_peak", m.peak);
        kv(&mut l, "used_memory_peak_human", human(m.peak));
        let perc = if m.peak > 0 {
            m.rss as f64 * 100.0 / m.peak as f64
        } else {
            100.0
        };
        kv(&mut l, "used_memory_peak_perc", format!("{perc:.2}%"));
        kv(
            &mut l,
            "used_memory_overhead",
            m.rss.saturating_sub(engine.index_memory_bytes),
        );
        kv(&mut l, "used_memory_startup", 0);
        kv(&mut l, "used_memory_dataset", engine.index_memory_bytes);
        kv(&mut l, "used_memory_lua", 0);
        kv(&mut l, "used_memory_scripts", 0);
        kv(&mut l, "number_of_cached_scripts", s.scripts.cached());
        kv(&mut l, "total_system_memory", system);
        kv(&mut l, "total_system_memory_human", human(system));
        kv(&mut l, "maxmemory", 0);
        kv(&mut l, "maxmemory_human", "0B");
        kv(&mut l, "maxmemory_policy", "noeviction");
        kv(&mut l, "mem_fragmentation_ratio", "1.00");
        kv(&mut l, "mem_allocator", "libc");
        kv(&mut l, "lazyfree_pending_objects", 0);
        l
    }

    fn info_persistence(&self) -> Lines {
        let s = &self.shared;
        let now_s = unix_now_ms() / 1000;
        let mut l = Lines::new();
        kv(&mut l, "loading", 0);
        kv(&mut l, "async_loading", 0);
        // Every write goes to the log on the device before its reply:
        // there are no unsaved changes and no snapshots to take.
        kv(&mut l, "rdb_changes_since_last_save", 0);
        kv(&mut l, "rdb_bgsave_in_progress", 0);
        kv(&mut l, "rdb_last_save_time", now_s);
        kv(&mut l, "rdb_last_bgsave_status", "ok");
        kv(&mut l, "aof_enabled", 1);
        kv(&mut l, "aof_rewrite_in_progress", 0);
        kv(&mut l, "aof_rewrite_scheduled", 0);
        kv(&mut l, "aof_last_rewrite_time_sec", -1);
        kv(&mut l, "aof_last_bgrewrite_status", "ok");
        kv(&mut l, "aof_last_write_status", "ok");
        kv(&mut l, "appendfsync", s.config.appendfsync);
        l
    }

    fn info_stats(&self) -> Lines {
        let s = &self.shared;
        let c = &s.counters;
        let l_ = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let (channels, patterns, shard) = s.hub.counts();
        let mut l = Lines::new();
        kv(
            &mut l,
            "total_connections_received",
            l_(&c.total_connections),
        );
        kv(&mut l, "total_commands_processed", l_(&c.commands));
        kv(&mut l, "instantaneous_ops_per_sec", 0);
        kv(&mut l, "rejected_connections", l_(&c.rejected));
        kv(&mut l, "sync_full", 0);
        kv(&mut l, "sync_partial_ok", 0);
        kv(&mut l, "sync_partial_err", 0);
        kv(&mut l, "expired_keys", l_(&c.expired));
        kv(&mut l, "evicted_keys", 0);
        kv(&mut l, "keyspace_hits", l_(&c.hits));
        kv(&mut l, "keyspace_misses", l_(&c.misses));
        kv(&mut l, "pubsub_channels", channels);
        kv(&mut l, "pubsub_patterns", patterns);
        kv(&mut l, "pubsubshard_channels", shard);
        kv(&mut l, "latest_fork_usec", 0);
        kv(&mut l, "total_forks", 0);
        kv(&mut l, "total_error_replies", s.observed.error_replies());
        l
    }
}
