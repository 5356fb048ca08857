//! Commands: the table that knows every command, the handlers of the keyspace commands
//! grouped by family, and [`execute`], which runs a keyspace command.
//!
//! Every command is one row of the table (`table.rs`, [`CommandSpec`]): its name, arity,
//! flags, key positions and handlers. Keyspace commands are plain functions
//! `fn(&mut Ctx, &[Bytes]) -> Reply`: they read and write the keyspace handed to them with
//! the `now_ms` handed to them, nothing else (the determinism rule), so the same function
//! serves the standalone engine, Lua's `redis.call` and the Raft state machine. Commands that
//! act on the connection itself (AUTH, MULTI, CLIENT, ...) have a [`ClientHandler`] in their
//! row instead, which `server::connection` runs with the client's state.
//!
//! Command files are grouped by family, each reading like a page of the Redis docs:
//!
//! | file | what it owns |
//! | --- | --- |
//! | `table.rs` | the row type, the list of families, name lookup |
//! | `args.rs` | argument parsing shared by the families, Redis's common error texts |
//! | `bitmaps.rs` | SETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD over string values |
//! | `hyperloglog.rs`, `hll_format.rs` | PFADD, PFCOUNT, PFMERGE; Redis's HyperLogLog format and estimator |
//! | `lcs.rs` | LCS (longest common subsequence of two strings) |
//! | `strings.rs`, `keys.rs`, `hashes.rs`, `lists.rs`, `sets.rs`, `zsets.rs` | the data-type families |
//! | `zset_algebra.rs` | ZUNION, ZINTER, ZDIFF, their STORE forms, ZINTERCARD |
//! | `geo.rs` | GEOADD, GEOPOS, GEODIST, GEOHASH, GEORADIUS*, GEOSEARCH* over sorted sets |
//! | `object.rs` | OBJECT (the encoding rules are `store::encoding`) |
//! | `sort.rs` | SORT and SORT_RO |
//! | `collection.rs` | what the collection families share (SCAN cursors, random picks) |
//! | `limiter.rs` | CL.THROTTLE, INCREX and LIMIT.* over `crate::limiter` |
//! | `scripting.rs` | EVAL, FCALL, SCRIPT, FUNCTION: the bridge to `crate::scripting` |
//! | `blocking.rs` | BLPOP & co.: the pops they run (blocking is the connection's) |
//! | `pubsub.rs` | PUBLISH, SPUBLISH, and the rows of the subscription commands |
//! | `server.rs` | PING, ECHO, TIME, SELECT, and the rows of the connection commands |

pub mod args;
pub mod bitmaps;
pub mod blocking;
pub mod collection;
pub mod docs;
pub mod dump;
pub mod geo;
pub mod hashes;
pub mod hll_format;
pub mod hyperloglog;
pub mod keys;
pub mod lcs;
pub mod limiter;
pub mod lists;
pub mod object;
pub mod pubsub;
pub mod scripting;
pub mod server;
pub mod sets;
pub mod sort;
pub mod strings;
pub mod table;
pub mod zset_algebra;
pub mod zsets;

use bytes::Bytes;

use crate::protocol::Reply;
use crate::store::{Db, Keyspace};

pub use crate::store::DATABASES;

/// The Lua engine and its BUSY/KILL control, handed to scripting commands.
pub struct Scripts<'a> {
    /// The engine (VMs, script cache, function libraries).
    pub engine: &'a mut crate::scripting::ScriptEngine,
    /// Shared with connections for BUSY replies and SCRIPT KILL.
    pub control: &'a std::sync::Arc<crate::scripting::ScriptControl>,
}

pub use table::{all, lookup, CommandSpec, Keys};

/// Command flags, as in Redis's command table (COMMAND INFO prints the ones Redis has).
pub mod flags {
    /// May modify the keyspace.
    pub const WRITE: u32 = 1;
    /// Only reads.
    pub const READONLY: u32 = 1 << 1;
    /// Administrative.
    pub const ADMIN: u32 = 1 << 2;
    /// Not allowed inside scripts.
    pub const NOSCRIPT: u32 = 1 << 3;
    /// May grow memory.
    pub const DENYOOM: u32 = 1 << 4;
    /// O(1) or O(log n).
    pub const FAST: u32 = 1 << 5;
    /// Reads and writes no state (PING, ECHO, SELECT): in a cluster a node answers it
    /// itself, like a read, rather than through the Raft log.
    pub const STATELESS: u32 = 1 << 6;
    /// Not allowed inside MULTI (queued as an error).
    pub const NO_MULTI: u32 = 1 << 7;
    /// Allowed before AUTH.
    pub const NO_AUTH: u32 = 1 << 8;
    /// Runs a script (EVAL, FCALL, ...): may run long, touches any key.
    pub const SCRIPT: u32 = 1 << 9;
    /// Uses randomness (replies may differ between runs).
    pub const RANDOM: u32 = 1 << 10;
    /// Runs at once inside MULTI instead of being queued (MULTI, EXEC, DISCARD, WATCH,
    /// QUIT, RESET).
    pub const NOT_QUEUED: u32 = 1 << 11;
    /// Allowed while a RESP2 client is in subscribe mode (PING, QUIT, RESET, and the
    /// (un)subscribe commands). Tollgate has no subscribe mode yet; pub/sub enforces it.
    pub const SUBSCRIBED: u32 = 1 << 12;
    /// May block the client until a key changes or a timeout passes (Redis's `blocking`).
    pub const BLOCKING: u32 = 1 << 13;
    /// Pub/sub related (Redis's `pubsub`).
    pub const PUBSUB: u32 = 1 << 14;
    /// May replicate although not flagged WRITE (Redis's `may_replicate`: PUBLISH, ...).
    pub const MAY_REPLICATE: u32 = 1 << 15;
    /// Runs the queued transaction (EXEC): when the call itself is refused (wrong number of
    /// arguments, ...) inside MULTI, the transaction is discarded and the refusal answered
    /// as `EXECABORT Transaction discarded because of: <reason>`, as Redis's `rejectCommand`
    /// does. (A high bit, clear of the flags other families add after `MAY_REPLICATE`.)
    pub const RUNS_TRANSACTION: u32 = 1 << 24;
    /// Redis's `skip_monitor`: MONITOR is not fed this call after it ran; the command feeds
    /// it before it runs instead (the scripts, so that their `redis.call`s follow their
    /// line; see `pubsub::monitor`).
    pub const SKIP_MONITOR: u32 = 1 << 25;
    /// A container of subcommands in Redis (CONFIG, CLIENT, OBJECT, ...): its calls are
    /// counted per subcommand (`config|get`) in INFO commandstats, latencystats, LATENCY
    /// HISTOGRAM and `/metrics`, as Redis 7.0 counts them. A unit test checks it is set
    /// exactly on the rows Redis has subcommands for.
    pub const SUBCOMMANDS: u32 = 1 << 26;
    /// Goes through the Raft log in a cluster although Redis flags it `readonly`: it may
    /// rewrite its key's bytes (PFCOUNT's cached cardinality), which every replica must do
    /// at the same point. Internal routing only; COMMAND INFO keeps Redis's flags.
    pub const LOGGED: u32 = 1 << 27;
}

/// A keyspace command handler.
pub type Handler = fn(&mut Ctx, &[Bytes]) -> Reply;

/// A keyspace command handler that only borrows its arguments (see `CommandSpec::fast`).
pub type FastHandler = fn(&mut Ctx, &[&[u8]]) -> Reply;

/// A connection command handler: runs on the connection, with the client's state
/// (`server::connection::Client`). Made from an
/// `async fn(&mut Client, &[Bytes]) -> Answer` by [`on_client!`](crate::on_client).
pub type ClientHandler = for<'a> fn(&'a mut Client, &'a [Bytes]) -> ClientFuture<'a>;

/// What a [`ClientHandler`] returns: a future of its [`Answer`].
pub type ClientFuture<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Answer> + Send + 'a>>;

pub use crate::server::connection::{Answer, Client};

/// The [`ClientHandler`] of an `async fn(&mut Client, &[Bytes]) -> Answer`:
/// `on_client!(f)`.
#[macro_export]
macro_rules! on_client {
    ($f:path) => {{
        fn handler<'a>(
            client: &'a mut $crate::command::Client,
            args: &'a [bytes::Bytes],
        ) -> $crate::command::ClientFuture<'a> {
            Box::pin($f(client, args))
        }
        handler
    }};
}

/// Call `f` with `args` as borrowed slices (on the stack for up to
/// [`crate::protocol::parser::FRAME_ARGS`] arguments).
pub fn with_slices<T>(args: &[Bytes], f: impl FnOnce(&[&[u8]]) -> T) -> T {
    const N: usize = crate::protocol::parser::FRAME_ARGS;
    if args.len() <= N {
        let mut slices: [&[u8]; N] = [&[]; N];
        for (slot, arg) in slices.iter_mut().zip(args) {
            *slot = arg;
        }
        f(&slices[..args.len()])
    } else {
        f(&args.iter().map(|a| &a[..]).collect::<Vec<_>>())
    }
}

/// The `Handler` of a `FastHandler`: `borrowed!(f)`.
#[macro_export]
macro_rules! borrowed {
    ($fast:path) => {{
        fn handler(
            ctx: &mut $crate::command::Ctx,
            args: &[bytes::Bytes],
        ) -> $crate::protocol::Reply {
            $crate::command::with_slices(args, |args| $fast(ctx, args))
        }
        handler
    }};
}

/// What a keyspace command runs against.
pub struct Ctx<'a> {
    /// All databases.
    pub ks: &'a mut Keyspace,
    /// The selected database (SELECT changes it for the rest of the batch or script).
    pub db: usize,
    /// Time of this execution in unix milliseconds (leader-stamped in a cluster).
    pub now_ms: u64,
    /// The same time in unix microseconds (TIME answers it).
    pub now_us: u64,
    /// Seed of this command's random choices: from the entry's place in the log in a cluster
    /// (the same on every replica), from the batch standalone. See `collection::Rng`.
    pub seed: u64,
    /// The client's protocol version (2 or 3), for replies whose shape differs.
    pub resp: u8,
    /// Redis's out-of-memory state before this command (`maxmemory` reached and nothing to
    /// evict): a script without a shebang is then refused its first `denyoom` call made
    /// before any write.
    pub oom: bool,
    /// The Lua engine; None inside a script (scripts cannot run scripts).
    pub scripts: Option<Scripts<'a>>,
    /// Where limiter decisions are counted (`None` in unit tests). Counting changes no
    /// reply and no state.
    pub metrics: Option<&'a crate::metrics::Metrics>,
    /// The ACL user a script's `redis.call`s are checked against (`engine::Op::AsUser`);
    /// None: every permission.
    pub user: Option<&'a crate::acl::ScriptUser>,
    /// The batch came from a client of this node and someone MONITORs: a script feeds the
    /// commands it calls to the monitors (`pubsub::monitor`).
    pub monitored: bool,
    /// Set by a script whose error reply is the error a `redis.call` made (the table
    /// carries `ignore_error_stats_update`): that error was counted in INFO errorstats
    /// where it arose, so the script's reply is not counted again (as Redis 7.0).
    pub error_counted: bool,
}

impl Ctx<'_> {
    /// The selected database.
    pub fn db(&mut self) -> &mut Db {
        &mut self.ks.dbs[self.db]
    }

    /// Fire keyspace event `event` of class `class` (`crate::pubsub::notify::*`) on `key`
    /// of the selected database, where Redis calls `notifyKeyspaceEvent`.
    pub fn notify(&self, class: u32, event: &str, key: &[u8]) {
        crate::pubsub::notify::notify(&self.ks.pubsub, class, event, key, self.db);
    }
}

/// Redis's error for a command called with the wrong number of arguments.
pub fn arity_error(name: &str) -> Reply {
    Reply::err(format!(
        "ERR wrong number of arguments for '{}' command",
        name.to_ascii_lowercase()
    ))
}

/// A container's HELP reply, as Redis's `addReplyHelp` builds it: a header naming the
/// container, its `lines`, then HELP's own two lines; each a status line.
pub fn help_reply(container: &str, lines: &[&str]) -> Reply {
    let header = format!("{container} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:");
    let footer = ["HELP", "    Prints this help."];
    let body = lines
        .iter()
        .chain(&footer)
        .map(|l| Reply::Status((*l).into()));
    Reply::Array(std::iter::once(Reply::Status(header)).chain(body).collect())
}

/// Redis's error for a subcommand a container does not have: `ERR unknown subcommand
/// 'FOO'. Try CONFIG HELP.` (the subcommand as given, at most 128 bytes up to a NUL, on one
/// line; the container upper-cased).
pub fn unknown_subcommand(container: &[u8], sub: &[u8]) -> Reply {
    Reply::err(sanitize(&format!(
        "ERR unknown subcommand '{}'. Try {} HELP.",
        arg_text(&sub[..sub.len().min(128)]),
        arg_text(container).to_ascii_uppercase()
    )))
}

/// Redis's `addReplySubcommandSyntaxError`: a container's call whose subcommand refuses
/// the arguments it was given, beyond its arity (`ACL CAT a b`, `SLOWLOG GET 1 2`): `ERR
/// unknown subcommand or wrong number of arguments for 'CAT'. Try ACL HELP.` (the
/// subcommand as given, at most 128 bytes; the container upper-cased).
pub fn subcommand_syntax_error(args: &[Bytes]) -> Reply {
    let sub = args.get(1).map_or(&b""[..], |s| &s[..s.len().min(128)]);
    let container = args.first().map_or(&b""[..], |c| &c[..]);
    Reply::err(sanitize(&format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try {} HELP.",
        arg_text(sub),
        arg_text(container).to_ascii_uppercase()
    )))
}

/// Redis's error for an unknown command, quoting the first arguments.
pub fn unknown_command(args: &[Bytes]) -> Reply {
    let name = arg_text(args.first().map(|b| &b[..]).unwrap_or(b""));
    let mut quoted = String::new();
    for a in args.iter().skip(1) {
        if quoted.len() >= 128 {
            break;
        }
        let room = 128 - quoted.len();
        let text = arg_text(a);
        let cut: String = text.chars().take(room).collect();
        quoted.push_str(&format!("'{cut}' "));
    }
    let name: String = name.chars().take(128).collect();
    Reply::err(sanitize(&format!(
        "ERR unknown command '{name}', with args beginning with: {quoted}"
    )))
}

/// An argument as Redis's `%s` puts it into an error text: up to its first NUL byte (a C
/// string ends there), with invalid UTF-8 shown as U+FFFD.
pub fn arg_text(a: &[u8]) -> std::borrow::Cow<'_, str> {
    let end = a.iter().position(|&c| c == 0).unwrap_or(a.len());
    String::from_utf8_lossy(&a[..end])
}

/// Error texts must fit on one line: Redis replaces CR and LF with spaces.
pub fn sanitize(s: &str) -> String {
    s.replace(['\r', '\n'], " ")
}

/// Check arity against a spec: positive = exact, negative = at least.
pub fn arity_ok(spec: &CommandSpec, argc: usize) -> bool {
    arity_matches(spec.arity, argc)
}

/// Whether `argc` arguments (the command name included) fit Redis's `arity`: positive =
/// exactly that many, negative = at least that many.
pub fn arity_matches(arity: i32, argc: usize) -> bool {
    if arity >= 0 {
        argc == arity as usize
    } else {
        argc >= arity.unsigned_abs() as usize
    }
}

/// Run one keyspace command (looked up, arity-checked) against `ctx`.
pub fn execute(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let Some(spec) = args.first().and_then(|n| lookup(n)) else {
        return unknown_command(args);
    };
    execute_spec(ctx, spec, args)
}

/// [`execute`] for a command whose table entry the caller already looked up (`spec` must be
/// the entry of `args[0]`).
pub fn execute_spec(ctx: &mut Ctx, spec: &CommandSpec, args: &[Bytes]) -> Reply {
    if !arity_ok(spec, args.len()) {
        return arity_error(spec.name);
    }
    // A container's subcommand is looked up and its arity checked here, from the one
    // table of subcommands (`acl::categories`), for every way a keyspace handler runs
    // (EXEC, scripts, the Raft log's apply), as the connection checks it before a call
    // runs or is queued: the handlers (SCRIPT, FUNCTION, OBJECT) only dispatch on it.
    if spec.has(flags::SUBCOMMANDS) {
        let refused = with_slices(args, |a| {
            crate::acl::categories::subcommand_refusal(spec, a)
        });
        if let Some((reply, _)) = refused {
            return reply;
        }
    }
    match spec.handler {
        Some(h) => h(ctx, args),
        None => Reply::err(format!(
            "ERR '{}' is not allowed in this context",
            spec.name
        )),
    }
}
