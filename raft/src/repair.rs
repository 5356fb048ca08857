//! A node whose disk lost data it had acknowledged, and how it becomes whole again.
//!
//! Raft counts a follower's acknowledgement as a promise that the entry is on its disk for
//! good. A node that finds at start that the promise was broken (`raft.log` damaged where
//! intact records show the bytes had been made durable, the vote file unreadable, the newest
//! snapshot unreadable with the log purged behind it) is *repairing*: it keeps what it still
//! has, does not grant votes and does not campaign, and still replicates from the leader. It
//! is repaired, and votes again, once it has committed an entry proving that its log holds
//! everything it could have acknowledged:
//!
//! - an entry of a term above every term it knew at start (`term_floor`): such an entry was
//!   created by a leader elected without this node's vote, and since only this node lost data,
//!   that leader's log holds every committed entry (leader completeness); by log matching this
//!   node's log now equals the leader's up to that entry, which follows every entry committed
//!   before the leader's term; or
//! - an index at or past the last entry its damaged log held (`index_floor`, when that is
//!   known): an entry is committed here only where this node's log matches the leader's, and
//!   the leader's log holds every committed entry; every entry this node acknowledged and that
//!   could be committed is at or below that index. Not used when the vote was lost: that rule
//!   is about the log, and a lost vote is about terms.
//!
//! The record of what is needed (`<data_dir>/repair`, written twice like the vote) is made
//! durable before any damaged file is cut, and removed once repaired, so a restart in between
//! resumes the repair instead of forgetting it. The README's "Failure model" section gives the
//! full safety argument.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::record::{read_twice, sync_parent, write_twice, Twice};
use crate::types::LogId;

/// Why a node is repairing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum RepairReason {
    /// `raft.log` lost records that had been made durable (a checksum failure or zeroed bytes
    /// with intact records after them).
    LogCorruption,
    /// The vote file is unreadable: what this node voted for is unknown.
    VoteLost,
    /// The newest snapshot is unreadable and the log was purged behind it.
    SnapshotGap,
    /// The repair record itself is unreadable (a repair was under way).
    RecordLost,
}

impl RepairReason {
    /// A one-word name, as `INFO` shows it.
    pub fn as_str(self) -> &'static str {
        match self {
            RepairReason::LogCorruption => "log_corruption",
            RepairReason::VoteLost => "vote_lost",
            RepairReason::SnapshotGap => "snapshot_gap",
            RepairReason::RecordLost => "repair_record_lost",
        }
    }
}

/// What a repairing node is waiting for, as status reports show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepairStatus {
    /// Why it is repairing.
    pub reasons: Vec<RepairReason>,
    /// What was found, in words.
    pub detail: String,
    /// Repaired once an entry of a term above this one is committed here ...
    pub term_floor: u64,
    /// ... or once the commit index reaches this one (`None`: only the term rule applies).
    pub index_floor: Option<u64>,
}

impl fmt::Display for RepairStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "an entry of a term above {} committed", self.term_floor)?;
        if let Some(index) = self.index_floor {
            write!(f, ", or the commit index at {index}")?;
        }
        Ok(())
    }
}

/// The durable record of a repair (`<data_dir>/repair`).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Need {
    reasons: Vec<RepairReason>,
    details: Vec<String>,
    term_floor: u64,
    index_floor: Option<u64>,
}

impl Need {
    fn satisfied_by(&self, committed: &LogId) -> bool {
        let by_index = !self
            .reasons
            .iter()
            .any(|r| matches!(r, RepairReason::VoteLost | RepairReason::RecordLost));
        committed.leader_id.term > self.term_floor
            || (by_index && self.index_floor.is_some_and(|m| committed.index >= m))
    }

    fn status(&self) -> RepairStatus {
        RepairStatus {
            reasons: self.reasons.clone(),
            detail: self.details.join("; "),
            term_floor: self.term_floor,
            index_floor: self.index_floor,
        }
    }
}

/// Whether this node is repairing, shared by its storage (which sees commits) and its
/// service (which refuses votes).
pub(crate) struct Repair {
    path: PathBuf,
    need: Mutex<Option<Need>>,
    active: AtomicBool,
    /// The record existed but could not be read (its floors are recomputed at start).
    record_lost: bool,
}

impl Repair {
    /// Read the repair record at `path`, if any.
    pub(crate) fn open(path: &Path) -> io::Result<Repair> {
        let _ = std::fs::remove_file(path.with_extension("tmp"));
        let (need, record_lost) = match read_twice(path)? {
            Twice::Missing => (None, false),
            Twice::Intact(bytes) | Twice::OneCopy(bytes) => match postcard::from_bytes(&bytes) {
                Ok(need) => (Some(need), false),
                Err(_) => (None, true),
            },
            Twice::Lost => (None, true),
        };
        let active = need.is_some() || record_lost;
        Ok(Repair {
            path: path.to_path_buf(),
            need: Mutex::new(need),
            active: AtomicBool::new(active),
            record_lost,
        })
    }

    /// True while the node must not vote or campaign.
    pub(crate) fn is_active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }

    /// True when a repair record existed but was unreadable.
    pub(crate) fn record_lost(&self) -> bool {
        self.record_lost
    }

    /// Record durably that this node is repairing for `reason` (merged with any repair under
    /// way: the higher term floor, and an index floor only if every cause has one). Returns
    /// once the record is on disk; only then may the damaged data be cut.
    pub(crate) fn require(
        &self,
        reason: RepairReason,
        detail: String,
        term_floor: u64,
        index_floor: Option<u64>,
    ) -> io::Result<()> {
        let mut guard = self.lock();
        let need = match guard.take() {
            None if !self.is_active() => Need {
                reasons: vec![reason],
                details: vec![detail],
                term_floor,
                index_floor,
            },
            // Unreadable record: nothing of it is known but that a repair was under way.
            None => Need {
                reasons: if reason == RepairReason::RecordLost {
                    vec![reason]
                } else {
                    vec![RepairReason::RecordLost, reason]
                },
                details: vec![detail],
                term_floor,
                index_floor: None,
            },
            Some(mut need) => {
                if !need.reasons.contains(&reason) {
                    need.reasons.push(reason);
                }
                need.details.push(detail);
                need.term_floor = need.term_floor.max(term_floor);
                need.index_floor = match (need.index_floor, index_floor) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    _ => None,
                };
                need
            }
        };
        let bytes = postcard::to_allocvec(&need).map_err(io::Error::other)?;
        write_twice(&self.path, &bytes)?;
        *guard = Some(need);
        self.active.store(true, Ordering::Release);
        Ok(())
    }

    /// Called with each newly committed log id: ends the repair once it is proven.
    pub(crate) fn check(&self, committed: &LogId) {
        if !self.is_active() {
            return;
        }
        let mut guard = self.lock();
        let Some(need) = guard.as_ref() else { return };
        if !need.satisfied_by(committed) {
            return;
        }
        // The record goes first: voting again before it is gone could, after a crash, leave a
        // node that votes with a log it still believes damaged; the other order is harmless.
        let removed = match std::fs::remove_file(&self.path) {
            Ok(()) => sync_parent(&self.path),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        };
        if let Err(e) = removed {
            tracing::error!(file = %self.path.display(), error = %e, "cannot remove the repair record; still repairing");
            return;
        }
        let status = need.status();
        *guard = None;
        self.active.store(false, Ordering::Release);
        tracing::warn!(
            committed = %committed,
            "raft node repaired: it committed {committed} from the leader, so its log holds every entry it had acknowledged ({status}); it votes again"
        );
    }

    /// What the repair waits for, while one is under way.
    pub(crate) fn status(&self) -> Option<RepairStatus> {
        if !self.is_active() {
            return None;
        }
        Some(
            self.lock()
                .as_ref()
                .map(Need::status)
                .unwrap_or(RepairStatus {
                    reasons: vec![RepairReason::RecordLost],
                    detail: "the repair record is unreadable".into(),
                    term_floor: 0,
                    index_floor: None,
                }),
        )
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Need>> {
        self.need.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::CommittedLeaderId;

    fn log_id(term: u64, index: u64) -> LogId {
        LogId::new(CommittedLeaderId::new(term, 1), index)
    }

    #[test]
    fn repaired_by_a_newer_term_or_the_index_floor_and_the_record_survives_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("repair");
        let repair = Repair::open(&path).unwrap();
        assert!(!repair.is_active());
        repair
            .require(RepairReason::LogCorruption, "flip".into(), 3, Some(1200))
            .unwrap();
        assert!(repair.is_active());
        // A restart before the repair resumes it.
        let repair = Repair::open(&path).unwrap();
        assert!(repair.is_active());
        assert_eq!(repair.status().unwrap().index_floor, Some(1200));
        repair.check(&log_id(3, 1199));
        assert!(repair.is_active(), "same term, below the floor");
        repair.check(&log_id(3, 1200));
        assert!(!repair.is_active());
        assert!(!path.exists());
        assert!(!Repair::open(&path).unwrap().is_active());

        // A lost vote needs a newer term whatever the index.
        let repair = Repair::open(&path).unwrap();
        repair
            .require(RepairReason::VoteLost, "vote".into(), 5, Some(10))
            .unwrap();
        repair.check(&log_id(5, 1_000_000));
        assert!(repair.is_active());
        repair.check(&log_id(6, 11));
        assert!(!repair.is_active());

        // Merging keeps the stricter floors; an unknown index floor stays unknown.
        let repair = Repair::open(&path).unwrap();
        repair
            .require(RepairReason::LogCorruption, "a".into(), 2, Some(50))
            .unwrap();
        repair
            .require(RepairReason::SnapshotGap, "b".into(), 4, None)
            .unwrap();
        let status = repair.status().unwrap();
        assert_eq!((status.term_floor, status.index_floor), (4, None));
        assert_eq!(
            status.reasons,
            vec![RepairReason::LogCorruption, RepairReason::SnapshotGap]
        );

        // An unreadable record: repairing, by the term rule only.
        std::fs::write(&path, b"garbage that is no record").unwrap();
        let repair = Repair::open(&path).unwrap();
        assert!(repair.is_active() && repair.record_lost());
        repair
            .require(RepairReason::RecordLost, "lost".into(), 7, Some(3))
            .unwrap();
        repair.check(&log_id(7, 100));
        assert!(repair.is_active());
        repair.check(&log_id(8, 1));
        assert!(!repair.is_active());
    }
}
