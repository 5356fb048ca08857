//! Elections behind a pre-vote, so that a node cut off from the cluster (partitioned, or
//! frozen by SIGSTOP) cannot depose a healthy leader when it comes back.
//!
//! openraft 0.9 has no PreVote. On its own a follower that hears no leader for an election
//! timeout raises its term and campaigns; cut off, it does so again and again, and once it
//! is back its higher term reaches the leader in an AppendEntries answer, which makes the
//! leader step down (measured on three real nodes: a follower partitioned for 3 s came back
//! at term 15 against the leader's 4 and forced a new election; one stopped for 3 s and
//! resumed forced one too). openraft's leader lease (a follower refuses votes while it heard
//! a leader within the lease) does not help: the term travels in the AppendEntries answer.
//!
//! So openraft's own election timer is off (`enable_elect` false) and [`run_elector`] takes
//! its place: a voter that has heard no leader for openraft's timeout (the lease plus a
//! random election timeout when it had a leader, the random timeout alone when it never had
//! one) first asks the other voters for a pre-vote, which changes no state anywhere, and
//! only with a quorum of grants (itself included) triggers openraft's election
//! (`Raft::trigger().elect()`), which raises the term. A voter grants a pre-vote
//! ([`grant`]) when it is not the leader, has heard no leader within the lease itself (the
//! longest election timeout: the same condition under which openraft would grant the real
//! vote) and holds no longer log than the candidate; a repairing node grants none and never
//! campaigns. A node that cannot reach a quorum therefore keeps its term, and the leader and
//! term are unchanged when it returns (`tests/cluster.rs`,
//! `a_follower_back_from_a_partition_or_a_pause_does_not_depose_the_leader`).
//!
//! A single voter elects itself at once, as openraft does. RAFT.TRANSFER still makes its
//! target campaign directly (`Request::Elect`), after the old leader let every lease lapse.
//! The log comparison is Raft's up-to-date rule on the last log ids ([`log_up_to_date`]:
//! the last entry's term first, then its index), read from openraft's data metrics; it only
//! decides whether a campaign is worth starting, openraft's vote still compares whole log
//! ids.

use std::sync::Mutex;
use std::time::Duration;

use openraft::{Raft, ServerState};
use rand::Rng;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::repair::Repair;
use crate::transport::{Request, Response, Transport};
use crate::types::{LogId, NodeId, TypeConfig};

/// A candidate's question: would you vote for me now?
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct PreVoteRequest {
    /// The node asking.
    pub(crate) candidate: NodeId,
    /// The id (term and index) of its last log entry.
    pub(crate) last_log: Option<LogId>,
}

/// Raft's rule for granting a vote: the candidate's log is at least as up to date as
/// ours when its last entry has a higher term, or the same term and an index at least as
/// high. A longer log from an older term loses: its extra entries may never commit.
pub(crate) fn log_up_to_date(candidate: Option<&LogId>, mine: Option<&LogId>) -> bool {
    let key = |l: Option<&LogId>| l.map(|l| (l.leader_id.term, l.index));
    key(candidate) >= key(mine)
}

/// A last log id as `term.index` (`-` for an empty log), for the debug log.
fn show(l: Option<&LogId>) -> String {
    l.map_or_else(
        || "-".into(),
        |l| format!("{}.{}", l.leader_id.term, l.index),
    )
}

/// When this node last heard from a leader (an AppendEntries or snapshot it accepted),
/// granted a vote, was the leader, or started a campaign: Raft's election timer.
#[derive(Debug)]
pub(crate) struct Heard(Mutex<Instant>);

impl Default for Heard {
    fn default() -> Self {
        Heard(Mutex::new(Instant::now()))
    }
}

impl Heard {
    /// Now.
    pub(crate) fn touch(&self) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
    }

    /// How long ago.
    pub(crate) fn elapsed(&self) -> Duration {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).elapsed()
    }
}

/// The election timing, from the cluster configuration.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timing {
    pub(crate) election_timeout_min: Duration,
    pub(crate) election_timeout_max: Duration,
    pub(crate) heartbeat: Duration,
}

impl Timing {
    /// openraft's leader lease: the longest election timeout.
    fn lease(&self) -> Duration {
        self.election_timeout_max
    }

    /// A random election timeout, drawn anew for each campaign as openraft does.
    fn random_timeout(&self) -> Duration {
        let (min, max) = (self.election_timeout_min, self.election_timeout_max);
        if max > min {
            rand::thread_rng().gen_range(min..max)
        } else {
            min
        }
    }

    /// How long to wait without a leader before campaigning, as openraft's own timer: the
    /// random timeout, after the lease when this node knew a leader (its vote is
    /// committed), so that it never asks while the others may still refuse.
    fn timeout(&self, random: Duration, had_leader: bool) -> Duration {
        if had_leader {
            self.lease() + random
        } else {
            random
        }
    }
}

/// The answer of node `me` to a pre-vote request.
pub(crate) fn grant(
    raft: &Raft<TypeConfig>,
    me: NodeId,
    heard: &Heard,
    repair: &Repair,
    timing: Timing,
    req: &PreVoteRequest,
) -> bool {
    let refuse = |why: &str| {
        tracing::debug!(
            node = me,
            candidate = req.candidate,
            why,
            "pre-vote refused"
        );
        false
    };
    if repair.is_active() {
        return refuse("repairing");
    }
    let since = heard.elapsed();
    if since < timing.lease() {
        return refuse(&format!("heard a leader {} ms ago", since.as_millis()));
    }
    if raft.metrics().borrow().current_leader == Some(me) {
        return refuse("leader");
    }
    let mine = raft.data_metrics().borrow().last_log;
    if !log_up_to_date(req.last_log.as_ref(), mine.as_ref()) {
        let (theirs, mine) = (show(req.last_log.as_ref()), show(mine.as_ref()));
        return refuse(&format!("log behind: {theirs} < {mine}"));
    }
    tracing::debug!(node = me, candidate = req.candidate, "pre-vote granted");
    true
}

/// Node `me`'s election timer: see the module's comment.
pub(crate) async fn run_elector(
    me: NodeId,
    raft: Raft<TypeConfig>,
    transport: std::sync::Arc<Transport>,
    heard: std::sync::Arc<Heard>,
    repair: std::sync::Arc<Repair>,
    timing: Timing,
) {
    let mut random = timing.random_timeout();
    loop {
        tokio::time::sleep(timing.heartbeat.min(timing.election_timeout_min / 2)).await;
        let m = raft.metrics().borrow().clone();
        let membership = m.membership_config.membership().clone();
        let voters: Vec<NodeId> = membership.voter_ids().collect();
        if m.state == ServerState::Leader || repair.is_active() || !voters.contains(&me) {
            heard.touch();
            continue;
        }
        if voters.len() == 1 {
            // Nobody to ask, nobody to disturb: elect at once, as openraft does.
            if m.state != ServerState::Candidate {
                let _ = raft.trigger().elect().await;
            }
            heard.touch();
            continue;
        }
        if heard.elapsed() < timing.timeout(random, m.vote.committed) {
            continue;
        }
        tracing::debug!(
            node = me,
            since_ms = heard.elapsed().as_millis() as u64,
            "asking for pre-votes"
        );
        heard.touch();
        random = timing.random_timeout();
        let req = PreVoteRequest {
            candidate: me,
            last_log: raft.data_metrics().borrow().last_log,
        };
        let asks = voters.iter().filter(|&&v| v != me).filter_map(|&v| {
            let addr = membership.get_node(&v)?.addr.clone();
            let peer = transport.peer(v, &addr);
            let req = Request::PreVote(req.clone());
            Some(async move {
                matches!(
                    peer.call(&req, timing.election_timeout_min).await,
                    Ok(Response::PreVote(true))
                )
            })
        });
        let grants = 1 + futures::future::join_all(asks)
            .await
            .into_iter()
            .filter(|g| *g)
            .count();
        if grants * 2 > voters.len() {
            tracing::debug!(node = me, grants, "pre-vote won; campaigning");
            let _ = raft.trigger().elect().await;
            heard.touch();
        } else {
            tracing::debug!(node = me, grants, "pre-vote lost; keeping the term");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(term: u64, index: u64) -> LogId {
        LogId::new(openraft::CommittedLeaderId::new(term, 1), index)
    }

    #[test]
    fn a_longer_log_from_an_older_term_is_not_up_to_date() {
        let mine = id(3, 10);
        // Higher index, lower last term: refused (the index-only rule granted this).
        assert!(!log_up_to_date(Some(&id(2, 50)), Some(&mine)));
        // Higher term, lower index: granted.
        assert!(log_up_to_date(Some(&id(4, 2)), Some(&mine)));
        // Same term: the index decides.
        assert!(log_up_to_date(Some(&id(3, 10)), Some(&mine)));
        assert!(log_up_to_date(Some(&id(3, 11)), Some(&mine)));
        assert!(!log_up_to_date(Some(&id(3, 9)), Some(&mine)));
        // An empty log is behind any entry, and up to date against an empty one.
        assert!(!log_up_to_date(None, Some(&mine)));
        assert!(log_up_to_date(Some(&mine), None));
        assert!(log_up_to_date(None, None));
    }
}
