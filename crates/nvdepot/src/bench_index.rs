//! `nvdepot bench index`: the in-DRAM index against dashmap and a locked
//! hashbrown table, in this process (see `nvdepot_bench::index`).
//!
//! Prints each run as it ends, then throughput per thread (min / median /
//! max over `--repeat` repetitions), latency percentiles laid out like
//! uDepot's Fig. 5c, and the goal lines; `--json FILE` writes every
//! run and the summary. Exit codes: 0 done (whether or not a goal was met:
//! the numbers say so), 2 could not run.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use nvdepot_bench::index::{self, report, IndexBenchConfig, Structure};

use crate::bench::parse_count;

#[derive(Debug, Args)]
pub struct IndexBenchArgs {
    /// Keys inserted, then looked up, in every run (decimal suffixes k, m:
    /// 50m = 50 000 000).
    #[arg(long, value_name = "N", default_value = "50m", value_parser = parse_count,
          conflicts_with = "quick")]
    keys: u64,
    /// Thread counts to measure, comma-separated.
    #[arg(long, value_name = "T,...", value_delimiter = ',', default_value = "1,2",
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    threads: Vec<u32>,
    /// Doublings of each table during the grow scenario: tables start sized
    /// for keys / 2^N (0 skips the scenario).
    #[arg(long, value_name = "N", default_value_t = 4,
          value_parser = clap::value_parser!(u32).range(0..=8))]
    grows: u32,
    /// Skip the scenario with tables pre-sized for every key.
    #[arg(long)]
    no_presized: bool,
    /// Measure only nvdepot's index (no dashmap, no hashbrown, no
    /// h32-probe).
    #[arg(long)]
    no_competitors: bool,
    /// Measure only these structures, comma-separated (nvdepot,
    /// nvdepot-prefetch, dashmap, hashbrown+rwlock, h32-probe: the bound of
    /// any table with uDepot's 32-slot neighbourhoods): to profile one alone.
    #[arg(long, value_name = "NAME,...", value_delimiter = ',', value_parser = parse_structure)]
    only: Vec<Structure>,
    /// Time one operation in N (a power of two; 1 times them all).
    #[arg(long, value_name = "N", default_value_t = 8)]
    latency_sample: u64,
    /// Repetitions of the whole set of runs (min / median / max reported).
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=100))]
    repeat: u32,
    /// Seed of the key stream.
    #[arg(long, value_name = "X", default_value_t = 1)]
    seed: u64,
    /// Also write every run and the summary as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// A smoke run of a few seconds: 200k keys, every operation timed.
    #[arg(long)]
    quick: bool,
}

fn parse_structure(name: &str) -> Result<Structure, String> {
    Structure::from_name(name).ok_or_else(|| {
        let names: Vec<&str> = Structure::ALL.iter().map(|s| s.name()).collect();
        format!("unknown structure {name:?}: one of {}", names.join(", "))
    })
}

pub fn run(args: IndexBenchArgs) -> ExitCode {
    let config = IndexBenchConfig {
        keys: if args.quick { 200_000 } else { args.keys },
        threads: args.threads.iter().map(|&t| t as usize).collect(),
        presized: !args.no_presized,
        grows: args.grows,
        competitors: !args.no_competitors,
        only: args.only,
        latency_sample: if args.quick { 1 } else { args.latency_sample },
        repeats: args.repeat,
        seed: args.seed,
    };
    match bench(&config, args.json.as_ref()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn bench(config: &IndexBenchConfig, json: Option<&PathBuf>) -> Result<(), String> {
    let empty = index::IndexReport {
        config: config.clone(),
        runs: Vec::new(),
    };
    println!("{}", report::describe(&empty));
    let result =
        index::run(config, |r| println!("{}", report::run_line(r))).map_err(|e| e.to_string())?;
    println!();
    print!("{}", report::summary_table(&result));
    println!();
    print!("{}", report::latency_table(&result));
    println!();
    print!("{}", report::goals(&result));
    if let Some(path) = json {
        std::fs::write(path, report::json(&result))
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    Ok(())
}
