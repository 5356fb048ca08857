//! Protected mode and the cross-protocol defence, against the real binary:
//!
//! - protected mode, from a non-loopback address: the test makes a network namespace joined
//!   to this one by a veth pair (we run as root; without the rights it prints why it skips)
//!   and connects from inside it with redis-cli and a raw socket;
//! - an HTTP POST (curl's exact request, and the same bytes over a raw socket) closes the
//!   connection and runs nothing, and the warning is logged.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

use tollgate::server::security::{ATTACK_WARNING, DENIED};

/// A `tollgate` process with its log in a temporary file; killed when dropped.
struct Proc {
    port: u16,
    child: Child,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Proc {
    fn start(bind: &str, extra: &[&str]) -> Proc {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("tollgate.log");
        let file = std::fs::File::create(&log).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_tollgate"))
            .args(["--bind", bind, "--port", &port.to_string(), "--log", "info"])
            .args(extra)
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "tollgate did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Proc {
            port,
            child,
            log,
            _dir: dir,
        }
    }

    fn conn(&self) -> redis::Connection {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))
            .unwrap()
            .get_connection()
            .unwrap()
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Write `bytes`, then read until the server closes (true) or 3 s pass (false).
fn send_and_read(addr: (&str, u16), bytes: &[u8]) -> (Vec<u8>, bool) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
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
    (out, closed)
}

#[test]
fn http_post_closes_the_connection_and_runs_nothing() {
    let server = Proc::start("127.0.0.1", &[]);
    let mut c = server.conn();
    let _: () = redis::cmd("SET")
        .arg("kept")
        .arg("1")
        .query(&mut c)
        .unwrap();
    let addr = ("127.0.0.1", server.port);

    // The bytes curl sends for `curl -X POST --data-binary $'\r\nFLUSHALL\r\n' URL`.
    let post = format!(
        "POST / HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nUser-Agent: curl/7.88.1\r\nAccept: */*\r\nContent-Length: 12\r\nContent-Type: application/x-www-form-urlencoded\r\n\r\n\r\nFLUSHALL\r\n",
        server.port
    );
    let (out, closed) = send_and_read(addr, post.as_bytes());
    assert!(closed, "the connection stays open after POST");
    assert!(
        out.is_empty(),
        "POST was answered: {:?}",
        String::from_utf8_lossy(&out)
    );
    // `Host:` as the first line (a request whose method line was split off), any case.
    let (_, closed) = send_and_read(addr, b"hOsT: example.com\r\nFLUSHALL\r\n");
    assert!(closed);
    // As a RESP request too: Redis checks the command name, whatever the framing.
    let (_, closed) = send_and_read(addr, b"*1\r\n$4\r\npost\r\n*1\r\n$8\r\nFLUSHALL\r\n");
    assert!(closed);

    // curl itself, when installed.
    match Command::new("curl")
        .args([
            "-s",
            "-m",
            "5",
            "-X",
            "POST",
            "--data-binary",
            "\r\nFLUSHALL\r\n",
        ])
        .arg(format!("http://127.0.0.1:{}/", server.port))
        .output()
    {
        Ok(out) => assert!(
            !out.status.success(),
            "curl got an HTTP answer: {:?}",
            String::from_utf8_lossy(&out.stdout)
        ),
        Err(e) => println!("curl not run ({e}); the raw-socket POST above covers the same bytes"),
    }

    let v: Option<String> = redis::cmd("GET").arg("kept").query(&mut c).unwrap();
    assert_eq!(v.as_deref(), Some("1"), "FLUSHALL ran");
    let mut fresh = server.conn();
    let n: i64 = redis::cmd("DBSIZE").query(&mut fresh).unwrap();
    assert_eq!(n, 1);
    // Logged once although four requests were refused (at most once a minute).
    assert_eq!(
        server.log_text().matches(ATTACK_WARNING).count(),
        1,
        "{}",
        server.log_text()
    );
}

/// A network namespace joined to this one by a veth pair; removed when dropped.
struct Netns {
    name: String,
    host_ip: String,
}

impl Netns {
    /// Make it, or say why it cannot be made.
    fn create() -> Result<Netns, String> {
        let pid = std::process::id();
        let name = format!("tgsec{pid}");
        let (outer, inner) = (format!("tgs{pid}a"), format!("tgs{pid}b"));
        let net = format!("10.254.{}", pid % 250);
        let ns = Netns {
            name: name.clone(),
            host_ip: format!("{net}.1"),
        };
        let steps: [&[&str]; 7] = [
            &["netns", "add", &name],
            &[
                "link", "add", &outer, "type", "veth", "peer", "name", &inner,
            ],
            &["link", "set", &inner, "netns", &name],
            &["addr", "add", &format!("{net}.1/30"), "dev", &outer],
            &["link", "set", &outer, "up"],
            &[
                "-n",
                &name,
                "addr",
                "add",
                &format!("{net}.2/30"),
                "dev",
                &inner,
            ],
            &["-n", &name, "link", "set", &inner, "up"],
        ];
        for args in steps {
            let out = Command::new("ip")
                .args(args)
                .output()
                .map_err(|e| format!("cannot run ip: {e}"))?;
            if !out.status.success() {
                return Err(format!(
                    "`ip {}` failed: {}",
                    args.join(" "),
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
        }
        Ok(ns)
    }

    /// Run a program inside the namespace.
    fn run(&self, program: &str, args: &[&str]) -> Output {
        Command::new("ip")
            .args(["netns", "exec", &self.name, program])
            .args(args)
            .output()
            .unwrap()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Deleting the namespace deletes its end of the veth pair, and so the pair.
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}

#[test]
fn protected_mode_refuses_non_loopback_clients_without_a_password() {
    let ns = match Netns::create() {
        Ok(ns) => ns,
        Err(why) => {
            println!(
                "SKIPPED protected_mode_refuses_non_loopback_clients_without_a_password: \
                 cannot make a network namespace with a veth pair ({why}); run as root"
            );
            return;
        }
    };
    // The server listens on every address; the namespace reaches it at `host_ip`.
    let server = Proc::start("0.0.0.0", &[]);
    let port = server.port.to_string();
    let raw_from_ns = || {
        let script = format!(
            "import socket\ns=socket.create_connection(('{}',{}),5)\ns.sendall(b'PING\\r\\n')\ns.settimeout(5)\nd=b''\nwhile True:\n  b=s.recv(65536)\n  if not b: break\n  d+=b\nprint(d.decode(),end='')",
            ns.host_ip, port
        );
        let out = ns.run("python3", &["-c", &script]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let cli_from_ns = |args: &[&str]| {
        let mut all = vec!["-h", ns.host_ip.as_str(), "-p", port.as_str()];
        all.extend_from_slice(args);
        let out = ns.run("redis-cli", &all);
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
    };

    // No password: DENIED (Redis's exact text), then closed (the read ends).
    assert_eq!(raw_from_ns(), DENIED);
    assert!(cli_from_ns(&["PING"]).contains("DENIED Redis is running in protected mode"));
    // Loopback is always served.
    let mut local = server.conn();
    let pong: String = redis::cmd("PING").query(&mut local).unwrap();
    assert_eq!(pong, "PONG");
    // Refusals are counted, and the address is logged once (at most once a minute).
    let info: String = redis::cmd("INFO").arg("stats").query(&mut local).unwrap();
    assert!(info.contains("rejected_connections:2"), "{info}");
    let refusals = server.log_text().matches("protected mode: refused").count();
    assert_eq!(refusals, 1, "{}", server.log_text());

    // With a password the remote client is served (after AUTH).
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("requirepass")
        .arg("s3cret")
        .query(&mut local)
        .unwrap();
    assert_eq!(
        cli_from_ns(&["-a", "s3cret", "--no-auth-warning", "PING"]).trim(),
        "PONG"
    );
    assert!(cli_from_ns(&["PING"]).contains("NOAUTH"));

    // `protected-mode no` serves everyone, as Redis does (the operator's explicit choice).
    let mut local = server.conn();
    let _: () = redis::cmd("AUTH").arg("s3cret").query(&mut local).unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("protected-mode")
        .arg("no")
        .arg("requirepass")
        .arg("")
        .query(&mut local)
        .unwrap();
    assert_eq!(cli_from_ns(&["PING"]).trim(), "PONG");
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("protected-mode")
        .arg("yes")
        .query(&mut local)
        .unwrap();
    assert_eq!(raw_from_ns(), DENIED);
}
