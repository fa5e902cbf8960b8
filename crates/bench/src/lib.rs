//! Load generators for nvdepot's servers, behind `nvdepot bench`.
//!
//! [`memcache`]: a memtier-like client for the memcached text protocol
//! (`get`/`set`), or the Redis protocol (`GET`/`SET`, [`resp_proto`]):
//! many connections over a few threads, pipelining, a
//! get:set ratio, uniform or Zipfian keys over a fixed key space, an
//! optional preload of every key, HDR latency percentiles, and a check of
//! the values it reads (each value is derived from its key, so a wrong
//! byte is a mismatch whoever wrote it).
//!
//! [`index`]: the in-DRAM index against dashmap and a locked hashbrown
//! table, in process (inserts and lookups per second, latency percentiles,
//! bytes per key), after uDepot's Fig. 5.
//!
//! Goals: numbers comparable across servers in one run (memcached, memcached
//! with extstore, `nvdepot memcache`), bounded runs (a duration or a request
//! count, and a stall timeout), no dependency on an async runtime.
//! Non-goals: the binary and meta protocols, multi-key gets. Load is
//! closed-loop, or paced at a fixed rate (`Config::rate`) for soak runs.

pub mod engine;
mod epoll;
pub mod index;
pub mod memcache;
pub mod proto;
pub mod report;
pub mod resp_proto;
pub mod rng;

pub use memcache::{Bench, Config, Latency, PhaseReport, Protocol, Stop};
pub use rng::Distribution;

/// Why a benchmark could not run to its end.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("bad benchmark settings: {0}")]
    Config(String),
    #[error("connecting to {addr}: {source}")]
    Connect {
        addr: std::net::SocketAddr,
        source: std::io::Error,
    },
    #[error("{op}: {source}")]
    Io {
        op: &'static str,
        source: std::io::Error,
    },
    #[error("protocol error (the reply stream cannot be framed): {0}")]
    Protocol(String),
    #[error("no reply for {seconds} s with {outstanding} requests outstanding")]
    Stalled { seconds: u64, outstanding: usize },
}
