//! The clients blocked in BLPOP & co.: which keys each waits on, in arrival order (first
//! blocked, first served), and which of those keys a command made ready.
//!
//! A key becomes ready when a keyspace event fires on it (`notify::notify` signals the
//! registry before it looks at `notify-keyspace-events`): every write that can give a
//! blocked client something to pop (pushes, LMOVE's destination, ZADD, stores, RENAME,
//! MOVE, COPY, RESTORE, ...) fires one. Waking on any event is deliberately broad: a
//! waiter whose retry finds nothing stays blocked.
//!
//! Standalone, the engine serves the ready keys' waiters right after the batch that made
//! them ready, under the same lock, in order (Redis's `handleClientsBlockedOnKeys`); in a
//! cluster each node wakes its own waiters when it applies an entry, and each waiter
//! proposes its pop through the log (see `server::blocking`).
//!
//! The maps hash with a seeded `ahash` (keys come from clients) and are looked up with the
//! key as borrowed ([`KeyRef`]): a keyspace event on a key while clients are blocked
//! allocates nothing unless the key is one they wait on. Against std's SipHash and an
//! owned copy of the key per look-up this took the registry's share of a blocking
//! RPUSH -> BLPOP round trip from about 5,800 to 2,200 instructions (callgrind; see the
//! README.s blocking-commands benchmark paragraph).

use std::collections::VecDeque;
use std::hash::{Hash, Hasher};
use std::ops::Range;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use hashbrown::{Equivalent, HashMap};
use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::protocol::Reply;

/// What a blocked client waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Want {
    /// A non-empty list (BLPOP, BRPOP, BRPOPLPUSH, BLMOVE, BLMPOP).
    List,
    /// A non-empty sorted set (BZPOPMIN, BZPOPMAX, BZMPOP).
    ZSet,
}

/// One blocked client.
#[derive(Debug)]
pub struct Waiter {
    /// The client id (CLIENT UNBLOCK).
    pub client: u64,
    /// Its database.
    pub db: usize,
    /// Its protocol.
    pub resp: u8,
    /// The blocking command, as sent (the very list its first attempt ran on: standalone,
    /// the batch hands it over rather than a copy being made).
    pub args: Vec<Bytes>,
    /// Where in `args` the keys it waits on are (see [`Waiter::keys`]): a range rather
    /// than a list of its own, one allocation less per blocked client.
    keys: Range<usize>,
    /// The value type that serves it.
    pub want: Want,
    /// Its reply once served (standalone) or unblocked (CLIENT UNBLOCK), taken by the
    /// connection: a slot in the waiter rather than a `oneshot` channel (whose shared
    /// state was one more allocation per blocked client).
    reply: Mutex<Slot>,
    /// Woken when it is answered, and (cluster) when one of its keys is ready: the client
    /// then proposes its pop.
    pub wake: Notify,
}

/// A waiter's reply slot.
#[derive(Debug)]
enum Slot {
    /// Not answered yet.
    Waiting,
    /// Answered; the connection has not taken it.
    Ready(Reply),
    /// Taken.
    Taken,
}

impl Waiter {
    /// A waiter on the keys `args[keys]` (cut to the arguments there are).
    pub fn new(
        client: u64,
        db: usize,
        resp: u8,
        args: Vec<Bytes>,
        keys: Range<usize>,
        want: Want,
    ) -> Arc<Waiter> {
        let end = keys.end.min(args.len());
        let keys = keys.start.min(end)..end;
        Arc::new(Waiter {
            client,
            db,
            resp,
            args,
            keys,
            want,
            reply: Mutex::new(Slot::Waiting),
            wake: Notify::new(),
        })
    }

    /// The keys it waits on.
    pub fn keys(&self) -> &[Bytes] {
        &self.args[self.keys.clone()]
    }

    /// Hand the client its reply (the first answer wins) and wake it.
    pub fn answer(&self, reply: Reply) {
        {
            let mut slot = self.reply.lock();
            if !matches!(*slot, Slot::Waiting) {
                return;
            }
            *slot = Slot::Ready(reply);
        }
        self.wake.notify_one();
    }

    /// The reply, if it has been answered and the reply not yet taken.
    pub fn take_reply(&self) -> Option<Reply> {
        let mut slot = self.reply.lock();
        match std::mem::replace(&mut *slot, Slot::Taken) {
            Slot::Ready(r) => Some(r),
            other => {
                *slot = other;
                None
            }
        }
    }
}

/// A key of a database as borrowed: looks up a `(db, key)` slot without copying the key
/// (it hashes as the owned tuple does: `Bytes` hashes as its slice).
struct KeyRef<'a>(usize, &'a [u8]);

impl Hash for KeyRef<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (self.0, self.1).hash(state);
    }
}

impl Equivalent<(usize, Bytes)> for KeyRef<'_> {
    fn equivalent(&self, key: &(usize, Bytes)) -> bool {
        self.0 == key.0 && self.1 == &key.1[..]
    }
}

type Map<K, V> = HashMap<K, V, ahash::RandomState>;

#[derive(Default)]
struct Inner {
    keys: Map<(usize, Bytes), VecDeque<Arc<Waiter>>>,
    ready: Vec<(usize, Bytes)>,
    /// Emptied queues of keys no client waits on any more (at most [`SPARE_QUEUES`]),
    /// for the next key a client blocks on: a ping-pong's key has no waiter between its
    /// pop and the next block, and each block allocated its queue again.
    spare_queues: Vec<VecDeque<Arc<Waiter>>>,
    clients: Map<u64, Arc<Waiter>>,
}

/// How many emptied key queues the registry keeps for reuse.
const SPARE_QUEUES: usize = 64;

/// The blocked clients of one node.
#[derive(Default)]
pub struct Registry {
    /// Number of blocked clients: 0 lets every keyspace event skip the lock.
    active: AtomicUsize,
    /// Clients served so far (a connection whose command served one lets the served
    /// client's reply go out before its own: see `server::connection`).
    served: AtomicU64,
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("blocked", &self.blocked())
            .finish()
    }
}

impl Registry {
    /// Block `w` on its keys, behind those already waiting.
    pub fn block(&self, w: &Arc<Waiter>) {
        let mut inner = self.inner.lock();
        let Inner {
            keys, spare_queues, ..
        } = &mut *inner;
        for k in w.keys() {
            let queue = keys
                .entry((w.db, k.clone()))
                .or_insert_with(|| spare_queues.pop().unwrap_or_default());
            if !queue.iter().any(|x| Arc::ptr_eq(x, w)) {
                queue.push_back(w.clone());
            }
        }
        if inner.clients.insert(w.client, w.clone()).is_none() {
            self.active.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Remove `w` from every queue; false if it was not blocked any more.
    pub fn unblock(&self, w: &Arc<Waiter>) -> bool {
        let mut inner = self.inner.lock();
        Self::remove(&mut inner, w, &self.active)
    }

    fn remove(inner: &mut Inner, w: &Arc<Waiter>, active: &AtomicUsize) -> bool {
        match inner.clients.entry(w.client) {
            hashbrown::hash_map::Entry::Occupied(e) if Arc::ptr_eq(e.get(), w) => {
                e.remove();
            }
            _ => return false,
        }
        active.fetch_sub(1, Ordering::Relaxed);
        for k in w.keys() {
            let slot = KeyRef(w.db, k);
            if let Some(q) = inner.keys.get_mut(&slot) {
                // The served client is the first in its queue (the common case).
                if q.front().is_some_and(|x| Arc::ptr_eq(x, w)) {
                    q.pop_front();
                } else {
                    q.retain(|x| !Arc::ptr_eq(x, w));
                }
                if q.is_empty() {
                    if let Some(q) = inner.keys.remove(&slot) {
                        if inner.spare_queues.len() < SPARE_QUEUES {
                            inner.spare_queues.push(q);
                        }
                    }
                }
            }
        }
        true
    }

    /// A keyspace event fired on `key` of `db`: if a client waits on it, it is ready.
    #[inline]
    pub fn signal(&self, db: usize, key: &[u8]) {
        if self.active.load(Ordering::Relaxed) != 0 {
            self.mark_ready(db, key);
        }
    }

    #[inline(never)]
    fn mark_ready(&self, db: usize, key: &[u8]) {
        let mut inner = self.inner.lock();
        let inner = &mut *inner;
        // The map's own copy of the key, shared (a reference count, not a copy).
        if let Some(((_, k), _)) = inner.keys.get_key_value(&KeyRef(db, key)) {
            if !inner.ready.iter().any(|(d, r)| *d == db && r[..] == *key) {
                inner.ready.push((db, k.clone()));
            }
        }
    }

    /// Exchange the keys made ready since the last call (in the order they became ready)
    /// for `list`, which is empty: a caller that drains the list and exchanges it again
    /// until it comes back empty leaves its memory for the next ready keys (a new list
    /// per serving round was one allocation per blocking round trip).
    pub fn swap_ready(&self, list: &mut Vec<(usize, Bytes)>) {
        debug_assert!(list.is_empty());
        if self.active.load(Ordering::Relaxed) == 0 {
            return;
        }
        std::mem::swap(&mut self.inner.lock().ready, list);
    }

    /// The keys of database `db` that clients are blocked on (SWAPDB checks which are
    /// ready after the swap), in byte order.
    pub fn keys_in(&self, db: usize) -> Vec<Bytes> {
        if self.active.load(Ordering::Relaxed) == 0 {
            return Vec::new();
        }
        let inner = self.inner.lock();
        let mut keys: Vec<Bytes> = inner
            .keys
            .keys()
            .filter(|(d, _)| *d == db)
            .map(|(_, k)| k.clone())
            .collect();
        keys.sort_unstable();
        keys
    }

    /// The first client waiting on `key` of `db`.
    pub fn first(&self, db: usize, key: &Bytes) -> Option<Arc<Waiter>> {
        let inner = self.inner.lock();
        inner.keys.get(&KeyRef(db, key))?.front().cloned()
    }

    /// The clients waiting on `key` of `db`, first blocked first.
    pub fn waiting(&self, db: usize, key: &Bytes) -> Vec<Arc<Waiter>> {
        let inner = self.inner.lock();
        inner
            .keys
            .get(&KeyRef(db, key))
            .map(|q| q.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Serve `w` with `reply`: remove it and hand it the reply.
    pub fn serve(&self, w: &Arc<Waiter>, reply: Reply) {
        if self.unblock(w) {
            w.answer(reply);
            self.served.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// How many clients [`Registry::serve`] has served so far.
    pub fn served(&self) -> u64 {
        self.served.load(Ordering::Relaxed)
    }

    /// CLIENT UNBLOCK: answer client `id` with `reply` (`Reply::Nil` stands for the
    /// command's own timeout reply) if it is blocked.
    pub fn unblock_client(&self, id: u64, reply: Reply) -> bool {
        let w = {
            let mut inner = self.inner.lock();
            let Some(w) = inner.clients.get(&id).cloned() else {
                return false;
            };
            Self::remove(&mut inner, &w, &self.active);
            w
        };
        w.answer(reply);
        true
    }

    /// Number of blocked clients (INFO `blocked_clients`).
    pub fn blocked(&self) -> usize {
        self.active.load(Ordering::Relaxed)
    }

    /// Number of distinct keys clients are blocked on (INFO `blocked_keys`... Redis 7.2;
    /// kept for tests).
    pub fn keys(&self) -> usize {
        self.inner.lock().keys.len()
    }
}
