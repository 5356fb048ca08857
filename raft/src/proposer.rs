//! Batching on the leader. The write batcher groups the commands of every caller that arrive
//! while earlier batches are in flight into the next Raft entry, stamped with leader time, so one
//! fsync and one AppendEntries carry many commands; outputs are split back per caller. The read
//! batcher lets one leadership confirmation (openraft's read index) answer every read that
//! arrived before it started.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::{Context, Wake, Waker};
use std::time::Duration;

use futures::FutureExt;

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

/// Handle to the write batcher.
#[derive(Clone)]
pub(crate) struct Proposer {
    to: Arc<Batcher>,
    max_bytes: usize,
}

/// Where proposals go: with several entries in flight, the batcher task's queue; with one
/// (the default), the [`Combiner`].
enum Batcher {
    Task(mpsc::UnboundedSender<Proposal>),
    Combined(Arc<Combiner>),
}

impl Drop for Batcher {
    fn drop(&mut self) {
        // The last handle is gone: the combiner's task stops, failing what waits.
        if let Batcher::Combined(c) = self {
            c.close();
        }
    }
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
        if max_inflight == 1 {
            let combiner = Arc::new_cyclic(|me| Combiner {
                raft,
                clock,
                max_batch,
                max_bytes,
                gate,
                me: me.clone(),
                state: Mutex::new(CombinerState::default()),
                attention: Notify::new(),
            });
            let task = tokio::spawn(run_combiner(combiner.clone()));
            let to = Arc::new(Batcher::Combined(combiner));
            return (Proposer { to, max_bytes }, task);
        }
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
        let to = Arc::new(Batcher::Task(tx));
        (Proposer { to, max_bytes }, task)
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
        match &*self.to {
            Batcher::Task(tx) => {
                if let Err(mpsc::error::SendError(p)) = tx.send(proposal) {
                    p.waiter.fail(ClusterError::ShuttingDown);
                }
            }
            Batcher::Combined(c) => c.push(proposal),
        }
    }
}

/// The write batcher with several entries in flight (`max_inflight_batches` above 1); with
/// one, the [`Combiner`] replaces it.
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
        let (batch, waiters) = make_batch(proposals, &clock, None);
        let Ok(responder) = raft.client_write_ff(batch).await else {
            fail_waiters(waiters, ClusterError::ShuttingDown);
            continue;
        };
        let answer = async move {
            let result = responder.await;
            drop(permit);
            answer(waiters, result.ok());
        };
        tokio::spawn(answer);
    }
}

/// One Raft entry's batch from `proposals`, stamped with leader time now, and the waiters of
/// its proposals in order. `applied`, when every proposal is typed, rides in the entry: the
/// state machine tells it once it has answered every proposer.
fn make_batch(
    proposals: Vec<Proposal>,
    clock: &LeaderClock,
    applied: Option<&Arc<EntryDone>>,
) -> (Batch, Vec<(usize, Waiter)>) {
    let count = proposals.iter().map(|p| p.commands.len()).sum();
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
    if typed == proposals.len() {
        local.applied = applied.cloned();
    }
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
    let batch = Batch {
        leader_time: EntryTime(clock.stamp()),
        commands: commands.into(),
        local,
    };
    (batch, waiters)
}

/// The write batcher with one entry in flight (the default). Proposals queue under a lock.
/// When an entry is applied and every proposer of it answered, the state machine cuts the next
/// entry from the queue and hands it to openraft itself, on its own task (flat combining:
/// whoever finds the batcher's work to do does it). Only a proposal that finds no entry in
/// flight wakes a task ([`run_combiner`]) to cut one: cut right there, on the proposer's
/// task, entries held a third of the proposals (callgrind, 50 unpipelined clients: 18 a
/// entry instead of 36-40, and 6.6% more instructions a request); a yield before that cut
/// made the runtime look at its sockets with an extra `epoll_wait` an entry. Before, a batcher
/// task did all cuts, woken 2.8 times an entry with `everysec` (a proposal arrives; the entry
/// is applied); now its task is woken about once an entry.
///
/// Order is as before: entries are cut, stamped and handed to openraft one at a time, under
/// the lock, so stamps do not decrease in log order, and the next entry is cut only once the
/// one in flight was applied (or failed), as with the batcher task's one in-flight slot.
///
/// The task also sees to what no apply answers: an entry that failed (no longer the leader,
/// Raft stopped), one whose proposers were not all answered at apply (a proposal forwarded by
/// a follower, a unit applied from its bytes), a cut held while a leadership transfer closed
/// the gate, and the last handle's drop. openraft's response to an entry wakes it through
/// [`EntryDone`], which does nothing when the apply answered.
struct Combiner {
    raft: Raft<TypeConfig>,
    clock: Arc<LeaderClock>,
    max_batch: usize,
    max_bytes: usize,
    gate: Gate,
    me: Weak<Combiner>,
    state: Mutex<CombinerState>,
    /// Wakes [`run_combiner`].
    attention: Notify,
}

#[derive(Default)]
struct CombinerState {
    queue: VecDeque<Proposal>,
    /// The entry cut and not yet applied or failed.
    inflight: Option<InFlight>,
    /// openraft's responses to entries whose proposers were answered at apply, not yet come
    /// in: the receiver is kept until they have (one dropped first makes openraft warn). At
    /// most a few: the core responds to an entry as soon as the state machine applied it.
    unread: VecDeque<oneshot::Receiver<ClientWriteResult<TypeConfig>>>,
    /// The batcher stopped (the last handle dropped, or its task ended): fail what comes.
    closed: bool,
    /// The task was told to cut the next entry (nothing was in flight when a proposal came).
    cut_pending: bool,
}

struct InFlight {
    waiters: Vec<(usize, Waiter)>,
    responder: oneshot::Receiver<ClientWriteResult<TypeConfig>>,
    done: Arc<EntryDone>,
}

/// An entry in flight, as the state machine and openraft's response see it: the state machine
/// tells [`EntryDone::applied`] once it has answered every proposer of the entry; openraft's
/// response wakes it (it is the response receiver's waker), and it wakes [`run_combiner`]
/// only when the apply did not answer (the entry failed, or needs its encoded results).
pub(crate) struct EntryDone {
    applied: AtomicBool,
    combiner: Weak<Combiner>,
}

impl EntryDone {
    /// Every proposer of the entry was answered at apply: the next entry may be cut (on the
    /// caller's task, the state machine's).
    pub(crate) fn applied(self: &Arc<Self>) {
        self.applied.store(true, Ordering::Release);
        if let Some(c) = self.combiner.upgrade() {
            c.entry_applied(self);
        }
    }
}

impl Wake for EntryDone {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if !self.applied.load(Ordering::Acquire) {
            if let Some(c) = self.combiner.upgrade() {
                c.attention.notify_one();
            }
        }
    }
}

/// What a cut leaves to do once the lock is released.
#[derive(Default)]
#[must_use]
struct AfterCut {
    /// Waiters to fail: their entry could not be handed to openraft.
    failed: Vec<(usize, Waiter)>,
    /// Waiters of an entry answered at apply, dropped (their units' drop looks at each unit's
    /// lock, so not under the combiner's).
    answered: Vec<(usize, Waiter)>,
}

impl AfterCut {
    fn finish(self) {
        fail_waiters(self.failed, ClusterError::ShuttingDown);
        drop(self.answered);
    }
}

impl Combiner {
    fn lock(&self) -> MutexGuard<'_, CombinerState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queue `p`. With no entry in flight, the combiner's task cuts the next one when it runs
    /// (after the connections the runtime already had to run: their proposals join it).
    fn push(&self, p: Proposal) {
        let mut st = self.lock();
        if st.closed {
            drop(st);
            p.waiter.fail(ClusterError::ShuttingDown);
            return;
        }
        st.queue.push_back(p);
        if st.inflight.is_none() && !st.cut_pending {
            st.cut_pending = true;
            self.attention.notify_one();
        }
    }

    /// The state machine answered every proposer of `done`'s entry: cut the next.
    fn entry_applied(&self, done: &Arc<EntryDone>) {
        let mut st = self.lock();
        let mut after = AfterCut::default();
        if st
            .inflight
            .as_ref()
            .is_some_and(|f| Arc::ptr_eq(&f.done, done))
        {
            if let Some(f) = st.inflight.take() {
                st.unread.push_back(f.responder);
                after.answered = f.waiters;
            }
            let more = self.cut(&mut st);
            after.failed = more.failed;
        }
        drop(st);
        after.finish();
    }

    /// Cut the next entry from the queue and hand it to openraft, unless one is in flight, the
    /// queue is empty, the batcher stopped or a leadership transfer closed the gate (then
    /// [`run_combiner`] cuts once it opens).
    fn cut(&self, st: &mut CombinerState) -> AfterCut {
        let mut after = AfterCut::default();
        if st.inflight.is_some() || st.queue.is_empty() || st.closed {
            return after;
        }
        if *self.gate.closed.borrow() {
            self.attention.notify_one();
            return after;
        }
        // Drop the responses that have come in, in order.
        while let Some(front) = st.unread.front_mut() {
            match front.try_recv() {
                Err(oneshot::error::TryRecvError::Empty) => break,
                _ => {
                    st.unread.pop_front();
                }
            }
        }
        let mut count = 0;
        let mut bytes = 0;
        let mut proposals = Vec::new();
        while let Some(p) = st.queue.front() {
            let fits =
                count + p.commands.len() <= self.max_batch && bytes + p.bytes() <= self.max_bytes;
            if !proposals.is_empty() && !fits {
                break;
            }
            count += p.commands.len();
            bytes += p.bytes();
            proposals.extend(st.queue.pop_front());
            if count >= self.max_batch {
                break;
            }
        }
        let done = Arc::new(EntryDone {
            applied: AtomicBool::new(false),
            combiner: self.me.clone(),
        });
        let (batch, waiters) = make_batch(proposals, &self.clock, Some(&done));
        // openraft queues the entry for its core on an unbounded channel: the future is ready
        // at its first poll unless the core has stopped.
        let Some(Ok(mut responder)) = self.raft.client_write_ff(batch).now_or_never() else {
            after.failed = waiters;
            return after;
        };
        // The response's waker is the entry's `EntryDone`: openraft's response wakes the
        // combiner's task only when the apply did not answer.
        let waker = Waker::from(done.clone());
        if Pin::new(&mut responder)
            .poll(&mut Context::from_waker(&waker))
            .is_ready()
        {
            // (Never so soon: the core has not seen the entry. Were it so, the response is
            // gone with this poll, and the task fails the entry's unanswered proposers.)
            self.attention.notify_one();
        }
        st.inflight = Some(InFlight {
            waiters,
            responder,
            done,
        });
        after
    }

    /// The last handle dropped: stop the task.
    fn close(&self) {
        self.lock().closed = true;
        self.attention.notify_one();
    }

    /// Fail whatever waits and refuse what comes (the task ends).
    fn fail_everything(&self) {
        let mut st = self.lock();
        st.closed = true;
        let queued: Vec<Proposal> = st.queue.drain(..).collect();
        let inflight = st.inflight.take();
        drop(st);
        for p in queued {
            p.waiter.fail(ClusterError::ShuttingDown);
        }
        if let Some(f) = inflight {
            fail_waiters(f.waiters, ClusterError::ShuttingDown);
        }
    }
}

/// Fails every waiter of the combiner when its task ends, however it ends (an abort at
/// shutdown included).
struct FailOnDrop(Arc<Combiner>);

impl Drop for FailOnDrop {
    fn drop(&mut self) {
        self.0.fail_everything();
    }
}

/// The combiner's task: cuts an entry when a proposal found none in flight, answers the
/// entries no apply answered and cuts the next entry after them, or once a leadership
/// transfer's gate opens.
async fn run_combiner(combiner: Arc<Combiner>) {
    let c = FailOnDrop(combiner);
    let c = &c.0;
    loop {
        c.attention.notified().await;
        // (A block, so no guard lives across an await.)
        let finished = {
            let mut st = c.lock();
            if st.closed {
                break;
            }
            let mut finished = None;
            if let Some(f) = &mut st.inflight {
                if !f.done.applied.load(Ordering::Acquire) {
                    let response = match f.responder.try_recv() {
                        Ok(r) => Some(Some(r)),
                        Err(oneshot::error::TryRecvError::Empty) => None,
                        Err(oneshot::error::TryRecvError::Closed) => Some(None),
                    };
                    if let Some(response) = response {
                        finished = st.inflight.take().map(|f| (f.waiters, response));
                    }
                }
            }
            finished
        };
        if let Some((waiters, response)) = finished {
            answer(waiters, response);
        }
        // Hold the next entry while a leadership transfer runs; after it, Raft itself refuses
        // the entry (this node no longer leads) and the callers retry at the new leader.
        c.gate.opened().await;
        let after = {
            let mut st = c.lock();
            st.cut_pending = false;
            c.cut(&mut st)
        };
        after.finish();
    }
}

/// Answer an entry's waiters from openraft's response (`None`: it never came, Raft stopped).
fn answer(waiters: Vec<(usize, Waiter)>, response: Option<ClientWriteResult<TypeConfig>>) {
    let err = match response {
        Some(Ok(resp)) => return split_outputs(waiters, resp.data.results),
        Some(Err(ClientWriteError::ForwardToLeader(f))) => ClusterError::NotLeader {
            leader: f.leader_id,
        },
        Some(Err(e)) => ClusterError::Membership(e.to_string()),
        None => ClusterError::ShuttingDown,
    };
    fail_waiters(waiters, err);
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
