//! Sliding window counter on sub-buckets (seed 003 section 4): the window is
//! split into `p` buckets of `b = ceil(window_ms / p)` ms aligned to
//! multiples of `b` since epoch 0, and a request is admitted when the units
//! already in the current bucket and the `p − 1` before it, plus its cost,
//! stay within `limit`.
//!
//! The exact bound it guarantees (with `b` as above, so `p·b ≥ window_ms`):
//!
//! 1. Any `p` consecutive aligned buckets (a span of `p·b ≥ window_ms`,
//!    e.g. every window of length `window_ms` that starts on a bucket edge)
//!    hold at most `limit` admitted units.
//! 2. Any interval of length `(p − 1)·b` — whatever its alignment — holds at
//!    most `limit`, since it touches at most `p` buckets.
//! 3. Hence an arbitrary interval of length `window_ms` holds at most `limit`
//!    plus what was admitted in the part of the single bucket it starts in:
//!    under steady traffic about `limit / p` more, and `2 × limit` only if a
//!    whole window's worth sits at the end of that one bucket. The exact
//!    bound for every interval is [`super::log`]'s.
//!
//! `p = 1` is a fixed window. The state keeps one counter per bucket (trailing
//! empty buckets are not stored). If the clock steps back, the request is
//! charged to the newest bucket the state has seen. If the bucket width
//! changes between calls, stored counts move to the new bucket holding their
//! old bucket's start.

use super::{count, parse_duration, Codec, Named};
use super::{encoder, info_i64, put_u64, put_varint, require, Algorithm, LimitError, Outcome};
use super::{Reader, Tally};

/// The most sub-buckets per window (one per second over an hour).
pub const MAX_BUCKETS: u64 = 3600;

/// Sub-buckets when `PRECISION` is not given (capped at the window in ms): at most a
/// tenth of the limit can slip past at a bucket edge.
pub const DEFAULT_PRECISION: u64 = 10;

/// A validated sliding-window configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    limit: u64,
    window_ms: u64,
    buckets: u64,
    bucket_ms: u64,
}

impl Params {
    /// `limit` units per sliding `window_ms`, tracked in `buckets` sub-buckets
    /// (`1..=MAX_BUCKETS`, and at most `window_ms` so buckets are ≥ 1 ms).
    pub fn new(limit: u64, window_ms: u64, buckets: u64) -> Result<Params, LimitError> {
        require(limit > 0, LimitError::InvalidLimit)?;
        require(window_ms > 0, LimitError::InvalidPeriod)?;
        require(
            (1..=MAX_BUCKETS.min(window_ms)).contains(&buckets),
            LimitError::InvalidBuckets,
        )?;
        Ok(Params {
            limit,
            window_ms,
            buckets,
            bucket_ms: window_ms.div_ceil(buckets),
        })
    }

    /// Units admitted per window.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Window length in milliseconds.
    pub fn window_ms(&self) -> u64 {
        self.window_ms
    }

    /// Number of sub-buckets per window.
    pub fn buckets(&self) -> u64 {
        self.buckets
    }

    /// Width of one sub-bucket in milliseconds (`ceil(window / buckets)`).
    pub fn bucket_ms(&self) -> u64 {
        self.bucket_ms
    }
}

/// Per-bucket counts, newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct State {
    bucket_ms: u64,
    /// Index (`time / bucket_ms`) of the newest bucket, the one `counts[0]` holds.
    head: u64,
    /// `counts[i]` is bucket `head − i`; no trailing zeros.
    counts: Vec<u64>,
}

impl State {
    /// The counts re-expressed in buckets of `bucket_ms`: the newest bucket
    /// index and exactly `p` counters, newest first.
    fn aligned(&self, bucket_ms: u64, p: usize) -> (u64, Vec<u64>) {
        let mut counts = vec![0u64; p];
        if self.bucket_ms == bucket_ms {
            for (slot, &c) in counts.iter_mut().zip(&self.counts) {
                *slot = c;
            }
            return (self.head, counts);
        }
        let head = self.head.saturating_mul(self.bucket_ms) / bucket_ms;
        for (i, &c) in self.counts.iter().enumerate() {
            let Some(old) = self.head.checked_sub(i as u64) else {
                break;
            };
            let new = old.saturating_mul(self.bucket_ms) / bucket_ms;
            if let Some(slot) = usize::try_from(head - new.min(head))
                .ok()
                .and_then(|k| counts.get_mut(k))
            {
                *slot = slot.saturating_add(c);
            }
        }
        (head, counts)
    }
}

impl Codec for State {
    /// Compact binary form: header, bucket width, head index, then the
    /// number of counts and the counts as varints.
    fn encode(&self) -> Vec<u8> {
        let mut out = encoder(State::TAG, 18 + self.counts.len() * 2);
        put_u64(&mut out, self.bucket_ms);
        put_u64(&mut out, self.head);
        put_varint(&mut out, self.counts.len() as u64);
        for &c in &self.counts {
            put_varint(&mut out, c);
        }
        out
    }

    /// Parses [`State::encode`]'s output; `None` for anything else.
    fn decode(bytes: &[u8]) -> Option<State> {
        let mut r = Reader::open(bytes, State::TAG)?;
        let bucket_ms = r.u64()?;
        let head = r.u64()?;
        let n = r.varint()?;
        if bucket_ms == 0 || n > MAX_BUCKETS {
            return None;
        }
        // `n` is at most MAX_BUCKETS; one allocation instead of growing by doubling.
        let mut counts = Vec::with_capacity(n as usize);
        for _ in 0..n {
            counts.push(r.varint()?);
        }
        r.finish(State {
            bucket_ms,
            head,
            counts,
        })
    }

    /// Fields for `LIMIT.INFO`.
    fn info(&self) -> Vec<(&'static str, i64)> {
        let total = self.counts.iter().fold(0u64, |a, &c| a.saturating_add(c));
        vec![
            ("bucket_ms", info_i64(self.bucket_ms)),
            (
                "head_bucket_start_ms",
                info_i64(self.head.saturating_mul(self.bucket_ms)),
            ),
            ("buckets_stored", info_i64(self.counts.len() as u64)),
            ("count", info_i64(total)),
        ]
    }
}

impl Algorithm for Params {
    /// Charges `cost` units at `now_ms` (cost 0 peeks).
    fn evaluate(&self, state: Option<&State>, cost: u64, now_ms: u64) -> Outcome<State> {
        let p = self.buckets as usize;
        let b = self.bucket_ms;
        let now_bucket = now_ms / b;
        let (stored_head, mut counts) = match state {
            Some(s) => s.aligned(b, p),
            None => (now_bucket, vec![0; p]),
        };
        let head = stored_head.max(now_bucket);
        let shift = head - stored_head;
        if shift >= p as u64 {
            counts.fill(0);
        } else if shift > 0 {
            counts.rotate_right(shift as usize);
            counts[..shift as usize].fill(0);
        }
        let used = counts.iter().fold(0u64, |a, &c| a.saturating_add(c));
        let tally = Tally::new(self.limit, used, cost);
        if tally.admitted {
            counts[0] += cost;
        }
        // A bucket at index i stops counting once the current bucket is head − i + p.
        let time_of = |bucket: u64| bucket.saturating_mul(b).saturating_sub(now_ms);
        let reset_after_ms = counts.iter().position(|&c| c > 0).map_or(0, |i| {
            time_of((head - (i as u64).min(head)).saturating_add(p as u64))
        });
        let wait = || {
            let mut still_counted = used;
            for j in 1..=p {
                still_counted = still_counted.saturating_sub(counts[p - j]);
                if still_counted.saturating_add(cost) <= self.limit {
                    return time_of(head.saturating_add(j as u64));
                }
            }
            0
        };
        let decision = tally.decision(wait, reset_after_ms);
        let new_state = tally.writes().then(|| {
            let kept = counts.iter().rposition(|&c| c > 0).map_or(0, |i| i + 1);
            counts.truncate(kept);
            State {
                bucket_ms: b,
                head,
                counts,
            }
        });
        Outcome::new(decision, new_state)
    }

    fn parse(args: &[&[u8]], options: &[Option<u64>]) -> Result<Params, LimitError> {
        let (limit, window) = (count(args[0])?, parse_duration(args[1])?);
        let buckets = options[0].unwrap_or(DEFAULT_PRECISION.min(window));
        Params::new(limit, window, buckets)
    }

    type State = State;
    const ARGS: usize = 2;
    const OPTIONS: &'static [&'static str] = &["precision"];
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{admitted_in, forward, jittery, SLIDING};
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn buckets_slide_out_one_at_a_time() {
        // 4 per 400 ms in 4 buckets of 100 ms.
        let p = Params::new(4, 400, 4).unwrap();
        let mut s = None;
        for t in [0, 100, 200, 300] {
            let out = p.evaluate(s.as_ref(), 1, t);
            assert!(out.decision.allowed, "at {t}");
            s = out.new_state;
        }
        let out = p.evaluate(s.as_ref(), 1, 350);
        assert!(!out.decision.allowed);
        // Bucket 0 (0..100) stops counting when bucket 4 (400..500) begins.
        assert_eq!(out.decision.retry_after_ms, 50);
        assert_eq!(out.decision.reset_after_ms, 350);
        let out = p.evaluate(s.as_ref(), 2, 350);
        assert_eq!(out.decision.retry_after_ms, 150);
        let out = p.evaluate(s.as_ref(), 1, 400);
        assert!(out.decision.allowed);
        assert_eq!(out.decision.remaining, 0);
    }

    #[test]
    fn bucket_width_rounds_up_and_params_validate() {
        assert_eq!(Params::new(1, 1000, 3).unwrap().bucket_ms(), 334);
        assert_eq!(Params::new(0, 1000, 3), Err(LimitError::InvalidLimit));
        assert_eq!(Params::new(1, 0, 1), Err(LimitError::InvalidPeriod));
        assert_eq!(Params::new(1, 1000, 0), Err(LimitError::InvalidBuckets));
        assert_eq!(Params::new(1, 10, 11), Err(LimitError::InvalidBuckets));
        assert_eq!(
            Params::new(1, 1 << 40, MAX_BUCKETS + 1),
            Err(LimitError::InvalidBuckets)
        );
    }

    #[test]
    fn changing_the_bucket_width_keeps_the_counts() {
        let coarse = Params::new(10, 1000, 10).unwrap();
        let s = coarse.evaluate(None, 7, 5_050).new_state.unwrap();
        let fine = Params::new(10, 1000, 100).unwrap();
        let out = fine.evaluate(Some(&s), 4, 5_060);
        assert!(!out.decision.allowed);
        assert_eq!(out.decision.remaining, 3);
        let out = fine.evaluate(Some(&s), 3, 5_060);
        assert!(out.decision.allowed);
    }

    /// Seed 000's "1000 per 3 s" with 1-second buckets: the 900 + 100
    /// arriving after the 980 are held back so no 3-second span holds more
    /// than 1000, and a burst on each side of an edge gets 1000 in total.
    #[test]
    fn seed_000_edge_burst_is_held_to_the_limit() {
        let p = Params::new(1000, 3000, 3).unwrap();
        let mut times = Vec::new();
        for (second, n) in [(0u64, 10u64), (1, 10), (2, 980), (3, 900), (4, 100)] {
            times.extend((0..n).map(|i| second * 1000 + i * 1000 / n));
        }
        let admitted = SLIDING.admit_all(&p, &times);
        for from in (0..5000).step_by(1000) {
            assert!(admitted_in(&admitted, from, from + 3000) <= 1000);
        }
        assert_eq!(admitted_in(&admitted, 2000, 5000), 1000);
        let admitted = SLIDING.admit_all(&p, &[vec![2999; 1000], vec![3000; 1000]].concat());
        assert_eq!(admitted_in(&admitted, 2999, 3001), 1000);
    }

    proptest! {
        #[test]
        fn bounds_hold_for_aligned_spans_and_short_intervals(
            limit in 1u64..20,
            window in 1u64..60,
            p in 1u64..8,
            start in 0u64..1_000_000,
            steps in forward(25, 8, 150),
        ) {
            prop_assume!(p <= window);
            let params = Params::new(limit, window, p).unwrap();
            let b = params.bucket_ms();
            let r = SLIDING.run(&params, start, &steps, true);
            // 1. every run of p aligned buckets.
            let mut k = (start / b).saturating_sub(p);
            while k * b <= r.max_now {
                prop_assert!(admitted_in(&r.admitted, k * b, (k + p) * b) <= limit);
                k += 1;
            }
            // 2. every interval of length (p − 1)·b, at every alignment.
            let short = (p - 1) * b;
            if short > 0 {
                for &(t, _) in &r.admitted {
                    prop_assert!(admitted_in(&r.admitted, t, t + short) <= limit);
                    prop_assert!(admitted_in(&r.admitted, (t + 1).saturating_sub(short), t + 1) <= limit);
                }
            }
        }

        #[test]
        fn a_clock_stepping_back_never_panics_or_overadmits(
            limit in 1u64..20,
            window in 1u64..60,
            p in 1u64..8,
            start in 10_000u64..1_000_000,
            steps in jittery(25, 40, 8, 150),
        ) {
            prop_assume!(p <= window);
            let params = Params::new(limit, window, p).unwrap();
            let b = params.bucket_ms();
            let r = SLIDING.run(&params, start, &steps, false);
            // Every admission lands in a bucket between the lowest and highest
            // clock reading, and each p-bucket run holds at most `limit`.
            let buckets = r.max_now / b - r.min_now / b + 1;
            let total: u64 = r.admitted.iter().map(|(_, c)| c).sum();
            prop_assert!(total <= limit * buckets.div_ceil(p));
        }

        #[test]
        fn extreme_numbers_never_panic(
            limit in 1u64..,
            window in 1u64..,
            p in 1u64..=64,
            cost in proptest::num::u64::ANY,
            now in proptest::num::u64::ANY,
            bucket_ms in 1u64..,
            head in proptest::num::u64::ANY,
            counts in proptest::collection::vec(proptest::num::u64::ANY, 0..70),
        ) {
            prop_assume!(p <= window);
            let params = Params::new(limit, window, p).unwrap();
            let s = State { bucket_ms, head, counts };
            let _ = params.evaluate(Some(&s), cost, now);
            let _ = params.evaluate(None, cost, now);
        }

        #[test]
        fn encoding_round_trips(
            bucket_ms in 1u64..,
            head in proptest::num::u64::ANY,
            counts in proptest::collection::vec(proptest::num::u64::ANY, 0..50),
        ) {
            let s = State { bucket_ms, head, counts };
            prop_assert_eq!(State::decode(&s.encode()), Some(s));
        }

        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..80)) {
            let _ = State::decode(&bytes);
        }
    }
}
