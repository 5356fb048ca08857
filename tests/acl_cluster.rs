//! ACL users in a 3-node cluster: a user created on any node is enforced on every node (the
//! change goes through the Raft log), and survives a node's restart from its log and from a
//! snapshot.

mod cluster_support;

use std::time::Duration;

use cluster_support::*;
use redis::Connection;

/// Run `args` on `c`, giving the reply or the error's full text.
fn run(c: &mut Connection, args: &[&str]) -> Result<redis::Value, String> {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c).map_err(|e| match (e.code(), e.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        _ => e.to_string(),
    })
}

/// Whether `node` enforces the tenant user: its limiter runs, another tenant's key and
/// FLUSHALL are refused with Redis's texts.
fn enforces_tenant(node: &Node) -> Option<()> {
    let mut c = node.conn();
    run(&mut c, &["AUTH", "t1", "pw"]).ok()?;
    run(&mut c, &["LIMIT.TOKEN", "tenant1:x", "10", "1", "1000"]).ok()?;
    let key = run(&mut c, &["LIMIT.TOKEN", "tenant2:x", "10", "1", "1000"]).err()?;
    assert_eq!(
        key,
        "NOPERM this user has no permissions to access one of the keys used as arguments"
    );
    let flush = run(&mut c, &["FLUSHALL"]).err()?;
    assert_eq!(
        flush,
        "NOPERM this user has no permissions to run the 'flushall' command"
    );
    Some(())
}

#[test]
fn users_are_replicated_enforced_everywhere_and_survive_restarts() {
    let _serial = serial();
    let mut c = Cluster::start(3);
    let leader = c.wait_leader(Duration::from_secs(15));
    let follower = (leader + 1) % 3;
    // Created through a follower: it forwards the change to the leader like any write.
    let ok: String = c.nodes[follower]
        .q(&[
            "ACL",
            "SETUSER",
            "t1",
            "on",
            ">pw",
            "+@ratelimit",
            "~tenant1:*",
        ])
        .unwrap();
    assert_eq!(ok, "OK");
    for node in &c.nodes {
        eventually("the user is enforced", Duration::from_secs(10), || {
            enforces_tenant(node)
        });
    }
    let bad = c.nodes[leader]
        .q::<String>(&["ACL", "SETUSER", "t1", "bogus"])
        .unwrap_err();
    assert!(bad.to_string().contains("Syntax error"), "{bad}");
    // A restart replays the change from the log.
    let other = (leader + 2) % 3;
    c.nodes[other].kill9();
    c.nodes[other].spawn();
    eventually(
        "the restarted node enforces the user",
        Duration::from_secs(20),
        || enforces_tenant(&c.nodes[other]),
    );
    // After a snapshot (which purges the log behind it), a restart restores users from it.
    let _: String = c.nodes[other].q(&["RAFT.SNAPSHOT"]).unwrap();
    c.nodes[other].kill9();
    c.nodes[other].spawn();
    eventually(
        "the user is back from the snapshot",
        Duration::from_secs(20),
        || enforces_tenant(&c.nodes[other]),
    );
    // Deleting it is replicated too.
    let n: i64 = c.nodes[leader].q(&["ACL", "DELUSER", "t1"]).unwrap();
    assert_eq!(n, 1);
    for node in &c.nodes {
        eventually("the user is gone", Duration::from_secs(10), || {
            let users: Vec<String> = node.q(&["ACL", "USERS"]).ok()?;
            (users == ["default"]).then_some(())
        });
    }
}

/// A subscriber on one node, its user changed through another: the node closes it when it
/// applies the change from the log (Redis's `ACLKillPubsubClientsIfNeeded`, on every node).
#[test]
fn a_channel_taken_away_on_one_node_closes_subscribers_on_the_others() {
    use std::io::{Read, Write};
    let _serial = serial();
    let c = Cluster::start(3);
    let leader = c.wait_leader(Duration::from_secs(15));
    let other = (leader + 1) % 3;
    let rules = ["ACL", "SETUSER", "u", "on", "nopass", "&ch*", "+@all", "~*"];
    let _: String = c.nodes[leader].q(&rules).unwrap();
    let subscriber = |node: &Node, user: &str| {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", node.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let auth = format!("AUTH {user} x\r\nSUBSCRIBE ch1\r\n");
        s.write_all(auth.as_bytes()).unwrap();
        let mut got = String::new();
        let mut buf = [0u8; 512];
        while !got.contains("ch1") {
            let n = s.read(&mut buf).unwrap();
            assert!(n > 0, "closed before subscribing: {got}");
            got.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
        assert!(got.starts_with("+OK"), "{got}");
        s
    };
    // The user reaches the other node through the log: wait until it logs in there.
    eventually(
        "the user exists on the other node",
        Duration::from_secs(10),
        || {
            let users: Vec<String> = c.nodes[other].q(&["ACL", "USERS"]).ok()?;
            users.contains(&"u".to_string()).then_some(())
        },
    );
    let mut sub = subscriber(&c.nodes[other], "u");
    let mut kept = subscriber(&c.nodes[other], "default");
    let _: String = c.nodes[leader]
        .q(&["ACL", "SETUSER", "u", "resetchannels", "&news"])
        .unwrap();
    // The node closes the connection without another command from it.
    let mut buf = [0u8; 64];
    match sub.read(&mut buf) {
        Ok(0) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        other => panic!("the subscriber is still connected: {other:?}"),
    }
    kept.write_all(b"PING\r\n").unwrap();
    let n = kept.read(&mut buf).unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).contains("pong"));
}
