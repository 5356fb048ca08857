//! CONFIG through a real client (the registry's error texts are also diffed against
//! redis-server in tests/compat/config.txt), and the persistence commands of a node that
//! keeps its data in memory only.

mod common;
mod redis_support;

use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use common::{err, free_port, q, TestServer};
use redis::Value;
use redis_support::RedisServer;

#[test]
fn every_policy_is_accepted_and_reported_by_info() {
    let s = TestServer::start();
    let mut c = s.conn();
    for policy in [
        "noeviction",
        "allkeys-lru",
        "volatile-lru",
        "allkeys-lfu",
        "volatile-lfu",
        "allkeys-random",
        "volatile-random",
        "volatile-ttl",
    ] {
        q::<()>(&mut c, &["CONFIG", "SET", "maxmemory-policy", policy]);
        let got: Vec<String> = q(&mut c, &["CONFIG", "GET", "maxmemory-policy"]);
        assert_eq!(got[1], policy);
        let info: String = q(&mut c, &["INFO", "memory"]);
        assert!(
            info.contains(&format!("maxmemory_policy:{policy}\r\n")),
            "{info}"
        );
    }
    q::<()>(
        &mut c,
        &[
            "CONFIG",
            "SET",
            "maxmemory",
            "100mb",
            "maxmemory-samples",
            "10",
        ],
    );
    let info: String = q(&mut c, &["INFO", "memory"]);
    assert!(info.contains("maxmemory:104857600\r\n"), "{info}");
    assert!(info.contains("maxmemory_human:100.00M\r\n"), "{info}");
    for field in [
        "used_memory:",
        "used_memory_human:",
        "used_memory_rss:",
        "mem_allocator:",
    ] {
        assert!(info.contains(field), "{field}");
    }
    let stats: String = q(&mut c, &["INFO", "stats"]);
    assert!(stats.contains("evicted_keys:0\r\n"), "{stats}");
    assert_eq!(
        err(&mut c, &["CONFIG", "SET", "maxmemory-policy", "lru"]),
        "ERR CONFIG SET failed (possibly related to argument 'maxmemory-policy') - argument(s) must be one of the following: volatile-lru, volatile-lfu, volatile-random, volatile-ttl, allkeys-lru, allkeys-lfu, allkeys-random, noeviction"
    );
}

#[test]
fn config_set_is_all_or_nothing_and_unknown_names_are_errors() {
    let s = TestServer::start();
    let mut c = s.conn();
    assert_eq!(
        err(&mut c, &["CONFIG", "SET", "no-such-param", "1"]),
        "ERR Unknown option or number of arguments for CONFIG SET - 'no-such-param'"
    );
    // The good first pair is not applied when the second is bad.
    let e = err(&mut c, &["CONFIG", "SET", "maxmemory", "1mb", "hz", "x"]);
    assert_eq!(e, "ERR CONFIG SET failed (possibly related to argument 'hz') - argument couldn't be parsed into an integer");
    let got: Vec<String> = q(&mut c, &["CONFIG", "GET", "maxmemory"]);
    assert_eq!(got[1], "0");
    // Parameters that tune what Tollgate does not have are stored, with Redis's checks.
    q::<()>(
        &mut c,
        &[
            "CONFIG",
            "SET",
            "zset-max-ziplist-entries",
            "0",
            "repl-ping-replica-period",
            "3600",
            "activerehashing",
            "no",
        ],
    );
    let got: Vec<String> = q(
        &mut c,
        &[
            "CONFIG",
            "GET",
            "zset-max-listpack-entries",
            "repl-ping-slave-period",
            "activerehashing",
        ],
    );
    assert_eq!(
        got,
        [
            "zset-max-listpack-entries",
            "0",
            "repl-ping-slave-period",
            "3600",
            "activerehashing",
            "no"
        ]
    );
    // Immutable ones say so.
    assert_eq!(
        err(&mut c, &["CONFIG", "SET", "bind", "0.0.0.0"]),
        "ERR CONFIG SET failed (possibly related to argument 'bind') - can't set immutable config"
    );
    // So do Redis's start-up settings Tollgate has no parameter for (redis-server 7.0.15's
    // texts), the first refusal in argument order winning.
    assert_eq!(
        err(&mut c, &["CONFIG", "SET", "daemonize", "yes"]),
        "ERR CONFIG SET failed (possibly related to argument 'daemonize') - can't set immutable config"
    );
    assert_eq!(
        err(&mut c, &["CONFIG", "SET", "supervised", "no", "nosuch", "1"]),
        "ERR CONFIG SET failed (possibly related to argument 'supervised') - can't set immutable config"
    );
    assert_eq!(
        err(
            &mut c,
            &["CONFIG", "SET", "nosuch", "1", "daemonize", "yes"]
        ),
        "ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'"
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["CONFIG", "GET", "daemonize"]),
        Vec::<String>::new()
    );
    assert_eq!(
        err(&mut c, &["CONFIG", "REWRITE"]),
        "ERR The server is running without a config file"
    );
}

#[test]
fn settings_that_would_weaken_a_guarantee_are_refused() {
    let s = TestServer::start();
    let mut c = s.conn();
    let cases = [
        (
            &["appendonly", "yes"][..],
            "appendonly cannot be turned on while it runs",
        ),
        (&["appendfsync", "always"][..], "no file to fsync"),
        (&["save", "3600 1"][..], "nothing to snapshot"),
        (
            &["rdb-key-save-delay", "10"][..],
            "writes no snapshot to delay",
        ),
        (&["notify-keyspace-events", "KEm"][..], "key-miss events"),
        (
            &["client-output-buffer-limit", "normal 1mb 0 0"][..],
            "pubsub clients only",
        ),
        (
            &["maxmemory-clients", "10%"][..],
            "client eviction is not implemented",
        ),
    ];
    for (args, why) in cases {
        let mut cmd = vec!["CONFIG", "SET"];
        cmd.extend_from_slice(args);
        let e = err(&mut c, &cmd);
        assert!(
            e.starts_with(&format!(
                "ERR CONFIG SET failed (possibly related to argument '{}') - ",
                args[0]
            )) && e.contains(why),
            "{e}"
        );
    }
    // What the node does is accepted.
    q::<()>(
        &mut c,
        &[
            "CONFIG",
            "SET",
            "appendonly",
            "no",
            "save",
            "",
            "min-replicas-to-write",
            "0",
        ],
    );
    let got: Vec<String> = q(&mut c, &["CONFIG", "GET", "appendonly", "save"]);
    assert_eq!(got, ["appendonly", "no", "save", ""]);
}

#[test]
fn maxclients_changes_take_effect_at_once() {
    let s = TestServer::start();
    let mut c = s.conn();
    q::<()>(&mut c, &["CONFIG", "SET", "maxclients", "2"]);
    let _second = s.conn();
    let (out, _) = s.closes_after(b"PING\r\n");
    assert_eq!(out, "-ERR max number of clients reached\r\n");
    q::<()>(&mut c, &["CONFIG", "SET", "maxclients", "10"]);
    let mut third = s.conn();
    assert_eq!(q::<String>(&mut third, &["PING"]), "PONG");
}

#[test]
fn an_in_memory_node_does_not_pretend_to_save() {
    let s = TestServer::start();
    let mut c = s.conn();
    q::<()>(&mut c, &["SET", "k", "v"]);
    let nothing = "ERR nothing to save to: this node keeps its data in memory only";
    for cmd in [
        &["SAVE"][..],
        &["BGSAVE"],
        &["BGSAVE", "SCHEDULE"],
        &["BGREWRITEAOF"],
        &["SHUTDOWN", "SAVE"],
    ] {
        let e = err(&mut c, cmd);
        assert!(e.starts_with(nothing), "{cmd:?}: {e}");
    }
    assert_eq!(q::<i64>(&mut c, &["LASTSAVE"]), 0, "no save ever happened");
    let info: String = q(&mut c, &["INFO", "persistence"]);
    for line in [
        "aof_enabled:0",
        "rdb_last_save_time:0",
        "tollgate_storage:memory",
    ] {
        assert!(info.contains(line), "{line} in {info}");
    }
    assert!(err(&mut c, &["RAFT.ADDNODE", "2", "127.0.0.1:1"]).contains("in memory only"));
    assert_eq!(err(&mut c, &["BGSAVE", "NOW"]), "ERR syntax error");
    assert_eq!(
        err(&mut c, &["SHUTDOWN", "SAVE", "NOSAVE"]),
        "ERR syntax error"
    );
    assert_eq!(err(&mut c, &["SHUTDOWN", "LATER"]), "ERR syntax error");
    assert_eq!(
        err(&mut c, &["SHUTDOWN", "ABORT"]),
        "ERR No shutdown in progress."
    );
    // After all that the server still runs and holds the data.
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "v");
    // SHUTDOWN NOSAVE stops it.
    let r = redis::cmd("SHUTDOWN").arg("NOSAVE").query::<Value>(&mut c);
    assert!(r.is_err(), "the connection closes: {r:?}");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while std::net::TcpStream::connect(s.addr).is_ok() {
        assert!(std::time::Instant::now() < deadline, "still listening");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `min-replicas-to-write` on a standalone server, which has no replicas: every write is
/// refused with Redis's NOREPLICAS text (a Redis primary without enough replicas does
/// the same), reads are served, scripts follow Redis's rules (declared writes refused up
/// front, an undeclared script's first write refused), a transaction with a write is
/// refused whole; `min-replicas-max-lag 0` or `min-replicas-to-write 0` turns it off.
#[test]
fn min_replicas_to_write_refuses_writes_without_replicas() {
    const NOREPLICAS: &str = "NOREPLICAS Not enough good replicas to write.";
    let s = TestServer::start();
    let mut c = s.conn();
    q::<()>(&mut c, &["SET", "x", "some value"]);
    q::<()>(&mut c, &["CONFIG", "SET", "min-replicas-to-write", "1"]);
    let got: Vec<String> = q(&mut c, &["CONFIG", "GET", "min-replicas-to-write"]);
    assert_eq!(got, ["min-replicas-to-write", "1"]);
    assert_eq!(err(&mut c, &["SET", "x", "1"]), NOREPLICAS);
    assert_eq!(err(&mut c, &["INCR", "n"]), NOREPLICAS);
    assert_eq!(err(&mut c, &["FUNCTION", "FLUSH"]), NOREPLICAS);
    assert_eq!(q::<String>(&mut c, &["GET", "x"]), "some value");
    assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
    // Scripts.
    let get = "return redis.call('get', KEYS[1])";
    assert_eq!(q::<String>(&mut c, &["EVAL", get, "1", "x"]), "some value");
    let ro = "#!lua flags=no-writes\nreturn redis.call('get', KEYS[1])";
    assert_eq!(q::<String>(&mut c, &["EVAL", ro, "1", "x"]), "some value");
    let declared = "#!lua\nreturn redis.call('get', KEYS[1])";
    assert_eq!(err(&mut c, &["EVAL", declared, "1", "x"]), NOREPLICAS);
    let set = "return redis.call('set', KEYS[1], 1)";
    assert!(err(&mut c, &["EVAL", set, "1", "x"]).starts_with(NOREPLICAS));
    // A write queued in a transaction: refused as it is queued, and the transaction is
    // discarded at EXEC, as in Redis (tests/parity.rs compares this with redis-server).
    q::<()>(&mut c, &["MULTI"]);
    q::<()>(&mut c, &["GET", "x"]);
    assert_eq!(err(&mut c, &["INCR", "n"]), NOREPLICAS);
    assert_eq!(
        err(&mut c, &["EXEC"]),
        "EXECABORT Transaction discarded because of previous errors."
    );
    q::<()>(&mut c, &["MULTI"]);
    q::<()>(&mut c, &["GET", "x"]);
    let only_reads: Vec<String> = q(&mut c, &["EXEC"]);
    assert_eq!(only_reads, ["some value"]);
    // A lag of 0 turns the check off, as in Redis.
    q::<()>(&mut c, &["CONFIG", "SET", "min-replicas-max-lag", "0"]);
    q::<()>(&mut c, &["SET", "x", "2"]);
    q::<()>(&mut c, &["CONFIG", "SET", "min-replicas-max-lag", "10"]);
    assert_eq!(err(&mut c, &["SET", "x", "3"]), NOREPLICAS);
    q::<()>(&mut c, &["CONFIG", "SET", "min-replicas-to-write", "0"]);
    q::<()>(&mut c, &["SET", "x", "4"]);
    assert_eq!(q::<String>(&mut c, &["GET", "x"]), "4");
    let lag: Vec<String> = q(&mut c, &["CONFIG", "GET", "min-slaves-max-lag"]);
    assert_eq!(lag, ["min-slaves-max-lag", "10"]);
}

/// CONFIG SET port `port`: "OK" or the error text.
fn set_port(c: &mut redis::Connection, port: u16) -> String {
    let port = port.to_string();
    q::<String>(c, &["CONFIG", "SET", "port", port.as_str()])
}

/// Whether a new connection to `port` is accepted.
fn accepts(port: u16) -> bool {
    TcpStream::connect(("127.0.0.1", port)).is_ok()
}

/// The replies of `CONFIG SET port` that do not depend on which ports the server uses:
/// range and parse errors, a port in use (a listener the test holds), the same port, and
/// a failed multi-parameter set that must leave `maxmemory` as it was.
fn port_refusals(c: &mut redis::Connection, current: u16) -> Vec<String> {
    let busy = TcpListener::bind("127.0.0.1:0").unwrap();
    let busy = busy.local_addr().unwrap().port().to_string();
    let current = current.to_string();
    let mut out = Vec::new();
    for args in [
        vec!["CONFIG", "SET", "port", "70000"],
        vec!["CONFIG", "SET", "port", "-1"],
        vec!["CONFIG", "SET", "port", "abc"],
        vec!["CONFIG", "SET", "port", busy.as_str()],
        vec![
            "CONFIG",
            "SET",
            "maxmemory",
            "1000000",
            "port",
            busy.as_str(),
        ],
        vec!["CONFIG", "SET", "port", current.as_str()],
    ] {
        out.push(common::reply_text(c, &args));
    }
    for name in ["maxmemory", "port"] {
        let got: Vec<String> = q(c, &["CONFIG", "GET", name]);
        out.extend(got);
    }
    out.push(q::<String>(c, &["PING"]));
    out
}

#[test]
fn config_set_port_moves_the_listener_as_redis_does() {
    let s = TestServer::start();
    let redis = RedisServer::start();
    let old = s.addr.port();
    let mut c = s.conn();
    let mut r = redis.conn();
    // Errors, a port in use and a failed set change nothing, with Redis's replies.
    let want = port_refusals(&mut r, redis.port);
    let got = port_refusals(&mut c, old);
    let want: Vec<String> = want
        .into_iter()
        .map(|l| l.replace(&redis.port.to_string(), &old.to_string()))
        .collect();
    assert_eq!(got, want);
    assert!(got[3].contains("Unable to listen on this port"), "{got:?}");
    assert!(accepts(old));

    // A free port: bound, the old one closed, this connection kept.
    let new = free_port();
    assert_eq!(set_port(&mut c, new), "OK");
    assert!(!accepts(old), "the old port still accepts connections");
    assert!(accepts(new));
    assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
    let got: Vec<String> = q(&mut c, &["CONFIG", "GET", "port"]);
    assert_eq!(got, ["port".to_string(), new.to_string()]);
    let info: String = q(&mut c, &["INFO", "server"]);
    assert!(info.contains(&format!("tcp_port:{new}\r\n")), "{info}");
    let mut fresh = redis::Client::open(format!("redis://127.0.0.1:{new}/"))
        .unwrap()
        .get_connection()
        .unwrap();
    assert_eq!(q::<String>(&mut fresh, &["SET", "k", "v"]), "OK");
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "v");

    // Port 0 closes the plaintext port, as in Redis; connections stay, and the port can
    // be opened again from one of them.
    assert_eq!(set_port(&mut c, 0), "OK");
    assert_eq!(set_port(&mut r, 0), "OK");
    assert!(!accepts(new));
    assert!(!accepts(redis.port));
    assert_eq!(q::<String>(&mut fresh, &["GET", "k"]), "v");
    assert_eq!(q::<String>(&mut r, &["PING"]), "PONG");
    let again = free_port();
    assert_eq!(set_port(&mut c, again), "OK");
    assert!(accepts(again));
}
