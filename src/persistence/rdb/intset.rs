//! Intsets: Redis's encoding of a small set of integers (up to `set-max-intset-entries`,
//! 512): a sorted array of integers all of one width, the narrowest of 16, 32 or 64 bits
//! that holds every member. Layout: width in bytes (u32 LE), count (u32 LE), the members
//! (LE, ascending).

/// The intset of `members` (any order; they must be distinct).
pub fn encode(members: &mut [i64]) -> Vec<u8> {
    members.sort_unstable();
    let width: usize = if members.iter().all(|&v| i16::try_from(v).is_ok()) {
        2
    } else if members.iter().all(|&v| i32::try_from(v).is_ok()) {
        4
    } else {
        8
    };
    let mut out = Vec::with_capacity(8 + width * members.len());
    out.extend_from_slice(&(width as u32).to_le_bytes());
    out.extend_from_slice(&(members.len() as u32).to_le_bytes());
    for &v in members.iter() {
        out.extend_from_slice(&v.to_le_bytes()[..width]);
    }
    out
}

/// The members of an intset, checked as Redis's deep `intsetValidateIntegrity` checks it:
/// a known width, a size that matches the count, at least one member, strictly ascending.
pub fn decode(buf: &[u8]) -> Option<Vec<i64>> {
    let width = u32::from_le_bytes(buf.get(..4)?.try_into().ok()?) as usize;
    let count = u32::from_le_bytes(buf.get(4..8)?.try_into().ok()?) as usize;
    if !matches!(width, 2 | 4 | 8) || count == 0 || count.checked_mul(width)? + 8 != buf.len() {
        return None;
    }
    let members: Vec<i64> = buf[8..]
        .chunks_exact(width)
        .map(|c| match width {
            2 => i64::from(i16::from_le_bytes([c[0], c[1]])),
            4 => i64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]])),
            _ => i64::from_le_bytes(c.try_into().unwrap_or([0; 8])),
        })
        .collect();
    members.windows(2).all(|w| w[0] < w[1]).then_some(members)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_follow_the_widest_member() {
        assert_eq!(encode(&mut [2, 1])[..4], 2u32.to_le_bytes());
        assert_eq!(
            encode(&mut [i64::from(i16::MIN), i64::from(i16::MAX)])[..4],
            2u32.to_le_bytes()
        );
        assert_eq!(encode(&mut [1, 32768])[..4], 4u32.to_le_bytes());
        assert_eq!(encode(&mut [i64::from(i32::MIN)])[..4], 4u32.to_le_bytes());
        assert_eq!(
            encode(&mut [1, i64::from(i32::MAX) + 1])[..4],
            8u32.to_le_bytes()
        );
        // SADD s 1 2 70000 on redis-server 7.0.15 (the DUMP's intset).
        assert_eq!(
            encode(&mut [70000, 2, 1]),
            b"\x04\x00\x00\x00\x03\x00\x00\x00\x01\x00\x00\x00\x02\x00\x00\x00\x70\x11\x01\x00"
        );
    }

    #[test]
    fn decodes_and_rejects() {
        let mut m = vec![i64::MIN, -5, 0, i64::MAX];
        assert_eq!(decode(&encode(&mut m)), Some(m.clone()));
        let mut unsorted = encode(&mut [1, 2]);
        unsorted.swap(8, 10);
        assert_eq!(decode(&unsorted), None);
        assert_eq!(decode(b"\x02\x00\x00\x00\x00\x00\x00\x00"), None); // empty
        assert_eq!(
            decode(b"\x03\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00"),
            None
        ); // width 3
        assert_eq!(decode(&encode(&mut [1, 2])[..11]), None); // short
    }
}
