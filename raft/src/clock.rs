//! Leader-stamped time. The leader stamps every entry it creates with its wall clock in
//! milliseconds, clamped so that stamps never go backwards: not across entries, and not across a
//! change of leader, because every node raises its floor to the stamp of each entry it appends or
//! applies (a new leader holds every committed entry, so it starts at or above all of them).
//! The state machine never reads a clock; it receives the stamp of the entry being applied.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// A monotonic millisecond clock shared by the proposer, the log store and the state machine.
#[derive(Debug, Default)]
pub struct LeaderClock {
    floor: AtomicU64,
    /// Fault injection: added to the wall clock (0 unless a test simulates clock skew).
    skew_ms: AtomicI64,
}

impl LeaderClock {
    /// A clock whose floor is zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// Stamp for a new entry: the wall clock, or the floor if the wall clock is behind it.
    pub fn stamp(&self) -> u64 {
        let skew = self.skew_ms.load(Ordering::Relaxed);
        self.stamp_at(wall_clock_ms().saturating_add_signed(skew))
    }

    /// Fault injection: pretend this node's wall clock is off by `skew_ms`.
    pub fn set_skew_ms(&self, skew_ms: i64) {
        self.skew_ms.store(skew_ms, Ordering::Relaxed);
    }

    /// Stamp for a new entry given the wall-clock reading `wall_ms` (split out for tests).
    pub fn stamp_at(&self, wall_ms: u64) -> u64 {
        let previous = self.floor.fetch_max(wall_ms, Ordering::AcqRel);
        previous.max(wall_ms)
    }

    /// Raise the floor to `time_ms` (the stamp of an entry appended or applied here).
    pub fn observe(&self, time_ms: u64) {
        self.floor.fetch_max(time_ms, Ordering::AcqRel);
    }

    /// The highest stamp seen or issued so far.
    pub fn floor(&self) -> u64 {
        self.floor.load(Ordering::Acquire)
    }
}

/// Milliseconds since the Unix epoch (0 if the clock is before 1970).
fn wall_clock_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_never_go_backwards() {
        let clock = LeaderClock::new();
        assert_eq!(clock.stamp_at(100), 100);
        assert_eq!(
            clock.stamp_at(90),
            100,
            "wall clock stepped back: clamp to floor"
        );
        assert_eq!(clock.stamp_at(120), 120);
        clock.observe(500);
        assert_eq!(
            clock.stamp_at(130),
            500,
            "a newer leader's entry raises the floor"
        );
        clock.observe(10);
        assert_eq!(clock.floor(), 500);
    }
}
