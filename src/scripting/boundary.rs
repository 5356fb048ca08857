//! Guards where a script-supplied count or size reaches the Lua C API or native
//! recursion: the places where stock Lua 5.1 (or a careless Rust port of a C library)
//! would write past the Lua stack or overflow the thread's native stack instead of
//! raising a Lua error.
//!
//! - `unpack` replaces Lua 5.1's `luaB_unpack`, whose `n = e - i + 1` overflows a
//!   signed int (undefined behaviour: the compiler may drop the `n <= 0` check, and
//!   `unpack({}, -2^31, 0)` then writes two billion values past the stack). This is
//!   Redis's fix for CVE-2025-46817: the count is computed unsigned and checked
//!   against `INT_MAX` before `lua_checkstack`. Results and error texts are Lua's.
//! - `string.rep` of an empty string answers at once, and `table.insert` shifts a range of
//!   65,536 slots or more by the keys that hold values ([`shift_up_sparse`]): both used to
//!   loop up to two billion times in C, where no script kill reaches.
//! - `string.find`/`match`/`gmatch`/`gsub` recurse in C once per pattern item with a
//!   quantifier or capture (Lua 5.1's `match` has no depth limit; 5.2 added one). The
//!   wrappers refuse a pattern that could recurse deeper than
//!   [`MAX_PATTERN_RECURSION`] with Lua 5.2's message, "pattern too complex", before
//!   calling the original function (kept as the closure's upvalue).
//! - [`deep`] runs one level of a recursive Rust codec (cjson, cmsgpack, reply
//!   conversion) with enough native stack, moving to a fresh heap-allocated segment
//!   (the `stacker` crate, which rustc uses for the same purpose) when the thread's
//!   own stack runs low. Their depth limits are then the ones Redis has (Lua stack
//!   slots, `encode_max_depth`), whatever thread a script runs on. Only code that
//!   cannot raise a Lua error may run inside (a `longjmp` must not cross the switch):
//!   the codecs run inside `lua::protect`, relaxed, and return errors as values.

use std::ffi::c_int;

use super::lua::{ffi, lua_State, raw_get_str, raw_set_str};

/// Deepest recursion a string pattern may need (counted conservatively: every `(`,
/// `)`, `?`, `*`, `+` and `-` of the pattern). Lua's own limit since 5.2 is 200;
/// Redis's Lua 5.1 has none and crashes on the deepest ones. Measured: 10,000 levels
/// of `a?` fit in a 2 MiB worker stack in a debug build.
pub(crate) const MAX_PATTERN_RECURSION: usize = 5000;

/// Native stack kept free before a recursive codec level runs.
const RED_ZONE: usize = 128 * 1024;
/// Size of each extra stack segment when the thread's stack runs low.
const SEGMENT: usize = 2 * 1024 * 1024;

/// Run one level of a recursive codec with at least [`RED_ZONE`] bytes of native stack.
/// `f` must not raise a Lua error (see the module docs).
#[inline]
pub(crate) fn deep<R>(f: impl FnOnce() -> R) -> R {
    stacker::maybe_grow(RED_ZONE, SEGMENT, f)
}

/// Replace `unpack` and wrap the pattern functions of the string library in the
/// globals table at `storage` (before the sandbox makes them read-only).
///
/// # Safety
/// `l` must be a VM being built, relaxed (nothing here may fail).
pub(crate) unsafe fn install(l: *mut lua_State, storage: c_int) {
    ffi::lua_pushcclosure(l, unpack, 0);
    raw_set_str(l, storage, "unpack");
    raw_get_str(l, storage, "string");
    let string = ffi::lua_gettop(l);
    raw_get_str(l, string, "rep");
    ffi::lua_pushcclosure(l, string_rep, 1);
    raw_set_str(l, string, "rep");
    for (name, plain_arg) in [("find", 4), ("match", 0), ("gmatch", 0), ("gsub", 0)] {
        raw_get_str(l, string, name);
        ffi::lua_pushinteger(l, plain_arg);
        ffi::lua_pushcclosure(l, guarded_pattern, 2);
        raw_set_str(l, string, name);
    }
    ffi::lua_settop(l, string - 1);
}

/// `unpack(list [, i [, j]])`: Lua 5.1's `luaB_unpack` with Redis's fix for
/// CVE-2025-46817.
unsafe extern "C-unwind" fn unpack(l: *mut lua_State) -> c_int {
    ffi::luaL_checktype(l, 1, ffi::LUA_TTABLE);
    // `luaL_optint` / `luaL_checkint` are `(int)` casts of the lua_Integer, as here.
    let i = ffi::luaL_optinteger(l, 2, 1) as c_int;
    let e = if ffi::lua_isnoneornil(l, 3) != 0 {
        ffi::lua_objlen(l, 1) as c_int
    } else {
        ffi::luaL_checkinteger(l, 3) as c_int
    };
    if i > e {
        return 0;
    }
    // The number of elements minus one, computed without overflow.
    let n = (e as u32).wrapping_sub(i as u32);
    if n >= i32::MAX as u32 || ffi::lua_checkstack(l, (n + 1) as c_int) == 0 {
        return ffi::luaL_error(l, c"too many results to unpack".as_ptr());
    }
    let mut k = i;
    ffi::lua_rawgeti_(l, 1, k);
    while k < e {
        k += 1;
        ffi::lua_rawgeti_(l, 1, k);
    }
    (n + 1) as c_int
}

/// `string.rep(s, n)`: an empty string or a count below one is answered at once; Lua's
/// own loop would append nothing `n` times (two billion iterations, seconds in which a
/// script cannot be killed). Everything else goes to the original (upvalue 1).
unsafe extern "C-unwind" fn string_rep(l: *mut lua_State) -> c_int {
    let mut len = 0usize;
    ffi::luaL_checklstring(l, 1, &mut len);
    let n = ffi::luaL_checkinteger(l, 2) as c_int;
    if len == 0 || n <= 0 {
        ffi::lua_pushlstring_(l, c"".as_ptr(), 0);
        return 1;
    }
    match ffi::lua_tocfunction(l, ffi::lua_upvalueindex(1)) {
        Some(original) => original(l),
        None => ffi::luaL_error(l, c"string library function is unavailable".as_ptr()),
    }
}

/// `table.insert(t, pos, v)` shifts `t[pos..e-1]` up by one; from this many slots on, the
/// shift goes through [`shift_up_sparse`].
pub(crate) const SPARSE_SHIFT: i64 = 1 << 16;

/// `t[i] = t[i-1]` for every `pos < i <= e`, for the (unprotected) table at index 1,
/// touching only the keys that hold values. Lua's loop does the same one slot at a time:
/// `table.insert(t, -2^31, v)` took over a minute of C code that a script kill cannot
/// interrupt. The table's contents end up the same; only the order `pairs` visits a table
/// changed this way may differ from Redis's, since Lua's loop also leaves dead keys behind.
///
/// # Safety
/// Called from `table.insert` with the table at index 1, after the read-only check.
pub(crate) unsafe fn shift_up_sparse(l: *mut lua_State, pos: i64, e: i64) {
    super::lua::protect(l, || {
        let mut keys: Vec<i64> = Vec::new();
        ffi::lua_pushnil(l);
        while ffi::lua_next(l, 1) != 0 {
            ffi::lua_pop(l, 1);
            if ffi::lua_type(l, -1) == ffi::LUA_TNUMBER {
                let k = ffi::lua_tonumber(l, -1);
                if k.fract() == 0.0 && k >= pos as f64 && k <= (e - 1) as f64 {
                    keys.push(k as i64);
                }
            }
        }
        // Each move may add one key to the table.
        super::budget::fits(l, keys.len().saturating_mul(2 * super::budget::HASH_NODE))?;
        keys.sort_unstable_by(|a, b| b.cmp(a));
        for &k in &keys {
            ffi::lua_rawgeti_(l, 1, k as c_int);
            ffi::lua_rawseti_(l, 1, (k + 1) as c_int);
        }
        // A slot whose lower neighbour held nothing receives nil.
        for (i, &k) in keys.iter().enumerate() {
            if k > pos && keys.get(i + 1) != Some(&(k - 1)) {
                ffi::lua_pushnil(l);
                ffi::lua_rawseti_(l, 1, k as c_int);
            }
        }
        Ok(0)
    });
}

/// The pattern functions: refuse a pattern that could recurse too deep, then call the
/// original (upvalue 1) in this frame, so its results and messages are unchanged.
/// Upvalue 2 is the position of `find`'s `plain` argument (0: none).
unsafe extern "C-unwind" fn guarded_pattern(l: *mut lua_State) -> c_int {
    let plain_arg = ffi::lua_tointeger(l, ffi::lua_upvalueindex(2)) as c_int;
    let plain = plain_arg > 0 && ffi::lua_toboolean(l, plain_arg) != 0;
    if !plain && ffi::lua_type(l, 2) == ffi::LUA_TSTRING {
        let mut len = 0usize;
        let p = ffi::lua_tolstring(l, 2, &mut len);
        // SAFETY: the string stays on the stack while it is read.
        let pattern = std::slice::from_raw_parts(p.cast::<u8>(), len);
        if pattern_recursion(pattern) > MAX_PATTERN_RECURSION {
            return ffi::luaL_error(l, c"pattern too complex".as_ptr());
        }
    }
    match ffi::lua_tocfunction(l, ffi::lua_upvalueindex(1)) {
        Some(original) => original(l),
        None => ffi::luaL_error(l, c"string library function is unavailable".as_ptr()),
    }
}

/// An upper bound of the C recursion depth of Lua 5.1's `match` for `pattern`: it
/// recurses once per capture bracket and once per item with a quantifier.
pub(crate) fn pattern_recursion(pattern: &[u8]) -> usize {
    pattern
        .iter()
        .filter(|&&b| matches!(b, b'(' | b')' | b'?' | b'*' | b'+' | b'-'))
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_recursion_counts_quantifiers_and_captures() {
        assert_eq!(pattern_recursion(b"abc"), 0);
        assert_eq!(pattern_recursion(b"(a?)b*c+d-"), 6);
        assert_eq!(pattern_recursion(&b"a?".repeat(100)), 100);
    }

    #[test]
    fn deep_recursion_survives_a_small_thread_stack() {
        fn depth(n: u32) -> u32 {
            if n == 0 {
                return 0;
            }
            // A frame that cannot be optimised away.
            let pad = std::hint::black_box([n as u8; 512]);
            deep(|| depth(n - 1)) + u32::from(pad[511] == n as u8)
        }
        let out = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(|| depth(20_000))
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(out, 20_000);
    }
}
