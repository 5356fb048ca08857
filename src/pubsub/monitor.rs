//! MONITOR: the registry of this node's clients in monitor mode and the lines they are
//! sent, in Redis 7.0's format (`replicationFeedMonitors`):
//! `+1700000000.123456 [0 127.0.0.1:54321] "SET" "k" "v"`, each argument quoted as Redis's
//! `sdscatrepr` quotes it, `[db lua]` for a command a script ran.
//!
//! Which calls are shown is Redis's rule: a command is fed after it ran unless it is an
//! administrative one (Redis's `admin` flag, decided per subcommand, so `CLIENT LIST` and
//! `CONFIG GET` are hidden while `CLIENT SETNAME` and `CONFIG HELP` are shown) or its row
//! carries `SKIP_MONITOR` (EVAL, EVALSHA, FCALL and their `_RO` forms), which are fed just
//! before they run instead, so that the commands their scripts call come after them.
//! Calls refused before they run (unknown command, wrong arity, NOAUTH, ACL, OOM) are
//! never shown. Secrets are replaced by `(redacted)` where Redis 7.0 redacts them (AUTH,
//! HELLO ... AUTH).
//!
//! Feeding costs the paths that run commands one relaxed atomic load while nobody
//! monitors ([`Monitors::active`]). A monitor's lines go to its connection's mailbox
//! (`pubsub::Subscriber`, shared with its subscriptions, so the two stay in order), bounded
//! by [`LIMIT`]: a monitor that cannot keep up is disconnected with a log line instead of
//! growing without bound. (Redis puts monitors in the `normal` class of
//! `client-output-buffer-limit`, unlimited by default; Tollgate accepts only `normal 0 0 0`
//! there, so the bound is fixed.)
//!
//! What a node shows is what its own clients run: a cluster node's monitor sees the
//! commands sent to that node (a write when the node sends it to the Raft log, a read when
//! it answers it), not the commands other nodes' clients replicate to it, and scripts there
//! show only their EVAL/FCALL line (their `redis.call`s run while every node applies the
//! log entry).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;

use super::{OutputLimit, Subscriber};
use crate::command::{flags, CommandSpec};

/// The bound on a monitor's unsent lines: 32 MiB, the pubsub class's default hard limit.
pub const LIMIT: OutputLimit = OutputLimit {
    hard: 32 * 1024 * 1024,
    soft: 0,
    soft_secs: 0,
};

const WHAT: &str = "MONITOR client (32 MiB of unsent lines)";

/// Who ran a command, as the monitor line names it.
#[derive(Clone, Copy, Debug)]
pub enum Source {
    /// A client connected from this address.
    Client(SocketAddr),
    /// A script's `redis.call`.
    Lua,
}

/// This node's monitors.
#[derive(Debug, Default)]
pub struct Monitors {
    /// How many there are (read on every command path; see [`Monitors::active`]).
    count: AtomicUsize,
    list: RwLock<Vec<Arc<Subscriber>>>,
    /// Monitors disconnected for their output buffer.
    dropped: AtomicU64,
}

impl Monitors {
    /// Whether any client monitors: the one check the command paths make.
    #[inline]
    pub fn active(&self) -> bool {
        self.count.load(Ordering::Relaxed) != 0
    }

    /// Send the lines of the commands run from now on to `sub` (once).
    pub fn add(&self, sub: Arc<Subscriber>) {
        let mut list = self.list.write();
        if list.iter().all(|s| s.id != sub.id) {
            list.push(sub);
            self.count.store(list.len(), Ordering::Relaxed);
        }
    }

    /// Stop monitoring for client `id` (RESET, disconnection).
    pub fn remove(&self, id: u64) {
        let mut list = self.list.write();
        list.retain(|s| s.id != id);
        self.count.store(list.len(), Ordering::Relaxed);
    }

    /// Monitors disconnected so far for their output buffer.
    pub fn disconnections(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Feed a call that has just run (`spec` with `args`, name first, in database `db`),
    /// unless Redis never shows it there.
    pub fn after(&self, spec: &CommandSpec, args: &[&[u8]], db: usize, source: Source) {
        if !spec.has(flags::SKIP_MONITOR) && !crate::acl::categories::is_admin(spec, args) {
            self.feed(spec, args, db, source);
        }
    }

    /// Feed a call that is about to run, if its row is one that Redis feeds before it runs
    /// (`SKIP_MONITOR`: the scripts).
    pub fn before(&self, spec: &CommandSpec, args: &[&[u8]], db: usize, source: Source) {
        if spec.has(flags::SKIP_MONITOR) {
            self.feed(spec, args, db, source);
        }
    }

    fn feed(&self, spec: &CommandSpec, args: &[&[u8]], db: usize, source: Source) {
        let line = line(spec, args, db, source, std::time::SystemTime::now());
        for sub in self.list.read().iter() {
            sub.deliver_bytes(line.as_bytes(), LIMIT, &self.dropped, WHAT);
        }
    }
}

/// The status line Redis sends a monitor for a call, `\r\n` included.
pub fn line(
    spec: &CommandSpec,
    args: &[&[u8]],
    db: usize,
    source: Source,
    at: std::time::SystemTime,
) -> String {
    let since = at.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let mut s = format!("+{}.{:06} ", since.as_secs(), since.subsec_micros());
    match source {
        Source::Client(addr) => s.push_str(&format!("[{db} {addr}] ")),
        Source::Lua => s.push_str(&format!("[{db} lua] ")),
    }
    let redacted = redacted(spec, args);
    for (i, arg) in args.iter().enumerate() {
        if i > 0 {
            s.push(' ');
        }
        if redacted.contains(&i) {
            repr(&mut s, b"(redacted)");
        } else {
            repr(&mut s, arg);
        }
    }
    s.push_str("\r\n");
    s
}

/// Append `bytes` quoted as Redis's `sdscatrepr` quotes them.
pub fn repr(s: &mut String, bytes: &[u8]) {
    s.push('"');
    for &b in bytes {
        match b {
            b'\\' => s.push_str("\\\\"),
            b'"' => s.push_str("\\\""),
            b'\n' => s.push_str("\\n"),
            b'\r' => s.push_str("\\r"),
            b'\t' => s.push_str("\\t"),
            0x07 => s.push_str("\\a"),
            0x08 => s.push_str("\\b"),
            0x20..=0x7e => s.push(b as char),
            _ => s.push_str(&format!("\\x{b:02x}")),
        }
    }
    s.push('"');
}

/// The positions of the arguments Redis 7.0 redacts for `spec` (`redactClientCommandArgument`):
/// AUTH's password and user (unless it has too many arguments, refused before redacting),
/// and each HELLO `AUTH user password` that follows a valid protocol version.
fn redacted(spec: &CommandSpec, args: &[&[u8]]) -> Vec<usize> {
    match spec.name {
        "auth" if args.len() <= 3 => (1..args.len()).collect(),
        "hello" if args.len() >= 2 => {
            let version = std::str::from_utf8(args[1])
                .ok()
                .and_then(|v| v.parse::<i64>().ok());
            if !matches!(version, Some(2 | 3)) {
                return Vec::new();
            }
            let mut out = Vec::new();
            let mut j = 2;
            while j < args.len() {
                let more = args.len() - 1 - j;
                if args[j].eq_ignore_ascii_case(b"auth") && more >= 2 {
                    out.extend([j + 1, j + 2]);
                    j += 3;
                } else if args[j].eq_ignore_ascii_case(b"setname") && more >= 1 {
                    j += 2;
                } else {
                    break;
                }
            }
            out
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(args: &[&str]) -> String {
        let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        let spec = crate::command::lookup(bytes[0]).expect("a command");
        let at = std::time::UNIX_EPOCH + std::time::Duration::from_micros(1_700_000_000_000_042);
        let addr: SocketAddr = "127.0.0.1:5000".parse().expect("an address");
        line(spec, &bytes, 3, Source::Client(addr), at)
    }

    #[test]
    fn lines_are_redis_format() {
        assert_eq!(
            shown(&["SET", "a b", "x\ny\"\u{1}\\\t\u{7f}"]),
            "+1700000000.000042 [3 127.0.0.1:5000] \"SET\" \"a b\" \"x\\ny\\\"\\x01\\\\\\t\\x7f\"\r\n"
        );
        let mut s = String::new();
        repr(&mut s, &[0xff, 0x07, 0x08, b'\r']);
        assert_eq!(s, "\"\\xff\\a\\b\\r\"");
    }

    #[test]
    fn secrets_are_redacted_as_redis_does() {
        assert!(shown(&["auth", "pw"]).ends_with("\"auth\" \"(redacted)\"\r\n"));
        assert!(shown(&["auth", "u", "pw"]).ends_with("\"auth\" \"(redacted)\" \"(redacted)\"\r\n"));
        // Too many arguments: refused before Redis redacts.
        assert!(shown(&["auth", "a", "b", "c"]).ends_with("\"auth\" \"a\" \"b\" \"c\"\r\n"));
        assert!(
            shown(&["hello", "3", "setname", "n", "auth", "u", "p"]).ends_with(
                "\"hello\" \"3\" \"setname\" \"n\" \"auth\" \"(redacted)\" \"(redacted)\"\r\n"
            )
        );
        assert!(shown(&["hello", "9", "auth", "u", "p"]).ends_with("\"auth\" \"u\" \"p\"\r\n"));
    }
}
