//! The command table: every family file exports a `COMMANDS` slice of specs; this file
//! joins them and looks names up case-insensitively.

use std::sync::OnceLock;

use super::Handler;

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
    // Runs twice per command (connection and engine): a bucket by length and first letter,
    // then a case-insensitive compare with the one to three names in it.
    static INDEX: OnceLock<Vec<Vec<&'static CommandSpec>>> = OnceLock::new();
    let index = INDEX.get_or_init(|| {
        let mut index = vec![Vec::new(); 32 * 32];
        for c in all() {
            index[bucket(c.name.as_bytes())].push(c);
        }
        index
    });
    if name.is_empty() || name.len() > 32 {
        return None;
    }
    index[bucket(name)]
        .iter()
        .find(|c| c.name.as_bytes().eq_ignore_ascii_case(name))
        .copied()
}

/// The lookup bucket of a non-empty command name (any case).
fn bucket(name: &[u8]) -> usize {
    (name.len() % 32) * 32 + usize::from(name[0].to_ascii_lowercase() % 32)
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
        assert!(lookup(&[b'g'; 40]).is_none());
        assert!(lookup("gét".as_bytes()).is_none());
    }
}
