//! The typed hand-over between a proposer and its own node's state machine. A command proposed
//! on the leader is encoded for the log as always (the bytes on disk and on the wire do not
//! change), and the typed command travels beside those bytes in the in-memory entry, so that
//! this node's apply runs it as it is instead of decoding the bytes, and hands the typed output
//! to the proposer instead of encoding a reply that the proposer decodes again (under callgrind
//! about 1,400 of the ~17,900 instructions of a durable single node's unpipelined INCR).
//!
//! The state machine answers the proposer itself, as soon as it has applied the unit's last
//! command: openraft applies only committed entries, so the write is as durable as the policy
//! says by then. The outputs no longer wait for openraft's core to see the apply's result, send
//! it to the write batcher, and the batcher to split it among the proposals (one task hop and
//! an allocation or two per proposal fewer). The batcher still answers a unit whose entry
//! failed, and one it drops unanswered answers that Raft stopped.
//!
//! Determinism: decoding a command's bytes gives back the command that was encoded, so applying
//! the typed one is applying what every other node (and this one, replaying its log after a
//! restart) applies from the bytes. The typed copy is never serialized: an entry read back from
//! disk, received from a leader or forwarded by a follower carries none and is applied from its
//! bytes, and so is any command whose typed copy is gone (taken back for a retry); such a
//! unit's proposer is answered by the batcher from the entry's encoded results.
//!
//! Memory: a command is dropped once applied, and the outputs once sent to the proposer, so
//! what stays in the in-memory log beside each entry's bytes until a snapshot purges it is the
//! empty unit of each proposal on the leader (about 100 bytes with its place in the entry).

use std::any::Any;
use std::fmt;
use std::future::poll_fn;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use crate::error::ClusterError;
use crate::types::CommandResult;

/// One command of a [`Local`] unit.
enum Slot<C, O> {
    /// Not applied yet: the command as proposed.
    Waiting(C),
    /// Applied here: its output, until the unit's last command is applied.
    Done(O),
    /// Taken: the outputs sent to the proposer, or the command back for a retry.
    Taken,
}

/// A unit's answer to its proposer. The unit itself is the rendezvous (the proposer keeps it
/// to take its commands back for a retry anyway): a oneshot channel beside it cost an
/// allocation, and 220-430 more instructions per unpipelined durable write under callgrind
/// (`bench/durable_breakdown.sh`), to create, fill and poll.
enum Answer<O> {
    /// Not answered yet; the proposer's waker once it has looked.
    Waiting(Option<Waker>),
    /// Answered: the outputs, or why the entry failed, until the proposer takes them.
    Ready(Result<Vec<O>, ClusterError>),
    /// Taken by the proposer.
    Taken,
}

struct Unit<C, O> {
    slots: Vec<Slot<C, O>>,
    /// How many commands were applied from this unit.
    applied: usize,
    answer: Answer<O>,
}

impl<C, O> Unit<C, O> {
    /// Answer the proposer, unless it was answered; the waker to wake once the lock is
    /// released.
    fn answer(&mut self, result: Result<Vec<O>, ClusterError>) -> Option<Waker> {
        match &mut self.answer {
            Answer::Waiting(waker) => {
                let waker = waker.take();
                self.answer = Answer::Ready(result);
                waker
            }
            _ => None,
        }
    }

    fn answered(&self) -> bool {
        !matches!(self.answer, Answer::Waiting(_))
    }
}

/// The typed commands of one proposal (one `propose_many` attempt) and, once applied, their
/// outputs. The state machine answers the proposer itself when it has applied the unit's last
/// command (the entry is committed by then: openraft applies only committed entries), so the
/// outputs skip openraft's response to the batcher and the batcher's split of them.
pub(crate) struct Local<C, O> {
    unit: Mutex<Unit<C, O>>,
}

impl<C: Send + 'static, O: Send + 'static> Local<C, O> {
    /// A unit holding `commands`, none applied; [`Local::answer`] waits for their outputs (or
    /// for why the entry failed).
    pub(crate) fn new(commands: Vec<C>) -> Arc<Self> {
        Arc::new(Local {
            unit: Mutex::new(Unit {
                slots: commands.into_iter().map(Slot::Waiting).collect(),
                applied: 0,
                answer: Answer::Waiting(None),
            }),
        })
    }

    /// Wait for the unit's answer: its outputs once the state machine applied all its
    /// commands, or why its entry failed. Every unit the batcher holds is answered, by the
    /// apply, by the entry's failure, or when the batcher drops it (`proposer::TypedWaiter`).
    /// Answered once: after the proposer took it, it reads that Raft stopped.
    pub(crate) async fn answer(&self) -> Result<Vec<O>, ClusterError> {
        poll_fn(|cx| self.poll_answer(cx)).await
    }

    fn poll_answer(&self, cx: &mut Context<'_>) -> Poll<Result<Vec<O>, ClusterError>> {
        let mut unit = self.unit();
        match std::mem::replace(&mut unit.answer, Answer::Taken) {
            Answer::Ready(result) => Poll::Ready(result),
            Answer::Taken => Poll::Ready(Err(ClusterError::ShuttingDown)),
            Answer::Waiting(waker) => {
                let waker = match waker {
                    Some(w) if w.will_wake(cx.waker()) => w,
                    _ => cx.waker().clone(),
                };
                unit.answer = Answer::Waiting(Some(waker));
                Poll::Pending
            }
        }
    }

    /// The answer if there is one (tests).
    #[cfg(test)]
    fn try_answer(&self) -> Option<Result<Vec<O>, ClusterError>> {
        let waker = Waker::noop();
        match self.poll_answer(&mut Context::from_waker(waker)) {
            Poll::Ready(result) => Some(result),
            Poll::Pending => None,
        }
    }

    fn unit(&self) -> MutexGuard<'_, Unit<C, O>> {
        // A panic in `apply` would poison the lock; the unit stays consistent either way.
        self.unit.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Apply command `i` with `apply` and keep its output, if the command is still here;
    /// false when it is not (the caller applies it from its bytes). Once every command of the
    /// unit is applied, the outputs go to the proposer and the slots are freed.
    pub(crate) fn apply_with(&self, i: usize, apply: impl FnOnce(&C) -> O) -> bool {
        let mut unit = self.unit();
        let Some(slot) = unit.slots.get_mut(i) else {
            return false;
        };
        match std::mem::replace(slot, Slot::Taken) {
            Slot::Waiting(cmd) => *slot = Slot::Done(apply(&cmd)),
            other => {
                *slot = other;
                return false;
            }
        }
        unit.applied += 1;
        if unit.applied == unit.slots.len() {
            let outputs = std::mem::take(&mut unit.slots)
                .into_iter()
                .filter_map(|s| match s {
                    Slot::Done(out) => Some(out),
                    _ => None,
                })
                .collect();
            // (The proposer may have given up waiting: a client that disconnected.)
            let waker = unit.answer(Ok(outputs));
            drop(unit);
            if let Some(waker) = waker {
                waker.wake();
            }
        }
        true
    }

    /// Every command back, if none has been applied (for a new attempt); otherwise `None`, and
    /// the new attempt is applied from its bytes.
    pub(crate) fn reclaim(&self) -> Option<Vec<C>> {
        let mut unit = self.unit();
        if unit.applied > 0 || unit.slots.is_empty() {
            return None;
        }
        if !unit.slots.iter().all(|s| matches!(s, Slot::Waiting(_))) {
            return None;
        }
        Some(
            unit.slots
                .drain(..)
                .filter_map(|s| match s {
                    Slot::Waiting(cmd) => Some(cmd),
                    _ => None,
                })
                .collect(),
        )
    }

    /// This unit with its types erased, to ride in a [`crate::Batch`].
    pub(crate) fn erased(self: &Arc<Self>) -> ErasedLocal
    where
        C: Sync,
        O: Sync + serde::de::DeserializeOwned,
    {
        self.clone()
    }
}

/// What the write batcher does with a unit whose types it does not know: answer its proposer
/// when the entry failed, or, should the entry have been applied without the unit (never by
/// this crate's state machine adapter), from the entry's encoded results.
pub(crate) trait LocalAnswer: Any + Send + Sync {
    /// Answer the proposer with `err`, unless it was answered.
    fn fail(&self, err: ClusterError);
    /// Answer the proposer from the encoded `results` of its commands, unless the state
    /// machine answered it.
    fn settle(&self, results: &[CommandResult]);
    /// The unit itself, to downcast.
    fn as_any(&self) -> &dyn Any;
}

impl<C, O> LocalAnswer for Local<C, O>
where
    C: Send + Sync + 'static,
    O: Send + Sync + serde::de::DeserializeOwned + 'static,
{
    fn fail(&self, err: ClusterError) {
        let waker = self.unit().answer(Err(err));
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    fn settle(&self, results: &[CommandResult]) {
        if self.unit().answered() {
            return;
        }
        let outputs = results
            .iter()
            .map(|r| {
                let bytes = r.as_ref().map_err(|e| ClusterError::Codec(e.clone()))?;
                postcard::from_bytes(bytes)
                    .map_err(|e| ClusterError::Codec(format!("decode output: {e}")))
            })
            .collect();
        let waker = self.unit().answer(outputs);
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A [`Local`] unit whose command and output types only the state machine adapter knows.
pub(crate) type ErasedLocal = Arc<dyn LocalAnswer>;

/// The typed copies riding in one entry: per proposal, in log order, how many commands it
/// has and its unit (none for a proposal forwarded by a follower). Empty when no proposal of
/// the entry has one. Not part of the entry's value: never serialized, and ignored when
/// entries are compared. Shared by every in-memory copy of the entry, as its commands are
/// (`types::Commands`).
#[derive(Clone, Default)]
pub(crate) struct LocalCommands {
    pub(crate) runs: Arc<Vec<(usize, Option<ErasedLocal>)>>,
    /// Told once every command of the entry was applied from its unit (so every proposer of
    /// the entry has been answered): the write batcher may then cut the next entry without
    /// waiting for openraft's response.
    pub(crate) applied: Option<Arc<tokio::sync::Notify>>,
}

impl LocalCommands {
    /// The unit and index within it of each command of the entry, in order (`None` for one
    /// without a typed copy); `None` altogether when the entry has no typed copies.
    pub(crate) fn per_command<C: Send + 'static, O: Send + 'static>(
        &self,
    ) -> Option<impl Iterator<Item = Option<(&Local<C, O>, usize)>>> {
        if self.runs.is_empty() {
            return None;
        }
        Some(self.runs.iter().flat_map(|(len, unit)| {
            let unit = unit
                .as_ref()
                .and_then(|u| u.as_any().downcast_ref::<Local<C, O>>());
            (0..*len).map(move |i| unit.map(|u| (u, i)))
        }))
    }
}

impl fmt::Debug for LocalCommands {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LocalCommands({} proposals)", self.runs.len())
    }
}

impl PartialEq for LocalCommands {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for LocalCommands {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_applied_command_answers_the_proposer_once() {
        let unit = Local::<String, usize>::new(vec!["ab".into(), "cde".into()]);
        assert!(unit.apply_with(1, |c| c.len()));
        assert!(
            unit.try_answer().is_none(),
            "answered before the unit's last command"
        );
        assert!(!unit.apply_with(1, |_| 99), "applied twice");
        assert!(unit.reclaim().is_none(), "one command was applied");
        assert!(unit.apply_with(0, |c| c.len()));
        // Answered: neither a failure nor the encoded results answer again.
        unit.fail(ClusterError::ShuttingDown);
        unit.settle(&[Ok(vec![7]), Ok(vec![7])]);
        assert_eq!(unit.try_answer().unwrap().unwrap(), vec![2, 3]);
        assert!(!unit.apply_with(0, |_| 0), "nothing left to apply");
        assert!(unit.reclaim().is_none(), "answered, so nothing to retry");
    }

    #[test]
    fn unapplied_commands_come_back_for_a_retry_and_are_then_gone() {
        let unit = Local::<String, usize>::new(vec!["a".into(), "b".into()]);
        unit.fail(ClusterError::ShuttingDown);
        assert!(matches!(
            unit.try_answer().unwrap(),
            Err(ClusterError::ShuttingDown)
        ));
        assert_eq!(unit.reclaim(), Some(vec!["a".to_string(), "b".to_string()]));
        assert!(
            !unit.apply_with(0, |_| 0),
            "a reclaimed command was applied"
        );
    }

    #[test]
    fn a_unit_applied_from_bytes_is_answered_from_the_encoded_results() {
        let unit = Local::<String, u32>::new(vec!["a".into()]);
        let encoded = crate::types::encode(&41u32).unwrap();
        unit.erased().settle(&[Ok(encoded)]);
        assert_eq!(unit.try_answer().unwrap().unwrap(), vec![41]);
    }

    #[test]
    fn entries_map_each_command_to_its_unit() {
        let a = Local::<String, usize>::new(vec!["x".into(), "y".into()]);
        let local = LocalCommands {
            runs: Arc::new(vec![(1, None), (2, Some(a.erased()))]),
            applied: None,
        };
        let seen: Vec<Option<usize>> = local
            .per_command::<String, usize>()
            .unwrap()
            .map(|c| c.map(|(_, i)| i))
            .collect();
        assert_eq!(seen, [None, Some(0), Some(1)]);
        // Another state machine's types find no unit.
        let other: Vec<bool> = local
            .per_command::<u8, u8>()
            .unwrap()
            .map(|c| c.is_some())
            .collect();
        assert_eq!(other, [false, false, false]);
        assert!(LocalCommands::default().per_command::<u8, u8>().is_none());
    }
}
