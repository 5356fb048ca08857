//! List values: one packed buffer while small, a deque of packed chunks once large.
//!
//! Redis 7.0 keeps every list as a quicklist of listpacks of up to 8 KB
//! (`list-max-listpack-size -2`), so a small list is one contiguous allocation. A small list
//! here is the same idea ([`Packed`]): its items back to back in one exact-size allocation,
//! each a LEB128 length then its bytes (the layout of `store::hash`'s compact hashes). A
//! push that would take the buffer past [`PACKED_MAX_BYTES`] turns the list into a
//! [`Chunked`] list for good: a `VecDeque` of [`Chunk`]s, each an 8 KB buffer of items with
//! its free room at both ends, so a push at either end writes the item's bytes next to the
//! last one (no allocation, no move of the others) and a pop moves an offset; a new chunk
//! is allocated every 8 KB. That is Redis's quicklist without the memmove its listpacks do
//! on a head insert. The items are copies: 200,000 LPUSHes of a 3-byte item
//! (redis-benchmark's LPUSH) grow `used_memory` by 5 bytes an item, as on redis-server
//! 7.0.15, where the earlier deque of `Bytes` took 99 (a 32-byte slot plus the request
//! buffer each item was a slice of: fresh memory written on every push). Pushes and pops
//! at both ends are O(1); LINDEX, LRANGE and LSET skip whole chunks by their counts (from
//! the nearer end) and scan one chunk, as Redis's quicklist does; LSET rewrites that one
//! chunk; LTRIM drops whole chunks. LINSERT and LREM rebuild the list
//! ([`ListValue::edit`]: O(n), as in Redis). The form is not visible to clients (Redis 7.0
//! answers `quicklist` to OBJECT ENCODING for every list), and both iterate in list order.

use std::collections::VecDeque;

use bytes::Bytes;

use super::varint::{len_size, put_len, take, write_len};

/// Largest packed buffer: one quicklist node under `list-max-listpack-size -2`.
pub const PACKED_MAX_BYTES: usize = 8192;

/// A Redis list.
#[derive(Clone, Debug)]
pub enum ListValue {
    /// Small: the items packed in one buffer.
    Packed(Packed),
    /// Large: a deque of chunks (boxed: the value enum stays small).
    Chunked(Box<Chunked>),
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

/// Bytes of a new chunk of a large list: one quicklist node under
/// `list-max-listpack-size -2`. (Smaller under test, so that short proptest runs cross
/// many chunks.)
#[cfg(not(test))]
const CHUNK_BYTES: usize = 8192;
#[cfg(test)]
const CHUNK_BYTES: usize = 600;

/// Bytes one item takes in a chunk: its length before and after its bytes.
fn entry_size(n: usize) -> usize {
    2 * len_size(n) + n
}

/// Write `v` as a chunk entry at the start of `out` (exactly [`entry_size`] long): its
/// length as a varint, its bytes, then the varint's bytes in reverse order, so that the
/// entry reads from either end.
fn write_entry(out: &mut [u8], v: &[u8]) {
    let k = write_len(out, v.len());
    out[k..k + v.len()].copy_from_slice(v);
    let (head, tail) = out.split_at_mut(k + v.len());
    for (to, from) in tail.iter_mut().zip(head[..k].iter().rev()) {
        *to = *from;
    }
}

/// The range of the bytes of the entry that ends at `end`, and where that entry starts.
fn take_back(buf: &[u8], end: usize) -> (std::ops::Range<usize>, usize) {
    let (mut pos, mut n, mut shift) = (end, 0usize, 0);
    loop {
        pos -= 1;
        let b = buf[pos];
        n |= ((b & 0x7f) as usize) << shift;
        if b < 0x80 {
            break;
        }
        shift += 7;
    }
    let k = end - pos;
    (pos - n..pos, pos - n - k)
}

/// Items of a large list in one buffer, `buf[start..end]`, with free room at both ends.
#[derive(Clone, Debug)]
pub struct Chunk {
    buf: Box<[u8]>,
    start: u32,
    end: u32,
    count: u32,
}

impl Chunk {
    /// A chunk holding `v` alone, at the end of its buffer when it will grow towards the
    /// head, else at the start.
    fn new(v: &[u8], at_head: bool) -> Chunk {
        let size = entry_size(v.len());
        let mut buf = vec![0u8; size.max(CHUNK_BYTES)].into_boxed_slice();
        let start = if at_head { buf.len() - size } else { 0 };
        write_entry(&mut buf[start..start + size], v);
        Chunk {
            start: start as u32,
            end: (start + size) as u32,
            count: 1,
            buf,
        }
    }

    /// Chunks holding `items` in order, each filled up to [`CHUNK_BYTES`].
    fn pack<'a>(items: impl IntoIterator<Item = &'a [u8]>) -> VecDeque<Chunk> {
        let mut chunks = VecDeque::new();
        for v in items {
            let added = chunks
                .back_mut()
                .is_some_and(|c: &mut Chunk| c.push_back(v));
            if !added {
                chunks.push_back(Chunk::new(v, false));
            }
        }
        chunks
    }

    /// Add `v` before the first item; false when there is no room.
    fn push_front(&mut self, v: &[u8]) -> bool {
        let size = entry_size(v.len());
        let start = self.start as usize;
        if size > start {
            return false;
        }
        write_entry(&mut self.buf[start - size..start], v);
        self.start = (start - size) as u32;
        self.count += 1;
        true
    }

    /// Add `v` after the last item; false when there is no room.
    fn push_back(&mut self, v: &[u8]) -> bool {
        let size = entry_size(v.len());
        let end = self.end as usize;
        if size > self.buf.len() - end {
            return false;
        }
        write_entry(&mut self.buf[end..end + size], v);
        self.end = (end + size) as u32;
        self.count += 1;
        true
    }

    /// Remove the first item (the chunk has one).
    fn pop_front(&mut self) -> Bytes {
        let mut pos = self.start as usize;
        let r = take(&self.buf, &mut pos);
        let v = Bytes::copy_from_slice(&self.buf[r.clone()]);
        self.start = (r.end + len_size(r.len())) as u32;
        self.count -= 1;
        v
    }

    /// Remove the last item (the chunk has one).
    fn pop_back(&mut self) -> Bytes {
        let (r, entry_start) = take_back(&self.buf, self.end as usize);
        let v = Bytes::copy_from_slice(&self.buf[r]);
        self.end = entry_start as u32;
        self.count -= 1;
        v
    }

    /// Drop the first `n` items (fewer than the chunk holds).
    fn drop_front(&mut self, n: usize) {
        let mut pos = self.start as usize;
        for _ in 0..n {
            let r = take(&self.buf, &mut pos);
            pos = r.end + len_size(r.len());
        }
        self.start = pos as u32;
        self.count -= n as u32;
    }

    /// Drop the last `n` items (fewer than the chunk holds).
    fn drop_back(&mut self, n: usize) {
        let mut end = self.end as usize;
        for _ in 0..n {
            end = take_back(&self.buf, end).1;
        }
        self.end = end as u32;
        self.count -= n as u32;
    }

    /// Replace item `i` (within the chunk) by `v`: the chunk's bytes are copied once into
    /// a buffer of the new size.
    fn replace(&mut self, i: usize, v: &[u8]) {
        let mut pos = self.start as usize;
        for _ in 0..i {
            let r = take(&self.buf, &mut pos);
            pos = r.end + len_size(r.len());
        }
        let at = pos;
        let r = take(&self.buf, &mut pos);
        let after = r.end + len_size(r.len());
        let (start, end) = (self.start as usize, self.end as usize);
        let size = entry_size(v.len());
        let used = (at - start) + size + (end - after);
        let mut buf = vec![0u8; used.max(CHUNK_BYTES)].into_boxed_slice();
        buf[..at - start].copy_from_slice(&self.buf[start..at]);
        write_entry(&mut buf[at - start..at - start + size], v);
        buf[at - start + size..used].copy_from_slice(&self.buf[after..end]);
        self.buf = buf;
        self.start = 0;
        self.end = used as u32;
    }

    fn iter(&self) -> ChunkIter<'_> {
        ChunkIter {
            buf: &self.buf[..self.end as usize],
            pos: self.start as usize,
        }
    }
}

/// The items of a chunk, in order.
#[derive(Clone)]
pub struct ChunkIter<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Iterator for ChunkIter<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        if self.pos >= self.buf.len() {
            return None;
        }
        let r = take(self.buf, &mut self.pos);
        self.pos += len_size(r.len());
        Some(&self.buf[r])
    }
}

/// A large list: chunks of items, with the total count.
#[derive(Clone, Debug, Default)]
pub struct Chunked {
    chunks: VecDeque<Chunk>,
    len: usize,
}

impl Chunked {
    fn from_items<'a>(items: impl IntoIterator<Item = &'a [u8]>) -> Chunked {
        let chunks = Chunk::pack(items);
        let len = chunks.iter().map(|c| c.count as usize).sum();
        Chunked { chunks, len }
    }

    fn push_front(&mut self, v: &[u8]) {
        if !self.chunks.front_mut().is_some_and(|c| c.push_front(v)) {
            self.chunks.push_front(Chunk::new(v, true));
        }
        self.len += 1;
    }

    fn push_back(&mut self, v: &[u8]) {
        if !self.chunks.back_mut().is_some_and(|c| c.push_back(v)) {
            self.chunks.push_back(Chunk::new(v, false));
        }
        self.len += 1;
    }

    fn pop_front(&mut self) -> Option<Bytes> {
        let c = self.chunks.front_mut()?;
        let v = c.pop_front();
        if c.count == 0 {
            self.chunks.pop_front();
        }
        self.len -= 1;
        Some(v)
    }

    fn pop_back(&mut self) -> Option<Bytes> {
        let c = self.chunks.back_mut()?;
        let v = c.pop_back();
        if c.count == 0 {
            self.chunks.pop_back();
        }
        self.len -= 1;
        Some(v)
    }

    /// The chunk holding item `i` (below `len`) and the item's place in it, counted from
    /// whichever end of the list is nearer.
    fn locate(&self, i: usize) -> (usize, usize) {
        if i < self.len / 2 {
            let mut rest = i;
            for (k, c) in self.chunks.iter().enumerate() {
                if rest < c.count as usize {
                    return (k, rest);
                }
                rest -= c.count as usize;
            }
        } else {
            let mut rest = self.len - 1 - i;
            for (k, c) in self.chunks.iter().enumerate().rev() {
                if rest < c.count as usize {
                    return (k, c.count as usize - 1 - rest);
                }
                rest -= c.count as usize;
            }
        }
        unreachable!("an index below the list's length is in one of its chunks")
    }

    /// The items from `i` on (`i` at most `len`).
    fn iter_from(&self, i: usize) -> ChunkedIter<'_> {
        if i >= self.len {
            return ChunkedIter {
                chunks: self.chunks.range(self.chunks.len()..),
                cur: None,
            };
        }
        let (k, at) = self.locate(i);
        let mut cur = self.chunks[k].iter();
        for _ in 0..at {
            cur.next();
        }
        ChunkedIter {
            chunks: self.chunks.range(k + 1..),
            cur: Some(cur),
        }
    }

    /// Keep the items `s..=e` (both within the list).
    fn trim(&mut self, s: usize, e: usize) {
        let mut front = s;
        while let Some(c) = self.chunks.front_mut() {
            if (c.count as usize) <= front {
                front -= c.count as usize;
                self.chunks.pop_front();
            } else {
                c.drop_front(front);
                break;
            }
        }
        let mut back = self.len - 1 - e;
        while let Some(c) = self.chunks.back_mut() {
            if (c.count as usize) <= back {
                back -= c.count as usize;
                self.chunks.pop_back();
            } else {
                c.drop_back(back);
                break;
            }
        }
        self.len = e + 1 - s;
    }
}

/// The items of a chunked list from some point on.
#[derive(Clone)]
pub struct ChunkedIter<'a> {
    chunks: std::collections::vec_deque::Iter<'a, Chunk>,
    cur: Option<ChunkIter<'a>>,
}

impl<'a> Iterator for ChunkedIter<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        loop {
            if let Some(v) = self.cur.as_mut().and_then(|c| c.next()) {
                return Some(v);
            }
            self.cur = Some(self.chunks.next()?.iter());
        }
    }
}

/// The items of a list as slices of its buffers.
pub enum Slices<'a> {
    /// Over a packed list.
    Packed(PackedIter<'a>),
    /// Over a chunked list.
    Chunked(ChunkedIter<'a>),
}

impl<'a> Iterator for Slices<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        match self {
            Slices::Packed(p) => p.next(),
            Slices::Chunked(c) => c.next(),
        }
    }
}

/// The items of a list, each copied into its own bytes.
pub struct Iter<'a>(Slices<'a>);

impl Iterator for Iter<'_> {
    type Item = Bytes;
    fn next(&mut self) -> Option<Bytes> {
        self.0.next().map(Bytes::copy_from_slice)
    }
}

impl ListValue {
    /// Number of items.
    pub fn len(&self) -> usize {
        match self {
            ListValue::Packed(p) => p.len as usize,
            ListValue::Chunked(c) => c.len,
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

    /// The items in order, as slices.
    fn slices(&self) -> Slices<'_> {
        self.slices_from(0)
    }

    /// The items from `i` on, as slices: a chunked list skips whole chunks to `i`.
    fn slices_from(&self, i: usize) -> Slices<'_> {
        match self {
            ListValue::Packed(p) => {
                let mut it = p.iter();
                for _ in 0..i {
                    it.next();
                }
                Slices::Packed(it)
            }
            ListValue::Chunked(c) => Slices::Chunked(c.iter_from(i)),
        }
    }

    /// The items in order.
    pub fn iter(&self) -> Iter<'_> {
        Iter(self.slices())
    }

    /// Whether an item equals `v`.
    pub fn contains(&self, v: &[u8]) -> bool {
        self.slices().any(|x| x == v)
    }

    /// The item at `i`.
    pub fn get(&self, i: usize) -> Option<Bytes> {
        if i >= self.len() {
            return None;
        }
        self.slices_from(i).next().map(Bytes::copy_from_slice)
    }

    /// The items `s..=e` (both within the list).
    pub fn range(&self, s: usize, e: usize) -> Vec<Bytes> {
        self.slices_from(s)
            .take(e + 1 - s)
            .map(Bytes::copy_from_slice)
            .collect()
    }

    /// The position of the first item equal to `v`.
    pub fn position(&self, v: &[u8]) -> Option<usize> {
        self.slices().position(|x| x == v)
    }

    /// The positions of items equal to `v` among the items at `window` (positions in the
    /// whole list), in order: one pass over that window only.
    pub fn positions(&self, v: &[u8], window: std::ops::Range<usize>) -> Vec<usize> {
        let start = window.start;
        self.slices_from(start)
            .take(window.len())
            .enumerate()
            .filter(|(_, x)| *x == v)
            .map(|(i, _)| start + i)
            .collect()
    }

    fn chunked(&mut self) -> &mut Chunked {
        if let ListValue::Packed(p) = self {
            let c = Chunked::from_items(p.iter());
            *self = ListValue::Chunked(Box::new(c));
        }
        match self {
            ListValue::Chunked(c) => c,
            ListValue::Packed(_) => unreachable!("converted above"),
        }
    }

    /// Add (a copy of) `v` at the head.
    pub fn push_front(&mut self, v: &[u8]) {
        match self {
            ListValue::Chunked(c) => c.push_front(v),
            ListValue::Packed(p) if p.grown(v) <= PACKED_MAX_BYTES => p.push_front(v),
            _ => self.chunked().push_front(v),
        }
    }

    /// Add (a copy of) `v` at the tail.
    pub fn push_back(&mut self, v: &[u8]) {
        match self {
            ListValue::Chunked(c) => c.push_back(v),
            ListValue::Packed(p) if p.grown(v) <= PACKED_MAX_BYTES => p.push_back(v),
            _ => self.chunked().push_back(v),
        }
    }

    /// Remove the head item.
    pub fn pop_front(&mut self) -> Option<Bytes> {
        match self {
            ListValue::Packed(p) => p.pop_front(),
            ListValue::Chunked(c) => c.pop_front(),
        }
    }

    /// Remove the tail item.
    pub fn pop_back(&mut self) -> Option<Bytes> {
        match self {
            ListValue::Packed(p) => p.pop_back(),
            ListValue::Chunked(c) => c.pop_back(),
        }
    }

    /// Replace the item at `i` (within the list) by `v` (LSET): a chunked list rewrites
    /// the one chunk that holds it.
    pub fn set(&mut self, i: usize, v: &Bytes) {
        match self {
            ListValue::Chunked(c) => {
                let (k, at) = c.locate(i);
                c.chunks[k].replace(at, v);
            }
            ListValue::Packed(_) => self.edit(|l| l[i] = v.clone()),
        }
    }

    /// Keep only the items `s..=e` (both within the list), or none (LTRIM): a chunked list
    /// drops whole chunks and moves the offsets of the two it cuts.
    pub fn trim(&mut self, keep: Option<(usize, usize)>) {
        match (self, keep) {
            (ListValue::Chunked(c), Some((s, e))) => c.trim(s, e),
            (ListValue::Chunked(c), None) => **c = Chunked::default(),
            (l, keep) => l.edit(|l| match keep {
                None => l.clear(),
                Some((s, e)) => {
                    l.truncate(e + 1);
                    l.drain(..s);
                }
            }),
        }
    }

    /// Edit the items as a deque (LREM, LINSERT): the list is copied out, edited and
    /// rebuilt, packed if it was and still fits.
    pub fn edit<R>(&mut self, f: impl FnOnce(&mut VecDeque<Bytes>) -> R) -> R {
        let mut d: VecDeque<Bytes> = self.iter().collect();
        let r = f(&mut d);
        let size: usize = d.iter().map(|v| len_size(v.len()) + v.len()).sum();
        *self = if self.is_packed() && size <= PACKED_MAX_BYTES {
            ListValue::Packed(Packed::from_items(d.iter().map(|v| &v[..])))
        } else {
            ListValue::Chunked(Box::new(Chunked::from_items(d.iter().map(|v| &v[..]))))
        };
        r
    }

    /// A list of `items`, packed when they fit: the form pushing them one by one would
    /// give (packed up to the item that would pass [`PACKED_MAX_BYTES`], chunked from
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
                let mut c = Chunked::from_items(packed.iter());
                c.push_back(&v);
                for v in items {
                    c.push_back(&v);
                }
                return ListValue::Chunked(Box::new(c));
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
            ListValue::Chunked(c) => c.chunks.iter().map(|k| k.buf.len() + 24).sum(),
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
        Trim(usize, usize),
        Insert(usize, usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        // Item lengths up to 300 (two-byte lengths), so the buffer passes 8 KB, and now
        // and then one longer than a chunk (600 bytes under test).
        let len = prop_oneof![20 => 0usize..300, 1 => 590usize..700];
        prop_oneof![
            4 => len.clone().prop_map(Op::PushFront),
            4 => len.clone().prop_map(Op::PushBack),
            1 => Just(Op::PopFront),
            1 => Just(Op::PopBack),
            1 => (0usize..64, len).prop_map(|(i, n)| Op::Set(i, n)),
            1 => (0usize..64).prop_map(Op::Remove),
            1 => (0usize..8, 0usize..8).prop_map(|(s, e)| Op::Trim(s, e)),
            1 => (0usize..64, 0usize..300).prop_map(|(i, n)| Op::Insert(i, n)),
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
            for v in &items {
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
                    Op::PushFront(n) => { l.push_front(&item(n)); d.push_front(item(n)); }
                    Op::PushBack(n) => { l.push_back(&item(n)); d.push_back(item(n)); }
                    Op::PopFront => prop_assert_eq!(l.pop_front(), d.pop_front()),
                    Op::PopBack => prop_assert_eq!(l.pop_back(), d.pop_back()),
                    Op::Set(i, n) => {
                        if i < d.len() {
                            l.set(i, &item(n));
                            d[i] = item(n);
                        }
                    }
                    Op::Remove(i) => {
                        prop_assert_eq!(l.edit(|x| x.remove(i)), d.remove(i));
                    }
                    Op::Insert(i, n) => {
                        if i <= d.len() {
                            l.edit(|x| x.insert(i, item(n)));
                            d.insert(i, item(n));
                        }
                    }
                    // Drop `s` items from the head and `e` from the tail (LTRIM s -1-e),
                    // or everything when that leaves none.
                    Op::Trim(s, e) => {
                        let keep = (s + e < d.len()).then(|| (s, d.len() - 1 - e));
                        l.trim(keep);
                        match keep {
                            Some((s, e)) => {
                                d.truncate(e + 1);
                                d.drain(..s);
                            }
                            None => d.clear(),
                        }
                    }
                }
                prop_assert_eq!(l.len(), d.len());
                prop_assert_eq!(l.iter().collect::<Vec<_>>(), d.iter().cloned().collect::<Vec<_>>());
                if !d.is_empty() {
                    let last = d.len() - 1;
                    for i in [0, last / 3, last / 2, last - last / 3, last] {
                        prop_assert_eq!(l.get(i), d.get(i).cloned());
                        prop_assert_eq!(l.range(i, last), d.range(i..=last).cloned().collect::<Vec<_>>());
                    }
                    prop_assert_eq!(l.range(0, last / 2), d.range(0..=last / 2).cloned().collect::<Vec<_>>());
                    let v = d[last / 2].clone();
                    prop_assert_eq!(l.position(&v), d.iter().position(|x| *x == v));
                    let want: Vec<usize> = (1..d.len()).filter(|&i| d[i] == v).collect();
                    prop_assert_eq!(l.positions(&v, 1..d.len()), want);
                }
                prop_assert_eq!(l.get(d.len()), None);
            }
        }
    }
}
