//! Persistence as Redis users see it: `SAVE`, `BGSAVE`, `BGREWRITEAOF`, `LASTSAVE`,
//! `SHUTDOWN [SAVE]`, the `save` points, and INFO's `# Persistence` section.
//!
//! A node either keeps its data in memory only (no data directory: nothing is written to disk,
//! and each of these commands that would save answers an error saying so), or keeps every
//! write in its Raft log before acknowledging it (a durable single node, or a cluster node).
//! There the Raft log plays the AOF and a Raft snapshot the RDB file: `SAVE` and `BGSAVE` write
//! a snapshot, `BGREWRITEAOF` writes one and then purges the log behind it and rewrites the log
//! file with what follows, `LASTSAVE` is the time of the newest snapshot, and the `save` points
//! trigger snapshots as in Redis. The log already holds every acknowledged write, so a snapshot
//! only shortens the replay at start: nothing is lost without one.
//!
//! A durable single node's cluster secret, when none is given, lives in its data directory
//! (`cluster-secret`), created at its first start, so that nodes can be added to it later.

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use super::Shared;
use crate::command::args::is;
use crate::engine::{cluster_error_reply, ClusterNode};
use crate::protocol::Reply;

/// The answer to SAVE, BGSAVE, BGREWRITEAOF and SHUTDOWN SAVE on a node that keeps its data in
/// memory only.
pub const NOTHING_TO_SAVE: &str = "ERR nothing to save to: this node keeps its data in memory only (it was started without a data directory, so it writes no snapshot or log). SHUTDOWN or SHUTDOWN NOSAVE stops it; for durable storage start it with --data-dir <dir>";

/// How long SAVE (and SHUTDOWN SAVE) waits for its snapshot.
const SAVE_TIMEOUT: Duration = Duration::from_secs(600);

/// The BGREWRITEAOF jobs of this process.
#[derive(Debug)]
pub struct Rewrites {
    /// Unix ms when the running (or scheduled) rewrite was asked for; 0 when none is.
    started_ms: AtomicU64,
    /// The rewrite waits for a snapshot that was being written when it was asked for (Redis's
    /// `aof_rewrite_scheduled`); it starts once that one is on disk.
    scheduled: AtomicBool,
    /// How long the last rewrite took, ms; `u64::MAX` when none ran.
    last_ms: AtomicU64,
    /// Rewrites completed.
    count: AtomicU64,
    /// Whether the last rewrite succeeded.
    last_ok: AtomicBool,
}

impl Default for Rewrites {
    fn default() -> Self {
        Rewrites {
            started_ms: AtomicU64::new(0),
            scheduled: AtomicBool::new(false),
            last_ms: AtomicU64::new(u64::MAX),
            count: AtomicU64::new(0),
            last_ok: AtomicBool::new(true),
        }
    }
}

impl Rewrites {
    /// A rewrite is running (not merely scheduled behind a snapshot): the snapshot being
    /// written, if any, is its own (Redis's AOF child).
    fn running(&self) -> bool {
        self.started_ms.load(Ordering::Acquire) != 0 && !self.scheduled.load(Ordering::Acquire)
    }
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// LASTSAVE: the Unix time of the newest snapshot on disk; 0 when there is none (always on a
/// node that keeps its data in memory only).
pub fn lastsave(shared: &Shared) -> Reply {
    let secs = shared
        .engine
        .cluster()
        .and_then(|n| n.snapshot_info().last_done_ms)
        .map_or(0, |ms| ms / 1000);
    Reply::Integer(secs as i64)
}

/// SAVE and BGSAVE [SCHEDULE].
pub async fn save(shared: &Arc<Shared>, name: &str, a: &[Bytes]) -> Reply {
    if a.len() > 2 || a.get(1).is_some_and(|arg| !is(arg, "schedule")) {
        return Reply::err("ERR syntax error");
    }
    let Some(node) = shared.engine.cluster().cloned() else {
        return Reply::err(NOTHING_TO_SAVE);
    };
    // Redis's answers. A snapshot being written that is not a rewrite's is Redis's RDB child:
    // SAVE and BGSAVE (even with SCHEDULE) answer an error. A running rewrite is Redis's AOF
    // child: SAVE proceeds (it waits for the rewrite's snapshot, then writes its own),
    // BGSAVE is refused, and BGSAVE SCHEDULE queues its snapshot behind the rewrite's.
    let rewriting = shared.rewrites.running();
    if node.snapshot_info().building_since_ms.is_some() && !rewriting {
        return Reply::err("ERR Background save already in progress");
    }
    if name == "save" {
        return match node.save_snapshot(SAVE_TIMEOUT).await {
            Ok(_) => Reply::ok(),
            Err(e) => cluster_error_reply(&e),
        };
    }
    if rewriting && a.len() == 1 {
        return Reply::err("ERR Another child process is active (AOF?): can't BGSAVE right now. Use BGSAVE SCHEDULE in order to schedule a BGSAVE whenever possible.");
    }
    let after_rewrite = rewriting.then(|| shared.clone());
    spawn_snapshot(node, after_rewrite);
    if rewriting {
        Reply::Status("Background saving scheduled".into())
    } else {
        Reply::Status("Background saving started".into())
    }
}

/// BGSAVE or BGREWRITEAOF queued in a transaction, run once EXEC has applied it: Redis
/// schedules both inside EXEC and answers "... scheduled" (an error only when one of the same
/// kind is already running, or, here, when there is nothing to save to).
pub async fn schedule_in_exec(shared: &Arc<Shared>, a: &[Bytes]) -> Reply {
    let (reply, scheduled) = if is(&a[0], "bgsave") {
        // SCHEDULE: behind a running rewrite the snapshot waits for it instead of failing.
        let with_schedule = [a[0].clone(), Bytes::from_static(b"SCHEDULE")];
        let args: &[Bytes] = if a.len() == 1 { &with_schedule } else { a };
        (
            save(shared, "bgsave", args).await,
            "Background saving scheduled",
        )
    } else {
        (
            bgrewriteaof(shared),
            "Background append only file rewriting scheduled",
        )
    };
    match reply {
        Reply::Status(_) => Reply::Status(scheduled.into()),
        error => error,
    }
}

/// Write a snapshot in the background, once the running rewrite is done when `after_rewrite`
/// is given (a scheduled BGSAVE then holds what was applied by that time, as in Redis); a
/// failure is logged (a failed snapshot write stops the node anyway, see `main`).
fn spawn_snapshot(node: ClusterNode, after_rewrite: Option<Arc<Shared>>) {
    tokio::spawn(async move {
        if let Some(shared) = after_rewrite {
            wait_until(|| !shared.rewrites.running()).await;
        }
        if let Err(e) = node.save_snapshot(SAVE_TIMEOUT).await {
            tracing::warn!(error = %e, "background snapshot failed");
        }
    });
}

/// BGREWRITEAOF: a snapshot, then the log purged behind it and its file rewritten.
pub fn bgrewriteaof(shared: &Arc<Shared>) -> Reply {
    let Some(node) = shared.engine.cluster().cloned() else {
        return Reply::err(NOTHING_TO_SAVE);
    };
    let started = unix_ms();
    let rewrites = &shared.rewrites;
    if rewrites
        .started_ms
        .compare_exchange(0, started, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        // As Redis: asking again while one is scheduled behind a snapshot just says so.
        if rewrites.scheduled.load(Ordering::Acquire) {
            return Reply::Status("Background append only file rewriting scheduled".into());
        }
        return Reply::err("ERR Background append only file rewriting already in progress");
    }
    // Behind a snapshot being written the rewrite is scheduled, as Redis schedules a rewrite
    // behind a running BGSAVE: it starts once that snapshot is on disk.
    let scheduled = node.snapshot_info().building_since_ms.is_some();
    rewrites.scheduled.store(scheduled, Ordering::Release);
    let shared = shared.clone();
    tokio::spawn(async move {
        if scheduled {
            wait_until(|| node.snapshot_info().building_since_ms.is_none()).await;
            shared.rewrites.scheduled.store(false, Ordering::Release);
        }
        let result = node.rewrite_log(SAVE_TIMEOUT).await;
        let r = &shared.rewrites;
        r.last_ok.store(result.is_ok(), Ordering::Release);
        r.last_ms
            .store(unix_ms().saturating_sub(started), Ordering::Release);
        r.count.fetch_add(1, Ordering::AcqRel);
        r.started_ms.store(0, Ordering::Release);
        match result {
            Ok(()) => tracing::info!(
                bytes = node.log_file_bytes(),
                "log rewritten (BGREWRITEAOF): snapshot written, log purged behind it"
            ),
            Err(e) => tracing::warn!(error = %e, "BGREWRITEAOF failed"),
        }
    });
    Reply::Status(
        match scheduled {
            true => "Background append only file rewriting scheduled",
            false => "Background append only file rewriting started",
        }
        .into(),
    )
}

/// Wait (up to `SAVE_TIMEOUT`) until `done` holds.
async fn wait_until(done: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + SAVE_TIMEOUT;
    while !done() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Before SHUTDOWN stops a durable node: with SAVE, or by default while `save` points are set
/// (as Redis does), write a snapshot first. An error means the node keeps running.
pub async fn before_shutdown(shared: &Shared, save: Option<bool>) -> Result<(), Reply> {
    let Some(node) = shared.engine.cluster() else {
        return match save {
            Some(true) => Err(Reply::err(NOTHING_TO_SAVE)),
            _ => Ok(()),
        };
    };
    let wanted = save.unwrap_or_else(|| !shared.config.read().save.is_empty());
    if !wanted {
        return Ok(());
    }
    match node.save_snapshot(SAVE_TIMEOUT).await {
        Ok(_) => Ok(()),
        Err(e) => {
            tracing::warn!(error = %e, "SHUTDOWN: the snapshot could not be written; not stopping");
            Err(Reply::err("ERR Errors trying to SHUTDOWN. Check logs."))
        }
    }
}

/// After SCRIPT KILL or FUNCTION KILL on a node that is its cluster's only member: once the
/// script has stopped, write a snapshot and purge the log behind it, so that the entry holding
/// the killed script is never applied again, neither by this node at its next start nor by a
/// node added later (it gets the snapshot). Until the snapshot is on disk (normally well under
/// a second), a crash would run the script again when the log is replayed at start; SCRIPT
/// KILL then stops it again.
pub fn after_script_kill(shared: Arc<Shared>, node: ClusterNode) {
    tokio::spawn(async move {
        let control = shared.engine.script_control().clone();
        for _ in 0..10_000 {
            if control.running_for().is_none() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        match node.rewrite_log(SAVE_TIMEOUT).await {
            Ok(()) => tracing::info!("killed script's entry is behind a snapshot now"),
            Err(e) => tracing::warn!(error = %e, "snapshot after SCRIPT KILL failed"),
        }
    });
}

/// Parse `save`'s text (already checked) into `(seconds, changes)` points.
fn save_points(text: &str) -> Vec<(u64, u64)> {
    let n: Vec<u64> = text
        .split_whitespace()
        .filter_map(|p| p.trim().parse().ok())
        .collect();
    n.chunks_exact(2).map(|p| (p[0], p[1])).collect()
}

/// Redis's save points on a durable node: once a second, write a snapshot when, for some point
/// `(seconds, changes)`, at least `changes` commands were applied since the newest snapshot and
/// it is at least `seconds` old (the node's start counts as a snapshot, as in Redis).
pub async fn save_points_task(shared: Arc<Shared>, node: ClusterNode) {
    let started_ms = unix_ms();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let points = save_points(&shared.config.read().save);
        let info = node.snapshot_info();
        if points.is_empty() || info.building_since_ms.is_some() || info.changes_since_last == 0 {
            continue;
        }
        let age_s = unix_ms().saturating_sub(info.last_done_ms.unwrap_or(started_ms)) / 1000;
        let due = points
            .iter()
            .any(|&(secs, changes)| info.changes_since_last >= changes && age_s >= secs);
        if due {
            tracing::info!(
                changes = info.changes_since_last,
                seconds = age_s,
                "save point reached: writing a snapshot"
            );
            if let Err(e) = node.save_snapshot(SAVE_TIMEOUT).await {
                tracing::warn!(error = %e, "snapshot at a save point failed");
            }
        }
    }
}

/// INFO's `# Persistence` section, with Redis's field names.
pub fn info(shared: &Shared) -> String {
    let mut out = String::from("# Persistence\r\n");
    let Some(node) = shared.engine.cluster() else {
        out.push_str(concat!(
            "loading:0\r\nasync_loading:0\r\nrdb_bgsave_in_progress:0\r\n",
            "rdb_last_save_time:0\r\nrdb_last_bgsave_status:ok\r\nrdb_last_bgsave_time_sec:-1\r\n",
            "rdb_current_bgsave_time_sec:-1\r\nrdb_saves:0\r\naof_enabled:0\r\n",
            "aof_rewrite_in_progress:0\r\naof_rewrite_scheduled:0\r\naof_last_rewrite_time_sec:-1\r\n",
            "aof_current_rewrite_time_sec:-1\r\naof_last_bgrewrite_status:ok\r\naof_rewrites:0\r\n",
            "aof_last_write_status:ok\r\n",
            "tollgate_storage:memory\r\n",
            "tollgate_storage_note:no data directory; nothing is written to disk and the data is lost when the process stops\r\n\r\n",
        ));
        return out;
    };
    let now = unix_ms();
    let secs = |ms: Option<u64>| ms.map_or(-1, |ms| (ms / 1000) as i64);
    let snap = node.snapshot_info();
    let r = &shared.rewrites;
    let rewrite_scheduled = r.scheduled.load(Ordering::Acquire);
    let rewrite_started = match r.started_ms.load(Ordering::Acquire) {
        0 => None,
        _ if rewrite_scheduled => None,
        ms => Some(ms),
    };
    let rewrite_last = match r.last_ms.load(Ordering::Acquire) {
        u64::MAX => None,
        ms => Some(ms),
    };
    let data_dir = shared
        .config
        .read()
        .cluster
        .as_ref()
        .map(|c| c.data_dir.display().to_string())
        .unwrap_or_default();
    let ok = |b: bool| if b { "ok" } else { "err" };
    use std::fmt::Write as _;
    let _ = write!(
        out,
        "loading:{}\r\nasync_loading:0\r\nrdb_changes_since_last_save:{}\r\nrdb_bgsave_in_progress:{}\r\nrdb_last_save_time:{}\r\nrdb_last_bgsave_status:ok\r\nrdb_last_bgsave_time_sec:{}\r\nrdb_current_bgsave_time_sec:{}\r\nrdb_saves:{}\r\n",
        u8::from(shared.loading.load(Ordering::Acquire)),
        snap.changes_since_last,
        u8::from(snap.building_since_ms.is_some()),
        snap.last_done_ms.map_or(0, |ms| ms / 1000),
        secs(snap.last_build_ms),
        secs(snap.building_since_ms.map(|s| now.saturating_sub(s))),
        snap.builds,
    );
    let _ = write!(
        out,
        "aof_enabled:1\r\naof_rewrite_in_progress:{}\r\naof_rewrite_scheduled:{}\r\naof_last_rewrite_time_sec:{}\r\naof_current_rewrite_time_sec:{}\r\naof_last_bgrewrite_status:{}\r\naof_rewrites:{}\r\naof_last_write_status:ok\r\naof_current_size:{}\r\n",
        u8::from(rewrite_started.is_some()),
        u8::from(rewrite_scheduled),
        secs(rewrite_last),
        secs(rewrite_started.map(|s| now.saturating_sub(s))),
        ok(r.last_ok.load(Ordering::Acquire)),
        r.count.load(Ordering::Acquire),
        node.log_file_bytes(),
    );
    let _ = write!(
        out,
        "tollgate_storage:raft-log\r\ntollgate_data_dir:{data_dir}\r\ntollgate_appendfsync:{}\r\n\r\n",
        match node.fsync() {
            tollgate_raft::FsyncPolicy::EverySec => "everysec",
            tollgate_raft::FsyncPolicy::Always => "always",
        }
    );
    out
}

/// The cluster secret of a durable single node started without one: read from
/// `<data_dir>/cluster-secret`, or created there (32 random bytes as hex, mode 0600) at its
/// first start, so that nodes started later with the same secret can be added to it.
pub fn load_or_create_secret(data_dir: &Path) -> std::io::Result<String> {
    let path = data_dir.join("cluster-secret");
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let secret = text.trim().to_string();
            if secret.len() < 16 {
                return Err(std::io::Error::other(format!(
                    "{} holds fewer than 16 bytes; delete it (a new one is made) or write a longer secret",
                    path.display()
                )));
            }
            return Ok(secret);
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    std::fs::create_dir_all(data_dir)?;
    let mut random = [0u8; 32];
    std::io::Read::read_exact(&mut std::fs::File::open("/dev/urandom")?, &mut random)?;
    let secret: String = random.iter().map(|b| format!("{b:02x}")).collect();
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)?;
    file.write_all(secret.as_bytes())?;
    file.write_all(b"\n")?;
    file.sync_all()?;
    std::fs::File::open(data_dir)?.sync_all()?;
    Ok(secret)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn save_points_parse_pairs() {
        assert_eq!(
            save_points("3600 1 300 100 60 10000"),
            vec![(3600, 1), (300, 100), (60, 10000)]
        );
        assert!(save_points("").is_empty());
    }

    #[test]
    fn secret_is_created_once_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let a = load_or_create_secret(dir.path()).unwrap();
        assert_eq!(a.len(), 64);
        assert_eq!(load_or_create_secret(dir.path()).unwrap(), a);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join("cluster-secret"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        std::fs::write(dir.path().join("cluster-secret"), "short").unwrap();
        assert!(load_or_create_secret(dir.path()).is_err());
    }
}
