//! TLS on the client port, against the real binary with certificates made at test time:
//! the redis crate (rustls), redis-cli --tls and redis-py ssl=True; plaintext sent to the
//! TLS port fails cleanly and disturbs nobody; client certificates from another CA are
//! refused; certificates rotate (CONFIG SET, SIGHUP) without dropping connected clients;
//! `port 0` turns plaintext off; bad settings are refused with a reason.

mod common;
mod tls_support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use common::free_port;
use redis::{ClientTlsConfig, TlsCertificates};
use tls_support::{arg, Ca, Issued};

/// A `tollgate` process; killed when dropped.
struct Proc {
    child: Child,
    log: PathBuf,
}

impl Proc {
    /// Start with `args`, and wait until `wait_port` accepts connections.
    fn start(dir: &Path, args: &[String], wait_port: u16) -> Proc {
        let log = dir.join("tollgate.log");
        let file = std::fs::File::create(&log).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_tollgate"))
            .args(["--bind", "127.0.0.1", "--log", "info"])
            .args(args)
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .unwrap();
        let mut p = Proc { child, log };
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", wait_port)).is_err() {
            assert!(
                p.child.try_wait().unwrap().is_none(),
                "tollgate exited: {}",
                p.log_text()
            );
            assert!(Instant::now() < deadline, "tollgate did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        p
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn sighup(&self) {
        let ok = Command::new("kill")
            .args(["-HUP", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(ok.success());
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A redis-rs client over TLS trusting `ca`, presenting `client` if given.
fn tls_client(port: u16, ca: &Path, client: Option<&Issued>) -> redis::Client {
    let read = |p: &Path| std::fs::read(p).unwrap();
    redis::Client::build_with_tls(
        format!("rediss://127.0.0.1:{port}/"),
        TlsCertificates {
            client_tls: client.map(|c| ClientTlsConfig {
                client_cert: read(&c.cert),
                client_key: read(&c.key),
            }),
            root_cert: Some(read(ca)),
        },
    )
    .unwrap()
}

/// PING over TLS: the reply, or the error's text.
fn ping(port: u16, ca: &Path, client: Option<&Issued>) -> Result<String, String> {
    let client = tls_client(port, ca, client);
    let mut c = client
        .get_connection_with_timeout(Duration::from_secs(5))
        .map_err(|e| e.to_string())?;
    redis::cmd("PING").query(&mut c).map_err(|e| e.to_string())
}

/// A PING over TLS from Python's ssl module, which can pin what a client offers: `max` is
/// the highest version (`TLSv1_2`, `TLSv1_3`), `ciphers` the TLS 1.2 suites ("" = its
/// defaults). Prints the reply and `show` (a Python expression on the socket `s`), or
/// `refused` when the handshake fails.
fn py_handshake(ca: &Path, port: u16, max: &str, ciphers: &str, show: &str) -> String {
    let set_ciphers = if ciphers.is_empty() {
        String::new()
    } else {
        format!("ctx.set_ciphers('{ciphers}')")
    };
    let script = format!(
        "import socket, ssl\nctx = ssl.create_default_context(cafile='{}')\nctx.maximum_version = ssl.TLSVersion.{max}\n{set_ciphers}\ntry:\n  s = ctx.wrap_socket(socket.create_connection(('127.0.0.1', {port}), 5), server_hostname='127.0.0.1')\n  s.sendall(b'PING\\r\\n'); print(s.recv(100).decode().strip(), {show})\nexcept ssl.SSLError as e:\n  print('refused')",
        arg(ca)
    );
    let py = Command::new("python3")
        .args(["-c", &script])
        .output()
        .unwrap();
    assert!(py.status.success(), "{py:?}");
    String::from_utf8_lossy(&py.stdout).trim().to_string()
}

/// Everything a TLS test needs: a CA, a server and a client certificate, another CA with a
/// client certificate, and a server on a plaintext and a TLS port.
struct Setup {
    dir: tempfile::TempDir,
    ca: Ca,
    client: Issued,
    port: u16,
    tls_port: u16,
    server: Proc,
}

/// A server's flags: the plaintext `port`, the TLS port if any, its certificate and key,
/// and the CA that client certificates are checked against.
fn server_args(port: u16, tls_port: Option<u16>, cert: &Issued, ca: &Ca) -> Vec<String> {
    let mut args = vec!["--port".to_string(), port.to_string()];
    if let Some(tls_port) = tls_port {
        args.extend(["--tls-port".to_string(), tls_port.to_string()]);
    }
    args.extend([
        "--tls-cert-file".to_string(),
        arg(&cert.cert),
        "--tls-key-file".to_string(),
        arg(&cert.key),
        "--tls-ca-cert-file".to_string(),
        arg(&ca.pem),
    ]);
    args
}

fn setup(extra: &[&str]) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "ca");
    let server_cert = ca.issue(dir.path(), "server");
    let client = ca.issue(dir.path(), "client");
    let (port, tls_port) = (free_port(), free_port());
    let mut args = server_args(port, Some(tls_port), &server_cert, &ca);
    args.extend(extra.iter().map(|s| s.to_string()));
    let server = Proc::start(dir.path(), &args, tls_port);
    Setup {
        dir,
        ca,
        client,
        port,
        tls_port,
        server,
    }
}

#[test]
fn clients_work_over_tls_and_plaintext_to_the_tls_port_fails_cleanly() {
    let s = setup(&[]);
    // The redis crate (rustls), with a client certificate: a pipeline and a limiter.
    let client = tls_client(s.tls_port, &s.ca.pem, Some(&s.client));
    let mut c = client.get_connection().unwrap();
    let (a, b): (i64, i64) = redis::pipe()
        .cmd("INCR")
        .arg("hits")
        .cmd("INCRBY")
        .arg("hits")
        .arg(5)
        .query(&mut c)
        .unwrap();
    assert_eq!((a, b), (1, 6));
    let reply: Vec<i64> = redis::cmd("LIMIT.TOKEN")
        .arg("tenant:1")
        .arg(10)
        .arg(1)
        .arg(1000)
        .query(&mut c)
        .unwrap();
    assert_eq!(reply[0], 1, "{reply:?}");
    let big = "x".repeat(4_000_000);
    let _: () = redis::cmd("SET")
        .arg("big")
        .arg(&big)
        .query(&mut c)
        .unwrap();
    let back: String = redis::cmd("GET").arg("big").query(&mut c).unwrap();
    assert_eq!(back.len(), big.len());

    // redis-cli --tls.
    let cli = Command::new("redis-cli")
        .args(["--tls", "--cacert", &arg(&s.ca.pem)])
        .args(["--cert", &arg(&s.client.cert), "--key", &arg(&s.client.key)])
        .args(["-p", &s.tls_port.to_string(), "INCR", "hits"])
        .output()
        .expect("redis-cli");
    assert_eq!(String::from_utf8_lossy(&cli.stdout).trim(), "7", "{cli:?}");

    // redis-py with ssl=True.
    let script = format!(
        "import redis\nr = redis.Redis(host='127.0.0.1', port={}, ssl=True, ssl_ca_certs='{}', ssl_certfile='{}', ssl_keyfile='{}')\nprint(r.incr('hits'))",
        s.tls_port,
        arg(&s.ca.pem),
        arg(&s.client.cert),
        arg(&s.client.key)
    );
    let py = Command::new("python3")
        .args(["-c", &script])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&py.stdout).trim(), "8", "{py:?}");

    // Plaintext RESP to the TLS port: no reply, the connection closes.
    let mut raw = TcpStream::connect(("127.0.0.1", s.tls_port)).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(12))).unwrap();
    raw.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
    let mut got = Vec::new();
    let _ = raw.read_to_end(&mut got);
    assert!(
        !String::from_utf8_lossy(&got).contains("PONG"),
        "plaintext answered on the TLS port"
    );
    // The TLS client connected before and a plaintext client are undisturbed.
    let n: i64 = redis::cmd("INCR").arg("hits").query(&mut c).unwrap();
    assert_eq!(n, 9);
    let mut plain = redis::Client::open(format!("redis://127.0.0.1:{}/", s.port))
        .unwrap()
        .get_connection()
        .unwrap();
    let n: i64 = redis::cmd("GET").arg("hits").query(&mut plain).unwrap();
    assert_eq!(n, 9);
}

#[test]
fn client_certificates_are_checked_as_tls_auth_clients_says() {
    let s = setup(&[]);
    let other_ca = Ca::new(s.dir.path(), "other-ca");
    let stranger = other_ca.issue(s.dir.path(), "stranger");
    // yes (the default): a certificate from the CA is required.
    assert_eq!(
        ping(s.tls_port, &s.ca.pem, Some(&s.client)).unwrap(),
        "PONG"
    );
    assert!(ping(s.tls_port, &s.ca.pem, Some(&stranger)).is_err());
    assert!(ping(s.tls_port, &s.ca.pem, None).is_err());
    // The server's certificate is checked by the client too: one that trusts another CA
    // refuses it.
    assert!(ping(s.tls_port, &other_ca.pem, Some(&s.client)).is_err());

    let mut plain = redis::Client::open(format!("redis://127.0.0.1:{}/", s.port))
        .unwrap()
        .get_connection()
        .unwrap();
    let set = |c: &mut redis::Connection, v: &str| -> redis::RedisResult<()> {
        redis::cmd("CONFIG")
            .arg("SET")
            .arg("tls-auth-clients")
            .arg(v)
            .query(c)
    };
    // optional: no certificate is fine, but one from another CA is still refused.
    set(&mut plain, "optional").unwrap();
    assert_eq!(ping(s.tls_port, &s.ca.pem, None).unwrap(), "PONG");
    assert!(ping(s.tls_port, &s.ca.pem, Some(&stranger)).is_err());
    // no: nothing is asked.
    set(&mut plain, "no").unwrap();
    assert_eq!(ping(s.tls_port, &s.ca.pem, None).unwrap(), "PONG");
    let e = set(&mut plain, "maybe").unwrap_err();
    assert!(
        e.to_string()
            .contains("argument(s) must be one of the following"),
        "{e}"
    );
}

#[test]
fn certificates_rotate_without_dropping_connected_clients() {
    let s = setup(&[]);
    let connected = tls_client(s.tls_port, &s.ca.pem, Some(&s.client));
    let mut c = connected.get_connection().unwrap();
    let _: () = redis::cmd("SET").arg("k").arg("v1").query(&mut c).unwrap();

    // A new CA signs the next server certificate; the client CA file lists both CAs so
    // existing client certificates stay valid.
    let dir = s.dir.path();
    let next_ca = Ca::new(dir, "next-ca");
    let next = next_ca.issue(dir, "server-next");
    let both = dir.join("both-cas.pem");
    let mut pem = std::fs::read(&s.ca.pem).unwrap();
    pem.extend(std::fs::read(&next_ca.pem).unwrap());
    std::fs::write(&both, pem).unwrap();
    assert!(ping(s.tls_port, &next_ca.pem, Some(&s.client)).is_err());

    // A file that cannot be used is refused with Redis's text, and changes nothing.
    let e: redis::RedisError = redis::cmd("CONFIG")
        .arg("SET")
        .arg("tls-cert-file")
        .arg(arg(&dir.join("missing.crt")))
        .query::<()>(&mut c)
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("Unable to update TLS configuration. Check server logs."),
        "{e}"
    );
    assert!(s.server.log_text().contains("missing.crt"));
    assert_eq!(
        ping(s.tls_port, &s.ca.pem, Some(&s.client)).unwrap(),
        "PONG"
    );

    // CONFIG SET of the files: new handshakes present the new certificate.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("tls-cert-file")
        .arg(arg(&next.cert))
        .arg("tls-key-file")
        .arg(arg(&next.key))
        .arg("tls-ca-cert-file")
        .arg(arg(&both))
        .query(&mut c)
        .unwrap();
    assert_eq!(
        ping(s.tls_port, &next_ca.pem, Some(&s.client)).unwrap(),
        "PONG"
    );
    assert!(ping(s.tls_port, &s.ca.pem, Some(&s.client)).is_err());
    let files: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("tls-cert-file")
        .query(&mut c)
        .unwrap();
    assert_eq!(files[1], arg(&next.cert));
    // The connection made before the rotation is still served.
    let v: String = redis::cmd("GET").arg("k").query(&mut c).unwrap();
    assert_eq!(v, "v1");

    // SIGHUP: the files named by the settings are read again (rotated in place).
    let third_ca = Ca::new(dir, "third-ca");
    let third = third_ca.issue(dir, "server-third");
    std::fs::copy(&third.cert, &next.cert).unwrap();
    std::fs::copy(&third.key, &next.key).unwrap();
    s.server.sighup();
    let deadline = Instant::now() + Duration::from_secs(10);
    while ping(s.tls_port, &third_ca.pem, Some(&s.client)).is_err() {
        assert!(
            Instant::now() < deadline,
            "SIGHUP did not reload: {}",
            s.server.log_text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(s.server.log_text().contains("TLS certificates reloaded"));
    let v: String = redis::cmd("GET").arg("k").query(&mut c).unwrap();
    assert_eq!(v, "v1");
}

#[test]
fn port_0_turns_plaintext_off_and_tls_protocols_are_honoured() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "ca");
    let server_cert = ca.issue(dir.path(), "server");
    let tls_port = free_port();
    let args: Vec<String> = [
        "--port",
        "0",
        "--tls-port",
        &tls_port.to_string(),
        "--tls-cert-file",
        &arg(&server_cert.cert),
        "--tls-key-file",
        &arg(&server_cert.key),
        "--tls-auth-clients",
        "no",
        "--tls-protocols",
        "TLSv1.3",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let server = Proc::start(dir.path(), &args, tls_port);
    let mut c = tls_client(tls_port, &ca.pem, None)
        .get_connection()
        .unwrap();
    let port: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("port")
        .query(&mut c)
        .unwrap();
    assert_eq!(port[1], "0");
    assert!(
        server.log_text().contains("no plaintext port"),
        "{}",
        server.log_text()
    );
    // TLSv1.3 only: a client limited to TLS 1.2 is refused, one allowing 1.3 is served
    // (Python's ssl module pins the versions).
    let handshake = |max: &str| py_handshake(&ca.pem, tls_port, max, "", "s.version()");
    assert_eq!(handshake("TLSv1_2"), "refused");
    assert_eq!(handshake("TLSv1_3"), "+PONG TLSv1.3");
    let e: redis::RedisError = redis::cmd("CONFIG")
        .arg("SET")
        .arg("tls-protocols")
        .arg("TLSv1.1")
        .query::<()>(&mut c)
        .unwrap_err();
    assert!(e.to_string().contains("TLSv1.2 and TLSv1.3 only"), "{e}");
}

#[test]
fn unusable_tls_settings_stop_the_server_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "ca");
    let cert = ca.issue(dir.path(), "server");
    let other = ca.issue(dir.path(), "other");
    let run = |args: &[&str]| {
        let port = free_port().to_string();
        let mut all = vec!["--port", "0", "--tls-port", &port];
        all.extend_from_slice(args);
        refused_start(&all, None)
    };
    let text = run(&[]);
    assert!(
        text.contains("set tls-cert-file and tls-key-file"),
        "{text}"
    );
    let text = run(&[
        "--tls-cert-file",
        &arg(&cert.cert),
        "--tls-key-file",
        &arg(&cert.key),
    ]);
    assert!(text.contains("set tls-ca-cert-file"), "{text}");
    // A key that belongs to another certificate.
    let text = run(&[
        "--tls-cert-file",
        &arg(&cert.cert),
        "--tls-key-file",
        &arg(&other.key),
        "--tls-auth-clients",
        "no",
    ]);
    assert!(text.contains("do not make a usable pair"), "{text}");
    let text = run(&["--tls-protocols", "TLSv1"]);
    assert!(text.contains("TLSv1.2 and TLSv1.3 only"), "{text}");
    let text = run(&["--tls-cluster", "yes"]);
    assert!(text.contains("not a cluster node"), "{text}");
}

/// `openssl` with `args`; panics with its output when it fails.
fn openssl(args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .output()
        .expect("openssl");
    assert!(out.status.success(), "openssl {args:?}: {out:?}");
}

/// A P-256 key made by `openssl genpkey ... -aes-256-cbc` (encrypted PKCS#8, PBES2) with
/// `pass`, at `dir/<name>.enc.key`, and a certificate `ca` issues for it.
fn encrypted_key(ca: &Ca, dir: &Path, name: &str, pass: &str) -> Issued {
    let enc = dir.join(format!("{name}.enc.key"));
    let pass_arg = format!("pass:{pass}");
    openssl(&[
        "genpkey",
        "-algorithm",
        "EC",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-aes-256-cbc",
        "-pass",
        &pass_arg,
        "-out",
        &arg(&enc),
    ]);
    let plain = dir.join(format!("{name}.plain.key"));
    openssl(&[
        "pkey",
        "-in",
        &arg(&enc),
        "-passin",
        &pass_arg,
        "-out",
        &arg(&plain),
    ]);
    let key = rcgen::KeyPair::from_pem(&std::fs::read_to_string(&plain).unwrap()).unwrap();
    let issued = ca.issue_for(dir, name, key);
    Issued {
        cert: issued.cert,
        key: enc,
    }
}

/// `tls-key-file-pass`: an encrypted PKCS#8 key (as `openssl genpkey -aes-256-cbc` writes
/// it) is read with its passphrase at start and on CONFIG SET; a missing or wrong
/// passphrase stops the start with the reason, and a CONFIG SET with a wrong one is refused
/// with Redis's text and keeps the certificate in use; OpenSSL's legacy encrypted PEM is
/// refused by name.
#[test]
fn encrypted_private_keys_are_read_with_tls_key_file_pass() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ca = Ca::new(d, "ca");
    let server = encrypted_key(&ca, d, "server", "s3cret pass");
    let start = |extra: &[&str]| -> Vec<String> {
        let mut args: Vec<String> = [
            "--port",
            "0",
            "--tls-cert-file",
            &arg(&server.cert),
            "--tls-key-file",
            &arg(&server.key),
            "--tls-auth-clients",
            "no",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    };
    let refused = |extra: &[&str]| {
        let port = free_port().to_string();
        let args = start(extra);
        let mut all = vec!["--tls-port", port.as_str()];
        all.extend(args.iter().map(String::as_str));
        refused_start(&all, None)
    };
    let text = refused(&[]);
    assert!(
        text.contains("is encrypted: give its passphrase in tls-key-file-pass"),
        "{text}"
    );
    let text = refused(&["--tls-key-file-pass", "wrong"]);
    assert!(text.contains("wrong passphrase"), "{text}");
    let legacy = d.join("legacy.key");
    openssl(&[
        "pkey",
        "-in",
        &arg(&d.join("server.plain.key")),
        "-aes256",
        "-traditional",
        "-passout",
        "pass:s3cret pass",
        "-out",
        &arg(&legacy),
    ]);
    assert!(std::fs::read_to_string(&legacy)
        .unwrap()
        .contains("Proc-Type: 4,ENCRYPTED"));
    let text = refused(&[
        "--tls-key-file",
        &arg(&legacy),
        "--tls-key-file-pass",
        "s3cret pass",
    ]);
    assert!(
        text.contains("OpenSSL's legacy PEM format (Proc-Type: 4,ENCRYPTED)"),
        "{text}"
    );

    // The right passphrase: the redis crate and redis-cli --tls are served.
    let tls_port = free_port();
    let mut args = start(&["--tls-key-file-pass", "s3cret pass"]);
    args.extend(["--tls-port".to_string(), tls_port.to_string()]);
    let proc = Proc::start(d, &args, tls_port);
    let mut c = tls_client(tls_port, &ca.pem, None)
        .get_connection()
        .unwrap();
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut c).unwrap();
    let cli = Command::new("redis-cli")
        .args(["--tls", "--cacert", &arg(&ca.pem)])
        .args(["-p", &tls_port.to_string(), "GET", "k"])
        .output()
        .expect("redis-cli");
    assert_eq!(String::from_utf8_lossy(&cli.stdout).trim(), "v", "{cli:?}");
    let got: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("tls-key-file-pass")
        .query(&mut c)
        .unwrap();
    assert_eq!(got, ["tls-key-file-pass", "s3cret pass"]);

    // Rotation to another encrypted key: a wrong passphrase is refused with Redis's text
    // (the reason in the log) and the certificate in use stays; the right one rotates.
    let next_ca = Ca::new(d, "next-ca");
    let next = encrypted_key(&next_ca, d, "next", "other pass");
    let rotate = |c: &mut redis::Connection, pass: &str| {
        redis::cmd("CONFIG")
            .arg("SET")
            .arg("tls-cert-file")
            .arg(arg(&next.cert))
            .arg("tls-key-file")
            .arg(arg(&next.key))
            .arg("tls-key-file-pass")
            .arg(pass)
            .query::<()>(c)
    };
    let e = rotate(&mut c, "s3cret pass").unwrap_err();
    assert!(
        e.to_string()
            .contains("Unable to update TLS configuration. Check server logs."),
        "{e}"
    );
    assert!(
        proc.log_text().contains("wrong passphrase"),
        "{}",
        proc.log_text()
    );
    assert_eq!(ping(tls_port, &ca.pem, None).unwrap(), "PONG");
    assert!(ping(tls_port, &next_ca.pem, None).is_err());
    let got: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("tls-key-file")
        .query(&mut c)
        .unwrap();
    assert_eq!(got[1], arg(&server.key));
    rotate(&mut c, "other pass").unwrap();
    assert_eq!(ping(tls_port, &next_ca.pem, None).unwrap(), "PONG");
    let v: String = redis::cmd("GET").arg("k").query(&mut c).unwrap();
    assert_eq!(v, "v");
}

/// `tls-ciphers` (TLS 1.2, OpenSSL's names) and `tls-ciphersuites` (TLS 1.3) limit what a
/// handshake can agree on, change live with CONFIG SET, and a name rustls does not implement
/// (or an OpenSSL keyword) is refused with the names that work.
#[test]
fn tls_ciphers_and_ciphersuites_limit_the_handshake() {
    let s = setup(&[
        "--tls-auth-clients",
        "no",
        "--tls-ciphers",
        "ECDHE-ECDSA-AES256-GCM-SHA384",
        "--tls-ciphersuites",
        "TLS_CHACHA20_POLY1305_SHA256",
    ]);
    let handshake = |max: &str, ciphers: &str| {
        py_handshake(&s.ca.pem, s.tls_port, max, ciphers, "s.cipher()[0]")
    };
    assert_eq!(
        handshake("TLSv1_2", ""),
        "+PONG ECDHE-ECDSA-AES256-GCM-SHA384"
    );
    assert_eq!(
        handshake("TLSv1_2", "ECDHE-ECDSA-AES128-GCM-SHA256"),
        "refused"
    );
    assert_eq!(
        handshake("TLSv1_3", ""),
        "+PONG TLS_CHACHA20_POLY1305_SHA256"
    );

    let mut c = redis::Client::open(format!("redis://127.0.0.1:{}/", s.port))
        .unwrap()
        .get_connection()
        .unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("tls-ciphersuites")
        .arg("TLS_AES_128_GCM_SHA256")
        .query(&mut c)
        .unwrap();
    assert_eq!(handshake("TLSv1_3", ""), "+PONG TLS_AES_128_GCM_SHA256");
    for (name, value, why) in [
        ("tls-ciphers", "HIGH:!aNULL", "not a TLS 1.2 cipher suite"),
        (
            "tls-ciphersuites",
            "TLS_AES_128_CCM_SHA256",
            "not a TLS 1.3 cipher suite",
        ),
    ] {
        let e = redis::cmd("CONFIG")
            .arg("SET")
            .arg(name)
            .arg(value)
            .query::<()>(&mut c)
            .unwrap_err();
        assert!(e.to_string().contains(why), "{name}: {e}");
    }
    let got: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("tls-cipher*")
        .query(&mut c)
        .unwrap();
    assert_eq!(
        got,
        [
            "tls-ciphers",
            "ECDHE-ECDSA-AES256-GCM-SHA384",
            "tls-ciphersuites",
            "TLS_AES_128_GCM_SHA256"
        ]
    );
}

/// Two handshakes from Python's ssl module, the second offering the first's session,
/// `wait_secs` apart: whether each was resumed (`True`/`False`, space-separated).
fn py_resumption(ca: &Path, port: u16, max: &str, wait_secs: u64) -> String {
    let script = format!(
        "import socket, ssl, time\nctx = ssl.create_default_context(cafile='{}')\nctx.maximum_version = ssl.TLSVersion.{max}\ndef once(sess=None):\n  s = ctx.wrap_socket(socket.create_connection(('127.0.0.1', {port}), 5), server_hostname='127.0.0.1', session=sess)\n  s.sendall(b'PING\\r\\n'); assert s.recv(100) == b'+PONG\\r\\n'\n  r, sess = s.session_reused, s.session\n  s.close()\n  return r, sess\nr1, sess = once()\ntime.sleep({wait_secs})\nr2, _ = once(sess)\nprint(r1, r2)",
        arg(ca)
    );
    let py = Command::new("python3")
        .args(["-c", &script])
        .output()
        .unwrap();
    assert!(py.status.success(), "{py:?}");
    String::from_utf8_lossy(&py.stdout).trim().to_string()
}

/// The ticket lifetime the server advertised to OpenSSL's client (`openssl s_client` with
/// `version`, `-tls1_2` or `-tls1_3`, saving its session after a PING has been answered, so
/// that the TLS 1.3 tickets sent after the handshake are in; `openssl sess_id -text` shows the
/// ticket's "lifetime hint"): the number, or "no ticket".
fn ticket_lifetime(ca: &Path, port: u16, version: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let sess = dir.path().join("session.pem");
    // `timeout` bounds the wait below: a server that never answers ends in EOF, not a hang.
    let mut client = Command::new("timeout")
        .args([
            "20",
            "openssl",
            "s_client",
            "-connect",
            &format!("127.0.0.1:{port}"),
            version,
        ])
        .args(["-CAfile", &arg(ca), "-sess_out", &arg(&sess)])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("timeout openssl s_client");
    let mut stdin = client.stdin.take().unwrap();
    stdin.write_all(b"PING\r\n").unwrap();
    // Read until the reply: the tickets came before it.
    let mut stdout = client.stdout.take().unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains("+PONG") {
        match stdout.read(&mut buf) {
            Ok(0) | Err(_) => panic!("no PONG: {}", String::from_utf8_lossy(&seen)),
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
    }
    drop(stdin);
    assert!(client.wait().unwrap().success());
    if !sess.exists() {
        // OpenSSL saves no TLS 1.3 session without a ticket to resume it by.
        return "no ticket".to_string();
    }
    let text = Command::new("openssl")
        .args(["sess_id", "-in", &arg(&sess), "-text", "-noout"])
        .output()
        .expect("openssl sess_id");
    assert!(text.status.success(), "{text:?}");
    let text = String::from_utf8_lossy(&text.stdout).to_string();
    text.lines()
        .find_map(|l| l.trim().strip_prefix("TLS session ticket lifetime hint: "))
        .map_or("no ticket".to_string(), |v| {
            v.trim_end_matches(" (seconds)").to_string()
        })
}

/// `CONFIG SET name value` on `c`, the error as its text.
fn config_set(c: &mut redis::Connection, name: &str, value: &str) -> Result<(), String> {
    redis::cmd("CONFIG")
        .arg("SET")
        .arg(name)
        .arg(value)
        .query::<()>(c)
        .map_err(|e| e.to_string())
}

/// The session ticket a client receives advertises `tls-session-cache-timeout` as its
/// lifetime (Redis's OpenSSL does; rustls's own stateful tickets say 86,400 s whatever the
/// cache keeps), for TLS 1.2 and 1.3, follows CONFIG SET, and stays within RFC 8446's seven
/// days; with `tls-session-caching no` no ticket is sent.
#[test]
fn tls_session_ticket_lifetime_is_the_cache_timeout() {
    let s = setup(&["--tls-auth-clients", "no"]);
    let mut c = redis::Client::open(format!("redis://127.0.0.1:{}/", s.port))
        .unwrap()
        .get_connection()
        .unwrap();
    let lifetimes = |expected: &str| {
        for version in ["-tls1_2", "-tls1_3"] {
            assert_eq!(
                ticket_lifetime(&s.ca.pem, s.tls_port, version),
                expected,
                "{version}"
            );
        }
    };
    lifetimes("300");
    for (timeout, expected) in [("1234", "1234"), ("9999999", "604800")] {
        config_set(&mut c, "tls-session-cache-timeout", timeout).unwrap();
        lifetimes(expected);
    }
    // No cache, no ticket.
    config_set(&mut c, "tls-session-caching", "no").unwrap();
    lifetimes("no ticket");
}

#[test]
fn tls_session_cache_settings_decide_resumption() {
    let s = setup(&["--tls-auth-clients", "no"]);
    let mut c = redis::Client::open(format!("redis://127.0.0.1:{}/", s.port))
        .unwrap()
        .get_connection()
        .unwrap();
    // Redis's defaults: caching on, 20480 sessions, 300 s.
    let got: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("tls-session-*")
        .query(&mut c)
        .unwrap();
    let mut pairs: Vec<(String, String)> = got
        .chunks(2)
        .map(|p| (p[0].clone(), p[1].clone()))
        .collect();
    pairs.sort();
    assert_eq!(
        pairs,
        [
            ("tls-session-cache-size".into(), "20480".into()),
            ("tls-session-cache-timeout".into(), "300".into()),
            ("tls-session-caching".into(), "yes".into()),
        ]
    );
    // Two handshakes `wait` seconds apart with each TLS version: "<first resumed> <second resumed>".
    let resumption = |wait: u64, expected: &str| {
        for max in ["TLSv1_2", "TLSv1_3"] {
            assert_eq!(
                py_resumption(&s.ca.pem, s.tls_port, max, wait),
                expected,
                "{max}"
            );
        }
    };
    resumption(0, "False True");
    config_set(&mut c, "tls-session-caching", "no").unwrap();
    resumption(0, "False False");
    config_set(&mut c, "tls-session-caching", "yes").unwrap();
    config_set(&mut c, "tls-session-cache-timeout", "1").unwrap();
    // A session older than the timeout is not resumed (2 s apart: at least 1 s).
    resumption(2, "False False");
    let e = config_set(&mut c, "tls-session-cache-size", "0").unwrap_err();
    assert!(
        e.contains("rustls's session cache holds a fixed number"),
        "{e}"
    );
    config_set(&mut c, "tls-session-cache-size", "1").unwrap();
    config_set(&mut c, "tls-session-cache-timeout", "300").unwrap();
    assert_eq!(
        py_resumption(&s.ca.pem, s.tls_port, "TLSv1_2", 0),
        "False True"
    );

    // Every tls-* setting of redis-server 7.0.15 is known: real, or refused with a reason
    // when it asks for what Tollgate cannot do.
    let got: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("tls-*")
        .query(&mut c)
        .unwrap();
    let mut names: Vec<&str> = got.iter().step_by(2).map(String::as_str).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "tls-auth-clients",
            "tls-ca-cert-dir",
            "tls-ca-cert-file",
            "tls-cert-file",
            "tls-ciphers",
            "tls-ciphersuites",
            "tls-client-cert-file",
            "tls-client-key-file",
            "tls-client-key-file-pass",
            "tls-cluster",
            "tls-dh-params-file",
            "tls-key-file",
            "tls-key-file-pass",
            "tls-port",
            "tls-prefer-server-ciphers",
            "tls-protocols",
            "tls-replication",
            "tls-session-cache-size",
            "tls-session-cache-timeout",
            "tls-session-caching",
        ]
    );
    for (name, value, why) in [
        (
            "tls-dh-params-file",
            "dh.pem",
            "rustls negotiates keys with ECDHE only",
        ),
        (
            "tls-ca-cert-dir",
            "/etc/ssl/certs",
            "put the CA certificates in one PEM file",
        ),
        ("tls-replication", "yes", "no Redis replication"),
    ] {
        let e = config_set(&mut c, name, value).unwrap_err();
        assert!(
            e.contains(&format!(
                "CONFIG SET failed (possibly related to argument '{name}')"
            )) && e.contains(why),
            "{name}: {e}"
        );
        config_set(&mut c, name, "").unwrap_or_else(|e| {
            assert_eq!(name, "tls-replication", "{e}");
        });
    }
    // At start too.
    let dir = tempfile::tempdir().unwrap();
    let port = free_port().to_string();
    let text = refused_start(
        &["--port", &port, "--tls-dh-params-file", "dh.pem"],
        Some(dir.path()),
    );
    assert!(text.contains("ECDHE only"), "{text}");
}

/// CONFIG SET tls-port on a server started without one: the tls-* files are read and the
/// port opened (Redis's error when the files cannot be used); a second CONFIG SET moves it
/// (the old port refuses connections), a port in use answers Redis's error and the port in
/// use stays, 0 closes it.
#[test]
fn config_set_tls_port_opens_moves_and_closes_the_tls_port() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "ca");
    let server_cert = ca.issue(dir.path(), "server");
    let client = ca.issue(dir.path(), "client");
    let set = |c: &mut redis::Connection, port: u16| -> Result<String, String> {
        redis::cmd("CONFIG")
            .arg("SET")
            .arg("tls-port")
            .arg(port)
            .query(c)
            .map_err(|e| e.to_string())
    };
    let connect = |port: u16| {
        redis::Client::open(format!("redis://127.0.0.1:{port}/"))
            .unwrap()
            .get_connection()
            .unwrap()
    };

    // No certificate configured: Redis's text, and no port is opened.
    let bare_port = free_port();
    let bare = Proc::start(
        dir.path(),
        &["--port".to_string(), bare_port.to_string()],
        bare_port,
    );
    let mut c = connect(bare_port);
    let tried = free_port();
    let e = set(&mut c, tried).unwrap_err();
    assert!(
        e.contains("Unable to update TLS configuration. Check server logs."),
        "{e}"
    );
    assert!(TcpStream::connect(("127.0.0.1", tried)).is_err());
    let got: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("tls-port")
        .query(&mut c)
        .unwrap();
    assert_eq!(got, ["tls-port", "0"]);
    drop(bare);

    let port = free_port();
    let args = server_args(port, None, &server_cert, &ca);
    let _server = Proc::start(dir.path(), &args, port);
    let mut c = connect(port);
    let first = free_port();
    assert_eq!(set(&mut c, first).as_deref(), Ok("OK"));
    assert_eq!(ping(first, &ca.pem, Some(&client)).as_deref(), Ok("PONG"));
    let mut over_tls = tls_client(first, &ca.pem, Some(&client))
        .get_connection()
        .unwrap();

    let second = free_port();
    assert_eq!(set(&mut c, second).as_deref(), Ok("OK"));
    assert!(TcpStream::connect(("127.0.0.1", first)).is_err());
    assert_eq!(ping(second, &ca.pem, Some(&client)).as_deref(), Ok("PONG"));
    // The connection made over the old port stays.
    let pong: String = redis::cmd("PING").query(&mut over_tls).unwrap();
    assert_eq!(pong, "PONG");

    let busy = TcpListener::bind("127.0.0.1:0").unwrap();
    let e = set(&mut c, busy.local_addr().unwrap().port()).unwrap_err();
    assert!(
        e.contains("Unable to listen on this port. Check server logs."),
        "{e}"
    );
    assert_eq!(ping(second, &ca.pem, Some(&client)).as_deref(), Ok("PONG"));

    assert_eq!(set(&mut c, 0).as_deref(), Ok("OK"));
    assert!(TcpStream::connect(("127.0.0.1", second)).is_err());
    let pong: String = redis::cmd("PING").query(&mut over_tls).unwrap();
    assert_eq!(pong, "PONG");
}

/// Start tollgate with `args` (in `dir`) where it must refuse to start: its output
/// (stdout then stderr) once it has exited with a failure. Bounded: a server that starts
/// anyway is killed after 20 s and the test fails.
fn refused_start(args: &[&str], dir: Option<&std::path::Path>) -> String {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tollgate"));
    cmd.args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    if let Some(dir) = dir {
        cmd.current_dir(dir);
    }
    let mut child = cmd.spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("tollgate started with {args:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(!status.success(), "{args:?}");
    let mut text = String::new();
    std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut text).unwrap();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut text).unwrap();
    text
}

/// `total_writes_processed` of the server behind the plaintext `port`.
fn writes_processed(port: u16) -> u64 {
    let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .unwrap()
        .get_connection()
        .unwrap();
    let info: String = redis::cmd("INFO").arg("stats").query(&mut c).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("total_writes_processed:"))
        .expect("total_writes_processed in INFO stats")
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn commands_that_arrive_as_several_tls_records_are_answered_in_one_write() {
    use std::sync::Arc;
    let s = setup(&[]);
    let roots = tollgate_raft::tls::load_roots(&s.ca.pem).unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_client_auth_cert(
        tollgate_raft::tls::load_certs(&s.client.cert).unwrap(),
        tollgate_raft::tls::load_key(&s.client.key, None).unwrap(),
    )
    .unwrap();
    let config = Arc::new(config);
    // 30 INCRs, each in its own TLS record (as a multiplexing client sends commands, one
    // write each), put on the socket with one write so that they arrive together.
    let expected: String = (1..=30).map(|i| format!(":{i}\r\n")).collect();
    // A tokio-rustls read (0.26.6) takes every record already here; one that gave a single
    // record's plaintext would mean 30 writes. The kernel may still hand the records over
    // in more than one read, so one write in any of five attempts is the pass.
    let mut writes = Vec::new();
    for attempt in 0..5 {
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
        let mut conn = rustls::ClientConnection::new(config.clone(), name).unwrap();
        let mut tcp = TcpStream::connect(("127.0.0.1", s.tls_port)).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        while conn.is_handshaking() {
            conn.complete_io(&mut tcp).unwrap();
        }
        // A PING first: the session tickets sent after the handshake are read, and no
        // write of the handshake is left to count.
        let mut stream = rustls::Stream::new(&mut conn, &mut tcp);
        stream.write_all(b"PING\r\n").unwrap();
        let mut pong = [0u8; 7];
        stream.read_exact(&mut pong).unwrap();
        assert_eq!(&pong, b"+PONG\r\n");
        std::thread::sleep(Duration::from_millis(50));
        // What counting costs (the INFO connection's replies are writes too).
        let first = writes_processed(s.port);
        let before = writes_processed(s.port);
        let counting = before - first;
        let key = format!("n{attempt}");
        let incr = format!("*2\r\n$4\r\nINCR\r\n${}\r\n{key}\r\n", key.len());
        let mut wire = Vec::new();
        for _ in 0..30 {
            conn.writer().write_all(incr.as_bytes()).unwrap();
            while conn.wants_write() {
                conn.write_tls(&mut wire).unwrap();
            }
        }
        // Count the records: a 5-byte header each, its length in the last two bytes.
        let (mut records, mut at) = (0, 0);
        while at + 5 <= wire.len() {
            at += 5 + u16::from_be_bytes([wire[at + 3], wire[at + 4]]) as usize;
            records += 1;
        }
        assert_eq!(records, 30);
        tcp.write_all(&wire).unwrap();
        let mut replies = vec![0u8; expected.len()];
        rustls::Stream::new(&mut conn, &mut tcp)
            .read_exact(&mut replies)
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&replies), expected);
        std::thread::sleep(Duration::from_millis(50));
        writes.push(writes_processed(s.port) - before - counting);
        if writes.last() == Some(&1) {
            return;
        }
    }
    panic!("30 commands in 30 TLS records took these writes in each attempt: {writes:?}");
}
