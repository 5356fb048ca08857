//! `cjson`: Redis's bundled lua-cjson 2.1.0, byte for byte — `%.14g` numbers,
//! `\/` escaping, sparse-array rules, `cjson.null`, strtod-based number parsing
//! (hex, inf and nan accepted by default) and the same error texts.

use std::ffi::{c_char, c_int, CStr};
use std::ptr;

use super::boundary;
use super::budget::{self, Output};
use super::lua::{
    ffi, fmt_g, lua_State, protect, push_bytes, push_str, raw_set_str, string_at, type_name,
    CResult, CjsonConfig, Raise, VmShared,
};

/// Hard cap on nesting, above what Lua's stack allows (`lua_checkstack` fails first, at
/// the depth where Redis fails); the recursion itself runs on `boundary::deep`.
const MAX_NESTING: i32 = 10_000;

/// Push a new `cjson` module table; the first one opened in a VM becomes the
/// global module whose settings are reset before every script.
pub(crate) unsafe fn open(l: *mut lua_State) {
    push_module(l);
}

unsafe fn push_module(l: *mut lua_State) -> *mut CjsonConfig {
    ffi::lua_newtable(l);
    let module = ffi::lua_gettop(l);
    let cfg = ffi::lua_newuserdata(l, std::mem::size_of::<CjsonConfig>()) as *mut CjsonConfig;
    ptr::write(cfg, CjsonConfig::default());
    let funcs: [(&str, ffi::lua_CFunction); 10] = [
        ("encode", json_encode),
        ("decode", json_decode),
        ("encode_sparse_array", cfg_encode_sparse_array),
        ("encode_max_depth", cfg_encode_max_depth),
        ("decode_max_depth", cfg_decode_max_depth),
        ("encode_number_precision", cfg_encode_number_precision),
        ("encode_keep_buffer", cfg_encode_keep_buffer),
        ("encode_invalid_numbers", cfg_encode_invalid_numbers),
        ("decode_invalid_numbers", cfg_decode_invalid_numbers),
        ("new", cjson_new),
    ];
    for (name, f) in funcs {
        ffi::lua_pushvalue(l, -1);
        ffi::lua_pushcclosure(l, f, 1);
        raw_set_str(l, module, name);
    }
    ffi::lua_pop(l, 1);
    ffi::lua_pushlightuserdata(l, ptr::null_mut());
    raw_set_str(l, module, "null");
    push_str(l, "cjson");
    raw_set_str(l, module, "_NAME");
    push_str(l, "2.1.0");
    raw_set_str(l, module, "_VERSION");
    let shared = VmShared::get(l);
    if shared.cjson_main.is_null() {
        shared.cjson_main = cfg;
    }
    cfg
}

unsafe extern "C-unwind" fn cjson_new(l: *mut lua_State) -> c_int {
    push_module(l);
    1
}

unsafe fn config<'a>(l: *mut lua_State) -> &'a mut CjsonConfig {
    &mut *(ffi::lua_touserdata(l, ffi::lua_upvalueindex(1)) as *mut CjsonConfig)
}

/// `json_arg_init`: at most `n` arguments, padded with nil.
unsafe fn arg_init<'a>(l: *mut lua_State, n: c_int) -> &'a mut CjsonConfig {
    if ffi::lua_gettop(l) > n {
        ffi::luaL_argerror(l, n + 1, c"found too many arguments".as_ptr());
    }
    while ffi::lua_gettop(l) < n {
        ffi::lua_pushnil(l);
    }
    config(l)
}

unsafe fn integer_option(l: *mut lua_State, idx: c_int, setting: &mut i32, min: i32, max: i32) {
    if ffi::lua_type(l, idx) != ffi::LUA_TNIL {
        let value = ffi::luaL_checkinteger(l, idx) as i32;
        if value < min || value > max {
            let msg: &CStr = match (min, max) {
                (1, 14) => c"expected integer between 1 and 14",
                (0, _) => c"expected integer between 0 and 2147483647",
                _ => c"expected integer between 1 and 2147483647",
            };
            ffi::luaL_argerror(l, 1, msg.as_ptr());
        }
        *setting = value;
    }
    ffi::lua_pushinteger(l, (*setting).into());
}

/// `json_enum_option` with the given options (`off`/`on` when `options` is short).
unsafe fn enum_option(l: *mut lua_State, idx: c_int, setting: &mut i32, with_null: bool) {
    let options: [*const c_char; 4] = if with_null {
        [
            c"off".as_ptr(),
            c"on".as_ptr(),
            c"null".as_ptr(),
            ptr::null(),
        ]
    } else {
        [c"off".as_ptr(), c"on".as_ptr(), ptr::null(), ptr::null()]
    };
    if ffi::lua_type(l, idx) != ffi::LUA_TNIL {
        *setting = if ffi::lua_type(l, idx) == ffi::LUA_TBOOLEAN {
            ffi::lua_toboolean(l, idx)
        } else {
            ffi::luaL_checkoption(l, idx, ptr::null(), options.as_ptr())
        };
    }
    if *setting == 0 || *setting == 1 {
        ffi::lua_pushboolean(l, *setting);
    } else {
        push_str(l, "null");
    }
}

unsafe fn bool_option(l: *mut lua_State, idx: c_int, setting: &mut bool) {
    let mut v = i32::from(*setting);
    enum_option(l, idx, &mut v, false);
    *setting = v != 0;
}

unsafe extern "C-unwind" fn cfg_encode_sparse_array(l: *mut lua_State) -> c_int {
    let cfg = arg_init(l, 3);
    bool_option(l, 1, &mut cfg.sparse_convert);
    integer_option(l, 2, &mut cfg.sparse_ratio, 0, i32::MAX);
    integer_option(l, 3, &mut cfg.sparse_safe, 0, i32::MAX);
    3
}

unsafe extern "C-unwind" fn cfg_encode_max_depth(l: *mut lua_State) -> c_int {
    let cfg = arg_init(l, 1);
    integer_option(l, 1, &mut cfg.encode_max_depth, 1, i32::MAX);
    1
}

unsafe extern "C-unwind" fn cfg_decode_max_depth(l: *mut lua_State) -> c_int {
    let cfg = arg_init(l, 1);
    integer_option(l, 1, &mut cfg.decode_max_depth, 1, i32::MAX);
    1
}

unsafe extern "C-unwind" fn cfg_encode_number_precision(l: *mut lua_State) -> c_int {
    let cfg = arg_init(l, 1);
    integer_option(l, 1, &mut cfg.encode_number_precision, 1, 14);
    1
}

unsafe extern "C-unwind" fn cfg_encode_keep_buffer(l: *mut lua_State) -> c_int {
    let cfg = arg_init(l, 1);
    bool_option(l, 1, &mut cfg.encode_keep_buffer);
    1
}

unsafe extern "C-unwind" fn cfg_encode_invalid_numbers(l: *mut lua_State) -> c_int {
    let cfg = arg_init(l, 1);
    enum_option(l, 1, &mut cfg.encode_invalid_numbers, true);
    1
}

unsafe extern "C-unwind" fn cfg_decode_invalid_numbers(l: *mut lua_State) -> c_int {
    let cfg = arg_init(l, 1);
    bool_option(l, 1, &mut cfg.decode_invalid_numbers);
    1
}

// ===== Encoding =====

unsafe extern "C-unwind" fn json_encode(l: *mut lua_State) -> c_int {
    if ffi::lua_gettop(l) != 1 {
        ffi::luaL_argerror(l, 1, c"expected 1 argument".as_ptr());
    }
    let cfg = *config(l);
    protect(l, || {
        let mut out = Output::for_vm(l);
        append_data(l, &cfg, 0, &mut out)?;
        out.into_lua(l)
    })
}

fn exception(tname: &str, reason: &str) -> Raise {
    Raise::Msg(format!("Cannot serialise {tname}: {reason}"))
}

/// The JSON escape of a byte, if it needs one (lua-cjson's `char2escape`).
fn escape(b: u8) -> Option<&'static [u8]> {
    const CONTROL: [&[u8]; 32] = [
        b"\\u0000", b"\\u0001", b"\\u0002", b"\\u0003", b"\\u0004", b"\\u0005", b"\\u0006",
        b"\\u0007", b"\\b", b"\\t", b"\\n", b"\\u000b", b"\\f", b"\\r", b"\\u000e", b"\\u000f",
        b"\\u0010", b"\\u0011", b"\\u0012", b"\\u0013", b"\\u0014", b"\\u0015", b"\\u0016",
        b"\\u0017", b"\\u0018", b"\\u0019", b"\\u001a", b"\\u001b", b"\\u001c", b"\\u001d",
        b"\\u001e", b"\\u001f",
    ];
    match b {
        0..=31 => Some(CONTROL[usize::from(b)]),
        b'"' => Some(b"\\\""),
        b'/' => Some(b"\\/"),
        b'\\' => Some(b"\\\\"),
        127 => Some(b"\\u007f"),
        _ => None,
    }
}

/// Append `s` as a JSON string literal with lua-cjson's escapes.
fn append_string(s: &[u8], out: &mut Output) -> Result<(), Raise> {
    out.push(b'"');
    out.extend_with(s, |piece, out| {
        out.reserve(piece.len());
        for &b in piece {
            match escape(b) {
                Some(e) => out.extend_from_slice(e),
                None => out.push(b),
            }
        }
    })?;
    out.push(b'"');
    Ok(())
}

unsafe fn append_number(
    l: *mut lua_State,
    cfg: &CjsonConfig,
    idx: c_int,
    out: &mut Output,
) -> Result<(), Raise> {
    let num = ffi::lua_tonumber(l, idx);
    let invalid = num.is_nan() || num.is_infinite();
    match cfg.encode_invalid_numbers {
        0 if invalid => return Err(exception(&type_name(l, idx), "must not be NaN or Inf")),
        1 if num.is_nan() => {
            out.extend_from_slice(b"nan");
            return Ok(());
        }
        2 if invalid => {
            out.extend_from_slice(b"null");
            return Ok(());
        }
        _ => {}
    }
    out.extend_from_slice(
        fmt_g(
            num,
            usize::try_from(cfg.encode_number_precision).unwrap_or(14),
        )
        .as_bytes(),
    );
    Ok(())
}

/// C's `(int)double` on x86-64 (out of range gives `INT_MIN`).
fn c_int_cast(x: f64) -> i32 {
    if x.is_nan() || x >= 2_147_483_648.0 || x <= -2_147_483_649.0 {
        i32::MIN
    } else {
        x as i32
    }
}

/// `lua_array_length`: the array size of the table on top, or None for an object.
unsafe fn array_length(l: *mut lua_State, cfg: &CjsonConfig) -> Result<Option<i32>, Raise> {
    let mut max: i32 = 0;
    let mut items: i32 = 0;
    ffi::lua_pushnil(l);
    while ffi::lua_next(l, -2) != 0 {
        if ffi::lua_type(l, -2) == ffi::LUA_TNUMBER {
            let k = ffi::lua_tonumber(l, -2);
            if k != 0.0 && k.floor() == k && k >= 1.0 {
                if k > f64::from(max) {
                    max = c_int_cast(k);
                }
                items = items.wrapping_add(1);
                ffi::lua_pop(l, 1);
                continue;
            }
        }
        ffi::lua_pop(l, 2);
        return Ok(None);
    }
    if cfg.sparse_ratio > 0 && max > items.wrapping_mul(cfg.sparse_ratio) && max > cfg.sparse_safe {
        if !cfg.sparse_convert {
            return Err(exception("table", "excessively sparse array"));
        }
        return Ok(None);
    }
    Ok(Some(max))
}

unsafe fn append_data(
    l: *mut lua_State,
    cfg: &CjsonConfig,
    depth: i32,
    out: &mut Output,
) -> Result<(), Raise> {
    match ffi::lua_type(l, -1) {
        ffi::LUA_TSTRING => append_string(string_at(l, -1).unwrap_or_default(), out)?,
        ffi::LUA_TNUMBER => append_number(l, cfg, -1, out)?,
        ffi::LUA_TBOOLEAN => {
            out.extend_from_slice(if ffi::lua_toboolean(l, -1) != 0 {
                b"true"
            } else {
                b"false"
            });
        }
        ffi::LUA_TTABLE => {
            let depth = depth.saturating_add(1);
            if depth > cfg.encode_max_depth || depth > MAX_NESTING || ffi::lua_checkstack(l, 3) == 0
            {
                return Err(Raise::Msg(format!(
                    "Cannot serialise, excessive nesting ({depth})"
                )));
            }
            boundary::deep(|| append_table(l, cfg, depth, out))?;
        }
        ffi::LUA_TNIL => out.extend_from_slice(b"null"),
        ffi::LUA_TLIGHTUSERDATA if ffi::lua_touserdata(l, -1).is_null() => {
            out.extend_from_slice(b"null")
        }
        _ => return Err(exception(&type_name(l, -1), "type not supported")),
    }
    Ok(())
}

/// An array or object for the table on top (nesting already checked).
unsafe fn append_table(
    l: *mut lua_State,
    cfg: &CjsonConfig,
    depth: i32,
    out: &mut Output,
) -> Result<(), Raise> {
    match array_length(l, cfg)? {
        Some(len) if len > 0 => {
            out.push(b'[');
            for i in 1..=len {
                if i > 1 {
                    out.push(b',');
                }
                ffi::lua_rawgeti_(l, -1, i);
                append_data(l, cfg, depth, out)?;
                ffi::lua_pop(l, 1);
                out.check()?;
            }
            out.push(b']');
            Ok(())
        }
        _ => append_object(l, cfg, depth, out),
    }
}

unsafe fn append_object(
    l: *mut lua_State,
    cfg: &CjsonConfig,
    depth: i32,
    out: &mut Output,
) -> Result<(), Raise> {
    out.push(b'{');
    let mut comma = false;
    ffi::lua_pushnil(l);
    while ffi::lua_next(l, -2) != 0 {
        if comma {
            out.push(b',');
        }
        comma = true;
        match ffi::lua_type(l, -2) {
            ffi::LUA_TNUMBER => {
                out.push(b'"');
                append_number(l, cfg, -2, out)?;
                out.extend_from_slice(b"\":");
            }
            ffi::LUA_TSTRING => {
                append_string(string_at(l, -2).unwrap_or_default(), out)?;
                out.push(b':');
            }
            _ => {
                return Err(exception(
                    &type_name(l, -2),
                    "table key must be a number or string",
                ))
            }
        }
        append_data(l, cfg, depth, out)?;
        ffi::lua_pop(l, 1);
        out.check()?;
    }
    out.push(b'}');
    Ok(())
}

// ===== Decoding =====

#[derive(Clone, Copy, PartialEq, Debug)]
enum Tok {
    ObjBegin,
    ObjEnd,
    ArrBegin,
    ArrEnd,
    Str,
    Number(f64),
    Boolean(bool),
    Null,
    Colon,
    Comma,
    End,
    Error(&'static str),
}

impl Tok {
    fn name(&self) -> &'static str {
        match self {
            Tok::ObjBegin => "T_OBJ_BEGIN",
            Tok::ObjEnd => "T_OBJ_END",
            Tok::ArrBegin => "T_ARR_BEGIN",
            Tok::ArrEnd => "T_ARR_END",
            Tok::Str => "T_STRING",
            Tok::Number(_) => "T_NUMBER",
            Tok::Boolean(_) => "T_BOOLEAN",
            Tok::Null => "T_NULL",
            Tok::Colon => "T_COLON",
            Tok::Comma => "T_COMMA",
            Tok::End => "T_END",
            Tok::Error(e) => e,
        }
    }
}

struct Parser<'a> {
    /// The input (Lua also keeps a NUL after it, which `at` reads as the end).
    data: &'a [u8],
    pos: usize,
    tmp: Vec<u8>,
    cfg: CjsonConfig,
    depth: i32,
}

impl Parser<'_> {
    fn at(&self, i: usize) -> u8 {
        self.data.get(i).copied().unwrap_or(0)
    }

    fn is_invalid_number(&self) -> bool {
        let mut p = self.pos;
        if self.at(p) == b'+' {
            return true;
        }
        if self.at(p) == b'-' {
            p += 1;
        }
        let c = self.at(p);
        if c == b'0' {
            let c2 = self.at(p + 1);
            return (c2 | 0x20) == b'x' || c2.is_ascii_digit();
        }
        if c <= b'9' {
            return false;
        }
        let word = |w: &[u8]| (0..3).all(|i| self.at(p + i).eq_ignore_ascii_case(&w[i]));
        word(b"inf") || word(b"nan")
    }

    fn number(&mut self) -> Tok {
        // C's strtod, as cjson uses (the input may hold NUL bytes: it stops there too).
        let number = crate::numbers::strtod(&self.data[self.pos..]);
        if number.len == 0 {
            Tok::Error("invalid number")
        } else {
            self.pos += number.len;
            Tok::Number(number.value)
        }
    }

    /// The next token and the index where it starts (for error messages).
    fn next(&mut self) -> (Tok, usize) {
        while matches!(self.at(self.pos), b' ' | b'\t' | b'\n' | b'\r') {
            self.pos += 1;
        }
        let start = self.pos;
        let ch = self.at(self.pos);
        let single = match ch {
            b'{' => Some(Tok::ObjBegin),
            b'}' => Some(Tok::ObjEnd),
            b'[' => Some(Tok::ArrBegin),
            b']' => Some(Tok::ArrEnd),
            b',' => Some(Tok::Comma),
            b':' => Some(Tok::Colon),
            _ => None,
        };
        if let Some(t) = single {
            self.pos += 1;
            return (t, start);
        }
        if ch == 0 {
            return (Tok::End, start);
        }
        let unknown = matches!(
            ch,
            b'f' | b'i' | b'I' | b'n' | b'N' | b't' | b'"' | b'+' | b'-' | b'0'..=b'9'
        );
        if !unknown {
            return (Tok::Error("invalid token"), start);
        }
        let starts = |w: &[u8]| {
            w.iter()
                .enumerate()
                .all(|(i, c)| self.at(self.pos + i) == *c)
        };
        if ch == b'"' {
            let (t, i) = self.string();
            return (t, if t == Tok::Str { start } else { i });
        } else if ch == b'-' || ch.is_ascii_digit() {
            if !self.cfg.decode_invalid_numbers && self.is_invalid_number() {
                return (Tok::Error("invalid number"), self.pos);
            }
            let t = self.number();
            return (
                t,
                if matches!(t, Tok::Error(_)) {
                    self.pos
                } else {
                    start
                },
            );
        } else if starts(b"true") {
            self.pos += 4;
            return (Tok::Boolean(true), start);
        } else if starts(b"false") {
            self.pos += 5;
            return (Tok::Boolean(false), start);
        } else if starts(b"null") {
            self.pos += 4;
            return (Tok::Null, start);
        } else if self.cfg.decode_invalid_numbers && self.is_invalid_number() {
            let t = self.number();
            return (
                t,
                if matches!(t, Tok::Error(_)) {
                    self.pos
                } else {
                    start
                },
            );
        }
        (Tok::Error("invalid token"), self.pos)
    }

    fn hex4(&self, at: usize) -> Option<u32> {
        let mut v = 0u32;
        for i in 0..4 {
            let d = (self.at(at + i) as char).to_digit(16)?;
            v = (v << 4) | d;
        }
        Some(v)
    }

    fn unicode_escape(&mut self) -> bool {
        let Some(mut cp) = self.hex4(self.pos + 2) else {
            return false;
        };
        let mut escape_len = 6;
        if cp & 0xF800 == 0xD800 {
            if cp & 0x400 != 0 {
                return false;
            }
            if self.at(self.pos + 6) != b'\\' || self.at(self.pos + 7) != b'u' {
                return false;
            }
            let Some(low) = self.hex4(self.pos + 8) else {
                return false;
            };
            if low & 0xFC00 != 0xDC00 {
                return false;
            }
            cp = (((cp & 0x3FF) << 10) | (low & 0x3FF)) + 0x10000;
            escape_len = 12;
        }
        let mut buf = [0u8; 4];
        let n = if cp <= 0x7F {
            buf[0] = cp as u8;
            1
        } else if cp <= 0x7FF {
            buf[0] = ((cp >> 6) | 0xC0) as u8;
            buf[1] = ((cp & 0x3F) | 0x80) as u8;
            2
        } else if cp <= 0xFFFF {
            buf[0] = ((cp >> 12) | 0xE0) as u8;
            buf[1] = (((cp >> 6) & 0x3F) | 0x80) as u8;
            buf[2] = ((cp & 0x3F) | 0x80) as u8;
            3
        } else {
            buf[0] = ((cp >> 18) | 0xF0) as u8;
            buf[1] = (((cp >> 12) & 0x3F) | 0x80) as u8;
            buf[2] = (((cp >> 6) & 0x3F) | 0x80) as u8;
            buf[3] = ((cp & 0x3F) | 0x80) as u8;
            4
        };
        self.tmp.extend_from_slice(&buf[..n]);
        self.pos += escape_len;
        true
    }

    fn string(&mut self) -> (Tok, usize) {
        self.pos += 1;
        self.tmp.clear();
        loop {
            let ch = self.at(self.pos);
            if ch == b'"' {
                break;
            }
            if ch == 0 {
                return (Tok::Error("unexpected end of string"), self.pos);
            }
            let mut out = ch;
            if ch == b'\\' {
                let esc = self.at(self.pos + 1);
                out = match esc {
                    b'"' => b'"',
                    b'\\' => b'\\',
                    b'/' => b'/',
                    b'b' => 0x08,
                    b't' => b'\t',
                    b'n' => b'\n',
                    b'f' => 0x0c,
                    b'r' => b'\r',
                    b'u' => {
                        if self.unicode_escape() {
                            continue;
                        }
                        return (Tok::Error("invalid unicode escape code"), self.pos);
                    }
                    _ => return (Tok::Error("invalid escape code"), self.pos),
                };
                self.pos += 1;
            }
            self.tmp.push(out);
            self.pos += 1;
        }
        self.pos += 1;
        (Tok::Str, 0)
    }

    fn parse_error(&self, expected: &str, tok: Tok, index: usize) -> Raise {
        Raise::Msg(format!(
            "Expected {} but found {} at character {}",
            expected,
            tok.name(),
            index + 1
        ))
    }

    unsafe fn descend(&mut self, l: *mut lua_State, slots: c_int) -> Result<(), Raise> {
        self.depth = self.depth.saturating_add(1);
        if self.depth <= self.cfg.decode_max_depth
            && self.depth <= MAX_NESTING
            && ffi::lua_checkstack(l, slots) != 0
        {
            return Ok(());
        }
        Err(Raise::Msg(format!(
            "Found too many nested data structures ({}) at character {}",
            self.depth, self.pos
        )))
    }

    unsafe fn value(&mut self, l: *mut lua_State, tok: Tok, index: usize) -> Result<(), Raise> {
        match tok {
            Tok::Str => {
                budget::lua_room(l)?;
                push_bytes(l, &self.tmp)
            }
            Tok::Number(n) => ffi::lua_pushnumber(l, n),
            Tok::Boolean(b) => ffi::lua_pushboolean(l, c_int::from(b)),
            Tok::ObjBegin => boundary::deep(|| self.object(l))?,
            Tok::ArrBegin => boundary::deep(|| self.array(l))?,
            Tok::Null => ffi::lua_pushlightuserdata(l, ptr::null_mut()),
            _ => return Err(self.parse_error("value", tok, index)),
        }
        Ok(())
    }

    unsafe fn object(&mut self, l: *mut lua_State) -> Result<(), Raise> {
        self.descend(l, 3)?;
        ffi::lua_newtable(l);
        let (mut tok, mut index) = self.next();
        if tok == Tok::ObjEnd {
            self.depth -= 1;
            return Ok(());
        }
        let mut count = 0usize;
        loop {
            if tok != Tok::Str {
                return Err(self.parse_error("object key string", tok, index));
            }
            count += 1;
            budget::table_room(l, count, budget::HASH_NODE)?;
            push_bytes(l, &self.tmp);
            let (t, i) = self.next();
            if t != Tok::Colon {
                return Err(self.parse_error("colon", t, i));
            }
            let (t, i) = self.next();
            self.value(l, t, i)?;
            ffi::lua_rawset(l, -3);
            let (t, i) = self.next();
            if t == Tok::ObjEnd {
                self.depth -= 1;
                return Ok(());
            }
            if t != Tok::Comma {
                return Err(self.parse_error("comma or object end", t, i));
            }
            (tok, index) = self.next();
        }
    }

    unsafe fn array(&mut self, l: *mut lua_State) -> Result<(), Raise> {
        self.descend(l, 2)?;
        ffi::lua_newtable(l);
        let (mut tok, mut index) = self.next();
        if tok == Tok::ArrEnd {
            self.depth -= 1;
            return Ok(());
        }
        let mut i: c_int = 1;
        loop {
            budget::table_room(l, i as usize, budget::ARRAY_SLOT)?;
            self.value(l, tok, index)?;
            ffi::lua_rawseti_(l, -2, i);
            i = i.wrapping_add(1);
            let (t, ti) = self.next();
            if t == Tok::ArrEnd {
                self.depth -= 1;
                return Ok(());
            }
            if t != Tok::Comma {
                return Err(self.parse_error("comma or array end", t, ti));
            }
            (tok, index) = self.next();
        }
    }
}

unsafe extern "C-unwind" fn json_decode(l: *mut lua_State) -> c_int {
    if ffi::lua_gettop(l) != 1 {
        ffi::luaL_argerror(l, 1, c"expected 1 argument".as_ptr());
    }
    let cfg = *config(l);
    let mut len = 0usize;
    let p = ffi::luaL_checklstring(l, 1, &mut len) as *const u8;
    if len >= 2 && (*p == 0 || *p.add(1) == 0) {
        return ffi::luaL_error(l, c"JSON parser does not support UTF-16 or UTF-32".as_ptr());
    }
    protect(l, || -> CResult {
        let data = std::slice::from_raw_parts(p, len);
        let mut parser = Parser {
            data,
            pos: 0,
            tmp: Vec::new(),
            cfg,
            depth: 0,
        };
        let (tok, index) = parser.next();
        parser.value(l, tok, index)?;
        let (tok, index) = parser.next();
        if tok != Tok::End {
            return Err(parser.parse_error("the end", tok, index));
        }
        Ok(1)
    })
}
