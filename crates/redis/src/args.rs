//! Reading a command's arguments as Redis does: the arity check, names
//! and options upper-cased, integers, floats and the numkeys form of the
//! MPOP commands. Every command file reads its arguments through these.

use nvdepot_resp::{errors, string2ll, Reply};

/// `ERR wrong number of arguments …` unless `args.len()` is within
/// `min..=max` (command name included).
pub fn arity(args: &[&[u8]], min: usize, max: Option<usize>, r: &mut Reply<'_>) -> bool {
    let n = args.len();
    if n < min || max.is_some_and(|m| n > m) {
        r.error(errors::wrong_arity(args[0]));
        return false;
    }
    true
}

/// Longest command name or option [`upper`] keeps (Redis's longest is 20
/// bytes).
const UPPER_MAX: usize = 32;

/// A command name or option upper-cased on the stack: two per command,
/// which were two allocations.
pub(super) struct Upper {
    buf: [u8; UPPER_MAX],
    len: usize,
}

impl Upper {
    pub fn as_slice(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl std::ops::Deref for Upper {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

/// `name` upper-cased; one longer than [`UPPER_MAX`] becomes a NUL byte,
/// which matches no name (replies quote the client's own bytes).
pub(super) fn upper(name: &[u8]) -> Upper {
    let mut buf = [0u8; UPPER_MAX];
    if name.len() > UPPER_MAX {
        return Upper { buf, len: 1 };
    }
    for (b, c) in buf.iter_mut().zip(name) {
        *b = c.to_ascii_uppercase();
    }
    Upper {
        buf,
        len: name.len(),
    }
}

/// An integer argument as Redis reads one.
pub fn int_arg(a: &[u8]) -> Option<i64> {
    string2ll(a)
}

/// A 32-bit integer argument as Redis's `getIntFromObjectOrReply` reads
/// it, or `None` once its error is replied: not an integer, or one past
/// the 32 bits.
pub fn int32_arg(a: &[u8], r: &mut Reply<'_>) -> Option<i32> {
    match int_arg(a) {
        None => {
            r.error(errors::NOT_INTEGER);
            None
        }
        Some(n) => match i32::try_from(n) {
            Ok(n) => Some(n),
            Err(_) => {
                r.error("ERR value is out of range, value must between -2147483648 and 2147483647");
                None
            }
        },
    }
}

/// The arguments of LMPOP and ZMPOP (and BLMPOP's, BZMPOP's), numkeys at
/// `at`: the keys, the end `end` reads from the word after them (SYNTAX if
/// it names none), and COUNT (1 if not given), with Redis's errors in
/// Redis's order.
pub(super) fn mpop_args<'a, E>(
    args: &[&'a [u8]],
    at: usize,
    end: impl FnOnce(&[u8]) -> Option<E>,
) -> Result<(Vec<&'a [u8]>, E, usize), &'static str> {
    let numkeys = match args.get(at).and_then(|a| string2ll(a)) {
        Some(n) if n > 0 => n as usize,
        _ => return Err("ERR numkeys should be greater than 0"),
    };
    if numkeys > args.len().saturating_sub(at + 2) {
        return Err(errors::SYNTAX);
    }
    let keys = args[at + 1..at + 1 + numkeys].to_vec();
    let end = end(args[at + 1 + numkeys]).ok_or(errors::SYNTAX)?;
    let mut count = None;
    let mut i = at + 2 + numkeys;
    while i < args.len() {
        if count.is_none() && args[i].eq_ignore_ascii_case(b"COUNT") && i + 1 < args.len() {
            match string2ll(args[i + 1]) {
                Some(n) if n > 0 => count = Some(n as usize),
                _ => return Err("ERR count should be greater than 0"),
            }
            i += 2;
        } else {
            return Err(errors::SYNTAX);
        }
    }
    Ok((keys, end, count.unwrap_or(1)))
}

/// A float as Redis 7.0's `string2ld` reads one: C's `strtold` grammar
/// (decimal or hex digits, exponents, `inf`, `infinity`), under 5 KiB
/// (`MAX_LONG_DOUBLE_CHARS`), no leading space, every byte part of the
/// number (a NUL byte included: Redis compares the parsed length), not
/// NaN, not an underflow to zero.
/// Parsed with `strtod` (nvdepot computes in f64): a number past f64's
/// range reads as infinite, which INCRBYFLOAT then refuses (Redis's long
/// double holds up to ~1e4932: the documented deviation).
pub(crate) fn parse_float(a: &[u8]) -> Option<f64> {
    if a.is_empty() || a.len() >= 5 * 1024 || matches!(a[0], b' ' | b'\t'..=b'\r') {
        return None;
    }
    let text = a;
    let c = std::ffi::CString::new(text).ok()?;
    let mut end: *mut libc::c_char = std::ptr::null_mut();
    // SAFETY: `c` is a NUL-terminated string that outlives the call;
    // strtod writes only `end` (a pointer into `c`) and errno, which is
    // this thread's and read right after.
    let (value, range_error) = unsafe {
        *libc::__errno_location() = 0;
        let v = libc::strtod(c.as_ptr(), &mut end);
        (v, *libc::__errno_location() == libc::ERANGE)
    };
    let consumed = end as usize - c.as_ptr() as usize;
    if consumed != text.len() || value.is_nan() || (range_error && value == 0.0) {
        return None;
    }
    Some(value)
}

/// A float as INCRBYFLOAT answers it: fixed-point, no exponent, no
/// trailing zeros (Redis's `LD_STR_HUMAN`), the shortest digits that read
/// back as the same number.
pub(crate) fn format_float(f: f64) -> String {
    if f == 0.0 {
        return "0".into();
    }
    let s = format!("{f}");
    s.strip_suffix(".0").map(str::to_string).unwrap_or(s)
}

/// The indexes HRANDFIELD, SRANDMEMBER and ZRANDMEMBER pick from `len`
/// elements for a count `n`: none for 0, `|n|` independent draws (repeats
/// allowed) for a negative count, every index for a count of at least
/// `len`, else `n` distinct ones.
pub fn random_picks(len: usize, n: i64) -> Vec<usize> {
    use rand::Rng;
    let mut rng = rand::thread_rng();
    if len == 0 || n == 0 {
        Vec::new()
    } else if n < 0 {
        (0..n.unsigned_abs())
            .map(|_| rng.gen_range(0..len))
            .collect()
    } else if n as u64 >= len as u64 {
        (0..len).collect()
    } else {
        rand::seq::index::sample(&mut rng, len, n as usize).into_vec()
    }
}
