//! Node configuration: identity, peers, storage, timing and batching knobs. Owns the
//! translation into openraft's own `Config`, so the rest of the crate never guesses defaults.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::error::ClusterError;
use crate::types::NodeId;

/// When appended log records reach the disk.
///
/// `Always` fsyncs every group of appended entries before Raft counts them as stored: a power
/// loss or kernel crash never loses an acknowledged write. `EverySec` acknowledges entries once
/// they are in the OS page cache and fsyncs at most once a second: a killed *process* still loses
/// nothing (the kernel keeps the pages), but a power loss or kernel crash can drop up to a second
/// of entries this node already acknowledged, and if a majority loses them at once, writes that
/// clients saw succeed can vanish. The vote is always fsynced, whatever the policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FsyncPolicy {
    /// fsync each group of appended entries before acknowledging it (Raft's safety assumption).
    #[default]
    Always,
    /// fsync at most once a second; faster, but see the type docs for what a power loss costs.
    EverySec,
}

/// Everything one Raft node needs to start.
#[derive(Debug, Clone)]
pub struct Config {
    /// This node's id; stable across restarts and unique in the cluster.
    pub node_id: NodeId,
    /// Address peers use to reach this node's cluster port (`host:port`).
    pub cluster_addr: String,
    /// Address to bind the cluster listener to; `None` binds `cluster_addr`.
    pub bind_addr: Option<String>,
    /// Bind the cluster listener at start. A single node that may grow later sets this to
    /// false: it binds when [`RaftNode::listen`](crate::RaftNode::listen) is called (before a
    /// node is added), or at start when its membership already has other members.
    pub listen_at_start: bool,
    /// What this node tells its peers about itself when they connect (opaque here: the
    /// server advertises its client address, so every node can name the leader's);
    /// [`RaftNode::advertised`](crate::RaftNode::advertised) reads it back. Empty: nothing.
    pub advertise: String,
    /// Initial voters, `id -> cluster addr`, the same on every node (this node included).
    /// Empty means "join later as a learner added by an existing cluster".
    pub peers: BTreeMap<NodeId, String>,
    /// Directory for the vote, the log and snapshots.
    pub data_dir: PathBuf,
    /// Shared cluster secret that authenticates peers (HMAC-SHA256 challenge-response).
    pub secret: Vec<u8>,
    /// When appended entries reach the disk.
    pub fsync: FsyncPolicy,
    /// Lower bound of the randomized election timeout, in milliseconds.
    pub election_timeout_min_ms: u64,
    /// Upper bound of the randomized election timeout, in milliseconds.
    pub election_timeout_max_ms: u64,
    /// Leader heartbeat interval, in milliseconds (also the read-index confirmation timeout).
    pub heartbeat_interval_ms: u64,
    /// Longest any client-facing call (propose, read barrier, admin) waits before failing.
    pub client_timeout: Duration,
    /// Build a snapshot every this many applied entries.
    pub snapshot_every: u64,
    /// Entries kept in the log behind the latest snapshot (to catch up slow followers without
    /// shipping a snapshot).
    pub keep_logs_after_snapshot: u64,
    /// Most commands grouped into one Raft entry.
    pub max_batch_commands: usize,
    /// Most batches proposed and not yet applied at once; later commands wait and group.
    /// The default is 1: openraft 0.9 sends each follower one AppendEntries at a time, so a
    /// second entry cut while the first is in flight only waits behind it, and the commands
    /// arriving meanwhile then miss the next entry too (measured: 2 in flight commits an entry
    /// in about two round trips instead of one, and serves fewer clients per second).
    pub max_inflight_batches: usize,
    /// Largest frame accepted or sent on the cluster link, in bytes. One proposal may carry at
    /// most a quarter of this.
    pub max_frame_bytes: usize,
    /// Rewrite the log file once purged records exceed both the live records and this many bytes.
    pub log_compact_min_bytes: u64,
    /// Mutual TLS on the cluster link (`None`: plaintext TCP). The secret's handshake still
    /// runs inside the TLS session (see `transport.rs`).
    pub tls: Option<std::sync::Arc<crate::tls::ClusterTls>>,
}

/// Default lower bound of the election timeout (ms; the upper bound is twice it): tolerates a
/// few lost heartbeats on a LAN.
pub const DEFAULT_ELECTION_TIMEOUT_MS: u64 = 150;
/// Default leader heartbeat interval (ms).
pub const DEFAULT_HEARTBEAT_INTERVAL_MS: u64 = 50;

impl Config {
    /// A configuration with the defaults below for everything but identity, peers and storage.
    pub fn new(
        node_id: NodeId,
        cluster_addr: impl Into<String>,
        peers: BTreeMap<NodeId, String>,
        data_dir: impl Into<PathBuf>,
        secret: impl Into<Vec<u8>>,
    ) -> Self {
        Config {
            node_id,
            cluster_addr: cluster_addr.into(),
            bind_addr: None,
            listen_at_start: true,
            peers,
            data_dir: data_dir.into(),
            secret: secret.into(),
            fsync: FsyncPolicy::Always,
            election_timeout_min_ms: DEFAULT_ELECTION_TIMEOUT_MS,
            election_timeout_max_ms: 2 * DEFAULT_ELECTION_TIMEOUT_MS,
            heartbeat_interval_ms: DEFAULT_HEARTBEAT_INTERVAL_MS,
            client_timeout: Duration::from_secs(2),
            snapshot_every: 10_000,
            keep_logs_after_snapshot: 1_000,
            max_batch_commands: 4_096,
            max_inflight_batches: 1,
            advertise: String::new(),
            max_frame_bytes: 64 * 1024 * 1024,
            log_compact_min_bytes: 16 * 1024 * 1024,
            tls: None,
        }
    }

    /// Checks the knobs that would otherwise fail later in less obvious ways.
    pub(crate) fn validate(&self) -> Result<(), ClusterError> {
        let bad = |msg: &str| Err(ClusterError::Config(msg.to_string()));
        if self.secret.len() < 16 {
            return bad("cluster secret must be at least 16 bytes");
        }
        if !self.peers.is_empty() && !self.peers.contains_key(&self.node_id) {
            return bad("peers must include this node's own id");
        }
        if self.max_batch_commands == 0 || self.max_inflight_batches == 0 {
            return bad("max_batch_commands and max_inflight_batches must be positive");
        }
        if self.snapshot_every == 0 {
            return bad("snapshot_every must be positive");
        }
        if self.max_frame_bytes < 64 * 1024 {
            return bad("max_frame_bytes must be at least 64 KiB");
        }
        if self.client_timeout.is_zero() {
            return bad("client_timeout must be positive");
        }
        Ok(())
    }

    /// Largest encoded commands of one entry: a quarter of a frame, so an entry (with its
    /// envelope) always fits in one AppendEntries frame.
    pub(crate) fn max_entry_bytes(&self) -> usize {
        self.max_frame_bytes / 4
    }

    /// The openraft configuration derived from this one.
    pub(crate) fn openraft_config(&self) -> Result<openraft::Config, ClusterError> {
        let chunk = (self.max_frame_bytes / 4).clamp(16 * 1024, 4 * 1024 * 1024) as u64;
        let config = openraft::Config {
            cluster_name: "tollgate".to_string(),
            election_timeout_min: self.election_timeout_min_ms,
            election_timeout_max: self.election_timeout_max_ms,
            heartbeat_interval: self.heartbeat_interval_ms,
            install_snapshot_timeout: self.client_timeout.as_millis().max(1000) as u64,
            snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(self.snapshot_every),
            max_in_snapshot_log_to_keep: self.keep_logs_after_snapshot,
            // A follower further behind than this is sent a snapshot instead of entries.
            replication_lag_threshold: self
                .snapshot_every
                .saturating_add(self.keep_logs_after_snapshot),
            snapshot_max_chunk_size: chunk,
            ..Default::default()
        };
        config
            .validate()
            .map_err(|e| ClusterError::Config(e.to_string()))
    }
}
