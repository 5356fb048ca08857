//! Small Redis 7.0 behaviours compared reply by reply with redis-server 7.0.15 (issue 19):
//! CONFIG queued inside MULTI, `redis.acl_check_cmd` in Lua, and INFO commandstats'
//! `rejected_calls` (calls refused before they ran) beside `failed_calls`.

mod common;
mod redis_support;

use common::{reply, ServerProcess, TestServer};
use redis::Value;
use redis_support::RedisServer;

/// A reply, or Redis's error text.
type Reply = Result<Value, String>;

/// The replies of `steps` on a fresh connection of each server: redis-server's, then ours.
fn both(steps: &[&[&str]]) -> (Vec<Reply>, Vec<Reply>) {
    let reference = RedisServer::start();
    let s = TestServer::start();
    let mut theirs = Vec::new();
    let mut ours = Vec::new();
    let mut rcon = reference.conn();
    let mut con = s.conn();
    for step in steps {
        theirs.push(reply(&mut rcon, step));
        ours.push(reply(&mut con, step));
    }
    (theirs, ours)
}

#[test]
fn config_queued_in_multi_runs_at_exec() {
    let steps: &[&[&str]] = &[
        &["CONFIG", "SET", "maxmemory-policy", "noeviction"],
        &["MULTI"],
        &["INCR", "x"],
        &["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"],
        &["CONFIG", "GET", "maxmemory-policy"],
        &["CONFIG", "SET", "no-such-parameter", "1"],
        &["CONFIG", "GET", "no-such-*"],
        &["INCR", "x"],
        &["EXEC"],
        &["CONFIG", "GET", "maxmemory-policy"],
        &["GET", "x"],
        // A CONFIG refused at queue time (its arity) dooms the transaction, as any.
        &["MULTI"],
        &["CONFIG"],
        &["EXEC"],
        // A CONFIG SET that fails is an error in EXEC's array (unit/multi's "MULTI with
        // config error").
        &["MULTI"],
        &["SET", "foo", "bar"],
        &["CONFIG", "SET", "maxmemory", "bla"],
        &["EXEC"],
        // DISCARD drops a queued CONFIG SET.
        &["MULTI"],
        &["CONFIG", "SET", "maxmemory-policy", "volatile-lru"],
        &["DISCARD"],
        &["CONFIG", "GET", "maxmemory-policy"],
    ];
    let (theirs, ours) = both(steps);
    for (i, step) in steps.iter().enumerate() {
        assert_eq!(
            theirs[i], ours[i],
            "{step:?}: redis-server's reply, then ours"
        );
    }
    // Not vacuous: EXEC ran the CONFIG calls (the client library reports the failed
    // CONFIG SET of EXEC's array as the error) and both INCRs.
    let text = |v: &Reply| format!("{v:?}");
    assert!(
        text(&ours[8]).contains("no-such-parameter"),
        "{:?}",
        ours[8]
    );
    assert!(text(&ours[9]).contains("allkeys-lru"), "{:?}", ours[9]);
    assert_eq!(ours[10], Ok(Value::BulkString(b"2".to_vec())));
}

#[test]
fn acl_check_cmd_answers_for_the_script_caller() {
    let script = |body: &'static str, keys: &'static [&'static str]| -> Vec<&'static str> {
        let mut v = vec!["EVAL", body];
        v.push(match keys.len() {
            0 => "0",
            _ => "1",
        });
        v.extend_from_slice(keys);
        v
    };
    let steps: Vec<Vec<&str>> = vec![
        // The default user may do anything.
        script("return redis.acl_check_cmd('hset','xx','f',1)", &[]),
        vec![
            "ACL",
            "SETUSER",
            "bob",
            "on",
            ">123",
            "+@scripting",
            "+set",
            "~x*",
        ],
        vec!["AUTH", "bob", "123"],
        script("return redis.acl_check_cmd('set','xx',1)", &["xx"]),
        // A command the user may not run.
        script("return redis.acl_check_cmd('hset','xx','f',1)", &["xx"]),
        // A key the user may not touch (not passed as a key, so the script itself runs).
        script("return redis.acl_check_cmd('set','yy',1)", &[]),
        // A subcommand: CONFIG is not among bob's commands.
        script("return redis.acl_check_cmd('config','get','x')", &[]),
        // Unknown commands and subcommands are errors.
        script("return redis.acl_check_cmd('invalid-cmd','arg')", &[]),
        script("return redis.acl_check_cmd('config','nosuchsub')", &[]),
        script("return redis.acl_check_cmd()", &[]),
        // The check is not a refusal: nothing is logged.
        vec!["AUTH", "default", "x"],
        vec!["ACL", "LOG"],
    ];
    let steps: Vec<&[&str]> = steps.iter().map(|s| &s[..]).collect();
    let (theirs, ours) = both(&steps);
    for (i, step) in steps.iter().enumerate() {
        assert_eq!(
            theirs[i], ours[i],
            "{step:?}: redis-server's reply, then ours"
        );
    }
    assert_eq!(ours[3], Ok(Value::Int(1)));
    assert_eq!(ours[4], Ok(Value::Nil));
    assert_eq!(ours[5], Ok(Value::Nil));
}

/// `cmdstat_<name>`'s calls, rejected_calls and failed_calls (not the times).
fn counts(con: &mut redis::Connection, names: &[&str]) -> Vec<String> {
    let text: String = redis::cmd("INFO").arg("commandstats").query(con).unwrap();
    names
        .iter()
        .map(|name| {
            let prefix = format!("cmdstat_{name}:");
            let line = text
                .lines()
                .find_map(|l| l.strip_prefix(&prefix))
                .unwrap_or("");
            let fields: Vec<&str> = line.split(',').filter(|f| !f.starts_with("usec")).collect();
            format!("{name}: {}", fields.join(","))
        })
        .collect()
}

#[test]
fn rejected_calls_count_refusals_before_running() {
    let steps: &[&[&str]] = &[
        &["CONFIG", "RESETSTAT"],
        // Wrong arity: rejected, not called.
        &["GET"],
        // A syntax error is a failed call.
        &["SET", "a", "b", "c", "d"],
        &["ACL", "SETUSER", "u", "on", "nopass", "+@all", "-get", "~*"],
        &["AUTH", "u", "x"],
        // NOPERM: rejected.
        &["GET", "a"],
        // Not allowed inside MULTI: rejected (and the transaction is doomed).
        &["MULTI"],
        &["WATCH", "a"],
        &["EXEC"],
        &["AUTH", "default", "x"],
        &["SET", "filler", &"x".repeat(1000)],
        // Over maxmemory: rejected, at the top level and inside a script (where the
        // script itself fails); a script writing from EVAL_RO: the SET is rejected.
        &["CONFIG", "SET", "maxmemory", "1"],
        &["SET", "a", "b"],
        &["EVAL", "return redis.call('set','x','y')", "1", "x"],
        &[
            "EVAL",
            "local t = redis.pcall('set','x','y') return t['err']",
            "1",
            "x",
        ],
        &["CONFIG", "SET", "maxmemory", "0"],
        &["EVAL_RO", "return redis.call('set','x','y')", "1", "x"],
        // A script's call of the wrong arity.
        &["EVAL", "return redis.pcall('get')", "0"],
    ];
    let reference = RedisServer::start();
    let s = ServerProcess::start();
    let mut rcon = reference.conn();
    let mut con = s.conn();
    for step in steps {
        let theirs = reply(&mut rcon, step);
        let ours = reply(&mut con, step);
        assert_eq!(theirs, ours, "{step:?}: redis-server's reply, then ours");
    }
    let names = ["get", "set", "watch", "exec", "eval", "eval_ro", "auth"];
    let theirs = counts(&mut rcon, &names);
    let ours = counts(&mut con, &names);
    assert_eq!(theirs, ours, "redis-server's counts, then ours");
    // Each refusal is also counted by its code in errorstats.
    assert_eq!(errorstats(&mut rcon), errorstats(&mut con));
    // Not vacuous.
    assert!(ours[0].contains("rejected_calls=3"), "{ours:?}");
}

/// INFO errorstats' `errorstat_<CODE>:count=N` lines.
fn errorstats(con: &mut redis::Connection) -> Vec<String> {
    let text: String = redis::cmd("INFO").arg("errorstats").query(con).unwrap();
    text.lines()
        .filter(|l| l.starts_with("errorstat_"))
        .map(str::to_string)
        .collect()
}

/// Redis 7.0 counts an error a script's `redis.call`/`redis.pcall` meets where it arises
/// (the failing command's `failed_calls`, a refused call's `rejected_calls`, errorstats),
/// whether the script catches it or not, and does not count it again when the script
/// returns or raises that error (only the script's own `failed_calls`).
#[test]
fn script_errors_count_once_where_they_arise() {
    let setup: &[&[&str]] = &[
        &["SET", "str", "abc"],
        &[
            "ACL", "SETUSER", "u", "on", "nopass", "+@all", "-incr", "~*",
        ],
    ];
    // (script, run as user `u`)
    let cases: &[(&str, bool)] = &[
        ("return redis.pcall('incr','str')", false),
        ("return redis.call('incr','str')", false),
        ("pcall(redis.call,'incr','str')", false),
        ("pcall(redis.call,'nosuchcmd')", false),
        ("return redis.pcall('nosuchcmd')", false),
        ("return redis.pcall('get')", false),
        ("pcall(redis.call,'get')", false),
        ("return redis.pcall('eval','return 1',0)", false),
        ("pcall(redis.call,'eval','return 1',0)", false),
        // A new error table is the script's own error: counted again.
        (
            "local t = redis.pcall('incr','str') return {err=t.err}",
            false,
        ),
        ("return redis.error_reply('MYERR x')", false),
        ("error('boom')", false),
        ("return redis.pcall('incr','str')", true),
        ("pcall(redis.call,'incr','str')", true),
        ("return redis.call('incr','str')", true),
    ];
    let reference = RedisServer::start();
    let s = ServerProcess::start();
    let mut rcon = reference.conn();
    let mut con = s.conn();
    for step in setup {
        assert_eq!(reply(&mut rcon, step), reply(&mut con, step), "{step:?}");
    }
    let names = ["eval", "incr", "get"];
    let mut counted = 0;
    for &(script, as_u) in cases {
        let mut theirs = Vec::new();
        let mut ours = Vec::new();
        for (con, out) in [(&mut rcon, &mut theirs), (&mut con, &mut ours)] {
            reply(con, &["AUTH", "default", "x"]).unwrap();
            reply(con, &["CONFIG", "RESETSTAT"]).unwrap();
            if as_u {
                reply(con, &["AUTH", "u", "x"]).unwrap();
            }
            out.push(format!("{:?}", reply(con, &["EVAL", script, "0"])));
            reply(con, &["AUTH", "default", "x"]).unwrap();
            out.extend(errorstats(con));
            out.extend(counts(con, &names));
        }
        assert_eq!(
            theirs, ours,
            "{script} (as u: {as_u}): redis-server, then ours"
        );
        counted += ours.iter().filter(|l| l.starts_with("errorstat_")).count();
    }
    // Not vacuous: every case counted an error.
    assert_eq!(counted, cases.len(), "errorstats lines");
}

/// With `min-replicas-to-write` set and no replica, Redis refuses a write as it is queued
/// in MULTI (NOREPLICAS, and EXEC answers EXECABORT), queues reads and scripts, and refuses
/// EXEC when the setting changed after the write was queued.
#[test]
fn noreplicas_refuses_a_queued_write() {
    let steps: &[&[&str]] = &[
        &["CONFIG", "RESETSTAT"],
        &["CONFIG", "SET", "min-replicas-to-write", "1"],
        &["MULTI"],
        &["SET", "a", "1"],
        &["GET", "a"],
        &["EXEC"],
        &["MULTI"],
        &["GET", "a"],
        &["EVAL", "return 1", "0"],
        &["EXEC"],
        // A script's write is refused when it runs, inside EXEC's array.
        &["MULTI"],
        &["EVAL", "return redis.call('set','a',1)", "0"],
        &["EXEC"],
        &["SET", "a", "1"],
        &["CONFIG", "SET", "min-replicas-to-write", "0"],
        &["GET", "a"],
    ];
    let reference = RedisServer::start();
    let s = ServerProcess::start();
    let mut rcon = reference.conn();
    let mut con = s.conn();
    // Connected before the counts are reset: the client library's CLIENT SETINFO on
    // connecting is an unknown subcommand to redis-server 7.0 (an ERR in errorstats).
    let mut rother = reference.conn();
    let mut other = s.conn();
    let mut ours = Vec::new();
    for step in steps {
        let theirs = reply(&mut rcon, step);
        ours.push(reply(&mut con, step));
        assert_eq!(
            &theirs,
            ours.last().unwrap(),
            "{step:?}: redis-server, then ours"
        );
    }
    assert!(
        format!("{:?}", ours[3]).contains("NOREPLICAS"),
        "{:?}",
        ours[3]
    );
    assert!(
        format!("{:?}", ours[5]).contains("EXECABORT"),
        "{:?}",
        ours[5]
    );
    // The setting changes between the queued write and EXEC (from another client).
    for (con, other) in [(&mut rcon, &mut rother), (&mut con, &mut other)] {
        assert_eq!(reply(con, &["SET", "a", "1"]), Ok(Value::Okay));
        assert_eq!(reply(con, &["MULTI"]), Ok(Value::Okay));
        assert_eq!(
            reply(con, &["SET", "a", "2"]),
            Ok(Value::SimpleString("QUEUED".into()))
        );
        reply(other, &["CONFIG", "SET", "min-replicas-to-write", "1"]).unwrap();
        assert_eq!(
            reply(con, &["EXEC"]),
            Err(
                "EXECABORT Transaction discarded because of: NOREPLICAS Not enough good replicas to write."
                    .into()
            )
        );
        reply(other, &["CONFIG", "SET", "min-replicas-to-write", "0"]).unwrap();
        assert_eq!(
            reply(con, &["GET", "a"]),
            Ok(Value::BulkString(b"1".to_vec()))
        );
    }
    let names = ["set", "get", "exec", "eval"];
    assert_eq!(counts(&mut rcon, &names), counts(&mut con, &names));
    assert_eq!(errorstats(&mut rcon), errorstats(&mut con));
}

/// Redis looks a container's subcommand up and checks its arity before the call is queued
/// in MULTI: an unknown subcommand or a wrong number of arguments is refused at once and
/// dooms the transaction (EXECABORT); a CONFIG SET of an unknown parameter or a bad value
/// is queued and fails inside EXEC's array, the rest of the transaction running.
#[test]
fn config_refusals_in_multi_at_queue_or_exec() {
    let queued: &[&[&str]] = &[
        &["CONFIG", "SET", "nosuch", "1"],
        &["CONFIG", "SET", "maxmemory", "abc"],
        &["CONFIG", "SET", "maxmemory", "1", "maxmemory", "2"],
        &["CONFIG", "GET"],
        &["CONFIG", "SET"],
        &["CONFIG", "SET", "maxmemory"],
        &["CONFIG", "nosuch"],
        &["CONFIG", "RESETSTAT", "x"],
        &["CONFIG", "REWRITE", "x"],
        &["CONFIG", "HELP", "x"],
        &["CONFIG"],
        &["OBJECT", "ENCODING"],
        &["OBJECT", "NOSUCH", "x"],
        &["FUNCTION", "NOSUCH"],
        &["CLIENT", "NOSUCH"],
        &["CLIENT", "SETNAME"],
    ];
    let reference = RedisServer::start();
    let s = ServerProcess::start();
    let mut rcon = reference.conn();
    let mut con = s.conn();
    let mut aborted = 0;
    for call in queued {
        let steps: [&[&str]; 6] = [
            &["DEL", "a"],
            &["MULTI"],
            call,
            &["SET", "a", "1"],
            &["EXEC"],
            &["GET", "a"],
        ];
        let mut ours = Vec::new();
        for step in steps {
            let theirs = reply(&mut rcon, step);
            ours.push(reply(&mut con, step));
            assert_eq!(
                &theirs,
                ours.last().unwrap(),
                "{call:?} in MULTI, at {step:?}: redis-server, then ours"
            );
        }
        if ours[5] == Ok(Value::Nil) {
            aborted += 1;
        }
    }
    // Not vacuous: both kinds were seen.
    assert_eq!(aborted, queued.len() - 3, "transactions discarded");
    // Outside MULTI the same refusals; a subcommand's arity is its `rejected_calls`.
    for con in [&mut rcon, &mut con] {
        reply(con, &["CONFIG", "RESETSTAT"]).unwrap();
    }
    for step in [
        &["CONFIG", "GET"][..],
        &["CONFIG", "nosuch"],
        &["CONFIG", "SET", "nosuch", "1"],
        &["OBJECT", "ENCODING"],
    ] {
        assert_eq!(reply(&mut rcon, step), reply(&mut con, step), "{step:?}");
    }
    let names = [
        "config|get",
        "config|set",
        "config",
        "object|encoding",
        "exec",
    ];
    assert_eq!(counts(&mut rcon, &names), counts(&mut con, &names));
    assert_eq!(errorstats(&mut rcon), errorstats(&mut con));
}

/// SWAPDB, FLUSHDB and FLUSHALL abort a WATCHing client's EXEC exactly when Redis's
/// `touchAllWatchedKeysInDb` does: the watched key exists (not expired) in a flushed
/// database or in either swapped one, whatever its value.
#[test]
fn watch_with_swapdb_and_flush() {
    // (what the other client runs, the watcher's database, the watched key)
    let cases: &[(&[&str], &str, &str)] = &[
        (&["SWAPDB", "0", "1"], "0", "x"),
        (&["SWAPDB", "0", "1"], "1", "y"),
        (&["SWAPDB", "0", "1"], "0", "nokey"),
        (&["SWAPDB", "0", "1"], "1", "x"),
        (&["SWAPDB", "0", "1"], "0", "same"),
        (&["SWAPDB", "0", "2"], "0", "x"),
        (&["SWAPDB", "1", "2"], "0", "x"),
        (&["SWAPDB", "0", "0"], "0", "x"),
        (&["SWAPDB", "2", "3"], "2", "nokey"),
        (&["FLUSHDB"], "0", "x"),
        (&["FLUSHDB"], "0", "nokey"),
        (&["FLUSHDB"], "1", "y"),
        (&["FLUSHALL"], "0", "x"),
        (&["FLUSHALL"], "0", "nokey"),
        (&["FLUSHALL"], "1", "y"),
        (&["FLUSHALL"], "2", "nokey"),
    ];
    let reference = RedisServer::start();
    let s = ServerProcess::start();
    let (mut rcon, mut rother) = (reference.conn(), reference.conn());
    let (mut con, mut other) = (s.conn(), s.conn());
    let mut aborted = 0;
    for &(command, db, key) in cases {
        let mut results = Vec::new();
        for (c, o) in [(&mut rcon, &mut rother), (&mut con, &mut other)] {
            for step in [
                &["SELECT", "0"][..],
                &["FLUSHALL"],
                &["SET", "x", "1"],
                &["SET", "same", "v"],
                &["SELECT", "1"],
                &["SET", "y", "2"],
                &["SET", "same", "v"],
                &["SELECT", "0"],
            ] {
                reply(o, step).unwrap();
            }
            reply(c, &["SELECT", db]).unwrap();
            reply(c, &["WATCH", key]).unwrap();
            reply(o, command).unwrap();
            reply(c, &["MULTI"]).unwrap();
            reply(c, &["PING"]).unwrap();
            results.push(reply(c, &["EXEC"]));
        }
        assert_eq!(
            results[0], results[1],
            "WATCH {key} in db {db}, then {command:?}: redis-server, then ours"
        );
        if results[1] == Ok(Value::Nil) {
            aborted += 1;
        }
    }
    // Not vacuous: both outcomes occur.
    assert!(aborted > 0 && aborted < cases.len(), "{aborted} aborted");
}
