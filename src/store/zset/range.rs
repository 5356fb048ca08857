//! Score and lex ranges of sorted sets, as Redis parses them: the bounds
//! (`1.5`, `(1.5`, `-inf`; `[a`, `(a`, `-`, `+`), the parsers of scores and bounds whose
//! accepted inputs and error texts match Redis 7.0 (on C's `strtod`, from
//! `crate::numbers`), the emptiness tests of a range, and Redis's index normalization for
//! ZRANGE and LRANGE.

use std::cmp::Ordering;

use bytes::Bytes;

use crate::numbers::{is_c_space, strtod};

/// Reply error for a ZADD / ZINCRBY score that is not a float.
pub const ERR_NOT_A_FLOAT: &str = "ERR value is not a valid float";
/// Reply error for a score range bound that is not a float (ZCOUNT, ZRANGEBYSCORE, ...).
pub const ERR_MIN_MAX_NOT_FLOAT: &str = "ERR min or max is not a float";
/// Reply error for a malformed lex range bound (ZRANGEBYLEX, ZLEXCOUNT, ...).
pub const ERR_MIN_MAX_NOT_STRING_RANGE: &str = "ERR min or max not valid string range item";
/// Reply error when ZINCRBY / ZADD INCR would produce NaN (for example inf + -inf).
pub const ERR_NAN_RESULT: &str = "ERR resulting score is not a number (NaN)";

/// One end of a score range (`1.5`, `(1.5`, `-inf`, `+inf`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ScoreBound {
    /// The score itself is in range.
    Inclusive(f64),
    /// The score itself is out of range (the `(` prefix).
    Exclusive(f64),
}

impl ScoreBound {
    /// `-inf`: every score is at or above it.
    pub const NEG_INF: ScoreBound = ScoreBound::Inclusive(f64::NEG_INFINITY);
    /// `+inf`: every score is at or below it.
    pub const POS_INF: ScoreBound = ScoreBound::Inclusive(f64::INFINITY);

    /// The bound's score.
    pub fn value(self) -> f64 {
        match self {
            ScoreBound::Inclusive(v) | ScoreBound::Exclusive(v) => v,
        }
    }

    /// Whether the bound excludes its own score.
    pub fn is_exclusive(self) -> bool {
        matches!(self, ScoreBound::Exclusive(_))
    }

    /// As a lower bound: does `score` lie above it?
    pub(super) fn admits_above(self, score: f64) -> bool {
        match self {
            ScoreBound::Inclusive(v) => score >= v,
            ScoreBound::Exclusive(v) => score > v,
        }
    }

    /// As an upper bound: does `score` lie below it?
    pub(super) fn admits_below(self, score: f64) -> bool {
        match self {
            ScoreBound::Inclusive(v) => score <= v,
            ScoreBound::Exclusive(v) => score < v,
        }
    }
}

/// One end of a lex range (`[a`, `(a`, `-`, `+`).
///
/// `-` and `+` stay distinct as either end, as in Redis: `ZRANGEBYLEX k + +` is empty.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LexBound {
    /// `-`: below every string.
    NegInf,
    /// `+`: above every string.
    PosInf,
    /// `[x`: `x` itself is in range.
    Inclusive(Bytes),
    /// `(x`: `x` itself is out of range.
    Exclusive(Bytes),
}

impl LexBound {
    /// As a lower bound: does `member` lie above it?
    pub(super) fn admits_above(&self, member: &[u8]) -> bool {
        match self {
            LexBound::NegInf => true,
            LexBound::PosInf => false,
            LexBound::Inclusive(b) => member >= &b[..],
            LexBound::Exclusive(b) => member > &b[..],
        }
    }

    /// As an upper bound: does `member` lie below it?
    pub(super) fn admits_below(&self, member: &[u8]) -> bool {
        match self {
            LexBound::NegInf => false,
            LexBound::PosInf => true,
            LexBound::Inclusive(b) => member <= &b[..],
            LexBound::Exclusive(b) => member < &b[..],
        }
    }

    /// Redis marks `-` and `+` exclusive, which makes `- -` and `+ +` empty ranges.
    pub(super) fn is_exclusive(&self) -> bool {
        !matches!(self, LexBound::Inclusive(_))
    }
}

/// Parse a ZADD / ZINCRBY score as Redis's `string2d` does (C `strtod`, whole string).
///
/// Accepts decimal and hex floats and `inf`/`infinity` in any case with a sign; rejects
/// empty input, leading or trailing spaces, NaN, and values that overflow to infinity or
/// underflow to zero (subnormals are fine).
pub fn parse_score(arg: &[u8]) -> Result<f64, &'static str> {
    if let Some(score) = parse_small_integer(arg) {
        return Ok(score);
    }
    if arg.first().is_none_or(|b| is_c_space(*b)) {
        return Err(ERR_NOT_A_FLOAT);
    }
    let r = strtod(arg);
    if r.len != arg.len() || r.range_error || r.value.is_nan() {
        return Err(ERR_NOT_A_FLOAT);
    }
    Ok(r.value)
}

/// The common case of a score: an optional sign and 1 to 15 decimal digits, which
/// `strtod` reads exactly (every such integer is below 2^53), so the value is the integer
/// itself, `-0` included. None for anything else, which takes the full parser.
fn parse_small_integer(arg: &[u8]) -> Option<f64> {
    let (negative, digits) = match arg.split_first()? {
        (b'-', rest) => (true, rest),
        (b'+', rest) => (false, rest),
        _ => (false, arg),
    };
    if digits.is_empty() || digits.len() > 15 {
        return None;
    }
    let mut n: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        n = n * 10 + u64::from(d - b'0');
    }
    // n < 10^15 < 2^53: the conversion is exact.
    let value = n as f64;
    Some(if negative { -value } else { value })
}

/// Parse a score range bound as Redis's `zslParseRange` does.
///
/// `(` makes it exclusive. Like Redis this is plain `strtod` up to a NUL: leading spaces
/// are allowed, out-of-range values saturate, and an empty number (`""` or `"("`) is 0.
pub fn parse_score_bound(arg: &[u8]) -> Result<ScoreBound, &'static str> {
    let (body, exclusive) = match arg.split_first() {
        Some((b'(', rest)) => (rest, true),
        _ => (arg, false),
    };
    let r = strtod(body);
    let stops_at_end = body.get(r.len).is_none_or(|b| *b == 0);
    if !stops_at_end || r.value.is_nan() {
        return Err(ERR_MIN_MAX_NOT_FLOAT);
    }
    Ok(if exclusive {
        ScoreBound::Exclusive(r.value)
    } else {
        ScoreBound::Inclusive(r.value)
    })
}

/// Parse a lex range bound as Redis's `zslParseLexRangeItem` does: `-`, `+`, `[x`, `(x`.
pub fn parse_lex_bound(arg: &[u8]) -> Result<LexBound, &'static str> {
    // Redis reads `+`/`-` from a NUL-terminated buffer, so a NUL may follow them.
    let alone = arg.get(1).is_none_or(|b| *b == 0);
    match arg.split_first() {
        Some((b'+', _)) if alone => Ok(LexBound::PosInf),
        Some((b'-', _)) if alone => Ok(LexBound::NegInf),
        Some((b'(', rest)) => Ok(LexBound::Exclusive(Bytes::copy_from_slice(rest))),
        Some((b'[', rest)) => Ok(LexBound::Inclusive(Bytes::copy_from_slice(rest))),
        _ => Err(ERR_MIN_MAX_NOT_STRING_RANGE),
    }
}

/// Redis's ZRANGE / LRANGE index rules: negative indexes count from the end, `start` is
/// clamped to 0 and `stop` to the last index; None when the range is empty.
pub fn normalize_range(start: i64, stop: i64, len: usize) -> Option<(usize, usize)> {
    let len = i128::try_from(len).ok()?;
    let mut start = i128::from(start);
    let mut stop = i128::from(stop);
    if start < 0 {
        start += len;
    }
    if stop < 0 {
        stop += len;
    }
    start = start.max(0);
    if start > stop || start >= len {
        return None;
    }
    stop = stop.min(len - 1);
    Some((usize::try_from(start).ok()?, usize::try_from(stop).ok()?))
}

/// Redis's `zslParseRange` emptiness test.
pub(super) fn score_range_is_empty(min: ScoreBound, max: ScoreBound) -> bool {
    let (a, b) = (min.value(), max.value());
    a.is_nan() || b.is_nan() || a > b || (a == b && (min.is_exclusive() || max.is_exclusive()))
}

/// Redis's `sdscmplex`-based emptiness test (`-`/`+` below/above every string).
pub(super) fn lex_range_is_empty(min: &LexBound, max: &LexBound) -> bool {
    use LexBound::*;
    let ord = match (min, max) {
        (NegInf, NegInf) | (PosInf, PosInf) => Ordering::Equal,
        (NegInf, _) | (_, PosInf) => Ordering::Less,
        (PosInf, _) | (_, NegInf) => Ordering::Greater,
        (Inclusive(a) | Exclusive(a), Inclusive(b) | Exclusive(b)) => a.cmp(b),
    };
    ord == Ordering::Greater
        || (ord == Ordering::Equal && (min.is_exclusive() || max.is_exclusive()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn score_parsing_matches_redis_string2d() {
        // Expectations observed on redis-server 7.0.15 (ZADD k <arg> m; ZSCORE k m).
        let ok: &[(&str, f64)] = &[
            ("1", 1.0),
            ("0x10", 16.0),
            ("0x1p3", 8.0),
            ("0X1.8P1", 3.0),
            ("0e-400", 0.0),
            ("1e-310", 1e-310),
            ("infinity", f64::INFINITY),
            ("INF", f64::INFINITY),
            ("+inf", f64::INFINITY),
            ("-Inf", f64::NEG_INFINITY),
            (".5", 0.5),
            ("5.", 5.0),
            ("+.5e1", 5.0),
            ("3e-324", 5e-324),
            ("-1.5e-10", -1.5e-10),
        ];
        for (arg, want) in ok {
            assert_eq!(parse_score(arg.as_bytes()), Ok(*want), "{arg:?}");
        }
        for arg in [
            " 1",
            "1 ",
            "1e400",
            "-1e400",
            "1e-400",
            "nan",
            "NaN",
            "",
            "1e",
            "1e+",
            ".",
            "0x",
            "infinit",
            "+",
            "-",
            "2e-324",
            "1_0",
            "\u{661}",
            "1\0",
            "nan(1)",
            "0x1p99999",
        ] {
            assert_eq!(parse_score(arg.as_bytes()), Err(ERR_NOT_A_FLOAT), "{arg:?}");
        }
    }

    proptest! {
        #[test]
        fn integer_fast_path_agrees_with_strtod(
            sign in prop::sample::select(vec!["", "-", "+"]),
            digits in "[0-9]{1,17}",
        ) {
            let arg = format!("{sign}{digits}");
            let slow = strtod(arg.as_bytes());
            prop_assert_eq!(slow.len, arg.len());
            prop_assert_eq!(
                parse_score(arg.as_bytes()).map(f64::to_bits),
                Ok(slow.value.to_bits()),
                "{:?}", arg
            );
        }
    }

    #[test]
    fn integer_fast_path_keeps_negative_zero_and_limits() {
        assert_eq!(
            parse_score(b"-0").map(f64::to_bits),
            Ok((-0.0f64).to_bits())
        );
        assert_eq!(parse_score(b"+0").map(f64::to_bits), Ok(0.0f64.to_bits()));
        assert_eq!(parse_score(b"-000"), Ok(-0.0));
        assert_eq!(parse_score(b"999999999999999"), Ok(999_999_999_999_999.0));
        assert_eq!(
            parse_score(b"9007199254740993"),
            Ok(9_007_199_254_740_992.0)
        );
        assert_eq!(parse_score(b"--1"), Err(ERR_NOT_A_FLOAT));
        assert_eq!(parse_score(b"+-1"), Err(ERR_NOT_A_FLOAT));
        assert_eq!(parse_score(b"1-"), Err(ERR_NOT_A_FLOAT));
    }

    #[test]
    fn score_bound_parsing_matches_redis_zslparserange() {
        use ScoreBound::{Exclusive as Ex, Inclusive as In};
        let ok: &[(&[u8], ScoreBound)] = &[
            (b"", In(0.0)),
            (b"(", Ex(0.0)),
            (b" 1", In(1.0)),
            (b"( 1", Ex(1.0)),
            (b"\t1", In(1.0)),
            (b"(1", Ex(1.0)),
            (b"1e400", In(f64::INFINITY)),
            (b"1e-400", In(0.0)),
            (b"(inf", Ex(f64::INFINITY)),
            (b"-inf", In(f64::NEG_INFINITY)),
            (b"+inf", In(f64::INFINITY)),
            (b"0x1", In(1.0)),
            (b"1\0abc", In(1.0)),
            (b"(1\0x", Ex(1.0)),
        ];
        for (arg, want) in ok {
            assert_eq!(parse_score_bound(arg), Ok(*want), "{arg:?}");
        }
        for arg in ["1 ", "nan", "(nan", "-", "((1", "[1", " ", "1x"] {
            assert_eq!(
                parse_score_bound(arg.as_bytes()),
                Err(ERR_MIN_MAX_NOT_FLOAT),
                "{arg:?}"
            );
        }
    }

    #[test]
    fn lex_bound_parsing_matches_redis() {
        assert_eq!(parse_lex_bound(b"-"), Ok(LexBound::NegInf));
        assert_eq!(parse_lex_bound(b"+"), Ok(LexBound::PosInf));
        assert_eq!(parse_lex_bound(b"-\0x"), Ok(LexBound::NegInf));
        assert_eq!(parse_lex_bound(b"["), Ok(LexBound::Inclusive(Bytes::new())));
        assert_eq!(
            parse_lex_bound(b"(a\0b"),
            Ok(LexBound::Exclusive(Bytes::from_static(b"a\0b")))
        );
        for arg in ["", "a", "-x", "+x", "++"] {
            assert_eq!(
                parse_lex_bound(arg.as_bytes()),
                Err(ERR_MIN_MAX_NOT_STRING_RANGE),
                "{arg:?}"
            );
        }
    }

    #[test]
    fn normalize_range_follows_redis() {
        assert_eq!(normalize_range(0, -1, 5), Some((0, 4)));
        assert_eq!(normalize_range(-2, -1, 5), Some((3, 4)));
        assert_eq!(normalize_range(-100, 100, 5), Some((0, 4)));
        assert_eq!(normalize_range(3, 1, 5), None);
        assert_eq!(normalize_range(5, 10, 5), None);
        assert_eq!(normalize_range(0, -6, 5), None);
        assert_eq!(normalize_range(0, -1, 0), None);
        assert_eq!(normalize_range(i64::MIN, i64::MAX, 3), Some((0, 2)));
        assert_eq!(normalize_range(i64::MAX, i64::MIN, 3), None);
    }

    proptest! {
        #[test]
        fn format_round_trips(bits in any::<u64>()) {
            let v = f64::from_bits(bits);
            prop_assume!(!v.is_nan());
            let text = crate::numbers::format_double(v);
            let back = parse_score(text.as_bytes()).unwrap();
            prop_assert_eq!(back.to_bits(), v.to_bits());
        }
    }
}
