//! Listpacks: the compact encoding Redis 7.0 uses for small hashes and sorted sets and for
//! each node of a list. A writer that encodes every element as Redis's `lpAppend` does
//! (canonical integers as integers of the smallest width, other strings by length), and
//! a reader that checks the structure as Redis's deep `lpValidateIntegrity` does.
//!
//! Layout: total bytes (u32 LE), element count (u16 LE, 65535 = unknown), the entries,
//! then 0xFF. Each entry is its encoding and data, then its own length written backwards
//! in 7-bit groups so the listpack can be walked from the end.

use crate::store::value::parse_canonical_i64;

/// Header: total bytes and element count.
const HEADER: usize = 6;
/// The terminator byte.
const EOF: u8 = 0xff;
/// The count written when there are too many elements to count in 16 bits.
const COUNT_UNKNOWN: u16 = u16::MAX;

/// One element of a listpack: Redis stores canonical integers as integers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Item<'a> {
    /// A string.
    Str(&'a [u8]),
    /// An integer (the string is its decimal text).
    Int(i64),
}

impl Item<'_> {
    /// The element as bytes (integers in decimal).
    pub fn to_vec(self) -> Vec<u8> {
        match self {
            Item::Str(s) => s.to_vec(),
            Item::Int(n) => itoa::Buffer::new().format(n).as_bytes().to_vec(),
        }
    }

    /// The element's length as a string.
    pub fn text_len(self) -> usize {
        match self {
            Item::Str(s) => s.len(),
            Item::Int(n) => itoa::Buffer::new().format(n).len(),
        }
    }
}

/// Builds a listpack element by element.
pub struct Writer {
    buf: Vec<u8>,
    count: usize,
}

impl Default for Writer {
    fn default() -> Self {
        Writer::new()
    }
}

impl Writer {
    /// An empty listpack.
    pub fn new() -> Writer {
        Writer {
            buf: vec![0; HEADER],
            count: 0,
        }
    }

    /// The size the listpack has once finished (Redis's `lpBytes`).
    pub fn bytes(&self) -> usize {
        self.buf.len() + 1
    }

    /// Number of elements so far.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether no element was added.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Append a string (an integer if it is one's canonical text, as `lpAppend` does).
    pub fn push(&mut self, s: &[u8]) {
        match parse_canonical_i64(s) {
            Some(n) => self.push_int(n),
            None => self.push_str(s),
        }
    }

    /// Append an integer (`lpAppendInteger`).
    pub fn push_int(&mut self, v: i64) {
        let start = self.buf.len();
        if (0..=127).contains(&v) {
            self.buf.push(v as u8);
        } else if (-4096..=4095).contains(&v) {
            let u = if v < 0 { (1 << 13) + v } else { v } as u16;
            self.buf.push(0xc0 | (u >> 8) as u8);
            self.buf.push(u as u8);
        } else if (-32768..=32767).contains(&v) {
            self.buf.push(0xf1);
            self.buf.extend_from_slice(&(v as i16).to_le_bytes());
        } else if (-8_388_608..=8_388_607).contains(&v) {
            self.buf.push(0xf2);
            self.buf.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
        } else if let Ok(v32) = i32::try_from(v) {
            self.buf.push(0xf3);
            self.buf.extend_from_slice(&v32.to_le_bytes());
        } else {
            self.buf.push(0xf4);
            self.buf.extend_from_slice(&v.to_le_bytes());
        }
        self.finish_entry(start);
    }

    /// Append bytes as a string entry, without trying the integer encodings.
    fn push_str(&mut self, s: &[u8]) {
        let start = self.buf.len();
        let len = s.len();
        if len < 64 {
            self.buf.push(0x80 | len as u8);
        } else if len < 4096 {
            self.buf.push(0xe0 | (len >> 8) as u8);
            self.buf.push(len as u8);
        } else {
            self.buf.push(0xf0);
            self.buf.extend_from_slice(&(len as u32).to_le_bytes());
        }
        self.buf.extend_from_slice(s);
        self.finish_entry(start);
    }

    /// Write the back-length of the entry that started at `start`.
    fn finish_entry(&mut self, start: usize) {
        let l = (self.buf.len() - start) as u64;
        // Redis's `lpEncodeBacklen` thresholds, including its off-by-one ones.
        if l <= 127 {
            self.buf.push(l as u8);
        } else if l < 16383 {
            self.buf
                .extend_from_slice(&[(l >> 7) as u8, (l & 127) as u8 | 128]);
        } else if l < 2_097_151 {
            self.buf.extend_from_slice(&[
                (l >> 14) as u8,
                ((l >> 7) & 127) as u8 | 128,
                (l & 127) as u8 | 128,
            ]);
        } else if l < 268_435_455 {
            self.buf.extend_from_slice(&[
                (l >> 21) as u8,
                ((l >> 14) & 127) as u8 | 128,
                ((l >> 7) & 127) as u8 | 128,
                (l & 127) as u8 | 128,
            ]);
        } else {
            self.buf.extend_from_slice(&[
                (l >> 28) as u8,
                ((l >> 21) & 127) as u8 | 128,
                ((l >> 14) & 127) as u8 | 128,
                ((l >> 7) & 127) as u8 | 128,
                (l & 127) as u8 | 128,
            ]);
        }
        self.count += 1;
    }

    /// The finished listpack.
    pub fn finish(mut self) -> Vec<u8> {
        self.buf.push(EOF);
        let total = self.buf.len() as u32;
        self.buf[..4].copy_from_slice(&total.to_le_bytes());
        let count = u16::try_from(self.count)
            .ok()
            .filter(|&c| c < COUNT_UNKNOWN)
            .unwrap_or(COUNT_UNKNOWN);
        self.buf[4..6].copy_from_slice(&count.to_le_bytes());
        self.buf
    }
}

/// The bytes a back-length of `l` takes (`lpEncodeBacklen(NULL, l)`).
fn backlen_size(l: usize) -> usize {
    match l {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2_097_150 => 3,
        2_097_151..=268_435_454 => 4,
        _ => 5,
    }
}

/// Decode a back-length ending at `buf[end]` (inclusive), walking backwards.
fn decode_backlen(buf: &[u8], end: usize) -> Option<usize> {
    let mut val = 0usize;
    let mut shift = 0;
    let mut p = end;
    loop {
        let b = *buf.get(p)?;
        val |= usize::from(b & 127) << shift;
        if b & 128 == 0 {
            return Some(val);
        }
        shift += 7;
        if shift > 28 {
            return None;
        }
        p = p.checked_sub(1)?;
    }
}

/// Every element of the listpack `lp`, checked as Redis's deep validation checks it: the
/// header's size is the buffer's, each entry's encoding is known and its back-length is
/// right, the entries end at the terminator, and the count (unless unknown) is right.
pub fn parse(lp: &[u8]) -> Option<Vec<Item<'_>>> {
    if lp.len() < HEADER + 1 {
        return None;
    }
    let total = u32::from_le_bytes(lp[..4].try_into().ok()?) as usize;
    if total != lp.len() || lp[lp.len() - 1] != EOF {
        return None;
    }
    let declared = u16::from_le_bytes([lp[4], lp[5]]);
    let end = lp.len() - 1; // the terminator's position
    let mut items = Vec::with_capacity(usize::from(declared).min(end / 2));
    let mut p = HEADER;
    while p < end {
        let (item, size) = entry(&lp[p..end])?;
        let backlen = backlen_size(size);
        let next = p.checked_add(size)?.checked_add(backlen)?;
        if next > end || decode_backlen(lp, next - 1)? != size {
            return None;
        }
        items.push(item);
        p = next;
    }
    if declared != COUNT_UNKNOWN && usize::from(declared) != items.len() {
        return None;
    }
    Some(items)
}

/// The element at the start of `buf` and its encoded size (encoding plus data, without
/// the back-length).
fn entry(buf: &[u8]) -> Option<(Item<'_>, usize)> {
    let b = *buf.first()?;
    let int = |n: usize| -> Option<[u8; 8]> {
        let data = buf.get(1..1 + n)?;
        let mut raw = [0u8; 8];
        raw[..n].copy_from_slice(data);
        // Sign-extend from n bytes.
        if data[n - 1] & 0x80 != 0 {
            raw[n..].iter_mut().for_each(|x| *x = 0xff);
        }
        Some(raw)
    };
    let string = |header: usize, len: usize| -> Option<(Item<'_>, usize)> {
        let s = buf.get(header..header.checked_add(len)?)?;
        Some((Item::Str(s), header + len))
    };
    match b {
        0x00..=0x7f => Some((Item::Int(i64::from(b)), 1)),
        0x80..=0xbf => string(1, usize::from(b & 0x3f)),
        0xc0..=0xdf => {
            let u = (u16::from(b & 0x1f) << 8) | u16::from(*buf.get(1)?);
            // 13-bit two's complement.
            let v = if u >= 1 << 12 {
                i64::from(u) - (1 << 13)
            } else {
                i64::from(u)
            };
            Some((Item::Int(v), 2))
        }
        0xe0..=0xef => string(2, (usize::from(b & 0x0f) << 8) | usize::from(*buf.get(1)?)),
        0xf0 => {
            let len = u32::from_le_bytes(buf.get(1..5)?.try_into().ok()?) as usize;
            string(5, len)
        }
        0xf1 => Some((Item::Int(i64::from_le_bytes(int(2)?)), 3)),
        0xf2 => Some((Item::Int(i64::from_le_bytes(int(3)?)), 4)),
        0xf3 => Some((Item::Int(i64::from_le_bytes(int(4)?)), 5)),
        0xf4 => Some((Item::Int(i64::from_le_bytes(int(8)?)), 9)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_take_the_smallest_encoding_and_round_trip() {
        let cases: &[(i64, usize)] = &[
            (0, 1),
            (127, 1),
            (128, 2),
            (-1, 2),
            (-4096, 2),
            (4095, 2),
            (4096, 3),
            (-4097, 3),
            (32767, 3),
            (-32768, 3),
            (32768, 4),
            (-8_388_608, 4),
            (8_388_607, 4),
            (8_388_608, 5),
            (i64::from(i32::MIN), 5),
            (i64::from(i32::MAX), 5),
            (i64::from(i32::MAX) + 1, 9),
            (i64::MIN, 9),
            (i64::MAX, 9),
        ];
        for &(v, size) in cases {
            let mut w = Writer::new();
            w.push(v.to_string().as_bytes());
            let lp = w.finish();
            // header + entry + 1-byte backlen + terminator
            assert_eq!(lp.len(), HEADER + size + 1 + 1, "{v}");
            assert_eq!(parse(&lp).unwrap(), vec![Item::Int(v)], "{v}");
        }
    }

    #[test]
    fn strings_round_trip_at_each_length_class() {
        for len in [0usize, 1, 63, 64, 127, 128, 4095, 4096, 20000] {
            let s: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
            let mut w = Writer::new();
            w.push(&s);
            w.push(b"-0");
            w.push(b"01");
            let lp = w.finish();
            assert_eq!(
                parse(&lp).unwrap(),
                vec![Item::Str(&s), Item::Str(b"-0"), Item::Str(b"01")]
            );
        }
    }

    #[test]
    fn matches_redis_bytes() {
        // HSET h f v a 1 on redis-server 7.0.15, DUMP: type 16, length 18, this listpack.
        let mut w = Writer::new();
        for e in [&b"f"[..], b"v", b"a", b"1"] {
            w.push(e);
        }
        assert_eq!(
            w.finish(),
            b"\x12\x00\x00\x00\x04\x00\x81f\x02\x81v\x02\x81a\x02\x01\x01\xff"
        );
    }

    #[test]
    fn matches_redis_list_node() {
        // RPUSH l a 1 -1: one node holding a (string), 1 (7-bit) and -1 (13-bit).
        let mut w = Writer::new();
        for e in [&b"a"[..], b"1", b"-1"] {
            w.push(e);
        }
        assert_eq!(
            w.finish(),
            b"\x0f\x00\x00\x00\x03\x00\x81a\x02\x01\x01\xdf\xff\x02\xff"
        );
    }

    #[test]
    fn corrupt_listpacks_are_rejected() {
        let mut w = Writer::new();
        w.push(b"hello");
        w.push(b"12345");
        let lp = w.finish();
        assert!(parse(&lp).is_some());
        for i in 0..lp.len() {
            for bit in 0..8 {
                let mut bad = lp.clone();
                bad[i] ^= 1 << bit;
                // Never a panic; flipping a string byte still parses, the rest must not
                // change the element count silently.
                if let Some(items) = parse(&bad) {
                    assert_eq!(items.len(), 2);
                }
            }
        }
        assert!(parse(&lp[..lp.len() - 1]).is_none());
        let mut wrong_count = lp.clone();
        wrong_count[4] = 3;
        assert!(parse(&wrong_count).is_none());
    }
}
