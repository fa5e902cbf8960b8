//! The paged layout of a long stream: the key's record holds the stream's
//! header, a directory of its nodes and its consumer groups; each node's
//! entries lie in a page (a record of the database's pages namespace), so
//! XADD reads and writes the last node's page and the metadata, not the
//! whole stream (in the one-record layout a 10 000-entry stream was
//! rewritten whole by every XADD: ~40 XADDs/s). A stream goes paged when
//! its one-record encoding would pass [`PAGE_AT_BYTES`], and back when a
//! step that loaded it whole finds it below half of that.
//!
//! ```text
//! metadata (the key's record, after its expiry):
//! u8   shape 2 (paged; the one-record layout starts with 0 or 1)
//! u64  stamp: random, new each time the stream goes paged; in its pages' keys
//! u64  the next page number to use
//! then the compact encoding (`compact.rs`) of: the header item as in the
//! one-record layout (`stream_log.rs`), per node a directory item (page
//! u64, deleted u64, ID of its last entry appended 16 bytes, live entries
//! u32), then the consumer groups as in the one-record layout
//! page key: the stream's key, then stamp u64 LE, then page number i64 LE
//! page: the compact encoding of its node's entries (ID, field count,
//!       fields and values, as in the one-record layout)
//! ```
//!
//! A step loads the pages it needs ([`Need`]): XADD only the last node's
//! (its trimming, when approximate, drops whole nodes by their directory
//! counts), every other step all of them. It commits the metadata with
//! the pages that changed (and deletions of the nodes that went) as one
//! crash-atomic batch guarded by the metadata's version (`RespStore::
//! commit`), holding the key's paged lock. Pages of a stream deleted,
//! overwritten, expired or gone back to one record carry a stamp that is
//! no longer the key's: the sweeper (`list_pages::sweep_pages`) drops
//! them. Documented in docs/FORMAT.md ("Paged streams").

use std::collections::HashMap;

use nvdepot_cache::resp::RespStore;
use nvdepot_cache::Error;

use super::compact::Compact;
use super::list_pages::{may_page, page_key, SHAPE_PAGED};
use super::stream_log::{
    decode_entries, decode_groups, decode_head, push_entries, Id, Node, Stream,
};

/// A stream whose one-record encoding would pass this many bytes goes
/// paged.
pub const PAGE_AT_BYTES: usize = 16 * 1024;
/// A paged stream loaded whole and found below this size goes back to
/// one record.
const COMPACT_BELOW_BYTES: usize = PAGE_AT_BYTES / 2;
/// Bytes before the compact part of the metadata.
const META_PREFIX: usize = 17;

/// What of a paged stream a step reads. Nodes not read stay stubs, which
/// only `Stream::len`, `Stream::append` (after the last node) and
/// approximate trimming may meet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Need<'a> {
    /// Every node's entries.
    All,
    /// Only the last node's (XADD).
    Tail,
    /// No node's (XLEN, XREAD of `$`).
    Nothing,
    /// The nodes holding the first `limit` entries from `start` to `end`
    /// (inclusive), from the end when `rev` (XRANGE, XREVRANGE, XREAD):
    /// entries of the stubs left are all past those.
    Range {
        start: Id,
        end: Id,
        limit: usize,
        rev: bool,
    },
    /// What XREADGROUP's `>` reads for group `group`: the first and last
    /// nodes (the stream's first and top IDs, for its entries-read
    /// count) and those holding the first `limit` entries after the
    /// group's last delivered ID.
    Group { group: &'a [u8], limit: usize },
}

/// Whether a stream record's data is the paged layout's metadata.
pub(crate) fn is_paged(data: &[u8]) -> bool {
    data.first() == Some(&SHAPE_PAGED)
}

fn damaged(what: &str) -> Error {
    Error::Envelope(format!("paged stream: {what}"))
}

/// A paged stream as loaded: what its write-back compares against.
pub(crate) struct Loaded {
    stamp: u64,
    next_page: u64,
    /// Every page of the directory.
    pages: Vec<u64>,
    /// The loaded pages' bytes as read.
    read: HashMap<u64, Vec<u8>>,
}

/// Decodes the metadata: the stream with every node a stub.
pub(crate) fn decode_meta(data: &[u8]) -> Result<(Stream, Loaded), Error> {
    if data.len() < META_PREFIX || data[0] != SHAPE_PAGED {
        return Err(damaged("metadata too short"));
    }
    let stamp = u64::from_le_bytes(data[1..9].try_into().expect("8"));
    let next_page = u64::from_le_bytes(data[9..17].try_into().expect("8"));
    let c = Compact::decode(&data[META_PREFIX..])?;
    let mut it = c.items.into_iter();
    let (mut s, nodes, groups) = decode_head(&mut it)?;
    let mut pages = Vec::new();
    for _ in 0..nodes {
        let d = it.next().ok_or_else(|| damaged("missing directory item"))?;
        if d.len() != 36 {
            return Err(damaged("directory item size"));
        }
        let page = u64::from_le_bytes(d[..8].try_into().expect("8"));
        let last = Id::from_bytes(&d[16..32]).expect("16 bytes");
        let live = u32::from_le_bytes(d[32..].try_into().expect("4"));
        // (A node may hold no live entry: an exact MINID trim can empty it
        // while an entry it had, deleted, is past the bound; Redis keeps
        // such a node too.)
        if page >= next_page || pages.last().is_some_and(|&p| p >= page) {
            return Err(damaged("directory out of order"));
        }
        pages.push(page);
        s.nodes.push(Node {
            deleted: u64::from_le_bytes(d[8..16].try_into().expect("8")),
            last,
            entries: Vec::new(),
            page: Some(page),
            stub: Some(live),
        });
    }
    decode_groups(&mut it, groups, &mut s)?;
    if it.next().is_some() {
        return Err(damaged("bytes after the last group"));
    }
    let loaded = Loaded {
        stamp,
        next_page,
        pages,
        read: HashMap::new(),
    };
    Ok((s, loaded))
}

fn encode_page(node: &Node) -> Vec<u8> {
    let mut items = Vec::with_capacity(node.entries.len() * 4);
    push_entries(&mut items, &node.entries);
    Compact { large: true, items }.encode()
}

/// Reads what `need` says of the paged stream `data` (the metadata)
/// describes under `key`.
pub(crate) async fn load(
    store: &RespStore,
    db: usize,
    key: &[u8],
    data: &[u8],
    need: Need<'_>,
) -> Result<(Stream, Loaded), Error> {
    let (mut s, mut loaded) = decode_meta(data)?;
    let mut plan = Plan::new(&s, need);
    while let Some(i) = plan.next(&s) {
        let node = &mut s.nodes[i];
        let page = node.page.expect("a stub has its page");
        let bytes = store
            .page(db, &page_key(key, loaded.stamp, page as i64))
            .await?
            .ok_or_else(|| damaged("a page is missing"))?;
        fill(node, &bytes)?;
        plan.filled(&s, i);
        loaded.read.insert(page, bytes);
    }
    Ok((s, loaded))
}

/// Which nodes a load reads for a [`Need`], in order: decided from the
/// metadata and, for a range, from the entries read so far (a range
/// stops reading once it has its `limit`).
struct Plan {
    /// The nodes to consider, in reading order.
    order: std::vec::IntoIter<usize>,
    /// The range wanted (start, end, limit), if the need is one.
    range: Option<(Id, Id, usize)>,
    /// Also the first and last nodes holding a live entry (a group's
    /// read: the stream's first and top IDs).
    ends: Option<(Option<usize>, Option<usize>)>,
    /// Entries of the range found in the nodes read so far.
    found: usize,
}

impl Plan {
    fn new(s: &Stream, need: Need<'_>) -> Plan {
        let n = s.nodes.len();
        // A group's read is a forward range plus both ends.
        let (need, ends) = match need {
            Need::Group { group, limit } => {
                let start = s.groups.get(group).and_then(|g| g.last.next());
                let range = Need::Range {
                    start: start.unwrap_or(Id::MAX),
                    end: Id::MAX,
                    limit: if start.is_some() { limit } else { 0 },
                    rev: false,
                };
                let live = |i: &usize| s.nodes[*i].live() > 0;
                (range, Some(((0..n).find(live), (0..n).rev().find(live))))
            }
            other => (other, None),
        };
        let (order, range): (Vec<usize>, _) = match need {
            Need::All => ((0..n).collect(), None),
            Need::Tail => ((n.saturating_sub(1)..n).collect(), None),
            Need::Nothing | Need::Group { .. } => (Vec::new(), None),
            Need::Range {
                start,
                end,
                limit,
                rev,
            } => {
                let order = if rev {
                    (0..n).rev().collect()
                } else {
                    (0..n).collect()
                };
                (order, Some((start, end, limit)))
            }
        };
        Plan {
            order: order.into_iter(),
            range,
            ends,
            found: 0,
        }
    }

    /// The next node to read, if any.
    fn next(&mut self, s: &Stream) -> Option<usize> {
        let (start, end, limit) = match self.range {
            None => return self.order.next(),
            Some(r) => r,
        };
        self.order.by_ref().find(|&i| {
            let end_node = self
                .ends
                .is_some_and(|(first, last)| Some(i) == first || Some(i) == last);
            // Node i holds IDs after node i-1's last, up to its own.
            let after = i.checked_sub(1).map(|p| s.nodes[p].last);
            let outside = s.nodes[i].last < start || after.is_some_and(|a| a >= end);
            end_node || !(outside || self.found >= limit)
        })
    }

    /// Node `i` was read: its entries in the range count toward the limit.
    fn filled(&mut self, s: &Stream, i: usize) {
        if let Some((start, end, _)) = self.range {
            self.found += s.nodes[i]
                .entries
                .iter()
                .filter(|e| e.id >= start && e.id <= end)
                .count();
        }
    }
}

/// Fills the stub `node` with the entries of its page `bytes`, checked
/// against its directory item.
fn fill(node: &mut Node, bytes: &[u8]) -> Result<(), Error> {
    let c = Compact::decode(bytes)?;
    let mut it = c.items.into_iter();
    let live = node.stub.take().expect("a stub");
    node.entries = decode_entries(&mut it, live)?;
    if it.next().is_some() {
        return Err(damaged("a page holds more entries than its directory says"));
    }
    if node.entries.last().is_some_and(|e| e.id > node.last)
        || node.entries.windows(2).any(|w| w[0].id >= w[1].id)
    {
        return Err(damaged("a page's entries out of order"));
    }
    Ok(())
}

/// What a changed stream writes: the key's new data (`None`: the key goes)
/// and the page writes (`None` deletes a page).
pub(crate) struct Writes {
    pub(crate) meta: Option<Vec<u8>>,
    pub(crate) pages: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

/// The writes that store `s` (`None`: deleted) under `key` in place of
/// what `loaded` (`None`: the one-record layout or nothing) described.
pub(crate) fn writes(key: &[u8], s: Option<&mut Stream>, loaded: Option<&Loaded>) -> Writes {
    let Some(s) = s else {
        // A deleted stream's pages are the sweeper's.
        return Writes {
            meta: None,
            pages: Vec::new(),
        };
    };
    let whole = s.nodes.iter().all(|n| n.stub.is_none());
    // Hysteresis: a paged stream goes back to one record only well
    // below the size at which one goes paged.
    let limit = if loaded.is_some() {
        COMPACT_BELOW_BYTES
    } else {
        PAGE_AT_BYTES
    };
    // Every entry takes at least its 16-byte ID and a count: a cheap
    // bound before encoding it whole. A key too long for page keys keeps
    // one record whatever its size.
    if whole && (s.len().saturating_mul(18) <= limit || !may_page(key)) {
        let data = s.encode();
        if data.len() <= limit || !may_page(key) {
            return Writes {
                meta: Some(data),
                pages: Vec::new(),
            };
        }
    }
    // Paged: the stamp kept, or a new one for a stream going paged (any
    // pages of an earlier paged life carry another, and are swept).
    let (stamp, mut next_page) = match loaded {
        Some(l) => (l.stamp, l.next_page),
        None => (rand::random(), 0),
    };
    let mut pages = Vec::new();
    for node in &mut s.nodes {
        if node.stub.is_some() {
            continue;
        }
        let bytes = encode_page(node);
        let page = match node.page {
            Some(p) if loaded.is_some_and(|l| l.read.get(&p) == Some(&bytes)) => continue,
            Some(p) if loaded.is_some() => p,
            _ => {
                next_page += 1;
                next_page - 1
            }
        };
        node.page = Some(page);
        pages.push((page_key(key, stamp, page as i64), Some(bytes)));
    }
    if let Some(l) = loaded {
        let kept: std::collections::HashSet<u64> = s.nodes.iter().filter_map(|n| n.page).collect();
        for &p in &l.pages {
            if !kept.contains(&p) {
                pages.push((page_key(key, stamp, p as i64), None));
            }
        }
    }
    let mut items = Vec::new();
    s.push_head(&mut items);
    for n in &s.nodes {
        let mut d = Vec::with_capacity(36);
        d.extend_from_slice(&n.page.expect("every node has its page now").to_le_bytes());
        d.extend_from_slice(&n.deleted.to_le_bytes());
        d.extend_from_slice(&n.last.bytes());
        d.extend_from_slice(&(n.live() as u32).to_le_bytes());
        items.push(d);
    }
    s.push_groups(&mut items);
    let mut meta = Vec::with_capacity(META_PREFIX + 64 * items.len());
    meta.push(SHAPE_PAGED);
    meta.extend_from_slice(&stamp.to_le_bytes());
    meta.extend_from_slice(&next_page.to_le_bytes());
    meta.extend_from_slice(&Compact { large: true, items }.encode());
    Writes {
        meta: Some(meta),
        pages,
    }
}

#[cfg(test)]
mod tests {
    use super::super::stream_log::Entry;
    use super::*;

    fn stream(entries: u64, per_node: u64) -> Stream {
        let mut s = Stream::default();
        for i in 1..=entries {
            let e = Entry {
                id: Id { ms: i, seq: 0 },
                fields: vec![(b"field".to_vec(), vec![b'v'; 100])],
            };
            s.append(e, per_node);
        }
        s
    }

    /// Writes as the store would apply them: pages by key.
    fn apply(store: &mut HashMap<Vec<u8>, Vec<u8>>, w: &Writes) {
        for (k, d) in &w.pages {
            match d {
                Some(d) => store.insert(k.clone(), d.clone()),
                None => store.remove(k),
            };
        }
    }

    /// [`load`] from pages kept by key: the same plan, the pages read
    /// (their numbers, in order) given back too.
    fn load_read(
        pages: &HashMap<Vec<u8>, Vec<u8>>,
        key: &[u8],
        meta: &[u8],
        need: Need,
    ) -> (Stream, Loaded, Vec<usize>) {
        let (mut s, mut l) = decode_meta(meta).unwrap();
        let mut plan = Plan::new(&s, need);
        let mut read = Vec::new();
        while let Some(i) = plan.next(&s) {
            let p = s.nodes[i].page.unwrap();
            let bytes = pages[&page_key(key, l.stamp, p as i64)].clone();
            fill(&mut s.nodes[i], &bytes).unwrap();
            plan.filled(&s, i);
            l.read.insert(p, bytes);
            read.push(i);
        }
        (s, l, read)
    }

    fn load_from(
        pages: &HashMap<Vec<u8>, Vec<u8>>,
        key: &[u8],
        meta: &[u8],
        need: Need,
    ) -> (Stream, Loaded) {
        let (s, l, _) = load_read(pages, key, meta, need);
        (s, l)
    }

    /// The nodes each need reads, over 10 nodes of 100 entries (IDs 1 to
    /// 1000): a range reads only the nodes it spans up to its limit, from
    /// either end; a group's read the nodes after its last delivered ID up
    /// to its limit, plus the first and last nodes; a group that has
    /// delivered everything, or does not exist, only the ends.
    #[test]
    fn each_need_reads_only_the_nodes_it_needs() {
        let key = b"s";
        let mut s = stream(1000, 100);
        let id = |ms| Id { ms, seq: 0 };
        for (name, last) in [(&b"done"[..], 1000), (b"mid", 450)] {
            let g = super::super::stream_log::Group {
                last: id(last),
                ..Default::default()
            };
            s.groups.insert(name.to_vec(), g);
        }
        let w = writes(key, Some(&mut s), None);
        let meta = w.meta.clone().unwrap();
        let mut pages = HashMap::new();
        apply(&mut pages, &w);
        let nodes = |need| load_read(&pages, key, &meta, need).2;
        assert_eq!(nodes(Need::All), (0..10).collect::<Vec<_>>());
        assert_eq!(nodes(Need::Tail), vec![9]);
        assert_eq!(nodes(Need::Nothing), Vec::<usize>::new());
        let range = |start, end, limit, rev| Need::Range {
            start: id(start),
            end: id(end),
            limit,
            rev,
        };
        assert_eq!(nodes(range(250, 420, usize::MAX, false)), vec![2, 3, 4]);
        assert_eq!(nodes(range(250, 420, 60, false)), vec![2, 3]);
        assert_eq!(nodes(range(1, 1000, 10, true)), vec![9]);
        assert_eq!(nodes(range(1, 1000, 150, true)), vec![9, 8]);
        let group = |group: &'static [u8], limit| Need::Group { group, limit };
        assert_eq!(nodes(group(b"mid", 10)), vec![0, 4, 9]);
        assert_eq!(nodes(group(b"mid", 120)), vec![0, 4, 5, 9]);
        assert_eq!(nodes(group(b"done", 10)), vec![0, 9]);
        assert_eq!(nodes(group(b"missing", 10)), vec![0, 9]);
        // What a group's read needs is there: the entries after its last ID.
        let (t, _, _) = load_read(&pages, key, &meta, group(b"mid", 120));
        let ids: Vec<u64> = t.nodes[4..6]
            .iter()
            .flat_map(|n| &n.entries)
            .map(|e| e.id.ms)
            .collect();
        assert_eq!(ids, (401..=600).collect::<Vec<_>>());
    }

    #[test]
    fn a_stream_under_a_key_too_long_for_pages_stays_one_record() {
        let key = vec![b'k'; 70_000];
        assert!(!may_page(&key));
        let mut s = stream(2000, 100);
        let w = writes(&key, Some(&mut s), None);
        assert!(w.pages.is_empty());
        assert!(!is_paged(w.meta.as_ref().unwrap()));
    }

    #[test]
    fn a_long_stream_goes_paged_and_an_append_writes_one_page() {
        let key = b"events";
        let mut s = stream(1000, 100);
        let w = writes(key, Some(&mut s), None);
        let meta = w.meta.clone().unwrap();
        assert!(is_paged(&meta));
        assert_eq!(w.pages.len(), 10);
        let mut pages = HashMap::new();
        apply(&mut pages, &w);

        // XADD's view: the last node only; one page and the metadata.
        let (mut t, l) = load_from(&pages, key, &meta, Need::Tail);
        assert_eq!(t.len(), 1000);
        t.append(
            Entry {
                id: Id { ms: 5000, seq: 0 },
                fields: vec![(b"f".to_vec(), b"v".to_vec())],
            },
            100,
        );
        let w = writes(key, Some(&mut t), Some(&l));
        assert_eq!(w.pages.len(), 1, "only the new node's page");
        apply(&mut pages, &w);
        let meta = w.meta.unwrap();

        // Approximate trimming drops whole nodes: their pages deleted.
        let (mut t, l) = load_from(&pages, key, &meta, Need::Tail);
        let trim = super::super::stream_log::Trim {
            by: super::super::stream_log::TrimBy::MaxLen(500),
            approx: true,
            limit: 0,
        };
        assert_eq!(t.trim(&trim), 500);
        let w = writes(key, Some(&mut t), Some(&l));
        assert_eq!(w.pages.iter().filter(|p| p.1.is_none()).count(), 5);
        apply(&mut pages, &w);
        let meta = w.meta.unwrap();

        // Loaded whole it is what a one-record stream would be.
        let (all, _) = load_from(&pages, key, &meta, Need::All);
        let ids: Vec<u64> = all.entries().map(|e| e.id.ms).collect();
        let mut want: Vec<u64> = (501..=1000).collect();
        want.push(5000);
        assert_eq!(ids, want);
        assert_eq!(pages.len(), 6);
    }

    #[test]
    fn a_paged_stream_emptied_goes_back_to_one_record() {
        let key = b"k";
        let mut s = stream(400, 100);
        let w = writes(key, Some(&mut s), None);
        let mut pages = HashMap::new();
        apply(&mut pages, &w);
        let (mut all, l) = load_from(&pages, key, &w.meta.unwrap(), Need::All);
        for i in 1..=399 {
            assert!(all.delete(Id { ms: i, seq: 0 }));
        }
        let w = writes(key, Some(&mut all), Some(&l));
        let meta = w.meta.unwrap();
        assert!(!is_paged(&meta));
        assert_eq!(super::super::stream_log::decode(&meta).unwrap().len(), 1);
    }

    /// An exact MINID trim can leave a node with no live entry (an entry
    /// past the bound was deleted from it): stored and read back, and a
    /// group's read still finds the first and top entries.
    #[test]
    fn a_node_emptied_by_an_exact_trim_is_kept_and_read_back() {
        let key = b"k";
        let mut s = stream(300, 100);
        assert!(s.delete(Id { ms: 100, seq: 0 }));
        let trim = super::super::stream_log::Trim {
            by: super::super::stream_log::TrimBy::MinId(Id { ms: 100, seq: 0 }),
            approx: false,
            limit: 0,
        };
        assert_eq!(s.trim(&trim), 99);
        assert_eq!(s.nodes[0].live(), 0);
        let w = writes(key, Some(&mut s), None);
        let meta = w.meta.clone().unwrap();
        let mut pages = HashMap::new();
        apply(&mut pages, &w);
        let (all, _) = load_from(&pages, key, &meta, Need::All);
        assert_eq!(all.len(), 200);
        assert_eq!(all.nodes.len(), 3);
        assert_eq!(all.first_id(), Id { ms: 101, seq: 0 });
    }

    /// Damaged metadata is an error, never a panic.
    #[test]
    fn damaged_metadata_is_an_error_not_a_panic() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let mut s = stream(300, 100);
        let meta = writes(b"k", Some(&mut s), None).meta.unwrap();
        for _ in 0..20_000 {
            let mut m = meta.clone();
            if rng.gen_bool(0.3) {
                m.truncate(rng.gen_range(0..m.len()));
            } else {
                let i = rng.gen_range(0..m.len());
                m[i] ^= 1 << rng.gen_range(0..8);
            }
            let _ = decode_meta(&m);
        }
    }
}
