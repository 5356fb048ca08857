//! End-to-end tests: real nodes on 127.0.0.1, real TCP, real disks in temp dirs.

mod common;

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{eventually, log_data_end, Cmd, Counter, TestCluster};
use tokio::sync::Mutex;
use tollgate_raft::{ClusterError, Role};

const SEC: Duration = Duration::from_secs(1);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_apply_3000_increments_proposed_through_every_node() {
    // Node 3 acknowledges from the page cache (EverySec); the others fsync every group.
    let cluster = TestCluster::start(3, |c| {
        if c.node_id == 3 {
            c.fsync = tollgate_raft::FsyncPolicy::EverySec;
        }
    })
    .await;
    let leader = cluster.wait_leader(5 * SEC).await;

    let mut tasks = Vec::new();
    for node in cluster.nodes.values() {
        for _ in 0..10 {
            let node = node.clone();
            tasks.push(tokio::spawn(async move {
                let mut values = Vec::new();
                for _ in 0..100 {
                    values.push(node.propose(Cmd::Incr).await.unwrap().value);
                }
                values
            }));
        }
    }
    let mut seen = HashSet::new();
    for task in tasks {
        for v in task.await.unwrap() {
            assert!(seen.insert(v), "value {v} returned twice");
        }
    }
    assert_eq!(seen.len(), 3000);
    assert_eq!(seen.iter().max(), Some(&3000));
    cluster.wait_value(3000, 5 * SEC).await;

    // propose_many is one unit: consecutive values, nothing interleaved.
    let follower = cluster.other_than(&[leader]);
    let outs = cluster
        .node(follower)
        .propose_many(vec![Cmd::Incr; 5])
        .await
        .unwrap();
    let values: Vec<u64> = outs.iter().map(|o| o.value).collect();
    assert_eq!(values, vec![3001, 3002, 3003, 3004, 3005]);
    assert!(
        outs.windows(2).all(|w| w[1].now_us == w[0].now_us + 1),
        "one entry: each command a microsecond after the one before"
    );

    let status = cluster.node(leader).status();
    assert_eq!(status.role, Role::Leader);
    assert_eq!(status.leader_id, Some(leader));
    assert_eq!(
        status.leader_addr.as_deref(),
        Some(cluster.peers[&leader].as_str())
    );
    assert_eq!(status.members.iter().filter(|m| m.voter).count(), 3);
    assert_eq!(status.replication.len(), 2);
    assert!(status.commit_index >= status.applied_index && status.applied_index > 0);
    // Batching: 3005 commands must have taken far fewer entries.
    assert!(
        status.last_log_index < 3005,
        "no batching: {} entries",
        status.last_log_index
    );
    let fstatus = cluster.node(follower).status();
    assert_eq!(fstatus.role, Role::Follower);
    assert_eq!(fstatus.leader_id, Some(leader));
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batched_follower_reads_see_every_write_acknowledged_before_them() {
    let cluster = TestCluster::start(3, |_| {}).await;
    let leader = cluster.wait_leader(5 * SEC).await;
    let followers: Vec<_> = cluster
        .nodes
        .iter()
        .filter(|(id, _)| **id != leader)
        .map(|(_, n)| n.clone())
        .collect();
    // Many concurrent readers per follower, so their read-index requests share batches; each
    // read must reflect the write its task saw acknowledged just before.
    let mut tasks = Vec::new();
    for (i, follower) in followers.iter().enumerate() {
        for t in 0..8 {
            let writer = if (i + t) % 2 == 0 {
                cluster.node(leader).clone()
            } else {
                followers[(i + 1) % followers.len()].clone()
            };
            let reader = follower.clone();
            tasks.push(tokio::spawn(async move {
                for _ in 0..25 {
                    let acked = writer.propose(Cmd::Incr).await.unwrap().value;
                    reader.read_barrier().await.unwrap();
                    let seen = reader.state_machine().value();
                    assert!(
                        seen >= acked,
                        "read saw {seen} after write {acked} was acknowledged"
                    );
                }
            }));
        }
    }
    for task in tasks {
        task.await.unwrap();
    }
    cluster.wait_value(400, 5 * SEC).await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_loss_elects_new_leader_loses_no_acknowledged_write_and_time_never_goes_back() {
    let mut cluster = TestCluster::start(3, |_| {}).await;
    let old_leader = cluster.wait_leader(5 * SEC).await;
    let mut leadership = cluster.node(old_leader).subscribe_leadership();
    assert!(leadership.borrow().is_self);
    // The old leader's clock runs a minute ahead: the next leader must not stamp earlier times.
    cluster.node(old_leader).set_clock_skew_ms(60_000);

    let acked = Arc::new(Mutex::new(Vec::new()));
    let survivors: Vec<_> = cluster
        .nodes
        .values()
        .filter(|n| n.id() != old_leader)
        .cloned()
        .collect();
    let mut tasks = Vec::new();
    for node in cluster.nodes.values() {
        for _ in 0..4 {
            let (node, acked) = (node.clone(), acked.clone());
            tasks.push(tokio::spawn(async move {
                for _ in 0..150 {
                    match node.propose(Cmd::Incr).await {
                        Ok(out) => acked.lock().await.push(out),
                        Err(ClusterError::ShuttingDown) => return,
                        Err(e) => eprintln!("propose failed during failover: {e}"),
                    }
                }
            }));
        }
    }
    // Let some writes through, then take the leader away.
    eventually("writes before failover", 10 * SEC, || {
        survivors[0].state_machine().value() >= 200
    })
    .await;
    let skewed_floor = cluster.node(old_leader).clock_floor_us();
    cluster.stop_node(old_leader).await;
    tokio::time::timeout(SEC, leadership.wait_for(|l| !l.is_self))
        .await
        .unwrap()
        .unwrap();
    for t in tasks {
        t.await.unwrap();
    }
    let new_leader = cluster.wait_leader(5 * SEC).await;
    assert_ne!(new_leader, old_leader);

    let after = cluster.node(new_leader).propose(Cmd::Incr).await.unwrap();
    let acked = acked.lock().await;
    let values: HashSet<u64> = acked.iter().map(|o| o.value).collect();
    assert_eq!(
        values.len(),
        acked.len(),
        "an increment was acknowledged twice"
    );
    assert!(
        after.value > *values.iter().max().unwrap(),
        "an acknowledged increment was lost"
    );
    assert!(
        acked.len() > 1000,
        "too few writes acknowledged: {}",
        acked.len()
    );
    let final_value = after.value;
    cluster.wait_value(final_value, 5 * SEC).await;

    // Time: the skewed leader stamped a minute ahead, and the next leader did not go back.
    let wall_now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64;
    let latest_acked = acked.iter().map(|o| o.now_us).max().unwrap();
    assert!(skewed_floor > wall_now + 30_000_000, "skew had no effect");
    assert!(
        latest_acked > wall_now + 30_000_000,
        "no acknowledged entry carries the skewed time"
    );
    assert!(after.now_us >= latest_acked);
    assert!(cluster.node(new_leader).clock_floor_us() >= latest_acked);
    for node in cluster.nodes.values() {
        assert_eq!(node.state_machine().time_went_back(), 0);
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarted_node_recovers_from_disk_and_lagging_node_catches_up_by_snapshot() {
    let mut cluster = TestCluster::start(3, |c| {
        c.snapshot_every = 100;
        c.keep_logs_after_snapshot = 20;
        c.log_compact_min_bytes = 4096;
    })
    .await;
    let leader = cluster.wait_leader(5 * SEC).await;
    for _ in 0..300 {
        cluster.node(leader).propose(Cmd::Incr).await.unwrap();
    }
    cluster.wait_value(300, 5 * SEC).await;
    let lagger = cluster.other_than(&[leader]);
    let lagger_snapshot_before = cluster.node(lagger).status().snapshot_index;
    cluster.stop_node(lagger).await;

    // The others move far ahead: snapshots are built and the log behind them purged.
    let leader = cluster.wait_leader(5 * SEC).await;
    let mut tasks = Vec::new();
    for _ in 0..10 {
        let node = cluster.node(leader).clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..100 {
                node.propose(Cmd::Incr).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    cluster.wait_value(1300, 5 * SEC).await;
    eventually("leader purged its log", 5 * SEC, || {
        cluster
            .node(leader)
            .raft()
            .metrics()
            .borrow()
            .purged
            .is_some_and(|p| p.index > 300)
    })
    .await;

    // Purged records were compacted away: the file holds little more than the live tail
    // (and the space allocated ahead of it).
    let log = cluster
        .dir
        .path()
        .join(format!("node{leader}/log/raft.log"));
    let (log_bytes, _) = log_data_end(&std::fs::read(&log).unwrap());
    eprintln!("leader log records: {log_bytes} bytes");
    assert!(
        log_bytes < 16 * 1024,
        "log not compacted: {log_bytes} bytes"
    );

    // Whole cluster down; the lagging node alone recovers its own state from its disk.
    let others: Vec<_> = cluster.nodes.keys().copied().collect();
    for id in &others {
        cluster.stop_node(*id).await;
    }
    cluster.start_node(lagger).await;
    eventually("lagger replays its own log", 5 * SEC, || {
        cluster.node(lagger).state_machine().value() == 300
    })
    .await;
    assert!(!cluster.node(lagger).is_leader());
    let started = Instant::now();
    let err = cluster.node(lagger).propose(Cmd::Incr).await.unwrap_err();
    assert!(err.is_cluster_down(), "{err:?}");
    assert!(started.elapsed() < 3 * SEC);

    // The others come back from their disks; the lagger gets a snapshot, not the purged log.
    for id in &others {
        cluster.start_node(*id).await;
    }
    cluster.wait_leader(5 * SEC).await;
    cluster.wait_value(1300, 10 * SEC).await;
    let snap = cluster.node(lagger).status().snapshot_index;
    assert!(
        snap > lagger_snapshot_before && snap.is_some_and(|s| s > 300),
        "no snapshot installed: {snap:?}"
    );
    let out = cluster.node(lagger).propose(Cmd::Incr).await.unwrap();
    assert_eq!(out.value, 1301);
    cluster.shutdown().await;
}

/// Write `junk` where the log's records end, as a crash in the middle of a write would.
fn damage_log_tail(log: &std::path::Path, junk: &[u8]) -> usize {
    let mut bytes = std::fs::read(log).unwrap();
    let (end, clean) = log_data_end(&bytes);
    assert!(clean, "log already damaged at {end}");
    bytes.truncate(end);
    bytes.extend_from_slice(junk);
    std::fs::write(log, &bytes).unwrap();
    end
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_log_tail_is_truncated_on_restart() {
    let mut cluster = TestCluster::start(1, |_| {}).await;
    cluster.wait_leader(5 * SEC).await;
    for _ in 0..100 {
        cluster.node(1).propose(Cmd::Incr).await.unwrap();
    }
    cluster.stop_node(1).await;
    let log = cluster.dir.path().join("node1/log/raft.log");

    // A torn record: header promises 1000 bytes, only 10 made it.
    let mut torn = 1000u32.to_le_bytes().to_vec();
    torn.extend_from_slice(&[0xAB; 14]);
    let good = damage_log_tail(&log, &torn);
    cluster.start_node(1).await;
    cluster.wait_value(100, 5 * SEC).await;
    cluster.stop_node(1).await;
    let (end, clean) = log_data_end(&std::fs::read(&log).unwrap());
    assert!(
        clean && end >= good,
        "torn tail survived: end {end}, clean {clean}"
    );

    // A whole record whose checksum does not match, followed by more bytes.
    let payload = b"definitely not a raft record";
    let mut bad = (payload.len() as u32).to_le_bytes().to_vec();
    bad.extend_from_slice(&0xDEAD_BEEFu32.to_le_bytes());
    bad.extend_from_slice(payload);
    bad.extend_from_slice(&[7; 32]);
    let good = damage_log_tail(&log, &bad);
    cluster.start_node(1).await;
    cluster.wait_value(100, 5 * SEC).await;
    assert_eq!(cluster.node(1).propose(Cmd::Incr).await.unwrap().value, 101);
    cluster.stop_node(1).await;
    let (end, clean) = log_data_end(&std::fs::read(&log).unwrap());
    assert!(
        clean && end > good,
        "corrupt record survived: end {end}, clean {clean}"
    );
    cluster.start_node(1).await;
    cluster.wait_value(101, 5 * SEC).await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peer_with_wrong_secret_cannot_join_or_disturb_the_cluster() {
    let cluster = TestCluster::start(3, |_| {}).await;
    let leader = cluster.wait_leader(5 * SEC).await;
    cluster.node(leader).propose(Cmd::Incr).await.unwrap();
    let term = cluster.node(leader).status().term;

    // An intruder that knows every address but not the secret. Its pre-votes cannot pass the
    // handshake, so it never gets a quorum of them and never campaigns again after the
    // election openraft starts when it initializes: its term stays 1 (before pre-votes it
    // campaigned with ever higher terms, which the handshake kept out).
    let mut peers = cluster.peers.clone();
    let intruder_addr = format!("127.0.0.1:{}", common::free_port());
    peers.insert(4, intruder_addr.clone());
    let dir = tempfile::tempdir().unwrap();
    let config = tollgate_raft::Config::new(
        4,
        intruder_addr,
        peers,
        dir.path(),
        b"wrong-secret-wrong-secret".to_vec(),
    );
    let intruder = tollgate_raft::RaftNode::start(config, Arc::new(Counter::default()))
        .await
        .unwrap();
    // Many election timeouts (150-300 ms by default).
    tokio::time::sleep(2 * SEC).await;
    assert_eq!(intruder.status().term, 1, "the intruder campaigned again");

    // Raw garbage and a forged handshake are dropped too.
    let mut raw = tokio::net::TcpStream::connect(&cluster.peers[&leader])
        .await
        .unwrap();
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    raw.write_all(&[0, 0, 0, 5, 1, 2, 3, 4, 5]).await.unwrap();
    let mut buf = [0u8; 64];
    let n = tokio::time::timeout(2 * SEC, raw.read(&mut buf))
        .await
        .unwrap()
        .unwrap_or(0);
    assert_eq!(n, 0, "server should close on a bad handshake");

    assert!(matches!(intruder.propose(Cmd::Incr).await, Err(e) if e.is_cluster_down()));
    assert_eq!(cluster.wait_leader(SEC).await, leader);
    assert_eq!(
        cluster.node(leader).status().term,
        term,
        "intruder's votes reached the cluster"
    );
    assert_eq!(cluster.node(leader).status().members.len(), 3);
    assert_eq!(intruder.state_machine().value(), 0);
    intruder.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitioned_leader_fails_fast_majority_continues_and_states_converge_after_healing() {
    let cluster = TestCluster::start(3, |c| c.client_timeout = Duration::from_millis(800)).await;
    let old_leader = cluster.wait_leader(5 * SEC).await;
    for _ in 0..50 {
        cluster.node(old_leader).propose(Cmd::Incr).await.unwrap();
    }
    let majority: Vec<u64> = cluster
        .nodes
        .keys()
        .copied()
        .filter(|id| *id != old_leader)
        .collect();
    cluster.node(old_leader).set_blocked_peers(majority.clone());
    for id in &majority {
        cluster.node(*id).set_blocked_peers([old_leader]);
    }

    // The cut-off leader answers with an error within the timeout; reads too.
    let started = Instant::now();
    let err = cluster
        .node(old_leader)
        .propose(Cmd::Incr)
        .await
        .unwrap_err();
    assert!(err.is_cluster_down(), "{err:?}");
    let err = cluster.node(old_leader).read_barrier().await.unwrap_err();
    assert!(err.is_cluster_down(), "{err:?}");
    assert!(
        started.elapsed() < Duration::from_millis(2 * 800 + 500),
        "took {:?}",
        started.elapsed()
    );

    // The majority elects a leader and keeps accepting writes through both nodes.
    let majority_nodes: Vec<_> = majority
        .iter()
        .map(|id| cluster.node(*id).clone())
        .collect();
    eventually("majority leader", 5 * SEC, || {
        majority_nodes.iter().any(|n| n.is_leader())
    })
    .await;
    let mut last = 0;
    for i in 0..40 {
        last = majority_nodes[i % 2]
            .propose(Cmd::Incr)
            .await
            .unwrap()
            .value;
    }
    assert_eq!(last, 90);

    // Heal: the old leader learns the new term, drops its unconfirmed entry and catches up.
    for node in cluster.nodes.values() {
        node.set_blocked_peers([]);
    }
    cluster.wait_leader(5 * SEC).await;
    cluster.wait_value(90, 5 * SEC).await;
    let out = cluster.node(old_leader).propose(Cmd::Incr).await.unwrap();
    assert_eq!(out.value, 91);
    cluster.wait_value(91, 5 * SEC).await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn learner_is_added_promoted_and_removed() {
    let mut cluster = TestCluster::start(3, |_| {}).await;
    let leader = cluster.wait_leader(5 * SEC).await;
    for _ in 0..20 {
        cluster.node(leader).propose(Cmd::Incr).await.unwrap();
    }
    // Node 4 starts with no peer list: it waits to be added.
    let addr = format!("127.0.0.1:{}", common::free_port());
    cluster.peers.insert(4, addr.clone());
    let mut config = cluster.config(4);
    config.peers.clear();
    let node4 = tollgate_raft::RaftNode::start(config, Arc::new(Counter::default()))
        .await
        .unwrap();
    cluster.nodes.insert(4, node4.clone());

    let follower = cluster.other_than(&[leader, 4]);
    cluster.node(follower).add_learner(4, addr).await.unwrap();
    eventually("learner replicates", 5 * SEC, || {
        node4.state_machine().value() == 20
    })
    .await;
    assert_eq!(node4.status().role, Role::Learner);
    node4.read_barrier().await.unwrap();

    cluster.node(follower).promote(4).await.unwrap();
    let voters: BTreeSet<u64> = cluster
        .node(leader)
        .status()
        .members
        .iter()
        .filter(|m| m.voter)
        .map(|m| m.id)
        .collect();
    assert_eq!(voters, BTreeSet::from([1, 2, 3, 4]));
    assert_eq!(node4.propose(Cmd::Incr).await.unwrap().value, 21);

    cluster.node(leader).remove_node(4).await.unwrap();
    let members: BTreeSet<u64> = cluster
        .node(leader)
        .status()
        .members
        .iter()
        .map(|m| m.id)
        .collect();
    assert_eq!(members, BTreeSet::from([1, 2, 3]));
    cluster.stop_node(4).await;
    cluster.node(leader).propose(Cmd::Incr).await.unwrap();
    cluster.wait_value(22, 5 * SEC).await;
    cluster.shutdown().await;
}

/// A leader applies its own proposals from the typed commands kept beside their bytes, and
/// every other node (and the leader itself replaying its log after a restart) from the bytes:
/// `Cmd::Flagged`'s flag is not encoded, so the output says which copy was applied, while
/// what the encoding carries (the increments) comes out the same everywhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_applies_its_own_proposals_typed_and_every_other_copy_from_the_log_bytes() {
    let flagged = || Cmd::Flagged { flag: true };
    let mut cluster = TestCluster::start(3, |_| {}).await;
    let leader = cluster.wait_leader(5 * SEC).await;
    let follower = cluster.other_than(&[leader]);
    let out = cluster.node(leader).propose(flagged()).await.unwrap();
    assert_eq!((out.value, out.flag_seen), (1, true));
    let out = cluster.node(follower).propose(flagged()).await.unwrap();
    assert_eq!(
        (out.value, out.flag_seen),
        (2, false),
        "forwarded, so decoded"
    );
    let outs = cluster
        .node(leader)
        .propose_many(vec![Cmd::Incr, flagged(), Cmd::Incr])
        .await
        .unwrap();
    let seen: Vec<(u64, bool)> = outs.iter().map(|o| (o.value, o.flag_seen)).collect();
    assert_eq!(seen, [(3, false), (4, true), (5, false)]);
    cluster.wait_value(5, 5 * SEC).await;
    for (id, node) in &cluster.nodes {
        let want = if *id == leader { 2 } else { 0 };
        assert_eq!(node.state_machine().flags_seen(), want, "node {id}");
    }
    cluster.stop_node(leader).await;
    cluster.start_node(leader).await;
    cluster.wait_value(5, 10 * SEC).await;
    assert_eq!(cluster.node(leader).state_machine().flags_seen(), 0);
    cluster.shutdown().await;
}

/// A group of one (a durable single node) answers from the typed copies too, and its log
/// replays to the same state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sole_voter_answers_from_typed_commands_and_replays_its_log_to_the_same_state() {
    let mut cluster = TestCluster::start(1, |_| {}).await;
    cluster.wait_leader(5 * SEC).await;
    for i in 1..=50 {
        let out = cluster
            .node(1)
            .propose(Cmd::Flagged { flag: true })
            .await
            .unwrap();
        assert_eq!((out.value, out.flag_seen), (i, true));
    }
    let node = cluster.node(1);
    assert_eq!(node.state_machine().flags_seen(), 50);
    let before = node.state_machine().value();
    cluster.stop_node(1).await;
    cluster.start_node(1).await;
    cluster.wait_leader(5 * SEC).await;
    cluster.wait_value(before, 5 * SEC).await;
    assert_eq!(cluster.node(1).state_machine().flags_seen(), 0);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_proposals_are_refused_and_big_entries_still_replicate() {
    let cluster = TestCluster::start(3, |c| c.max_frame_bytes = 64 * 1024).await;
    let leader = cluster.wait_leader(5 * SEC).await;
    let follower = cluster.other_than(&[leader]);
    for id in [leader, follower] {
        let err = cluster
            .node(id)
            .propose(Cmd::Blob(vec![1; 20 * 1024]))
            .await
            .unwrap_err();
        assert!(
            matches!(err, ClusterError::TooLarge { max: 16384, .. }),
            "{err:?}"
        );
    }
    // Many 10 KiB commands at once: batches are cut by size, AppendEntries split to fit frames.
    let mut tasks = Vec::new();
    for i in 0..24u8 {
        let node = cluster
            .node(if i % 2 == 0 { leader } else { follower })
            .clone();
        tasks.push(tokio::spawn(async move {
            node.propose(Cmd::Blob(vec![i; 10 * 1024]))
                .await
                .unwrap()
                .value
        }));
    }
    let mut values = BTreeSet::new();
    for t in tasks {
        values.insert(t.await.unwrap());
    }
    assert_eq!(values, (1..=24).collect());
    cluster.wait_value(24, 5 * SEC).await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leadership_moves_to_the_chosen_voter_and_held_proposals_follow_it() {
    let cluster = TestCluster::start(3, |_| {}).await;
    let leader = cluster.wait_leader(5 * SEC).await;
    let target = cluster.other_than(&[leader]);
    let third = cluster.other_than(&[leader, target]);

    // Proposals keep arriving at every node while leadership moves.
    let mut tasks = Vec::new();
    for node in cluster.nodes.values() {
        for _ in 0..4 {
            let node = node.clone();
            tasks.push(tokio::spawn(async move {
                let mut outs = Vec::new();
                for _ in 0..60 {
                    outs.push(node.propose(Cmd::Incr).await.unwrap());
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
                outs
            }));
        }
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    let term_before = cluster.node(leader).status().term;
    // Asked on the third node, the request travels to the leader.
    cluster.node(third).transfer_leader(target).await.unwrap();
    // The transfer ends once the old leader follows the target. The third node need not have
    // voted, so it may still name the old leader until the target's first message reaches it.
    assert_eq!(cluster.node(leader).status().leader_id, Some(target));
    eventually("every node follows the target", 5 * SEC, || {
        cluster
            .nodes
            .values()
            .all(|n| n.status().leader_id == Some(target))
    })
    .await;
    assert_eq!(cluster.node(target).status().role, Role::Leader);
    assert!(cluster.node(target).status().term > term_before);

    let mut values = HashSet::new();
    for task in tasks {
        let outs = task.await.unwrap();
        // One client's writes are applied in its order, at times that never go back.
        assert!(outs.windows(2).all(|w| w[0].value < w[1].value));
        assert!(outs.windows(2).all(|w| w[0].now_us <= w[1].now_us));
        for o in outs {
            assert!(values.insert(o.value), "value {} returned twice", o.value);
        }
    }
    assert_eq!(values.len(), 720);
    assert_eq!(values.iter().max(), Some(&720));

    // Asked on the old leader, the new leader refuses a target that is not a voter, and a
    // transfer to itself is a no-op.
    match cluster.node(leader).transfer_leader(99).await {
        Err(ClusterError::Transfer(why)) => assert!(why.contains("not a voter"), "{why}"),
        other => panic!("transfer to a non-member: {other:?}"),
    }
    cluster.node(leader).transfer_leader(target).await.unwrap();
    assert_eq!(cluster.wait_leader(5 * SEC).await, target);
    cluster.wait_value(720, 5 * SEC).await;
    cluster.shutdown().await;
}
