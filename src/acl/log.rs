//! ACL LOG: the refused commands, keys, channels and logins, newest first, as Redis 7.0
//! keeps them. An entry like an earlier one (same reason, context, object and user) within
//! 60 seconds counts again instead of adding a line; at most `acl-log-max-len` (128)
//! entries are kept.

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

/// The log.
#[derive(Debug, Default)]
pub struct Log {
    entries: VecDeque<Entry>,
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
        if let Some(e) = self.entries.iter_mut().find(|e| {
            e.reason == reason
                && e.context == context
                && e.object == object
                && e.username == username
                && now.duration_since(e.created).as_secs() < 60
        }) {
            e.count += 1;
            e.created = now;
            e.client_info = client_info;
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
        self.entries.truncate(MAX_LEN);
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
                    let age = now.duration_since(e.created).as_secs_f64();
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
