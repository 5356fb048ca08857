//! The encodings older Redis versions wrote and Redis 7.0 still loads: ziplists (hashes,
//! sorted sets and lists before 7.0, and list nodes before quicklist 2) and zipmaps (hashes
//! before 2.6). Only read here, checked as Redis's deep validation checks them.

use super::listpack::Item;

/// Every element of a ziplist, checked as `ziplistValidateIntegrity(deep)`: header size and
/// terminator, each entry's `prevlen` equal to the previous entry's size, each encoding
/// known and inside the buffer, the tail offset at the last entry, and the count (unless
/// 65535) right.
///
/// Layout: total bytes (u32 LE), tail offset (u32 LE), count (u16 LE), entries, 0xFF.
pub fn parse(zl: &[u8]) -> Option<Vec<Item<'_>>> {
    const HEADER: usize = 10;
    if zl.len() < HEADER + 1 {
        return None;
    }
    let total = u32::from_le_bytes(zl[..4].try_into().ok()?) as usize;
    let tail = u32::from_le_bytes(zl[4..8].try_into().ok()?) as usize;
    let declared = u16::from_le_bytes([zl[8], zl[9]]);
    let end = zl.len() - 1;
    if total != zl.len() || zl[end] != 0xff || tail > end {
        return None;
    }
    let mut items = Vec::with_capacity(usize::from(declared).min(end / 2));
    let mut p = HEADER;
    let mut prev_size = 0usize;
    let mut last = None;
    while zl[p] != 0xff {
        let (prevlen, prevlen_size) = match zl[p] {
            0xfe => (
                u32::from_le_bytes(zl.get(p + 1..p + 5)?.try_into().ok()?) as usize,
                5,
            ),
            b => (usize::from(b), 1),
        };
        if prevlen != prev_size {
            return None;
        }
        let (item, size) = entry(zl.get(p + prevlen_size..end)?)?;
        let entry_size = prevlen_size + size;
        last = Some(p);
        items.push(item);
        prev_size = entry_size;
        p += entry_size;
        if p > end {
            return None;
        }
    }
    if p != end || last.is_some_and(|l| l != tail) {
        return None;
    }
    if declared != u16::MAX && usize::from(declared) != items.len() {
        return None;
    }
    Some(items)
}

/// The element at the start of `buf` (after its prevlen) and its encoded size.
fn entry(buf: &[u8]) -> Option<(Item<'_>, usize)> {
    let b = *buf.first()?;
    let string = |header: usize, len: usize| -> Option<(Item<'_>, usize)> {
        let s = buf.get(header..header.checked_add(len)?)?;
        Some((Item::Str(s), header + len))
    };
    let int = |n: usize| -> Option<i64> {
        let data = buf.get(1..1 + n)?;
        let mut raw = [0u8; 8];
        raw[..n].copy_from_slice(data);
        if data[n - 1] & 0x80 != 0 {
            raw[n..].iter_mut().for_each(|x| *x = 0xff);
        }
        Some(i64::from_le_bytes(raw))
    };
    match b >> 6 {
        0 => string(1, usize::from(b & 0x3f)),
        1 => string(2, (usize::from(b & 0x3f) << 8) | usize::from(*buf.get(1)?)),
        2 if b == 0x80 => string(
            5,
            u32::from_be_bytes(buf.get(1..5)?.try_into().ok()?) as usize,
        ),
        2 => None,
        _ => match b {
            0xc0 => Some((Item::Int(int(2)?), 3)),
            0xd0 => Some((Item::Int(int(4)?), 5)),
            0xe0 => Some((Item::Int(int(8)?), 9)),
            0xf0 => Some((Item::Int(int(3)?), 4)),
            0xfe => Some((Item::Int(int(1)?), 2)),
            0xf1..=0xfd => Some((Item::Int(i64::from(b & 0x0f) - 1), 1)),
            _ => None,
        },
    }
}

/// The field/value pairs of a zipmap, checked as `zipmapValidateIntegrity(deep)`.
///
/// Layout: count (1 byte, 254 = unknown), then per pair: field length, field, value length,
/// a free-space byte, value, free space; then 0xFF. A length is one byte below 254, else
/// 254 and a u32 (LE).
pub fn parse_zipmap(zm: &[u8]) -> Option<Vec<(&[u8], &[u8])>> {
    if zm.len() < 2 || zm[zm.len() - 1] != 0xff {
        return None;
    }
    let end = zm.len() - 1;
    let mut p = 1usize;
    let mut pairs = Vec::new();
    let len_at = |p: usize| -> Option<(usize, usize)> {
        match *zm.get(p)? {
            0xff => None,
            0xfe => Some((
                u32::from_le_bytes(zm.get(p + 1..p + 5)?.try_into().ok()?) as usize,
                5,
            )),
            b => Some((usize::from(b), 1)),
        }
    };
    while zm[p] != 0xff {
        let (flen, s) = len_at(p)?;
        p += s;
        let field = zm.get(p..p.checked_add(flen)?)?;
        p += flen;
        let (vlen, s) = len_at(p)?;
        p += s;
        let free = usize::from(*zm.get(p)?);
        p += 1;
        let value = zm.get(p..p.checked_add(vlen)?)?;
        p = p.checked_add(vlen + free)?;
        if p > end {
            return None;
        }
        pairs.push((field, value));
    }
    if pairs.is_empty() || (zm[0] != 254 && usize::from(zm[0]) != pairs.len()) {
        return None;
    }
    Some(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ziplist of `entries` (each: raw encoding bytes and data), built as Redis lays it out.
    fn ziplist(entries: &[&[u8]]) -> Vec<u8> {
        let mut body = Vec::new();
        let mut prev = 0usize;
        let mut tail = 10;
        for e in entries {
            tail = 10 + body.len();
            if prev < 254 {
                body.push(prev as u8);
            } else {
                body.push(0xfe);
                body.extend_from_slice(&(prev as u32).to_le_bytes());
            }
            let before = body.len();
            body.extend_from_slice(e);
            prev = body.len() - before + if prev < 254 { 1 } else { 5 };
        }
        let mut zl = Vec::new();
        zl.extend_from_slice(&((10 + body.len() + 1) as u32).to_le_bytes());
        zl.extend_from_slice(&(tail as u32).to_le_bytes());
        zl.extend_from_slice(&(entries.len() as u16).to_le_bytes());
        zl.extend_from_slice(&body);
        zl.push(0xff);
        zl
    }

    #[test]
    fn reads_every_entry_encoding() {
        let zl = ziplist(&[
            b"\x03abc",
            b"\xc0\x00\x80",                         // int16 -32768
            b"\xd0\x00\x00\x00\x80",                 // int32 min
            b"\xe0\xff\xff\xff\xff\xff\xff\xff\x7f", // int64 max
            b"\xf0\xff\xff\x7f",                     // int24 max
            b"\xfe\x80",                             // int8 -128
            b"\xf1",                                 // 0
            b"\xfd",                                 // 12
        ]);
        assert_eq!(
            parse(&zl).unwrap(),
            vec![
                Item::Str(b"abc"),
                Item::Int(-32768),
                Item::Int(i64::from(i32::MIN)),
                Item::Int(i64::MAX),
                Item::Int(8_388_607),
                Item::Int(-128),
                Item::Int(0),
                Item::Int(12),
            ]
        );
        let long = [&[0x41u8, 0x2c][..], &[b'x'; 300]].concat();
        let zl = ziplist(&[&long, b"\x01y"]);
        let items = parse(&zl).unwrap();
        assert_eq!(items[1], Item::Str(b"y"));
    }

    #[test]
    fn rejects_bad_prevlen_tail_and_count() {
        let zl = ziplist(&[b"\x01a", b"\x01b"]);
        assert!(parse(&zl).is_some());
        let mut bad = zl.clone();
        bad[13] = 9; // second entry's prevlen
        assert!(parse(&bad).is_none());
        let mut bad = zl.clone();
        bad[4] = 10; // tail at the first entry
        assert!(parse(&bad).is_none());
        let mut bad = zl.clone();
        bad[8] = 3;
        assert!(parse(&bad).is_none());
        assert!(parse(&zl[..zl.len() - 1]).is_none());
    }

    #[test]
    fn reads_zipmaps() {
        let zm = b"\x02\x01a\x01\x00b\x03foo\x03\x02barxx\xff";
        assert_eq!(
            parse_zipmap(zm).unwrap(),
            vec![(&b"a"[..], &b"b"[..]), (&b"foo"[..], &b"bar"[..])]
        );
        assert!(parse_zipmap(b"\x03\x01a\x01\x00b\xff").is_none()); // wrong count
        assert!(parse_zipmap(b"\x00\xff").is_none()); // empty
        assert!(parse_zipmap(b"\x01\x01a\x05\x00b\xff").is_none()); // value past the end
    }
}
