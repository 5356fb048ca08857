//! The command table: every family file exports a `COMMANDS` slice of specs; this file
//! joins them and looks names up case-insensitively.

use std::collections::HashMap;
use std::sync::OnceLock;

use super::Handler;
use crate::store::KeyHasher;

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
}

impl CommandSpec {
    /// Whether the command has flag `f`.
    pub fn has(&self, f: u32) -> bool {
        self.flags & f != 0
    }

    /// The key arguments of a call of this command.
    pub fn keys<'a>(&self, args: &'a [bytes::Bytes]) -> Vec<&'a bytes::Bytes> {
        if self.first_key <= 0 || args.len() <= self.first_key as usize {
            return Vec::new();
        }
        let last = if self.last_key < 0 {
            args.len() as i32 + self.last_key
        } else {
            self.last_key.min(args.len() as i32 - 1)
        };
        let step = self.key_step.max(1) as usize;
        (self.first_key as usize..=last.max(0) as usize)
            .step_by(step)
            .filter_map(|i| args.get(i))
            .collect()
    }
}

/// Build a `CommandSpec`: `cmd!(name, arity, flags, first, last, step, handler)` or
/// `cmd!(name, arity, flags, first, last, step)` for connection-level commands.
#[macro_export]
macro_rules! cmd {
    ($name:expr, $arity:expr, $flags:expr, $first:expr, $last:expr, $step:expr, $handler:expr) => {
        $crate::command::CommandSpec {
            name: $name,
            arity: $arity,
            flags: $flags,
            first_key: $first,
            last_key: $last,
            key_step: $step,
            handler: Some($handler),
        }
    };
    ($name:expr, $arity:expr, $flags:expr, $first:expr, $last:expr, $step:expr) => {
        $crate::command::CommandSpec {
            name: $name,
            arity: $arity,
            flags: $flags,
            first_key: $first,
            last_key: $last,
            key_step: $step,
            handler: None,
        }
    };
}

/// Every command family's table.
const FAMILIES: &[&[CommandSpec]] = &[
    super::strings::COMMANDS,
    super::keys::COMMANDS,
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

/// Look up a command by name, ignoring case.
pub fn lookup(name: &[u8]) -> Option<&'static CommandSpec> {
    static INDEX: OnceLock<HashMap<Vec<u8>, &'static CommandSpec, KeyHasher>> = OnceLock::new();
    let index = INDEX.get_or_init(|| all().map(|c| (c.name.as_bytes().to_vec(), c)).collect());
    if name.len() > 32 {
        return None;
    }
    let mut lower = [0u8; 32];
    let lower = &mut lower[..name.len()];
    lower.copy_from_slice(name);
    lower.make_ascii_lowercase();
    index.get(&lower[..]).copied()
}
