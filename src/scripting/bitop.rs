//! `bit`: LuaBitOp 1.0.2 as bundled with Redis — 32-bit operations on numbers
//! normalised with the `2^52 + 2^51` trick (so `tobit(1.5) == 2`, like Redis).

use std::ffi::c_int;

use super::lua::{ffi, lua_State, set_fn};

/// Push the `bit` module table.
pub(crate) unsafe fn open(l: *mut lua_State) {
    ffi::lua_newtable(l);
    let funcs: [(&str, ffi::lua_CFunction); 12] = [
        ("tobit", bit_tobit),
        ("bnot", bit_bnot),
        ("band", bit_band),
        ("bor", bit_bor),
        ("bxor", bit_bxor),
        ("lshift", bit_lshift),
        ("rshift", bit_rshift),
        ("arshift", bit_arshift),
        ("rol", bit_rol),
        ("ror", bit_ror),
        ("bswap", bit_bswap),
        ("tohex", bit_tohex),
    ];
    for (name, f) in funcs {
        set_fn(l, -1, name, f);
    }
}

/// The low 32 bits of `x + 2^52 + 2^51` (round-to-nearest-even to an integer).
pub(crate) fn tobit(x: f64) -> u32 {
    (x + 6_755_399_441_055_744.0).to_bits() as u32
}

/// `barg`: a number argument as 32 bits; "number expected" when it is not one.
unsafe fn barg(l: *mut lua_State, idx: c_int) -> u32 {
    let b = tobit(ffi::lua_tonumber(l, idx));
    if b == 0 && ffi::lua_isnumber(l, idx) == 0 {
        ffi::luaL_typerror(l, idx, c"number".as_ptr());
    }
    b
}

unsafe fn bret(l: *mut lua_State, b: u32) -> c_int {
    ffi::lua_pushnumber(l, f64::from(b as i32));
    1
}

unsafe extern "C-unwind" fn bit_tobit(l: *mut lua_State) -> c_int {
    bret(l, barg(l, 1))
}

unsafe extern "C-unwind" fn bit_bnot(l: *mut lua_State) -> c_int {
    bret(l, !barg(l, 1))
}

unsafe fn fold(l: *mut lua_State, op: fn(u32, u32) -> u32) -> c_int {
    let mut b = barg(l, 1);
    let mut i = ffi::lua_gettop(l);
    while i > 1 {
        b = op(b, barg(l, i));
        i -= 1;
    }
    bret(l, b)
}

unsafe extern "C-unwind" fn bit_band(l: *mut lua_State) -> c_int {
    fold(l, |a, b| a & b)
}

unsafe extern "C-unwind" fn bit_bor(l: *mut lua_State) -> c_int {
    fold(l, |a, b| a | b)
}

unsafe extern "C-unwind" fn bit_bxor(l: *mut lua_State) -> c_int {
    fold(l, |a, b| a ^ b)
}

unsafe fn shift(l: *mut lua_State, op: fn(u32, u32) -> u32) -> c_int {
    let b = barg(l, 1);
    let n = barg(l, 2) & 31;
    bret(l, op(b, n))
}

unsafe extern "C-unwind" fn bit_lshift(l: *mut lua_State) -> c_int {
    shift(l, |b, n| b << n)
}

unsafe extern "C-unwind" fn bit_rshift(l: *mut lua_State) -> c_int {
    shift(l, |b, n| b >> n)
}

unsafe extern "C-unwind" fn bit_arshift(l: *mut lua_State) -> c_int {
    shift(l, |b, n| ((b as i32) >> n) as u32)
}

unsafe extern "C-unwind" fn bit_rol(l: *mut lua_State) -> c_int {
    shift(l, |b, n| b.rotate_left(n))
}

unsafe extern "C-unwind" fn bit_ror(l: *mut lua_State) -> c_int {
    shift(l, |b, n| b.rotate_right(n))
}

unsafe extern "C-unwind" fn bit_bswap(l: *mut lua_State) -> c_int {
    bret(l, barg(l, 1).swap_bytes())
}

unsafe extern "C-unwind" fn bit_tohex(l: *mut lua_State) -> c_int {
    let mut b = barg(l, 1);
    let mut n: i32 = if ffi::lua_type(l, 2) == ffi::LUA_TNONE {
        8
    } else {
        barg(l, 2) as i32
    };
    if n == i32::MIN {
        n = i32::MIN + 1;
    }
    let digits: &[u8; 16] = if n < 0 {
        n = n.wrapping_neg();
        b"0123456789ABCDEF"
    } else {
        b"0123456789abcdef"
    };
    let n = n.clamp(0, 8) as usize;
    let mut buf = [0u8; 8];
    for slot in buf[..n].iter_mut().rev() {
        *slot = digits[(b & 15) as usize];
        b >>= 4;
    }
    ffi::lua_pushlstring_(l, buf.as_ptr() as *const std::ffi::c_char, n);
    1
}
