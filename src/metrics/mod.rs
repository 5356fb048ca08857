//! What the server counts about the commands it runs, for INFO (commandstats,
//! latencystats, errorstats, stats) and for `/metrics` ([`export`]): calls, failures and an
//! execution-time histogram per command of the table and, for the commands Redis has
//! subcommands for (`flags::SUBCOMMANDS`), per subcommand (`config|get`, as Redis 7.0
//! names them), error replies by code, limiter
//! decisions per command, outcome and key prefix, and the bytes read and written.
//!
//! Recording sits on the hot path (every command of every batch), so it is a few relaxed
//! atomic adds into arrays sized at start: no lock and no allocation, except the first
//! call of a command (its histogram is allocated then) and the first decision on a new
//! key prefix (its name is stored once). Error codes are the exception: an error reply
//! takes a mutex to count its code (errors are rare; a denied limiter decision is not an
//! error). The histograms are `tollgate_raft::stats::Histogram` (lock-free;
//! `prometheus-client`'s takes a mutex per observation); `prometheus-client` writes the
//! exposition text ([`export`]).
//!
//! In a cluster every node counts what it executes, and it executes every replicated
//! entry: the counters of any one node cover the whole cluster's writes (as Redis
//! replicas count the commands their master sends them).

pub mod clock;
pub mod export;
pub mod latency;
pub mod slowlog;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use parking_lot::Mutex;
use tollgate_raft::stats::Histogram;

use crate::command::{self, CommandSpec};

/// Most distinct error codes counted (Redis's errorstats keeps 128).
const MAX_ERROR_CODES: usize = 128;

/// Most key prefixes with a label of their own (`--metrics-key-prefixes`).
pub const MAX_PREFIXES: usize = 128;

/// One command's counters (its calls are its histogram's count).
#[derive(Default)]
pub struct CommandStats {
    /// Calls that ran and answered an error (Redis's `failed_calls`).
    pub failed: AtomicU64,
    /// Calls refused before running (arity, OOM, NOAUTH, ...: Redis's `rejected_calls`).
    pub rejected: AtomicU64,
    /// Execution times; allocated on the first call.
    time: OnceLock<Box<Histogram>>,
    /// Calls made while `latency-tracking` was off, in the off spells that ended.
    untracked: AtomicU64,
    /// Calls counted when `latency-tracking` was last turned off.
    off_since: AtomicU64,
}

impl CommandStats {
    /// The execution-time histogram, if the command ran.
    pub fn time(&self) -> Option<&Histogram> {
        self.time.get().map(|h| &**h)
    }

    /// Calls executed.
    pub fn calls(&self) -> u64 {
        self.time().map_or(0, Histogram::count)
    }

    /// Count one call that ran `elapsed_ns`; `failed` when it answered an error.
    #[inline]
    pub fn record(&self, elapsed_ns: u64, failed: bool) {
        if failed {
            self.failed.fetch_add(1, Ordering::Relaxed);
        }
        let hist = match self.time.get() {
            Some(h) => h,
            None => self.time.get_or_init(Default::default),
        };
        hist.record_ns(elapsed_ns);
    }
}

/// The limiter commands whose decisions are counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decider {
    /// `LIMIT.<ALGO>` of a rate rule, by the algorithm's state tag (0x81..=0x86).
    Rule(u8),
    /// `LIMIT.ALL`.
    All,
    /// `LIMIT.ACQUIRE`.
    Acquire,
    /// `CL.THROTTLE`.
    Throttle,
}

/// The label values of [`Decider`], by index.
pub const DECIDERS: [&str; 9] = [
    "limit.fixed",
    "limit.sliding",
    "limit.log",
    "limit.token",
    "limit.leaky",
    "limit.gcra",
    "limit.all",
    "limit.acquire",
    "cl.throttle",
];

impl Decider {
    fn index(self) -> usize {
        match self {
            Decider::Rule(tag) => usize::from(tag.saturating_sub(0x81)).min(5),
            Decider::All => 6,
            Decider::Acquire => 7,
            Decider::Throttle => 8,
        }
    }
}

/// Counters per decider, prefix slot and kind: allowed, denied, units.
const CELLS: usize = 3;
/// Prefix slots: `(none)`, the registered prefixes, `other`.
const SLOTS: usize = MAX_PREFIXES + 2;

/// Entries of [`Decisions`]' cache of short prefixes (a power of two).
const CACHED: usize = 256;

/// Limiter decisions by command, outcome and key prefix.
pub struct Decisions {
    /// How many prefixes get their own label (0: no prefix label).
    limit: AtomicUsize,
    /// The registered prefixes, slot `i + 1` for `prefixes[i]`.
    prefixes: Box<[OnceLock<Box<[u8]>>]>,
    cells: Box<[AtomicU64]>,
    /// A cache of the slot of each prefix of at most 6 bytes:
    /// each entry is one word, the prefix packed with its length ([`packed_prefix`]) in
    /// the low 56 bits and its slot in the top 8 (0: empty), written once. A key whose
    /// prefix is there costs a load and a compare instead of the hashed search.
    cached: Box<[AtomicU64]>,
}

impl Default for Decisions {
    fn default() -> Self {
        Decisions {
            limit: AtomicUsize::new(16),
            prefixes: (0..MAX_PREFIXES).map(|_| OnceLock::new()).collect(),
            cells: (0..DECIDERS.len() * SLOTS * CELLS)
                .map(|_| AtomicU64::new(0))
                .collect(),
            cached: (0..CACHED).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

/// A key's prefix packed with its length, when the key has a `:` among its first 7 bytes:
/// the prefix's bytes (little-endian, at most 6) with `length + 1` in bits 48..51. None
/// otherwise.
#[inline]
fn packed_prefix(key: &[u8]) -> Option<u64> {
    let word = match key.get(..8) {
        Some(first) => u64::from_le_bytes(first.try_into().ok()?),
        // A shorter key (`t:1234`), padded with zero bytes, which are not `:`.
        None => short_word(key),
    };
    // The bytes equal to `:` become 0; the lowest zero byte's high bit is set exactly.
    let x = word ^ 0x3a3a_3a3a_3a3a_3a3a;
    let zeros = x.wrapping_sub(0x0101_0101_0101_0101) & !x & 0x8080_8080_8080_8080;
    let len = u64::from(zeros.trailing_zeros() / 8);
    if len > 6 {
        return None;
    }
    let prefix = word & ((1u64 << (len * 8)) - 1);
    Some(prefix | ((len + 1) << 48))
}

/// The bytes of a key shorter than 8 bytes as a little-endian word, zero above them: two
/// overlapping loads (their common bytes are equal), no loop.
#[inline]
fn short_word(key: &[u8]) -> u64 {
    let n = key.len();
    if let (Some(lo), Some(hi)) = (key.first_chunk::<4>(), key.last_chunk::<4>()) {
        u64::from(u32::from_le_bytes(*lo)) | (u64::from(u32::from_le_bytes(*hi)) << ((n - 4) * 8))
    } else if let (Some(lo), Some(hi)) = (key.first_chunk::<2>(), key.last_chunk::<2>()) {
        u64::from(u16::from_le_bytes(*lo)) | (u64::from(u16::from_le_bytes(*hi)) << ((n - 2) * 8))
    } else {
        key.first().map_or(0, |&b| u64::from(b))
    }
}

/// One row of [`Decisions::rows`]: command, prefix label (None: no prefix label), allowed,
/// denied, units.
pub type DecisionRow = (&'static str, Option<String>, u64, u64, u64);

impl Decisions {
    /// Give the first `n` distinct prefixes a label of their own (at most
    /// [`MAX_PREFIXES`]; 0 drops the prefix label). Set once, at start.
    pub fn set_prefix_limit(&self, n: usize) {
        self.limit.store(n.min(MAX_PREFIXES), Ordering::Relaxed);
    }

    /// The slot of `key`'s prefix: 0 without a `:`, `1 + i` for registered prefix `i`,
    /// `SLOTS - 1` for `other`.
    #[inline]
    fn slot(&self, key: &[u8]) -> usize {
        if self.limit.load(Ordering::Relaxed) == 0 {
            return 0;
        }
        let Some(packed) = packed_prefix(key) else {
            return self.slot_searched(key);
        };
        const KEY: u64 = (1 << 56) - 1;
        let cell =
            &self.cached[(packed.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as usize % CACHED];
        let entry = cell.load(Ordering::Relaxed);
        if entry & KEY == packed {
            return (entry >> 56) as usize;
        }
        let slot = self.slot_searched(key);
        // A prefix's slot never changes (prefixes are never forgotten): an entry is
        // written once, prefix and slot in one word.
        if entry == 0 {
            let _ = cell.compare_exchange(
                0,
                packed | ((slot as u64) << 56),
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
        }
        slot
    }

    /// [`Decisions::slot`] without the cache: hash the prefix and search the registered
    /// ones (registering it if there is room).
    fn slot_searched(&self, key: &[u8]) -> usize {
        let limit = self.limit.load(Ordering::Relaxed);
        if limit == 0 {
            return 0;
        }
        let mut end = 0;
        let mut hash: usize = 0;
        loop {
            match key.get(end) {
                None => return 0,
                Some(b':') => break,
                Some(&b) => hash = hash.wrapping_mul(31).wrapping_add(usize::from(b)),
            }
            end += 1;
        }
        let prefix = &key[..end.min(64)];
        let mut i = hash % limit;
        for _ in 0..limit {
            let cell = &self.prefixes[i];
            let stored = match cell.get() {
                Some(p) => p,
                None => cell.get_or_init(|| prefix.into()),
            };
            if stored.len() == prefix.len() && stored.iter().zip(prefix).all(|(a, b)| a == b) {
                return i + 1;
            }
            i = if i + 1 == limit { 0 } else { i + 1 };
        }
        SLOTS - 1
    }

    /// Count one decision of `who` on `key`: allowed (charging `units`) or denied.
    #[inline]
    pub fn record(&self, who: Decider, key: &[u8], allowed: bool, units: u64) {
        let base = (who.index() * SLOTS + self.slot(key)) * CELLS;
        if allowed {
            self.cells[base].fetch_add(1, Ordering::Relaxed);
            self.cells[base + 2].fetch_add(units, Ordering::Relaxed);
        } else {
            self.cells[base + 1].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Every counter that moved.
    pub fn rows(&self) -> Vec<DecisionRow> {
        let labelled = self.limit.load(Ordering::Relaxed) > 0;
        let mut rows = Vec::new();
        for (d, name) in DECIDERS.iter().enumerate() {
            for slot in 0..SLOTS {
                let base = (d * SLOTS + slot) * CELLS;
                let [a, n, u] = [0, 1, 2].map(|k| self.cells[base + k].load(Ordering::Relaxed));
                if a == 0 && n == 0 {
                    continue;
                }
                let prefix = labelled.then(|| match slot {
                    0 => "(none)".to_string(),
                    s if s == SLOTS - 1 => "other".to_string(),
                    s => self.prefixes[s - 1]
                        .get()
                        .map(|p| String::from_utf8_lossy(p).into_owned())
                        .unwrap_or_default(),
                });
                rows.push((*name, prefix, a, n, u));
            }
        }
        rows
    }
}

pub use clock::now_ns;

/// Everything [`Metrics`] counts, per server.
pub struct Metrics {
    /// By command identity (`acl::categories::commands`): the table's rows first (a row's
    /// id is its table index), then Redis's subcommands, which containers count under.
    commands: Box<[CommandStats]>,
    errors: Mutex<BTreeMap<String, u64>>,
    /// Limiter decisions.
    pub decisions: Decisions,
    /// Bytes read from clients.
    pub net_input: AtomicU64,
    /// Bytes written to clients.
    pub net_output: AtomicU64,
    /// `-CLUSTERDOWN` replies sent.
    pub clusterdown: AtomicU64,
    /// SLOWLOG.
    pub slowlog: slowlog::SlowLog,
    /// LATENCY.
    pub latency: latency::LatencyMonitor,
    /// `latency-tracking`: whether calls count for INFO latencystats (see
    /// [`Metrics::set_latency_tracking`]).
    latency_tracking: AtomicBool,
    /// The lower of the slow log's and the latency monitor's thresholds, in nanoseconds:
    /// the one comparison per command that decides whether either looks at it.
    watch_ns: AtomicU64,
}

impl Default for Metrics {
    fn default() -> Self {
        clock::calibrate();
        Metrics {
            commands: (0..crate::acl::categories::commands().len())
                .map(|_| CommandStats::default())
                .collect(),
            errors: Mutex::new(BTreeMap::new()),
            decisions: Decisions::default(),
            net_input: AtomicU64::new(0),
            net_output: AtomicU64::new(0),
            clusterdown: AtomicU64::new(0),
            slowlog: Default::default(),
            latency: Default::default(),
            watch_ns: AtomicU64::new(slowlog::SlowLog::default().threshold_ns()),
            latency_tracking: AtomicBool::new(true),
        }
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Metrics {
    /// Follow `latency-tracking`. Redis stops recording into a command's latency
    /// histogram while it is off; here the histogram is also the command's call count
    /// (INFO commandstats, `/metrics`), so every call is still recorded, and what the
    /// switch changes is which commands INFO latencystats lists: those with a call made
    /// while tracking was on ([`Metrics::tracked_calls`]). Their percentiles include the
    /// calls made while it was off. The calls of each off spell are counted here, at the
    /// switch, so the path of a call does not look at the setting.
    pub fn set_latency_tracking(&self, on: bool) {
        if self.latency_tracking.swap(on, Ordering::Relaxed) == on {
            return;
        }
        for s in self.commands.iter() {
            let calls = s.calls();
            if on {
                let off = calls.saturating_sub(s.off_since.load(Ordering::Relaxed));
                s.untracked.fetch_add(off, Ordering::Relaxed);
            } else {
                s.off_since.store(calls, Ordering::Relaxed);
            }
        }
    }

    /// Calls of `s` made while `latency-tracking` was on.
    pub fn tracked_calls(&self, s: &CommandStats) -> u64 {
        let calls = s.calls();
        let mut off = s.untracked.load(Ordering::Relaxed);
        if !self.latency_tracking.load(Ordering::Relaxed) {
            off += calls.saturating_sub(s.off_since.load(Ordering::Relaxed));
        }
        calls.saturating_sub(off)
    }

    /// Follow `slowlog-log-slower-than` (microseconds, negative: off) and `slowlog-max-len`.
    pub fn configure_slowlog(&self, threshold_us: i64, max_len: usize) {
        self.slowlog.configure(threshold_us, max_len);
        self.refresh_watch();
    }

    /// Follow `latency-monitor-threshold` (milliseconds, 0: off).
    pub fn configure_latency(&self, threshold_ms: u64) {
        self.latency.set_threshold(threshold_ms);
        self.refresh_watch();
    }

    fn refresh_watch(&self) {
        let ns = self.slowlog.threshold_ns().min(self.latency.threshold_ns());
        self.watch_ns.store(ns, Ordering::Relaxed);
    }

    /// Whether a command that ran `elapsed_ns` may interest the slow log or the latency
    /// monitor (then [`Metrics::note_command`] decides): one relaxed load per command.
    #[inline]
    pub fn is_notable(&self, elapsed_ns: u64) -> bool {
        elapsed_ns >= self.watch_ns.load(Ordering::Relaxed)
    }

    /// Give a command that [`Metrics::is_notable`] picked to the latency monitor (as a
    /// `command` or `fast-command` event); true when the slow log wants it too (the caller
    /// has its arguments and client).
    #[cold]
    pub fn note_command(&self, spec: &CommandSpec, elapsed_ns: u64) -> bool {
        let event = if spec.has(command::flags::FAST) {
            "fast-command"
        } else {
            "command"
        };
        self.latency.add_if_needed(event, elapsed_ns);
        self.slowlog.is_slow(elapsed_ns)
    }

    /// The counters of `spec`.
    pub fn command(&self, spec: &CommandSpec) -> &CommandStats {
        &self.commands[command::table::index(spec)]
    }

    /// The counters of a call of `spec` with `args` (name first): its subcommand's
    /// (`config|get`) when the row is a container (`SUBCOMMANDS`) and `args[1]` names one
    /// Redis has, else the row's.
    #[inline]
    pub fn command_call(&self, spec: &CommandSpec, args: &[&[u8]]) -> &CommandStats {
        if spec.has(command::flags::SUBCOMMANDS) {
            self.subcommand(spec, args)
        } else {
            self.command(spec)
        }
    }

    /// The counters of a container's call: its subcommand's (`config|get`) when `args[1]`
    /// names one Redis has, else the row's.
    #[cold]
    pub fn subcommand(&self, spec: &CommandSpec, args: &[&[u8]]) -> &CommandStats {
        &self.commands[crate::acl::categories::commands().id_of_call(spec, args)]
    }

    /// Count one call of `spec` with `args` that ran for `elapsed`; `failed` when it
    /// answered an error.
    #[inline]
    pub fn record_call(&self, spec: &CommandSpec, args: &[&[u8]], elapsed: Duration, failed: bool) {
        let ns = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        self.command_call(spec, args).record(ns, failed);
    }

    /// Count a call of `spec` refused before it ran.
    pub fn record_rejected(&self, spec: &CommandSpec) {
        self.command(spec).rejected.fetch_add(1, Ordering::Relaxed);
    }

    /// Count a call of `spec` with `args` refused before it ran, as its subcommand's
    /// (`config|get`) when it is a container's.
    pub fn record_rejected_call(&self, spec: &CommandSpec, args: &[&[u8]]) {
        self.command_call(spec, args)
            .rejected
            .fetch_add(1, Ordering::Relaxed);
    }

    /// Count an error reply by its code: the first word of `text`, or `ERR` when no space
    /// comes within Redis's 32-byte search (`afterErrorReply` searches `-CODE ...`,
    /// so the code is at most 30 bytes).
    pub fn record_error(&self, text: &str) {
        let code = match text.as_bytes().iter().take(31).position(|&b| b == b' ') {
            Some(end) => &text[..end],
            None => "ERR",
        };
        if code == "CLUSTERDOWN" {
            self.clusterdown.fetch_add(1, Ordering::Relaxed);
        }
        let mut errors = self.errors.lock();
        if let Some(n) = errors.get_mut(code) {
            *n += 1;
        } else if errors.len() < MAX_ERROR_CODES {
            errors.insert(code.to_string(), 1);
        }
    }

    /// Error counts by code.
    pub fn errors(&self) -> BTreeMap<String, u64> {
        self.errors.lock().clone()
    }

    /// Every command and subcommand that was called or rejected, by its full name
    /// (`get`, `config|get`) with its counters: the table's rows in table order, then the
    /// subcommands.
    pub fn commands(&self) -> impl Iterator<Item = (&'static str, &CommandStats)> {
        let names = &crate::acl::categories::commands().list;
        names
            .iter()
            .map(|c| c.name.as_str())
            .zip(self.commands.iter())
            .filter(|(_, s)| s.calls() > 0 || s.rejected.load(Ordering::Relaxed) > 0)
    }

    /// CONFIG RESETSTAT: what Redis resets (command and error stats).
    pub fn reset(&self) {
        for s in self.commands.iter() {
            s.failed.store(0, Ordering::Relaxed);
            s.rejected.store(0, Ordering::Relaxed);
            if let Some(h) = s.time.get() {
                h.reset();
            }
            s.untracked.store(0, Ordering::Relaxed);
            s.off_since.store(0, Ordering::Relaxed);
        }
        self.errors.lock().clear();
        self.net_input.store(0, Ordering::Relaxed);
        self.net_output.store(0, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_bounded_and_the_rest_is_other() {
        let d = Decisions::default();
        d.set_prefix_limit(2);
        d.record(Decider::Rule(0x84), b"user:1", true, 3);
        d.record(Decider::Rule(0x84), b"user:2", false, 1);
        d.record(Decider::Rule(0x84), b"ip:1", true, 1);
        d.record(Decider::Rule(0x84), b"team:1", true, 1);
        d.record(Decider::Rule(0x84), b"nocolon", true, 1);
        let rows = d.rows();
        let find = |p: &str| {
            rows.iter()
                .find(|r| r.1.as_deref() == Some(p))
                .map(|r| (r.2, r.3, r.4))
        };
        assert_eq!(find("user"), Some((1, 1, 3)));
        assert_eq!(find("ip"), Some((1, 0, 1)));
        assert_eq!(find("other"), Some((1, 0, 1)));
        assert_eq!(find("(none)"), Some((1, 0, 1)));
        assert!(rows.iter().all(|r| r.0 == "limit.token"));
    }

    #[test]
    fn cached_prefixes_count_like_searched_ones() {
        let d = Decisions::default();
        d.set_prefix_limit(2);
        // Keys long and short with a prefix of up to 6 bytes (the cache), and one of 7 (the
        // search), twice each.
        for _ in 0..2 {
            for key in [
                &b"t:000000000001"[..],
                b"t:1",
                b"abcdef:000001",
                b"abcdefg:00001",
            ] {
                d.record(Decider::Rule(0x84), key, true, 1);
            }
            d.record(Decider::Rule(0x84), b"nocolon-at-all", true, 1);
            d.record(Decider::Rule(0x84), b":leading", true, 1);
        }
        let rows = d.rows();
        let find = |p: &str| rows.iter().find(|r| r.1.as_deref() == Some(p)).map(|r| r.2);
        assert_eq!(find("t"), Some(4));
        assert_eq!(find("abcdef"), Some(2));
        // The third distinct prefix (and the fourth) is over the limit of 2.
        assert_eq!(find("other"), Some(4));
        assert_eq!(find("(none)"), Some(2));
        assert_eq!(packed_prefix(b"abcdefg:1"), None);
        assert_eq!(packed_prefix(b":0000000"), Some(1 << 48));
        // A short key packs as a long one with the same prefix does.
        let t = Some(u64::from(b't') | (2 << 48));
        assert_eq!(packed_prefix(b"t:1"), t);
        assert_eq!(packed_prefix(b"t:"), t);
        assert_eq!(packed_prefix(b"t:000000000001"), t);
        assert_eq!(packed_prefix(b":"), Some(1 << 48));
        assert_eq!(packed_prefix(b"abcdef:"), packed_prefix(b"abcdef:000001"));
        // Every length under 8 reads each byte once, in its place.
        let key = b"abcdefg";
        for n in 0..8 {
            let want = key[..n]
                .iter()
                .rev()
                .fold(0u64, |w, &b| (w << 8) | u64::from(b));
            assert_eq!(short_word(&key[..n]), want, "{n}");
        }
        // No `:` among the first 7 bytes (padding bytes are zero, never `:`).
        for key in [&b""[..], b"t", b"nocolon", b"abcdefg:"] {
            assert_eq!(packed_prefix(key), None, "{key:?}");
        }
    }

    #[test]
    fn no_prefix_label_when_disabled() {
        let d = Decisions::default();
        d.set_prefix_limit(0);
        d.record(Decider::Throttle, b"a:b", false, 0);
        assert_eq!(d.rows(), vec![("cl.throttle", None, 0, 1, 0)]);
    }
}
