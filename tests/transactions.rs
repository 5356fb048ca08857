//! MULTI/EXEC/DISCARD/WATCH, including races between two connections.

mod common;

use common::{err, q, TestServer};
use redis::Value;

#[test]
fn multi_exec_runs_queued_commands_in_order() {
    let s = TestServer::start();
    let mut c = s.conn();
    let (a, b): (i64, i64) = redis::pipe()
        .atomic()
        .cmd("INCR")
        .arg("n")
        .cmd("INCRBY")
        .arg("n")
        .arg(5)
        .query(&mut c)
        .unwrap();
    assert_eq!((a, b), (1, 6));
    assert_eq!(q::<String>(&mut c, &["MULTI"]), "OK");
    assert_eq!(err(&mut c, &["MULTI"]), "ERR MULTI calls can not be nested");
    assert_eq!(q::<String>(&mut c, &["SET", "x", "1"]), "QUEUED");
    assert_eq!(q::<String>(&mut c, &["SELECT", "1"]), "QUEUED");
    assert_eq!(q::<String>(&mut c, &["SET", "x", "2"]), "QUEUED");
    let r: Vec<Value> = q(&mut c, &["EXEC"]);
    assert_eq!(r.len(), 3);
    assert_eq!(q::<String>(&mut c, &["GET", "x"]), "2");
    q::<()>(&mut c, &["SELECT", "0"]);
    assert_eq!(q::<String>(&mut c, &["GET", "x"]), "1");
}

#[test]
fn queued_errors_abort_and_runtime_errors_do_not_roll_back() {
    let s = TestServer::start();
    let mut c = s.conn();
    q::<()>(&mut c, &["MULTI"]);
    q::<()>(&mut c, &["SET", "a", "1"]);
    assert_eq!(
        err(&mut c, &["NOSUCHCMD"]),
        "ERR unknown command 'NOSUCHCMD', with args beginning with: "
    );
    assert_eq!(
        err(&mut c, &["EXEC"]),
        "EXECABORT Transaction discarded because of previous errors."
    );
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "a"]), None);
    q::<()>(&mut c, &["SET", "name", "bob"]);
    let raw = s.raw(b"MULTI\r\nINCR age\r\nINCR name\r\nEXEC\r\n");
    assert_eq!(
        raw,
        "+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n:1\r\n-ERR value is not an integer or out of range\r\n"
    );
    assert_eq!(q::<i64>(&mut c, &["GET", "age"]), 1);
    assert_eq!(err(&mut c, &["EXEC"]), "ERR EXEC without MULTI");
    assert_eq!(err(&mut c, &["DISCARD"]), "ERR DISCARD without MULTI");
    q::<()>(&mut c, &["MULTI"]);
    q::<()>(&mut c, &["SET", "d", "1"]);
    assert_eq!(q::<String>(&mut c, &["DISCARD"]), "OK");
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "d"]), 0);
}

#[test]
fn watch_fails_exec_when_another_client_writes() {
    let s = TestServer::start();
    let mut a = s.conn();
    let mut b = s.conn();
    q::<()>(&mut a, &["SET", "age", "20"]);
    q::<()>(&mut a, &["WATCH", "age"]);
    q::<()>(&mut b, &["SET", "age", "30"]);
    q::<()>(&mut a, &["MULTI"]);
    q::<()>(&mut a, &["SET", "age", "21"]);
    assert_eq!(q::<Value>(&mut a, &["EXEC"]), Value::Nil);
    assert_eq!(q::<String>(&mut a, &["GET", "age"]), "30");
    // Untouched watch succeeds, and EXEC clears the watch.
    q::<()>(&mut a, &["WATCH", "age"]);
    q::<()>(&mut a, &["MULTI"]);
    q::<()>(&mut a, &["SET", "age", "22"]);
    assert_eq!(q::<Vec<String>>(&mut a, &["EXEC"]), vec!["OK".to_string()]);
    q::<()>(&mut b, &["SET", "age", "40"]);
    q::<()>(&mut a, &["MULTI"]);
    q::<()>(&mut a, &["SET", "age", "23"]);
    assert_eq!(q::<Vec<String>>(&mut a, &["EXEC"]), vec!["OK".to_string()]);
}

#[test]
fn watch_fails_exec_when_the_key_expires() {
    let s = TestServer::start();
    let mut a = s.conn();
    q::<()>(&mut a, &["SET", "k", "v", "PX", "100"]);
    q::<()>(&mut a, &["WATCH", "k"]);
    s.advance(200);
    q::<()>(&mut a, &["MULTI"]);
    q::<()>(&mut a, &["SET", "other", "1"]);
    assert_eq!(q::<Value>(&mut a, &["EXEC"]), Value::Nil);
}

#[test]
fn optimistic_increments_from_two_clients_never_lose_updates() {
    let s = TestServer::start();
    let addr = s.addr;
    let workers: Vec<_> = (0..2)
        .map(|_| {
            std::thread::spawn(move || {
                let mut c = redis::Client::open(format!("redis://{addr}/"))
                    .unwrap()
                    .get_connection()
                    .unwrap();
                let mut done = 0;
                let mut aborted = 0;
                for _ in 0..5000 {
                    if done == 200 {
                        break;
                    }
                    q::<()>(&mut c, &["WATCH", "counter"]);
                    let cur: Option<i64> = q(&mut c, &["GET", "counter"]);
                    let next = cur.unwrap_or(0) + 1;
                    let r: Value = redis::pipe()
                        .atomic()
                        .cmd("SET")
                        .arg("counter")
                        .arg(next)
                        .query(&mut c)
                        .unwrap();
                    match r {
                        Value::Nil => aborted += 1,
                        _ => done += 1,
                    }
                }
                (done, aborted)
            })
        })
        .collect();
    let results: Vec<(i32, i32)> = workers.into_iter().map(|w| w.join().unwrap()).collect();
    let total: i32 = results.iter().map(|r| r.0).sum();
    assert_eq!(total, 400);
    let mut c = s.conn();
    assert_eq!(q::<i64>(&mut c, &["GET", "counter"]), 400);
}

#[test]
fn watch_inside_multi_is_refused() {
    let s = TestServer::start();
    let mut c = s.conn();
    q::<()>(&mut c, &["MULTI"]);
    assert_eq!(
        err(&mut c, &["WATCH", "x"]),
        "ERR WATCH inside MULTI is not allowed"
    );
    q::<()>(&mut c, &["DISCARD"]);
}

/// SWAPDB exchanges two databases' keys with their deadlines, checks its arguments as
/// Redis 7.0 does, and runs inside MULTI and from scripts.
#[test]
fn swapdb_exchanges_databases() {
    let s = TestServer::start();
    let mut c = s.conn();
    q::<()>(&mut c, &["SET", "a", "zero"]);
    q::<()>(&mut c, &["SET", "t", "zero", "EX", "1000"]);
    q::<()>(&mut c, &["SELECT", "1"]);
    q::<()>(&mut c, &["SET", "b", "one"]);
    assert_eq!(q::<String>(&mut c, &["SWAPDB", "0", "1"]), "OK");
    // The client stays in database 1, which now holds database 0's keys.
    assert_eq!(q::<String>(&mut c, &["GET", "a"]), "zero");
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 2);
    let ttl: i64 = q(&mut c, &["TTL", "t"]);
    assert!((990..=1000).contains(&ttl), "{ttl}");
    q::<()>(&mut c, &["SELECT", "0"]);
    assert_eq!(q::<String>(&mut c, &["GET", "b"]), "one");
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 1);
    assert_eq!(q::<i64>(&mut c, &["TTL", "b"]), -1);
    // The same database: nothing changes.
    assert_eq!(q::<String>(&mut c, &["SWAPDB", "0", "0"]), "OK");
    assert_eq!(q::<String>(&mut c, &["GET", "b"]), "one");
    // Errors, with Redis 7.0's texts: both indexes are parsed before the range check.
    let cases: &[(&[&str], &str)] = &[
        (&["SWAPDB", "x", "1"], "ERR invalid first DB index"),
        (&["SWAPDB", "0", "1.5"], "ERR invalid second DB index"),
        (&["SWAPDB", "99", "y"], "ERR invalid second DB index"),
        (&["SWAPDB", "2147483648", "0"], "ERR invalid first DB index"),
        (&["SWAPDB", "16", "0"], "ERR DB index is out of range"),
        (&["SWAPDB", "0", "-1"], "ERR DB index is out of range"),
        (
            &["SWAPDB", "0"],
            "ERR wrong number of arguments for 'swapdb' command",
        ),
    ];
    for (args, want) in cases {
        assert_eq!(err(&mut c, args), *want, "{args:?}");
    }
    // Inside MULTI (and the transaction sees the swap).
    q::<()>(&mut c, &["MULTI"]);
    q::<()>(&mut c, &["SWAPDB", "0", "1"]);
    q::<()>(&mut c, &["GET", "a"]);
    let r: (String, String) = q(&mut c, &["EXEC"]);
    assert_eq!(r, ("OK".to_string(), "zero".to_string()));
    // From a script (SWAPDB is `write fast`, allowed in scripts).
    let swapped: String = q(
        &mut c,
        &[
            "EVAL",
            "redis.call('swapdb', 0, 1) return redis.call('get', 'b')",
            "0",
        ],
    );
    assert_eq!(swapped, "one");
    let bad = "return redis.call('swapdb', 0, 20)";
    assert_eq!(
        err(&mut c, &["EVAL", bad, "0"]),
        format!("ERR DB index is out of range{}", script_suffix(bad))
    );
}

/// The ` script: <sha1>, on @user_script:1.` Redis appends to a script's error.
fn script_suffix(code: &str) -> String {
    let mut h = sha1_smol::Sha1::new();
    h.update(code.as_bytes());
    format!(" script: {}, on @user_script:1.", h.digest())
}

/// SWAPDB touches a watched key that is live in either database (its content changes), and
/// no other: as Redis's `touchAllWatchedKeysInDb`.
#[test]
fn swapdb_touches_watched_keys_that_change() {
    let s = TestServer::start();
    let mut c = s.conn();
    let mut other = s.conn();
    let exec_after_swap = |c: &mut redis::Connection, other: &mut redis::Connection, key: &str| {
        q::<()>(c, &["WATCH", key]);
        q::<()>(other, &["SWAPDB", "0", "1"]);
        q::<()>(c, &["MULTI"]);
        q::<()>(c, &["PING"]);
        q::<Value>(c, &["EXEC"])
    };
    // Exists in the watched database: SWAPDB "deletes" it.
    q::<()>(&mut c, &["SET", "x", "30"]);
    assert_eq!(exec_after_swap(&mut c, &mut other, "x"), Value::Nil);
    // Now x is in database 1 only: the swap brings it back into database 0.
    assert_eq!(exec_after_swap(&mut c, &mut other, "x"), Value::Nil);
    // In neither database: untouched.
    let r = exec_after_swap(&mut c, &mut other, "nowhere");
    assert_eq!(r, Value::Array(vec![Value::SimpleString("PONG".into())]));
    // FLUSHDB and FLUSHALL touch only keys that exist.
    q::<()>(&mut c, &["WATCH", "nowhere"]);
    q::<()>(&mut other, &["FLUSHALL"]);
    q::<()>(&mut c, &["MULTI"]);
    q::<()>(&mut c, &["PING"]);
    assert_ne!(q::<Value>(&mut c, &["EXEC"]), Value::Nil);
    q::<()>(&mut c, &["SET", "y", "1"]);
    q::<()>(&mut c, &["WATCH", "y"]);
    q::<()>(&mut other, &["FLUSHDB"]);
    q::<()>(&mut c, &["MULTI"]);
    q::<()>(&mut c, &["PING"]);
    assert_eq!(q::<Value>(&mut c, &["EXEC"]), Value::Nil);
}

/// A client blocked on a key of one database is served when SWAPDB brings a list under
/// that key into it.
#[test]
fn swapdb_serves_blocked_clients() {
    let s = TestServer::start();
    let mut c = s.conn();
    q::<()>(&mut c, &["SELECT", "1"]);
    q::<()>(&mut c, &["RPUSH", "k", "hello"]);
    let mut blocked = s.conn();
    blocked
        .set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    q::<()>(&mut blocked, &["SELECT", "9"]);
    let waiter = std::thread::spawn(move || q::<Vec<String>>(&mut blocked, &["BRPOP", "k", "15"]));
    // Wait (bounded) until the client is blocked: the swap must be what serves it.
    let blocked_now = (0..500).any(|_| {
        let info: String = q(&mut c, &["INFO", "clients"]);
        let yes = info.contains("blocked_clients:1");
        if !yes {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        yes
    });
    assert!(blocked_now, "BRPOP never blocked");
    assert_eq!(q::<String>(&mut c, &["SWAPDB", "1", "9"]), "OK");
    assert_eq!(waiter.join().unwrap(), ["k", "hello"]);
    q::<()>(&mut c, &["SELECT", "9"]);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "k"]), 0);
}

/// SMOVE of a member the destination already holds changes only the source: a WATCH on
/// the destination survives it, as in Redis.
#[test]
fn smove_touches_the_destination_only_when_it_adds() {
    let s = TestServer::start();
    let mut c = s.conn();
    let mut other = s.conn();
    q::<()>(&mut c, &["SADD", "src", "a", "b"]);
    q::<()>(&mut c, &["SADD", "dst", "a"]);
    q::<()>(&mut c, &["WATCH", "dst"]);
    q::<()>(&mut c, &["MULTI"]);
    q::<()>(&mut c, &["SADD", "dst", "c"]);
    assert_eq!(q::<i64>(&mut other, &["SMOVE", "src", "dst", "a"]), 1);
    assert_eq!(q::<Vec<i64>>(&mut c, &["EXEC"]), [1]);
    assert_eq!(q::<i64>(&mut c, &["SCARD", "dst"]), 2);
    assert_eq!(q::<i64>(&mut c, &["SCARD", "src"]), 1);
    // A member the destination lacks: the WATCH fires.
    q::<()>(&mut c, &["WATCH", "dst"]);
    assert_eq!(q::<i64>(&mut other, &["SMOVE", "src", "dst", "b"]), 1);
    q::<()>(&mut c, &["MULTI"]);
    q::<()>(&mut c, &["PING"]);
    assert_eq!(q::<Value>(&mut c, &["EXEC"]), Value::Nil);
}
