//! Snapshots and digests of the keyspace.
//!
//! A snapshot is the whole keyspace in postcard, keys sorted within each database, each
//! collection in its own iteration order (hash and set order is observable, e.g. through
//! HGETALL or SPOP, so a restored replica must keep it), and each hash in the encoding it
//! had (a hash that grew into a table stays one, as on the node that wrote the snapshot;
//! older snapshots' hashes are encoded by the thresholds, as Redis encodes a loaded hash).
//! A digest hashes the same content with a fixed hash function, so two nodes holding the
//! same data print the same digest; a hash's encoding is not part of it.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::encoding::Encodings;
use super::set::IntSet;
use super::value::{HashValue, SetValue, StrBytes};
use super::zset::SortedSet;
use super::{Db, Entry, Keyspace, StrValue, Value, DATABASES};

#[derive(Serialize, Deserialize, Hash)]
enum SnapValue {
    Int(i64),
    Raw(Bytes),
    Hash(Vec<(Bytes, Bytes)>),
    List(Vec<Bytes>),
    Set(Vec<Bytes>),
    ZSet {
        skiplist: bool,
        items: Vec<(Bytes, u64)>,
    },
    /// A hash in its large encoding (`Hash` is a compact one, or any in a digest).
    HashTable(Vec<(Bytes, Bytes)>),
    /// A set in its large encoding (`Set` is any set in a digest, or one encoded by the
    /// thresholds as loaded, as every set was before intsets).
    SetTable(Vec<Bytes>),
    /// An intset: Redis's bytes, width included (removals never narrow it).
    IntSet(Bytes),
}

#[derive(Serialize, Deserialize, Hash)]
struct SnapEntry {
    key: Bytes,
    expires_at: Option<u64>,
    value: SnapValue,
}

#[derive(Serialize, Deserialize)]
struct Snapshot {
    version: u32,
    dbs: Vec<Vec<SnapEntry>>,
}

const VERSION: u32 = 1;

/// `v` as stored; `encoded`: whether a hash's encoding is kept (snapshots) or not (digests).
fn snap_value(v: &Value, encoded: bool) -> SnapValue {
    match v {
        Value::Str(StrValue::Int(n)) => SnapValue::Int(*n),
        Value::Str(StrValue::Raw(b)) => SnapValue::Raw(b.to_bytes()),
        Value::Hash(h) => {
            let pairs = h
                .iter()
                .map(|(k, v)| (Bytes::copy_from_slice(k), Bytes::copy_from_slice(v)))
                .collect();
            match h {
                HashValue::Table(_) if encoded => SnapValue::HashTable(pairs),
                _ => SnapValue::Hash(pairs),
            }
        }
        Value::List(l) => SnapValue::List(l.iter().collect()),
        Value::Set(s) => match s {
            SetValue::Table(_) if encoded => SnapValue::SetTable(s.iter().collect()),
            SetValue::Ints(i) if encoded => SnapValue::IntSet(i.to_redis_bytes().into()),
            _ => SnapValue::Set(s.iter().collect()),
        },
        Value::ZSet(z) => SnapValue::ZSet {
            skiplist: z.encoding() == "skiplist",
            items: z
                .iter()
                .map(|(m, s)| (Bytes::copy_from_slice(m), s.to_bits()))
                .collect(),
        },
    }
}

fn value_of(v: SnapValue, encodings: &Encodings) -> Result<Value, String> {
    let hash = |pairs: Vec<(Bytes, Bytes)>| {
        HashValue::from_pairs(pairs, encodings.hash())
            .ok_or_else(|| "bad keyspace snapshot: a hash repeats a field".to_string())
    };
    let set = |items: Vec<Bytes>| {
        SetValue::try_from_members(items, encodings.set())
            .ok_or_else(|| "bad keyspace snapshot: a set repeats a member".to_string())
    };
    Ok(match v {
        SnapValue::Int(n) => Value::Str(StrValue::Int(n)),
        SnapValue::Raw(b) => Value::Str(StrValue::Raw(StrBytes::new(&b))),
        SnapValue::Hash(pairs) => Value::Hash(hash(pairs)?),
        SnapValue::HashTable(pairs) => Value::Hash(hash(pairs)?.into_table()),
        SnapValue::List(items) => Value::List(items.into_iter().collect()),
        SnapValue::Set(items) => Value::Set(set(items)?),
        SnapValue::SetTable(items) => Value::Set(set(items)?.into_table()),
        SnapValue::IntSet(b) => Value::Set(
            IntSet::from_redis_bytes(&b)
                .ok_or_else(|| "bad keyspace snapshot: a broken intset".to_string())?
                .into(),
        ),
        SnapValue::ZSet { skiplist, items } => Value::ZSet(SortedSet::from_snapshot_limited(
            skiplist,
            items.into_iter().map(|(m, s)| (m, f64::from_bits(s))),
            encodings.zset(),
        )),
    })
}

/// The live entries of a database, sorted by key (see [`snap_value`] for `encoded`).
fn sorted_entries(db: &Db, now_ms: u64, encoded: bool) -> Vec<SnapEntry> {
    let mut entries: Vec<SnapEntry> = db
        .entries(now_ms)
        .map(|(k, e)| SnapEntry {
            key: k.to_bytes(),
            expires_at: e.expires_at(),
            value: snap_value(&e.value, encoded),
        })
        .collect();
    entries.sort_by(|a, b| a.key.cmp(&b.key));
    entries
}

/// Serialize every key, including keys past their deadline (a replica deletes those
/// itself when the leader's expiry entries say so).
pub fn encode(ks: &Keyspace) -> Vec<u8> {
    let snap = Snapshot {
        version: VERSION,
        dbs: ks
            .dbs
            .iter()
            .map(|db| sorted_entries(db, 0, true))
            .collect(),
    };
    postcard::to_stdvec(&snap).unwrap_or_default()
}

/// Rebuild a keyspace from `encode`'s output; hashes written by older versions are encoded
/// by the thresholds of `encodings`, which the new keyspace shares.
pub fn decode(bytes: &[u8], encodings: &Arc<Encodings>) -> Result<Keyspace, String> {
    let snap: Snapshot =
        postcard::from_bytes(bytes).map_err(|e| format!("bad keyspace snapshot: {e}"))?;
    if snap.version != VERSION || snap.dbs.len() != DATABASES {
        return Err(format!(
            "unsupported keyspace snapshot version {}",
            snap.version
        ));
    }
    let mut ks = Keyspace {
        encodings: encodings.clone(),
        ..Keyspace::default()
    };
    for (db, entries) in ks.dbs.iter_mut().zip(snap.dbs) {
        for e in entries {
            let mut entry = Entry::new(value_of(e.value, encodings)?);
            entry.set_deadline(e.expires_at);
            db.insert(&e.key, entry);
        }
    }
    Ok(ks)
}

/// A fixed hash of the live contents of every database (keys, values with their order,
/// deadlines). Equal data gives an equal digest on every node running this binary.
pub fn digest(ks: &Keyspace, now_ms: u64) -> u64 {
    let mut h = DefaultHasher::new();
    for (i, db) in ks.dbs.iter().enumerate() {
        i.hash(&mut h);
        for e in sorted_entries(db, now_ms, false) {
            e.hash(&mut h);
        }
    }
    h.finish()
}

/// A fixed hash of one key's live content in `db` (value with its order, deadline), or of
/// its absence. Cluster-mode WATCH records it at WATCH time and EXEC aborts when the
/// replicated apply sees a different one, which every replica decides the same way.
pub fn entry_digest(db: &Db, key: &[u8], now_ms: u64) -> u64 {
    let mut h = DefaultHasher::new();
    match db.get(key, now_ms) {
        Some(e) => {
            1u8.hash(&mut h);
            SnapEntry {
                key: Bytes::copy_from_slice(key),
                expires_at: e.expires_at(),
                value: snap_value(&e.value, false),
            }
            .hash(&mut h);
        }
        None => 0u8.hash(&mut h),
    }
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::value::HashValue;

    fn sample() -> Keyspace {
        let mut ks = Keyspace::default();
        let db = &mut ks.dbs[0];
        db.set(b"s", Value::string("hello"));
        db.set(b"n", Value::string("42"));
        db.set_expiry(b"n", Some(5_000));
        let h = HashValue::from_pairs([("b", "2"), ("a", "1")], Default::default()).unwrap();
        db.set(b"h", Value::Hash(h.clone()));
        db.set(b"t", Value::Hash(h.into_table()));
        let mut z = SortedSet::new();
        z.insert(b"m", 1.5);
        z.insert(b"z", -0.0);
        ks.dbs[3].set(b"z", Value::ZSet(z));
        ks
    }

    #[test]
    fn round_trip_keeps_values_order_and_deadlines() {
        let ks = sample();
        let back = decode(&encode(&ks), &Arc::default()).unwrap();
        assert_eq!(digest(&ks, 0), digest(&back, 0));
        assert_eq!(back.dbs[0].get(b"n", 0).unwrap().expires_at(), Some(5_000));
        for (key, encoding) in [(&b"h"[..], "listpack"), (b"t", "hashtable")] {
            let Value::Hash(h) = &back.dbs[0].get(key, 0).unwrap().value else {
                panic!()
            };
            assert_eq!(h.encoding(), encoding, "the encoding survives");
            assert_eq!(h.iter().map(|(f, _)| f).collect::<Vec<_>>(), [b"b", b"a"]);
        }
    }

    #[test]
    fn digest_ignores_a_hash_encoding() {
        let mut ks = sample();
        let before = digest(&ks, 0);
        let Some(e) = ks.dbs[0].get_mut(b"h", 0) else {
            panic!()
        };
        let Value::Hash(h) = &mut e.value else {
            panic!()
        };
        *h = std::mem::take(h).into_table();
        assert_eq!(digest(&ks, 0), before);
    }

    #[test]
    fn digest_sees_every_change() {
        let ks = sample();
        let base = digest(&ks, 0);
        let mut other = sample();
        other.dbs[0].set(b"s", Value::string("hellO"));
        assert_ne!(base, digest(&other, 0));
        let mut other = sample();
        other.dbs[0].set_expiry(b"s", Some(9));
        assert_ne!(base, digest(&other, 0));
        // Expired keys are not part of the live digest.
        assert_eq!(digest(&ks, 0), digest(&ks, 5_000));
        assert_ne!(digest(&ks, 0), digest(&ks, 5_001));
    }

    #[test]
    fn entry_digest_tracks_one_key() {
        let mut ks = sample();
        let before = entry_digest(&ks.dbs[0], b"s", 0);
        let absent = entry_digest(&ks.dbs[0], b"nope", 0);
        assert_eq!(before, entry_digest(&sample().dbs[0], b"s", 0));
        assert_ne!(before, absent);
        // Expiry makes the key absent.
        assert_ne!(entry_digest(&ks.dbs[0], b"n", 5_000), absent);
        assert_eq!(entry_digest(&ks.dbs[0], b"n", 5_001), absent);
        ks.dbs[0].set(b"s", Value::string("other"));
        assert_ne!(before, entry_digest(&ks.dbs[0], b"s", 0));
    }

    #[test]
    fn garbage_is_rejected() {
        assert!(decode(b"not a snapshot", &Arc::default()).is_err());
        assert!(decode(&[], &Arc::default()).is_err());
    }
}
