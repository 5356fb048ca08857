//! Argument parsing and typed key access shared by every command family, with Redis's
//! exact error texts.

use bytes::Bytes;

use crate::protocol::Reply;
pub use crate::store::value::parse_canonical_i64 as parse_i64;
use crate::store::value::{HashValue, ListValue, SetValue};
use crate::store::zset::SortedSet;
use crate::store::{Db, Value};

/// Redis's WRONGTYPE error text.
pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
/// Redis's error for a bad integer argument.
pub const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
/// Redis's error for a bad float argument.
pub const NOT_FLOAT: &str = "ERR value is not a valid float";
/// Largest string value (proto-max-bulk-len default).
pub const MAX_STRING: usize = 512 * 1024 * 1024;

/// Result of a command step: the error variant is the reply to send.
pub type CmdResult<T> = Result<T, Reply>;

/// The WRONGTYPE reply.
pub fn wrongtype() -> Reply {
    Reply::err(WRONGTYPE)
}

/// `ERR syntax error`.
pub fn syntax_error() -> Reply {
    Reply::err("ERR syntax error")
}

/// Case-insensitive comparison of an argument with an ASCII keyword.
pub fn is(arg: &[u8], keyword: &str) -> bool {
    arg.eq_ignore_ascii_case(keyword.as_bytes())
}

/// Parse an i64 argument, or Redis's integer error.
pub fn int(arg: &[u8]) -> CmdResult<i64> {
    parse_i64(arg).ok_or_else(|| Reply::err(NOT_INTEGER))
}

/// A database number (SELECT, MOVE, COPY ... DB) checked as Redis does: an integer, then
/// within 32 bits, then below the number of databases.
pub fn db_index(arg: &[u8]) -> CmdResult<usize> {
    let n = int(arg)?;
    if i32::try_from(n).is_err() {
        return Err(Reply::err(
            "ERR value is out of range, value must between -2147483648 and 2147483647",
        ));
    }
    usize::try_from(n)
        .ok()
        .filter(|&n| n < crate::store::DATABASES)
        .ok_or_else(|| Reply::err("ERR DB index is out of range"))
}

/// Parse a non-negative integer argument with a custom error text.
pub fn non_negative(arg: &[u8], err: &str) -> CmdResult<i64> {
    match parse_i64(arg) {
        Some(n) if n >= 0 => Ok(n),
        Some(_) => Err(Reply::err(err)),
        None => Err(Reply::err(NOT_INTEGER)),
    }
}

/// Parse a float the way Redis's `string2ld`/`strtod` does: no leading space, no NaN.
pub fn parse_f64(b: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(b).ok()?;
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_whitespace()) {
        return None;
    }
    let lower = s.to_ascii_lowercase();
    let v = match lower.as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => f64::INFINITY,
        "-inf" | "-infinity" => f64::NEG_INFINITY,
        _ if lower.contains("inf") || lower.contains("nan") => return None,
        _ => s.parse::<f64>().ok()?,
    };
    (!v.is_nan()).then_some(v)
}

/// Parse a float argument as Redis's `getDoubleFromObject` does (C's `strtod` of the whole
/// argument; no leading space, no NaN, no overflow to infinity or underflow to zero, while
/// `inf` itself is accepted), or Redis's float error.
pub fn float(arg: &[u8]) -> CmdResult<f64> {
    let read = crate::numbers::strtod(arg);
    let whole = !arg.is_empty() && !crate::numbers::is_c_space(arg[0]) && read.len == arg.len();
    if whole && !read.range_error && !read.value.is_nan() {
        Ok(read.value)
    } else {
        Err(Reply::err(NOT_FLOAT))
    }
}

/// Format a float the way Redis prints INCRBYFLOAT/HINCRBYFLOAT results: shortest
/// round-trip digits, no exponent.
pub fn human_float(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    format!("{v}")
}

/// A value type that commands can borrow out of a key.
pub trait Kind: Sized {
    /// Borrow from a value if it has this type.
    fn get(v: &Value) -> Option<&Self>;
    /// Mutably borrow from a value if it has this type.
    fn get_mut(v: &mut Value) -> Option<&mut Self>;
    /// A new empty value of this type.
    fn empty() -> Value;
}

macro_rules! kind {
    ($t:ty, $variant:ident, $empty:expr) => {
        impl Kind for $t {
            fn get(v: &Value) -> Option<&Self> {
                match v {
                    Value::$variant(x) => Some(x),
                    _ => None,
                }
            }
            fn get_mut(v: &mut Value) -> Option<&mut Self> {
                match v {
                    Value::$variant(x) => Some(x),
                    _ => None,
                }
            }
            fn empty() -> Value {
                Value::$variant($empty)
            }
        }
    };
}

kind!(HashValue, Hash, HashValue::default());
kind!(ListValue, List, ListValue::default());
kind!(SetValue, Set, SetValue::default());
kind!(SortedSet, ZSet, SortedSet::new());

/// Borrow the value at `key` as type `T`; absent is Ok(None), another type is WRONGTYPE.
/// A read lookup: counts a keyspace hit or miss ([`Db::read`]).
pub fn read<'a, T: Kind>(db: &'a Db, key: &[u8], now_ms: u64) -> CmdResult<Option<&'a T>> {
    typed(db.read(key, now_ms))
}

/// [`read`] for a command that writes the key (Redis's `lookupKeyWrite`): no keyspace hit
/// or miss is counted.
pub fn lookup<'a, T: Kind>(db: &'a Db, key: &[u8], now_ms: u64) -> CmdResult<Option<&'a T>> {
    typed(db.get(key, now_ms))
}

fn typed<T: Kind>(entry: Option<&crate::store::Entry>) -> CmdResult<Option<&T>> {
    match entry {
        None => Ok(None),
        Some(e) => T::get(&e.value).map(Some).ok_or_else(wrongtype),
    }
}

/// Mutably borrow the value at `key` as type `T`, creating an empty one if `create`.
/// Callers that may empty a collection call `Db::remove_if_empty` afterwards.
pub fn write<'a, T: Kind>(
    db: &'a mut Db,
    key: &[u8],
    now_ms: u64,
    create: bool,
) -> CmdResult<Option<&'a mut T>> {
    let exists = match db.get(key, now_ms) {
        None => false,
        Some(e) => {
            if T::get(&e.value).is_none() {
                return Err(wrongtype());
            }
            true
        }
    };
    if !exists {
        if !create {
            return Ok(None);
        }
        db.set(key, T::empty());
    }
    Ok(db
        .get_mut(key, now_ms)
        .and_then(|e| T::get_mut(&mut e.value)))
}

/// Reply with an array of bulk strings.
pub fn bulk_array<I: IntoIterator<Item = Bytes>>(items: I) -> Reply {
    Reply::Array(items.into_iter().map(Reply::Bulk).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_parse_like_string2ll() {
        assert_eq!(parse_i64(b"-1"), Some(-1));
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"007"), None);
        assert_eq!(parse_i64(b"1 "), None);
        assert_eq!(parse_i64(b"9223372036854775808"), None);
    }

    #[test]
    fn floats_parse_like_strtod() {
        assert_eq!(parse_f64(b"1.5"), Some(1.5));
        assert_eq!(parse_f64(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_f64(b"1e3"), Some(1000.0));
        assert_eq!(parse_f64(b"nan"), None);
        assert_eq!(parse_f64(b" 1"), None);
        assert_eq!(parse_f64(b"abc"), None);
        // getDoubleFromObject: overflow and underflow are refused, `inf` is not.
        assert!(float(b"1e400").is_err());
        assert!(float(b"1e-400").is_err());
        assert!(float(b" 1").is_err());
        assert!(float(b"").is_err());
        assert_eq!(float(b"inf"), Ok(f64::INFINITY));
        assert_eq!(float(b"0x10"), Ok(16.0));
        assert_eq!(human_float(10.5 + 0.1), "10.6");
        assert_eq!(human_float(3.0), "3");
        assert_eq!(human_float(1e20), "100000000000000000000");
    }
}
