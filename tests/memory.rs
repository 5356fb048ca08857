//! `maxmemory`, eviction, memory handed back to the OS, and the open-files limit, on real
//! server processes: the built `tollgate` binary (its counting allocator is what
//! `maxmemory` compares against), RSS read from `/proc/<pid>/status`, load written through
//! a real client in bounded, pipelined loops. The tests run one at a time: each starts its
//! own server, and they share the machine's cores and memory.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use redis::{Connection, ConnectionLike, Value};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

const MB: u64 = 1024 * 1024;
/// The limit the load tests run under.
const LIMIT: u64 = 64 * MB;
/// The value size of the load.
const VALUE: usize = 10 * 1024;
/// Commands per pipeline.
const PIPE: usize = 64;

/// A `tollgate` process on a free port; killed when dropped.
struct Server {
    child: Child,
    port: u16,
    log: tempfile::NamedTempFile,
}

impl Server {
    fn start(args: &[&str]) -> Server {
        Server::start_with(Command::new(env!("CARGO_BIN_EXE_tollgate")), args)
    }

    /// Start `cmd` (the binary, or a wrapper such as `prlimit` running it) with `args`.
    fn start_with(mut cmd: Command, args: &[&str]) -> Server {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let log = tempfile::NamedTempFile::new().unwrap();
        // The log goes to stdout; both streams into one file.
        let append = || {
            std::fs::OpenOptions::new()
                .append(true)
                .open(log.path())
                .unwrap()
        };
        cmd.args(["--bind", "127.0.0.1", "--port", &port.to_string()])
            .args(["--log", "info"])
            .args(args)
            .stdout(append())
            .stderr(append());
        let child = cmd.spawn().expect("spawn tollgate");
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "tollgate did not listen");
            thread::sleep(Duration::from_millis(20));
        }
        Server { child, port, log }
    }

    fn conn(&self) -> Connection {
        let c = redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))
            .unwrap()
            .get_connection_with_timeout(Duration::from_secs(5))
            .unwrap();
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        c
    }

    /// Resident set size in bytes.
    fn rss(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let kb: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap();
        kb * 1024
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(self.log.path()).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn q<T: redis::FromRedisValue>(c: &mut Connection, args: &[&str]) -> T {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c)
        .unwrap_or_else(|e| panic!("{:?}: {e}", &args[..args.len().min(2)]))
}

fn err(c: &mut Connection, args: &[&str]) -> String {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    match cmd.query::<Value>(c) {
        Ok(v) => panic!("{:?} should fail, got {v:?}", &args[..args.len().min(2)]),
        Err(e) => match (e.code(), e.detail()) {
            (Some(code), Some(detail)) => format!("{code} {detail}"),
            _ => e.to_string(),
        },
    }
}

/// A field of INFO.
fn info(c: &mut Connection, field: &str) -> String {
    let text: String = q(c, &["INFO", "everything"]);
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("INFO has no {field}"))
        .trim()
        .to_string()
}

/// What a load run saw.
#[derive(Debug, Default)]
struct Load {
    ok: u64,
    oom: u64,
    max_rss: u64,
}

/// SET `total` bytes of `VALUE`-byte values under fresh keys (with a TTL if `ttl`), in
/// pipelines, reading RSS after each.
fn write_load(s: &Server, total: u64, ttl: bool) -> Load {
    let mut c = s.conn();
    let value = vec![b'v'; VALUE];
    let count = (total / VALUE as u64) as usize;
    let mut load = Load::default();
    for batch in 0..count.div_ceil(PIPE) {
        let mut pipe = redis::pipe();
        for i in batch * PIPE..((batch + 1) * PIPE).min(count) {
            let cmd = pipe.cmd("SET").arg(format!("key:{i}")).arg(&value[..]);
            if ttl {
                // Later keys live longer: volatile-ttl evicts the earliest first.
                cmd.arg("EX").arg(3600 + i);
            }
        }
        // Every reply, errors included (a pipeline's `query` stops at the first error).
        let n = pipe.cmd_iter().count();
        let replies = c
            .req_packed_commands(&pipe.get_packed_pipeline(), 0, n)
            .unwrap();
        for r in replies {
            match r {
                Value::Okay => load.ok += 1,
                Value::ServerError(e) if e.code() == "OOM" => load.oom += 1,
                other => panic!("unexpected reply {other:?}"),
            }
        }
        load.max_rss = load.max_rss.max(s.rss());
    }
    load
}

/// Wait up to `within` for RSS to fall under `bytes`; returns the last reading.
fn rss_falls_under(s: &Server, bytes: u64, within: Duration) -> u64 {
    let deadline = Instant::now() + within;
    loop {
        let rss = s.rss();
        if rss < bytes || Instant::now() > deadline {
            return rss;
        }
        thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn noeviction_refuses_writes_past_the_limit_and_rss_stays_bounded() {
    let _g = serial();
    let s = Server::start(&["--maxmemory", "64mb", "--maxmemory-policy", "noeviction"]);
    let mut c = s.conn();
    let load = write_load(&s, 10 * LIMIT, false);
    eprintln!("noeviction: {load:?}");
    assert!(load.oom > 0, "{load:?}");
    assert!(load.ok > 0 && load.ok < load.oom, "{load:?}");
    assert!(load.max_rss < 2 * LIMIT, "{load:?}");
    let used: u64 = info(&mut c, "used_memory").parse().unwrap();
    assert!(used <= LIMIT + VALUE as u64 * 2, "used_memory {used}");
    assert_eq!(info(&mut c, "maxmemory"), LIMIT.to_string());
    assert_eq!(info(&mut c, "maxmemory_human"), "64.00M");
    assert_eq!(info(&mut c, "maxmemory_policy"), "noeviction");
    assert_eq!(info(&mut c, "evicted_keys"), "0");
    // Reads and deletions still work; a deletion makes room again.
    let n: i64 = q(&mut c, &["DBSIZE"]);
    assert_eq!(n as u64, load.ok);
    // Still full: more writes are refused (a few may fit into what the load's buffers
    // freed), reads work, and deleting keys makes room again.
    let more = write_load(&s, 500 * VALUE as u64, false);
    assert!(more.oom >= 300, "{more:?}");
    let _: Value = q(&mut c, &["GET", "key:0"]);
    let keys: Vec<String> = (0..500).map(|i| format!("key:{i}")).collect();
    let mut del = redis::cmd("DEL");
    del.arg(&keys);
    let deleted: i64 = del.query(&mut c).unwrap();
    assert!(deleted > 0);
    let _: () = q(&mut c, &["SET", "one-more", &"x".repeat(VALUE)]);
}

#[test]
fn evicting_policies_accept_ten_times_the_limit_within_twice_the_memory() {
    let _g = serial();
    for (policy, ttl) in [("allkeys-lru", false), ("volatile-ttl", true)] {
        let s = Server::start(&["--maxmemory", "64mb", "--maxmemory-policy", policy]);
        let mut c = s.conn();
        let load = write_load(&s, 10 * LIMIT, ttl);
        eprintln!("{policy}: {load:?}");
        assert_eq!(load.oom, 0, "{policy}: {load:?}");
        assert_eq!(load.ok, 10 * LIMIT / VALUE as u64, "{policy}");
        assert!(load.max_rss < 2 * LIMIT, "{policy}: {load:?}");
        // The background cycle may still be finishing: give it a moment to reach the limit
        // (INFO's own reply is part of what it reads, hence the slack).
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let used: u64 = info(&mut c, "used_memory").parse().unwrap();
            if used <= LIMIT + 2 * VALUE as u64 {
                break;
            }
            assert!(Instant::now() < deadline, "{policy}: used_memory {used}");
            thread::sleep(Duration::from_millis(50));
        }
        // Lift the limit before counting, so no key is evicted between the two reads.
        let _: () = q(&mut c, &["CONFIG", "SET", "maxmemory", "0"]);
        let evicted: u64 = info(&mut c, "evicted_keys").parse().unwrap();
        let keys: i64 = q(&mut c, &["DBSIZE"]);
        assert!(evicted > 0, "{policy}");
        assert_eq!(evicted + keys as u64, load.ok, "{policy}");
        if policy == "volatile-ttl" {
            // The nearest deadlines went first: the last keys written are all there.
            let last = load.ok - 1;
            for i in last - 100..=last {
                let e: i64 = q(&mut c, &["EXISTS", &format!("key:{i}")]);
                assert_eq!(e, 1, "key:{i}");
            }
            let first: i64 = q(&mut c, &["EXISTS", "key:0"]);
            assert_eq!(first, 0);
        }
    }
}

#[test]
fn volatile_policies_never_evict_keys_without_a_ttl() {
    let _g = serial();
    let s = Server::start(&["--maxmemory", "32mb", "--maxmemory-policy", "volatile-lru"]);
    let mut c = s.conn();
    for i in 0..500 {
        let _: () = q(&mut c, &["SET", &format!("keep:{i}"), &"k".repeat(1000)]);
    }
    let load = write_load(&s, 128 * MB, true);
    assert_eq!(load.oom, 0, "{load:?}");
    for i in 0..500 {
        let e: i64 = q(&mut c, &["EXISTS", &format!("keep:{i}")]);
        assert_eq!(e, 1, "keep:{i} was evicted");
    }
    // Once only keys without a TTL are left, writes that grow memory are refused.
    let _: () = q(&mut c, &["CONFIG", "SET", "maxmemory", "1"]);
    let _: () = q(&mut c, &["CONFIG", "SET", "maxmemory", "1"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while q::<i64>(&mut c, &["DBSIZE"]) > 500 {
        assert!(Instant::now() < deadline, "volatile keys not evicted");
        thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        err(&mut c, &["SET", "x", "y"]),
        "OOM command not allowed when used memory > 'maxmemory'."
    );
}

#[test]
fn flushall_and_deletions_hand_memory_back_to_the_os() {
    let _g = serial();
    let s = Server::start(&[]);
    let mut c = s.conn();
    thread::sleep(Duration::from_millis(300));
    let baseline = s.rss();
    let load = write_load(&s, 256 * MB, false);
    assert!(load.max_rss > baseline + 200 * MB, "{load:?}");
    let _: () = q(&mut c, &["FLUSHALL"]);
    let flushed = Instant::now();
    let rss = rss_falls_under(&s, baseline + 32 * MB, Duration::from_secs(5));
    eprintln!(
        "peak RSS {} MB, {} MB {:?} after FLUSHALL (baseline {} MB)",
        load.max_rss / MB,
        rss / MB,
        flushed.elapsed(),
        baseline / MB
    );
    assert!(
        rss < baseline + 32 * MB,
        "RSS {rss} after FLUSHALL (baseline {baseline})"
    );
    // Deleting keys one by one gives the memory back too.
    let load = write_load(&s, 256 * MB, false);
    let count = load.ok as usize;
    for chunk in (0..count).collect::<Vec<_>>().chunks(PIPE) {
        let mut pipe = redis::pipe();
        for i in chunk {
            pipe.cmd("DEL").arg(format!("key:{i}")).ignore();
        }
        let _: () = pipe.query(&mut c).unwrap();
    }
    let rss = rss_falls_under(&s, baseline + 32 * MB, Duration::from_secs(5));
    assert!(
        rss < baseline + 32 * MB,
        "RSS {rss} after DEL (baseline {baseline})"
    );
    let used: u64 = info(&mut c, "used_memory").parse().unwrap();
    assert!(used < 4 * MB, "used_memory {used}");
}

#[test]
fn lowering_maxmemory_evicts_in_the_background() {
    let _g = serial();
    let s = Server::start(&["--maxmemory-policy", "allkeys-random"]);
    let mut c = s.conn();
    write_load(&s, 64 * MB, false);
    let _: () = q(&mut c, &["CONFIG", "SET", "maxmemory", "16mb"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        // The figure INFO reports includes what answering INFO itself has allocated at that
        // moment (its reply is being built), which the eviction cycle before it could not
        // see: allow that much (Redis's used_memory has the same transient part).
        let used: u64 = info(&mut c, "used_memory").parse().unwrap();
        if used <= 16 * MB + 64 * 1024 {
            break;
        }
        assert!(Instant::now() < deadline, "still {used} bytes in use");
        thread::sleep(Duration::from_millis(50));
    }
    assert!(s
        .log_text()
        .contains("is smaller than the current memory usage"));
}

#[test]
fn scripts_and_transactions_meet_the_limit_as_in_redis() {
    let _g = serial();
    let s = Server::start(&["--maxmemory-policy", "noeviction"]);
    let mut c = s.conn();
    let mut other = s.conn();
    let _: () = q(&mut c, &["SET", "a", "0"]);
    // A transaction queued in time, then the limit drops below what is in use.
    let _: () = q(&mut c, &["MULTI"]);
    let _: Value = q(&mut c, &["SET", "a", "1"]);
    let _: () = q(&mut other, &["CONFIG", "SET", "maxmemory", "1"]);
    let oom = "OOM command not allowed when used memory > 'maxmemory'.";
    assert_eq!(
        err(&mut c, &["EXEC"]),
        format!("EXECABORT Transaction discarded because of: {oom}")
    );
    // While out of memory, a MULTI queue takes nothing.
    let _: () = q(&mut c, &["MULTI"]);
    assert_eq!(err(&mut c, &["GET", "a"]), oom);
    assert_eq!(
        err(&mut c, &["EXEC"]),
        "EXECABORT Transaction discarded because of previous errors."
    );
    assert_eq!(err(&mut c, &["INCR", "a"]), oom);
    // A script without a shebang runs, and its first write is refused...
    let e = err(&mut c, &["EVAL", "return redis.call('set','a','1')", "0"]);
    assert!(e.starts_with(&format!("{oom} script: ")), "{e}");
    assert_eq!(
        err(&mut c, &["EVAL", "return redis.pcall('set','a','1')", "0"]),
        oom
    );
    // ... unless it wrote already (a DEL does not grow memory).
    let ok: String = q(
        &mut c,
        &[
            "EVAL",
            "redis.call('del','zz'); return redis.call('set','a','2')",
            "0",
        ],
    );
    assert_eq!(ok, "OK");
    // A script with a shebang is refused at start unless it allows OOM or does not write.
    assert_eq!(
        err(
            &mut c,
            &["EVAL", "#!lua\nreturn redis.call('set','a','1')", "0"]
        ),
        oom
    );
    let ok: String = q(
        &mut c,
        &[
            "EVAL",
            "#!lua flags=allow-oom\nreturn redis.call('set','a','3')",
            "0",
        ],
    );
    assert_eq!(ok, "OK");
    let v: String = q(
        &mut c,
        &[
            "EVAL",
            "#!lua flags=no-writes\nreturn redis.call('get','a')",
            "0",
        ],
    );
    assert_eq!(v, "3");
    assert_eq!(
        err(
            &mut c,
            &[
                "FUNCTION",
                "LOAD",
                "#!lua name=l\nredis.register_function('f', function() return 1 end)"
            ]
        ),
        oom
    );
    let _: () = q(&mut c, &["CONFIG", "SET", "maxmemory", "0"]);
    let _: () = q(&mut c, &["SET", "a", "4"]);
}

#[test]
fn file_descriptor_limit_lowers_maxclients_and_extra_clients_are_refused() {
    let _g = serial();
    let mut wrapper = Command::new("prlimit");
    wrapper.args(["--nofile=256:256", env!("CARGO_BIN_EXE_tollgate")]);
    let s = Server::start_with(wrapper, &["--maxclients", "10000"]);
    let mut c = s.conn();
    let got: Vec<String> = q(&mut c, &["CONFIG", "GET", "maxclients"]);
    assert_eq!(got, ["maxclients", "224"]);
    let log = s.log_text();
    assert!(
        log.contains(
            "You requested maxclients of 10000 requiring at least 10032 max file descriptors."
        ) && log.contains("maxclients has been reduced to 224 to compensate for low ulimit."),
        "{log}"
    );
    // `c` is one client; open more until well past the limit.
    let mut served = Vec::new();
    let mut refused = 0;
    for _ in 0..260 {
        let mut s2 = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
        s2.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s2.write_all(b"PING\r\n").unwrap();
        let mut buf = [0u8; 64];
        let n = s2.read(&mut buf).unwrap_or(0);
        match &buf[..n] {
            b"+PONG\r\n" => served.push(s2),
            b"-ERR max number of clients reached\r\n" => refused += 1,
            other => panic!("unexpected {:?}", String::from_utf8_lossy(other)),
        }
    }
    assert_eq!(served.len(), 223);
    assert_eq!(refused, 260 - 223);
    // The clients already connected are still served, and a freed slot is taken again.
    let pong: String = q(&mut c, &["PING"]);
    assert_eq!(pong, "PONG");
    served.truncate(200);
    thread::sleep(Duration::from_millis(200));
    let mut again = s.conn();
    let pong: String = q(&mut again, &["PING"]);
    assert_eq!(pong, "PONG");
    let rejected: u64 = info(&mut c, "rejected_connections").parse().unwrap();
    assert_eq!(rejected, 260 - 223);
    // maxclients cannot be raised past what the limit allows.
    assert_eq!(
        err(&mut c, &["CONFIG", "SET", "maxclients", "5000"]),
        "ERR CONFIG SET failed (possibly related to argument 'maxclients') - The operating system is not able to handle the specified number of clients, try with 224"
    );
}

/// `THP_enabled` of a process's `/proc/<pid>/status` (1: transparent huge pages allowed).
fn thp_enabled(pid: &str) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("THP_enabled:"))
        .expect("THP_enabled in /proc/<pid>/status (Linux 5.0 and later)")
        .trim()
        .to_string()
}

#[test]
fn disable_thp_turns_transparent_huge_pages_off_for_the_process() {
    let _serial = serial();
    // Redis's `disable-thp`, default yes: the server turns them off for itself at start
    // (the kernel keeps the flag per process and children inherit it, so "no" leaves the
    // server with what this test process has).
    let s = Server::start(&[]);
    assert_eq!(thp_enabled(&s.child.id().to_string()), "0");
    assert!(s
        .log_text()
        .contains("transparent huge pages disabled for this process"));
    let mut c = s.conn();
    let got: Vec<String> = q(&mut c, &["CONFIG", "GET", "disable-thp"]);
    assert_eq!(got, ["disable-thp", "yes"]);
    assert_eq!(
        err(&mut c, &["CONFIG", "SET", "disable-thp", "no"]),
        "ERR CONFIG SET failed (possibly related to argument 'disable-thp') - can't set immutable config"
    );
    drop(s);
    let kept = Server::start(&["--disable-thp", "no"]);
    assert_eq!(
        thp_enabled(&kept.child.id().to_string()),
        thp_enabled("self")
    );
    let mut c = kept.conn();
    let got: Vec<String> = q(&mut c, &["CONFIG", "GET", "disable-thp"]);
    assert_eq!(got, ["disable-thp", "no"]);
    drop(kept);
    let bad = Command::new(env!("CARGO_BIN_EXE_tollgate"))
        .args(["--port", "0", "--disable-thp", "maybe"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    let text = String::from_utf8_lossy(&bad.stderr);
    assert!(text.contains("disable-thp"), "{text}");
}
