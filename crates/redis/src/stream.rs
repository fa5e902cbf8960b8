//! The stream type (Redis 7.0's `t_stream.c`), without consumer groups
//! yet: XADD, XLEN, XRANGE, XREVRANGE, XDEL, XTRIM, XREAD (COUNT, BLOCK,
//! `$`), XSETID, over the compact layout of `compact.rs` (one record per
//! stream).
//!
//! Entries are kept in nodes as Redis keeps them in the listpacks of its
//! radix tree, because approximate trimming (`MAXLEN ~`, `MINID ~`)
//! removes whole nodes only: a node takes new entries until it holds
//! `stream-node-max-entries` (live and deleted), and goes away when its
//! last live entry does. Redis also starts a node when the listpack would
//! pass `stream-node-max-bytes`; nvdepot does not model listpack sizes,
//! so with large entries `~` may keep a different number of entries than
//! Redis would (both keep at least the threshold; docs/REDIS.md).
//!
//! Record data after the shape byte: a header item (last ID 16 bytes,
//! entries added u64, max deleted ID 16 bytes, node count u32, group
//! count u32, all LE), then per node an item (deleted u64, the ID of
//! its last entry appended 16 bytes, entry count u32) and per entry an ID item (16 bytes), a field count item (u32) and
//! the fields and values.

use nvdepot_cache::resp::{Change, Kind, RespStore, Value};
use nvdepot_cache::Error;
use nvdepot_resp::{errors, Reply};

use super::compact::Compact;
use super::face::{arity, Shared};

/// A stream entry ID.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Id {
    pub ms: u64,
    pub seq: u64,
}

impl Id {
    const MAX: Id = Id {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    fn text(self) -> Vec<u8> {
        format!("{}-{}", self.ms, self.seq).into_bytes()
    }

    fn bytes(self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.ms.to_le_bytes());
        b[8..].copy_from_slice(&self.seq.to_le_bytes());
        b
    }

    fn from_bytes(b: &[u8]) -> Option<Id> {
        Some(Id {
            ms: u64::from_le_bytes(b.get(..8)?.try_into().ok()?),
            seq: u64::from_le_bytes(b.get(8..16)?.try_into().ok()?),
        })
    }

    fn next(self) -> Option<Id> {
        match self.seq.checked_add(1) {
            Some(seq) => Some(Id { ms: self.ms, seq }),
            None => self.ms.checked_add(1).map(|ms| Id { ms, seq: 0 }),
        }
    }

    fn prev(self) -> Option<Id> {
        match self.seq.checked_sub(1) {
            Some(seq) => Some(Id { ms: self.ms, seq }),
            None => self.ms.checked_sub(1).map(|ms| Id { ms, seq: u64::MAX }),
        }
    }
}

pub const INVALID_ID: &str = "ERR Invalid stream ID specified as stream command argument";

/// Redis's `string2ull`: `string2ll` when it reads a non-negative number,
/// else `strtoull` over the whole string (so ` 1` and `+1` read as 1).
fn string2ull(a: &[u8]) -> Option<u64> {
    if let Some(n) = nvdepot_resp::string2ll(a) {
        return u64::try_from(n).ok();
    }
    if a.is_empty() {
        return None;
    }
    let c = std::ffi::CString::new(a).ok()?;
    let mut end: *mut libc::c_char = std::ptr::null_mut();
    // SAFETY: `c` is NUL-terminated and outlives the call; strtoull
    // writes only `end` (into `c`) and this thread's errno.
    let (v, err) = unsafe {
        *libc::__errno_location() = 0;
        let v = libc::strtoull(c.as_ptr(), &mut end, 10);
        (v, *libc::__errno_location())
    };
    let consumed = end as usize - c.as_ptr() as usize;
    (err == 0 && consumed == a.len()).then_some(v)
}

/// How an ID argument may be written.
#[derive(Clone, Copy, PartialEq, Eq)]
enum IdForm {
    /// `-` and `+` allowed.
    Loose,
    /// Not `-` or `+` (Redis's "strict").
    Strict,
}

/// Parses an ID as Redis's `streamGenericParseIDOrReply`: `ms-seq`, or
/// `ms` (seq `missing_seq`); `Some(None)` in the seq slot for `ms-*`
/// when `star` (XADD).
fn parse_id(a: &[u8], missing_seq: u64, form: IdForm, star: bool) -> Option<(Id, bool)> {
    if a.len() > 127 {
        return None;
    }
    // Redis copies into a C string: a NUL ends it.
    let a = &a[..a.iter().position(|&b| b == 0).unwrap_or(a.len())];
    if form == IdForm::Strict && (a == b"-" || a == b"+") {
        return None;
    }
    if a == b"-" {
        return Some((Id::default(), true));
    }
    if a == b"+" {
        return Some((Id::MAX, true));
    }
    let (ms, seq) = match a.iter().position(|&b| b == b'-') {
        Some(i) => (&a[..i], Some(&a[i + 1..])),
        None => (a, None),
    };
    let ms = string2ull(ms)?;
    match seq {
        Some(b"*") if star => Some((Id { ms, seq: 0 }, false)),
        Some(s) => Some((
            Id {
                ms,
                seq: string2ull(s)?,
            },
            true,
        )),
        None => Some((
            Id {
                ms,
                seq: missing_seq,
            },
            true,
        )),
    }
}

/// An interval end of XRANGE (`(` exclusive), as
/// `streamParseIntervalIDOrReply`.
fn parse_interval(a: &[u8], missing_seq: u64) -> Option<(Id, bool)> {
    if a.len() > 1 && a[0] == b'(' {
        let (id, _) = parse_id(&a[1..], missing_seq, IdForm::Strict, false)?;
        Some((id, true))
    } else {
        let (id, _) = parse_id(a, missing_seq, IdForm::Loose, false)?;
        Some((id, false))
    }
}

#[derive(Clone, Debug, Default)]
struct Entry {
    id: Id,
    fields: Vec<(Vec<u8>, Vec<u8>)>,
}

#[derive(Clone, Debug, Default)]
struct Node {
    /// Entries deleted from it (they still count toward its size).
    deleted: u64,
    /// The ID of the last entry appended to it, deleted or not (what
    /// Redis's MINID trimming compares: deleted entries stay in a
    /// listpack).
    last: Id,
    entries: Vec<Entry>,
}

/// A stream as its record holds it.
#[derive(Clone, Debug, Default)]
struct Stream {
    last: Id,
    added: u64,
    max_deleted: Id,
    nodes: Vec<Node>,
}

enum Fail {
    WrongType,
    Store(Error),
}

fn bad(what: &str) -> Error {
    Error::Envelope(format!("stream record: {what}"))
}

fn u32_of(b: &[u8]) -> Result<u32, Error> {
    Ok(u32::from_le_bytes(
        b.try_into().map_err(|_| bad("a count is 4 bytes"))?,
    ))
}

fn decode(data: &[u8]) -> Result<Stream, Error> {
    let c = Compact::decode(data)?;
    let mut it = c.items.into_iter();
    let head = it.next().ok_or_else(|| bad("no header"))?;
    if head.len() != 48 {
        return Err(bad("header size"));
    }
    let id = |b: &[u8]| Id::from_bytes(b).ok_or_else(|| bad("an ID"));
    let mut s = Stream {
        last: id(&head[0..16])?,
        added: u64::from_le_bytes(head[16..24].try_into().expect("8 bytes")),
        max_deleted: id(&head[24..40])?,
        nodes: Vec::new(),
    };
    let nodes = u32_of(&head[40..44])?;
    let groups = u32_of(&head[44..48])?;
    if groups != 0 {
        return Err(bad("consumer groups are not known to this version"));
    }
    for _ in 0..nodes {
        let n = it.next().ok_or_else(|| bad("missing node"))?;
        if n.len() != 28 {
            return Err(bad("node header size"));
        }
        let mut node = Node {
            deleted: u64::from_le_bytes(n[..8].try_into().expect("8 bytes")),
            last: id(&n[8..24])?,
            entries: Vec::new(),
        };
        for _ in 0..u32_of(&n[24..])? {
            let eid = id(&it.next().ok_or_else(|| bad("missing entry"))?)?;
            let count = u32_of(&it.next().ok_or_else(|| bad("missing field count"))?)?;
            let mut fields = Vec::with_capacity(count as usize);
            for _ in 0..count {
                let f = it.next().ok_or_else(|| bad("missing field"))?;
                let v = it.next().ok_or_else(|| bad("missing value"))?;
                fields.push((f, v));
            }
            node.entries.push(Entry { id: eid, fields });
        }
        s.nodes.push(node);
    }
    if it.next().is_some() {
        return Err(bad("bytes after the last node"));
    }
    Ok(s)
}

impl Stream {
    fn encode(&self) -> Vec<u8> {
        let mut items = Vec::new();
        let mut head = Vec::with_capacity(48);
        head.extend_from_slice(&self.last.bytes());
        head.extend_from_slice(&self.added.to_le_bytes());
        head.extend_from_slice(&self.max_deleted.bytes());
        head.extend_from_slice(&(self.nodes.len() as u32).to_le_bytes());
        head.extend_from_slice(&0u32.to_le_bytes());
        items.push(head);
        for n in &self.nodes {
            let mut h = n.deleted.to_le_bytes().to_vec();
            h.extend_from_slice(&n.last.bytes());
            h.extend_from_slice(&(n.entries.len() as u32).to_le_bytes());
            items.push(h);
            for e in &n.entries {
                items.push(e.id.bytes().to_vec());
                items.push((e.fields.len() as u32).to_le_bytes().to_vec());
                for (f, v) in &e.fields {
                    items.push(f.clone());
                    items.push(v.clone());
                }
            }
        }
        Compact { large: true, items }.encode()
    }

    fn len(&self) -> usize {
        self.nodes.iter().map(|n| n.entries.len()).sum()
    }

    fn entries(&self) -> impl DoubleEndedIterator<Item = &Entry> {
        self.nodes.iter().flat_map(|n| n.entries.iter())
    }

    /// Appends an entry (its ID checked by the caller), starting a node
    /// as Redis does by count.
    fn append(&mut self, e: Entry, node_entries: u64) {
        let full = self.nodes.last().is_none_or(|n| {
            node_entries != 0 && n.entries.len() as u64 + n.deleted >= node_entries
        });
        if full {
            self.nodes.push(Node::default());
        }
        self.last = e.id;
        self.added += 1;
        let node = self.nodes.last_mut().expect("a node");
        node.last = e.id;
        node.entries.push(e);
    }

    /// Deletes entry `id`; true if it was there.
    fn delete(&mut self, id: Id) -> bool {
        for ni in 0..self.nodes.len() {
            let node = &mut self.nodes[ni];
            if let Some(i) = node.entries.iter().position(|e| e.id == id) {
                node.entries.remove(i);
                node.deleted += 1;
                if node.entries.is_empty() {
                    self.nodes.remove(ni);
                }
                if id > self.max_deleted {
                    self.max_deleted = id;
                }
                return true;
            }
        }
        false
    }

    /// Redis's `streamTrim`: entries removed.
    fn trim(&mut self, t: &Trim) -> u64 {
        let mut removed = 0u64;
        while let Some(node) = self.nodes.first() {
            let len = self.len() as u64;
            if let TrimBy::MaxLen(max) = t.by {
                if len <= max {
                    break;
                }
            }
            let entries = node.entries.len() as u64;
            if t.limit != 0 && removed + entries > t.limit {
                break;
            }
            let whole = match t.by {
                TrimBy::MaxLen(max) => len - entries >= max,
                TrimBy::MinId(min) => node.last < min,
            };
            if whole {
                self.nodes.remove(0);
                removed += entries;
                continue;
            }
            if t.approx {
                break;
            }
            let node = &mut self.nodes[0];
            let mut cut = 0;
            match t.by {
                TrimBy::MaxLen(max) => {
                    while len - cut > max && (cut as usize) < node.entries.len() {
                        cut += 1;
                    }
                }
                TrimBy::MinId(min) => {
                    while (cut as usize) < node.entries.len() && node.entries[cut as usize].id < min
                    {
                        cut += 1;
                    }
                }
            }
            node.entries.drain(..cut as usize);
            node.deleted += cut;
            removed += cut;
            break;
        }
        removed
    }
}

#[derive(Clone, Copy)]
enum TrimBy {
    MaxLen(u64),
    MinId(Id),
}

/// A trimming request (XADD's or XTRIM's).
#[derive(Clone, Copy)]
struct Trim {
    by: TrimBy,
    approx: bool,
    /// Most entries to remove (0: no limit).
    limit: u64,
}

/// XADD's and XTRIM's parsed arguments.
struct AddArgs {
    trim: Option<Trim>,
    nomkstream: bool,
    /// The ID argument's index (XADD), and the ID: `None` for `*`, else
    /// the ID and whether its seq was given (`ms-*` not).
    id_at: usize,
    id: Option<(Id, bool)>,
}

/// Redis's `streamParseAddOrTrimArgsOrReply`.
fn parse_add_or_trim(
    args: &[&[u8]],
    xadd: bool,
    node_entries: i64,
) -> Result<AddArgs, &'static str> {
    let mut out = AddArgs {
        trim: None,
        nomkstream: false,
        id_at: args.len(),
        id: None,
    };
    let mut limit: Option<i64> = None;
    let mut i = 2;
    while i < args.len() {
        let more = args.len() - 1 - i;
        let opt = args[i];
        if xadd && opt == b"*" {
            out.id_at = i;
            break;
        }
        let upper = opt.to_ascii_uppercase();
        match upper.as_slice() {
            b"MAXLEN" | b"MINID" if more > 0 => {
                if out.trim.is_some() {
                    return Err("ERR syntax error, MAXLEN and MINID options at the same time are not compatible");
                }
                let mut approx = false;
                let next = args[i + 1];
                if more >= 2 && next == b"~" {
                    approx = true;
                    i += 1;
                } else if more >= 2 && next == b"=" {
                    i += 1;
                }
                let by = if upper == b"MAXLEN" {
                    let n = nvdepot_resp::string2ll(args[i + 1]).ok_or(errors::NOT_INTEGER)?;
                    if n < 0 {
                        return Err("ERR The MAXLEN argument must be >= 0.");
                    }
                    TrimBy::MaxLen(n as u64)
                } else {
                    let (id, _) =
                        parse_id(args[i + 1], 0, IdForm::Strict, false).ok_or(INVALID_ID)?;
                    TrimBy::MinId(id)
                };
                i += 1;
                out.trim = Some(Trim {
                    by,
                    approx,
                    limit: 0,
                });
            }
            b"LIMIT" if more > 0 => {
                let n = nvdepot_resp::string2ll(args[i + 1]).ok_or(errors::NOT_INTEGER)?;
                if n < 0 {
                    return Err("ERR The LIMIT argument must be >= 0.");
                }
                limit = Some(n);
                i += 1;
            }
            b"NOMKSTREAM" if xadd => out.nomkstream = true,
            _ if xadd => {
                out.id = Some(parse_id(opt, 0, IdForm::Strict, true).ok_or(INVALID_ID)?);
                out.id_at = i;
                break;
            }
            _ => return Err(errors::SYNTAX),
        }
        i += 1;
    }
    if limit.is_some_and(|l| l != 0) && out.trim.is_none() {
        return Err(
            "ERR syntax error, LIMIT cannot be used without specifying a trimming strategy",
        );
    }
    if !xadd && out.trim.is_none() {
        return Err("ERR syntax error, XTRIM must be called with a trimming strategy");
    }
    if let Some(t) = &mut out.trim {
        match limit {
            Some(_) if !t.approx => {
                return Err("ERR syntax error, LIMIT cannot be used without the special ~ option")
            }
            Some(l) => t.limit = l as u64,
            None if t.approx => {
                let l = 100i64.saturating_mul(node_entries);
                t.limit = if l <= 0 || l > 1_000_000 {
                    1_000_000
                } else {
                    l as u64
                };
            }
            None => t.limit = 0,
        }
    }
    Ok(out)
}

fn stream_of(v: Option<&Value>) -> Result<Option<Stream>, Fail> {
    let Some(v) = v else { return Ok(None) };
    if v.kind() != Kind::Stream {
        return Err(Fail::WrongType);
    }
    decode(v.data()).map(Some).map_err(Fail::Store)
}

/// Whether `data` is a stream record's data.
pub fn check(data: &[u8]) -> Result<(), Error> {
    decode(data).map(|_| ())
}

fn change(s: &Stream, expire_at_ms: u64) -> Change {
    // A stream stays when emptied (Redis keeps an empty stream).
    Change::Put {
        kind: Kind::Stream,
        data: s.encode(),
        expire_at_ms,
    }
}

/// One atomic update of stream `key` (`None` when missing).
async fn update<T>(
    store: &RespStore,
    db: usize,
    key: &[u8],
    now: u64,
    mut apply: impl FnMut(&mut Option<Stream>) -> Result<(bool, T), &'static str>,
) -> Result<Result<T, &'static str>, Error> {
    let mut damage = None;
    let (out, _) = store
        .update(db, key, now, |cur| {
            let (mut s, at) = match stream_of(cur) {
                Ok(s) => (s, cur.map_or(0, Value::expire_at_ms)),
                Err(Fail::WrongType) => return (Change::Keep, Err(errors::WRONGTYPE)),
                Err(Fail::Store(e)) => {
                    damage = Some(e);
                    return (Change::Keep, Err(""));
                }
            };
            match apply(&mut s) {
                Ok((true, t)) => match &s {
                    Some(s) => (change(s, at), Ok(t)),
                    None => (Change::Delete, Ok(t)),
                },
                Ok((false, t)) => (Change::Keep, Ok(t)),
                Err(msg) => (Change::Keep, Err(msg)),
            }
        })
        .await?;
    match damage {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

async fn read(
    store: &RespStore,
    db: usize,
    key: &[u8],
    now: u64,
    r: &mut Reply<'_>,
) -> Result<Result<Option<Stream>, ()>, Error> {
    let v = store.get(db, key, now).await?;
    match stream_of(v.as_ref()) {
        Ok(s) => Ok(Ok(s)),
        Err(Fail::WrongType) => {
            r.error(errors::WRONGTYPE);
            Ok(Err(()))
        }
        Err(Fail::Store(e)) => Err(e),
    }
}

fn reply_entry(r: &mut Reply<'_>, e: &Entry) {
    r.array(2);
    r.bulk(&e.id.text());
    r.array(e.fields.len() * 2);
    for (f, v) in &e.fields {
        r.bulk(f);
        r.bulk(v);
    }
}

fn node_entries(shared: &Shared) -> i64 {
    shared.tunables.value("stream-node-max-entries")
}

/// Runs `name` if it is a stream command (`None` if not).
pub async fn execute(
    shared: &Shared,
    db: usize,
    name: &[u8],
    args: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> Option<Result<(), Error>> {
    let store = &*shared.store;
    let per_node = node_entries(shared);
    let done = match name {
        b"XADD" => {
            if !arity(args, 5, None, r) {
                return Some(Ok(()));
            }
            let a = match parse_add_or_trim(args, true, per_node) {
                Ok(a) => a,
                Err(msg) => {
                    r.error(msg);
                    return Some(Ok(()));
                }
            };
            // (Options may use every argument: then no fields, an arity
            // error as in Redis.)
            let fields = args.get(a.id_at + 1..).unwrap_or(&[]);
            if fields.len() < 2 || !fields.len().is_multiple_of(2) {
                r.error(errors::wrong_arity(args[0]));
                return Some(Ok(()));
            }
            if let Some((id, true)) = a.id {
                if id == Id::default() {
                    r.error("ERR The ID specified in XADD must be greater than 0-0");
                    return Some(Ok(()));
                }
            }
            let per_node = u64::try_from(per_node).unwrap_or(0);
            update(store, db, args[1], now, |s| {
                if s.is_none() && a.nomkstream {
                    return Ok((false, None));
                }
                let s = s.get_or_insert_with(Stream::default);
                if s.last == Id::MAX {
                    return Err("ERR The stream has exhausted the last possible ID, unable to add more items");
                }
                let id = match a.id {
                    None => {
                        let ms = now.max(s.last.ms);
                        if ms == s.last.ms {
                            s.last.next().expect("not exhausted")
                        } else {
                            Id { ms, seq: 0 }
                        }
                    }
                    Some((id, true)) => id,
                    Some((id, false)) => {
                        // ms-*: the next sequence of that millisecond.
                        if id.ms == s.last.ms {
                            match s.last.seq.checked_add(1) {
                                Some(seq) => Id { ms: id.ms, seq },
                                None => return Err("ERR The ID specified in XADD is equal or smaller than the target stream top item"),
                            }
                        } else {
                            id
                        }
                    }
                };
                if id <= s.last {
                    return Err(
                        "ERR The ID specified in XADD is equal or smaller than the target stream top item",
                    );
                }
                let e = Entry {
                    id,
                    fields: fields.chunks(2).map(|p| (p[0].to_vec(), p[1].to_vec())).collect(),
                };
                s.append(e, per_node);
                if let Some(t) = &a.trim {
                    s.trim(t);
                }
                Ok((true, Some(id)))
            })
            .await
            .map(|out| {
                out.map(|id| match id {
                    Some(id) => r.bulk(&id.text()),
                    None => r.null(),
                })
            })
        }
        b"XTRIM" => {
            if !arity(args, 4, None, r) {
                return Some(Ok(()));
            }
            let a = match parse_add_or_trim(args, false, per_node) {
                Ok(a) => a,
                Err(msg) => {
                    r.error(msg);
                    return Some(Ok(()));
                }
            };
            let trim = a.trim.expect("XTRIM has a strategy");
            update(store, db, args[1], now, |s| {
                let Some(s) = s else { return Ok((false, 0)) };
                let n = s.trim(&trim);
                Ok((n > 0, n as i64))
            })
            .await
            .map(|out| out.map(|n| r.integer(n)))
        }
        b"XDEL" => {
            if !arity(args, 3, None, r) {
                return Some(Ok(()));
            }
            // The key first (a missing one answers 0 whatever the IDs).
            let exists = match read(store, db, args[1], now, r).await {
                Ok(Ok(s)) => s.is_some(),
                Ok(Err(())) => return Some(Ok(())),
                Err(e) => return Some(Err(e)),
            };
            if !exists {
                r.integer(0);
                return Some(Ok(()));
            }
            let mut ids = Vec::new();
            for a in &args[2..] {
                match parse_id(a, 0, IdForm::Strict, false) {
                    Some((id, _)) => ids.push(id),
                    None => {
                        r.error(INVALID_ID);
                        return Some(Ok(()));
                    }
                }
            }
            update(store, db, args[1], now, |s| {
                let Some(s) = s else { return Ok((false, 0)) };
                let n = ids.iter().filter(|&&id| s.delete(id)).count();
                Ok((n > 0, n as i64))
            })
            .await
            .map(|out| out.map(|n| r.integer(n)))
        }
        b"XSETID" => return Some(setid(store, db, args, now, r).await),
        b"XLEN" | b"XRANGE" | b"XREVRANGE" => {
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

/// XSETID key last-id [ENTRIESADDED n] [MAXDELETEDID id].
async fn setid(
    store: &RespStore,
    db: usize,
    args: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    if !arity(args, 3, None, r) {
        return Ok(());
    }
    let Some((id, _)) = parse_id(args[2], 0, IdForm::Strict, false) else {
        r.error(INVALID_ID);
        return Ok(());
    };
    let (mut added, mut max_deleted) = (None, None);
    let mut i = 3;
    while i < args.len() {
        let Some(&v) = args.get(i + 1) else {
            r.error(errors::SYNTAX);
            return Ok(());
        };
        match args[i].to_ascii_uppercase().as_slice() {
            b"ENTRIESADDED" => match nvdepot_resp::string2ll(v) {
                Some(n) if n >= 0 => added = Some(n as u64),
                Some(_) => {
                    r.error("ERR entries_added must be positive");
                    return Ok(());
                }
                None => {
                    r.error(errors::NOT_INTEGER);
                    return Ok(());
                }
            },
            b"MAXDELETEDID" => match parse_id(v, 0, IdForm::Strict, false) {
                Some((m, _)) => {
                    if id < m {
                        r.error(
                            "ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id",
                        );
                        return Ok(());
                    }
                    max_deleted = Some(m);
                }
                None => {
                    r.error(INVALID_ID);
                    return Ok(());
                }
            },
            _ => {
                r.error(errors::SYNTAX);
                return Ok(());
            }
        }
        i += 2;
    }
    let out = update(store, db, args[1], now, |s| {
        let Some(s) = s else {
            return Err(errors::NO_SUCH_KEY);
        };
        let len = s.len() as u64;
        if len > 0 {
            let top = s.entries().next_back().expect("not empty").id;
            if id < top {
                return Err("ERR The ID specified in XSETID is smaller than the target stream top item");
            }
            if added.is_some_and(|a| len > a) {
                return Err(
                    "ERR The entries_added specified in XSETID is smaller than the target stream length",
                );
            }
        }
        s.last = id;
        if let Some(a) = added {
            s.added = a;
        }
        if let Some(m) = max_deleted {
            s.max_deleted = m;
        }
        Ok((true, ()))
    })
    .await?;
    match out {
        Ok(()) => r.ok(),
        Err(msg) => r.error(msg),
    }
    Ok(())
}

async fn read_command(
    store: &RespStore,
    db: usize,
    name: &[u8],
    args: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    if name == b"XLEN" {
        if !arity(args, 2, Some(2), r) {
            return Ok(());
        }
        let Ok(s) = read(store, db, args[1], now, r).await? else {
            return Ok(());
        };
        r.integer(s.map_or(0, |s| s.len() as i64));
        return Ok(());
    }
    if !arity(args, 4, None, r) {
        return Ok(());
    }
    let rev = name == b"XREVRANGE";
    let (start_arg, end_arg) = if rev {
        (args[3], args[2])
    } else {
        (args[2], args[3])
    };
    let Some((mut start, startex)) = parse_interval(start_arg, 0) else {
        r.error(INVALID_ID);
        return Ok(());
    };
    if startex {
        match start.next() {
            Some(n) => start = n,
            None => {
                r.error("ERR invalid start ID for the interval");
                return Ok(());
            }
        }
    }
    let Some((mut end, endex)) = parse_interval(end_arg, u64::MAX) else {
        r.error(INVALID_ID);
        return Ok(());
    };
    if endex {
        match end.prev() {
            Some(p) => end = p,
            None => {
                r.error("ERR invalid end ID for the interval");
                return Ok(());
            }
        }
    }
    let mut count: i64 = -1;
    let mut j = 4;
    while j < args.len() {
        if args[j].eq_ignore_ascii_case(b"COUNT") && j + 1 < args.len() {
            let Some(n) = nvdepot_resp::string2ll(args[j + 1]) else {
                r.error(errors::NOT_INTEGER);
                return Ok(());
            };
            count = n.max(0);
            j += 2;
        } else {
            r.error(errors::SYNTAX);
            return Ok(());
        }
    }
    let Ok(s) = read(store, db, args[1], now, r).await? else {
        return Ok(());
    };
    let Some(s) = s else {
        r.array(0);
        return Ok(());
    };
    if count == 0 {
        r.null_array();
        return Ok(());
    }
    let limit = if count < 0 {
        usize::MAX
    } else {
        count as usize
    };
    let hits: Vec<&Entry> = if rev {
        s.entries()
            .rev()
            .filter(|e| e.id >= start && e.id <= end)
            .take(limit)
            .collect()
    } else {
        s.entries()
            .filter(|e| e.id >= start && e.id <= end)
            .take(limit)
            .collect()
    };
    r.array(hits.len());
    for e in hits {
        reply_entry(r, e);
    }
    Ok(())
}

/// XREAD's arguments.
pub struct ReadArgs<'a> {
    pub count: usize,
    pub block: Option<Option<std::time::Duration>>,
    pub keys: Vec<&'a [u8]>,
    /// The ID arguments, `$` included.
    pub ids: Vec<&'a [u8]>,
}

/// Parses XREAD's arguments, or the error to answer.
pub fn parse_read<'a>(args: &[&'a [u8]]) -> Result<ReadArgs<'a>, String> {
    let mut out = ReadArgs {
        count: 0,
        block: None,
        keys: Vec::new(),
        ids: Vec::new(),
    };
    let mut i = 1;
    while i < args.len() {
        let more = args.len() - 1 - i;
        match args[i].to_ascii_uppercase().as_slice() {
            b"BLOCK" if more > 0 => {
                i += 1;
                let Some(ms) = nvdepot_resp::string2ll(args[i]) else {
                    return Err("ERR timeout is not an integer or out of range".into());
                };
                if ms < 0 {
                    return Err("ERR timeout is negative".into());
                }
                out.block = Some((ms > 0).then(|| std::time::Duration::from_millis(ms as u64)));
            }
            b"COUNT" if more > 0 => {
                i += 1;
                let Some(n) = nvdepot_resp::string2ll(args[i]) else {
                    return Err(errors::NOT_INTEGER.into());
                };
                out.count = n.max(0) as usize;
            }
            b"STREAMS" if more > 0 => {
                let rest = &args[i + 1..];
                if !rest.len().is_multiple_of(2) {
                    return Err(
                        "ERR Unbalanced XREAD list of streams: for each stream key an ID \
                                or '$' must be specified."
                            .into(),
                    );
                }
                let half = rest.len() / 2;
                out.keys = rest[..half].to_vec();
                out.ids = rest[half..].to_vec();
                return Ok(out);
            }
            _ => return Err(errors::SYNTAX.into()),
        }
        i += 1;
    }
    Err(errors::SYNTAX.into())
}

/// One try of XREAD: `Ok(Ok(None))` once its reply is written (entries,
/// or an error); `Ok(Ok(Some(ids)))` when no stream has entries past its
/// ID (nothing written), with `$` resolved to each stream's last ID, for
/// the retries of a blocked XREAD.
pub async fn try_read(
    store: &RespStore,
    db: usize,
    a: &ReadArgs<'_>,
    now: u64,
    r: &mut Reply<'_>,
) -> Result<Option<Vec<Vec<u8>>>, Error> {
    let mut streams = Vec::with_capacity(a.keys.len());
    let mut resolved = Vec::with_capacity(a.keys.len());
    for (k, id) in a.keys.iter().zip(&a.ids) {
        let Ok(s) = read(store, db, k, now, r).await? else {
            return Ok(None);
        };
        let after = if *id == b"$" {
            s.as_ref().map_or(Id::default(), |s| s.last)
        } else {
            match parse_id(id, 0, IdForm::Strict, false) {
                Some((id, _)) => id,
                None => {
                    r.error(INVALID_ID);
                    return Ok(None);
                }
            }
        };
        resolved.push(after.text());
        streams.push((k, s, after));
    }
    let limit = if a.count == 0 { usize::MAX } else { a.count };
    let found: Vec<(&[u8], Vec<&Entry>)> = streams
        .iter()
        .filter_map(|(k, s, after)| {
            let s = s.as_ref()?;
            let hits: Vec<&Entry> = s.entries().filter(|e| e.id > *after).take(limit).collect();
            (!hits.is_empty()).then_some((**k, hits))
        })
        .collect();
    if found.is_empty() {
        return Ok(Some(resolved));
    }
    // RESP3: a map of key to entries; RESP2: [key, entries] pairs.
    if r.resp3() {
        r.map(found.len());
    } else {
        r.array(found.len());
    }
    for (k, hits) in found {
        if !r.resp3() {
            r.array(2);
        }
        r.bulk(k);
        r.array(hits.len());
        for e in hits {
            reply_entry(r, e);
        }
    }
    Ok(None)
}
