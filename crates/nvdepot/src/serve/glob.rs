//! Redis's glob matching (`stringmatchlen`): `*`, `?`, `[abc]`, `[^a]`,
//! `[a-z]`, and `\x` for a literal x. Case-sensitive, byte-wise.

pub fn matches(pattern: &[u8], s: &[u8]) -> bool {
    match_at(pattern, s, 0)
}

fn match_at(p: &[u8], s: &[u8], depth: usize) -> bool {
    // Redis bounds the recursion the same way (a hostile pattern of many
    // stars cannot exhaust the stack).
    if depth > 1000 {
        return false;
    }
    let (mut pi, mut si) = (0, 0);
    while pi < p.len() {
        match p[pi] {
            b'*' => {
                while pi + 1 < p.len() && p[pi + 1] == b'*' {
                    pi += 1;
                }
                if pi + 1 == p.len() {
                    return true;
                }
                for start in si..=s.len() {
                    if match_at(&p[pi + 1..], &s[start..], depth + 1) {
                        return true;
                    }
                }
                return false;
            }
            b'?' => {
                if si >= s.len() {
                    return false;
                }
                si += 1;
            }
            b'[' => {
                if si >= s.len() {
                    return false;
                }
                pi += 1;
                let not = p.get(pi) == Some(&b'^');
                if not {
                    pi += 1;
                }
                let mut hit = false;
                loop {
                    if pi >= p.len() {
                        pi -= 1;
                        break;
                    }
                    if p[pi] == b'\\' && pi + 2 < p.len() {
                        pi += 1;
                        hit |= p[pi] == s[si];
                    } else if p[pi] == b']' {
                        break;
                    } else if pi + 2 < p.len() && p[pi + 1] == b'-' {
                        let (mut lo, mut hi) = (p[pi], p[pi + 2]);
                        if lo > hi {
                            std::mem::swap(&mut lo, &mut hi);
                        }
                        hit |= (lo..=hi).contains(&s[si]);
                        pi += 2;
                    } else {
                        hit |= p[pi] == s[si];
                    }
                    pi += 1;
                }
                if hit == not {
                    return false;
                }
                si += 1;
            }
            b'\\' if pi + 1 < p.len() => {
                pi += 1;
                if si >= s.len() || p[pi] != s[si] {
                    return false;
                }
                si += 1;
            }
            c => {
                if si >= s.len() || c != s[si] {
                    return false;
                }
                si += 1;
            }
        }
        pi += 1;
    }
    si == s.len()
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
}
