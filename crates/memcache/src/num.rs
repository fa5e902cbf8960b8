//! Numbers the way memcached reads and writes them: its `safe_strto*`
//! helpers wrap C's `strtoull`/`strtol`, so leading white space, a sign,
//! trailing white space and 32-bit truncation all behave as in C on a
//! 64-bit Linux. Matching them byte for byte is what keeps replies to odd
//! input (`set k -0 0 1`, `incr k +5`) identical to memcached's.

/// C `isspace` in the "C" locale.
#[inline]
pub(crate) fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// What `strtoull` and `strtol` share: leading C white space, an optional
/// sign, then decimal digits. Returns whether a `-` was read, the digits'
/// value (`None` past `u64::MAX`) and the end index, or `None` if there
/// were no digits.
fn scan_decimal(s: &[u8]) -> Option<(bool, Option<u64>, usize)> {
    let mut i = 0;
    while i < s.len() && is_c_space(s[i]) {
        i += 1;
    }
    let mut neg = false;
    if i < s.len() && (s[i] == b'+' || s[i] == b'-') {
        neg = s[i] == b'-';
        i += 1;
    }
    let digits = i;
    let mut v = Some(0u64);
    while i < s.len() && s[i].is_ascii_digit() {
        let d = u64::from(s[i] - b'0');
        v = v
            .and_then(|x| x.checked_mul(10))
            .and_then(|x| x.checked_add(d));
        i += 1;
    }
    (i > digits).then_some((neg, v, i))
}

/// C `strtoull(s, &end, 10)` over `s` as if NUL-terminated at its end.
/// Returns the value (negated modulo 2^64 after a `-`) and the end index,
/// or `None` for "no digits" or `ERANGE`.
fn strtoull(s: &[u8]) -> Option<(u64, usize)> {
    let (neg, v, end) = scan_decimal(s)?;
    let v = v?;
    Some((if neg { v.wrapping_neg() } else { v }, end))
}

/// C `strtol(s, &end, 10)` with a 64-bit `long`.
fn strtol(s: &[u8]) -> Option<(i64, usize)> {
    let (neg, v, end) = scan_decimal(s)?;
    let v = i128::from(v?);
    let signed = if neg { -v } else { v };
    if signed > i128::from(i64::MAX) || signed < i128::from(i64::MIN) {
        return None;
    }
    Some((signed as i64, end))
}

/// memcached's acceptance rule after a conversion: the number must end at
/// the end of the token, at white space, or at a NUL byte (C sees the
/// string end there: `incr` of a stored "1\0abc" reads 1, as memcached).
#[inline]
fn ends_well(s: &[u8], end: usize) -> bool {
    end == s.len() || is_c_space(s[end]) || s[end] == 0
}

/// `s` as C's string functions see it: up to its first NUL.
fn c_str(s: &[u8]) -> &[u8] {
    s.split(|&b| b == 0).next().unwrap_or_default()
}

/// memcached `safe_strtoull`.
pub(crate) fn safe_strtoull(s: &[u8]) -> Option<u64> {
    let (v, end) = strtoull(s)?;
    if !ends_well(s, end) {
        return None;
    }
    if (v as i64) < 0 && c_str(s).contains(&b'-') {
        return None;
    }
    Some(v)
}

/// memcached `safe_strtoul`: a 64-bit `strtoul` truncated to 32 bits.
pub(crate) fn safe_strtoul(s: &[u8]) -> Option<u32> {
    safe_strtoull(s).map(|v| v as u32)
}

/// memcached `safe_strtol`: a 64-bit `strtol` truncated to 32 bits.
pub(crate) fn safe_strtol(s: &[u8]) -> Option<i32> {
    let (v, end) = strtol(s)?;
    if !ends_well(s, end) {
        return None;
    }
    Some(v as i32)
}

/// Appends the decimal form of `v`.
#[inline]
pub(crate) fn put_u64(out: &mut Vec<u8>, mut v: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

/// Appends the decimal form of `v`.
#[inline]
pub(crate) fn put_i64(out: &mut Vec<u8>, v: i64) {
    if v < 0 {
        out.push(b'-');
    }
    put_u64(out, v.unsigned_abs());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strtoull_like_c() {
        assert_eq!(safe_strtoull(b"12"), Some(12));
        assert_eq!(safe_strtoull(b" 12"), Some(12));
        assert_eq!(safe_strtoull(b"+12"), Some(12));
        assert_eq!(safe_strtoull(b"12\t"), Some(12));
        assert_eq!(safe_strtoull(b"12x"), None);
        assert_eq!(safe_strtoull(b""), None);
        assert_eq!(safe_strtoull(b"-"), None);
        assert_eq!(safe_strtoull(b"-1"), None);
        assert_eq!(safe_strtoull(b"-0"), Some(0));
        assert_eq!(safe_strtoull(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(safe_strtoull(b"18446744073709551616"), None);
        assert_eq!(safe_strtoull(b"9223372036854775808"), Some(1 << 63));
        // C stops at a NUL: memcached's incr of a stored "1\0\0clnxy" reads
        // 1 (found by tests/memcache_shapes.rs), and a '-' after the NUL
        // is not seen.
        assert_eq!(safe_strtoull(b"1\0\0clnxy"), Some(1));
        assert_eq!(safe_strtoull(b"9223372036854775808\0-"), Some(1 << 63));
        assert_eq!(safe_strtoull(b"\x001"), None);
    }

    #[test]
    fn strtoul_truncates() {
        assert_eq!(safe_strtoul(b"4294967296"), Some(0));
        assert_eq!(safe_strtoul(b"4294967295"), Some(u32::MAX));
        assert_eq!(safe_strtoul(b"-1"), None);
        assert_eq!(safe_strtoul(b"-18446744073709551615"), Some(1));
    }

    #[test]
    fn strtol_truncates() {
        assert_eq!(safe_strtol(b"-1"), Some(-1));
        assert_eq!(safe_strtol(b"4294967296"), Some(0));
        assert_eq!(safe_strtol(b"2147483648"), Some(i32::MIN));
        assert_eq!(safe_strtol(b"9223372036854775807"), Some(-1));
        assert_eq!(safe_strtol(b"9223372036854775808"), None);
        assert_eq!(safe_strtol(b"-9223372036854775808"), Some(0));
        assert_eq!(safe_strtol(b"1 "), Some(1));
        assert_eq!(safe_strtol(b"x"), None);
    }

    #[test]
    fn itoa() {
        let mut v = Vec::new();
        put_u64(&mut v, 0);
        v.push(b' ');
        put_u64(&mut v, u64::MAX);
        v.push(b' ');
        put_i64(&mut v, -100);
        assert_eq!(v, b"0 18446744073709551615 -100");
    }
}
