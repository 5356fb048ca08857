//! The engine: where keyspace commands are applied, with `now_ms` from one clock.
//!
//! Standalone, a batch of commands from one client is applied under one lock of the
//! state, so a pipeline of many commands costs one lock acquisition and a MULTI block
//! or script is atomic. The `apply` path (`command::execute` with a `Ctx`) depends only on
//! the state, the command and `now_ms`, so the replicated engine reuses it unchanged as
//! its state machine (`replicated.rs`).
//!
//! With a Raft node attached ([`Engine::attach_cluster`]: a cluster node, or a durable single
//! node, which is a one-voter group) a batch made only of read-only commands waits for a Raft
//! read barrier (none while this node is the only voter) and then runs locally; any other batch
//! (writes, scripts, MULTI/EXEC, WATCHed transactions) is proposed as one Raft command and its
//! replies come back from the leader's apply.
//!
//! `maxmemory` (eviction and `-OOM` refusals) is enforced here too; see [`memory`].

pub mod blocking;
pub mod clock;
pub mod memory;
pub mod poison;
pub mod replicated;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use parking_lot::{Mutex, MutexGuard};
use serde::{Deserialize, Serialize};
use tollgate_raft::{ClusterError, RaftNode};

use crate::acl::categories::call_writes;
use crate::command::{self, flags, CommandSpec, Ctx, Scripts};
use crate::metrics::Metrics;
use crate::protocol::Reply;
use crate::scripting::{self, ScriptControl, ScriptEngine, ScriptLimits};
use crate::store::eviction::Evictor;
use crate::store::{Keyspace, WatchFlag};
pub use clock::Clock;
use memory::MemoryControl;
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
    /// The `maxmemory` limit and policy (shared with the engine and its eviction task).
    pub memory: Arc<MemoryControl>,
    /// The eviction candidate pool (not replicated: only the deciding node uses it).
    pub evictor: Evictor,
    /// What this server counts about the commands it runs (not replicated, no effect on
    /// replies or state).
    pub metrics: Arc<Metrics>,
    /// The ACL users (cluster-wide state, apart from the keyspace: in a cluster they change
    /// through the log and travel in snapshots).
    pub acl: Arc<crate::acl::Acl>,
    /// Batches run locally so far: the seed of a local batch's random choices (see
    /// [`Stamp`]; not replicated: a replicated entry is seeded from its place in the log).
    local_batches: u64,
}

impl State {
    /// The stamp of a batch run here (not through the log) at `now_us`.
    pub fn local_stamp(&mut self, now_us: u64) -> Stamp {
        self.local_batches = self.local_batches.wrapping_add(1);
        Stamp {
            now_us,
            seed: self.local_batches,
        }
    }
}

/// When a batch runs, and the seed of its random choices (SRANDMEMBER, SPOP, RANDOMKEY,
/// ...): in a cluster the entry's leader time and its place in the log, so every replica
/// picks the same; standalone the local clock and a count of batches.
///
/// Each operation of a batch runs one microsecond after the one before (`now_us +
/// position`), as each command of a pipeline runs a little later on Redis: `TIME` (and so a
/// script such as go-redis/redis_rate's GCRA, which keeps its state in seconds with
/// microseconds) sees time pass between pipelined calls. The batch reserves those
/// microseconds (`Clock::reserve_us`, `StateMachine::span_us`), so the next batch starts after
/// them. Expiry and the limiters use the batch's millisecond (`now_ms`) throughout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// Unix microseconds of the batch's first operation.
    pub now_us: u64,
    /// The batch's seed; each command's is derived from it and the command's position.
    pub seed: u64,
}

impl Stamp {
    /// The time in unix milliseconds (what expiry and the limiters use).
    pub fn now_ms(self) -> u64 {
        self.now_us / 1000
    }

    /// The seed of the batch's command at `position`.
    pub fn seed_at(self, position: usize) -> u64 {
        self.seed
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .wrapping_add(position as u64)
    }
}

impl Default for State {
    fn default() -> Self {
        let memory = Arc::new(MemoryControl::default());
        State {
            ks: Keyspace::with_clock(memory.clock().clone()),
            scripts: ScriptEngine::new(ScriptLimits::default()),
            control: Arc::new(ScriptControl::new()),
            memory,
            evictor: Evictor::default(),
            metrics: Arc::default(),
            acl: Arc::new(crate::acl::Acl::new(None)),
            local_batches: 0,
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
    /// Select another database for the following commands. No longer made (EXEC now sends
    /// SELECT as a `Command`, whose handler switches the database); kept so that Raft logs
    /// and snapshots written before still replay.
    Select(usize),
    /// Delete each key of `db` whose deadline has passed at the batch's `now_ms` (the cluster
    /// leader's expiry sampler proposes these; no reply).
    PurgeExpired {
        /// Database index.
        db: usize,
        /// Keys the leader found expired.
        keys: Vec<Bytes>,
    },
    /// Delete these keys of `db` to free memory (the cluster leader's eviction under
    /// `maxmemory`; no reply). Every node deletes those that are there.
    Evict {
        /// Database index.
        db: usize,
        /// Keys the leader chose.
        keys: Vec<Bytes>,
    },
    /// The commands after this one run in Redis's "out of memory" state (decided by the node
    /// that proposed the entry): a script without a shebang is refused its first `denyoom`
    /// `redis.call` before any write. No reply.
    OutOfMemory,
    /// A change to the ACL users (ACL SETUSER, DELUSER, LOAD): cluster-wide state kept
    /// apart from the keyspace (`State::acl`), changed in log order on every node. Its
    /// reply is ACL SETUSER's, DELUSER's or LOAD's.
    Acl(crate::acl::Change),
    /// The scripts after this one run as this ACL user: each `redis.call` is checked
    /// against its permissions at apply time (a user deleted by then has none). Only sent
    /// for users without every permission. No reply.
    AsUser(String),
    /// A command with a `CommandSpec::fast` handler, its arguments as parsed. Never
    /// replicated as such: the Raft log holds it as the `Command` of its arguments (see
    /// `replicated::Proposal::ops`), which is what other nodes decode. Last: serde numbers
    /// the variants it serializes by their declared position, but the ones it deserializes
    /// by their position among the variants not skipped.
    #[serde(skip)]
    Frame(
        crate::protocol::parser::Frame,
        &'static command::CommandSpec,
    ),
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
    /// A `MULTI`/`EXEC` block: checked against `maxmemory` once, as a whole.
    pub transaction: bool,
    /// The connection it came from (SLOWLOG shows its address and name); not replicated.
    pub client: Option<Arc<crate::server::ClientHandle>>,
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
                Op::Select(_) | Op::AsUser(_) => true,
                Op::PurgeExpired { .. } | Op::Evict { .. } | Op::OutOfMemory | Op::Acl(_) => false,
            })
    }

    /// Number of replies the batch produces.
    pub fn reply_count(&self) -> usize {
        self.ops
            .iter()
            .filter(|o| matches!(o, Op::Command(..) | Op::Frame(..) | Op::Acl(_)))
            .count()
    }
}

/// Whether a command only reads the keyspace or touches no state at all (scripts never
/// count: the script cache is replicated state).
fn only_reads(spec: &CommandSpec) -> bool {
    spec.has(flags::READONLY | flags::STATELESS) && !spec.has(flags::SCRIPT | flags::LOGGED)
}

/// The result of a batch: one reply per `Op::Command`, and the database selected at the end.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BatchResult {
    /// Replies in order (None for the whole batch means EXEC aborted by WATCH).
    pub replies: Option<Vec<Reply>>,
    /// The selected database after the batch.
    pub db: usize,
    /// The whole batch was refused before anything ran, with this reply (a transaction
    /// under `maxmemory`; EXEC answers `-EXECABORT ...` with it).
    #[serde(default)]
    pub aborted: Option<Reply>,
    /// The batch's operation list, emptied, for the connection to fill again (a batch run
    /// on this node; empty otherwise): a pipeline's next batch is written into memory
    /// still in the cache rather than into a new allocation (issue 21). Never sent.
    #[serde(skip)]
    pub spare: Vec<Op>,
}

impl BatchResult {
    /// A batch that ran, with its replies.
    pub fn ran(replies: Option<Vec<Reply>>, db: usize) -> BatchResult {
        BatchResult {
            replies,
            db,
            aborted: None,
            spare: Vec::new(),
        }
    }
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
    memory: Arc<MemoryControl>,
    metrics: Arc<Metrics>,
    clock: Clock,
    settings: parking_lot::RwLock<EngineSettings>,
    cluster: OnceLock<ClusterNode>,
    /// The Raft node is a durable single node's (started without `--node-id`).
    single: std::sync::atomic::AtomicBool,
    /// Total DEBUG ADVANCE-TIME, mirrored into the Raft node's clock skew in cluster mode.
    advanced_ms: AtomicU64,
    /// `Keyspace::no_good_replicas` as the connections read it without the state's lock
    /// (a write queued in MULTI is refused at once, as Redis does).
    no_good_replicas: std::sync::atomic::AtomicBool,
    /// This node's pub/sub subscribers (also reachable from the keyspace, where PUBLISH and
    /// keyspace events run).
    pubsub: Arc<crate::pubsub::Hub>,
    /// The ACL users (the same store as the state's).
    acl: Arc<crate::acl::Acl>,
    /// The keyspace's OBJECT settings (shared with it, like `pubsub`).
    object: Arc<parking_lot::RwLock<crate::store::encoding::ObjectSettings>>,
    /// The keyspace's encoding thresholds (a keyspace restored from a snapshot shares them).
    encodings: Arc<crate::store::encoding::Encodings>,
}

/// BUSY text for a running script.
pub const BUSY: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";

impl Engine {
    /// A new engine with empty state.
    pub fn new(clock: Clock) -> Arc<Engine> {
        let state = State::default();
        Arc::new(Engine {
            pubsub: state.ks.pubsub.clone(),
            acl: state.acl.clone(),
            object: state.ks.object.clone(),
            encodings: state.ks.encodings.clone(),
            control: state.control.clone(),
            memory: state.memory.clone(),
            metrics: state.metrics.clone(),
            state: Arc::new(Mutex::new(state)),
            clock,
            settings: parking_lot::RwLock::new(EngineSettings {
                busy_reply_threshold: Duration::from_millis(5000),
            }),
            cluster: OnceLock::new(),
            single: std::sync::atomic::AtomicBool::new(false),
            no_good_replicas: std::sync::atomic::AtomicBool::new(false),
            advanced_ms: AtomicU64::new(0),
        })
    }

    /// The state machine a Raft node replicates into: the same state this engine reads.
    pub fn replicated_state(&self) -> Arc<ReplicatedState> {
        Arc::new(ReplicatedState::new(self.state.clone()))
    }

    /// Switch to Raft: from now on batches go through `node` (once; later calls are ignored).
    /// `single`: a durable single node, which reports itself as standalone while it has no
    /// other members.
    pub fn attach_cluster(&self, node: ClusterNode, single: bool) {
        self.single.store(single, Ordering::Release);
        self.pubsub.set_replicated();
        let log = node.log_memory();
        self.memory.set_not_counted(move || log.bytes() as usize);
        let _ = self.cluster.set(node);
    }

    /// The ACL users.
    pub fn acl(&self) -> &Arc<crate::acl::Acl> {
        &self.acl
    }

    /// This node's pub/sub subscribers.
    pub fn pubsub(&self) -> &Arc<crate::pubsub::Hub> {
        &self.pubsub
    }

    /// The thresholds of the compact encodings (`hash-max-listpack-entries`, ...).
    pub fn encodings(&self) -> &Arc<crate::store::encoding::Encodings> {
        &self.encodings
    }

    /// The `maxmemory` limit, policy and eviction counter.
    pub fn memory(&self) -> &Arc<MemoryControl> {
        &self.memory
    }

    /// The Raft node, in cluster mode.
    pub fn cluster(&self) -> Option<&ClusterNode> {
        self.cluster.get()
    }

    /// `cluster` or `standalone`, as HELLO's `mode` and INFO's `redis_mode` say.
    pub fn mode_name(&self) -> &'static str {
        if self.is_cluster() {
            "cluster"
        } else {
            "standalone"
        }
    }

    /// Whether this node serves as a cluster member (CLUSTER commands, `redis_mode`): a node
    /// started with `--node-id`, or a durable single node once it has other members.
    pub fn is_cluster(&self) -> bool {
        match self.cluster.get() {
            None => false,
            Some(node) => !self.single.load(Ordering::Acquire) || node.has_other_members(),
        }
    }

    /// The time local reads use: the local clock, or in cluster mode never earlier than the
    /// newest leader-stamped time applied here.
    pub fn now_ms(&self) -> u64 {
        self.now_us() / 1000
    }

    /// [`Engine::now_ms`] in microseconds.
    pub fn now_us(&self) -> u64 {
        let local = self.clock.now_us();
        match self.cluster.get() {
            Some(node) => local.max(node.clock_floor_us()),
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

    /// DEBUG FREEZE-TIME: stop or restart the wall clock's part of this node's time. A
    /// cluster's time comes from the leader's Raft clock, which this does not stop.
    pub fn freeze_time(&self, on: bool) -> Result<(), &'static str> {
        if self.cluster.get().is_some() {
            return Err("ERR DEBUG FREEZE-TIME works on an in-memory node only (a cluster's time is its leader's clock)");
        }
        self.clock.freeze(on);
        Ok(())
    }

    /// What this server counts about its commands.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// The engine's clock.
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// What OBJECT ENCODING and REFCOUNT judge by from now on (at start and after every
    /// CONFIG SET).
    pub fn set_object_settings(&self, s: crate::store::encoding::ObjectSettings) {
        *self.object.write() = s;
    }

    /// Whether writes are refused for want of replicas (`min-replicas-to-write` set on a
    /// standalone server; see `Keyspace::no_good_replicas`). Never on a Raft node.
    pub fn set_no_good_replicas(&self, refused: bool) {
        let refused = refused && self.cluster.get().is_none();
        self.state.lock().ks.no_good_replicas = refused;
        self.no_good_replicas.store(refused, Ordering::Relaxed);
    }

    /// Whether writes are refused for want of replicas now (see [`Engine::set_no_good_replicas`]).
    pub fn no_good_replicas(&self) -> bool {
        self.no_good_replicas.load(Ordering::Relaxed)
    }

    /// Bytes of the two Lua VMs and of the keyspace's tables now (`Keyspace::table_bytes`),
    /// taken once at start: their growth since is INFO `used_memory_overhead`.
    pub fn overhead_parts(&self) -> (usize, usize) {
        let state = self.state.lock();
        let (eval, functions) = state.scripts.used_memory();
        (eval + functions, state.ks.table_bytes())
    }

    /// Change the longest sparse HyperLogLog (CONFIG SET hll-sparse-max-bytes).
    pub fn set_hll_sparse_max_bytes(&self, n: u64) {
        self.state.lock().ks.hll_sparse_max_bytes = usize::try_from(n).unwrap_or(usize::MAX);
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
            // Boxed: a `Sleep` is a few hundred bytes that every future awaiting `acquire`
            // (a blocking command's, boxed per call by `on_client!`) would otherwise carry.
            Box::pin(tokio::time::sleep(Duration::from_millis(1))).await;
        }
    }

    /// Redis's BUSY text while a script has run past `busy-reply-threshold` (a command
    /// queued in MULTI, or EXEC, is then refused with it, as Redis's `processCommand`
    /// refuses every command without `allow-busy`).
    pub fn busy(&self) -> Option<&'static str> {
        scripting::busy_error(&self.control, self.busy_threshold())
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
            // Boxed: the replicated path's future is about 2 KiB, which every future that
            // awaits `execute` would otherwise carry: a blocking command's (BLPOP & co.),
            // which `on_client!` boxes, copying it whole, on every call (2,560 bytes before,
            // 520 after, with `acquire`'s boxed sleep), and every connection's. The box
            // costs a cluster batch one allocation.
            return Box::pin(self.execute_replicated(node, batch)).await;
        }
        self.execute_local(batch, None).await
    }

    /// Run a blocking command's one-command `batch`; when it finds nothing to pop, the
    /// waiter `make` builds (given the command's arguments) is left blocked on its keys
    /// and returned. Standalone, `make` gets the batch's own argument list once the batch
    /// has run (no copy); in a cluster, a copy (the batch goes to the log). Standalone this is
    /// atomic with the engine's serving of blocked clients (one lock), and the waiter is
    /// built only when the pop found nothing (a pop that finds data, the common case under
    /// load, allocates no waiter); in a cluster the waiter is registered before the pop is
    /// proposed, so an entry applied meanwhile still wakes it.
    pub async fn execute_blocking(
        &self,
        mut batch: Batch,
        make: impl FnOnce(Vec<Bytes>) -> Arc<crate::pubsub::blocking::Waiter>,
    ) -> (BatchResult, Option<Arc<crate::pubsub::blocking::Waiter>>) {
        let first_nothing = |r: &BatchResult| {
            r.replies
                .as_ref()
                .and_then(|r| r.first())
                .is_some_and(blocking::nothing)
        };
        let command_args = |op: Option<Op>| match op {
            Some(Op::Command(args, _)) => args,
            _ => Vec::new(),
        };
        if let Some(node) = self.cluster.get() {
            let waiter = make(command_args(batch.ops.first().cloned()));
            self.pubsub.blocking.block(&waiter);
            // `execute`'s replicated path, boxed here rather than through `execute`, whose
            // standalone half would otherwise add 400 bytes to this future (848 bytes
            // against 520), which `on_client!` boxes and copies on every call.
            let result = Box::pin(self.execute_replicated(node, batch)).await;
            if !first_nothing(&result) {
                self.pubsub.blocking.unblock(&waiter);
                return (result, None);
            }
            return (result, Some(waiter));
        }
        let mut guard = match self.acquire(true).await {
            Ok(g) => g,
            Err(text) => {
                return (
                    BatchResult::ran(Some(vec![Reply::err(text)]), batch.db),
                    None,
                )
            }
        };
        let now_us = self.clock.reserve_us(batch.ops.len() as u64);
        let stamp = guard.local_stamp(now_us);
        let mut result = apply_batch(&mut guard, &batch, stamp, true);
        let waiter = first_nothing(&result).then(|| {
            let waiter = make(command_args(batch.ops.pop()));
            self.pubsub.blocking.block(&waiter);
            waiter
        });
        blocking::serve_ready(&mut guard, stamp);
        // The op list goes back to the connection, emptied, as `execute_local`'s does.
        batch.ops.clear();
        result.spare = batch.ops;
        (result, waiter)
    }

    /// Raft: reads after a read barrier (none needed while this node is the only voter and
    /// has applied everything acknowledged), everything else through the Raft log.
    async fn execute_replicated(&self, node: &ClusterNode, batch: Batch) -> BatchResult {
        if batch.read_only() {
            if !node.is_sole_voter() {
                if let Err(e) = node.read_barrier().await {
                    return self.counted(cluster_error(&batch, &e));
                }
            }
            let now = self.now_us();
            return self.execute_local(batch, Some(now)).await;
        }
        if node.is_sole_voter() {
            // Alone, as on a standalone server: a write that arrives while a script has run
            // past `busy-reply-threshold` is answered -BUSY rather than queued behind it.
            if let Some(text) = scripting::busy_error(&self.control, self.busy_threshold()) {
                return BatchResult::ran(
                    Some(vec![Reply::err(text); batch.reply_count()]),
                    batch.db,
                );
            }
        }
        let (batch, refused) = match self.memory.excess() {
            None => (batch, Vec::new()),
            Some(_) => match self.admit_over_limit(batch).await {
                Ok(admitted) => admitted,
                Err(result) => return result,
            },
        };
        if self.pubsub.monitors.active() {
            feed_proposed(&self.pubsub, &batch);
        }
        let n = batch.reply_count();
        let db = batch.db;
        if n == 0 && !refused.is_empty() {
            // Every command was refused: nothing to propose.
            return merge_refused(
                BatchResult::ran(Some(Vec::new()), final_db(&batch)),
                refused,
            );
        }
        let result = match node.propose(Proposal::from_batch(batch)).await {
            Ok(result) => result,
            Err(e) => self.counted(BatchResult::ran(Some(vec![cluster_error_reply(&e); n]), db)),
        };
        merge_refused(result, refused)
    }

    /// Count the error replies of a batch that failed before it ran (`-CLUSTERDOWN`, ...).
    fn counted(&self, result: BatchResult) -> BatchResult {
        for r in result.replies.iter().flatten() {
            if let Reply::Error(e) = r {
                self.metrics.record_error(e);
            }
        }
        result
    }

    /// Cluster mode, with used memory over `maxmemory`: Redis's out-of-memory check of a
    /// batch, made here, before it is proposed, so that it is decided once. If the leader
    /// can evict (an evicting policy and keys it may take) the batch goes ahead and the
    /// leader's eviction catches up. Otherwise each command that [`memory::denies_oom`] is
    /// answered `-OOM` here and left out of the entry (a transaction holding one is refused
    /// whole), and the rest run in the out-of-memory state (an [`Op::OutOfMemory`] first).
    /// Returns the batch to propose and, per command of the original batch, the refusal
    /// that replaces its reply.
    async fn admit_over_limit(
        &self,
        mut batch: Batch,
    ) -> Result<(Batch, Vec<Option<Reply>>), BatchResult> {
        let denied: Vec<bool> = {
            let state = self.lock().await;
            let policy = self.memory.policy();
            if policy.evicts() && policy.has_candidates(&state.ks) {
                self.memory.wake_if_over();
                return Ok((batch, Vec::new()));
            }
            batch
                .ops
                .iter()
                .filter(|op| matches!(op, Op::Command(..) | Op::Frame(..)))
                .map(|op| memory::op_denies_oom(&state.scripts, op))
                .collect()
        };
        if batch.transaction && denied.contains(&true) {
            return Err(BatchResult {
                replies: Some(Vec::new()),
                db: batch.db,
                aborted: Some(Reply::err(memory::OOM_ERROR)),
                spare: Vec::new(),
            });
        }
        let mut refused = Vec::with_capacity(denied.len());
        let mut kept = Vec::with_capacity(batch.ops.len() + 1);
        kept.push(Op::OutOfMemory);
        let mut denied = denied.into_iter();
        for op in batch.ops {
            if matches!(op, Op::Command(..) | Op::Frame(..)) {
                if denied.next() == Some(true) {
                    refused.push(Some(Reply::err(memory::OOM_ERROR)));
                    continue;
                }
                refused.push(None);
            }
            kept.push(op);
        }
        batch.ops = kept;
        Ok((batch, refused))
    }

    /// Whether memory is over `maxmemory` with nothing eviction can free (standalone, after
    /// evicting what it can), Redis's out-of-memory state: then a `MULTI` queue takes no more
    /// commands.
    pub async fn out_of_memory(&self) -> bool {
        if self.memory.excess().is_none() {
            return false;
        }
        let mut state = self.lock().await;
        if self.cluster.get().is_some() {
            let policy = self.memory.policy();
            return !(policy.evicts() && policy.has_candidates(&state.ks));
        }
        memory::out_of_memory(&mut state)
    }

    /// Apply under the local lock, at `now` (µs; a cluster read after its barrier: never
    /// evicts) or the local clock (standalone).
    async fn execute_local(&self, batch: Batch, now: Option<u64>) -> BatchResult {
        let mut guard = match self.acquire(true).await {
            Ok(g) => g,
            Err(text) => {
                return BatchResult::ran(
                    Some(vec![Reply::err(text); batch.reply_count()]),
                    batch.db,
                )
            }
        };
        let standalone = now.is_none();
        let now_us = now.unwrap_or_else(|| self.clock.reserve_us(batch.ops.len() as u64));
        let stamp = guard.local_stamp(now_us);
        // Scripts too run right here: one that runs long hands this runtime worker to
        // another thread from its count hook (see `command::scripting`), so short ones
        // never pay for a thread switch.
        let mut result = apply_batch(&mut guard, &batch, stamp, standalone);
        if standalone {
            blocking::serve_ready(&mut guard, stamp);
        }
        drop(guard);
        result.spare = release(batch);
        result
    }

    /// Evict while used memory is over `maxmemory`: the background half of eviction (a
    /// standalone server also evicts before each command; this catches up after `CONFIG SET
    /// maxmemory` lowered the limit, say). In cluster mode only the leader evicts, by
    /// proposing [`Op::Evict`] entries until memory is under the limit (at most 64 entries a
    /// cycle). Returns how many keys were evicted (standalone) or proposed for eviction.
    pub async fn evict_cycle(&self) -> usize {
        if self.memory.excess().is_none() || !self.memory.policy().evicts() {
            return 0;
        }
        let Some(node) = self.cluster.get() else {
            let before = self.memory.evicted();
            let mut state = self.lock().await;
            memory::evict_inline(&mut state, 10 * memory::INLINE_BUDGET);
            return (self.memory.evicted() - before) as usize;
        };
        let mut total = 0;
        for _ in 0..64 {
            if !node.is_leader() || self.memory.excess().is_none() {
                break;
            }
            let ops = memory::choose_evictions(&mut *self.lock().await);
            let n: usize = ops
                .iter()
                .map(|op| match op {
                    Op::Evict { keys, .. } => keys.len(),
                    _ => 0,
                })
                .sum();
            if n == 0 {
                break;
            }
            tracing::debug!(keys = n, excess = ?self.memory.excess(), "proposing evictions");
            let batch = Batch {
                db: 0,
                resp: 2,
                ops,
                watch: None,
                transaction: false,
                client: None,
            };
            if node.propose(Proposal::from_batch(batch)).await.is_err() {
                break;
            }
            total += n;
        }
        total
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
            // The leader's scan for due keys is its `expire-cycle` latency event (the
            // deletions are applied from the log like any write).
            let started = crate::metrics::now_ns();
            let ops: Vec<Op> = {
                let Some(mut state) = self.state.try_lock() else {
                    return 0;
                };
                state
                    .ks
                    .dbs
                    .iter_mut()
                    .enumerate()
                    .map(|(db, d)| (db, d.due_keys(now, limit)))
                    .filter(|(_, keys)| !keys.is_empty())
                    .map(|(db, keys)| Op::PurgeExpired { db, keys })
                    .collect()
            };
            let elapsed = crate::metrics::now_ns().saturating_sub(started);
            self.metrics.latency.add_if_needed("expire-cycle", elapsed);
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
                transaction: false,
                client: None,
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
        // The latency monitor's `expire-cycle` event (Redis's activeExpireCycle).
        let started = crate::metrics::now_ns();
        let deleted = state
            .ks
            .dbs
            .iter_mut()
            .map(|db| db.delete_expired(now, limit))
            .sum();
        let elapsed = crate::metrics::now_ns().saturating_sub(started);
        self.metrics.latency.add_if_needed("expire-cycle", elapsed);
        deleted
    }
}

/// Drop a batch that ran. A pipeline's operations are almost all frames, whose drop is
/// one reference count of the read they were parsed from: dropped here, that is inlined,
/// where the batch's own drop called `Op`'s drop (a match over every variant) once per
/// operation. Gives back the emptied list (`BatchResult::spare`).
fn release(batch: Batch) -> Vec<Op> {
    let mut ops = batch.ops;
    for op in ops.drain(..) {
        match op {
            Op::Frame(frame, _) => drop(frame),
            op => drop(op),
        }
    }
    ops
}

/// Every command of `batch` answered with `e` (CLUSTERDOWN when the cluster has no quorum).
fn cluster_error(batch: &Batch, e: &ClusterError) -> BatchResult {
    BatchResult::ran(
        Some(vec![cluster_error_reply(e); batch.reply_count()]),
        batch.db,
    )
}

/// `result` of the commands that were proposed, with the `refused` ones' replies put back
/// in their places (`refused` has one slot per command of the original batch; empty when
/// none was refused).
fn merge_refused(mut result: BatchResult, refused: Vec<Option<Reply>>) -> BatchResult {
    if refused.is_empty() {
        return result;
    }
    if let Some(replies) = result.replies.take() {
        let mut ran = replies.into_iter();
        result.replies = Some(
            refused
                .into_iter()
                .map(|slot| slot.unwrap_or_else(|| ran.next().unwrap_or(Reply::Nil)))
                .collect(),
        );
    }
    result
}

/// The database selected after `batch` runs.
fn final_db(batch: &Batch) -> usize {
    batch.ops.iter().fold(batch.db, |db, op| match op {
        Op::Select(d) => *d,
        _ => db,
    })
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

/// MONITOR on a cluster node: the commands of a batch this node's client sends to the Raft
/// log, fed when it is proposed (they run later, on every node, where no client is known).
#[cold]
fn feed_proposed(hub: &crate::pubsub::Hub, batch: &Batch) {
    let Some(client) = &batch.client else {
        return;
    };
    let source = crate::pubsub::monitor::Source::Client(client.info.lock().addr);
    let feed = |db: &mut usize, spec: &CommandSpec, a: &[&[u8]]| {
        if spec.name == "select" {
            if let Some(d) = a
                .get(1)
                .and_then(|d| std::str::from_utf8(d).ok()?.parse().ok())
            {
                *db = d;
            }
        }
        hub.monitors.before(spec, a, *db, source);
        hub.monitors.after(spec, a, *db, source);
    };
    let mut db = batch.db;
    for op in &batch.ops {
        match op {
            Op::Command(args, Some(spec)) => command::with_slices(args, |a| feed(&mut db, spec, a)),
            Op::Frame(frame, spec) => frame.with_args(|a| feed(&mut db, spec, a)),
            Op::Select(d) => db = *d,
            _ => {}
        }
    }
}

/// Apply a batch to `state` at `stamp`, as a standalone server does (or a cluster
/// node answering reads, with `evict` false): the same deterministic core the replicated
/// state machine runs, plus `maxmemory` (with `evict`): eviction before each command, and
/// `-OOM` for the commands that may grow memory when nothing can be evicted. A transaction
/// is checked once, before it runs, and refused whole.
pub fn apply_batch(state: &mut State, batch: &Batch, stamp: Stamp, evict: bool) -> BatchResult {
    let now_ms = stamp.now_ms();
    let mut admission = Admission::Decided(false);
    if evict && state.memory.limit() > 0 {
        admission = Admission::PerCommand;
        if batch.transaction {
            state.ks.clock().set_now(now_ms);
            let oom = memory::out_of_memory(state);
            if oom
                && batch
                    .ops
                    .iter()
                    .any(|op| memory::op_denies_oom(&state.scripts, op))
            {
                return BatchResult {
                    replies: Some(Vec::new()),
                    db: batch.db,
                    aborted: Some(Reply::err(memory::OOM_ERROR)),
                    spare: Vec::new(),
                };
            }
            admission = Admission::Decided(oom);
        }
    }
    // `min-replicas-to-write` not met (standalone only): a transaction with a write is
    // refused whole, as Redis refuses its EXEC.
    if state.ks.no_good_replicas
        && batch.transaction
        && batch.ops.iter().any(|op| refused_for_replicas(state, op))
    {
        return BatchResult {
            replies: Some(Vec::new()),
            db: batch.db,
            aborted: Some(Reply::err(crate::store::NOREPLICAS)),
            spare: Vec::new(),
        };
    }
    if let Some(w) = &batch.watch {
        let expired = w
            .existed
            .iter()
            .any(|(db, key)| !state.ks.dbs[*db].contains(key, now_ms));
        if w.flag.load(Ordering::Relaxed) || expired {
            return BatchResult::ran(None, batch.db);
        }
    }
    // Standalone, clients blocked on keys a command made ready are served before the next
    // command of a pipeline (after the whole of a transaction), as in Redis.
    let origin = batch.client.as_deref();
    let serve = evict && !batch.transaction;
    apply_ops_with(
        state, batch.db, batch.resp, &batch.ops, stamp, admission, serve, origin,
    )
}

/// Whether `op` is a write refused because `min-replicas-to-write` is not met
/// (`Keyspace::no_good_replicas`; Redis's `is_write_command`, judged by Redis's `@write`).
fn refused_for_replicas(state: &State, op: &Op) -> bool {
    if !state.ks.no_good_replicas {
        return false;
    }
    match op {
        Op::Command(args, spec) => spec
            .or_else(|| args.first().and_then(|n| command::lookup(n)))
            .is_some_and(|spec| writes(spec, args)),
        Op::Frame(frame, spec) => frame.with_args(|a| call_writes(spec, a)),
        _ => false,
    }
}

/// Whether the call of `spec` with `args` writes (`call_writes` on owned arguments).
#[inline]
fn writes(spec: &CommandSpec, args: &[Bytes]) -> bool {
    command::with_slices(args, |a| call_writes(spec, a))
}

/// How the commands of a batch meet `maxmemory`.
#[derive(Clone, Copy)]
enum Admission {
    /// Decided before the batch ran: whether it runs in the out-of-memory state (a
    /// transaction, or a cluster entry, whose proposer refused the `denyoom` commands).
    Decided(bool),
    /// Standalone: before each command, evict if over the limit; out of memory when
    /// nothing can be evicted.
    PerCommand,
}

impl Admission {
    /// Whether the next command runs out of memory.
    fn out_of_memory(self, state: &mut State) -> bool {
        match self {
            Admission::Decided(oom) => oom,
            Admission::PerCommand => memory::out_of_memory(state),
        }
    }
}

/// Bring the keys of a batch's commands into the cache before running any of them (see
/// [`crate::store::Db::warm`]): the first key of each command. Commands whose keys depend
/// on their arguments (scripts, LIMIT.ALL) are left out: finding their keys means parsing
/// them twice (for LIMIT.ALL about 1100 instructions, more than warming saves).
fn warm_keys(state: &State, mut db: usize, ops: &[Op]) {
    for op in ops {
        let key = match op {
            Op::Select(d) => {
                db = *d;
                continue;
            }
            Op::PurgeExpired { .. }
            | Op::Evict { .. }
            | Op::OutOfMemory
            | Op::Acl(_)
            | Op::AsUser(_)
            | Op::Command(_, None) => continue,
            Op::Command(args, Some(spec)) => {
                spec.first_key().and_then(|i| args.get(i)).map(|k| &k[..])
            }
            Op::Frame(frame, spec) => spec.first_key().and_then(|i| frame.get(i)),
        };
        if let (Some(target), Some(key)) = (state.ks.dbs.get(db), key) {
            target.warm(key);
        }
    }
}

/// What a command of a batch runs against.
fn command_ctx(
    state: &mut State,
    db: usize,
    stamp: Stamp,
    position: usize,
    resp: u8,
    oom: bool,
) -> Ctx<'_> {
    Ctx {
        ks: &mut state.ks,
        db,
        now_ms: stamp.now_ms(),
        now_us: stamp.now_us + position as u64,
        seed: stamp.seed_at(position),
        resp,
        oom,
        scripts: Some(Scripts {
            engine: &mut state.scripts,
            control: &state.control,
        }),
        metrics: Some(&state.metrics),
        user: None,
        monitored: false,
        error_counted: false,
    }
}

/// The counters of the command a batch recorded last: batches often repeat one command (a
/// pipeline of INCRs, a MULTI of limiter calls), and finding a command's counters is the
/// dearest part of recording it.
type LastStats<'m> = Option<(*const CommandSpec, &'m crate::metrics::CommandStats)>;

/// The counters of a call of `spec` with `args`: the subcommand's for a container
/// (`SUBCOMMANDS`, resolved here once), else the row's, kept in `last` across a batch.
#[inline(always)]
fn counters<'m>(
    metrics: &'m Metrics,
    last: &mut LastStats<'m>,
    spec: &CommandSpec,
    args: impl FnOnce() -> &'m crate::metrics::CommandStats,
) -> &'m crate::metrics::CommandStats {
    if spec.has(flags::SUBCOMMANDS) {
        return args();
    }
    match *last {
        Some((at, stats)) if std::ptr::eq(at, spec) => stats,
        _ => {
            let stats = metrics.command(spec);
            *last = Some((spec, stats));
            stats
        }
    }
}

/// Count a call that ran from `started` until now and answered `reply` in `stats`
/// ([`counters`]); returns now and how long it ran. An error reply is counted in
/// errorstats unless `counted` (a script answering the error of its `redis.call`, see
/// `Ctx::error_counted`). Always inlined: as a call, saving and restoring registers cost
/// about 20 of its 67 instructions per command (callgrind, INCR).
#[inline(always)]
fn record(
    metrics: &Metrics,
    stats: &crate::metrics::CommandStats,
    started: u64,
    reply: &Reply,
    counted: bool,
) -> (u64, u64) {
    let now = crate::metrics::now_ns();
    let elapsed = now.saturating_sub(started);
    if let Reply::Error(e) = reply {
        stats.record(elapsed, true);
        if !counted {
            metrics.record_error(e);
        }
    } else {
        stats.record(elapsed, false);
    }
    (now, elapsed)
}

/// Put a command that ran for `elapsed` into the slow log, with its client's address and
/// name when it came from a connection of this node.
#[cold]
fn slow(
    metrics: &Metrics,
    args: &[&[u8]],
    elapsed_ns: u64,
    origin: Option<&crate::server::ClientHandle>,
) {
    let (addr, name) = origin.map_or_else(Default::default, |c| {
        let info = c.info.lock();
        (info.addr.to_string(), info.name.clone())
    });
    metrics
        .slowlog
        .push(args, Duration::from_nanos(elapsed_ns), addr, name);
}

/// Apply `ops` in order starting in database `db`, replies encoded for protocol `resp`: the
/// replicated state machine's apply (whatever `maxmemory` refuses was refused before the
/// entry was proposed).
pub fn apply_ops(state: &mut State, db: usize, resp: u8, ops: &[Op], stamp: Stamp) -> BatchResult {
    apply_ops_with(
        state,
        db,
        resp,
        ops,
        stamp,
        Admission::Decided(false),
        false,
        None,
    )
}

/// The CLIENT LIST line of a script's caller for ACL LOG, as Redis shows the client while
/// the script runs: its `cmd` and `argv-mem` are the script call's (`next`, the command
/// after `Op::AsUser`), or EXEC's inside a transaction (whose MULTI state EXEC keeps
/// published while it runs). The published line names the previous read's last command.
fn script_caller_line(client: &crate::server::ClientHandle, next: Option<&Op>) -> String {
    let mut info = client.info.lock().clone();
    if info.in_multi {
        info.last_cmd = "exec";
        info.argv_mem = "exec".len();
    } else if let Some(Op::Command(args, spec)) = next {
        if let Some(spec) = spec.or_else(|| args.first().and_then(|n| command::lookup(n))) {
            info.last_cmd =
                command::with_slices(args, |a| crate::acl::categories::call_name(spec, a));
        }
        info.argv_mem = args.iter().map(|a| a.len()).sum();
    }
    crate::server::info::client_line(&info)
}

// The batch's parts, passed apart because the replicated apply has no `Batch`.
#[allow(clippy::too_many_arguments)]
fn apply_ops_with(
    state: &mut State,
    db: usize,
    resp: u8,
    ops: &[Op],
    stamp: Stamp,
    mut admission: Admission,
    serve_blocked: bool,
    origin: Option<&crate::server::ClientHandle>,
) -> BatchResult {
    let now_ms = stamp.now_ms();
    state.ks.clock().set_now(now_ms);
    if ops.len() > 1 {
        warm_keys(state, db, ops);
    }
    let mut db = db;
    // Blocked clients are served between commands only when there are any. Standalone,
    // a client blocks only under the state's lock (`Engine::execute_blocking`), which this
    // batch holds, so none can start waiting while it runs: one load per batch instead of
    // one per command.
    let serve_blocked = serve_blocked && state.ks.pubsub.blocking.blocked() != 0;
    // The ACL user the scripts of this batch run as (`Op::AsUser`); None: every permission.
    let mut as_user: Option<crate::acl::ScriptUser> = None;
    let mut replies = Vec::with_capacity(ops.len());
    let metrics = state.metrics.clone();
    // One clock read per command: each one's time runs from the end of the previous one.
    let mut started = crate::metrics::now_ns();
    let mut last: LastStats = None;
    // MONITOR: the commands a client of this node runs (one atomic load when nobody
    // monitors; the replicated apply has no origin and feeds nothing).
    let monitor = match origin {
        Some(c) if state.ks.pubsub.monitors.active() => {
            Some((state.ks.pubsub.clone(), c.info.lock().addr))
        }
        _ => None,
    };
    for (position, op) in ops.iter().enumerate() {
        if serve_blocked && !replies.is_empty() {
            blocking::serve_ready(state, stamp);
        }
        match op {
            Op::Select(d) => db = *d,
            Op::PurgeExpired { db: d, keys } => {
                if let Some(target) = state.ks.dbs.get_mut(*d) {
                    for k in keys {
                        target.purge_if_expired(k, now_ms);
                    }
                }
            }
            Op::Evict { db: d, keys } => memory::apply_evictions(state, *d, keys),
            Op::OutOfMemory => admission = Admission::Decided(true),
            Op::Acl(change) => replies.push(crate::acl::apply(&state.acl, change)),
            Op::AsUser(name) => {
                let user = state
                    .acl
                    .get(name)
                    .unwrap_or_else(|| Arc::new(crate::acl::User::new(name)));
                let client = origin.map(|h| script_caller_line(h, ops.get(position + 1)));
                as_user = Some(crate::acl::ScriptUser {
                    user,
                    acl: state.acl.clone(),
                    client_info: client.unwrap_or_default(),
                });
            }
            Op::Command(args, spec) => {
                let oom = admission.out_of_memory(state);
                let name = args.first().map_or(&b""[..], |n| &n[..]);
                let spec = spec.or_else(|| command::lookup(name));
                let refusal = if oom && memory::op_denies_oom(&state.scripts, op) {
                    Some(memory::OOM_ERROR)
                } else if state.ks.no_good_replicas && spec.is_some_and(|spec| writes(spec, args)) {
                    Some(crate::store::NOREPLICAS)
                } else {
                    None
                };
                if let Some(text) = refusal {
                    if let Some(spec) = spec {
                        metrics.record_rejected(spec);
                    }
                    metrics.record_error(text);
                    replies.push(Reply::err(text));
                    continue;
                }
                if let (Some((hub, addr)), Some(spec)) = (&monitor, spec) {
                    let source = crate::pubsub::monitor::Source::Client(*addr);
                    command::with_slices(args, |a| hub.monitors.before(spec, a, db, source));
                }
                let mut next_db = db;
                let mut counted = false;
                let reply = poison::guarded(state, name, |state| {
                    poison::check_trigger(args);
                    let mut ctx = command_ctx(state, db, stamp, position, resp, oom);
                    ctx.user = as_user.as_ref();
                    ctx.monitored = monitor.is_some();
                    let reply = match spec {
                        Some(spec) => command::execute_spec(&mut ctx, spec, args),
                        None => command::execute(&mut ctx, args),
                    };
                    // SELECT inside MULTI changes the database of the commands after it.
                    next_db = ctx.db;
                    counted = ctx.error_counted;
                    reply
                });
                db = next_db;
                if let (Some((hub, addr)), Some(spec)) = (&monitor, spec) {
                    let source = crate::pubsub::monitor::Source::Client(*addr);
                    command::with_slices(args, |a| hub.monitors.after(spec, a, db, source));
                }
                if let Some(spec) = spec {
                    let stats = counters(&metrics, &mut last, spec, || {
                        command::with_slices(args, |a| metrics.subcommand(spec, a))
                    });
                    let elapsed;
                    (started, elapsed) = record(&metrics, stats, started, &reply, counted);
                    if metrics.is_notable(elapsed) && metrics.note_command(spec, elapsed) {
                        command::with_slices(args, |a| slow(&metrics, a, elapsed, origin));
                    }
                }
                replies.push(reply);
            }
            Op::Frame(frame, spec) => {
                let oom = admission.out_of_memory(state);
                if oom && spec.has(flags::DENYOOM) {
                    metrics.record_rejected(spec);
                    metrics.record_error(memory::OOM_ERROR);
                    replies.push(Reply::err(memory::OOM_ERROR));
                    continue;
                }
                if state.ks.no_good_replicas && frame.with_args(|a| call_writes(spec, a)) {
                    metrics.record_rejected(spec);
                    metrics.record_error(crate::store::NOREPLICAS);
                    replies.push(Reply::err(crate::store::NOREPLICAS));
                    continue;
                }
                let reply = poison::guarded(state, spec.name.as_bytes(), |state| {
                    let mut ctx = command_ctx(state, db, stamp, position, resp, oom);
                    // The connection checked the arity, and only specs with a fast handler
                    // make frames.
                    match spec.fast {
                        Some(fast) => frame.with_args(|args| fast(&mut ctx, args)),
                        None => command::execute_spec(&mut ctx, spec, &frame.clone().into_args()),
                    }
                });
                if let Some((hub, addr)) = &monitor {
                    let source = crate::pubsub::monitor::Source::Client(*addr);
                    frame.with_args(|a| hub.monitors.after(spec, a, db, source));
                }
                let stats = counters(&metrics, &mut last, spec, || {
                    frame.with_args(|a| metrics.subcommand(spec, a))
                });
                let elapsed;
                (started, elapsed) = record(&metrics, stats, started, &reply, false);
                if metrics.is_notable(elapsed) && metrics.note_command(spec, elapsed) {
                    frame.with_args(|a| slow(&metrics, a, elapsed, origin));
                }
                replies.push(reply);
            }
        }
    }
    BatchResult::ran(Some(replies), db)
}
