//! The keyspace's key type: short keys live inside the hash-table slot itself.
//!
//! A lookup compares the wanted key with the stored one. With the stored bytes in a heap
//! allocation of their own, that comparison is one more cache miss after the slot's,
//! and with many keys these misses were the largest single cost of a limiter call. Keys
//! of up to [`INLINE`] bytes (most rate-limit keys: `rl:user:12345:60`) are kept in the
//! slot; longer ones in an exact-size heap allocation. Copying a short key (the deadline
//! index keeps one per key with a TTL) is a plain copy.

use std::borrow::Borrow;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;

use bytes::Bytes;

/// Longest key kept inline; the type is then 32 bytes, the size of a `Bytes`.
pub const INLINE: usize = 30;

/// A key of the keyspace: its bytes, inline when short.
#[derive(Clone)]
pub enum Key {
    /// Up to [`INLINE`] bytes: the length and the bytes.
    Inline(u8, [u8; INLINE]),
    /// Longer keys.
    Heap(Box<[u8]>),
}

impl Key {
    /// A copy of `bytes`.
    pub fn new(bytes: &[u8]) -> Key {
        if bytes.len() <= INLINE {
            let mut buf = [0; INLINE];
            buf[..bytes.len()].copy_from_slice(bytes);
            Key::Inline(bytes.len() as u8, buf)
        } else {
            Key::Heap(bytes.into())
        }
    }

    /// The key's bytes.
    pub fn as_slice(&self) -> &[u8] {
        match self {
            Key::Inline(len, buf) => &buf[..usize::from(*len)],
            Key::Heap(b) => b,
        }
    }

    /// A copy of the key as `Bytes` (for replies and snapshots).
    pub fn to_bytes(&self) -> Bytes {
        Bytes::copy_from_slice(self.as_slice())
    }
}

impl Deref for Key {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl Borrow<[u8]> for Key {
    fn borrow(&self) -> &[u8] {
        self.as_slice()
    }
}

impl AsRef<[u8]> for Key {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

// Hashing and equality are those of the byte slice: maps look keys up by `&[u8]` with the
// slice's hash, and re-hash stored keys when they grow, so the two must agree.
impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_slice().hash(state);
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Key) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for Key {}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&Bytes::copy_from_slice(self.as_slice()), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_keys_are_inline_and_all_keys_hash_and_compare_as_their_bytes() {
        assert_eq!(std::mem::size_of::<Key>(), 32);
        let hasher = ahash::RandomState::new();
        for len in [0, 1, 14, INLINE, INLINE + 1, 200] {
            let bytes: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let key = Key::new(&bytes);
            assert_eq!(matches!(key, Key::Inline(..)), len <= INLINE);
            assert_eq!(&key[..], &bytes[..]);
            assert_eq!(key.to_bytes(), Bytes::from(bytes.clone()));
            assert_eq!(hasher.hash_one(&key), hasher.hash_one(&bytes[..]));
            assert_eq!(key.clone(), key);
        }
        assert_ne!(Key::new(b"a"), Key::new(b"a\0"));
    }
}
