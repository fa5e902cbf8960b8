//! Requests as a Redis 7 server reads them (`processMultibulkBuffer`,
//! `processInlineBuffer` in networking.c).

use crate::inline::split_args;
use crate::Limits;

/// One command: its arguments, borrowed from the input (inline commands
/// with quotes or escapes own theirs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Command<'a> {
    pub args: Vec<std::borrow::Cow<'a, [u8]>>,
}

impl Command<'_> {
    /// The command name (the first argument); `None` for an empty command.
    pub fn name(&self) -> Option<&[u8]> {
        self.args.first().map(|a| a.as_ref())
    }
}

/// What [`parse_command`] found at the start of the input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Parsed<'a> {
    /// A whole command, and the bytes it took.
    Command(Command<'a>, usize),
    /// Bytes that hold no command (an empty inline line, `*0\r\n`, `*-1`):
    /// skip them.
    Skip(usize),
    /// The command is not complete yet: read more.
    Incomplete,
}

/// A request Redis refuses with `-ERR Protocol error: …` and then closes
/// the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParseError {
    TooBigMbulkCount,
    InvalidMultibulkLength,
    /// `expected '$', got 'X'`.
    ExpectedDollar(u8),
    TooBigBulkCount,
    InvalidBulkLength,
    TooBigInline,
    UnbalancedQuotes,
}

impl ParseError {
    /// The error reply, as Redis words it (without the `-` and CRLF).
    pub fn message(&self) -> String {
        let m = match self {
            ParseError::TooBigMbulkCount => "too big mbulk count string".to_owned(),
            ParseError::InvalidMultibulkLength => "invalid multibulk length".to_owned(),
            ParseError::ExpectedDollar(b) => format!("expected '$', got '{}'", *b as char),
            ParseError::TooBigBulkCount => "too big bulk count string".to_owned(),
            ParseError::InvalidBulkLength => "invalid bulk length".to_owned(),
            ParseError::TooBigInline => "too big inline request".to_owned(),
            ParseError::UnbalancedQuotes => "unbalanced quotes in request".to_owned(),
        };
        format!("ERR Protocol error: {m}")
    }
}

/// Reads the command at the start of `input`.
pub fn parse_command<'a>(input: &'a [u8], limits: &Limits) -> Result<Parsed<'a>, ParseError> {
    match input.first() {
        None => Ok(Parsed::Incomplete),
        Some(b'*') => multibulk(input, limits),
        Some(_) => inline(input, limits),
    }
}

/// The line at `at`, as Redis finds it: up to the first `\r`, with one
/// more byte after it (assumed `\n`, never checked) before the next line.
/// `None` until both are in.
fn line(input: &[u8], at: usize) -> Option<(&[u8], usize)> {
    let rest = &input[at..];
    let cr = memchr::memchr(b'\r', rest)?;
    if cr + 1 >= rest.len() {
        return None;
    }
    Some((&rest[..cr], at + cr + 2))
}

/// Redis's `string2ll`: an optional `-`, decimal digits, no leading zeros
/// (except "0"), no spaces, no `+`, within i64. Commands read their integer
/// arguments (and INCR its stored value) with it.
pub fn string2ll(s: &[u8]) -> Option<i64> {
    let (neg, digits) = match s.split_first() {
        Some((b'-', d)) => (true, d),
        _ => (false, s),
    };
    if digits.is_empty() || digits.len() > 20 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if digits.len() > 1 && digits[0] == b'0' {
        return None;
    }
    if neg && digits == b"0" {
        // "-0" is refused by string2ll.
        return None;
    }
    let mut v: i128 = 0;
    for &d in digits {
        v = v * 10 + i128::from(d - b'0');
    }
    let v = if neg { -v } else { v };
    i64::try_from(v).ok()
}

fn multibulk<'a>(input: &'a [u8], limits: &Limits) -> Result<Parsed<'a>, ParseError> {
    let Some((count_line, mut at)) = line(input, 1) else {
        if input.len() > limits.inline_bytes_max {
            return Err(ParseError::TooBigMbulkCount);
        }
        return Ok(Parsed::Incomplete);
    };
    let count = string2ll(count_line).ok_or(ParseError::InvalidMultibulkLength)?;
    if count > i64::from(i32::MAX) || count > limits.args_max as i64 {
        return Err(ParseError::InvalidMultibulkLength);
    }
    if count <= 0 {
        return Ok(Parsed::Skip(at));
    }
    // Preallocate only what the input can hold (a `*1000000` with nothing
    // after it must not reserve a million slots).
    let mut args = Vec::with_capacity((count as usize).min(input.len() / 4 + 1));
    for _ in 0..count {
        let Some(&first) = input.get(at) else {
            return Ok(Parsed::Incomplete);
        };
        if first != b'$' {
            return Err(ParseError::ExpectedDollar(first));
        }
        let Some((len_line, body)) = line(input, at + 1) else {
            if input.len() - at > limits.inline_bytes_max {
                return Err(ParseError::TooBigBulkCount);
            }
            return Ok(Parsed::Incomplete);
        };
        let len = string2ll(len_line).ok_or(ParseError::InvalidBulkLength)?;
        if len < 0 || len as u64 > limits.bulk_bytes_max as u64 {
            return Err(ParseError::InvalidBulkLength);
        }
        let len = len as usize;
        // Redis skips the two bytes after the bulk without checking them.
        let end = body + len;
        if input.len() < end + 2 {
            return Ok(Parsed::Incomplete);
        }
        args.push(std::borrow::Cow::Borrowed(&input[body..end]));
        at = end + 2;
    }
    Ok(Parsed::Command(Command { args }, at))
}

fn inline<'a>(input: &'a [u8], limits: &Limits) -> Result<Parsed<'a>, ParseError> {
    let Some(nl) = memchr::memchr(b'\n', input) else {
        if input.len() > limits.inline_bytes_max {
            return Err(ParseError::TooBigInline);
        }
        return Ok(Parsed::Incomplete);
    };
    let mut line = &input[..nl];
    if let Some(l) = line.strip_suffix(b"\r") {
        line = l;
    }
    let args = split_args(line).ok_or(ParseError::UnbalancedQuotes)?;
    if args.is_empty() {
        return Ok(Parsed::Skip(nl + 1));
    }
    Ok(Parsed::Command(Command { args }, nl + 1))
}
