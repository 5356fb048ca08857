//! Redis's HyperLogLog string format and estimator, byte for byte: the 16-byte header
//! (`HYLL`, encoding, cached cardinality with its validity bit), the sparse encoding
//! (ZERO, XZERO and VAL opcodes, grown in place and promoted to dense exactly when Redis
//! promotes: a register above 32 or a sparse string longer than `hll-sparse-max-bytes`),
//! the dense encoding (16384 six-bit registers, little-endian bit order), MurmurHash64A
//! with Redis's seed 0xadc83b19, and the 7.0 estimator (`hllCount`: register histogram,
//! `hllTau`/`hllSigma`). A string written here is the string Redis writes for the same
//! calls, so values move between the two servers (GET/SET, DUMP/RESTORE) unchanged.
//!
//! Written from Redis 7.0's `hyperloglog.c` description; the commands are in
//! `hyperloglog.rs`. A sparse VAL opcode that runs past the last register is corrupted
//! wherever it is met (merging, converting to dense): that is what the reference
//! redis-server 7.0.15 (Debian's, with the CVE-2025-32023 fix) answers, where the
//! unpatched source stopped reading and accepted the string when the count came out
//! right.

/// Registers (2^14).
pub const REGISTERS: usize = 1 << P;
const P: u32 = 14;
const Q: u32 = 64 - P;
const REGISTER_MAX: u8 = 63;
/// Header size.
pub const HEADER: usize = 16;
/// Size of a dense HyperLogLog.
pub const DENSE_SIZE: usize = HEADER + (REGISTERS * 6).div_ceil(8);
/// Encoding byte values.
pub const DENSE: u8 = 0;
/// Sparse encoding.
pub const SPARSE: u8 = 1;

const VAL_MAX_VALUE: u8 = 32;
const VAL_MAX_LEN: usize = 4;
const ZERO_MAX_LEN: usize = 64;
const XZERO_MAX_LEN: usize = 16384;

/// A corrupted HyperLogLog (Redis answers `INVALIDOBJ Corrupted HLL object detected`).
#[derive(Debug, PartialEq)]
pub struct Corrupted;

/// A new, empty HyperLogLog: sparse, one XZERO opcode covering every register.
pub fn new_sparse() -> Vec<u8> {
    let mut s = vec![0u8; HEADER];
    s[..4].copy_from_slice(b"HYLL");
    s[4] = SPARSE;
    let mut left = REGISTERS;
    while left > 0 {
        let run = left.min(XZERO_MAX_LEN);
        s.extend_from_slice(&xzero(run));
        left -= run;
    }
    s
}

/// Whether `s` is a HyperLogLog Redis would accept (`isHLLObjectOrReply`).
pub fn is_valid(s: &[u8]) -> bool {
    s.len() >= HEADER
        && &s[..4] == b"HYLL"
        && s[4] <= SPARSE
        && (s[4] != DENSE || s.len() == DENSE_SIZE)
}

/// Mark the cached cardinality invalid.
pub fn invalidate_cache(s: &mut [u8]) {
    s[15] |= 0x80;
}

/// The cached cardinality, if valid.
pub fn cached(s: &[u8]) -> Option<u64> {
    (s[15] & 0x80 == 0).then(|| u64::from_le_bytes(s[8..16].try_into().expect("8 bytes")))
}

/// Store the cached cardinality.
pub fn set_cache(s: &mut [u8], card: u64) {
    s[8..16].copy_from_slice(&card.to_le_bytes());
}

/// MurmurHash64A as Redis has it (little-endian reads on every platform).
pub fn murmur64a(key: &[u8], seed: u32) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = u64::from(seed) ^ (key.len() as u64).wrapping_mul(M);
    let mut chunks = key.chunks_exact(8);
    for c in chunks.by_ref() {
        let mut k = u64::from_le_bytes(c.try_into().expect("8 bytes"));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate() {
            h ^= u64::from(b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// The register an element goes to and the length of its `0...01` pattern
/// (`hllPatLen`).
pub fn pattern(ele: &[u8]) -> (usize, u8) {
    let hash = murmur64a(ele, 0xadc8_3b19);
    let index = (hash & (REGISTERS as u64 - 1)) as usize;
    let rest = (hash >> P) | (1 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

/// Register `i` of dense registers (the byte after the last may be absent: zero).
pub fn dense_get(regs: &[u8], i: usize) -> u8 {
    let byte = i * 6 / 8;
    let fb = (i * 6) & 7;
    let b0 = u32::from(regs[byte]);
    let b1 = u32::from(regs.get(byte + 1).copied().unwrap_or(0));
    (((b0 >> fb) | (b1 << (8 - fb))) & u32::from(REGISTER_MAX)) as u8
}

/// Set register `i` of dense registers to `v`.
pub fn dense_put(regs: &mut [u8], i: usize, v: u8) {
    let byte = i * 6 / 8;
    let fb = (i * 6) & 7;
    let v = u32::from(v);
    let max = u32::from(REGISTER_MAX);
    regs[byte] &= !((max << fb) as u8);
    regs[byte] |= (v << fb) as u8;
    if let Some(next) = regs.get_mut(byte + 1) {
        *next &= !((max >> (8 - fb)) as u8);
        *next |= (v >> (8 - fb)) as u8;
    }
}

/// Raise register `i` to `count`; whether it changed (`hllDenseSet`).
pub fn dense_set(regs: &mut [u8], i: usize, count: u8) -> bool {
    if count > dense_get(regs, i) {
        dense_put(regs, i, count);
        true
    } else {
        false
    }
}

fn xzero(len: usize) -> [u8; 2] {
    let l = len - 1;
    [(l >> 8) as u8 | 0x40, (l & 0xff) as u8]
}

fn val(v: u8, len: usize) -> u8 {
    ((v - 1) << 2) | (len as u8 - 1) | 0x80
}

/// One sparse opcode: a run of `len` registers at value `value` (0 for ZERO/XZERO), and
/// the opcode's size in bytes.
#[derive(Clone, Copy)]
struct Op {
    value: u8,
    len: usize,
    size: usize,
}

fn op_at(s: &[u8], at: usize) -> Op {
    let b = s[at];
    if b & 0xc0 == 0 {
        Op {
            value: 0,
            len: usize::from(b & 0x3f) + 1,
            size: 1,
        }
    } else if b & 0xc0 == 0x40 {
        let low = s.get(at + 1).copied().unwrap_or(0);
        Op {
            value: 0,
            len: ((usize::from(b & 0x3f) << 8) | usize::from(low)) + 1,
            size: 2,
        }
    } else {
        Op {
            value: ((b >> 2) & 0x1f) + 1,
            len: usize::from(b & 3) + 1,
            size: 1,
        }
    }
}

/// The opcodes of a sparse body.
fn ops(body: &[u8]) -> impl Iterator<Item = Op> + '_ {
    let mut at = 0;
    std::iter::from_fn(move || {
        (at < body.len()).then(|| {
            let op = op_at(body, at);
            at += op.size;
            op
        })
    })
}

/// Convert a sparse HyperLogLog to dense (`hllSparseToDense`); a dense one is left alone.
pub fn to_dense(s: &mut Vec<u8>) -> Result<(), Corrupted> {
    if s[4] == DENSE {
        return Ok(());
    }
    let mut dense = vec![0u8; DENSE_SIZE];
    dense[..HEADER].copy_from_slice(&s[..HEADER]);
    dense[4] = DENSE;
    let mut idx = 0;
    for op in ops(&s[HEADER..]) {
        if op.value > 0 {
            if idx + op.len > REGISTERS {
                return Err(Corrupted);
            }
            for i in idx..idx + op.len {
                dense_put(&mut dense[HEADER..], i, op.value);
            }
        }
        idx += op.len;
    }
    if idx != REGISTERS {
        return Err(Corrupted);
    }
    *s = dense;
    Ok(())
}

/// Raise register `index` of a sparse HyperLogLog to `count` (`hllSparseSet`), promoting
/// it to dense when the value does not fit a VAL opcode or the string would grow past
/// `max_bytes`. Whether a register changed.
pub fn sparse_set(
    s: &mut Vec<u8>,
    index: usize,
    count: u8,
    max_bytes: usize,
) -> Result<bool, Corrupted> {
    if count > VAL_MAX_VALUE {
        return promote(s, index, count);
    }
    // Find the opcode covering `index`: most of a sparse PFADD's work, so only each
    // opcode's run is decoded here (callgrind, redis-benchmark's PFADD of random
    // elements: 15,700 instructions a call in the sparse phase, 20,300 when the loop
    // built the whole `Op`; Redis's hllSparseSet 14,400).
    let (mut at, mut first, mut prev) = (HEADER, 0usize, HEADER);
    while let Some(&b) = s.get(at) {
        let (run, size) = match b >> 6 {
            // ZERO: b is 00xxxxxx.
            0 => (usize::from(b) + 1, 1),
            1 => {
                let low = s.get(at + 1).copied().unwrap_or(0);
                (((usize::from(b & 0x3f) << 8) | usize::from(low)) + 1, 2)
            }
            _ => (usize::from(b & 3) + 1, 1),
        };
        if index < first + run {
            break;
        }
        prev = at;
        at += size;
        first += run;
    }
    if at >= s.len() {
        return Err(Corrupted);
    }
    let op = op_at(s, at);
    if op.value > 0 {
        if op.value >= count {
            return Ok(false);
        }
        if op.len == 1 {
            s[at] = val(count, 1);
            merge_adjacent(s, prev);
            return Ok(true);
        }
    } else if op.size == 1 && op.len == 1 {
        s[at] = val(count, 1);
        merge_adjacent(s, prev);
        return Ok(true);
    }
    // Split the opcode into up to three: before, the new value, after.
    let last = first + op.len - 1;
    let mut seq: Vec<u8> = Vec::with_capacity(5);
    let run = |seq: &mut Vec<u8>, len: usize| {
        if op.value > 0 {
            seq.push(val(op.value, len));
        } else if len > ZERO_MAX_LEN {
            seq.extend_from_slice(&xzero(len));
        } else {
            seq.push((len - 1) as u8);
        }
    };
    if index != first {
        run(&mut seq, index - first);
    }
    seq.push(val(count, 1));
    if index != last {
        run(&mut seq, last - index);
    }
    if seq.len() > op.size && s.len() + seq.len() - op.size > max_bytes {
        return promote(s, index, count);
    }
    // The new length is Redis's (old length + the size difference) even when a corrupted
    // string ends inside the opcode (an XZERO's missing second byte).
    let new_len = s.len() + seq.len() - op.size;
    let tail = s
        .get(at + op.size..)
        .map(<[u8]>::to_vec)
        .unwrap_or_default();
    s.truncate(at);
    s.extend_from_slice(&seq);
    s.extend_from_slice(&tail);
    s.truncate(new_len);
    merge_adjacent(s, prev);
    Ok(true)
}

fn promote(s: &mut Vec<u8>, index: usize, count: u8) -> Result<bool, Corrupted> {
    to_dense(s)?;
    Ok(dense_set(&mut s[HEADER..], index, count))
}

/// Join neighbouring VAL opcodes of the same value, scanning up to five opcodes from
/// `from`, and invalidate the cached cardinality (the tail of `hllSparseSet`).
fn merge_adjacent(s: &mut Vec<u8>, from: usize) {
    let mut p = from;
    let mut scan = 5;
    while p < s.len() && scan > 0 {
        scan -= 1;
        let op = op_at(s, p);
        if op.value == 0 {
            p += op.size;
            continue;
        }
        if p + 1 < s.len() && s[p + 1] & 0x80 != 0 {
            let next = op_at(s, p + 1);
            if next.value == op.value && op.len + next.len <= VAL_MAX_LEN {
                s[p + 1] = val(op.value, op.len + next.len);
                s.remove(p);
                continue;
            }
        }
        p += 1;
    }
    invalidate_cache(s);
}

/// Add an element (`hllAdd`): whether a register changed.
pub fn add(s: &mut Vec<u8>, ele: &[u8], max_bytes: usize) -> Result<bool, Corrupted> {
    let (index, count) = pattern(ele);
    match s[4] {
        DENSE => Ok(dense_set(&mut s[HEADER..], index, count)),
        SPARSE => sparse_set(s, index, count, max_bytes),
        _ => Err(Corrupted),
    }
}

/// Fold a HyperLogLog into `max` (one byte per register): `max[i] = max(max[i], reg[i])`
/// (`hllMerge`).
pub fn merge_into(max: &mut [u8], s: &[u8]) -> Result<(), Corrupted> {
    if s[4] == DENSE {
        for (i, m) in max.iter_mut().enumerate() {
            *m = (*m).max(dense_get(&s[HEADER..], i));
        }
        return Ok(());
    }
    let mut i = 0;
    for op in ops(&s[HEADER..]) {
        if op.value > 0 {
            if i + op.len > REGISTERS {
                return Err(Corrupted);
            }
            for m in &mut max[i..i + op.len] {
                *m = (*m).max(op.value);
            }
        }
        i += op.len;
    }
    if i != REGISTERS {
        return Err(Corrupted);
    }
    Ok(())
}

/// The estimated cardinality of a HyperLogLog (`hllCount`); a sparse one whose opcodes
/// do not cover exactly every register is corrupted.
pub fn count(s: &[u8]) -> Result<u64, Corrupted> {
    let mut histo = [0u32; 64];
    if s[4] == DENSE {
        for i in 0..REGISTERS {
            histo[usize::from(dense_get(&s[HEADER..], i))] += 1;
        }
    } else {
        let mut idx = 0;
        for op in ops(&s[HEADER..]) {
            idx += op.len;
            histo[usize::from(op.value)] += op.len as u32;
        }
        if idx != REGISTERS {
            return Err(Corrupted);
        }
    }
    Ok(estimate(&histo))
}

/// The cardinality of raw registers (one byte each), as PFCOUNT of several keys counts.
pub fn count_raw(regs: &[u8]) -> u64 {
    let mut histo = [0u32; 64];
    for &r in regs {
        histo[usize::from(r)] += 1;
    }
    estimate(&histo)
}

/// Ertl's estimator over the register histogram, in Redis's order of operations.
fn estimate(histo: &[u32; 64]) -> u64 {
    let m = REGISTERS as f64;
    let mut z = m * tau((m - f64::from(histo[Q as usize + 1])) / m);
    for j in (1..=Q as usize).rev() {
        z += f64::from(histo[j]);
        z *= 0.5;
    }
    z += m * sigma(f64::from(histo[0]) / m);
    const ALPHA_INF: f64 = 0.721_347_520_444_481_7;
    (ALPHA_INF * m * m / z).round() as u64
}

fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    loop {
        x *= x;
        let prev = z;
        z += x * y;
        y += y;
        if prev == z {
            return z;
        }
    }
}

fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let prev = z;
        y *= 0.5;
        z -= (1.0 - x) * (1.0 - x) * y;
        if prev == z {
            return z / 3.0;
        }
    }
}

/// PFDEBUG DECODE's text of a sparse body.
pub fn decode(s: &[u8]) -> String {
    let parts: Vec<String> = ops(&s[HEADER..])
        .map(|op| match (op.value, op.size) {
            (0, 1) => format!("z:{}", op.len),
            (0, _) => format!("Z:{}", op.len),
            (v, _) => format!("v:{v},{}", op.len),
        })
        .collect();
    parts.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_hll_is_redis_s_eighteen_bytes() {
        let s = new_sparse();
        assert_eq!(s.len(), 18);
        assert_eq!(&s[16..], &[0x7f, 0xff]);
        assert_eq!(count(&s), Ok(0));
    }

    #[test]
    fn dense_registers_round_trip() {
        let mut regs = vec![0u8; DENSE_SIZE - HEADER];
        for i in 0..REGISTERS {
            dense_put(&mut regs, i, (i % 64) as u8);
        }
        for i in 0..REGISTERS {
            assert_eq!(dense_get(&regs, i), (i % 64) as u8);
        }
    }

    #[test]
    fn sparse_and_dense_agree() {
        let mut sparse = new_sparse();
        let mut dense = new_sparse();
        to_dense(&mut dense).unwrap();
        for i in 0..2000u32 {
            add(&mut sparse, &i.to_le_bytes(), 1 << 20).unwrap();
            add(&mut dense, &i.to_le_bytes(), 1 << 20).unwrap();
        }
        assert_eq!(sparse[4], SPARSE);
        assert_eq!(count(&sparse), count(&dense));
        let mut promoted = sparse.clone();
        to_dense(&mut promoted).unwrap();
        assert_eq!(&promoted[HEADER..], &dense[HEADER..]);
    }
}
