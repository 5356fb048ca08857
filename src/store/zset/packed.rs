//! The listpack form of a small sorted set: every member in one exact-size byte buffer,
//! in `(score, member)` order, each entry its score as 8 raw bytes (the `f64`'s bits,
//! little-endian) then the member as a varint length and its bytes (`store::varint`).
//!
//! A seed sliding log keeps one small sorted set per client, so a server holds millions
//! of them: one allocation per set, instead of a vector of entries plus one allocation per
//! member, is what brings a 10-member set to Redis's size (Redis's listpack is also one
//! allocation). Scores lead each entry so that score-range scans read the 8 bytes at a
//! fixed place and skip the member by its length. Raw scores cost a byte or two more than
//! Redis's integer encodings for integral scores but are exact without a conversion and
//! compare without decoding text. Lookups, ranks and inserts are scans of at most
//! `zset-max-listpack-entries` entries, as in Redis; an insert is one `realloc` and one
//! `memmove`, a score change moves the entry inside the buffer (same size) without any
//! allocation. There is no back-link per entry: a reverse walk first collects the entry
//! offsets of its window.
//!
//! The layout is not Redis's listpack byte format: DUMP writes a listpack from any
//! representation (`persistence::rdb`).

use std::cmp::Ordering;
use std::ops::Range;

use bytes::Bytes;

use super::super::varint::{len_size, put_len, take, write_len};
use super::{cmp_key, InsertResult};

/// Bytes of a score in an entry.
const SCORE: usize = 8;

/// The members of a small sorted set, back to back in order.
#[derive(Clone, Default)]
pub(super) struct Packed {
    /// Number of entries.
    len: u32,
    buf: Box<[u8]>,
}

/// Where a member sits.
pub(super) struct Found {
    /// Its ascending position.
    pub(super) rank: usize,
    /// Its entry's bytes in the buffer.
    pub(super) at: Range<usize>,
    /// Its score.
    pub(super) score: f64,
}

/// Read the entry at `*pos`: its score and its member's byte range; `*pos` moves past it.
#[inline]
fn read(buf: &[u8], pos: &mut usize) -> (f64, Range<usize>) {
    let mut bits = [0; SCORE];
    bits.copy_from_slice(&buf[*pos..*pos + SCORE]);
    *pos += SCORE;
    let member = take(buf, pos);
    (f64::from_le_bytes(bits), member)
}

/// Bytes of an entry for `member`.
fn entry_size(member: &[u8]) -> usize {
    SCORE + len_size(member.len()) + member.len()
}

/// Append the entry `(score, member)` to `out`.
fn put_entry(out: &mut Vec<u8>, score: f64, member: &[u8]) {
    out.extend_from_slice(&score.to_le_bytes());
    put_len(out, member.len());
    out.extend_from_slice(member);
}

impl Packed {
    /// A set of `items`, which are in strictly ascending `(score, member)` order.
    pub(super) fn from_sorted<'a>(items: impl Iterator<Item = (&'a [u8], f64)> + Clone) -> Packed {
        let size = items.clone().map(|(m, _)| entry_size(m)).sum();
        let mut out = Vec::with_capacity(size);
        let mut len = 0u32;
        for (m, s) in items {
            put_entry(&mut out, s, m);
            len += 1;
        }
        Packed {
            len,
            buf: out.into_boxed_slice(),
        }
    }

    /// Number of members.
    pub(super) fn len(&self) -> usize {
        self.len as usize
    }

    /// Bytes of the buffer.
    pub(super) fn bytes(&self) -> usize {
        self.buf.len()
    }

    /// Where `member` is, by a scan.
    pub(super) fn find(&self, member: &[u8]) -> Option<Found> {
        let buf = &self.buf[..];
        let mut pos = 0;
        let mut rank = 0;
        while pos < buf.len() {
            let start = pos;
            let (score, m) = read(buf, &mut pos);
            if buf[m] == *member {
                return Some(Found {
                    rank,
                    at: start..pos,
                    score,
                });
            }
            rank += 1;
        }
        None
    }

    /// How many entries satisfy `before(score, member)`, a prefix of the order.
    pub(super) fn count_before(&self, before: impl Fn(f64, &[u8]) -> bool) -> usize {
        let mut walk = self.walk(0);
        let mut n = 0;
        while let Some((_, s, m)) = walk.next_entry() {
            if !before(s, m) {
                break;
            }
            n += 1;
        }
        n
    }

    /// The byte offset of the entry at ascending position `rank` (the buffer's end for
    /// `rank == len`).
    pub(super) fn offset_of(&self, rank: usize) -> usize {
        let buf = &self.buf[..];
        let mut pos = 0;
        for _ in 0..rank.min(self.len()) {
            read(buf, &mut pos);
        }
        pos
    }

    /// Forward walk from byte offset `pos` (an entry boundary).
    pub(super) fn walk(&self, pos: usize) -> Walk<'_> {
        Walk {
            buf: &self.buf,
            pos,
        }
    }

    /// Set `member`'s score (already as a listpack keeps it: never `-0`), adding the
    /// member if new.
    pub(super) fn insert(&mut self, member: &[u8], score: f64) -> InsertResult {
        match self.find(member) {
            Some(f) if f.score == score => InsertResult::Unchanged,
            Some(f) => {
                self.move_entry(f.at, score, member);
                InsertResult::Updated { old: f.score }
            }
            None => {
                let at = self.insertion_point(score, member, None);
                self.splice(at..at, score, Some(member));
                self.len += 1;
                InsertResult::Added
            }
        }
    }

    /// Remove `member`; its score if it was present.
    pub(super) fn remove(&mut self, member: &[u8]) -> Option<f64> {
        let f = self.find(member)?;
        self.splice(f.at, 0.0, None);
        self.len -= 1;
        Some(f.score)
    }

    /// Remove ascending positions `[lo, hi)` (within the set); returns the member bytes
    /// removed.
    pub(super) fn remove_ranks(&mut self, lo: usize, hi: usize) -> usize {
        let start = self.offset_of(lo);
        let mut walk = self.walk(start);
        let mut member_bytes = 0;
        for _ in lo..hi {
            if let Some((_, _, m)) = walk.next_entry() {
                member_bytes += m.len();
            }
        }
        let end = walk.pos;
        self.splice(start..end, 0.0, None);
        self.len -= (hi - lo) as u32;
        member_bytes
    }

    /// Copies of the entries at ascending positions `[lo, hi)`.
    pub(super) fn items(&self, lo: usize, hi: usize) -> Vec<(Bytes, f64)> {
        let mut walk = self.walk(self.offset_of(lo));
        (lo..hi)
            .map_while(|_| walk.next_entry())
            .map(|(_, s, m)| (Bytes::copy_from_slice(m), s))
            .collect()
    }

    /// The byte offset where `(score, member)` belongs, skipping the entry at `skip`.
    fn insertion_point(&self, score: f64, member: &[u8], skip: Option<usize>) -> usize {
        let mut walk = self.walk(0);
        loop {
            let at = walk.pos;
            match walk.next_entry() {
                None => return at,
                Some((start, s, m)) => {
                    if Some(start) != skip && cmp_key(s, m, score, member) == Ordering::Greater {
                        return at;
                    }
                }
            }
        }
    }

    /// Give the entry at `at` (holding `member`) the new `score`, moving it to its place:
    /// its size does not change, so the bytes in between shift and nothing is allocated.
    fn move_entry(&mut self, at: Range<usize>, score: f64, member: &[u8]) {
        let to = self.insertion_point(score, member, Some(at.start));
        let size = at.len();
        let start = if to <= at.start {
            self.buf[to..at.end].rotate_right(size);
            to
        } else {
            self.buf[at.start..to].rotate_left(size);
            to - size
        };
        self.buf[start..start + SCORE].copy_from_slice(&score.to_le_bytes());
    }

    /// Replace the bytes `range` with the entry `(score, member)`, or with nothing.
    fn splice(&mut self, range: Range<usize>, score: f64, member: Option<&[u8]>) {
        let old = std::mem::take(&mut self.buf).into_vec();
        let add = member.map_or(0, entry_size);
        let mut out = old;
        let tail = range.end..out.len();
        if add > range.len() {
            // Grow in place where the allocator can (one realloc), then open the gap.
            let grow = add - range.len();
            out.reserve_exact(grow);
            out.resize(out.len() + grow, 0);
            out.copy_within(tail, range.end + grow);
        } else {
            let shrink = range.len() - add;
            out.copy_within(tail.clone(), range.end - shrink);
            out.truncate(out.len() - shrink);
        }
        if let Some(member) = member {
            let entry = &mut out[range.start..range.start + add];
            entry[..SCORE].copy_from_slice(&score.to_le_bytes());
            let n = write_len(&mut entry[SCORE..], member.len());
            entry[SCORE + n..].copy_from_slice(member);
        }
        self.buf = out.into_boxed_slice();
    }
}

/// A forward walk over a [`Packed`] set's entries.
#[derive(Clone, Default)]
pub(super) struct Walk<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Walk<'a> {
    /// The next entry: its byte offset, score and member.
    #[inline]
    pub(super) fn next_entry(&mut self) -> Option<(usize, f64, &'a [u8])> {
        if self.pos >= self.buf.len() {
            return None;
        }
        let start = self.pos;
        let (s, m) = read(self.buf, &mut self.pos);
        Some((start, s, &self.buf[m]))
    }

    /// The entry at byte offset `pos`.
    pub(super) fn entry_at(&self, pos: usize) -> (f64, &'a [u8]) {
        let mut p = pos;
        let (s, m) = read(self.buf, &mut p);
        (s, &self.buf[m])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contents(p: &Packed) -> Vec<(Vec<u8>, f64)> {
        let mut w = p.walk(0);
        std::iter::from_fn(|| w.next_entry())
            .map(|(_, s, m)| (m.to_vec(), s))
            .collect()
    }

    #[test]
    fn inserts_updates_and_removals_keep_the_order_and_size() {
        let mut p = Packed::default();
        assert_eq!(p.insert(b"b", 2.0), InsertResult::Added);
        assert_eq!(p.insert(b"a", 2.0), InsertResult::Added);
        assert_eq!(p.insert(b"c", 1.0), InsertResult::Added);
        assert_eq!(p.insert(&[b'x'; 200], 9.0), InsertResult::Added);
        assert_eq!(p.insert(b"a", 2.0), InsertResult::Unchanged);
        let names = |p: &Packed| {
            contents(p)
                .into_iter()
                .map(|(m, _)| m.len())
                .collect::<Vec<_>>()
        };
        assert_eq!(names(&p), [1, 1, 1, 200]);
        assert_eq!(p.insert(b"c", 3.0), InsertResult::Updated { old: 1.0 });
        assert_eq!(
            p.insert(&[b'x'; 200], -1.0),
            InsertResult::Updated { old: 9.0 }
        );
        assert_eq!(
            contents(&p)
                .iter()
                .map(|(m, s)| (m.len(), *s))
                .collect::<Vec<_>>(),
            [(200, -1.0), (1, 2.0), (1, 2.0), (1, 3.0)]
        );
        assert_eq!(p.find(b"b").map(|f| f.rank), Some(2));
        assert_eq!(p.bytes(), 4 * SCORE + 3 * 2 + 2 + 200);
        assert_eq!(p.remove(b"a"), Some(2.0));
        assert_eq!(p.remove(b"a"), None);
        assert_eq!(p.remove_ranks(0, 2), 201);
        assert_eq!(contents(&p), [(b"c".to_vec(), 3.0)]);
        assert_eq!((p.len(), p.bytes()), (1, SCORE + 2));
    }
}
