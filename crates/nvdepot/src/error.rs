//! The errors the command line reports (exit code 2).

use std::path::PathBuf;

/// Why a command could not run to completion.
#[derive(Debug)]
pub enum CliError {
    /// The engine refused or failed.
    Engine(nvdepot_engine::Error),
    /// Writing the command's output failed.
    Stdout(std::io::Error),
    /// Preparing the store's directory failed.
    Dir {
        path: PathBuf,
        source: std::io::Error,
    },
    /// There is no store where one must already exist.
    NoStore(PathBuf),
    /// Reading or writing a file named on the command line failed.
    File {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CliError::Engine(e) => write!(f, "{e}"),
            CliError::Stdout(e) => write!(f, "writing to stdout: {e}"),
            CliError::File { path, source } => write!(f, "{}: {source}", path.display()),
            CliError::Dir { path, source } => {
                write!(f, "creating directory {}: {source}", path.display())
            }
            CliError::NoStore(path) => write!(
                f,
                "no store at {} (`nvdepot kv put` or `nvdepot kv load` creates one)",
                path.display()
            ),
        }
    }
}

impl std::error::Error for CliError {}

impl From<nvdepot_engine::Error> for CliError {
    fn from(e: nvdepot_engine::Error) -> Self {
        CliError::Engine(e)
    }
}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        CliError::Stdout(e)
    }
}
