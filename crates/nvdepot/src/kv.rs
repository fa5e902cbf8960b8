//! `nvdepot kv`: one key-value command against a store, in the spirit of
//! RocksDB's `ldb`.
//!
//! Only `put` and `load` create a store (of `--size` bytes) or a namespace
//! that is missing; every other command needs them to exist already.

use std::ffi::OsString;
use std::io::{BufWriter, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use nvdepot_engine::{Namespace, Options, Store};

use crate::error::CliError;
use crate::size::parse_size;
use crate::workload::{self, Workload};
use crate::Outcome;

#[derive(Debug, Args)]
pub struct KvArgs {
    /// The store: a directory (its data file is created inside) or a block
    /// device.
    #[arg(long, value_name = "PATH", default_value = "./data", global = true)]
    data: PathBuf,
    /// Bytes to allocate when `put`/`load` create the store; suffixes K, M,
    /// G, T (binary). Ignored for an existing store.
    #[arg(long, value_name = "BYTES", default_value = "1G", value_parser = parse_size,
          global = true)]
    size: u64,
    /// Segment size (the unit of allocation and garbage collection) when
    /// `put`/`load` create the store; a store needs a few segments, so
    /// small stores want small segments. Default: the engine's (64M).
    #[arg(long, value_name = "BYTES", value_parser = parse_size, global = true)]
    segment_size: Option<u64>,
    /// Namespace to use instead of the default one; `put` and `load`
    /// create it when missing.
    #[arg(long, value_name = "NAME", global = true)]
    namespace: Option<String>,
    /// Open even if crash recovery finds damage to acknowledged records
    /// (`nvdepot check` lists it): drop only the damaged records, keep
    /// every other one, and report what was dropped. Without it such a
    /// store refuses to open.
    #[arg(long, global = true)]
    salvage: bool,
    #[command(subcommand)]
    command: KvCommand,
}

#[derive(Debug, Subcommand)]
enum KvCommand {
    /// Store VALUE (or the contents of --file) under KEY (creates the
    /// store if missing).
    Put {
        key: OsString,
        #[arg(required_unless_present = "file")]
        value: Option<OsString>,
        /// Store this file's contents (up to the store's largest value,
        /// 1 GiB by default) instead of VALUE.
        #[arg(long, value_name = "PATH", conflicts_with = "value")]
        file: Option<PathBuf>,
    },
    /// Print the value of KEY and a newline (or write it to --output);
    /// exit 1 if KEY is absent.
    Get {
        key: OsString,
        /// Write the value, exactly, to this file instead, streaming it a
        /// chunk at a time.
        #[arg(long, value_name = "PATH")]
        output: Option<PathBuf>,
    },
    /// Delete KEY; exit 1 if KEY was absent.
    Del { key: OsString },
    /// Print every key of the namespace, one per line, in no particular order.
    Scan,
    /// Print store statistics, namespaces with key counts and how the
    /// store was opened.
    Stats,
    /// Put keys key-0..key-<COUNT-1> with values derived from (SEED, i),
    /// printing `acked <i>` as puts return (creates the store if missing).
    Load {
        #[command(flatten)]
        work: WorkloadArgs,
        /// Print `acked <i>` after every this many puts (and after the last).
        #[arg(long, value_name = "N", default_value_t = 1000)]
        ack_every: u64,
    },
    /// Check that keys key-0..key-<COUNT-1> hold the values `load` wrote;
    /// exit 1 at the first missing or wrong one.
    Verify {
        #[command(flatten)]
        work: WorkloadArgs,
    },
}

#[derive(Debug, Args)]
struct WorkloadArgs {
    /// Number of keys.
    #[arg(long, value_name = "N")]
    count: u64,
    /// Bytes per value; suffixes K, M, G, T.
    #[arg(long, value_name = "BYTES", default_value = "100", value_parser = parse_size)]
    value_size: u64,
    /// Seed the values are derived from.
    #[arg(long, value_name = "X", default_value_t = 0)]
    seed: u64,
}

impl WorkloadArgs {
    fn workload(&self) -> Workload {
        Workload {
            count: self.count,
            value_bytes: usize::try_from(self.value_size).unwrap_or(usize::MAX),
            seed: self.seed,
        }
    }
}

/// Opens the store, runs the command, and closes the store cleanly (writing
/// the index checkpoint) whatever the command's outcome.
pub fn run(args: KvArgs) -> Result<Outcome, CliError> {
    let creates = matches!(args.command, KvCommand::Put { .. } | KvCommand::Load { .. });
    let store = open(&args, creates)?;
    let outcome = execute(&store, &args, creates);
    let closed = store.close();
    let outcome = outcome?;
    closed?;
    Ok(outcome)
}

fn open(args: &KvArgs, create: bool) -> Result<Store, CliError> {
    let mut opts = Options {
        progress: crate::store_dir::recovery_progress(),
        salvage: args.salvage,
        ..Options::default()
    };
    if create {
        if !args.data.exists() {
            std::fs::create_dir_all(&args.data).map_err(|source| CliError::Dir {
                path: args.data.clone(),
                source,
            })?;
        }
        opts = opts.create_bytes(args.size);
        if let Some(bytes) = args.segment_size {
            opts = opts.segment_bytes(bytes);
        }
    } else if !args.data.exists() {
        return Err(CliError::NoStore(args.data.clone()));
    }
    let store = Store::open(&args.data, &opts)?;
    for d in &store.open_report().damage {
        eprintln!("recovery: {d}");
    }
    Ok(store)
}

fn namespace(store: &Store, name: Option<&str>, create: bool) -> Result<Namespace, CliError> {
    let Some(name) = name else {
        return Ok(store.default_namespace());
    };
    match store.namespace(name) {
        Some(ns) => Ok(ns),
        None if create => Ok(store.create_namespace(name)?),
        None => Err(nvdepot_engine::Error::NoSuchNamespace(name.to_owned()).into()),
    }
}

fn execute(store: &Store, args: &KvArgs, creates: bool) -> Result<Outcome, CliError> {
    let ns = namespace(store, args.namespace.as_deref(), creates)?;
    let mut out = BufWriter::new(std::io::stdout().lock());
    let outcome = match &args.command {
        KvCommand::Put { key, value, file } => {
            let value = match (value, file) {
                (_, Some(path)) => read_value(store, path)?,
                (Some(v), None) => v.as_bytes().to_vec(),
                (None, None) => unreachable!("clap requires VALUE or --file"),
            };
            store.put(ns, key.as_bytes(), &value)?;
            Outcome::Success
        }
        KvCommand::Get { key, output: None } => get(store, ns, key, &mut out)?,
        KvCommand::Get {
            key,
            output: Some(path),
        } => get_to_file(store, ns, key, path)?,
        KvCommand::Del { key } => {
            if store.delete(ns, key.as_bytes())? {
                Outcome::Success
            } else {
                eprintln!("not found: {}", key.to_string_lossy());
                Outcome::Negative
            }
        }
        KvCommand::Scan => scan(store, ns, &mut out)?,
        KvCommand::Stats => stats(store, &mut out)?,
        KvCommand::Load { work, ack_every } => {
            workload::load(store, ns, work.workload(), *ack_every, &mut out)?
        }
        KvCommand::Verify { work } => workload::verify(store, ns, work.workload(), &mut out)?,
    };
    out.flush()?;
    Ok(outcome)
}

fn get(
    store: &Store,
    ns: Namespace,
    key: &OsString,
    out: &mut impl Write,
) -> Result<Outcome, CliError> {
    match store.get(ns, key.as_bytes())? {
        Some(value) => {
            out.write_all(&value)?;
            out.write_all(b"\n")?;
            Ok(Outcome::Success)
        }
        None => {
            eprintln!("not found: {}", key.to_string_lossy());
            Ok(Outcome::Negative)
        }
    }
}

/// The contents of `path`, refused before reading if longer than the
/// store takes.
fn read_value(store: &Store, path: &Path) -> Result<Vec<u8>, CliError> {
    let file_error = |source| CliError::File {
        path: path.to_path_buf(),
        source,
    };
    let len = std::fs::metadata(path).map_err(file_error)?.len();
    let max = store.value_bytes_max();
    if len > max as u64 {
        return Err(nvdepot_engine::Error::ValueTooLarge {
            len: usize::try_from(len).unwrap_or(usize::MAX),
            max,
        }
        .into());
    }
    std::fs::read(path).map_err(file_error)
}

/// Streams the value of `key` into `path` (a large value a chunk at a
/// time).
fn get_to_file(
    store: &Store,
    ns: Namespace,
    key: &OsString,
    path: &Path,
) -> Result<Outcome, CliError> {
    let Some(mut reader) = store.value_reader(ns, key.as_bytes())? else {
        eprintln!("not found: {}", key.to_string_lossy());
        return Ok(Outcome::Negative);
    };
    let file_error = |source| CliError::File {
        path: path.to_path_buf(),
        source,
    };
    let mut file = BufWriter::new(std::fs::File::create(path).map_err(file_error)?);
    std::io::copy(&mut reader, &mut file).map_err(file_error)?;
    file.flush().map_err(file_error)?;
    Ok(Outcome::Success)
}

fn scan(store: &Store, ns: Namespace, out: &mut impl Write) -> Result<Outcome, CliError> {
    for item in store.iter(ns) {
        let (key, _value) = item?;
        out.write_all(&key)?;
        out.write_all(b"\n")?;
    }
    Ok(Outcome::Success)
}

/// `name value` lines, like the engine's own [`nvdepot_engine::Stats`].
fn stats(store: &Store, out: &mut impl Write) -> Result<Outcome, CliError> {
    let open = store.open_report();
    writeln!(out, "open.clean {}", open.clean)?;
    writeln!(out, "open.created {}", open.created)?;
    writeln!(out, "open.seconds {:.3}", open.seconds)?;
    writeln!(out, "open.keys {}", open.keys)?;
    writeln!(out, "open.records_scanned {}", open.records_scanned)?;
    for (name, _ns, keys) in store.namespaces() {
        let name = if name.is_empty() {
            "default"
        } else {
            name.as_str()
        };
        writeln!(out, "namespace.{name}.keys {keys}")?;
    }
    let stats = store.stats().to_string();
    out.write_all(stats.as_bytes())?;
    if !stats.ends_with('\n') {
        writeln!(out)?;
    }
    Ok(Outcome::Success)
}
