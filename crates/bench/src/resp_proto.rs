//! The Redis protocol (RESP2 and RESP3 replies), client side, for the same
//! load as [`crate::proto`]: `GET key` and `SET key value` as multibulk
//! arrays, and one reply at a time parsed out of a buffer that may hold a
//! partial reply, exactly one, or several pipelined ones.
//!
//! Replies understood: a bulk string (`$n` + data: a hit), a null (`$-1`
//! in RESP2, `_` in RESP3: a miss), `+OK` (a stored SET) and `-…` errors.
//! Anything else cannot be framed by this client and is a protocol error.

use crate::proto::{data_block, line, malformed, write_key, Malformed, Op, Reply, Values};

/// `$<len>\r\n<bytes>\r\n` of the key `key:%010d`.
fn write_key_bulk(out: &mut Vec<u8>, index: u64) {
    let mut key = Vec::with_capacity(24);
    write_key(&mut key, index);
    write_bulk_header(out, key.len());
    out.extend_from_slice(&key);
    out.extend_from_slice(b"\r\n");
}

fn write_bulk_header(out: &mut Vec<u8>, len: usize) {
    out.push(b'$');
    out.extend_from_slice(len.to_string().as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// `GET key:…`
pub fn write_get(out: &mut Vec<u8>, index: u64) {
    out.extend_from_slice(b"*2\r\n$3\r\nGET\r\n");
    write_key_bulk(out, index);
}

/// `SET key:… <value>`, the value from `values`.
pub fn write_set(out: &mut Vec<u8>, index: u64, values: &Values) {
    out.extend_from_slice(b"*3\r\n$3\r\nSET\r\n");
    write_key_bulk(out, index);
    write_bulk_header(out, values.bytes());
    values.write(out, index);
    out.extend_from_slice(b"\r\n");
}

/// Parses the reply at the start of `buf` to a request of kind `op`, as
/// [`crate::proto::parse_reply`] does for memcache. A hit's `key` is empty:
/// RESP does not echo it.
pub fn parse_reply(buf: &[u8], op: Op) -> Result<Option<(Reply<'_>, usize)>, Malformed> {
    let Some((first, used)) = line(buf)? else {
        return Ok(None);
    };
    match (first.first(), op) {
        (Some(b'-'), _) => Ok(Some((Reply::Error(first), used))),
        (Some(b'+'), Op::Set) if first == b"+OK" => Ok(Some((Reply::Stored, used))),
        (Some(b'_'), Op::Get) if first.len() == 1 => Ok(Some((Reply::Miss, used))),
        (Some(b'$'), Op::Get) if first == b"$-1" => Ok(Some((Reply::Miss, used))),
        (Some(b'$'), Op::Get) => {
            let len: usize = std::str::from_utf8(&first[1..])
                .ok()
                .and_then(|t| t.parse().ok())
                .ok_or_else(|| malformed("bad bulk length", first))?;
            let Some((data, n)) = data_block(&buf[used..], len, first)? else {
                return Ok(None);
            };
            Ok(Some((
                Reply::Hit {
                    key: b"",
                    flags: 0,
                    data,
                },
                used + n,
            )))
        }
        (Some(b'$'), Op::Set) if first == b"$-1" => {
            // SET … NX/XX not applied (not sent by this client, but framed).
            Ok(Some((Reply::NotStored(first), used)))
        }
        _ => Err(malformed("unexpected reply", first)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_replies() {
        let mut out = Vec::new();
        write_get(&mut out, 7);
        assert_eq!(out, b"*2\r\n$3\r\nGET\r\n$14\r\nkey:0000000007\r\n");
        let values = Values::new(16);
        out.clear();
        write_set(&mut out, 7, &values);
        assert!(out.starts_with(b"*3\r\n$3\r\nSET\r\n$14\r\nkey:0000000007\r\n$16\r\n"));
        assert!(out.ends_with(b"\r\n"));

        assert_eq!(
            parse_reply(b"+OK\r\n", Op::Set),
            Ok(Some((Reply::Stored, 5)))
        );
        assert_eq!(parse_reply(b"$-1\r\n", Op::Get), Ok(Some((Reply::Miss, 5))));
        assert_eq!(parse_reply(b"_\r\n", Op::Get), Ok(Some((Reply::Miss, 3))));
        assert_eq!(
            parse_reply(b"-ERR x\r\n", Op::Get),
            Ok(Some((Reply::Error(b"-ERR x"), 8)))
        );
        let hit = b"$3\r\nabc\r\n+OK\r\n";
        assert_eq!(
            parse_reply(hit, Op::Get),
            Ok(Some((
                Reply::Hit {
                    key: b"",
                    flags: 0,
                    data: b"abc"
                },
                9
            )))
        );
        assert_eq!(parse_reply(&hit[..7], Op::Get), Ok(None));
        assert_eq!(parse_reply(b"$3\r", Op::Get), Ok(None));
        assert!(parse_reply(b"$3\r\nabcd\r\n", Op::Get).is_err());
        assert!(parse_reply(b":1\r\n", Op::Get).is_err());
    }
}
