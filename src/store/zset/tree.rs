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

    /// Link the detached node `new` into the tree by its key.
    pub(super) fn insert(&mut self, new: u32) {
        let n = self.node_mut(new);
        n.left = NIL;
        n.right = NIL;
        n.size = 1;
        n.height = 1;
        self.root = self.insert_under(self.root, new);
    }

    pub(super) fn insert_under(&mut self, t: u32, new: u32) -> u32 {
        if t == NIL {
            return new;
        }
        let (nn, tn) = (self.node(new), self.node(t));
        if cmp_key(nn.score, &nn.member, tn.score, &tn.member) == Ordering::Less {
            let l = self.insert_under(tn.left, new);
            self.node_mut(t).left = l;
        } else {
            let r = self.insert_under(tn.right, new);
            self.node_mut(t).right = r;
        }
        self.rebalance(t)
    }

    /// Detach the node with key (score, member); returns it, or NIL if absent.
    pub(super) fn unlink(&mut self, score: f64, member: &[u8]) -> u32 {
        let (root, gone) = self.unlink_under(self.root, score, member);
        self.root = root;
        gone
    }

    pub(super) fn unlink_under(&mut self, t: u32, score: f64, member: &[u8]) -> (u32, u32) {
        if t == NIL {
            return (NIL, NIL);
        }
        let tn = self.node(t);
        match cmp_key(score, member, tn.score, &tn.member) {
            Ordering::Less => {
                let (l, gone) = self.unlink_under(tn.left, score, member);
                self.node_mut(t).left = l;
                (self.rebalance(t), gone)
            }
            Ordering::Greater => {
                let (r, gone) = self.unlink_under(tn.right, score, member);
                self.node_mut(t).right = r;
                (self.rebalance(t), gone)
            }
            Ordering::Equal => (self.splice_out(t), t),
        }
    }

    /// Detach the node at ascending position `rank`; NIL if out of range.
    pub(super) fn unlink_at(&mut self, rank: usize) -> u32 {
        if rank >= self.len() {
            return NIL;
        }
        let (root, gone) = self.unlink_at_under(self.root, rank);
        self.root = root;
        gone
    }

    pub(super) fn unlink_at_under(&mut self, t: u32, rank: usize) -> (u32, u32) {
        if t == NIL {
            return (NIL, NIL);
        }
        let l = self.node(t).left;
        let left_size = self.size(l);
        match rank.cmp(&left_size) {
            Ordering::Less => {
                let (l, gone) = self.unlink_at_under(l, rank);
                self.node_mut(t).left = l;
                (self.rebalance(t), gone)
            }
            Ordering::Greater => {
                let r = self.node(t).right;
                let (r, gone) = self.unlink_at_under(r, rank - left_size - 1);
                self.node_mut(t).right = r;
                (self.rebalance(t), gone)
            }
            Ordering::Equal => (self.splice_out(t), t),
        }
    }

    /// Remove `t` from its subtree; returns the subtree's new root.
    pub(super) fn splice_out(&mut self, t: u32) -> u32 {
        let (l, r) = (self.node(t).left, self.node(t).right);
        if l == NIL {
            return r;
        }
        if r == NIL {
            return l;
        }
        let (r, successor) = self.unlink_min_under(r);
        let s = self.node_mut(successor);
        s.left = l;
        s.right = r;
        self.rebalance(successor)
    }

    pub(super) fn unlink_min_under(&mut self, t: u32) -> (u32, u32) {
        let l = self.node(t).left;
        if l == NIL {
            return (self.node(t).right, t);
        }
        let (l, min) = self.unlink_min_under(l);
        self.node_mut(t).left = l;
        (self.rebalance(t), min)
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
