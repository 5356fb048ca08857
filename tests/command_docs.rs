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
