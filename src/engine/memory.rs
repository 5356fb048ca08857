//! `maxmemory` in the engine: the limit and policy, which commands are refused while used
//! memory is over the limit, and eviction.
//!
//! Used memory is the counting allocator's figure (`crate::alloc`), less what the limit does
//! not count: in a cluster, the Raft log entries held in memory (Redis likewise leaves its
//! AOF and replication buffers out). When it is over `maxmemory`:
//!
//! - **Standalone**, before each command the engine evicts keys by the policy until memory is
//!   under the limit (Redis's `performEvictions`, inline, up to [`INLINE_BUDGET`] keys; a
//!   background cycle finishes larger jobs). If nothing can be evicted (`noeviction`, or no
//!   key qualifies) a command that may grow memory (`denyoom`) answers
//!   [`OOM_ERROR`]. A `MULTI`/`EXEC` block is checked once, when `EXEC` runs.
//! - **In a cluster**, eviction is a write like expiry: only the leader picks keys (from its
//!   own access information) and replicates them as [`super::Op::Evict`], which every node
//!   applies, so replicas stay identical. The `-OOM` refusal is decided once, by the node a
//!   client is on, before the batch is proposed: a refused command never enters the log.
//!   Scripts without a shebang learn Redis's "OOM at start" state from an
//!   [`super::Op::OutOfMemory`] marker in the entry, so every node refuses the same
//!   `redis.call`s.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use tokio::sync::Notify;

use super::{Op, State};
use crate::command::{flags, CommandSpec};
use crate::scripting::ScriptEngine;
use crate::store::eviction::{AccessClock, MemorySettings, Policy};
use crate::store::Key;

/// Redis's reply to a command refused for memory.
pub const OOM_ERROR: &str = "OOM command not allowed when used memory > 'maxmemory'.";

/// Most keys evicted inline before one command; a background cycle does the rest.
pub const INLINE_BUDGET: usize = 1_000;

/// Most keys in one replicated eviction entry.
const ENTRY_BUDGET: usize = 1_000;

fn policy_index(p: Policy) -> u8 {
    Policy::ALL.iter().position(|q| *q == p).unwrap_or(0) as u8
}

/// The live limit, shared by the engine, the state and the eviction task.
pub struct MemoryControl {
    maxmemory: AtomicU64,
    policy: AtomicU8,
    samples: AtomicU32,
    /// Keys deleted by eviction on this node (INFO `evicted_keys`).
    evicted: AtomicU64,
    clock: Arc<AccessClock>,
    /// Bytes the limit leaves out (the Raft log in memory), once a cluster node is attached.
    not_counted: OnceLock<Box<dyn Fn() -> usize + Send + Sync>>,
    /// Woken when a write finds memory over the limit, so eviction starts at once.
    wake: Notify,
}

impl Default for MemoryControl {
    fn default() -> Self {
        MemoryControl {
            maxmemory: AtomicU64::new(0),
            policy: AtomicU8::new(policy_index(Policy::NoEviction)),
            samples: AtomicU32::new(5),
            evicted: AtomicU64::new(0),
            clock: Arc::default(),
            not_counted: OnceLock::new(),
            wake: Notify::new(),
        }
    }
}

impl MemoryControl {
    /// Apply new settings (CONFIG SET, start-up).
    pub fn configure(&self, s: &MemorySettings) {
        self.policy.store(policy_index(s.policy), Ordering::Relaxed);
        self.samples.store(s.samples, Ordering::Relaxed);
        self.clock
            .configure(s.policy.uses_lfu(), s.lfu_log_factor, s.lfu_decay_time);
        self.maxmemory.store(s.maxmemory, Ordering::Relaxed);
        if self.excess().is_some() {
            self.wake.notify_one();
        }
    }

    /// The limit in bytes (0 = none).
    pub fn limit(&self) -> u64 {
        self.maxmemory.load(Ordering::Relaxed)
    }

    /// The policy.
    pub fn policy(&self) -> Policy {
        Policy::ALL[usize::from(self.policy.load(Ordering::Relaxed)) % Policy::ALL.len()]
    }

    fn samples(&self) -> usize {
        self.samples.load(Ordering::Relaxed) as usize
    }

    /// The clock every keyspace of this engine writes access information with.
    pub fn clock(&self) -> &Arc<AccessClock> {
        &self.clock
    }

    /// Leave `f()` bytes out of the comparison with the limit (set once).
    pub fn set_not_counted(&self, f: impl Fn() -> usize + Send + Sync + 'static) {
        let _ = self.not_counted.set(Box::new(f));
    }

    /// Bytes left out of the comparison with the limit.
    pub fn not_counted(&self) -> usize {
        self.not_counted.get().map_or(0, |f| f())
    }

    /// How far used memory is over the limit, if it is.
    pub fn excess(&self) -> Option<u64> {
        let limit = self.limit();
        if limit == 0 {
            return None;
        }
        let used = crate::alloc::allocated() as u64;
        if used <= limit {
            return None;
        }
        let counted = used.saturating_sub(self.not_counted() as u64);
        (counted > limit).then(|| counted - limit)
    }

    /// Keys evicted so far.
    pub fn evicted(&self) -> u64 {
        self.evicted.load(Ordering::Relaxed)
    }

    /// CONFIG RESETSTAT.
    pub fn reset_stats(&self) {
        self.evicted.store(0, Ordering::Relaxed);
        self.clock().reset_reads();
    }

    fn count_evicted(&self, n: usize) {
        self.evicted.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// Start the eviction task now if memory is over the limit (after a write).
    pub fn wake_if_over(&self) {
        if self.excess().is_some() {
            self.wake.notify_one();
        }
    }

    /// Wait until a write finds memory over the limit.
    pub async fn woken(&self) {
        self.wake.notified().await;
    }
}

/// What inline eviction achieved (Redis's `EVICT_OK` / `EVICT_RUNNING` / `EVICT_FAIL`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Eviction {
    /// Memory is within the limit.
    Ok,
    /// Still over, but keys were evicted and more can be: the command may run.
    Running,
    /// Still over and nothing (more) can be evicted: commands that grow memory are refused.
    Fail,
}

/// Evict keys from `state` until memory is within the limit, at most `budget` of them.
pub fn evict_inline(state: &mut State, budget: usize) -> Eviction {
    // One eviction pass is the latency monitor's `eviction-cycle` event (Redis's
    // performEvictions); passes with nothing to free return before reading the clock.
    if state.memory.excess().is_none() {
        return Eviction::Ok;
    }
    let started = crate::metrics::now_ns();
    let outcome = evict_pass(state, budget);
    let elapsed = crate::metrics::now_ns().saturating_sub(started);
    state
        .metrics
        .latency
        .add_if_needed("eviction-cycle", elapsed);
    outcome
}

fn evict_pass(state: &mut State, budget: usize) -> Eviction {
    let mem = state.memory.clone();
    let policy = mem.policy();
    let none_taken = HashSet::new();
    let mut evicted = 0;
    let outcome = loop {
        if mem.excess().is_none() {
            break Eviction::Ok;
        }
        if evicted >= budget {
            break Eviction::Running;
        }
        let Some((db, key)) =
            state
                .evictor
                .next_victim(&state.ks, policy, mem.samples(), &none_taken)
        else {
            break Eviction::Fail;
        };
        if state.ks.evict(db, &key) {
            evicted += 1;
        }
    };
    mem.count_evicted(evicted);
    outcome
}

/// Whether used memory is over the limit with nothing that eviction can free: Redis's
/// "out of memory" state before a command, which refuses `denyoom` commands.
pub fn out_of_memory(state: &mut State) -> bool {
    state.memory.excess().is_some() && evict_inline(state, INLINE_BUDGET) == Eviction::Fail
}

/// Whether a command may grow memory (Redis's `denyoom`): then it is refused while memory
/// is over the limit and nothing can be evicted. The command's row decides
/// ([`CommandSpec::denies_oom`]): its `DENYOOM` flag (a container's call: its
/// subcommand's, FUNCTION LOAD), or for scripts the flags they declare
/// (`command/scripting.rs`).
pub fn denies_oom(scripts: &ScriptEngine, spec: &CommandSpec, args: &[Bytes]) -> bool {
    spec.denies_oom(scripts, args)
}

/// Whether `op` is a command that [`denies_oom`].
pub fn op_denies_oom(scripts: &ScriptEngine, op: &Op) -> bool {
    match op {
        Op::Command(args, spec) => spec
            .or_else(|| args.first().and_then(|n| crate::command::lookup(n)))
            .is_some_and(|spec| denies_oom(scripts, spec, args)),
        Op::Frame(_, spec) => spec.has(flags::DENYOOM),
        _ => false,
    }
}

/// The leader's choice of keys to evict now: enough to free the excess and a little more
/// by estimate (at most [`ENTRY_BUDGET`] keys), grouped by database as replicated
/// operations. The margin ([`eviction_margin`]) makes each entry count: evicting exactly
/// the excess let the next write push memory over again, and the cluster spent its log on
/// entries of one key each (measured: 20,000 entries for 512 client batches of 320 KB).
pub fn choose_evictions(state: &mut State) -> Vec<Op> {
    let mem = state.memory.clone();
    let Some(excess) = mem.excess() else {
        return Vec::new();
    };
    let excess = excess + eviction_margin(mem.limit());
    let policy = mem.policy();
    let mut taken: HashSet<(usize, Key)> = HashSet::new();
    let mut freed = 0u64;
    while freed < excess && taken.len() < ENTRY_BUDGET {
        let Some((db, key)) = state
            .evictor
            .next_victim(&state.ks, policy, mem.samples(), &taken)
        else {
            break;
        };
        if let Some(entry) = state.ks.dbs[db].peek(&key) {
            freed += entry_size(&key, entry);
        }
        taken.insert((db, key));
    }
    let mut by_db: Vec<(usize, Vec<Bytes>)> = Vec::new();
    let mut chosen: Vec<(usize, Key)> = taken.into_iter().collect();
    chosen.sort_by(|a, b| (a.0, &a.1[..]).cmp(&(b.0, &b.1[..])));
    for (db, key) in chosen {
        match by_db.last_mut() {
            Some((d, keys)) if *d == db => keys.push(key.to_bytes()),
            _ => by_db.push((db, vec![key.to_bytes()])),
        }
    }
    by_db
        .into_iter()
        .map(|(db, keys)| Op::Evict { db, keys })
        .collect()
}

/// How far under the limit a replicated eviction aims: 1/64 of it, between 64 kB and 4 MB.
pub fn eviction_margin(limit: u64) -> u64 {
    (limit / 64).clamp(64 * 1024, 4 * 1024 * 1024)
}

/// Bytes a key is estimated to free: its hash-table slot, key and value.
fn entry_size(key: &Key, entry: &crate::store::Entry) -> u64 {
    crate::store::key_memory(key, entry) as u64
}

/// Apply a replicated eviction: delete the listed keys that are there.
pub fn apply_evictions(state: &mut State, db: usize, keys: &[Bytes]) {
    let n = keys.iter().filter(|k| state.ks.evict(db, k)).count();
    state.memory.count_evicted(n);
}
