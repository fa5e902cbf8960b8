//! Inline commands split as Redis's `sdssplitargs` splits them: words
//! separated by spaces, `"double quoted"` with escapes (`\n \r \t \b \a \\
//! \" \xHH`), `'single quoted'` with `\'` only; a closing quote must be
//! followed by a space or the end.

use std::borrow::Cow;

/// The arguments of `line`, or `None` for unbalanced quotes.
pub(crate) fn split_args(line: &[u8]) -> Option<Vec<Cow<'_, [u8]>>> {
    let mut args = Vec::new();
    let mut i = 0;
    let n = line.len();
    loop {
        while i < n && is_space(line[i]) {
            i += 1;
        }
        if i >= n {
            return Some(args);
        }
        let start = i;
        let mut owned: Option<Vec<u8>> = None;
        let mut in_dq = false;
        let mut in_sq = false;
        loop {
            if in_dq {
                if i >= n {
                    return None;
                }
                let c = line[i];
                let buf = owned.get_or_insert_with(Vec::new);
                if c == b'\\'
                    && i + 3 < n
                    && line[i + 1] == b'x'
                    && line[i + 2].is_ascii_hexdigit()
                    && line[i + 3].is_ascii_hexdigit()
                {
                    buf.push(hex(line[i + 2]) * 16 + hex(line[i + 3]));
                    i += 4;
                    continue;
                } else if c == b'\\' && i + 1 < n {
                    buf.push(match line[i + 1] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 0x08,
                        b'a' => 0x07,
                        other => other,
                    });
                    i += 2;
                    continue;
                } else if c == b'"' {
                    // The closing quote must be followed by a space or the end.
                    if i + 1 < n && !is_space(line[i + 1]) {
                        return None;
                    }
                    i += 1;
                    break;
                }
                buf.push(c);
                i += 1;
            } else if in_sq {
                if i >= n {
                    return None;
                }
                let c = line[i];
                let buf = owned.get_or_insert_with(Vec::new);
                if c == b'\\' && i + 1 < n && line[i + 1] == b'\'' {
                    buf.push(b'\'');
                    i += 2;
                    continue;
                } else if c == b'\'' {
                    if i + 1 < n && !is_space(line[i + 1]) {
                        return None;
                    }
                    i += 1;
                    break;
                }
                buf.push(c);
                i += 1;
            } else {
                if i >= n || is_space(line[i]) {
                    break;
                }
                match line[i] {
                    b'"' | b'\'' => {
                        // A quote opens a quoted part; what came before it
                        // in this word is kept.
                        let buf = owned.get_or_insert_with(Vec::new);
                        if buf.is_empty() {
                            buf.extend_from_slice(&line[start..i]);
                        }
                        if line[i] == b'"' {
                            in_dq = true;
                        } else {
                            in_sq = true;
                        }
                    }
                    c => {
                        if let Some(buf) = owned.as_mut() {
                            buf.push(c);
                        }
                    }
                }
                i += 1;
            }
        }
        args.push(match owned {
            Some(v) => Cow::Owned(v),
            None => Cow::Borrowed(&line[start..i]),
        });
    }
}

/// C `isspace` in the "C" locale.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

fn hex(b: u8) -> u8 {
    match b {
        b'0'..=b'9' => b - b'0',
        b'a'..=b'f' => b - b'a' + 10,
        _ => b - b'A' + 10,
    }
}

#[cfg(test)]
mod tests {
    use super::split_args;

    fn split(s: &str) -> Option<Vec<String>> {
        split_args(s.as_bytes()).map(|v| {
            v.iter()
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        })
    }

    #[test]
    fn as_sdssplitargs() {
        assert_eq!(split("set k v").unwrap(), ["set", "k", "v"]);
        assert_eq!(split("  set   k  ").unwrap(), ["set", "k"]);
        assert_eq!(split("set \"a b\" 'c d'").unwrap(), ["set", "a b", "c d"]);
        assert_eq!(split("set \"\\x41\\n\" x").unwrap(), ["set", "A\n", "x"]);
        assert_eq!(split("set 'it\\'s'").unwrap(), ["set", "it's"]);
        assert_eq!(split("set \"\"").unwrap(), ["set", ""]);
        assert_eq!(split("").unwrap(), Vec::<String>::new());
        assert!(split("set \"abc").is_none());
        assert!(split("set 'abc").is_none());
        assert!(split("set \"a\"b").is_none());
    }
}
