//! COMMAND INFO's tips and key specifications and COMMAND DOCS, for every command Tollgate
//! shares with Redis, compared with a real redis-server (both protocols); Tollgate's own
//! commands have documentation of their own.
mod common;
mod redis_support;

use common::{q, TestServer};
use redis::Value;
use redis_support::RedisServer;

/// `v` with subcommands in name order: Redis lists them in its hash table's order, which
/// changes from one redis-server process to the next (Tollgate sorts them). Only the
/// subcommands `keep` says Tollgate implements are kept (Tollgate lists no others).
fn normalize(v: Value, keep: &dyn Fn(&Value) -> bool) -> Value {
    let key = |v: &Value| format!("{v:?}");
    match v {
        Value::Map(entries) => {
            let mut entries: Vec<(Value, Value)> = entries
                .into_iter()
                .map(|(k, v)| (k, normalize(v, keep)))
                .collect();
            if entries.iter().any(|(k, _)| key(k).contains("|")) {
                entries.retain(|(k, _)| keep(k));
                entries.sort_by_key(|(k, _)| key(k));
            }
            Value::Map(entries)
        }
        Value::Array(items) => {
            let mut items: Vec<Value> = items.into_iter().map(|v| normalize(v, keep)).collect();
            // RESP2: a map is a flat array; sort the pairs after "subcommands".
            if let Some(i) = items
                .iter()
                .position(|v| *v == Value::BulkString(b"subcommands".to_vec()))
            {
                if let Some(Value::Array(subs)) = items.get_mut(i + 1) {
                    let mut pairs: Vec<Vec<Value>> = subs
                        .chunks(2)
                        .map(<[Value]>::to_vec)
                        .filter(|p| keep(&p[0]))
                        .collect();
                    pairs.sort_by_key(|p| key(&p[0]));
                    *subs = pairs.concat();
                }
            }
            Value::Array(items)
        }
        other => other,
    }
}

/// A COMMAND INFO entry with the flags Tollgate does not model left out and the flags
/// and subcommands (field 10, recursively) in name order, only those `keep` says Tollgate
/// implements.
fn normalize_info(entry: &Value, keep: &dyn Fn(&Value) -> bool) -> Vec<Value> {
    let Value::Array(fields) = entry else {
        panic!("COMMAND INFO entry {entry:?}");
    };
    let mut fields = fields.clone();
    // Arity, flags and key range of a listed difference are compared (with its reason) by
    // `command_info_arity_flags_and_key_range_match_redis`.
    let name: String = redis::from_redis_value(&fields[0]).unwrap();
    if KNOWN_DIFFERENCES.iter().any(|(n, _)| *n == name) {
        fields[1..6].fill(Value::Nil);
    }
    if let Value::Array(v) | Value::Set(v) = &mut fields[2] {
        v.retain(|f| {
            let f: String = redis::from_redis_value(f).unwrap();
            !UNMODELLED_FLAGS.contains(&f.as_str())
        });
        v.sort_by_key(|f| format!("{f:?}"));
    }
    if let Value::Array(subs) = &fields[9] {
        let mut subs: Vec<Vec<Value>> = subs
            .iter()
            .filter(|s| matches!(s, Value::Array(f) if keep(&f[0])))
            .map(|s| normalize_info(s, keep))
            .collect();
        subs.sort_by_key(|s| format!("{:?}", s[0]));
        fields[9] = Value::Array(subs.into_iter().map(Value::Array).collect());
    }
    fields
}

fn names(c: &mut redis::Connection) -> Vec<String> {
    q(c, &["COMMAND", "LIST"])
}

#[test]
fn command_info_and_docs_match_redis_for_shared_commands() {
    let redis = RedisServer::start();
    let tollgate = TestServer::start();
    for resp3 in [false, true] {
        let (mut r, mut t) = if resp3 {
            let mut r = redis.conn();
            let _: Value = q(&mut r, &["HELLO", "3"]);
            (r, tollgate.conn3())
        } else {
            (redis.conn(), tollgate.conn())
        };
        let on_redis = names(&mut r);
        let on_tollgate = names(&mut t);
        let shared: Vec<String> = on_tollgate
            .iter()
            .filter(|n| on_redis.contains(n))
            .cloned()
            .collect();
        assert!(shared.len() > 100, "{}", shared.len());
        assert!(shared.iter().any(|n| n == "config|get"), "{shared:?}");
        // Subcommands Redis has and Tollgate does not implement are not listed.
        let keep = |v: &Value| {
            let name: String = redis::from_redis_value(v).unwrap();
            on_tollgate.contains(&name)
        };
        for name in &shared {
            let docs =
                |c: &mut redis::Connection| normalize(q(c, &["COMMAND", "DOCS", name]), &keep);
            assert_eq!(docs(&mut t), docs(&mut r), "COMMAND DOCS {name}");
            let info = |c: &mut redis::Connection| -> Vec<Value> {
                let Value::Array(all) = q::<Value>(c, &["COMMAND", "INFO", name]) else {
                    panic!("COMMAND INFO {name}");
                };
                let fields = normalize_info(&all[0], &keep);
                // Tips, key specifications and the subcommands' entries (arity, flags and
                // key range are compared below, with the known differences).
                fields[7..10].to_vec()
            };
            assert_eq!(info(&mut t), info(&mut r), "COMMAND INFO {name}");
        }
    }
}

/// COMMAND COUNT and COMMAND (all entries) count the commands without their subcommands;
/// COMMAND LIST lists both, as redis-server 7.0.15 does.
#[test]
fn command_count_and_list_treat_subcommands_as_redis_does() {
    let redis = RedisServer::start();
    let tollgate = TestServer::start();
    for mut c in [redis.conn(), tollgate.conn()] {
        let list = names(&mut c);
        let top = list.iter().filter(|n| !n.contains('|')).count();
        assert!(
            list.len() > top + 40,
            "{} names, {top} commands",
            list.len()
        );
        let count: usize = q(&mut c, &["COMMAND", "COUNT"]);
        assert_eq!(count, top);
        let all: Vec<Value> = q(&mut c, &["COMMAND"]);
        assert_eq!(all.len(), top);
        // Every listed subcommand follows from its container's field 10 and answers
        // COMMAND INFO on its own (any case), with no subcommands of its own.
        let info: Vec<Value> = q(&mut c, &["COMMAND", "INFO", "config"]);
        let Value::Array(config) = &info[0] else {
            panic!("{info:?}");
        };
        let Value::Array(subs) = &config[9] else {
            panic!("{config:?}");
        };
        for sub in subs {
            let Value::Array(sub) = sub else {
                panic!("{sub:?}");
            };
            let name: String = redis::from_redis_value(&sub[0]).unwrap();
            assert!(list.contains(&name), "{name}");
            let own: Vec<Value> = q(&mut c, &["COMMAND", "INFO", &name.to_uppercase()]);
            assert_eq!(own[0], Value::Array(sub.clone()), "{name}");
            assert!(
                matches!(&sub[9], Value::Array(v) | Value::Set(v) if v.is_empty()),
                "{name}"
            );
        }
        assert!(!subs.is_empty());
        let nil: Vec<Value> = q(&mut c, &["COMMAND", "INFO", "config|nope", "nope|get"]);
        assert_eq!(nil, [Value::Nil, Value::Nil]);
    }
}

/// Subcommands Tollgate implements are listed; Redis's others are not, and their
/// containers answer that they do not know them (CONFIG REWRITE answers that the
/// configuration is a TOML file to edit).
#[test]
fn listed_subcommands_are_the_implemented_ones() {
    let tollgate = TestServer::start();
    let mut t = tollgate.conn();
    let list = names(&mut t);
    for name in [
        "config|get",
        "memory|usage",
        "object|encoding",
        "script|load",
        "acl|whoami",
    ] {
        assert!(list.iter().any(|n| n == name), "{name} not listed");
    }
    assert!(!list.iter().any(|n| n == "config|rewrite"));
    // Not implemented: not listed, and the container answers that it does not know them.
    for (name, call) in [
        ("memory|doctor", &["MEMORY", "DOCTOR"][..]),
        ("client|pause", &["CLIENT", "PAUSE", "10"][..]),
        (
            "command|getkeysandflags",
            &["COMMAND", "GETKEYSANDFLAGS", "GET", "k"][..],
        ),
    ] {
        assert!(!list.iter().any(|n| n == name), "{name} listed");
        let info: Vec<Value> = q(&mut t, &["COMMAND", "INFO", name]);
        assert_eq!(info, [Value::Nil], "{name}");
        let reply = redis::cmd(call[0]).arg(&call[1..]).query::<Value>(&mut t);
        let err = reply.expect_err(name).to_string();
        assert!(err.contains("unknown subcommand"), "{name}: {err}");
    }
}

#[test]
fn tollgate_commands_have_their_own_docs() {
    let s = TestServer::start();
    let mut c = s.conn3();
    let docs: Value = q(&mut c, &["COMMAND", "DOCS", "cl.throttle", "limit.token"]);
    let text = format!("{docs:?}");
    assert!(text.contains("redis-cell"), "{text}");
    assert!(text.contains("Token-bucket limiter"), "{text}");
    assert!(text.contains("module"), "{text}");
}

/// COMMAND INFO's flags of rows whose internal routing differs from Redis's flags (PFCOUNT
/// goes through the Raft log in a cluster) or that are new (SWAPDB) are Redis's.
#[test]
fn command_info_flags_are_redis_flags() {
    let redis = RedisServer::start();
    let tollgate = TestServer::start();
    let flags = |c: &mut redis::Connection, name: &str| -> Vec<String> {
        let Value::Array(mut all) = q::<Value>(c, &["COMMAND", "INFO", name]) else {
            panic!("COMMAND INFO {name}");
        };
        let Value::Array(fields) = all.remove(0) else {
            panic!("COMMAND INFO {name}");
        };
        let mut names: Vec<String> = match &fields[2] {
            Value::Array(v) | Value::Set(v) => v
                .iter()
                .map(|f| redis::from_redis_value(f).unwrap())
                .collect(),
            other => panic!("flags of {name}: {other:?}"),
        };
        names.sort();
        names
    };
    let (mut r, mut t) = (redis.conn(), tollgate.conn());
    for name in ["pfcount", "swapdb", "flushdb", "pfadd"] {
        assert_eq!(flags(&mut t, name), flags(&mut r, name), "{name}");
    }
    assert_eq!(flags(&mut t, "pfcount"), ["readonly"]);
}

/// Flags Redis reports that describe states Tollgate does not have or handle by flag:
/// `loading` / `no_async_loading` (a node that is loading refuses every command with
/// `-LOADING`), `stale` (replicas of a Redis master), `allow_busy` and `skip_slowlog`
/// (Tollgate decides both by command, not by flag).
const UNMODELLED_FLAGS: &[&str] = &[
    "loading",
    "stale",
    "allow_busy",
    "skip_slowlog",
    "no_async_loading",
];

/// Commands whose COMMAND INFO arity, flags or key range differ from redis-server 7.0.15,
/// and why. Every other shared command must match.
const KNOWN_DIFFERENCES: &[(&str, &str)] = &[
    // OBJECT's row keeps `readonly` and its key at 2 (Redis's container has neither; its
    // subcommands have both, and match): the row routes every OBJECT call as a read of
    // that key (the cluster's read path, slot routing, WATCH-free reads).
    ("object", "container flags: readonly, key at 2"),
    // A script cannot call SCRIPT or FUNCTION at all: the scripting engine is running it
    // (Redis lets scripts call their HELP).
    ("script|help", "noscript"),
    ("function|help", "noscript"),
    // Scripts: Redis decides write/denyoom/readonly per script from its flags; Tollgate's
    // EVAL goes through the log as a write, EVAL_RO runs as a read.
    ("eval", "script flags"),
    ("evalsha", "script flags"),
    ("fcall", "script flags"),
    ("eval_ro", "script flags"),
    ("evalsha_ro", "script flags"),
    ("fcall_ro", "script flags"),
    // PUBLISH is replicated through the Raft log in a cluster.
    ("publish", "may_replicate"),
    ("spublish", "may_replicate"),
    // ZRANK/ZREVRANK accept Redis 7.2's WITHSCORE.
    ("zrank", "arity -3"),
    ("zrevrank", "arity -3"),
    // SORT_RO's BY/GET patterns name keys Redis marks movable.
    ("sort_ro", "movablekeys"),
    // Tollgate marks WATCH no_multi (Redis refuses it in MULTI by code).
    ("watch", "no_multi"),
];

#[test]
fn command_info_arity_flags_and_key_range_match_redis() {
    let redis = RedisServer::start();
    let tollgate = TestServer::start();
    let (mut r, mut t) = (redis.conn(), tollgate.conn());
    let head = |c: &mut redis::Connection, name: &str| -> Option<String> {
        let Value::Array(mut all) = q::<Value>(c, &["COMMAND", "INFO", name]) else {
            panic!("COMMAND INFO {name}");
        };
        let Value::Array(fields) = all.remove(0) else {
            return None;
        };
        let mut flags: Vec<String> = match &fields[2] {
            Value::Array(v) | Value::Set(v) => v
                .iter()
                .map(|f| redis::from_redis_value(f).unwrap())
                .filter(|f: &String| !UNMODELLED_FLAGS.contains(&f.as_str()))
                .collect(),
            other => panic!("flags of {name}: {other:?}"),
        };
        flags.sort();
        Some(format!(
            "{:?} {flags:?} {:?} {:?} {:?}",
            fields[1], fields[3], fields[4], fields[5]
        ))
    };
    let redis_names = names(&mut r);
    let shared: Vec<String> = names(&mut t)
        .into_iter()
        .filter(|n| redis_names.contains(n))
        .collect();
    assert!(shared.len() > 200, "{} shared commands", shared.len());
    let mut differ = Vec::new();
    for name in &shared {
        let (a, b) = (head(&mut r, name), head(&mut t, name));
        let listed = KNOWN_DIFFERENCES.iter().any(|(n, _)| n == name);
        if a != b && !listed {
            differ.push(format!("{name}: redis {a:?}, tollgate {b:?}"));
        }
        if a == b && listed {
            differ.push(format!("{name}: listed as different but matches: {a:?}"));
        }
    }
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}
