//! GCRA (generic cell rate algorithm) at millisecond precision: `rate`
//! units per `period_ms`, with bursts of up to `burst` units.
//!
//! The state is a single theoretical arrival time (TAT): when the limiter
//! would be idle again if requests had arrived exactly at the emission
//! interval `T = period_ms / rate`. A request of `cost` moves the TAT to
//! `max(TAT, now) + cost·T` and is admitted when that stays within
//! `burst·T` of `now`. Times are kept in units of `1/rate` ms, so `T` is the
//! whole number `period_ms` and no rounding ever accumulates, however
//! `period_ms / rate` divides. Guarantee: from any starting point, at most
//! `burst + rate × elapsed / period_ms` units are admitted over `elapsed` ms
//! (it decides exactly like a [`super::token`] bucket with capacity `burst`
//! refilling `rate` per `period_ms`, but stores one number).
//!
//! `remaining` is how many more units fit now, `retry_after_ms` the time
//! until `cost` fits, `reset_after_ms` the time until the TAT reaches `now`.
//! A clock stepping back only makes the limiter stricter (no time has passed).

use super::meter::{decode_scaled, encode_scaled, Meter};
use super::Outcome;
use super::{ceil_div, div, info_i64, rescale, sat_i64, sat_u64, Algorithm, Decision, LimitError};
use super::{count, parse_duration, Codec, Named};

/// A validated GCRA configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    /// Capacity `burst`, draining `rate` per `period_ms`.
    meter: Meter,
}

impl Params {
    /// Bursts of up to `burst` units, `rate` units per `period_ms` sustained;
    /// all three must be positive.
    pub fn new(burst: u64, rate: u64, period_ms: u64) -> Result<Params, LimitError> {
        Ok(Params {
            meter: Meter::new(burst, rate, period_ms)?,
        })
    }

    /// The most units admitted at once.
    pub fn burst(&self) -> u64 {
        self.meter.capacity
    }

    /// Units per period, sustained.
    pub fn rate(&self) -> u64 {
        self.meter.rate
    }

    /// The period in milliseconds.
    pub fn period_ms(&self) -> u64 {
        self.meter.period_ms
    }
}

/// The theoretical arrival time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct State {
    /// TAT in units of `1/scale` ms since epoch 0.
    tat: u128,
    /// The rate the TAT was scaled by.
    scale: u64,
}

impl Codec for State {
    /// Compact binary form: header, scaled TAT (u128), scale (28 bytes).
    #[inline]
    fn encode(&self) -> Vec<u8> {
        encode_scaled(State::TAG, self.tat, self.scale, &[])
    }

    /// Parses [`State::encode`]'s output; `None` for anything else.
    fn decode(bytes: &[u8]) -> Option<State> {
        let (tat, scale, []) = decode_scaled(bytes, State::TAG)?;
        Some(State { tat, scale })
    }

    /// Fields for `LIMIT.INFO`.
    fn info(&self) -> Vec<(&'static str, i64)> {
        vec![(
            "tat_ms",
            info_i64(sat_u64(ceil_div(self.tat, u128::from(self.scale)))),
        )]
    }
}

impl Algorithm for Params {
    /// Admits `cost` units at `now_ms` if the TAT allows (cost 0 peeks).
    fn evaluate(&self, state: Option<&State>, cost: u64, now_ms: u64) -> Outcome<State> {
        let Meter {
            capacity: burst,
            rate: per_period,
            period_ms,
        } = self.meter;
        let rate = u128::from(per_period);
        let interval = u128::from(period_ms);
        let now = u128::from(now_ms) * rate;
        let tolerance = u128::from(burst) * interval;
        // Rounding a re-scaled TAT up never lets more through.
        let tat = state
            .map_or(0, |s| rescale(s.tat, s.scale, per_period, true))
            .max(now);
        // `None` only past the end of u128 time: never admitted.
        let new_tat = tat.checked_add(u128::from(cost) * interval);
        let admitted = cost <= burst && new_tat.is_some_and(|t| t - now <= tolerance);
        let backlog = match new_tat {
            Some(t) if admitted => t - now,
            _ => tat - now,
        };
        let retry_after_ms = match new_tat {
            _ if admitted || cost > burst => -1,
            Some(t) => sat_i64(ceil_div(t - tolerance - now, rate)),
            None => i64::MAX,
        };
        let decision = Decision {
            allowed: admitted,
            limit: burst,
            remaining: sat_u64(div(tolerance.saturating_sub(backlog), interval)),
            retry_after_ms,
            reset_after_ms: sat_u64(ceil_div(backlog, rate)),
        };
        let new_state = new_tat.filter(|_| admitted && cost > 0).map(|tat| State {
            tat,
            scale: per_period,
        });
        Outcome::new(decision, new_state)
    }

    fn parse(args: &[&[u8]], _options: &[Option<u64>]) -> Result<Params, LimitError> {
        Params::new(count(args[0])?, count(args[1])?, parse_duration(args[2])?)
    }

    type State = State;
    const ARGS: usize = 3;
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{forward, jittery, GCRA};
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn bursts_then_paces() {
        // Bursts of 3, then 1 per 300 ms (3 per 900 ms).
        let p = Params::new(3, 3, 900).unwrap();
        let mut s = None;
        for remaining in [2, 1, 0] {
            let out = p.evaluate(s.as_ref(), 1, 1_000);
            assert!(out.decision.allowed);
            assert_eq!(out.decision.remaining, remaining);
            s = out.new_state;
        }
        let out = p.evaluate(s.as_ref(), 1, 1_000);
        assert!(!out.decision.allowed);
        assert_eq!(out.decision.retry_after_ms, 300);
        assert_eq!(out.decision.reset_after_ms, 900);
        let out = p.evaluate(s.as_ref(), 1, 1_300);
        assert!(out.decision.allowed);
        assert_eq!(out.decision.remaining, 0);
        assert_eq!(s.unwrap().info(), vec![("tat_ms", 1_900)]);
        // An emission interval that is not a whole number of ms: 3 per 10 ms.
        let p = Params::new(1, 3, 10).unwrap();
        let s = p.evaluate(None, 1, 0).new_state.unwrap();
        assert_eq!(p.evaluate(Some(&s), 1, 0).decision.retry_after_ms, 4);
        assert!(!p.evaluate(Some(&s), 1, 3).decision.allowed);
        assert!(p.evaluate(Some(&s), 1, 4).decision.allowed);
        assert_eq!(Params::new(0, 1, 1), Err(LimitError::InvalidCapacity));
        assert_eq!(Params::new(1, 0, 1), Err(LimitError::InvalidRate));
        assert_eq!(Params::new(1, 1, 0), Err(LimitError::InvalidPeriod));
    }

    #[test]
    fn impossible_costs_are_rejected_without_retry() {
        let p = Params::new(5, 1, 1000).unwrap();
        let out = p.evaluate(None, 6, 0);
        assert!(!out.decision.allowed);
        assert_eq!(out.decision.retry_after_ms, -1);
        let out = p.evaluate(None, u64::MAX, u64::MAX);
        assert!(!out.decision.allowed);
    }

    proptest! {
        #[test]
        fn never_admits_more_than_burst_plus_rate(
            burst in 1u64..20,
            rate in 1u64..5,
            period in 1u64..100,
            start in 0u64..1_000_000,
            steps in forward(40, 8, 150),
        ) {
            let p = Params::new(burst, rate, period).unwrap();
            prop_assert!(GCRA.meter_bound_holds(&p, p.meter, start, &steps));
        }

        #[test]
        fn decides_like_a_token_bucket(
            burst in 1u64..20,
            rate in 1u64..5,
            period in 1u64..100,
            steps in forward(40, 8, 100),
        ) {
            let p = Params::new(burst, rate, period).unwrap();
            GCRA.decides_like_a_token_bucket(&p, p.meter, &steps)?;
        }

        #[test]
        fn a_clock_stepping_back_never_overadmits(
            burst in 1u64..20,
            rate in 1u64..5,
            period in 1u64..100,
            start in 10_000u64..1_000_000,
            steps in jittery(40, 50, 8, 150),
        ) {
            let p = Params::new(burst, rate, period).unwrap();
            prop_assert!(GCRA.meter_bound_holds_jittery(&p, p.meter, start, &steps));
        }

        #[test]
        fn extreme_numbers_never_panic(
            burst in 1u64..,
            rate in 1u64..,
            period in 1u64..,
            cost in proptest::num::u64::ANY,
            now in proptest::num::u64::ANY,
            tat in proptest::num::u128::ANY,
            scale in 1u64..,
        ) {
            let p = Params::new(burst, rate, period).unwrap();
            let s = State { tat, scale };
            let _ = p.evaluate(Some(&s), cost, now);
            let _ = p.evaluate(None, cost, now);
        }

        #[test]
        fn encoding_round_trips(tat in proptest::num::u128::ANY, scale in 1u64..) {
            let s = State { tat, scale };
            prop_assert_eq!(State::decode(&s.encode()), Some(s));
        }

        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..40)) {
            let _ = State::decode(&bytes);
        }
    }
}
