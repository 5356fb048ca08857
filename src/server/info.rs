//! Introspection commands: INFO, CONFIG GET/SET, COMMAND, MEMORY, and CLIENT LIST lines.

use std::fmt::Write;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;

use super::{ClientInfo, Shared};
use crate::command::args::{int, is};
use crate::command::{self, flags, keys::glob_match};
use crate::protocol::Reply;

/// The Redis version Tollgate reports to clients (they gate features on it).
pub const REDIS_VERSION: &str = "7.0.15";

/// Heap bytes currently allocated by the process, if the counting allocator is installed.
pub fn used_memory() -> usize {
    crate::alloc::allocated()
}

/// Render INFO text for the requested sections (all by default).
pub async fn render(shared: &Shared, sections: &[Bytes]) -> String {
    let wanted: Vec<String> = sections
        .iter()
        .map(|s| String::from_utf8_lossy(s).to_ascii_lowercase())
        .collect();
    let all = wanted.is_empty()
        || wanted
            .iter()
            .any(|s| s == "all" || s == "everything" || s == "default");
    let want = |name: &str| all || wanted.iter().any(|w| w == name);
    let mut out = String::new();
    let uptime = shared.started.elapsed().as_secs();
    if want("server") {
        let _ = write!(
            out,
            "# Server\r\nredis_version:{REDIS_VERSION}\r\ntollgate_version:{}\r\nredis_mode:{}\r\nos:{}\r\narch_bits:64\r\nprocess_id:{}\r\ntcp_port:{}\r\nuptime_in_seconds:{uptime}\r\nuptime_in_days:{}\r\nexecutable:tollgate\r\n\r\n",
            env!("CARGO_PKG_VERSION"),
            shared.engine.mode_name(),
            std::env::consts::OS,
            std::process::id(),
            shared.addr.port(),
            uptime / 86400
        );
    }
    if want("clients") {
        let _ = write!(
            out,
            "# Clients\r\nconnected_clients:{}\r\nmaxclients:{}\r\nblocked_clients:0\r\n\r\n",
            shared.clients.lock().len(),
            shared.config.read().maxclients
        );
    }
    if want("memory") {
        let used = used_memory();
        let _ = write!(
            out,
            "# Memory\r\nused_memory:{used}\r\nused_memory_human:{}\r\nmaxmemory:0\r\nmaxmemory_policy:noeviction\r\nmem_allocator:{}\r\n\r\n",
            human_bytes(used),
            crate::alloc::name()
        );
    }
    if want("stats") {
        let s = &shared.stats;
        let _ = write!(
            out,
            "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\nrejected_connections:{}\r\nexpired_keys:{}\r\n\r\n",
            s.total_connections.load(Ordering::Relaxed),
            s.total_commands.load(Ordering::Relaxed),
            s.rejected_connections.load(Ordering::Relaxed),
            s.expired_keys.load(Ordering::Relaxed),
        );
    }
    if want("replication") {
        match shared.engine.cluster() {
            Some(node) => out.push_str(&super::cluster::replication_info(node)),
            None => out.push_str("# Replication\r\nrole:master\r\nconnected_slaves:0\r\n\r\n"),
        }
    }
    if want("keyspace") {
        out.push_str("# Keyspace\r\n");
        let state = shared.engine.lock().await;
        for (i, db) in state.ks.dbs.iter().enumerate() {
            if !db.is_empty() {
                let _ = write!(
                    out,
                    "db{i}:keys={},expires={},avg_ttl=0\r\n",
                    db.len(),
                    db.expires_count()
                );
            }
        }
        out.push_str("\r\n");
    }
    out
}

fn human_bytes(n: usize) -> String {
    match n {
        n if n >= 1 << 30 => format!("{:.2}G", n as f64 / (1u64 << 30) as f64),
        n if n >= 1 << 20 => format!("{:.2}M", n as f64 / (1u64 << 20) as f64),
        n if n >= 1 << 10 => format!("{:.2}K", n as f64 / 1024.0),
        n => format!("{n}B"),
    }
}

/// One CLIENT LIST line.
pub fn client_line(c: &ClientInfo) -> String {
    format!(
        "id={} addr={} laddr={} fd=0 name={} age={} idle=0 flags={} db={} sub=0 psub=0 ssub=0 multi={} qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem=0 tot-mem=0 events=r cmd={} user=default redir=-1 resp={} lib-name={} lib-ver={}",
        c.id,
        c.addr,
        c.laddr,
        c.name,
        c.created.elapsed().as_secs(),
        if c.in_multi { "x" } else { "N" },
        c.db,
        if c.in_multi { 0 } else { -1 },
        c.last_cmd,
        c.resp,
        c.lib_name,
        c.lib_ver
    )
}

/// The settings CONFIG GET reports, with their current values.
fn config_items(shared: &Shared) -> Vec<(&'static str, String)> {
    let c = shared.config.read();
    vec![
        ("bind", c.bind.clone()),
        ("port", c.port.to_string()),
        ("requirepass", c.requirepass.clone().unwrap_or_default()),
        ("maxclients", c.maxclients.to_string()),
        ("proto-max-bulk-len", c.proto_max_bulk_len.to_string()),
        (
            "client-query-buffer-limit",
            c.client_query_buffer_limit.to_string(),
        ),
        ("busy-reply-threshold", c.busy_reply_threshold.to_string()),
        ("lua-time-limit", c.busy_reply_threshold.to_string()),
        (
            "enable-debug-command",
            if c.enable_debug_command { "yes" } else { "no" }.into(),
        ),
        ("databases", crate::store::DATABASES.to_string()),
        ("maxmemory", "0".into()),
        ("maxmemory-policy", "noeviction".into()),
        ("appendonly", "no".into()),
        ("save", String::new()),
    ]
}

/// CONFIG GET/SET/RESETSTAT/REWRITE.
pub fn config(shared: &Shared, a: &[Bytes]) -> Reply {
    let sub = String::from_utf8_lossy(&a[1]).to_ascii_lowercase();
    match sub.as_str() {
        "get" if a.len() >= 3 => {
            let items = config_items(shared);
            let pairs = items
                .into_iter()
                .filter(|(name, _)| {
                    a[2..]
                        .iter()
                        .any(|p| glob_match(&p.to_ascii_lowercase(), name.as_bytes(), true))
                })
                .map(|(n, v)| (Reply::bulk(n), Reply::bulk(v)))
                .collect();
            Reply::Map(pairs)
        }
        "set" if a.len() >= 4 && a.len().is_multiple_of(2) => {
            for pair in a[2..].chunks(2) {
                if let Err(e) = config_set(shared, &pair[0], &pair[1]) {
                    return Reply::err(format!(
                        "ERR CONFIG SET failed (possibly related to argument '{}') - {e}",
                        String::from_utf8_lossy(&pair[0]).to_ascii_lowercase()
                    ));
                }
            }
            Reply::ok()
        }
        "resetstat" if a.len() == 2 => {
            let s = &shared.stats;
            for c in [
                &s.total_connections,
                &s.total_commands,
                &s.rejected_connections,
                &s.expired_keys,
            ] {
                c.store(0, Ordering::Relaxed);
            }
            Reply::ok()
        }
        "rewrite" if a.len() == 2 => Reply::err("ERR The server is running without a config file"),
        "get" | "set" | "resetstat" | "rewrite" => command::arity_error(&format!("config|{sub}")),
        _ => Reply::err(format!(
            "ERR unknown subcommand '{}'. Try CONFIG HELP.",
            command::arg_text(&a[1])
        )),
    }
}

fn config_set(shared: &Shared, name: &[u8], value: &[u8]) -> Result<(), String> {
    let v = String::from_utf8_lossy(value).into_owned();
    let num = || {
        v.parse::<u64>()
            .map_err(|_| "argument couldn't be parsed into an integer".to_string())
    };
    let mut c = shared.config.write();
    match String::from_utf8_lossy(name).to_ascii_lowercase().as_str() {
        "requirepass" => c.requirepass = (!v.is_empty()).then_some(v),
        "maxclients" => c.maxclients = num()? as usize,
        "proto-max-bulk-len" => c.proto_max_bulk_len = (num()? as usize).max(1024 * 1024),
        "client-query-buffer-limit" => {
            c.client_query_buffer_limit = (num()? as usize).max(1024 * 1024)
        }
        "busy-reply-threshold" | "lua-time-limit" => {
            let ms = num()?;
            c.busy_reply_threshold = ms;
            shared.engine.set_busy_threshold(Duration::from_millis(ms));
        }
        "enable-debug-command" => return Err("can't set immutable config".into()),
        "maxmemory" | "maxmemory-policy" | "appendonly" | "save" => {}
        _ => return Err("Unknown option or number of arguments for CONFIG SET".into()),
    }
    Ok(())
}

fn flag_names(spec: &command::CommandSpec) -> Vec<Reply> {
    let table = [
        (flags::WRITE, "write"),
        (flags::READONLY, "readonly"),
        (flags::ADMIN, "admin"),
        (flags::NOSCRIPT, "noscript"),
        (flags::DENYOOM, "denyoom"),
        (flags::FAST, "fast"),
        (flags::NO_MULTI, "no_multi"),
        (flags::NO_AUTH, "no_auth"),
    ];
    let mut names: Vec<Reply> = table
        .iter()
        .filter(|(f, _)| spec.has(*f))
        .map(|(_, n)| Reply::Status(n.to_string()))
        .collect();
    if spec.keys_optional() {
        names.push(Reply::Status("no_mandatory_keys".into()));
    }
    if spec.movable_keys() {
        names.push(Reply::Status("movablekeys".into()));
    }
    names
}

fn command_info(spec: &command::CommandSpec) -> Reply {
    Reply::Array(vec![
        Reply::bulk(spec.name),
        Reply::Integer(spec.arity as i64),
        Reply::Set(flag_names(spec)),
        Reply::Integer(spec.first_key as i64),
        Reply::Integer(spec.last_key as i64),
        Reply::Integer(spec.key_step as i64),
        Reply::Set(vec![]),
        Reply::Set(vec![]),
        Reply::Set(vec![]),
        Reply::Array(vec![]),
    ])
}

/// COMMAND, COMMAND COUNT, COMMAND INFO, COMMAND DOCS, COMMAND LIST.
pub fn command(a: &[Bytes]) -> Reply {
    let Some(sub) = a.get(1) else {
        return Reply::Array(command::all().map(command_info).collect());
    };
    if is(sub, "count") && a.len() == 2 {
        Reply::Integer(command::all().count() as i64)
    } else if is(sub, "info") {
        if a.len() == 2 {
            return Reply::Array(command::all().map(command_info).collect());
        }
        Reply::Array(
            a[2..]
                .iter()
                .map(|n| command::lookup(n).map_or(Reply::Nil, command_info))
                .collect(),
        )
    } else if is(sub, "docs") {
        let specs: Vec<_> = if a.len() == 2 {
            command::all().collect()
        } else {
            a[2..].iter().filter_map(|n| command::lookup(n)).collect()
        };
        Reply::Map(
            specs
                .into_iter()
                .map(|s| {
                    (
                        Reply::bulk(s.name),
                        Reply::Map(vec![(Reply::bulk("summary"), Reply::bulk(""))]),
                    )
                })
                .collect(),
        )
    } else if is(sub, "list") {
        Reply::Array(command::all().map(|s| Reply::bulk(s.name)).collect())
    } else if is(sub, "getkeys") && a.len() < 4 {
        Reply::err("ERR wrong number of arguments for 'command|getkeys' command")
    } else if is(sub, "getkeys") {
        // Redis's order: known command, takes keys at all, arity, then the keys.
        match command::lookup(&a[2]) {
            None => Reply::err("ERR Invalid command specified"),
            Some(spec) if !spec.has_keys() => Reply::err("ERR The command has no key arguments"),
            Some(spec) if !command::arity_ok(spec, a.len() - 2) => {
                Reply::err("ERR Invalid number of arguments specified for command")
            }
            Some(spec) => match spec.keys(&a[2..]) {
                Some(keys) if !keys.is_empty() => {
                    Reply::Array(keys.into_iter().map(Reply::Bulk).collect())
                }
                _ if spec.keys_optional() => Reply::Array(vec![]),
                _ => Reply::err("ERR Invalid arguments specified for command"),
            },
        }
    } else {
        Reply::err(format!(
            "ERR unknown subcommand '{}'. Try COMMAND HELP.",
            command::arg_text(sub)
        ))
    }
}

/// MEMORY USAGE key / MEMORY STATS.
pub async fn memory(shared: &Shared, db: usize, a: &[Bytes]) -> Reply {
    if is(&a[1], "usage") && (a.len() == 3 || a.len() == 5) {
        if a.len() == 5 && !(is(&a[3], "samples") && int(&a[4]).is_ok()) {
            return Reply::err("ERR syntax error");
        }
        let now = shared.engine.clock().now_ms();
        let state = shared.engine.lock().await;
        return match state.ks.dbs[db].get(&a[2], now) {
            // Key bytes + entry overhead + value estimate.
            Some(e) => Reply::Integer((a[2].len() + 64 + e.value.memory_estimate()) as i64),
            None => Reply::Nil,
        };
    }
    if is(&a[1], "stats") && a.len() == 2 {
        let state = shared.engine.lock().await;
        return Reply::Map(vec![
            (
                Reply::bulk("total.allocated"),
                Reply::Integer(used_memory() as i64),
            ),
            (
                Reply::bulk("keys.count"),
                Reply::Integer(state.ks.total_keys() as i64),
            ),
        ]);
    }
    Reply::err(format!(
        "ERR unknown subcommand '{}'. Try MEMORY HELP.",
        command::arg_text(&a[1])
    ))
}
