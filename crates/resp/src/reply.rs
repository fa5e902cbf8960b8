//! Replies in RESP2 or RESP3, composed straight into the connection's
//! output buffer. RESP3-only types are written in their RESP2 form when the
//! connection speaks RESP2, as Redis does: null → `$-1` (or `*-1` for a
//! null array), map → flat array of key, value, …, set → array, double →
//! bulk string, boolean → integer 0/1, big number → bulk string, verbatim
//! → bulk string, push → array.

/// The protocol a connection speaks (`HELLO 2` / `HELLO 3`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Version {
    #[default]
    Resp2,
    Resp3,
}

/// Writes replies into `out`.
pub struct Reply<'a> {
    pub out: &'a mut Vec<u8>,
    pub version: Version,
}

const CRLF: &[u8] = b"\r\n";

impl<'a> Reply<'a> {
    pub fn new(out: &'a mut Vec<u8>, version: Version) -> Reply<'a> {
        Reply { out, version }
    }

    pub fn resp3(&self) -> bool {
        self.version == Version::Resp3
    }

    fn head(&mut self, tag: u8, n: i64) {
        self.out.push(tag);
        self.int_text(n);
        self.out.extend_from_slice(CRLF);
    }

    fn int_text(&mut self, n: i64) {
        let mut buf = itoa_buf(n);
        self.out.extend_from_slice(buf.as_mut_slice());
    }

    /// `+OK`-style status. `s` must hold no CR or LF.
    pub fn simple(&mut self, s: &str) {
        debug_assert!(!s.contains(['\r', '\n']));
        self.out.push(b'+');
        self.out.extend_from_slice(s.as_bytes());
        self.out.extend_from_slice(CRLF);
    }

    /// An array of status lines (the HELP replies).
    pub fn simple_lines(&mut self, lines: &[&str]) {
        self.array(lines.len());
        for l in lines {
            self.simple(l);
        }
    }

    pub fn ok(&mut self) {
        self.out.extend_from_slice(b"+OK\r\n");
    }

    /// An error; `msg` starts with its code (`ERR …`, `WRONGTYPE …`).
    /// CR and LF in it become spaces, as Redis's `addReplyError` does.
    /// An error reply; `msg` may hold any bytes (Redis echoes arguments
    /// raw), its CR and LF become spaces as in Redis.
    pub fn error(&mut self, msg: impl AsRef<[u8]>) {
        self.out.push(b'-');
        self.out.extend(
            msg.as_ref()
                .iter()
                .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
        );
        self.out.extend_from_slice(CRLF);
    }

    pub fn integer(&mut self, n: i64) {
        self.head(b':', n);
    }

    pub fn bulk(&mut self, data: &[u8]) {
        // One capacity check for the whole element, and the header of a
        // short one written at once: an LRANGE of 600 short elements
        // spent 16 % of its CPU here.
        let n = data.len();
        self.out.reserve(n + 24);
        if n < 10 {
            self.out
                .extend_from_slice(&[b'$', b'0' + n as u8, b'\r', b'\n']);
        } else {
            self.head(b'$', n as i64);
        }
        self.out.extend_from_slice(data);
        self.out.extend_from_slice(CRLF);
    }

    /// A missing value: RESP3 `_`, RESP2 `$-1`.
    pub fn null(&mut self) {
        if self.resp3() {
            self.out.extend_from_slice(b"_\r\n");
        } else {
            self.out.extend_from_slice(b"$-1\r\n");
        }
    }

    /// A missing array: RESP3 `_`, RESP2 `*-1`.
    pub fn null_array(&mut self) {
        if self.resp3() {
            self.out.extend_from_slice(b"_\r\n");
        } else {
            self.out.extend_from_slice(b"*-1\r\n");
        }
    }

    /// The header of an array of `n` elements (write them next).
    pub fn array(&mut self, n: usize) {
        self.head(b'*', n as i64);
    }

    /// The header of a map of `n` pairs (write 2n elements next).
    pub fn map(&mut self, n: usize) {
        if self.resp3() {
            self.head(b'%', n as i64);
        } else {
            self.head(b'*', 2 * n as i64);
        }
    }

    /// The header of a set of `n` elements.
    pub fn set(&mut self, n: usize) {
        if self.resp3() {
            self.head(b'~', n as i64);
        } else {
            self.head(b'*', n as i64);
        }
    }

    /// The header of a push message of `n` elements.
    pub fn push(&mut self, n: usize) {
        if self.resp3() {
            self.head(b'>', n as i64);
        } else {
            self.head(b'*', n as i64);
        }
    }

    /// A double, as Redis formats it (`%.17g`, `inf`, `-inf`, `nan`).
    pub fn double(&mut self, d: f64) {
        self.double_text(&format_double(d));
    }

    /// A double already written as text (RESP3 `,`; RESP2 a bulk string),
    /// for replies Redis formats its own way (GEOPOS's `%.17Lf`).
    pub fn double_text(&mut self, text: &str) {
        if self.resp3() {
            self.out.push(b',');
            self.out.extend_from_slice(text.as_bytes());
            self.out.extend_from_slice(CRLF);
        } else {
            self.bulk(text.as_bytes());
        }
    }

    pub fn boolean(&mut self, b: bool) {
        if self.resp3() {
            self.out
                .extend_from_slice(if b { b"#t\r\n" } else { b"#f\r\n" });
        } else {
            self.integer(i64::from(b));
        }
    }

    /// A verbatim string (`=`) of format `fmt` (3 bytes, e.g. `txt`).
    pub fn verbatim(&mut self, fmt: &str, text: &[u8]) {
        if self.resp3() {
            debug_assert_eq!(fmt.len(), 3);
            self.head(b'=', (text.len() + 4) as i64);
            self.out.extend_from_slice(fmt.as_bytes());
            self.out.push(b':');
            self.out.extend_from_slice(text);
            self.out.extend_from_slice(CRLF);
        } else {
            self.bulk(text);
        }
    }

    /// A big number given as decimal text.
    pub fn big_number(&mut self, digits: &str) {
        if self.resp3() {
            self.out.push(b'(');
            self.out.extend_from_slice(digits.as_bytes());
            self.out.extend_from_slice(CRLF);
        } else {
            self.bulk(digits.as_bytes());
        }
    }
}

/// Redis's double formatting for replies (`%.17g`, with `inf`/`-inf`/`nan`).
pub fn format_double(d: f64) -> String {
    if d.is_nan() {
        return "nan".into();
    }
    if d.is_infinite() {
        return if d > 0.0 { "inf".into() } else { "-inf".into() };
    }
    format_g17(d)
}

/// C's `%.17g`.
fn format_g17(d: f64) -> String {
    if d == 0.0 {
        return if d.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    let exp = d.abs().log10().floor() as i32;
    if !(-4..17).contains(&exp) {
        // Exponent form: mantissa with up to 16 decimals, trailing zeros cut.
        let s = format!("{:.16e}", d);
        let (mant, e) = s.split_once('e').expect("exponent");
        let mant = trim_zeros(mant);
        let e: i32 = e.parse().expect("exponent digits");
        let sign = if e < 0 { '-' } else { '+' };
        return format!("{mant}e{sign}{:02}", e.abs());
    }
    let decimals = (16 - exp).max(0) as usize;
    trim_zeros(&format!("{:.*}", decimals, d)).to_string()
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// Decimal text of `n` without allocating.
fn itoa_buf(n: i64) -> ItoaBuf {
    let mut buf = ItoaBuf {
        bytes: [0; 20],
        start: 20,
    };
    let neg = n < 0;
    let mut v = n.unsigned_abs();
    loop {
        buf.start -= 1;
        buf.bytes[buf.start] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    if neg {
        buf.start -= 1;
        buf.bytes[buf.start] = b'-';
    }
    buf
}

struct ItoaBuf {
    bytes: [u8; 20],
    start: usize,
}

impl ItoaBuf {
    fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.bytes[self.start..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn both(f: impl Fn(&mut Reply<'_>)) -> (String, String) {
        let mut a = Vec::new();
        f(&mut Reply::new(&mut a, Version::Resp2));
        let mut b = Vec::new();
        f(&mut Reply::new(&mut b, Version::Resp3));
        (String::from_utf8(a).unwrap(), String::from_utf8(b).unwrap())
    }

    #[test]
    fn resp2_and_resp3_forms() {
        assert_eq!(both(|r| r.null()), ("$-1\r\n".into(), "_\r\n".into()));
        assert_eq!(
            both(|r| r.integer(-42)),
            (":-42\r\n".into(), ":-42\r\n".into())
        );
        assert_eq!(both(|r| r.integer(i64::MIN)).0, ":-9223372036854775808\r\n");
        assert_eq!(both(|r| r.map(2)), ("*4\r\n".into(), "%2\r\n".into()));
        assert_eq!(
            both(|r| r.boolean(true)),
            (":1\r\n".into(), "#t\r\n".into())
        );
        assert_eq!(
            both(|r| r.double(1.5)),
            ("$3\r\n1.5\r\n".into(), ",1.5\r\n".into())
        );
        assert_eq!(both(|r| r.bulk(b"ab")).0, "$2\r\nab\r\n");
        assert_eq!(both(|r| r.error("ERR a\r\nb")).0, "-ERR a  b\r\n");
        assert_eq!(
            both(|r| r.verbatim("txt", b"hi")),
            ("$2\r\nhi\r\n".into(), "=6\r\ntxt:hi\r\n".into())
        );
    }

    #[test]
    fn bulk_strings_of_every_header_width() {
        for n in [0, 1, 9, 10, 11, 99, 100, 12_345] {
            let data = vec![b'x'; n];
            let mut out = b"+before\r\n".to_vec();
            Reply::new(&mut out, Version::Resp2).bulk(&data);
            let mut want = format!("+before\r\n${n}\r\n").into_bytes();
            want.extend_from_slice(&data);
            want.extend_from_slice(b"\r\n");
            assert_eq!(out, want, "length {n}");
        }
    }

    #[test]
    fn doubles_as_redis_prints_them() {
        assert_eq!(format_double(3.0), "3");
        assert_eq!(format_double(0.1), "0.10000000000000001");
        assert_eq!(format_double(10.5), "10.5");
        assert_eq!(format_double(1e20), "1e+20");
        assert_eq!(format_double(f64::INFINITY), "inf");
        assert_eq!(format_double(-0.0), "-0");
        assert_eq!(format_double(1.0e-5), "1.0000000000000001e-05");
    }
}
