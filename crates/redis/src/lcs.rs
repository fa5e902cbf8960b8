//! LCS (Redis 7.0's `lcsCommand`): the longest common subsequence of two
//! strings, its length (LEN), or the matching ranges (IDX, MINMATCHLEN,
//! WITHMATCHLEN). The table and the walk back through it are Redis's, so
//! where several subsequences are longest the same one is given, and the
//! ranges come in the same order (from the strings' ends).
//!
//! The table holds (len(a)+1)·(len(b)+1) 32-bit cells; as in Redis it may
//! not pass `proto-max-bulk-len` (512 MiB), which bounds the transient
//! memory one LCS can take.

use nvdepot_cache::resp::{Kind, RespStore};
use nvdepot_cache::Error;
use nvdepot_resp::{errors, string2ll, Reply};

use super::args::arity;

/// Redis's `proto-max-bulk-len`: the most transient memory an LCS table
/// may take.
const TABLE_BYTES_MAX: u64 = 512 << 20;

/// Runs LCS.
pub async fn lcs(
    store: &RespStore,
    db: usize,
    args: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    if !arity(args, 3, None, r) {
        return Ok(());
    }
    let a = store.get(db, args[1], now).await?;
    let b = store.get(db, args[2], now).await?;
    if [&a, &b]
        .iter()
        .any(|v| v.as_ref().is_some_and(|v| v.kind() != Kind::String))
    {
        r.error("ERR The specified keys must contain string values");
        return Ok(());
    }
    let a = a.as_ref().map_or(&[][..], |v| v.data());
    let b = b.as_ref().map_or(&[][..], |v| v.data());
    let (mut idx, mut len, mut withmatchlen, mut minmatchlen) = (false, false, false, 0u64);
    let mut j = 3;
    while j < args.len() {
        let opt = args[j];
        let more = j + 1 < args.len();
        if opt.eq_ignore_ascii_case(b"IDX") {
            idx = true;
        } else if opt.eq_ignore_ascii_case(b"LEN") {
            len = true;
        } else if opt.eq_ignore_ascii_case(b"WITHMATCHLEN") {
            withmatchlen = true;
        } else if opt.eq_ignore_ascii_case(b"MINMATCHLEN") && more {
            let Some(n) = string2ll(args[j + 1]) else {
                r.error(errors::NOT_INTEGER);
                return Ok(());
            };
            minmatchlen = n.max(0) as u64;
            j += 1;
        } else {
            r.error(errors::SYNTAX);
            return Ok(());
        }
        j += 1;
    }
    if len && idx {
        r.error("ERR If you want both the length and indexes, please just use IDX.");
        return Ok(());
    }
    if a.len() as u64 >= u64::from(u32::MAX - 1) || b.len() as u64 >= u64::from(u32::MAX - 1) {
        r.error("ERR String too long for LCS");
        return Ok(());
    }
    let cells = (a.len() as u64 + 1) * (b.len() as u64 + 1);
    if cells * 4 > TABLE_BYTES_MAX {
        r.error("ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len");
        return Ok(());
    }
    let table = Table::build(a, b);
    if len {
        r.integer(i64::from(table.at(a.len(), b.len())));
        return Ok(());
    }
    let walk = table.walk(a, b, minmatchlen);
    if !idx {
        r.bulk(&walk.common);
        return Ok(());
    }
    r.map(2);
    r.bulk(b"matches");
    r.array(walk.ranges.len());
    for m in &walk.ranges {
        r.array(2 + usize::from(withmatchlen));
        r.array(2);
        r.integer(i64::from(m.a.0));
        r.integer(i64::from(m.a.1));
        r.array(2);
        r.integer(i64::from(m.b.0));
        r.integer(i64::from(m.b.1));
        if withmatchlen {
            r.integer(i64::from(m.len));
        }
    }
    r.bulk(b"len");
    r.integer(i64::from(table.at(a.len(), b.len())));
    Ok(())
}

/// LCS(i, j): the length of the LCS of a[..i] and b[..j].
struct Table {
    cells: Vec<u32>,
    width: usize,
}

/// One matching range: inclusive offsets in a and in b.
struct Match {
    a: (u32, u32),
    b: (u32, u32),
    len: u32,
}

struct Walk {
    common: Vec<u8>,
    ranges: Vec<Match>,
}

impl Table {
    fn build(a: &[u8], b: &[u8]) -> Table {
        let width = b.len() + 1;
        let mut cells = vec![0u32; (a.len() + 1) * width];
        for i in 1..=a.len() {
            for j in 1..=b.len() {
                cells[i * width + j] = if a[i - 1] == b[j - 1] {
                    cells[(i - 1) * width + j - 1] + 1
                } else {
                    cells[(i - 1) * width + j].max(cells[i * width + j - 1])
                };
            }
        }
        Table { cells, width }
    }

    fn at(&self, i: usize, j: usize) -> u32 {
        self.cells[i * self.width + j]
    }

    /// Walks back from the end as Redis does: the common subsequence and
    /// the ranges of at least `minmatchlen` bytes.
    fn walk(&self, a: &[u8], b: &[u8], minmatchlen: u64) -> Walk {
        let alen = a.len() as u32;
        let mut idx = self.at(a.len(), b.len()) as usize;
        let mut common = vec![0u8; idx];
        let mut ranges = Vec::new();
        // `alen` as a start: no range open.
        let (mut a_start, mut a_end, mut b_start, mut b_end) = (alen, 0u32, 0u32, 0u32);
        let (mut i, mut j) = (a.len(), b.len());
        while i > 0 && j > 0 {
            let mut emit = false;
            if a[i - 1] == b[j - 1] {
                common[idx - 1] = a[i - 1];
                if a_start == alen {
                    a_start = i as u32 - 1;
                    a_end = a_start;
                    b_start = j as u32 - 1;
                    b_end = b_start;
                } else if a_start == i as u32 && b_start == j as u32 {
                    a_start -= 1;
                    b_start -= 1;
                } else {
                    emit = true;
                }
                if a_start == 0 || b_start == 0 {
                    emit = true;
                }
                idx -= 1;
                i -= 1;
                j -= 1;
            } else {
                if self.at(i - 1, j) > self.at(i, j - 1) {
                    i -= 1;
                } else {
                    j -= 1;
                }
                if a_start != alen {
                    emit = true;
                }
            }
            if emit {
                let len = a_end.wrapping_sub(a_start).wrapping_add(1);
                if minmatchlen == 0 || u64::from(len) >= minmatchlen {
                    ranges.push(Match {
                        a: (a_start, a_end),
                        b: (b_start, b_end),
                        len,
                    });
                }
                a_start = alen;
            }
        }
        Walk { common, ranges }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_documentation_example() {
        // LCS key1 key2 with ohmytext / mynewtext (Redis's docs): "mytext".
        let (a, b) = (&b"ohmytext"[..], &b"mynewtext"[..]);
        let t = Table::build(a, b);
        assert_eq!(t.at(a.len(), b.len()), 6);
        let w = t.walk(a, b, 0);
        assert_eq!(w.common, b"mytext");
        let got: Vec<_> = w.ranges.iter().map(|m| (m.a, m.b, m.len)).collect();
        assert_eq!(got, vec![((4, 7), (5, 8), 4), ((2, 3), (0, 1), 2)]);
        assert_eq!(t.walk(a, b, 4).ranges.len(), 1);
    }

    #[test]
    fn empty_strings() {
        let t = Table::build(b"", b"abc");
        assert_eq!(t.at(0, 3), 0);
        assert!(t.walk(b"", b"abc", 0).common.is_empty());
    }
}
