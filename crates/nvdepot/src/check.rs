//! `nvdepot check`: verifies a store offline and reports what it found.

use std::path::PathBuf;

use clap::Args;
use nvdepot_engine::Options;

use crate::error::CliError;
use crate::Outcome;

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The store: its directory or block device.
    #[arg(long, value_name = "PATH", default_value = "./data")]
    data: PathBuf,
}

/// Prints the engine's report; [`Outcome::Negative`] (exit 1) when it found
/// corruption.
pub fn run(args: CheckArgs) -> Result<Outcome, CliError> {
    if !args.data.exists() {
        return Err(CliError::NoStore(args.data));
    }
    let opts = Options {
        progress: crate::store_dir::recovery_progress(),
        ..Options::default()
    };
    let report = nvdepot_engine::check(&args.data, &opts)?;
    let text = report.to_string();
    print!("{text}");
    if !text.ends_with('\n') {
        println!();
    }
    Ok(if report.is_ok() {
        Outcome::Success
    } else {
        Outcome::Negative
    })
}
