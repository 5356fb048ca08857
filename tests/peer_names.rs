//! Peers given by host name (`--peers 1@localhost:17001,...`, Kubernetes' stable pod names):
//! the nodes form a cluster, and a node that comes back under the same name at a new address
//! is found there, after a clean restart and after its old address went silent (a lost
//! machine: no FIN, no RST). The second test runs in a network and mount namespace of its own
//! (so it can give names its own `/etc/hosts`, use any loopback address and drop a host's
//! packets without touching the machine's network), which needs root (`CAP_SYS_ADMIN`).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::thread;
use std::time::{Duration, Instant};

use redis::{Connection, FromRedisValue, RedisResult};

const SECRET: &str = "peer-names-secret-0123456789";

/// One node process listening on `host:port` (client) and `host:cluster_port` (Raft).
struct Node {
    id: u64,
    host: String,
    port: u16,
    cluster_port: u16,
    peers: String,
    dir: PathBuf,
    child: Option<Child>,
}

impl Node {
    /// Start (or restart, on the same data directory) and wait until it listens.
    fn spawn(&mut self) {
        std::fs::create_dir_all(&self.dir).unwrap();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.with_extension("log"))
            .unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_tollgate"));
        cmd.args(["--bind", &self.host, "--port", &self.port.to_string()])
            .args(["--cluster-port", &self.cluster_port.to_string()])
            .args(["--node-id", &self.id.to_string(), "--peers", &self.peers])
            .args(["--cluster-secret", SECRET])
            .args(["--data-dir", &self.dir.to_string_lossy()])
            .args(["--cluster-timeout-ms", "5000"])
            .args(["--enable-debug-command", "yes", "--log", "info"])
            .env("RUST_BACKTRACE", "0")
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        self.child = Some(cmd.spawn().expect("spawn tollgate"));
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect((self.host.as_str(), self.port)).is_err() {
            assert!(Instant::now() < deadline, "node {} did not listen", self.id);
            thread::sleep(Duration::from_millis(20));
        }
    }

    fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn conn(&self) -> Connection {
        let url = format!("redis://{}:{}/", self.host, self.port);
        let c = redis::Client::open(url)
            .unwrap()
            .get_connection_with_timeout(Duration::from_secs(5))
            .expect("connect");
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        c
    }

    fn q<T: FromRedisValue>(&self, args: &[&str]) -> RedisResult<T> {
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        cmd.query(&mut self.conn())
    }

    fn status(&self, field: &str) -> Option<String> {
        let text: String = self.q(&["RAFT.STATUS"]).ok()?;
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{field}:")))
            .map(|v| v.trim().to_string())
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(self.dir.with_extension("log")).unwrap_or_default()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Three nodes; `name(id)` is the host part of node `id`'s cluster address in `--peers`.
fn nodes(
    dir: &Path,
    name: impl Fn(u64) -> String,
    host: impl Fn(u64) -> String,
    ports: &[(u16, u16)],
) -> Vec<Node> {
    let peers = (1..=3u64)
        .map(|id| format!("{id}@{}:{}", name(id), ports[id as usize - 1].1))
        .collect::<Vec<_>>()
        .join(",");
    (1..=3u64)
        .map(|id| Node {
            id,
            host: host(id),
            port: ports[id as usize - 1].0,
            cluster_port: ports[id as usize - 1].1,
            peers: peers.clone(),
            dir: dir.join(format!("node-{id}")),
            child: None,
        })
        .collect()
}

/// The leader's id once every node that is up names the same one.
fn wait_leader(nodes: &[&Node], within: Duration) -> u64 {
    let deadline = Instant::now() + within;
    loop {
        let seen: Vec<Option<String>> = nodes.iter().map(|n| n.status("leader_id")).collect();
        if let Some(Some(l)) = seen.first() {
            if l != "-" && seen.iter().all(|x| x.as_deref() == Some(l)) {
                return l.parse().unwrap();
            }
        }
        assert!(Instant::now() < deadline, "no agreed leader: {seen:?}");
        thread::sleep(Duration::from_millis(50));
    }
}

/// Wait until every node has the same keyspace digest and `key` reads `want` on each.
fn wait_converged(nodes: &[&Node], key: &str, want: i64, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let digests: Vec<String> = nodes
            .iter()
            .map(|n| n.q::<String>(&["DEBUG", "DIGEST"]).unwrap_or_default())
            .collect();
        let values: Vec<Option<i64>> = nodes.iter().map(|n| n.q(&["GET", key]).ok()).collect();
        if !digests[0].is_empty()
            && digests.iter().all(|d| *d == digests[0])
            && values.iter().all(|v| *v == Some(want))
        {
            return;
        }
        if Instant::now() >= deadline {
            let logs: Vec<String> = nodes.iter().map(|n| n.log_text()).collect();
            panic!("not converged: digests {digests:?}, {key} = {values:?}\nlogs: {logs:#?}");
        }
        thread::sleep(Duration::from_millis(200));
    }
}

fn incr(node: &Node, key: &str) -> i64 {
    node.q(&["INCR", key]).expect("INCR")
}

/// A free client port and a free cluster port on 127.0.0.1.
fn free_ports() -> (u16, u16) {
    let a = TcpListener::bind("127.0.0.1:0").unwrap();
    let b = TcpListener::bind("127.0.0.1:0").unwrap();
    (
        a.local_addr().unwrap().port(),
        b.local_addr().unwrap().port(),
    )
}

#[test]
fn peers_given_as_localhost_form_a_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let ports: Vec<(u16, u16)> = (0..3).map(|_| free_ports()).collect();
    let mut nodes = nodes(
        dir.path(),
        |_| "localhost".into(),
        |_| "127.0.0.1".into(),
        &ports,
    );
    for n in &mut nodes {
        n.spawn();
    }
    let all: Vec<&Node> = nodes.iter().collect();
    let leader = wait_leader(&all, Duration::from_secs(20));
    // The members keep the names they were given.
    let member: String = nodes[0].status(&format!("member_{leader}")).unwrap();
    assert!(member.contains("localhost:"), "{member}");
    // A write through a follower is forwarded to the leader by name and replicated to all.
    let follower = nodes.iter().find(|n| n.id != leader).unwrap();
    assert_eq!(incr(follower, "hits"), 1);
    assert_eq!(incr(&nodes[0], "hits"), 2);
    wait_converged(&all, "hits", 2, Duration::from_secs(20));
}

/// This thread's own network and mount namespaces (children it spawns share them): a loopback
/// interface of its own, and `/etc/hosts` replaced by `hosts`.
fn enter_private_network(hosts: &Path) {
    // SAFETY: unshare and mount change only this thread's namespaces; the arguments are valid
    // NUL-terminated strings that outlive the calls.
    unsafe {
        let rc = libc::unshare(libc::CLONE_NEWNET | libc::CLONE_NEWNS);
        assert_eq!(
            rc,
            0,
            "unshare(CLONE_NEWNET | CLONE_NEWNS) failed (this test needs root): {}",
            std::io::Error::last_os_error()
        );
        let root = c"/";
        let rc = libc::mount(
            std::ptr::null(),
            root.as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        );
        assert_eq!(rc, 0, "make / private: {}", std::io::Error::last_os_error());
        let source = std::ffi::CString::new(hosts.to_str().unwrap()).unwrap();
        let target = c"/etc/hosts";
        let rc = libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            std::ptr::null(),
            libc::MS_BIND,
            std::ptr::null(),
        );
        assert_eq!(
            rc,
            0,
            "bind /etc/hosts: {}",
            std::io::Error::last_os_error()
        );
    }
    ip(&["link", "set", "lo", "up"]);
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Rewrite the hosts file in place (the bind mount follows the inode).
fn write_hosts(path: &Path, node3: &str) {
    let text = format!(
        "127.0.0.1 localhost\n127.0.0.11 tg-node-1\n127.0.0.12 tg-node-2\n{node3} tg-node-3\n"
    );
    std::fs::write(path, text).unwrap();
}

/// Silently drop every packet from and to `addr` in this namespace (no RST, no ICMP): what a
/// lost machine looks like to its peers.
fn blackhole(addr: &str) {
    ip(&["route", "add", "blackhole", "default", "table", "100"]);
    ip(&["rule", "add", "from", addr, "lookup", "100", "pref", "10"]);
    ip(&["rule", "add", "to", addr, "lookup", "100", "pref", "11"]);
    // The local table comes first by default; look it up after the two rules above.
    ip(&["rule", "add", "lookup", "local", "pref", "20"]);
    ip(&["rule", "del", "pref", "0"]);
}

#[test]
fn a_peer_back_at_a_new_address_under_its_name_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    // Its own thread: the namespaces are this thread's and its children's only.
    thread::spawn(move || moved_peer_scenario(&path))
        .join()
        .unwrap_or_else(|e| std::panic::resume_unwind(e));
}

fn moved_peer_scenario(dir: &Path) {
    let hosts = dir.join("hosts");
    write_hosts(&hosts, "127.0.0.13");
    enter_private_network(&hosts);
    // A namespace of our own: fixed ports are free.
    let ports = [(7001, 17001), (7002, 17002), (7003, 17003)];
    let mut nodes = nodes(
        dir,
        |id| format!("tg-node-{id}"),
        |id| format!("127.0.0.1{id}"),
        &ports,
    );
    for n in &mut nodes {
        n.spawn();
    }
    {
        let refs: Vec<&Node> = nodes.iter().collect();
        wait_leader(&refs, Duration::from_secs(20));
        assert_eq!(incr(&nodes[0], "hits"), 1);
        wait_converged(&refs, "hits", 1, Duration::from_secs(20));
    }

    // A clean move: node 3 stops, `tg-node-3` now names 127.0.0.23, and node 3 starts there
    // with its data. Nodes 1 and 2 dial the name again and find it at the new address.
    nodes[2].kill9();
    write_hosts(&hosts, "127.0.0.23");
    assert_eq!(incr(&nodes[1], "hits"), 2);
    nodes[2].host = "127.0.0.23".into();
    nodes[2].spawn();
    {
        let refs: Vec<&Node> = nodes.iter().collect();
        wait_leader(&refs, Duration::from_secs(20));
        // Written through node 1 or 2: it reaches node 3 only through a connection from one
        // of them to node 3's new address (the leader's entries, or node 1's forwarding).
        assert_eq!(incr(&nodes[0], "hits"), 3);
        wait_converged(&refs, "hits", 3, Duration::from_secs(30));
    }

    // A silent loss: 127.0.0.23 drops every packet (node 3's FIN never arrives), node 3 is
    // gone, and comes back as 127.0.0.33. The others' connections to the old address look
    // open; only the TCP user timeout ends them, and the next dial finds the new address.
    blackhole("127.0.0.23");
    nodes[2].kill9();
    assert_eq!(incr(&nodes[1], "hits"), 4);
    write_hosts(&hosts, "127.0.0.33");
    nodes[2].host = "127.0.0.33".into();
    nodes[2].spawn();
    let refs: Vec<&Node> = nodes.iter().collect();
    // Node 3 is behind (it missed the 4th INCR), so it cannot win an election: it catches up
    // only once the leader's connection to the old address has ended and the leader dialed
    // the name again.
    wait_converged(&refs, "hits", 4, Duration::from_secs(60));
    assert_eq!(incr(&nodes[2], "hits"), 5);
    wait_converged(&refs, "hits", 5, Duration::from_secs(30));
}
