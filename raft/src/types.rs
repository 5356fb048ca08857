//! The openraft type configuration and the plain data types that cross the crate boundary:
//! what one log entry carries (a batch of encoded commands stamped with leader time), what
//! applying it returns, and the status and leadership views handed to the server.

use std::fmt;
use std::io::Cursor;
use std::ops::Deref;
use std::sync::Arc;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::clock::EntryTime;
use crate::local::LocalCommands;
pub use crate::repair::RepairStatus;

/// Identifies a node in the cluster.
pub type NodeId = u64;

/// Result of applying one command: the encoded output, or why the command could not be decoded.
pub type CommandResult = Result<Vec<u8>, String>;

/// The payload of one Raft entry: many client commands applied in order at one leader time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Batch {
    /// The proposing leader's clock when it created the entry, in microseconds (see
    /// [`crate::LeaderClock`]; entries written before microseconds read as milliseconds × 1000).
    pub leader_time: EntryTime,
    /// The commands, each encoded with postcard, applied in this order. `Bytes`, not
    /// `Vec<u8>`: postcard writes both as a length and the bytes (so logs written with either
    /// read back with either), but a `Vec<u8>` goes out one byte at a time.
    pub commands: Commands,
    /// The typed commands of the proposals made on this node, beside their bytes (see
    /// `local`): in memory only, never serialized.
    #[serde(skip)]
    pub(crate) local: LocalCommands,
}

/// An entry's commands, shared by every in-memory copy of the entry. openraft clones an entry
/// whenever it reads it back (to apply it, to send it to a follower); a shared list makes that
/// one count, where a list of its own cost an allocation and a count per command (and, on
/// the first copy, a shared count allocated for each command's bytes). Encoded exactly as the
/// list (`Vec<Bytes>`) it holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Commands(Arc<Vec<Bytes>>);

impl From<Vec<Bytes>> for Commands {
    fn from(commands: Vec<Bytes>) -> Commands {
        Commands(Arc::new(commands))
    }
}

impl Deref for Commands {
    type Target = [Bytes];

    fn deref(&self) -> &[Bytes] {
        &self.0
    }
}

impl Serialize for Commands {
    fn serialize<Z: serde::Serializer>(&self, serializer: Z) -> Result<Z::Ok, Z::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Commands {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Commands, D::Error> {
        Vec::<Bytes>::deserialize(deserializer).map(Commands::from)
    }
}

impl fmt::Display for Batch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "batch({} commands @ {} us)",
            self.commands.len(),
            self.leader_time.micros()
        )
    }
}

/// `value` encoded with postcard into a vector allocated at `capacity` bytes, or at 64 (a
/// typical single command or reply) when `capacity` is 0. `postcard::to_allocvec` starts
/// from an empty vector and reallocates it as it grows: several reallocations per command.
pub(crate) fn encode<T: Serialize + ?Sized>(value: &T) -> postcard::Result<Vec<u8>> {
    encode_into(value, 0)
}

/// `value` encoded with postcard into a vector of exactly its size, for bytes that are kept
/// (a command stays in the log's memory until a snapshot covers it; a vector grown by
/// doubling would keep up to twice its bytes allocated, and the log's bytes are what
/// `maxmemory` leaves out).
///
/// Encoded into this thread's scratch buffer, a plain slice, and copied out, rather than sized
/// first with `serialized_size` (a second walk over every field) and written through
/// postcard's `Extend` flavor (a `Vec::extend` per byte string): under callgrind, encoding a
/// `-P 32` chunk of LIMIT.TOKEN took about 630 instructions per command that way.
pub(crate) fn encode_exact<T: Serialize + ?Sized>(value: &T) -> postcard::Result<Vec<u8>> {
    thread_local! {
        static SCRATCH: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
    }
    // Taken out of the cell while in use, so a nested call (none today) gets its own.
    let mut scratch = SCRATCH.take();
    if scratch.is_empty() {
        scratch = vec![0; SCRATCH_BYTES];
    }
    let encoded = match postcard::to_slice(value, &mut scratch) {
        Ok(used) => Ok(used.to_vec()),
        // Larger than the scratch buffer: sized first, then encoded once.
        Err(postcard::Error::SerializeBufferFull) => {
            postcard::experimental::serialized_size(value).and_then(|n| encode_into(value, n))
        }
        Err(e) => Err(e),
    };
    SCRATCH.set(scratch);
    encoded
}

/// The size of [`encode_exact`]'s scratch buffer (one per thread that proposes): a `-P 32`
/// chunk of LIMIT.TOKEN encodes to about 1.3 KiB.
const SCRATCH_BYTES: usize = 16 * 1024;

/// [`encode`] with a size hint.
pub(crate) fn encode_into<T: Serialize + ?Sized>(
    value: &T,
    capacity: usize,
) -> postcard::Result<Vec<u8>> {
    let capacity = if capacity == 0 { 64 } else { capacity };
    postcard::to_extend(value, Vec::with_capacity(capacity))
}

impl Batch {
    /// About how many bytes the batch takes encoded (the commands' bytes and their lengths,
    /// plus the time).
    pub(crate) fn encoded_size_hint(&self) -> usize {
        16 + self.commands.iter().map(|c| c.len() + 5).sum::<usize>()
    }
}

/// What applying one entry returns to its proposer: one result per command, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchOutput {
    /// One result per command of the batch.
    pub results: Vec<CommandResult>,
}

openraft::declare_raft_types!(
    /// openraft type configuration for Tollgate: batches in, per-command outputs out.
    pub TypeConfig:
        D = Batch,
        R = BatchOutput,
        NodeId = NodeId,
        Node = openraft::BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = openraft::TokioRuntime,
);

/// A log id in this crate's type configuration.
pub type LogId = openraft::LogId<NodeId>;
/// A log entry in this crate's type configuration.
pub type Entry = openraft::Entry<TypeConfig>;
/// Membership as stored in the log and snapshots.
pub type StoredMembership = openraft::StoredMembership<NodeId, openraft::BasicNode>;
/// Snapshot metadata in this crate's type configuration.
pub type SnapshotMeta = openraft::SnapshotMeta<NodeId, openraft::BasicNode>;
/// openraft's storage error in this crate's type configuration.
pub type StorageError = openraft::StorageError<NodeId>;

/// The role a node currently plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Role {
    /// Accepts writes and confirms reads.
    Leader,
    /// Replicates from the leader and votes.
    Follower,
    /// Campaigning for leadership.
    Candidate,
    /// Replicates but does not vote (new node, or removed voter).
    Learner,
    /// Shutting down.
    Shutdown,
}

impl From<openraft::ServerState> for Role {
    fn from(s: openraft::ServerState) -> Self {
        match s {
            openraft::ServerState::Leader => Role::Leader,
            openraft::ServerState::Follower => Role::Follower,
            openraft::ServerState::Candidate => Role::Candidate,
            openraft::ServerState::Learner => Role::Learner,
            openraft::ServerState::Shutdown => Role::Shutdown,
        }
    }
}

/// Who leads, as seen by this node; published on every change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Leadership {
    /// The known leader, if any.
    pub leader: Option<NodeId>,
    /// The current term.
    pub term: u64,
    /// True when this node is the leader.
    pub is_self: bool,
}

/// One member of the cluster configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// Node id.
    pub id: NodeId,
    /// Cluster address.
    pub addr: String,
    /// Voter (true) or learner (false).
    pub voter: bool,
    /// What the node advertises about itself ([`Config::advertise`](crate::Config::advertise)),
    /// once this node has heard it.
    pub advertised: Option<String>,
}

/// Replication progress of one follower, as the leader sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FollowerProgress {
    /// Follower id.
    pub id: NodeId,
    /// Highest log index known to be stored on the follower.
    pub matched_index: Option<u64>,
    /// Entries the follower is behind the leader's last log index.
    pub lag: u64,
    /// It answered the leader recently (within three election timeouts).
    pub responding: bool,
    /// It said it is repairing: it stores entries but cannot vote (see [`RepairStatus`]).
    pub repairing: bool,
}

/// A point-in-time view of this node's Raft state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterStatus {
    /// This node's id.
    pub node_id: NodeId,
    /// This node's role.
    pub role: Role,
    /// Current leader, if known.
    pub leader_id: Option<NodeId>,
    /// Current leader's cluster address, if known.
    pub leader_addr: Option<String>,
    /// Current term.
    pub term: u64,
    /// Highest index known committed on this node.
    pub commit_index: u64,
    /// Highest index applied to the state machine here.
    pub applied_index: u64,
    /// Highest index in this node's log.
    pub last_log_index: u64,
    /// Last index covered by this node's latest snapshot.
    pub snapshot_index: Option<u64>,
    /// Last index purged from this node's log (behind a snapshot): a node behind it can only
    /// catch up from a snapshot. A leader purges only once no follower is being sent the
    /// entries concerned, so this may trail the snapshot's purge point for a while.
    pub purged_index: Option<u64>,
    /// Voters and learners of the current configuration.
    pub members: Vec<Member>,
    /// Per-follower progress; empty unless this node leads.
    pub replication: Vec<FollowerProgress>,
    /// The election timeout range this node's Raft runs with, in ms.
    pub election_timeout_ms: (u64, u64),
    /// The heartbeat interval this node's Raft runs with, in ms.
    pub heartbeat_interval_ms: u64,
    /// Set while this node is repairing (its disk lost acknowledged data): it neither votes
    /// nor campaigns until the repair is proven.
    pub repair: Option<RepairStatus>,
    /// On a node that is not the leader: milliseconds since it last heard from a leader
    /// (or granted a vote; its own pre-vote rounds do not count). With pre-votes (`prevote`)
    /// a cut-off follower keeps its term and its last known leader, so this, not
    /// `leader_id`, says it lost it.
    pub leader_heard_ms: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The batch's layout before its commands were `Bytes`.
    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct BatchV1 {
        leader_time: EntryTime,
        commands: Vec<Vec<u8>>,
    }

    #[test]
    fn batches_encode_as_before_commands_were_bytes() {
        let old = BatchV1 {
            leader_time: EntryTime(1_700_000_000_000_000),
            commands: vec![b"first".to_vec(), Vec::new(), vec![7; 300]],
        };
        let new = Batch {
            leader_time: old.leader_time,
            commands: old
                .commands
                .iter()
                .cloned()
                .map(Bytes::from)
                .collect::<Vec<_>>()
                .into(),
            local: LocalCommands::default(),
        };
        let old_bytes = postcard::to_allocvec(&old).unwrap();
        let new_bytes = encode_into(&new, new.encoded_size_hint()).unwrap();
        assert_eq!(encode_exact(&new).unwrap().capacity(), new_bytes.len());
        assert_eq!(old_bytes, new_bytes);
        assert_eq!(postcard::from_bytes::<Batch>(&old_bytes).unwrap(), new);
        assert_eq!(postcard::from_bytes::<BatchV1>(&new_bytes).unwrap(), old);
        assert!(new.encoded_size_hint() >= new_bytes.len());
    }

    #[test]
    fn exact_encoding_past_the_scratch_buffer() {
        for size in [0, 100, SCRATCH_BYTES - 10, SCRATCH_BYTES, 3 * SCRATCH_BYTES] {
            let value = (7u32, vec![size as u8; size]);
            let exact = encode_exact(&value).unwrap();
            assert_eq!(exact, postcard::to_allocvec(&value).unwrap(), "{size}");
            assert_eq!(exact.capacity(), exact.len(), "{size}");
        }
    }
}
