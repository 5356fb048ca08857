//! Shared machinery for the algorithms' property tests: simulated clocks, a
//! driver that checks the rules every limiter must keep, each algorithm as an
//! [`Algo`] (through its [`Algorithm`] and [`Codec`] traits), and the checks the
//! meter family shares.

use super::meter::Meter;
use super::{fixed, gcra, leaky, log, sliding, token, Algorithm, Codec, Outcome};
use proptest::prelude::*;
use std::fmt::Debug;
use std::marker::PhantomData;

/// One simulated request: move the clock by `dt` ms (negative = the clock
/// stepped back), then ask for `cost` (0 = peek).
pub type Step = (i64, u64);

/// Requests on a clock that never goes backwards.
pub fn forward(max_dt: u64, max_cost: u64, len: usize) -> impl Strategy<Value = Vec<Step>> {
    let dt = prop_oneof![3 => Just(0i64), 5 => 0..=max_dt as i64];
    proptest::collection::vec((dt, 0..=max_cost), 1..len)
}

/// Requests on a clock that sometimes steps back by up to `max_back` ms.
pub fn jittery(
    max_dt: u64,
    max_back: u64,
    max_cost: u64,
    len: usize,
) -> impl Strategy<Value = Vec<Step>> {
    let dt = prop_oneof![
        3 => Just(0i64),
        5 => 0..=max_dt as i64,
        2 => -(max_back as i64)..0,
    ];
    proptest::collection::vec((dt, 0..=max_cost), 1..len)
}

/// What a drive admitted: `(now_ms, cost)` of every admitted request,
/// and the earliest and latest times the clock reached.
pub struct Run {
    pub admitted: Vec<(u64, u64)>,
    pub min_now: u64,
    pub max_now: u64,
}

/// Drives `eval` through `steps` from `start`, storing each new state,
/// and checks the shared rules: peeks and rejections never ask for a
/// write, admissions with a cost always do, allowed means retry -1, the
/// stored state round-trips through its encoding, a peek right after
/// reports the same remaining, and a state left alone for its TTL decides
/// like an absent one. With `monotonic`, it also checks that a retry after
/// exactly `retry_after_ms` succeeds and one a millisecond earlier fails.
pub fn drive<S: Clone + PartialEq + Debug>(
    start: u64,
    steps: &[Step],
    monotonic: bool,
    encode: impl Fn(&S) -> Vec<u8>,
    decode: impl Fn(&[u8]) -> Option<S>,
    eval: impl Fn(Option<&S>, u64, u64) -> Outcome<S>,
) -> Run {
    let mut state: Option<S> = None;
    let mut now = start;
    let mut run = Run {
        admitted: Vec::new(),
        min_now: start,
        max_now: start,
    };
    for &(dt, cost) in steps {
        now = now.saturating_add_signed(dt);
        run.min_now = run.min_now.min(now);
        run.max_now = run.max_now.max(now);
        let out = eval(state.as_ref(), cost, now);
        let d = out.decision;
        assert!(out.ttl_ms >= 1, "ttl must be positive");
        if cost == 0 {
            assert!(out.new_state.is_none(), "a peek asked for a write");
        }
        if !d.allowed {
            assert!(out.new_state.is_none(), "a rejection asked for a write");
            if cost > d.limit {
                assert_eq!(d.retry_after_ms, -1, "impossible request with a retry");
            }
            if monotonic && d.retry_after_ms >= 1 {
                let retry = d.retry_after_ms as u64;
                let later = eval(state.as_ref(), cost, now + retry).decision;
                assert!(
                    later.allowed,
                    "not allowed after retry_after_ms={retry}: {d:?}"
                );
                let early = eval(state.as_ref(), cost, now + retry - 1).decision;
                assert!(
                    !early.allowed,
                    "allowed before retry_after_ms={retry}: {d:?}"
                );
            }
            continue;
        }
        assert_eq!(d.retry_after_ms, -1, "allowed with a retry");
        if cost == 0 {
            continue;
        }
        let stored = out.new_state.expect("an admission did not store its state");
        assert_eq!(decode(&encode(&stored)).as_ref(), Some(&stored));
        let peek = eval(Some(&stored), 0, now).decision;
        assert_eq!(
            peek.remaining, d.remaining,
            "peek disagrees with the admission"
        );
        let expiry = now.saturating_add(out.ttl_ms);
        for probe in [1, cost] {
            assert_eq!(
                eval(Some(&stored), probe, expiry).decision,
                eval(None, probe, expiry).decision,
                "state not equivalent to absent after its ttl"
            );
        }
        run.admitted.push((now, cost));
        state = Some(stored);
    }
    run
}

/// Sum of admitted costs with times in `[from, to)`.
pub fn admitted_in(admitted: &[(u64, u64)], from: u64, to: u64) -> u64 {
    admitted
        .iter()
        .filter(|(t, _)| *t >= from && *t < to)
        .map(|(_, c)| *c)
        .sum()
}

/// One algorithm (by its parameters' type), so one driver serves every test module.
pub struct Algo<P>(PhantomData<P>);

/// The fixed window counter.
pub const FIXED: Algo<fixed::Params> = Algo(PhantomData);
/// The sliding window counter.
pub const SLIDING: Algo<sliding::Params> = Algo(PhantomData);
/// The sliding log.
pub const LOG: Algo<log::Params> = Algo(PhantomData);
/// The token bucket.
pub const TOKEN: Algo<token::Params> = Algo(PhantomData);
/// The leaky bucket.
pub const LEAKY: Algo<leaky::Params> = Algo(PhantomData);
/// GCRA.
pub const GCRA: Algo<gcra::Params> = Algo(PhantomData);

impl<P: Algorithm> Algo<P> {
    /// [`drive`]s this algorithm with `params` through `steps` from `start`.
    pub fn run(&self, params: &P, start: u64, steps: &[Step], monotonic: bool) -> Run {
        drive(
            start,
            steps,
            monotonic,
            Codec::encode,
            P::State::decode,
            |s, c, t| params.evaluate(s, c, t),
        )
    }

    /// Requests of cost 1 at each of `times`; the `(time, 1)` of each admitted.
    pub fn admit_all(&self, params: &P, times: &[u64]) -> Vec<(u64, u64)> {
        let mut state = None;
        let mut admitted = Vec::new();
        for &t in times {
            let out = params.evaluate(state.as_ref(), 1, t);
            if out.decision.allowed {
                admitted.push((t, 1));
                state = out.new_state;
            }
        }
        admitted
    }

    /// Whether, on a clock that never goes back, every prefix of admissions
    /// respects `capacity + rate × elapsed / period` since `start`.
    pub fn meter_bound_holds(&self, params: &P, m: Meter, start: u64, steps: &[Step]) -> bool {
        let r = self.run(params, start, steps, true);
        let mut admitted = 0u128;
        r.admitted.iter().all(|&(t, c)| {
            admitted += u128::from(c);
            within_meter(m, admitted, t - start)
        })
    }

    /// Whether, on a clock that steps back, all admissions respect the meter
    /// bound over the span between the earliest and latest clock readings.
    pub fn meter_bound_holds_jittery(
        &self,
        params: &P,
        m: Meter,
        start: u64,
        steps: &[Step],
    ) -> bool {
        let r = self.run(params, start, steps, false);
        let admitted: u128 = r.admitted.iter().map(|&(_, c)| u128::from(c)).sum();
        within_meter(m, admitted, r.max_now - r.min_now)
    }

    /// Checks that every decision equals a token bucket's of the same
    /// numbers (capacity `m.capacity`, refilling `m.rate` per `m.period_ms`).
    pub fn decides_like_a_token_bucket(
        &self,
        params: &P,
        m: Meter,
        steps: &[Step],
    ) -> Result<(), TestCaseError> {
        let tp = token::Params::new(m.capacity, m.rate, m.period_ms).unwrap();
        let (mut ours, mut theirs) = (None, None);
        let mut now = 5_000u64;
        for &(dt, cost) in steps {
            now += dt as u64;
            let o = params.evaluate(ours.as_ref(), cost, now);
            let t = tp.evaluate(theirs.as_ref(), cost, now);
            prop_assert_eq!(o.decision, t.decision);
            if let Some(s) = o.new_state {
                ours = Some(s);
            }
            if let Some(s) = t.new_state {
                theirs = Some(s);
            }
        }
        Ok(())
    }
}

/// Whether `admitted` units over `elapsed` ms respect the meter's
/// `capacity + rate × elapsed / period_ms`.
fn within_meter(m: Meter, admitted: u128, elapsed: u64) -> bool {
    let period = u128::from(m.period_ms);
    admitted * period <= u128::from(m.capacity) * period + u128::from(elapsed) * u128::from(m.rate)
}
