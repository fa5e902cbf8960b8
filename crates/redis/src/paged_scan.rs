//! HSCAN, SSCAN and ZSCAN over a paged hash, set or sorted set (their
//! member buckets, `hash_pages.rs`) a few buckets per call, where a
//! compact one is answered whole (as Redis answers for a listpack).

use nvdepot_cache::resp::{Kind, RespStore};
use nvdepot_cache::Error;
use nvdepot_resp::Reply;

use super::hash_pages::{paged_meta, pairs, Edit, Meta};
use super::list_pages::Stop;
use super::scan::ScanOptions;

/// Answers one step of HSCAN, SSCAN or ZSCAN (`args`: the command, its
/// key, the parsed `cursor` and the options) on a paged collection of
/// `kind`: the next cursor and
/// the entries matching MATCH, each as its member and what `second`
/// makes of its value (a hash's value, a sorted set's score as text;
/// `None` for a set: the member alone). `Ok(false)` if the key is no
/// longer such a collection (nothing was answered: read it again).
#[allow(clippy::too_many_arguments)]
pub async fn answer_step(
    store: &RespStore,
    kind: Kind,
    db: usize,
    args: &[&[u8]],
    cursor: u64,
    now: u64,
    meta_of: fn(&[u8]) -> Result<Meta, Error>,
    r: &mut Reply<'_>,
    second: impl Fn(&[u8]) -> Result<Option<Vec<u8>>, Error>,
) -> Result<bool, Error> {
    let (key, opts) = (args[1], &args[3..]);
    let opts = match ScanOptions::parse(opts, false) {
        Ok(o) => o,
        Err(msg) => {
            r.error(msg);
            return Ok(true);
        }
    };
    let Some((next, found)) =
        scan_step(store, kind, db, key, now, meta_of, cursor, opts.count).await?
    else {
        return Ok(false);
    };
    // Every entry made before the reply starts, so damage is answered as
    // an error, not in the middle of an array.
    let mut hits = Vec::new();
    for (m, v) in found.iter().filter(|(m, _)| opts.matches(m)) {
        hits.push((m, second(v)?));
    }
    r.array(2);
    r.bulk(next.to_string().as_bytes());
    r.array(hits.iter().map(|(_, s)| 1 + usize::from(s.is_some())).sum());
    for (m, s) in hits {
        r.bulk(m);
        if let Some(s) = s {
            r.bulk(&s);
        }
    }
    Ok(true)
}

/// One step of HSCAN, SSCAN or ZSCAN over a paged collection of `kind`
/// (a sorted set's member buckets hold member and score): the pairs of
/// whole buckets from `cursor`'s on, until at least `count`, and the
/// cursor to go on from (0: the last bucket was read). `None` when the
/// key is not (or no longer) such a collection: read it again.
/// `meta_of` reads the member buckets' part of its metadata.
///
/// Each step reads a few buckets, not the collection: a big hash is
/// iterated in pieces, as Redis iterates a `hashtable`. The cursor is
/// the next bucket's number under a tag of the collection's stamp. What
/// SCAN promises holds: linear hashing only splits, and a split moves a
/// bucket's entries to the last bucket, past the cursor (an entry of a
/// bucket already read may come again, none is missed); a collection
/// written whole since (a new stamp, its entries anywhere) starts over.
#[allow(clippy::too_many_arguments)]
async fn scan_step(
    store: &RespStore,
    kind: Kind,
    db: usize,
    key: &[u8],
    now: u64,
    meta_of: fn(&[u8]) -> Result<Meta, Error>,
    cursor: u64,
    count: usize,
) -> Result<Option<(u64, Vec<(Vec<u8>, Vec<u8>)>)>, Error> {
    let mut attempt = 0u32;
    loop {
        let _held = super::key_locks::turn_shared(&mut attempt, db, key).await;
        let Some((m, version)) = paged_meta(store, kind, db, key, now, meta_of).await? else {
            return Ok(None);
        };
        let tag = scan_tag(m.stamp);
        let mut b = if cursor >> 32 == tag {
            cursor & 0xffff_ffff
        } else {
            0
        };
        let mut edit = Edit::new(store, kind, db, key, m, version);
        let mut out = Vec::new();
        let mut got = Ok(());
        while b < m.buckets() && out.len() < count {
            match edit.load(b).await {
                Ok(bucket) => out.extend(
                    pairs(bucket)?
                        .into_iter()
                        .map(|(f, v)| (f.to_vec(), v.to_vec())),
                ),
                Err(stop) => {
                    got = Err(stop);
                    break;
                }
            }
            edit.buckets.remove(&b);
            b += 1;
        }
        match got {
            Ok(()) => {
                // Bucket numbers stay below 2^32 (2^32 buckets of ~2 KiB
                // would be 8 TiB in one key).
                let next = if b >= m.buckets() {
                    0
                } else {
                    tag << 32 | (b & 0xffff_ffff)
                };
                return Ok(Some((next, out)));
            }
            Err(Stop::Retry) => continue,
            Err(Stop::Fail(e)) => return Err(e),
        }
    }
}

/// The high half of a scan cursor over the collection written with
/// `stamp`: 31 bits, never zero (so no cursor but 0 means "start"), and
/// the cursor stays below 2^63 for clients that read it signed.
fn scan_tag(stamp: u64) -> u64 {
    ((stamp >> 33) | 1) & 0x7fff_ffff
}
