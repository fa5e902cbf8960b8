//! The set type (Redis 7.0's `t_set.c`): SADD and the rest, over the
//! compact layout of `compact.rs` (one record per set).
//!
//! Redis 7.0 keeps a set as an intset (sorted integers) while every member
//! is an integer and there are at most `set-max-intset-entries` of them,
//! else as a hashtable, for good. nvdepot keeps the same two shapes in the
//! record: small = integers in ascending order (so SMEMBERS answers in
//! Redis's order), large = insertion order (Redis's hashtable order is its
//! own; clients treat it as unordered).
//!
//! Commands over several keys (SMOVE, the STORE forms, SINTER, SUNION,
//! SDIFF, SINTERCARD) run holding the exclusive pass of the isolation gate,
//! so they see and change their keys as one step, as in Redis.

use std::collections::HashSet;

use nvdepot_cache::resp::{Change, Kind, RespStore, Value};
use nvdepot_cache::Error;
use nvdepot_resp::{errors, string2ll, Reply};
use rand::Rng;

use super::args::arity;
use super::compact::{self, Compact};
use super::compact_update::Fail;
use super::hash_pages as hpages;
use super::list_pages::is_paged;
use super::notify;
use super::paged_scan;
use super::scan::ScanOptions;
use super::session::Shared;

/// Commands that must see several keys as one step.
pub fn needs_exclusive(name: &[u8]) -> bool {
    matches!(
        name,
        b"SMOVE"
            | b"SINTER"
            | b"SINTERSTORE"
            | b"SINTERCARD"
            | b"SUNION"
            | b"SUNIONSTORE"
            | b"SDIFF"
            | b"SDIFFSTORE"
    )
}

/// A set as its record holds it.
#[derive(Default)]
pub(crate) struct Set {
    pub large: bool,
    pub members: Vec<Vec<u8>>,
}

fn set_of(v: Option<&Value>) -> Result<Option<Set>, Fail> {
    let Some(v) = v else { return Ok(None) };
    if v.kind() != Kind::Set {
        return Err(Fail::WrongType);
    }
    let c = Compact::decode(v.data()).map_err(Fail::Store)?;
    Ok(Some(Set {
        large: c.large,
        members: c.items,
    }))
}

impl Set {
    /// An empty set created for `first` (Redis's `setTypeCreate`: an
    /// intset if it is an integer).
    fn created_for(first: &[u8]) -> Set {
        Set {
            large: string2ll(first).is_none(),
            members: Vec::new(),
        }
    }

    fn position(&self, m: &[u8]) -> Result<usize, usize> {
        if self.large {
            return self
                .members
                .iter()
                .position(|x| x == m)
                .ok_or(self.members.len());
        }
        match string2ll(m) {
            // Sorted integers: no non-integer can be a member.
            Some(n) => self
                .members
                .binary_search_by_key(&n, |x| string2ll(x).expect("intset member")),
            None => Err(self.members.len()),
        }
    }

    fn contains(&self, m: &[u8]) -> bool {
        self.position(m).is_ok()
    }

    /// Adds `m`; true if new. Converts to the large shape as Redis would.
    fn add(&mut self, m: &[u8], max_intset: usize) -> bool {
        if !self.large && string2ll(m).is_none() {
            self.large = true;
        }
        match self.position(m) {
            Ok(_) => false,
            Err(i) => {
                self.members.insert(i, m.to_vec());
                if self.members.len() > max_intset {
                    self.large = true;
                }
                true
            }
        }
    }

    fn remove(&mut self, m: &[u8]) -> bool {
        match self.position(m) {
            Ok(i) => {
                self.members.remove(i);
                true
            }
            Err(_) => false,
        }
    }

    pub(crate) fn change(self, expire_at_ms: u64) -> Change {
        if self.members.is_empty() {
            return Change::Delete;
        }
        Change::Put {
            kind: Kind::Set,
            data: Compact {
                large: self.large,
                items: self.members,
            }
            .encode(),
            expire_at_ms,
        }
    }

    /// A set of `members` (distinct), shaped as Redis shapes a computed
    /// set (an intset while all are integers and few enough).
    fn of(members: Vec<Vec<u8>>, max_intset: usize) -> Set {
        let mut ints: Vec<(i64, Vec<u8>)> = Vec::new();
        for m in &members {
            match string2ll(m) {
                Some(n) => ints.push((n, m.clone())),
                None => break,
            }
        }
        if ints.len() == members.len() && members.len() <= max_intset {
            ints.sort_unstable_by_key(|(n, _)| *n);
            return Set {
                large: false,
                members: ints.into_iter().map(|(_, m)| m).collect(),
            };
        }
        Set {
            large: true,
            members,
        }
    }
}

/// Whether `data` is a set record's data.
pub fn check(data: &[u8]) -> Result<(), Error> {
    let c = Compact::decode(data)?;
    if !c.large {
        let ints: Option<Vec<i64>> = c.items.iter().map(|m| string2ll(m)).collect();
        let sorted = ints.is_some_and(|i| i.windows(2).all(|w| w[0] < w[1]));
        if !sorted {
            return Err(Error::Envelope(
                "an intset set must hold sorted integers".into(),
            ));
        }
    }
    Ok(())
}

/// OBJECT ENCODING of a set value.
pub fn encoding(v: &Value) -> Result<&'static str, Error> {
    if is_paged(v.data()) {
        return Ok("hashtable");
    }
    let c = Compact::decode(v.data())?;
    Ok(if c.large { "hashtable" } else { "intset" })
}

pub(crate) fn max_intset(shared: &Shared) -> usize {
    usize::try_from(shared.tunables.value("set-max-intset-entries")).unwrap_or(usize::MAX)
}

/// Runs `name` if it is a set command (`None` if not).
pub async fn execute(
    shared: &Shared,
    db: usize,
    name: &[u8],
    args: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> Option<Result<(), Error>> {
    let store = &*shared.store;
    let max = max_intset(shared);
    let done = match name {
        b"SADD" => {
            if !arity(args, 3, None, r) {
                return Some(Ok(()));
            }
            let members = &args[2..];
            let pairs = as_pairs(members);
            let op = hpages::Op::Set(&pairs);
            update(
                store,
                db,
                args[1],
                now,
                op,
                |s| {
                    let s = s.get_or_insert_with(|| Set::created_for(members[0]));
                    let added = members.iter().filter(|m| s.add(m, max)).count();
                    Ok((added > 0, added as i64))
                },
                hpages::Out::int,
            )
            .await
            .map(|out| {
                out.map(|n| {
                    if n > 0 {
                        shared.notify(notify::SET, "sadd", db, args[1]);
                    }
                    r.integer(n)
                })
            })
        }
        b"SREM" => {
            if !arity(args, 3, None, r) {
                return Some(Ok(()));
            }
            let op = hpages::Op::Del(&args[2..]);
            let out = update(
                store,
                db,
                args[1],
                now,
                op,
                |s| {
                    let Some(s) = s else { return Ok((false, 0)) };
                    let removed = args[2..].iter().filter(|m| s.remove(m)).count();
                    Ok((removed > 0, removed as i64))
                },
                hpages::Out::int,
            )
            .await;
            if let Ok(Ok(n)) = out {
                shared
                    .notify_removal(notify::SET, "srem", db, args[1], n > 0, now)
                    .await;
            }
            out.map(|out| out.map(|n| r.integer(n)))
        }
        b"SPOP" => return Some(spop(shared, db, args, now, r).await),
        b"SMOVE" => {
            if !arity(args, 4, Some(4), r) {
                return Some(Ok(()));
            }
            // The member leaves one set and joins the other in one
            // crash-atomic commit; the reply is kept only if it lands.
            let start = r.out.len();
            let atomic = super::atomic::Atomic::begin();
            let done = atomic
                .run(Box::pin(smove(shared, db, args, now, max, r)))
                .await;
            let committed = atomic.commit(&shared.store).await;
            if committed.is_err() {
                r.out.truncate(start);
            }
            return Some(committed.and(done));
        }
        b"SINTER" | b"SUNION" | b"SDIFF" => {
            if !arity(args, 2, None, r) {
                return Some(Ok(()));
            }
            return Some(combine(shared, db, name, &args[1..], None, now, max, r).await);
        }
        b"SINTERSTORE" | b"SUNIONSTORE" | b"SDIFFSTORE" => {
            if !arity(args, 3, None, r) {
                return Some(Ok(()));
            }
            let op = &name[..name.len() - 5];
            let dst = Some(args[1]);
            return Some(combine(shared, db, op, &args[2..], dst, now, max, r).await);
        }
        b"SINTERCARD" => return Some(intercard(store, db, args, now, r).await),
        b"SCARD" | b"SISMEMBER" | b"SMISMEMBER" | b"SMEMBERS" | b"SRANDMEMBER" | b"SSCAN" => {
            return Some(read_command(store, db, name, args, now, r).await)
        }
        _ => return None,
    };
    Some(done.map(|out| {
        if let Err(msg) = out {
            r.error(msg);
        }
    }))
}

/// One atomic update of set `key`: `apply` sees the set (`None` when
/// missing) and says whether it changed and what to answer, or the error
/// to answer (WRONGTYPE is one too). A paged set runs `op` instead (one
/// bucket per member, `hash_pages.rs`); a compact one the change takes
/// past the paged threshold is written paged.
async fn update<T>(
    store: &RespStore,
    db: usize,
    key: &[u8],
    now: u64,
    op: hpages::Op<'_>,
    apply: impl FnMut(&mut Option<Set>) -> Result<(bool, T), &'static str>,
    out: impl Fn(hpages::Out) -> T,
) -> Result<Result<T, &'static str>, Error> {
    super::hash_combine::update(
        store,
        Kind::Set,
        db,
        key,
        now,
        set_of,
        |s: Option<Set>, at| s.unwrap_or_default().change(at),
        &op,
        apply,
        out,
    )
    .await
}

/// The members as a paged set's op takes them: member, "", member, "" …
fn as_pairs<'a>(members: &[&'a [u8]]) -> Vec<&'a [u8]> {
    members.iter().flat_map(|m| [*m, &b""[..]]).collect()
}

/// SCARD, SISMEMBER and SMISMEMBER of a compact set, from its record's
/// bytes as they lie (checked whole first): no `Vec` per member, as
/// decoding the set took for every membership test.
fn membership_compact(
    name: &[u8],
    data: &[u8],
    members: &[&[u8]],
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    let (large, count) = compact::check_items(data)?;
    // Every item parsed: the walks below meet no error.
    let contains = |m: &[u8]| {
        let mut items = compact::items(data).flatten().map(|(_, x)| x);
        if large {
            return items.any(|x| x == m);
        }
        // Integers in ascending order (as `Set::position` searches them).
        string2ll(m).is_some_and(|n| {
            items
                .map_while(string2ll)
                .take_while(|&x| x <= n)
                .any(|x| x == n)
        })
    };
    answer_membership(name, count as u64, members, |_, m| contains(m), r);
    Ok(())
}

/// The reply of SCARD (`count`), SISMEMBER or SMISMEMBER (`is_member` of
/// each of `members`, by position and member).
fn answer_membership(
    name: &[u8],
    count: u64,
    members: &[&[u8]],
    is_member: impl Fn(usize, &[u8]) -> bool,
    r: &mut Reply<'_>,
) {
    match name {
        b"SCARD" => r.integer(count as i64),
        b"SISMEMBER" => r.integer(i64::from(is_member(0, members[0]))),
        _ => {
            r.array(members.len());
            for (i, m) in members.iter().enumerate() {
                r.integer(i64::from(is_member(i, m)));
            }
        }
    }
}

/// Reads set `key`: `Ok(Err(()))` once WRONGTYPE is answered.
pub(crate) async fn read(
    store: &RespStore,
    db: usize,
    key: &[u8],
    now: u64,
    r: &mut Reply<'_>,
) -> Result<Result<Option<Set>, ()>, Error> {
    let v = store.get(db, key, now).await?;
    if v.as_ref()
        .is_some_and(|v| v.kind() == Kind::Set && is_paged(v.data()))
    {
        match hpages::read(store, Kind::Set, db, key, now, None).await? {
            Some(hpages::Read::All(pairs)) => {
                let members = pairs.into_iter().map(|(m, _)| m).collect();
                return Ok(Ok(Some(Set {
                    large: true,
                    members,
                })));
            }
            // Changed meanwhile: read again.
            _ => return Box::pin(read(store, db, key, now, r)).await,
        }
    }
    match set_of(v.as_ref()) {
        Ok(s) => Ok(Ok(s)),
        Err(Fail::WrongType) => {
            r.error(errors::WRONGTYPE);
            Ok(Err(()))
        }
        Err(Fail::Store(e)) => Err(e),
    }
}

/// A reply of `members` as a set (RESP3 `~`).
fn reply_set(r: &mut Reply<'_>, members: &[Vec<u8>]) {
    r.set(members.len());
    for m in members {
        r.bulk(m);
    }
}

async fn spop(
    shared: &Shared,
    db: usize,
    args: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    let store = &*shared.store;
    if !arity(args, 2, None, r) {
        return Ok(());
    }
    if args.len() > 3 {
        r.error(errors::SYNTAX);
        return Ok(());
    }
    let count = match args.get(2) {
        None => None,
        Some(a) => match string2ll(a) {
            Some(n) if n >= 0 => Some(n as u64),
            _ => {
                r.error("ERR value is out of range, must be positive");
                return Ok(());
            }
        },
    };
    let op = hpages::Op::Pop(count.unwrap_or(1));
    let out = update(
        store,
        db,
        args[1],
        now,
        op,
        |s| {
            let Some(s) = s.as_mut().filter(|_| count != Some(0)) else {
                return Ok((false, Vec::new()));
            };
            let mut rng = rand::thread_rng();
            let n = count.unwrap_or(1).min(s.members.len() as u64) as usize;
            let mut popped = Vec::with_capacity(n);
            for _ in 0..n {
                let i = rng.gen_range(0..s.members.len());
                popped.push(s.members.remove(i));
            }
            Ok((true, popped))
        },
        hpages::Out::members,
    )
    .await?;
    if let Ok(popped) = &out {
        let removed = !popped.is_empty();
        shared
            .notify_removal(notify::SET, "spop", db, args[1], removed, now)
            .await;
    }
    match (out, count) {
        (Err(msg), _) => r.error(msg),
        (Ok(popped), Some(_)) => reply_set(r, &popped),
        (Ok(popped), None) => match popped.first() {
            Some(m) => r.bulk(m),
            None => r.null(),
        },
    }
    Ok(())
}

async fn smove(
    shared: &Shared,
    db: usize,
    args: &[&[u8]],
    now: u64,
    max: usize,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    let store = &*shared.store;
    let (src, dst, member) = (args[1], args[2], args[3]);
    // Both keys' types are checked first (the caller holds the exclusive
    // pass: nothing changes them meanwhile).
    let Ok(from) = read(store, db, src, now, r).await? else {
        return Ok(());
    };
    let Some(from) = from else {
        r.integer(0);
        return Ok(());
    };
    let Ok(_) = read(store, db, dst, now, r).await? else {
        return Ok(());
    };
    if src == dst {
        r.integer(i64::from(from.contains(member)));
        return Ok(());
    }
    let one = [member];
    let removed = update(
        store,
        db,
        src,
        now,
        hpages::Op::Del(&one),
        |s| {
            let gone = s.as_mut().is_some_and(|s| s.remove(member));
            Ok((gone, gone))
        },
        |o| o.int() > 0,
    )
    .await?;
    if removed != Ok(true) {
        r.integer(0);
        return Ok(());
    }
    shared
        .notify_removal(notify::SET, "srem", db, src, true, now)
        .await;
    let pair = as_pairs(&one);
    let added = update(
        store,
        db,
        dst,
        now,
        hpages::Op::Set(&pair),
        |s| {
            let s = s.get_or_insert_with(|| Set::created_for(member));
            let added = s.add(member, max);
            Ok((added, added))
        },
        |o| o.int() > 0,
    )
    .await?;
    match added {
        Ok(added) => {
            if added {
                shared.notify(notify::SET, "sadd", db, dst);
            }
            r.integer(1)
        }
        Err(msg) => r.error(msg),
    }
    Ok(())
}

/// SINTER, SUNION, SDIFF of `keys` (`op` the command's name without
/// STORE); with `dst`, stores the result there and answers its size.
#[allow(clippy::too_many_arguments)]
async fn combine(
    shared: &Shared,
    db: usize,
    op: &[u8],
    keys: &[&[u8]],
    dst: Option<&[u8]>,
    now: u64,
    max: usize,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    let store = &*shared.store;
    let mut sets = Vec::with_capacity(keys.len());
    for k in keys {
        let Ok(s) = read(store, db, k, now, r).await? else {
            return Ok(());
        };
        sets.push(s);
    }
    let result = combined(op, &sets);
    let Some(dst) = dst else {
        reply_set(r, &result);
        return Ok(());
    };
    let n = result.len();
    let set = Set::of(result, max);
    let (_, done) = store
        .update(db, dst, now, |_| (set_change(&set), ()))
        .await?;
    let event = match op {
        b"SINTER" => "sinterstore",
        b"SUNION" => "sunionstore",
        _ => "sdiffstore",
    };
    shared.notify_stored(notify::SET, event, db, dst, n, done);
    r.integer(n as i64);
    Ok(())
}

/// The change storing `s` as a new key (no expiry), or deleting the key
/// when `s` is empty.
fn set_change(s: &Set) -> Change {
    Set {
        large: s.large,
        members: s.members.clone(),
    }
    .change(0)
}

/// The members of `op` (SINTER, SUNION, SDIFF) over `sets` (missing keys
/// are empty sets), each once.
fn combined(op: &[u8], sets: &[Option<Set>]) -> Vec<Vec<u8>> {
    let empty = Set::default();
    let all: Vec<&Set> = sets.iter().map(|s| s.as_ref().unwrap_or(&empty)).collect();
    match op {
        b"SINTER" => {
            let mut by_size = all.clone();
            by_size.sort_by_key(|s| s.members.len());
            let Some((first, rest)) = by_size.split_first() else {
                return Vec::new();
            };
            let rest: Vec<HashSet<&[u8]>> = rest.iter().map(|s| members_of(s)).collect();
            first
                .members
                .iter()
                .filter(|m| rest.iter().all(|s| s.contains(m.as_slice())))
                .cloned()
                .collect()
        }
        b"SUNION" => {
            let mut seen = HashSet::new();
            let mut out = Vec::new();
            for s in &all {
                for m in &s.members {
                    if seen.insert(m.as_slice()) {
                        out.push(m.clone());
                    }
                }
            }
            out
        }
        _ => {
            let Some((first, rest)) = all.split_first() else {
                return Vec::new();
            };
            let rest: Vec<HashSet<&[u8]>> = rest.iter().map(|s| members_of(s)).collect();
            first
                .members
                .iter()
                .filter(|m| !rest.iter().any(|s| s.contains(m.as_slice())))
                .cloned()
                .collect()
        }
    }
}

fn members_of(s: &Set) -> HashSet<&[u8]> {
    s.members.iter().map(Vec::as_slice).collect()
}

/// SINTERCARD numkeys key [key …] [LIMIT limit].
async fn intercard(
    store: &RespStore,
    db: usize,
    args: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    if !arity(args, 3, None, r) {
        return Ok(());
    }
    let numkeys = match string2ll(args[1]) {
        Some(n) if n > 0 => n as usize,
        Some(_) => {
            r.error("ERR numkeys should be greater than 0");
            return Ok(());
        }
        None => {
            r.error("ERR numkeys should be greater than 0");
            return Ok(());
        }
    };
    if numkeys > args.len() - 2 {
        r.error("ERR Number of keys can't be greater than number of args");
        return Ok(());
    }
    let keys = &args[2..2 + numkeys];
    let mut limit = 0u64;
    let mut i = 2 + numkeys;
    while i < args.len() {
        if args[i].eq_ignore_ascii_case(b"LIMIT") && i + 1 < args.len() {
            match string2ll(args[i + 1]) {
                Some(n) if n >= 0 => limit = n as u64,
                _ => {
                    r.error("ERR LIMIT can't be negative");
                    return Ok(());
                }
            }
            i += 2;
        } else {
            r.error(errors::SYNTAX);
            return Ok(());
        }
    }
    let mut sets = Vec::with_capacity(keys.len());
    for k in keys {
        let Ok(s) = read(store, db, k, now, r).await? else {
            return Ok(());
        };
        sets.push(s);
    }
    let n = combined(b"SINTER", &sets).len() as u64;
    r.integer(if limit == 0 { n } else { n.min(limit) } as i64);
    Ok(())
}

/// The commands that read one set.
async fn read_command(
    store: &RespStore,
    db: usize,
    name: &[u8],
    args: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    let (min, max) = match name {
        b"SISMEMBER" => (3, Some(3)),
        b"SMISMEMBER" => (3, None),
        b"SCARD" | b"SMEMBERS" => (2, Some(2)),
        b"SRANDMEMBER" => (2, None),
        _ => (3, None),
    };
    if !arity(args, min, max, r) {
        return Ok(());
    }
    let mut count = None;
    let mut cursor_ok = true;
    let mut cursor = 0;
    match name {
        b"SRANDMEMBER" if args.len() > 3 => {
            r.error(errors::SYNTAX);
            return Ok(());
        }
        b"SRANDMEMBER" if args.len() == 3 => match string2ll(args[2]) {
            Some(i64::MIN) => {
                r.error(
                    "ERR value is out of range, value must between -9223372036854775807 \
                     and 9223372036854775807",
                );
                return Ok(());
            }
            Some(n) => count = Some(n),
            None => {
                r.error(errors::NOT_INTEGER);
                return Ok(());
            }
        },
        b"SSCAN" => match super::scan::parse_cursor(args[2]) {
            Some(c) => cursor = c,
            None => cursor_ok = false,
        },
        _ => {}
    }
    if !cursor_ok {
        r.error("ERR invalid cursor");
        return Ok(());
    }
    if name == b"SSCAN" {
        // A paged set: a few buckets per call (`paged_scan.rs`).
        let v = store.get(db, args[1], now).await?;
        if v.is_some_and(|v| v.kind() == Kind::Set && is_paged(v.data())) {
            let (meta_of, member_alone) = (hpages::Meta::decode, |_: &[u8]| Ok(None));
            let done = paged_scan::answer_step(
                store,
                Kind::Set,
                db,
                args,
                cursor,
                now,
                meta_of,
                r,
                member_alone,
            );
            if done.await? {
                return Ok(());
            }
        }
    }
    if matches!(name, b"SISMEMBER" | b"SMISMEMBER" | b"SCARD") {
        // A compact set: its record's bytes; a paged one: the members'
        // buckets, or the metadata's count.
        let members: &[&[u8]] = if name == b"SCARD" { &[] } else { &args[2..] };
        // Answered from this one read but when a paged set changed
        // while its buckets were read (then `read` below).
        match store.get(db, args[1], now).await? {
            None => {
                answer_membership(name, 0, members, |_, _| false, r);
                return Ok(());
            }
            Some(v) if v.kind() != Kind::Set => {
                r.error(errors::WRONGTYPE);
                return Ok(());
            }
            Some(v) if !is_paged(v.data()) => {
                return membership_compact(name, v.data(), members, r);
            }
            Some(_) => {
                let found = hpages::read(store, Kind::Set, db, args[1], now, Some(members)).await?;
                if let Some(hpages::Read::Fields(vals, count)) = found {
                    answer_membership(name, count, members, |i, _| vals[i].is_some(), r);
                    return Ok(());
                }
            }
        }
    }
    let Ok(s) = read(store, db, args[1], now, r).await? else {
        return Ok(());
    };
    match name {
        b"SCARD" | b"SISMEMBER" | b"SMISMEMBER" => {
            let count = s.as_ref().map_or(0, |s| s.members.len() as u64);
            let is_member = |_, m: &[u8]| s.as_ref().is_some_and(|s| s.contains(m));
            answer_membership(name, count, &args[2..], is_member, r);
        }
        b"SMEMBERS" => reply_set(r, &s.map(|s| s.members).unwrap_or_default()),
        b"SRANDMEMBER" => randmember(s, count, r),
        _ => {
            let Some(s) = s else {
                r.array(2);
                r.bulk(b"0");
                r.array(0);
                return Ok(());
            };
            let opts = match ScanOptions::parse(&args[3..], false) {
                Ok(o) => o,
                Err(msg) => {
                    r.error(msg);
                    return Ok(());
                }
            };
            // The whole set in one reply, cursor 0 (as Redis for an
            // intset).
            let hits: Vec<&Vec<u8>> = s.members.iter().filter(|m| opts.matches(m)).collect();
            r.array(2);
            r.bulk(b"0");
            r.array(hits.len());
            for m in hits {
                r.bulk(m);
            }
        }
    }
    Ok(())
}

/// SRANDMEMBER key [count] once the key is read.
fn randmember(s: Option<Set>, count: Option<i64>, r: &mut Reply<'_>) {
    let mut rng = rand::thread_rng();
    let members = s.map(|s| s.members).unwrap_or_default();
    let Some(n) = count else {
        match members.len() {
            0 => r.null(),
            len => r.bulk(&members[rng.gen_range(0..len)]),
        }
        return;
    };
    let chosen = super::args::random_picks(members.len(), n);
    r.array(chosen.len());
    for i in chosen {
        r.bulk(&members[i]);
    }
}
