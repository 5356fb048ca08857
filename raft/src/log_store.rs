//! The durable Raft log and vote (openraft's `RaftLogStorage`).
//!
//! Layout under `<data_dir>/log/`: `vote` (one CRC-framed record stored twice, replaced
//! atomically and always fsynced) and `raft.log` (an append-only sequence of CRC-framed
//! records: entries, truncations, purge marks, the commit index and durability marks). The
//! whole live log is also kept in memory, so reads never touch the disk; purging after a
//! snapshot keeps memory bounded, and when dead records outweigh live ones the file is
//! rewritten (temp file + rename).
//!
//! Writes go to one writer thread that does group commit: every append queued while the previous
//! fsync ran is written and made durable by a single fsync, and only then does openraft hear that
//! the entries are stored. After each fsync the writer appends a durability mark ("every byte
//! before offset N is on disk"), which the next group's fsync makes durable in turn. With
//! `appendfsync everysec` an append needs no fsync before openraft hears of it, so the
//! appending task writes it itself (under the writer's lock, when nothing is queued ahead of
//! it) and the thread only fsyncs once a second: no thread hand-off per entry. With `always`
//! on a node that is its group's only voter, the appending task also fsyncs the entry itself
//! before openraft hears of it (as Redis's event loop fsyncs its AOF): nothing else can
//! commit meanwhile, and the hand-off to the thread and back cost more than the wait.
//!
//! On open, damage is judged by what follows it. A bad record (short, checksum mismatch,
//! undecodable, or zeros where a record was) with no durability mark after it that covers it is
//! a *torn tail*: bytes of a write that never completed, so never acknowledged; they are cut
//! with a warning. A bad record that a later mark proves had been made durable is *corruption*
//! of acknowledged data: the node records that it is repairing (see `repair`), keeps the log up
//! to the last good record, sets the damaged file aside as `raft.log.corrupt`, and does not vote
//! until it has caught up from the leader. An unreadable vote file (both copies damaged) and an
//! unreadable snapshot with the log purged behind it (see `state_machine`) are handled the same
//! way.
//!
//! The file is allocated ahead of its records (`fallocate`, [`PREALLOCATE_BYTES`] at a time), and
//! records are written into that space. Appending at the end of the file would change its size
//! with every group, and then each fsync also commits a filesystem journal transaction for the
//! size: on ext4 here that made an fsync take about 160-200 µs instead of 115-130 µs, and cost
//! a third more CPU. The allocated space reads as zeros, which the record scanner takes as the
//! end of the data. On open, whatever follows the last intact record, zeros or a torn write, is
//! cut off before new records are written, so nothing stale can ever follow a new record.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::ops::RangeBounds;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, RwLock};
use std::thread;
use std::time::{Duration, Instant};

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{EntryPayload, OptionalSend, RaftLogReader, StorageIOError, Vote};
use serde::{Deserialize, Serialize};

use crate::clock::LeaderClock;
use crate::config::FsyncPolicy;
use crate::record::{
    encode_record, read_twice, scan_records, sync_parent, write_atomic, write_twice, Twice,
};
use crate::repair::{Repair, RepairReason};
use crate::stats::RaftStats;
use crate::types::{Entry, LogId, NodeId, StorageError, TypeConfig};

const LOG_FILE: &str = "raft.log";
/// How far ahead of its records the log file is allocated.
const PREALLOCATE_BYTES: u64 = 8 << 20;
const VOTE_FILE: &str = "vote";

/// One record of `raft.log`, as read back.
#[derive(Deserialize)]
enum LogRecord {
    Entry(Entry),
    Truncate {
        since: u64,
    },
    Purged(LogId),
    Committed(LogId),
    /// Every byte of the file before `upto` had been fsynced when this was written, and the
    /// vote's term was `term` (a bound on the terms of the entries before it).
    Synced {
        upto: u64,
        term: u64,
    },
}

/// The same record shape, borrowed for writing (serializes to identical bytes).
#[derive(Serialize)]
enum LogRecordRef<'a> {
    Entry(&'a Entry),
    Truncate { since: u64 },
    Purged(&'a LogId),
    Committed(&'a LogId),
    Synced { upto: u64, term: u64 },
}

/// The in-memory mirror of the log file.
#[derive(Default)]
struct LogMem {
    /// Live entries by index, each with the size of its record in the file.
    entries: BTreeMap<u64, (Entry, u64)>,
    last_purged: Option<LogId>,
    committed: Option<LogId>,
    vote: Option<Vote<NodeId>>,
    /// Bytes of live entry records.
    live_bytes: u64,
    /// Bytes in the file (live + dead), counting `lazy` as written.
    file_bytes: u64,
    /// Records that need no fsync of their own (the commit index, truncations, purge
    /// marks), framed and waiting to go out in front of the next append. Handing each to
    /// the writer at once cost a thread wake-up per commit-index change, that is, per entry
    /// on every node.
    lazy: Vec<u8>,
}

struct Shared {
    mem: RwLock<LogMem>,
    /// The writer's state (shared with its thread) and the queue to that thread.
    writer: Arc<Mutex<Writer>>,
    queue: Mutex<mpsc::Sender<WriteOp>>,
    /// Ops sent to the writer thread and not yet done. While any is, appends queue too
    /// (keeping the file's order that of the calls).
    queued: Arc<AtomicUsize>,
    dir: PathBuf,
    clock: Arc<LeaderClock>,
    committed_index: AtomicU64,
    /// The vote's term, for the writer's durability marks.
    vote_term: Arc<AtomicU64>,
    /// Told of every commit: ends a repair once it is proven.
    repair: Arc<Repair>,
    /// Rewrite the file once dead bytes exceed both the live bytes and this floor.
    compact_min_bytes: u64,
    /// The fsync policy the writer follows (changeable while it runs).
    policy: Arc<SharedPolicy>,
    /// Set while this node is its group's only voter (`LogHandle::set_sole_voter`): then an
    /// `always` append is written and fsynced by the appending task itself.
    ///
    /// Refreshed only when this node proposes (`RaftNode::propose_encoded`), so it can be
    /// stale: true after RAFT.ADDNODE grew the group until this node next proposes, false
    /// after the group shrank back to this node. A stale value is never wrong, because it
    /// decides only which thread writes and fsyncs an `always` group, never whether that
    /// group is fsynced before openraft hears of it: both ways run the same
    /// `Writer::finish_group`, which fsyncs and then completes the callbacks (and writes the
    /// same durability mark). It plays no part in what is committed either: openraft counts
    /// the quorum of the membership it holds, and a read skips the read barrier only on
    /// `RaftNode::is_sole_voter`, which reads the metrics afresh at each call. What a stale
    /// value can cost: after growth, a group's fsync on openraft's core task (delaying its
    /// replication to the new members by that fsync) until this node proposes; a cluster
    /// whose writes all come forwarded from followers never refreshes it on its leader (they
    /// go through `Proposer::submit`). After shrinking, openraft's own entries (membership,
    /// a new term's blank entry) take the writer thread's hand-off, but not the next client
    /// write: its proposal sets the flag before its entry is appended.
    sole_voter: AtomicBool,
}

/// An [`FsyncPolicy`] that may change while the writer runs (CONFIG SET appendfsync).
#[derive(Default)]
pub(crate) struct SharedPolicy(std::sync::atomic::AtomicBool);

impl SharedPolicy {
    fn new(policy: FsyncPolicy) -> SharedPolicy {
        let p = SharedPolicy::default();
        p.set(policy);
        p
    }

    fn get(&self) -> FsyncPolicy {
        match self.0.load(Ordering::Acquire) {
            true => FsyncPolicy::EverySec,
            false => FsyncPolicy::Always,
        }
    }

    fn set(&self, policy: FsyncPolicy) {
        self.0
            .store(policy == FsyncPolicy::EverySec, Ordering::Release);
    }
}

/// The log store handed to openraft; clones share state (a clone is also the log reader).
#[derive(Clone)]
pub(crate) struct LogStore {
    shared: Arc<Shared>,
}

/// What the node keeps to observe and close the log after openraft took the store.
#[derive(Clone)]
pub(crate) struct LogHandle {
    shared: Arc<Shared>,
}

impl LogHandle {
    /// Bytes of the live entry records; the store keeps these entries in memory too.
    pub(crate) fn live_bytes(&self) -> u64 {
        self.shared
            .mem
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .live_bytes
    }

    /// Bytes of the log file's records, live and dead (what a rewrite would shrink).
    pub(crate) fn file_bytes(&self) -> u64 {
        self.shared
            .mem
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .file_bytes
    }

    /// Rewrite the file now with only its live records (BGREWRITEAOF, after a purge), whatever
    /// the dead bytes weigh. The rewrite is queued behind the writes before it.
    pub(crate) fn compact_now(&self) -> io::Result<()> {
        let mut mem = self.shared.mem_write();
        self.shared.compact(&mut mem, true)
    }

    /// Follow `policy` from the next group of writes on (switching to `Always` also makes
    /// what was written before durable with that group's fsync).
    pub(crate) fn set_fsync(&self, policy: FsyncPolicy) {
        self.shared.policy.set(policy);
        // A writer that stopped has nothing left to fsync on time: ignore its refusal.
        let _ = self.shared.send(WriteOp::Wake);
    }

    /// Whether this node is its group's only voter (learners aside), as the node last saw
    /// it. Only the write path's shape depends on it, never what is durable when: a stale
    /// value makes one group go the other way.
    pub(crate) fn set_sole_voter(&self, alone: bool) {
        if self.shared.sole_voter.load(Ordering::Relaxed) != alone {
            self.shared.sole_voter.store(alone, Ordering::Relaxed);
        }
    }

    /// The fsync policy followed now.
    pub(crate) fn fsync(&self) -> FsyncPolicy {
        self.shared.policy.get()
    }

    /// Highest index known committed (persisted lazily with the next group fsync).
    pub(crate) fn committed_index(&self) -> u64 {
        self.shared.committed_index.load(Ordering::Acquire)
    }

    /// Write and fsync everything so far and stop the writer thread.
    pub(crate) async fn close(&self) {
        let lazy = WriteOp::Append {
            bytes: std::mem::take(&mut self.shared.mem_write().lazy),
            flushed: None,
        };
        let (tx, rx) = tokio::sync::oneshot::channel();
        if self.shared.send(lazy).is_ok() && self.shared.send(WriteOp::Close { done: tx }).is_ok() {
            let _ = tokio::time::timeout(Duration::from_secs(5), rx).await;
        }
    }
}

impl LogStore {
    /// Call once after [`LogStore::open`], before openraft reads the vote: a vote this node
    /// `me` had won comes back *not committed*. openraft resumes a node whose stored vote it
    /// had won as leader at once, in the same term, and its read index is then the commit
    /// index this node wrote down last, which trails what it acknowledged (the commit record
    /// goes out lazily, with the next append): a read could miss an acknowledged write
    /// (`tests/cluster_faults.rs`, `a_restarted_leader_never_reads_behind_an_acknowledged_write`).
    /// Without the flag the node campaigns for a new term like any other, and that term's
    /// first entry follows everything it could have acknowledged. The term and the node voted
    /// for stay as they were; a vote for another node is left as it is (a follower still
    /// names its leader at once after a restart).
    pub(crate) fn forget_own_leadership(&self, me: NodeId) {
        let mut mem = self.mem_write();
        if let Some(v) = mem.vote.as_mut() {
            if v.committed && v.leader_id.voted_for() == Some(me) {
                v.committed = false;
            }
        }
    }

    /// Open (or create) the log under `dir` and replay it. A torn tail is cut; lost durable
    /// data (a corrupt log, an unreadable vote, a log purged past `snapshot_last`, the newest
    /// snapshot that could be loaded) is recorded in `repair` before any file is changed.
    pub(crate) fn open(
        dir: &Path,
        policy: FsyncPolicy,
        compact_min_bytes: u64,
        clock: Arc<LeaderClock>,
        repair: Arc<Repair>,
        snapshot_last: Option<LogId>,
        stats: Arc<RaftStats>,
    ) -> io::Result<LogStore> {
        fs::create_dir_all(dir)?;
        let vote_path = dir.join(VOTE_FILE);
        let log_path = dir.join(LOG_FILE);
        let _ = fs::remove_file(log_path.with_extension("tmp"));
        let vote = read_vote(&vote_path)?;
        let bytes = match fs::read(&log_path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e),
        };
        let replayed = replay(&bytes, &clock);
        let mut mem = replayed.mem;
        let vote_term = vote.vote.map_or(0, |v| v.leader_id.term);
        let max_term = replayed.max_term.max(vote_term);

        if vote.lost {
            let kept = set_aside(&vote_path)?;
            repair.require(
                RepairReason::VoteLost,
                format!(
                    "the vote file {} is unreadable (both copies damaged; kept as {}): this node \
                     does not know what it voted for",
                    vote_path.display(),
                    kept.display()
                ),
                max_term,
                None,
            )?;
            fs::remove_file(&vote_path)?;
            sync_parent(&vote_path)?;
        } else if vote.one_copy {
            if let Some(v) = &vote.vote {
                write_twice(&vote_path, &encode_vote(v)?)?;
            }
            tracing::warn!(file = %vote_path.display(), "one copy of the raft vote was damaged; restored it from the other");
        }
        if repair.record_lost() {
            repair.require(
                RepairReason::RecordLost,
                "the repair record is unreadable".into(),
                max_term,
                None,
            )?;
        }
        match replayed.damage {
            Some(Damage::Corrupt {
                offset,
                why,
                intact_after,
            }) => {
                let kept = set_aside(&log_path)?;
                repair.require(
                    RepairReason::LogCorruption,
                    format!(
                        "{} is damaged at byte {offset} ({why}) and {intact_after} intact records \
                         written after those bytes had been made durable follow it, so entries \
                         this node acknowledged are lost; kept the log up to index {} (the \
                         damaged file is kept as {})",
                        log_path.display(),
                        mem.last_index()
                            .map_or_else(|| "none".into(), |i| i.to_string()),
                        kept.display()
                    ),
                    max_term,
                    replayed.last_index,
                )?;
                write_atomic(&log_path, &bytes[..replayed.good_end])?;
            }
            Some(Damage::Torn { offset, why }) => {
                tracing::warn!(
                    file = %log_path.display(),
                    offset,
                    dropped_bytes = bytes.len() - offset,
                    reason = why,
                    "raft log has a torn tail (a write that never completed); cutting it"
                );
                cut(&log_path, replayed.good_end as u64)?;
            }
            // Allocated space (zeros). A crash can leave a write's later pages on disk and not
            // its first ones, so even behind zeros there may be stale records that were never
            // made durable: they must not surface after the records written next.
            None if bytes.len() > replayed.good_end => cut(&log_path, replayed.good_end as u64)?,
            None => {}
        }
        if mem.last_purged.map(|p| p.index) > snapshot_last.map(|s| s.index) {
            // The entries up to the purge point live only in a snapshot, and no snapshot that
            // covers them could be loaded: this node no longer holds what it acknowledged.
            let through = mem.last_index();
            repair.require(
                RepairReason::SnapshotGap,
                format!(
                    "the log was purged up to index {} but the newest readable snapshot ends at {}; \
                     discarded the log (it ended at index {}) to fetch a snapshot from the leader",
                    mem.last_purged.map_or(0, |p| p.index),
                    snapshot_last.map_or_else(|| "none".into(), |s| s.index.to_string()),
                    through.unwrap_or(0),
                ),
                max_term,
                through,
            )?;
            write_atomic(&log_path, &[])?;
            mem = LogMem::default();
        }
        mem.vote = vote.vote;
        if repair.is_active() {
            // openraft resumes leadership at once when the stored vote is a committed vote
            // for this node; a node missing acknowledged entries must never do that.
            if let Some(v) = &mut mem.vote {
                v.committed = false;
            }
        }
        let data_end = mem.file_bytes;
        let file = open_for_writing(&log_path)?;
        sync_parent(&log_path)?;
        let committed_index = AtomicU64::new(mem.committed.map(|c| c.index).unwrap_or(0));
        let vote_term = Arc::new(AtomicU64::new(vote_term));
        let (tx, rx) = mpsc::channel();
        let policy = Arc::new(SharedPolicy::new(policy));
        let writer = Arc::new(Mutex::new(Writer::new(
            file,
            data_end,
            log_path,
            policy.clone(),
            vote_term.clone(),
            stats,
        )));
        let queued = lock(&writer).queued.clone();
        let thread_writer = writer.clone();
        thread::Builder::new()
            .name("raft-log-writer".into())
            .spawn(move || Writer::run(&thread_writer, rx))?;
        Ok(LogStore {
            shared: Arc::new(Shared {
                mem: RwLock::new(mem),
                writer,
                queue: Mutex::new(tx),
                queued,
                dir: dir.to_path_buf(),
                clock,
                committed_index,
                vote_term,
                repair,
                compact_min_bytes,
                policy,
                sole_voter: AtomicBool::new(false),
            }),
        })
    }

    /// A handle that outlives openraft's ownership of the store.
    pub(crate) fn handle(&self) -> LogHandle {
        LogHandle {
            shared: self.shared.clone(),
        }
    }

    fn mem_read(&self) -> std::sync::RwLockReadGuard<'_, LogMem> {
        self.shared.mem.read().unwrap_or_else(|e| e.into_inner())
    }

    fn mem_write(&self) -> std::sync::RwLockWriteGuard<'_, LogMem> {
        self.shared.mem_write()
    }

    /// Queue a record that needs no fsync of its own: it is written in front of the next
    /// append and made durable by that group's fsync. Until then a crash loses it, which
    /// is the same as a crash just before the call (a commit index is learned again, and
    /// truncated or purged entries are truncated or purged again), and nothing that
    /// depends on it can become durable first.
    fn write_lazy(mem: &mut LogMem, record: &LogRecordRef<'_>) -> io::Result<()> {
        let before = mem.lazy.len();
        encode_record(&encode(record)?, &mut mem.lazy);
        mem.file_bytes += (mem.lazy.len() - before) as u64;
        Ok(())
    }

    /// Rewrite the file with only live records when dead bytes dominate.
    fn maybe_compact(&self, mem: &mut LogMem) -> io::Result<()> {
        self.shared.compact(mem, false)
    }
}

impl Shared {
    /// Rewrite the file with only live records when dead bytes dominate, or with `force`.
    fn compact(&self, mem: &mut LogMem, force: bool) -> io::Result<()> {
        let dead = mem.file_bytes.saturating_sub(mem.live_bytes);
        if !force && dead <= mem.live_bytes.max(self.compact_min_bytes) {
            return Ok(());
        }
        let mut bytes = Vec::new();
        if let Some(p) = &mem.last_purged {
            encode_record(&encode(&LogRecordRef::Purged(p))?, &mut bytes);
        }
        if let Some(c) = &mem.committed {
            encode_record(&encode(&LogRecordRef::Committed(c))?, &mut bytes);
        }
        for (entry, _) in mem.entries.values() {
            encode_record(&encode(&LogRecordRef::Entry(entry))?, &mut bytes);
        }
        // The new file holds the whole state, the queued records' effects included.
        mem.lazy.clear();
        mem.file_bytes = bytes.len() as u64;
        self.send(WriteOp::Rewrite { bytes })
    }

    fn mem_write(&self) -> std::sync::RwLockWriteGuard<'_, LogMem> {
        self.mem.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Queue `op` for the writer thread.
    fn send(&self, op: WriteOp) -> Result<(), io::Error> {
        let tx = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        // Counted before it can be taken, so an inline append never overtakes it.
        self.queued.fetch_add(1, Ordering::AcqRel);
        tx.send(op).map_err(|_| {
            self.queued.fetch_sub(1, Ordering::AcqRel);
            io::Error::new(io::ErrorKind::BrokenPipe, "raft log writer stopped")
        })
    }

    /// Hand `bytes` to the file. With `everysec`, and nothing queued for the writer thread
    /// ahead of them, they are written here, on the caller's thread, and openraft is told at
    /// once: the policy asks for no fsync before the acknowledgement (the pages are in the
    /// kernel, so a killed process loses nothing), and the writer thread's once-a-second
    /// fsync covers them. Handing each append to the thread and back cost two thread
    /// wake-ups (about three futex calls) per Raft entry. With `always` on the only voter
    /// of the group, and nothing queued ahead, they are written and fsynced here, before
    /// openraft is told, as Redis's event loop fsyncs its AOF itself: the hand-off to the
    /// writer thread and back (two thread wake-ups, about eight context switches per entry)
    /// cost more than the fsync's wait on the one runtime worker, which has nothing else to
    /// do until the entry is durable (measured in the README, "Durable `always` on a sole
    /// voter"). With `always` in a group of several voters, or behind queued work, they go
    /// to the writer thread, which fsyncs a group before it answers: there openraft's core
    /// must not wait on the disk while it replicates the entry to the others.
    fn append(&self, bytes: Vec<u8>, callback: LogFlushed<TypeConfig>) -> Result<(), io::Error> {
        let queue = |bytes, callback| {
            self.send(WriteOp::Append {
                bytes,
                flushed: Some(callback),
            })
        };
        let always = self.policy.get() == FsyncPolicy::Always;
        if (always && !self.sole_voter.load(Ordering::Relaxed))
            || self.queued.load(Ordering::Acquire) > 0
        {
            return queue(bytes, callback);
        }
        let mut writer = lock(&self.writer);
        // Checked again under the lock: the thread lowers the count only once an op's
        // bytes are written, so at zero nothing queued is left to go before these.
        if writer.broken.is_some() || self.queued.load(Ordering::Acquire) > 0 {
            drop(writer);
            return queue(bytes, callback);
        }
        if always {
            // The group is this append: written, fsynced, then openraft told (or told of
            // the failure, as the writer thread would).
            writer.write(&bytes);
            writer.waiting.push(callback);
            writer.finish_group(false);
            return Ok(());
        }
        writer.write(&bytes);
        let outcome = match &writer.broken {
            None => Ok(()),
            Some(why) => Err(io::Error::other(why.clone())),
        };
        drop(writer);
        callback.log_io_completed(outcome);
        Ok(())
    }
}

fn encode(record: &LogRecordRef<'_>) -> io::Result<Vec<u8>> {
    let capacity = match record {
        LogRecordRef::Entry(Entry {
            payload: EntryPayload::Normal(batch),
            ..
        }) => 32 + batch.encoded_size_hint(),
        _ => 0,
    };
    crate::types::encode_into(record, capacity).map_err(io::Error::other)
}

/// openraft's error for a failed log write.
fn write_error(e: io::Error) -> StorageError {
    StorageIOError::write_logs(&e).into()
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        let mem = self.mem_read();
        Ok(mem
            .entries
            .range(range)
            .map(|(_, (e, _))| e.clone())
            .collect())
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let mem = self.mem_read();
        let last_log_id = mem
            .entries
            .values()
            .next_back()
            .map(|(e, _)| e.log_id)
            .or(mem.last_purged);
        Ok(LogState {
            last_purged_log_id: mem.last_purged,
            last_log_id,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), StorageError> {
        let bytes = encode_vote(vote).map_err(|e| StorageIOError::write_vote(&e))?;
        let path = self.shared.dir.join(VOTE_FILE);
        tokio::task::spawn_blocking(move || write_twice(&path, &bytes))
            .await
            .map_err(|e| StorageIOError::write_vote(&e))?
            .map_err(|e| StorageIOError::write_vote(&e))?;
        self.shared
            .vote_term
            .fetch_max(vote.leader_id.term, Ordering::AcqRel);
        self.mem_write().vote = Some(*vote);
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, StorageError> {
        Ok(self.mem_read().vote)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        let Some(c) = committed else { return Ok(()) };
        let mut mem = self.mem_write();
        Self::write_lazy(&mut mem, &LogRecordRef::Committed(&c)).map_err(write_error)?;
        mem.committed = Some(c);
        drop(mem);
        self.shared
            .committed_index
            .fetch_max(c.index, Ordering::AcqRel);
        self.shared.repair.check(&c);
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        Ok(self.mem_read().committed)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut mem = self.mem_write();
        // Queued lazy records go first, in the order they were made.
        let mut bytes = std::mem::take(&mut mem.lazy);
        let lazy_len = bytes.len() as u64;
        for entry in entries {
            if let EntryPayload::Normal(batch) = &entry.payload {
                self.shared.clock.observe(batch.leader_time.micros());
            }
            let start = bytes.len();
            encode_record(
                &encode(&LogRecordRef::Entry(&entry)).map_err(write_error)?,
                &mut bytes,
            );
            let size = (bytes.len() - start) as u64;
            mem.live_bytes += size;
            if let Some((_, old)) = mem.entries.insert(entry.log_id.index, (entry, size)) {
                mem.live_bytes = mem.live_bytes.saturating_sub(old);
            }
        }
        mem.file_bytes += bytes.len() as u64 - lazy_len;
        drop(mem);
        self.shared
            .append(bytes, callback)
            .map_err(|e| StorageIOError::write_logs(&e).into())
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let mut mem = self.mem_write();
        Self::write_lazy(
            &mut mem,
            &LogRecordRef::Truncate {
                since: log_id.index,
            },
        )
        .map_err(write_error)?;
        let removed = mem.entries.split_off(&log_id.index);
        let removed_bytes: u64 = removed.values().map(|(_, s)| *s).sum();
        mem.live_bytes = mem.live_bytes.saturating_sub(removed_bytes);
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let mut mem = self.mem_write();
        Self::write_lazy(&mut mem, &LogRecordRef::Purged(&log_id)).map_err(write_error)?;
        let keep = mem.entries.split_off(&log_id.index.saturating_add(1));
        let removed = std::mem::replace(&mut mem.entries, keep);
        let removed_bytes: u64 = removed.values().map(|(_, s)| *s).sum();
        mem.live_bytes = mem.live_bytes.saturating_sub(removed_bytes);
        mem.last_purged = Some(log_id);
        self.maybe_compact(&mut mem).map_err(write_error)
    }
}

/// What the vote file holds.
struct VoteRead {
    vote: Option<Vote<NodeId>>,
    /// Neither copy is readable: what this node voted for is unknown.
    lost: bool,
    /// One copy was damaged (the file should be written again).
    one_copy: bool,
}

fn encode_vote(vote: &Vote<NodeId>) -> io::Result<Vec<u8>> {
    postcard::to_allocvec(vote).map_err(io::Error::other)
}

/// Read the vote file; a missing file means "never voted". It is only ever replaced
/// atomically, so damage means the disk lies: one damaged copy is survived with the other,
/// two mean the vote is lost.
fn read_vote(path: &Path) -> io::Result<VoteRead> {
    let _ = fs::remove_file(path.with_extension("tmp"));
    let decode = |bytes: &[u8]| postcard::from_bytes::<Vote<NodeId>>(bytes).ok();
    let lost = VoteRead {
        vote: None,
        lost: true,
        one_copy: false,
    };
    Ok(match read_twice(path)? {
        Twice::Missing => VoteRead {
            vote: None,
            lost: false,
            one_copy: false,
        },
        Twice::Intact(bytes) => match decode(&bytes) {
            Some(v) => VoteRead {
                vote: Some(v),
                lost: false,
                one_copy: false,
            },
            None => lost,
        },
        Twice::OneCopy(bytes) => match decode(&bytes) {
            Some(v) => VoteRead {
                vote: Some(v),
                lost: false,
                one_copy: true,
            },
            None => lost,
        },
        Twice::Lost => lost,
    })
}

/// What damage in `raft.log` means.
#[derive(Debug, PartialEq, Eq)]
enum Damage {
    /// A write that never completed: nothing from `offset` on had been made durable.
    Torn { offset: usize, why: &'static str },
    /// Bytes that had been made durable are damaged (a later durability mark covers them).
    Corrupt {
        offset: usize,
        why: &'static str,
        /// Intact records found after the damage.
        intact_after: usize,
    },
}

/// The log as read back, and what it says about what it held.
struct Replayed {
    /// The log up to the first bad record.
    mem: LogMem,
    /// Where the intact records before the damage end.
    good_end: usize,
    damage: Option<Damage>,
    /// The highest term any readable record names (entries, commit and purge marks, the vote
    /// term in durability marks), before or after the damage.
    max_term: u64,
    /// The index of the last entry the log held, if known: the log's last index when it is
    /// whole; with corruption, the last entry record in the file when it lies after the damage
    /// (any entry written before it with a higher index was truncated first), else unknown.
    last_index: Option<u64>,
}

/// Rebuild the in-memory log from the bytes of `raft.log`, stopping at the first bad record,
/// and judge what follows it (see the module docs).
fn replay(bytes: &[u8], clock: &LeaderClock) -> Replayed {
    let scan = scan_records(bytes, true);
    let mut mem = LogMem::default();
    let mut good_end = 0usize;
    let mut max_term = 0u64;
    let mut bad = None;
    let mut records = scan.records.into_iter();
    for r in records.by_ref() {
        match postcard::from_bytes::<LogRecord>(r.payload) {
            Ok(record) => {
                max_term = max_term.max(record_term(&record));
                apply_record(&mut mem, record, (r.end - good_end) as u64, clock);
                good_end = r.end;
            }
            Err(_) => {
                bad = Some((r.start, "undecodable record"));
                break;
            }
        }
    }
    let mut after: Vec<_> = records.collect();
    if let Some(b) = scan.bad {
        bad.get_or_insert((b.offset, b.why));
        after.extend(b.after);
    }
    mem.file_bytes = good_end as u64;
    let Some((offset, why)) = bad else {
        let last_index = mem.last_index();
        return Replayed {
            mem,
            good_end,
            damage: None,
            max_term,
            last_index,
        };
    };
    let mut proven_durable = false;
    let mut last_entry = None;
    let mut intact_after = 0;
    for r in &after {
        let Ok(record) = postcard::from_bytes::<LogRecord>(r.payload) else {
            continue;
        };
        intact_after += 1;
        max_term = max_term.max(record_term(&record));
        match &record {
            LogRecord::Synced { upto, .. } if *upto > offset as u64 => proven_durable = true,
            LogRecord::Entry(entry) => {
                if let EntryPayload::Normal(batch) = &entry.payload {
                    clock.observe(batch.leader_time.micros());
                }
                last_entry = Some(entry.log_id.index);
            }
            _ => {}
        }
    }
    let (damage, last_index) = if proven_durable {
        (
            Damage::Corrupt {
                offset,
                why,
                intact_after,
            },
            last_entry,
        )
    } else {
        (Damage::Torn { offset, why }, mem.last_index())
    };
    Replayed {
        mem,
        good_end,
        damage: Some(damage),
        max_term,
        last_index,
    }
}

/// The highest term a record names.
fn record_term(record: &LogRecord) -> u64 {
    match record {
        LogRecord::Entry(e) => e.log_id.leader_id.term,
        LogRecord::Purged(l) | LogRecord::Committed(l) => l.leader_id.term,
        LogRecord::Synced { term, .. } => *term,
        LogRecord::Truncate { .. } => 0,
    }
}

/// Keep a copy of damaged `path` as `<path>.corrupt` (replacing an older one) for inspection;
/// `path` itself stays until it is replaced.
fn set_aside(path: &Path) -> io::Result<PathBuf> {
    let mut name = path.as_os_str().to_owned();
    name.push(".corrupt");
    let kept = PathBuf::from(name);
    let _ = fs::remove_file(&kept);
    if fs::hard_link(path, &kept).is_err() {
        fs::copy(path, &kept)?;
    }
    sync_parent(&kept)?;
    Ok(kept)
}

/// Cut the file at `len` (after its last intact record) and make that durable.
fn cut(path: &Path, len: u64) -> io::Result<()> {
    let file = open_for_writing(path)?;
    file.set_len(len)?;
    file.sync_all()
}

fn apply_record(mem: &mut LogMem, record: LogRecord, size: u64, clock: &LeaderClock) {
    match record {
        LogRecord::Entry(entry) => {
            if let EntryPayload::Normal(batch) = &entry.payload {
                clock.observe(batch.leader_time.micros());
            }
            if mem
                .last_purged
                .is_some_and(|p| entry.log_id.index <= p.index)
            {
                return;
            }
            mem.live_bytes += size;
            if let Some((_, old)) = mem.entries.insert(entry.log_id.index, (entry, size)) {
                mem.live_bytes = mem.live_bytes.saturating_sub(old);
            }
        }
        LogRecord::Truncate { since } => {
            let removed = mem.entries.split_off(&since);
            mem.live_bytes = mem
                .live_bytes
                .saturating_sub(removed.values().map(|(_, s)| *s).sum());
        }
        LogRecord::Purged(log_id) => {
            let keep = mem.entries.split_off(&log_id.index.saturating_add(1));
            let removed = std::mem::replace(&mut mem.entries, keep);
            mem.live_bytes = mem
                .live_bytes
                .saturating_sub(removed.values().map(|(_, s)| *s).sum());
            if mem.last_purged.is_none_or(|p| p.index < log_id.index) {
                mem.last_purged = Some(log_id);
            }
        }
        LogRecord::Committed(log_id) => {
            if mem.committed.is_none_or(|c| c.index < log_id.index) {
                mem.committed = Some(log_id);
            }
        }
        LogRecord::Synced { .. } => {}
    }
}

impl LogMem {
    /// The index of the last entry held, or of the last purged one.
    fn last_index(&self) -> Option<u64> {
        self.entries
            .keys()
            .next_back()
            .copied()
            .or(self.last_purged.map(|p| p.index))
    }
}

/// Work for the writer thread, processed strictly in order.
enum WriteOp {
    /// Append bytes; `flushed` (if any) is told once they are durable per the fsync policy.
    Append {
        bytes: Vec<u8>,
        flushed: Option<LogFlushed<TypeConfig>>,
    },
    /// Replace the whole file with `bytes` (compaction).
    Rewrite { bytes: Vec<u8> },
    /// Nothing to write: the fsync policy changed (`LogHandle::set_fsync`), and the writer
    /// thread must stop waiting the old policy's way (with `always`, for queued work with no
    /// timeout, while `everysec` appends are written inline and need its timed fsync).
    Wake,
    /// fsync, then stop.
    Close {
        done: tokio::sync::oneshot::Sender<()>,
    },
}

/// The log file's writer state, behind a mutex shared by the writer thread (group commit,
/// fsyncs, rewrites) and the appending caller (inline `everysec` appends).
struct Writer {
    /// Shared so that the once-a-second fsync can run without holding the lock.
    file: Arc<File>,
    /// Where the next record goes: the end of the data.
    pos: u64,
    /// The file's length, including the space allocated ahead of `pos`.
    allocated: u64,
    /// False once `fallocate` failed (a filesystem without it): then writes extend the file.
    preallocate: bool,
    path: PathBuf,
    policy: Arc<SharedPolicy>,
    /// Callbacks waiting for the next fsync.
    waiting: Vec<LogFlushed<TypeConfig>>,
    /// Bytes written since the last fsync.
    dirty: bool,
    last_sync: Instant,
    /// Once a write fails the file's state is unknown: fail everything after it.
    broken: Option<String>,
    /// The vote's term, written into durability marks.
    vote_term: Arc<AtomicU64>,
    /// What the last durability mark covers.
    marked: u64,
    /// Where fsync durations are recorded.
    stats: Arc<RaftStats>,
    /// Shared with [`Shared::queued`]: lowered once an op is done.
    queued: Arc<AtomicUsize>,
}

impl Writer {
    fn new(
        file: File,
        data_end: u64,
        path: PathBuf,
        policy: Arc<SharedPolicy>,
        vote_term: Arc<AtomicU64>,
        stats: Arc<RaftStats>,
    ) -> Self {
        Writer {
            file: Arc::new(file),
            pos: data_end,
            allocated: data_end,
            preallocate: true,
            path,
            policy,
            waiting: Vec::new(),
            dirty: false,
            last_sync: Instant::now(),
            broken: None,
            vote_term,
            marked: data_end,
            stats,
            queued: Arc::default(),
        }
    }

    /// The writer thread: takes queued ops in order, each batch of them one group (one fsync
    /// with `always`), and with `everysec` fsyncs once a second whatever was written, queued
    /// or inline.
    fn run(writer: &Mutex<Writer>, rx: mpsc::Receiver<WriteOp>) {
        loop {
            let (policy, wait) = {
                let w = lock(writer);
                (w.policy.get(), w.everysec_wait())
            };
            let first = match policy {
                FsyncPolicy::Always => rx.recv().map_err(|_| mpsc::RecvTimeoutError::Disconnected),
                // Wake when the next fsync is due (appends may not come through here).
                FsyncPolicy::EverySec => rx.recv_timeout(wait),
            };
            let first = match first {
                Ok(op) => op,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    Writer::sync_if_due(writer);
                    continue;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    lock(writer).finish_group(true);
                    return;
                }
            };
            // Everything queued while the previous fsync ran joins this group.
            let mut ops = vec![first];
            ops.extend(rx.try_iter());
            let count = ops.len();
            let mut w = lock(writer);
            for op in ops {
                match op {
                    WriteOp::Append { bytes, flushed } => {
                        w.write(&bytes);
                        w.waiting.extend(flushed);
                    }
                    WriteOp::Wake => {}
                    WriteOp::Rewrite { bytes } => {
                        w.finish_group(true);
                        w.rewrite(&bytes);
                    }
                    WriteOp::Close { done } => {
                        w.finish_group(true);
                        let _ = done.send(());
                        return;
                    }
                }
            }
            w.finish_group(false);
            w.queued.fetch_sub(count, Ordering::AcqRel);
        }
    }

    /// With `everysec`, how long the writer thread may wait for queued work before it must
    /// look for an fsync: until the last fsync is a second old while something written is
    /// not yet fsynced (at least 10 ms); a whole second when everything written is durable
    /// (or the file is broken). Bytes written inline during that second are fsynced when it
    /// ends, within a second of their write, since the last fsync is older than the wait.
    /// Before, a clean file whose last fsync was over a second old was looked at every
    /// 10 ms: an idle durable node's writer thread woke 100 times a second
    /// (`bench/idle_wakeups.sh`).
    fn everysec_wait(&self) -> Duration {
        if !self.dirty || self.broken.is_some() {
            return Duration::from_secs(1);
        }
        (self.last_sync + Duration::from_secs(1))
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(10))
    }

    /// With `everysec`, fsync what was written if the last fsync is a second old. The fsync
    /// runs outside the lock, so inline appends are not held up by the disk meanwhile.
    fn sync_if_due(writer: &Mutex<Writer>) {
        let (file, upto) = {
            let mut w = lock(writer);
            if !w.dirty
                || w.broken.is_some()
                || w.policy.get() == FsyncPolicy::Always
                || w.last_sync.elapsed() < Duration::from_secs(1)
            {
                return;
            }
            // Bytes written from here on make it dirty again.
            w.dirty = false;
            (w.file.clone(), w.pos)
        };
        let started = Instant::now();
        let result = file.sync_data();
        let mut w = lock(writer);
        w.stats.fsync.record(started.elapsed());
        match result {
            Ok(()) => {
                w.last_sync = Instant::now();
                w.mark_durable(upto);
            }
            Err(e) => w.broken = Some(format!("fsync {}: {e}", w.path.display())),
        }
    }

    fn write(&mut self, bytes: &[u8]) {
        if self.broken.is_some() || bytes.is_empty() {
            return;
        }
        let end = self.pos + bytes.len() as u64;
        if end > self.allocated && self.preallocate {
            self.allocate(end + PREALLOCATE_BYTES);
        }
        match self.file.write_all_at(bytes, self.pos) {
            Ok(()) => {
                self.dirty = true;
                self.pos = end;
                self.allocated = self.allocated.max(end);
            }
            Err(e) => self.broken = Some(format!("write {}: {e}", self.path.display())),
        }
    }

    /// Extend the file to `len` bytes of allocated, zero-reading space. The new length is
    /// made durable by the group's fsync, together with the records written into it.
    fn allocate(&mut self, len: u64) {
        match allocate(&self.file, self.allocated, len - self.allocated) {
            Ok(()) => self.allocated = len,
            Err(e) => {
                tracing::info!(
                    file = %self.path.display(),
                    error = %e,
                    "cannot allocate the raft log ahead of its records; appending instead"
                );
                self.preallocate = false;
            }
        }
    }

    /// Make the group durable as the policy requires and tell openraft.
    fn finish_group(&mut self, force_sync: bool) {
        let must_sync = match self.policy.get() {
            FsyncPolicy::Always => !self.waiting.is_empty() || force_sync,
            FsyncPolicy::EverySec => {
                force_sync || self.last_sync.elapsed() >= Duration::from_secs(1)
            }
        };
        let mut synced = false;
        if self.dirty && must_sync && self.broken.is_none() {
            let started = Instant::now();
            let result = self.file.sync_data();
            self.stats.fsync.record(started.elapsed());
            match result {
                Ok(()) => {
                    self.dirty = false;
                    self.last_sync = Instant::now();
                    synced = true;
                }
                Err(e) => self.broken = Some(format!("fsync {}: {e}", self.path.display())),
            }
        }
        for cb in self.waiting.drain(..) {
            match &self.broken {
                None => cb.log_io_completed(Ok(())),
                Some(why) => cb.log_io_completed(Err(io::Error::other(why.clone()))),
            }
        }
        if synced {
            self.mark_durable(self.pos);
        }
    }

    /// Append a durability mark for everything written so far (just fsynced). It is not
    /// fsynced itself (that would double the fsyncs): the next group's fsync makes it durable,
    /// and a crash before that only loses the mark, which makes damage in the last group
    /// read as a torn tail, as it did before marks existed.
    fn mark_durable(&mut self, upto: u64) {
        if self.broken.is_some() || upto <= self.marked {
            return;
        }
        let record = LogRecordRef::Synced {
            upto,
            term: self.vote_term.load(Ordering::Acquire),
        };
        let Ok(payload) = encode(&record) else { return };
        let mut bytes = Vec::with_capacity(payload.len() + 8);
        encode_record(&payload, &mut bytes);
        let dirty = self.dirty;
        self.write(&bytes);
        // The mark alone is no reason for an fsync.
        self.dirty = dirty;
        self.marked = upto;
    }

    fn rewrite(&mut self, bytes: &[u8]) {
        if self.broken.is_some() {
            return;
        }
        let result = write_atomic(&self.path, bytes).and_then(|_| open_for_writing(&self.path));
        match result {
            Ok(file) => {
                self.file = Arc::new(file);
                self.pos = bytes.len() as u64;
                self.allocated = self.pos;
                self.dirty = false;
                self.marked = 0;
                tracing::debug!(file = %self.path.display(), bytes = bytes.len(), "raft log compacted");
                self.mark_durable(self.pos);
            }
            Err(e) => self.broken = Some(format!("compact {}: {e}", self.path.display())),
        }
    }
}

/// Lock the writer's state (a panic while it was held leaves the state as it was).
fn lock(writer: &Mutex<Writer>) -> std::sync::MutexGuard<'_, Writer> {
    writer.lock().unwrap_or_else(|e| e.into_inner())
}

/// The log file, created if missing, opened for positioned writes (never truncated or
/// appended to: the writer keeps the position).
fn open_for_writing(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(false)
        .open(path)
}

/// Allocate `len` bytes of `file` from `offset` (extending its length), so later writes there
/// change no file size.
#[cfg(target_os = "linux")]
fn allocate(file: &File, offset: u64, len: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let too_big = |_| io::Error::other("offset out of range");
    let offset = libc::off_t::try_from(offset).map_err(too_big)?;
    let len = libc::off_t::try_from(len).map_err(too_big)?;
    // SAFETY: fallocate only reads its integer arguments; the descriptor is open and owned
    // by `file` for the whole call.
    let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, offset, len) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Without `fallocate`, records are appended (the file grows with each write).
#[cfg(not(target_os = "linux"))]
fn allocate(_file: &File, _offset: u64, _len: u64) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "fallocate is Linux-only",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::{CommittedLeaderId, EntryPayload};

    fn log_id(term: u64, index: u64) -> LogId {
        LogId::new(CommittedLeaderId::new(term, 1), index)
    }

    fn entry(index: u64) -> Entry {
        Entry {
            log_id: log_id(1, index),
            payload: EntryPayload::Blank,
        }
    }

    fn framed(record: &LogRecordRef<'_>) -> Vec<u8> {
        let mut out = Vec::new();
        encode_record(&encode(record).unwrap(), &mut out);
        out
    }

    fn record(index: u64) -> Vec<u8> {
        framed(&LogRecordRef::Entry(&entry(index)))
    }

    fn indexes(mem: &LogMem) -> Vec<u64> {
        mem.entries.keys().copied().collect()
    }

    fn writer_at(path: &Path, data_end: u64) -> Writer {
        let file = open_for_writing(path).unwrap();
        let term = Arc::new(AtomicU64::new(1));
        Writer::new(
            file,
            data_end,
            path.to_path_buf(),
            Arc::new(SharedPolicy::new(FsyncPolicy::Always)),
            term,
            Arc::default(),
        )
    }

    fn replay_file(path: &Path) -> Replayed {
        replay(&fs::read(path).unwrap(), &LeaderClock::new())
    }

    /// Open the store under `dir` (its log in `dir/log`), with no snapshot.
    fn open_store(dir: &Path, snapshot_last: Option<LogId>) -> (LogStore, Arc<Repair>) {
        let repair = Arc::new(Repair::open(&dir.join("repair")).unwrap());
        let clock = Arc::new(LeaderClock::new());
        let store = LogStore::open(
            &dir.join("log"),
            FsyncPolicy::Always,
            1 << 20,
            clock,
            repair.clone(),
            snapshot_last,
            Arc::default(),
        )
        .unwrap();
        (store, repair)
    }

    /// Write each group of entries, fsynced (and so marked) after each; returns the offset
    /// where each entry's record starts, and where the data ends.
    fn write_groups(path: &Path, groups: &[&[u64]]) -> (BTreeMap<u64, u64>, u64) {
        let mut writer = writer_at(path, 0);
        let mut starts = BTreeMap::new();
        for group in groups {
            for &i in *group {
                starts.insert(i, writer.pos);
                writer.write(&record(i));
            }
            writer.finish_group(true);
        }
        assert!(writer.broken.is_none(), "{:?}", writer.broken);
        (starts, writer.pos)
    }

    #[test]
    fn writer_allocates_ahead_and_marks_what_each_fsync_made_durable() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log").join(LOG_FILE);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        let mut writer = writer_at(&path, 0);
        let mut written = 0;
        for i in 1..=3 {
            let bytes = record(i);
            writer.write(&bytes);
            written += bytes.len() as u64;
        }
        // The first write allocated the space the next two went into.
        let first = record(1).len() as u64;
        writer.finish_group(true);
        assert!(writer.broken.is_none(), "{:?}", writer.broken);
        let mark = framed(&LogRecordRef::Synced {
            upto: written,
            term: 1,
        });
        assert_eq!(writer.pos, written + mark.len() as u64);
        let len = fs::metadata(&path).unwrap().len();
        if writer.preallocate {
            assert_eq!(len, first + PREALLOCATE_BYTES);
        } else {
            assert_eq!(len, writer.pos);
        }
        let end = writer.pos;
        drop(writer);
        let bytes = fs::read(&path).unwrap();
        assert_eq!(&bytes[written as usize..end as usize], &mark[..]);

        let replayed = replay_file(&path);
        assert_eq!(indexes(&replayed.mem), vec![1, 2, 3]);
        assert_eq!(replayed.damage, None);
        assert_eq!(replayed.mem.file_bytes, end);
        // The allocated tail is cut on open; the writer allocates again from the data's end.
        let (store, repair) = open_store(dir.path(), None);
        assert!(!repair.is_active());
        assert_eq!(indexes(&store.mem_read()), vec![1, 2, 3]);
        assert_eq!(fs::metadata(&path).unwrap().len(), end);
    }

    #[test]
    fn everysec_sync_runs_outside_the_lock_and_marks_only_what_it_covered() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOG_FILE);
        let mut w = writer_at(&path, 0);
        w.policy.set(FsyncPolicy::EverySec);
        w.write(&record(1));
        let covered = w.pos;
        let writer = Mutex::new(w);
        // Not due yet: nothing happens.
        Writer::sync_if_due(&writer);
        assert!(lock(&writer).dirty);
        assert_eq!(lock(&writer).marked, 0);
        lock(&writer).last_sync = Instant::now() - Duration::from_secs(2);
        Writer::sync_if_due(&writer);
        let w = writer.into_inner().unwrap();
        assert!(w.broken.is_none(), "{:?}", w.broken);
        assert!(!w.dirty, "the mark alone leaves nothing to fsync");
        assert_eq!(w.marked, covered);
        let mark = framed(&LogRecordRef::Synced {
            upto: covered,
            term: 1,
        });
        assert_eq!(w.pos, covered + mark.len() as u64);
        drop(w);
        let replayed = replay_file(&path);
        assert_eq!(indexes(&replayed.mem), vec![1]);
        assert_eq!(replayed.damage, None);
    }

    #[test]
    fn everysec_waits_a_second_when_clean_and_until_the_fsync_is_due_when_dirty() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = writer_at(&dir.path().join(LOG_FILE), 0);
        w.policy.set(FsyncPolicy::EverySec);
        // Clean, with the last fsync long ago: a whole second, not 10 ms.
        w.last_sync = Instant::now() - Duration::from_secs(5);
        assert_eq!(w.everysec_wait(), Duration::from_secs(1));
        // Dirty and overdue: look again soon.
        w.write(&record(1));
        assert_eq!(w.everysec_wait(), Duration::from_millis(10));
        // Dirty, fsynced just now: until that fsync is a second old.
        w.last_sync = Instant::now();
        let wait = w.everysec_wait();
        assert!(wait <= Duration::from_secs(1) && wait >= Duration::from_millis(10));
        // Broken: nothing can be fsynced, no reason to look every 10 ms.
        w.last_sync = Instant::now() - Duration::from_secs(5);
        w.broken = Some("test".into());
        assert_eq!(w.everysec_wait(), Duration::from_secs(1));
    }

    #[tokio::test]
    async fn lazy_records_wait_for_the_next_write_and_are_written_on_close() {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, _) = open_store(dir.path(), None);
        let committed = log_id(1, 5);
        store.save_committed(Some(committed)).await.unwrap();
        assert_eq!(store.read_committed().await.unwrap(), Some(committed));
        // Nothing went to the writer thread yet: no wake-up, no write.
        assert!(!store.mem_read().lazy.is_empty());
        store.handle().close().await;
        let replayed = replay_file(&dir.path().join("log").join(LOG_FILE));
        assert_eq!(replayed.mem.committed, Some(committed));
    }

    #[test]
    fn stale_records_behind_zeros_are_cut_on_open() {
        // A crash mid-group can leave a later page of a write on disk without an earlier
        // one. The record behind the zeros was never made durable (no mark covers it): a torn
        // tail, dropped, or a record written after restart could be followed by it on the
        // next replay.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log").join(LOG_FILE);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        let mut bytes = record(1);
        let good = bytes.len() as u64;
        bytes.extend_from_slice(&[0; 64]);
        bytes.extend_from_slice(&record(3));
        bytes.extend_from_slice(&[0; 100]);
        fs::write(&path, &bytes).unwrap();
        assert_eq!(
            replay_file(&path).damage,
            Some(Damage::Torn {
                offset: good as usize,
                why: "zeroed bytes"
            })
        );

        let (store, repair) = open_store(dir.path(), None);
        drop(store);
        assert!(!repair.is_active());
        assert_eq!(fs::metadata(&path).unwrap().len(), good);
        assert_eq!(indexes(&replay_file(&path).mem), vec![1]);

        // A record written next lands right after the first one, with nothing stale after it.
        let mut writer = writer_at(&path, good);
        writer.write(&record(2));
        writer.finish_group(true);
        drop(writer);
        assert_eq!(indexes(&replay_file(&path).mem), vec![1, 2]);
    }

    #[test]
    fn a_bad_record_in_the_middle_is_corruption_and_one_at_the_end_a_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOG_FILE);
        let (starts, data_end) = write_groups(&path, &[&[1, 2], &[3, 4], &[5, 6]]);
        let clean = fs::read(&path).unwrap();
        let flip = |at: u64| {
            let mut bytes = clean.clone();
            bytes[at as usize] ^= 0x04;
            bytes
        };
        // A flipped byte in the middle, with records after it that were written once it was
        // durable: corruption. The log is kept up to the last good record.
        let replayed = replay(&flip(starts[&3] + 10), &LeaderClock::new());
        assert!(
            matches!(replayed.damage, Some(Damage::Corrupt { offset, why: "record checksum mismatch", .. }) if offset as u64 == starts[&3]),
            "{:?}",
            replayed.damage
        );
        assert_eq!(indexes(&replayed.mem), vec![1, 2]);
        assert_eq!(replayed.last_index, Some(6));
        // A damaged length field too.
        let replayed = replay(&flip(starts[&4] + 1), &LeaderClock::new());
        assert!(matches!(replayed.damage, Some(Damage::Corrupt { .. })));
        assert_eq!(indexes(&replayed.mem), vec![1, 2, 3]);
        // The last fsynced group is covered by the mark written after its fsync.
        let replayed = replay(&flip(starts[&6] + 10), &LeaderClock::new());
        assert!(matches!(replayed.damage, Some(Damage::Corrupt { .. })));
        // Without that mark (a crash right after the fsync), damage there reads as torn.
        let end_of_6 = (starts[&6] as usize) + record(6).len();
        let mut unmarked = flip(starts[&6] + 10);
        unmarked.truncate(end_of_6);
        let replayed = replay(&unmarked, &LeaderClock::new());
        assert!(matches!(replayed.damage, Some(Damage::Torn { .. })));
        assert_eq!(indexes(&replayed.mem), vec![1, 2, 3, 4, 5]);

        // A group written but never fsynced (no mark after it), cut short: a torn tail.
        let mut writer = writer_at(&path, data_end);
        writer.write(&record(7));
        writer.write(&record(8));
        drop(writer);
        let mut torn = fs::read(&path).unwrap();
        let end = data_end as usize + record(7).len() + record(8).len() - 3;
        torn.truncate(end);
        let replayed = replay(&torn, &LeaderClock::new());
        assert!(
            matches!(
                replayed.damage,
                Some(Damage::Torn {
                    why: "truncated record payload",
                    ..
                })
            ),
            "{:?}",
            replayed.damage
        );
        assert_eq!(indexes(&replayed.mem), vec![1, 2, 3, 4, 5, 6, 7]);
        // ... and so is a flipped byte in it, even with intact records after it.
        let mut flipped = fs::read(&path).unwrap();
        flipped[data_end as usize + 10] ^= 0x04;
        let replayed = replay(&flipped, &LeaderClock::new());
        assert!(matches!(replayed.damage, Some(Damage::Torn { .. })));
        assert_eq!(indexes(&replayed.mem), vec![1, 2, 3, 4, 5, 6]);
    }

    #[tokio::test]
    async fn a_corrupt_log_is_kept_up_to_the_damage_and_the_node_repairs() {
        let dir = tempfile::tempdir().unwrap();
        let log_dir = dir.path().join("log");
        fs::create_dir_all(&log_dir).unwrap();
        let path = log_dir.join(LOG_FILE);
        let (starts, _) = write_groups(&path, &[&[1, 2], &[3, 4], &[5, 6]]);
        let mut bytes = fs::read(&path).unwrap();
        bytes[starts[&4] as usize + 10] ^= 0x80;
        fs::write(&path, &bytes).unwrap();

        let (store, repair) = open_store(dir.path(), None);
        assert!(repair.is_active());
        let status = repair.status().unwrap();
        assert_eq!(status.reasons, vec![RepairReason::LogCorruption]);
        assert_eq!((status.term_floor, status.index_floor), (1, Some(6)));
        assert_eq!(indexes(&store.mem_read()), vec![1, 2, 3]);
        store.handle().close().await;
        drop(store);
        // The damaged file is kept aside; the log is the good prefix; a restart still repairs.
        let mut kept = path.clone().into_os_string();
        kept.push(".corrupt");
        assert_eq!(fs::read(&kept).unwrap(), bytes);
        assert_eq!(fs::metadata(&path).unwrap().len(), starts[&4]);
        let (mut store, repair) = open_store(dir.path(), None);
        assert!(repair.is_active());
        assert_eq!(indexes(&store.mem_read()), vec![1, 2, 3]);
        // Committing up to the last index the damaged log held ends the repair.
        store.save_committed(Some(log_id(1, 5))).await.unwrap();
        assert!(repair.is_active());
        store.save_committed(Some(log_id(1, 6))).await.unwrap();
        assert!(!repair.is_active());
        store.handle().close().await;
        drop(store);
        let (_store, repair) = open_store(dir.path(), None);
        assert!(!repair.is_active());
    }

    #[tokio::test]
    async fn a_restarted_node_forgets_only_its_own_won_vote() {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, _) = open_store(dir.path(), None);
        store.save_vote(&Vote::new_committed(4, 2)).await.unwrap();
        store.handle().close().await;
        drop(store);

        // Node 3 keeps its committed vote for node 2: it names its leader at once.
        let (mut store, _) = open_store(dir.path(), None);
        store.forget_own_leadership(3);
        assert_eq!(
            store.read_vote().await.unwrap(),
            Some(Vote::new_committed(4, 2))
        );
        store.handle().close().await;
        drop(store);
        // Node 2 had won term 4: it comes back as a node that voted for itself in term 4.
        let (mut store, _) = open_store(dir.path(), None);
        store.forget_own_leadership(2);
        assert_eq!(store.read_vote().await.unwrap(), Some(Vote::new(4, 2)));
        store.handle().close().await;
    }

    #[tokio::test]
    async fn one_damaged_vote_copy_is_survived_two_make_the_node_repair() {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, _) = open_store(dir.path(), None);
        let vote = Vote::new_committed(4, 2);
        store.save_vote(&vote).await.unwrap();
        store.handle().close().await;
        drop(store);
        let path = dir.path().join("log").join(VOTE_FILE);
        let bytes = fs::read(&path).unwrap();

        let mut one = bytes.clone();
        one[10] ^= 0x01;
        fs::write(&path, &one).unwrap();
        let (mut store, repair) = open_store(dir.path(), None);
        assert!(!repair.is_active());
        assert_eq!(store.read_vote().await.unwrap(), Some(vote));
        assert_eq!(fs::read(&path).unwrap(), bytes, "the file is whole again");
        store.handle().close().await;
        drop(store);

        let mut both = bytes.clone();
        both[10] ^= 0x01;
        let last = both.len() - 1;
        both[last] ^= 0x01;
        fs::write(&path, &both).unwrap();
        let (mut store, repair) = open_store(dir.path(), None);
        let status = repair.status().expect("repairing");
        assert_eq!(status.reasons, vec![RepairReason::VoteLost]);
        assert_eq!(status.term_floor, 0);
        assert_eq!(store.read_vote().await.unwrap(), None);
        // Only a newer term ends it.
        store.save_committed(Some(log_id(1, 1))).await.unwrap();
        assert!(!repair.is_active());
    }

    #[tokio::test]
    async fn a_log_purged_past_the_loaded_snapshot_is_discarded_and_the_node_repairs() {
        let dir = tempfile::tempdir().unwrap();
        let log_dir = dir.path().join("log");
        fs::create_dir_all(&log_dir).unwrap();
        let path = log_dir.join(LOG_FILE);
        let mut bytes = framed(&LogRecordRef::Purged(&log_id(1, 5)));
        for i in 6..=8 {
            bytes.extend_from_slice(&record(i));
        }
        fs::write(&path, &bytes).unwrap();
        // A snapshot through index 5 covers the purged entries.
        let (store, repair) = open_store(dir.path(), Some(log_id(1, 5)));
        assert!(!repair.is_active());
        assert_eq!(indexes(&store.mem_read()), vec![6, 7, 8]);
        store.handle().close().await;
        drop(store);
        // Without it they are lost.
        let (store, repair) = open_store(dir.path(), None);
        let status = repair.status().expect("repairing");
        assert_eq!(status.reasons, vec![RepairReason::SnapshotGap]);
        assert_eq!(status.index_floor, Some(8));
        assert!(store.mem_read().entries.is_empty());
        assert!(store.mem_read().last_purged.is_none());
    }
}
