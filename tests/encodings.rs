//! OBJECT ENCODING against a live redis-server 7.0.15: random command sequences on one key
//! of each collection type (with the thresholds changed by CONFIG SET between steps) run on
//! both servers, and after every step the two agree on the reply, on OBJECT ENCODING, and
//! on the contents (in Redis's order where Redis's is deterministic: an intset ascending, a
//! listpack hash in insertion order, a sorted set by score, a list; a hash table's order is
//! Redis's hash order, so those are compared sorted), and a compact value DUMPs to the same
//! bytes.

mod common;
mod redis_support;

use common::TestServer;
use proptest::prelude::*;
use redis::Connection;
use redis_support::RedisServer;

fn strings(c: &mut Connection, cmd: &[&str]) -> Vec<String> {
    let mut q = redis::cmd(cmd[0]);
    for a in &cmd[1..] {
        q.arg(*a);
    }
    q.query(c).unwrap()
}

fn encoding(c: &mut Connection) -> Option<String> {
    redis::cmd("OBJECT")
        .arg("ENCODING")
        .arg("k")
        .query(c)
        .unwrap()
}

/// The key's contents, in the order a client sees when the encoding makes it deterministic.
fn contents(c: &mut Connection, enc: Option<&str>) -> Vec<String> {
    let t: String = redis::cmd("TYPE").arg("k").query(c).unwrap();
    let (mut items, ordered) = match t.as_str() {
        "set" => (strings(c, &["SMEMBERS", "k"]), enc == Some("intset")),
        "hash" => (strings(c, &["HGETALL", "k"]), enc == Some("listpack")),
        "zset" => (strings(c, &["ZRANGE", "k", "0", "-1", "WITHSCORES"]), true),
        "list" => (strings(c, &["LRANGE", "k", "0", "-1"]), true),
        _ => (Vec::new(), true),
    };
    if !ordered {
        if t == "hash" {
            let mut pairs: Vec<String> = items.chunks(2).map(|p| p.join("=")).collect();
            pairs.sort();
            items = pairs;
        } else {
            items.sort();
        }
    }
    items
}

fn cmd(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}

fn set_member() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => (-10i64..10).prop_map(|v| v.to_string()),
        1 => prop_oneof![Just(70_000i64), Just(-3_000_000_000), Just(i64::MIN)].prop_map(|v| v.to_string()),
        1 => prop_oneof![Just("x"), Just("-0"), Just("01"), Just("+1"), Just("9223372036854775808")].prop_map(String::from),
    ]
}

fn short(max: usize) -> impl Strategy<Value = String> {
    (0..max).prop_map(|n| "v".repeat(n))
}

/// A sorted-set member: short ones, and now and then one past the 64-byte value limit.
fn zmember() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => short(6).prop_map(|m| format!("m{m}")),
        1 => (60usize..70).prop_map(|n| format!("m{}", "l".repeat(n))),
    ]
}

/// A score: small integers, and the values whose encoding shows (`-0`) or sorts apart.
fn zscore() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => (-3i64..3).prop_map(|v| v.to_string()),
        1 => prop_oneof![Just("-0"), Just("1.5"), Just("inf"), Just("-inf"), Just("0.1")].prop_map(String::from),
    ]
}

/// ZADD's options (valid or not: the errors are compared too).
fn zadd_flags() -> impl Strategy<Value = Vec<String>> {
    proptest::sample::subsequence(vec!["NX", "XX", "GT", "LT", "CH", "INCR"], 0..3)
        .prop_map(|f| f.into_iter().map(String::from).collect())
}

fn limit() -> impl Strategy<Value = String> {
    prop_oneof![3 => (0u32..6).prop_map(|n| n.to_string()), 1 => Just("512".to_string())]
}

/// One step on key `k` of a set, hash, sorted set or list (each case sticks to one type:
/// the others answer WRONGTYPE on both servers, which is compared too).
fn step(kind: u8) -> BoxedStrategy<Vec<String>> {
    match kind {
        0 => prop_oneof![
            4 => proptest::collection::vec(set_member(), 1..4).prop_map(|m| [cmd(&["SADD", "k"]), m].concat()),
            2 => proptest::collection::vec(set_member(), 1..3).prop_map(|m| [cmd(&["SREM", "k"]), m].concat()),
            1 => limit().prop_map(|n| cmd(&["CONFIG", "SET", "set-max-intset-entries", &n])),
            1 => Just(cmd(&["SUNIONSTORE", "k", "k"])),
            1 => Just(cmd(&["SINTERSTORE", "k", "k", "k"])),
            1 => Just(cmd(&["SPOP", "k", "100"])),
        ]
        .boxed(),
        1 => prop_oneof![
            4 => ((0u8..8), short(6)).prop_map(|(f, v)| cmd(&["HSET", "k", &format!("f{f}"), &v])),
            1 => (0u8..8).prop_map(|f| cmd(&["HDEL", "k", &format!("f{f}")])),
            1 => ((0u8..8), -5i64..5).prop_map(|(f, n)| cmd(&["HINCRBY", "k", &format!("n{f}"), &n.to_string()])),
            1 => limit().prop_map(|n| cmd(&["CONFIG", "SET", "hash-max-listpack-entries", &n])),
            1 => limit().prop_map(|n| cmd(&["CONFIG", "SET", "hash-max-listpack-value", &n])),
        ]
        .boxed(),
        2 => prop_oneof![
            4 => (zscore(), zmember()).prop_map(|(s, m)| cmd(&["ZADD", "k", &s, &m])),
            2 => (zadd_flags(), proptest::collection::vec((zscore(), zmember()), 1..4)).prop_map(|(f, pairs)| {
                let pairs = pairs.into_iter().flat_map(|(s, m)| [s, m]);
                [cmd(&["ZADD", "k"]), f, pairs.collect()].concat()
            }),
            1 => zmember().prop_map(|m| cmd(&["ZREM", "k", &m])),
            1 => zmember().prop_map(|m| cmd(&["ZINCRBY", "k", "1.5", &m])),
            1 => Just(cmd(&["ZREMRANGEBYSCORE", "k", "-inf", "0"])),
            1 => (-4i64..4, -4i64..4).prop_map(|(a, b)| cmd(&["ZREMRANGEBYRANK", "k", &a.to_string(), &b.to_string()])),
            1 => Just(cmd(&["ZREMRANGEBYLEX", "k", "[mv", "(mvvv"])),
            1 => (0u8..3).prop_map(|n| cmd(&["ZPOPMIN", "k", &n.to_string()])),
            1 => Just(cmd(&["ZPOPMAX", "k"])),
            1 => Just(cmd(&["ZUNIONSTORE", "k", "1", "k"])),
            1 => Just(cmd(&["ZINTERSTORE", "k", "2", "k", "k", "WEIGHTS", "1", "2"])),
            1 => Just(cmd(&["ZDIFFSTORE", "k", "1", "k"])),
            1 => (-4i64..4).prop_map(|a| cmd(&["ZRANGESTORE", "k", "k", &a.to_string(), "-1"])),
            1 => Just(cmd(&["ZRANGESTORE", "k", "k", "(0", "+inf", "BYSCORE", "LIMIT", "0", "3"])),
            // Reads: every range shape, forward and reversed, and the member lookups.
            2 => (-4i64..4, -4i64..4, any::<bool>()).prop_map(|(a, b, rev)| {
                let mut c = cmd(&["ZRANGE", "k", &a.to_string(), &b.to_string(), "WITHSCORES"]);
                if rev { c.push("REV".into()) }
                c
            }),
            1 => (0u8..3, -1i64..3).prop_map(|(o, n)| cmd(&["ZREVRANGEBYSCORE", "k", "+inf", "(-1", "WITHSCORES", "LIMIT", &o.to_string(), &n.to_string()])),
            1 => (0u8..3).prop_map(|o| cmd(&["ZRANGEBYSCORE", "k", "-inf", "1.5", "LIMIT", &o.to_string(), "2"])),
            1 => Just(cmd(&["ZRANGEBYLEX", "k", "[m", "(mvvv"])),
            1 => Just(cmd(&["ZREVRANGEBYLEX", "k", "+", "[mv", "LIMIT", "1", "2"])),
            1 => Just(cmd(&["ZLEXCOUNT", "k", "(m", "+"])),
            1 => Just(cmd(&["ZCOUNT", "k", "(-0", "inf"])),
            1 => zmember().prop_map(|m| cmd(&["ZRANK", "k", &m])),
            1 => zmember().prop_map(|m| cmd(&["ZREVRANK", "k", &m])),
            1 => (zmember(), zmember()).prop_map(|(a, b)| cmd(&["ZMSCORE", "k", &a, &b])),
            1 => Just(cmd(&["ZCARD", "k"])),
            1 => limit().prop_map(|n| cmd(&["CONFIG", "SET", "zset-max-listpack-entries", &n])),
            1 => limit().prop_map(|n| cmd(&["CONFIG", "SET", "zset-max-listpack-value", &n])),
        ]
        .boxed(),
        _ => prop_oneof![
            3 => short(10).prop_map(|v| cmd(&["RPUSH", "k", &v])),
            2 => short(10).prop_map(|v| cmd(&["LPUSH", "k", &v])),
            1 => Just(cmd(&["LPOP", "k"])),
            1 => Just(cmd(&["RPOP", "k", "2"])),
            1 => (-3i64..3).prop_map(|i| cmd(&["LSET", "k", &i.to_string(), "z"])),
        ]
        .boxed(),
    }
}

fn case() -> impl Strategy<Value = Vec<Vec<String>>> {
    (0u8..4).prop_flat_map(|kind| proptest::collection::vec(step(kind), 1..40))
}

const DEFAULTS: [(&str, &str); 5] = [
    ("set-max-intset-entries", "512"),
    ("hash-max-listpack-entries", "512"),
    ("hash-max-listpack-value", "64"),
    ("zset-max-listpack-entries", "128"),
    ("zset-max-listpack-value", "64"),
];

#[test]
fn object_encoding_follows_redis_step_by_step() {
    let redis = RedisServer::start();
    let tollgate = TestServer::start();
    let conns = std::cell::RefCell::new((redis.conn(), tollgate.conn()));
    let config = ProptestConfig {
        cases: 48,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    proptest::test_runner::TestRunner::new(config)
        .run(&case(), |steps| {
            let (r, t) = &mut *conns.borrow_mut();
            for c in [&mut *r, &mut *t] {
                redis::cmd("FLUSHALL").query::<()>(c).unwrap();
                for (name, value) in DEFAULTS {
                    redis::cmd("CONFIG")
                        .arg("SET")
                        .arg(name)
                        .arg(value)
                        .query::<()>(c)
                        .unwrap();
                }
            }
            for s in &steps {
                // A lex range over members of different scores is unspecified in Redis
                // (ZRANGEBYLEX's docs), and on a skiplist its answer depends on the random
                // levels of the nodes: the same steps answered 2 and 4 in two runs of one
                // redis-server. Such a step is skipped on both servers.
                if s[0].contains("LEX") && encoding(r).as_deref() == Some("skiplist") {
                    let all = strings(r, &["ZRANGE", "k", "0", "-1", "WITHSCORES"]);
                    let scores: std::collections::HashSet<&String> =
                        all.iter().skip(1).step_by(2).collect();
                    if scores.len() > 1 {
                        continue;
                    }
                }
                // SPOP of a whole set answers in Redis's hash order when Redis builds the
                // reply as a hash-table set: always for a hash-table set, and for an intset
                // too once set-max-intset-entries is below its size (the reply set
                // converts; seen with the limit at 0). Compared as sets then.
                if s[0] == "SPOP" {
                    let args: Vec<&str> = s.iter().map(String::as_str).collect();
                    let mut mine = strings(r, &args);
                    let mut theirs = strings(t, &args);
                    mine.sort();
                    theirs.sort();
                    prop_assert_eq!(mine, theirs, "{:?}", s);
                } else {
                    prop_assert_eq!(
                        common::reply_text(r, s),
                        common::reply_text(t, s),
                        "{:?}",
                        s
                    );
                }
                let enc = encoding(r);
                prop_assert_eq!(&enc, &encoding(t), "OBJECT ENCODING after {:?}", s);
                if matches!(enc.as_deref(), Some("intset" | "listpack")) {
                    // Compact encodings serialize deterministically: the same DUMP bytes
                    // (an intset keeps the width of members since removed).
                    let dump = |c: &mut Connection| -> Vec<u8> {
                        redis::cmd("DUMP").arg("k").query(c).unwrap()
                    };
                    prop_assert_eq!(dump(r), dump(t), "DUMP after {:?}", s);
                }
                prop_assert_eq!(
                    contents(r, enc.as_deref()),
                    contents(t, enc.as_deref()),
                    "contents after {:?}",
                    s
                );
            }
            Ok(())
        })
        .unwrap();
}
