//! Meta command flags, parsed as memcached 1.6.18's `_meta_flag_preparse`
//! does: every meta command accepts the same set of flags (ignoring those
//! it has no use for), a repeated flag or a byte >= 127 is a "duplicate",
//! an unknown one is "invalid", and a bad numeric argument marks an error
//! whose message the last bad flag decides.

use crate::num::{safe_strtol, safe_strtoul, safe_strtoull};
use crate::text::Tokens;

/// Longest opaque token (`O` plus 31 bytes), memcached's
/// `MFLAG_MAX_OPAQUE_LENGTH`.
pub(crate) const OPAQUE_BYTES_MAX: usize = 32;

/// memcached's `MFLAG_MAX_OPT_LENGTH`: a meta command line may hold at most
/// this many tokens (command, key, flags and the terminal one).
pub(crate) const META_TOKENS_MAX: usize = 20;

/// What the flags asked for.
#[derive(Debug, Default)]
pub(crate) struct MetaFlags {
    /// `b`: the key is base64; it has been decoded into the key buffer.
    pub key_binary: bool,
    /// `N<ttl>`: create on miss with this exptime (raw seconds).
    pub vivify: Option<i32>,
    /// `T<ttl>`: new exptime (raw seconds).
    pub ttl: Option<i32>,
    /// `R<secs>`: win the recache if the item has less TTL left.
    pub recache: Option<i32>,
    /// `I`: invalidate (mark stale) instead of deleting or failing a CAS.
    pub invalidate: bool,
    /// `v`: return the value.
    pub value: bool,
    /// `q`: suppress the nominal reply.
    pub no_reply: bool,
    /// `F<flags>`.
    pub client_flags: u32,
    /// `C<cas>`.
    pub cas: Option<u64>,
    /// `M<mode>`: the mode byte, 0 if none.
    pub mode: u8,
    /// `D<delta>`.
    pub delta: Option<u64>,
    /// `J<initial>`.
    pub initial: u64,
    /// `h`: report whether the item was fetched before.
    pub hit_before: bool,
    /// `l`: report the seconds since its last access.
    pub last_access: bool,
    /// `u`: do not count this as a fetch (no LRU bump).
    pub no_update: bool,
}

/// Parses the flags `tok.t[start..]` of a meta command. A `b` flag
/// decodes the key (`tok.t[1]`) into `key_buf`.
pub(crate) fn parse(
    tok: &Tokens,
    start: usize,
    key_buf: &mut Vec<u8>,
) -> Result<MetaFlags, &'static str> {
    let mut f = MetaFlags::default();
    let mut seen = [false; 127];
    let mut err: Option<&'static str> = None;
    let bad_token = "CLIENT_ERROR bad token in command line format";
    for &t in &tok.t[start..tok.n] {
        let o = t[0];
        if o >= 127 || seen[usize::from(o)] {
            return Err("CLIENT_ERROR duplicate flag");
        }
        seen[usize::from(o)] = true;
        let arg = &t[1..];
        match o {
            b'b' => {
                f.key_binary = true;
                if crate::base64::decode(tok.t[1], key_buf).is_none() {
                    err = Some("CLIENT_ERROR error decoding key");
                }
            }
            b'N' => match safe_strtol(arg) {
                Some(v) => f.vivify = Some(v),
                None => err = Some(bad_token),
            },
            b'T' => match safe_strtol(arg) {
                Some(v) => f.ttl = Some(v),
                None => err = Some(bad_token),
            },
            b'R' => match safe_strtol(arg) {
                Some(v) => f.recache = Some(v),
                None => err = Some(bad_token),
            },
            b'I' => f.invalidate = true,
            b'h' => f.hit_before = true,
            b'l' => f.last_access = true,
            b'u' => f.no_update = true,
            b'O' | b'P' | b'L' | b'k' | b's' | b't' | b'c' | b'f' => {}
            b'v' => f.value = true,
            b'q' => f.no_reply = true,
            b'F' => match safe_strtoul(arg) {
                Some(v) => f.client_flags = v,
                None => err = Some(err.unwrap_or("CLIENT_ERROR bad command line format")),
            },
            b'C' => match safe_strtoull(arg) {
                Some(v) => f.cas = Some(v),
                None => err = Some(bad_token),
            },
            b'M' => {
                if t.len() != 2 {
                    err = Some("CLIENT_ERROR incorrect length for M token");
                } else {
                    f.mode = t[1];
                }
            }
            b'J' => match safe_strtoull(arg) {
                Some(v) => f.initial = v,
                None => err = Some("CLIENT_ERROR invalid numeric initial value"),
            },
            b'D' => match safe_strtoull(arg) {
                Some(v) => f.delta = Some(v),
                None => err = Some("CLIENT_ERROR invalid numeric delta value"),
            },
            _ => return Err("CLIENT_ERROR invalid flag"),
        }
    }
    match err {
        Some(e) => Err(e),
        None => Ok(f),
    }
}

/// Whether an opaque token among the flags `tok.t[start..]` is over its
/// limit. memcached checks opaque lengths while composing the reply, so
/// where a command reports it depends on the command (md before it runs,
/// ms after its mode, mg and ma after they ran).
pub(crate) fn opaque_too_long(tok: &Tokens, start: usize) -> bool {
    long_opaque_at(tok, start).is_some()
}

/// The index in `tok.t` of the first over-long opaque token among the
/// flags `tok.t[start..]`, if any.
pub(crate) fn long_opaque_at(tok: &Tokens, start: usize) -> Option<usize> {
    tok.t[start..tok.n]
        .iter()
        .position(|t| t[0] == b'O' && t.len() > OPAQUE_BYTES_MAX)
        .map(|i| i + start)
}
