//! LZF, the compression Redis applies to RDB strings: a compressor that makes the same
//! choices as the liblzf 3.6 Redis ships (`HLOG` 16, `VERY_FAST`, not `ULTRA_FAST`), so a
//! string Tollgate DUMPs compresses to the bytes Redis writes, and a decompressor that
//! checks every back-reference and the output length.
//!
//! Why not the `lzf` crate: its compressor makes different choices from liblzf's (it
//! bounds every match by the remaining length, where liblzf's unrolled compare can run two
//! bytes further, and it hashes past a match's end differently): on 20,000 random
//! compressible strings of 21 to 320 bytes its output differed from this one's 7,746 times,
//! while this one matched redis-server 7.0.15's DUMP on all 6,000 strings of a comparison
//! run (and in `tests/dump_restore.rs`). Redis's rule for when compression is worth it (the
//! output must fit in `len - 4` bytes) also needs the output bound as a parameter.
//!
//! liblzf leaves its hash table uninitialized (`INIT_HTAB 0`); this one starts it empty.
//! A stale slot in Redis can only point at an earlier position whose three bytes match, so
//! both outputs decompress to the same string, and they are equal unless such a stale
//! slot happens to hold a usable position (we have not seen one in the tests).

/// Append one literal byte to the open run, closing the run (its length byte, then room for
/// the next one's) once it holds `MAX_LIT` bytes, as liblzf's two literal loops do.
fn push_literal(out: &mut [u8], op: &mut usize, lit: &mut usize, byte: u8) {
    *lit += 1;
    out[*op] = byte;
    *op += 1;
    if *lit == MAX_LIT {
        out[*op - *lit - 1] = (*lit - 1) as u8;
        *lit = 0;
        *op += 1;
    }
}

/// log2 of the hash table size.
const HLOG: u32 = 16;
/// Longest back-reference distance (bytes).
const MAX_OFF: usize = 1 << 13;
/// Longest back-reference length (bytes).
const MAX_REF: usize = (1 << 8) + (1 << 3);
/// Longest literal run (bytes).
const MAX_LIT: usize = 1 << 5;

/// The hash of the three bytes starting at `i` as liblzf's `VERY_FAST` mode computes it,
/// from the running value `v` (`FRST`/`NEXT`).
#[inline(always)]
fn slot(v: u32) -> usize {
    (((v >> (3 * 8 - HLOG)).wrapping_sub(v.wrapping_mul(5))) & ((1 << HLOG) - 1)) as usize
}

/// Compress `input` into at most `out_max` bytes, as liblzf's `lzf_compress` does; None
/// when the output would not fit (or `input` or `out_max` is empty).
pub fn compress(input: &[u8], out_max: usize) -> Option<Vec<u8>> {
    let in_len = input.len();
    if in_len == 0 || out_max == 0 {
        return None;
    }
    // Positions are stored plus one, so 0 means an empty slot (liblzf's `ref > in_data`
    // test likewise never matches position 0).
    let mut table = vec![0u32; 1 << HLOG];
    let mut out = vec![0u8; out_max];
    let mut op = 1usize; // start a literal run
    let mut lit = 0usize;
    let mut ip = 0usize;
    let first = |i: usize| (u32::from(input[i]) << 8) | u32::from(input[i + 1]);
    let next = |v: u32, i: usize| (v << 8) | u32::from(input[i + 2]);

    if in_len >= 2 {
        let mut hval = first(0);
        while ip + 2 < in_len {
            hval = next(hval, ip);
            let h = slot(hval);
            let reference = table[h] as usize;
            table[h] = (ip + 1) as u32;
            let matched = reference > 1 && {
                let r = reference - 1;
                let off = ip - r - 1;
                off < MAX_OFF && input[r..r + 3] == input[ip..ip + 3]
            };
            if matched {
                let r = reference - 1;
                let off = ip - r - 1;
                let maxlen = (in_len - ip - 2).min(MAX_REF);
                // The exact room test (liblzf's "second, exact but rare" one).
                if op - usize::from(lit == 0) + 3 + 1 >= out_max {
                    return None;
                }
                out[op - lit - 1] = (lit as u8).wrapping_sub(1); // stop the run
                op -= usize::from(lit == 0); // undo an empty run
                                             // liblzf first compares 16 bytes unrolled without looking at `maxlen` (when
                                             // it is over 16), so a match can run up to two bytes past it (never past the
                                             // input): the lengths it picks differ from a plain loop's there.
                let mut len = 2usize;
                let mut mismatch = false;
                if maxlen > 16 {
                    for _ in 0..16 {
                        len += 1;
                        if input[r + len] != input[ip + len] {
                            mismatch = true;
                            break;
                        }
                    }
                }
                if !mismatch {
                    loop {
                        len += 1;
                        if len >= maxlen || input[r + len] != input[ip + len] {
                            break;
                        }
                    }
                }
                len -= 2; // octets - 1
                ip += 1;
                if len < 7 {
                    out[op] = ((off >> 8) + (len << 5)) as u8;
                    op += 1;
                } else {
                    out[op] = ((off >> 8) + (7 << 5)) as u8;
                    out[op + 1] = (len - 7) as u8;
                    op += 2;
                }
                out[op] = off as u8;
                op += 2; // the byte above, then start a run
                lit = 0;
                ip += len + 1;
                if ip + 2 >= in_len {
                    break;
                }
                ip -= 2;
                hval = first(ip);
                hval = next(hval, ip);
                table[slot(hval)] = (ip + 1) as u32;
                ip += 1;
                hval = next(hval, ip);
                table[slot(hval)] = (ip + 1) as u32;
                ip += 1;
            } else {
                if op >= out_max {
                    return None;
                }
                push_literal(&mut out, &mut op, &mut lit, input[ip]);
                ip += 1;
            }
        }
    }
    if op + 3 > out_max {
        return None;
    }
    while ip < in_len {
        push_literal(&mut out, &mut op, &mut lit, input[ip]);
        ip += 1;
    }
    out[op - lit - 1] = (lit as u8).wrapping_sub(1);
    op -= usize::from(lit == 0);
    out.truncate(op);
    Some(out)
}

/// Decompress `input` to exactly `len` bytes; None when it is malformed or does not
/// produce exactly `len` bytes.
pub fn decompress(input: &[u8], len: usize) -> Option<Vec<u8>> {
    // A back-reference of 3 input bytes yields at most 264 output bytes: a claimed length
    // beyond that ratio is corrupt, and must not be allocated.
    if len > input.len().saturating_mul(MAX_REF.div_ceil(3) + 1) {
        return None;
    }
    let mut out: Vec<u8> = Vec::with_capacity(len);
    let mut i = 0usize;
    while i < input.len() {
        let ctrl = usize::from(input[i]);
        i += 1;
        if ctrl < 32 {
            let run = ctrl + 1;
            let literal = input.get(i..i + run)?;
            if out.len() + run > len {
                return None;
            }
            out.extend_from_slice(literal);
            i += run;
        } else {
            let mut run = ctrl >> 5;
            if run == 7 {
                run += usize::from(*input.get(i)?);
                i += 1;
            }
            run += 2;
            let back = ((ctrl & 0x1f) << 8) + usize::from(*input.get(i)?) + 1;
            i += 1;
            let start = out.len().checked_sub(back)?;
            if out.len() + run > len {
                return None;
            }
            // Overlapping copies repeat the bytes just written (a run of one byte).
            for k in start..start + run {
                let b = out[k];
                out.push(b);
            }
        }
    }
    (out.len() == len).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(data: &[u8]) {
        if let Some(c) = compress(data, data.len().saturating_sub(4)) {
            assert_eq!(decompress(&c, data.len()).as_deref(), Some(data));
        }
    }

    #[test]
    fn compresses_repetitive_data_and_round_trips() {
        let data = vec![b'a'; 1000];
        let c = compress(&data, 996).unwrap();
        assert!(c.len() < 30, "{}", c.len());
        assert_eq!(decompress(&c, 1000).unwrap(), data);
        round_trip(b"hello hello hello hello hello hello");
        let mut seed = 7u32;
        let noisy: Vec<u8> = (0..5000)
            .map(|i| {
                seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12345);
                if i % 3 == 0 {
                    (seed >> 16) as u8
                } else {
                    b'x'
                }
            })
            .collect();
        round_trip(&noisy);
        for n in 0..40 {
            round_trip(&vec![b'z'; n]);
        }
    }

    #[test]
    fn incompressible_data_does_not_fit() {
        let data: Vec<u8> = (0..=255u8).collect();
        assert_eq!(compress(&data, data.len() - 4), None);
    }

    #[test]
    fn matches_redis_output() {
        // Captured from redis-server 7.0.15 with SET then DUMP (after the 0xC3 LZF marker
        // and the two lengths).
        assert_eq!(
            compress(&[b'a'; 50], 46).unwrap(),
            [0x01, b'a', b'a', 0xe0, 0x25, 0x00, 0x01, b'a', b'a']
        );
        // 21 equal bytes: the unrolled compare runs past `maxlen` (see `compress`).
        assert_eq!(
            compress(&[b'a'; 21], 17).unwrap(),
            [0x01, b'a', b'a', 0xe0, 0x0a, 0x00]
        );
        assert_eq!(
            compress(b"hello hello hello hello hello hello", 31).unwrap(),
            b"\x06hello h\xe0\x11\x05\x01lo"
        );
    }

    #[test]
    fn rejects_malformed_input() {
        assert_eq!(decompress(&[0x05, b'a'], 6), None); // literal runs past the end
        assert_eq!(decompress(&[0x20, 0x00], 3), None); // reference before the start
        assert_eq!(decompress(&[0x00, b'a'], 2), None); // too short
        assert_eq!(decompress(&[0x00, b'a'], 1 << 40), None); // absurd length
    }
}
