//! Sorted sets: the value behind Redis's ZSET commands.
//!
//! A [`SortedSet`] keeps members ordered by `(score, member bytes)` exactly as Redis does,
//! and owns everything the ZSET commands need from the value itself: the ordered storage
//! (up to 128 members one packed byte buffer, like Redis's listpack, since limiter sets
//! are many and small; beyond that an arena AVL tree with subtree sizes, so inserts,
//! removals, ranks and the start of any range cost O(log n) and a range of k items
//! O(log n + k), plus a member -> score hash map for O(1) ZSCORE). It is part of the Raft state
//! machine, so nothing here is random or order-leaking: the structures are deterministic,
//! their shape (which depends on history) never shows in any result, and the hash map is
//! never iterated.
//!
//! | file | what it owns |
//! | --- | --- |
//! | `mod.rs` | [`SortedSet`]: the listpack/tree switch, inserts, ranges, ranks, scans |
//! | `packed.rs` | the listpack form: entries back to back in one byte buffer |
//! | `tree.rs` | the arena AVL tree with subtree sizes |
//! | `range.rs` | score and lex bounds, Redis's score and bound parsers, index rules |
//!
//! Scores print through `crate::numbers::format_double` (`%.17g`).

use std::cmp::Ordering;
use std::fmt;

use bytes::Bytes;
use hashbrown::HashTable;

mod packed;
mod range;
mod tree;

use packed::{Packed, Walk};

use range::{lex_range_is_empty, score_range_is_empty};
pub use range::{
    normalize_range, parse_lex_bound, parse_score, parse_score_bound, LexBound, ScoreBound,
    ERR_MIN_MAX_NOT_FLOAT, ERR_MIN_MAX_NOT_STRING_RANGE, ERR_NAN_RESULT, ERR_NOT_A_FLOAT,
};
use tree::{Node, Tree, TreeIter, NIL};

/// Most members one set can hold: arena slots are `u32` indexes.
pub const MAX_LEN: usize = u32::MAX as usize;

/// What [`SortedSet::insert`] did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum InsertResult {
    /// The member was new.
    Added,
    /// The member existed with a different score, now replaced.
    Updated {
        /// The score it had before.
        old: f64,
    },
    /// The member existed with an equal score (`-0` equals `0`); nothing changed.
    Unchanged,
    /// Nothing changed: the score was NaN, or the set already holds [`MAX_LEN`] members.
    Rejected,
}

/// The ZADD options that change what an add does (NX, XX, GT, LT, INCR).
///
/// Rejecting incompatible combinations (NX with XX, NX with GT/LT, GT with LT) and the
/// single-pair rule of INCR is the command parser's job, with Redis's texts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AddFlags {
    /// NX: only add new members.
    pub nx: bool,
    /// XX: only update existing members.
    pub xx: bool,
    /// GT: only update when the new score is greater.
    pub gt: bool,
    /// LT: only update when the new score is less.
    pub lt: bool,
    /// INCR: add the given score to the current one (ZINCRBY is INCR without flags).
    pub incr: bool,
}

/// What [`SortedSet::add`] did; mirrors Redis's `zsetAdd` outcome flags.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum AddOutcome {
    /// A new member was added with `score` (the INCR reply).
    Added {
        /// The new member's score.
        score: f64,
    },
    /// An existing member's score changed (counts for CH).
    Updated {
        /// The score before.
        old: f64,
        /// The score now (the INCR reply).
        new: f64,
    },
    /// The member exists and its score came out equal; nothing changed.
    Unchanged {
        /// The (equal) score, the INCR reply.
        score: f64,
    },
    /// NX/XX/GT/LT prevented the operation (ZADD INCR replies nil).
    Skipped,
    /// The score or the incremented result is NaN: reply [`ERR_NAN_RESULT`].
    NotANumber,
    /// The set already holds [`MAX_LEN`] members; nothing changed.
    Full,
}

/// A Redis sorted set: unique byte-string members, each with an `f64` score.
///
/// It follows Redis's two encodings and when one becomes the other, because that shows:
/// a set starts as a listpack (a packed byte buffer here) and becomes a skiplist (map + tree
/// here) for good once it would exceed 128 members or gets a member longer than 64 bytes.
/// A listpack stores `-0` as `0`, a skiplist keeps `-0`, so ZSCORE prints `0` or `-0`
/// accordingly; ZSCAN and OBJECT ENCODING differ too. Scores are never NaN: mutators
/// refuse NaN without panicking.
#[derive(Clone)]
pub struct SortedSet {
    repr: Repr,
    /// Sum of member lengths, for [`SortedSet::memory_estimate`].
    member_bytes: usize,
}

/// Most members of a listpack set (Redis's `zset-max-listpack-entries`).
#[cfg(not(test))]
const SMALL_MAX: usize = 128;
/// Tests convert sets often with a small pool of members.
#[cfg(test)]
const SMALL_MAX: usize = 8;

/// Longest member a listpack set may hold (Redis's `zset-max-listpack-value`).
const SMALL_MEMBER_MAX: usize = 64;

/// The thresholds of the listpack encoding (`zset-max-listpack-entries`, `-value`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZsetLimits {
    /// Most members of a listpack set.
    pub entries: usize,
    /// Longest member of a listpack set.
    pub value: usize,
}

impl ZsetLimits {
    /// Redis 7.0's defaults, also in unit tests (the configuration's).
    pub const REDIS: ZsetLimits = ZsetLimits {
        entries: 128,
        value: 64,
    };
}

impl Default for ZsetLimits {
    /// Redis 7.0's defaults (8 members in unit tests, which convert sets often).
    fn default() -> Self {
        ZsetLimits {
            entries: SMALL_MAX,
            value: SMALL_MEMBER_MAX,
        }
    }
}

#[derive(Clone)]
enum Repr {
    /// Redis's listpack: sorted by (score, member), scores never `-0`, in one allocation,
    /// which is what millions of small limiter sets need; at this size O(n) inserts and
    /// member scans are a few cache lines.
    Small(Packed),
    /// Redis's skiplist: O(1) scores by member, O(log n) everything ordered. Boxed so
    /// that small sets (and every key's value enum) stay small.
    Large(Box<Large>),
}

/// The skiplist form. The tree owns the members and scores; the index finds a member's
/// node by hash. Each member is hashed once per operation (the hash picks the slot and is
/// never recomputed except when the index grows) and stored once, in its node: the index
/// holds 4-byte node numbers, not a second reference to the member and a copy of the score
/// (an `AHashMap<Bytes, f64>` cost 40 bytes a slot, a refcount block per member and two
/// more hashes per ZADD).
#[derive(Clone)]
struct Large {
    /// Node numbers by their member's hash; looked up only, never iterated (its order is
    /// random).
    index: HashTable<u32>,
    /// Keyed per set at random (lookups only, so nothing observable depends on it).
    hasher: ahash::RandomState,
    /// The members by (score, member).
    tree: Tree,
}

impl Default for SortedSet {
    fn default() -> Self {
        SortedSet::new()
    }
}

impl fmt::Debug for SortedSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl SortedSet {
    /// An empty set.
    pub fn new() -> SortedSet {
        SortedSet {
            repr: Repr::Small(Packed::default()),
            member_bytes: 0,
        }
    }

    /// Rebuild a set exactly as recorded by [`Self::encoding`] (`skiplist` when true) and
    /// [`Self::iter`], in O(n). Snapshots must use this rather than re-inserting: the
    /// encoding shows (`-0`, ZSCAN, OBJECT ENCODING) and every replica must agree on it.
    ///
    /// Members are copied, so they may borrow from a snapshot buffer. Input that is not
    /// strictly ascending is still accepted, through ordinary inserts, never a panic.
    pub fn from_snapshot<M: AsRef<[u8]>>(
        skiplist: bool,
        items: impl IntoIterator<Item = (M, f64)>,
    ) -> SortedSet {
        Self::from_snapshot_limited(skiplist, items, ZsetLimits::default())
    }

    /// [`Self::from_snapshot`] where a listpack may hold what `limits` allow.
    pub fn from_snapshot_limited<M: AsRef<[u8]>>(
        skiplist: bool,
        items: impl IntoIterator<Item = (M, f64)>,
        limits: ZsetLimits,
    ) -> SortedSet {
        let items: Vec<(Bytes, f64)> = items
            .into_iter()
            .map(|(m, s)| (Bytes::copy_from_slice(m.as_ref()), s))
            .collect();
        Self::build(skiplist, items, limits)
    }

    /// A set of `items` given in ascending (score, member) order, in the encoding a set
    /// grown by inserts would have (listpack while it fits), in O(n): what ZUNIONSTORE
    /// and the other algebra stores build. Members are kept, not copied. Input that is not
    /// strictly ascending is still accepted, through ordinary inserts.
    pub fn from_sorted(items: Vec<(Bytes, f64)>, limits: ZsetLimits) -> SortedSet {
        let fits =
            items.len() <= limits.entries && items.iter().all(|(m, _)| m.len() <= limits.value);
        Self::build(!fits, items, limits)
    }

    fn build(skiplist: bool, items: Vec<(Bytes, f64)>, limits: ZsetLimits) -> SortedSet {
        let mut set = SortedSet::new();
        if skiplist {
            set.grow();
        }
        let ascending = items.iter().all(|(_, s)| !s.is_nan())
            && items
                .windows(2)
                .all(|w| cmp_key(w[0].1, &w[0].0, w[1].1, &w[1].0) == Ordering::Less);
        let fits_listpack =
            items.len() <= limits.entries && items.iter().all(|(m, _)| m.len() <= limits.value);
        if !ascending || !(skiplist || fits_listpack) {
            for (m, s) in items {
                set.insert_limited(&m, s, limits);
            }
            return set;
        }
        set.member_bytes = items.iter().map(|(m, _)| m.len()).sum();
        if skiplist {
            set.repr = Repr::Large(Box::new(Large::from_sorted(items)));
        } else {
            let items = items.iter().map(|(m, s)| (&m[..], listpack_score(*s)));
            set.repr = Repr::Small(Packed::from_sorted(items));
        }
        set
    }

    /// Redis's name for the current encoding (OBJECT ENCODING): `listpack` or `skiplist`.
    pub fn encoding(&self) -> &'static str {
        match self.repr {
            Repr::Small(_) => "listpack",
            Repr::Large(_) => "skiplist",
        }
    }

    /// Number of members (ZCARD).
    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Small(p) => p.len(),
            Repr::Large(large) => large.tree.len(),
        }
    }

    /// Whether the set has no members (Redis deletes such keys).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The score of `member` (ZSCORE, ZMSCORE): O(1), or a scan of at most 128 members.
    pub fn score(&self, member: &[u8]) -> Option<f64> {
        match &self.repr {
            Repr::Small(p) => p.find(member).map(|f| f.score),
            Repr::Large(large) => large.score(member),
        }
    }

    /// Whether `member` is in the set.
    pub fn contains(&self, member: &[u8]) -> bool {
        self.score(member).is_some()
    }

    /// Set `member`'s score, adding the member if new; O(log n) (O(n) with n <= 128 while
    /// a listpack).
    ///
    /// The member bytes are copied on add, so a slice of a network buffer never pins it.
    pub fn insert(&mut self, member: &[u8], score: f64) -> InsertResult {
        self.insert_limited(member, score, ZsetLimits::default())
    }

    /// [`Self::insert`], converting to a skiplist when a new member would pass `limits`
    /// (Redis's `zsetAdd`: more than `entries` members, or a member longer than `value`).
    pub fn insert_limited(
        &mut self,
        member: &[u8],
        score: f64,
        limits: ZsetLimits,
    ) -> InsertResult {
        if score.is_nan() {
            return InsertResult::Rejected;
        }
        let outgrown = |p: &Packed| p.len() >= limits.entries || member.len() > limits.value;
        if matches!(&self.repr, Repr::Small(p) if outgrown(p)) && !self.contains(member) {
            self.grow();
        }
        let result = match &mut self.repr {
            Repr::Small(p) => p.insert(member, listpack_score(score)),
            Repr::Large(large) => match large.add(member, score, AddFlags::default()) {
                AddOutcome::Added { .. } => InsertResult::Added,
                AddOutcome::Updated { old, .. } => InsertResult::Updated { old },
                AddOutcome::Full => InsertResult::Rejected,
                _ => InsertResult::Unchanged,
            },
        };
        if result == InsertResult::Added {
            self.member_bytes += member.len();
        }
        result
    }

    /// ZADD / ZINCRBY for one pair, with Redis's `zsetAdd` rules for NX/XX/GT/LT/INCR.
    ///
    /// GT/LT never stop a new member from being added (only XX does), and an increment
    /// that yields NaN leaves the set unchanged.
    pub fn add(&mut self, member: &[u8], score: f64, flags: AddFlags) -> AddOutcome {
        self.add_limited(member, score, flags, ZsetLimits::default())
    }

    /// [`Self::add`] with the listpack thresholds `limits` (see [`Self::insert_limited`]).
    pub fn add_limited(
        &mut self,
        member: &[u8],
        score: f64,
        flags: AddFlags,
        limits: ZsetLimits,
    ) -> AddOutcome {
        if score.is_nan() {
            return AddOutcome::NotANumber;
        }
        if let Repr::Large(large) = &mut self.repr {
            let outcome = large.add(member, score, flags);
            if let AddOutcome::Added { .. } = outcome {
                self.member_bytes += member.len();
            }
            return outcome;
        }
        let Some(current) = self.score(member) else {
            if flags.xx {
                return AddOutcome::Skipped;
            }
            return match self.insert_limited(member, score, limits) {
                InsertResult::Rejected => AddOutcome::Full,
                _ => AddOutcome::Added { score },
            };
        };
        if flags.nx {
            return AddOutcome::Skipped;
        }
        let new = if flags.incr { current + score } else { score };
        if new.is_nan() {
            return AddOutcome::NotANumber;
        }
        if (flags.lt && new >= current) || (flags.gt && new <= current) {
            return AddOutcome::Skipped;
        }
        match self.insert_limited(member, new, limits) {
            InsertResult::Updated { old } => AddOutcome::Updated { old, new },
            _ => AddOutcome::Unchanged { score: new },
        }
    }

    /// Remove `member` (ZREM); returns its score if it was present. O(log n).
    pub fn remove(&mut self, member: &[u8]) -> Option<f64> {
        let score = match &mut self.repr {
            Repr::Small(p) => p.remove(member)?,
            Repr::Large(large) => large.remove(member)?,
        };
        self.member_bytes -= member.len();
        self.after_removal();
        Some(score)
    }

    /// 0-based position of `member` in ascending order (ZRANK), O(log n).
    pub fn rank(&self, member: &[u8]) -> Option<usize> {
        if let Repr::Small(p) = &self.repr {
            return p.find(member).map(|f| f.rank);
        }
        let score = self.score(member)?;
        Some(self.count_before(|s, m| cmp_key(s, m, score, member) == Ordering::Less))
    }

    /// 0-based position of `member` in descending order (ZREVRANK), O(log n).
    pub fn rev_rank(&self, member: &[u8]) -> Option<usize> {
        let rank = self.rank(member)?;
        Some(self.len() - 1 - rank)
    }

    /// The member and score at ascending position `rank`, O(log n).
    pub fn get_by_rank(&self, rank: usize) -> Option<(&[u8], f64)> {
        self.iter_from(rank, 1, false).next()
    }

    /// All members in ascending order.
    pub fn iter(&self) -> Iter<'_> {
        self.iter_from(0, self.len(), false)
    }

    /// Ascending positions `start..=stop` (ZRANGE after [`normalize_range`]); `stop` is
    /// clamped to the last position, and `start > stop` is empty.
    pub fn range_by_rank(&self, start: usize, stop: usize) -> Iter<'_> {
        match self.rank_span(start, stop) {
            Some(count) => self.iter_from(start, count, false),
            None => Iter::empty(),
        }
    }

    /// Descending positions `start..=stop`, position 0 being the highest (ZREVRANGE).
    pub fn rev_range_by_rank(&self, start: usize, stop: usize) -> Iter<'_> {
        match self.rank_span(start, stop) {
            Some(count) => self.iter_from(self.len() - 1 - start, count, true),
            None => Iter::empty(),
        }
    }

    /// Members with `min <= score <= max` (per the bounds' exclusivity), ascending or,
    /// with `rev`, descending, skipping `offset` and yielding at most `count` (LIMIT).
    ///
    /// `min` is always the low end: ZREVRANGEBYSCORE's `max min` arguments are swapped by
    /// the caller. A NaN bound gives an empty range. O(log n + k), offset included.
    pub fn range_by_score(
        &self,
        min: ScoreBound,
        max: ScoreBound,
        rev: bool,
        offset: usize,
        count: Option<usize>,
    ) -> Iter<'_> {
        let (lo, hi) = self.score_span(min, max);
        self.window(lo, hi, rev, offset, count)
    }

    /// Number of members with a score in `[min, max]` (ZCOUNT), O(log n).
    pub fn count_in_score_range(&self, min: ScoreBound, max: ScoreBound) -> usize {
        let (lo, hi) = self.score_span(min, max);
        hi - lo
    }

    /// Members between the lex bounds, as ZRANGEBYLEX (ascending) / ZREVRANGEBYLEX (`rev`).
    ///
    /// `min` is always the low end (the caller swaps ZREVRANGEBYLEX's arguments). When all
    /// members share one score this is O(log n + k). With mixed scores Redis leaves the
    /// result unspecified; this follows Redis's listpack walk exactly (first member at or
    /// above `min` in set order, then while at or below `max`; from the top for `rev`),
    /// in O(n), so the answer never depends on the tree's shape.
    pub fn range_by_lex(
        &self,
        min: &LexBound,
        max: &LexBound,
        rev: bool,
        offset: usize,
        count: Option<usize>,
    ) -> Iter<'_> {
        let (lo, hi) = self.lex_span(min, max, rev);
        self.window(lo, hi, rev, offset, count)
    }

    /// Number of members between the lex bounds (ZLEXCOUNT); see [`Self::range_by_lex`].
    pub fn count_in_lex_range(&self, min: &LexBound, max: &LexBound) -> usize {
        let (lo, hi) = self.lex_span(min, max, false);
        hi - lo
    }

    /// Remove members with a score in `[min, max]` (ZREMRANGEBYSCORE); returns how many.
    ///
    /// O(log n + k log n) for k removed members, at most O(n).
    pub fn remove_range_by_score(&mut self, min: ScoreBound, max: ScoreBound) -> usize {
        let (lo, hi) = self.score_span(min, max);
        self.remove_ranks(lo, hi)
    }

    /// Remove ascending positions `start..=stop` (ZREMRANGEBYRANK after
    /// [`normalize_range`]); returns how many.
    pub fn remove_range_by_rank(&mut self, start: usize, stop: usize) -> usize {
        match self.rank_span(start, stop) {
            Some(count) => self.remove_ranks(start, start + count),
            None => 0,
        }
    }

    /// Remove members between the lex bounds (ZREMRANGEBYLEX); returns how many.
    pub fn remove_range_by_lex(&mut self, min: &LexBound, max: &LexBound) -> usize {
        let (lo, hi) = self.lex_span(min, max, false);
        self.remove_ranks(lo, hi)
    }

    /// Remove and return up to `count` lowest members, lowest first (ZPOPMIN).
    pub fn pop_min(&mut self, count: usize) -> Vec<(Bytes, f64)> {
        let n = count.min(self.len());
        self.take_ranks(0, n)
    }

    /// Remove and return up to `count` highest members, highest first (ZPOPMAX).
    pub fn pop_max(&mut self, count: usize) -> Vec<(Bytes, f64)> {
        let len = self.len();
        let mut popped = self.take_ranks(len - count.min(len), len);
        popped.reverse();
        popped
    }

    /// One ZSCAN step: the next cursor (0 when done) and the members of this step.
    ///
    /// A listpack set is returned whole with cursor 0 whatever the cursor, as Redis
    /// does. A skiplist set walks in score
    /// order with the cursor encoding the next score to visit; a step returns about
    /// `count` members but never splits members of equal score, so every member present
    /// with an unchanged score for the whole scan is returned exactly once.
    pub fn scan(&self, cursor: u64, count: usize) -> (u64, Iter<'_>) {
        let len = self.len();
        if let Repr::Small(_) = self.repr {
            return (0, self.iter());
        }
        let start = if cursor == 0 {
            0
        } else {
            self.count_before(|s, _| scan_key(s) < cursor)
        };
        if start >= len {
            return (0, Iter::empty());
        }
        let mut end = start.saturating_add(count.max(1)).min(len);
        if let Some((_, last)) = self.get_by_rank(end - 1).filter(|_| end < len) {
            end = self.count_before(|s, _| s <= last);
        }
        let next = self.get_by_rank(end).map_or(0, |(_, s)| scan_key(s));
        (next, self.iter_from(start, end - start, false))
    }

    /// Approximate heap bytes held by the set, for memory accounting.
    pub fn memory_estimate(&self) -> usize {
        // Allocator overhead of one small allocation (each member's bytes).
        const ALLOC_OVERHEAD: usize = 16;
        let own = std::mem::size_of::<SortedSet>();
        let base = own + self.member_bytes + self.len() * ALLOC_OVERHEAD;
        match &self.repr {
            Repr::Small(p) => own + p.bytes(),
            Repr::Large(large) => {
                let Large { index, tree, .. } = &**large;
                base + std::mem::size_of::<Large>()
                    + tree.nodes.capacity() * std::mem::size_of::<Node>()
                    + tree.free.capacity() * std::mem::size_of::<u32>()
                    + index.allocation_size()
            }
        }
    }

    /// How many members satisfy `before(score, member)`, which must hold for a prefix of
    /// the order; O(log n).
    fn count_before(&self, before: impl Fn(f64, &[u8]) -> bool) -> usize {
        match &self.repr {
            Repr::Small(p) => p.count_before(before),
            Repr::Large(large) => large.tree.count_before(|n| before(n.score, &n.member)),
        }
    }

    /// Walk `count` members from ascending position `rank`, upwards or (with `rev`) down.
    fn iter_from(&self, rank: usize, count: usize, rev: bool) -> Iter<'_> {
        match &self.repr {
            Repr::Small(p) => {
                if rank >= p.len() || count == 0 {
                    return Iter::empty();
                }
                if !rev {
                    let remaining = count.min(p.len() - rank);
                    return Iter(IterInner::Packed(p.walk(p.offset_of(rank)), remaining));
                }
                // No back-links: note the window's entry offsets, then walk them down.
                let lo = (rank + 1).saturating_sub(count);
                let mut walk = p.walk(p.offset_of(lo));
                let offsets = (lo..=rank)
                    .map_while(|_| walk.next_entry().map(|(at, _, _)| at))
                    .collect();
                Iter(IterInner::PackedRev(p.walk(0), offsets))
            }
            Repr::Large(large) => Iter(IterInner::Tree(large.tree.iter_from(rank, count, rev))),
        }
    }

    /// Count of positions `start..=stop` clamped to the set, or None when empty.
    fn rank_span(&self, start: usize, stop: usize) -> Option<usize> {
        let len = self.len();
        if start > stop || start >= len {
            return None;
        }
        Some(stop.min(len - 1) - start + 1)
    }

    /// Ascending positions `[lo, hi)` of the members within a score range.
    fn score_span(&self, min: ScoreBound, max: ScoreBound) -> (usize, usize) {
        if score_range_is_empty(min, max) {
            return (0, 0);
        }
        let lo = self.count_before(|s, _| !min.admits_above(s));
        let hi = self.count_before(|s, _| max.admits_below(s));
        (lo, hi.max(lo))
    }

    /// Ascending positions `[lo, hi)` of the members within a lex range; see
    /// [`Self::range_by_lex`] for why direction matters when scores differ.
    fn lex_span(&self, min: &LexBound, max: &LexBound, rev: bool) -> (usize, usize) {
        let len = self.len();
        if lex_range_is_empty(min, max) {
            return (0, 0);
        }
        let (Some((first, first_score)), Some((last, last_score))) =
            (self.get_by_rank(0), self.get_by_rank(len.wrapping_sub(1)))
        else {
            return (0, 0);
        };
        if !min.admits_above(last) || !max.admits_below(first) {
            return (0, 0);
        }
        if first_score == last_score {
            let lo = self.count_before(|_, m| !min.admits_above(m));
            let hi = self.count_before(|_, m| max.admits_below(m));
            return (lo, hi.max(lo));
        }
        if !rev {
            let mut walk = self.iter().map(|(m, _)| m).enumerate();
            let Some((lo, m)) = walk.find(|(_, m)| min.admits_above(m)) else {
                return (0, 0);
            };
            if !max.admits_below(m) {
                return (lo, lo);
            }
            let hi = walk
                .find(|(_, m)| !max.admits_below(m))
                .map_or(len, |(i, _)| i);
            (lo, hi)
        } else {
            let mut walk = self
                .iter_from(len - 1, len, true)
                .map(|(m, _)| m)
                .enumerate()
                .map(|(i, m)| (len - 1 - i, m));
            let Some((top, m)) = walk.find(|(_, m)| max.admits_below(m)) else {
                return (0, 0);
            };
            if !min.admits_above(m) {
                return (top + 1, top + 1);
            }
            let lo = walk
                .find(|(_, m)| !min.admits_above(m))
                .map_or(0, |(i, _)| i + 1);
            (lo, top + 1)
        }
    }

    /// The LIMIT window of positions `[lo, hi)`, ascending or descending.
    fn window(
        &self,
        lo: usize,
        hi: usize,
        rev: bool,
        offset: usize,
        count: Option<usize>,
    ) -> Iter<'_> {
        let available = hi.saturating_sub(lo);
        if offset >= available {
            return Iter::empty();
        }
        let n = available - offset;
        let n = count.map_or(n, |c| c.min(n));
        if rev {
            self.iter_from(hi - 1 - offset, n, true)
        } else {
            self.iter_from(lo + offset, n, false)
        }
    }

    /// Remove ascending positions `[lo, hi)`: O(k log n) for a few members, O(n) by
    /// rebuilding when they are a large share of the set.
    fn remove_ranks(&mut self, lo: usize, hi: usize) -> usize {
        if lo >= hi || hi > self.len() {
            return 0;
        }
        let removed = match &mut self.repr {
            Repr::Small(p) => {
                self.member_bytes -= p.remove_ranks(lo, hi);
                hi - lo
            }
            Repr::Large(large) if hi - lo > large.tree.len() / 8 => {
                let mut items = large.tree.drain_sorted();
                for (m, _) in items.drain(lo..hi) {
                    self.member_bytes -= m.len();
                }
                large.rebuild(items);
                hi - lo
            }
            Repr::Large(_) => (lo..hi).filter_map(|_| self.remove_at(lo)).count(),
        };
        self.after_removal();
        removed
    }

    /// Remove and return the members at ascending positions `[lo, hi)` (within the set),
    /// in ascending order.
    fn take_ranks(&mut self, lo: usize, hi: usize) -> Vec<(Bytes, f64)> {
        let taken = match &mut self.repr {
            Repr::Small(p) => {
                let items = p.items(lo, hi);
                self.member_bytes -= p.remove_ranks(lo, hi);
                items
            }
            Repr::Large(_) => (lo..hi).filter_map(|_| self.remove_at(lo)).collect(),
        };
        self.after_removal();
        taken
    }

    /// Remove the member at ascending position `rank` of a skiplist set.
    fn remove_at(&mut self, rank: usize) -> Option<(Bytes, f64)> {
        let (member, score) = match &mut self.repr {
            Repr::Small(_) => return None,
            Repr::Large(large) => {
                let t = large.tree.unlink_at(rank);
                if t == NIL {
                    return None;
                }
                large.unindex(t);
                let score = large.tree.node(t).score;
                (large.tree.release(t), score)
            }
        };
        self.member_bytes -= member.len();
        Some((member, score))
    }

    /// Convert to the skiplist form (Redis never converts back on removals).
    fn grow(&mut self) {
        let Repr::Small(p) = &self.repr else {
            return;
        };
        let items: Vec<(Bytes, f64)> = p.items(0, p.len());
        self.repr = Repr::Large(Box::new(Large::from_sorted(items)));
    }

    /// After removals: give memory back once three quarters of the capacity are unused.
    /// That costs O(n) but follows at least n removals, so it is amortised O(1).
    fn after_removal(&mut self) {
        const MIN_ARENA: usize = 64;
        let len = self.len();
        let large = match &mut self.repr {
            // A packed set is always exactly its size.
            Repr::Small(_) => return,
            Repr::Large(large) => large,
        };
        if large.tree.nodes.len() >= MIN_ARENA && len * 4 <= large.tree.nodes.len() {
            let items = large.tree.drain_sorted();
            large.rebuild(items);
        }
        let Large {
            index,
            hasher,
            tree,
        } = &mut **large;
        if index.capacity() >= MIN_ARENA && len * 4 <= index.capacity() {
            index.shrink_to_fit(|&t| hash_member(hasher, &tree.node(t).member));
        }
    }

    /// Check ordering, sizes and balance, and that every index agrees.
    #[cfg(test)]
    fn check_invariants(&self) {
        let items: Vec<_> = self.iter().collect();
        assert_eq!(items.len(), self.len());
        for w in items.windows(2) {
            assert_eq!(cmp_key(w[0].1, w[0].0, w[1].1, w[1].0), Ordering::Less);
        }
        for (m, s) in &items {
            assert_eq!(self.score(m).map(f64::to_bits), Some(s.to_bits()));
            assert!(!s.is_nan());
        }
        let bytes: usize = items.iter().map(|(m, _)| m.len()).sum();
        assert_eq!(bytes, self.member_bytes);
        match &self.repr {
            Repr::Small(p) => {
                assert!(p.len() <= SMALL_MAX);
                for (m, s) in &items {
                    assert!(m.len() <= SMALL_MEMBER_MAX);
                    assert!(*s != 0.0 || s.is_sign_positive(), "listpack keeps no -0");
                }
            }
            Repr::Large(large) => {
                let (size, _) = large.tree.check(large.tree.root);
                assert_eq!(size, large.index.len());
                assert_eq!(large.tree.nodes.len(), size + large.tree.free.len());
                for (m, _) in &items {
                    let t = large.find(hash_member(&large.hasher, m), m);
                    assert!(t.is_some_and(|t| large.tree.node(t).member == *m));
                }
            }
        }
    }
}

/// `member`'s hash under `hasher` (the index's; every caller hashes the same way).
fn hash_member(hasher: &ahash::RandomState, member: &[u8]) -> u64 {
    hasher.hash_one(member)
}

impl Large {
    /// A skiplist set of `items`, which are in ascending key order.
    fn from_sorted(items: Vec<(Bytes, f64)>) -> Large {
        let mut large = Large {
            index: HashTable::new(),
            hasher: ahash::RandomState::new(),
            tree: Tree::new(),
        };
        large.rebuild(items);
        large
    }

    /// Replace the contents with `items` (ascending): a balanced tree in a fresh arena and
    /// its index, in O(n).
    fn rebuild(&mut self, items: Vec<(Bytes, f64)>) {
        self.tree = Tree::from_sorted(items);
        let Large {
            index,
            hasher,
            tree,
        } = self;
        *index = HashTable::with_capacity(tree.nodes.len());
        for (t, node) in tree.nodes.iter().enumerate() {
            // The arena came from a Vec of u32-indexed nodes.
            let h = hash_member(hasher, &node.member);
            index.insert_unique(h, t as u32, |&t| {
                hash_member(hasher, &tree.nodes[t as usize].member)
            });
        }
    }

    /// The node holding `member`, whose hash is `hash`.
    fn find(&self, hash: u64, member: &[u8]) -> Option<u32> {
        let nodes = &self.tree.nodes;
        self.index
            .find(hash, |&t| nodes[t as usize].member == member)
            .copied()
    }

    fn score(&self, member: &[u8]) -> Option<f64> {
        let t = self.find(hash_member(&self.hasher, member), member)?;
        Some(self.tree.node(t).score)
    }

    /// Take node `t` (still holding its member) out of the index.
    fn unindex(&mut self, t: u32) {
        let Large {
            index,
            hasher,
            tree,
        } = self;
        let h = hash_member(hasher, &tree.node(t).member);
        if let Ok(slot) = index.find_entry(h, |&u| u == t) {
            slot.remove();
        }
    }

    /// [`SortedSet::remove`] on this form: one hash, one tree walk.
    fn remove(&mut self, member: &[u8]) -> Option<f64> {
        let h = hash_member(&self.hasher, member);
        let nodes = &self.tree.nodes;
        let (t, _) = self
            .index
            .find_entry(h, |&t| nodes[t as usize].member == member)
            .ok()?
            .remove();
        let score = self.tree.node(t).score;
        let gone = self.tree.unlink(score, member);
        debug_assert_eq!(gone, t, "index and tree agree");
        self.tree.release(t);
        Some(score)
    }

    /// [`SortedSet::add`] on this form (the score is not NaN): the member is hashed once
    /// and looked up once, whatever the flags, and a new member costs one allocation (its
    /// bytes) besides the amortised growth of the arena and the index.
    fn add(&mut self, member: &[u8], score: f64, flags: AddFlags) -> AddOutcome {
        let h = hash_member(&self.hasher, member);
        let Some(t) = self.find(h, member) else {
            if flags.xx {
                return AddOutcome::Skipped;
            }
            let Some(t) = self.tree.alloc(Bytes::copy_from_slice(member), score) else {
                return AddOutcome::Full;
            };
            self.tree.insert(t);
            let Large {
                index,
                hasher,
                tree,
            } = self;
            index.insert_unique(h, t, |&t| {
                hash_member(hasher, &tree.nodes[t as usize].member)
            });
            return AddOutcome::Added { score };
        };
        if flags.nx {
            return AddOutcome::Skipped;
        }
        let current = self.tree.node(t).score;
        let new = if flags.incr { current + score } else { score };
        if new.is_nan() {
            return AddOutcome::NotANumber;
        }
        if (flags.lt && new >= current) || (flags.gt && new <= current) {
            return AddOutcome::Skipped;
        }
        if new == current {
            return AddOutcome::Unchanged { score: new };
        }
        self.tree.rescore(t, current, new);
        AddOutcome::Updated { old: current, new }
    }
}

/// Ascending or descending walk over a range of a [`SortedSet`], yielding
/// `(member, score)`; O(log n) to create, O(1) amortised per item.
#[derive(Clone)]
pub struct Iter<'a>(IterInner<'a>);

#[derive(Clone)]
enum IterInner<'a> {
    /// Upwards through a packed set, with the number of entries still to yield.
    Packed(Walk<'a>, usize),
    /// Downwards through a packed set: the entries' byte offsets, next on top.
    PackedRev(Walk<'a>, Vec<usize>),
    Tree(TreeIter<'a>),
}

impl Iter<'_> {
    fn empty() -> Self {
        Iter(IterInner::PackedRev(Walk::default(), Vec::new()))
    }
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], f64);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.0 {
            IterInner::Packed(walk, remaining) => {
                *remaining = remaining.checked_sub(1)?;
                let (_, s, m) = walk.next_entry()?;
                Some((m, s))
            }
            IterInner::PackedRev(walk, offsets) => {
                let (s, m) = walk.entry_at(offsets.pop()?);
                Some((m, s))
            }
            IterInner::Tree(walk) => {
                let n = walk.next_node()?;
                Some((&n.member[..], n.score))
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = match &self.0 {
            IterInner::Packed(_, remaining) => *remaining,
            IterInner::PackedRev(_, offsets) => offsets.len(),
            IterInner::Tree(walk) => walk.remaining,
        };
        (n, Some(n))
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl fmt::Debug for Iter<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Iter")
            .field("remaining", &self.len())
            .finish()
    }
}

// ---------------------------------------------------------------------------------------
// Ordering helpers
/// Redis's element order: by score, then by member bytes (memcmp, shorter first on ties).
fn cmp_key(score_a: f64, member_a: &[u8], score_b: f64, member_b: &[u8]) -> Ordering {
    if score_a < score_b {
        Ordering::Less
    } else if score_a > score_b {
        Ordering::Greater
    } else {
        member_a.cmp(member_b)
    }
}

/// A score as a listpack stores it: `-0.0` becomes `0.0` (they compare equal anyway).
fn listpack_score(score: f64) -> f64 {
    if score == 0.0 {
        0.0
    } else {
        score
    }
}

/// Order-preserving map of a (non-NaN) score onto u64 for ZSCAN cursors, with `-0` as
/// `0`; never 0, since 0 would stand for a NaN.
fn scan_key(score: f64) -> u64 {
    let bits = listpack_score(score).to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configured_limits_convert_where_redis_does() {
        let limits = ZsetLimits {
            entries: 2,
            value: 3,
        };
        let mut z = SortedSet::new();
        z.insert_limited(b"a", 1.0, limits);
        z.insert_limited(b"b", 2.0, limits);
        z.insert_limited(b"b", 5.0, limits);
        assert_eq!(z.encoding(), "listpack", "an update adds no member");
        z.add_limited(b"c", 3.0, AddFlags::default(), limits);
        assert_eq!(z.encoding(), "skiplist");
        let mut long = SortedSet::new();
        long.insert_limited(b"abc", 1.0, limits);
        assert_eq!(long.encoding(), "listpack");
        long.insert_limited(b"abcd", 1.0, limits);
        assert_eq!(long.encoding(), "skiplist");
        let copy = SortedSet::from_snapshot_limited(false, z.iter(), ZsetLimits::REDIS);
        assert_eq!(
            copy.encoding(),
            "listpack",
            "a loaded set fits the thresholds"
        );
    }
    use crate::numbers::format_double;
    use proptest::prelude::*;

    fn set_of(items: &[(&str, f64)]) -> SortedSet {
        let mut z = SortedSet::new();
        for (m, s) in items {
            z.insert(m.as_bytes(), *s);
        }
        z
    }

    fn names(it: Iter<'_>) -> Vec<String> {
        it.map(|(m, _)| String::from_utf8_lossy(m).into_owned())
            .collect()
    }

    fn incl(v: f64) -> ScoreBound {
        ScoreBound::Inclusive(v)
    }

    fn lex(s: &str) -> LexBound {
        parse_lex_bound(s.as_bytes()).unwrap()
    }

    #[test]
    fn equal_scores_order_by_member_bytes() {
        let z = set_of(&[
            ("b", 1.0),
            ("a", 1.0),
            ("ab", 1.0),
            ("", 1.0),
            ("\u{ff}", 0.5),
        ]);
        assert_eq!(names(z.iter()), ["\u{ff}", "", "a", "ab", "b"]);
        assert_eq!(z.rank(b"ab"), Some(3));
        assert_eq!(z.rev_rank(b"ab"), Some(1));
        assert_eq!(z.rank(b"zz"), None);
    }

    #[test]
    fn negative_zero_equals_zero_and_prints_as_redis_encodings_do() {
        // Observed on redis-server 7.0.15: a listpack stores -0 as 0, a skiplist keeps -0.
        let mut z = SortedSet::new();
        assert_eq!(z.insert(b"m", -0.0), InsertResult::Added);
        assert_eq!(format_double(z.score(b"m").unwrap()), "0");
        assert_eq!(z.insert(b"m", 0.0), InsertResult::Unchanged);
        z.insert(b"a", 0.0);
        z.insert(b"b", -0.0);
        assert_eq!(names(z.iter()), ["a", "b", "m"]);
        assert_eq!(z.count_in_score_range(incl(-0.0), incl(-0.0)), 3);
        for i in 0..SMALL_MAX {
            z.insert(format!("n{i}").as_bytes(), 1.0);
        }
        assert_eq!(z.encoding(), "skiplist");
        z.insert(b"z", -0.0);
        assert_eq!(format_double(z.score(b"z").unwrap()), "-0");
        assert_eq!(format_double(z.score(b"m").unwrap()), "0");
        assert_eq!(z.insert(b"z", 0.0), InsertResult::Unchanged);
        assert_eq!(
            names(z.range_by_score(incl(0.0), incl(0.0), false, 0, None)),
            ["a", "b", "m", "z"]
        );
        // ZINCRBY of a new member by -0 replies "-0" even where a listpack stores 0.
        let mut z = SortedSet::new();
        let flags = AddFlags {
            incr: true,
            ..AddFlags::default()
        };
        match z.add(b"n", -0.0, flags) {
            AddOutcome::Added { score } => assert_eq!(format_double(score), "-0"),
            other => panic!("{other:?}"),
        }
        assert_eq!(format_double(z.score(b"n").unwrap()), "0");
    }

    #[test]
    fn snapshots_keep_encoding_and_negative_zero() {
        let mut z = SortedSet::new();
        for i in 0..=SMALL_MAX {
            z.insert(format!("m{i}").as_bytes(), 1.0);
        }
        z.insert(b"neg", -0.0);
        z.remove_range_by_score(incl(1.0), incl(1.0));
        assert_eq!((z.len(), z.encoding()), (1, "skiplist"));
        let copy = SortedSet::from_snapshot(true, z.iter());
        assert_eq!(copy.encoding(), "skiplist");
        assert_eq!(format_double(copy.score(b"neg").unwrap()), "-0");
        copy.check_invariants();
        // Unsorted or duplicated input is tolerated.
        let copy = SortedSet::from_snapshot(false, [("b", 2.0), ("a", 1.0), ("b", 3.0)]);
        copy.check_invariants();
        assert_eq!(names(copy.iter()), ["a", "b"]);
        assert_eq!(copy.score(b"b"), Some(3.0));
        let copy = SortedSet::from_snapshot(false, [("a", f64::NAN), ("b", 1.0)]);
        copy.check_invariants();
        assert_eq!(names(copy.iter()), ["b"]);
    }

    #[test]
    fn encoding_changes_like_redis() {
        let mut z = SortedSet::new();
        assert_eq!(z.encoding(), "listpack");
        z.insert(&[b'x'; 64], 1.0);
        assert_eq!(z.encoding(), "listpack");
        z.insert(&[b'y'; 65], 1.0);
        assert_eq!(z.encoding(), "skiplist");
        z.remove(&[b'y'; 65]);
        assert_eq!(z.encoding(), "skiplist");
        z.check_invariants();
        // Observed on redis-server 7.0.15: `ZADD h 1 <65 bytes> -0 a` keeps -0 for a,
        // `ZADD h -0 a 1 <65 bytes>` does not (7.0 picks the encoding by first member).
        let long = [b'x'; 65];
        let mut z = SortedSet::new();
        z.insert(&long, 1.0);
        z.insert(b"a", -0.0);
        assert_eq!(format_double(z.score(b"a").unwrap()), "-0");
        let mut z = SortedSet::new();
        z.insert(b"a", -0.0);
        z.insert(&long, 1.0);
        assert_eq!(format_double(z.score(b"a").unwrap()), "0");
        assert_eq!(z.encoding(), "skiplist");
    }

    #[test]
    fn infinities_sort_at_the_ends() {
        let z = set_of(&[("p", f64::INFINITY), ("n", f64::NEG_INFINITY), ("z", 0.0)]);
        assert_eq!(names(z.iter()), ["n", "z", "p"]);
        assert_eq!(
            z.count_in_score_range(ScoreBound::NEG_INF, ScoreBound::POS_INF),
            3
        );
        assert_eq!(
            z.count_in_score_range(
                ScoreBound::Exclusive(f64::NEG_INFINITY),
                ScoreBound::POS_INF
            ),
            2
        );
        assert_eq!(
            z.count_in_score_range(ScoreBound::POS_INF, ScoreBound::POS_INF),
            1
        );
        assert_eq!(
            z.count_in_score_range(ScoreBound::NEG_INF, ScoreBound::NEG_INF),
            1
        );
    }

    #[test]
    fn nan_is_refused_without_panicking() {
        let mut z = set_of(&[("a", 1.0)]);
        assert_eq!(z.insert(b"a", f64::NAN), InsertResult::Rejected);
        assert_eq!(z.insert(b"b", f64::NAN), InsertResult::Rejected);
        assert_eq!(
            z.add(b"b", f64::NAN, AddFlags::default()),
            AddOutcome::NotANumber
        );
        assert_eq!(z.len(), 1);
        assert_eq!(
            z.count_in_score_range(incl(f64::NAN), ScoreBound::POS_INF),
            0
        );
        assert_eq!(
            z.range_by_score(incl(0.0), incl(f64::NAN), false, 0, None)
                .count(),
            0
        );
        assert_eq!(format_double(f64::NAN), "nan");
    }

    #[test]
    fn zadd_flags_follow_redis() {
        let mut z = set_of(&[("a", 5.0)]);
        let f = |nx, xx, gt, lt, incr| AddFlags {
            nx,
            xx,
            gt,
            lt,
            incr,
        };
        assert_eq!(
            z.add(b"a", 1.0, f(true, false, false, false, false)),
            AddOutcome::Skipped
        );
        assert_eq!(
            z.add(b"b", 1.0, f(false, true, false, false, false)),
            AddOutcome::Skipped
        );
        assert_eq!(
            z.add(b"a", 4.0, f(false, false, true, false, false)),
            AddOutcome::Skipped
        );
        assert_eq!(
            z.add(b"a", 5.0, f(false, false, true, false, false)),
            AddOutcome::Skipped
        );
        assert_eq!(
            z.add(b"a", 6.0, f(false, false, true, false, false)),
            AddOutcome::Updated { old: 5.0, new: 6.0 }
        );
        assert_eq!(
            z.add(b"a", 7.0, f(false, false, false, true, false)),
            AddOutcome::Skipped
        );
        // GT/LT do not stop new members.
        assert_eq!(
            z.add(b"c", 1.0, f(false, false, false, true, false)),
            AddOutcome::Added { score: 1.0 }
        );
        assert_eq!(
            z.add(b"a", 0.5, f(false, false, false, false, true)),
            AddOutcome::Updated { old: 6.0, new: 6.5 }
        );
        assert_eq!(
            z.add(b"a", 0.0, f(false, false, false, false, true)),
            AddOutcome::Unchanged { score: 6.5 }
        );
        // INCR with GT compares the incremented score.
        assert_eq!(
            z.add(b"a", -1.0, f(false, false, true, false, true)),
            AddOutcome::Skipped
        );
        z.insert(b"i", f64::INFINITY);
        assert_eq!(
            z.add(b"i", f64::NEG_INFINITY, f(false, false, false, false, true)),
            AddOutcome::NotANumber
        );
        assert_eq!(z.score(b"i"), Some(f64::INFINITY));
        z.check_invariants();
    }

    #[test]
    fn lex_ranges_match_redis() {
        // Observed on redis-server 7.0.15 with members "", a, b, c at score 0.
        let z = set_of(&[("a", 0.0), ("b", 0.0), ("c", 0.0), ("", 0.0)]);
        let cases: &[(&str, &str, &[&str])] = &[
            ("-", "+", &["", "a", "b", "c"]),
            ("+", "-", &[]),
            ("-", "-", &[]),
            ("+", "+", &[]),
            ("[a", "[a", &["a"]),
            ("(a", "[a", &[]),
            ("[", "[b", &["", "a", "b"]),
            ("(", "+", &["a", "b", "c"]),
            ("[b", "-", &[]),
            ("[", "(", &[]),
            ("-", "[", &[""]),
        ];
        for (min, max, want) in cases {
            let (min, max) = (lex(min), lex(max));
            assert_eq!(names(z.range_by_lex(&min, &max, false, 0, None)), *want);
            assert_eq!(z.count_in_lex_range(&min, &max), want.len());
            let mut rev = names(z.range_by_lex(&min, &max, true, 0, None));
            rev.reverse();
            assert_eq!(rev, *want);
        }
        // Mixed scores: Redis's listpack walk (b:1 a:2 d:3 c:4), observed on 7.0.15.
        let z = set_of(&[("b", 1.0), ("a", 2.0), ("d", 3.0), ("c", 4.0)]);
        let mixed: &[(&str, &str, &[&str], &[&str])] = &[
            ("[a", "[c", &["b", "a"], &["c", "d", "a", "b"]),
            ("[b", "[d", &["b", "a", "d", "c"], &["c", "d"]),
            ("-", "[b", &["b", "a"], &["a", "b"]),
            ("[c", "+", &["d", "c"], &["c", "d"]),
            ("[a", "(b", &[], &[]),
        ];
        for (min, max, fwd, rev) in mixed {
            let (min, max) = (lex(min), lex(max));
            assert_eq!(names(z.range_by_lex(&min, &max, false, 0, None)), *fwd);
            assert_eq!(names(z.range_by_lex(&min, &max, true, 0, None)), *rev);
            assert_eq!(z.count_in_lex_range(&min, &max), fwd.len());
        }
    }

    #[test]
    fn sliding_log_script_shape() {
        // The seed 003 pattern: trim old entries, read newest first with LIMIT, add now.
        let mut z = SortedSet::new();
        for t in 100..110u64 {
            let ts = t.to_string();
            z.remove_range_by_score(incl(0.0), incl(t as f64 - 5.0));
            let newest: Vec<_> = z
                .range_by_score(ScoreBound::NEG_INF, ScoreBound::POS_INF, true, 0, Some(5))
                .map(|(m, _)| m.to_vec())
                .collect();
            assert!(newest.len() <= 5);
            if let Some(first) = newest.first() {
                assert_eq!(first[..], *(t - 1).to_string().as_bytes());
            }
            z.insert(ts.as_bytes(), t as f64);
        }
        assert_eq!(names(z.iter()), ["105", "106", "107", "108", "109"]);
    }

    #[test]
    fn scan_small_sets_reply_whole() {
        let z = set_of(&[("b", 2.0), ("a", 1.0)]);
        let (next, items) = z.scan(12345, 1);
        assert_eq!(next, 0);
        assert_eq!(names(items), ["a", "b"]);
    }

    #[test]
    fn scan_large_sets_visit_everything_once_despite_changes() {
        let mut z = SortedSet::new();
        for i in 0..1000u32 {
            // Groups of 7 equal scores must never be split across steps.
            z.insert(format!("m{i}").as_bytes(), f64::from(i / 7));
        }
        let mut seen = std::collections::BTreeSet::new();
        let mut cursor = 0;
        let mut steps = 0;
        loop {
            let (next, items) = z.scan(cursor, 10);
            let batch: Vec<(Bytes, f64)> =
                items.map(|(m, s)| (Bytes::copy_from_slice(m), s)).collect();
            assert!(!batch.is_empty());
            for (m, _) in &batch {
                assert!(seen.insert(m.clone()), "returned twice");
            }
            // Churn between steps: add new members, remove some not yet seen.
            z.insert(format!("new{steps}").as_bytes(), -1.0);
            z.remove(format!("m{}", 999 - steps).as_bytes());
            steps += 1;
            if next == 0 {
                break;
            }
            cursor = next;
        }
        for i in 0..1000 - steps {
            assert!(seen.contains(format!("m{i}").as_bytes()), "m{i} missed");
        }
        assert!(
            steps > 50,
            "steps of about COUNT members expected, got {steps}"
        );
    }

    #[test]
    fn score_changes_in_place_or_by_moving_keep_the_order() {
        let mut z = SortedSet::new();
        for i in 0..20u8 {
            z.insert(&[b'a' + i], f64::from(i) * 10.0);
        }
        assert_eq!(z.encoding(), "skiplist");
        let order = |z: &SortedSet| names(z.iter()).concat();
        // Between its neighbours (90 and 110): stays in place.
        assert_eq!(z.insert(b"k", 105.0), InsertResult::Updated { old: 100.0 });
        assert_eq!(order(&z), "abcdefghijklmnopqrst");
        // Past a neighbour: moves.
        z.insert(b"k", 115.0);
        assert_eq!(order(&z), "abcdefghijlkmnopqrst");
        z.insert(b"k", 125.0);
        assert_eq!(order(&z), "abcdefghijlmknopqrst");
        // A tie with a neighbour orders by member bytes: "k" sorts after "j", before "l".
        z.insert(b"k", 90.0);
        assert_eq!(order(&z), "abcdefghijklmnopqrst");
        z.insert(b"k", 110.0);
        assert_eq!(order(&z), "abcdefghijklmnopqrst");
        // To the ends and back.
        z.insert(b"k", f64::NEG_INFINITY);
        assert_eq!(order(&z), "kabcdefghijlmnopqrst");
        z.insert(b"a", f64::INFINITY);
        assert_eq!(order(&z), "kbcdefghijlmnopqrsta");
        z.add(
            b"a",
            -1e9,
            AddFlags {
                incr: true,
                ..AddFlags::default()
            },
        );
        assert_eq!(order(&z), "kbcdefghijlmnopqrsta", "inf - 1e9 is inf");
        for (i, m) in ["k", "b", "c"].iter().enumerate() {
            assert_eq!(z.rank(m.as_bytes()), Some(i));
        }
        z.check_invariants();
    }

    #[test]
    fn hundred_thousand_inserts_and_ranks() {
        let mut z = SortedSet::new();
        let n = 100_000u64;
        // A deterministic scramble so inserts arrive out of order.
        let key = |i: u64| (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) % 1000;
        for i in 0..n {
            z.insert(format!("{i:06}").as_bytes(), key(i) as f64);
        }
        assert_eq!(z.len(), n as usize);
        let mut expected: Vec<(u64, String)> =
            (0..n).map(|i| (key(i), format!("{i:06}"))).collect();
        expected.sort();
        for (rank, (_, m)) in expected.iter().enumerate().step_by(97) {
            assert_eq!(z.rank(m.as_bytes()), Some(rank));
            assert_eq!(z.get_by_rank(rank).unwrap().0, m.as_bytes());
        }
        let Repr::Large(large) = &z.repr else {
            panic!("a large set should use the tree");
        };
        let tree = &large.tree;
        assert!(usize::from(tree.height(tree.root)) <= 25);
        assert_eq!(z.remove_range_by_rank(0, 89_999), 90_000);
        assert_eq!(z.len(), 10_000);
        z.check_invariants();
        // The arena shrank back once most slots were free.
        let Repr::Large(large) = &z.repr else {
            panic!("10k members should still use the tree");
        };
        assert!(large.tree.nodes.len() < 40_000);
        // Like Redis, a skiplist stays one however small it gets.
        z.remove_range_by_rank(0, 9_998);
        assert_eq!(z.encoding(), "skiplist");
        z.check_invariants();
    }

    #[test]
    fn the_value_itself_stays_small() {
        // Every key's value enum is as large as its largest variant.
        assert!(std::mem::size_of::<SortedSet>() <= 32);
    }

    #[test]
    fn memory_estimate_tracks_content() {
        let mut z = SortedSet::new();
        let empty = z.memory_estimate();
        for i in 0..1000 {
            z.insert(format!("member-{i:04}").as_bytes(), f64::from(i));
        }
        let full = z.memory_estimate();
        assert!(full > empty + 1000 * 11);
        z.pop_min(1000);
        assert!(z.memory_estimate() < full / 2);
    }

    // ----- model-based test against a sorted Vec -----

    #[derive(Clone, Debug)]
    enum Op {
        Insert(Vec<u8>, f64),
        Add(Vec<u8>, f64, AddFlags),
        Remove(Vec<u8>),
        RemoveByScore(ScoreBound, ScoreBound),
        RemoveByRank(i64, i64),
        RemoveByLex(LexBound, LexBound),
        PopMin(usize),
        PopMax(usize),
    }

    #[derive(Clone, Debug)]
    enum Query {
        Score(Vec<u8>),
        Rank(Vec<u8>),
        ByRank(i64, i64, bool),
        ByScore(ScoreBound, ScoreBound, bool, usize, Option<usize>),
        ByLex(LexBound, LexBound, bool, usize, Option<usize>),
    }

    type Model = Vec<(Vec<u8>, f64)>;

    fn model_sort(m: &mut Model) {
        m.sort_by(|a, b| cmp_key(a.1, &a.0, b.1, &b.0));
    }

    /// `skiplist`: the model's own record of Redis's encoding (listpack until a 9th
    /// member in tests, then skiplist for good); only a listpack turns -0 into 0.
    fn model_insert(m: &mut Model, skiplist: &mut bool, member: &[u8], score: f64) -> InsertResult {
        if score.is_nan() {
            return InsertResult::Rejected;
        }
        let is_new = !m.iter().any(|(x, _)| x == member);
        if is_new && (m.len() >= SMALL_MAX || member.len() > SMALL_MEMBER_MAX) {
            *skiplist = true;
        }
        let score = if score == 0.0 && !*skiplist {
            0.0
        } else {
            score
        };
        let r = match m.iter_mut().find(|(x, _)| x == member) {
            Some(e) if e.1 == score => InsertResult::Unchanged,
            Some(e) => {
                let old = e.1;
                e.1 = score;
                InsertResult::Updated { old }
            }
            None => {
                m.push((member.to_vec(), score));
                InsertResult::Added
            }
        };
        model_sort(m);
        r
    }

    fn model_add(
        m: &mut Model,
        skiplist: &mut bool,
        member: &[u8],
        score: f64,
        f: AddFlags,
    ) -> AddOutcome {
        match m.iter().find(|(x, _)| x == member).map(|e| e.1) {
            None if f.xx => AddOutcome::Skipped,
            None => {
                model_insert(m, skiplist, member, score);
                AddOutcome::Added { score }
            }
            Some(_) if f.nx => AddOutcome::Skipped,
            Some(cur) => {
                let new = if f.incr { cur + score } else { score };
                if new.is_nan() {
                    AddOutcome::NotANumber
                } else if (f.gt && new <= cur) || (f.lt && new >= cur) {
                    AddOutcome::Skipped
                } else if new == cur {
                    AddOutcome::Unchanged { score: new }
                } else {
                    model_insert(m, skiplist, member, new);
                    AddOutcome::Updated { old: cur, new }
                }
            }
        }
    }

    fn in_score(min: ScoreBound, max: ScoreBound, s: f64) -> bool {
        min.admits_above(s) && max.admits_below(s)
    }

    /// Redis's listpack lex walk, which is also exact for uniform scores.
    fn model_lex_span(m: &Model, min: &LexBound, max: &LexBound, rev: bool) -> (usize, usize) {
        let n = m.len();
        if n == 0 || lex_range_is_empty(min, max) {
            return (0, 0);
        }
        if !min.admits_above(&m[n - 1].0) || !max.admits_below(&m[0].0) {
            return (0, 0);
        }
        if !rev {
            let Some(lo) = m.iter().position(|(x, _)| min.admits_above(x)) else {
                return (0, 0);
            };
            let mut hi = lo;
            while hi < n && max.admits_below(&m[hi].0) {
                hi += 1;
            }
            (lo, hi)
        } else {
            let Some(top) = m.iter().rposition(|(x, _)| max.admits_below(x)) else {
                return (0, 0);
            };
            let mut lo = top + 1;
            while lo > 0 && min.admits_above(&m[lo - 1].0) {
                lo -= 1;
            }
            (lo, top + 1)
        }
    }

    fn model_window(
        m: &Model,
        (lo, hi): (usize, usize),
        rev: bool,
        offset: usize,
        count: Option<usize>,
    ) -> Vec<(Vec<u8>, f64)> {
        let mut v: Vec<_> = m[lo..hi.max(lo)].to_vec();
        if rev {
            v.reverse();
        }
        v.into_iter()
            .skip(offset)
            .take(count.unwrap_or(usize::MAX))
            .collect()
    }

    fn model_remove_span(m: &mut Model, keep: impl Fn(usize, &(Vec<u8>, f64)) -> bool) -> usize {
        let before = m.len();
        let mut i = 0;
        m.retain(|e| {
            i += 1;
            keep(i - 1, e)
        });
        before - m.len()
    }

    fn collect(it: Iter<'_>) -> Vec<(Vec<u8>, f64)> {
        it.map(|(m, s)| (m.to_vec(), s)).collect()
    }

    /// Exact contents, telling -0 from 0.
    fn bits(items: &[(Vec<u8>, f64)]) -> Vec<(Vec<u8>, u64)> {
        items
            .iter()
            .map(|(m, s)| (m.clone(), s.to_bits()))
            .collect()
    }

    fn apply(z: &mut SortedSet, m: &mut Model, skiplist: &mut bool, op: &Op) {
        match op {
            Op::Insert(k, s) => assert_eq!(z.insert(k, *s), model_insert(m, skiplist, k, *s)),
            Op::Add(k, s, f) => assert_eq!(z.add(k, *s, *f), model_add(m, skiplist, k, *s, *f)),
            Op::Remove(k) => {
                let want = m.iter().position(|(x, _)| x == k).map(|i| m.remove(i).1);
                assert_eq!(z.remove(k), want);
            }
            Op::RemoveByScore(min, max) => {
                let want = model_remove_span(m, |_, e| !in_score(*min, *max, e.1));
                assert_eq!(z.remove_range_by_score(*min, *max), want);
            }
            Op::RemoveByRank(start, stop) => {
                let want = match normalize_range(*start, *stop, m.len()) {
                    Some((a, b)) => {
                        let got = z.remove_range_by_rank(a, b);
                        (got, model_remove_span(m, |i, _| i < a || i > b))
                    }
                    None => (0, 0),
                };
                assert_eq!(want.0, want.1);
            }
            Op::RemoveByLex(min, max) => {
                let (lo, hi) = model_lex_span(m, min, max, false);
                let want = model_remove_span(m, |i, _| i < lo || i >= hi);
                assert_eq!(z.remove_range_by_lex(min, max), want);
            }
            Op::PopMin(n) => {
                let k = (*n).min(m.len());
                let want: Vec<_> = m.drain(..k).collect();
                let got: Vec<_> = z
                    .pop_min(*n)
                    .into_iter()
                    .map(|(b, s)| (b.to_vec(), s))
                    .collect();
                assert_eq!(got, want);
            }
            Op::PopMax(n) => {
                let k = (*n).min(m.len());
                let mut want: Vec<_> = m.drain(m.len() - k..).collect();
                want.reverse();
                let got: Vec<_> = z
                    .pop_max(*n)
                    .into_iter()
                    .map(|(b, s)| (b.to_vec(), s))
                    .collect();
                assert_eq!(got, want);
            }
        }
    }

    fn check_query(z: &SortedSet, m: &Model, q: &Query) {
        match q {
            Query::Score(k) => {
                let want = m.iter().find(|(x, _)| x == k).map(|e| e.1);
                assert_eq!(z.score(k), want);
            }
            Query::Rank(k) => {
                let want = m.iter().position(|(x, _)| x == k);
                assert_eq!(z.rank(k), want);
                assert_eq!(z.rev_rank(k), want.map(|r| m.len() - 1 - r));
            }
            Query::ByRank(start, stop, rev) => {
                let want: Model = match normalize_range(*start, *stop, m.len()) {
                    Some((a, b)) if *rev => {
                        m.iter().rev().skip(a).take(b - a + 1).cloned().collect()
                    }
                    Some((a, b)) => m[a..=b].to_vec(),
                    None => Vec::new(),
                };
                let got = match normalize_range(*start, *stop, z.len()) {
                    Some((a, b)) if *rev => collect(z.rev_range_by_rank(a, b)),
                    Some((a, b)) => collect(z.range_by_rank(a, b)),
                    None => Vec::new(),
                };
                assert_eq!(got, want);
            }
            Query::ByScore(min, max, rev, offset, count) => {
                let lo = m
                    .iter()
                    .position(|e| in_score(*min, *max, e.1))
                    .unwrap_or(0);
                let n = m.iter().filter(|e| in_score(*min, *max, e.1)).count();
                let want = model_window(m, (lo, lo + n), *rev, *offset, *count);
                let got = collect(z.range_by_score(*min, *max, *rev, *offset, *count));
                assert_eq!(got, want);
                let it = z.range_by_score(*min, *max, *rev, *offset, *count);
                assert_eq!(it.len(), want.len());
                assert_eq!(z.count_in_score_range(*min, *max), n);
            }
            Query::ByLex(min, max, rev, offset, count) => {
                let span = model_lex_span(m, min, max, *rev);
                let want = model_window(m, span, *rev, *offset, *count);
                assert_eq!(
                    collect(z.range_by_lex(min, max, *rev, *offset, *count)),
                    want
                );
                let (lo, hi) = model_lex_span(m, min, max, false);
                assert_eq!(z.count_in_lex_range(min, max), hi - lo);
            }
        }
    }

    fn member() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(prop::sample::select(vec![b'a', b'b', 0u8, 0xff]), 0..3)
    }

    fn score(uniform: bool) -> BoxedStrategy<f64> {
        if uniform {
            Just(0.0).boxed()
        } else {
            prop_oneof![
                prop::sample::select(vec![
                    f64::NEG_INFINITY,
                    -1.5,
                    -0.0,
                    0.0,
                    1.0,
                    2.0,
                    2.5,
                    f64::INFINITY
                ]),
                (-3i32..4).prop_map(f64::from),
            ]
            .boxed()
        }
    }

    fn score_bound() -> impl Strategy<Value = ScoreBound> {
        (score(false), any::<bool>()).prop_map(|(v, ex)| {
            if ex {
                ScoreBound::Exclusive(v)
            } else {
                ScoreBound::Inclusive(v)
            }
        })
    }

    fn lex_bound() -> impl Strategy<Value = LexBound> {
        prop_oneof![
            1 => Just(LexBound::NegInf),
            1 => Just(LexBound::PosInf),
            3 => member().prop_map(|m| LexBound::Inclusive(Bytes::from(m))),
            3 => member().prop_map(|m| LexBound::Exclusive(Bytes::from(m))),
        ]
    }

    fn flags() -> impl Strategy<Value = AddFlags> {
        (any::<[bool; 5]>()).prop_map(|[nx, xx, gt, lt, incr]| AddFlags {
            nx,
            xx,
            gt,
            lt,
            incr,
        })
    }

    fn op(uniform: bool) -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (member(), score(uniform)).prop_map(|(k, s)| Op::Insert(k, s)),
            3 => (member(), score(uniform), flags()).prop_map(|(k, s, f)| Op::Add(k, s, f)),
            2 => member().prop_map(Op::Remove),
            1 => (score_bound(), score_bound()).prop_map(|(a, b)| Op::RemoveByScore(a, b)),
            1 => (-6i64..6, -6i64..6).prop_map(|(a, b)| Op::RemoveByRank(a, b)),
            1 => (lex_bound(), lex_bound()).prop_map(|(a, b)| Op::RemoveByLex(a, b)),
            1 => (0usize..4).prop_map(Op::PopMin),
            1 => (0usize..4).prop_map(Op::PopMax),
        ]
    }

    fn query() -> impl Strategy<Value = Query> {
        let limit = (0usize..4, prop::option::of(0usize..4));
        prop_oneof![
            member().prop_map(Query::Score),
            member().prop_map(Query::Rank),
            (-8i64..8, -8i64..8, any::<bool>()).prop_map(|(a, b, r)| Query::ByRank(a, b, r)),
            (score_bound(), score_bound(), any::<bool>(), limit.clone())
                .prop_map(|(a, b, r, (o, c))| Query::ByScore(a, b, r, o, c)),
            (lex_bound(), lex_bound(), any::<bool>(), limit)
                .prop_map(|(a, b, r, (o, c))| Query::ByLex(a, b, r, o, c)),
        ]
    }

    fn scenario() -> impl Strategy<Value = Vec<(Op, Vec<Query>)>> {
        any::<bool>().prop_flat_map(|uniform| {
            prop::collection::vec((op(uniform), prop::collection::vec(query(), 0..4)), 0..80)
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn behaves_like_a_sorted_vec(steps in scenario()) {
            let mut z = SortedSet::new();
            let mut m: Model = Vec::new();
            let mut skiplist = false;
            for (op, queries) in &steps {
                apply(&mut z, &mut m, &mut skiplist, op);
                z.check_invariants();
                prop_assert_eq!(bits(&collect(z.iter())), bits(&m));
                prop_assert_eq!(z.encoding(), if skiplist { "skiplist" } else { "listpack" });
                let copy = SortedSet::from_snapshot(z.encoding() == "skiplist", z.iter());
                copy.check_invariants();
                prop_assert_eq!(bits(&collect(copy.iter())), bits(&m));
                prop_assert_eq!(copy.encoding(), z.encoding());
                for q in queries {
                    check_query(&z, &m, q);
                }
            }
        }

        #[test]
        fn large_sets_stay_balanced_through_churn(
            ops in prop::collection::vec((0u16..400, -50i32..50, any::<bool>()), 0..1500)
        ) {
            let mut z = SortedSet::new();
            let mut m: Model = Vec::new();
            let mut skiplist = false;
            for (k, s, add) in ops {
                let key = k.to_be_bytes();
                if add {
                    model_insert(&mut m, &mut skiplist, &key, f64::from(s));
                    z.insert(&key, f64::from(s));
                } else {
                    let want = m.iter().position(|(x, _)| x[..] == key[..]).map(|i| m.remove(i).1);
                    prop_assert_eq!(z.remove(&key), want);
                }
            }
            z.check_invariants();
            prop_assert_eq!(collect(z.iter()), m.clone());
            for (r, (k, _)) in m.iter().enumerate() {
                prop_assert_eq!(z.rank(k), Some(r));
            }
        }
    }
}
