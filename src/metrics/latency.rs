//! The latency monitor (Redis's `LATENCY` command): for each event class, the last 160
//! seconds in which the class took at least `latency-monitor-threshold` milliseconds (one
//! sample per second, the worst of that second) and the worst time ever seen, plus the
//! report of `LATENCY DOCTOR` and the ASCII graph of `LATENCY GRAPH`. A threshold of 0
//! (the default, as in Redis) records nothing.
//!
//! The classes recorded are Redis's that apply here: `command` and `fast-command` (a
//! command of the table that ran that long, by its `FAST` flag), `expire-cycle` (one
//! active expiry cycle) and `eviction-cycle` (one eviction pass that freed memory). The
//! Raft log's fsync is not an `aof-fsync-always` event: it has its own histogram on
//! `/metrics` (`tollgate_raft_fsync_seconds`), and it runs on the Raft thread, not on a
//! client's path. Checking whether a command is recorded costs nothing extra on the hot
//! path: the engine compares each command's time with one atomic threshold, the lower of
//! this one and the slow log's ([`super::Metrics::is_notable`]).

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

/// Samples kept per event class (Redis's LATENCY_TS_LEN).
const SAMPLES: usize = 160;

/// Columns of `LATENCY GRAPH` (Redis's LATENCY_GRAPH_COLS).
const GRAPH_COLS: usize = 80;

/// One second's worst latency of a class.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct Sample {
    /// Unix seconds (0: an empty slot).
    pub time: u64,
    /// Milliseconds.
    pub latency: u64,
}

/// One event class's samples.
#[derive(Clone, Debug)]
pub struct Series {
    /// The next slot written.
    idx: usize,
    /// The worst latency ever recorded, in milliseconds.
    pub max: u64,
    samples: [Sample; SAMPLES],
}

impl Series {
    fn new() -> Self {
        Series {
            idx: 0,
            max: 0,
            samples: [Sample::default(); SAMPLES],
        }
    }

    fn add(&mut self, now: u64, latency: u64) {
        self.max = self.max.max(latency);
        let prev = (self.idx + SAMPLES - 1) % SAMPLES;
        if self.samples[prev].time == now {
            let s = &mut self.samples[prev];
            s.latency = s.latency.max(latency);
            return;
        }
        self.samples[self.idx] = Sample { time: now, latency };
        self.idx = (self.idx + 1) % SAMPLES;
    }

    /// The samples held, oldest first.
    pub fn samples(&self) -> Vec<Sample> {
        (0..SAMPLES)
            .map(|j| self.samples[(self.idx + j) % SAMPLES])
            .filter(|s| s.time != 0)
            .collect()
    }

    /// The newest sample.
    pub fn latest(&self) -> Sample {
        self.samples[(self.idx + SAMPLES - 1) % SAMPLES]
    }
}

/// The latency monitor (see the module docs).
pub struct LatencyMonitor {
    /// `latency-monitor-threshold` in milliseconds (0: off).
    threshold_ms: AtomicU64,
    /// The classes in the order they were first recorded.
    events: Mutex<Vec<(&'static str, Series)>>,
}

impl Default for LatencyMonitor {
    fn default() -> Self {
        LatencyMonitor {
            threshold_ms: AtomicU64::new(0),
            events: Mutex::new(Vec::new()),
        }
    }
}

impl LatencyMonitor {
    /// Follow `latency-monitor-threshold` (milliseconds, 0: off).
    pub(super) fn set_threshold(&self, ms: u64) {
        self.threshold_ms.store(ms, Ordering::Relaxed);
    }

    /// `latency-monitor-threshold`.
    pub fn threshold_ms(&self) -> u64 {
        self.threshold_ms.load(Ordering::Relaxed)
    }

    /// The threshold in nanoseconds (`u64::MAX` when off).
    pub(super) fn threshold_ns(&self) -> u64 {
        match self.threshold_ms() {
            0 => u64::MAX,
            ms => ms.saturating_mul(1_000_000),
        }
    }

    /// Record that `event` took `elapsed_ns`, if that reaches the threshold (Redis's
    /// `latencyAddSampleIfNeeded`: milliseconds, rounded down).
    pub fn add_if_needed(&self, event: &'static str, elapsed_ns: u64) {
        let threshold = self.threshold_ms();
        let ms = elapsed_ns / 1_000_000;
        if threshold == 0 || ms < threshold {
            return;
        }
        self.add(event, crate::server::unix_secs(), ms);
    }

    fn add(&self, event: &'static str, now: u64, ms: u64) {
        let mut events = self.events.lock();
        match events.iter_mut().find(|(e, _)| *e == event) {
            Some((_, s)) => s.add(now, ms),
            None => {
                let mut s = Series::new();
                s.add(now, ms);
                events.push((event, s));
            }
        }
    }

    /// Every class recorded, with its samples.
    pub fn events(&self) -> Vec<(&'static str, Series)> {
        self.events.lock().clone()
    }

    /// One class (compared case-sensitively, as Redis's dictionary lookup is).
    pub fn event(&self, name: &[u8]) -> Option<(&'static str, Series)> {
        self.events
            .lock()
            .iter()
            .find(|(e, _)| e.as_bytes() == name)
            .cloned()
    }

    /// LATENCY RESET: forget `event` (any case) or, with `None`, every class; returns how
    /// many classes were forgotten.
    pub fn reset(&self, event: Option<&[u8]>) -> usize {
        let mut events = self.events.lock();
        let before = events.len();
        events.retain(|(e, _)| event.is_some_and(|name| !e.as_bytes().eq_ignore_ascii_case(name)));
        before - events.len()
    }

    /// LATENCY GRAPH's text for one class at unix time `now` (Redis's layout: a title
    /// line, a rule of 80 dashes, then a sparkline four rows high with each sample's age
    /// written vertically below it).
    pub fn graph(event: &str, series: &Series, now: u64) -> String {
        let samples = series.samples();
        let min = samples.iter().map(|s| s.latency).min().unwrap_or(0);
        let max = samples.iter().map(|s| s.latency).max().unwrap_or(0);
        let mut out = format!(
            "{event} - high {max} ms, low {min} ms (all time high {} ms)\n",
            series.max
        );
        out.push_str(&"-".repeat(GRAPH_COLS));
        out.push('\n');
        let labels: Vec<String> = samples
            .iter()
            .map(|s| {
                let ago = now.saturating_sub(s.time);
                match ago {
                    a if a < 60 => format!("{a}s"),
                    a if a < 3600 => format!("{}m", a / 60),
                    a if a < 86_400 => format!("{}h", a / 3600),
                    a => format!("{}d", a / 86_400),
                }
            })
            .collect();
        let values: Vec<u64> = samples.iter().map(|s| s.latency).collect();
        let mut from = 0;
        while from < values.len() {
            let to = (from + GRAPH_COLS).min(values.len());
            if from != 0 {
                out.push('\n');
            }
            out.push_str(&sparkline(
                &values[from..to],
                &labels[from..to],
                min,
                max,
                4,
            ));
            from = to;
        }
        out
    }
}

/// Redis's sparkline (`sparklineRenderRange` with `SPARKLINE_FILL`, the same steps): `rows`
/// rows, each column one sample scaled between the lowest and highest (`_`, `o`, `#` at
/// its top by a third of a row, `|` below), an empty line, then each sample's label
/// written vertically, one character per line.
fn sparkline(values: &[u64], labels: &[String], min: u64, max: u64, rows: usize) -> String {
    const FILL: &[u8] = b"_o#";
    let steps = (FILL.len() * rows) as f64;
    let relmax = match max.saturating_sub(min) {
        0 => 1.0,
        d => d as f64,
    };
    let step_of = |v: u64| {
        let relval = v.saturating_sub(min) as f64;
        let step = ((relval * steps) as i64) as f64 / relmax;
        (step as usize).min(FILL.len() * rows - 1)
    };
    let mut out = String::new();
    for row in 0..rows {
        for &v in values {
            let idx = step_of(v) as i64 - ((rows - row - 1) * FILL.len()) as i64;
            out.push(match idx {
                i if i < 0 => ' ',
                i if (i as usize) < FILL.len() => FILL[i as usize] as char,
                _ => '|',
            });
        }
        out.push('\n');
    }
    out.push_str(&" ".repeat(values.len()));
    out.push('\n');
    let longest = labels.iter().map(String::len).max().unwrap_or(0);
    for i in 0..longest {
        for l in labels {
            out.push(l.as_bytes().get(i).map_or(' ', |&b| b as char));
        }
        out.push('\n');
    }
    out
}

/// The statistics of one class that `LATENCY DOCTOR` prints.
struct Stats {
    samples: u64,
    avg: u64,
    mad: u64,
    period: u64,
}

fn analyze(series: &Series, now: u64) -> Stats {
    let samples = series.samples();
    let n = samples.len() as u64;
    if n == 0 {
        return Stats {
            samples: 0,
            avg: 0,
            mad: 0,
            period: 0,
        };
    }
    let avg = samples.iter().map(|s| s.latency).sum::<u64>() / n;
    let oldest = samples.iter().map(|s| s.time).min().unwrap_or(now);
    let period = now.saturating_sub(oldest).max(1);
    let mad = samples.iter().map(|s| s.latency.abs_diff(avg)).sum::<u64>() / n;
    Stats {
        samples: n,
        avg,
        mad,
        period,
    }
}

/// The settings `LATENCY DOCTOR`'s advice depends on.
pub struct DoctorContext {
    /// `latency-monitor-threshold`.
    pub threshold_ms: u64,
    /// `slowlog-log-slower-than` (microseconds, negative: off).
    pub slowlog_us: i64,
}

/// LATENCY DOCTOR's report, in Redis's words, for the classes this server records.
pub fn doctor(events: &[(&'static str, Series)], ctx: &DoctorContext, now: u64) -> String {
    if events.is_empty() && ctx.threshold_ms == 0 {
        return "I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Redis instance. You may use \"CONFIG SET latency-monitor-threshold <milliseconds>.\" in order to enable it. If we weren't in a deep space mission I'd suggest to take a look at https://redis.io/topics/latency-monitor.\n".to_string();
    }
    let mut report = String::new();
    let (mut slowlog_enabled, mut slowlog_tuning, mut slowlog_inspect) = (false, false, false);
    let (mut scheduler, mut large_objects, mut mass_eviction) = (false, false, false);
    let mut advices = 0;
    for (i, (event, series)) in events.iter().enumerate() {
        if i == 0 {
            report.push_str("Dave, I have observed latency spikes in this Redis instance. You don't mind talking about it, do you Dave?\n\n");
        }
        let ls = analyze(series, now);
        report.push_str(&format!(
            "{}. {}: {} latency spikes (average {}ms, mean deviation {}ms, period {:.2} sec). Worst all time event {}ms.",
            i + 1,
            event,
            ls.samples,
            ls.avg,
            ls.mad,
            ls.period as f64 / ls.samples.max(1) as f64,
            series.max
        ));
        match *event {
            "command" => {
                if ctx.slowlog_us < 0 {
                    slowlog_enabled = true;
                    advices += 1;
                } else if (ctx.slowlog_us / 1000) as u64 > ctx.threshold_ms {
                    slowlog_tuning = true;
                    advices += 1;
                }
                slowlog_inspect = true;
                large_objects = true;
                advices += 2;
            }
            "fast-command" => {
                scheduler = true;
                advices += 1;
            }
            // Redis also advises raising `hz`, which Tollgate does not use (its expiry runs
            // every 100 ms).
            "expire-cycle" => {
                large_objects = true;
                advices += 1;
            }
            "eviction-cycle" => {
                mass_eviction = true;
                advices += 1;
            }
            _ => {}
        }
        report.push('\n');
    }
    if events.is_empty() && advices == 0 {
        report.push_str("Dave, no latency spike was observed during the lifetime of this Redis instance, not in the slightest bit. I honestly think you ought to sit down calmly, take a stress pill, and think things over.\n");
        return report;
    }
    if advices == 0 {
        report.push_str("\nWhile there are latency events logged, I'm not able to suggest any easy fix. Please use the Redis community to get some help, providing this report in your help request.\n");
        return report;
    }
    report.push_str("\nI have a few advices for you:\n\n");
    if slowlog_enabled {
        report.push_str(&format!("- There are latency issues with potentially slow commands you are using. Try to enable the Slow Log Redis feature using the command 'CONFIG SET slowlog-log-slower-than {}'. If the Slow log is disabled Redis is not able to log slow commands execution for you.\n", ctx.threshold_ms * 1000));
    }
    if slowlog_tuning {
        report.push_str(&format!("- Your current Slow Log configuration only logs events that are slower than your configured latency monitor threshold. Please use 'CONFIG SET slowlog-log-slower-than {}'.\n", ctx.threshold_ms * 1000));
    }
    if slowlog_inspect {
        report.push_str("- Check your Slow Log to understand what are the commands you are running which are too slow to execute. Please check https://redis.io/commands/slowlog for more information.\n");
    }
    if scheduler {
        report.push_str("- The system is slow to execute Redis code paths not containing system calls. This usually means the system does not provide Redis CPU time to run for long periods. You should try to:\n  1) Lower the system load.\n  2) Use a computer / VM just for Redis if you are running other software in the same system.\n  3) Check if you have a \"noisy neighbour\" problem.\n  4) Check with 'redis-cli --intrinsic-latency 100' what is the intrinsic latency in your system.\n  5) Check if the problem is allocator-related by recompiling Redis with MALLOC=libc, if you are using Jemalloc. However this may create fragmentation problems.\n");
    }
    if large_objects {
        report.push_str("- Deleting, expiring or evicting (because of maxmemory policy) large objects is a blocking operation. If you have very large objects that are often deleted, expired, or evicted, try to fragment those objects into multiple smaller objects.\n");
    }
    if mass_eviction {
        report.push_str("- Sudden changes to the 'maxmemory' setting via 'CONFIG SET', or allocation of large objects via sets or sorted sets intersections, STORE option of SORT, Redis Cluster large keys migrations (RESTORE command), may create sudden memory pressure forcing the server to block trying to evict keys. \n");
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_sample_per_second_keeps_the_worst_and_the_ring_holds_160() {
        let m = LatencyMonitor::default();
        m.add_if_needed("command", 50_000_000);
        assert!(m.events().is_empty(), "threshold 0 records nothing");
        m.set_threshold(10);
        m.add_if_needed("command", 9_999_999);
        assert!(m.events().is_empty(), "below the threshold");
        m.add("command", 100, 20);
        m.add("command", 100, 30);
        m.add("command", 100, 25);
        let (_, s) = m.event(b"command").unwrap();
        assert_eq!(
            s.samples(),
            vec![Sample {
                time: 100,
                latency: 30
            }]
        );
        for t in 101..400 {
            m.add("command", t, t);
        }
        let (_, s) = m.event(b"command").unwrap();
        assert_eq!(s.samples().len(), SAMPLES);
        assert_eq!(s.samples()[0].time, 400 - SAMPLES as u64);
        assert_eq!(
            s.latest(),
            Sample {
                time: 399,
                latency: 399
            }
        );
        assert_eq!(s.max, 399);
        assert_eq!(m.reset(Some(b"COMMAND")), 1);
        assert_eq!(m.reset(None), 0);
    }

    #[test]
    fn graph_has_redis_layout() {
        let mut s = Series::new();
        s.add(100, 10);
        s.add(101, 40);
        let g = LatencyMonitor::graph("command", &s, 101);
        let lines: Vec<&str> = g.lines().collect();
        assert_eq!(
            lines[0],
            "command - high 40 ms, low 10 ms (all time high 40 ms)"
        );
        assert_eq!(lines[1], "-".repeat(80));
        // The highest sample reaches the top row; the lowest sits on the bottom one.
        assert_eq!(lines[2], " #");
        assert_eq!(lines[3], " |");
        assert_eq!(lines[5], "_|");
        assert_eq!(lines[6], "  ");
        assert_eq!(lines[7], "10");
        assert_eq!(lines[8], "ss");
    }
}
