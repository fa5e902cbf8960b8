//! The deterministic workload of `nvdepot kv load` and `nvdepot kv verify`.
//!
//! Key `i` is `key-<i>`; its value is `value_bytes` bytes that depend only on
//! `(seed, i)`, so a later process (after a clean exit or a `kill -9`) can
//! check exactly which acknowledged writes survived.

use std::io::Write;

use nvdepot_engine::{Namespace, Store};

use crate::error::CliError;
use crate::Outcome;

/// The key of item `i`.
pub fn key(i: u64) -> String {
    format!("key-{i}")
}

/// The value of item `i` under `seed`: `len` bytes from splitmix64 seeded
/// with `seed ^ i * φ`. The one definition both `load` and `verify` use.
pub fn value(seed: u64, i: u64, len: usize) -> Vec<u8> {
    let mut state = seed ^ i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        out.extend_from_slice(&splitmix64(&mut state).to_le_bytes());
    }
    out.truncate(len);
    out
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// What to load or verify.
#[derive(Debug, Clone, Copy)]
pub struct Workload {
    pub count: u64,
    pub value_bytes: usize,
    pub seed: u64,
}

/// Puts keys `0..count` in order. After a put returns (so the item is as
/// durable as the store's options make it), prints `acked <i>` every
/// `ack_every` keys and for the last key, flushing stdout each time: a
/// process that reads these lines knows which items must survive a crash.
pub fn load(
    store: &Store,
    ns: Namespace,
    work: Workload,
    ack_every: u64,
    out: &mut impl Write,
) -> Result<Outcome, CliError> {
    let ack_every = ack_every.max(1);
    for i in 0..work.count {
        store.put(
            ns,
            key(i).as_bytes(),
            &value(work.seed, i, work.value_bytes),
        )?;
        if (i + 1) % ack_every == 0 || i + 1 == work.count {
            writeln!(out, "acked {i}")?;
            out.flush()?;
        }
    }
    Ok(Outcome::Success)
}

/// Checks that keys `0..count` hold their values; prints `verified <count>`,
/// or the first key that is `missing` or has the `wrong value`.
pub fn verify(
    store: &Store,
    ns: Namespace,
    work: Workload,
    out: &mut impl Write,
) -> Result<Outcome, CliError> {
    for i in 0..work.count {
        let problem = match store.get(ns, key(i).as_bytes())? {
            None => "missing",
            Some(found) if found != value(work.seed, i, work.value_bytes) => "wrong value for",
            Some(_) => continue,
        };
        writeln!(out, "{problem} {}", key(i))?;
        return Ok(Outcome::Negative);
    }
    writeln!(out, "verified {}", work.count)?;
    Ok(Outcome::Success)
}

#[cfg(test)]
mod tests {
    use super::value;

    #[test]
    fn values_are_deterministic_and_distinct() {
        assert_eq!(value(7, 3, 100), value(7, 3, 100));
        assert_eq!(value(7, 3, 100).len(), 100);
        assert_ne!(value(7, 3, 100), value(7, 4, 100));
        assert_ne!(value(7, 3, 100), value(8, 3, 100));
        assert_eq!(&value(7, 3, 100)[..5], &value(7, 3, 5)[..]);
        assert!(value(1, 1, 0).is_empty());
    }
}
