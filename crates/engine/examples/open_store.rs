//! Opens an existing store and prints how the open went (for timing and
//! profiling recovery): `open_store DIR [--close]`. Without `--close` the
//! store is dropped without a checkpoint, so the next open scans the log.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args()
        .nth(1)
        .ok_or("usage: open_store DIR [--close]")?;
    let close = std::env::args().any(|a| a == "--close");
    let store = nvdepot_engine::Store::open(dir.as_ref(), &nvdepot_engine::Options::default())?;
    let r = store.open_report().clone();
    println!(
        "open: {:.3} s (log scan {:.3} s), checkpoint: {}, keys {}, records scanned {}",
        r.seconds, r.scan_seconds, r.clean, r.keys, r.records_scanned
    );
    if close {
        store.close()?;
    }
    Ok(())
}
