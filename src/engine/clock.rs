//! The engine clock: unix microseconds that never go backwards.
//!
//! Commands never read a clock themselves; the engine reads this once per batch and hands
//! the value down. With `enable-debug-command` on, `DEBUG ADVANCE-TIME ms` moves it forward
//! so tests of expiry and limiters run without sleeping, and `DEBUG FREEZE-TIME yes` stops
//! the wall clock's part (a test's timing then depends only on what it advances, not on how
//! fast a loaded machine runs it).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// A monotonic unix-microsecond clock with a test offset.
#[derive(Debug, Clone, Default)]
pub struct Clock {
    inner: Arc<ClockInner>,
}

#[derive(Debug, Default)]
struct ClockInner {
    /// The latest reading, in µs.
    last: AtomicU64,
    /// DEBUG ADVANCE-TIME's total, in µs.
    offset: AtomicU64,
    /// The wall time DEBUG FREEZE-TIME stopped at, in µs (0: running).
    frozen: AtomicU64,
}

impl Clock {
    /// A clock at wall time.
    pub fn new() -> Clock {
        Clock::default()
    }

    /// Current time in unix microseconds, never less than a previous reading.
    pub fn now_us(&self) -> u64 {
        let t = self.wall_us();
        let prev = self.inner.last.fetch_max(t, Ordering::AcqRel);
        prev.max(t)
    }

    /// The wall clock plus the test offset, in µs.
    fn wall_us(&self) -> u64 {
        let frozen = self.inner.frozen.load(Ordering::Acquire);
        if frozen != 0 {
            return frozen.saturating_add(self.inner.offset.load(Ordering::Relaxed));
        }
        wall_now_us().saturating_add(self.inner.offset.load(Ordering::Relaxed))
    }

    /// Stop (`true`) or restart (`false`) the wall clock's part of the time (tests only, via
    /// DEBUG FREEZE-TIME). Readings never go backwards across either.
    pub fn freeze(&self, on: bool) {
        if !on {
            self.inner.frozen.store(0, Ordering::Release);
            return;
        }
        // Freeze at the latest reading (less the offset), so the frozen time is not
        // behind a reading already handed out.
        let offset = self.inner.offset.load(Ordering::Relaxed);
        let at = wall_now_us().max(
            self.inner
                .last
                .load(Ordering::Acquire)
                .saturating_sub(offset),
        );
        self.inner.frozen.store(at.max(1), Ordering::Release);
    }

    /// Current time in unix microseconds for a batch of `n` operations, which run at this
    /// time and the `n - 1` microseconds after it: later readings come after all of them.
    pub fn reserve_us(&self, n: u64) -> u64 {
        let t = self.wall_us();
        let prev = self
            .inner
            .last
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |last| {
                Some(last.max(t).saturating_add(n.max(1)))
            })
            .unwrap_or(t);
        prev.max(t)
    }

    /// Current time in unix milliseconds, never less than a previous reading.
    pub fn now_ms(&self) -> u64 {
        self.now_us() / 1000
    }

    /// Move the clock forward by `ms` (tests only, via DEBUG ADVANCE-TIME).
    pub fn advance(&self, ms: u64) {
        self.inner
            .offset
            .fetch_add(ms.saturating_mul(1000), Ordering::AcqRel);
    }
}

/// The system clock in unix microseconds.
fn wall_now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_goes_backwards_and_advances() {
        let c = Clock::new();
        let a = c.now_ms();
        c.advance(10_000);
        let b = c.now_ms();
        assert!(b >= a + 10_000);
        let us = c.now_us();
        assert!(us / 1000 >= b);
        // A batch of 5 reserves 5 microseconds: the next reading is past them.
        let first = c.reserve_us(5);
        assert!(first >= us);
        assert!(c.now_us() >= first + 5);
        // Frozen, the time moves only by what is advanced (and a microsecond per reading).
        c.freeze(true);
        let f = c.now_us();
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(c.now_us() - f < 1000);
        c.advance(5);
        assert!((5000..6000).contains(&(c.now_us() - f)));
        c.freeze(false);
        assert!(c.now_us() >= f + 5000);
        assert!(c.reserve_us(1) >= first + 5);
    }
}
