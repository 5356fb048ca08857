//! Batching on the leader. The write batcher groups the commands of every caller that arrive
//! while earlier batches are in flight into the next Raft entry, stamped with leader time, so one
//! fsync and one AppendEntries carry many commands; outputs are split back per caller. The read
//! batcher lets one leadership confirmation (openraft's read index) answer every read that
//! arrived before it started.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use openraft::error::{CheckIsLeaderError, ClientWriteError, RaftError};
use openraft::raft::ClientWriteResult;
use openraft::Raft;
use tokio::sync::{mpsc, oneshot, watch, Notify, Semaphore};
use tokio::task::JoinHandle;

use crate::clock::{EntryTime, LeaderClock};
use crate::error::ClusterError;
use crate::local::{ErasedLocal, LocalCommands};
use crate::types::{Batch, CommandResult, NodeId, TypeConfig};

/// Holds new batches (writes and read confirmations) while a leadership transfer runs, so the
/// leader's log stops growing and its followers' leader leases can lapse. Closing returns a
/// guard; the gate reopens when the guard drops, whatever way the transfer ends.
#[derive(Clone)]
pub(crate) struct Gate {
    closed: Arc<watch::Sender<bool>>,
}

impl Gate {
    pub(crate) fn new() -> Gate {
        Gate {
            closed: Arc::new(watch::Sender::new(false)),
        }
    }

    /// Close the gate until the returned guard drops.
    pub(crate) fn close(&self) -> GateGuard {
        self.closed.send_replace(true);
        GateGuard { gate: self.clone() }
    }

    /// Wait until the gate is open.
    async fn opened(&self) {
        if !*self.closed.borrow() {
            return;
        }
        let mut rx = self.closed.subscribe();
        // The sender lives in `self`, so `wait_for` cannot fail while we hold it.
        let _ = rx.wait_for(|closed| !*closed).await;
    }
}

/// Keeps a [`Gate`] closed while alive.
pub(crate) struct GateGuard {
    gate: Gate,
}

impl Drop for GateGuard {
    fn drop(&mut self) {
        self.gate.closed.send_replace(false);
    }
}

/// Reply channel of one proposal.
pub(crate) type ProposeReply = oneshot::Sender<Result<Vec<CommandResult>, ClusterError>>;

struct Proposal {
    commands: Vec<bytes::Bytes>,
    waiter: Waiter,
}

/// Who waits for a proposal's outputs.
enum Waiter {
    /// A caller that reads them encoded (a proposal forwarded by a follower).
    Encoded(ProposeReply),
    /// A proposer on this node, whose typed commands ride in the entry and whose state machine
    /// answers it (see `local`).
    Typed(TypedWaiter),
}

/// A typed proposer's unit, as the batcher holds it. The unit answers its proposer, and the
/// proposer keeps the unit, so a unit dropped here unanswered (the batcher stopped with Raft)
/// answers that Raft stopped: otherwise its proposer, which may wait with no timer, would
/// wait for ever.
struct TypedWaiter(ErasedLocal);

impl Drop for TypedWaiter {
    fn drop(&mut self) {
        self.0.fail(ClusterError::ShuttingDown);
    }
}

impl Waiter {
    fn fail(self, err: ClusterError) {
        match self {
            Waiter::Encoded(reply) => {
                let _ = reply.send(Err(err));
            }
            Waiter::Typed(unit) => unit.0.fail(err),
        }
    }
}

impl Proposal {
    fn bytes(&self) -> usize {
        self.commands.iter().map(bytes::Bytes::len).sum()
    }
}

/// Handle to the write batcher task.
#[derive(Clone)]
pub(crate) struct Proposer {
    tx: mpsc::UnboundedSender<Proposal>,
    max_bytes: usize,
}

impl Proposer {
    /// Start the batcher for `raft`.
    pub(crate) fn spawn(
        raft: Raft<TypeConfig>,
        clock: Arc<LeaderClock>,
        max_batch: usize,
        max_bytes: usize,
        max_inflight: usize,
        gate: Gate,
    ) -> (Proposer, JoinHandle<()>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(run_write_batcher(
            raft,
            clock,
            rx,
            max_batch,
            max_bytes,
            max_inflight,
            gate,
        ));
        (Proposer { tx, max_bytes }, task)
    }

    /// Queue `commands` as one unit; the order of submissions is the order in the log. The
    /// receiver gets their encoded outputs.
    pub(crate) fn submit(
        &self,
        commands: Vec<bytes::Bytes>,
    ) -> oneshot::Receiver<Result<Vec<CommandResult>, ClusterError>> {
        let (reply, rx) = oneshot::channel();
        self.queue(commands, Waiter::Encoded(reply));
        rx
    }

    /// Queue `commands`, proposed on this node, with `local`, the same commands typed: the
    /// unit's receiver gets their outputs (or why the entry failed).
    pub(crate) fn submit_local(&self, commands: Vec<bytes::Bytes>, local: ErasedLocal) {
        self.queue(commands, Waiter::Typed(TypedWaiter(local)));
    }

    fn queue(&self, commands: Vec<bytes::Bytes>, waiter: Waiter) {
        let proposal = Proposal { commands, waiter };
        let bytes = proposal.bytes();
        if bytes > self.max_bytes {
            // An entry must fit in one frame, or it could never be replicated.
            proposal.waiter.fail(ClusterError::TooLarge {
                bytes,
                max: self.max_bytes,
            });
            return;
        }
        if let Err(mpsc::error::SendError(p)) = self.tx.send(proposal) {
            p.waiter.fail(ClusterError::ShuttingDown);
        }
    }
}

async fn run_write_batcher(
    raft: Raft<TypeConfig>,
    clock: Arc<LeaderClock>,
    mut rx: mpsc::UnboundedReceiver<Proposal>,
    max_batch: usize,
    max_bytes: usize,
    max_inflight: usize,
    gate: Gate,
) {
    let inflight = Arc::new(Semaphore::new(max_inflight));
    // openraft's responses to entries answered at apply, not yet come in.
    let mut unread = VecDeque::new();
    // A proposal that did not fit the previous batch opens the next one.
    let mut held_over: Option<Proposal> = None;
    loop {
        let first = match held_over.take() {
            Some(p) => p,
            None => match rx.recv().await {
                Some(p) => p,
                None => break,
            },
        };
        // Hold everything while a leadership transfer runs; after it, Raft itself refuses the
        // batch (this node no longer leads) and the callers retry at the new leader.
        gate.opened().await;
        // Wait for an in-flight slot first: whatever queues meanwhile joins this batch.
        let Ok(permit) = inflight.clone().acquire_owned().await else {
            break;
        };
        let mut count = first.commands.len();
        let mut bytes = first.bytes();
        let mut proposals = vec![first];
        while count < max_batch {
            match rx.try_recv() {
                Ok(p) if count + p.commands.len() > max_batch || bytes + p.bytes() > max_bytes => {
                    held_over = Some(p);
                    break;
                }
                Ok(p) => {
                    count += p.commands.len();
                    bytes += p.bytes();
                    proposals.push(p);
                }
                Err(_) => break,
            }
        }
        let mut commands = Vec::with_capacity(count);
        let mut waiters = Vec::with_capacity(proposals.len());
        let mut local = LocalCommands::default();
        let typed = proposals
            .iter()
            .filter(|p| matches!(p.waiter, Waiter::Typed(_)))
            .count();
        let mut runs = Vec::new();
        if typed > 0 {
            runs.reserve_exact(proposals.len());
        }
        // Every proposer of the entry is answered by the state machine: the next entry may be
        // cut once this one is applied, without waiting for openraft's core to see the apply
        // and respond (one pass of its loop, with its metrics publication, fewer per entry
        // when the next entry reaches the core in the same pass).
        if max_inflight == 1 && typed == proposals.len() {
            local.applied = Some(Arc::new(Notify::new()));
        }
        let applied = local.applied.clone();
        for p in proposals {
            if runs.capacity() > 0 {
                let unit = match &p.waiter {
                    Waiter::Typed(unit) => Some(unit.0.clone()),
                    Waiter::Encoded(_) => None,
                };
                runs.push((p.commands.len(), unit));
            }
            waiters.push((p.commands.len(), p.waiter));
            commands.extend(p.commands);
        }
        local.runs = Arc::new(runs);
        // Stamp and submit in this one task so stamps are non-decreasing in log order.
        let batch = Batch {
            leader_time: EntryTime(clock.stamp()),
            commands: commands.into(),
            local,
        };
        settle_responses(&mut unread).await;
        let Ok(mut responder) = raft.client_write_ff(batch).await else {
            fail_waiters(waiters, ClusterError::ShuttingDown);
            continue;
        };
        if let Some(applied) = applied {
            tokio::select! {
                biased;
                result = &mut responder => {
                    drop(permit);
                    answer(waiters, result);
                }
                () = applied.notified() => {
                    // Answered already. openraft's response still comes, and its receiver
                    // is kept until it has (a receiver dropped first makes openraft warn).
                    drop(permit);
                    drop(waiters);
                    unread.push_back(responder);
                }
            }
            continue;
        }
        let answer = async move {
            let result = responder.await;
            drop(permit);
            answer(waiters, result);
        };
        if max_inflight == 1 {
            // The next batch could not start before this one is applied anyway (its permit
            // is the only one), so wait here: no task to spawn and wake per batch.
            answer.await;
        } else {
            tokio::spawn(answer);
        }
    }
}

/// openraft's response to an entry, as its receiver gives it.
type Response = Result<ClientWriteResult<TypeConfig>, oneshot::error::RecvError>;

/// Answer an entry's waiters from openraft's response.
fn answer(waiters: Vec<(usize, Waiter)>, response: Response) {
    let err = match response {
        Ok(Ok(resp)) => return split_outputs(waiters, resp.data.results),
        Ok(Err(ClientWriteError::ForwardToLeader(f))) => ClusterError::NotLeader {
            leader: f.leader_id,
        },
        Ok(Err(e)) => ClusterError::Membership(e.to_string()),
        Err(_) => ClusterError::ShuttingDown,
    };
    fail_waiters(waiters, err);
}

/// How many responses to entries whose proposers were answered at apply may wait unread
/// before the batcher waits for the oldest.
const MAX_UNREAD_RESPONSES: usize = 64;

/// Drop the responses that have come in to entries already answered at apply, in order; wait
/// for the oldest when too many are outstanding (openraft's core fell behind its state
/// machine).
async fn settle_responses(unread: &mut VecDeque<oneshot::Receiver<ClientWriteResult<TypeConfig>>>) {
    loop {
        let len = unread.len();
        let Some(front) = unread.front_mut() else {
            break;
        };
        match front.try_recv() {
            Err(oneshot::error::TryRecvError::Empty) if len <= MAX_UNREAD_RESPONSES => break,
            Err(oneshot::error::TryRecvError::Empty) => {
                let _ = front.await;
            }
            _ => {}
        }
        unread.pop_front();
    }
}

/// Hand each waiter its share of an entry's results. A typed waiter was answered by the state
/// machine as it applied the entry, so its share is only read should that not have happened.
fn split_outputs(waiters: Vec<(usize, Waiter)>, mut results: Vec<CommandResult>) {
    let mut from = 0;
    for (n, waiter) in waiters {
        let to = (from + n).min(results.len());
        let mine = &mut results[from..to];
        from = to;
        match waiter {
            Waiter::Typed(unit) if mine.len() == n => unit.0.settle(mine),
            Waiter::Encoded(reply) if mine.len() == n => {
                let _ = reply.send(Ok(mine
                    .iter_mut()
                    .map(|r| std::mem::replace(r, Ok(Vec::new())))
                    .collect()));
            }
            waiter => waiter.fail(ClusterError::Codec(format!(
                "entry returned {} outputs for {n} commands",
                mine.len()
            ))),
        }
    }
}

fn fail_waiters(waiters: Vec<(usize, Waiter)>, err: ClusterError) {
    for (_, waiter) in waiters {
        waiter.fail(err.clone());
    }
}

/// Answer every waiting caller with `err`.
pub(crate) fn fail_all<T>(
    replies: impl IntoIterator<Item = oneshot::Sender<Result<T, ClusterError>>>,
    err: ClusterError,
) {
    for reply in replies {
        let _ = reply.send(Err(err.clone()));
    }
}

/// Reply channel of one read-index request.
pub(crate) type ReadReply = oneshot::Sender<Result<u64, ClusterError>>;

/// Handle to the read batcher task.
#[derive(Clone)]
pub(crate) struct ReadIndexer {
    tx: mpsc::UnboundedSender<ReadReply>,
}

impl ReadIndexer {
    /// Start the read batcher; each confirmation round is bounded by `round_timeout`.
    pub(crate) fn spawn(
        raft: Raft<TypeConfig>,
        round_timeout: Duration,
        gate: Gate,
    ) -> (ReadIndexer, JoinHandle<()>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(run_read_batcher(raft, rx, round_timeout, gate));
        (ReadIndexer { tx }, task)
    }

    /// A log index that, once applied locally, makes a read linearizable. Leader only.
    pub(crate) fn request(&self) -> oneshot::Receiver<Result<u64, ClusterError>> {
        let (reply, rx) = oneshot::channel();
        if let Err(mpsc::error::SendError(r)) = self.tx.send(reply) {
            let _ = r.send(Err(ClusterError::ShuttingDown));
        }
        rx
    }
}

async fn run_read_batcher(
    raft: Raft<TypeConfig>,
    mut rx: mpsc::UnboundedReceiver<ReadReply>,
    round_timeout: Duration,
    gate: Gate,
) {
    while let Some(first) = rx.recv().await {
        // A confirmation round sends heartbeats, which would renew the followers' leases
        // that a leadership transfer waits out.
        gate.opened().await;
        // Only waiters that arrived before the round starts may share its confirmation.
        let mut waiters = vec![first];
        while let Ok(w) = rx.try_recv() {
            waiters.push(w);
        }
        let started = tokio::time::Instant::now();
        let outcome = match tokio::time::timeout(round_timeout, raft.get_read_log_id()).await {
            Ok(Ok((read_log_id, _applied))) => Ok(read_log_id.map(|l| l.index).unwrap_or(0)),
            Ok(Err(e)) => Err(read_error(e)),
            Err(_) => Err(ClusterError::Unavailable {
                waited_ms: started.elapsed().as_millis() as u64,
            }),
        };
        for w in waiters {
            let _ = w.send(outcome.clone());
        }
    }
}

fn read_error(
    e: RaftError<NodeId, CheckIsLeaderError<NodeId, openraft::BasicNode>>,
) -> ClusterError {
    match e {
        RaftError::APIError(CheckIsLeaderError::ForwardToLeader(f)) => ClusterError::NotLeader {
            leader: f.leader_id,
        },
        RaftError::APIError(CheckIsLeaderError::QuorumNotEnough(_)) => {
            ClusterError::Unavailable { waited_ms: 0 }
        }
        RaftError::Fatal(_) => ClusterError::ShuttingDown,
    }
}
