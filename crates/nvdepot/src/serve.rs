//! `nvdepot serve`: a durable Redis-compatible store over the engine, on
//! the server kit (Redis-style flags where they apply). The commands are
//! the `nvdepot-redis` crate's; this file parses the flags, opens the
//! store and starts the server.
//!
//! Every write is on the device when its reply is sent (`--appendfsync
//! always`, the default: written and the device cache flushed, with group
//! commit across connections); `everysec` acknowledges after the O_DIRECT
//! write and flushes the device cache every second. SIGTERM, SIGINT or
//! `SHUTDOWN` stop it gracefully (index checkpoint written).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use nvdepot_cache::resp::RespStore;
use nvdepot_cache::CacheStore;
use nvdepot_resp::Limits;
use nvdepot_server::{default_threads, Server, ServerConfig, Shutdown};
use tracing::{info, warn};

use crate::size::parse_size;
use nvdepot_redis::{expiry, Cluster, Config, RespFace};

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// TCP port; 0 lets the system pick one (printed at start-up).
    #[arg(long, value_name = "NUM", default_value_t = 6379)]
    port: u16,
    /// Addresses to listen on (Redis's `bind`), comma-separated or
    /// repeated.
    #[arg(
        long,
        value_name = "ADDR",
        value_delimiter = ',',
        default_value = "127.0.0.1"
    )]
    bind: Vec<String>,
    /// Clients must `AUTH <password>` (or `HELLO … AUTH default <password>`)
    /// before other commands.
    #[arg(long, value_name = "PASSWORD")]
    requirepass: Option<String>,
    /// Most simultaneous clients; more get `-ERR max number of clients
    /// reached` and are closed.
    #[arg(long, value_name = "NUM", default_value_t = 10000,
          value_parser = clap::value_parser!(u32).range(1..))]
    maxclients: u32,
    /// Seconds a client may stay idle before it is closed (Redis's
    /// `timeout`; 0: never); `CONFIG SET timeout` changes it.
    #[arg(long, value_name = "SECS", default_value_t = 0,
          value_parser = clap::value_parser!(u32).range(0..=i32::MAX as i64))]
    timeout: u32,
    /// Databases (`SELECT 0..N-1`), each an engine namespace.
    #[arg(long, value_name = "NUM", default_value_t = 16,
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    databases: u32,
    /// `always`: a write is answered once on the device (flushed);
    /// `everysec`: once written, the device cache flushed every second (a
    /// power loss can lose the last second; a kill -9 loses nothing).
    #[arg(long, value_name = "WHEN", default_value = "always", value_parser = ["always", "everysec"])]
    appendfsync: String,
    /// Worker threads. Default: the number of cores.
    #[arg(long, value_name = "NUM", value_parser = clap::value_parser!(u32).range(1..))]
    threads: Option<u32>,
    /// Connections a worker takes before the next worker gets any (0:
    /// spread them over the workers from the first).
    #[arg(long, value_name = "NUM", default_value_t = 0)]
    pack_connections: u32,
    /// DRAM read cache of hot values, in megabytes (every key and value
    /// also lives on the device).
    #[arg(long, value_name = "MB", default_value_t = 64)]
    cache_mb: u64,
    /// The store: a directory, data file or block device.
    #[arg(long, value_name = "PATH", default_value = "./data")]
    data: PathBuf,
    /// Bytes to allocate when creating the store; suffixes K, M, G, T.
    #[arg(long, value_name = "BYTES", default_value = "1G", value_parser = parse_size)]
    size: u64,
    /// Segment size when creating the store (values up to a quarter of it).
    #[arg(long, value_name = "BYTES", value_parser = parse_size)]
    segment_size: Option<u64>,
    /// Redis Cluster mode: hash slots, MOVED/ASK redirections, the CLUSTER
    /// commands; the topology is set with `CLUSTERX SETNODES`
    /// (docs/DEPLOY.md).
    #[arg(long)]
    cluster_enabled: bool,
    /// Seconds between background sweeps removing expired keys (a scan of
    /// the store, made only when keys with an expiry exist; longer once a
    /// pass takes over a quarter of it); 0: off (they are still removed
    /// when read).
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    expiry_sweep_secs: u64,
    /// Where the cluster state (node id, topology) is kept. Default:
    /// `nodes.conf` in the data directory.
    #[arg(long, value_name = "PATH")]
    cluster_config_file: Option<PathBuf>,
}

type BoxError = Box<dyn std::error::Error>;

pub fn run(args: ServeArgs) -> ExitCode {
    match serve(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn serve(args: ServeArgs) -> Result<(), BoxError> {
    let config = ServerConfig {
        listen: args.bind.clone(),
        port: args.port,
        connections_max: args.maxclients as usize,
        threads: args.threads.map_or_else(default_threads, |t| t as usize),
        pack_connections: args.pack_connections as usize,
        ..ServerConfig::default()
    };
    let signals = crate::signals::block_termination_signals()?;
    let shutdown = Shutdown::new()?;
    crate::signals::spawn_signal_thread(signals, shutdown.clone(), "serve")?;
    // Bind first: a port in use fails at once, not after a long recovery.
    // Listen only once the store is open: until then a client is refused,
    // never answered by a server that cannot serve yet.
    let mut server = Server::bind(config)?;
    let store = Arc::new(open_store(&args)?);
    let cluster = if args.cluster_enabled {
        let conf = match &args.cluster_config_file {
            Some(p) => p.clone(),
            None if args.data.is_dir() => args.data.join("nodes.conf"),
            None => {
                return Err(format!(
                    "--cluster-config-file is needed when --data ({}) is not a directory",
                    args.data.display()
                )
                .into())
            }
        };
        let c = Cluster::open(&conf)?;
        info!(
            "serve: cluster mode, node {} (topology version {}, {})",
            c.myid(),
            c.version(),
            conf.display()
        );
        Some(Arc::new(c))
    } else {
        None
    };
    server.listen()?;
    let addrs: Vec<String> = server.local_addrs().iter().map(|a| a.to_string()).collect();
    eprintln!(
        "nvdepot serve listening on {} (data {}, databases {}, appendfsync {})",
        addrs.join(","),
        args.data.display(),
        args.databases,
        args.appendfsync
    );
    // Redis's 512 MiB, or less if the store holds less.
    let limits = Limits {
        bulk_bytes_max: Limits::default()
            .bulk_bytes_max
            .min(store.cache().item_bytes_max().saturating_sub(8)),
        ..Limits::default()
    };
    let face = Arc::new(RespFace::new(
        Arc::clone(&store),
        Config {
            password: args.requirepass.clone(),
            limits,
            port: server.local_addrs().first().map_or(args.port, |a| a.port()),
            appendfsync: if args.appendfsync == "always" {
                "always"
            } else {
                "everysec"
            },
            maxclients: args.maxclients,
            timeout_secs: args.timeout,
            bind: args.bind.join(" "),
        },
        cluster,
        shutdown.clone(),
    ));
    let sweeper = match args.expiry_sweep_secs {
        0 => None,
        s => Some(expiry::Sweeper::start(&store, Duration::from_secs(s))?),
    };
    let served = server.serve(face, &shutdown);
    if let Some(s) = sweeper {
        s.stop();
    }
    if let Err(e) = &served {
        warn!("serve: the server stopped: {e}");
    }
    info!("serve: closing the store (writing the index checkpoint)");
    let store = Arc::into_inner(store).ok_or("the store is still in use at shutdown")?;
    store.close()?;
    Ok(served?)
}

fn open_store(args: &ServeArgs) -> Result<RespStore, BoxError> {
    // Store mode: nothing is evicted; a full store refuses writes.
    let mut opts = crate::store_dir::cache_options(&args.data, args.size, args.segment_size)?;
    opts.cache_mode = false;
    // The longest key a record holds (its length is a u16). 64 << 10 here
    // was one past it: a 65 536-byte key panicked the record encoder.
    opts.key_bytes_max = u16::MAX as usize;
    opts.sync = args.appendfsync == "always";
    // Writers of one key share group commits (Redis's own behaviour: a
    // reader may see a write before its writer is answered; nothing is
    // answered before it is durable).
    opts.unlock_before_durable = true;
    opts.flush_interval_ms = 1000;
    let cache = CacheStore::open(&args.data, opts, args.cache_mb << 20)?;
    Ok(RespStore::new(cache, args.databases as usize)?)
}
