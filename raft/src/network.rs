//! openraft's `RaftNetwork` over the cluster transport: turns AppendEntries, Vote and
//! InstallSnapshot calls into [`Request`] frames to the target node and maps link failures onto
//! openraft's error kinds (unreachable peers back off, oversized AppendEntries are split).
//! Also keeps the leader's view of its followers' health ([`PeerHealth`]): when each last
//! answered an AppendEntries (heartbeats included) and whether it said it is repairing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use openraft::error::{
    InstallSnapshotError, NetworkError, PayloadTooLarge, RPCError, RaftError, RemoteError,
    Unreachable,
};
use openraft::network::{Backoff, RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::BasicNode;

use crate::transport::{CallError, PeerClient, Request, Response, Transport};
use crate::types::{NodeId, TypeConfig};

/// When each peer last answered an AppendEntries, and whether it was repairing then; and
/// whether each peer's link works, so that a peer not up yet, lost or back is one INFO line
/// each (openraft's own per-attempt errors about it are filtered out of the log: see
/// `tollgate::server::logging`).
#[derive(Default)]
pub(crate) struct PeerHealth {
    seen: Mutex<HashMap<NodeId, (Instant, bool)>>,
    reachable: Mutex<HashMap<NodeId, bool>>,
}

impl PeerHealth {
    /// Note whether a call to `peer` at `addr` reached it; log the changes.
    fn link(&self, peer: NodeId, addr: &str, result: Result<(), &CallError>) {
        let mut links = self.reachable.lock().unwrap_or_else(|e| e.into_inner());
        let before = links.get(&peer).copied();
        match result {
            Ok(()) => {
                if before == Some(false) {
                    tracing::info!(peer, addr, "raft peer {peer} at {addr} is reachable again");
                }
                links.insert(peer, true);
            }
            Err(e) => {
                match before {
                    None => tracing::info!(
                        peer,
                        addr,
                        "raft peer {peer} at {addr} is not up yet ({e}); retrying in the background"
                    ),
                    Some(true) => tracing::info!(
                        peer,
                        addr,
                        "raft peer {peer} at {addr} is lost ({e}); retrying in the background"
                    ),
                    Some(false) => {}
                }
                links.insert(peer, false);
            }
        }
    }

    fn heard(&self, peer: NodeId, repairing: bool) {
        self.lock().insert(peer, (Instant::now(), repairing));
    }

    /// True when `peer` answered an AppendEntries within `within`.
    pub(crate) fn responding(&self, peer: NodeId, within: Duration) -> bool {
        self.lock()
            .get(&peer)
            .is_some_and(|(at, _)| at.elapsed() <= within)
    }

    /// True when `peer`'s last answer said it is repairing (so it cannot vote).
    pub(crate) fn repairing(&self, peer: NodeId) -> bool {
        self.lock().get(&peer).is_some_and(|(_, r)| *r)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<NodeId, (Instant, bool)>> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Creates a [`PeerNetwork`] per replication target.
pub(crate) struct NetworkFactory {
    pub(crate) transport: Arc<Transport>,
    pub(crate) health: Arc<PeerHealth>,
}

impl RaftNetworkFactory<TypeConfig> for NetworkFactory {
    type Network = PeerNetwork;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> PeerNetwork {
        PeerNetwork {
            target,
            client: self.transport.peer(target, &node.addr),
            health: self.health.clone(),
            addr: node.addr.clone(),
        }
    }
}

/// openraft's handle on one peer.
pub(crate) struct PeerNetwork {
    target: NodeId,
    client: Arc<PeerClient>,
    health: Arc<PeerHealth>,
    addr: String,
}

type RpcResult<T, E = openraft::error::Infallible> =
    Result<T, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>>;

impl PeerNetwork {
    /// Note how a call to the peer went (see [`PeerHealth::link`]).
    fn noted<T>(&self, result: Result<T, CallError>) -> Result<T, CallError> {
        match &result {
            Ok(_) => self.health.link(self.target, &self.addr, Ok(())),
            Err(CallError::TooLarge(_)) => {}
            Err(e) => self.health.link(self.target, &self.addr, Err(e)),
        }
        result
    }

    fn link_error<E: std::error::Error>(
        &self,
        err: CallError,
        entries: u64,
    ) -> RPCError<NodeId, BasicNode, RaftError<NodeId, E>> {
        match err {
            CallError::TooLarge(_) if entries > 1 => {
                RPCError::PayloadTooLarge(PayloadTooLarge::new_entries_hint(entries / 2))
            }
            CallError::Lost(_) => RPCError::Network(NetworkError::new(&err)),
            CallError::NotSent(_) | CallError::TimedOut | CallError::TooLarge(_) => {
                RPCError::Unreachable(Unreachable::new(&err))
            }
        }
    }

    fn remote<E: std::error::Error>(
        &self,
        err: RaftError<NodeId, E>,
    ) -> RPCError<NodeId, BasicNode, RaftError<NodeId, E>> {
        RPCError::RemoteError(RemoteError::new(self.target, err))
    }

    fn unexpected<E: std::error::Error>(
        &self,
    ) -> RPCError<NodeId, BasicNode, RaftError<NodeId, E>> {
        let err = CallError::Lost("response of the wrong kind".into());
        RPCError::Network(NetworkError::new(&err))
    }
}

impl RaftNetwork<TypeConfig> for PeerNetwork {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<NodeId>> {
        let entries = rpc.entries.len() as u64;
        match self.noted(
            self.client
                .call(&Request::AppendEntries(rpc), option.hard_ttl())
                .await,
        ) {
            Ok(Response::AppendEntries { result, repairing }) => {
                self.health.heard(self.target, repairing);
                result.map_err(|e| self.remote(e))
            }
            Ok(_) => Err(self.unexpected()),
            Err(e) => Err(self.link_error(e, entries)),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<NodeId>, InstallSnapshotError> {
        match self.noted(
            self.client
                .call(&Request::InstallSnapshot(rpc), option.hard_ttl())
                .await,
        ) {
            Ok(Response::InstallSnapshot(Ok(resp))) => Ok(resp),
            Ok(Response::InstallSnapshot(Err(e))) => Err(self.remote(e)),
            Ok(_) => Err(self.unexpected()),
            Err(e) => Err(self.link_error(e, 0)),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> RpcResult<VoteResponse<NodeId>> {
        match self.noted(
            self.client
                .call(&Request::Vote(rpc), option.hard_ttl())
                .await,
        ) {
            Ok(Response::Vote(Ok(resp))) => Ok(resp),
            Ok(Response::Vote(Err(e))) => Err(self.remote(e)),
            Ok(_) => Err(self.unexpected()),
            Err(e) => Err(self.link_error(e, 0)),
        }
    }

    fn backoff(&self) -> Backoff {
        // Exponential from 25 ms to 1 s: a returning peer is found quickly, a dead one is cheap.
        Backoff::new((0u32..).map(|n| Duration::from_millis((25u64 << n.min(6)).min(1_000))))
    }
}
