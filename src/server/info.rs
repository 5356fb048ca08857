//! Introspection commands: INFO, CONFIG GET/SET, COMMAND, MEMORY, and CLIENT LIST lines.

use std::fmt::Write;
use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::{ClientInfo, Shared};
use crate::command::args::{int, is};
use crate::command::{self, flags};
use crate::config::params;
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
            "# Clients\r\nconnected_clients:{}\r\nmaxclients:{}\r\nblocked_clients:{}\r\n\r\n",
            shared.clients.lock().len(),
            shared.config.read().maxclients,
            shared.engine.pubsub().blocking.blocked(),
        );
    }
    if want("memory") {
        let used = used_memory();
        let rss = crate::alloc::resident_bytes();
        let memory = shared.engine.memory();
        let max = memory.limit() as usize;
        let _ = write!(
            out,
            "# Memory\r\nused_memory:{used}\r\nused_memory_human:{}\r\nused_memory_rss:{rss}\r\nused_memory_rss_human:{}\r\nmaxmemory:{max}\r\nmaxmemory_human:{}\r\nmaxmemory_policy:{}\r\nmem_fragmentation_ratio:{:.2}\r\nmem_not_counted_for_evict:{}\r\nmem_allocator:{}\r\n\r\n",
            human_bytes(used),
            human_bytes(rss),
            human_bytes(max),
            memory.policy().name(),
            if used > 0 { rss as f64 / used as f64 } else { 0.0 },
            memory.not_counted(),
            crate::alloc::name()
        );
    }
    if want("persistence") {
        out.push_str(&super::persistence::info(shared));
    }
    if want("stats") {
        let s = &shared.stats;
        let _ = write!(
            out,
            "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\nrejected_connections:{}\r\nexpired_keys:{}\r\nevicted_keys:{}\r\n\r\n",
            s.total_connections.load(Ordering::Relaxed),
            s.total_commands.load(Ordering::Relaxed),
            s.rejected_connections.load(Ordering::Relaxed),
            s.expired_keys.load(Ordering::Relaxed),
            shared.engine.memory().evicted(),
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
    // Redis's order of the flag letters: P (pub/sub), x (MULTI), b (blocked); N: none.
    let mut flags = String::new();
    if c.subs.0 + c.subs.1 + c.subs.2 > 0 {
        flags.push('P');
    }
    if c.in_multi {
        flags.push('x');
    }
    if c.blocked {
        flags.push('b');
    }
    if flags.is_empty() {
        flags.push('N');
    }
    format!(
        "id={} addr={} laddr={} fd=0 name={} age={} idle=0 flags={} db={} sub={} psub={} ssub={} multi={} qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem=0 tot-mem=0 events=r cmd={} user=default redir=-1 resp={} lib-name={} lib-ver={}",
        c.id,
        c.addr,
        c.laddr,
        c.name,
        c.created.elapsed().as_secs(),
        flags,
        c.db,
        c.subs.0,
        c.subs.1,
        c.subs.2,
        if c.in_multi { 0 } else { -1 },
        c.last_cmd,
        c.resp,
        c.lib_name,
        c.lib_ver
    )
}

/// CONFIG GET/SET/RESETSTAT/REWRITE/HELP, over the parameter registry
/// (`crate::config::params`).
pub fn config(shared: &Shared, a: &[Bytes]) -> Reply {
    let sub = String::from_utf8_lossy(&a[1]).to_ascii_lowercase();
    match sub.as_str() {
        "get" if a.len() >= 3 => {
            let patterns: Vec<&[u8]> = a[2..].iter().map(|p| &p[..]).collect();
            let pairs = params::config_get(&shared.config.read(), &patterns);
            Reply::Map(
                pairs
                    .into_iter()
                    .map(|(n, v)| (Reply::bulk(n), Reply::bulk(v)))
                    .collect(),
            )
        }
        "set" if a.len() >= 4 => {
            if !a.len().is_multiple_of(2) {
                return Reply::err("ERR syntax error");
            }
            let pairs: Vec<(&[u8], &[u8])> =
                a[2..].chunks(2).map(|p| (&p[0][..], &p[1][..])).collect();
            match config_set(shared, &pairs) {
                Ok(()) => Reply::ok(),
                Err(text) => Reply::err(text),
            }
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
            shared.engine.memory().reset_stats();
            Reply::ok()
        }
        "rewrite" if a.len() == 2 => match &shared.config.read().file {
            None => Reply::err("ERR The server is running without a config file"),
            Some(path) => Reply::err(format!(
                "ERR CONFIG REWRITE is not supported by Tollgate: edit {} (TOML) instead",
                path.display()
            )),
        },
        "help" if a.len() == 2 => Reply::Array(
            [
                "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "GET <pattern>",
                "    Return parameters matching the glob-like <pattern> and their values.",
                "SET <directive> <value>",
                "    Set the configuration <directive> to <value>.",
                "RESETSTAT",
                "    Reset statistics reported by the INFO command.",
                "REWRITE",
                "    Rewrite the configuration file.",
                "HELP",
                "    Prints this help.",
            ]
            .iter()
            .map(|l| Reply::Status(l.to_string()))
            .collect(),
        ),
        "get" | "set" | "resetstat" | "rewrite" | "help" => {
            command::arity_error(&format!("config|{sub}"))
        }
        _ => Reply::err(format!(
            "ERR unknown subcommand '{}'. Try CONFIG HELP.",
            command::arg_text(&a[1])
        )),
    }
}

/// CONFIG SET: check every pair, apply what the running server must update, and only then
/// publish the new configuration; on any failure nothing changes (Redis's error text).
fn config_set(shared: &Shared, pairs: &[(&[u8], &[u8])]) -> Result<(), String> {
    // One CONFIG SET at a time: the check, the apply and the publish are one step.
    let mut live = shared.config.write();
    let (next, applies) = params::config_set(&live, pairs)?;
    for (i, apply) in applies.iter().enumerate() {
        if let Err(why) = super::apply_config(shared, *apply, &live, &next) {
            // Put back what the earlier ones changed.
            for undo in &applies[..i] {
                let _ = super::apply_config(shared, *undo, &next, &live);
            }
            let name = pairs
                .iter()
                .find_map(|(n, _)| {
                    params::lookup(&String::from_utf8_lossy(n))
                        .filter(|(p, _)| matches!(p.effect, params::Effect::Live { apply: a, .. } if a == *apply))
                        .map(|(_, name)| name)
                })
                .unwrap_or("");
            return Err(params::set_failed(name, &why));
        }
    }
    *live = next;
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
        (flags::BLOCKING, "blocking"),
        (flags::PUBSUB, "pubsub"),
        (flags::MAY_REPLICATE, "may_replicate"),
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
    let (first, last, step) = spec.key_range();
    // Tips and key specifications as redis-server gives them (`command::docs`).
    let redis = command::docs::redis(spec.name);
    Reply::Array(vec![
        Reply::bulk(spec.name),
        Reply::Integer(spec.arity as i64),
        Reply::Set(flag_names(spec)),
        Reply::Integer(first as i64),
        Reply::Integer(last as i64),
        Reply::Integer(step as i64),
        Reply::Set(vec![]),
        redis.map_or(Reply::Set(vec![]), |d| d.tips.clone()),
        redis.map_or(Reply::Set(vec![]), |d| d.key_specs.clone()),
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
                    let docs = command::docs::docs(s.name).unwrap_or(Reply::Map(vec![]));
                    (Reply::bulk(s.name), docs)
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
