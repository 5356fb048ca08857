//! LMPOP/ZMPOP, the sorted-set algebra (ZUNION, ZINTER, ZDIFF and their STORE forms,
//! ZINTERCARD), SORT/SORT_RO and OBJECT through a real client, in RESP2 and RESP3.

mod common;

use common::{err, q, TestServer};
use redis::Value;

fn bulk(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

fn bulks(items: &[&str]) -> Value {
    Value::Array(items.iter().map(|s| bulk(s)).collect())
}

#[test]
fn lmpop_and_zmpop() {
    let s = TestServer::start();
    let mut c = s.conn();
    q::<()>(&mut c, &["RPUSH", "l", "a", "b", "c"]);
    q::<()>(&mut c, &["ZADD", "z", "1", "a", "2", "b"]);
    assert_eq!(
        q::<Value>(&mut c, &["LMPOP", "2", "nokey", "l", "RIGHT", "COUNT", "2"]),
        Value::Array(vec![bulk("l"), bulks(&["c", "b"])])
    );
    assert_eq!(
        q::<Value>(&mut c, &["LMPOP", "1", "nokey", "LEFT"]),
        Value::Nil
    );
    assert_eq!(
        err(&mut c, &["LMPOP", "0", "l", "LEFT"]),
        "ERR numkeys should be greater than 0"
    );
    assert_eq!(
        q::<Value>(&mut c, &["ZMPOP", "1", "z", "MAX", "COUNT", "5"]),
        Value::Array(vec![
            bulk("z"),
            Value::Array(vec![bulks(&["b", "2"]), bulks(&["a", "1"])])
        ])
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "z"]), 0);
    let mut c3 = s.conn3();
    q::<()>(&mut c3, &["ZADD", "z", "1.5", "a"]);
    assert_eq!(
        q::<Value>(&mut c3, &["ZMPOP", "1", "z", "MIN"]),
        Value::Array(vec![
            bulk("z"),
            Value::Array(vec![Value::Array(vec![bulk("a"), Value::Double(1.5)])])
        ])
    );
    // The rows name their keys for COMMAND GETKEYS (and a cluster's routing).
    assert_eq!(
        q::<Vec<String>>(
            &mut c,
            &["COMMAND", "GETKEYS", "LMPOP", "2", "a", "b", "LEFT"]
        ),
        vec!["a", "b"]
    );
}

#[test]
fn zset_algebra() {
    let s = TestServer::start();
    let mut c = s.conn();
    q::<()>(&mut c, &["ZADD", "z1", "1", "a", "2", "b", "3", "c"]);
    q::<()>(&mut c, &["ZADD", "z2", "1", "b", "2", "c", "3", "d"]);
    q::<()>(&mut c, &["SADD", "s", "a", "x"]);
    q::<()>(&mut c, &["SET", "str", "x"]);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZUNION", "3", "z1", "z2", "s", "WITHSCORES"]),
        vec!["x", "1", "a", "2", "b", "3", "d", "3", "c", "5"]
    );
    assert_eq!(
        q::<i64>(
            &mut c,
            &[
                "ZUNIONSTORE",
                "dst",
                "2",
                "z1",
                "z2",
                "WEIGHTS",
                "2",
                "1",
                "AGGREGATE",
                "MAX"
            ]
        ),
        4
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZRANGE", "dst", "0", "-1", "WITHSCORES"]),
        vec!["a", "2", "d", "3", "b", "4", "c", "6"]
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZINTER", "2", "z1", "z2", "WITHSCORES"]),
        vec!["b", "3", "c", "5"]
    );
    assert_eq!(
        q::<i64>(&mut c, &["ZINTERCARD", "2", "z1", "z2", "LIMIT", "1"]),
        1
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZDIFF", "2", "z1", "z2"]),
        vec!["a"]
    );
    // An empty result deletes the destination, whatever it held.
    assert_eq!(q::<i64>(&mut c, &["ZDIFFSTORE", "str", "2", "z1", "z1"]), 0);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "str"]), 0);
    // inf + -inf is 0, as in Redis.
    q::<()>(&mut c, &["ZADD", "i1", "inf", "m"]);
    q::<()>(&mut c, &["ZADD", "i2", "-inf", "m"]);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZUNION", "2", "i1", "i2", "WITHSCORES"]),
        vec!["m", "0"]
    );
    assert_eq!(
        err(&mut c, &["ZUNIONSTORE", "dst", "0", "z1"]),
        "ERR at least 1 input key is needed for 'zunionstore' command"
    );
    assert_eq!(
        err(&mut c, &["ZINTER", "2", "z1", "z2", "WEIGHTS", "1"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(&mut c, &["ZUNION", "2", "z1", "z2", "WEIGHTS", "1", "x"]),
        "ERR weight value is not a float"
    );
    q::<()>(&mut c, &["SET", "str", "x"]);
    assert_eq!(
        err(&mut c, &["ZINTERCARD", "2", "z1", "str"]),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
    assert_eq!(
        q::<Vec<String>>(
            &mut c,
            &[
                "COMMAND",
                "GETKEYS",
                "ZUNIONSTORE",
                "dst",
                "2",
                "a",
                "b",
                "WEIGHTS",
                "1",
                "2"
            ]
        ),
        vec!["dst", "a", "b"]
    );
    let mut c3 = s.conn3();
    assert_eq!(
        q::<Value>(
            &mut c3,
            &["ZINTER", "1", "z2", "WITHSCORES", "WEIGHTS", "0.5"]
        ),
        Value::Array(vec![
            Value::Array(vec![bulk("b"), Value::Double(0.5)]),
            Value::Array(vec![bulk("c"), Value::Double(1.0)]),
            Value::Array(vec![bulk("d"), Value::Double(1.5)]),
        ])
    );
}

#[test]
fn sort_and_sort_ro() {
    let s = TestServer::start();
    let mut c = s.conn();
    q::<()>(&mut c, &["RPUSH", "l", "3", "1", "2"]);
    q::<()>(&mut c, &["MSET", "w_1", "30", "w_2", "10", "w_3", "20"]);
    q::<()>(&mut c, &["HSET", "h_1", "name", "one"]);
    q::<()>(&mut c, &["HSET", "h_3", "name", "three"]);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["SORT", "l"]),
        vec!["1", "2", "3"]
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["SORT", "l", "BY", "w_*", "DESC"]),
        vec!["1", "3", "2"]
    );
    assert_eq!(
        q::<Value>(
            &mut c,
            &["SORT", "l", "BY", "w_*", "GET", "#", "GET", "h_*->name"]
        ),
        Value::Array(vec![
            bulk("2"),
            Value::Nil,
            bulk("3"),
            bulk("three"),
            bulk("1"),
            bulk("one")
        ])
    );
    assert_eq!(
        q::<Vec<String>>(
            &mut c,
            &["SORT", "l", "BY", "nosort", "DESC", "LIMIT", "0", "2"]
        ),
        vec!["2", "1"]
    );
    assert_eq!(
        q::<i64>(&mut c, &["SORT", "l", "GET", "h_*->name", "STORE", "dst"]),
        3
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["LRANGE", "dst", "0", "-1"]),
        vec!["one", "", "three"]
    );
    assert_eq!(
        err(&mut c, &["SORT_RO", "l", "STORE", "dst"]),
        "ERR syntax error"
    );
    q::<()>(&mut c, &["RPUSH", "bad", "1", "x"]);
    assert_eq!(
        err(&mut c, &["SORT", "bad"]),
        "ERR One or more scores can't be converted into double"
    );
    q::<()>(&mut c, &["RPUSH", "big", "1e400"]);
    assert_eq!(
        err(&mut c, &["SORT", "big"]),
        "ERR One or more scores can't be converted into double"
    );
    // Unlike Redis 7.0 (which leaves errno set), the next sort is not affected.
    assert_eq!(
        q::<Vec<String>>(&mut c, &["SORT", "l"]),
        vec!["1", "2", "3"]
    );
    assert_eq!(
        err(&mut c, &["SORT", "w_1"]),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
    assert_eq!(
        q::<Vec<String>>(
            &mut c,
            &["COMMAND", "GETKEYS", "SORT", "l", "BY", "w_*", "STORE", "d"]
        ),
        vec!["l", "d"]
    );
    // ALPHA BY ties keep the source order (Redis leaves them to qsort).
    q::<()>(&mut c, &["RPUSH", "t", "c", "a", "b"]);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["SORT", "t", "BY", "missing_*", "ALPHA"]),
        vec!["c", "a", "b"]
    );
    // Inside MULTI and from a script.
    q::<()>(&mut c, &["MULTI"]);
    q::<()>(&mut c, &["SORT", "l", "DESC"]);
    assert_eq!(
        q::<Vec<Vec<String>>>(&mut c, &["EXEC"]),
        vec![vec!["3", "2", "1"]]
    );
    q::<()>(&mut c, &["SADD", "s", "b", "a", "c"]);
    assert_eq!(
        q::<Vec<String>>(
            &mut c,
            &[
                "EVAL",
                "return redis.call('sort', KEYS[1], 'by', 'nosort')",
                "1",
                "s"
            ]
        ),
        vec!["a", "b", "c"]
    );
}

#[test]
fn object_subcommands() {
    let s = TestServer::start();
    let mut c = s.conn();
    q::<()>(&mut c, &["SET", "n", "12"]);
    q::<()>(&mut c, &["SET", "s", "hello"]);
    q::<()>(&mut c, &["SET", "r", &"x".repeat(45)]);
    q::<()>(&mut c, &["RPUSH", "l", "a"]);
    q::<()>(&mut c, &["SADD", "ints", "1", "2"]);
    q::<()>(&mut c, &["HSET", "h", "f", "v"]);
    q::<()>(&mut c, &["ZADD", "z", "1", "m"]);
    let enc = |c: &mut redis::Connection, k: &str| q::<String>(c, &["OBJECT", "ENCODING", k]);
    assert_eq!(enc(&mut c, "n"), "int");
    assert_eq!(enc(&mut c, "s"), "embstr");
    assert_eq!(enc(&mut c, "r"), "raw");
    assert_eq!(enc(&mut c, "l"), "quicklist");
    assert_eq!(enc(&mut c, "ints"), "intset");
    assert_eq!(enc(&mut c, "h"), "listpack");
    assert_eq!(enc(&mut c, "z"), "listpack");
    assert_eq!(
        q::<Value>(&mut c, &["OBJECT", "ENCODING", "nokey"]),
        Value::Nil
    );
    // The thresholds are the CONFIG parameters'. Hashes, sets and sorted sets really
    // convert, as in Redis, at their next write.
    q::<()>(&mut c, &["CONFIG", "SET", "set-max-intset-entries", "1"]);
    q::<()>(&mut c, &["CONFIG", "SET", "hash-max-ziplist-value", "0"]);
    q::<()>(&mut c, &["CONFIG", "SET", "zset-max-listpack-entries", "0"]);
    assert_eq!(enc(&mut c, "h"), "listpack");
    assert_eq!(enc(&mut c, "ints"), "intset");
    q::<i64>(&mut c, &["HSET", "h", "another", "field"]);
    q::<i64>(&mut c, &["ZADD", "z", "7", "another"]);
    q::<i64>(&mut c, &["SADD", "ints", "12345"]);
    assert_eq!(enc(&mut c, "ints"), "hashtable");
    assert_eq!(enc(&mut c, "h"), "hashtable");
    assert_eq!(enc(&mut c, "z"), "skiplist");
    assert_eq!(q::<i64>(&mut c, &["OBJECT", "REFCOUNT", "n"]), 2147483647);
    assert_eq!(q::<i64>(&mut c, &["OBJECT", "REFCOUNT", "s"]), 1);
    // IDLETIME counts from the last use; OBJECT itself is not a use. Idle time is in whole
    // seconds of the server clock (real time plus DEBUG ADVANCE-TIME's offset), so a second
    // may tick between the use and the question.
    q::<()>(&mut c, &["GET", "s"]);
    s.advance(5_000);
    let idle = q::<i64>(&mut c, &["OBJECT", "IDLETIME", "s"]);
    assert!((5..=6).contains(&idle), "{idle}");
    let again = q::<i64>(&mut c, &["OBJECT", "IDLETIME", "s"]);
    assert!((idle..=idle + 1).contains(&again), "{idle} then {again}");
    q::<()>(&mut c, &["GET", "s"]);
    // Whole seconds of the server clock, as Redis's LRU clock: a second may tick between.
    assert!(q::<i64>(&mut c, &["OBJECT", "IDLETIME", "s"]) <= 1);
    assert!(err(&mut c, &["OBJECT", "FREQ", "s"])
        .starts_with("ERR An LFU maxmemory policy is not selected"));
    q::<()>(
        &mut c,
        &["CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"],
    );
    assert!(err(&mut c, &["OBJECT", "IDLETIME", "s"])
        .starts_with("ERR An LFU maxmemory policy is selected, idle time not tracked."));
    q::<()>(&mut c, &["SET", "hot", "v"]);
    let before = q::<i64>(&mut c, &["OBJECT", "FREQ", "hot"]);
    for _ in 0..200 {
        q::<()>(&mut c, &["GET", "hot"]);
    }
    let after = q::<i64>(&mut c, &["OBJECT", "FREQ", "hot"]);
    assert!(after > before, "{before} -> {after}");
    assert_eq!(
        err(&mut c, &["OBJECT", "ENCODING"]),
        "ERR wrong number of arguments for 'object|encoding' command"
    );
    assert_eq!(
        err(&mut c, &["OBJECT", "foo"]),
        "ERR unknown subcommand 'foo'. Try OBJECT HELP."
    );
    let help = q::<Vec<String>>(&mut c, &["OBJECT", "HELP"]);
    assert_eq!(help.len(), 15);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["COMMAND", "GETKEYS", "OBJECT", "ENCODING", "k"]),
        vec!["k"]
    );
}
