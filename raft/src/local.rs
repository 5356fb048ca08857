//! The typed hand-over between a proposer and its own node's state machine. A command proposed
//! on the leader is encoded for the log as always (the bytes on disk and on the wire do not
//! change), and the typed command travels beside those bytes in the in-memory entry, so that
//! this node's apply runs it as it is instead of decoding the bytes, and leaves the typed output
//! for the proposer instead of encoding a reply that the proposer decodes again (under callgrind
//! about 1,400 of the ~17,900 instructions of a durable single node's unpipelined INCR).
//!
//! Determinism: decoding a command's bytes gives back the command that was encoded, so applying
//! the typed one is applying what every other node (and this one, replaying its log after a
//! restart) applies from the bytes. The typed copy is never serialized: an entry read back from
//! disk, received from a leader or forwarded by a follower carries none and is applied from its
//! bytes, and so is any command whose typed copy is gone (taken back for a retry).
//!
//! Memory: a command is dropped once applied, and the outputs once their proposer has taken
//! them, so what stays in the in-memory log beside each entry's bytes until a snapshot purges it
//! is the empty unit of each proposal on the leader (about 80 bytes with its place in the entry;
//! the outputs too when the proposer gave up waiting, as a client that disconnected does).

use std::any::Any;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

/// One command of a [`Local`] unit.
enum Slot<C, O> {
    /// Not applied yet: the command as proposed.
    Waiting(C),
    /// Applied here: its output, for the proposer.
    Done(O),
    /// Taken: the output by the proposer, or the command back for a retry.
    Taken,
}

/// The typed commands of one proposal (one `propose_many` attempt) and, once applied, their
/// outputs.
pub(crate) struct Local<C, O> {
    slots: Mutex<Vec<Slot<C, O>>>,
}

impl<C: Send + 'static, O: Send + 'static> Local<C, O> {
    /// A unit holding `commands`, none applied.
    pub(crate) fn new(commands: Vec<C>) -> Arc<Self> {
        Arc::new(Local {
            slots: Mutex::new(commands.into_iter().map(Slot::Waiting).collect()),
        })
    }

    fn slots(&self) -> MutexGuard<'_, Vec<Slot<C, O>>> {
        // A panic in `apply` would poison the lock; the slots stay consistent either way.
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Apply command `i` with `apply` and keep its output, if the command is still here;
    /// false when it is not (the caller applies it from its bytes).
    pub(crate) fn apply_with(&self, i: usize, apply: impl FnOnce(&C) -> O) -> bool {
        let mut slots = self.slots();
        let Some(slot) = slots.get_mut(i) else {
            return false;
        };
        match std::mem::replace(slot, Slot::Taken) {
            Slot::Waiting(cmd) => {
                *slot = Slot::Done(apply(&cmd));
                true
            }
            other => {
                *slot = other;
                false
            }
        }
    }

    /// The output of command `i`, if it was applied from this unit.
    pub(crate) fn take_output(&self, i: usize) -> Option<O> {
        let mut slots = self.slots();
        let slot = slots.get_mut(i)?;
        match std::mem::replace(slot, Slot::Taken) {
            Slot::Done(out) => Some(out),
            other => {
                *slot = other;
                None
            }
        }
    }

    /// Free the slots once the proposer has taken what it wanted: the unit itself stays in
    /// the in-memory entry until a snapshot purges it.
    pub(crate) fn release(&self) {
        *self.slots() = Vec::new();
    }

    /// Every command back, if none has been applied (for a new attempt); otherwise `None`, and
    /// the new attempt is applied from its bytes.
    pub(crate) fn reclaim(&self) -> Option<Vec<C>> {
        let mut slots = self.slots();
        if !slots.iter().all(|s| matches!(s, Slot::Waiting(_))) {
            return None;
        }
        Some(
            slots
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
        O: Sync,
    {
        self.clone()
    }
}

/// A [`Local`] unit whose command and output types only the state machine adapter knows.
pub(crate) type ErasedLocal = Arc<dyn Any + Send + Sync>;

/// The typed copies riding in one entry: per proposal, in log order, how many commands it
/// has and its unit (none for a proposal forwarded by a follower). Empty when no proposal of
/// the entry has one. Not part of the entry's value: never serialized, and ignored when
/// entries are compared.
#[derive(Clone, Default)]
pub(crate) struct LocalCommands {
    pub(crate) runs: Vec<(usize, Option<ErasedLocal>)>,
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
            let unit = unit.as_ref().and_then(|u| u.downcast_ref::<Local<C, O>>());
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
    fn a_command_is_applied_once_and_its_output_taken_once() {
        let unit = Local::<String, usize>::new(vec!["ab".into(), "cde".into()]);
        assert!(unit.apply_with(1, |c| c.len()));
        assert!(!unit.apply_with(1, |_| 99), "applied twice");
        assert!(unit.reclaim().is_none(), "one command was applied");
        assert_eq!(unit.take_output(0), None);
        assert_eq!(unit.take_output(1), Some(3));
        assert_eq!(unit.take_output(1), None);
        assert!(!unit.apply_with(5, |_| 0));
        unit.release();
        assert!(!unit.apply_with(0, |_| 0), "released, so nothing to apply");
        assert_eq!(unit.take_output(1), None);
    }

    #[test]
    fn unapplied_commands_come_back_for_a_retry_and_are_then_gone() {
        let unit = Local::<String, usize>::new(vec!["a".into(), "b".into()]);
        assert_eq!(unit.reclaim(), Some(vec!["a".to_string(), "b".to_string()]));
        assert!(
            !unit.apply_with(0, |_| 0),
            "a reclaimed command was applied"
        );
    }

    #[test]
    fn entries_map_each_command_to_its_unit() {
        let a = Local::<String, usize>::new(vec!["x".into(), "y".into()]);
        let local = LocalCommands {
            runs: vec![(1, None), (2, Some(a.erased()))],
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
