//! ACL LOG: the refused commands, keys, channels and logins, newest first, as Redis 7.0
//! keeps them (`addACLLogEntry`). An entry like one of the 10 newest (same reason,
//! context, object and user, less than 60 seconds apart) counts again and moves to the
//! front instead of adding a line; a new entry beyond `acllog-max-len` (default 128)
//! drops the oldest. The log is this node's (in a cluster, each node logs the refusals of
//! its own clients, and of scripts as it applies them).

use std::collections::VecDeque;
use std::time::Instant;

use crate::protocol::Reply;

/// How many entries are kept (Redis's `acl-log-max-len` default).
pub const MAX_LEN: usize = 128;

/// Where the refused call ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    /// Sent by the client.
    Toplevel,
    /// Queued in MULTI or run by EXEC.
    Multi,
    /// Called by a script.
    Lua,
}

impl Context {
    fn name(self) -> &'static str {
        match self {
            Context::Toplevel => "toplevel",
            Context::Multi => "multi",
            Context::Lua => "lua",
        }
    }
}

/// One entry.
#[derive(Debug, Clone)]
pub struct Entry {
    count: u64,
    reason: &'static str,
    context: Context,
    object: String,
    username: String,
    created: Instant,
    client_info: String,
}

/// How many of the newest entries a new one is compared with (Redis's `toscan`).
const SCAN: usize = 10;

/// Entries less than this far apart are counted as one (Redis's
/// `ACL_LOG_GROUPING_MAX_TIME_DELTA`).
const GROUPING_MS: u128 = 60_000;

/// The log.
#[derive(Debug)]
pub struct Log {
    entries: VecDeque<Entry>,
    max_len: usize,
}

impl Default for Log {
    fn default() -> Log {
        Log {
            entries: VecDeque::new(),
            max_len: MAX_LEN,
        }
    }
}

impl Log {
    /// Record a refusal: `reason` is `command`, `key`, `channel` or `auth`; `object` the
    /// command's full name, the key, the channel or `AUTH`.
    pub fn add(
        &mut self,
        reason: &'static str,
        context: Context,
        object: String,
        username: String,
        client_info: String,
    ) {
        let now = Instant::now();
        let found = self.entries.iter().take(SCAN).position(|e| {
            e.reason == reason
                && e.context == context
                && e.object == object
                && e.username == username
                && now.duration_since(e.created).as_millis() <= GROUPING_MS
        });
        if let Some(at) = found {
            let mut e = self.entries.remove(at).expect("found");
            e.count += 1;
            e.created = now;
            e.client_info = client_info;
            self.entries.push_front(e);
            return;
        }
        self.entries.push_front(Entry {
            count: 1,
            reason,
            context,
            object,
            username,
            created: now,
            client_info,
        });
        self.entries.truncate(self.max_len);
    }

    /// `acllog-max-len`: applies from the next new entry (as in Redis, which trims then).
    pub fn set_max_len(&mut self, max_len: usize) {
        self.max_len = max_len;
    }

    /// ACL LOG RESET.
    pub fn reset(&mut self) {
        self.entries.clear();
    }

    /// ACL LOG [count]: the newest `count` entries as maps.
    pub fn render(&self, count: usize) -> Reply {
        let now = Instant::now();
        Reply::Array(
            self.entries
                .iter()
                .take(count)
                .map(|e| {
                    // Whole milliseconds, as Redis (`(mstime() - ctime) / 1000.0`).
                    let age = now.duration_since(e.created).as_millis() as f64 / 1000.0;
                    Reply::Map(vec![
                        (Reply::bulk("count"), Reply::Integer(e.count as i64)),
                        (Reply::bulk("reason"), Reply::bulk(e.reason)),
                        (Reply::bulk("context"), Reply::bulk(e.context.name())),
                        (Reply::bulk("object"), Reply::bulk(e.object.clone())),
                        (Reply::bulk("username"), Reply::bulk(e.username.clone())),
                        (Reply::bulk("age-seconds"), Reply::Double(age)),
                        (
                            Reply::bulk("client-info"),
                            Reply::bulk(e.client_info.clone()),
                        ),
                    ])
                })
                .collect(),
        )
    }
}
