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
