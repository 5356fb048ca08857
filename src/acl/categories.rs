//! ACL command identities and categories: every row of the command table and every
//! subcommand Redis has for it gets an id (a bit of a user's command set), its categories
//! (`@read`, `@write`, ...) and the read/write permission its keys need.
//!
//! Redis's part is data: `categories.txt`, written by `tools/redis_acl_categories.py` from
//! redis-server 7.0.15's COMMAND INFO, so a row for a command Redis has gets Redis's
//! categories with nothing else to do. Tollgate's own commands state theirs in
//! [`TOLLGATE`] (a unit test checks every row has categories one way or the other). The
//! limiter commands form the category `@ratelimit`.

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::command::{self, flags, CommandSpec};
use crate::protocol::Reply;

/// Redis 7.0's categories in its order (ACL CAT, the order rules are described in), then
/// Tollgate's `ratelimit`.
pub const CATEGORIES: &[&str] = &[
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
    "ratelimit",
];

const REDIS: &str = include_str!("categories.txt");

/// The categories of Tollgate's own commands (Redis has none of these): the limiters are
/// `@ratelimit` (with `@write` and `@fast` or `@slow` as Redis would class them), the
/// Raft administration commands `@admin @slow @dangerous`.
pub const TOLLGATE: &[(&str, &[&str])] = &[
    ("cl.throttle", &["write", "fast", "ratelimit"]),
    ("increx", &["write", "string", "fast", "ratelimit"]),
    ("limit.acquire", &["write", "fast", "ratelimit"]),
    ("limit.all", &["write", "slow", "ratelimit"]),
    ("limit.fixed", &["write", "fast", "ratelimit"]),
    ("limit.gcra", &["write", "fast", "ratelimit"]),
    ("limit.info", &["read", "fast", "ratelimit"]),
    ("limit.leaky", &["write", "fast", "ratelimit"]),
    ("limit.log", &["write", "fast", "ratelimit"]),
    ("limit.release", &["write", "fast", "ratelimit"]),
    ("limit.reset", &["write", "keyspace", "slow", "ratelimit"]),
    ("limit.sliding", &["write", "fast", "ratelimit"]),
    ("limit.token", &["write", "fast", "ratelimit"]),
    ("raft.addnode", &["admin", "slow", "dangerous"]),
    ("raft.heal", &["admin", "slow", "dangerous"]),
    ("raft.partition", &["admin", "slow", "dangerous"]),
    ("raft.removenode", &["admin", "slow", "dangerous"]),
    ("raft.snapshot", &["admin", "slow", "dangerous"]),
    ("raft.status", &["admin", "slow"]),
    ("raft.transfer", &["admin", "slow", "dangerous"]),
];

/// A category's bit, by name (without `@`).
pub fn category_bit(name: &str) -> Option<u32> {
    CATEGORIES
        .iter()
        .position(|c| c.eq_ignore_ascii_case(name))
        .map(|i| 1 << i)
}

/// The names of the categories in `mask`, in [`CATEGORIES`] order.
pub fn category_names(mask: u32) -> impl Iterator<Item = &'static str> {
    CATEGORIES
        .iter()
        .enumerate()
        .filter(move |(i, _)| mask & (1 << i) != 0)
        .map(|(_, c)| *c)
}

/// One command or subcommand as ACL rules see it.
#[derive(Debug)]
pub struct Command {
    /// `name` or `container|sub`, lower case.
    pub name: String,
    /// Its categories, in the order COMMAND INFO lists them.
    pub categories: Vec<&'static str>,
    /// The categories as bits.
    pub mask: u32,
    /// Its container's id, for a subcommand.
    pub parent: Option<usize>,
    /// The ids of its subcommands.
    pub subs: Vec<usize>,
    /// Whether Tollgate has it (a row of the table, or a subcommand of one). Redis's other
    /// commands have ids too, so that rules written for Redis (`+xadd`, `+@stream`) load
    /// unchanged and users are described as redis-server describes them.
    pub exists: bool,
    /// Whether redis-server has it (its categories come from `categories.txt`).
    pub redis: bool,
    /// Redis's arity (COMMAND INFO's; `None` for Tollgate's own commands). A
    /// subcommand's is checked before the call runs or is queued ([`subcommand_refusal`]).
    pub arity: Option<i32>,
}

/// Every command and subcommand: ids `0..rows` are the table's rows in table order (the id
/// of a row is `command::table::index`); Redis's commands Tollgate lacks and all
/// subcommands follow.
#[derive(Debug)]
pub struct Commands {
    /// By id.
    pub list: Vec<Command>,
    /// Lower-case name (`name` or `container|sub`) to id, for the ids after the rows.
    others: HashMap<String, usize>,
}

/// The command identities, built once.
pub fn commands() -> &'static Commands {
    static TABLE: OnceLock<Commands> = OnceLock::new();
    TABLE.get_or_init(build)
}

impl Commands {
    /// Number of ids.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Whether there are no commands (never).
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The id of a command or `container|sub` by name (any case).
    pub fn find(&self, name: &str) -> Option<usize> {
        let lower = name.to_ascii_lowercase();
        if !lower.contains('|') {
            if let Some(spec) = command::lookup(lower.as_bytes()) {
                return Some(command::table::index(spec));
            }
        }
        self.others.get(&lower).copied()
    }

    /// The id a call of `spec` with `args` runs as: its subcommand's when it has
    /// subcommands and `args[1]` names one, else the row's.
    pub fn id_of_call(&self, spec: &CommandSpec, args: &[&[u8]]) -> usize {
        let id = command::table::index(spec);
        if self.list[id].subs.is_empty() {
            return id;
        }
        let Some(sub) = args.get(1) else {
            return id;
        };
        let full = format!(
            "{}|{}",
            spec.name,
            String::from_utf8_lossy(sub).to_ascii_lowercase()
        );
        self.others.get(&full).copied().unwrap_or(id)
    }
}

fn build() -> Commands {
    let mut redis: HashMap<&str, Vec<&'static str>> = HashMap::new();
    let mut arities: HashMap<&str, i32> = HashMap::new();
    for line in REDIS
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let mut words = line.split(' ');
        let name = words.next().unwrap_or_default();
        if let Some(arity) = words.next().and_then(|w| w.parse().ok()) {
            arities.insert(name, arity);
        }
        let cats = words
            .map(|w| {
                let w = w.trim_start_matches('@');
                CATEGORIES
                    .iter()
                    .copied()
                    .find(|c| *c == w)
                    .unwrap_or("slow")
            })
            .collect();
        redis.insert(name, cats);
    }
    let mut list: Vec<Command> = command::all()
        .map(|spec| {
            let categories = redis
                .get(spec.name)
                .cloned()
                .or_else(|| {
                    TOLLGATE
                        .iter()
                        .find(|(n, _)| *n == spec.name)
                        .map(|(_, c)| c.to_vec())
                })
                .unwrap_or_default();
            Command {
                name: spec.name.to_string(),
                mask: mask_of(&categories),
                categories,
                parent: None,
                subs: Vec::new(),
                exists: true,
                redis: redis.contains_key(spec.name),
                arity: arities.get(spec.name).copied(),
            }
        })
        .collect();
    let mut others = HashMap::new();
    // Redis's commands Tollgate lacks, then every subcommand (a container first).
    let mut names: Vec<&&str> = redis.keys().collect();
    names.sort_by_key(|n| (n.contains('|'), **n));
    for name in names {
        let parent = match name.split_once('|') {
            Some((container, _)) => {
                let Some(p) = command::lookup(container.as_bytes())
                    .map(command::table::index)
                    .or_else(|| others.get(container).copied())
                else {
                    continue;
                };
                Some(p)
            }
            None if command::lookup(name.as_bytes()).is_some() => continue,
            None => None,
        };
        let id = list.len();
        let categories = redis[*name].clone();
        let exists = parent.is_some_and(|p| list[p].exists);
        list.push(Command {
            name: name.to_string(),
            mask: mask_of(&categories),
            categories,
            parent,
            subs: Vec::new(),
            exists,
            redis: true,
            arity: arities.get(*name).copied(),
        });
        if let Some(p) = parent {
            list[p].subs.push(id);
        }
        others.insert(name.to_string(), id);
    }
    Commands { list, others }
}

/// Whether the keys of command `id` need read permission (`%R~`) and write permission
/// (`%W~`): a subcommand's are its own key specifications' (`object|encoding` reads), or
/// its container's when it has none; a Redis command Tollgate lacks needs both.
/// Built on the first check of a user without `allkeys`, not at start: deriving them
/// parses Redis's command documentation (about 9 million instructions, which
/// `bench/instructions.sh` counted as 44-88 instructions per request when the table was
/// built with the default user at every start).
pub fn key_access(id: usize) -> (bool, bool) {
    static TABLE: OnceLock<Vec<(bool, bool)>> = OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let cmds = commands();
        let rows: Vec<(bool, bool)> = command::all().map(key_permissions).collect();
        (0..cmds.len())
            .map(|id| match rows.get(id) {
                Some(&access) => access,
                None => {
                    let own = command::docs::redis(&cmds.list[id].name)
                        .and_then(|doc| access_of(&doc.key_specs));
                    let parent = cmds.list[id].parent;
                    match (parent, own) {
                        (Some(_), Some(access)) => access,
                        (Some(p), None) => rows.get(p).copied().unwrap_or((true, true)),
                        (None, _) => (true, true),
                    }
                }
            })
            .collect()
    });
    table.get(id).copied().unwrap_or((true, true))
}

fn mask_of(categories: &[&str]) -> u32 {
    categories
        .iter()
        .filter_map(|c| category_bit(c))
        .fold(0, |m, b| m | b)
}

/// Which permissions a command's keys need, as Redis 7.0 decides from its key
/// specifications: read for `access`, write for `insert`, `delete` or `update` (the union
/// over the command's specifications). A command Redis does not have: read if it is
/// read-only, read and write otherwise.
fn key_permissions(spec: &CommandSpec) -> (bool, bool) {
    let Some(doc) = command::docs::redis(spec.name) else {
        let read_only = spec.has(flags::READONLY);
        return (true, !read_only);
    };
    access_of(&doc.key_specs).unwrap_or((false, false))
}

/// Read and write permission as key specifications ask for them (see
/// [`key_permissions`]); `None` when there are none.
fn access_of(key_specs: &Reply) -> Option<(bool, bool)> {
    let mut words = Vec::new();
    collect_flags(key_specs, &mut words);
    let read = words.iter().any(|w| w == "access");
    let write = words
        .iter()
        .any(|w| w == "insert" || w == "delete" || w == "update");
    (!words.is_empty()).then_some((read, write))
}

/// The values of every `flags` field in a key specification reply, lower-cased.
fn collect_flags(r: &Reply, out: &mut Vec<String>) {
    match r {
        Reply::Array(items) | Reply::Set(items) => items.iter().for_each(|i| collect_flags(i, out)),
        Reply::Map(pairs) => {
            for (k, v) in pairs {
                let is_flags = matches!(k, Reply::Bulk(b) if &b[..] == b"flags")
                    || matches!(k, Reply::Status(s) if s == "flags");
                if is_flags {
                    if let Reply::Array(fs) | Reply::Set(fs) = v {
                        for f in fs {
                            match f {
                                Reply::Status(s) => out.push(s.to_ascii_lowercase()),
                                Reply::Bulk(b) => {
                                    out.push(String::from_utf8_lossy(b).to_ascii_lowercase())
                                }
                                _ => {}
                            }
                        }
                    }
                } else {
                    collect_flags(v, out);
                }
            }
        }
        _ => {}
    }
}

/// The full name a call runs as: `config|set` for a subcommand, else the row's name.
pub fn call_name(spec: &CommandSpec, args: &[&[u8]]) -> &'static str {
    let cmds = commands();
    cmds.list[cmds.id_of_call(spec, args)].name.as_str()
}

/// Whether a call of `spec` with `args` is administrative (`@admin`, Redis's `admin` flag),
/// decided for its subcommand when it has one: MONITOR never shows those.
pub fn is_admin(spec: &CommandSpec, args: &[&[u8]]) -> bool {
    const ADMIN: u32 = 1 << 13;
    debug_assert_eq!(category_bit("admin"), Some(ADMIN));
    let cmds = commands();
    cmds.list[cmds.id_of_call(spec, args)].mask & ADMIN != 0
}

/// Whether a call writes by Redis's own account, its `@write` category (per subcommand:
/// `function|load` writes, `script|load` does not; EVAL does not, its calls are checked as
/// they run). Writes are what `min-replicas-to-write` refuses, as Redis's `processCommand`
/// refuses commands flagged `write`.
pub fn call_writes(spec: &CommandSpec, args: &[&[u8]]) -> bool {
    const WRITE: u32 = 1 << 2;
    debug_assert_eq!(category_bit("write"), Some(WRITE));
    let cmds = commands();
    cmds.list[cmds.id_of_call(spec, args)].mask & WRITE != 0
}

/// Redis's refusal of a container's call before it runs or is queued in MULTI
/// (`processCommand`): a subcommand it does not have (`-ERR unknown subcommand 'x'. Try
/// CONFIG HELP.`, counted in no command's stats) or a subcommand called with the wrong
/// number of arguments (counted as the subcommand's `rejected_calls`: the flag is true).
/// `None` for every other call, and at once for a row without subcommands.
///
/// The one check of a container's call: the connection runs it before a call runs or is
/// queued, `command::execute_spec` before a keyspace handler runs (EXEC, scripts, the Raft
/// log's apply), so the containers' handlers keep no subcommand names or arities of their
/// own; a script's `redis.call` reads the same arity ([`subcommand_arity`]).
pub fn subcommand_refusal(spec: &CommandSpec, args: &[&[u8]]) -> Option<(Reply, bool)> {
    let cmds = commands();
    let row = command::table::index(spec);
    if cmds.list[row].subs.is_empty() || args.len() < 2 {
        return None;
    }
    let id = cmds.id_of_call(spec, args);
    if id == row {
        return Some((command::unknown_subcommand(args[0], args[1]), false));
    }
    let arity = cmds.list[id].arity?;
    if command::arity_matches(arity, args.len()) {
        return None;
    }
    Some((command::arity_error(&cmds.list[id].name), true))
}

/// COMMAND INFO's ACL categories of a command or `container|sub` (`@read`, ...), as
/// redis-server lists them.
pub fn info_categories(name: &str) -> Vec<String> {
    let cmds = commands();
    cmds.find(name)
        .map(|id| {
            cmds.list[id]
                .categories
                .iter()
                .map(|c| format!("@{c}"))
                .collect()
        })
        .unwrap_or_default()
}

/// Redis's arity of a subcommand (`container|sub`), the one its calls are checked against
/// ([`subcommand_refusal`]); `None` if redis-server has no such subcommand.
pub fn subcommand_arity(name: &str) -> Option<i32> {
    let cmds = commands();
    cmds.list[cmds.find(name)?].arity
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_subcommand_is_one_redis_has() {
        let cmds = commands();
        for spec in command::all() {
            // A container lists the subcommands it implements (COMMAND INFO's field 10).
            assert_eq!(
                spec.has(flags::SUBCOMMANDS),
                !spec.subcommands.is_empty(),
                "{}",
                spec.name
            );
            let mut previous = "";
            for sub in spec.subcommands {
                let (container, _) = sub.name.split_once('|').unwrap_or_default();
                assert_eq!(container, spec.name, "{}", sub.name);
                assert!(
                    sub.name > previous,
                    "{}: subcommands in name order",
                    sub.name
                );
                previous = sub.name;
                assert!(subcommand_arity(sub.name).is_some(), "{}", sub.name);
                let id = cmds.find(sub.name).unwrap();
                assert_eq!(cmds.list[id].parent, Some(command::table::index(spec)));
                assert!(!info_categories(sub.name).is_empty(), "{}", sub.name);
                assert!(command::docs::docs(sub.name).is_some(), "{}", sub.name);
                assert!(std::ptr::eq(
                    command::table::lookup_subcommand(sub.name.to_uppercase().as_bytes())
                        .unwrap()
                        .1,
                    sub
                ));
            }
        }
    }

    #[test]
    fn containers_are_flagged_as_redis_has_them() {
        let cmds = commands();
        for spec in command::all() {
            let redis_has_subcommands = !cmds.list[command::table::index(spec)].subs.is_empty();
            assert_eq!(
                spec.has(flags::SUBCOMMANDS),
                redis_has_subcommands,
                "{}: SUBCOMMANDS must be set exactly when redis-server has subcommands for it",
                spec.name
            );
        }
        // MONITOR's admin rule is decided per subcommand.
        let client = command::lookup(b"client").unwrap();
        assert!(is_admin(client, &[b"client", b"LIST"]));
        assert!(!is_admin(client, &[b"client", b"setname", b"x"]));
        assert!(is_admin(
            command::lookup(b"monitor").unwrap(),
            &[b"monitor"]
        ));
        assert!(!is_admin(command::lookup(b"get").unwrap(), &[b"get", b"k"]));
    }

    #[test]
    fn every_row_has_categories() {
        let cmds = commands();
        for spec in command::all() {
            let c = &cmds.list[command::table::index(spec)];
            assert!(
                !c.categories.is_empty(),
                "{} has no ACL categories",
                spec.name
            );
        }
        assert_eq!(
            cmds.find("GET"),
            Some(command::table::index(command::lookup(b"get").unwrap()))
        );
        assert!(cmds.find("config|get").is_some());
        assert!(cmds.find("config|nosuch").is_none());
        let get = &cmds.list[cmds.find("get").unwrap()];
        assert_eq!(get.categories, ["read", "string", "fast"]);
        assert_eq!(key_access(cmds.find("get").unwrap()), (true, false));
        let token = &cmds.list[cmds.find("limit.token").unwrap()];
        assert!(token.mask & category_bit("ratelimit").unwrap() != 0);
    }
}
