//! The engine: where keyspace commands are applied, with `now_ms` from one clock.
//!
//! Standalone, a batch of commands from one client is applied under one lock of the
//! state, so a pipeline of many commands costs one lock acquisition and a MULTI block
//! or script is atomic. The `apply` path (`command::execute` with a `Ctx`) depends only on
//! the state, the command and `now_ms`, so the replicated engine reuses it unchanged as
//! its state machine (`replicated.rs`).
//!
//! In cluster mode (a Raft node attached with [`Engine::attach_cluster`]) a batch made only
//! of read-only commands waits for a Raft read barrier and then runs locally; any other batch
//! (writes, scripts, MULTI/EXEC, WATCHed transactions) is proposed as one Raft command and its
//! replies come back from the leader's apply.

pub mod clock;
pub mod replicated;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use parking_lot::{Mutex, MutexGuard};
use serde::{Deserialize, Serialize};
use tollgate_raft::{ClusterError, RaftNode};

use crate::command::{self, flags, CommandSpec, Ctx, Scripts};
use crate::protocol::Reply;
use crate::scripting::{self, ScriptControl, ScriptEngine, ScriptLimits};
use crate::store::{Keyspace, WatchFlag};
pub use clock::Clock;
use replicated::{Proposal, ReplicatedState};

/// The Raft node type the server runs in cluster mode.
pub type ClusterNode = RaftNode<ReplicatedState>;

/// Everything commands execute against.
pub struct State {
    /// The databases.
    pub ks: Keyspace,
    /// The Lua engine: script cache and function libraries are state too.
    pub scripts: ScriptEngine,
    /// BUSY / SCRIPT KILL control of the running script.
    pub control: Arc<ScriptControl>,
}

impl Default for State {
    fn default() -> Self {
        State {
            ks: Keyspace::default(),
            scripts: ScriptEngine::new(ScriptLimits::default()),
            control: Arc::new(ScriptControl::new()),
        }
    }
}

/// One step of a batch: a keyspace command, or a switch of the selected database
/// (SELECT inside MULTI).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Op {
    /// A keyspace command with its arguments (name first), and its table entry when the
    /// connection already looked it up (not replicated: a replica looks the name up again).
    Command(
        Vec<Bytes>,
        #[serde(skip)] Option<&'static command::CommandSpec>,
    ),
    /// Select another database for the following commands.
    Select(usize),
    /// Delete each key of `db` whose deadline has passed at the batch's `now_ms` (the cluster
    /// leader's expiry sampler proposes these; no reply).
    PurgeExpired {
        /// Database index.
        db: usize,
        /// Keys the leader found expired.
        keys: Vec<Bytes>,
    },
    /// A command with a `CommandSpec::fast` handler, its arguments as parsed. Never
    /// replicated as such: a proposal turns it into `Command` (see `Op::into_replicable`).
    /// Last: serde numbers the variants it serializes by their declared position, but the
    /// ones it deserializes by their position among the variants not skipped.
    #[serde(skip)]
    Frame(
        crate::protocol::parser::Frame,
        &'static command::CommandSpec,
    ),
}

impl Op {
    /// This operation in a form that serializes: a `Frame` becomes a `Command`.
    pub fn into_replicable(self) -> Op {
        match self {
            Op::Frame(frame, spec) => Op::Command(frame.into_args(), Some(spec)),
            op => op,
        }
    }
}

/// What EXEC checks before running a transaction.
#[derive(Debug, Clone, Default)]
pub struct WatchGuard {
    /// Set by the keyspace when a watched key is written.
    pub flag: WatchFlag,
    /// Watched keys that existed at WATCH time: if one has expired since, EXEC fails.
    pub existed: Vec<(usize, Bytes)>,
    /// Cluster mode: `(db, key, store::snapshot::entry_digest)` of each watched key at WATCH
    /// time. The flag above is local to one process, so a replicated EXEC instead aborts when
    /// any digest differs at apply time. Empty standalone.
    pub digests: Vec<(usize, Bytes, u64)>,
}

/// A batch of operations from one client.
#[derive(Debug, Clone)]
pub struct Batch {
    /// The client's selected database at the start of the batch.
    pub db: usize,
    /// The client's protocol version.
    pub resp: u8,
    /// The operations, in order.
    pub ops: Vec<Op>,
    /// For EXEC: abort with a null reply if a watched key changed.
    pub watch: Option<WatchGuard>,
}

impl Batch {
    /// Whether every command only reads (so a cluster may answer it from local state after a
    /// read barrier; see `only_reads`).
    pub fn read_only(&self) -> bool {
        self.watch.is_none()
            && self.ops.iter().all(|op| match op {
                Op::Frame(_, spec) => only_reads(spec),
                Op::Command(args, spec) => spec
                    .or_else(|| args.first().and_then(|n| command::lookup(n)))
                    .is_some_and(only_reads),
                Op::Select(_) => true,
                Op::PurgeExpired { .. } => false,
            })
    }

    /// Number of replies the batch produces.
    pub fn reply_count(&self) -> usize {
        self.ops
            .iter()
            .filter(|o| matches!(o, Op::Command(..) | Op::Frame(..)))
            .count()
    }
}

/// Whether a command only reads the keyspace (scripts never count: the script cache is
/// replicated state).
fn only_reads(spec: &CommandSpec) -> bool {
    (spec.has(flags::READONLY) || matches!(spec.name, "ping" | "echo")) && !spec.has(flags::SCRIPT)
}

/// The result of a batch: one reply per `Op::Command`, and the database selected at the end.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BatchResult {
    /// Replies in order (None for the whole batch means EXEC aborted by WATCH).
    pub replies: Option<Vec<Reply>>,
    /// The selected database after the batch.
    pub db: usize,
}

/// Settings the engine reads on every batch.
#[derive(Debug)]
pub struct EngineSettings {
    /// After this long a running script makes other clients get -BUSY.
    pub busy_reply_threshold: Duration,
}

/// The engine: standalone, or a front for the Raft node once one is attached.
pub struct Engine {
    state: Arc<Mutex<State>>,
    control: Arc<ScriptControl>,
    clock: Clock,
    settings: parking_lot::RwLock<EngineSettings>,
    cluster: OnceLock<ClusterNode>,
    /// Total DEBUG ADVANCE-TIME, mirrored into the Raft node's clock skew in cluster mode.
    advanced_ms: AtomicU64,
}

/// BUSY text for a running script.
pub const BUSY: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";

impl Engine {
    /// A new engine with empty state.
    pub fn new(clock: Clock) -> Arc<Engine> {
        let state = State::default();
        Arc::new(Engine {
            control: state.control.clone(),
            state: Arc::new(Mutex::new(state)),
            clock,
            settings: parking_lot::RwLock::new(EngineSettings {
                busy_reply_threshold: Duration::from_millis(5000),
            }),
            cluster: OnceLock::new(),
            advanced_ms: AtomicU64::new(0),
        })
    }

    /// The state machine a Raft node replicates into: the same state this engine reads.
    pub fn replicated_state(&self) -> Arc<ReplicatedState> {
        Arc::new(ReplicatedState::new(self.state.clone()))
    }

    /// Switch to cluster mode: from now on batches go through `node` (once; later calls are
    /// ignored).
    pub fn attach_cluster(&self, node: ClusterNode) {
        let _ = self.cluster.set(node);
    }

    /// The Raft node, in cluster mode.
    pub fn cluster(&self) -> Option<&ClusterNode> {
        self.cluster.get()
    }

    /// `cluster` or `standalone`, as HELLO's `mode` and INFO's `redis_mode` say.
    pub fn mode_name(&self) -> &'static str {
        if self.cluster.get().is_some() {
            "cluster"
        } else {
            "standalone"
        }
    }

    /// The time local reads use: the local clock, or in cluster mode never earlier than the
    /// newest leader-stamped time applied here.
    pub fn now_ms(&self) -> u64 {
        let local = self.clock.now_ms();
        match self.cluster.get() {
            Some(node) => local.max(node.clock_floor_ms()),
            None => local,
        }
    }

    /// DEBUG ADVANCE-TIME: move the clock forward; in cluster mode also the time this node
    /// stamps on entries when it leads.
    pub fn advance_time(&self, ms: u64) {
        self.clock.advance(ms);
        let total = self
            .advanced_ms
            .fetch_add(ms, Ordering::AcqRel)
            .saturating_add(ms);
        if let Some(node) = self.cluster.get() {
            node.set_clock_skew_ms(i64::try_from(total).unwrap_or(i64::MAX));
        }
    }

    /// The engine's clock.
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// Change the BUSY threshold (CONFIG SET busy-reply-threshold).
    pub fn set_busy_threshold(&self, d: Duration) {
        self.settings.write().busy_reply_threshold = d;
    }

    /// The BUSY threshold.
    pub fn busy_threshold(&self) -> Duration {
        self.settings.read().busy_reply_threshold
    }

    /// Lock the state for direct access (server commands, tests). While a script runs
    /// this waits without blocking the runtime's thread.
    pub async fn lock(&self) -> MutexGuard<'_, State> {
        // Without a BUSY reply, `acquire` only returns once it holds the lock.
        loop {
            if let Ok(g) = self.acquire(false).await {
                return g;
            }
        }
    }

    /// Take the state lock without ever blocking a runtime thread for long: a script
    /// may take the lock and only then register itself as running, and a blocked
    /// worker could not answer SCRIPT KILL. With `busy_reply`, give up with Redis's
    /// BUSY text once a script has run past `busy-reply-threshold`.
    async fn acquire(&self, busy_reply: bool) -> Result<MutexGuard<'_, State>, &'static str> {
        loop {
            if let Some(g) = self.state.try_lock() {
                return Ok(g);
            }
            // Without a script, or behind one that has run for under LONG_SCRIPT (most take
            // microseconds), wait for the lock briefly rather than sleep a whole timer tick.
            // Past that, the script hands its worker off (see `command::scripting`) and
            // waiters yield to the runtime instead.
            let wait = match self.control.running_for() {
                None => Some(Duration::from_millis(2)),
                Some(ran) => scripting::LONG_SCRIPT.checked_sub(ran),
            };
            if let Some(wait) = wait {
                if let Some(g) = self.state.try_lock_for(wait) {
                    return Ok(g);
                }
                continue;
            }
            if busy_reply {
                if let Some(text) = scripting::busy_error(&self.control, self.busy_threshold()) {
                    return Err(text);
                }
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// The running script's control block (SCRIPT KILL, FUNCTION KILL, BUSY).
    pub fn script_control(&self) -> &Arc<ScriptControl> {
        &self.control
    }

    /// Apply a batch atomically and return its replies.
    ///
    /// While a script holds the state, other clients wait; once it has run past
    /// `busy-reply-threshold` they get `-BUSY` instead, as in Redis.
    pub async fn execute(&self, batch: Batch) -> BatchResult {
        if let Some(node) = self.cluster.get() {
            return self.execute_replicated(node, batch).await;
        }
        self.execute_local(batch, None).await
    }

    /// Cluster mode: reads after a read barrier, everything else through the Raft log.
    async fn execute_replicated(&self, node: &ClusterNode, batch: Batch) -> BatchResult {
        if batch.read_only() {
            if let Err(e) = node.read_barrier().await {
                return cluster_error(&batch, &e);
            }
            let now = self.now_ms();
            return self.execute_local(batch, Some(now)).await;
        }
        let n = batch.reply_count();
        let db = batch.db;
        match node.propose(Proposal::from_batch(batch)).await {
            Ok(result) => result,
            Err(e) => BatchResult {
                replies: Some(vec![cluster_error_reply(&e); n]),
                db,
            },
        }
    }

    /// Apply under the local lock, at `now` or the local clock.
    async fn execute_local(&self, batch: Batch, now: Option<u64>) -> BatchResult {
        let mut guard = match self.acquire(true).await {
            Ok(g) => g,
            Err(text) => {
                return BatchResult {
                    replies: Some(vec![Reply::err(text); batch.reply_count()]),
                    db: batch.db,
                }
            }
        };
        let now_ms = now.unwrap_or_else(|| self.clock.now_ms());
        // Scripts too run right here: one that runs long hands this runtime worker to
        // another thread from its count hook (see `command::scripting`), so short ones
        // never pay for a thread switch.
        apply_batch(&mut guard, &batch, now_ms)
    }

    /// Delete up to `limit` expired keys per database; returns how many were deleted.
    /// In cluster mode only the leader deletes, by proposing the keys it found due (see
    /// [`Op::PurgeExpired`]); a follower never deletes on its own.
    pub async fn expire_cycle(&self, limit: usize) -> usize {
        if let Some(node) = self.cluster.get() {
            if !node.is_leader() {
                return 0;
            }
            let now = self.now_ms();
            let ops: Vec<Op> = {
                let Some(state) = self.state.try_lock() else {
                    return 0;
                };
                state
                    .ks
                    .dbs
                    .iter()
                    .enumerate()
                    .map(|(db, d)| (db, d.due_keys(now, limit)))
                    .filter(|(_, keys)| !keys.is_empty())
                    .map(|(db, keys)| Op::PurgeExpired { db, keys })
                    .collect()
            };
            let count = ops
                .iter()
                .map(|op| match op {
                    Op::PurgeExpired { keys, .. } => keys.len(),
                    _ => 0,
                })
                .sum();
            if count == 0 {
                return 0;
            }
            let batch = Batch {
                db: 0,
                resp: 2,
                ops,
                watch: None,
            };
            return match node.propose(Proposal::from_batch(batch)).await {
                Ok(_) => count,
                Err(_) => 0,
            };
        }
        let now = self.clock.now_ms();
        // Never wait behind a running script: the next cycle will catch up.
        let Some(mut state) = self.state.try_lock() else {
            return 0;
        };
        state
            .ks
            .dbs
            .iter_mut()
            .map(|db| db.delete_expired(now, limit))
            .sum()
    }
}

/// Every command of `batch` answered with `e` (CLUSTERDOWN when the cluster has no quorum).
fn cluster_error(batch: &Batch, e: &ClusterError) -> BatchResult {
    BatchResult {
        replies: Some(vec![cluster_error_reply(e); batch.reply_count()]),
        db: batch.db,
    }
}

/// The reply for a failed cluster call: `-CLUSTERDOWN ...` when no leader with a quorum
/// answered in time (the write may or may not be applied for `Timeout`/`Forward`), `-ERR ...`
/// otherwise.
pub fn cluster_error_reply(e: &ClusterError) -> Reply {
    if e.is_cluster_down() {
        Reply::err(format!("CLUSTERDOWN The cluster is down: {e}"))
    } else {
        Reply::err(format!("ERR cluster: {e}"))
    }
}

/// Apply a batch to `state` at time `now_ms`: the deterministic core shared by the
/// standalone engine and the replicated state machine.
pub fn apply_batch(state: &mut State, batch: &Batch, now_ms: u64) -> BatchResult {
    if let Some(w) = &batch.watch {
        let expired = w
            .existed
            .iter()
            .any(|(db, key)| !state.ks.dbs[*db].contains(key, now_ms));
        if w.flag.load(Ordering::Relaxed) || expired {
            return BatchResult {
                replies: None,
                db: batch.db,
            };
        }
    }
    apply_ops(state, batch.db, batch.resp, &batch.ops, now_ms)
}

/// Bring the keys of a batch's commands into the cache before running any of them (see
/// [`crate::store::Db::warm`]): the first key of each command. Commands whose keys depend
/// on their arguments (scripts, LIMIT.ALL) are left out: finding their keys means parsing
/// them twice (for LIMIT.ALL about 1100 instructions, more than warming saves).
fn warm_keys(state: &State, mut db: usize, ops: &[Op]) {
    // The argument at the command's first key position, for keys at fixed positions.
    fn first_key(spec: &CommandSpec) -> Option<usize> {
        usize::try_from(spec.first_key)
            .ok()
            .filter(|&i| i > 0 && !spec.movable_keys())
    }
    for op in ops {
        let key = match op {
            Op::Select(d) => {
                db = *d;
                continue;
            }
            Op::PurgeExpired { .. } | Op::Command(_, None) => continue,
            Op::Command(args, Some(spec)) => {
                first_key(spec).and_then(|i| args.get(i)).map(|k| &k[..])
            }
            Op::Frame(frame, spec) => first_key(spec).and_then(|i| frame.get(i)),
        };
        if let (Some(target), Some(key)) = (state.ks.dbs.get(db), key) {
            target.warm(key);
        }
    }
}

/// What a command of a batch runs against.
fn command_ctx(state: &mut State, db: usize, now_ms: u64, resp: u8) -> Ctx<'_> {
    Ctx {
        ks: &mut state.ks,
        db,
        now_ms,
        resp,
        scripts: Some(Scripts {
            engine: &mut state.scripts,
            control: &state.control,
        }),
    }
}

/// Apply `ops` in order starting in database `db`, replies encoded for protocol `resp`.
pub fn apply_ops(state: &mut State, db: usize, resp: u8, ops: &[Op], now_ms: u64) -> BatchResult {
    if ops.len() > 1 {
        warm_keys(state, db, ops);
    }
    let mut db = db;
    let mut replies = Vec::with_capacity(ops.len());
    for op in ops {
        match op {
            Op::Select(d) => db = *d,
            Op::PurgeExpired { db: d, keys } => {
                if let Some(target) = state.ks.dbs.get_mut(*d) {
                    for k in keys {
                        target.purge_if_expired(k, now_ms);
                    }
                }
            }
            Op::Command(args, spec) => {
                let mut ctx = command_ctx(state, db, now_ms, resp);
                replies.push(match spec {
                    Some(spec) => command::execute_spec(&mut ctx, spec, args),
                    None => command::execute(&mut ctx, args),
                });
            }
            Op::Frame(frame, spec) => {
                let mut ctx = command_ctx(state, db, now_ms, resp);
                // The connection checked the arity, and only specs with a fast handler
                // make frames.
                replies.push(match spec.fast {
                    Some(fast) => frame.with_args(|args| fast(&mut ctx, args)),
                    None => command::execute_spec(&mut ctx, spec, &frame.clone().into_args()),
                });
            }
        }
    }
    BatchResult {
        replies: Some(replies),
        db,
    }
}
