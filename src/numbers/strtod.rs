//! C's `strtod`, reimplemented so that numbers parse exactly as Redis (and Lua, and
//! cjson) read them: the longest prefix that is a float, decimal or hexadecimal, `inf`,
//! `infinity` and `nan(...)` in any case, in the "C" locale, rounded to nearest.
//!
//! Ours rather than libc's so that it takes a byte slice (Redis arguments may hold NUL
//! bytes; C stops there, and so does this) and so that every node of a cluster parses the
//! same way whatever its C library; the tests compare it with glibc, the library Redis
//! runs on, over random and edge-case inputs.

/// Outcome of parsing the longest float prefix, as C `strtod` does.
pub struct Strtod {
    /// The number read (0 when none was found).
    pub value: f64,
    /// Bytes consumed; 0 when no number was found (then `value` is 0).
    pub len: usize,
    /// `errno == ERANGE` with a result of ±HUGE_VAL or zero (Redis's `string2d` test).
    pub range_error: bool,
}

/// C's `isspace` in the "C" locale.
pub fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// C `strtod` in the "C" locale with round-to-nearest, on a byte string (stops at NUL).
pub fn strtod(s: &[u8]) -> Strtod {
    let spaces = s.iter().take_while(|b| is_c_space(**b)).count();
    let (negative, i) = sign(s, spaces);
    let rest = &s[i..];
    let parsed = match_infinity(rest)
        .map(|n| (f64::INFINITY, n, false))
        .or_else(|| match_nan(rest).map(|n| (f64::NAN, n, false)))
        .or_else(|| parse_hex(rest))
        .or_else(|| parse_decimal(rest));
    match parsed {
        Some((magnitude, used, range_error)) => Strtod {
            value: if negative { -magnitude } else { magnitude },
            len: i + used,
            range_error,
        },
        None => Strtod {
            value: 0.0,
            len: 0,
            range_error: false,
        },
    }
}

/// An optional `+` or `-` at `i`: whether it is `-`, and where what follows starts.
fn sign(s: &[u8], i: usize) -> (bool, usize) {
    match s.get(i) {
        Some(b'-') => (true, i + 1),
        Some(b'+') => (false, i + 1),
        _ => (false, i),
    }
}

fn starts_with_ignore_case(s: &[u8], prefix: &[u8]) -> bool {
    s.len() >= prefix.len() && s[..prefix.len()].eq_ignore_ascii_case(prefix)
}

/// `inf` or `infinity`, any case: bytes consumed.
fn match_infinity(s: &[u8]) -> Option<usize> {
    if starts_with_ignore_case(s, b"infinity") {
        Some(8)
    } else if starts_with_ignore_case(s, b"inf") {
        Some(3)
    } else {
        None
    }
}

/// `nan` optionally followed by `(n-char-sequence)`: bytes consumed.
fn match_nan(s: &[u8]) -> Option<usize> {
    if !starts_with_ignore_case(s, b"nan") {
        return None;
    }
    if s.get(3) == Some(&b'(') {
        let body = s[4..]
            .iter()
            .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_')
            .count();
        if s.get(4 + body) == Some(&b')') {
            return Some(5 + body);
        }
    }
    Some(3)
}

/// Digits of `s` from `i` satisfying `is_digit`: how many.
fn digit_run(s: &[u8], i: usize, is_digit: fn(&u8) -> bool) -> usize {
    s.get(i..)
        .map_or(0, |t| t.iter().take_while(|b| is_digit(b)).count())
}

/// An exponent (`e`/`p` marker, optional sign, digits) at `i`: (value saturated to
/// ±1e9, bytes consumed), or None when it has no digits (then C leaves it unconsumed).
fn parse_exponent(s: &[u8], i: usize, markers: [u8; 2]) -> Option<(i64, usize)> {
    if !s.get(i).is_some_and(|b| markers.contains(b)) {
        return None;
    }
    let (negative, j) = sign(s, i + 1);
    let n = digit_run(s, j, u8::is_ascii_digit);
    if n == 0 {
        return None;
    }
    let value = s[j..j + n].iter().fold(0i64, |acc, d| {
        (acc * 10 + i64::from(d - b'0')).min(1_000_000_000)
    });
    Some((if negative { -value } else { value }, j + n - i))
}

/// Digits, optionally a point and more digits, from `start`: (integer digits, fraction
/// digits, end); `None` without a digit (a lone point is no number).
fn significand(s: &[u8], start: usize, is_digit: fn(&u8) -> bool) -> Option<(usize, usize, usize)> {
    let int = digit_run(s, start, is_digit);
    let mut end = start + int;
    let mut frac = 0;
    if s.get(end) == Some(&b'.') {
        frac = digit_run(s, end + 1, is_digit);
        if int + frac > 0 {
            end += 1 + frac;
        }
    }
    (int + frac > 0).then_some((int, frac, end))
}

/// A decimal significand with optional exponent: (magnitude, bytes, range error).
fn parse_decimal(s: &[u8]) -> Option<(f64, usize, bool)> {
    let (_, _, mut end) = significand(s, 0, u8::is_ascii_digit)?;
    let nonzero_digit = s[..end].iter().any(|b| (b'1'..=b'9').contains(b));
    if let Some((_, n)) = parse_exponent(s, end, [b'e', b'E']) {
        end += n;
    }
    let text = std::str::from_utf8(&s[..end]).ok()?;
    // The grammar above is a subset of Rust's float syntax, and Rust rounds correctly.
    let value: f64 = text.parse().ok()?;
    let range_error = value.is_infinite() || (value == 0.0 && nonzero_digit);
    Some((value, end, range_error))
}

/// A hex float (`0x1.8p3`, `0x10`, `0x.8`): (magnitude, bytes, range error).
fn parse_hex(s: &[u8]) -> Option<(f64, usize, bool)> {
    if s.len() < 3 || s[0] != b'0' || !matches!(s[1], b'x' | b'X') {
        return None;
    }
    let (int, _, mut end) = significand(s, 2, u8::is_ascii_hexdigit)?;
    // Keep the first 16 significant hex digits (64 bits); later ones only set `sticky`.
    let mut mantissa: u64 = 0;
    let mut exp: i64 = 0;
    let mut kept = 0;
    let mut sticky = false;
    let frac_digits = s.get(3 + int..end).unwrap_or_default();
    let digits = s[2..2 + int]
        .iter()
        .map(|d| (d, false))
        .chain(frac_digits.iter().map(|d| (d, true)));
    for (d, after_point) in digits {
        let v = hex_value(*d);
        if mantissa == 0 && v == 0 {
            if after_point {
                exp -= 4;
            }
        } else if kept < 16 {
            mantissa = mantissa << 4 | v;
            kept += 1;
            if after_point {
                exp -= 4;
            }
        } else {
            sticky |= v != 0;
            if !after_point {
                exp += 4;
            }
        }
    }
    if let Some((e, n)) = parse_exponent(s, end, [b'p', b'P']) {
        exp = exp.saturating_add(e);
        end += n;
    }
    if mantissa == 0 {
        return Some((0.0, end, false));
    }
    let value = round_binary(mantissa, sticky, exp);
    Some((value, end, value.is_infinite() || value == 0.0))
}

fn hex_value(d: u8) -> u64 {
    match d {
        b'0'..=b'9' => u64::from(d - b'0'),
        b'a'..=b'f' => u64::from(d - b'a' + 10),
        b'A'..=b'F' => u64::from(d - b'A' + 10),
        _ => 0,
    }
}

/// `mantissa * 2^exp` rounded to nearest-even f64, where `sticky` says nonzero bits
/// were dropped below `mantissa`. Handles overflow and subnormals exactly.
fn round_binary(mantissa: u64, sticky: bool, exp: i64) -> f64 {
    let shift = mantissa.leading_zeros();
    let mantissa = mantissa << shift;
    let exp = exp.saturating_sub(i64::from(shift));
    let top = exp.saturating_add(63); // exponent of the leading bit
    if top > 1023 {
        return f64::INFINITY;
    }
    let mut low = (top - 52).max(-1074); // exponent of the last bit kept
    let drop = low.saturating_sub(exp); // at least 11
    let (mut kept, round, rest) = match drop {
        65.. => (0, false, true),
        64 => (0, mantissa >> 63 == 1, mantissa << 1 != 0 || sticky),
        _ => {
            let drop = drop as u32;
            let half = 1u64 << (drop - 1);
            (
                mantissa >> drop,
                mantissa & half != 0,
                mantissa & (half - 1) != 0 || sticky,
            )
        }
    };
    if round && (rest || kept & 1 == 1) {
        kept += 1;
        if kept == 1 << 53 {
            kept >>= 1;
            low += 1;
        }
    }
    if low + 52 > 1023 {
        return f64::INFINITY;
    }
    let bits = if kept >= 1 << 52 {
        let biased = (low + 52 + 1023) as u64;
        biased << 52 | (kept & ((1 << 52) - 1))
    } else {
        kept
    };
    f64::from_bits(bits)
}
