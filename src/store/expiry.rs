//! The deadline index: which keys have a TTL, bucketed by the second of their deadline.
//!
//! Limiter commands move a key's deadline on almost every call, so moving must be cheap:
//! a move within the same second is free and any other move is two hash-set operations.
//! (A B-tree ordered by `(deadline, key)` cost a third of a limiter call in key
//! comparisons.) The expiry cycle visits buckets in time order and checks each
//! candidate's real deadline, which the keyspace holds.

use std::collections::BTreeMap;

use hashbrown::HashTable;

use super::{hash_key, Key};

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

/// One deadline second's keys, hashed as the keyspace hashes them ([`hash_key`]): the
/// expiry cycle hands each key's hash on to the keyspace lookup instead of hashing again,
/// and walks the current second's table by slot position ([`ExpiryIndex::purge`]).
type Keys = HashTable<Key>;

/// Keys with a deadline, by deadline second.
#[derive(Debug, Default)]
pub struct ExpiryIndex {
    buckets: BTreeMap<u64, Keys>,
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
    spare: Keys,
}

impl ExpiryIndex {
    /// Bytes of the index's own tables: each bucket's set (slots and control bytes, a
    /// key's fixed part inline) and its place in the tree (INFO `used_memory_overhead`).
    pub fn table_bytes(&self) -> usize {
        let slot = std::mem::size_of::<Key>() + 1;
        let node = std::mem::size_of::<(u64, Keys)>();
        self.buckets
            .values()
            .map(|set| node + set.capacity() * slot)
            .sum::<usize>()
            + self.spare.capacity() * slot
    }

    /// Keep the emptied table `set` as the spare when it is the larger one and
    /// its capacity is in proportion to the `len` keys left ([`SPARE_FACTOR`]).
    fn retire(spare: &mut Keys, len: usize, set: Keys) {
        let cap = set.capacity();
        if cap > spare.capacity() && cap <= SPARE_FACTOR * len.max(SPARE_FLOOR) {
            *spare = set;
        }
        if len == 0 || spare.capacity() > SPARE_FACTOR * len.max(SPARE_FLOOR) {
            *spare = Keys::new();
        }
    }

    /// Whether two deadlines share a bucket (then a move needs no index update).
    pub fn same_bucket(a: Option<u64>, b: Option<u64>) -> bool {
        a.map(|t| t / BUCKET_MS) == b.map(|t| t / BUCKET_MS)
    }

    /// Record that `key`'s deadline changed from `old` to `new`.
    pub fn moved(&mut self, key: &Key, old: Option<u64>, new: Option<u64>) {
        if !Self::same_bucket(old, new) {
            self.rebucket(hash_key(key), key, old, new);
        }
    }

    /// [`ExpiryIndex::moved`] with the key's hash, which the keyspace's lookup computed
    /// already (the index hashes keys as the keyspace does: [`hash_key`]).
    #[inline]
    pub fn moved_hashed(&mut self, h: u64, key: &Key, old: Option<u64>, new: Option<u64>) {
        if !Self::same_bucket(old, new) {
            self.rebucket(h, key, old, new);
        }
    }

    fn rebucket(&mut self, h: u64, key: &Key, old: Option<u64>, new: Option<u64>) {
        if let Some(t) = old {
            self.remove_hashed(t, h, key);
        }
        if let Some(t) = new {
            let spare = &mut self.spare;
            let set = self
                .buckets
                .entry(t / BUCKET_MS)
                .or_insert_with(|| std::mem::take(spare));
            if let hashbrown::hash_table::Entry::Vacant(v) =
                set.entry(h, |k| k[..] == key[..], |k| hash_key(k))
            {
                v.insert(key.clone());
                self.len += 1;
                self.seconds += u128::from(t / BUCKET_MS);
            }
        }
    }

    /// Forget `key`, whose deadline was `deadline`.
    pub fn remove(&mut self, deadline: u64, key: &[u8]) {
        self.remove_hashed(deadline, hash_key(key), key);
    }

    fn remove_hashed(&mut self, deadline: u64, h: u64, key: &[u8]) {
        let bucket = deadline / BUCKET_MS;
        if let Some(set) = self.buckets.get_mut(&bucket) {
            if let Ok(entry) = set.find_entry(h, |k| k[..] == *key) {
                entry.remove();
                self.len -= 1;
                self.seconds -= u128::from(bucket);
                if set.is_empty() {
                    if let Some(set) = self.buckets.remove(&bucket) {
                        Self::retire(&mut self.spare, self.len, set);
                    }
                }
            }
        }
    }

    /// Keys that may be due at `now_ms`, earliest first: every key of the seconds that have
    /// fully passed (all due), then at most [`CURRENT_SCAN`] keys of the current second,
    /// which the caller checks against their real deadlines. So a key given `PEXPIRE k 50`
    /// goes within a cycle or two, as in Redis (whose cycle samples keys with a TTL), while
    /// a large current second costs each cycle a bounded scan; the keys of it not reached
    /// go when the second has passed (reads never see an expired key either way).
    pub fn candidates(&self, now_ms: u64) -> impl Iterator<Item = &Key> + '_ {
        let current = now_ms / BUCKET_MS;
        self.buckets
            .range(..current)
            .flat_map(|(_, keys)| keys.iter())
            .chain(
                self.buckets
                    .get(&current)
                    .into_iter()
                    .flat_map(|keys| keys.iter().take(CURRENT_SCAN)),
            )
    }

    /// Delete the keys that are due at `now_ms` through `expire`, earliest second first,
    /// until `limit` are gone: `expire` gets a key and its hash, deletes the key from the
    /// keyspace if its deadline has passed and says whether the index should forget it (it
    /// was deleted, or the keyspace no longer holds it). The seconds that have fully passed
    /// are all due: their sets are drained in one pass. Of the current second, a pass
    /// checks at most [`CURRENT_SCAN`] keys (and walks at most [`CURRENT_SLOTS`] slots),
    /// going on from where the previous pass stopped and starting again from the front
    /// once it reached the end of the table: each key is checked once per sweep, as
    /// Redis's cycle samples a key once, and a key leaves the index where it is found,
    /// with no copy of it and no second lookup.
    pub fn purge(&mut self, now_ms: u64, limit: usize, mut expire: impl FnMut(u64, &Key) -> bool) {
        let current = now_ms / BUCKET_MS;
        let mut taken = 0;
        let mut emptied = Vec::new();
        let Self {
            buckets,
            len,
            seconds,
            cursor,
            spare,
        } = self;
        for (&second, keys) in buckets.range_mut(..=current) {
            let room = limit - taken;
            if room == 0 {
                break;
            }
            let before = keys.len();
            if second < current {
                keys.extract_if(|k| expire(hash_key(k), k))
                    .take(room)
                    .for_each(drop);
            } else {
                let slots = keys.num_buckets();
                let mut at = match *cursor {
                    (s, at) if s == second && at < slots => at,
                    _ => 0,
                };
                let (mut checked, mut gone, end) = (0, 0, slots.min(at + CURRENT_SLOTS));
                while at < end && checked < CURRENT_SCAN && gone < room {
                    if let Ok(entry) = keys.get_bucket_entry(at) {
                        checked += 1;
                        let k = entry.get();
                        if expire(hash_key(k), k) {
                            entry.remove();
                            gone += 1;
                        }
                    }
                    at += 1;
                }
                *cursor = (second, if at < slots { at } else { 0 });
            }
            let removed = before - keys.len();
            taken += removed;
            *len -= removed;
            *seconds -= u128::from(second) * removed as u128;
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

    /// Keys for eviction sampling: from the bucket at or after a second picked by `r`
    /// between the earliest and the latest deadline (the earliest bucket when `r` is None),
    /// starting `skip` keys into it, then the later buckets and the earlier ones.
    pub fn sample_from(&self, r: Option<u64>, skip: usize) -> Box<dyn Iterator<Item = &Key> + '_> {
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
        Box::new(buckets.enumerate().flat_map(move |(i, (_, keys))| {
            let skip = if i == 0 { skip % keys.len().max(1) } else { 0 };
            keys.iter().skip(skip).chain(keys.iter().take(skip))
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
        self.len = 0;
        self.seconds = 0;
        self.cursor = (0, 0);
        self.spare = Keys::new();
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
        let k = Key::new(b"k");
        ix.moved(&k, None, Some(1_500));
        ix.moved(&k, Some(1_500), Some(1_900));
        assert_eq!(ix.len(), 1);
        // A key of the current second is a candidate (its deadline decides), of an earlier
        // one always, of a later one never.
        assert_eq!(ix.candidates(1_000).count(), 1);
        assert_eq!(ix.candidates(999).count(), 0);
        assert_eq!(ix.candidates(2_000).count(), 1);
        ix.moved(&k, Some(1_900), Some(5_000));
        assert_eq!(ix.len(), 1);
        assert_eq!(ix.candidates(4_999).count(), 0);
        assert_eq!(ix.candidates(5_000).count(), 1);
        assert_eq!(ix.candidates(6_000).count(), 1);
        ix.moved(&k, Some(5_000), None);
        assert!(ix.is_empty());
        assert_eq!(ix.candidates(u64::MAX).count(), 0);
        assert_eq!(ix.average_ttl_ms(0), 0);
        let j = Key::new(b"j");
        ix.moved(&k, None, Some(100_200));
        ix.moved(&j, None, Some(200_900));
        // Deadline seconds 100 and 200, each counted at its middle: 150.5 s on average.
        assert_eq!(ix.average_ttl_ms(500), 150_000);
        assert_eq!(ix.average_ttl_ms(300_000), 0);
        ix.remove(200_900, b"j");
        assert_eq!(ix.average_ttl_ms(0), 100_500);
        assert_eq!(ix.candidates(u64::MAX).count(), 1);
    }

    #[test]
    fn a_pass_checks_a_bounded_part_of_the_current_second() {
        let mut ix = ExpiryIndex::default();
        for i in 0..(CURRENT_SCAN as u64 + 500) {
            ix.moved(
                &Key::new(format!("k{i}").as_bytes()),
                None,
                Some(7_000 + i % 1000),
            );
        }
        ix.moved(&Key::new(b"past"), None, Some(6_500));
        assert_eq!(ix.candidates(7_100).count(), 1 + CURRENT_SCAN);
        assert_eq!(ix.candidates(8_000).count(), 1 + CURRENT_SCAN + 500);
    }

    #[test]
    fn purge_checks_a_key_that_is_not_due_once_per_cycle() {
        let mut ix = ExpiryIndex::default();
        let keys: Vec<Key> = (0..100u64)
            .map(|i| Key::new(format!("k{i}").as_bytes()))
            .collect();
        for k in &keys {
            ix.moved(k, None, Some(7_500));
        }
        // Every third key is not due; passes of at most 10 deletions, as the cycle runs them.
        let not_due = |k: &Key| keys.iter().position(|x| x == k).unwrap() % 3 == 0;
        let mut offered = std::collections::HashMap::new();
        let mut deleted = 0;
        loop {
            let before = ix.len();
            ix.purge(7_600, 10, |_, k| {
                *offered.entry(k.clone()).or_insert(0) += 1;
                !not_due(k)
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
        ix.purge(7_600, 10, |_, _| {
            again += 1;
            false
        });
        assert_eq!(again, 34);
        // A second that has passed is drained whole, up to the limit.
        ix.purge(8_000, 20, |_, _| true);
        assert_eq!(ix.len(), 14);
        assert_eq!(ix.average_ttl_ms(0), 7_500);
    }

    #[test]
    fn a_drained_second_lends_its_table_to_the_next_and_the_last_key_frees_it() {
        let mut ix = ExpiryIndex::default();
        let stay = Key::new(b"stay");
        ix.moved(&stay, None, Some(100_000));
        for i in 0..5000u64 {
            ix.moved(&Key::new(format!("k{i}").as_bytes()), None, Some(7_500));
        }
        let grown = ix.buckets[&7].num_buckets();
        assert!(grown >= 5000);
        ix.purge(8_000, usize::MAX, |_, _| true);
        assert_eq!(ix.len(), 1);
        assert_eq!(ix.spare.num_buckets(), grown);
        // The next second starts with that room; the spare is counted as the index's.
        let bytes = ix.table_bytes();
        assert!(bytes >= ix.spare.capacity() * std::mem::size_of::<Key>());
        ix.moved(&Key::new(b"new"), None, Some(9_100));
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
