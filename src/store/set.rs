//! Set values and their two encodings, Redis's intset and hash table.
//!
//! A small set whose members are all integers is an [`IntSet`]: the members as a sorted
//! array of little-endian integers of one width (2, 4 or 8 bytes), as Redis 7.0's intset,
//! inside the value itself up to 29 bytes (14 members of 2 bytes) and in one exact-size
//! allocation beyond (`store::small::Packed`). The width is the narrowest that held every
//! member ever added: adding a wider integer rewrites the array at the new width, and removals never
//! narrow it (Redis's `intsetUpgradeAndAdd`), so DUMP writes Redis's intset bytes. A set
//! becomes an insertion-ordered table ([`IndexSet`]) for good when a member is not an
//! integer (Redis's `string2ll`: canonical decimal of an i64, [`parse_canonical_i64`]) or
//! it would hold more than `set-max-intset-entries` members: the moment Redis 7.0's
//! `setTypeAdd` converts. The conversion inserts the integers in ascending order.
//!
//! An intset iterates in ascending order, as Redis's does (SMEMBERS, SSCAN, SPOP and
//! SRANDMEMBER by index); a table iterates in insertion order (Redis's own order there is
//! its hash table's, which no client can rely on). Which form a set has therefore shows in
//! iteration order, as it does in Redis: nodes must share `set-max-intset-entries` to
//! hold sets in the same order, so a cluster node keeps it at its default (the
//! configuration refuses any other value there).
//!
//! A table's members are [`Member`]s (so are a hash table's fields and values,
//! `store::hash`): up to 22 bytes are kept inside the table's entry, longer ones in a box
//! of their own. redis-benchmark's SADD members (`element:` and 12
//! digits, 20 bytes) were each a `Bytes` with its own allocation, so a lookup in a set of
//! 100,000 read the entry and then followed its pointer to compare the bytes: one more
//! cache miss per member looked up than Redis's dict (bucket, entry, sds). Measured with
//! `bench/cache_misses.sh` (callgrind's cache simulator, a 1 MB last level as one core's
//! L2 here; numbers in the README's issue-21 section). The enum is hand-written, 40 lines
//! of safe code: `compact_bytes` (24 bytes, 23 inline) is unsafe unions with a `Vec`-like
//! capacity word and no `Borrow<[u8]>`, so lookups by `&[u8]` would need a wrapper anyway.

use std::borrow::Borrow;
use std::hash::{Hash, Hasher};
use std::ops::Deref;

use bytes::Bytes;
use indexmap::IndexSet;

use super::small::Packed;
use super::value::parse_canonical_i64;
use super::KeyHasher;

/// The large form: members in insertion order.
pub type Table = IndexSet<Member, KeyHasher>;

/// The longest member kept inside a table entry.
pub const INLINE_MAX: usize = 22;

/// A table member: [`Inline`] bytes in 24 bytes, as a `Box<[u8]>` plus a tag.
pub type Member = Inline<INLINE_MAX>;

/// Bytes kept inside a table entry when at most `N` fit (`N + 2` bytes in all, the length
/// and a tag included; `N` below 256, the length being one byte), else boxed. Hashes and
/// compares as its bytes, so a table is searched by `&[u8]`.
#[derive(Clone)]
pub enum Inline<const N: usize> {
    /// At most `N` bytes: `bytes[..len]`.
    Inline {
        /// How many of `bytes` are the member.
        len: u8,
        /// The member, then zeros.
        bytes: [u8; N],
    },
    /// Longer members.
    Boxed(Box<[u8]>),
}

impl<const N: usize> Inline<N> {
    /// A copy of `b`.
    #[inline]
    pub fn new(b: &[u8]) -> Self {
        const { assert!(N <= u8::MAX as usize) };
        if b.len() <= N {
            let mut bytes = [0; N];
            bytes[..b.len()].copy_from_slice(b);
            Inline::Inline {
                len: b.len() as u8,
                bytes,
            }
        } else {
            Inline::Boxed(b.into())
        }
    }

    /// The bytes held outside the table entry (a long member's box).
    #[inline]
    pub fn heap_bytes(&self) -> usize {
        match self {
            Inline::Inline { .. } => 0,
            Inline::Boxed(b) => b.len(),
        }
    }
}

impl<const N: usize> Deref for Inline<N> {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        match self {
            Inline::Inline { len, bytes } => &bytes[..usize::from(*len)],
            Inline::Boxed(b) => b,
        }
    }
}

impl<const N: usize> Borrow<[u8]> for Inline<N> {
    fn borrow(&self) -> &[u8] {
        self
    }
}

impl<const N: usize> AsRef<[u8]> for Inline<N> {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl<const N: usize> Hash for Inline<N> {
    /// As `[u8]` hashes (`Borrow` requires it: tables are searched by `&[u8]`).
    #[inline]
    fn hash<H: Hasher>(&self, state: &mut H) {
        (**self).hash(state)
    }
}

impl<const N: usize> PartialEq for Inline<N> {
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl<const N: usize> Eq for Inline<N> {}

impl<const N: usize> std::fmt::Debug for Inline<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", Bytes::copy_from_slice(self))
    }
}

/// Tables at most this long delete in order-preserving O(n); larger ones use O(1) swap
/// removal.
const ORDERED_REMOVE_MAX: usize = 512;

/// Redis 7.0's `set-max-intset-entries` default.
pub const DEFAULT_INTSET_ENTRIES: usize = 512;

/// A Redis set.
#[derive(Clone, Debug)]
pub enum SetValue {
    /// Small and all integers: Redis's `intset` encoding.
    Ints(IntSet),
    /// Anything else: Redis's `hashtable` encoding (boxed: the value enum stays small).
    Table(Box<Table>),
}

impl Default for SetValue {
    fn default() -> Self {
        SetValue::Ints(IntSet::default())
    }
}

/// Sorted distinct integers of one width, little-endian, back to back; the width (2, 4
/// or 8 bytes per member) is the payload's number (inline up to
/// [`PACKED_INLINE`](super::small::PACKED_INLINE) bytes: 14 members of 2 bytes).
#[derive(Clone, Debug)]
pub struct IntSet(Packed);

impl Default for IntSet {
    fn default() -> Self {
        IntSet(Packed::new(2, &[]))
    }
}

/// The narrowest width that holds `v` (Redis's `_intsetValueEncoding`).
fn width_of(v: i64) -> u8 {
    if i16::try_from(v).is_ok() {
        2
    } else if i32::try_from(v).is_ok() {
        4
    } else {
        8
    }
}

impl IntSet {
    /// Number of members.
    pub fn len(&self) -> usize {
        self.0.as_slice().len() / self.width()
    }

    /// Whether there are no members.
    pub fn is_empty(&self) -> bool {
        self.0.as_slice().is_empty()
    }

    /// Bytes per member.
    #[inline]
    pub fn width(&self) -> usize {
        self.0.meta() as usize
    }

    /// The `i`-th smallest member.
    #[inline]
    pub fn get(&self, i: usize) -> i64 {
        let w = self.width();
        let c = &self.0.as_slice()[i * w..(i + 1) * w];
        match w {
            2 => i64::from(i16::from_le_bytes([c[0], c[1]])),
            4 => i64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]])),
            _ => i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]),
        }
    }

    /// Where `v` is, or where it would go.
    fn search(&self, v: i64) -> Result<usize, usize> {
        if usize::from(width_of(v)) > self.width() {
            // Wider than every member: below or above them all.
            return Err(if v < 0 { 0 } else { self.len() });
        }
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            match self.get(mid).cmp(&v) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Ok(mid),
            }
        }
        Err(lo)
    }

    /// Whether `v` is a member.
    pub fn contains(&self, v: i64) -> bool {
        self.search(v).is_ok()
    }

    /// Add `v`; false if it was there. A wider `v` first widens every member.
    pub fn insert(&mut self, v: i64) -> bool {
        let Err(at) = self.search(v) else {
            return false;
        };
        let width = width_of(v).max(self.width() as u8);
        let w = usize::from(width);
        let len = self.len();
        let bytes = |v: i64| v.to_le_bytes();
        let packed = Packed::build(u32::from(width), (len + 1) * w, |out| {
            if w == self.width() {
                let old = self.0.as_slice();
                out.put(&old[..at * w]);
                out.put(&bytes(v)[..w]);
                out.put(&old[at * w..]);
            } else {
                for i in 0..len {
                    if i == at {
                        out.put(&bytes(v)[..w]);
                    }
                    out.put(&bytes(self.get(i))[..w]);
                }
                if at == len {
                    out.put(&bytes(v)[..w]);
                }
            }
        });
        self.0 = packed;
        true
    }

    /// Remove `v`; false if it was not there. The width stays.
    pub fn remove(&mut self, v: i64) -> bool {
        let Ok(at) = self.search(v) else {
            return false;
        };
        let w = self.width();
        let old = self.0.as_slice();
        let packed = Packed::build(self.0.meta(), old.len() - w, |out| {
            out.put(&old[..at * w]);
            out.put(&old[(at + 1) * w..]);
        });
        self.0 = packed;
        true
    }

    /// The members in ascending order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = i64> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }

    /// Redis's intset bytes: width (u32 LE), count (u32 LE), the members.
    pub fn to_redis_bytes(&self) -> Vec<u8> {
        let data = self.0.as_slice();
        let mut out = Vec::with_capacity(8 + data.len());
        out.extend_from_slice(&self.0.meta().to_le_bytes());
        out.extend_from_slice(&(self.len() as u32).to_le_bytes());
        out.extend_from_slice(data);
        out
    }

    /// An intset from Redis's bytes, checked as Redis's deep `intsetValidateIntegrity`
    /// checks it (a known width, a size that matches the count, at least one member,
    /// strictly ascending); the width is kept.
    pub fn from_redis_bytes(buf: &[u8]) -> Option<IntSet> {
        let width = u32::from_le_bytes(buf.get(..4)?.try_into().ok()?);
        let count = u32::from_le_bytes(buf.get(4..8)?.try_into().ok()?) as usize;
        let width = u8::try_from(width)
            .ok()
            .filter(|w| matches!(w, 2 | 4 | 8))?;
        if count == 0 || count.checked_mul(usize::from(width))? + 8 != buf.len() {
            return None;
        }
        let set = IntSet(Packed::new(u32::from(width), &buf[8..]));
        (1..set.len())
            .all(|i| set.get(i - 1) < set.get(i))
            .then_some(set)
    }

    fn to_table(&self) -> Table {
        let mut t = Table::with_capacity_and_hasher(self.len() + 1, KeyHasher);
        t.extend(
            self.iter()
                .map(|v| Member::new(itoa::Buffer::new().format(v).as_bytes())),
        );
        t
    }
}

/// The decimal text of `v`.
pub fn int_bytes(v: i64) -> Bytes {
    Bytes::copy_from_slice(itoa::Buffer::new().format(v).as_bytes())
}

/// Members of a set, each as bytes (an intset's are formatted as they come).
pub enum Iter<'a> {
    /// Over an intset.
    Ints(&'a IntSet, std::ops::Range<usize>),
    /// Over a table.
    Table(indexmap::set::Iter<'a, Member>),
}

impl Iterator for Iter<'_> {
    type Item = Bytes;
    fn next(&mut self) -> Option<Bytes> {
        match self {
            Iter::Ints(s, r) => r.next().map(|i| int_bytes(s.get(i))),
            Iter::Table(t) => t.next().map(|m| Bytes::copy_from_slice(m)),
        }
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            Iter::Ints(_, r) => r.size_hint(),
            Iter::Table(t) => t.size_hint(),
        }
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl From<IntSet> for SetValue {
    fn from(s: IntSet) -> Self {
        SetValue::Ints(s)
    }
}

impl SetValue {
    /// Number of members.
    pub fn len(&self) -> usize {
        match self {
            SetValue::Ints(s) => s.len(),
            SetValue::Table(t) => t.len(),
        }
    }

    /// Whether there are no members.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// What OBJECT ENCODING answers.
    pub fn encoding(&self) -> &'static str {
        match self {
            SetValue::Ints(_) => "intset",
            SetValue::Table(_) => "hashtable",
        }
    }

    /// Whether `member` is in the set.
    pub fn contains(&self, member: &[u8]) -> bool {
        match self {
            SetValue::Ints(s) => parse_canonical_i64(member).is_some_and(|v| s.contains(v)),
            SetValue::Table(t) => t.contains(member),
        }
    }

    /// The members in iteration order (ascending for an intset, else insertion order).
    pub fn iter(&self) -> Iter<'_> {
        match self {
            SetValue::Ints(s) => Iter::Ints(s, 0..s.len()),
            SetValue::Table(t) => Iter::Table(t.iter()),
        }
    }

    /// The `i`-th member in iteration order.
    pub fn get_index(&self, i: usize) -> Option<Bytes> {
        match self {
            SetValue::Ints(s) => (i < s.len()).then(|| int_bytes(s.get(i))),
            SetValue::Table(t) => t.get_index(i).map(|m| Bytes::copy_from_slice(m)),
        }
    }

    /// Add `member`, converting to a table first when it is not an integer or the intset
    /// would pass `max_intset` members (Redis's `setTypeAdd`); false if it was there.
    pub fn insert(&mut self, member: &[u8], max_intset: usize) -> bool {
        if let SetValue::Ints(s) = self {
            match parse_canonical_i64(member) {
                Some(v) => {
                    if !s.insert(v) {
                        return false;
                    }
                    if s.len() > max_intset {
                        *self = SetValue::Table(Box::new(s.to_table()));
                    }
                    return true;
                }
                None => *self = SetValue::Table(Box::new(s.to_table())),
            }
        }
        match self {
            // A copy of the member, never a slice of the request's bytes (which a kept
            // member would pin for the set's life). An inline member costs no allocation to
            // make, so it is made first and the table searched once; a longer one is
            // allocated only when it is new.
            SetValue::Table(t) if member.len() <= INLINE_MAX => t.insert(Member::new(member)),
            SetValue::Table(t) => !t.contains(member) && t.insert(Member::new(member)),
            SetValue::Ints(_) => unreachable!("converted above"),
        }
    }

    /// Remove `member`; false if it was not there. Nothing converts back.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        match self {
            SetValue::Ints(s) => parse_canonical_i64(member).is_some_and(|v| s.remove(v)),
            SetValue::Table(t) if t.len() <= ORDERED_REMOVE_MAX => t.shift_remove(member),
            SetValue::Table(t) => t.swap_remove(member),
        }
    }

    /// A set of `members` added one by one to an empty intset (how Redis builds the
    /// result of SUNIONSTORE & co and loads an RDB set); None if a member repeats.
    pub fn try_from_members(
        members: impl IntoIterator<Item = Bytes>,
        max_intset: usize,
    ) -> Option<SetValue> {
        let mut s = SetValue::default();
        for m in members {
            if !s.insert(&m, max_intset) {
                return None;
            }
        }
        Some(s)
    }

    /// Like [`SetValue::try_from_members`], ignoring repeats.
    pub fn from_members(members: impl IntoIterator<Item = Bytes>, max_intset: usize) -> SetValue {
        let mut s = SetValue::default();
        for m in members {
            s.insert(&m, max_intset);
        }
        s
    }

    /// The same members as a table (a snapshot restores a set that was a table as one).
    pub fn into_table(self) -> SetValue {
        match self {
            SetValue::Ints(s) => SetValue::Table(Box::new(s.to_table())),
            t => t,
        }
    }

    /// The set encoded as Redis loads it under `max_intset` (RESTORE): an intset past the
    /// limit becomes a table, a table that fits is rebuilt as an intset.
    pub fn reencode(self, max_intset: usize) -> SetValue {
        match self {
            SetValue::Ints(s) if s.len() > max_intset => SetValue::Ints(s).into_table(),
            SetValue::Table(t) if t.len() <= max_intset => {
                let members: Vec<Bytes> = t.iter().map(|m| Bytes::copy_from_slice(m)).collect();
                SetValue::from_members(members, max_intset)
            }
            s => s,
        }
    }

    /// A rough count of the heap bytes held, for INFO memory.
    pub fn memory_estimate(&self) -> usize {
        match self {
            SetValue::Ints(s) => s.0.heap_bytes(),
            // An entry (the hash and a 24-byte member) and its slot in the index, plus the
            // boxes of long members.
            SetValue::Table(t) => t.iter().map(|m| 41 + m.heap_bytes()).sum(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    fn members(s: &SetValue) -> Vec<String> {
        s.iter()
            .map(|m| String::from_utf8(m.to_vec()).unwrap())
            .collect()
    }

    #[test]
    fn value_stays_small() {
        // 32 bytes (a `Packed` payload and the variant's tag in its spare values) keeps
        // a `Value` at 40, its string variant's size.
        assert_eq!(std::mem::size_of::<SetValue>(), 32);
        assert_eq!(std::mem::size_of::<crate::store::Value>(), 40);
        assert_eq!(std::mem::size_of::<Member>(), 24);
    }

    #[test]
    fn members_inline_up_to_22_bytes_and_compare_as_bytes() {
        let long = "x".repeat(INLINE_MAX + 1);
        let at_limit = "y".repeat(INLINE_MAX);
        assert!(matches!(
            Member::new(at_limit.as_bytes()),
            Member::Inline { .. }
        ));
        assert!(matches!(Member::new(long.as_bytes()), Member::Boxed(_)));
        assert!(matches!(Member::new(b""), Member::Inline { len: 0, .. }));
        // A short member is never equal to a longer one that starts with it (the zeros
        // after an inline member's bytes are not part of it).
        assert_ne!(Member::new(b"a"), Member::new(b"a\0"));
        let mut s = SetValue::from_members([b("a")], 0);
        for m in ["", "a\0", at_limit.as_str(), long.as_str(), "a"] {
            s.insert(&b(m), 0);
        }
        assert_eq!(s.len(), 5);
        assert_eq!(
            members(&s),
            ["a", "", "a\0", at_limit.as_str(), long.as_str()]
        );
        for m in ["", "a\0", at_limit.as_str(), long.as_str(), "a"] {
            assert!(s.contains(m.as_bytes()), "{m:?}");
        }
        assert!(!s.contains(&long.as_bytes()[1..]) && !s.contains(b"a\0\0"));
        // Enough members to grow the table several times: each is still found by its bytes.
        for i in 0..5000 {
            s.insert(&b(&format!("element:{i:012}")), 0);
        }
        assert!((0..5000).all(|i| s.contains(format!("element:{i:012}").as_bytes())));
        assert!(s.remove(long.as_bytes()) && s.remove(b"a") && !s.remove(b"a"));
        assert_eq!(s.len(), 5003);
    }

    #[test]
    fn intsets_sort_widen_and_keep_their_width() {
        let mut s = SetValue::default();
        for m in ["5", "-3", "100", "5"] {
            s.insert(&b(m), 512);
        }
        assert_eq!(members(&s), ["-3", "5", "100"]);
        let SetValue::Ints(ref i) = s else { panic!() };
        assert_eq!(i.width(), 2);
        s.insert(&b("70000"), 512);
        s.insert(&b("-9223372036854775808"), 512);
        assert_eq!(
            members(&s),
            ["-9223372036854775808", "-3", "5", "100", "70000"]
        );
        assert!(s.remove(b"-9223372036854775808"));
        assert!(!s.remove(b"x") && !s.remove(b"05") && !s.remove(b"99999999999"));
        let SetValue::Ints(ref i) = s else { panic!() };
        assert_eq!(i.width(), 8, "removals never narrow an intset");
        assert!(s.contains(b"70000") && !s.contains(b"070000") && !s.contains(b"7"));
        // SADD s 1 2 70000 on redis-server 7.0.15 (the DUMP's intset).
        let mut r = SetValue::default();
        for m in ["1", "2", "70000"] {
            r.insert(&b(m), 512);
        }
        let SetValue::Ints(ref i) = r else { panic!() };
        assert_eq!(
            i.to_redis_bytes(),
            b"\x04\x00\x00\x00\x03\x00\x00\x00\x01\x00\x00\x00\x02\x00\x00\x00\x70\x11\x01\x00"
        );
        let back = IntSet::from_redis_bytes(&i.to_redis_bytes()).unwrap();
        assert_eq!(back.iter().collect::<Vec<_>>(), [1, 2, 70000]);
        assert!(IntSet::from_redis_bytes(b"\x02\x00\x00\x00\x00\x00\x00\x00").is_none());
        assert!(
            IntSet::from_redis_bytes(b"\x02\x00\x00\x00\x02\x00\x00\x00\x02\x00\x01\x00").is_none()
        );
    }

    #[test]
    fn small_intsets_sit_in_the_value() {
        // 14 members of 2 bytes are 28 bytes, inline; the 15th moves them to an exact-size
        // allocation, a wider member widens them there, and removals bring them back.
        let mut s = SetValue::default();
        for v in 0..15 {
            s.insert(&int_bytes(v * 7), 512);
            let heap = if v < 14 { 0 } else { 30 };
            assert_eq!(s.memory_estimate(), heap, "{v}");
        }
        s.insert(&b("70000"), 512);
        assert_eq!(s.memory_estimate(), 16 * 4);
        for v in 0..10 {
            assert!(s.remove(&int_bytes(v * 7)));
        }
        assert_eq!(
            s.memory_estimate(),
            0,
            "six members of 4 bytes sit inline again"
        );
        assert_eq!(members(&s), ["70", "77", "84", "91", "98", "70000"]);
        let SetValue::Ints(ref i) = s else { panic!() };
        assert_eq!(i.width(), 4);
    }

    #[test]
    fn converts_where_redis_does_and_never_back() {
        let mut s = SetValue::default();
        for m in ["3", "1", "2"] {
            s.insert(&b(m), 3);
        }
        assert_eq!(s.encoding(), "intset");
        s.insert(&b("0"), 3);
        assert_eq!(s.encoding(), "hashtable");
        assert_eq!(members(&s), ["0", "1", "2", "3"]);
        s.remove(b"0");
        s.remove(b"1");
        assert_eq!(s.encoding(), "hashtable");

        let mut t = SetValue::default();
        t.insert(&b("9"), 512);
        t.insert(&b("4"), 512);
        t.insert(&b("a"), 512);
        t.insert(&b("1"), 512);
        assert_eq!(t.encoding(), "hashtable");
        assert_eq!(members(&t), ["4", "9", "a", "1"]);
        let none = SetValue::from_members([b("1")], 0);
        assert_eq!(none.encoding(), "hashtable");
        for m in ["-0", "+1", "01", " 1", "9223372036854775808"] {
            assert_eq!(SetValue::from_members([b(m)], 512).encoding(), "hashtable");
        }
        assert!(SetValue::try_from_members([b("1"), b("1")], 512).is_none());
        assert_eq!(
            SetValue::from_members([b("2"), b("1")], 512)
                .into_table()
                .reencode(512)
                .encoding(),
            "intset"
        );
    }

    fn member() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        prop_oneof![
            (-20i64..20).prop_map(|v| v.to_string()),
            prop_oneof![
                Just(i64::MIN),
                Just(i64::MAX),
                Just(70_000),
                Just(-70_000),
                Just(3_000_000_000)
            ]
            .prop_map(|v| v.to_string()),
            prop_oneof![Just("a"), Just("-0"), Just("07"), Just("")].prop_map(String::from),
            // Either side of the longest inline member, and far past it.
            (21usize..24).prop_map(|n| "m".repeat(n)),
            Just("long member ".repeat(5)),
        ]
    }

    proptest::proptest! {
        /// The same adds and removes on a set kept as an intset (up to 6 members) and on
        /// one that is always a table answer the same and hold the same members; the
        /// intset iterates ascending and converts exactly when Redis's setTypeAdd does.
        #[test]
        fn intsets_and_tables_answer_alike(ops in proptest::collection::vec((proptest::bool::ANY, member()), 1..80)) {
            let mut small = SetValue::default();
            let mut table = SetValue::default().into_table();
            let mut should_convert = false;
            for (add, m) in &ops {
                let m = b(m);
                if *add {
                    let fresh = !table.contains(&m);
                    proptest::prop_assert_eq!(small.insert(&m, 6), table.insert(&m, 6));
                    should_convert |= fresh && (parse_canonical_i64(&m).is_none() || table.len() > 6);
                } else {
                    proptest::prop_assert_eq!(small.remove(&m), table.remove(&m));
                }
                proptest::prop_assert_eq!(small.len(), table.len());
                proptest::prop_assert_eq!(small.encoding() == "hashtable", should_convert);
                let mut a: Vec<Bytes> = small.iter().collect();
                let mut t: Vec<Bytes> = table.iter().collect();
                if let SetValue::Ints(i) = &small {
                    let ints: Vec<i64> = i.iter().collect();
                    proptest::prop_assert!(ints.windows(2).all(|w| w[0] < w[1]));
                }
                a.sort();
                t.sort();
                proptest::prop_assert_eq!(a, t);
                for probe in ["0", "1", "a", "70000", "-0"] {
                    proptest::prop_assert_eq!(small.contains(probe.as_bytes()), table.contains(probe.as_bytes()));
                }
            }
        }
    }
}
