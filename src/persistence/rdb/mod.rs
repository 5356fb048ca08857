//! Redis's RDB format: the serialization of one value that DUMP produces and RESTORE reads,
//! and whole `dump.rdb` files for `tollgate import-rdb`.
//!
//! | file | owns |
//! |------|------|
//! | `mod.rs` | type and opcode numbers, the [`Reader`] cursor (lengths, strings) and the string writer |
//! | `encode.rs` | a [`Value`](crate::store::Value) as Redis 7.0 serializes it, and the DUMP payload |
//! | `decode.rs` | every value encoding Redis 7.0 loads (old ones included) into a `Value` |
//! | `file.rs` | the RDB file: header, AUX fields, databases, expiry, functions, checksum |
//! | `listpack.rs`, `ziplist.rs` | the compact encodings inside values (intsets: `store::set`) |
//! | `lzf.rs`, `crc64.rs` | compression of long strings, the checksum |
//!
//! Writing picks the encoding Redis 7.0 would pick for the same contents under its default
//! settings, so where Redis's choice depends only on the contents (and, for hashes and sets
//! stored as hash tables, where its iteration order is not the point) the bytes are Redis's.
//! Reading checks everything it decodes: a payload is untrusted input, and Tollgate turns
//! it into its own structures rather than keeping the blobs.

pub mod crc64;
pub mod decode;
pub mod encode;
pub mod file;
pub mod listpack;
pub mod lzf;
pub mod ziplist;

use std::borrow::Cow;

/// The RDB version Redis 7.0 writes, and the newest it reads.
pub const RDB_VERSION: u16 = 10;

/// Value type ids (`RDB_TYPE_*`).
pub mod types {
    /// A string.
    pub const STRING: u8 = 0;
    /// A list as a plain sequence of strings (before 3.2).
    pub const LIST: u8 = 1;
    /// A set as a plain sequence of strings.
    pub const SET: u8 = 2;
    /// A sorted set with scores as strings (before 3.0).
    pub const ZSET: u8 = 3;
    /// A hash as a plain sequence of field/value strings.
    pub const HASH: u8 = 4;
    /// A sorted set with binary scores.
    pub const ZSET_2: u8 = 5;
    /// A module value (pre-GA format).
    pub const MODULE: u8 = 6;
    /// A module value.
    pub const MODULE_2: u8 = 7;
    /// A hash as a zipmap (before 2.6).
    pub const HASH_ZIPMAP: u8 = 9;
    /// A list as one ziplist (before 3.2).
    pub const LIST_ZIPLIST: u8 = 10;
    /// A set of integers as an intset.
    pub const SET_INTSET: u8 = 11;
    /// A sorted set as a ziplist (before 7.0).
    pub const ZSET_ZIPLIST: u8 = 12;
    /// A hash as a ziplist (before 7.0).
    pub const HASH_ZIPLIST: u8 = 13;
    /// A list as a quicklist of ziplists (3.2 to 6.2).
    pub const LIST_QUICKLIST: u8 = 14;
    /// A stream.
    pub const STREAM_LISTPACKS: u8 = 15;
    /// A hash as a listpack.
    pub const HASH_LISTPACK: u8 = 16;
    /// A sorted set as a listpack.
    pub const ZSET_LISTPACK: u8 = 17;
    /// A list as a quicklist of listpacks (7.0).
    pub const LIST_QUICKLIST_2: u8 = 18;
    /// A stream (7.0).
    pub const STREAM_LISTPACKS_2: u8 = 19;
}

/// File opcodes (`RDB_OPCODE_*`).
pub mod opcodes {
    /// A function library (7.0).
    pub const FUNCTION2: u8 = 245;
    /// A function library (7.0 release candidates).
    pub const FUNCTION_PRE_GA: u8 = 246;
    /// Module auxiliary data.
    pub const MODULE_AUX: u8 = 247;
    /// LRU idle time of the next key.
    pub const IDLE: u8 = 248;
    /// LFU frequency of the next key.
    pub const FREQ: u8 = 249;
    /// An auxiliary field (name and value strings).
    pub const AUX: u8 = 250;
    /// Size hints of the current database.
    pub const RESIZEDB: u8 = 251;
    /// Deadline of the next key in unix milliseconds.
    pub const EXPIRETIME_MS: u8 = 252;
    /// Deadline of the next key in unix seconds.
    pub const EXPIRETIME: u8 = 253;
    /// The database of the following keys.
    pub const SELECTDB: u8 = 254;
    /// End of the file (the checksum follows).
    pub const EOF: u8 = 255;
}

/// Why bytes could not be read as RDB data (the text names what was wrong).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Corrupt(pub &'static str);

/// A result of reading RDB data.
pub type Read<T> = Result<T, Corrupt>;

/// A cursor over RDB bytes with the format's primitive readers.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

/// What a length field holds: a length, or the id of a special string encoding.
enum Length {
    Plain(u64),
    Encoded(u8),
}

impl<'a> Reader<'a> {
    /// A cursor at the start of `data`.
    pub fn new(data: &'a [u8]) -> Reader<'a> {
        Reader { data, pos: 0 }
    }

    /// Bytes read so far.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Bytes left.
    pub fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    /// The bytes between two positions.
    pub fn slice(&self, from: usize, to: usize) -> &'a [u8] {
        &self.data[from..to]
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> Read<&'a [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.data.len())
            .ok_or(Corrupt("unexpected end of data"))?;
        let s = &self.data[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    /// The next `N` bytes as an array.
    pub fn array<const N: usize>(&mut self) -> Read<[u8; N]> {
        let s = self.take(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    /// One byte.
    pub fn byte(&mut self) -> Read<u8> {
        Ok(self.array::<1>()?[0])
    }

    fn length_field(&mut self) -> Read<Length> {
        let b = self.byte()?;
        Ok(match b >> 6 {
            0 => Length::Plain(u64::from(b & 0x3f)),
            1 => Length::Plain((u64::from(b & 0x3f) << 8) | u64::from(self.byte()?)),
            2 => match b {
                0x80 => Length::Plain(u64::from(u32::from_be_bytes(self.array()?))),
                0x81 => Length::Plain(u64::from_be_bytes(self.array()?)),
                _ => return Err(Corrupt("unknown length encoding")),
            },
            _ => Length::Encoded(b & 0x3f),
        })
    }

    /// A length (`rdbLoadLen`); a special string encoding here is corrupt.
    pub fn length(&mut self) -> Read<u64> {
        match self.length_field()? {
            Length::Plain(n) => Ok(n),
            Length::Encoded(_) => Err(Corrupt("string encoding where a length was expected")),
        }
    }

    /// A length that counts items still to be read, each at least one byte: a count beyond
    /// the bytes left is corrupt (and must not size an allocation).
    pub fn count(&mut self) -> Read<usize> {
        let n = self.length()?;
        usize::try_from(n)
            .ok()
            .filter(|&n| n <= self.remaining())
            .ok_or(Corrupt("count larger than the data"))
    }

    /// A string: plain, integer-encoded or LZF-compressed (`rdbGenericLoadStringObject`).
    pub fn string(&mut self) -> Read<Cow<'a, [u8]>> {
        match self.length_field()? {
            Length::Plain(n) => {
                let n = usize::try_from(n).map_err(|_| Corrupt("string longer than the data"))?;
                Ok(Cow::Borrowed(self.take(n)?))
            }
            Length::Encoded(0) => Ok(int_text(i64::from(self.byte()? as i8))),
            Length::Encoded(1) => Ok(int_text(i64::from(i16::from_le_bytes(self.array()?)))),
            Length::Encoded(2) => Ok(int_text(i64::from(i32::from_le_bytes(self.array()?)))),
            Length::Encoded(3) => {
                let clen = self.length()?;
                let len = self.length()?;
                let clen = usize::try_from(clen).map_err(|_| Corrupt("bad LZF length"))?;
                let len = usize::try_from(len).map_err(|_| Corrupt("bad LZF length"))?;
                let compressed = self.take(clen)?;
                lzf::decompress(compressed, len)
                    .map(Cow::Owned)
                    .ok_or(Corrupt("invalid LZF compressed string"))
            }
            Length::Encoded(_) => Err(Corrupt("unknown string encoding")),
        }
    }

    /// A little-endian u64 (millisecond deadlines, binary doubles, checksums).
    pub fn u64_le(&mut self) -> Read<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }
}

fn int_text(n: i64) -> Cow<'static, [u8]> {
    Cow::Owned(itoa::Buffer::new().format(n).as_bytes().to_vec())
}

/// Write a length (`rdbSaveLen`).
pub fn put_length(out: &mut Vec<u8>, len: u64) {
    if len < 1 << 6 {
        out.push(len as u8);
    } else if len < 1 << 14 {
        out.push(0x40 | (len >> 8) as u8);
        out.push(len as u8);
    } else if let Ok(l32) = u32::try_from(len) {
        out.push(0x80);
        out.extend_from_slice(&l32.to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&len.to_be_bytes());
    }
}

/// Write a string as Redis's `rdbSaveRawString` does: an integer encoding when it is the
/// canonical text of an integer of up to 32 bits, else LZF when longer than 20 bytes and
/// compression saves at least 4 bytes, else the plain bytes.
pub fn put_string(out: &mut Vec<u8>, s: &[u8]) {
    if s.len() <= 11 {
        if let Some(n) = crate::store::value::parse_canonical_i64(s) {
            if put_small_int(out, n) {
                return;
            }
        }
    }
    if s.len() > 20 {
        if let Some(c) = lzf::compress(s, s.len() - 4) {
            out.push(0xc3);
            put_length(out, c.len() as u64);
            put_length(out, s.len() as u64);
            out.extend_from_slice(&c);
            return;
        }
    }
    put_length(out, s.len() as u64);
    out.extend_from_slice(s);
}

/// Write `n` in an integer string encoding if it fits in 32 bits (`rdbEncodeInteger`).
fn put_small_int(out: &mut Vec<u8>, n: i64) -> bool {
    if let Ok(v) = i8::try_from(n) {
        out.extend_from_slice(&[0xc0, v as u8]);
    } else if let Ok(v) = i16::try_from(n) {
        out.push(0xc1);
        out.extend_from_slice(&v.to_le_bytes());
    } else if let Ok(v) = i32::try_from(n) {
        out.push(0xc2);
        out.extend_from_slice(&v.to_le_bytes());
    } else {
        return false;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_round_trip_at_each_width() {
        for n in [
            0u64,
            63,
            64,
            16383,
            16384,
            u64::from(u32::MAX),
            u64::from(u32::MAX) + 1,
        ] {
            let mut out = Vec::new();
            put_length(&mut out, n);
            let mut r = Reader::new(&out);
            assert_eq!(r.length().unwrap(), n);
            assert_eq!(r.remaining(), 0);
        }
    }

    #[test]
    fn strings_take_redis_encodings() {
        let cases: &[(&[u8], &[u8])] = &[
            (b"12", b"\xc0\x0c"),
            (b"-128", b"\xc0\x80"),
            (b"128", b"\xc1\x80\x00"),
            (b"-2147483648", b"\xc2\x00\x00\x00\x80"),
            (b"2147483648", b"\x0a2147483648"),
            (b"012", b"\x03012"),
            (b"", b"\x00"),
        ];
        for (s, want) in cases {
            let mut out = Vec::new();
            put_string(&mut out, s);
            assert_eq!(&out[..], *want, "{:?}", String::from_utf8_lossy(s));
            assert_eq!(&Reader::new(&out).string().unwrap()[..], *s);
        }
        let long = vec![b'a'; 50];
        let mut out = Vec::new();
        put_string(&mut out, &long);
        assert_eq!(&out[..3], b"\xc3\x09\x32");
        assert_eq!(&Reader::new(&out).string().unwrap()[..], &long[..]);
    }

    #[test]
    fn truncated_and_unknown_encodings_are_corrupt() {
        assert!(Reader::new(b"\x05abc").string().is_err());
        assert!(Reader::new(b"\xc5").string().is_err());
        assert!(Reader::new(b"\xbf").length().is_err());
        assert!(Reader::new(b"\x81\x00").length().is_err());
        assert!(Reader::new(b"\x3f").count().is_err());
    }
}
