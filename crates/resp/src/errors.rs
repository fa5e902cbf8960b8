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

/// `ERR wrong number of arguments for 'config|get' command`: a container
/// command's subcommand (`sub` as the client sent it).
pub fn wrong_sub_arity(container: &str, sub: &[u8]) -> String {
    let mut full = container.as_bytes().to_vec();
    full.push(b'|');
    full.extend_from_slice(sub);
    wrong_arity(&full)
}

/// `ERR unknown command 'foo', with args beginning with: 'a' 'b' `, byte
/// for byte as Redis 7.0 builds it: the name up to 128 bytes, then the
/// arguments while their list is under 128 bytes, each cut to what is
/// left of the 128; every one printed raw up to its first NUL (Redis
/// formats them with `%.*s`).
pub fn unknown_command(args: &[&[u8]]) -> Vec<u8> {
    let name = args.first().copied().unwrap_or_default();
    let mut s = b"ERR unknown command '".to_vec();
    s.extend_from_slice(c_string(name, 128));
    s.extend_from_slice(b"', with args beginning with: ");
    let mut listed = 0;
    for a in args.iter().skip(1) {
        if listed >= 128 {
            break;
        }
        let a = c_string(a, 128 - listed);
        s.push(b'\'');
        s.extend_from_slice(a);
        s.extend_from_slice(b"' ");
        listed += a.len() + 3;
    }
    s
}

/// `prefix`, then `arg` as Redis's `%.Ns` prints it (see [`c_string`]),
/// then `suffix`: an error that quotes a client's argument, byte for byte.
pub fn quoting(prefix: &str, arg: &[u8], max: usize, suffix: &str) -> Vec<u8> {
    let mut s = prefix.as_bytes().to_vec();
    s.extend_from_slice(c_string(arg, max));
    s.extend_from_slice(suffix.as_bytes());
    s
}

/// Redis's `addReplySubcommandSyntaxError`: `ERR unknown subcommand
/// '<sub>'. Try <COMMAND> HELP.`, the subcommand as `%.128s` prints it.
pub fn unknown_subcommand(command: &str, sub: &[u8]) -> Vec<u8> {
    quoting(
        "ERR unknown subcommand '",
        sub,
        128,
        &format!("'. Try {command} HELP."),
    )
}

/// What Redis's `%.Ns` prints of an argument: its raw bytes up to the
/// first NUL (it formats them as a C string), at most `max`.
pub fn c_string(a: &[u8], max: usize) -> &[u8] {
    let a = &a[..a.len().min(max)];
    match a.iter().position(|&b| b == 0) {
        Some(nul) => &a[..nul],
        None => a,
    }
}
