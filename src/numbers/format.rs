//! C's `printf("%.<precision>g")` as glibc prints a double, and Redis's double replies
//! built on it (`%.17g`, Redis 7.0's form).
//!
//! Ours rather than `snprintf` so that no C call and no locale sits on the reply path;
//! Rust's `{:.Ne}` formatting is exact with ties to even, like glibc, and the rest is
//! `%g`'s choice between fixed and scientific notation and its trailing-zero rule. The
//! tests compare it with glibc's `snprintf` for every precision Redis and Lua use.

/// `printf("%.<precision>g", x)` as glibc prints it (`inf`, `-inf`, `nan`, `-nan`
/// included; a precision of 0 counts as 1, as in C).
pub fn format_g(x: f64, precision: usize) -> String {
    let precision = precision.clamp(1, 99);
    if x.is_nan() {
        return if x.is_sign_negative() { "-nan" } else { "nan" }.to_string();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.to_string();
    }
    if let Some(n) = plain_integer(x, precision) {
        return itoa::Buffer::new().format(n).to_string();
    }
    if x == 0.0 && x.is_sign_negative() {
        return "-0".to_string();
    }
    // `precision` significant digits, exactly rounded: `d.ddd…e±x`.
    let sci = format!("{:.*e}", precision - 1, x);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let mut out = String::with_capacity(precision + 8);
    if x.is_sign_negative() {
        out.push('-');
    }
    if exp >= -4 && exp < precision as i32 {
        // Fixed notation with `precision - 1 - exp` decimals, trailing zeros dropped.
        let int_len = usize::try_from(exp).map_or(0, |e| e + 1);
        if int_len == 0 {
            out.push_str("0.");
            (1..-exp).for_each(|_| out.push('0'));
            out.push_str(digits.trim_end_matches('0'));
        } else {
            let (int, frac) = digits.split_at(int_len.min(digits.len()));
            out.push_str(int);
            let frac = frac.trim_end_matches('0');
            if !frac.is_empty() {
                out.push('.');
                out.push_str(frac);
            }
        }
    } else {
        let (lead, frac) = digits.split_at(1.min(digits.len()));
        out.push_str(lead);
        let frac = frac.trim_end_matches('0');
        if !frac.is_empty() {
            out.push('.');
            out.push_str(frac);
        }
        out.push_str(if exp < 0 { "e-" } else { "e+" });
        if exp.unsigned_abs() < 10 {
            out.push('0');
        }
        out.push_str(&exp.unsigned_abs().to_string());
    }
    out
}

/// [`format_g`] appended to `out`: integers, the common case (counters, timestamps,
/// `redis.call` arguments), are written without an intermediate `String`.
pub fn write_g(x: f64, precision: usize, out: &mut Vec<u8>) {
    match plain_integer(x, precision) {
        Some(n) => out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes()),
        None => out.extend_from_slice(format_g(x, precision).as_bytes()),
    }
}

/// `x` as an integer when `%.<precision>g` prints it as plain digits: integral, of at
/// most `precision` digits, and not -0 (which prints its sign). NaN and the infinities
/// are not.
fn plain_integer(x: f64, precision: usize) -> Option<i64> {
    let precision = precision.clamp(1, 99);
    let plain = precision <= 17
        && x == x.trunc()
        && x.abs() < 10f64.powi(precision as i32)
        && !(x == 0.0 && x.is_sign_negative());
    plain.then_some(x as i64)
}

/// A double as Redis 7.0 replies it (RESP2 bulk strings, RESP3 `,` frames, sorted-set
/// scores): `%.17g`, with `inf`, `-inf` and `nan`.
///
/// So 1 -> `1`, 1.5 -> `1.5`, 0.1 -> `0.10000000000000001`, 1e20 -> `1e+20`,
/// 123456789012345678 -> `1.2345678901234568e+17`, -0.0 -> `-0`. (Redis 7.2 switched to
/// the shortest round-trip form; the reference server here is 7.0.)
pub fn format_double(x: f64) -> String {
    if x.is_nan() {
        return "nan".to_string();
    }
    format_g(x, 17)
}

/// A double as Redis 7.0 prints it with `ld2string(..., LD_STR_HUMAN)` (GEOPOS, GEORADIUS
/// WITHCOORD): `%.17Lf` of the value, trailing zeros and a trailing `.` dropped, `-0` as
/// `0`. A double converts to a long double exactly, so the decimal expansion of the double
/// itself, rounded to 17 places, is what glibc prints.
pub fn format_human(x: f64) -> String {
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.to_string();
    }
    let mut s = format!("{x:.17}");
    if s.contains('.') {
        let kept = s.trim_end_matches('0').trim_end_matches('.').len();
        s.truncate(kept);
    }
    if s == "-0" {
        s = "0".to_string();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::approx_constant)]
    fn score_formatting_matches_redis_7_0() {
        // Observed on redis-server 7.0.15 (ZADD k <v> m; ZSCORE k m).
        let cases: &[(f64, &str)] = &[
            (1.0, "1"),
            (1.5, "1.5"),
            (0.1, "0.10000000000000001"),
            (1e20, "1e+20"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (3.14159, "3.1415899999999999"),
            (1e-5, "1.0000000000000001e-05"),
            (123456789012345678.0, "1.2345678901234568e+17"),
            (0.0, "0"),
            (-0.0, "-0"),
            (1e21, "1e+21"),
            (12345678901234567890.0, "1.2345678901234567e+19"),
            (1e-6, "9.9999999999999995e-07"),
            (0.000123, "0.00012300000000000001"),
            (1e100, "1e+100"),
            (2.5e-300, "2.5e-300"),
            (1e15, "1000000000000000"),
            (1e16, "10000000000000000"),
            (1e17, "1e+17"),
            (123456.789, "123456.789"),
            (-1.5e-10, "-1.5e-10"),
            (0.3, "0.29999999999999999"),
            (100.0, "100"),
            (4e-320, "3.999955468730732e-320"),
            (5e-324, "4.9406564584124654e-324"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (1484551710.0, "1484551710"),
            (1e15 + 0.25, "1000000000000000.2"),
        ];
        for (v, want) in cases {
            assert_eq!(format_double(*v), *want, "{v:e}");
        }
    }
}
