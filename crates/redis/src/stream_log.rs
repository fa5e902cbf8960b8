//! A stream's entries as nvdepot keeps them (`stream.rs` has the
//! commands): IDs and their parsing as Redis's `t_stream.c`, the entries
//! in nodes as Redis's radix tree of listpacks holds them, the record's
//! encoding, and trimming.
//!
//! Entries are kept in nodes because approximate trimming (`MAXLEN ~`,
//! `MINID ~`) removes whole nodes only: a node takes new entries until it
//! holds `stream-node-max-entries` (live and deleted), and goes away when
//! its last live entry does. Redis also starts a node when the listpack
//! would pass `stream-node-max-bytes`; nvdepot does not model listpack
//! sizes, so with large entries `~` may keep a different number of
//! entries than Redis would (both keep at least the threshold;
//! docs/REDIS.md).
//!
//! Record data after the shape byte: a header item (last ID 16 bytes,
//! entries added u64, max deleted ID 16 bytes, node count u32, group
//! count u32, all LE), then per node an item (deleted u64, the ID of its
//! last entry appended 16 bytes, entry count u32) and per entry an ID item
//! (16 bytes), a field count item (u32) and the fields and values; then
//! per consumer group (by name): its name item, a header item (last
//! delivered ID 16 bytes, entries read u64 (all ones: unknown), pending
//! count u32, consumer count u32), per pending entry an item (ID 16 bytes,
//! last delivery Unix ms u64, deliveries u64) and its consumer's name
//! item, per consumer its name item and a last-seen Unix ms item (u64).

use std::collections::BTreeMap;

use nvdepot_cache::Error;
use nvdepot_resp::errors;

use super::compact::Compact;

/// A stream entry ID.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Id {
    pub ms: u64,
    pub seq: u64,
}

impl Id {
    pub(crate) const MAX: Id = Id {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    pub(crate) fn text(self) -> Vec<u8> {
        format!("{}-{}", self.ms, self.seq).into_bytes()
    }

    pub(crate) fn bytes(self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.ms.to_le_bytes());
        b[8..].copy_from_slice(&self.seq.to_le_bytes());
        b
    }

    pub(crate) fn from_bytes(b: &[u8]) -> Option<Id> {
        Some(Id {
            ms: u64::from_le_bytes(b.get(..8)?.try_into().ok()?),
            seq: u64::from_le_bytes(b.get(8..16)?.try_into().ok()?),
        })
    }

    pub(crate) fn next(self) -> Option<Id> {
        match self.seq.checked_add(1) {
            Some(seq) => Some(Id { ms: self.ms, seq }),
            None => self.ms.checked_add(1).map(|ms| Id { ms, seq: 0 }),
        }
    }

    pub(crate) fn prev(self) -> Option<Id> {
        match self.seq.checked_sub(1) {
            Some(seq) => Some(Id { ms: self.ms, seq }),
            None => self.ms.checked_sub(1).map(|ms| Id { ms, seq: u64::MAX }),
        }
    }
}

pub(crate) const INVALID_ID: &str = "ERR Invalid stream ID specified as stream command argument";

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
pub(crate) enum IdForm {
    /// `-` and `+` allowed.
    Loose,
    /// Not `-` or `+` (Redis's "strict").
    Strict,
}

/// Parses an ID as Redis's `streamGenericParseIDOrReply`: `ms-seq`, or
/// `ms` (seq `missing_seq`); `Some(None)` in the seq slot for `ms-*`
/// when `star` (XADD).
pub(crate) fn parse_id(a: &[u8], missing_seq: u64, form: IdForm, star: bool) -> Option<(Id, bool)> {
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
pub(crate) fn parse_interval(a: &[u8], missing_seq: u64) -> Option<(Id, bool)> {
    if a.len() > 1 && a[0] == b'(' {
        let (id, _) = parse_id(&a[1..], missing_seq, IdForm::Strict, false)?;
        Some((id, true))
    } else {
        let (id, _) = parse_id(a, missing_seq, IdForm::Loose, false)?;
        Some((id, false))
    }
}

/// The first ID of an interval from its start argument (`(` exclusive:
/// the next ID), or the error to answer (XRANGE, XPENDING, XAUTOCLAIM).
pub(crate) fn interval_start(a: &[u8]) -> Result<Id, &'static str> {
    match parse_interval(a, 0).ok_or(INVALID_ID)? {
        (id, false) => Ok(id),
        (id, true) => id.next().ok_or("ERR invalid start ID for the interval"),
    }
}

/// The last ID of an interval from its end argument (`(` exclusive: the
/// ID before), or the error to answer.
pub(crate) fn interval_end(a: &[u8]) -> Result<Id, &'static str> {
    match parse_interval(a, u64::MAX).ok_or(INVALID_ID)? {
        (id, false) => Ok(id),
        (id, true) => id.prev().ok_or("ERR invalid end ID for the interval"),
    }
}

#[derive(Clone, Debug, Default)]
pub(crate) struct Entry {
    pub(crate) id: Id,
    pub(crate) fields: Vec<(Vec<u8>, Vec<u8>)>,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct Node {
    /// Entries deleted from it (they still count toward its size).
    pub(crate) deleted: u64,
    /// The ID of the last entry appended to it, deleted or not (what
    /// Redis's MINID trimming compares: deleted entries stay in a
    /// listpack).
    pub(crate) last: Id,
    pub(crate) entries: Vec<Entry>,
    /// In the paged layout (`stream_pages.rs`): the page holding it
    /// (`None`: not stored in a page yet).
    pub(crate) page: Option<u64>,
    /// In the paged layout: its live entries while they are not loaded
    /// (`entries` then empty). Only the steps that never look inside such
    /// a node load a stream partly (`stream_pages::Need`).
    pub(crate) stub: Option<u32>,
}

impl Node {
    /// Its live entries, loaded or not.
    pub(crate) fn live(&self) -> usize {
        self.stub.map_or(self.entries.len(), |n| n as usize)
    }
}

/// A stream as its record holds it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Stream {
    pub(crate) last: Id,
    pub(crate) added: u64,
    pub(crate) max_deleted: Id,
    pub(crate) nodes: Vec<Node>,
    /// Consumer groups by name (`stream_groups.rs`).
    pub(crate) groups: BTreeMap<Vec<u8>, Group>,
}

/// An entry delivered to a consumer and not yet acknowledged.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Pending {
    pub(crate) consumer: Vec<u8>,
    /// Unix ms of its last delivery.
    pub(crate) delivered: u64,
    pub(crate) deliveries: u64,
}

/// A consumer group: what it has delivered, its pending entries list
/// (PEL, by entry ID) and its consumers (name to the Unix ms last seen).
#[derive(Clone, Debug, Default)]
pub(crate) struct Group {
    pub(crate) last: Id,
    /// Redis's `entries_read`: `None` when unknown.
    pub(crate) entries_read: Option<u64>,
    pub(crate) pending: BTreeMap<Id, Pending>,
    pub(crate) consumers: BTreeMap<Vec<u8>, u64>,
}

fn bad(what: &str) -> Error {
    Error::Envelope(format!("stream record: {what}"))
}

fn u32_of(b: &[u8]) -> Result<u32, Error> {
    Ok(u32::from_le_bytes(
        b.try_into().map_err(|_| bad("a count is 4 bytes"))?,
    ))
}

pub(crate) fn decode(data: &[u8]) -> Result<Stream, Error> {
    let c = Compact::decode(data)?;
    let mut it = c.items.into_iter();
    let (mut s, nodes, groups) = decode_head(&mut it)?;
    for _ in 0..nodes {
        let n = it.next().ok_or_else(|| bad("missing node"))?;
        if n.len() != 28 {
            return Err(bad("node header size"));
        }
        let node = Node {
            deleted: u64::from_le_bytes(n[..8].try_into().expect("8 bytes")),
            last: id_of(&n[8..24])?,
            entries: decode_entries(&mut it, u32_of(&n[24..])?)?,
            page: None,
            stub: None,
        };
        s.nodes.push(node);
    }
    decode_groups(&mut it, groups, &mut s)?;
    if it.next().is_some() {
        return Err(bad("bytes after the last group"));
    }
    Ok(s)
}

fn id_of(b: &[u8]) -> Result<Id, Error> {
    Id::from_bytes(b).ok_or_else(|| bad("an ID"))
}

/// The header item: the stream without nodes or groups, and how many of
/// each follow.
pub(crate) fn decode_head(
    it: &mut impl Iterator<Item = Vec<u8>>,
) -> Result<(Stream, u32, u32), Error> {
    let head = it.next().ok_or_else(|| bad("no header"))?;
    if head.len() != 48 {
        return Err(bad("header size"));
    }
    let s = Stream {
        last: id_of(&head[0..16])?,
        added: u64::from_le_bytes(head[16..24].try_into().expect("8 bytes")),
        max_deleted: id_of(&head[24..40])?,
        nodes: Vec::new(),
        groups: BTreeMap::new(),
    };
    Ok((s, u32_of(&head[40..44])?, u32_of(&head[44..48])?))
}

/// `count` entries: per entry its ID, its field count and the pairs.
pub(crate) fn decode_entries(
    it: &mut impl Iterator<Item = Vec<u8>>,
    count: u32,
) -> Result<Vec<Entry>, Error> {
    // (A damaged count must not size an allocation.)
    let mut entries = Vec::with_capacity((count as usize).min(1024));
    for _ in 0..count {
        let eid = id_of(&it.next().ok_or_else(|| bad("missing entry"))?)?;
        let count = u32_of(&it.next().ok_or_else(|| bad("missing field count"))?)?;
        let mut fields = Vec::with_capacity((count as usize).min(64));
        for _ in 0..count {
            let f = it.next().ok_or_else(|| bad("missing field"))?;
            let v = it.next().ok_or_else(|| bad("missing value"))?;
            fields.push((f, v));
        }
        entries.push(Entry { id: eid, fields });
    }
    Ok(entries)
}

/// `count` consumer groups into `s`.
pub(crate) fn decode_groups(
    it: &mut impl Iterator<Item = Vec<u8>>,
    count: u32,
    s: &mut Stream,
) -> Result<(), Error> {
    for _ in 0..count {
        let name = it.next().ok_or_else(|| bad("missing group"))?;
        let h = it.next().ok_or_else(|| bad("missing group header"))?;
        if h.len() != 32 {
            return Err(bad("group header size"));
        }
        let read = u64::from_le_bytes(h[16..24].try_into().expect("8 bytes"));
        let mut g = Group {
            last: id_of(&h[..16])?,
            entries_read: (read != u64::MAX).then_some(read),
            ..Group::default()
        };
        for _ in 0..u32_of(&h[24..28])? {
            let p = it.next().ok_or_else(|| bad("missing pending entry"))?;
            if p.len() != 32 {
                return Err(bad("pending entry size"));
            }
            let consumer = it.next().ok_or_else(|| bad("missing pending consumer"))?;
            let pending = Pending {
                consumer,
                delivered: u64::from_le_bytes(p[16..24].try_into().expect("8 bytes")),
                deliveries: u64::from_le_bytes(p[24..].try_into().expect("8 bytes")),
            };
            g.pending.insert(id_of(&p[..16])?, pending);
        }
        for _ in 0..u32_of(&h[28..])? {
            let c = it.next().ok_or_else(|| bad("missing consumer"))?;
            let seen = it.next().ok_or_else(|| bad("missing consumer time"))?;
            let seen = u64::from_le_bytes(seen.try_into().map_err(|_| bad("a time is 8 bytes"))?);
            g.consumers.insert(c, seen);
        }
        if g.pending
            .values()
            .any(|p| !g.consumers.contains_key(&p.consumer))
        {
            return Err(bad("a pending entry of no consumer"));
        }
        s.groups.insert(name, g);
    }
    Ok(())
}

/// Entries as items: per entry its ID, its field count and the pairs.
pub(crate) fn push_entries(items: &mut Vec<Vec<u8>>, entries: &[Entry]) {
    for e in entries {
        items.push(e.id.bytes().to_vec());
        items.push((e.fields.len() as u32).to_le_bytes().to_vec());
        for (f, v) in &e.fields {
            items.push(f.clone());
            items.push(v.clone());
        }
    }
}

impl Stream {
    /// The one-record layout (a stream with every node loaded).
    pub(crate) fn encode(&self) -> Vec<u8> {
        debug_assert!(self.nodes.iter().all(|n| n.stub.is_none()));
        let mut items = Vec::new();
        self.push_head(&mut items);
        for n in &self.nodes {
            let mut h = n.deleted.to_le_bytes().to_vec();
            h.extend_from_slice(&n.last.bytes());
            h.extend_from_slice(&(n.entries.len() as u32).to_le_bytes());
            items.push(h);
            push_entries(&mut items, &n.entries);
        }
        self.push_groups(&mut items);
        Compact { large: true, items }.encode()
    }

    /// The header item (its node count: how many nodes follow).
    pub(crate) fn push_head(&self, items: &mut Vec<Vec<u8>>) {
        let mut head = Vec::with_capacity(48);
        head.extend_from_slice(&self.last.bytes());
        head.extend_from_slice(&self.added.to_le_bytes());
        head.extend_from_slice(&self.max_deleted.bytes());
        head.extend_from_slice(&(self.nodes.len() as u32).to_le_bytes());
        head.extend_from_slice(&(self.groups.len() as u32).to_le_bytes());
        items.push(head);
    }

    /// The consumer groups' items.
    pub(crate) fn push_groups(&self, items: &mut Vec<Vec<u8>>) {
        for (name, g) in &self.groups {
            items.push(name.clone());
            let mut h = g.last.bytes().to_vec();
            h.extend_from_slice(&g.entries_read.unwrap_or(u64::MAX).to_le_bytes());
            h.extend_from_slice(&(g.pending.len() as u32).to_le_bytes());
            h.extend_from_slice(&(g.consumers.len() as u32).to_le_bytes());
            items.push(h);
            for (id, p) in &g.pending {
                let mut e = id.bytes().to_vec();
                e.extend_from_slice(&p.delivered.to_le_bytes());
                e.extend_from_slice(&p.deliveries.to_le_bytes());
                items.push(e);
                items.push(p.consumer.clone());
            }
            for (c, seen) in &g.consumers {
                items.push(c.clone());
                items.push(seen.to_le_bytes().to_vec());
            }
        }
    }

    /// The ID of the first entry (0-0 when empty).
    pub(crate) fn first_id(&self) -> Id {
        self.entries().next().map_or(Id::default(), |e| e.id)
    }

    /// Whether entry `id` is in the stream.
    pub(crate) fn entry(&self, id: Id) -> Option<&Entry> {
        self.nodes
            .iter()
            .find(|n| n.last >= id)
            .and_then(|n| n.entries.iter().find(|e| e.id == id))
    }

    /// Redis's `streamRangeHasTombstones` from `start` to the end.
    pub(crate) fn tombstones_from(&self, start: Id) -> bool {
        if self.len() == 0 || self.max_deleted == Id::default() {
            return false;
        }
        if self.first_id() > self.max_deleted {
            return false;
        }
        start <= self.max_deleted
    }

    /// Redis's `streamEstimateDistanceFromFirstEverEntry`: the entries
    /// added up to `id`, when known.
    pub(crate) fn entries_read_at(&self, id: Id) -> Option<u64> {
        if self.added == 0 {
            return Some(0);
        }
        let len = self.len() as u64;
        if len == 0 && id <= self.last {
            return Some(self.added);
        }
        match id.cmp(&self.last) {
            std::cmp::Ordering::Equal => return Some(self.added),
            std::cmp::Ordering::Greater => return None,
            std::cmp::Ordering::Less => {}
        }
        let first = self.first_id();
        if self.max_deleted == Id::default() || self.max_deleted < first {
            if id < first {
                return Some(self.added - len);
            } else if id == first {
                return Some(self.added - len + 1);
            }
        }
        None
    }

    pub(crate) fn len(&self) -> usize {
        self.nodes.iter().map(Node::live).sum()
    }

    pub(crate) fn entries(&self) -> impl DoubleEndedIterator<Item = &Entry> {
        self.nodes.iter().flat_map(|n| n.entries.iter())
    }

    /// Appends an entry (its ID checked by the caller), starting a node
    /// as Redis does by count.
    pub(crate) fn append(&mut self, e: Entry, node_entries: u64) {
        let full = self
            .nodes
            .last()
            .is_none_or(|n| node_entries != 0 && n.live() as u64 + n.deleted >= node_entries);
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
    pub(crate) fn delete(&mut self, id: Id) -> bool {
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
    pub(crate) fn trim(&mut self, t: &Trim) -> u64 {
        let mut removed = 0u64;
        while let Some(node) = self.nodes.first() {
            let len = self.len() as u64;
            if let TrimBy::MaxLen(max) = t.by {
                if len <= max {
                    break;
                }
            }
            let entries = node.live() as u64;
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
            // (A stream loaded partly is trimmed only approximately.)
            debug_assert!(node.stub.is_none());
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
pub(crate) enum TrimBy {
    MaxLen(u64),
    MinId(Id),
}

/// A trimming request (XADD's or XTRIM's).
#[derive(Clone, Copy)]
pub(crate) struct Trim {
    pub(crate) by: TrimBy,
    pub(crate) approx: bool,
    /// Most entries to remove (0: no limit).
    pub(crate) limit: u64,
}

/// XADD's and XTRIM's parsed arguments.
pub(crate) struct AddArgs {
    pub(crate) trim: Option<Trim>,
    pub(crate) nomkstream: bool,
    /// The ID argument's index (XADD), and the ID: `None` for `*`, else
    /// the ID and whether its seq was given (`ms-*` not).
    pub(crate) id_at: usize,
    pub(crate) id: Option<(Id, bool)>,
}

/// Redis's `streamParseAddOrTrimArgsOrReply`.
pub(crate) fn parse_add_or_trim(
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

/// Redis's error for a group a key's stream does not have (XGROUP, XINFO).
pub(crate) fn no_such_group(group: &[u8], key: &[u8]) -> String {
    format!(
        "NOGROUP No such consumer group '{}' for key name '{}'",
        String::from_utf8_lossy(group),
        String::from_utf8_lossy(key)
    )
}

pub(crate) fn no_group(key: &[u8], group: &[u8]) -> String {
    format!(
        "NOGROUP No such key '{}' or consumer group '{}'",
        String::from_utf8_lossy(key),
        String::from_utf8_lossy(group)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Stream {
        let mut s = Stream::default();
        for i in 1..=5u64 {
            let e = Entry {
                id: Id { ms: i, seq: 0 },
                fields: vec![(b"f".to_vec(), vec![b'v'; i as usize])],
            };
            s.append(e, 2);
        }
        let mut g = Group {
            last: Id { ms: 3, seq: 0 },
            entries_read: Some(3),
            ..Group::default()
        };
        g.consumers.insert(b"alice".to_vec(), 17);
        g.consumers.insert(b"bob".to_vec(), 18);
        g.pending.insert(
            Id { ms: 2, seq: 0 },
            Pending {
                consumer: b"bob".to_vec(),
                delivered: 99,
                deliveries: 4,
            },
        );
        s.groups.insert(b"workers".to_vec(), g);
        s.groups.insert(b"idle".to_vec(), Group::default());
        s
    }

    #[test]
    fn groups_round_trip_with_their_stream() {
        let s = sample();
        let back = decode(&s.encode()).unwrap();
        assert_eq!(back.len(), 5);
        assert_eq!(back.groups.len(), 2);
        let g = &back.groups[&b"workers".to_vec()];
        assert_eq!(g.last, Id { ms: 3, seq: 0 });
        assert_eq!(g.entries_read, Some(3));
        assert_eq!(g.consumers.len(), 2);
        assert_eq!(g.pending[&Id { ms: 2, seq: 0 }].deliveries, 4);
        assert_eq!(back.groups[&b"idle".to_vec()].entries_read, None);
        assert_eq!(back.encode(), s.encode());
    }

    /// Damaged stream records (groups included) are errors, never a panic.
    #[test]
    fn damaged_stream_records_are_errors_not_panics() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let good = sample().encode();
        for _ in 0..20_000 {
            let mut d = good.clone();
            if rng.gen_bool(0.3) {
                d.truncate(rng.gen_range(0..d.len()));
            } else {
                let i = rng.gen_range(0..d.len());
                d[i] ^= 1 << rng.gen_range(0..8);
            }
            let _ = decode(&d);
        }
    }
}
