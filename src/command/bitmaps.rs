//! Bitmap commands: SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD and BITFIELD_RO.
//!
//! A bitmap is a string value: bit 0 is the most significant bit of the first byte (Redis's
//! convention, also BITFIELD's for its integers). Writes edit the stored bytes in place
//! (`StrValue::bytes_mut`), growing the string with zero bytes as Redis's `sdsgrowzero`
//! does; reads treat the string as padded with zeros on the right. Replies, argument checks
//! and their order follow Redis 7.0's `bitops.c`, including its error texts. Offsets are
//! limited to what a string of `proto-max-bulk-len`'s default (512 MB) can address.

use bytes::Bytes;

use super::args::{int, is, syntax_error, wrongtype, CmdResult, MAX_STRING};
use super::Ctx;
use crate::protocol::Reply;
use crate::pubsub::notify::{GENERIC, REMOVAL, STRING};
use crate::store::value::StrBytes;
use crate::store::{Db, Entry, StrValue, Value};

const BAD_OFFSET: &str = "ERR bit offset is not an integer or out of range";
const BAD_BIT: &str = "ERR bit is not an integer or out of range";
const BAD_TYPE: &str =
    "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";

/// The string at `key` as bytes (an integer as its decimal text): Ok(None) if absent,
/// WRONGTYPE if another type. A read lookup (counts a keyspace hit or miss).
fn read_bytes<'a>(
    db: &'a Db,
    key: &[u8],
    now: u64,
    digits: &'a mut itoa::Buffer,
) -> CmdResult<Option<&'a [u8]>> {
    bytes_of(db.read(key, now), digits)
}

/// The bytes of a string entry ([`read_bytes`] on an entry already looked up).
fn bytes_of<'a>(
    entry: Option<&'a Entry>,
    digits: &'a mut itoa::Buffer,
) -> CmdResult<Option<&'a [u8]>> {
    match entry {
        None => Ok(None),
        Some(Entry {
            value: Value::Str(StrValue::Raw(b)),
            ..
        }) => Ok(Some(b.as_slice())),
        Some(Entry {
            value: Value::Str(StrValue::Int(n)),
            ..
        }) => Ok(Some(digits.format(*n).as_bytes())),
        Some(_) => Err(wrongtype()),
    }
}

/// The string at `key` for writing, in one lookup: an absent key is created empty (then
/// grown by [`StrValue::bytes_mut`] into one zeroed allocation, as Redis's
/// `lookupStringForBitCommand` with `sdsgrowzero`); WRONGTYPE if another type. Returns
/// the string and whether it was created; the caller marks the key's WATCHes when it
/// writes (`Db::signal_modified`).
fn string_for_write<'a>(
    db: &'a mut Db,
    key: &[u8],
    now: u64,
) -> CmdResult<(&'a mut StrValue, bool)> {
    let (entry, created) =
        db.get_or_create(key, now, || Value::Str(StrValue::Raw(StrBytes::new(&[]))));
    match &mut entry.value {
        Value::Str(s) => Ok((s, created)),
        _ => Err(wrongtype()),
    }
}

/// The bit at `offset` of a string value (an integer read as its decimal text).
fn stored_bit(s: &StrValue, offset: u64) -> u8 {
    match s {
        StrValue::Raw(b) => get_bit(b, offset),
        StrValue::Int(n) => get_bit(itoa::Buffer::new().format(*n).as_bytes(), offset),
    }
}

/// A bit offset argument (GETBIT, SETBIT, BITFIELD). With `width` (BITFIELD), `#n`
/// means the `n`-th field of that width.
fn bit_offset(arg: &[u8], width: Option<u32>) -> CmdResult<u64> {
    let (digits, scale) = match (arg.first(), width) {
        (Some(b'#'), Some(w)) => (&arg[1..], i64::from(w)),
        _ => (arg, 1),
    };
    let n = super::args::parse_i64(digits)
        .ok_or_else(|| Reply::err(BAD_OFFSET))?
        .wrapping_mul(scale);
    if n < 0 || (n >> 3) as u64 >= MAX_STRING as u64 {
        return Err(Reply::err(BAD_OFFSET));
    }
    Ok(n as u64)
}

fn get_bit(bytes: &[u8], offset: u64) -> u8 {
    match bytes.get((offset >> 3) as usize) {
        Some(b) => (b >> (7 - (offset & 7))) & 1,
        None => 0,
    }
}

fn put_bit(bytes: &mut [u8], offset: u64, on: bool) {
    let (byte, mask) = ((offset >> 3) as usize, 0x80u8 >> (offset & 7));
    if on {
        bytes[byte] |= mask;
    } else {
        bytes[byte] &= !mask;
    }
}

/// SETBIT key offset value
pub fn setbit(ctx: &mut Ctx, a: &[&[u8]]) -> Reply {
    run(setbit_inner(ctx, a))
}

fn setbit_inner(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult<Reply> {
    let offset = bit_offset(a[2], None)?;
    let on = match super::args::parse_i64(a[3]) {
        Some(v @ (0 | 1)) => v == 1,
        _ => return Err(Reply::err(BAD_BIT)),
    };
    let now = ctx.now_ms;
    let db = ctx.db();
    let (s, created) = string_for_write(db, a[1], now)?;
    // A bit that already has the value changes nothing: like Redis, the key is then not
    // touched (a WATCH on it stays clean).
    if !created && (offset >> 3) < s.len() as u64 && (stored_bit(s, offset) == 1) == on {
        return Ok(Reply::Integer(i64::from(on)));
    }
    let bytes = s.bytes_mut((offset >> 3) as usize + 1);
    let old = get_bit(bytes, offset);
    put_bit(bytes, offset, on);
    db.signal_modified(a[1]);
    ctx.notify(STRING, "setbit", a[1]);
    Ok(Reply::Integer(i64::from(old)))
}

/// GETBIT key offset
pub fn getbit(ctx: &mut Ctx, a: &[&[u8]]) -> Reply {
    let offset = match bit_offset(a[2], None) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let now = ctx.now_ms;
    let mut digits = itoa::Buffer::new();
    match read_bytes(ctx.db(), a[1], now, &mut digits) {
        Err(e) => e,
        Ok(None) => Reply::Integer(0),
        Ok(Some(b)) => Reply::Integer(i64::from(get_bit(b, offset))),
    }
}

/// Count the set bits of `bytes`.
pub fn popcount(bytes: &[u8]) -> u64 {
    let mut chunks = bytes.chunks_exact(8);
    let mut n: u64 = chunks
        .by_ref()
        .map(|c| u64::from(u64::from_ne_bytes(c.try_into().expect("8 bytes")).count_ones()))
        .sum();
    n += chunks
        .remainder()
        .iter()
        .map(|b| u64::from(b.count_ones()))
        .sum::<u64>();
    n
}

/// A BITCOUNT/BITPOS range resolved to bytes: `start..=end` of the string, and the bits
/// of the first and last byte outside a BIT range (Redis's "negative masks").
struct ByteRange {
    start: i64,
    end: i64,
    first_mask: u8,
    last_mask: u8,
}

/// Resolve `start`/`end` (negative from the end) over a string of `len` bytes, in bits
/// when `bits`, as BITCOUNT and BITPOS do.
fn resolve_range(len: usize, mut start: i64, mut end: i64, bits: bool) -> ByteRange {
    let total = if bits { (len as i64) << 3 } else { len as i64 };
    if start < 0 {
        start += total;
    }
    if end < 0 {
        end += total;
    }
    start = start.max(0);
    end = end.max(0).min(total - 1);
    let (mut first_mask, mut last_mask) = (0, 0);
    if bits && start <= end {
        first_mask = !((1u32 << (8 - (start & 7))) - 1) as u8;
        last_mask = ((1u32 << (7 - (end & 7))) - 1) as u8;
        start >>= 3;
        end >>= 3;
    }
    ByteRange {
        start,
        end,
        first_mask,
        last_mask,
    }
}

/// `BIT` or `BYTE` (the unit of a BITCOUNT/BITPOS range).
fn range_unit(arg: &[u8]) -> CmdResult<bool> {
    if is(arg, "bit") {
        Ok(true)
    } else if is(arg, "byte") {
        Ok(false)
    } else {
        Err(syntax_error())
    }
}

/// BITCOUNT key [start end [BYTE|BIT]]
pub fn bitcount(ctx: &mut Ctx, a: &[&[u8]]) -> Reply {
    run(bitcount_inner(ctx, a))
}

fn bitcount_inner(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult<Reply> {
    let now = ctx.now_ms;
    let mut digits = itoa::Buffer::new();
    let Some(p) = read_bytes(ctx.db(), a[1], now, &mut digits)? else {
        return Ok(Reply::Integer(0));
    };
    let range = match a.len() {
        2 => ByteRange {
            start: 0,
            end: p.len() as i64 - 1,
            first_mask: 0,
            last_mask: 0,
        },
        4 | 5 => {
            let (start, end) = (int(a[2])?, int(a[3])?);
            if start < 0 && end < 0 && start > end {
                return Ok(Reply::Integer(0));
            }
            let bits = a.len() == 5 && range_unit(a[4])?;
            resolve_range(p.len(), start, end, bits)
        }
        _ => return Err(syntax_error()),
    };
    if range.start > range.end {
        return Ok(Reply::Integer(0));
    }
    let (s, e) = (range.start as usize, range.end as usize);
    let mut count = popcount(&p[s..=e]);
    count -= u64::from((p[s] & range.first_mask).count_ones());
    count -= u64::from((p[e] & range.last_mask).count_ones());
    Ok(Reply::Integer(count as i64))
}

/// The position of the first bit equal to `bit` in `bytes`: -1 if looking for a 1 and
/// there is none; one past the end if looking for a 0 and there is none (the string is
/// zero-padded on the right), as Redis's `redisBitpos`.
fn first_bit(bytes: &[u8], bit: bool) -> i64 {
    let skip = if bit { 0 } else { 0xff };
    match bytes.iter().position(|&b| b != skip) {
        Some(i) => {
            let b = if bit { bytes[i] } else { !bytes[i] };
            (i as i64) * 8 + i64::from(b.leading_zeros())
        }
        None if bit => -1,
        None => bytes.len() as i64 * 8,
    }
}

/// BITPOS key bit [start [end [BYTE|BIT]]]
pub fn bitpos(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    run(bitpos_inner(ctx, a))
}

fn bitpos_inner(ctx: &mut Ctx, a: &[Bytes]) -> CmdResult<Reply> {
    let bit = match int(&a[2])? {
        b @ (0 | 1) => b == 1,
        _ => return Err(Reply::err("ERR The bit argument must be 1 or 0.")),
    };
    let now = ctx.now_ms;
    let mut digits = itoa::Buffer::new();
    let Some(p) = read_bytes(ctx.db(), &a[1], now, &mut digits)? else {
        return Ok(Reply::Integer(if bit { -1 } else { 0 }));
    };
    let len = p.len() as i64;
    let mut end_given = false;
    let range = match a.len() {
        3 => ByteRange {
            start: 0,
            end: len - 1,
            first_mask: 0,
            last_mask: 0,
        },
        4..=6 => {
            let start = int(&a[3])?;
            let bits = a.len() == 6 && range_unit(&a[5])?;
            let end = if a.len() >= 5 {
                end_given = true;
                int(&a[4])?
            } else if bits {
                (len << 3) + 7
            } else {
                len - 1
            };
            resolve_range(p.len(), start, end, bits)
        }
        _ => return Err(syntax_error()),
    };
    if range.start > range.end {
        return Ok(Reply::Integer(-1));
    }
    // Redis's walk: the first byte alone when a BIT range cuts it, then the whole bytes,
    // then the last byte alone when a BIT range cuts it; `start` and `bytes` follow it,
    // since the no-match answers depend on where it stopped.
    let outside = |byte: u8, mask: u8| if bit { byte & !mask } else { byte | mask };
    let end = range.end as usize;
    let mut start = range.start as usize;
    let mut bytes = end - start + 1;
    let pos = 'walk: {
        if range.first_mask != 0 {
            let mut b = outside(p[start], range.first_mask);
            if range.last_mask != 0 && bytes == 1 {
                b = outside(b, range.last_mask);
            }
            let pos = first_bit(&[b], bit);
            if bytes == 1 || (pos != -1 && pos != 8) {
                break 'walk pos;
            }
            start += 1;
            bytes -= 1;
        }
        let whole = bytes - usize::from(range.last_mask != 0);
        if whole > 0 {
            let pos = first_bit(&p[start..start + whole], bit);
            if bytes == whole || (pos != -1 && pos != (whole as i64) * 8) {
                break 'walk pos;
            }
            start += whole;
            bytes -= whole;
        }
        first_bit(&[outside(p[end], range.last_mask)], bit)
    };
    // With an explicit end, a 0 past the range is not in it.
    if end_given && !bit && pos == (bytes as i64) * 8 {
        return Ok(Reply::Integer(-1));
    }
    Ok(Reply::Integer(if pos == -1 {
        -1
    } else {
        pos + (start as i64) * 8
    }))
}

/// BITOP AND|OR|XOR|NOT destkey key [key ...]
pub fn bitop(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    run(bitop_inner(ctx, a))
}

#[derive(Clone, Copy, PartialEq)]
enum BitOp {
    And,
    Or,
    Xor,
    Not,
}

fn bitop_inner(ctx: &mut Ctx, a: &[Bytes]) -> CmdResult<Reply> {
    let op = if is(&a[1], "and") {
        BitOp::And
    } else if is(&a[1], "or") {
        BitOp::Or
    } else if is(&a[1], "xor") {
        BitOp::Xor
    } else if is(&a[1], "not") {
        BitOp::Not
    } else {
        return Err(syntax_error());
    };
    if op == BitOp::Not && a.len() != 4 {
        return Err(Reply::err(
            "ERR BITOP NOT must be called with a single source key.",
        ));
    }
    let now = ctx.now_ms;
    let db = ctx.db();
    let mut sources: Vec<Bytes> = Vec::with_capacity(a.len() - 3);
    for key in &a[3..] {
        let mut digits = itoa::Buffer::new();
        let bytes = read_bytes(db, key, now, &mut digits)?;
        sources.push(bytes.map_or_else(Bytes::new, Bytes::copy_from_slice));
    }
    let len = sources.iter().map(Bytes::len).max().unwrap_or(0);
    let dest = &a[2];
    if len == 0 {
        if db.remove(dest, now).is_some() {
            ctx.notify(GENERIC | REMOVAL, "del", dest);
        }
        return Ok(Reply::Integer(0));
    }
    let mut out = vec![0u8; len];
    out[..sources[0].len()].copy_from_slice(&sources[0]);
    match op {
        BitOp::Not => out.iter_mut().for_each(|b| *b = !*b),
        _ => {
            for src in &sources[1..] {
                for (i, o) in out.iter_mut().enumerate() {
                    let b = src.get(i).copied().unwrap_or(0);
                    match op {
                        BitOp::And => *o &= b,
                        BitOp::Or => *o |= b,
                        _ => *o ^= b,
                    }
                }
            }
        }
    }
    db.set(dest, Value::Str(StrValue::Raw(StrBytes::new(&out))));
    ctx.notify(STRING, "set", dest);
    Ok(Reply::Integer(len as i64))
}

/// What BITFIELD does when an INCRBY or SET leaves the integer's range.
#[derive(Clone, Copy, PartialEq)]
enum Overflow {
    Wrap,
    Sat,
    Fail,
}

/// One BITFIELD operation.
#[derive(Clone, Copy)]
struct FieldOp {
    kind: FieldKind,
    signed: bool,
    bits: u32,
    offset: u64,
    value: i64,
    overflow: Overflow,
}

#[derive(Clone, Copy, PartialEq)]
enum FieldKind {
    Get,
    Set,
    IncrBy,
}

/// `i1`..`i64` or `u1`..`u63`.
fn field_type(arg: &[u8]) -> CmdResult<(bool, u32)> {
    let signed = match arg.first() {
        Some(b'i') => true,
        Some(b'u') => false,
        _ => return Err(Reply::err(BAD_TYPE)),
    };
    match super::args::parse_i64(&arg[1..]) {
        Some(b) if b >= 1 && b <= if signed { 64 } else { 63 } => Ok((signed, b as u32)),
        _ => Err(Reply::err(BAD_TYPE)),
    }
}

fn parse_field_ops(a: &[Bytes]) -> CmdResult<Vec<FieldOp>> {
    let mut ops = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut j = 2;
    while j < a.len() {
        let rest = a.len() - j - 1;
        let kind = if is(&a[j], "get") && rest >= 2 {
            FieldKind::Get
        } else if is(&a[j], "set") && rest >= 3 {
            FieldKind::Set
        } else if is(&a[j], "incrby") && rest >= 3 {
            FieldKind::IncrBy
        } else if is(&a[j], "overflow") && rest >= 1 {
            overflow = match &a[j + 1] {
                t if is(t, "wrap") => Overflow::Wrap,
                t if is(t, "sat") => Overflow::Sat,
                t if is(t, "fail") => Overflow::Fail,
                _ => return Err(Reply::err("ERR Invalid OVERFLOW type specified")),
            };
            j += 2;
            continue;
        } else {
            return Err(syntax_error());
        };
        let (signed, bits) = field_type(&a[j + 1])?;
        let offset = bit_offset(&a[j + 2], Some(bits))?;
        let value = if kind == FieldKind::Get {
            0
        } else {
            int(&a[j + 3])?
        };
        ops.push(FieldOp {
            kind,
            signed,
            bits,
            offset,
            value,
            overflow,
        });
        j += if kind == FieldKind::Get { 3 } else { 4 };
    }
    Ok(ops)
}

/// The `bits`-wide unsigned integer at bit `offset` (zeros past the end).
fn get_field(bytes: &[u8], offset: u64, bits: u32) -> u64 {
    (0..u64::from(bits)).fold(0, |v, i| (v << 1) | u64::from(get_bit(bytes, offset + i)))
}

fn get_signed_field(bytes: &[u8], offset: u64, bits: u32) -> i64 {
    let v = get_field(bytes, offset, bits);
    if bits < 64 && v & (1 << (bits - 1)) != 0 {
        (v | (u64::MAX << bits)) as i64
    } else {
        v as i64
    }
}

fn set_field(bytes: &mut [u8], offset: u64, bits: u32, value: u64) {
    for i in 0..u64::from(bits) {
        put_bit(
            bytes,
            offset + i,
            (value >> (u64::from(bits) - 1 - i)) & 1 == 1,
        );
    }
}

/// The result of `value + incr` in an unsigned `bits`-wide field: the new value, or None
/// when OVERFLOW FAIL refuses it (Redis's `checkUnsignedBitfieldOverflow`).
fn unsigned_add(value: u64, incr: i64, bits: u32, overflow: Overflow) -> Option<u64> {
    let max = (1u64 << bits) - 1;
    let max_incr = max.wrapping_sub(value) as i64;
    let min_incr = value.wrapping_neg() as i64;
    let wrapped = value.wrapping_add(incr as u64) & max;
    let limit = if value > max || (incr > 0 && incr > max_incr) {
        max
    } else if incr < 0 && incr < min_incr {
        0
    } else {
        return Some(value.wrapping_add(incr as u64));
    };
    match overflow {
        Overflow::Wrap => Some(wrapped),
        Overflow::Sat => Some(limit),
        Overflow::Fail => None,
    }
}

/// [`unsigned_add`] for a signed field (Redis's `checkSignedBitfieldOverflow`).
fn signed_add(value: i64, incr: i64, bits: u32, overflow: Overflow) -> Option<i64> {
    let max = if bits == 64 {
        i64::MAX
    } else {
        (1i64 << (bits - 1)) - 1
    };
    let min = -max - 1;
    let max_incr = (max as u64).wrapping_sub(value as u64) as i64;
    let min_incr = min.wrapping_sub(value);
    let wide = bits != 64;
    let limit = if value > max || (wide && incr > max_incr) || (value >= 0 && incr > max_incr) {
        max
    } else if value < min || (wide && incr < min_incr) || (value < 0 && incr < min_incr) {
        min
    } else {
        return Some(value.wrapping_add(incr));
    };
    match overflow {
        Overflow::Wrap => {
            let mut c = (value as u64).wrapping_add(incr as u64);
            if wide {
                let mask = u64::MAX << bits;
                if c & (1 << (bits - 1)) != 0 {
                    c |= mask;
                } else {
                    c &= !mask;
                }
            }
            Some(c as i64)
        }
        Overflow::Sat => Some(limit),
        Overflow::Fail => None,
    }
}

/// Run one SET or INCRBY on `bytes`: the reply and whether the field changed.
fn write_field(bytes: &mut [u8], op: &FieldOp) -> (Reply, bool) {
    let incr = op.kind == FieldKind::IncrBy;
    if op.signed {
        let old = get_signed_field(bytes, op.offset, op.bits);
        let new = if incr {
            signed_add(old, op.value, op.bits, op.overflow)
        } else {
            signed_add(op.value, 0, op.bits, op.overflow)
        };
        let Some(new) = new else {
            return (Reply::Nil, false);
        };
        set_field(bytes, op.offset, op.bits, new as u64);
        (Reply::Integer(if incr { new } else { old }), old != new)
    } else {
        let old = get_field(bytes, op.offset, op.bits);
        let new = if incr {
            unsigned_add(old, op.value, op.bits, op.overflow)
        } else {
            unsigned_add(op.value as u64, 0, op.bits, op.overflow)
        };
        let Some(new) = new else {
            return (Reply::Nil, false);
        };
        set_field(bytes, op.offset, op.bits, new);
        (
            Reply::Integer(if incr { new } else { old } as i64),
            old != new,
        )
    }
}

fn read_field(bytes: &[u8], op: &FieldOp) -> Reply {
    if op.signed {
        Reply::Integer(get_signed_field(bytes, op.offset, op.bits))
    } else {
        Reply::Integer(get_field(bytes, op.offset, op.bits) as i64)
    }
}

/// BITFIELD key [GET type offset | SET type offset value | INCRBY type offset increment |
/// OVERFLOW WRAP|SAT|FAIL] ...
pub fn bitfield(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    run(bitfield_inner(ctx, a, false))
}

/// BITFIELD_RO key [GET type offset] ...
pub fn bitfield_ro(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    run(bitfield_inner(ctx, a, true))
}

fn bitfield_inner(ctx: &mut Ctx, a: &[Bytes], read_only: bool) -> CmdResult<Reply> {
    let ops = parse_field_ops(a)?;
    let now = ctx.now_ms;
    let highest = ops
        .iter()
        .filter(|op| op.kind != FieldKind::Get)
        .map(|op| op.offset + u64::from(op.bits) - 1)
        .max();
    let Some(highest) = highest else {
        let mut digits = itoa::Buffer::new();
        let bytes = read_bytes(ctx.db(), &a[1], now, &mut digits)?.unwrap_or(&[]);
        return Ok(Reply::Array(
            ops.iter().map(|op| read_field(bytes, op)).collect(),
        ));
    };
    if read_only {
        return Err(Reply::err(
            "ERR BITFIELD_RO only supports the GET subcommand",
        ));
    }
    let db = ctx.db();
    let (s, created) = string_for_write(db, &a[1], now)?;
    let before = s.len();
    let bytes = s.bytes_mut((highest >> 3) as usize + 1);
    let grown = created || bytes.len() != before;
    let mut changed = false;
    let replies = ops
        .iter()
        .map(|op| match op.kind {
            FieldKind::Get => read_field(bytes, op),
            _ => {
                let (reply, differs) = write_field(bytes, op);
                changed |= !matches!(reply, Reply::Nil) && (grown || differs);
                reply
            }
        })
        .collect();
    db.signal_modified(&a[1]);
    if changed {
        ctx.notify(STRING, "setbit", &a[1]);
    }
    Ok(Reply::Array(replies))
}

use super::flags::{DENYOOM, FAST, READONLY, WRITE};
use super::strings::run;

/// Bitmap commands.
pub const COMMANDS: &[super::CommandSpec] = &[
    crate::cmd!("setbit", 4, WRITE | DENYOOM, 1, 1, 1, fast: setbit),
    crate::cmd!("getbit", 3, READONLY | FAST, 1, 1, 1, fast: getbit),
    crate::cmd!("bitcount", -2, READONLY, 1, 1, 1, fast: bitcount),
    crate::cmd!("bitpos", -3, READONLY, 1, 1, 1, bitpos),
    crate::cmd!("bitop", -4, WRITE | DENYOOM, 2, -1, 1, bitop),
    crate::cmd!("bitfield", -2, WRITE | DENYOOM, 1, 1, 1, bitfield),
    crate::cmd!("bitfield_ro", -2, READONLY | FAST, 1, 1, 1, bitfield_ro),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_read_and_write_most_significant_bit_first() {
        let mut b = [0u8; 2];
        set_field(&mut b, 7, 5, 23);
        assert_eq!(b, [0b0000_0001, 0b0111_0000]);
        assert_eq!(get_field(&b, 7, 5), 23);
        assert_eq!(get_signed_field(&[0xff], 0, 8), -1);
        assert_eq!(get_field(&[0xff], 4, 8), 0xf0, "zeros past the end");
    }

    #[test]
    fn overflow_follows_redis() {
        assert_eq!(unsigned_add(255, 1, 8, Overflow::Wrap), Some(0));
        assert_eq!(unsigned_add(255, 1, 8, Overflow::Sat), Some(255));
        assert_eq!(unsigned_add(255, 1, 8, Overflow::Fail), None);
        assert_eq!(unsigned_add(0, -1, 8, Overflow::Sat), Some(0));
        assert_eq!(unsigned_add(u64::MAX, 0, 8, Overflow::Wrap), Some(255));
        assert_eq!(signed_add(127, 1, 8, Overflow::Wrap), Some(-128));
        assert_eq!(signed_add(-128, -1, 8, Overflow::Sat), Some(-128));
        assert_eq!(signed_add(i64::MAX, 1, 64, Overflow::Wrap), Some(i64::MIN));
        assert_eq!(signed_add(i64::MIN, -1, 64, Overflow::Fail), None);
        assert_eq!(signed_add(5, 3, 64, Overflow::Fail), Some(8));
    }

    #[test]
    fn first_bit_pads_zeros_on_the_right() {
        assert_eq!(first_bit(&[0xff, 0xf0], false), 12);
        assert_eq!(first_bit(&[0xff], false), 8);
        assert_eq!(first_bit(&[0, 0], true), -1);
        assert_eq!(first_bit(&[0, 0x01], true), 15);
    }
}
