//! redis-cell's `CL.THROTTLE`, reply-compatible: arguments
//! `key max_burst count_per_period period [quantity]` (period in seconds,
//! quantity 1 by default, 0 peeks) and the 5-integer reply
//! `[limited 0|1, limit = max_burst + 1, remaining, retry_after s or -1,
//! reset_after s]`.
//!
//! The arithmetic follows redis-cell 0.3/0.4 (`src/cell/mod.rs`,
//! `src/lib.rs`) step by step, in nanoseconds: emission interval
//! `T = (period·10⁹ as f64 / count as f64) as i64`, tolerance
//! `τ = T·(max_burst + 1)`, `new_tat = max(tat, now) + T·quantity`, blocked
//! when `now < new_tat − τ` (then `retry = new_tat − τ − now` if
//! `T·quantity ≤ τ`, else -1 s, and `ttl = tat − now`), otherwise
//! `ttl = new_tat − now`; `remaining = (µs(τ − ttl) as f64 / µs(T) as f64) as i64`
//! when `τ − ttl > −T`, else 0. Durations become reply seconds as redis-cell
//! does: `as_seconds_f64() as i64`, plus one when the sub-second part has a
//! whole millisecond (so 2.0005 s replies 2, 2.001 s replies 3).
//!
//! Error texts are redis-cell 0.5.0's, which wraps every message of its own as
//! `Cell error: Store error: <message>` (`… Usage: …`, `… Couldn't parse as
//! integer: …`, `… Zero rates are not supported`). Where redis-cell has no check and would compute garbage or
//! overflow (negative arguments, `max_burst + 1` or `T·(max_burst + 1)` or
//! `period·10⁹` beyond i64), Tollgate replies `ERR value is not an integer or
//! out of range` as Dragonfly does. A quantity whose `T·quantity` would
//! overflow is simply an impossible request (limited, retry -1).
//!
//! Differences that cannot be seen in replies: `now` is the entry's
//! millisecond clock (redis-cell reads the nanosecond wall clock); the TAT is
//! stored in Tollgate's binary state instead of a decimal string; the key's
//! TTL is rounded up to whole ms (redis-cell truncates), and a stored TAT in
//! the past counts as absent, as an expired key would.

use super::{encoder, info_i64, put_u128, sat_u64, ttl_for, Decision, LimitError};
use super::{Codec, Named};
use super::{Outcome, Reader};

const NANOS_PER_SEC: i128 = 1_000_000_000;
const NANOS_PER_MS: i128 = 1_000_000;

/// Validated `CL.THROTTLE` parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    max_burst: i64,
    emission_ns: i64,
    tolerance_ns: i64,
}

impl Params {
    /// `count` per `period_s` seconds with bursts of `max_burst + 1`, as
    /// redis-cell computes them.
    pub fn new(max_burst: i64, count: i64, period_s: i64) -> Result<Params, LimitError> {
        if max_burst < 0 || count < 0 || period_s < 0 {
            return Err(LimitError::CellOutOfRange);
        }
        let period_ns = period_s
            .checked_mul(NANOS_PER_SEC as i64)
            .ok_or(LimitError::CellOutOfRange)?;
        // redis-cell's Rate::per_period, float division included.
        let emission_ns = if count == 0 || period_ns == 0 {
            0
        } else {
            (period_ns as f64 / count as f64) as i64
        };
        if emission_ns == 0 {
            return Err(LimitError::CellZeroRate);
        }
        let tolerance_ns = max_burst
            .checked_add(1)
            .and_then(|limit| emission_ns.checked_mul(limit))
            .ok_or(LimitError::CellOutOfRange)?;
        Ok(Params {
            max_burst,
            emission_ns,
            tolerance_ns,
        })
    }

    /// Parses the arguments after the command name (`key max_burst count
    /// period [quantity]`, the key is not looked at) into parameters and the
    /// quantity, with redis-cell's checks in redis-cell's order.
    pub fn parse_args<A: AsRef<[u8]>>(args: &[A]) -> Result<(Params, u64), LimitError> {
        if args.len() != 4 && args.len() != 5 {
            return Err(LimitError::CellUsage);
        }
        let max_burst = parse_i64(args[1].as_ref())?;
        let count = parse_i64(args[2].as_ref())?;
        let period = parse_i64(args[3].as_ref())?;
        let quantity = match args.get(4) {
            Some(arg) => parse_i64(arg.as_ref())?,
            None => 1,
        };
        let params = Params::new(max_burst, count, period)?;
        let quantity = u64::try_from(quantity).map_err(|_| LimitError::CellOutOfRange)?;
        Ok((params, quantity))
    }

    /// The reply's limit: `max_burst + 1`.
    pub fn limit(&self) -> i64 {
        self.max_burst + 1
    }

    /// The emission interval in nanoseconds.
    pub fn emission_ns(&self) -> i64 {
        self.emission_ns
    }
}

/// redis-cell's `parse_i64`: Rust's `i64` parser (a leading `+` or `-`,
/// digits, nothing else) and its error text.
fn parse_i64(arg: &[u8]) -> Result<i64, LimitError> {
    // Plain digits that cannot overflow (the usual argument) need no `str` parse.
    match super::short_decimal(arg) {
        // At most 18 digits: below i64::MAX.
        Some(v) => Ok(v as i64),
        None => parse_i64_general(arg),
    }
}

/// [`parse_i64`] past its fast path, out of line so that the fast path (three
/// times per `CL.THROTTLE`) does not pay for this one's stack frame.
#[cold]
#[inline(never)]
fn parse_i64_general(arg: &[u8]) -> Result<i64, LimitError> {
    std::str::from_utf8(arg)
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .ok_or_else(|| LimitError::CellNotInteger(String::from_utf8_lossy(arg).into_owned()))
}

/// The theoretical arrival time, in nanoseconds since epoch 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct State {
    tat_ns: u128,
}

impl Codec for State {
    /// Compact binary form: header, TAT in ns (u128) (20 bytes).
    #[inline]
    fn encode(&self) -> Vec<u8> {
        let mut out = encoder(State::TAG, 16);
        put_u128(&mut out, self.tat_ns);
        out
    }

    /// Parses [`State::encode`]'s output; `None` for anything else.
    fn decode(bytes: &[u8]) -> Option<State> {
        let mut r = Reader::open(bytes, State::TAG)?;
        let state = State { tat_ns: r.u128()? };
        r.finish(state)
    }

    /// Fields for `LIMIT.INFO`.
    fn info(&self) -> Vec<(&'static str, i64)> {
        vec![(
            "tat_ms",
            info_i64(sat_u64(self.tat_ns / NANOS_PER_MS as u128)),
        )]
    }
}

/// A `CL.THROTTLE` evaluation: the common outcome and redis-cell's reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Throttled {
    /// Decision (in ms), state to store and key TTL, as for every limiter.
    pub outcome: Outcome<State>,
    /// `[limited, limit, remaining, retry_after_s, reset_after_s]`, exactly as
    /// redis-cell replies.
    pub reply: [i64; 5],
}

/// Applies `quantity` at `now_ms` as `CL.THROTTLE` does (0 peeks).
pub fn throttle(state: Option<&State>, params: &Params, quantity: u64, now_ms: u64) -> Throttled {
    let run = RateLimit::run(state, params, quantity, now_ms);
    let retry_after_ms = if run.limited && run.retry_after_ns >= 0 {
        ceil_ms(run.retry_after_ns)
    } else {
        -1
    };
    let reset_after_ms = ceil_ms(run.ttl_ns.max(0));
    let decision = Decision {
        allowed: !run.limited,
        limit: params.limit() as u64,
        remaining: run.remaining.max(0) as u64,
        retry_after_ms,
        reset_after_ms: reset_after_ms as u64,
    };
    let new_state = (!run.limited && quantity > 0).then(|| State {
        tat_ns: u128::try_from(run.new_tat_ns).unwrap_or(0),
    });
    Throttled {
        outcome: Outcome {
            decision,
            new_state,
            ttl_ms: ttl_for(reset_after_ms as u64),
        },
        reply: [
            i64::from(run.limited),
            params.limit(),
            run.remaining,
            reply_seconds(run.retry_after_ns),
            reply_seconds(run.ttl_ns),
        ],
    }
}

/// The common limiter entry point: [`throttle`] without the reply.
pub fn evaluate(state: Option<&State>, params: &Params, cost: u64, now_ms: u64) -> Outcome<State> {
    throttle(state, params, cost, now_ms).outcome
}

/// redis-cell's `rate_limit` results, in nanoseconds.
#[derive(Debug)]
struct RateLimit {
    limited: bool,
    remaining: i64,
    /// -1 s when not limited or when the quantity can never fit.
    retry_after_ns: i128,
    /// redis-cell's `ttl`, which it replies as reset_after.
    ttl_ns: i128,
    new_tat_ns: i128,
}

impl RateLimit {
    fn run(state: Option<&State>, params: &Params, quantity: u64, now_ms: u64) -> RateLimit {
        let now = i128::from(now_ms) * NANOS_PER_MS;
        let emission = i128::from(params.emission_ns);
        let tolerance = i128::from(params.tolerance_ns);
        let tat = state
            .map_or(now, |s| i128::try_from(s.tat_ns).unwrap_or(i128::MAX))
            .max(now);
        // Below 2^63 · 2^64: cannot overflow.
        let increment = emission * i128::from(quantity);
        let new_tat = tat.saturating_add(increment);
        let diff = now - (new_tat - tolerance);
        let (limited, retry_after_ns, ttl_ns) = if diff < 0 {
            let retry = if increment <= tolerance {
                -diff
            } else {
                -NANOS_PER_SEC
            };
            (true, retry, tat - now)
        } else {
            (false, -NANOS_PER_SEC, new_tat - now)
        };
        let next = tolerance - ttl_ns;
        let remaining = if next > -emission {
            // Whole microseconds, divided as floats, truncated: as redis-cell.
            (to_f64(div_rem(next, 1_000).0) / to_f64(div_rem(emission, 1_000).0)) as i64
        } else {
            0
        };
        RateLimit {
            limited,
            remaining,
            retry_after_ns,
            ttl_ns,
            new_tat_ns: new_tat,
        }
    }
}

/// A duration in ns as redis-cell replies it: `as_seconds_f64() as i64`,
/// plus one if `subsec_milliseconds() > 0`.
fn reply_seconds(ns: i128) -> i64 {
    let (secs, nanos) = div_rem(ns, NANOS_PER_SEC);
    let whole = (to_f64(secs) + to_f64(nanos) / 1e9) as i64;
    if nanos / NANOS_PER_MS > 0 {
        whole.saturating_add(1)
    } else {
        whole
    }
}

fn ceil_ms(ns: i128) -> i64 {
    let (ms, rest) = div_rem(ns, NANOS_PER_MS);
    i64::try_from(ms + i128::from(rest > 0)).unwrap_or(i64::MAX)
}

/// `(a / b, a % b)` rounding toward zero as i128's operators do, through the
/// hardware's i64 division when `a` fits (an i128 division is a library call).
fn div_rem(a: i128, b: i128) -> (i128, i128) {
    match (i64::try_from(a), i64::try_from(b)) {
        (Ok(a), Ok(b)) if b > 0 => (i128::from(a / b), i128::from(a % b)),
        _ => (a / b, a % b),
    }
}

/// `v as f64`, through i64's conversion when `v` fits (the same rounding of
/// the same integer, without i128's library call).
fn to_f64(v: i128) -> f64 {
    match i64::try_from(v) {
        Ok(v) => v as f64,
        Err(_) => wide_to_f64(v),
    }
}

/// i128's conversion, out of line: inlined, the optimizer sees that both arms of
/// [`to_f64`] compute `v as f64` and keeps only the library call (`__floattidf`,
/// some 45 instructions, three times per `CL.THROTTLE`).
#[cold]
#[inline(never)]
fn wide_to_f64(v: i128) -> f64 {
    v as f64
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{drive, forward, Run};
    use super::*;
    use proptest::prelude::*;

    const START: u64 = 1_700_000_000_000;

    fn args(s: &str) -> Vec<&[u8]> {
        s.split(' ').map(str::as_bytes).collect()
    }

    fn parse(s: &str) -> Result<(Params, u64), LimitError> {
        Params::parse_args(&args(s))
    }

    fn run(params: &Params, start: u64, steps: &[(i64, u64)]) -> Run {
        drive(
            start,
            steps,
            true,
            State::encode,
            State::decode,
            |s, c, t| evaluate(s, params, c, t),
        )
    }

    #[test]
    fn readme_example() {
        for line in ["user123 15 30 60 1", "user123 15 30 60"] {
            let (params, quantity) = parse(line).unwrap();
            let t = throttle(None, &params, quantity, START);
            assert_eq!(t.reply, [0, 16, 15, -1, 2]);
            assert_eq!(t.outcome.decision.remaining, 15);
            assert_eq!(t.outcome.decision.reset_after_ms, 2_000);
            assert_eq!(t.outcome.ttl_ms, 2_000);
        }
    }

    /// redis-cell's own `it_rate_limits` table: limit 5 (max_burst 4), 1 per
    /// second; (offset ms, quantity, remaining, reset_after ns, retry_after ns, limited).
    #[test]
    fn redis_cell_rate_limit_table() {
        const S: i128 = NANOS_PER_SEC;
        const MS: i128 = NANOS_PER_MS;
        let params = Params::new(4, 1, 1).unwrap();
        let cases: [(u64, u64, i64, i128, i128, bool); 15] = [
            (0, 6, 5, 0, -S, true),
            (0, 1, 4, S, -S, false),
            (0, 1, 3, 2 * S, -S, false),
            (0, 1, 2, 3 * S, -S, false),
            (0, 1, 1, 4 * S, -S, false),
            (0, 1, 0, 5 * S, -S, false),
            (0, 1, 0, 5 * S, S, true),
            (3000, 1, 2, 3000 * MS, -S, false),
            (3100, 1, 1, 3900 * MS, -S, false),
            (4000, 1, 1, 4000 * MS, -S, false),
            (8000, 1, 4, 1000 * MS, -S, false),
            (9500, 1, 4, 1000 * MS, -S, false),
            (9500, 0, 4, S, -S, false),
            (9500, 2, 2, 3 * S, -S, false),
            (9500, 5, 2, 3 * S, 3 * S, true),
        ];
        let mut state = None;
        for (i, &(offset, quantity, remaining, reset, retry, limited)) in cases.iter().enumerate() {
            let g = RateLimit::run(state.as_ref(), &params, quantity, START + offset);
            assert_eq!(
                (g.limited, g.remaining, g.ttl_ns, g.retry_after_ns),
                (limited, remaining, reset, retry),
                "case {i}"
            );
            if let Some(s) = throttle(state.as_ref(), &params, quantity, START + offset)
                .outcome
                .new_state
            {
                state = Some(s);
            }
        }
    }

    #[test]
    fn reply_rounds_partial_seconds_up_by_whole_milliseconds() {
        assert_eq!(reply_seconds(-NANOS_PER_SEC), -1);
        assert_eq!(reply_seconds(0), 0);
        assert_eq!(reply_seconds(500_000), 0);
        assert_eq!(reply_seconds(1_000_000), 1);
        assert_eq!(reply_seconds(1_500_000_000), 2);
        assert_eq!(reply_seconds(3_900_000_000), 4);
        assert_eq!(reply_seconds(2_000_500_000), 2);
        assert_eq!(reply_seconds(-500_000_000), 0);
        // A request 1.1 s too early: retry 1.1 s replies 2, reset 4.1 s replies 5.
        let params = Params::new(4, 1, 1).unwrap();
        let s = throttle(None, &params, 5, START).outcome.new_state.unwrap();
        let t = throttle(Some(&s), &params, 2, START + 900);
        assert_eq!(t.reply, [1, 5, 0, 2, 5]);
        assert_eq!(t.outcome.decision.retry_after_ms, 1_100);
        assert_eq!(t.outcome.decision.reset_after_ms, 4_100);
        assert_eq!(t.outcome.new_state, None);
    }

    #[test]
    fn argument_errors_use_redis_cell_texts() {
        let usage = "Cell error: Store error: Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]";
        for bad in ["k 1 2", "k 1 2 3 4 5", "k"] {
            assert_eq!(parse(bad).unwrap_err().to_string(), usage);
        }
        assert_eq!(
            Params::parse_args::<&[u8]>(&[]).unwrap_err().to_string(),
            usage
        );
        assert_eq!(
            parse("k abc 1 1").unwrap_err().to_string(),
            "Cell error: Store error: Couldn't parse as integer: abc"
        );
        assert_eq!(
            parse("k 1 1 1 1.5").unwrap_err(),
            LimitError::CellNotInteger("1.5".into())
        );
        assert_eq!(
            parse("k 1 99999999999999999999 1").unwrap_err(),
            LimitError::CellNotInteger("99999999999999999999".into())
        );
        assert_eq!(
            Params::parse_args(&[b"k", b"1", b"\xff", b"1"]).unwrap_err(),
            LimitError::CellNotInteger("\u{fffd}".into())
        );
        // Parsing comes before the rate check, quantity included.
        assert_eq!(
            parse("k 1 0 1 x").unwrap_err(),
            LimitError::CellNotInteger("x".into())
        );
        for zero in ["k 10 1 0", "k 10 0 1", "k 10 2000000000 1"] {
            assert_eq!(
                parse(zero).unwrap_err().to_string(),
                "Cell error: Store error: Zero rates are not supported"
            );
        }
        for out_of_range in [
            "k -1 1 1",
            "k 1 -1 1",
            "k 1 1 -1",
            "k 1 1 1 -1",
            "k 9223372036854775807 1 1",
            "k 1 1 9300000000",
            "k 4611686018427387904 1 1",
        ] {
            assert_eq!(
                parse(out_of_range).unwrap_err().to_string(),
                "ERR value is not an integer or out of range",
                "{out_of_range}"
            );
        }
        let (p, q) = parse("k +5 +10 +60 +0").unwrap();
        assert_eq!((p.limit(), p.emission_ns(), q), (6, 6_000_000_000, 0));
    }

    #[test]
    fn impossible_quantities_are_limited_without_retry() {
        let (params, _) = parse("k 15 30 60").unwrap();
        let t = throttle(None, &params, 17, START);
        assert_eq!(t.reply, [1, 16, 16, -1, 0]);
        let t = throttle(None, &params, u64::MAX, u64::MAX);
        assert_eq!(t.reply[0], 1);
        assert_eq!(t.reply[3], -1);
        let t = throttle(None, &params, 16, START);
        assert_eq!(t.reply, [0, 16, 0, -1, 32]);
    }

    #[test]
    fn peeks_report_without_writing() {
        let (params, _) = parse("k 1 1 10").unwrap();
        let t = throttle(None, &params, 0, START);
        assert_eq!(t.reply, [0, 2, 2, -1, 0]);
        assert_eq!(t.outcome.new_state, None);
        let s = throttle(None, &params, 2, START).outcome.new_state.unwrap();
        let t = throttle(Some(&s), &params, 0, START + 5_000);
        assert_eq!(t.reply, [0, 2, 0, -1, 15]);
        assert_eq!(t.outcome.new_state, None);
        // A peek after max_burst shrank reports limited, as redis-cell does.
        let (smaller, _) = parse("k 0 1 10").unwrap();
        let t = throttle(Some(&s), &smaller, 0, START);
        assert_eq!(t.reply, [1, 1, 0, 10, 20]);
    }

    proptest! {
        #[test]
        fn never_admits_more_than_burst_plus_emissions(
            max_burst in 0i64..10,
            count in 1i64..20,
            period in 1i64..5,
            steps in forward(400, 4, 150),
        ) {
            let params = Params::new(max_burst, count, period).unwrap();
            let r = run(&params, START, &steps);
            let tolerance = i128::from(params.tolerance_ns);
            let emission = i128::from(params.emission_ns());
            let mut admitted = 0i128;
            for &(t, c) in &r.admitted {
                admitted += i128::from(c);
                let elapsed = i128::from(t - START) * NANOS_PER_MS;
                prop_assert!(admitted * emission <= tolerance + elapsed);
            }
        }

        #[test]
        fn extreme_numbers_never_panic(
            max_burst in 0i64..,
            count in 1i64..,
            period in 0i64..=9_223_372_036,
            quantity in proptest::num::u64::ANY,
            now in proptest::num::u64::ANY,
            tat_ns in proptest::num::u128::ANY,
        ) {
            if let Ok(params) = Params::new(max_burst, count, period) {
                let s = State { tat_ns };
                let _ = throttle(Some(&s), &params, quantity, now);
                let _ = throttle(None, &params, quantity, now);
            }
        }

        #[test]
        fn parse_args_never_panics(
            parts in proptest::collection::vec(proptest::collection::vec(proptest::num::u8::ANY, 0..12), 0..7),
        ) {
            let refs: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
            let _ = Params::parse_args(&refs);
        }

        #[test]
        fn encoding_round_trips(tat_ns in proptest::num::u128::ANY) {
            let s = State { tat_ns };
            prop_assert_eq!(State::decode(&s.encode()), Some(s));
        }

        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..40)) {
            let _ = State::decode(&bytes);
        }
    }
}
