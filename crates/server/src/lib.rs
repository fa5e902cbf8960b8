//! nvdepot's protocol-neutral server kit: the acceptor, the thread-per-core
//! io_uring workers, connection limits and rejection, bounded read
//! buffers, graceful shutdown and the metrics endpoint. It speaks no
//! protocol: a face supplies one through the [`Face`] and [`Session`]
//! traits (the memcache face and the Redis-protocol face are assembled in
//! the `nvdepot` binary from a protocol crate, a binding in
//! `nvdepot-cache` and this kit).
//!
//! - [`Server`]: binds, then serves a [`Face`] until [`Shutdown`] triggers.
//! - [`spawn_metrics`]: `GET /metrics` on its own port, rendered by the
//!   face.

mod face;
mod memory;
mod metrics;
mod server;
mod shutdown;
mod worker;

pub use face::{Closer, Connection, Face, Fed, Probe, Session, OUTPUT_PAUSE_BYTES};
pub use memory::{set_allocator_trim, trim_allocator};
pub use metrics::{prometheus_line, spawn_metrics};
pub use server::{default_threads, Server, ServerConfig};
pub use shutdown::Shutdown;
