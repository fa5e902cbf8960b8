//! Any RESP2 or RESP3 value, as a client reads a reply: for tests, tools
//! and load generators. Nesting is limited so that hostile input cannot
//! exhaust the stack.

use crate::request::string2ll;

/// Deepest nesting of aggregates [`parse_value`] accepts.
pub const NESTING_MAX: usize = 128;

#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Simple(Vec<u8>),
    Error(Vec<u8>),
    Integer(i64),
    /// `None`: RESP2's null bulk string (`$-1`).
    Bulk(Option<Vec<u8>>),
    /// `None`: RESP2's null array (`*-1`).
    Array(Option<Vec<Value>>),
    Null,
    Boolean(bool),
    Double(f64),
    BigNumber(Vec<u8>),
    BulkError(Vec<u8>),
    Verbatim(Vec<u8>, Vec<u8>),
    Map(Vec<(Value, Value)>),
    Set(Vec<Value>),
    Push(Vec<Value>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ValueError {
    /// Not RESP: what was wrong.
    Invalid(&'static str),
    /// Aggregates nested deeper than [`NESTING_MAX`].
    TooDeep,
}

/// The value at the start of `input` and its length, or `Ok(None)` if the
/// input ends before it does.
pub fn parse_value(input: &[u8]) -> Result<Option<(Value, usize)>, ValueError> {
    parse_at(input, 0, 0)
}

fn line(input: &[u8], at: usize) -> Option<(&[u8], usize)> {
    let rest = input.get(at..)?;
    let nl = memchr::memmem::find(rest, b"\r\n")?;
    Some((&rest[..nl], at + nl + 2))
}

fn parse_at(input: &[u8], at: usize, depth: usize) -> Result<Option<(Value, usize)>, ValueError> {
    if depth > NESTING_MAX {
        return Err(ValueError::TooDeep);
    }
    let Some(&tag) = input.get(at) else {
        return Ok(None);
    };
    let Some((text, next)) = line(input, at + 1) else {
        return Ok(None);
    };
    let int = || string2ll(text).ok_or(ValueError::Invalid("bad number"));
    let count = |n: i64| usize::try_from(n).map_err(|_| ValueError::Invalid("bad length"));
    let v = match tag {
        b'+' => (Value::Simple(text.to_vec()), next),
        b'-' => (Value::Error(text.to_vec()), next),
        b':' => (Value::Integer(int()?), next),
        b'_' if text.is_empty() => (Value::Null, next),
        b'#' => match text {
            b"t" => (Value::Boolean(true), next),
            b"f" => (Value::Boolean(false), next),
            _ => return Err(ValueError::Invalid("bad boolean")),
        },
        b',' => {
            let s = std::str::from_utf8(text).map_err(|_| ValueError::Invalid("bad double"))?;
            let d = match s {
                "inf" => f64::INFINITY,
                "-inf" => f64::NEG_INFINITY,
                _ => s.parse().map_err(|_| ValueError::Invalid("bad double"))?,
            };
            (Value::Double(d), next)
        }
        b'(' => (Value::BigNumber(text.to_vec()), next),
        b'$' | b'!' | b'=' => {
            let n = int()?;
            if n == -1 && tag == b'$' {
                (Value::Bulk(None), next)
            } else {
                let n = count(n)?;
                let Some(body) = input.get(next..next + n) else {
                    return Ok(None);
                };
                match input.get(next + n..next + n + 2) {
                    None => return Ok(None),
                    Some(b"\r\n") => {}
                    Some(_) => return Err(ValueError::Invalid("bulk not ended by CRLF")),
                }
                let end = next + n + 2;
                match tag {
                    b'$' => (Value::Bulk(Some(body.to_vec())), end),
                    b'!' => (Value::BulkError(body.to_vec()), end),
                    _ => {
                        if body.len() < 4 || body[3] != b':' {
                            return Err(ValueError::Invalid("bad verbatim string"));
                        }
                        (Value::Verbatim(body[..3].to_vec(), body[4..].to_vec()), end)
                    }
                }
            }
        }
        b'*' | b'~' | b'>' | b'%' => {
            let n = int()?;
            if n == -1 && tag == b'*' {
                (Value::Array(None), next)
            } else {
                let n = count(n)?;
                let items = if tag == b'%' { n.saturating_mul(2) } else { n };
                let mut vals = Vec::with_capacity(items.min(input.len()));
                let mut at = next;
                for _ in 0..items {
                    match parse_at(input, at, depth + 1)? {
                        Some((v, end)) => {
                            vals.push(v);
                            at = end;
                        }
                        None => return Ok(None),
                    }
                }
                let v = match tag {
                    b'*' => Value::Array(Some(vals)),
                    b'~' => Value::Set(vals),
                    b'>' => Value::Push(vals),
                    _ => {
                        let mut pairs = Vec::with_capacity(n);
                        let mut it = vals.into_iter();
                        while let (Some(k), Some(v)) = (it.next(), it.next()) {
                            pairs.push((k, v));
                        }
                        Value::Map(pairs)
                    }
                };
                (v, at)
            }
        }
        _ => return Err(ValueError::Invalid("unknown type byte")),
    };
    Ok(Some(v))
}
