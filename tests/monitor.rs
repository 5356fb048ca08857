//! MONITOR through `redis-cli monitor` and raw sockets, against redis-server 7.0.15: the
//! same commands give the same lines (timestamps and client ports masked), the monitor
//! client itself behaves as Redis's does, ACL needs `monitor`, and a monitor that does not
//! read is disconnected instead of buffering without bound.

mod common;
mod redis_support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{reply_text, TestServer};
use redis_support::RedisServer;

/// A child process killed when the test ends, failed or not.
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `redis-cli -p port monitor`, its output lines arriving on a channel once it printed OK.
fn redis_cli_monitor(port: u16) -> (Reaped, mpsc::Receiver<String>) {
    let mut child = std::process::Command::new("redis-cli")
        .args(["-p", &port.to_string(), "monitor"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("redis-cli must be installed for this test");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let first = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("redis-cli monitor started");
    assert_eq!(first, "OK");
    (Reaped(child), rx)
}

/// Lines until (and without) the one showing `ECHO end-of-sequence`.
fn lines_until_end(rx: &mpsc::Receiver<String>) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut lines = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok(line) = rx.recv_timeout(left) else {
            panic!("no end marker within 20 s; lines so far: {lines:#?}");
        };
        if line.ends_with("\"ECHO\" \"end-of-sequence\"") {
            return lines;
        }
        lines.push(line);
    }
}

/// Timestamps and client ports masked: `TS [0 127.0.0.1:PORT] "set" "k" "v"`.
fn mask(line: &str) -> String {
    let (ts, rest) = line.split_once(' ').unwrap_or(("", line));
    let (secs, micros) = ts
        .split_once('.')
        .unwrap_or_else(|| panic!("no timestamp: {line}"));
    assert!(
        secs.bytes().all(|b| b.is_ascii_digit()) && secs.len() >= 10,
        "{line}"
    );
    assert!(
        micros.len() == 6 && micros.bytes().all(|b| b.is_ascii_digit()),
        "{line}"
    );
    // Mask the port of the client (in the brackets), not anything inside the arguments.
    if let Some(at) = rest.find("127.0.0.1:").filter(|at| *at < 6) {
        let end = at + "127.0.0.1:".len();
        let tail = &rest[end..];
        let digits = tail.bytes().take_while(|b| b.is_ascii_digit()).count();
        return format!("TS {}PORT{}", &rest[..end], &tail[digits..]);
    }
    format!("TS {rest}")
}

/// Raw bytes on a new connection; whatever comes back within the read timeouts.
fn raw(port: u16, bytes: &[u8]) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(1500)))
        .unwrap();
    s.write_all(bytes).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    loop {
        match s.read(&mut buf) {
            Ok(0) => {
                out.extend_from_slice(b"<closed>");
                break;
            }
            Ok(n) => {
                out.extend_from_slice(&buf[..n]);
                s.set_read_timeout(Some(Duration::from_millis(300)))
                    .unwrap();
            }
            Err(_) => break,
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The command sequence both servers get while `redis-cli monitor` watches.
fn run_sequence(port: u16) {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
    let mut con = client.get_connection().unwrap();
    let c = &mut con;
    // The replies (errors included) are part of the sequence but not compared: only the
    // MONITOR lines are.
    reply_text(c, &["SET", "k", "v"]);
    reply_text(c, &["GET", "k"]);
    reply_text(c, &["SET", "a b", "x\ny\"\u{1}\\\t\u{7f}é"]);
    // Administrative calls are never shown, per subcommand.
    reply_text(c, &["CONFIG", "GET", "maxmemory"]);
    reply_text(c, &["CONFIG", "HELP"]);
    reply_text(c, &["CLIENT", "LIST"]);
    reply_text(c, &["CLIENT", "SETNAME", "watched"]);
    reply_text(c, &["SLOWLOG", "GET"]);
    reply_text(c, &["LATENCY", "LATEST"]);
    reply_text(c, &["ACL", "SETUSER", "someone", "on"]);
    reply_text(c, &["INFO", "server"]);
    // Refused before running: not shown.
    reply_text(c, &["NOSUCHCOMMAND", "x"]);
    reply_text(c, &["GET"]);
    // Transactions: MULTI, the queued commands when EXEC runs them, then EXEC.
    reply_text(c, &["MULTI"]);
    reply_text(c, &["SET", "k", "1"]);
    reply_text(c, &["INCR", "k"]);
    reply_text(c, &["SELECT", "2"]);
    reply_text(c, &["EXEC"]);
    reply_text(c, &["SELECT", "0"]);
    reply_text(c, &["MULTI"]);
    reply_text(c, &["SET", "k", "1"]);
    reply_text(c, &["EXEC", "extra"]);
    reply_text(c, &["EXEC"]);
    // Scripts: EVAL first, then its calls as [db lua].
    reply_text(
        c,
        &[
            "EVAL",
            "redis.call('set','x','1'); redis.call('select','3'); return redis.call('get','x')",
            "0",
        ],
    );
    reply_text(c, &["EVAL", "return redis.call('nosuch')", "0"]);
    // Secrets redacted.
    reply_text(c, &["AUTH", "not-the-password"]);
    reply_text(c, &["AUTH", "someone", "secret"]);
    reply_text(c, &["AUTH", "a", "b", "c"]);
    reply_text(c, &["HELLO", "2", "AUTH", "default", "wrong"]);
    reply_text(
        c,
        &["HELLO", "2", "SETNAME", "n", "AUTH", "default", "wrong"],
    );
    reply_text(c, &["INCR", "counter"]);
    reply_text(c, &["BLPOP", "nolist", "0.01"]);
    reply_text(c, &["PING"]);
    reply_text(c, &["ECHO", "end-of-sequence"]);
}

/// The same commands give the same monitor lines from Tollgate as from redis-server.
#[test]
fn monitor_lines_match_redis() {
    let reference = RedisServer::start();
    let rport = reference.port;
    let server = TestServer::start();
    let tport = server.addr.port();
    let mut seen = Vec::new();
    for port in [rport, tport] {
        let (_cli, rx) = redis_cli_monitor(port);
        run_sequence(port);
        let lines: Vec<String> = lines_until_end(&rx).iter().map(|l| mask(l)).collect();
        seen.push(lines);
    }
    let (redis, ours) = (&seen[0], &seen[1]);
    // (The redis crate opens with CLIENT SETINFO, a Redis 7.2 subcommand that both refuse
    // as unknown: a refused call is never shown.)
    assert_eq!(redis, ours, "redis-server's lines, then Tollgate's");
    // Not vacuous: the lines the sequence must show are there.
    for want in [
        r#"TS [0 127.0.0.1:PORT] "SET" "a b" "x\ny\"\x01\\\t\x7f\xc3\xa9""#,
        r#"TS [0 127.0.0.1:PORT] "CONFIG" "HELP""#,
        r#"TS [2 127.0.0.1:PORT] "EXEC""#,
        r#"TS [3 lua] "get" "x""#,
        r#"TS [0 127.0.0.1:PORT] "AUTH" "(redacted)" "(redacted)""#,
        r#"TS [0 127.0.0.1:PORT] "HELLO" "2" "SETNAME" "n" "AUTH" "(redacted)" "(redacted)""#,
    ] {
        assert!(
            ours.iter().any(|l| l == want),
            "missing {want} in {ours:#?}"
        );
    }
    assert!(!ours
        .iter()
        .any(|l| l.contains("\"LIST\"") || l.contains("\"GET\" \"maxmemory\"")));
}

/// Mask `+<secs>.<micros> [0 127.0.0.1:<port>]` in a raw reply.
fn mask_raw(s: &str) -> String {
    s.split("\r\n")
        .map(|part| match part.strip_prefix('+') {
            Some(line) if line.contains(" [") && line.as_bytes()[0].is_ascii_digit() => {
                format!("+{}", mask(line))
            }
            _ => part.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\r\n")
}

/// The monitor client itself: its own commands are shown to it after their replies, keyspace
/// commands are refused, a second MONITOR is answered nothing, RESET ends monitoring, QUIT
/// closes; MONITOR inside MULTI fails at EXEC; a user needs the `monitor` permission.
#[test]
fn monitor_client_behaves_as_redis() {
    let reference = RedisServer::start();
    let rport = reference.port;
    let server = TestServer::start();
    let tport = server.addr.port();
    let cases: &[&[u8]] = &[
        b"MONITOR\r\nPING\r\nGET k\r\nMONITOR\r\nRESET\r\nGET k\r\n",
        b"MONITOR\r\nQUIT\r\nGET k\r\n",
        b"MULTI\r\nMONITOR\r\nEXEC\r\n",
        b"ACL SETUSER watcher on nopass +@all -monitor\r\nAUTH watcher x\r\nMONITOR\r\nACL SETUSER watcher +monitor\r\nMONITOR\r\n",
        b"MONITOR extra\r\n",
        // A container's call is judged by its subcommand's flags: MEMORY USAGE and OBJECT
        // ENCODING read, FUNCTION DELETE writes; SCRIPT EXISTS and CONFIG GET do neither.
        b"MONITOR\r\nMEMORY USAGE k\r\nOBJECT ENCODING k\r\nFUNCTION DELETE x\r\nSCRIPT EXISTS abc\r\nCONFIG GET nosuchparam\r\n",
    ];
    for case in cases {
        let theirs = mask_raw(&raw(rport, case));
        let ours = mask_raw(&raw(tport, case));
        assert_eq!(theirs, ours, "for {}", String::from_utf8_lossy(case));
    }
    let first = mask_raw(&raw(tport, cases[0]));
    assert!(first.contains("+TS [0 127.0.0.1:PORT] \"PING\""), "{first}");
    assert!(
        first.contains("-ERR Replica can't interact with the keyspace"),
        "{first}"
    );
}

/// A monitor that does not read is disconnected once its queue holds over 32 MiB, and the
/// server goes on serving.
#[test]
fn slow_monitor_is_disconnected() {
    let server = TestServer::start();
    let mut monitor = TcpStream::connect(server.addr).unwrap();
    monitor.write_all(b"MONITOR\r\n").unwrap();
    monitor
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut ok = [0u8; 5];
    monitor.read_exact(&mut ok).unwrap();
    assert_eq!(&ok, b"+OK\r\n");
    let mut con = server.conn();
    let value = "a".repeat(1024 * 1024);
    // 112 lines of 1 MiB each: more than the queue's bound, plus the batch being written
    // (at most one bound more), plus what the socket buffers take.
    for i in 0..112 {
        let _: () = redis::cmd("SET")
            .arg(format!("k{i}"))
            .arg(&value)
            .query(&mut con)
            .unwrap();
    }
    let n: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
    assert_eq!(n, 112);
    // Now read: some lines, then the end of the connection (bounded: 60 s).
    monitor
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut got = 0usize;
    let mut buf = vec![0u8; 1 << 20];
    // Only the end of the connection (EOF or a reset) leaves this loop.
    loop {
        assert!(
            Instant::now() < deadline,
            "the slow monitor was never disconnected"
        );
        match monitor.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("reading the monitor: {e}"),
        }
    }
    assert!(
        got < 112 * 1024 * 1024,
        "all {got} bytes arrived: nothing was bounded"
    );
    let clients: String = redis::cmd("CLIENT").arg("LIST").query(&mut con).unwrap();
    assert!(!clients.contains("flags=O"), "{clients}");
    let pong: String = redis::cmd("PING").query(&mut con).unwrap();
    assert_eq!(pong, "PONG");
}
