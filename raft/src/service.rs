//! What a node answers on its cluster port: openraft's RPCs, plus the requests followers send
//! their leader (forwarded proposals, read-index confirmations, membership changes, leadership
//! transfer). Also owns executing those admin operations, since they must run on the leader.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use openraft::error::{ClientWriteError, RaftError};
use openraft::{BasicNode, ChangeMembers, LogId, Raft};
use tokio::sync::oneshot;

use crate::error::ClusterError;
use crate::forwarder::unexpected;
use crate::proposer::{Gate, Proposer, ReadIndexer};
use crate::transport::{AdminOp, Request, Response, RpcHandler, Transport};
use crate::types::{NodeId, TypeConfig};

/// How often a leadership transfer re-reads the replication progress.
const TRANSFER_POLL: Duration = Duration::from_millis(10);
/// How long a transfer waits for its target to catch up (beyond the lease it waits out).
const TRANSFER_CATCH_UP: Duration = Duration::from_secs(1);

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
}

impl Service {
    fn not_leader(&self) -> Option<ClusterError> {
        let leader = self.raft.metrics().borrow().current_leader;
        (leader != Some(self.node_id)).then_some(ClusterError::NotLeader { leader })
    }
}

impl RpcHandler for Service {
    fn handle(&self, _from: NodeId, req: Request) -> BoxFuture<'static, Response> {
        let raft = self.raft.clone();
        match req {
            Request::AppendEntries(rpc) => {
                async move { Response::AppendEntries(raft.append_entries(rpc).await) }.boxed()
            }
            Request::Vote(rpc) => async move { Response::Vote(raft.vote(rpc).await) }.boxed(),
            Request::InstallSnapshot(rpc) => {
                async move { Response::InstallSnapshot(raft.install_snapshot(rpc).await) }.boxed()
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
                async move { Response::Admin(service.run_admin(op, service.admin_timeout).await) }
                    .boxed()
            }
            Request::Elect => {
                let me = self.node_id;
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
                AdminOp::Remove { id } => {
                    let membership = raft.metrics().borrow().membership_config.clone();
                    let is_voter = membership.membership().voter_ids().any(|v| v == id);
                    let is_member = membership.membership().get_node(&id).is_some();
                    let ids = BTreeSet::from([id]);
                    if is_voter {
                        raft.change_membership(ChangeMembers::RemoveVoters(ids), false)
                            .await
                            .map(|_| ())
                    } else if is_member {
                        raft.change_membership(ChangeMembers::RemoveNodes(ids), false)
                            .await
                            .map(|_| ())
                    } else {
                        Ok(())
                    }
                }
            };
            changed.map_err(|e| match e {
                RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => {
                    ClusterError::NotLeader {
                        leader: f.leader_id,
                    }
                }
                RaftError::APIError(e) => ClusterError::Membership(e.to_string()),
                RaftError::Fatal(_) => ClusterError::ShuttingDown,
            })
        };
        // Dropping `work` on timeout also ends a transfer's pause (its guards reopen the gate).
        match tokio::time::timeout(timeout, work).await {
            Ok(result) => result,
            Err(_) => Err(ClusterError::Timeout {
                waited_ms: timeout.as_millis() as u64,
            }),
        }
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
        match self
            .transport
            .peer(to, &addr)
            .call(&Request::Elect, campaign)
            .await
        {
            Ok(Response::Elect(result)) => result?,
            Ok(_) => return Err(unexpected(to)),
            Err(e) => {
                return Err(ClusterError::Transfer(format!(
                    "could not reach node {to}: {e}"
                )))
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
