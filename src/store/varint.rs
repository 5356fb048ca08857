//! Length prefixes of the packed encodings (`hash::Compact`, `list::Packed`,
//! `zset::packed::Packed`): an item's length as a little-endian base-128 varint (7 bits a
//! byte, the high bit set on every byte but the last), then its bytes. One place for every
//! layout, so that they read and write lengths alike.

/// Append `n` as a varint.
pub(crate) fn put_len(out: &mut Vec<u8>, mut n: usize) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// Write `n` as a varint at the start of `out` (which has room for it); returns how many
/// bytes it took.
pub(crate) fn write_len(out: &mut [u8], mut n: usize) -> usize {
    let mut i = 0;
    while n >= 0x80 {
        out[i] = (n as u8) | 0x80;
        n >>= 7;
        i += 1;
    }
    out[i] = n as u8;
    i + 1
}

/// How many bytes `put_len(n)` writes.
pub(crate) fn len_size(mut n: usize) -> usize {
    let mut size = 1;
    while n >= 0x80 {
        n >>= 7;
        size += 1;
    }
    size
}

/// Read a length at `*pos` and return the range of the bytes it prefixes, moving `*pos`
/// past them.
#[inline]
pub(crate) fn take(buf: &[u8], pos: &mut usize) -> std::ops::Range<usize> {
    let mut n = 0usize;
    let mut shift = 0;
    loop {
        let b = buf[*pos];
        *pos += 1;
        n |= ((b & 0x7f) as usize) << shift;
        if b < 0x80 {
            break;
        }
        shift += 7;
    }
    let start = *pos;
    *pos += n;
    start..*pos
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_round_trip() {
        for n in [
            0usize,
            1,
            127,
            128,
            300,
            16_383,
            16_384,
            1 << 20,
            u32::MAX as usize,
        ] {
            let mut buf = Vec::new();
            put_len(&mut buf, n);
            assert_eq!(buf.len(), len_size(n));
            let mut written = [0; 10];
            let size = write_len(&mut written, n);
            assert_eq!(&written[..size], &buf[..len_size(n)]);
            buf.resize(buf.len() + n.min(1 << 20), 0);
            let mut pos = 0;
            let r = take(&buf, &mut pos);
            assert_eq!(r.len(), n);
            assert_eq!(r.start, len_size(n));
        }
    }
}
