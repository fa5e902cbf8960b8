//! The order of a paged sorted set (`zset_pages.rs`): a counted B+-tree of
//! (score, member) items in ~2 KiB node pages, after the flash-friendly
//! B+-tree of seed 003. Every inner entry carries its subtree's item
//! count, so a rank (ZRANK, ZRANGE by index) is one descent, as is the
//! start of a score or lex range; the nodes above the leaves are few
//! (fan-out ~40-50) and stay in the DRAM tier, so a descent costs one leaf
//! read. Nodes are small because every ZADD rewrites its leaf and the
//! inner nodes on its path (their counts change): 8 KiB nodes wrote
//! 13 KiB per ZADD, 2 KiB ones 6 (bench/results/ab-page-sizes.md).
//!
//! ```text
//! node page (key: the set's key, stamp, page -1 - node id), every field
//! a compact item (LEB128 length, then its bytes):
//! leaf:  u8 3, then per item (ascending): score (8 bytes, f64 LE), member
//! inner: u8 4, then per child: node id (8), items below (8),
//!        first score (8), first member
//! ```
//!
//! A node stays in its encoded bytes while a step works on it, with the
//! offset of each entry beside them: a look-up is a binary search over
//! the offsets, an insert or a removal one splice, a count one 8-byte
//! overwrite, so no step allocates per item (decoding leaves into items
//! took a fifth of ZADD's CPU).
//!
//! Separators: child j's first (j >= 1) is at most every item below it
//! and above every item of child j - 1; child 0's is not used. A node
//! splits past [`NODE_BYTES`] (its parent gains an entry; a root split
//! adds a level), an emptied node leaves its parent, a leaf below a
//! quarter merges into a sibling it fits with, and a root of one child
//! gives way to it. Every node touched is rewritten in the step's one
//! crash-atomic commit.

use std::cmp::Ordering;
use std::collections::{BTreeSet, HashMap};

use nvdepot_cache::resp::RespStore;
use nvdepot_cache::Error;

use super::compact;
use super::list_pages::{page_key, Stop};

/// A member and its score.
pub type Item = (f64, Vec<u8>);
/// A member and its score, borrowed.
pub type Key<'a> = (f64, &'a [u8]);

const LEAF: u8 = 3;
const INNER: u8 = 4;
/// A node past this many bytes splits (a store's nodes written when this
/// was 8 KiB read as before and split on their next writes).
pub const NODE_BYTES: usize = 2 * 1024;
/// A leaf below this merges with a sibling when both fit in one node.
const MERGE_BELOW: usize = NODE_BYTES / 4;
/// A tree written whole fills nodes to this, leaving room to grow.
const FILL_BYTES: usize = NODE_BYTES * 3 / 4;
/// Deeper than any tree of 2^64 items at two items per node.
pub const HEIGHT_MAX: u8 = 64;
/// Node ids stay below this (page numbers -1 - id are negative i64s).
pub const NODE_ID_MAX: u64 = 1 << 62;
/// An inner entry's fixed head: id, count and score, each a length byte
/// (8) and 8 bytes.
const INNER_HEAD: usize = 27;
/// A leaf entry's fixed head: the score.
const LEAF_HEAD: usize = 9;

pub fn damaged(what: &str) -> Error {
    Error::Envelope(format!("paged sorted set: {what}"))
}

/// The order of members: by score, then by bytes.
pub fn cmp(a: Key<'_>, b: Key<'_>) -> Ordering {
    a.0.partial_cmp(&b.0)
        .unwrap_or(Ordering::Equal)
        .then_with(|| a.1.cmp(b.1))
}

/// The page key of node `id` of the set under `key` stamped `stamp`
/// (negative pages: the set's member buckets are pages 0, 1, …).
pub fn node_page(key: &[u8], stamp: u64, id: u64) -> Vec<u8> {
    page_key(key, stamp, -1 - id as i64)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// A leaf's entry for `item`.
fn leaf_entry((s, m): Key<'_>) -> Vec<u8> {
    let mut out = Vec::with_capacity(LEAF_HEAD + 5 + m.len());
    compact::push_item(&mut out, &s.to_le_bytes());
    compact::push_item(&mut out, m);
    out
}

/// An inner node's entry for child `id` of `count` items from `first`.
fn inner_entry(id: u64, count: u64, (s, m): Key<'_>) -> Vec<u8> {
    let mut out = Vec::with_capacity(INNER_HEAD + 5 + m.len());
    compact::push_item(&mut out, &id.to_le_bytes());
    compact::push_item(&mut out, &count.to_le_bytes());
    compact::push_item(&mut out, &s.to_le_bytes());
    compact::push_item(&mut out, m);
    out
}

/// A node: its page's bytes and where each entry starts.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    bytes: Vec<u8>,
    offs: Vec<u32>,
}

impl Node {
    fn new(kind: u8) -> Node {
        Node {
            bytes: vec![kind],
            offs: Vec::new(),
        }
    }

    pub fn is_leaf(&self) -> bool {
        self.bytes[0] == LEAF
    }

    pub fn len(&self) -> usize {
        self.offs.len()
    }

    fn start(&self, i: usize) -> usize {
        self.offs[i] as usize
    }

    fn end(&self, i: usize) -> usize {
        self.offs
            .get(i + 1)
            .map_or(self.bytes.len(), |&o| o as usize)
    }

    fn bytes(&self) -> usize {
        self.bytes.len()
    }

    /// Entry `i`'s (score, member): an item of a leaf, a child's first.
    pub fn key(&self, i: usize) -> Key<'_> {
        let (at, head) = (
            self.start(i),
            if self.is_leaf() {
                LEAF_HEAD
            } else {
                INNER_HEAD
            },
        );
        let s = f64::from_bits(u64_at(&self.bytes, at + head - 8));
        let m = &self.bytes[at + head..self.end(i)];
        let (len, used) = compact::read_len(m).expect("checked when parsed");
        (s, &m[used..used + len])
    }

    /// Child `i`'s node id and item count (inner nodes).
    pub fn child(&self, i: usize) -> (u64, u64) {
        let at = self.start(i);
        (u64_at(&self.bytes, at + 1), u64_at(&self.bytes, at + 10))
    }

    fn set_count(&mut self, i: usize, count: u64) {
        let at = self.start(i) + 10;
        self.bytes[at..at + 8].copy_from_slice(&count.to_le_bytes());
    }

    fn add_count(&mut self, i: usize, by: i64) {
        let c = self.child(i).1;
        self.set_count(i, c.wrapping_add_signed(by));
    }

    /// The items below this node.
    fn count(&self) -> u64 {
        if self.is_leaf() {
            self.len() as u64
        } else {
            (0..self.len()).fold(0u64, |a, i| a.saturating_add(self.child(i).1))
        }
    }

    /// The first of `n` entries with `pred` true, for `pred` false then
    /// true over the entries.
    fn partition_point(&self, from: usize, pred: impl Fn(Key<'_>) -> bool) -> usize {
        let (mut lo, mut hi) = (from, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if pred(self.key(mid)) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        lo
    }

    fn insert(&mut self, i: usize, entry: &[u8]) {
        let at = if i < self.len() {
            self.start(i)
        } else {
            self.bytes.len()
        };
        self.bytes.splice(at..at, entry.iter().copied());
        for o in &mut self.offs[i..] {
            *o += entry.len() as u32;
        }
        self.offs.insert(i, at as u32);
    }

    fn remove(&mut self, i: usize) {
        let (at, end) = (self.start(i), self.end(i));
        self.bytes.drain(at..end);
        self.offs.remove(i);
        for o in &mut self.offs[i..] {
            *o -= (end - at) as u32;
        }
    }

    /// Entries `at..` moved to a new node of the same kind.
    fn split_off(&mut self, at: usize) -> Node {
        let cut = self.start(at);
        let mut right = Node::new(self.bytes[0]);
        right.bytes.extend_from_slice(&self.bytes[cut..]);
        right.offs = self.offs[at..]
            .iter()
            .map(|&o| o - cut as u32 + 1)
            .collect();
        self.bytes.truncate(cut);
        self.offs.truncate(at);
        right
    }

    /// `other`'s entries (all after this node's) appended.
    fn append(&mut self, other: &Node) {
        let base = self.bytes.len() as u32;
        self.bytes.extend_from_slice(&other.bytes[1..]);
        self.offs.extend(other.offs.iter().map(|&o| o - 1 + base));
    }

    /// The first entry's (score, member), owned.
    fn first(&self) -> Item {
        let (s, m) = self.key(0);
        (s, m.to_vec())
    }

    /// Where to split: the first entry starting past half the bytes, so
    /// both sides hold at least one.
    fn half(&self) -> usize {
        let want = 1 + (self.bytes.len() - 1).div_ceil(2);
        let at = self.offs.partition_point(|&o| (o as usize) < want);
        at.clamp(1, self.len() - 1)
    }

    pub fn encode(&self) -> Vec<u8> {
        self.bytes.clone()
    }

    /// Parses a node page, checking every entry's shape and their order.
    pub fn decode(data: Vec<u8>) -> Result<Node, Error> {
        let kind = *data.first().ok_or_else(|| damaged("an empty node"))?;
        let per = match kind {
            LEAF => 2,
            INNER => 4,
            _ => return Err(damaged("a node of an unknown shape")),
        };
        let mut offs = Vec::new();
        let mut fields = 0;
        for (n, item) in compact::items(&data).enumerate() {
            let (at, field) = item?;
            fields = n + 1;
            let fixed = n % per != per - 1;
            if fixed && field.len() != 8 {
                return Err(damaged("a number of the wrong size"));
            }
            let score = if per == 2 { 0 } else { 2 };
            if n % per == score && f64::from_le_bytes(field.try_into().expect("8")).is_nan() {
                return Err(damaged("a score that is not a number"));
            }
            if n % per == 0 {
                offs.push(at as u32);
            }
        }
        let node = Node { bytes: data, offs };
        if node.bytes.len() > u32::MAX as usize || fields % per != 0 {
            return Err(damaged("a node cut short"));
        }
        // A leaf's order is checked in debug builds only: its bytes are
        // the engine's, CRC-checked, as written from an ordered leaf, and
        // every ZADD parses a leaf (bench/results/ab-zset-nodes.md).
        let ordered = if node.is_leaf() {
            !cfg!(debug_assertions)
                || (1..node.len()).all(|i| cmp(node.key(i - 1), node.key(i)).is_lt())
        } else {
            !node.offs.is_empty()
                && (0..node.len()).all(|i| {
                    let (id, count) = node.child(i);
                    count > 0 && id < NODE_ID_MAX
                })
                && (2..node.len()).all(|i| cmp(node.key(i - 1), node.key(i)).is_lt())
        };
        if !ordered {
            return Err(damaged("a node out of order"));
        }
        Ok(node)
    }
}

/// The shape of a tree: its root, height (0: the root is a leaf) and the
/// next node id to give out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub root: u64,
    pub height: u8,
    pub next_node: u64,
}

/// A tree being read or changed: nodes read so far, those changed and
/// those freed, written by [`Tree::writes`].
pub struct Tree<'a> {
    store: &'a RespStore,
    db: usize,
    key: &'a [u8],
    stamp: u64,
    /// The metadata's version the tree was read at.
    version: u64,
    pub shape: Shape,
    nodes: HashMap<u64, Node>,
    dirty: BTreeSet<u64>,
    freed: BTreeSet<u64>,
}

/// Inner nodes on the way from the root to a leaf: (node, child taken).
type Path = Vec<(u64, usize)>;

impl<'a> Tree<'a> {
    pub fn new(
        store: &'a RespStore,
        db: usize,
        key: &'a [u8],
        (stamp, version): (u64, u64),
        shape: Shape,
    ) -> Self {
        Tree {
            store,
            db,
            key,
            stamp,
            version,
            shape,
            nodes: HashMap::new(),
            dirty: BTreeSet::new(),
            freed: BTreeSet::new(),
        }
    }

    /// Reads node `id`: `Err(Stop::Retry)` when its page is gone because
    /// the set changed meanwhile; gone from an unchanged set is damage.
    async fn load(&mut self, id: u64) -> Result<(), Stop> {
        if !self.nodes.contains_key(&id) {
            let pk = node_page(self.key, self.stamp, id);
            let Some(data) = self.store.page(self.db, &pk).await? else {
                let (_, now) = self.store.get_for_write(self.db, self.key, 0).await?;
                return Err(if now == Some(self.version) {
                    Stop::Fail(damaged("a node page is missing"))
                } else {
                    Stop::Retry
                });
            };
            self.nodes.insert(id, Node::decode(data)?);
        }
        Ok(())
    }

    fn node(&self, id: u64) -> &Node {
        self.nodes.get(&id).expect("loaded")
    }

    fn node_mut(&mut self, id: u64) -> &mut Node {
        self.dirty.insert(id);
        self.nodes.get_mut(&id).expect("loaded")
    }

    fn alloc(&mut self, node: Node) -> Result<u64, Stop> {
        let id = self.shape.next_node;
        if id >= NODE_ID_MAX {
            return Err(Stop::Fail(damaged("out of node ids")));
        }
        self.shape.next_node += 1;
        self.nodes.insert(id, node);
        self.dirty.insert(id);
        Ok(id)
    }

    fn free(&mut self, id: u64) {
        self.nodes.remove(&id);
        self.dirty.remove(&id);
        self.freed.insert(id);
    }

    /// Descends from the root, at each inner node taking the child
    /// `pick` names (given the node and the items before it), to a leaf:
    /// the path, the leaf, and the items before the leaf.
    async fn descend(
        &mut self,
        mut pick: impl FnMut(&Node, u64) -> usize,
    ) -> Result<(Path, u64, u64), Stop> {
        let mut path = Vec::with_capacity(usize::from(self.shape.height));
        let (mut id, mut before) = (self.shape.root, 0u64);
        for depth in 0..=self.shape.height {
            self.load(id).await?;
            let n = self.node(id);
            match (n.is_leaf(), depth == self.shape.height) {
                (true, true) => return Ok((path, id, before)),
                (false, false) => {
                    let j = pick(n, before).min(n.len() - 1);
                    before = (0..j).fold(before, |a, i| a.saturating_add(n.child(i).1));
                    path.push((id, j));
                    id = n.child(j).0;
                }
                _ => return Err(Stop::Fail(damaged("a leaf not at the tree's height"))),
            }
        }
        unreachable!("the loop returns at the leaf's depth")
    }

    /// The rank of the first item `reached` holds for (the item count if
    /// none), for `reached` false then true along the order.
    pub async fn rank_where(&mut self, reached: impl Fn(Key<'_>) -> bool) -> Result<u64, Stop> {
        // Child j >= 1 holds the answer's leaf if its first has not
        // reached it: the last such child, else child 0.
        let (_, leaf, before) = self
            .descend(|n, _| n.partition_point(1, &reached) - 1)
            .await?;
        Ok(before + self.node(leaf).partition_point(0, &reached) as u64)
    }

    /// The path to the leaf where `item` lies or would.
    async fn path_to(&mut self, item: Key<'_>) -> Result<(Path, u64), Stop> {
        let (path, leaf, _) = self
            .descend(|n, _| n.partition_point(1, |k| cmp(k, item).is_gt()) - 1)
            .await?;
        Ok((path, leaf))
    }

    /// The items of ranks `a..b`, ascending: one descent per leaf.
    pub async fn items(&mut self, a: u64, b: u64) -> Result<Vec<Item>, Stop> {
        let mut out = Vec::with_capacity(b.saturating_sub(a).min(1 << 16) as usize);
        let mut r = a;
        while r < b {
            let (_, leaf, before) = self
                .descend(|n, before| {
                    let mut acc = before;
                    (0..n.len())
                        .position(|i| {
                            acc = acc.saturating_add(n.child(i).1);
                            acc > r
                        })
                        .unwrap_or(n.len())
                })
                .await?;
            let n = self.node(leaf);
            let from = r.checked_sub(before).map(|f| f as usize);
            let Some(from) = from.filter(|&f| f < n.len()) else {
                return Err(Stop::Fail(damaged("counts that disagree with the leaves")));
            };
            let to = n.len().min((b - before) as usize);
            out.extend((from..to).map(|i| {
                let (s, m) = n.key(i);
                (s, m.to_vec())
            }));
            r = before + to as u64;
        }
        Ok(out)
    }

    /// Inserts `item` (its member absent from the set).
    pub async fn insert(&mut self, item: Key<'_>) -> Result<(), Stop> {
        let (path, leaf) = self.path_to(item).await?;
        let n = self.node_mut(leaf);
        let at = n.partition_point(0, |k| cmp(k, item).is_ge());
        n.insert(at, &leaf_entry(item));
        for &(id, j) in &path {
            self.node_mut(id).add_count(j, 1);
        }
        self.split_up(&path, leaf)
    }

    /// Removes `item`; false if it is not there.
    pub async fn remove(&mut self, item: Key<'_>) -> Result<bool, Stop> {
        let (path, leaf) = self.path_to(item).await?;
        let n = self.node(leaf);
        let at = n.partition_point(0, |k| cmp(k, item).is_ge());
        if at == n.len() || cmp(n.key(at), item).is_ne() {
            return Ok(false);
        }
        self.node_mut(leaf).remove(at);
        for &(id, j) in &path {
            self.node_mut(id).add_count(j, -1);
        }
        self.shrink_up(&path, leaf).await?;
        Ok(true)
    }

    /// Splits `node` (at the end of `path`) while past [`NODE_BYTES`],
    /// its parents as they fill in turn.
    fn split_up(&mut self, path: &Path, mut node: u64) -> Result<(), Stop> {
        let mut level = path.len();
        loop {
            let n = self.node(node);
            if n.bytes() <= NODE_BYTES || n.len() < 2 {
                return Ok(());
            }
            let at = n.half();
            let right = self.node_mut(node).split_off(at);
            let (right_count, right_first) = (right.count(), right.first());
            let right = self.alloc(right)?;
            if level == 0 {
                let left = self.node(node);
                let mut root = Node::new(INNER);
                let (lc, lf) = (left.count(), left.first());
                root.insert(0, &inner_entry(node, lc, (lf.0, &lf.1)));
                root.insert(
                    1,
                    &inner_entry(right, right_count, (right_first.0, &right_first.1)),
                );
                self.shape.root = self.alloc(root)?;
                self.shape.height += 1;
                if self.shape.height > HEIGHT_MAX {
                    return Err(Stop::Fail(damaged("a tree past its height limit")));
                }
                return Ok(());
            }
            let (parent, j) = path[level - 1];
            let p = self.node_mut(parent);
            p.add_count(j, -(right_count as i64));
            p.insert(
                j + 1,
                &inner_entry(right, right_count, (right_first.0, &right_first.1)),
            );
            node = parent;
            level -= 1;
        }
    }

    /// After a removal from `node` (at the end of `path`): drops emptied
    /// nodes from their parents, merges a small leaf into a sibling it
    /// fits with, and lets a root of one child give way to it.
    async fn shrink_up(&mut self, path: &Path, mut node: u64) -> Result<(), Stop> {
        let mut level = path.len();
        while level > 0 {
            let (parent, j) = path[level - 1];
            if self.node(node).len() == 0 {
                self.node_mut(parent).remove(j);
                self.free(node);
                node = parent;
                level -= 1;
                continue;
            }
            let small = self.node(node).is_leaf() && self.node(node).bytes() < MERGE_BELOW;
            let p = self.node(parent);
            let sibling = if j + 1 < p.len() {
                Some(j + 1)
            } else {
                j.checked_sub(1)
            };
            let Some(s) = sibling.filter(|_| small) else {
                break;
            };
            let (lj, rj) = (j.min(s), j.max(s));
            let (l, r, sib) = (p.child(lj).0, p.child(rj).0, p.child(s).0);
            let right_count = p.child(rj).1;
            self.load(sib).await?;
            if !self.node(sib).is_leaf() {
                return Err(Stop::Fail(damaged("a leaf's sibling is not a leaf")));
            }
            if self.node(l).bytes() + self.node(r).bytes() <= NODE_BYTES {
                let moved = self.nodes.remove(&r).expect("loaded");
                self.node_mut(l).append(&moved);
                self.free(r);
                let p = self.node_mut(parent);
                p.add_count(lj, right_count as i64);
                p.remove(rj);
            }
            break;
        }
        while self.shape.height > 0 {
            let root = self.node(self.shape.root);
            if root.is_leaf() {
                return Err(Stop::Fail(damaged("a leaf above the tree's height")));
            }
            if root.len() != 1 {
                break;
            }
            let only = root.child(0).0;
            self.free(self.shape.root);
            self.shape.root = only;
            self.shape.height -= 1;
            self.load(only).await?;
        }
        Ok(())
    }

    /// The page writes of the change: nodes changed, nodes freed. The
    /// changed nodes leave the tree (their bytes move into the writes
    /// instead of being copied: the tree is done once it is committed).
    pub fn writes(&mut self) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
        let mut out = Vec::with_capacity(self.dirty.len() + self.freed.len());
        for &id in &self.dirty {
            let node = self.nodes.remove(&id).expect("a changed node is loaded");
            out.push((node_page(self.key, self.stamp, id), Some(node.bytes)));
        }
        for &id in &self.freed {
            out.push((node_page(self.key, self.stamp, id), None));
        }
        self.dirty.clear();
        self.freed.clear();
        out
    }
}

/// A tree of `items` (ascending, distinct members) built whole: its
/// shape and its nodes by id.
pub fn build(items: &[Item]) -> (Shape, Vec<(u64, Node)>) {
    let mut nodes: Vec<(u64, Node)> = Vec::new();
    // (id, count, first item index) per node of the level built last.
    let mut level: Vec<(u64, u64, usize)> = Vec::new();
    let mut leaf = Node::new(LEAF);
    let mut first = 0;
    for (i, (s, m)) in items.iter().enumerate() {
        let e = leaf_entry((*s, m));
        if leaf.len() > 0 && leaf.bytes() + e.len() > FILL_BYTES {
            let id = nodes.len() as u64;
            level.push((id, leaf.len() as u64, first));
            nodes.push((id, std::mem::replace(&mut leaf, Node::new(LEAF))));
            first = i;
        }
        let at = leaf.len();
        leaf.insert(at, &e);
    }
    if leaf.len() > 0 || level.is_empty() {
        let id = nodes.len() as u64;
        level.push((id, leaf.len() as u64, first));
        nodes.push((id, leaf));
    }
    let mut height = 0u8;
    while level.len() > 1 {
        let mut up = Vec::new();
        let mut inner = Node::new(INNER);
        let (mut count, mut first) = (0, level[0].2);
        for &(id, c, f) in &level {
            let (s, m) = &items[f];
            let e = inner_entry(id, c, (*s, m));
            if inner.len() >= 2 && inner.bytes() + e.len() > FILL_BYTES {
                let nid = nodes.len() as u64;
                up.push((nid, count, first));
                nodes.push((nid, std::mem::replace(&mut inner, Node::new(INNER))));
                (count, first) = (0, f);
            }
            let at = inner.len();
            inner.insert(at, &e);
            count += c;
        }
        let nid = nodes.len() as u64;
        up.push((nid, count, first));
        nodes.push((nid, inner));
        level = up;
        height += 1;
    }
    let shape = Shape {
        root: level[0].0,
        height,
        next_node: nodes.len() as u64,
    };
    (shape, nodes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(n: usize, pad: usize) -> Vec<Item> {
        let mut v: Vec<Item> = (0..n)
            .map(|i| {
                (
                    (i / 3) as f64,
                    format!("m{i:06}{}", "p".repeat(pad)).into_bytes(),
                )
            })
            .collect();
        v.sort_by(|a, b| cmp((a.0, &a.1), (b.0, &b.1)));
        v
    }

    /// Checks a built tree's invariants from `id` down: every leaf at the
    /// height, counts equal to the items below, separators bounding their
    /// subtrees; returns the items in order.
    fn walk(nodes: &HashMap<u64, Node>, id: u64, depth: u8, height: u8) -> Vec<Item> {
        let n = &nodes[&id];
        let own = |i| {
            let (s, m): Key<'_> = n.key(i);
            (s, m.to_vec())
        };
        if n.is_leaf() {
            assert_eq!(depth, height, "leaf at the tree's height");
            return (0..n.len()).map(own).collect();
        }
        assert!(depth < height);
        let mut out: Vec<Item> = Vec::new();
        for j in 0..n.len() {
            let (child, count) = n.child(j);
            let below = walk(nodes, child, depth + 1, height);
            assert_eq!(below.len() as u64, count, "a child's count");
            if j > 0 {
                let sep = own(j);
                assert!(cmp((sep.0, &sep.1), (below[0].0, &below[0].1)).is_le());
                let last = out.last().unwrap();
                assert!(cmp((last.0, &last.1), (sep.0, &sep.1)).is_lt());
            }
            out.extend(below);
        }
        out
    }

    #[test]
    fn trees_built_whole_hold_their_items_in_order_at_one_height() {
        for (n, pad) in [
            (0, 0),
            (1, 0),
            (300, 0),
            (5000, 0),
            (20_000, 10),
            (3000, 700),
        ] {
            let want = items(n, pad);
            let (shape, nodes) = build(&want);
            assert_eq!(shape.next_node, nodes.len() as u64);
            let map: HashMap<u64, Node> = nodes
                .into_iter()
                .map(|(id, n)| (id, Node::decode(n.encode()).expect("parses back")))
                .collect();
            let got = walk(&map, shape.root, 0, shape.height);
            assert_eq!(got, want, "{n} items of {pad} bytes");
            for n in map.values() {
                assert!(
                    n.bytes() <= NODE_BYTES || n.len() == 1,
                    "a node past its bytes"
                );
            }
            if n == 3000 && pad == 700 {
                assert!(shape.height >= 2, "long members make a deep tree");
            }
        }
    }

    /// Entries inserted, removed, split off and appended in bytes: the
    /// node parses back to the same entries.
    #[test]
    fn nodes_edit_in_place_and_round_trip() {
        let mut leaf = Node::new(LEAF);
        let keys: Vec<Item> = vec![
            (f64::NEG_INFINITY, vec![]),
            (-0.0, b"a".to_vec()),
            (1.5, vec![9; 300]),
            (f64::INFINITY, b"z".to_vec()),
        ];
        for k in [3, 0, 2, 1] {
            let at = leaf.partition_point(0, |x| cmp(x, (keys[k].0, &keys[k].1)).is_ge());
            leaf.insert(at, &leaf_entry((keys[k].0, &keys[k].1)));
        }
        let back = Node::decode(leaf.encode()).unwrap();
        assert_eq!(back, leaf);
        assert_eq!(
            (0..4).map(|i| back.key(i).1.to_vec()).collect::<Vec<_>>(),
            keys.iter().map(|k| k.1.clone()).collect::<Vec<_>>()
        );
        let mut left = back.clone();
        let right = left.split_off(left.half());
        assert!(left.len() >= 1 && right.len() >= 1);
        assert_eq!(Node::decode(right.encode()).unwrap(), right);
        left.append(&right);
        assert_eq!(left, back);
        left.remove(1);
        assert_eq!(Node::decode(left.encode()).unwrap().len(), 3);
        let mut inner = Node::new(INNER);
        inner.insert(0, &inner_entry(4, 10, (f64::NEG_INFINITY, b"x")));
        inner.insert(1, &inner_entry(7, 1, (2.0, b"b")));
        inner.add_count(0, -3);
        let back = Node::decode(inner.encode()).unwrap();
        assert_eq!(back.child(0), (4, 7));
        assert_eq!(back.child(1), (7, 1));
        assert_eq!(back.count(), 8);
        let mut unordered = Node::new(LEAF);
        unordered.insert(0, &leaf_entry((2.0, b"a")));
        unordered.insert(1, &leaf_entry((1.0, b"a")));
        if cfg!(debug_assertions) {
            assert!(Node::decode(unordered.encode()).is_err());
        }
        assert!(Node::decode(Node::new(INNER).encode()).is_err());
    }

    /// Damaged node pages are errors, never a panic (and what parses
    /// answers every accessor).
    #[test]
    fn damaged_nodes_are_errors_not_panics() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        let (_, nodes) = build(&items(400, 5));
        let pages: Vec<Vec<u8>> = nodes.iter().map(|(_, n)| n.encode()).collect();
        for _ in 0..20_000 {
            let mut p = pages[rng.gen_range(0..pages.len())].clone();
            if rng.gen_bool(0.3) {
                p.truncate(rng.gen_range(0..p.len()));
            } else {
                for _ in 0..rng.gen_range(1..4) {
                    let i = rng.gen_range(0..p.len());
                    p[i] ^= 1 << rng.gen_range(0..8);
                }
            }
            if let Ok(n) = Node::decode(p) {
                for i in 0..n.len() {
                    let _ = n.key(i);
                    if !n.is_leaf() {
                        let _ = n.child(i);
                    }
                }
                let _ = n.count();
            }
        }
    }
}
