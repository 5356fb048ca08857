//! What a node answers on its cluster port: openraft's RPCs, plus the requests followers send
//! their leader (forwarded proposals, read-index confirmations, membership changes). Also owns
//! executing membership changes, since they must run on the leader.

use std::collections::BTreeSet;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use openraft::error::{ClientWriteError, RaftError};
use openraft::{BasicNode, ChangeMembers, Raft};
use tokio::sync::oneshot;

use crate::error::ClusterError;
use crate::proposer::{Proposer, ReadIndexer};
use crate::transport::{AdminOp, Request, Response, RpcHandler};
use crate::types::{NodeId, TypeConfig};

/// The request handler registered with the transport.
pub(crate) struct Service {
    pub(crate) node_id: NodeId,
    pub(crate) raft: Raft<TypeConfig>,
    pub(crate) proposer: Proposer,
    pub(crate) reader: ReadIndexer,
    pub(crate) client_timeout: Duration,
    pub(crate) admin_timeout: Duration,
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
                let timeout = self.admin_timeout;
                async move { Response::Admin(run_admin(&raft, op, timeout).await) }.boxed()
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

/// Execute a membership change on this node, which must be the leader.
pub(crate) async fn run_admin(
    raft: &Raft<TypeConfig>,
    op: AdminOp,
    timeout: Duration,
) -> Result<(), ClusterError> {
    let change = async {
        match op {
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
        }
    };
    match tokio::time::timeout(timeout, change).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f)))) => {
            Err(ClusterError::NotLeader {
                leader: f.leader_id,
            })
        }
        Ok(Err(RaftError::APIError(e))) => Err(ClusterError::Membership(e.to_string())),
        Ok(Err(RaftError::Fatal(_))) => Err(ClusterError::ShuttingDown),
        Err(_) => Err(ClusterError::Timeout {
            waited_ms: timeout.as_millis() as u64,
        }),
    }
}
