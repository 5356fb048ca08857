//! A command that panics while it is applied becomes an error reply, not a crash.
//!
//! In a cluster every node applies every committed entry. A command that makes the
//! apply code panic (a bug in a keyspace handler, a limiter, the Lua bridge) would
//! otherwise kill every node, and kill it again on every restart while the entry is
//! replayed: one client command would take the cluster down for good. [`guarded`]
//! runs one command under `catch_unwind` inside the shared apply path
//! (`super::apply_ops`), so the standalone engine and the Raft state machine both get
//! it. Apply is deterministic, so every replica panics at the same point of the same
//! command with the same state behind it: each answers the same error and keeps the
//! same partial effects, and the replicas stay equal.
//!
//! What the client sees is [`panic_reply`]: the command failed part-way, and whatever
//! it changed before the failure stays changed (identically on every node). Then the
//! engine recovers what an unwind can leave inconsistent: the state lock is a
//! `parking_lot` mutex (never poisoned), and the Lua VMs are rebuilt from the script
//! cache and function libraries (an unwind through the script engine can leave a VM
//! mid-call), which every node does at the same log position.
//!
//! `DEBUG PANIC-ON-APPLY` (with `enable-debug-command yes`) proposes a command named
//! [`PANIC_TRIGGER`], which is in no command table and so cannot be sent by a client
//! or a script; applying it panics on purpose, for the tests.

use std::panic::{catch_unwind, AssertUnwindSafe};

use bytes::Bytes;

use super::State;
use crate::protocol::Reply;

/// Name of the command `DEBUG PANIC-ON-APPLY` replicates; applying it panics.
pub const PANIC_TRIGGER: &[u8] = b"debug|panic-on-apply";

/// The operation `DEBUG PANIC-ON-APPLY` executes.
pub fn panic_trigger_op() -> super::Op {
    super::Op::Command(vec![Bytes::from_static(PANIC_TRIGGER)], None)
}

/// Run `apply` (one command named `name`) and turn a panic into [`panic_reply`], after
/// putting the state back into a usable shape. Always inlined into the engine's loop
/// (as a call of its own it cost about 30 instructions per command under callgrind).
#[inline(always)]
pub(super) fn guarded(
    state: &mut State,
    name: &[u8],
    apply: impl FnOnce(&mut State) -> Reply,
) -> Reply {
    match catch_unwind(AssertUnwindSafe(|| apply(&mut *state))) {
        Ok(reply) => reply,
        Err(payload) => recover(state, name, payload),
    }
}

/// A command panicked: log it, rebuild the scripting engine, give the error reply.
#[cold]
#[inline(never)]
fn recover(state: &mut State, name: &[u8], payload: Box<dyn std::any::Any + Send>) -> Reply {
    let name = command_name(name);
    let what = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    tracing::error!(
        command = %name,
        panic = %what,
        "a command panicked while it was applied; it is answered with an error \
         and the scripting engine is rebuilt"
    );
    state.scripts.recover_after_panic(&state.control);
    panic_reply(&name)
}

/// Panic if `args` is the debug trigger (see [`PANIC_TRIGGER`]).
pub(super) fn check_trigger(args: &[Bytes]) {
    if args.len() == 1 && args[0].as_ref() == PANIC_TRIGGER {
        panic!("DEBUG PANIC-ON-APPLY");
    }
}

/// The reply every node gives for a command that panicked while it was applied.
pub fn panic_reply(name: &str) -> Reply {
    Reply::err(format!(
        "ERR internal error while executing '{name}'; the command failed part-way and any change it made before failing is kept (the same on every node)"
    ))
}

/// The command name for messages: lower case, invalid UTF-8 replaced, cut at 64 chars.
fn command_name(name: &[u8]) -> String {
    String::from_utf8_lossy(name)
        .to_lowercase()
        .chars()
        .take(64)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{apply_ops, Op};

    fn cmd(parts: &[&str]) -> Op {
        Op::Command(
            parts
                .iter()
                .map(|p| Bytes::copy_from_slice(p.as_bytes()))
                .collect(),
            None,
        )
    }

    #[test]
    fn a_panicking_command_is_an_error_and_the_batch_goes_on() {
        let mut state = State::default();
        let out = apply_ops(
            &mut state,
            0,
            2,
            &[
                cmd(&["SET", "k", "1"]),
                panic_trigger_op(),
                cmd(&["INCR", "k"]),
                cmd(&["EVAL", "return redis.call('INCR', KEYS[1])", "1", "k"]),
            ],
            crate::engine::Stamp {
                now_us: 1_000_000,
                seed: 0,
            },
        );
        let replies = out.replies.unwrap();
        assert_eq!(replies[0], Reply::ok());
        assert_eq!(replies[1], panic_reply("debug|panic-on-apply"));
        assert_eq!(replies[2], Reply::Integer(2));
        assert_eq!(replies[3], Reply::Integer(3));
    }
}
