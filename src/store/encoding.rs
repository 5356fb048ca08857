//! The thresholds of the compact encodings (`hash-max-listpack-entries` and friends), as
//! the keyspace reads them.
//!
//! CONFIG SET changes them while the server runs, so the keyspace holds them in atomics
//! shared with the engine ([`Encodings`]); a command loads the ones it needs once
//! ([`Encodings::limits`]). They decide how a value is stored, and that can show in a
//! reply (a set's iteration order, a sorted set's `-0` scores, a large hash's order after
//! HDEL), so a cluster node keeps them at Redis's defaults: the configuration refuses any
//! other value there, at start-up and in CONFIG SET (`config::params::cluster_fixed`), and
//! every node applies a replicated write alike. A standalone server takes any value.
//!
//! It also says which internal encoding Redis 7.0 would give a value (OBJECT ENCODING), and the
//! settings that decide it: the `*-max-listpack-*` / `set-max-intset-entries` thresholds of
//! the CONFIG registry and whether small integers are shared (OBJECT REFCOUNT).
//!
//! Hashes, sets and sorted sets have real compact encodings, converted for good at the
//! configured thresholds as Redis converts them, so OBJECT ENCODING reports what the value
//! is. Lists answer `quicklist`, as every Redis 7.0 list does.

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use super::hash::HashLimits;
use super::set::DEFAULT_INTSET_ENTRIES;
use super::zset::ZsetLimits;

/// Every threshold, as plain values (the configuration's copy).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EncodingLimits {
    /// `hash-max-listpack-entries` and `hash-max-listpack-value`.
    pub hash: HashLimits,
    /// `zset-max-listpack-entries` and `zset-max-listpack-value`.
    pub zset: ZsetLimits,
    /// `set-max-intset-entries`.
    pub set_intset_entries: usize,
}

impl Default for EncodingLimits {
    fn default() -> Self {
        EncodingLimits {
            hash: HashLimits::default(),
            zset: ZsetLimits::default(),
            set_intset_entries: DEFAULT_INTSET_ENTRIES,
        }
    }
}

/// The live thresholds.
#[derive(Debug)]
pub struct Encodings {
    hash_entries: AtomicUsize,
    hash_value: AtomicUsize,
    zset_entries: AtomicUsize,
    zset_value: AtomicUsize,
    set_entries: AtomicUsize,
}

impl Default for Encodings {
    fn default() -> Self {
        let e = Encodings {
            hash_entries: AtomicUsize::new(0),
            hash_value: AtomicUsize::new(0),
            zset_entries: AtomicUsize::new(0),
            zset_value: AtomicUsize::new(0),
            set_entries: AtomicUsize::new(0),
        };
        e.configure(&EncodingLimits::default());
        e
    }
}

impl Encodings {
    /// Take new thresholds (CONFIG SET, start-up).
    pub fn configure(&self, l: &EncodingLimits) {
        self.hash_entries.store(l.hash.entries, Relaxed);
        self.hash_value.store(l.hash.value, Relaxed);
        self.zset_entries.store(l.zset.entries, Relaxed);
        self.zset_value.store(l.zset.value, Relaxed);
        self.set_entries.store(l.set_intset_entries, Relaxed);
    }

    /// `set-max-intset-entries` now.
    #[inline]
    pub fn set(&self) -> usize {
        self.set_entries.load(Relaxed)
    }

    /// The hash thresholds now.
    #[inline]
    pub fn hash(&self) -> HashLimits {
        HashLimits {
            entries: self.hash_entries.load(Relaxed),
            value: self.hash_value.load(Relaxed),
        }
    }

    /// The sorted-set thresholds now.
    #[inline]
    pub fn zset(&self) -> ZsetLimits {
        ZsetLimits {
            entries: self.zset_entries.load(Relaxed),
            value: self.zset_value.load(Relaxed),
        }
    }

    /// Every threshold now.
    pub fn limits(&self) -> EncodingLimits {
        EncodingLimits {
            hash: self.hash(),
            zset: self.zset(),
            set_intset_entries: self.set(),
        }
    }
}

use super::value::{HashValue, ListValue, SetValue, StrValue};
use super::zset::SortedSet;
use super::Value;

/// The setting OBJECT REFCOUNT reads, copied from the configuration when it changes
/// (`Engine::set_object_settings`). (OBJECT ENCODING reads the value itself: each
/// collection knows its encoding, converted by `Encodings` above.) Defaults are Redis 7.0's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObjectSettings {
    /// Whether integers 0..10000 are shared objects (OBJECT REFCOUNT answers `INT_MAX`):
    /// Redis shares them unless `maxmemory` is set with an LRU or LFU policy.
    pub shared_integers: bool,
}

impl Default for ObjectSettings {
    fn default() -> Self {
        ObjectSettings {
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
pub fn list_encoding(_l: &ListValue) -> &'static str {
    "quicklist"
}

/// A set: its real encoding (`intset` while compact, `hashtable` once converted; Redis
/// 7.0 has no listpack sets).
pub fn set_encoding(set: &SetValue) -> &'static str {
    set.encoding()
}

/// A hash: its real encoding (`listpack` while compact, `hashtable` once converted).
pub fn hash_encoding(h: &HashValue) -> &'static str {
    h.encoding()
}

/// A sorted set: its real encoding (`listpack` while compact, `skiplist` once converted).
pub fn zset_encoding(z: &SortedSet) -> &'static str {
    z.encoding()
}

/// OBJECT ENCODING of any value.
pub fn encoding(v: &Value) -> &'static str {
    match v {
        Value::Str(x) => string_encoding(x),
        Value::List(l) => list_encoding(l),
        Value::Set(x) => set_encoding(x),
        Value::Hash(h) => hash_encoding(h),
        Value::ZSet(z) => zset_encoding(z),
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
    use bytes::Bytes;

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
        };
        assert_eq!(refcount(&Value::string("1"), &unshared), 1);
    }

    #[test]
    fn collections_follow_the_thresholds() {
        let mut set = SetValue::default();
        set.insert(&Bytes::from_static(b"1"), 2);
        set.insert(&Bytes::from_static(b"-7"), 2);
        assert_eq!(set_encoding(&set), "intset");
        set.insert(&Bytes::from_static(b"a"), 2);
        assert_eq!(set_encoding(&set), "hashtable");

        assert_eq!(list_encoding(&ListValue::default()), "quicklist");
    }
}
