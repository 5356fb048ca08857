//! COMMAND INFO's tips and key specifications and COMMAND DOCS, for every command Tollgate
//! shares with Redis, compared with a real redis-server (both protocols); Tollgate's own
//! commands have documentation of their own.
mod common;
mod redis_support;

use common::{q, TestServer};
use redis::Value;
use redis_support::RedisServer;

/// `v` with subcommands in name order: Redis lists them in its hash table's order, which
/// changes from one redis-server process to the next (Tollgate sorts them).
fn normalize(v: Value) -> Value {
    let key = |v: &Value| format!("{v:?}");
    match v {
        Value::Map(entries) => {
            let mut entries: Vec<(Value, Value)> = entries
                .into_iter()
                .map(|(k, v)| (k, normalize(v)))
                .collect();
            if entries.iter().any(|(k, _)| key(k).contains("|")) {
                entries.sort_by_key(|(k, _)| key(k));
            }
            Value::Map(entries)
        }
        Value::Array(items) => {
            let mut items: Vec<Value> = items.into_iter().map(normalize).collect();
            // RESP2: a map is a flat array; sort the pairs after "subcommands".
            if let Some(i) = items
                .iter()
                .position(|v| *v == Value::BulkString(b"subcommands".to_vec()))
            {
                if let Some(Value::Array(subs)) = items.get_mut(i + 1) {
                    let mut pairs: Vec<Vec<Value>> =
                        subs.chunks(2).map(<[Value]>::to_vec).collect();
                    pairs.sort_by_key(|p| key(&p[0]));
                    *subs = pairs.concat();
                }
            }
            Value::Array(items)
        }
        other => other,
    }
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
        let shared: Vec<String> = names(&mut t)
            .into_iter()
            .filter(|n| on_redis.contains(n))
            .collect();
        assert!(shared.len() > 100, "{}", shared.len());
        for name in &shared {
            let docs = |c: &mut redis::Connection| normalize(q(c, &["COMMAND", "DOCS", name]));
            assert_eq!(docs(&mut t), docs(&mut r), "COMMAND DOCS {name}");
            let info = |c: &mut redis::Connection| -> Vec<Value> {
                let Value::Array(mut all) = q::<Value>(c, &["COMMAND", "INFO", name]) else {
                    panic!("COMMAND INFO {name}");
                };
                let Value::Array(fields) = all.remove(0) else {
                    panic!("COMMAND INFO {name}");
                };
                // Tips and key specifications (ACL categories come from the ACL work).
                fields[7..9].to_vec()
            };
            assert_eq!(info(&mut t), info(&mut r), "COMMAND INFO {name}");
        }
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
    // Container commands: Redis gives the container no flags; Tollgate describes it by its
    // subcommands' flags. (Field 10, the subcommands Redis lists, is not compared here:
    // Tollgate lists none, and COMMAND INFO `config|get` answers nil.)
    ("acl", "container"),
    ("client", "container"),
    ("cluster", "container"),
    ("config", "container"),
    ("function", "container"),
    ("latency", "container"),
    ("memory", "container"),
    ("object", "container: Tollgate reports OBJECT's key at 2"),
    ("script", "container"),
    ("slowlog", "container"),
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
