//! The thresholds of the compact encodings (`hash-max-listpack-entries` and friends), as
//! the keyspace reads them.
//!
//! CONFIG SET changes them while the server runs, so the keyspace holds them in atomics
//! shared with the engine ([`Encodings`]); a command loads the ones it needs once
//! ([`Encodings::limits`]). They decide only how a value is stored, never a reply, so a
//! replica configured differently still answers the same (only `OBJECT ENCODING` and
//! memory differ, as between Redis replicas).

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use super::hash::HashLimits;
use super::zset::ZsetLimits;

/// Every threshold, as plain values (the configuration's copy).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EncodingLimits {
    /// `hash-max-listpack-entries` and `hash-max-listpack-value`.
    pub hash: HashLimits,
    /// `zset-max-listpack-entries` and `zset-max-listpack-value`.
    pub zset: ZsetLimits,
}

/// The live thresholds.
#[derive(Debug)]
pub struct Encodings {
    hash_entries: AtomicUsize,
    hash_value: AtomicUsize,
    zset_entries: AtomicUsize,
    zset_value: AtomicUsize,
}

impl Default for Encodings {
    fn default() -> Self {
        let e = Encodings {
            hash_entries: AtomicUsize::new(0),
            hash_value: AtomicUsize::new(0),
            zset_entries: AtomicUsize::new(0),
            zset_value: AtomicUsize::new(0),
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
        }
    }
}
