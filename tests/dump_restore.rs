//! DUMP and RESTORE against a live redis-server 7.0.15 started by the test: for every type,
//! small and large, integers at each encoding's edges, special floats, binary data and
//! empty strings, a DUMP from one server restores into the other with the same value, and
//! where Redis's encoding depends only on the contents the two DUMPs are byte-identical.
//! Corrupted payloads get Redis's error texts on both servers.

mod common;
mod redis_support;

use common::TestServer;
use redis::{Connection, Value};
use redis_support::{describe, RedisServer};

type Args = Vec<Vec<u8>>;

fn args(parts: &[&dyn AsArg]) -> Args {
    parts.iter().map(|p| p.bytes()).collect()
}

trait AsArg {
    fn bytes(&self) -> Vec<u8>;
}
impl AsArg for &str {
    fn bytes(&self) -> Vec<u8> {
        self.as_bytes().to_vec()
    }
}
impl AsArg for String {
    fn bytes(&self) -> Vec<u8> {
        self.as_bytes().to_vec()
    }
}
impl AsArg for Vec<u8> {
    fn bytes(&self) -> Vec<u8> {
        self.clone()
    }
}
impl AsArg for i64 {
    fn bytes(&self) -> Vec<u8> {
        self.to_string().into_bytes()
    }
}

fn run(c: &mut Connection, a: &Args) -> redis::RedisResult<Value> {
    let mut cmd = redis::cmd(std::str::from_utf8(&a[0]).unwrap());
    for x in &a[1..] {
        cmd.arg(&x[..]);
    }
    cmd.query(c)
}

fn ok(c: &mut Connection, a: &Args) {
    run(c, a).unwrap_or_else(|e| panic!("{:?}: {e}", String::from_utf8_lossy(&a[0])));
}

/// The reply or the error text, for comparing both servers.
fn outcome(c: &mut Connection, a: &Args) -> String {
    match run(c, a) {
        Ok(v) => format!("{v:?}"),
        Err(e) => common::error_text(&e),
    }
}

fn dump(c: &mut Connection, key: &[u8]) -> Vec<u8> {
    redis::cmd("DUMP").arg(key).query(c).unwrap()
}

/// A deterministic byte generator.
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }
    fn bytes(&mut self, len: usize, alphabet: u8) -> Vec<u8> {
        (0..len)
            .map(|_| (self.next() % u64::from(alphabet)) as u8 + b'a')
            .collect()
    }
    fn binary(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}

/// Integers at the edges of every listpack, intset and RDB integer encoding.
const EDGES: &[i64] = &[
    0,
    1,
    -1,
    12,
    13,
    127,
    128,
    -128,
    -129,
    255,
    256,
    4095,
    4096,
    -4096,
    -4097,
    32767,
    32768,
    -32768,
    -32769,
    8_388_607,
    8_388_608,
    -8_388_608,
    -8_388_609,
    2_147_483_647,
    2_147_483_648,
    -2_147_483_648,
    -2_147_483_649,
    i64::MAX,
    i64::MIN,
];

/// (key, commands that build it, whether the DUMPs must be byte-identical).
fn cases() -> Vec<(String, Vec<Args>, bool)> {
    let mut g = Lcg(42);
    let mut cases: Vec<(String, Vec<Args>, bool)> = Vec::new();
    let mut add = |key: &str, cmds: Vec<Args>, identical: bool| {
        cases.push((key.to_string(), cmds, identical));
    };
    // Strings: integers (int-encoded up to 32 bits), text, empty, binary, compressible.
    for (i, n) in EDGES.iter().enumerate() {
        add(
            &format!("int{i}"),
            vec![args(&[&"SET", &format!("int{i}"), n])],
            true,
        );
    }
    for (i, v) in [
        b"".to_vec(),
        b"hello".to_vec(),
        b"007".to_vec(),
        b"-0".to_vec(),
        b"3.5".to_vec(),
        b"12345678901234567890".to_vec(),
        vec![b'x'; 20],
        vec![b'x'; 21],
        b"\x00\xff\r\n binary".to_vec(),
        g.bytes(5000, 3),
        g.binary(3000),
        g.bytes(300_000, 20),
    ]
    .into_iter()
    .enumerate()
    {
        add(
            &format!("str{i}"),
            vec![args(&[&"SET", &format!("str{i}"), &v])],
            true,
        );
    }
    // Lists: small with every integer width, large (many 8 KB nodes), long elements.
    let mut list = args(&[&"RPUSH", &"list-ints"]);
    list.extend(EDGES.iter().map(|n| n.to_string().into_bytes()));
    list.push(b"".to_vec());
    list.push(b"\x00bin\xff".to_vec());
    add("list-ints", vec![list], true);
    let mut big = args(&[&"RPUSH", &"list-big"]);
    big.extend((0..20_000).map(|i| format!("item:{i}:{}", "x".repeat(i % 40)).into_bytes()));
    add("list-big", vec![big], true);
    add(
        "list-long",
        vec![args(&[
            &"RPUSH",
            &"list-long",
            &g.bytes(9000, 4),
            &"a",
            &g.binary(70_000),
            &"b",
        ])],
        true,
    );
    // Sets: intsets of each width and at the 512 limit, then hash tables.
    let widths: [&[i64]; 3] = [&[1, -1, 32767, -32768], &[1, 32768], &[1, 2_147_483_648]];
    for (i, members) in widths.iter().enumerate() {
        let mut cmd = args(&[&"SADD", &format!("intset{i}")]);
        cmd.extend(members.iter().map(|n| n.to_string().into_bytes()));
        add(&format!("intset{i}"), vec![cmd], true);
    }
    let mut cmd = args(&[&"SADD", &"intset-edges"]);
    cmd.extend(EDGES.iter().map(|n| n.to_string().into_bytes()));
    add("intset-edges", vec![cmd], true);
    let mut cmd = args(&[&"SADD", &"intset-512"]);
    cmd.extend((0..512).map(|n: i64| (n * 7 - 1000).to_string().into_bytes()));
    add("intset-512", vec![cmd], true);
    let mut cmd = args(&[&"SADD", &"set-513"]);
    cmd.extend((0..513).map(|n: i64| n.to_string().into_bytes()));
    add("set-513", vec![cmd], false);
    let mut cmd = args(&[&"SADD", &"set-words"]);
    cmd.extend((0..3000).map(|n| format!("member-{n}").into_bytes()));
    cmd.push(b"".to_vec());
    cmd.push(b"\x00\xff".to_vec());
    add("set-words", vec![cmd], false);
    add("set-one", vec![args(&[&"SADD", &"set-one", &"only"])], true);
    // Sorted sets: listpack with special and edge scores, skiplist by count and by length.
    let scores = [
        "0",
        "-0",
        "1",
        "-1",
        "1.5",
        "inf",
        "-inf",
        "1e-300",
        "-1e-300",
        "5e-324",
        "3.141592653589793",
        "4611686018427387904",
        "4611686018427388928",
        "-4611686018427387904",
        "1e20",
        "0.1",
        "9007199254740993",
        "127",
        "128",
        "-4097",
        "32768",
        "2147483648",
    ];
    let mut cmd = args(&[&"ZADD", &"zset-special"]);
    for (i, s) in scores.iter().enumerate() {
        cmd.push(s.as_bytes().to_vec());
        cmd.push(format!("m{i}").into_bytes());
    }
    add("zset-special", vec![cmd], true);
    let mut cmd = args(&[&"ZADD", &"zset-128"]);
    for i in 0..128 {
        cmd.push(format!("{}", i as f64 / 3.0).into_bytes());
        cmd.push(format!("member-{i}").into_bytes());
    }
    add("zset-128", vec![cmd], true);
    let mut cmd = args(&[&"ZADD", &"zset-big"]);
    for i in 0..5000 {
        cmd.push(format!("{}", (i % 97) as f64 * 1.25 - 50.0).into_bytes());
        cmd.push(format!("member-{i}").into_bytes());
    }
    add("zset-big", vec![cmd], true);
    let mut cmd = args(&[&"ZADD", &"zset-long", &"1", &g.bytes(65, 26), &"-0", &"z"]);
    cmd.extend(args(&[&"inf", &"top"]));
    add("zset-long", vec![cmd], true);
    add(
        "zset-64",
        vec![args(&[
            &"ZADD",
            &"zset-64",
            &"2",
            &g.bytes(64, 26),
            &"1",
            &"\x00",
        ])],
        true,
    );
    // Hashes: listpack (insertion order, edits, deletes), at the limits, hash tables.
    let mut cmd = args(&[&"HSET", &"hash-small"]);
    for (i, n) in EDGES.iter().enumerate() {
        cmd.push(format!("f{i}").into_bytes());
        cmd.push(n.to_string().into_bytes());
    }
    cmd.extend(args(&[
        &"",
        &"empty-field",
        &"empty-value",
        &"",
        &"bin\x00",
        &"\u{ff}",
    ]));
    add(
        "hash-small",
        vec![
            cmd,
            args(&[&"HSET", &"hash-small", &"f3", &"changed"]),
            args(&[&"HDEL", &"hash-small", &"f5"]),
        ],
        true,
    );
    let mut cmd = args(&[&"HSET", &"hash-128"]);
    for i in 0..128 {
        cmd.push(format!("field-{i}").into_bytes());
        cmd.push(g.bytes(64, 5));
    }
    add("hash-128", vec![cmd], true);
    let mut cmd = args(&[&"HSET", &"hash-129"]);
    for i in 0..129 {
        cmd.push(format!("field-{i}").into_bytes());
        cmd.push(format!("{i}").into_bytes());
    }
    add("hash-129", vec![cmd], false);
    add(
        "hash-long-value",
        vec![args(&[&"HSET", &"hash-long-value", &"f", &g.bytes(65, 2)])],
        true,
    );
    let mut cmd = args(&[&"HSET", &"hash-big"]);
    for i in 0..5000 {
        cmd.push(format!("field-{i}").into_bytes());
        cmd.push(g.bytes(i % 200, 8));
    }
    add("hash-big", vec![cmd], false);
    // A limiter's state is a string.
    add(
        "limiter",
        vec![args(&[&"SET", &"limiter", &"tokens=7;ts=1700000000123"])],
        true,
    );
    cases
}

/// Assert two value descriptions are equal, showing only where they start to differ.
fn same(got: &str, want: &str, what: &str) {
    if got != want {
        let at = got
            .bytes()
            .zip(want.bytes())
            .position(|(a, b)| a != b)
            .unwrap_or(got.len().min(want.len()));
        let from = at.saturating_sub(40);
        panic!(
            "{what}: values differ at character {at} (lengths {} and {}):\n got ...{}\nwant ...{}",
            got.len(),
            want.len(),
            got.get(from..(at + 80).min(got.len())).unwrap_or(""),
            want.get(from..(at + 80).min(want.len())).unwrap_or("")
        );
    }
}

#[test]
fn dumps_restore_across_both_servers_and_match_byte_for_byte() {
    let redis = RedisServer::start();
    let tollgate = TestServer::start();
    let mut r = redis.conn();
    let mut t = tollgate.conn();
    for (key, cmds, identical) in cases() {
        for c in [&mut r, &mut t] {
            for cmd in &cmds {
                ok(c, cmd);
            }
        }
        let want = describe(&mut r, key.as_bytes(), identical);
        same(
            &describe(&mut t, key.as_bytes(), identical),
            &want,
            &format!("{key}: same data"),
        );
        let from_redis = dump(&mut r, key.as_bytes());
        let from_tollgate = dump(&mut t, key.as_bytes());
        if identical {
            assert!(
                from_redis == from_tollgate,
                "{key}: DUMP bytes differ ({} vs {} bytes)",
                from_redis.len(),
                from_tollgate.len()
            );
        }
        // Redis's DUMP into Tollgate, Tollgate's into Redis: the same value both ways
        // (hash-table hashes in Redis's order are compared as sets of pairs).
        let copy = format!("{key}:copy");
        let restore =
            |payload: &[u8]| args(&[&"RESTORE", &copy.as_str(), &0i64, &payload.to_vec()]);
        ok(&mut t, &restore(&from_redis));
        ok(&mut r, &restore(&from_tollgate));
        let want = describe(&mut r, key.as_bytes(), false);
        same(
            &describe(&mut t, copy.as_bytes(), false),
            &want,
            &format!("{key} into Tollgate"),
        );
        same(
            &describe(&mut r, copy.as_bytes(), false),
            &want,
            &format!("{key} into Redis"),
        );
        if identical {
            // A listpack hash keeps Redis's field order through the round trip.
            same(
                &describe(&mut t, copy.as_bytes(), true),
                &describe(&mut r, key.as_bytes(), true),
                &format!("{key}: order"),
            );
        }
    }
}

#[test]
fn restore_options_and_errors_match_redis() {
    let redis = RedisServer::start();
    let tollgate = TestServer::start();
    let mut r = redis.conn();
    let mut t = tollgate.conn();
    ok(&mut r, &args(&[&"SET", &"src", &"value"]));
    let payload = dump(&mut r, b"src");
    let p = || payload.clone();
    let mut corrupt_crc = p();
    let last = corrupt_crc.len() - 1;
    corrupt_crc[last] ^= 0x40;
    let mut newer = p();
    let at = newer.len() - 10;
    newer[at] = 11;
    let cases: Vec<Args> = vec![
        args(&[&"RESTORE", &"a", &0i64, &p()]),
        args(&[&"RESTORE", &"a", &0i64, &p()]),
        args(&[&"RESTORE", &"a", &0i64, &p(), &"REPLACE"]),
        args(&[&"RESTORE", &"b", &-1i64, &p()]),
        args(&[&"RESTORE", &"b", &"ten", &p()]),
        args(&[&"RESTORE", &"b", &0i64, &corrupt_crc]),
        args(&[&"RESTORE", &"b", &0i64, &newer]),
        args(&[&"RESTORE", &"b", &0i64, &p()[..9].to_vec()]),
        args(&[&"RESTORE", &"b", &0i64, &Vec::new()]),
        args(&[&"RESTORE", &"b", &0i64, &p(), &"IDLETIME", &-1i64]),
        args(&[&"RESTORE", &"b", &0i64, &p(), &"IDLETIME", &"x"]),
        args(&[&"RESTORE", &"b", &0i64, &p(), &"IDLETIME"]),
        args(&[&"RESTORE", &"b", &0i64, &p(), &"FREQ", &256i64]),
        args(&[&"RESTORE", &"b", &0i64, &p(), &"FREQ", &-1i64]),
        args(&[
            &"RESTORE",
            &"b",
            &0i64,
            &p(),
            &"IDLETIME",
            &1i64,
            &"FREQ",
            &1i64,
        ]),
        args(&[&"RESTORE", &"b", &0i64, &p(), &"BOGUS"]),
        args(&[&"RESTORE", &"b", &0i64]),
        args(&[&"RESTORE", &"c", &0i64, &p(), &"IDLETIME", &100i64]),
        args(&[&"RESTORE", &"d", &0i64, &p(), &"FREQ", &5i64, &"REPLACE"]),
        // A deadline already past: OK, and nothing stored.
        args(&[&"RESTORE", &"e", &1i64, &p(), &"ABSTTL"]),
        args(&[&"EXISTS", &"e"]),
        // REPLACE with a past deadline deletes the old key.
        args(&[&"RESTORE", &"a", &1000i64, &p(), &"REPLACE", &"ABSTTL"]),
        args(&[&"EXISTS", &"a"]),
        // A relative TTL that overflows with the current time is in the past too.
        args(&[&"RESTORE", &"f", &i64::MAX, &p()]),
        args(&[&"EXISTS", &"f"]),
        args(&[&"RESTORE", &"g", &4_102_444_800_000i64, &p(), &"ABSTTL"]),
        args(&[&"PEXPIRETIME", &"g"]),
        args(&[&"DUMP", &"missing"]),
        args(&[&"DUMP"]),
        args(&[&"DUMP", &"a", &"b"]),
    ];
    for cmd in &cases {
        let shown: Vec<String> = cmd
            .iter()
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        assert_eq!(outcome(&mut t, cmd), outcome(&mut r, cmd), "{shown:?}");
    }
    // A relative TTL counts from the command's time.
    for c in [&mut r, &mut t] {
        ok(c, &args(&[&"RESTORE", &"ttl", &60_000i64, &p()]));
        let pttl: i64 = redis::cmd("PTTL").arg("ttl").query(c).unwrap();
        assert!((59_000..=60_000).contains(&pttl), "{pttl}");
    }
    // RESTORE into a WATCHed key aborts the transaction, as any write does.
    let mut t2 = tollgate.conn();
    ok(&mut t, &args(&[&"WATCH", &"w"]));
    ok(&mut t2, &args(&[&"RESTORE", &"w", &0i64, &p()]));
    ok(&mut t, &args(&[&"MULTI"]));
    ok(&mut t, &args(&[&"SET", &"w", &"x"]));
    assert_eq!(run(&mut t, &args(&[&"EXEC"])).unwrap(), Value::Nil);
}

/// A payload with a good footer around `body` (a type byte and a serialization).
fn payload(body: &[u8]) -> Vec<u8> {
    let mut p = body.to_vec();
    p.extend_from_slice(&10u16.to_le_bytes());
    let crc = tollgate::persistence::rdb::crc64::crc64(&p);
    p.extend_from_slice(&crc.to_le_bytes());
    p
}

/// Tollgate rebuilds its own structures from a payload, so it always checks what Redis checks
/// with `sanitize-dump-payload yes` (by default Redis keeps some malformed blobs, such as a
/// hash with a repeated field, and fails later).
#[test]
fn corrupt_bodies_are_bad_data_format_on_both() {
    let redis = RedisServer::with_args(&["--sanitize-dump-payload", "yes"]);
    let tollgate = TestServer::start();
    let mut r = redis.conn();
    let mut t = tollgate.conn();
    let bodies: Vec<(&str, Vec<u8>)> = vec![
        ("unknown type", b"\x08\x01a".to_vec()),
        ("string past the payload", b"\x00\x40\x20abc".to_vec()),
        ("bad length encoding", b"\x00\xbfabc".to_vec()),
        ("bad string encoding", b"\x00\xc7abc".to_vec()),
        ("bad LZF data", b"\x00\xc3\x03\x0a\x1f\x01\x02".to_vec()),
        ("empty set", b"\x02\x00".to_vec()),
        ("duplicate set members", b"\x02\x02\x01a\x01a".to_vec()),
        (
            "duplicate hash fields",
            b"\x04\x02\x01f\x01v\x01f\x01w".to_vec(),
        ),
        ("empty hash", b"\x04\x00".to_vec()),
        (
            "zset NaN score",
            b"\x05\x01\x01a\x00\x00\x00\x00\x00\x00\xf8\x7f".to_vec(),
        ),
        (
            "zset duplicate member",
            [
                &b"\x05\x02\x01a"[..],
                &1f64.to_le_bytes(),
                b"\x01a",
                &2f64.to_le_bytes(),
            ]
            .concat(),
        ),
        ("empty list", b"\x12\x00".to_vec()),
        ("bad quicklist container", b"\x12\x01\x03\x01a".to_vec()),
        (
            "intset out of order",
            b"\x0b\x0c\x02\x00\x00\x00\x02\x00\x00\x00\x02\x00\x01\x00".to_vec(),
        ),
        (
            "intset bad width",
            b"\x0b\x0a\x03\x00\x00\x00\x01\x00\x00\x00\x01\x00".to_vec(),
        ),
        (
            "intset empty",
            b"\x0b\x08\x02\x00\x00\x00\x00\x00\x00\x00".to_vec(),
        ),
        (
            "listpack size mismatch",
            b"\x10\x0a\x09\x00\x00\x00\x00\x00\x81a\x02\xff".to_vec(),
        ),
        (
            "listpack without terminator",
            b"\x10\x07\x07\x00\x00\x00\x00\x00\x00".to_vec(),
        ),
        ("no value", Vec::new()),
    ];
    for (what, body) in bodies {
        let cmd = args(&[&"RESTORE", &"k", &0i64, &payload(&body)]);
        let want = outcome(&mut r, &cmd);
        assert_eq!(want, "ERR Bad data format", "{what}: redis");
        assert_eq!(outcome(&mut t, &cmd), want, "{what}");
        assert_eq!(
            describe(&mut t, b"k", true),
            "none:",
            "{what}: nothing stored"
        );
    }
    // A stream is a valid value Tollgate cannot store: a clear error, nothing stored.
    ok(
        &mut r,
        &args(&[&"XADD", &"events", &"*", &"field", &"value"]),
    );
    let stream = dump(&mut r, b"events");
    assert_eq!(
        outcome(&mut t, &args(&[&"RESTORE", &"events", &0i64, &stream])),
        "ERR Bad data format: the payload holds a stream value, which Tollgate does not store"
    );
    assert_eq!(describe(&mut t, b"events", true), "none:");
    // Every single-byte corruption of a real payload: Redis's footer check catches it.
    ok(
        &mut r,
        &args(&[&"HSET", &"h", &"field", &"value", &"n", &"12"]),
    );
    let good = dump(&mut r, b"h");
    for i in 0..good.len() {
        let mut bad = good.clone();
        bad[i] ^= 0x10;
        let cmd = args(&[&"RESTORE", &"k", &0i64, &bad]);
        assert_eq!(outcome(&mut t, &cmd), outcome(&mut r, &cmd), "byte {i}");
    }
    // The server is fine afterwards.
    assert_eq!(describe(&mut t, b"k", true), "none:");
}
