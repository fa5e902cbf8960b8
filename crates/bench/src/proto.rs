//! The memcached text protocol, client side: compose `get`/`set` requests
//! and parse one reply at a time out of a byte buffer that may hold a
//! partial reply, exactly one, or several pipelined ones.
//!
//! Only what the load generator sends is parsed: replies to a one-key
//! `get` (`VALUE key flags bytes [cas]` + data block + `END`, or just
//! `END`) and to a `set` (`STORED`, `NOT_STORED`, `EXISTS`, `NOT_FOUND`),
//! plus the error lines any command can get (`ERROR`, `CLIENT_ERROR …`,
//! `SERVER_ERROR …`). Anything else is a protocol error: the byte stream
//! can no longer be framed, so the connection is given up.

use std::fmt;

/// Longest reply line accepted (memcached's own lines are far shorter);
/// a buffer holding this much without a line end is malformed.
pub const LINE_BYTES_MAX: usize = 8 << 10;

/// What kind of request a reply answers (replies are in request order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Get,
    Set,
}

/// One complete reply, borrowing from the parse buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply<'a> {
    /// `VALUE key flags bytes [cas]`, its data block and `END`.
    Hit {
        key: &'a [u8],
        flags: u32,
        data: &'a [u8],
    },
    /// A `get` answered with just `END`.
    Miss,
    /// `STORED`.
    Stored,
    /// `NOT_STORED`, `EXISTS` or `NOT_FOUND` to a storage command.
    NotStored(&'a [u8]),
    /// `ERROR`, `CLIENT_ERROR …` or `SERVER_ERROR …` (the whole line,
    /// without its `\r\n`).
    Error(&'a [u8]),
}

/// A reply that cannot be framed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed {
    /// What was wrong, with the start of the offending bytes.
    pub detail: String,
}

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.detail)
    }
}

pub(crate) fn malformed(what: &str, bytes: &[u8]) -> Malformed {
    let shown = &bytes[..bytes.len().min(80)];
    Malformed {
        detail: format!("{what}: {:?}", String::from_utf8_lossy(shown)),
    }
}

/// The first `\r\n`-terminated line of `buf`: `(line, bytes consumed)`.
pub(crate) fn line(buf: &[u8]) -> Result<Option<(&[u8], usize)>, Malformed> {
    match buf.windows(2).position(|w| w == b"\r\n") {
        Some(end) => Ok(Some((&buf[..end], end + 2))),
        None if buf.len() > LINE_BYTES_MAX => Err(malformed("reply line too long", buf)),
        None => Ok(None),
    }
}

fn is_error_line(line: &[u8]) -> bool {
    line == b"ERROR" || line.starts_with(b"CLIENT_ERROR") || line.starts_with(b"SERVER_ERROR")
}

/// Parses the reply at the start of `buf` to a request of kind `op`.
///
/// `Ok(None)`: `buf` holds only part of it (read more and call again with
/// the same start). `Ok(Some((reply, n)))`: a complete reply of `n` bytes.
pub fn parse_reply(buf: &[u8], op: Op) -> Result<Option<(Reply<'_>, usize)>, Malformed> {
    let Some((first, mut used)) = line(buf)? else {
        return Ok(None);
    };
    if is_error_line(first) {
        return Ok(Some((Reply::Error(first), used)));
    }
    match op {
        Op::Set => match first {
            b"STORED" => Ok(Some((Reply::Stored, used))),
            b"NOT_STORED" | b"EXISTS" | b"NOT_FOUND" => Ok(Some((Reply::NotStored(first), used))),
            _ => Err(malformed("unexpected reply to set", first)),
        },
        Op::Get => {
            if first == b"END" {
                return Ok(Some((Reply::Miss, used)));
            }
            let (key, flags, bytes) = parse_value_line(first)?;
            // Data block, its "\r\n", then "END\r\n".
            let Some((data, n)) = data_block(&buf[used..], bytes, first)? else {
                return Ok(None);
            };
            used += n;
            let Some((end, n)) = line(&buf[used..])? else {
                return Ok(None);
            };
            if end != b"END" {
                return Err(malformed("expected END after a one-key get", end));
            }
            Ok(Some((Reply::Hit { key, flags, data }, used + n)))
        }
    }
}

/// The `len` bytes at the start of `buf` and the `\r\n` after them (a
/// memcache data block, a RESP bulk string's data): `(data, bytes
/// consumed)`, `None` if not all there yet. `line` is the line that
/// announced them, for the error.
pub(crate) fn data_block<'a>(
    buf: &'a [u8],
    len: usize,
    line: &[u8],
) -> Result<Option<(&'a [u8], usize)>, Malformed> {
    if buf.len() < len.saturating_add(2) {
        return Ok(None);
    }
    if &buf[len..len + 2] != b"\r\n" {
        return Err(malformed("data not followed by \\r\\n", line));
    }
    Ok(Some((&buf[..len], len + 2)))
}

/// `VALUE <key> <flags> <bytes> [<cas>]` → (key, flags, bytes).
fn parse_value_line(line: &[u8]) -> Result<(&[u8], u32, usize), Malformed> {
    let mut words = line.split(|&b| b == b' ').filter(|w| !w.is_empty());
    if words.next() != Some(b"VALUE".as_slice()) {
        return Err(malformed("unexpected reply to get", line));
    }
    let key = words
        .next()
        .ok_or_else(|| malformed("VALUE without key", line))?;
    let flags = words
        .next()
        .and_then(parse_u64)
        .and_then(|f| u32::try_from(f).ok())
        .ok_or_else(|| malformed("VALUE with bad flags", line))?;
    let bytes = words
        .next()
        .and_then(parse_u64)
        .and_then(|b| usize::try_from(b).ok())
        .ok_or_else(|| malformed("VALUE with bad length", line))?;
    Ok((key, flags, bytes))
}

fn parse_u64(word: &[u8]) -> Option<u64> {
    std::str::from_utf8(word).ok()?.parse().ok()
}

/// Appends `key:%010d` (the key naming of the issue, memtier-like).
pub fn write_key(out: &mut Vec<u8>, index: u64) {
    out.extend_from_slice(b"key:");
    write_padded(out, index);
}

/// `index` in decimal, zero-padded to 10 digits (more if it needs them).
fn write_padded(out: &mut Vec<u8>, index: u64) {
    let mut digits = [b'0'; 20];
    let mut n = index;
    let mut i = digits.len();
    while n > 0 {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
    }
    let start = i.min(digits.len() - 10);
    out.extend_from_slice(&digits[start..]);
}

/// `get key:…\r\n`
pub fn write_get(out: &mut Vec<u8>, index: u64) {
    out.extend_from_slice(b"get ");
    write_key(out, index);
    out.extend_from_slice(b"\r\n");
}

/// `set key:… 0 0 <len>\r\n<value>\r\n`, the value from `values`.
pub fn write_set(out: &mut Vec<u8>, index: u64, values: &Values) {
    out.extend_from_slice(b"set ");
    write_key(out, index);
    out.extend_from_slice(b" 0 0 ");
    out.extend_from_slice(values.bytes().to_string().as_bytes());
    out.extend_from_slice(b"\r\n");
    values.write(out, index);
    out.extend_from_slice(b"\r\n");
}

/// The value stored under each key, derived from the key alone so that a
/// reader can check any value it gets back whoever wrote it last: the key
/// index in 10 digits and `:` (when the value has room), then bytes of a
/// fixed printable pattern from an offset that depends on the key.
#[derive(Debug, Clone)]
pub struct Values {
    bytes: usize,
    /// `PATTERN_BYTES + bytes` bytes: a window of `bytes` starting at any
    /// offset below `PATTERN_BYTES` is a slice of it.
    pattern: Vec<u8>,
}

const PATTERN_BYTES: usize = 4093; // prime: offsets of nearby keys differ
const PREFIX_BYTES: usize = 11; // "%010d:"

impl Values {
    pub fn new(bytes: usize) -> Values {
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let pattern = (0..PATTERN_BYTES + bytes)
            .map(|i| {
                if i < PATTERN_BYTES {
                    state = crate::rng::splitmix64(state);
                    b'!' + (state % 94) as u8
                } else {
                    0
                }
            })
            .collect::<Vec<u8>>();
        let mut values = Values { bytes, pattern };
        for i in PATTERN_BYTES..PATTERN_BYTES + bytes {
            values.pattern[i] = values.pattern[i % PATTERN_BYTES];
        }
        values
    }

    /// Value length in bytes.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    fn parts(&self, index: u64) -> (bool, &[u8]) {
        let prefixed = self.bytes >= PREFIX_BYTES;
        let tail = if prefixed {
            self.bytes - PREFIX_BYTES
        } else {
            self.bytes
        };
        let offset = (index.wrapping_mul(7919) % PATTERN_BYTES as u64) as usize;
        (prefixed, &self.pattern[offset..offset + tail])
    }

    /// Appends the value of key `index`.
    pub fn write(&self, out: &mut Vec<u8>, index: u64) {
        let (prefixed, tail) = self.parts(index);
        if prefixed {
            let start = out.len();
            write_padded(out, index % 10_000_000_000);
            debug_assert_eq!(out.len() - start, 10);
            out.push(b':');
        }
        out.extend_from_slice(tail);
    }

    /// Whether `data` is the value of key `index`.
    pub fn matches(&self, index: u64, data: &[u8]) -> bool {
        if data.len() != self.bytes {
            return false;
        }
        let (prefixed, tail) = self.parts(index);
        let mut rest = data;
        if prefixed {
            let mut prefix = Vec::with_capacity(PREFIX_BYTES);
            write_padded(&mut prefix, index % 10_000_000_000);
            prefix.push(b':');
            if data[..PREFIX_BYTES] != prefix[..] {
                return false;
            }
            rest = &data[PREFIX_BYTES..];
        }
        rest == tail
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(buf: &[u8], op: Op) -> Option<(Reply<'_>, usize)> {
        parse_reply(buf, op).expect("well-formed")
    }

    #[test]
    fn get_hit_miss_and_cas_form() {
        let buf = b"VALUE key:0000000007 5 3\r\nabc\r\nEND\r\n";
        let (reply, n) = parse(buf, Op::Get).unwrap();
        assert_eq!(n, buf.len());
        assert_eq!(
            reply,
            Reply::Hit {
                key: b"key:0000000007",
                flags: 5,
                data: b"abc"
            }
        );
        assert_eq!(parse(b"END\r\n", Op::Get), Some((Reply::Miss, 5)));
        let gets = b"VALUE k 0 2 99\r\nhi\r\nEND\r\n";
        let (reply, _) = parse(gets, Op::Get).unwrap();
        assert!(matches!(reply, Reply::Hit { data: b"hi", .. }));
        // A data block may itself contain "\r\nEND\r\n".
        let tricky = b"VALUE k 0 7\r\n\r\nEND\r\n\r\nEND\r\n";
        let (reply, n) = parse(tricky, Op::Get).unwrap();
        assert_eq!(n, tricky.len());
        assert!(matches!(
            reply,
            Reply::Hit {
                data: b"\r\nEND\r\n",
                ..
            }
        ));
    }

    #[test]
    fn set_replies_and_errors() {
        assert_eq!(parse(b"STORED\r\n", Op::Set), Some((Reply::Stored, 8)));
        assert_eq!(
            parse(b"NOT_STORED\r\n", Op::Set),
            Some((Reply::NotStored(b"NOT_STORED"), 12))
        );
        assert_eq!(
            parse(b"ERROR\r\n", Op::Get),
            Some((Reply::Error(b"ERROR"), 7))
        );
        assert_eq!(
            parse(b"ERROR\r\n", Op::Set),
            Some((Reply::Error(b"ERROR"), 7))
        );
        let line = b"SERVER_ERROR out of memory storing object\r\n";
        assert_eq!(
            parse(line, Op::Set),
            Some((Reply::Error(&line[..line.len() - 2]), line.len()))
        );
        let line = b"CLIENT_ERROR bad data chunk\r\n";
        assert!(matches!(parse(line, Op::Get), Some((Reply::Error(_), 29))));
    }

    #[test]
    fn malformed_replies() {
        assert!(parse_reply(b"STORED\r\n", Op::Get).is_err());
        assert!(parse_reply(b"END\r\n", Op::Set).is_err());
        assert!(parse_reply(b"VALUE k x 3\r\nabc\r\nEND\r\n", Op::Get).is_err());
        assert!(parse_reply(b"VALUE k 0\r\n", Op::Get).is_err());
        assert!(parse_reply(b"VALUE k 0 3\r\nabcd\r\nEND\r\n", Op::Get).is_err());
        assert!(parse_reply(b"VALUE k 0 3\r\nabc\r\nVALUE", Op::Get).is_ok()); // incomplete
        assert!(parse_reply(b"VALUE k 0 3\r\nabc\r\nVALUE k 0 1\r\n", Op::Get).is_err());
        assert!(parse_reply(&vec![b'x'; LINE_BYTES_MAX + 1], Op::Get).is_err());
        assert_eq!(parse_reply(&[b'x'; 100], Op::Get), Ok(None));
    }

    /// Several pipelined replies, fed in every possible split into two
    /// reads and byte by byte: the same replies come out.
    #[test]
    fn pipelined_replies_split_across_reads() {
        let stream: &[u8] = b"STORED\r\nVALUE key:0000000001 0 4\r\nab\r\n\r\nEND\r\n\
            END\r\nSERVER_ERROR busy\r\nVALUE x 3 0\r\n\r\nEND\r\nNOT_STORED\r\n";
        let ops = [Op::Set, Op::Get, Op::Get, Op::Set, Op::Get, Op::Set];
        let expected = [
            "Stored",
            "Hit(key:0000000001,0,ab\r\n)",
            "Miss",
            "Error(SERVER_ERROR busy)",
            "Hit(x,3,)",
            "NotStored",
        ];
        let show = |r: &Reply<'_>| match r {
            Reply::Hit { key, flags, data } => format!(
                "Hit({},{flags},{})",
                String::from_utf8_lossy(key),
                String::from_utf8_lossy(data)
            ),
            Reply::Miss => "Miss".to_owned(),
            Reply::Stored => "Stored".to_owned(),
            Reply::NotStored(_) => "NotStored".to_owned(),
            Reply::Error(line) => format!("Error({})", String::from_utf8_lossy(line)),
        };
        // Each read appends a chunk to the buffer, then every complete
        // reply is consumed, as the connection loop does.
        let feed = |chunks: &[&[u8]]| {
            let mut buf = Vec::new();
            let mut start = 0;
            let mut next = 0;
            let mut got = Vec::new();
            for chunk in chunks {
                buf.extend_from_slice(chunk);
                while next < ops.len() {
                    match parse_reply(&buf[start..], ops[next]).unwrap() {
                        Some((reply, n)) => {
                            got.push(show(&reply));
                            start += n;
                            next += 1;
                        }
                        None => break,
                    }
                }
            }
            assert_eq!(start, buf.len());
            got
        };
        for split in 0..=stream.len() {
            let got = feed(&[&stream[..split], &stream[split..]]);
            assert_eq!(got, expected, "split at {split}");
        }
        let bytes: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(feed(&bytes), expected);
    }

    #[test]
    fn requests_and_values() {
        let values = Values::new(32);
        let mut out = Vec::new();
        write_get(&mut out, 42);
        assert_eq!(out, b"get key:0000000042\r\n");
        out.clear();
        write_set(&mut out, 12_345_678_901, &values);
        let head = b"set key:12345678901 0 0 32\r\n";
        assert_eq!(&out[..head.len()], head);
        let value = &out[head.len()..out.len() - 2];
        assert_eq!(&value[..11], b"2345678901:");
        assert!(values.matches(12_345_678_901, value));
        assert!(!values.matches(12_345_678_900, value));
        assert!(!values.matches(12_345_678_901, &value[1..]));
        let mut other = Vec::new();
        values.write(&mut other, 1);
        assert!(values.matches(1, &other));
        assert_ne!(other[11..], value[11..], "different keys, different bytes");
        // Short values (no room for the key prefix) still match themselves.
        let short = Values::new(4);
        let mut v = Vec::new();
        short.write(&mut v, 9);
        assert_eq!(v.len(), 4);
        assert!(short.matches(9, &v));
        let big = Values::new(100_000);
        let mut v = Vec::new();
        big.write(&mut v, 77);
        assert!(big.matches(77, &v) && !big.matches(78, &v));
    }
}
