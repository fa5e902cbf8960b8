//! Redis 7's error replies, worded exactly as it words them (without the
//! leading `-` and the CRLF: pass them to `Reply::error`).

pub const SYNTAX: &str = "ERR syntax error";
pub const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
pub const NOT_FLOAT: &str = "ERR value is not a valid float";
pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
pub const NO_SUCH_KEY: &str = "ERR no such key";
pub const OVERFLOW: &str = "ERR increment or decrement would overflow";
pub const INVALID_DB: &str = "ERR DB index is out of range";
pub const NOAUTH: &str = "NOAUTH Authentication required.";
pub const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";
pub const MULTI_NESTED: &str = "ERR MULTI calls can not be nested";
pub const EXEC_WITHOUT_MULTI: &str = "ERR EXEC without MULTI";
pub const DISCARD_WITHOUT_MULTI: &str = "ERR DISCARD without MULTI";
pub const EXECABORT: &str = "EXECABORT Transaction discarded because of previous errors.";

/// `ERR wrong number of arguments for 'get' command` (the name as the
/// client sent it, lowercased as Redis prints its table name).
pub fn wrong_arity(name: &[u8]) -> String {
    format!(
        "ERR wrong number of arguments for '{}' command",
        String::from_utf8_lossy(name).to_lowercase()
    )
}

/// `ERR unknown command 'foo', with args beginning with: 'a' 'b' `: the
/// name as sent and the arguments after it, each cut to 128 bytes, the
/// whole cut as Redis's `sdscatfmt`/`sdsrange` would.
pub fn unknown_command(args: &[&[u8]]) -> String {
    let name = args.first().copied().unwrap_or_default();
    let mut s = format!(
        "ERR unknown command '{}', with args beginning with: ",
        clip(name)
    );
    for a in args.iter().skip(1) {
        if s.len() >= 128 {
            break;
        }
        s.push_str(&format!("'{}' ", clip(a)));
    }
    s
}

/// At most 128 bytes, as text (bytes Redis would print raw, shown lossy).
fn clip(a: &[u8]) -> String {
    String::from_utf8_lossy(&a[..a.len().min(128)]).into_owned()
}
