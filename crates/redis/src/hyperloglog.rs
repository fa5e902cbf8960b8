//! HyperLogLog (Redis 7.0's `hyperloglog.c`): PFADD, PFCOUNT, PFMERGE,
//! PFDEBUG and PFSELFTEST on string values laid out byte for byte as
//! Redis lays them out — a 16-byte header (`HYLL`, the encoding, 3 zero
//! bytes, the cached cardinality with its top bit as "stale"), then
//! either the sparse opcodes (ZERO, XZERO, VAL runs) or 16 384 6-bit
//! dense registers. The same bytes give the same estimate, so a value
//! copied from Redis (GET/SET, DUMP/RESTORE) counts here as it counted
//! there, and PFCOUNT answers as redis-server does for the same adds.
//!
//! Every routine below is Redis's, step for step (the sparse update's
//! split and its five-opcode merge scan included), because the sparse
//! bytes a sequence of adds leaves are part of what a client can see.
//! Where Redis reads one byte past the dense registers (its strings are
//! NUL-terminated), we read a zero.

use nvdepot_cache::resp::{Change, Kind, Value};
use nvdepot_cache::Error;
use nvdepot_resp::{errors, Reply};

use super::args::arity;
use super::notify;
use super::session::Shared;

const HDR: usize = 16;
const P: u32 = 14;
const Q: u32 = 64 - P;
const REGISTERS: usize = 1 << P;
const P_MASK: u64 = REGISTERS as u64 - 1;
const BITS: usize = 6;
const REGISTER_MAX: u8 = (1 << BITS) - 1;
const DENSE_SIZE: usize = HDR + (REGISTERS * BITS).div_ceil(8);
const DENSE: u8 = 0;
const SPARSE: u8 = 1;
const VAL_MAX_VALUE: u8 = 32;
const VAL_MAX_LEN: usize = 4;
const ZERO_MAX_LEN: usize = 64;
const XZERO_MAX_LEN: usize = 16384;
const ALPHA_INF: f64 = 0.721_347_520_444_481_7;

const INVALID_HLL: &str = "INVALIDOBJ Corrupted HLL object detected";
const NOT_HLL: &str = "WRONGTYPE Key is not a valid HyperLogLog string value.";

/// Commands that must see several keys as one step.
pub fn needs_exclusive(name: &[u8]) -> bool {
    matches!(name, b"PFCOUNT" | b"PFMERGE")
}

/// Redis's MurmurHash64A (endian-neutral), the hash every element goes
/// through.
fn murmur64a(key: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = seed ^ (key.len() as u64).wrapping_mul(M);
    let mut chunks = key.chunks_exact(8);
    for c in &mut chunks {
        let mut k = u64::from_le_bytes(c.try_into().expect("8 bytes"));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate().rev() {
            h ^= u64::from(b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// The register an element falls in and the length of its hash's
/// `000…1` pattern (1 to Q+1).
fn pattern(ele: &[u8]) -> (usize, u8) {
    let hash = murmur64a(ele, 0xadc8_3b19);
    let index = (hash & P_MASK) as usize;
    let rest = (hash >> P) | (1u64 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

fn dense_get(regs: &[u8], i: usize) -> u8 {
    let byte = i * BITS / 8;
    let fb = (i * BITS) & 7;
    let b0 = u32::from(regs[byte]);
    let b1 = u32::from(regs.get(byte + 1).copied().unwrap_or(0));
    (((b0 >> fb) | (b1 << (8 - fb))) & u32::from(REGISTER_MAX)) as u8
}

fn dense_put(regs: &mut [u8], i: usize, val: u8) {
    let byte = i * BITS / 8;
    let fb = (i * BITS) & 7;
    let v = u32::from(val);
    let max = u32::from(REGISTER_MAX);
    regs[byte] = ((u32::from(regs[byte]) & !(max << fb)) | (v << fb)) as u8;
    if let Some(b1) = regs.get_mut(byte + 1) {
        *b1 = ((u32::from(*b1) & !(max >> (8 - fb))) | (v >> (8 - fb))) as u8;
    }
}

/// Sets dense register `i` to `count` if that is larger: whether it was.
fn dense_set(regs: &mut [u8], i: usize, count: u8) -> bool {
    if count > dense_get(regs, i) {
        dense_put(regs, i, count);
        true
    } else {
        false
    }
}

/// One sparse opcode: `(registers covered, value, bytes)`.
fn opcode(p: &[u8], at: usize) -> (usize, u8, usize) {
    let b = p[at];
    if b & 0xc0 == 0 {
        (usize::from(b & 0x3f) + 1, 0, 1)
    } else if b & 0x80 == 0 {
        // XZERO: two bytes; a truncated one covers what its first gives.
        let lo = usize::from(p.get(at + 1).copied().unwrap_or(0));
        (((usize::from(b & 0x3f) << 8) | lo) + 1, 0, 2)
    } else {
        (usize::from(b & 0x3) + 1, ((b >> 2) & 0x1f) + 1, 1)
    }
}

/// The opcodes of a sparse value, in order.
fn opcodes(v: &[u8]) -> impl Iterator<Item = (usize, u8, usize)> + '_ {
    let mut at = HDR;
    std::iter::from_fn(move || {
        (at < v.len()).then(|| {
            let op = opcode(v, at);
            at += op.2;
            op
        })
    })
}

/// Walks a sparse value's runs as Redis's `hllMerge` does:
/// `each(first register, registers, value)` for every VAL run; `Err`
/// unless the runs cover exactly the registers.
fn sparse_runs(v: &[u8], mut each: impl FnMut(usize, usize, u8)) -> Result<(), ()> {
    let mut idx = 0;
    for (run, val, _) in opcodes(v) {
        if val > 0 {
            if idx + run > REGISTERS {
                break;
            }
            each(idx, run, val);
        }
        idx += run;
    }
    if idx == REGISTERS {
        Ok(())
    } else {
        Err(())
    }
}

fn val_op(val: u8, len: usize) -> u8 {
    ((val - 1) << 2 | (len as u8 - 1)) | 0x80
}

fn zero_ops(out: &mut Vec<u8>, len: usize) {
    if len > ZERO_MAX_LEN {
        let l = len - 1;
        out.push((l >> 8) as u8 | 0x40);
        out.push((l & 0xff) as u8);
    } else {
        out.push(len as u8 - 1);
    }
}

fn invalidate_cache(v: &mut [u8]) {
    v[15] |= 1 << 7;
}

/// A new, empty HyperLogLog: sparse, all XZERO runs.
fn empty() -> Vec<u8> {
    let mut v = vec![0u8; HDR];
    v[..4].copy_from_slice(b"HYLL");
    v[4] = SPARSE;
    let mut left = REGISTERS;
    while left > 0 {
        let n = left.min(XZERO_MAX_LEN);
        zero_ops(&mut v, n);
        left -= n;
    }
    v
}

/// A sparse value made dense (`None` if its opcodes do not cover exactly
/// the registers). The header, cached cardinality included, is kept.
fn to_dense(v: &[u8]) -> Option<Vec<u8>> {
    if v[4] == DENSE {
        return Some(v.to_vec());
    }
    let mut d = vec![0u8; DENSE_SIZE];
    d[..HDR].copy_from_slice(&v[..HDR]);
    d[4] = DENSE;
    let regs = &mut d[HDR..];
    sparse_runs(v, |first, run, val| {
        (first..first + run).for_each(|i| dense_put(regs, i, val))
    })
    .ok()?;
    Some(d)
}

/// Sets register `index` of a sparse value to `count` if that is larger
/// (`hllSparseSet`), making the value dense when `count` does not fit a
/// VAL opcode or the value would pass `max_bytes`. `Err` for a corrupt
/// value.
fn sparse_set(v: &mut Vec<u8>, index: usize, count: u8, max_bytes: usize) -> Result<bool, ()> {
    if count > VAL_MAX_VALUE {
        return promote(v, index, count);
    }
    // Step 1: find the opcode covering `index`.
    let end = v.len();
    let mut at = HDR;
    let mut first = 0;
    let mut prev = None;
    let mut span = 0;
    while at < end {
        let (run, _, len) = opcode(v, at);
        span = run;
        if index < first + span {
            break;
        }
        prev = Some(at);
        at += len;
        first += span;
    }
    if span == 0 || at >= end {
        return Err(());
    }
    let (runlen, curval, oldlen) = opcode(v, at);
    let is_val = curval > 0;
    // Step 2: the easy cases in place, or the replacement sequence.
    let mut updated_in_place = false;
    if is_val {
        if curval >= count {
            return Ok(false);
        }
        if runlen == 1 {
            v[at] = val_op(count, 1);
            updated_in_place = true;
        }
    } else if oldlen == 1 && runlen == 1 {
        v[at] = val_op(count, 1);
        updated_in_place = true;
    }
    if !updated_in_place {
        let last = first + span - 1;
        let mut seq = Vec::with_capacity(5);
        if is_val {
            if index != first {
                seq.push(val_op(curval, index - first));
            }
            seq.push(val_op(count, 1));
            if index != last {
                seq.push(val_op(curval, last - index));
            }
        } else {
            if index != first {
                zero_ops(&mut seq, index - first);
            }
            seq.push(val_op(count, 1));
            if index != last {
                zero_ops(&mut seq, last - index);
            }
        }
        // Step 3: the sequence replaces the opcode.
        if seq.len() > oldlen && v.len() + seq.len() - oldlen > max_bytes {
            return promote(v, index, count);
        }
        v.splice(at..at + oldlen, seq);
    }
    // Step 4: merge adjacent VAL opcodes of one value, scanning up to
    // five opcodes from the one before.
    let mut p = prev.unwrap_or(HDR);
    let mut scan = 5;
    while p < v.len() {
        if scan == 0 {
            break;
        }
        scan -= 1;
        let b = v[p];
        if b & 0xc0 == 0x40 {
            p += 2;
            continue;
        } else if b & 0xc0 == 0 {
            p += 1;
            continue;
        }
        if p + 1 < v.len() && v[p + 1] & 0x80 != 0 {
            let (l1, v1, _) = opcode(v, p);
            let (l2, v2, _) = opcode(v, p + 1);
            if v1 == v2 && l1 + l2 <= VAL_MAX_LEN {
                v[p + 1] = val_op(v1, l1 + l2);
                v.remove(p);
                continue;
            }
        }
        p += 1;
    }
    invalidate_cache(v);
    Ok(true)
}

fn promote(v: &mut Vec<u8>, index: usize, count: u8) -> Result<bool, ()> {
    *v = to_dense(v).ok_or(())?;
    let changed = dense_set(&mut v[HDR..], index, count);
    debug_assert!(changed, "a promotion always sets its register");
    Ok(changed)
}

/// Adds one element: whether a register grew.
fn add(v: &mut Vec<u8>, ele: &[u8], max_bytes: usize) -> Result<bool, ()> {
    let (index, count) = pattern(ele);
    match v[4] {
        DENSE => Ok(dense_set(&mut v[HDR..], index, count)),
        SPARSE => sparse_set(v, index, count, max_bytes),
        _ => Err(()),
    }
}

/// Whether a string is a HyperLogLog (`isHLLObjectOrReply`).
fn is_hll(data: &[u8]) -> bool {
    data.len() >= HDR
        && &data[..4] == b"HYLL"
        && data[4] <= SPARSE
        && (data[4] != DENSE || data.len() == DENSE_SIZE)
}

/// Raises `max[i]` to each register of `v` (`hllMerge`); `Err` for a
/// corrupt sparse value.
fn merge_into(max: &mut [u8; REGISTERS], v: &[u8]) -> Result<(), ()> {
    if v[4] == DENSE {
        for (i, m) in max.iter_mut().enumerate() {
            *m = (*m).max(dense_get(&v[HDR..], i));
        }
        return Ok(());
    }
    sparse_runs(v, |first, run, val| {
        for m in &mut max[first..first + run] {
            *m = (*m).max(val);
        }
    })
}

fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    loop {
        x *= x;
        let z_prime = z;
        z += x * y;
        y += y;
        if z_prime == z {
            return z;
        }
    }
}

fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let z_prime = z;
        y *= 0.5;
        z -= (1.0 - x) * (1.0 - x) * y;
        if z_prime == z {
            return z / 3.0;
        }
    }
}

/// The estimate from a register histogram (Ertl's improved estimator,
/// as Redis 7.0 computes it).
fn estimate(histo: &[u32; 64]) -> u64 {
    let m = REGISTERS as f64;
    let q = Q as usize;
    let mut z = m * tau((m - f64::from(histo[q + 1])) / m);
    for j in (1..=q).rev() {
        z += f64::from(histo[j]);
        z *= 0.5;
    }
    z += m * sigma(f64::from(histo[0]) / m);
    (ALPHA_INF * m * m / z).round() as u64
}

/// The histogram of a value's registers; `Err` for sparse opcodes that
/// do not cover exactly the registers.
fn histogram(v: &[u8]) -> Result<[u32; 64], ()> {
    let mut histo = [0u32; 64];
    if v[4] == DENSE {
        for i in 0..REGISTERS {
            histo[usize::from(dense_get(&v[HDR..], i))] += 1;
        }
        return Ok(histo);
    }
    let mut set = 0;
    sparse_runs(v, |_, run, val| {
        histo[usize::from(val)] += run as u32;
        set += run;
    })?;
    histo[0] = (REGISTERS - set) as u32;
    Ok(histo)
}

fn raw_histogram(max: &[u8; REGISTERS]) -> [u32; 64] {
    let mut histo = [0u32; 64];
    for &r in max {
        histo[usize::from(r & 63)] += 1;
    }
    histo
}

fn cached(v: &[u8]) -> Option<u64> {
    (v[15] & 0x80 == 0).then(|| u64::from_le_bytes(v[8..16].try_into().expect("8 bytes")))
}

fn put(data: Vec<u8>, at: u64) -> Change {
    Change::Put {
        kind: Kind::String,
        data,
        expire_at_ms: at,
    }
}

/// What a key holds, for a HyperLogLog command.
enum Held<'a> {
    Missing,
    Hll(&'a [u8]),
    /// Another type (the usual WRONGTYPE).
    OtherType,
    /// A string that is not a HyperLogLog.
    NotHll,
}

fn held(v: Option<&Value>) -> Held<'_> {
    match v {
        None => Held::Missing,
        Some(v) if v.kind() != Kind::String => Held::OtherType,
        Some(v) if is_hll(v.data()) => Held::Hll(v.data()),
        Some(_) => Held::NotHll,
    }
}

impl Held<'_> {
    /// The error for a key that is not a HyperLogLog.
    fn refusal(&self) -> &'static str {
        match self {
            Held::OtherType => errors::WRONGTYPE,
            _ => NOT_HLL,
        }
    }
}

/// Runs `name` if it is a HyperLogLog command (`None` if not).
pub async fn execute(
    shared: &Shared,
    db: usize,
    name: &[u8],
    args: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> Option<Result<(), Error>> {
    let max_bytes =
        usize::try_from(shared.tunables.value("hll-sparse-max-bytes").max(0)).unwrap_or(usize::MAX);
    let store = &*shared.store;
    let (min, max) = match name {
        b"PFADD" | b"PFCOUNT" | b"PFMERGE" => (2, None),
        b"PFDEBUG" => (3, Some(3)),
        b"PFSELFTEST" => (1, Some(1)),
        _ => return None,
    };
    if !arity(args, min, max, r) {
        return Some(Ok(()));
    }
    Some(match name {
        b"PFADD" => pfadd(shared, db, args, now, max_bytes, r).await,
        b"PFCOUNT" if args.len() == 2 => pfcount_one(store, db, args[1], now, r).await,
        b"PFCOUNT" => pfcount_union(store, db, &args[1..], now, r).await,
        b"PFMERGE" => pfmerge(shared, db, args, now, max_bytes, r).await,
        b"PFDEBUG" => pfdebug(store, db, args, now, r).await,
        _ => {
            selftest(max_bytes, r);
            Ok(())
        }
    })
}

type Store = nvdepot_cache::resp::RespStore;

enum Outcome<T> {
    Done(T),
    Refused(&'static str),
    Corrupt,
}

async fn pfadd(
    shared: &Shared,
    db: usize,
    args: &[&[u8]],
    now: u64,
    max_bytes: usize,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    let (out, _) = shared
        .store
        .update(db, args[1], now, |cur| {
            let (mut v, at, mut updated) = match held(cur) {
                Held::Missing => (empty(), 0, true),
                Held::Hll(d) => (d.to_vec(), cur.map_or(0, Value::expire_at_ms), false),
                h => return (Change::Keep, Outcome::Refused(h.refusal())),
            };
            for ele in &args[2..] {
                match add(&mut v, ele, max_bytes) {
                    Ok(grew) => updated |= grew,
                    // Redis keeps what the earlier elements changed.
                    Err(()) => return (put(v, at), Outcome::Corrupt),
                }
            }
            if !updated {
                return (Change::Keep, Outcome::Done(false));
            }
            invalidate_cache(&mut v);
            (put(v, at), Outcome::Done(true))
        })
        .await?;
    if matches!(out, Outcome::Done(true)) {
        shared.notify(notify::STRING, "pfadd", db, args[1]);
    }
    reply(out, r, |done, r| r.integer(i64::from(done)));
    Ok(())
}

fn reply<T>(out: Outcome<T>, r: &mut Reply<'_>, done: impl FnOnce(T, &mut Reply<'_>)) {
    match out {
        Outcome::Done(t) => done(t, r),
        Outcome::Refused(msg) => r.error(msg),
        Outcome::Corrupt => r.error(INVALID_HLL),
    }
}

/// PFCOUNT of one key: the cached estimate, or a new one written back
/// into the value's header (as Redis does, so GET shows the same bytes).
async fn pfcount_one(
    store: &Store,
    db: usize,
    key: &[u8],
    now: u64,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    // Most counts find the cache valid: read first, write only if not.
    let v = store.get(db, key, now).await?;
    match held(v.as_ref()) {
        Held::Missing => {
            r.integer(0);
            return Ok(());
        }
        Held::Hll(d) => {
            if let Some(card) = cached(d) {
                r.integer(card as i64);
                return Ok(());
            }
        }
        h => {
            r.error(h.refusal());
            return Ok(());
        }
    }
    let (out, _) = store
        .update(db, key, now, |cur| {
            let d = match held(cur) {
                Held::Missing => return (Change::Keep, Outcome::Done(0)),
                Held::Hll(d) => d,
                h => return (Change::Keep, Outcome::Refused(h.refusal())),
            };
            if let Some(card) = cached(d) {
                return (Change::Keep, Outcome::Done(card));
            }
            let Ok(histo) = histogram(d) else {
                return (Change::Keep, Outcome::Corrupt);
            };
            let card = estimate(&histo);
            let mut v = d.to_vec();
            v[8..16].copy_from_slice(&card.to_le_bytes());
            (
                put(v, cur.map_or(0, Value::expire_at_ms)),
                Outcome::Done(card),
            )
        })
        .await?;
    reply(out, r, |card, r| r.integer(card as i64));
    Ok(())
}

/// Reads `keys` and raises `max` to each one's registers. `Ok(false)`
/// once the reply (an error) is written.
async fn merge_keys(
    store: &Store,
    db: usize,
    keys: &[&[u8]],
    now: u64,
    max: &mut [u8; REGISTERS],
    r: &mut Reply<'_>,
) -> Result<Option<bool>, Error> {
    let mut any_dense = false;
    for k in keys {
        let v = store.get(db, k, now).await?;
        match held(v.as_ref()) {
            Held::Missing => {}
            Held::Hll(d) => {
                any_dense |= d[4] == DENSE;
                if merge_into(max, d).is_err() {
                    r.error(INVALID_HLL);
                    return Ok(None);
                }
            }
            h => {
                r.error(h.refusal());
                return Ok(None);
            }
        }
    }
    Ok(Some(any_dense))
}

async fn pfcount_union(
    store: &Store,
    db: usize,
    keys: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    let mut max = Box::new([0u8; REGISTERS]);
    if merge_keys(store, db, keys, now, &mut max, r)
        .await?
        .is_some()
    {
        r.integer(estimate(&raw_histogram(&max)) as i64);
    }
    Ok(())
}

async fn pfmerge(
    shared: &Shared,
    db: usize,
    args: &[&[u8]],
    now: u64,
    max_bytes: usize,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    let store = &*shared.store;
    let mut max = Box::new([0u8; REGISTERS]);
    // The destination is a source too.
    let Some(use_dense) = merge_keys(store, db, &args[1..], now, &mut max, r).await? else {
        return Ok(());
    };
    let (out, _) = store
        .update(db, args[1], now, |cur| {
            let (mut v, at) = match held(cur) {
                Held::Hll(d) => (d.to_vec(), cur.map_or(0, Value::expire_at_ms)),
                _ => (empty(), 0),
            };
            if use_dense {
                match to_dense(&v) {
                    Some(d) => v = d,
                    None => return (Change::Keep, Outcome::Corrupt),
                }
            }
            for (i, &m) in max.iter().enumerate() {
                if m == 0 {
                    continue;
                }
                if v[4] == DENSE {
                    dense_set(&mut v[HDR..], i, m);
                } else {
                    // Checked by the merge above: cannot be corrupt.
                    let _ = sparse_set(&mut v, i, m, max_bytes);
                }
            }
            invalidate_cache(&mut v);
            (put(v, at), Outcome::Done(()))
        })
        .await?;
    if matches!(out, Outcome::Done(())) {
        shared.notify(notify::STRING, "pfadd", db, args[1]);
    }
    reply(out, r, |(), r| r.ok());
    Ok(())
}

fn decode(v: &[u8]) -> String {
    let parts: Vec<String> = opcodes(v)
        .map(|(run, val, len)| match (val, len) {
            (0, 1) => format!("z:{run}"),
            (0, _) => format!("Z:{run}"),
            _ => format!("v:{val},{run}"),
        })
        .collect();
    parts.join(" ")
}

async fn pfdebug(
    store: &Store,
    db: usize,
    args: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    enum Debug {
        Missing,
        Refused(&'static str),
        Corrupt,
        Registers(Vec<u8>),
        Decoded(Option<String>),
        Encoding(&'static str),
        Converted(bool),
        Unknown,
    }
    let sub = args[1].to_ascii_lowercase();
    let (out, _) = store
        .update(db, args[2], now, |cur| {
            let d = match held(cur) {
                Held::Missing => return (Change::Keep, Debug::Missing),
                Held::Hll(d) => d,
                h => return (Change::Keep, Debug::Refused(h.refusal())),
            };
            let at = cur.map_or(0, Value::expire_at_ms);
            match sub.as_slice() {
                b"getreg" | b"todense" => {
                    let was_sparse = d[4] == SPARSE;
                    let Some(dense) = to_dense(d) else {
                        return (Change::Keep, Debug::Corrupt);
                    };
                    let out = if sub == b"getreg" {
                        Debug::Registers(
                            (0..REGISTERS)
                                .map(|i| dense_get(&dense[HDR..], i))
                                .collect(),
                        )
                    } else {
                        Debug::Converted(was_sparse)
                    };
                    if was_sparse {
                        (put(dense, at), out)
                    } else {
                        (Change::Keep, out)
                    }
                }
                b"decode" => (
                    Change::Keep,
                    Debug::Decoded((d[4] == SPARSE).then(|| decode(d))),
                ),
                b"encoding" => (
                    Change::Keep,
                    Debug::Encoding(if d[4] == DENSE { "dense" } else { "sparse" }),
                ),
                _ => (Change::Keep, Debug::Unknown),
            }
        })
        .await?;
    match out {
        Debug::Missing => r.error("ERR The specified key does not exist"),
        Debug::Refused(msg) => r.error(msg),
        Debug::Corrupt => r.error(INVALID_HLL),
        Debug::Registers(regs) => {
            r.array(regs.len());
            for v in regs {
                r.integer(i64::from(v));
            }
        }
        Debug::Decoded(Some(s)) => r.bulk(s.as_bytes()),
        Debug::Decoded(None) => r.error("ERR HLL encoding is not sparse"),
        Debug::Encoding(e) => r.simple(e),
        Debug::Converted(c) => r.integer(i64::from(c)),
        Debug::Unknown => r.error(format!(
            "ERR Unknown PFDEBUG subcommand '{}'",
            String::from_utf8_lossy(args[1])
        )),
    }
    Ok(())
}

/// PFSELFTEST: Redis's self-test of the register layout and of the
/// estimate's error, dense and sparse side by side.
fn selftest(max_bytes: usize, r: &mut Reply<'_>) {
    match run_selftest(max_bytes, rand::random()) {
        Ok(()) => r.ok(),
        Err(e) => r.error(format!("TESTFAILED {e}")),
    }
}

fn run_selftest(max_bytes: usize, seed: u64) -> Result<(), String> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut regs = vec![0u8; DENSE_SIZE - HDR];
    let mut bytes = vec![0u8; REGISTERS];
    for _ in 0..1000 {
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = rng.gen::<u8>() & REGISTER_MAX;
            dense_put(&mut regs, i, *b);
        }
        for (i, &b) in bytes.iter().enumerate() {
            let got = dense_get(&regs, i);
            if got != b {
                return Err(format!("Register {i} should be {b} but is {got}"));
            }
        }
    }
    let mut dense = empty();
    dense = to_dense(&dense).expect("an empty HyperLogLog is sound");
    let mut sparse = empty();
    let relerr = 1.04 / (REGISTERS as f64).sqrt();
    let mut checkpoint: u64 = 1;
    let base: u64 = rng.gen();
    for j in 1..=10_000_000u64 {
        let ele = (j ^ base).to_ne_bytes();
        let (index, count) = pattern(&ele);
        dense_set(&mut dense[HDR..], index, count);
        add(&mut sparse, &ele, max_bytes).map_err(|()| "sparse value corrupt".to_string())?;
        if j != checkpoint {
            continue;
        }
        if (j as usize) < max_bytes / 2 && sparse[4] != SPARSE {
            return Err("sparse encoding not used".into());
        }
        let d = estimate(&histogram(&dense).expect("dense"));
        let s = estimate(&histogram(&sparse).map_err(|()| "sparse value corrupt".to_string())?);
        if d != s {
            return Err("dense/sparse disagree".into());
        }
        let abserr = (checkpoint as i64 - d as i64).unsigned_abs();
        let maxerr = if j == 10 {
            1
        } else {
            (relerr * 6.0 * checkpoint as f64).ceil() as u64
        };
        if abserr > maxerr {
            return Err(format!("Too big error. card:{checkpoint} abserr:{abserr}"));
        }
        checkpoint *= 10;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registers_round_trip_without_touching_neighbours() {
        let mut regs = vec![0u8; DENSE_SIZE - HDR];
        for i in 0..REGISTERS {
            dense_put(&mut regs, i, (i % 64) as u8);
        }
        for i in 0..REGISTERS {
            assert_eq!(dense_get(&regs, i), (i % 64) as u8);
        }
    }

    #[test]
    fn sparse_and_dense_agree_and_sparse_promotes() {
        let mut sparse = empty();
        let mut dense = to_dense(&empty()).unwrap();
        for j in 0..20_000u64 {
            let ele = j.to_string();
            add(&mut sparse, ele.as_bytes(), 3000).unwrap();
            add(&mut dense, ele.as_bytes(), 3000).unwrap();
            if j % 997 == 0 {
                assert_eq!(
                    estimate(&histogram(&sparse).unwrap()),
                    estimate(&histogram(&dense).unwrap())
                );
            }
        }
        assert_eq!(sparse[4], DENSE, "20 000 elements pass 3000 sparse bytes");
        assert_eq!(sparse, {
            let mut d = dense.clone();
            d[8..16].copy_from_slice(&sparse[8..16]);
            d
        });
        let card = estimate(&histogram(&dense).unwrap());
        assert!((19_000..21_000).contains(&card), "{card}");
    }

    #[test]
    fn corrupt_sparse_values_are_refused_not_panics() {
        let mut v = empty();
        v.truncate(HDR + 1);
        assert!(histogram(&v).is_err());
        assert!(add(&mut v, b"x", 3000).is_err());
        let mut max = [0u8; REGISTERS];
        assert!(merge_into(&mut max, &v).is_err());
        assert!(to_dense(&v).is_none());
        // Runs that overshoot the registers.
        let mut over = empty();
        over.extend_from_slice(&[0x7f, 0xff]);
        assert!(histogram(&over).is_err());
        assert!(to_dense(&over).is_none());
    }

    #[test]
    fn selftest_passes() {
        run_selftest(3000, 7).unwrap();
    }
}
