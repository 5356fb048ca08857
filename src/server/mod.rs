//! The server: the listener, the state shared by all connections, the client registry,
//! background expiry, graceful shutdown, and in cluster mode the Raft node's start and stop.
//!
//! | file | what it owns |
//! | --- | --- |
//! | `connection.rs` | one client: reading, routing each request by its table row, replies |
//! | `client_commands.rs` | the connection commands (AUTH, HELLO, CLIENT, INFO, ...) |
//! | `transaction.rs` | MULTI, EXEC, DISCARD, WATCH, UNWATCH |
//! | `info.rs` | INFO, CONFIG, COMMAND, MEMORY texts and CLIENT LIST lines |
//! | `cluster.rs` | CLUSTER and RAFT.* in cluster mode, INFO replication |
//! | `security.rs` | protected mode and the cross-protocol (HTTP) defence |
//! | `tls.rs` | TLS on the client port; reloading certificates (CONFIG SET, SIGHUP) |
//! | `logging.rs` | log filter, format (text/json) and colour |
//! | `http.rs` | the HTTP listener: /metrics, /healthz, /readyz |

pub mod acl;
pub mod acl_file;
pub mod blocking;
pub mod client_commands;
pub mod cluster;
pub mod connection;
pub mod fds;
pub mod http;
pub mod info;
pub mod listeners;
pub mod logging;
pub mod persistence;
pub mod pubsub;
pub mod security;
pub mod thp;
pub mod tls;
pub mod transaction;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};
use tokio::net::TcpListener;
use tokio::sync::{watch, Notify};

use crate::config::params::Apply;
use crate::config::{AppendFsync, Config};
use crate::engine::{Clock, ClusterNode, Engine};

/// Counters reported by INFO stats.
#[derive(Debug, Default)]
pub struct Stats {
    /// Socket reads that returned data.
    pub reads: AtomicU64,
    /// Socket writes.
    pub writes: AtomicU64,
    /// Heap bytes in use when the server started (INFO `used_memory_startup`).
    pub memory_startup: AtomicU64,
    /// The Lua VMs' and the keyspace tables' parts of `memory_startup` (their growth
    /// since is INFO `used_memory_overhead`).
    pub overhead_startup: [AtomicU64; 2],
    /// Highest heap use seen (INFO `used_memory_peak`).
    pub memory_peak: AtomicU64,
    /// Samples of (when, commands, bytes in, bytes out), every 100 ms, the last 16:
    /// INFO's `instantaneous_*` rates are averages over them, as in Redis.
    samples: Mutex<std::collections::VecDeque<(Instant, u64, u64, u64)>>,
    /// Connections accepted.
    pub total_connections: AtomicU64,
    /// Connections refused by maxclients.
    pub rejected_connections: AtomicU64,
    /// Commands processed.
    pub total_commands: AtomicU64,
}

impl Stats {
    /// Note heap use `used`; returns the peak so far.
    pub fn note_memory(&self, used: usize) -> usize {
        let used = used as u64;
        self.memory_peak
            .fetch_max(used, Ordering::Relaxed)
            .max(used) as usize
    }

    /// Take one sample for the instantaneous rates.
    fn sample(&self, commands: u64, input: u64, output: u64) {
        let mut s = self.samples.lock();
        s.push_back((Instant::now(), commands, input, output));
        if s.len() > 17 {
            s.pop_front();
        }
    }

    /// Commands, input bytes and output bytes per second over the recent samples.
    pub fn rates(&self) -> (f64, f64, f64) {
        let s = self.samples.lock();
        let (Some(first), Some(last)) = (s.front(), s.back()) else {
            return (0.0, 0.0, 0.0);
        };
        let secs = last.0.duration_since(first.0).as_secs_f64();
        if secs <= 0.0 {
            return (0.0, 0.0, 0.0);
        }
        let rate = |a: u64, b: u64| b.saturating_sub(a) as f64 / secs;
        (
            rate(first.1, last.1),
            rate(first.2, last.2),
            rate(first.3, last.3),
        )
    }
}

/// A coarse clock for CLIENT LIST's `idle`, as Redis uses its cached `server.unixtime`:
/// tenths of a second since the first reading, moved forward by [`sample_stats`] every
/// 100 ms, so that a connection notes its last interaction with one relaxed load instead
/// of a clock reading per read.
pub fn coarse_ds() -> u64 {
    COARSE_DS.load(Ordering::Relaxed)
}

static COARSE_DS: AtomicU64 = AtomicU64::new(0);

fn tick_coarse_clock() {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    let ds = EPOCH.get_or_init(Instant::now).elapsed().as_millis() / 100;
    COARSE_DS.fetch_max(ds as u64, Ordering::Relaxed);
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
    /// Its last read, on the [`coarse_ds`] clock (CLIENT LIST `idle`).
    pub last_interaction: u64,
    /// The socket's file descriptor (CLIENT LIST `fd`).
    pub fd: i32,
    /// Last command name.
    pub last_cmd: &'static str,
    /// Inside MULTI.
    pub in_multi: bool,
    /// Channels, patterns and shard channels subscribed to (CLIENT LIST `sub`, `psub`,
    /// `ssub`, flag `P`).
    pub subs: (usize, usize, usize),
    /// Blocked in BLPOP & co. (CLIENT LIST flag `b`).
    pub blocked: bool,
    /// Blocked with a timeout (INFO `clients_in_timeout_table`).
    pub blocked_with_timeout: bool,
    /// Bytes of the query buffer after the last read (CLIENT LIST `qbuf`).
    pub qbuf: usize,
    /// Capacity of the query buffer (its `qbuf` plus `qbuf-free`).
    pub qbuf_capacity: usize,
    /// Bytes of the last reply written (CLIENT LIST `omem`... see `client_line`).
    pub obuf: usize,
    /// Capacity of the output buffer.
    pub obuf_capacity: usize,
    /// Bytes of the commands queued in MULTI (`multi-mem`).
    pub multi_mem: usize,
    /// Commands queued in MULTI.
    pub multi_len: usize,
    /// In MONITOR mode (CLIENT LIST flag `O`).
    pub monitor: bool,
    /// Bytes of the arguments of the command it is in (CLIENT LIST `argv-mem`): a blocked
    /// command's; 0 between commands (the caller's own line shows its CLIENT call's).
    pub argv_mem: usize,
    /// The ACL user it is authenticated as (CLIENT LIST `user`).
    pub user: String,
}

impl ClientInfo {
    /// The connection's memory as CLIENT LIST `tot-mem` shows it: its query and output
    /// buffers, its queued MULTI commands and its own state.
    pub fn total_memory(&self) -> usize {
        self.qbuf_capacity
            + self.obuf_capacity
            + self.multi_mem
            + std::mem::size_of::<ClientInfo>()
            + std::mem::size_of::<connection::Client>()
    }
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

impl ClientHandle {
    /// Whether the connection was killed; if so, take the kill back (flag and stored
    /// notification), so the connection task can write its current reply and then close
    /// by itself.
    pub fn take_kill(&self) -> bool {
        if !self.killed.swap(false, Ordering::AcqRel) {
            return false;
        }
        // The stored notification: a `Notified` polled once completes at once when a
        // permit is there (and is then dropped without passing it on).
        let mut notified = std::pin::pin!(self.kill.notified());
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        let _ = std::future::Future::poll(notified.as_mut(), &mut cx);
        true
    }
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
    /// The client address bound at start (the TLS port's when there is no plaintext
    /// port); CONFIG SET port may move it since (`listeners`).
    pub addr: SocketAddr,
    /// The TLS client address bound at start, if `tls-port` was set.
    pub tls_addr: Option<SocketAddr>,
    /// The client ports' listeners (CONFIG SET port and tls-port replace them).
    pub listeners: listeners::Listeners,
    /// The TLS port's certificates (reloadable), once a `tls-port` is set (at start or by
    /// CONFIG SET).
    pub tls: std::sync::OnceLock<tls::ClientTls>,
    /// The cluster link's mutual TLS (reloadable), if `tls-cluster yes`.
    pub cluster_tls: Option<Arc<tollgate_raft::tls::ClusterTls>>,
    /// Set to request shutdown (SHUTDOWN command or a signal).
    pub shutdown: watch::Sender<bool>,
    /// Client connections open now (compared with `maxclients` at accept).
    pub connected: AtomicUsize,
    /// Descriptors kept for Tollgate itself (`fds::reserved`).
    pub reserved_fds: u64,
    /// BGREWRITEAOF jobs (INFO persistence).
    pub rewrites: persistence::Rewrites,
    /// True while a durable node is still applying the log it found at start (INFO's
    /// `loading`).
    pub loading: AtomicBool,
    /// Protected mode and the cross-protocol defence, with their rate-limited logs.
    pub security: security::Guard,
    /// Where the HTTP listener (/metrics, /healthz, /readyz) listens, if it is on.
    pub http_addr: Option<SocketAddr>,
    /// INFO `run_id`: 40 hex digits, new at every start.
    pub run_id: String,
}

impl Shared {
    /// Ask the server to stop.
    pub fn request_shutdown(&self) {
        let _ = self.shutdown.send(true);
    }
}

/// A bound, not yet serving, server.
pub struct Server {
    http: Option<TcpListener>,
    shared: Arc<Shared>,
}

impl Server {
    /// Bind the client port; in cluster mode also open the Raft storage and cluster port and
    /// join the cluster.
    pub async fn bind(mut config: Config) -> std::io::Result<Server> {
        match thp::apply(config.disable_thp) {
            Ok(done) => tracing::info!("{done}"),
            Err(e) => {
                tracing::warn!(error = %e, "disable-thp yes: could not disable transparent huge pages")
            }
        }
        let reserved_fds = fds::reserved(config.cluster.as_ref().map(|c| c.peers.len()));
        let fit =
            fds::fit_maxclients(config.maxclients, reserved_fds).map_err(std::io::Error::other)?;
        if let Some(from) = fit.raised_from {
            tracing::info!(
                "Increased maximum number of open files to {} (it was originally set to {from}).",
                fit.limit
            );
        }
        if let Some(warning) = &fit.warning {
            tracing::warn!("{warning}");
        }
        config.maxclients = fit.maxclients;
        // `port 0` picks a free port (CONFIG GET port then shows it), unless a TLS port is
        // set: then it turns plaintext off.
        let tls_only = config.port == 0 && config.tls.port != 0;
        let listener = match tls_only {
            true => None,
            false => Some(listeners::listen(&config.bind, config.port)?),
        };
        if let Some(l) = &listener {
            config.port = l.local_addr()?.port();
        }
        let client_tls = std::sync::OnceLock::new();
        if config.tls.port != 0 {
            let _ = client_tls.set(tls::ClientTls::load(&config.tls).map_err(tls_error)?);
        }
        let cluster_tls = tls::cluster_tls(&config.tls).map_err(tls_error)?;
        let tls_listener = match config.tls.port {
            0 => None,
            port => Some(listeners::listen(&config.bind, port)?),
        };
        let tls_addr = tls_listener.as_ref().map(|l| l.local_addr()).transpose()?;
        let addr = match &listener {
            Some(l) => l.local_addr()?,
            None => tls_addr.expect("a TLS listener when there is no plaintext one"),
        };
        let http = match config.http_port {
            0 => None,
            port => Some(http::bind(&config.http_bind, port).await.map_err(|e| {
                std::io::Error::new(
                    e.kind(),
                    format!("HTTP listener {}:{port}: {e}", config.http_bind),
                )
            })?),
        };
        let http_addr = http.as_ref().map(|l| l.local_addr()).transpose()?;
        let engine = Engine::new(Clock::new());
        engine
            .metrics()
            .decisions
            .set_prefix_limit(config.metrics_key_prefixes);
        engine
            .metrics()
            .configure_slowlog(config.slowlog_log_slower_than, config.slowlog_max_len);
        engine
            .metrics()
            .configure_latency(config.latency_monitor_threshold);
        engine
            .metrics()
            .set_latency_tracking(config.latency_tracking);
        engine.set_busy_threshold(Duration::from_millis(config.busy_reply_threshold));
        engine.set_hll_sparse_max_bytes(config.hll_sparse_max_bytes);
        engine.set_no_good_replicas(no_good_replicas(&config));
        engine.memory().configure(&config.memory);
        engine.set_object_settings(config.object_settings());
        engine.encodings().configure(&config.encodings);
        engine.pubsub().set_events(config.notify_keyspace_events);
        engine.pubsub().set_limit(config.output_buffer_limits[2]);
        let key_save_delay = Duration::from_micros(config.rdb_key_save_delay);
        match &mut config.cluster {
            None => tracing::info!(
                "running in memory only: no data directory, so nothing is written to disk and \
                 all data is lost when the process stops (start with --data-dir <dir> for a \
                 durable node)"
            ),
            Some(c) => {
                if c.standalone && c.secret.is_empty() {
                    c.secret = persistence::load_or_create_secret(&c.data_dir).map_err(|e| {
                        std::io::Error::other(format!(
                            "cluster secret in {}: {e}",
                            c.data_dir.display()
                        ))
                    })?;
                }
                crate::store::seed_key_hasher(c.secret.as_bytes())
                    .map_err(std::io::Error::other)?;
                if !c.standalone {
                    if let Some(warning) = bind_mismatch(&config.bind, &c.cluster_addr) {
                        tracing::warn!("{warning}");
                    }
                }
                let node = start_raft(c, addr.port(), &engine, cluster_tls.clone()).await?;
                node.set_key_save_delay(key_save_delay);
                if c.standalone {
                    tracing::info!(
                        data_dir = %c.data_dir.display(),
                        appendfsync = ?c.fsync,
                        "durable single node: every write is in the Raft log under the data \
                         directory before it is acknowledged; it grows into a cluster with \
                         RAFT.ADDNODE (its cluster port {} is bound then; new nodes need the \
                         secret in {})",
                        c.cluster_addr,
                        c.data_dir.join("cluster-secret").display()
                    );
                } else {
                    tracing::info!(node_id = c.node_id, cluster_addr = %c.cluster_addr, data_dir = %c.data_dir.display(), "raft node started");
                }
                engine.attach_cluster(node, c.standalone);
            }
        }
        engine.acl().set_requirepass(config.requirepass.as_deref());
        engine.acl().log.lock().set_max_len(config.acllog_max_len);
        if let Some(path) = &config.aclfile {
            // As Redis: a server whose aclfile has errors does not start.
            let users = acl_file::read(path, config.acl_pubsub_all).map_err(|e| {
                std::io::Error::other(format!("Aborting Redis startup because of ACL errors: {e}"))
            })?;
            engine.acl().replace(users, crate::acl::Event::Installed);
        }
        let (shutdown, _) = watch::channel(false);
        let durable = config.cluster.is_some();
        let shared = Arc::new(Shared {
            config: RwLock::new(config),
            engine,
            clients: Mutex::new(BTreeMap::new()),
            next_client_id: AtomicU64::new(1),
            stats: Stats::default(),
            started: Instant::now(),
            addr,
            tls_addr,
            listeners: listeners::Listeners::new(listener, tls_listener),
            tls: client_tls,
            cluster_tls,
            shutdown,
            connected: AtomicUsize::new(0),
            reserved_fds,
            rewrites: persistence::Rewrites::default(),
            loading: AtomicBool::new(durable),
            security: security::Guard::default(),
            http_addr,
            run_id: run_id(),
        });
        acl::observe(&shared);
        shared
            .stats
            .memory_startup
            .store(crate::alloc::allocated() as u64, Ordering::Relaxed);
        let (lua, tables) = shared.engine.overhead_parts();
        shared.stats.overhead_startup[0].store(lua as u64, Ordering::Relaxed);
        shared.stats.overhead_startup[1].store(tables as u64, Ordering::Relaxed);
        Ok(Server { http, shared })
    }

    /// The TLS client address, if `tls-port` is set.
    pub fn tls_addr(&self) -> Option<SocketAddr> {
        self.shared.tls_addr
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
        let mut shutdown_rx = shared.shutdown.subscribe();
        let cron = tokio::spawn(server_cron(shared.clone()));
        let durable: Vec<_> = match shared.engine.cluster() {
            Some(node) => vec![
                tokio::spawn(persistence::save_points_task(shared.clone(), node.clone())),
                tokio::spawn(watch_loading(shared.clone(), node.clone())),
            ],
            None => Vec::new(),
        };
        if let (Some(listener), Some(addr)) = (self.http, shared.http_addr) {
            tracing::info!("serving {}", http::describe(addr));
            tokio::spawn(http::serve(listener, shared.clone()));
        }
        tracing::debug!(
            plain = future_size(connection::serve_tcp),
            tls = future_size(tls::serve),
            "bytes of a connection's task state (its future), besides its buffers"
        );
        let mut spare = fds::Spare::new();
        let reloader = tokio::spawn(reload_on_sighup(shared.clone()));
        let mut warned_at: Option<Instant> = None;
        match (
            shared.tls_addr,
            shared.listeners.addr(listeners::Port::Plain),
        ) {
            (Some(tls_addr), Some(_)) => {
                tracing::info!(addr = %shared.addr, %tls_addr, "tollgate ready to accept connections")
            }
            (Some(tls_addr), None) => {
                tracing::info!(%tls_addr, "tollgate ready to accept connections (TLS only: no plaintext port)")
            }
            (None, _) => {
                tracing::info!(addr = %shared.addr, "tollgate ready to accept connections")
            }
        }
        tokio::pin!(stop);
        loop {
            tokio::select! {
                _ = &mut stop => break,
                _ = shutdown_rx.changed() => break,
                (accepted, over_tls) = shared.listeners.accept() => {
                    let (socket, peer) = match accepted {
                        Ok(x) => x,
                        Err(e) if fds::out_of_descriptors(&e) => {
                            if warned_at.is_none_or(|t| t.elapsed() > Duration::from_secs(10)) {
                                tracing::warn!(error = %e, "out of file descriptors: refusing new connections (raise 'ulimit -n' or lower maxclients)");
                                warned_at = Some(Instant::now());
                            }
                            shed_connection(&mut spare, &shared).await;
                            continue;
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "accept failed");
                            tokio::time::sleep(Duration::from_millis(10)).await;
                            continue;
                        }
                    };
                    shared.stats.total_connections.fetch_add(1, Ordering::Relaxed);
                    let maxclients = shared.config.read().maxclients;
                    if shared.connected.fetch_add(1, Ordering::AcqRel) >= maxclients {
                        shared.connected.fetch_sub(1, Ordering::AcqRel);
                        shared.stats.rejected_connections.fetch_add(1, Ordering::Relaxed);
                        tokio::spawn(connection::refuse(socket));
                        continue;
                    }
                    let shared = shared.clone();
                    tokio::spawn(async move {
                        match over_tls {
                            true => tls::serve(shared.clone(), socket, peer).await,
                            false => connection::serve_tcp(shared.clone(), socket, peer).await,
                        }
                        shared.connected.fetch_sub(1, Ordering::AcqRel);
                    });
                }
            }
        }
        let _ = shared.shutdown.send(true);
        // New connections are refused from here on (the listeners live in `Shared`, which
        // open connections and tests keep).
        shared.listeners.close();
        cron.abort();
        for task in durable {
            task.abort();
        }
        reloader.abort();
        if let Some(node) = shared.engine.cluster() {
            node.shutdown().await;
        }
        tracing::info!("tollgate is now ready to exit, bye bye");
    }
}

/// A TLS setting that cannot be used, as a start-up error.
fn tls_error(why: String) -> std::io::Error {
    std::io::Error::other(format!("Failed to configure TLS: {why}"))
}

/// Read the TLS certificates again on every SIGHUP (new handshakes use them).
async fn reload_on_sighup(shared: Arc<Shared>) {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut hup) = signal(SignalKind::hangup()) else {
        return;
    };
    while hup.recv().await.is_some() {
        if shared.tls.get().is_none() && shared.cluster_tls.is_none() {
            tracing::info!("SIGHUP: no TLS in use, nothing to reload");
            continue;
        }
        let config = shared.config.read().clone();
        match tls::reload(&shared, &config) {
            Ok(()) => tracing::info!("SIGHUP: TLS certificates reloaded; new connections use them"),
            Err(why) => {
                tracing::warn!("SIGHUP: TLS certificates not reloaded, the ones in use stay: {why}")
            }
        }
    }
}

/// The size of the future an async function of three arguments returns (a connection's
/// task state: `bench/conn_memory.sh` counts the rest of a connection's memory).
fn future_size<A, B, C, F: std::future::Future>(_: impl Fn(A, B, C) -> F) -> usize {
    std::mem::size_of::<F>()
}

/// Out of descriptors with a connection waiting: free the spare descriptor, take the
/// connection, tell it the server is full and close it, then hold a spare again.
async fn shed_connection(spare: &mut fds::Spare, shared: &Shared) {
    spare.release();
    let accepted = tokio::time::timeout(Duration::from_millis(10), shared.listeners.accept()).await;
    if let Ok((Ok((socket, _)), _)) = accepted {
        shared
            .stats
            .total_connections
            .fetch_add(1, Ordering::Relaxed);
        shared
            .stats
            .rejected_connections
            .fetch_add(1, Ordering::Relaxed);
        connection::refuse(socket).await;
    } else {
        // Nothing could be taken (another thread holds the freed descriptor): pause rather
        // than spin on a listener that stays ready.
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    spare.restore();
}

/// A run id: 40 hex digits from the process's random hasher keys and the start time (not
/// in any replicated path).
fn run_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut out = String::with_capacity(48);
    for i in 0..3u64 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(i);
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
        );
        out.push_str(&format!("{:016x}", h.finish()));
    }
    out.truncate(40);
    out
}

/// A sample for INFO's instantaneous rates, and the memory peak (every cron tick).
fn sample_stats(shared: &Shared) {
    tick_coarse_clock();
    let m = shared.engine.metrics();
    shared.stats.sample(
        shared.stats.total_commands.load(Ordering::Relaxed),
        m.net_input.load(Ordering::Relaxed),
        m.net_output.load(Ordering::Relaxed),
    );
    shared.stats.note_memory(crate::alloc::allocated());
}

/// Why the advertised cluster address `cluster_addr` (this node's entry in `--peers`) is
/// not one this node listens on with `--bind bind`, if it is not: the other nodes could
/// not reach it.
pub fn bind_mismatch(bind: &str, cluster_addr: &str) -> Option<String> {
    use std::net::{IpAddr, ToSocketAddrs};
    let host = cluster_addr
        .rsplit_once(':')
        .map_or(cluster_addr, |(h, _)| h);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let bind_ip: IpAddr = bind.parse().ok()?;
    if bind_ip.is_unspecified() {
        return None;
    }
    let resolved: Vec<IpAddr> = (host, 0)
        .to_socket_addrs()
        .map(|a| a.map(|s| s.ip()).collect())
        .unwrap_or_default();
    if resolved.contains(&bind_ip) {
        return None;
    }
    Some(format!(
        "the cluster address {cluster_addr} (this node's entry in --peers) is not an address \
         this node listens on (--bind {bind}): the other nodes cannot reach it. Start it with \
         --bind {host} (or --bind 0.0.0.0 on a private network)"
    ))
}

/// Seconds since the Unix epoch, by the wall clock.
pub fn unix_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Redis's `checkGoodReplicasStatus` on a standalone server, which has no replicas: writes
/// are refused once `min-replicas-to-write` asks for any (and `min-replicas-max-lag` is
/// not 0, which turns the check off in Redis).
fn no_good_replicas(config: &Config) -> bool {
    config.min_replicas_to_write > 0 && config.min_replicas_max_lag > 0
}

/// Make the running server follow a CONFIG SET (`old` → `new`); an error refuses it.
pub fn apply_config(
    shared: &Shared,
    what: Apply,
    old: &Config,
    new: &Config,
) -> Result<(), String> {
    match what {
        Apply::Nothing => Ok(()),
        Apply::PubSub => {
            shared
                .engine
                .pubsub()
                .set_events(new.notify_keyspace_events);
            shared
                .engine
                .pubsub()
                .set_limit(new.output_buffer_limits[2]);
            Ok(())
        }
        Apply::Memory => {
            let used = crate::alloc::allocated() as u64;
            if new.memory.maxmemory != old.memory.maxmemory
                && new.memory.maxmemory > 0
                && used > new.memory.maxmemory
            {
                tracing::warn!(
                    "WARNING: the new maxmemory value set via CONFIG SET ({}) is smaller than the current memory usage ({used}). This will result in key eviction and/or the inability to accept new write commands depending on the maxmemory-policy.",
                    new.memory.maxmemory
                );
            }
            shared.engine.memory().configure(&new.memory);
            Ok(())
        }
        Apply::BusyThreshold => {
            shared
                .engine
                .set_busy_threshold(Duration::from_millis(new.busy_reply_threshold));
            Ok(())
        }
        Apply::MaxClients => {
            if new.maxclients <= old.maxclients {
                return Ok(());
            }
            let fit = fds::fit_maxclients(new.maxclients, shared.reserved_fds)?;
            if fit.maxclients < new.maxclients {
                return Err(format!(
                    "The operating system is not able to handle the specified number of clients, try with {}",
                    fit.maxclients
                ));
            }
            Ok(())
        }
        Apply::KeySaveDelay => {
            if let Some(node) = shared.engine.cluster() {
                node.set_key_save_delay(Duration::from_micros(new.rdb_key_save_delay));
            }
            Ok(())
        }
        Apply::Tls => tls::apply(shared, new),
        Apply::Requirepass => {
            shared
                .engine
                .acl()
                .set_requirepass(new.requirepass.as_deref());
            Ok(())
        }
        Apply::Replicas => {
            shared.engine.set_no_good_replicas(no_good_replicas(new));
            Ok(())
        }
        Apply::Hll => {
            shared
                .engine
                .set_hll_sparse_max_bytes(new.hll_sparse_max_bytes);
            Ok(())
        }
        Apply::AclLog => {
            shared
                .engine
                .acl()
                .log
                .lock()
                .set_max_len(new.acllog_max_len);
            Ok(())
        }
        Apply::Slowlog => {
            let metrics = shared.engine.metrics();
            metrics.configure_slowlog(new.slowlog_log_slower_than, new.slowlog_max_len);
            metrics.configure_latency(new.latency_monitor_threshold);
            metrics.set_latency_tracking(new.latency_tracking);
            Ok(())
        }
        Apply::Encodings => {
            shared.engine.encodings().configure(&new.encodings);
            Ok(())
        }
        Apply::Port => move_port(shared, listeners::Port::Plain, old.port, new),
        Apply::TlsPort => {
            if new.tls.port != 0 && shared.tls.get().is_none() {
                // TLS was off until now: its files are read first, as Redis configures TLS.
                let loaded = tls::ClientTls::load(&new.tls).map_err(|why| {
                    tracing::warn!("Failed to configure TLS: {why}");
                    tls::RELOAD_FAILED.to_string()
                })?;
                let _ = shared.tls.set(loaded);
            }
            move_port(shared, listeners::Port::Tls, old.tls.port, new)
        }
        Apply::Fsync => {
            if let (Some(node), Some(c)) = (shared.engine.cluster(), &new.cluster) {
                node.set_fsync(match c.fsync {
                    AppendFsync::Always => tollgate_raft::FsyncPolicy::Always,
                    AppendFsync::EverySec => tollgate_raft::FsyncPolicy::EverySec,
                });
            }
            Ok(())
        }
    }
}

/// CONFIG SET port / tls-port: bind the new port, then close the old one (0 closes it);
/// an unchanged value changes nothing, as in Redis. A Raft node keeps its port: its client
/// address is part of the cluster's membership (CLUSTER SLOTS, MOVED, the proxy to the
/// leader), which a local change would leave wrong.
fn move_port(
    shared: &Shared,
    which: listeners::Port,
    old: u16,
    new: &Config,
) -> Result<(), String> {
    let port = match which {
        listeners::Port::Plain => new.port,
        listeners::Port::Tls => new.tls.port,
    };
    if port == old {
        return Ok(());
    }
    if shared.engine.cluster().is_some() {
        return Err(
            "a Raft node's client port is part of its cluster address; restart it with the new port"
                .into(),
        );
    }
    shared.listeners.rebind(which, &new.bind, port)
}

/// The server's background work, as Redis's `serverCron` at `hz 10`: one task on one
/// 100 ms timer runs the stats sample ([`sample_stats`]), eviction and the release of free
/// memory ([`MemoryCycle`]) and active expiry ([`expire_due_keys`]), in that order. Three
/// tasks on three 100 ms timers woke the runtime's two worker threads 20 times a second
/// when idle (the worker that fired the timers found three tasks queued and woke the other
/// to share them), against redis-server's 10 (`bench/idle_wakeups.sh`). A write that finds
/// memory over `maxmemory` still starts eviction at once (`MemoryControl::wake_if_over`),
/// between two ticks.
async fn server_cron(shared: Arc<Shared>) {
    let memory = shared.engine.memory().clone();
    let mut tick = tokio::time::interval(CRON_PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut cycle = MemoryCycle::new();
    loop {
        let ticked = tokio::select! {
            _ = tick.tick() => true,
            _ = memory.woken() => false,
        };
        if ticked {
            sample_stats(&shared);
        }
        cycle.run(&shared).await;
        if ticked {
            expire_due_keys(&shared).await;
        }
    }
}

/// The period of [`server_cron`] (Redis's `1000 / hz` with `hz 10`).
const CRON_PERIOD: Duration = Duration::from_millis(100);

/// Keep used memory within `maxmemory` and give freed memory back to the OS: every cron
/// tick, and at once when a write finds memory over the limit.
///
/// Memory is handed back after it shrank, and also once it has grown and settled: growth
/// frees memory too (each hash table that grows frees its old table, and a keyspace
/// filled with many keys grows its 1,024 shards' tables through every size), which the
/// allocator keeps resident in pages of that block size until it is asked to purge. Loading
/// 100,000 small hashes left about 90 bytes per key resident that way, a third of the
/// RSS growth (`bench/memory.sh`).
struct MemoryCycle {
    /// The most used memory since the last release.
    high: usize,
    /// Used memory at the last release.
    released: usize,
    /// Used memory at the last cycle.
    last: usize,
}

impl MemoryCycle {
    fn new() -> MemoryCycle {
        let used = crate::alloc::allocated();
        MemoryCycle {
            high: used,
            released: used,
            last: used,
        }
    }

    async fn run(&mut self, shared: &Shared) {
        shared.engine.evict_cycle().await;
        let used = crate::alloc::allocated();
        self.high = self.high.max(used);
        // A quarter of what was in use (and at least 1 MB) is free again; or use grew by
        // an eighth (at least 8 MB) since the last release and moved less than 1 MB since
        // the last cycle. Releases after growth are geometric: O(log n) of them for n bytes.
        let shrunk = self.high - used >= (self.high / 4).max(1 << 20);
        let settled = used.abs_diff(self.last) < 1 << 20
            && used.saturating_sub(self.released) >= (self.released / 8).max(8 << 20);
        if shrunk || settled {
            crate::alloc::release_free_memory();
            self.high = used;
            self.released = used;
        }
        self.last = used;
    }
}

/// Delete expired keys in the background so memory is reclaimed without traffic: once a
/// cron tick, and again at once while a cycle found a full batch of due keys (up to 50
/// batches). Eviction asked for meanwhile runs between two batches.
async fn expire_due_keys(shared: &Shared) {
    const BATCH: usize = 200;
    for _ in 0..50 {
        // The deletions count themselves (`pubsub::Hub::expired`).
        let n = shared.engine.expire_cycle(BATCH).await;
        if n < BATCH {
            break;
        }
        shared.engine.evict_cycle().await;
        tokio::task::yield_now().await;
    }
}

/// Clear `loading` once the node has applied every entry that was committed when it started.
async fn watch_loading(shared: Arc<Shared>, node: ClusterNode) {
    let target = node.status().commit_index;
    loop {
        if node.status().applied_index >= target {
            shared.loading.store(false, Ordering::Release);
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Open this node's Raft storage and cluster port over the engine's state.
async fn start_raft(
    c: &crate::config::ClusterConfig,
    client_port: u16,
    engine: &Engine,
    tls: Option<Arc<tollgate_raft::tls::ClusterTls>>,
) -> std::io::Result<ClusterNode> {
    let mut rc = tollgate_raft::Config::new(
        c.node_id,
        c.cluster_addr.clone(),
        c.peers.clone(),
        c.data_dir.clone(),
        c.secret.clone().into_bytes(),
    );
    rc.bind_addr = Some(c.cluster_bind.clone());
    // A durable single node binds its cluster port only once it grows (or has grown).
    rc.listen_at_start = !c.standalone;
    rc.advertise = cluster::advertised_client_addr(&c.cluster_addr, client_port);
    rc.client_timeout = c.timeout;
    rc.election_timeout_min_ms = c.election_timeout_ms;
    rc.election_timeout_max_ms = 2 * c.election_timeout_ms;
    rc.heartbeat_interval_ms = c.heartbeat_interval_ms;
    rc.tls = tls;
    rc.fsync = match c.fsync {
        AppendFsync::Always => tollgate_raft::FsyncPolicy::Always,
        AppendFsync::EverySec => tollgate_raft::FsyncPolicy::EverySec,
    };
    ClusterNode::start(rc, engine.replicated_state())
        .await
        .map_err(|e| std::io::Error::other(e.to_string()))
}

/// Task polls between two looks at the sockets while tasks are ready (tokio's
/// `event_interval`; its default is 61). A worker also looks whenever it runs out of ready
/// tasks, which with unpipelined clients is every few requests, so the periodic look mostly
/// found nothing: with 61, one `epoll_wait` in 50 requests returned no event (0.020 per
/// request, GET from 50 unpipelined clients; 0.005 with 256, 0.002 with 1024; counted by
/// `perf record -e syscalls:sys_exit_epoll_wait`, see bench/cpu_per_request.sh). A
/// connection task polls briefly (one read's requests, then it waits again) and one that
/// uses up its cooperative budget yields, which makes the worker look at once, so 256 polls
/// delay others' input by little; `-P 32` counts the same instructions per request
/// (bench/instructions.sh).
const EVENT_INTERVAL: u32 = 256;

/// The runtime a server runs on: `threads` network worker threads (`--threads`; 0 = one
/// per CPU core).
pub fn runtime(threads: usize) -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if threads > 0 {
        builder.worker_threads(threads);
    }
    // An idle thread hands its free memory back to the OS when asked (`crate::alloc`; one
    // relaxed load per park, nothing measurable per request).
    builder.on_thread_park(crate::alloc::collect_when_idle);
    builder.event_interval(EVENT_INTERVAL);
    // Tasks run in the order they were woken. With tokio's LIFO slot the task woken last in
    // one look at the sockets ran first, so of two requests that reached the server in
    // order on two connections the second could run first: an LPUSH sent after another
    // client's EXEC aborted that EXEC (issue 19; `bench/arrival_order.sh`). Needs
    // `--cfg tokio_unstable` (.cargo/config.toml); a build without it (RUSTFLAGS set in the
    // environment replace the file's, as cargo-fuzz's do) says so when it starts.
    #[cfg(tokio_unstable)]
    builder.disable_lifo_slot();
    #[cfg(not(tokio_unstable))]
    tracing::warn!(
        "built without --cfg tokio_unstable (RUSTFLAGS set in the environment replace \
         .cargo/config.toml's): requests that reach the server in order on different \
         connections may run out of that order"
    );
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

#[cfg(test)]
mod tests {
    #[test]
    fn warns_when_the_advertised_cluster_address_is_not_bound() {
        assert!(super::bind_mismatch("127.0.0.1", "127.0.0.1:17001").is_none());
        assert!(super::bind_mismatch("0.0.0.0", "10.0.0.1:17001").is_none());
        let w = super::bind_mismatch("127.0.0.1", "10.0.0.1:17001").unwrap();
        assert!(w.contains("--bind 10.0.0.1"), "{w}");
    }
}
