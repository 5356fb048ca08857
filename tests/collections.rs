//! Hashes, lists, sets and sorted sets through real clients: RESP2 and RESP3 reply
//! shapes, WATCH semantics of no-op writes, TTLs, and the sliding-log limiter pattern.

mod common;

use common::{err, q, TestServer};
use redis::Value;

fn bulk(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

#[test]
fn resp2_shapes() {
    let s = TestServer::start();
    let mut c = s.conn();
    assert_eq!(q::<i64>(&mut c, &["HSET", "h", "a", "1", "b", "2"]), 2);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["HGETALL", "h"]),
        vec!["a", "1", "b", "2"]
    );
    assert_eq!(q::<i64>(&mut c, &["ZADD", "z", "0.1", "m", "2", "n"]), 2);
    assert_eq!(
        q::<String>(&mut c, &["ZSCORE", "z", "m"]),
        "0.10000000000000001"
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZRANGE", "z", "0", "-1", "WITHSCORES"]),
        vec!["m", "0.10000000000000001", "n", "2"]
    );
    assert_eq!(
        q::<Value>(&mut c, &["LPOP", "nolist", "2"]),
        Value::Nil,
        "a missing list with a count is a null array"
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZPOPMIN", "z"]),
        vec!["m", "0.10000000000000001"]
    );
    assert_eq!(
        err(&mut c, &["ZADD", "z", "NX", "XX", "1", "a"]),
        "ERR XX and NX options at the same time are not compatible"
    );
    assert_eq!(
        err(&mut c, &["LPUSH", "h", "x"]),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
}

#[test]
fn resp3_shapes() {
    let s = TestServer::start();
    let mut c = s.conn3();
    q::<()>(&mut c, &["HSET", "h", "a", "1"]);
    q::<()>(&mut c, &["SADD", "s", "x"]);
    q::<()>(&mut c, &["ZADD", "z", "1.5", "m", "3", "n"]);
    assert_eq!(
        q::<Value>(&mut c, &["HGETALL", "h"]),
        Value::Map(vec![(bulk("a"), bulk("1"))])
    );
    assert_eq!(
        q::<Value>(&mut c, &["SMEMBERS", "s"]),
        Value::Set(vec![bulk("x")])
    );
    assert_eq!(
        q::<Value>(&mut c, &["ZSCORE", "z", "m"]),
        Value::Double(1.5)
    );
    assert_eq!(
        q::<Value>(&mut c, &["ZRANGE", "z", "0", "0", "WITHSCORES"]),
        Value::Array(vec![Value::Array(vec![bulk("m"), Value::Double(1.5)])])
    );
    assert_eq!(
        q::<Value>(&mut c, &["ZPOPMAX", "z"]),
        Value::Array(vec![bulk("n"), Value::Double(3.0)])
    );
    assert_eq!(
        q::<Value>(&mut c, &["SPOP", "nokey", "1"]),
        Value::Set(vec![])
    );
    assert_eq!(q::<Value>(&mut c, &["RPOP", "nolist"]), Value::Nil);
}

/// Redis signals WATCH only for writes that change the key; a no-op must let EXEC run.
#[test]
fn watch_fires_only_on_real_changes() {
    let s = TestServer::start();
    let cases: &[(&[&str], &[&str], bool)] = &[
        (&["SADD", "k", "a"], &["SADD", "k", "a"], false),
        (&["SADD", "k", "a"], &["SADD", "k", "b"], true),
        (&["SADD", "k", "a"], &["SREM", "k", "zz"], false),
        (&["HSET", "k", "f", "v"], &["HDEL", "k", "zz"], false),
        (&["HSET", "k", "f", "v"], &["HSETNX", "k", "f", "x"], false),
        (&["HSET", "k", "f", "v"], &["HSET", "k", "f", "v"], true),
        (&["RPUSH", "k", "a", "b"], &["LTRIM", "k", "0", "-1"], true),
        (&["RPUSH", "k", "a", "b"], &["LREM", "k", "0", "zz"], false),
        (&["ZADD", "k", "1", "a"], &["ZADD", "k", "1", "a"], false),
        (
            &["ZADD", "k", "1", "a"],
            &["ZADD", "k", "GT", "0", "a"],
            false,
        ),
        (&["ZADD", "k", "1", "a"], &["ZINCRBY", "k", "0", "a"], false),
        (&["ZADD", "k", "1", "a"], &["ZINCRBY", "k", "1", "a"], true),
        (
            &["ZADD", "k", "1", "a"],
            &["ZREMRANGEBYSCORE", "k", "5", "10"],
            false,
        ),
        (
            &["ZADD", "k", "1", "a"],
            &["ZREMRANGEBYSCORE", "k", "0", "10"],
            true,
        ),
    ];
    for (setup, other, aborts) in cases {
        let (mut a, mut b) = (s.conn(), s.conn());
        q::<()>(&mut a, &["FLUSHALL"]);
        q::<()>(&mut a, setup);
        q::<()>(&mut a, &["WATCH", "k"]);
        q::<()>(&mut b, other);
        q::<()>(&mut a, &["MULTI"]);
        q::<()>(&mut a, &["SET", "done", "1"]);
        let exec: Value = q(&mut a, &["EXEC"]);
        assert_eq!(
            exec == Value::Nil,
            *aborts,
            "{setup:?} then {other:?}: EXEC gave {exec:?}"
        );
    }
}

#[test]
fn collections_keep_their_ttl_and_expire() {
    let s = TestServer::start();
    let mut c = s.conn();
    q::<()>(&mut c, &["RPUSH", "l", "a", "b"]);
    q::<()>(&mut c, &["PEXPIRE", "l", "10000"]);
    q::<()>(&mut c, &["RPUSH", "l", "c"]);
    q::<()>(&mut c, &["RPOPLPUSH", "l", "l"]);
    assert!(q::<i64>(&mut c, &["PTTL", "l"]) > 9000);
    s.advance(10_001);
    assert_eq!(q::<i64>(&mut c, &["LLEN", "l"]), 0);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "l"]), 0);
}

/// The sliding-log limiter of the seeds: trim the window, count, add, expire.
#[test]
fn sliding_log_limiter_pattern() {
    let s = TestServer::start();
    let mut c = s.conn();
    let limit = 3;
    let mut allowed = 0;
    for i in 0..5 {
        let now = 1_000 + i * 10;
        let window_start = (now - 1_000).to_string();
        let now_s = now.to_string();
        let (_, count): (i64, i64) = redis::pipe()
            .atomic()
            .cmd("ZREMRANGEBYSCORE")
            .arg("log")
            .arg(0)
            .arg(&window_start)
            .cmd("ZCARD")
            .arg("log")
            .query(&mut c)
            .unwrap();
        if count < limit {
            allowed += 1;
            q::<()>(&mut c, &["ZADD", "log", &now_s, &now_s]);
            q::<()>(&mut c, &["EXPIRE", "log", "60"]);
        }
    }
    assert_eq!(allowed, limit);
    let last: Vec<String> = q(
        &mut c,
        &["ZREVRANGEBYSCORE", "log", "+inf", "-inf", "LIMIT", "0", "1"],
    );
    assert_eq!(last, vec!["1020"]);
    assert_eq!(
        q::<i64>(&mut c, &["ZREMRANGEBYSCORE", "log", "0", "1010"]),
        2
    );
    assert_eq!(q::<i64>(&mut c, &["ZCARD", "log"]), 1);
}

/// `hash-max-listpack-*` and `zset-max-listpack-*` decide the encoding, which DUMP shows
/// (type 16: a listpack hash, 4: a table; 17: a listpack sorted set, 5: a skiplist): a
/// collection converts when a write passes a threshold, as in Redis 7.0, never back.
#[test]
fn encoding_thresholds_take_effect() {
    let s = TestServer::start();
    let mut c = s.conn();
    let dump_type = |c: &mut redis::Connection, key: &str| q::<Vec<u8>>(c, &["DUMP", key])[0];
    let ok = |c: &mut redis::Connection, p: &str, v: &str| {
        assert_eq!(q::<String>(c, &["CONFIG", "SET", p, v]), "OK");
    };
    ok(&mut c, "hash-max-listpack-entries", "2");
    ok(&mut c, "hash-max-ziplist-value", "3");
    assert_eq!(
        q::<Vec<String>>(&mut c, &["CONFIG", "GET", "hash-max-listpack-*"]),
        vec![
            "hash-max-listpack-entries",
            "2",
            "hash-max-listpack-value",
            "3"
        ]
    );
    q::<i64>(&mut c, &["HSET", "h", "a", "1", "b", "2"]);
    assert_eq!(dump_type(&mut c, "h"), 16);
    q::<i64>(&mut c, &["HSET", "h", "c", "3"]);
    assert_eq!(dump_type(&mut c, "h"), 4, "a third field converts");
    q::<i64>(&mut c, &["HDEL", "h", "c", "b"]);
    assert_eq!(dump_type(&mut c, "h"), 4, "never back");
    q::<i64>(&mut c, &["HSET", "v", "a", "1"]);
    q::<i64>(&mut c, &["HINCRBY", "v", "a", "1000"]);
    assert_eq!(dump_type(&mut c, "v"), 4, "a 4-byte result converts");
    assert_eq!(
        q::<Vec<String>>(&mut c, &["HGETALL", "h"]),
        vec!["a", "1"],
        "replies do not change"
    );

    ok(&mut c, "zset-max-listpack-entries", "2");
    q::<i64>(&mut c, &["ZADD", "z", "1", "a", "2", "b"]);
    assert_eq!(dump_type(&mut c, "z"), 17);
    q::<i64>(&mut c, &["ZADD", "z", "3", "c"]);
    assert_eq!(dump_type(&mut c, "z"), 5);
    ok(&mut c, "zset-max-listpack-entries", "128");
    ok(&mut c, "zset-max-listpack-value", "1");
    q::<i64>(&mut c, &["ZADD", "y", "1", "ab"]);
    assert_eq!(dump_type(&mut c, "y"), 5, "a member over the value limit");

    // RESTORE encodes by the thresholds, as Redis does when loading.
    ok(&mut c, "hash-max-listpack-entries", "512");
    ok(&mut c, "hash-max-listpack-value", "64");
    let payload: Vec<u8> = q(&mut c, &["DUMP", "h"]);
    let _: () = redis::cmd("RESTORE")
        .arg("h2")
        .arg(0)
        .arg(payload)
        .query(&mut c)
        .unwrap();
    assert_eq!(dump_type(&mut c, "h2"), 16);
}
