//! The API the server uses: [`RaftNode`] starts a node from its [`Config`] and a
//! [`StateMachine`], forms the cluster from the static peer list, and offers `propose` (callable
//! on any node), `read_barrier` (linearizable reads), leadership, status and membership admin.
//! Every wait is bounded by the configured client timeout.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openraft::error::{Fatal, InitializeError, RaftError};
use openraft::metrics::RaftServerMetrics;
use openraft::metrics::WaitError;
use openraft::{BasicNode, Raft, RaftMetrics, ServerState};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::clock::LeaderClock;
use crate::config::Config;
use crate::error::ClusterError;
use crate::forwarder::{link_error, remote_error, unexpected, Forwarder};
use crate::local::Local;
use crate::log_store::{LogHandle, LogStore};
use crate::network::{NetworkFactory, PeerHealth};
use crate::proposer::{Gate, Proposer, ReadIndexer};
use crate::repair::Repair;
use crate::service::{await_reply, Service};
use crate::state_machine::{SnapshotInfo, SnapshotStats, StateMachine, StateMachineStore};
use crate::stats::RaftStats;
use crate::transport::{AdminOp, Request, Response, Transport};
use crate::types::{
    ClusterStatus, CommandResult, FollowerProgress, Leadership, Member, NodeId, Role, TypeConfig,
};

/// How long a write on a node that is its only voter waits for leadership and retries (see
/// `propose_encoded`); once handed to this node's own log it waits for its entry with no timer.
const SOLE_VOTER_WAIT: Duration = Duration::from_secs(3600);

/// Pause between retries of a request that certainly had no effect (leader changing).
const RETRY_PAUSE: Duration = Duration::from_millis(20);

/// A running Raft node replicating state machine `S`. Cheap to clone.
pub struct RaftNode<S: StateMachine> {
    inner: Arc<Inner<S>>,
}

impl<S: StateMachine> Clone for RaftNode<S> {
    fn clone(&self) -> Self {
        RaftNode {
            inner: self.inner.clone(),
        }
    }
}

struct Inner<S: StateMachine> {
    id: NodeId,
    config: Config,
    raft: Raft<TypeConfig>,
    sm: Arc<S>,
    transport: Arc<Transport>,
    proposer: Proposer,
    reader: ReadIndexer,
    forwarder: Forwarder,
    service: Service,
    log: LogHandle,
    clock: Arc<LeaderClock>,
    leadership: watch::Receiver<Leadership>,
    leadership_tx: Arc<watch::Sender<Leadership>>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    stopping: AtomicBool,
    repair: Arc<Repair>,
    health: Arc<PeerHealth>,
    /// Where the cluster listener binds.
    bind: String,
    /// Whether the cluster listener is bound (see [`RaftNode::listen`]).
    listening: tokio::sync::Mutex<bool>,
    snapshot_stats: Arc<SnapshotStats>,
    stats: Arc<RaftStats>,
    /// openraft's metrics, kept to be read without cloning a receiver per call.
    metrics: watch::Receiver<RaftMetrics<NodeId, BasicNode>>,
}

/// Reads how many bytes of log entries a node holds in memory (cheap to clone; holds no
/// reference to the node or its state machine).
#[derive(Clone)]
pub struct LogMemory(LogHandle);

impl LogMemory {
    /// Bytes of the log entries held in memory (those not yet behind a snapshot).
    pub fn bytes(&self) -> u64 {
        self.0.live_bytes()
    }
}

impl<S: StateMachine> RaftNode<S> {
    /// A handle on the size of this node's in-memory log (callers that size memory limits
    /// leave it out, as Redis leaves out its AOF and replication buffers).
    pub fn log_memory(&self) -> LogMemory {
        LogMemory(self.inner.log.clone())
    }

    /// Open the node's storage under `config.data_dir` (restoring the latest snapshot and
    /// replaying the log into `state_machine`), listen on the cluster address, and join the
    /// cluster formed by `config.peers` (every node initializes with the same list; openraft
    /// makes that idempotent, and a restarted node skips it).
    pub async fn start(config: Config, state_machine: Arc<S>) -> Result<Self, ClusterError> {
        config.validate()?;
        let id = config.node_id;
        let clock = Arc::new(LeaderClock::new());

        let compact_min = config.log_compact_min_bytes;
        let stats = Arc::new(RaftStats::default());
        let (dir, fsync, c, sm, st) = (
            config.data_dir.clone(),
            config.fsync,
            clock.clone(),
            state_machine.clone(),
            stats.clone(),
        );
        let (log_store, sm_store, repair) = tokio::task::spawn_blocking(move || {
            let repair = Arc::new(Repair::open(&dir.join("repair"))?);
            let mut sm = StateMachineStore::open(sm, &dir.join("snapshots"), c.clone())?;
            sm.set_stats(st.clone());
            let log = LogStore::open(
                &dir.join("log"),
                fsync,
                compact_min,
                c,
                repair.clone(),
                sm.applied(),
                st,
            )?;
            log.forget_own_leadership(id);
            Ok::<_, std::io::Error>((log, sm, repair))
        })
        .await
        .map_err(|e| ClusterError::Startup(e.to_string()))?
        .map_err(|e| {
            ClusterError::Startup(format!("opening {}: {e}", config.data_dir.display()))
        })?;
        let log = log_store.handle();
        let snapshot_stats = sm_store.stats();
        let mut raft_config = config.openraft_config()?;
        // Elections start behind a pre-vote (`prevote::run_elector`), never on openraft's
        // own timer.
        raft_config.enable_elect = false;
        if let Some(status) = repair.status() {
            // One line that says it all; the details were found by the storage.
            tracing::error!(
                node = id,
                reasons = ?status.reasons.iter().map(|r| r.as_str()).collect::<Vec<_>>(),
                "raft node {id} is REPAIRING: {}. It keeps what it has, replicates from the \
                 leader, and neither votes nor campaigns until it has {status}; then it votes \
                 again by itself",
                status.detail
            );
        }
        let raft_config = Arc::new(raft_config);

        let bind = config
            .bind_addr
            .clone()
            .unwrap_or_else(|| config.cluster_addr.clone());
        let transport = Transport::new(
            id,
            config.secret.clone(),
            config.max_frame_bytes,
            config.advertise.clone(),
            config.tls.clone(),
        );

        let health = Arc::new(PeerHealth::default());
        let network = NetworkFactory {
            transport: transport.clone(),
            health: health.clone(),
        };
        let raft = Raft::new(id, raft_config, network, log_store, sm_store)
            .await
            .map_err(|e| ClusterError::Startup(e.to_string()))?;

        let gate = Gate::new();
        let (proposer, batcher_task) = Proposer::spawn(
            raft.clone(),
            clock.clone(),
            config.max_batch_commands,
            config.max_entry_bytes(),
            config.max_inflight_batches,
            gate.clone(),
        );
        let (reader, reader_task) =
            ReadIndexer::spawn(raft.clone(), config.client_timeout, gate.clone());
        let (forwarder, forwarder_task) =
            Forwarder::spawn(transport.clone(), config.max_entry_bytes(), stats.clone());
        let service = Service {
            node_id: id,
            raft: raft.clone(),
            proposer: proposer.clone(),
            reader: reader.clone(),
            gate,
            transfer_lock: Default::default(),
            transport: transport.clone(),
            client_timeout: config.client_timeout,
            admin_timeout: admin_timeout(&config),
            leader_lease: Duration::from_millis(config.election_timeout_max_ms),
            election_timeout_min: Duration::from_millis(config.election_timeout_min_ms),
            repair: repair.clone(),
            health: health.clone(),
            responsive_within: responsive_within(&config),
            clocks: Default::default(),
            timing: crate::prevote::Timing {
                election_timeout_min: Duration::from_millis(config.election_timeout_min_ms),
                election_timeout_max: Duration::from_millis(config.election_timeout_max_ms),
                heartbeat: Duration::from_millis(config.heartbeat_interval_ms),
            },
        };
        let elector_task = tokio::spawn(crate::prevote::run_elector(
            id,
            raft.clone(),
            transport.clone(),
            service.clocks.clone(),
            repair.clone(),
            service.timing,
        ));
        let (leadership_tx, watch_task) =
            watch_leadership(id, raft.server_metrics(), stats.clone());
        let leadership = leadership_tx.subscribe();
        let learn_task = learn_advertised(id, raft.clone(), transport.clone());

        let raft_metrics = raft.metrics();
        let node = RaftNode {
            inner: Arc::new(Inner {
                id,
                config,
                raft,
                sm: state_machine,
                transport,
                proposer,
                reader,
                forwarder,
                service,
                log,
                clock,
                leadership,
                leadership_tx,
                tasks: Mutex::new(vec![
                    batcher_task,
                    reader_task,
                    forwarder_task,
                    watch_task,
                    learn_task,
                    elector_task,
                ]),
                stopping: AtomicBool::new(false),
                repair,
                health,
                bind,
                listening: tokio::sync::Mutex::new(false),
                snapshot_stats,
                stats,
                metrics: raft_metrics,
            }),
        };
        // A node that already has other members must be reachable at once, whatever it was
        // told: they replicate to it, forward to it, and may elect it.
        if node.inner.config.listen_at_start || node.stored_other_members().await? {
            node.listen().await?;
        }
        node.bootstrap().await?;
        Ok(node)
    }

    /// Form the cluster from the static peer list, once.
    async fn bootstrap(&self) -> Result<(), ClusterError> {
        let peers = &self.inner.config.peers;
        if peers.is_empty() {
            return Ok(());
        }
        let raft = &self.inner.raft;
        if raft
            .is_initialized()
            .await
            .map_err(|e| ClusterError::Startup(e.to_string()))?
        {
            return Ok(());
        }
        let members: BTreeMap<NodeId, BasicNode> = peers
            .iter()
            .map(|(id, addr)| (*id, BasicNode { addr: addr.clone() }))
            .collect();
        match raft.initialize(members).await {
            Ok(()) | Err(RaftError::APIError(InitializeError::NotAllowed(_))) => Ok(()),
            Err(e) => Err(ClusterError::Startup(format!("initializing cluster: {e}"))),
        }
    }

    /// What this node counts about its Raft work (fsyncs, entries, elections, ...).
    pub fn stats(&self) -> &Arc<RaftStats> {
        &self.inner.stats
    }

    /// This node's id.
    pub fn id(&self) -> NodeId {
        self.inner.id
    }

    /// Bind the cluster listener and start answering peers, if not done yet. A node started
    /// with [`Config::listen_at_start`] false calls this before it adds another node.
    pub async fn listen(&self) -> Result<(), ClusterError> {
        let mut listening = self.inner.listening.lock().await;
        if *listening {
            return Ok(());
        }
        let bind = &self.inner.bind;
        let listener = TcpListener::bind(bind)
            .await
            .map_err(|e| ClusterError::Startup(format!("binding cluster port {bind}: {e}")))?;
        let task = self
            .inner
            .transport
            .serve(listener, Arc::new(self.inner.service.clone()));
        self.inner
            .tasks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(task);
        *listening = true;
        tracing::info!(node = self.inner.id, addr = %bind, "cluster port bound");
        Ok(())
    }

    /// Whether the cluster listener is bound.
    pub fn is_listening(&self) -> bool {
        self.inner.listening.try_lock().map_or(true, |l| *l)
    }

    /// Whether the membership loaded from storage names any node but this one (asked of
    /// Raft's core, so it answers only after the core has loaded its state).
    async fn stored_other_members(&self) -> Result<bool, ClusterError> {
        let id = self.inner.id;
        self.inner
            .raft
            .with_raft_state(move |st| {
                st.membership_state
                    .effective()
                    .membership()
                    .nodes()
                    .any(|(m, _)| *m != id)
            })
            .await
            .map_err(|e| ClusterError::Startup(e.to_string()))
    }

    /// Whether the membership (voters and learners) names any node but this one.
    pub fn has_other_members(&self) -> bool {
        let metrics = self.inner.raft.metrics();
        let m = metrics.borrow();
        let others = m
            .membership_config
            .membership()
            .nodes()
            .any(|(id, _)| *id != self.inner.id);
        others
    }

    /// True while this node leads, is the only voter (learners aside), and has applied an
    /// entry of its own term: then every acknowledged write has been applied here, and reads
    /// need no read barrier. Any membership change goes through this leader, which sees it in
    /// its metrics before the change can take effect anywhere else.
    pub fn is_sole_voter(&self) -> bool {
        self.sole_voter(&self.inner.metrics.borrow())
    }

    /// [`RaftNode::is_sole_voter`], and whether this node leads and runs (a write may go to
    /// its own batcher at once, as `wait_for_leader` would find), from one look at the
    /// metrics: each look is about 85 instructions of every write (callgrind).
    fn leads_alone(&self) -> (bool, bool) {
        let m = self.inner.metrics.borrow();
        let leads = !self.inner.stopping.load(Ordering::Acquire)
            && m.running_state.is_ok()
            && m.state == ServerState::Leader
            && m.current_leader == Some(self.inner.id);
        (self.sole_voter(&m), leads)
    }

    fn sole_voter(&self, m: &RaftMetrics<NodeId, BasicNode>) -> bool {
        // Called for every write (twice): the receiver is kept rather than cloned, and the
        // voter check walks the joint configuration in place (`Membership::voter_ids` builds
        // a set: it was 6% of a durable node's instructions per INCR under callgrind).
        let id = self.inner.id;
        // Entries of earlier terms (replayed at start, or committed by an earlier leader) are
        // all applied once an entry of this leader's own term is.
        m.state == ServerState::Leader
            && m.current_leader == Some(id)
            && m.last_applied
                .is_some_and(|l| l.leader_id.term == m.current_term)
            && m.membership_config
                .membership()
                .get_joint_config()
                .iter()
                .all(|voters| voters.iter().all(|v| *v == id))
    }

    /// True while this node leads and is the only member at all (no voter nor learner else):
    /// nothing it applies is ever applied by another node from its log entries.
    pub fn is_only_member(&self) -> bool {
        self.is_sole_voter() && !self.has_other_members()
    }

    /// The state machine this node applies to (read it after `read_barrier`).
    pub fn state_machine(&self) -> &Arc<S> {
        &self.inner.sm
    }

    /// The underlying openraft handle, for metrics or operations this API does not cover.
    pub fn raft(&self) -> &Raft<TypeConfig> {
        &self.inner.raft
    }

    /// The leader clock's floor: the highest entry time seen or issued here, in microseconds.
    pub fn clock_floor_us(&self) -> u64 {
        self.inner.clock.floor()
    }

    /// Fault injection: shift this node's wall clock by `skew_ms` when it stamps entries as
    /// leader (stamps still never go backwards).
    pub fn set_clock_skew_ms(&self, skew_ms: i64) {
        self.inner.clock.set_skew_ms(skew_ms);
    }

    /// Replicate `cmd` and return its output. Works on any node: a follower forwards it to the
    /// leader. Commands arriving together share one entry.
    pub async fn propose(&self, cmd: S::Command) -> Result<S::Output, ClusterError> {
        let mut outputs = self.propose_many(vec![cmd]).await?;
        outputs
            .pop()
            .ok_or_else(|| ClusterError::Codec("no output for command".into()))
    }

    /// Replicate `cmds` as one unit in one entry (applied back to back, nothing in between).
    pub async fn propose_many(
        &self,
        cmds: Vec<S::Command>,
    ) -> Result<Vec<S::Output>, ClusterError> {
        if cmds.is_empty() {
            return Ok(Vec::new());
        }
        let encoded = encode_all::<S>(&cmds)?;
        self.propose_encoded(encoded, cmds).await
    }

    /// Propose the encoded `commands`; `typed` are the same commands, handed to this node's
    /// state machine beside the bytes when this node leads (see `local`), which then answers
    /// with their outputs as it applies them. A follower's proposal is answered with encoded
    /// outputs from the leader, decoded here.
    async fn propose_encoded(
        &self,
        mut commands: Vec<bytes::Bytes>,
        typed: Vec<S::Command>,
    ) -> Result<Vec<S::Output>, ClusterError> {
        let bytes: usize = commands.iter().map(bytes::Bytes::len).sum();
        let max = self.inner.config.max_entry_bytes();
        if bytes > max {
            return Err(ClusterError::TooLarge { bytes, max });
        }
        let mut typed = Some(typed);
        let started = Instant::now();
        // Alone, nothing but this node's own disk and state machine can hold a write up (a
        // long script, say): wait as a standalone server would, not a quorum's timeout. Such
        // a wait has no timer at all: arming and dropping one cost about 600 instructions
        // per write (callgrind), and the answer comes anyway, from the apply or, when Raft
        // stops, from the write batcher dropping the unit (`proposer::TypedWaiter`).
        let (alone, mut leads) = self.leads_alone();
        // With `always`, the only voter fsyncs each entry on the task that appends it.
        self.inner.log.set_sole_voter(alone);
        let timeout = match alone {
            true => self.inner.config.client_timeout.max(SOLE_VOTER_WAIT),
            false => self.inner.config.client_timeout,
        };
        let deadline = started + timeout;
        loop {
            // The first attempt of a node that leads and runs skips the look for the leader
            // (`leads_alone` made it, with the same look at the metrics).
            let (leader, addr) = match std::mem::take(&mut leads) {
                true => (self.inner.id, String::new()),
                false => self.wait_for_leader(started, deadline).await?,
            };
            // A clone shares the bytes: the commands are kept for a retry elsewhere.
            let attempt = if leader == self.inner.id {
                // A fresh unit per attempt: an earlier attempt's entry may still be applied
                // (from its bytes, once its typed commands were taken back) and must not
                // answer this attempt. Without typed commands (some were applied by an
                // earlier attempt) the unit holds none and is answered from the bytes.
                let typed_now = typed.take().unwrap_or_default();
                // Alone, the bytes go into the entry without a copy kept for a retry: the
                // typed commands, when they come back, are encoded again (a retry is rare:
                // a leadership change while the node gains members). A copy of the bytes
                // (a new vector and a shared count per command, about 200 instructions a
                // write under callgrind) is kept only where no typed command could give
                // them back: in a cluster, and for a unit without typed commands.
                let entry_commands = match alone && !typed_now.is_empty() {
                    true => std::mem::take(&mut commands),
                    false => commands.clone(),
                };
                let unit = Local::new(typed_now);
                self.inner
                    .proposer
                    .submit_local(entry_commands, unit.erased());
                let attempt = match alone {
                    true => unit.answer().await,
                    false => {
                        let timeout = deadline.saturating_duration_since(Instant::now());
                        tokio::time::timeout(timeout, unit.answer())
                            .await
                            .unwrap_or(Err(ClusterError::Timeout {
                                waited_ms: timeout.as_millis() as u64,
                            }))
                    }
                };
                if matches!(&attempt, Err(e) if e.is_retryable()) {
                    // Take the typed commands back unless some were applied (then the next
                    // attempt goes by its bytes alone).
                    typed = unit.reclaim();
                    if commands.is_empty() {
                        // The bytes went into the failed entry: encode them again from the
                        // typed commands. Without those (some were applied meanwhile) there is
                        // nothing to retry that would not apply them twice: answer the error.
                        match &typed {
                            Some(cmds) => commands = encode_all::<S>(cmds)?,
                            None => return attempt,
                        }
                    }
                }
                attempt
            } else {
                let rx = self
                    .inner
                    .forwarder
                    .propose(leader, &addr, commands.clone(), deadline);
                await_reply(rx, deadline.saturating_duration_since(Instant::now()))
                    .await
                    .and_then(|results| decode_outputs::<S>(&results))
            };
            match attempt {
                Err(e) if e.is_retryable() => self.pause_before_retry(started, deadline).await?,
                other => return other,
            }
        }
    }

    /// Wait until a read of the local state machine reflects every write acknowledged before
    /// this call (linearizable). On the leader one confirmation serves all concurrent callers;
    /// a follower fetches the leader's read index and waits to apply up to it.
    pub async fn read_barrier(&self) -> Result<(), ClusterError> {
        let started = Instant::now();
        let deadline = started + self.inner.config.client_timeout;
        loop {
            let (leader, addr) = self.wait_for_leader(started, deadline).await?;
            let rx = if leader == self.inner.id {
                self.inner.reader.request()
            } else {
                self.inner.forwarder.read_index(leader, &addr, deadline)
            };
            let attempt = await_reply(rx, deadline.saturating_duration_since(Instant::now())).await;
            match attempt {
                Ok(index) => return self.wait_applied(index, started, deadline).await,
                // A read has no effect, so any failure but our own shutdown may be retried.
                Err(ClusterError::ShuttingDown) => return Err(ClusterError::ShuttingDown),
                Err(_) => self.pause_before_retry(started, deadline).await?,
            }
        }
    }

    /// True while this node is the leader.
    pub fn is_leader(&self) -> bool {
        self.inner.leadership.borrow().is_self
    }

    /// The current leader's id and cluster address, if known.
    pub fn leader(&self) -> Option<(NodeId, String)> {
        let metrics = self.inner.raft.metrics();
        let m = metrics.borrow();
        let id = m.current_leader?;
        let addr = m.membership_config.membership().get_node(&id)?.addr.clone();
        Some((id, addr))
    }

    /// A watch that changes whenever the leader or term changes (e.g. to run leader-only jobs).
    pub fn subscribe_leadership(&self) -> watch::Receiver<Leadership> {
        self.inner.leadership.clone()
    }

    /// Role, leader, term, indexes, membership and per-follower lag.
    pub fn status(&self) -> ClusterStatus {
        let metrics = self.inner.raft.metrics();
        let m = metrics.borrow().clone();
        let mut status = status_from_metrics(
            &m,
            self.inner.raft.config(),
            self.inner.log.committed_index(),
        );
        for member in &mut status.members {
            member.advertised = self.advertised(member.id);
        }
        let within = responsive_within(&self.inner.config);
        for follower in &mut status.replication {
            follower.responding = self.inner.health.responding(follower.id, within);
            follower.repairing = self.inner.health.repairing(follower.id);
        }
        status.repair = self.inner.repair.status();
        if status.role != Role::Leader {
            status.leader_heard_ms =
                Some(self.inner.service.clocks.leader.elapsed().as_millis() as u64);
        }
        status
    }

    /// Resolves once Raft has stopped by itself because of an error, with the reason: a failed
    /// write of the log, the vote or a snapshot (a full disk, an I/O error), or a panic inside
    /// Raft. Never while it runs, nor after [`RaftNode::shutdown`]. A node in that state can
    /// only answer errors: the server exits so that its supervisor restarts it.
    pub async fn failure(&self) -> String {
        let metrics = self.inner.raft.metrics();
        // Woken by the server metrics only (they change with the vote, state, leader or
        // membership, not with every appended or applied entry), and when the core exits,
        // which drops their sender after it has published its running state.
        let mut server = self.inner.raft.server_metrics();
        loop {
            server.borrow_and_update();
            let failed = match &metrics.borrow().running_state {
                Err(Fatal::Stopped) | Ok(()) => None,
                Err(e) => Some(e.to_string()),
            };
            if let Some(why) = failed {
                return why;
            }
            if server.changed().await.is_err() {
                // The core is gone: report its last word, or wait forever after a normal stop.
                if let Err(e) = &metrics.borrow().running_state {
                    if !matches!(e, Fatal::Stopped) {
                        return e.to_string();
                    }
                }
                return std::future::pending().await;
            }
        }
    }

    /// Add node `id` at `addr` as a voter, safely: the leader checks that it answers there with
    /// the cluster secret, adds it as a learner and promotes it once it has caught up with the
    /// log, within `catch_up`; otherwise the learner is removed again, the voters are left as
    /// they were, and the error says why.
    pub async fn add_node(
        &self,
        id: NodeId,
        addr: impl Into<String>,
        catch_up: Duration,
    ) -> Result<(), ClusterError> {
        self.admin(AdminOp::AddNode {
            id,
            addr: addr.into(),
            catch_up_ms: catch_up.as_millis() as u64,
        })
        .await
    }

    /// Add node `id` at `addr` as a learner (waits until it has caught up, bounded).
    pub async fn add_learner(
        &self,
        id: NodeId,
        addr: impl Into<String>,
    ) -> Result<(), ClusterError> {
        self.admin(AdminOp::AddLearner {
            id,
            addr: addr.into(),
        })
        .await
    }

    /// Make learner `id` a voter.
    pub async fn promote(&self, id: NodeId) -> Result<(), ClusterError> {
        self.admin(AdminOp::Promote { id }).await
    }

    /// Remove node `id` (voter or learner) from the cluster. Refused when it is a voter and
    /// the remaining voters that answer the leader (and are not repairing) would be fewer than
    /// a quorum of the new configuration.
    pub async fn remove_node(&self, id: NodeId) -> Result<(), ClusterError> {
        self.admin(AdminOp::Remove { id }).await
    }

    /// Hand leadership to voter `to`: the leader holds new requests, lets `to` catch up,
    /// and has it campaign; held requests then go to `to`. Returns once the leader follows `to`.
    pub async fn transfer_leader(&self, to: NodeId) -> Result<(), ClusterError> {
        self.admin(AdminOp::TransferLeader { to }).await
    }

    /// Fsync the log as `policy` says from now on (CONFIG SET appendfsync).
    pub fn set_fsync(&self, policy: crate::config::FsyncPolicy) {
        self.inner.log.set_fsync(policy);
    }

    /// The fsync policy the log follows now.
    pub fn fsync(&self) -> crate::config::FsyncPolicy {
        self.inner.log.fsync()
    }

    /// What has happened to this node's snapshots (for INFO persistence).
    pub fn snapshot_info(&self) -> SnapshotInfo {
        self.inner.snapshot_stats.read()
    }

    /// Have each snapshot write wait `per_key` times the number of keys first (Redis's
    /// `rdb-key-save-delay`: tests use it to keep a save in progress); zero turns it off,
    /// and ends a wait already running.
    pub fn set_key_save_delay(&self, per_key: Duration) {
        self.inner
            .snapshot_stats
            .set_key_save_delay_us(per_key.as_micros().min(u64::MAX as u128) as u64);
    }

    /// Bytes of the log file's records, live and dead (what [`RaftNode::rewrite_log`] shrinks).
    pub fn log_file_bytes(&self) -> u64 {
        self.inner.log.file_bytes()
    }

    /// Write a snapshot holding everything applied here when this is called, and return once
    /// it is on disk (within `within`). If the newest snapshot already holds all of it, no new
    /// one is written.
    pub async fn save_snapshot(&self, within: Duration) -> Result<Option<u64>, ClusterError> {
        let started = Instant::now();
        let deadline = started + within;
        let mut metrics = self.inner.raft.metrics();
        let target = metrics.borrow().last_applied.map(|l| l.index);
        loop {
            let have = metrics.borrow_and_update().snapshot.map(|l| l.index);
            if have >= target {
                return Ok(have);
            }
            // A no-op while another build runs; that one ends with a new snapshot, and if it
            // holds less than `target` this asks again.
            self.trigger_snapshot().await?;
            let newer =
                move |m: &RaftMetrics<NodeId, BasicNode>| m.snapshot.map(|l| l.index) != have;
            let remaining = deadline.saturating_duration_since(Instant::now());
            match self
                .inner
                .raft
                .wait(Some(remaining))
                .metrics(newer, "snapshot")
                .await
            {
                Ok(_) => {}
                Err(WaitError::ShuttingDown) => return Err(ClusterError::ShuttingDown),
                Err(WaitError::Timeout(..)) => {
                    return Err(ClusterError::Timeout {
                        waited_ms: elapsed_ms(started),
                    })
                }
            }
        }
    }

    /// BGREWRITEAOF: a snapshot of everything applied (as [`RaftNode::save_snapshot`]), then
    /// the log purged up to it and the log file rewritten with only what follows. Purging
    /// waits while a follower is still being sent the entries concerned (bounded by `within`;
    /// the file is rewritten with what could be purged by then).
    pub async fn rewrite_log(&self, within: Duration) -> Result<(), ClusterError> {
        let started = Instant::now();
        if let Some(upto) = self.save_snapshot(within).await? {
            self.inner
                .raft
                .trigger()
                .purge_log(upto)
                .await
                .map_err(|_| ClusterError::ShuttingDown)?;
            let remaining = within.saturating_sub(started.elapsed());
            let purged =
                move |m: &RaftMetrics<NodeId, BasicNode>| m.purged.map(|l| l.index) >= Some(upto);
            let _ = self
                .inner
                .raft
                .wait(Some(remaining))
                .metrics(purged, "rewrite log")
                .await;
        }
        self.inner
            .log
            .compact_now()
            .map_err(|e| ClusterError::Startup(format!("rewriting the log: {e}")))
    }

    /// Build a snapshot now (and purge the log behind it), instead of waiting for the policy.
    pub async fn trigger_snapshot(&self) -> Result<(), ClusterError> {
        self.inner
            .raft
            .trigger()
            .snapshot()
            .await
            .map_err(|_| ClusterError::ShuttingDown)
    }

    /// Fault injection: drop all traffic to and from `peers` (replaces the previous set; pass an
    /// empty set to heal).
    pub fn set_blocked_peers(&self, peers: impl IntoIterator<Item = NodeId>) {
        self.inner
            .transport
            .set_blocked(peers.into_iter().collect::<HashSet<_>>());
    }

    /// Stop Raft, close the cluster link and fsync the log. Later calls fail with `ShuttingDown`.
    pub async fn shutdown(&self) {
        if self.inner.stopping.swap(true, Ordering::AcqRel) {
            return;
        }
        let _ = tokio::time::timeout(Duration::from_secs(5), self.inner.raft.shutdown()).await;
        self.inner.transport.shutdown();
        let tasks: Vec<JoinHandle<()>> = self
            .inner
            .tasks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
            .collect();
        for task in &tasks {
            task.abort();
        }
        // Wait for the aborted tasks to be dropped, so that the cluster listener is closed when
        // this returns and a node restarted at once can bind the same port.
        for task in tasks {
            let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
        }
        self.inner.leadership_tx.send_if_modified(|current| {
            let changed = current.is_self || current.leader.is_some();
            *current = Leadership {
                leader: None,
                term: current.term,
                is_self: false,
            };
            changed
        });
        self.inner.log.close().await;
    }

    async fn admin(&self, op: AdminOp) -> Result<(), ClusterError> {
        let started = Instant::now();
        let deadline = started + admin_timeout(&self.inner.config) + op.extra_time();
        loop {
            let (leader, addr) = self.wait_for_leader(started, deadline).await?;
            let remaining = deadline.saturating_duration_since(Instant::now());
            let attempt = if leader == self.inner.id {
                self.inner.service.run_admin(op.clone(), remaining).await
            } else {
                match self
                    .call_leader(leader, &addr, &Request::Admin(op.clone()), deadline)
                    .await
                {
                    Ok(Response::Admin(result)) => result.map_err(|e| remote_error(leader, e)),
                    Ok(_) => Err(unexpected(leader)),
                    Err(e) => Err(e),
                }
            };
            match attempt {
                Err(e) if e.is_retryable() => self.pause_before_retry(started, deadline).await?,
                other => return other,
            }
        }
    }

    /// Send `req` to the leader; link failures map to retryable (not sent) or final errors.
    async fn call_leader(
        &self,
        leader: NodeId,
        addr: &str,
        req: &Request,
        deadline: Instant,
    ) -> Result<Response, ClusterError> {
        let client = self.inner.transport.peer(leader, addr);
        let started = Instant::now();
        let remaining = deadline.saturating_duration_since(started);
        client
            .call(req, remaining)
            .await
            .map_err(|e| link_error(leader, e, started))
    }

    /// What node `id` advertises about itself (its [`Config::advertise`]), as learnt when
    /// a cluster connection with it was made; `None` until then, or if it advertises nothing.
    pub fn advertised(&self, id: NodeId) -> Option<String> {
        if id == self.inner.id {
            let own = self.inner.transport.advertise();
            return (!own.is_empty()).then(|| own.to_string());
        }
        self.inner.transport.advertised(id)
    }

    /// The known leader and its address, waiting for one until `deadline`. The address may be
    /// empty when the leader is this node (callers only dial another leader).
    async fn wait_for_leader(
        &self,
        started: Instant,
        deadline: Instant,
    ) -> Result<(NodeId, String), ClusterError> {
        // Every write asks, and almost always this node leads: answer that from the kept
        // receiver, without cloning one (or the address, which only a follower dials).
        if !self.inner.stopping.load(Ordering::Acquire) {
            let m = self.inner.metrics.borrow();
            if m.running_state.is_ok()
                && m.state == ServerState::Leader
                && m.current_leader == Some(self.inner.id)
            {
                return Ok((self.inner.id, String::new()));
            }
        }
        let mut metrics = self.inner.raft.metrics();
        loop {
            if self.inner.stopping.load(Ordering::Acquire) {
                return Err(ClusterError::ShuttingDown);
            }
            {
                let m = metrics.borrow_and_update();
                if m.running_state.is_err() || m.state == ServerState::Shutdown {
                    return Err(ClusterError::ShuttingDown);
                }
                if let Some(leader) = m.current_leader {
                    if let Some(node) = m.membership_config.membership().get_node(&leader) {
                        return Ok((leader, node.addr.clone()));
                    }
                }
            }
            match tokio::time::timeout_at(deadline, metrics.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return Err(ClusterError::ShuttingDown),
                Err(_) => return Err(unavailable(started)),
            }
        }
    }

    async fn wait_applied(
        &self,
        index: u64,
        started: Instant,
        deadline: Instant,
    ) -> Result<(), ClusterError> {
        let remaining = deadline.saturating_duration_since(Instant::now());
        match self
            .inner
            .raft
            .wait(Some(remaining))
            .applied_index_at_least(Some(index), "read barrier")
            .await
        {
            Ok(_) => Ok(()),
            Err(WaitError::Timeout(_, _)) => Err(ClusterError::Timeout {
                waited_ms: elapsed_ms(started),
            }),
            Err(WaitError::ShuttingDown) => Err(ClusterError::ShuttingDown),
        }
    }

    async fn pause_before_retry(
        &self,
        started: Instant,
        deadline: Instant,
    ) -> Result<(), ClusterError> {
        let now = Instant::now();
        if now + RETRY_PAUSE >= deadline {
            return Err(unavailable(started));
        }
        tokio::time::sleep(RETRY_PAUSE).await;
        Ok(())
    }
}

/// The commands' bytes for the log.
fn encode_all<S: StateMachine>(cmds: &[S::Command]) -> Result<Vec<bytes::Bytes>, ClusterError> {
    cmds.iter()
        .map(|cmd| crate::types::encode_exact(cmd).map(bytes::Bytes::from))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ClusterError::Codec(format!("encode command: {e}")))
}

/// The outputs a leader sent back encoded for a forwarded proposal.
fn decode_outputs<S: StateMachine>(
    results: &[CommandResult],
) -> Result<Vec<S::Output>, ClusterError> {
    results
        .iter()
        .map(|r| {
            let bytes = r.as_ref().map_err(|e| ClusterError::Codec(e.clone()))?;
            postcard::from_bytes(bytes)
                .map_err(|e| ClusterError::Codec(format!("decode output: {e}")))
        })
        .collect()
}

/// Connect to every member this node has not heard an advertisement from, so that each
/// node can name every other's client address (openraft connects a follower only to its
/// leader). Checks every [`LEARN_EVERY`]; a member that advertises nothing is dialed at that
/// pace, at the cost of one idle connection.
fn learn_advertised(
    id: NodeId,
    raft: Raft<TypeConfig>,
    transport: Arc<Transport>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(LEARN_EVERY);
        loop {
            tick.tick().await;
            let members: Vec<(NodeId, String)> = raft
                .metrics()
                .borrow()
                .membership_config
                .membership()
                .nodes()
                .filter(|(m, _)| **m != id)
                .map(|(m, node)| (*m, node.addr.clone()))
                .collect();
            for (member, addr) in members {
                if transport.advertised(member).is_none() {
                    let _ = transport.peer(member, &addr).connect_now(LEARN_EVERY).await;
                }
            }
        }
    })
}

/// How often [`learn_advertised`] looks for members not heard from.
const LEARN_EVERY: Duration = Duration::from_secs(1);

/// A follower that answered the leader within this long counts as up (for RAFT.REMOVENODE
/// and status): three of the longest election timeouts, so a few lost heartbeats do not
/// count as down.
fn responsive_within(config: &Config) -> Duration {
    Duration::from_millis(3 * config.election_timeout_max_ms)
}

fn admin_timeout(config: &Config) -> Duration {
    config
        .client_timeout
        .saturating_mul(5)
        .max(Duration::from_secs(10))
}

fn elapsed_ms(started: Instant) -> u64 {
    started.elapsed().as_millis() as u64
}

fn unavailable(started: Instant) -> ClusterError {
    ClusterError::Unavailable {
        waited_ms: elapsed_ms(started),
    }
}

/// Publish leadership changes from openraft's server metrics (vote, state, leader and
/// membership). Not the full metrics: openraft sends those after every step of its core
/// (each append, flush and apply), so a task waiting on them is woken several times per
/// write batch, which on a durable single node cost a runtime wake-up (often a futex call
/// and a context switch) each time.
fn watch_leadership(
    id: NodeId,
    mut metrics: watch::Receiver<RaftServerMetrics<NodeId, BasicNode>>,
    stats: Arc<RaftStats>,
) -> (Arc<watch::Sender<Leadership>>, JoinHandle<()>) {
    let tx = Arc::new(watch::Sender::new(Leadership {
        leader: None,
        term: 0,
        is_self: false,
    }));
    let publisher = tx.clone();
    let task = tokio::spawn(async move {
        let tx = publisher;
        let (mut was_candidate, mut last_leader) = (false, None);
        loop {
            let now = {
                let m = metrics.borrow_and_update();
                // Counted as seen: changes between two looks at the metrics are merged.
                let candidate = m.state == ServerState::Candidate;
                if candidate && !was_candidate {
                    RaftStats::add(&stats.elections, 1);
                }
                was_candidate = candidate;
                if m.current_leader.is_some() && m.current_leader != last_leader {
                    RaftStats::add(&stats.leader_changes, 1);
                    last_leader = m.current_leader;
                }
                Leadership {
                    leader: m.current_leader,
                    term: m.vote.leader_id().get_term(),
                    is_self: m.state == ServerState::Leader && m.current_leader == Some(id),
                }
            };
            tx.send_if_modified(|current| {
                let changed = *current != now;
                *current = now;
                changed
            });
            if metrics.changed().await.is_err() {
                tx.send_if_modified(|current| {
                    let changed = current.is_self || current.leader.is_some();
                    *current = Leadership {
                        leader: None,
                        term: current.term,
                        is_self: false,
                    };
                    changed
                });
                break;
            }
        }
    });
    (tx, task)
}

fn status_from_metrics(
    m: &RaftMetrics<NodeId, BasicNode>,
    config: &openraft::Config,
    committed: u64,
) -> ClusterStatus {
    let membership = m.membership_config.membership();
    let voters: HashSet<NodeId> = membership.voter_ids().collect();
    let members = membership
        .nodes()
        .map(|(id, node)| Member {
            id: *id,
            addr: node.addr.clone(),
            voter: voters.contains(id),
            advertised: None,
        })
        .collect();
    let last_log_index = m.last_log_index.unwrap_or(0);
    let replication = m
        .replication
        .as_ref()
        .map(|r| {
            r.iter()
                .filter(|(id, _)| **id != m.id)
                .map(|(id, matched)| {
                    let matched_index = matched.map(|l| l.index);
                    FollowerProgress {
                        id: *id,
                        matched_index,
                        lag: last_log_index.saturating_sub(matched_index.unwrap_or(0)),
                        responding: false,
                        repairing: false,
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    let leader_addr = m
        .current_leader
        .and_then(|l| membership.get_node(&l))
        .map(|n| n.addr.clone());
    let applied_index = m.last_applied.map(|l| l.index).unwrap_or(0);
    ClusterStatus {
        node_id: m.id,
        role: Role::from(m.state),
        leader_id: m.current_leader,
        leader_addr,
        term: m.current_term,
        commit_index: committed.max(applied_index),
        applied_index,
        last_log_index,
        snapshot_index: m.snapshot.map(|l| l.index),
        purged_index: m.purged.map(|l| l.index),
        members,
        replication,
        election_timeout_ms: (config.election_timeout_min, config.election_timeout_max),
        heartbeat_interval_ms: config.heartbeat_interval,
        repair: None,
        leader_heard_ms: None,
    }
}
