//! EVAL, EVALSHA, EVAL_RO, EVALSHA_RO, SCRIPT, FCALL, FCALL_RO and FUNCTION: the glue
//! between the command table and the Lua engine in `crate::scripting`.
//!
//! A script runs as one keyspace command: atomically, with the batch's `now_ms`, and
//! its `redis.call`s go through [`Host`] back into the same command table. SCRIPT KILL,
//! FUNCTION KILL and FUNCTION STATS never reach here: the rows of SCRIPT and FUNCTION send
//! them to the connection first, which answers them without waiting for the running script
//! (`server::client_commands::script_control`).

use bytes::Bytes;

use super::flags::{DENYOOM, NOSCRIPT, SCRIPT, SKIP_MONITOR, WRITE};
use super::{Ctx, Keys};
use crate::protocol::Reply;
use crate::scripting::{
    CommandInfo, ScriptCall, ScriptContext, ScriptEngine, ScriptHost, ScriptTarget,
};
use crate::store::Keyspace;

/// What `redis.call` runs against: the keyspace of the script's batch.
pub struct Host<'a> {
    ks: &'a mut Keyspace,
    db: usize,
    now_us: u64,
    /// The script's seed; each `redis.call` gets its own from it and the call's number.
    seed: u64,
    calls: u64,
    oom: bool,
    metrics: Option<&'a crate::metrics::Metrics>,
    /// The ACL user each call is checked against (None: every permission).
    user: Option<&'a crate::acl::ScriptUser>,
    /// Feed each call to the monitors as `[db lua]` (see `Ctx::monitored`).
    monitored: bool,
    /// The script's error reply was counted where it arose (see `Ctx::error_counted`).
    error_counted: bool,
    /// Failures of the script's call beyond its reply's own (errors nested in its reply,
    /// see `ScriptHost::record_failures`).
    failures: u64,
    /// The entry `command_info` found last: the engine asks for a call's flags, then
    /// runs it, so `call` usually finds its command here instead of in the table.
    last_spec: std::cell::Cell<Option<&'static super::CommandSpec>>,
}

impl<'a> Host<'a> {
    /// `redis.call` against database `db` of `ks` at `now_us` with random choices seeded
    /// from `seed`; `oom`: Redis's out-of-memory state before the script (see `Ctx::oom`).
    pub fn new(ks: &'a mut Keyspace, db: usize, now_us: u64, seed: u64, oom: bool) -> Host<'a> {
        Host {
            ks,
            db,
            now_us,
            seed,
            calls: 0,
            oom,
            metrics: None,
            user: None,
            monitored: false,
            error_counted: false,
            failures: 0,
            last_spec: std::cell::Cell::new(None),
        }
    }

    /// The table entry of `args[0]`: the one `command_info` found last when it is that
    /// command (names match case-insensitively exactly when `lookup` would find it).
    fn spec_of(&self, args: &[Bytes]) -> Option<&'static super::CommandSpec> {
        let name = args.first()?;
        match self.last_spec.get() {
            Some(spec) if spec.name.as_bytes().eq_ignore_ascii_case(name) => Some(spec),
            _ => super::lookup(name),
        }
    }

    /// Count the `redis.call`s (commands, limiter decisions) in `metrics`.
    pub fn counted(self, metrics: Option<&'a crate::metrics::Metrics>) -> Host<'a> {
        Host { metrics, ..self }
    }

    /// Check each call against `user`'s permissions, as Redis checks the script caller's.
    pub fn as_user(self, user: Option<&'a crate::acl::ScriptUser>) -> Host<'a> {
        Host { user, ..self }
    }

    /// Feed each call to the monitors (MONITOR's `[db lua]` lines).
    pub fn monitored(self, monitored: bool) -> Host<'a> {
        Host { monitored, ..self }
    }
}

impl ScriptHost for Host<'_> {
    fn command_info(&self, name: &str) -> Option<CommandInfo> {
        let spec = super::lookup(name.as_bytes());
        self.last_spec.set(spec);
        // A container's call is looked up again as `container|sub` (`has_subcommands`): the
        // subcommand's arity and flags decide, as Redis's `lookupCommand` does (one Tollgate
        // does not implement is an unknown command, as in Redis).
        let subcommand = spec
            .is_none()
            .then(|| super::table::lookup_subcommand(name.as_bytes()))
            .flatten();
        if let Some((container, sub)) = subcommand {
            self.last_spec.set(Some(container));
            return Some(CommandInfo {
                arity: crate::acl::categories::subcommand_arity(sub.name)?,
                write: sub.flags & WRITE != 0,
                noscript: !container.runs_in_engine() || sub.flags & NOSCRIPT != 0,
                deny_oom: sub.flags & DENYOOM != 0,
                has_subcommands: false,
            });
        }
        let Some(spec) = spec else {
            // A command Tollgate lacks that Redis refuses in scripts anyway (blocking
            // commands, SUBSCRIBE, WAIT, ...) gets Redis's refusal, not "Unknown".
            return redis_refuses_in_scripts(name).then_some(CommandInfo {
                arity: -1,
                write: false,
                noscript: true,
                deny_oom: false,
                has_subcommands: false,
            });
        };
        Some(CommandInfo {
            arity: spec.arity,
            write: spec.has(WRITE),
            noscript: !spec.allowed_in_scripts(),
            deny_oom: spec.has(DENYOOM),
            // A connection container (CONFIG, CLUSTER, ...) is refused whatever its
            // subcommand, as its row says (including one Redis has and Tollgate lacks:
            // `cluster reset` is not allowed, not unknown).
            has_subcommands: !spec.subcommands.is_empty() && spec.runs_in_engine(),
        })
    }

    fn acl_permits(&self, args: &[Bytes]) -> Option<bool> {
        let Some(spec) = args.first().and_then(|n| super::lookup(n)) else {
            // A command Tollgate lacks but Redis has (and refuses in scripts, see
            // `command_info`) is known: no user here can be refused it.
            let name = String::from_utf8_lossy(args.first()?).to_ascii_lowercase();
            return redis_refuses_in_scripts(&name).then_some(true);
        };
        super::with_slices(args, |a| {
            let commands = crate::acl::categories::commands();
            let id = super::table::index(spec);
            let container = !commands.list[id].subs.is_empty();
            if container && a.len() >= 2 && commands.id_of_call(spec, a) == id {
                return None;
            }
            Some(self.user.is_none_or(|u| u.user.check(spec, a).is_ok()))
        })
    }

    fn record_rejected(&self, args: &[Bytes]) {
        if let (Some(metrics), Some(spec)) =
            (self.metrics, args.first().and_then(|n| super::lookup(n)))
        {
            metrics.record_rejected(spec);
        }
    }

    fn record_error(&self, text: &str) {
        if let Some(metrics) = self.metrics {
            metrics.record_error(text);
        }
    }

    fn error_counted(&mut self) {
        self.error_counted = true;
    }

    fn record_failures(&mut self, n: u64) {
        self.failures += n;
    }

    fn call(&mut self, args: &[Bytes], resp: u8) -> Reply {
        let spec = self.spec_of(args);
        if let Some(user) = self.user {
            if let Some(spec) = spec {
                if let Some(e) = super::with_slices(args, |a| user.check(spec, a)) {
                    if let Some(metrics) = self.metrics {
                        metrics.record_rejected(spec);
                        // Redis's `scriptCall` counts its refusals in errorstats, caught
                        // by `pcall` or not.
                        metrics.record_error(&e);
                    }
                    return Reply::err(e);
                }
            }
        }
        self.calls += 1;
        let mut ctx = Ctx {
            ks: self.ks,
            db: self.db,
            now_ms: self.now_us / 1000,
            now_us: self.now_us,
            seed: super::collection::mix(self.seed ^ self.calls),
            resp,
            oom: self.oom,
            scripts: None,
            metrics: self.metrics,
            user: None,
            monitored: false,
            error_counted: false,
        };
        let reply = match (self.metrics, spec) {
            (Some(metrics), Some(spec)) => {
                let started = std::time::Instant::now();
                let reply = super::execute_spec(&mut ctx, spec, args);
                let failed = matches!(&reply, Reply::Error(_));
                super::with_slices(args, |a| {
                    metrics.record_call(spec, a, started.elapsed(), failed)
                });
                if let Reply::Error(e) = &reply {
                    metrics.record_error(e);
                }
                reply
            }
            (None, Some(spec)) => super::execute_spec(&mut ctx, spec, args),
            (_, None) => super::execute(&mut ctx, args),
        };
        let next_db = ctx.db;
        if self.monitored {
            // Calls refused before they run (unknown, wrong arity) are not shown.
            if let Some(spec) = spec.filter(|s| super::arity_ok(s, args.len())) {
                // As Redis: the database selected after the call (SELECT shows its own).
                let db = next_db;
                super::with_slices(args, |a| {
                    self.ks
                        .pubsub
                        .monitors
                        .after(spec, a, db, crate::pubsub::monitor::Source::Lua)
                });
            }
        }
        // SELECT changes the database of the rest of the script.
        self.db = next_db;
        reply
    }

    fn script_oom(&self) -> bool {
        self.oom
    }

    fn script_noreplicas(&self) -> bool {
        self.ks.no_good_replicas
    }

    fn script_runs_long(&mut self) -> bool {
        hand_off_runtime_worker()
    }
}

/// Redis 7.0's commands flagged `noscript`, generated from redis-server's COMMAND INFO by
/// `tools/redis_noscript.py`.
const REDIS_NOSCRIPT: &str = include_str!("redis_noscript.txt");

/// Whether Redis refuses `name` (lower case) in scripts.
fn redis_refuses_in_scripts(name: &str) -> bool {
    REDIS_NOSCRIPT
        .lines()
        .filter(|l| !l.starts_with('#'))
        .any(|l| l == name)
}

/// Scripts run on the thread of the client's task, like any other command: handing every
/// script to another thread (`block_in_place` around each batch) cost more than most
/// scripts take. A script that runs long must not keep the runtime from serving other
/// clients, though (they get `-BUSY` and may send `SCRIPT KILL`), which matters most with a
/// single worker thread. So once a script has run for `scripting::LONG_SCRIPT`, its count
/// hook calls this: `block_in_place` moves this worker's core (its queue and its turn at
/// the I/O driver) to a new thread, and we stay inside it until a probe task spawned on the
/// runtime has run. With one worker only the moved core can run the probe, so when it has
/// run the core is gone for good: on return `block_in_place` finds nothing to take back,
/// and the script finishes on this thread outside the worker pool. With more workers
/// another worker may run the probe first and the core may come back; that is fine, as the
/// other workers serve clients meanwhile (`block_in_place` also moved the task this worker
/// would have run next into its stealable queue).
///
/// True when the probe ran (or there is no multi-threaded runtime to free: the Raft
/// apply path outside a worker, unit tests, a current-thread runtime). False when it did
/// not run in time; the engine then asks again later.
fn hand_off_runtime_worker() -> bool {
    use tokio::runtime::{Handle, RuntimeFlavor};
    let Ok(handle) = Handle::try_current() else {
        return true;
    };
    if handle.runtime_flavor() != RuntimeFlavor::MultiThread {
        return true;
    }
    let (ran, probe) = std::sync::mpsc::sync_channel(1);
    tokio::task::block_in_place(|| {
        handle.spawn(async move {
            let _ = ran.send(());
        });
        // Bounded: on an overloaded machine the new thread may start late; then the core
        // comes back and the engine asks again later.
        probe
            .recv_timeout(std::time::Duration::from_millis(50))
            .is_ok()
    })
}

/// Runs scripting command `call` with the Lua engine and a [`Host`] over the keyspace of
/// `ctx`; a script calling a scripting command gets Redis's refusal.
fn run_script(ctx: &mut Ctx, a: &[Bytes], call: ScriptCall) -> Reply {
    let Some(scripts) = ctx.scripts.take() else {
        return Reply::err("ERR This Redis command is not allowed from script");
    };
    let sctx = ScriptContext {
        resp: ctx.resp,
        now_ms: ctx.now_ms,
        db: ctx.db,
        control: scripts.control.clone(),
        seed: ctx.seed,
    };
    let mut host = Host::new(ctx.ks, ctx.db, ctx.now_us, ctx.seed, ctx.oom)
        .counted(ctx.metrics)
        .as_user(ctx.user)
        .monitored(ctx.monitored);
    let reply = scripts.engine.call(call, &mut host, a, &sctx);
    ctx.error_counted = host.error_counted;
    // The command is looked up only when there is something to count.
    if host.failures > 0 {
        if let (Some(metrics), Some(spec)) = (ctx.metrics, a.first().and_then(|n| super::lookup(n)))
        {
            let stats = super::with_slices(a, |s| metrics.subcommand(spec, s));
            stats
                .failed
                .fetch_add(host.failures, std::sync::atomic::Ordering::Relaxed);
        }
    }
    ctx.scripts = Some(scripts);
    reply
}

/// EVAL script numkeys [key ...] [arg ...]; EVALSHA (`BY_SHA`) takes a script's SHA1
/// instead, and the `_RO` variants (`READ_ONLY`) refuse write commands.
pub fn eval<const BY_SHA: bool, const READ_ONLY: bool>(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    let call = ScriptCall::Eval {
        by_sha: BY_SHA,
        read_only: READ_ONLY,
    };
    run_script(ctx, a, call)
}

/// FCALL function numkeys [key ...] [arg ...]; FCALL_RO (`READ_ONLY`) refuses write
/// commands.
pub fn fcall<const READ_ONLY: bool>(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    let call = ScriptCall::Fcall {
        read_only: READ_ONLY,
    };
    run_script(ctx, a, call)
}

/// SCRIPT LOAD|EXISTS|FLUSH|HELP ... (KILL is answered by the connection).
pub fn script(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    run_script(ctx, a, ScriptCall::Script)
}

/// FUNCTION LOAD|LIST|DELETE|FLUSH|DUMP|RESTORE|HELP ... (KILL and STATS are answered by
/// the connection).
pub fn function(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    run_script(ctx, a, ScriptCall::Function)
}

/// Redis's `denyoom` of a script call, by the flags the script declares: one with a
/// shebang may grow memory unless it declares `allow-oom` or `no-writes`; one without (and
/// an unknown script or function) is not refused up front but at its first `denyoom`
/// `redis.call` made before any write (`Host::script_oom`).
fn declared_denyoom(engine: &ScriptEngine, target: ScriptTarget<'_>) -> bool {
    engine
        .declared_flags(target)
        .is_some_and(|f| !f.eval_compat && !f.allow_oom && !f.no_writes)
}

/// `denyoom` of EVAL and EVAL_RO (a body), EVALSHA and EVALSHA_RO (`BY_SHA`).
fn eval_denies_oom<const BY_SHA: bool>(engine: &ScriptEngine, a: &[Bytes]) -> bool {
    a.get(1).is_some_and(|target| {
        let target = if BY_SHA {
            ScriptTarget::Sha(target)
        } else {
            ScriptTarget::Body(target)
        };
        declared_denyoom(engine, target)
    })
}

/// `denyoom` of FCALL and FCALL_RO.
fn fcall_denies_oom(engine: &ScriptEngine, a: &[Bytes]) -> bool {
    a.get(1)
        .is_some_and(|name| declared_denyoom(engine, ScriptTarget::Function(name)))
}

const RUN: u32 = SCRIPT | NOSCRIPT | WRITE | DENYOOM | SKIP_MONITOR;

/// `numkeys` at argument 2, and a script may take no key.
const NUMKEYS: Keys = Keys::Counted {
    at: 2,
    optional: true,
};

/// Scripting commands. Keys follow `numkeys`, so key positions are not fixed. SCRIPT and
/// FUNCTION first go to the connection, which answers KILL and STATS itself.
pub const COMMANDS: &[super::CommandSpec] = &[
    crate::cmd!("eval", -3, RUN, keys: NUMKEYS, eval::<false, false>)
        .denyoom_if(eval_denies_oom::<false>),
    crate::cmd!("evalsha", -3, RUN, keys: NUMKEYS, eval::<true, false>)
        .denyoom_if(eval_denies_oom::<true>),
    crate::cmd!("eval_ro", -3, SCRIPT | NOSCRIPT | SKIP_MONITOR, keys: NUMKEYS, eval::<false, true>)
        .denyoom_if(eval_denies_oom::<false>),
    crate::cmd!("evalsha_ro", -3, SCRIPT | NOSCRIPT | SKIP_MONITOR, keys: NUMKEYS, eval::<true, true>)
        .denyoom_if(eval_denies_oom::<true>),
    crate::cmd!("fcall", -3, RUN, keys: NUMKEYS, fcall::<false>).denyoom_if(fcall_denies_oom),
    crate::cmd!("fcall_ro", -3, SCRIPT | NOSCRIPT | SKIP_MONITOR, keys: NUMKEYS, fcall::<true>)
        .denyoom_if(fcall_denies_oom),
    crate::cmd!(
        "script",
        -2,
        super::flags::SUBCOMMANDS,
        0,
        0,
        0,
        client: crate::server::client_commands::script_control,
        script
    )
    .subcommands(&[
        crate::sub!("script|debug", NOSCRIPT),
        crate::sub!("script|exists", NOSCRIPT),
        crate::sub!("script|flush", NOSCRIPT),
        // Redis lets a script call SCRIPT HELP; here the scripting engine is running the
        // script, so no SCRIPT or FUNCTION call can reach it from one.
        crate::sub!("script|help", NOSCRIPT),
        crate::sub!("script|kill", NOSCRIPT),
        crate::sub!("script|load", NOSCRIPT),
    ]),
    crate::cmd!(
        "function",
        -2,
        super::flags::SUBCOMMANDS,
        0,
        0,
        0,
        client: crate::server::client_commands::function_control,
        function
    )
    .subcommands(&[
        crate::sub!("function|delete", WRITE | NOSCRIPT),
        crate::sub!("function|dump", NOSCRIPT),
        crate::sub!("function|flush", WRITE | NOSCRIPT),
        // Redis lets a script call FUNCTION HELP; here the scripting engine is running the
        // script, so no SCRIPT or FUNCTION call can reach it from one.
        crate::sub!("function|help", NOSCRIPT),
        crate::sub!("function|kill", NOSCRIPT),
        crate::sub!("function|list", NOSCRIPT),
        crate::sub!("function|load", WRITE | DENYOOM | NOSCRIPT),
        crate::sub!("function|restore", WRITE | DENYOOM | NOSCRIPT),
        crate::sub!("function|stats", NOSCRIPT),
    ]),
];
