//! The keyspace: 16 databases of keys, each with an optional millisecond deadline.
//!
//! A database is split into fixed shards by key hash. The shards bound the cost of a
//! table resize (only one small map grows at a time) and give SCAN a cursor that stays
//! valid while keys come and go: the cursor is a shard index, and a key present for the
//! whole scan is returned exactly once. A B-tree ordered by deadline indexes keys with a
//! TTL, so expired keys are found without sampling.
//!
//! Reads treat a key whose deadline has passed as absent; mutable access deletes it. All
//! of this depends only on the `now_ms` handed in, never on a clock (the determinism rule).

pub mod encoding;
pub mod eviction;
pub mod expiry;
pub mod hash;
pub mod list;
pub mod set;
pub mod small;
pub mod snapshot;
pub mod value;
mod varint;
pub mod zset;

use std::collections::HashMap;

use hashbrown::hash_map::RawEntryMut;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;

pub use small::{Key, SmallBytes};
pub use value::{StrValue, Value};

use crate::pubsub::notify;
use eviction::AccessClock;
use expiry::ExpiryIndex;

/// Number of databases (`SELECT 0..15`).
pub const DATABASES: usize = 16;
/// Shards per database; a SCAN step returns one shard's keys (or more, to reach COUNT).
pub const SHARDS: usize = 1024;

/// The hasher for all maps, keyed once per process (HashDoS resistance). A key's hash picks
/// its shard, and RANDOMKEY, SCAN and KEYS walk the shards in order, so every replica of one
/// Raft group must key it alike: a node with a cluster secret keys it from the secret
/// ([`seed_key_hasher`], before any key is stored), which every member shares and no client
/// knows; an in-memory node, the only copy of its data, takes random keys.
#[derive(Clone, Copy, Default, Debug)]
pub struct KeyHasher;

static HASHER_STATE: OnceLock<ahash::RandomState> = OnceLock::new();

fn process_state() -> &'static ahash::RandomState {
    HASHER_STATE.get_or_init(ahash::RandomState::new)
}

/// Key the process's [`KeyHasher`] from the cluster secret, so that every member of one
/// Raft group puts each key in the same shard. Errors when a key was hashed already (the
/// keying would then come too late to hold for every key).
pub fn seed_key_hasher(secret: &[u8]) -> Result<(), String> {
    let word = |label: &str| {
        let mut h = sha1_smol::Sha1::new();
        h.update(b"tollgate key hasher ");
        h.update(label.as_bytes());
        h.update(secret);
        let d = h.digest().bytes();
        u64::from_le_bytes(d[..8].try_into().expect("a SHA-1 digest has 20 bytes"))
    };
    let state = ahash::RandomState::with_seeds(word("k0"), word("k1"), word("k2"), word("k3"));
    HASHER_STATE
        .set(state)
        .map_err(|_| "the key hasher was used before the cluster secret keyed it".to_string())
}

impl BuildHasher for KeyHasher {
    type Hasher = ahash::AHasher;
    // Inlined into each table's hashing (a set's or hash's member, the keyspace's key):
    // without it, a build that split the code differently called `hash_one` out of line
    // on SADD's path (+1.9% instructions a SADD, branch hmem21).
    #[inline]
    fn build_hasher(&self) -> ahash::AHasher {
        process_state().build_hasher()
    }
}

/// The hash of `key`, computed once per keyspace operation: it picks the shard and then
/// finds the key inside it (raw-entry lookups take the hash instead of hashing again).
/// It must equal the hash the maps compute themselves when they grow (`Bytes` hashes as
/// its byte slice does, length prefix included), or a key would be lost after a resize.
#[inline]
fn hash_key(key: &[u8]) -> u64 {
    KeyHasher.hash_one(key)
}

/// [`hash_key`], always inlined: the expiry pass hashes each key it finds by its hash,
/// and `BuildHasher::hash_one` as a call there cost 8-10 instructions a key (callgrind,
/// `bench/expiry_instructions.sh`).
#[inline(always)]
#[allow(clippy::manual_hash_one)] // `hash_one` is what this spells out to inline it
fn hash_key_inlined(key: &[u8]) -> u64 {
    let mut state = KeyHasher.build_hasher();
    key.hash(&mut state);
    state.finish()
}

/// The shard of a key hash: bits 32..42. A shard map uses the top 7 bits of the same hash
/// as a slot's control byte and the low bits as its position; had the shard come from
/// either end, every key of a shard would share those bits and a lookup would compare the
/// key against each slot of a probed group.
fn shard_index(hash: u64) -> usize {
    (hash >> 32) as usize % SHARDS
}

/// The slot of `key` in its shard, found with one hash of the key. A free function over
/// the shards alone, so callers keep the other fields of `Db` free to update meanwhile.
/// Always inlined: whether the compiler inlined it into `Db::modify` changed from one
/// build to the next (with 80-byte slots, and after the connection's fast path), and as
/// a call it cost INCR 35-43 instructions per request (callgrind).
#[inline(always)]
fn slot<'a>(shards: &'a mut [Shard], key: &[u8]) -> (u64, RawEntryMut<'a, Key, Entry, KeyHasher>) {
    let h = hash_key(key);
    let entry = shards[shard_index(h)]
        .raw_entry_mut()
        .from_key_hashed_nocheck(h, key);
    (h, entry)
}

/// Store `value` until `deadline` in the slot of the expired entry `entry` at `k`, as a
/// new key (a new key's access information): the reuse [`Db::get_or_create`] and
/// [`Db::modify`] share. Always inlined: `modify` is INCR's path.
#[inline(always)]
fn reuse_expired(
    expires: &mut ExpiryIndex,
    clock: &AccessClock,
    h: u64,
    k: &Key,
    entry: &mut Entry,
    value: Value,
    deadline: Option<u64>,
) {
    entry.value = value;
    let old = entry.set_deadline(deadline);
    expires.moved_hashed(h, old, deadline);
    k.access().store(clock.initial(), Ordering::Relaxed);
}

/// Insert a new key `key` (hash `h`) holding `value` until `deadline` into the vacant
/// slot `v`, counted in `len`: the insertion [`Db::get_or_create`] and [`Db::modify`]
/// share. The key gets its own copy (arguments are slices of the request frame), inline
/// when short. Always inlined: `modify` is INCR's path.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn insert_new<'a>(
    len: &mut usize,
    expires: &mut ExpiryIndex,
    clock: &AccessClock,
    v: hashbrown::hash_map::RawVacantEntryMut<'a, Key, Entry, KeyHasher>,
    h: u64,
    key: &[u8],
    value: Value,
    deadline: Option<u64>,
) -> &'a mut Entry {
    let mut entry = Entry::new(value);
    entry.set_deadline(deadline);
    let k = Key::new(key);
    k.access().store(clock.initial(), Ordering::Relaxed);
    let (_, entry) = v.insert_hashed_nocheck(h, k, entry);
    *len += 1;
    expires.moved_hashed(h, None, deadline);
    entry
}

/// A key's value and deadline (its LRU/LFU access information is in its [`Key`]).
///
/// 48 bytes: the deadline is a plain `u64` (`NO_DEADLINE` for none) rather than an
/// `Option<u64>` (16 bytes).
#[derive(Clone)]
pub struct Entry {
    /// The value.
    pub value: Value,
    deadline: u64,
}

/// `Entry::deadline` of a key without one. No deadline can be this late: commands
/// refuse times past `i64::MAX` milliseconds.
const NO_DEADLINE: u64 = u64::MAX;

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("value", &self.value)
            .field("expires_at", &self.expires_at())
            .finish()
    }
}

impl Entry {
    /// A value without a deadline.
    pub fn new(value: Value) -> Entry {
        Entry {
            value,
            deadline: NO_DEADLINE,
        }
    }

    /// The deadline in unix milliseconds, if any.
    pub fn expires_at(&self) -> Option<u64> {
        (self.deadline != NO_DEADLINE).then_some(self.deadline)
    }

    /// Replace the deadline, returning the old one.
    fn set_deadline(&mut self, deadline: Option<u64>) -> Option<u64> {
        let new = deadline.map_or(NO_DEADLINE, |t| t.min(NO_DEADLINE - 1));
        let old = self.expires_at();
        self.deadline = new;
        old
    }

    /// Whether the deadline has passed. As in Redis (`keyIsExpired`: `now > when`), a key
    /// lives through the millisecond of its deadline: `PTTL` then answers 0, not -2.
    /// (Setting a deadline at or before now deletes the key at once: `EXPIRE` and friends.)
    fn is_expired(&self, now_ms: u64) -> bool {
        self.deadline < now_ms
    }
}

/// A flag set when a watched key is modified (WATCH ... EXEC).
pub type WatchFlag = Arc<AtomicBool>;

type Shard = hashbrown::HashMap<Key, Entry, KeyHasher>;

/// Bytes of one slot of a shard's table (the key and its entry), besides its control byte:
/// what MEMORY USAGE and the eviction estimate charge a key for its place in the keyspace.
pub const SLOT_BYTES: usize = std::mem::size_of::<(Key, Entry)>();

/// Bytes a key costs (MEMORY USAGE, and what evicting it is estimated to free): its slot,
/// the key's own allocation when it is too long to sit in the slot, and the value's heap.
pub fn key_memory(key: &[u8], entry: &Entry) -> usize {
    let key_heap = if key.len() > small::KEY_INLINE {
        key.len()
    } else {
        0
    };
    SLOT_BYTES + key_heap + entry.value.memory_estimate()
}

/// One database.
#[derive(Debug)]
pub struct Db {
    shards: Box<[Shard]>,
    expires: ExpiryIndex,
    len: usize,
    watched: HashMap<Bytes, Vec<WatchFlag>, KeyHasher>,
    /// Shared with the other databases of the keyspace.
    clock: Arc<AccessClock>,
    /// Where the `new`, `expired` and `evicted` keyspace events go (the keyspace's hub).
    pubsub: Arc<crate::pubsub::Hub>,
    /// This database's number, for those events' channels.
    index: usize,
}

impl Default for Db {
    fn default() -> Self {
        Db::with_clock(Arc::default())
    }
}

impl Db {
    /// An empty database writing access information with `clock`.
    fn with_clock(clock: Arc<AccessClock>) -> Db {
        Db {
            shards: (0..SHARDS).map(|_| Shard::default()).collect(),
            expires: ExpiryIndex::default(),
            len: 0,
            watched: HashMap::default(),
            clock,
            pubsub: Arc::default(),
            index: 0,
        }
    }

    /// Fire keyspace event `event` of class `class` on `key` (when enabled).
    fn event(&self, class: u32, event: &str, key: &[u8]) {
        key_event(&self.pubsub, self.index, class, event, key);
    }

    /// The live entry for `key`, or None if absent or expired. Counts as a use of the key
    /// for LRU/LFU.
    pub fn get(&self, key: &[u8], now_ms: u64) -> Option<&Entry> {
        let (k, entry) = self.get_slot(key).filter(|(_, e)| !e.is_expired(now_ms))?;
        self.clock.touch(k);
        Some(entry)
    }

    /// [`Db::get`] for a command that reads the key (Redis's `lookupKeyRead`): counts a
    /// keyspace hit or miss. Writes, and a read that Redis does with `lookupKeyWrite`
    /// (PFCOUNT of one key, blocking pops, SMOVE, ...), use [`Db::get`], which does not.
    #[inline]
    pub fn read(&self, key: &[u8], now_ms: u64) -> Option<&Entry> {
        let entry = self.get(key, now_ms);
        self.clock.count_read(entry.is_some());
        entry
    }

    /// [`Db::read`] without counting a use for LRU/LFU (Redis's `LOOKUP_NOTOUCH`): EXISTS,
    /// TYPE, the TTL family and OBJECT look at a key this way, and still count a keyspace
    /// hit or miss.
    pub fn read_untouched(&self, key: &[u8], now_ms: u64) -> Option<&Entry> {
        self.read_untouched_slot(key, now_ms).map(|(_, e)| e)
    }

    /// [`Db::read_untouched`] with the stored key, which holds the access information
    /// (OBJECT IDLETIME and FREQ).
    pub fn read_untouched_slot(&self, key: &[u8], now_ms: u64) -> Option<(&Key, &Entry)> {
        let slot = self.get_slot(key).filter(|(_, e)| !e.is_expired(now_ms));
        self.clock.count_read(slot.is_some());
        slot
    }

    /// The entry for `key`, expired or not, without counting a use (eviction and
    /// introspection look at keys this way).
    pub fn peek(&self, key: &[u8]) -> Option<&Entry> {
        self.get_raw(key)
    }

    /// The entry for `key`, expired or not, without counting a use.
    fn get_raw(&self, key: &[u8]) -> Option<&Entry> {
        self.get_slot(key).map(|(_, e)| e)
    }

    /// The stored key and entry for `key`, expired or not, without counting a use.
    /// Always inlined: when the deadline index stopped calling [`Db::get_raw`], the
    /// compiler made this a call on GET's path (+22 instructions a GET, callgrind).
    #[inline(always)]
    fn get_slot(&self, key: &[u8]) -> Option<(&Key, &Entry)> {
        let h = hash_key(key);
        self.shards[shard_index(h)]
            .raw_entry()
            .from_key_hashed_nocheck(h, key)
    }

    /// Load `key`'s slot, its stored key bytes and the start of a string value into the
    /// cache, ahead of the command that will use them. A pipelined batch warms all its
    /// keys first: these lookups do not depend on each other, so the processor overlaps
    /// their cache misses, where running the commands one by one waits for each miss in
    /// turn (with many keys, those waits are a large part of a short command's cost).
    /// Nothing observable changes.
    pub fn warm(&self, key: &[u8]) {
        if let Some(Entry {
            value: Value::Str(StrValue::Raw(b)),
            ..
        }) = self.get_raw(key)
        {
            std::hint::black_box(b.first().copied());
        }
    }

    /// Bytes of this database's tables that hold no data: the hash tables' control bytes,
    /// empty slots and, in each occupied slot, what is not the key or the value (the
    /// deadline; the access information sits in the key's spare bytes), plus the expiry index's sets and the WATCH
    /// table. A slot's key and value (inline when short, else a pointer to heap bytes)
    /// are data. What Redis counts as a database's overhead (its two dicts, whose
    /// entries point to the keys and values) in INFO `used_memory_overhead`.
    pub fn table_bytes(&self) -> usize {
        const DATA: usize = std::mem::size_of::<Key>() + std::mem::size_of::<Value>();
        let shards: usize = self
            .shards
            .iter()
            .map(|s| s.allocation_size() - s.len() * DATA)
            .sum();
        let watched =
            self.watched.capacity() * (std::mem::size_of::<(Bytes, Vec<WatchFlag>)>() + 1);
        shards + std::mem::size_of_val(&*self.shards) + self.expires.table_bytes() + watched
    }

    /// Whether `key` exists and is live.
    pub fn contains(&self, key: &[u8], now_ms: u64) -> bool {
        self.get(key, now_ms).is_some()
    }

    /// Mutable access to a live entry; an expired entry is deleted first.
    /// Marks watchers of the key dirty, since the caller may modify it.
    pub fn get_mut(&mut self, key: &[u8], now_ms: u64) -> Option<&mut Entry> {
        self.signal_modified(key);
        let (h, slot) = slot(&mut self.shards, key);
        match slot {
            RawEntryMut::Occupied(o) if o.get().is_expired(now_ms) => {
                // Watchers were marked above.
                let (k, entry) = o.remove_entry();
                uncount(&mut self.len, &mut self.expires, h, &entry);
                key_event(&self.pubsub, self.index, notify::EXPIRED, "expired", &k);
                None
            }
            RawEntryMut::Occupied(o) => {
                let (k, entry) = o.into_key_value();
                self.clock.touch(k);
                Some(entry)
            }
            RawEntryMut::Vacant(_) => None,
        }
    }

    /// The live entry at `key` for a change in place, in one lookup; None when the key is
    /// absent or expired (an expired entry is left to [`Db::get_mut`] and the other paths
    /// that delete it with its event). Counts as a use of the key; watchers are not marked:
    /// a caller that changes the value calls [`Db::signal_modified`].
    pub fn live_mut(&mut self, key: &[u8], now_ms: u64) -> Option<&mut Entry> {
        match slot(&mut self.shards, key).1 {
            RawEntryMut::Occupied(o) if !o.get().is_expired(now_ms) => {
                let (k, entry) = o.into_key_value();
                self.clock.touch(k);
                Some(entry)
            }
            _ => None,
        }
    }

    /// The live entry at `key` for editing in place or, when the key is absent or expired,
    /// a new entry holding `create()` (an expired entry's slot is reused), in one lookup;
    /// with whether it was created. Watchers are not marked: a caller that changes the
    /// value calls [`Db::signal_modified`].
    pub fn get_or_create(
        &mut self,
        key: &[u8],
        now_ms: u64,
        create: impl FnOnce() -> Value,
    ) -> (&mut Entry, bool) {
        let (h, entry) = slot(&mut self.shards, key);
        match entry {
            RawEntryMut::Occupied(o) => {
                let (k, entry) = o.into_key_value();
                if !entry.is_expired(now_ms) {
                    self.clock.touch(k);
                    return (entry, false);
                }
                reuse_expired(&mut self.expires, &self.clock, h, k, entry, create(), None);
                key_event(&self.pubsub, self.index, notify::EXPIRED, "expired", key);
                key_event(&self.pubsub, self.index, notify::NEW, "new", key);
                (entry, true)
            }
            RawEntryMut::Vacant(v) => {
                let entry = insert_new(
                    &mut self.len,
                    &mut self.expires,
                    &self.clock,
                    v,
                    h,
                    key,
                    create(),
                    None,
                );
                key_event(&self.pubsub, self.index, notify::NEW, "new", key);
                (entry, true)
            }
        }
    }

    /// Read-modify-write of `key` in one lookup. `f` sees the live entry (None when the key
    /// is absent or expired) and returns what to store: `Some((value, deadline))` replaces
    /// the value and deadline (an expired entry's slot is reused), `None` leaves the key as
    /// it is. Watchers of the key are marked dirty only when it is written.
    pub fn modify<T>(
        &mut self,
        key: &[u8],
        now_ms: u64,
        f: impl FnOnce(Option<&Entry>) -> (Option<(Value, Option<u64>)>, T),
    ) -> T {
        let (h, entry) = slot(&mut self.shards, key);
        let mut created = false;
        let mut expired = false;
        let (wrote, out) = match entry {
            RawEntryMut::Occupied(mut o) => {
                let live = !o.get().is_expired(now_ms);
                let (write, out) = f(if live { Some(o.get()) } else { None });
                let wrote = write.is_some();
                if let Some((value, deadline)) = write {
                    let (k, entry) = o.get_key_value_mut();
                    if live {
                        entry.value = value;
                        let old = entry.set_deadline(deadline);
                        self.expires.moved_hashed(h, old, deadline);
                        self.clock.touch(k);
                    } else {
                        // An expired key's slot reused: a new key.
                        reuse_expired(&mut self.expires, &self.clock, h, k, entry, value, deadline);
                        expired = true;
                        created = true;
                    }
                } else if live {
                    self.clock.touch(o.key());
                }
                (wrote, out)
            }
            RawEntryMut::Vacant(v) => {
                let (write, out) = f(None);
                let wrote = write.is_some();
                if let Some((value, deadline)) = write {
                    insert_new(
                        &mut self.len,
                        &mut self.expires,
                        &self.clock,
                        v,
                        h,
                        key,
                        value,
                        deadline,
                    );
                    created = true;
                }
                (wrote, out)
            }
        };
        if wrote {
            self.signal_modified(key);
        }
        if expired {
            self.event(notify::EXPIRED, "expired", key);
        }
        if created {
            self.event(notify::NEW, "new", key);
        }
        out
    }

    /// Insert or replace `key` with a value and no deadline.
    pub fn set(&mut self, key: &[u8], value: Value) {
        self.insert(key, Entry::new(value));
    }

    /// Insert or replace `key` with an entry (keeping the entry's deadline).
    pub fn insert(&mut self, key: &[u8], entry: Entry) {
        // Whatever is there, live or expired, is replaced: `modify` writes in place (a
        // replaced key keeps its allocation) or inserts a copy of the key.
        let deadline = entry.expires_at();
        self.modify(key, 0, |_| (Some((entry.value, deadline)), ()));
    }

    /// Remove `key`; returns the entry if it was live.
    pub fn remove(&mut self, key: &[u8], now_ms: u64) -> Option<Entry> {
        let entry = self.remove_raw(key)?;
        if entry.is_expired(now_ms) {
            self.event(notify::EXPIRED, "expired", key);
            return None;
        }
        Some(entry)
    }

    /// Remove `key` if it holds an empty collection (Redis never keeps those); returns
    /// whether it did.
    pub fn remove_if_empty(&mut self, key: &[u8]) -> bool {
        let empty = self
            .get_raw(key)
            .is_some_and(|e| e.value.is_empty_collection());
        if empty {
            self.remove_raw(key);
        }
        empty
    }

    /// Set or clear the deadline of an existing key. Returns false if the key is absent.
    pub fn set_expiry(&mut self, key: &[u8], deadline: Option<u64>) -> bool {
        self.signal_modified(key);
        let (h, entry) = slot(&mut self.shards, key);
        let RawEntryMut::Occupied(mut o) = entry else {
            return false;
        };
        let old = o.get_mut().set_deadline(deadline);
        self.expires.moved_hashed(h, old, deadline);
        true
    }

    /// Set `key`'s access information as RESTORE's IDLETIME / FREQ ask (see
    /// [`AccessClock::hinted`]); nothing happens to an absent key or without a hint for the
    /// current mode.
    pub fn hint_access(&self, key: &[u8], idle_secs: Option<u64>, freq: Option<u8>) {
        if let (Some((k, _)), Some(access)) =
            (self.get_slot(key), self.clock.hinted(idle_secs, freq))
        {
            k.access().store(access, Ordering::Relaxed);
        }
    }

    /// Up to `limit` keys whose deadline has passed at `now_ms`, copied for an expiry entry
    /// (a cluster's leader proposes them; each node deletes them as it applies the entry).
    /// The deadline index offers them ([`ExpiryIndex::scan`]); each costs one look-up by its
    /// hash.
    pub fn due_keys(&mut self, now_ms: u64, limit: usize) -> Vec<Bytes> {
        let Db {
            shards, expires, ..
        } = self;
        let mut keys = Vec::new();
        expires.scan(now_ms, limit, |second, h, n| {
            let before = keys.len();
            let shard = &shards[shard_index(h)];
            let due = keys_in_second(shard, h, second, n, hash_key_inlined)
                .filter(|(_, e)| e.is_expired(now_ms))
                .map(|(k, _)| k.to_bytes())
                .take(limit - before);
            keys.extend(due);
            keys.len() - before
        });
        keys
    }

    /// The keys the deadline index holds as `(second, h, n)` (their hash, the second of
    /// their deadline and how many they are; see [`ExpiryIndex::sample_from`]).
    fn keys_in_second(
        &self,
        second: u64,
        h: u64,
        n: usize,
    ) -> impl Iterator<Item = (&Key, &Entry)> + '_ {
        keys_in_second(&self.shards[shard_index(h)], h, second, n, hash_key)
    }

    /// Delete up to `limit` expired keys; returns how many were deleted. Each candidate
    /// the deadline index offers (a key's hash) costs one lookup by that hash, which
    /// checks the key's deadline and deletes it ([`ExpiryIndex::purge`], [`expire_hashed`]).
    /// Never inlined: called once a database per expiry cycle, it is where
    /// `bench/expiry_instructions.sh` starts counting (inlined into the cycle by the fat-LTO
    /// release profile, the bench had nothing to count).
    #[inline(never)]
    pub fn delete_expired(&mut self, now_ms: u64, limit: usize) -> usize {
        let Db {
            shards,
            expires,
            len,
            watched,
            pubsub,
            index,
            ..
        } = self;
        let mut deleted = 0;
        expires.purge(now_ms, limit, |second, h, n| {
            let shard = &mut shards[shard_index(h)];
            expire_hashed(shard, h, second, n, now_ms, hash_key_inlined, |k| {
                *len -= 1;
                deleted += 1;
                signal_watchers(watched, k);
                key_event(pubsub, *index, notify::EXPIRED, "expired", k);
            })
        });
        deleted
    }

    /// Number of keys, including expired ones not yet deleted (as Redis's DBSIZE).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the database holds no keys.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of keys with a deadline.
    pub fn expires_count(&self) -> usize {
        self.expires.len()
    }

    /// The average time to live of the keys with a deadline at `now_ms`, in milliseconds
    /// (INFO keyspace's `avg_ttl`; see `ExpiryIndex::average_ttl_ms`).
    pub fn average_ttl_ms(&self, now_ms: u64) -> u64 {
        self.expires.average_ttl_ms(now_ms)
    }

    /// Delete every key (FLUSHDB, FLUSHALL at `now_ms`). As Redis's
    /// `touchAllWatchedKeysInDb(db, NULL)`, only the watchers of keys that are live go
    /// dirty: a watched key that is absent or already expired does not change.
    pub fn clear(&mut self, now_ms: u64) {
        self.touch_replaced(None, now_ms);
        // Fresh maps rather than cleared ones: like Redis's FLUSHALL, this gives the
        // tables' memory back instead of keeping their capacity.
        self.shards.iter_mut().for_each(|s| *s = Shard::default());
        self.expires.clear();
        self.len = 0;
    }

    /// A live key picked uniformly at random by `r` (a random word), or None when no key is
    /// live: the shard is picked with probability proportional to its size, and within it
    /// the key whose fixed hash mixed with `r` is least (each equally likely to be). O(number
    /// of shards + the picked shard's size).
    pub fn random_key(&self, r: u64, now_ms: u64) -> Option<&Key> {
        let total = self.shards.iter().map(|s| s.len()).sum::<usize>();
        if total == 0 {
            return None;
        }
        let mut at = ((u128::from(r) * total as u128) >> 64) as usize;
        let mut first = 0;
        for (i, s) in self.shards.iter().enumerate() {
            if at < s.len() {
                first = i;
                break;
            }
            at -= s.len();
        }
        // A shard whose keys have all expired passes the pick on to the next.
        (0..self.shards.len())
            .map(|i| (first + i) % self.shards.len())
            .find_map(|i| {
                self.shard_entries(i, now_ms)
                    .map(|(k, _)| k)
                    .min_by_key(|k| {
                        crate::command::collection::mix(
                            crate::command::collection::fixed_hash(k) ^ r,
                        )
                    })
            })
    }

    /// Visit live entries of shard `shard`.
    pub fn shard_entries(
        &self,
        shard: usize,
        now_ms: u64,
    ) -> impl Iterator<Item = (&Key, &Entry)> + '_ {
        self.shards
            .get(shard)
            .into_iter()
            .flat_map(|s| s.iter())
            .filter(move |(_, e)| !e.is_expired(now_ms))
    }

    /// All live entries (order is unspecified; callers sort where it matters).
    pub fn entries(&self, now_ms: u64) -> impl Iterator<Item = (&Key, &Entry)> + '_ {
        self.shards
            .iter()
            .flat_map(|s| s.iter())
            .filter(move |(_, e)| !e.is_expired(now_ms))
    }

    /// Register a WATCH flag on `key`.
    pub fn watch(&mut self, key: Bytes, flag: WatchFlag) {
        self.watched.entry(key).or_default().push(flag);
    }

    /// Remove a WATCH flag from `key`.
    pub fn unwatch(&mut self, key: &[u8], flag: &WatchFlag) {
        if let Some(list) = self.watched.get_mut(key) {
            list.retain(|f| !Arc::ptr_eq(f, flag));
            if list.is_empty() {
                self.watched.remove(key);
            }
        }
    }

    /// Whether `key` is present and not expired at `now_ms` (not counted as a use).
    fn is_live(&self, key: &[u8], now_ms: u64) -> bool {
        self.get_raw(key).is_some_and(|e| !e.is_expired(now_ms))
    }

    /// Redis's `touchAllWatchedKeysInDb`: before this database's keys are replaced by
    /// `other`'s (SWAPDB) or by none (FLUSHDB), mark the watchers of each watched key that
    /// is live here or there, the keys whose content the replacement changes.
    fn touch_replaced(&self, other: Option<&Db>, now_ms: u64) {
        for (key, flags) in &self.watched {
            if self.is_live(key, now_ms) || other.is_some_and(|o| o.is_live(key, now_ms)) {
                flags.iter().for_each(|f| f.store(true, Ordering::Relaxed));
            }
        }
    }

    /// Mark the WATCHes of `key` dirty: it was changed, or is about to be (Redis's
    /// `signalModifiedKey`). Callers that edit an entry in place ([`Db::get_or_create`])
    /// call it themselves.
    pub fn signal_modified(&self, key: &[u8]) {
        signal_watchers(&self.watched, key);
    }

    /// Delete `key` if its deadline has passed at `now_ms` (a replica applies the leader's
    /// expiry entries with this, so every node deletes exactly the keys expired at that time).
    /// One look-up and one hash of the key for both the check and the deletion: each key
    /// of every expiry entry comes through here on every node.
    pub fn purge_if_expired(&mut self, key: &[u8], now_ms: u64) {
        if self.remove_if(key, |e| e.is_expired(now_ms)).is_some() {
            self.event(notify::EXPIRED, "expired", key);
        }
    }

    fn remove_raw(&mut self, key: &[u8]) -> Option<Entry> {
        self.remove_if(key, |_| true)
    }

    /// Remove `key` if its entry (expired or not) passes `doomed`; returns the entry removed.
    /// The key is hashed once, for the shard's look-up and the deadline index both.
    #[inline(always)]
    fn remove_if(&mut self, key: &[u8], doomed: impl FnOnce(&Entry) -> bool) -> Option<Entry> {
        let h = hash_key(key);
        let shard = &mut self.shards[shard_index(h)];
        let RawEntryMut::Occupied(o) = shard.raw_entry_mut().from_key_hashed_nocheck(h, key) else {
            return None;
        };
        if !doomed(o.get()) {
            return None;
        }
        let (k, entry) = o.remove_entry();
        shrink_if_sparse(shard);
        signal_watchers(&self.watched, &k);
        uncount(&mut self.len, &mut self.expires, h, &entry);
        Some(entry)
    }
}

/// [`Db::signal_modified`] on the watch table alone (for callers that hold other fields).
#[inline]
fn signal_watchers(watched: &HashMap<Bytes, Vec<WatchFlag>, KeyHasher>, key: &[u8]) {
    if !watched.is_empty() {
        if let Some(flags) = watched.get(key) {
            flags.iter().for_each(|f| f.store(true, Ordering::Relaxed));
        }
    }
}

/// Give a shard's table memory back once it is at most an eighth full (as Redis resizes a
/// dict below a tenth), so that deleting keys frees their slots, not only their values.
/// Halving the room each time keeps a shard that shrinks and grows again from rehashing
/// on every call.
fn shrink_if_sparse(shard: &mut Shard) {
    let capacity = shard.capacity();
    if capacity > 8 && shard.len() * 8 < capacity {
        shard.shrink_to(shard.len() * 2);
    }
}

/// The bookkeeping after an entry of key hash `h` left its shard: the key count and the
/// deadline index, on the fields alone (for callers that still hold a shard borrow).
fn uncount(len: &mut usize, expires: &mut ExpiryIndex, h: u64, entry: &Entry) {
    *len -= 1;
    if let Some(t) = entry.expires_at() {
        expires.remove_hashed(t, h);
    }
}

/// Whether `entry`'s deadline falls in the deadline second `second`.
#[inline]
fn deadline_in(entry: &Entry, second: u64) -> bool {
    entry.expires_at().map(expiry::second_of) == Some(second)
}

/// The keys of `shard` whose hash is `h` and whose deadline falls in `second`: the `n` keys
/// the deadline index holds as `(second, h)`. `hash` is [`hash_key`] (tests give keys
/// hashes of their own, to make two keys share one). One lookup finds the key when `n`
/// is 1 and the first key of hash `h` has its deadline in `second`, which is all but
/// always; otherwise (two keys of one 64-bit hash) the shard is walked.
fn keys_in_second<'a>(
    shard: &'a Shard,
    h: u64,
    second: u64,
    n: usize,
    hash: impl Fn(&[u8]) -> u64 + 'a,
) -> impl Iterator<Item = (&'a Key, &'a Entry)> + 'a {
    let one = shard
        .raw_entry()
        .from_hash(h, |k| hash(k) == h)
        .filter(|(_, e)| n == 1 && deadline_in(e, second));
    let all = one.is_none().then(move || {
        shard
            .iter()
            .filter(move |(k, e)| deadline_in(e, second) && hash(k) == h)
    });
    one.into_iter().chain(all.into_iter().flatten())
}

/// Delete from `shard` the keys of [`keys_in_second`] whose deadline has passed at
/// `now_ms`, showing each to `deleted` before it is dropped; answers how many of them are left (not due yet),
/// what the deadline index keeps of `(second, h)`. A key of the usual case costs one
/// lookup by its hash and one hash of the key found (as the index held copies of the
/// keys, it hashed each of them for that lookup).
fn expire_hashed(
    shard: &mut Shard,
    h: u64,
    second: u64,
    n: usize,
    now_ms: u64,
    hash: impl Fn(&[u8]) -> u64,
    mut deleted: impl FnMut(&Key),
) -> usize {
    if n == 1 {
        match shard.raw_entry_mut().from_hash(h, |k| hash(k) == h) {
            RawEntryMut::Occupied(o) if deadline_in(o.get(), second) => {
                if !o.get().is_expired(now_ms) {
                    return 1;
                }
                let (k, entry) = o.remove_entry();
                shrink_if_sparse(shard);
                deleted(&k);
                drop((k, entry));
                return 0;
            }
            // Not in the keyspace: nothing to delete, nothing for the index to keep.
            RawEntryMut::Vacant(_) => return 0,
            // Another key of hash `h` came first: walk them all.
            RawEntryMut::Occupied(_) => {}
        }
    }
    let keys: Vec<Key> = keys_in_second(shard, h, second, usize::MAX, &hash)
        .map(|(k, _)| k.clone())
        .collect();
    let mut left = 0;
    for k in keys {
        let RawEntryMut::Occupied(o) = shard.raw_entry_mut().from_key_hashed_nocheck(h, &k[..])
        else {
            continue;
        };
        if !o.get().is_expired(now_ms) {
            left += 1;
            continue;
        }
        let (k, entry) = o.remove_entry();
        shrink_if_sparse(shard);
        deleted(&k);
        drop((k, entry));
    }
    left
}

/// [`Db::event`] on the fields alone (for callers that still hold a shard borrow).
fn key_event(hub: &crate::pubsub::Hub, db: usize, class: u32, event: &str, key: &[u8]) {
    // Every deletion of an expired key fires `expired` here (`class` is a constant at each
    // call, so this test folds away): INFO `expired_keys` counts them all.
    if class == notify::EXPIRED {
        hub.expired
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    notify::notify(hub, class, event, key, db);
}

/// All databases.
#[derive(Debug)]
pub struct Keyspace {
    /// The 16 databases.
    pub dbs: Vec<Db>,
    /// This node's pub/sub subscribers: PUBLISH and keyspace events, which run while the
    /// keyspace is applied to, deliver through it (delivery changes no keyspace state).
    pub pubsub: Arc<crate::pubsub::Hub>,
    /// What OBJECT ENCODING and REFCOUNT judge by: the engine's copy of the configured
    /// thresholds (`Engine::set_object_settings`), shared like `pubsub`. Changes no state
    /// and no reply of a write.
    pub object: Arc<parking_lot::RwLock<encoding::ObjectSettings>>,
    /// The thresholds of the compact encodings (shared with the engine's configuration).
    pub encodings: Arc<encoding::Encodings>,
    /// `hll-sparse-max-bytes`: the longest sparse HyperLogLog before it becomes dense
    /// (a setting, not data: kept when the databases are replaced).
    pub hll_sparse_max_bytes: usize,
    /// `min-replicas-to-write` is set (with a nonzero `min-replicas-max-lag`) on a
    /// standalone server, which has no replica to count: writes are refused with
    /// [`NOREPLICAS`], as on a Redis primary without enough good replicas. Always false on
    /// a Raft node (CONFIG refuses the setting there), so replicas never differ by it.
    pub no_good_replicas: bool,
}

/// Redis's refusal of a write while `min-replicas-to-write` is not met.
pub const NOREPLICAS: &str = "NOREPLICAS Not enough good replicas to write.";

/// `hll-sparse-max-bytes`'s default.
pub const HLL_SPARSE_MAX_BYTES: usize = 3000;

impl Default for Keyspace {
    fn default() -> Self {
        Keyspace::with_clock(Arc::default())
    }
}

impl Keyspace {
    /// Empty databases writing access information with `clock`.
    pub fn with_clock(clock: Arc<AccessClock>) -> Keyspace {
        let mut ks = Keyspace {
            dbs: (0..DATABASES)
                .map(|_| Db::with_clock(clock.clone()))
                .collect(),
            pubsub: Arc::default(),
            object: Arc::default(),
            encodings: Arc::default(),
            hll_sparse_max_bytes: HLL_SPARSE_MAX_BYTES,
            no_good_replicas: false,
        };
        let hub = ks.pubsub.clone();
        ks.share_pubsub(&hub);
        ks
    }

    /// Deliver messages and keyspace events through `hub` from now on (a keyspace restored
    /// from a snapshot takes over the engine's).
    pub fn share_pubsub(&mut self, hub: &Arc<crate::pubsub::Hub>) {
        self.pubsub = hub.clone();
        for (i, db) in self.dbs.iter_mut().enumerate() {
            db.pubsub = hub.clone();
            db.index = i;
        }
    }

    /// The clock and mode of the LRU/LFU access information.
    pub fn clock(&self) -> &Arc<AccessClock> {
        &self.dbs[0].clock
    }

    /// Write access information with `clock` from now on (a keyspace restored from a
    /// snapshot takes over the engine's).
    pub fn share_clock(&mut self, clock: &Arc<AccessClock>) {
        for db in &mut self.dbs {
            db.clock = clock.clone();
        }
    }

    /// Delete `key` of database `db` to free memory (wherever its deadline is); returns
    /// whether it was there. Watchers of the key see it change.
    pub fn evict(&mut self, db: usize, key: &[u8]) -> bool {
        let Some(d) = self.dbs.get_mut(db) else {
            return false;
        };
        let evicted = d.remove_raw(key).is_some();
        if evicted {
            d.event(notify::EVICTED, "evicted", key);
        }
        evicted
    }

    /// [`Db::table_bytes`] of all databases.
    pub fn table_bytes(&self) -> usize {
        self.dbs.iter().map(Db::table_bytes).sum()
    }

    /// Total number of keys in all databases.
    pub fn total_keys(&self) -> usize {
        self.dbs.iter().map(Db::len).sum()
    }

    /// SWAPDB: exchange the keys (values, deadlines, key counts) of databases `a` and `b`
    /// at `now_ms`, as Redis's `dbSwapDatabases`. What belongs to the clients stays with the
    /// database number: WATCHes and blocked clients keep waiting on the same `(db, key)`.
    /// So, as Redis's `touchAllWatchedKeysInDb` does, a watched key that is live on either
    /// side before the swap is touched (its content changes or it appears or disappears;
    /// a key that is absent or expired on both sides does not change), and a key a client
    /// is blocked on that is live after the swap is made ready (`scanDatabaseForReadyKeys`).
    /// No keyspace event fires, as in Redis. Indexes must be below [`DATABASES`].
    pub fn swap_dbs(&mut self, a: usize, b: usize, now_ms: u64) {
        if a == b {
            return;
        }
        let (lo, hi) = (a.min(b), a.max(b));
        let (left, right) = self.dbs.split_at_mut(hi);
        let (x, y) = (&mut left[lo], &mut right[0]);
        x.touch_replaced(Some(y), now_ms);
        y.touch_replaced(Some(x), now_ms);
        std::mem::swap(&mut x.shards, &mut y.shards);
        std::mem::swap(&mut x.expires, &mut y.expires);
        std::mem::swap(&mut x.len, &mut y.len);
        for db in [&*x, &*y] {
            for key in self.pubsub.blocking.keys_in(db.index) {
                if db.is_live(&key, now_ms) {
                    self.pubsub.blocking.signal(db.index, &key);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn expired_keys_are_invisible_then_deleted() {
        let mut db = Db::default();
        db.set(b"a", Value::string("1"));
        assert!(db.set_expiry(b"a", Some(100)));
        assert!(db.get(b"a", 99).is_some());
        // As in Redis, a key lives through the millisecond of its deadline.
        assert!(db.get(b"a", 100).is_some());
        assert!(db.get(b"a", 101).is_none());
        assert_eq!(db.len(), 1);
        assert!(db.get_mut(b"a", 101).is_none());
        assert_eq!(db.len(), 0);
        assert_eq!(db.expires_count(), 0);
    }

    #[test]
    fn delete_expired_uses_the_deadline_index() {
        let mut db = Db::default();
        for i in 0..10u64 {
            db.set(format!("k{i}").as_bytes(), Value::string("x"));
            db.set_expiry(format!("k{i}").as_bytes(), Some(i * 1000 + 500));
        }
        // Keys of the current second go once their own deadline has passed.
        assert_eq!(db.delete_expired(4_499, 100), 4);
        assert_eq!(db.delete_expired(4_501, 100), 1);
        assert_eq!(db.len(), 5);
        assert_eq!(db.expires_count(), 5);
        assert_eq!(db.delete_expired(5_499, 100), 0);
        assert_eq!(db.delete_expired(5_501, 2), 1);
    }

    #[test]
    fn keys_of_one_hash_are_all_found_and_only_those_of_the_second() {
        // Keys a, b and c share hash 7 (a shard made by hand: the keyspace's hash cannot be
        // made to collide), with deadlines in seconds 5, 5 and 6; d has hash 9.
        // Six more keys without a deadline (hashes of their own) keep the shard from
        // shrinking, which would hash the keys again with the keyspace's hash.
        let hash = |k: &[u8]| match k {
            b"d" => 9,
            [b'f', i] => 100 + u64::from(*i),
            _ => 7,
        };
        let mut shard = Shard::with_capacity_and_hasher(14, KeyHasher);
        let capacity = shard.capacity();
        let keys = [("a", 5_100), ("b", 5_900), ("c", 6_100), ("d", 5_200)];
        let fill = (0..6u8).map(|i| (vec![b'f', i], None));
        let keys = keys.map(|(k, t)| (k.as_bytes().to_vec(), Some(t)));
        for (k, t) in keys.into_iter().chain(fill) {
            let mut entry = Entry::new(Value::string("v"));
            entry.set_deadline(t);
            let RawEntryMut::Vacant(v) = shard
                .raw_entry_mut()
                .from_key_hashed_nocheck(hash(&k), &k[..])
            else {
                unreachable!("each key once")
            };
            v.insert_hashed_nocheck(hash(&k), Key::new(&k), entry);
        }
        let names = |it: &mut dyn Iterator<Item = (&Key, &Entry)>| {
            let mut v: Vec<String> = it.map(|(k, _)| String::from_utf8_lossy(k).into()).collect();
            v.sort();
            v
        };
        assert_eq!(
            names(&mut keys_in_second(&shard, 7, 5, 2, hash)),
            ["a", "b"]
        );
        assert_eq!(names(&mut keys_in_second(&shard, 7, 6, 1, hash)), ["c"]);
        assert_eq!(names(&mut keys_in_second(&shard, 9, 5, 1, hash)), ["d"]);
        assert!(names(&mut keys_in_second(&shard, 9, 6, 1, hash)).is_empty());
        // At 5,500 only a of second 5 is due: b is left (and c, of second 6, untouched).
        let mut gone = Vec::new();
        let left = expire_hashed(&mut shard, 7, 5, 2, 5_500, hash, |k| gone.push(k.clone()));
        assert_eq!((left, gone.len(), &gone[0][..]), (1, 1, &b"a"[..]));
        // The first key of hash 7 found may be c (second 6): b is found all the same.
        let left = expire_hashed(&mut shard, 7, 5, 1, 6_000, hash, |k| gone.push(k.clone()));
        assert_eq!((left, gone.len(), &gone[1][..]), (0, 2, &b"b"[..]));
        let left = expire_hashed(&mut shard, 7, 6, 1, 6_101, hash, |k| gone.push(k.clone()));
        assert_eq!((left, &gone[2][..]), (0, &b"c"[..]));
        assert_eq!(expire_hashed(&mut shard, 7, 6, 1, 9_000, hash, |_| ()), 0);
        assert_eq!((shard.len(), shard.capacity()), (7, capacity));
    }

    #[test]
    fn the_inlined_hash_is_the_keyspace_hash() {
        for k in [&b""[..], b"k", b"rl:ttl:12345", &[7u8; 100]] {
            assert_eq!(hash_key_inlined(k), hash_key(k));
            assert_eq!(hash_key_inlined(k), KeyHasher.hash_one(Key::new(k)));
        }
    }

    #[test]
    fn active_expiry_finds_every_key_by_its_hash() {
        let mut db = Db::default();
        let expired = db.pubsub.expired.load(Ordering::Relaxed);
        for i in 0..20_000u64 {
            let k = format!("rl:ttl:{i}");
            db.modify(k.as_bytes(), 0, |_| {
                (Some((Value::string("17"), Some(10_000 + i % 3_000))), ())
            });
        }
        // Some move to another second, some lose their deadline, some are deleted.
        for i in (0..20_000u64).step_by(7) {
            db.set_expiry(format!("rl:ttl:{i}").as_bytes(), Some(20_000 + i));
        }
        for i in (0..20_000u64).step_by(11) {
            db.set_expiry(format!("rl:ttl:{i}").as_bytes(), None);
        }
        for i in (0..20_000u64).step_by(13) {
            db.remove(format!("rl:ttl:{i}").as_bytes(), 0);
        }
        let live = db.len();
        let without = (0..20_000u64)
            .filter(|i| i % 11 == 0 && i % 13 != 0)
            .count();
        assert_eq!(db.expires_count(), live - without);
        let due: Vec<Bytes> = db.due_keys(13_000, usize::MAX);
        let mut n = 0;
        while db.delete_expired(13_000, 100) > 0 {
            n += 1;
        }
        assert!(n > 10);
        let gone = live - db.len();
        assert_eq!(due.len(), gone);
        assert_eq!(
            db.pubsub.expired.load(Ordering::Relaxed) - expired,
            gone as u64
        );
        // What is left: the keys without a deadline and those moved past 13,000.
        for i in 0..20_000u64 {
            let k = format!("rl:ttl:{i}");
            let deadline = if i % 13 == 0 {
                continue;
            } else if i % 11 == 0 {
                None
            } else if i % 7 == 0 {
                Some(20_000 + i)
            } else {
                Some(10_000 + i % 3_000)
            };
            let here = db.get_raw(k.as_bytes()).map(Entry::expires_at);
            let want = deadline
                .filter(|&t| t < 13_000)
                .map_or(Some(deadline), |_| None);
            assert_eq!(here, want, "{k}");
        }
        assert_eq!(db.expires_count(), db.len() - without);
        assert!(db.due_keys(u64::MAX, usize::MAX).len() == db.expires_count());
        while db.delete_expired(u64::MAX - 1, 1_000) > 0 {}
        assert_eq!((db.len(), db.expires_count()), (without, 0));
    }

    #[test]
    fn keys_stay_reachable_as_shards_grow_and_shrink() {
        let mut db = Db::default();
        for i in 0..50_000u64 {
            db.set(format!("key:{i}").as_bytes(), Value::string("x"));
            if i % 3 == 0 {
                db.set_expiry(format!("key:{i}").as_bytes(), Some(10));
            }
        }
        for i in 0..50_000u64 {
            let k = format!("key:{i}");
            assert!(db.get(k.as_bytes(), 0).is_some(), "{k}");
        }
        assert_eq!(db.delete_expired(1_000, usize::MAX), 16_667);
        for i in 0..50_000u64 {
            let k = format!("key:{i}");
            assert_eq!(db.remove(k.as_bytes(), 0).is_some(), i % 3 != 0, "{k}");
        }
        assert_eq!((db.len(), db.expires_count()), (0, 0));
    }

    #[test]
    fn access_information_fits_in_the_key() {
        // The value (40 bytes) and the deadline (8); the 32-bit access field sits in the
        // key's free bytes (18 inline), so a keyspace slot is 72 bytes.
        assert_eq!(std::mem::size_of::<Entry>(), 48);
        assert_eq!(std::mem::size_of::<Key>(), 24);
        assert_eq!(SLOT_BYTES, 72);
        // A shard table of 128 buckets (a slot and a control byte each, and a group of
        // trailing control bytes) stays within mimalloc's 10,240-byte size class.
        let mut shard = Shard::default();
        for i in 0..100u32 {
            shard.insert(Key::new(&i.to_le_bytes()), Entry::new(Value::string("v")));
        }
        assert_eq!(shard.capacity(), 112);
        assert!(
            shard.allocation_size() <= 10_240,
            "{}",
            shard.allocation_size()
        );
    }

    #[test]
    fn a_key_costs_its_slot_its_heap_bytes_and_its_value() {
        let entry = Entry::new(Value::string("12"));
        let int = entry.value.memory_estimate();
        // A key of up to 18 bytes sits in the slot; a longer one adds its own allocation.
        let short = [b'k'; small::KEY_INLINE];
        let long = [b'k'; small::KEY_INLINE + 1];
        assert_eq!(key_memory(&short, &entry), SLOT_BYTES + int);
        assert_eq!(key_memory(&long, &entry), SLOT_BYTES + long.len() + int);
        let hash = Entry::new(Value::Hash(value::HashValue::default()));
        assert_eq!(
            key_memory(&short, &hash),
            SLOT_BYTES + hash.value.memory_estimate()
        );
    }

    #[test]
    fn reads_and_writes_record_uses() {
        let mut db = Db::default();
        db.clock.set_now(10_000);
        db.set(b"a", Value::string("1"));
        db.set(b"b", Value::string("1"));
        db.clock.set_now(70_000);
        assert!(db.get(b"a", 0).is_some());
        let idle = |db: &Db, k: &[u8]| db.clock.idle_secs(db.get_slot(k).unwrap().0);
        assert_eq!((idle(&db, b"a"), idle(&db, b"b")), (0, 60));
        db.clock.set_now(80_000);
        db.modify(b"b", 0, |_| (None, ()));
        assert_eq!((idle(&db, b"a"), idle(&db, b"b")), (10, 0));
        // A deadline as late as the "none" marker stays a deadline.
        db.set_expiry(b"a", Some(u64::MAX));
        assert!(db.get_raw(b"a").unwrap().expires_at().is_some());
    }

    #[test]
    fn restore_hints_set_the_access_information() {
        let mut db = Db::default();
        db.clock.set_now(1_000_000);
        db.set(b"a", Value::string("1"));
        let idle = |db: &Db, k: &[u8]| db.clock.idle_secs(db.get_slot(k).unwrap().0);
        db.hint_access(b"a", Some(300), None);
        assert_eq!(idle(&db, b"a"), 300);
        // FREQ means nothing in LRU mode, IDLETIME nothing in LFU mode (as in Redis).
        db.hint_access(b"a", None, Some(7));
        assert_eq!(idle(&db, b"a"), 300);
        db.clock.configure(true, 10, 1);
        db.hint_access(b"a", Some(5), None);
        db.hint_access(b"a", None, Some(200));
        assert_eq!(db.clock.frequency(db.get_slot(b"a").unwrap().0), 200);
        db.hint_access(b"missing", Some(1), Some(1));
    }

    #[test]
    fn replacing_an_entry_drops_its_old_deadline() {
        let mut db = Db::default();
        db.set(b"a", Value::string("1"));
        db.set_expiry(b"a", Some(10));
        db.set(b"a", Value::string("2"));
        assert_eq!(db.expires_count(), 0);
        assert!(db.get(b"a", 1000).is_some());
    }

    #[test]
    fn watch_flags_fire_on_write() {
        let mut db = Db::default();
        let flag = WatchFlag::default();
        db.watch(key("w"), flag.clone());
        db.set(b"other", Value::string("1"));
        assert!(!flag.load(Ordering::Relaxed));
        db.set(b"w", Value::string("1"));
        assert!(flag.load(Ordering::Relaxed));
    }
}
