//! The engine's options by name, as text: one spelling for C strings,
//! Python keyword arguments and Java properties.

use nvdepot_engine::{Eviction, Options};

/// How a binding opens a store: the engine's options and the binding
/// layer's own (the value cache).
#[derive(Clone, Debug, Default)]
pub struct Config {
    pub engine: Options,
    /// Bytes of DRAM for a cache of values in front of the store (see
    /// `value_cache.rs`). Default 0: every read goes to the device.
    pub value_cache_bytes: u64,
}

use crate::code::Failure;
use crate::size::parse_size;

/// Every option [`set_option`] takes, with what it sets (the engine's
/// `Options` documents each field and its default).
pub fn option_names() -> &'static [(&'static str, &'static str)] {
    &[
        ("create_bytes", "size of the data file to create when the path holds no store (e.g. 1G); unset: open only"),
        ("segment_bytes", "segment size, at creation (default 64M)"),
        ("grain_bytes", "grain size, 512..4096, at creation (default 512)"),
        ("key_bytes_max", "longest key (default 65535)"),
        ("value_bytes_max", "longest value (default 1G)"),
        ("sync", "flush the device before a write returns (default true)"),
        ("flush_interval_ms", "with sync off, milliseconds between device flushes (default 100)"),
        ("location_cache_entries", "entries of the location cache (default 262144)"),
        ("cache_mode", "evict instead of failing when full (default false)"),
        ("eviction", "cache mode's victim: segment_lru or fifo"),
        ("background_gc", "garbage collection in a background thread (default true)"),
        ("salvage", "open a damaged store, dropping only the damaged records (default false)"),
        ("buffered_io", "no O_DIRECT, for filesystems that refuse it such as tmpfs (default false)"),
        ("write_behind", "acknowledge puts from the write buffer; a crash loses the last ~1 ms (default false)"),
        ("unlock_before_durable", "writers of one key share group commits (default false)"),
        ("value_cache_bytes", "DRAM cache of values in front of the store, e.g. 256M (default 0: off)"),
    ]
}

/// Sets option `name` from its text form: sizes take K/M/G/T suffixes,
/// booleans `true`/`false`/`1`/`0`/`yes`/`no`/`on`/`off`.
pub fn set_option(config: &mut Config, name: &str, value: &str) -> Result<(), Failure> {
    let opts = &mut config.engine;
    let size = || parse_size(value).map_err(|e| bad(name, &e));
    let count = || -> Result<usize, Failure> {
        usize::try_from(size()?).map_err(|_| bad(name, "too large"))
    };
    let flag = || match value.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err(bad(name, &format!("expected true or false, got {value:?}"))),
    };
    match name {
        "create_bytes" => opts.create_bytes = Some(size()?),
        "segment_bytes" => opts.segment_bytes = size()?,
        "grain_bytes" => {
            opts.grain_bytes = u32::try_from(size()?).map_err(|_| bad(name, "too large"))?
        }
        "key_bytes_max" => opts.key_bytes_max = count()?,
        "value_bytes_max" => opts.value_bytes_max = count()?,
        "sync" => opts.sync = flag()?,
        "flush_interval_ms" => opts.flush_interval_ms = size()?,
        "location_cache_entries" => opts.location_cache_entries = count()?,
        "cache_mode" => opts.cache_mode = flag()?,
        "eviction" => {
            opts.eviction = match value.trim() {
                "segment_lru" => Eviction::SegmentLru,
                "fifo" => Eviction::Fifo,
                _ => return Err(bad(name, "expected segment_lru or fifo")),
            }
        }
        "background_gc" => opts.background_gc = flag()?,
        "salvage" => opts.salvage = flag()?,
        "buffered_io" => opts.buffered_io = flag()?,
        "write_behind" => opts.write_behind = flag()?,
        "unlock_before_durable" => opts.unlock_before_durable = flag()?,
        "value_cache_bytes" => config.value_cache_bytes = size()?,
        _ => {
            let known: Vec<&str> = option_names().iter().map(|(n, _)| *n).collect();
            return Err(Failure::invalid(format!(
                "unknown option {name:?}; options are: {}",
                known.join(", ")
            )));
        }
    }
    Ok(())
}

fn bad(name: &str, why: &str) -> Failure {
    Failure::invalid(format!("option {name}: {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// Any name and text: a value or an error naming the option,
        /// never a panic (fuzz/fuzz_targets/options.rs runs the same).
        #[test]
        fn any_text_is_taken_or_refused_clearly(name in "[a-z_]{0,24}|.{0,12}", value in ".{0,24}") {
            let mut c = Config::default();
            match set_option(&mut c, &name, &value) {
                Ok(()) => proptest::prop_assert!(option_names().iter().any(|(n, _)| *n == name)),
                Err(e) => proptest::prop_assert!(!e.message.is_empty()),
            }
        }
    }

    #[test]
    fn every_listed_option_is_taken_and_bad_ones_say_why() {
        let mut o = Config::default();
        for (name, _) in option_names() {
            let value = match *name {
                "eviction" => "fifo",
                "sync"
                | "cache_mode"
                | "background_gc"
                | "salvage"
                | "buffered_io"
                | "write_behind"
                | "unlock_before_durable" => "off",
                _ => "4K",
            };
            set_option(&mut o, name, value).unwrap();
        }
        assert_eq!(o.engine.create_bytes, Some(4096));
        assert!(!o.engine.sync);
        assert_eq!(o.value_cache_bytes, 4096);
        let e = set_option(&mut o, "sync", "maybe").unwrap_err();
        assert!(e.message.contains("expected true or false"), "{e}");
        let e = set_option(&mut o, "nope", "1").unwrap_err();
        assert!(e.message.contains("unknown option \"nope\""), "{e}");
        let e = set_option(&mut o, "segment_bytes", "12Q").unwrap_err();
        assert!(e.message.contains("segment_bytes"), "{e}");
    }
}
