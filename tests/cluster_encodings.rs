//! The encoding thresholds on a cluster: a set's encoding decides its iteration order
//! (SPOP, SRANDMEMBER, SMEMBERS), a sorted set's whether a `-0` score survives, a hash's
//! whether HDEL keeps the field order, so nodes with different thresholds would apply the
//! same replicated write differently. A cluster node keeps them at Redis's defaults:
//! CONFIG SET of another value is refused on every node, and a node whose flags or file
//! set another value refuses to start, so every node applies every write alike.

mod cluster_support;

use std::time::Duration;

use cluster_support::*;

const THRESHOLDS: [(&str, &str); 9] = [
    ("set-max-intset-entries", "2"),
    ("hash-max-listpack-entries", "2"),
    ("hash-max-ziplist-entries", "1000"),
    ("hash-max-listpack-value", "1"),
    ("hash-max-ziplist-value", "1"),
    ("zset-max-listpack-entries", "0"),
    ("zset-max-ziplist-entries", "0"),
    ("zset-max-listpack-value", "1"),
    ("zset-max-ziplist-value", "1"),
];

const REFUSAL: &str = "a cluster node keeps the encoding thresholds at their defaults";

fn config_get(node: &Node, name: &str) -> Vec<String> {
    node.q(&["CONFIG", "GET", name]).unwrap()
}

/// The same writes on every node, then equal digests, SMEMBERS order and thresholds.
fn assert_nodes_agree(c: &Cluster) {
    let digest = c.converged_digest(Duration::from_secs(20));
    assert_ne!(digest, "0".repeat(40));
    let members: Vec<Vec<String>> = c
        .nodes
        .iter()
        .map(|n| {
            eventually("SMEMBERS", Duration::from_secs(10), || {
                let m: Vec<String> = n.q(&["SMEMBERS", "s"]).ok()?;
                (n.digest() == digest).then_some(m)
            })
        })
        .collect();
    assert!(members.windows(2).all(|w| w[0] == w[1]), "{members:?}");
    for name in ["set-max-intset-entries", "hash-max-*", "zset-max-*"] {
        let values: Vec<Vec<String>> = c.nodes.iter().map(|n| config_get(n, name)).collect();
        assert!(values.windows(2).all(|w| w[0] == w[1]), "{values:?}");
    }
}

/// Writes whose effect depends on the set's encoding: SPOP from a script whose result
/// is written, SPOP with a count, and a set that converts from intset to table.
fn encoding_sensitive_writes(leader: &Node) {
    let members: Vec<String> = (0..600).rev().map(|i| (i * 7).to_string()).collect();
    let mut sadd = vec!["SADD", "s"];
    sadd.extend(members.iter().take(300).map(String::as_str));
    let _: i64 = leader.q(&sadd).unwrap();
    let script = "local m = redis.call('SPOP', KEYS[1]) redis.call('SET', KEYS[2], m) return m";
    let _: String = leader.q(&["EVAL", script, "2", "s", "popped"]).unwrap();
    let _: Vec<String> = leader.q(&["SPOP", "s", "3"]).unwrap();
    let mut more = vec!["SADD", "s"];
    more.extend(members.iter().skip(300).map(String::as_str));
    more.push("not-an-integer");
    let _: i64 = leader.q(&more).unwrap();
    let _: String = leader.q(&["EVAL", script, "2", "s", "popped2"]).unwrap();
    let _: Vec<String> = leader.q(&["SPOP", "s", "5"]).unwrap();
    let _: i64 = leader.q(&["ZADD", "z", "-0", "m"]).unwrap();
}

#[test]
fn config_set_of_an_encoding_threshold_is_refused_on_every_cluster_node() {
    let _g = serial();
    let mut c = Cluster::start(3);
    let leader = c.wait_leader(Duration::from_secs(15));
    let follower = (leader + 1) % 3;
    for (name, value) in THRESHOLDS {
        for i in [follower, leader] {
            let e = c.nodes[i]
                .q::<()>(&["CONFIG", "SET", name, value])
                .expect_err(name);
            assert!(
                e.to_string().contains(REFUSAL) && e.to_string().contains(name),
                "{name}: {e}"
            );
        }
    }
    // Atomic as Redis's CONFIG SET: a refused threshold leaves the other parameter alone.
    let e = c.nodes[follower]
        .q::<()>(&[
            "CONFIG",
            "SET",
            "maxmemory-samples",
            "7",
            "set-max-intset-entries",
            "2",
        ])
        .unwrap_err();
    assert!(e.to_string().contains(REFUSAL), "{e}");
    assert_eq!(config_get(&c.nodes[follower], "maxmemory-samples")[1], "5");
    // The default value itself is no change, so it is accepted.
    let () = c.nodes[follower]
        .q(&["CONFIG", "SET", "set-max-intset-entries", "512"])
        .unwrap();
    encoding_sensitive_writes(&c.nodes[leader]);
    assert_nodes_agree(&c);

    // A node restarted (kill -9) with another value refuses to start and says why ...
    c.nodes[follower].kill9();
    c.nodes[follower].extra = vec!["--set-max-intset-entries".into(), "2".into()];
    c.nodes[follower].launch();
    assert!(!c.nodes[follower]
        .wait_exit(Duration::from_secs(20))
        .success());
    assert!(c.nodes[follower].log_text().contains(REFUSAL));
    // ... and with the cluster's value it rejoins and agrees.
    c.nodes[follower].extra.clear();
    c.nodes[follower].spawn();
    let leader = c.wait_leader(Duration::from_secs(15));
    let _: i64 = c.nodes[leader].q(&["SADD", "s", "after-restart"]).unwrap();
    assert_nodes_agree(&c);
}

#[test]
fn a_node_started_with_another_encoding_threshold_refuses_to_start() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let ports: Vec<u16> = (0..3).map(|_| free_port_pair()).collect();
    let peers = (1..=3)
        .map(|id| format!("{id}@127.0.0.1:{}", ports[id - 1] + 10_000))
        .collect::<Vec<_>>()
        .join(",");
    let nodes = (1..=3u64)
        .map(|id| Node {
            id,
            port: ports[id as usize - 1],
            cluster_port: ports[id as usize - 1] + 10_000,
            dir: dir.path().join(format!("node-{id}")),
            peers: Some(peers.clone()),
            extra: match id {
                3 => vec!["--set-max-intset-entries".into(), "2".into()],
                _ => Vec::new(),
            },
            secret: SECRET.to_string(),
            solo: false,
            child: None,
        })
        .collect();
    let mut c = Cluster {
        nodes,
        dir,
        tls_ca: None,
    };
    c.nodes[0].spawn();
    c.nodes[1].spawn();
    c.nodes[2].launch();
    assert!(!c.nodes[2].wait_exit(Duration::from_secs(20)).success());
    let log = c.nodes[2].log_text();
    assert!(
        log.contains(REFUSAL) && log.contains("set-max-intset-entries"),
        "{log}"
    );
    let leader = c.wait_leader(Duration::from_secs(15));
    encoding_sensitive_writes(&c.nodes[leader]);
    // Started with the cluster's value, it catches up and applies every write alike.
    c.nodes[2].extra.clear();
    c.nodes[2].spawn();
    assert_nodes_agree(&c);
}
