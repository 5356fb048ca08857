//! Introspection commands: INFO, CONFIG GET/SET, COMMAND, MEMORY, and CLIENT LIST lines.

use std::fmt::Write;
use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::{ClientInfo, Shared};
use crate::command::args::{int, is};
use crate::command::{self, flags, help_reply};
use crate::config::params;
use crate::protocol::Reply;

/// The Redis version Tollgate reports to clients (they gate features on it).
pub const REDIS_VERSION: &str = "7.0.15";

/// Heap bytes currently allocated by the process, if the counting allocator is installed.
pub fn used_memory() -> usize {
    crate::alloc::allocated()
}

/// INFO's sections in Redis's order, and whether `INFO` without arguments shows each
/// (`all` adds the others, `everything` is `all` since there are no modules).
const SECTIONS: [(&str, bool); 14] = [
    ("server", true),
    ("clients", true),
    ("memory", true),
    ("persistence", true),
    ("stats", true),
    ("replication", true),
    ("cpu", true),
    ("modules", true),
    ("commandstats", false),
    ("errorstats", true),
    ("latencystats", false),
    ("cluster", true),
    ("keyspace", true),
    ("tollgate", true),
];

/// Render INFO text for the requested sections (`default` when none is named).
pub async fn render(shared: &Shared, sections: &[Bytes]) -> String {
    let wanted: Vec<String> = sections
        .iter()
        .map(|s| String::from_utf8_lossy(s).to_ascii_lowercase())
        .collect();
    let named = |n: &str| wanted.iter().any(|w| w == n);
    let all = named("all") || named("everything");
    let default = wanted.is_empty() || named("default");
    let mut out = String::new();
    for (name, in_default) in SECTIONS {
        if !(all || (default && in_default) || named(name)) {
            continue;
        }
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        section(shared, name, &mut out).await;
    }
    out
}

/// Append section `name` (its title and fields) to `out`.
async fn section(shared: &Shared, name: &str, out: &mut String) {
    match name {
        "server" => server_section(shared, out),
        "clients" => clients_section(shared, out),
        "memory" => memory_section(shared, out).await,
        "persistence" => persistence_section(shared, out),
        "stats" => stats_section(shared, out),
        "replication" => match shared.engine.cluster() {
            Some(node) => {
                let text = super::cluster::replication_info(node);
                out.push_str(text.trim_end_matches("\r\n"));
                out.push_str("\r\n");
            }
            None => out.push_str(
                "# Replication\r\nrole:master\r\nconnected_slaves:0\r\nmaster_failover_state:no-failover\r\n\
                 master_repl_offset:0\r\nsecond_repl_offset:-1\r\nrepl_backlog_active:0\r\n\
                 repl_backlog_size:1048576\r\nrepl_backlog_first_byte_offset:0\r\nrepl_backlog_histlen:0\r\n",
            ),
        },
        "cpu" => cpu_section(out),
        "modules" => out.push_str("# Modules\r\n"),
        "commandstats" => commandstats_section(shared, out),
        "errorstats" => {
            out.push_str("# Errorstats\r\n");
            for (code, n) in shared.engine.metrics().errors() {
                let _ = write!(out, "errorstat_{code}:count={n}\r\n");
            }
        }
        "latencystats" => latencystats_section(shared, out),
        // Tollgate's cluster is Raft replication, not Redis Cluster (no slots, no MOVED).
        "cluster" => out.push_str("# Cluster\r\ncluster_enabled:0\r\n"),
        "keyspace" => {
            out.push_str("# Keyspace\r\n");
            let now = shared.engine.now_ms();
            let state = shared.engine.lock().await;
            for (i, db) in state.ks.dbs.iter().enumerate() {
                if !db.is_empty() {
                    let _ = write!(
                        out,
                        "db{i}:keys={},expires={},avg_ttl={}\r\n",
                        db.len(),
                        db.expires_count(),
                        db.average_ttl_ms(now)
                    );
                }
            }
        }
        "tollgate" => tollgate_section(shared, out),
        _ => {}
    }
}

fn server_section(shared: &Shared, out: &mut String) {
    let uptime = shared.started.elapsed().as_secs();
    let now_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros());
    let config = shared.config.read();
    let executable = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let _ = write!(
        out,
        "# Server\r\nredis_version:{REDIS_VERSION}\r\nredis_git_sha1:00000000\r\nredis_git_dirty:0\r\n\
         redis_build_id:{}\r\nredis_mode:{}\r\nos:{}\r\narch_bits:64\r\n\
         monotonic_clock:POSIX clock_gettime\r\nmultiplexing_api:epoll\r\natomicvar_api:c11-builtin\r\n\
         gcc_version:0.0.0\r\nprocess_id:{}\r\nprocess_supervised:no\r\nrun_id:{}\r\ntcp_port:{}\r\n\
         server_time_usec:{now_us}\r\nuptime_in_seconds:{uptime}\r\nuptime_in_days:{}\r\nhz:10\r\n\
         configured_hz:10\r\nlru_clock:{}\r\nexecutable:{executable}\r\nconfig_file:{}\r\n\
         io_threads_active:0\r\n",
        build_id(),
        shared.engine.mode_name(),
        os_name(),
        std::process::id(),
        shared.run_id,
        config.port,
        uptime / 86400,
        (now_us / 1_000_000) & ((1 << 24) - 1),
        config
            .file
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
    );
}

/// INFO `redis_build_id`: 16 hex digits of the SHA-1 of Tollgate's name and version.
fn build_id() -> String {
    let digest = sha1_smol::Sha1::from(concat!("tollgate ", env!("CARGO_PKG_VERSION")))
        .digest()
        .to_string();
    digest[..16].to_string()
}

/// `uname -srm`, as Redis's `os` field.
fn os_name() -> String {
    // SAFETY: uname fills the zeroed struct it is given.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    if unsafe { libc::uname(&mut u) } != 0 {
        return std::env::consts::OS.to_string();
    }
    let field = |f: &[libc::c_char]| {
        let bytes: Vec<u8> = f
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    format!(
        "{} {} {}",
        field(&u.sysname),
        field(&u.release),
        field(&u.machine)
    )
}

fn clients_section(shared: &Shared, out: &mut String) {
    let clients = shared.clients.lock();
    let (mut max_in, mut max_out, mut timed) = (0, 0, 0);
    for c in clients.values() {
        let info = c.info.lock();
        max_in = max_in.max(info.qbuf_capacity);
        max_out = max_out.max(info.obuf_capacity);
        timed += usize::from(info.blocked_with_timeout);
    }
    let _ = write!(
        out,
        "# Clients\r\nconnected_clients:{}\r\ncluster_connections:0\r\nmaxclients:{}\r\n\
         client_recent_max_input_buffer:{max_in}\r\nclient_recent_max_output_buffer:{max_out}\r\n\
         blocked_clients:{}\r\ntracking_clients:0\r\nclients_in_timeout_table:{timed}\r\n",
        clients.len(),
        shared.config.read().maxclients,
        shared.engine.pubsub().blocking.blocked(),
    );
}

async fn memory_section(shared: &Shared, out: &mut String) {
    let used = used_memory();
    let peak = shared.stats.note_memory(used);
    let rss = crate::alloc::resident_bytes();
    let memory = shared.engine.memory();
    let max = memory.limit() as usize;
    let (lua_eval, lua_functions, scripts, tables) = {
        let state = shared.engine.lock().await;
        let (e, f) = state.scripts.used_memory();
        (e, f, state.scripts.cached_scripts(), state.ks.table_bytes())
    };
    let system = total_system_memory();
    let startup = shared.stats.memory_startup.load(Ordering::Relaxed) as usize;
    let clients: usize = shared
        .clients
        .lock()
        .values()
        .map(|c| c.info.lock().total_memory())
        .sum();
    // Redis's meaning: what the server spends besides the data (its state at start,
    // client buffers, replication/AOF buffers, the databases' tables); the dataset is
    // the rest. Here: the heap at start, plus the growth since of the Lua VMs and of the
    // databases' tables (`Db::table_bytes`: what in them is not keys and values), every
    // connection's tot-mem and the Raft log entries held in memory
    // (mem_not_counted_for_evict).
    let grown = |now: usize, i: usize| {
        now.saturating_sub(shared.stats.overhead_startup[i].load(Ordering::Relaxed) as usize)
    };
    let overhead = (startup
        + grown(lua_eval + lua_functions, 0)
        + grown(tables, 1)
        + clients
        + memory.not_counted())
    .min(used);
    let dataset = used - overhead;
    let net = if used > startup { used - startup } else { 1 };
    let _ = write!(
        out,
        "# Memory\r\nused_memory:{used}\r\nused_memory_human:{}\r\nused_memory_rss:{rss}\r\n\
         used_memory_rss_human:{}\r\nused_memory_peak:{peak}\r\nused_memory_peak_human:{}\r\n\
         used_memory_peak_perc:{:.2}%\r\nused_memory_overhead:{overhead}\r\n\
         used_memory_startup:{startup}\r\nused_memory_dataset:{dataset}\r\n\
         used_memory_dataset_perc:{:.2}%\r\n\
         total_system_memory:{system}\r\ntotal_system_memory_human:{}\r\n\
         used_memory_lua:{lua_eval}\r\nused_memory_vm_eval:{lua_eval}\r\nused_memory_lua_human:{}\r\n\
         number_of_cached_scripts:{scripts}\r\nused_memory_vm_functions:{lua_functions}\r\n\
         used_memory_vm_total:{}\r\nused_memory_vm_total_human:{}\r\n\
         maxmemory:{max}\r\nmaxmemory_human:{}\r\nmaxmemory_policy:{}\r\n\
         mem_fragmentation_ratio:{:.2}\r\nmem_fragmentation_bytes:{}\r\nmem_not_counted_for_evict:{}\r\n\
         mem_clients_normal:{clients}\r\nmem_allocator:{}\r\nactive_defrag_running:0\r\nlazyfree_pending_objects:0\r\nlazyfreed_objects:0\r\n",
        human_bytes(used),
        human_bytes(rss),
        human_bytes(peak),
        if peak > 0 { used as f64 * 100.0 / peak as f64 } else { 0.0 },
        dataset as f64 * 100.0 / net as f64,
        human_bytes(system),
        human_bytes(lua_eval),
        lua_eval + lua_functions,
        human_bytes(lua_eval + lua_functions),
        human_bytes(max),
        memory.policy().name(),
        if used > 0 { rss as f64 / used as f64 } else { 0.0 },
        rss as i64 - used as i64,
        memory.not_counted(),
        crate::alloc::name()
    );
}

/// MemTotal of /proc/meminfo, in bytes (0 if unknown).
fn total_system_memory() -> usize {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<usize>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// INFO persistence: `super::persistence::info` (durable nodes, snapshots, the log).
fn persistence_section(shared: &Shared, out: &mut String) {
    let text = super::persistence::info(shared);
    out.push_str(text.trim_end_matches("\r\n"));
    out.push_str("\r\n");
}

/// INFO stats. The fields of what Tollgate does not have are 0, as Redis prints them where
/// nothing happened: forks (Tollgate never forks), Redis replication
/// (`sync_*`, `*_repl_*`: Raft replicates), and `migrate_cached_sockets` (no MIGRATE, so no
/// cached socket; unit/dump's `MIGRATE cached connections are released after some time`
/// reads it).
fn stats_section(shared: &Shared, out: &mut String) {
    let s = &shared.stats;
    let m = shared.engine.metrics();
    let rates = s.rates();
    let errors: u64 = m.errors().values().sum();
    let (hits, misses) = shared.engine.memory().clock().reads();
    // This node's subscriptions (Redis's count of channels and patterns with a subscriber).
    let (channels, patterns, shard_channels) = shared.engine.pubsub().counts();
    let _ = write!(
        out,
        "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\n\
         instantaneous_ops_per_sec:{}\r\ntotal_net_input_bytes:{}\r\ntotal_net_output_bytes:{}\r\n\
         total_net_repl_input_bytes:0\r\ntotal_net_repl_output_bytes:0\r\n\
         instantaneous_input_kbps:{:.2}\r\ninstantaneous_output_kbps:{:.2}\r\n\
         instantaneous_input_repl_kbps:0.00\r\ninstantaneous_output_repl_kbps:0.00\r\n\
         rejected_connections:{}\r\nsync_full:0\r\nsync_partial_ok:0\r\nsync_partial_err:0\r\n\
         expired_keys:{}\r\nevicted_keys:{}\r\nevicted_clients:0\r\n\
         keyspace_hits:{hits}\r\nkeyspace_misses:{misses}\r\npubsub_channels:{channels}\r\n\
         pubsub_patterns:{patterns}\r\npubsubshard_channels:{shard_channels}\r\n\
         latest_fork_usec:0\r\ntotal_forks:0\r\nmigrate_cached_sockets:0\r\n\
         unexpected_error_replies:0\r\ntotal_error_replies:{errors}\r\ntotal_reads_processed:{}\r\n\
         total_writes_processed:{}\r\nio_threaded_reads_processed:0\r\nio_threaded_writes_processed:0\r\n",
        s.total_connections.load(Ordering::Relaxed),
        s.total_commands.load(Ordering::Relaxed),
        rates.0.round() as u64,
        m.net_input.load(Ordering::Relaxed),
        m.net_output.load(Ordering::Relaxed),
        rates.1 / 1024.0,
        rates.2 / 1024.0,
        s.rejected_connections.load(Ordering::Relaxed),
        shared.engine.pubsub().expired.load(Ordering::Relaxed),
        shared.engine.memory().evicted(),
        s.reads.load(Ordering::Relaxed),
        s.writes.load(Ordering::Relaxed),
    );
}

fn cpu_section(out: &mut String) {
    let usage = |who| {
        // SAFETY: getrusage fills the zeroed struct it is given.
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        unsafe { libc::getrusage(who, &mut u) };
        let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        (secs(u.ru_stime), secs(u.ru_utime))
    };
    let (sys, user) = usage(libc::RUSAGE_SELF);
    let (sys_c, user_c) = usage(libc::RUSAGE_CHILDREN);
    let _ = write!(
        out,
        "# CPU\r\nused_cpu_sys:{sys:.6}\r\nused_cpu_user:{user:.6}\r\n\
         used_cpu_sys_children:{sys_c:.6}\r\nused_cpu_user_children:{user_c:.6}\r\n"
    );
}

fn commandstats_section(shared: &Shared, out: &mut String) {
    out.push_str("# Commandstats\r\n");
    for (name, s) in shared.engine.metrics().commands() {
        let calls = s.calls();
        let usec = s.time().map_or(0, |h| h.sum_ns() / 1000);
        let _ = write!(
            out,
            "cmdstat_{}:calls={calls},usec={usec},usec_per_call={:.2},rejected_calls={},failed_calls={}\r\n",
            name,
            if calls > 0 { usec as f64 / calls as f64 } else { 0.0 },
            s.rejected.load(Ordering::Relaxed),
            s.failed.load(Ordering::Relaxed),
        );
    }
}

/// `# Latencystats`: for each command called while `latency-tracking` was on, the
/// percentiles `latency-tracking-info-percentiles` names, as Redis prints them; nothing
/// while tracking is off (as Redis, which keeps the histograms for when it is on again).
fn latencystats_section(shared: &Shared, out: &mut String) {
    out.push_str("# Latencystats\r\n");
    let percentiles: Vec<(String, f64)> = {
        let config = shared.config.read();
        if !config.latency_tracking {
            return;
        }
        config
            .latency_tracking_info_percentiles
            .iter()
            .map(|&p| (crate::config::params::percentile_text(p), p / 100.0))
            .collect()
    };
    let metrics = shared.engine.metrics();
    for (name, s) in metrics.commands() {
        let Some(h) = s.time().filter(|_| metrics.tracked_calls(s) > 0) else {
            continue;
        };
        let _ = write!(out, "latency_percentiles_usec_{name}:");
        for (i, (text, q)) in percentiles.iter().enumerate() {
            let sep = if i == 0 { "" } else { "," };
            let usec = h.percentile_ns(*q) as f64 / 1000.0;
            let _ = write!(out, "{sep}p{text}={usec:.3}");
        }
        out.push_str("\r\n");
    }
}

/// What is Tollgate's own: its version, mode, HTTP listener and limiter decisions.
fn tollgate_section(shared: &Shared, out: &mut String) {
    let (mut allowed, mut denied, mut units) = (0, 0, 0);
    for (_, _, a, d, u) in shared.engine.metrics().decisions.rows() {
        allowed += a;
        denied += d;
        units += u;
    }
    let _ = write!(
        out,
        "# Tollgate\r\ntollgate_version:{}\r\ntollgate_mode:{}\r\nhttp_listener:{}\r\n\
         limiter_decisions_allowed:{allowed}\r\nlimiter_decisions_denied:{denied}\r\n\
         limiter_units_charged:{units}\r\n",
        env!("CARGO_PKG_VERSION"),
        shared.engine.mode_name(),
        shared
            .http_addr
            .map_or_else(|| "off".to_string(), |a| a.to_string()),
    );
}

fn human_bytes(n: usize) -> String {
    match n {
        n if n >= 1 << 30 => format!("{:.2}G", n as f64 / (1u64 << 30) as f64),
        n if n >= 1 << 20 => format!("{:.2}M", n as f64 / (1u64 << 20) as f64),
        n if n >= 1 << 10 => format!("{:.2}K", n as f64 / 1024.0),
        n => format!("{n}B"),
    }
}

/// Redis's static reply buffer (`PROTO_REPLY_CHUNK_BYTES`): replies beyond it go to a
/// list of blocks of at least this size (CLIENT LIST `oll`).
pub const REPLY_CHUNK: usize = 16 * 1024;

/// One CLIENT LIST line. The memory fields are the connection's buffers as of its last
/// read: `qbuf`/`qbuf-free` the query buffer's data and free space, `rbs` its size,
/// `obl` the pending output up to [`REPLY_CHUNK`] and `oll` the blocks of
/// [`REPLY_CHUNK`] the rest fills (Redis's static buffer and reply list), `omem` those
/// blocks' bytes (0 while the replies fit the static buffer, as in Redis), `multi-mem`
/// the queued MULTI commands, `tot-mem` the buffers' capacities and those commands plus
/// the connection's own state; `idle` the seconds since its last read, `fd` its socket.
pub fn client_line(c: &ClientInfo) -> String {
    // Redis's order of the flag letters: O (MONITOR), P (pub/sub), x (MULTI), b (blocked);
    // N: none.
    let mut flags = String::new();
    if c.monitor {
        flags.push('O');
    }
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
    let tot = c.total_memory();
    let oll = c.obuf.saturating_sub(REPLY_CHUNK).div_ceil(REPLY_CHUNK);
    format!(
        "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db={} sub={} psub={} ssub={} multi={} qbuf={} qbuf-free={} argv-mem={} multi-mem={} rbs={} rbp={} obl={} oll={} omem={} tot-mem={tot} events=r cmd={} user={} redir=-1 resp={}",
        c.id,
        c.addr,
        c.laddr,
        c.fd,
        c.name,
        c.created.elapsed().as_secs(),
        super::coarse_ds().saturating_sub(c.last_interaction) / 10,
        flags,
        c.db,
        c.subs.0,
        c.subs.1,
        c.subs.2,
        if c.in_multi { c.multi_len as i64 } else { -1 },
        c.qbuf,
        c.qbuf_capacity.saturating_sub(c.qbuf),
        c.argv_mem,
        c.multi_mem,
        c.qbuf_capacity,
        c.qbuf_capacity,
        c.obuf.min(REPLY_CHUNK),
        oll,
        oll * REPLY_CHUNK,
        c.last_cmd,
        c.user,
        c.resp
    )
}

/// CONFIG GET/SET/RESETSTAT/REWRITE/HELP, over the parameter registry
/// (`crate::config::params`). The subcommand and its arity were checked against the
/// command table before this runs (`acl::categories::subcommand_refusal`).
pub fn config(shared: &Shared, a: &[Bytes]) -> Reply {
    let sub = String::from_utf8_lossy(&a[1]).to_ascii_lowercase();
    match sub.as_str() {
        "get" => {
            let patterns: Vec<&[u8]> = a[2..].iter().map(|p| &p[..]).collect();
            let pairs = params::config_get(&shared.config.read(), &patterns);
            Reply::Map(
                pairs
                    .into_iter()
                    .map(|(n, v)| (Reply::bulk(n), Reply::bulk(v)))
                    .collect(),
            )
        }
        "set" => {
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
        "resetstat" => {
            let s = &shared.stats;
            for c in [
                &s.total_connections,
                &s.total_commands,
                &s.rejected_connections,
                &shared.engine.pubsub().expired,
            ] {
                c.store(0, Ordering::Relaxed);
            }
            shared.engine.memory().reset_stats();
            shared.engine.metrics().reset();
            Reply::ok()
        }
        "rewrite" => match &shared.config.read().file {
            None => Reply::err("ERR The server is running without a config file"),
            Some(path) => Reply::err(format!(
                "ERR CONFIG REWRITE is not supported by Tollgate: edit {} (TOML) instead",
                path.display()
            )),
        },
        "help" => help_reply(
            "CONFIG",
            &[
                "GET <pattern>",
                "    Return parameters matching the glob-like <pattern> and their values.",
                "SET <directive> <value>",
                "    Set the configuration <directive> to <value>.",
                "RESETSTAT",
                "    Reset statistics reported by the INFO command.",
                "REWRITE",
                "    Rewrite the configuration file.",
            ],
        ),
        _ => command::unknown_subcommand(&a[0], &a[1]),
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
    shared.engine.set_object_settings(live.object_settings());
    Ok(())
}

fn flag_names(spec: &command::CommandSpec) -> Vec<Reply> {
    // In Redis 7.0's order (`addReplyFlagsForCommand`).
    let table = [
        (spec.has(flags::WRITE), "write"),
        (spec.has(flags::READONLY), "readonly"),
        (spec.has(flags::DENYOOM), "denyoom"),
        (spec.has(flags::ADMIN), "admin"),
        (spec.has(flags::PUBSUB), "pubsub"),
        (spec.has(flags::NOSCRIPT), "noscript"),
        (spec.has(flags::BLOCKING), "blocking"),
        (spec.has(flags::SKIP_MONITOR), "skip_monitor"),
        (spec.has(flags::FAST), "fast"),
        (spec.has(flags::NO_AUTH), "no_auth"),
        (spec.has(flags::MAY_REPLICATE), "may_replicate"),
        (spec.keys_optional(), "no_mandatory_keys"),
        (spec.has(flags::NO_MULTI), "no_multi"),
        (spec.movable_keys(), "movablekeys"),
    ];
    table
        .iter()
        .filter(|(set, _)| *set)
        .map(|(_, n)| Reply::Status(n.to_string()))
        .collect()
}

/// COMMAND INFO's entry of a row or of a subcommand ([`subcommand_spec`]): ten fields, the
/// last its subcommands' entries.
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
        // ACL categories (`crate::acl::categories`: Redis's own, from its COMMAND INFO).
        Reply::Set(
            crate::acl::categories::info_categories(spec.name)
                .into_iter()
                .map(Reply::Status)
                .collect(),
        ),
        redis.map_or(Reply::Set(vec![]), |d| d.tips.clone()),
        redis.map_or(Reply::Set(vec![]), |d| d.key_specs.clone()),
        // Redis's `addReplyCommandSubCommands`: an empty set for a command without
        // subcommands, else an array of their entries.
        if spec.subcommands.is_empty() {
            Reply::Set(vec![])
        } else {
            Reply::Array(
                spec.subcommands
                    .iter()
                    .map(|s| command_info(&subcommand_spec(s)))
                    .collect(),
            )
        },
    ])
}

/// A subcommand as a row of its own, for COMMAND INFO and GETKEYS: its name
/// (`config|get`), flags and keys, and Redis's arity, the one its calls are checked
/// against (`acl::categories`; a unit test checks every subcommand has one). No handler:
/// its container runs it.
fn subcommand_spec(sub: &command::table::Subcommand) -> command::CommandSpec {
    command::CommandSpec {
        name: sub.name,
        arity: crate::acl::categories::subcommand_arity(sub.name).unwrap_or(-2),
        flags: sub.flags,
        keys: sub.keys,
        handler: None,
        fast: None,
        client: None,
        denyoom_if: None,
        subcommands: &[],
    }
}

/// COMMAND INFO of one name: a command, `container|sub` (any case), or nil.
fn info_of(name: &[u8]) -> Reply {
    if let Some(spec) = command::lookup(name) {
        return command_info(spec);
    }
    match command::table::lookup_subcommand(name) {
        Some((_, sub)) => command_info(&subcommand_spec(sub)),
        None => Reply::Nil,
    }
}

/// COMMAND DOCS of one name (a command or `container|sub`) as its name and map; a
/// container's `subcommands` lists only those Tollgate implements.
fn docs_of(name: &[u8]) -> Option<(&'static str, Reply)> {
    if let Some(spec) = command::lookup(name) {
        let docs = command::docs::docs(spec.name).unwrap_or(Reply::Map(vec![]));
        return Some((spec.name, implemented_subcommands(spec, docs)));
    }
    let (_, sub) = command::table::lookup_subcommand(name)?;
    Some((sub.name, command::docs::docs(sub.name)?))
}

/// A container's docs with the subcommands Tollgate does not implement left out.
fn implemented_subcommands(spec: &command::CommandSpec, docs: Reply) -> Reply {
    let Reply::Map(fields) = docs else {
        return docs;
    };
    let fields = fields
        .into_iter()
        .map(|(k, v)| match v {
            Reply::Map(subs) if k == Reply::bulk("subcommands") => {
                let subs = subs
                    .into_iter()
                    .filter(|(name, _)| {
                        spec.subcommands
                            .iter()
                            .any(|s| *name == Reply::bulk(s.name))
                    })
                    .collect();
                (k, Reply::Map(subs))
            }
            v => (k, v),
        })
        .collect();
    Reply::Map(fields)
}

/// COMMAND, COMMAND COUNT, COMMAND INFO, COMMAND DOCS, COMMAND LIST, COMMAND GETKEYS,
/// COMMAND HELP (the subcommand and its arity checked before this runs).
pub fn command(a: &[Bytes]) -> Reply {
    let Some(sub) = a.get(1) else {
        return Reply::Array(command::all().map(command_info).collect());
    };
    if is(sub, "count") {
        Reply::Integer(command::all().count() as i64)
    } else if is(sub, "info") {
        if a.len() == 2 {
            return Reply::Array(command::all().map(command_info).collect());
        }
        Reply::Array(a[2..].iter().map(|n| info_of(n)).collect())
    } else if is(sub, "docs") {
        let docs: Vec<_> = if a.len() == 2 {
            command::all()
                .filter_map(|s| docs_of(s.name.as_bytes()))
                .collect()
        } else {
            a[2..].iter().filter_map(|n| docs_of(n)).collect()
        };
        Reply::Map(
            docs.into_iter()
                .map(|(name, docs)| (Reply::bulk(name), docs))
                .collect(),
        )
    } else if is(sub, "list") {
        command_list(&a[2..])
    } else if is(sub, "help") {
        // Redis 7.0.15's lines, without GETKEYSANDFLAGS, which Tollgate does not answer.
        help_reply(
            "COMMAND",
            &[
                "(no subcommand)",
                "    Return details about all Redis commands.",
                "COUNT",
                "    Return the total number of commands in this Redis server.",
                "LIST",
                "    Return a list of all commands in this Redis server.",
                "INFO [<command-name> ...]",
                "    Return details about multiple Redis commands.",
                "    If no command names are given, documentation details for all",
                "    commands are returned.",
                "DOCS [<command-name> ...]",
                "    Return documentation details about multiple Redis commands.",
                "    If no command names are given, documentation details for all",
                "    commands are returned.",
                "GETKEYS <full-command>",
                "    Return the keys from a full Redis command.",
            ],
        )
    } else if is(sub, "getkeys") {
        // Redis's order: known command, takes keys at all, arity, then the keys.
        // A container's call is its subcommand's (MEMORY USAGE's key).
        // (A subcommand Tollgate does not implement is an unknown command.)
        let target = command::lookup(&a[2]).and_then(|spec| {
            if spec.subcommands.is_empty() {
                Some(*spec)
            } else {
                spec.subcommand(&a[3]).map(subcommand_spec)
            }
        });
        match target.as_ref() {
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
        command::unknown_subcommand(&a[0], sub)
    }
}

/// COMMAND LIST [FILTERBY MODULE name | ACLCAT category | PATTERN pattern]: every command,
/// each container followed by its subcommands, as Redis 7.0 lists them. Tollgate has no
/// modules (no command is a module's); an unknown category lists nothing, as in Redis.
fn command_list(options: &[Bytes]) -> Reply {
    let keep: Box<dyn Fn(&str) -> bool> = match options {
        [] => Box::new(|_| true),
        [by, kind, arg] if is(by, "filterby") => {
            if is(kind, "module") {
                Box::new(|_| false)
            } else if is(kind, "aclcat") {
                let bit = crate::acl::categories::category_bit(&String::from_utf8_lossy(arg));
                let commands = crate::acl::categories::commands();
                Box::new(move |name| {
                    bit.zip(commands.find(name))
                        .is_some_and(|(bit, id)| commands.list[id].mask & bit != 0)
                })
            } else if is(kind, "pattern") {
                let pattern = arg.clone();
                Box::new(move |name| crate::glob::glob_match(&pattern, name.as_bytes(), true))
            } else {
                return Reply::err("ERR syntax error");
            }
        }
        _ => return Reply::err("ERR syntax error"),
    };
    Reply::Array(
        command::all()
            .flat_map(|s| std::iter::once(s.name).chain(s.subcommands.iter().map(|sub| sub.name)))
            .filter(|name| keep(name))
            .map(Reply::bulk)
            .collect(),
    )
}

/// MEMORY USAGE key [SAMPLES count] / MEMORY STATS / MEMORY HELP (the subcommand and its
/// arity checked before this runs).
pub async fn memory(shared: &Shared, db: usize, a: &[Bytes]) -> Reply {
    if is(&a[1], "help") {
        // Redis 7.0.15's lines, without DOCTOR, MALLOC-STATS and PURGE, which Tollgate
        // does not answer.
        return help_reply(
            "MEMORY",
            &[
                "STATS",
                "    Return information about the memory usage of the server.",
                "USAGE <key> [SAMPLES <count>]",
                "    Return memory in bytes used by <key> and its value. Nested values are",
                "    sampled up to <count> times (default: 5, 0 means sample all).",
            ],
        );
    }
    if is(&a[1], "usage") {
        // Redis's options: any number of `SAMPLES count` (a count of 0 or more; Tollgate
        // measures every value exactly, so the count changes nothing).
        for option in a[3..].chunks(2) {
            let [name, count] = option else {
                return Reply::err("ERR syntax error");
            };
            if !is(name, "samples") {
                return Reply::err("ERR syntax error");
            }
            match int(count) {
                Ok(n) if n >= 0 => {}
                Ok(_) => return Reply::err("ERR syntax error"),
                Err(_) => return Reply::err("ERR value is not an integer or out of range"),
            }
        }
        let now = shared.engine.clock().now_ms();
        let state = shared.engine.lock().await;
        return match state.ks.dbs[db].get(&a[2], now) {
            // The key's slot, its heap bytes when not inline, the value's estimate.
            Some(e) => Reply::Integer(crate::store::key_memory(&a[2], e) as i64),
            None => Reply::Nil,
        };
    }
    if is(&a[1], "stats") {
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
    command::unknown_subcommand(&a[0], &a[1])
}
