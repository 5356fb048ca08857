//! Fixed window counter: at most `limit` units per window, windows aligned to
//! multiples of `window_ms` since epoch 0 (so `[k·window, (k+1)·window)`).
//!
//! This is the `INCR` + `EXPIRE` pattern of seed 000 done in one step. Its
//! guarantee is per aligned window only: across a window edge it admits up
//! to `2 × limit` within a span of two milliseconds (the burst the seed
//! warns about); [`super::sliding`] and [`super::log`] close that gap.
//!
//! If the clock steps back, the request is charged to the latest window the
//! state has seen. If the window length changes between calls, a stored
//! window keeps counting until `start + new window` ends.

use super::{count, parse_duration, Codec, LimitError, Named};
use super::{encoder, info_i64, put_u64, ttl_for, Algorithm, Outcome};
use super::{Reader, Tally, WindowParams};

/// A validated fixed-window configuration: `limit` units per aligned window
/// of `window_ms`, both positive.
pub type Params = WindowParams<{ u64::MAX }>;

/// The counter of the current window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct State {
    window_start: u64,
    count: u64,
}

impl Codec for State {
    /// Compact binary form: header, window start, count (20 bytes).
    #[inline]
    fn encode(&self) -> Vec<u8> {
        let mut out = encoder(State::TAG, 16);
        put_u64(&mut out, self.window_start);
        put_u64(&mut out, self.count);
        out
    }

    /// Parses [`State::encode`]'s output; `None` for anything else.
    fn decode(bytes: &[u8]) -> Option<State> {
        let mut r = Reader::open(bytes, State::TAG)?;
        let state = State {
            window_start: r.u64()?,
            count: r.u64()?,
        };
        r.finish(state)
    }

    /// Fields for `LIMIT.INFO`.
    fn info(&self) -> Vec<(&'static str, i64)> {
        vec![
            ("window_start_ms", info_i64(self.window_start)),
            ("count", info_i64(self.count)),
        ]
    }
}

impl Algorithm for Params {
    /// Charges `cost` units at `now_ms` (cost 0 peeks).
    fn evaluate(&self, state: Option<&State>, cost: u64, now_ms: u64) -> Outcome<State> {
        let (start, used) = match state {
            // Still the stored window, or the clock stepped back before it.
            Some(s) if now_ms < s.window_start || now_ms - s.window_start < self.window_ms => {
                (s.window_start, s.count)
            }
            _ => (now_ms - now_ms % self.window_ms, 0),
        };
        let until_end = start.saturating_add(self.window_ms).saturating_sub(now_ms);
        let tally = Tally::new(self.limit, used, cost);
        let reset_after_ms = if tally.after == 0 { 0 } else { until_end };
        // A rejection waits for the next window: it starts empty and the cost fits.
        let decision = tally.decision(|| until_end, reset_after_ms);
        let new_state = tally.writes().then_some(State {
            window_start: start,
            count: tally.after,
        });
        Outcome {
            decision,
            new_state,
            ttl_ms: ttl_for(until_end),
        }
    }

    fn parse(args: &[&[u8]], _options: &[Option<u64>]) -> Result<Params, LimitError> {
        Params::new(count(args[0])?, parse_duration(args[1])?)
    }

    type State = State;
    const ARGS: usize = 2;
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{admitted_in, forward, jittery, FIXED};
    use super::super::LimitError;
    use super::*;
    use proptest::prelude::*;

    /// Requests of cost 1 spread evenly over one second starting at `second`.
    fn second_of(second: u64, n: u64) -> Vec<u64> {
        (0..n)
            .map(|i| second * 1000 + i * 1000 / n.max(1))
            .collect()
    }

    #[test]
    fn counts_within_an_aligned_window() {
        let p = Params::new(3, 1000).unwrap();
        let mut s = None;
        for (i, remaining) in [2, 1, 0].into_iter().enumerate() {
            let out = p.evaluate(s.as_ref(), 1, 1500 + i as u64);
            assert!(out.decision.allowed);
            assert_eq!(out.decision.remaining, remaining);
            assert_eq!(out.decision.reset_after_ms, 500 - i as u64);
            assert_eq!(out.ttl_ms, 500 - i as u64);
            s = out.new_state;
        }
        let out = p.evaluate(s.as_ref(), 1, 1600);
        assert!(!out.decision.allowed);
        assert_eq!(out.decision.retry_after_ms, 400);
        assert_eq!(out.new_state, None);
        // The next aligned window starts empty.
        let out = p.evaluate(s.as_ref(), 1, 2000);
        assert!(out.decision.allowed);
        assert_eq!(out.decision.remaining, 2);
    }

    #[test]
    fn impossible_costs_and_huge_numbers() {
        let p = Params::new(5, u64::MAX).unwrap();
        let out = p.evaluate(None, 6, u64::MAX - 1);
        assert!(!out.decision.allowed);
        assert_eq!(out.decision.retry_after_ms, -1);
        let out = p.evaluate(None, u64::MAX, 0);
        assert!(!out.decision.allowed);
        let p = Params::new(u64::MAX, 1).unwrap();
        let out = p.evaluate(None, u64::MAX, u64::MAX);
        assert!(out.decision.allowed);
        assert_eq!(out.decision.remaining, 0);
        let s = out.new_state.unwrap();
        let out = p.evaluate(Some(&s), u64::MAX, u64::MAX);
        assert!(!out.decision.allowed);
        assert_eq!(Params::new(0, 1), Err(LimitError::InvalidLimit));
        assert_eq!(Params::new(1, 0), Err(LimitError::InvalidPeriod));
    }

    #[test]
    fn clock_stepping_back_charges_the_latest_window() {
        let p = Params::new(2, 1000).unwrap();
        let s = p.evaluate(None, 2, 2100).new_state.unwrap();
        let out = p.evaluate(Some(&s), 1, 1900);
        assert!(!out.decision.allowed);
        assert_eq!(out.decision.retry_after_ms, 1100);
    }

    /// Seed 000's "1000 per 3 s": 980 requests late in one window and 900 +
    /// 100 early in the next put 1980 into one 3-second span.
    #[test]
    fn seed_000_admits_up_to_twice_the_limit_across_the_edge() {
        let p = Params::new(1000, 3000).unwrap();
        let mut times = Vec::new();
        for (second, n) in [(0, 10), (1, 10), (2, 980), (3, 900), (4, 100)] {
            times.extend(second_of(second, n));
        }
        let admitted = FIXED.admit_all(&p, &times);
        assert_eq!(admitted_in(&admitted, 2000, 5000), 1980);
        // A burst on each side of the edge: 2000 admitted within 2 ms.
        let admitted = FIXED.admit_all(&p, &[vec![2999; 1000], vec![3000; 1000]].concat());
        assert_eq!(admitted_in(&admitted, 2999, 3001), 2000);
    }

    proptest! {
        #[test]
        fn never_exceeds_the_limit_in_an_aligned_window(
            limit in 1u64..20,
            window in 1u64..50,
            start in 0u64..1_000_000,
            steps in forward(30, 8, 120),
        ) {
            let p = Params::new(limit, window).unwrap();
            let r = FIXED.run(&p, start, &steps, true);
            let first = start - start % window;
            let mut w = first;
            while w <= r.max_now {
                prop_assert!(admitted_in(&r.admitted, w, w + window) <= limit);
                w += window;
            }
        }

        #[test]
        fn a_clock_stepping_back_never_panics_or_overadmits(
            limit in 1u64..20,
            window in 1u64..50,
            start in 100u64..1_000_000,
            steps in jittery(30, 40, 8, 120),
        ) {
            let p = Params::new(limit, window).unwrap();
            let r = FIXED.run(&p, start, &steps, false);
            let windows = r.max_now / window - r.min_now / window + 1;
            let total: u64 = r.admitted.iter().map(|(_, c)| c).sum();
            prop_assert!(total <= limit * windows);
        }

        #[test]
        fn extreme_numbers_never_panic(
            limit in 1u64..,
            window in 1u64..,
            cost in proptest::num::u64::ANY,
            now in proptest::num::u64::ANY,
            count in proptest::num::u64::ANY,
            window_start in proptest::num::u64::ANY,
        ) {
            let p = Params::new(limit, window).unwrap();
            let s = State { window_start, count };
            let _ = p.evaluate(Some(&s), cost, now);
            let _ = p.evaluate(None, cost, now);
        }

        #[test]
        fn encoding_round_trips(window_start in proptest::num::u64::ANY, count in proptest::num::u64::ANY) {
            let s = State { window_start, count };
            prop_assert_eq!(State::decode(&s.encode()), Some(s));
        }

        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..40)) {
            let _ = State::decode(&bytes);
        }
    }
}
