//! Leaky bucket as a meter: a level, empty at first, rises by each admitted
//! cost and leaks `leak_tokens` every `leak_period_ms`; a request is
//! rejected (and adds nothing) if `level + cost > capacity`.
//!
//! The leak is continuous at millisecond precision (exact fractions, kept
//! as an integer number of `1/leak_period_ms` units). Guarantee: from any
//! starting point, at most `capacity + leak_tokens × elapsed /
//! leak_period_ms` units are admitted over `elapsed` ms. As a meter it
//! decides exactly like a [`super::token`] bucket of the same numbers (the
//! level is the tokens missing); it differs in what it stores (the level, so
//! `LIMIT.INFO` shows the queue depth) and starts empty rather than full.
//! This is not the leaky bucket as a queue, which would delay requests
//! instead of rejecting them.
//!
//! `remaining` is the whole units of room left, `retry_after_ms` the time
//! until `cost` fits, `reset_after_ms` the time until the bucket is empty.
//! If the clock steps back, nothing leaks.

use super::meter::{decode_scaled, encode_scaled, Meter};
use super::{ceil_div, info_i64, rescale, sat_u64, Algorithm, LimitError, Outcome};
use super::{count, parse_duration, Codec, Named};

/// A validated leaky-bucket configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    meter: Meter,
}

impl Params {
    /// A bucket holding up to `capacity` units that leaks `leak_tokens` per
    /// `leak_period_ms`; all three must be positive.
    pub fn new(capacity: u64, leak_tokens: u64, leak_period_ms: u64) -> Result<Params, LimitError> {
        Ok(Params {
            meter: Meter::new(capacity, leak_tokens, leak_period_ms)?,
        })
    }

    /// The most the level may reach.
    pub fn capacity(&self) -> u64 {
        self.meter.capacity
    }

    /// Units leaked per leak period.
    pub fn leak_tokens(&self) -> u64 {
        self.meter.rate
    }

    /// Leak period in milliseconds.
    pub fn leak_period_ms(&self) -> u64 {
        self.meter.period_ms
    }
}

/// The bucket's level at its last update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct State {
    /// Level in units of `1/scale`.
    level: u128,
    /// The leak period the level was scaled by.
    scale: u64,
    updated_ms: u64,
}

impl Codec for State {
    /// Compact binary form: header, scaled level (u128), scale, time (36 bytes).
    #[inline]
    fn encode(&self) -> Vec<u8> {
        encode_scaled(State::TAG, self.level, self.scale, &[self.updated_ms])
    }

    /// Parses [`State::encode`]'s output; `None` for anything else.
    fn decode(bytes: &[u8]) -> Option<State> {
        let (level, scale, [updated_ms]) = decode_scaled(bytes, State::TAG)?;
        Some(State {
            level,
            scale,
            updated_ms,
        })
    }

    /// Fields for `LIMIT.INFO` (level as of `updated_ms`, rounded up, before
    /// the leak since).
    fn info(&self) -> Vec<(&'static str, i64)> {
        vec![
            (
                "level",
                info_i64(sat_u64(ceil_div(self.level, u128::from(self.scale)))),
            ),
            ("updated_ms", info_i64(self.updated_ms)),
        ]
    }
}

impl Algorithm for Params {
    /// Adds `cost` units at `now_ms` (cost 0 peeks).
    fn evaluate(&self, state: Option<&State>, cost: u64, now_ms: u64) -> Outcome<State> {
        let m = self.meter;
        let (level, last) = match state {
            // Rounding a re-scaled level up never lets more through.
            Some(s) => (rescale(s.level, s.scale, m.period_ms, true), s.updated_ms),
            None => (0, now_ms),
        };
        m.run(level, last, cost, now_ms)
            .outcome(|level, updated_ms| State {
                level,
                scale: m.period_ms,
                updated_ms,
            })
    }

    fn parse(args: &[&[u8]], _options: &[Option<u64>]) -> Result<Params, LimitError> {
        Params::new(count(args[0])?, count(args[1])?, parse_duration(args[2])?)
    }

    type State = State;
    const ARGS: usize = 3;
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{forward, jittery, LEAKY};
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn fills_then_leaks() {
        // Holds 4, leaks 2 per second.
        let p = Params::new(4, 2, 1000).unwrap();
        let out = p.evaluate(None, 3, 10_000);
        assert!(out.decision.allowed);
        assert_eq!(out.decision.remaining, 1);
        assert_eq!(out.decision.reset_after_ms, 1500);
        let s = out.new_state.unwrap();
        assert_eq!(s.info(), vec![("level", 3), ("updated_ms", 10_000)]);
        let out = p.evaluate(Some(&s), 2, 10_000);
        assert!(!out.decision.allowed);
        assert_eq!(out.decision.retry_after_ms, 500);
        assert!(p.evaluate(Some(&s), 2, 10_500).decision.allowed);
        let out = p.evaluate(Some(&s), 5, 10_000);
        assert_eq!(out.decision.retry_after_ms, -1);
        assert_eq!(Params::new(0, 1, 1), Err(LimitError::InvalidCapacity));
        assert_eq!(Params::new(1, 0, 1), Err(LimitError::InvalidRate));
        assert_eq!(Params::new(1, 1, 0), Err(LimitError::InvalidPeriod));
    }

    proptest! {
        #[test]
        fn never_admits_more_than_capacity_plus_leak(
            capacity in 1u64..20,
            leak in 1u64..5,
            period in 1u64..100,
            start in 0u64..1_000_000,
            steps in forward(40, 8, 150),
        ) {
            let p = Params::new(capacity, leak, period).unwrap();
            prop_assert!(LEAKY.meter_bound_holds(&p, p.meter, start, &steps));
        }

        #[test]
        fn decides_like_a_token_bucket(
            capacity in 1u64..20,
            leak in 1u64..5,
            period in 1u64..100,
            steps in forward(40, 8, 100),
        ) {
            let p = Params::new(capacity, leak, period).unwrap();
            LEAKY.decides_like_a_token_bucket(&p, p.meter, &steps)?;
        }

        #[test]
        fn a_clock_stepping_back_leaks_nothing(
            capacity in 1u64..20,
            leak in 1u64..5,
            period in 1u64..100,
            start in 10_000u64..1_000_000,
            steps in jittery(40, 50, 8, 150),
        ) {
            let p = Params::new(capacity, leak, period).unwrap();
            prop_assert!(LEAKY.meter_bound_holds_jittery(&p, p.meter, start, &steps));
        }

        #[test]
        fn extreme_numbers_never_panic(
            capacity in 1u64..,
            leak in 1u64..,
            period in 1u64..,
            cost in proptest::num::u64::ANY,
            now in proptest::num::u64::ANY,
            level in proptest::num::u128::ANY,
            scale in 1u64..,
            updated_ms in proptest::num::u64::ANY,
        ) {
            let p = Params::new(capacity, leak, period).unwrap();
            let s = State { level, scale, updated_ms };
            let _ = p.evaluate(Some(&s), cost, now);
            let _ = p.evaluate(None, cost, now);
        }

        #[test]
        fn encoding_round_trips(level in proptest::num::u128::ANY, scale in 1u64.., updated_ms in proptest::num::u64::ANY) {
            let s = State { level, scale, updated_ms };
            prop_assert_eq!(State::decode(&s.encode()), Some(s));
        }

        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..60)) {
            let _ = State::decode(&bytes);
        }
    }
}
