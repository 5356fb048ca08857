//! The `redis` table scripts see: `redis.call`/`pcall` with Redis's checks before
//! the host runs a command, `error_reply`/`status_reply`, `sha1hex`, `log`,
//! `setresp`, `set_repl`, `acl_check_cmd`, the debugger stubs, the version
//! constants, and `register_function` for function libraries being loaded.

use std::ffi::c_int;

use bytes::Bytes;

use super::budget::{self, Output};
use super::convert::push_reply;
use super::functions::{verify_name, RegisteredFunction, NAME_ERROR};
use super::lua::{
    f64_to_i64_c, ffi, lua_State, protect, push_error_table, push_str, raw_set_str, set_fn,
    set_num, set_string, string_at, string_or_number, CResult, Raise, RunState, VmShared,
};
use super::sandbox::{mark_readonly, nonexistent_global};
use super::{
    ascii_lowercase, lossy_lower, ScriptFlags, ScriptHost, NAME_BUF, REDIS_VERSION,
    REDIS_VERSION_NUM,
};

/// Which `redis` table to build.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum ApiKind {
    /// EVAL scripts (with the debugger stubs and `replicate_commands`).
    Eval,
    /// Function bodies at FCALL time.
    FunctionRuntime,
    /// Library code at FUNCTION LOAD time (`register_function`, `log`, versions only).
    FunctionLoad,
}

/// Push a new `redis` table of the given kind.
pub(crate) unsafe fn push_redis_table(l: *mut lua_State, kind: ApiKind) {
    ffi::lua_newtable(l);
    let t = ffi::lua_gettop(l);
    if kind == ApiKind::FunctionLoad {
        set_fn(l, t, "register_function", register_function);
    } else {
        for (name, f) in [
            ("call", redis_call as ffi::lua_CFunction),
            ("pcall", redis_pcall),
            ("setresp", redis_setresp),
            ("sha1hex", redis_sha1hex),
            ("error_reply", redis_error_reply),
            ("status_reply", redis_status_reply),
            ("set_repl", redis_set_repl),
            ("acl_check_cmd", redis_acl_check_cmd),
        ] {
            set_fn(l, t, name, f);
        }
        for (name, v) in [
            ("REPL_NONE", 0.0),
            ("REPL_AOF", 1.0),
            ("REPL_SLAVE", 2.0),
            ("REPL_REPLICA", 2.0),
            ("REPL_ALL", 3.0),
        ] {
            set_num(l, t, name, v);
        }
    }
    if kind == ApiKind::Eval {
        set_fn(l, t, "breakpoint", redis_breakpoint);
        set_fn(l, t, "debug", redis_debug);
        set_fn(l, t, "replicate_commands", redis_replicate_commands);
    }
    set_fn(l, t, "log", redis_log);
    for (name, v) in [
        ("LOG_DEBUG", 0.0),
        ("LOG_VERBOSE", 1.0),
        ("LOG_NOTICE", 2.0),
        ("LOG_WARNING", 3.0),
    ] {
        set_num(l, t, name, v);
    }
    set_num(l, t, "REDIS_VERSION_NUM", f64::from(REDIS_VERSION_NUM));
    set_string(l, t, "REDIS_VERSION", REDIS_VERSION);
    if kind == ApiKind::FunctionLoad {
        ffi::lua_newtable(l);
        set_fn(l, -1, "__index", nonexistent_global);
        mark_readonly(l, -1);
        ffi::lua_setmetatable(l, t);
    }
}

/// One argument of a `redis.call`-like function as it sits on Lua's stack.
#[derive(Clone, Copy)]
enum StackArg {
    /// A string: its bytes, owned by Lua and alive while the value is on the stack.
    Bytes(*const u8, usize),
    /// A number, sent as `%.17g` (Lua's own conversion loses precision).
    Number(f64),
}

/// The arguments of a `redis.call`-like function, read off Lua's stack in one pass
/// (type, bytes and total size together: the size decides the memory check before
/// anything is copied).
#[derive(Default)]
struct StackArgs {
    /// Inline for the usual few arguments (filled in place: see [`StackArgs::read`]).
    items: smallvec::SmallVec<[StackArg; 8]>,
    /// Bytes of the string arguments (numbers are short).
    string_bytes: usize,
    /// An argument is neither a string nor a number.
    invalid: bool,
}

impl StackArgs {
    /// Read the arguments of the running C function into `self` (empty). An out
    /// parameter, not a return value: moving the filled inline array out of a function
    /// cost a `memcpy` of it per call.
    ///
    /// # Safety
    /// `l` must be the state of a running C function.
    unsafe fn read(&mut self, l: *mut lua_State) {
        let argc = ffi::lua_gettop(l);
        let args = self;
        args.items.reserve(usize::try_from(argc).unwrap_or(0));
        for idx in 1..=argc {
            match ffi::lua_type(l, idx) {
                ffi::LUA_TNUMBER => args.items.push(StackArg::Number(ffi::lua_tonumber(l, idx))),
                ffi::LUA_TSTRING => {
                    let mut len = 0usize;
                    let p = ffi::lua_tolstring(l, idx, &mut len);
                    args.string_bytes = args.string_bytes.saturating_add(len);
                    args.items.push(StackArg::Bytes(p.cast(), len));
                }
                _ => args.invalid = true,
            }
        }
    }

    /// The arguments as the host takes them, or the error Redis reports.
    ///
    /// Like a request off the network (`protocol::parser`), they are slices of one copy
    /// of their bytes: one allocation per call rather than one per argument (the
    /// keyspace copies what it keeps for long).
    ///
    /// # Safety
    /// The arguments must still be on the stack they were read from.
    unsafe fn to_bytes(&self) -> Result<Vec<Bytes>, &'static str> {
        // Invalid arguments are not kept: then the call had some.
        if self.items.is_empty() && !self.invalid {
            return Err("Please specify at least one argument for this redis lib call");
        }
        if self.invalid {
            return Err("Lua redis lib command arguments must be strings or integers");
        }
        let argc = self.items.len();
        // Where each argument ends in `copy`: on the stack for the usual few arguments.
        let mut ends = smallvec::SmallVec::<[usize; 16]>::with_capacity(argc);
        let mut copy = Vec::with_capacity(self.string_bytes.saturating_add(argc.saturating_mul(8)));
        for item in &self.items {
            match *item {
                StackArg::Number(n) => crate::numbers::write_g(n, 17, &mut copy),
                // SAFETY: Lua's string, alive while on the stack (the caller's contract).
                StackArg::Bytes(p, len) => {
                    copy.extend_from_slice(std::slice::from_raw_parts(p, len))
                }
            }
            ends.push(copy.len());
        }
        let mut last = Bytes::from(copy);
        let mut args = Vec::with_capacity(argc);
        let mut start = 0;
        for &end in &ends[..argc - 1] {
            args.push(last.slice(start..end));
            start = end;
        }
        // The last argument is the copy itself, advanced: one reference count less.
        bytes::Buf::advance(&mut last, start);
        args.push(last);
        Ok(args)
    }
}

/// The arguments of a `redis.call`-like function, or the error Redis reports.
unsafe fn command_args(l: *mut lua_State) -> Result<Vec<Bytes>, &'static str> {
    let mut args = StackArgs::default();
    args.read(l);
    args.to_bytes()
}

/// Redis's `lookupCommand` through the host: container commands resolve their
/// subcommand from the second argument.
fn lookup(host: &dyn ScriptHost, args: &[Bytes]) -> Option<super::CommandInfo> {
    let mut buf = [0u8; NAME_BUF];
    let lossy;
    let name = match ascii_lowercase(&args[0], &mut buf) {
        Some(n) => n,
        None => {
            lossy = lossy_lower(&args[0]);
            &lossy
        }
    };
    if name.contains('|') {
        return None;
    }
    let info = host.command_info(name)?;
    if !info.has_subcommands || args.len() < 2 {
        return Some(info);
    }
    host.command_info(&format!("{name}|{}", lossy_lower(&args[1])))
}

/// `scriptCall`: the checks Redis performs before running a command from a script.
fn script_call(run: &mut RunState, args: &[Bytes]) -> Result<super::Reply, &'static str> {
    // SAFETY: the host pointer is valid while the run state is installed.
    let info =
        lookup(unsafe { &*run.host }, args).ok_or("Unknown Redis command called from script")?;
    if let Err(e) = admit(run, &info, args.len()) {
        // A refusal of a known command counts as its `rejected_calls`, as in Redis.
        // SAFETY: as above.
        unsafe { &*run.host }.record_rejected(args);
        return Err(e);
    }
    // SAFETY: as above; no other reference to the host is alive.
    Ok(unsafe { &mut *run.host }.call(args, run.resp))
}

/// The refusals of [`script_call`] once the command is known; on success the run is
/// marked as having written when the command may write.
fn admit(run: &mut RunState, info: &super::CommandInfo, argc: usize) -> Result<(), &'static str> {
    // SAFETY: the host pointer is valid while the run state is installed.
    let host = unsafe { &*run.host };
    let argc = i64::try_from(argc).unwrap_or(i64::MAX);
    let arity = i64::from(info.arity);
    if (arity > 0 && arity != argc) || argc < -arity {
        return Err("Wrong number of args calling Redis command from script");
    }
    if info.noscript {
        return Err("This Redis command is not allowed from script");
    }
    if info.write && run.read_only {
        return Err("Write commands are not allowed from read-only scripts.");
    }
    if info.write && !run.wrote && host.script_noreplicas() {
        return Err("-NOREPLICAS Not enough good replicas to write.");
    }
    if !run.allow_oom && !run.wrote && info.deny_oom && host.script_oom() {
        return Err("-OOM command not allowed when used memory > 'maxmemory'.");
    }
    if info.write {
        run.wrote = true;
        // SAFETY: the control block outlives the run.
        unsafe { (*run.control).mark_written() };
    }
    Ok(())
}

unsafe fn generic_command(l: *mut lua_State, raise: bool) -> c_int {
    let mut raise_now = false;
    let n = protect(l, || -> CResult {
        let Some(run) = VmShared::get(l).run() else {
            return Err(Raise::Table(
                "redis.call/pcall can only be called inside a script invocation".into(),
            ));
        };
        let mut stack_args = StackArgs::default();
        stack_args.read(l);
        // The arguments are copied out of Lua: they count against the VM's cap.
        budget::fits(l, stack_args.string_bytes)?;
        let args = stack_args.to_bytes();
        // The arguments are copied out: their stack slots go, so that a call with nearly
        // as many arguments as Lua's stack holds (about 8,000) still has room for its
        // reply (Redis's `Script check unpack with massive arguments`: LPUSH of 7,999).
        ffi::lua_settop(l, 0);
        let args = match args {
            Ok(a) => a,
            Err(msg) => {
                push_error_table(l, msg.as_bytes());
                raise_now = raise;
                return Ok(1);
            }
        };
        match script_call(run, &args) {
            Ok(reply) => {
                raise_now = raise && reply.is_error();
                budget::fits(l, budget::reply_lua_bytes(&reply))?;
                push_reply(l, &reply, run.resp);
            }
            Err(msg) => {
                // Counted here, as Redis's `scriptCall` does (so also when `pcall`
                // catches it); the table's flag keeps the script's reply from counting
                // it again.
                let text = super::lua::redis_error_text(msg.as_bytes());
                // SAFETY: the host pointer is valid while the run state is installed.
                unsafe { &*run.host }.record_error(&String::from_utf8_lossy(&text));
                push_error_table(l, msg.as_bytes());
                ffi::lua_pushboolean(l, 1);
                raw_set_str(l, -2, "ignore_error_stats_update");
                raise_now = raise;
            }
        }
        Ok(1)
    });
    if raise_now {
        ffi::lua_error(l);
    }
    n
}

unsafe extern "C-unwind" fn redis_call(l: *mut lua_State) -> c_int {
    generic_command(l, true)
}

unsafe extern "C-unwind" fn redis_pcall(l: *mut lua_State) -> c_int {
    generic_command(l, false)
}

unsafe extern "C-unwind" fn redis_sha1hex(l: *mut lua_State) -> c_int {
    protect(l, || {
        if ffi::lua_gettop(l) != 1 {
            return Err(Raise::Table("wrong number of arguments".into()));
        }
        let data = string_or_number(l, 1).unwrap_or_default();
        push_str(l, &sha1_smol::Sha1::from(&data).digest().to_string());
        Ok(1)
    })
}

/// The C-string view Redis takes of a Lua string (cut at the first NUL).
fn c_string(b: &[u8]) -> &[u8] {
    b.iter().position(|&c| c == 0).map_or(b, |n| &b[..n])
}

unsafe extern "C-unwind" fn redis_error_reply(l: *mut lua_State) -> c_int {
    protect(l, || {
        if ffi::lua_gettop(l) != 1 || ffi::lua_type(l, -1) != ffi::LUA_TSTRING {
            push_error_table(l, b"wrong number or type of arguments");
            return Ok(1);
        }
        let err = c_string(string_at(l, -1).unwrap_or_default());
        let mut text = Vec::with_capacity(err.len() + 1);
        if !err.starts_with(b"-") {
            text.push(b'-');
        }
        text.extend_from_slice(err);
        push_error_table(l, &text);
        Ok(1)
    })
}

unsafe extern "C-unwind" fn redis_status_reply(l: *mut lua_State) -> c_int {
    protect(l, || {
        if ffi::lua_gettop(l) != 1 || ffi::lua_type(l, -1) != ffi::LUA_TSTRING {
            push_error_table(l, b"wrong number or type of arguments");
            return Ok(1);
        }
        ffi::lua_newtable(l);
        ffi::lua_pushvalue(l, -2);
        raw_set_str(l, -2, "ok");
        Ok(1)
    })
}

unsafe extern "C-unwind" fn redis_log(l: *mut lua_State) -> c_int {
    protect(l, || {
        let argc = ffi::lua_gettop(l);
        if argc < 2 {
            return Err(Raise::Table(
                "redis.log() requires two arguments or more.".into(),
            ));
        }
        if ffi::lua_isnumber(l, 1) == 0 {
            return Err(Raise::Table(
                "First argument must be a number (log level).".into(),
            ));
        }
        let level = f64_to_i64_c(ffi::lua_tonumber(l, 1)) as i32;
        if !(0..=3).contains(&level) {
            return Err(Raise::Table("Invalid debug level.".into()));
        }
        let mut msg = Output::for_vm(l);
        for j in 2..=argc {
            if let Some(s) = string_or_number(l, j) {
                if j != 2 {
                    msg.push(b' ');
                }
                msg.extend_checked(&s)?;
            }
        }
        let msg = String::from_utf8_lossy(&msg);
        match level {
            0 => tracing::debug!(target: "tollgate::lua", "{msg}"),
            1 => tracing::debug!(target: "tollgate::lua", verbose = true, "{msg}"),
            2 => tracing::info!(target: "tollgate::lua", "{msg}"),
            _ => tracing::warn!(target: "tollgate::lua", "{msg}"),
        }
        Ok(0)
    })
}

unsafe extern "C-unwind" fn redis_setresp(l: *mut lua_State) -> c_int {
    protect(l, || {
        let Some(run) = VmShared::get(l).run() else {
            return Err(Raise::Table(
                "redis.setresp can only be called inside a script invocation".into(),
            ));
        };
        if ffi::lua_gettop(l) != 1 {
            return Err(Raise::Table(
                "redis.setresp() requires one argument.".into(),
            ));
        }
        let resp = f64_to_i64_c(ffi::lua_tonumber(l, 1)) as i32;
        if resp != 2 && resp != 3 {
            return Err(Raise::Table("RESP version must be 2 or 3.".into()));
        }
        run.resp = resp as u8;
        Ok(0)
    })
}

unsafe extern "C-unwind" fn redis_set_repl(l: *mut lua_State) -> c_int {
    protect(l, || {
        if VmShared::get(l).run.is_null() {
            return Err(Raise::Table(
                "redis.set_repl can only be called inside a script invocation".into(),
            ));
        }
        if ffi::lua_gettop(l) != 1 {
            return Err(Raise::Table(
                "redis.set_repl() requires two arguments.".into(),
            ));
        }
        let flags = f64_to_i64_c(ffi::lua_tonumber(l, -1)) as i32;
        if flags & !3 != 0 {
            return Err(Raise::Table(
                "Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE."
                    .into(),
            ));
        }
        // Tollgate replicates whole commands through Raft; the flags only validate.
        Ok(0)
    })
}

unsafe extern "C-unwind" fn redis_acl_check_cmd(l: *mut lua_State) -> c_int {
    protect(l, || {
        let Some(run) = VmShared::get(l).run() else {
            return Err(Raise::Table(
                "redis.acl_check_cmd can only be called inside a script invocation".into(),
            ));
        };
        let args = command_args(l).map_err(|m| Raise::Table(m.into()))?;
        // SAFETY: the host pointer is valid while the run state is installed.
        let host = &*run.host;
        let Some(permitted) = host.acl_permits(&args) else {
            return Err(Raise::Table(
                "Invalid command passed to redis.acl_check_cmd()".into(),
            ));
        };
        ffi::lua_pushboolean(l, c_int::from(permitted));
        Ok(1)
    })
}

unsafe extern "C-unwind" fn redis_breakpoint(l: *mut lua_State) -> c_int {
    ffi::lua_pushboolean(l, 0);
    1
}

unsafe extern "C-unwind" fn redis_debug(_l: *mut lua_State) -> c_int {
    0
}

unsafe extern "C-unwind" fn redis_replicate_commands(l: *mut lua_State) -> c_int {
    ffi::lua_pushboolean(l, 1);
    1
}

/// The arguments of one `redis.register_function` call.
struct Registration {
    name: Option<String>,
    description: Option<String>,
    callback: Option<c_int>,
    flags: ScriptFlags,
}

unsafe fn unref(l: *mut lua_State, r: Option<c_int>) {
    if let Some(r) = r {
        ffi::luaL_unref(l, ffi::LUA_REGISTRYINDEX, r);
    }
}

/// Read the `flags` table at the top (strings matched case-insensitively).
unsafe fn read_flags(l: *mut lua_State) -> Option<ScriptFlags> {
    let mut flags = ScriptFlags::default();
    let mut j: c_int = 1;
    loop {
        ffi::lua_rawgeti_(l, -1, j);
        if ffi::lua_type(l, -1) == ffi::LUA_TNIL {
            ffi::lua_pop(l, 1);
            return Some(flags);
        }
        let name = string_or_number(l, -1);
        ffi::lua_pop(l, 1);
        let name = String::from_utf8_lossy(&name?).into_owned();
        if !flags.set(&name, true) {
            return None;
        }
        j = j.checked_add(1)?;
    }
}

unsafe fn named_args(l: *mut lua_State, reg: &mut Registration) -> Result<(), &'static str> {
    if ffi::lua_type(l, 1) != ffi::LUA_TTABLE {
        return Err("calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).");
    }
    ffi::lua_pushnil(l);
    while ffi::lua_next(l, 1) != 0 {
        let Some(key) = string_or_number(l, -2) else {
            return Err("named argument key given to redis.register_function is not a string");
        };
        let key = String::from_utf8_lossy(&key).to_ascii_lowercase();
        match key.as_str() {
            "function_name" => {
                match string_or_number(l, -1) {
                    Some(n) => reg.name = Some(String::from_utf8_lossy(&n).into_owned()),
                    None => return Err(
                        "function_name argument given to redis.register_function must be a string",
                    ),
                }
            }
            "description" => {
                match string_or_number(l, -1) {
                    Some(d) => reg.description = Some(String::from_utf8_lossy(&d).into_owned()),
                    None => return Err(
                        "description argument given to redis.register_function must be a string",
                    ),
                }
            }
            "callback" => {
                if ffi::lua_type(l, -1) != ffi::LUA_TFUNCTION {
                    return Err(
                        "callback argument given to redis.register_function must be a function",
                    );
                }
                unref(l, reg.callback.take());
                reg.callback = Some(ffi::luaL_ref(l, ffi::LUA_REGISTRYINDEX));
                continue;
            }
            "flags" => {
                if ffi::lua_type(l, -1) != ffi::LUA_TTABLE {
                    return Err("flags argument to redis.register_function must be a table representing function flags");
                }
                reg.flags = read_flags(l).ok_or("unknown flag given")?;
            }
            _ => return Err("unknown argument given to redis.register_function"),
        }
        ffi::lua_pop(l, 1);
    }
    if reg.name.is_none() {
        return Err("redis.register_function must get a function name argument");
    }
    if reg.callback.is_none() {
        return Err("redis.register_function must get a callback argument");
    }
    Ok(())
}

unsafe fn positional_args(l: *mut lua_State, reg: &mut Registration) -> Result<(), &'static str> {
    let Some(name) = string_or_number(l, 1) else {
        return Err("first argument to redis.register_function must be a string");
    };
    reg.name = Some(String::from_utf8_lossy(&name).into_owned());
    if ffi::lua_type(l, 2) != ffi::LUA_TFUNCTION {
        return Err("second argument to redis.register_function must be a function");
    }
    ffi::lua_settop(l, 2);
    reg.callback = Some(ffi::luaL_ref(l, ffi::LUA_REGISTRYINDEX));
    Ok(())
}

unsafe extern "C-unwind" fn register_function(l: *mut lua_State) -> c_int {
    protect(l, || {
        let Some(load) = VmShared::get(l).load.as_mut() else {
            return Err(Raise::Table(
                "redis.register_function can only be called on FUNCTION LOAD command".into(),
            ));
        };
        let argc = ffi::lua_gettop(l);
        if !(1..=2).contains(&argc) {
            return Err(Raise::Table(
                "wrong number of arguments to redis.register_function".into(),
            ));
        }
        let mut reg = Registration {
            name: None,
            description: None,
            callback: None,
            flags: ScriptFlags::default(),
        };
        let parsed = if argc == 1 {
            named_args(l, &mut reg)
        } else {
            positional_args(l, &mut reg)
        };
        let checked = parsed.and_then(|()| {
            let name = reg.name.as_deref().unwrap_or_default();
            if !verify_name(name) {
                return Err(NAME_ERROR);
            }
            if load.functions.iter().any(|f| f.name == name) {
                return Err("Function already exists in the library");
            }
            Ok(())
        });
        if let Err(msg) = checked {
            unref(l, reg.callback.take());
            return Err(Raise::Table(msg.into()));
        }
        load.functions.push(RegisteredFunction {
            name: reg.name.unwrap_or_default(),
            description: reg.description,
            flags: reg.flags,
            func_ref: reg.callback.unwrap_or(ffi::LUA_REFNIL),
        });
        Ok(0)
    })
}
