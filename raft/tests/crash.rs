//! A node killed with SIGKILL mid-write recovers every acknowledged write from its own disk.
//! The test binary re-runs itself as the child process that hosts the node.

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use common::{Cmd, Counter, SECRET};
use tollgate_raft::{Config, RaftNode};

const CHILD_ENV: &str = "TOLLGATE_RAFT_CRASH_CHILD";

fn config(dir: &str, addr: &str) -> Config {
    let peers = BTreeMap::from([(1, addr.to_string())]);
    Config::new(1, addr, peers, dir, SECRET)
}

/// The child's half: host the node and propose forever, printing each acknowledged value.
async fn run_child(spec: &str) {
    let (dir, addr) = spec.split_once('|').unwrap();
    let node = RaftNode::start(config(dir, addr), Arc::new(Counter::default()))
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let node = node.clone();
        tasks.push(tokio::spawn(async move {
            loop {
                if let Ok(out) = node.propose(Cmd::Incr).await {
                    println!("ACK {}", out.value);
                }
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_killed_with_sigkill_recovers_acknowledged_writes_from_disk() {
    if let Ok(spec) = std::env::var(CHILD_ENV) {
        return run_child(&spec).await;
    }
    common::init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let dir_str = dir.path().to_str().unwrap().to_string();
    let addr = format!("127.0.0.1:{}", common::free_port());
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "node_killed_with_sigkill_recovers_acknowledged_writes_from_disk",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, format!("{dir_str}|{addr}"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut highest = 0u64;
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(v) = line.strip_prefix("ACK ") {
                highest = highest.max(v.trim().parse().unwrap());
            }
            if highest >= 2000 {
                break;
            }
        }
        highest
    });
    let highest = tokio::task::spawn_blocking(move || reader.join().unwrap())
        .await
        .unwrap();
    child.kill().unwrap(); // SIGKILL: no shutdown, no final flush.
    child.wait().unwrap();
    assert!(highest >= 2000, "child acknowledged only {highest} writes");

    let node = RaftNode::start(config(&dir_str, &addr), Arc::new(Counter::default()))
        .await
        .unwrap();
    common::eventually("recovered state", Duration::from_secs(10), || {
        node.state_machine().value() >= highest
    })
    .await;
    node.read_barrier().await.unwrap();
    let recovered = node.state_machine().value();
    assert!(
        recovered >= highest,
        "lost acknowledged writes: {recovered} < {highest}"
    );
    let next = node.propose(Cmd::Incr).await.unwrap().value;
    assert_eq!(next, recovered + 1);
    node.shutdown().await;
}
