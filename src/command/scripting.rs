//! EVAL, EVALSHA, EVAL_RO, EVALSHA_RO, SCRIPT, FCALL, FCALL_RO and FUNCTION: the glue
//! between the command table and the Lua engine in `crate::scripting`.
//!
//! A script runs as one keyspace command: atomically, with the batch's `now_ms`, and
//! its `redis.call`s go through [`Host`] back into the same command table. SCRIPT KILL
//! and FUNCTION KILL never reach here: the connection answers them without waiting for
//! the running script.

use bytes::Bytes;

use super::flags::{CONNECTION, DENYOOM, NOSCRIPT, SCRIPT, WRITE};
use super::{Ctx, DATABASES};
use crate::command::args::int;
use crate::protocol::Reply;
use crate::scripting::{CommandInfo, ScriptContext, ScriptHost};
use crate::store::Keyspace;

/// What `redis.call` runs against: the keyspace of the script's batch.
pub struct Host<'a> {
    ks: &'a mut Keyspace,
    db: usize,
    now_ms: u64,
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
            return match args.get(1).map(|a| int(a)) {
                Some(Ok(n)) if (0..DATABASES as i64).contains(&n) && args.len() == 2 => {
                    self.db = n as usize;
                    Reply::ok()
                }
                Some(Ok(_)) => Reply::err("ERR DB index is out of range"),
                Some(Err(e)) => e,
                None => super::arity_error("select"),
            };
        }
        let mut ctx = Ctx {
            ks: self.ks,
            db: self.db,
            now_ms: self.now_ms,
            resp,
            scripts: None,
        };
        super::execute(&mut ctx, args)
    }
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
