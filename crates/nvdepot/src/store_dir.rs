//! Where a server's store lives: what `nvdepot memcache` and `nvdepot
//! serve` both do with `--data`, `--size` and `--segment-size`.

use std::io::IsTerminal;
use std::path::Path;

use nvdepot_cache::CacheStore;
use nvdepot_engine::Options;

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
    opts.progress = std::io::stderr().is_terminal();
    if let Some(bytes) = segment_size {
        opts = opts.segment_bytes(bytes);
    }
    Ok(opts)
}
