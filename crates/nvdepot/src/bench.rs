//! `nvdepot bench memcache` and `nvdepot bench resp`: the load generator
//! of `nvdepot-bench` behind a command line, memtier_benchmark-like, in the
//! memcached text protocol or the Redis protocol.
//!
//! Prints the settings, the preload rate (with `--preload`), then the
//! measured phase: ops/s, hit ratio, checked values and mismatches, and
//! get/set latency percentiles; `--json FILE` writes the same as JSON.
//! Exit codes: 0 done, 1 done but some value read back was wrong (a
//! mismatch) or the server answered errors, 2 could not run.
//!
//! Traffic goes only to loopback addresses unless `--allow-remote` says
//! otherwise: a load generator pointed at the wrong host is a flood.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand};
use nvdepot_bench::{memcache, report, Bench, Config, Distribution, Protocol, Stop};

use crate::size::parse_size;

#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    command: BenchCommand,
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// Load a memcached-protocol server (text get/set) and measure it.
    Memcache(MemcacheBenchArgs),
    /// Load a Redis-protocol server (GET/SET) and measure it; the same
    /// options as `bench memcache`.
    Resp(MemcacheBenchArgs),
    /// Measure the in-DRAM index against dashmap and a locked hashbrown map.
    Index(crate::bench_index::IndexBenchArgs),
    /// Measure the store in process: GET/PUT at given queue depths on the
    /// sync and io_uring backends.
    Engine(crate::bench_engine::EngineBenchArgs),
}

#[derive(Debug, Args)]
struct MemcacheBenchArgs {
    /// The server, HOST:PORT (a loopback address unless --allow-remote).
    #[arg(long, value_name = "HOST:PORT")]
    server: String,
    /// TCP connections.
    #[arg(long, value_name = "N", default_value_t = 16,
          value_parser = clap::value_parser!(u32).range(1..=65536))]
    connections: u32,
    /// Client threads driving the connections. Default: min(N, cores
    /// clamped to 2..4).
    #[arg(long, value_name = "T", value_parser = clap::value_parser!(u32).range(1..=256))]
    threads: Option<u32>,
    /// Requests outstanding per connection.
    #[arg(long, value_name = "D", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=4096))]
    pipeline: u32,
    /// Gets to sets, GETS:SETS (e.g. 9:1, 1:0 for gets only).
    #[arg(long, value_name = "GET:SET", default_value = "9:1", value_parser = parse_ratio)]
    ratio: (u32, u32),
    /// Value bytes of every set (suffixes K, M).
    #[arg(long, value_name = "BYTES", default_value = "1024", value_parser = parse_value_size)]
    value_size: u64,
    /// Key space: key:0000000000 .. key:K-1 (decimal suffixes k, m: 4m = 4 000 000).
    #[arg(long, value_name = "K", default_value = "100000", value_parser = parse_count)]
    keys: u64,
    /// Set every key once before the measured phase (pipelined), reporting
    /// the preload rate.
    #[arg(long)]
    preload: bool,
    /// Requests outstanding per connection during the preload.
    #[arg(long, value_name = "D", default_value_t = 16,
          value_parser = clap::value_parser!(u32).range(1..=4096))]
    preload_pipeline: u32,
    /// How gets and sets pick keys: uniform, zipf (theta 0.99) or zipf:THETA.
    #[arg(long, value_name = "DIST", default_value = "uniform", value_parser = Distribution::parse)]
    distribution: Distribution,
    /// Look-aside cache: after a get misses, set that key (as an
    /// application filling its cache would), so the hit ratio shows what
    /// the server's eviction keeps.
    #[arg(long)]
    set_on_miss: bool,
    /// Length of the measured phase in seconds (default 10).
    #[arg(long, value_name = "SECS", conflicts_with = "requests",
          value_parser = clap::value_parser!(u32).range(1..=86400))]
    duration: Option<u32>,
    /// Requests in the measured phase instead of a duration (0: none, e.g.
    /// to only --preload).
    #[arg(long, value_name = "N", value_parser = parse_count)]
    requests: Option<u64>,
    /// Share of gets whose value bytes are checked (every hit's key and
    /// length are).
    #[arg(long, value_name = "FRACTION", default_value_t = 0.01)]
    verify: f64,
    /// Seed of the key and operation choices.
    #[arg(long, value_name = "X", default_value_t = 1)]
    seed: u64,
    /// Pace the measured phase at this many requests per second over all
    /// connections (for soak runs at a share of the peak); default: as
    /// fast as the server answers.
    #[arg(long, value_name = "OPS")]
    rate: Option<f64>,
    /// Also write the results as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Allow a server that is not on a loopback address.
    #[arg(long)]
    allow_remote: bool,
}

/// `GETS:SETS`.
fn parse_ratio(text: &str) -> Result<(u32, u32), String> {
    let bad = || format!("invalid ratio {text:?}: expected GETS:SETS such as 9:1");
    let (g, s) = text.split_once(':').ok_or_else(bad)?;
    let g: u32 = g.trim().parse().map_err(|_| bad())?;
    let s: u32 = s.trim().parse().map_err(|_| bad())?;
    if g == 0 && s == 0 || u64::from(g) + u64::from(s) > u64::from(u32::MAX) {
        return Err(bad());
    }
    Ok((g, s))
}

fn parse_value_size(text: &str) -> Result<u64, String> {
    let bytes = parse_size(text)?;
    if !(1..=128 << 20).contains(&bytes) {
        return Err(format!("value size {text} is out of range: 1 byte to 128M"));
    }
    Ok(bytes)
}

/// A count with an optional decimal suffix: `250000`, `250k`, `4m`, `1g`.
pub(crate) fn parse_count(text: &str) -> Result<u64, String> {
    let lower = text.trim().to_ascii_lowercase();
    let (digits, factor) = match lower.as_bytes().last() {
        Some(b'k') => (&lower[..lower.len() - 1], 1_000),
        Some(b'm') => (&lower[..lower.len() - 1], 1_000_000),
        Some(b'g') => (&lower[..lower.len() - 1], 1_000_000_000),
        _ => (lower.as_str(), 1),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(factor))
        .ok_or_else(|| format!("invalid count {text:?}: expected e.g. 100000, 250k or 4m"))
}

pub fn run(args: BenchArgs) -> ExitCode {
    let (args, protocol) = match args.command {
        BenchCommand::Memcache(args) => (args, Protocol::Memcache),
        BenchCommand::Resp(args) => (args, Protocol::Resp),
        BenchCommand::Index(args) => return crate::bench_index::run(args),
        BenchCommand::Engine(args) => return crate::bench_engine::run(args),
    };
    match bench_memcache(args, protocol) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

type BoxError = Box<dyn std::error::Error>;

fn resolve(server: &str, allow_remote: bool) -> Result<SocketAddr, BoxError> {
    let addr = server
        .to_socket_addrs()
        .map_err(|e| format!("--server {server}: {e} (expected HOST:PORT)"))?
        .next()
        .ok_or_else(|| format!("--server {server}: no address"))?;
    if !addr.ip().is_loopback() && !allow_remote {
        return Err(format!(
            "--server {addr} is not a loopback address; pass --allow-remote to load it anyway"
        )
        .into());
    }
    Ok(addr)
}

/// Ok(true): clean run; Ok(false): mismatches or error replies.
fn bench_memcache(args: MemcacheBenchArgs, protocol: Protocol) -> Result<bool, BoxError> {
    let server = resolve(&args.server, args.allow_remote)?;
    if args.rate.is_some_and(|r| !(r > 0.0 && r.is_finite())) {
        return Err(format!("--rate {:?} must be a positive number", args.rate).into());
    }
    if !(0.0..=1.0).contains(&args.verify) {
        return Err(format!("--verify {} is not in [0, 1]", args.verify).into());
    }
    let connections = args.connections as usize;
    let config = Config {
        protocol,
        connections,
        threads: args
            .threads
            .map_or_else(|| memcache::default_threads(connections), |t| t as usize),
        pipeline: args.pipeline as usize,
        preload_pipeline: args.preload_pipeline as usize,
        ratio: args.ratio,
        value_bytes: args.value_size as usize,
        keys: args.keys,
        distribution: args.distribution,
        set_on_miss: args.set_on_miss,
        stop: match (args.requests, args.duration) {
            (Some(n), _) => Stop::Requests(n),
            (None, secs) => Stop::Duration(Duration::from_secs(u64::from(secs.unwrap_or(10)))),
        },
        verify_fraction: args.verify,
        seed: args.seed,
        rate: args.rate,
        ..Config::new(server)
    };
    if config.keys == 0 {
        return Err("--keys must be at least 1".into());
    }
    println!("{}", report::describe(&config));
    let mut bench = Bench::connect(&config)?;
    let preload = if args.preload {
        let r = bench.preload()?;
        println!("{}", report::preload_line(&r, config.value_bytes));
        Some(r)
    } else {
        None
    };
    let run = if config.stop == Stop::Requests(0) {
        None
    } else {
        let r = bench.run()?;
        print!("{}", report::run_table(&r));
        Some(r)
    };
    if let Some(path) = &args.json {
        std::fs::write(path, report::json(&config, preload.as_ref(), run.as_ref()))
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    let clean = [preload.as_ref(), run.as_ref()]
        .into_iter()
        .flatten()
        .all(|r| r.mismatches == 0 && r.errors == 0);
    if !clean {
        eprintln!("nvdepot bench: mismatched values or error replies (see above)");
    }
    Ok(clean)
}

#[cfg(test)]
mod tests {
    use super::{parse_count, parse_ratio, resolve};

    #[test]
    fn ratios() {
        assert_eq!(parse_ratio("9:1"), Ok((9, 1)));
        assert_eq!(parse_ratio("1:0"), Ok((1, 0)));
        assert!(parse_ratio("0:0").is_err());
        assert!(parse_ratio("9").is_err());
        assert!(parse_ratio("a:1").is_err());
    }

    #[test]
    fn counts() {
        assert_eq!(parse_count("100000"), Ok(100_000));
        assert_eq!(parse_count("250k"), Ok(250_000));
        assert_eq!(parse_count("4M"), Ok(4_000_000));
        assert!(parse_count("x").is_err());
        assert!(parse_count("").is_err());
    }

    #[test]
    fn loopback_only_by_default() {
        assert!(resolve("127.0.0.1:11211", false).is_ok());
        assert!(resolve("[::1]:11211", false).is_ok());
        assert!(resolve("192.0.2.1:11211", false).is_err());
        assert!(resolve("192.0.2.1:11211", true).is_ok());
        assert!(resolve("127.0.0.1", false).is_err());
    }
}
