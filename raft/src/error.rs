//! The error every client-facing call returns. Callers branch on it: `is_cluster_down()` errors
//! become `-CLUSTERDOWN ...` replies, `ShuttingDown` ends the connection. It is serializable
//! because a leader sends it back to the follower that forwarded a request.

use serde::{Deserialize, Serialize};

use crate::types::NodeId;

/// Why a cluster operation did not complete.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum ClusterError {
    /// No leader was known, or the leader could not reach a quorum, within the client timeout.
    /// The request was not applied.
    #[error("no leader with a quorum within {waited_ms} ms")]
    Unavailable {
        /// How long the call waited.
        waited_ms: u64,
    },
    /// The request was handed to Raft but not confirmed within the client timeout; it may or
    /// may not be applied later.
    #[error("request not confirmed within {waited_ms} ms (outcome unknown)")]
    Timeout {
        /// How long the call waited.
        waited_ms: u64,
    },
    /// This node is not the leader (internal and retried by `RaftNode`; admin calls may see it).
    #[error("not the leader; leader is {leader:?}")]
    NotLeader {
        /// The leader this node knows of, if any.
        leader: Option<NodeId>,
    },
    /// Forwarding to the leader failed after the request was sent (outcome unknown).
    #[error("forwarding to leader {leader} failed: {reason}")]
    Forward {
        /// The leader the request was sent to.
        leader: NodeId,
        /// What went wrong on the link.
        reason: String,
    },
    /// The node is shutting down.
    #[error("raft node is shutting down")]
    ShuttingDown,
    /// A command or output could not be encoded or decoded (mismatched versions).
    #[error("codec error: {0}")]
    Codec(String),
    /// The commands of one proposal exceed the largest entry the cluster link can carry.
    #[error("proposal of {bytes} bytes exceeds the {max}-byte entry limit")]
    TooLarge {
        /// Encoded size of the proposal's commands.
        bytes: usize,
        /// The limit (a quarter of `max_frame_bytes`).
        max: usize,
    },
    /// A membership change was rejected.
    #[error("membership change failed: {0}")]
    Membership(String),
    /// A leadership transfer was refused (the target is not a voter, or could not campaign).
    #[error("leadership transfer failed: {0}")]
    Transfer(String),
    /// Invalid configuration.
    #[error("invalid raft config: {0}")]
    Config(String),
    /// Disk or socket failure while starting.
    #[error("raft startup failed: {0}")]
    Startup(String),
}

impl ClusterError {
    /// True for errors the server reports as `-CLUSTERDOWN` (no quorum, leader unreachable).
    pub fn is_cluster_down(&self) -> bool {
        matches!(
            self,
            ClusterError::Unavailable { .. }
                | ClusterError::Timeout { .. }
                | ClusterError::NotLeader { .. }
                | ClusterError::Forward { .. }
        )
    }

    /// True when the request certainly had no effect, so trying it again is safe.
    pub(crate) fn is_retryable(&self) -> bool {
        matches!(
            self,
            ClusterError::NotLeader { .. } | ClusterError::Unavailable { .. }
        )
    }
}
