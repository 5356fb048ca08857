//! Wire-level behaviour: RESP3, pipelining, inline commands, malformed input and limits.

mod common;

use common::{err, q, TestServer};
use redis::Value;

#[test]
fn pipelining_ten_thousand_commands() {
    let s = TestServer::start();
    let mut c = s.conn();
    let mut pipe = redis::pipe();
    for i in 0..10_000 {
        pipe.cmd("INCR").arg("counter");
        if i % 1000 == 0 {
            pipe.cmd("PING");
        }
    }
    let replies: Vec<Value> = pipe.query(&mut c).unwrap();
    assert_eq!(replies.len(), 10_010);
    let ints: Vec<i64> = replies
        .iter()
        .filter_map(|v| match v {
            Value::Int(n) => Some(*n),
            _ => None,
        })
        .collect();
    assert_eq!(ints, (1..=10_000).collect::<Vec<_>>());
}

#[test]
fn each_read_lands_at_the_front_of_the_query_buffer() {
    // After a read's requests ran, what is left of it (a partial request, or nothing) moves
    // to the front of the query buffer, as Redis's `sdsrange` does: the next read lands
    // where the last one did (issue 21). CLIENT INFO's `rbs` is the room the buffer had
    // from where the read landed. The buffer is lazy (an idle connection holds no 16 KiB
    // one): it holds what its largest read needed, one pipeline of 100 PINGs (1,400 bytes),
    // pipeline after pipeline; reads that walked the buffer would have grown it.
    let s = TestServer::start();
    let mut c = s.conn();
    for _ in 0..20 {
        let mut pipe = redis::pipe();
        for _ in 0..100 {
            pipe.cmd("PING");
        }
        let replies: Vec<String> = pipe.query(&mut c).unwrap();
        assert_eq!(replies.len(), 100);
    }
    let info: String = q(&mut c, &["CLIENT", "INFO"]);
    assert!(info.contains(" rbs=1400 "), "{info}");
    // A request split over reads: its first part moves to the front, the rest follows it.
    use std::io::{Read, Write};
    let mut raw = std::net::TcpStream::connect(s.addr).unwrap();
    raw.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    raw.write_all(b"*2\r\n$4\r\nECHO\r\n$5\r\nhel").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(50));
    raw.write_all(b"lo\r\nPING\r\n").unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 64];
    while got.len() < b"$5\r\nhello\r\n+PONG\r\n".len() {
        let n = raw.read(&mut buf).unwrap();
        assert!(n > 0, "closed after {:?}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    assert_eq!(got, b"$5\r\nhello\r\n+PONG\r\n");
}

#[test]
fn a_large_request_or_reply_leaves_no_large_buffer_behind() {
    // Once a request over 64 KiB ran and its reply was written, the connection's buffers
    // shrink back (Redis trims an idle client's query buffer and frees written reply
    // chunks); before, each kept up to 1 MiB until the connection closed.
    let s = TestServer::start();
    let mut a = s.conn();
    let mut b = s.conn();
    let id: i64 = q(&mut a, &["CLIENT", "ID"]);
    let big = "x".repeat(500_000);
    q::<()>(&mut a, &["SET", "big", &big]);
    assert_eq!(q::<String>(&mut a, &["GET", "big"]).len(), 500_000);
    assert_eq!(q::<String>(&mut a, &["PING"]), "PONG");
    let list: String = q(&mut b, &["CLIENT", "LIST", "ID", &id.to_string()]);
    let field = |name: &str| -> usize {
        let tag = format!(" {name}=");
        let at = list.find(&tag).unwrap_or_else(|| panic!("{name}: {list}")) + tag.len();
        let end = list[at..].find(' ').map_or(list.len(), |e| at + e);
        list[at..end].parse().unwrap()
    };
    assert!(field("rbs") <= 64 * 1024, "{list}");
    assert!(field("qbuf-free") <= 64 * 1024, "{list}");
    let info: String = q(&mut b, &["INFO", "clients"]);
    let out: usize = info
        .lines()
        .find_map(|l| l.strip_prefix("client_recent_max_output_buffer:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(out <= 64 * 1024, "{info}");
}

#[test]
fn resp3_replies_use_resp3_types() {
    let s = TestServer::start();
    let mut c = s.conn3();
    q::<()>(&mut c, &["SET", "k", "v"]);
    assert_eq!(q::<Value>(&mut c, &["GET", "nope"]), Value::Nil);
    let raw = s.raw(b"HELLO 3\r\nGET nope\r\nCONFIG GET port\r\n");
    assert!(raw.starts_with("%7\r\n"), "{raw}");
    assert!(raw.contains("\r\n_\r\n"), "{raw}");
    assert!(raw.contains("%1\r\n$4\r\nport\r\n"), "{raw}");
    let raw2 = s.raw(b"GET nope\r\n");
    assert_eq!(raw2, "$-1\r\n");
}

#[test]
fn inline_commands_work_like_telnet() {
    let s = TestServer::start();
    assert_eq!(
        s.raw(b"SET greeting \"hello world\"\r\nGET greeting\r\n"),
        "+OK\r\n$11\r\nhello world\r\n"
    );
    assert_eq!(s.raw(b"PING\n"), "+PONG\r\n");
}

#[test]
fn malformed_input_gets_protocol_error_and_close() {
    let s = TestServer::start();
    let (out, closed) = s.closes_after(b"*1\r\n+PING\r\n");
    assert_eq!(out, "-ERR Protocol error: expected '$', got '+'\r\n");
    assert!(closed);
    let (out, closed) = s.closes_after(b"*2\r\n$600000000\r\n");
    assert_eq!(out, "-ERR Protocol error: invalid bulk length\r\n");
    assert!(closed);
    let (out, closed) = s.closes_after(b"*10000000\r\n");
    assert_eq!(out, "-ERR Protocol error: invalid multibulk length\r\n");
    assert!(closed);
    let (out, closed) = s.closes_after(b"*1\r\n$x\r\n");
    assert_eq!(out, "-ERR Protocol error: invalid bulk length\r\n");
    assert!(closed);
    let (out, closed) = s.closes_after(b"SET a \"unterminated\r\n");
    assert_eq!(out, "-ERR Protocol error: unbalanced quotes in request\r\n");
    assert!(closed);
    // Replies before the bad request are still delivered.
    let (out, _) = s.closes_after(b"PING\r\n*1\r\n:1\r\n");
    assert!(out.starts_with("+PONG\r\n-ERR Protocol error"), "{out}");
    // Other clients are not disturbed.
    let mut c = s.conn();
    assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
    // Counts too long for an i64 are refused, not wrapped into an empty request.
    let (out, closed) = s.closes_after(b"*9223372036854775808\r\n");
    assert_eq!(out, "-ERR Protocol error: invalid multibulk length\r\n");
    assert!(closed);
}

#[test]
fn nul_bytes_and_line_breaks_cannot_break_the_server_or_the_stream() {
    let s = TestServer::start();
    // Like Redis (C strings), a NUL ends an inline line: nothing to run, no reply; the
    // connection goes on. (This used to spin the server until it ran out of memory.)
    assert_eq!(s.raw(b"\x00\r\nPING\r\n"), "+PONG\r\n");
    assert_eq!(
        s.raw(b"ECHO a\x00b\r\nECHO \x00\r\nPING\r\n"),
        "$1\r\na\r\n-ERR wrong number of arguments for 'echo' command\r\n+PONG\r\n"
    );
    // An error quoting user input with CR/LF stays one line.
    let mut c = s.conn();
    let e = err(&mut c, &["FUNCTION", "LOAD", "a\nb", "x"]);
    assert!(e.starts_with("ERR ") && !e.contains('\n'), "{e:?}");
    let e = err(&mut c, &["EXPIRE", "k", "10", "a\r\nb"]);
    assert_eq!(e, "ERR Unsupported option a  b");
    assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
    // Floats stop at nothing: a NUL inside is not a number.
    q::<()>(&mut c, &["SET", "f", "1\u{0}"]);
    assert_eq!(
        err(&mut c, &["INCRBYFLOAT", "f", "1"]),
        "ERR value is not a valid float"
    );
    assert_eq!(
        err(&mut c, &["INCRBYFLOAT", "g", "1\u{0}2"]),
        "ERR value is not a valid float"
    );
}

#[test]
fn oversized_inline_request_is_refused() {
    let s = TestServer::start();
    let mut line = vec![b'a'; 70 * 1024];
    line.extend_from_slice(b"\r\n");
    let (out, closed) = s.closes_after(&line);
    assert_eq!(out, "-ERR Protocol error: too big inline request\r\n");
    assert!(closed);
}

#[test]
fn query_buffer_limit_closes_the_client() {
    let s = TestServer::with(|c| {
        c.client_query_buffer_limit = 1024 * 1024;
        c.proto_max_bulk_len = 8 * 1024 * 1024;
    });
    // A 4 MB bulk is below proto-max-bulk-len but above the query buffer limit.
    let mut req = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$4194304\r\n".to_vec();
    req.extend(std::iter::repeat_n(b'x', 2 * 1024 * 1024));
    let (_, closed) = s.closes_after(&req);
    assert!(closed);
    let mut c = s.conn();
    assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
}

#[test]
fn binary_safe_keys_and_values() {
    let s = TestServer::start();
    let mut c = s.conn();
    let key = b"k\0\r\n\xff".to_vec();
    let val = (0..=255u8).collect::<Vec<u8>>();
    let _: () = redis::cmd("SET").arg(&key).arg(&val).query(&mut c).unwrap();
    let got: Vec<u8> = redis::cmd("GET").arg(&key).query(&mut c).unwrap();
    assert_eq!(got, val);
}

#[test]
fn auth_gates_commands_and_limits_input_before_auth() {
    let s = TestServer::with(|c| c.requirepass = Some("s3cret".into()));
    let mut c = s.conn();
    assert_eq!(
        err(&mut c, &["GET", "k"]),
        "NOAUTH Authentication required."
    );
    assert_eq!(
        err(&mut c, &["AUTH", "wrong"]),
        "WRONGPASS invalid username-password pair or user is disabled."
    );
    assert_eq!(q::<String>(&mut c, &["AUTH", "s3cret"]), "OK");
    assert_eq!(q::<String>(&mut c, &["SET", "k", "v"]), "OK");
    let mut c2 = redis::Client::open(format!("redis://:s3cret@{}/", s.addr))
        .unwrap()
        .get_connection()
        .unwrap();
    assert_eq!(q::<String>(&mut c2, &["GET", "k"]), "v");
    // Before AUTH, a large multibulk is refused outright.
    let (out, closed) = s.closes_after(b"*20\r\n");
    assert_eq!(out, "-ERR Protocol error: invalid multibulk length\r\n");
    assert!(closed);
    let raw = s.raw(b"HELLO 3 AUTH default s3cret\r\nGET k\r\n");
    assert!(raw.ends_with("$1\r\nv\r\n"), "{raw}");
}

#[test]
fn client_commands() {
    let s = TestServer::start();
    let mut c = s.conn();
    let id: i64 = q(&mut c, &["CLIENT", "ID"]);
    assert!(id > 0);
    q::<()>(&mut c, &["CLIENT", "SETNAME", "worker-1"]);
    assert_eq!(q::<String>(&mut c, &["CLIENT", "GETNAME"]), "worker-1");
    assert_eq!(
        err(&mut c, &["CLIENT", "SETNAME", "a b"]),
        "ERR Client names cannot contain spaces, newlines or special characters."
    );
    let list: String = q(&mut c, &["CLIENT", "LIST"]);
    assert!(list.contains("name=worker-1"), "{list}");
    let mut victim = s.conn();
    let vid: i64 = q(&mut victim, &["CLIENT", "ID"]);
    assert_eq!(
        q::<i64>(&mut c, &["CLIENT", "KILL", "ID", &vid.to_string()]),
        1
    );
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert!(redis::cmd("PING").query::<String>(&mut victim).is_err());
    assert_eq!(
        err(&mut c, &["CLIENT", "NOPE"]),
        "ERR unknown subcommand 'NOPE'. Try CLIENT HELP."
    );
}

#[test]
fn maxclients_refuses_extra_connections() {
    let s = TestServer::with(|c| c.maxclients = 2);
    let _a = s.conn();
    let _b = s.conn();
    let (out, _) = s.closes_after(b"PING\r\n");
    assert_eq!(out, "-ERR max number of clients reached\r\n");
}

#[test]
fn info_config_command() {
    let s = TestServer::start();
    let mut c = s.conn();
    q::<()>(&mut c, &["SET", "k", "v"]);
    let info: String = q(&mut c, &["INFO"]);
    for section in [
        "# Server",
        "# Clients",
        "# Memory",
        "# Stats",
        "# Keyspace",
        "db0:keys=1",
    ] {
        assert!(info.contains(section), "{section} missing");
    }
    let cfg: Vec<String> = q(&mut c, &["CONFIG", "GET", "busy-reply-threshold"]);
    assert_eq!(cfg, vec!["busy-reply-threshold".to_string(), "5000".into()]);
    q::<()>(&mut c, &["CONFIG", "SET", "busy-reply-threshold", "100"]);
    let cfg: Vec<String> = q(&mut c, &["CONFIG", "GET", "busy-*"]);
    assert_eq!(cfg[1], "100");
    assert_eq!(
        err(&mut c, &["CONFIG", "SET", "nope", "1"]),
        "ERR Unknown option or number of arguments for CONFIG SET - 'nope'"
    );
    assert!(q::<i64>(&mut c, &["COMMAND", "COUNT"]) > 50);
    let info: Vec<Value> = q(&mut c, &["COMMAND", "INFO", "get"]);
    assert_eq!(info.len(), 1);
    let keys: Vec<String> = q(&mut c, &["COMMAND", "GETKEYS", "MSET", "a", "1", "b", "2"]);
    assert_eq!(keys, vec!["a".to_string(), "b".into()]);
    // Limiter keys, including LIMIT.ALL's, which follow its rule grammar.
    let keys: Vec<String> = q(
        &mut c,
        &["COMMAND", "GETKEYS", "CL.THROTTLE", "u", "1", "2", "3"],
    );
    assert_eq!(keys, vec!["u".to_string()]);
    let all = [
        "COMMAND",
        "GETKEYS",
        "LIMIT.ALL",
        "COST",
        "2",
        "FIXED",
        "a",
        "10",
        "1s",
        "TOKEN",
        "b",
        "5",
        "1",
        "1s",
        "COST",
        "1",
        "SLIDING",
        "c",
        "3",
        "1m",
        "PRECISION",
        "4",
    ];
    let keys: Vec<String> = q(&mut c, &all);
    assert_eq!(keys, vec!["a".to_string(), "b".into(), "c".into()]);
    assert_eq!(
        err(
            &mut c,
            &[
                "COMMAND",
                "GETKEYS",
                "LIMIT.ALL",
                "FIXED",
                "a",
                "10",
                "1s",
                "BOGUS",
                "x"
            ]
        ),
        "ERR Invalid arguments specified for command"
    );
    let info: Vec<Value> = q(&mut c, &["COMMAND", "INFO", "limit.all"]);
    assert!(format!("{info:?}").contains("movablekeys"), "{info:?}");
}
