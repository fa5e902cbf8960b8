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
    let mut reader = Reader::new(input);
    Ok(parse_at(&mut reader, 0)?.map(|v| (v, reader.position())))
}

fn parse_at(reader: &mut Reader<'_>, depth: usize) -> Result<Option<Value>, ValueError> {
    if depth > NESTING_MAX {
        return Err(ValueError::TooDeep);
    }
    let Some(item) = reader.read()? else {
        return Ok(None);
    };
    let mut items = |n: usize| -> Result<Option<Vec<Value>>, ValueError> {
        let mut vals = Vec::with_capacity(n.min(reader.input.len()));
        for _ in 0..n {
            match parse_at(reader, depth + 1)? {
                Some(v) => vals.push(v),
                None => return Ok(None),
            }
        }
        Ok(Some(vals))
    };
    Ok(Some(match item {
        Item::Simple(s) => Value::Simple(s.to_vec()),
        Item::Error(e) => Value::Error(e.to_vec()),
        Item::Integer(n) => Value::Integer(n),
        Item::Bulk(b) => Value::Bulk(b.map(<[u8]>::to_vec)),
        Item::NullArray => Value::Array(None),
        Item::Null => Value::Null,
        Item::Boolean(b) => Value::Boolean(b),
        Item::Double(d) => Value::Double(d),
        Item::BigNumber(b) => Value::BigNumber(b.to_vec()),
        Item::BulkError(e) => Value::BulkError(e.to_vec()),
        Item::Verbatim(format, text) => Value::Verbatim(format.to_vec(), text.to_vec()),
        Item::Array(n) | Item::Set(n) | Item::Push(n) => {
            let Some(vals) = items(n)? else {
                return Ok(None);
            };
            match item {
                Item::Array(_) => Value::Array(Some(vals)),
                Item::Set(_) => Value::Set(vals),
                _ => Value::Push(vals),
            }
        }
        Item::Map(n) => {
            let Some(vals) = items(n.saturating_mul(2))? else {
                return Ok(None);
            };
            let mut pairs = Vec::with_capacity(n);
            let mut it = vals.into_iter();
            while let (Some(k), Some(v)) = (it.next(), it.next()) {
                pairs.push((k, v));
            }
            Value::Map(pairs)
        }
    }))
}

/// One item of a RESP value, read in place: scalars borrow the input; an
/// aggregate gives its kind and length (a map's in pairs), and its items
/// are the reader's next ones. Nothing here owns memory, so code that
/// must not run destructors (a Lua C function, which may be left by a
/// `longjmp`) can read replies with it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Item<'a> {
    Simple(&'a [u8]),
    Error(&'a [u8]),
    Integer(i64),
    /// `None`: RESP2's null bulk string (`$-1`).
    Bulk(Option<&'a [u8]>),
    /// RESP2's null array (`*-1`).
    NullArray,
    Null,
    Boolean(bool),
    Double(f64),
    BigNumber(&'a [u8]),
    BulkError(&'a [u8]),
    /// Format (3 bytes) and text.
    Verbatim(&'a [u8], &'a [u8]),
    Array(usize),
    Set(usize),
    Push(usize),
    /// Pairs: twice as many items follow.
    Map(usize),
}

/// Reads RESP values item by item, without allocating (see [`Item`]).
/// Nesting is the caller's to bound: the reader keeps no depth.
#[derive(Clone, Copy, Debug)]
pub struct Reader<'a> {
    input: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    pub fn new(input: &'a [u8]) -> Self {
        Reader { input, at: 0 }
    }

    /// Where the next item starts: after the last one read.
    pub fn position(&self) -> usize {
        self.at
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.input.len() - self.at
    }

    /// The next item, or `Ok(None)` (the position unchanged) if the input
    /// ends before it does.
    pub fn read(&mut self) -> Result<Option<Item<'a>>, ValueError> {
        let input = self.input;
        let Some(&tag) = input.get(self.at) else {
            return Ok(None);
        };
        let Some((text, next)) = line(input, self.at + 1) else {
            return Ok(None);
        };
        let int = || string2ll(text).ok_or(ValueError::Invalid("bad number"));
        let count = |n: i64| usize::try_from(n).map_err(|_| ValueError::Invalid("bad length"));
        let (item, end) = match tag {
            b'+' => (Item::Simple(text), next),
            b'-' => (Item::Error(text), next),
            b':' => (Item::Integer(int()?), next),
            b'_' if text.is_empty() => (Item::Null, next),
            b'#' => match text {
                b"t" => (Item::Boolean(true), next),
                b"f" => (Item::Boolean(false), next),
                _ => return Err(ValueError::Invalid("bad boolean")),
            },
            b',' => {
                let s = std::str::from_utf8(text).map_err(|_| ValueError::Invalid("bad double"))?;
                let d = match s {
                    "inf" => f64::INFINITY,
                    "-inf" => f64::NEG_INFINITY,
                    _ => s.parse().map_err(|_| ValueError::Invalid("bad double"))?,
                };
                (Item::Double(d), next)
            }
            b'(' => (Item::BigNumber(text), next),
            b'$' | b'!' | b'=' => {
                let n = int()?;
                if n == -1 && tag == b'$' {
                    (Item::Bulk(None), next)
                } else {
                    let n = count(n)?;
                    let Some(body) = input.get(next..next.saturating_add(n)) else {
                        return Ok(None);
                    };
                    match input.get(next + n..next + n + 2) {
                        None => return Ok(None),
                        Some(b"\r\n") => {}
                        Some(_) => return Err(ValueError::Invalid("bulk not ended by CRLF")),
                    }
                    let end = next + n + 2;
                    match tag {
                        b'$' => (Item::Bulk(Some(body)), end),
                        b'!' => (Item::BulkError(body), end),
                        _ => {
                            if body.len() < 4 || body[3] != b':' {
                                return Err(ValueError::Invalid("bad verbatim string"));
                            }
                            (Item::Verbatim(&body[..3], &body[4..]), end)
                        }
                    }
                }
            }
            b'*' | b'~' | b'>' | b'%' => {
                let n = int()?;
                if n == -1 && tag == b'*' {
                    (Item::NullArray, next)
                } else {
                    let n = count(n)?;
                    let item = match tag {
                        b'*' => Item::Array(n),
                        b'~' => Item::Set(n),
                        b'>' => Item::Push(n),
                        _ => Item::Map(n),
                    };
                    (item, next)
                }
            }
            _ => return Err(ValueError::Invalid("unknown type byte")),
        };
        self.at = end;
        Ok(Some(item))
    }
}

fn line(input: &[u8], at: usize) -> Option<(&[u8], usize)> {
    let rest = input.get(at..)?;
    let nl = memchr::memmem::find(rest, b"\r\n")?;
    Some((&rest[..nl], at + nl + 2))
}
