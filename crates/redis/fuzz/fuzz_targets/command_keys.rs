//! `COMMAND GETKEYS` / `GETKEYSANDFLAGS` over any command line (key
//! specs and Redis's key procedures, `command_keys.rs`): never a panic,
//! always one whole reply.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    nvdepot_redis::fuzzing::command_getkeys(data);
});
