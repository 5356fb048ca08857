//! What a node answers on its cluster port: openraft's RPCs, plus the requests followers send
//! their leader (forwarded proposals, read-index confirmations, membership changes, leadership
//! transfer). Also owns executing those admin operations, since they must run on the leader.
//!
//! A repairing node (see `repair`) refuses every vote request and every request to campaign,
//! and says it is repairing in each AppendEntries answer, so the leader knows it cannot vote.
//!
//! Membership changes never weaken the cluster: a node is added as a voter only after it
//! answered on its address with the cluster secret and, as a learner, caught up with the log
//! within a timeout (else it is removed again and the voters stay as they were), and a voter is
//! removed only if the remaining voters that answer the leader (and are not repairing) still
//! make a quorum of the new configuration.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use openraft::error::{ClientWriteError, RaftError};
use openraft::raft::{AppendEntriesResponse, VoteResponse};
use openraft::{BasicNode, ChangeMembers, LogId, Raft, RaftMetrics};
use tokio::sync::oneshot;

use crate::error::ClusterError;
use crate::forwarder::unexpected;
use crate::network::PeerHealth;
use crate::prevote::{Clocks, Timing};
use crate::proposer::{Gate, Proposer, ReadIndexer};
use crate::repair::Repair;
use crate::transport::{AdminOp, CallError, Request, Response, RpcHandler, Transport};
use crate::types::{NodeId, TypeConfig};

/// How often a leadership transfer re-reads the replication progress.
const TRANSFER_POLL: Duration = Duration::from_millis(10);
/// How long a transfer waits for its target to catch up (beyond the lease it waits out).
const TRANSFER_CATCH_UP: Duration = Duration::from_secs(1);
/// How long adding a node waits for it to answer the cluster handshake.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// The request handler registered with the transport, and the executor of admin operations.
#[derive(Clone)]
pub(crate) struct Service {
    pub(crate) node_id: NodeId,
    pub(crate) raft: Raft<TypeConfig>,
    pub(crate) proposer: Proposer,
    pub(crate) reader: ReadIndexer,
    /// Closed while a leadership transfer holds new batches.
    pub(crate) gate: Gate,
    /// One transfer at a time: each reopens the gate and restarts heartbeats when it ends.
    pub(crate) transfer_lock: Arc<tokio::sync::Mutex<()>>,
    pub(crate) transport: Arc<Transport>,
    pub(crate) client_timeout: Duration,
    pub(crate) admin_timeout: Duration,
    /// openraft's leader lease (= the longest election timeout) and the shortest election
    /// timeout: a transfer waits out the first and must finish well within the second.
    pub(crate) leader_lease: Duration,
    pub(crate) election_timeout_min: Duration,
    /// This node's repair state: while repairing it grants no vote and never campaigns.
    pub(crate) repair: Arc<Repair>,
    /// The leader's view of its followers (see [`PeerHealth`]).
    pub(crate) health: Arc<PeerHealth>,
    /// A follower that answered within this long counts as up.
    pub(crate) responsive_within: Duration,
    /// The election clocks: when this node last heard from a leader, when it last ran or
    /// granted a pre-vote (see `prevote`).
    pub(crate) clocks: Arc<Clocks>,
    /// The election timing pre-votes are granted by.
    pub(crate) timing: Timing,
}

impl Service {
    fn not_leader(&self) -> Option<ClusterError> {
        let leader = self.raft.metrics().borrow().current_leader;
        (leader != Some(self.node_id)).then_some(ClusterError::NotLeader { leader })
    }

    /// The answer of a repairing node to a vote request: not granted, its own vote unchanged
    /// (openraft answers the same way when the candidate's log is behind), and no log id, so
    /// its incomplete log has no say in when the candidate tries again.
    fn refuse_vote(&self) -> Response {
        let vote = self.raft.metrics().borrow().vote;
        Response::Vote(Ok(VoteResponse {
            vote,
            vote_granted: false,
            last_log_id: None,
        }))
    }
}

impl RpcHandler for Service {
    fn handle(&self, _from: NodeId, req: Request) -> BoxFuture<'static, Response> {
        let raft = self.raft.clone();
        match req {
            Request::AppendEntries(rpc) => {
                let repair = self.repair.clone();
                let clocks = self.clocks.clone();
                async move {
                    let result = raft.append_entries(rpc).await;
                    // Accepted as from the current leader (a stale leader gets HigherVote).
                    if matches!(&result, Ok(r) if !matches!(r, AppendEntriesResponse::HigherVote(_)))
                    {
                        clocks.leader.touch();
                    }
                    Response::AppendEntries {
                        result,
                        repairing: repair.is_active(),
                    }
                }
                .boxed()
            }
            Request::Vote(_) if self.repair.is_active() => {
                futures::future::ready(self.refuse_vote()).boxed()
            }
            Request::Vote(rpc) => {
                let clocks = self.clocks.clone();
                async move {
                    let result = raft.vote(rpc).await;
                    // Raft's election timer restarts on a granted vote too: the candidate
                    // gets its election's time before this node campaigns itself.
                    if matches!(&result, Ok(r) if r.vote_granted) {
                        clocks.leader.touch();
                    }
                    Response::Vote(result)
                }
                .boxed()
            }
            Request::InstallSnapshot(rpc) => {
                let clocks = self.clocks.clone();
                async move {
                    let result = raft.install_snapshot(rpc).await;
                    if result.is_ok() {
                        clocks.leader.touch();
                    }
                    Response::InstallSnapshot(result)
                }
                .boxed()
            }
            Request::PreVote(req) => {
                let granted = crate::prevote::grant(
                    &raft,
                    self.node_id,
                    &self.clocks,
                    &self.repair,
                    self.timing,
                    &req,
                );
                futures::future::ready(Response::PreVote(granted)).boxed()
            }
            Request::Propose(units) => {
                if let Some(err) = self.not_leader() {
                    let results = vec![Err(err); units.len()];
                    return futures::future::ready(Response::Propose(results)).boxed();
                }
                // Queue now, before returning, so forwarded proposals keep their order.
                let waiting: Vec<_> = units
                    .into_iter()
                    .map(|commands| self.proposer.submit(commands))
                    .collect();
                let deadline = tokio::time::Instant::now() + self.client_timeout;
                async move {
                    let mut results = Vec::with_capacity(waiting.len());
                    for rx in waiting {
                        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                        results.push(await_reply(rx, left).await);
                    }
                    Response::Propose(results)
                }
                .boxed()
            }
            Request::ReadIndex => {
                if let Some(err) = self.not_leader() {
                    return futures::future::ready(Response::ReadIndex(Err(err))).boxed();
                }
                let rx = self.reader.request();
                let timeout = self.client_timeout;
                async move { Response::ReadIndex(await_reply(rx, timeout).await) }.boxed()
            }
            Request::Admin(op) => {
                let service = self.clone();
                let timeout = service.admin_timeout + op.extra_time();
                async move { Response::Admin(service.run_admin(op, timeout).await) }.boxed()
            }
            Request::Elect if self.repair.is_active() => {
                let me = self.node_id;
                futures::future::ready(Response::Elect(Err(ClusterError::Transfer(format!(
                    "node {me} is repairing (its disk lost acknowledged data) and cannot lead \
                     until it has caught up"
                )))))
                .boxed()
            }
            Request::Elect => {
                let me = self.node_id;
                let clocks = self.clocks.clone();
                async move {
                    let is_voter = raft
                        .metrics()
                        .borrow()
                        .membership_config
                        .membership()
                        .voter_ids()
                        .any(|v| v == me);
                    if !is_voter {
                        return Response::Elect(Err(ClusterError::Transfer(format!(
                            "node {me} is not a voter"
                        ))));
                    }
                    // Told to campaign by the leader: its election timer restarts, so it
                    // grants no pre-vote to a rival while its election runs.
                    clocks.leader.touch();
                    let started = raft.trigger().elect().await;
                    Response::Elect(started.map_err(|_| ClusterError::ShuttingDown))
                }
                .boxed()
            }
        }
    }
}

/// Wait for a batcher's reply, at most `timeout`.
pub(crate) async fn await_reply<T>(
    rx: oneshot::Receiver<Result<T, ClusterError>>,
    timeout: Duration,
) -> Result<T, ClusterError> {
    match tokio::time::timeout(timeout, rx).await {
        Ok(Ok(result)) => result,
        Ok(Err(_)) => Err(ClusterError::ShuttingDown),
        Err(_) => Err(ClusterError::Timeout {
            waited_ms: timeout.as_millis() as u64,
        }),
    }
}

impl Service {
    /// Execute an admin operation on this node, which must be the leader.
    pub(crate) async fn run_admin(
        &self,
        op: AdminOp,
        timeout: Duration,
    ) -> Result<(), ClusterError> {
        let raft = &self.raft;
        let work = async {
            let changed = match op {
                AdminOp::TransferLeader { to } => return self.transfer_leader(to).await,
                AdminOp::AddLearner { id, addr } => raft
                    .add_learner(id, BasicNode { addr }, true)
                    .await
                    .map(|_| ()),
                AdminOp::Promote { id } => raft
                    .change_membership(ChangeMembers::AddVoterIds(BTreeSet::from([id])), false)
                    .await
                    .map(|_| ()),
                AdminOp::Remove { id } => return self.remove_node(id).await,
                AdminOp::AddNode {
                    id,
                    addr,
                    catch_up_ms,
                } => {
                    return self
                        .add_node(id, addr, Duration::from_millis(catch_up_ms))
                        .await
                }
            };
            changed.map_err(membership_error)
        };
        // Dropping `work` on timeout also ends a transfer's pause (its guards reopen the gate).
        match tokio::time::timeout(timeout, work).await {
            Ok(result) => result,
            Err(_) => Err(ClusterError::Timeout {
                waited_ms: timeout.as_millis() as u64,
            }),
        }
    }

    /// Add node `id` at `addr` as a voter without ever weakening the cluster: it must answer
    /// there as node `id` with the cluster secret, then catch up as a learner (which counts
    /// toward no quorum) within `catch_up`; only then is it promoted. Otherwise the learner is
    /// removed again and the voters are left as they were.
    async fn add_node(
        &self,
        id: NodeId,
        addr: String,
        catch_up: Duration,
    ) -> Result<(), ClusterError> {
        let refused = |why: String| Err(ClusterError::Membership(why));
        {
            let metrics = self.raft.metrics();
            let m = metrics.borrow();
            if m.current_leader != Some(self.node_id) {
                return Err(ClusterError::NotLeader {
                    leader: m.current_leader,
                });
            }
            let membership = m.membership_config.membership();
            if membership.voter_ids().any(|v| v == id) {
                return refused(format!("node {id} is already a voter of this cluster"));
            }
        }
        if let Err(why) = self.transport.probe(id, &addr, PROBE_TIMEOUT).await {
            return refused(format!(
                "cannot add node {id}: {addr} did not pass the cluster handshake ({why}); \
                 voters unchanged"
            ));
        }
        let added = self
            .raft
            .add_learner(id, BasicNode { addr: addr.clone() }, false)
            .await
            .map_err(membership_error)?;
        let admitted = added.log_id.index;
        let me = self.node_id;
        let _ = self
            .raft
            .wait(Some(catch_up))
            .metrics(
                |m| m.current_leader != Some(me) || matched_index(m, id) >= Some(admitted),
                "new node catches up",
            )
            .await;
        let caught_up = matched_index(&self.raft.metrics().borrow(), id) >= Some(admitted);
        if !caught_up {
            let undo = self.remove_learner(id).await;
            return refused(format!(
                "node {id} at {addr} did not catch up with the log within {} ms; {undo}, \
                 voters unchanged",
                catch_up.as_millis()
            ));
        }
        let promoted = self
            .raft
            .change_membership(ChangeMembers::AddVoterIds(BTreeSet::from([id])), false)
            .await;
        match promoted {
            Ok(_) => Ok(()),
            Err(e) => {
                let err = membership_error(e);
                let undo = self.remove_learner(id).await;
                refused(format!("promoting node {id} failed ({err}); {undo}"))
            }
        }
    }

    /// Take learner `id` out again; says how that went, for the caller's error.
    async fn remove_learner(&self, id: NodeId) -> String {
        let removed = self
            .raft
            .change_membership(ChangeMembers::RemoveNodes(BTreeSet::from([id])), false)
            .await;
        match removed {
            Ok(_) => "it was removed again".into(),
            Err(e) => format!(
                "removing it again failed ({}): remove it with RAFT.REMOVENODE {id}",
                membership_error(e)
            ),
        }
    }

    /// Remove node `id`, unless it is a voter whose removal would leave the other voters
    /// without a quorum among those that answer this leader and can vote.
    async fn remove_node(&self, id: NodeId) -> Result<(), ClusterError> {
        let refused = |why: String| Err(ClusterError::Membership(why));
        let change = {
            let metrics = self.raft.metrics();
            let m = metrics.borrow();
            if m.current_leader != Some(self.node_id) {
                return Err(ClusterError::NotLeader {
                    leader: m.current_leader,
                });
            }
            let membership = m.membership_config.membership();
            if membership.get_node(&id).is_none() {
                return refused(format!("node {id} is not a member of this cluster"));
            }
            let ids = BTreeSet::from([id]);
            if membership.voter_ids().any(|v| v == id) {
                let remaining: BTreeSet<NodeId> =
                    membership.voter_ids().filter(|v| *v != id).collect();
                if remaining.is_empty() {
                    return refused(format!("node {id} is the only voter"));
                }
                let up: BTreeSet<NodeId> = remaining
                    .iter()
                    .copied()
                    .filter(|v| {
                        *v == self.node_id
                            || (self.health.responding(*v, self.responsive_within)
                                && !self.health.repairing(*v))
                    })
                    .collect();
                let quorum = remaining.len() / 2 + 1;
                if up.len() < quorum {
                    return refused(format!(
                        "removing node {id} would leave voters {} of which only {} answer the \
                         leader and can vote, fewer than the {quorum} a quorum needs; bring the \
                         others back first",
                        id_list(&remaining),
                        id_list(&up)
                    ));
                }
                ChangeMembers::RemoveVoters(ids)
            } else {
                ChangeMembers::RemoveNodes(ids)
            }
        };
        self.raft
            .change_membership(change, false)
            .await
            .map(|_| ())
            .map_err(membership_error)
    }

    /// Hand leadership to voter `to` (Raft's leadership transfer, built on openraft 0.9, which
    /// has none): hold new writes and reads, let `to` catch up with the whole log, stop
    /// heartbeats until every follower's leader lease has lapsed, then tell `to` to campaign.
    /// Its log is the longest, so it wins; this node steps down when it hears the higher term,
    /// and the held requests fail over to the new leader like any other leader change.
    async fn transfer_leader(&self, to: NodeId) -> Result<(), ClusterError> {
        let me = self.node_id;
        let addr = {
            let metrics = self.raft.metrics();
            let m = metrics.borrow();
            if m.current_leader != Some(me) {
                return Err(ClusterError::NotLeader {
                    leader: m.current_leader,
                });
            }
            if to == me {
                return Ok(());
            }
            let membership = m.membership_config.membership();
            if !membership.voter_ids().any(|v| v == to) {
                return Err(ClusterError::Transfer(format!(
                    "node {to} is not a voter of this cluster"
                )));
            }
            if self.health.repairing(to) {
                return Err(ClusterError::Transfer(format!(
                    "node {to} is repairing (its disk lost acknowledged data) and cannot lead \
                     until it has caught up"
                )));
            }
            match membership.get_node(&to) {
                Some(node) => node.addr.clone(),
                None => return Err(ClusterError::Transfer(format!("node {to} has no address"))),
            }
        };
        let _one_at_a_time = self.transfer_lock.lock().await;
        let _held = self.gate.close();
        // 1. With heartbeats still on (so no follower campaigns on its own), wait until `to`
        //    holds the whole log. Requests wait meanwhile, so give up soon on a target that
        //    is down or far behind.
        let give_up = tokio::time::Instant::now() + TRANSFER_CATCH_UP;
        loop {
            let caught_up = self.still_leading(to)?.is_some_and(|s| s.target_caught_up);
            if caught_up {
                break;
            }
            if tokio::time::Instant::now() >= give_up {
                return Err(ClusterError::Transfer(format!(
                    "node {to} did not catch up with the log within {} ms",
                    TRANSFER_CATCH_UP.as_millis()
                )));
            }
            tokio::time::sleep(TRANSFER_POLL).await;
        }
        // 2. Stop heartbeats and wait until no follower has heard from this leader for longer
        //    than the lease: followers refuse votes for `leader_lease` after the last message
        //    and start their own elections `election_timeout_min` after that; `to` campaigns
        //    in between.
        let _quiet = HeartbeatsOff::new(&self.raft);
        let quiet_for =
            self.leader_lease + (self.election_timeout_min / 3).min(Duration::from_millis(50));
        let mut last_progress = None;
        let mut quiet_since = tokio::time::Instant::now();
        loop {
            let Some(state) = self.still_leading(to)? else {
                return Ok(());
            };
            if state.progress != last_progress {
                last_progress = state.progress;
                quiet_since = tokio::time::Instant::now();
            }
            if quiet_since.elapsed() >= quiet_for {
                break;
            }
            tokio::time::sleep(TRANSFER_POLL).await;
        }
        let started = tokio::time::Instant::now();
        let campaign = self.election_timeout_min + self.leader_lease;
        // A call that did not leave this node (the link to `to` reconnecting, or backing off
        // after a failed connect) is safe to send again: retried until the campaign's time
        // is up, while this node still leads.
        loop {
            let left = campaign.saturating_sub(started.elapsed());
            match self
                .transport
                .peer(to, &addr)
                .call(&Request::Elect, left.max(TRANSFER_POLL))
                .await
            {
                Ok(Response::Elect(result)) => {
                    result?;
                    break;
                }
                Ok(_) => return Err(unexpected(to)),
                Err(CallError::NotSent(_)) if started.elapsed() + TRANSFER_POLL < campaign => {
                    if self.still_leading(to)?.is_none() {
                        return Ok(());
                    }
                    tokio::time::sleep(TRANSFER_POLL).await;
                }
                Err(e) => {
                    return Err(ClusterError::Transfer(format!(
                        "could not reach node {to}: {e}"
                    )))
                }
            }
        }
        // Done once this node follows `to` (it hears the new term from `to` itself).
        self.raft
            .wait(Some(campaign * 2))
            .metrics(|m| m.current_leader == Some(to), "leadership transfer")
            .await
            .map(|_| ())
            .map_err(|_| ClusterError::Timeout {
                waited_ms: started.elapsed().as_millis() as u64,
            })
    }

    /// During a transfer to `to`: `None` when `to` already leads (done), the replication
    /// progress while this node still leads, and an error when some other node took over.
    fn still_leading(&self, to: NodeId) -> Result<Option<TransferPoll>, ClusterError> {
        let metrics = self.raft.metrics();
        let m = metrics.borrow();
        match m.current_leader {
            Some(l) if l == to => Ok(None),
            Some(l) if l == self.node_id => {
                let progress = m.replication.clone();
                let matched = progress
                    .as_ref()
                    .and_then(|r| r.get(&to).copied().flatten())
                    .map(|l| l.index);
                Ok(Some(TransferPoll {
                    target_caught_up: matched.is_some() && matched == m.last_log_index,
                    progress,
                }))
            }
            Some(other) => Err(ClusterError::Transfer(format!(
                "leadership moved to node {other} during the transfer"
            ))),
            None => Err(ClusterError::Transfer(
                "the cluster lost its leader during the transfer".into(),
            )),
        }
    }
}

/// The error a failed membership change reports.
fn membership_error(e: RaftError<NodeId, ClientWriteError<NodeId, BasicNode>>) -> ClusterError {
    match e {
        RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => ClusterError::NotLeader {
            leader: f.leader_id,
        },
        RaftError::APIError(e) => ClusterError::Membership(e.to_string()),
        RaftError::Fatal(_) => ClusterError::ShuttingDown,
    }
}

/// The highest log index the leader knows `id` holds (`None` if it knows none, or does not
/// lead).
fn matched_index(m: &RaftMetrics<NodeId, BasicNode>, id: NodeId) -> Option<u64> {
    m.replication
        .as_ref()
        .and_then(|r| r.get(&id).copied().flatten())
        .map(|l| l.index)
}

/// `{1, 2, 3}`.
fn id_list(ids: &BTreeSet<NodeId>) -> String {
    let list: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
    format!("{{{}}}", list.join(", "))
}

/// What a transfer to `to` checks on each poll (see [`Service::still_leading`]).
struct TransferPoll {
    progress: Option<BTreeMap<NodeId, Option<LogId<NodeId>>>>,
    target_caught_up: bool,
}

/// Stops the leader's heartbeats while alive.
struct HeartbeatsOff<'a> {
    raft: &'a Raft<TypeConfig>,
}

impl<'a> HeartbeatsOff<'a> {
    fn new(raft: &'a Raft<TypeConfig>) -> Self {
        raft.runtime_config().heartbeat(false);
        HeartbeatsOff { raft }
    }
}

impl Drop for HeartbeatsOff<'_> {
    fn drop(&mut self) {
        self.raft.runtime_config().heartbeat(true);
    }
}
