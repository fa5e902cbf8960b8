//! The Redis serialization protocol, pure: bytes in, bytes out, no sockets,
//! no storage.
//!
//! - [`parse_command`]: a client's request as a Redis 7 server reads it, a
//!   multibulk array of bulk strings (`*2\r\n$3\r\nGET\r\n$1\r\nk\r\n`) or
//!   an inline command (`GET k\r\n`, as `redis-cli` and telnet users send),
//!   with Redis's limits and its `Protocol error: …` wording.
//! - [`Reply`]: composes replies in RESP2 or RESP3 (chosen per connection
//!   by `HELLO`), mapping RESP3-only types to their RESP2 forms as Redis
//!   does (null → `$-1`, map → flat array, double → bulk string, …).
//! - [`parse_value`]: any RESP2/RESP3 value, for clients and tests, with a
//!   nesting limit.
//! - [`errors`]: Redis's error texts (`-ERR wrong number of arguments for
//!   'get' command`, `-WRONGTYPE …`, …).
//! - [`slot`]: Redis Cluster's key → hash slot map (CRC16, hash tags).

pub mod errors;
mod inline;
mod reply;
mod request;
pub mod slot;
mod value;

pub use reply::{format_double, Reply, Version};
pub use request::{parse_command, string2ll, Command, ParseError, Parsed};
pub use value::{parse_value, Item, Reader, Value, ValueError, NESTING_MAX};

/// Limits enforced while parsing requests (Redis's defaults).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest bulk string (`proto-max-bulk-len`): 512 MiB.
    pub bulk_bytes_max: usize,
    /// Most elements of a multibulk request (Redis: `INT_MAX`; lower it to
    /// bound a connection's memory, since each argument costs a slot).
    pub args_max: usize,
    /// Longest inline command or multibulk/bulk length line
    /// (`PROTO_INLINE_MAX_SIZE`): 64 KiB.
    pub inline_bytes_max: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            bulk_bytes_max: 512 << 20,
            args_max: 1 << 20,
            inline_bytes_max: 64 << 10,
        }
    }
}
