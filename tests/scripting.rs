//! Lua scripting through a real server and real clients: the Lua ↔ RESP conversion
//! table in RESP2 and RESP3, error replies, the sandbox, SCRIPT and FUNCTION commands,
//! shebang flags, determinism (TIME, math.random) and BUSY / SCRIPT KILL.
//!
//! Every expected reply and error text here was captured from redis-server 7.0.15 with
//! the same commands (the wire bytes for the conversion table), except where a comment
//! says that Tollgate differs on purpose (the reseeded PRNG, the server clock).

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{err, error_text, q, TestServer};
use redis::{Connection, Value};

/// SHA1 of a script, as EVALSHA and the error suffix name it.
fn sha(code: &str) -> String {
    sha1_smol::Sha1::from(code).digest().to_string()
}

/// One command encoded as a RESP array of bulk strings.
fn encode(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// The exact wire bytes of one command's reply in protocol `resp`: the command is sent
/// between two ECHO markers (after HELLO 3 for RESP3) and the bytes between them kept.
fn wire(addr: SocketAddr, resp: u8, args: &[&[u8]]) -> Vec<u8> {
    const BEGIN: &[u8] = b"$9\r\n__begin__\r\n";
    const END: &[u8] = b"$7\r\n__end__\r\n";
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut msg = Vec::new();
    if resp == 3 {
        msg.extend(encode(&[b"HELLO", b"3"]));
    }
    msg.extend(encode(&[b"ECHO", b"__begin__"]));
    msg.extend(encode(args));
    msg.extend(encode(&[b"ECHO", b"__end__"]));
    s.write_all(&msg).unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 65536];
    while !buf.ends_with(END) {
        let n = s.read(&mut chunk).expect("reply within 5 s");
        assert!(
            n > 0,
            "connection closed: {:?}",
            String::from_utf8_lossy(&buf)
        );
        buf.extend_from_slice(&chunk[..n]);
    }
    let start = buf
        .windows(BEGIN.len())
        .position(|w| w == BEGIN)
        .expect("begin marker")
        + BEGIN.len();
    buf[start..buf.len() - END.len()].to_vec()
}

/// EVAL `code` with no keys and the given arguments.
fn eval(c: &mut Connection, code: &str, args: &[&str]) -> redis::RedisResult<Value> {
    redis::cmd("EVAL").arg(code).arg(0).arg(args).query(c)
}

/// EVAL that must fail; the full error text.
fn eval_err(c: &mut Connection, code: &str) -> String {
    match eval(c, code, &[]) {
        Ok(v) => panic!("{code:?} should fail, got {v:?}"),
        Err(e) => error_text(&e),
    }
}

/// Redis's suffix on an error raised inside a script.
fn at(code: &str, line: u32) -> String {
    format!(" script: {}, on @user_script:{line}.", sha(code))
}

/// (script, RESP2 reply, RESP3 reply) captured from redis-server 7.0.15 with
/// `HSET h a 1`, `SADD s x`, `ZADD z 1.5 m` loaded.
const CONVERSION: &[(&str, &str, &str)] = &[
    // Lua → reply.
    ("return 3.99", ":3\r\n", ":3\r\n"),
    ("return true", ":1\r\n", ":1\r\n"),
    ("return false", "$-1\r\n", "_\r\n"),
    ("return nil", "$-1\r\n", "_\r\n"),
    (
        "return {1, true, false, 'x'}",
        "*4\r\n:1\r\n:1\r\n$-1\r\n$1\r\nx\r\n",
        "*4\r\n:1\r\n:1\r\n_\r\n$1\r\nx\r\n",
    ),
    ("return {1, nil, 3}", "*1\r\n:1\r\n", "*1\r\n:1\r\n"),
    ("return {ok='OK'}", "+OK\r\n", "+OK\r\n"),
    (
        "return redis.status_reply('FINE')",
        "+FINE\r\n",
        "+FINE\r\n",
    ),
    (
        "return redis.error_reply('MY oops')",
        "-MY oops\r\n",
        "-MY oops\r\n",
    ),
    (
        "return {err='plain text'}",
        "-plain text\r\n",
        "-plain text\r\n",
    ),
    // RESP3 types a script can return (in RESP2 they degrade as in Redis).
    (
        "return {map={a=1}}",
        "*2\r\n$1\r\na\r\n:1\r\n",
        "%1\r\n$1\r\na\r\n:1\r\n",
    ),
    (
        "return {set={a=true}}",
        "*1\r\n$1\r\na\r\n",
        "~1\r\n$1\r\na\r\n",
    ),
    (
        "return {double=3.14}",
        "$18\r\n3.1400000000000001\r\n",
        ",3.1400000000000001\r\n",
    ),
    ("return {double=-0.5}", "$4\r\n-0.5\r\n", ",-0.5\r\n"),
    (
        "return {big_number='1234567890123456789012345678901234567890'}",
        "$40\r\n1234567890123456789012345678901234567890\r\n",
        "(1234567890123456789012345678901234567890\r\n",
    ),
    (
        "return {verbatim_string={format='txt', string='hi'}}",
        "$2\r\nhi\r\n",
        "=6\r\ntxt:hi\r\n",
    ),
    // Booleans become RESP3 booleans only once the script selected RESP3.
    ("redis.setresp(3); return true", ":1\r\n", "#t\r\n"),
    ("redis.setresp(3); return false", ":0\r\n", "#f\r\n"),
    (
        "redis.setresp(3); return {true, false, 1}",
        "*3\r\n:1\r\n:0\r\n:1\r\n",
        "*3\r\n#t\r\n#f\r\n:1\r\n",
    ),
    ("redis.setresp(3); return nil", "$-1\r\n", "_\r\n"),
    // Command reply → Lua → reply, after redis.setresp(3).
    (
        "redis.setresp(3); return redis.call('HGETALL', 'h')",
        "*2\r\n$1\r\na\r\n$1\r\n1\r\n",
        "%1\r\n$1\r\na\r\n$1\r\n1\r\n",
    ),
    (
        "redis.setresp(3); return redis.call('SMEMBERS', 's')",
        "*1\r\n$1\r\nx\r\n",
        "~1\r\n$1\r\nx\r\n",
    ),
    (
        "redis.setresp(3); return redis.call('ZSCORE', 'z', 'm')",
        "$3\r\n1.5\r\n",
        ",1.5\r\n",
    ),
    (
        "redis.setresp(3); return {redis.call('ZRANGE', 'z', 0, -1, 'WITHSCORES')}",
        "*1\r\n*1\r\n*2\r\n$1\r\nm\r\n$3\r\n1.5\r\n",
        "*1\r\n*1\r\n*2\r\n$1\r\nm\r\n,1.5\r\n",
    ),
    (
        "redis.setresp(3); return redis.call('GET', 'nosuch')",
        "$-1\r\n",
        "_\r\n",
    ),
    (
        "redis.setresp(3); return type(redis.call('GET', 'nosuch'))",
        "$3\r\nnil\r\n",
        "$3\r\nnil\r\n",
    ),
    (
        "return type(redis.call('GET', 'nosuch'))",
        "$7\r\nboolean\r\n",
        "$7\r\nboolean\r\n",
    ),
    (
        "redis.setresp(3); return redis.call('HGETALL', 'h')['map']['a']",
        "$1\r\n1\r\n",
        "$1\r\n1\r\n",
    ),
    (
        "redis.setresp(3); return redis.call('ZSCORE', 'z', 'm')['double']",
        ":1\r\n",
        ":1\r\n",
    ),
];

#[test]
fn conversion_table_wire_bytes_resp2_and_resp3() {
    let s = TestServer::start();
    let mut c = s.conn();
    q::<i64>(&mut c, &["HSET", "h", "a", "1"]);
    q::<i64>(&mut c, &["SADD", "s", "x"]);
    q::<i64>(&mut c, &["ZADD", "z", "1.5", "m"]);
    for (code, resp2, resp3) in CONVERSION {
        for (resp, want) in [(2, resp2), (3, resp3)] {
            let got = wire(s.addr, resp, &[b"EVAL", code.as_bytes(), b"0"]);
            assert_eq!(String::from_utf8_lossy(&got), *want, "RESP{resp}: {code}");
        }
    }
}

#[test]
fn conversion_through_typed_clients() {
    let s = TestServer::start();
    let mut c3 = s.conn3();
    let mut c2 = s.conn();
    q::<i64>(&mut c2, &["HSET", "h", "a", "1"]);
    q::<i64>(&mut c2, &["SADD", "s", "x"]);

    let v = eval(
        &mut c3,
        "redis.setresp(3); return redis.call('HGETALL', 'h')",
        &[],
    )
    .unwrap();
    assert_eq!(
        v,
        Value::Map(vec![(
            Value::BulkString(b"a".to_vec()),
            Value::BulkString(b"1".to_vec())
        )])
    );
    let v = eval(
        &mut c2,
        "redis.setresp(3); return redis.call('HGETALL', 'h')",
        &[],
    )
    .unwrap();
    assert_eq!(
        v,
        Value::Array(vec![
            Value::BulkString(b"a".to_vec()),
            Value::BulkString(b"1".to_vec())
        ])
    );
    let v = eval(
        &mut c3,
        "redis.setresp(3); return redis.call('SMEMBERS', 's')",
        &[],
    )
    .unwrap();
    assert_eq!(v, Value::Set(vec![Value::BulkString(b"x".to_vec())]));
    assert_eq!(
        eval(&mut c3, "return {double=3.5}", &[]).unwrap(),
        Value::Double(3.5)
    );
    assert_eq!(
        eval(&mut c2, "return {double=3.5}", &[]).unwrap(),
        Value::BulkString(b"3.5".to_vec())
    );
    assert_eq!(
        eval(&mut c3, "redis.setresp(3); return true", &[]).unwrap(),
        Value::Boolean(true)
    );
    assert_eq!(
        eval(&mut c3, "redis.setresp(3); return false", &[]).unwrap(),
        Value::Boolean(false)
    );
    assert_eq!(
        eval(&mut c2, "redis.setresp(3); return false", &[]).unwrap(),
        Value::Int(0)
    );
    assert_eq!(
        eval(
            &mut c3,
            "redis.setresp(3); return redis.call('GET', 'nosuch')",
            &[]
        )
        .unwrap(),
        Value::Nil
    );
    match eval(
        &mut c3,
        "return {big_number='123456789012345678901234567890'}",
        &[],
    )
    .unwrap()
    {
        Value::BigNumber(n) => assert_eq!(n.to_string(), "123456789012345678901234567890"),
        other => panic!("expected a big number, got {other:?}"),
    }
    let v = eval(&mut c3, "return {map={k={1,2}}}", &[]).unwrap();
    assert_eq!(
        v,
        Value::Map(vec![(
            Value::BulkString(b"k".to_vec()),
            Value::Array(vec![Value::Int(1), Value::Int(2)])
        )])
    );
}

#[test]
fn error_replies() {
    let s = TestServer::start();
    let mut c = s.conn();
    q::<()>(&mut c, &["SET", "str", "abc"]);

    assert_eq!(
        eval_err(&mut c, "return redis.error_reply('MY oops')"),
        "MY oops"
    );
    assert_eq!(
        eval(&mut c, "return redis.status_reply('FINE')", &[]).unwrap(),
        Value::SimpleString("FINE".into())
    );
    assert_eq!(
        eval_err(&mut c, "return {err='ERR custom failure'}"),
        "ERR custom failure"
    );
    // pcall hands the error to the script as a table with an `err` field.
    let code = "local t = redis.pcall('INCR', KEYS[1]); return {type(t), t['err']}";
    let v: Vec<String> = redis::cmd("EVAL")
        .arg(code)
        .arg(1)
        .arg("str")
        .query(&mut c)
        .unwrap();
    assert_eq!(v, ["table", "ERR value is not an integer or out of range"]);
    // A returned pcall error table is the error reply itself, without a suffix.
    assert_eq!(
        err(
            &mut c,
            &["EVAL", "return redis.pcall('INCR', KEYS[1])", "1", "str"]
        ),
        "ERR value is not an integer or out of range"
    );
    // Errors raised inside the script carry " script: <sha>, on @user_script:<line>.".
    let code = "local a = 1\nlocal b = 2\nreturn redis.call('INCR', KEYS[1])";
    assert_eq!(
        err(&mut c, &["EVAL", code, "1", "str"]),
        format!("ERR value is not an integer or out of range{}", at(code, 3))
    );
    let code = "return redis.call('LPUSH', KEYS[1], 'x')";
    assert_eq!(
        err(&mut c, &["EVAL", code, "1", "str"]),
        format!(
            "WRONGTYPE Operation against a key holding the wrong kind of value{}",
            at(code, 1)
        )
    );
    let code = "error('boom')";
    assert_eq!(
        eval_err(&mut c, code),
        format!("ERR user_script:1: boom{}", at(code, 1))
    );
    let code = "error({err='MYCODE custom'})";
    assert_eq!(
        eval_err(&mut c, code),
        format!("MYCODE custom{}", at(code, 1))
    );
    let code = "return redis.call('nosuch')";
    assert_eq!(
        eval_err(&mut c, code),
        format!(
            "ERR Unknown Redis command called from script{}",
            at(code, 1)
        )
    );
    // The same through EVALSHA names the same SHA.
    let code = "return redis.call('INCR', 'str')";
    let loaded: String = q(&mut c, &["SCRIPT", "LOAD", code]);
    assert_eq!(
        err(&mut c, &["EVALSHA", &loaded, "0"]),
        format!("ERR value is not an integer or out of range{}", at(code, 1))
    );
    let code = "return 1 +";
    assert_eq!(
        eval_err(&mut c, code),
        "ERR Error compiling script (new function): user_script:1: unexpected symbol near '<eof>'"
    );
}

#[test]
fn sandbox_escapes_are_refused_and_the_server_keeps_serving() {
    let s = TestServer::start();
    let mut c = s.conn();
    let marker = std::env::temp_dir().join(format!("tollgate-pwned-{}", std::process::id()));
    let marker_s = marker.to_string_lossy().into_owned();
    let nonexistent = |name: &str| {
        format!("user_script:1: Script attempted to access nonexistent global variable '{name}'")
    };
    let readonly = "user_script:1: Attempt to modify a readonly table";
    let escapes: Vec<(String, String)> = vec![
        // `os` is a table with only os.clock (Redis 7.2); 7.0 has no `os` at all.
        (
            format!("return os.execute('touch {marker_s}')"),
            "attempt to call field 'execute' (a nil value)".into(),
        ),
        (
            format!("return io.open('{marker_s}', 'w')"),
            nonexistent("io"),
        ),
        ("return require('os')".into(), nonexistent("require")),
        // CVE-2022-0543: Debian's Redis leaked `package`, whose loadlib loads any C library.
        (
            "return package.loadlib('/lib/x86_64-linux-gnu/libc.so.6', 'system')".into(),
            nonexistent("package"),
        ),
        ("return dofile('/etc/passwd')".into(), nonexistent("dofile")),
        (
            "return loadfile('/etc/passwd')".into(),
            nonexistent("loadfile"),
        ),
        ("return debug.getinfo(1)".into(), nonexistent("debug")),
        ("return print('x')".into(), nonexistent("print")),
        ("newglobal = 1".into(), readonly.into()),
        ("_G.newglobal = 1".into(), readonly.into()),
        (
            "rawset(_G, 'newglobal', 1)".into(),
            "Attempt to modify a readonly table".into(),
        ),
        (
            "setmetatable(_G, nil)".into(),
            "Attempt to modify a readonly table".into(),
        ),
        ("string.rep = nil".into(), readonly.into()),
        ("redis.call = nil".into(), readonly.into()),
        (
            "getmetatable('').__index.upper = function() return 'pwned' end".into(),
            readonly.into(),
        ),
        (
            "local mt = getmetatable(''); mt.__index = {}".into(),
            readonly.into(),
        ),
    ];
    for (code, want) in &escapes {
        let got = eval_err(&mut c, code);
        assert!(
            got.starts_with("ERR ") && got.contains(want.as_str()),
            "{code}: {got}"
        );
        assert!(got.ends_with(&at(code, 1)), "{code}: {got}");
        assert_eq!(q::<String>(&mut c, &["PING"]), "PONG", "after {code}");
    }
    assert!(!marker.exists(), "a script reached the file system");
    // Bytecode is refused by loadstring (Lua 5.1 bytecode is unverified, so loading it
    // is a known sandbox escape); source still loads.
    let v: Vec<String> = redis::cmd("EVAL")
        .arg("local f, e = loadstring(string.dump(function() return 1 end)); return {tostring(f), e}")
        .arg(0)
        .query(&mut c)
        .unwrap();
    assert_eq!(
        v,
        [
            "nil",
            "[string \"\u{1b}LuaQ\"]:1: unexpected symbol near 'char(27)'"
        ]
    );
    let v: redis::RedisResult<i64> = redis::cmd("EVAL")
        .arg("return loadstring(string.char(27) .. 'Lua' .. string.rep('x', 20)) == nil")
        .arg(0)
        .query(&mut c);
    assert_eq!(v.unwrap(), 1);
    assert_eq!(
        eval(&mut c, "return loadstring('return 1 + 1')()", &[]).unwrap(),
        Value::Int(2)
    );
    // Nothing leaked from the attempts: no global, string methods intact.
    assert_eq!(
        eval(&mut c, "return type(rawget(_G, 'newglobal'))", &[]).unwrap(),
        Value::BulkString(b"nil".to_vec())
    );
    assert_eq!(
        eval(&mut c, "return ('x'):upper() .. string.rep('y', 2)", &[]).unwrap(),
        Value::BulkString(b"Xyy".to_vec())
    );
    assert_eq!(
        eval(&mut c, "return redis.call('SET', 'k', 'v')['ok']", &[]).unwrap(),
        Value::BulkString(b"OK".to_vec())
    );
}

#[test]
fn script_load_exists_flush() {
    let s = TestServer::start();
    let mut c = s.conn();
    let code = "return 'loaded ' .. ARGV[1]";
    let h: String = q(&mut c, &["SCRIPT", "LOAD", code]);
    assert_eq!(h, sha(code));
    let unknown = "ffffffffffffffffffffffffffffffffffffffff";
    assert_eq!(
        q::<Vec<i64>>(
            &mut c,
            &["SCRIPT", "EXISTS", &h, unknown, &h.to_uppercase()]
        ),
        [1, 0, 1]
    );
    assert_eq!(q::<String>(&mut c, &["EVALSHA", &h, "0", "a"]), "loaded a");
    assert_eq!(
        q::<String>(&mut c, &["EVALSHA", &h.to_uppercase(), "0", "b"]),
        "loaded b"
    );
    assert_eq!(
        err(&mut c, &["EVALSHA", unknown, "0"]),
        "NOSCRIPT No matching script. Please use EVAL."
    );
    // Another connection shares the cache.
    let mut c2 = s.conn();
    assert_eq!(q::<String>(&mut c2, &["EVALSHA", &h, "0", "c"]), "loaded c");
    // EVAL caches too.
    let other = "return 42";
    assert_eq!(q::<i64>(&mut c, &["EVAL", other, "0"]), 42);
    assert_eq!(
        q::<Vec<i64>>(&mut c, &["SCRIPT", "EXISTS", &sha(other)]),
        [1]
    );
    assert_eq!(q::<String>(&mut c, &["SCRIPT", "FLUSH"]), "OK");
    assert_eq!(
        q::<Vec<i64>>(&mut c, &["SCRIPT", "EXISTS", &h, &sha(other)]),
        [0, 0]
    );
    assert_eq!(
        err(&mut c, &["EVALSHA", &h, "0"]),
        "NOSCRIPT No matching script. Please use EVAL."
    );
    assert_eq!(q::<String>(&mut c, &["SCRIPT", "FLUSH", "ASYNC"]), "OK");
    assert_eq!(q::<String>(&mut c, &["SCRIPT", "LOAD", code]), h);
    assert_eq!(q::<String>(&mut c, &["SCRIPT", "FLUSH", "SYNC"]), "OK");
    assert_eq!(q::<Vec<i64>>(&mut c, &["SCRIPT", "EXISTS", &h]), [0]);
    assert_eq!(
        err(&mut c, &["SCRIPT", "LOAD", "return 1 +"]),
        "ERR Error compiling script (new function): user_script:1: unexpected symbol near '<eof>'"
    );
}

#[test]
fn eval_ro_and_no_writes_shebang_refuse_writes() {
    let s = TestServer::start();
    let mut c = s.conn();
    q::<()>(&mut c, &["SET", "k", "v"]);
    assert_eq!(
        q::<String>(
            &mut c,
            &["EVAL_RO", "return redis.call('GET', KEYS[1])", "1", "k"]
        ),
        "v"
    );
    let code = "return redis.call('SET', KEYS[1], 'w')";
    assert_eq!(
        err(&mut c, &["EVAL_RO", code, "1", "k"]),
        format!(
            "ERR Write commands are not allowed from read-only scripts.{}",
            at(code, 1)
        )
    );
    let h: String = q(&mut c, &["SCRIPT", "LOAD", code]);
    assert!(err(&mut c, &["EVALSHA_RO", &h, "1", "k"])
        .starts_with("ERR Write commands are not allowed from read-only scripts."));
    // Shebang flags: no-writes refuses writes even under EVAL; pcall sees the error.
    let code = "#!lua flags=no-writes\nreturn redis.call('SET', KEYS[1], 'w')";
    assert_eq!(
        err(&mut c, &["EVAL", code, "1", "k"]),
        format!(
            "ERR Write commands are not allowed from read-only scripts.{}",
            at(code, 2)
        )
    );
    assert_eq!(
        err(
            &mut c,
            &[
                "EVAL",
                "#!lua flags=no-writes\nreturn redis.pcall('DEL', KEYS[1])",
                "1",
                "k"
            ]
        ),
        "ERR Write commands are not allowed from read-only scripts."
    );
    let ro = "#!lua flags=no-writes\nreturn redis.call('GET', KEYS[1])";
    assert_eq!(q::<String>(&mut c, &["EVAL", ro, "1", "k"]), "v");
    assert_eq!(q::<String>(&mut c, &["EVAL_RO", ro, "1", "k"]), "v");
    // A shebang without no-writes declares a writing script: *_RO refuses it up front.
    assert_eq!(
        err(
            &mut c,
            &[
                "EVAL_RO",
                "#!lua\nreturn redis.call('GET', KEYS[1])",
                "1",
                "k"
            ]
        ),
        "ERR Can not execute a script with write flag using *_ro command."
    );
    assert_eq!(
        err(&mut c, &["EVAL", "#!lua flags=bogus\nreturn 1", "0"]),
        "ERR Unexpected flag in script shebang: bogus"
    );
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "v");
}

#[test]
fn functions_load_call_list_delete() {
    let s = TestServer::start();
    let mut c = s.conn();
    q::<()>(&mut c, &["SET", "k", "v"]);
    let lib = "#!lua name=mylib\n\
        redis.register_function('incrby2', function(keys, args) return redis.call('INCRBY', keys[1], args[1]) end)\n\
        redis.register_function{function_name='get_ro', callback=function(keys) return redis.call('GET', keys[1]) end, flags={'no-writes'}}";
    assert_eq!(q::<String>(&mut c, &["FUNCTION", "LOAD", lib]), "mylib");
    assert_eq!(q::<i64>(&mut c, &["FCALL", "incrby2", "1", "n", "5"]), 5);
    assert_eq!(q::<i64>(&mut c, &["FCALL", "incrby2", "1", "n", "5"]), 10);
    assert_eq!(q::<String>(&mut c, &["FCALL_RO", "get_ro", "1", "n"]), "10");
    assert_eq!(q::<String>(&mut c, &["FCALL", "get_ro", "1", "k"]), "v");
    assert_eq!(
        err(&mut c, &["FCALL_RO", "incrby2", "1", "n", "5"]),
        "ERR Can not execute a script with write flag using *_ro command."
    );
    assert_eq!(
        err(
            &mut c,
            &[
                "FUNCTION",
                "LOAD",
                "#!lua name=mylib\nredis.register_function('other', function() return 1 end)"
            ]
        ),
        "ERR Library 'mylib' already exists"
    );
    let doubled = lib.replace("args[1])", "args[1] * 2)");
    assert_eq!(
        q::<String>(&mut c, &["FUNCTION", "LOAD", "REPLACE", &doubled]),
        "mylib"
    );
    assert_eq!(q::<i64>(&mut c, &["FCALL", "incrby2", "1", "n", "5"]), 20);
    assert_eq!(
        err(
            &mut c,
            &[
                "FUNCTION",
                "LOAD",
                "#!lua name=lib2\nredis.register_function('incrby2', function() return 1 end)"
            ]
        ),
        "ERR Function incrby2 already exists"
    );
    assert_eq!(
        err(&mut c, &["FUNCTION", "LOAD", "#!lua name=lib3\nreturn 1"]),
        "ERR No functions registered"
    );
    assert_eq!(
        err(&mut c, &["FUNCTION", "LOAD", "#!lua name=lib4\nredis.call('SET', 'x', 1)"]),
        "ERR Error registering functions: ERR user_function:2: Script attempted to access nonexistent global variable 'call'"
    );
    // FUNCTION LIST: one library, functions sorted by name, flags listed.
    let list: Value = q(&mut c, &["FUNCTION", "LIST"]);
    let expected = Value::Array(vec![Value::Array(vec![
        Value::BulkString(b"library_name".to_vec()),
        Value::BulkString(b"mylib".to_vec()),
        Value::BulkString(b"engine".to_vec()),
        Value::BulkString(b"LUA".to_vec()),
        Value::BulkString(b"functions".to_vec()),
        Value::Array(vec![
            Value::Array(vec![
                Value::BulkString(b"name".to_vec()),
                Value::BulkString(b"get_ro".to_vec()),
                Value::BulkString(b"description".to_vec()),
                Value::Nil,
                Value::BulkString(b"flags".to_vec()),
                Value::Array(vec![Value::SimpleString("no-writes".into())]),
            ]),
            Value::Array(vec![
                Value::BulkString(b"name".to_vec()),
                Value::BulkString(b"incrby2".to_vec()),
                Value::BulkString(b"description".to_vec()),
                Value::Nil,
                Value::BulkString(b"flags".to_vec()),
                Value::Array(vec![]),
            ]),
        ]),
    ])]);
    assert_eq!(list, expected);
    let none: Value = q(&mut c, &["FUNCTION", "LIST", "LIBRARYNAME", "nomatch"]);
    assert_eq!(none, Value::Array(vec![]));
    // An error inside a function names the function.
    let lib5 = "#!lua name=lib5\nredis.register_function('f', function() error('in f') end)";
    assert_eq!(q::<String>(&mut c, &["FUNCTION", "LOAD", lib5]), "lib5");
    assert_eq!(
        err(&mut c, &["FCALL", "f", "0"]),
        "ERR user_function:2: in f script: f, on @user_function:2."
    );
    assert_eq!(q::<String>(&mut c, &["FUNCTION", "DELETE", "mylib"]), "OK");
    assert_eq!(
        err(&mut c, &["FUNCTION", "DELETE", "mylib"]),
        "ERR Library not found"
    );
    assert_eq!(
        err(&mut c, &["FCALL", "incrby2", "1", "n", "5"]),
        "ERR Function not found"
    );
    assert_eq!(q::<String>(&mut c, &["FUNCTION", "FLUSH"]), "OK");
    let empty: Value = q(&mut c, &["FUNCTION", "LIST"]);
    assert_eq!(empty, Value::Array(vec![]));
}

/// TIME and redis.call('TIME') both read the server clock, which DEBUG ADVANCE-TIME moves.
/// (This differs from Redis on purpose: there TIME is the wall clock, here it is the time
/// handed to the command, the same on every replica.)
#[test]
fn redis_call_time_is_the_server_clock() {
    let s = TestServer::start();
    let mut c = s.conn();
    let wall = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64
    };
    // Ten years ahead: far beyond any gap between two commands.
    let ahead: i64 = 10 * 365 * 86_400;
    s.advance(ahead as u64 * 1000);
    let (t, _): (i64, i64) = q(&mut c, &["TIME"]);
    let lua: Vec<i64> = redis::cmd("EVAL")
        .arg("local t = redis.call('TIME'); return {tonumber(t[1]), tonumber(t[2])}")
        .arg(0)
        .query(&mut c)
        .unwrap();
    assert!(t >= wall() + ahead - 5, "TIME {t} ignores the server clock");
    assert!(
        lua[0] >= t && lua[0] <= t + 5,
        "script TIME {lua:?} vs TIME {t}"
    );
    // In one transaction the script runs one microsecond after TIME (each command of a
    // batch a microsecond after the one before), and both calls in it see one instant.
    let (time, script): ((u64, u64), Vec<u64>) = redis::pipe()
        .atomic()
        .cmd("TIME")
        .cmd("EVAL")
        .arg("local a = redis.call('TIME'); local b = redis.call('TIME'); return {tonumber(a[1]), tonumber(a[2]), tonumber(b[1]), tonumber(b[2])}")
        .arg(0)
        .query(&mut c)
        .unwrap();
    assert_eq!(
        time.0 * 1_000_000 + time.1 + 1,
        script[0] * 1_000_000 + script[1]
    );
    assert_eq!(script[0..2], script[2..4]);
}

/// Each script's PRNG is seeded from its command's seed (a local counter on this in-memory
/// node, the log entry on a cluster or durable node, so replicas draw alike): two EVALs draw
/// differently, as on Redis 7.0 (its unit/scripting "random numbers are random now"), and
/// `math.randomseed` still gives Redis's exact sequence.
#[test]
fn math_random_differs_across_evals_and_randomseed_is_exact() {
    let s = TestServer::start();
    let mut c = s.conn();
    let code = "return tostring(math.random())";
    let draws: std::collections::HashSet<String> = (0..20)
        .map(|_| redis::cmd("EVAL").arg(code).arg(0).query(&mut c).unwrap())
        .collect();
    assert!(draws.len() >= 18, "20 EVALs drew only {draws:?}");
    let h: String = q(&mut c, &["SCRIPT", "LOAD", code]);
    let by_sha: std::collections::HashSet<String> = (0..5)
        .map(|_| redis::cmd("EVALSHA").arg(&h).arg(0).query(&mut c).unwrap())
        .collect();
    assert!(by_sha.len() >= 4, "5 EVALSHAs drew only {by_sha:?}");
    // Values redis-server 7.0.15 gives for the same seeded scripts.
    let seeded = "math.randomseed(0); return {tostring(math.random()), math.random(1000000)}";
    for _ in 0..2 {
        let v: Vec<String> = redis::cmd("EVAL").arg(seeded).arg(0).query(&mut c).unwrap();
        assert_eq!(v, ["0.17082803611217", "749902"]);
    }
}

const BUSY: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";

/// Run `code` on its own connection in a thread; the reply (or error text) comes back
/// with how long it took.
fn spawn_eval(
    s: &TestServer,
    code: &'static str,
    args: Vec<String>,
) -> mpsc::Receiver<(String, Duration)> {
    let mut c = s.conn();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let start = Instant::now();
        let r: redis::RedisResult<Value> =
            redis::cmd("EVAL").arg(code).arg(0).arg(args).query(&mut c);
        let text = match r {
            Ok(v) => format!("{v:?}"),
            Err(e) => error_text(&e),
        };
        let _ = tx.send((text, start.elapsed()));
    });
    rx
}

/// Poll PING on `c` until it answers BUSY; bounded by `limit`. Returns when it did.
///
/// Waits 100 ms first so that the script has started: a command that reaches the engine
/// after the script's batch took the state lock but before the script registered itself
/// as running blocks until the script ends instead of answering BUSY (engine race, see
/// the lead's notes), which would hang this test on `while true do end`.
fn wait_busy(c: &mut Connection, start: Instant, limit: Duration) -> Duration {
    std::thread::sleep(Duration::from_millis(100));
    for _ in 0..1000 {
        match redis::cmd("PING").query::<String>(c) {
            Err(e) => {
                assert_eq!(error_text(&e), BUSY);
                return start.elapsed();
            }
            Ok(_) => {
                assert!(start.elapsed() < limit, "no BUSY after {limit:?}");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
    panic!("no BUSY after 1000 pings");
}

#[test]
fn busy_script_and_script_kill() {
    check_busy_and_kill(&TestServer::start());
}

/// The same with a single runtime worker thread (the default): the script starts on the
/// only thread that serves clients, and must hand it over (the engine does so once the
/// script has run for a while) for BUSY and SCRIPT KILL to be answered at all.
#[test]
fn busy_script_and_script_kill_with_one_worker_thread() {
    let s = TestServer::with(|c| c.threads = 1);
    // A worker kept by the script would leave clients unanswered (redis-rs waits without
    // a timeout while connecting): fail instead of hanging.
    let (done_tx, done_rx) = mpsc::channel();
    std::thread::spawn(move || {
        check_busy_and_kill(&s);
        let _ = done_tx.send(());
    });
    match done_rx.recv_timeout(Duration::from_secs(30)) {
        Ok(()) => {}
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("no BUSY / SCRIPT KILL within 30 s"),
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("the check failed (see above)"),
    }
}

/// `while true do end` makes other clients wait, then get BUSY past the threshold; SCRIPT
/// KILL stops it and the server serves normally again.
fn check_busy_and_kill(s: &TestServer) {
    let mut c = s.conn();
    q::<()>(&mut c, &["CONFIG", "SET", "busy-reply-threshold", "200"]);
    assert_eq!(
        err(&mut c, &["SCRIPT", "KILL"]),
        "NOTBUSY No scripts in execution right now."
    );
    let code = "while true do end";
    let start = Instant::now();
    let done = spawn_eval(s, code, vec![]);
    let threshold = Duration::from_millis(200);
    let mut other = s.conn();
    other
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let busy_at = wait_busy(&mut other, start, threshold + Duration::from_secs(1));
    assert!(
        busy_at >= threshold,
        "BUSY before the threshold: {busy_at:?}"
    );
    // FUNCTION KILL does not stop an EVAL script.
    assert_eq!(err(&mut other, &["FUNCTION", "KILL"]), BUSY);
    assert_eq!(q::<String>(&mut other, &["SCRIPT", "KILL"]), "OK");
    let (reply, took) = done
        .recv_timeout(threshold + Duration::from_secs(1))
        .expect("the killed script's client gets its reply");
    assert_eq!(
        reply,
        format!(
            "ERR Script killed by user with SCRIPT KILL...{}",
            at(code, 1)
        )
    );
    assert!(took < busy_at + Duration::from_secs(1), "{took:?}");
    // Served normally again.
    assert_eq!(q::<String>(&mut other, &["PING"]), "PONG");
    assert_eq!(
        err(&mut other, &["SCRIPT", "KILL"]),
        "NOTBUSY No scripts in execution right now."
    );
}

/// Iterations of an empty Lua loop that take about `target` on this machine.
fn loop_count_for(c: &mut Connection, target: Duration) -> u64 {
    let probe: u64 = 20_000_000;
    let start = Instant::now();
    let _: Value = redis::cmd("EVAL")
        .arg("for i = 1, tonumber(ARGV[1]) do end")
        .arg(0)
        .arg(probe)
        .query(c)
        .unwrap();
    let per_iter = start.elapsed().as_secs_f64() / probe as f64;
    ((target.as_secs_f64() / per_iter.max(1e-12)) as u64).clamp(probe, 20_000_000_000)
}

/// A script that wrote cannot be killed; only SHUTDOWN NOSAVE ends it (dedicated server:
/// it goes down with the script). The loop is bounded (about 3 s) so the Lua thread ends
/// by itself even though the harness's runtime cannot abort it.
#[test]
fn script_that_wrote_is_unkillable() {
    let s = TestServer::start();
    let mut c = s.conn();
    q::<()>(&mut c, &["CONFIG", "SET", "busy-reply-threshold", "200"]);
    let n = loop_count_for(&mut c, Duration::from_secs(3));
    let code =
        "redis.call('SET', 'written', '1') for i = 1, tonumber(ARGV[1]) do end return 'done'";
    let start = Instant::now();
    let done = spawn_eval(&s, code, vec![n.to_string()]);
    let mut other = s.conn();
    other
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let busy_at = wait_busy(&mut other, start, Duration::from_millis(1200));
    let unkillable = "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.";
    assert_eq!(err(&mut other, &["SCRIPT", "KILL"]), unkillable);
    // Still running: the kill request did nothing.
    assert_eq!(err(&mut other, &["PING"]), BUSY);
    let _ = redis::cmd("SHUTDOWN")
        .arg("NOSAVE")
        .query::<Value>(&mut other);
    // The server stops accepting clients well before the script's loop ends.
    let mut gone = false;
    for _ in 0..100 {
        if TcpStream::connect_timeout(&s.addr, Duration::from_millis(200))
            .map(|mut t| {
                t.set_read_timeout(Some(Duration::from_millis(200))).ok();
                let _ = t.write_all(b"PING\r\n");
                let mut b = [0u8; 16];
                !matches!(t.read(&mut b), Ok(n) if n > 0)
            })
            .unwrap_or(true)
        {
            gone = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(gone, "server still serving after SHUTDOWN NOSAVE");
    eprintln!(
        "stopped {:?} after the script became busy",
        start.elapsed().saturating_sub(busy_at)
    );
    // The script's client hears back (a reply or a closed connection), never hangs.
    let _ = done.recv_timeout(Duration::from_secs(30));
}

/// While a script is busy, a command sent inside MULTI is refused with BUSY (and dooms the
/// transaction), and EXEC is refused as `EXECABORT ... BUSY ...` with the transaction
/// discarded, as in Redis: no half of a transaction runs around a busy script.
#[test]
fn busy_script_refuses_queued_commands_and_exec() {
    let s = TestServer::start();
    let mut c = s.conn();
    q::<()>(&mut c, &["CONFIG", "SET", "busy-reply-threshold", "50"]);
    q::<()>(&mut c, &["SET", "xx", "1"]);
    // A command queued while busy: refused, and EXEC after the kill aborts.
    let mut tx = s.conn();
    tx.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let start = Instant::now();
    let done = spawn_eval(&s, "while true do end", vec![]);
    wait_busy(&mut c, start, Duration::from_secs(20));
    assert_eq!(q::<String>(&mut tx, &["MULTI"]), "OK");
    assert_eq!(err(&mut tx, &["INCR", "xx"]), BUSY);
    assert_eq!(q::<String>(&mut c, &["SCRIPT", "KILL"]), "OK");
    done.recv_timeout(Duration::from_secs(20)).expect("killed");
    assert_eq!(q::<String>(&mut tx, &["INCR", "xx"]), "QUEUED");
    assert_eq!(
        err(&mut tx, &["EXEC"]),
        "EXECABORT Transaction discarded because of previous errors."
    );
    assert_eq!(q::<String>(&mut tx, &["GET", "xx"]), "1");
    // EXEC while busy: discarded whole, and the connection is out of MULTI.
    assert_eq!(q::<String>(&mut tx, &["MULTI"]), "OK");
    assert_eq!(q::<String>(&mut tx, &["INCR", "xx"]), "QUEUED");
    let start = Instant::now();
    let done = spawn_eval(&s, "while true do end", vec![]);
    wait_busy(&mut c, start, Duration::from_secs(20));
    assert_eq!(
        err(&mut tx, &["EXEC"]),
        format!("EXECABORT Transaction discarded because of: {BUSY}")
    );
    assert_eq!(q::<String>(&mut c, &["SCRIPT", "KILL"]), "OK");
    done.recv_timeout(Duration::from_secs(20)).expect("killed");
    assert_eq!(q::<String>(&mut tx, &["GET", "xx"]), "1");
    assert_eq!(err(&mut tx, &["EXEC"]), "ERR EXEC without MULTI");
}

/// A `redis.call` with nearly as many arguments as Lua's stack holds still gets its reply
/// (Redis's own "Script check unpack with massive arguments").
#[test]
fn redis_call_with_massive_arguments_gets_its_reply() {
    let s = TestServer::start();
    let mut c = s.conn();
    let code = "local a = {} for i = 1, 7999 do a[i] = 1 end \
                return redis.call('lpush', 'l', unpack(a))";
    assert_eq!(q::<i64>(&mut c, &["EVAL", code, "0"]), 7999);
    let code = "local a = {} for i = 1, 7999 do a[i] = 1 end \
                return redis.pcall('lpush', 'l', unpack(a))";
    assert_eq!(q::<i64>(&mut c, &["EVAL", code, "0"]), 15998);
}

/// `pairs` over tables keyed by tables or functions, and `tostring` of them, give the same
/// on two servers whose VMs ran different scripts before (objects at other addresses):
/// each node of a cluster runs a write script itself, so this is what keeps replicas equal
/// (Tollgate's Lua hashes and prints a creation id, not the address; see
/// vendor/lua-src/TOLLGATE.md).
#[test]
fn table_key_order_and_tostring_do_not_depend_on_addresses() {
    let a = TestServer::start();
    let b = TestServer::start();
    let mut ca = a.conn();
    let mut cb = b.conn();
    for (c, n) in [(&mut ca, 50), (&mut cb, 3000)] {
        let script = format!("local t = {{}} for i = 1, {n} do t[i] = {{}} end return #t");
        assert_eq!(q::<i64>(c, &["EVAL", &script, "0"]), n);
    }
    let order = "local t = {} for i = 1, 32 do t[{}] = i end \
                 local f = {} for i = 1, 8 do f[function() return i end] = 100 + i end \
                 local r = {} for _, v in pairs(t) do r[#r + 1] = v end \
                 for _, v in pairs(f) do r[#r + 1] = v end \
                 r[#r + 1] = tostring({}) r[#r + 1] = tostring(function() end) \
                 r[#r + 1] = tostring(coroutine.create(function() end)) return r";
    let ra: Vec<String> = q(&mut ca, &["EVAL", order, "0"]);
    let rb: Vec<String> = q(&mut cb, &["EVAL", order, "0"]);
    assert_eq!(ra, rb);
    assert_eq!(ra.len(), 43);
    assert!(ra[40].starts_with("table: 0x"), "{ra:?}");
    // The same again on one server: each run starts the ids afresh.
    let again: Vec<String> = q(&mut ca, &["EVAL", order, "0"]);
    assert_eq!(again, ra);
}
