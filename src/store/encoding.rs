//! Which internal encoding Redis 7.0 would give a value (OBJECT ENCODING), and the
//! settings that decide it: the `*-max-listpack-*` / `set-max-intset-entries` thresholds of
//! the CONFIG registry and whether small integers are shared (OBJECT REFCOUNT).
//!
//! Tollgate's own representations mostly do not follow Redis's encodings (sorted sets do:
//! listpack or skiplist), so each type's rule is one function here, judged from the value's
//! content and the thresholds: when the collections get real compact encodings (issue 21),
//! these functions are the ones to replace with "what the value is". Redis converts a
//! collection to its large encoding for good; judged from content, a collection that
//! shrank back under the thresholds reports its small encoding again (sorted sets excepted:
//! their representation remembers the conversion).

use std::collections::VecDeque;

use bytes::Bytes;

use super::value::{parse_canonical_i64, HashValue, SetValue, StrValue};
use super::zset::SortedSet;
use super::Value;

/// The settings OBJECT reads, copied from the configuration when it changes
/// (`Engine::set_object_settings`). Defaults are Redis 7.0's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObjectSettings {
    /// `hash-max-listpack-entries`.
    pub hash_max_listpack_entries: u64,
    /// `hash-max-listpack-value`.
    pub hash_max_listpack_value: u64,
    /// `set-max-intset-entries`.
    pub set_max_intset_entries: u64,
    /// `zset-max-listpack-entries`.
    pub zset_max_listpack_entries: u64,
    /// `zset-max-listpack-value`.
    pub zset_max_listpack_value: u64,
    /// Whether integers 0..10000 are shared objects (OBJECT REFCOUNT answers `INT_MAX`):
    /// Redis shares them unless `maxmemory` is set with an LRU or LFU policy.
    pub shared_integers: bool,
}

impl Default for ObjectSettings {
    fn default() -> Self {
        ObjectSettings {
            hash_max_listpack_entries: 512,
            hash_max_listpack_value: 64,
            set_max_intset_entries: 512,
            zset_max_listpack_entries: 128,
            zset_max_listpack_value: 64,
            shared_integers: true,
        }
    }
}

/// Redis's `OBJ_ENCODING_EMBSTR_SIZE_LIMIT`.
const EMBSTR_MAX: usize = 44;
/// Redis's `OBJ_SHARED_INTEGERS`.
const SHARED_INTEGERS: i64 = 10_000;
/// Redis's `OBJ_SHARED_REFCOUNT` (`INT_MAX`).
pub const SHARED_REFCOUNT: i64 = i32::MAX as i64;

/// A string: `int` for an integer, `embstr` up to 44 bytes, `raw` beyond. (Redis also
/// answers `raw` for a short string grown by APPEND or SETRANGE; Tollgate does not keep
/// that history.)
pub fn string_encoding(s: &StrValue) -> &'static str {
    match s {
        StrValue::Int(_) => "int",
        StrValue::Raw(b) if b.len() <= EMBSTR_MAX => "embstr",
        StrValue::Raw(_) => "raw",
    }
}

/// A list: Redis 7.0 always answers `quicklist` (its listpack-encoded lists came in 7.2).
pub fn list_encoding(_l: &VecDeque<Bytes>, _s: &ObjectSettings) -> &'static str {
    "quicklist"
}

/// A set: `intset` when every member is an integer and there are at most
/// `set-max-intset-entries`, else `hashtable` (Redis 7.0 has no listpack sets).
pub fn set_encoding(set: &SetValue, s: &ObjectSettings) -> &'static str {
    if set.len() as u64 <= s.set_max_intset_entries
        && set.iter().all(|m| parse_canonical_i64(m).is_some())
    {
        "intset"
    } else {
        "hashtable"
    }
}

/// A hash: `listpack` while it has at most `hash-max-listpack-entries` fields and no field
/// or value is longer than `hash-max-listpack-value`, else `hashtable`.
pub fn hash_encoding(h: &HashValue, s: &ObjectSettings) -> &'static str {
    let max = s.hash_max_listpack_value;
    if h.len() as u64 <= s.hash_max_listpack_entries
        && h.iter()
            .all(|(f, v)| f.len() as u64 <= max && v.len() as u64 <= max)
    {
        "listpack"
    } else {
        "hashtable"
    }
}

/// A sorted set: `skiplist` when its representation is (it converted, for good, at
/// Redis's default thresholds) or when it exceeds the configured thresholds, else
/// `listpack`.
pub fn zset_encoding(z: &SortedSet, s: &ObjectSettings) -> &'static str {
    let fits = z.len() as u64 <= s.zset_max_listpack_entries
        && z.iter()
            .all(|(m, _)| m.len() as u64 <= s.zset_max_listpack_value);
    let defaults = ObjectSettings::default();
    let converted = z.encoding() == "skiplist"
        && s.zset_max_listpack_entries <= defaults.zset_max_listpack_entries
        && s.zset_max_listpack_value <= defaults.zset_max_listpack_value;
    if fits && !converted {
        "listpack"
    } else {
        "skiplist"
    }
}

/// OBJECT ENCODING of any value.
pub fn encoding(v: &Value, s: &ObjectSettings) -> &'static str {
    match v {
        Value::Str(x) => string_encoding(x),
        Value::List(l) => list_encoding(l, s),
        Value::Set(x) => set_encoding(x, s),
        Value::Hash(h) => hash_encoding(h, s),
        Value::ZSet(z) => zset_encoding(z, s),
    }
}

/// OBJECT REFCOUNT: `INT_MAX` for a shared integer (0..10000 while sharing is on), else 1.
pub fn refcount(v: &Value, s: &ObjectSettings) -> i64 {
    match v {
        Value::Str(StrValue::Int(n)) if s.shared_integers && (0..SHARED_INTEGERS).contains(n) => {
            SHARED_REFCOUNT
        }
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings() {
        assert_eq!(string_encoding(&StrValue::from_slice(b"12")), "int");
        assert_eq!(string_encoding(&StrValue::from_slice(b"012")), "embstr");
        assert_eq!(
            string_encoding(&StrValue::from_slice(&[b'x'; 44])),
            "embstr"
        );
        assert_eq!(string_encoding(&StrValue::from_slice(&[b'x'; 45])), "raw");
        let s = ObjectSettings::default();
        assert_eq!(refcount(&Value::string("9999"), &s), SHARED_REFCOUNT);
        assert_eq!(refcount(&Value::string("10000"), &s), 1);
        assert_eq!(refcount(&Value::string("-1"), &s), 1);
        let unshared = ObjectSettings {
            shared_integers: false,
            ..s
        };
        assert_eq!(refcount(&Value::string("1"), &unshared), 1);
    }

    #[test]
    fn collections_follow_the_thresholds() {
        let mut s = ObjectSettings::default();
        let mut set = SetValue::default();
        set.insert(Bytes::from_static(b"1"));
        set.insert(Bytes::from_static(b"-7"));
        assert_eq!(set_encoding(&set, &s), "intset");
        s.set_max_intset_entries = 1;
        assert_eq!(set_encoding(&set, &s), "hashtable");
        s.set_max_intset_entries = 512;
        set.insert(Bytes::from_static(b"a"));
        assert_eq!(set_encoding(&set, &s), "hashtable");

        let mut h = HashValue::default();
        h.insert(Bytes::from_static(b"f"), Bytes::from(vec![b'v'; 64]));
        assert_eq!(hash_encoding(&h, &s), "listpack");
        s.hash_max_listpack_value = 63;
        assert_eq!(hash_encoding(&h, &s), "hashtable");
        s.hash_max_listpack_value = 64;
        s.hash_max_listpack_entries = 0;
        assert_eq!(hash_encoding(&h, &s), "hashtable");

        let mut z = SortedSet::new();
        z.insert(b"a", 1.0);
        let mut s = ObjectSettings::default();
        assert_eq!(zset_encoding(&z, &s), "listpack");
        s.zset_max_listpack_entries = 0;
        assert_eq!(zset_encoding(&z, &s), "skiplist");
        assert_eq!(list_encoding(&VecDeque::new(), &s), "quicklist");
    }
}
