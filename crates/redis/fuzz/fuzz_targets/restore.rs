//! RESTORE's payload objects (`rdb_object.rs`, with the listpack, ziplist
//! and intset readers of `rdb_codec.rs`): any bytes read as an object or
//! are refused, never a panic; an object read writes back (as DUMP writes
//! it) to bytes that read again to the same encoding.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    nvdepot_redis::fuzzing::restore_object(data);
});
