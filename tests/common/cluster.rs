//! A small three-node cluster harness for tests outside tests/cluster.rs: real `tollgate`
//! processes on free local ports, each with a temporary data directory, killed when dropped.
//! Every wait is bounded by a deadline.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::thread;
use std::time::{Duration, Instant};

use redis::{Connection, FromRedisValue, RedisResult};

const SECRET: &str = "scripting-safety-secret-0123456789";

/// A free client port `p` whose cluster port `p + 10000` is free too (below the ephemeral
/// range, so a restarted node gets its ports back).
fn free_port_pair(seed: &mut u16) -> u16 {
    for _ in 0..2000 {
        *seed = if *seed >= 22_700 { 20_001 } else { *seed + 1 };
        let free = |port: u16| TcpListener::bind(("127.0.0.1", port)).is_ok();
        if free(*seed) && free(*seed + 10_000) {
            return *seed;
        }
    }
    panic!("no free port pair");
}

/// One node process.
pub struct Node {
    pub id: u64,
    pub port: u16,
    dir: PathBuf,
    peers: String,
    child: Option<Child>,
}

impl Node {
    /// Start (or restart, on the same data directory) the process and wait until it listens.
    pub fn spawn(&mut self) {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_tollgate"));
        cmd.args(["--bind", "127.0.0.1", "--port", &self.port.to_string()])
            .args(["--node-id", &self.id.to_string()])
            .args(["--peers", &self.peers])
            .args(["--cluster-secret", SECRET])
            .args(["--data-dir", &self.dir.to_string_lossy()])
            .args(["--cluster-timeout-ms", "5000"])
            // A panic with RUST_BACKTRACE set symbolizes a backtrace of a debug binary
            // while the entry is applied (seconds under load): not what these tests time.
            .env("RUST_BACKTRACE", "0")
            .args(["--enable-debug-command", "yes", "--log", "warn"]);
        std::fs::create_dir_all(&self.dir).unwrap();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.with_extension("log"))
            .unwrap();
        // The log goes to stdout, panic messages to stderr: both into the file.
        cmd.stdout(log.try_clone().unwrap()).stderr(log);
        self.child = Some(cmd.spawn().expect("spawn tollgate"));
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "node {} did not listen", self.id);
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kill the process with SIGKILL.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Whether the process is still running (it has not exited on its own).
    pub fn running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => c.try_wait().ok().flatten().is_none(),
            None => false,
        }
    }

    /// A connection with bounded timeouts.
    pub fn conn(&self) -> Connection {
        let client = redis::Client::open(format!("redis://127.0.0.1:{}/", self.port)).unwrap();
        let c = client
            .get_connection_with_timeout(Duration::from_secs(5))
            .expect("connect");
        c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        c.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
        c
    }

    /// One command on a fresh connection.
    pub fn q<T: FromRedisValue>(&self, args: &[&str]) -> RedisResult<T> {
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        cmd.query(&mut self.conn())
    }

    /// What the process logged so far (all its runs).
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(self.dir.with_extension("log")).unwrap_or_default()
    }

    /// A field of RAFT.STATUS.
    pub fn status(&self, field: &str) -> Option<String> {
        let text: String = self.q(&["RAFT.STATUS"]).ok()?;
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{field}:")))
            .map(|v| v.trim().to_string())
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Three nodes forming one cluster.
pub struct Cluster {
    pub nodes: Vec<Node>,
    _dir: tempfile::TempDir,
}

impl Cluster {
    /// Start three nodes and wait for an agreed leader.
    pub fn start() -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let mut seed = 20_000 + (std::process::id() % 130) as u16 * 20 + 7;
        let ports: Vec<u16> = (0..3).map(|_| free_port_pair(&mut seed)).collect();
        let peers = (1..=3)
            .map(|id| format!("{id}@127.0.0.1:{}", ports[id - 1] + 10_000))
            .collect::<Vec<_>>()
            .join(",");
        let mut nodes: Vec<Node> = (1..=3u64)
            .map(|id| Node {
                id,
                port: ports[id as usize - 1],
                dir: dir.path().join(format!("node-{id}")),
                peers: peers.clone(),
                child: None,
            })
            .collect();
        for n in &mut nodes {
            n.spawn();
        }
        let c = Cluster { nodes, _dir: dir };
        c.wait_leader(Duration::from_secs(20));
        c
    }

    /// Index of the node all nodes agree leads, waiting up to `within`.
    pub fn wait_leader(&self, within: Duration) -> usize {
        let deadline = Instant::now() + within;
        loop {
            let leaders: Vec<Option<String>> =
                self.nodes.iter().map(|n| n.status("leader_id")).collect();
            if let Some(Some(l)) = leaders.first() {
                if l != "-" && leaders.iter().all(|x| x.as_deref() == Some(l)) {
                    if let Some(i) = self.nodes.iter().position(|n| n.id.to_string() == *l) {
                        return i;
                    }
                }
            }
            assert!(Instant::now() < deadline, "no agreed leader: {leaders:?}");
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// Wait until every node prints the same DEBUG DIGEST; returns it.
    pub fn converged_digest(&self, within: Duration) -> String {
        let deadline = Instant::now() + within;
        loop {
            let digests: Vec<String> = self
                .nodes
                .iter()
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
