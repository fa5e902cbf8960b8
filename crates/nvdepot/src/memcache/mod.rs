//! `nvdepot memcache`: a memcached-compatible server over a store, taking
//! memcached's flags (`-p -l -U -m -c -t -I -v`, with memcached's long
//! names) plus where the store lives (`--data`, `--size`, `--segment-size`).
//!
//! It serves until SIGTERM or SIGINT, then stops accepting, lets the open
//! connections finish what they read, closes the store (writing the index
//! checkpoint, so the next start restores it instead of scanning the log)
//! and exits 0. Errors exit 2 with `error: <message>` on stderr.
//!
//! Signals: SIGTERM and SIGINT are blocked in every thread before any is
//! started, and one thread takes them with `sigwait`, so no code runs in a
//! signal handler.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;
use nvdepot_cache::memcache::MemcacheStorage;
use nvdepot_cache::CacheStore;
use nvdepot_engine::Eviction;
use nvdepot_memcache::Storage;
use nvdepot_memcache::{Limits, ServerStats};
use nvdepot_server::{default_threads, spawn_metrics, Server, ServerConfig, Shutdown};
use tracing::{info, warn};

use crate::size::parse_size;

mod face;

pub use face::MemcacheFace;

/// Smallest and largest `-I` (memcached allows 1k..1g; nvdepot's records
/// are capped lower, see README "Limits").
const ITEM_BYTES_MIN: u64 = 1 << 10;
const ITEM_BYTES_MAX: u64 = 128 << 20;

#[derive(Debug, Args)]
pub struct MemcacheArgs {
    /// TCP port to listen on; 0 lets the system pick one (printed at
    /// start-up).
    #[arg(
        short = 'p',
        long = "port",
        value_name = "NUM",
        default_value_t = 11211
    )]
    port: u16,
    /// Addresses to listen on, comma-separated or repeated: IPs (`::1`,
    /// `[::1]`), host names, optionally `ADDR:PORT`. Default: only
    /// 127.0.0.1 (memcached's default is every interface).
    #[arg(
        short = 'l',
        long = "listen",
        value_name = "ADDR",
        value_delimiter = ',',
        default_value = "127.0.0.1"
    )]
    listen: Vec<String>,
    /// UDP port; UDP is not supported, so only 0 (off) is accepted.
    #[arg(
        short = 'U',
        long = "udp-port",
        value_name = "NUM",
        default_value_t = 0
    )]
    udp_port: u16,
    /// DRAM budget in megabytes (memcached: item memory; here: index and
    /// caches, the items themselves live on the device).
    #[arg(
        short = 'm',
        long = "memory-limit",
        value_name = "MB",
        default_value_t = 64
    )]
    memory_limit: u64,
    /// Most simultaneous client connections; more are answered
    /// `ERROR Too many open connections` and closed.
    #[arg(short = 'c', long = "conn-limit", value_name = "NUM", default_value_t = 1024,
          value_parser = clap::value_parser!(u32).range(1..))]
    conn_limit: u32,
    /// Worker threads, each running its own io_uring event loop over its
    /// share of the connections. Default: the number of cores.
    #[arg(short = 't', long = "threads", value_name = "NUM",
          value_parser = clap::value_parser!(u32).range(1..))]
    threads: Option<u32>,
    /// Connections a worker takes before the next worker gets any (0:
    /// spread them over the workers from the first).
    #[arg(long, value_name = "NUM", default_value_t = 0)]
    pack_connections: u32,
    /// Largest item value, with k/m suffixes: 1024 bytes to 128m.
    #[arg(short = 'I', long = "max-item-size", value_name = "BYTES", default_value = "1m",
          value_parser = parse_item_size)]
    max_item_size: u64,
    /// The store: a directory (its data file is created inside) or a block
    /// device.
    #[arg(long, value_name = "PATH", default_value = "./data")]
    data: PathBuf,
    /// Bytes to allocate when creating the store; suffixes K, M, G, T.
    /// Ignored for an existing store.
    #[arg(long, value_name = "BYTES", default_value = "1G", value_parser = parse_size)]
    size: u64,
    /// Segment size when creating the store (the engine caps values at a
    /// quarter of a segment). Default: the engine's (64M).
    #[arg(long, value_name = "BYTES", value_parser = parse_size)]
    segment_size: Option<u64>,
    /// Which segment to evict when the store is full: `lru` (least
    /// recently read or written) or `fifo` (write order).
    #[arg(long, value_name = "POLICY", default_value = "lru", value_parser = parse_eviction)]
    eviction: Eviction,
    /// Serve Prometheus metrics at http://ADDR/metrics (e.g.
    /// 127.0.0.1:9150). Default: off.
    #[arg(long, value_name = "ADDR")]
    metrics: Option<String>,
    /// When a write is acknowledged: `buffered` (in the DRAM write buffer;
    /// written within about a millisecond: a kill -9 or a power loss loses
    /// that last millisecond), `written` (its O_DIRECT write completed: a
    /// kill -9 loses nothing acknowledged, a power loss the last 100 ms the
    /// device cache held), `flushed` (the device cache was flushed:
    /// nothing acknowledged is lost).
    #[arg(long, value_name = "WHEN", default_value = "written", value_parser = parse_ack)]
    ack: Ack,
}

/// `--ack`: when a write is acknowledged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ack {
    Buffered,
    Written,
    Flushed,
}

fn parse_ack(text: &str) -> Result<Ack, String> {
    match text {
        "buffered" => Ok(Ack::Buffered),
        "written" => Ok(Ack::Written),
        "flushed" => Ok(Ack::Flushed),
        _ => Err(format!(
            "unknown --ack {text:?}: use buffered, written or flushed"
        )),
    }
}

fn parse_eviction(text: &str) -> Result<Eviction, String> {
    match text {
        "lru" => Ok(Eviction::SegmentLru),
        "fifo" => Ok(Eviction::Fifo),
        _ => Err(format!("unknown eviction policy {text:?}: use lru or fifo")),
    }
}

/// `-I`: a size within [`ITEM_BYTES_MIN`]..=[`ITEM_BYTES_MAX`].
fn parse_item_size(text: &str) -> Result<u64, String> {
    let bytes = parse_size(text)?;
    if !(ITEM_BYTES_MIN..=ITEM_BYTES_MAX).contains(&bytes) {
        return Err(format!(
            "item size {text} is out of range: {ITEM_BYTES_MIN} bytes to {}m",
            ITEM_BYTES_MAX >> 20
        ));
    }
    Ok(bytes)
}

/// Runs the server; the exit code is 0 after a signal-driven shutdown.
pub fn run(args: MemcacheArgs) -> ExitCode {
    match serve(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

type BoxError = Box<dyn std::error::Error>;

fn serve(args: MemcacheArgs) -> Result<(), BoxError> {
    if args.udp_port != 0 {
        return Err("UDP is not supported (-U 0, the default, turns it off)".into());
    }
    let config = ServerConfig {
        listen: args.listen.clone(),
        port: args.port,
        connections_max: args.conn_limit as usize,
        threads: args.threads.map_or_else(default_threads, |t| t as usize),
        pack_connections: args.pack_connections as usize,
        ..ServerConfig::default()
    };
    let limits = Limits {
        item_bytes_max: args.max_item_size as usize,
        ..Limits::default()
    };
    // Before any other thread exists, so that every thread inherits it.
    let signals = crate::signals::block_termination_signals()?;
    let shutdown = Shutdown::new()?;
    crate::signals::spawn_signal_thread(signals, shutdown.clone(), "memcache")?;
    // Bind first: a port in use fails at once, not after a long recovery.
    // Listen only once the store is open: until then a client is refused,
    // never answered by a server that cannot serve yet.
    let mut server = Server::bind(config)?;
    let storage = Arc::new(open_storage(&args)?);
    server.listen()?;
    let addrs: Vec<String> = server.local_addrs().iter().map(|a| a.to_string()).collect();
    eprintln!(
        "nvdepot memcache listening on {} (data {}, size {}, memory {} MB, \
         item max {}, connections max {}, writes acknowledged {})",
        addrs.join(","),
        args.data.display(),
        human(args.size),
        args.memory_limit,
        human(args.max_item_size),
        args.conn_limit,
        match args.ack {
            Ack::Buffered => "buffered",
            Ack::Written => "written",
            Ack::Flushed => "flushed",
        }
    );
    let stats = Arc::new(ServerStats::default());
    let metrics = match &args.metrics {
        Some(addr) => {
            let (s, st) = (Arc::clone(&storage), Arc::clone(&stats));
            let render = move || face::render_metrics(&st, &s.stats());
            let (bound, handle) = spawn_metrics(addr, render, shutdown.clone())?;
            eprintln!("nvdepot memcache metrics at http://{bound}/metrics");
            Some(handle)
        }
        None => None,
    };
    let face = Arc::new(MemcacheFace::new(Arc::clone(&storage), stats, limits));
    let served = server.serve(face, &shutdown);
    if let Some(handle) = metrics {
        // `serve` returned because shutdown triggered, which stops it too.
        shutdown.trigger();
        let _ = handle.join();
    }
    if let Err(e) = &served {
        warn!("memcache: the server stopped: {e}");
    }
    info!("memcache: closing the store (writing the index checkpoint)");
    // `serve` joined every worker thread: this is the last reference.
    let storage = Arc::into_inner(storage).ok_or("the store is still in use at shutdown")?;
    storage.close()?;
    info!("memcache: store closed");
    Ok(served?)
}

/// `1G`, `8M`, `1536K` or plain bytes: the largest exact binary unit.
fn human(bytes: u64) -> String {
    for (shift, unit) in [(40, "T"), (30, "G"), (20, "M"), (10, "K")] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    bytes.to_string()
}

fn open_storage(args: &MemcacheArgs) -> Result<MemcacheStorage, BoxError> {
    let mut opts = crate::store_dir::cache_options(&args.data, args.size, args.segment_size)?;
    opts.eviction = args.eviction;
    opts.sync = args.ack == Ack::Flushed;
    opts.write_behind = args.ack == Ack::Buffered;
    let cache = CacheStore::open(&args.data, opts, args.memory_limit << 20)?;
    let holds = cache.item_bytes_max() as u64;
    if args.max_item_size > holds {
        let message = format!(
            "-I {} is larger than this store's largest value, {holds} bytes",
            args.max_item_size
        );
        cache.close()?;
        return Err(message.into());
    }
    Ok(MemcacheStorage::new(cache))
}

#[cfg(test)]
mod tests {
    use super::{human, parse_item_size};

    #[test]
    fn human_sizes() {
        assert_eq!(human(1 << 30), "1G");
        assert_eq!(human(512 << 20), "512M");
        assert_eq!(human(1536 << 10), "1536K");
        assert_eq!(human(1000), "1000");
        assert_eq!(human(0), "0");
    }

    #[test]
    fn item_sizes() {
        assert_eq!(parse_item_size("1m"), Ok(1 << 20));
        assert_eq!(parse_item_size("1k"), Ok(1024));
        assert_eq!(parse_item_size("2048"), Ok(2048));
        assert_eq!(parse_item_size("128m"), Ok(128 << 20));
        assert!(parse_item_size("1023").is_err());
        assert!(parse_item_size("129m").is_err());
        assert!(parse_item_size("1g").is_err());
    }
}
