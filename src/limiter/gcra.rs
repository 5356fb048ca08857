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

use super::{ceil_div, encoder, info_i64, put_u128, put_u64, rescale, sat_i64, sat_u64};
use super::{ttl_for, Algorithm, Decision, LimitError, Outcome, Reader};

/// A validated GCRA configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    burst: u64,
    rate: u64,
    period_ms: u64,
}

impl Params {
    /// Bursts of up to `burst` units, `rate` units per `period_ms` sustained;
    /// all three must be positive.
    pub fn new(burst: u64, rate: u64, period_ms: u64) -> Result<Params, LimitError> {
        if burst == 0 {
            return Err(LimitError::InvalidCapacity);
        }
        if rate == 0 {
            return Err(LimitError::InvalidRate);
        }
        if period_ms == 0 {
            return Err(LimitError::InvalidPeriod);
        }
        Ok(Params {
            burst,
            rate,
            period_ms,
        })
    }

    /// The most units admitted at once.
    pub fn burst(&self) -> u64 {
        self.burst
    }

    /// Units per period, sustained.
    pub fn rate(&self) -> u64 {
        self.rate
    }

    /// The period in milliseconds.
    pub fn period_ms(&self) -> u64 {
        self.period_ms
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

impl State {
    /// Compact binary form: header, scaled TAT (u128), scale (28 bytes).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = encoder(Algorithm::Gcra, 24);
        put_u128(&mut out, self.tat);
        put_u64(&mut out, self.scale);
        out
    }

    /// Parses [`State::encode`]'s output; `None` for anything else.
    pub fn decode(bytes: &[u8]) -> Option<State> {
        let mut r = Reader::open(bytes, Algorithm::Gcra)?;
        let state = State {
            tat: r.u128()?,
            scale: r.u64()?,
        };
        if state.scale == 0 {
            return None;
        }
        r.finish(state)
    }

    /// Fields for `LIMIT.INFO`.
    pub fn info(&self) -> Vec<(&'static str, i64)> {
        vec![(
            "tat_ms",
            info_i64(sat_u64(ceil_div(self.tat, u128::from(self.scale)))),
        )]
    }
}

/// Admits `cost` units at `now_ms` if the TAT allows (cost 0 peeks).
pub fn evaluate(state: Option<&State>, params: &Params, cost: u64, now_ms: u64) -> Outcome<State> {
    let rate = u128::from(params.rate);
    let interval = u128::from(params.period_ms);
    let now = u128::from(now_ms) * rate;
    let tolerance = u128::from(params.burst) * interval;
    // Rounding a re-scaled TAT up never lets more through.
    let tat = state
        .map_or(0, |s| rescale(s.tat, s.scale, params.rate, true))
        .max(now);
    // `None` only past the end of u128 time: never admitted.
    let new_tat = tat.checked_add(u128::from(cost) * interval);
    let admitted = cost <= params.burst && new_tat.is_some_and(|t| t - now <= tolerance);
    let backlog = match new_tat {
        Some(t) if admitted => t - now,
        _ => tat - now,
    };
    let retry_after_ms = match new_tat {
        _ if admitted || cost > params.burst => -1,
        Some(t) => sat_i64(ceil_div(t - tolerance - now, rate)),
        None => i64::MAX,
    };
    let decision = Decision {
        allowed: admitted,
        limit: params.burst,
        remaining: sat_u64(tolerance.saturating_sub(backlog) / interval),
        retry_after_ms,
        reset_after_ms: sat_u64(ceil_div(backlog, rate)),
    };
    let new_state = new_tat.filter(|_| admitted && cost > 0).map(|tat| State {
        tat,
        scale: params.rate,
    });
    Outcome {
        decision,
        new_state,
        ttl_ms: ttl_for(decision.reset_after_ms),
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{drive, forward, jittery, Run};
    use super::super::token;
    use super::*;
    use proptest::prelude::*;

    fn run(params: &Params, start: u64, steps: &[(i64, u64)], monotonic: bool) -> Run {
        drive(
            start,
            steps,
            monotonic,
            State::encode,
            State::decode,
            |s, c, t| evaluate(s, params, c, t),
        )
    }

    fn within_bound(p: &Params, admitted: u128, elapsed: u64) -> bool {
        let period = u128::from(p.period_ms());
        admitted * period
            <= u128::from(p.burst()) * period + u128::from(elapsed) * u128::from(p.rate())
    }

    #[test]
    fn bursts_then_paces() {
        // Bursts of 3, then 1 per 300 ms (3 per 900 ms).
        let p = Params::new(3, 3, 900).unwrap();
        let mut s = None;
        for remaining in [2, 1, 0] {
            let out = evaluate(s.as_ref(), &p, 1, 1_000);
            assert!(out.decision.allowed);
            assert_eq!(out.decision.remaining, remaining);
            s = out.new_state;
        }
        let out = evaluate(s.as_ref(), &p, 1, 1_000);
        assert!(!out.decision.allowed);
        assert_eq!(out.decision.retry_after_ms, 300);
        assert_eq!(out.decision.reset_after_ms, 900);
        let out = evaluate(s.as_ref(), &p, 1, 1_300);
        assert!(out.decision.allowed);
        assert_eq!(out.decision.remaining, 0);
        assert_eq!(s.unwrap().info(), vec![("tat_ms", 1_900)]);
        // An emission interval that is not a whole number of ms: 3 per 10 ms.
        let p = Params::new(1, 3, 10).unwrap();
        let s = evaluate(None, &p, 1, 0).new_state.unwrap();
        assert_eq!(evaluate(Some(&s), &p, 1, 0).decision.retry_after_ms, 4);
        assert!(!evaluate(Some(&s), &p, 1, 3).decision.allowed);
        assert!(evaluate(Some(&s), &p, 1, 4).decision.allowed);
        assert_eq!(Params::new(0, 1, 1), Err(LimitError::InvalidCapacity));
        assert_eq!(Params::new(1, 0, 1), Err(LimitError::InvalidRate));
        assert_eq!(Params::new(1, 1, 0), Err(LimitError::InvalidPeriod));
    }

    #[test]
    fn impossible_costs_are_rejected_without_retry() {
        let p = Params::new(5, 1, 1000).unwrap();
        let out = evaluate(None, &p, 6, 0);
        assert!(!out.decision.allowed);
        assert_eq!(out.decision.retry_after_ms, -1);
        let out = evaluate(None, &p, u64::MAX, u64::MAX);
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
            let r = run(&p, start, &steps, true);
            let mut admitted = 0u128;
            for &(t, c) in &r.admitted {
                admitted += u128::from(c);
                prop_assert!(within_bound(&p, admitted, t - start));
            }
        }

        #[test]
        fn decides_like_a_token_bucket(
            burst in 1u64..20,
            rate in 1u64..5,
            period in 1u64..100,
            steps in forward(40, 8, 100),
        ) {
            let gp = Params::new(burst, rate, period).unwrap();
            let tp = token::Params::new(burst, rate, period).unwrap();
            let (mut gs, mut ts) = (None, None);
            let mut now = 5_000u64;
            for &(dt, cost) in &steps {
                now += dt as u64;
                let g = evaluate(gs.as_ref(), &gp, cost, now);
                let t = token::evaluate(ts.as_ref(), &tp, cost, now);
                prop_assert_eq!(g.decision, t.decision);
                if let Some(s) = g.new_state { gs = Some(s); }
                if let Some(s) = t.new_state { ts = Some(s); }
            }
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
            let r = run(&p, start, &steps, false);
            let admitted: u128 = r.admitted.iter().map(|&(_, c)| u128::from(c)).sum();
            prop_assert!(within_bound(&p, admitted, r.max_now - r.min_now));
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
            let _ = evaluate(Some(&s), &p, cost, now);
            let _ = evaluate(None, &p, cost, now);
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
