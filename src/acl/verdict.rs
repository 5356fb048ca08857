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
//! That still cost the tenant user INCR 10% and GET 12% (about 190 instructions a call:
//! the verdict `match`, the key range worked out, the pattern list walked, a byte loop the
//! compiler unrolled for up to 16 bytes). So a connection also keeps the one form a tenant
//! needs in line ([`ClientUser::fast_check`]): a command's one key position in its slot,
//! and a user's one `<literal>*` pattern as masked words ([`PrefixKeys`]), compared with a
//! key's first word or two: about 35 instructions (INCR +2%, GET +2.5%; the README's ACL
//! table). Anything else takes [`ClientUser::quick_check`], as before.
//!
//! Only a verdict that allows is final; [`Verdict::Check`] runs [`User::check`] in full,
//! and every refusal (its NOPERM text and ACL LOG entry) comes from that check, so Redis's
//! semantics are those of `check`. A verdict is taken from the root selector: a call the
//! root allows is allowed whatever the other selectors say, and anything else is checked in
//! full. The cache goes with the user it was built for: [`ClientUser::set`] replaces all
//! (an ACL change gives the connection a new `Arc<User>`, so it takes effect at the next
//! command, as in Redis).

use std::sync::Arc;

use super::categories::{commands, key_access};
use super::{channel_arguments, User};
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
        let (mut at, to, step) = table::range_positions(first, last, step, argc);
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

/// A slot of a connection's verdict table: a row's address (0: empty, no row's) and its
/// verdict, with the one form the hot path reads without a `match`: `prefix_at`, the
/// position of the command's one key when its call is allowed exactly when that key
/// passes the user's [`PrefixKeys`] (INCR, GET, the limiters of a tenant `~rl:*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Slot {
    /// The row's address.
    row: usize,
    /// Not 0: the call is allowed when its argument `prefix_at` passes the user's
    /// [`PrefixKeys`] (a call without that argument takes `verdict`).
    prefix_at: u8,
    /// The verdict.
    verdict: Verdict,
}

impl Slot {
    const EMPTY: Slot = Slot {
        row: 0,
        prefix_at: 0,
        verdict: Verdict::Check,
    };
}

/// A user whose key permissions are one pattern `<literal>*` (a tenant's `~rl:*`), its
/// literal of at most 16 bytes held as two masked words, so a key of at least 16 bytes (or
/// 8, for a literal of at most 8) is compared in two (one) word compares, without the
/// pattern list, its form or a byte loop. Shorter keys take [`User::key_allowed`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct PrefixKeys {
    /// The literal's first 8 bytes (little-endian, zero past the literal).
    word0: u64,
    /// Which bits of a key's first 8 bytes are compared.
    mask0: u64,
    /// The literal's bytes 8 to 15.
    word1: u64,
    /// Which bits of a key's bytes 8 to 15 are compared (0: a literal of at most 8).
    mask1: u64,
}

impl PrefixKeys {
    /// The fast form of `user`'s key patterns, if they are one such pattern, with the
    /// permissions it grants (read, write).
    fn of(user: &User) -> Option<(PrefixKeys, bool, bool)> {
        if user.allkeys {
            return None;
        }
        let [k] = user.keys.as_slice() else {
            return None;
        };
        let super::PatternForm::Prefix(len) = k.form else {
            return None;
        };
        if len > 16 {
            return None;
        }
        let mut literal = [0u8; 16];
        literal[..len].copy_from_slice(&k.pattern[..len]);
        let mut mask = [0u8; 16];
        mask[..len].fill(0xff);
        let word = |b: &[u8; 16], at: usize| {
            u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
        };
        let keys = PrefixKeys {
            word0: word(&literal, 0),
            mask0: word(&mask, 0),
            word1: word(&literal, 8),
            mask1: word(&mask, 8),
        };
        Some((keys, k.read, k.write))
    }

    /// Whether `key` matches the pattern, as [`KeyPattern::matches`](super::KeyPattern)
    /// decides; None for a key too short for the word compare.
    #[inline(always)]
    fn matches(&self, key: &[u8]) -> Option<bool> {
        let word = |at: usize| u64::from_le_bytes(key[at..at + 8].try_into().expect("8 bytes"));
        // A key this long is not empty, which a `*` would not match.
        if self.mask1 == 0 {
            if key.len() >= 8 {
                return Some((word(0) ^ self.word0) & self.mask0 == 0);
            }
        } else if key.len() >= 16 {
            return Some(
                ((word(0) ^ self.word0) & self.mask0) | ((word(8) ^ self.word1) & self.mask1) == 0,
            );
        }
        None
    }
}

/// A connection's user with the verdicts of the commands it called (see the module's
/// comment). Reads as the [`User`] it holds.
#[derive(Debug)]
pub struct ClientUser {
    user: Arc<User>,
    /// The user's [`User::unrestricted`], kept here (no load through the `Arc`).
    unrestricted: bool,
    /// The user's key patterns as one prefix, when they are one (see [`PrefixKeys`]; else
    /// zeros, which no slot reads: none has a `prefix_at`).
    prefix: PrefixKeys,
    /// The permissions that prefix pattern grants (read, write); None: it is not one.
    prefix_access: Option<(bool, bool)>,
    /// By `slot(row address)`.
    slots: [Slot; SLOTS],
}

impl ClientUser {
    /// A connection's user.
    pub fn new(user: Arc<User>) -> ClientUser {
        let prefix = PrefixKeys::of(&user);
        ClientUser {
            unrestricted: user.unrestricted,
            prefix: prefix.map(|(p, ..)| p).unwrap_or_default(),
            prefix_access: prefix.map(|(_, read, write)| (read, write)),
            user,
            slots: [Slot::EMPTY; SLOTS],
        }
    }

    /// Change the user (AUTH, RESET, an ACL change): the verdicts are forgotten.
    pub fn set(&mut self, user: Arc<User>) {
        *self = ClientUser::new(user);
    }

    /// Whether the user has every permission (see [`User::unrestricted`]).
    #[inline(always)]
    pub fn unrestricted(&self) -> bool {
        self.unrestricted
    }

    /// The slot of `spec` (a row of the command table, whose address identifies it for as
    /// long as the server runs).
    #[inline(always)]
    fn slot(spec: &'static CommandSpec) -> (usize, usize) {
        let row = spec as *const CommandSpec as usize;
        (row, (row >> 3) % SLOTS)
    }

    /// The answer of a kept verdict that needs no `match`: whether a call of `spec` (its
    /// `argc` arguments, argument `i` given by `arg`) is allowed (`Some(true)`) or
    /// refused (`Some(false)`: its refusal, made and logged by the connection's checked
    /// path); None: ask [`ClientUser::quick_check`]. For the hot path: a few
    /// instructions, kept in line.
    #[inline(always)]
    pub fn fast_check<'a>(
        &self,
        spec: &'static CommandSpec,
        argc: usize,
        arg: impl Fn(usize) -> &'a [u8],
    ) -> Option<bool> {
        let (row, at) = Self::slot(spec);
        let slot = &self.slots[at];
        if slot.row != row {
            return None;
        }
        if slot.prefix_at != 0 {
            let i = usize::from(slot.prefix_at);
            if i < argc {
                return self.prefix.matches(arg(i));
            }
            return None;
        }
        match slot.verdict {
            Verdict::Allowed => Some(true),
            _ => None,
        }
    }

    /// A call's check without its full form: whether a call of `spec` (its `argc`
    /// arguments, argument `i` given by `arg`) is allowed (`Some(true)`), needs the
    /// connection's checked path (`Some(false)`: a refusal, to be made and logged there,
    /// or a restricted user's script), or needs [`User::check`] (None). What this allows,
    /// `check` allows (the verdict's rules, see the module's comment); the user's own
    /// key patterns are read as [`User::key_allowed`] reads them.
    pub fn quick_check<'a>(
        &mut self,
        spec: &'static CommandSpec,
        argc: usize,
        arg: impl Fn(usize) -> &'a [u8],
    ) -> Option<bool> {
        let (row, at) = Self::slot(spec);
        if self.slots[at].row != row {
            self.slots[at] = self.keep(spec);
        }
        let slot = self.slots[at];
        if slot.prefix_at != 0 {
            let i = usize::from(slot.prefix_at);
            if i < argc {
                let key = arg(i);
                if let Some(matches) = self.prefix.matches(key) {
                    return Some(matches);
                }
            }
        }
        match slot.verdict {
            Verdict::Allowed => Some(true),
            Verdict::Keys { read, write } => {
                Some(self.user.range_keys_allowed(spec, argc, arg, read, write))
            }
            Verdict::Check => None,
            Verdict::Screen => Some(false),
        }
    }

    /// The slot for `spec`: its verdict, and `prefix_at` when the call is allowed exactly
    /// when its one key passes the user's [`PrefixKeys`]: the verdict is
    /// [`Verdict::Keys`], the command's keys are one argument at a fixed position, and the
    /// user's one prefix pattern grants the access the command needs.
    fn keep(&self, spec: &'static CommandSpec) -> Slot {
        let verdict = self.user.verdict(spec);
        let mut prefix_at = 0;
        if let (Verdict::Keys { read, write }, Some((may_read, may_write))) =
            (verdict, self.prefix_access)
        {
            if let Keys::Range { first, last, .. } = spec.keys {
                if first == last && (may_read || !read) && (may_write || !write) {
                    prefix_at = u8::try_from(first).unwrap_or(0);
                }
            }
        }
        Slot {
            row: Self::slot(spec).0,
            prefix_at,
            verdict,
        }
    }
}

impl std::ops::Deref for ClientUser {
    type Target = User;

    fn deref(&self) -> &User {
        &self.user
    }
}
