//! Process-level cluster harness shared by the cluster test files: three (or more) `tollgate`
//! nodes on free local ports, each with its own temporary data directory and log file, driven
//! through the Redis protocol; load generators that record every acknowledged reply; and the
//! checks that no acknowledged write was lost. Every wait is bounded by a deadline, and every
//! child process is killed when its `Node` is dropped (also on a failed assert).

#![allow(dead_code)]

#[path = "../tls_support/mod.rs"]
pub mod tls_support;

use std::collections::HashSet;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use redis::{Connection, FromRedisValue, RedisResult};

static SERIAL: Mutex<()> = Mutex::new(());
static NEXT_PORT: AtomicU16 = AtomicU16::new(0);
pub const SECRET: &str = "cluster-test-secret-0123456789";
/// How long a client waits for a quorum in these tests (-CLUSTERDOWN after that).
pub const CLUSTER_TIMEOUT_MS: u64 = 1000;

pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A client port `p` such that `p` and the cluster port `p + 10000` are both free now, both below
/// the kernel's ephemeral range (32768 up), so that no outgoing connection or `bind(0)` elsewhere
/// takes a port while the node that owns it restarts.
pub fn free_port_pair() -> u16 {
    let _ = NEXT_PORT.compare_exchange(
        0,
        20_000 + (std::process::id() % 130) as u16 * 20,
        Ordering::SeqCst,
        Ordering::SeqCst,
    );
    for _ in 0..2000 {
        let mut p = NEXT_PORT.fetch_add(1, Ordering::SeqCst);
        if p >= 22_700 {
            NEXT_PORT.store(20_001, Ordering::SeqCst);
            p = 20_000;
        }
        let free = |port: u16| TcpListener::bind(("127.0.0.1", port)).is_ok();
        if free(p) && free(p + 10_000) {
            return p;
        }
    }
    panic!("no free port pair");
}

/// The nodes' `--log` filter: `warn`, or `TOLLGATE_TEST_LOG` when set (e.g.
/// `warn,tollgate_raft=debug` shows every pre-vote and why it was refused).
fn log_filter() -> String {
    std::env::var("TOLLGATE_TEST_LOG").unwrap_or_else(|_| "warn".into())
}

pub struct Node {
    pub id: u64,
    pub port: u16,
    pub cluster_port: u16,
    pub dir: PathBuf,
    pub peers: Option<String>,
    /// Further command-line flags for this node.
    pub extra: Vec<String>,
    /// The cluster secret it starts with.
    pub secret: String,
    /// A durable single node: started with `--data-dir` but without `--node-id` and
    /// `--cluster-secret` (it is node 1 and keeps its secret in its data directory).
    pub solo: bool,
    pub child: Option<Child>,
}

impl Node {
    /// A durable single node on a free port pair, its data in `dir`, not started yet.
    pub fn solo(dir: PathBuf, extra: &[&str]) -> Node {
        let port = free_port_pair();
        Node {
            id: 1,
            port,
            cluster_port: port + 10_000,
            dir,
            peers: None,
            extra: extra.iter().map(|a| a.to_string()).collect(),
            secret: String::new(),
            solo: true,
            child: None,
        }
    }

    /// The secret a durable single node keeps in its data directory.
    pub fn stored_secret(&self) -> String {
        std::fs::read_to_string(self.dir.join("cluster-secret"))
            .unwrap()
            .trim()
            .to_string()
    }

    pub fn cluster_addr(&self) -> String {
        format!("127.0.0.1:{}", self.cluster_port)
    }

    pub fn spawn(&mut self) {
        self.spawn_limited(None);
    }

    /// Start the node; with `max_file_bytes`, no file it writes may grow past that many bytes
    /// (RLIMIT_FSIZE, with SIGXFSZ ignored so that a write past it fails with EFBIG, as a write
    /// to a full disk fails with ENOSPC).
    pub fn spawn_limited(&mut self, max_file_bytes: Option<u64>) {
        self.launch_limited(max_file_bytes);
        self.wait_answer();
    }

    fn launch_limited(&mut self, max_file_bytes: Option<u64>) {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_tollgate"));
        if let Some(limit) = max_file_bytes {
            use std::os::unix::process::CommandExt;
            // SAFETY: between fork and exec this only calls async-signal-safe functions
            // (setrlimit, signal) on plain values; it touches no lock or allocation.
            unsafe {
                cmd.pre_exec(move || {
                    let rl = libc::rlimit {
                        rlim_cur: limit as libc::rlim_t,
                        rlim_max: limit as libc::rlim_t,
                    };
                    if libc::setrlimit(libc::RLIMIT_FSIZE, &rl) != 0
                        || libc::signal(libc::SIGXFSZ, libc::SIG_IGN) == libc::SIG_ERR
                    {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        cmd.args(["--bind", "127.0.0.1", "--port", &self.port.to_string()]);
        if !self.solo {
            cmd.args(["--node-id", &self.id.to_string()])
                .args(["--cluster-secret", &self.secret])
                .args(["--cluster-timeout-ms", &CLUSTER_TIMEOUT_MS.to_string()]);
        }
        cmd.args(["--data-dir", &self.dir.to_string_lossy()])
            .args(["--appendfsync", "always", "--enable-debug-command", "yes"])
            .args(["--log", &log_filter()]);
        if let Some(p) = &self.peers {
            cmd.args(["--peers", p]);
        }
        cmd.args(&self.extra);
        std::fs::create_dir_all(&self.dir).unwrap();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.with_extension("log"))
            .unwrap();
        // The log goes to stdout (as Redis's does by default); both streams to the file.
        cmd.stdout(log.try_clone().unwrap()).stderr(log);
        self.child = Some(cmd.spawn().expect("spawn tollgate"));
    }

    /// Start the node without waiting for it to answer (one expected to refuse to start).
    pub fn launch(&mut self) {
        self.launch_limited(None);
    }

    fn wait_answer(&self) {
        // The client port is bound before the cluster port, and commands are served once
        // both are: wait for an answer (RAFT.STATUS: answered without a leader), not just a
        // connection.
        let deadline = Instant::now() + Duration::from_secs(10);
        let url = format!("redis://127.0.0.1:{}/", self.port);
        let answers = || -> Option<String> {
            let client = redis::Client::open(url.as_str()).ok()?;
            let mut c = client
                .get_connection_with_timeout(Duration::from_millis(500))
                .ok()?;
            c.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
            redis::cmd("RAFT.STATUS").query(&mut c).ok()
        };
        while answers().is_none() {
            assert!(Instant::now() < deadline, "node {} did not answer", self.id);
            thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn signal(&self, sig: &str) {
        let pid = self.child.as_ref().expect("running").id().to_string();
        let ok = Command::new("kill").args([sig, &pid]).status().unwrap();
        assert!(ok.success());
    }

    pub fn alive(&self) -> bool {
        self.child.is_some()
    }

    /// Wait (at most `within`) for the node to exit by itself; returns its exit status.
    pub fn wait_exit(&mut self, within: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + within;
        let child = self.child.as_mut().expect("running");
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                self.child = None;
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "node {} did not exit within {within:?}",
                self.id
            );
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// True once the node's process has ended (it is then no longer counted as alive).
    pub fn exited(&mut self) -> bool {
        let ended = match self.child.as_mut() {
            Some(child) => child.try_wait().unwrap().is_some(),
            None => return true,
        };
        if ended {
            self.child = None;
        }
        ended
    }

    /// Everything the node wrote to stderr (its log), across restarts.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(self.dir.with_extension("log")).unwrap_or_default()
    }

    /// The node's Raft log file.
    pub fn raft_log(&self) -> PathBuf {
        self.dir.join("log").join("raft.log")
    }

    pub fn conn(&self) -> Connection {
        let client = redis::Client::open(format!("redis://127.0.0.1:{}/", self.port)).unwrap();
        let c = client
            .get_connection_with_timeout(Duration::from_secs(5))
            .expect("connect");
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        c.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
        c
    }

    pub fn q<T: FromRedisValue>(&self, args: &[&str]) -> RedisResult<T> {
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        cmd.query(&mut self.conn())
    }

    /// RAFT.STATUS field.
    pub fn status(&self, field: &str) -> Option<String> {
        let text: String = self.q(&["RAFT.STATUS"]).ok()?;
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{field}:")))
            .map(|v| v.trim().to_string())
    }

    pub fn digest(&self) -> String {
        self.q(&["DEBUG", "DIGEST"]).expect("digest")
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(c) = &self.child {
            // A SIGSTOPped child must be continued to die promptly.
            let _ = Command::new("kill")
                .args(["-CONT", &c.id().to_string()])
                .status();
        }
        self.kill9();
    }
}

pub struct Cluster {
    pub nodes: Vec<Node>,
    pub dir: tempfile::TempDir,
    /// The CA of the cluster link's certificates (with `--tls-cluster yes`).
    pub tls_ca: Option<tls_support::Ca>,
}

/// With `TOLLGATE_TEST_KEEP_LOGS=<dir>`, a cluster copies its nodes' logs into a new folder of
/// `<dir>` when it is dropped (the data directory itself is deleted), and prints where.
impl Drop for Cluster {
    fn drop(&mut self) {
        let Ok(keep) = std::env::var("TOLLGATE_TEST_KEEP_LOGS") else {
            return;
        };
        let name = self.dir.path().file_name().unwrap_or_default();
        let to = std::path::Path::new(&keep).join(name);
        if std::fs::create_dir_all(&to).is_err() {
            return;
        }
        for n in &self.nodes {
            let log = n.dir.with_extension("log");
            if let Some(file) = log.file_name() {
                let _ = std::fs::copy(&log, to.join(file));
            }
        }
        eprintln!("node logs kept in {}", to.display());
    }
}

impl Cluster {
    pub fn start(n: u64) -> Cluster {
        Cluster::start_with(n, &[])
    }

    /// `n` nodes started with `extra` flags each.
    pub fn start_with(n: u64, extra: &[&str]) -> Cluster {
        let ports = (0..n).map(|_| free_port_pair()).map(|p| (p, p + 10_000));
        Cluster::start_on(ports.collect(), extra)
    }

    /// `n` nodes with mutual TLS on the cluster link (`--tls-cluster yes`): a CA made now,
    /// and a certificate it signs for each node (see [`Cluster::tls_flags`]).
    pub fn start_tls(n: u64) -> Cluster {
        Cluster::start_secured(n, true)
    }

    /// `n` nodes, with mutual TLS on the cluster link if `tls` (the fault tests run both ways).
    pub fn start_secured(n: u64, tls: bool) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let ports = (0..n).map(|_| free_port_pair()).map(|p| (p, p + 10_000));
        let ca = tls.then(|| tls_support::Ca::new(dir.path(), "cluster-ca"));
        let flags: Vec<Vec<String>> = (1..=n)
            .map(|id| match &ca {
                Some(ca) => Cluster::tls_flags(ca, dir.path(), id),
                None => Vec::new(),
            })
            .collect();
        let mut c = Cluster::start_in(dir, ports.collect(), |id| flags[id as usize - 1].clone());
        c.tls_ca = ca;
        c
    }

    /// The flags that give node `id` a certificate from `ca` (written into `dir`) and turn on
    /// mutual TLS on its cluster link.
    pub fn tls_flags(ca: &tls_support::Ca, dir: &std::path::Path, id: u64) -> Vec<String> {
        let cert = ca.issue(dir, &format!("node-{id}-cert"));
        vec![
            "--tls-cluster".into(),
            "yes".into(),
            "--tls-cert-file".into(),
            tls_support::arg(&cert.cert),
            "--tls-key-file".into(),
            tls_support::arg(&cert.key),
            "--tls-ca-cert-file".into(),
            tls_support::arg(&ca.pem),
        ]
    }

    /// `n` nodes, node `id` started with the flags `extra(id)`.
    pub fn start_each(n: u64, extra: impl Fn(u64) -> Vec<String>) -> Cluster {
        let ports: Vec<(u16, u16)> = (0..n)
            .map(|_| free_port_pair())
            .map(|p| (p, p + 10_000))
            .collect();
        Cluster::start_in(tempfile::tempdir().unwrap(), ports, extra)
    }

    /// One node per `(client port, cluster port)`, started with `extra` flags each.
    pub fn start_on(ports: Vec<(u16, u16)>, extra: &[&str]) -> Cluster {
        let extra: Vec<String> = extra.iter().map(|a| a.to_string()).collect();
        Cluster::start_in(tempfile::tempdir().unwrap(), ports, |_| extra.clone())
    }

    /// One node per `(client port, cluster port)` in `dir`, node `id` started with `extra(id)`.
    pub fn start_in(
        dir: tempfile::TempDir,
        ports: Vec<(u16, u16)>,
        extra: impl Fn(u64) -> Vec<String>,
    ) -> Cluster {
        let n = ports.len() as u64;
        let peers = (1..=n)
            .map(|id| format!("{id}@127.0.0.1:{}", ports[id as usize - 1].1))
            .collect::<Vec<_>>()
            .join(",");
        let mut nodes: Vec<Node> = (1..=n)
            .map(|id| Node {
                id,
                port: ports[id as usize - 1].0,
                cluster_port: ports[id as usize - 1].1,
                dir: dir.path().join(format!("node-{id}")),
                peers: Some(peers.clone()),
                extra: extra(id),
                secret: SECRET.to_string(),
                solo: false,
                child: None,
            })
            .collect();
        for node in &mut nodes {
            node.spawn();
        }
        let c = Cluster {
            nodes,
            dir,
            tls_ca: None,
        };
        c.wait_leader(Duration::from_secs(15));
        c
    }

    /// A node that will join later with RAFT.ADDNODE (no --peers).
    pub fn add_joiner(&mut self, id: u64) -> usize {
        self.add_joiner_with_secret(id, SECRET)
    }

    /// A node that will be asked to join with RAFT.ADDNODE, holding `secret`.
    pub fn add_joiner_with_secret(&mut self, id: u64, secret: &str) -> usize {
        self.add_joiner_with(id, secret, Vec::new())
    }

    /// A node that will be asked to join with RAFT.ADDNODE, holding `secret`, started with
    /// `extra` flags.
    pub fn add_joiner_with(&mut self, id: u64, secret: &str, extra: Vec<String>) -> usize {
        let port = free_port_pair();
        let mut node = Node {
            id,
            port,
            cluster_port: port + 10_000,
            dir: self.dir.path().join(format!("node-{id}")),
            peers: None,
            extra,
            secret: secret.to_string(),
            solo: false,
            child: None,
        };
        node.spawn();
        self.nodes.push(node);
        self.nodes.len() - 1
    }

    /// Cut node `i` off from every other node (RAFT.PARTITION with their ids; RAFT.HEAL
    /// on node `i` ends it).
    pub fn isolate(&self, i: usize) {
        let ids: Vec<String> = (0..self.nodes.len())
            .filter(|&j| j != i)
            .map(|j| self.nodes[j].id.to_string())
            .collect();
        let mut args = vec!["RAFT.PARTITION"];
        args.extend(ids.iter().map(String::as_str));
        let _: () = self.nodes[i].q(&args).unwrap();
    }

    /// Index of the node every live node agrees is the leader, waiting up to `within`.
    pub fn wait_leader(&self, within: Duration) -> usize {
        let deadline = Instant::now() + within;
        loop {
            let live: Vec<&Node> = self.nodes.iter().filter(|n| n.alive()).collect();
            let leaders: Vec<Option<String>> = live.iter().map(|n| n.status("leader_id")).collect();
            if let Some(Some(l)) = leaders.first() {
                if l != "-" && leaders.iter().all(|x| x.as_deref() == Some(l)) {
                    if let Some(i) = self.nodes.iter().position(|n| n.id.to_string() == *l) {
                        if self.nodes[i].alive()
                            && self.nodes[i].status("role").as_deref() == Some("leader")
                        {
                            return i;
                        }
                    }
                }
            }
            assert!(Instant::now() < deadline, "no agreed leader: {leaders:?}");
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// The voter ids `node` lists in RAFT.STATUS.
    pub fn voters(&self, node: usize) -> Vec<u64> {
        let status: String = self.nodes[node].q(&["RAFT.STATUS"]).unwrap();
        status
            .lines()
            .filter(|l| l.ends_with("voter=yes"))
            .filter_map(|l| l.strip_prefix("member_")?.split(':').next()?.parse().ok())
            .collect()
    }

    /// Wait until every live node prints the same DEBUG DIGEST; returns it.
    pub fn converged_digest(&self, within: Duration) -> String {
        let deadline = Instant::now() + within;
        loop {
            let digests: Vec<String> = self
                .nodes
                .iter()
                .filter(|n| n.alive())
                .map(|n| n.q::<String>(&["DEBUG", "DIGEST"]).unwrap_or_default())
                .collect();
            if !digests[0].is_empty() && digests.iter().all(|d| *d == digests[0]) {
                return digests[0].clone();
            }
            assert!(Instant::now() < deadline, "digests differ: {digests:?}");
            thread::sleep(Duration::from_millis(100));
        }
    }
}

pub fn is_cluster_down(e: &redis::RedisError) -> bool {
    e.code() == Some("CLUSTERDOWN") || e.to_string().contains("CLUSTERDOWN")
}

/// What one load thread saw: acknowledged INCR values and allowed limiter replies.
#[derive(Default)]
pub struct Seen {
    pub incr: Vec<i64>,
    pub allowed: u64,
    pub failed: u64,
}

/// INCR `ctr` and LIMIT.TOKEN `lim` (capacity 100, 1 per hour) in a loop on `ports` until
/// `stop`, moving to the next port on a connection failure; only acknowledged replies count.
pub fn load(ports: Vec<u16>, stop: Arc<AtomicBool>, limiter: bool) -> thread::JoinHandle<Seen> {
    thread::spawn(move || {
        let mut seen = Seen::default();
        let mut which = 0;
        let connect = |port: u16| {
            let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).ok()?;
            let c = client
                .get_connection_with_timeout(Duration::from_millis(500))
                .ok()?;
            c.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
            Some(c)
        };
        let mut conn = connect(ports[0]);
        while !stop.load(Ordering::Relaxed) {
            let Some(c) = conn.as_mut() else {
                which = (which + 1) % ports.len();
                conn = connect(ports[which]);
                if conn.is_none() {
                    thread::sleep(Duration::from_millis(20));
                }
                continue;
            };
            let r: RedisResult<i64> = redis::cmd("INCR").arg("ctr").query(c);
            match r {
                Ok(v) => seen.incr.push(v),
                Err(e) => {
                    seen.failed += 1;
                    if !is_cluster_down(&e) {
                        conn = None;
                    }
                    continue;
                }
            }
            if limiter {
                let r: RedisResult<Vec<i64>> = redis::cmd("LIMIT.TOKEN")
                    .arg("lim")
                    .arg(100)
                    .arg(1)
                    .arg("1h")
                    .query(c);
                match r {
                    Ok(v) => seen.allowed += u64::from(v.first() == Some(&1)),
                    Err(e) => {
                        seen.failed += 1;
                        if !is_cluster_down(&e) {
                            conn = None;
                        }
                    }
                }
            }
        }
        seen
    })
}

/// `threads` load threads (see [`load`]) over `ports`, thread `t` starting at node `t % n`.
pub fn load_all(
    ports: &[u16],
    threads: usize,
    stop: &Arc<AtomicBool>,
    limiter: bool,
) -> Vec<thread::JoinHandle<Seen>> {
    (0..threads)
        .map(|t| {
            let mut p = ports.to_vec();
            p.rotate_left(t % ports.len());
            load(p, stop.clone(), limiter)
        })
        .collect()
}

/// Every acknowledged INCR value is distinct and none was lost: `node`'s final counter is at
/// least the highest acknowledged value and the number of acknowledgements. Returns that number.
pub fn assert_incrs_exact(seen: &[Seen], node: &Node) -> usize {
    let acked: Vec<i64> = seen.iter().flat_map(|s| s.incr.iter().copied()).collect();
    let unique: HashSet<i64> = acked.iter().copied().collect();
    assert_eq!(
        unique.len(),
        acked.len(),
        "an INCR value was returned twice"
    );
    let max = *acked.iter().max().expect("some INCR acknowledged");
    let fin: i64 = node.q(&["GET", "ctr"]).unwrap();
    assert!(
        fin >= max && fin >= acked.len() as i64,
        "lost writes: final {fin}, max {max}, {} acknowledged",
        acked.len()
    );
    acked.len()
}

/// Where the records of a log file that is not damaged end: walk the `[len][crc][payload]`
/// headers until the zeros of the space allocated ahead of them.
pub fn log_records_end(bytes: &[u8]) -> usize {
    let mut pos = 0;
    while pos + 8 <= bytes.len() && bytes[pos..pos + 8].iter().any(|&b| b != 0) {
        let len = u32::from_le_bytes(bytes[pos..pos + 4].try_into().unwrap()) as usize;
        pos += 8 + len;
    }
    pos.min(bytes.len())
}

/// Flip one bit of the byte at `at` of the file at `path`.
pub fn flip_byte(path: &std::path::Path, at: usize) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[at] ^= 0x10;
    std::fs::write(path, &bytes).unwrap();
}

/// Run `f` until it returns `Some`, at most `within`.
pub fn eventually<T>(what: &str, within: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        thread::sleep(Duration::from_millis(50));
    }
}

/// `GET path` on `port`: the status code and the body.
pub fn http_get(port: u16, path: &str) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    use std::io::{Read, Write};
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// The value of series `name` whose labels include `labels`, if there is one.
pub fn metric(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (n, rest) = match series.split_once('{') {
                Some((n, rest)) => (n, rest.trim_end_matches('}')),
                None => (series, ""),
            };
            if n != name {
                return None;
            }
            let all = labels
                .iter()
                .all(|(k, v)| rest.split(',').any(|kv| kv == format!("{k}=\"{v}\"")));
            all.then(|| value.parse().ok()).flatten()
        })
}
