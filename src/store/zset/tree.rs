//! The order-statistic AVL tree behind large sorted sets: nodes keyed by
//! `(score, member)` in one arena with a free list (links are 4-byte indexes, rotations
//! move no payload), each with its subtree's size, so inserts, removals, ranks and the
//! start of any range cost O(log n) and a walk of k items O(log n + k).

use std::cmp::Ordering;

use bytes::Bytes;

use super::cmp_key;

/// Absent child / empty tree.
pub(super) const NIL: u32 = u32::MAX;

#[derive(Clone, Debug)]
pub(super) struct Node {
    pub(super) member: Bytes,
    pub(super) score: f64,
    pub(super) left: u32,
    pub(super) right: u32,
    /// Nodes in this subtree, itself included.
    pub(super) size: u32,
    /// Height of this subtree (a leaf is 1).
    pub(super) height: u8,
}

/// AVL tree keyed by (score, member), with subtree sizes for ranks. Nodes live in one
/// arena with a free list, so links are 4-byte indexes and rotations move no payload.
#[derive(Clone, Debug)]
pub(super) struct Tree {
    pub(super) nodes: Vec<Node>,
    pub(super) free: Vec<u32>,
    pub(super) root: u32,
}

impl Tree {
    pub(super) fn new() -> Tree {
        Tree {
            nodes: Vec::new(),
            free: Vec::new(),
            root: NIL,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.size(self.root)
    }

    pub(super) fn node(&self, t: u32) -> &Node {
        &self.nodes[t as usize]
    }

    pub(super) fn node_mut(&mut self, t: u32) -> &mut Node {
        &mut self.nodes[t as usize]
    }

    pub(super) fn size(&self, t: u32) -> usize {
        if t == NIL {
            0
        } else {
            self.node(t).size as usize
        }
    }

    pub(super) fn height(&self, t: u32) -> u8 {
        if t == NIL {
            0
        } else {
            self.node(t).height
        }
    }

    /// A detached node slot for a new member, or None when the arena is full.
    pub(super) fn alloc(&mut self, member: Bytes, score: f64) -> Option<u32> {
        let node = Node {
            member,
            score,
            left: NIL,
            right: NIL,
            size: 1,
            height: 1,
        };
        if let Some(t) = self.free.pop() {
            *self.node_mut(t) = node;
            return Some(t);
        }
        let t = u32::try_from(self.nodes.len()).ok().filter(|t| *t != NIL)?;
        self.nodes.push(node);
        Some(t)
    }

    /// Free a detached node's slot, handing back its member.
    pub(super) fn release(&mut self, t: u32) -> Bytes {
        self.free.push(t);
        std::mem::take(&mut self.node_mut(t).member)
    }

    pub(super) fn update(&mut self, t: u32) {
        let (l, r) = (self.node(t).left, self.node(t).right);
        // Subtree sizes never exceed the arena length, which fits in u32.
        let size = 1 + self.size(l) as u32 + self.size(r) as u32;
        let height = 1 + self.height(l).max(self.height(r));
        let n = self.node_mut(t);
        n.size = size;
        n.height = height;
    }

    pub(super) fn rotate_right(&mut self, t: u32) -> u32 {
        let l = self.node(t).left;
        self.node_mut(t).left = self.node(l).right;
        self.node_mut(l).right = t;
        self.update(t);
        self.update(l);
        l
    }

    pub(super) fn rotate_left(&mut self, t: u32) -> u32 {
        let r = self.node(t).right;
        self.node_mut(t).right = self.node(r).left;
        self.node_mut(r).left = t;
        self.update(t);
        self.update(r);
        r
    }

    /// Restore size, height and the AVL balance at `t`; returns the subtree's new root.
    pub(super) fn rebalance(&mut self, t: u32) -> u32 {
        self.update(t);
        let (l, r) = (self.node(t).left, self.node(t).right);
        let (hl, hr) = (self.height(l), self.height(r));
        if hl > hr + 1 {
            if self.height(self.node(l).left) < self.height(self.node(l).right) {
                let nl = self.rotate_left(l);
                self.node_mut(t).left = nl;
            }
            return self.rotate_right(t);
        }
        if hr > hl + 1 {
            if self.height(self.node(r).right) < self.height(self.node(r).left) {
                let nr = self.rotate_right(r);
                self.node_mut(t).right = nr;
            }
            return self.rotate_left(t);
        }
        t
    }

    /// Link the detached node `new` into the tree by its key, in one descent that counts
    /// it into every subtree on the way, then a climb that fixes heights only as far as
    /// they change (at most one rotation).
    pub(super) fn insert(&mut self, new: u32) {
        let n = self.node_mut(new);
        n.left = NIL;
        n.right = NIL;
        n.size = 1;
        n.height = 1;
        if self.root == NIL {
            self.root = new;
            return;
        }
        let mut path = Path::new();
        let mut t = self.root;
        loop {
            path.push(t);
            let (nn, tn) = (self.node(new), self.node(t));
            let less = cmp_key(nn.score, &nn.member, tn.score, &tn.member) == Ordering::Less;
            let tn = self.node_mut(t);
            tn.size += 1;
            let child = if less { &mut tn.left } else { &mut tn.right };
            if *child == NIL {
                *child = new;
                break;
            }
            t = *child;
        }
        self.climb(&path, path.len, false);
    }

    /// Fix heights and balance of `path[..depth]` (a root-to-leaf path whose lower part
    /// changed), bottom up, stopping where a subtree's height comes out unchanged. With
    /// `shrink`, the removal of one node below also counts down every subtree size on the
    /// path (an insert counts them up on its way down).
    fn climb(&mut self, path: &Path, depth: usize, shrink: bool) {
        let mut i = depth;
        while i > 0 {
            i -= 1;
            let t = path.at(i);
            if shrink {
                self.node_mut(t).size -= 1;
            }
            let before = self.node(t).height;
            let top = self.fix(t);
            if top != t {
                self.relink(path, i, t, top);
            }
            if self.node(top).height == before {
                if shrink {
                    for j in 0..i {
                        self.node_mut(path.at(j)).size -= 1;
                    }
                }
                return;
            }
        }
    }

    /// [`Self::rebalance`] for a node whose size is already right: heights only, unless
    /// it must rotate.
    fn fix(&mut self, t: u32) -> u32 {
        let (l, r) = (self.node(t).left, self.node(t).right);
        let (hl, hr) = (self.height(l), self.height(r));
        if hl.abs_diff(hr) > 1 {
            return self.rebalance(t);
        }
        self.node_mut(t).height = 1 + hl.max(hr);
        t
    }

    /// Point `path[i]`'s parent (or the root) at `new` instead of `old`.
    fn relink(&mut self, path: &Path, i: usize, old: u32, new: u32) {
        if i == 0 {
            self.root = new;
            return;
        }
        let p = self.node_mut(path.at(i - 1));
        if p.left == old {
            p.left = new;
        } else {
            p.right = new;
        }
    }

    /// Fill `path` with the root-to-node path of the node with key (score, member);
    /// false if there is none.
    fn seek_key(&self, path: &mut Path, score: f64, member: &[u8]) -> bool {
        let mut t = self.root;
        while t != NIL {
            path.push(t);
            let tn = self.node(t);
            t = match cmp_key(score, member, tn.score, &tn.member) {
                Ordering::Less => tn.left,
                Ordering::Greater => tn.right,
                Ordering::Equal => return true,
            };
        }
        false
    }

    /// Detach the node with key (score, member); returns it, or NIL if absent.
    pub(super) fn unlink(&mut self, score: f64, member: &[u8]) -> u32 {
        let mut path = Path::new();
        if !self.seek_key(&mut path, score, member) {
            return NIL;
        }
        self.unlink_path(&mut path)
    }

    /// Give node `t`, whose key is (`old`, its member), the score `new`: in place when
    /// its neighbours in the order stay its neighbours (Redis's `zslUpdateScore` does the
    /// same), else by unlinking and relinking it. The node must be in the tree.
    pub(super) fn rescore(&mut self, t: u32, old: f64, new: f64) {
        let mut path = Path::new();
        if !self.seek_key(&mut path, old, &self.node(t).member) {
            debug_assert!(false, "the node to rescore is in the tree");
            return;
        }
        debug_assert_eq!(path.at(path.len - 1), t, "index and tree agree");
        if self.keeps_place(&path, new) {
            self.node_mut(t).score = new;
            return;
        }
        self.unlink_path(&mut path);
        self.node_mut(t).score = new;
        self.insert(t);
    }

    /// Whether the last node of `path` would keep its rank with score `new`: its
    /// predecessor's key stays below and its successor's above.
    fn keeps_place(&self, path: &Path, new: f64) -> bool {
        let depth = path.len;
        let t = path.at(depth - 1);
        let n = self.node(t);
        // Predecessor: the rightmost node of the left subtree, else the nearest ancestor
        // whose right subtree holds `t`; the successor mirrors it.
        let mut pred = n.left;
        if pred != NIL {
            while self.node(pred).right != NIL {
                pred = self.node(pred).right;
            }
        }
        let mut succ = n.right;
        if succ != NIL {
            while self.node(succ).left != NIL {
                succ = self.node(succ).left;
            }
        }
        let mut child = t;
        for i in (0..depth - 1).rev() {
            if pred != NIL && succ != NIL {
                break;
            }
            let a = path.at(i);
            if self.node(a).right == child {
                if pred == NIL {
                    pred = a;
                }
            } else if succ == NIL {
                succ = a;
            }
            child = a;
        }
        let below = |p: u32| {
            p == NIL || {
                let pn = self.node(p);
                cmp_key(pn.score, &pn.member, new, &n.member) == Ordering::Less
            }
        };
        let above = |s: u32| {
            s == NIL || {
                let sn = self.node(s);
                cmp_key(new, &n.member, sn.score, &sn.member) == Ordering::Less
            }
        };
        below(pred) && above(succ)
    }

    /// Detach the node at ascending position `rank`; NIL if out of range.
    pub(super) fn unlink_at(&mut self, rank: usize) -> u32 {
        if rank >= self.len() {
            return NIL;
        }
        let mut path = Path::new();
        let (mut t, mut r) = (self.root, rank);
        while t != NIL {
            path.push(t);
            let n = self.node(t);
            let left_size = self.size(n.left);
            t = match r.cmp(&left_size) {
                Ordering::Less => n.left,
                Ordering::Greater => {
                    r -= left_size + 1;
                    n.right
                }
                Ordering::Equal => return self.unlink_path(&mut path),
            };
        }
        NIL
    }

    /// Detach the last node of `path` (a root-to-node path); returns it. A node with two
    /// children gives its place to its successor, then the path is climbed once.
    fn unlink_path(&mut self, path: &mut Path) -> u32 {
        let at = path.len - 1;
        let t = path.at(at);
        let (l, r) = (self.node(t).left, self.node(t).right);
        if l == NIL || r == NIL {
            let child = if l == NIL { r } else { l };
            self.relink(path, at, t, child);
            self.climb(path, at, true);
            return t;
        }
        // The successor `s`, leftmost under `r`, takes `t`'s place (and size and
        // height, fixed by the climb); the path goes down to `s`'s old parent.
        let mut s = r;
        while self.node(s).left != NIL {
            path.push(s);
            s = self.node(s).left;
        }
        if s != r {
            let parent = path.at(path.len - 1);
            self.node_mut(parent).left = self.node(s).right;
            self.node_mut(s).right = r;
        }
        let (size, height) = (self.node(t).size, self.node(t).height);
        let sn = self.node_mut(s);
        sn.left = l;
        sn.size = size;
        sn.height = height;
        self.relink(path, at, t, s);
        path.set(at, s);
        self.climb(path, path.len, true);
        t
    }

    /// How many nodes satisfy `before`, which must hold for a prefix of the order.
    pub(super) fn count_before(&self, before: impl Fn(&Node) -> bool) -> usize {
        let mut t = self.root;
        let mut count = 0;
        while t != NIL {
            let n = self.node(t);
            if before(n) {
                count += self.size(n.left) + 1;
                t = n.right;
            } else {
                t = n.left;
            }
        }
        count
    }

    /// Walk `count` nodes from ascending position `rank`, upwards or (with `rev`) down.
    pub(super) fn iter_from(&self, rank: usize, count: usize, rev: bool) -> TreeIter<'_> {
        let len = self.len();
        let mut walk = TreeIter {
            nodes: &self.nodes,
            stack: Vec::new(),
            remaining: 0,
            rev,
        };
        if rank >= len || count == 0 {
            return walk;
        }
        walk.remaining = count.min(if rev { rank + 1 } else { len - rank });
        walk.stack.reserve(usize::from(self.height(self.root)));
        let (mut t, mut r) = (self.root, rank);
        while t != NIL {
            let n = self.node(t);
            let left_size = self.size(n.left);
            match r.cmp(&left_size) {
                Ordering::Less => {
                    if !rev {
                        walk.stack.push(t);
                    }
                    t = n.left;
                }
                Ordering::Equal => {
                    walk.stack.push(t);
                    break;
                }
                Ordering::Greater => {
                    if rev {
                        walk.stack.push(t);
                    }
                    r -= left_size + 1;
                    t = n.right;
                }
            }
        }
        walk
    }

    /// A perfectly balanced tree over `items`, which are in key order.
    pub(super) fn from_sorted(items: Vec<(Bytes, f64)>) -> Tree {
        let nodes = items
            .into_iter()
            .map(|(member, score)| Node {
                member,
                score,
                left: NIL,
                right: NIL,
                size: 1,
                height: 1,
            })
            .collect();
        let mut tree = Tree {
            nodes,
            free: Vec::new(),
            root: NIL,
        };
        tree.root = tree.build(0, tree.nodes.len());
        tree
    }

    /// Take every member out in key order, leaving the tree empty.
    pub(super) fn drain_sorted(&mut self) -> Vec<(Bytes, f64)> {
        let order: Vec<u32> = {
            let mut walk = self.iter_from(0, self.len(), false);
            std::iter::from_fn(|| walk.next_index()).collect()
        };
        let items = order
            .into_iter()
            .map(|t| {
                let n = self.node_mut(t);
                (std::mem::take(&mut n.member), n.score)
            })
            .collect();
        *self = Tree::new();
        items
    }

    /// Link arena positions `[lo, hi)` (already in key order) into a balanced subtree.
    pub(super) fn build(&mut self, lo: usize, hi: usize) -> u32 {
        if lo >= hi {
            return NIL;
        }
        let mid = lo + (hi - lo) / 2;
        let l = self.build(lo, mid);
        let r = self.build(mid + 1, hi);
        // Positions come from an arena that already fit u32 indexes.
        let t = mid as u32;
        let n = self.node_mut(t);
        n.left = l;
        n.right = r;
        self.update(t);
        t
    }

    /// Assert AVL shape, sizes and heights under `t`; returns (size, height).
    #[cfg(test)]
    pub(super) fn check(&self, t: u32) -> (usize, u8) {
        if t == NIL {
            return (0, 0);
        }
        let n = self.node(t);
        let (ls, lh) = self.check(n.left);
        let (rs, rh) = self.check(n.right);
        assert!(lh.abs_diff(rh) <= 1, "unbalanced node");
        assert_eq!(n.size as usize, ls + rs + 1, "stale size");
        assert_eq!(n.height, lh.max(rh) + 1, "stale height");
        (ls + rs + 1, n.height)
    }
}

/// In-order walk of the tree from a seek position.
#[derive(Clone)]
pub(super) struct TreeIter<'a> {
    pub(super) nodes: &'a [Node],
    /// Nodes still to visit, next on top: the seek path plus subtrees' spines.
    pub(super) stack: Vec<u32>,
    pub(super) remaining: usize,
    pub(super) rev: bool,
}

impl<'a> TreeIter<'a> {
    pub(super) fn next_index(&mut self) -> Option<u32> {
        if self.remaining == 0 {
            return None;
        }
        let t = self.stack.pop()?;
        self.remaining -= 1;
        if self.remaining > 0 {
            let n = &self.nodes[t as usize];
            let mut c = if self.rev { n.left } else { n.right };
            while c != NIL {
                self.stack.push(c);
                let cn = &self.nodes[c as usize];
                c = if self.rev { cn.right } else { cn.left };
            }
        }
        Some(t)
    }

    pub(super) fn next_node(&mut self) -> Option<&'a Node> {
        let t = self.next_index()?;
        Some(&self.nodes[t as usize])
    }
}

/// Most nodes on a root-to-leaf path: an AVL tree of height h holds at least
/// Fibonacci(h + 2) - 1 nodes, over 2^32 (the arena's limit) by h = 46.
const MAX_HEIGHT: usize = 48;

/// A root-to-node path, kept on the stack.
struct Path {
    nodes: [u32; MAX_HEIGHT],
    len: usize,
}

impl Path {
    fn new() -> Path {
        Path {
            nodes: [NIL; MAX_HEIGHT],
            len: 0,
        }
    }

    fn push(&mut self, t: u32) {
        self.nodes[self.len] = t;
        self.len += 1;
    }

    fn at(&self, i: usize) -> u32 {
        self.nodes[i]
    }

    fn set(&mut self, i: usize, t: u32) {
        self.nodes[i] = t;
    }
}
