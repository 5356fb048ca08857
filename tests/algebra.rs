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
