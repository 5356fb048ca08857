//! The values a key can hold, mirroring Redis's five core types.
//!
//! Every collection iterates in an order that depends only on its history (hashes in
//! insertion order as Redis's listpack, small integer sets ascending as Redis's intset,
//! larger sets in insertion order), so iteration is the same on every replica.

use bytes::Bytes;

use super::small::{SmallBytes, VALUE_INLINE};
use super::zset::SortedSet;

pub use super::hash::HashValue;
pub use super::list::ListValue;
pub use super::set::SetValue;

/// A Redis value.
#[derive(Debug, Clone)]
pub enum Value {
    /// A string; integers are kept as integers (Redis's `int` encoding).
    Str(StrValue),
    /// A hash of field -> value (compact or a boxed table: see `store::hash`).
    Hash(HashValue),
    /// A list (packed or a deque: see `store::list`).
    List(ListValue),
    /// A set (an intset or a table: see `store::set`).
    Set(SetValue),
    /// A sorted set.
    ZSet(SortedSet),
}

/// A string value: either a canonical integer or raw bytes.
#[derive(Debug, Clone, PartialEq)]
pub enum StrValue {
    /// A string that is the canonical decimal text of an i64.
    Int(i64),
    /// Any other bytes, inline when short.
    Raw(StrBytes),
}

/// The bytes of a non-integer string value.
pub type StrBytes = SmallBytes<VALUE_INLINE>;

impl StrValue {
    /// Build from bytes, keeping canonical integers as integers. Raw bytes are copied
    /// (inline when short, else into an exact-size allocation): arguments are slices of a
    /// whole request frame, which a long-lived value should not keep alive.
    pub fn from_slice(b: &[u8]) -> StrValue {
        match parse_canonical_i64(b) {
            Some(n) => StrValue::Int(n),
            None => StrValue::Raw(StrBytes::new(b)),
        }
    }

    /// The bytes of the string.
    pub fn to_bytes(&self) -> Bytes {
        match self {
            StrValue::Int(n) => Bytes::copy_from_slice(itoa::Buffer::new().format(*n).as_bytes()),
            StrValue::Raw(b) => b.to_bytes(),
        }
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        match self {
            StrValue::Int(n) => itoa::Buffer::new().format(*n).len(),
            StrValue::Raw(b) => b.len(),
        }
    }

    /// Whether the string is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes for editing in place, zero-padded to at least `len` bytes (the bit
    /// commands and HyperLogLog edit stored strings this way). An integer becomes its
    /// decimal text as raw bytes, as Redis's `dbUnshareStringValue` decodes it.
    pub fn bytes_mut(&mut self, len: usize) -> &mut [u8] {
        if let StrValue::Int(n) = *self {
            *self = StrValue::Raw(StrBytes::new(itoa::Buffer::new().format(n).as_bytes()));
        }
        match self {
            StrValue::Raw(b) => {
                b.grow_zeroed(len);
                b.as_mut_slice()
            }
            StrValue::Int(_) => unreachable!("converted above"),
        }
    }
}

impl Value {
    /// A string value of a copy of `b` (or an integer; see [`StrValue::from_slice`]).
    pub fn string(b: impl AsRef<[u8]>) -> Value {
        Value::Str(StrValue::from_slice(b.as_ref()))
    }

    /// The name TYPE reports.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) => "string",
            Value::Hash(_) => "hash",
            Value::List(_) => "list",
            Value::Set(_) => "set",
            Value::ZSet(_) => "zset",
        }
    }

    /// Whether a collection value has become empty (Redis deletes such keys).
    pub fn is_empty_collection(&self) -> bool {
        match self {
            Value::Str(_) => false,
            Value::Hash(h) => h.is_empty(),
            Value::List(l) => l.is_empty(),
            Value::Set(s) => s.is_empty(),
            Value::ZSet(z) => z.is_empty(),
        }
    }

    /// A rough count of the heap bytes this value holds, for INFO memory.
    pub fn memory_estimate(&self) -> usize {
        const ITEM: usize = 32;
        match self {
            Value::Str(StrValue::Int(_)) => 8,
            Value::Str(StrValue::Raw(SmallBytes::Heap(b))) => b.len() + ITEM,
            Value::Str(StrValue::Raw(SmallBytes::Inline(..))) => 0,
            Value::Hash(h) => h.memory_estimate(),
            Value::List(l) => l.memory_estimate(),
            Value::Set(s) => s.memory_estimate(),
            Value::ZSet(z) => z.memory_estimate(),
        }
    }
}

/// Parse bytes that are exactly the canonical decimal form of an i64
/// (no sign on zero, no leading zeros, no spaces), like Redis's `string2ll`.
pub fn parse_canonical_i64(b: &[u8]) -> Option<i64> {
    if b.is_empty() || b.len() > 20 {
        return None;
    }
    let (neg, digits) = match b[0] {
        b'-' => (true, &b[1..]),
        _ => (false, b),
    };
    if digits.is_empty() || (digits[0] == b'0' && (digits.len() > 1 || neg)) {
        return None;
    }
    let mut v: i64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        let d = (c - b'0') as i64;
        v = if neg {
            v.checked_mul(10)?.checked_sub(d)?
        } else {
            v.checked_mul(10)?.checked_add(d)?
        };
    }
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_integers_only() {
        assert_eq!(parse_canonical_i64(b"0"), Some(0));
        assert_eq!(parse_canonical_i64(b"-12"), Some(-12));
        assert_eq!(parse_canonical_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_canonical_i64(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_canonical_i64(b"9223372036854775808"), None);
        assert_eq!(parse_canonical_i64(b"01"), None);
        assert_eq!(parse_canonical_i64(b"-0"), None);
        assert_eq!(parse_canonical_i64(b" 1"), None);
        assert_eq!(parse_canonical_i64(b"+1"), None);
        assert_eq!(parse_canonical_i64(b""), None);
    }

    #[test]
    fn int_strings_round_trip() {
        let v = StrValue::from_slice(b"123");
        assert_eq!(v, StrValue::Int(123));
        assert_eq!(v.to_bytes(), Bytes::from_static(b"123"));
        assert_eq!(v.len(), 3);
        let r = StrValue::from_slice(b"0123");
        assert_eq!(r.len(), 4);
    }
}
