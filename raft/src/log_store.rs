//! The durable Raft log and vote (openraft's `RaftLogStorage`).
//!
//! Layout under `<data_dir>/log/`: `vote` (one CRC-framed record, replaced atomically and always
//! fsynced) and `raft.log` (an append-only sequence of CRC-framed records: entries, truncations,
//! purge marks and the commit index). The whole live log is also kept in memory, so reads never
//! touch the disk; purging after a snapshot keeps memory bounded, and when dead records outweigh
//! live ones the file is rewritten (temp file + rename).
//!
//! Writes go to one writer thread that does group commit: every append queued while the previous
//! fsync ran is written and made durable by a single fsync, and only then does openraft hear that
//! the entries are stored. On open, a torn or corrupt tail (short record, CRC mismatch,
//! undecodable payload) is cut off with a warning and never replayed.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, RwLock};
use std::thread;
use std::time::{Duration, Instant};

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{EntryPayload, OptionalSend, RaftLogReader, StorageIOError, Vote};
use serde::{Deserialize, Serialize};

use crate::clock::LeaderClock;
use crate::config::FsyncPolicy;
use crate::record::{encode_record, scan_records, sync_parent, write_atomic};
use crate::types::{Entry, LogId, NodeId, StorageError, TypeConfig};

const LOG_FILE: &str = "raft.log";
const VOTE_FILE: &str = "vote";

/// One record of `raft.log`, as read back.
#[derive(Deserialize)]
enum LogRecord {
    Entry(Entry),
    Truncate { since: u64 },
    Purged(LogId),
    Committed(LogId),
}

/// The same record shape, borrowed for writing (serializes to identical bytes).
#[derive(Serialize)]
enum LogRecordRef<'a> {
    Entry(&'a Entry),
    Truncate { since: u64 },
    Purged(&'a LogId),
    Committed(&'a LogId),
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
    /// Bytes in the file (live + dead).
    file_bytes: u64,
}

struct Shared {
    mem: RwLock<LogMem>,
    writer: Mutex<mpsc::Sender<WriteOp>>,
    dir: PathBuf,
    clock: Arc<LeaderClock>,
    committed_index: AtomicU64,
    /// Rewrite the file once dead bytes exceed both the live bytes and this floor.
    compact_min_bytes: u64,
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
    /// Highest index known committed (persisted lazily with the next group fsync).
    pub(crate) fn committed_index(&self) -> u64 {
        self.shared.committed_index.load(Ordering::Acquire)
    }

    /// Flush and fsync everything written so far and stop the writer thread.
    pub(crate) async fn close(&self) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        if self.shared.send(WriteOp::Close { done: tx }).is_ok() {
            let _ = tokio::time::timeout(Duration::from_secs(5), rx).await;
        }
    }
}

impl LogStore {
    /// Open (or create) the log under `dir`, replaying it and cutting off a corrupt tail.
    pub(crate) fn open(
        dir: &Path,
        policy: FsyncPolicy,
        compact_min_bytes: u64,
        clock: Arc<LeaderClock>,
    ) -> io::Result<LogStore> {
        fs::create_dir_all(dir)?;
        let vote = read_vote(&dir.join(VOTE_FILE))?;
        let log_path = dir.join(LOG_FILE);
        let _ = fs::remove_file(log_path.with_extension("tmp"));
        let mut mem = replay(&log_path, &clock)?;
        mem.vote = vote;
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)?;
        sync_parent(&log_path)?;
        let committed_index = AtomicU64::new(mem.committed.map(|c| c.index).unwrap_or(0));
        let (tx, rx) = mpsc::channel();
        thread::Builder::new()
            .name("raft-log-writer".into())
            .spawn(move || Writer::new(file, log_path, policy).run(rx))?;
        Ok(LogStore {
            shared: Arc::new(Shared {
                mem: RwLock::new(mem),
                writer: Mutex::new(tx),
                dir: dir.to_path_buf(),
                clock,
                committed_index,
                compact_min_bytes,
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
        self.shared.mem.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Queue a record that needs no fsync of its own (it rides on the next group fsync).
    fn write_lazy(&self, record: &LogRecordRef<'_>) -> io::Result<u64> {
        let mut bytes = Vec::new();
        encode_record(&encode(record)?, &mut bytes);
        let len = bytes.len() as u64;
        self.shared.send(WriteOp::Append {
            bytes,
            flushed: None,
        })?;
        Ok(len)
    }

    /// Rewrite the file with only live records when dead bytes dominate.
    fn maybe_compact(&self, mem: &mut LogMem) -> io::Result<()> {
        let dead = mem.file_bytes.saturating_sub(mem.live_bytes);
        if dead <= mem.live_bytes.max(self.shared.compact_min_bytes) {
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
        mem.file_bytes = bytes.len() as u64;
        self.shared.send(WriteOp::Rewrite { bytes })
    }
}

impl Shared {
    fn send(&self, op: WriteOp) -> Result<(), io::Error> {
        let tx = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        tx.send(op)
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "raft log writer stopped"))
    }
}

fn encode(record: &LogRecordRef<'_>) -> io::Result<Vec<u8>> {
    postcard::to_allocvec(record).map_err(io::Error::other)
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
        let mut bytes = Vec::new();
        encode_record(
            &postcard::to_allocvec(vote).map_err(|e| StorageIOError::write_vote(&e))?,
            &mut bytes,
        );
        let path = self.shared.dir.join(VOTE_FILE);
        tokio::task::spawn_blocking(move || write_atomic(&path, &bytes))
            .await
            .map_err(|e| StorageIOError::write_vote(&e))?
            .map_err(|e| StorageIOError::write_vote(&e))?;
        self.mem_write().vote = Some(*vote);
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, StorageError> {
        Ok(self.mem_read().vote)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        let Some(c) = committed else { return Ok(()) };
        let len = self
            .write_lazy(&LogRecordRef::Committed(&c))
            .map_err(write_error)?;
        let mut mem = self.mem_write();
        mem.committed = Some(c);
        mem.file_bytes += len;
        self.shared
            .committed_index
            .fetch_max(c.index, Ordering::AcqRel);
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
        let mut bytes = Vec::new();
        let mut mem = self.mem_write();
        for entry in entries {
            if let EntryPayload::Normal(batch) = &entry.payload {
                self.shared.clock.observe(batch.leader_time_ms);
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
        mem.file_bytes += bytes.len() as u64;
        drop(mem);
        self.shared
            .send(WriteOp::Append {
                bytes,
                flushed: Some(callback),
            })
            .map_err(|e| StorageIOError::write_logs(&e).into())
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let len = self
            .write_lazy(&LogRecordRef::Truncate {
                since: log_id.index,
            })
            .map_err(write_error)?;
        let mut mem = self.mem_write();
        let removed = mem.entries.split_off(&log_id.index);
        let removed_bytes: u64 = removed.values().map(|(_, s)| *s).sum();
        mem.live_bytes = mem.live_bytes.saturating_sub(removed_bytes);
        mem.file_bytes += len;
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let len = self
            .write_lazy(&LogRecordRef::Purged(&log_id))
            .map_err(write_error)?;
        let mut mem = self.mem_write();
        let keep = mem.entries.split_off(&log_id.index.saturating_add(1));
        let removed = std::mem::replace(&mut mem.entries, keep);
        let removed_bytes: u64 = removed.values().map(|(_, s)| *s).sum();
        mem.live_bytes = mem.live_bytes.saturating_sub(removed_bytes);
        mem.file_bytes += len;
        mem.last_purged = Some(log_id);
        self.maybe_compact(&mut mem).map_err(write_error)
    }
}

/// Read the vote file; a missing file means "never voted", a corrupt one is an error (it is
/// only ever replaced atomically, so corruption means the disk lies and guessing is unsafe).
fn read_vote(path: &Path) -> io::Result<Option<Vote<NodeId>>> {
    let _ = fs::remove_file(path.with_extension("tmp"));
    let bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let scan = scan_records(&bytes);
    let invalid = |why: String| io::Error::new(io::ErrorKind::InvalidData, why);
    match (scan.records.first(), scan.bad_tail) {
        (Some((payload, _)), None) => postcard::from_bytes(payload)
            .map(Some)
            .map_err(|e| invalid(format!("vote file {}: {e}", path.display()))),
        _ => Err(invalid(format!("vote file {} is corrupt", path.display()))),
    }
}

/// Rebuild the in-memory log from `path`, truncating the file at the first bad record.
fn replay(path: &Path, clock: &LeaderClock) -> io::Result<LogMem> {
    let mut mem = LogMem::default();
    let bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(mem),
        Err(e) => return Err(e),
    };
    let scan = scan_records(&bytes);
    let mut good_end = 0usize;
    let mut bad_tail = scan.bad_tail;
    for (payload, end) in scan.records {
        let record: LogRecord = match postcard::from_bytes(payload) {
            Ok(r) => r,
            Err(_) => {
                bad_tail = Some((good_end, "undecodable record"));
                break;
            }
        };
        let size = (end - good_end) as u64;
        good_end = end;
        apply_record(&mut mem, record, size, clock);
    }
    mem.file_bytes = good_end as u64;
    if let Some((offset, why)) = bad_tail {
        tracing::warn!(
            file = %path.display(),
            offset,
            dropped_bytes = bytes.len() - offset,
            reason = why,
            "raft log has a torn or corrupt tail; truncating it"
        );
        let file = OpenOptions::new().write(true).open(path)?;
        file.set_len(offset as u64)?;
        file.sync_all()?;
    }
    Ok(mem)
}

fn apply_record(mem: &mut LogMem, record: LogRecord, size: u64, clock: &LeaderClock) {
    match record {
        LogRecord::Entry(entry) => {
            if let EntryPayload::Normal(batch) = &entry.payload {
                clock.observe(batch.leader_time_ms);
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
    /// fsync, then stop.
    Close {
        done: tokio::sync::oneshot::Sender<()>,
    },
}

/// The group-commit writer: owns the log file.
struct Writer {
    file: File,
    path: PathBuf,
    policy: FsyncPolicy,
    /// Callbacks waiting for the next fsync.
    waiting: Vec<LogFlushed<TypeConfig>>,
    /// Bytes written since the last fsync.
    dirty: bool,
    last_sync: Instant,
    /// Once a write fails the file's state is unknown: fail everything after it.
    broken: Option<String>,
}

impl Writer {
    fn new(file: File, path: PathBuf, policy: FsyncPolicy) -> Self {
        Writer {
            file,
            path,
            policy,
            waiting: Vec::new(),
            dirty: false,
            last_sync: Instant::now(),
            broken: None,
        }
    }

    fn run(mut self, rx: mpsc::Receiver<WriteOp>) {
        loop {
            let first = match self.policy {
                FsyncPolicy::Always => rx.recv().map_err(|_| mpsc::RecvTimeoutError::Disconnected),
                FsyncPolicy::EverySec => rx.recv_timeout(Duration::from_secs(1)),
            };
            let first = match first {
                Ok(op) => op,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    self.finish_group(false);
                    continue;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    self.finish_group(true);
                    return;
                }
            };
            // Everything queued while the previous fsync ran joins this group.
            let mut ops = vec![first];
            ops.extend(rx.try_iter());
            for op in ops {
                match op {
                    WriteOp::Append { bytes, flushed } => {
                        self.write(&bytes);
                        self.waiting.extend(flushed);
                    }
                    WriteOp::Rewrite { bytes } => {
                        self.finish_group(true);
                        self.rewrite(&bytes);
                    }
                    WriteOp::Close { done } => {
                        self.finish_group(true);
                        let _ = done.send(());
                        return;
                    }
                }
            }
            self.finish_group(false);
        }
    }

    fn write(&mut self, bytes: &[u8]) {
        if self.broken.is_some() || bytes.is_empty() {
            return;
        }
        match self.file.write_all(bytes) {
            Ok(()) => self.dirty = true,
            Err(e) => self.broken = Some(format!("write {}: {e}", self.path.display())),
        }
    }

    /// Make the group durable as the policy requires and tell openraft.
    fn finish_group(&mut self, force_sync: bool) {
        let must_sync = match self.policy {
            FsyncPolicy::Always => !self.waiting.is_empty() || force_sync,
            FsyncPolicy::EverySec => {
                force_sync || self.last_sync.elapsed() >= Duration::from_secs(1)
            }
        };
        if self.dirty && must_sync && self.broken.is_none() {
            match self.file.sync_data() {
                Ok(()) => {
                    self.dirty = false;
                    self.last_sync = Instant::now();
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
    }

    fn rewrite(&mut self, bytes: &[u8]) {
        if self.broken.is_some() {
            return;
        }
        let result = write_atomic(&self.path, bytes)
            .and_then(|_| OpenOptions::new().append(true).open(&self.path));
        match result {
            Ok(file) => {
                self.file = file;
                self.dirty = false;
                tracing::debug!(file = %self.path.display(), bytes = bytes.len(), "raft log compacted");
            }
            Err(e) => self.broken = Some(format!("compact {}: {e}", self.path.display())),
        }
    }
}
