//! Helpers shared by the collection families (hashes, lists, sets, sorted sets):
//! mutate-then-delete-if-empty access, the deterministic pseudo-random picker behind
//! HRANDFIELD/SRANDMEMBER/SPOP/ZRANDMEMBER, and the cursor scheme of HSCAN/SSCAN/ZSCAN.
//!
//! Randomness here is a fixed function of the command's seed (`Ctx::seed`: from the entry's
//! place in the Raft log, or the batch standalone), the key and the collection size, never
//! a process seed, so a write such as SPOP picks the same members on every replica, while
//! repeated calls draw independently (Redis's distribution tests pass).

use std::collections::HashMap;

use bytes::Bytes;

use super::args::{self, CmdResult, Kind};
use super::keys::ScanOptions;
use super::Ctx;
use crate::glob::glob_match;
use crate::protocol::Reply;
use crate::pubsub::notify;

/// Run `f` on the collection at `key` (created empty first if `create`), then delete
/// the key if the collection ended up empty (keyspace event `del`). Ok(None) when the key
/// is absent and not created. `f` must validate before it mutates: an error leaves the
/// value as it was.
pub fn update<T: Kind, R>(
    ctx: &mut Ctx,
    key: &[u8],
    create: bool,
    f: impl FnOnce(&mut T) -> CmdResult<R>,
) -> CmdResult<Option<R>> {
    update_notify(ctx, key, create, 0, |_| None, f)
}

/// [`update`], firing keyspace event `event(&result)` of class `class` on `key` when `f`
/// succeeded (None: no event), before the `del` of a collection it emptied, as Redis
/// orders them.
pub fn update_notify<T: Kind, R>(
    ctx: &mut Ctx,
    key: &[u8],
    create: bool,
    class: u32,
    event: impl FnOnce(&R) -> Option<&'static str>,
    f: impl FnOnce(&mut T) -> CmdResult<R>,
) -> CmdResult<Option<R>> {
    let now = ctx.now_ms;
    let out = args::write::<T>(ctx.db(), key, now, create)?.map(f);
    if let Some(Ok(r)) = &out {
        if let Some(name) = event(r) {
            ctx.notify(class, name, key);
        }
    }
    if ctx.db().remove_if_empty(key) {
        ctx.notify(notify::GENERIC | notify::REMOVAL, "del", key);
    }
    out.transpose()
}

/// [`update_notify`] for a key that exists, in one keyspace lookup: runs `f` on the live
/// `T` at `key` and, when `event(&result)` names an event (which must be exactly when `f`
/// changed the value: nothing else marks WATCHes), signals the key modified and fires the
/// event; a collection `f` emptied is deleted (event `del`). An error from `f` signals the
/// key too, in case it changed something before failing. None when the key is absent or
/// expired, for the caller to take [`update_notify`]'s path, which creates or expires it.
pub fn update_live<T: Kind, R>(
    ctx: &mut Ctx,
    key: &[u8],
    class: u32,
    event: impl FnOnce(&R) -> Option<&'static str>,
    f: impl FnOnce(&mut T) -> CmdResult<R>,
) -> Option<CmdResult<R>> {
    let now = ctx.now_ms;
    let entry = ctx.db().live_mut(key, now)?;
    let Some(value) = T::get_mut(&mut entry.value) else {
        return Some(Err(args::wrongtype()));
    };
    let out = f(value);
    let emptied = entry.value.is_empty_collection();
    let name = match &out {
        Ok(r) => event(r),
        Err(_) => None,
    };
    if out.is_err() || name.is_some() {
        ctx.db().signal_modified(key);
    }
    if let Some(name) = name {
        ctx.notify(class, name, key);
    }
    if emptied && ctx.db().remove_if_empty(key) {
        ctx.notify(notify::GENERIC | notify::REMOVAL, "del", key);
    }
    Some(out)
}

/// Whether `key` holds a `T` satisfying `pred`, judged on a read-only borrow. Writes ask
/// this before mutating so that no-ops (HDEL of absent fields, SREM of non-members, SADD
/// of existing members, ...) neither create keys nor fire WATCH, as in Redis, which
/// signals a key only when it really changed. WRONGTYPE still surfaces as an error.
pub fn exists_where<T: Kind>(
    ctx: &mut Ctx,
    key: &[u8],
    pred: impl FnOnce(&T) -> bool,
) -> CmdResult<bool> {
    let now = ctx.now_ms;
    Ok(args::lookup::<T>(ctx.db(), key, now)?.is_some_and(pred))
}

/// A 64-bit FNV-1a hash: fixed across processes and machines, unlike `KeyHasher`.
pub fn fixed_hash(b: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &c in b {
        h ^= c as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    mix(h)
}

/// The splitmix64 finaliser: spreads the bits of `z` over the whole word.
pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A splitmix64 generator seeded from the command's seed, the key and the collection
/// size: deterministic for replicas, yet varying between calls and keys.
pub struct Rng(u64);

impl Rng {
    /// A generator for a random pick from the collection of `len` items at `key`, for the
    /// command whose seed is `seed` (`Ctx::seed`).
    pub fn new(seed: u64, key: &[u8], len: usize) -> Rng {
        Rng(mix(seed) ^ fixed_hash(key) ^ mix(len as u64).rotate_left(17))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix(self.0)
    }

    /// A uniform index below `n` (`n` > 0), by multiply-shift (no modulo bias worth
    /// mentioning at 64 bits).
    pub fn below(&mut self, n: usize) -> usize {
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }

    /// `count` distinct indices below `size` in random order (all of them, shuffled,
    /// if `count >= size`), by a Fisher-Yates shuffle that stores only the swapped
    /// slots, so the cost is O(count) however large the collection.
    pub fn distinct(&mut self, size: usize, count: usize) -> Vec<usize> {
        let count = count.min(size);
        let mut swapped: HashMap<usize, usize> = HashMap::with_capacity(count);
        let mut out = Vec::with_capacity(count);
        for i in 0..count {
            let j = i + self.below(size - i);
            let at_j = swapped.get(&j).copied().unwrap_or(j);
            let at_i = swapped.get(&i).copied().unwrap_or(i);
            swapped.insert(j, at_i);
            out.push(at_j);
        }
        out
    }

    /// `count` indices below `size` (> 0) drawn with repetition.
    pub fn repeated(&mut self, size: usize, count: usize) -> Vec<usize> {
        (0..count).map(|_| self.below(size)).collect()
    }
}

/// The largest reply a negative-count random read (SRANDMEMBER -n, HRANDFIELD -n,
/// ZRANDMEMBER -n) may build. Redis streams such replies and would happily try a
/// billion; Tollgate builds replies in memory, so it refuses counts that could not
/// fit rather than exhaust memory.
pub const MAX_RANDOM_REPLY: u64 = 1 << 22;

/// Parse an integer in `-i64::MAX..=i64::MAX` (counts whose sign picks a direction or a
/// mode: SRANDMEMBER, HRANDFIELD, LPOS RANK), with Redis's range error for `i64::MIN`.
pub fn symmetric_int(arg: &[u8]) -> CmdResult<i64> {
    match args::int(arg)? {
        i64::MIN => Err(Reply::err(
            "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
        )),
        n => Ok(n),
    }
}

/// Parse the optional `count` of SPOP/ZPOPMIN/ZPOPMAX at `a[2]` (nothing may follow it),
/// with Redis's error for a negative count.
pub fn pop_count(a: &[Bytes]) -> CmdResult<Option<i64>> {
    if a.len() > 3 {
        return Err(args::syntax_error());
    }
    a.get(2)
        .map(|c| {
            args::non_negative(c, "")
                .map_err(|_| Reply::err("ERR value is out of range, must be positive"))
        })
        .transpose()
}

/// Which positions of a collection of `size` items a random read with `count` returns:
/// distinct ones for `count >= 0` (in collection order when it covers everything, as
/// Redis returns a whole small collection), repeated draws for `count < 0`.
pub fn random_picks(rng: &mut Rng, size: usize, count: i64) -> CmdResult<Vec<usize>> {
    if size == 0 || count == 0 {
        return Ok(Vec::new());
    }
    if count < 0 {
        let n = count.unsigned_abs();
        if n > MAX_RANDOM_REPLY {
            return Err(Reply::err("ERR value is out of range"));
        }
        return Ok(rng.repeated(size, n as usize));
    }
    let count = usize::try_from(count).unwrap_or(usize::MAX);
    if count >= size {
        return Ok((0..size).collect());
    }
    Ok(rng.distinct(size, count))
}

/// Collections up to this size come back whole from one *SCAN call with cursor 0, as
/// Redis does for its small (listpack) encodings.
const SCAN_WHOLE_MAX: usize = 128;

/// One step of HSCAN/SSCAN/ZSCAN over `items` (a collection of `len` entries keyed by
/// member): returns the next cursor and the entries of this step that pass MATCH.
///
/// Larger collections are walked in the order of a fixed hash of the member and the
/// cursor is the hash to resume from, so the cursor survives insertions and removals
/// between calls (and works on any replica): every member present for the whole scan
/// is returned exactly once. Each step costs O(len), so a step takes at least len/32
/// entries, bounding a full scan to O(32·len) whatever COUNT says (COUNT is a hint).
pub fn scan_step<M: AsRef<[u8]> + Copy, T>(
    items: impl Iterator<Item = (M, T)>,
    len: usize,
    opts: &ScanOptions,
) -> (u64, Vec<(M, T)>) {
    let matches = |m: &M| {
        opts.pattern
            .as_ref()
            .is_none_or(|p| glob_match(p, m.as_ref(), false))
    };
    if len <= SCAN_WHOLE_MAX {
        // A cursor other than 0 on a small collection resumes nowhere: Redis returns
        // the whole listpack for any cursor.
        return (0, items.filter(|(m, _)| matches(m)).collect());
    }
    let mut pending: Vec<(u64, M, T)> = items
        .map(|(m, v)| (fixed_hash(m.as_ref()), m, v))
        .filter(|(h, _, _)| *h >= opts.cursor)
        .collect();
    let batch = opts.count.max(len / 32).max(1);
    let next = if pending.len() > batch {
        pending.select_nth_unstable_by_key(batch - 1, |(h, _, _)| *h);
        let last = pending[batch - 1].0;
        // Keep every member sharing the boundary hash, so resuming past it skips none.
        pending.retain(|(h, _, _)| *h <= last);
        last.checked_add(1).unwrap_or(0)
    } else {
        0
    };
    pending.sort_unstable_by_key(|(h, _, _)| *h);
    let out = pending
        .into_iter()
        .filter(|(_, m, _)| matches(m))
        .map(|(_, m, v)| (m, v))
        .collect();
    (next, out)
}

/// A keyspace and a client for the collection families' unit tests.
#[cfg(test)]
pub(crate) mod harness {
    use bytes::{Bytes, BytesMut};

    use crate::command::{execute, Ctx};
    use crate::protocol::Reply;
    use crate::store::Keyspace;

    /// One client on a private keyspace, at a settable time, seed and protocol version.
    pub struct Client {
        pub ks: Keyspace,
        pub now: u64,
        /// The seed every command gets (`Ctx::seed`).
        pub seed: u64,
        pub resp: u8,
    }

    impl Client {
        pub fn new() -> Client {
            Client {
                ks: Keyspace::default(),
                now: 1_000_000,
                seed: 0,
                resp: 2,
            }
        }

        /// Run a command given as space-separated words.
        pub fn run(&mut self, line: &str) -> Reply {
            let args: Vec<Bytes> = line
                .split(' ')
                .map(|w| Bytes::copy_from_slice(w.as_bytes()))
                .collect();
            self.run_args(&args)
        }

        /// Run a command given as arguments.
        pub fn run_args(&mut self, args: &[Bytes]) -> Reply {
            let mut ctx = Ctx {
                ks: &mut self.ks,
                db: 0,
                now_ms: self.now,
                now_us: self.now * 1000,
                seed: self.seed,
                resp: self.resp,
                oom: false,
                scripts: None,
                metrics: None,
                user: None,
                monitored: false,
                error_counted: false,
            };
            execute(&mut ctx, args)
        }

        /// Run a command and encode its reply for the client's protocol version.
        pub fn wire(&mut self, line: &str) -> String {
            let reply = self.run(line);
            let mut out = BytesMut::new();
            reply.encode(self.resp, &mut out);
            String::from_utf8_lossy(&out).into_owned()
        }

        /// Whether `key` exists in db 0.
        pub fn exists(&self, key: &str) -> bool {
            self.ks.dbs[0].contains(key.as_bytes(), self.now)
        }
    }

    /// A bulk reply.
    pub fn bulk(s: &str) -> Reply {
        Reply::Bulk(Bytes::copy_from_slice(s.as_bytes()))
    }

    /// An array of bulk replies.
    pub fn bulks(items: &[&str]) -> Reply {
        Reply::Array(items.iter().map(|s| bulk(s)).collect())
    }

    /// An error reply.
    pub fn err(s: &str) -> Reply {
        Reply::Error(s.to_string())
    }

    /// The WRONGTYPE error reply.
    pub fn wrongtype() -> Reply {
        err(crate::command::args::WRONGTYPE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rng_is_a_fixed_function_of_its_seed() {
        let a: Vec<u64> = (0..4)
            .scan(Rng::new(7, b"k", 3), |r, _| Some(r.next_u64()))
            .collect();
        let b: Vec<u64> = (0..4)
            .scan(Rng::new(7, b"k", 3), |r, _| Some(r.next_u64()))
            .collect();
        assert_eq!(a, b);
        let c: Vec<u64> = (0..4)
            .scan(Rng::new(8, b"k", 3), |r, _| Some(r.next_u64()))
            .collect();
        assert_ne!(a, c);
        // Pinned: a change of algorithm would make replicas of different versions diverge.
        assert_eq!(fixed_hash(b""), mix(0xcbf2_9ce4_8422_2325));
    }

    #[test]
    fn distinct_indices_are_distinct_and_in_range() {
        let mut rng = Rng::new(1, b"x", 0);
        for size in [1usize, 2, 5, 100, 100_000] {
            for count in [0usize, 1, 3, 100, 200_000] {
                let picks = rng.distinct(size, count);
                assert_eq!(picks.len(), count.min(size));
                let mut sorted = picks.clone();
                sorted.sort_unstable();
                sorted.dedup();
                assert_eq!(sorted.len(), picks.len());
                assert!(picks.iter().all(|&i| i < size));
            }
        }
    }

    #[test]
    fn random_picks_follow_the_count_rules() {
        let mut rng = Rng::new(1, b"x", 0);
        assert_eq!(random_picks(&mut rng, 3, 5).unwrap(), vec![0, 1, 2]);
        assert_eq!(random_picks(&mut rng, 3, 2).unwrap().len(), 2);
        assert_eq!(random_picks(&mut rng, 3, -7).unwrap().len(), 7);
        assert!(random_picks(&mut rng, 0, -7).unwrap().is_empty());
        assert!(random_picks(&mut rng, 3, -i64::MAX).is_err());
        assert!(symmetric_int(b"-9223372036854775808").is_err());
        assert_eq!(symmetric_int(b"-9223372036854775807").unwrap(), -i64::MAX);
    }

    fn members(n: usize) -> Vec<Bytes> {
        (0..n).map(|i| Bytes::from(format!("m{i}"))).collect()
    }

    fn opts(cursor: u64, count: usize) -> ScanOptions {
        ScanOptions {
            cursor,
            pattern: None,
            count,
            type_name: None,
        }
    }

    #[test]
    fn small_collections_scan_whole() {
        let m = members(5);
        let (next, out) = scan_step(m.iter().map(|x| (x, ())), m.len(), &opts(0, 1));
        assert_eq!(next, 0);
        assert_eq!(out.len(), 5);
        assert_eq!(out[0].0, &m[0]);
    }

    #[test]
    fn large_scans_survive_removals_between_steps() {
        let mut live = members(1000);
        let mut seen = Vec::new();
        let mut cursor = 0;
        let mut steps = 0;
        loop {
            let (next, out) =
                scan_step(live.iter().map(|x| (x, ())), live.len(), &opts(cursor, 10));
            seen.extend(out.into_iter().map(|(m, _)| m.clone()));
            // Remove something not yet returned and something already returned.
            live.retain(|m| m != &Bytes::from(format!("m{}", steps * 7)));
            steps += 1;
            cursor = next;
            if cursor == 0 {
                break;
            }
        }
        assert!(steps <= 40, "{steps} steps");
        let mut dedup = seen.clone();
        dedup.sort();
        dedup.dedup();
        assert_eq!(dedup.len(), seen.len(), "a member came back twice");
        for m in &live {
            assert!(seen.contains(m), "{m:?} missed");
        }
    }
}
