//! Measures how long opening a store takes after a clean close (index
//! checkpoint) and after a crash (log scan), for N keys.
//!
//! ```text
//! cargo run --release -p nvdepot-engine --example reopen -- DIR KEYS VALUE_BYTES
//! ```
//! DIR must not hold a store yet (it is created there, sized to fit).

use std::sync::Arc;
use std::time::Instant;

use nvdepot_engine::{Options, Store, WriteOp};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 {
        eprintln!("usage: reopen DIR KEYS VALUE_BYTES");
        std::process::exit(2);
    }
    let dir = std::path::PathBuf::from(&args[1]);
    let keys: u64 = args[2].parse()?;
    let value_bytes: usize = args[3].parse()?;
    let record = (40 + 16 + value_bytes).div_ceil(512) * 512;
    let size = (keys * record as u64 * 3 / 2 + (512 << 20)).next_multiple_of(64 << 20);
    let opts = Options::default().create_bytes(size);
    let t = Instant::now();
    let store = Arc::new(Store::open(&dir, &opts)?);
    let ns = store.default_namespace();
    let threads = 4u64;
    std::thread::scope(|s| {
        for t in 0..threads {
            let store = store.clone();
            s.spawn(move || {
                let value = vec![t as u8; value_bytes];
                let mut i = t;
                while i < keys {
                    let names: Vec<String> = (0..256)
                        .map(|j| i + j * threads)
                        .take_while(|&k| k < keys)
                        .map(|k| format!("key-{k}"))
                        .collect();
                    let ops: Vec<WriteOp> = names
                        .iter()
                        .map(|k| WriteOp::Put {
                            key: k.as_bytes(),
                            value: &value,
                        })
                        .collect();
                    store.write_batch(ns, &ops).expect("load");
                    i += 256 * threads;
                }
            });
        }
    });
    let load = t.elapsed().as_secs_f64();
    println!(
        "loaded {keys} keys of {value_bytes} B in {load:.2} s ({:.0} keys/s)",
        keys as f64 / load
    );
    let store = Arc::into_inner(store).expect("sole owner");
    let t = Instant::now();
    store.close()?;
    println!("close (checkpoint) {:.2} s", t.elapsed().as_secs_f64());
    let store = Store::open(&dir, &Options::default())?;
    let r = store.open_report().clone();
    println!(
        "clean open: {:.3} s, checkpoint restored: {}, keys {}",
        r.seconds, r.clean, r.keys
    );
    assert!(r.clean && r.keys == keys);
    // Drop without close: the on-device state of a crash right after the
    // last acknowledged write (no checkpoint).
    drop(store);
    let store = Store::open(
        &dir,
        &Options {
            // The CLI draws a bar; an example prints every tenth.
            progress: Some(nvdepot_engine::Progress::new(|done, total| {
                if done == total || done % (total / 10).max(1) == 0 {
                    eprintln!("scanned {done}/{total} segments");
                }
            })),
            ..Options::default()
        },
    )?;
    let r = store.open_report().clone();
    println!(
        "crash open: {:.3} s, checkpoint restored: {}, keys {}, records scanned {} ({:.0} keys/s)",
        r.seconds,
        r.clean,
        r.keys,
        r.records_scanned,
        r.keys as f64 / r.seconds
    );
    assert!(!r.clean && r.keys == keys);
    let v = store.get(ns, format!("key-{}", keys - 1).as_bytes())?;
    assert_eq!(v.map(|v| v.len()), Some(value_bytes));
    store.close()?;
    Ok(())
}
