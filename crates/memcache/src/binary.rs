//! The binary protocol (deprecated by memcached 1.6 but still served):
//! 24-byte headers, magic 0x80 for requests and 0x81 for responses, all
//! numbers big-endian.
//!
//! Request header layout (bytes):
//!
//! ```text
//!  0 magic  1 opcode  2..4 key length  4 extras length  5 data type
//!  6..8 vbucket  8..12 total body length  12..16 opaque  16..24 CAS
//! ```
//!
//! The body is extras, then key, then value. As in memcached 1.6.18: a
//! wrong magic closes the connection; a malformed request of a known
//! command gets "Invalid arguments" and a close; an unknown opcode gets
//! "Unknown command" and its body is swallowed; quiet commands hide
//! successes (and get misses) but not errors.

use crate::execute::{Arith, Deleted, ExecError};
use crate::stats::Group;
use crate::{Connection, Step, Storage, StoreMode, StoreOutcome, VERSION};

pub(crate) const MAGIC_REQUEST: u8 = 0x80;
const MAGIC_RESPONSE: u8 = 0x81;
const HEADER_BYTES: usize = 24;

/// Opcodes.
mod op {
    pub const GET: u8 = 0x00;
    pub const SET: u8 = 0x01;
    pub const ADD: u8 = 0x02;
    pub const REPLACE: u8 = 0x03;
    pub const DELETE: u8 = 0x04;
    pub const INCREMENT: u8 = 0x05;
    pub const DECREMENT: u8 = 0x06;
    pub const QUIT: u8 = 0x07;
    pub const FLUSH: u8 = 0x08;
    pub const GETQ: u8 = 0x09;
    pub const NOOP: u8 = 0x0a;
    pub const VERSION: u8 = 0x0b;
    pub const GETK: u8 = 0x0c;
    pub const GETKQ: u8 = 0x0d;
    pub const APPEND: u8 = 0x0e;
    pub const PREPEND: u8 = 0x0f;
    pub const STAT: u8 = 0x10;
    pub const SETQ: u8 = 0x11;
    pub const ADDQ: u8 = 0x12;
    pub const REPLACEQ: u8 = 0x13;
    pub const DELETEQ: u8 = 0x14;
    pub const INCREMENTQ: u8 = 0x15;
    pub const DECREMENTQ: u8 = 0x16;
    pub const QUITQ: u8 = 0x17;
    pub const FLUSHQ: u8 = 0x18;
    pub const APPENDQ: u8 = 0x19;
    pub const PREPENDQ: u8 = 0x1a;
    pub const TOUCH: u8 = 0x1c;
    pub const GAT: u8 = 0x1d;
    pub const GATQ: u8 = 0x1e;
    pub const SASL_LIST_MECHS: u8 = 0x20;
    pub const SASL_AUTH: u8 = 0x21;
    pub const SASL_STEP: u8 = 0x22;
    pub const GATK: u8 = 0x23;
    pub const GATKQ: u8 = 0x24;
}

/// Response status codes.
pub(crate) mod status {
    pub const OK: u16 = 0x00;
    pub const KEY_ENOENT: u16 = 0x01;
    pub const KEY_EEXISTS: u16 = 0x02;
    pub const E2BIG: u16 = 0x03;
    pub const EINVAL: u16 = 0x04;
    pub const NOT_STORED: u16 = 0x05;
    pub const DELTA_BADVAL: u16 = 0x06;
    pub const UNKNOWN_COMMAND: u16 = 0x81;
    pub const ENOMEM: u16 = 0x82;
}

/// memcached's text for an error status.
fn status_text(s: u16) -> &'static [u8] {
    match s {
        status::KEY_ENOENT => b"Not found",
        status::KEY_EEXISTS => b"Data exists for key.",
        status::E2BIG => b"Too large.",
        status::EINVAL => b"Invalid arguments",
        status::NOT_STORED => b"Not stored.",
        status::DELTA_BADVAL => b"Non-numeric server-side value for incr or decr",
        status::UNKNOWN_COMMAND => b"Unknown command",
        _ => b"Out of memory",
    }
}

/// A parsed request header.
#[derive(Clone, Copy, Debug)]
struct Header {
    opcode: u8,
    keylen: usize,
    extlen: usize,
    bodylen: usize,
    opaque: u32,
    cas: u64,
}

impl Header {
    fn parse(b: &[u8]) -> Header {
        Header {
            opcode: b[1],
            keylen: usize::from(u16::from_be_bytes([b[2], b[3]])),
            extlen: usize::from(b[4]),
            bodylen: u32::from_be_bytes([b[8], b[9], b[10], b[11]]) as usize,
            opaque: u32::from_be_bytes([b[12], b[13], b[14], b[15]]),
            cas: u64::from_be_bytes([b[16], b[17], b[18], b[19], b[20], b[21], b[22], b[23]]),
        }
    }
}

/// Appends a response header.
fn put_header(
    out: &mut Vec<u8>,
    h: &Header,
    status: u16,
    extlen: usize,
    keylen: usize,
    bodylen: usize,
    cas: u64,
) {
    out.push(MAGIC_RESPONSE);
    out.push(h.opcode);
    out.extend_from_slice(&(keylen as u16).to_be_bytes());
    out.push(extlen as u8);
    out.push(0);
    out.extend_from_slice(&status.to_be_bytes());
    out.extend_from_slice(&(bodylen as u32).to_be_bytes());
    out.extend_from_slice(&h.opaque.to_be_bytes());
    out.extend_from_slice(&cas.to_be_bytes());
}

/// Appends an error response with memcached's text for `status`.
fn put_error(out: &mut Vec<u8>, h: &Header, status: u16) {
    put_body_error(out, h, status, status_text(status));
}

fn put_body_error(out: &mut Vec<u8>, h: &Header, status: u16, text: &[u8]) {
    put_header(out, h, status, 0, 0, text.len(), 0);
    out.extend_from_slice(text);
}

/// A server-side failure: memcached's `out_of_memory` in binary.
fn put_exec_error(out: &mut Vec<u8>, h: &Header, e: &ExecError) {
    put_body_error(out, h, status::ENOMEM, e.message().as_bytes());
}

/// An empty success response (unless quiet).
fn put_ok(out: &mut Vec<u8>, h: &Header, quiet: bool, cas: u64) {
    if !quiet {
        put_header(out, h, status::OK, 0, 0, 0, cas);
    }
}

/// The non-quiet form of an opcode, and whether it was quiet.
fn unquiet(opcode: u8) -> (u8, bool) {
    match opcode {
        op::SETQ => (op::SET, true),
        op::ADDQ => (op::ADD, true),
        op::REPLACEQ => (op::REPLACE, true),
        op::DELETEQ => (op::DELETE, true),
        op::INCREMENTQ => (op::INCREMENT, true),
        op::DECREMENTQ => (op::DECREMENT, true),
        op::QUITQ => (op::QUIT, true),
        op::FLUSHQ => (op::FLUSH, true),
        op::APPENDQ => (op::APPEND, true),
        op::PREPENDQ => (op::PREPEND, true),
        op::GETQ => (op::GET, true),
        op::GETKQ => (op::GETK, true),
        op::GATQ => (op::GAT, true),
        op::GATKQ => (op::GATK, true),
        other => (other, false),
    }
}

impl<S: Storage> Connection<S> {
    /// Frames one binary request at the start of `input` and runs it.
    pub(crate) async fn binary_step(&mut self, input: &[u8], out: &mut Vec<u8>) -> Step {
        if input.len() < HEADER_BYTES {
            return Step::Incomplete;
        }
        if input[0] != MAGIC_REQUEST {
            return Step::Close(0);
        }
        let h = Header::parse(input);
        // memcached reads the header, extras and key before dispatching;
        // the value (if any) is read afterwards.
        let head = HEADER_BYTES + h.extlen + h.keylen;
        if input.len() < head {
            return Step::Incomplete;
        }
        if h.keylen + h.extlen > h.bodylen {
            put_error(out, &h, status::UNKNOWN_COMMAND);
            return Step::Close(head);
        }
        if h.keylen > self.limits.key_bytes_max {
            put_error(out, &h, status::EINVAL);
            return Step::Close(head);
        }
        self.check_pending_flush();
        let extras = &input[HEADER_BYTES..HEADER_BYTES + h.extlen];
        let key = &input[HEADER_BYTES + h.extlen..head];
        let (base, quiet) = unquiet(h.opcode);
        let (ext, k, body) = (h.extlen, h.keylen, h.bodylen);
        let valid = match base {
            op::VERSION | op::NOOP | op::QUIT => ext == 0 && k == 0 && body == 0,
            op::FLUSH => k == 0 && body == ext && (ext == 0 || ext == 4),
            op::SET | op::ADD | op::REPLACE => ext == 8 && k != 0 && body >= k + 8,
            op::GET | op::GETK | op::DELETE => ext == 0 && k > 0 && body == k,
            op::INCREMENT | op::DECREMENT => k > 0 && ext == 20 && body == k + ext,
            op::APPEND | op::PREPEND => k > 0 && ext == 0,
            op::STAT => ext == 0,
            op::TOUCH | op::GAT | op::GATK => ext == 4 && k != 0,
            op::SASL_LIST_MECHS => ext == 0 && k == 0 && body == 0,
            op::SASL_AUTH | op::SASL_STEP => ext == 0 && k != 0,
            _ => {
                // Unknown: memcached swallows `bodylen` bytes after the
                // key, as it does (over-reading by the extras and key).
                put_error(out, &h, status::UNKNOWN_COMMAND);
                self.swallow = body as u64;
                return Step::Done(head);
            }
        };
        if !valid {
            put_error(out, &h, status::EINVAL);
            return Step::Close(head);
        }
        if self.read_ahead_wanted(matches!(base, op::GET | op::GETK)) {
            self.prefetch_bin_gets(input).await;
        }
        match base {
            op::SET | op::ADD | op::REPLACE | op::APPEND | op::PREPEND => {
                let vlen = body - k - ext;
                let flags = match extras {
                    [a, b, c, d, ..] => u32::from_be_bytes([*a, *b, *c, *d]),
                    _ => 0,
                };
                if !self.limits.item_fits(k, flags, vlen) {
                    put_error(out, &h, status::E2BIG);
                    self.swallow = vlen as u64;
                    if base == op::SET {
                        if let Err(e) = self.delete(key, None).await {
                            put_exec_error(out, &h, &e);
                        }
                    }
                    return Step::Done(head);
                }
                if input.len() < head + vlen {
                    return Step::Incomplete;
                }
                let value = &input[head..head + vlen];
                self.bin_update(&h, base, quiet, extras, key, value, out)
                    .await;
                Step::Done(head + vlen)
            }
            op::GET | op::GETK => {
                self.bin_get(&h, base, quiet, key, None, out).await;
                Step::Done(head)
            }
            op::TOUCH | op::GAT | op::GATK => {
                let t = u32::from_be_bytes([extras[0], extras[1], extras[2], extras[3]]);
                let exptime = self.exptime_abs(i64::from(t));
                self.bin_get(&h, base, quiet, key, Some(exptime), out).await;
                Step::Done(head)
            }
            op::DELETE => {
                let cas = (h.cas != 0).then_some(h.cas);
                match self.delete(key, cas).await {
                    Ok(Deleted::Yes) => put_ok(out, &h, quiet, 0),
                    Ok(Deleted::NotFound) => put_error(out, &h, status::KEY_ENOENT),
                    Ok(Deleted::Exists) => put_error(out, &h, status::KEY_EEXISTS),
                    Err(e) => put_exec_error(out, &h, &e),
                }
                Step::Done(head)
            }
            op::INCREMENT | op::DECREMENT => {
                self.bin_arith(&h, base == op::INCREMENT, quiet, extras, key, out)
                    .await;
                Step::Done(head)
            }
            op::FLUSH => {
                let delay = match extras {
                    [a, b, c, d] => u32::from_be_bytes([*a, *b, *c, *d]),
                    _ => 0,
                };
                match self.flush_all(i64::from(delay)) {
                    Ok(()) => put_ok(out, &h, quiet, 0),
                    Err(e) => put_exec_error(out, &h, &e.into()),
                }
                Step::Done(head)
            }
            op::NOOP => {
                put_ok(out, &h, false, 0);
                Step::Done(head)
            }
            op::VERSION => {
                put_header(out, &h, status::OK, 0, 0, VERSION.len(), 0);
                out.extend_from_slice(VERSION.as_bytes());
                Step::Done(head)
            }
            op::QUIT => {
                put_ok(out, &h, quiet, 0);
                Step::Close(head)
            }
            op::STAT => {
                self.bin_stat(&h, key, out);
                Step::Done(head)
            }
            // SASL is not enabled: memcached answers "Unknown command".
            _ => {
                put_error(out, &h, status::UNKNOWN_COMMAND);
                self.swallow = (body - k) as u64;
                Step::Done(head)
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn bin_update(
        &mut self,
        h: &Header,
        base: u8,
        quiet: bool,
        extras: &[u8],
        key: &[u8],
        value: &[u8],
        out: &mut Vec<u8>,
    ) {
        self.counters.cmd_set += 1;
        let r = if base == op::APPEND || base == op::PREPEND {
            self.concat(key, value, base == op::APPEND, h.cas).await
        } else {
            let flags = u32::from_be_bytes([extras[0], extras[1], extras[2], extras[3]]);
            let t = u32::from_be_bytes([extras[4], extras[5], extras[6], extras[7]]);
            let exptime = self.exptime_abs(i64::from(t));
            let mode = match (h.cas, base) {
                (0, op::SET) => StoreMode::Set,
                (0, op::ADD) => StoreMode::Add,
                (0, _) => StoreMode::Replace,
                (cas, _) => StoreMode::Cas(cas),
            };
            self.store(key, value, flags, exptime, mode)
                .await
                .map_err(ExecError::from)
        };
        match r {
            Ok(StoreOutcome::Stored { cas }) => put_ok(out, h, quiet, cas),
            Ok(StoreOutcome::Exists) => put_error(out, h, status::KEY_EEXISTS),
            Ok(StoreOutcome::NotFound) => put_error(out, h, status::KEY_ENOENT),
            Ok(StoreOutcome::NotStored) => {
                let s = match base {
                    op::ADD => status::KEY_EEXISTS,
                    op::REPLACE => status::KEY_ENOENT,
                    _ => status::NOT_STORED,
                };
                put_error(out, h, s);
            }
            Err(e) => put_exec_error(out, h, &e),
        }
    }

    /// Reads ahead the keys of the Get/GetQ/GetK/GetKQ requests at the
    /// start of `input` (complete ones, at most 256) if there are two or
    /// more, all at once: a binary multi-get (GetKQ... Noop) then has its
    /// device reads in flight together.
    async fn prefetch_bin_gets(&mut self, input: &[u8]) {
        let mut keys: Vec<&[u8]> = Vec::new();
        let mut rest = input;
        while rest.len() >= HEADER_BYTES && rest[0] == MAGIC_REQUEST && keys.len() < 256 {
            let h = Header::parse(rest);
            let (base, _) = unquiet(h.opcode);
            let plain_get = matches!(base, op::GET | op::GETK)
                && h.extlen == 0
                && h.keylen > 0
                && h.bodylen == h.keylen
                && h.keylen <= self.limits.key_bytes_max;
            if !plain_get || rest.len() < HEADER_BYTES + h.keylen {
                break;
            }
            keys.push(&rest[HEADER_BYTES..HEADER_BYTES + h.keylen]);
            rest = &rest[HEADER_BYTES + h.keylen..];
        }
        self.read_ahead(&keys).await;
    }

    /// Get, GetK, Touch, GAT, GATK (and quiet forms); `touch` = new exptime.
    async fn bin_get(
        &mut self,
        h: &Header,
        base: u8,
        quiet: bool,
        key: &[u8],
        touch: Option<u32>,
        out: &mut Vec<u8>,
    ) {
        let found = match touch {
            Some(exptime) => {
                self.counters.cmd_touch += 1;
                self.touch(key, exptime)
                    .await
                    .map(|o| o.map(|(item, _)| item))
            }
            None => {
                self.counters.cmd_get += 1;
                self.live_read_ahead(key).await.map_err(ExecError::from)
            }
        };
        let with_key = base == op::GETK || base == op::GATK;
        match found {
            Ok(Some(item)) => {
                if touch.is_some() {
                    self.counters.touch_hits += 1;
                } else {
                    self.counters.get_hits += 1;
                }
                self.storage.fetched(key);
                let value: &[u8] = if base == op::TOUCH { &[] } else { &item.value };
                let keylen = if with_key { key.len() } else { 0 };
                put_header(
                    out,
                    h,
                    status::OK,
                    4,
                    keylen,
                    4 + keylen + value.len(),
                    item.cas,
                );
                out.extend_from_slice(&item.flags.to_be_bytes());
                if with_key {
                    out.extend_from_slice(key);
                }
                out.extend_from_slice(value);
            }
            Ok(None) => {
                if touch.is_some() {
                    self.counters.touch_misses += 1;
                } else {
                    self.counters.get_misses += 1;
                }
                if quiet {
                } else if with_key {
                    put_header(out, h, status::KEY_ENOENT, 0, key.len(), key.len(), 0);
                    out.extend_from_slice(key);
                } else {
                    put_error(out, h, status::KEY_ENOENT);
                }
            }
            Err(e) => put_exec_error(out, h, &e),
        }
    }

    async fn bin_arith(
        &mut self,
        h: &Header,
        incr: bool,
        quiet: bool,
        extras: &[u8],
        key: &[u8],
        out: &mut Vec<u8>,
    ) {
        let u64_at = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&extras[i..i + 8]);
            u64::from_be_bytes(b)
        };
        let (delta, initial) = (u64_at(0), u64_at(8));
        let expiration = u32::from_be_bytes([extras[16], extras[17], extras[18], extras[19]]);
        let put_value = |out: &mut Vec<u8>, value: u64, cas: u64| {
            if !quiet {
                put_header(out, h, status::OK, 0, 0, 8, cas);
                out.extend_from_slice(&value.to_be_bytes());
            }
        };
        // An expiration of all ones: no create on a miss.
        let create =
            (expiration != u32::MAX).then(|| (initial, self.exptime_abs(i64::from(expiration))));
        match self.arith(key, incr, delta, h.cas, None, create).await {
            Ok(Arith::Done(d)) => put_value(out, d.value, d.cas),
            Ok(Arith::NonNumeric) => put_error(out, h, status::DELTA_BADVAL),
            Ok(Arith::Exists) => put_error(out, h, status::KEY_EEXISTS),
            Ok(Arith::NotFound) => {
                if incr {
                    self.counters.incr_misses += 1;
                } else {
                    self.counters.decr_misses += 1;
                }
                put_error(out, h, status::KEY_ENOENT);
            }
            Err(e) => put_exec_error(out, h, &e),
        }
    }

    /// Stat: one response per statistic, then an empty one.
    fn bin_stat(&mut self, h: &Header, key: &[u8], out: &mut Vec<u8>) {
        let group = if key.is_empty() {
            Group::General
        } else if key.starts_with(b"reset") {
            self.stats_reset();
            Group::Empty
        } else if key.starts_with(b"settings") {
            Group::Settings
        } else if let Some(rest) = key.strip_prefix(b"detail") {
            if rest.starts_with(b" dump") || rest.starts_with(b" on") || rest.starts_with(b" off") {
                Group::Empty
            } else {
                return put_error(out, h, status::KEY_ENOENT);
            }
        } else {
            match key {
                b"items" | b"slabs" => Group::Empty,
                b"sizes" => Group::Sizes,
                _ => return put_error(out, h, status::KEY_ENOENT),
            }
        };
        self.stats_lines(group, &mut |name, value| {
            put_header(
                out,
                h,
                status::OK,
                0,
                name.len(),
                name.len() + value.len(),
                0,
            );
            out.extend_from_slice(name);
            out.extend_from_slice(value);
        });
        put_header(out, h, status::OK, 0, 0, 0, 0);
    }
}
