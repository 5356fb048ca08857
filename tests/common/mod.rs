//! Test harness: start a real Tollgate server on a free port and connect real clients.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use tollgate::config::Config;
use tollgate::server::{self, Shared};

/// A server running on its own runtime thread; stops when dropped.
pub struct TestServer {
    pub addr: SocketAddr,
    pub shared: Arc<Shared>,
}

impl TestServer {
    /// Start with DEBUG enabled (tests move the clock with DEBUG ADVANCE-TIME).
    pub fn start() -> TestServer {
        Self::with(|_| {})
    }

    /// Start with a tweaked configuration.
    pub fn with(tweak: impl FnOnce(&mut Config)) -> TestServer {
        let mut config = Config {
            port: 0,
            enable_debug_command: true,
            // Two workers, so that tests also see commands from several threads.
            threads: 2,
            ..Config::default()
        };
        tweak(&mut config);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let rt = server::runtime(config.threads).unwrap();
            rt.block_on(async move {
                let (addr, shared) = server::spawn(config).await.unwrap();
                let mut stop = shared.shutdown.subscribe();
                tx.send((addr, shared)).unwrap();
                let _ = stop.changed().await;
                tokio::time::sleep(Duration::from_millis(50)).await;
            });
        });
        let (addr, shared) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        TestServer { addr, shared }
    }

    /// A redis-rs connection (RESP2).
    pub fn conn(&self) -> redis::Connection {
        self.client().get_connection().unwrap()
    }

    /// A redis-rs client.
    pub fn client(&self) -> redis::Client {
        redis::Client::open(format!("redis://{}/", self.addr)).unwrap()
    }

    /// A redis-rs connection speaking RESP3.
    pub fn conn3(&self) -> redis::Connection {
        redis::Client::open(format!("redis://{}/?protocol=resp3", self.addr))
            .unwrap()
            .get_connection()
            .unwrap()
    }

    /// Stop the wall clock's part of the server's time: from now on it moves only by what
    /// [`TestServer::advance`] moves it (timings then hold however loaded the machine is).
    pub fn freeze_time(&self) {
        let mut c = self.conn();
        let _: () = redis::cmd("DEBUG")
            .arg("FREEZE-TIME")
            .arg("yes")
            .query(&mut c)
            .unwrap();
    }

    /// Move the server clock forward.
    pub fn advance(&self, ms: u64) {
        let mut c = self.conn();
        let _: () = redis::cmd("DEBUG")
            .arg("ADVANCE-TIME")
            .arg(ms)
            .query(&mut c)
            .unwrap();
    }

    /// Send raw bytes and read what comes back until `expect_close` or a reply arrives.
    pub fn raw(&self, bytes: &[u8]) -> String {
        let mut s = TcpStream::connect(self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(1500)))
            .unwrap();
        s.write_all(bytes).unwrap();
        let mut out = Vec::new();
        let mut buf = [0u8; 65536];
        loop {
            match s.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    out.extend_from_slice(&buf[..n]);
                    if out.ends_with(b"\r\n") && out.len() < 65536 {
                        // Give a pipelined tail a moment, then stop.
                        s.set_read_timeout(Some(Duration::from_millis(150)))
                            .unwrap();
                    }
                }
                Err(_) => break,
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    /// Whether the server closed a raw connection after `bytes`.
    pub fn closes_after(&self, bytes: &[u8]) -> (String, bool) {
        let mut s = TcpStream::connect(self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(2000)))
            .unwrap();
        // The server may close mid-write; a reset then also means "closed".
        let _ = s.write_all(bytes);
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        let closed = loop {
            match s.read(&mut buf) {
                Ok(0) => break true,
                Ok(n) => out.extend_from_slice(&buf[..n]),
                Err(e) => break e.kind() == std::io::ErrorKind::ConnectionReset,
            }
        };
        (String::from_utf8_lossy(&out).into_owned(), closed)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.shared.request_shutdown();
    }
}

/// Run a command and return the value, panicking on transport errors only.
pub fn q<T: redis::FromRedisValue>(c: &mut redis::Connection, args: &[&str]) -> T {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// Run a command that must fail, returning the full error text (code + message).
pub fn err(c: &mut redis::Connection, args: &[&str]) -> String {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    match cmd.query::<redis::Value>(c) {
        Ok(v) => panic!("{args:?} should fail, got {v:?}"),
        Err(e) => error_text(&e),
    }
}

/// Run a command: its reply, or Redis's error text ("CODE message").
pub fn reply<A: redis::ToRedisArgs>(
    c: &mut redis::Connection,
    args: &[A],
) -> Result<redis::Value, String> {
    let mut cmd = redis::Cmd::new();
    for a in args {
        cmd.arg(a);
    }
    cmd.query(c).map_err(|e| error_text(&e))
}

/// Run a command and describe what came back, for comparing two servers' answers step by
/// step: the reply's `Debug` text, or `error: CODE message`.
pub fn reply_text<A: redis::ToRedisArgs>(c: &mut redis::Connection, args: &[A]) -> String {
    match reply(c, args) {
        Ok(v) => format!("{v:?}"),
        Err(e) => format!("error: {e}"),
    }
}

/// Redis's full error text from a redis-rs error: "CODE message".
pub fn error_text(e: &redis::RedisError) -> String {
    match (e.code(), e.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        (Some(code), None) => code.to_string(),
        _ => e.to_string(),
    }
}

/// The tollgate binary as a child process on a free port, for what an in-process
/// [`TestServer`] lacks (the binary's counting allocator behind `maxmemory`, a process of
/// its own whose RSS is the server's alone); killed when dropped.
pub struct ServerProcess {
    pub child: std::process::Child,
    pub port: u16,
}

impl ServerProcess {
    pub fn start() -> ServerProcess {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_tollgate"))
            .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
            .args(["--log", "warn"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn tollgate");
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "tollgate did not listen"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        ServerProcess { child, port }
    }

    /// A connection whose reads wait up to two minutes (slow scripts on a loaded machine).
    pub fn conn(&self) -> redis::Connection {
        let c = redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))
            .unwrap()
            .get_connection_with_timeout(Duration::from_secs(5))
            .unwrap();
        c.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
        c
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port nothing listens on now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A small fixed-seed generator (xorshift64*), so that a randomized test's failures
/// reproduce.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// A float in `[lo, hi)` printed with 6 decimals, as a client would send it.
    pub fn float(&mut self, lo: f64, hi: f64) -> String {
        let unit = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        format!("{:.6}", lo + unit * (hi - lo))
    }
}

/// Send `args` to two servers (redis-server and Tollgate) and require the same reply
/// (values, types, error texts); returns it.
pub fn both<A: redis::ToRedisArgs>(
    r: &mut redis::Connection,
    t: &mut redis::Connection,
    args: &[A],
) -> String {
    let (a, b) = (reply_text(r, args), reply_text(t, args));
    let shown: Vec<String> = args
        .iter()
        .flat_map(|a| a.to_redis_args())
        .map(|a| String::from_utf8_lossy(&a).into_owned())
        .collect();
    assert_eq!(a, b, "reply to {shown:?}");
    a
}
