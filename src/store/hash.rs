//! Hash values and their two encodings, Redis's listpack and hash table.
//!
//! A seed limiter keeps one small hash per client (a sliding window's two counters, a
//! token bucket's tokens and time), so a server holds millions of hashes of a few short
//! fields. A small hash is therefore its fields and values back to back ([`Compact`], this
//! module's own layout in the role of Redis's listpack: each pair a header with both
//! lengths, then the field's bytes and the value's, in insertion order; see
//! [`pair_header_size`]), inside the value itself up to 29
//! bytes (a seed sliding window's one or two counters) and in one exact-size allocation
//! beyond (`store::small::Packed`), and becomes an insertion-ordered hash table
//! ([`IndexMap`]) for good when it would pass `hash-max-listpack-entries` fields or gets
//! a field or value longer than
//! `hash-max-listpack-value` bytes: the moment Redis 7.0 converts (`hashTypeSet` checks
//! both on every set, HINCRBY's and HINCRBYFLOAT's results included; nothing converts
//! back). Lookups in the compact form are a linear scan of at most a few kilobytes, as
//! in Redis. Both forms iterate in insertion order (what a small Redis hash answers to
//! HGETALL). Deleting keeps that order, except in a table past [`ORDERED_REMOVE_MAX`]
//! fields (swap removal), so with `hash-max-listpack-entries` above it the encoding can
//! show in the order after HDEL; a cluster node keeps the thresholds at their defaults
//! for that reason.
//!
//! The layout is not Redis's listpack byte format: DUMP writes a listpack from any
//! representation (`persistence::rdb`), and the simpler length-prefixed layout makes
//! lookups cheaper than listpack's integer encodings and back-lengths would. A pair of a
//! field of up to 14 bytes and a value of up to 15 (every pair of a seed limiter's hash)
//! has a one-byte header, its two lengths as nibbles: `bench/memory.sh`'s 5-field hash is
//! 47 bytes, mimalloc's 48-byte class, where a LEB128 length before each string made it 52
//! (the 56-byte class; Redis's listpack of it is 55, also 56). Longer strings take one
//! escape byte more than a length apiece would. The layout is internal: snapshots and DUMP
//! write the pairs, never these bytes.

use std::ops::Range;

use bytes::Bytes;
use indexmap::IndexMap;

use super::small::Packed;
use super::varint::{len_size, take, write_len};
use super::KeyHasher;

/// The large form: field -> value in insertion order.
pub type Table = IndexMap<Bytes, Bytes, KeyHasher>;

/// Tables at most this long delete in order-preserving O(n) like a listpack; larger ones
/// use O(1) swap removal.
const ORDERED_REMOVE_MAX: usize = 512;

/// The thresholds of the compact form (`hash-max-listpack-entries`, `-value`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HashLimits {
    /// Most fields a compact hash holds.
    pub entries: usize,
    /// Longest field or value a compact hash holds.
    pub value: usize,
}

impl Default for HashLimits {
    /// Redis 7.0's compiled-in defaults (what `redis-server` without a config file uses).
    fn default() -> Self {
        HashLimits {
            entries: 512,
            value: 64,
        }
    }
}

/// A Redis hash.
#[derive(Clone, Debug)]
pub enum HashValue {
    /// Small: Redis's `listpack` encoding.
    Compact(Compact),
    /// Large: Redis's `hashtable` encoding (boxed: the value enum stays small).
    Table(Box<Table>),
}

impl Default for HashValue {
    fn default() -> Self {
        HashValue::Compact(Compact::default())
    }
}

/// Fields and values back to back, each pair a header ([`pair_header_size`]) then the
/// field's bytes and the value's, with the number of fields (inline in the value up to
/// [`PACKED_INLINE`](super::small::PACKED_INLINE) bytes).
#[derive(Clone, Debug, Default)]
pub struct Compact(Packed);

/// Longest field whose length a short pair header holds.
const SHORT_FIELD: usize = 14;
/// Longest value whose length a short pair header holds.
const SHORT_VALUE: usize = 15;
/// First header byte of a pair with a short field and a longer value (the field's length
/// in its low nibble, then the value's as a LEB128 varint).
const LONG_VALUE: u8 = 0xF0;
/// Header byte of a pair with a longer field (both lengths follow as LEB128 varints).
const LONG_FIELD: u8 = 0xFF;
/// Longest pair header: the escape byte and two 10-byte varints.
const PAIR_HEADER_MAX: usize = 21;

/// Bytes of the header of a pair of a `field`-byte field and a `value`-byte value: one
/// byte (`field << 4 | value`) when the field has at most [`SHORT_FIELD`] bytes and the
/// value at most [`SHORT_VALUE`]; one byte and the value's varint when only the field is
/// short; one byte and both varints otherwise.
pub fn pair_header_size(field: usize, value: usize) -> usize {
    if field > SHORT_FIELD {
        1 + len_size(field) + len_size(value)
    } else if value > SHORT_VALUE {
        1 + len_size(value)
    } else {
        1
    }
}

/// Write the header of a pair (see [`pair_header_size`]) at the start of `out`; returns
/// its size.
fn write_pair_header(out: &mut [u8; PAIR_HEADER_MAX], field: usize, value: usize) -> usize {
    if field > SHORT_FIELD {
        out[0] = LONG_FIELD;
        let n = 1 + write_len(&mut out[1..], field);
        n + write_len(&mut out[n..], value)
    } else if value > SHORT_VALUE {
        out[0] = LONG_VALUE | field as u8;
        1 + write_len(&mut out[1..], value)
    } else {
        out[0] = ((field as u8) << 4) | value as u8;
        1
    }
}

/// Read the pair at `*pos`: the ranges of its field and value, moving `*pos` past it.
#[inline]
fn take_pair(buf: &[u8], pos: &mut usize) -> (Range<usize>, Range<usize>) {
    let h = buf[*pos];
    *pos += 1;
    if h < LONG_VALUE {
        let f = *pos..*pos + usize::from(h >> 4);
        let v = f.end..f.end + usize::from(h & 0x0F);
        *pos = v.end;
        (f, v)
    } else if h < LONG_FIELD {
        let flen = usize::from(h & 0x0F);
        let mut v = take(buf, pos);
        // `take` found the value's bytes right after its varint; the field comes first.
        let f = v.start..v.start + flen;
        v = f.end..v.end + flen;
        *pos = v.end;
        (f, v)
    } else {
        // `take` reads a length and skips that many bytes; here the value's length comes
        // between the field's length and the field's bytes, so each is re-based.
        let flen = take(buf, pos);
        let mut at = flen.start;
        let vlen = take(buf, &mut at);
        let f = vlen.start..vlen.start + flen.len();
        let v = f.end..f.end + vlen.len();
        *pos = v.end;
        (f, v)
    }
}

/// Where one field/value pair sits in a compact buffer.
struct Slot {
    /// Start of the pair's header.
    start: usize,
    /// The value's bytes.
    value: Range<usize>,
}

impl Compact {
    /// Number of fields.
    #[inline]
    fn len(&self) -> usize {
        self.0.meta() as usize
    }

    #[inline]
    fn buf(&self) -> &[u8] {
        self.0.as_slice()
    }

    fn find(&self, field: &[u8]) -> Option<Slot> {
        let buf = self.buf();
        let mut pos = 0;
        while pos < buf.len() {
            let start = pos;
            let (f, value) = take_pair(buf, &mut pos);
            if &buf[f] == field {
                return Some(Slot { start, value });
            }
        }
        None
    }

    fn iter(&self) -> CompactIter<'_> {
        CompactIter {
            buf: self.buf(),
            pos: 0,
        }
    }

    /// The buffer with `buf[cut]` replaced by the pair `insert` (if any), and `count`
    /// fields.
    fn splice(&mut self, count: usize, cut: Range<usize>, insert: Option<(&[u8], &[u8])>) {
        let old = self.buf();
        let add = insert.map_or(0, |(f, v)| {
            pair_header_size(f.len(), v.len()) + f.len() + v.len()
        });
        let out = Packed::build(count as u32, old.len() - cut.len() + add, |w| {
            w.put(&old[..cut.start]);
            if let Some((f, v)) = insert {
                let mut header = [0; PAIR_HEADER_MAX];
                let n = write_pair_header(&mut header, f.len(), v.len());
                w.put(&header[..n]);
                w.put(f);
                w.put(v);
            }
            w.put(&old[cut.end..]);
        });
        self.0 = out;
    }

    /// Set `field` to `value`; true when the field is new.
    fn insert(&mut self, field: &[u8], value: &[u8]) -> bool {
        match self.find(field) {
            Some(slot) if slot.value.len() == value.len() => {
                self.0.as_mut_slice()[slot.value].copy_from_slice(value);
                false
            }
            Some(slot) => {
                // The header holds the value's length: the pair is written anew in place.
                self.splice(self.len(), slot.start..slot.value.end, Some((field, value)));
                false
            }
            None => {
                let end = self.buf().len();
                self.splice(self.len() + 1, end..end, Some((field, value)));
                true
            }
        }
    }

    /// Remove `field`, keeping the order of the others; true when it was there.
    fn remove(&mut self, field: &[u8]) -> bool {
        let Some(slot) = self.find(field) else {
            return false;
        };
        self.splice(self.len() - 1, slot.start..slot.value.end, None);
        true
    }

    fn to_table(&self) -> Table {
        let mut t = Table::with_capacity_and_hasher(self.len() + 1, KeyHasher);
        for (f, v) in self.iter() {
            t.insert(Bytes::copy_from_slice(f), Bytes::copy_from_slice(v));
        }
        t
    }
}

/// The pairs of a compact hash in order.
pub struct CompactIter<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Iterator for CompactIter<'a> {
    type Item = (&'a [u8], &'a [u8]);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.buf.len() {
            return None;
        }
        let (f, v) = take_pair(self.buf, &mut self.pos);
        Some((&self.buf[f], &self.buf[v]))
    }
}

/// The field/value pairs of a hash in insertion order.
pub enum Iter<'a> {
    /// Of a compact hash.
    Compact(CompactIter<'a>),
    /// Of a table.
    Table(indexmap::map::Iter<'a, Bytes, Bytes>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], &'a [u8]);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Compact(i) => i.next(),
            Iter::Table(i) => i.next().map(|(f, v)| (&f[..], &v[..])),
        }
    }
}

impl HashValue {
    /// Number of fields.
    pub fn len(&self) -> usize {
        match self {
            HashValue::Compact(c) => c.len(),
            HashValue::Table(t) => t.len(),
        }
    }

    /// Whether there are no fields.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The encoding OBJECT ENCODING reports: `listpack` or `hashtable`.
    pub fn encoding(&self) -> &'static str {
        match self {
            HashValue::Compact(_) => "listpack",
            HashValue::Table(_) => "hashtable",
        }
    }

    /// The value of `field`.
    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        match self {
            HashValue::Compact(c) => c.find(field).map(|s| &c.buf()[s.value]),
            HashValue::Table(t) => t.get(field).map(|v| &v[..]),
        }
    }

    /// Whether `field` exists.
    pub fn contains_key(&self, field: &[u8]) -> bool {
        match self {
            HashValue::Compact(c) => c.find(field).is_some(),
            HashValue::Table(t) => t.contains_key(field),
        }
    }

    /// The pairs in insertion order.
    pub fn iter(&self) -> Iter<'_> {
        match self {
            HashValue::Compact(c) => Iter::Compact(c.iter()),
            HashValue::Table(t) => Iter::Table(t.iter()),
        }
    }

    /// The `i`th pair in insertion order (O(1) in a table, O(i) in a compact hash).
    pub fn get_index(&self, i: usize) -> Option<(&[u8], &[u8])> {
        match self {
            HashValue::Compact(c) => c.iter().nth(i),
            HashValue::Table(t) => t.get_index(i).map(|(f, v)| (&f[..], &v[..])),
        }
    }

    /// Whether `get_index` is O(1).
    pub fn indexes_fast(&self) -> bool {
        matches!(self, HashValue::Table(_))
    }

    /// Set `field` to `value`, converting to a table when Redis would (the field or value
    /// is longer than `limits.value`, or the hash then has more than `limits.entries`
    /// fields). True when the field is new.
    pub fn insert(&mut self, field: &[u8], value: &[u8], limits: HashLimits) -> bool {
        if let HashValue::Compact(c) = self {
            if field.len() > limits.value || value.len() > limits.value {
                *self = HashValue::Table(Box::new(c.to_table()));
            } else {
                let added = c.insert(field, value);
                if c.len() > limits.entries {
                    *self = HashValue::Table(Box::new(c.to_table()));
                }
                return added;
            }
        }
        let HashValue::Table(t) = self else {
            unreachable!("converted above")
        };
        match t.get_mut(field) {
            Some(v) => {
                *v = Bytes::copy_from_slice(value);
                false
            }
            None => {
                t.insert(Bytes::copy_from_slice(field), Bytes::copy_from_slice(value));
                true
            }
        }
    }

    /// Remove `field`, keeping the others' order (a table longer than 512 fields moves its
    /// last field into the hole). True when it was there.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        match self {
            HashValue::Compact(c) => c.remove(field),
            HashValue::Table(t) if t.len() <= ORDERED_REMOVE_MAX => t.shift_remove(field).is_some(),
            HashValue::Table(t) => t.swap_remove(field).is_some(),
        }
    }

    /// A hash of `pairs` in order, encoded as Redis encodes a loaded hash (compact when
    /// within `limits`); `None` when a field repeats.
    pub fn from_pairs<F, V>(
        pairs: impl IntoIterator<Item = (F, V)>,
        limits: HashLimits,
    ) -> Option<Self>
    where
        F: AsRef<[u8]>,
        V: AsRef<[u8]>,
    {
        let mut h = HashValue::default();
        for (f, v) in pairs {
            if !h.insert(f.as_ref(), v.as_ref(), limits) {
                return None;
            }
        }
        Some(h)
    }

    /// The same pairs encoded by `limits` as if loaded (RESTORE of a value decoded by the
    /// default thresholds).
    pub fn reencode(self, limits: HashLimits) -> Self {
        let fits = self.len() <= limits.entries
            && self
                .iter()
                .all(|(f, v)| f.len() <= limits.value && v.len() <= limits.value);
        match (&self, fits) {
            (HashValue::Compact(_), true) => self,
            (HashValue::Compact(_), false) => self.into_table(),
            (HashValue::Table(_), true) => Self::from_pairs(self.iter(), limits).unwrap_or(self),
            (HashValue::Table(_), false) => self,
        }
    }

    /// The same pairs as a table (a snapshot restores a hash that was a table as one).
    pub fn into_table(self) -> Self {
        match self {
            HashValue::Compact(c) => HashValue::Table(Box::new(c.to_table())),
            t => t,
        }
    }

    /// A rough count of the heap bytes held, for INFO memory.
    pub fn memory_estimate(&self) -> usize {
        match self {
            HashValue::Compact(c) => c.0.heap_bytes(),
            HashValue::Table(t) => t.iter().map(|(k, v)| k.len() + v.len() + 64).sum(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::small::PACKED_INLINE;
    use super::*;

    fn limits(entries: usize, value: usize) -> HashLimits {
        HashLimits { entries, value }
    }

    #[test]
    fn value_stays_small() {
        // 32 bytes (a `Packed` payload and the variant's tag in its spare values) keeps
        // a `Value` at 40, its string variant's size.
        assert_eq!(std::mem::size_of::<HashValue>(), 32);
        assert_eq!(std::mem::size_of::<crate::store::Value>(), 40);
    }

    #[test]
    fn compact_sets_updates_and_removes_in_order() {
        let lim = HashLimits::default();
        let mut h = HashValue::default();
        assert!(h.insert(b"a", b"1", lim));
        assert!(h.insert(b"b", b"22", lim));
        assert!(h.insert(b"c", b"", lim));
        assert!(!h.insert(b"a", b"9", lim));
        assert!(!h.insert(b"b", &[b'x'; 60], lim));
        assert_eq!(h.encoding(), "listpack");
        assert_eq!(h.len(), 3);
        assert_eq!(h.get(b"b"), Some(&[b'x'; 60][..]));
        assert_eq!(h.get(b"c"), Some(&b""[..]));
        assert_eq!(h.get(b"d"), None);
        let pairs: Vec<_> = h.iter().map(|(f, _)| f.to_vec()).collect();
        assert_eq!(pairs, [b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);
        assert!(h.remove(b"b"));
        assert!(!h.remove(b"b"));
        assert_eq!(h.get_index(1), Some((&b"c"[..], &b""[..])));
        assert_eq!(h.len(), 2);
        assert!(h.remove(b"a") && h.remove(b"c") && h.is_empty());
    }

    #[test]
    fn converts_where_redis_does_and_never_back() {
        let mut h = HashValue::default();
        for i in 0..3 {
            h.insert(format!("f{i}").as_bytes(), b"v", limits(3, 4));
        }
        assert_eq!(h.encoding(), "listpack");
        h.insert(b"f3", b"v", limits(3, 4));
        assert_eq!(h.encoding(), "hashtable");
        h.remove(b"f3");
        h.remove(b"f2");
        assert_eq!(h.encoding(), "hashtable");
        let pairs: Vec<_> = h.iter().map(|(f, _)| f.to_vec()).collect();
        assert_eq!(pairs, [b"f0".to_vec(), b"f1".to_vec()]);

        let mut long = HashValue::default();
        long.insert(b"f", b"1234", limits(3, 4));
        assert_eq!(long.encoding(), "listpack");
        long.insert(b"f", b"12345", limits(3, 4));
        assert_eq!(long.encoding(), "hashtable");
        assert_eq!(long.get(b"f"), Some(&b"12345"[..]));
        let mut field = HashValue::default();
        field.insert(b"12345", b"", limits(3, 4));
        assert_eq!(field.encoding(), "hashtable");
        let mut none = HashValue::default();
        none.insert(b"f", b"v", limits(0, 4));
        assert_eq!(none.encoding(), "hashtable");
    }

    #[test]
    fn inline_and_allocated_payloads_answer_alike() {
        // Each pair `fN`/`vN` is 5 bytes (a 1-byte header): five pairs sit in the value
        // (25 bytes), the sixth passes 29 and moves the pairs to an allocation, and
        // removals bring them back inline.
        let lim = HashLimits::default();
        let mut h = HashValue::default();
        let mut model: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        let check = |h: &HashValue, model: &Vec<(Vec<u8>, Vec<u8>)>| {
            let pairs: Vec<_> = h.iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect();
            assert_eq!(&pairs, model);
            assert_eq!(h.len(), model.len());
            let bytes: usize = model
                .iter()
                .map(|(f, v)| pair_header_size(f.len(), v.len()) + f.len() + v.len())
                .sum();
            let heap = if bytes > PACKED_INLINE { bytes } else { 0 };
            assert_eq!(h.memory_estimate(), heap);
        };
        for i in 0..8 {
            let (f, v) = (format!("f{i}").into_bytes(), format!("v{i}").into_bytes());
            assert!(h.insert(&f, &v, lim));
            model.push((f, v));
            check(&h, &model);
        }
        assert!(!h.insert(b"f2", b"longer value", lim));
        model[2].1 = b"longer value".to_vec();
        check(&h, &model);
        for f in ["f0", "f7", "f2", "f5"] {
            assert!(h.remove(f.as_bytes()));
            model.retain(|(k, _)| k != f.as_bytes());
            check(&h, &model);
        }
        assert!(!h.insert(b"f3", b"", lim));
        model[1].1 = Vec::new();
        check(&h, &model);
        assert_eq!(h.encoding(), "listpack");
    }

    #[test]
    fn pair_headers_round_trip_at_every_boundary() {
        // Lengths on both sides of each header form's limits, in pairs of every mix, each
        // hash's payload exactly the headers and the bytes, read back in order.
        let lens = [0, 1, 14, 15, 16, 127, 128, 300, 20_000];
        let lim = limits(100, 100_000);
        for &fl in &lens {
            let mut h = HashValue::default();
            let mut model = Vec::new();
            for (i, &vl) in lens.iter().enumerate() {
                let mut f = vec![b'f'; fl];
                if fl > 0 {
                    f[0] = i as u8;
                } else if i > 0 {
                    continue; // one empty field only
                }
                let v = vec![i as u8 + 1; vl];
                assert!(h.insert(&f, &v, lim));
                model.push((f, v));
            }
            let pairs: Vec<_> = h.iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect();
            assert_eq!(pairs, model);
            for (f, v) in &model {
                assert_eq!(h.get(f), Some(&v[..]));
            }
            let HashValue::Compact(c) = &h else {
                panic!("within the limits a hash stays compact")
            };
            let size: usize = model
                .iter()
                .map(|(f, v)| pair_header_size(f.len(), v.len()) + f.len() + v.len())
                .sum();
            assert_eq!(c.buf().len(), size);
            // Rewriting each value with a length from another header form moves the pair's
            // header with it; removing each in turn keeps the rest readable.
            for (i, (f, v)) in model.iter_mut().enumerate() {
                *v = vec![b'v'; lens[(i + 4) % lens.len()]];
                assert!(!h.insert(f, v, lim));
            }
            let pairs: Vec<_> = h.iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect();
            assert_eq!(pairs, model);
            while let Some((f, _)) = model.first().cloned() {
                assert!(h.remove(&f));
                model.remove(0);
                let pairs: Vec<_> = h.iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect();
                assert_eq!(pairs, model);
            }
        }
        assert_eq!(pair_header_size(14, 15), 1);
        assert_eq!(pair_header_size(14, 16), 2);
        assert_eq!(pair_header_size(15, 0), 3);
        assert_eq!(pair_header_size(14, 128), 3);
    }

    #[test]
    fn a_seed_window_hash_of_five_fields_takes_47_bytes() {
        // bench/memory.sh's hash: mimalloc's 48-byte class (Redis's listpack: 55 bytes).
        let h = HashValue::from_pairs(
            [
                ("cur", "17"),
                ("prev", "42"),
                ("start", "1700000000"),
                ("limit", "100"),
                ("window", "60"),
            ],
            HashLimits::default(),
        )
        .expect("distinct fields");
        assert_eq!(h.memory_estimate(), 47);
    }

    #[test]
    fn long_lengths_round_trip() {
        let lim = limits(10, 100_000);
        let big = vec![7u8; 20_000];
        let mut h = HashValue::default();
        h.insert(&big, &big[..300], lim);
        h.insert(b"x", &big, lim);
        assert_eq!(h.get(&big), Some(&big[..300]));
        assert_eq!(h.get(b"x"), Some(&big[..]));
        assert!(HashValue::from_pairs([("a", "1"), ("a", "2")], lim).is_none());
    }
}
