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
