//! nvdepot's network servers: sockets and threads around the pure protocol
//! crates.
//!
//! - [`serve_memcache`] / [`MemcacheServer`]: the memcached-compatible
//!   server over any [`nvdepot_memcache::Storage`] (the `nvdepot memcache`
//!   command serves the engine through it).
//! - [`Shutdown`]: stops a running server from another thread.

mod engine_storage;
mod hot_cache;
mod memcache;
mod metrics;
mod shutdown;

pub use engine_storage::EngineStorage;
pub use memcache::{
    default_threads, serve_memcache, MemcacheConfig, MemcacheServer, REQUEST_TOO_LARGE,
    TOO_MANY_CONNECTIONS,
};
pub use metrics::{render_memcache_metrics, spawn_metrics};
pub use shutdown::Shutdown;
