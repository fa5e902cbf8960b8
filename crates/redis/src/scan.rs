//! SCAN over the keyspace, and the options every SCAN-family command
//! shares (HSCAN, SSCAN, ZSCAN read them too).

use nvdepot_cache::resp::{Kind, RespStore};
use nvdepot_cache::Error;
use nvdepot_resp::{errors, Reply};

use super::args::{arity, int_arg};
use super::glob;

/// The options of SCAN, HSCAN, SSCAN, ZSCAN: MATCH, COUNT, and TYPE
/// (SCAN's only), as Redis's `scanGenericCommand` reads them.
pub struct ScanOptions<'a> {
    pub pattern: Option<&'a [u8]>,
    /// A hint: at least 1.
    pub count: usize,
    /// SCAN TYPE's type name, lower case.
    pub kind: Option<Vec<u8>>,
}

impl<'a> ScanOptions<'a> {
    /// Reads the options after the cursor, or the error to answer.
    pub fn parse(opts: &[&'a [u8]], keyspace: bool) -> Result<ScanOptions<'a>, &'static str> {
        let mut out = ScanOptions {
            pattern: None,
            count: 10,
            kind: None,
        };
        let mut i = 0;
        while i < opts.len() {
            let opt = opts[i].to_ascii_uppercase();
            let Some(&arg) = opts.get(i + 1) else {
                return Err(errors::SYNTAX);
            };
            match opt.as_slice() {
                b"MATCH" => out.pattern = Some(arg),
                b"COUNT" => match int_arg(arg) {
                    Some(n) if n >= 1 => out.count = n as usize,
                    Some(_) => return Err(errors::SYNTAX),
                    None => return Err(errors::NOT_INTEGER),
                },
                b"TYPE" if keyspace => out.kind = Some(arg.to_ascii_lowercase()),
                _ => return Err(errors::SYNTAX),
            }
            i += 2;
        }
        Ok(out)
    }

    /// Whether `name` matches the MATCH pattern (if any).
    pub fn matches(&self, name: &[u8]) -> bool {
        self.pattern.is_none_or(|p| glob::matches(p, name))
    }
}

/// A SCAN-family cursor: an unsigned 64-bit decimal, as Redis's
/// `parseScanCursorOrReply` reads it (`None`: "ERR invalid cursor").
pub fn parse_cursor(arg: &[u8]) -> Option<u64> {
    std::str::from_utf8(arg).ok()?.parse().ok()
}

pub fn scan(
    store: &RespStore,
    db: usize,
    args: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    if !arity(args, 2, None, r) {
        return Ok(());
    }
    let Some(cursor) = parse_cursor(args[1]) else {
        r.error("ERR invalid cursor");
        return Ok(());
    };
    let opts = match ScanOptions::parse(&args[2..], true) {
        Ok(o) => o,
        Err(msg) => {
            r.error(msg);
            return Ok(());
        }
    };
    let count = opts.count;
    // Pages in the order of the keys' hashes: cursor c continues with the
    // keys whose hash is >= c, and a page ends between two hashes, so a
    // key present for the whole scan is returned exactly once (Redis's
    // guarantee), whatever is written meanwhile. A page reads every key
    // (keys live on flash; the index holds fingerprints only), so a page
    // is at least 1/16 of the database (COUNT is a hint Redis may exceed
    // too): a whole iteration is at most 17 reads of the keys.
    let all = store.typed_keys(db, now)?;
    let page = count.max(all.len().div_ceil(16)).max(1);
    let mut hashed: Vec<(u64, (Vec<u8>, Kind))> = all
        .into_iter()
        .map(|k| (xxhash_rust::xxh3::xxh3_64(&k.0), k))
        .filter(|(h, _)| *h >= cursor)
        .collect();
    hashed.sort_unstable_by_key(|(h, _)| *h);
    let mut n = page.min(hashed.len());
    // Keys sharing the last hash go in the same page.
    while n > 0 && n < hashed.len() && hashed[n].0 == hashed[n - 1].0 {
        n += 1;
    }
    let next = hashed.get(n).map_or(0, |(h, _)| *h);
    let keys: Vec<(Vec<u8>, Kind)> = hashed.into_iter().take(n).map(|(_, k)| k).collect();
    let hits: Vec<&Vec<u8>> = keys
        .iter()
        .filter(|(k, _)| opts.matches(k))
        .filter(|(_, kind)| {
            opts.kind
                .as_deref()
                .is_none_or(|t| t == kind.name().as_bytes())
        })
        .map(|(k, _)| k)
        .collect();
    r.array(2);
    r.bulk(next.to_string().as_bytes());
    r.array(hits.len());
    for k in hits {
        r.bulk(k);
    }
    Ok(())
}
