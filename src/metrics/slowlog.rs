//! SLOWLOG: the commands that ran longer than `slowlog-log-slower-than` microseconds
//! (-1: none, 0: every command), newest first, at most `slowlog-max-len` of them, with
//! Redis's entry shape (id, unix time, duration, at most 32 arguments of at most 128 bytes
//! each, client address, client name). Checking the threshold is one atomic load per
//! command; only a slow command takes the log's mutex and copies its arguments.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;

/// Most arguments kept per entry (Redis's SLOWLOG_ENTRY_MAX_ARGC).
const MAX_ARGC: usize = 32;
/// Most bytes kept per argument (Redis's SLOWLOG_ENTRY_MAX_STRING).
const MAX_STRING: usize = 128;

/// One logged command.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Increasing id (RESET does not restart it).
    pub id: u64,
    /// Unix seconds when it was logged.
    pub time: u64,
    /// Execution time in microseconds.
    pub duration_us: u64,
    /// The arguments, shortened as Redis does.
    pub args: Vec<Bytes>,
    /// The client's address (`ip:port`; empty for a command applied from the Raft log).
    pub addr: String,
    /// The client's name.
    pub name: String,
}

/// The slow log (see the module docs).
pub struct SlowLog {
    /// The threshold in nanoseconds (`u64::MAX`: log nothing).
    threshold_ns: AtomicU64,
    max_len: AtomicUsize,
    next_id: AtomicU64,
    entries: Mutex<VecDeque<Entry>>,
}

impl Default for SlowLog {
    fn default() -> Self {
        SlowLog {
            threshold_ns: AtomicU64::new(10_000_000),
            max_len: AtomicUsize::new(128),
            next_id: AtomicU64::new(0),
            entries: Mutex::new(VecDeque::new()),
        }
    }
}

impl SlowLog {
    /// Follow `slowlog-log-slower-than` and `slowlog-max-len`.
    pub(super) fn configure(&self, threshold_us: i64, max_len: usize) {
        let ns = u64::try_from(threshold_us).map_or(u64::MAX, |us| us.saturating_mul(1000));
        self.threshold_ns.store(ns, Ordering::Relaxed);
        self.max_len.store(max_len, Ordering::Relaxed);
        let mut e = self.entries.lock();
        e.truncate(max_len);
    }

    /// The threshold in nanoseconds (`u64::MAX`: log nothing).
    pub fn threshold_ns(&self) -> u64 {
        self.threshold_ns.load(Ordering::Relaxed)
    }

    /// Whether a command that ran for `elapsed_ns` nanoseconds is logged.
    #[inline]
    pub fn is_slow(&self, elapsed_ns: u64) -> bool {
        elapsed_ns >= self.threshold_ns.load(Ordering::Relaxed)
    }

    /// Log a command that ran for `elapsed`.
    pub fn push(&self, args: &[&[u8]], elapsed: Duration, addr: String, name: String) {
        let max = self.max_len.load(Ordering::Relaxed);
        if max == 0 {
            return;
        }
        let mut kept: Vec<Bytes> = Vec::with_capacity(args.len().min(MAX_ARGC));
        for (i, a) in args.iter().enumerate() {
            if i == MAX_ARGC - 1 && args.len() > MAX_ARGC {
                kept.push(Bytes::from(format!(
                    "... ({} more arguments)",
                    args.len() - MAX_ARGC + 1
                )));
                break;
            }
            if a.len() > MAX_STRING {
                let mut s = a[..MAX_STRING].to_vec();
                s.extend_from_slice(
                    format!("... ({} more bytes)", a.len() - MAX_STRING).as_bytes(),
                );
                kept.push(Bytes::from(s));
            } else {
                kept.push(Bytes::copy_from_slice(a));
            }
        }
        let entry = Entry {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            time: crate::server::unix_secs(),
            duration_us: u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX),
            args: kept,
            addr,
            name,
        };
        let mut e = self.entries.lock();
        e.push_front(entry);
        e.truncate(max);
    }

    /// The newest `count` entries (all with `None`).
    pub fn get(&self, count: Option<usize>) -> Vec<Entry> {
        let e = self.entries.lock();
        e.iter()
            .take(count.unwrap_or(usize::MAX))
            .cloned()
            .collect()
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.entries.lock().len()
    }

    /// Whether the log is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// SLOWLOG RESET.
    pub fn reset(&self) {
        self.entries.lock().clear();
    }
}
