//! C's `long double` for Redis's float increments (INCRBYFLOAT, HINCRBYFLOAT): reading
//! (`strtold`), adding, and "human" printing (`%.17Lf` with trailing zeros dropped), done
//! by the C shim in `src/native/longdouble.c` because Rust has no `long double`. With 64
//! mantissa bits instead of 53, `0.1 + 0.2` prints as `0.3`, like Redis, not
//! `0.30000000000000004`.
//!
//! Every node of a cluster re-executes these commands, so the nodes must share a CPU
//! architecture (`long double` is 80-bit on x86-64, 128-bit elsewhere).

use std::ffi::{c_char, c_int, c_long};

extern "C" {
    fn tg_ld_check(s: *const c_char, len: usize) -> c_int;
    fn tg_ld_incr(
        cur: *const c_char,
        cur_len: usize,
        by: *const c_char,
        by_len: usize,
        out: *mut c_char,
        cap: usize,
    ) -> c_long;
}

/// Redis's `MAX_LONG_DOUBLE_CHARS`: the longest float argument, and the output buffer.
const LD_CHARS: usize = 5 * 1024;

/// How a float argument reads.
#[derive(Debug, PartialEq, Eq)]
pub enum Check {
    Float,
    NotFloat,
    /// Infinite (NaN is `NotFloat`, as in Redis).
    NotFinite,
}

/// Why an increment failed.
#[derive(Debug, PartialEq, Eq)]
pub enum IncrError {
    /// The stored value is not a float.
    Current,
    /// The increment is not a float.
    Increment,
    /// The sum is NaN or infinite.
    NotFinite,
}

/// Read `s` as Redis's `string2ld` does.
pub fn check(s: &[u8]) -> Check {
    // SAFETY: the shim reads `len` bytes of `s` (none when empty) and keeps nothing.
    match unsafe { tg_ld_check(s.as_ptr().cast(), s.len()) } {
        0 => Check::Float,
        2 => Check::NotFinite,
        _ => Check::NotFloat,
    }
}

/// `current` (`None` reads as 0) plus `by`, printed as Redis prints the result.
pub fn incr(current: Option<&[u8]>, by: &[u8]) -> Result<Vec<u8>, IncrError> {
    let mut out = [0u8; LD_CHARS];
    let (cur_ptr, cur_len) = match current {
        Some(c) => (c.as_ptr().cast::<c_char>(), c.len()),
        None => (std::ptr::null(), 0),
    };
    // SAFETY: the inputs are read within their lengths; at most `out.len()` bytes are
    // written to `out`; the shim keeps no pointer.
    let n = unsafe {
        tg_ld_incr(
            cur_ptr,
            cur_len,
            by.as_ptr().cast(),
            by.len(),
            out.as_mut_ptr().cast(),
            out.len(),
        )
    };
    match n {
        -1 => Err(IncrError::Current),
        -2 => Err(IncrError::Increment),
        // -4 (no room) cannot happen: a finite long double prints in under 5000 bytes.
        n if n < 0 => Err(IncrError::NotFinite),
        n => Ok(out[..usize::try_from(n).unwrap_or(0)].to_vec()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add(cur: Option<&str>, by: &str) -> Result<String, IncrError> {
        incr(cur.map(str::as_bytes), by.as_bytes()).map(|v| String::from_utf8(v).unwrap())
    }

    #[test]
    fn sums_print_like_redis() {
        // Every expected value below is what redis-server 7 answers for the same INCRBYFLOAT.
        assert_eq!(add(Some("0.2"), "0.1").unwrap(), "0.3");
        assert_eq!(add(None, "0.1").unwrap(), "0.1");
        assert_eq!(add(Some("10.5"), "1e-17").unwrap(), "10.50000000000000001");
        assert_eq!(add(Some("3.0e3"), "1.5").unwrap(), "3001.5");
        assert_eq!(add(None, "5.0e3").unwrap(), "5000");
        assert_eq!(add(Some("10"), "-10").unwrap(), "0");
        assert_eq!(add(Some("-0"), "0").unwrap(), "0");
        assert_eq!(add(Some("1"), "0x10").unwrap(), "17");
        assert_eq!(add(Some("10.50"), "0.1").unwrap(), "10.6");
        assert_eq!(add(Some("5.0e3"), "2.0e2").unwrap(), "5200");
        let big = add(Some("1e300"), "1e300").unwrap();
        assert!(big.starts_with("2000000000000000000017994648"), "{big}");
    }

    #[test]
    fn bad_input_is_refused() {
        assert_eq!(add(Some("abc"), "1"), Err(IncrError::Current));
        assert_eq!(add(Some(""), "1"), Err(IncrError::Current));
        assert_eq!(add(Some("1"), " 1"), Err(IncrError::Increment));
        assert_eq!(add(Some("1"), "1 "), Err(IncrError::Increment));
        assert_eq!(add(Some("1"), "nan"), Err(IncrError::Increment));
        assert_eq!(add(Some("1"), "1e99999"), Err(IncrError::Increment));
        assert_eq!(add(Some("1"), "inf"), Err(IncrError::NotFinite));
        assert_eq!(add(Some("1.1e4932"), "1.1e4932"), Err(IncrError::NotFinite));
        assert_eq!(
            add(Some("1"), &"1".repeat(LD_CHARS)),
            Err(IncrError::Increment)
        );
        assert_eq!(check(b"1.5"), Check::Float);
        assert_eq!(check(b"-inf"), Check::NotFinite);
        assert_eq!(check(b"x"), Check::NotFloat);
        assert_eq!(check(b""), Check::NotFloat);
        // A NUL byte ends the C string strtold reads; the whole argument must be the number.
        assert_eq!(add(Some("\0"), "1"), Err(IncrError::Current));
        assert_eq!(add(Some("1\0"), "1"), Err(IncrError::Current));
        assert_eq!(add(Some("1"), "1\0"), Err(IncrError::Increment));
        assert_eq!(add(Some("1"), "1\u{0}2"), Err(IncrError::Increment));
        assert_eq!(check(b"1\x002"), Check::NotFloat);
    }
}
