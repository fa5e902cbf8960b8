//! The Redis face of nvdepot: Redis 7.0's commands, replies and errors
//! over the engine (through the face-neutral `RespStore` of
//! `nvdepot-cache`), served by the protocol-neutral server kit. The
//! command line (`nvdepot serve`) only parses flags, opens the store and
//! hands it to [`RespFace`].
//!
//! One file per concern, as Kvrocks's `src/types/redis_*.cc`, in layers
//! that import only downwards: at the bottom the pieces that know no
//! session (`args`: reading arguments; `commands`: the command table;
//! `command_info` and `command_keys`: COMMAND over Redis 7.0's own
//! descriptions in `data/`; `glob`, `gate`, `join`, `key_locks`, `compact`, the codecs), then the
//! server-wide state (`clients`, `blocked`, `hub`, `tracking`, `notify`,
//! `observe`, `monitor`, `script_state`, `cluster`, `tunables`), then
//! `session` (`Shared` and `RespSession`, which hold that state), the
//! commands over it, and at the top `face` (the dispatch). The commands:
//! `keys` (the keyspace and expiry commands, and the dispatch of every
//! data command), `scan` (SCAN and its options); the types:
//! `strings` (with `bitmap`: the bit commands; `hyperloglog`: PFADD and the rest; `lcs`: LCS), `hash`, `set`, `list`
//! (with `blocking`: blocked clients),
//! `zset`, `zset_ops` and `zset_range` (sorted sets; `geo` with `geohash`: the geo commands on them), `stream` and `stream_log` (streams),
//! over `compact` (the one-record layout of collections) with
//! `compact_update` (an atomic change of one, or its way to the paged
//! layout) and `types`
//! (what every type answers alike); `multi` (MULTI/EXEC/WATCH), `clients`
//! (the connections) with `client_command` (CLIENT), `pubsub` (Pub/Sub), `script` with `lua`, `lua_libs`, `lua_msgpack`, `lua_struct` and `functions` (EVAL, FUNCTION and the Lua VM), `config` (CONFIG) and `tunables` (the encoding settings
//! CONFIG SET may change), `commands` (the command table: arity and key
//! positions), [`cluster`] and `migrate` (Redis Cluster), [`expiry`]
//! (the background sweep), `gate` (the exclusive gate of multi-key
//! writes), `glob` (Redis's matcher), `join` (bounded joins of per-key
//! futures).

mod admin;
mod args;
mod atomic;
mod bitmap;
mod blocked;
mod blocking;
mod client_command;
mod clients;
mod clock;
pub mod cluster;
mod combine;
mod command_info;
mod command_keys;
mod commands;
mod compact;
mod compact_update;
mod config;
mod dump;
pub mod expiry;
mod face;
mod functions;
mod gate;
mod geo;
mod geohash;
mod glob;
mod hash;
mod hash_combine;
mod hash_pages;
mod hub;
mod hyperloglog;
mod info;
mod join;
mod key_locks;
mod keys;
mod lcs;
mod list;
mod list_combine;
mod list_edit;
mod list_move;
mod list_page;
mod list_pages;
mod list_read;
mod lua;
mod lua_call;
mod lua_libs;
mod lua_msgpack;
mod lua_struct;
mod migrate;
mod migrate_keys;
mod monitor;
mod multi;
mod name_map;
mod node_client;
mod notify;
mod observe;
mod paged_commit;
mod paged_scan;
mod pubsub;
mod rdb_codec;
mod rdb_object;
mod restore;
mod scan;
mod script;
mod script_state;
mod session;
mod set;
mod sort;
mod stream;
mod stream_groups;
mod stream_info;
mod stream_log;
mod stream_pages;
mod stream_readgroup;
mod strings;
mod swapdb;
mod tracking;
mod tunables;
mod types;
mod zset;
mod zset_ops;
mod zset_pages;
mod zset_range;
mod zset_tree;
mod zset_value;

use std::sync::Arc;
use std::time::Duration;

pub use cluster::Cluster;
pub use face::RespFace;
pub use session::Config;

/// Runs a future to completion on this (non-runtime) thread: the engine's
/// calls complete by blocking outside a runtime, and the gate wakes its
/// waiters from the threads that release it.
pub(crate) fn block_on<F: std::future::Future>(f: F) -> F::Output {
    use std::task::{Context, Poll, Wake, Waker};
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park_timeout(Duration::from_millis(50));
    }
}

/// Entry points for the fuzz targets (`crates/redis/fuzz`): not an API.
#[doc(hidden)]
pub mod fuzzing {
    use super::rdb_object::{Object, Thresholds};

    /// `COMMAND GETKEYS` and `GETKEYSANDFLAGS` over any command line
    /// (`data` split at spaces): never a panic, always one whole reply.
    pub fn command_getkeys(data: &[u8]) {
        let words: Vec<&[u8]> = data.split(|&b| b == b' ').take(64).collect();
        for sub in [&b"GETKEYS"[..], b"GETKEYSANDFLAGS"] {
            let mut argv: Vec<&[u8]> = vec![b"COMMAND", sub];
            argv.extend(&words);
            let mut out = Vec::new();
            let mut r = nvdepot_resp::Reply::new(&mut out, nvdepot_resp::Version::Resp3);
            super::command_info::command(&argv, &mut r);
            let (_, used) = nvdepot_resp::parse_value(&out)
                .expect("a RESP reply")
                .expect("a whole reply");
            assert_eq!(used, out.len(), "one reply");
        }
    }

    /// RESTORE's object reader over any bytes (the payload's footer
    /// already checked): never a panic; an object it reads writes back
    /// (DUMP's encoding) to bytes it reads again to the same encoding.
    pub fn restore_object(data: &[u8]) {
        let t = Thresholds {
            hash_entries: 128,
            hash_value: 64,
            set_intset_entries: 512,
            zset_entries: 128,
            zset_value: 64,
        };
        let _ = super::rdb_codec::listpack_elements(data);
        let _ = super::rdb_codec::ziplist_elements(data);
        let _ = super::rdb_codec::intset_members(data);
        if let Some(o) = Object::decode(data, &t) {
            let once = o.encode();
            let again = Object::decode(&once, &t).expect("DUMP's encoding reads back");
            assert_eq!(again.encode(), once, "DUMP's encoding is stable");
        }
    }
}
