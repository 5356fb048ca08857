//! Nodes whose disk lost acknowledged data: they must not vote until repaired from the
//! others, must repair by themselves, and no acknowledged write may be lost. (The same
//! scenarios with real server processes are in the server's `tests/cluster_faults.rs`.)

mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::{eventually, log_data_end, Cmd, TestCluster};
use tollgate_raft::{RepairReason, Role};

const SEC: Duration = Duration::from_secs(1);

fn log_path(cluster: &TestCluster, id: u64) -> PathBuf {
    cluster.dir.path().join(format!("node{id}/log/raft.log"))
}

/// Flip one bit of the byte at `fraction` of the log's records.
fn flip_log_byte(path: &PathBuf, fraction: f64) {
    let mut bytes = std::fs::read(path).unwrap();
    let (end, clean) = log_data_end(&bytes);
    assert!(clean, "log already damaged at {end}");
    let at = (end as f64 * fraction) as usize;
    bytes[at] ^= 0x10;
    std::fs::write(path, &bytes).unwrap();
}

fn repairing(cluster: &TestCluster, id: u64) -> bool {
    cluster.node(id).status().repair.is_some()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_with_a_corrupt_log_repairs_from_the_leader_and_votes_again() {
    let mut cluster = TestCluster::start(3, |_| {}).await;
    let leader = cluster.wait_leader(5 * SEC).await;
    for _ in 0..300 {
        cluster.node(leader).propose(Cmd::Incr).await.unwrap();
    }
    let follower = cluster.other_than(&[leader]);
    cluster.wait_value(300, 5 * SEC).await;
    cluster.stop_node(follower).await;
    flip_log_byte(&log_path(&cluster, follower), 0.3);
    cluster.start_node(follower).await;
    let status = cluster.node(follower).status();
    let repair = status.repair.expect("the follower must be repairing");
    assert_eq!(repair.reasons, vec![RepairReason::LogCorruption]);
    assert!(
        repair.detail.contains("intact records"),
        "{}",
        repair.detail
    );

    // The leader keeps its term: the follower repairs by reaching the last index its damaged
    // log held, then votes again.
    for _ in 0..10 {
        cluster.node(leader).propose(Cmd::Incr).await.unwrap();
    }
    cluster.wait_value(310, 10 * SEC).await;
    eventually("the follower is repaired", 10 * SEC, || {
        !repairing(&cluster, follower)
    })
    .await;
    // It votes: without the old leader, it and the third node elect one of them.
    cluster.stop_node(leader).await;
    let new = cluster.wait_leader(10 * SEC).await;
    assert_ne!(new, leader);
    assert_eq!(
        cluster
            .node(follower)
            .propose(Cmd::Incr)
            .await
            .unwrap()
            .value,
        311
    );
    cluster.shutdown().await;
}

/// The scenario of issue 15: B down; writes acknowledged by L and A; L and A killed; a byte
/// of A's log flipped; A and B started. A must not help B form a majority without the data.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_node_and_a_stale_node_cannot_elect_a_leader_without_the_data() {
    let mut cluster =
        TestCluster::start(3, |c| c.client_timeout = Duration::from_millis(800)).await;
    let l = cluster.wait_leader(5 * SEC).await;
    let b = cluster.other_than(&[l]);
    let a = cluster.other_than(&[l, b]);
    cluster.stop_node(b).await;
    for _ in 0..600 {
        cluster.node(l).propose(Cmd::Incr).await.unwrap();
    }
    cluster.stop_node(l).await;
    cluster.stop_node(a).await;
    flip_log_byte(&log_path(&cluster, a), 0.3);
    cluster.start_node(a).await;
    cluster.start_node(b).await;
    assert!(repairing(&cluster, a));

    // B campaigns, A refuses: no leader, writes fail without being applied.
    let until = Instant::now() + 2 * SEC;
    while Instant::now() < until {
        for id in [a, b] {
            assert_ne!(cluster.node(id).status().role, Role::Leader, "node {id}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let err = cluster.node(b).propose(Cmd::Incr).await.unwrap_err();
    assert!(err.is_cluster_down(), "{err:?}");

    // L comes back with the data: L and B elect a leader, A catches up and is repaired.
    cluster.start_node(l).await;
    cluster.wait_leader(10 * SEC).await;
    cluster.wait_value(600, 10 * SEC).await;
    assert_eq!(cluster.node(a).propose(Cmd::Incr).await.unwrap().value, 601);
    eventually("A is repaired", 10 * SEC, || !repairing(&cluster, a)).await;
    cluster.wait_value(601, 5 * SEC).await;
    cluster.shutdown().await;
}
