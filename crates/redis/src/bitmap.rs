//! Bit operations on strings (Redis 7.0's `bitops.c`): SETBIT, GETBIT,
//! BITCOUNT, BITPOS (BYTE|BIT ranges), BITOP, BITFIELD and BITFIELD_RO.
//! Bit 0 is the most significant bit of the first byte, as in Redis; a
//! write past the end grows the string with zero bytes (up to Redis's
//! 512 MiB `proto-max-bulk-len`).

use nvdepot_cache::resp::{Change, Kind, Value};
use nvdepot_cache::Error;
use nvdepot_resp::{errors, string2ll, Reply};

use super::args::arity;
use super::notify;
use super::session::Shared;

const BIT_OFFSET: &str = "ERR bit offset is not an integer or out of range";
/// Redis's `proto-max-bulk-len`: offsets address at most this many bytes.
const STRING_BYTES_MAX: i64 = 512 << 20;

/// Commands that must see several keys as one step.
pub fn needs_exclusive(name: &[u8]) -> bool {
    name == b"BITOP"
}

/// A bit offset argument (`#n` counts in `bits`-wide fields when
/// `bits` is given), as `getBitOffsetFromArgument`.
fn bit_offset(a: &[u8], bits: Option<u32>) -> Result<u64, &'static str> {
    let (hash, digits) = match (a.first(), bits) {
        (Some(b'#'), Some(_)) => (true, &a[1..]),
        _ => (false, a),
    };
    let mut n = string2ll(digits).ok_or(BIT_OFFSET)?;
    if hash {
        n = n.wrapping_mul(i64::from(bits.unwrap_or(1)));
    }
    if n < 0 || (n >> 3) >= STRING_BYTES_MAX {
        return Err(BIT_OFFSET);
    }
    Ok(n as u64)
}

fn bit_at(data: &[u8], bit: u64) -> u8 {
    let byte = (bit >> 3) as usize;
    data.get(byte).map_or(0, |b| (b >> (7 - (bit & 7))) & 1)
}

/// A string's bytes for a bit command: `Ok(None)` for a missing key,
/// `Err(())` for another type.
fn string_of(v: Option<&Value>) -> Result<Option<&[u8]>, ()> {
    match v {
        None => Ok(None),
        Some(v) if v.kind() == Kind::String => Ok(Some(v.data())),
        Some(_) => Err(()),
    }
}

fn put(data: Vec<u8>, at: u64) -> Change {
    Change::Put {
        kind: Kind::String,
        data,
        expire_at_ms: at,
    }
}

/// Runs `name` if it is a bit command (`None` if not).
pub async fn execute(
    shared: &Shared,
    db: usize,
    name: &[u8],
    args: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> Option<Result<(), Error>> {
    let store = &*shared.store;
    Some(match name {
        b"SETBIT" => setbit(shared, db, args, now, r).await,
        b"GETBIT" => {
            if !arity(args, 3, Some(3), r) {
                return Some(Ok(()));
            }
            let off = match bit_offset(args[2], None) {
                Ok(o) => o,
                Err(msg) => {
                    r.error(msg);
                    return Some(Ok(()));
                }
            };
            store
                .get(db, args[1], now)
                .await
                .map(|v| match string_of(v.as_ref()) {
                    Err(()) => r.error(errors::WRONGTYPE),
                    Ok(data) => r.integer(i64::from(bit_at(data.unwrap_or(&[]), off))),
                })
        }
        b"BITCOUNT" | b"BITPOS" => {
            let min = if name == b"BITCOUNT" { 2 } else { 3 };
            if !arity(args, min, None, r) {
                return Some(Ok(()));
            }
            let bit = if name == b"BITPOS" {
                match string2ll(args[2]) {
                    Some(b @ (0 | 1)) => Some(b as u8),
                    Some(_) => {
                        r.error("ERR The bit argument must be 1 or 0.");
                        return Some(Ok(()));
                    }
                    None => {
                        r.error(errors::NOT_INTEGER);
                        return Some(Ok(()));
                    }
                }
            } else {
                None
            };
            store.get(db, args[1], now).await.map(|v| {
                let data = match string_of(v.as_ref()) {
                    Err(()) => return r.error(errors::WRONGTYPE),
                    Ok(None) => {
                        return r.integer(match bit {
                            Some(1) => -1,
                            _ => 0,
                        })
                    }
                    Ok(Some(d)) => d,
                };
                match bit {
                    None => match count_range(data, &args[2..]) {
                        Ok(n) => r.integer(n),
                        Err(msg) => r.error(msg),
                    },
                    Some(b) => match position(data, b, &args[3..]) {
                        Ok(n) => r.integer(n),
                        Err(msg) => r.error(msg),
                    },
                }
            })
        }
        b"BITOP" => bitop(shared, db, args, now, r).await,
        b"BITFIELD" | b"BITFIELD_RO" => bitfield(shared, db, name, args, now, r).await,
        _ => return None,
    })
}

async fn setbit(
    shared: &Shared,
    db: usize,
    args: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    if !arity(args, 4, Some(4), r) {
        return Ok(());
    }
    let off = match bit_offset(args[2], None) {
        Ok(o) => o,
        Err(msg) => {
            r.error(msg);
            return Ok(());
        }
    };
    let on = match string2ll(args[3]) {
        Some(b @ (0 | 1)) => b as u8,
        _ => {
            r.error("ERR bit is not an integer or out of range");
            return Ok(());
        }
    };
    let (out, _) = shared
        .store
        .update(db, args[1], now, |cur| {
            let (mut data, at) = match cur {
                Some(v) if v.kind() != Kind::String => return (Change::Keep, Err(())),
                Some(v) => (v.data().to_vec(), v.expire_at_ms()),
                None => (Vec::new(), 0),
            };
            let byte = (off >> 3) as usize;
            // Redis's event: the string made or grown, or the bit changed.
            let mut dirty = cur.is_none();
            if data.len() <= byte {
                data.resize(byte + 1, 0);
                dirty = true;
            }
            let shift = 7 - (off & 7);
            let old = (data[byte] >> shift) & 1;
            data[byte] = (data[byte] & !(1 << shift)) | (on << shift);
            (put(data, at), Ok((old, dirty || old != on)))
        })
        .await?;
    match out {
        Ok((old, dirty)) => {
            if dirty {
                shared.notify(notify::STRING, "setbit", db, args[1]);
            }
            r.integer(i64::from(old))
        }
        Err(()) => r.error(errors::WRONGTYPE),
    }
    Ok(())
}

/// A BITCOUNT/BITPOS range `start end [BYTE|BIT]` over `len` bytes, as
/// bit positions [first, last]; `None` when empty. `end` absent: to the
/// end.
fn bit_range(
    len: usize,
    start: i64,
    end: Option<i64>,
    unit: Option<&[u8]>,
) -> Result<Option<(u64, u64)>, &'static str> {
    let bits = match unit {
        None => false,
        Some(u) if u.eq_ignore_ascii_case(b"BIT") => true,
        Some(u) if u.eq_ignore_ascii_case(b"BYTE") => false,
        Some(_) => return Err(errors::SYNTAX),
    };
    let total = if bits { (len as i64) << 3 } else { len as i64 };
    let mut end = end.unwrap_or(if bits { total + 7 } else { total - 1 });
    let mut start = start;
    if start < 0 {
        start = start.saturating_add(total);
    }
    if end < 0 {
        end = end.saturating_add(total);
    }
    start = start.max(0);
    end = end.max(0);
    if end >= total {
        end = total - 1;
    }
    if start > end {
        return Ok(None);
    }
    Ok(Some(if bits {
        (start as u64, end as u64)
    } else {
        ((start as u64) << 3, ((end as u64) << 3) + 7)
    }))
}

/// BITCOUNT's count over `opts` (`[start end [BYTE|BIT]]`).
fn count_range(data: &[u8], opts: &[&[u8]]) -> Result<i64, &'static str> {
    let range = match opts.len() {
        0 => bit_range(data.len(), 0, None, None)?,
        2 | 3 => {
            let start = string2ll(opts[0]).ok_or(errors::NOT_INTEGER)?;
            let end = string2ll(opts[1]).ok_or(errors::NOT_INTEGER)?;
            let unit = opts.get(2).copied();
            // Two negative ends, start past end: empty (Redis checks this
            // before it reads the unit).
            if start < 0 && end < 0 && start > end {
                return Ok(0);
            }
            bit_range(data.len(), start, Some(end), unit)?
        }
        _ => return Err(errors::SYNTAX),
    };
    let Some((first, last)) = range else {
        return Ok(0);
    };
    Ok((first..=last).filter(|&b| bit_at(data, b) == 1).count() as i64)
}

/// BITPOS's answer for `bit` over `opts` (`[start [end [BYTE|BIT]]]`).
fn position(data: &[u8], bit: u8, opts: &[&[u8]]) -> Result<i64, &'static str> {
    if opts.len() > 3 {
        return Err(errors::SYNTAX);
    }
    let start = match opts.first() {
        Some(a) => string2ll(a).ok_or(errors::NOT_INTEGER)?,
        None => 0,
    };
    let unit = opts.get(2).copied();
    bit_range(data.len(), 0, Some(0), unit)?;
    let end = match opts.get(1) {
        Some(a) => Some(string2ll(a).ok_or(errors::NOT_INTEGER)?),
        None => None,
    };
    let Some((first, last)) = bit_range(data.len(), start, end, unit)? else {
        return Ok(-1);
    };
    if let Some(p) = (first..=last).find(|&b| bit_at(data, b) == bit) {
        return Ok(p as i64);
    }
    // No clear bit: without an explicit end, the string reads as padded
    // with zeros past its end (Redis's answer is the first bit after the
    // last byte of the range).
    Ok(if bit == 0 && end.is_none() {
        (((last >> 3) + 1) << 3) as i64
    } else {
        -1
    })
}

async fn bitop(
    shared: &Shared,
    db: usize,
    args: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    let store = &*shared.store;
    if !arity(args, 4, None, r) {
        return Ok(());
    }
    let op = args[1].to_ascii_uppercase();
    if !matches!(op.as_slice(), b"AND" | b"OR" | b"XOR" | b"NOT") {
        r.error(errors::SYNTAX);
        return Ok(());
    }
    let srcs = &args[3..];
    if op == b"NOT" && srcs.len() != 1 {
        r.error("ERR BITOP NOT must be called with a single source key.");
        return Ok(());
    }
    let mut inputs = Vec::with_capacity(srcs.len());
    for k in srcs {
        let v = store.get(db, k, now).await?;
        match string_of(v.as_ref()) {
            Err(()) => {
                r.error(errors::WRONGTYPE);
                return Ok(());
            }
            Ok(d) => inputs.push(d.map(<[u8]>::to_vec).unwrap_or_default()),
        }
    }
    let len = inputs.iter().map(Vec::len).max().unwrap_or(0);
    let byte = |i: usize, k: usize| inputs[k].get(i).copied().unwrap_or(0);
    let out: Vec<u8> = (0..len)
        .map(|i| match op.as_slice() {
            b"NOT" => !byte(i, 0),
            b"AND" => (0..inputs.len()).fold(0xff, |acc, k| acc & byte(i, k)),
            b"OR" => (0..inputs.len()).fold(0, |acc, k| acc | byte(i, k)),
            _ => (0..inputs.len()).fold(0, |acc, k| acc ^ byte(i, k)),
        })
        .collect();
    let n = out.len();
    let (_, done) = store
        .update(db, args[2], now, |_| {
            if out.is_empty() {
                (Change::Delete, ())
            } else {
                (put(out.clone(), 0), ())
            }
        })
        .await?;
    shared.notify_stored(notify::STRING, "set", db, args[2], n, done);
    r.integer(n as i64);
    Ok(())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Overflow {
    Wrap,
    Sat,
    Fail,
}

#[derive(Clone, Copy)]
enum Op {
    Get,
    Set(i64),
    IncrBy(i64),
}

struct Field {
    op: Op,
    signed: bool,
    bits: u32,
    offset: u64,
    overflow: Overflow,
}

fn field_type(a: &[u8]) -> Option<(bool, u32)> {
    let signed = match a.first()? {
        b'i' | b'I' => true,
        b'u' | b'U' => false,
        _ => return None,
    };
    let n = string2ll(&a[1..])?;
    let max = if signed { 64 } else { 63 };
    (1..=max).contains(&n).then_some((signed, n as u32))
}

fn parse_fields(args: &[&[u8]]) -> Result<Vec<Field>, &'static str> {
    let mut out = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut j = 2;
    while j < args.len() {
        let left = args.len() - j - 1;
        let sub = args[j].to_ascii_uppercase();
        let needs = match sub.as_slice() {
            b"GET" => 2,
            b"SET" | b"INCRBY" => 3,
            b"OVERFLOW" => 1,
            _ => return Err(errors::SYNTAX),
        };
        if left < needs {
            return Err(errors::SYNTAX);
        }
        if sub == b"OVERFLOW" {
            overflow = match args[j + 1].to_ascii_uppercase().as_slice() {
                b"WRAP" => Overflow::Wrap,
                b"SAT" => Overflow::Sat,
                b"FAIL" => Overflow::Fail,
                _ => return Err("ERR Invalid OVERFLOW type specified"),
            };
            j += 2;
            continue;
        }
        let (signed, bits) = field_type(args[j + 1]).ok_or(
            "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not \
             supported but i64 is.",
        )?;
        let offset = bit_offset(args[j + 2], Some(bits))?;
        let op = match sub.as_slice() {
            b"GET" => Op::Get,
            _ => {
                let v = string2ll(args[j + 3]).ok_or(errors::NOT_INTEGER)?;
                if sub == b"SET" {
                    Op::Set(v)
                } else {
                    Op::IncrBy(v)
                }
            }
        };
        out.push(Field {
            op,
            signed,
            bits,
            offset,
            overflow,
        });
        j += needs + 1;
    }
    Ok(out)
}

fn get_field(data: &[u8], offset: u64, bits: u32) -> u64 {
    (0..u64::from(bits)).fold(0u64, |acc, i| {
        (acc << 1) | u64::from(bit_at(data, offset + i))
    })
}

fn set_field(data: &mut [u8], offset: u64, bits: u32, value: u64) {
    for i in 0..u64::from(bits) {
        let bit = ((value >> (u64::from(bits) - 1 - i)) & 1) as u8;
        let pos = offset + i;
        let byte = (pos >> 3) as usize;
        let shift = 7 - (pos & 7);
        data[byte] = (data[byte] & !(1 << shift)) | (bit << shift);
    }
}

/// Redis's `checkUnsignedBitfieldOverflow`: (overflowed, the wrapped or
/// saturated value).
fn unsigned_overflow(value: u64, incr: i64, bits: u32, how: Overflow) -> (bool, u64) {
    let max = if bits == 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    let maxincr = max.wrapping_sub(value) as i64;
    let minincr = (value as i64).wrapping_neg();
    let wrap = || {
        let mask = if bits == 64 { 0 } else { u64::MAX << bits };
        value.wrapping_add(incr as u64) & !mask
    };
    if value > max || (incr > 0 && incr > maxincr) {
        return (true, if how == Overflow::Sat { max } else { wrap() });
    }
    if incr < 0 && incr < minincr {
        return (true, if how == Overflow::Sat { 0 } else { wrap() });
    }
    (false, 0)
}

/// Redis's `checkSignedBitfieldOverflow`.
fn signed_overflow(value: i64, incr: i64, bits: u32, how: Overflow) -> (bool, i64) {
    let max = if bits == 64 {
        i64::MAX
    } else {
        (1i64 << (bits - 1)) - 1
    };
    let min = -max - 1;
    let maxincr = (max as u64).wrapping_sub(value as u64) as i64;
    let minincr = min.wrapping_sub(value);
    let wrap = || {
        let mut c = (value as u64).wrapping_add(incr as u64);
        if bits < 64 {
            let msb = 1u64 << (bits - 1);
            let mask = u64::MAX << bits;
            if c & msb != 0 {
                c |= mask;
            } else {
                c &= !mask;
            }
        }
        c as i64
    };
    if value > max || (bits != 64 && incr > maxincr) || (value >= 0 && incr > 0 && incr > maxincr) {
        return (true, if how == Overflow::Sat { max } else { wrap() });
    }
    if value < min || (bits != 64 && incr < minincr) || (value < 0 && incr < 0 && incr < minincr) {
        return (true, if how == Overflow::Sat { min } else { wrap() });
    }
    (false, 0)
}

fn as_signed(raw: u64, bits: u32) -> i64 {
    if bits == 64 {
        return raw as i64;
    }
    let shift = 64 - bits;
    ((raw << shift) as i64) >> shift
}

/// The reply of one field operation: a number, or nil (FAIL).
type FieldReply = Option<i64>;

async fn bitfield(
    shared: &Shared,
    db: usize,
    name: &[u8],
    args: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    let store = &*shared.store;
    if !arity(args, 2, None, r) {
        return Ok(());
    }
    let fields = match parse_fields(args) {
        Ok(f) => f,
        Err(msg) => {
            r.error(msg);
            return Ok(());
        }
    };
    let writes = fields.iter().any(|f| !matches!(f.op, Op::Get));
    // (After every argument is read, as Redis checks it.)
    if writes && name == b"BITFIELD_RO" {
        r.error("ERR BITFIELD_RO only supports the GET subcommand");
        return Ok(());
    }
    let run = |data: &mut Vec<u8>| -> Vec<FieldReply> {
        fields
            .iter()
            .map(|f| {
                let raw = get_field(data, f.offset, f.bits);
                let (new, reply) = match (f.op, f.signed) {
                    (Op::Get, true) => return Some(as_signed(raw, f.bits)),
                    (Op::Get, false) => return Some(raw as i64),
                    (Op::IncrBy(by), true) => {
                        let old = as_signed(raw, f.bits);
                        let (over, limit) = signed_overflow(old, by, f.bits, f.overflow);
                        let new = if over { limit } else { old.wrapping_add(by) };
                        if over && f.overflow == Overflow::Fail {
                            return None;
                        }
                        (new as u64, new)
                    }
                    (Op::IncrBy(by), false) => {
                        let (over, limit) = unsigned_overflow(raw, by, f.bits, f.overflow);
                        let new = if over {
                            limit
                        } else {
                            raw.wrapping_add(by as u64)
                        };
                        if over && f.overflow == Overflow::Fail {
                            return None;
                        }
                        (new, new as i64)
                    }
                    (Op::Set(v), true) => {
                        let (over, limit) = signed_overflow(v, 0, f.bits, f.overflow);
                        if over && f.overflow == Overflow::Fail {
                            return None;
                        }
                        let new = if over { limit } else { v };
                        (new as u64, as_signed(raw, f.bits))
                    }
                    (Op::Set(v), false) => {
                        let (over, limit) = unsigned_overflow(v as u64, 0, f.bits, f.overflow);
                        if over && f.overflow == Overflow::Fail {
                            return None;
                        }
                        let new = if over { limit } else { v as u64 };
                        (new, raw as i64)
                    }
                };
                set_field(data, f.offset, f.bits, new);
                Some(reply)
            })
            .collect()
    };
    let replies = if writes {
        // The string is grown for every write first (even one that
        // fails on OVERFLOW FAIL), as Redis's lookupStringForBitCommand.
        let top = fields
            .iter()
            .filter(|f| !matches!(f.op, Op::Get))
            .map(|f| f.offset + u64::from(f.bits) - 1)
            .max()
            .unwrap_or(0);
        let (out, _) = store
            .update(db, args[1], now, |cur| {
                let (mut data, at) = match cur {
                    Some(v) if v.kind() != Kind::String => return (Change::Keep, None),
                    Some(v) => (v.data().to_vec(), v.expire_at_ms()),
                    None => (Vec::new(), 0),
                };
                let need = (top >> 3) as usize + 1;
                // Redis's event: the string made or grown, or a value
                // written changed.
                let dirty = cur.is_none() || data.len() < need;
                if data.len() < need {
                    data.resize(need, 0);
                }
                let replies = run(&mut data);
                let written = fields
                    .iter()
                    .zip(&replies)
                    .any(|(f, v)| !matches!(f.op, Op::Get) && v.is_some());
                // (Growth alone is not a change: compared over the old length.)
                let changed = cur.is_some_and(|v| v.data() != &data[..v.data().len()]);
                let dirty = (dirty && written) || changed;
                (put(data, at), Some((replies, dirty)))
            })
            .await?;
        out.map(|(replies, dirty)| {
            if dirty {
                shared.notify(notify::STRING, "setbit", db, args[1]);
            }
            replies
        })
    } else {
        let v = store.get(db, args[1], now).await?;
        match string_of(v.as_ref()) {
            Err(()) => None,
            Ok(d) => Some(run(&mut d.map(<[u8]>::to_vec).unwrap_or_default())),
        }
    };
    let Some(replies) = replies else {
        r.error(errors::WRONGTYPE);
        return Ok(());
    };
    r.array(replies.len());
    for v in replies {
        match v {
            Some(n) => r.integer(n),
            None => r.null(),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overflow_as_redis() {
        assert_eq!(signed_overflow(0, 200, 8, Overflow::Wrap), (true, -56));
        assert_eq!(signed_overflow(100, 100, 8, Overflow::Sat), (true, 127));
        assert_eq!(unsigned_overflow(3, -5, 2, Overflow::Wrap), (true, 2));
        assert_eq!(unsigned_overflow(2, -5, 2, Overflow::Sat), (true, 0));
        assert_eq!(unsigned_overflow(300, 0, 8, Overflow::Wrap), (true, 44));
        assert_eq!(
            signed_overflow(i64::MAX, 1, 64, Overflow::Wrap),
            (true, i64::MIN)
        );
    }

    #[test]
    fn bitpos_pads_with_zeros_without_an_end() {
        assert_eq!(position(&[0xff], 0, &[]), Ok(8));
        assert_eq!(position(&[0xff], 0, &[b"0", b"0"]), Ok(-1));
        assert_eq!(position(&[0x00, 0x01], 1, &[]), Ok(15));
        assert_eq!(position(&[0xff, 0xf0], 0, &[b"1"]), Ok(12));
    }
}
