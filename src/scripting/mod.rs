//! Lua scripting exactly like Redis 7: `EVAL`/`EVALSHA`/`*_RO`, `SCRIPT ...`,
//! `FCALL`/`FCALL_RO` and `FUNCTION ...`.
//!
//! This module owns two sandboxed Lua 5.1 VMs (one for `EVAL` scripts, one for
//! function libraries, as Redis does), the script cache, the function libraries,
//! the `redis.*` API, the bundled `cjson`, `cmsgpack`, `bit` and `struct`
//! libraries, and the conversion between Lua values and [`Reply`]. The rest of the
//! server is reached only through [`ScriptHost`]: running a command and knowing its
//! flags. Everything a script computes depends only on the keyspace (through the
//! host), the command arguments and `now_ms` (answered by the host for `TIME`), so
//! the same engine can be the Raft state machine: the PRNG is seeded before every
//! script from the command's seed (its place in the log), `cjson` settings are reset, and there is no clock, file or OS access.
//!
//! Layout: [`lua`] is the raw VM (allocator with a memory cap, stack helpers,
//! protected C functions), [`sandbox`] builds the read-only globals, [`api`] is the
//! `redis.*` table, [`convert`] maps Lua values and replies both ways, [`eval`] and
//! [`functions`] implement the commands, and `cjson`/`cmsgpack`/`bitop`/`structlib`
//! are the libraries.

mod api;
mod bitop;
mod boundary;
mod budget;
mod cjson;
mod cmsgpack;
mod convert;
mod eval;
mod exec;
mod functions;
#[cfg(test)]
mod golden;
mod lua;
mod rand48;
mod rdb;
mod sandbox;
mod structlib;
#[cfg(test)]
mod tests;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;

use crate::protocol::Reply;

/// What a script needs from the server: running commands and knowing their flags.
pub trait ScriptHost {
    /// Flags of a command by lower-case name; None = unknown command.
    ///
    /// For commands with subcommands the engine asks again with `"name|sub"`
    /// (e.g. `"config|get"`) when the script passed a second argument.
    fn command_info(&self, name: &str) -> Option<CommandInfo>;

    /// Execute one command (args[0] = name as the script gave it) against the keyspace
    /// in the script's selected db, with the reply in the protocol version `resp` (2 or 3)
    /// the script selected via redis.setresp. Errors come back as Reply::Error. The host
    /// has already been told (via the CommandInfo checks performed here) that the call is
    /// allowed.
    fn call(&mut self, args: &[Bytes], resp: u8) -> Reply;

    /// `redis.acl_check_cmd`: whether the script's caller may run `args` (name first),
    /// without logging a refusal (Redis's `ACLCheckAllUserCommandPerm`); None when
    /// `args` name no command, or `args[1]` is no subcommand of a container (Redis's
    /// `lookupCommand` finds no command). One lookup answers both.
    fn acl_permits(&self, args: &[Bytes]) -> Option<bool>;

    /// Count a call of the known command `args` (name first) that the script's checks
    /// refused before it ran (INFO commandstats `rejected_calls`).
    fn record_rejected(&self, _args: &[Bytes]) {}

    /// Count an error reply `text` (`CODE message`) in INFO errorstats: a call the
    /// script's checks refused (Redis's `scriptCall` counts those, whether the script
    /// catches them with `pcall` or not).
    fn record_error(&self, _text: &str) {}

    /// The script's reply is an error a `redis.call` made (its table carries
    /// `ignore_error_stats_update`), already counted where it arose: the command that ran
    /// the script does not count it again.
    fn error_counted(&mut self) {}

    /// The script's reply holds `n` nested errors that make its call failed `n` more
    /// times (see `convert::NestedErrors`): counted in the calling command's
    /// `failed_calls`.
    fn record_failures(&mut self, _n: u64) {}

    /// Whether used memory is above `maxmemory` (Redis's `server.script_oom`): then
    /// scripts without `allow-oom` may not start and deny-oom commands are refused
    /// until the script has written.
    fn script_oom(&self) -> bool {
        false
    }

    /// Whether writes are refused because `min-replicas-to-write` is not met: then
    /// scripts that declare writes may not start, and a write call is refused until the
    /// script has written (Redis's `checkGoodReplicasStatus` in `scriptPrepareForRun` and
    /// `scriptVerifyWriteCommandAllow`).
    fn script_noreplicas(&self) -> bool {
        false
    }

    /// Whether the server runs in Redis Cluster mode (scripts flagged `no-cluster`
    /// are then refused).
    fn cluster_enabled(&self) -> bool {
        false
    }

    /// Called from the script's count hook once it has run for [`LONG_SCRIPT`]: a host
    /// that shares its thread with other clients hands that work to another thread here,
    /// so that they can be answered `-BUSY` and send `SCRIPT KILL` while the script keeps
    /// this thread. Returns whether that is done; if not, the engine asks again later.
    fn script_runs_long(&mut self) -> bool {
        true
    }
}

/// How long a script runs before the engine calls [`ScriptHost::script_runs_long`]. Short
/// scripts (the common case: a limiter script takes tens of microseconds) never pay for
/// moving threads.
pub const LONG_SCRIPT: Duration = Duration::from_millis(1);

/// The command-table facts the engine checks before handing a call to the host.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CommandInfo {
    /// Redis arity: `n > 0` means exactly `n` arguments (name included), `-n` at least `n`.
    pub arity: i32,
    /// The command may modify the keyspace (`write` flag).
    pub write: bool,
    /// The command is refused inside scripts (`noscript` flag).
    pub noscript: bool,
    /// The command may grow memory and is refused when over `maxmemory` (`denyoom`).
    pub deny_oom: bool,
    /// The command is a container (`CONFIG`, `CLIENT`, ...) whose second argument
    /// selects a subcommand looked up as `"name|sub"`.
    pub has_subcommands: bool,
}

/// Resource limits for the Lua VMs.
#[derive(Clone, Copy, Debug)]
pub struct ScriptLimits {
    /// Bytes of memory each Lua VM may allocate before scripts fail with
    /// "not enough memory".
    pub memory_bytes: usize,
}

impl Default for ScriptLimits {
    fn default() -> Self {
        ScriptLimits {
            memory_bytes: 256 * 1024 * 1024,
        }
    }
}

/// The caller's side of one script call (EVAL, FCALL, SCRIPT or FUNCTION).
#[derive(Clone)]
pub struct ScriptContext {
    /// The client's protocol version (2 or 3).
    pub resp: u8,
    /// The time of the command (Raft entry time); the engine itself never reads a clock
    /// for results, `TIME` is answered by the host.
    pub now_ms: u64,
    /// The client's selected database (the host runs script commands in it).
    pub db: usize,
    /// Shared BUSY / kill state, also held by other connections.
    pub control: Arc<ScriptControl>,
    /// The command's seed (from its Raft entry and position in a cluster or durable node,
    /// from a local counter otherwise): the script's `math.random` starts as if it had
    /// called `math.randomseed` with it, so two calls draw different numbers, as on Redis
    /// 7.0, and every replica draws the same ones. Seed 0 is `math.randomseed(0)`.
    pub seed: u64,
}

/// Redis's BUSY reply while an `EVAL` script runs past the busy threshold.
pub const BUSY_SCRIPT_ERROR: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
/// Redis's BUSY reply while a function (`FCALL`) runs past the busy threshold.
pub const BUSY_FUNCTION_ERROR: &str =
    "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";
/// Reply to SCRIPT KILL / FUNCTION KILL when nothing runs.
pub const NOTBUSY_ERROR: &str = "NOTBUSY No scripts in execution right now.";
/// Reply to a kill request once the script has written.
pub const UNKILLABLE_ERROR: &str = "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.";
/// `EVALSHA` of an unknown script.
pub const NOSCRIPT_ERROR: &str = "NOSCRIPT No matching script. Please use EVAL.";
/// The Redis version scripts see in `redis.REDIS_VERSION`.
pub const REDIS_VERSION: &str = "7.2.4";
/// `redis.REDIS_VERSION_NUM` (`0x00MMmmpp`).
pub const REDIS_VERSION_NUM: u32 = 0x0007_0204;

/// The busy reply text other connections should send for the script now running,
/// if one has run for at least `threshold`.
pub fn busy_error(control: &ScriptControl, threshold: Duration) -> Option<&'static str> {
    let running = control.running.lock();
    let run = running.as_ref()?;
    if run.started.elapsed() < threshold {
        return None;
    }
    Some(if run.is_function {
        BUSY_FUNCTION_ERROR
    } else {
        BUSY_SCRIPT_ERROR
    })
}

/// Shared between the running script and other connections: BUSY and SCRIPT KILL.
#[derive(Default)]
pub struct ScriptControl {
    running: Mutex<Option<RunningScript>>,
    kill_requested: AtomicBool,
    has_written: AtomicBool,
    libraries: AtomicUsize,
    functions: AtomicUsize,
}

struct RunningScript {
    name: String,
    command: Vec<Bytes>,
    is_function: bool,
    // Only decides BUSY replies and kill eligibility, never a script result.
    started: Instant,
}

impl ScriptControl {
    /// A fresh control block (no script running).
    pub fn new() -> Self {
        Self::default()
    }

    /// How long the current script has been running, if one is.
    pub fn running_for(&self) -> Option<Duration> {
        self.running.lock().as_ref().map(|r| r.started.elapsed())
    }

    /// Whether the running script is a function (`FCALL`) rather than an `EVAL`.
    pub fn running_function(&self) -> Option<bool> {
        self.running.lock().as_ref().map(|r| r.is_function)
    }

    /// SCRIPT KILL (`from_function == false`) or FUNCTION KILL (`true`).
    pub fn request_kill(&self, from_function: bool) -> Reply {
        let running = self.running.lock();
        let Some(run) = running.as_ref() else {
            return Reply::err(NOTBUSY_ERROR);
        };
        if self.has_written.load(Ordering::SeqCst) {
            return Reply::err(UNKILLABLE_ERROR);
        }
        if !from_function && run.is_function {
            return Reply::err(BUSY_FUNCTION_ERROR);
        }
        if from_function && !run.is_function {
            return Reply::err(BUSY_SCRIPT_ERROR);
        }
        self.kill_requested.store(true, Ordering::SeqCst);
        Reply::ok()
    }

    /// FUNCTION STATS, answerable while a script runs (Redis allows it while busy).
    pub fn function_stats(&self) -> Reply {
        let running = self.running.lock();
        let running_script = match running.as_ref() {
            Some(run) if !run.is_function => return Reply::err(BUSY_SCRIPT_ERROR),
            Some(run) => Reply::Map(vec![
                (Reply::bulk("name"), Reply::bulk(run.name.clone())),
                (
                    Reply::bulk("command"),
                    Reply::Array(run.command.iter().cloned().map(Reply::Bulk).collect()),
                ),
                (
                    Reply::bulk("duration_ms"),
                    Reply::Integer(
                        i64::try_from(run.started.elapsed().as_millis()).unwrap_or(i64::MAX),
                    ),
                ),
            ]),
            None => Reply::Nil,
        };
        let counts = Reply::Map(vec![
            (
                Reply::bulk("libraries_count"),
                Reply::Integer(count(&self.libraries)),
            ),
            (
                Reply::bulk("functions_count"),
                Reply::Integer(count(&self.functions)),
            ),
        ]);
        Reply::Map(vec![
            (Reply::bulk("running_script"), running_script),
            (
                Reply::bulk("engines"),
                Reply::Map(vec![(Reply::bulk("LUA"), counts)]),
            ),
        ])
    }

    /// A script started at `started` (the run's own start: one clock read serves both).
    fn start(&self, name: &str, command: &[Bytes], is_function: bool, started: Instant) {
        self.kill_requested.store(false, Ordering::SeqCst);
        self.has_written.store(false, Ordering::SeqCst);
        // Only FUNCTION STATS shows the name and command, and only of a function: an
        // EVAL script (the hot path) copies neither.
        let (name, command) = if is_function {
            (name.to_string(), command.to_vec())
        } else {
            (String::new(), Vec::new())
        };
        *self.running.lock() = Some(RunningScript {
            name,
            command,
            is_function,
            started,
        });
    }

    fn finish(&self) {
        *self.running.lock() = None;
        self.kill_requested.store(false, Ordering::SeqCst);
        self.has_written.store(false, Ordering::SeqCst);
    }

    fn kill_requested(&self) -> bool {
        self.kill_requested.load(Ordering::SeqCst)
    }

    fn mark_written(&self) {
        self.has_written.store(true, Ordering::SeqCst);
    }

    fn set_counts(&self, libraries: usize, functions: usize) {
        self.libraries.store(libraries, Ordering::SeqCst);
        self.functions.store(functions, Ordering::SeqCst);
    }
}

fn count(n: &AtomicUsize) -> i64 {
    i64::try_from(n.load(Ordering::SeqCst)).unwrap_or(i64::MAX)
}

/// Flags a script declares in its `#!lua flags=...` shebang or a function in
/// `redis.register_function{flags=...}`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScriptFlags {
    /// The script has no shebang: Redis's backwards-compatible EVAL mode, where
    /// none of the flags below are enforced at start.
    pub eval_compat: bool,
    /// `no-writes`: write commands are refused.
    pub no_writes: bool,
    /// `allow-oom`: may run (and write) while over `maxmemory`.
    pub allow_oom: bool,
    /// `allow-stale`: may run on a stale replica.
    pub allow_stale: bool,
    /// `no-cluster`: refuses to run in cluster mode.
    pub no_cluster: bool,
    /// `allow-cross-slot-keys`: may touch keys of several slots.
    pub allow_cross_slot_keys: bool,
}

impl ScriptFlags {
    /// The flag names in Redis's canonical order, with their setters.
    const NAMES: [&'static str; 5] = [
        "no-writes",
        "allow-oom",
        "allow-stale",
        "no-cluster",
        "allow-cross-slot-keys",
    ];

    fn set(&mut self, name: &str, ignore_case: bool) -> bool {
        let eq = |a: &str| {
            if ignore_case {
                a.eq_ignore_ascii_case(name)
            } else {
                a == name
            }
        };
        if eq("no-writes") {
            self.no_writes = true;
        } else if eq("allow-oom") {
            self.allow_oom = true;
        } else if eq("allow-stale") {
            self.allow_stale = true;
        } else if eq("no-cluster") {
            self.no_cluster = true;
        } else if eq("allow-cross-slot-keys") {
            self.allow_cross_slot_keys = true;
        } else {
            return false;
        }
        true
    }

    fn names(&self) -> Vec<&'static str> {
        let on = [
            self.no_writes,
            self.allow_oom,
            self.allow_stale,
            self.no_cluster,
            self.allow_cross_slot_keys,
        ];
        Self::NAMES
            .iter()
            .zip(on)
            .filter(|(_, set)| *set)
            .map(|(n, _)| *n)
            .collect()
    }
}

/// The replicated part of the scripting state: cached EVAL bodies and function libraries.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct ScriptsExport {
    /// Bodies of the cached EVAL scripts, ordered by SHA1.
    pub eval_bodies: Vec<Bytes>,
    /// The libraries in `FUNCTION DUMP` format (empty when there are none).
    pub functions_dump: Vec<u8>,
}

/// One Lua VM for `EVAL` scripts, one for function libraries, the script cache and
/// the libraries; `Send`, driven by one command at a time under the keyspace lock.
pub struct ScriptEngine {
    limits: ScriptLimits,
    eval: eval::EvalScripts,
    functions: functions::Functions,
}

impl ScriptEngine {
    /// A fresh engine with empty script cache and no libraries.
    pub fn new(limits: ScriptLimits) -> Self {
        ScriptEngine {
            eval: eval::EvalScripts::new(limits),
            functions: functions::Functions::new(limits),
            limits,
        }
    }

    /// Runs one scripting command: `args` are the full command including its name, arity
    /// already checked (the command table's row names `call`).
    pub fn call(
        &mut self,
        call: ScriptCall,
        host: &mut dyn ScriptHost,
        args: &[Bytes],
        ctx: &ScriptContext,
    ) -> Reply {
        self.functions.publish_counts(&ctx.control);
        match call {
            ScriptCall::Eval { by_sha, read_only } => {
                self.eval.eval(host, args, ctx, by_sha, read_only)
            }
            ScriptCall::Fcall { read_only } => self.functions.fcall(host, args, ctx, read_only),
            ScriptCall::Script => self.eval.script_command(args, ctx, self.limits),
            ScriptCall::Function => self.functions.function_command(args, ctx),
        }
    }

    /// The flags declared by the script or function a call would run (None when unknown),
    /// so that a dispatcher can apply Redis's command-level checks (OOM, readonly replica).
    pub fn declared_flags(&self, target: ScriptTarget<'_>) -> Option<ScriptFlags> {
        match target {
            ScriptTarget::Body(body) => self.eval.flags_of_body(body),
            ScriptTarget::Sha(sha) => self.eval.flags_of_sha(sha),
            ScriptTarget::Function(name) => self.functions.flags_of(name),
        }
    }

    /// The script cache and function libraries as plain data, for a replicated snapshot.
    pub fn export(&self) -> ScriptsExport {
        ScriptsExport {
            eval_bodies: self.eval.export(),
            functions_dump: self.functions.export(),
        }
    }

    /// Replace the script cache and libraries with `export`'s output (fresh Lua VMs).
    pub fn import(&mut self, data: &ScriptsExport) -> Result<(), String> {
        let mut eval = eval::EvalScripts::new(self.limits);
        eval.import(&data.eval_bodies)?;
        let mut functions = functions::Functions::new(self.limits);
        if !data.functions_dump.is_empty() {
            functions.import(&data.functions_dump)?;
        }
        self.eval = eval;
        self.functions = functions;
        Ok(())
    }

    /// After a panic unwound through the engine (see `engine::poison`): mark no script as
    /// running and rebuild both Lua VMs from the script cache and function libraries,
    /// since the unwind may have left a VM in the middle of a call. Deterministic, so
    /// every replica that applies the same entry ends up with the same engine.
    pub fn recover_after_panic(&mut self, control: &ScriptControl) {
        control.finish();
        let export = self.export();
        if let Err(e) = self.import(&export) {
            tracing::error!(error = %e, "could not rebuild the script engine; starting it empty");
            self.eval = eval::EvalScripts::new(self.limits);
            self.functions = functions::Functions::new(self.limits);
        }
    }

    /// Number of scripts in the EVAL cache (for INFO).
    pub fn cached_scripts(&self) -> usize {
        self.eval.len()
    }

    /// Bytes used by the two Lua VMs (for INFO `used_memory_lua`/`used_memory_vm_functions`).
    pub fn used_memory(&self) -> (usize, usize) {
        (self.eval.used_memory(), self.functions.used_memory())
    }
}

/// Which scripting command runs (see [`ScriptEngine::call`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScriptCall {
    /// EVAL, EVALSHA (`by_sha`) and their `_RO` variants (`read_only`).
    Eval {
        /// The script is named by its SHA1 (EVALSHA).
        by_sha: bool,
        /// Write commands are refused (EVAL_RO, EVALSHA_RO).
        read_only: bool,
    },
    /// FCALL and FCALL_RO (`read_only`).
    Fcall {
        /// Write commands are refused (FCALL_RO).
        read_only: bool,
    },
    /// SCRIPT subcommand ...
    Script,
    /// FUNCTION subcommand ...
    Function,
}

/// What a script call names: EVAL's body, EVALSHA's SHA1, FCALL's function.
#[derive(Debug, Clone, Copy)]
pub enum ScriptTarget<'a> {
    /// The script's source (EVAL, EVAL_RO).
    Body(&'a [u8]),
    /// The SHA1 of a cached script (EVALSHA, EVALSHA_RO).
    Sha(&'a [u8]),
    /// A function's name (FCALL, FCALL_RO).
    Function(&'a [u8]),
}

/// Room for the command names lower-cased on the stack by [`ascii_lowercase`].
const NAME_BUF: usize = 32;

/// `b` lower-cased into `buf` when it is ASCII and fits (command names, SHA1s): the
/// common case needs no allocation. None otherwise.
fn ascii_lowercase<'a, const N: usize>(b: &[u8], buf: &'a mut [u8; N]) -> Option<&'a str> {
    if b.len() > N || !b.is_ascii() {
        return None;
    }
    let out = &mut buf[..b.len()];
    out.copy_from_slice(b);
    out.make_ascii_lowercase();
    std::str::from_utf8(out).ok()
}

/// `b` as lower-case text, invalid UTF-8 replaced (for error messages).
fn lossy_lower(b: &[u8]) -> String {
    String::from_utf8_lossy(b).to_ascii_lowercase()
}

/// Parse a Redis integer argument (`string2ll` rules: optional '-', no '+', no spaces).
fn parse_i64(b: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(b).ok()?;
    if s.is_empty()
        || s.starts_with('+')
        || (s.len() > 1 && s.starts_with('0'))
        || s.starts_with("-0")
    {
        return None;
    }
    s.parse::<i64>().ok()
}
