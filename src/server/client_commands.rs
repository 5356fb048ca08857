//! The connection commands: each runs on the connection with the client's state, through
//! the `client` handler its row in the command table names (`command/server.rs`,
//! `command/scripting.rs`). Transactions have their own file (`transaction.rs`).
//!
//! Each handler here is an `async fn(&mut Client, &[Bytes]) -> Answer`; the arity was
//! checked against the row before it runs, and a container's subcommand (CLIENT LIST) was
//! looked up and its arity checked too (`acl::categories::subcommand_refusal`, from the one
//! table of subcommands), so a handler only dispatches on the subcommand's name and checks
//! what Redis's own handler checks beyond the arity (`command::subcommand_syntax_error`).
//! Server-wide reports (INFO, CONFIG, COMMAND, MEMORY) are built in `info.rs`, the cluster
//! commands in `cluster.rs`.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;

use super::connection::{Answer, Client};
use super::{cluster, info, persistence, ClientHandle};
use crate::command::args::{db_index, int, is};
use crate::command::{self};
use crate::protocol::Reply;

/// SELECT index: the database of this connection's next commands.
pub async fn select(c: &mut Client, a: &[Bytes]) -> Answer {
    match db_index(&a[1]) {
        Ok(n) => {
            c.db = n;
            c.sync_info();
            Reply::ok().into()
        }
        Err(e) => e.into(),
    }
}

/// AUTH [username] password
pub async fn auth(c: &mut Client, a: &[Bytes]) -> Answer {
    c.auth(a).into()
}

/// HELLO [protover [AUTH username password] [SETNAME name]]
pub async fn hello(c: &mut Client, a: &[Bytes]) -> Answer {
    c.hello(a).into()
}

/// QUIT: OK, then close.
pub async fn quit(_c: &mut Client, _a: &[Bytes]) -> Answer {
    Answer::Close(Some(Reply::ok()))
}

/// RESET: back to a new connection's state.
pub async fn reset(c: &mut Client, _a: &[Bytes]) -> Answer {
    c.reset().await.into()
}

/// MONITOR: stream a line for each command the node runs (`pubsub::monitor`).
pub async fn monitor(c: &mut Client, _a: &[Bytes]) -> Answer {
    c.start_monitor().into()
}

/// CLIENT subcommand ...
pub async fn client(c: &mut Client, a: &[Bytes]) -> Answer {
    if is(&a[1], "reply") {
        return c.client_reply(a).into();
    }
    if is(&a[1], "unblock") {
        return client_unblock(c, a).into();
    }
    if is(&a[1], "kill") {
        // A client that kills itself gets the reply first, then is closed, as in Redis.
        return match c.client_kill(&a[2..]) {
            (reply, true) => Answer::Close(Some(reply)),
            (reply, false) => reply.into(),
        };
    }
    c.client(a).into()
}

/// CLIENT UNBLOCK client-id [TIMEOUT|ERROR]: release a client blocked in BLPOP & co.
/// with its timeout reply or an `-UNBLOCKED` error; 1 if it was blocked.
fn client_unblock(c: &mut Client, a: &[Bytes]) -> Reply {
    if a.len() > 4 {
        return command::subcommand_syntax_error(a);
    }
    let Ok(id) = int(&a[2]) else {
        return Reply::err("ERR value is not an integer or out of range");
    };
    let error = match a.get(3) {
        None => false,
        Some(w) if is(w, "timeout") => false,
        Some(w) if is(w, "error") => true,
        Some(_) => return Reply::err("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR"),
    };
    let reply = if error {
        Reply::err("UNBLOCKED client unblocked via CLIENT UNBLOCK")
    } else {
        Reply::Nil
    };
    let Ok(id) = u64::try_from(id) else {
        return Reply::Integer(0);
    };
    let done = c.shared.engine.pubsub().blocking.unblock_client(id, reply);
    Reply::Integer(done as i64)
}

/// INFO [section ...]
pub async fn info(c: &mut Client, a: &[Bytes]) -> Answer {
    Reply::Verbatim("txt", Bytes::from(info::render(&c.shared, &a[1..]).await)).into()
}

/// CONFIG GET|SET|RESETSTAT|REWRITE ...
pub async fn config(c: &mut Client, a: &[Bytes]) -> Answer {
    info::config(&c.shared, a).into()
}

/// COMMAND [COUNT|INFO|DOCS|LIST|GETKEYS ...]
pub async fn command(_c: &mut Client, a: &[Bytes]) -> Answer {
    info::command(a).into()
}

/// DEBUG ADVANCE-TIME|FREEZE-TIME|DIGEST|SLEEP ...
pub async fn debug(c: &mut Client, a: &[Bytes]) -> Answer {
    c.debug(a).await.into()
}

/// SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]: stop the server; the connection closes
/// without a reply.
pub async fn shutdown(c: &mut Client, a: &[Bytes]) -> Answer {
    match shutdown_options(a) {
        Err(e) => e.into(),
        Ok(Shutdown::Abort) => Reply::err("ERR No shutdown in progress.").into(),
        Ok(Shutdown::Stop(save)) => match persistence::before_shutdown(&c.shared, save).await {
            Err(e) => e.into(),
            Ok(()) => {
                c.shared.request_shutdown();
                Answer::Close(None)
            }
        },
    }
}

/// SAVE: write a snapshot and answer once it is on disk (`persistence.rs`).
pub async fn save(c: &mut Client, a: &[Bytes]) -> Answer {
    persistence::save(&c.shared, "save", a).await.into()
}

/// BGSAVE [SCHEDULE]: write a snapshot in the background.
pub async fn bgsave(c: &mut Client, a: &[Bytes]) -> Answer {
    persistence::save(&c.shared, "bgsave", a).await.into()
}

/// BGREWRITEAOF: a snapshot, then the log purged behind it and its file rewritten.
pub async fn bgrewriteaof(c: &mut Client, _a: &[Bytes]) -> Answer {
    persistence::bgrewriteaof(&c.shared).into()
}

/// MEMORY USAGE|STATS ...
pub async fn memory(c: &mut Client, a: &[Bytes]) -> Answer {
    info::memory(&c.shared, c.db, a).await.into()
}

/// LASTSAVE: the Unix time of the newest snapshot on disk (0 when there is none).
pub async fn lastsave(c: &mut Client, _a: &[Bytes]) -> Answer {
    persistence::lastsave(&c.shared).into()
}

/// CLUSTER subcommand ...
pub async fn cluster(c: &mut Client, a: &[Bytes]) -> Answer {
    cluster::cluster_command(&c.shared, a).into()
}

/// RAFT.STATUS
pub async fn raft_status(c: &mut Client, a: &[Bytes]) -> Answer {
    cluster::raft_status(&c.shared, a).into()
}

/// RAFT.ADDNODE id host:port
pub async fn raft_addnode(c: &mut Client, a: &[Bytes]) -> Answer {
    cluster::raft_addnode(&c.shared, a).await.into()
}

/// RAFT.REMOVENODE id
pub async fn raft_removenode(c: &mut Client, a: &[Bytes]) -> Answer {
    cluster::raft_removenode(&c.shared, a).await.into()
}

/// RAFT.TRANSFER id
pub async fn raft_transfer(c: &mut Client, a: &[Bytes]) -> Answer {
    cluster::raft_transfer(&c.shared, a).await.into()
}

/// RAFT.SNAPSHOT
pub async fn raft_snapshot(c: &mut Client, a: &[Bytes]) -> Answer {
    cluster::raft_snapshot(&c.shared, a).await.into()
}

/// RAFT.PARTITION id [id ...]
pub async fn raft_partition(c: &mut Client, a: &[Bytes]) -> Answer {
    cluster::raft_partition(&c.shared, a).into()
}

/// RAFT.HEAL
pub async fn raft_heal(c: &mut Client, a: &[Bytes]) -> Answer {
    cluster::raft_partition(&c.shared, a).into()
}

/// SCRIPT KILL is answered here, without waiting for the state a running script holds;
/// every other SCRIPT subcommand goes to the engine.
pub async fn script_control(c: &mut Client, a: &[Bytes]) -> Answer {
    match a {
        [_, sub] if is(sub, "kill") => kill_script(c, false),
        _ => Answer::Engine,
    }
}

/// FUNCTION KILL and FUNCTION STATS are answered here, without waiting for the state a
/// running script holds; every other FUNCTION subcommand goes to the engine.
pub async fn function_control(c: &mut Client, a: &[Bytes]) -> Answer {
    match a {
        [_, sub] if is(sub, "kill") => kill_script(c, true),
        [_, sub] if is(sub, "stats") => c.shared.engine.script_control().function_stats().into(),
        _ => Answer::Engine,
    }
}

/// SCRIPT KILL (`function` false) or FUNCTION KILL.
fn kill_script(c: &Client, function: bool) -> Answer {
    let control = c.shared.engine.script_control();
    let Some(node) = c.shared.engine.cluster() else {
        return control.request_kill(function).into();
    };
    // Killing a script on one node would leave the replicas that finished it diverged; a
    // node alone may, and then puts the killed entry behind a snapshot.
    if !node.is_only_member() {
        return Reply::err(
            "ERR SCRIPT KILL and FUNCTION KILL are not supported in cluster mode (a script runs on every replica)",
        )
        .into();
    }
    let reply = control.request_kill(function);
    if reply == Reply::ok() {
        persistence::after_script_kill(c.shared.clone(), node.clone());
    }
    reply.into()
}

impl Client {
    /// AUTH and HELLO's AUTH: log in as `user` when it is on and `pass` is one of its
    /// passwords (any, with `nopass`); a failure is logged in ACL LOG, with the command's
    /// name as the client sent it (`auth`, `HELLO`) as the object, as Redis logs it.
    /// AUTH's or HELLO's (`a`) check of `user`'s password; a refusal is logged in ACL LOG
    /// with the call's name as it was sent (Redis's `object` for it).
    fn check_password(&mut self, a: &[Bytes], user: &[u8], pass: &[u8]) -> Reply {
        let acl = self.shared.engine.acl().clone();
        let name = String::from_utf8_lossy(user).into_owned();
        let epoch = acl.epoch();
        match acl.get(&name) {
            Some(u) if u.password_ok(pass) => {
                self.authenticated = true;
                self.user.set(u);
                self.acl_epoch = epoch;
                self.handle.info.lock().user = name;
                Reply::ok()
            }
            _ => {
                let context = if self.multi.is_some() {
                    crate::acl::log::Context::Multi
                } else {
                    crate::acl::log::Context::Toplevel
                };
                let info = self.own_line(a);
                acl.log.lock().add(
                    "auth",
                    context,
                    String::from_utf8_lossy(&a[0]).into_owned(),
                    name,
                    info,
                );
                Reply::err("WRONGPASS invalid username-password pair or user is disabled.")
            }
        }
    }

    /// Back to the default user, logged in when it needs no password (a new connection's
    /// state; RESET).
    pub(super) fn set_default_user(&mut self) {
        let acl = self.shared.engine.acl();
        self.acl_epoch = acl.epoch();
        self.user.set(acl.default_user());
        self.authenticated = self.user.enabled && self.user.nopass;
        self.handle.info.lock().user = crate::acl::DEFAULT_USER.into();
    }

    fn auth(&mut self, a: &[Bytes]) -> Reply {
        if a.len() > 3 {
            return Reply::err("ERR syntax error");
        }
        if a.len() == 2 && self.shared.engine.acl().default_user().nopass {
            return Reply::err("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?");
        }
        let (user, pass) = if a.len() == 3 {
            (&a[1][..], &a[2][..])
        } else {
            (&b"default"[..], &a[1][..])
        };
        self.check_password(a, user, pass)
    }

    fn hello(&mut self, a: &[Bytes]) -> Reply {
        let mut proto = self.resp;
        let mut i = 1;
        if let Some(v) = a.get(1) {
            match int(v) {
                Ok(2) => proto = 2,
                Ok(3) => proto = 3,
                Ok(_) => return Reply::err("NOPROTO unsupported protocol version"),
                Err(_) => {
                    return Reply::err("ERR Protocol version is not an integer or out of range")
                }
            }
            i = 2;
        }
        let mut name = None;
        while i < a.len() {
            if is(&a[i], "auth") && i + 2 < a.len() {
                let r = self.check_password(a, &a[i + 1], &a[i + 2]);
                if r.is_error() {
                    return r;
                }
                i += 3;
            } else if is(&a[i], "setname") && i + 1 < a.len() {
                name = Some(a[i + 1].clone());
                i += 2;
            } else {
                return Reply::err(format!(
                    "ERR Syntax error in HELLO option '{}'",
                    command::arg_text(&a[i])
                ));
            }
        }
        if !self.authenticated {
            return Reply::err("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time");
        }
        if let Some(n) = name {
            if let Err(e) = self.set_name(&n) {
                return e;
            }
        }
        self.resp = proto;
        self.sync_info();
        let id = self.id();
        Reply::Map(vec![
            (Reply::bulk("server"), Reply::bulk("redis")),
            (Reply::bulk("version"), Reply::bulk(info::REDIS_VERSION)),
            (Reply::bulk("proto"), Reply::Integer(proto as i64)),
            (Reply::bulk("id"), Reply::Integer(id as i64)),
            (
                Reply::bulk("mode"),
                Reply::bulk(self.shared.engine.mode_name()),
            ),
            (Reply::bulk("role"), Reply::bulk("master")),
            (Reply::bulk("modules"), Reply::Array(vec![])),
        ])
    }

    fn set_name(&mut self, name: &[u8]) -> Result<(), Reply> {
        if name.iter().any(|&c| c <= b' ' || c > b'~') {
            return Err(Reply::err(
                "ERR Client names cannot contain spaces, newlines or special characters.",
            ));
        }
        self.handle.info.lock().name = String::from_utf8_lossy(name).into_owned();
        Ok(())
    }

    async fn reset(&mut self) -> Reply {
        self.stop_monitor();
        let id = self.id();
        self.subs.clear(self.shared.engine.pubsub(), id);
        self.sync_subs();
        self.multi = None;
        self.multi_dirty = false;
        self.unwatch().await;
        self.db = 0;
        self.resp = 2;
        self.handle.info.lock().name.clear();
        self.set_default_user();
        self.sync_info();
        Reply::Status("RESET".into())
    }

    /// CLIENT ID|SETNAME|GETNAME|LIST|INFO|NO-EVICT|HELP (the subcommand and its arity
    /// checked against the command table before this runs).
    fn client(&mut self, a: &[Bytes]) -> Reply {
        let sub = String::from_utf8_lossy(&a[1]).to_ascii_lowercase();
        match sub.as_str() {
            "id" => Reply::Integer(self.id() as i64),
            "setname" => match self.set_name(&a[2]) {
                Ok(()) => Reply::ok(),
                Err(e) => e,
            },
            "getname" => {
                let name = self.handle.info.lock().name.clone();
                if name.is_empty() {
                    Reply::Nil
                } else {
                    Reply::bulk(name)
                }
            }
            "list" => {
                let clients = match self.listed_clients(&a[2..]) {
                    Ok(clients) => clients,
                    Err(e) => return e,
                };
                let text: String = clients
                    .iter()
                    .map(|c| {
                        if Arc::ptr_eq(c, &self.handle) {
                            self.own_line(a)
                        } else {
                            info::client_line(&c.info.lock())
                        }
                    })
                    .map(|line| line + "\n")
                    .collect();
                Reply::Verbatim("txt", Bytes::from(text))
            }
            "info" => Reply::Verbatim("txt", Bytes::from(self.own_line(a) + "\n")),
            // No client eviction here (`maxmemory-clients` only accepts 0), so every
            // client is already never evicted.
            "no-evict" if is(&a[2], "on") || is(&a[2], "off") => Reply::ok(),
            "no-evict" => Reply::err("ERR syntax error"),
            "help" => command::help_reply("CLIENT", CLIENT_HELP),
            _ => command::unknown_subcommand(&a[0], &a[1]),
        }
    }

    /// CLIENT REPLY ON|OFF|SKIP: whether this connection's replies are sent (pub/sub
    /// messages always are).
    fn client_reply(&mut self, a: &[Bytes]) -> Reply {
        if is(&a[2], "on") {
            self.reply_off = false;
            self.skip_next = false;
            Reply::ok()
        } else if is(&a[2], "off") {
            self.reply_off = true;
            Reply::ok()
        } else if is(&a[2], "skip") {
            if !self.reply_off {
                self.skip_next = true;
            }
            // SKIP's own reply is not sent either.
            self.skipping = true;
            Reply::ok()
        } else {
            Reply::err("ERR syntax error")
        }
    }

    /// CLIENT LIST's clients: all, or `TYPE type`, or `ID id [id ...]` (in the order
    /// given, each once per mention, unknown ids left out), as Redis 7.0.
    fn listed_clients(&self, a: &[Bytes]) -> Result<Vec<Arc<ClientHandle>>, Reply> {
        let clients = self.shared.clients.lock();
        match a {
            [] => Ok(clients.values().cloned().collect()),
            [t, ty] if is(t, "type") => {
                let ty = client_type(ty)?;
                Ok(clients
                    .values()
                    .filter(|c| ty.matches(&c.info.lock()))
                    .cloned()
                    .collect())
            }
            [t, ids @ ..] if is(t, "id") && !ids.is_empty() => {
                let mut listed = Vec::new();
                for id in ids {
                    let Ok(id) = int(id) else {
                        return Err(Reply::err("ERR Invalid client ID"));
                    };
                    listed.extend(
                        clients
                            .values()
                            .find(|c| c.info.lock().id as i64 == id)
                            .cloned(),
                    );
                }
                Ok(listed)
            }
            _ => Err(Reply::err("ERR syntax error")),
        }
    }

    /// CLIENT KILL ip:port (the old form: OK or `No such client`), or CLIENT KILL with
    /// filters `ID`, `ADDR`, `LADDR`, `TYPE`, `USER`, `SKIPME` (all must match; `SKIPME
    /// yes` is the default, so the caller is spared unless `SKIPME no`): the number
    /// killed. Every filter is checked before any client is killed. True when the caller
    /// is among them: it is closed after the reply.
    fn client_kill(&mut self, a: &[Bytes]) -> (Reply, bool) {
        let mut killed_self = false;
        let mut kill = |h: &Arc<ClientHandle>| {
            if Arc::ptr_eq(h, &self.handle) {
                killed_self = true;
            } else {
                h.killed.store(true, Ordering::Relaxed);
                h.kill.notify_one();
            }
        };
        let clients: Vec<_> = self.shared.clients.lock().values().cloned().collect();
        if a.len() == 1 {
            let addr = String::from_utf8_lossy(&a[0]);
            return match clients
                .iter()
                .find(|c| c.info.lock().addr.to_string() == addr)
            {
                Some(c) => {
                    kill(c);
                    (Reply::ok(), killed_self)
                }
                None => (Reply::err("ERR No such client"), false),
            };
        }
        if !a.len().is_multiple_of(2) {
            return (Reply::err("ERR syntax error"), false);
        }
        let (mut id, mut addr, mut laddr, mut ty, mut user) = (None, None, None, None, None);
        let mut skipme = true;
        for pair in a.chunks(2) {
            let v = String::from_utf8_lossy(&pair[1]).into_owned();
            if is(&pair[0], "id") {
                match v.parse::<u64>() {
                    Ok(n) if n > 0 && n <= i64::MAX as u64 => id = Some(n),
                    _ => return (Reply::err("ERR client-id should be greater than 0"), false),
                }
            } else if is(&pair[0], "addr") {
                addr = Some(v);
            } else if is(&pair[0], "laddr") {
                laddr = Some(v);
            } else if is(&pair[0], "type") {
                match client_type(&pair[1]) {
                    Ok(t) => ty = Some(t),
                    Err(e) => return (e, false),
                }
            } else if is(&pair[0], "user") {
                if self.shared.engine.acl().get(&v).is_none() {
                    return (Reply::err(format!("ERR No such user '{v}'")), false);
                }
                user = Some(v);
            } else if is(&pair[0], "skipme") {
                if v.eq_ignore_ascii_case("yes") {
                    skipme = true;
                } else if v.eq_ignore_ascii_case("no") {
                    skipme = false;
                } else {
                    return (Reply::err("ERR syntax error"), false);
                }
            } else {
                return (Reply::err("ERR syntax error"), false);
            }
        }
        let me = self.id();
        let mut killed = 0;
        for c in &clients {
            let info = c.info.lock().clone();
            let all = id.is_none_or(|id| info.id == id)
                && addr.as_ref().is_none_or(|a| info.addr.to_string() == *a)
                && laddr.as_ref().is_none_or(|a| info.laddr.to_string() == *a)
                && ty.is_none_or(|t| t.matches(&info))
                && user.as_ref().is_none_or(|u| info.user == *u)
                && !(skipme && info.id == me);
            if all {
                kill(c);
                killed += 1;
            }
        }
        (Reply::Integer(killed), killed_self)
    }

    async fn debug(&mut self, a: &[Bytes]) -> Reply {
        if !self.shared.config.read().enable_debug_command {
            return Reply::err("ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.");
        }
        if is(&a[1], "advance-time") && a.len() == 3 {
            return match int(&a[2]) {
                Ok(ms) if ms >= 0 => {
                    self.shared.engine.advance_time(ms as u64);
                    Reply::ok()
                }
                Ok(_) => Reply::err("ERR time can only move forward"),
                Err(e) => e,
            };
        }
        if is(&a[1], "freeze-time") && a.len() == 3 {
            let on = match a[2].to_ascii_lowercase().as_slice() {
                b"yes" => true,
                b"no" => false,
                _ => return Reply::err("ERR DEBUG FREEZE-TIME takes yes or no"),
            };
            return match self.shared.engine.freeze_time(on) {
                Ok(()) => Reply::ok(),
                Err(e) => Reply::err(e),
            };
        }
        if is(&a[1], "digest") && a.len() == 2 {
            if let Some(node) = self.shared.engine.cluster() {
                // Digests of nodes are comparable once each has applied every acknowledged write.
                if let Err(e) = node.read_barrier().await {
                    return crate::engine::cluster_error_reply(&e);
                }
            }
            let now = self.shared.engine.now_ms();
            let state = self.shared.engine.lock().await;
            let d = crate::store::snapshot::digest(&state.ks, now);
            return Reply::Status(format!("{d:016x}"));
        }
        if is(&a[1], "panic-on-apply") && a.len() == 2 {
            // Replicated like a write: every node panics applying it (engine::poison).
            let ops = vec![crate::engine::poison::panic_trigger_op()];
            let result = self.run_batch(ops, None, false).await;
            return result
                .replies
                .and_then(|r| r.into_iter().next())
                .unwrap_or(Reply::Nil);
        }
        if is(&a[1], "sleep") && a.len() == 3 {
            let secs = crate::command::args::parse_f64(&a[2])
                .unwrap_or(0.0)
                .clamp(0.0, 60.0);
            let _state = self.shared.engine.lock().await;
            std::thread::sleep(std::time::Duration::from_secs_f64(secs));
            return Reply::ok();
        }
        Reply::err(format!(
            "ERR unknown subcommand '{}'. Try DEBUG HELP.",
            command::arg_text(&a[1])
        ))
    }
}

/// What SHUTDOWN was asked to do.
#[derive(PartialEq)]
enum Shutdown {
    /// Stop: after a snapshot with SAVE (`Some(true)`), without one with NOSAVE
    /// (`Some(false)`), by default (`None`) as the `save` points say.
    Stop(Option<bool>),
    /// ABORT: cancel a shutdown in progress.
    Abort,
}

/// SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT], with Redis 7.0's syntax errors.
fn shutdown_options(a: &[Bytes]) -> Result<Shutdown, Reply> {
    let (mut save, mut nosave, mut abort, mut other) = (false, false, false, false);
    for arg in &a[1..] {
        if is(arg, "save") {
            save = true;
        } else if is(arg, "nosave") {
            nosave = true;
        } else if is(arg, "abort") {
            abort = true;
        } else if is(arg, "now") || is(arg, "force") {
            other = true;
        } else {
            return Err(Reply::err("ERR syntax error"));
        }
    }
    if (save && nosave) || (abort && (save || nosave || other)) {
        return Err(Reply::err("ERR syntax error"));
    }
    Ok(if abort {
        Shutdown::Abort
    } else if save || nosave {
        Shutdown::Stop(Some(save))
    } else {
        Shutdown::Stop(None)
    })
}

/// SLOWLOG GET [count] | LEN | RESET | HELP, over `crate::metrics::slowlog`.
pub async fn slowlog(c: &mut Client, a: &[Bytes]) -> Answer {
    let log = &c.shared.engine.metrics().slowlog;
    let sub = &a[1];
    let reply = if is(sub, "get") && a.len() > 3 {
        command::subcommand_syntax_error(a)
    } else if is(sub, "get") {
        let count = match a.get(2).map(|n| int(n)) {
            None => Some(10),
            Some(Ok(-1)) => None,
            Some(Ok(n)) if n >= 0 => Some(n as usize),
            _ => return Reply::err("ERR count should be greater than or equal to -1").into(),
        };
        Reply::Array(
            log.get(count)
                .into_iter()
                .map(|e| {
                    Reply::Array(vec![
                        Reply::Integer(e.id as i64),
                        Reply::Integer(e.time as i64),
                        Reply::Integer(e.duration_us as i64),
                        Reply::Array(e.args.into_iter().map(Reply::Bulk).collect()),
                        Reply::bulk(e.addr),
                        Reply::bulk(e.name),
                    ])
                })
                .collect(),
        )
    } else if is(sub, "len") {
        Reply::Integer(log.len() as i64)
    } else if is(sub, "reset") {
        log.reset();
        Reply::ok()
    } else if is(sub, "help") {
        command::help_reply(
            "SLOWLOG",
            &[
                "GET [<count>]",
                "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
                "    Entries are made of:",
                "    id, timestamp, time in microseconds, arguments array, client IP and port,",
                "    client name",
                "LEN",
                "    Return the length of the slowlog.",
                "RESET",
                "    Reset the slowlog.",
            ],
        )
    } else {
        command::unknown_subcommand(&a[0], sub)
    };
    reply.into()
}

/// LATENCY LATEST | HISTORY | RESET | HISTOGRAM | DOCTOR | GRAPH | HELP, over
/// `crate::metrics::latency` and the per-command histograms.
pub async fn latency(c: &mut Client, a: &[Bytes]) -> Answer {
    use crate::metrics::latency::{self, LatencyMonitor};
    let metrics = c.shared.engine.metrics();
    let monitor = &metrics.latency;
    let sub = &a[1];
    let now = super::unix_secs();
    let reply = if is(sub, "latest") {
        Reply::Array(
            monitor
                .events()
                .into_iter()
                .map(|(event, s)| {
                    let last = s.latest();
                    Reply::Array(vec![
                        Reply::bulk(event),
                        Reply::Integer(last.time as i64),
                        Reply::Integer(last.latency as i64),
                        Reply::Integer(s.max as i64),
                    ])
                })
                .collect(),
        )
    } else if is(sub, "history") {
        Reply::Array(monitor.event(&a[2]).map_or_else(Vec::new, |(_, s)| {
            s.samples()
                .into_iter()
                .map(|x| {
                    Reply::Array(vec![
                        Reply::Integer(x.time as i64),
                        Reply::Integer(x.latency as i64),
                    ])
                })
                .collect()
        }))
    } else if is(sub, "graph") {
        match monitor.event(&a[2]) {
            Some((event, s)) => {
                Reply::Verbatim("txt", Bytes::from(LatencyMonitor::graph(event, &s, now)))
            }
            None => Reply::err(format!(
                "ERR No samples available for event '{}'",
                String::from_utf8_lossy(&a[2])
            )),
        }
    } else if is(sub, "doctor") {
        let ctx = latency::DoctorContext {
            threshold_ms: monitor.threshold_ms(),
            slowlog_us: c.shared.config.read().slowlog_log_slower_than,
        };
        let report = latency::doctor(&monitor.events(), &ctx, now);
        Reply::Verbatim("txt", Bytes::from(report))
    } else if is(sub, "reset") {
        let resets = if a.len() == 2 {
            monitor.reset(None)
        } else {
            a[2..].iter().map(|e| monitor.reset(Some(e))).sum()
        };
        Reply::Integer(resets as i64)
    } else if is(sub, "histogram") {
        latency_histogram(metrics, &a[2..])
    } else if is(sub, "help") {
        command::help_reply("LATENCY", &[
                "DOCTOR",
                "    Return a human readable latency analysis report.",
                "GRAPH <event>",
                "    Return an ASCII latency graph for the <event> class.",
                "HISTORY <event>",
                "    Return time-latency samples for the <event> class.",
                "LATEST",
                "    Return the latest latency samples for all events.",
                "RESET [<event> ...]",
                "    Reset latency data of one or more <event> classes.",
                "    (default: reset all data for all event classes)",
                "HISTOGRAM [COMMAND ...]",
                "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
                "    If no commands are specified then all histograms are replied.",
        ])
    } else {
        command::unknown_subcommand(&a[0], sub)
    };
    reply.into()
}

/// LATENCY HISTOGRAM [command ...]: for each command called since the last CONFIG
/// RESETSTAT (the named ones, repeats and all, or every one), a map of `calls` and
/// `histogram_usec`: the cumulative count at each power of two from 1024 ns, labelled in
/// microseconds as Redis's HDR histogram labels them (1, 2, 4, 8, 16, 33, 66, ...), the
/// levels where the count does not grow left out.
fn latency_histogram(metrics: &crate::metrics::Metrics, names: &[Bytes]) -> Reply {
    let called: Vec<_> = metrics.commands().filter(|(_, s)| s.calls() > 0).collect();
    let chosen: Vec<_> = if names.is_empty() {
        called
    } else {
        // A name is a command or `container|subcommand`; a container also stands for its
        // subcommands, as in Redis. Unknown names are skipped.
        names
            .iter()
            .flat_map(|n| {
                let name = String::from_utf8_lossy(n).to_ascii_lowercase();
                called
                    .iter()
                    .filter(move |(c, _)| {
                        *c == name
                            || c.strip_prefix(name.as_str())
                                .is_some_and(|r| r.starts_with('|'))
                    })
                    .copied()
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    let entries = chosen
        .into_iter()
        .filter_map(|(name, stats)| {
            let hist = stats.time()?;
            let (levels, total) = hist.cumulative(10, 41);
            let mut buckets = Vec::new();
            let mut previous = 0;
            for (edge, below) in levels {
                if below > previous {
                    // Redis's level value is the highest value its HDR histogram (two
                    // significant digits) counts with `edge`: edge + edge/128 - 1.
                    let usec = (edge + edge / 128 - 1) / 1000;
                    buckets.push((Reply::Integer(usec as i64), Reply::Integer(below as i64)));
                    previous = below;
                }
                if below >= total {
                    break;
                }
            }
            Some((
                Reply::bulk(name),
                Reply::Map(vec![
                    (Reply::bulk("calls"), Reply::Integer(total as i64)),
                    (Reply::bulk("histogram_usec"), Reply::Map(buckets)),
                ]),
            ))
        })
        .collect();
    Reply::Map(entries)
}

/// Redis 7.0's client types (`getClientTypeByName`): MASTER and REPLICA name no client
/// here (Tollgate has no Redis replication links); a MONITOR client is NORMAL, a
/// subscribed one PUBSUB.
#[derive(Clone, Copy, PartialEq)]
enum ClientType {
    Normal,
    PubSub,
    Replication,
}

impl ClientType {
    fn matches(self, c: &super::ClientInfo) -> bool {
        let pubsub = c.subs.0 + c.subs.1 + c.subs.2 > 0;
        match self {
            ClientType::Normal => !pubsub,
            ClientType::PubSub => pubsub,
            ClientType::Replication => false,
        }
    }
}

fn client_type(name: &[u8]) -> Result<ClientType, Reply> {
    match name.to_ascii_lowercase().as_slice() {
        b"normal" => Ok(ClientType::Normal),
        b"pubsub" => Ok(ClientType::PubSub),
        b"master" | b"slave" | b"replica" => Ok(ClientType::Replication),
        _ => Err(Reply::err(format!(
            "ERR Unknown client type '{}'",
            String::from_utf8_lossy(name)
        ))),
    }
}

/// Redis 7.0.15's CLIENT HELP lines for the subcommands Tollgate has (CACHING, GETREDIR,
/// PAUSE, UNPAUSE, TRACKING and TRACKINGINFO are not here: they answer unknown
/// subcommand).
const CLIENT_HELP: &[&str] = &[
    "GETNAME",
    "    Return the name of the current connection.",
    "ID",
    "    Return the ID of the current connection.",
    "INFO",
    "    Return information about the current client connection.",
    "KILL <ip:port>",
    "    Kill connection made from <ip:port>.",
    "KILL <option> <value> [<option> <value> [...]]",
    "    Kill connections. Options are:",
    "    * ADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made from the specified address",
    "    * LADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made to specified local address",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Kill connections by type.",
    "    * USER <username>",
    "      Kill connections authenticated by <username>.",
    "    * SKIPME (YES|NO)",
    "      Skip killing current connection (default: yes).",
    "LIST [options ...]",
    "    Return information about client connections. Options:",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Return clients of specified type.",
    "REPLY (ON|OFF|SKIP)",
    "    Control the replies sent to the current connection.",
    "SETNAME <name>",
    "    Assign the name <name> to the current connection.",
    "UNBLOCK <clientid> [TIMEOUT|ERROR]",
    "    Unblock the specified blocked client.",
    "NO-EVICT (ON|OFF)",
    "    Protect current client connection from eviction.",
];
