//! The CONFIG parameter registry: every Redis setting Tollgate accepts, in one table
//! ([`PARAMS`]). CONFIG GET and CONFIG SET, the command-line flags, the `TOLLGATE_*`
//! environment variables and the TOML file all read it, so a parameter is checked the same
//! way wherever it is set, with Redis 7.0's rules and error texts.
//!
//! A row is one of:
//!
//! - **live**: Tollgate implements it. The value is a field of [`Config`]; the row's `set`
//!   may refuse values that would weaken a guarantee (`appendonly yes` on a node that keeps
//!   data in memory only), and its [`Apply`] names what the running server updates after a
//!   CONFIG SET.
//! - **no effect**: Redis uses it to tune something Tollgate does not have (an internal
//!   encoding, the replication Tollgate does not run). The value is checked as Redis checks
//!   it, stored, and reported by CONFIG GET, and changes nothing; the README lists these.
//!
//! A name that is in neither group is unknown: CONFIG SET answers Redis's
//! `Unknown option` error, and a flag or TOML key with that name stops the server at start.

use std::collections::BTreeMap;

use super::{AppendFsync, Config};
use crate::glob::glob_match;
use crate::store::encoding::ObjectSettings;
use crate::store::eviction::Policy;

/// How a parameter's value is written, and checked (Redis 7.0's rules and texts).
#[derive(Clone, Copy)]
pub enum Kind {
    /// `yes` or `no`, any case.
    Bool,
    /// An integer (`string2ll`: an optional `-`, digits, no leading zero), compared with
    /// the bounds as a signed number.
    Int(i64, i64),
    /// An integer compared with the bounds as unsigned, as Redis does for its unsigned
    /// types (so `-1` is out of range, not unparsable).
    UInt(u64, u64),
    /// A byte count: digits and an optional unit `b`, `k` (1000), `kb` (1024), `m`, `mb`,
    /// `g`, `gb`, any case; compared as a signed number.
    Memory(i64, i64),
    /// A byte count compared as unsigned.
    MemoryU(u64, u64),
    /// One of these words, any case.
    Enum(&'static [&'static str]),
    /// Any text.
    Text,
    /// Checked by its own function, which returns the canonical text or Redis's error.
    Special(fn(&str) -> Result<String, String>),
}

/// What the running server updates after a CONFIG SET changed a parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Apply {
    /// Nothing: the value is read where it is used.
    Nothing,
    /// `maxmemory`, its policy and the LFU settings (the engine's limit).
    Memory,
    /// `busy-reply-threshold`.
    BusyThreshold,
    /// `maxclients` (the file-descriptor limit may have to grow).
    MaxClients,
    /// `appendfsync` (the Raft log's fsync policy, followed from the next group of writes).
    Fsync,
    /// `rdb-key-save-delay` (the per-key wait of snapshot writes).
    KeySaveDelay,
    /// `notify-keyspace-events`, `client-output-buffer-limit` (the pub/sub hub's).
    PubSub,
    /// The TLS files and options: certificates are read again for new handshakes.
    Tls,
    /// `slowlog-log-slower-than`, `slowlog-max-len`, `latency-monitor-threshold` (the slow
    /// log and the latency monitor).
    Slowlog,
    /// `requirepass`: the default user's password.
    Requirepass,
    /// `acllog-max-len` (the ACL LOG's length).
    AclLog,
    /// The compact encodings' thresholds (`hash-max-listpack-entries`, ...), which the
    /// keyspace reads on every write.
    Encodings,
    /// `hll-sparse-max-bytes` (the keyspace's copy).
    Hll,
    /// `min-replicas-to-write`, `min-replicas-max-lag`: whether writes are refused for
    /// want of replicas (the keyspace's copy).
    Replicas,
    /// `port`: the plaintext client port is bound anew and the old one closed.
    Port,
    /// `tls-port`: the same for the TLS client port.
    TlsPort,
}

/// What setting a parameter does.
#[derive(Clone, Copy)]
pub enum Effect {
    /// Implemented: read and written in a field of [`Config`]. `set` gets the checked,
    /// canonical value and may refuse it.
    Live {
        /// The value as CONFIG GET shows it.
        get: fn(&Config) -> String,
        /// Store a checked value (or refuse it with the text after Redis's `... - `).
        set: fn(&mut Config, &str) -> Result<(), String>,
        /// What to update after a CONFIG SET.
        apply: Apply,
    },
    /// Accepted and stored, with no effect on Tollgate; the text says why (for the README).
    NoEffect(&'static str),
}

/// One parameter.
#[derive(Clone, Copy)]
pub struct Param {
    /// Redis's name.
    pub name: &'static str,
    /// Redis's other name for it (`hash-max-ziplist-entries` for `hash-max-listpack-entries`).
    pub alias: Option<&'static str>,
    /// Its values.
    pub kind: Kind,
    /// Its value when nothing sets it, as CONFIG GET shows it.
    pub default: &'static str,
    /// Whether CONFIG SET may change it (otherwise only flags and the file, at start).
    pub mutable: bool,
    /// What it does.
    pub effect: Effect,
}

impl Param {
    const fn live(
        name: &'static str,
        kind: Kind,
        default: &'static str,
        get: fn(&Config) -> String,
        set: fn(&mut Config, &str) -> Result<(), String>,
        apply: Apply,
    ) -> Param {
        Param {
            name,
            alias: None,
            kind,
            default,
            mutable: true,
            effect: Effect::Live { get, set, apply },
        }
    }

    const fn stored(
        name: &'static str,
        kind: Kind,
        default: &'static str,
        why: &'static str,
    ) -> Param {
        Param {
            name,
            alias: None,
            kind,
            default,
            mutable: true,
            effect: Effect::NoEffect(why),
        }
    }

    const fn alias(mut self, alias: &'static str) -> Param {
        self.alias = Some(alias);
        self
    }

    const fn at_start_only(mut self) -> Param {
        self.mutable = false;
        self
    }

    /// Whether the parameter changes what Tollgate does.
    pub fn has_effect(&self) -> bool {
        matches!(self.effect, Effect::Live { .. })
    }
}

const INT_MAX: i64 = i32::MAX as i64;
const LONG_MAX: i64 = i64::MAX;
const MB: i64 = 1024 * 1024;

const ENCODING: &str = "tunes an internal encoding; Tollgate's encodings do not read it yet";
const REPLICATION: &str =
    "tunes Redis replication, which Tollgate does not run (a cluster replicates through Raft)";
const INTERNAL: &str = "tunes Redis internals Tollgate does not have";

/// Every parameter, in CONFIG GET's order. To add one, see the README's checklist
/// ("Configuration" → "Adding a parameter").
pub static PARAMS: &[Param] = &[
    // Network and clients.
    Param::live("bind", Kind::Text, "127.0.0.1", |c| c.bind.clone(), |c, v| {
        c.bind = v.to_string();
        Ok(())
    }, Apply::Nothing)
    .at_start_only(),
    Param::live("port", Kind::Int(0, 65535), "6379", |c| c.port.to_string(), |c, v| {
        c.port = number(v);
        Ok(())
    }, Apply::Port),
    Param::live("requirepass", Kind::Text, "", |c| c.requirepass.clone().unwrap_or_default(), |c, v| {
        c.requirepass = (!v.is_empty()).then(|| v.to_string());
        Ok(())
    }, Apply::Requirepass),
    Param::live("aclfile", Kind::Text, "", |c| c.aclfile.as_ref().map(|p| p.display().to_string()).unwrap_or_default(), |c, v| {
        c.aclfile = (!v.is_empty()).then(|| v.into());
        Ok(())
    }, Apply::Nothing)
    .at_start_only(),
    Param::live("acl-pubsub-default", Kind::Enum(&["allchannels", "resetchannels"]), "resetchannels", |c| if c.acl_pubsub_all { "allchannels" } else { "resetchannels" }.into(), |c, v| {
        c.acl_pubsub_all = v == "allchannels";
        Ok(())
    }, Apply::Nothing),
    Param::live("acllog-max-len", Kind::Int(0, LONG_MAX), "128", |c| c.acllog_max_len.to_string(), |c, v| {
        c.acllog_max_len = number(v);
        Ok(())
    }, Apply::AclLog),
    Param::live("protected-mode", Kind::Bool, "yes", |c| yes_no(c.protected_mode), |c, v| {
        c.protected_mode = v == "yes";
        Ok(())
    }, Apply::Nothing),
    Param::live("disable-thp", Kind::Bool, "yes", |c| yes_no(c.disable_thp), |c, v| {
        c.disable_thp = v == "yes";
        Ok(())
    }, Apply::Nothing)
    .at_start_only(),
    // TLS (see the README's "Security" section).
    Param::live("tls-port", Kind::Int(0, 65535), "0", |c| c.tls.port.to_string(), |c, v| {
        c.tls.port = number(v);
        Ok(())
    }, Apply::TlsPort),
    Param::live("tls-cert-file", Kind::Text, "", |c| c.tls.cert_file.clone(), |c, v| {
        c.tls.cert_file = v.to_string();
        Ok(())
    }, Apply::Tls),
    Param::live("tls-key-file", Kind::Text, "", |c| c.tls.key_file.clone(), |c, v| {
        c.tls.key_file = v.to_string();
        Ok(())
    }, Apply::Tls),
    // The passphrases of encrypted PKCS#8 keys (raft/src/tls.rs `load_key`); CONFIG GET
    // shows them, as Redis's does.
    Param::live("tls-key-file-pass", Kind::Text, "", |c| c.tls.key_file_pass.clone(), |c, v| {
        c.tls.key_file_pass = v.to_string();
        Ok(())
    }, Apply::Tls),
    Param::live("tls-ca-cert-file", Kind::Text, "", |c| c.tls.ca_cert_file.clone(), |c, v| {
        c.tls.ca_cert_file = v.to_string();
        Ok(())
    }, Apply::Tls),
    Param::live("tls-auth-clients", Kind::Enum(&["no", "yes", "optional"]), "yes", |c| auth_clients_name(c.tls.auth_clients).into(), |c, v| {
        use tollgate_raft::tls::ClientAuth;
        c.tls.auth_clients = match v {
            "no" => ClientAuth::None,
            "optional" => ClientAuth::Optional,
            _ => ClientAuth::Required,
        };
        Ok(())
    }, Apply::Tls),
    Param::live("tls-protocols", Kind::Special(crate::server::tls::check_protocols), "", |c| c.tls.protocols.clone(), |c, v| {
        c.tls.protocols = v.to_string();
        Ok(())
    }, Apply::Tls),
    Param::live("tls-client-cert-file", Kind::Text, "", |c| c.tls.client_cert_file.clone(), |c, v| {
        c.tls.client_cert_file = v.to_string();
        Ok(())
    }, Apply::Tls),
    Param::live("tls-client-key-file", Kind::Text, "", |c| c.tls.client_key_file.clone(), |c, v| {
        c.tls.client_key_file = v.to_string();
        Ok(())
    }, Apply::Tls),
    Param::live("tls-client-key-file-pass", Kind::Text, "", |c| c.tls.client_key_file_pass.clone(), |c, v| {
        c.tls.client_key_file_pass = v.to_string();
        Ok(())
    }, Apply::Tls),
    Param::live("tls-ciphers", Kind::Special(crate::server::tls::check_ciphers), "", |c| c.tls.ciphers.clone(), |c, v| {
        c.tls.ciphers = v.to_string();
        Ok(())
    }, Apply::Tls),
    Param::live("tls-ciphersuites", Kind::Special(crate::server::tls::check_ciphersuites), "", |c| c.tls.ciphersuites.clone(), |c, v| {
        c.tls.ciphersuites = v.to_string();
        Ok(())
    }, Apply::Tls),
    Param::live("tls-prefer-server-ciphers", Kind::Bool, "no", |c| yes_no(c.tls.prefer_server_ciphers), |c, v| {
        c.tls.prefer_server_ciphers = v == "yes";
        Ok(())
    }, Apply::Tls),
    Param::live("tls-session-caching", Kind::Bool, "yes", |c| yes_no(c.tls.session_caching), |c, v| {
        c.tls.session_caching = v == "yes";
        Ok(())
    }, Apply::Tls),
    Param::live("tls-session-cache-size", Kind::Int(0, INT_MAX), "20480", |c| c.tls.session_cache_size.to_string(), |c, v| {
        if v == "0" {
            return Err("0 (an unlimited cache, in Redis) is not supported: rustls's session cache holds a fixed number of sessions; give that number".into());
        }
        c.tls.session_cache_size = number(v);
        Ok(())
    }, Apply::Tls),
    Param::live("tls-session-cache-timeout", Kind::Int(0, INT_MAX), "300", |c| c.tls.session_cache_timeout.to_string(), |c, v| {
        c.tls.session_cache_timeout = number(v);
        Ok(())
    }, Apply::Tls),
    // Redis's TLS settings Tollgate cannot honour: the empty value (or `no`) is what they
    // mean when unset; anything else is refused with the reason.
    Param::live("tls-dh-params-file", Kind::Text, "", |_| String::new(), |_, v| {
        refuse_unless_empty(v, "Tollgate does not use DH parameters: rustls negotiates keys with ECDHE only (TLS 1.3, and TLS 1.2's ECDHE suites), so there is nothing to configure; remove the setting")
    }, Apply::Nothing),
    Param::live("tls-ca-cert-dir", Kind::Text, "", |_| String::new(), |_, v| {
        refuse_unless_empty(v, "a CA directory is not supported; put the CA certificates in one PEM file and name it in tls-ca-cert-file")
    }, Apply::Nothing),
    Param::live("tls-replication", Kind::Bool, "no", |_| "no".into(), |_, v| {
        if v == "yes" {
            return Err("Tollgate has no Redis replication to protect; the cluster link's TLS is tls-cluster".into());
        }
        Ok(())
    }, Apply::Nothing),
    Param::live("tls-cluster", Kind::Bool, "no", |c| yes_no(c.tls.cluster), |c, v| {
        if v == "yes" && c.cluster.is_none() {
            return Err("this node is not a cluster node (no --node-id): there is no cluster link to protect".into());
        }
        c.tls.cluster = v == "yes";
        Ok(())
    }, Apply::Nothing)
    .at_start_only(),
    Param::live("maxclients", Kind::UInt(1, u32::MAX as u64), "10000", |c| c.maxclients.to_string(), |c, v| {
        c.maxclients = number(v);
        Ok(())
    }, Apply::MaxClients),
    Param::live("proto-max-bulk-len", Kind::Memory(MB, LONG_MAX), "536870912", |c| c.proto_max_bulk_len.to_string(), |c, v| {
        c.proto_max_bulk_len = number(v);
        Ok(())
    }, Apply::Nothing),
    Param::live("client-query-buffer-limit", Kind::MemoryU(MB as u64, LONG_MAX as u64), "1073741824", |c| c.client_query_buffer_limit.to_string(), |c, v| {
        c.client_query_buffer_limit = number(v);
        Ok(())
    }, Apply::Nothing),
    Param::live("busy-reply-threshold", Kind::Int(0, LONG_MAX), "5000", |c| c.busy_reply_threshold.to_string(), |c, v| {
        c.busy_reply_threshold = number(v);
        Ok(())
    }, Apply::BusyThreshold)
    .alias("lua-time-limit"),
    Param::live("slowlog-log-slower-than", Kind::Int(-1, LONG_MAX), "10000", |c| c.slowlog_log_slower_than.to_string(), |c, v| {
        c.slowlog_log_slower_than = number(v);
        Ok(())
    }, Apply::Slowlog),
    Param::live("latency-monitor-threshold", Kind::Int(0, LONG_MAX), "0", |c| c.latency_monitor_threshold.to_string(), |c, v| {
        c.latency_monitor_threshold = number(v);
        Ok(())
    }, Apply::Slowlog),
    Param::live("slowlog-max-len", Kind::UInt(0, LONG_MAX as u64), "128", |c| c.slowlog_max_len.to_string(), |c, v| {
        c.slowlog_max_len = number(v);
        Ok(())
    }, Apply::Slowlog),
    Param::live("latency-tracking", Kind::Bool, "yes", |c| yes_no(c.latency_tracking), |c, v| {
        c.latency_tracking = v == "yes";
        Ok(())
    }, Apply::Slowlog),
    Param::live("latency-tracking-info-percentiles", Kind::Text, "50 99 99.9", |c| {
        c.latency_tracking_info_percentiles.iter().map(|p| percentile_text(*p)).collect::<Vec<_>>().join(" ")
    }, |c, v| {
        c.latency_tracking_info_percentiles = percentiles(v)?;
        Ok(())
    }, Apply::Nothing),
    Param::live("enable-debug-command", Kind::Enum(&["no", "yes", "local"]), "no", |c| yes_no(c.enable_debug_command), |c, v| {
        if v == "local" {
            return Err("'local' is not supported by Tollgate: use yes (trusted networks only) or no".into());
        }
        c.enable_debug_command = v == "yes";
        Ok(())
    }, Apply::Nothing)
    .at_start_only(),
    Param::live("databases", Kind::Int(1, INT_MAX), "16", |_| crate::store::DATABASES.to_string(), |_, v| {
        if v != crate::store::DATABASES.to_string() {
            return Err(format!("Tollgate always has {} databases", crate::store::DATABASES));
        }
        Ok(())
    }, Apply::Nothing)
    .at_start_only(),
    // Memory.
    Param::live("maxmemory", Kind::MemoryU(0, u64::MAX), "0", |c| c.memory.maxmemory.to_string(), |c, v| {
        c.memory.maxmemory = number(v);
        Ok(())
    }, Apply::Memory),
    Param::live("maxmemory-policy", Kind::Enum(&Policy::NAMES), "noeviction", |c| c.memory.policy.name().to_string(), |c, v| {
        c.memory.policy = Policy::parse(v).unwrap_or_default();
        Ok(())
    }, Apply::Memory),
    Param::live("maxmemory-samples", Kind::Int(1, INT_MAX), "5", |c| c.memory.samples.to_string(), |c, v| {
        c.memory.samples = number(v);
        Ok(())
    }, Apply::Memory),
    Param::live("lfu-log-factor", Kind::Int(0, INT_MAX), "10", |c| c.memory.lfu_log_factor.to_string(), |c, v| {
        c.memory.lfu_log_factor = number(v);
        Ok(())
    }, Apply::Memory),
    Param::live("lfu-decay-time", Kind::Int(0, INT_MAX), "1", |c| c.memory.lfu_decay_time.to_string(), |c, v| {
        c.memory.lfu_decay_time = number(v);
        Ok(())
    }, Apply::Memory),
    Param::live("maxmemory-clients", Kind::Special(max_memory_clients), "0", |_| "0".into(), |_, v| {
        if v != "0" {
            return Err("client eviction is not implemented by Tollgate; only 0 (off) is accepted".into());
        }
        Ok(())
    }, Apply::Nothing),
    Param::stored("maxmemory-eviction-tenacity", Kind::Int(0, 100), "10", "Tollgate evicts up to 1,000 keys before a command and the rest in the background, whatever the tenacity"),
    Param::stored("active-expire-effort", Kind::Int(1, 10), "1", "Tollgate's expiry finds due keys from a deadline index, without sampling effort"),
    Param::stored("activerehashing", Kind::Bool, "yes", "Tollgate's tables are sharded and rehash one small shard at a time"),
    Param::live("activedefrag", Kind::Bool, "no", |_| "no".into(), |_, v| {
        if v == "yes" {
            return Err("Active defragmentation cannot be enabled: it requires a Redis server compiled with a modified Jemalloc like the one shipped by default with the Redis source distribution".into());
        }
        Ok(())
    }, Apply::Nothing),
    Param::stored("active-defrag-ignore-bytes", Kind::MemoryU(1, LONG_MAX as u64), "104857600", INTERNAL),
    Param::stored("active-defrag-threshold-lower", Kind::Int(0, 1000), "10", INTERNAL),
    Param::stored("active-defrag-threshold-upper", Kind::Int(0, 1000), "100", INTERNAL),
    Param::stored("active-defrag-cycle-min", Kind::Int(1, 99), "1", INTERNAL),
    Param::stored("active-defrag-cycle-max", Kind::Int(1, 99), "25", INTERNAL),
    Param::stored("active-defrag-max-scan-fields", Kind::UInt(1, LONG_MAX as u64), "1000", INTERNAL),
    Param::stored("lazyfree-lazy-eviction", Kind::Bool, "no", INTERNAL),
    Param::stored("lazyfree-lazy-expire", Kind::Bool, "no", INTERNAL),
    Param::stored("lazyfree-lazy-server-del", Kind::Bool, "no", INTERNAL),
    Param::stored("lazyfree-lazy-user-del", Kind::Bool, "no", INTERNAL),
    Param::stored("lazyfree-lazy-user-flush", Kind::Bool, "no", INTERNAL),
    Param::stored("hz", Kind::Special(hz), "10", "Tollgate's background jobs (active expiry, eviction, stats) run on one fixed 100 ms timer, as with hz 10"),
    Param::stored("dynamic-hz", Kind::Bool, "yes", INTERNAL),
    // Persistence: what this node actually does, or an error.
    Param::live("appendonly", Kind::Bool, "no", |c| yes_no(c.cluster.is_some()), |c, v| {
        match (c.cluster.is_some(), v == "yes") {
            (true, true) | (false, false) => Ok(()),
            (false, true) => Err(format!("this node was started without a data directory and keeps its data in memory only; appendonly cannot be turned on while it runs. {DURABLE}")),
            (true, false) => Err("this node writes every write to its Raft log before acknowledging it; to run in memory only, restart it without --data-dir and appendonly".into()),
        }
    }, Apply::Nothing),
    Param::live("appendfsync", Kind::Enum(&["everysec", "always", "no"]), "everysec", |c| match &c.cluster {
        Some(cl) => fsync_name(cl.fsync).into(),
        None => "everysec".into(),
    }, set_appendfsync, Apply::Fsync),
    Param::live("save", Kind::Special(save_points), "", |c| c.save.clone(), |c, v| {
        if v.is_empty() || c.cluster.is_some() {
            c.save = v.to_string();
            return Ok(());
        }
        Err(format!("this node keeps its data in memory only, so there is nothing to snapshot; only \"\" (no snapshots) is accepted. {DURABLE}"))
    }, Apply::Nothing),
    Param::live("rdb-key-save-delay", Kind::Int(0, INT_MAX), "0", |c| c.rdb_key_save_delay.to_string(), |c, v| {
        if v != "0" && c.cluster.is_none() {
            return Err(format!("this node keeps its data in memory only and writes no snapshot to delay. {DURABLE}"));
        }
        c.rdb_key_save_delay = number(v);
        Ok(())
    }, Apply::KeySaveDelay),
    Param::live("min-replicas-to-write", Kind::Int(0, INT_MAX), "0", |c| c.min_replicas_to_write.to_string(), |c, v| {
        if v != "0" && c.cluster.is_some() {
            return Err("a Raft node (durable or clustered) has no Redis replicas to count: it acknowledges a write only once a majority of its voters stored it".into());
        }
        c.min_replicas_to_write = number(v);
        Ok(())
    }, Apply::Replicas)
    .alias("min-slaves-to-write"),
    Param::live("notify-keyspace-events", Kind::Special(keyspace_events), "",
        |c| crate::pubsub::notify::to_text(c.notify_keyspace_events),
        |c, v| {
            let flags = crate::pubsub::notify::parse(v).unwrap_or(0);
            if flags & crate::pubsub::notify::KEY_MISS != 0 {
                return Err("Tollgate does not fire key-miss events ('m'); the other classes are supported".into());
            }
            c.notify_keyspace_events = flags;
            Ok(())
        }, Apply::PubSub),
    Param::live("client-output-buffer-limit", Kind::Special(output_buffer_limits),
        "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60",
        |c| {
            let [n, r, p] = &c.output_buffer_limits;
            format!("normal {} {} {} slave {} {} {} pubsub {} {} {}",
                n.hard, n.soft, n.soft_secs, r.hard, r.soft, r.soft_secs, p.hard, p.soft, p.soft_secs)
        },
        set_output_buffer_limits, Apply::PubSub),
    // Encodings of collections.
    Param::live("hash-max-listpack-entries", Kind::UInt(0, LONG_MAX as u64), "512", |c| c.encodings.hash.entries.to_string(), |c, v| {
        c.encodings.hash.entries = cluster_fixed(c, number(v), "512")?;
        Ok(())
    }, Apply::Encodings).alias("hash-max-ziplist-entries"),
    Param::live("hash-max-listpack-value", Kind::MemoryU(0, LONG_MAX as u64), "64", |c| c.encodings.hash.value.to_string(), |c, v| {
        c.encodings.hash.value = cluster_fixed(c, number(v), "64")?;
        Ok(())
    }, Apply::Encodings).alias("hash-max-ziplist-value"),
    Param::live("zset-max-listpack-entries", Kind::UInt(0, LONG_MAX as u64), "128", |c| c.encodings.zset.entries.to_string(), |c, v| {
        c.encodings.zset.entries = cluster_fixed(c, number(v), "128")?;
        Ok(())
    }, Apply::Encodings).alias("zset-max-ziplist-entries"),
    Param::live("zset-max-listpack-value", Kind::MemoryU(0, LONG_MAX as u64), "64", |c| c.encodings.zset.value.to_string(), |c, v| {
        c.encodings.zset.value = cluster_fixed(c, number(v), "64")?;
        Ok(())
    }, Apply::Encodings).alias("zset-max-ziplist-value"),
    Param::live("set-max-intset-entries", Kind::UInt(0, LONG_MAX as u64), "512", |c| c.encodings.set_intset_entries.to_string(), |c, v| {
        c.encodings.set_intset_entries = cluster_fixed(c, number(v), "512")?;
        Ok(())
    }, Apply::Encodings),
    Param::stored("list-max-listpack-size", Kind::Int(i32::MIN as i64, INT_MAX), "-2", ENCODING).alias("list-max-ziplist-size"),
    Param::stored("list-compress-depth", Kind::Int(0, INT_MAX), "0", ENCODING),
    Param::stored("stream-node-max-bytes", Kind::MemoryU(0, LONG_MAX as u64), "4096", "tunes streams, which Tollgate does not have"),
    Param::stored("stream-node-max-entries", Kind::Int(0, LONG_MAX), "100", "tunes streams, which Tollgate does not have"),
    Param::live("hll-sparse-max-bytes", Kind::MemoryU(0, LONG_MAX as u64), "3000", |c| c.hll_sparse_max_bytes.to_string(), |c, v| {
        // The sparse/dense switch decides a HyperLogLog's bytes, which every node must
        // write alike.
        c.hll_sparse_max_bytes = cluster_fixed(c, number(v), "3000")? as u64;
        Ok(())
    }, Apply::Hll),
    // Replication.
    Param::stored("repl-ping-replica-period", Kind::Int(1, INT_MAX), "10", REPLICATION).alias("repl-ping-slave-period"),
    Param::stored("repl-timeout", Kind::Int(1, INT_MAX), "60", REPLICATION),
    Param::stored("repl-backlog-size", Kind::Special(repl_backlog_size), "1048576", REPLICATION),
    Param::stored("repl-backlog-ttl", Kind::Int(0, LONG_MAX), "3600", REPLICATION),
    Param::stored("repl-disable-tcp-nodelay", Kind::Bool, "no", REPLICATION),
    Param::stored("repl-diskless-sync", Kind::Bool, "yes", REPLICATION),
    Param::stored("repl-diskless-sync-delay", Kind::Int(0, INT_MAX), "5", REPLICATION),
    Param::stored("repl-diskless-sync-max-replicas", Kind::Int(0, INT_MAX), "0", REPLICATION),
    Param::stored("repl-diskless-load", Kind::Enum(&["disabled", "on-empty-db", "swapdb"]), "disabled", REPLICATION),
    Param::stored("replica-serve-stale-data", Kind::Bool, "yes", REPLICATION).alias("slave-serve-stale-data"),
    Param::stored("replica-read-only", Kind::Bool, "yes", REPLICATION).alias("slave-read-only"),
    Param::stored("replica-lazy-flush", Kind::Bool, "no", REPLICATION).alias("slave-lazy-flush"),
    Param::stored("replica-ignore-maxmemory", Kind::Bool, "yes", REPLICATION).alias("slave-ignore-maxmemory"),
    Param::stored("replica-priority", Kind::Int(0, INT_MAX), "100", REPLICATION).alias("slave-priority"),
    Param::stored("replica-announced", Kind::Bool, "yes", REPLICATION),
    Param::live("min-replicas-max-lag", Kind::Int(0, INT_MAX), "10", |c| c.min_replicas_max_lag.to_string(), |c, v| {
        c.min_replicas_max_lag = number(v);
        Ok(())
    }, Apply::Replicas).alias("min-slaves-max-lag"),
];

/// How to get a durable node.
const DURABLE: &str = "For durable storage start it with --data-dir <dir> (or appendonly yes), which keeps every write in a Raft log on disk.";

fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.to_string()
}

fn auth_clients_name(a: tollgate_raft::tls::ClientAuth) -> &'static str {
    match a {
        tollgate_raft::tls::ClientAuth::Required => "yes",
        tollgate_raft::tls::ClientAuth::Optional => "optional",
        tollgate_raft::tls::ClientAuth::None => "no",
    }
}

fn fsync_name(f: AppendFsync) -> &'static str {
    match f {
        AppendFsync::Always => "always",
        AppendFsync::EverySec => "everysec",
    }
}

/// A checked numeric value into a field (the kind's bounds make it fit).
fn refuse_unless_empty(v: &str, why: &str) -> Result<(), String> {
    if v.is_empty() {
        Ok(())
    } else {
        Err(why.into())
    }
}

/// An encoding threshold on a cluster node must stay at Redis's default: a set's
/// encoding decides its iteration order (SPOP, SRANDMEMBER, SMEMBERS), a sorted set's
/// whether a `-0` score survives, and a hash's whether HDEL keeps the field order, so
/// nodes with different thresholds would apply the same replicated write differently.
/// Refusing any other value on every node (file, flags and CONFIG SET alike) makes all
/// nodes use the same thresholds without replicating them.
/// `default` is the parameter's default as the registry row spells it.
fn cluster_fixed(c: &Config, n: usize, default: &str) -> Result<usize, String> {
    if c.cluster.is_some() && n != number::<usize>(default) {
        return Err(format!(
            "a cluster node keeps the encoding thresholds at their defaults ({default} here), so that every node applies a replicated write alike"
        ));
    }
    Ok(n)
}

fn number<T: std::str::FromStr + Default>(v: &str) -> T {
    v.parse().unwrap_or_default()
}

fn set_appendfsync(c: &mut Config, v: &str) -> Result<(), String> {
    let Some(cluster) = c.cluster.as_mut() else {
        return Err(format!("this node keeps its data in memory only (appendonly is no), so there is no file to fsync. {DURABLE}"));
    };
    cluster.fsync = match v {
        "always" => AppendFsync::Always,
        "everysec" => AppendFsync::EverySec,
        _ => return Err("appendfsync no is not supported: the Raft log is fsynced always (before each acknowledgement) or everysec".into()),
    };
    Ok(())
}

/// `hz`: 0 to INT_MAX, used as 1 to 500 (Redis clamps it the same way).
fn hz(v: &str) -> Result<String, String> {
    let n: i64 = check(Kind::Int(0, INT_MAX), v)?.parse().unwrap_or(10);
    Ok(n.clamp(1, 500).to_string())
}

/// `repl-backlog-size`: a byte count of at least 1, used as at least 16 kB (as in Redis).
fn repl_backlog_size(v: &str) -> Result<String, String> {
    let n: i64 = check(Kind::Memory(1, LONG_MAX), v)?.parse().unwrap_or(1);
    Ok(n.max(16 * 1024).to_string())
}

/// `maxmemory-clients`: a byte count or a percentage of `maxmemory` (`10%`).
fn max_memory_clients(v: &str) -> Result<String, String> {
    if let Some(n) = memtoull(v) {
        return match i64::try_from(n) {
            Ok(n) => Ok(n.to_string()),
            Err(_) => Err(format!(
                "argument must be between -100 and {} inclusive",
                i64::MAX
            )),
        };
    }
    if let Some(p) = v.strip_suffix('%').filter(|p| !p.is_empty()) {
        if let Some(n) = string2ll(p).filter(|n| *n >= 0) {
            if n > 100 {
                return Err("percentage argument must be less or equal to 100".into());
            }
            return Ok(format!("{n}%"));
        }
    }
    Err("argument must be a memory or percent value".into())
}

/// `save`: pairs of seconds (at least 1) and changes (at least 0), or "" for none.
fn save_points(v: &str) -> Result<String, String> {
    if v.is_empty() {
        return Ok(String::new());
    }
    let parts: Vec<&str> = v.split(' ').collect();
    let valid = parts.len().is_multiple_of(2)
        && parts.iter().enumerate().all(|(i, p)| {
            let min = if i % 2 == 0 { 1 } else { 0 };
            strtoll_whole(p).is_some_and(|n| n >= min)
        });
    if !valid {
        return Err("Invalid save parameters".into());
    }
    Ok(v.to_string())
}

/// `notify-keyspace-events`: Redis's class characters.
fn keyspace_events(v: &str) -> Result<String, String> {
    match crate::pubsub::notify::parse(v) {
        Some(_) => Ok(v.to_string()),
        None => Err("Invalid event class character. Use 'Ag$lshzxeKEtmdn'.".into()),
    }
}

/// `client-output-buffer-limit`: `<class> <hard> <soft> <soft seconds>` groups, as Redis
/// checks them; the class index (normal, replica, pubsub) and limit of each group.
fn parse_output_limits(v: &str) -> Result<Vec<(usize, crate::pubsub::OutputLimit)>, String> {
    let words: Vec<&str> = v.split_whitespace().collect();
    if !words.len().is_multiple_of(4) {
        return Err("Wrong number of arguments in buffer limit configuration.".into());
    }
    words
        .chunks(4)
        .map(|g| {
            let class = match g[0].to_ascii_lowercase().as_str() {
                "normal" => 0,
                "slave" | "replica" => 1,
                "pubsub" => 2,
                _ => {
                    return Err(
                        "Invalid client class specified in buffer limit configuration.".to_string(),
                    )
                }
            };
            let bad = || {
                "Error in hard, soft or soft_seconds setting in buffer limit configuration."
                    .to_string()
            };
            let hard = memtoull(g[1]).ok_or_else(bad)?;
            let soft = memtoull(g[2]).ok_or_else(bad)?;
            let soft_secs = string2ll(g[3]).filter(|s| *s >= 0).ok_or_else(bad)? as u64;
            Ok((
                class,
                crate::pubsub::OutputLimit {
                    hard,
                    soft,
                    soft_secs,
                },
            ))
        })
        .collect()
}

fn output_buffer_limits(v: &str) -> Result<String, String> {
    parse_output_limits(v).map(|_| v.to_string())
}

/// Tollgate enforces the pubsub class; the normal class only unlimited (Tollgate writes a
/// normal client's replies as it reads its requests, so they cannot pile up unread); the
/// replica class is kept for CONFIG GET (Tollgate has no Redis replicas).
fn set_output_buffer_limits(c: &mut Config, v: &str) -> Result<(), String> {
    let groups = parse_output_limits(v)?;
    for (class, limit) in &groups {
        if *class == 0 && (limit.hard, limit.soft) != (0, 0) {
            return Err("Tollgate applies output buffer limits to pubsub clients only; the normal class must be 0 0 0".into());
        }
    }
    for (class, limit) in groups {
        c.output_buffer_limits[class] = limit;
    }
    Ok(())
}

/// C `strtoll(s, &end, 10)` requiring the whole string to be consumed (leading spaces and
/// a sign allowed; an empty string is 0).
fn strtoll_whole(s: &str) -> Option<i64> {
    let t = s.trim_start();
    if t.is_empty() {
        return Some(0);
    }
    let digits = t.strip_prefix(['+', '-']).unwrap_or(t);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(t.parse::<i64>().unwrap_or(if t.starts_with('-') {
        i64::MIN
    } else {
        i64::MAX
    }))
}

/// Redis's `string2ll`: an optional `-`, then digits without a leading zero (or just `0`).
pub fn string2ll(s: &str) -> Option<i64> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'))
        && s != "-0";
    if !canonical {
        return None;
    }
    s.parse().ok()
}

/// Redis 7.0's `memtoull`: digits and an optional unit. As in Redis, digits that overflow
/// saturate and a unit's multiplication wraps.
pub fn memtoull(s: &str) -> Option<u64> {
    if s.starts_with('-') {
        return None;
    }
    let end = s
        .bytes()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(s.len());
    let (digits, unit) = s.split_at(end);
    let mul: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1024 * 1024,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    let value = if digits.is_empty() {
        0
    } else {
        digits.parse::<u64>().unwrap_or(u64::MAX)
    };
    Some(value.wrapping_mul(mul))
}

/// Check `value` against `kind`: its canonical text, or Redis's error text.
pub fn check(kind: Kind, value: &str) -> Result<String, String> {
    let between = |min: &dyn std::fmt::Display, max: &dyn std::fmt::Display| {
        format!("argument must be between {min} and {max} inclusive")
    };
    match kind {
        Kind::Bool => match value.to_ascii_lowercase().as_str() {
            "yes" => Ok("yes".into()),
            "no" => Ok("no".into()),
            _ => Err("argument must be 'yes' or 'no'".into()),
        },
        Kind::Int(min, max) | Kind::Memory(min, max) => {
            let n = match kind {
                Kind::Memory(..) => memtoull(value)
                    .map(|n| n as i64)
                    .ok_or_else(|| "argument must be a memory value".to_string())?,
                _ => string2ll(value)
                    .ok_or_else(|| "argument couldn't be parsed into an integer".to_string())?,
            };
            if n < min || n > max {
                return Err(between(&min, &max));
            }
            Ok(n.to_string())
        }
        Kind::UInt(min, max) | Kind::MemoryU(min, max) => {
            let n = match kind {
                Kind::MemoryU(..) => {
                    memtoull(value).ok_or_else(|| "argument must be a memory value".to_string())?
                }
                _ => string2ll(value)
                    .ok_or_else(|| "argument couldn't be parsed into an integer".to_string())?
                    as u64,
            };
            if n < min || n > max {
                return Err(between(&min, &max));
            }
            Ok(n.to_string())
        }
        Kind::Enum(words) => words
            .iter()
            .find(|w| w.eq_ignore_ascii_case(value))
            .map(|w| w.to_string())
            .ok_or_else(|| {
                format!(
                    "argument(s) must be one of the following: {}",
                    words.join(", ")
                )
            }),
        Kind::Text => Ok(value.to_string()),
        Kind::Special(f) => f(value),
    }
}

/// The parameter called `name` (a name or an alias, any case), and the name it was found
/// under.
pub fn lookup(name: &str) -> Option<(&'static Param, &'static str)> {
    PARAMS.iter().find_map(|p| {
        if p.name.eq_ignore_ascii_case(name) {
            Some((p, p.name))
        } else {
            p.alias
                .filter(|a| a.eq_ignore_ascii_case(name))
                .map(|a| (p, a))
        }
    })
}

impl Config {
    /// What OBJECT REFCOUNT judges by: whether small integers are shared, which Redis
    /// stops doing when `maxmemory` is set with an LRU or LFU policy.
    pub fn object_settings(&self) -> ObjectSettings {
        let policy = self.memory.policy;
        let lru_or_lfu = matches!(
            policy,
            Policy::AllKeysLru | Policy::VolatileLru | Policy::AllKeysLfu | Policy::VolatileLfu
        );
        ObjectSettings {
            shared_integers: self.memory.maxmemory == 0 || !lru_or_lfu,
        }
    }

    /// The current value of `p`, as CONFIG GET shows it.
    pub fn param_value(&self, p: &Param) -> String {
        match p.effect {
            Effect::Live { get, .. } => get(self),
            Effect::NoEffect(_) => self
                .stored
                .get(p.name)
                .cloned()
                .unwrap_or_else(|| p.default.to_string()),
        }
    }

    /// Check `value` for `p` and store it; on error, the text Redis puts after
    /// `CONFIG SET failed (possibly related to argument '...') - `.
    pub fn set_param(&mut self, p: &Param, value: &str) -> Result<(), String> {
        let canonical = check(p.kind, value)?;
        match p.effect {
            Effect::Live { set, .. } => set(self, &canonical),
            Effect::NoEffect(_) => {
                self.stored.insert(p.name, canonical);
                Ok(())
            }
        }
    }

    /// Set each `(name, value)` at start (flags, environment, file): any parameter, mutable
    /// or not. `source` names where they came from, for the error.
    pub fn set_params(
        &mut self,
        source: &str,
        settings: &[(String, String)],
    ) -> Result<(), String> {
        for (name, value) in settings {
            let (p, _) =
                lookup(name).ok_or_else(|| format!("unknown setting '{name}' in {source}"))?;
            self.set_param(p, value)
                .map_err(|e| format!("bad value '{value}' for '{name}' in {source}: {e}"))?;
        }
        Ok(())
    }
}

/// CONFIG GET: `(name, value)` for each parameter name (aliases included) that one of
/// `patterns` matches, in the registry's order, each once. A pattern without glob
/// characters names one parameter (and the reply uses its spelling), as in Redis 7.0.
pub fn config_get(config: &Config, patterns: &[&[u8]]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut seen: BTreeMap<String, ()> = BTreeMap::new();
    let mut add = |out: &mut Vec<(String, String)>, name: String, p: &Param| {
        if seen.insert(name.to_ascii_lowercase(), ()).is_none() {
            out.push((name, config.param_value(p)));
        }
    };
    for pattern in patterns {
        if !pattern.iter().any(|b| matches!(b, b'*' | b'?' | b'[')) {
            if let Some((p, _)) = std::str::from_utf8(pattern).ok().and_then(lookup) {
                add(&mut out, String::from_utf8_lossy(pattern).into_owned(), p);
            }
            continue;
        }
        for p in PARAMS {
            for name in std::iter::once(p.name).chain(p.alias) {
                if glob_match(pattern, name.as_bytes(), true) {
                    add(&mut out, name.to_string(), p);
                }
            }
        }
    }
    out
}

/// `latency-tracking-info-percentiles`' value: percentiles between 0 and 100, separated by
/// single spaces (Redis splits the value on each space), `""` for none; Redis's texts.
fn percentiles(v: &str) -> Result<Vec<f64>, String> {
    if v.is_empty() {
        return Ok(Vec::new());
    }
    v.split(' ')
        .map(|p| {
            use crate::numbers::long_double::{check, Check};
            // Redis reads each with `string2ld` (inf is a number there, NaN is not).
            if check(p.as_bytes()) == Check::NotFloat {
                return Err("Invalid latency-tracking-info-percentiles parameters");
            }
            let p = crate::numbers::strtod(p.as_bytes()).value;
            if !(0.0..=100.0).contains(&p) {
                return Err(
                    "latency-tracking-info-percentiles parameters should sit between [0.0,100.0]",
                );
            }
            Ok(p)
        })
        .collect::<Result<_, _>>()
        .map_err(str::to_string)
}

/// A percentile as Redis prints it: `%f`, then without trailing zeros and point
/// (`trimDoubleString`): 50 → "50", 99.9 → "99.9".
pub fn percentile_text(p: f64) -> String {
    let text = format!("{p:.6}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Redis 7.0.15's immutable parameters (set only at start-up) that Tollgate has no
/// parameter for: CONFIG SET answers them Redis's "can't set immutable config", as
/// redis-server does, rather than calling them unknown (CONFIG GET does not list them).
pub const REDIS_IMMUTABLE: &[&str] = &[
    "always-show-logo",
    "aof_rewrite_cpulist",
    "appenddirname",
    "appendfilename",
    "bgsave_cpulist",
    "bio_cpulist",
    "cluster-config-file",
    "cluster-enabled",
    "cluster-port",
    "daemonize",
    "enable-module-command",
    "enable-protected-configs",
    "io-threads",
    "io-threads-do-reads",
    "logfile",
    "pidfile",
    "rdbchecksum",
    "replicaof",
    "server_cpulist",
    "set-proc-title",
    "slaveof",
    "socket-mark-id",
    "supervised",
    "syslog-enabled",
    "syslog-facility",
    "syslog-ident",
    "tcp-backlog",
    "unixsocket",
    "unixsocketperm",
];

/// CONFIG SET's checks, all or nothing, in Redis 7.0's order: the names in order until
/// the first that is unknown, immutable or repeated (that one is the error), then every
/// value valid. Returns the changed configuration and what the server must apply, or
/// Redis's whole error text.
pub fn config_set(
    config: &Config,
    pairs: &[(&[u8], &[u8])],
) -> Result<(Config, Vec<Apply>), String> {
    let mut found: Vec<(&'static Param, &'static str)> = Vec::with_capacity(pairs.len());
    let mut unknown: Option<String> = None;
    let mut refused: Option<(String, &str)> = None;
    for (name, _) in pairs {
        if unknown.is_some() || refused.is_some() {
            break;
        }
        let given = String::from_utf8_lossy(name);
        let Some(entry) = std::str::from_utf8(name).ok().and_then(lookup) else {
            if REDIS_IMMUTABLE.contains(&given.to_ascii_lowercase().as_str()) {
                refused = Some((given.into_owned(), "can't set immutable config"));
            } else {
                unknown = Some(crate::command::arg_text(name).into_owned());
            }
            continue;
        };
        if !entry.0.mutable {
            refused = Some((given.into_owned(), "can't set immutable config"));
        } else if found
            .iter()
            .any(|(p, n)| std::ptr::eq(*p, entry.0) && *n == entry.1)
        {
            refused = Some((given.into_owned(), "duplicate parameter"));
        }
        found.push(entry);
    }
    if let Some(name) = unknown {
        return Err(format!(
            "ERR Unknown option or number of arguments for CONFIG SET - '{name}'"
        ));
    }
    if let Some((name, why)) = refused {
        return Err(set_failed(&name, why));
    }
    let mut next = config.clone();
    let mut apply = Vec::new();
    for ((p, name), (_, value)) in found.iter().zip(pairs) {
        let value = String::from_utf8_lossy(value);
        next.set_param(p, &value)
            .map_err(|e| set_failed(name, &e))?;
        if let Effect::Live { apply: a, .. } = p.effect {
            if a != Apply::Nothing && !apply.contains(&a) {
                apply.push(a);
            }
        }
    }
    Ok((next, apply))
}

/// Redis's text for a CONFIG SET that failed on parameter `name`.
pub fn set_failed(name: &str, why: &str) -> String {
    format!("ERR CONFIG SET failed (possibly related to argument '{name}') - {why}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(c: &Config, args: &[&str]) -> Result<Config, String> {
        let pairs: Vec<(&[u8], &[u8])> = args
            .chunks(2)
            .map(|p| (p[0].as_bytes(), p[1].as_bytes()))
            .collect();
        config_set(c, &pairs).map(|(c, _)| c)
    }

    fn get(c: &Config, pattern: &str) -> Vec<(String, String)> {
        config_get(c, &[pattern.as_bytes()])
    }

    #[test]
    fn names_are_unique_and_defaults_pass_their_own_checks() {
        let mut names = std::collections::HashSet::new();
        let c = Config::default();
        for p in PARAMS {
            for n in std::iter::once(p.name).chain(p.alias) {
                assert!(names.insert(n), "{n} listed twice");
                assert_eq!(n, n.to_ascii_lowercase());
            }
            assert_eq!(
                check(p.kind, p.default).as_deref(),
                Ok(p.default),
                "{}",
                p.name
            );
            assert_eq!(c.param_value(p), p.default, "{}", p.name);
        }
    }

    #[test]
    fn the_readme_lists_every_parameter() {
        let readme =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
        for p in PARAMS {
            for name in std::iter::once(p.name).chain(p.alias) {
                assert!(
                    readme.contains(&format!("`{name}`")),
                    "README's configuration tables do not list `{name}`"
                );
            }
        }
    }

    #[test]
    fn memory_values_parse_like_redis() {
        for (text, bytes) in [
            ("0", 0),
            ("", 0),
            ("b", 0),
            ("007", 7),
            ("1k", 1000),
            ("1K", 1000),
            ("1kb", 1024),
            ("1KB", 1024),
            ("1m", 1_000_000),
            ("100mb", 100 << 20),
            ("1g", 1_000_000_000),
            ("1gb", 1 << 30),
            ("99999999999999999999", u64::MAX),
            ("99999999999999999999kb", 18446744073709550592),
        ] {
            assert_eq!(memtoull(text), Some(bytes), "{text}");
        }
        for bad in ["-1", "1t", " 100", "100 ", "+5", "0x10", "1.5mb", "abc"] {
            assert_eq!(memtoull(bad), None, "{bad}");
        }
        for (text, n) in [("0", Some(0)), ("-5", Some(-5)), ("10", Some(10))] {
            assert_eq!(string2ll(text), n);
        }
        for bad in ["007", "+5", "-0", " 5", "5.0", "", "99999999999999999999"] {
            assert_eq!(string2ll(bad), None, "{bad}");
        }
    }

    #[test]
    fn config_set_checks_everything_before_changing_anything() {
        let c = Config::default();
        let e = |args: &[&str]| set(&c, args).err().unwrap();
        assert_eq!(
            e(&["foo", "bar"]),
            "ERR Unknown option or number of arguments for CONFIG SET - 'foo'"
        );
        assert_eq!(
            e(&["maxmemory", "1", "foo", "1"]),
            "ERR Unknown option or number of arguments for CONFIG SET - 'foo'"
        );
        assert_eq!(e(&["maxmemory", "abc"]), "ERR CONFIG SET failed (possibly related to argument 'maxmemory') - argument must be a memory value");
        assert_eq!(e(&["MAXMEMORY", "abc"]), "ERR CONFIG SET failed (possibly related to argument 'maxmemory') - argument must be a memory value");
        assert_eq!(e(&["maxmemory", "10", "MAXMEMORY", "20"]), "ERR CONFIG SET failed (possibly related to argument 'MAXMEMORY') - duplicate parameter");
        assert_eq!(e(&["BIND", "0.0.0.0"]), "ERR CONFIG SET failed (possibly related to argument 'BIND') - can't set immutable config");
        // Redis's immutable settings that Tollgate has no parameter for, and the first
        // refusal in argument order wins (redis-server 7.0.15's texts).
        let immutable = "ERR CONFIG SET failed (possibly related to argument 'Daemonize') - can't set immutable config";
        assert_eq!(e(&["Daemonize", "yes"]), immutable);
        assert_eq!(e(&["Daemonize", "yes", "foo", "1"]), immutable);
        assert_eq!(
            e(&["maxmemory", "1", "Daemonize", "yes", "foo", "1"]),
            immutable
        );
        assert_eq!(e(&["Daemonize", "yes", "maxmemory", "abc"]), immutable);
        assert_eq!(
            e(&["foo", "1", "daemonize", "yes"]),
            "ERR Unknown option or number of arguments for CONFIG SET - 'foo'"
        );
        assert_eq!(e(&["databases", "5", "foo", "1"]), "ERR CONFIG SET failed (possibly related to argument 'databases') - can't set immutable config");
        assert_eq!(e(&["maxmemory", "10", "maxmemory", "20", "foo", "1"]), "ERR CONFIG SET failed (possibly related to argument 'maxmemory') - duplicate parameter");
        assert_eq!(e(&["hz", "abc"]), "ERR CONFIG SET failed (possibly related to argument 'hz') - argument couldn't be parsed into an integer");
        assert_eq!(e(&["maxmemory-samples", "0"]), "ERR CONFIG SET failed (possibly related to argument 'maxmemory-samples') - argument must be between 1 and 2147483647 inclusive");
        assert_eq!(e(&["set-max-intset-entries", "-1"]), "ERR CONFIG SET failed (possibly related to argument 'set-max-intset-entries') - argument must be between 0 and 9223372036854775807 inclusive");
        assert_eq!(e(&["maxmemory-policy", "lru"]), "ERR CONFIG SET failed (possibly related to argument 'maxmemory-policy') - argument(s) must be one of the following: volatile-lru, volatile-lfu, volatile-random, volatile-ttl, allkeys-lru, allkeys-lfu, allkeys-random, noeviction");
        assert_eq!(e(&["activerehashing", "true"]), "ERR CONFIG SET failed (possibly related to argument 'activerehashing') - argument must be 'yes' or 'no'");
        assert_eq!(e(&["hash-max-ziplist-entries", "x"]), "ERR CONFIG SET failed (possibly related to argument 'hash-max-ziplist-entries') - argument couldn't be parsed into an integer");
        assert_eq!(
            e(&["save", "100"]),
            "ERR CONFIG SET failed (possibly related to argument 'save') - Invalid save parameters"
        );
        assert_eq!(e(&["maxmemory-clients", "101%"]), "ERR CONFIG SET failed (possibly related to argument 'maxmemory-clients') - percentage argument must be less or equal to 100");
        assert_eq!(e(&["proto-max-bulk-len", "100"]), "ERR CONFIG SET failed (possibly related to argument 'proto-max-bulk-len') - argument must be between 1048576 and 9223372036854775807 inclusive");
        // A bad value anywhere leaves every value as it was.
        assert!(set(&c, &["hz", "5", "maxmemory", "abc"]).is_err());
        assert_eq!(get(&c, "hz"), [("hz".to_string(), "10".to_string())]);
    }

    #[test]
    fn values_are_stored_canonically_and_aliases_share_one_value() {
        let c = set(
            &Config::default(),
            &[
                "maxmemory",
                "100MB",
                "MAXMEMORY-POLICY",
                "AllKeys-LRU",
                "hash-max-ziplist-entries",
                "20",
                "hash-max-listpack-entries",
                "21",
                "hz",
                "0",
                "activerehashing",
                "NO",
            ],
        )
        .unwrap();
        assert_eq!(c.memory.maxmemory, 100 << 20);
        assert_eq!(c.memory.policy, Policy::AllKeysLru);
        let all = get(&c, "*");
        let value = |n: &str| all.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
        assert_eq!(value("hash-max-listpack-entries").as_deref(), Some("21"));
        assert_eq!(value("hash-max-ziplist-entries").as_deref(), Some("21"));
        assert_eq!(value("hz").as_deref(), Some("1"));
        assert_eq!(value("activerehashing").as_deref(), Some("no"));
        assert_eq!(value("maxmemory").as_deref(), Some("104857600"));
    }

    #[test]
    fn config_get_takes_several_patterns_and_names_each_once() {
        let c = Config::default();
        let names: Vec<String> =
            config_get(&c, &[b"maxmemory", b"maxmemory*", b"MAXMEMORY-policy"])
                .into_iter()
                .map(|(n, _)| n)
                .collect();
        assert_eq!(
            names,
            [
                "maxmemory",
                "maxmemory-policy",
                "maxmemory-samples",
                "maxmemory-clients",
                "maxmemory-eviction-tenacity"
            ]
        );
        assert_eq!(
            get(&c, "MAXMEMORY"),
            [("MAXMEMORY".to_string(), "0".to_string())]
        );
        assert!(get(&c, "nomatch").is_empty());
        assert_eq!(get(&c, "*ziplist-entries").len(), 2);
    }

    #[test]
    fn guarantees_are_kept_or_refused() {
        let c = Config::default();
        let e = |args: &[&str]| set(&c, args).err().unwrap();
        assert!(e(&["appendonly", "yes"]).contains("keeps its data in memory only"));
        assert!(e(&["appendonly", "yes"]).contains("--data-dir"));
        assert!(set(&c, &["appendonly", "no"]).is_ok());
        assert!(e(&["appendfsync", "always"]).contains("no file to fsync"));
        assert!(e(&["save", "3600 1"]).contains("nothing to snapshot"));
        assert!(set(&c, &["save", ""]).is_ok());
        // Standalone there are no replicas to count: writes are refused (NOREPLICAS).
        assert!(set(&c, &["min-replicas-to-write", "1"]).is_ok());
        assert!(set(&c, &["notify-keyspace-events", "KEA"]).is_ok());
        assert!(e(&["notify-keyspace-events", "KEm"]).contains("key-miss"));
        assert!(set(&c, &["client-output-buffer-limit", "pubsub 1mb 512kb 10"]).is_ok());
        assert!(e(&["client-output-buffer-limit", "normal 1 2 3"]).contains("pubsub clients only"));
        assert_eq!(
            e(&["client-output-buffer-limit", "pubsub 1 2"]),
            "ERR CONFIG SET failed (possibly related to argument 'client-output-buffer-limit') - Wrong number of arguments in buffer limit configuration."
        );
        assert_eq!(
            e(&["client-output-buffer-limit", "foo 1 2 3"]),
            "ERR CONFIG SET failed (possibly related to argument 'client-output-buffer-limit') - Invalid client class specified in buffer limit configuration."
        );
        assert_eq!(e(&["notify-keyspace-events", "Q"]), "ERR CONFIG SET failed (possibly related to argument 'notify-keyspace-events') - Invalid event class character. Use 'Ag$lshzxeKEtmdn'.");
        assert!(e(&["activedefrag", "yes"]).contains("Active defragmentation cannot be enabled"));
        assert!(e(&["maxmemory-clients", "10%"]).contains("client eviction"));
    }
}
