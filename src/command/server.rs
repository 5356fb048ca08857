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

/// Administrative subcommands of the connection containers (CONFIG GET, CLIENT KILL, ...).
const ADMIN_CONN: u32 = ADMIN | NOSCRIPT;

/// Connection and server commands.
pub const COMMANDS: &[super::CommandSpec] = &[
    crate::cmd!("ping", -1, FAST | STATELESS | SUBSCRIBED, 0, 0, 0, ping),
    crate::cmd!("echo", 2, FAST | STATELESS, 0, 0, 0, echo),
    crate::cmd!("time", 1, FAST | RANDOM, 0, 0, 0, time),
    crate::cmd!("select", 2, FAST | STATELESS, 0, 0, 0, client: conn::select, select),
    crate::cmd!("auth", -2, CONN | NO_AUTH | FAST, 0, 0, 0, client: conn::auth),
    crate::cmd!("hello", -1, CONN | NO_AUTH | FAST, 0, 0, 0, client: conn::hello),
    crate::cmd!("acl", -2, SUBCOMMANDS, 0, 0, 0, client: crate::server::acl::acl).subcommands(&[
        crate::sub!("acl|cat", NOSCRIPT),
        crate::sub!("acl|deluser", ADMIN_CONN),
        crate::sub!("acl|dryrun", ADMIN_CONN),
        crate::sub!("acl|genpass", NOSCRIPT),
        crate::sub!("acl|getuser", ADMIN_CONN),
        crate::sub!("acl|help", 0),
        crate::sub!("acl|list", ADMIN_CONN),
        crate::sub!("acl|load", ADMIN_CONN),
        crate::sub!("acl|log", ADMIN_CONN),
        crate::sub!("acl|save", ADMIN_CONN),
        crate::sub!("acl|setuser", ADMIN_CONN),
        crate::sub!("acl|users", ADMIN_CONN),
        crate::sub!("acl|whoami", NOSCRIPT),
    ]),
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
    crate::cmd!("client", -2, SUBCOMMANDS, 0, 0, 0, client: conn::client).subcommands(&[
        crate::sub!("client|getname", NOSCRIPT),
        crate::sub!("client|help", 0),
        crate::sub!("client|id", NOSCRIPT),
        crate::sub!("client|info", NOSCRIPT),
        crate::sub!("client|kill", ADMIN_CONN),
        crate::sub!("client|list", ADMIN_CONN),
        crate::sub!("client|no-evict", ADMIN_CONN),
        crate::sub!("client|reply", NOSCRIPT),
        crate::sub!("client|setname", NOSCRIPT),
        crate::sub!("client|unblock", ADMIN_CONN),
    ]),
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
    // CONFIG REWRITE answers that Tollgate's configuration file is TOML, edited by hand.
    crate::cmd!("config", -2, SUBCOMMANDS, 0, 0, 0, client: conn::config).subcommands(&[
        crate::sub!("config|get", ADMIN_CONN),
        crate::sub!("config|help", 0),
        crate::sub!("config|resetstat", ADMIN_CONN),
        crate::sub!("config|set", ADMIN_CONN),
    ]),
    crate::cmd!("slowlog", -2, SUBCOMMANDS, 0, 0, 0, client: conn::slowlog).subcommands(&[
        crate::sub!("slowlog|get", ADMIN),
        crate::sub!("slowlog|help", 0),
        crate::sub!("slowlog|len", ADMIN),
        crate::sub!("slowlog|reset", ADMIN),
    ]),
    crate::cmd!("monitor", 1, CONN | ADMIN, 0, 0, 0, client: conn::monitor),
    crate::cmd!("latency", -2, SUBCOMMANDS, 0, 0, 0, client: conn::latency).subcommands(&[
        crate::sub!("latency|doctor", ADMIN_CONN),
        crate::sub!("latency|graph", ADMIN_CONN),
        crate::sub!("latency|help", 0),
        crate::sub!("latency|histogram", ADMIN_CONN),
        crate::sub!("latency|history", ADMIN_CONN),
        crate::sub!("latency|latest", ADMIN_CONN),
        crate::sub!("latency|reset", ADMIN_CONN),
    ]),
    crate::cmd!("command", -1, SUBCOMMANDS, 0, 0, 0, client: conn::command).subcommands(&[
        crate::sub!("command|count", 0),
        crate::sub!("command|docs", 0),
        crate::sub!("command|getkeys", 0),
        crate::sub!("command|help", 0),
        crate::sub!("command|info", 0),
        crate::sub!("command|list", 0),
    ]),
    crate::cmd!("debug", -2, CONN | ADMIN, 0, 0, 0, client: conn::debug),
    crate::cmd!("shutdown", -1, CONN | ADMIN | NO_MULTI, 0, 0, 0, client: conn::shutdown),
    crate::cmd!("memory", -2, SUBCOMMANDS, 0, 0, 0, client: conn::memory).subcommands(&[
        crate::sub!("memory|help", 0),
        crate::sub!("memory|stats", 0),
        crate::sub!("memory|usage", READONLY, 2, 2, 1),
    ]),
    crate::cmd!("lastsave", 1, FAST, 0, 0, 0, client: conn::lastsave),
    crate::cmd!("save", 1, CONN | ADMIN | NO_MULTI, 0, 0, 0, client: conn::save),
    crate::cmd!("bgsave", -1, CONN | ADMIN, 0, 0, 0, client: conn::bgsave),
    crate::cmd!("bgrewriteaof", 1, CONN | ADMIN, 0, 0, 0, client: conn::bgrewriteaof),
    // Cluster mode (src/server/cluster.rs); they answer an error on a standalone server.
    crate::cmd!("cluster", -2, SUBCOMMANDS, 0, 0, 0, client: conn::cluster).subcommands(&[
        crate::sub!("cluster|info", 0),
        crate::sub!("cluster|myid", 0),
        crate::sub!("cluster|nodes", 0),
        crate::sub!("cluster|shards", 0),
        crate::sub!("cluster|slots", 0),
    ]),
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
