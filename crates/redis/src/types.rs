//! What every collection type answers the same way: OBJECT ENCODING by
//! type, and the check of a moved collection's data.

use nvdepot_cache::resp::{Kind, Value};
use nvdepot_cache::Error;

/// OBJECT ENCODING of a value that is not a string: the name of the shape
/// Redis would keep it in.
pub fn encoding(v: &Value) -> Result<&'static str, Error> {
    match v.kind() {
        Kind::Hash => super::hash::encoding(v),
        Kind::Set => super::set::encoding(v),
        // Redis 7.0 keeps every list in a quicklist.
        Kind::List => Ok("quicklist"),
        Kind::ZSet => super::zset::encoding(v),
        Kind::Stream => Ok("stream"),
        Kind::String => Err(Error::Envelope(
            "a string has no collection encoding".into(),
        )),
    }
}

/// Whether `data` decodes as a value of type `kind` (a collection moved
/// here by a cluster migration).
pub fn check(kind: Kind, data: &[u8]) -> Result<(), Error> {
    match kind {
        Kind::String => Ok(()),
        Kind::Hash => super::hash::check(data),
        Kind::Set => super::set::check(data),
        Kind::List => super::list::check(data),
        Kind::ZSet => super::zset::check(data),
        Kind::Stream => super::stream::check(data),
    }
}

/// For a paged collection `v` under `key`: the whole of it in the compact
/// layout, as a migration sends it (the receiver pages it again on its
/// next write). `None` for any other value.
pub async fn compact_data(
    store: &nvdepot_cache::resp::RespStore,
    db: usize,
    key: &[u8],
    v: &Value,
) -> Result<Option<Vec<u8>>, Error> {
    match v.kind() {
        Kind::List => super::list::compact_data(store, db, key, v).await,
        Kind::Hash | Kind::Set => super::hash_pages::compact_data(store, db, key, v).await,
        Kind::ZSet => super::zset_pages::compact_data(store, db, key, v).await,
        Kind::Stream => super::stream::compact_data(store, db, key, v).await,
        Kind::String => Ok(None),
    }
}

/// The indexes HRANDFIELD, SRANDMEMBER and ZRANDMEMBER pick from `len`
/// elements for a count `n`: none for 0, `|n|` independent draws (repeats
/// allowed) for a negative count, every index for a count of at least
/// `len`, else `n` distinct ones.
pub fn random_picks(len: usize, n: i64) -> Vec<usize> {
    use rand::Rng;
    let mut rng = rand::thread_rng();
    if len == 0 || n == 0 {
        Vec::new()
    } else if n < 0 {
        (0..n.unsigned_abs())
            .map(|_| rng.gen_range(0..len))
            .collect()
    } else if n as u64 >= len as u64 {
        (0..len).collect()
    } else {
        rand::seq::index::sample(&mut rng, len, n as usize).into_vec()
    }
}
