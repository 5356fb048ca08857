//! ACL users through a real client: rules, AUTH/HELLO, NOPERM texts (redis-server 7.0.15's),
//! scripts and MULTI checked per call, ACL LOG, DELUSER closing the user's connections,
//! requirepass as the default user's password, and the aclfile (ACL SAVE/LOAD, users read
//! at start).

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::{err, q, TestServer};
use redis::Value;

/// A connection logged in as `user`.
fn login(s: &TestServer, user: &str, pass: &str) -> redis::Connection {
    let mut c = s.conn();
    let _: () = q(&mut c, &["AUTH", user, pass]);
    c
}

const NOPERM_KEY: &str =
    "NOPERM this user has no permissions to access one of the keys used as arguments";

#[test]
fn a_ratelimit_tenant_user_runs_its_limiters_and_nothing_else() {
    let s = TestServer::start();
    let mut admin = s.conn();
    let _: () = q(
        &mut admin,
        &[
            "ACL",
            "SETUSER",
            "t1",
            "on",
            ">pw",
            "+@ratelimit",
            "~tenant1:*",
        ],
    );
    let mut t = login(&s, "t1", "pw");
    let r: Vec<i64> = q(&mut t, &["LIMIT.TOKEN", "tenant1:x", "10", "1", "1000"]);
    assert_eq!(r[0], 1);
    let _: Vec<i64> = q(&mut t, &["CL.THROTTLE", "tenant1:c", "5", "10", "60"]);
    assert_eq!(
        err(&mut t, &["LIMIT.TOKEN", "tenant2:x", "10", "1", "1000"]),
        NOPERM_KEY
    );
    assert_eq!(
        err(&mut t, &["FLUSHALL"]),
        "NOPERM this user has no permissions to run the 'flushall' command"
    );
    assert_eq!(
        err(&mut t, &["EVAL", "return 1", "0"]),
        "NOPERM this user has no permissions to run the 'eval' command"
    );
    assert_eq!(
        err(&mut t, &["CONFIG", "SET", "maxmemory", "1"]),
        "NOPERM this user has no permissions to run the 'config|set' command"
    );
    // Nothing of the refused calls ran.
    let exists: i64 = q(&mut admin, &["EXISTS", "tenant2:x"]);
    assert_eq!(exists, 0);
    // ACL LOG has the refusals, newest first, in Redis's fields.
    let log: Vec<Value> = q(&mut admin, &["ACL", "LOG", "1"]);
    let entry = format!("{:?}", log[0]);
    for part in ["config|set", "command", "toplevel", "t1", "age-seconds"] {
        assert!(entry.contains(part), "{entry}");
    }
    let cats: Vec<String> = q(&mut admin, &["ACL", "CAT"]);
    assert!(cats.contains(&"ratelimit".to_string()));
    let limiters: Vec<String> = q(&mut admin, &["ACL", "CAT", "ratelimit"]);
    assert!(limiters.contains(&"limit.token".to_string()));
    assert!(limiters.contains(&"cl.throttle".to_string()));
    assert!(limiters.contains(&"increx".to_string()));
}

/// A connection keeps each command's ACL verdict (`acl/verdict.rs`): a change of its
/// user, by ACL SETUSER from another connection or by AUTH on this one, applies to the next
/// call, pipelined or not, and each refusal is logged.
#[test]
fn a_connections_kept_verdicts_follow_its_user() {
    let s = TestServer::start();
    let mut admin = s.conn();
    for (name, rules) in [
        ("all", &["on", ">pw", "~*", "+@all"][..]),
        ("tenant", &["on", ">pw", "~rl:*", "+incr", "+get"][..]),
    ] {
        let mut args = vec!["ACL", "SETUSER", name];
        args.extend_from_slice(rules);
        let _: () = q(&mut admin, &args);
    }
    let mut c = login(&s, "all", "pw");
    let _: i64 = q(&mut c, &["INCR", "x"]);
    let _: i64 = q(&mut c, &["INCR", "rl:x"]);
    // The same connection as another user: INCR's verdict is that user's.
    let _: () = q(&mut c, &["AUTH", "tenant", "pw"]);
    assert_eq!(err(&mut c, &["INCR", "x"]), NOPERM_KEY);
    let n: i64 = q(&mut c, &["INCR", "rl:x"]);
    assert_eq!(n, 2);
    let got: (i64, String, i64) = redis::pipe()
        .cmd("INCR")
        .arg("rl:x")
        .cmd("GET")
        .arg("rl:x")
        .cmd("INCR")
        .arg("rl:x")
        .query(&mut c)
        .unwrap();
    assert_eq!(got, (3, "3".into(), 4));
    // Pipelined frames (the connection's fast path) with a refusal among them.
    let incr = |k: &str| format!("*2\r\n$4\r\nINCR\r\n${}\r\n{k}\r\n", k.len());
    let piped = format!(
        "*3\r\n$4\r\nAUTH\r\n$6\r\ntenant\r\n$2\r\npw\r\n{}{}{}",
        incr("rl:y"),
        incr("y"),
        incr("rl:y")
    );
    assert_eq!(
        s.raw(piped.as_bytes()),
        format!("+OK\r\n:1\r\n-{NOPERM_KEY}\r\n:2\r\n")
    );
    // Another connection changes the user's keys, then its commands.
    let _: () = q(
        &mut admin,
        &["ACL", "SETUSER", "tenant", "resetkeys", "~other:*"],
    );
    assert_eq!(err(&mut c, &["INCR", "rl:x"]), NOPERM_KEY);
    let _: i64 = q(&mut c, &["INCR", "other:x"]);
    let _: () = q(&mut admin, &["ACL", "SETUSER", "tenant", "-incr"]);
    assert_eq!(
        err(&mut c, &["INCR", "other:x"]),
        "NOPERM this user has no permissions to run the 'incr' command"
    );
    let _: Option<String> = q(&mut c, &["GET", "other:x"]);
    // Back to a user with every key: allowed again.
    let _: () = q(&mut c, &["AUTH", "all", "pw"]);
    let _: i64 = q(&mut c, &["INCR", "y"]);
    // Each refusal above is in ACL LOG, the latest first.
    let rows: Vec<(String, String)> = log_rows(&mut admin, "10")
        .into_iter()
        .map(|(_, reason, context, object, user)| {
            assert_eq!((context.as_str(), user.as_str()), ("toplevel", "tenant"));
            (reason, object)
        })
        .collect();
    let want = [
        ("command", "incr"),
        ("key", "rl:x"),
        ("key", "y"),
        ("key", "x"),
    ];
    assert_eq!(rows, want.map(|(r, o)| (r.to_string(), o.to_string())));
}

#[test]
fn users_rules_and_descriptions() {
    let s = TestServer::start();
    let mut c = s.conn();
    let _: () = q(
        &mut c,
        &[
            "ACL", "SETUSER", "alice", "on", ">secret", "~cache:*", "%R~ro:*", "&news.*", "+@read",
            "-get",
        ],
    );
    let list: Vec<String> = q(&mut c, &["ACL", "LIST"]);
    assert_eq!(list[0], "user alice on #2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b ~cache:* %R~ro:* resetchannels &news.* -@all +@read -get");
    assert_eq!(list[1], "user default on nopass ~* &* +@all");
    let users: Vec<String> = q(&mut c, &["ACL", "USERS"]);
    assert_eq!(users, ["alice", "default"]);
    assert_eq!(
        err(&mut c, &["ACL", "SETUSER", "alice", "on", "bogus"]),
        "ERR Error in ACL SETUSER modifier 'bogus': Syntax error"
    );
    // SETUSER is all or nothing: `on` before the bad rule changed nothing either.
    let again: Vec<String> = q(&mut c, &["ACL", "LIST"]);
    assert_eq!(again, list);
    assert_eq!(
        err(&mut c, &["ACL", "SETUSER", "alice", "+nosuch"]),
        "ERR Error in ACL SETUSER modifier '+nosuch': Unknown command or category name in ACL"
    );
    let dry: String = q(&mut c, &["ACL", "DRYRUN", "alice", "get", "cache:1"]);
    assert_eq!(dry, "This user has no permissions to run the 'get' command");
    let dry: String = q(&mut c, &["ACL", "DRYRUN", "alice", "strlen", "other"]);
    assert_eq!(
        dry,
        "This user has no permissions to access the 'other' key"
    );
    let ok: String = q(&mut c, &["ACL", "DRYRUN", "alice", "strlen", "ro:1"]);
    assert_eq!(ok, "OK");
    let mut a = login(&s, "alice", "secret");
    assert_eq!(
        err(&mut a, &["ACL", "WHOAMI"]),
        "NOPERM this user has no permissions to run the 'acl|whoami' command"
    );
    // %R~ allows reading, not writing.
    let _: i64 = q(&mut a, &["STRLEN", "ro:1"]);
    assert_eq!(
        err(&mut a, &["SET", "ro:1", "x"]),
        "NOPERM this user has no permissions to run the 'set' command"
    );
    let _: () = q(&mut c, &["ACL", "SETUSER", "alice", "+set"]);
    // The change applies to the logged-in connection at once.
    assert_eq!(err(&mut a, &["SET", "ro:1", "x"]), NOPERM_KEY);
    let _: () = q(&mut a, &["SET", "cache:1", "x"]);
    // Channels: PUBLISH to a channel the user has, and not to another.
    assert_eq!(
        err(&mut a, &["PUBLISH", "sports", "m"]),
        "NOPERM this user has no permissions to run the 'publish' command"
    );
    let _: () = q(&mut c, &["ACL", "SETUSER", "alice", "+publish"]);
    let _: i64 = q(&mut a, &["PUBLISH", "news.today", "m"]);
    assert_eq!(
        err(&mut a, &["PUBLISH", "sports", "m"]),
        "NOPERM this user has no permissions to access one of the channels used as arguments"
    );
    let g: Vec<Value> = q(&mut c, &["ACL", "GETUSER", "alice"]);
    let text = format!("{g:?}");
    assert!(
        text.contains("news.*") && text.contains("cache:*"),
        "{text}"
    );
    let none: Value = q(&mut c, &["ACL", "GETUSER", "nobody"]);
    assert_eq!(none, Value::Nil);
    let pass: String = q(&mut c, &["ACL", "GENPASS"]);
    assert_eq!(pass.len(), 64);
    let pass: String = q(&mut c, &["ACL", "GENPASS", "5"]);
    assert_eq!(pass.len(), 2);
}

#[test]
fn auth_hello_and_wrong_passwords() {
    let s = TestServer::start();
    let mut c = s.conn();
    let _: () = q(
        &mut c,
        &[
            "ACL",
            "SETUSER",
            "bob",
            "on",
            ">pw",
            "allcommands",
            "allkeys",
        ],
    );
    let _: () = q(
        &mut c,
        &["ACL", "SETUSER", "off", "off", ">pw", "allcommands"],
    );
    let wrong = "WRONGPASS invalid username-password pair or user is disabled.";
    assert_eq!(err(&mut c, &["AUTH", "bob", "nope"]), wrong);
    assert_eq!(err(&mut c, &["AUTH", "off", "pw"]), wrong);
    assert_eq!(err(&mut c, &["AUTH", "ghost", "pw"]), wrong);
    let mut h = s.conn();
    let hello: Value = q(&mut h, &["HELLO", "3", "AUTH", "bob", "pw"]);
    assert!(format!("{hello:?}").contains("proto"));
    let who: String = q(&mut h, &["ACL", "WHOAMI"]);
    assert_eq!(who, "bob");
    let list: String = q(&mut h, &["CLIENT", "LIST"]);
    assert!(list.contains("user=bob"), "{list}");
    let log: Vec<Value> = q(&mut c, &["ACL", "LOG"]);
    assert!(format!("{:?}", log[0]).contains("auth"), "{log:?}");
    let _: () = q(&mut c, &["ACL", "LOG", "RESET"]);
    let log: Vec<Value> = q(&mut c, &["ACL", "LOG"]);
    assert!(log.is_empty());
}

#[test]
fn requirepass_is_the_default_users_password() {
    let s = TestServer::with(|c| c.requirepass = Some("top".into()));
    let mut c = s.conn();
    assert_eq!(
        err(&mut c, &["GET", "x"]),
        "NOAUTH Authentication required."
    );
    let _: () = q(&mut c, &["AUTH", "top"]);
    let _: () = q(&mut c, &["CONFIG", "SET", "requirepass", "new"]);
    let list: Vec<String> = q(&mut c, &["ACL", "LIST"]);
    assert!(list[0].starts_with("user default on #"), "{list:?}");
    let mut d = s.conn();
    let _: () = q(&mut d, &["AUTH", "default", "new"]);
    let _: () = q(&mut c, &["CONFIG", "SET", "requirepass", ""]);
    let list: Vec<String> = q(&mut c, &["ACL", "LIST"]);
    assert_eq!(list[0], "user default on nopass ~* &* +@all");
    let mut e = s.conn();
    let _: Value = q(&mut e, &["GET", "x"]);
}

#[test]
fn deleting_a_user_closes_its_connections() {
    let s = TestServer::start();
    let mut c = s.conn();
    let _: () = q(
        &mut c,
        &["ACL", "SETUSER", "tmp", "on", ">pw", "+@all", "~*"],
    );
    let mut t = login(&s, "tmp", "pw");
    let _: String = q(&mut t, &["PING"]);
    assert_eq!(
        err(&mut c, &["ACL", "DELUSER", "default"]),
        "ERR The 'default' user cannot be removed"
    );
    let n: i64 = q(&mut c, &["ACL", "DELUSER", "tmp", "nobody"]);
    assert_eq!(n, 1);
    let gone = redis::cmd("PING").query::<String>(&mut t);
    assert!(gone.is_err(), "{gone:?}");
    let users: Vec<String> = q(&mut c, &["ACL", "USERS"]);
    assert_eq!(users, ["default"]);
}

#[test]
fn scripts_and_transactions_check_each_call() {
    let s = TestServer::start();
    let mut c = s.conn();
    let _: () = q(
        &mut c,
        &[
            "ACL", "SETUSER", "sc", "on", ">pw", "+eval", "+get", "+multi", "+exec", "+set", "~k*",
        ],
    );
    let mut u = login(&s, "sc", "pw");
    let e = err(&mut u, &["EVAL", "return redis.call('del','k1')", "0"]);
    assert!(
        e.starts_with("ERR The user executing the script can't run this command or subcommand"),
        "{e}"
    );
    let e = err(&mut u, &["EVAL", "return redis.call('get','zz')", "0"]);
    assert!(
        e.starts_with("ERR The user executing the script can't access at least one of the keys mentioned in the command arguments"),
        "{e}"
    );
    let ok: Value = q(&mut u, &["EVAL", "return redis.call('get','k1')", "0"]);
    assert_eq!(ok, Value::Nil);
    let log: Vec<Value> = q(&mut c, &["ACL", "LOG", "1"]);
    assert!(format!("{:?}", log[0]).contains("lua"), "{log:?}");
    // MULTI: a refused command is refused at queue time and EXEC aborts.
    let _: () = q(&mut u, &["MULTI"]);
    assert_eq!(err(&mut u, &["SET", "zz", "1"]), NOPERM_KEY);
    assert_eq!(
        err(&mut u, &["EXEC"]),
        "EXECABORT Transaction discarded because of previous errors."
    );
    // A permission taken away between queueing and EXEC: that command fails, the rest runs
    // (a raw connection: redis-rs turns an error inside EXEC's array into an error).
    let mut raw = TcpStream::connect(s.addr).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    raw.write_all(b"AUTH sc pw\r\nMULTI\r\nSET k1 a\r\nGET k1\r\n")
        .unwrap();
    assert_eq!(
        read_until(&mut raw, "QUEUED\r\n", 2),
        "+OK\r\n+OK\r\n+QUEUED\r\n+QUEUED\r\n"
    );
    let _: () = q(&mut c, &["ACL", "SETUSER", "sc", "-set"]);
    raw.write_all(b"EXEC\r\n").unwrap();
    assert_eq!(
        read_until(&mut raw, "\r\n", 3),
        "*2\r\n-NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: no permission to execute the command or subcommand\r\n$-1\r\n"
    );
}

/// Read from `s` until `needle` was seen `times` times (or 5 s pass).
fn read_until(s: &mut TcpStream, needle: &str, times: usize) -> String {
    let mut out = String::new();
    let mut buf = [0u8; 4096];
    while out.matches(needle).count() < times {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.push_str(&String::from_utf8_lossy(&buf[..n])),
        }
    }
    out
}

#[test]
fn aclfile_save_load_and_start() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("users.acl");
    std::fs::write(
        &path,
        "user default on nopass ~* &* +@all\nuser ops on >pw ~* +@admin\n",
    )
    .unwrap();
    let p = path.clone();
    let s = TestServer::with(move |c| c.aclfile = Some(p));
    let mut c = s.conn();
    let users: Vec<String> = q(&mut c, &["ACL", "USERS"]);
    assert_eq!(users, ["default", "ops"]);
    let _: () = q(&mut c, &["ACL", "SETUSER", "new", "on", ">x", "+get", "~k"]);
    let _: () = q(&mut c, &["ACL", "SAVE"]);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("user new on #"), "{text}");
    std::fs::write(
        &path,
        "user default on nopass ~* &* +@all\nuser bob on bogus\nfoo\n",
    )
    .unwrap();
    let e = err(&mut c, &["ACL", "LOAD"]);
    assert_eq!(
        e,
        format!("ERR {0}:2: Syntax error. {0}:3 should start with user keyword followed by the username. WARNING: ACL errors detected, no change to the previously active ACL rules was performed", path.display())
    );
    let users: Vec<String> = q(&mut c, &["ACL", "USERS"]);
    assert_eq!(users, ["default", "new", "ops"]);
    std::fs::write(&path, text).unwrap();
    let _: () = q(&mut c, &["ACL", "DELUSER", "ops"]);
    let _: () = q(&mut c, &["ACL", "LOAD"]);
    let users: Vec<String> = q(&mut c, &["ACL", "USERS"]);
    assert_eq!(users, ["default", "new", "ops"]);
    drop(c);
    drop(s);
    // A restart reads the users from the file.
    let p = path.clone();
    let s = TestServer::with(move |c| c.aclfile = Some(p));
    let mut n = login(&s, "new", "x");
    let _: Value = q(&mut n, &["GET", "k"]);
    // Without an aclfile, SAVE and LOAD say so.
    let plain = TestServer::start();
    let mut c = plain.conn();
    assert!(err(&mut c, &["ACL", "SAVE"])
        .starts_with("ERR This Redis instance is not configured to use an ACL file."));
}

#[test]
fn command_info_lists_the_acl_categories() {
    let s = TestServer::start();
    let mut c = s.conn();
    let info: Vec<Vec<Value>> = q(&mut c, &["COMMAND", "INFO", "get", "limit.token"]);
    assert_eq!(
        format!("{:?}", info[0][6]),
        format!(
            "{:?}",
            Value::Array(vec![
                Value::SimpleString("@read".into()),
                Value::SimpleString("@string".into()),
                Value::SimpleString("@fast".into()),
            ])
        )
    );
    assert!(format!("{:?}", info[1][6]).contains("@ratelimit"));
}

#[test]
fn first_argument_rules_allow_a_command_with_one_first_argument() {
    let s = TestServer::start();
    let mut admin = s.conn();
    let _: () = q(
        &mut admin,
        &[
            "ACL",
            "SETUSER",
            "fa",
            "on",
            ">pw",
            "+@all",
            "-select",
            "+select|0",
            "+SELECT|Db2",
            "-client|kill",
            "~*",
        ],
    );
    let getuser: Vec<Value> = q(&mut admin, &["ACL", "GETUSER", "fa"]);
    assert_eq!(
        getuser[5],
        Value::BulkString(b"+@all -select +select|0 +select|Db2 -client|kill".to_vec())
    );
    let mut u = login(&s, "fa", "pw");
    let _: () = q(&mut u, &["SELECT", "0"]);
    assert_eq!(
        err(&mut u, &["SELECT", "1"]),
        "NOPERM this user has no permissions to run the 'select' command"
    );
    // Compared in any case, then the command runs (and refuses the argument itself).
    assert_eq!(
        err(&mut u, &["SELECT", "db2"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        err(&mut u, &["CLIENT", "KILL", "ID", "1"]),
        "NOPERM this user has no permissions to run the 'client|kill' command"
    );
    // Allowing or denying the command (or a category with it) forgets its first arguments.
    let _: () = q(&mut admin, &["ACL", "SETUSER", "fa", "-@connection"]);
    let getuser: Vec<Value> = q(&mut admin, &["ACL", "GETUSER", "fa"]);
    assert_eq!(
        getuser[5],
        Value::BulkString(b"+@all -@connection".to_vec())
    );
    assert_eq!(
        err(&mut admin, &["ACL", "SETUSER", "fa", "-select|0"]),
        "ERR Error in ACL SETUSER modifier '-select|0': Unknown command or category name in ACL"
    );
    assert_eq!(
        err(&mut admin, &["ACL", "SETUSER", "fa", "+config|get|x"]),
        "ERR Error in ACL SETUSER modifier '+config|get|x': Allowing first-arg of a subcommand is not supported"
    );
}

#[test]
fn selectors_allow_a_call_any_one_of_them_allows() {
    let s = TestServer::start();
    let mut admin = s.conn();
    // One selector given as one argument, another split over two (ACL SETUSER joins them).
    let _: () = q(
        &mut admin,
        &[
            "ACL",
            "SETUSER",
            "sel",
            "on",
            ">pw",
            "+set",
            "~w*",
            "(+get ~k*)",
            "(+set",
            "~x*)",
        ],
    );
    let list: Vec<String> = q(&mut admin, &["ACL", "LIST"]);
    let want = format!(
        "user sel on #{} ~w* resetchannels -@all +set (~k* resetchannels -@all +get) (~x* resetchannels -@all +set)",
        sha256_hex("pw")
    );
    assert!(list.contains(&want), "{list:?}");
    let mut u = login(&s, "sel", "pw");
    let _: () = q(&mut u, &["SET", "w1", "v"]);
    let _: () = q(&mut u, &["SET", "x1", "v"]);
    let _: Value = q(&mut u, &["GET", "k1"]);
    // No selector allows it: the most relevant refusal (a key over a command).
    assert_eq!(err(&mut u, &["SET", "k1", "v"]), NOPERM_KEY);
    assert_eq!(
        err(&mut u, &["DEL", "w1"]),
        "NOPERM this user has no permissions to run the 'del' command"
    );
    let dry: String = q(&mut admin, &["ACL", "DRYRUN", "sel", "mget", "k1", "w1"]);
    assert_eq!(
        dry,
        "This user has no permissions to run the 'mget' command"
    );
    assert_eq!(
        err(&mut admin, &["ACL", "SETUSER", "sel", "(+get"]),
        "ERR Unmatched parenthesis in acl selector starting at '(+get'."
    );
    assert_eq!(
        err(&mut admin, &["ACL", "SETUSER", "sel", "(on)"]),
        "ERR Error in ACL SETUSER modifier '(on)': Syntax error"
    );
    // GETUSER lists each selector's commands, keys and channels.
    let getuser: Vec<Value> = q(&mut admin, &["ACL", "GETUSER", "sel"]);
    let Value::Array(selectors) = &getuser[11] else {
        panic!("{getuser:?}")
    };
    assert_eq!(selectors.len(), 2);
    assert_eq!(
        format!("{:?}", selectors[0]),
        format!(
            "{:?}",
            Value::Array(
                ["commands", "-@all +get", "keys", "~k*", "channels", ""]
                    .iter()
                    .map(|w| Value::BulkString(w.as_bytes().to_vec()))
                    .collect()
            )
        )
    );
    let _: () = q(&mut admin, &["ACL", "SETUSER", "sel", "clearselectors"]);
    assert_eq!(
        err(&mut u, &["SET", "x1", "v"]),
        NOPERM_KEY,
        "the change applies to the connected client at once"
    );
}

fn sha256_hex(p: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(p.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// ACL LOG's entries as (count, reason, context, object, username).
fn log_rows(c: &mut redis::Connection, n: &str) -> Vec<(i64, String, String, String, String)> {
    let entries: Vec<Vec<Value>> = q(c, &["ACL", "LOG", n]);
    entries
        .iter()
        .map(|e| {
            let field = |name: &str| {
                let at = e
                    .iter()
                    .position(|v| *v == Value::BulkString(name.as_bytes().to_vec()))
                    .unwrap();
                e[at + 1].clone()
            };
            let text = |name: &str| match field(name) {
                Value::BulkString(b) => String::from_utf8(b).unwrap(),
                v => panic!("{v:?}"),
            };
            let Value::Int(count) = field("count") else {
                panic!("{e:?}")
            };
            (
                count,
                text("reason"),
                text("context"),
                text("object"),
                text("username"),
            )
        })
        .collect()
}

#[test]
fn acl_log_groups_like_redis_and_keeps_acllog_max_len_entries() {
    let s = TestServer::start();
    let mut admin = s.conn();
    let _: () = q(
        &mut admin,
        &["ACL", "SETUSER", "lg", "on", ">pw", "+get", "+multi", "~k*"],
    );
    let mut u = login(&s, "lg", "pw");
    for k in ["z1", "z2", "z3", "z1"] {
        assert_eq!(err(&mut u, &["GET", k]), NOPERM_KEY);
    }
    let row = |count, reason: &str, context: &str, object: &str| {
        (
            count,
            reason.into(),
            context.into(),
            object.into(),
            "lg".to_string(),
        )
    };
    // The repeated refusal counts again and moves to the front (Redis's addACLLogEntry).
    assert_eq!(
        log_rows(&mut admin, "10"),
        [
            row(2, "key", "toplevel", "z1"),
            row(1, "key", "toplevel", "z3"),
            row(1, "key", "toplevel", "z2"),
        ]
    );
    // A failed login is logged with the command's name as the client sent it.
    let (reply, _) = s.closes_after(b"auth lg wrong\r\nQUIT\r\n");
    assert!(reply.starts_with("-WRONGPASS"), "{reply}");
    let _: () = q(&mut u, &["MULTI"]);
    assert_eq!(
        err(&mut u, &["SET", "k1", "v"]),
        "NOPERM this user has no permissions to run the 'set' command"
    );
    assert_eq!(
        log_rows(&mut admin, "2"),
        [
            row(1, "command", "multi", "set"),
            row(1, "auth", "toplevel", "auth")
        ]
    );
    let v: Vec<String> = q(&mut admin, &["CONFIG", "GET", "acllog-max-len"]);
    assert_eq!(v, ["acllog-max-len", "128"]);
    assert_eq!(
        err(&mut admin, &["CONFIG", "SET", "acllog-max-len", "-1"]),
        "ERR CONFIG SET failed (possibly related to argument 'acllog-max-len') - argument must be between 0 and 9223372036854775807 inclusive"
    );
    // A shorter log applies from the next new entry, as in Redis.
    let _: () = q(&mut admin, &["CONFIG", "SET", "acllog-max-len", "2"]);
    assert_eq!(log_rows(&mut admin, "100").len(), 5);
    assert_eq!(err(&mut u, &["GET", "z9"]), NOPERM_KEY);
    assert_eq!(
        log_rows(&mut admin, "100"),
        [
            row(1, "key", "multi", "z9"),
            row(1, "command", "multi", "set")
        ]
    );
    let _: () = q(&mut admin, &["ACL", "LOG", "RESET"]);
    assert!(log_rows(&mut admin, "100").is_empty());
}
