//! Strings, counters, generic key commands, expiry and databases through a real client.

mod common;

use common::{err, q, TestServer};
use redis::Value;

// As in the server binary (INFO memory's figures; the heap-measuring tests are in
// tests/memory_overhead.rs, alone in their binary).
#[global_allocator]
static ALLOC: tollgate::alloc::CountingAlloc = tollgate::alloc::CountingAlloc;

#[test]
fn set_get_and_options() {
    let s = TestServer::start();
    let mut c = s.conn();
    assert_eq!(q::<String>(&mut c, &["SET", "k", "v"]), "OK");
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "v");
    assert_eq!(q::<Option<String>>(&mut c, &["SET", "k", "x", "NX"]), None);
    assert_eq!(q::<String>(&mut c, &["SET", "k", "v2", "XX", "GET"]), "v");
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "missing"]), None);
    assert_eq!(
        err(&mut c, &["SET", "k", "v", "EX", "0"]),
        "ERR invalid expire time in 'set' command"
    );
    assert_eq!(
        err(&mut c, &["SET", "k", "v", "NX", "XX"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(&mut c, &["SET", "k", "v", "EX", "x"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(q::<i64>(&mut c, &["SETNX", "k", "z"]), 0);
    assert_eq!(q::<String>(&mut c, &["MSET", "a", "1", "b", "2"]), "OK");
    assert_eq!(
        q::<Vec<Option<String>>>(&mut c, &["MGET", "a", "nope", "b"]),
        vec![Some("1".into()), None, Some("2".into())]
    );
    assert_eq!(q::<i64>(&mut c, &["MSETNX", "a", "9", "zz", "1"]), 0);
    assert_eq!(q::<String>(&mut c, &["GETDEL", "a"]), "1");
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "a"]), 0);
    assert_eq!(q::<i64>(&mut c, &["APPEND", "b", "34"]), 3);
    assert_eq!(q::<String>(&mut c, &["GETRANGE", "b", "-2", "-1"]), "34");
    assert_eq!(q::<i64>(&mut c, &["SETRANGE", "pad", "3", "x"]), 4);
    assert_eq!(q::<Vec<u8>>(&mut c, &["GET", "pad"]), b"\0\0\0x".to_vec());
}

#[test]
fn keys_and_values_on_both_sides_of_the_inline_sizes() {
    // Keys of up to 30 bytes and string values of up to 38 live in the keyspace slot;
    // longer ones on the heap. Both must behave the same, also when a value grows or
    // shrinks across the limit.
    let s = TestServer::start();
    let mut c = s.conn();
    for len in [29, 30, 31, 37, 38, 39, 100] {
        let key = "k".repeat(len);
        let value = "v".repeat(len);
        assert_eq!(q::<String>(&mut c, &["SET", &key, &value]), "OK");
        assert_eq!(q::<String>(&mut c, &["GET", &key]), value);
        assert_eq!(q::<i64>(&mut c, &["STRLEN", &key]), len as i64);
        assert_eq!(q::<i64>(&mut c, &["APPEND", &key, "xy"]), len as i64 + 2);
        assert_eq!(q::<String>(&mut c, &["GET", &key]), format!("{value}xy"));
        assert_eq!(
            q::<i64>(&mut c, &["SETRANGE", &key, "0", "AB"]),
            len as i64 + 2
        );
        assert_eq!(
            q::<String>(&mut c, &["GETRANGE", &key, "0", "2"]),
            format!("AB{}", &value[..1])
        );
        assert_eq!(q::<Vec<String>>(&mut c, &["KEYS", &key]), vec![key.clone()]);
        assert_eq!(q::<String>(&mut c, &["SET", &key, "short"]), "OK");
        assert_eq!(q::<String>(&mut c, &["GET", &key]), "short");
        assert_eq!(q::<i64>(&mut c, &["DEL", &key]), 1);
        assert_eq!(q::<i64>(&mut c, &["EXISTS", &key]), 0);
    }
}

#[test]
fn counters_and_their_errors() {
    let s = TestServer::start();
    let mut c = s.conn();
    assert_eq!(q::<i64>(&mut c, &["INCR", "n"]), 1);
    assert_eq!(q::<i64>(&mut c, &["INCRBY", "n", "41"]), 42);
    assert_eq!(q::<i64>(&mut c, &["DECRBY", "n", "2"]), 40);
    assert_eq!(q::<i64>(&mut c, &["DECR", "n"]), 39);
    assert_eq!(
        err(&mut c, &["INCRBY", "n", "x"]),
        "ERR value is not an integer or out of range"
    );
    q::<()>(&mut c, &["SET", "max", "9223372036854775807"]);
    assert_eq!(
        err(&mut c, &["INCR", "max"]),
        "ERR increment or decrement would overflow"
    );
    assert_eq!(q::<String>(&mut c, &["GET", "max"]), "9223372036854775807");
    q::<()>(&mut c, &["SET", "word", "hello"]);
    assert_eq!(
        err(&mut c, &["INCR", "word"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(q::<String>(&mut c, &["INCRBYFLOAT", "f", "10.5"]), "10.5");
    assert_eq!(q::<String>(&mut c, &["INCRBYFLOAT", "f", "0.1"]), "10.6");
    assert_eq!(
        err(&mut c, &["INCRBYFLOAT", "f", "inf"]),
        "ERR increment would produce NaN or Infinity"
    );
    assert_eq!(
        err(&mut c, &["INCRBYFLOAT", "f", "nan"]),
        "ERR value is not a valid float"
    );
    assert_eq!(q::<String>(&mut c, &["GET", "f"]), "10.6");
    assert_eq!(
        err(&mut c, &["INCR"]),
        "ERR wrong number of arguments for 'incr' command"
    );
    q::<()>(&mut c, &["RPUSH", "list", "x"]);
    assert_eq!(
        err(&mut c, &["INCR", "list"]),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
    assert_eq!(
        err(&mut c, &["GET", "list"]),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
}

#[test]
fn expiry_follows_the_server_clock() {
    let s = TestServer::start();
    let mut c = s.conn();
    q::<()>(&mut c, &["SET", "k", "v", "EX", "10"]);
    assert_eq!(q::<i64>(&mut c, &["TTL", "k"]), 10);
    s.advance(9_000);
    assert_eq!(q::<i64>(&mut c, &["TTL", "k"]), 1);
    assert!(q::<i64>(&mut c, &["PTTL", "k"]) <= 1000);
    // Past the deadline's millisecond, during which the key still lives (as in Redis).
    s.advance(1_001);
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "k"]), None);
    assert_eq!(q::<i64>(&mut c, &["TTL", "k"]), -2);
    q::<()>(&mut c, &["SET", "p", "v", "PX", "500"]);
    assert_eq!(q::<i64>(&mut c, &["PERSIST", "p"]), 1);
    assert_eq!(q::<i64>(&mut c, &["TTL", "p"]), -1);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "p", "100", "XX"]), 0);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "p", "100", "NX"]), 1);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "p", "50", "GT"]), 0);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "p", "50", "LT"]), 1);
    assert_eq!(
        err(&mut c, &["EXPIRE", "p", "1", "NX", "XX"]),
        "ERR NX and XX, GT or LT options at the same time are not compatible"
    );
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "p", "-1"]), 1);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "p"]), 0);
    q::<()>(&mut c, &["SET", "keep", "v", "EX", "100"]);
    q::<()>(&mut c, &["SET", "keep", "w", "KEEPTTL"]);
    assert_eq!(q::<i64>(&mut c, &["TTL", "keep"]), 100);
    q::<()>(&mut c, &["SET", "keep", "w"]);
    assert_eq!(q::<i64>(&mut c, &["TTL", "keep"]), -1);
}

/// Set keys `{prefix}0` .. `{prefix}{n-1}` to "5" with a one-minute time to live, in one
/// pipeline. (A minute, not less: the cycle also deletes keys of the current second whose
/// own deadline has passed, so a short TTL could go during a slow pipeline.)
fn set_for_a_minute(c: &mut redis::Connection, prefix: &str, n: usize) {
    let mut pipe = redis::pipe();
    for i in 0..n {
        pipe.cmd("SET")
            .arg(format!("{prefix}{i}"))
            .arg("5")
            .arg("PX")
            .arg(60_000)
            .ignore();
    }
    pipe.query::<()>(c).unwrap();
}

#[test]
fn active_expiry_reclaims_keys_without_traffic() {
    let s = TestServer::start();
    let mut c = s.conn();
    set_for_a_minute(&mut c, "k", 2000);
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 2000);
    s.advance(120_000);
    // The sampler runs every 100 ms; DBSIZE counts keys not yet deleted, like Redis.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while q::<i64>(&mut c, &["DBSIZE"]) > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 0);
    let info: String = q(&mut c, &["INFO", "stats"]);
    assert!(info.contains("expired_keys:2000"), "{info}");
}

#[test]
fn expired_keys_counts_the_keys_a_command_finds_expired_too() {
    // Redis counts a key in INFO's `expired_keys` whoever deletes it: its active cycle or
    // a command that meets the key past its deadline (expireIfNeeded). Each key once.
    let s = TestServer::start();
    let mut c = s.conn();
    set_for_a_minute(&mut c, "e", 500);
    s.advance(120_000);
    // At once (the cycle runs every 100 ms): most of these meet their key expired, delete
    // it and start a new one from 0.
    let mut pipe = redis::pipe();
    for i in 0..500 {
        pipe.cmd("INCR").arg(format!("e{i}"));
    }
    let counts: Vec<i64> = pipe.query(&mut c).unwrap();
    assert!(counts.iter().all(|&n| n == 1), "{counts:?}");
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 500);
    let info: String = q(&mut c, &["INFO", "stats"]);
    assert!(info.contains("expired_keys:500\r\n"), "{info}");
    // The new keys have no deadline: nothing more expires.
    s.advance(120_000);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let info: String = q(&mut c, &["INFO", "stats"]);
    assert!(info.contains("expired_keys:500\r\n"), "{info}");
    q::<()>(&mut c, &["CONFIG", "RESETSTAT"]);
    let info: String = q(&mut c, &["INFO", "stats"]);
    assert!(info.contains("expired_keys:0\r\n"), "{info}");
}

#[test]
fn sixteen_databases_and_move_copy() {
    let s = TestServer::start();
    let mut c = s.conn();
    for db in 0..16 {
        q::<()>(&mut c, &["SELECT", &db.to_string()]);
        q::<()>(&mut c, &["SET", "k", &db.to_string()]);
    }
    for db in 0..16 {
        q::<()>(&mut c, &["SELECT", &db.to_string()]);
        assert_eq!(q::<String>(&mut c, &["GET", "k"]), db.to_string());
    }
    assert_eq!(
        err(&mut c, &["SELECT", "16"]),
        "ERR DB index is out of range"
    );
    q::<()>(&mut c, &["SELECT", "0"]);
    q::<()>(&mut c, &["SET", "m", "1"]);
    assert_eq!(q::<i64>(&mut c, &["MOVE", "m", "3"]), 1);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "m"]), 0);
    assert_eq!(q::<i64>(&mut c, &["COPY", "k", "k2", "DB", "5"]), 1);
    q::<()>(&mut c, &["SELECT", "5"]);
    assert_eq!(q::<String>(&mut c, &["GET", "k2"]), "0");
    q::<()>(&mut c, &["FLUSHALL"]);
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 0);
}

#[test]
fn keys_scan_rename_type() {
    let s = TestServer::start();
    let mut c = s.conn();
    for i in 0..500 {
        q::<()>(&mut c, &["SET", &format!("user:{i}"), "x"]);
    }
    q::<()>(&mut c, &["RPUSH", "alist", "x"]);
    let mut keys: Vec<String> = q(&mut c, &["KEYS", "user:1*"]);
    keys.sort();
    assert_eq!(keys.len(), 111);
    let mut seen = std::collections::HashSet::new();
    let mut cursor = "0".to_string();
    for _ in 0..10_000 {
        let (next, batch): (String, Vec<String>) =
            q(&mut c, &["SCAN", &cursor, "MATCH", "user:*", "COUNT", "50"]);
        seen.extend(batch);
        cursor = next;
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(seen.len(), 500);
    let (_, lists): (String, Vec<String>) =
        q(&mut c, &["SCAN", "0", "TYPE", "list", "COUNT", "100000"]);
    assert_eq!(lists, vec!["alist".to_string()]);
    assert_eq!(err(&mut c, &["SCAN", "x"]), "ERR invalid cursor");
    assert_eq!(q::<String>(&mut c, &["TYPE", "alist"]), "list");
    assert_eq!(q::<String>(&mut c, &["TYPE", "nope"]), "none");
    assert_eq!(err(&mut c, &["RENAME", "nope", "x"]), "ERR no such key");
    q::<()>(&mut c, &["RENAME", "alist", "blist"]);
    assert_eq!(q::<i64>(&mut c, &["RENAMENX", "blist", "user:1"]), 0);
    assert!(q::<Option<String>>(&mut c, &["RANDOMKEY"]).is_some());
}

#[test]
fn unknown_and_wrong_arity_commands() {
    let s = TestServer::start();
    let mut c = s.conn();
    assert_eq!(
        err(&mut c, &["FOO", "a", "b"]),
        "ERR unknown command 'FOO', with args beginning with: 'a' 'b' "
    );
    assert_eq!(
        err(&mut c, &["GET"]),
        "ERR wrong number of arguments for 'get' command"
    );
    // Redis puts arguments into error texts with C's %s, which stops at a NUL byte.
    assert_eq!(
        err(&mut c, &["NO\0SUCH", "a\0b", "c"]),
        "ERR unknown command 'NO', with args beginning with: 'a' 'c' "
    );
    q::<()>(&mut c, &["SET", "k", "v"]);
    assert_eq!(
        err(&mut c, &["EXPIRE", "k", "10", "x\0y"]),
        "ERR Unsupported option x"
    );
    assert_eq!(
        err(&mut c, &["CLIENT", "no\0pe"]),
        "ERR unknown subcommand 'no'. Try CLIENT HELP."
    );
    assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
    let v: Value = q(&mut c, &["TIME"]);
    assert!(matches!(v, Value::Array(ref a) if a.len() == 2));
}
