//! Pub/Sub and blocking commands in a three-node cluster of real processes: every node
//! delivers each applied message to its own subscribers, so a subscriber on any node sees
//! each message exactly once whichever node it was published through (or by a script).
//! Every wait is bounded by a deadline; the harness is in `cluster_support/`.
mod cluster_support;

use std::time::Duration;

use cluster_support::*;

/// Read pub/sub messages until `quiet` passes without one (at most `max`).
fn drain(sub: &mut redis::PubSub<'_>, quiet: Duration, max: usize) -> Vec<(String, String)> {
    sub.set_read_timeout(Some(quiet)).unwrap();
    let mut got = Vec::new();
    while got.len() < max {
        match sub.get_message() {
            Ok(m) => got.push((
                m.get_channel_name().to_string(),
                m.get_payload::<String>().unwrap(),
            )),
            Err(e) if e.is_timeout() => break,
            Err(e) => panic!("subscriber: {e}"),
        }
    }
    got
}

#[test]
fn a_subscriber_on_every_node_gets_each_message_once() {
    let _g = serial();
    let c = Cluster::start(3);
    let leader = c.wait_leader(Duration::from_secs(10));
    let followers: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    let mut conns: Vec<redis::Connection> = c.nodes.iter().map(|n| n.conn()).collect();
    let mut subs: Vec<redis::PubSub<'_>> = conns.iter_mut().map(|c| c.as_pubsub()).collect();
    for s in &mut subs {
        s.subscribe("news").unwrap();
        s.psubscribe("ne*").unwrap();
    }
    // Through the leader, a follower, a script on the other follower, and MULTI.
    let n: i64 = c.nodes[leader].q(&["PUBLISH", "news", "m1"]).unwrap();
    // The reply counts the receivers on the node the client talks to, as Redis Cluster does:
    // one channel and one pattern subscription there.
    assert_eq!(n, 2);
    let n: i64 = c.nodes[followers[0]].q(&["PUBLISH", "news", "m2"]).unwrap();
    assert_eq!(n, 2);
    let _: redis::Value = c.nodes[followers[1]]
        .q(&[
            "EVAL",
            "redis.call('publish', KEYS[1], ARGV[1])",
            "1",
            "news",
            "m3",
        ])
        .unwrap();
    let mut con = c.nodes[followers[0]].conn();
    let _: () = redis::pipe()
        .atomic()
        .cmd("PUBLISH")
        .arg("news")
        .arg("m4")
        .cmd("SET")
        .arg("k")
        .arg("v")
        .query(&mut con)
        .unwrap();
    for (i, s) in subs.iter_mut().enumerate() {
        let got = drain(s, Duration::from_millis(1500), 20);
        let direct: Vec<&str> = got
            .iter()
            .filter(|(ch, _)| ch == "news")
            .map(|(_, p)| p.as_str())
            .collect();
        // Each message arrives once per subscription (channel and pattern): 8 in all.
        assert_eq!(got.len(), 8, "node {i}: {got:?}");
        let mut sorted = direct.clone();
        sorted.sort();
        assert_eq!(
            sorted,
            ["m1", "m1", "m2", "m2", "m3", "m3", "m4", "m4"],
            "node {i}"
        );
    }
    // Subscriptions are per node.
    let numsub: Vec<redis::Value> = c.nodes[leader].q(&["PUBSUB", "NUMSUB", "news"]).unwrap();
    assert_eq!(numsub[1], redis::Value::Int(1));
}

/// Wait (bounded) until `node` reports `n` blocked clients.
fn wait_blocked(node: &Node, n: usize) {
    eventually("blocked clients", Duration::from_secs(10), || {
        let info: String = node.q(&["INFO", "clients"]).ok()?;
        info.contains(&format!("blocked_clients:{n}\r"))
            .then_some(())
    });
}

#[test]
fn clients_blocked_on_two_followers_never_get_the_same_element() {
    let _g = serial();
    let c = Cluster::start(3);
    let leader = c.wait_leader(Duration::from_secs(10));
    let followers: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    let waiters: Vec<_> = followers
        .iter()
        .map(|&i| {
            let mut con = c.nodes[i].conn();
            con.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
            let h = std::thread::spawn(move || {
                redis::cmd("BLPOP")
                    .arg("jobs")
                    .arg(0)
                    .query::<(String, String)>(&mut con)
                    .unwrap()
            });
            wait_blocked(&c.nodes[i], 1);
            h
        })
        .collect();
    // One element at a time, pushed through the leader and through a follower.
    let _: i64 = c.nodes[leader].q(&["LPUSH", "jobs", "first"]).unwrap();
    eventually("one waiter served", Duration::from_secs(10), || {
        let blocked: usize = followers
            .iter()
            .filter(|&&i| {
                let info: String = c.nodes[i].q(&["INFO", "clients"]).unwrap_or_default();
                info.contains("blocked_clients:1\r")
            })
            .count();
        (blocked == 1).then_some(())
    });
    let _: i64 = c.nodes[followers[0]]
        .q(&["RPUSH", "jobs", "second"])
        .unwrap();
    let mut got: Vec<String> = waiters.into_iter().map(|h| h.join().unwrap().1).collect();
    got.sort();
    assert_eq!(got, ["first", "second"]);
    // Nothing is left and every node agrees.
    for n in &c.nodes {
        assert_eq!(n.q::<i64>(&["LLEN", "jobs"]).unwrap(), 0);
    }
    let d = c.converged_digest(Duration::from_secs(10));
    assert!(!d.is_empty());
    // A timeout in a cluster is the node's own clock: nil after it passes.
    let r: redis::Value = c.nodes[followers[1]].q(&["BRPOP", "none", "0.1"]).unwrap();
    assert_eq!(r, redis::Value::Nil);
}
