//! OBJECT ENCODING, REFCOUNT, IDLETIME, FREQ and HELP: what Redis 7.0 would say about a
//! key's value. The encoding and reference-count rules are in `store::encoding` (one
//! function per type, from the value and the CONFIG thresholds the keyspace holds); idle
//! time and frequency come from the per-key access information the store keeps for
//! eviction (`store::eviction::AccessClock`), which only LRU or only LFU policies keep, as
//! in Redis. Looking a key up here does not count as a use of it.

use bytes::Bytes;

use super::args::is;
use super::Ctx;
use crate::protocol::Reply;
use crate::store::encoding;

const HELP: &[&str] = &[
    "ENCODING <key>",
    "    Return the kind of internal representation used in order to store the value",
    "    associated with a <key>.",
    "FREQ <key>",
    "    Return the access frequency index of the <key>. The returned integer is",
    "    proportional to the logarithm of the recent access frequency of the key.",
    "IDLETIME <key>",
    "    Return the idle time of the <key>, that is the approximated number of",
    "    seconds elapsed since the last access to the key.",
    "REFCOUNT <key>",
    "    Return the number of references of the value associated with the specified",
    "    <key>.",
];

/// OBJECT ENCODING|REFCOUNT|IDLETIME|FREQ key, OBJECT HELP. The subcommand and its arity
/// were checked against the command table before this runs (`command::execute_spec`).
pub fn object(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    if is(&a[1], "help") {
        return super::help_reply("OBJECT", HELP);
    }
    let subs = ["encoding", "refcount", "idletime", "freq"];
    let Some(sub) = subs.into_iter().find(|s| is(&a[1], s)) else {
        return super::unknown_subcommand(&a[0], &a[1]);
    };
    let now = ctx.now_ms;
    let settings = *ctx.ks.object.read();
    let clock = ctx.ks.clock().clone();
    let db = ctx.db();
    let Some((key, entry)) = db.read_untouched_slot(&a[2], now) else {
        return Reply::Nil;
    };
    match sub {
        "encoding" => Reply::bulk(encoding::encoding(&entry.value)),
        "refcount" => Reply::Integer(encoding::refcount(&entry.value, &settings)),
        "idletime" if clock.lfu() => Reply::err(
            "ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.",
        ),
        "idletime" => Reply::Integer(clock.idle_secs(key) as i64),
        _ if !clock.lfu() => Reply::err(
            "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.",
        ),
        _ => Reply::Integer(i64::from(clock.frequency(key))),
    }
}

use super::flags::READONLY;

/// OBJECT.
pub const COMMANDS: &[super::CommandSpec] = &[crate::cmd!(
    "object",
    -2,
    READONLY | super::flags::SUBCOMMANDS,
    2,
    2,
    1,
    object
)
.subcommands(&[
    crate::sub!("object|encoding", READONLY, 2, 2, 1),
    crate::sub!("object|freq", READONLY, 2, 2, 1),
    crate::sub!("object|help", 0),
    crate::sub!("object|idletime", READONLY, 2, 2, 1),
    crate::sub!("object|refcount", READONLY, 2, 2, 1),
])];
