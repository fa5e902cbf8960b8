//! String and key commands beyond the single-step ones of `keys.rs`:
//! SETRANGE and INCRBYFLOAT (one atomic update of their key each), and
//! the commands that must see and change several keys as one step —
//! RENAME, RENAMENX, MSETNX. Those run holding the exclusive pass of the
//! isolation gate (the face's dispatch takes it for them, as EXEC does),
//! so no other command sees a half-done rename or a partial MSETNX, as in
//! Redis where one thread runs everything.

use nvdepot_cache::resp::{Change, RespStore};
use nvdepot_cache::Error;
use nvdepot_resp::{errors, Reply};

use super::face::arity;
use super::keys::int_arg;

/// Commands that need the exclusive pass.
pub fn needs_exclusive(name: &[u8]) -> bool {
    matches!(name, b"RENAME" | b"RENAMENX" | b"MSETNX")
}

/// Largest string SETRANGE may make (Redis's `proto-max-bulk-len`).
const STRING_BYTES_MAX: i64 = 512 << 20;

/// Runs `name` if it is one of this module's commands (`None` if not),
/// with the storage result.
pub async fn execute(
    store: &RespStore,
    db: usize,
    name: &[u8],
    args: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> Option<Result<(), Error>> {
    Some(match name {
        b"SETRANGE" => {
            if !arity(args, 4, Some(4), r) {
                return Some(Ok(()));
            }
            let Some(offset) = int_arg(args[2]) else {
                r.error(errors::NOT_INTEGER);
                return Some(Ok(()));
            };
            if offset < 0 {
                r.error("ERR offset is out of range");
                return Some(Ok(()));
            }
            let value = args[3];
            if offset + value.len() as i64 > STRING_BYTES_MAX {
                r.error("ERR string exceeds maximum allowed size (proto-max-bulk-len)");
                return Some(Ok(()));
            }
            let offset = offset as usize;
            store
                .update(db, args[1], now, |cur| {
                    let (mut data, at) = match cur {
                        Some(v) => (v.data().to_vec(), v.expire_at_ms()),
                        // An empty value on a missing key creates nothing.
                        None if value.is_empty() => return (Change::Keep, 0),
                        None => (Vec::new(), 0),
                    };
                    if value.is_empty() {
                        return (Change::Keep, data.len());
                    }
                    if data.len() < offset + value.len() {
                        data.resize(offset + value.len(), 0);
                    }
                    data[offset..offset + value.len()].copy_from_slice(value);
                    let len = data.len();
                    (
                        Change::Put {
                            data,
                            expire_at_ms: at,
                        },
                        len,
                    )
                })
                .await
                .map(|(len, _)| r.integer(len as i64))
        }
        b"INCRBYFLOAT" => {
            if !arity(args, 3, Some(3), r) {
                return Some(Ok(()));
            }
            let Some(by) = parse_float(args[2]) else {
                r.error("ERR value is not a valid float");
                return Some(Ok(()));
            };
            store
                .update(db, args[1], now, |cur| {
                    let (base, at) = match cur {
                        Some(v) => match parse_float(v.data()) {
                            Some(f) => (f, v.expire_at_ms()),
                            None => return (Change::Keep, Err("ERR value is not a valid float")),
                        },
                        None => (0.0, 0),
                    };
                    let sum = base + by;
                    if !sum.is_finite() {
                        return (
                            Change::Keep,
                            Err("ERR increment would produce NaN or Infinity"),
                        );
                    }
                    let text = format_float(sum);
                    (
                        Change::Put {
                            data: text.clone().into_bytes(),
                            expire_at_ms: at,
                        },
                        Ok(text),
                    )
                })
                .await
                .map(|(out, _)| match out {
                    Ok(text) => r.bulk(text.as_bytes()),
                    Err(e) => r.error(e),
                })
        }
        b"RENAME" | b"RENAMENX" => {
            if !arity(args, 3, Some(3), r) {
                return Some(Ok(()));
            }
            rename(store, db, args[1], args[2], name == b"RENAMENX", now, r).await
        }
        b"MSETNX" => {
            if args.len() < 3 || args.len().is_multiple_of(2) {
                r.error(&errors::wrong_arity(args[0]));
                return Some(Ok(()));
            }
            msetnx(store, db, &args[1..], now, r).await
        }
        _ => return None,
    })
}

/// A float as Redis's `string2ld` reads one: no spaces, not NaN.
fn parse_float(a: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(a).ok()?;
    if s.is_empty() || s.starts_with(char::is_whitespace) || s.ends_with(char::is_whitespace) {
        return None;
    }
    let f: f64 = s.parse().ok()?;
    (!f.is_nan()).then_some(f)
}

/// A float as INCRBYFLOAT answers it: fixed-point, no exponent, no
/// trailing zeros (Redis's `LD_STR_HUMAN`), the shortest digits that read
/// back as the same number.
fn format_float(f: f64) -> String {
    if f == 0.0 {
        return "0".into();
    }
    let s = format!("{f}");
    s.strip_suffix(".0").map(str::to_string).unwrap_or(s)
}

/// RENAME / RENAMENX `src` `dst` (the caller holds the exclusive pass).
async fn rename(
    store: &RespStore,
    db: usize,
    src: &[u8],
    dst: &[u8],
    nx: bool,
    now: u64,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    let Some(v) = store.get(db, src, now).await? else {
        r.error("ERR no such key");
        return Ok(());
    };
    if src == dst {
        if nx {
            r.integer(0);
        } else {
            r.ok();
        }
        return Ok(());
    }
    if nx && store.get(db, dst, now).await?.is_some() {
        r.integer(0);
        return Ok(());
    }
    // Write the new name first: if the delete fails, the key exists
    // under both names rather than under neither.
    store.set(db, dst, v.data(), v.expire_at_ms()).await?;
    store.update(db, src, now, |_| (Change::Delete, ())).await?;
    if nx {
        r.integer(1);
    } else {
        r.ok();
    }
    Ok(())
}

/// MSETNX k v [k v …]: all set, or none if any key exists (the caller
/// holds the exclusive pass).
async fn msetnx(
    store: &RespStore,
    db: usize,
    pairs: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    for k in pairs.iter().step_by(2) {
        if store.get(db, k, now).await?.is_some() {
            r.integer(0);
            return Ok(());
        }
    }
    for kv in pairs.chunks(2) {
        store.set(db, kv[0], kv[1], 0).await?;
    }
    r.integer(1);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_as_redis_writes_them() {
        assert_eq!(format_float(10.5 + 0.1), "10.6");
        assert_eq!(format_float(3.0), "3");
        assert_eq!(format_float(5.0e3), "5000");
        assert_eq!(format_float(1e20), "100000000000000000000");
        assert_eq!(format_float(-0.25), "-0.25");
        assert_eq!(parse_float(b" 1"), None);
        assert_eq!(parse_float(b"nan"), None);
        assert_eq!(parse_float(b"5.0e3"), Some(5000.0));
    }
}
