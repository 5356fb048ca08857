//! A [`Value`] as Redis 7.0 serializes it (`rdbSaveObjectType` + `rdbSaveObject`), and the
//! DUMP payload around it.
//!
//! The encoding is the one Redis 7.0 would hold for the same contents under its default
//! settings:
//!
//! - strings: an integer encoding for 32-bit integers, LZF when longer than 20 bytes and
//!   compressible, else plain;
//! - lists: a quicklist of listpacks, each node filled up to 8 KB (`list-max-listpack-size
//!   -2`) in order from the head, as RPUSH fills them;
//! - sets: the encoding the set holds (an intset, with the width it has, or a hash table
//!   of the members in Tollgate's order);
//! - sorted sets: the encoding the set holds (listpack up to 128 members of up to 64 bytes,
//!   else skiplist, whose members Redis writes from the highest to the lowest);
//! - hashes: a listpack up to 128 fields with fields and values of up to 64 bytes
//!   (`hash-max-listpack-*`), in insertion order, else a hash table.
//!
//! Where Redis's own choice depends on history Tollgate does not keep (LPUSH fills list
//! nodes from the other end), the bytes differ but the value is the same.

use super::{crc64, listpack, put_length, put_string, types, RDB_VERSION};
use crate::numbers::format_double;
use crate::store::value::{HashValue, SetValue};
use crate::store::zset::SortedSet;
use crate::store::{StrValue, Value};

/// Most members of a listpack sorted set (`zset-max-listpack-entries`).
pub const ZSET_LISTPACK_ENTRIES: usize = 128;
/// Longest member of a listpack sorted set (`zset-max-listpack-value`).
pub const ZSET_LISTPACK_VALUE: usize = 64;
/// Largest list node (`list-max-listpack-size -2`: 8 KB).
const LIST_NODE_BYTES: usize = 8192;
/// What Redis adds to an element's length when it estimates a node's growth.
const NODE_ENTRY_OVERHEAD: usize = 8;
/// Quicklist node container: a listpack.
const CONTAINER_PACKED: u64 = 2;

/// The DUMP payload of `value`: its type and serialization, the RDB version (2 bytes LE)
/// and the CRC64 of all that (8 bytes LE).
pub fn dump(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    write_value(&mut out, value);
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64::crc64(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Append `value`'s type id and serialization to `out`.
pub fn write_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Str(s) => {
            out.push(types::STRING);
            write_string(out, s);
        }
        Value::List(items) => {
            out.push(types::LIST_QUICKLIST_2);
            write_list(out, items.iter());
        }
        Value::Set(set) => write_set(out, set),
        Value::ZSet(z) => write_zset(out, z),
        Value::Hash(h) => write_hash(out, h),
    }
}

fn write_string(out: &mut Vec<u8>, s: &StrValue) {
    match s {
        StrValue::Int(n) => put_string(out, itoa::Buffer::new().format(*n).as_bytes()),
        StrValue::Raw(b) => put_string(out, b),
    }
}

/// A quicklist: the node count, then each node's container and listpack.
fn write_list(out: &mut Vec<u8>, items: impl Iterator<Item = bytes::Bytes>) {
    let mut nodes: Vec<Vec<u8>> = Vec::new();
    let mut node = listpack::Writer::new();
    for item in items {
        // `_quicklistNodeAllowInsert` with fill -2: the node's size plus the element's
        // length plus 8 must stay within 8 KB.
        if !node.is_empty() && node.bytes() + item.len() + NODE_ENTRY_OVERHEAD > LIST_NODE_BYTES {
            nodes.push(std::mem::take(&mut node).finish());
        }
        node.push(&item);
    }
    if !node.is_empty() {
        nodes.push(node.finish());
    }
    put_length(out, nodes.len() as u64);
    for lp in nodes {
        put_length(out, CONTAINER_PACKED);
        put_string(out, &lp);
    }
}

fn write_set(out: &mut Vec<u8>, set: &SetValue) {
    match set {
        SetValue::Ints(ints) => {
            out.push(types::SET_INTSET);
            put_string(out, &ints.to_redis_bytes());
        }
        SetValue::Table(t) => {
            out.push(types::SET);
            put_length(out, t.len() as u64);
            for m in t.iter() {
                put_string(out, m);
            }
        }
    }
}

fn write_zset(out: &mut Vec<u8>, z: &SortedSet) {
    if z.encoding() == "listpack" {
        out.push(types::ZSET_LISTPACK);
        let mut lp = listpack::Writer::new();
        for (member, score) in z.iter() {
            lp.push(member);
            match score_as_integer(score) {
                Some(n) => lp.push_int(n),
                None => lp.push(format_double(score).as_bytes()),
            }
        }
        put_string(out, &lp.finish());
    } else {
        out.push(types::ZSET_2);
        put_length(out, z.len() as u64);
        let items: Vec<_> = z.iter().collect();
        for (member, score) in items.into_iter().rev() {
            put_string(out, member);
            out.extend_from_slice(&score.to_le_bytes());
        }
    }
}

/// Redis's `double2ll`: the score as an integer when it is one and well inside the i64
/// range (a listpack then stores it as an integer; -0 becomes 0).
fn score_as_integer(score: f64) -> Option<i64> {
    const LIMIT: f64 = (i64::MAX / 2) as f64;
    if !(-LIMIT..=LIMIT).contains(&score) {
        return None;
    }
    let n = score as i64;
    (n as f64 == score).then_some(n)
}

/// A hash in its encoding: a listpack when compact, else Redis's plain hash.
fn write_hash(out: &mut Vec<u8>, h: &HashValue) {
    if let HashValue::Compact(_) = h {
        out.push(types::HASH_LISTPACK);
        let mut lp = listpack::Writer::new();
        for (f, v) in h.iter() {
            lp.push(f);
            lp.push(v);
        }
        put_string(out, &lp.finish());
    } else {
        out.push(types::HASH);
        put_length(out, h.len() as u64);
        for (f, v) in h.iter() {
            put_string(out, f);
            put_string(out, v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_become_integers_like_double2ll() {
        assert_eq!(score_as_integer(-0.0), Some(0));
        assert_eq!(score_as_integer(1.0), Some(1));
        assert_eq!(score_as_integer(1.5), None);
        assert_eq!(score_as_integer(f64::INFINITY), None);
        assert_eq!(score_as_integer(4_611_686_018_427_387_904.0), Some(1 << 62));
        assert_eq!(score_as_integer(4_611_686_018_427_388_928.0), None);
        assert_eq!(
            score_as_integer(-4_611_686_018_427_387_904.0),
            Some(-(1 << 62))
        );
    }

    #[test]
    fn matches_redis_dumps() {
        // Captured from redis-server 7.0.15.
        let hash = HashValue::from_pairs([("f", "v"), ("a", "1")], Default::default()).unwrap();
        assert_eq!(
            dump(&Value::Hash(hash)),
            b"\x10\x12\x12\x00\x00\x00\x04\x00\x81f\x02\x81v\x02\x81a\x02\x01\x01\xff\n\x00d2<\xf1X\x10Fx"
        );
        let set = SetValue::from_members(["1", "2", "70000"].map(bytes::Bytes::from), 512);
        assert_eq!(
            dump(&Value::Set(set)),
            b"\x0b\x14\x04\x00\x00\x00\x03\x00\x00\x00\x01\x00\x00\x00\x02\x00\x00\x00p\x11\x01\x00\n\x00\x85\xd5\xc1\x06[\x1d\xd0U"
        );
        let list = ["a", "1", "-1"]
            .into_iter()
            .map(bytes::Bytes::from)
            .collect();
        assert_eq!(
            dump(&Value::List(list)),
            b"\x12\x01\x02\x0f\x0f\x00\x00\x00\x03\x00\x81a\x02\x01\x01\xdf\xff\x02\xff\n\x00\xd7C\xdbU\xabhF\xed"
        );
        assert_eq!(
            dump(&Value::string(
                "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
            )),
            b"\x00\xc3\t2\x01aa\xe0%\x00\x01aa\n\x00\t\xacH\xb9\xab\x15\xfb\xc9"
        );
    }
}
