//! The cluster link: authenticated, persistent TCP connections carrying length-delimited
//! postcard frames between nodes.
//!
//! Each node listens on its cluster address and keeps one outgoing connection per peer for its
//! own requests (Raft RPCs, forwarded proposals, read-index and admin requests); responses come
//! back on the same connection, matched by request id, so many calls share one socket. Each
//! side's writer lets the tasks that are ready run first and then writes every queued frame
//! with one flush, so the responses for one committed entry leave in one send.
//!
//! A connection starts with a mutual challenge-response over the shared cluster secret
//! (HMAC-SHA256 over both nonces, both node ids and the role), so neither side talks Raft to
//! anyone who does not hold the secret; until then frames are capped at a few hundred bytes.
//! Failed connects back off exponentially with jitter. Frames above `max_frame_bytes` are
//! refused. For fault injection, traffic to and from "blocked" peers is dropped in both
//! directions.
//!
//! Without TLS, traffic is authenticated at connect time but not encrypted: run the cluster
//! link on a private network. With TLS (`tls-cluster yes`, [`crate::tls::ClusterTls`]) every
//! connection is mutual TLS first: both sides present a certificate signed by the cluster CA,
//! and every frame after that is encrypted and integrity-protected. The secret's handshake
//! still runs inside the TLS session, as a second check: a certificate from the CA alone does
//! not make a node (the same CA often signs the client certificates applications get for the
//! client port), and the handshake is what binds a connection to the node id it claims.
//!
//! A peer's address may name a host instead of an IP. The name is looked up again at every
//! connect and reconnect ([`dial`]), so peers can be given by stable DNS names whose addresses
//! change (Kubernetes StatefulSet pods). For that to help, a connection to an address that
//! went away silently (a machine lost, a pod moved: no FIN or RST ever comes) must end too:
//! every cluster socket has a TCP user timeout and keepalives ([`LINK_DEAD_AFTER`]), so the
//! kernel drops a connection whose data goes unacknowledged, or whose idle probes go
//! unanswered, for that long, and the next call dials the name afresh.

use std::collections::{HashMap, HashSet};
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures::future::BoxFuture;
use hmac::{Hmac, Mac};
use openraft::error::{InstallSnapshotError, RaftError};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use rand::{Rng, RngCore};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::error::ClusterError;
use crate::tls::ClusterTls;
use crate::types::{CommandResult, NodeId, TypeConfig};

/// Bumped whenever frames change incompatibly.
const PROTOCOL_VERSION: u32 = 6;
/// Frame cap before a peer has authenticated.
const HANDSHAKE_FRAME_MAX: usize = 512;
/// Longest address a node advertises in the handshake (a host name is at most 253 bytes).
const ADVERTISE_MAX: usize = 300;
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// Longest wait for a peer's host name to be looked up (DNS) before a connect attempt fails.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(2);
/// A cluster connection whose sent data stays unacknowledged this long (TCP user timeout), or
/// that is idle and answers no keepalive probe for about this long, is dropped by the kernel.
/// Far above any round trip or pause of a live peer's kernel (which acknowledges even while
/// the process is stopped), and short enough that a peer that moved is dialed again soon.
pub(crate) const LINK_DEAD_AFTER: Duration = Duration::from_secs(10);
const BACKOFF_BASE_MS: u64 = 20;
const BACKOFF_MAX_MS: u64 = 1_000;

/// The receiving half of a connection (TCP or TLS).
type ReadHalf = Box<dyn AsyncRead + Send + Unpin>;
/// The sending half of a connection (TCP or TLS).
type WriteHalf = Box<dyn AsyncWrite + Send + Unpin>;

/// Split a stream into boxed halves: a TCP stream without a lock between them, a TLS stream
/// through tokio's split.
fn split_tcp(stream: TcpStream) -> (ReadHalf, WriteHalf) {
    let (r, w) = stream.into_split();
    (Box::new(r), Box::new(w))
}

fn split_tls<S: AsyncRead + AsyncWrite + Send + Unpin + 'static>(
    stream: S,
) -> (ReadHalf, WriteHalf) {
    let (r, w) = tokio::io::split(stream);
    (Box::new(r), Box::new(w))
}

/// A request from one node to another.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Request {
    AppendEntries(AppendEntriesRequest<TypeConfig>),
    Vote(VoteRequest<NodeId>),
    InstallSnapshot(InstallSnapshotRequest<TypeConfig>),
    /// Proposals a follower forwards to the leader: each is a unit of commands applied in one
    /// entry, proposed in this order.
    Propose(Vec<Vec<bytes::Bytes>>),
    /// Ask the leader for a confirmed read index.
    ReadIndex,
    /// A membership change or leadership transfer forwarded to the leader.
    Admin(AdminOp),
    /// From a leader handing leadership over: campaign now (Raft's TimeoutNow).
    Elect,
    /// Would you vote for this candidate now? (See `prevote`; changes no state.)
    PreVote(crate::prevote::PreVoteRequest),
}

/// Membership changes and leadership transfer, executed on the leader.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) enum AdminOp {
    AddLearner {
        id: NodeId,
        addr: String,
    },
    Promote {
        id: NodeId,
    },
    Remove {
        id: NodeId,
    },
    TransferLeader {
        to: NodeId,
    },
    /// Check that `id` answers at `addr` with the secret, add it as a learner, and make it a
    /// voter once it has caught up, within `catch_up_ms`; else remove it again.
    AddNode {
        id: NodeId,
        addr: String,
        catch_up_ms: u64,
    },
}

impl AdminOp {
    /// How much longer than other admin operations this one may take.
    pub(crate) fn extra_time(&self) -> Duration {
        match self {
            AdminOp::AddNode { catch_up_ms, .. } => Duration::from_millis(*catch_up_ms),
            _ => Duration::ZERO,
        }
    }
}

/// The answer to a [`Request`] of the same variant.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Response {
    AppendEntries {
        result: Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>>,
        /// The follower is repairing (see `repair`): it stores entries but cannot vote.
        repairing: bool,
    },
    Vote(Result<VoteResponse<NodeId>, RaftError<NodeId>>),
    InstallSnapshot(
        Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>,
    ),
    /// One result per forwarded proposal, in order.
    Propose(Vec<Result<Vec<CommandResult>, ClusterError>>),
    ReadIndex(Result<u64, ClusterError>),
    Admin(Result<(), ClusterError>),
    Elect(Result<(), ClusterError>),
    /// Whether the pre-vote is granted.
    PreVote(bool),
}

#[derive(Deserialize)]
struct Envelope<T> {
    id: u64,
    body: T,
}

/// Same bytes as [`Envelope`], borrowed for writing.
#[derive(Serialize)]
struct EnvelopeRef<'a, T> {
    id: u64,
    body: &'a T,
}

#[derive(Serialize, Deserialize)]
enum Handshake {
    Hello {
        version: u32,
        node_id: NodeId,
        nonce: [u8; 32],
    },
    Challenge {
        node_id: NodeId,
        nonce: [u8; 32],
        proof: [u8; 32],
    },
    Proof {
        proof: [u8; 32],
        /// The client's advertised address (see [`Transport::new`]).
        advertise: String,
    },
    Welcome {
        /// The server's advertised address.
        advertise: String,
    },
}

/// Serves requests arriving from peers.
pub(crate) trait RpcHandler: Send + Sync + 'static {
    /// Called in arrival order for each request of a connection; any ordering-sensitive work
    /// (queueing a proposal) happens before returning, the rest in the returned future.
    fn handle(&self, from: NodeId, req: Request) -> BoxFuture<'static, Response>;
}

/// Why a call failed.
#[derive(Debug)]
pub(crate) enum CallError {
    /// Nothing reached the peer (blocked, not connected, backing off): safe to retry.
    NotSent(String),
    /// The connection died after the request was sent: outcome unknown.
    Lost(String),
    /// No response within the deadline: outcome unknown.
    TimedOut,
    /// The encoded request exceeds the frame cap.
    TooLarge(usize),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::NotSent(why) => write!(f, "not sent: {why}"),
            CallError::Lost(why) => write!(f, "connection lost: {why}"),
            CallError::TimedOut => write!(f, "timed out"),
            CallError::TooLarge(n) => write!(f, "request of {n} bytes exceeds the frame cap"),
        }
    }
}

impl std::error::Error for CallError {}

/// State shared by the listener, every connection and every peer client.
struct Core {
    node_id: NodeId,
    secret: Vec<u8>,
    max_frame: usize,
    blocked: RwLock<HashSet<NodeId>>,
    shutdown: watch::Receiver<bool>,
    /// What this node tells its peers about itself in the handshake (opaque here; the
    /// server puts its client address in it). Empty: nothing.
    advertise: String,
    /// What each authenticated peer told about itself, latest connection first.
    advertised: Mutex<HashMap<NodeId, String>>,
    /// Mutual TLS on every connection, if set.
    tls: Option<Arc<ClusterTls>>,
}

impl Core {
    /// Remember what an authenticated peer advertised (nothing if it advertised nothing).
    fn heard(&self, peer: NodeId, advertise: String) {
        if advertise.is_empty() || advertise.len() > ADVERTISE_MAX {
            return;
        }
        self.advertised
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(peer, advertise);
    }

    fn is_blocked(&self, peer: NodeId) -> bool {
        self.blocked
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&peer)
    }
}

/// This node's end of the cluster link.
pub(crate) struct Transport {
    core: Arc<Core>,
    peers: Mutex<HashMap<NodeId, Arc<PeerClient>>>,
    shutdown_tx: watch::Sender<bool>,
}

impl Transport {
    /// A transport for `node_id` authenticating with `secret`, telling its peers
    /// `advertise` about itself when a connection is made (opaque to the transport; the
    /// server advertises its client address). Longer than [`ADVERTISE_MAX`] bytes,
    /// nothing is advertised.
    pub(crate) fn new(
        node_id: NodeId,
        secret: Vec<u8>,
        max_frame: usize,
        advertise: String,
        tls: Option<Arc<ClusterTls>>,
    ) -> Arc<Transport> {
        let (shutdown_tx, shutdown) = watch::channel(false);
        let advertise = if advertise.len() > ADVERTISE_MAX {
            String::new()
        } else {
            advertise
        };
        Arc::new(Transport {
            core: Arc::new(Core {
                node_id,
                secret,
                max_frame,
                blocked: RwLock::new(HashSet::new()),
                shutdown,
                advertise,
                advertised: Mutex::new(HashMap::new()),
                tls,
            }),
            peers: Mutex::new(HashMap::new()),
            shutdown_tx,
        })
    }

    /// What this node advertises about itself (empty: nothing).
    pub(crate) fn advertise(&self) -> &str {
        &self.core.advertise
    }

    /// What peer `id` advertised when it last connected to this node or this node to it.
    pub(crate) fn advertised(&self, id: NodeId) -> Option<String> {
        self.core
            .advertised
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&id)
            .cloned()
    }

    /// The client for peer `id` at `addr` (created on first use; the address follows membership).
    pub(crate) fn peer(&self, id: NodeId, addr: &str) -> Arc<PeerClient> {
        let mut peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        let client = peers.entry(id).or_insert_with(|| {
            Arc::new(PeerClient {
                target: id,
                addr: Mutex::new(addr.to_string()),
                core: self.core.clone(),
                conn: Mutex::new(None),
                connecting: tokio::sync::Mutex::new(()),
                backoff: Mutex::new(Backoff::default()),
            })
        });
        let mut current = client.addr.lock().unwrap_or_else(|e| e.into_inner());
        if *current != addr {
            *current = addr.to_string();
            drop(current);
            client.disconnect();
        } else {
            drop(current);
        }
        client.clone()
    }

    /// Dial node `id` at `addr` once and run the handshake: `Ok` when it answers as node `id`
    /// and proves it holds the cluster secret. Uses no cached connection and leaves none open.
    pub(crate) async fn probe(
        &self,
        id: NodeId,
        addr: &str,
        timeout: Duration,
    ) -> Result<(), String> {
        match tokio::time::timeout(timeout, connect(&self.core, id, addr)).await {
            Ok(Ok(_connection)) => Ok(()),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!("no handshake within {} ms", timeout.as_millis())),
        }
    }

    /// Drop all traffic to and from `blocked` (replacing the previous set).
    pub(crate) fn set_blocked(&self, blocked: HashSet<NodeId>) {
        *self.core.blocked.write().unwrap_or_else(|e| e.into_inner()) = blocked.clone();
        let peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        for id in &blocked {
            if let Some(p) = peers.get(id) {
                p.disconnect();
            }
        }
    }

    /// Accept and serve peer connections until shutdown.
    pub(crate) fn serve(
        &self,
        listener: TcpListener,
        handler: Arc<dyn RpcHandler>,
    ) -> JoinHandle<()> {
        let core = self.core.clone();
        tokio::spawn(async move {
            let mut shutdown = core.shutdown.clone();
            loop {
                tokio::select! {
                    accepted = listener.accept() => match accepted {
                        Ok((stream, remote)) => {
                            let core = core.clone();
                            let handler = handler.clone();
                            tokio::spawn(async move { serve_connection(core, stream, remote, handler).await });
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "cluster accept failed");
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                    },
                    _ = shutdown.changed() => break,
                }
            }
        })
    }

    /// Close every connection and stop serving.
    pub(crate) fn shutdown(&self) {
        let _ = self.shutdown_tx.send(true);
        let peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        for p in peers.values() {
            p.disconnect();
        }
    }
}

#[derive(Default)]
struct Backoff {
    failures: u32,
    next_try: Option<Instant>,
}

/// The outgoing side of the link to one peer.
pub(crate) struct PeerClient {
    target: NodeId,
    addr: Mutex<String>,
    core: Arc<Core>,
    conn: Mutex<Option<Arc<Conn>>>,
    /// Serializes connection attempts so concurrent callers share one socket.
    connecting: tokio::sync::Mutex<()>,
    backoff: Mutex<Backoff>,
}

impl PeerClient {
    /// Send `req` and wait for the response, at most `timeout`.
    pub(crate) async fn call(
        &self,
        req: &Request,
        timeout: Duration,
    ) -> Result<Response, CallError> {
        let deadline = Instant::now() + timeout;
        self.send(req, deadline).await?.response().await
    }

    /// Queue `req` on the connection (connecting first if needed, until `deadline`); the
    /// returned call waits for its response until `deadline`. Requests sent one after another
    /// by one task reach the peer in that order.
    pub(crate) async fn send(
        &self,
        req: &Request,
        deadline: Instant,
    ) -> Result<PendingCall, CallError> {
        if self.core.is_blocked(self.target) {
            self.disconnect();
            return Err(CallError::NotSent(format!(
                "peer {} is blocked",
                self.target
            )));
        }
        if *self.core.shutdown.borrow() {
            return Err(CallError::NotSent("transport shut down".into()));
        }
        let conn = tokio::time::timeout_at(deadline, self.connection())
            .await
            .map_err(|_| CallError::NotSent("connect timed out".into()))??;
        let id = conn.next_id.fetch_add(1, Ordering::Relaxed);
        let bytes = postcard::to_allocvec(&EnvelopeRef { id, body: req })
            .map_err(|e| CallError::NotSent(format!("encode: {e}")))?;
        if bytes.len() > self.core.max_frame {
            return Err(CallError::TooLarge(bytes.len()));
        }
        let (tx, rx) = oneshot::channel();
        conn.pending().insert(id, tx);
        if conn.out.send(frame(&bytes)).is_err() {
            conn.close();
            return Err(CallError::NotSent("connection closed".into()));
        }
        Ok(PendingCall {
            conn,
            id,
            rx,
            target: self.target,
            deadline,
        })
    }

    /// Connect now if not connected (making the handshake, so each side hears what the other
    /// advertises), waiting at most `timeout`; a blocked peer is not dialed.
    pub(crate) async fn connect_now(&self, timeout: Duration) -> Result<(), CallError> {
        if self.core.is_blocked(self.target) {
            return Err(CallError::NotSent(format!(
                "peer {} is blocked",
                self.target
            )));
        }
        tokio::time::timeout(timeout, self.connection())
            .await
            .map_err(|_| CallError::NotSent("connect timed out".into()))?
            .map(drop)
    }

    fn disconnect(&self) {
        if let Some(conn) = self.conn.lock().unwrap_or_else(|e| e.into_inner()).take() {
            conn.close();
        }
    }

    fn live_connection(&self) -> Option<Arc<Conn>> {
        let guard = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        guard
            .as_ref()
            .filter(|c| !c.closed.load(Ordering::Acquire))
            .cloned()
    }

    async fn connection(&self) -> Result<Arc<Conn>, CallError> {
        if let Some(conn) = self.live_connection() {
            return Ok(conn);
        }
        let _connecting = self.connecting.lock().await;
        if let Some(conn) = self.live_connection() {
            return Ok(conn);
        }
        {
            let backoff = self.backoff.lock().unwrap_or_else(|e| e.into_inner());
            if backoff.next_try.is_some_and(|t| Instant::now() < t) {
                return Err(CallError::NotSent(format!(
                    "backing off from node {}",
                    self.target
                )));
            }
        }
        let addr = self.addr.lock().unwrap_or_else(|e| e.into_inner()).clone();
        match connect(&self.core, self.target, &addr).await {
            Ok((reader, writer)) => {
                *self.backoff.lock().unwrap_or_else(|e| e.into_inner()) = Backoff::default();
                let conn = Conn::start(self.core.clone(), self.target, reader, writer);
                *self.conn.lock().unwrap_or_else(|e| e.into_inner()) = Some(conn.clone());
                Ok(conn)
            }
            Err(e) => {
                let mut backoff = self.backoff.lock().unwrap_or_else(|e| e.into_inner());
                backoff.failures = backoff.failures.saturating_add(1);
                let exp = BACKOFF_BASE_MS.saturating_mul(1u64 << backoff.failures.min(10));
                let delay = exp.min(BACKOFF_MAX_MS);
                let jitter = rand::thread_rng().gen_range(0..=delay / 4);
                backoff.next_try = Some(Instant::now() + Duration::from_millis(delay + jitter));
                tracing::debug!(peer = self.target, %addr, error = %e, "cluster connect failed");
                Err(CallError::NotSent(format!(
                    "connect to node {} at {addr}: {e}",
                    self.target
                )))
            }
        }
    }
}

/// A request on its way: [`PendingCall::response`] waits for the answer.
pub(crate) struct PendingCall {
    conn: Arc<Conn>,
    id: u64,
    rx: oneshot::Receiver<Response>,
    target: NodeId,
    deadline: Instant,
}

impl PendingCall {
    /// The peer's response, or why none came before the deadline.
    pub(crate) async fn response(self) -> Result<Response, CallError> {
        match tokio::time::timeout_at(self.deadline, self.rx).await {
            Ok(Ok(resp)) => Ok(resp),
            Ok(Err(_)) => Err(CallError::Lost(format!(
                "connection to node {} closed",
                self.target
            ))),
            Err(_) => {
                self.conn.pending().remove(&self.id);
                Err(CallError::TimedOut)
            }
        }
    }
}

/// One authenticated outgoing connection: a writer task, a reader task, pending calls.
struct Conn {
    out: mpsc::UnboundedSender<Vec<u8>>,
    pending: Mutex<HashMap<u64, oneshot::Sender<Response>>>,
    next_id: AtomicU64,
    closed: AtomicBool,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl Conn {
    fn start(
        core: Arc<Core>,
        peer: NodeId,
        reader: BufReader<ReadHalf>,
        writer: WriteHalf,
    ) -> Arc<Conn> {
        let (out, rx) = mpsc::unbounded_channel();
        let conn = Arc::new(Conn {
            out,
            pending: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            closed: AtomicBool::new(false),
            tasks: Mutex::new(Vec::new()),
        });
        let w = tokio::spawn(write_loop(core.clone(), peer, writer, rx));
        let weak = Arc::downgrade(&conn);
        let r = tokio::spawn(async move {
            let mut reader = reader;
            loop {
                let Ok(bytes) = read_frame(&mut reader, core.max_frame).await else {
                    break;
                };
                if core.is_blocked(peer) {
                    break;
                }
                let Ok(env) = postcard::from_bytes::<Envelope<Response>>(&bytes) else {
                    tracing::warn!(peer, "undecodable response frame; closing connection");
                    break;
                };
                let Some(conn) = weak.upgrade() else { break };
                let waiter = conn.pending().remove(&env.id);
                if let Some(tx) = waiter {
                    let _ = tx.send(env.body);
                }
            }
            if let Some(conn) = weak.upgrade() {
                conn.close();
            }
        });
        conn.tasks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend([w, r]);
        conn
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, HashMap<u64, oneshot::Sender<Response>>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Fail every pending call and stop both tasks.
    fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.pending().clear();
        for task in self
            .tasks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            task.abort();
        }
    }
}

/// Write queued frames, coalescing whatever is queued into one flush.
async fn write_loop(
    core: Arc<Core>,
    peer: NodeId,
    writer: WriteHalf,
    mut rx: mpsc::UnboundedReceiver<Vec<u8>>,
) {
    let mut writer = BufWriter::with_capacity(64 * 1024, writer);
    let mut shutdown = core.shutdown.clone();
    loop {
        let first = tokio::select! {
            f = rx.recv() => f,
            _ = shutdown.changed() => None,
        };
        let Some(first) = first else { break };
        if core.is_blocked(peer) {
            break;
        }
        // Let every task that is ready right now (the other callers woken by the same event:
        // responses of one committed entry, proposals of one poll of the client sockets) queue
        // its frame first, so one write carries them all.
        tokio::task::yield_now().await;
        if writer.write_all(&first).await.is_err() {
            break;
        }
        let mut failed = false;
        while let Ok(more) = rx.try_recv() {
            if writer.write_all(&more).await.is_err() {
                failed = true;
                break;
            }
        }
        if failed || writer.flush().await.is_err() {
            break;
        }
    }
    let _ = writer.shutdown().await;
}

/// Serve one incoming connection: authenticate, then answer requests until it closes.
async fn serve_connection(
    core: Arc<Core>,
    stream: TcpStream,
    remote: std::net::SocketAddr,
    handler: Arc<dyn RpcHandler>,
) {
    let _ = stream.set_nodelay(true);
    if let Err(e) = detect_dead_link(&stream) {
        tracing::warn!(%remote, error = %e, "cannot set the cluster connection's timeouts");
    }
    let (reader, mut writer) = match &core.tls {
        None => split_tcp(stream),
        Some(tls) => {
            let acceptor = tokio_rustls::TlsAcceptor::from(tls.server());
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(s)) => split_tls(s),
                Ok(Err(e)) => {
                    tracing::warn!(%remote, error = %e, "rejected cluster connection: TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::warn!(%remote, "cluster TLS handshake timed out");
                    return;
                }
            }
        }
    };
    let mut reader = BufReader::with_capacity(64 * 1024, reader);
    let peer = match tokio::time::timeout(
        HANDSHAKE_TIMEOUT,
        accept_handshake(&core, &mut reader, &mut writer),
    )
    .await
    {
        Ok(Ok(peer)) => peer,
        Ok(Err(e)) => {
            tracing::warn!(%remote, error = %e, "rejected cluster connection");
            return;
        }
        Err(_) => {
            tracing::warn!(%remote, "cluster handshake timed out");
            return;
        }
    };
    if core.is_blocked(peer) {
        return;
    }
    let (out, rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let writer_task = tokio::spawn(write_loop(core.clone(), peer, writer, rx));
    let mut shutdown = core.shutdown.clone();
    loop {
        let bytes = tokio::select! {
            r = read_frame(&mut reader, core.max_frame) => match r {
                Ok(b) => b,
                Err(e) => {
                    if e.kind() != io::ErrorKind::UnexpectedEof {
                        tracing::debug!(peer, error = %e, "cluster connection closed");
                    }
                    break;
                }
            },
            _ = shutdown.changed() => break,
        };
        if core.is_blocked(peer) {
            break;
        }
        let env: Envelope<Request> = match postcard::from_bytes(&bytes) {
            Ok(env) => env,
            Err(e) => {
                tracing::warn!(peer, error = %e, "undecodable request frame; closing connection");
                break;
            }
        };
        let fut = handler.handle(peer, env.body);
        let out = out.clone();
        let id = env.id;
        tokio::spawn(async move {
            let resp = fut.await;
            match postcard::to_allocvec(&EnvelopeRef { id, body: &resp }) {
                Ok(bytes) => {
                    let _ = out.send(frame(&bytes));
                }
                Err(e) => tracing::error!(error = %e, "cannot encode response"),
            }
        });
    }
    writer_task.abort();
}

type HmacSha256 = Hmac<Sha256>;

/// The proof that `role` knows the secret, bound to both nonces and both ids.
fn proof(
    secret: &[u8],
    role: &[u8],
    client_nonce: &[u8; 32],
    server_nonce: &[u8; 32],
    client: NodeId,
    server: NodeId,
) -> HmacSha256 {
    let mut mac = HmacSha256::new_from_slice(secret).expect("HMAC accepts keys of any length");
    mac.update(b"tollgate-raft/v1 ");
    mac.update(role);
    mac.update(client_nonce);
    mac.update(server_nonce);
    mac.update(&client.to_le_bytes());
    mac.update(&server.to_le_bytes());
    mac
}

fn nonce() -> [u8; 32] {
    let mut n = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut n);
    n
}

/// Open a TCP connection to `addr` (`host:port`). The host is looked up again on every call
/// (an IP address is used as it is), so a peer that comes back under the same name at a new
/// address, as a restarted Kubernetes pod does, is reached at the new one: nothing keeps an
/// address from an earlier lookup. Each address the name has is tried in turn.
async fn dial(addr: &str) -> io::Result<TcpStream> {
    let resolved: Vec<SocketAddr> =
        match tokio::time::timeout(RESOLVE_TIMEOUT, tokio::net::lookup_host(addr)).await {
            Ok(Ok(found)) => found.collect(),
            Ok(Err(e)) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("cannot resolve {addr}: {e}"),
                ))
            }
            Err(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("cannot resolve {addr}: no answer within {RESOLVE_TIMEOUT:?}"),
                ))
            }
        };
    if resolved.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("cannot resolve {addr}: no address"),
        ));
    }
    let connected = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(&resolved[..]))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connect timed out"))?;
    // Name the address a host name led to, so a log line shows where the node looked.
    let is_ip = addr.parse::<SocketAddr>().is_ok();
    connected.map_err(|e| {
        if is_ip {
            e
        } else {
            let to: Vec<String> = resolved.iter().map(ToString::to_string).collect();
            io::Error::new(e.kind(), format!("{e} (at {})", to.join(", ")))
        }
    })
}

/// Let the kernel end `stream` once its peer has been unreachable for [`LINK_DEAD_AFTER`]
/// (see the module docs): a TCP user timeout for unacknowledged data, keepalives when idle.
fn detect_dead_link(stream: &TcpStream) -> io::Result<()> {
    let socket = socket2::SockRef::from(stream);
    socket.set_tcp_user_timeout(Some(LINK_DEAD_AFTER))?;
    let probes = 5;
    let interval = LINK_DEAD_AFTER / (2 * probes);
    socket.set_tcp_keepalive(
        &socket2::TcpKeepalive::new()
            .with_time(LINK_DEAD_AFTER / 2)
            .with_interval(interval)
            .with_retries(probes),
    )
}

/// Dial `target` at `addr` and run the client side of the handshake.
async fn connect(
    core: &Core,
    target: NodeId,
    addr: &str,
) -> io::Result<(BufReader<ReadHalf>, WriteHalf)> {
    let stream = dial(addr).await?;
    stream.set_nodelay(true)?;
    detect_dead_link(&stream)?;
    let (reader, mut writer) = match &core.tls {
        None => split_tcp(stream),
        Some(tls) => {
            let connector = tokio_rustls::TlsConnector::from(tls.client());
            let tls_stream = tokio::time::timeout(
                HANDSHAKE_TIMEOUT,
                connector.connect(crate::tls::server_name(addr), stream),
            )
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "TLS handshake timed out"))??;
            split_tls(tls_stream)
        }
    };
    let mut reader = BufReader::with_capacity(64 * 1024, reader);
    let handshake = async {
        let client_nonce = nonce();
        send_handshake(
            &mut writer,
            &Handshake::Hello {
                version: PROTOCOL_VERSION,
                node_id: core.node_id,
                nonce: client_nonce,
            },
        )
        .await?;
        let Handshake::Challenge {
            node_id,
            nonce: server_nonce,
            proof: server_proof,
        } = recv_handshake(&mut reader).await?
        else {
            return Err(invalid("expected challenge"));
        };
        if node_id != target {
            return Err(invalid(&format!(
                "{addr} is node {node_id}, expected node {target}"
            )));
        }
        proof(
            &core.secret,
            b"server",
            &client_nonce,
            &server_nonce,
            core.node_id,
            target,
        )
        .verify_slice(&server_proof)
        .map_err(|_| invalid("peer failed authentication (wrong cluster secret?)"))?;
        let mine = proof(
            &core.secret,
            b"client",
            &client_nonce,
            &server_nonce,
            core.node_id,
            target,
        )
        .finalize();
        send_handshake(
            &mut writer,
            &Handshake::Proof {
                proof: mine.into_bytes().into(),
                advertise: core.advertise.clone(),
            },
        )
        .await?;
        match recv_handshake(&mut reader).await? {
            Handshake::Welcome { advertise } => {
                core.heard(target, advertise);
                Ok(())
            }
            _ => Err(invalid("expected welcome")),
        }
    };
    tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake)
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "handshake timed out"))??;
    Ok((reader, writer))
}

/// Server side of the handshake; returns the authenticated peer id.
async fn accept_handshake<R, W>(core: &Core, reader: &mut R, writer: &mut W) -> io::Result<NodeId>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let Handshake::Hello {
        version,
        node_id: client,
        nonce: client_nonce,
    } = recv_handshake(reader).await?
    else {
        return Err(invalid("expected hello"));
    };
    if version != PROTOCOL_VERSION {
        return Err(invalid(&format!(
            "protocol version {version}, expected {PROTOCOL_VERSION}"
        )));
    }
    let server_nonce = nonce();
    let mine = proof(
        &core.secret,
        b"server",
        &client_nonce,
        &server_nonce,
        client,
        core.node_id,
    )
    .finalize();
    let challenge = Handshake::Challenge {
        node_id: core.node_id,
        nonce: server_nonce,
        proof: mine.into_bytes().into(),
    };
    send_handshake(writer, &challenge).await?;
    let Handshake::Proof {
        proof: client_proof,
        advertise,
    } = recv_handshake(reader).await?
    else {
        return Err(invalid("expected proof"));
    };
    proof(
        &core.secret,
        b"client",
        &client_nonce,
        &server_nonce,
        client,
        core.node_id,
    )
    .verify_slice(&client_proof)
    .map_err(|_| {
        invalid(&format!(
            "node {client} failed authentication (wrong cluster secret?)"
        ))
    })?;
    core.heard(client, advertise);
    send_handshake(
        writer,
        &Handshake::Welcome {
            advertise: core.advertise.clone(),
        },
    )
    .await?;
    Ok(client)
}

async fn send_handshake<W: AsyncWrite + Unpin>(writer: &mut W, msg: &Handshake) -> io::Result<()> {
    let bytes = postcard::to_allocvec(msg).map_err(io::Error::other)?;
    writer.write_all(&frame(&bytes)).await?;
    writer.flush().await
}

async fn recv_handshake<R: AsyncRead + Unpin>(reader: &mut R) -> io::Result<Handshake> {
    let bytes = read_frame(reader, HANDSHAKE_FRAME_MAX).await?;
    postcard::from_bytes(&bytes).map_err(|e| invalid(&format!("bad handshake frame: {e}")))
}

fn invalid(why: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why.to_string())
}

/// `payload` with its 4-byte big-endian length prefix.
fn frame(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 4);
    out.extend_from_slice(
        &u32::try_from(payload.len())
            .unwrap_or(u32::MAX)
            .to_be_bytes(),
    );
    out.extend_from_slice(payload);
    out
}

/// Read one length-prefixed frame, refusing frames larger than `max`.
async fn read_frame<R: AsyncRead + Unpin>(reader: &mut R, max: usize) -> io::Result<Vec<u8>> {
    let len = reader.read_u32().await? as usize;
    if len > max {
        return Err(invalid(&format!(
            "frame of {len} bytes exceeds the {max}-byte cap"
        )));
    }
    let mut buf = vec![0u8; len];
    reader.read_exact(&mut buf).await?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn core(node_id: NodeId, secret: &[u8]) -> Core {
        let (_tx, shutdown) = watch::channel(false);
        Core {
            node_id,
            secret: secret.to_vec(),
            max_frame: 1 << 20,
            blocked: RwLock::new(HashSet::new()),
            shutdown,
            advertise: "server-host:7001".into(),
            advertised: Mutex::new(HashMap::new()),
            tls: None,
        }
    }

    /// Run the client side by hand with `client_secret`, against a server holding "good".
    async fn handshake_with(client_secret: &[u8], forge_server_check: bool) -> io::Result<NodeId> {
        let server = Arc::new(core(1, b"good-secret-good-secret"));
        let (client_io, server_io) = tokio::io::duplex(4096);
        let (mut sr, mut sw) = tokio::io::split(server_io);
        let s = server.clone();
        let server_task = tokio::spawn(async move { accept_handshake(&s, &mut sr, &mut sw).await });
        let (mut cr, mut cw) = tokio::io::split(client_io);
        let client_nonce = nonce();
        let hello = Handshake::Hello {
            version: PROTOCOL_VERSION,
            node_id: 2,
            nonce: client_nonce,
        };
        send_handshake(&mut cw, &hello).await?;
        let Handshake::Challenge {
            nonce: server_nonce,
            proof: server_proof,
            ..
        } = recv_handshake(&mut cr).await?
        else {
            return Err(invalid("no challenge"));
        };
        let server_ok = proof(client_secret, b"server", &client_nonce, &server_nonce, 2, 1)
            .verify_slice(&server_proof)
            .is_ok();
        assert_eq!(server_ok, client_secret == b"good-secret-good-secret");
        if !server_ok && !forge_server_check {
            return Err(invalid("server failed authentication"));
        }
        let mine = proof(client_secret, b"client", &client_nonce, &server_nonce, 2, 1).finalize();
        send_handshake(
            &mut cw,
            &Handshake::Proof {
                proof: mine.into_bytes().into(),
                advertise: "client-host:7002".into(),
            },
        )
        .await?;
        let outcome = server_task.await.map_err(io::Error::other)?;
        // What a peer advertises is kept only once it has proved it holds the secret, and the
        // server advertises itself in its welcome.
        let heard = server.advertised.lock().unwrap().get(&2).cloned();
        assert_eq!(
            heard.as_deref(),
            outcome.is_ok().then_some("client-host:7002")
        );
        if outcome.is_ok() {
            let Handshake::Welcome { advertise } = recv_handshake(&mut cr).await? else {
                return Err(invalid("no welcome"));
            };
            assert_eq!(advertise, "server-host:7001");
        }
        outcome
    }

    #[tokio::test]
    async fn handshake_admits_only_holders_of_the_secret() {
        assert_eq!(
            handshake_with(b"good-secret-good-secret", false)
                .await
                .unwrap(),
            2
        );
        let err = handshake_with(b"bad-secret-bad-secret-xx", true)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("failed authentication"), "{err}");
    }

    #[tokio::test]
    async fn frames_above_the_cap_are_refused() {
        let mut ok: &[u8] = &[0, 0, 0, 3, 7, 8, 9];
        assert_eq!(read_frame(&mut ok, 3).await.unwrap(), vec![7, 8, 9]);
        let mut big: &[u8] = &[0, 0, 0, 4, 1, 2, 3, 4];
        assert!(read_frame(&mut big, 3).await.is_err());
    }
}
