//! The engine clock: unix milliseconds that never go backwards.
//!
//! Commands never read a clock themselves; the engine reads this once per batch and hands
//! the value down. With `enable-debug-command` on, `DEBUG ADVANCE-TIME ms` moves it forward
//! so tests of expiry and limiters run without sleeping.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// A monotonic unix-millisecond clock with a test offset.
#[derive(Debug, Clone, Default)]
pub struct Clock {
    inner: Arc<ClockInner>,
}

#[derive(Debug, Default)]
struct ClockInner {
    last: AtomicU64,
    offset: AtomicU64,
}

impl Clock {
    /// A clock at wall time.
    pub fn new() -> Clock {
        Clock::default()
    }

    /// Current time in unix milliseconds, never less than a previous reading.
    pub fn now_ms(&self) -> u64 {
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        let t = wall.saturating_add(self.inner.offset.load(Ordering::Relaxed));
        let prev = self.inner.last.fetch_max(t, Ordering::AcqRel);
        prev.max(t)
    }

    /// Move the clock forward by `ms` (tests only, via DEBUG ADVANCE-TIME).
    pub fn advance(&self, ms: u64) {
        self.inner.offset.fetch_add(ms, Ordering::AcqRel);
    }
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
    }
}
