//! Byte strings that live inside the hash-table slot when short: the keyspace's keys and
//! string values.
//!
//! A lookup compares the wanted key with the stored one, and a limiter then reads its
//! state. With the stored bytes in heap allocations of their own, each is one more cache
//! miss after the slot's, and with many keys these misses were the largest single cost of
//! a limiter call. Keys of up to [`KEY_INLINE`] bytes (most rate-limit keys:
//! `rl:user:12345:60`) and string values of up to [`VALUE_INLINE`] bytes (every limiter
//! state but a sliding log's) are kept in the slot; longer ones in an exact-size heap
//! allocation. Copying a short one (the deadline index keeps a copy of each key with a
//! TTL) is a plain copy, and a limiter's new state is copied into the slot without an
//! allocation.
//!
//! A [`Key`] also carries its key's 32 bits of LRU/LFU access information
//! (`store::eviction`), in bytes its layout leaves free either way: after 18 inline bytes,
//! or between the tag and the pointer of a heap key. That makes a keyspace slot 72 bytes
//! (24 key, 40 value, 8 deadline) instead of 80, and a shard table of 128 buckets 9,360
//! bytes, which mimalloc serves from its 10,240-byte size class; at 80 bytes it was 10,384
//! bytes, just past that class, and took a 12,288-byte block (16 bytes more per bucket of
//! resident memory, about 22 per key; measured in the README).

use std::borrow::Borrow;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::atomic::{AtomicU32, Ordering};

use bytes::Bytes;

/// Longest key kept inline; a key is then 24 bytes (the tag, the length, 18 bytes and the
/// access information), which holds the usual rate-limit keys (`rl:user:12345:60` is 16,
/// redis-benchmark's `key:000000012345` 16). A longer key is an exact-size allocation.
pub const KEY_INLINE: usize = 18;
/// Longest string value kept inline (a token or leaky bucket's state is 36 bytes); a
/// value is then 40 bytes.
pub const VALUE_INLINE: usize = 38;

/// A key of the keyspace and its access information (LRU/LFU, `store::eviction`).
///
/// Hashing and equality are those of the bytes alone: the access information is not part
/// of the key's identity.
pub enum Key {
    /// Up to [`KEY_INLINE`] bytes.
    Inline {
        /// The length.
        len: u8,
        /// The bytes, then zeros.
        bytes: [u8; KEY_INLINE],
        /// The access information.
        access: AtomicU32,
    },
    /// Longer keys.
    Heap {
        /// The bytes.
        bytes: Box<[u8]>,
        /// The access information.
        access: AtomicU32,
    },
}

impl Key {
    /// A copy of `bytes`, with access information 0.
    pub fn new(bytes: &[u8]) -> Self {
        let access = AtomicU32::new(0);
        if bytes.len() <= KEY_INLINE {
            let mut buf = [0; KEY_INLINE];
            buf[..bytes.len()].copy_from_slice(bytes);
            Key::Inline {
                len: bytes.len() as u8,
                bytes: buf,
                access,
            }
        } else {
            Key::Heap {
                bytes: bytes.into(),
                access,
            }
        }
    }

    /// The bytes.
    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        match self {
            Key::Inline { len, bytes, .. } => &bytes[..usize::from(*len)],
            Key::Heap { bytes, .. } => bytes,
        }
    }

    /// Whether the bytes sit in the key itself (no allocation of their own).
    pub fn is_inline(&self) -> bool {
        matches!(self, Key::Inline { .. })
    }

    /// A copy as `Bytes` (for replies and snapshots).
    pub fn to_bytes(&self) -> Bytes {
        Bytes::copy_from_slice(self.as_slice())
    }

    /// The access information (written through `&self`: reads record uses under the
    /// keyspace lock with one relaxed store).
    #[inline]
    pub fn access(&self) -> &AtomicU32 {
        match self {
            Key::Inline { access, .. } | Key::Heap { access, .. } => access,
        }
    }
}

impl Clone for Key {
    fn clone(&self) -> Self {
        let access = AtomicU32::new(self.access().load(Ordering::Relaxed));
        match self {
            Key::Inline { len, bytes, .. } => Key::Inline {
                len: *len,
                bytes: *bytes,
                access,
            },
            Key::Heap { bytes, .. } => Key::Heap {
                bytes: bytes.clone(),
                access,
            },
        }
    }
}

impl Deref for Key {
    type Target = [u8];
    #[inline]
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

// As for `SmallBytes`: the maps look keys up by `&[u8]` with the slice's hash and re-hash
// stored keys when they grow, so both must be the bytes' own.
impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_slice().hash(state);
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for Key {}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&Bytes::copy_from_slice(self.as_slice()), f)
    }
}

/// Bytes, inline when at most `N` long.
#[derive(Clone)]
pub enum SmallBytes<const N: usize> {
    /// Up to `N` bytes: the length and the bytes.
    Inline(u8, [u8; N]),
    /// Longer ones.
    Heap(Box<[u8]>),
}

impl<const N: usize> SmallBytes<N> {
    /// A copy of `bytes`.
    pub fn new(bytes: &[u8]) -> Self {
        const { assert!(N < 256, "the inline length is a u8") };
        if bytes.len() <= N {
            let mut buf = [0; N];
            buf[..bytes.len()].copy_from_slice(bytes);
            SmallBytes::Inline(bytes.len() as u8, buf)
        } else {
            SmallBytes::Heap(bytes.into())
        }
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        match self {
            SmallBytes::Inline(len, buf) => &buf[..usize::from(*len)],
            SmallBytes::Heap(b) => b,
        }
    }

    /// A copy as `Bytes` (for replies and snapshots).
    pub fn to_bytes(&self) -> Bytes {
        Bytes::copy_from_slice(self.as_slice())
    }

    /// The bytes, for editing in place (SETBIT, BITFIELD, PFADD).
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        match self {
            SmallBytes::Inline(len, buf) => &mut buf[..usize::from(*len)],
            SmallBytes::Heap(b) => b,
        }
    }

    /// Pad with zero bytes to at least `len` bytes (Redis's `sdsgrowzero`). A longer
    /// string gets a new zeroed allocation of the exact size (fresh zeroed pages from the
    /// allocator: SETBIT at a 512 MB offset must not write half a gigabyte of zeros).
    pub fn grow_zeroed(&mut self, len: usize) {
        match self {
            SmallBytes::Inline(n, buf) if len <= N => {
                let cur = usize::from(*n);
                if len > cur {
                    buf[cur..len].fill(0);
                    *n = len as u8;
                }
            }
            SmallBytes::Heap(b) if len <= b.len() => {}
            _ => {
                let mut v = vec![0; len].into_boxed_slice();
                let old = self.as_slice();
                v[..old.len()].copy_from_slice(old);
                *self = SmallBytes::Heap(v);
            }
        }
    }
}

impl<const N: usize> Deref for SmallBytes<N> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl<const N: usize> Borrow<[u8]> for SmallBytes<N> {
    fn borrow(&self) -> &[u8] {
        self.as_slice()
    }
}

impl<const N: usize> AsRef<[u8]> for SmallBytes<N> {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

// Hashing and equality are those of the byte slice: maps look keys up by `&[u8]` with the
// slice's hash, and re-hash stored keys when they grow, so the two must agree.
impl<const N: usize> Hash for SmallBytes<N> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_slice().hash(state);
    }
}

impl<const N: usize> PartialEq for SmallBytes<N> {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl<const N: usize> Eq for SmallBytes<N> {}

impl<const N: usize> fmt::Debug for SmallBytes<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&Bytes::copy_from_slice(self.as_slice()), f)
    }
}

/// Longest payload a [`Packed`] keeps inline: the most that leaves a collection value 32
/// bytes, so that [`Value`](crate::store::Value) stays 40 (its string variant's inline
/// bytes set that size).
pub const PACKED_INLINE: usize = 29;

/// The bytes of a compact collection (a small hash's pairs, an intset's members) and a
/// number of the collection's own beside them (a hash's field count, an intset's width).
///
/// Up to [`PACKED_INLINE`] bytes sit in the value itself, so a small collection is no
/// allocation at all: a set of 10 small integers is 20 bytes, a hash of one or two short
/// fields (a seed sliding window's counters, redis-benchmark's HSET) 10-29, where an
/// allocation of their own cost a 24- to 32-byte mimalloc block each, and one more cache
/// miss per access. Longer payloads take an exact-size allocation (Redis reallocates its
/// listpacks and intsets to the exact size too).
#[derive(Clone)]
pub enum Packed {
    /// Up to [`PACKED_INLINE`] bytes, with a number of at most 255.
    Inline {
        /// The collection's number.
        meta: u8,
        /// The length.
        len: u8,
        /// The bytes, then zeros.
        bytes: [u8; PACKED_INLINE],
    },
    /// Longer payloads, or a larger number.
    Heap {
        /// The collection's number.
        meta: u32,
        /// The bytes.
        bytes: Box<[u8]>,
    },
}

impl Default for Packed {
    fn default() -> Self {
        Packed::new(0, &[])
    }
}

/// Writes a [`Packed`] payload front to back ([`Packed::build`]): into the inline bytes,
/// or into an allocation of the exact size (not zeroed first: a large hash's rewrite on
/// each HSET zeroed kilobytes for nothing).
pub enum PackedWriter {
    /// Into the inline bytes, the position.
    Inline([u8; PACKED_INLINE], usize),
    /// Into an allocation.
    Heap(Vec<u8>),
}

impl PackedWriter {
    /// Append `b`.
    #[inline]
    pub fn put(&mut self, b: &[u8]) {
        match self {
            PackedWriter::Inline(buf, at) => {
                buf[*at..*at + b.len()].copy_from_slice(b);
                *at += b.len();
            }
            PackedWriter::Heap(v) => v.extend_from_slice(b),
        }
    }
}

impl Packed {
    /// A payload of exactly `len` bytes written by `fill`, with the number `meta`; inline
    /// when they fit.
    #[inline]
    pub fn build(meta: u32, len: usize, fill: impl FnOnce(&mut PackedWriter)) -> Self {
        match u8::try_from(meta) {
            Ok(meta) if len <= PACKED_INLINE => {
                let mut w = PackedWriter::Inline([0; PACKED_INLINE], 0);
                fill(&mut w);
                let PackedWriter::Inline(bytes, at) = w else {
                    unreachable!("an inline writer stays inline")
                };
                debug_assert_eq!(at, len);
                Packed::Inline {
                    meta,
                    len: len as u8,
                    bytes,
                }
            }
            _ => {
                let mut w = PackedWriter::Heap(Vec::with_capacity(len));
                fill(&mut w);
                let PackedWriter::Heap(v) = w else {
                    unreachable!("a heap writer stays on the heap")
                };
                debug_assert_eq!(v.len(), len);
                Packed::Heap {
                    meta,
                    bytes: v.into_boxed_slice(),
                }
            }
        }
    }

    /// A copy of `bytes` with the number `meta`.
    pub fn new(meta: u32, bytes: &[u8]) -> Self {
        Packed::build(meta, bytes.len(), |w| w.put(bytes))
    }

    /// The bytes.
    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        match self {
            Packed::Inline { len, bytes, .. } => &bytes[..usize::from(*len)],
            Packed::Heap { bytes, .. } => bytes,
        }
    }

    /// The bytes, for editing in place (the length stays).
    #[inline]
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        match self {
            Packed::Inline { len, bytes, .. } => &mut bytes[..usize::from(*len)],
            Packed::Heap { bytes, .. } => bytes,
        }
    }

    /// The collection's number.
    #[inline]
    pub fn meta(&self) -> u32 {
        match self {
            Packed::Inline { meta, .. } => u32::from(*meta),
            Packed::Heap { meta, .. } => *meta,
        }
    }

    /// Bytes held in an allocation of their own (0 when inline), for INFO memory.
    pub fn heap_bytes(&self) -> usize {
        match self {
            Packed::Inline { .. } => 0,
            Packed::Heap { bytes, .. } => bytes.len(),
        }
    }
}

impl fmt::Debug for Packed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Packed")
            .field("meta", &self.meta())
            .field("bytes", &Bytes::copy_from_slice(self.as_slice()))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_keys_are_inline_and_all_keys_hash_and_compare_as_their_bytes() {
        assert_eq!(std::mem::size_of::<Key>(), 24);
        assert_eq!(std::mem::size_of::<SmallBytes<VALUE_INLINE>>(), 40);
        // A string value's tag fits in the spare tag values of its bytes: no growth.
        assert_eq!(std::mem::size_of::<crate::store::Value>(), 40);
        let hasher = ahash::RandomState::new();
        for len in [0, 1, 14, KEY_INLINE, KEY_INLINE + 1, 200] {
            let bytes: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let key = Key::new(&bytes);
            assert_eq!(key.is_inline(), len <= KEY_INLINE);
            assert_eq!(&key[..], &bytes[..]);
            assert_eq!(key.to_bytes(), Bytes::from(bytes.clone()));
            assert_eq!(hasher.hash_one(&key), hasher.hash_one(&bytes[..]));
            assert_eq!(key.clone(), key);
            // The access information is no part of the key's identity, and a copy keeps it.
            let used = Key::new(&bytes);
            used.access().store(77, Ordering::Relaxed);
            assert_eq!(used, key);
            assert_eq!(hasher.hash_one(&used), hasher.hash_one(&key));
            assert_eq!(used.clone().access().load(Ordering::Relaxed), 77);
        }
        assert_ne!(Key::new(b"a"), Key::new(b"a\0"));
    }

    #[test]
    fn packed_payloads_are_inline_up_to_the_limit_and_keep_their_number() {
        assert_eq!(std::mem::size_of::<Packed>(), 32);
        for (meta, len) in [
            (0, 0),
            (7, 1),
            (255, PACKED_INLINE),
            (256, 3),
            (2, PACKED_INLINE + 1),
        ] {
            let bytes: Vec<u8> = (0..len).map(|i| i as u8 + 1).collect();
            let p = Packed::new(meta, &bytes);
            assert_eq!(p.as_slice(), &bytes[..]);
            assert_eq!(p.meta(), meta);
            let inline = meta <= 255 && len <= PACKED_INLINE;
            assert_eq!(matches!(p, Packed::Inline { .. }), inline);
            assert_eq!(p.heap_bytes(), if inline { 0 } else { len });
            let mut q = p.clone();
            if len > 0 {
                q.as_mut_slice()[0] = 99;
                assert_eq!(q.as_slice()[0], 99);
                assert_eq!(p.as_slice()[0], 1);
            }
        }
    }
}
