//! Leader-stamped time. The leader stamps every entry it creates with its wall clock in
//! microseconds, clamped so that stamps never go backwards: not across entries, and not across a
//! change of leader, because every node raises its floor to the stamp of each entry it appends or
//! applies (a new leader holds every committed entry, so it starts at or above all of them).
//! The state machine never reads a clock; it receives the stamp of the entry being applied.
//!
//! Entries written before stamps had microseconds carry milliseconds. [`EntryTime`] is how a
//! stamp is stored: microseconds with the top bit set, so that the old stamps (unix
//! milliseconds, far below 2^63) still load and are read as milliseconds.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A monotonic microsecond clock shared by the proposer, the log store and the state machine.
#[derive(Debug, Default)]
pub struct LeaderClock {
    floor: AtomicU64,
    /// Fault injection: added to the wall clock, in microseconds (0 unless a test simulates
    /// clock skew).
    skew_us: AtomicI64,
}

impl LeaderClock {
    /// A clock whose floor is zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// Stamp for a new entry (µs): the wall clock, or the floor if the wall clock is behind it.
    pub fn stamp(&self) -> u64 {
        let skew = self.skew_us.load(Ordering::Relaxed);
        self.stamp_at(wall_clock_us().saturating_add_signed(skew))
    }

    /// Fault injection: pretend this node's wall clock is off by `skew_ms` milliseconds.
    pub fn set_skew_ms(&self, skew_ms: i64) {
        self.skew_us
            .store(skew_ms.saturating_mul(1000), Ordering::Relaxed);
    }

    /// Stamp for a new entry given the wall-clock reading `wall_us` (split out for tests).
    pub fn stamp_at(&self, wall_us: u64) -> u64 {
        let previous = self.floor.fetch_max(wall_us, Ordering::AcqRel);
        previous.max(wall_us)
    }

    /// Raise the floor to `time_us` (the stamp of an entry appended or applied here).
    pub fn observe(&self, time_us: u64) {
        self.floor.fetch_max(time_us, Ordering::AcqRel);
    }

    /// The highest stamp seen or issued so far, in microseconds.
    pub fn floor(&self) -> u64 {
        self.floor.load(Ordering::Acquire)
    }
}

/// Microseconds since the Unix epoch (0 if the clock is before 1970).
fn wall_clock_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// A stamp as entries and snapshots store it: unix microseconds, serialized as
/// `micros | 1 << 63`. A stored value without the top bit is a millisecond stamp written
/// before microseconds (every real one is far below 2^63) and reads as `ms * 1000`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct EntryTime(pub u64);

/// The top bit of a stored stamp: set when the stamp is in microseconds.
const MICROS_FLAG: u64 = 1 << 63;

impl EntryTime {
    /// The stamp in unix microseconds.
    pub fn micros(self) -> u64 {
        self.0
    }

    /// Decode a stored stamp (see the type's documentation).
    fn from_stored(v: u64) -> EntryTime {
        if v & MICROS_FLAG != 0 {
            EntryTime(v & !MICROS_FLAG)
        } else {
            EntryTime(v.saturating_mul(1000))
        }
    }
}

impl Serialize for EntryTime {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (self.0.min(!MICROS_FLAG) | MICROS_FLAG).serialize(s)
    }
}

impl<'de> Deserialize<'de> for EntryTime {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        u64::deserialize(d).map(EntryTime::from_stored)
    }
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

    #[test]
    fn stamps_have_microseconds() {
        let clock = LeaderClock::new();
        let a = clock.stamp();
        // Microseconds since 1970 are above 10^15 (from 2001 on); milliseconds are not.
        assert!(a > 1_000_000_000_000_000, "{a}");
        assert!(clock.stamp() >= a);
    }

    #[test]
    fn entry_time_round_trips_and_reads_old_millisecond_stamps() {
        let t = EntryTime(1_764_000_000_123_456);
        let bytes = postcard::to_allocvec(&t).unwrap();
        assert_eq!(postcard::from_bytes::<EntryTime>(&bytes).unwrap(), t);
        // What an entry stamped in milliseconds holds: a plain u64.
        let old = postcard::to_allocvec(&1_764_000_000_123u64).unwrap();
        assert_eq!(
            postcard::from_bytes::<EntryTime>(&old).unwrap(),
            EntryTime(1_764_000_000_123_000)
        );
        assert_eq!(
            postcard::from_bytes::<EntryTime>(&postcard::to_allocvec(&0u64).unwrap()).unwrap(),
            EntryTime(0)
        );
    }
}
