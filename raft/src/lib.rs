//! Raft replication for Tollgate, on openraft 0.9 (`storage-v2`), generic over a deterministic
//! [`StateMachine`]. The crate knows nothing about Redis: commands and outputs are whatever the
//! state machine says, serialized with postcard.
//!
//! How a write travels: [`RaftNode::propose`] on any node → (a follower forwards it to the
//! leader over the cluster link, in one frame with the other proposals queued there) → the
//! leader's write batcher groups every command that arrived while the previous entry was in
//! flight into one [`Batch`] entry stamped with [`LeaderClock`] time → openraft appends it (one
//! fsync for the group) and replicates it → once committed every node applies it with that time
//! → outputs return to each proposer. The leader's own proposals also keep their typed commands
//! beside the bytes in memory, so its apply runs them without decoding and hands the typed
//! outputs back without encoding (`local.rs`; the log's bytes are what every other node, and
//! this one after a restart, applies). Reads call [`RaftNode::read_barrier`] (batched read index;
//! a follower's waiting reads share one request to the leader) and then read the state machine
//! directly.
//!
//! | file | owns |
//! | --- | --- |
//! | `config.rs` | [`Config`], [`FsyncPolicy`], mapping to openraft's config |
//! | `types.rs` | openraft type config, [`Batch`], [`ClusterStatus`], [`Leadership`], [`Role`] |
//! | `error.rs` | [`ClusterError`] (what callers branch on; `is_cluster_down`) |
//! | `clock.rs` | [`LeaderClock`]: leader time that never goes backwards |
//! | `record.rs` | CRC-framed records and atomic file replacement |
//! | `log_store.rs` | vote + append-only log, group-commit writer thread (its fsync policy changeable while it runs), torn-tail repair, purge, rewrite |
//! | `state_machine.rs` | the [`StateMachine`] trait, openraft adapter, snapshot files and their statistics |
//! | `transport.rs` | authenticated TCP (or mutual TLS) frames, peer connections, backoff, fault injection |
//! | `tls.rs` | rustls configurations from PEM files, [`tls::ClusterTls`] (reloadable mutual TLS) |
//! | `network.rs` | openraft's `RaftNetwork` over the transport |
//! | `proposer.rs` | leader-side write batcher and read-index batcher |
//! | `local.rs` | the typed commands and outputs of the leader's own proposals, handed to its state machine beside their bytes |
//! | `forwarder.rs` | follower-side batching of forwarded writes and read-index requests |
//! | `service.rs` | what a node answers on its cluster port; membership changes |
//! | `prevote.rs` | the election timer: a campaign only after a quorum grants a pre-vote, so a node back from a partition cannot depose a healthy leader |
//! | `stats.rs` | [`stats::RaftStats`] and the lock-free [`stats::Histogram`] (fsync latency) |
//! | `node.rs` | [`RaftNode`]: start, propose, read barrier, status, admin, shutdown |
//!
//! On disk under `data_dir`: `log/vote`, `log/raft.log`, `snapshots/snap-<index>-<term>.snap`,
//! and `repair` while a repair is under way; damaged files are kept as `<name>.corrupt`.
//!
//! A group may have a single voter (a durable single node): it commits alone, with no network
//! round trip, binds its cluster port only when [`RaftNode::listen`] is called before it grows
//! (`Config::listen_at_start` false), serves reads without a read barrier while
//! [`RaftNode::is_sole_voter`], and waits for its own writes as long as a standalone server
//! would. [`RaftNode::save_snapshot`] and [`RaftNode::rewrite_log`] serve SAVE and
//! BGREWRITEAOF, [`RaftNode::snapshot_info`] INFO persistence.
//!
//! Failures: a node whose storage fails (disk full, I/O error) stops Raft, and
//! [`RaftNode::failure`] resolves with why, so the server can exit and be restarted;
//! a node that finds at start that its disk lost acknowledged data is repairing (see
//! [`RepairStatus`]) until it has caught up from the leader.
//!
//! Using it from a server: implement [`StateMachine`] for the keyspace (apply with the [`Stamp`]
//! handed in: the entry's time in µs and its place in the log, never a clock), `RaftNode::start(config, Arc::new(keyspace))`, then per client
//! write `node.propose(cmd)` (or `propose_many` for MULTI/EXEC and scripts), per read
//! `node.read_barrier()` followed by reading the keyspace directly, and answer
//! `-CLUSTERDOWN` when [`ClusterError::is_cluster_down`]. Leader-only jobs (the expiry sampler)
//! follow [`RaftNode::subscribe_leadership`].

mod clock;
mod config;
mod error;
mod forwarder;
mod local;
mod log_store;
mod network;
mod node;
mod prevote;
mod proposer;
mod record;
mod repair;
mod service;
mod state_machine;
pub mod stats;
pub mod tls;
mod transport;
mod types;

pub use clock::{EntryTime, LeaderClock};
pub use config::{Config, FsyncPolicy, DEFAULT_ELECTION_TIMEOUT_MS, DEFAULT_HEARTBEAT_INTERVAL_MS};
pub use error::ClusterError;
pub use node::{LogMemory, RaftNode};
pub use repair::{RepairReason, RepairStatus};
pub use state_machine::{SnapshotInfo, Stamp, StateMachine};
pub use types::{
    Batch, BatchOutput, ClusterStatus, CommandResult, FollowerProgress, Leadership, Member, NodeId,
    Role, TypeConfig,
};
