//! `tollgate import-rdb` against files written by a live redis-server 7.0.15 (SAVE) and by
//! older Redis versions (the RDB files of Redis's own test suite): every key, type, value
//! and TTL (within a second) in every database matches what redis-server serves from the
//! same file; function libraries and old `lua` AUX scripts come along; a truncated or
//! corrupted file, a stream, or a non-empty target fails with a clear error and changes
//! nothing; a cluster imported through a follower holds the same data on every node.

mod cluster_support;
mod common;
mod redis_support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use common::TestServer;
use redis::Connection;
use redis_support::{describe, keys, RedisServer};

/// Run `tollgate import-rdb FILE --port PORT [extra]` as a process.
fn import(file: &Path, port: u16, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tollgate"))
        .arg("import-rdb")
        .arg(file)
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .args(extra)
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Run a command on a connection.
fn q<T: redis::FromRedisValue>(c: &mut Connection, args: &[&str]) -> T {
    common::q(c, args)
}

/// Fill redis-server with every type in several databases, with TTLs.
fn populate(redis: &RedisServer) {
    let mut c = redis.conn();
    let big_list: Vec<String> = (0..5000).map(|i| format!("entry:{i}")).collect();
    let words: Vec<String> = (0..2000).map(|i| format!("word-{i}")).collect();
    for db in [0usize, 1, 7, 15] {
        q::<()>(&mut c, &["SELECT", &db.to_string()]);
        let n = db.to_string();
        q::<()>(&mut c, &["SET", "str", &format!("value in db {db}")]);
        q::<()>(&mut c, &["SET", "int", "-2147483649"]);
        q::<()>(&mut c, &["SET", "empty", ""]);
        q::<()>(&mut c, &["SET", "long", &"abc".repeat(10_000)]);
        q::<()>(&mut c, &["SET", "limiter:user:42", "7;1700000000123"]);
        q::<()>(&mut c, &["RPUSH", "list", "a", "1", "-1", "", &n]);
        let mut cmd = redis::cmd("RPUSH");
        cmd.arg("list:big").arg(&big_list);
        let _: () = cmd.query(&mut c).unwrap();
        q::<()>(&mut c, &["SADD", "ints", "1", "-70000", "4294967296", &n]);
        let mut cmd = redis::cmd("SADD");
        cmd.arg("words").arg(&words);
        let _: () = cmd.query(&mut c).unwrap();
        q::<()>(
            &mut c,
            &[
                "ZADD", "z", "1", "a", "-inf", "b", "inf", "c", "1.5", "d", "-0", "e", "1e-300",
                "f",
            ],
        );
        let mut cmd = redis::cmd("ZADD");
        cmd.arg("z:big");
        for (i, w) in words.iter().enumerate() {
            cmd.arg(i as f64 / 7.0).arg(w);
        }
        let _: () = cmd.query(&mut c).unwrap();
        q::<()>(
            &mut c,
            &["HSET", "h", "f", "v", "n", "12", "bin", "\u{0}\u{ff}"],
        );
        let mut cmd = redis::cmd("HSET");
        cmd.arg("h:big");
        for w in &words {
            cmd.arg(w).arg(w.repeat(3));
        }
        let _: () = cmd.query(&mut c).unwrap();
        q::<()>(&mut c, &["SET", "ttl:str", "x", "PX", "120000"]);
        q::<()>(&mut c, &["RPUSH", "ttl:list", "x", "y"]);
        q::<()>(&mut c, &["EXPIRE", "ttl:list", "3600"]);
        q::<()>(&mut c, &["HSET", "ttl:h", "f", "v"]);
        q::<()>(&mut c, &["PEXPIREAT", "ttl:h", "4102444800000"]);
    }
    q::<()>(&mut c, &["SELECT", "0"]);
    q::<String>(
        &mut c,
        &[
            "FUNCTION",
            "LOAD",
            "#!lua name=imported\nredis.register_function('hello', function() return 'hi' end)",
        ],
    );
}

/// Compare every key (type, value, TTL within a second) in every database.
fn assert_same_data(redis: &mut Connection, tollgate: &mut Connection) -> usize {
    let mut total = 0;
    for db in 0..16 {
        let want = keys(redis, db);
        let got = keys(tollgate, db);
        assert_eq!(
            got.iter().map(|k| text(k)).collect::<Vec<_>>(),
            want.iter().map(|k| text(k)).collect::<Vec<_>>(),
            "keys of db {db}"
        );
        for k in &want {
            let what = format!("db {db} key {}", text(k));
            assert_eq!(
                describe(tollgate, k, false),
                describe(redis, k, false),
                "{what}"
            );
            let pttl =
                |c: &mut Connection| -> i64 { redis::cmd("PTTL").arg(&k[..]).query(c).unwrap() };
            let (a, b) = (pttl(redis), pttl(tollgate));
            assert!(
                (a < 0 && a == b) || (a >= 0 && b >= 0 && (a - b).abs() <= 1000),
                "{what}: PTTL {b}, Redis {a}"
            );
        }
        total += want.len();
    }
    total
}

/// Whether every database of a server is empty.
fn empty(c: &mut Connection) -> bool {
    (0..16).all(|db| {
        q::<()>(c, &["SELECT", &db.to_string()]);
        q::<i64>(c, &["DBSIZE"]) == 0
    })
}

/// A redis-server's dump.rdb after `populate`, and a redis-server that loaded it back.
fn saved_file() -> (RedisServer, PathBuf) {
    let source = RedisServer::with_args(&["--enable-debug-command", "yes"]);
    populate(&source);
    let mut c = source.conn();
    // A key whose deadline passes before SAVE: with active expiry off it is still written
    // (with its past deadline), and loading skips it.
    q::<()>(&mut c, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    q::<()>(&mut c, &["SET", "gone", "x", "PX", "1"]);
    std::thread::sleep(Duration::from_millis(20));
    q::<()>(&mut c, &["SAVE"]);
    let file = source.dir.path().join("import-me.rdb");
    std::fs::copy(source.rdb_path(), &file).unwrap();
    (source, file)
}

#[test]
fn imports_every_type_ttl_database_and_function_from_redis() {
    let (source, file) = saved_file();
    // What Redis itself serves from the file.
    let reference = RedisServer::loading(Some(&file), &[]);
    let tollgate = TestServer::start();
    let out = import(&file, tollgate.addr.port(), &[]);
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let report = text(&out.stdout);
    let keys_in_file = 4 * 16;
    assert!(
        report.contains(&format!("loaded {keys_in_file} keys, 1 function libraries")),
        "{report}"
    );
    assert!(
        text(&out.stderr).contains("1 keys already expired"),
        "{}",
        text(&out.stderr)
    );
    let mut r = reference.conn();
    let mut t = tollgate.conn();
    assert_eq!(assert_same_data(&mut r, &mut t), keys_in_file);
    q::<()>(&mut t, &["SELECT", "0"]);
    assert_eq!(q::<String>(&mut t, &["FCALL", "hello", "0"]), "hi");
    assert_eq!(q::<i64>(&mut t, &["EXISTS", "gone"]), 0);
    drop(source);
}

#[test]
fn non_empty_targets_are_refused_unless_replace() {
    let (_source, file) = saved_file();
    let tollgate = TestServer::start();
    let mut t = tollgate.conn();
    q::<()>(&mut t, &["SELECT", "7"]);
    q::<()>(&mut t, &["SET", "str", "mine"]);
    q::<()>(&mut t, &["SET", "other", "kept"]);
    let out = import(&file, tollgate.addr.port(), &[]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("the server already holds keys (db7=2)") && err.contains("--replace"),
        "{err}"
    );
    assert_eq!(q::<String>(&mut t, &["GET", "str"]), "mine");
    assert_eq!(q::<i64>(&mut t, &["DBSIZE"]), 2);
    q::<()>(&mut t, &["SELECT", "0"]);
    assert_eq!(q::<i64>(&mut t, &["DBSIZE"]), 0);
    // --replace overwrites keys of the same name and keeps the others.
    let out = import(&file, tollgate.addr.port(), &["--replace"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    q::<()>(&mut t, &["SELECT", "7"]);
    assert_eq!(q::<String>(&mut t, &["GET", "str"]), "value in db 7");
    assert_eq!(q::<String>(&mut t, &["GET", "other"]), "kept");
    // Again: the function library is replaced too.
    let out = import(&file, tollgate.addr.port(), &["--replace"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

#[test]
fn truncated_corrupted_and_unsupported_files_load_nothing() {
    let (source, file) = saved_file();
    let data = std::fs::read(&file).unwrap();
    let tollgate = TestServer::start();
    let mut t = tollgate.conn();
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.rdb");
    let try_file = |bytes: &[u8], what: &str, t: &mut Connection| -> String {
        std::fs::write(&bad, bytes).unwrap();
        let out = import(&bad, tollgate.addr.port(), &[]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{what}: {err}");
        assert!(
            err.contains("error: ") && err.contains("nothing was loaded"),
            "{what}: {err}"
        );
        assert!(empty(t), "{what}: the keyspace must stay empty");
        q::<()>(t, &["SELECT", "0"]);
        assert!(
            common::err(t, &["FCALL", "hello", "0"]).contains("Function not found"),
            "{what}: no library"
        );
        err
    };
    // Truncated anywhere, from the header to the last byte of the checksum.
    let n = data.len();
    for cut in [
        0,
        5,
        9,
        20,
        n / 10,
        n / 3,
        n / 2,
        2 * n / 3,
        n - 9,
        n - 8,
        n - 1,
    ] {
        try_file(&data[..cut], &format!("cut at {cut}"), &mut t);
    }
    // A flipped byte anywhere: caught by the structure checks or the checksum.
    for at in [10, 30, n / 7, n / 4, n / 2, 3 * n / 4, n - 12, n - 3] {
        let mut flipped = data.clone();
        flipped[at] ^= 0x20;
        try_file(&flipped, &format!("byte {at} flipped"), &mut t);
    }
    let mut tail = data.clone();
    let last = n - 1;
    tail[last] ^= 1;
    let err = try_file(&tail, "checksum", &mut t);
    assert!(err.contains("checksum mismatch"), "{err}");
    // A stream stops the import with its key, database and type.
    let mut c = source.conn();
    q::<()>(&mut c, &["SELECT", "7"]);
    q::<String>(&mut c, &["XADD", "events", "*", "f", "v"]);
    q::<()>(&mut c, &["SAVE"]);
    let err = try_file(&std::fs::read(source.rdb_path()).unwrap(), "stream", &mut t);
    assert!(
        err.contains("key 'events' in database 7 (stream): stream values cannot be imported"),
        "{err}"
    );
}

/// Redis's own test-suite RDB files (shared/redis-7.0.15-tests/tests/assets).
fn redis_assets() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    [root.join("../shared"), PathBuf::from("/work/shared")]
        .into_iter()
        .map(|s| s.join("redis-7.0.15-tests/tests/assets"))
        .find(|p| p.join("encodings.rdb").exists())
        .expect("Redis's test assets (shared/redis-7.0.15-tests/tests/assets) must be present")
}

#[test]
fn old_encodings_load_as_redis_7_loads_them() {
    let assets = redis_assets();
    // RDB 3 to 10: zipmap, ziplist, intset, quicklist v1 hashes, lists, sets and sorted
    // sets, old expiry opcodes; empty keys skipped; an old `lua` AUX script.
    for (name, keys) in [
        ("encodings.rdb", 13),
        ("hash-zipmap.rdb", 1),
        ("hash-ziplist.rdb", 1),
        ("list-quicklist.rdb", 2),
        ("zset-ziplist.rdb", 1),
        ("corrupt_empty_keys.rdb", 0),
        ("scriptbackup.rdb", 0),
    ] {
        let file = assets.join(name);
        let reference = RedisServer::loading(Some(&file), &[]);
        let tollgate = TestServer::start();
        let out = import(&file, tollgate.addr.port(), &[]);
        assert!(out.status.success(), "{name}: {}", text(&out.stderr));
        let mut t = tollgate.conn();
        assert_eq!(
            assert_same_data(&mut reference.conn(), &mut t),
            keys,
            "{name}"
        );
        if name == "corrupt_empty_keys.rdb" {
            assert!(
                text(&out.stderr).contains("9 empty keys are skipped"),
                "{}",
                text(&out.stderr)
            );
        }
        if name == "scriptbackup.rdb" {
            // The script body from the AUX field is in the script cache.
            let data = std::fs::read(&file).unwrap();
            let body = tollgate::persistence::rdb::file::Records::new(&data)
                .unwrap()
                .find_map(|r| match r.unwrap() {
                    tollgate::persistence::rdb::file::Record::Aux { name, value }
                        if &name[..] == b"lua" =>
                    {
                        Some(value.into_owned())
                    }
                    _ => None,
                })
                .unwrap();
            let sha = sha1_smol::Sha1::from(&body).digest().to_string();
            let exists: Vec<i64> = redis::cmd("SCRIPT")
                .arg("EXISTS")
                .arg(&sha)
                .query(&mut t)
                .unwrap();
            assert_eq!(exists, vec![1], "{name}");
        }
    }
    // A corrupt ziplist inside a hash: the key is named, nothing is loaded.
    let tollgate = TestServer::start();
    let out = import(
        &assets.join("corrupt_ziplist.rdb"),
        tollgate.addr.port(),
        &[],
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("(hash): corrupt value: hash ziplist integrity check failed"),
        "{err}"
    );
    assert!(empty(&mut tollgate.conn()));
}

#[test]
fn a_cluster_imported_through_a_follower_holds_the_data_on_every_node() {
    let _serial = cluster_support::serial();
    let (_source, file) = saved_file();
    let reference = RedisServer::loading(Some(&file), &[]);
    let cluster = cluster_support::Cluster::start(3);
    let leader = cluster.wait_leader(Duration::from_secs(15));
    let follower = (leader + 1) % 3;
    let out = import(&file, cluster.nodes[follower].port, &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    cluster.converged_digest(Duration::from_secs(20));
    let mut r = reference.conn();
    for node in &cluster.nodes {
        assert_eq!(
            assert_same_data(&mut r, &mut node.conn()),
            4 * 16,
            "node {}",
            node.id
        );
    }
}

#[test]
fn a_write_refused_midway_undoes_the_import() {
    // Database 0 is written (and loaded) first; the big value in database 5 exceeds the
    // server's proto-max-bulk-len, so its RESTORE is refused after db 0 was loaded.
    let source = RedisServer::start();
    let mut c = source.conn();
    for i in 0..200 {
        q::<()>(&mut c, &["SET", &format!("small:{i}"), "v"]);
    }
    q::<()>(&mut c, &["SELECT", "5"]);
    let noise: String = (0..300_000u32)
        .map(|i| char::from(b'!' + (i.wrapping_mul(2_654_435_761) >> 25) as u8 % 90))
        .collect();
    q::<()>(&mut c, &["SET", "big", &noise]);
    q::<()>(&mut c, &["SELECT", "0"]);
    q::<String>(
        &mut c,
        &[
            "FUNCTION",
            "LOAD",
            "#!lua name=imported\nredis.register_function('hello', function() return 'hi' end)",
        ],
    );
    q::<()>(&mut c, &["SAVE"]);
    let tollgate = TestServer::with(|config| config.proto_max_bulk_len = 100_000);
    let out = import(&source.rdb_path(), tollgate.addr.port(), &[]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(
            "the import stopped and deleted the 200 keys and 1 function libraries it had loaded"
        ),
        "{err}"
    );
    let mut t = tollgate.conn();
    assert!(empty(&mut t), "everything loaded was deleted");
    q::<()>(&mut t, &["SELECT", "0"]);
    assert!(common::err(&mut t, &["FCALL", "hello", "0"]).contains("Function not found"));
}
