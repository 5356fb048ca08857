//! EVAL, EVALSHA, EVAL_RO, EVALSHA_RO, SCRIPT, FCALL, FCALL_RO and FUNCTION: the glue
//! between the command table and the Lua engine in `crate::scripting`.
//!
//! A script runs as one keyspace command: atomically, with the batch's `now_ms`, and
//! its `redis.call`s go through [`Host`] back into the same command table. SCRIPT KILL
//! and FUNCTION KILL never reach here: the connection answers them without waiting for
//! the running script.

use bytes::Bytes;

use super::args::db_index;
use super::flags::{CONNECTION, DENYOOM, NOSCRIPT, SCRIPT, WRITE};
use super::Ctx;
use crate::protocol::Reply;
use crate::scripting::{CommandInfo, ScriptContext, ScriptHost};
use crate::store::Keyspace;

/// What `redis.call` runs against: the keyspace of the script's batch.
pub struct Host<'a> {
    ks: &'a mut Keyspace,
    db: usize,
    now_ms: u64,
    oom: bool,
}

impl ScriptHost for Host<'_> {
    fn command_info(&self, name: &str) -> Option<CommandInfo> {
        let spec = super::lookup(name.as_bytes())?;
        // SELECT is the one connection command scripts may use (it changes only the
        // script's database); the rest act on a client and make no sense in a script.
        let connection_only = spec.has(CONNECTION) && spec.name != "select";
        Some(CommandInfo {
            arity: spec.arity,
            write: spec.has(WRITE),
            noscript: spec.has(NOSCRIPT) || connection_only,
            deny_oom: spec.has(DENYOOM),
            has_subcommands: false,
        })
    }

    fn call(&mut self, args: &[Bytes], resp: u8) -> Reply {
        if args
            .first()
            .is_some_and(|n| n.eq_ignore_ascii_case(b"select"))
        {
            // The script layer checked the arity already.
            return match args {
                [_, db] => match db_index(db) {
                    Ok(n) => {
                        self.db = n;
                        Reply::ok()
                    }
                    Err(e) => e,
                },
                _ => super::arity_error("select"),
            };
        }
        let mut ctx = Ctx {
            ks: self.ks,
            db: self.db,
            now_ms: self.now_ms,
            resp,
            oom: self.oom,
            scripts: None,
        };
        super::execute(&mut ctx, args)
    }

    fn script_oom(&self) -> bool {
        self.oom
    }

    fn script_runs_long(&mut self) -> bool {
        hand_off_runtime_worker()
    }
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

/// Every scripting command: hand the whole command to the Lua engine.
pub fn script(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    let Some(scripts) = ctx.scripts.take() else {
        return Reply::err("ERR This Redis command is not allowed from script");
    };
    let sctx = ScriptContext {
        resp: ctx.resp,
        now_ms: ctx.now_ms,
        db: ctx.db,
        control: scripts.control.clone(),
    };
    let mut host = Host {
        ks: ctx.ks,
        db: ctx.db,
        now_ms: ctx.now_ms,
        oom: ctx.oom,
    };
    let reply = scripts.engine.execute(&mut host, a, &sctx);
    ctx.scripts = Some(scripts);
    reply
}

const RUN: u32 = SCRIPT | NOSCRIPT | WRITE | DENYOOM;

/// Scripting commands. Keys follow `numkeys`, so key positions are not fixed.
pub const COMMANDS: &[super::CommandSpec] = &[
    crate::cmd!("eval", -3, RUN, 0, 0, 0, script),
    crate::cmd!("evalsha", -3, RUN, 0, 0, 0, script),
    crate::cmd!("eval_ro", -3, SCRIPT | NOSCRIPT, 0, 0, 0, script),
    crate::cmd!("evalsha_ro", -3, SCRIPT | NOSCRIPT, 0, 0, 0, script),
    crate::cmd!("fcall", -3, RUN, 0, 0, 0, script),
    crate::cmd!("fcall_ro", -3, SCRIPT | NOSCRIPT, 0, 0, 0, script),
    crate::cmd!("script", -2, NOSCRIPT | WRITE, 0, 0, 0, script),
    crate::cmd!("function", -2, NOSCRIPT | WRITE, 0, 0, 0, script),
];
