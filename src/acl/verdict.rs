//! What a call of one command needs from a user's check, decided once per user and command
//! and kept by each connection: the ACL part of the hot path.
//!
//! [`User::check`] finds the command's id in the ACL tables (a hash of the row's address),
//! builds the call's argument slices, lists the key positions and matches each key against
//! each pattern: measured with `bench/instructions.sh` (callgrind, `-P 32`), a user
//! `~* +@all` cost INCR 5% more instructions than the default user, and a tenant user
//! `~rl:* +incr +get +limit.token` 32%. Most of that does not depend on the arguments: the
//! command bit, the subcommands, the channels, whether the keys need a look at all. A
//! [`Verdict`] is that part, and [`ClientUser`] keeps the verdicts of the commands a
//! connection calls in a small table by the row's address, so a repeated call costs one
//! compare before the keys (if any) are matched in place.
//!
//! Only a verdict that allows is final; [`Verdict::Check`] runs [`User::check`] in full,
//! and every refusal (its NOPERM text and ACL LOG entry) comes from that check, so Redis's
//! semantics are those of `check`. A verdict is taken from the root selector: a call the
//! root allows is allowed whatever the other selectors say, and anything else is checked in
//! full. The cache goes with the user it was built for: [`ClientUser::set`] replaces both
//! (an ACL change gives the connection a new `Arc<User>`, so it takes effect at the next
//! command, as in Redis).

use std::sync::Arc;

use super::categories::{commands, key_access};
use super::{channel_arguments, range_positions, User};
use crate::command::{flags, table, CommandSpec, Keys};

/// What a call of one command needs from its user's check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Allowed, whatever its arguments.
    Allowed,
    /// Allowed when each key (at the row's fixed positions) may be read (`read`) and/or
    /// written (`write`) by the user's own key patterns; otherwise checked in full.
    Keys {
        /// The command reads its keys.
        read: bool,
        /// The command writes its keys.
        write: bool,
    },
    /// Depends on more than the keys (a subcommand, a first-argument rule, channels, a
    /// selector, keys found by parsing, or a refusal): run [`User::check`].
    Check,
    /// Not a plain call for this user: a restricted user's script passes its user on to
    /// where the script runs, which only the connection's checked path does.
    Screen,
}

impl User {
    /// The verdict for calls of `spec` (see [`Verdict`]).
    pub fn verdict(&self, spec: &CommandSpec) -> Verdict {
        if self.unrestricted {
            return Verdict::Allowed;
        }
        if spec.has(flags::SCRIPT) {
            return Verdict::Screen;
        }
        let id = table::index(spec);
        if !commands().list[id].subs.is_empty() || !self.bit(id) {
            return Verdict::Check;
        }
        if !self.allchannels && channel_arguments(spec).is_some() {
            return Verdict::Check;
        }
        // The shard channel commands name their channel as a key; it is checked as a
        // channel only (see `check_selector`).
        if self.allkeys || !spec.has_keys() || spec.has(flags::PUBSUB) {
            return Verdict::Allowed;
        }
        match spec.keys {
            Keys::Range { .. } => {
                let (read, write) = key_access(id);
                Verdict::Keys { read, write }
            }
            _ => Verdict::Check,
        }
    }

    /// Whether the keys of a call of `spec` (its `argc` arguments, argument `i` given by
    /// `arg`) pass [`Verdict::Keys`]: false for a command whose keys are not at fixed
    /// positions (never given that verdict).
    #[inline]
    pub fn range_keys_allowed<'a>(
        &self,
        spec: &CommandSpec,
        argc: usize,
        arg: impl Fn(usize) -> &'a [u8],
        read: bool,
        write: bool,
    ) -> bool {
        let Keys::Range { first, last, step } = spec.keys else {
            return false;
        };
        let (mut at, to, step) = range_positions(first, last, step, argc);
        while at <= to {
            if !self.key_allowed(arg(at), read, write) {
                return false;
            }
            at += step;
        }
        true
    }
}

/// Slots of a connection's verdict table: a power of two. Rows of one family's table are
/// consecutive in memory, so neighbouring commands take different slots.
const SLOTS: usize = 8;

/// A connection's user with the verdicts of the commands it called (see the module's
/// comment). Reads as the [`User`] it holds.
#[derive(Debug)]
pub struct ClientUser {
    user: Arc<User>,
    /// By `slot(row address)`: the row's address and its verdict (address 0: empty).
    verdicts: [(usize, Verdict); SLOTS],
}

impl ClientUser {
    /// A connection's user.
    pub fn new(user: Arc<User>) -> ClientUser {
        ClientUser {
            user,
            verdicts: [(0, Verdict::Check); SLOTS],
        }
    }

    /// Change the user (AUTH, RESET, an ACL change): the verdicts are forgotten.
    pub fn set(&mut self, user: Arc<User>) {
        *self = ClientUser::new(user);
    }

    /// The verdict for a call of `spec` (a row of the command table, whose address
    /// identifies it for as long as the server runs).
    #[inline]
    pub fn verdict(&mut self, spec: &'static CommandSpec) -> Verdict {
        let at = spec as *const CommandSpec as usize;
        let slot = &mut self.verdicts[(at >> 3) % SLOTS];
        if slot.0 == at {
            return slot.1;
        }
        let v = self.user.verdict(spec);
        *slot = (at, v);
        v
    }
}

impl std::ops::Deref for ClientUser {
    type Target = User;

    fn deref(&self) -> &User {
        &self.user
    }
}
