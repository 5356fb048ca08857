//! Batching on a follower. Writes and read-index requests that a follower's clients make are
//! sent to the leader in batches: every request queued while the forwarder task waited for its
//! turn (the clients served in the same poll of the runtime) travels in one frame, so the link
//! carries one request and one response per batch instead of per client. The leader still
//! proposes each forwarded unit on its own (its write batcher groups them into entries), and one
//! read-index confirmation answers every read of the batch: it was requested after all of them
//! arrived, so it covers every write acknowledged before any of them started.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::error::ClusterError;
use crate::proposer::{fail_all, ProposeReply, ReadReply};
use crate::stats::RaftStats;
use crate::transport::{CallError, Request, Response, Transport};
use crate::types::{CommandResult, NodeId};

enum Work {
    Propose {
        commands: Vec<bytes::Bytes>,
        reply: ProposeReply,
    },
    Read {
        reply: ReadReply,
    },
}

struct Job {
    leader: NodeId,
    addr: String,
    deadline: Instant,
    work: Work,
}

/// Handle to the forwarding task.
#[derive(Clone)]
pub(crate) struct Forwarder {
    tx: mpsc::UnboundedSender<Job>,
    stats: Arc<RaftStats>,
}

impl Forwarder {
    /// Start the forwarder; one frame carries at most `max_batch_bytes` of commands.
    pub(crate) fn spawn(
        transport: Arc<Transport>,
        max_batch_bytes: usize,
        stats: Arc<RaftStats>,
    ) -> (Forwarder, JoinHandle<()>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(run(transport, rx, max_batch_bytes));
        (Forwarder { tx, stats }, task)
    }

    /// Send `commands` (one unit) to `leader`, answering by `deadline`.
    pub(crate) fn propose(
        &self,
        leader: NodeId,
        addr: &str,
        commands: Vec<bytes::Bytes>,
        deadline: Instant,
    ) -> oneshot::Receiver<Result<Vec<CommandResult>, ClusterError>> {
        let (reply, rx) = oneshot::channel();
        RaftStats::add(&self.stats.forwarded_writes, 1);
        self.queue(leader, addr, deadline, Work::Propose { commands, reply });
        rx
    }

    /// Ask `leader` for a read index confirmed after this call.
    pub(crate) fn read_index(
        &self,
        leader: NodeId,
        addr: &str,
        deadline: Instant,
    ) -> oneshot::Receiver<Result<u64, ClusterError>> {
        let (reply, rx) = oneshot::channel();
        RaftStats::add(&self.stats.forwarded_reads, 1);
        self.queue(leader, addr, deadline, Work::Read { reply });
        rx
    }

    fn queue(&self, leader: NodeId, addr: &str, deadline: Instant, work: Work) {
        let job = Job {
            leader,
            addr: addr.to_string(),
            deadline,
            work,
        };
        if let Err(mpsc::error::SendError(job)) = self.tx.send(job) {
            job.work.fail(ClusterError::ShuttingDown);
        }
    }
}

impl Work {
    fn bytes(&self) -> usize {
        match self {
            Work::Propose { commands, .. } => commands.iter().map(bytes::Bytes::len).sum(),
            Work::Read { .. } => 0,
        }
    }

    fn fail(self, err: ClusterError) {
        match self {
            Work::Propose { reply, .. } => {
                let _ = reply.send(Err(err));
            }
            Work::Read { reply } => {
                let _ = reply.send(Err(err));
            }
        }
    }
}

async fn run(transport: Arc<Transport>, mut rx: mpsc::UnboundedReceiver<Job>, max_bytes: usize) {
    let mut held_over: Option<Job> = None;
    loop {
        let first = match held_over.take() {
            Some(job) => job,
            None => match rx.recv().await {
                Some(job) => job,
                None => break,
            },
        };
        // Let the other clients that are ready now queue their requests: they join this batch.
        tokio::task::yield_now().await;
        let (leader, addr) = (first.leader, first.addr.clone());
        let mut deadline = first.deadline;
        let mut bytes = first.work.bytes();
        let mut jobs = vec![first];
        while let Ok(job) = rx.try_recv() {
            if job.leader != leader || job.addr != addr || bytes + job.work.bytes() > max_bytes {
                held_over = Some(job);
                break;
            }
            bytes += job.work.bytes();
            deadline = deadline.max(job.deadline);
            jobs.push(job);
        }
        send_batch(&transport, leader, &addr, deadline, jobs).await;
    }
}

/// Send one batch (proposals in one frame, reads sharing one read-index request) and hand the
/// waiting for answers to a task, so the next batch can go out meanwhile.
async fn send_batch(
    transport: &Transport,
    leader: NodeId,
    addr: &str,
    deadline: Instant,
    jobs: Vec<Job>,
) {
    let mut units = Vec::new();
    let mut propose_replies = Vec::new();
    let mut read_replies = Vec::new();
    for job in jobs {
        match job.work {
            Work::Propose { commands, reply } => {
                units.push(commands);
                propose_replies.push(reply);
            }
            Work::Read { reply } => read_replies.push(reply),
        }
    }
    let client = transport.peer(leader, addr);
    let started = Instant::now();
    if !units.is_empty() {
        let sent = client.send(&Request::Propose(units), deadline).await;
        tokio::spawn(async move {
            let outcome = match sent {
                Ok(call) => call.response().await,
                Err(e) => Err(e),
            };
            match outcome {
                Ok(Response::Propose(results)) if results.len() == propose_replies.len() => {
                    for (reply, result) in propose_replies.into_iter().zip(results) {
                        let _ = reply.send(result.map_err(|e| remote_error(leader, e)));
                    }
                }
                Ok(_) => fail_all(propose_replies, unexpected(leader)),
                Err(e) => fail_all(propose_replies, link_error(leader, e, started)),
            }
        });
    }
    if !read_replies.is_empty() {
        let sent = client.send(&Request::ReadIndex, deadline).await;
        tokio::spawn(async move {
            let outcome = match sent {
                Ok(call) => call.response().await,
                Err(e) => Err(e),
            };
            let result = match outcome {
                Ok(Response::ReadIndex(result)) => result.map_err(|e| remote_error(leader, e)),
                Ok(_) => Err(unexpected(leader)),
                Err(e) => Err(link_error(leader, e, started)),
            };
            for reply in read_replies {
                let _ = reply.send(result.clone());
            }
        });
    }
}

/// A response of the wrong kind from `leader`.
pub(crate) fn unexpected(leader: NodeId) -> ClusterError {
    ClusterError::Forward {
        leader,
        reason: "unexpected response".into(),
    }
}

/// A failed call to the leader as the caller sees it: not sent is retryable, the rest is not.
pub(crate) fn link_error(leader: NodeId, err: CallError, started: Instant) -> ClusterError {
    match err {
        CallError::NotSent(_) => ClusterError::Unavailable { waited_ms: 0 },
        CallError::TimedOut => ClusterError::Timeout {
            waited_ms: started.elapsed().as_millis() as u64,
        },
        CallError::Lost(reason) => ClusterError::Forward { leader, reason },
        CallError::TooLarge(n) => {
            ClusterError::Codec(format!("request of {n} bytes exceeds the frame cap"))
        }
    }
}

/// An error the leader answered with, as seen by the follower that forwarded the request: the
/// leader shutting down is a cluster problem here, not this node's shutdown.
pub(crate) fn remote_error(leader: NodeId, err: ClusterError) -> ClusterError {
    match err {
        ClusterError::ShuttingDown => ClusterError::Forward {
            leader,
            reason: "leader is shutting down".into(),
        },
        other => other,
    }
}
