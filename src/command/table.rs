//! The command table: every family file exports a `COMMANDS` slice of [`CommandSpec`] rows;
//! this file defines the row, joins the families and looks names up case-insensitively.
//!
//! A row is the only place that decides anything about a command: its arity, its flags
//! (read-only, allowed in MULTI, in scripts, before AUTH, ...), where its keys are
//! ([`Keys`]), and how it runs (a keyspace `handler`, a borrowed-argument `fast` variant of
//! it, and/or a `client` handler that runs on the connection with the client's state).
//! The connection, the engine, the Lua bridge and COMMAND INFO/DOCS/GETKEYS read these
//! rows; nothing else compares command names.

use std::sync::OnceLock;

use bytes::Bytes;

use super::{ClientHandler, FastHandler, Handler};
use crate::scripting::ScriptEngine;

/// Static facts about one command, as in Redis's command table.
///
/// How it runs, by which handlers the row has:
/// - `handler` only: a keyspace command. The engine runs it (batched with its neighbours in
///   a pipeline), EXEC runs it, scripts run it unless it is `NOSCRIPT`.
/// - `client` only: a connection command (AUTH, MULTI, CLIENT, INFO, ...). Outside MULTI the
///   connection runs it with the client's state; queued in MULTI, EXEC answers that it is
///   not supported there; scripts may not call it.
/// - both: outside MULTI the connection runs `client`, which answers or passes the call on
///   to `handler` ([`super::Answer::Engine`]); EXEC and scripts run `handler`. SELECT (the
///   connection's database; in EXEC and scripts the batch's), SCRIPT and FUNCTION (KILL and
///   STATS are answered at once, without waiting for the running script).
#[derive(Debug, Clone, Copy)]
pub struct CommandSpec {
    /// Lower-case name.
    pub name: &'static str,
    /// Arity: positive = exact argument count (including the name), negative = minimum.
    pub arity: i32,
    /// `flags::*` bits.
    pub flags: u32,
    /// Where the keys are.
    pub keys: Keys,
    /// The keyspace handler: what the engine, EXEC and scripts run.
    pub handler: Option<Handler>,
    /// The same handler taking borrowed arguments, for commands that keep none of them:
    /// the connection then hands it the request's frame as parsed, without building an
    /// argument list (`protocol::parser::Frame`).
    pub fast: Option<FastHandler>,
    /// The connection-level handler, run with the client's state (outside MULTI).
    pub client: Option<ClientHandler>,
    /// Whether a call may grow memory, for commands where that depends on the call (Redis's
    /// `denyoom` of scripts, by the flags they declare); `None`: the `DENYOOM` flag says (a
    /// container's call: its subcommand's). Set with [`CommandSpec::denyoom_if`].
    pub denyoom_if: Option<DenyoomCheck>,
    /// The subcommands Tollgate implements of a container (CONFIG, CLIENT, OBJECT, ...), in
    /// name order: COMMAND INFO's field 10. Set with [`CommandSpec::subcommands`].
    pub subcommands: &'static [Subcommand],
}

/// One subcommand of a container, as COMMAND INFO describes it (`config|get`): its flags
/// and key positions. Its arity and ACL categories are Redis's, kept once in the ACL
/// command table (`acl::categories`, from redis-server 7.0.15's COMMAND INFO), which also
/// checks a call's arity before it runs. The container's handler runs it.
#[derive(Debug, Clone, Copy)]
pub struct Subcommand {
    /// `container|sub`, lower case.
    pub name: &'static str,
    /// `flags::*` bits, as COMMAND INFO reports them.
    pub flags: u32,
    /// Where its keys are.
    pub keys: Keys,
}

/// A [`Subcommand`] row: `sub!("config|get", ADMIN | NOSCRIPT)`, or with keys
/// `sub!("object|encoding", READONLY, 2, 2, 1)`.
#[macro_export]
macro_rules! sub {
    ($name:expr, $flags:expr) => {
        $crate::command::table::Subcommand {
            name: $name,
            flags: $flags,
            keys: $crate::command::Keys::None,
        }
    };
    ($name:expr, $flags:expr, $first:expr, $last:expr, $step:expr) => {
        $crate::command::table::Subcommand {
            name: $name,
            flags: $flags,
            keys: $crate::command::Keys::range($first, $last, $step),
        }
    };
}

/// Decides per call whether a command may grow memory (see `CommandSpec::denyoom_if`).
pub type DenyoomCheck = fn(&ScriptEngine, &[Bytes]) -> bool;

/// Where a command's keys are among its arguments (`args[0]` is the name).
#[derive(Debug, Clone, Copy)]
pub enum Keys {
    /// No keys.
    None,
    /// From `first` to `last` (negative: counted from the end, -1 = the last argument) every
    /// `step` arguments: Redis's first/last/step.
    Range {
        /// Position of the first key (at least 1).
        first: i32,
        /// Position of the last key; negative counts from the end.
        last: i32,
        /// Step between keys.
        step: i32,
    },
    /// A count at `args[at]`, then that many keys (EVAL's and FCALL's numkeys at 2,
    /// SINTERCARD's at 1). With `optional`, a call may name no key (Redis's
    /// `no_mandatory_keys`).
    Counted {
        /// Position of the count.
        at: usize,
        /// Whether zero keys is a valid call.
        optional: bool,
    },
    /// Found by parsing the arguments (SORT's STORE, GEORADIUS's STORE, LIMIT.ALL's
    /// rules); empty when they do not parse.
    Parsed {
        /// The parser.
        find: fn(&[&[u8]]) -> Vec<Bytes>,
        /// The one key position COMMAND INFO reports as first = last (step 1), as Redis
        /// does for a movable-keys command whose first key is at a fixed place (SORT,
        /// ZUNIONSTORE, GEORADIUS: 1); 0 when none is (LIMIT.ALL).
        first: i32,
    },
}

impl Keys {
    /// `first`, `last`, `step` as Redis's command table gives them; `first` 0 = no keys.
    pub const fn range(first: i32, last: i32, step: i32) -> Keys {
        if first == 0 {
            Keys::None
        } else {
            Keys::Range { first, last, step }
        }
    }
}

impl CommandSpec {
    /// This row with `denyoom_if` set: `cmd!(...).denyoom_if(f)`.
    pub const fn denyoom_if(self, check: DenyoomCheck) -> CommandSpec {
        CommandSpec {
            denyoom_if: Some(check),
            ..self
        }
    }

    /// This row with its subcommands: `cmd!(...).subcommands(&[sub!(...), ...])`.
    pub const fn subcommands(self, subcommands: &'static [Subcommand]) -> CommandSpec {
        CommandSpec {
            subcommands,
            ..self
        }
    }

    /// The subcommand `sub` (any case) of this row, if Tollgate implements it.
    pub fn subcommand(&self, sub: &[u8]) -> Option<&'static Subcommand> {
        self.subcommands.iter().find(|s| {
            s.name
                .as_bytes()
                .get(self.name.len() + 1..)
                .is_some_and(|short| short.eq_ignore_ascii_case(sub))
        })
    }

    /// The flags of a call with `args` (`args[0]` is the name): its subcommand's for a
    /// container whose `args[1]` names one Tollgate implements (a container has no flags of
    /// its own in Redis), else the row's. Checks that depend on what a call does (a MONITOR
    /// client may not touch the keyspace) read these.
    pub fn call_flags(&self, args: &[&[u8]]) -> u32 {
        match args.get(1) {
            Some(sub) if !self.subcommands.is_empty() => {
                self.subcommand(sub).map_or(self.flags, |s| s.flags)
            }
            _ => self.flags,
        }
    }

    /// Where the keys of a call with `args` are: its subcommand's, as for
    /// [`CommandSpec::call_flags`], else the row's.
    pub fn call_keys(&self, args: &[&[u8]]) -> Keys {
        match args.get(1) {
            Some(sub) if !self.subcommands.is_empty() => {
                self.subcommand(sub).map_or(self.keys, |s| s.keys)
            }
            _ => self.keys,
        }
    }

    /// Whether this call may grow memory (Redis's `denyoom`): refused while memory is over
    /// `maxmemory` and nothing can be evicted.
    pub fn denies_oom(&self, scripts: &ScriptEngine, args: &[Bytes]) -> bool {
        match self.denyoom_if {
            Some(check) => check(scripts, args),
            // A container's call: its subcommand's flag (FUNCTION LOAD may grow memory,
            // FUNCTION LIST may not), as Redis looks the subcommand up first.
            None if !self.subcommands.is_empty() => {
                super::with_slices(args, |a| self.call_flags(a)) & super::flags::DENYOOM != 0
            }
            None => self.has(super::flags::DENYOOM),
        }
    }

    /// Whether the command has flag `f`.
    pub fn has(&self, f: u32) -> bool {
        self.flags & f != 0
    }

    /// Whether the key positions depend on the arguments (Redis's `movablekeys`).
    pub fn movable_keys(&self) -> bool {
        matches!(self.keys, Keys::Counted { .. } | Keys::Parsed { .. })
    }

    /// Whether a call may name no key at all (Redis's `no_mandatory_keys`: scripts).
    pub fn keys_optional(&self) -> bool {
        matches!(self.keys, Keys::Counted { optional: true, .. })
    }

    /// Whether the command takes keys at all.
    pub fn has_keys(&self) -> bool {
        !matches!(self.keys, Keys::None)
    }

    /// The first, last and step of COMMAND INFO: the range of a command with keys at fixed
    /// positions, a parsed command's fixed first key, zeros otherwise.
    pub fn key_range(&self) -> (i32, i32, i32) {
        match self.keys {
            Keys::Range { first, last, step } => (first, last, step),
            Keys::Parsed { first, .. } if first > 0 => (first, first, 1),
            _ => (0, 0, 0),
        }
    }

    /// The position of the first key, for a command whose keys are at fixed positions.
    pub fn first_key(&self) -> Option<usize> {
        match self.keys {
            Keys::Range { first, .. } => usize::try_from(first).ok(),
            _ => None,
        }
    }

    /// Whether the engine, EXEC and scripts can run it (it has a keyspace handler).
    pub fn runs_in_engine(&self) -> bool {
        self.handler.is_some()
    }

    /// Whether a script may call it (`redis.call`): a keyspace command not flagged
    /// `NOSCRIPT`.
    pub fn allowed_in_scripts(&self) -> bool {
        self.runs_in_engine() && !self.has(super::flags::NOSCRIPT)
    }

    /// The key arguments of a call of this command (`args[0]` is the name); `None` when
    /// the arguments do not say where the keys are (a bad `numkeys`, a malformed rule).
    pub fn keys(&self, args: &[Bytes]) -> Option<Vec<Bytes>> {
        let (first, last, step) = match self.keys {
            Keys::None => return Some(Vec::new()),
            Keys::Counted { at, .. } => return counted_keys(args, at),
            Keys::Parsed { find, .. } => {
                return Some(super::with_slices(args, find)).filter(|k| !k.is_empty())
            }
            Keys::Range { first, last, step } => (first, last, step),
        };
        let (from, to, step) = range_positions(first, last, step, args.len());
        Some(
            (from..=to)
                .step_by(step)
                .filter_map(|i| args.get(i).cloned())
                .collect(),
        )
    }
}

/// The positions of the keys of a call with `argc` arguments (the name included) of a
/// command whose keys are at Redis's `first`, `last` (negative: from the end), `step`: the
/// first and last position (first > last: no key) and the step between them.
#[inline]
pub fn range_positions(first: i32, last: i32, step: i32, argc: usize) -> (usize, usize, usize) {
    let n = i32::try_from(argc).unwrap_or(i32::MAX);
    let last = if n <= first {
        // No key at all: an empty range.
        0
    } else if last < 0 {
        n + last
    } else {
        last.min(n - 1)
    };
    (
        first.max(1) as usize,
        last.max(0) as usize,
        step.max(1) as usize,
    )
}

/// `numkeys` at `args[at]`, then that many keys; `None` unless it is a positive count
/// of arguments that are there.
fn counted_keys(args: &[Bytes], at: usize) -> Option<Vec<Bytes>> {
    let n = std::str::from_utf8(args.get(at)?)
        .ok()?
        .parse::<usize>()
        .ok()?;
    let keys = args.get(at + 1..at + 1 + n)?;
    (n > 0).then(|| keys.to_vec())
}

/// Build a [`CommandSpec`] row. The keys are either Redis's `first, last, step` (0, 0, 0
/// for none) or `keys: <Keys>`; then how it runs:
///
/// - `handler`: a keyspace handler ([`super::Handler`]);
/// - `fast: f`: a [`super::FastHandler`] (the `Handler` is derived from it);
/// - `client: f`: a connection handler, an `async fn(&mut Client, &[Bytes]) -> Answer`;
/// - `client: f, handler`: both (see [`CommandSpec`]).
///
/// `cmd!("get", 2, READONLY | FAST, 1, 1, 1, fast: get)`,
/// `cmd!("eval", -3, RUN, keys: Keys::Counted { at: 2, optional: true }, script)`,
/// `cmd!("multi", 1, NOT_QUEUED, 0, 0, 0, client: transaction::multi)`.
#[macro_export]
macro_rules! cmd {
    ($name:expr, $arity:expr, $flags:expr, keys: $keys:expr, $($run:tt)+) => {
        $crate::cmd!(@run $name, $arity, $flags, $keys, $($run)+)
    };
    ($name:expr, $arity:expr, $flags:expr, $first:expr, $last:expr, $step:expr, $($run:tt)+) => {
        $crate::cmd!(@run $name, $arity, $flags,
            $crate::command::Keys::range($first, $last, $step), $($run)+)
    };
    (@run $name:expr, $arity:expr, $flags:expr, $keys:expr, fast: $fast:path) => {
        $crate::cmd!(@spec $name, $arity, $flags, $keys,
            Some($crate::borrowed!($fast)), Some($fast), None)
    };
    (@run $name:expr, $arity:expr, $flags:expr, $keys:expr, client: $client:path, $handler:expr) => {
        $crate::cmd!(@spec $name, $arity, $flags, $keys,
            Some($handler), None, Some($crate::on_client!($client)))
    };
    (@run $name:expr, $arity:expr, $flags:expr, $keys:expr, client: $client:path) => {
        $crate::cmd!(@spec $name, $arity, $flags, $keys,
            None, None, Some($crate::on_client!($client)))
    };
    (@run $name:expr, $arity:expr, $flags:expr, $keys:expr, $handler:expr) => {
        $crate::cmd!(@spec $name, $arity, $flags, $keys, Some($handler), None, None)
    };
    (@spec $name:expr, $arity:expr, $flags:expr, $keys:expr,
        $handler:expr, $fast:expr, $client:expr) => {
        $crate::command::CommandSpec {
            name: $name,
            arity: $arity,
            flags: $flags,
            keys: $keys,
            handler: $handler,
            fast: $fast,
            client: $client,
            denyoom_if: None,
            subcommands: &[],
        }
    };
}

/// Every command family's table.
static FAMILIES: &[&[CommandSpec]] = &[
    super::strings::COMMANDS,
    super::bitmaps::COMMANDS,
    super::hyperloglog::COMMANDS,
    super::lcs::COMMANDS,
    super::keys::COMMANDS,
    super::dump::COMMANDS,
    super::hashes::COMMANDS,
    super::lists::COMMANDS,
    super::sets::COMMANDS,
    super::zsets::COMMANDS,
    super::zset_algebra::COMMANDS,
    super::geo::COMMANDS,
    super::sort::COMMANDS,
    super::object::COMMANDS,
    super::limiter::COMMANDS,
    super::scripting::COMMANDS,
    super::pubsub::COMMANDS,
    super::blocking::COMMANDS,
    super::server::COMMANDS,
];

/// All commands, in table order.
pub fn all() -> impl Iterator<Item = &'static CommandSpec> {
    FAMILIES.iter().flat_map(|f| f.iter())
}

/// The position of `spec` in [`all`] (a row of the table, not a copy of one): where the
/// per-command counters of `crate::metrics` are. A hash of the row's address into a table
/// built once (about ten instructions; this runs for every command).
#[inline]
pub fn index(spec: &CommandSpec) -> usize {
    static BY_ADDRESS: OnceLock<Vec<(usize, u32)>> = OnceLock::new();
    let slot = |at: usize| (at >> 3).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - 10);
    let table = BY_ADDRESS.get_or_init(|| {
        let mut t = vec![(0usize, 0u32); SLOTS];
        for (i, c) in all().enumerate() {
            let at = c as *const CommandSpec as usize;
            let mut s = slot(at);
            while t[s].0 != 0 {
                s = (s + 1) % SLOTS;
            }
            t[s] = (at, i as u32);
        }
        t
    });
    let at = spec as *const CommandSpec as usize;
    let mut s = slot(at);
    loop {
        match table[s] {
            (0, _) => break,
            (a, i) if a == at => return i as usize,
            _ => s = (s + 1) % SLOTS,
        }
    }
    // Not a row of the table: a copy. Find it by name (never on the hot path).
    all().position(|c| c.name == spec.name).unwrap_or(0)
}

/// Slots of the lookup table: a power of two, over twice the number of commands.
const SLOTS: usize = 1024;

/// Look up a command by name, ignoring case.
pub fn lookup(name: &[u8]) -> Option<&'static CommandSpec> {
    // Runs for every command: the name is lower-cased into a stack buffer while it is
    // hashed, then an open-addressing table compares only names with the same hash slot
    // (the LIMIT.* names share long prefixes, which made per-byte case-insensitive
    // compares within a length bucket add up).
    static INDEX: OnceLock<Vec<Option<&'static CommandSpec>>> = OnceLock::new();
    let index = INDEX.get_or_init(|| {
        assert!(all().count() * 2 <= SLOTS, "grow the command lookup table");
        let mut index = vec![None; SLOTS];
        for c in all() {
            let (lower, hash) = fold(c.name.as_bytes()).expect("command names are short");
            let mut slot = hash % SLOTS;
            while index[slot].is_some() {
                slot = (slot + 1) % SLOTS;
            }
            debug_assert_eq!(&lower[..c.name.len()], c.name.as_bytes());
            index[slot] = Some(c);
        }
        index
    });
    let (lower, hash) = fold(name)?;
    let lower = &lower[..name.len()];
    let mut slot = hash % SLOTS;
    while let Some(c) = index[slot] {
        if c.name.as_bytes() == lower {
            return Some(c);
        }
        slot = (slot + 1) % SLOTS;
    }
    None
}

/// Look up a subcommand by its full name, `container|sub` in any case (COMMAND INFO and
/// DOCS name subcommands so): its container's row and its own.
pub fn lookup_subcommand(name: &[u8]) -> Option<(&'static CommandSpec, &'static Subcommand)> {
    let bar = name.iter().position(|&b| b == b'|')?;
    let container = lookup(&name[..bar])?;
    Some((container, container.subcommand(&name[bar + 1..])?))
}

/// A name of 1 to 32 bytes lower-cased (zero-padded to 32 bytes), with a hash of it.
/// Works on 8 bytes at a time: command names are ASCII and most are 4 to 16 bytes.
fn fold(name: &[u8]) -> Option<([u8; 32], usize)> {
    if name.is_empty() || name.len() > 32 {
        return None;
    }
    let mut lower = [0u8; 32];
    lower[..name.len()].copy_from_slice(name);
    let mut hash: u64 = name.len() as u64;
    for chunk in lower.chunks_exact_mut(8).take(name.len().div_ceil(8)) {
        let word = ascii_lowercase_word(u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8])));
        chunk.copy_from_slice(&word.to_le_bytes());
        hash = (hash ^ word).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    Some((lower, (hash >> 32) as usize))
}

/// Lower-cases the ASCII letters of 8 bytes at once; every other byte is unchanged.
fn ascii_lowercase_word(w: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // Per byte, with the top bit cleared so the additions cannot carry across bytes:
    // high bit of (b + 0x80 - 'A') set iff b >= 'A'; of (b + 0x80 - 'Z' - 1) iff b > 'Z'.
    let low7 = w & !HIGH;
    let ge_a = low7 + ONES * (0x80 - u64::from(b'A'));
    let gt_z = low7 + ONES * (0x80 - u64::from(b'Z') - 1);
    let upper = ge_a & !gt_z & !w & HIGH;
    w | (upper >> 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_is_the_position_in_the_table() {
        for (i, spec) in all().enumerate() {
            assert_eq!(index(spec), i, "{}", spec.name);
            assert_eq!(index(lookup(spec.name.as_bytes()).unwrap()), i);
        }
    }

    #[test]
    fn lookup_finds_every_command_in_any_case_and_nothing_else() {
        for c in all() {
            assert!(std::ptr::eq(lookup(c.name.as_bytes()).unwrap(), c));
            let upper = c.name.to_ascii_uppercase();
            assert!(std::ptr::eq(lookup(upper.as_bytes()).unwrap(), c));
            // `lpush` + `x` is LPUSHX: a longer name finds only its own command.
            let longer = format!("{}x", c.name);
            assert!(lookup(longer.as_bytes()).is_none_or(|found| found.name == longer));
        }
        assert!(lookup(b"").is_none());
        for b in 0..=255u8 {
            let word = ascii_lowercase_word(u64::from_le_bytes([b; 8]));
            assert_eq!(word.to_le_bytes(), [b.to_ascii_lowercase(); 8], "byte {b}");
        }
        assert!(lookup(&[b'g'; 40]).is_none());
        assert!(lookup("gét".as_bytes()).is_none());
    }

    #[test]
    fn every_row_is_consistent() {
        use super::super::flags::{NOT_QUEUED, READONLY, STATELESS, WRITE};
        let mut names = std::collections::BTreeSet::new();
        for c in all() {
            assert!(names.insert(c.name), "{} listed twice", c.name);
            assert_eq!(c.name, c.name.to_ascii_lowercase(), "names are lower-case");
            assert!(c.arity != 0, "{}: arity 0", c.name);
            assert!(
                c.handler.is_some() || c.client.is_some(),
                "{} runs nowhere",
                c.name
            );
            assert!(
                c.fast.is_none() || c.handler.is_some(),
                "{}: a fast handler without a handler",
                c.name
            );
            // Frames (fast handlers) are judged by the DENYOOM flag alone.
            assert!(c.fast.is_none() || c.denyoom_if.is_none(), "{}", c.name);
            // Only the connection can run a command at once inside MULTI.
            assert!(!c.has(NOT_QUEUED) || c.client.is_some(), "{}", c.name);
            assert!(!(c.has(WRITE) && c.has(READONLY | STATELESS)), "{}", c.name);
            if let Keys::Range { first, last, step } = c.keys {
                assert!(first >= 1 && step >= 1, "{}", c.name);
                assert!(last < 0 || last >= first, "{}", c.name);
            }
        }
    }
}
