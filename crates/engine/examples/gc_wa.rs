//! Write amplification of garbage collection under uniform random updates
//! (DESIGN §10: ≤ 2.0 at 80 % full).
//!
//! ```text
//! cargo run --release -p nvdepot-engine --example gc_wa -- [FILL_PERCENT] [DEVICE_MIB]
//! ```
//! Fills an in-memory device to FILL_PERCENT (default 80) of its segment
//! space with 4 KiB values, then overwrites uniformly random keys until
//! five times the live data has been written, and prints the write
//! amplification of that update phase: device bytes written by the log ÷
//! bytes of user records.

use std::sync::Arc;

use nvdepot_engine::{Options, Store, WriteOp};
use nvdepot_io::{Device, MemDevice};
use rand::{Rng, SeedableRng};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let fill: u64 = std::env::args()
        .nth(1)
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(80);
    let mib: u64 = std::env::args()
        .nth(2)
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(1024);
    let dev = Arc::new(MemDevice::new(mib << 20, 512));
    let opts = Options {
        segment_bytes: 8 << 20,
        sync: false,
        ..Options::default()
    }
    .create_bytes(0);
    let store = Store::open_devices(vec![dev as Arc<dyn Device>], &opts)?;
    let ns = store.default_namespace();
    let record = 4608u64; // 4 KiB value + header + key, in whole grains
    let space = store.stats().capacity_bytes;
    let keys = space * fill / 100 / record;
    let value = vec![0x5au8; 4096];
    let names: Vec<String> = (0..keys).map(|i| format!("key-{i:012}")).collect();
    for chunk in names.chunks(256) {
        let ops: Vec<WriteOp> = chunk
            .iter()
            .map(|k| WriteOp::Put {
                key: k.as_bytes(),
                value: &value,
            })
            .collect();
        store.write_batch(ns, &ops)?;
    }
    let before = store.stats();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let updates = keys * 5;
    for _ in 0..updates / 64 {
        let batch: Vec<&String> = (0..64)
            .map(|_| &names[rng.gen_range(0..keys as usize)])
            .collect();
        let ops: Vec<WriteOp> = batch
            .iter()
            .map(|k| WriteOp::Put {
                key: k.as_bytes(),
                value: &value,
            })
            .collect();
        store.write_batch(ns, &ops)?;
    }
    let after = store.stats();
    let user = after.user_bytes_written - before.user_bytes_written;
    let device = after.device_bytes_written - before.device_bytes_written;
    println!(
        "fill {fill}% of {} MiB ({keys} keys of 4 KiB), {updates} uniform updates: write amplification {:.3} (GC segments {}, GC bytes {})",
        space >> 20,
        device as f64 / user as f64,
        after.gc_segments_collected - before.gc_segments_collected,
        after.gc_bytes_written - before.gc_bytes_written,
    );
    Ok(())
}
