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

/// Send `step` to redis-server (`rcon`) and to Tollgate (`con`): the replies must be equal
/// (`context` says where, in the message). Returns ours.
fn same(
    rcon: &mut redis::Connection,
    con: &mut redis::Connection,
    step: &[&str],
    context: &str,
) -> Reply {
    let theirs = reply(rcon, step);
    let ours = reply(con, step);
    assert_eq!(
        theirs, ours,
        "{context}{step:?}: redis-server's reply, then ours"
    );
    ours
}

/// [`same`] where the reply itself is not needed.
fn check(rcon: &mut redis::Connection, con: &mut redis::Connection, step: &[&str]) {
    let _ours = same(rcon, con, step, "");
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
        check(&mut rcon, &mut con, step);
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

/// `keyspace_hits` and `keyspace_misses` of INFO stats.
fn keyspace_reads(con: &mut redis::Connection) -> Vec<String> {
    let text: String = redis::cmd("INFO").arg("stats").query(con).unwrap();
    text.lines()
        .filter(|l| l.starts_with("keyspace_"))
        .map(str::to_string)
        .collect()
}

/// INFO errorstats' `errorstat_<CODE>:count=N` lines.
fn errorstats(con: &mut redis::Connection) -> Vec<String> {
    let text: String = redis::cmd("INFO").arg("errorstats").query(con).unwrap();
    text.lines()
        .filter(|l| l.starts_with("errorstat_"))
        .map(str::to_string)
        .collect()
}

/// TOUCH counts each existing key and, as Redis's `lookupKeyRead`, a use of it (OBJECT
/// IDLETIME restarts, OBJECT FREQ grows) and a keyspace hit or miss; EXISTS, TYPE, the TTL
/// family and OBJECT count the hit or miss but leave the key's idle time alone
/// (`LOOKUP_NOTOUCH`).
#[test]
fn touch_counts_a_use_and_exists_does_not() {
    let reference = RedisServer::start();
    let s = TestServer::start();
    let mut rcon = reference.conn();
    let mut con = s.conn();
    let setup: &[&[&str]] = &[
        &["SET", "a", "1"],
        &["SET", "b", "2"],
        &["SET", "c", "3"],
        &["RPUSH", "l", "x"],
    ];
    for step in setup {
        check(&mut rcon, &mut con, step);
    }
    // Both idle for at least two whole seconds (the servers' clocks count seconds).
    std::thread::sleep(std::time::Duration::from_millis(2200));
    // One transaction: its calls see one time, so a use just made reads exactly 0.
    let steps: &[&[&str]] = &[
        &["CONFIG", "RESETSTAT"],
        &["MULTI"],
        &["EXISTS", "a", "a", "missing"],
        &["TYPE", "b"],
        &["TTL", "c"],
        &["PEXPIRETIME", "l"],
        &["OBJECT", "IDLETIME", "a"],
        &["TOUCH", "a", "l", "missing", "a"],
        &["OBJECT", "IDLETIME", "a"],
        &["OBJECT", "IDLETIME", "b"],
        &["OBJECT", "IDLETIME", "c"],
        &["OBJECT", "IDLETIME", "l"],
        &["EXEC"],
    ];
    let mut theirs = Vec::new();
    let mut ours = Vec::new();
    for step in steps {
        theirs.push(reply(&mut rcon, step));
        ours.push(reply(&mut con, step));
    }
    // An idle time of two seconds or more reads "idle"; a fresh use reads 0.
    let shape = |r: &Reply| -> Vec<String> {
        let Ok(Value::Array(items)) = r else {
            panic!("EXEC: {r:?}")
        };
        items
            .iter()
            .enumerate()
            .map(|(i, v)| match (steps[i + 2][0], v) {
                ("OBJECT", Value::Int(n)) if *n >= 2 => "idle".to_string(),
                (_, v) => format!("{v:?}"),
            })
            .collect()
    };
    let (theirs_exec, ours_exec) = (shape(&theirs[12]), shape(&ours[12]));
    assert_eq!(theirs_exec, ours_exec, "EXEC: redis-server's, then ours");
    assert_eq!(
        ours_exec,
        [
            "int(2)",
            "simple-string(\"string\")",
            "int(-1)",
            "int(-1)",
            "idle",
            "int(3)",
            "int(0)",
            "idle",
            "idle",
            "int(0)"
        ],
        "not vacuous"
    );
    // Every lookup above is a read: TOUCH adds three hits and a miss.
    assert_eq!(keyspace_reads(&mut rcon), keyspace_reads(&mut con));
    assert_eq!(
        keyspace_reads(&mut con),
        ["keyspace_hits:13", "keyspace_misses:2"]
    );
    // Under an LFU policy a first use raises a new key's counter from 5 to 6 (certainly:
    // Redis increments a counter at or below its initial value every time).
    let lfu: &[&[&str]] = &[
        &["CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"],
        &["SET", "f", "v"],
        &["EXISTS", "f"],
        &["OBJECT", "FREQ", "f"],
        &["TOUCH", "f"],
        &["OBJECT", "FREQ", "f"],
        // Arity and a key of another type (TOUCH does not care about the type).
        &["TOUCH"],
        &["TOUCH", "l"],
    ];
    for step in lfu {
        check(&mut rcon, &mut con, step);
    }
    assert_eq!(reply(&mut con, &["OBJECT", "FREQ", "f"]), Ok(Value::Int(6)));
}

/// ACL LOG's entries as text, field by field: count, reason, context, object, username,
/// and the client-info fields that do not depend on the process (Redis's ids, addresses
/// and buffer sizes do). Checks on the way that `age-seconds` is whole milliseconds, as
/// Redis computes it.
fn acl_log(con: &mut redis::Connection) -> Vec<String> {
    let entries: Vec<Vec<Value>> = redis::cmd("ACL").arg("LOG").arg(100).query(con).unwrap();
    let text = |v: &Value| match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::Int(n) => n.to_string(),
        v => format!("{v:?}"),
    };
    let kept = [
        "name", "flags", "db", "sub", "psub", "ssub", "multi", "argv-mem", "cmd", "user", "resp",
    ];
    entries
        .iter()
        .map(|e| {
            let mut row = Vec::new();
            for pair in e.chunks(2) {
                let (field, value) = (text(&pair[0]), text(&pair[1]));
                match field.as_str() {
                    "age-seconds" => {
                        let ms = value.parse::<f64>().unwrap() * 1000.0;
                        assert!((ms - ms.round()).abs() < 1e-6, "age-seconds {value}");
                    }
                    "client-info" => row.extend(
                        value
                            .split(' ')
                            .filter(|f| kept.contains(&f.split('=').next().unwrap_or("")))
                            .map(str::to_string),
                    ),
                    _ => row.push(format!("{field}={value}")),
                }
            }
            row.join(" ")
        })
        .collect()
}

/// ACL LOG entries compared with redis-server 7.0.15 field by field for each kind of
/// refusal: a command, a subcommand (`client|kill`), a key, a channel, a key in a script
/// (context `lua`), a command queued in MULTI (context `multi`), a command refused again
/// at EXEC after the rules changed, and failed logins by AUTH and HELLO. The client-info
/// is the client as it runs the refused call: `cmd` that call (EXEC for the recheck), not
/// the one before it.
#[test]
fn acl_log_entries_match_redis_field_by_field() {
    let reference = RedisServer::start();
    let s = TestServer::start();
    let rules: &[&str] = &[
        "ACL",
        "SETUSER",
        "u",
        "on",
        ">p",
        "+@all",
        "-flushall",
        "-client|kill",
        "~k*",
        "&ch*",
    ];
    let steps: &[&[&str]] = &[
        &["AUTH", "u", "p"],
        &["CLIENT", "SETNAME", "me"],
        &["GET", "k1"],
        &["FLUSHALL"],
        &["CLIENT", "KILL", "ID", "999"],
        &["GET", "other"],
        &["PUBLISH", "other", "hi"],
        &["SET", "k1", "v"],
        &["EVAL", "return redis.call('get','zzz')", "0"],
        &["MULTI"],
        &["GET", "k2"],
        &["SET", "nokey", "v"],
        &["DISCARD"],
        &["SELECT", "3"],
        &["MULTI"],
        &["GET", "k2"],
        &["EVAL", "return redis.call('get','zz2')", "0"],
        // The admin takes GET away here, before EXEC.
        &["EXEC"],
        &["AUTH", "u", "wrong"],
        &["HELLO", "2", "AUTH", "u", "wrong"],
        &["auth", "nobody", "x"],
    ];
    let mut logs = Vec::new();
    for (mut admin, mut con) in [(reference.conn(), reference.conn()), (s.conn(), s.conn())] {
        reply(&mut admin, rules).unwrap();
        let mut replies = Vec::new();
        for step in steps {
            if step[0] == "EXEC" {
                reply(&mut admin, &["ACL", "SETUSER", "u", "-get"]).unwrap();
            }
            replies.push(reply(&mut con, step));
        }
        logs.push((replies, acl_log(&mut admin)));
    }
    let (theirs, ours) = (&logs[0], &logs[1]);
    for (i, step) in steps.iter().enumerate() {
        assert_eq!(
            theirs.0[i], ours.0[i],
            "{step:?}: redis-server's, then ours"
        );
    }
    assert_eq!(theirs.1, ours.1, "ACL LOG: redis-server's, then ours");
    // Not vacuous: one entry per refusal, each naming the call it refused.
    assert_eq!(ours.1.len(), 11, "{:#?}", ours.1);
    assert!(ours.1[0].contains("object=auth") && ours.1[0].contains("cmd=auth"));
    assert!(ours.1[1].contains("object=HELLO") && ours.1[1].contains("cmd=hello"));
    for at in [3, 4] {
        let e = &ours.1[at];
        assert!(
            e.contains("flags=x") && e.contains("multi=2 argv-mem=4 cmd=exec"),
            "{e}"
        );
    }
    assert!(ours.1[6].contains("context=lua") && ours.1[6].contains("cmd=eval"));
}

/// Run a server that must refuse to start; its output (stdout and stderr). Bounded: a
/// server still running after 20 s is killed and the test fails.
fn refused_start(cmd: &mut std::process::Command) -> String {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let file = std::fs::File::create(&out).unwrap();
    let mut child = cmd
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{cmd:?} started");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(!status.success(), "{cmd:?}: {status}");
    std::fs::read_to_string(out).unwrap()
}

/// An aclfile has no comments in Redis 7.0: a line starting with `#` is refused (it does
/// not start with `user`), so ACL LOAD changes nothing and answers redis-server 7.0.15's
/// text, and a server started with such a file does not start.
#[test]
fn aclfile_comment_lines_are_refused_like_redis() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("users.acl");
    std::fs::write(&path, "user default on nopass ~* &* +@all\n").unwrap();
    let at = path.to_str().unwrap().to_string();
    let reference = RedisServer::with_args(&["--aclfile", &at]);
    let p = path.clone();
    let s = TestServer::with(move |c| c.aclfile = Some(p));
    let commented =
        "# users\n  # the admin\n\nuser default on nopass ~* &* +@all\nuser ops on >pw ~* +@all\n";
    std::fs::write(&path, commented).unwrap();
    let mut replies = Vec::new();
    for mut con in [reference.conn(), s.conn()] {
        replies.push((
            reply(&mut con, &["ACL", "LOAD"]),
            reply(&mut con, &["ACL", "USERS"]),
        ));
    }
    assert_eq!(replies[0], replies[1], "redis-server's, then ours");
    assert_eq!(
        replies[1].0,
        Err(format!("ERR {at}:1 should start with user keyword followed by the username. {at}:2 should start with user keyword followed by the username. WARNING: ACL errors detected, no change to the previously active ACL rules was performed"))
    );
    // The same lines without the comments load.
    std::fs::write(&path, commented.replace("# users\n  # the admin\n", "")).unwrap();
    let mut con = s.conn();
    assert_eq!(reply(&mut con, &["ACL", "LOAD"]), Ok(Value::Okay));
    // At start, both refuse the file with the same reason (on a port free now; neither
    // gets as far as listening).
    std::fs::write(&path, commented).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let theirs = refused_start(
        std::process::Command::new("redis-server")
            .args(["--port", &port, "--save", "", "--aclfile", &at])
            .arg("--dir")
            .arg(dir.path()),
    );
    let ours = refused_start(
        std::process::Command::new(env!("CARGO_BIN_EXE_tollgate")).args([
            "--port",
            &port,
            "--aclfile",
            &at,
        ]),
    );
    let reason = format!("Aborting Redis startup because of ACL errors: {at}:1 should start with user keyword followed by the username. {at}:2 should start");
    assert!(theirs.contains(&reason), "{theirs}");
    assert!(ours.contains(&reason), "{ours}");
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
        // Errors nested in an array reply: each new one counted in errorstats (the call
        // failed once for them), each of a `redis.pcall` makes the call failed once more.
        ("return {1, redis.error_reply('MYERR x')}", false),
        (
            "return {redis.error_reply('MYERR x'), {2, redis.error_reply('OTHER y')}}",
            false,
        ),
        ("return {1, {err='NOSPACE'}}", false),
        (
            "return {redis.pcall('incr','str'), redis.pcall('incr','str')}",
            false,
        ),
        (
            "return {redis.pcall('incr','str'), redis.error_reply('MYERR x')}",
            false,
        ),
        ("return redis.pcall('incr','str')", true),
        ("pcall(redis.call,'incr','str')", true),
        ("return redis.call('incr','str')", true),
    ];
    let reference = RedisServer::start();
    let s = ServerProcess::start();
    let mut rcon = reference.conn();
    let mut con = s.conn();
    for step in setup {
        check(&mut rcon, &mut con, step);
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
        counted += usize::from(ours.iter().any(|l| l.starts_with("errorstat_")));
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
        ours.push(same(&mut rcon, &mut con, step, ""));
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
            ours.push(same(
                &mut rcon,
                &mut con,
                step,
                &format!("{call:?} in MULTI, at "),
            ));
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
        check(&mut rcon, &mut con, step);
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

/// Connection commands queued in MULTI (CLIENT, ACL, COMMAND, MEMORY, PUBSUB, SLOWLOG,
/// LATENCY, CLUSTER, CONFIG, OBJECT, INFO, UNWATCH, AUTH) run at EXEC, as Redis runs them.
#[test]
fn connection_commands_queued_in_multi_run_at_exec() {
    let steps: &[&[&str]] = &[
        &["SET", "k", "v"],
        &["MULTI"],
        // (Connection commands run after the keyspace ones: INFO sees `n`. README.)
        &["INCR", "n"],
        &["CLIENT", "SETNAME", "conn1"],
        &["CLIENT", "GETNAME"],
        &["ACL", "WHOAMI"],
        &["COMMAND", "GETKEYS", "SET", "a", "b"],
        &["MEMORY", "USAGE", "nokey"],
        &["PUBSUB", "NUMPAT"],
        &["PUBSUB", "CHANNELS"],
        &["SLOWLOG", "RESET"],
        &["LATENCY", "RESET"],
        &["CONFIG", "GET", "maxmemory"],
        &["OBJECT", "ENCODING", "k"],
        &["INFO", "keyspace"],
        &["UNWATCH"],
        &["EXEC"],
        &["CLIENT", "GETNAME"],
        // One that fails in EXEC's array: the client library reports it as the error.
        &["MULTI"],
        &["CLUSTER", "INFO"],
        &["EXEC"],
        // AUTH runs at EXEC: a wrong password is an error there, a right one switches
        // the user for the commands after the transaction.
        &["ACL", "SETUSER", "u", "on", ">p", "+@all", "~*"],
        &["MULTI"],
        &["AUTH", "u", "p"],
        &["ACL", "WHOAMI"],
        &["EXEC"],
        &["ACL", "WHOAMI"],
        &["MULTI"],
        &["AUTH", "u", "wrong"],
        &["EXEC"],
        &["ACL", "WHOAMI"],
    ];
    let (theirs, ours) = both(steps);
    for (i, step) in steps.iter().enumerate() {
        assert_eq!(
            theirs[i], ours[i],
            "{step:?}: redis-server's reply, then ours"
        );
    }
    // Not vacuous: the first EXEC ran every command, the name stuck, AUTH switched users.
    match &ours[16] {
        Ok(Value::Array(items)) => assert_eq!(items.len(), 14, "{items:?}"),
        other => panic!("EXEC: {other:?}"),
    }
    assert_eq!(ours[17], Ok(Value::BulkString(b"conn1".to_vec())));
    assert_eq!(ours[26], Ok(Value::BulkString(b"u".to_vec())));
    assert!(
        format!("{:?}", ours[29]).contains("WRONGPASS"),
        "{:?}",
        ours[29]
    );
}

/// HELLO queued in MULTI runs at EXEC and answers its map (the connection's id differs
/// between the servers); CLIENT INFO inside the transaction shows it still in MULTI.
#[test]
fn hello_and_client_info_queued_in_multi() {
    let reference = RedisServer::start();
    let s = TestServer::start();
    for port in [reference.port, s.addr.port()] {
        let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
            .unwrap()
            .get_connection()
            .unwrap();
        redis::cmd("MULTI").query::<()>(&mut c).unwrap();
        redis::cmd("HELLO").arg(2).query::<()>(&mut c).unwrap();
        redis::cmd("CLIENT")
            .arg("INFO")
            .query::<()>(&mut c)
            .unwrap();
        let r: Vec<Value> = redis::cmd("EXEC").query(&mut c).unwrap();
        let hello = format!("{:?}", r[0]);
        assert!(
            hello.contains("7.0.15") && hello.contains("proto"),
            "{hello}"
        );
        let info = match &r[1] {
            Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
            other => panic!("{other:?}"),
        };
        assert!(
            info.contains(" flags=x ") && info.contains(" multi=2 "),
            "{info}"
        );
    }
}

/// CLIENT LIST and CLIENT INFO show redis-server 7.0.15's fields, in its order (no 7.2
/// `lib-name`/`lib-ver`), and CLIENT SETINFO, a 7.2 subcommand, is refused as 7.0.15
/// refuses it.
#[test]
fn client_fields_and_setinfo_are_redis_7_0s() {
    let reference = RedisServer::start();
    let s = TestServer::start();
    let mut rcon = reference.conn();
    let mut con = s.conn();
    let names = |con: &mut redis::Connection, sub: &str| -> Vec<String> {
        let line: String = redis::cmd("CLIENT").arg(sub).query(con).unwrap();
        let first = line.lines().next().unwrap_or("").to_string();
        first
            .split(' ')
            .map(|kv| kv.split('=').next().unwrap_or("").to_string())
            .collect()
    };
    for sub in ["INFO", "LIST"] {
        let theirs = names(&mut rcon, sub);
        assert_eq!(theirs, names(&mut con, sub), "CLIENT {sub}: field names");
        assert!(theirs.len() > 20 && theirs.contains(&"resp".to_string()));
    }
    check(&mut rcon, &mut con, &["CLIENT", "SETINFO", "lib-name", "x"]);
    check(&mut rcon, &mut con, &["CLIENT", "SETINFO", "lib-ver", "1"]);
    assert!(reply(&mut con, &["CLIENT", "SETINFO", "lib-name", "x"])
        .unwrap_err()
        .contains("unknown subcommand"));
}

/// COMMAND HELP and MEMORY HELP answer redis-server 7.0.15's lines, less those of the
/// subcommands Tollgate does not answer (COMMAND GETKEYSANDFLAGS; MEMORY DOCTOR,
/// MALLOC-STATS, PURGE), which answer "unknown subcommand".
#[test]
fn command_and_memory_help_are_redis_lines() {
    let reference = RedisServer::start();
    let s = TestServer::start();
    let mut rcon = reference.conn();
    let mut con = s.conn();
    let lines = |con: &mut redis::Connection, cmd: &str| -> Vec<String> {
        let v: Vec<String> = redis::cmd(cmd).arg("HELP").query(con).unwrap();
        v
    };
    for (cmd, missing) in [
        ("COMMAND", &["GETKEYSANDFLAGS"][..]),
        ("MEMORY", &["DOCTOR", "MALLOC-STATS", "PURGE"][..]),
    ] {
        // Redis's entries (a line, then its indented description), less the missing.
        let mut theirs = Vec::new();
        let mut skipping = false;
        for line in lines(&mut rcon, cmd) {
            if !line.starts_with(' ') {
                skipping = missing.iter().any(|m| line.split(' ').next() == Some(*m));
            }
            if !skipping {
                theirs.push(line);
            }
        }
        let ours = lines(&mut con, cmd);
        assert_eq!(theirs, ours, "{cmd} HELP: redis-server's lines, then ours");
        assert!(ours.len() > 5);
        for m in missing {
            let e = reply(
                &mut con,
                &[cmd, m, "SET", "a", "b"][..if cmd == "COMMAND" { 5 } else { 2 }],
            )
            .unwrap_err();
            assert!(e.contains("unknown subcommand"), "{cmd} {m}: {e}");
        }
        check(&mut rcon, &mut con, &[cmd, "HELP", "extra"]);
    }
}

/// An EXEC refused whole for want of memory (maxmemory reached after its writes were
/// queued) is a rejected EXEC in commandstats, as Redis's `rejectCommand` counts it.
#[test]
fn exec_refused_for_oom_is_rejected() {
    let reference = RedisServer::start();
    let s = ServerProcess::start();
    let mut rcon = reference.conn();
    let mut con = s.conn();
    let mut rother = reference.conn();
    let mut other = s.conn();
    let filler = "x".repeat(100_000);
    for step in [
        &["SET", "filler", filler.as_str()][..],
        &["CONFIG", "RESETSTAT"],
        &["MULTI"],
        &["SET", "a", "b"],
    ] {
        check(&mut rcon, &mut con, step);
    }
    check(
        &mut rother,
        &mut other,
        &["CONFIG", "SET", "maxmemory", "1"],
    );
    let ours = same(&mut rcon, &mut con, &["EXEC"], "");
    assert!(format!("{ours:?}").contains("OOM"), "{ours:?}");
    check(
        &mut rother,
        &mut other,
        &["CONFIG", "SET", "maxmemory", "0"],
    );
    let names = ["exec", "set"];
    let ours = counts(&mut con, &names);
    assert_eq!(counts(&mut rcon, &names), ours, "redis-server's, then ours");
    assert!(ours[0].contains("rejected_calls=1"), "{ours:?}");
    assert!(ours[0].contains("failed_calls=0"), "{ours:?}");
}
