//! The command table: every family file exports a `COMMANDS` slice of specs; this file
//! joins them and looks names up case-insensitively.

use std::sync::OnceLock;

use super::{FastHandler, Handler};

/// Static facts about one command, as in Redis's command table.
#[derive(Debug)]
pub struct CommandSpec {
    /// Lower-case name.
    pub name: &'static str,
    /// Arity: positive = exact argument count (including the name), negative = minimum.
    pub arity: i32,
    /// `flags::*` bits.
    pub flags: u32,
    /// Position of the first key (0 = none).
    pub first_key: i32,
    /// Position of the last key (-1 = last argument).
    pub last_key: i32,
    /// Step between keys.
    pub key_step: i32,
    /// The keyspace handler; None for commands the connection layer runs.
    pub handler: Option<Handler>,
    /// The same handler taking borrowed arguments, for commands that keep none of them:
    /// the connection then hands it the request's frame as parsed, without building an
    /// argument list (`protocol::parser::Frame`).
    pub fast: Option<FastHandler>,
}

impl CommandSpec {
    /// Whether the command has flag `f`.
    pub fn has(&self, f: u32) -> bool {
        self.flags & f != 0
    }

    /// Whether the key positions depend on the arguments (Redis's `movablekeys`).
    pub fn movable_keys(&self) -> bool {
        matches!(
            self.name,
            "eval"
                | "evalsha"
                | "eval_ro"
                | "evalsha_ro"
                | "fcall"
                | "fcall_ro"
                | "sintercard"
                | "limit.all"
        )
    }

    /// Whether a call may name no key at all (Redis's `no_mandatory_keys`: scripts).
    pub fn keys_optional(&self) -> bool {
        self.movable_keys() && !matches!(self.name, "sintercard" | "limit.all")
    }

    /// Whether the command takes keys at all.
    pub fn has_keys(&self) -> bool {
        self.first_key > 0 || self.movable_keys()
    }

    /// The key arguments of a call of this command (`args[0]` is the name); `None` when
    /// the arguments do not say where the keys are (a bad `numkeys`, a malformed rule).
    pub fn keys(&self, args: &[bytes::Bytes]) -> Option<Vec<bytes::Bytes>> {
        if self.movable_keys() {
            return match self.name {
                "limit.all" => Some(super::with_slices(args, super::limiter::limit_all_keys))
                    .filter(|k| !k.is_empty()),
                // numkeys key [key ...] ...
                "sintercard" => counted_keys(args, 1),
                // script|sha|function numkeys key [key ...] arg ...
                _ => counted_keys(args, 2),
            };
        }
        if self.first_key <= 0 || args.len() <= self.first_key as usize {
            return Some(Vec::new());
        }
        let last = if self.last_key < 0 {
            args.len() as i32 + self.last_key
        } else {
            self.last_key.min(args.len() as i32 - 1)
        };
        let step = self.key_step.max(1) as usize;
        Some(
            (self.first_key as usize..=last.max(0) as usize)
                .step_by(step)
                .filter_map(|i| args.get(i).cloned())
                .collect(),
        )
    }
}

/// `numkeys` at `args[at]`, then that many keys; `None` unless it is a positive count
/// of arguments that are there.
fn counted_keys(args: &[bytes::Bytes], at: usize) -> Option<Vec<bytes::Bytes>> {
    let n = std::str::from_utf8(args.get(at)?)
        .ok()?
        .parse::<usize>()
        .ok()?;
    let keys = args.get(at + 1..at + 1 + n)?;
    (n > 0).then(|| keys.to_vec())
}

/// Build a `CommandSpec`: `cmd!(name, arity, flags, first, last, step, handler)`,
/// `cmd!(name, arity, flags, first, last, step, fast: handler)` for a `FastHandler`, or
/// `cmd!(name, arity, flags, first, last, step)` for connection-level commands.
#[macro_export]
macro_rules! cmd {
    ($name:expr, $arity:expr, $flags:expr, $first:expr, $last:expr, $step:expr, fast: $fast:path) => {
        $crate::cmd!(@spec $name, $arity, $flags, $first, $last, $step,
            Some($crate::borrowed!($fast)), Some($fast))
    };
    ($name:expr, $arity:expr, $flags:expr, $first:expr, $last:expr, $step:expr, $handler:expr) => {
        $crate::cmd!(@spec $name, $arity, $flags, $first, $last, $step, Some($handler), None)
    };
    ($name:expr, $arity:expr, $flags:expr, $first:expr, $last:expr, $step:expr) => {
        $crate::cmd!(@spec $name, $arity, $flags, $first, $last, $step, None, None)
    };
    (@spec $name:expr, $arity:expr, $flags:expr, $first:expr, $last:expr, $step:expr,
        $handler:expr, $fast:expr) => {
        $crate::command::CommandSpec {
            name: $name,
            arity: $arity,
            flags: $flags,
            first_key: $first,
            last_key: $last,
            key_step: $step,
            handler: $handler,
            fast: $fast,
        }
    };
}

/// Every command family's table.
const FAMILIES: &[&[CommandSpec]] = &[
    super::strings::COMMANDS,
    super::keys::COMMANDS,
    super::dump::COMMANDS,
    super::hashes::COMMANDS,
    super::lists::COMMANDS,
    super::sets::COMMANDS,
    super::zsets::COMMANDS,
    super::limiter::COMMANDS,
    super::scripting::COMMANDS,
    super::server::COMMANDS,
];

/// All commands, in table order.
pub fn all() -> impl Iterator<Item = &'static CommandSpec> {
    FAMILIES.iter().flat_map(|f| f.iter())
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
}
