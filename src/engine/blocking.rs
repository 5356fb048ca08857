//! Serving blocked clients after a write (Redis's `handleClientsBlockedOnKeys`).
//!
//! Standalone, the engine calls [`serve_ready`] right after each batch, still holding the
//! state: for every key the batch made ready (in the order they became ready), the clients
//! blocked on it run their command, first blocked first, until one finds nothing to pop.
//! A served command may make further keys ready (BLMOVE's destination), which are served
//! in the same pass. So a pushed element goes to a blocked client before the pushing
//! client's next command, as in Redis.
//!
//! In a cluster the state machine must not pop on its own (a pop is a write every node
//! applies), so [`wake_ready`] only wakes this node's waiters; each proposes its pop
//! through the log and stays blocked if the key is empty again when it applies.

use crate::command;
use crate::protocol::Reply;
use crate::pubsub::blocking::Want;

use super::{Stamp, State};

/// Whether a blocked command's reply means "nothing to pop yet".
pub fn nothing(reply: &Reply) -> bool {
    matches!(reply, Reply::Nil | Reply::NilArray)
}

/// Standalone: serve the clients blocked on the keys made ready since the last call.
///
/// Runs after every command: without blocked clients, one atomic load, inlined (out of
/// line the call cost 20 instructions per command under callgrind).
#[inline]
pub fn serve_ready(state: &mut State, stamp: Stamp) {
    if state.ks.pubsub.blocking.blocked() != 0 {
        serve_blocked(state, stamp);
    }
}

#[inline(never)]
fn serve_blocked(state: &mut State, stamp: Stamp) {
    let now_ms = stamp.now_ms();
    let hub = state.ks.pubsub.clone();
    // Each round serves what the previous one made ready; a bounded number of rounds
    // keeps a chain of BLMOVEs from running without end (each round consumes elements,
    // so a chain ends anyway).
    let mut ready = Vec::new();
    for _ in 0..10_000 {
        hub.blocking.swap_ready(&mut ready);
        if ready.is_empty() {
            return;
        }
        for (db, key) in ready.drain(..) {
            while let Some(w) = hub.blocking.first(db, &key) {
                // A key of another type does not serve the client: it stays blocked.
                let fits = state.ks.dbs[db].get(&key, now_ms).is_some_and(|e| {
                    matches!(
                        (&e.value, w.want),
                        (crate::store::Value::List(_), Want::List)
                            | (crate::store::Value::ZSet(_), Want::ZSet)
                    )
                });
                if !fits {
                    break;
                }
                let reply = {
                    let mut ctx = super::command_ctx(state, w.db, stamp, 0, w.resp, false);
                    command::execute(&mut ctx, &w.args)
                };
                if nothing(&reply) {
                    break;
                }
                hub.blocking.serve(&w, reply);
            }
        }
    }
}

/// Cluster: wake this node's clients blocked on keys the applied entry made ready.
pub fn wake_ready(state: &State) {
    let hub = &state.ks.pubsub;
    let mut ready = Vec::new();
    hub.blocking.swap_ready(&mut ready);
    for (db, key) in ready {
        for w in hub.blocking.waiting(db, &key) {
            w.wake.notify_one();
        }
    }
}
