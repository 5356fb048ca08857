//! Token bucket: a bucket of `capacity` tokens, full at first, refilled with
//! `refill_tokens` every `refill_period_ms`; a request takes `cost` tokens
//! or, if there are not enough, is rejected and takes none (the
//! "non-preconsumable" bucket of seed 000).
//!
//! Refill is continuous at millisecond precision: after `e` ms the bucket
//! has gained exactly `e × refill_tokens / refill_period_ms` tokens,
//! fractions included (kept exactly as an integer number of
//! `1/refill_period_ms` token units), rather than whole `refill_tokens`
//! batches at period boundaries as in seed 000's script. Guarantee: from
//! any starting point, at most `capacity + refill_tokens × elapsed /
//! refill_period_ms` tokens are taken over `elapsed` ms.
//!
//! `remaining` is the whole tokens left, `retry_after_ms` the time until the
//! bucket holds `cost` tokens, `reset_after_ms` the time until it is full
//! again. If the clock steps back, no tokens are added.

use super::meter::{decode_scaled, encode_scaled, Meter};
use super::{count, parse_duration, Codec, Named};
use super::{info_i64, rescale, sat_u64, Algorithm, LimitError, Outcome};

/// A validated token-bucket configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    meter: Meter,
}

impl Params {
    /// A bucket of `capacity` tokens refilled with `refill_tokens` per
    /// `refill_period_ms`; all three must be positive.
    pub fn new(
        capacity: u64,
        refill_tokens: u64,
        refill_period_ms: u64,
    ) -> Result<Params, LimitError> {
        Ok(Params {
            meter: Meter::new(capacity, refill_tokens, refill_period_ms)?,
        })
    }

    /// Tokens the bucket holds when full.
    pub fn capacity(&self) -> u64 {
        self.meter.capacity
    }

    /// Tokens added per refill period.
    pub fn refill_tokens(&self) -> u64 {
        self.meter.rate
    }

    /// Refill period in milliseconds.
    pub fn refill_period_ms(&self) -> u64 {
        self.meter.period_ms
    }
}

/// The bucket's content at its last update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct State {
    /// Tokens in units of `1/scale` token.
    tokens: u128,
    /// The refill period the tokens were scaled by.
    scale: u64,
    updated_ms: u64,
}

impl Codec for State {
    /// Compact binary form: header, scaled tokens (u128), scale, time (36 bytes).
    #[inline]
    fn encode(&self) -> Vec<u8> {
        encode_scaled(State::TAG, self.tokens, self.scale, &[self.updated_ms])
    }

    /// Parses [`State::encode`]'s output; `None` for anything else.
    fn decode(bytes: &[u8]) -> Option<State> {
        let (tokens, scale, [updated_ms]) = decode_scaled(bytes, State::TAG)?;
        Some(State {
            tokens,
            scale,
            updated_ms,
        })
    }

    /// Fields for `LIMIT.INFO` (tokens as of `updated_ms`, before refill since).
    fn info(&self) -> Vec<(&'static str, i64)> {
        vec![
            (
                "tokens",
                info_i64(sat_u64(self.tokens / u128::from(self.scale))),
            ),
            ("updated_ms", info_i64(self.updated_ms)),
        ]
    }
}

impl Algorithm for Params {
    /// Takes `cost` tokens at `now_ms` (cost 0 peeks).
    fn evaluate(&self, state: Option<&State>, cost: u64, now_ms: u64) -> Outcome<State> {
        let m = self.meter;
        let full = u128::from(m.capacity) * m.scale();
        // The meter tracks the missing tokens; a fresh bucket misses none.
        let (missing, last) = match state {
            Some(s) => (
                full.saturating_sub(rescale(s.tokens, s.scale, m.period_ms, false)),
                s.updated_ms,
            ),
            None => (0, now_ms),
        };
        m.run(missing, last, cost, now_ms)
            .outcome(|level, updated_ms| State {
                tokens: full - level,
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
    use super::super::testkit::{forward, jittery, TOKEN};
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn starts_full_and_refills_continuously() {
        // 10 tokens, 1 token per 100 ms.
        let p = Params::new(10, 1, 100).unwrap();
        let first = p.evaluate(None, 10, 1_000);
        assert!(first.decision.allowed);
        assert_eq!(first.decision.remaining, 0);
        assert_eq!(first.decision.reset_after_ms, 1_000);
        assert_eq!(first.ttl_ms, 1_000);
        let s = first.new_state.unwrap();
        let out = p.evaluate(Some(&s), 1, 1_040);
        assert!(!out.decision.allowed);
        assert_eq!(out.decision.retry_after_ms, 60);
        let out = p.evaluate(Some(&s), 3, 1_040);
        assert_eq!(out.decision.retry_after_ms, 260);
        let out = p.evaluate(Some(&s), 1, 1_100);
        assert!(out.decision.allowed);
        assert_eq!(out.decision.reset_after_ms, 1_000);
        // Fractions accumulate exactly: 1 token per 3 ms.
        let p = Params::new(1, 1, 3).unwrap();
        let s = p.evaluate(None, 1, 0).new_state.unwrap();
        assert_eq!(p.evaluate(Some(&s), 1, 1).decision.retry_after_ms, 2);
        assert!(p.evaluate(Some(&s), 1, 3).decision.allowed);
    }

    #[test]
    fn impossible_costs_and_validation() {
        let p = Params::new(5, 1, 1000).unwrap();
        let out = p.evaluate(None, 6, 0);
        assert!(!out.decision.allowed);
        assert_eq!(out.decision.retry_after_ms, -1);
        assert_eq!(out.decision.remaining, 5);
        assert_eq!(Params::new(0, 1, 1), Err(LimitError::InvalidCapacity));
        assert_eq!(Params::new(1, 0, 1), Err(LimitError::InvalidRate));
        assert_eq!(Params::new(1, 1, 0), Err(LimitError::InvalidPeriod));
        let huge = Params::new(u64::MAX, 1, u64::MAX).unwrap();
        let out = huge.evaluate(None, u64::MAX, u64::MAX);
        assert!(out.decision.allowed);
        assert_eq!(out.decision.reset_after_ms, u64::MAX);
        let s = out.new_state.unwrap();
        let out = huge.evaluate(Some(&s), u64::MAX, u64::MAX);
        assert!(!out.decision.allowed);
        assert_eq!(out.decision.retry_after_ms, i64::MAX);
    }

    #[test]
    fn a_changed_period_keeps_whole_tokens() {
        let p = Params::new(10, 1, 100).unwrap();
        let s = p.evaluate(None, 7, 0).new_state.unwrap();
        let q = Params::new(10, 1, 1000).unwrap();
        let out = q.evaluate(Some(&s), 0, 0);
        assert_eq!(out.decision.remaining, 3);
    }

    proptest! {
        #[test]
        fn never_takes_more_than_capacity_plus_refill(
            capacity in 1u64..20,
            refill in 1u64..5,
            period in 1u64..100,
            start in 0u64..1_000_000,
            steps in forward(40, 8, 150),
        ) {
            let p = Params::new(capacity, refill, period).unwrap();
            prop_assert!(TOKEN.meter_bound_holds(&p, p.meter, start, &steps));
        }

        #[test]
        fn a_clock_stepping_back_adds_no_tokens(
            capacity in 1u64..20,
            refill in 1u64..5,
            period in 1u64..100,
            start in 10_000u64..1_000_000,
            steps in jittery(40, 50, 8, 150),
        ) {
            let p = Params::new(capacity, refill, period).unwrap();
            prop_assert!(TOKEN.meter_bound_holds_jittery(&p, p.meter, start, &steps));
        }

        #[test]
        fn extreme_numbers_never_panic(
            capacity in 1u64..,
            refill in 1u64..,
            period in 1u64..,
            cost in proptest::num::u64::ANY,
            now in proptest::num::u64::ANY,
            tokens in proptest::num::u128::ANY,
            scale in 1u64..,
            updated_ms in proptest::num::u64::ANY,
        ) {
            let p = Params::new(capacity, refill, period).unwrap();
            let s = State { tokens, scale, updated_ms };
            let _ = p.evaluate(Some(&s), cost, now);
            let _ = p.evaluate(None, cost, now);
        }

        #[test]
        fn encoding_round_trips(tokens in proptest::num::u128::ANY, scale in 1u64.., updated_ms in proptest::num::u64::ANY) {
            let s = State { tokens, scale, updated_ms };
            prop_assert_eq!(State::decode(&s.encode()), Some(s));
        }

        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..60)) {
            let _ = State::decode(&bytes);
        }
    }
}
