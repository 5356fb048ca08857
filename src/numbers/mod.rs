//! C-compatible numbers: reading and printing numbers exactly as Redis (written in C,
//! run on glibc) and its Lua 5.1 do, byte for byte, so that replies, error decisions and
//! stored values match Redis's.
//!
//! | file | what it owns | used by |
//! | --- | --- | --- |
//! | `strtod.rs` | C's `strtod` on a byte slice | sorted-set scores, cjson |
//! | `format.rs` | `%.<p>g` and Redis's `%.17g` double replies | replies, sorted sets, Lua, cjson |
//! | `long_double.rs` | `long double` reading, adding and printing (a C shim) | INCRBYFLOAT, HINCRBYFLOAT |
//!
//! Integer parsing (Redis's `string2ll`) lives with the string values that store
//! integers (`store::value::parse_canonical_i64`).

mod format;
pub mod long_double;
mod strtod;

pub use format::{format_double, format_g, format_human, write_g};
pub use strtod::{is_c_space, strtod, Strtod};

/// glibc is the reference Redis runs on: compare against its `strtod` and `snprintf`.
#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod glibc {
    use super::*;
    use proptest::prelude::*;
    use std::ffi::{c_char, c_int, CString};

    extern "C" {
        #[link_name = "strtod"]
        fn c_strtod_raw(s: *const c_char, end: *mut *mut c_char) -> f64;
        fn snprintf(buf: *mut c_char, n: usize, fmt: *const c_char, ...) -> c_int;
        fn __errno_location() -> *mut c_int;
    }

    const ERANGE: c_int = 34;

    /// glibc's strtod as a [`Strtod`] (its `range_error` as Redis's `string2d` tests it).
    fn c_strtod(s: &[u8]) -> Strtod {
        // C reads up to the first NUL.
        let s = &s[..s.iter().position(|&b| b == 0).unwrap_or(s.len())];
        let c = CString::new(s).unwrap();
        let mut end: *mut c_char = std::ptr::null_mut();
        // SAFETY: `c` is a valid NUL-terminated string that outlives the call; errno is
        // this thread's, and `end` points into `c`.
        let (value, len, errno) = unsafe {
            *__errno_location() = 0;
            let v = c_strtod_raw(c.as_ptr(), &mut end);
            let used = end.offset_from(c.as_ptr()) as usize;
            (v, used, *__errno_location())
        };
        Strtod {
            value,
            len,
            range_error: errno == ERANGE && (value.is_infinite() || value == 0.0),
        }
    }

    /// glibc's `snprintf(buf, "%.<precision>g", v)`.
    fn c_format(v: f64, precision: usize) -> String {
        let mut buf = [0u8; 128];
        let fmt = CString::new(format!("%.{precision}g")).unwrap();
        // SAFETY: the buffer's size is passed; %g takes a double.
        let n = unsafe { snprintf(buf.as_mut_ptr().cast(), buf.len(), fmt.as_ptr(), v) };
        String::from_utf8(buf[..n as usize].to_vec()).unwrap()
    }

    fn same(a: &Strtod, b: &Strtod) -> bool {
        a.value.to_bits() == b.value.to_bits() && a.len == b.len && a.range_error == b.range_error
    }

    fn float_text() -> impl Strategy<Value = Vec<u8>> {
        let alphabet = b"0123456789.eEpPxX+-( infatyINFATYnN\tab\0".to_vec();
        prop_oneof![
            prop::collection::vec(prop::sample::select(alphabet), 0..12),
            any::<u64>().prop_map(|b| format!("{:e}", f64::from_bits(b)).into_bytes()),
            any::<u64>().prop_map(|b| format!("{}", f64::from_bits(b)).into_bytes()),
            (any::<u64>(), -1100i32..1100, any::<bool>()).prop_map(|(m, e, neg)| {
                format!(
                    "{}0x{:x}.{:x}p{}",
                    if neg { "-" } else { "" },
                    m >> 20,
                    m & 0xfffff,
                    e
                )
                .into_bytes()
            }),
            ("[0-9]{1,30}", "[0-9]{0,30}", -400i32..400)
                .prop_map(|(a, b, e)| format!("{a}.{b}e{e}").into_bytes()),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]

        #[test]
        fn strtod_matches_glibc(text in float_text()) {
            let (ours, theirs) = (strtod(&text), c_strtod(&text));
            prop_assert!(same(&ours, &theirs), "{:?}: {:?} vs {:?}",
                String::from_utf8_lossy(&text), (ours.value, ours.len, ours.range_error),
                (theirs.value, theirs.len, theirs.range_error));
        }

        #[test]
        fn format_double_matches_glibc(bits in any::<u64>()) {
            let v = f64::from_bits(bits);
            prop_assume!(!v.is_nan());
            prop_assert_eq!(format_double(v), c_format(v, 17));
        }

        #[test]
        fn format_g_matches_glibc_at_every_precision(
            bits in any::<u64>(),
            integer in -1_000_000_000_000_000_000i64..1_000_000_000_000_000_000,
            precision in 0usize..=20,
        ) {
            for v in [f64::from_bits(bits), integer as f64, integer as f64 / 1000.0] {
                let want = c_format(v, precision);
                prop_assert_eq!(format_g(v, precision), want.clone(), "{}", v);
                // Appended after existing bytes, which it must keep.
                let mut out = b"x".to_vec();
                write_g(v, precision, &mut out);
                prop_assert_eq!(out, [b"x".as_slice(), want.as_bytes()].concat(), "{}", v);
            }
        }
    }

    #[test]
    fn integer_shortcut_edges_print_like_glibc() {
        let mut values = vec![
            0.0,
            -0.0,
            1.0,
            -1.0,
            7.0,
            10.0,
            1700000000000.0,
            -42.0,
            1e300,
        ];
        for p in 0..=17 {
            let edge = 10f64.powi(p);
            values.extend([
                edge,
                -edge,
                edge - 1.0,
                1.0 - edge,
                edge + 1.0,
                edge * 0.999,
            ]);
        }
        values.extend([99_999_999_999_999_984.0, 9_007_199_254_740_993.0]);
        for x in values {
            for precision in [1, 6, 14, 17] {
                assert_eq!(
                    format_g(x, precision),
                    c_format(x, precision),
                    "{x:e} %.{precision}g"
                );
                let mut out = Vec::new();
                write_g(x, precision, &mut out);
                assert_eq!(
                    out,
                    c_format(x, precision).into_bytes(),
                    "write_g {x:e} %.{precision}g"
                );
            }
        }
    }

    #[test]
    fn special_values_print_like_glibc() {
        for v in [
            f64::NAN,
            -f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            0.0,
            -0.0,
            1e15,
            1e16,
            1e17,
            0.5,
            2.5,
            1e-5,
            123456.5,
        ] {
            for precision in [1, 14, 17] {
                assert_eq!(
                    format_g(v, precision),
                    c_format(v, precision),
                    "{v} %.{precision}g"
                );
            }
        }
        assert_eq!(format_double(-f64::NAN), "nan");
    }

    #[test]
    fn rounding_and_range_edges_match_glibc() {
        let cases = [
            "0x1.fffffffffffff8p1023",
            "0x1.fffffffffffff7ffffffp1023",
            "0x1p-1074",
            "0x1p-1075",
            "0x1.0000000000001p-1075",
            "0x1.8p-1074",
            "0x0.0000000000001p-1022",
            "0x1.00000000000008p0",
            "0x1.000000000000080000000001p0",
            "0x1.00000000000018p0",
            "0x123456789abcdef123456789p0",
            "0x.00000000000000000001p0",
            "0x1p1024",
            "0x1p-99999999999999999999",
            "0x1p+99999999999999999999",
            "0x0p99999",
            "0x0.0",
            "0x",
            "1e99999999999999999999",
            "0e99999999999999999999",
            "1e-99999999999999999999",
            "0.00000000000000000000000000000000000000000000000000000000001e-270",
            "100000000000000000000000000000000000000000000000000000000000e250",
            "2.4703282292062327208828439643411068618252990130716238221279284125033775363e-324",
            "2.4703282292062327208828439643411068618252990130716238221279284125033775364e-324",
            "1.797693134862315807937289714053034150799341327710923e308",
            "nan(abc)",
            "-nan",
            "INFINITY",
            "-infinityx",
            "00000000000000000000000000000000000000012.5",
            "  \t12",
            "1.5\x002",
        ];
        for c in cases {
            let (ours, theirs) = (strtod(c.as_bytes()), c_strtod(c.as_bytes()));
            assert!(
                same(&ours, &theirs),
                "{c:?}: {:?} vs {:?}",
                ours.value,
                theirs.value
            );
        }
    }
}
