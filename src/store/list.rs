//! List values: one packed buffer while small, a deque of items once large.
//!
//! Redis 7.0 keeps every list as a quicklist of listpacks of up to 8 KB
//! (`list-max-listpack-size -2`), so a small list is one contiguous allocation. A small list
//! here is the same idea ([`Packed`]): its items back to back in one exact-size allocation,
//! each a LEB128 length then its bytes (the layout of `store::hash`'s compact hashes). A
//! push that would take the buffer past [`PACKED_MAX_BYTES`] turns the list into a
//! [`VecDeque`] of items for good, so the operations on a big list (pushes and pops at both
//! ends, LINDEX, LRANGE) stay O(1) per item as before; on a packed list they are a copy or
//! a scan of at most 8 KB, as in one listpack node. The form is not visible to clients
//! (Redis 7.0 answers `quicklist` to OBJECT ENCODING for every list), and both iterate in
//! list order.
//!
//! The packed form copies each item: a deque's items may be slices of a request frame,
//! which a long-lived small list should not keep alive.

use std::collections::VecDeque;

use bytes::Bytes;

use super::varint::{len_size, put_len, take};

/// Largest packed buffer: one quicklist node under `list-max-listpack-size -2`.
pub const PACKED_MAX_BYTES: usize = 8192;

/// A Redis list.
#[derive(Clone, Debug)]
pub enum ListValue {
    /// Small: the items packed in one buffer.
    Packed(Packed),
    /// Large: a ring buffer of items (boxed: the value enum stays small).
    Deque(Box<VecDeque<Bytes>>),
}

impl Default for ListValue {
    fn default() -> Self {
        ListValue::Packed(Packed::default())
    }
}

/// Items back to back, each a LEB128 length and its bytes.
#[derive(Clone, Debug, Default)]
pub struct Packed {
    len: u32,
    buf: Box<[u8]>,
}

/// The items of a packed buffer, in order.
pub struct PackedIter<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Iterator for PackedIter<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        (self.pos < self.buf.len()).then(|| &self.buf[take(self.buf, &mut self.pos)])
    }
}

impl Packed {
    fn iter(&self) -> PackedIter<'_> {
        PackedIter {
            buf: &self.buf,
            pos: 0,
        }
    }

    /// Start offset of the last item (the lengths are read forward: no back-lengths).
    fn last_start(&self) -> Option<usize> {
        let mut pos = 0;
        let mut last = None;
        while pos < self.buf.len() {
            last = Some(pos);
            take(&self.buf, &mut pos);
        }
        last
    }

    /// Bytes the buffer would have with `v` added.
    fn grown(&self, v: &[u8]) -> usize {
        self.buf.len() + len_size(v.len()) + v.len()
    }

    fn push_back(&mut self, v: &[u8]) {
        let mut b = std::mem::take(&mut self.buf).into_vec();
        b.reserve_exact(len_size(v.len()) + v.len());
        put_len(&mut b, v.len());
        b.extend_from_slice(v);
        self.buf = b.into_boxed_slice();
        self.len += 1;
    }

    fn push_front(&mut self, v: &[u8]) {
        let mut b = Vec::with_capacity(self.grown(v));
        put_len(&mut b, v.len());
        b.extend_from_slice(v);
        b.extend_from_slice(&self.buf);
        self.buf = b.into_boxed_slice();
        self.len += 1;
    }

    /// Remove the bytes `start..end` of the buffer (one item).
    fn cut(&mut self, start: usize, end: usize) {
        let mut b = Vec::with_capacity(self.buf.len() - (end - start));
        b.extend_from_slice(&self.buf[..start]);
        b.extend_from_slice(&self.buf[end..]);
        self.buf = b.into_boxed_slice();
        self.len -= 1;
    }

    fn pop_front(&mut self) -> Option<Bytes> {
        if self.len == 0 {
            return None;
        }
        let mut pos = 0;
        let r = take(&self.buf, &mut pos);
        let v = Bytes::copy_from_slice(&self.buf[r]);
        self.cut(0, pos);
        Some(v)
    }

    fn pop_back(&mut self) -> Option<Bytes> {
        let start = self.last_start()?;
        let mut pos = start;
        let r = take(&self.buf, &mut pos);
        let v = Bytes::copy_from_slice(&self.buf[r]);
        self.cut(start, pos);
        Some(v)
    }

    fn from_items<'a>(items: impl IntoIterator<Item = &'a [u8]>) -> Packed {
        let mut b = Vec::new();
        let mut len = 0;
        for v in items {
            put_len(&mut b, v.len());
            b.extend_from_slice(v);
            len += 1;
        }
        Packed {
            len,
            buf: b.into_boxed_slice(),
        }
    }
}

impl FromIterator<Bytes> for ListValue {
    fn from_iter<I: IntoIterator<Item = Bytes>>(items: I) -> Self {
        ListValue::from_items(items)
    }
}

/// The items of a list, each as bytes (a packed list's are copied as they come).
pub enum Iter<'a> {
    /// Over a packed list.
    Packed(PackedIter<'a>),
    /// Over a deque.
    Deque(std::collections::vec_deque::Iter<'a, Bytes>),
}

impl Iterator for Iter<'_> {
    type Item = Bytes;
    fn next(&mut self) -> Option<Bytes> {
        match self {
            Iter::Packed(p) => p.next().map(Bytes::copy_from_slice),
            Iter::Deque(d) => d.next().cloned(),
        }
    }
}

impl ListValue {
    /// Number of items.
    pub fn len(&self) -> usize {
        match self {
            ListValue::Packed(p) => p.len as usize,
            ListValue::Deque(d) => d.len(),
        }
    }

    /// Whether there are no items.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the list is packed (for tests and memory reports).
    pub fn is_packed(&self) -> bool {
        matches!(self, ListValue::Packed(_))
    }

    /// The items in order.
    pub fn iter(&self) -> Iter<'_> {
        match self {
            ListValue::Packed(p) => Iter::Packed(p.iter()),
            ListValue::Deque(d) => Iter::Deque(d.iter()),
        }
    }

    /// Whether an item equals `v`.
    pub fn contains(&self, v: &[u8]) -> bool {
        match self {
            ListValue::Packed(p) => p.iter().any(|x| x == v),
            ListValue::Deque(d) => d.iter().any(|x| x == v),
        }
    }

    /// The item at `i`.
    pub fn get(&self, i: usize) -> Option<Bytes> {
        match self {
            ListValue::Packed(p) => p.iter().nth(i).map(Bytes::copy_from_slice),
            ListValue::Deque(d) => d.get(i).cloned(),
        }
    }

    /// The items `s..=e` (both within the list).
    pub fn range(&self, s: usize, e: usize) -> Vec<Bytes> {
        match self {
            ListValue::Packed(p) => p
                .iter()
                .skip(s)
                .take(e + 1 - s)
                .map(Bytes::copy_from_slice)
                .collect(),
            ListValue::Deque(d) => d.range(s..=e).cloned().collect(),
        }
    }

    /// The position of the first item equal to `v`.
    pub fn position(&self, v: &[u8]) -> Option<usize> {
        match self {
            ListValue::Packed(p) => p.iter().position(|x| x == v),
            ListValue::Deque(d) => d.iter().position(|x| x == v),
        }
    }

    /// The positions of items equal to `v` among the items at `window` (positions in the
    /// whole list), in order: one pass over that window only.
    pub fn positions(&self, v: &[u8], window: std::ops::Range<usize>) -> Vec<usize> {
        let start = window.start;
        match self {
            ListValue::Packed(p) => p
                .iter()
                .enumerate()
                .skip(start)
                .take(window.len())
                .filter(|(_, x)| *x == v)
                .map(|(i, _)| i)
                .collect(),
            ListValue::Deque(d) => d
                .range(window)
                .enumerate()
                .filter(|(_, x)| *x == v)
                .map(|(i, _)| start + i)
                .collect(),
        }
    }

    fn unpacked(&mut self) -> &mut VecDeque<Bytes> {
        if let ListValue::Packed(p) = self {
            let d: VecDeque<Bytes> = p.iter().map(Bytes::copy_from_slice).collect();
            *self = ListValue::Deque(Box::new(d));
        }
        match self {
            ListValue::Deque(d) => d,
            ListValue::Packed(_) => unreachable!("converted above"),
        }
    }

    /// Add `v` at the head.
    pub fn push_front(&mut self, v: Bytes) {
        match self {
            ListValue::Packed(p) if p.grown(&v) <= PACKED_MAX_BYTES => p.push_front(&v),
            _ => self.unpacked().push_front(v),
        }
    }

    /// Add `v` at the tail.
    pub fn push_back(&mut self, v: Bytes) {
        match self {
            ListValue::Packed(p) if p.grown(&v) <= PACKED_MAX_BYTES => p.push_back(&v),
            _ => self.unpacked().push_back(v),
        }
    }

    /// Remove the head item.
    pub fn pop_front(&mut self) -> Option<Bytes> {
        match self {
            ListValue::Packed(p) => p.pop_front(),
            ListValue::Deque(d) => d.pop_front(),
        }
    }

    /// Remove the tail item.
    pub fn pop_back(&mut self) -> Option<Bytes> {
        match self {
            ListValue::Packed(p) => p.pop_back(),
            ListValue::Deque(d) => d.pop_back(),
        }
    }

    /// Edit the items as a deque (LSET, LTRIM, LREM, LINSERT): a packed list is unpacked,
    /// edited and packed again if it still fits.
    pub fn edit<R>(&mut self, f: impl FnOnce(&mut VecDeque<Bytes>) -> R) -> R {
        let was_packed = self.is_packed();
        let r = f(self.unpacked());
        if was_packed {
            if let ListValue::Deque(d) = self {
                let size: usize = d.iter().map(|v| len_size(v.len()) + v.len()).sum();
                if size <= PACKED_MAX_BYTES {
                    *self = ListValue::Packed(Packed::from_items(d.iter().map(|v| &v[..])));
                }
            }
        }
        r
    }

    /// A list of `items`, packed when they fit: the form pushing them one by one would
    /// give (packed up to the item that would pass [`PACKED_MAX_BYTES`], a deque from
    /// then on), built in one pass.
    pub fn from_items(items: impl IntoIterator<Item = Bytes>) -> ListValue {
        let mut items = items.into_iter();
        let mut b = Vec::new();
        let mut len = 0;
        while let Some(v) = items.next() {
            if b.len() + len_size(v.len()) + v.len() > PACKED_MAX_BYTES {
                let packed = Packed {
                    len,
                    buf: b.into_boxed_slice(),
                };
                let mut d: VecDeque<Bytes> = packed.iter().map(Bytes::copy_from_slice).collect();
                d.push_back(v);
                d.extend(items);
                return ListValue::Deque(Box::new(d));
            }
            put_len(&mut b, v.len());
            b.extend_from_slice(&v);
            len += 1;
        }
        ListValue::Packed(Packed {
            len,
            buf: b.into_boxed_slice(),
        })
    }

    /// A rough count of the heap bytes held, for INFO memory.
    pub fn memory_estimate(&self) -> usize {
        match self {
            ListValue::Packed(p) => p.buf.len(),
            ListValue::Deque(d) => d.iter().map(|v| v.len() + 32).sum(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn value_stays_small() {
        assert!(std::mem::size_of::<ListValue>() <= 24);
    }

    #[derive(Debug, Clone)]
    enum Op {
        PushFront(usize),
        PushBack(usize),
        PopFront,
        PopBack,
        Set(usize, usize),
        Remove(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        // Item lengths up to 300 (two-byte lengths), so the buffer passes 8 KB.
        prop_oneof![
            4 => (0usize..300).prop_map(Op::PushFront),
            4 => (0usize..300).prop_map(Op::PushBack),
            1 => Just(Op::PopFront),
            1 => Just(Op::PopBack),
            1 => (0usize..64, 0usize..300).prop_map(|(i, n)| Op::Set(i, n)),
            1 => (0usize..64).prop_map(Op::Remove),
        ]
    }

    proptest! {
        /// `from_items` builds what pushing the items one by one builds: the same items
        /// in the same form (packed up to the item that would pass 8 KB).
        #[test]
        fn from_items_is_pushing_one_by_one(lens in proptest::collection::vec(0usize..600, 0..60)) {
            let items: Vec<Bytes> = lens
                .iter()
                .enumerate()
                .map(|(k, &n)| Bytes::from(vec![b'a' + (k % 26) as u8; n]))
                .collect();
            let built = ListValue::from_items(items.clone());
            let mut pushed = ListValue::default();
            for v in items.iter().cloned() {
                pushed.push_back(v);
            }
            prop_assert_eq!(built.is_packed(), pushed.is_packed());
            prop_assert_eq!(built.len(), items.len());
            prop_assert_eq!(built.iter().collect::<Vec<_>>(), items);
            if let (ListValue::Packed(a), ListValue::Packed(b)) = (&built, &pushed) {
                prop_assert_eq!(&a.buf, &b.buf);
            }
        }

        /// A list that may be packed and a plain deque answer every operation alike.
        #[test]
        fn packed_and_deque_lists_answer_alike(ops in proptest::collection::vec(op(), 1..200)) {
            let mut l = ListValue::default();
            let mut d: VecDeque<Bytes> = VecDeque::new();
            for (k, op) in ops.into_iter().enumerate() {
                let item = |n: usize| Bytes::from(vec![b'a' + (k % 26) as u8; n]);
                match op {
                    Op::PushFront(n) => { l.push_front(item(n)); d.push_front(item(n)); }
                    Op::PushBack(n) => { l.push_back(item(n)); d.push_back(item(n)); }
                    Op::PopFront => prop_assert_eq!(l.pop_front(), d.pop_front()),
                    Op::PopBack => prop_assert_eq!(l.pop_back(), d.pop_back()),
                    Op::Set(i, n) => {
                        if i < d.len() {
                            l.edit(|x| x[i] = item(n));
                            d[i] = item(n);
                        }
                    }
                    Op::Remove(i) => {
                        prop_assert_eq!(l.edit(|x| x.remove(i)), d.remove(i));
                    }
                }
                prop_assert_eq!(l.len(), d.len());
                prop_assert_eq!(l.iter().collect::<Vec<_>>(), d.iter().cloned().collect::<Vec<_>>());
                if !d.is_empty() {
                    let last = d.len() - 1;
                    prop_assert_eq!(l.get(last), d.get(last).cloned());
                    prop_assert_eq!(l.range(0, last / 2), d.range(0..=last / 2).cloned().collect::<Vec<_>>());
                }
            }
        }
    }
}
