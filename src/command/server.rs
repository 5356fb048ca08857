//! Connection and server commands: their rows, and the handlers of the ones that run like
//! any keyspace command. PING, ECHO and TIME touch no key (TIME answers the execution's
//! `now_ms`, so a script calling it is deterministic); SELECT switches the database of the
//! rest of a transaction or script. The other rows name connection handlers, which own
//! client state and live in `crate::server` (`client_commands.rs`, `transaction.rs`).

use bytes::Bytes;

use super::args::db_index;
use super::flags::{
    ADMIN, FAST, NOSCRIPT, NOT_QUEUED, NO_AUTH, NO_MULTI, RANDOM, READONLY, RUNS_TRANSACTION,
    STATELESS, SUBCOMMANDS, SUBSCRIBED,
};
use super::Ctx;
use crate::protocol::Reply;
use crate::server::{client_commands as conn, transaction as tx};

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
    let secs = ctx.now_us / 1_000_000;
    let micros = ctx.now_us % 1_000_000;
    Reply::Array(vec![
        Reply::bulk_int(secs as i64),
        Reply::bulk_int(micros as i64),
    ])
}

/// SELECT index, inside EXEC or a script: the following commands of the transaction or
/// script use database `index` (on the connection, `client_commands::select` runs instead).
pub fn select(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    match db_index(&a[1]) {
        Ok(n) => {
            ctx.db = n;
            Reply::ok()
        }
        Err(e) => e,
    }
}

/// Connection commands may not run in scripts.
const CONN: u32 = NOSCRIPT;

/// Connection and server commands.
pub const COMMANDS: &[super::CommandSpec] = &[
    crate::cmd!("ping", -1, FAST | STATELESS | SUBSCRIBED, 0, 0, 0, ping),
    crate::cmd!("echo", 2, FAST | STATELESS, 0, 0, 0, echo),
    crate::cmd!("time", 1, FAST | RANDOM, 0, 0, 0, time),
    crate::cmd!("select", 2, FAST | STATELESS, 0, 0, 0, client: conn::select, select),
    crate::cmd!("auth", -2, CONN | NO_AUTH | FAST, 0, 0, 0, client: conn::auth),
    crate::cmd!("hello", -1, CONN | NO_AUTH | FAST, 0, 0, 0, client: conn::hello),
    crate::cmd!("acl", -2, CONN | SUBCOMMANDS, 0, 0, 0, client: crate::server::acl::acl),
    crate::cmd!(
        "quit",
        -1,
        CONN | NO_AUTH | FAST | NOT_QUEUED | SUBSCRIBED,
        0,
        0,
        0,
        client: conn::quit
    ),
    crate::cmd!(
        "reset",
        1,
        CONN | NO_AUTH | FAST | NOT_QUEUED | SUBSCRIBED,
        0,
        0,
        0,
        client: conn::reset
    ),
    crate::cmd!("client", -2, CONN | SUBCOMMANDS, 0, 0, 0, client: conn::client),
    crate::cmd!("multi", 1, CONN | FAST | NOT_QUEUED, 0, 0, 0, client: tx::multi),
    crate::cmd!("exec", 1, CONN | NOT_QUEUED | RUNS_TRANSACTION, 0, 0, 0, client: tx::exec),
    crate::cmd!("discard", 1, CONN | FAST | NOT_QUEUED, 0, 0, 0, client: tx::discard),
    crate::cmd!(
        "watch",
        -2,
        CONN | NO_MULTI | FAST | NOT_QUEUED,
        1,
        -1,
        1,
        client: tx::watch
    ),
    crate::cmd!("unwatch", 1, CONN | FAST, 0, 0, 0, client: tx::unwatch),
    crate::cmd!("info", -1, 0, 0, 0, 0, client: conn::info),
    crate::cmd!("config", -2, CONN | ADMIN | SUBCOMMANDS, 0, 0, 0, client: conn::config),
    crate::cmd!("slowlog", -2, CONN | ADMIN | SUBCOMMANDS, 0, 0, 0, client: conn::slowlog),
    crate::cmd!("monitor", 1, CONN | ADMIN, 0, 0, 0, client: conn::monitor),
    crate::cmd!("latency", -2, CONN | ADMIN | SUBCOMMANDS, 0, 0, 0, client: conn::latency),
    crate::cmd!("command", -1, SUBCOMMANDS, 0, 0, 0, client: conn::command),
    crate::cmd!("debug", -2, CONN | ADMIN, 0, 0, 0, client: conn::debug),
    crate::cmd!("shutdown", -1, CONN | ADMIN | NO_MULTI, 0, 0, 0, client: conn::shutdown),
    crate::cmd!("memory", -2, READONLY | SUBCOMMANDS, 0, 0, 0, client: conn::memory),
    crate::cmd!("lastsave", 1, FAST, 0, 0, 0, client: conn::lastsave),
    crate::cmd!("save", 1, CONN | ADMIN | NO_MULTI, 0, 0, 0, client: conn::save),
    crate::cmd!("bgsave", -1, CONN | ADMIN, 0, 0, 0, client: conn::bgsave),
    crate::cmd!("bgrewriteaof", 1, CONN | ADMIN, 0, 0, 0, client: conn::bgrewriteaof),
    // Cluster mode (src/server/cluster.rs); they answer an error on a standalone server.
    crate::cmd!("cluster", -2, CONN | SUBCOMMANDS, 0, 0, 0, client: conn::cluster),
    crate::cmd!("raft.status", 1, CONN | ADMIN, 0, 0, 0, client: conn::raft_status),
    crate::cmd!(
        "raft.addnode",
        -3,
        CONN | ADMIN | NO_MULTI,
        0,
        0,
        0,
        client: conn::raft_addnode
    ),
    crate::cmd!(
        "raft.removenode",
        2,
        CONN | ADMIN | NO_MULTI,
        0,
        0,
        0,
        client: conn::raft_removenode
    ),
    crate::cmd!(
        "raft.transfer",
        2,
        CONN | ADMIN | NO_MULTI,
        0,
        0,
        0,
        client: conn::raft_transfer
    ),
    crate::cmd!(
        "raft.snapshot",
        1,
        CONN | ADMIN | NO_MULTI,
        0,
        0,
        0,
        client: conn::raft_snapshot
    ),
    crate::cmd!(
        "raft.partition",
        -2,
        CONN | ADMIN | NO_MULTI,
        0,
        0,
        0,
        client: conn::raft_partition
    ),
    crate::cmd!(
        "raft.heal",
        1,
        CONN | ADMIN | NO_MULTI,
        0,
        0,
        0,
        client: conn::raft_heal
    ),
];
