//! Pub/Sub delivery: the registry of this node's subscribers (channels, patterns, shard
//! channels), the delivery of published messages and keyspace notifications to them, and
//! the `client-output-buffer-limit pubsub` that disconnects a subscriber too slow to read.
//!
//! A [`Hub`] belongs to the engine and is reachable from the keyspace (`Keyspace::pubsub`),
//! so PUBLISH, `redis.call('publish', ...)` and keyspace events, which run while a batch or
//! a Raft entry is applied, hand their messages to it. Delivery changes no keyspace state:
//! it appends the encoded message to each receiving client's [`Subscriber`] buffer and
//! wakes its connection task, which writes it. In a cluster every node applies every entry,
//! so each node delivers each message once to its own subscribers.
//!
//! The registry is plain `HashMap`s of subscriber lists under one lock: delivery takes the
//! read side, (un)subscribing the write side. Subscribers of a channel are kept in
//! subscription order; patterns are matched with Redis's glob (`crate::glob`).

pub mod blocking;
pub mod monitor;
pub mod notify;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use parking_lot::{Mutex, RwLock};
use tokio::sync::Notify;

use crate::glob::glob_match;
use crate::protocol::Reply;

/// The three kinds of subscription.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// SUBSCRIBE: a channel by name.
    Channel,
    /// PSUBSCRIBE: channels matching a glob pattern.
    Pattern,
    /// SSUBSCRIBE: a shard channel (Redis Cluster's sharded pub/sub).
    Shard,
}

impl Kind {
    /// The reply word of a subscription of this kind (`subscribe`, `psubscribe`, ...).
    pub fn subscribe_word(self) -> &'static str {
        match self {
            Kind::Channel => "subscribe",
            Kind::Pattern => "psubscribe",
            Kind::Shard => "ssubscribe",
        }
    }

    /// The reply word of an unsubscription of this kind.
    pub fn unsubscribe_word(self) -> &'static str {
        match self {
            Kind::Channel => "unsubscribe",
            Kind::Pattern => "punsubscribe",
            Kind::Shard => "sunsubscribe",
        }
    }
}

/// `client-output-buffer-limit pubsub <hard> <soft> <seconds>`: a subscriber whose unsent
/// messages exceed `hard` bytes, or stay over `soft` bytes for `soft_secs` seconds, is
/// disconnected (0 = no limit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutputLimit {
    /// Bytes; 0: none.
    pub hard: u64,
    /// Bytes; 0: none.
    pub soft: u64,
    /// Seconds over `soft` before disconnecting.
    pub soft_secs: u64,
}

impl Default for OutputLimit {
    /// Redis's default for the pubsub class: 32 MB hard, 8 MB for 60 seconds.
    fn default() -> Self {
        OutputLimit {
            hard: 32 * 1024 * 1024,
            soft: 8 * 1024 * 1024,
            soft_secs: 60,
        }
    }
}

/// One client's mailbox: messages encoded for its protocol, waiting for its connection to
/// write them.
#[derive(Debug)]
pub struct Subscriber {
    /// The client id.
    pub id: u64,
    resp: AtomicU8,
    buf: Mutex<BytesMut>,
    /// Woken when messages were added or the subscriber was dropped.
    pub ready: Notify,
    /// When the buffer went over the soft limit (and has stayed over since).
    soft_since: Mutex<Option<Instant>>,
    dropped: AtomicBool,
}

impl Subscriber {
    /// A mailbox for client `id` speaking protocol `resp`.
    pub fn new(id: u64, resp: u8) -> Arc<Subscriber> {
        Arc::new(Subscriber {
            id,
            resp: AtomicU8::new(resp),
            buf: Mutex::new(BytesMut::new()),
            ready: Notify::new(),
            soft_since: Mutex::new(None),
            dropped: AtomicBool::new(false),
        })
    }

    /// The client switched protocol (HELLO): later messages are encoded for `resp`.
    pub fn set_resp(&self, resp: u8) {
        self.resp.store(resp, Ordering::Relaxed);
    }

    /// Whether the output buffer limit was exceeded: the connection must close.
    pub fn dropped(&self) -> bool {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Move the waiting messages to `out`.
    pub fn drain_into(&self, out: &mut BytesMut) {
        let mut buf = self.buf.lock();
        if !buf.is_empty() {
            out.extend_from_slice(&buf);
            buf.clear();
            if buf.capacity() > 1024 * 1024 {
                *buf = BytesMut::new();
            }
        }
        *self.soft_since.lock() = None;
    }

    /// Bytes waiting to be written.
    pub fn pending(&self) -> usize {
        self.buf.lock().len()
    }

    /// Append a message (unless dropped) and enforce `limit`. The connection is woken
    /// only when the mailbox was empty: it drains everything that arrived since.
    fn deliver(&self, msg: &Encoded, limit: OutputLimit, dropped_count: &AtomicU64) {
        if self.dropped() {
            return;
        }
        let bytes = msg.get(self.resp.load(Ordering::Relaxed));
        let what = "pub/sub client (client-output-buffer-limit pubsub)";
        self.deliver_bytes(bytes, limit, dropped_count, what);
    }

    /// Append `bytes`, already encoded (unless dropped), and enforce `limit`, disconnecting
    /// with a log line that names `what` was closed.
    pub(crate) fn deliver_bytes(
        &self,
        bytes: &[u8],
        limit: OutputLimit,
        dropped_count: &AtomicU64,
        what: &str,
    ) {
        if self.dropped() {
            return;
        }
        let (over, mut wake) = {
            let mut buf = self.buf.lock();
            let was_empty = buf.is_empty();
            buf.extend_from_slice(bytes);
            let len = buf.len() as u64;
            let over = if limit.hard > 0 && len > limit.hard {
                true
            } else if limit.soft > 0 && len > limit.soft {
                let mut since = self.soft_since.lock();
                let start = *since.get_or_insert_with(Instant::now);
                start.elapsed() >= Duration::from_secs(limit.soft_secs)
            } else {
                *self.soft_since.lock() = None;
                false
            };
            if over {
                *buf = BytesMut::new();
            }
            (over, was_empty)
        };
        if over {
            self.dropped.store(true, Ordering::Relaxed);
            dropped_count.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(id = self.id, "closing {what} over its output buffer limit");
            wake = true;
        }
        if wake {
            self.ready.notify_one();
        }
    }
}

/// A message encoded once per protocol, on first use (a publish to many subscribers
/// encodes it at most twice).
struct Encoded {
    msg: Reply,
    resp2: std::cell::OnceCell<BytesMut>,
    resp3: std::cell::OnceCell<BytesMut>,
}

impl Encoded {
    fn new(msg: Reply) -> Encoded {
        Encoded {
            msg,
            resp2: Default::default(),
            resp3: Default::default(),
        }
    }

    fn get(&self, resp: u8) -> &[u8] {
        let cell = if resp >= 3 { &self.resp3 } else { &self.resp2 };
        cell.get_or_init(|| {
            let mut b = BytesMut::new();
            self.msg.encode(resp, &mut b);
            b
        })
    }
}

#[derive(Default)]
struct Registry {
    channels: HashMap<Bytes, Vec<Arc<Subscriber>>>,
    patterns: HashMap<Bytes, Vec<Arc<Subscriber>>>,
    shard: HashMap<Bytes, Vec<Arc<Subscriber>>>,
}

impl Registry {
    fn map(&mut self, kind: Kind) -> &mut HashMap<Bytes, Vec<Arc<Subscriber>>> {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Pattern => &mut self.patterns,
            Kind::Shard => &mut self.shard,
        }
    }
}

/// This node's subscribers and delivery settings.
#[derive(Default)]
pub struct Hub {
    reg: RwLock<Registry>,
    /// `notify-keyspace-events` as `notify::*` bits.
    events: AtomicU32,
    limit: Mutex<OutputLimit>,
    /// Set in a cluster: PUBLISH's reply inside the state machine is 0, so a script that
    /// uses it stays deterministic; the connection answers a client's own PUBLISH with the
    /// local count instead (see `Hub::receivers`).
    replicated: AtomicBool,
    /// Subscribers disconnected for their output buffer (INFO `client_output_buffer_limit_disconnections`).
    dropped: AtomicU64,
    /// Keys this node deleted because their time to live had passed, whoever found them:
    /// the active expiry cycle, a command that met the key, or a replica applying the
    /// leader's expiry entry (INFO `expired_keys`; Redis counts the lazy deletions too).
    /// Kept here because every such deletion fires the `expired` keyspace event through
    /// this hub, which outlives a keyspace replaced by a snapshot.
    pub expired: AtomicU64,
    /// The clients blocked in BLPOP & co., woken by the same keyspace events.
    pub blocking: blocking::Registry,
    /// The clients in MONITOR mode (`monitor.rs`).
    pub monitors: monitor::Monitors,
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub").finish_non_exhaustive()
    }
}

impl Hub {
    /// Register `sub` for `name`; false if it already was.
    pub fn subscribe(&self, kind: Kind, name: &Bytes, sub: &Arc<Subscriber>) -> bool {
        let mut reg = self.reg.write();
        let list = reg.map(kind).entry(name.clone()).or_default();
        if list.iter().any(|s| s.id == sub.id) {
            return false;
        }
        list.push(sub.clone());
        true
    }

    /// Remove client `id` from `name`; false if it was not subscribed.
    pub fn unsubscribe(&self, kind: Kind, name: &[u8], id: u64) -> bool {
        let mut reg = self.reg.write();
        let map = reg.map(kind);
        let Some(list) = map.get_mut(name) else {
            return false;
        };
        let before = list.len();
        list.retain(|s| s.id != id);
        let removed = list.len() != before;
        if list.is_empty() {
            map.remove(name);
        }
        removed
    }

    /// Deliver `message` on `channel` to its subscribers and to the matching patterns'
    /// (`shard`: to SSUBSCRIBE's subscribers instead). Returns the number of receivers as
    /// Redis counts them, or 0 in a cluster's state machine (see `replicated`).
    pub fn publish(&self, channel: &Bytes, message: &Bytes, shard: bool) -> i64 {
        let n = self.deliver(channel, message, shard);
        if self.replicated.load(Ordering::Relaxed) {
            0
        } else {
            n as i64
        }
    }

    fn deliver(&self, channel: &Bytes, message: &Bytes, shard: bool) -> usize {
        let reg = self.reg.read();
        let limit = *self.limit.lock();
        let mut n = 0;
        let (map, word) = if shard {
            (&reg.shard, "smessage")
        } else {
            (&reg.channels, "message")
        };
        if let Some(list) = map.get(&channel[..]) {
            let msg = Encoded::new(Reply::Push(vec![
                Reply::Bulk(Bytes::from_static(word.as_bytes())),
                Reply::Bulk(channel.clone()),
                Reply::Bulk(message.clone()),
            ]));
            for s in list {
                s.deliver(&msg, limit, &self.dropped);
            }
            n += list.len();
        }
        if !shard {
            for (pattern, list) in &reg.patterns {
                if !glob_match(pattern, channel, false) {
                    continue;
                }
                let msg = Encoded::new(Reply::Push(vec![
                    Reply::Bulk(Bytes::from_static(b"pmessage")),
                    Reply::Bulk(pattern.clone()),
                    Reply::Bulk(channel.clone()),
                    Reply::Bulk(message.clone()),
                ]));
                for s in list {
                    s.deliver(&msg, limit, &self.dropped);
                }
                n += list.len();
            }
        }
        n
    }

    /// How many of this node's clients a message on `channel` reaches now.
    pub fn receivers(&self, channel: &[u8], shard: bool) -> i64 {
        let reg = self.reg.read();
        if shard {
            return reg.shard.get(channel).map_or(0, Vec::len) as i64;
        }
        let direct = reg.channels.get(channel).map_or(0, Vec::len);
        let patterns: usize = reg
            .patterns
            .iter()
            .filter(|(p, _)| glob_match(p, channel, false))
            .map(|(_, l)| l.len())
            .sum();
        (direct + patterns) as i64
    }

    /// PUBSUB CHANNELS / SHARDCHANNELS: active channels matching `pattern`, sorted.
    pub fn channels(&self, pattern: Option<&[u8]>, shard: bool) -> Vec<Bytes> {
        let reg = self.reg.read();
        let map = if shard { &reg.shard } else { &reg.channels };
        let mut names: Vec<Bytes> = map
            .keys()
            .filter(|c| pattern.is_none_or(|p| glob_match(p, c, false)))
            .cloned()
            .collect();
        names.sort();
        names
    }

    /// PUBSUB NUMSUB / SHARDNUMSUB: subscribers of `channel`.
    pub fn numsub(&self, channel: &[u8], shard: bool) -> usize {
        let reg = self.reg.read();
        let map = if shard { &reg.shard } else { &reg.channels };
        map.get(channel).map_or(0, Vec::len)
    }

    /// Client `id`'s subscriptions: (channels and shard channels, patterns). A scan of
    /// the registry, for the rare ACL change that must check a subscriber.
    pub fn subscriptions_of(&self, id: u64) -> (Vec<Bytes>, Vec<Bytes>) {
        let reg = self.reg.read();
        let of = |map: &HashMap<Bytes, Vec<Arc<Subscriber>>>| -> Vec<Bytes> {
            map.iter()
                .filter(|(_, l)| l.iter().any(|s| s.id == id))
                .map(|(k, _)| k.clone())
                .collect()
        };
        let mut channels = of(&reg.channels);
        channels.extend(of(&reg.shard));
        (channels, of(&reg.patterns))
    }

    /// PUBSUB NUMPAT: distinct patterns subscribed to.
    pub fn numpat(&self) -> usize {
        self.reg.read().patterns.len()
    }

    /// Channels, patterns and shard channels with at least one subscriber (INFO
    /// `pubsub_channels`, `pubsub_patterns`, `pubsubshard_channels`).
    pub fn counts(&self) -> (usize, usize, usize) {
        let reg = self.reg.read();
        (reg.channels.len(), reg.patterns.len(), reg.shard.len())
    }

    /// Set `notify-keyspace-events` (as `notify::parse` bits).
    pub fn set_events(&self, flags: u32) {
        self.events.store(flags, Ordering::Relaxed);
    }

    /// The `notify-keyspace-events` bits.
    pub fn events(&self) -> u32 {
        self.events.load(Ordering::Relaxed)
    }

    /// Set `client-output-buffer-limit pubsub`.
    pub fn set_limit(&self, limit: OutputLimit) {
        *self.limit.lock() = limit;
    }

    /// Cluster mode: PUBLISH inside the state machine answers 0 (see `replicated`).
    pub fn set_replicated(&self) {
        self.replicated.store(true, Ordering::Relaxed);
    }

    /// Whether this hub serves a cluster node.
    pub fn replicated(&self) -> bool {
        self.replicated.load(Ordering::Relaxed)
    }

    /// Subscribers disconnected so far for their output buffer.
    pub fn disconnections(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// One client's subscriptions (kept by its connection), in subscription order.
#[derive(Default, Debug)]
pub struct ClientSubs {
    /// The client's mailbox, made at its first subscription.
    pub mailbox: Option<Arc<Subscriber>>,
    channels: Vec<Bytes>,
    patterns: Vec<Bytes>,
    shard: Vec<Bytes>,
}

impl ClientSubs {
    fn list(&mut self, kind: Kind) -> &mut Vec<Bytes> {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Pattern => &mut self.patterns,
            Kind::Shard => &mut self.shard,
        }
    }

    /// Channels plus patterns (the count SUBSCRIBE and UNSUBSCRIBE report; shard
    /// channels are counted apart, as in Redis).
    pub fn count(&self) -> usize {
        self.channels.len() + self.patterns.len()
    }

    /// Number of shard channels.
    pub fn shard_count(&self) -> usize {
        self.shard.len()
    }

    /// Number of channels, patterns (CLIENT LIST `sub`, `psub`).
    pub fn sizes(&self) -> (usize, usize, usize) {
        (self.channels.len(), self.patterns.len(), self.shard.len())
    }

    /// Whether the client has any subscription (RESP2: subscribe mode).
    pub fn active(&self) -> bool {
        self.count() + self.shard.len() > 0
    }

    /// The names subscribed to with `kind`.
    pub fn names(&self, kind: Kind) -> Vec<Bytes> {
        match kind {
            Kind::Channel => self.channels.clone(),
            Kind::Pattern => self.patterns.clone(),
            Kind::Shard => self.shard.clone(),
        }
    }

    /// Subscribe to each of `names`; one confirmation reply per name.
    pub fn subscribe(
        &mut self,
        hub: &Hub,
        kind: Kind,
        names: &[Bytes],
        id: u64,
        resp: u8,
    ) -> Vec<Reply> {
        let mailbox = self
            .mailbox
            .get_or_insert_with(|| Subscriber::new(id, resp))
            .clone();
        names
            .iter()
            .map(|name| {
                if !self.list(kind).contains(name) {
                    hub.subscribe(kind, name, &mailbox);
                    self.list(kind).push(name.clone());
                }
                self.confirmation(kind.subscribe_word(), Some(name.clone()), kind)
            })
            .collect()
    }

    /// Unsubscribe from `names` (all of `kind` when empty); one reply per name, or one with
    /// a nil channel when there was nothing to unsubscribe from.
    pub fn unsubscribe(&mut self, hub: &Hub, kind: Kind, names: &[Bytes], id: u64) -> Vec<Reply> {
        let names = if names.is_empty() {
            self.list(kind).clone()
        } else {
            names.to_vec()
        };
        if names.is_empty() {
            return vec![self.confirmation(kind.unsubscribe_word(), None, kind)];
        }
        names
            .into_iter()
            .map(|name| {
                let list = self.list(kind);
                if let Some(i) = list.iter().position(|n| *n == name) {
                    list.remove(i);
                    hub.unsubscribe(kind, &name, id);
                }
                self.confirmation(kind.unsubscribe_word(), Some(name), kind)
            })
            .collect()
    }

    /// Leave every channel and pattern (connection closed, RESET).
    pub fn clear(&mut self, hub: &Hub, id: u64) {
        for kind in [Kind::Channel, Kind::Pattern, Kind::Shard] {
            for name in std::mem::take(self.list(kind)) {
                hub.unsubscribe(kind, &name, id);
            }
        }
        self.mailbox = None;
    }

    fn confirmation(&self, word: &'static str, name: Option<Bytes>, kind: Kind) -> Reply {
        let count = if kind == Kind::Shard {
            self.shard_count()
        } else {
            self.count()
        };
        Reply::Push(vec![
            Reply::Bulk(Bytes::from_static(word.as_bytes())),
            name.map_or(Reply::Nil, Reply::Bulk),
            Reply::Integer(count as i64),
        ])
    }
}
