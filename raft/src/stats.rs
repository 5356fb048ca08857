//! What a node counts about its own Raft work for the server's `/metrics` and INFO: log
//! fsyncs (a latency [`Histogram`]), entries and commands applied, elections started,
//! leader changes seen, snapshots built and requests forwarded to the leader.
//!
//! Recording is a relaxed atomic add: no lock and no allocation on the write path. The
//! histogram is ours rather than `prometheus-client`'s because that one takes a mutex on
//! every observation; this one is log-linear (8 sub-buckets per power of two, so any
//! percentile read from it is within 12.5% of the true value), which also serves
//! Redis's LATENCY and `latencystats` percentiles in the server.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Exact buckets below this value; above it, 8 per power of two.
const LINEAR: u64 = 8;
/// Highest power of two with buckets of its own (2^40 ns is about 18 minutes).
const MAX_EXP: u32 = 40;
/// Number of buckets.
pub const BUCKETS: usize = LINEAR as usize + (MAX_EXP as usize - 2) * 8;

/// A lock-free histogram of durations in nanoseconds (see the module docs).
pub struct Histogram {
    buckets: [AtomicU64; BUCKETS],
    sum_ns: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            sum_ns: AtomicU64::new(0),
        }
    }
}

impl std::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Histogram")
            .field("count", &self.count())
            .field("sum_ns", &self.sum_ns())
            .finish()
    }
}

/// The bucket of `ns`.
fn bucket(ns: u64) -> usize {
    if ns < LINEAR {
        return ns as usize;
    }
    let exp = 63 - ns.leading_zeros();
    if exp > MAX_EXP {
        return BUCKETS - 1;
    }
    let sub = (ns >> (exp - 3)) & 7;
    LINEAR as usize + (exp as usize - 3) * 8 + sub as usize
}

/// The smallest value of bucket `i`.
pub fn bucket_low(i: usize) -> u64 {
    if i < LINEAR as usize {
        return i as u64;
    }
    let exp = (i - LINEAR as usize) / 8 + 3;
    let sub = ((i - LINEAR as usize) % 8) as u64;
    (8 + sub) << (exp - 3)
}

impl Histogram {
    /// Record one duration of `ns` nanoseconds: two relaxed atomic adds.
    #[inline]
    pub fn record_ns(&self, ns: u64) {
        self.buckets[bucket(ns)].fetch_add(1, Ordering::Relaxed);
        self.sum_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// Record one duration.
    pub fn record(&self, d: Duration) {
        self.record_ns(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    }

    /// Observations recorded (the sum of the buckets).
    pub fn count(&self) -> u64 {
        self.buckets.iter().map(|b| b.load(Ordering::Relaxed)).sum()
    }

    /// Sum of the observations, in nanoseconds.
    pub fn sum_ns(&self) -> u64 {
        self.sum_ns.load(Ordering::Relaxed)
    }

    /// Forget every observation.
    pub fn reset(&self) {
        for b in &self.buckets {
            b.store(0, Ordering::Relaxed);
        }
        self.sum_ns.store(0, Ordering::Relaxed);
    }

    /// The count of each bucket, lowest first.
    pub fn snapshot(&self) -> Vec<u64> {
        self.buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect()
    }

    /// Cumulative counts of the observations below each power of two nanoseconds from
    /// `2^from` to `2^to` (Prometheus's `le` buckets, in nanoseconds), then the total.
    pub fn cumulative(&self, from: u32, to: u32) -> (Vec<(u64, u64)>, u64) {
        let counts = self.snapshot();
        let mut out = Vec::with_capacity((to - from + 1) as usize);
        let mut below = 0u64;
        let mut i = 0;
        for exp in from..=to {
            let edge = 1u64 << exp;
            while i < counts.len() && bucket_low(i) < edge {
                below += counts[i];
                i += 1;
            }
            out.push((edge, below));
        }
        let total = counts.iter().sum();
        (out, total)
    }

    /// The value below which `q` (0..=1) of the observations fall, in nanoseconds: the
    /// middle of the bucket holding that rank (0 when empty).
    pub fn percentile_ns(&self, q: f64) -> u64 {
        let counts = self.snapshot();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return 0;
        }
        let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
        let mut seen = 0;
        for (i, c) in counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let low = bucket_low(i);
                let high = if i + 1 < BUCKETS {
                    bucket_low(i + 1)
                } else {
                    low
                };
                return low + (high - low) / 2;
            }
        }
        0
    }
}

/// Counters a Raft node keeps (see the module docs); read with [`crate::RaftNode::stats`].
#[derive(Debug, Default)]
pub struct RaftStats {
    /// Duration of each fsync of the log.
    pub fsync: Histogram,
    /// Log entries applied to the state machine.
    pub entries_applied: AtomicU64,
    /// Commands (client batches) carried by the applied entries.
    pub commands_applied: AtomicU64,
    /// Elections this node started.
    pub elections: AtomicU64,
    /// Times this node saw the leader change.
    pub leader_changes: AtomicU64,
    /// Snapshots this node built.
    pub snapshots: AtomicU64,
    /// Writes forwarded to the leader.
    pub forwarded_writes: AtomicU64,
    /// Read-index requests forwarded to the leader.
    pub forwarded_reads: AtomicU64,
}

impl RaftStats {
    /// Add `n` to `counter`.
    #[inline]
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_ordered_and_cover_every_value() {
        for i in 1..BUCKETS {
            assert!(bucket_low(i) > bucket_low(i - 1), "bucket {i}");
            assert_eq!(bucket(bucket_low(i)), i);
        }
        for v in [0, 1, 7, 8, 9, 15, 16, 17, 1000, 123_456_789, u64::MAX] {
            let b = bucket(v);
            assert!(bucket_low(b) <= v);
        }
    }

    #[test]
    fn percentiles_are_within_an_eighth() {
        let h = Histogram::default();
        for v in 1..=1000u64 {
            h.record_ns(v * 1000);
        }
        let p50 = h.percentile_ns(0.5) as f64;
        assert!((p50 / 500_000.0 - 1.0).abs() < 0.125, "{p50}");
        let p99 = h.percentile_ns(0.99) as f64;
        assert!((p99 / 990_000.0 - 1.0).abs() < 0.125, "{p99}");
        let (cum, total) = h.cumulative(10, 20);
        assert_eq!(total, 1000);
        // 2^20 ns = 1048.576 us: everything is below it.
        assert_eq!(cum.last().copied(), Some((1 << 20, 1000)));
        // 2^19 ns = 524.288 us: the values 1..=524 us.
        assert_eq!(cum[9], (1 << 19, 524));
    }
}
