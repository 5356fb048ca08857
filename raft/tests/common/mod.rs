//! Test harness: a counter state machine and a cluster of real nodes on 127.0.0.1.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tempfile::TempDir;
use tollgate_raft::{Config, NodeId, RaftNode, Stamp, StateMachine};

pub const SECRET: &[u8] = b"test-cluster-secret-0123456789";

/// A counter that also checks the time it is handed never goes backwards.
#[derive(Default)]
pub struct Counter {
    state: Mutex<CounterState>,
}

#[derive(Default, Clone, Serialize, Deserialize)]
pub struct CounterState {
    pub value: u64,
    pub last_now_us: u64,
    pub time_went_back: u64,
    /// `Cmd::Flagged` applied with its flag set: only from the typed copy a leader keeps of
    /// its own proposals (the encoding drops the flag).
    pub flags_seen: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Cmd {
    Incr,
    /// Counts as an increment; the payload only makes the entry big.
    Blob(Vec<u8>),
    /// Counts as an increment; the flag is not encoded, so it is set at apply only when the
    /// command applied is the proposer's own typed copy, not one decoded from the log.
    Flagged {
        #[serde(skip)]
        flag: bool,
    },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Out {
    pub value: u64,
    pub now_us: u64,
    /// The command was a `Cmd::Flagged` with its flag set.
    pub flag_seen: bool,
}

impl StateMachine for Counter {
    type Command = Cmd;
    type Output = Out;

    fn apply(&self, cmd: &Cmd, at: Stamp) -> Out {
        let now_us = at.time_us;
        let mut s = self.state.lock().unwrap();
        match cmd {
            Cmd::Incr | Cmd::Blob(_) | Cmd::Flagged { .. } => s.value += 1,
        }
        let flag_seen = matches!(cmd, Cmd::Flagged { flag: true });
        s.flags_seen += u64::from(flag_seen);
        if now_us < s.last_now_us {
            s.time_went_back += 1;
        }
        s.last_now_us = now_us;
        Out {
            value: s.value,
            now_us,
            flag_seen,
        }
    }

    fn snapshot(&self) -> Vec<u8> {
        postcard::to_allocvec(&*self.state.lock().unwrap()).unwrap()
    }

    fn key_count(&self) -> u64 {
        1
    }

    fn restore(&self, data: &[u8]) -> Result<(), String> {
        *self.state.lock().unwrap() = postcard::from_bytes(data).map_err(|e| e.to_string())?;
        Ok(())
    }
}

impl Counter {
    pub fn value(&self) -> u64 {
        self.state.lock().unwrap().value
    }

    pub fn flags_seen(&self) -> u64 {
        self.state.lock().unwrap().flags_seen
    }

    pub fn time_went_back(&self) -> u64 {
        self.state.lock().unwrap().time_went_back
    }
}

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

/// A port that is free now, below the kernel's ephemeral range and never handed out twice by
/// this process. A port from `bind(0)` could be taken by another test's outgoing connection or
/// `bind(0)` while a node that owns it is restarting.
pub fn free_port() -> u16 {
    const LOW: u16 = 12_000;
    const HIGH: u16 = 20_000;
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let _ = NEXT.compare_exchange(
        0,
        LOW + (std::process::id() % 300) as u16 * 20,
        Ordering::SeqCst,
        Ordering::SeqCst,
    );
    for _ in 0..(HIGH - LOW) {
        let mut port = NEXT.fetch_add(1, Ordering::SeqCst);
        if port >= HIGH {
            NEXT.store(LOW + 1, Ordering::SeqCst);
            port = LOW;
        }
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in {LOW}..{HIGH}");
}

/// Nodes of one test cluster, all in this process, each with its own data dir.
pub struct TestCluster {
    pub dir: TempDir,
    pub peers: BTreeMap<NodeId, String>,
    pub nodes: BTreeMap<NodeId, RaftNode<Counter>>,
    pub tweak: fn(&mut Config),
}

impl TestCluster {
    /// Start nodes `1..=n` forming one cluster.
    pub async fn start(n: u64, tweak: fn(&mut Config)) -> TestCluster {
        init_tracing();
        let peers = (1..=n)
            .map(|id| (id, format!("127.0.0.1:{}", free_port())))
            .collect();
        let mut cluster = TestCluster {
            dir: tempfile::tempdir().unwrap(),
            peers,
            nodes: BTreeMap::new(),
            tweak,
        };
        for id in 1..=n {
            cluster.start_node(id).await;
        }
        cluster
    }

    pub fn config(&self, id: NodeId) -> Config {
        let addr = self.peers[&id].clone();
        let mut config = Config::new(
            id,
            addr,
            self.peers.clone(),
            self.dir.path().join(format!("node{id}")),
            SECRET,
        );
        config.client_timeout = Duration::from_secs(2);
        (self.tweak)(&mut config);
        config
    }

    pub async fn start_node(&mut self, id: NodeId) {
        let node = RaftNode::start(self.config(id), std::sync::Arc::new(Counter::default()))
            .await
            .unwrap();
        self.nodes.insert(id, node);
    }

    pub async fn stop_node(&mut self, id: NodeId) {
        if let Some(node) = self.nodes.remove(&id) {
            node.shutdown().await;
        }
    }

    pub fn node(&self, id: NodeId) -> &RaftNode<Counter> {
        &self.nodes[&id]
    }

    /// The lowest node id not in `except` (e.g. a follower: `other_than(&[leader])`).
    pub fn other_than(&self, except: &[NodeId]) -> NodeId {
        self.nodes
            .keys()
            .copied()
            .find(|id| !except.contains(id))
            .expect("a node outside the exclusion list")
    }

    /// The leader among the running nodes once they agree on one.
    pub async fn wait_leader(&self, timeout: Duration) -> NodeId {
        let deadline = Instant::now() + timeout;
        loop {
            let leaders: Vec<NodeId> = self
                .nodes
                .values()
                .filter(|n| n.is_leader())
                .map(|n| n.id())
                .collect();
            if let [leader] = leaders[..] {
                if self
                    .nodes
                    .values()
                    .all(|n| n.leader().map(|l| l.0) == Some(leader))
                {
                    return leader;
                }
            }
            assert!(
                Instant::now() < deadline,
                "no agreed leader within {timeout:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Wait until every running node's counter equals `value` (after a read barrier).
    pub async fn wait_value(&self, value: u64, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        for node in self.nodes.values() {
            loop {
                let ok = node.read_barrier().await.is_ok() && node.state_machine().value() == value;
                if ok {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "node {} has {} (want {value}) after {timeout:?}",
                    node.id(),
                    node.state_machine().value()
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }

    pub async fn shutdown(mut self) {
        let ids: Vec<NodeId> = self.nodes.keys().copied().collect();
        for id in ids {
            self.stop_node(id).await;
        }
    }
}

/// Wait until `f` holds, polling.
pub async fn eventually(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Walk the log's `[len][crc32][payload]` records: the offset where they end, and whether
/// only zeros (space allocated ahead of the records) or nothing follows.
pub fn log_data_end(bytes: &[u8]) -> (usize, bool) {
    let mut pos = 0;
    while pos < bytes.len() {
        let rest = &bytes[pos..];
        if rest.iter().take(8).all(|&b| b == 0) {
            break;
        }
        let Some(header) = rest.get(..8) else {
            return (pos, false);
        };
        let len = u32::from_le_bytes(header[..4].try_into().unwrap()) as usize;
        let crc = u32::from_le_bytes(header[4..].try_into().unwrap());
        match rest.get(8..8 + len) {
            Some(payload) if crc32fast::hash(payload) == crc => pos += 8 + len,
            _ => return (pos, false),
        }
    }
    let clean = bytes[pos..].iter().all(|&b| b == 0);
    (pos, clean)
}
