//! One try of an atomic update of a compact collection (hash, set,
//! sorted set), the skeleton their `update`s share: the value read and
//! changed under the store's update, and the two ways the update ends up
//! in the paged layout instead: the key is paged already (the caller runs
//! its paged step), or the change takes the compact value past the paged
//! threshold (the caller converts it, with the encoded value decided
//! here).

use nvdepot_cache::resp::{Change, RespStore, Value};
use nvdepot_cache::Error;
use nvdepot_resp::errors;

/// Why a read of a collection stopped before its reply.
pub enum Fail {
    WrongType,
    Store(Error),
}

/// Why a compact update stopped for the paged layout.
pub enum Escalate {
    /// The key is paged: nothing was changed, run the paged step.
    Paged,
    /// The change makes the value large enough to page: (the version it
    /// was decided on, the compact data it would have written, its
    /// expiry). Nothing was written.
    Convert(Option<u64>, Vec<u8>, u64),
}

/// What a collection's type says to [`try_once`]: how to tell its paged
/// layout, read and write the compact one, and when that is too large.
pub struct Shape<P, R, C, S> {
    /// Whether a value of the key is this type's paged layout.
    pub is_paged: P,
    /// The compact value (`None` or empty: the key is missing), or
    /// WRONGTYPE.
    pub read: R,
    /// The record's change for the value changed (with its expiry).
    pub change: C,
    /// Whether the encoded compact value belongs in the paged layout.
    pub should_page: S,
}

/// One try of an atomic update of `key`: `apply` sees the collection as
/// `shape.read` gives it and says whether it changed and what to answer,
/// or the error to answer (WRONGTYPE is one too). The answer, and why
/// the caller must go on in the paged layout (`None`: done).
pub async fn try_once<V, T, P, R, C, S>(
    store: &RespStore,
    db: usize,
    key: &[u8],
    now: u64,
    shape: &Shape<P, R, C, S>,
    mut apply: impl FnMut(&mut V) -> Result<(bool, T), &'static str>,
) -> Result<(Result<T, &'static str>, Option<Escalate>), Error>
where
    P: Fn(&Value) -> bool,
    R: Fn(Option<&Value>) -> Result<V, Fail>,
    C: Fn(V, u64) -> Change,
    S: Fn(&[u8]) -> bool,
{
    let mut damage = None;
    let mut escalate = None;
    let (done, _) = store
        .update(db, key, now, |cur| {
            // The store may decide again (the key changed before the
            // write): only the last decision's findings count.
            (damage, escalate) = (None, None);
            if cur.is_some_and(&shape.is_paged) {
                escalate = Some(Escalate::Paged);
                return (Change::Keep, Err(""));
            }
            let mut value = match (shape.read)(cur) {
                Ok(v) => v,
                Err(Fail::WrongType) => return (Change::Keep, Err(errors::WRONGTYPE)),
                Err(Fail::Store(e)) => {
                    damage = Some(e);
                    return (Change::Keep, Err(""));
                }
            };
            let at = cur.map_or(0, Value::expire_at_ms);
            match apply(&mut value) {
                Ok((true, t)) => {
                    let change = (shape.change)(value, at);
                    if let Change::Put { data, .. } = &change {
                        if (shape.should_page)(data) {
                            let version = cur.map(Value::version);
                            escalate = Some(Escalate::Convert(version, data.clone(), at));
                            return (Change::Keep, Ok(t));
                        }
                    }
                    (change, Ok(t))
                }
                Ok((false, t)) => (Change::Keep, Ok(t)),
                Err(msg) => (Change::Keep, Err(msg)),
            }
        })
        .await?;
    match damage {
        Some(e) => Err(e),
        None => Ok((done, escalate)),
    }
}
