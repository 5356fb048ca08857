//! Configuration: defaults, overridden by a TOML file, overridden by environment
//! variables (`TOLLGATE_*`), overridden by command-line flags. With `--node-id` the server
//! runs as a Raft cluster node ([`ClusterConfig`]); without it, standalone.
//!
//! Redis's parameters (`port`, `maxmemory`, `hash-max-listpack-entries`, ...) are one
//! registry ([`params`]): each is a flag `--<name>`, an environment variable
//! `TOLLGATE_<NAME>` (upper case, `-` as `_`) and a TOML key `<name>`, checked by the same
//! rules as CONFIG SET. Tollgate's own settings (`--config`, `--log`, `--threads` and the
//! cluster settings) are the typed flags of [`Cli`].

pub mod params;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use clap::{CommandFactory, FromArgMatches, Parser};
use serde::Deserialize;

use crate::store::eviction::MemorySettings;

/// Command-line flags; every one can also come from the environment or the TOML file.
/// The flags of Redis's parameters are added from [`params::PARAMS`] by [`Cli::from_args`].
#[derive(Parser, Debug, Default, Clone)]
#[command(
    name = "tollgate",
    version,
    about = "A Redis-protocol rate-limiter server"
)]
pub struct Cli {
    /// TOML configuration file [default: none].
    #[arg(long, env = "TOLLGATE_CONFIG")]
    pub config: Option<PathBuf>,
    /// Log filter, e.g. `info` or `tollgate=debug` [default: info, which shows the Raft
    /// library's (openraft) messages from warn up; `openraft=info` asks for more].
    #[arg(long, env = "TOLLGATE_LOG")]
    pub log: Option<String>,
    /// Log format: `text` (coloured only when standard output is a terminal) or `json` (one object
    /// per line) [default: text].
    #[arg(long, env = "TOLLGATE_LOG_FORMAT")]
    pub log_format: Option<String>,
    /// Port of the HTTP listener serving /metrics, /healthz and /readyz; 0 turns it off
    /// [default: 0, off].
    #[arg(long, env = "TOLLGATE_HTTP_PORT")]
    pub http_port: Option<u16>,
    /// Address the HTTP listener binds; it has no authentication, so keep it on a
    /// private network [default: 127.0.0.1].
    #[arg(long, env = "TOLLGATE_HTTP_BIND")]
    pub http_bind: Option<String>,
    /// How many distinct key prefixes (the part before the first `:`) get a `prefix`
    /// label of their own in the limiter metrics; later ones count as `other`; 0 drops
    /// the label [default: 16, at most 128].
    #[arg(long, env = "TOLLGATE_METRICS_KEY_PREFIXES")]
    pub metrics_key_prefixes: Option<usize>,
    /// Network worker threads (0 = one per CPU core) [default: 1].
    #[arg(long, env = "TOLLGATE_THREADS")]
    pub threads: Option<usize>,
    /// Cluster mode: this node's id (a positive integer, unique and stable) [default: none,
    /// standalone].
    #[arg(long, env = "TOLLGATE_NODE_ID")]
    pub node_id: Option<u64>,
    /// Cluster mode: initial voters as `id@host:clusterport,...` (the same on every node);
    /// leave out on a node that will be added later with RAFT.ADDNODE [default: none].
    #[arg(long, env = "TOLLGATE_PEERS")]
    pub peers: Option<String>,
    /// Cluster mode: port of the Raft link (default: client port + 10000).
    #[arg(long, env = "TOLLGATE_CLUSTER_PORT")]
    pub cluster_port: Option<u16>,
    /// Cluster mode: shared secret authenticating the nodes (at least 16 bytes) [default:
    /// none; required with --peers].
    #[arg(long, env = "TOLLGATE_CLUSTER_SECRET")]
    pub cluster_secret: Option<String>,
    /// Cluster mode: directory for the Raft log and snapshots (default ./data/node-<id>).
    #[arg(long, env = "TOLLGATE_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Cluster mode: how long a client waits for a quorum before -CLUSTERDOWN, in ms
    /// [default: 2000].
    #[arg(long, env = "TOLLGATE_CLUSTER_TIMEOUT_MS")]
    pub cluster_timeout_ms: Option<u64>,
    /// Cluster mode: a follower that hears no leader for a random time between this and
    /// twice this (ms) starts an election. Default 150.
    #[arg(long, env = "TOLLGATE_ELECTION_TIMEOUT_MS")]
    pub election_timeout_ms: Option<u64>,
    /// Cluster mode: how often the leader sends heartbeats (ms). Default 50.
    #[arg(long, env = "TOLLGATE_HEARTBEAT_INTERVAL_MS")]
    pub heartbeat_interval_ms: Option<u64>,
    /// Redis parameters from the environment and then the flags, in that order (the last
    /// one for a name wins).
    #[arg(skip)]
    pub settings: Vec<(String, String)>,
}

impl Cli {
    /// Parse the process's arguments and environment.
    pub fn from_args() -> Cli {
        Cli::parse_args(std::env::args_os(), |name| std::env::var(name).ok())
    }

    /// Parse `args` (the program name first) with `env` as the environment: Tollgate's
    /// flags, and `--<name> <value>` for each registry parameter (by its name or alias).
    pub fn parse_args<I, T>(args: I, env: impl Fn(&str) -> Option<String>) -> Cli
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        // A flag given twice takes its last value (scripts append overrides).
        let mut command = Cli::command().args_override_self(true);
        for p in params::PARAMS {
            let mut arg = clap::Arg::new(p.name)
                .long(p.name)
                .value_name("VALUE")
                .allow_hyphen_values(true)
                .hide(!p.has_effect())
                .help(format!(
                    "Redis's `{}` (default {:?}; see the README's parameter table)",
                    p.name, p.default
                ));
            if let Some(alias) = p.alias {
                arg = arg.alias(alias);
            }
            command = command.arg(arg);
        }
        let matches = command.get_matches_from(args);
        let mut cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
        for p in params::PARAMS {
            for name in std::iter::once(p.name).chain(p.alias) {
                if let Some(value) = env(&env_var(name)) {
                    cli.settings.push((name.to_string(), value));
                }
            }
        }
        for p in params::PARAMS {
            if let Some(value) = matches.get_one::<String>(p.name) {
                cli.settings.push((p.name.to_string(), value.clone()));
            }
        }
        cli
    }
}

/// The environment variable of parameter `name`: `TOLLGATE_` and the name in upper case
/// with `_` for `-`.
pub fn env_var(name: &str) -> String {
    format!("TOLLGATE_{}", name.to_ascii_uppercase().replace('-', "_"))
}

/// The TOML file's own (non-registry) settings; every other key must name a parameter.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct FileConfig {
    log: Option<String>,
    log_format: Option<String>,
    http_port: Option<u16>,
    http_bind: Option<String>,
    metrics_key_prefixes: Option<usize>,
    threads: Option<usize>,
    node_id: Option<u64>,
    peers: Option<String>,
    cluster_port: Option<u16>,
    cluster_secret: Option<String>,
    data_dir: Option<PathBuf>,
    cluster_timeout_ms: Option<u64>,
    election_timeout_ms: Option<u64>,
    heartbeat_interval_ms: Option<u64>,
}

/// The keys of [`FileConfig`].
const OWN_KEYS: [&str; 14] = [
    "log",
    "log-format",
    "http-port",
    "http-bind",
    "metrics-key-prefixes",
    "threads",
    "node-id",
    "peers",
    "cluster-port",
    "cluster-secret",
    "data-dir",
    "cluster-timeout-ms",
    "election-timeout-ms",
    "heartbeat-interval-ms",
];

/// Read a TOML file: Tollgate's own settings, and the parameters as `(name, value)` text.
fn read_file(path: &std::path::Path) -> Result<(FileConfig, Vec<(String, String)>), String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let bad = |e: &dyn std::fmt::Display| format!("bad config {}: {e}", path.display());
    let table: toml::Table = toml::from_str(&text).map_err(|e| bad(&e))?;
    let mut own = toml::Table::new();
    let mut settings = Vec::new();
    for (key, value) in table {
        if OWN_KEYS.contains(&key.as_str()) {
            own.insert(key, value);
            continue;
        }
        if params::lookup(&key).is_none() {
            return Err(bad(&format!("unknown setting '{key}'")));
        }
        let text = match value {
            toml::Value::String(s) => s,
            toml::Value::Integer(n) => n.to_string(),
            toml::Value::Boolean(b) => if b { "yes" } else { "no" }.to_string(),
            other => {
                return Err(bad(&format!(
                    "'{key}' must be a string, an integer or a boolean, not {}",
                    other.type_str()
                )))
            }
        };
        settings.push((key, text));
    }
    let own: FileConfig = own.try_into().map_err(|e| bad(&e))?;
    Ok((own, settings))
}

/// How log lines are written (`--log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines, coloured only on a terminal.
    Text,
    /// One JSON object per line.
    Json,
}

/// How appended Raft log entries reach the disk (`appendfsync`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendFsync {
    /// fsync every group of entries before acknowledging it.
    Always,
    /// fsync at most once a second (a power loss may drop up to a second of writes).
    EverySec,
}

/// The Raft settings: of a cluster node (`--node-id`), or of a durable single node
/// (`--data-dir` or `appendonly yes` without `--node-id`; see `standalone`).
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
    /// Shared secret (at least 16 bytes); empty on a durable single node started without one.
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
    /// A durable single node (started without `--node-id`): the only voter of its own group,
    /// which binds its cluster port only once it grows (RAFT.ADDNODE) and reads or creates
    /// its secret in `data_dir` when `secret` is empty.
    pub standalone: bool,
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
    appendonly: bool,
) -> Result<Option<ClusterConfig>, String> {
    let peers_text = cli.peers.as_deref().or(file.peers.as_deref());
    let data_dir = cli.data_dir.clone().or(file.data_dir.clone());
    let Some(node_id) = cli.node_id.or(file.node_id) else {
        if peers_text.is_some() {
            return Err("--peers needs --node-id (this node's id among them)".into());
        }
        if data_dir.is_none() && !appendonly {
            // In memory: no data directory, nothing written to disk.
            return Ok(None);
        }
        return durable_standalone(cli, file, bind, port, data_dir).map(Some);
    };
    if node_id == 0 {
        return Err("--node-id must be a positive integer".into());
    }
    let peers = match peers_text {
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
    check_secret(&secret)?;
    let own_port = peers
        .get(&node_id)
        .and_then(|a| a.rsplit_once(':'))
        .and_then(|(_, p)| p.parse::<u16>().ok());
    let cluster_port = match cli.cluster_port.or(file.cluster_port).or(own_port) {
        Some(p) => p,
        None => default_cluster_port(port)?,
    };
    let cluster_bind = format!("{bind}:{cluster_port}");
    let cluster_addr = peers
        .get(&node_id)
        .cloned()
        .unwrap_or_else(|| cluster_bind.clone());
    let data_dir = data_dir.unwrap_or_else(|| default_data_dir(node_id));
    let mut c = timing(cli, file)?;
    c.node_id = node_id;
    c.peers = peers;
    c.cluster_addr = cluster_addr;
    c.cluster_bind = cluster_bind;
    c.secret = secret;
    c.data_dir = data_dir;
    Ok(Some(c))
}

/// The durable single node (`--data-dir` or `appendonly yes`, no `--node-id`): node 1, the
/// only voter of its own Raft group, its cluster address `<bind>:<cluster port>` recorded
/// for when it grows. Its cluster secret, when not given, is read from (or created in) its
/// data directory at start.
fn durable_standalone(
    cli: &Cli,
    file: &FileConfig,
    bind: &str,
    port: u16,
    data_dir: Option<PathBuf>,
) -> Result<ClusterConfig, String> {
    let node_id = STANDALONE_NODE_ID;
    let secret = cli
        .cluster_secret
        .clone()
        .or(file.cluster_secret.clone())
        .unwrap_or_default();
    if !secret.is_empty() {
        check_secret(&secret)?;
    }
    let cluster_port = match cli.cluster_port.or(file.cluster_port) {
        Some(p) => p,
        None if port == 0 => {
            return Err("a durable node (--data-dir or appendonly yes) needs a fixed --port, or a --cluster-port, to record the cluster address it grows with".into())
        }
        None => default_cluster_port(port)?,
    };
    let cluster_bind = format!("{bind}:{cluster_port}");
    let mut c = timing(cli, file)?;
    c.node_id = node_id;
    c.peers = BTreeMap::from([(node_id, cluster_bind.clone())]);
    c.cluster_addr = cluster_bind.clone();
    c.cluster_bind = cluster_bind;
    c.secret = secret;
    c.data_dir = data_dir.unwrap_or_else(|| default_data_dir(node_id));
    c.standalone = true;
    Ok(c)
}

/// The default log filter: Tollgate's messages from `info` up, the Raft library's from `warn`
/// (its `info` lines narrate every election and snapshot).
pub const DEFAULT_LOG: &str = "info,openraft=warn";

/// Redis's default `save` points (used by a durable node unless `save` is set).
pub const DEFAULT_SAVE: &str = "3600 1 300 100 60 10000";

/// The node id of a durable single node.
pub const STANDALONE_NODE_ID: u64 = 1;

fn default_data_dir(node_id: u64) -> PathBuf {
    PathBuf::from(format!("./data/node-{node_id}"))
}

fn default_cluster_port(port: u16) -> Result<u16, String> {
    port.checked_add(10_000)
        .ok_or_else(|| "--cluster-port is required when the client port is above 55535".into())
}

fn check_secret(secret: &str) -> Result<(), String> {
    if secret.len() < 16 {
        return Err(format!(
            "--cluster-secret must be at least 16 bytes (got {})",
            secret.len()
        ));
    }
    Ok(())
}

/// A [`ClusterConfig`] with the timing settings resolved and checked, the rest empty.
fn timing(cli: &Cli, file: &FileConfig) -> Result<ClusterConfig, String> {
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
    Ok(ClusterConfig {
        node_id: 0,
        peers: BTreeMap::new(),
        cluster_addr: String::new(),
        cluster_bind: String::new(),
        secret: String::new(),
        data_dir: PathBuf::new(),
        // `appendfsync` is a parameter; it is applied after this, over the default.
        fsync: AppendFsync::Always,
        timeout: Duration::from_millis(timeout_ms),
        election_timeout_ms,
        heartbeat_interval_ms,
        standalone: false,
    })
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

/// TLS settings (Redis's `tls-*` parameters); file names are empty when not set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsConfig {
    /// `tls-port`: the TLS client port (0 = no TLS port).
    pub port: u16,
    /// `tls-cert-file`: this server's certificate chain (PEM).
    pub cert_file: String,
    /// `tls-key-file`: its private key (PEM).
    pub key_file: String,
    /// `tls-key-file-pass`: the passphrase of an encrypted `tls-key-file` ("" = none).
    pub key_file_pass: String,
    /// `tls-ca-cert-file`: the CA that client (and cluster peer) certificates must chain to.
    pub ca_cert_file: String,
    /// `tls-auth-clients`: whether clients must present a certificate.
    pub auth_clients: tollgate_raft::tls::ClientAuth,
    /// `tls-protocols` as given ("" = TLSv1.2 and TLSv1.3).
    pub protocols: String,
    /// `tls-cluster`: mutual TLS on the cluster link.
    pub cluster: bool,
    /// `tls-client-cert-file`: the certificate this node presents when it connects to another
    /// node (empty: `tls-cert-file`).
    pub client_cert_file: String,
    /// `tls-client-key-file`: its key.
    pub client_key_file: String,
    /// `tls-client-key-file-pass`: the passphrase of an encrypted `tls-client-key-file`.
    pub client_key_file_pass: String,
    /// `tls-ciphers`: TLS 1.2 suites, `:`-separated ("" = all rustls implements).
    pub ciphers: String,
    /// `tls-ciphersuites`: TLS 1.3 suites, `:`-separated ("" = all).
    pub ciphersuites: String,
    /// `tls-prefer-server-ciphers`: choose the suite by the server's order.
    pub prefer_server_ciphers: bool,
    /// `tls-session-caching`: keep sessions clients may resume.
    pub session_caching: bool,
    /// `tls-session-cache-size`: how many (at least 1).
    pub session_cache_size: usize,
    /// `tls-session-cache-timeout`: for how many seconds.
    pub session_cache_timeout: u64,
}

impl Default for TlsConfig {
    fn default() -> Self {
        TlsConfig {
            port: 0,
            cert_file: String::new(),
            key_file: String::new(),
            key_file_pass: String::new(),
            ca_cert_file: String::new(),
            auth_clients: tollgate_raft::tls::ClientAuth::Required,
            protocols: String::new(),
            cluster: false,
            client_cert_file: String::new(),
            client_key_file: String::new(),
            client_key_file_pass: String::new(),
            ciphers: String::new(),
            ciphersuites: String::new(),
            prefer_server_ciphers: false,
            session_caching: true,
            session_cache_size: 20480,
            session_cache_timeout: 300,
        }
    }
}

/// The resolved configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Listen address.
    pub bind: String,
    /// Client port (0 = pick a free port).
    pub port: u16,
    /// Password, if any.
    pub requirepass: Option<String>,
    /// `aclfile`: where ACL SAVE writes the users and where they are read from at start
    /// and by ACL LOAD.
    pub aclfile: Option<std::path::PathBuf>,
    /// `protected-mode`: refuse non-loopback clients while the default user has no password.
    pub protected_mode: bool,
    /// `disable-thp`: transparent huge pages off for this process (`server::thp`).
    pub disable_thp: bool,
    /// `acl-pubsub-default allchannels` (true) or `resetchannels` (false, Redis 7.0's
    /// default): the channels of a new ACL user and of the `reset` rule.
    pub acl_pubsub_all: bool,
    /// `acllog-max-len`: entries ACL LOG keeps.
    pub acllog_max_len: usize,
    /// TLS on the client port and the cluster link.
    pub tls: TlsConfig,
    /// Connection cap.
    pub maxclients: usize,
    /// proto-max-bulk-len.
    pub proto_max_bulk_len: usize,
    /// client-query-buffer-limit.
    pub client_query_buffer_limit: usize,
    /// busy-reply-threshold in ms.
    pub busy_reply_threshold: u64,
    /// hll-sparse-max-bytes.
    pub hll_sparse_max_bytes: u64,
    /// min-replicas-to-write (standalone only: a Raft node refuses a nonzero value).
    pub min_replicas_to_write: u32,
    /// min-replicas-max-lag in seconds (0: min-replicas-to-write is off, as in Redis).
    pub min_replicas_max_lag: u32,
    /// Whether DEBUG is allowed.
    pub enable_debug_command: bool,
    /// `maxmemory`, its policy and the LFU settings.
    pub memory: MemorySettings,
    /// `save`: Redis's snapshot points, `seconds changes ...` (canonical text; "" = none). A
    /// durable node takes a snapshot when one is reached (`server::save_points`).
    pub save: String,
    /// `rdb-key-save-delay`: microseconds a snapshot's write waits per key (0 = none), to keep
    /// a save in progress in tests, as in Redis.
    pub rdb_key_save_delay: u64,
    /// Values of the parameters that have no effect on Tollgate, by name (see
    /// [`params::Effect::NoEffect`]); a parameter not here has its default.
    pub stored: BTreeMap<&'static str, String>,
    /// `slowlog-log-slower-than`, in microseconds (-1: log nothing).
    pub slowlog_log_slower_than: i64,
    /// `slowlog-max-len`.
    pub slowlog_max_len: usize,
    /// `latency-tracking`: whether INFO latencystats lists the commands called.
    pub latency_tracking: bool,
    /// `latency-tracking-info-percentiles`: the percentiles INFO latencystats shows.
    pub latency_tracking_info_percentiles: Vec<f64>,
    /// The compact encodings' thresholds (`hash-max-listpack-entries`, ...).
    pub encodings: crate::store::encoding::EncodingLimits,
    /// `latency-monitor-threshold`, in milliseconds (0: the latency monitor is off).
    pub latency_monitor_threshold: u64,
    /// Log filter.
    pub log: String,
    /// Log format.
    pub log_format: LogFormat,
    /// HTTP listener port (0 = off).
    pub http_port: u16,
    /// HTTP listener address.
    pub http_bind: String,
    /// Key prefixes labelled in the limiter metrics.
    pub metrics_key_prefixes: usize,
    /// Network worker threads (0 = one per CPU core).
    pub threads: usize,
    /// Cluster mode settings (None = standalone).
    pub cluster: Option<ClusterConfig>,
    /// The TOML file the configuration was read from, if any.
    pub file: Option<PathBuf>,
    /// `notify-keyspace-events` as `pubsub::notify` bits.
    pub notify_keyspace_events: u32,
    /// `client-output-buffer-limit` of the normal, replica and pubsub classes (only pubsub
    /// is enforced; see `params::set_output_buffer_limits`).
    pub output_buffer_limits: [crate::pubsub::OutputLimit; 3],
}

impl Default for Config {
    fn default() -> Self {
        Config {
            bind: "127.0.0.1".into(),
            port: 6379,
            requirepass: None,
            aclfile: None,
            protected_mode: true,
            disable_thp: true,
            acl_pubsub_all: false,
            acllog_max_len: 128,
            tls: TlsConfig::default(),
            maxclients: 10_000,
            proto_max_bulk_len: 512 * 1024 * 1024,
            client_query_buffer_limit: 1024 * 1024 * 1024,
            busy_reply_threshold: 5000,
            hll_sparse_max_bytes: 3000,
            min_replicas_to_write: 0,
            min_replicas_max_lag: 10,
            enable_debug_command: false,
            memory: MemorySettings::default(),
            save: String::new(),
            rdb_key_save_delay: 0,
            stored: BTreeMap::new(),
            slowlog_log_slower_than: 10_000,
            slowlog_max_len: 128,
            latency_tracking: true,
            latency_tracking_info_percentiles: vec![50.0, 99.0, 99.9],
            encodings: crate::store::encoding::EncodingLimits {
                hash: Default::default(),
                zset: crate::store::zset::ZsetLimits::REDIS,
                set_intset_entries: crate::store::set::DEFAULT_INTSET_ENTRIES,
            },
            latency_monitor_threshold: 0,
            log: DEFAULT_LOG.into(),
            log_format: LogFormat::Text,
            http_port: 0,
            http_bind: "127.0.0.1".into(),
            metrics_key_prefixes: 16,
            threads: DEFAULT_THREADS,
            cluster: None,
            file: None,
            notify_keyspace_events: 0,
            output_buffer_limits: [
                crate::pubsub::OutputLimit {
                    hard: 0,
                    soft: 0,
                    soft_secs: 0,
                },
                crate::pubsub::OutputLimit {
                    hard: 268_435_456,
                    soft: 67_108_864,
                    soft_secs: 60,
                },
                crate::pubsub::OutputLimit::default(),
            ],
        }
    }
}

impl Config {
    /// Resolve the flags and environment (`cli`) over the file over the defaults.
    pub fn load(cli: Cli) -> Result<Config, String> {
        let (file, file_settings) = match &cli.config {
            Some(path) => read_file(path)?,
            None => (FileConfig::default(), Vec::new()),
        };
        let file_source = cli
            .config
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        let flag_source = "the command line or environment";
        let mut c = Config {
            file: cli.config.clone(),
            ..Config::default()
        };
        // `bind` and `port` decide the cluster addresses, so they go first; the cluster
        // settings then decide what `appendonly` and `appendfsync` may be.
        let early = |settings: &[(String, String)]| -> Vec<(String, String)> {
            settings
                .iter()
                .filter(|(n, _)| {
                    params::lookup(n).is_some_and(|(p, _)| matches!(p.name, "bind" | "port"))
                })
                .cloned()
                .collect()
        };
        c.set_params(&file_source, &early(&file_settings))?;
        c.set_params(flag_source, &early(&cli.settings))?;
        let appendonly = appendonly_setting(&file_settings, &cli.settings)?;
        c.cluster = cluster_config(&cli, &file, &c.bind, c.port, appendonly)?;
        if c.cluster.is_some() {
            // A durable node snapshots at Redis's default save points unless told otherwise.
            c.save = DEFAULT_SAVE.to_string();
        }
        // `appendonly` decided the mode above; its values are not set one by one (a file's
        // `yes` overridden by a flag's `no` would be refused on the way).
        let rest = |settings: &[(String, String)]| -> Vec<(String, String)> {
            settings
                .iter()
                .filter(|(n, _)| !n.eq_ignore_ascii_case("appendonly"))
                .cloned()
                .collect()
        };
        c.set_params(&file_source, &rest(&file_settings))?;
        c.set_params(flag_source, &rest(&cli.settings))?;
        c.log = cli.log.or(file.log).unwrap_or(c.log);
        c.log_format = match cli.log_format.or(file.log_format).as_deref() {
            None | Some("text") => LogFormat::Text,
            Some("json") => LogFormat::Json,
            Some(other) => return Err(format!("--log-format must be text or json, got '{other}'")),
        };
        c.http_port = cli.http_port.or(file.http_port).unwrap_or(c.http_port);
        c.http_bind = cli.http_bind.or(file.http_bind).unwrap_or(c.http_bind);
        c.metrics_key_prefixes = match cli
            .metrics_key_prefixes
            .or(file.metrics_key_prefixes)
            .unwrap_or(c.metrics_key_prefixes)
        {
            n if n <= crate::metrics::MAX_PREFIXES => n,
            n => {
                return Err(format!(
                    "--metrics-key-prefixes must be 0 to {}, got {n}",
                    crate::metrics::MAX_PREFIXES
                ))
            }
        };
        c.threads = match cli.threads.or(file.threads).unwrap_or(c.threads) {
            n if n <= MAX_THREADS => n,
            n => return Err(format!("threads must be 0 to {MAX_THREADS}, got {n}")),
        };
        Ok(c)
    }
}

/// Whether `appendonly yes` is set (the file's value, then the flags' and environment's,
/// the last one winning), checked as CONFIG SET checks it.
fn appendonly_setting(
    file: &[(String, String)],
    flags: &[(String, String)],
) -> Result<bool, String> {
    let mut on = false;
    for (name, value) in file.iter().chain(flags) {
        if name.eq_ignore_ascii_case("appendonly") {
            let p = params::lookup(name).map(|(p, _)| p);
            let checked = p.map(|p| params::check(p.kind, value)).transpose();
            on = checked
                .map_err(|e| format!("appendonly: {e}"))?
                .is_some_and(|v| v == "yes");
        }
    }
    Ok(on)
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
            settings: settings(&[("port", "7001")]),
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

    fn settings(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn registry_parameters_come_from_flags_environment_and_file() {
        let env = |name: &str| match name {
            "TOLLGATE_MAXMEMORY" => Some("1mb".to_string()),
            "TOLLGATE_HZ" => Some("20".to_string()),
            _ => None,
        };
        let cli = Cli::parse_args(
            [
                "tollgate",
                "--maxmemory",
                "64mb",
                "--maxmemory-policy",
                "allkeys-lru",
                "--lua-time-limit",
                "100",
                "--threads",
                "2",
            ],
            env,
        );
        let c = Config::load(cli).unwrap();
        assert_eq!(
            c.memory.maxmemory,
            64 << 20,
            "the flag wins over the environment"
        );
        assert_eq!(c.memory.policy, crate::store::eviction::Policy::AllKeysLru);
        assert_eq!(c.busy_reply_threshold, 100);
        assert_eq!(c.threads, 2);
        let hz = params::lookup("hz").unwrap().0;
        assert_eq!(c.param_value(hz), "20");
        let bad = |pairs: &[(&str, &str)]| {
            Config::load(Cli {
                settings: settings(pairs),
                ..Cli::default()
            })
            .unwrap_err()
        };
        assert!(bad(&[("maxmemory", "lots")]).contains("argument must be a memory value"));
        assert!(bad(&[("no-such-thing", "1")]).contains("unknown setting 'no-such-thing'"));
        assert!(bad(&[("appendonly", "yes"), ("port", "0")]).contains("needs a fixed --port"));
        assert!(bad(&[("appendonly", "maybe")]).contains("argument must be 'yes' or 'no'"));
        assert!(bad(&[("appendfsync", "always")]).contains("no file to fsync"));
        assert!(bad(&[("databases", "32")]).contains("16 databases"));
        // Start-only parameters can be set at start.
        let c = Config::load(Cli {
            settings: settings(&[("port", "0"), ("enable-debug-command", "YES")]),
            ..Cli::default()
        })
        .unwrap();
        assert!(c.enable_debug_command);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.toml");
        std::fs::write(
            &path,
            "maxmemory = \"100mb\"\nactiverehashing = false\nmaxmemory-samples = 10\n",
        )
        .unwrap();
        let c = Config::load(Cli {
            config: Some(path.clone()),
            ..Cli::default()
        })
        .unwrap();
        assert_eq!((c.memory.maxmemory, c.memory.samples), (100 << 20, 10));
        assert_eq!(
            c.param_value(params::lookup("activerehashing").unwrap().0),
            "no"
        );
        std::fs::write(&path, "maxmemory = 1.5\n").unwrap();
        let e = Config::load(Cli {
            config: Some(path),
            ..Cli::default()
        })
        .unwrap_err();
        assert!(
            e.contains("must be a string, an integer or a boolean"),
            "{e}"
        );
    }

    #[test]
    fn cluster_settings_resolve_and_validate() {
        let cli = Cli {
            node_id: Some(2),
            peers: Some("1@127.0.0.1:17001,2@127.0.0.1:17002,3@127.0.0.1:17003".into()),
            cluster_secret: Some("0123456789abcdef".into()),
            settings: settings(&[("port", "7001"), ("appendfsync", "everysec")]),
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
    fn a_cluster_node_keeps_the_encoding_thresholds_at_their_defaults() {
        let node = |pairs: &[(&str, &str)]| {
            Config::load(Cli {
                node_id: Some(1),
                peers: Some("1@127.0.0.1:17001,2@127.0.0.1:17002".into()),
                cluster_secret: Some("0123456789abcdef".into()),
                settings: settings(pairs),
                ..Cli::default()
            })
        };
        for (name, value) in [
            ("set-max-intset-entries", "2"),
            ("hash-max-listpack-entries", "1000"),
            ("hash-max-ziplist-value", "1"),
            ("zset-max-ziplist-entries", "0"),
            ("zset-max-listpack-value", "1"),
            ("hll-sparse-max-bytes", "100"),
        ] {
            let e = node(&[(name, value)]).unwrap_err();
            assert!(
                e.contains("a cluster node keeps the encoding thresholds at their defaults"),
                "{e}"
            );
            assert!(e.contains(name), "{e}");
            // A standalone server takes it.
            let solo = Config::load(Cli {
                settings: settings(&[(name, value)]),
                ..Cli::default()
            });
            assert!(solo.is_ok(), "{name}");
        }
        let c = node(&[
            ("set-max-intset-entries", "512"),
            ("zset-max-listpack-value", "64"),
        ])
        .unwrap();
        assert_eq!(c.encodings, Config::default().encodings);
        let c = node(&[
            ("zset-max-listpack-entries", "128"),
            ("hash-max-listpack-value", "64b"),
        ])
        .unwrap();
        assert_eq!(c.encodings, Config::default().encodings);
    }

    #[test]
    fn a_data_directory_or_appendonly_makes_a_durable_single_node() {
        let load = |cli: Cli| Config::load(cli).map(|c| c.cluster);
        assert!(
            load(Cli::default()).unwrap().is_none(),
            "in memory by default"
        );
        let d = load(Cli {
            data_dir: Some("/var/lib/tg".into()),
            settings: settings(&[("port", "7000")]),
            ..Cli::default()
        })
        .unwrap()
        .unwrap();
        assert!(d.standalone);
        assert_eq!(d.node_id, STANDALONE_NODE_ID);
        assert_eq!(d.cluster_addr, "127.0.0.1:17000");
        assert_eq!(
            d.peers,
            BTreeMap::from([(1, "127.0.0.1:17000".to_string())])
        );
        assert_eq!(d.data_dir, PathBuf::from("/var/lib/tg"));
        assert!(d.secret.is_empty(), "read from the data directory at start");
        let a = Config::load(Cli {
            settings: settings(&[("appendonly", "yes"), ("appendfsync", "everysec")]),
            ..Cli::default()
        })
        .unwrap();
        assert_eq!(a.save, DEFAULT_SAVE);
        let a = a.cluster.unwrap();
        assert_eq!(a.data_dir, PathBuf::from("./data/node-1"));
        assert_eq!(a.fsync, AppendFsync::EverySec);
        let no = load(Cli {
            settings: settings(&[("appendonly", "yes"), ("appendonly", "no")]),
            ..Cli::default()
        });
        assert!(no.unwrap().is_none(), "the last value wins");
        let e = load(Cli {
            peers: Some("1@h:1".into()),
            ..Cli::default()
        })
        .unwrap_err();
        assert!(e.contains("--peers needs --node-id"), "{e}");
        let e = load(Cli {
            data_dir: Some("d".into()),
            cluster_secret: Some("short".into()),
            ..Cli::default()
        })
        .unwrap_err();
        assert!(e.contains("16 bytes"), "{e}");
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
    fn systemd_example_config_loads() {
        // deploy/systemd/tollgate.toml with the secret from the environment, as the unit runs it.
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("deploy/systemd/tollgate.toml");
        let c = Config::load(Cli {
            config: Some(path),
            cluster_secret: Some("0123456789abcdef0123".into()),
            ..Cli::default()
        })
        .unwrap();
        assert_eq!((c.bind.as_str(), c.port), ("0.0.0.0", 6379));
        assert_eq!(c.memory.maxmemory, 1 << 30);
        let cluster = c.cluster.unwrap();
        assert_eq!(cluster.node_id, 1);
        assert_eq!(cluster.peers.len(), 3);
        assert_eq!(cluster.cluster_addr, "node1.example.net:16379");
        assert_eq!(cluster.cluster_bind, "0.0.0.0:16379");
        // The unit's StateDirectory=tollgate.
        assert_eq!(cluster.data_dir, PathBuf::from("/var/lib/tollgate"));
        assert_eq!(cluster.fsync, AppendFsync::Always);
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
