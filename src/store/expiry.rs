//! The deadline index: which keys have a TTL, bucketed by the second of their deadline.
//!
//! Limiter commands move a key's deadline on almost every call, so moving must be cheap:
//! a move within the same second is free and any other move is two hash-set operations.
//! (A B-tree ordered by `(deadline, key)` cost a third of a limiter call in key
//! comparisons.) The expiry cycle visits buckets in time order and checks each
//! candidate's real deadline, which the keyspace holds.
//!
//! A bucket holds the keys' 64-bit hashes ([`hash_key`], the keyspace's own), not copies of
//! the keys: 9 bytes a slot (the hash and its control byte) instead of 25 (a 24-byte
//! [`super::Key`] and its control byte), with no allocation for a long key. The keyspace
//! finds a key from its hash (the shard and the slot come from it), as Redis's `expires`
//! dict points to the key the main dict holds. Two keys of one hash in one second are
//! counted (`shared`, almost always empty): the keyspace then checks every key of that hash
//! whose deadline falls in the second, so every key is still found.

use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};

use hashbrown::HashTable;

use super::hash_key;

const BUCKET_MS: u64 = 1000;
/// How many keys of the current second one expiry pass checks (see [`ExpiryIndex::purge`]).
const CURRENT_SCAN: usize = 1000;
/// How many slots of the current second's table one pass walks at most, keys or empty:
/// a table emptied by deletions (it keeps its size until its second has passed) costs a
/// bounded walk, as Redis's cycle bounds the empty buckets it visits.
const CURRENT_SLOTS: usize = 8 * CURRENT_SCAN;
/// A drained second's table is kept for the next new second (it would grow again from
/// empty, rehashing every key at each doubling) while its capacity is at most this many
/// times the index's keys (with a floor), so what it holds stays in proportion.
const SPARE_FACTOR: usize = 4;
const SPARE_FLOOR: usize = 4096;

/// One deadline second's key hashes. A hash is its own table hash (ahash's output is
/// mixed already); the expiry cycle hands each on to the keyspace lookup, and walks the
/// current second's table by slot position ([`ExpiryIndex::purge`]).
type Hashes = HashTable<u64>;

/// The deadline second of `deadline` (the bucket a key with it is indexed in).
#[inline]
pub fn second_of(deadline: u64) -> u64 {
    deadline / BUCKET_MS
}

/// Keys with a deadline, by deadline second, as their hashes.
#[derive(Debug, Default)]
pub struct ExpiryIndex {
    buckets: BTreeMap<u64, Hashes>,
    /// For a `(second, hash)` that more than one key has (two keys whose 64-bit hashes are
    /// equal, with deadlines in one second), how many keys beyond the first: a bucket holds
    /// each hash once.
    shared: HashMap<(u64, u64), usize>,
    len: usize,
    /// The sum of the keys' deadline seconds (their buckets), for INFO's `avg_ttl`.
    seconds: u128,
    /// Where the last [`ExpiryIndex::purge`] stopped in the current second's table (the
    /// second and a slot position): the next pass goes on from there, as Redis's expiry
    /// cycle keeps a cursor, so each key of a large second is checked about once per sweep.
    cursor: (u64, usize),
    /// An emptied second's table, for the next second that starts
    /// ([`ExpiryIndex::retire`]): its slots are kept (the tombstones its deletions left
    /// go when the table rehashes in place, without growing).
    spare: Hashes,
}

/// The bounded walk of the current second's table that [`ExpiryIndex::purge`] and
/// [`ExpiryIndex::scan`] share: from the slot `cursor` left off at (when it is of `second`),
/// at most [`CURRENT_SLOTS`] slots of the `slots`, of which at most [`CURRENT_SCAN`] hold a
/// hash. `visit(slot)` answers None for an empty slot, else whether to go on (false once
/// the caller's limit is reached); the cursor is left after the last slot walked, or at
/// the front once the walk reached the end of the table.
fn walk_current(
    cursor: &mut (u64, usize),
    second: u64,
    slots: usize,
    mut visit: impl FnMut(usize) -> Option<bool>,
) {
    let mut at = match *cursor {
        (s, at) if s == second && at < slots => at,
        _ => 0,
    };
    let (mut checked, end) = (0, slots.min(at + CURRENT_SLOTS));
    while at < end && checked < CURRENT_SCAN {
        let visited = visit(at);
        at += 1;
        if let Some(more) = visited {
            checked += 1;
            if !more {
                break;
            }
        }
    }
    *cursor = (second, if at < slots { at } else { 0 });
}

/// The number of keys of hash `h` in `second` by the `shared` counts (at least one).
#[inline]
fn keys_of(shared: &HashMap<(u64, u64), usize>, second: u64, h: u64) -> usize {
    if shared.is_empty() {
        1
    } else {
        1 + shared.get(&(second, h)).copied().unwrap_or(0)
    }
}

impl ExpiryIndex {
    /// Bytes of the index's own tables: each bucket's set (slots and control bytes, a
    /// key's hash inline) and its place in the tree (INFO `used_memory_overhead`).
    pub fn table_bytes(&self) -> usize {
        let slot = std::mem::size_of::<u64>() + 1;
        let node = std::mem::size_of::<(u64, Hashes)>();
        let shared = self.shared.capacity() * (std::mem::size_of::<((u64, u64), usize)>() + 1);
        self.buckets
            .values()
            .map(|set| node + set.capacity() * slot)
            .sum::<usize>()
            + self.spare.capacity() * slot
            + shared
    }

    /// Keep the emptied table `set` as the spare when it is the larger one and
    /// its capacity is in proportion to the `len` keys left ([`SPARE_FACTOR`]).
    fn retire(spare: &mut Hashes, len: usize, set: Hashes) {
        let cap = set.capacity();
        if cap > spare.capacity() && cap <= SPARE_FACTOR * len.max(SPARE_FLOOR) {
            *spare = set;
        }
        if len == 0 || spare.capacity() > SPARE_FACTOR * len.max(SPARE_FLOOR) {
            *spare = Hashes::new();
        }
    }

    /// Whether two deadlines share a bucket (then a move needs no index update).
    pub fn same_bucket(a: Option<u64>, b: Option<u64>) -> bool {
        a.map(second_of) == b.map(second_of)
    }

    /// Record that `key`'s deadline changed from `old` to `new`.
    pub fn moved(&mut self, key: &[u8], old: Option<u64>, new: Option<u64>) {
        if !Self::same_bucket(old, new) {
            self.rebucket(hash_key(key), old, new);
        }
    }

    /// [`ExpiryIndex::moved`] with the key's hash, which the keyspace's lookup computed
    /// already (the index holds keys as their [`hash_key`]).
    #[inline]
    pub fn moved_hashed(&mut self, h: u64, old: Option<u64>, new: Option<u64>) {
        if !Self::same_bucket(old, new) {
            self.rebucket(h, old, new);
        }
    }

    fn rebucket(&mut self, h: u64, old: Option<u64>, new: Option<u64>) {
        if let Some(t) = old {
            self.remove_hashed(t, h);
        }
        if let Some(t) = new {
            let second = second_of(t);
            let spare = &mut self.spare;
            let set = self
                .buckets
                .entry(second)
                .or_insert_with(|| std::mem::take(spare));
            match set.entry(h, |&x| x == h, |&x| x) {
                hashbrown::hash_table::Entry::Vacant(v) => {
                    v.insert(h);
                }
                hashbrown::hash_table::Entry::Occupied(_) => {
                    *self.shared.entry((second, h)).or_insert(0) += 1;
                }
            }
            self.len += 1;
            self.seconds += u128::from(second);
        }
    }

    /// Forget `key`, whose deadline was `deadline`.
    pub fn remove(&mut self, deadline: u64, key: &[u8]) {
        self.remove_hashed(deadline, hash_key(key));
    }

    /// [`ExpiryIndex::remove`] with the key's hash, which the keyspace's lookup computed
    /// already.
    pub fn remove_hashed(&mut self, deadline: u64, h: u64) {
        let bucket = second_of(deadline);
        let Some(set) = self.buckets.get_mut(&bucket) else {
            return;
        };
        let Ok(entry) = set.find_entry(h, |&x| x == h) else {
            return;
        };
        self.len -= 1;
        self.seconds -= u128::from(bucket);
        if !self.shared.is_empty() {
            if let Some(more) = self.shared.get_mut(&(bucket, h)) {
                // Another key of this hash stays in the second.
                *more -= 1;
                if *more == 0 {
                    self.shared.remove(&(bucket, h));
                }
                return;
            }
        }
        entry.remove();
        if set.is_empty() {
            if let Some(set) = self.buckets.remove(&bucket) {
                Self::retire(&mut self.spare, self.len, set);
            }
        }
    }

    /// Keys that may be due at `now_ms`, earliest first, as `(second, hash, keys)`: the
    /// keyspace's keys of that hash whose deadline falls in that second, `keys` of them.
    /// Every key of the seconds that have fully passed (all due), then the first
    /// [`CURRENT_SCAN`] hashes of the current second. What the tests read the index by;
    /// the expiry cycle walks it with [`ExpiryIndex::purge`] (standalone) or
    /// [`ExpiryIndex::scan`] (a cluster's leader).
    #[cfg(test)]
    pub fn candidates(&self, now_ms: u64) -> impl Iterator<Item = (u64, u64, usize)> + '_ {
        let current = second_of(now_ms);
        let shared = &self.shared;
        self.buckets
            .range(..current)
            .flat_map(move |(&s, hashes)| hashes.iter().map(move |&h| (s, h)))
            .chain(
                self.buckets
                    .get(&current)
                    .into_iter()
                    .flat_map(move |hashes| {
                        hashes.iter().take(CURRENT_SCAN).map(move |&h| (current, h))
                    }),
            )
            .map(move |(s, h)| (s, h, keys_of(shared, s, h)))
    }

    /// Offer the keys that may be due at `now_ms` to `due`, earliest second first, without
    /// changing the index: a cluster's leader collects the due keys for an expiry entry,
    /// and each node deletes them when it applies that entry. `due` gets a second, a hash
    /// and how many keys the index holds of that hash in that second, checks them against
    /// their real deadlines and answers how many of them it took; the scan stops once
    /// `limit` are taken. Every key of the seconds that have fully passed is offered
    /// (all due), then at most [`CURRENT_SCAN`] hashes of the current second, going on from
    /// where the previous scan stopped (the cursor [`ExpiryIndex::purge`] keeps, which a
    /// cluster node never purges with): a key of the current second that is not due yet is
    /// checked once per sweep of the second, not at every scan. So a key given `PEXPIRE k 50`
    /// goes within a sweep, as in Redis (whose cycle samples keys with a TTL), while a large
    /// current second costs each cycle a bounded scan; the keys of it not reached go when
    /// the second has passed (reads never see an expired key either way).
    pub fn scan(
        &mut self,
        now_ms: u64,
        limit: usize,
        mut due: impl FnMut(u64, u64, usize) -> usize,
    ) {
        let current = second_of(now_ms);
        let mut taken = 0;
        let Self {
            buckets,
            shared,
            cursor,
            ..
        } = self;
        for (&second, keys) in buckets.range(..=current) {
            if taken >= limit {
                break;
            }
            if second < current {
                for &h in keys.iter() {
                    if taken >= limit {
                        break;
                    }
                    taken += due(second, h, keys_of(shared, second, h));
                }
            } else {
                walk_current(cursor, second, keys.num_buckets(), |at| {
                    let &h = keys.get_bucket(at)?;
                    taken += due(second, h, keys_of(shared, second, h));
                    Some(taken < limit)
                });
            }
        }
    }

    /// Delete the keys that are due at `now_ms` through `expire`, earliest second first,
    /// until about `limit` are gone: `expire` gets a second, a hash and how many keys the
    /// index holds of that hash in that second; it deletes from the keyspace those of
    /// them whose deadline has passed and answers how many are left (the keys of the hash
    /// with a deadline in the second that are not due; 0 forgets the hash). The seconds
    /// that have fully passed are all due: their sets are drained in one pass. Of the
    /// current second, a pass checks at most [`CURRENT_SCAN`] hashes (and walks at most
    /// [`CURRENT_SLOTS`] slots), going on from where the previous pass stopped and starting
    /// again from the front once it reached the end of the table: each key is checked once
    /// per sweep, as Redis's cycle samples a key once, and a key leaves the index where it
    /// is found, with no second lookup.
    pub fn purge(
        &mut self,
        now_ms: u64,
        limit: usize,
        mut expire: impl FnMut(u64, u64, usize) -> usize,
    ) {
        let current = second_of(now_ms);
        let taken = Cell::new(0);
        let mut emptied = Vec::new();
        let Self {
            buckets,
            shared,
            len,
            seconds,
            cursor,
            spare,
        } = self;
        // Check the keys of hash `h` in `second`; answers whether the hash leaves the
        // index. The keys deleted are counted off `len`, `seconds` and `taken`.
        let mut check = |second: u64, h: u64| {
            let n = keys_of(shared, second, h);
            let left = expire(second, h, n).min(n);
            let gone = n - left;
            taken.set(taken.get() + gone);
            *len -= gone;
            *seconds -= u128::from(second) * gone as u128;
            if n > 1 {
                if left > 1 {
                    shared.insert((second, h), left - 1);
                } else {
                    shared.remove(&(second, h));
                }
            }
            left == 0
        };
        for (&second, keys) in buckets.range_mut(..=current) {
            if taken.get() >= limit {
                break;
            }
            if second < current {
                let mut gone = keys.extract_if(|&mut h| check(second, h));
                while taken.get() < limit && gone.next().is_some() {}
            } else {
                walk_current(cursor, second, keys.num_buckets(), |at| {
                    let entry = keys.get_bucket_entry(at).ok()?;
                    if check(second, *entry.get()) {
                        entry.remove();
                    }
                    Some(taken.get() < limit)
                });
            }
            if keys.is_empty() {
                emptied.push(second);
            }
        }
        for second in emptied {
            if let Some(set) = buckets.remove(&second) {
                Self::retire(spare, *len, set);
            }
        }
    }

    /// Keys for eviction sampling, as [`ExpiryIndex::candidates`] gives them: from the
    /// bucket at or after a second picked by `r` between the earliest and the latest
    /// deadline (the earliest bucket when `r` is None), starting `skip` hashes into it,
    /// then the later buckets and the earlier ones.
    pub fn sample_from(
        &self,
        r: Option<u64>,
        skip: usize,
    ) -> Box<dyn Iterator<Item = (u64, u64, usize)> + '_> {
        let (Some(&first), Some(&last)) =
            (self.buckets.keys().next(), self.buckets.keys().next_back())
        else {
            return Box::new(std::iter::empty());
        };
        let start = match r {
            Some(r) => first + r % (last - first + 1),
            None => first,
        };
        let buckets = self
            .buckets
            .range(start..)
            .chain(self.buckets.range(..start));
        let shared = &self.shared;
        Box::new(buckets.enumerate().flat_map(move |(i, (&s, hashes))| {
            let skip = if i == 0 {
                skip % hashes.len().max(1)
            } else {
                0
            };
            hashes
                .iter()
                .skip(skip)
                .chain(hashes.iter().take(skip))
                .map(move |&h| (s, h, keys_of(shared, s, h)))
        }))
    }

    /// Number of keys with a deadline.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no key has a deadline.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Forget every key.
    pub fn clear(&mut self) {
        self.buckets.clear();
        self.shared = HashMap::new();
        self.len = 0;
        self.seconds = 0;
        self.cursor = (0, 0);
        self.spare = Hashes::new();
    }

    /// The average time left to the keys' deadlines at `now_ms`, in milliseconds (INFO
    /// keyspace's `avg_ttl`; 0 without keys, or when they are on average due): exact to
    /// the second a deadline is bucketed by, each counted at the middle of its second. Redis
    /// estimates the same figure from the keys its expiry cycle samples.
    pub fn average_ttl_ms(&self, now_ms: u64) -> u64 {
        if self.len == 0 {
            return 0;
        }
        let mean_ms =
            self.seconds * u128::from(BUCKET_MS) / self.len as u128 + u128::from(BUCKET_MS / 2);
        u64::try_from(mean_ms.saturating_sub(u128::from(now_ms))).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moves_within_a_second_are_free_and_others_rebucket() {
        let mut ix = ExpiryIndex::default();
        let k = b"k";
        ix.moved(k, None, Some(1_500));
        ix.moved(k, Some(1_500), Some(1_900));
        assert_eq!(ix.len(), 1);
        // A key of the current second is a candidate (its deadline decides), of an earlier
        // one always, of a later one never.
        assert_eq!(ix.candidates(1_000).count(), 1);
        assert_eq!(ix.candidates(999).count(), 0);
        assert_eq!(
            ix.candidates(2_000).collect::<Vec<_>>(),
            [(1, hash_key(k), 1)]
        );
        ix.moved(k, Some(1_900), Some(5_000));
        assert_eq!(ix.len(), 1);
        assert_eq!(ix.candidates(4_999).count(), 0);
        assert_eq!(ix.candidates(5_000).count(), 1);
        assert_eq!(ix.candidates(6_000).count(), 1);
        ix.moved(k, Some(5_000), None);
        assert!(ix.is_empty());
        assert_eq!(ix.candidates(u64::MAX).count(), 0);
        assert_eq!(ix.average_ttl_ms(0), 0);
        ix.moved(k, None, Some(100_200));
        ix.moved(b"j", None, Some(200_900));
        // Deadline seconds 100 and 200, each counted at its middle: 150.5 s on average.
        assert_eq!(ix.average_ttl_ms(500), 150_000);
        assert_eq!(ix.average_ttl_ms(300_000), 0);
        ix.remove(200_900, b"j");
        assert_eq!(ix.average_ttl_ms(0), 100_500);
        assert_eq!(ix.candidates(u64::MAX).count(), 1);
    }

    #[test]
    fn a_slot_holds_a_hash_not_a_copy_of_the_key() {
        let mut ix = ExpiryIndex::default();
        for i in 0..100_000u64 {
            ix.moved(format!("rl:ttl:{i}").as_bytes(), None, Some(3_600_500));
        }
        // 131,072 slots of 9 bytes for 100,000 keys of one second: under 12 bytes a key
        // (a copy of each key took 25 bytes a slot, 33 a key).
        assert_eq!(ix.buckets[&3_600].num_buckets(), 131_072);
        assert!(ix.table_bytes() < 12 * 100_000, "{}", ix.table_bytes());
    }

    #[test]
    fn keys_of_one_hash_in_one_second_are_counted() {
        let mut ix = ExpiryIndex::default();
        // Three keys of hash 7 with deadlines in second 5, one in second 6, one of hash 8.
        for t in [5_100, 5_200, 5_300, 6_100] {
            ix.moved_hashed(7, None, Some(t));
        }
        ix.moved_hashed(8, None, Some(5_400));
        assert_eq!(ix.len(), 5);
        let mut seen: Vec<_> = ix.candidates(7_000).collect();
        seen.sort_unstable();
        assert_eq!(seen, [(5, 7, 3), (5, 8, 1), (6, 7, 1)]);
        // One key of the three moves away: two stay behind the one slot.
        ix.moved_hashed(7, Some(5_100), Some(9_000));
        assert_eq!(ix.len(), 5);
        assert_eq!(ix.candidates(5_999).filter(|c| c.1 == 7).count(), 1);
        assert_eq!(ix.candidates(5_999).find(|c| c.1 == 7), Some((5, 7, 2)));
        // A pass where one of the two is not due (the keyspace says one is left): the
        // hash stays, counted once.
        let mut offered = Vec::new();
        ix.purge(5_999, usize::MAX, |s, h, n| {
            offered.push((s, h, n));
            usize::from(h == 7)
        });
        offered.sort_unstable();
        assert_eq!(offered, [(5, 7, 2), (5, 8, 1)]);
        assert_eq!(ix.len(), 3);
        assert!(ix.shared.is_empty());
        assert_eq!(ix.candidates(5_999).collect::<Vec<_>>(), [(5, 7, 1)]);
        ix.remove(5_300, &[]); // another hash: nothing
        assert_eq!(ix.len(), 3);
        ix.remove_hashed(5_300, 7);
        assert_eq!(ix.len(), 2);
        assert!(!ix.buckets.contains_key(&5));
        // Removing one of two keys of a hash keeps the hash for the other.
        ix.moved_hashed(7, None, Some(6_900));
        ix.remove_hashed(6_100, 7);
        assert_eq!(ix.candidates(7_000).collect::<Vec<_>>(), [(6, 7, 1)]);
        ix.remove_hashed(6_900, 7);
        ix.remove_hashed(9_000, 7);
        assert!(ix.is_empty() && ix.buckets.is_empty() && ix.shared.is_empty());
        assert_eq!(ix.average_ttl_ms(0), 0);
    }

    #[test]
    fn a_passed_second_is_drained_to_the_limit_counting_keys() {
        let mut ix = ExpiryIndex::default();
        for _ in 0..4 {
            ix.moved_hashed(1, None, Some(2_500));
        }
        for h in 2..10 {
            ix.moved_hashed(h, None, Some(2_500));
        }
        assert_eq!(ix.len(), 12);
        let mut calls = 0;
        ix.purge(3_000, 5, |_, _, _| {
            calls += 1;
            0
        });
        // At least five keys go, and the pass stops once they have.
        assert!(ix.len() <= 7 && calls < 9, "{} {calls}", ix.len());
        ix.purge(3_000, usize::MAX, |_, _, _| 0);
        assert!(ix.is_empty() && ix.buckets.is_empty() && ix.shared.is_empty());
        assert_eq!(ix.seconds, 0);
    }

    #[test]
    fn a_pass_checks_a_bounded_part_of_the_current_second() {
        let mut ix = ExpiryIndex::default();
        for i in 0..(CURRENT_SCAN as u64 + 500) {
            ix.moved(format!("k{i}").as_bytes(), None, Some(7_000 + i % 1000));
        }
        ix.moved(b"past", None, Some(6_500));
        assert_eq!(ix.candidates(7_100).count(), 1 + CURRENT_SCAN);
        assert_eq!(ix.candidates(8_000).count(), 1 + CURRENT_SCAN + 500);
    }

    /// An index of the keys `k0`..`k99`, all with `deadline`, and each key's hash mapped to
    /// its number (the tests below leave every third one not due).
    fn hundred_keys_due_at(deadline: u64) -> (ExpiryIndex, HashMap<u64, u64>) {
        let mut ix = ExpiryIndex::default();
        let keys: HashMap<u64, u64> = (0..100u64)
            .map(|i| (hash_key(format!("k{i}").as_bytes()), i))
            .collect();
        for &h in keys.keys() {
            ix.moved_hashed(h, None, Some(deadline));
        }
        (ix, keys)
    }

    #[test]
    fn purge_checks_a_key_that_is_not_due_once_per_cycle() {
        let (mut ix, keys) = hundred_keys_due_at(7_500);
        // Every third key is not due; passes of at most 10 deletions, as the cycle runs them.
        let not_due = |h: u64| keys[&h].is_multiple_of(3);
        let mut offered = HashMap::new();
        let mut deleted = 0;
        loop {
            let before = ix.len();
            ix.purge(7_600, 10, |_, h, n| {
                *offered.entry(h).or_insert(0) += 1;
                if not_due(h) {
                    n
                } else {
                    0
                }
            });
            deleted += before - ix.len();
            if before - ix.len() < 10 {
                break;
            }
        }
        assert_eq!(deleted, 66);
        assert_eq!(ix.len(), 34);
        assert!(offered.values().all(|&n| n == 1), "{offered:?}");
        // The next cycle starts from the front again.
        let mut again = 0;
        ix.purge(7_600, 10, |_, _, n| {
            again += 1;
            n
        });
        assert_eq!(again, 34);
        // A second that has passed is drained whole, up to the limit.
        ix.purge(8_000, 20, |_, _, _| 0);
        assert_eq!(ix.len(), 14);
        assert_eq!(ix.average_ttl_ms(0), 7_500);
    }

    #[test]
    fn a_leaders_scan_goes_on_from_where_the_last_one_stopped() {
        let (mut ix, keys) = hundred_keys_due_at(7_500);
        ix.moved(b"past", None, Some(6_500));
        // Every third key is not due. Each scan takes at most 10 keys, which the index
        // forgets only when the expiry entry is applied (here, right after the scan).
        let not_due = |h: u64| keys.get(&h).is_some_and(|i| i.is_multiple_of(3));
        let mut offered = HashMap::new();
        let mut taken = 0;
        loop {
            let mut due = Vec::new();
            ix.scan(7_600, 10, |s, h, n| {
                *offered.entry(h).or_insert(0) += 1;
                if not_due(h) {
                    return 0;
                }
                due.push((s, h));
                n
            });
            for &(s, h) in &due {
                ix.remove_hashed(s * 1000, h);
            }
            taken += due.len();
            if due.len() < 10 {
                break;
            }
        }
        // The passed second's key and the 66 due ones, each key offered once.
        assert_eq!(taken, 67);
        assert_eq!(ix.len(), 34);
        assert!(offered.values().all(|&n| n == 1), "{offered:?}");
        // The sweep reached the end of the second's table: the next starts from the front.
        let mut again = 0;
        ix.scan(7_600, 10, |_, _, _| {
            again += 1;
            0
        });
        assert_eq!(again, 34);
        // A second that has passed is offered whole, up to the limit; nothing is removed.
        let mut due = 0;
        ix.scan(8_000, 20, |_, _, n| {
            due += n;
            n
        });
        assert_eq!((due, ix.len()), (20, 34));
    }

    #[test]
    fn a_leaders_scan_checks_a_bounded_part_of_the_current_second() {
        let mut ix = ExpiryIndex::default();
        for i in 0..(CURRENT_SCAN as u64 + 500) {
            ix.moved(format!("k{i}").as_bytes(), None, Some(7_000 + i % 1000));
        }
        ix.moved(b"past", None, Some(6_500));
        let count = |ix: &mut ExpiryIndex, now_ms| {
            let mut n = 0;
            ix.scan(now_ms, usize::MAX, |_, _, _| {
                n += 1;
                0
            });
            n
        };
        // The passed second, then the current one a bounded part at a time.
        assert_eq!(count(&mut ix, 7_100), 1 + CURRENT_SCAN);
        assert_eq!(count(&mut ix, 7_100), 1 + 500);
        assert_eq!(count(&mut ix, 7_100), 1 + CURRENT_SCAN);
        assert_eq!(count(&mut ix, 8_000), 1 + CURRENT_SCAN + 500);
    }

    #[test]
    fn a_drained_second_lends_its_table_to_the_next_and_the_last_key_frees_it() {
        let mut ix = ExpiryIndex::default();
        ix.moved(b"stay", None, Some(100_000));
        for i in 0..5000u64 {
            ix.moved(format!("k{i}").as_bytes(), None, Some(7_500));
        }
        let grown = ix.buckets[&7].num_buckets();
        assert!(grown >= 5000);
        ix.purge(8_000, usize::MAX, |_, _, _| 0);
        assert_eq!(ix.len(), 1);
        assert_eq!(ix.spare.num_buckets(), grown);
        // The next second starts with that room; the spare is counted as the index's.
        let bytes = ix.table_bytes();
        assert!(bytes >= ix.spare.capacity() * std::mem::size_of::<u64>());
        ix.moved(b"new", None, Some(9_100));
        assert_eq!(ix.buckets[&9].num_buckets(), grown);
        assert_eq!(ix.spare.capacity(), 0);
        assert!(
            ix.table_bytes() <= bytes + 128,
            "{bytes} {}",
            ix.table_bytes()
        );
        // Emptied again, the table is the spare again; once no key has a deadline, no
        // spare is kept (its memory goes back).
        ix.remove(9_100, b"new");
        assert_eq!(ix.spare.num_buckets(), grown);
        ix.remove(100_000, b"stay");
        assert!(ix.is_empty());
        assert_eq!(ix.spare.capacity(), 0);
        assert_eq!(ix.table_bytes(), 0);
    }
}
