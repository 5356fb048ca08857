//! Connection and server commands. PING, ECHO and TIME are keyspace-free handlers that
//! run like any command (TIME answers the execution's `now_ms`, so a script calling it is
//! deterministic); the rest are listed here for arity, flags and COMMAND output, and run
//! in the connection layer, which owns client state.

use bytes::Bytes;

use super::flags::{ADMIN, CONNECTION, FAST, NOSCRIPT, NO_AUTH, NO_MULTI, RANDOM, READONLY};
use super::Ctx;
use crate::protocol::Reply;

/// PING [message]
pub fn ping(_ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    match a.get(1) {
        Some(m) if a.len() == 2 => Reply::Bulk(m.clone()),
        Some(_) => super::arity_error("ping"),
        None => Reply::Status("PONG".into()),
    }
}

/// ECHO message
pub fn echo(_ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    Reply::Bulk(a[1].clone())
}

/// TIME: the execution's time as [seconds, microseconds].
pub fn time(ctx: &mut Ctx, _a: &[Bytes]) -> Reply {
    let secs = ctx.now_ms / 1000;
    let micros = (ctx.now_ms % 1000) * 1000;
    Reply::Array(vec![
        Reply::bulk_int(secs as i64),
        Reply::bulk_int(micros as i64),
    ])
}

const CONN: u32 = CONNECTION | NOSCRIPT;

/// Connection and server commands.
pub const COMMANDS: &[super::CommandSpec] = &[
    crate::cmd!("ping", -1, FAST, 0, 0, 0, ping),
    crate::cmd!("echo", 2, FAST, 0, 0, 0, echo),
    crate::cmd!("time", 1, FAST | RANDOM, 0, 0, 0, time),
    crate::cmd!("select", 2, CONNECTION | FAST, 0, 0, 0),
    crate::cmd!("auth", -2, CONN | NO_AUTH | FAST, 0, 0, 0),
    crate::cmd!("hello", -1, CONN | NO_AUTH | FAST, 0, 0, 0),
    crate::cmd!("quit", -1, CONN | NO_AUTH | FAST, 0, 0, 0),
    crate::cmd!("reset", 1, CONN | NO_AUTH | FAST, 0, 0, 0),
    crate::cmd!("client", -2, CONN, 0, 0, 0),
    crate::cmd!("multi", 1, CONN | FAST, 0, 0, 0),
    crate::cmd!("exec", 1, CONN, 0, 0, 0),
    crate::cmd!("discard", 1, CONN | FAST, 0, 0, 0),
    crate::cmd!("watch", -2, CONN | NO_MULTI | FAST, 1, -1, 1),
    crate::cmd!("unwatch", 1, CONN | FAST, 0, 0, 0),
    crate::cmd!("info", -1, CONNECTION, 0, 0, 0),
    crate::cmd!("config", -2, CONN | ADMIN, 0, 0, 0),
    crate::cmd!("command", -1, CONNECTION, 0, 0, 0),
    crate::cmd!("debug", -2, CONN | ADMIN, 0, 0, 0),
    crate::cmd!("shutdown", -1, CONN | ADMIN | NO_MULTI, 0, 0, 0),
    crate::cmd!("memory", -2, CONNECTION | READONLY, 0, 0, 0),
    crate::cmd!("lastsave", 1, CONNECTION | FAST, 0, 0, 0),
    crate::cmd!("save", 1, CONN | ADMIN | NO_MULTI, 0, 0, 0),
    crate::cmd!("bgsave", -1, CONN | ADMIN, 0, 0, 0),
    // Cluster mode (src/server/cluster.rs); they answer an error on a standalone server.
    crate::cmd!("cluster", -2, CONN, 0, 0, 0),
    crate::cmd!("raft.status", 1, CONN | ADMIN, 0, 0, 0),
    crate::cmd!("raft.addnode", -3, CONN | ADMIN | NO_MULTI, 0, 0, 0),
    crate::cmd!("raft.removenode", 2, CONN | ADMIN | NO_MULTI, 0, 0, 0),
    crate::cmd!("raft.transfer", 2, CONN | ADMIN | NO_MULTI, 0, 0, 0),
    crate::cmd!("raft.snapshot", 1, CONN | ADMIN | NO_MULTI, 0, 0, 0),
    crate::cmd!("raft.partition", -2, CONN | ADMIN | NO_MULTI, 0, 0, 0),
    crate::cmd!("raft.heal", 1, CONN | ADMIN | NO_MULTI, 0, 0, 0),
];
