//! Redis's glob matching (`stringmatchlen`): `*`, `?`, `[abc]`, `[^a]`,
//! `[a-z]`, and `\x` for a literal x. Case-sensitive, byte-wise.

/// Whether `s` matches `pattern`. A pattern of just `*` matches
/// everything, the empty string included: Redis's KEYS, SCAN and CONFIG
/// GET take it as "all" without running the matcher (which would not
/// match an empty string).
pub fn matches(pattern: &[u8], s: &[u8]) -> bool {
    if pattern == b"*" {
        return true;
    }
    let mut skip_longer = false;
    match_at(pattern, 0, s, 0, &mut skip_longer, 0)
}

/// Whether `s` matches `pattern` as Redis's matcher alone decides, with
/// no shortcut for `*` (which then does not match the empty string): what
/// PUBLISH and PUBSUB CHANNELS use.
pub fn matches_strictly(pattern: &[u8], s: &[u8]) -> bool {
    let mut skip_longer = false;
    match_at(pattern, 0, s, 0, &mut skip_longer, 0)
}

/// A port of Redis 7.0's `stringmatchlen_impl`, step for step, so that
/// every pattern (malformed ones included) matches exactly what Redis
/// matches. Reads one past the pattern's end see 0, as C sees the
/// terminating NUL of Redis's strings.
///
/// `skip_longer` is Redis's fix for CVE-2022-36021: once the rest of the
/// pattern after a `*` has failed to match at every position of the rest
/// of the string, no earlier `*` can do better by matching more, so the
/// whole match fails at once. Without it, `a*a*…*b` against a long run of
/// `a` tries exponentially many splits (a worker pinned for good).
fn match_at(
    p: &[u8],
    mut pi: usize,
    s: &[u8],
    mut si: usize,
    skip_longer: &mut bool,
    nesting: usize,
) -> bool {
    // Redis bounds the recursion the same way (a hostile pattern of many
    // stars cannot exhaust the stack).
    if nesting > 1000 {
        return false;
    }
    let at = |i: usize| p.get(i).copied().unwrap_or(0);
    let mut plen = p.len() - pi;
    let mut slen = s.len() - si;
    while plen > 0 && slen > 0 {
        match at(pi) {
            b'*' => {
                while plen > 0 && at(pi + 1) == b'*' {
                    pi += 1;
                    plen -= 1;
                }
                if plen == 1 {
                    return true;
                }
                while slen > 0 {
                    if match_at(p, pi + 1, s, si, skip_longer, nesting + 1) {
                        return true;
                    }
                    if *skip_longer {
                        return false;
                    }
                    si += 1;
                    slen -= 1;
                }
                *skip_longer = true;
                return false;
            }
            b'?' => {
                si += 1;
                slen -= 1;
            }
            b'[' => {
                pi += 1;
                plen -= 1;
                let not = at(pi) == b'^';
                if not {
                    pi += 1;
                    plen -= 1;
                }
                let mut hit = false;
                let c = s[si];
                loop {
                    if at(pi) == b'\\' && plen >= 2 {
                        pi += 1;
                        plen -= 1;
                        if at(pi) == c {
                            hit = true;
                        }
                    } else if at(pi) == b']' {
                        break;
                    } else if plen == 0 {
                        pi -= 1;
                        plen += 1;
                        break;
                    } else if plen >= 3 && at(pi + 1) == b'-' {
                        let (mut lo, mut hi) = (at(pi), at(pi + 2));
                        if lo > hi {
                            std::mem::swap(&mut lo, &mut hi);
                        }
                        pi += 2;
                        plen -= 2;
                        if (lo..=hi).contains(&c) {
                            hit = true;
                        }
                    } else if at(pi) == c {
                        hit = true;
                    }
                    pi += 1;
                    plen -= 1;
                }
                if not {
                    hit = !hit;
                }
                if !hit {
                    return false;
                }
                si += 1;
                slen -= 1;
            }
            ch => {
                let mut ch = ch;
                if ch == b'\\' && plen >= 2 {
                    pi += 1;
                    plen -= 1;
                    ch = at(pi);
                }
                if ch != s[si] {
                    return false;
                }
                si += 1;
                slen -= 1;
            }
        }
        pi += 1;
        plen -= 1;
        if slen == 0 {
            while at(pi) == b'*' {
                pi += 1;
                plen -= 1;
            }
            break;
        }
    }
    plen == 0 && slen == 0
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn as_redis() {
        assert!(matches(b"*", b""));
        assert!(matches(b"h?llo", b"hello"));
        assert!(matches(b"h*llo", b"heeeello"));
        assert!(matches(b"h[ae]llo", b"hallo"));
        assert!(!matches(b"h[^e]llo", b"hello"));
        assert!(matches(b"h[a-b]llo", b"hbllo"));
        assert!(matches(b"user:*:name", b"user:42:name"));
        assert!(!matches(b"user:*:name", b"user:42:age"));
        assert!(matches(b"a\\*b", b"a*b"));
        assert!(!matches(b"a\\*b", b"axb"));
        assert!(!matches(b"abc", b"abcd"));
    }

    /// Redis's unit/keyspace "Regression for pattern matching long nested
    /// loops" (CVE-2022-36021): answered at once, not after 2^20 tries.
    #[test]
    fn nested_stars_fail_fast() {
        let s = [b'a'; 40];
        let t = std::time::Instant::now();
        assert!(!matches(b"a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b", &s));
        assert!(matches(b"a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a", &s));
        assert!(t.elapsed() < std::time::Duration::from_secs(1));
    }

    /// Malformed patterns match what Redis's matcher matches: each case
    /// as redis-server 7.0 answered `KEYS pattern` with only `key` stored.
    #[test]
    fn malformed_as_redis() {
        let cases: &[(&[u8], &[u8], bool)] = &[
            (b"[", b"[", false),
            (b"[", b"a", false),
            (b"[a", b"a", true),
            (b"[^", b"x", true),
            (b"a\\", b"a\\", true),
            (b"[\\]]", b"]", true),
            (b"*", b"", true),
            (b"", b"", true),
            (b"", b"a", false),
            (b"a**", b"a", true),
            (b"[a-", b"a", true),
            (b"[a-", b"-", true),
            (b"[]", b"]", false),
            (b"[]a]", b"a", false),
            (b"\\", b"\\", true),
            (b"a[", b"a", false),
            (b"?*", b"", false),
        ];
        for &(pattern, key, redis) in cases {
            assert_eq!(
                matches(pattern, key),
                redis,
                "{:?} against {:?}",
                String::from_utf8_lossy(pattern),
                String::from_utf8_lossy(key)
            );
        }
    }
}
