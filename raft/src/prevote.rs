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
//! only with a quorum of grants (itself included, counted as the answers come, not after
//! the slowest: a dead voter's answer never comes) triggers openraft's election
//! (`Raft::trigger().elect()`), which raises the term. A voter grants a pre-vote
//! ([`grant`]) when it is not the leader, has heard no leader within the lease itself (the
//! longest election timeout: the same condition under which openraft would grant the real
//! vote) and holds no longer log than the candidate; a repairing node grants none and never
//! campaigns. A node that cannot reach a quorum therefore keeps its term, and the leader and
//! term are unchanged when it returns (`tests/cluster.rs`,
//! `a_follower_back_from_a_partition_or_a_pause_does_not_depose_the_leader`).
//!
//! Two clocks, as in Raft's thesis (§9.6) and etcd: [`Clocks::leader`] (when this node last
//! heard a leader, granted a real vote, or was told to campaign) decides the lease, both for
//! granting a pre-vote and for when to campaign; [`Clocks::campaign`] (when this node last
//! ran a pre-vote round or granted someone else's pre-vote) only spaces its own rounds a
//! random election timeout apart. A round of its own does not restart the lease: when it
//! did, after a leader died the survivor with the shorter log (which cannot win: the other
//! refuses it) refused the other's pre-vote for a whole lease after each of its own rounds,
//! and the two could take turns refusing for seconds (`tests/cluster.rs`'s leader-kill
//! tests on a loaded machine: 13 of 45 failovers over 1 s, up to 4.5 s and 16 rounds; after,
//! 1 of 45, at 1.15 s: the table is in the README's pre-vote section).
//! A granted pre-vote holds the granter's own round back for a random timeout, so the
//! candidate's real election usually runs without a rival splitting the vote.
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

/// An instant that can be moved to now: one of the election clocks ([`Clocks`]).
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
        self.touch_at(Instant::now());
    }

    /// How long ago.
    pub(crate) fn elapsed(&self) -> Duration {
        self.elapsed_at(Instant::now())
    }

    fn touch_at(&self, now: Instant) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = now;
    }

    fn elapsed_at(&self, now: Instant) -> Duration {
        now.saturating_duration_since(*self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// A node's election clocks (see the module's comment).
#[derive(Debug, Default)]
pub(crate) struct Clocks {
    /// When this node last heard from a leader (an AppendEntries or snapshot it accepted),
    /// granted a real vote, was the leader, or was told to campaign (RAFT.TRANSFER): Raft's
    /// election timer and the lease a pre-vote is refused within.
    pub(crate) leader: Heard,
    /// When this node last started a pre-vote round or granted another node's pre-vote: its
    /// next round waits a random election timeout after this.
    pub(crate) campaign: Heard,
}

impl Clocks {
    /// How long ago this node heard a leader, if within the lease (a pre-vote is refused).
    fn lease_held(&self, timing: Timing, now: Instant) -> Option<Duration> {
        let since = self.leader.elapsed_at(now);
        (since < timing.lease()).then_some(since)
    }

    /// Whether to run a pre-vote round now (see [`Timing::due`]).
    fn round_due(&self, timing: Timing, random: Duration, had_leader: bool, now: Instant) -> bool {
        let (leader, round) = (self.leader.elapsed_at(now), self.campaign.elapsed_at(now));
        timing.due(leader, round, random, had_leader)
    }

    /// This node starts a pre-vote round, or granted another node's pre-vote: its own next
    /// round waits. The lease is left alone: a round of its own is not a word from a leader.
    fn round_started(&self, now: Instant) {
        self.campaign.touch_at(now);
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

    /// Whether to run a pre-vote round now, `leader` after this node last heard a leader
    /// and `round` after its last round (or a pre-vote it granted): as openraft's own
    /// timer, the random timeout without a leader, after the lease when this node knew one
    /// (its vote is committed) so that it never asks while the others may still refuse; and
    /// the random timeout after its last round.
    fn due(&self, leader: Duration, round: Duration, random: Duration, had_leader: bool) -> bool {
        let quiet = if had_leader {
            self.lease() + random
        } else {
            random
        };
        leader >= quiet && round >= random
    }
}

/// The answer of node `me` to a pre-vote request.
pub(crate) fn grant(
    raft: &Raft<TypeConfig>,
    me: NodeId,
    clocks: &Clocks,
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
    if let Some(since) = clocks.lease_held(timing, Instant::now()) {
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
    clocks.round_started(Instant::now());
    true
}

/// How often the elector of a node that is its group's only voter and leads looks again
/// without a change of its state or membership (a repair that starts changes neither).
const SOLE_LEADER_RECHECK: Duration = Duration::from_secs(1);

/// Node `me`'s election timer: see the module's comment.
pub(crate) async fn run_elector(
    me: NodeId,
    raft: Raft<TypeConfig>,
    transport: std::sync::Arc<Transport>,
    clocks: std::sync::Arc<Clocks>,
    repair: std::sync::Arc<Repair>,
    timing: Timing,
) {
    let mut random = timing.random_timeout();
    let mut server = raft.server_metrics();
    let mut sole_leader = false;
    loop {
        if sole_leader {
            // The only voter leads: there is nothing to time until its state or its
            // membership changes (openraft's server metrics, which entries do not move).
            // Looking every heartbeat woke an idle durable node 20 times a second.
            server.borrow_and_update();
            tokio::select! {
                changed = server.changed() => {
                    if changed.is_err() {
                        tokio::time::sleep(SOLE_LEADER_RECHECK).await;
                    }
                }
                _ = tokio::time::sleep(SOLE_LEADER_RECHECK) => {}
            }
            clocks.leader.touch();
        } else {
            tokio::time::sleep(timing.heartbeat.min(timing.election_timeout_min / 2)).await;
        }
        let m = raft.metrics().borrow().clone();
        let membership = m.membership_config.membership().clone();
        let voters: Vec<NodeId> = membership.voter_ids().collect();
        if m.state == ServerState::Leader || repair.is_active() || !voters.contains(&me) {
            clocks.leader.touch();
            sole_leader = m.state == ServerState::Leader && voters == [me] && !repair.is_active();
            continue;
        }
        sole_leader = false;
        if voters.len() == 1 {
            // Nobody to ask, nobody to disturb: elect at once, as openraft does.
            if m.state != ServerState::Candidate {
                let _ = raft.trigger().elect().await;
            }
            clocks.leader.touch();
            continue;
        }
        if !clocks.round_due(timing, random, m.vote.committed, Instant::now()) {
            continue;
        }
        tracing::debug!(
            node = me,
            leader_ms = clocks.leader.elapsed().as_millis() as u64,
            "asking for pre-votes"
        );
        clocks.round_started(Instant::now());
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
        if won(voters.len(), asks.collect()).await {
            tracing::debug!(node = me, "pre-vote won; campaigning");
            let _ = raft.trigger().elect().await;
        } else {
            tracing::debug!(node = me, "pre-vote lost; keeping the term");
        }
    }
}

/// Whether a quorum of `voters` grants the pre-vote (this node's own grant included),
/// decided as the answers come: a quorum wins without waiting for a voter that never
/// answers (a dead one is only given up at the call's timeout).
async fn won(
    voters: usize,
    mut asks: futures::stream::FuturesUnordered<impl std::future::Future<Output = bool>>,
) -> bool {
    use futures::StreamExt;
    let mut grants = 1;
    while grants * 2 <= voters {
        match asks.next().await {
            Some(true) => grants += 1,
            Some(false) => {}
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::stream::FuturesUnordered;
    use futures::FutureExt;

    fn id(term: u64, index: u64) -> LogId {
        LogId::new(openraft::CommittedLeaderId::new(term, 1), index)
    }

    const fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    const TIMING: Timing = Timing {
        election_timeout_min: ms(150),
        election_timeout_max: ms(300),
        heartbeat: ms(50),
    };

    /// The failover that took seconds: the leader dies, the survivor with the shorter log runs
    /// a round (refused: its log is behind), and the other survivor asks it 50 ms later. Its
    /// own round must not count as a word from a leader, or it refuses too, and the two can
    /// take turns refusing each other.
    #[test]
    fn a_round_of_its_own_does_not_make_a_node_refuse_the_next_candidate() {
        let t0 = Instant::now();
        let clocks = Clocks::default();
        clocks.leader.touch_at(t0);
        // Heard the leader within the lease: refused.
        assert_eq!(clocks.lease_held(TIMING, t0 + ms(299)), Some(ms(299)));
        // The leader is silent for the lease plus a random timeout: a round of its own.
        assert!(clocks.round_due(TIMING, ms(200), true, t0 + ms(500)));
        clocks.round_started(t0 + ms(500));
        // 50 ms later the other survivor asks: granted, as far as the lease goes.
        assert_eq!(clocks.lease_held(TIMING, t0 + ms(550)), None);
        // Its own next round waits a random timeout after the last one.
        assert!(!clocks.round_due(TIMING, ms(200), true, t0 + ms(550)));
        assert!(clocks.round_due(TIMING, ms(200), true, t0 + ms(700)));
        // A word from a leader restarts both the lease and the wait.
        clocks.leader.touch_at(t0 + ms(700));
        assert!(clocks.lease_held(TIMING, t0 + ms(800)).is_some());
        assert!(!clocks.round_due(TIMING, ms(200), true, t0 + ms(1100)));
        assert!(clocks.round_due(TIMING, ms(200), true, t0 + ms(1200)));
        // Without a committed vote (no known leader) the random timeout alone.
        assert!(clocks.round_due(TIMING, ms(200), false, t0 + ms(900)));
    }

    /// A quorum of grants decides the round without waiting for a voter that never answers.
    #[tokio::test]
    async fn a_quorum_of_pre_votes_wins_without_the_silent_voter() {
        use futures::future::{pending, ready, BoxFuture};
        let asks = |answers: Vec<Option<bool>>| -> FuturesUnordered<BoxFuture<'static, bool>> {
            answers
                .into_iter()
                .map(|a| match a {
                    Some(g) => ready(g).boxed(),
                    None => pending().boxed(),
                })
                .collect()
        };
        let decide = |voters, answers| {
            tokio::time::timeout(Duration::from_secs(10), won(voters, asks(answers)))
        };
        assert_eq!(decide(3, vec![None, Some(true)]).await, Ok(true));
        assert_eq!(decide(3, vec![Some(false), Some(false)]).await, Ok(false));
        assert_eq!(decide(3, vec![Some(false), Some(true)]).await, Ok(true));
        let five = vec![Some(true), None, Some(false), Some(true)];
        assert_eq!(decide(5, five).await, Ok(true));
        assert_eq!(
            decide(5, vec![Some(true), Some(false), Some(false), Some(false)]).await,
            Ok(false)
        );
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
