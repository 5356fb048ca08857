//! Pub/Sub, keyspace notifications and blocking commands on a standalone server, through
//! the `redis` crate (its PubSub API and raw connections) and raw sockets where the exact
//! bytes matter. Every wait is bounded by a read timeout; no test asserts a timing.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::thread;
use std::time::Duration;

use common::{err, q, ServerProcess, TestServer};
use redis::Value;

/// A raw connection: send bytes, read what arrives within `wait`.
struct Raw(TcpStream);

impl Raw {
    fn new(s: &TestServer) -> Raw {
        let t = TcpStream::connect(s.addr).unwrap();
        t.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        Raw(t)
    }

    fn send(&mut self, b: &str) {
        self.0.write_all(b.as_bytes()).unwrap();
    }

    /// Read until `want` bytes arrived or 5 s passed.
    fn read_until(&mut self, want: &str) -> String {
        let mut out = Vec::new();
        let mut buf = [0u8; 65536];
        for _ in 0..25 {
            if String::from_utf8_lossy(&out).contains(want) {
                break;
            }
            if let Ok(n) = self.0.read(&mut buf) {
                if n == 0 {
                    break;
                }
                out.extend_from_slice(&buf[..n]);
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    /// Whatever arrives within 200 ms.
    fn read_now(&mut self) -> String {
        let mut buf = [0u8; 65536];
        match self.0.read(&mut buf) {
            Ok(n) => String::from_utf8_lossy(&buf[..n]).into_owned(),
            Err(_) => String::new(),
        }
    }
}

#[test]
fn subscribe_publish_patterns_and_counts() {
    let s = TestServer::start();
    let mut sub_conn = s.conn();
    let mut pub_conn = s.conn();
    let mut sub = sub_conn.as_pubsub();
    sub.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    // One name per call: redis-rs reads one confirmation per call, so SUBSCRIBE a b would
    // leave b's confirmation to be taken as PSUBSCRIBE's, which could then return before
    // the server ran it (the PUBLISH to `news` below then raced the PSUBSCRIBE). The
    // confirmations of a multi-channel SUBSCRIBE are checked byte by byte below
    // (`resp2_subscribe_mode_replies_and_errors`).
    sub.subscribe("a").unwrap();
    sub.subscribe("b").unwrap();
    sub.psubscribe("n*").unwrap();
    assert_eq!(q::<i64>(&mut pub_conn, &["PUBLISH", "a", "hello"]), 1);
    // One channel and one pattern subscription of the same client: two receivers.
    assert_eq!(q::<i64>(&mut pub_conn, &["PUBLISH", "news", "x"]), 1);
    assert_eq!(q::<i64>(&mut pub_conn, &["PUBLISH", "nobody", "y"]), 1);
    assert_eq!(q::<i64>(&mut pub_conn, &["PUBLISH", "zzz", "y"]), 0);
    let m = sub.get_message().unwrap();
    assert_eq!(
        (
            m.get_channel_name(),
            m.get_payload::<String>().unwrap().as_str()
        ),
        ("a", "hello")
    );
    assert!(!m.from_pattern());
    let m = sub.get_message().unwrap();
    assert!(m.from_pattern());
    assert_eq!(m.get_pattern::<String>().unwrap(), "n*");
    assert_eq!(m.get_channel_name(), "news");
    let m = sub.get_message().unwrap();
    assert_eq!(m.get_channel_name(), "nobody");
    // Introspection.
    let chans: Vec<String> = q(&mut pub_conn, &["PUBSUB", "CHANNELS"]);
    assert_eq!(chans, ["a", "b"]);
    let chans: Vec<String> = q(&mut pub_conn, &["PUBSUB", "CHANNELS", "b*"]);
    assert_eq!(chans, ["b"]);
    let numsub: Vec<Value> = q(&mut pub_conn, &["PUBSUB", "NUMSUB", "a", "zz"]);
    assert_eq!(
        numsub,
        [
            Value::BulkString(b"a".to_vec()),
            Value::Int(1),
            Value::BulkString(b"zz".to_vec()),
            Value::Int(0)
        ]
    );
    assert_eq!(q::<i64>(&mut pub_conn, &["PUBSUB", "NUMPAT"]), 1);
    assert!(err(&mut pub_conn, &["PUBSUB", "FOO"]).contains("unknown subcommand 'FOO'"));
    assert_eq!(
        err(&mut pub_conn, &["PUBSUB", "NUMPAT", "x"]),
        "ERR wrong number of arguments for 'pubsub|numpat' command"
    );
    sub.unsubscribe("a").unwrap();
    sub.unsubscribe("b").unwrap();
    sub.punsubscribe("n*").unwrap();
    drop(sub);
    assert_eq!(q::<i64>(&mut pub_conn, &["PUBSUB", "NUMPAT"]), 0);
    assert_eq!(q::<i64>(&mut pub_conn, &["PUBLISH", "a", "gone"]), 0);
}

#[test]
fn resp2_subscribe_mode_replies_and_errors() {
    let s = TestServer::start();
    let mut c = Raw::new(&s);
    c.send("SUBSCRIBE x y\r\n");
    assert_eq!(
        c.read_until(":2\r\n"),
        "*3\r\n$9\r\nsubscribe\r\n$1\r\nx\r\n:1\r\n*3\r\n$9\r\nsubscribe\r\n$1\r\ny\r\n:2\r\n"
    );
    c.send("GET k\r\nPING\r\nPING hi\r\n");
    assert_eq!(
        c.read_until("hi\r\n"),
        "-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n\
         *2\r\n$4\r\npong\r\n$0\r\n\r\n*2\r\n$4\r\npong\r\n$2\r\nhi\r\n"
    );
    c.send("UNSUBSCRIBE\r\nUNSUBSCRIBE\r\nGET k\r\n");
    assert_eq!(
        c.read_until("$-1\r\n$-1"),
        "*3\r\n$11\r\nunsubscribe\r\n$1\r\nx\r\n:1\r\n*3\r\n$11\r\nunsubscribe\r\n$1\r\ny\r\n:0\r\n\
         *3\r\n$11\r\nunsubscribe\r\n$-1\r\n:0\r\n$-1\r\n"
    );
    // RESET leaves subscribe mode.
    c.send("PSUBSCRIBE p*\r\nRESET\r\nGET k\r\n");
    assert!(c
        .read_until("RESET\r\n$-1\r\n")
        .ends_with("+RESET\r\n$-1\r\n"));
    let mut p = s.conn();
    assert_eq!(q::<i64>(&mut p, &["PUBSUB", "NUMPAT"]), 0);
}

#[test]
fn resp3_pushes_and_any_command_while_subscribed() {
    let s = TestServer::start();
    let mut c = Raw::new(&s);
    c.send("HELLO 3\r\n");
    c.read_until("modules");
    c.send("SUBSCRIBE ch\r\nSET k v\r\nGET k\r\n");
    assert_eq!(
        c.read_until("$1\r\nv\r\n"),
        ">3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n+OK\r\n$1\r\nv\r\n"
    );
    // A message to itself arrives before the PUBLISH reply, as in Redis.
    c.send("PUBLISH ch self\r\n");
    assert_eq!(
        c.read_until(":1\r\n"),
        ">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$4\r\nself\r\n:1\r\n"
    );
    // CLIENT REPLY OFF silences replies, not pushes.
    c.send("CLIENT REPLY OFF\r\nSET k w\r\nPUBLISH ch quiet\r\nCLIENT REPLY ON\r\n");
    assert_eq!(
        c.read_until("+OK\r\n"),
        ">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$5\r\nquiet\r\n+OK\r\n"
    );
}

#[test]
fn publish_from_scripts_functions_and_multi() {
    let s = TestServer::start();
    let mut sub_conn = s.conn();
    let mut sub = sub_conn.as_pubsub();
    sub.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    sub.subscribe("ev").unwrap();
    let mut c = s.conn();
    let n: i64 = q(
        &mut c,
        &[
            "EVAL",
            "return redis.call('publish', KEYS[1], ARGV[1])",
            "1",
            "ev",
            "lua",
        ],
    );
    assert_eq!(n, 1);
    let lib = "#!lua name=pub\nredis.register_function('p', function(keys, args) return redis.call('publish', keys[1], args[1]) end)";
    let _: String = q(&mut c, &["FUNCTION", "LOAD", lib]);
    assert_eq!(q::<i64>(&mut c, &["FCALL", "p", "1", "ev", "fn"]), 1);
    let r: Vec<i64> = redis::pipe()
        .atomic()
        .cmd("PUBLISH")
        .arg("ev")
        .arg("m1")
        .cmd("PUBLISH")
        .arg("ev")
        .arg("m2")
        .query(&mut c)
        .unwrap();
    assert_eq!(r, [1, 1]);
    let got: Vec<String> = (0..4)
        .map(|_| sub.get_message().unwrap().get_payload().unwrap())
        .collect();
    assert_eq!(got, ["lua", "fn", "m1", "m2"]);
}

/// Collects keyspace events from a `psubscribe '*'` connection.
fn events(sub: &mut redis::PubSub<'_>, n: usize) -> Vec<String> {
    (0..n)
        .map(|_| {
            let m = sub.get_message().unwrap();
            format!(
                "{} {}",
                m.get_channel_name(),
                m.get_payload::<String>().unwrap()
            )
        })
        .collect()
}

#[test]
fn keyspace_events_by_class() {
    let s = TestServer::start();
    let mut c = s.conn();
    assert_eq!(
        err(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "Q"]),
        "ERR CONFIG SET failed (possibly related to argument 'notify-keyspace-events') - Invalid event class character. Use 'Ag$lshzxeKEtmdn'."
    );
    let _: () = q(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "KEA"]);
    let got: Vec<String> = q(&mut c, &["CONFIG", "GET", "notify-keyspace-events"]);
    assert_eq!(got[1], "AKE");
    let mut sub_conn = s.conn();
    let mut sub = sub_conn.as_pubsub();
    sub.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    sub.psubscribe("__keyevent@0__:*").unwrap();
    for cmd in [
        &["SET", "s", "1"][..],
        &["INCRBY", "s", "2"],
        &["APPEND", "s", "x"],
        &["EXPIRE", "s", "100"],
        &["PERSIST", "s"],
        &["RENAME", "s", "t"],
        &["DEL", "t"],
        &["RPUSH", "l", "a"],
        &["LPOP", "l"],
        &["SADD", "st", "a"],
        &["SREM", "st", "nope"],
        &["HSET", "h", "f", "1"],
        &["HINCRBY", "h", "f", "1"],
        &["ZADD", "z", "1", "m"],
        &["ZINCRBY", "z", "1", "m"],
        &["ZREM", "z", "m"],
    ] {
        let _: Value = q(&mut c, cmd);
    }
    // SREM of a non-member fires nothing.
    assert_eq!(
        events(&mut sub, 18),
        [
            "__keyevent@0__:set s",
            "__keyevent@0__:incrby s",
            "__keyevent@0__:append s",
            "__keyevent@0__:expire s",
            "__keyevent@0__:persist s",
            "__keyevent@0__:rename_from s",
            "__keyevent@0__:rename_to t",
            "__keyevent@0__:del t",
            "__keyevent@0__:rpush l",
            "__keyevent@0__:lpop l",
            "__keyevent@0__:del l",
            "__keyevent@0__:sadd st",
            "__keyevent@0__:hset h",
            "__keyevent@0__:hincrby h",
            "__keyevent@0__:zadd z",
            "__keyevent@0__:zincr z",
            "__keyevent@0__:zrem z",
            "__keyevent@0__:del z",
        ]
    );
    let _: () = q(&mut c, &["SET", "e", "1", "PX", "1"]);
    // `set e` also fired `expire` (class g); then the key expires in the background.
    let got = events(&mut sub, 3);
    assert_eq!(
        got,
        [
            "__keyevent@0__:set e",
            "__keyevent@0__:expire e",
            "__keyevent@0__:expired e"
        ]
    );
    // The `new` class and masking: only `n` enabled.
    let _: () = q(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "En"]);
    let _: () = q(&mut c, &["SET", "fresh", "1"]);
    let _: () = q(&mut c, &["SET", "fresh", "2"]);
    let _: () = q(&mut c, &["SET", "fresh2", "1"]);
    assert_eq!(
        events(&mut sub, 2),
        ["__keyevent@0__:new fresh", "__keyevent@0__:new fresh2"]
    );
}

#[test]
fn evicted_events_under_maxmemory() {
    // The binary: in-process test servers do not count memory (the counting allocator is
    // the binary's).
    let s = ServerProcess::start();
    let mut c = s.conn();
    let _: () = q(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "Ee"]);
    let _: () = q(
        &mut c,
        &["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"],
    );
    let _: () = q(&mut c, &["SET", "victim", "x"]);
    let mut sub_conn = s.conn();
    let mut sub = sub_conn.as_pubsub();
    sub.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    sub.psubscribe("*").unwrap();
    let _: () = q(&mut c, &["CONFIG", "SET", "maxmemory", "1"]);
    let got = events(&mut sub, 1);
    let _: () = q(&mut c, &["CONFIG", "SET", "maxmemory", "0"]);
    assert_eq!(got, ["__keyevent@0__:evicted victim"]);
}

#[test]
fn a_slow_subscriber_is_disconnected_at_its_output_limit() {
    let s = TestServer::start();
    let mut c = s.conn();
    let _: () = q(
        &mut c,
        &[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "pubsub 64kb 0 0",
        ],
    );
    let got: Vec<String> = q(&mut c, &["CONFIG", "GET", "client-output-buffer-limit"]);
    assert_eq!(
        got[1],
        "normal 0 0 0 slave 268435456 67108864 60 pubsub 65536 0 0"
    );
    assert!(err(
        &mut c,
        &[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "normal 1mb 0 0"
        ]
    )
    .contains("pubsub clients only"));
    // A subscriber that never reads, with a small socket receive buffer.
    let mut slow = TcpStream::connect(s.addr).unwrap();
    slow.write_all(b"SUBSCRIBE flood\r\n").unwrap();
    thread::sleep(Duration::from_millis(100));
    let payload = "x".repeat(16 * 1024);
    let mut receivers = Vec::new();
    for _ in 0..2000 {
        let n: i64 = q(&mut c, &["PUBLISH", "flood", &payload]);
        receivers.push(n);
        if n == 0 {
            break;
        }
    }
    // 32 MB were offered; the server dropped the subscriber instead of buffering them.
    assert_eq!(
        receivers.last(),
        Some(&0),
        "the subscriber was never dropped"
    );
    let numsub: Vec<Value> = q(&mut c, &["PUBSUB", "NUMSUB", "flood"]);
    assert_eq!(numsub[1], Value::Int(0));
    drop(slow);
}

#[test]
fn blocking_pops_timeouts_and_errors() {
    let s = TestServer::start();
    let mut c = s.conn();
    for (args, want) in [
        (&["BLPOP", "k", "-1"][..], "ERR timeout is negative"),
        (
            &["BLPOP", "k", "abc"],
            "ERR timeout is not a float or out of range",
        ),
        (&["BRPOP", "k", "1e30"], "ERR timeout is negative"),
        (
            &["BLMPOP", "0", "0", "k", "LEFT"],
            "ERR numkeys should be greater than 0",
        ),
        (&["BLMPOP", "0", "1", "k", "UP"], "ERR syntax error"),
        (
            &["BZMPOP", "0", "1", "k", "MIN", "COUNT", "0"],
            "ERR count should be greater than 0",
        ),
        (&["BLMOVE", "a", "b", "UP", "LEFT", "0"], "ERR syntax error"),
    ] {
        assert_eq!(err(&mut c, args), want, "{args:?}");
    }
    let _: () = q(&mut c, &["SET", "str", "x"]);
    assert!(err(&mut c, &["BLPOP", "str", "0"]).starts_with("WRONGTYPE"));
    // A fractional timeout passes with a nil reply.
    let r: Value = q(&mut c, &["BLPOP", "none", "0.05"]);
    assert_eq!(r, Value::Nil);
    let r: Value = q(&mut c, &["BRPOPLPUSH", "none", "dst", "0.05"]);
    assert_eq!(r, Value::Nil);
    // Ready keys answer at once, in key order.
    let _: () = q(&mut c, &["RPUSH", "l2", "a", "b"]);
    let r: (String, String) = q(&mut c, &["BLPOP", "l1", "l2", "0"]);
    assert_eq!(r, ("l2".into(), "a".into()));
    let _: () = q(&mut c, &["ZADD", "z", "1", "one", "2", "two"]);
    let r: (String, String, String) = q(&mut c, &["BZPOPMAX", "z", "0"]);
    assert_eq!(r, ("z".into(), "two".into(), "2".into()));
    let r: Value = q(&mut c, &["BZMPOP", "0", "1", "z", "MIN", "COUNT", "5"]);
    assert_eq!(
        r,
        Value::Array(vec![
            Value::BulkString(b"z".to_vec()),
            Value::Array(vec![Value::Array(vec![
                Value::BulkString(b"one".to_vec()),
                Value::BulkString(b"1".to_vec())
            ])])
        ])
    );
    // Inside MULTI they do not block; scripts may not call BLPOP.
    let r: Vec<Value> = redis::pipe()
        .atomic()
        .cmd("BLPOP")
        .arg("none")
        .arg(0)
        .cmd("BLMOVE")
        .arg("none")
        .arg("x")
        .arg("LEFT")
        .arg("LEFT")
        .arg(0)
        .query(&mut c)
        .unwrap();
    assert_eq!(r, [Value::Nil, Value::Nil]);
    assert!(
        err(&mut c, &["EVAL", "return redis.call('blpop', 'x', 0)", "0"])
            .contains("This Redis command is not allowed from script")
    );
}

/// A client blocked in `args` on its own thread; returns its reply.
fn blocked(s: &TestServer, args: &'static [&'static str]) -> thread::JoinHandle<Value> {
    let mut c = s.conn();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    thread::spawn(move || q(&mut c, args))
}

/// Wait (bounded) until INFO says `n` clients are blocked.
fn wait_blocked(c: &mut redis::Connection, n: usize) {
    for _ in 0..500 {
        let info: String = q(c, &["INFO", "clients"]);
        if info.contains(&format!("blocked_clients:{n}\r")) {
            return;
        }
        thread::sleep(Duration::from_millis(10));
    }
    panic!("never saw {n} blocked clients");
}

#[test]
fn blocked_clients_are_served_first_come_first_served() {
    let s = TestServer::start();
    let mut c = s.conn();
    let mut handles = Vec::new();
    for i in 0..3 {
        handles.push(blocked(&s, &["BLPOP", "q", "0"]));
        wait_blocked(&mut c, i + 1);
    }
    let list: String = q(&mut c, &["CLIENT", "LIST"]);
    assert_eq!(list.matches("flags=b ").count(), 3, "{list}");
    // Only a client blocked with a timeout is in Redis's timeout table.
    let info: String = q(&mut c, &["INFO", "clients"]);
    assert!(info.contains("clients_in_timeout_table:0\r"), "{info}");
    let timed = blocked(&s, &["BLPOP", "t", "30"]);
    wait_blocked(&mut c, 4);
    let info: String = q(&mut c, &["INFO", "clients"]);
    assert!(info.contains("clients_in_timeout_table:1\r"), "{info}");
    let _: i64 = q(&mut c, &["RPUSH", "t", "v"]);
    assert_eq!(
        timed.join().unwrap(),
        Value::Array(vec![
            Value::BulkString(b"t".to_vec()),
            Value::BulkString(b"v".to_vec())
        ])
    );
    wait_blocked(&mut c, 3);
    let info: String = q(&mut c, &["INFO", "clients"]);
    assert!(info.contains("clients_in_timeout_table:0\r"), "{info}");
    // One push of three elements, in a MULTI with another key: served after EXEC, in order.
    let _: () = redis::pipe()
        .atomic()
        .cmd("RPUSH")
        .arg("q")
        .arg("1")
        .arg("2")
        .arg("3")
        .cmd("SET")
        .arg("other")
        .arg("x")
        .query(&mut c)
        .unwrap();
    let got: Vec<Value> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let value = |v: &Value| match v {
        Value::Array(a) => a[1].clone(),
        _ => Value::Nil,
    };
    assert_eq!(
        got.iter().map(value).collect::<Vec<_>>(),
        ["1", "2", "3"].map(|s| Value::BulkString(s.as_bytes().to_vec()))
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "q"]), 0);
}

#[test]
fn a_script_push_wakes_a_blocked_client_and_blmove_chains() {
    let s = TestServer::start();
    let mut c = s.conn();
    let a = blocked(&s, &["BLMOVE", "src", "mid", "RIGHT", "LEFT", "0"]);
    wait_blocked(&mut c, 1);
    let b = blocked(&s, &["BRPOPLPUSH", "mid", "dst", "0"]);
    wait_blocked(&mut c, 2);
    let _: Value = q(
        &mut c,
        &["EVAL", "redis.call('rpush', KEYS[1], 'v')", "1", "src"],
    );
    assert_eq!(a.join().unwrap(), Value::BulkString(b"v".to_vec()));
    assert_eq!(b.join().unwrap(), Value::BulkString(b"v".to_vec()));
    // The chain ran before the script's caller sent its next command.
    let dst: Vec<String> = q(&mut c, &["LRANGE", "dst", "0", "-1"]);
    assert_eq!(dst, ["v"]);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "src", "mid"]), 0);
}

#[test]
fn client_unblock_and_a_wrong_type_keeps_waiting() {
    let s = TestServer::start();
    let mut c = s.conn();
    let mut blocked_conn = s.conn();
    blocked_conn
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let id: i64 = q(&mut blocked_conn, &["CLIENT", "ID"]);
    let h = thread::spawn(move || {
        let first: Value = q(&mut blocked_conn, &["BZPOPMIN", "z", "0"]);
        let second = err(&mut blocked_conn, &["BLPOP", "l", "0"]);
        (first, second)
    });
    wait_blocked(&mut c, 1);
    // A list at the key a sorted-set waiter wants does not serve it.
    let _: () = q(&mut c, &["RPUSH", "z", "x"]);
    wait_blocked(&mut c, 1);
    assert_eq!(q::<i64>(&mut c, &["CLIENT", "UNBLOCK", &id.to_string()]), 1);
    wait_blocked(&mut c, 1);
    assert_eq!(
        q::<i64>(&mut c, &["CLIENT", "UNBLOCK", &id.to_string(), "ERROR"]),
        1
    );
    let (first, second) = h.join().unwrap();
    assert_eq!(first, Value::Nil);
    assert_eq!(second, "UNBLOCKED client unblocked via CLIENT UNBLOCK");
    assert_eq!(q::<i64>(&mut c, &["CLIENT", "UNBLOCK", &id.to_string()]), 0);
    assert_eq!(
        err(&mut c, &["CLIENT", "UNBLOCK", "1", "LATER"]),
        "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR"
    );
}

#[test]
fn a_disconnected_blocked_client_takes_nothing() {
    let s = TestServer::start();
    let mut c = s.conn();
    {
        let mut gone = Raw::new(&s);
        gone.send("BLPOP k 0\r\n");
        wait_blocked(&mut c, 1);
    }
    wait_blocked(&mut c, 0);
    let _: () = q(&mut c, &["RPUSH", "k", "kept"]);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["LRANGE", "k", "0", "-1"]),
        ["kept"]
    );
    // A blocked client's pipelined commands run after it is served.
    let mut p = Raw::new(&s);
    p.send("BLPOP k2 0\r\nPING\r\n");
    wait_blocked(&mut c, 1);
    assert_eq!(p.read_now(), "");
    let _: () = q(&mut c, &["RPUSH", "k2", "v"]);
    assert_eq!(
        p.read_until("PONG"),
        "*2\r\n$2\r\nk2\r\n$1\r\nv\r\n+PONG\r\n"
    );
}

/// A client released from a block whose buffered commands serve another blocked client
/// lets that client's reply go out before its own, as a connection whose read served one
/// does (`BehindServed` in `server::connection`; pp86). With one worker the server writes
/// in the order its tasks run, so when the releasing client's `:1` arrives the served
/// client's element is already there. Without the yield, the hundred subscribers woken by
/// the push's PUBLISH (queued before the served client) write between the two.
#[test]
fn a_released_client_that_serves_another_lets_its_reply_go_first() {
    let s = TestServer::with(|c| c.threads = 1);
    let mut c = s.conn();
    let _subscribers: Vec<Raw> = (0..100)
        .map(|_| {
            let mut r = Raw::new(&s);
            r.send("SUBSCRIBE ch\r\n");
            assert!(r.read_until(":1\r\n").ends_with("$2\r\nch\r\n:1\r\n"));
            r
        })
        .collect();
    let mut served = Raw::new(&s);
    served.send("BLPOP b 0\r\n");
    wait_blocked(&mut c, 1);
    let mut released = Raw::new(&s);
    released.send("BLPOP a 0\r\nRPUSH b v\r\n");
    wait_blocked(&mut c, 2);
    let mut pusher = Raw::new(&s);
    pusher.send("RPUSH a x\r\nPUBLISH ch m\r\n");
    assert_eq!(
        released.read_until(":1\r\n"),
        "*2\r\n$1\r\na\r\n$1\r\nx\r\n:1\r\n"
    );
    // Already there, not on its way.
    served.0.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 64];
    let n = served.0.peek(&mut buf).unwrap_or(0);
    assert_eq!(
        String::from_utf8_lossy(&buf[..n]),
        "*2\r\n$1\r\nb\r\n$1\r\nv\r\n",
        "the served client's reply was not written before the releasing client's"
    );
    served.0.set_nonblocking(false).unwrap();
    assert_eq!(pusher.read_until(":100\r\n"), ":1\r\n:100\r\n");
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "a", "b"]), 0);
}
