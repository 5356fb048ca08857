//! The replicated state machine: the public [`StateMachine`] trait the server implements, and
//! the adapter that plugs it into openraft (`RaftStateMachine`): decoding each batch, handing
//! every command the entry's leader time, tracking the applied log id and membership, and
//! writing, loading and installing snapshot files.
//!
//! Snapshot files live in `<data_dir>/snapshots/` as `snap-<index>-<term>.snap`: one CRC-framed
//! record holding the openraft metadata and the payload (the state machine's bytes plus the time
//! floor), written to a temp file, fsynced and renamed, after which older snapshots are deleted.
//! The same payload bytes are what openraft streams to a lagging follower.
//!
//! On start the newest intact snapshot is loaded. One that fails its checksum is renamed to
//! `<name>.corrupt` (kept for inspection) and the next older one, or none, is used instead; if
//! the log was purged past what is then loaded, the log store makes the node repair (see
//! `repair`), and the leader sends it a snapshot.

use std::fmt::Debug;
use std::fs;
use std::io::{self, Cursor};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{EntryPayload, OptionalSend, RaftSnapshotBuilder, StorageIOError};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::clock::{EntryTime, LeaderClock};
use crate::record::{encode_record, scan_records, sync_dir, write_atomic};
use crate::stats::RaftStats;
use crate::types::{
    Batch, BatchOutput, CommandResult, Entry, LogId, SnapshotMeta, StorageError, StoredMembership,
    TypeConfig,
};

/// Where and when a command is applied: the same on every node that applies it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// The command's time in unix microseconds: its entry's leader time, or later when the
    /// commands applied before it reach past that (each takes
    /// [`StateMachine::span_us`] microseconds), so times never repeat or go back.
    pub time_us: u64,
    /// The entry's log index.
    pub index: u64,
    /// The command's position within its entry.
    pub position: usize,
}

/// The replicated state machine. Deterministic: `apply` depends only on (state, command, stamp).
pub trait StateMachine: Send + Sync + 'static {
    /// A write to replicate.
    type Command: Serialize + DeserializeOwned + Clone + Debug + Send + Sync + 'static;
    /// What applying a command returns to its proposer.
    type Output: Serialize + DeserializeOwned + Clone + Debug + Send + Sync + 'static;
    /// Apply one command; `at` carries the leader-stamped time of its entry and where the
    /// command sits in the log (a seed for deterministic randomness). Uses interior locking
    /// (`&self`) because the server also reads the state directly after a read barrier.
    fn apply(&self, cmd: &Self::Command, at: Stamp) -> Self::Output;
    /// How many microseconds `cmd` occupies: the next command runs at least that much later
    /// (a command made of several steps that may each read the time takes one per step, as
    /// on a server where each step runs a little after the one before). At least 1.
    fn span_us(&self, _cmd: &Self::Command) -> u64 {
        1
    }
    /// Serialize the full state for a snapshot (called with the state consistent at the applied
    /// index: no apply runs concurrently).
    fn snapshot(&self) -> Vec<u8>;
    /// How many keys the state holds (a snapshot's write waits `key_save_delay` per key,
    /// see [`RaftNode::set_key_save_delay`](crate::RaftNode::set_key_save_delay)).
    fn key_count(&self) -> u64;
    /// Replace the full state from snapshot bytes.
    fn restore(&self, data: &[u8]) -> Result<(), String>;
}

/// What has happened to this node's snapshots (shared between the state machine store, its
/// snapshot builders and [`RaftNode::snapshot_info`](crate::RaftNode::snapshot_info)).
#[derive(Default)]
pub(crate) struct SnapshotStats {
    /// Unix ms when the snapshot being built now was started; 0 when none is.
    building_since_ms: AtomicU64,
    /// Unix ms when the newest snapshot was completed (written, installed or found at
    /// start); 0 when there is none.
    last_done_ms: AtomicU64,
    /// How long building the last snapshot took, ms; `u64::MAX` when none was built here.
    last_build_ms: AtomicU64,
    /// Snapshots built by this process.
    builds: AtomicU64,
    /// Commands applied by this process (through entries; a snapshot install counts none).
    applied_commands: AtomicU64,
    /// `applied_commands` as of the state in the newest snapshot.
    saved_commands: AtomicU64,
    /// Microseconds a snapshot's write waits per key before it starts (Redis's
    /// `rdb-key-save-delay`, for tests that need a save to stay in progress); 0 = none.
    key_save_delay_us: AtomicU64,
}

/// A reading of [`SnapshotStats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotInfo {
    /// Unix ms when the snapshot being built now was started.
    pub building_since_ms: Option<u64>,
    /// Unix ms when the newest snapshot on disk was completed.
    pub last_done_ms: Option<u64>,
    /// How long building the last snapshot built by this process took, ms.
    pub last_build_ms: Option<u64>,
    /// Snapshots built by this process.
    pub builds: u64,
    /// Commands applied since the state the newest snapshot holds.
    pub changes_since_last: u64,
}

impl SnapshotStats {
    /// Set the per-key wait of snapshot writes (microseconds; 0 = none).
    pub(crate) fn set_key_save_delay_us(&self, us: u64) {
        self.key_save_delay_us.store(us, Ordering::Release);
    }

    pub(crate) fn read(&self) -> SnapshotInfo {
        let some = |v: u64| (v != 0).then_some(v);
        let applied = self.applied_commands.load(Ordering::Acquire);
        let saved = self.saved_commands.load(Ordering::Acquire);
        SnapshotInfo {
            building_since_ms: some(self.building_since_ms.load(Ordering::Acquire)),
            last_done_ms: some(self.last_done_ms.load(Ordering::Acquire)),
            last_build_ms: match self.last_build_ms.load(Ordering::Acquire) {
                u64::MAX => None,
                ms => Some(ms),
            },
            builds: self.builds.load(Ordering::Acquire),
            changes_since_last: applied.saturating_sub(saved),
        }
    }

    fn new() -> SnapshotStats {
        SnapshotStats {
            last_build_ms: AtomicU64::new(u64::MAX),
            ..SnapshotStats::default()
        }
    }
}

/// Milliseconds since the Unix epoch, by the wall clock (for reports only).
fn unix_ms(t: std::time::SystemTime) -> u64 {
    t.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// What a snapshot carries besides openraft's metadata.
#[derive(Serialize, Deserialize)]
struct SnapshotPayload {
    /// The replicated time floor at the snapshot's last entry (snapshots written before
    /// microseconds hold milliseconds here; [`EntryTime`] reads both).
    last_time: EntryTime,
    /// `StateMachine::snapshot()` bytes.
    state: Vec<u8>,
}

/// The content of a snapshot file.
#[derive(Serialize, Deserialize)]
struct SnapshotFile {
    meta: SnapshotMeta,
    /// postcard of [`SnapshotPayload`]; exactly the bytes streamed to followers.
    payload: Vec<u8>,
}

/// Same bytes as [`SnapshotFile`], borrowed for writing.
#[derive(Serialize)]
struct SnapshotFileRef<'a> {
    meta: &'a SnapshotMeta,
    payload: &'a [u8],
}

/// The newest snapshot on disk.
#[derive(Clone)]
struct CurrentSnapshot {
    meta: SnapshotMeta,
    path: PathBuf,
}

/// Snapshot files of one node.
#[derive(Clone)]
struct SnapshotDir {
    dir: PathBuf,
    current: Arc<Mutex<Option<CurrentSnapshot>>>,
}

impl SnapshotDir {
    /// Write a snapshot durably and make it current unless a newer one already is.
    fn save(&self, meta: &SnapshotMeta, payload: &[u8]) -> io::Result<()> {
        let index = meta.last_log_id.map(|l| l.index).unwrap_or(0);
        let term = meta.last_log_id.map(|l| l.leader_id.term).unwrap_or(0);
        let path = self.dir.join(format!("snap-{index:020}-{term:020}.snap"));
        let file = SnapshotFileRef { meta, payload };
        let body = postcard::to_allocvec(&file).map_err(io::Error::other)?;
        let mut bytes = Vec::with_capacity(body.len() + 8);
        encode_record(&body, &mut bytes);
        write_atomic(&path, &bytes)?;

        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        let newer = current
            .as_ref()
            .is_none_or(|c| c.meta.last_log_id <= meta.last_log_id);
        if newer {
            *current = Some(CurrentSnapshot {
                meta: meta.clone(),
                path: path.clone(),
            });
        }
        let keep = current.as_ref().map(|c| c.path.clone());
        drop(current);
        self.remove_all_but(keep.as_deref());
        Ok(())
    }

    fn remove_all_but(&self, keep: Option<&Path>) {
        let Ok(dir) = fs::read_dir(&self.dir) else {
            return;
        };
        for item in dir.flatten() {
            let path = item.path();
            let is_snap = path.extension().is_some_and(|e| e == "snap" || e == "tmp");
            if is_snap && Some(path.as_path()) != keep {
                let _ = fs::remove_file(&path);
            }
        }
        let _ = sync_dir(&self.dir);
    }

    /// The newest intact snapshot file in the directory (corrupt ones are set aside with a
    /// warning).
    fn load_latest(&self) -> io::Result<Option<(SnapshotFile, std::time::SystemTime)>> {
        let mut paths: Vec<PathBuf> = fs::read_dir(&self.dir)?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "snap"))
            .collect();
        paths.sort();
        while let Some(path) = paths.pop() {
            match read_snapshot_file(&path) {
                Ok(file) => {
                    let done = fs::metadata(&path)?.modified()?;
                    *self.current.lock().unwrap_or_else(|e| e.into_inner()) =
                        Some(CurrentSnapshot {
                            meta: file.meta.clone(),
                            path,
                        });
                    return Ok(Some((file, done)));
                }
                Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                    let mut kept = path.clone().into_os_string();
                    kept.push(".corrupt");
                    fs::rename(&path, &kept)?;
                    sync_dir(&self.dir)?;
                    tracing::error!(
                        file = %path.display(),
                        kept = ?kept,
                        "snapshot file is corrupt; set it aside and falling back to an older one (or none)"
                    );
                }
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    }

    fn load_current(&self) -> io::Result<Option<SnapshotFile>> {
        let current = self
            .current
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        match current {
            None => Ok(None),
            Some(c) => read_snapshot_file(&c.path).map(Some),
        }
    }
}

/// Read a snapshot file: `InvalidData` when its checksum fails (or it is cut short).
fn read_snapshot_file(path: &Path) -> io::Result<SnapshotFile> {
    let bytes = fs::read(path)?;
    let scan = scan_records(&bytes, false);
    match (scan.records.first(), scan.bad) {
        (Some(record), None) => postcard::from_bytes(record.payload).map_err(io::Error::other),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "corrupt snapshot file",
        )),
    }
}

/// openraft's view of the application state machine.
pub(crate) struct StateMachineStore<S: StateMachine> {
    sm: Arc<S>,
    applied: Option<LogId>,
    membership: StoredMembership,
    /// Replicated time floor, in µs: the first microsecond after the last command applied
    /// (part of the replicated state, so clamping with it is deterministic).
    last_time_us: u64,
    clock: Arc<LeaderClock>,
    snapshots: SnapshotDir,
    stats: Arc<SnapshotStats>,
    /// Entries and commands applied, snapshots built (for /metrics).
    raft_stats: Arc<RaftStats>,
}

impl<S: StateMachine> StateMachineStore<S> {
    /// Load the newest snapshot under `dir` (if any) into `sm` and start from it.
    pub(crate) fn open(sm: Arc<S>, dir: &Path, clock: Arc<LeaderClock>) -> io::Result<Self> {
        fs::create_dir_all(dir)?;
        let snapshots = SnapshotDir {
            dir: dir.to_path_buf(),
            current: Arc::new(Mutex::new(None)),
        };
        let mut store = StateMachineStore {
            sm,
            applied: None,
            membership: StoredMembership::default(),
            last_time_us: 0,
            clock,
            snapshots,
            stats: Arc::new(SnapshotStats::new()),
            raft_stats: Arc::default(),
        };
        if let Some((file, done)) = store.snapshots.load_latest()? {
            store
                .stats
                .last_done_ms
                .store(unix_ms(done), Ordering::Release);
            store
                .restore_from(&file.meta, &file.payload)
                .map_err(io::Error::other)?;
            tracing::info!(snapshot = %file.meta, "restored state machine from snapshot");
        }
        Ok(store)
    }

    /// What has happened to this node's snapshots.
    pub(crate) fn stats(&self) -> Arc<SnapshotStats> {
        self.stats.clone()
    }

    /// Count this store's work in `stats`.
    pub(crate) fn set_stats(&mut self, stats: Arc<RaftStats>) {
        self.raft_stats = stats;
    }

    /// The last log id the loaded state covers (that of the snapshot restored at open).
    pub(crate) fn applied(&self) -> Option<LogId> {
        self.applied
    }

    fn restore_from(&mut self, meta: &SnapshotMeta, payload: &[u8]) -> Result<(), String> {
        let payload: SnapshotPayload = postcard::from_bytes(payload).map_err(|e| e.to_string())?;
        self.sm.restore(&payload.state)?;
        self.applied = meta.last_log_id;
        self.membership = meta.last_membership.clone();
        self.last_time_us = payload.last_time.micros();
        self.clock.observe(self.last_time_us);
        Ok(())
    }

    fn apply_batch(&mut self, index: u64, batch: &Batch) -> BatchOutput {
        let commands = &batch.commands;
        RaftStats::add(&self.raft_stats.commands_applied, commands.len() as u64);
        let mut results = Vec::with_capacity(commands.len());
        match batch.local.per_command::<S::Command, S::Output>() {
            // Proposed here: the typed commands (see `local`).
            Some(local) => {
                // (A command past the runs, which the batcher never makes, goes by its bytes.)
                let local = local.chain(std::iter::repeat(None));
                let mut all_typed = true;
                for (position, (bytes, local)) in commands.iter().zip(local).enumerate() {
                    let applied = local.is_some_and(|(unit, i)| {
                        unit.apply_with(i, |cmd| {
                            self.apply_typed(cmd, batch.leader_time, index, position)
                        })
                    });
                    all_typed &= applied;
                    results.push(match applied {
                        // The output went to the proposer; an empty result stands for it.
                        true => Ok(Vec::new()),
                        false => self.apply_one(bytes, batch.leader_time, index, position),
                    });
                }
                if let (true, Some(applied)) = (all_typed, &batch.local.applied) {
                    applied.notify_one();
                }
            }
            None => {
                for (position, bytes) in commands.iter().enumerate() {
                    results.push(self.apply_one(bytes, batch.leader_time, index, position));
                }
            }
        }
        self.stats
            .applied_commands
            .fetch_add(commands.len() as u64, Ordering::AcqRel);
        self.clock.observe(self.last_time_us);
        BatchOutput { results }
    }

    /// Decode and apply one command, and encode its output.
    fn apply_one(
        &mut self,
        bytes: &[u8],
        leader_time: EntryTime,
        index: u64,
        position: usize,
    ) -> CommandResult {
        let cmd: S::Command =
            postcard::from_bytes(bytes).map_err(|e| format!("decode command: {e}"))?;
        let out = self.apply_typed(&cmd, leader_time, index, position);
        crate::types::encode(&out).map_err(|e| format!("encode output: {e}"))
    }

    /// Apply one command at its time: the entry's, or later when the commands before it
    /// reach past that.
    fn apply_typed(
        &mut self,
        cmd: &S::Command,
        leader_time: EntryTime,
        index: u64,
        position: usize,
    ) -> S::Output {
        let time_us = leader_time.micros().max(self.last_time_us);
        self.last_time_us = time_us.saturating_add(self.sm.span_us(cmd).max(1));
        let at = Stamp {
            time_us,
            index,
            position,
        };
        self.sm.apply(cmd, at)
    }
}

/// Builds a snapshot file from state captured when the builder was made.
pub(crate) struct SnapshotBuilder {
    meta: SnapshotMeta,
    payload: Result<Vec<u8>, String>,
    snapshots: SnapshotDir,
    stats: Arc<SnapshotStats>,
    raft_stats: Arc<RaftStats>,
    /// `applied_commands` as of the captured state.
    commands: u64,
    /// Keys in the captured state (for `key_save_delay_us`).
    keys: u64,
}

impl SnapshotBuilder {
    /// Wait `key_save_delay_us` per key, re-reading the delay so that setting it to 0 ends
    /// the wait at once (as Redis's `rdb-key-save-delay` slows each key's save).
    async fn key_save_delay(&self) {
        let started = std::time::Instant::now();
        loop {
            let per_key = self.stats.key_save_delay_us.load(Ordering::Acquire);
            let total = std::time::Duration::from_micros(per_key.saturating_mul(self.keys));
            let left = total.saturating_sub(started.elapsed());
            if left.is_zero() {
                return;
            }
            tokio::time::sleep(left.min(std::time::Duration::from_millis(10))).await;
        }
    }

    /// Record the end of this build (the file written, or not).
    fn finished(&self, ok: bool) {
        let now = unix_ms(std::time::SystemTime::now());
        let started = self.stats.building_since_ms.swap(0, Ordering::AcqRel);
        if ok {
            self.stats
                .last_build_ms
                .store(now.saturating_sub(started), Ordering::Release);
            self.stats.last_done_ms.store(now, Ordering::Release);
            self.stats.builds.fetch_add(1, Ordering::AcqRel);
            self.stats
                .saved_commands
                .fetch_max(self.commands, Ordering::AcqRel);
        }
    }
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError> {
        let snapshots = self.snapshots.clone();
        let meta = self.meta.clone();
        let signature = meta.signature();
        self.key_save_delay().await;
        let payload = self.payload.clone().map_err(|e| {
            self.finished(false);
            StorageIOError::write_snapshot(Some(signature.clone()), &io::Error::other(e))
        })?;
        let saved =
            tokio::task::spawn_blocking(move || snapshots.save(&meta, &payload).map(|()| payload))
                .await
                .map_err(io::Error::other)
                .and_then(|r| r);
        self.finished(saved.is_ok());
        let payload = saved.map_err(|e| StorageIOError::write_snapshot(Some(signature), &e))?;
        tracing::info!(snapshot = %self.meta, bytes = payload.len(), "snapshot written");
        RaftStats::add(&self.raft_stats.snapshots, 1);
        Ok(Snapshot {
            meta: self.meta.clone(),
            snapshot: Box::new(Cursor::new(payload)),
        })
    }
}

impl<S: StateMachine> RaftStateMachine<TypeConfig> for StateMachineStore<S> {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        Ok((self.applied, self.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<BatchOutput>, StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut outputs = Vec::new();
        for entry in entries {
            self.applied = Some(entry.log_id);
            RaftStats::add(&self.raft_stats.entries_applied, 1);
            let output = match &entry.payload {
                EntryPayload::Blank => BatchOutput::default(),
                EntryPayload::Normal(batch) => self.apply_batch(entry.log_id.index, batch),
                EntryPayload::Membership(m) => {
                    self.membership = StoredMembership::new(Some(entry.log_id), m.clone());
                    BatchOutput::default()
                }
            };
            outputs.push(output);
        }
        Ok(outputs)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.stats
            .building_since_ms
            .store(unix_ms(std::time::SystemTime::now()), Ordering::Release);
        // Capture the state here: openraft runs `build_snapshot` concurrently with later applies.
        let payload = SnapshotPayload {
            last_time: EntryTime(self.last_time_us),
            state: self.sm.snapshot(),
        };
        let index = self.applied.map(|l| l.index).unwrap_or(0);
        let term = self.applied.map(|l| l.leader_id.term).unwrap_or(0);
        SnapshotBuilder {
            meta: SnapshotMeta {
                last_log_id: self.applied,
                last_membership: self.membership.clone(),
                snapshot_id: format!("{index}-{term}"),
            },
            payload: postcard::to_allocvec(&payload).map_err(|e| e.to_string()),
            snapshots: self.snapshots.clone(),
            stats: self.stats.clone(),
            raft_stats: self.raft_stats.clone(),
            commands: self.stats.applied_commands.load(Ordering::Acquire),
            keys: self.sm.key_count(),
        }
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        let payload = snapshot.into_inner();
        self.restore_from(meta, &payload).map_err(|e| {
            StorageIOError::read_snapshot(Some(meta.signature()), &io::Error::other(e))
        })?;
        let snapshots = self.snapshots.clone();
        let owned_meta = meta.clone();
        tokio::task::spawn_blocking(move || snapshots.save(&owned_meta, &payload))
            .await
            .map_err(|e| StorageIOError::write_snapshot(Some(meta.signature()), &e))?
            .map_err(|e| StorageIOError::write_snapshot(Some(meta.signature()), &e))?;
        self.stats
            .last_done_ms
            .store(unix_ms(std::time::SystemTime::now()), Ordering::Release);
        let applied = self.stats.applied_commands.load(Ordering::Acquire);
        self.stats.saved_commands.store(applied, Ordering::Release);
        tracing::info!(snapshot = %meta, "installed snapshot from leader");
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError> {
        let snapshots = self.snapshots.clone();
        let file = tokio::task::spawn_blocking(move || snapshots.load_current())
            .await
            .map_err(|e| StorageIOError::read_snapshot(None, &e))?
            .map_err(|e| StorageIOError::read_snapshot(None, &e))?;
        Ok(file.map(|f| Snapshot {
            meta: f.meta,
            snapshot: Box::new(Cursor::new(f.payload)),
        }))
    }
}
