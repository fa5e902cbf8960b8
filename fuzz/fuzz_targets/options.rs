//! The bindings' options parser (`nvdepot_embed::set_option`, what C's
//! `nvdepot_options_set`, Python's keyword arguments and Java's `Options`
//! feed): any name and text give a value or a clear error, never a panic.
//! Input: `name=value` (split at the first `=`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use nvdepot_embed::{option_names, set_option, Config};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (name, value) = text.split_once('=').unwrap_or((&text, ""));
    let mut config = Config::default();
    match set_option(&mut config, name, value) {
        Ok(()) => assert!(option_names().iter().any(|(n, _)| *n == name)),
        Err(e) => assert!(!e.message.is_empty()),
    }
});
