//! What COMMAND INFO and COMMAND DOCS say about each command beyond its table row: Redis's
//! own tips, key specifications and documentation (summary, since, group, complexity,
//! arguments, ...), and the same documentation for Tollgate's own commands.
//!
//! Redis's part is data: `redis_commands.resp`, one RESP3 map written by
//! `tools/redis_commands.py` from a real redis-server's COMMAND INFO and COMMAND DOCS, in
//! the types the server sent (so replies match it in RESP2 and RESP3). It is read once, on
//! the first COMMAND INFO or DOCS. A command Redis does not have gets its documentation from
//! [`TOLLGATE_DOCS`] (a unit test checks every row of the table has one or the other).

use std::collections::HashMap;
use std::sync::OnceLock;

use bytes::Bytes;

use crate::protocol::Reply;

/// What redis-server said about one command.
pub struct RedisDoc {
    /// COMMAND INFO's tips (field 8).
    pub tips: Reply,
    /// COMMAND INFO's key specifications (field 9).
    pub key_specs: Reply,
    /// COMMAND DOCS's map for the command.
    pub docs: Reply,
}

const REDIS_COMMANDS: &[u8] = include_bytes!("redis_commands.resp");

/// Tollgate's own commands: name, summary, complexity (group `module`, as redis-server
/// reports a module's commands, such as redis-cell's CL.THROTTLE).
const TOLLGATE_DOCS: &[(&str, &str, &str)] = &[
    (
        "cl.throttle",
        "Rate-limits a key with GCRA, as redis-cell's CL.THROTTLE",
        "O(1)",
    ),
    (
        "increx",
        "Increments a counter within bounds and sets its expiry (Redis 8.8's INCREX)",
        "O(1)",
    ),
    (
        "limit.acquire",
        "Takes one of a key's concurrency slots",
        "O(N) where N is the number of slots held",
    ),
    (
        "limit.all",
        "Checks several limiter rules, charging all of them or none",
        "O(N) where N is the number of rules",
    ),
    ("limit.fixed", "Fixed-window counter limiter", "O(1)"),
    ("limit.gcra", "Generic cell rate algorithm limiter", "O(1)"),
    ("limit.info", "Returns the state of a limiter key", "O(1)"),
    ("limit.leaky", "Leaky-bucket (meter) limiter", "O(1)"),
    (
        "limit.log",
        "Exact sliding-log limiter",
        "O(N) where N is the number of entries in the window",
    ),
    (
        "limit.release",
        "Gives back a concurrency slot taken with LIMIT.ACQUIRE",
        "O(N) where N is the number of slots held",
    ),
    (
        "limit.reset",
        "Deletes limiter keys",
        "O(N) where N is the number of keys",
    ),
    ("limit.sliding", "Sliding-window counter limiter", "O(1)"),
    ("limit.token", "Token-bucket limiter", "O(1)"),
    ("raft.addnode", "Adds a node to the Raft cluster", "O(1)"),
    (
        "raft.heal",
        "Ends a simulated partition (debug builds of tests)",
        "O(1)",
    ),
    (
        "raft.partition",
        "Simulates a network partition of this node (tests)",
        "O(1)",
    ),
    (
        "raft.removenode",
        "Removes a node from the Raft cluster",
        "O(1)",
    ),
    (
        "raft.snapshot",
        "Writes a Raft snapshot now",
        "O(N) where N is the size of the state",
    ),
    (
        "raft.status",
        "Returns this node's Raft status",
        "O(N) where N is the number of nodes",
    ),
    (
        "raft.transfer",
        "Transfers Raft leadership to another node",
        "O(1)",
    ),
];

/// Redis's data for `name` (lower case), if redis-server has the command.
pub fn redis(name: &str) -> Option<&'static RedisDoc> {
    static TABLE: OnceLock<HashMap<String, RedisDoc>> = OnceLock::new();
    TABLE.get_or_init(load).get(name)
}

/// COMMAND DOCS's map for `name` (lower case): Redis's, or Tollgate's own.
pub fn docs(name: &str) -> Option<Reply> {
    if let Some(d) = redis(name) {
        return Some(d.docs.clone());
    }
    let &(_, summary, complexity) = TOLLGATE_DOCS.iter().find(|(n, ..)| *n == name)?;
    Some(Reply::Map(vec![
        (Reply::bulk("summary"), Reply::bulk(summary)),
        (Reply::bulk("since"), Reply::bulk(env!("CARGO_PKG_VERSION"))),
        (Reply::bulk("group"), Reply::bulk("module")),
        (Reply::bulk("complexity"), Reply::bulk(complexity)),
    ]))
}

fn load() -> HashMap<String, RedisDoc> {
    let body = REDIS_COMMANDS
        .iter()
        .position(|&b| b == b'\n')
        .map_or(REDIS_COMMANDS, |i| &REDIS_COMMANDS[i + 1..]);
    let mut at = 0;
    let Some(Reply::Map(entries)) = parse(body, &mut at) else {
        return HashMap::new();
    };
    entries
        .into_iter()
        .filter_map(|(name, fields)| {
            let (Reply::Bulk(name), Reply::Array(fields)) = (name, fields) else {
                return None;
            };
            let [tips, key_specs, docs]: [Reply; 3] = fields.try_into().ok()?;
            let name = String::from_utf8(name.to_vec()).ok()?;
            Some((
                name,
                RedisDoc {
                    tips,
                    key_specs,
                    docs,
                },
            ))
        })
        .collect()
}

/// One RESP3 value of the generated file at `*at` (None on anything malformed; the file
/// is generated, so that only happens if it was edited by hand).
fn parse(b: &[u8], at: &mut usize) -> Option<Reply> {
    let end = *at + b.get(*at..)?.windows(2).position(|w| w == b"\r\n")?;
    let (kind, text) = (b[*at], std::str::from_utf8(&b[*at + 1..end]).ok()?);
    *at = end + 2;
    let count = || text.parse::<usize>().ok();
    Some(match kind {
        b'+' => Reply::Status(text.to_string()),
        b':' => Reply::Integer(text.parse().ok()?),
        b',' => Reply::Double(text.parse().ok()?),
        b'#' => Reply::Bool(text == "t"),
        b'_' => Reply::Nil,
        b'$' => {
            let n = count()?;
            let data = Bytes::copy_from_slice(b.get(*at..*at + n)?);
            *at += n + 2;
            Reply::Bulk(data)
        }
        b'*' => Reply::Array((0..count()?).map(|_| parse(b, at)).collect::<Option<_>>()?),
        b'~' => Reply::Set((0..count()?).map(|_| parse(b, at)).collect::<Option<_>>()?),
        b'%' => Reply::Map(
            (0..count()?)
                .map(|_| Some((parse(b, at)?, parse(b, at)?)))
                .collect::<Option<_>>()?,
        ),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_has_docs_and_redis_data_loads() {
        assert!(redis("get").is_some());
        assert!(redis("zadd").is_some());
        for spec in super::super::all() {
            let Some(Reply::Map(fields)) = docs(spec.name) else {
                panic!("{} has no COMMAND DOCS entry", spec.name);
            };
            assert!(
                fields.iter().any(|(k, _)| *k == Reply::bulk("summary")),
                "{} has no summary",
                spec.name
            );
        }
    }
}
