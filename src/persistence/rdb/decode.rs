//! Every value encoding Redis 7.0 loads (`rdbLoadObject`), old ones included, read into a
//! Tollgate [`Value`], and the DUMP payload check (`verifyDumpPayload`).
//!
//! Everything is checked as Redis's deep sanitization checks it (sizes, counts, duplicate
//! members or fields, NaN scores), whatever `sanitize-dump-payload` says in Redis: Tollgate
//! rebuilds its own structures from the payload, so a malformed one must be refused, not
//! kept. Streams and module values are recognized and refused by name.

use std::collections::{HashSet, VecDeque};

use bytes::Bytes;

use super::encode::{ZSET_LISTPACK_ENTRIES, ZSET_LISTPACK_VALUE};
use super::listpack::Item;
use super::{crc64, listpack, types, ziplist, Corrupt, Reader, RDB_VERSION};
use crate::store::hash::HashLimits;
use crate::store::set::{IntSet, Table, DEFAULT_INTSET_ENTRIES};
use crate::store::value::{HashValue, SetValue};
use crate::store::zset::SortedSet;
use crate::store::{KeyHasher, Value};

/// Why a serialized value could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The bytes are not a valid serialization.
    #[error("{0}")]
    Corrupt(#[from] Corrupt),
    /// A collection with no elements (Redis never stores those; it skips them in files).
    #[error("empty collection")]
    Empty,
    /// A valid value of a type Tollgate does not store (`stream`, `module`).
    #[error("{0} values are not supported")]
    Unsupported(&'static str),
}

/// The name of a type id, for messages (`string`, `hash`, ..., `stream`, `module`).
pub fn type_name(type_id: u8) -> &'static str {
    match type_id {
        types::STRING => "string",
        types::LIST | types::LIST_ZIPLIST | types::LIST_QUICKLIST | types::LIST_QUICKLIST_2 => {
            "list"
        }
        types::SET | types::SET_INTSET => "set",
        types::ZSET | types::ZSET_2 | types::ZSET_ZIPLIST | types::ZSET_LISTPACK => "zset",
        types::HASH | types::HASH_ZIPMAP | types::HASH_ZIPLIST | types::HASH_LISTPACK => "hash",
        types::STREAM_LISTPACKS | types::STREAM_LISTPACKS_2 => "stream",
        types::MODULE | types::MODULE_2 => "module",
        _ => "unknown",
    }
}

/// Whether `b` is a value type id (`rdbIsObjectType`).
pub fn is_value_type(b: u8) -> bool {
    matches!(b, 0..=7 | 9..=19)
}

/// The value inside a DUMP payload: the footer is checked first (RDB version at most
/// Redis 7.0's, CRC64), then the type and serialization. As in Redis, the value is read
/// from the whole payload (a value may run into the footer's bytes), and bytes between
/// the value and the footer are ignored.
pub fn restore_payload(payload: &[u8]) -> Result<Value, PayloadError> {
    if !verify_payload(payload) {
        return Err(PayloadError::Footer);
    }
    let mut r = Reader::new(payload);
    let type_id = r
        .byte()
        .ok()
        .filter(|&t| is_value_type(t))
        .ok_or(PayloadError::Value(DecodeError::Corrupt(Corrupt(
            "unknown value type",
        ))))?;
    read_value(&mut r, type_id).map_err(PayloadError::Value)
}

/// Why a DUMP payload was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PayloadError {
    /// Shorter than the footer, newer than RDB 10, or the checksum does not match.
    Footer,
    /// The value itself could not be loaded.
    Value(DecodeError),
}

/// `verifyDumpPayload`: at least the 10-byte footer, an RDB version Redis 7.0 reads, and
/// the CRC64 of everything before the checksum.
pub fn verify_payload(payload: &[u8]) -> bool {
    let Some(split) = payload.len().checked_sub(10) else {
        return false;
    };
    let footer = &payload[split..];
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    version <= RDB_VERSION && crc64::crc64(&payload[..split + 2]).to_le_bytes() == footer[2..]
}

/// Read a value of type `type_id` (already read) from `r`.
pub fn read_value(r: &mut Reader, type_id: u8) -> Result<Value, DecodeError> {
    let value = match type_id {
        types::STRING => Value::string(r.string()?),
        types::LIST => {
            let n = r.count()?;
            let mut list = VecDeque::with_capacity(prealloc(n));
            for _ in 0..n {
                list.push_back(Bytes::from(r.string()?.into_owned()));
            }
            Value::List(list.into_iter().collect())
        }
        types::LIST_QUICKLIST | types::LIST_QUICKLIST_2 => read_quicklist(r, type_id)?,
        types::LIST_ZIPLIST => {
            let blob = r.string()?;
            let items =
                ziplist::parse(&blob).ok_or(Corrupt("list ziplist integrity check failed"))?;
            Value::List(items.into_iter().map(item_bytes).collect())
        }
        types::SET => {
            // As Redis's rdbLoadObject: an intset while the members are integers and at
            // most set-max-intset-entries (its default here; RESTORE re-encodes by the
            // live setting), else a table.
            let n = r.count()?;
            let mut set = if n > DEFAULT_INTSET_ENTRIES {
                SetValue::Table(Box::new(Table::with_capacity_and_hasher(
                    prealloc(n),
                    KeyHasher,
                )))
            } else {
                SetValue::default()
            };
            for _ in 0..n {
                let member = Bytes::from(r.string()?.into_owned());
                if !set.insert(&member, DEFAULT_INTSET_ENTRIES) {
                    return Err(Corrupt("duplicate set members detected").into());
                }
            }
            Value::Set(set)
        }
        types::SET_INTSET => {
            let blob = r.string()?;
            let set =
                IntSet::from_redis_bytes(&blob).ok_or(Corrupt("intset integrity check failed"))?;
            Value::Set(SetValue::Ints(set))
        }
        types::ZSET | types::ZSET_2 => {
            let n = r.count()?;
            let mut items = Vec::with_capacity(prealloc(n));
            for _ in 0..n {
                let member = Bytes::from(r.string()?.into_owned());
                let score = if type_id == types::ZSET_2 {
                    f64::from_bits(r.u64_le()?)
                } else {
                    text_score(r)?
                };
                items.push((member, score));
            }
            zset(items)?
        }
        types::ZSET_ZIPLIST | types::ZSET_LISTPACK => {
            let blob = r.string()?;
            let items = if type_id == types::ZSET_ZIPLIST {
                ziplist::parse(&blob).ok_or(Corrupt("zset ziplist integrity check failed"))?
            } else {
                listpack::parse(&blob).ok_or(Corrupt("zset listpack integrity check failed"))?
            };
            if items.len() % 2 != 0 {
                return Err(Corrupt("zset with an odd number of elements").into());
            }
            let mut pairs = Vec::with_capacity(items.len() / 2);
            for pair in items.chunks_exact(2) {
                let score = match pair[1] {
                    Item::Int(n) => n as f64,
                    Item::Str(s) => parse_score(s)?,
                };
                pairs.push((item_bytes(pair[0]), score));
            }
            zset(pairs)?
        }
        types::HASH => {
            let n = r.count()?;
            let mut pairs = Vec::with_capacity(prealloc(n));
            for _ in 0..n {
                let f = Bytes::from(r.string()?.into_owned());
                let v = Bytes::from(r.string()?.into_owned());
                pairs.push((f, v));
            }
            hash(pairs)?
        }
        types::HASH_ZIPMAP => {
            let blob = r.string()?;
            let pairs =
                ziplist::parse_zipmap(&blob).ok_or(Corrupt("zipmap integrity check failed"))?;
            hash(
                pairs
                    .into_iter()
                    .map(|(f, v)| (Bytes::copy_from_slice(f), Bytes::copy_from_slice(v)))
                    .collect(),
            )?
        }
        types::HASH_ZIPLIST | types::HASH_LISTPACK => {
            let blob = r.string()?;
            let items = if type_id == types::HASH_ZIPLIST {
                ziplist::parse(&blob).ok_or(Corrupt("hash ziplist integrity check failed"))?
            } else {
                listpack::parse(&blob).ok_or(Corrupt("hash listpack integrity check failed"))?
            };
            if items.len() % 2 != 0 {
                return Err(Corrupt("hash with an odd number of elements").into());
            }
            hash(
                items
                    .chunks_exact(2)
                    .map(|p| (item_bytes(p[0]), item_bytes(p[1])))
                    .collect(),
            )?
        }
        types::STREAM_LISTPACKS | types::STREAM_LISTPACKS_2 => {
            return Err(DecodeError::Unsupported("stream"))
        }
        types::MODULE | types::MODULE_2 => return Err(DecodeError::Unsupported("module")),
        _ => return Err(Corrupt("unknown value type").into()),
    };
    if value.is_empty_collection() {
        return Err(DecodeError::Empty);
    }
    Ok(value)
}

/// Room to reserve for `n` elements a payload announces: every element takes at least a
/// byte of the payload, but a structure takes tens of bytes per element, so an announced
/// count only sizes the first allocation up to a bound (the rest grows as elements come).
fn prealloc(n: usize) -> usize {
    n.min(1 << 16)
}

/// A quicklist: nodes of ziplists (type 14) or of listpacks or plain elements (type 18).
fn read_quicklist(r: &mut Reader, type_id: u8) -> Result<Value, DecodeError> {
    const PLAIN: u64 = 1;
    const PACKED: u64 = 2;
    let nodes = r.count()?;
    let mut list = VecDeque::new();
    for _ in 0..nodes {
        let container = if type_id == types::LIST_QUICKLIST_2 {
            r.length()?
        } else {
            PACKED
        };
        if container != PLAIN && container != PACKED {
            return Err(Corrupt("quicklist integrity check failed").into());
        }
        let blob = r.string()?;
        if blob.is_empty() {
            return Err(Corrupt("empty quicklist node").into());
        }
        if container == PLAIN {
            list.push_back(Bytes::from(blob.into_owned()));
            continue;
        }
        let items = if type_id == types::LIST_QUICKLIST_2 {
            listpack::parse(&blob).ok_or(Corrupt("listpack integrity check failed"))?
        } else {
            ziplist::parse(&blob).ok_or(Corrupt("ziplist integrity check failed"))?
        };
        // Redis skips empty nodes; an empty list in the end is an empty key.
        list.extend(items.into_iter().map(item_bytes));
    }
    Ok(Value::List(list.into_iter().collect()))
}

/// A sorted set from its members and scores in any order; NaN scores and repeated
/// members are corrupt. Small sets are listpacks, as Redis converts them after loading.
fn zset(mut items: Vec<(Bytes, f64)>) -> Result<Value, DecodeError> {
    if items.iter().any(|(_, s)| s.is_nan()) {
        return Err(Corrupt("zset with NaN score detected").into());
    }
    let mut seen = HashSet::with_capacity_and_hasher(items.len(), KeyHasher);
    if !items.iter().all(|(m, _)| seen.insert(&m[..])) {
        return Err(Corrupt("duplicate zset fields detected").into());
    }
    drop(seen);
    // Redis's order: by score (-0 equal to 0), then by member.
    items.sort_by(|a, b| {
        a.1.partial_cmp(&b.1)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then_with(|| a.0.cmp(&b.0))
    });
    let skiplist = items.len() > ZSET_LISTPACK_ENTRIES
        || items.iter().any(|(m, _)| m.len() > ZSET_LISTPACK_VALUE);
    Ok(Value::ZSet(SortedSet::from_snapshot(skiplist, items)))
}

/// A hash from field/value pairs in order, encoded by Redis's default thresholds (RESTORE
/// re-encodes it by the configured ones: [`HashValue::reencode`]); a repeated field is
/// corrupt.
fn hash(pairs: Vec<(Bytes, Bytes)>) -> Result<Value, DecodeError> {
    HashValue::from_pairs(pairs, HashLimits::default())
        .map(Value::Hash)
        .ok_or_else(|| Corrupt("duplicate hash fields detected").into())
}

/// An old-format score: a length byte (253 NaN, 254 +inf, 255 -inf) and its text.
fn text_score(r: &mut Reader) -> Result<f64, DecodeError> {
    match r.byte()? {
        253 => Ok(f64::NAN),
        254 => Ok(f64::INFINITY),
        255 => Ok(f64::NEG_INFINITY),
        len => parse_score(r.take(usize::from(len))?),
    }
}

/// A score written as text (`%.17g`, `inf`, `-inf`, or an integer).
fn parse_score(s: &[u8]) -> Result<f64, DecodeError> {
    let text = std::str::from_utf8(s).map_err(|_| Corrupt("bad score"))?;
    let v = match text {
        "inf" | "+inf" => f64::INFINITY,
        "-inf" => f64::NEG_INFINITY,
        _ => text.parse::<f64>().map_err(|_| Corrupt("bad score"))?,
    };
    Ok(v)
}

fn item_bytes(item: Item) -> Bytes {
    match item {
        Item::Str(s) => Bytes::copy_from_slice(s),
        Item::Int(n) => int_bytes(n),
    }
}

fn int_bytes(n: i64) -> Bytes {
    Bytes::copy_from_slice(itoa::Buffer::new().format(n).as_bytes())
}

#[cfg(test)]
mod tests {
    use super::super::encode::dump;
    use super::*;
    use crate::store::StrValue;

    fn strings(v: &Value) -> Vec<Vec<u8>> {
        match v {
            Value::List(l) => l.iter().map(|b| b.to_vec()).collect(),
            Value::Set(s) => s.iter().map(|b| b.to_vec()).collect(),
            _ => panic!("not a list or set"),
        }
    }

    #[test]
    fn every_type_round_trips() {
        let values = vec![
            Value::string("hello"),
            Value::string("12"),
            Value::string(vec![b'x'; 10_000]),
            Value::List(
                (0..5000)
                    .map(|i| Bytes::from(format!("item-{i}")))
                    .collect(),
            ),
            Value::Set(SetValue::from_members(
                (0..600).map(|i| Bytes::from(i.to_string())),
                512,
            )),
            Value::Set(SetValue::from_members(
                (0..6).map(|i| Bytes::from(i.to_string())),
                512,
            )),
            Value::Set(SetValue::from_members(["a", "b"].map(Bytes::from), 512)),
        ];
        for v in values {
            let back = restore_payload(&dump(&v)).unwrap();
            match (&v, &back) {
                (Value::Str(a), Value::Str(b)) => assert_eq!(a, b),
                _ => assert_eq!(strings(&v), strings(&back)),
            }
        }
        let restored = restore_payload(&dump(&Value::string("-5"))).unwrap();
        assert!(matches!(restored, Value::Str(StrValue::Int(-5))));
    }

    #[test]
    fn footer_and_body_errors() {
        let mut p = dump(&Value::string("x"));
        assert!(restore_payload(&p).is_ok());
        let last = p.len() - 1;
        p[last] ^= 1;
        assert_eq!(restore_payload(&p).err(), Some(PayloadError::Footer));
        assert_eq!(restore_payload(b"short").err(), Some(PayloadError::Footer));
        // Version 11 is newer than Redis 7.0's.
        let mut body = vec![0u8, 1, b'x'];
        body.extend_from_slice(&11u16.to_le_bytes());
        let crc = crc64::crc64(&body);
        body.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(restore_payload(&body).err(), Some(PayloadError::Footer));
        // A stream is recognized.
        let mut body = vec![types::STREAM_LISTPACKS_2, 0];
        body.extend_from_slice(&10u16.to_le_bytes());
        let crc = crc64::crc64(&body);
        body.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(
            restore_payload(&body).err(),
            Some(PayloadError::Value(DecodeError::Unsupported("stream")))
        );
    }

    #[test]
    fn duplicates_and_empty_collections_are_refused() {
        let mut r = Reader::new(b"\x02\x01a\x01a");
        assert!(matches!(
            read_value(&mut r, types::SET),
            Err(DecodeError::Corrupt(_))
        ));
        let mut r = Reader::new(b"\x00");
        assert_eq!(
            read_value(&mut r, types::SET).err(),
            Some(DecodeError::Empty)
        );
        let mut r = Reader::new(b"\x02\x01a\x01b\x01a\x01c");
        assert!(matches!(
            read_value(&mut r, types::HASH),
            Err(DecodeError::Corrupt(_))
        ));
        let mut r = Reader::new(b"\x01\x01a\xfd");
        assert!(matches!(
            read_value(&mut r, types::ZSET),
            Err(DecodeError::Corrupt(_))
        ));
    }
}
