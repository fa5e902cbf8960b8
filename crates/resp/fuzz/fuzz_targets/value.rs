//! Values: any bytes parse to a value, "incomplete" or an error, never a
//! panic or a stack overflow, and a parsed value's length is within the
//! input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nvdepot_resp::parse_value;

fuzz_target!(|data: &[u8]| {
    if let Ok(Some((_, n))) = parse_value(data) {
        assert!(n <= data.len());
    }
});
