//! `struct`: Roberto Ierusalimschy's struct library as bundled with Redis
//! (`pack`, `unpack`, `size`), including its C conversion quirks for out-of-range
//! integers, so packed bytes match Redis exactly.

use std::ffi::c_int;

use super::budget::Output;
use super::lua::{
    f64_to_i64_c, f64_to_u64_c, ffi, lua_State, protect, push_bytes, set_fn, string_at, CResult,
    Raise,
};

const MAXINTSIZE: usize = 32;
/// `offsetof(struct { char c; double d; }, d)`.
const MAXALIGN: usize = 8;

/// Push the `struct` module table.
pub(crate) unsafe fn open(l: *mut lua_State) {
    ffi::lua_newtable(l);
    set_fn(l, -1, "pack", b_pack);
    set_fn(l, -1, "unpack", b_unpack);
    set_fn(l, -1, "size", b_size);
}

#[derive(Clone, Copy)]
struct Header {
    little: bool,
    align: usize,
}

struct Fmt<'a> {
    s: &'a [u8],
    pos: usize,
}

impl Fmt<'_> {
    fn next(&mut self) -> Option<u8> {
        let c = *self.s.get(self.pos)?;
        self.pos += 1;
        Some(c)
    }

    fn getnum(&mut self, default: usize) -> Result<usize, Raise> {
        if !self.s.get(self.pos).is_some_and(u8::is_ascii_digit) {
            return Ok(default);
        }
        let mut a: i64 = 0;
        while let Some(&d) = self.s.get(self.pos).filter(|c| c.is_ascii_digit()) {
            let d = i64::from(d - b'0');
            if a > i64::from(i32::MAX) / 10 || a * 10 > i64::from(i32::MAX) - d {
                return Err(Raise::Msg("integral size overflow".into()));
            }
            a = a * 10 + d;
            self.pos += 1;
        }
        Ok(a as usize)
    }

    fn optsize(&mut self, opt: u8) -> Result<usize, Raise> {
        Ok(match opt {
            b'B' | b'b' => 1,
            b'H' | b'h' => 2,
            b'L' | b'l' | b'T' | b'd' => 8,
            b'f' => 4,
            b'x' => 1,
            b'c' => self.getnum(1)?,
            b'i' | b'I' => {
                let sz = self.getnum(4)?;
                if sz > MAXINTSIZE {
                    return Err(Raise::Msg(format!(
                        "integral size {} is larger than limit of {}",
                        sz as i32, MAXINTSIZE
                    )));
                }
                sz
            }
            _ => 0,
        })
    }

    fn control(&mut self, opt: u8, h: &mut Header) -> Result<(), Raise> {
        match opt {
            b' ' => {}
            b'>' => h.little = false,
            b'<' => h.little = true,
            b'!' => {
                let a = self.getnum(MAXALIGN)?;
                if !a.is_power_of_two() {
                    return Err(Raise::Msg(format!(
                        "alignment {} is not a power of 2",
                        a as i32
                    )));
                }
                h.align = a;
            }
            _ => {
                return Err(Raise::Arg(
                    1,
                    format!("invalid format option '{}'", opt as char),
                ))
            }
        }
        Ok(())
    }
}

fn gettoalign(len: usize, h: &Header, opt: u8, size: usize) -> usize {
    if size == 0 || opt == b'c' {
        return 0;
    }
    let size = size.min(h.align);
    (size - (len & (size - 1))) & (size - 1)
}

fn default_header() -> Header {
    Header {
        little: cfg!(target_endian = "little"),
        align: 1,
    }
}

fn put_integer(n: f64, little: bool, size: usize, out: &mut Vec<u8>) {
    let mut value: u64 = if n < 0.0 {
        f64_to_i64_c(n) as u64
    } else {
        f64_to_u64_c(n)
    };
    let mut buf = [0u8; MAXINTSIZE];
    if little {
        for b in buf[..size].iter_mut() {
            *b = value as u8;
            value >>= 8;
        }
    } else {
        for b in buf[..size].iter_mut().rev() {
            *b = value as u8;
            value >>= 8;
        }
    }
    out.extend_from_slice(&buf[..size]);
}

fn get_integer(bytes: &[u8], little: bool, signed: bool) -> f64 {
    let mut v: u64 = 0;
    let mut push = |b: u8| v = (v << 8) | u64::from(b);
    if little {
        bytes.iter().rev().for_each(|&b| push(b));
    } else {
        bytes.iter().for_each(|&b| push(b));
    }
    if !signed {
        return v as f64;
    }
    // C shifts by (size*8 - 1) modulo 64 on x86.
    let shift = (bytes.len() * 8).wrapping_sub(1) & 63;
    let mask = u64::MAX << shift;
    if v & mask != 0 {
        v |= mask;
    }
    v as i64 as f64
}

unsafe fn check_number(l: *mut lua_State, arg: c_int) -> Result<f64, Raise> {
    if ffi::lua_isnumber(l, arg) == 0 {
        return Err(Raise::Type(arg, "number"));
    }
    Ok(ffi::lua_tonumber(l, arg))
}

unsafe fn check_string<'a>(l: *mut lua_State, arg: c_int) -> Result<&'a [u8], Raise> {
    if ffi::lua_isstring(l, arg) == 0 {
        return Err(Raise::Type(arg, "string"));
    }
    ffi::lua_tolstring(l, arg, std::ptr::null_mut());
    Ok(string_at(l, arg).unwrap_or_default())
}

unsafe extern "C-unwind" fn b_pack(l: *mut lua_State) -> c_int {
    ffi::luaL_checklstring(l, 1, std::ptr::null_mut());
    // The C version pushes this separator too: a missing first value reads as nil.
    ffi::lua_pushnil(l);
    protect(l, || -> CResult {
        let fmt = string_at(l, 1).unwrap_or_default().to_vec();
        let mut f = Fmt { s: &fmt, pos: 0 };
        let mut h = default_header();
        let mut arg: c_int = 2;
        let mut out = Output::for_vm(l);
        let mut total = 0usize;
        while let Some(opt) = f.next() {
            out.check()?;
            let mut size = f.optsize(opt)?;
            let toalign = gettoalign(total, &h, opt, size);
            total += toalign;
            let len = out.len();
            out.resize(len + toalign, 0);
            match opt {
                b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                    let n = check_number(l, arg)?;
                    arg += 1;
                    put_integer(n, h.little, size, &mut out);
                }
                b'x' => out.push(0),
                b'f' => {
                    let v = check_number(l, arg)? as f32;
                    arg += 1;
                    out.extend_from_slice(&if h.little {
                        v.to_le_bytes()
                    } else {
                        v.to_be_bytes()
                    });
                }
                b'd' => {
                    let v = check_number(l, arg)?;
                    arg += 1;
                    out.extend_from_slice(&if h.little {
                        v.to_le_bytes()
                    } else {
                        v.to_be_bytes()
                    });
                }
                b'c' | b's' => {
                    let s = check_string(l, arg)?;
                    arg += 1;
                    if size == 0 {
                        size = s.len();
                    }
                    if s.len() < size {
                        return Err(Raise::Arg(arg, "string too short".into()));
                    }
                    out.extend_checked(&s[..size])?;
                    if opt == b's' {
                        out.push(0);
                        size += 1;
                    }
                }
                _ => f.control(opt, &mut h)?,
            }
            total += size;
        }
        out.into_lua(l)
    })
}

unsafe extern "C-unwind" fn b_unpack(l: *mut lua_State) -> c_int {
    ffi::luaL_checklstring(l, 1, std::ptr::null_mut());
    ffi::luaL_checklstring(l, 2, std::ptr::null_mut());
    let start = ffi::luaL_optinteger(l, 3, 1);
    protect(l, || -> CResult {
        let fmt = string_at(l, 1).unwrap_or_default().to_vec();
        let data = string_at(l, 2).unwrap_or_default();
        let ld = data.len();
        let Some(pos0) = start.checked_sub(1).filter(|p| *p >= 0) else {
            return Err(Raise::Arg(3, "offset must be 1 or greater".into()));
        };
        let mut pos = usize::try_from(pos0).unwrap_or(usize::MAX);
        let mut f = Fmt { s: &fmt, pos: 0 };
        let mut h = default_header();
        let mut n: c_int = 0;
        while let Some(opt) = f.next() {
            let mut size = f.optsize(opt)?;
            pos = pos.saturating_add(gettoalign(pos, &h, opt, size));
            if size > ld || pos > ld - size {
                return Err(Raise::Arg(2, "data string too short".into()));
            }
            if ffi::lua_checkstack(l, 2) == 0 {
                return Err(Raise::Msg("stack overflow (too many results)".into()));
            }
            match opt {
                b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                    let v = get_integer(&data[pos..pos + size], h.little, opt.is_ascii_lowercase());
                    ffi::lua_pushnumber(l, v);
                    n += 1;
                }
                b'x' => {}
                b'f' => {
                    let b: [u8; 4] = data[pos..pos + 4].try_into().unwrap_or_default();
                    let v = if h.little {
                        f32::from_le_bytes(b)
                    } else {
                        f32::from_be_bytes(b)
                    };
                    ffi::lua_pushnumber(l, f64::from(v));
                    n += 1;
                }
                b'd' => {
                    let b: [u8; 8] = data[pos..pos + 8].try_into().unwrap_or_default();
                    let v = if h.little {
                        f64::from_le_bytes(b)
                    } else {
                        f64::from_be_bytes(b)
                    };
                    ffi::lua_pushnumber(l, v);
                    n += 1;
                }
                b'c' => {
                    if size == 0 {
                        if n == 0 || ffi::lua_isnumber(l, -1) == 0 {
                            return Err(Raise::Msg("format 'c0' needs a previous size".into()));
                        }
                        size = f64_to_u64_c(ffi::lua_tonumber(l, -1)) as usize;
                        ffi::lua_pop(l, 1);
                        n -= 1;
                        if size > ld || pos > ld - size {
                            return Err(Raise::Arg(2, "data string too short".into()));
                        }
                    }
                    push_bytes(l, &data[pos..pos + size]);
                    n += 1;
                }
                b's' => {
                    let Some(e) = data[pos..].iter().position(|&b| b == 0) else {
                        return Err(Raise::Msg("unfinished string in data".into()));
                    };
                    size = e + 1;
                    push_bytes(l, &data[pos..pos + e]);
                    n += 1;
                }
                _ => f.control(opt, &mut h)?,
            }
            pos = pos.saturating_add(size);
        }
        ffi::lua_pushinteger(l, (pos as i64).wrapping_add(1));
        Ok(n + 1)
    })
}

unsafe extern "C-unwind" fn b_size(l: *mut lua_State) -> c_int {
    ffi::luaL_checklstring(l, 1, std::ptr::null_mut());
    protect(l, || -> CResult {
        let fmt = string_at(l, 1).unwrap_or_default().to_vec();
        let mut f = Fmt { s: &fmt, pos: 0 };
        let mut h = default_header();
        let mut pos = 0usize;
        while let Some(opt) = f.next() {
            let size = f.optsize(opt)?;
            pos += gettoalign(pos, &h, opt, size);
            if opt == b's' {
                return Err(Raise::Arg(1, "option 's' has no fixed size".into()));
            } else if opt == b'c' && size == 0 {
                return Err(Raise::Arg(1, "option 'c0' has no fixed size".into()));
            }
            if !opt.is_ascii_alphanumeric() {
                f.control(opt, &mut h)?;
            }
            pos += size;
        }
        ffi::lua_pushinteger(l, pos as i64);
        Ok(1)
    })
}
