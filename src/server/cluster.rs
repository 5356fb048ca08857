//! Cluster-mode server commands: `CLUSTER INFO|MYID|NODES|SLOTS|SHARDS` (one shard owning every
//! slot, the Raft leader as its master, so cluster-aware clients find the leader), the
//! `RAFT.*` admin commands, and the `INFO replication` section of a cluster node.
//!
//! Client addresses: the Raft membership records each node's cluster address only, so every
//! node advertises its client address (the host of its cluster address, its client port)
//! when a cluster connection is made, and the address reported for a node is the one it
//! advertised. A node not heard from yet (no connection with it since this node started) is
//! reported at the host of its cluster address with the cluster port minus 10000, the
//! default offset.

use std::fmt::Write;

use bytes::Bytes;

use super::Shared;
use crate::command::args::int;
use crate::engine::{cluster_error_reply, ClusterNode};
use crate::protocol::Reply;
use tollgate_raft::{ClusterStatus, Member, RepairStatus, Role};

/// Redis's reply to CLUSTER on a server without cluster support.
const NOT_CLUSTER: &str = "ERR This instance has cluster support disabled";
/// Reply to RAFT.* on a standalone server.
const NOT_RAFT: &str = "ERR This instance keeps its data in memory only and runs no Raft log (start it with --data-dir for a durable node that can grow into a cluster, or with --node-id for a cluster node)";
/// Number of hash slots a Redis cluster has.
const SLOTS: i64 = 16384;
/// How long RAFT.ADDNODE waits for the new node to catch up before giving up, by default.
const ADDNODE_CATCH_UP_MS: i64 = 10_000;
/// The longest catch-up RAFT.ADDNODE accepts (an hour).
const ADDNODE_CATCH_UP_MAX_MS: i64 = 3_600_000;

/// The 40-character node name Redis clients expect, derived from the numeric Raft id.
pub fn node_name(id: u64) -> String {
    format!("{id:040x}")
}

/// The client address of member `m`: the one it advertised, else the host of its cluster
/// address with the cluster port minus 10000.
pub fn client_addr(m: &Member) -> (String, u16) {
    match &m.advertised {
        Some(addr) => host_port(addr, 0),
        None => host_port(&m.addr, 10_000),
    }
}

/// The host and port of `addr` (`host:port`, `[v6]:port`), the port less `offset`; port 0
/// when there is none.
fn host_port(addr: &str, offset: u16) -> (String, u16) {
    match addr.rsplit_once(':') {
        Some((host, port)) => {
            let port = port
                .parse::<u16>()
                .ok()
                .and_then(|p| p.checked_sub(offset))
                .unwrap_or(0);
            (host.trim_matches(['[', ']']).to_string(), port)
        }
        None => (addr.to_string(), 0),
    }
}

/// The client address a node started with `cluster_addr` and client port `port` advertises
/// to its peers: the host they reach its cluster port at, with the client port.
pub fn advertised_client_addr(cluster_addr: &str, port: u16) -> String {
    let host = cluster_addr
        .rsplit_once(':')
        .map_or(cluster_addr, |(h, _)| h);
    format!("{host}:{port}")
}

/// The Raft node of a cluster member (a durable single node counts once it has grown).
fn node(shared: &Shared) -> Option<&ClusterNode> {
    shared
        .engine
        .cluster()
        .filter(|_| shared.engine.is_cluster())
}

/// CLUSTER <subcommand>. The subcommand is one Redis 7.0 has, called with its arity: the
/// connection checked both against the command table before this runs
/// (`acl::categories::subcommand_refusal`), as Redis looks a subcommand up before it runs.
/// A standalone server then refuses every one; a cluster node answers the five it has.
pub fn cluster_command(shared: &Shared, a: &[Bytes]) -> Reply {
    let Some(node) = node(shared) else {
        return Reply::err(NOT_CLUSTER);
    };
    let sub = String::from_utf8_lossy(&a[1]).to_ascii_lowercase();
    let status = node.status();
    match sub.as_str() {
        "info" => Reply::Verbatim("txt", Bytes::from(cluster_info(&status))),
        "myid" => Reply::bulk(node_name(status.node_id)),
        "nodes" => Reply::Verbatim("txt", Bytes::from(cluster_nodes(&status))),
        "slots" => cluster_slots(&status),
        "shards" => cluster_shards(&status),
        _ => crate::command::unknown_subcommand(&a[0], &a[1]),
    }
}

fn cluster_info(s: &ClusterStatus) -> String {
    let ok = s.leader_id.is_some();
    let mut out = String::new();
    let _ = write!(
        out,
        "cluster_enabled:1\r\ncluster_state:{}\r\ncluster_slots_assigned:{SLOTS}\r\ncluster_slots_ok:{}\r\ncluster_slots_pfail:0\r\ncluster_slots_fail:{}\r\ncluster_known_nodes:{}\r\ncluster_size:1\r\ncluster_current_epoch:{}\r\ncluster_my_epoch:{}\r\n",
        if ok { "ok" } else { "fail" },
        if ok { SLOTS } else { 0 },
        if ok { 0 } else { SLOTS },
        s.members.len(),
        s.term,
        s.term,
    );
    out
}

/// Members with the leader first, then by id.
fn ordered_members(s: &ClusterStatus) -> Vec<&Member> {
    let mut members: Vec<_> = s.members.iter().collect();
    members.sort_by_key(|m| (Some(m.id) != s.leader_id, m.id));
    members
}

fn cluster_nodes(s: &ClusterStatus) -> String {
    let mut out = String::new();
    for m in ordered_members(s) {
        let (host, port) = client_addr(m);
        let cport = m.addr.rsplit_once(':').map_or("0", |(_, p)| p);
        let mut flags = Vec::new();
        if m.id == s.node_id {
            flags.push("myself");
        }
        let is_leader = Some(m.id) == s.leader_id;
        flags.push(if is_leader || s.leader_id.is_none() {
            "master"
        } else {
            "slave"
        });
        if !m.voter {
            flags.push("nofailover");
        }
        let master = match (is_leader, s.leader_id) {
            (false, Some(l)) => node_name(l),
            _ => "-".to_string(),
        };
        let _ = write!(
            out,
            "{} {host}:{port}@{cport} {} {master} 0 0 {} connected",
            node_name(m.id),
            flags.join(","),
            s.term
        );
        if is_leader {
            let _ = write!(out, " 0-{}", SLOTS - 1);
        }
        out.push('\n');
    }
    out
}

fn slot_node(m: &Member) -> Reply {
    let (host, port) = client_addr(m);
    Reply::Array(vec![
        Reply::bulk(host),
        Reply::Integer(i64::from(port)),
        Reply::bulk(node_name(m.id)),
    ])
}

fn cluster_slots(s: &ClusterStatus) -> Reply {
    let Some(leader) = s.leader_id else {
        return Reply::Array(vec![]);
    };
    let members = ordered_members(s);
    let Some(first) = members.first().filter(|m| m.id == leader) else {
        return Reply::Array(vec![]);
    };
    let mut range = vec![
        Reply::Integer(0),
        Reply::Integer(SLOTS - 1),
        slot_node(first),
    ];
    range.extend(
        members
            .iter()
            .skip(1)
            .filter(|m| m.voter)
            .map(|m| slot_node(m)),
    );
    Reply::Array(vec![Reply::Array(range)])
}

fn cluster_shards(s: &ClusterStatus) -> Reply {
    let nodes = ordered_members(s)
        .into_iter()
        .map(|m| {
            let (host, port) = client_addr(m);
            let leader = Some(m.id) == s.leader_id;
            let applied = if m.id == s.node_id {
                s.applied_index
            } else if leader {
                s.commit_index
            } else {
                s.replication
                    .iter()
                    .find(|f| f.id == m.id)
                    .and_then(|f| f.matched_index)
                    .unwrap_or(0)
            };
            Reply::Map(vec![
                (Reply::bulk("id"), Reply::bulk(node_name(m.id))),
                (Reply::bulk("port"), Reply::Integer(i64::from(port))),
                (Reply::bulk("ip"), Reply::bulk(host.clone())),
                (Reply::bulk("endpoint"), Reply::bulk(host)),
                (
                    Reply::bulk("role"),
                    Reply::bulk(if leader { "master" } else { "replica" }),
                ),
                (
                    Reply::bulk("replication-offset"),
                    Reply::Integer(i64::try_from(applied).unwrap_or(i64::MAX)),
                ),
                (
                    Reply::bulk("health"),
                    Reply::bulk(if s.leader_id.is_some() {
                        "online"
                    } else {
                        "fail"
                    }),
                ),
            ])
        })
        .collect();
    let slots = if s.leader_id.is_some() {
        vec![Reply::Integer(0), Reply::Integer(SLOTS - 1)]
    } else {
        vec![]
    };
    Reply::Array(vec![Reply::Map(vec![
        (Reply::bulk("slots"), Reply::Array(slots)),
        (Reply::bulk("nodes"), Reply::Array(nodes)),
    ])])
}

fn role_name(r: Role) -> &'static str {
    match r {
        Role::Leader => "leader",
        Role::Follower => "follower",
        Role::Candidate => "candidate",
        Role::Learner => "learner",
        Role::Shutdown => "shutdown",
    }
}

/// RAFT.STATUS as `field:value` lines.
fn raft_status_text(s: &ClusterStatus) -> String {
    let mut out = String::new();
    let opt = |v: Option<u64>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
    let _ = write!(
        out,
        "node_id:{}\r\nrole:{}\r\nleader_id:{}\r\nleader_addr:{}\r\nterm:{}\r\ncommit_index:{}\r\napplied_index:{}\r\nlast_log_index:{}\r\nsnapshot_index:{}\r\npurged_index:{}\r\n",
        s.node_id,
        role_name(s.role),
        opt(s.leader_id),
        s.leader_addr.as_deref().unwrap_or("-"),
        s.term,
        s.commit_index,
        s.applied_index,
        s.last_log_index,
        opt(s.snapshot_index),
        opt(s.purged_index),
    );
    let _ = write!(
        out,
        "election_timeout_ms:{}-{}\r\nheartbeat_interval_ms:{}\r\n",
        s.election_timeout_ms.0, s.election_timeout_ms.1, s.heartbeat_interval_ms
    );
    match &s.repair {
        None => out.push_str("repairing:0\r\n"),
        Some(r) => {
            let _ = write!(
                out,
                "repairing:1\r\nrepair_reason:{}\r\nrepair_until:{r}\r\nrepair_detail:{}\r\n",
                repair_reasons(r),
                one_line(&r.detail)
            );
        }
    }
    for m in &s.members {
        let _ = write!(
            out,
            "member_{}:addr={},voter={}\r\n",
            m.id,
            m.addr,
            if m.voter { "yes" } else { "no" }
        );
    }
    let yes_no = |b: bool| if b { "yes" } else { "no" };
    for f in &s.replication {
        let _ = write!(
            out,
            "follower_{}:matched={},lag={},responding={},repairing={}\r\n",
            f.id,
            opt(f.matched_index),
            f.lag,
            yes_no(f.responding),
            yes_no(f.repairing)
        );
    }
    out
}

/// The reasons of a repair as one token (`log_corruption+vote_lost`).
fn repair_reasons(r: &RepairStatus) -> String {
    let names: Vec<&str> = r.reasons.iter().map(|r| r.as_str()).collect();
    names.join("+")
}

/// `text` with line breaks turned into spaces (one `field:value` line).
fn one_line(text: &str) -> String {
    text.replace(['\r', '\n'], " ")
}

/// The `# Replication` section of INFO for a cluster node.
pub fn replication_info(node: &ClusterNode) -> String {
    let s = node.status();
    let mut out = String::from("# Replication\r\n");
    let leader = s.role == Role::Leader;
    let _ = write!(out, "role:{}\r\n", if leader { "master" } else { "slave" });
    if !leader {
        if let Some(leader) = s.members.iter().find(|m| Some(m.id) == s.leader_id) {
            let (host, port) = client_addr(leader);
            let _ = write!(
                out,
                "master_host:{host}\r\nmaster_port:{port}\r\nmaster_link_status:up\r\n"
            );
        } else {
            out.push_str("master_link_status:down\r\n");
        }
    }
    let _ = write!(out, "connected_slaves:{}\r\n", s.replication.len());
    for (i, f) in s.replication.iter().enumerate() {
        let addr = s
            .members
            .iter()
            .find(|m| m.id == f.id)
            .map(client_addr)
            .unwrap_or_default();
        let _ = write!(
            out,
            "slave{i}:ip={},port={},state=online,offset={},lag={}\r\n",
            addr.0,
            addr.1,
            f.matched_index.unwrap_or(0),
            f.lag
        );
    }
    let _ = write!(
        out,
        "raft_node_id:{}\r\nraft_role:{}\r\nraft_leader_id:{}\r\nraft_term:{}\r\nraft_commit_index:{}\r\nraft_applied_index:{}\r\nraft_last_log_index:{}\r\nraft_repairing:{}\r\n",
        s.node_id,
        role_name(s.role),
        s.leader_id.map_or_else(|| "-".to_string(), |v| v.to_string()),
        s.term,
        s.commit_index,
        s.applied_index,
        s.last_log_index,
        u8::from(s.repair.is_some()),
    );
    if let Some(r) = &s.repair {
        let _ = write!(out, "raft_repair_reason:{}\r\n", repair_reasons(r));
    }
    out.push_str("\r\n");
    out
}

fn parse_id(arg: &[u8]) -> Result<u64, Reply> {
    match int(arg) {
        Ok(n) if n > 0 => Ok(n as u64),
        Ok(_) => Err(Reply::err("ERR node id must be a positive integer")),
        Err(e) => Err(e),
    }
}

/// The Raft node, or the error RAFT.* answers on a standalone server.
fn raft_node(shared: &Shared) -> Result<&ClusterNode, Reply> {
    shared.engine.cluster().ok_or_else(|| Reply::err(NOT_RAFT))
}

/// OK, or the error of a failed membership change.
fn done(r: Result<(), tollgate_raft::ClusterError>) -> Reply {
    match r {
        Ok(()) => Reply::ok(),
        Err(e) => cluster_error_reply(&e),
    }
}

/// RAFT.STATUS
pub fn raft_status(shared: &Shared, _a: &[Bytes]) -> Reply {
    match raft_node(shared) {
        Ok(node) => Reply::Verbatim("txt", Bytes::from(raft_status_text(&node.status()))),
        Err(e) => e,
    }
}

/// RAFT.ADDNODE id host:port [catch-up-ms]: add the node as a learner and promote it to
/// voter once it has caught up (within `catch-up-ms`, 10 s by default).
pub async fn raft_addnode(shared: &Shared, a: &[Bytes]) -> Reply {
    let node = match raft_node(shared) {
        Ok(node) => node,
        Err(e) => return e,
    };
    if a.len() > 4 {
        return Reply::err("ERR syntax error");
    }
    let id = match parse_id(&a[1]) {
        Ok(id) => id,
        Err(e) => return e,
    };
    let addr = String::from_utf8_lossy(&a[2]).into_owned();
    if crate::config::parse_peers(&format!("{id}@{addr}")).is_err() {
        return Reply::err("ERR cluster address must be host:port");
    }
    let catch_up_ms = match a.get(3).map(|t| int(t)) {
        None => ADDNODE_CATCH_UP_MS,
        Some(Ok(ms)) if (1..=ADDNODE_CATCH_UP_MAX_MS).contains(&ms) => ms,
        Some(Ok(_)) => {
            return Reply::err(format!(
                "ERR catch-up timeout must be between 1 and {ADDNODE_CATCH_UP_MAX_MS} milliseconds"
            ))
        }
        Some(Err(e)) => return e,
    };
    let catch_up = std::time::Duration::from_millis(catch_up_ms as u64);
    // A durable single node binds its cluster port when it first grows: the new node must be
    // able to reach it (replies, forwarded writes, a later election).
    if let Err(e) = node.listen().await {
        return Reply::err(format!(
            "ERR cannot add node {id}: this node could not open its cluster port: {e}"
        ));
    }
    done(node.add_node(id, addr, catch_up).await)
}

/// RAFT.REMOVENODE id
pub async fn raft_removenode(shared: &Shared, a: &[Bytes]) -> Reply {
    match (raft_node(shared), parse_id(&a[1])) {
        (Err(e), _) | (_, Err(e)) => e,
        (Ok(node), Ok(id)) => done(node.remove_node(id).await),
    }
}

/// RAFT.TRANSFER id
pub async fn raft_transfer(shared: &Shared, a: &[Bytes]) -> Reply {
    match (raft_node(shared), parse_id(&a[1])) {
        (Err(e), _) | (_, Err(e)) => e,
        (Ok(node), Ok(id)) => done(node.transfer_leader(id).await),
    }
}

/// RAFT.SNAPSHOT
pub async fn raft_snapshot(shared: &Shared, _a: &[Bytes]) -> Reply {
    match raft_node(shared) {
        Ok(node) => done(node.trigger_snapshot().await),
        Err(e) => e,
    }
}

/// RAFT.PARTITION id [id ...] (drop traffic with those peers) and RAFT.HEAL (no ids:
/// restore it): fault injection, only with `--enable-debug-command yes`.
pub fn raft_partition(shared: &Shared, a: &[Bytes]) -> Reply {
    let node = match raft_node(shared) {
        Ok(node) => node,
        Err(e) => return e,
    };
    if !shared.config.read().enable_debug_command {
        return Reply::err(format!(
            "ERR {} is a fault-injection command: start the server with --enable-debug-command yes",
            String::from_utf8_lossy(&a[0]).to_ascii_uppercase()
        ));
    }
    let mut ids = Vec::new();
    for arg in &a[1..] {
        match parse_id(arg) {
            Ok(id) => ids.push(id),
            Err(e) => return e,
        }
    }
    node.set_blocked_peers(ids);
    Reply::ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_address_is_the_advertised_one_else_cluster_port_minus_10000() {
        let member = |addr: &str, advertised: Option<&str>| Member {
            id: 1,
            addr: addr.into(),
            voter: true,
            advertised: advertised.map(Into::into),
        };
        assert_eq!(
            client_addr(&member("127.0.0.1:17001", None)),
            ("127.0.0.1".into(), 7001)
        );
        assert_eq!(
            client_addr(&member("[::1]:17001", None)),
            ("::1".into(), 7001)
        );
        assert_eq!(client_addr(&member("h:80", None)), ("h".into(), 0));
        let custom = member("10.0.0.5:9001", Some("10.0.0.5:6379"));
        assert_eq!(client_addr(&custom), ("10.0.0.5".into(), 6379));
        let v6 = member(
            "[::1]:9001",
            Some(&advertised_client_addr("[::1]:9001", 7001)),
        );
        assert_eq!(client_addr(&v6), ("::1".into(), 7001));
        assert_eq!(
            advertised_client_addr("db-1.example:9001", 6380),
            "db-1.example:6380"
        );
        assert_eq!(node_name(3).len(), 40);
    }
}
