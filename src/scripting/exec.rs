//! One script invocation, shared by `EVAL` and `FCALL`: Redis's
//! `scriptPrepareForRun` checks, the per-run reset that keeps scripts
//! deterministic (PRNG seeded from the command's seed, `cjson` settings, virtual clock), the
//! protected call with the error handler and the kill hook, and the conversion of
//! the result or error into the reply.

use std::ffi::c_int;

use bytes::Bytes;

use super::convert::{map_crlf, pop_reply, NestedErrors};
use super::lua::{ffi, install_hook, raw_get_str, remove_hook, string_or_number, RunState, Vm};
use super::sandbox::STORAGE;
use super::{ScriptContext, ScriptFlags, ScriptHost, ScriptLimits};
use crate::protocol::Reply;

/// Redis runs a GC step every this many script calls.
const GC_PERIOD: u32 = 50;

/// What to run and how it was asked for.
pub(crate) struct Invocation<'a> {
    /// The sha (EVAL) or function name (FCALL): used in error suffixes and stats.
    pub name: &'a str,
    /// The full command, for FUNCTION STATS.
    pub command: &'a [Bytes],
    /// Shebang or function flags.
    pub flags: ScriptFlags,
    /// Called through `EVAL_RO`/`EVALSHA_RO`/`FCALL_RO`.
    pub read_only_cmd: bool,
    /// FCALL (keys and args passed as arguments) rather than EVAL (globals).
    pub is_function: bool,
    /// `KEYS`.
    pub keys: &'a [Bytes],
    /// `ARGV`.
    pub argv: &'a [Bytes],
}

/// `scriptPrepareForRun`: the checks on the declared flags before a script starts.
fn prepare(host: &dyn ScriptHost, flags: ScriptFlags, read_only_cmd: bool) -> Result<(), Reply> {
    if flags.eval_compat {
        return Ok(());
    }
    if flags.no_cluster && host.cluster_enabled() {
        return Err(Reply::err(
            "ERR Can not run script on cluster, 'no-cluster' flag is set.",
        ));
    }
    // `no-writes` implies `allow-oom` (Redis's scriptFlagsToCmdFlags).
    if !flags.allow_oom && !flags.no_writes && host.script_oom() {
        return Err(Reply::err(
            "OOM allow-oom flag is not set on the script, can not run it when used memory > 'maxmemory'",
        ));
    }
    if !flags.no_writes && host.script_noreplicas() {
        return Err(Reply::err(crate::store::NOREPLICAS));
    }
    if !flags.no_writes && read_only_cmd {
        return Err(Reply::err(
            "ERR Can not execute a script with write flag using *_ro command.",
        ));
    }
    Ok(())
}

fn erase_host(host: &mut dyn ScriptHost) -> *mut (dyn ScriptHost + 'static) {
    let p: *mut (dyn ScriptHost + '_) = host;
    // SAFETY: only the lifetime bound changes; the pointer is cleared before `run`
    // returns, so it never outlives the borrow.
    unsafe { std::mem::transmute::<*mut (dyn ScriptHost + '_), *mut (dyn ScriptHost + 'static)>(p) }
}

unsafe fn push_string_array(l: *mut ffi::lua_State, items: &[Bytes]) {
    // Sized up front to the layout Redis's table ends with after growing one element at a
    // time (`luaCreateArray`): an array part of the next power of two, no hash part. The
    // layout shows: after `ARGV[2] = nil`, `#ARGV` of three arguments is 1 in an array
    // part of 4 (Redis) but 3 in one of exactly 3 (what sizing to the count gave).
    let slots = match items.len() {
        0 => 0,
        n => n.checked_next_power_of_two().unwrap_or(n),
    };
    ffi::lua_createtable(l, c_int::try_from(slots).unwrap_or(0), 0);
    for (j, item) in items.iter().enumerate() {
        super::lua::push_bytes(l, item);
        ffi::lua_rawseti_(l, -2, c_int::try_from(j + 1).unwrap_or(c_int::MAX));
    }
}

/// Run the compiled function stored under registry reference `func_ref`.
pub(crate) fn run(
    vm: &Vm,
    func_ref: c_int,
    inv: &Invocation,
    host: &mut dyn ScriptHost,
    ctx: &ScriptContext,
) -> Reply {
    if let Err(reply) = prepare(host, inv.flags, inv.read_only_cmd) {
        return reply;
    }
    let mut state = RunState {
        read_only: inv.read_only_cmd || (!inv.flags.eval_compat && inv.flags.no_writes),
        allow_oom: !inv.flags.eval_compat && inv.flags.allow_oom,
        ..RunState::new(erase_host(host), &ctx.control)
    };
    vm.reset_for_run(ctx.seed);
    vm.collect_if_crowded();
    vm.reset_ids(super::lua::SCRIPT_IDS);
    let nargs: c_int = if inv.is_function { 2 } else { 0 };
    // SAFETY: engine-side stack work on our own state, relaxed so it cannot fail.
    vm.relaxed(|l| unsafe {
        vm.push_error_handler();
        ffi::lua_rawgeti_(l, ffi::LUA_REGISTRYINDEX, func_ref);
        if inv.is_function {
            push_string_array(l, inv.keys);
            push_string_array(l, inv.argv);
        } else {
            vm.push_ref(vm.refs.globals);
            vm.push_ref(vm.refs.keys);
            push_string_array(l, inv.keys);
            ffi::lua_rawset(l, -3);
            vm.push_ref(vm.refs.argv);
            push_string_array(l, inv.argv);
            ffi::lua_rawset(l, -3);
            ffi::lua_pop(l, 1);
        }
    });
    ctx.control
        .start(inv.name, inv.command, inv.is_function, state.started);
    let l = vm.l;
    // SAFETY: the handler and function were pushed above; the hook reads `state`
    // through the shared block only while `with_run` has it installed.
    let status = vm.with_run(&mut state, || unsafe {
        install_hook(l);
        let status = ffi::lua_pcall(l, nargs, 1, -(nargs + 2));
        remove_hook(l);
        status
    });
    ctx.control.finish();
    let resp = state.resp;
    if status == 0 {
        // The reply's copy counts against what the VM has left (`scripting::budget`):
        // garbage the script left behind must not make it fail (the result is on the
        // stack, so it survives the collection).
        vm.collect_if_crowded();
    }
    // SAFETY: the result (or error) and the handler are on the stack.
    let reply = vm.relaxed(|l| unsafe {
        if counted_error(vm, l) {
            host.error_counted();
        }
        let reply = if status == 0 {
            // Like a script whose own allocations hit the cap (see `scripting::budget`).
            let mut nested = NestedErrors::default();
            match pop_reply(l, resp, &mut nested) {
                Ok(reply) => {
                    for text in &nested.new {
                        host.record_error(text);
                    }
                    host.record_failures(nested.failures());
                    reply
                }
                Err(()) => Reply::Error(format!(
                    "ERR Error running script {}, not enough memory",
                    inv.name
                )),
            }
        } else {
            error_reply(l, inv.name)
        };
        ffi::lua_pop(l, 1);
        reply
    });
    if status == ffi::LUA_ERRMEM || vm.over_limit() {
        vm.full_gc();
    } else if vm.gc_due(GC_PERIOD) {
        // Like Redis, this periodic step is the only GC call between scripts: it also
        // restarts a collector a script stopped with `collectgarbage('stop')`. (Restarting
        // before every script instead forced a GC step into every call.)
        // SAFETY: a GC step cannot raise (no finalizers on our objects).
        vm.relaxed(|l| unsafe { ffi::lua_gc(l, ffi::LUA_GCSTEP, GC_PERIOD as c_int) });
    }
    reply
}

/// Whether the value on top (the script's result or the error it raised) is the error
/// table of a `redis.call` (`ignore_error_stats_update` set, Redis's
/// `ERR_REPLY_FLAG_NO_STATS_UPDATE`): that error was counted in errorstats where it arose.
unsafe fn counted_error(vm: &Vm, l: *mut ffi::lua_State) -> bool {
    if ffi::lua_type(l, -1) != ffi::LUA_TTABLE {
        return false;
    }
    vm.push_ref(vm.refs.err);
    ffi::lua_rawget_(l, -2);
    let is_error = ffi::lua_type(l, -1) == ffi::LUA_TSTRING;
    ffi::lua_pop(l, 1);
    // Most results are no error tables: then the flag is not looked up at all.
    if !is_error {
        return false;
    }
    let flagged = raw_get_str(l, -1, "ignore_error_stats_update") != ffi::LUA_TNIL
        && ffi::lua_toboolean(l, -1) != 0;
    ffi::lua_pop(l, 1);
    flagged
}

/// The reply for a failed run (error value on top, popped).
unsafe fn error_reply(l: *mut ffi::lua_State, name: &str) -> Reply {
    let reply = if ffi::lua_type(l, -1) == ffi::LUA_TTABLE {
        raw_get_str(l, -1, "err");
        let msg = string_or_number(l, -1).unwrap_or_else(|| b"ERR unknown error".to_vec());
        raw_get_str(l, -2, "source");
        let source = string_or_number(l, -1);
        raw_get_str(l, -3, "line");
        let line = string_or_number(l, -1);
        ffi::lua_pop(l, 3);
        let mut text = msg;
        if let (Some(source), Some(line)) = (source, line) {
            text.extend_from_slice(format!(" script: {name}, on ").as_bytes());
            text.extend_from_slice(&source);
            text.push(b':');
            text.extend_from_slice(&line);
            text.push(b'.');
        }
        Reply::Error(map_crlf(&text))
    } else {
        let msg = string_or_number(l, -1).unwrap_or_else(|| b"execution failure".to_vec());
        let msg = &msg[..msg.len().min(100)];
        let mut text = format!("ERR Error running script {name}, ").into_bytes();
        text.extend_from_slice(msg);
        Reply::Error(super::convert::error_reply_text(&text))
    };
    ffi::lua_pop(l, 1);
    reply
}

/// Create a VM of the given kind with its sandboxed globals and `redis` table.
pub(crate) fn new_vm(kind: super::lua::VmKind, limits: ScriptLimits) -> Vm {
    let mut vm = Vm::new(limits.memory_bytes);
    let api = match kind {
        super::lua::VmKind::Eval => super::api::ApiKind::Eval,
        super::lua::VmKind::Functions => super::api::ApiKind::FunctionRuntime,
    };
    // SAFETY: building the globals of a fresh state; relaxed so it cannot fail.
    vm.relaxed(|l| unsafe {
        super::api::push_redis_table(l, api);
        super::sandbox::build(l);
    });
    // SAFETY: as above; the globals table is in the registry once the sandbox is built.
    vm.refs.globals = vm.relaxed(|l| unsafe {
        super::lua::registry_get(l, STORAGE);
        ffi::luaL_ref(l, ffi::LUA_REGISTRYINDEX)
    });
    vm
}
