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
