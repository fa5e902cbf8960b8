//! The order of a paged sorted set (`zset_pages.rs`): a counted B+-tree of
//! (score, member) items in ~8 KiB node pages, after the flash-friendly
//! B+-tree of seed 003. Every inner entry carries its subtree's item
//! count, so a rank (ZRANK, ZRANGE by index) is one descent, as is the
//! start of a score or lex range; the nodes above the leaves are few
//! (fan-out ~200) and stay in the DRAM tier, so a descent costs one leaf
//! read.
//!
//! ```text
//! node page (key: the set's key, stamp, page -1 - node id):
//! leaf:  u8 3, then per item (ascending): member, score (8 bytes, f64 LE)
//! inner: u8 4, then per child: node id (8), items below (8),
//!        first score (8), first member  — every field a compact item
//!        (LEB128 length, bytes)
//! ```
//!
//! Separators: child j's first (j >= 1) is at most every item below it
//! and above every item of child j - 1; child 0's is not used. A leaf
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
use super::zset::order;

/// A member and its score.
pub type Item = (f64, Vec<u8>);

const LEAF: u8 = 3;
const INNER: u8 = 4;
/// A node past this many bytes splits.
pub const NODE_BYTES: usize = 8 * 1024;
/// A leaf below this merges with a sibling when both fit in one node.
const MERGE_BELOW: usize = NODE_BYTES / 4;
/// A tree written whole fills nodes to this, leaving room to grow.
const FILL_BYTES: usize = NODE_BYTES * 3 / 4;
/// Deeper than any tree of 2^64 items at two items per node.
pub const HEIGHT_MAX: u8 = 64;
/// Node ids stay below this (page numbers -1 - id are negative i64s).
pub const NODE_ID_MAX: u64 = 1 << 62;

pub fn damaged(what: &str) -> Error {
    Error::Envelope(format!("paged sorted set: {what}"))
}

/// The page key of node `id` of the set under `key` stamped `stamp`
/// (negative pages: the set's member buckets are pages 0, 1, …).
pub fn node_page(key: &[u8], stamp: u64, id: u64) -> Vec<u8> {
    page_key(key, stamp, -1 - id as i64)
}

/// An inner node's entry for one child.
#[derive(Clone, Debug, PartialEq)]
pub struct Child {
    pub id: u64,
    pub count: u64,
    pub first: Item,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Node {
    Leaf(Vec<Item>),
    Inner(Vec<Child>),
}

fn item_bytes(m: &[u8]) -> usize {
    m.len() + 5 + 9
}

impl Node {
    fn bytes(&self) -> usize {
        1 + match self {
            Node::Leaf(items) => items.iter().map(|(_, m)| item_bytes(m)).sum::<usize>(),
            Node::Inner(ch) => ch.iter().map(|c| 18 + item_bytes(&c.first.1)).sum(),
        }
    }

    fn len(&self) -> usize {
        match self {
            Node::Leaf(items) => items.len(),
            Node::Inner(ch) => ch.len(),
        }
    }

    /// The items below this node.
    fn count(&self) -> u64 {
        match self {
            Node::Leaf(items) => items.len() as u64,
            Node::Inner(ch) => ch.iter().map(|c| c.count).sum(),
        }
    }

    /// The node's first item (leaf) or its first child's separator.
    fn first(&self) -> Item {
        match self {
            Node::Leaf(items) => items[0].clone(),
            Node::Inner(ch) => ch[0].first.clone(),
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.bytes());
        match self {
            Node::Leaf(items) => {
                out.push(LEAF);
                for (s, m) in items {
                    compact::push_item(&mut out, m);
                    compact::push_item(&mut out, &s.to_le_bytes());
                }
            }
            Node::Inner(ch) => {
                out.push(INNER);
                for c in ch {
                    compact::push_item(&mut out, &c.id.to_le_bytes());
                    compact::push_item(&mut out, &c.count.to_le_bytes());
                    compact::push_item(&mut out, &c.first.0.to_le_bytes());
                    compact::push_item(&mut out, &c.first.1);
                }
            }
        }
        out
    }

    pub fn decode(data: &[u8]) -> Result<Node, Error> {
        let fields: Vec<&[u8]> = compact::items(data)
            .map(|i| i.map(|(_, e)| e))
            .collect::<Result<_, _>>()?;
        let u64_of = |b: &[u8]| -> Result<u64, Error> {
            Ok(u64::from_le_bytes(
                b.try_into()
                    .map_err(|_| damaged("a number of the wrong size"))?,
            ))
        };
        let score_of = |b: &[u8]| -> Result<f64, Error> {
            let s = f64::from_bits(u64_of(b)?);
            if s.is_nan() {
                return Err(damaged("a score that is not a number"));
            }
            Ok(s)
        };
        let node = match data.first() {
            Some(&LEAF) if fields.len().is_multiple_of(2) => Node::Leaf(
                fields
                    .chunks(2)
                    .map(|f| Ok((score_of(f[1])?, f[0].to_vec())))
                    .collect::<Result<_, Error>>()?,
            ),
            Some(&INNER) if fields.len().is_multiple_of(4) => Node::Inner(
                fields
                    .chunks(4)
                    .map(|f| {
                        Ok(Child {
                            id: u64_of(f[0])?,
                            count: u64_of(f[1])?,
                            first: (score_of(f[2])?, f[3].to_vec()),
                        })
                    })
                    .collect::<Result<_, Error>>()?,
            ),
            _ => return Err(damaged("a node of an unknown shape")),
        };
        let ordered = match &node {
            Node::Leaf(items) => items.windows(2).all(|w| order(&w[0], &w[1]).is_lt()),
            Node::Inner(ch) => {
                ch.iter().all(|c| c.count > 0 && c.id < NODE_ID_MAX)
                    && !ch.is_empty()
                    && ch[1..]
                        .windows(2)
                        .all(|w| order(&w[0].first, &w[1].first).is_lt())
            }
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
            self.nodes.insert(id, Node::decode(&data)?);
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

    fn inner_mut(&mut self, id: u64) -> &mut Vec<Child> {
        match self.node_mut(id) {
            Node::Inner(ch) => ch,
            Node::Leaf(_) => unreachable!("a path holds inner nodes"),
        }
    }

    fn leaf_mut(&mut self, id: u64) -> &mut Vec<Item> {
        match self.node_mut(id) {
            Node::Leaf(items) => items,
            Node::Inner(_) => unreachable!("a path ends at a leaf"),
        }
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
    /// `pick` names (given the children), to a leaf: the path, the
    /// leaf, and the items before the leaf.
    async fn descend(
        &mut self,
        mut pick: impl FnMut(&[Child], u64) -> usize,
    ) -> Result<(Path, u64, u64), Stop> {
        let mut path = Vec::with_capacity(usize::from(self.shape.height));
        let (mut id, mut before) = (self.shape.root, 0u64);
        for depth in 0..=self.shape.height {
            self.load(id).await?;
            match (self.node(id), depth == self.shape.height) {
                (Node::Leaf(_), true) => return Ok((path, id, before)),
                (Node::Inner(ch), false) => {
                    let j = pick(ch, before).min(ch.len() - 1);
                    before += ch[..j].iter().map(|c| c.count).sum::<u64>();
                    path.push((id, j));
                    id = ch[j].id;
                }
                _ => return Err(Stop::Fail(damaged("a leaf not at the tree's height"))),
            }
        }
        unreachable!("the loop returns at the leaf's depth")
    }

    /// The rank of the first item `reached` holds for (the item count if
    /// none), for `reached` false then true along the order.
    pub async fn rank_where(&mut self, reached: impl Fn(&Item) -> bool) -> Result<u64, Stop> {
        let (_, leaf, before) = self
            .descend(|ch, _| ch[1..].partition_point(|c| !reached(&c.first)))
            .await?;
        let Node::Leaf(items) = self.node(leaf) else {
            unreachable!("descend ends at a leaf")
        };
        Ok(before + items.partition_point(|it| !reached(it)) as u64)
    }

    /// The path to the leaf where `item` lies or would.
    async fn path_to(&mut self, item: &Item) -> Result<(Path, u64), Stop> {
        let (path, leaf, _) = self
            .descend(|ch, _| {
                ch[1..].partition_point(|c| order(&c.first, item) != Ordering::Greater)
            })
            .await?;
        Ok((path, leaf))
    }

    /// The items of ranks `a..b`, ascending: one descent per leaf.
    pub async fn items(&mut self, a: u64, b: u64) -> Result<Vec<Item>, Stop> {
        let mut out = Vec::with_capacity(b.saturating_sub(a).min(1 << 16) as usize);
        let mut r = a;
        while r < b {
            let (_, leaf, before) = self
                .descend(|ch, before| {
                    let mut acc = before;
                    ch.iter()
                        .position(|c| {
                            acc += c.count;
                            acc > r
                        })
                        .unwrap_or(ch.len())
                })
                .await?;
            let Node::Leaf(items) = self.node(leaf) else {
                unreachable!("descend ends at a leaf")
            };
            let from = r.checked_sub(before).map(|f| f as usize);
            let Some(from) = from.filter(|&f| f < items.len()) else {
                return Err(Stop::Fail(damaged("counts that disagree with the leaves")));
            };
            let to = items.len().min((b - before) as usize);
            out.extend_from_slice(&items[from..to]);
            r = before + to as u64;
        }
        Ok(out)
    }

    /// Inserts `item` (its member absent from the set).
    pub async fn insert(&mut self, item: Item) -> Result<(), Stop> {
        let (path, leaf) = self.path_to(&item).await?;
        let items = self.leaf_mut(leaf);
        let at = items.partition_point(|x| order(x, &item).is_lt());
        items.insert(at, item);
        for &(id, j) in &path {
            self.inner_mut(id)[j].count += 1;
        }
        self.split_up(&path, leaf)
    }

    /// Removes `item`; false if it is not there.
    pub async fn remove(&mut self, item: &Item) -> Result<bool, Stop> {
        let (path, leaf) = self.path_to(item).await?;
        let Node::Leaf(items) = self.node(leaf) else {
            unreachable!("path_to ends at a leaf")
        };
        let Ok(at) = items.binary_search_by(|x| order(x, item)) else {
            return Ok(false);
        };
        self.leaf_mut(leaf).remove(at);
        for &(id, j) in &path {
            self.inner_mut(id)[j].count -= 1;
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
            let right = match self.node_mut(node) {
                Node::Leaf(items) => {
                    Node::Leaf(items.split_off(half(items.iter().map(|(_, m)| item_bytes(m)))))
                }
                Node::Inner(ch) => {
                    Node::Inner(ch.split_off(half(ch.iter().map(|c| 18 + item_bytes(&c.first.1)))))
                }
            };
            let (right_count, right_first) = (right.count(), right.first());
            let right = self.alloc(right)?;
            if level == 0 {
                let left = self.node(node);
                let root = Node::Inner(vec![
                    Child {
                        id: node,
                        count: left.count(),
                        first: left.first(),
                    },
                    Child {
                        id: right,
                        count: right_count,
                        first: right_first,
                    },
                ]);
                self.shape.root = self.alloc(root)?;
                self.shape.height += 1;
                if self.shape.height > HEIGHT_MAX {
                    return Err(Stop::Fail(damaged("a tree past its height limit")));
                }
                return Ok(());
            }
            let (parent, j) = path[level - 1];
            let ch = self.inner_mut(parent);
            ch[j].count -= right_count;
            ch.insert(
                j + 1,
                Child {
                    id: right,
                    count: right_count,
                    first: right_first,
                },
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
                self.inner_mut(parent).remove(j);
                self.free(node);
                node = parent;
                level -= 1;
                continue;
            }
            let small =
                matches!(self.node(node), Node::Leaf(_)) && self.node(node).bytes() < MERGE_BELOW;
            let Node::Inner(ch) = self.node(parent) else {
                unreachable!("a path holds inner nodes")
            };
            let sibling = if j + 1 < ch.len() {
                Some(j + 1)
            } else {
                j.checked_sub(1)
            };
            let Some(s) = sibling.filter(|_| small) else {
                break;
            };
            let (lj, rj) = (j.min(s), j.max(s));
            let (l, r, sib) = (ch[lj].id, ch[rj].id, ch[s].id);
            self.load(sib).await?;
            if !matches!(self.node(sib), Node::Leaf(_)) {
                return Err(Stop::Fail(damaged("a leaf's sibling is not a leaf")));
            }
            if self.node(l).bytes() + self.node(r).bytes() <= NODE_BYTES {
                let Some(Node::Leaf(moved)) = self.nodes.remove(&r) else {
                    unreachable!("checked a leaf")
                };
                self.leaf_mut(l).extend(moved);
                self.free(r);
                let ch = self.inner_mut(parent);
                ch[lj].count += ch[rj].count;
                ch.remove(rj);
            }
            break;
        }
        while self.shape.height > 0 {
            let Node::Inner(ch) = self.node(self.shape.root) else {
                return Err(Stop::Fail(damaged("a leaf above the tree's height")));
            };
            if ch.len() != 1 {
                break;
            }
            let only = ch[0].id;
            self.free(self.shape.root);
            self.shape.root = only;
            self.shape.height -= 1;
            self.load(only).await?;
        }
        Ok(())
    }

    /// The page writes of the change: nodes changed, nodes freed.
    pub fn writes(&mut self) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
        let mut out = Vec::with_capacity(self.dirty.len() + self.freed.len());
        for &id in &self.dirty {
            out.push((
                node_page(self.key, self.stamp, id),
                Some(self.node(id).encode()),
            ));
        }
        for &id in &self.freed {
            out.push((node_page(self.key, self.stamp, id), None));
        }
        self.dirty.clear();
        self.freed.clear();
        out
    }
}

/// Where to split entries of these sizes: the first index past half of
/// their bytes, so both sides hold at least one.
fn half(sizes: impl Iterator<Item = usize> + Clone) -> usize {
    let total: usize = sizes.clone().sum();
    let n = sizes.clone().count();
    let mut acc = 0;
    for (i, b) in sizes.enumerate() {
        acc += b;
        if acc * 2 >= total {
            return (i + 1).clamp(1, n - 1);
        }
    }
    n / 2
}

/// A tree of `items` (ascending, distinct members) built whole: its
/// shape and its nodes by id.
pub fn build(items: Vec<Item>) -> (Shape, Vec<(u64, Node)>) {
    let mut nodes: Vec<(u64, Node)> = Vec::new();
    let mut level: Vec<Child> = Vec::new();
    let mut leaf: Vec<Item> = Vec::new();
    let mut bytes = 1;
    let flush_leaf =
        |leaf: &mut Vec<Item>, nodes: &mut Vec<(u64, Node)>, level: &mut Vec<Child>| {
            let id = nodes.len() as u64;
            level.push(Child {
                id,
                count: leaf.len() as u64,
                first: leaf[0].clone(),
            });
            nodes.push((id, Node::Leaf(std::mem::take(leaf))));
        };
    for it in items {
        let b = item_bytes(&it.1);
        if !leaf.is_empty() && bytes + b > FILL_BYTES {
            flush_leaf(&mut leaf, &mut nodes, &mut level);
            bytes = 1;
        }
        bytes += b;
        leaf.push(it);
    }
    if !leaf.is_empty() || level.is_empty() {
        if leaf.is_empty() {
            nodes.push((0, Node::Leaf(Vec::new())));
            let shape = Shape {
                root: 0,
                height: 0,
                next_node: 1,
            };
            return (shape, nodes);
        }
        flush_leaf(&mut leaf, &mut nodes, &mut level);
    }
    let mut height = 0u8;
    while level.len() > 1 {
        let mut up: Vec<Child> = Vec::new();
        let mut group: Vec<Child> = Vec::new();
        let mut bytes = 1;
        let flush = |group: &mut Vec<Child>, nodes: &mut Vec<(u64, Node)>, up: &mut Vec<Child>| {
            let id = nodes.len() as u64;
            let count = group.iter().map(|c| c.count).sum();
            up.push(Child {
                id,
                count,
                first: group[0].first.clone(),
            });
            nodes.push((id, Node::Inner(std::mem::take(group))));
        };
        for c in level {
            let b = 18 + item_bytes(&c.first.1);
            if group.len() >= 2 && bytes + b > FILL_BYTES {
                flush(&mut group, &mut nodes, &mut up);
                bytes = 1;
            }
            bytes += b;
            group.push(c);
        }
        flush(&mut group, &mut nodes, &mut up);
        level = up;
        height += 1;
    }
    let shape = Shape {
        root: level[0].id,
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
        v.sort_by(order);
        v
    }

    /// Checks a built tree's invariants from `id` down: every leaf at the
    /// height, counts equal to the items below, separators bounding their
    /// subtrees; returns the items in order.
    fn walk(nodes: &HashMap<u64, Node>, id: u64, depth: u8, height: u8) -> Vec<Item> {
        match &nodes[&id] {
            Node::Leaf(items) => {
                assert_eq!(depth, height, "leaf at the tree's height");
                items.clone()
            }
            Node::Inner(ch) => {
                assert!(depth < height);
                let mut out = Vec::new();
                for (j, c) in ch.iter().enumerate() {
                    let below = walk(nodes, c.id, depth + 1, height);
                    assert_eq!(below.len() as u64, c.count, "a child's count");
                    if j > 0 {
                        assert!(order(&c.first, &below[0]).is_le());
                        assert!(order(out.last().unwrap(), &c.first).is_lt());
                    }
                    out.extend(below);
                }
                out
            }
        }
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
            let (shape, nodes) = build(want.clone());
            assert_eq!(shape.next_node, nodes.len() as u64);
            let map: HashMap<u64, Node> = nodes.into_iter().collect();
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

    #[test]
    fn nodes_round_trip() {
        let leaf = Node::Leaf(vec![
            (-0.0, vec![]),
            (1.5, b"a".to_vec()),
            (f64::INFINITY, vec![9; 300]),
        ]);
        assert_eq!(Node::decode(&leaf.encode()).unwrap(), leaf);
        let inner = Node::Inner(vec![
            Child {
                id: 4,
                count: 10,
                first: (f64::NEG_INFINITY, b"x".to_vec()),
            },
            Child {
                id: 7,
                count: 1,
                first: (2.0, b"b".to_vec()),
            },
        ]);
        assert_eq!(Node::decode(&inner.encode()).unwrap(), inner);
        let unordered = Node::Leaf(vec![(2.0, b"a".to_vec()), (1.0, b"a".to_vec())]);
        assert!(Node::decode(&unordered.encode()).is_err());
        let empty_inner = Node::Inner(Vec::new());
        assert!(Node::decode(&empty_inner.encode()).is_err());
    }

    /// Damaged node pages are errors, never a panic.
    #[test]
    fn damaged_nodes_are_errors_not_panics() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        let (_, nodes) = build(items(400, 5));
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
            let _ = Node::decode(&p);
        }
    }

    #[test]
    fn splits_fall_near_half_and_leave_both_sides_some() {
        assert_eq!(half([10, 10, 10, 10].into_iter()), 2);
        assert_eq!(half([100, 1].into_iter()), 1);
        assert_eq!(half([1, 100].into_iter()), 1);
        assert_eq!(half([1, 1, 100].into_iter()), 2);
    }
}
