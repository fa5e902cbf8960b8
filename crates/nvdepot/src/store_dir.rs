//! Where a server's store lives: what `nvdepot memcache` and `nvdepot
//! serve` both do with `--data`, `--size` and `--segment-size`.

use std::io::IsTerminal;
use std::path::Path;

use nvdepot_cache::CacheStore;
use nvdepot_engine::{Options, Progress};

/// Creates `data` when missing and returns the cache layer's default
/// options for a store there: created `size` bytes large (when new), with
/// `segment_size` segments if given, a progress bar when stderr is a
/// terminal.
pub fn cache_options(data: &Path, size: u64, segment_size: Option<u64>) -> Result<Options, String> {
    if !data.exists() {
        std::fs::create_dir_all(data)
            .map_err(|e| format!("creating directory {}: {e}", data.display()))?;
    }
    let mut opts = CacheStore::default_options().create_bytes(size);
    opts.progress = recovery_progress();
    if let Some(bytes) = segment_size {
        opts = opts.segment_bytes(bytes);
    }
    Ok(opts)
}

/// A progress bar on stderr for the log scan of an index rebuild (after a
/// crash), when stderr is a terminal.
pub fn recovery_progress() -> Option<Progress> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = std::sync::OnceLock::<indicatif::ProgressBar>::new();
    Some(Progress::new(move |done, total| {
        let bar = bar.get_or_init(|| {
            indicatif::ProgressBar::new(total).with_style(
                indicatif::ProgressStyle::with_template(
                    "recovering {bar:40} {pos}/{len} segments {per_sec} eta {eta}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            )
        });
        // Two scanning threads report; positions may arrive out of order.
        bar.set_position(done.max(bar.position()));
        if done >= total {
            bar.finish_and_clear();
        }
    }))
}
