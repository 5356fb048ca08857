//! Eviction under `maxmemory`: the policies, the access information LRU and LFU rank keys
//! by, and the choice of the next key to evict.
//!
//! Each key carries 32 bits of access information (Redis keeps 24 in its object header):
//! the second it was last used (LRU), or the minute of its last use and a logarithmic use
//! counter (LFU, Redis's algorithm: a use raises the counter with probability
//! `1/((c-5)·lfu-log-factor+1)`, and it falls by one per `lfu-decay-time` minutes unused).
//! The field sits in bytes the stored key leaves free (`store::small::Key`), so it costs no
//! memory per key; reads and writes update it with one relaxed store into the slot they
//! just loaded.
//!
//! The choice is approximate, as in Redis: each round samples `maxmemory-samples` keys of
//! every database (consecutive keys from a random point of a random shard, or for the
//! `volatile-*` policies from a random second of the deadline index), keeps the best
//! candidates in a pool of 16 across rounds, and evicts the best one still present.
//! `volatile-ttl` samples the earliest deadlines, so it evicts the keys closest to expiring.
//!
//! Nothing here is replicated state. Access information differs between nodes (reads run
//! on the node a client is on), and in a cluster only the leader chooses keys to evict and
//! replicates the list (`engine::Op::Evict`), so every replica deletes the same keys. The
//! sampling draws from a seeded generator, never from the OS.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use super::{Db, Entry, Key, Keyspace, SHARDS};

/// A `maxmemory-policy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Policy {
    /// Refuse commands that may grow memory (`-OOM`).
    #[default]
    NoEviction,
    /// Evict the least recently used of all keys.
    AllKeysLru,
    /// Evict the least recently used of the keys with a TTL.
    VolatileLru,
    /// Evict the least frequently used of all keys.
    AllKeysLfu,
    /// Evict the least frequently used of the keys with a TTL.
    VolatileLfu,
    /// Evict any key.
    AllKeysRandom,
    /// Evict any key with a TTL.
    VolatileRandom,
    /// Evict the keys with the nearest deadline.
    VolatileTtl,
}

impl Policy {
    /// Every policy, in the order Redis lists them in its error text.
    pub const ALL: [Policy; 8] = [
        Policy::VolatileLru,
        Policy::VolatileLfu,
        Policy::VolatileRandom,
        Policy::VolatileTtl,
        Policy::AllKeysLru,
        Policy::AllKeysLfu,
        Policy::AllKeysRandom,
        Policy::NoEviction,
    ];

    /// The names of [`Policy::ALL`], in the same order.
    pub const NAMES: [&'static str; 8] = [
        "volatile-lru",
        "volatile-lfu",
        "volatile-random",
        "volatile-ttl",
        "allkeys-lru",
        "allkeys-lfu",
        "allkeys-random",
        "noeviction",
    ];

    /// The name CONFIG uses.
    pub fn name(self) -> &'static str {
        match self {
            Policy::NoEviction => "noeviction",
            Policy::AllKeysLru => "allkeys-lru",
            Policy::VolatileLru => "volatile-lru",
            Policy::AllKeysLfu => "allkeys-lfu",
            Policy::VolatileLfu => "volatile-lfu",
            Policy::AllKeysRandom => "allkeys-random",
            Policy::VolatileRandom => "volatile-random",
            Policy::VolatileTtl => "volatile-ttl",
        }
    }

    /// The policy named `s` (any case).
    pub fn parse(s: &str) -> Option<Policy> {
        Policy::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(s))
    }

    /// Whether only keys with a TTL may be evicted.
    pub fn volatile(self) -> bool {
        matches!(
            self,
            Policy::VolatileLru
                | Policy::VolatileLfu
                | Policy::VolatileRandom
                | Policy::VolatileTtl
        )
    }

    /// Whether the access information counts uses (LFU) rather than times (LRU).
    pub fn uses_lfu(self) -> bool {
        matches!(self, Policy::AllKeysLfu | Policy::VolatileLfu)
    }

    /// Whether the policy evicts at all.
    pub fn evicts(self) -> bool {
        self != Policy::NoEviction
    }

    /// Whether `ks` holds a key this policy could evict.
    pub fn has_candidates(self, ks: &Keyspace) -> bool {
        match self {
            Policy::NoEviction => false,
            p if p.volatile() => ks.dbs.iter().any(|db| db.expires_count() > 0),
            _ => ks.total_keys() > 0,
        }
    }
}

/// The `maxmemory*` and `lfu-*` settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemorySettings {
    /// Bytes; 0 = no limit.
    pub maxmemory: u64,
    /// What to do at the limit.
    pub policy: Policy,
    /// Keys sampled per database per eviction round.
    pub samples: u32,
    /// `lfu-log-factor`.
    pub lfu_log_factor: u32,
    /// `lfu-decay-time`, minutes.
    pub lfu_decay_time: u32,
}

impl Default for MemorySettings {
    fn default() -> Self {
        MemorySettings {
            maxmemory: 0,
            policy: Policy::NoEviction,
            samples: 5,
            lfu_log_factor: 10,
            lfu_decay_time: 1,
        }
    }
}

/// Redis's `LFU_INIT_VAL`: the counter of a new key, so that it is not evicted at once.
const LFU_INIT_VAL: u32 = 5;
/// Minutes are kept in 24 bits (they wrap after 31 years; elapsed time is taken modulo).
const MINUTES_MASK: u32 = (1 << 24) - 1;

/// The clock and mode access information is written with, shared by the databases of a
/// keyspace: the engine sets the time once per batch and the mode when the policy changes.
/// It also counts the read lookups that found their key and those that did not (INFO's
/// `keyspace_hits`/`keyspace_misses`, [`AccessClock::count_read`]).
#[derive(Debug)]
pub struct AccessClock {
    secs: AtomicU32,
    lfu: AtomicBool,
    log_factor: AtomicU32,
    decay_minutes: AtomicU32,
    rng: AtomicU64,
    hits: AtomicU64,
    misses: AtomicU64,
    /// `hits` and `misses` at the last CONFIG RESETSTAT (reported counts are the
    /// difference, so a reset never races with a count in progress).
    reset_at: [AtomicU64; 2],
}

impl Default for AccessClock {
    fn default() -> Self {
        AccessClock {
            secs: AtomicU32::new(0),
            lfu: AtomicBool::new(false),
            log_factor: AtomicU32::new(10),
            decay_minutes: AtomicU32::new(1),
            rng: AtomicU64::new(0x9E37_79B9_7F4A_7C15),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            reset_at: [AtomicU64::new(0), AtomicU64::new(0)],
        }
    }
}

impl AccessClock {
    /// Set the time of the commands about to run (unix milliseconds).
    pub fn set_now(&self, now_ms: u64) {
        self.secs.store((now_ms / 1000) as u32, Ordering::Relaxed);
    }

    /// Use LFU counters (`lfu`) or LRU times from now on, with `lfu-log-factor` and
    /// `lfu-decay-time`. Existing keys keep their bits, reinterpreted (as in Redis).
    pub fn configure(&self, lfu: bool, log_factor: u32, decay_minutes: u32) {
        self.lfu.store(lfu, Ordering::Relaxed);
        self.log_factor.store(log_factor, Ordering::Relaxed);
        self.decay_minutes.store(decay_minutes, Ordering::Relaxed);
    }

    fn minutes(&self) -> u32 {
        (self.secs.load(Ordering::Relaxed) / 60) & MINUTES_MASK
    }

    /// Access information of a key created now.
    pub fn initial(&self) -> u32 {
        if self.lfu.load(Ordering::Relaxed) {
            (self.minutes() << 8) | LFU_INIT_VAL
        } else {
            self.secs.load(Ordering::Relaxed)
        }
    }

    /// Record a use of the key `key` (its access information is in the stored key).
    #[inline]
    pub fn touch(&self, key: &Key) {
        let access = key.access();
        let new = if self.lfu.load(Ordering::Relaxed) {
            self.lfu_used(access.load(Ordering::Relaxed))
        } else {
            self.secs.load(Ordering::Relaxed)
        };
        access.store(new, Ordering::Relaxed);
    }

    /// Count one read lookup (Redis's `lookupKeyRead`): a hit when it found a live key.
    ///
    /// The databases are used only under the engine's state lock, so one thread at a time
    /// counts: a plain load and store (no locked read-modify-write) is exact, and the line
    /// is the one [`AccessClock::touch`] reads anyway. Readers of the totals
    /// ([`AccessClock::reads`]) may see a count one behind.
    #[inline]
    pub fn count_read(&self, hit: bool) {
        let counter = if hit { &self.hits } else { &self.misses };
        counter.store(
            counter.load(Ordering::Relaxed).wrapping_add(1),
            Ordering::Relaxed,
        );
    }

    /// Read lookups since start or the last [`AccessClock::reset_reads`]: (hits, misses).
    pub fn reads(&self) -> (u64, u64) {
        let since = |c: &AtomicU64, at: &AtomicU64| {
            c.load(Ordering::Relaxed)
                .wrapping_sub(at.load(Ordering::Relaxed))
        };
        (
            since(&self.hits, &self.reset_at[0]),
            since(&self.misses, &self.reset_at[1]),
        )
    }

    /// Start [`AccessClock::reads`] from zero (CONFIG RESETSTAT).
    pub fn reset_reads(&self) {
        self.reset_at[0].store(self.hits.load(Ordering::Relaxed), Ordering::Relaxed);
        self.reset_at[1].store(self.misses.load(Ordering::Relaxed), Ordering::Relaxed);
    }

    /// Redis's `updateLFU`: decay the counter for the minutes unused, then count this use.
    fn lfu_used(&self, access: u32) -> u32 {
        let mut counter = self.lfu_decayed(access);
        if counter < 255 {
            let base = counter.saturating_sub(LFU_INIT_VAL) as f64;
            let p = 1.0 / (base * self.log_factor.load(Ordering::Relaxed) as f64 + 1.0);
            if self.draw() < p {
                counter += 1;
            }
        }
        (self.minutes() << 8) | counter
    }

    /// Redis's `LFUDecrAndReturn`: the counter less one per `lfu-decay-time` minutes.
    fn lfu_decayed(&self, access: u32) -> u32 {
        let counter = access & 255;
        let elapsed = self.minutes().wrapping_sub(access >> 8) & MINUTES_MASK;
        let periods = match self.decay_minutes.load(Ordering::Relaxed) {
            0 => 0,
            d => elapsed / d,
        };
        counter.saturating_sub(periods)
    }

    /// A number in [0, 1) from the clock's seeded generator (splitmix64).
    fn draw(&self) -> f64 {
        let mut z = self
            .rng
            .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed)
            .wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }

    /// How strongly `entry` should be evicted under `policy`: larger goes first.
    fn score(&self, policy: Policy, key: &Key, entry: &Entry) -> u64 {
        let access = key.access().load(Ordering::Relaxed);
        match policy {
            Policy::AllKeysLfu | Policy::VolatileLfu => 255 - u64::from(self.lfu_decayed(access)),
            Policy::VolatileTtl => u64::MAX - entry.expires_at().unwrap_or(u64::MAX),
            _ => u64::from(self.secs.load(Ordering::Relaxed).wrapping_sub(access)),
        }
    }

    /// Redis's `objectSetLRUOrLFU` (RESTORE ... IDLETIME / FREQ): in LFU mode a use counter
    /// of `freq` as of now, in LRU mode a last use `idle_secs` ago; None when the option for
    /// the current mode was not given (the key keeps what creating it wrote).
    pub fn hinted(&self, idle_secs: Option<u64>, freq: Option<u8>) -> Option<u32> {
        if self.lfu.load(Ordering::Relaxed) {
            freq.map(|f| (self.minutes() << 8) | u32::from(f))
        } else {
            let idle = u32::try_from(idle_secs?).unwrap_or(u32::MAX);
            Some(self.secs.load(Ordering::Relaxed).saturating_sub(idle))
        }
    }

    /// Whether access information counts uses (an LFU policy) rather than times.
    pub fn lfu(&self) -> bool {
        self.lfu.load(Ordering::Relaxed)
    }

    /// Seconds since the last use (OBJECT IDLETIME; LRU mode only).
    pub fn idle_secs(&self, key: &Key) -> u64 {
        u64::from(
            self.secs
                .load(Ordering::Relaxed)
                .saturating_sub(key.access().load(Ordering::Relaxed)),
        )
    }

    /// The decayed use counter (OBJECT FREQ; LFU mode only).
    pub fn frequency(&self, key: &Key) -> u32 {
        self.lfu_decayed(key.access().load(Ordering::Relaxed))
    }
}

/// Redis's `EVPOOL_SIZE`: best candidates kept between rounds.
const POOL_SIZE: usize = 16;

#[derive(Debug)]
struct Candidate {
    score: u64,
    db: usize,
    key: Key,
}

/// Chooses keys to evict: the candidate pool and the sampling generator.
#[derive(Debug)]
pub struct Evictor {
    /// Ordered by score, best last.
    pool: Vec<Candidate>,
    rng: u64,
    next_db: usize,
}

impl Default for Evictor {
    fn default() -> Self {
        Evictor {
            pool: Vec::with_capacity(POOL_SIZE),
            rng: 0x2545_F491_4F6C_DD1D,
            next_db: 0,
        }
    }
}

impl Evictor {
    /// The next key `policy` evicts, as `(db, key)`, leaving out keys in `taken` (chosen
    /// already but not yet deleted). None when no key qualifies.
    pub fn next_victim(
        &mut self,
        ks: &Keyspace,
        policy: Policy,
        samples: usize,
        taken: &HashSet<(usize, Key)>,
    ) -> Option<(usize, Key)> {
        let samples = samples.max(1);
        match policy {
            Policy::NoEviction => None,
            Policy::AllKeysRandom | Policy::VolatileRandom => {
                self.random_victim(ks, policy.volatile(), taken)
            }
            _ => self.pooled_victim(ks, policy, samples, taken),
        }
    }

    /// Redis's random policies: one random key of the next database that has one.
    fn random_victim(
        &mut self,
        ks: &Keyspace,
        volatile: bool,
        taken: &HashSet<(usize, Key)>,
    ) -> Option<(usize, Key)> {
        for _ in 0..ks.dbs.len() {
            let i = self.next_db % ks.dbs.len();
            self.next_db = self.next_db.wrapping_add(1);
            let mut found = None;
            // A few draws, in case the first ones were chosen already.
            for _ in 0..4 {
                let r = self.next_rand();
                sample_db(&ks.dbs[i], r, 1, volatile, false, |k, _| {
                    if !taken.contains(&(i, k.clone())) {
                        found = Some(k.clone());
                    }
                });
                if found.is_some() {
                    return found.map(|k| (i, k));
                }
            }
        }
        None
    }

    /// Redis's `evictionPoolPopulate` over every database, then the best candidate that is
    /// still there.
    fn pooled_victim(
        &mut self,
        ks: &Keyspace,
        policy: Policy,
        samples: usize,
        taken: &HashSet<(usize, Key)>,
    ) -> Option<(usize, Key)> {
        let clock = ks.clock();
        for (i, db) in ks.dbs.iter().enumerate() {
            let r = self.next_rand();
            let earliest = policy == Policy::VolatileTtl;
            let mut sampled = Vec::with_capacity(samples);
            sample_db(db, r, samples, policy.volatile(), earliest, |k, e| {
                sampled.push((clock.score(policy, k, e), k.clone()));
            });
            for (score, key) in sampled {
                if !taken.contains(&(i, key.clone())) {
                    self.offer(Candidate { score, db: i, key });
                }
            }
        }
        while let Some(c) = self.pool.pop() {
            let Some(entry) = ks.dbs[c.db].get_raw(&c.key) else {
                continue;
            };
            if (policy.volatile() && entry.expires_at().is_none())
                || taken.contains(&(c.db, c.key.clone()))
            {
                continue;
            }
            return Some((c.db, c.key));
        }
        None
    }

    /// Put a candidate into the pool if it beats the worst one (or there is room).
    fn offer(&mut self, c: Candidate) {
        if self.pool.iter().any(|p| p.db == c.db && p.key == c.key) {
            return;
        }
        if self.pool.len() >= POOL_SIZE {
            if self.pool[0].score >= c.score {
                return;
            }
            self.pool.remove(0);
        }
        let at = self.pool.partition_point(|p| p.score <= c.score);
        self.pool.insert(at, c);
    }

    /// Forget every candidate (the keyspace was replaced or flushed).
    pub fn clear(&mut self) {
        self.pool.clear();
    }

    /// xorshift64*.
    fn next_rand(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// Call `f` on up to `n` entries of `db` picked from `r`: consecutive entries from a random
/// point of a random shard (moving on to the next shards while short), or with `volatile`
/// keys with a deadline, from a random second of the deadline index (with `earliest`, from
/// the earliest second instead).
fn sample_db(
    db: &Db,
    r: u64,
    n: usize,
    volatile: bool,
    earliest: bool,
    mut f: impl FnMut(&Key, &Entry),
) {
    let mut got = 0;
    let mut visit = |k: &Key, e: &Entry| {
        f(k, e);
        got += 1;
        got >= n
    };
    if volatile {
        if db.expires_count() == 0 {
            return;
        }
        let (start, skip) = if earliest {
            (None, 0)
        } else {
            (Some(r), (r >> 32) as usize)
        };
        for (second, h, keys) in db.expires.sample_from(start, skip) {
            for (key, e) in db.keys_in_second(second, h, keys) {
                if visit(key, e) {
                    return;
                }
            }
        }
        return;
    }
    if db.is_empty() {
        return;
    }
    let first = (r % SHARDS as u64) as usize;
    for i in 0..SHARDS {
        let shard = &db.shards[(first + i) % SHARDS];
        if shard.is_empty() {
            continue;
        }
        let skip = ((r >> 20) as usize) % shard.len();
        for (k, e) in shard.iter().skip(skip).chain(shard.iter().take(skip)) {
            if visit(k, e) {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Value;

    fn ks_with(n: usize, ttl_every: usize, now_ms: u64) -> Keyspace {
        let mut ks = Keyspace::default();
        ks.clock().set_now(now_ms);
        for i in 0..n {
            let k = format!("k{i}");
            ks.dbs[0].set(k.as_bytes(), Value::string("v"));
            if ttl_every > 0 && i % ttl_every == 0 {
                ks.dbs[0].set_expiry(k.as_bytes(), Some(now_ms + 1_000 * (i as u64 + 1)));
            }
        }
        ks
    }

    fn evict_all(ks: &mut Keyspace, policy: Policy) -> Vec<String> {
        let mut ev = Evictor::default();
        let mut order = Vec::new();
        while let Some((db, key)) = ev.next_victim(ks, policy, 5, &HashSet::new()) {
            order.push(String::from_utf8_lossy(&key).into_owned());
            ks.dbs[db].remove(&key, 0);
        }
        order
    }

    #[test]
    fn policy_names_round_trip_in_any_case() {
        for (i, p) in Policy::ALL.into_iter().enumerate() {
            assert_eq!(p.name(), Policy::NAMES[i]);
            assert_eq!(Policy::parse(p.name()), Some(p));
            assert_eq!(Policy::parse(&p.name().to_ascii_uppercase()), Some(p));
        }
        assert_eq!(Policy::parse("lru"), None);
    }

    #[test]
    fn volatile_policies_evict_only_keys_with_a_ttl() {
        for p in [
            Policy::VolatileLru,
            Policy::VolatileLfu,
            Policy::VolatileRandom,
            Policy::VolatileTtl,
        ] {
            let mut ks = ks_with(200, 4, 1_000_000);
            let evicted = evict_all(&mut ks, p);
            assert_eq!(evicted.len(), 50, "{p:?}");
            assert_eq!(ks.total_keys(), 150, "{p:?}");
            assert_eq!(ks.dbs[0].expires_count(), 0, "{p:?}");
        }
        let mut ks = ks_with(10, 0, 1_000);
        assert!(!Policy::VolatileLru.has_candidates(&ks));
        assert!(evict_all(&mut ks, Policy::VolatileTtl).is_empty());
        assert!(evict_all(&mut ks, Policy::NoEviction).is_empty());
    }

    #[test]
    fn allkeys_policies_can_evict_every_key_once() {
        for p in [
            Policy::AllKeysLru,
            Policy::AllKeysLfu,
            Policy::AllKeysRandom,
        ] {
            let mut ks = ks_with(300, 3, 5_000);
            let evicted = evict_all(&mut ks, p);
            let unique: HashSet<&String> = evicted.iter().collect();
            assert_eq!((evicted.len(), unique.len()), (300, 300), "{p:?}");
            assert_eq!(ks.total_keys(), 0);
        }
    }

    #[test]
    fn volatile_ttl_evicts_the_nearest_deadlines_first() {
        let mut ks = ks_with(100, 1, 10_000);
        let evicted = evict_all(&mut ks, Policy::VolatileTtl);
        // Deadlines are one second apart: the order is exact.
        let expected: Vec<String> = (0..100).map(|i| format!("k{i}")).collect();
        assert_eq!(evicted, expected);
    }

    #[test]
    fn lru_keeps_recently_used_keys() {
        let mut ks = ks_with(1000, 0, 1_000_000);
        // An hour later, read the first 100 keys.
        ks.clock().set_now(1_000_000 + 3_600_000);
        for i in 0..100 {
            assert!(ks.dbs[0].get(format!("k{i}").as_bytes(), 0).is_some());
        }
        let mut ev = Evictor::default();
        let taken = HashSet::new();
        for _ in 0..500 {
            let (db, key) = ev.next_victim(&ks, Policy::AllKeysLru, 5, &taken).unwrap();
            let n: usize = String::from_utf8_lossy(&key[1..]).parse().unwrap();
            assert!(n >= 100, "evicted recently read key {n}");
            ks.dbs[db].remove(&key, 0);
        }
    }

    #[test]
    fn lfu_counts_uses_and_decays() {
        let clock = AccessClock::default();
        clock.configure(true, 10, 1);
        clock.set_now(60_000 * 100);
        let key = Key::new(b"k");
        key.access().store(clock.initial(), Ordering::Relaxed);
        assert_eq!(clock.frequency(&key), LFU_INIT_VAL);
        for _ in 0..10_000 {
            clock.touch(&key);
        }
        let hot = clock.frequency(&key);
        // Redis's table: factor 10 reaches about 18 after 1k uses and 37 after 10k... the
        // counter grows logarithmically.
        assert!((20..60).contains(&hot), "counter {hot}");
        // Ten idle minutes take ten off.
        clock.set_now(60_000 * 110);
        assert_eq!(clock.frequency(&key), hot - 10);
        // A counter never passes 255 and never goes below 0.
        clock.set_now(60_000 * 100_000);
        assert_eq!(clock.frequency(&key), 0);
    }

    #[test]
    fn lfu_keeps_frequently_used_keys() {
        let mut ks = Keyspace::default();
        ks.clock().configure(true, 10, 1);
        ks.clock().set_now(1_000_000);
        for i in 0..1000 {
            ks.dbs[0].set(format!("k{i}").as_bytes(), Value::string("v"));
        }
        for _ in 0..200 {
            for i in 0..50 {
                ks.dbs[0].get(format!("k{i}").as_bytes(), 0);
            }
        }
        let mut ev = Evictor::default();
        for _ in 0..500 {
            let (db, key) = ev
                .next_victim(&ks, Policy::AllKeysLfu, 5, &HashSet::new())
                .unwrap();
            let n: usize = String::from_utf8_lossy(&key[1..]).parse().unwrap();
            assert!(n >= 50, "evicted frequently used key {n}");
            ks.dbs[db].remove(&key, 0);
        }
    }

    #[test]
    fn taken_keys_are_not_chosen_twice() {
        let ks = ks_with(50, 0, 1_000);
        for p in [Policy::AllKeysLru, Policy::AllKeysRandom] {
            let mut ev = Evictor::default();
            let mut taken = HashSet::new();
            while let Some(v) = ev.next_victim(&ks, p, 5, &taken) {
                assert!(taken.insert(v), "{p:?} chose a key twice");
                assert!(taken.len() <= 50);
            }
            // Either may give up early once most keys are taken (the leader then proposes
            // what it has and asks again after those are gone).
            assert!(taken.len() >= 10, "{p:?} chose only {}", taken.len());
        }
    }
}
