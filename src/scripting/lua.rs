//! The raw Lua 5.1 VM: state creation with a memory-capped allocator, the
//! per-VM shared block reachable from C callbacks, the instruction hook used for
//! SCRIPT KILL and the FUNCTION LOAD budget, and the helpers every C function uses.
//!
//! Lua reports errors with `longjmp`, which skips Rust destructors. Every C
//! function written here therefore follows one discipline: Rust work happens inside
//! [`protect`], which runs it with the memory cap relaxed (so no Lua call in it can
//! fail), converts any error into a Lua value while nothing Rust-owned is alive,
//! and only then raises. Code that calls back into user Lua (pcall, load readers)
//! holds no Rust values at all.

use std::alloc::{alloc, dealloc, realloc, Layout};
use std::ffi::{c_char, c_int, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::time::{Duration, Instant};

pub(crate) use mlua::ffi;
pub(crate) use mlua::ffi::lua_State;

extern "C" {
    // Tollgate's patch of Lua 5.1 (vendor/lua-src/TOLLGATE.md): tables, functions,
    // userdata and threads carry a creation id, hashed as a table key instead of their
    // address and printed by `tostring`, so a script iterates and prints the same on
    // every node.
    /// Restart the creation ids at `base`.
    fn lua_tgresetids(l: *mut lua_State, base: std::ffi::c_uint);
    /// The creation id of the collectable value at `idx` (0 for others).
    fn lua_tgid(l: *mut lua_State, idx: c_int) -> std::ffi::c_uint;
}

/// Where the creation ids of a script run's objects start.
pub(crate) const SCRIPT_IDS: u32 = 1 << 31;
/// Where the creation ids of a function library's objects start (each load).
pub(crate) const LIBRARY_IDS: u32 = 1 << 30;

use super::rand48::Rand48;
use super::ScriptControl;

/// Instructions between two calls of the count hook (kill checks, load budget,
/// the virtual clock behind `os.clock`).
pub(crate) const HOOK_INTERVAL: c_int = 10_000;

/// Longest wait between two calls of `ScriptHost::script_runs_long` while the host has
/// not yet done what it needed (the wait doubles up to this).
const LONG_SCRIPT_MAX_GAP: Duration = Duration::from_millis(500);

/// Which of the two VMs a state is (decides the shape of its `redis` table).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum VmKind {
    /// The `EVAL` VM.
    Eval,
    /// The function-library VM.
    Functions,
}

/// `cjson` module settings (Redis's lua-cjson 2.1.0 defaults), reset before
/// every script so one script cannot change another's encoding.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CjsonConfig {
    /// Encode excessively sparse arrays as objects instead of failing.
    pub sparse_convert: bool,
    /// Max index / items ratio beyond which an array is excessively sparse.
    pub sparse_ratio: i32,
    /// Arrays up to this index are never considered sparse.
    pub sparse_safe: i32,
    /// Nesting allowed when encoding.
    pub encode_max_depth: i32,
    /// Nesting allowed when decoding.
    pub decode_max_depth: i32,
    /// NaN/Inf when encoding: 0 refuse, 1 emit, 2 emit `null`.
    pub encode_invalid_numbers: i32,
    /// Significant digits of encoded numbers (`%.<n>g`).
    pub encode_number_precision: i32,
    /// Kept for API parity (buffer reuse has no visible effect here).
    pub encode_keep_buffer: bool,
    /// Accept hex, `inf` and `nan` when decoding.
    pub decode_invalid_numbers: bool,
}

impl Default for CjsonConfig {
    fn default() -> Self {
        CjsonConfig {
            sparse_convert: false,
            sparse_ratio: 2,
            sparse_safe: 10,
            encode_max_depth: 1000,
            decode_max_depth: 1000,
            encode_invalid_numbers: 0,
            encode_number_precision: 14,
            encode_keep_buffer: true,
            decode_invalid_numbers: true,
        }
    }
}

/// The state of one script invocation, reachable from C callbacks while it runs.
pub(crate) struct RunState {
    /// The host that executes `redis.call` commands. The lifetime is erased: the
    /// pointer is only set for the duration of `execute` (see `Vm::with_run`).
    pub host: *mut (dyn super::ScriptHost + 'static),
    /// The control block (kill requests, has-written flag).
    pub control: *const ScriptControl,
    /// Protocol the script selected with `redis.setresp` (2 by default).
    pub resp: u8,
    /// `EVAL_RO`/`FCALL_RO` or a `no-writes` script.
    pub read_only: bool,
    /// `allow-oom` was declared (and the script is not in eval compat mode).
    pub allow_oom: bool,
    /// Whether a write command was already called.
    pub wrote: bool,
    /// When the script started (decides only when the host is told it runs long).
    pub started: Instant,
    /// Run time after which the count hook calls `ScriptHost::script_runs_long`; None
    /// once the host has done what it needed.
    pub long_after: Option<Duration>,
}

impl RunState {
    /// A run state for `host`, started now.
    pub(crate) fn new(
        host: *mut (dyn super::ScriptHost + 'static),
        control: &ScriptControl,
    ) -> Self {
        RunState {
            host,
            control,
            resp: 2,
            read_only: false,
            allow_oom: false,
            wrote: false,
            started: Instant::now(),
            long_after: Some(super::LONG_SCRIPT),
        }
    }

    /// From the count hook: tell the host once the script has run long (see
    /// `ScriptHost::script_runs_long`), and again with growing delays until it is done.
    fn check_long_run(&mut self) {
        let Some(after) = self.long_after else {
            return;
        };
        if self.started.elapsed() < after {
            return;
        }
        // SAFETY: the host pointer is valid while the run state is installed, and no
        // other reference to the host is live while Lua code runs the hook.
        let host = unsafe { &mut *self.host };
        // A panic must not unwind through Lua's C frames.
        let done = catch_unwind(AssertUnwindSafe(|| host.script_runs_long())).unwrap_or(true);
        self.long_after = (!done).then(|| after + after.min(LONG_SCRIPT_MAX_GAP));
    }
}

/// The library being loaded by FUNCTION LOAD, reachable from `redis.register_function`.
pub(crate) struct LoadState {
    /// Functions registered so far.
    pub functions: Vec<super::functions::RegisteredFunction>,
    /// Hook ticks left before "FUNCTION LOAD timeout".
    pub budget: u64,
}

/// Per-VM data shared with C callbacks (found through the allocator's user data).
pub(crate) struct VmShared {
    used: usize,
    limit: usize,
    relax: u32,
    /// The running script (null between scripts).
    pub run: *mut RunState,
    /// The library being loaded (null unless FUNCTION LOAD/RESTORE runs code).
    pub load: *mut LoadState,
    /// `math.random`'s generator.
    pub rng: Rand48,
    /// Settings of the global `cjson` module (a userdata kept alive by its
    /// functions' upvalues), reset before every script.
    pub cjson_main: *mut CjsonConfig,
    /// Hook ticks since the script started: the deterministic clock of `os.clock`.
    pub ticks: u64,
    /// Script calls since the last periodic GC step.
    pub gc_calls: u32,
}

impl VmShared {
    /// The shared block of the VM owning `l`.
    ///
    /// # Safety
    /// `l` must be a state created by [`Vm::new`].
    pub(crate) unsafe fn get<'a>(l: *mut lua_State) -> &'a mut VmShared {
        let mut ud: *mut c_void = ptr::null_mut();
        ffi::lua_getallocf(l, &mut ud);
        &mut *(ud as *mut VmShared)
    }

    /// Bytes Lua has allocated in this VM.
    pub(crate) fn used(&self) -> usize {
        self.used
    }

    /// The VM's memory cap in bytes.
    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// The running script, if any.
    pub(crate) fn run<'a>(&self) -> Option<&'a mut RunState> {
        // SAFETY: `run` is either null or points to a RunState living on the stack
        // of `Vm::with_run` for as long as it is set.
        unsafe { self.run.as_mut() }
    }
}

unsafe extern "C-unwind" fn allocator(
    ud: *mut c_void,
    p: *mut c_void,
    osize: usize,
    nsize: usize,
) -> *mut c_void {
    let shared = &mut *(ud as *mut VmShared);
    if nsize == 0 {
        if !p.is_null() {
            dealloc(p.cast(), lua_layout(osize));
            shared.used = shared.used.saturating_sub(osize);
        }
        return ptr::null_mut();
    }
    let old = if p.is_null() { 0 } else { osize };
    let grows = nsize > old;
    if grows && shared.relax == 0 && shared.used.saturating_add(nsize - old) > shared.limit {
        return ptr::null_mut();
    }
    // Through the process allocator (mimalloc): cheaper than the C library's malloc
    // for Lua's many small strings and tables. Lua always passes the block's true
    // size as `osize`, which is what the layout-based interface needs.
    let q: *mut c_void = if p.is_null() {
        alloc(lua_layout(nsize)).cast()
    } else {
        realloc(p.cast(), lua_layout(osize), nsize).cast()
    };
    if !q.is_null() {
        shared.used = shared.used.saturating_sub(old).saturating_add(nsize);
    }
    q
}

/// The layout of a Lua block of `size` bytes: Lua needs malloc's alignment (16 on
/// 64-bit targets, enough for any Lua object).
fn lua_layout(size: usize) -> Layout {
    // SAFETY: 16 is a power of two and Lua's sizes are far below isize::MAX.
    unsafe { Layout::from_size_align_unchecked(size, LUA_ALIGN) }
}

const LUA_ALIGN: usize = 16;

/// An owned Lua state with its shared block.
pub(crate) struct Vm {
    /// The main thread of the state.
    pub l: *mut lua_State,
    shared: *mut VmShared,
    /// Registry reference of [`error_handler`], made once instead of on every call.
    error_handler: c_int,
    /// What every script run pushes, kept in registry slots (see [`RunRefs`]).
    pub(crate) refs: RunRefs,
}

/// Registry references, made once per VM, of the values every script run pushes: the
/// real globals table and the strings `KEYS`, `ARGV` and `err`. Pushing a constant
/// string with `lua_pushlstring` hashes it and looks it up in Lua's string table on
/// every call (about 190 instructions under callgrind); reading a registry slot by
/// number takes a few dozen. The registry keeps the strings interned, so the value
/// pushed is the very key the tables hold.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RunRefs {
    /// The real globals table (`sandbox::STORAGE`); `LUA_NOREF` until the sandbox is built.
    pub globals: c_int,
    /// The string `KEYS`.
    pub keys: c_int,
    /// The string `ARGV`.
    pub argv: c_int,
    /// The string `err`.
    pub err: c_int,
}

// SAFETY: the Lua state is only ever touched by the thread currently holding the
// engine (`&mut`), and nothing in it is tied to a thread.
unsafe impl Send for Vm {}

impl Vm {
    /// A new empty state (no libraries) capped at `limit` bytes.
    pub(crate) fn new(limit: usize) -> Vm {
        let shared = Box::into_raw(Box::new(VmShared {
            used: 0,
            limit,
            relax: 0,
            run: ptr::null_mut(),
            load: ptr::null_mut(),
            rng: Rand48::new(),
            cjson_main: ptr::null_mut(),
            ticks: 0,
            gc_calls: 0,
        }));
        // SAFETY: lua_newstate with our allocator; a null state (system OOM) aborts
        // like any Rust allocation failure would.
        let l = unsafe { ffi::lua_newstate(allocator, shared as *mut c_void) };
        if l.is_null() {
            std::process::abort();
        }
        let mut vm = Vm {
            l,
            shared,
            error_handler: ffi::LUA_NOREF,
            refs: RunRefs {
                globals: ffi::LUA_NOREF,
                keys: ffi::LUA_NOREF,
                argv: ffi::LUA_NOREF,
                err: ffi::LUA_NOREF,
            },
        };
        // SAFETY: a fresh state, relaxed so the allocation cannot fail.
        vm.error_handler = vm.relaxed(|l| unsafe {
            ffi::lua_pushcclosure(l, error_handler, 0);
            ffi::luaL_ref(l, ffi::LUA_REGISTRYINDEX)
        });
        let string_ref = |s: &str| {
            // SAFETY: as above.
            vm.relaxed(|l| unsafe {
                push_str(l, s);
                ffi::luaL_ref(l, ffi::LUA_REGISTRYINDEX)
            })
        };
        let (keys, argv, err) = (string_ref("KEYS"), string_ref("ARGV"), string_ref("err"));
        vm.refs.keys = keys;
        vm.refs.argv = argv;
        vm.refs.err = err;
        vm
    }

    /// Push the value of registry reference `r` (one of [`Vm::refs`]).
    ///
    /// # Safety
    /// The stack must have room for one value.
    pub(crate) unsafe fn push_ref(&self, r: c_int) {
        ffi::lua_rawgeti_(self.l, ffi::LUA_REGISTRYINDEX, r);
    }

    /// Push the error handler every script call runs under.
    ///
    /// # Safety
    /// The stack must have room for one value.
    pub(crate) unsafe fn push_error_handler(&self) {
        ffi::lua_rawgeti_(self.l, ffi::LUA_REGISTRYINDEX, self.error_handler);
    }

    /// Apply `f` to the shared block.
    fn with_shared<R>(&self, f: impl FnOnce(&mut VmShared) -> R) -> R {
        // SAFETY: the block is owned by self for its whole life and only touched by
        // the thread driving this VM; no other reference to it is live during `f`.
        f(unsafe { &mut *self.shared })
    }

    /// Bytes currently allocated by the VM.
    pub(crate) fn used_memory(&self) -> usize {
        self.with_shared(|s| s.used)
    }

    /// Collect garbage before a script when more than half the cap is in use: Lua 5.1
    /// does not collect when an allocation fails, so garbage left by earlier scripts
    /// could otherwise make a script fail for lack of memory.
    pub(crate) fn collect_if_crowded(&self) {
        if self.with_shared(|s| s.used > s.limit / 2) {
            self.full_gc();
        }
    }

    /// Whether the VM is above its memory cap (after relaxed engine work).
    pub(crate) fn over_limit(&self) -> bool {
        self.with_shared(|s| s.used > s.limit)
    }

    /// Run engine-side stack work that must not fail on the memory cap (there is no
    /// protected call around it, so a failure would abort the process).
    pub(crate) fn relaxed<R>(&self, f: impl FnOnce(*mut lua_State) -> R) -> R {
        self.with_shared(|s| s.relax += 1);
        // SAFETY: growing our own stack; with the cap relaxed this cannot fail short
        // of the absolute Lua stack limit, far above what engine code uses.
        unsafe { ffi::lua_checkstack(self.l, 40) };
        let r = f(self.l);
        self.with_shared(|s| s.relax -= 1);
        r
    }

    /// Install `run` for the duration of `f` (the pointer is cleared afterwards).
    pub(crate) fn with_run<R>(&self, run: &mut RunState, f: impl FnOnce() -> R) -> R {
        self.with_shared(|s| s.run = run as *mut RunState);
        let r = f();
        self.with_shared(|s| s.run = ptr::null_mut());
        r
    }

    /// Install the library being loaded for the duration of `f`.
    pub(crate) fn with_load<R>(&self, load: &mut LoadState, f: impl FnOnce() -> R) -> R {
        self.with_shared(|s| {
            s.load = load as *mut LoadState;
            s.ticks = 0;
        });
        let r = f();
        self.with_shared(|s| s.load = ptr::null_mut());
        r
    }

    /// Reset what a script may observe from earlier ones: the PRNG (seeded from `seed`,
    /// the command's seed: see [`super::ScriptContext::seed`]), the virtual clock and the
    /// global `cjson` settings.
    pub(crate) fn reset_for_run(&self, seed: u64) {
        self.with_shared(|s| {
            s.rng.seed((seed ^ (seed >> 32)) as i32);
            s.ticks = 0;
            // SAFETY: the config userdata lives as long as the VM (the cjson module's
            // functions hold it as an upvalue) and never moves.
            if let Some(cfg) = unsafe { s.cjson_main.as_mut() } {
                *cfg = CjsonConfig::default();
            }
        });
    }

    /// Restart the creation ids of new tables, functions, userdata and threads at `base`
    /// (before a script run or a library load): the same objects get the same ids on
    /// every node, whatever ran on the VM before.
    pub(crate) fn reset_ids(&self, base: u32) {
        // SAFETY: sets one counter of our own state.
        unsafe { lua_tgresetids(self.l, base) }
    }

    /// Count a script call; true every `period` calls (for Redis's periodic GC step).
    pub(crate) fn gc_due(&self, period: u32) -> bool {
        self.with_shared(|s| {
            s.gc_calls += 1;
            if s.gc_calls >= period {
                s.gc_calls = 0;
                true
            } else {
                false
            }
        })
    }

    /// Full garbage collection (after an out-of-memory error, and between scripts).
    pub(crate) fn full_gc(&self) {
        // SAFETY: collecting cannot raise (no __gc metamethods on our objects).
        self.relaxed(|l| unsafe { ffi::lua_gc(l, ffi::LUA_GCCOLLECT, 0) });
    }
}

impl Drop for Vm {
    fn drop(&mut self) {
        // SAFETY: the state and the shared block are owned by self.
        unsafe {
            ffi::lua_close(self.l);
            drop(Box::from_raw(self.shared));
        }
    }
}

/// How a C function fails: converted to a Lua error value before raising.
pub(crate) enum Raise {
    /// `luaL_error`-style: message prefixed with the caller's position.
    Msg(String),
    /// A string error without position (like errors raised inside Lua's C API).
    Plain(String),
    /// A Redis error table `{err=...}` built from the text like `luaPushError`.
    Table(String),
    /// `luaL_argerror(narg, msg)`: "bad argument #n to 'f' (msg)".
    Arg(c_int, String),
    /// `luaL_typerror(narg, tname)`: "bad argument #n to 'f' (tname expected, got x)".
    Type(c_int, &'static str),
    /// The VM's memory cap would be exceeded: raised as Lua's own out-of-memory error
    /// (`LUA_ERRMEM`, "not enough memory"), see `scripting::budget`.
    Memory,
}

/// Result of the Rust part of a C function: number of results pushed, or the error.
pub(crate) type CResult = Result<c_int, Raise>;

/// Run the Rust body of a C function under the discipline described in the module
/// docs and return its result count, or raise its error as a Lua error.
///
/// # Safety
/// `l` must be a state created by [`Vm::new`], called from a Lua C function.
pub(crate) unsafe fn protect(l: *mut lua_State, body: impl FnOnce() -> CResult) -> c_int {
    let shared = VmShared::get(l) as *mut VmShared;
    (*shared).relax += 1;
    let outcome = catch_unwind(AssertUnwindSafe(body));
    let arg = match outcome {
        Ok(Ok(n)) => {
            (*shared).relax -= 1;
            if (*shared).used > (*shared).limit {
                raise_memory_error(l);
            }
            return n;
        }
        Ok(Err(Raise::Memory)) => {
            (*shared).relax -= 1;
            raise_memory_error(l);
        }
        Ok(Err(raise)) => {
            // The failed body may have filled the stack; if there is no room left for
            // the message, its values go (error positions come from call frames).
            if ffi::lua_checkstack(l, 4) == 0 {
                ffi::lua_settop(l, 0);
            }
            push_raise(l, raise)
        }
        Err(_) => {
            ffi::lua_settop(l, 0);
            push_str(l, "internal error in the script engine");
            None
        }
    };
    (*shared).relax -= 1;
    match arg {
        Some((narg, None)) => {
            ffi::luaL_argerror(l, narg, ffi::lua_tolstring(l, -1, ptr::null_mut()));
        }
        Some((narg, Some(tname))) => {
            ffi::luaL_typerror(l, narg, tname.as_ptr());
        }
        None => {}
    }
    ffi::lua_error(l)
}

/// Raise Lua's own out-of-memory error (`LUA_ERRMEM`, whose value is "not enough
/// memory"): ask the capped allocator for more than the cap, which it refuses.
///
/// # Safety
/// `l` must be a state created by [`Vm::new`], not relaxed, inside a protected call.
unsafe fn raise_memory_error(l: *mut lua_State) -> ! {
    let shared = VmShared::get(l);
    if shared.relax == 0 {
        ffi::lua_newuserdata(l, shared.limit.saturating_add(1));
    }
    // Only reached when relaxed (never from a script's own call): a plain error.
    push_str(l, "not enough memory");
    ffi::lua_error(l)
}

/// Push the error value for `raise`; returns the argument number for arg errors.
unsafe fn push_raise(l: *mut lua_State, raise: Raise) -> Option<(c_int, Option<&'static CStr>)> {
    match raise {
        Raise::Msg(m) => {
            ffi::luaL_where(l, 1);
            push_str(l, &m);
            ffi::lua_concat(l, 2);
            None
        }
        Raise::Plain(m) => {
            push_str(l, &m);
            None
        }
        Raise::Table(m) => {
            push_error_table(l, m.as_bytes());
            None
        }
        Raise::Arg(n, m) => {
            push_str(l, &m);
            Some((n, None))
        }
        Raise::Memory => {
            push_str(l, "not enough memory");
            None
        }
        Raise::Type(n, t) => {
            let t: &'static CStr = match t {
                "number" => c"number",
                "string" => c"string",
                "table" => c"table",
                "function" => c"function",
                "boolean" => c"boolean",
                _ => c"value",
            };
            Some((n, Some(t)))
        }
    }
}

/// Push Redis's error table for `text`, following `luaPushErrorBuff`: a leading
/// `-CODE msg` keeps its code, anything else gets `ERR`; `\r\n` are trimmed.
pub(crate) unsafe fn push_error_table(l: *mut lua_State, text: &[u8]) {
    let formatted = redis_error_text(text);
    ffi::lua_newtable(l);
    push_str(l, "err");
    push_bytes(l, &formatted);
    ffi::lua_rawset(l, -3);
}

/// The `code msg` text `luaPushErrorBuff` builds.
pub(crate) fn redis_error_text(text: &[u8]) -> Vec<u8> {
    let (code, msg): (&[u8], &[u8]) = match text.strip_prefix(b"-") {
        Some(rest) => match rest.iter().position(|&c| c == b' ') {
            Some(sp) => (&rest[..sp], &rest[sp + 1..]),
            None => (b"ERR", rest),
        },
        None => (b"ERR", text),
    };
    let msg = trim_crlf(msg);
    let mut out = Vec::with_capacity(code.len() + 1 + msg.len());
    out.extend_from_slice(code);
    out.push(b' ');
    out.extend_from_slice(msg);
    out
}

/// `sdstrim(s, "\r\n")`: strip CR/LF from both ends.
pub(crate) fn trim_crlf(mut s: &[u8]) -> &[u8] {
    while let [b'\r' | b'\n', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b'\r' | b'\n'] = s {
        s = rest;
    }
    s
}

/// Push a byte string.
pub(crate) unsafe fn push_bytes(l: *mut lua_State, b: &[u8]) {
    let p = if b.is_empty() {
        c"".as_ptr()
    } else {
        b.as_ptr() as *const c_char
    };
    ffi::lua_pushlstring_(l, p, b.len());
}

/// Push a UTF-8 string.
pub(crate) unsafe fn push_str(l: *mut lua_State, s: &str) {
    push_bytes(l, s.as_bytes());
}

/// The bytes of a string value (numbers are NOT converted; None for non-strings).
pub(crate) unsafe fn string_at<'a>(l: *mut lua_State, idx: c_int) -> Option<&'a [u8]> {
    if ffi::lua_type(l, idx) != ffi::LUA_TSTRING {
        return None;
    }
    let mut len = 0usize;
    let p = ffi::lua_tolstring(l, idx, &mut len);
    if p.is_null() {
        return None;
    }
    Some(std::slice::from_raw_parts(p as *const u8, len))
}

/// The string form of a number or string without touching the stack slot.
pub(crate) unsafe fn string_or_number(l: *mut lua_State, idx: c_int) -> Option<Vec<u8>> {
    match ffi::lua_type(l, idx) {
        ffi::LUA_TSTRING => string_at(l, idx).map(|b| b.to_vec()),
        ffi::LUA_TNUMBER => Some(fmt_g(ffi::lua_tonumber(l, idx), 14).into_bytes()),
        _ => None,
    }
}

/// Absolute stack index.
pub(crate) unsafe fn abs_index(l: *mut lua_State, idx: c_int) -> c_int {
    if idx > 0 || idx <= ffi::LUA_REGISTRYINDEX {
        idx
    } else {
        ffi::lua_gettop(l) + idx + 1
    }
}

/// Push `t[key]` (raw) for the table at `idx`.
pub(crate) unsafe fn raw_get_str(l: *mut lua_State, idx: c_int, key: &str) -> c_int {
    let t = abs_index(l, idx);
    push_str(l, key);
    ffi::lua_rawget_(l, t);
    ffi::lua_type(l, -1)
}

/// Pop a value and store it as `t[key]` (raw) for the table at `idx`.
pub(crate) unsafe fn raw_set_str(l: *mut lua_State, idx: c_int, key: &str) {
    let t = abs_index(l, idx);
    push_str(l, key);
    ffi::lua_insert(l, -2);
    ffi::lua_rawset(l, t);
}

/// Store a C function as `t[name]` for the table at `idx`.
pub(crate) unsafe fn set_fn(l: *mut lua_State, idx: c_int, name: &str, f: ffi::lua_CFunction) {
    let t = abs_index(l, idx);
    ffi::lua_pushcclosure(l, f, 0);
    raw_set_str(l, t, name);
}

/// Store a number as `t[name]` for the table at `idx`.
pub(crate) unsafe fn set_num(l: *mut lua_State, idx: c_int, name: &str, n: f64) {
    let t = abs_index(l, idx);
    ffi::lua_pushnumber(l, n);
    raw_set_str(l, t, name);
}

/// Store a string as `t[name]` for the table at `idx`.
pub(crate) unsafe fn set_string(l: *mut lua_State, idx: c_int, name: &str, v: &str) {
    let t = abs_index(l, idx);
    push_str(l, v);
    raw_set_str(l, t, name);
}

/// Push the registry value stored under `key`.
pub(crate) unsafe fn registry_get(l: *mut lua_State, key: &str) -> c_int {
    raw_get_str(l, ffi::LUA_REGISTRYINDEX, key)
}

/// Pop a value into the registry under `key`.
pub(crate) unsafe fn registry_set(l: *mut lua_State, key: &str) {
    raw_set_str(l, ffi::LUA_REGISTRYINDEX, key);
}

/// C's `printf("%.<prec>g", x)` (glibc), as Redis and Lua format numbers.
pub(crate) use crate::numbers::format_g as fmt_g;

/// The x86-64 `(long long)double` conversion C code in Redis relies on: values out
/// of range (and NaN) become `i64::MIN`.
pub(crate) fn f64_to_i64_c(x: f64) -> i64 {
    if x.is_nan() || !(-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&x) {
        i64::MIN
    } else {
        x as i64
    }
}

/// The x86-64 `(unsigned long long)double` conversion gcc emits.
pub(crate) fn f64_to_u64_c(x: f64) -> u64 {
    const TWO63: f64 = 9_223_372_036_854_775_808.0;
    if x < TWO63 {
        f64_to_i64_c(x) as u64
    } else {
        (f64_to_i64_c(x - TWO63) as u64) ^ (1u64 << 63)
    }
}

/// Information about the Lua function at stack `level` (0 = running function).
pub(crate) struct FrameInfo {
    /// The frame runs a C function.
    pub is_c: bool,
    /// The chunk name (`@user_script`, ...).
    pub source: Vec<u8>,
    /// The current line (-1 for C functions).
    pub line: c_int,
}

/// `lua_getstack` + `lua_getinfo("Sl")`.
pub(crate) unsafe fn frame_info(l: *mut lua_State, level: c_int) -> Option<FrameInfo> {
    let mut ar: ffi::lua_Debug = std::mem::zeroed();
    if ffi::lua_getstack(l, level, &mut ar) == 0 {
        return None;
    }
    if ffi::lua_getinfo(l, c"Sl".as_ptr(), &mut ar) == 0 {
        return None;
    }
    let what = if ar.what.is_null() {
        b"".as_slice()
    } else {
        CStr::from_ptr(ar.what).to_bytes()
    };
    let source = if ar.source.is_null() {
        Vec::new()
    } else {
        CStr::from_ptr(ar.source).to_bytes().to_vec()
    };
    Some(FrameInfo {
        is_c: what == b"C",
        source,
        line: ar.currentline,
    })
}

/// The count hook: SCRIPT KILL and the FUNCTION LOAD budget. Once it fires an error
/// it switches to a line hook so `pcall` inside the script cannot swallow the kill.
pub(crate) unsafe extern "C-unwind" fn count_hook(l: *mut lua_State, _ar: *mut ffi::lua_Debug) {
    let shared = VmShared::get(l);
    shared.ticks = shared.ticks.saturating_add(1);
    let msg: &[u8] = if let Some(load) = shared.load.as_mut() {
        if load.budget == 0 {
            b"FUNCTION LOAD timeout"
        } else {
            load.budget -= 1;
            return;
        }
    } else if let Some(run) = shared.run() {
        if (*run.control).kill_requested() {
            tracing::warn!("Lua script killed by user with SCRIPT KILL.");
            b"Script killed by user with SCRIPT KILL..."
        } else {
            run.check_long_run();
            return;
        }
    } else {
        return;
    };
    ffi::lua_sethook(l, Some(count_hook), ffi::LUA_MASKLINE, 0);
    shared.relax += 1;
    push_error_table(l, msg);
    shared.relax -= 1;
    ffi::lua_error(l);
}

/// Install the count hook on the main thread (coroutines created later inherit it).
pub(crate) unsafe fn install_hook(l: *mut lua_State) {
    ffi::lua_sethook(l, Some(count_hook), ffi::LUA_MASKCOUNT, HOOK_INTERVAL);
}

/// Remove the hook.
pub(crate) unsafe fn remove_hook(l: *mut lua_State) {
    ffi::lua_sethook(l, None, 0, 0);
}

/// The error handler used around every script call: turns the error into Redis's
/// error table `{err=..., source=..., line=...}` like `__redis__err__handler`.
pub(crate) unsafe extern "C-unwind" fn error_handler(l: *mut lua_State) -> c_int {
    protect(l, || {
        let mut frame = frame_info(l, 1);
        if frame.as_ref().is_some_and(|f| f.is_c) {
            frame = frame_info(l, 2);
        }
        // A `redis.call` error keeps its flag: it was counted in errorstats already.
        let counted = ffi::lua_type(l, 1) == ffi::LUA_TTABLE && {
            let set = raw_get_str(l, 1, "ignore_error_stats_update") != ffi::LUA_TNIL
                && ffi::lua_toboolean(l, -1) != 0;
            ffi::lua_pop(l, 1);
            set
        };
        let msg: Vec<u8> = if ffi::lua_type(l, 1) == ffi::LUA_TTABLE {
            if raw_get_str(l, 1, "err") == ffi::LUA_TSTRING {
                string_at(l, -1).map(|b| b.to_vec()).unwrap_or_default()
            } else {
                // Redis 7.0 crashes on an error table without `err`; report it plainly.
                b"ERR unknown error".to_vec()
            }
        } else {
            let mut m = b"ERR ".to_vec();
            m.extend_from_slice(&tostring(l, 1));
            m
        };
        ffi::lua_newtable(l);
        push_bytes(l, &msg);
        raw_set_str(l, -2, "err");
        if counted {
            ffi::lua_pushboolean(l, 1);
            raw_set_str(l, -2, "ignore_error_stats_update");
        }
        if let Some(f) = frame {
            push_bytes(l, &f.source);
            raw_set_str(l, -2, "source");
            ffi::lua_pushnumber(l, f64::from(f.line));
            raw_set_str(l, -2, "line");
        }
        Ok(1)
    })
}

/// Lua's `tostring` for error messages (no metamethods).
pub(crate) unsafe fn tostring(l: *mut lua_State, idx: c_int) -> Vec<u8> {
    match ffi::lua_type(l, idx) {
        ffi::LUA_TNIL | ffi::LUA_TNONE => b"nil".to_vec(),
        ffi::LUA_TBOOLEAN => {
            if ffi::lua_toboolean(l, idx) != 0 {
                b"true".to_vec()
            } else {
                b"false".to_vec()
            }
        }
        ffi::LUA_TNUMBER | ffi::LUA_TSTRING => string_or_number(l, idx).unwrap_or_default(),
        t => {
            let name = CStr::from_ptr(ffi::lua_typename(l, t))
                .to_string_lossy()
                .into_owned();
            if t == ffi::LUA_TLIGHTUSERDATA {
                format!("{}: {:p}", name, ffi::lua_topointer(l, idx)).into_bytes()
            } else {
                // The creation id, as Lua's own `tostring` prints it (not the address).
                format!("{}: 0x{:08x}", name, lua_tgid(l, idx)).into_bytes()
            }
        }
    }
}

/// The name of the type of the value at `idx`.
pub(crate) unsafe fn type_name(l: *mut lua_State, idx: c_int) -> String {
    CStr::from_ptr(ffi::lua_typename(l, ffi::lua_type(l, idx)))
        .to_string_lossy()
        .into_owned()
}

/// The error value at the top after a failed `lua_pcall`, as text (for compile and
/// load errors, which Redis reports with `lua_tostring`).
pub(crate) unsafe fn error_text(l: *mut lua_State) -> String {
    match string_or_number(l, -1) {
        Some(b) => String::from_utf8_lossy(&b).into_owned(),
        None => String::new(),
    }
}

/// Load a chunk with Lua's parser only: a binary chunk (starting with ESC) is fed
/// to the parser as text, like Redis's Lua which never undumps bytecode, so it fails
/// with the same syntax error Redis gives.
pub(crate) unsafe fn load_text(l: *mut lua_State, code: &[u8], chunkname: &CStr) -> c_int {
    struct Src {
        parts: [*const u8; 2],
        lens: [usize; 2],
        next: usize,
    }
    unsafe extern "C-unwind" fn reader(
        _l: *mut lua_State,
        ud: *mut c_void,
        size: *mut usize,
    ) -> *const c_char {
        let src = &mut *(ud as *mut Src);
        while src.next < 2 {
            let i = src.next;
            src.next += 1;
            if src.lens[i] > 0 {
                *size = src.lens[i];
                return src.parts[i] as *const c_char;
            }
        }
        *size = 0;
        ptr::null()
    }
    let binary = code.first() == Some(&0x1b);
    let mut src = Src {
        parts: [b" ".as_ptr(), code.as_ptr()],
        lens: [usize::from(binary), code.len()],
        next: 0,
    };
    ffi::lua_load(
        l,
        reader,
        &mut src as *mut Src as *mut c_void,
        chunkname.as_ptr(),
    )
}
