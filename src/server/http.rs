//! The HTTP listener for operations (`--http-port`, off by default; `--http-bind`,
//! 127.0.0.1 by default): `GET /metrics` (the Prometheus text of `crate::metrics` plus the
//! server's gauges and, in a cluster, the Raft node's), `GET /healthz` (200 while the
//! process serves) and `GET /readyz` (200 or 503 with a one-line JSON reason), for
//! Prometheus and Kubernetes probes. HTTP/1.1 through `hyper`; nothing but the bind
//! address protects it, and it serves only what these three paths read.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tollgate_raft::{ClusterStatus, Role};

use super::Shared;
use crate::metrics::export::{self, Family, Value};

/// How far the applied index may trail the commit index on a ready cluster node.
pub const READY_APPLY_LAG: u64 = 1000;

/// Bind the HTTP listener (before the server starts, so a bad address fails the start).
pub async fn bind(bind: &str, port: u16) -> std::io::Result<TcpListener> {
    TcpListener::bind((bind, port)).await
}

/// Serve HTTP on `listener` until the server shuts down.
pub async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    let mut shutdown = shared.shutdown.subscribe();
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!(error = %e, "http accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                    continue;
                }
            },
            _ = shutdown.changed() => return,
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let shared = shared.clone();
                async move { Ok::<_, Infallible>(route(&shared, req).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

fn reply(status: StatusCode, content_type: &str, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    if let Ok(v) = content_type.parse() {
        r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    r
}

async fn route(shared: &Shared, req: Request<Incoming>) -> Response<Full<Bytes>> {
    const JSON: &str = "application/json";
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return reply(
            StatusCode::METHOD_NOT_ALLOWED,
            JSON,
            "{\"error\":\"only GET\"}\n".into(),
        );
    }
    match req.uri().path() {
        "/metrics" => reply(
            StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            scrape(shared).await,
        ),
        "/healthz" => reply(StatusCode::OK, JSON, "{\"status\":\"ok\"}\n".into()),
        "/readyz" => {
            let (ready, reason) = readiness(shared);
            let status = if ready {
                StatusCode::OK
            } else {
                StatusCode::SERVICE_UNAVAILABLE
            };
            reply(
                status,
                JSON,
                format!(
                    "{{\"ready\":{ready},\"reason\":\"{}\"}}\n",
                    reason.replace('\\', "\\\\").replace('"', "\\\"")
                ),
            )
        }
        _ => reply(
            StatusCode::NOT_FOUND,
            JSON,
            "{\"error\":\"not found: try /metrics, /healthz or /readyz\"}\n".into(),
        ),
    }
}

/// Whether this node should get traffic, and why (see the module docs and the README).
pub fn readiness(shared: &Shared) -> (bool, String) {
    if *shared.shutdown.borrow() {
        return (false, "shutting down".into());
    }
    match shared.engine.cluster() {
        None => (true, "accepting commands".into()),
        Some(node) => {
            let status = node.status();
            // A durable node (single or in a cluster) that restarted re-applies the log it
            // found before it serves what it held (INFO's `loading:1` meanwhile).
            if shared.loading.load(std::sync::atomic::Ordering::Acquire) {
                return (false, loading_reason(&status));
            }
            cluster_readiness(&status)
        }
    }
}

fn loading_reason(s: &ClusterStatus) -> String {
    format!(
        "loading: re-applying the log found at start (applied index {}, commit index {})",
        s.applied_index, s.commit_index
    )
}

fn cluster_readiness(s: &ClusterStatus) -> (bool, String) {
    if s.repair.is_some() {
        return (false, "repairing its storage from the leader".into());
    }
    let Some(leader) = s.leader_id else {
        return (
            false,
            format!("no known leader (role {})", role_name(s.role)),
        );
    };
    // A follower cut off from the leader keeps its last known leader (pre-votes keep it
    // from campaigning, see `tollgate_raft::prevote`): past the longest election timeout
    // without a word from it, the leader is lost.
    if let Some(ms) = s.leader_heard_ms.filter(|ms| *ms > s.election_timeout_ms.1) {
        return (
            false,
            format!(
                "no word from leader {leader} for {ms} ms (role {})",
                role_name(s.role)
            ),
        );
    }
    if s.role == Role::Leader {
        let voters: Vec<u64> = s.members.iter().filter(|m| m.voter).map(|m| m.id).collect();
        let reachable = 1 + s
            .replication
            .iter()
            .filter(|f| f.responding && voters.contains(&f.id) && f.id != s.node_id)
            .count();
        let quorum = voters.len() / 2 + 1;
        if reachable < quorum {
            return (
                false,
                format!(
                    "leader without a quorum: {reachable} of {} voters reachable, {quorum} needed",
                    voters.len()
                ),
            );
        }
    }
    if s.commit_index > s.applied_index + READY_APPLY_LAG {
        return (
            false,
            format!(
                "applied index {} trails the commit index {} by more than {READY_APPLY_LAG}",
                s.applied_index, s.commit_index
            ),
        );
    }
    (
        true,
        format!(
            "leader {leader} known, term {}, role {}",
            s.term,
            role_name(s.role)
        ),
    )
}

fn role_name(r: Role) -> &'static str {
    match r {
        Role::Leader => "leader",
        Role::Follower => "follower",
        Role::Candidate => "candidate",
        Role::Learner => "learner",
        Role::Shutdown => "shutdown",
    }
}

/// The `/metrics` text.
pub async fn scrape(shared: &Shared) -> String {
    let mut families = vec![
        Family::single(
            "tollgate_uptime_seconds",
            "Seconds since the server started",
            Value::Gauge(shared.started.elapsed().as_secs_f64()),
        ),
        {
            let mut f = Family::new(
                "tollgate_build_info",
                "Version and mode of this server (always 1)",
            );
            f.push(
                vec![
                    ("version", env!("CARGO_PKG_VERSION").to_string()),
                    ("redis_version", super::info::REDIS_VERSION.to_string()),
                    ("mode", shared.engine.mode_name().to_string()),
                ],
                Value::Gauge(1.0),
            );
            f
        },
    ];
    families.extend(server_families(shared).await);
    families.extend(export::families(shared.engine.metrics()));
    if let Some(node) = shared.engine.cluster() {
        families.extend(raft_families(node));
    }
    export::encode(families)
}

async fn server_families(shared: &Shared) -> Vec<Family> {
    let s = &shared.stats;
    let counter = |a: &std::sync::atomic::AtomicU64| Value::Counter(a.load(Ordering::Relaxed));
    let mut keys = Family::new(
        "tollgate_keys",
        "Keys, by database (non-empty databases only)",
    );
    let mut expiring = Family::new(
        "tollgate_keys_with_expiry",
        "Keys with a time to live, by database (non-empty databases only)",
    );
    {
        let state = shared.engine.lock().await;
        for (i, db) in state.ks.dbs.iter().enumerate() {
            if !db.is_empty() {
                keys.push(vec![("db", i.to_string())], Value::Gauge(db.len() as f64));
                expiring.push(
                    vec![("db", i.to_string())],
                    Value::Gauge(db.expires_count() as f64),
                );
            }
        }
    }
    let memory = shared.engine.memory();
    let reads = memory.clock().reads();
    vec![
        Family::single(
            "tollgate_connected_clients",
            "Client connections open",
            Value::Gauge(shared.clients.lock().len() as f64),
        ),
        Family::single(
            "tollgate_maxclients",
            "The maxclients setting",
            Value::Gauge(shared.config.read().maxclients as f64),
        ),
        Family::single(
            "tollgate_connections_received",
            "Client connections accepted",
            counter(&s.total_connections),
        ),
        Family::single(
            "tollgate_rejected_connections",
            "Client connections refused (maxclients)",
            counter(&s.rejected_connections),
        ),
        keys,
        expiring,
        Family::single(
            "tollgate_expired_keys",
            "Keys deleted because their time to live passed",
            counter(&shared.engine.pubsub().expired),
        ),
        Family::single(
            "tollgate_evicted_keys",
            "Keys evicted to stay within maxmemory",
            Value::Counter(memory.evicted()),
        ),
        Family::single(
            "tollgate_keyspace_hits",
            "Read lookups that found their key (INFO keyspace_hits)",
            Value::Counter(reads.0),
        ),
        Family::single(
            "tollgate_keyspace_misses",
            "Read lookups that found no key (INFO keyspace_misses)",
            Value::Counter(reads.1),
        ),
        Family::single(
            "tollgate_memory_used_bytes",
            "Heap bytes allocated (INFO used_memory)",
            Value::Gauge(crate::alloc::allocated() as f64),
        ),
        Family::single(
            "tollgate_memory_rss_bytes",
            "Resident set size of the process",
            Value::Gauge(crate::alloc::resident_bytes() as f64),
        ),
        Family::single(
            "tollgate_memory_max_bytes",
            "The maxmemory setting (0: no limit)",
            Value::Gauge(memory.limit() as f64),
        ),
    ]
}

fn raft_families(node: &crate::engine::ClusterNode) -> Vec<Family> {
    let s = node.status();
    let st = node.stats();
    let gauge = |v: u64| Value::Gauge(v as f64);
    let counter = |a: &std::sync::atomic::AtomicU64| Value::Counter(a.load(Ordering::Relaxed));
    let mut role = Family::new(
        "tollgate_raft_role",
        "This node's Raft role: 1 for the current one, 0 for the others",
    );
    for r in [
        Role::Leader,
        Role::Follower,
        Role::Candidate,
        Role::Learner,
        Role::Shutdown,
    ] {
        role.push(
            vec![("role", role_name(r).to_string())],
            gauge(u64::from(s.role == r)),
        );
    }
    let mut lag = Family::new(
        "tollgate_raft_follower_lag_entries",
        "On the leader: entries each follower is behind the leader's last log index",
    );
    let mut up = Family::new(
        "tollgate_raft_follower_up",
        "On the leader: 1 if the follower answers",
    );
    for f in &s.replication {
        if f.id == s.node_id {
            continue;
        }
        lag.push(vec![("follower", f.id.to_string())], gauge(f.lag));
        up.push(
            vec![("follower", f.id.to_string())],
            gauge(u64::from(f.responding)),
        );
    }
    let mut forwarded = Family::new(
        "tollgate_raft_forwarded",
        "Requests this node forwarded to the leader, by kind",
    );
    forwarded.push(
        vec![("kind", "write".into())],
        counter(&st.forwarded_writes),
    );
    forwarded.push(vec![("kind", "read".into())], counter(&st.forwarded_reads));
    vec![
        Family::single("tollgate_raft_node_id", "This node's id", gauge(s.node_id)),
        role,
        Family::single("tollgate_raft_term", "Current term", gauge(s.term)),
        Family::single(
            "tollgate_raft_leader_id",
            "The leader's node id as this node sees it (0: none known)",
            gauge(s.leader_id.unwrap_or(0)),
        ),
        Family::single(
            "tollgate_raft_commit_index",
            "Committed log index",
            gauge(s.commit_index),
        ),
        Family::single(
            "tollgate_raft_applied_index",
            "Last applied log index",
            gauge(s.applied_index),
        ),
        Family::single(
            "tollgate_raft_last_log_index",
            "Last index in this node's log",
            gauge(s.last_log_index),
        ),
        lag,
        up,
        Family::single(
            "tollgate_raft_entries_applied",
            "Log entries applied",
            counter(&st.entries_applied),
        ),
        Family::single(
            "tollgate_raft_commands_applied",
            "Client batches carried by the applied log entries",
            counter(&st.commands_applied),
        ),
        Family::single(
            "tollgate_raft_fsync_duration_seconds",
            "Duration of each fsync of the Raft log",
            Value::histogram(&st.fsync),
        ),
        Family::single(
            "tollgate_raft_elections",
            "Elections this node started",
            counter(&st.elections),
        ),
        Family::single(
            "tollgate_raft_leader_changes",
            "Times this node saw the leader change",
            counter(&st.leader_changes),
        ),
        Family::single(
            "tollgate_raft_snapshots",
            "Snapshots this node built",
            counter(&st.snapshots),
        ),
        forwarded,
    ]
}

/// Where the HTTP listener is, for the log line at start.
pub fn describe(addr: SocketAddr) -> String {
    format!("http://{addr}/metrics, /healthz, /readyz")
}
