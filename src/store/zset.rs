//! Sorted sets: the value behind Redis's ZSET commands.
//!
//! A [`SortedSet`] keeps members ordered by `(score, member bytes)` exactly as Redis does,
//! and owns everything the ZSET commands need from the value itself: the ordered storage
//! (up to 128 members a sorted vector, like Redis's listpack, since limiter sets are many
//! and small; beyond that an arena AVL tree with subtree sizes, so inserts, removals,
//! ranks and the start of any range cost O(log n) and a range of k items O(log n + k),
//! plus a member -> score hash map for O(1) ZSCORE), and the argument parsers and score
//! printer whose texts must match Redis 7.0 byte for byte. It is part of the Raft state
//! machine, so nothing here is random or order-leaking: the structures are deterministic,
//! their shape (which depends on history) never shows in any result, and the hash map is
//! never iterated.

use std::cmp::Ordering;
use std::fmt;

use bytes::Bytes;

/// Reply error for a ZADD / ZINCRBY score that is not a float.
pub const ERR_NOT_A_FLOAT: &str = "ERR value is not a valid float";
/// Reply error for a score range bound that is not a float (ZCOUNT, ZRANGEBYSCORE, ...).
pub const ERR_MIN_MAX_NOT_FLOAT: &str = "ERR min or max is not a float";
/// Reply error for a malformed lex range bound (ZRANGEBYLEX, ZLEXCOUNT, ...).
pub const ERR_MIN_MAX_NOT_STRING_RANGE: &str = "ERR min or max not valid string range item";
/// Reply error when ZINCRBY / ZADD INCR would produce NaN (for example inf + -inf).
pub const ERR_NAN_RESULT: &str = "ERR resulting score is not a number (NaN)";

/// Most members one set can hold: arena slots are `u32` indexes.
pub const MAX_LEN: usize = u32::MAX as usize;

/// One end of a score range (`1.5`, `(1.5`, `-inf`, `+inf`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ScoreBound {
    /// The score itself is in range.
    Inclusive(f64),
    /// The score itself is out of range (the `(` prefix).
    Exclusive(f64),
}

impl ScoreBound {
    /// `-inf`: every score is at or above it.
    pub const NEG_INF: ScoreBound = ScoreBound::Inclusive(f64::NEG_INFINITY);
    /// `+inf`: every score is at or below it.
    pub const POS_INF: ScoreBound = ScoreBound::Inclusive(f64::INFINITY);

    /// The bound's score.
    pub fn value(self) -> f64 {
        match self {
            ScoreBound::Inclusive(v) | ScoreBound::Exclusive(v) => v,
        }
    }

    /// Whether the bound excludes its own score.
    pub fn is_exclusive(self) -> bool {
        matches!(self, ScoreBound::Exclusive(_))
    }

    /// As a lower bound: does `score` lie above it?
    fn admits_above(self, score: f64) -> bool {
        match self {
            ScoreBound::Inclusive(v) => score >= v,
            ScoreBound::Exclusive(v) => score > v,
        }
    }

    /// As an upper bound: does `score` lie below it?
    fn admits_below(self, score: f64) -> bool {
        match self {
            ScoreBound::Inclusive(v) => score <= v,
            ScoreBound::Exclusive(v) => score < v,
        }
    }
}

/// One end of a lex range (`[a`, `(a`, `-`, `+`).
///
/// `-` and `+` stay distinct as either end, as in Redis: `ZRANGEBYLEX k + +` is empty.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LexBound {
    /// `-`: below every string.
    NegInf,
    /// `+`: above every string.
    PosInf,
    /// `[x`: `x` itself is in range.
    Inclusive(Bytes),
    /// `(x`: `x` itself is out of range.
    Exclusive(Bytes),
}

impl LexBound {
    /// As a lower bound: does `member` lie above it?
    fn admits_above(&self, member: &[u8]) -> bool {
        match self {
            LexBound::NegInf => true,
            LexBound::PosInf => false,
            LexBound::Inclusive(b) => member >= &b[..],
            LexBound::Exclusive(b) => member > &b[..],
        }
    }

    /// As an upper bound: does `member` lie below it?
    fn admits_below(&self, member: &[u8]) -> bool {
        match self {
            LexBound::NegInf => false,
            LexBound::PosInf => true,
            LexBound::Inclusive(b) => member <= &b[..],
            LexBound::Exclusive(b) => member < &b[..],
        }
    }

    /// Redis marks `-` and `+` exclusive, which makes `- -` and `+ +` empty ranges.
    fn is_exclusive(&self) -> bool {
        !matches!(self, LexBound::Inclusive(_))
    }
}

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
/// a set starts as a listpack (a sorted vector here) and becomes a skiplist (map + tree
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

#[derive(Clone)]
enum Repr {
    /// Redis's listpack: sorted by (score, member), scores never `-0`. Little memory per
    /// member, which is what millions of small limiter sets need; at this size O(n)
    /// inserts and member scans are a few cache lines.
    Small(Vec<(Bytes, f64)>),
    /// Redis's skiplist: O(1) scores by member, O(log n) everything ordered. Boxed so
    /// that small sets (and every key's value enum) stay small.
    Large(Box<Large>),
}

#[derive(Clone)]
struct Large {
    /// Member -> score; looked up only, never iterated (its order is random).
    scores: ahash::AHashMap<Bytes, f64>,
    /// The same members by (score, member), sharing the member allocations.
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
            repr: Repr::Small(Vec::new()),
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
        let items: Vec<(Bytes, f64)> = items
            .into_iter()
            .map(|(m, s)| (Bytes::copy_from_slice(m.as_ref()), s))
            .collect();
        let mut set = SortedSet::new();
        if skiplist {
            set.grow();
        }
        let ascending = items.iter().all(|(_, s)| !s.is_nan())
            && items
                .windows(2)
                .all(|w| cmp_key(w[0].1, &w[0].0, w[1].1, &w[1].0) == Ordering::Less);
        let fits_listpack =
            items.len() <= SMALL_MAX && items.iter().all(|(m, _)| m.len() <= SMALL_MEMBER_MAX);
        if !ascending || !(skiplist || fits_listpack) {
            for (m, s) in items {
                set.insert(&m, s);
            }
            return set;
        }
        set.member_bytes = items.iter().map(|(m, _)| m.len()).sum();
        if skiplist {
            let scores = items.iter().map(|(m, s)| (m.clone(), *s)).collect();
            set.repr = Repr::Large(Box::new(Large {
                scores,
                tree: Tree::from_sorted(items),
            }));
        } else {
            let items = items
                .into_iter()
                .map(|(m, s)| (m, listpack_score(s)))
                .collect();
            set.repr = Repr::Small(items);
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
            Repr::Small(items) => items.len(),
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
            Repr::Small(items) => items.iter().find(|(m, _)| m[..] == *member).map(|e| e.1),
            Repr::Large(large) => large.scores.get(member).copied(),
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
        if score.is_nan() {
            return InsertResult::Rejected;
        }
        let outgrown =
            |items: &Vec<(Bytes, f64)>| items.len() >= SMALL_MAX || member.len() > SMALL_MEMBER_MAX;
        if matches!(&self.repr, Repr::Small(items) if outgrown(items)) && !self.contains(member) {
            self.grow();
        }
        let result = match &mut self.repr {
            Repr::Small(items) => small_insert(items, member, listpack_score(score)),
            Repr::Large(large) => large.insert(member, score),
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
        if score.is_nan() {
            return AddOutcome::NotANumber;
        }
        let Some(current) = self.score(member) else {
            if flags.xx {
                return AddOutcome::Skipped;
            }
            return match self.insert(member, score) {
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
        match self.insert(member, new) {
            InsertResult::Updated { old } => AddOutcome::Updated { old, new },
            _ => AddOutcome::Unchanged { score: new },
        }
    }

    /// Remove `member` (ZREM); returns its score if it was present. O(log n).
    pub fn remove(&mut self, member: &[u8]) -> Option<f64> {
        let score = match &mut self.repr {
            Repr::Small(items) => {
                let i = items.iter().position(|(m, _)| m[..] == *member)?;
                items.remove(i).1
            }
            Repr::Large(large) => {
                let score = large.scores.remove(member)?;
                let t = large.tree.unlink(score, member);
                if t != NIL {
                    large.tree.release(t);
                }
                score
            }
        };
        self.member_bytes -= member.len();
        self.after_removal();
        Some(score)
    }

    /// 0-based position of `member` in ascending order (ZRANK), O(log n).
    pub fn rank(&self, member: &[u8]) -> Option<usize> {
        let score = self.score(member)?;
        Some(self.count_before(|s, m| cmp_key(s, m, score, member) == Ordering::Less))
    }

    /// 0-based position of `member` in descending order (ZREVRANK), O(log n).
    pub fn rev_rank(&self, member: &[u8]) -> Option<usize> {
        let rank = self.rank(member)?;
        Some(self.len() - 1 - rank)
    }

    /// The member and score at ascending position `rank`, O(log n).
    pub fn get_by_rank(&self, rank: usize) -> Option<(&Bytes, f64)> {
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
        let popped = (0..n).filter_map(|_| self.remove_at(0)).collect();
        self.after_removal();
        popped
    }

    /// Remove and return up to `count` highest members, highest first (ZPOPMAX).
    pub fn pop_max(&mut self, count: usize) -> Vec<(Bytes, f64)> {
        let n = count.min(self.len());
        let popped = (0..n)
            .filter_map(|_| self.remove_at(self.len().checked_sub(1)?))
            .collect();
        self.after_removal();
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
        // Large sets share each member between map and tree through a refcount block.
        const SHARED_BLOCK: usize = 24 + ALLOC_OVERHEAD;
        let base =
            std::mem::size_of::<SortedSet>() + self.member_bytes + self.len() * ALLOC_OVERHEAD;
        match &self.repr {
            Repr::Small(items) => base + items.capacity() * std::mem::size_of::<(Bytes, f64)>(),
            Repr::Large(large) => {
                let Large { scores, tree } = &**large;
                base + tree.nodes.capacity() * std::mem::size_of::<Node>()
                    + tree.free.capacity() * std::mem::size_of::<u32>()
                    + scores.capacity() * (std::mem::size_of::<(Bytes, f64)>() + 1)
                    + self.len() * SHARED_BLOCK
            }
        }
    }

    /// How many members satisfy `before(score, member)`, which must hold for a prefix of
    /// the order; O(log n).
    fn count_before(&self, before: impl Fn(f64, &[u8]) -> bool) -> usize {
        match &self.repr {
            Repr::Small(items) => items.partition_point(|(m, s)| before(*s, m)),
            Repr::Large(large) => large.tree.count_before(|n| before(n.score, &n.member)),
        }
    }

    /// Walk `count` members from ascending position `rank`, upwards or (with `rev`) down.
    fn iter_from(&self, rank: usize, count: usize, rev: bool) -> Iter<'_> {
        match &self.repr {
            Repr::Small(items) => {
                if rank >= items.len() {
                    return Iter::empty();
                }
                let (lo, hi) = if rev {
                    ((rank + 1).saturating_sub(count), rank + 1)
                } else {
                    (rank, rank.saturating_add(count).min(items.len()))
                };
                Iter(IterInner::Slice(items[lo..hi].iter(), rev))
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
            Repr::Small(items) => {
                let gone: usize = items.drain(lo..hi).map(|(m, _)| m.len()).sum();
                self.member_bytes -= gone;
                hi - lo
            }
            Repr::Large(large) if hi - lo > large.tree.len() / 8 => {
                let Large { scores, tree } = &mut **large;
                let mut items = tree.drain_sorted();
                for (m, _) in items.drain(lo..hi) {
                    scores.remove(&m);
                    self.member_bytes -= m.len();
                }
                *tree = Tree::from_sorted(items);
                hi - lo
            }
            Repr::Large(_) => (lo..hi).filter_map(|_| self.remove_at(lo)).count(),
        };
        self.after_removal();
        removed
    }

    /// Remove the member at ascending position `rank`.
    fn remove_at(&mut self, rank: usize) -> Option<(Bytes, f64)> {
        let (member, score) = match &mut self.repr {
            Repr::Small(items) => {
                if rank >= items.len() {
                    return None;
                }
                items.remove(rank)
            }
            Repr::Large(large) => {
                let Large { scores, tree } = &mut **large;
                let t = tree.unlink_at(rank);
                if t == NIL {
                    return None;
                }
                let score = tree.node(t).score;
                let member = tree.release(t);
                scores.remove(&member);
                (member, score)
            }
        };
        self.member_bytes -= member.len();
        Some((member, score))
    }

    /// Convert to the skiplist form (Redis never converts back on removals).
    fn grow(&mut self) {
        let Repr::Small(items) = std::mem::replace(&mut self.repr, Repr::Small(Vec::new())) else {
            return;
        };
        let mut scores = ahash::AHashMap::with_capacity(items.len() * 2);
        for (m, s) in &items {
            scores.insert(m.clone(), *s);
        }
        self.repr = Repr::Large(Box::new(Large {
            scores,
            tree: Tree::from_sorted(items),
        }));
    }

    /// After removals: give memory back once three quarters of the capacity are unused.
    /// That costs O(n) but follows at least n removals, so it is amortised O(1).
    fn after_removal(&mut self) {
        const MIN_ARENA: usize = 64;
        let len = self.len();
        let large = match &mut self.repr {
            Repr::Small(items) => {
                if items.capacity() >= 16 && len * 4 <= items.capacity() {
                    items.shrink_to(len * 2);
                }
                return;
            }
            Repr::Large(large) => large,
        };
        let Large { scores, tree } = &mut **large;
        if tree.nodes.len() >= MIN_ARENA && len * 4 <= tree.nodes.len() {
            let items = tree.drain_sorted();
            *tree = Tree::from_sorted(items);
        }
        if scores.capacity() >= MIN_ARENA && len * 4 <= scores.capacity() {
            scores.shrink_to_fit();
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
            Repr::Small(v) => {
                assert!(v.len() <= SMALL_MAX);
                for (m, s) in v {
                    assert!(m.len() <= SMALL_MEMBER_MAX);
                    assert!(*s != 0.0 || s.is_sign_positive(), "listpack keeps no -0");
                }
            }
            Repr::Large(large) => {
                let Large { scores, tree } = &**large;
                let (size, _) = tree.check(tree.root);
                assert_eq!(size, scores.len());
                assert_eq!(tree.nodes.len(), size + tree.free.len());
            }
        }
    }
}

/// [`SortedSet::insert`] on the vector form (which has room for a new member).
fn small_insert(items: &mut Vec<(Bytes, f64)>, member: &[u8], score: f64) -> InsertResult {
    let (member, result) = match items.iter().position(|(m, _)| m[..] == *member) {
        Some(i) if items[i].1 == score => return InsertResult::Unchanged,
        Some(i) => {
            let (m, old) = items.remove(i);
            (m, InsertResult::Updated { old })
        }
        None => (Bytes::copy_from_slice(member), InsertResult::Added),
    };
    let at = items.partition_point(|(m, s)| cmp_key(*s, m, score, &member) == Ordering::Less);
    if items.len() == items.capacity() {
        // Grow by a quarter, not double: most limiter sets stay at a few members.
        items.reserve_exact(items.len() / 4 + 1);
    }
    items.insert(at, (member, score));
    result
}

impl Large {
    /// [`SortedSet::insert`] on the map + tree form.
    fn insert(&mut self, member: &[u8], score: f64) -> InsertResult {
        if let Some(slot) = self.scores.get_mut(member) {
            let old = *slot;
            if old == score {
                return InsertResult::Unchanged;
            }
            *slot = score;
            let t = self.tree.unlink(old, member);
            if t != NIL {
                self.tree.node_mut(t).score = score;
                self.tree.insert(t);
            }
            return InsertResult::Updated { old };
        }
        let member = Bytes::copy_from_slice(member);
        let Some(t) = self.tree.alloc(member.clone(), score) else {
            return InsertResult::Rejected;
        };
        self.tree.insert(t);
        self.scores.insert(member, score);
        InsertResult::Added
    }
}

/// Ascending or descending walk over a range of a [`SortedSet`], yielding
/// `(member, score)`; O(log n) to create, O(1) amortised per item.
#[derive(Clone)]
pub struct Iter<'a>(IterInner<'a>);

#[derive(Clone)]
enum IterInner<'a> {
    /// A slice of the vector form, walked backwards when the flag is set.
    Slice(std::slice::Iter<'a, (Bytes, f64)>, bool),
    Tree(TreeIter<'a>),
}

impl Iter<'_> {
    fn empty() -> Self {
        Iter(IterInner::Slice([].iter(), false))
    }
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a Bytes, f64);

    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.0 {
            IterInner::Slice(items, rev) => {
                let (m, s) = if *rev {
                    items.next_back()
                } else {
                    items.next()
                }?;
                Some((m, *s))
            }
            IterInner::Tree(walk) => {
                let n = walk.next_node()?;
                Some((&n.member, n.score))
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = match &self.0 {
            IterInner::Slice(items, _) => items.len(),
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

/// In-order walk of the tree from a seek position.
#[derive(Clone)]
struct TreeIter<'a> {
    nodes: &'a [Node],
    /// Nodes still to visit, next on top: the seek path plus subtrees' spines.
    stack: Vec<u32>,
    remaining: usize,
    rev: bool,
}

impl<'a> TreeIter<'a> {
    fn next_index(&mut self) -> Option<u32> {
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

    fn next_node(&mut self) -> Option<&'a Node> {
        let t = self.next_index()?;
        Some(&self.nodes[t as usize])
    }
}

/// Parse a ZADD / ZINCRBY score as Redis's `string2d` does (C `strtod`, whole string).
///
/// Accepts decimal and hex floats and `inf`/`infinity` in any case with a sign; rejects
/// empty input, leading or trailing spaces, NaN, and values that overflow to infinity or
/// underflow to zero (subnormals are fine).
pub fn parse_score(arg: &[u8]) -> Result<f64, &'static str> {
    if arg.first().is_none_or(|b| is_c_space(*b)) {
        return Err(ERR_NOT_A_FLOAT);
    }
    let r = strtod(arg);
    if r.len != arg.len() || r.range_error || r.value.is_nan() {
        return Err(ERR_NOT_A_FLOAT);
    }
    Ok(r.value)
}

/// Parse a score range bound as Redis's `zslParseRange` does.
///
/// `(` makes it exclusive. Like Redis this is plain `strtod` up to a NUL: leading spaces
/// are allowed, out-of-range values saturate, and an empty number (`""` or `"("`) is 0.
pub fn parse_score_bound(arg: &[u8]) -> Result<ScoreBound, &'static str> {
    let (body, exclusive) = match arg.split_first() {
        Some((b'(', rest)) => (rest, true),
        _ => (arg, false),
    };
    let r = strtod(body);
    let stops_at_end = body.get(r.len).is_none_or(|b| *b == 0);
    if !stops_at_end || r.value.is_nan() {
        return Err(ERR_MIN_MAX_NOT_FLOAT);
    }
    Ok(if exclusive {
        ScoreBound::Exclusive(r.value)
    } else {
        ScoreBound::Inclusive(r.value)
    })
}

/// Parse a lex range bound as Redis's `zslParseLexRangeItem` does: `-`, `+`, `[x`, `(x`.
pub fn parse_lex_bound(arg: &[u8]) -> Result<LexBound, &'static str> {
    // Redis reads `+`/`-` from a NUL-terminated buffer, so a NUL may follow them.
    let alone = arg.get(1).is_none_or(|b| *b == 0);
    match arg.split_first() {
        Some((b'+', _)) if alone => Ok(LexBound::PosInf),
        Some((b'-', _)) if alone => Ok(LexBound::NegInf),
        Some((b'(', rest)) => Ok(LexBound::Exclusive(Bytes::copy_from_slice(rest))),
        Some((b'[', rest)) => Ok(LexBound::Inclusive(Bytes::copy_from_slice(rest))),
        _ => Err(ERR_MIN_MAX_NOT_STRING_RANGE),
    }
}

/// Format a score as Redis 7.0 replies it (`%.17g`, with `inf` / `-inf`).
///
/// So 1 -> `1`, 1.5 -> `1.5`, 0.1 -> `0.10000000000000001`, 1e20 -> `1e+20`,
/// 123456789012345678 -> `1.2345678901234568e+17`, -0.0 -> `-0`. (Redis 7.2 switched to
/// the shortest round-trip form; the reference server here is 7.0.)
pub fn format_score(score: f64) -> String {
    if score.is_nan() {
        return "nan".to_string();
    }
    if score.is_infinite() {
        return if score > 0.0 { "inf" } else { "-inf" }.to_string();
    }
    // Rust's `{:.16e}` is exact with ties to even, like glibc: 17 significant digits.
    let sci = format!("{score:.16e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let mut out = String::with_capacity(24);
    if score.is_sign_negative() {
        out.push('-');
    }
    if (-4..17).contains(&exp) {
        let int_len = usize::try_from(exp).map_or(0, |e| e + 1);
        if int_len == 0 {
            out.push_str("0.");
            (1..-exp).for_each(|_| out.push('0'));
            out.push_str(digits.trim_end_matches('0'));
        } else {
            let (int, frac) = digits.split_at(int_len.min(digits.len()));
            out.push_str(int);
            let frac = frac.trim_end_matches('0');
            if !frac.is_empty() {
                out.push('.');
                out.push_str(frac);
            }
        }
    } else {
        let (lead, frac) = digits.split_at(1.min(digits.len()));
        out.push_str(lead);
        let frac = frac.trim_end_matches('0');
        if !frac.is_empty() {
            out.push('.');
            out.push_str(frac);
        }
        out.push_str(if exp < 0 { "e-" } else { "e+" });
        if exp.unsigned_abs() < 10 {
            out.push('0');
        }
        out.push_str(&exp.unsigned_abs().to_string());
    }
    out
}

/// Redis's ZRANGE / LRANGE index rules: negative indexes count from the end, `start` is
/// clamped to 0 and `stop` to the last index; None when the range is empty.
pub fn normalize_range(start: i64, stop: i64, len: usize) -> Option<(usize, usize)> {
    let len = i128::try_from(len).ok()?;
    let mut start = i128::from(start);
    let mut stop = i128::from(stop);
    if start < 0 {
        start += len;
    }
    if stop < 0 {
        stop += len;
    }
    start = start.max(0);
    if start > stop || start >= len {
        return None;
    }
    stop = stop.min(len - 1);
    Some((usize::try_from(start).ok()?, usize::try_from(stop).ok()?))
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

/// Redis's `zslParseRange` emptiness test.
fn score_range_is_empty(min: ScoreBound, max: ScoreBound) -> bool {
    let (a, b) = (min.value(), max.value());
    a.is_nan() || b.is_nan() || a > b || (a == b && (min.is_exclusive() || max.is_exclusive()))
}

/// Redis's `sdscmplex`-based emptiness test (`-`/`+` below/above every string).
fn lex_range_is_empty(min: &LexBound, max: &LexBound) -> bool {
    use LexBound::*;
    let ord = match (min, max) {
        (NegInf, NegInf) | (PosInf, PosInf) => Ordering::Equal,
        (NegInf, _) | (_, PosInf) => Ordering::Less,
        (PosInf, _) | (_, NegInf) => Ordering::Greater,
        (Inclusive(a) | Exclusive(a), Inclusive(b) | Exclusive(b)) => a.cmp(b),
    };
    ord == Ordering::Greater
        || (ord == Ordering::Equal && (min.is_exclusive() || max.is_exclusive()))
}

// ---------------------------------------------------------------------------------------
// Order-statistic AVL tree over an arena

/// Absent child / empty tree.
const NIL: u32 = u32::MAX;

#[derive(Clone, Debug)]
struct Node {
    member: Bytes,
    score: f64,
    left: u32,
    right: u32,
    /// Nodes in this subtree, itself included.
    size: u32,
    /// Height of this subtree (a leaf is 1).
    height: u8,
}

/// AVL tree keyed by (score, member), with subtree sizes for ranks. Nodes live in one
/// arena with a free list, so links are 4-byte indexes and rotations move no payload.
#[derive(Clone, Debug)]
struct Tree {
    nodes: Vec<Node>,
    free: Vec<u32>,
    root: u32,
}

impl Tree {
    fn new() -> Tree {
        Tree {
            nodes: Vec::new(),
            free: Vec::new(),
            root: NIL,
        }
    }

    fn len(&self) -> usize {
        self.size(self.root)
    }

    fn node(&self, t: u32) -> &Node {
        &self.nodes[t as usize]
    }

    fn node_mut(&mut self, t: u32) -> &mut Node {
        &mut self.nodes[t as usize]
    }

    fn size(&self, t: u32) -> usize {
        if t == NIL {
            0
        } else {
            self.node(t).size as usize
        }
    }

    fn height(&self, t: u32) -> u8 {
        if t == NIL {
            0
        } else {
            self.node(t).height
        }
    }

    /// A detached node slot for a new member, or None when the arena is full.
    fn alloc(&mut self, member: Bytes, score: f64) -> Option<u32> {
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
    fn release(&mut self, t: u32) -> Bytes {
        self.free.push(t);
        std::mem::take(&mut self.node_mut(t).member)
    }

    fn update(&mut self, t: u32) {
        let (l, r) = (self.node(t).left, self.node(t).right);
        // Subtree sizes never exceed the arena length, which fits in u32.
        let size = 1 + self.size(l) as u32 + self.size(r) as u32;
        let height = 1 + self.height(l).max(self.height(r));
        let n = self.node_mut(t);
        n.size = size;
        n.height = height;
    }

    fn rotate_right(&mut self, t: u32) -> u32 {
        let l = self.node(t).left;
        self.node_mut(t).left = self.node(l).right;
        self.node_mut(l).right = t;
        self.update(t);
        self.update(l);
        l
    }

    fn rotate_left(&mut self, t: u32) -> u32 {
        let r = self.node(t).right;
        self.node_mut(t).right = self.node(r).left;
        self.node_mut(r).left = t;
        self.update(t);
        self.update(r);
        r
    }

    /// Restore size, height and the AVL balance at `t`; returns the subtree's new root.
    fn rebalance(&mut self, t: u32) -> u32 {
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
    fn insert(&mut self, new: u32) {
        let n = self.node_mut(new);
        n.left = NIL;
        n.right = NIL;
        n.size = 1;
        n.height = 1;
        self.root = self.insert_under(self.root, new);
    }

    fn insert_under(&mut self, t: u32, new: u32) -> u32 {
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
    fn unlink(&mut self, score: f64, member: &[u8]) -> u32 {
        let (root, gone) = self.unlink_under(self.root, score, member);
        self.root = root;
        gone
    }

    fn unlink_under(&mut self, t: u32, score: f64, member: &[u8]) -> (u32, u32) {
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
    fn unlink_at(&mut self, rank: usize) -> u32 {
        if rank >= self.len() {
            return NIL;
        }
        let (root, gone) = self.unlink_at_under(self.root, rank);
        self.root = root;
        gone
    }

    fn unlink_at_under(&mut self, t: u32, rank: usize) -> (u32, u32) {
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
    fn splice_out(&mut self, t: u32) -> u32 {
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

    fn unlink_min_under(&mut self, t: u32) -> (u32, u32) {
        let l = self.node(t).left;
        if l == NIL {
            return (self.node(t).right, t);
        }
        let (l, min) = self.unlink_min_under(l);
        self.node_mut(t).left = l;
        (self.rebalance(t), min)
    }

    /// How many nodes satisfy `before`, which must hold for a prefix of the order.
    fn count_before(&self, before: impl Fn(&Node) -> bool) -> usize {
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
    fn iter_from(&self, rank: usize, count: usize, rev: bool) -> TreeIter<'_> {
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
    fn from_sorted(items: Vec<(Bytes, f64)>) -> Tree {
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
    fn drain_sorted(&mut self) -> Vec<(Bytes, f64)> {
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
    fn build(&mut self, lo: usize, hi: usize) -> u32 {
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
    fn check(&self, t: u32) -> (usize, u8) {
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

// ---------------------------------------------------------------------------------------
// strtod: C's parser, reimplemented so scores parse exactly as Redis reads them

/// Outcome of parsing the longest float prefix, as C `strtod` does.
struct Strtod {
    value: f64,
    /// Bytes consumed; 0 when no number was found (then `value` is 0).
    len: usize,
    /// `errno == ERANGE` with a result of ±HUGE_VAL or zero (Redis's `string2d` test).
    range_error: bool,
}

fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// C `strtod` in the "C" locale with round-to-nearest, on a byte string (stops at NUL).
fn strtod(s: &[u8]) -> Strtod {
    let mut i = s.iter().take_while(|b| is_c_space(**b)).count();
    let negative = match s.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let rest = &s[i..];
    let parsed = match_infinity(rest)
        .map(|n| (f64::INFINITY, n, false))
        .or_else(|| match_nan(rest).map(|n| (f64::NAN, n, false)))
        .or_else(|| parse_hex(rest))
        .or_else(|| parse_decimal(rest));
    match parsed {
        Some((magnitude, used, range_error)) => Strtod {
            value: if negative { -magnitude } else { magnitude },
            len: i + used,
            range_error,
        },
        None => Strtod {
            value: 0.0,
            len: 0,
            range_error: false,
        },
    }
}

fn starts_with_ignore_case(s: &[u8], prefix: &[u8]) -> bool {
    s.len() >= prefix.len() && s[..prefix.len()].eq_ignore_ascii_case(prefix)
}

/// `inf` or `infinity`, any case: bytes consumed.
fn match_infinity(s: &[u8]) -> Option<usize> {
    if starts_with_ignore_case(s, b"infinity") {
        Some(8)
    } else if starts_with_ignore_case(s, b"inf") {
        Some(3)
    } else {
        None
    }
}

/// `nan` optionally followed by `(n-char-sequence)`: bytes consumed.
fn match_nan(s: &[u8]) -> Option<usize> {
    if !starts_with_ignore_case(s, b"nan") {
        return None;
    }
    if s.get(3) == Some(&b'(') {
        let body = s[4..]
            .iter()
            .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_')
            .count();
        if s.get(4 + body) == Some(&b')') {
            return Some(5 + body);
        }
    }
    Some(3)
}

/// Digits of `s` from `i` satisfying `is_digit`: how many.
fn digit_run(s: &[u8], i: usize, is_digit: fn(&u8) -> bool) -> usize {
    s.get(i..)
        .map_or(0, |t| t.iter().take_while(|b| is_digit(b)).count())
}

/// An exponent (`e`/`p` marker, optional sign, digits) at `i`: (value saturated to
/// ±1e9, bytes consumed), or None when it has no digits (then C leaves it unconsumed).
fn parse_exponent(s: &[u8], i: usize, markers: [u8; 2]) -> Option<(i64, usize)> {
    if !s.get(i).is_some_and(|b| markers.contains(b)) {
        return None;
    }
    let mut j = i + 1;
    let negative = match s.get(j) {
        Some(b'-') => {
            j += 1;
            true
        }
        Some(b'+') => {
            j += 1;
            false
        }
        _ => false,
    };
    let n = digit_run(s, j, u8::is_ascii_digit);
    if n == 0 {
        return None;
    }
    let value = s[j..j + n].iter().fold(0i64, |acc, d| {
        (acc * 10 + i64::from(d - b'0')).min(1_000_000_000)
    });
    Some((if negative { -value } else { value }, j + n - i))
}

/// A decimal significand with optional exponent: (magnitude, bytes, range error).
fn parse_decimal(s: &[u8]) -> Option<(f64, usize, bool)> {
    let int = digit_run(s, 0, u8::is_ascii_digit);
    let mut end = int;
    let mut frac = 0;
    if s.get(end) == Some(&b'.') {
        frac = digit_run(s, end + 1, u8::is_ascii_digit);
        if int + frac > 0 {
            end += 1 + frac;
        }
    }
    if int + frac == 0 {
        return None;
    }
    let nonzero_digit = s[..end].iter().any(|b| (b'1'..=b'9').contains(b));
    if let Some((_, n)) = parse_exponent(s, end, [b'e', b'E']) {
        end += n;
    }
    let text = std::str::from_utf8(&s[..end]).ok()?;
    // The grammar above is a subset of Rust's float syntax, and Rust rounds correctly.
    let value: f64 = text.parse().ok()?;
    let range_error = value.is_infinite() || (value == 0.0 && nonzero_digit);
    Some((value, end, range_error))
}

/// A hex float (`0x1.8p3`, `0x10`, `0x.8`): (magnitude, bytes, range error).
fn parse_hex(s: &[u8]) -> Option<(f64, usize, bool)> {
    if s.len() < 3 || s[0] != b'0' || !matches!(s[1], b'x' | b'X') {
        return None;
    }
    let int = digit_run(s, 2, u8::is_ascii_hexdigit);
    let mut end = 2 + int;
    let mut frac = 0;
    if s.get(end) == Some(&b'.') {
        frac = digit_run(s, end + 1, u8::is_ascii_hexdigit);
        if int + frac > 0 {
            end += 1 + frac;
        }
    }
    if int + frac == 0 {
        return None;
    }
    // Keep the first 16 significant hex digits (64 bits); later ones only set `sticky`.
    let mut mantissa: u64 = 0;
    let mut exp: i64 = 0;
    let mut kept = 0;
    let mut sticky = false;
    let frac_digits = s.get(3 + int..end).unwrap_or_default();
    let digits = s[2..2 + int]
        .iter()
        .map(|d| (d, false))
        .chain(frac_digits.iter().map(|d| (d, true)));
    for (d, after_point) in digits {
        let v = hex_value(*d);
        if mantissa == 0 && v == 0 {
            if after_point {
                exp -= 4;
            }
        } else if kept < 16 {
            mantissa = mantissa << 4 | v;
            kept += 1;
            if after_point {
                exp -= 4;
            }
        } else {
            sticky |= v != 0;
            if !after_point {
                exp += 4;
            }
        }
    }
    if let Some((e, n)) = parse_exponent(s, end, [b'p', b'P']) {
        exp = exp.saturating_add(e);
        end += n;
    }
    if mantissa == 0 {
        return Some((0.0, end, false));
    }
    let value = round_binary(mantissa, sticky, exp);
    Some((value, end, value.is_infinite() || value == 0.0))
}

fn hex_value(d: u8) -> u64 {
    match d {
        b'0'..=b'9' => u64::from(d - b'0'),
        b'a'..=b'f' => u64::from(d - b'a' + 10),
        b'A'..=b'F' => u64::from(d - b'A' + 10),
        _ => 0,
    }
}

/// `mantissa * 2^exp` rounded to nearest-even f64, where `sticky` says nonzero bits
/// were dropped below `mantissa`. Handles overflow and subnormals exactly.
fn round_binary(mantissa: u64, sticky: bool, exp: i64) -> f64 {
    let shift = mantissa.leading_zeros();
    let mantissa = mantissa << shift;
    let exp = exp.saturating_sub(i64::from(shift));
    let top = exp.saturating_add(63); // exponent of the leading bit
    if top > 1023 {
        return f64::INFINITY;
    }
    let mut low = (top - 52).max(-1074); // exponent of the last bit kept
    let drop = low.saturating_sub(exp); // at least 11
    let (mut kept, round, rest) = match drop {
        65.. => (0, false, true),
        64 => (0, mantissa >> 63 == 1, mantissa << 1 != 0 || sticky),
        _ => {
            let drop = drop as u32;
            let half = 1u64 << (drop - 1);
            (
                mantissa >> drop,
                mantissa & half != 0,
                mantissa & (half - 1) != 0 || sticky,
            )
        }
    };
    if round && (rest || kept & 1 == 1) {
        kept += 1;
        if kept == 1 << 53 {
            kept >>= 1;
            low += 1;
        }
    }
    if low + 52 > 1023 {
        return f64::INFINITY;
    }
    let bits = if kept >= 1 << 52 {
        let biased = (low + 52 + 1023) as u64;
        biased << 52 | (kept & ((1 << 52) - 1))
    } else {
        kept
    };
    f64::from_bits(bits)
}

#[cfg(test)]
mod tests {
    use super::*;
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
        assert_eq!(format_score(z.score(b"m").unwrap()), "0");
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
        assert_eq!(format_score(z.score(b"z").unwrap()), "-0");
        assert_eq!(format_score(z.score(b"m").unwrap()), "0");
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
            AddOutcome::Added { score } => assert_eq!(format_score(score), "-0"),
            other => panic!("{other:?}"),
        }
        assert_eq!(format_score(z.score(b"n").unwrap()), "0");
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
        assert_eq!(format_score(copy.score(b"neg").unwrap()), "-0");
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
        assert_eq!(format_score(z.score(b"a").unwrap()), "-0");
        let mut z = SortedSet::new();
        z.insert(b"a", -0.0);
        z.insert(&long, 1.0);
        assert_eq!(format_score(z.score(b"a").unwrap()), "0");
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
        assert_eq!(format_score(f64::NAN), "nan");
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
    fn score_parsing_matches_redis_string2d() {
        // Expectations observed on redis-server 7.0.15 (ZADD k <arg> m; ZSCORE k m).
        let ok: &[(&str, f64)] = &[
            ("1", 1.0),
            ("0x10", 16.0),
            ("0x1p3", 8.0),
            ("0X1.8P1", 3.0),
            ("0e-400", 0.0),
            ("1e-310", 1e-310),
            ("infinity", f64::INFINITY),
            ("INF", f64::INFINITY),
            ("+inf", f64::INFINITY),
            ("-Inf", f64::NEG_INFINITY),
            (".5", 0.5),
            ("5.", 5.0),
            ("+.5e1", 5.0),
            ("3e-324", 5e-324),
            ("-1.5e-10", -1.5e-10),
        ];
        for (arg, want) in ok {
            assert_eq!(parse_score(arg.as_bytes()), Ok(*want), "{arg:?}");
        }
        for arg in [
            " 1",
            "1 ",
            "1e400",
            "-1e400",
            "1e-400",
            "nan",
            "NaN",
            "",
            "1e",
            "1e+",
            ".",
            "0x",
            "infinit",
            "+",
            "-",
            "2e-324",
            "1_0",
            "\u{661}",
            "1\0",
            "nan(1)",
            "0x1p99999",
        ] {
            assert_eq!(parse_score(arg.as_bytes()), Err(ERR_NOT_A_FLOAT), "{arg:?}");
        }
    }

    #[test]
    fn score_bound_parsing_matches_redis_zslparserange() {
        use ScoreBound::{Exclusive as Ex, Inclusive as In};
        let ok: &[(&[u8], ScoreBound)] = &[
            (b"", In(0.0)),
            (b"(", Ex(0.0)),
            (b" 1", In(1.0)),
            (b"( 1", Ex(1.0)),
            (b"\t1", In(1.0)),
            (b"(1", Ex(1.0)),
            (b"1e400", In(f64::INFINITY)),
            (b"1e-400", In(0.0)),
            (b"(inf", Ex(f64::INFINITY)),
            (b"-inf", In(f64::NEG_INFINITY)),
            (b"+inf", In(f64::INFINITY)),
            (b"0x1", In(1.0)),
            (b"1\0abc", In(1.0)),
            (b"(1\0x", Ex(1.0)),
        ];
        for (arg, want) in ok {
            assert_eq!(parse_score_bound(arg), Ok(*want), "{arg:?}");
        }
        for arg in ["1 ", "nan", "(nan", "-", "((1", "[1", " ", "1x"] {
            assert_eq!(
                parse_score_bound(arg.as_bytes()),
                Err(ERR_MIN_MAX_NOT_FLOAT),
                "{arg:?}"
            );
        }
    }

    #[test]
    fn lex_bound_parsing_matches_redis() {
        assert_eq!(parse_lex_bound(b"-"), Ok(LexBound::NegInf));
        assert_eq!(parse_lex_bound(b"+"), Ok(LexBound::PosInf));
        assert_eq!(parse_lex_bound(b"-\0x"), Ok(LexBound::NegInf));
        assert_eq!(parse_lex_bound(b"["), Ok(LexBound::Inclusive(Bytes::new())));
        assert_eq!(
            parse_lex_bound(b"(a\0b"),
            Ok(LexBound::Exclusive(Bytes::from_static(b"a\0b")))
        );
        for arg in ["", "a", "-x", "+x", "++"] {
            assert_eq!(
                parse_lex_bound(arg.as_bytes()),
                Err(ERR_MIN_MAX_NOT_STRING_RANGE),
                "{arg:?}"
            );
        }
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
    #[allow(clippy::approx_constant)]
    fn score_formatting_matches_redis_7_0() {
        // Observed on redis-server 7.0.15 (ZADD k <v> m; ZSCORE k m).
        let cases: &[(f64, &str)] = &[
            (1.0, "1"),
            (1.5, "1.5"),
            (0.1, "0.10000000000000001"),
            (1e20, "1e+20"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (3.14159, "3.1415899999999999"),
            (1e-5, "1.0000000000000001e-05"),
            (123456789012345678.0, "1.2345678901234568e+17"),
            (0.0, "0"),
            (-0.0, "-0"),
            (1e21, "1e+21"),
            (12345678901234567890.0, "1.2345678901234567e+19"),
            (1e-6, "9.9999999999999995e-07"),
            (0.000123, "0.00012300000000000001"),
            (1e100, "1e+100"),
            (2.5e-300, "2.5e-300"),
            (1e15, "1000000000000000"),
            (1e16, "10000000000000000"),
            (1e17, "1e+17"),
            (123456.789, "123456.789"),
            (-1.5e-10, "-1.5e-10"),
            (0.3, "0.29999999999999999"),
            (100.0, "100"),
            (4e-320, "3.999955468730732e-320"),
            (5e-324, "4.9406564584124654e-324"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (1484551710.0, "1484551710"),
            (1e15 + 0.25, "1000000000000000.2"),
        ];
        for (v, want) in cases {
            assert_eq!(format_score(*v), *want, "{v:e}");
        }
    }

    #[test]
    fn normalize_range_follows_redis() {
        assert_eq!(normalize_range(0, -1, 5), Some((0, 4)));
        assert_eq!(normalize_range(-2, -1, 5), Some((3, 4)));
        assert_eq!(normalize_range(-100, 100, 5), Some((0, 4)));
        assert_eq!(normalize_range(3, 1, 5), None);
        assert_eq!(normalize_range(5, 10, 5), None);
        assert_eq!(normalize_range(0, -6, 5), None);
        assert_eq!(normalize_range(0, -1, 0), None);
        assert_eq!(normalize_range(i64::MIN, i64::MAX, 3), Some((0, 2)));
        assert_eq!(normalize_range(i64::MAX, i64::MIN, 3), None);
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
                .map(|(m, _)| m.clone())
                .collect();
            assert!(newest.len() <= 5);
            if let Some(first) = newest.first() {
                assert_eq!(first.as_ref(), (t - 1).to_string().as_bytes());
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
            let batch: Vec<(Bytes, f64)> = items.map(|(m, s)| (m.clone(), s)).collect();
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
            assert_eq!(z.get_by_rank(rank).unwrap().0.as_ref(), m.as_bytes());
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

        #[test]
        fn format_round_trips(bits in any::<u64>()) {
            let v = f64::from_bits(bits);
            prop_assume!(!v.is_nan());
            let text = format_score(v);
            let back = parse_score(text.as_bytes()).unwrap();
            prop_assert_eq!(back.to_bits(), v.to_bits());
        }
    }

    /// glibc is the reference Redis runs on: compare against its strtod and printf.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    mod glibc {
        use super::*;
        use std::ffi::{c_char, c_int, CString};

        extern "C" {
            fn strtod(s: *const c_char, end: *mut *mut c_char) -> f64;
            fn snprintf(buf: *mut c_char, n: usize, fmt: *const c_char, ...) -> c_int;
            fn __errno_location() -> *mut c_int;
        }

        const ERANGE: c_int = 34;

        /// (value, consumed, errno) from glibc's strtod.
        fn c_strtod(s: &[u8]) -> (f64, usize, c_int) {
            let c = CString::new(s).unwrap();
            let mut end: *mut c_char = std::ptr::null_mut();
            // SAFETY: `c` is a valid NUL-terminated string that outlives the call; errno
            // is this thread's, and `end` points into `c`.
            unsafe {
                *__errno_location() = 0;
                let v = strtod(c.as_ptr(), &mut end);
                let used = end.offset_from(c.as_ptr()) as usize;
                (v, used, *__errno_location())
            }
        }

        /// Redis's string2d on top of glibc.
        fn redis_string2d(s: &[u8]) -> Option<f64> {
            let (v, used, errno) = c_strtod(s);
            let bad_range = errno == ERANGE && (v.is_infinite() || v == 0.0);
            let bad = s.is_empty() || is_c_space(s[0]) || used != s.len() || bad_range;
            (!bad && !v.is_nan()).then_some(v)
        }

        /// Redis's zslParseRange bound on top of glibc.
        fn redis_bound(s: &[u8]) -> Option<ScoreBound> {
            let (body, ex) = match s.split_first() {
                Some((b'(', rest)) => (rest, true),
                _ => (s, false),
            };
            let (v, used, _) = c_strtod(body);
            let bound = if ex {
                ScoreBound::Exclusive(v)
            } else {
                ScoreBound::Inclusive(v)
            };
            (used == body.len() && !v.is_nan()).then_some(bound)
        }

        fn c_format(v: f64) -> String {
            let mut buf = [0u8; 64];
            let fmt = CString::new("%.17g").unwrap();
            // SAFETY: the buffer is 64 bytes and its size is passed; %.17g takes a double.
            let n = unsafe { snprintf(buf.as_mut_ptr().cast(), buf.len(), fmt.as_ptr(), v) };
            String::from_utf8(buf[..n as usize].to_vec()).unwrap()
        }

        fn same(a: Option<f64>, b: Option<f64>) -> bool {
            a.map(f64::to_bits) == b.map(f64::to_bits)
        }

        fn float_text() -> impl Strategy<Value = Vec<u8>> {
            let alphabet = b"0123456789.eEpPxX+-( infatyINFATYnN\tab".to_vec();
            prop_oneof![
                prop::collection::vec(prop::sample::select(alphabet), 0..12),
                any::<u64>().prop_map(|b| format!("{:e}", f64::from_bits(b)).into_bytes()),
                any::<u64>().prop_map(|b| format!("{}", f64::from_bits(b)).into_bytes()),
                (any::<u64>(), -1100i32..1100, any::<bool>()).prop_map(|(m, e, neg)| {
                    format!(
                        "{}0x{:x}.{:x}p{}",
                        if neg { "-" } else { "" },
                        m >> 20,
                        m & 0xfffff,
                        e
                    )
                    .into_bytes()
                }),
                ("[0-9]{1,30}", "[0-9]{0,30}", -400i32..400)
                    .prop_map(|(a, b, e)| format!("{a}.{b}e{e}").into_bytes()),
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(4000))]

            #[test]
            fn parse_score_matches_glibc(text in float_text()) {
                let ours = parse_score(&text).ok();
                let theirs = redis_string2d(&text);
                prop_assert!(same(ours, theirs), "{:?}: {:?} vs {:?}",
                    String::from_utf8_lossy(&text), ours, theirs);
            }

            #[test]
            fn parse_score_bound_matches_glibc(text in float_text()) {
                let ours = parse_score_bound(&text).ok();
                let theirs = redis_bound(&text);
                let eq = match (ours, theirs) {
                    (Some(a), Some(b)) => a.is_exclusive() == b.is_exclusive()
                        && a.value().to_bits() == b.value().to_bits(),
                    (None, None) => true,
                    _ => false,
                };
                let shown = String::from_utf8_lossy(&text);
                prop_assert!(eq, "{:?}: {:?} vs {:?}", shown, ours, theirs);
            }

            #[test]
            fn format_score_matches_glibc(bits in any::<u64>()) {
                let v = f64::from_bits(bits);
                prop_assume!(!v.is_nan());
                prop_assert_eq!(format_score(v), c_format(v));
            }
        }

        #[test]
        fn rounding_and_range_edges_match_glibc() {
            let cases = [
                "0x1.fffffffffffff8p1023",
                "0x1.fffffffffffff7ffffffp1023",
                "0x1p-1074",
                "0x1p-1075",
                "0x1.0000000000001p-1075",
                "0x1.8p-1074",
                "0x0.0000000000001p-1022",
                "0x1.00000000000008p0",
                "0x1.000000000000080000000001p0",
                "0x1.00000000000018p0",
                "0x123456789abcdef123456789p0",
                "0x.00000000000000000001p0",
                "0x1p1024",
                "0x1p-99999999999999999999",
                "0x1p+99999999999999999999",
                "0x0p99999",
                "0x0.0",
                "1e99999999999999999999",
                "0e99999999999999999999",
                "1e-99999999999999999999",
                "0.00000000000000000000000000000000000000000000000000000000001e-270",
                "100000000000000000000000000000000000000000000000000000000000e250",
                "2.4703282292062327208828439643411068618252990130716238221279284125033775363e-324",
                "2.4703282292062327208828439643411068618252990130716238221279284125033775364e-324",
                "1.797693134862315807937289714053034150799341327710923e308",
                "nan(abc)",
                "-nan",
                "INFINITY",
                "-infinityx",
                "00000000000000000000000000000000000000012.5",
            ];
            for c in cases {
                let ours = parse_score(c.as_bytes()).ok();
                assert!(same(ours, redis_string2d(c.as_bytes())), "{c}: {ours:?}");
            }
        }
    }
}
