//! `cmsgpack`: Redis's bundled lua-cmsgpack 0.4.0 (`pack`, `unpack`, `unpack_one`,
//! `unpack_limit`) with its exact encodings: integers in the smallest format,
//! floats when a double survives the round trip through `float`, tables as arrays
//! only when their keys are exactly `1..n`, nesting cut at 16 levels.

use std::ffi::c_int;

use super::boundary;
use super::budget::{self, Output};
use super::lua::{
    f64_to_i64_c, ffi, lua_State, protect, push_bytes, push_str, raw_set_str, set_fn, string_at,
    CResult, Raise,
};

const MAX_NESTING: i32 = 16;
/// Decoding recursion cap, above what Lua's stack allows (`lua_checkstack` fails first,
/// at the depth where Redis fails); the recursion itself runs on `boundary::deep`.
const MAX_DECODE_DEPTH: usize = 10_000;

/// Push the `cmsgpack` module table.
pub(crate) unsafe fn open(l: *mut lua_State) {
    ffi::lua_newtable(l);
    set_fn(l, -1, "pack", mp_pack);
    set_fn(l, -1, "unpack", mp_unpack);
    set_fn(l, -1, "unpack_one", mp_unpack_one);
    set_fn(l, -1, "unpack_limit", mp_unpack_limit);
    for (k, v) in [
        ("_NAME", "cmsgpack"),
        ("_VERSION", "lua-cmsgpack 0.4.0"),
        ("_COPYRIGHT", "Copyright (C) 2012, Salvatore Sanfilippo"),
        ("_DESCRIPTION", "MessagePack C implementation for Lua"),
    ] {
        push_str(l, v);
        raw_set_str(l, -2, k);
    }
}

// ===== Encoding =====

fn encode_bytes(s: &[u8], out: &mut Output) -> Result<(), Raise> {
    let len = s.len();
    if len < 32 {
        out.push(0xa0 | len as u8);
    } else if len <= 0xff {
        out.extend_from_slice(&[0xd9, len as u8]);
    } else if len <= 0xffff {
        out.push(0xda);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(0xdb);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    }
    out.extend_checked(s)
}

fn encode_double(d: f64, out: &mut Vec<u8>) {
    let f = d as f32;
    if f64::from(f) == d {
        out.push(0xca);
        out.extend_from_slice(&f.to_bits().to_be_bytes());
    } else {
        out.push(0xcb);
        out.extend_from_slice(&d.to_bits().to_be_bytes());
    }
}

/// `mp_encode_int`.
pub(crate) fn encode_int(n: i64, out: &mut Vec<u8>) {
    if n >= 0 {
        if n <= 127 {
            out.push(n as u8);
        } else if n <= 0xff {
            out.extend_from_slice(&[0xcc, n as u8]);
        } else if n <= 0xffff {
            out.push(0xcd);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        } else if n <= 0xffff_ffff {
            out.push(0xce);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        } else {
            out.push(0xcf);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    } else if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= -128 {
        out.extend_from_slice(&[0xd0, n as i8 as u8]);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -2_147_483_648 {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn encode_len(n: usize, fix: u8, b16: u8, b32: u8, out: &mut Vec<u8>) {
    if n <= 15 {
        out.push(fix | n as u8);
    } else if n <= 65535 {
        out.push(b16);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(b32);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

/// `(int)x == x` without UB (0.4.0's `IS_INT_EQUIVALENT`).
fn is_int_equivalent(x: f64) -> bool {
    x.is_finite() && x >= f64::from(i32::MIN) && x <= f64::from(i32::MAX) && x.trunc() == x
}

/// `IS_INT64_EQUIVALENT`: `(int64_t)x == x` with x86 conversion semantics.
fn is_int64_equivalent(x: f64) -> bool {
    !x.is_infinite() && f64_to_i64_c(x) as f64 == x
}

/// `table_is_an_array` for the table on top.
unsafe fn table_is_an_array(l: *mut lua_State) -> bool {
    let top = ffi::lua_gettop(l);
    let mut count: i64 = 0;
    let mut max: i64 = 0;
    ffi::lua_pushnil(l);
    while ffi::lua_next(l, -2) != 0 {
        ffi::lua_pop(l, 1);
        let n = ffi::lua_tonumber(l, -1);
        if ffi::lua_type(l, -1) != ffi::LUA_TNUMBER || n <= 0.0 || !is_int_equivalent(n) {
            ffi::lua_settop(l, top);
            return false;
        }
        max = max.max(n as i64);
        count += 1;
    }
    ffi::lua_settop(l, top);
    max == count
}

/// Encode the value on top and pop it.
unsafe fn encode_value(l: *mut lua_State, level: i32, out: &mut Output) -> Result<(), Raise> {
    let mut t = ffi::lua_type(l, -1);
    if t == ffi::LUA_TTABLE && level == MAX_NESTING {
        t = ffi::LUA_TNIL;
    }
    match t {
        ffi::LUA_TSTRING => encode_bytes(string_at(l, -1).unwrap_or_default(), out)?,
        ffi::LUA_TBOOLEAN => out.push(if ffi::lua_toboolean(l, -1) != 0 {
            0xc3
        } else {
            0xc2
        }),
        ffi::LUA_TNUMBER => {
            let n = ffi::lua_tonumber(l, -1);
            if is_int64_equivalent(n) {
                encode_int(f64_to_i64_c(n), out);
            } else {
                encode_double(n, out);
            }
        }
        ffi::LUA_TTABLE => {
            if ffi::lua_checkstack(l, 3) == 0 {
                return Err(Raise::Msg(
                    "stack overflow (in function mp_encode_lua_table)".into(),
                ));
            }
            boundary::deep(|| encode_table(l, level, out))?;
        }
        _ => out.push(0xc0),
    }
    ffi::lua_pop(l, 1);
    Ok(())
}

/// Encode the table on top (left on the stack) as an array or a map.
unsafe fn encode_table(l: *mut lua_State, level: i32, out: &mut Output) -> Result<(), Raise> {
    if table_is_an_array(l) {
        let len = ffi::lua_objlen(l, -1);
        encode_len(len, 0x90, 0xdc, 0xdd, out);
        for j in 1..=len {
            ffi::lua_rawgeti_(l, -1, c_int::try_from(j).unwrap_or(c_int::MAX));
            encode_value(l, level + 1, out)?;
            out.check()?;
        }
    } else {
        let mut len = 0usize;
        ffi::lua_pushnil(l);
        while ffi::lua_next(l, -2) != 0 {
            ffi::lua_pop(l, 1);
            len += 1;
        }
        encode_len(len, 0x80, 0xde, 0xdf, out);
        ffi::lua_pushnil(l);
        while ffi::lua_next(l, -2) != 0 {
            ffi::lua_pushvalue(l, -2);
            encode_value(l, level + 1, out)?;
            encode_value(l, level + 1, out)?;
            out.check()?;
        }
    }
    Ok(())
}

unsafe extern "C-unwind" fn mp_pack(l: *mut lua_State) -> c_int {
    let nargs = ffi::lua_gettop(l);
    protect(l, || {
        if nargs == 0 {
            return Err(Raise::Arg(0, "MessagePack pack needs input.".into()));
        }
        if ffi::lua_checkstack(l, nargs) == 0 {
            return Err(Raise::Arg(
                0,
                "Too many arguments for MessagePack pack.".into(),
            ));
        }
        let mut out = Output::for_vm(l);
        for i in 1..=nargs {
            ffi::lua_pushvalue(l, i);
            encode_value(l, 0, &mut out)?;
            out.check()?;
        }
        out.into_lua(l)
    })
}

// ===== Decoding =====

enum DecodeError {
    Eof,
    BadFormat,
    Lua(Raise),
}

struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn left(&self) -> usize {
        self.data.len() - self.pos
    }

    fn need(&self, n: usize) -> Result<(), DecodeError> {
        if self.left() < n {
            Err(DecodeError::Eof)
        } else {
            Ok(())
        }
    }

    fn byte(&self, i: usize) -> u8 {
        self.data[self.pos + i]
    }

    fn be(&self, from: usize, n: usize) -> u64 {
        (0..n).fold(0u64, |acc, i| (acc << 8) | u64::from(self.byte(from + i)))
    }
}

const TOO_MANY: &str =
    "stack overflow (too many return values at once; use unpack_one or unpack_limit instead.)";

unsafe fn decode_value(l: *mut lua_State, c: &mut Cursor, depth: usize) -> Result<(), DecodeError> {
    c.need(1)?;
    budget::lua_room(l).map_err(DecodeError::Lua)?;
    if depth > MAX_DECODE_DEPTH || ffi::lua_checkstack(l, 1) == 0 {
        return Err(DecodeError::Lua(Raise::Msg(TOO_MANY.into())));
    }
    let tag = c.byte(0);
    let (consumed, kind) = match tag {
        0xcc => {
            c.need(2)?;
            ffi::lua_pushnumber(l, f64::from(c.byte(1)));
            (2, None)
        }
        0xd0 => {
            c.need(2)?;
            ffi::lua_pushnumber(l, f64::from(c.byte(1) as i8));
            (2, None)
        }
        0xcd => {
            c.need(3)?;
            ffi::lua_pushnumber(l, c.be(1, 2) as f64);
            (3, None)
        }
        0xd1 => {
            c.need(3)?;
            ffi::lua_pushnumber(l, f64::from(c.be(1, 2) as u16 as i16));
            (3, None)
        }
        0xce => {
            c.need(5)?;
            ffi::lua_pushnumber(l, c.be(1, 4) as f64);
            (5, None)
        }
        0xd2 => {
            c.need(5)?;
            ffi::lua_pushnumber(l, f64::from(c.be(1, 4) as u32 as i32));
            (5, None)
        }
        0xcf => {
            c.need(9)?;
            // lua-cmsgpack 0.4.0 pushes uint64 through a signed cast.
            ffi::lua_pushnumber(l, c.be(1, 8) as i64 as f64);
            (9, None)
        }
        0xd3 => {
            c.need(9)?;
            ffi::lua_pushnumber(l, c.be(1, 8) as i64 as f64);
            (9, None)
        }
        0xc0 => {
            ffi::lua_pushnil(l);
            (1, None)
        }
        0xc3 => {
            ffi::lua_pushboolean(l, 1);
            (1, None)
        }
        0xc2 => {
            ffi::lua_pushboolean(l, 0);
            (1, None)
        }
        0xca => {
            c.need(5)?;
            ffi::lua_pushnumber(l, f64::from(f32::from_bits(c.be(1, 4) as u32)));
            (5, None)
        }
        0xcb => {
            c.need(9)?;
            ffi::lua_pushnumber(l, f64::from_bits(c.be(1, 8)));
            (9, None)
        }
        0xd9..=0xdb => {
            let hdr = match tag {
                0xd9 => 1,
                0xda => 2,
                _ => 4,
            };
            c.need(1 + hdr)?;
            let len = c.be(1, hdr) as usize;
            c.need((1 + hdr).saturating_add(len))?;
            let start = c.pos + 1 + hdr;
            push_bytes(l, &c.data[start..start + len]);
            (1 + hdr + len, None)
        }
        0xdc..=0xdf => {
            let hdr = if tag == 0xdc || tag == 0xde { 2 } else { 4 };
            c.need(1 + hdr)?;
            let len = c.be(1, hdr) as usize;
            (1 + hdr, Some((tag >= 0xde, len)))
        }
        t if t & 0x80 == 0 => {
            ffi::lua_pushnumber(l, f64::from(t));
            (1, None)
        }
        t if t & 0xe0 == 0xe0 => {
            ffi::lua_pushnumber(l, f64::from(t as i8));
            (1, None)
        }
        t if t & 0xe0 == 0xa0 => {
            let len = usize::from(t & 0x1f);
            c.need(1 + len)?;
            push_bytes(l, &c.data[c.pos + 1..c.pos + 1 + len]);
            (1 + len, None)
        }
        t if t & 0xf0 == 0x90 => (1, Some((false, usize::from(t & 0xf)))),
        t if t & 0xf0 == 0x80 => (1, Some((true, usize::from(t & 0xf)))),
        _ => return Err(DecodeError::BadFormat),
    };
    c.pos += consumed;
    match kind {
        None => Ok(()),
        Some((false, len)) => boundary::deep(|| decode_array(l, c, len, depth)),
        Some((true, len)) => boundary::deep(|| decode_map(l, c, len, depth)),
    }
}

unsafe fn decode_array(
    l: *mut lua_State,
    c: &mut Cursor,
    len: usize,
    depth: usize,
) -> Result<(), DecodeError> {
    ffi::lua_newtable(l);
    if ffi::lua_checkstack(l, 1) == 0 {
        return Err(DecodeError::Lua(Raise::Msg(
            "stack overflow (in function mp_decode_to_lua_array)".into(),
        )));
    }
    for index in 1..=len {
        budget::table_room(l, index, budget::ARRAY_SLOT).map_err(DecodeError::Lua)?;
        ffi::lua_pushnumber(l, index as f64);
        decode_value(l, c, depth + 1)?;
        ffi::lua_rawset(l, -3);
    }
    Ok(())
}

unsafe fn decode_map(
    l: *mut lua_State,
    c: &mut Cursor,
    len: usize,
    depth: usize,
) -> Result<(), DecodeError> {
    ffi::lua_newtable(l);
    for n in 1..=len {
        budget::table_room(l, n, budget::HASH_NODE).map_err(DecodeError::Lua)?;
        decode_value(l, c, depth + 1)?;
        decode_value(l, c, depth + 1)?;
        match ffi::lua_type(l, -2) {
            ffi::LUA_TNIL => {
                return Err(DecodeError::Lua(Raise::Plain("table index is nil".into())))
            }
            ffi::LUA_TNUMBER if ffi::lua_tonumber(l, -2).is_nan() => {
                return Err(DecodeError::Lua(Raise::Plain("table index is NaN".into())))
            }
            _ => ffi::lua_rawset(l, -3),
        }
    }
    Ok(())
}

unsafe fn unpack_full(l: *mut lua_State, limit: i64, offset: i64) -> CResult {
    let Some(s) = string_at(l, 1) else {
        return Err(Raise::Type(1, "string"));
    };
    let len = s.len();
    if offset < 0 || limit < 0 {
        return Err(Raise::Msg(format!(
            "Invalid request to unpack with offset of {} and limit of {}.",
            offset as i32, len as i32
        )));
    }
    let offset = usize::try_from(offset).unwrap_or(usize::MAX);
    if offset > len {
        return Err(Raise::Msg(format!(
            "Start offset {} greater than input length {}.",
            offset as i32, len as i32
        )));
    }
    let decode_all = limit == 0 && offset == 0;
    let limit = if decode_all {
        i64::from(i32::MAX)
    } else {
        limit
    };
    let mut c = Cursor {
        data: s,
        pos: offset,
    };
    let mut cnt: i64 = 0;
    while c.left() > 0 && cnt < limit {
        match decode_value(l, &mut c, 0) {
            Ok(()) => {}
            Err(DecodeError::Eof) => return Err(Raise::Msg("Missing bytes in input.".into())),
            Err(DecodeError::BadFormat) => {
                return Err(Raise::Msg("Bad data format in input.".into()))
            }
            Err(DecodeError::Lua(r)) => return Err(r),
        }
        cnt += 1;
    }
    if !decode_all {
        if ffi::lua_checkstack(l, 1) == 0 {
            return Err(Raise::Msg(
                "stack overflow (in function mp_unpack_full)".into(),
            ));
        }
        let next = if c.left() == 0 {
            -1
        } else {
            (len - c.left()) as i64
        };
        ffi::lua_pushinteger(l, next);
        ffi::lua_insert(l, 2);
        cnt += 1;
    }
    Ok(c_int::try_from(cnt).unwrap_or(c_int::MAX))
}

unsafe extern "C-unwind" fn mp_unpack(l: *mut lua_State) -> c_int {
    ffi::luaL_checklstring(l, 1, std::ptr::null_mut());
    protect(l, || unpack_full(l, 0, 0))
}

unsafe extern "C-unwind" fn mp_unpack_one(l: *mut lua_State) -> c_int {
    // Redis's lua-cmsgpack keeps offsets and limits as lua_Integer (64 bits).
    let offset = ffi::luaL_optinteger(l, 2, 0);
    if ffi::lua_gettop(l) > 1 {
        ffi::lua_settop(l, 1);
    }
    ffi::luaL_checklstring(l, 1, std::ptr::null_mut());
    protect(l, || unpack_full(l, 1, offset))
}

unsafe extern "C-unwind" fn mp_unpack_limit(l: *mut lua_State) -> c_int {
    let limit = ffi::luaL_checkinteger(l, 2);
    let offset = ffi::luaL_optinteger(l, 3, 0);
    if ffi::lua_gettop(l) > 1 {
        ffi::lua_settop(l, 1);
    }
    ffi::luaL_checklstring(l, 1, std::ptr::null_mut());
    protect(l, || unpack_full(l, limit, offset))
}
