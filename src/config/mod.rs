//! Configuration: defaults, overridden by a TOML file, overridden by environment
//! variables (`TOLLGATE_*`), overridden by command-line flags. With `--node-id` the server
//! runs as a Raft cluster node ([`ClusterConfig`]); without it, standalone.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use serde::Deserialize;

/// Command-line flags; every one can also come from the environment or the TOML file.
#[derive(Parser, Debug, Default, Clone)]
#[command(
    name = "tollgate",
    version,
    about = "A Redis-protocol rate-limiter server"
)]
pub struct Cli {
    /// TOML configuration file.
    #[arg(long, env = "TOLLGATE_CONFIG")]
    pub config: Option<PathBuf>,
    /// Address to listen on.
    #[arg(long, env = "TOLLGATE_BIND")]
    pub bind: Option<String>,
    /// Client port.
    #[arg(long, env = "TOLLGATE_PORT")]
    pub port: Option<u16>,
    /// Password clients must send with AUTH.
    #[arg(long, env = "TOLLGATE_REQUIREPASS")]
    pub requirepass: Option<String>,
    /// Maximum simultaneous client connections.
    #[arg(long, env = "TOLLGATE_MAXCLIENTS")]
    pub maxclients: Option<usize>,
    /// Largest bulk string a client may send, in bytes.
    #[arg(long, env = "TOLLGATE_PROTO_MAX_BULK_LEN")]
    pub proto_max_bulk_len: Option<usize>,
    /// Largest unparsed input buffered per client, in bytes.
    #[arg(long, env = "TOLLGATE_CLIENT_QUERY_BUFFER_LIMIT")]
    pub client_query_buffer_limit: Option<usize>,
    /// Milliseconds a script may run before other clients get -BUSY.
    #[arg(long, env = "TOLLGATE_BUSY_REPLY_THRESHOLD")]
    pub busy_reply_threshold: Option<u64>,
    /// Enable the DEBUG command (tests use DEBUG ADVANCE-TIME): yes or no.
    #[arg(long, env = "TOLLGATE_ENABLE_DEBUG_COMMAND")]
    pub enable_debug_command: Option<String>,
    /// Log filter, e.g. `info` or `tollgate=debug`.
    #[arg(long, env = "TOLLGATE_LOG")]
    pub log: Option<String>,
    /// Network worker threads (0 = one per CPU core).
    #[arg(long, env = "TOLLGATE_THREADS")]
    pub threads: Option<usize>,
    /// Cluster mode: this node's id (a positive integer, unique and stable).
    #[arg(long, env = "TOLLGATE_NODE_ID")]
    pub node_id: Option<u64>,
    /// Cluster mode: initial voters as `id@host:clusterport,...` (the same on every node);
    /// leave out on a node that will be added later with RAFT.ADDNODE.
    #[arg(long, env = "TOLLGATE_PEERS")]
    pub peers: Option<String>,
    /// Cluster mode: port of the Raft link (default: client port + 10000).
    #[arg(long, env = "TOLLGATE_CLUSTER_PORT")]
    pub cluster_port: Option<u16>,
    /// Cluster mode: shared secret authenticating the nodes (at least 16 bytes).
    #[arg(long, env = "TOLLGATE_CLUSTER_SECRET")]
    pub cluster_secret: Option<String>,
    /// Cluster mode: directory for the Raft log and snapshots (default ./data/node-<id>).
    #[arg(long, env = "TOLLGATE_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Cluster mode: `always` (fsync before acknowledging) or `everysec`.
    #[arg(long, env = "TOLLGATE_APPENDFSYNC")]
    pub appendfsync: Option<String>,
    /// Cluster mode: how long a client waits for a quorum before -CLUSTERDOWN, in ms.
    #[arg(long, env = "TOLLGATE_CLUSTER_TIMEOUT_MS")]
    pub cluster_timeout_ms: Option<u64>,
    /// Cluster mode: a follower that hears no leader for a random time between this and
    /// twice this (ms) starts an election. Default 150.
    #[arg(long, env = "TOLLGATE_ELECTION_TIMEOUT_MS")]
    pub election_timeout_ms: Option<u64>,
    /// Cluster mode: how often the leader sends heartbeats (ms). Default 50.
    #[arg(long, env = "TOLLGATE_HEARTBEAT_INTERVAL_MS")]
    pub heartbeat_interval_ms: Option<u64>,
}

/// The TOML file's shape: the same settings, with Redis-style dashed names allowed.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct FileConfig {
    bind: Option<String>,
    port: Option<u16>,
    requirepass: Option<String>,
    maxclients: Option<usize>,
    proto_max_bulk_len: Option<usize>,
    client_query_buffer_limit: Option<usize>,
    busy_reply_threshold: Option<u64>,
    enable_debug_command: Option<String>,
    log: Option<String>,
    threads: Option<usize>,
    node_id: Option<u64>,
    peers: Option<String>,
    cluster_port: Option<u16>,
    cluster_secret: Option<String>,
    data_dir: Option<PathBuf>,
    appendfsync: Option<String>,
    cluster_timeout_ms: Option<u64>,
    election_timeout_ms: Option<u64>,
    heartbeat_interval_ms: Option<u64>,
}

/// How appended Raft log entries reach the disk (`appendfsync`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendFsync {
    /// fsync every group of entries before acknowledging it.
    Always,
    /// fsync at most once a second (a power loss may drop up to a second of writes).
    EverySec,
}

/// The cluster-mode settings, present when `--node-id` is given.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// This node's id.
    pub node_id: u64,
    /// Initial voters, `id -> cluster address`; empty on a node that waits to be added.
    pub peers: BTreeMap<u64, String>,
    /// The address other nodes reach this node's Raft link at.
    pub cluster_addr: String,
    /// The address the Raft link listens on.
    pub cluster_bind: String,
    /// Shared secret (at least 16 bytes).
    pub secret: String,
    /// Raft storage directory.
    pub data_dir: PathBuf,
    /// Log durability policy.
    pub fsync: AppendFsync,
    /// Longest a client request waits for a quorum before -CLUSTERDOWN.
    pub timeout: Duration,
    /// Lower bound of the randomized election timeout (the upper bound is twice it), ms.
    pub election_timeout_ms: u64,
    /// Leader heartbeat interval, ms.
    pub heartbeat_interval_ms: u64,
}

/// Parse `id@host:port,...` into `id -> host:port`.
pub fn parse_peers(s: &str) -> Result<BTreeMap<u64, String>, String> {
    let mut peers = BTreeMap::new();
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (id, addr) = item
            .split_once('@')
            .ok_or_else(|| format!("bad peer '{item}': expected id@host:port"))?;
        let id: u64 = id
            .parse()
            .map_err(|_| format!("bad peer id in '{item}': expected a positive integer"))?;
        let port_ok = addr
            .rsplit_once(':')
            .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
        if id == 0 || !port_ok {
            return Err(format!(
                "bad peer '{item}': expected id@host:port with id > 0"
            ));
        }
        if peers.insert(id, addr.to_string()).is_some() {
            return Err(format!("peer id {id} is listed twice"));
        }
    }
    Ok(peers)
}

fn cluster_config(
    cli: &Cli,
    file: &FileConfig,
    bind: &str,
    port: u16,
) -> Result<Option<ClusterConfig>, String> {
    let Some(node_id) = cli.node_id.or(file.node_id) else {
        return Ok(None);
    };
    if node_id == 0 {
        return Err("--node-id must be a positive integer".into());
    }
    let peers = match cli.peers.as_deref().or(file.peers.as_deref()) {
        Some(p) => parse_peers(p)?,
        None => BTreeMap::new(),
    };
    if !peers.is_empty() && !peers.contains_key(&node_id) {
        return Err(format!(
            "--peers must list this node's own id {node_id} (leave --peers out on a node that RAFT.ADDNODE will add)"
        ));
    }
    let secret = cli
        .cluster_secret
        .clone()
        .or(file.cluster_secret.clone())
        .ok_or("cluster mode (--node-id) needs --cluster-secret (the same on every node, at least 16 bytes)")?;
    if secret.len() < 16 {
        return Err(format!(
            "--cluster-secret must be at least 16 bytes (got {})",
            secret.len()
        ));
    }
    let own_port = peers
        .get(&node_id)
        .and_then(|a| a.rsplit_once(':'))
        .and_then(|(_, p)| p.parse::<u16>().ok());
    let cluster_port = match cli.cluster_port.or(file.cluster_port).or(own_port) {
        Some(p) => p,
        None => port
            .checked_add(10_000)
            .ok_or("--cluster-port is required when the client port is above 55535")?,
    };
    let cluster_bind = format!("{bind}:{cluster_port}");
    let cluster_addr = peers
        .get(&node_id)
        .cloned()
        .unwrap_or_else(|| cluster_bind.clone());
    let fsync = match cli
        .appendfsync
        .as_deref()
        .or(file.appendfsync.as_deref())
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        None | Some("always") => AppendFsync::Always,
        Some("everysec") => AppendFsync::EverySec,
        Some(other) => {
            return Err(format!(
                "--appendfsync must be always or everysec, got '{other}'"
            ))
        }
    };
    let timeout_ms = cli
        .cluster_timeout_ms
        .or(file.cluster_timeout_ms)
        .unwrap_or(2000);
    if timeout_ms == 0 {
        return Err("--cluster-timeout-ms must be positive".into());
    }
    let heartbeat_interval_ms = cli
        .heartbeat_interval_ms
        .or(file.heartbeat_interval_ms)
        .unwrap_or(tollgate_raft::DEFAULT_HEARTBEAT_INTERVAL_MS);
    let election_timeout_ms = cli
        .election_timeout_ms
        .or(file.election_timeout_ms)
        .unwrap_or(tollgate_raft::DEFAULT_ELECTION_TIMEOUT_MS);
    if !(1..=MAX_HEARTBEAT_MS).contains(&heartbeat_interval_ms) {
        return Err(format!(
            "--heartbeat-interval-ms must be 1 to {MAX_HEARTBEAT_MS}, got {heartbeat_interval_ms}"
        ));
    }
    if election_timeout_ms > MAX_ELECTION_MS {
        return Err(format!(
            "--election-timeout-ms must be at most {MAX_ELECTION_MS}, got {election_timeout_ms}"
        ));
    }
    if election_timeout_ms < 3 * heartbeat_interval_ms {
        return Err(format!(
            "--election-timeout-ms ({election_timeout_ms}) must be at least 3 times --heartbeat-interval-ms ({heartbeat_interval_ms}), or followers would call elections between heartbeats"
        ));
    }
    Ok(Some(ClusterConfig {
        node_id,
        peers,
        cluster_addr,
        cluster_bind,
        secret,
        data_dir: cli
            .data_dir
            .clone()
            .or(file.data_dir.clone())
            .unwrap_or_else(|| PathBuf::from(format!("./data/node-{node_id}"))),
        fsync,
        timeout: Duration::from_millis(timeout_ms),
        election_timeout_ms,
        heartbeat_interval_ms,
    }))
}

/// Largest accepted election timeout (ms).
const MAX_ELECTION_MS: u64 = 60_000;
/// Largest accepted heartbeat interval (ms).
const MAX_HEARTBEAT_MS: u64 = 10_000;

/// Default network worker threads. Commands run one at a time under one lock of the
/// keyspace, as in Redis; more threads overlap only parsing, encoding and socket calls, and
/// cost lock hand-offs between threads (measured in bench/: see the README).
pub const DEFAULT_THREADS: usize = 1;
/// Most network worker threads accepted.
pub const MAX_THREADS: usize = 256;

/// The resolved configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Listen address.
    pub bind: String,
    /// Client port (0 = pick a free port).
    pub port: u16,
    /// Password, if any.
    pub requirepass: Option<String>,
    /// Connection cap.
    pub maxclients: usize,
    /// proto-max-bulk-len.
    pub proto_max_bulk_len: usize,
    /// client-query-buffer-limit.
    pub client_query_buffer_limit: usize,
    /// busy-reply-threshold in ms.
    pub busy_reply_threshold: u64,
    /// Whether DEBUG is allowed.
    pub enable_debug_command: bool,
    /// Log filter.
    pub log: String,
    /// Network worker threads (0 = one per CPU core).
    pub threads: usize,
    /// Cluster mode settings (None = standalone).
    pub cluster: Option<ClusterConfig>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            bind: "127.0.0.1".into(),
            port: 6379,
            requirepass: None,
            maxclients: 10_000,
            proto_max_bulk_len: 512 * 1024 * 1024,
            client_query_buffer_limit: 1024 * 1024 * 1024,
            busy_reply_threshold: 5000,
            enable_debug_command: false,
            log: "info".into(),
            threads: DEFAULT_THREADS,
            cluster: None,
        }
    }
}

/// Parse `yes`/`no` like Redis's config.
pub fn parse_yes_no(s: &str) -> Result<bool, String> {
    match s.to_ascii_lowercase().as_str() {
        "yes" | "true" | "1" => Ok(true),
        "no" | "false" | "0" => Ok(false),
        _ => Err(format!("expected yes or no, got '{s}'")),
    }
}

impl Config {
    /// Resolve flags (which clap already merged with the environment) over the file over defaults.
    pub fn load(cli: Cli) -> Result<Config, String> {
        let file: FileConfig = match &cli.config {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
                toml::from_str(&text).map_err(|e| format!("bad config {}: {e}", path.display()))?
            }
            None => FileConfig::default(),
        };
        let d = Config::default();
        let bind = cli.bind.clone().or(file.bind.clone()).unwrap_or(d.bind);
        let port = cli.port.or(file.port).unwrap_or(d.port);
        let cluster = cluster_config(&cli, &file, &bind, port)?;
        let debug = cli.enable_debug_command.or(file.enable_debug_command);
        Ok(Config {
            bind,
            port,
            requirepass: cli
                .requirepass
                .or(file.requirepass)
                .filter(|p| !p.is_empty()),
            maxclients: cli.maxclients.or(file.maxclients).unwrap_or(d.maxclients),
            proto_max_bulk_len: cli
                .proto_max_bulk_len
                .or(file.proto_max_bulk_len)
                .unwrap_or(d.proto_max_bulk_len),
            client_query_buffer_limit: cli
                .client_query_buffer_limit
                .or(file.client_query_buffer_limit)
                .unwrap_or(d.client_query_buffer_limit),
            busy_reply_threshold: cli
                .busy_reply_threshold
                .or(file.busy_reply_threshold)
                .unwrap_or(d.busy_reply_threshold),
            enable_debug_command: match debug {
                Some(s) => parse_yes_no(&s)?,
                None => d.enable_debug_command,
            },
            log: cli.log.or(file.log).unwrap_or(d.log),
            threads: match cli.threads.or(file.threads).unwrap_or(d.threads) {
                n if n <= MAX_THREADS => n,
                n => return Err(format!("threads must be 0 to {MAX_THREADS}, got {n}")),
            },
            cluster,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_override_file_which_overrides_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.toml");
        std::fs::write(
            &path,
            "port = 7000\nmaxclients = 5\nenable-debug-command = \"yes\"\n",
        )
        .unwrap();
        let cli = Cli {
            config: Some(path),
            port: Some(7001),
            ..Cli::default()
        };
        let c = Config::load(cli).unwrap();
        assert_eq!(c.port, 7001);
        assert_eq!(c.maxclients, 5);
        assert!(c.enable_debug_command);
        assert_eq!(c.bind, "127.0.0.1");
        assert_eq!(c.threads, DEFAULT_THREADS);
        let threads = |n| {
            Config::load(Cli {
                threads: Some(n),
                ..Cli::default()
            })
        };
        assert_eq!(threads(4).unwrap().threads, 4);
        assert_eq!(threads(0).unwrap().threads, 0);
        assert!(threads(100_000)
            .unwrap_err()
            .contains("threads must be 0 to 256"));
    }

    #[test]
    fn cluster_settings_resolve_and_validate() {
        let cli = Cli {
            port: Some(7001),
            node_id: Some(2),
            peers: Some("1@127.0.0.1:17001,2@127.0.0.1:17002,3@127.0.0.1:17003".into()),
            cluster_secret: Some("0123456789abcdef".into()),
            appendfsync: Some("everysec".into()),
            ..Cli::default()
        };
        let c = Config::load(cli.clone()).unwrap().cluster.unwrap();
        assert_eq!(c.cluster_addr, "127.0.0.1:17002");
        assert_eq!(c.cluster_bind, "127.0.0.1:17002");
        assert_eq!(c.peers.len(), 3);
        assert_eq!(c.fsync, AppendFsync::EverySec);
        assert_eq!(c.data_dir, PathBuf::from("./data/node-2"));
        assert_eq!(
            (c.election_timeout_ms, c.heartbeat_interval_ms),
            (
                tollgate_raft::DEFAULT_ELECTION_TIMEOUT_MS,
                tollgate_raft::DEFAULT_HEARTBEAT_INTERVAL_MS
            )
        );
        let timed = |e: Option<u64>, h: Option<u64>| {
            Config::load(Cli {
                election_timeout_ms: e,
                heartbeat_interval_ms: h,
                ..cli.clone()
            })
        };
        let t = timed(Some(1000), Some(200)).unwrap().cluster.unwrap();
        assert_eq!(
            (t.election_timeout_ms, t.heartbeat_interval_ms),
            (1000, 200)
        );
        assert!(timed(Some(100), Some(50))
            .unwrap_err()
            .contains("at least 3 times"));
        assert!(timed(Some(120), None)
            .unwrap_err()
            .contains("at least 3 times"));
        assert!(timed(None, Some(0))
            .unwrap_err()
            .contains("--heartbeat-interval-ms must be 1 to"));
        assert!(timed(Some(600_000), None)
            .unwrap_err()
            .contains("--election-timeout-ms must be at most"));
        let short = Cli {
            cluster_secret: Some("short".into()),
            ..cli.clone()
        };
        assert!(Config::load(short).unwrap_err().contains("16 bytes"));
        let missing = Cli {
            cluster_secret: None,
            ..cli.clone()
        };
        assert!(Config::load(missing)
            .unwrap_err()
            .contains("--cluster-secret"));
        let not_listed = Cli {
            node_id: Some(9),
            ..cli.clone()
        };
        assert!(Config::load(not_listed).unwrap_err().contains("own id"));
        let joining = Cli {
            node_id: Some(4),
            peers: None,
            ..cli
        };
        let j = Config::load(joining).unwrap().cluster.unwrap();
        assert!(j.peers.is_empty());
        assert_eq!(j.cluster_addr, "127.0.0.1:17001");
        assert!(parse_peers("1@host").is_err());
        assert!(parse_peers("x@h:1").is_err());
        assert!(parse_peers("1@h:1,1@h:2").is_err());
        assert!(Config::load(Cli::default()).unwrap().cluster.is_none());
    }

    #[test]
    fn example_cluster_configs_load() {
        for i in 1..=3u64 {
            let path =
                PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("deploy/node{i}.toml"));
            let c = Config::load(Cli {
                config: Some(path),
                ..Cli::default()
            })
            .unwrap();
            let cluster = c.cluster.unwrap();
            assert_eq!(cluster.node_id, i);
            assert_eq!(cluster.peers.len(), 3);
            assert_eq!(cluster.cluster_bind, format!("127.0.0.1:{}", 17000 + i));
            assert_eq!(c.port, 7000 + i as u16);
            assert_eq!(cluster.fsync, AppendFsync::Always);
        }
    }

    #[test]
    fn unknown_file_settings_are_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.toml");
        std::fs::write(&path, "prot = 7000\n").unwrap();
        let cli = Cli {
            config: Some(path),
            ..Cli::default()
        };
        assert!(Config::load(cli).unwrap_err().contains("prot"));
    }
}
