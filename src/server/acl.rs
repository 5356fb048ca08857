//! The ACL command (SETUSER, GETUSER, DELUSER, LIST, USERS, WHOAMI, CAT, GENPASS, LOG,
//! DRYRUN, SAVE, LOAD, HELP) over the server's user store (`crate::acl`), with
//! redis-server 7.0.15's replies and error texts.
//!
//! A change to the users (SETUSER, DELUSER, LOAD) goes through [`change`]: standalone it
//! applies to the store at once; in a cluster it is a replicated write (`Op::Acl`), so
//! every node applies the same change in log order. Where a change is applied (on every
//! node) [`close_clients`] closes the connections Redis closes: a deleted user's, a
//! subscriber's whose user lost a channel or pattern it is subscribed to, and after ACL
//! LOAD every client of a user other than `default`.

use bytes::Bytes;

use super::connection::{Answer, Client};
use crate::acl::categories::{category_bit, commands, CATEGORIES};
use crate::acl::{self, Change, Denied, User};
use crate::command::{self, args::is};
use crate::engine::Op;
use crate::protocol::Reply;

/// ACL subcommand ... The subcommand is one Redis has, called with its arity: the
/// connection checked both against the command table before this runs
/// (`acl::categories::subcommand_refusal`).
pub async fn acl(c: &mut Client, a: &[Bytes]) -> Answer {
    let name = String::from_utf8_lossy(&a[1]).to_ascii_lowercase();
    let store = c.shared.engine.acl().clone();
    let reply = match name.as_str() {
        "help" => help(),
        "users" => Reply::Array(
            store
                .users()
                .iter()
                .map(|u| Reply::bulk(u.name.clone()))
                .collect(),
        ),
        "list" => Reply::Array(
            store
                .users()
                .iter()
                .map(|u| Reply::bulk(format!("user {} {}", u.name, u.describe())))
                .collect(),
        ),
        "whoami" => Reply::bulk(c.user.name.clone()),
        "getuser" => match store.get(&text(&a[2])) {
            Some(u) => getuser(&u),
            None => Reply::Nil,
        },
        "cat" => cat(a),
        "genpass" => genpass(a),
        "log" => log(&store, a),
        "dryrun" => dryrun(&store, a),
        "setuser" => {
            let rules: Vec<String> = a[3..].iter().map(|r| text(r)).collect();
            let pubsub_all = c.shared.config.read().acl_pubsub_all;
            let set = Change::SetUserWith {
                name: text(&a[2]),
                rules,
                pubsub_all,
            };
            change(c, set).await
        }
        "deluser" => {
            let names = a[2..].iter().map(|r| text(r)).collect();
            change(c, Change::DelUsers(names)).await
        }
        "save" => super::acl_file::save(&c.shared).await,
        "load" => super::acl_file::load(c).await,
        _ => command::unknown_subcommand(&a[0], &a[1]),
    };
    if c.handle.take_kill() || !c.refresh_user() {
        // This connection was closed by its own change (its user deleted, its subscriptions
        // no longer allowed, ACL LOAD): the reply, then the connection closes, as Redis's
        // CLIENT_CLOSE_AFTER_COMMAND.
        return Answer::Close(Some(reply));
    }
    reply.into()
}

/// An argument as text (user names and rules are text in Redis's ACL).
fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Apply a change to the users through the engine (in a cluster, through the log, so
/// every node applies it; the store's observer, [`close_clients`], closes connections).
pub async fn change(c: &Client, change: Change) -> Reply {
    let result = c.run_batch(vec![Op::Acl(change)], None, false).await;
    result
        .replies
        .and_then(|r| r.into_iter().next())
        .unwrap_or(Reply::Nil)
}

/// Install [`close_clients`] as the user store's observer: it then runs wherever a change
/// is applied, for a client's ACL command as for an entry from the Raft log.
pub fn observe(shared: &std::sync::Arc<super::Shared>) {
    let weak = std::sync::Arc::downgrade(shared);
    shared
        .engine
        .acl()
        .set_observer(Box::new(move |store, event| {
            if let Some(shared) = weak.upgrade() {
                close_clients(&shared, store, event);
            }
        }));
}

/// Close the connections a change to the users ends, as redis-server 7.0.15 does: the
/// clients of deleted users; subscribers (`ACLKillPubsubClientsIfNeeded`) whose user may
/// no longer use one of their channels, shard channels or patterns (a pattern must be
/// one of the user's patterns, as in Redis); after ACL LOAD, every client of a user other
/// than `default`. Disabling a user (`off`) closes nothing (Redis 7.0 keeps those
/// connections). A closed client that is running the command that made the change gets
/// its reply first (`ClientHandle::take_kill`).
pub fn close_clients(shared: &super::Shared, store: &acl::Acl, event: acl::Event<'_>) {
    use acl::Event;
    let hub = shared.engine.pubsub();
    for (id, h) in shared.clients.lock().iter() {
        let (user, subs) = {
            let info = h.info.lock();
            (info.user.clone(), info.subs)
        };
        let subscribed = subs != (0, 0, 0);
        let subs_refused = || match store.get(&user) {
            None => true,
            Some(u) => subscribed && !subscriptions_allowed(&u, hub, *id),
        };
        let close = match event {
            Event::Changed(name) => user == name && subs_refused(),
            Event::Deleted(names) => names.contains(&user),
            Event::Loaded => user != acl::DEFAULT_USER,
            Event::Installed => subs_refused(),
        };
        if close {
            h.killed.store(true, std::sync::atomic::Ordering::Relaxed);
            h.kill.notify_one();
        }
    }
}

/// Whether `user` may keep every subscription client `id` has on this node.
pub fn subscriptions_allowed(user: &User, hub: &crate::pubsub::Hub, id: u64) -> bool {
    if user.allchannels || user.selectors.iter().any(|s| s.allchannels) {
        return true;
    }
    let (channels, patterns) = hub.subscriptions_of(id);
    channels.iter().all(|c| user.subscription_allowed(c, false))
        && patterns.iter().all(|p| user.subscription_allowed(p, true))
}

fn getuser(u: &User) -> Reply {
    let strings = |v: Vec<String>| Reply::Array(v.into_iter().map(Reply::bulk).collect());
    Reply::Map(vec![
        (
            Reply::bulk("flags"),
            strings(u.flags().iter().map(|f| f.to_string()).collect()),
        ),
        (
            Reply::bulk("passwords"),
            strings(
                u.passwords
                    .iter()
                    .map(|p| p.iter().map(|b| format!("{b:02x}")).collect())
                    .collect(),
            ),
        ),
        (Reply::bulk("commands"), Reply::bulk(u.describe_commands())),
        (Reply::bulk("keys"), Reply::bulk(u.describe_keys())),
        (Reply::bulk("channels"), Reply::bulk(u.getuser_channels())),
        (
            Reply::bulk("selectors"),
            Reply::Array(
                u.selectors
                    .iter()
                    .map(|s| {
                        Reply::Map(vec![
                            (Reply::bulk("commands"), Reply::bulk(s.describe_commands())),
                            (Reply::bulk("keys"), Reply::bulk(s.describe_keys())),
                            (Reply::bulk("channels"), Reply::bulk(s.getuser_channels())),
                        ])
                    })
                    .collect(),
            ),
        ),
    ])
}

/// ACL CAT [category].
fn cat(a: &[Bytes]) -> Reply {
    if a.len() > 3 {
        return command::subcommand_syntax_error(a);
    }
    let Some(name) = a.get(2) else {
        return Reply::Array(CATEGORIES.iter().map(|c| Reply::bulk(*c)).collect());
    };
    let name = text(name);
    let Some(bit) = category_bit(&name) else {
        return Reply::err(format!("ERR Unknown category '{name}'"));
    };
    Reply::Array(
        commands()
            .list
            .iter()
            .filter(|c| c.exists && c.mask & bit != 0)
            .map(|c| Reply::bulk(c.name.clone()))
            .collect(),
    )
}

/// ACL GENPASS [bits]: random bytes from the operating system, in hex (a connection
/// command: nothing here is replicated, so randomness is fine).
fn genpass(a: &[Bytes]) -> Reply {
    if a.len() > 3 {
        return command::subcommand_syntax_error(a);
    }
    let bits = match a.get(2) {
        None => 256,
        Some(b) => match command::args::int(b) {
            Ok(n) if (1..=4096).contains(&n) => n as usize,
            Ok(_) => return Reply::err("ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096"),
            Err(_) => return Reply::err("ERR value is not an integer or out of range"),
        },
    };
    let chars = bits.div_ceil(4);
    let mut bytes = vec![0u8; chars.div_ceil(2)];
    if getrandom(&mut bytes).is_err() {
        return Reply::err("ERR could not read random bytes from the operating system");
    }
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    Reply::bulk(hex[..chars].to_string())
}

fn getrandom(buf: &mut [u8]) -> std::io::Result<()> {
    use std::io::Read;
    std::fs::File::open("/dev/urandom")?.read_exact(buf)
}

/// ACL LOG [count | RESET].
fn log(store: &acl::Acl, a: &[Bytes]) -> Reply {
    if a.len() > 3 {
        return command::subcommand_syntax_error(a);
    }
    match a.get(2) {
        None => store.log.lock().render(10),
        Some(w) if is(w, "reset") => {
            store.log.lock().reset();
            Reply::ok()
        }
        Some(n) => match command::args::int(n) {
            Ok(n) if n >= 0 => store.log.lock().render(n as usize),
            Ok(_) => Reply::Array(vec![]),
            Err(_) => Reply::err("ERR value is not an integer or out of range"),
        },
    }
}

fn dryrun(store: &acl::Acl, a: &[Bytes]) -> Reply {
    let name = text(&a[2]);
    let Some(user) = store.get(&name) else {
        return Reply::err(format!("ERR User '{name}' not found"));
    };
    let Some(spec) = command::lookup(&a[3]) else {
        return Reply::err(format!(
            "ERR Command '{}' not found",
            command::arg_text(&a[3])
        ));
    };
    let args = &a[3..];
    if !command::arity_ok(spec, args.len()) {
        return command::arity_error(spec.name);
    }
    let checked = command::with_slices(args, |s| {
        user.check(spec, s)
            .map_err(|d| (d, crate::acl::categories::call_name(spec, s)))
    });
    match checked {
        Ok(()) => Reply::ok(),
        Err((Denied::Command, name)) => Reply::bulk(format!(
            "This user has no permissions to run the '{name}' command"
        )),
        Err((Denied::Key(at), _)) => Reply::bulk(format!(
            "This user has no permissions to access the '{}' key",
            command::arg_text(&args[at])
        )),
        Err((Denied::Channel(at), _)) => Reply::bulk(format!(
            "This user has no permissions to access the '{}' channel",
            command::arg_text(&args[at])
        )),
    }
}

fn help() -> Reply {
    let lines = [
        "CAT [<category>]",
        "    List all commands that belong to <category>, or all command categories",
        "    when no category is specified.",
        "DELUSER <username> [<username> ...]",
        "    Delete a list of users.",
        "DRYRUN <username> <command> [<arg> ...]",
        "    Returns whether the user can execute the given command without executing the command.",
        "GETUSER <username>",
        "    Get the user's details.",
        "GENPASS [<bits>]",
        "    Generate a secure 256-bit user password. The optional `bits` argument can",
        "    be used to specify a different size.",
        "LIST",
        "    Show users details in config file format.",
        "LOAD",
        "    Reload users from the ACL file.",
        "LOG [<count> | RESET]",
        "    Show the ACL log entries.",
        "SAVE",
        "    Save the current config to the ACL file.",
        "SETUSER <username> <attribute> [<attribute> ...]",
        "    Create or modify a user with the specified attributes.",
        "USERS",
        "    List all the registered usernames.",
        "WHOAMI",
        "    Return the current connection username.",
    ];
    command::help_reply("ACL", &lines)
}
