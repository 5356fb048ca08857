//! The server: the listener, the state shared by all connections, the client registry,
//! background expiry, graceful shutdown, and in cluster mode the Raft node's start and stop.

pub mod cluster;
pub mod connection;
pub mod info;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};
use tokio::net::TcpListener;
use tokio::sync::{watch, Notify, Semaphore};

use crate::config::{AppendFsync, Config};
use crate::engine::{Clock, ClusterNode, Engine};

/// Counters reported by INFO stats.
#[derive(Debug, Default)]
pub struct Stats {
    /// Connections accepted.
    pub total_connections: AtomicU64,
    /// Connections refused by maxclients.
    pub rejected_connections: AtomicU64,
    /// Commands processed.
    pub total_commands: AtomicU64,
    /// Keys deleted by the active expiry cycle.
    pub expired_keys: AtomicU64,
}

/// What CLIENT LIST shows about a connection, updated by the connection itself.
#[derive(Debug, Clone)]
pub struct ClientInfo {
    /// CLIENT ID.
    pub id: u64,
    /// Peer address.
    pub addr: SocketAddr,
    /// Local address.
    pub laddr: SocketAddr,
    /// CLIENT SETNAME.
    pub name: String,
    /// Selected database.
    pub db: usize,
    /// Protocol version.
    pub resp: u8,
    /// Connected at.
    pub created: Instant,
    /// Last command name.
    pub last_cmd: &'static str,
    /// CLIENT SETINFO LIB-NAME.
    pub lib_name: String,
    /// CLIENT SETINFO LIB-VER.
    pub lib_ver: String,
    /// Inside MULTI.
    pub in_multi: bool,
}

/// A registered connection: its info and a way to close it (CLIENT KILL).
#[derive(Debug)]
pub struct ClientHandle {
    /// The connection's current info.
    pub info: Mutex<ClientInfo>,
    /// Notified to close the connection.
    pub kill: Notify,
    /// Set when killed, so a kill that arrives between reads is not lost.
    pub killed: AtomicBool,
}

/// State shared by every connection.
pub struct Shared {
    /// Live configuration (CONFIG SET changes it).
    pub config: RwLock<Config>,
    /// The engine that applies commands.
    pub engine: Arc<Engine>,
    /// Connected clients by id.
    pub clients: Mutex<BTreeMap<u64, Arc<ClientHandle>>>,
    /// Next client id.
    pub next_client_id: AtomicU64,
    /// Counters.
    pub stats: Stats,
    /// When the server started.
    pub started: Instant,
    /// The bound client address.
    pub addr: SocketAddr,
    /// Set to request shutdown (SHUTDOWN command or a signal).
    pub shutdown: watch::Sender<bool>,
}

impl Shared {
    /// Ask the server to stop.
    pub fn request_shutdown(&self) {
        let _ = self.shutdown.send(true);
    }
}

/// A bound, not yet serving, server.
pub struct Server {
    listener: TcpListener,
    shared: Arc<Shared>,
}

impl Server {
    /// Bind the client port; in cluster mode also open the Raft storage and cluster port and
    /// join the cluster.
    pub async fn bind(config: Config) -> std::io::Result<Server> {
        let listener = TcpListener::bind((config.bind.as_str(), config.port)).await?;
        let addr = listener.local_addr()?;
        let engine = Engine::new(Clock::new());
        engine.set_busy_threshold(Duration::from_millis(config.busy_reply_threshold));
        if let Some(c) = &config.cluster {
            let node = start_raft(c, addr.port(), &engine).await?;
            tracing::info!(node_id = c.node_id, cluster_addr = %c.cluster_addr, data_dir = %c.data_dir.display(), "raft node started");
            engine.attach_cluster(node);
        }
        let (shutdown, _) = watch::channel(false);
        let shared = Arc::new(Shared {
            config: RwLock::new(config),
            engine,
            clients: Mutex::new(BTreeMap::new()),
            next_client_id: AtomicU64::new(1),
            stats: Stats::default(),
            started: Instant::now(),
            addr,
            shutdown,
        });
        Ok(Server { listener, shared })
    }

    /// The address clients connect to.
    pub fn local_addr(&self) -> SocketAddr {
        self.shared.addr
    }

    /// The shared state (tests use it to inspect the engine).
    pub fn shared(&self) -> Arc<Shared> {
        self.shared.clone()
    }

    /// Serve until `stop` resolves or SHUTDOWN is requested.
    pub async fn serve(self, stop: impl std::future::Future<Output = ()>) {
        let shared = self.shared;
        let maxclients = shared.config.read().maxclients;
        let slots = Arc::new(Semaphore::new(maxclients));
        let mut shutdown_rx = shared.shutdown.subscribe();
        let expiry = tokio::spawn(active_expiry(shared.clone()));
        tracing::info!(addr = %shared.addr, "tollgate ready to accept connections");
        tokio::pin!(stop);
        loop {
            tokio::select! {
                _ = &mut stop => break,
                _ = shutdown_rx.changed() => break,
                accepted = self.listener.accept() => {
                    let (socket, peer) = match accepted {
                        Ok(x) => x,
                        Err(e) => {
                            tracing::warn!(error = %e, "accept failed");
                            tokio::time::sleep(Duration::from_millis(10)).await;
                            continue;
                        }
                    };
                    shared.stats.total_connections.fetch_add(1, Ordering::Relaxed);
                    match slots.clone().try_acquire_owned() {
                        Ok(permit) => {
                            let shared = shared.clone();
                            tokio::spawn(async move {
                                connection::serve(shared, socket, peer).await;
                                drop(permit);
                            });
                        }
                        Err(_) => {
                            shared.stats.rejected_connections.fetch_add(1, Ordering::Relaxed);
                            tokio::spawn(connection::refuse(socket));
                        }
                    }
                }
            }
        }
        let _ = shared.shutdown.send(true);
        expiry.abort();
        if let Some(node) = shared.engine.cluster() {
            node.shutdown().await;
        }
        tracing::info!("tollgate is now ready to exit, bye bye");
    }
}

/// Delete expired keys in the background so memory is reclaimed without traffic:
/// every 100 ms, and again at once while a cycle found a full batch of due keys.
async fn active_expiry(shared: Arc<Shared>) {
    const BATCH: usize = 200;
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    loop {
        tick.tick().await;
        for _ in 0..50 {
            let n = shared.engine.expire_cycle(BATCH).await;
            shared
                .stats
                .expired_keys
                .fetch_add(n as u64, Ordering::Relaxed);
            if n < BATCH {
                break;
            }
            tokio::task::yield_now().await;
        }
    }
}

/// Open this node's Raft storage and cluster port over the engine's state.
async fn start_raft(
    c: &crate::config::ClusterConfig,
    client_port: u16,
    engine: &Engine,
) -> std::io::Result<ClusterNode> {
    let mut rc = tollgate_raft::Config::new(
        c.node_id,
        c.cluster_addr.clone(),
        c.peers.clone(),
        c.data_dir.clone(),
        c.secret.clone().into_bytes(),
    );
    rc.bind_addr = Some(c.cluster_bind.clone());
    rc.advertise = cluster::advertised_client_addr(&c.cluster_addr, client_port);
    rc.client_timeout = c.timeout;
    rc.election_timeout_min_ms = c.election_timeout_ms;
    rc.election_timeout_max_ms = 2 * c.election_timeout_ms;
    rc.heartbeat_interval_ms = c.heartbeat_interval_ms;
    rc.fsync = match c.fsync {
        AppendFsync::Always => tollgate_raft::FsyncPolicy::Always,
        AppendFsync::EverySec => tollgate_raft::FsyncPolicy::EverySec,
    };
    ClusterNode::start(rc, engine.replicated_state())
        .await
        .map_err(|e| std::io::Error::other(e.to_string()))
}

/// The runtime a server runs on: `threads` network worker threads (`--threads`; 0 = one
/// per CPU core).
pub fn runtime(threads: usize) -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if threads > 0 {
        builder.worker_threads(threads);
    }
    builder.enable_all().build()
}

/// Start serving on a background task; returns the bound address and shared state.
/// Used by tests and embedders.
pub async fn spawn(config: Config) -> std::io::Result<(SocketAddr, Arc<Shared>)> {
    let server = Server::bind(config).await?;
    let addr = server.local_addr();
    let shared = server.shared();
    tokio::spawn(server.serve(std::future::pending()));
    Ok((addr, shared))
}
