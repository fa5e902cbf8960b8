//! `nvdepot`: the command-line face of the nvdepot store.
//!
//! - `nvdepot kv ...` opens a store and runs one key-value command on it, in
//!   the spirit of RocksDB's `ldb` (see [`kv`]).
//! - `nvdepot check ...` verifies a store offline (see [`check`]).
//! - `nvdepot memcache ...` serves a store over the memcached protocols
//!   until SIGTERM/SIGINT (see [`memcache`]).
//! - `nvdepot serve ...` serves a store over the Redis protocol until
//!   SIGTERM/SIGINT or `SHUTDOWN` (see [`serve`]).
//! - `nvdepot bench memcache ...` loads a memcached-protocol server (see [`bench`]).
//! - `nvdepot bench index ...` measures the in-DRAM index (see [`bench_index`]).
//! - `nvdepot bench engine ...` measures the store in process (see [`bench_engine`]).
//!
//! Exit codes, the same for every command: 0 success, 1 a negative answer
//! (key absent, verification failed, corruption found), 2 an error (bad
//! arguments, IO error, engine error), printed as `error: <message>` on
//! stderr. Every command that opened a store closes it cleanly before
//! exiting, so the next open restores the index checkpoint instead of
//! scanning the log.

/// The servers allocate per request (replies, scripts' Lua objects and
/// KEYS/ARGV, staged writes, collection pages) from several threads;
/// mimalloc serves that from thread-local free lists with less CPU than
/// glibc's arenas. Version 2 without transparent huge pages, and
/// collected wherever the server trims ([`collect_allocator`]), keeps the
/// server's memory bounds (tests/bounded.rs).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

extern "C" {
    /// mimalloc's collection of the calling thread's heap: with `force`,
    /// frees its empty pages and returns unused segments' memory to the OS.
    fn mi_collect(force: bool);
}

/// Gives the calling thread's free mimalloc pages back to the OS.
fn collect_allocator() {
    // SAFETY: mi_collect only walks the calling thread's own heap and the
    // allocator's free segments; no block in use moves or is freed.
    unsafe { mi_collect(true) }
}

mod bench;
mod bench_engine;
mod bench_index;
mod check;
mod error;
mod kv;
mod memcache;
mod serve;
mod signals;
mod size {
    pub use nvdepot_embed::parse_size;
}
mod store_dir;
mod workload;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::error::CliError;

/// A persistent key-value store for fast block devices (uDepot design).
#[derive(Debug, Parser)]
#[command(name = "nvdepot", version, about)]
struct Cli {
    /// More logging on stderr: -v info, -vv debug, -vvv trace. `RUST_LOG`,
    /// when set, takes precedence. Default: warn.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run one key-value command against a store.
    Kv(kv::KvArgs),
    /// Verify a store offline: every record's checksum, index against log.
    Check(check::CheckArgs),
    /// Serve a store as a memcached-compatible server (memcached's flags).
    Memcache(memcache::MemcacheArgs),
    /// Serve a store as a durable Redis-compatible server (RESP2/RESP3).
    Serve(serve::ServeArgs),
    /// Load generators: `bench memcache --server HOST:PORT ...`.
    Bench(bench::BenchArgs),
}

/// Outcome of a command that ran to completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Exit 0.
    Success,
    /// Exit 1: the command ran but the answer is negative (key absent,
    /// verification or check failed). The command printed why.
    Negative,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.verbose);
    nvdepot_server::set_allocator_trim(collect_allocator);
    let result = match cli.command {
        Command::Kv(args) => kv::run(args),
        Command::Check(args) => check::run(args),
        Command::Memcache(args) => return memcache::run(args),
        Command::Serve(args) => return serve::run(args),
        Command::Bench(args) => return bench::run(args),
    };
    match result {
        Ok(Outcome::Success) => ExitCode::SUCCESS,
        Ok(Outcome::Negative) => ExitCode::from(1),
        // A reader that went away (`nvdepot kv scan | head`) is not an error.
        Err(CliError::Stdout(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

/// Logs go to stderr so stdout carries only command output.
fn init_logging(verbose: u8) {
    use tracing_subscriber::EnvFilter;
    let default = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = match std::env::var("RUST_LOG") {
        Ok(spec) if !spec.trim().is_empty() => EnvFilter::new(spec),
        _ => EnvFilter::new(default),
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}
