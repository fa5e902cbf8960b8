//! `nvdepot bench engine`: the store in process, on the sync and the uring
//! backend, at given queue depths (see `nvdepot_bench::engine`).
//!
//! Loads the keys once (a store at `--data` that already holds them is
//! reused), then runs every combination of `--backend`, `--op` and `--qd`
//! for `--duration` seconds each, printing one table row per run; `--json
//! FILE` writes all of them. Exit codes: 0 done, 1 done but some GET
//! returned a wrong or missing value, 2 could not run.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use nvdepot_bench::engine::{self, Backend, EngineConfig, EngineOp};

use crate::bench::parse_count;
use crate::size::parse_size;

#[derive(Debug, Args)]
pub struct EngineBenchArgs {
    /// Data file or block device; repeat (or separate with commas) to
    /// stripe the store over several.
    #[arg(
        long,
        value_name = "PATH",
        default_value = "./data/bench-engine.nvd",
        value_delimiter = ','
    )]
    data: Vec<PathBuf>,
    /// Bytes of each data file to create (ignored for an existing store or
    /// a block device).
    #[arg(long, value_name = "BYTES", default_value = "4G", value_parser = parse_size)]
    size: u64,
    /// Segment size of a store this creates.
    #[arg(long, value_name = "BYTES", default_value = "64M", value_parser = parse_size)]
    segment_size: u64,
    /// Grain size of a store this creates: 512 packs records tightly; 4096
    /// starts every record on a 4 KiB page, so a record of at most 4 KiB is
    /// read with one page-aligned 4 KiB read.
    #[arg(long, value_name = "BYTES", default_value = "512", value_parser = parse_grain)]
    grain_size: u32,
    /// Backends to run: sync (a thread per outstanding operation, blocking
    /// pread/pwrite) and/or uring (io_uring thread per core).
    #[arg(long, value_name = "B", default_value = "uring", value_delimiter = ',', value_parser = parse_backend)]
    backend: Vec<Backend>,
    /// Operations to measure: get, put (random overwrites of loaded keys)
    /// and/or insert (puts of new keys into the free space, as uDepot's PUTs).
    #[arg(long, value_name = "OP", default_value = "get", value_delimiter = ',', value_parser = parse_op)]
    op: Vec<EngineOp>,
    /// Queue depths (operations in flight), e.g. 1,32,128.
    #[arg(long, value_name = "N", default_value = "1,32,128", value_delimiter = ',',
          value_parser = clap::value_parser!(u32).range(1..=4096))]
    qd: Vec<u32>,
    /// Threads of the uring backend (one runtime each). Default: cores.
    #[arg(long, value_name = "T", value_parser = clap::value_parser!(u32).range(1..=256))]
    threads: Option<u32>,
    /// Bytes of every value.
    #[arg(long, value_name = "BYTES", default_value = "4096", value_parser = parse_size)]
    value_size: u64,
    /// Keys to load and pick from uniformly (suffixes k, m).
    #[arg(long, value_name = "K", default_value = "500k", value_parser = parse_count)]
    keys: u64,
    /// Seconds of each measured run.
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    duration: f64,
    /// Acknowledge puts before the device flush (flushed every 100 ms), as
    /// a cache would; default: durable puts.
    #[arg(long)]
    no_sync: bool,
    /// Seed of the key choices.
    #[arg(long, value_name = "X", default_value_t = 1)]
    seed: u64,
    /// Also write the results as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

fn parse_grain(text: &str) -> Result<u32, String> {
    let bytes = parse_size(text)?;
    if !(512..=4096).contains(&bytes) || !bytes.is_power_of_two() {
        return Err(format!(
            "grain size {text} must be a power of two from 512 to 4096"
        ));
    }
    Ok(bytes as u32)
}

fn parse_backend(text: &str) -> Result<Backend, String> {
    match text {
        "sync" => Ok(Backend::Sync),
        "uring" => Ok(Backend::Uring),
        _ => Err(format!("unknown backend {text:?}: expected sync or uring")),
    }
}

fn parse_op(text: &str) -> Result<EngineOp, String> {
    match text {
        "get" => Ok(EngineOp::Get),
        "put" => Ok(EngineOp::Put),
        "insert" => Ok(EngineOp::Insert),
        _ => Err(format!(
            "unknown operation {text:?}: expected get, put or insert"
        )),
    }
}

pub fn run(args: EngineBenchArgs) -> ExitCode {
    match bench(args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("nvdepot bench engine: {e}");
            ExitCode::from(2)
        }
    }
}

fn bench(args: EngineBenchArgs) -> Result<bool, String> {
    if !(args.duration > 0.0 && args.duration <= 86_400.0) {
        return Err(format!(
            "--duration {} is out of range (0, 86400]",
            args.duration
        ));
    }
    if args.keys == 0 || args.keys > u32::MAX as u64 {
        return Err(format!(
            "--keys {} is out of range 1..=4294967295",
            args.keys
        ));
    }
    // Past a quarter of a segment values are large (chunks and a head).
    if args.value_size == 0 || args.value_size > 1 << 30 {
        return Err(format!(
            "--value-size {} is out of range 1..=1G",
            args.value_size
        ));
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let base = EngineConfig {
        paths: args.data.clone(),
        device_bytes: args.size,
        segment_bytes: args.segment_size,
        grain_bytes: args.grain_size,
        backend: Backend::Uring,
        op: EngineOp::Get,
        qd: 1,
        threads: args.threads.map_or(cores, |t| t as usize),
        value_bytes: args.value_size as usize,
        keys: args.keys,
        duration: Duration::from_secs_f64(args.duration),
        sync_puts: !args.no_sync,
        seed: args.seed,
    };
    for p in &args.data {
        if let Some(dir) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
    }
    let store = Arc::new(engine::open_store(&base)?);
    let paths: Vec<String> = args.data.iter().map(|p| p.display().to_string()).collect();
    println!(
        "store {} ({} device(s)), {} keys of 8-32 B, values {} B, {} puts",
        paths.join(","),
        args.data.len(),
        args.keys,
        args.value_size,
        if args.no_sync { "unflushed" } else { "durable" }
    );
    let load = engine::load(&store, &base)?;
    if load.keys_written > 0 {
        println!(
            "load: {} keys in {:.1} s ({:.0} puts/s)",
            load.keys_written,
            load.seconds,
            load.keys_written as f64 / load.seconds
        );
    } else {
        println!("load: store already holds the keys, reused");
    }
    println!("{}", engine::table_header());
    let mut reports = Vec::new();
    let mut clean = true;
    for &op in &args.op {
        for &backend in &args.backend {
            for &qd in &args.qd {
                let cfg = EngineConfig {
                    backend,
                    op,
                    qd: qd as usize,
                    ..base.clone()
                };
                let r = engine::run(&store, &cfg)?;
                println!("{}", engine::table_row(&r));
                clean &= r.errors == 0;
                reports.push(r);
            }
        }
    }
    if let Some(path) = &args.json {
        std::fs::write(path, engine::json(&load, &reports))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    match Arc::try_unwrap(store) {
        Ok(store) => store.close().map_err(|e| format!("close: {e}"))?,
        Err(_) => return Err("store still in use at exit".into()),
    }
    Ok(clean)
}
