//! The sandboxed global environment, equivalent to Redis 7's protected globals.
//!
//! Redis patches Lua with read-only tables; stock Lua 5.1 has none, so the same
//! behaviour is built from proxies: every library table a script can see (and
//! the globals table itself) is an empty table whose metatable reads through to
//! the real table and rejects writes with "Attempt to modify a readonly table".
//! The builtins that bypass metatables (`rawset`, `rawget`, `next`, `pairs`,
//! `getmetatable`, `setmetatable`, `table.insert`, `table.foreach`) are replaced by
//! versions that see through proxies and refuse to write protected tables. Missing
//! globals raise "Script attempted to access nonexistent global variable". The
//! loaders never undump bytecode, `dofile`/`loadfile`/`print`/`getfenv`/`setfenv`/
//! `newproxy`, `io`, `debug` and `package` do not exist, and `os` only has a
//! deterministic `clock`.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::ptr;

use super::lua::{
    abs_index, ffi, load_text, lua_State, protect, push_str, raw_get_str, raw_set_str,
    registry_get, registry_set, set_fn, VmShared, HOOK_INTERVAL,
};
use super::{bitop, boundary, cjson, cmsgpack, rand48, structlib};

/// Registry key of the table mapping protected tables to their targets (proxies)
/// or `true` (read-only real tables).
const PROTECTED: &str = "tollgate.protected";
/// Registry key of the real globals table (what the proxies read from).
pub(crate) const STORAGE: &str = "tollgate.globals";
/// Registry key of the metatable of the environment proxy (its `__index` is
/// switched while a function library loads).
pub(crate) const ENV_META: &str = "tollgate.envmeta";

/// Marks a metatable whose owner must look metatable-less to `getmetatable`.
static HIDDEN: u8 = 0;

fn hidden_ptr() -> *mut c_void {
    &HIDDEN as *const u8 as *mut c_void
}

/// The library tables that become read-only proxies in the globals.
const LIBRARIES: [&str; 10] = [
    "string",
    "table",
    "math",
    "coroutine",
    "cjson",
    "struct",
    "cmsgpack",
    "bit",
    "os",
    "redis",
];

/// Builtins removed from the base library (files, printing, environments, userdata).
const REMOVED: [&str; 6] = [
    "dofile", "loadfile", "print", "getfenv", "setfenv", "newproxy",
];

/// Build the sandboxed globals of a fresh state. `redis` must be a table on top of
/// the stack (it is consumed). Must run relaxed (engine-side, no protected call).
pub(crate) unsafe fn build(l: *mut lua_State) {
    let redis = abs_index(l, -1);
    ffi::lua_newtable(l);
    registry_set(l, PROTECTED);

    // The real globals: the state's original globals table.
    ffi::lua_pushvalue(l, ffi::LUA_GLOBALSINDEX);
    let storage = ffi::lua_gettop(l);
    open_lib(l, ffi::luaopen_base, "");
    open_lib(l, ffi::luaopen_table, "table");
    open_lib(l, ffi::luaopen_string, "string");
    open_lib(l, ffi::luaopen_math, "math");
    for name in REMOVED {
        ffi::lua_pushnil(l);
        raw_set_str(l, storage, name);
    }
    boundary::install(l, storage);
    cjson::open(l);
    raw_set_str(l, storage, "cjson");
    structlib::open(l);
    raw_set_str(l, storage, "struct");
    cmsgpack::open(l);
    raw_set_str(l, storage, "cmsgpack");
    bitop::open(l);
    raw_set_str(l, storage, "bit");
    ffi::lua_newtable(l);
    set_fn(l, -1, "clock", os_clock);
    raw_set_str(l, storage, "os");
    ffi::lua_pushvalue(l, redis);
    raw_set_str(l, storage, "redis");

    set_fn(l, storage, "pcall", redis_pcall);
    raw_get_str(l, storage, "tonumber");
    ffi::lua_pushcclosure(l, tonumber, 1);
    raw_set_str(l, storage, "tonumber");
    set_fn(l, storage, "load", lua_load_fn);
    set_fn(l, storage, "loadstring", lua_loadstring);
    // Builtins that must see through proxies keep the protected-table index as
    // their first upvalue (no registry lookup on every `next`).
    for (name, f) in [
        ("rawset", lua_rawset as ffi::lua_CFunction),
        ("rawget", lua_rawget),
        ("next", lua_next),
        ("getmetatable", lua_getmetatable),
        ("setmetatable", lua_setmetatable),
    ] {
        push_guarded(l, f);
        raw_set_str(l, storage, name);
    }
    registry_get(l, PROTECTED);
    raw_get_str(l, storage, "next");
    ffi::lua_pushcclosure(l, lua_pairs, 2);
    raw_set_str(l, storage, "pairs");
    raw_get_str(l, storage, "table");
    push_guarded(l, table_insert);
    raw_set_str(l, -2, "insert");
    push_guarded(l, table_foreach);
    raw_set_str(l, -2, "foreach");
    ffi::lua_pop(l, 1);
    raw_get_str(l, storage, "math");
    set_fn(l, -1, "random", rand48::math_random);
    set_fn(l, -1, "randomseed", rand48::math_randomseed);
    ffi::lua_pop(l, 1);

    // Library tables become proxies; the string metatable reads through the proxy.
    for name in LIBRARIES {
        raw_get_str(l, storage, name);
        push_proxy(l, -1, None);
        raw_set_str(l, storage, name);
        ffi::lua_pop(l, 1);
    }
    push_str(l, "");
    if ffi::lua_getmetatable(l, -1) != 0 {
        let sm = abs_index(l, -1);
        raw_get_str(l, storage, "string");
        raw_set_str(l, sm, "__index");
        push_proxy(l, sm, None);
        raw_set_str(l, sm, "__metatable");
        mark_readonly(l, sm);
        ffi::lua_pop(l, 1);
    }
    ffi::lua_pop(l, 1);

    // Missing globals raise an error.
    ffi::lua_newtable(l);
    set_fn(l, -1, "__index", nonexistent_global);
    mark_readonly(l, -1);
    ffi::lua_setmetatable(l, storage);
    mark_readonly(l, storage);

    // The environment scripts run in: an empty read-only proxy of the storage.
    push_proxy(l, storage, Some(nonexistent_global));
    ffi::lua_pushvalue(l, -1);
    raw_set_str(l, storage, "_G");
    if ffi::lua_getmetatable(l, -1) != 0 {
        registry_set(l, ENV_META);
    }
    ffi::lua_replace(l, ffi::LUA_GLOBALSINDEX);
    ffi::lua_pushvalue(l, storage);
    registry_set(l, STORAGE);
    ffi::lua_settop(l, redis - 1);
}

/// `tonumber` with a shortcut for its most common use in limiter scripts,
/// `tonumber(ARGV[i])` on a plain decimal integer: such a string is read directly
/// instead of through `strtod` (twice: Lua's `tonumber` checks, then converts). The
/// value is the one `strtod` gives, since at most 15 digits are exact in a double.
/// Everything else (bases, spaces, signs other than `-`, fractions, exponents, hex,
/// errors) goes to Lua's own `tonumber`, the closure's upvalue, called in this frame
/// so its error messages are unchanged.
unsafe extern "C-unwind" fn tonumber(l: *mut lua_State) -> c_int {
    if ffi::lua_gettop(l) == 1 {
        match ffi::lua_type(l, 1) {
            ffi::LUA_TNUMBER => {
                ffi::lua_pushvalue(l, 1);
                return 1;
            }
            ffi::LUA_TSTRING => {
                let mut len = 0usize;
                let p = ffi::lua_tolstring(l, 1, &mut len);
                // SAFETY: Lua strings stay alive while on the stack; `len` is theirs.
                let s = std::slice::from_raw_parts(p.cast::<u8>(), len);
                if let Some(n) = decimal_integer(s) {
                    ffi::lua_pushnumber(l, n);
                    return 1;
                }
            }
            _ => {}
        }
    }
    match ffi::lua_tocfunction(l, ffi::lua_upvalueindex(1)) {
        Some(original) => original(l),
        None => ffi::luaL_error(l, c"tonumber is unavailable".as_ptr()),
    }
}

/// `-?[0-9]{1,15}` as the double `strtod` would give, else `None`.
pub(crate) fn decimal_integer(s: &[u8]) -> Option<f64> {
    let (negative, digits) = match s {
        [b'-', rest @ ..] => (true, rest),
        _ => (false, s),
    };
    if digits.is_empty() || digits.len() > 15 {
        return None;
    }
    let mut n: u64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return None;
        }
        n = n * 10 + u64::from(b - b'0');
    }
    // Exact: below 10^15 < 2^53. "-0" gives -0.0, like strtod.
    let v = n as f64;
    Some(if negative { -v } else { v })
}

/// Push `f` as a closure over the protected-table index.
unsafe fn push_guarded(l: *mut lua_State, f: ffi::lua_CFunction) {
    registry_get(l, PROTECTED);
    ffi::lua_pushcclosure(l, f, 1);
}

unsafe fn open_lib(
    l: *mut lua_State,
    f: unsafe extern "C-unwind" fn(*mut lua_State) -> c_int,
    name: &str,
) {
    ffi::lua_pushcclosure(l, f, 0);
    push_str(l, name);
    ffi::lua_call(l, 1, 0);
}

/// Register the table at `idx` as read-only (writes through our builtins fail).
pub(crate) unsafe fn mark_readonly(l: *mut lua_State, idx: c_int) {
    let t = abs_index(l, idx);
    registry_get(l, PROTECTED);
    ffi::lua_pushvalue(l, t);
    ffi::lua_pushboolean(l, 1);
    ffi::lua_rawset(l, -3);
    ffi::lua_pop(l, 1);
}

/// Push a read-only proxy of the table at `idx`. `getmetatable(proxy)` answers
/// nil, or (with `public_index`) a read-only table whose `__index` is that function,
/// like Redis's globals metatable.
pub(crate) unsafe fn push_proxy(
    l: *mut lua_State,
    idx: c_int,
    public_index: Option<ffi::lua_CFunction>,
) {
    let target = abs_index(l, idx);
    ffi::lua_newtable(l);
    let proxy = ffi::lua_gettop(l);
    ffi::lua_createtable(l, 0, 3);
    let meta = ffi::lua_gettop(l);
    ffi::lua_pushvalue(l, target);
    raw_set_str(l, meta, "__index");
    set_fn(l, meta, "__newindex", readonly_newindex);
    match public_index {
        Some(f) => {
            ffi::lua_newtable(l);
            set_fn(l, -1, "__index", f);
            push_proxy(l, -1, None);
            ffi::lua_remove(l, -2);
        }
        None => ffi::lua_pushlightuserdata(l, hidden_ptr()),
    }
    raw_set_str(l, meta, "__metatable");
    ffi::lua_setmetatable(l, proxy);
    registry_get(l, PROTECTED);
    ffi::lua_pushvalue(l, proxy);
    ffi::lua_pushvalue(l, target);
    ffi::lua_rawset(l, -3);
    ffi::lua_pop(l, 1);
    mark_readonly(l, target);
    ffi::lua_getmetatable(l, proxy);
    mark_readonly(l, -1);
    ffi::lua_pop(l, 1);
}

/// Whether the table at `idx` is protected; if it is a proxy its target is pushed
/// and `Proxy` returned.
#[derive(PartialEq, Eq)]
enum Protection {
    None,
    Readonly,
    Proxy,
}

/// Only for builtins created by `push_guarded` (upvalue 1 is the index).
unsafe fn protection(l: *mut lua_State, idx: c_int) -> Protection {
    let t = abs_index(l, idx);
    ffi::lua_pushvalue(l, ffi::lua_upvalueindex(1));
    ffi::lua_pushvalue(l, t);
    ffi::lua_rawget_(l, -2);
    let kind = match ffi::lua_type(l, -1) {
        ffi::LUA_TTABLE => Protection::Proxy,
        ffi::LUA_TNIL => Protection::None,
        _ => Protection::Readonly,
    };
    if kind == Protection::Proxy {
        ffi::lua_remove(l, -2);
    } else {
        ffi::lua_pop(l, 2);
    }
    kind
}

/// Replace the proxy at `idx` by its target (no-op for other values).
unsafe fn resolve_proxy(l: *mut lua_State, idx: c_int) {
    let t = abs_index(l, idx);
    if ffi::lua_type(l, t) == ffi::LUA_TTABLE && protection(l, t) == Protection::Proxy {
        ffi::lua_replace(l, t);
    }
}

unsafe fn is_protected(l: *mut lua_State, idx: c_int) -> bool {
    match protection(l, idx) {
        Protection::None => false,
        Protection::Readonly => true,
        Protection::Proxy => {
            ffi::lua_pop(l, 1);
            true
        }
    }
}

const READONLY_MSG: &CStr = c"Attempt to modify a readonly table";

unsafe fn raise_readonly(l: *mut lua_State) -> ! {
    ffi::lua_pushstring_(l, READONLY_MSG.as_ptr());
    ffi::lua_error(l)
}

unsafe extern "C-unwind" fn readonly_newindex(l: *mut lua_State) -> c_int {
    ffi::luaL_error(l, READONLY_MSG.as_ptr())
}

/// `__index` of the globals: Redis's `luaProtectedTableError`.
pub(crate) unsafe extern "C-unwind" fn nonexistent_global(l: *mut lua_State) -> c_int {
    if ffi::lua_gettop(l) != 2 {
        tracing::warn!("malicious code trying to call luaProtectedTableError with wrong arguments");
        return ffi::luaL_error(
            l,
            c"Wrong number of arguments to luaProtectedTableError".as_ptr(),
        );
    }
    if ffi::lua_isstring(l, -1) == 0 && ffi::lua_isnumber(l, -1) == 0 {
        return ffi::luaL_error(
            l,
            c"Second argument to luaProtectedTableError must be a string or number".as_ptr(),
        );
    }
    let name = ffi::lua_tolstring(l, -1, ptr::null_mut());
    ffi::luaL_error(
        l,
        c"Script attempted to access nonexistent global variable '%s'".as_ptr(),
        name,
    )
}

/// Redis's `pcall`: an error table with an `err` string is replaced by that string.
unsafe extern "C-unwind" fn redis_pcall(l: *mut lua_State) -> c_int {
    if ffi::lua_gettop(l) == 0 {
        // Redis calls its placeholder boolean when pcall gets no function.
        ffi::lua_pushboolean(l, 0);
        push_str(l, "attempt to call a boolean value");
        return 2;
    }
    let argc = ffi::lua_gettop(l);
    ffi::lua_pushboolean(l, 1);
    ffi::lua_insert(l, 1);
    if ffi::lua_pcall(l, argc - 1, ffi::LUA_MULTRET, 0) != 0 {
        ffi::lua_remove(l, 1);
        if ffi::lua_type(l, -1) == ffi::LUA_TTABLE {
            ffi::lua_getfield_(l, -1, c"err".as_ptr());
            if ffi::lua_isstring(l, -1) != 0 {
                ffi::lua_replace(l, -2);
            }
        }
        ffi::lua_pushboolean(l, 0);
        ffi::lua_insert(l, 1);
    }
    ffi::lua_gettop(l)
}

unsafe extern "C-unwind" fn lua_rawset(l: *mut lua_State) -> c_int {
    ffi::luaL_checktype(l, 1, ffi::LUA_TTABLE);
    ffi::luaL_checkany(l, 2);
    ffi::luaL_checkany(l, 3);
    if is_protected(l, 1) {
        raise_readonly(l);
    }
    ffi::lua_settop(l, 3);
    ffi::lua_rawset(l, 1);
    1
}

unsafe extern "C-unwind" fn lua_rawget(l: *mut lua_State) -> c_int {
    ffi::luaL_checktype(l, 1, ffi::LUA_TTABLE);
    ffi::luaL_checkany(l, 2);
    ffi::lua_settop(l, 2);
    resolve_proxy(l, 1);
    ffi::lua_rawget_(l, 1);
    1
}

unsafe extern "C-unwind" fn lua_next(l: *mut lua_State) -> c_int {
    ffi::luaL_checktype(l, 1, ffi::LUA_TTABLE);
    ffi::lua_settop(l, 2);
    resolve_proxy(l, 1);
    if ffi::lua_next(l, 1) != 0 {
        2
    } else {
        ffi::lua_pushnil(l);
        1
    }
}

unsafe extern "C-unwind" fn lua_pairs(l: *mut lua_State) -> c_int {
    ffi::luaL_checktype(l, 1, ffi::LUA_TTABLE);
    ffi::lua_pushvalue(l, ffi::lua_upvalueindex(2));
    ffi::lua_pushvalue(l, 1);
    ffi::lua_pushnil(l);
    3
}

unsafe extern "C-unwind" fn lua_getmetatable(l: *mut lua_State) -> c_int {
    ffi::luaL_checkany(l, 1);
    if ffi::lua_getmetatable(l, 1) == 0 {
        ffi::lua_pushnil(l);
        return 1;
    }
    push_str(l, "__metatable");
    ffi::lua_rawget_(l, -2);
    match ffi::lua_type(l, -1) {
        ffi::LUA_TNIL => ffi::lua_pop(l, 1),
        ffi::LUA_TLIGHTUSERDATA if ffi::lua_touserdata(l, -1) == hidden_ptr() => {
            ffi::lua_pushnil(l)
        }
        _ => {}
    }
    1
}

unsafe extern "C-unwind" fn lua_setmetatable(l: *mut lua_State) -> c_int {
    let t = ffi::lua_type(l, 2);
    ffi::luaL_checktype(l, 1, ffi::LUA_TTABLE);
    if t != ffi::LUA_TNIL && t != ffi::LUA_TTABLE {
        ffi::luaL_argerror(l, 2, c"nil or table expected".as_ptr());
    }
    if is_protected(l, 1) {
        raise_readonly(l);
    }
    if ffi::luaL_getmetafield_(l, 1, c"__metatable".as_ptr()) != 0 {
        return ffi::luaL_error(l, c"cannot change a protected metatable".as_ptr());
    }
    ffi::lua_settop(l, 2);
    ffi::lua_setmetatable(l, 1);
    1
}

/// `table.insert` (Lua 5.1 `tinsert`) refusing protected tables.
unsafe extern "C-unwind" fn table_insert(l: *mut lua_State) -> c_int {
    ffi::luaL_checktype(l, 1, ffi::LUA_TTABLE);
    let n = i64::try_from(ffi::lua_objlen(l, 1)).unwrap_or(i64::MAX);
    let mut e = n.saturating_add(1);
    let pos = match ffi::lua_gettop(l) {
        2 => e,
        3 => {
            let pos = i64::from(ffi::luaL_checkinteger(l, 2) as i32);
            if pos > e {
                e = pos;
            }
            if is_protected(l, 1) {
                raise_readonly(l);
            }
            if e - pos >= boundary::SPARSE_SHIFT {
                boundary::shift_up_sparse(l, pos, e);
            } else {
                let mut i = e;
                while i > pos {
                    ffi::lua_rawgeti_(l, 1, (i - 1) as c_int);
                    ffi::lua_rawseti_(l, 1, i as c_int);
                    i -= 1;
                }
            }
            pos
        }
        _ => return ffi::luaL_error(l, c"wrong number of arguments to 'insert'".as_ptr()),
    };
    if is_protected(l, 1) {
        raise_readonly(l);
    }
    ffi::lua_rawseti_(l, 1, pos as c_int);
    0
}

/// `table.foreach` seeing through proxies.
unsafe extern "C-unwind" fn table_foreach(l: *mut lua_State) -> c_int {
    ffi::luaL_checktype(l, 1, ffi::LUA_TTABLE);
    ffi::luaL_checktype(l, 2, ffi::LUA_TFUNCTION);
    ffi::lua_settop(l, 2);
    resolve_proxy(l, 1);
    ffi::lua_pushnil(l);
    while ffi::lua_next(l, 1) != 0 {
        ffi::lua_pushvalue(l, 2);
        ffi::lua_pushvalue(l, -3);
        ffi::lua_pushvalue(l, -3);
        ffi::lua_call(l, 2, 1);
        if ffi::lua_type(l, -1) != ffi::LUA_TNIL {
            return 1;
        }
        ffi::lua_pop(l, 2);
    }
    0
}

/// `loadstring(s [, chunkname])` that never undumps bytecode.
unsafe extern "C-unwind" fn lua_loadstring(l: *mut lua_State) -> c_int {
    let mut len = 0usize;
    let s = ffi::luaL_checklstring(l, 1, &mut len);
    let name = ffi::luaL_optlstring(l, 2, s, ptr::null_mut());
    let code = std::slice::from_raw_parts(s as *const u8, len);
    let status = load_text(l, code, CStr::from_ptr(name));
    load_result(l, status)
}

unsafe fn load_result(l: *mut lua_State, status: c_int) -> c_int {
    if status == 0 {
        1
    } else {
        ffi::lua_pushnil(l);
        ffi::lua_insert(l, -2);
        2
    }
}

struct ReaderState {
    first: bool,
    pending: *const c_char,
    pending_len: usize,
}

unsafe extern "C-unwind" fn load_reader(
    l: *mut lua_State,
    ud: *mut c_void,
    size: *mut usize,
) -> *const c_char {
    let st = &mut *(ud as *mut ReaderState);
    if !st.pending.is_null() {
        let p = st.pending;
        *size = st.pending_len;
        st.pending = ptr::null();
        return p;
    }
    if ffi::lua_checkstack(l, 2) == 0 {
        ffi::luaL_error(l, c"stack overflow (too many nested functions)".as_ptr());
    }
    ffi::lua_pushvalue(l, 1);
    ffi::lua_call(l, 0, 1);
    if ffi::lua_type(l, -1) == ffi::LUA_TNIL {
        *size = 0;
        return ptr::null();
    }
    if ffi::lua_isstring(l, -1) == 0 {
        ffi::luaL_error(l, c"reader function must return a string".as_ptr());
    }
    ffi::lua_replace(l, 3);
    let p = ffi::lua_tolstring(l, 3, size);
    if st.first {
        st.first = false;
        if *size > 0 && *p as u8 == 0x1b {
            // Parse bytecode as text, like Redis's Lua (see `load_text`).
            st.pending = p;
            st.pending_len = *size;
            *size = 1;
            return c" ".as_ptr();
        }
    }
    p
}

/// `load(f [, chunkname])` that never undumps bytecode.
unsafe extern "C-unwind" fn lua_load_fn(l: *mut lua_State) -> c_int {
    let name = ffi::luaL_optlstring(l, 2, c"=(load)".as_ptr(), ptr::null_mut());
    ffi::luaL_checktype(l, 1, ffi::LUA_TFUNCTION);
    ffi::lua_settop(l, 3);
    let mut st = ReaderState {
        first: true,
        pending: ptr::null(),
        pending_len: 0,
    };
    let status = ffi::lua_load(
        l,
        load_reader,
        &mut st as *mut ReaderState as *mut c_void,
        name,
    );
    load_result(l, status)
}

/// `os.clock()`: seconds of virtual CPU time, counted in VM instructions (at
/// 10^8 instructions per second) so that it is identical on every replica.
unsafe extern "C-unwind" fn os_clock(l: *mut lua_State) -> c_int {
    protect(l, || {
        let ticks = VmShared::get(l).ticks;
        ffi::lua_pushnumber(l, ticks as f64 * f64::from(HOOK_INTERVAL) / 1e8);
        Ok(1)
    })
}
