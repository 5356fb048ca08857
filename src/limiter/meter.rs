//! The continuously draining meter shared by the token bucket, the leaky
//! bucket and GCRA: their common parameters (a capacity or burst, `rate`
//! units per `period_ms`), the exact `u128` arithmetic of one request against
//! a level, and the binary form of a quantity kept in units of `1/scale`.
//!
//! A level rises by each admitted cost and drains `rate` units per
//! `period_ms`, and a cost is admitted while the level stays within
//! `capacity`. The token bucket (tokens = capacity − level) and the leaky
//! bucket run it directly; GCRA keeps its own arithmetic on a theoretical
//! arrival time but takes the same parameters and state encoding.

use super::{ceil_div, div, encoder, put_u128, put_u64, sat_i64, sat_u64, Decision};
use super::{LimitError, Outcome, Reader};

/// A validated meter configuration. The level is kept in units of
/// `1/period_ms`, so draining `rate` units per period is exactly `rate`
/// scaled units per millisecond: no rounding ever accumulates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Meter {
    /// The most the level may reach (capacity or burst).
    pub(super) capacity: u64,
    /// Units drained per period.
    pub(super) rate: u64,
    /// The period in milliseconds.
    pub(super) period_ms: u64,
}

/// The result of running a meter: the verdict, and the level (scaled) at
/// `at_ms` that the caller stores when `store` is set.
pub(super) struct Metered {
    decision: Decision,
    level: u128,
    at_ms: u64,
    store: bool,
}

impl Meter {
    /// A meter of `capacity` draining `rate` per `period_ms`; all three must
    /// be positive (checked in that order).
    pub(super) fn new(capacity: u64, rate: u64, period_ms: u64) -> Result<Meter, LimitError> {
        if capacity == 0 {
            return Err(LimitError::InvalidCapacity);
        }
        if rate == 0 {
            return Err(LimitError::InvalidRate);
        }
        if period_ms == 0 {
            return Err(LimitError::InvalidPeriod);
        }
        Ok(Meter {
            capacity,
            rate,
            period_ms,
        })
    }

    /// One scaled unit per `1/period_ms` of a unit.
    pub(super) fn scale(&self) -> u128 {
        u128::from(self.period_ms)
    }

    /// Runs one request against a level measured at `last_ms`.
    pub(super) fn run(&self, level: u128, last_ms: u64, cost: u64, now_ms: u64) -> Metered {
        let scale = self.scale();
        let rate = u128::from(self.rate);
        let cap = u128::from(self.capacity) * scale;
        let elapsed = u128::from(now_ms.saturating_sub(last_ms));
        let at_ms = now_ms.max(last_ms);
        let level = level.saturating_sub(elapsed * rate);
        let need = u128::from(cost) * scale;
        let fits = level.saturating_add(need) <= cap;
        let admitted = fits && cost <= self.capacity;
        let after = if admitted { level + need } else { level };
        // Waits count from `now_ms`: a clock behind the state's also waits
        // for the state's own time to come round.
        let behind = u128::from(at_ms - now_ms);
        let retry_after_ms = if admitted || cost > self.capacity {
            -1
        } else {
            sat_i64(behind.saturating_add(ceil_div(level.saturating_add(need) - cap, rate)))
        };
        let decision = Decision {
            allowed: admitted,
            limit: self.capacity,
            remaining: sat_u64(div(cap.saturating_sub(after), scale)),
            retry_after_ms,
            reset_after_ms: if after == 0 {
                0
            } else {
                sat_u64(behind.saturating_add(ceil_div(after, rate)))
            },
        };
        Metered {
            decision,
            level: after,
            at_ms,
            store: admitted && cost > 0,
        }
    }
}

impl Metered {
    /// The outcome to return, storing `state(level, at_ms)` when the run
    /// admitted a cost.
    pub(super) fn outcome<S>(self, state: impl FnOnce(u128, u64) -> S) -> Outcome<S> {
        let new_state = self.store.then(|| state(self.level, self.at_ms));
        Outcome::new(self.decision, new_state)
    }
}

/// Encodes a quantity in units of `1/scale` (u128, then the scale) followed
/// by `times` (u64 each), after the algorithm's header.
#[inline]
pub(super) fn encode_scaled(tag: u8, value: u128, scale: u64, times: &[u64]) -> Vec<u8> {
    let mut out = encoder(tag, 24 + 8 * times.len());
    put_u128(&mut out, value);
    put_u64(&mut out, scale);
    for &t in times {
        put_u64(&mut out, t);
    }
    out
}

/// Parses [`encode_scaled`]'s output with `N` times; `None` for anything
/// else, including a zero scale.
pub(super) fn decode_scaled<const N: usize>(
    bytes: &[u8],
    tag: u8,
) -> Option<(u128, u64, [u64; N])> {
    let mut r = Reader::open(bytes, tag)?;
    let value = r.u128()?;
    let scale = r.u64()?;
    let mut times = [0u64; N];
    for t in &mut times {
        *t = r.u64()?;
    }
    if scale == 0 {
        return None;
    }
    r.finish((value, scale, times))
}
