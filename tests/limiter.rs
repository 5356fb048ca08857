//! Native limiter commands through a real client: CL.THROTTLE, INCREX and LIMIT.*,
//! with the server clock moved by DEBUG ADVANCE-TIME (no sleeps).
//!
//! The server clock is the wall clock plus the advanced offset, so a few real
//! milliseconds pass between commands; assertions on times leave room for that,
//! and scenarios that depend on window edges start well inside a window.

mod common;

use common::{err, q, TestServer};
use redis::{Connection, Value};

/// The server's clock in unix ms (TIME).
fn now(c: &mut Connection) -> u64 {
    let (secs, micros): (u64, u64) = q(c, &["TIME"]);
    secs * 1000 + micros / 1000
}

/// Advances the server clock to `offset` ms into a window aligned to `window`.
fn align(s: &TestServer, c: &mut Connection, window: u64, offset: u64) {
    let t = now(c);
    let ahead = (window + offset - t % window) % window;
    if ahead > 0 {
        s.advance(ahead);
    }
}

/// Sends `n` copies of a command in one pipeline; returns how many were admitted
/// (first reply element 1).
fn burst(c: &mut Connection, n: usize, args: &[&str]) -> usize {
    let mut p = redis::pipe();
    for _ in 0..n {
        p.cmd(args[0]).arg(&args[1..]);
    }
    let replies: Vec<Vec<i64>> = p.query(c).unwrap();
    replies.iter().filter(|r| r[0] == 1).count()
}

fn line(c: &mut Connection, args: &[&str]) -> Vec<i64> {
    q(c, args)
}

/// Every key matching `pattern`, following SCAN's cursor to the end.
fn scan_all(c: &mut Connection, pattern: &str) -> Vec<String> {
    let mut cursor = "0".to_string();
    let mut keys = Vec::new();
    loop {
        let (next, batch): (String, Vec<String>) = q(c, &["SCAN", &cursor, "MATCH", pattern]);
        keys.extend(batch);
        if next == "0" {
            return keys;
        }
        cursor = next;
    }
}

#[test]
fn seed_000_fixed_window_admits_double_at_the_edge_sliding_and_log_do_not() {
    let s = TestServer::start();
    // The retry times below are exact to the burst's time: a debug build's 1000-command
    // pipeline on a loaded machine took long enough to shift them past the bounds.
    s.freeze_time();
    let mut c = s.conn();
    for cmd in ["LIMIT.FIXED", "LIMIT.SLIDING", "LIMIT.LOG"] {
        let key = format!("edge:{cmd}");
        let args = [cmd, key.as_str(), "1000", "3s"];
        // 1000 per 3 s, the whole burst 500 ms before a window edge.
        align(&s, &mut c, 3000, 2500);
        assert_eq!(burst(&mut c, 1000, &args), 1000, "{cmd}");
        let rejected = line(&mut c, &args);
        assert_eq!(&rejected[..3], &[0, 1000, 0], "{cmd}");
        let retry = rejected[3];
        match cmd {
            // The fixed window ends 500 ms after the burst.
            "LIMIT.FIXED" => assert!((300..=500).contains(&retry), "{cmd} retry {retry}"),
            // The burst's 300 ms bucket (2400..2700) leaves the window at 5400.
            "LIMIT.SLIDING" => assert!((2700..=2900).contains(&retry), "{cmd} retry {retry}"),
            // The log frees the burst exactly 3 s after it.
            _ => assert!((2800..=3000).contains(&retry), "{cmd} retry {retry}"),
        }
        s.advance(600);
        let second = burst(&mut c, 1000, &args);
        if cmd == "LIMIT.FIXED" {
            // 2000 admitted within about 600 ms: the edge burst the seed warns about.
            assert_eq!(second, 1000, "{cmd}");
        } else {
            assert_eq!(second, 0, "{cmd}");
        }
    }
}

#[test]
fn seed_000_extreme_case_per_second_traffic() {
    // 10, 10, 980, 900, 100 requests in seconds 1..5 against 1000 per 3 s.
    let s = TestServer::start();
    let mut c = s.conn();
    let traffic = [10usize, 10, 980, 900, 100];
    for (cmd, extra) in [
        ("LIMIT.FIXED", None),
        ("LIMIT.SLIDING", Some(["PRECISION", "3"])),
        ("LIMIT.LOG", None),
    ] {
        let key = format!("sec:{cmd}");
        let mut args = vec![cmd, key.as_str(), "1000", "3s"];
        args.extend(extra.iter().flatten());
        align(&s, &mut c, 3000, 100);
        let mut admitted = Vec::new();
        for (i, n) in traffic.iter().enumerate() {
            if i > 0 {
                s.advance(1000);
            }
            admitted.push(burst(&mut c, *n, &args));
        }
        let seconds_3_to_5: usize = admitted[2..].iter().sum();
        if cmd == "LIMIT.FIXED" {
            assert_eq!(admitted, traffic, "{cmd}");
            assert_eq!(seconds_3_to_5, 1980, "{cmd}");
        } else {
            assert_eq!(admitted, [10, 10, 980, 10, 10], "{cmd}");
            assert_eq!(seconds_3_to_5, 1000, "{cmd}");
        }
    }
}

#[test]
fn seed_003_sliding_log_walk_through_with_two_rules() {
    // 1 per second and 5 per minute, as the article's Lua script; its output table:
    // pass, fail (1/s), pass, pass, pass, pass, fail (5/min), then pass a minute later.
    let s = TestServer::start();
    let mut c = s.conn();
    let all = [
        "LIMIT.ALL",
        "LOG",
        "rl:ip:s",
        "1",
        "1s",
        "LOG",
        "rl:ip:m",
        "5",
        "1m",
    ];
    let verdict = |c: &mut Connection| -> (i64, Vec<i64>, Vec<i64>) {
        let (v, s, m): (i64, Vec<i64>, Vec<i64>) = q(c, &all);
        (v, s, m)
    };
    let (v, sec, min) = verdict(&mut c);
    assert_eq!((v, sec[0], min[0]), (1, 1, 1));
    let (v, sec, min) = verdict(&mut c);
    assert_eq!((v, sec[0], min[0]), (0, 0, 1));
    assert!((900..=1000).contains(&sec[3]), "retry {}", sec[3]);
    // Nothing was consumed: the minute rule still has 4 left.
    assert_eq!(min[2], 4);
    for _ in 0..4 {
        s.advance(1000);
        let (v, _, _) = verdict(&mut c);
        assert_eq!(v, 1);
    }
    s.advance(1000);
    let (v, sec, min) = verdict(&mut c);
    assert_eq!((v, sec[0], min[0]), (0, 1, 0));
    // The five requests were at +0..+4 s; the first leaves the minute at +60 s.
    assert!((54_000..=55_000).contains(&min[3]), "retry {}", min[3]);
    // The per-second rule passed but was not consumed: it still admits alone.
    assert_eq!(line(&mut c, &["LIMIT.LOG", "rl:ip:s", "1", "1s"])[0], 1);
    s.advance(61_000);
    let (v, _, _) = verdict(&mut c);
    assert_eq!(v, 1);
}

#[test]
fn token_leaky_gcra_admit_reject_retry_and_reset() {
    let s = TestServer::start();
    let mut c = s.conn();
    for (cmd, key) in [
        ("LIMIT.TOKEN", "tb"),
        ("LIMIT.LEAKY", "lb"),
        ("LIMIT.GCRA", "gc"),
    ] {
        // 5 at once, then 1 per second.
        let args = [cmd, key, "5", "1", "1s"];
        let first = line(&mut c, &args);
        assert_eq!(first[..4], [1, 5, 4, -1], "{cmd}");
        assert!((900..=1000).contains(&first[4]), "{cmd} reset {first:?}");
        assert_eq!(burst(&mut c, 4, &args), 4, "{cmd}");
        let rejected = line(&mut c, &args);
        assert_eq!(rejected[..3], [0, 5, 0], "{cmd}");
        let retry = rejected[3] as u64;
        assert!((800..=1000).contains(&retry), "{cmd} retry {retry}");
        assert!((4000..=5000).contains(&rejected[4]), "{cmd} {rejected:?}");
        s.advance(retry);
        assert_eq!(line(&mut c, &args)[0], 1, "{cmd} after retry_after_ms");
        assert_eq!(line(&mut c, &args)[0], 0, "{cmd}");
        // Reset empties the limiter; a missing key resets to 0.
        assert_eq!(q::<i64>(&mut c, &["LIMIT.RESET", key]), 1);
        assert_eq!(q::<i64>(&mut c, &["LIMIT.RESET", key]), 0);
        assert_eq!(burst(&mut c, 6, &args), 5, "{cmd} after reset");
    }
    // A cost larger than the capacity can never succeed: retry -1.
    assert_eq!(
        line(&mut c, &["LIMIT.TOKEN", "tb2", "5", "1", "1s", "COST", "6"]),
        [0, 5, 5, -1, 0]
    );
}

#[test]
fn fixed_and_sliding_windows_through_a_client() {
    let s = TestServer::start();
    let mut c = s.conn();
    align(&s, &mut c, 10_000, 1_000);
    let fixed = ["LIMIT.FIXED", "fw", "3", "10s"];
    assert_eq!(burst(&mut c, 3, &fixed), 3);
    let r = line(&mut c, &fixed);
    assert_eq!(r[..3], [0, 3, 0]);
    assert!((8_500..=9_000).contains(&r[3]), "{r:?}");
    assert_eq!(r[3], r[4]);
    s.advance(r[3] as u64);
    assert_eq!(line(&mut c, &fixed)[..3], [1, 3, 2]);
    // COST n takes n units at once.
    let sliding = [
        "LIMIT.SLIDING",
        "sw",
        "10",
        "10s",
        "COST",
        "4",
        "PRECISION",
        "5",
    ];
    assert_eq!(line(&mut c, &sliding)[..3], [1, 10, 6]);
    assert_eq!(line(&mut c, &sliding)[..3], [1, 10, 2]);
    let r = line(&mut c, &sliding);
    assert_eq!(r[..3], [0, 10, 2]);
    // Buckets are 2 s wide: the first frees when its bucket leaves the window.
    assert!(r[3] > 0 && r[3] <= 10_000, "{r:?}");
    s.advance(r[3] as u64);
    assert_eq!(line(&mut c, &sliding)[0], 1);
}

#[test]
fn cost_zero_peeks_without_consuming_or_creating() {
    let s = TestServer::start();
    let mut c = s.conn();
    align(&s, &mut c, 60_000, 1_000);
    let peek = ["LIMIT.FIXED", "pk", "5", "1m", "COST", "0"];
    assert_eq!(line(&mut c, &peek), [1, 5, 5, -1, 0]);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "pk"]), 0);
    assert_eq!(burst(&mut c, 2, &["LIMIT.FIXED", "pk", "5", "1m"]), 2);
    for _ in 0..3 {
        assert_eq!(line(&mut c, &peek)[..3], [1, 5, 3]);
    }
    for cmd in ["LIMIT.TOKEN", "LIMIT.LEAKY", "LIMIT.GCRA"] {
        let key = format!("pk:{cmd}");
        let args = [cmd, key.as_str(), "3", "1", "1m", "COST", "0"];
        assert_eq!(line(&mut c, &args)[..3], [1, 3, 3], "{cmd}");
        assert_eq!(q::<i64>(&mut c, &["EXISTS", &key]), 0, "{cmd}");
    }
    // LIMIT.ALL with a global COST 0 peeks every rule and writes nothing.
    let (v, a, b): (i64, Vec<i64>, Vec<i64>) = q(
        &mut c,
        &[
            "LIMIT.ALL",
            "COST",
            "0",
            "FIXED",
            "pk",
            "5",
            "1m",
            "LOG",
            "pl",
            "2",
            "1m",
        ],
    );
    assert_eq!((v, a[2], b[2]), (1, 3, 2));
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "pl"]), 0);
}

#[test]
fn limiter_keys_are_ordinary_keys() {
    let s = TestServer::start();
    let mut c = s.conn();
    let r = line(&mut c, &["LIMIT.TOKEN", "user:1", "10", "10", "1m"]);
    assert_eq!(r[..3], [1, 10, 9]);
    assert_eq!(q::<String>(&mut c, &["TYPE", "user:1"]), "string");
    let pttl: i64 = q(&mut c, &["PTTL", "user:1"]);
    // The reset time (6 s) rounded up to a 256 ms step.
    assert!(pttl > 5_000 && pttl <= 6_256, "pttl {pttl}");
    assert_eq!(scan_all(&mut c, "user:*"), ["user:1"]);
    assert_eq!(q::<i64>(&mut c, &["DEL", "user:1"]), 1);
    assert_eq!(
        line(&mut c, &["LIMIT.TOKEN", "user:1", "10", "10", "1m"])[2],
        9
    );
    // Idle limiters expire once they are back to their initial state.
    s.advance(6_300);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "user:1"]), 0);
    // RENAME moves the state with it.
    align(&s, &mut c, 60_000, 1_000);
    line(&mut c, &["LIMIT.FIXED", "a", "2", "1m"]);
    assert_eq!(q::<String>(&mut c, &["RENAME", "a", "b"]), "OK");
    assert_eq!(
        line(&mut c, &["LIMIT.FIXED", "b", "2", "1m"])[..3],
        [1, 2, 0]
    );
}

#[test]
fn info_reports_the_algorithm_and_state() {
    let s = TestServer::start();
    let mut c = s.conn();
    assert_eq!(q::<Value>(&mut c, &["LIMIT.INFO", "none"]), Value::Nil);
    align(&s, &mut c, 60_000, 1_000);
    burst(&mut c, 3, &["LIMIT.FIXED", "f", "10", "1m"]);
    let info: Vec<(String, i64)> = {
        let flat: Vec<Value> = q(&mut c, &["LIMIT.INFO", "f"]);
        assert_eq!(flat[0], Value::BulkString(b"algorithm".to_vec()));
        assert_eq!(flat[1], Value::BulkString(b"fixed".to_vec()));
        flat[2..]
            .chunks(2)
            .map(|p| match (&p[0], &p[1]) {
                (Value::BulkString(k), Value::Int(v)) => {
                    (String::from_utf8(k.clone()).unwrap(), *v)
                }
                other => panic!("{other:?}"),
            })
            .collect()
    };
    let get = |name: &str| info.iter().find(|f| f.0 == name).map(|f| f.1);
    assert_eq!(get("count"), Some(3));
    assert_eq!(get("window_start_ms").map(|w| w % 60_000), Some(0));
    let ttl = get("ttl_ms").unwrap();
    // The window's end, rounded up to a 1024 ms step.
    assert!(ttl > 58_000 && ttl <= 60_024, "{ttl}");
    line(&mut c, &["LIMIT.ACQUIRE", "slots", "2", "10s", "job-1"]);
    let flat: Vec<Value> = q(&mut c, &["LIMIT.INFO", "slots"]);
    assert_eq!(flat[1], Value::BulkString(b"concurrency".to_vec()));
    assert_eq!(
        flat[2..4],
        [Value::BulkString(b"holders".to_vec()), Value::Int(1)]
    );
}

#[test]
fn wrongtype_for_other_values_and_other_algorithms() {
    let s = TestServer::start();
    let mut c = s.conn();
    const WT: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
    q::<()>(&mut c, &["RPUSH", "list", "x"]);
    q::<()>(&mut c, &["SET", "plain", "hello"]);
    q::<()>(&mut c, &["SET", "num", "42"]);
    align(&s, &mut c, 60_000, 1_000);
    line(&mut c, &["LIMIT.FIXED", "fx", "5", "1m"]);
    for key in ["list", "plain", "num"] {
        assert_eq!(err(&mut c, &["LIMIT.FIXED", key, "5", "1m"]), WT);
        assert_eq!(err(&mut c, &["LIMIT.INFO", key]), WT);
        assert_eq!(err(&mut c, &["LIMIT.RESET", key]), WT);
        assert_eq!(err(&mut c, &["CL.THROTTLE", key, "1", "1", "1"]), WT);
        assert_eq!(err(&mut c, &["LIMIT.RELEASE", key, "id"]), WT);
    }
    // A state of one algorithm is not another's.
    for args in [
        &["LIMIT.SLIDING", "fx", "5", "1m"][..],
        &["LIMIT.LOG", "fx", "5", "1m"],
        &["LIMIT.TOKEN", "fx", "5", "1", "1m"],
        &["LIMIT.LEAKY", "fx", "5", "1", "1m"],
        &["LIMIT.GCRA", "fx", "5", "1", "1m"],
        &["LIMIT.ACQUIRE", "fx", "5", "1m", "id"],
        &["CL.THROTTLE", "fx", "1", "1", "1"],
        &["INCREX", "fx"],
    ] {
        let e = err(&mut c, args);
        if args[0] == "INCREX" {
            assert_eq!(e, "ERR value is not an integer or out of range");
        } else {
            assert_eq!(e, WT, "{args:?}");
        }
    }
    // LIMIT.ALL fails as a whole and writes nothing.
    assert_eq!(
        err(
            &mut c,
            &[
                "LIMIT.ALL",
                "FIXED",
                "fresh",
                "5",
                "1m",
                "LOG",
                "list",
                "5",
                "1m"
            ]
        ),
        WT
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "fresh"]), 0);
    // The failed calls left the original value alone.
    assert_eq!(q::<String>(&mut c, &["GET", "plain"]), "hello");
    assert_eq!(line(&mut c, &["LIMIT.FIXED", "fx", "5", "1m"])[2], 3);
}

#[test]
fn limit_all_is_all_or_nothing() {
    let s = TestServer::start();
    let mut c = s.conn();
    align(&s, &mut c, 60_000, 1_000);
    let all = [
        "LIMIT.ALL",
        "FIXED",
        "u:s",
        "1",
        "1m",
        "SLIDING",
        "u:h",
        "5",
        "1h",
        "TOKEN",
        "api",
        "100",
        "100",
        "1h",
    ];
    let (v, a, b, t): (i64, Vec<i64>, Vec<i64>, Vec<i64>) = q(&mut c, &all);
    assert_eq!(
        (v, a[..3].to_vec(), b[..3].to_vec(), t[..3].to_vec()),
        (1, vec![1, 1, 0], vec![1, 5, 4], vec![1, 100, 99])
    );
    // The first rule rejects: the others are reported unconsumed and stay so.
    for _ in 0..3 {
        let (v, a, b, t): (i64, Vec<i64>, Vec<i64>, Vec<i64>) = q(&mut c, &all);
        assert_eq!(v, 0);
        assert_eq!(a[..3], [0, 1, 0]);
        assert!(a[3] > 0);
        assert_eq!(b[..4], [1, 5, 4, -1]);
        assert_eq!(t[..4], [1, 100, 99, -1]);
    }
    let sliding_info: Vec<Value> = q(&mut c, &["LIMIT.INFO", "u:h"]);
    assert!(sliding_info
        .windows(2)
        .any(|w| w[0] == Value::BulkString(b"count".to_vec()) && w[1] == Value::Int(1)));
    // Per-rule COST overrides the global one.
    let (v, x, y): (i64, Vec<i64>, Vec<i64>) = q(
        &mut c,
        &[
            "LIMIT.ALL",
            "COST",
            "2",
            "GCRA",
            "g",
            "10",
            "1",
            "1s",
            "LEAKY",
            "l",
            "10",
            "1",
            "1s",
            "COST",
            "5",
        ],
    );
    assert_eq!((v, x[2], y[2]), (1, 8, 5));
    // Errors: duplicate keys, unknown algorithm, no rules, bad rule.
    assert_eq!(
        err(
            &mut c,
            &["LIMIT.ALL", "FIXED", "k", "1", "1s", "LOG", "k", "1", "1s"]
        ),
        "ERR LIMIT.ALL rules must use distinct keys"
    );
    assert_eq!(
        err(&mut c, &["LIMIT.ALL", "BOGUS", "k", "1", "1s"]),
        "ERR unknown limiter algorithm 'BOGUS'"
    );
    assert_eq!(
        err(&mut c, &["LIMIT.ALL", "COST", "1", "FIXED", "k"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(
            &mut c,
            &["LIMIT.ALL", "FIXED", "k", "1", "1s", "PRECISION", "2"]
        ),
        "ERR syntax error"
    );
    assert_eq!(
        err(&mut c, &["LIMIT.ALL", "FIXED", "k"]),
        "ERR wrong number of arguments for 'limit.all' command"
    );
}

#[test]
fn concurrency_slots_acquire_release_and_expire() {
    let s = TestServer::start();
    let mut c = s.conn();
    let acquire =
        |c: &mut Connection, id: &str| line(c, &["LIMIT.ACQUIRE", "pool", "2", "10s", id]);
    assert_eq!(acquire(&mut c, "a")[..3], [1, 2, 1]);
    assert_eq!(acquire(&mut c, "b")[..3], [1, 2, 0]);
    let r = acquire(&mut c, "c");
    assert_eq!(r[..3], [0, 2, 0]);
    assert!((9_000..=10_000).contains(&r[3]), "{r:?}");
    // Renewing a held slot is allowed.
    assert_eq!(acquire(&mut c, "a")[0], 1);
    assert_eq!(q::<i64>(&mut c, &["LIMIT.RELEASE", "pool", "a"]), 1);
    assert_eq!(q::<i64>(&mut c, &["LIMIT.RELEASE", "pool", "a"]), 0);
    assert_eq!(acquire(&mut c, "c")[0], 1);
    // Leases end on their own.
    s.advance(10_001);
    assert_eq!(acquire(&mut c, "d")[..3], [1, 2, 1]);
    // Releasing the last holder deletes the key.
    assert_eq!(q::<i64>(&mut c, &["LIMIT.RELEASE", "pool", "d"]), 1);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "pool"]), 0);
    assert_eq!(q::<i64>(&mut c, &["LIMIT.RELEASE", "missing", "x"]), 0);
}

#[test]
fn cl_throttle_matches_redis_cell() {
    let s = TestServer::start();
    let mut c = s.conn();
    // redis-cell's README: 15 max burst, 30 per 60 s; each call adds 2 s.
    assert_eq!(
        line(&mut c, &["CL.THROTTLE", "user123", "15", "30", "60", "1"]),
        [0, 16, 15, -1, 2]
    );
    for k in 2..=16i64 {
        assert_eq!(
            line(&mut c, &["CL.THROTTLE", "user123", "15", "30", "60"]),
            [0, 16, 16 - k, -1, 2 * k]
        );
    }
    assert_eq!(
        line(&mut c, &["CL.THROTTLE", "user123", "15", "30", "60"]),
        [1, 16, 0, 2, 32]
    );
    // Quantity 0 peeks.
    assert_eq!(
        line(&mut c, &["CL.THROTTLE", "user123", "15", "30", "60", "0"]),
        [0, 16, 0, -1, 32]
    );
    s.advance(2_000);
    assert_eq!(
        line(&mut c, &["CL.THROTTLE", "user123", "15", "30", "60"])[..3],
        [0, 16, 0]
    );
    assert_eq!(q::<String>(&mut c, &["TYPE", "user123"]), "string");
    let pttl: i64 = q(&mut c, &["PTTL", "user123"]);
    assert!(pttl > 31_000 && pttl <= 33_024, "{pttl}");
    // A quantity that can never fit.
    assert_eq!(
        line(&mut c, &["CL.THROTTLE", "other", "15", "30", "60", "17"]),
        [1, 16, 16, -1, 0]
    );
    // RESP3 keeps redis-cell's array.
    let mut c3 = s.conn3();
    let v: Value = q(&mut c3, &["CL.THROTTLE", "r3", "1", "1", "1"]);
    assert_eq!(
        v,
        Value::Array(vec![
            Value::Int(0),
            Value::Int(2),
            Value::Int(1),
            Value::Int(-1),
            Value::Int(1)
        ])
    );
}

#[test]
fn cl_throttle_bad_arguments_are_errors_not_crashes() {
    let s = TestServer::start();
    let mut c = s.conn();
    let usage =
        "Cell error: Store error: Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]";
    for args in [
        &["CL.THROTTLE"][..],
        &["CL.THROTTLE", "k"],
        &["CL.THROTTLE", "k", "1", "2"],
        &["CL.THROTTLE", "k", "1", "2", "3", "4", "5"],
    ] {
        assert_eq!(err(&mut c, args), usage, "{args:?}");
    }
    let cases: &[(&[&str], &str)] = &[
        (
            &["k", "abc", "30", "60"],
            "Cell error: Store error: Couldn't parse as integer: abc",
        ),
        (
            &["k", "15", "1.5", "60"],
            "Cell error: Store error: Couldn't parse as integer: 1.5",
        ),
        (
            &["k", "15", "30", "60", "x"],
            "Cell error: Store error: Couldn't parse as integer: x",
        ),
        (
            &["k", "99999999999999999999", "30", "60"],
            "Cell error: Store error: Couldn't parse as integer: 99999999999999999999",
        ),
        (
            &["k", "15", "0", "60"],
            "Cell error: Store error: Zero rates are not supported",
        ),
        (
            &["k", "15", "30", "0"],
            "Cell error: Store error: Zero rates are not supported",
        ),
        (
            &["k", "-1", "30", "60"],
            "ERR value is not an integer or out of range",
        ),
        (
            &["k", "15", "-30", "60"],
            "ERR value is not an integer or out of range",
        ),
        (
            &["k", "15", "30", "-60"],
            "ERR value is not an integer or out of range",
        ),
        (
            &["k", "15", "30", "60", "-1"],
            "ERR value is not an integer or out of range",
        ),
        (
            &["k", "9223372036854775807", "30", "60"],
            "ERR value is not an integer or out of range",
        ),
        (
            &["k", "15", "30", "9300000000"],
            "ERR value is not an integer or out of range",
        ),
    ];
    for (rest, expected) in cases {
        let mut args = vec!["CL.THROTTLE"];
        args.extend_from_slice(rest);
        assert_eq!(&err(&mut c, &args), expected, "{args:?}");
    }
    // Extreme but valid numbers answer normally.
    let r = line(
        &mut c,
        &[
            "CL.THROTTLE",
            "k",
            "0",
            "1",
            "9223372036",
            "9223372036854775807",
        ],
    );
    assert_eq!(r[0], 1);
    let r = line(&mut c, &["CL.THROTTLE", "k2", "1000000", "1000000", "1"]);
    assert_eq!(r[..2], [0, 1_000_001]);
    assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
}

#[test]
fn limit_argument_errors() {
    let s = TestServer::start();
    let mut c = s.conn();
    let cases: &[(&[&str], &str)] = &[
        (&["LIMIT.FIXED", "k", "0", "1s"], "ERR limit must be a positive integer"),
        (&["LIMIT.FIXED", "k", "-5", "1s"], "ERR limit must be a positive integer"),
        (&["LIMIT.FIXED", "k", "x", "1s"], "ERR value is not an integer or out of range"),
        (&["LIMIT.FIXED", "k", "99999999999999999999", "1s"], "ERR value is not an integer or out of range"),
        (&["LIMIT.FIXED", "k", "5", "1.5s"], "ERR invalid duration, expected a positive integer with an optional unit ms, s, m, h or d"),
        (&["LIMIT.FIXED", "k", "5", "0"], "ERR duration must be positive"),
        (&["LIMIT.FIXED", "k", "5", "99999999999999999999d"], "ERR duration is out of range"),
        (&["LIMIT.FIXED", "k", "5", "1s", "COST", "-1"], "ERR cost must be a non-negative integer"),
        (&["LIMIT.FIXED", "k", "5", "1s", "COST", "x"], "ERR value is not an integer or out of range"),
        (&["LIMIT.FIXED", "k", "5", "1s", "COST"], "ERR syntax error"),
        (&["LIMIT.FIXED", "k", "5", "1s", "COST", "1", "COST", "1"], "ERR syntax error"),
        (&["LIMIT.FIXED", "k", "5", "1s", "PRECISION", "2"], "ERR syntax error"),
        (&["LIMIT.SLIDING", "k", "5", "1s", "PRECISION", "0"], "ERR precision must be between 1 and 3600 buckets and at most the window in milliseconds"),
        (&["LIMIT.SLIDING", "k", "5", "5ms", "PRECISION", "6"], "ERR precision must be between 1 and 3600 buckets and at most the window in milliseconds"),
        (&["LIMIT.LOG", "k", "100001", "1s"], "ERR limit is too large for the sliding log (at most 100000)"),
        (&["LIMIT.TOKEN", "k", "0", "1", "1s"], "ERR capacity must be a positive integer"),
        (&["LIMIT.LEAKY", "k", "1", "0", "1s"], "ERR rate must be a positive integer"),
        (&["LIMIT.GCRA", "k", "1", "1", "0ms"], "ERR duration must be positive"),
        (&["LIMIT.ACQUIRE", "k", "0", "1s", "id"], "ERR limit must be a positive integer"),
        (&["LIMIT.FIXED", "k", "5"], "ERR wrong number of arguments for 'limit.fixed' command"),
        (&["LIMIT.TOKEN", "k", "5", "1"], "ERR wrong number of arguments for 'limit.token' command"),
        (&["LIMIT.ACQUIRE", "k", "5", "1s"], "ERR wrong number of arguments for 'limit.acquire' command"),
        (&["LIMIT.INFO"], "ERR wrong number of arguments for 'limit.info' command"),
    ];
    for (args, expected) in cases {
        assert_eq!(&err(&mut c, args), expected, "{args:?}");
    }
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 0);
    // Extreme numbers never overflow.
    let max = "9223372036854775807";
    for args in [
        &[
            "LIMIT.TOKEN",
            "t",
            max,
            max,
            "18446744073709551615",
            "COST",
            max,
        ][..],
        &[
            "LIMIT.LEAKY",
            "l",
            max,
            max,
            "18446744073709551615",
            "COST",
            max,
        ],
        &[
            "LIMIT.GCRA",
            "g",
            max,
            max,
            "18446744073709551615",
            "COST",
            max,
        ],
        &["LIMIT.FIXED", "f", max, "18446744073709551615", "COST", max],
        &[
            "LIMIT.SLIDING",
            "s",
            max,
            "18446744073709551615",
            "COST",
            max,
            "PRECISION",
            "3600",
        ],
        &[
            "LIMIT.LOG",
            "o",
            "100000",
            "18446744073709551615",
            "COST",
            max,
        ],
        &["LIMIT.ACQUIRE", "a", max, "18446744073709551615", "id"],
    ] {
        for _ in 0..2 {
            let r = line(&mut c, args);
            assert_eq!(r.len(), 5, "{args:?}");
        }
    }
    assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
}

#[test]
fn resp3_replies_are_maps() {
    let s = TestServer::start();
    let mut c = s.conn3();
    let field = |m: &Value, name: &str| -> Value {
        match m {
            Value::Map(pairs) => pairs
                .iter()
                .find(|(k, _)| *k == Value::BulkString(name.as_bytes().to_vec()))
                .map(|(_, v)| v.clone())
                .unwrap_or_else(|| panic!("no {name} in {m:?}")),
            other => panic!("not a map: {other:?}"),
        }
    };
    let m: Value = q(&mut c, &["LIMIT.GCRA", "g", "1", "1", "1s"]);
    let Value::Map(pairs) = &m else {
        panic!("{m:?}")
    };
    let names: Vec<Value> = pairs.iter().map(|p| p.0.clone()).collect();
    assert_eq!(
        names,
        [
            "allowed",
            "limit",
            "remaining",
            "retry_after_ms",
            "reset_after_ms"
        ]
        .map(|n| Value::BulkString(n.as_bytes().to_vec()))
    );
    assert_eq!(field(&m, "allowed"), Value::Boolean(true));
    assert_eq!(field(&m, "retry_after_ms"), Value::Int(-1));
    let m: Value = q(&mut c, &["LIMIT.GCRA", "g", "1", "1", "1s"]);
    assert_eq!(field(&m, "allowed"), Value::Boolean(false));
    assert_eq!(field(&m, "remaining"), Value::Int(0));
    let all: Value = q(
        &mut c,
        &[
            "LIMIT.ALL",
            "GCRA",
            "g",
            "1",
            "1",
            "1s",
            "FIXED",
            "f",
            "1",
            "1s",
        ],
    );
    let Value::Array(items) = &all else {
        panic!("{all:?}")
    };
    assert_eq!(items[0], Value::Boolean(false));
    assert_eq!(field(&items[1], "allowed"), Value::Boolean(false));
    assert_eq!(field(&items[2], "allowed"), Value::Boolean(true));
    let info: Value = q(&mut c, &["LIMIT.INFO", "g"]);
    assert_eq!(
        field(&info, "algorithm"),
        Value::BulkString(b"gcra".to_vec())
    );
}

#[test]
fn increx_as_documented() {
    let s = TestServer::start();
    let mut c = s.conn();
    let pair = |c: &mut Connection, args: &[&str]| -> (i64, i64) { q(c, args) };
    assert_eq!(pair(&mut c, &["INCREX", "mykey"]), (1, 1));
    assert_eq!(pair(&mut c, &["INCREX", "mykey"]), (2, 1));
    q::<()>(&mut c, &["SET", "mykey", "100"]);
    assert_eq!(pair(&mut c, &["INCREX", "mykey", "BYINT", "5"]), (105, 5));
    assert_eq!(
        pair(&mut c, &["INCREX", "mykey", "BYINT", "-10"]),
        (95, -10)
    );
    q::<()>(&mut c, &["SET", "f", "1.5"]);
    let v: Vec<String> = q(&mut c, &["INCREX", "f", "BYFLOAT", "0.25"]);
    assert_eq!(v, ["1.75", "0.25"]);
    q::<()>(&mut c, &["SET", "f", "10"]);
    let v: Vec<String> = q(
        &mut c,
        &[
            "INCREX", "f", "BYFLOAT", "100", "UBOUND", "42.5", "SATURATE",
        ],
    );
    assert_eq!(v, ["42.5", "32.5"]);
    let v: Vec<String> = q(&mut c, &["INCREX", "f", "BYFLOAT", "1", "UBOUND", "42.5"]);
    assert_eq!(v, ["42.5", "0"]);
    // EX on every increment; ENX only when the key has no TTL.
    q::<()>(&mut c, &["DEL", "mykey"]);
    pair(&mut c, &["INCREX", "mykey", "BYINT", "1", "EX", "100"]);
    assert_eq!(q::<i64>(&mut c, &["TTL", "mykey"]), 100);
    q::<()>(&mut c, &["SET", "mykey", "10"]);
    assert_eq!(
        pair(
            &mut c,
            &["INCREX", "mykey", "BYINT", "1", "EX", "100", "ENX"]
        ),
        (11, 1)
    );
    assert_eq!(q::<i64>(&mut c, &["TTL", "mykey"]), 100);
    q::<()>(&mut c, &["SET", "mykey", "10", "EX", "500"]);
    assert_eq!(
        pair(
            &mut c,
            &["INCREX", "mykey", "BYINT", "1", "EX", "10", "ENX"]
        ),
        (11, 1)
    );
    assert_eq!(q::<i64>(&mut c, &["TTL", "mykey"]), 500);
    // Without an expiration option the TTL is kept; PERSIST removes it.
    pair(&mut c, &["INCREX", "mykey"]);
    assert_eq!(q::<i64>(&mut c, &["TTL", "mykey"]), 500);
    assert_eq!(
        pair(&mut c, &["INCREX", "mykey", "BYINT", "1", "PERSIST"]),
        (13, 1)
    );
    assert_eq!(q::<i64>(&mut c, &["TTL", "mykey"]), -1);
    // Out of bounds: skipped by default, capped with SATURATE.
    q::<()>(&mut c, &["SET", "mykey", "99"]);
    assert_eq!(
        pair(
            &mut c,
            &["INCREX", "mykey", "BYINT", "5", "UBOUND", "100", "EX", "10"]
        ),
        (99, 0)
    );
    assert_eq!(q::<i64>(&mut c, &["TTL", "mykey"]), -1);
    assert_eq!(
        pair(
            &mut c,
            &["INCREX", "mykey", "BYINT", "5", "UBOUND", "100", "SATURATE"]
        ),
        (100, 1)
    );
    assert_eq!(
        pair(
            &mut c,
            &["INCREX", "mykey", "BYINT", "-500", "LBOUND", "0", "SATURATE"]
        ),
        (0, -100)
    );
    // A skipped increment does not create the key.
    assert_eq!(
        pair(&mut c, &["INCREX", "absent", "BYINT", "15", "UBOUND", "10"]),
        (0, 0)
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "absent"]), 0);
    // i64 limits: skipped, or saturated to the type's limit.
    q::<()>(&mut c, &["SET", "big", "9223372036854775800"]);
    assert_eq!(
        pair(&mut c, &["INCREX", "big", "BYINT", "9223372036854775800"]),
        (9223372036854775800, 0)
    );
    assert_eq!(
        pair(
            &mut c,
            &["INCREX", "big", "BYINT", "9223372036854775800", "SATURATE"]
        ),
        (i64::MAX, 7)
    );
    assert_eq!(
        err(
            &mut c,
            &[
                "INCREX",
                "big",
                "BYINT",
                "1",
                "SATURATE",
                "UBOUND",
                "-9223372036854775808"
            ]
        ),
        "ERR applied increment would overflow"
    );
    // Absolute deadlines in the past delete the key, unless ENX keeps an existing TTL.
    q::<()>(&mut c, &["SET", "gone", "10"]);
    pair(&mut c, &["INCREX", "gone", "BYINT", "1", "PXAT", "1"]);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "gone"]), 0);
    q::<()>(&mut c, &["SET", "kept", "10", "EX", "500"]);
    assert_eq!(
        pair(
            &mut c,
            &["INCREX", "kept", "BYINT", "1", "EXAT", "1", "ENX"]
        ),
        (11, 1)
    );
    assert_eq!(q::<i64>(&mut c, &["TTL", "kept"]), 500);
    // RESP3: integers stay integers, floats are doubles.
    let mut c3 = s.conn3();
    let v: Value = q(&mut c3, &["INCREX", "d", "BYFLOAT", "2.5"]);
    assert_eq!(
        v,
        Value::Array(vec![Value::Double(2.5), Value::Double(2.5)])
    );
    let v: Value = q(&mut c3, &["INCREX", "i"]);
    assert_eq!(v, Value::Array(vec![Value::Int(1), Value::Int(1)]));
}

#[test]
fn increx_is_a_one_command_fixed_window() {
    // The documented pattern: BYINT 1 UBOUND cap EX window ENX.
    let s = TestServer::start();
    let mut c = s.conn();
    let hit = |c: &mut Connection| -> (i64, i64) {
        q(
            c,
            &[
                "INCREX",
                "ratelimit:7",
                "BYINT",
                "1",
                "UBOUND",
                "3",
                "EX",
                "60",
                "ENX",
            ],
        )
    };
    assert_eq!(hit(&mut c), (1, 1));
    s.advance(20_000);
    assert_eq!(hit(&mut c), (2, 1));
    assert_eq!(hit(&mut c), (3, 1));
    assert_eq!(hit(&mut c), (3, 0));
    // ENX kept the window from the first hit.
    let ttl: i64 = q(&mut c, &["TTL", "ratelimit:7"]);
    assert!((39..=40).contains(&ttl), "{ttl}");
    s.advance(40_001);
    assert_eq!(hit(&mut c), (1, 1));
}

#[test]
fn increx_errors() {
    let s = TestServer::start();
    let mut c = s.conn();
    q::<()>(&mut c, &["RPUSH", "list", "a"]);
    q::<()>(&mut c, &["SET", "word", "hello"]);
    q::<()>(&mut c, &["SET", "inf", "inf"]);
    let cases: &[(&[&str], &str)] = &[
        (
            &["INCREX"],
            "ERR wrong number of arguments for 'increx' command",
        ),
        (&["INCREX", "k", "FOO"], "ERR syntax error"),
        (&["INCREX", "k", "BYINT"], "ERR syntax error"),
        (
            &["INCREX", "k", "BYINT", "1", "BYFLOAT", "1.5"],
            "ERR syntax error",
        ),
        (
            &["INCREX", "k", "BYINT", "1", "BYINT", "2"],
            "ERR syntax error",
        ),
        (
            &["INCREX", "k", "LBOUND", "0", "LBOUND", "1"],
            "ERR syntax error",
        ),
        (&["INCREX", "k", "SATURATE", "SATURATE"], "ERR syntax error"),
        (&["INCREX", "k", "SAT", "LBOUND", "0"], "ERR syntax error"),
        (
            &["INCREX", "k", "EX", "10", "PX", "5000"],
            "ERR syntax error",
        ),
        (&["INCREX", "k", "EX", "10", "PERSIST"], "ERR syntax error"),
        (&["INCREX", "k", "PERSIST", "EX", "10"], "ERR syntax error"),
        (&["INCREX", "k", "PERSIST", "ENX"], "ERR syntax error"),
        (&["INCREX", "k", "ENX", "PERSIST"], "ERR syntax error"),
        (
            &["INCREX", "k", "ENX", "ENX", "EX", "10"],
            "ERR syntax error",
        ),
        (
            &["INCREX", "k", "BYINT", "1", "ENX"],
            "ERR ENX flag requires an expiration",
        ),
        (
            &["INCREX", "k", "BYINT", "abc"],
            "ERR Increment is not an integer or out of range",
        ),
        (
            &["INCREX", "k", "BYINT", "1.5"],
            "ERR Increment is not an integer or out of range",
        ),
        (
            &["INCREX", "k", "BYFLOAT", "abc"],
            "ERR Increment is not a valid float",
        ),
        (
            &["INCREX", "k", "BYFLOAT", "nan"],
            "ERR Increment is not a valid float",
        ),
        (
            &["INCREX", "k", "BYFLOAT", "1e99999"],
            "ERR Increment is not a valid float",
        ),
        (
            &["INCREX", "k", "BYFLOAT", "+inf"],
            "ERR BYFLOAT increment cannot be Infinity",
        ),
        (
            &["INCREX", "k", "BYINT", "1", "LBOUND", "10", "UBOUND", "5"],
            "ERR LBOUND can't be greater than UBOUND",
        ),
        (
            &[
                "INCREX", "k", "BYFLOAT", "0.5", "LBOUND", "10.5", "UBOUND", "1.5",
            ],
            "ERR LBOUND can't be greater than UBOUND",
        ),
        (
            &["INCREX", "k", "UBOUND", "inf"],
            "ERR UBOUND is not an integer or out of range",
        ),
        (
            &["INCREX", "k", "EX", "0"],
            "ERR invalid expire time in 'increx' command",
        ),
        (
            &["INCREX", "k", "PX", "-1"],
            "ERR invalid expire time in 'increx' command",
        ),
        (
            &["INCREX", "k", "EX", "9223372036854775807"],
            "ERR invalid expire time in 'increx' command",
        ),
        (
            &["INCREX", "k", "EX", "x"],
            "ERR value is not an integer or out of range",
        ),
        (
            &["INCREX", "list"],
            "WRONGTYPE Operation against a key holding the wrong kind of value",
        ),
        (
            &["INCREX", "list", "BYFLOAT", "1.5"],
            "WRONGTYPE Operation against a key holding the wrong kind of value",
        ),
        (
            &["INCREX", "word", "BYINT", "1"],
            "ERR value is not an integer or out of range",
        ),
        (
            &["INCREX", "word", "BYFLOAT", "1.5"],
            "ERR value is not a valid float",
        ),
        (
            &["INCREX", "inf", "BYFLOAT", "1"],
            "ERR value cannot be Infinity",
        ),
    ];
    for (args, expected) in cases {
        assert_eq!(&err(&mut c, args), expected, "{args:?}");
    }
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "k"]), 0);
    // Options in any order.
    let r: (i64, i64) = q(
        &mut c,
        &[
            "INCREX", "k", "LBOUND", "0", "EX", "100", "BYINT", "100", "UBOUND", "10", "SATURATE",
        ],
    );
    assert_eq!(r, (10, 10));
    assert_eq!(q::<i64>(&mut c, &["TTL", "k"]), 100);
}

#[test]
fn limiter_replies_reach_lua_scripts_as_tables() {
    let s = TestServer::start();
    let mut c = s.conn();
    // The whole reply, as a Lua array converted back: redis-cell's first example.
    let r: Vec<i64> = q(
        &mut c,
        &[
            "EVAL",
            "return redis.call('CL.THROTTLE', KEYS[1], 15, 30, 60)",
            "1",
            "cell",
        ],
    );
    assert_eq!(r, vec![0, 16, 15, -1, 2]);
    // Elements are Lua numbers, indexed from 1, five of them.
    let script = "local r = redis.call('LIMIT.TOKEN', KEYS[1], 10, 1, '1s', 'COST', 4) \
                  return {#r, r[1], r[2], r[3], r[4], type(r[5])}";
    let r: Vec<Value> = q(&mut c, &["EVAL", script, "1", "tb"]);
    assert_eq!(
        r,
        vec![
            Value::Int(5),
            Value::Int(1),
            Value::Int(10),
            Value::Int(6),
            Value::Int(-1),
            Value::BulkString(b"number".to_vec())
        ]
    );
    // Under RESP3 inside the script the decision is a map.
    let script = "redis.setresp(3) local r = redis.call('LIMIT.TOKEN', KEYS[1], 10, 1, '1s') \
                  return r.map.remaining";
    let left: i64 = q(&mut c, &["EVAL", script, "1", "tb"]);
    assert_eq!(left, 5);
}

/// Limiter commands (and INCR/GET) borrow their arguments from the parsed request when it
/// has at most 16 arguments and 64 KiB; longer requests, MULTI and scripts reach the same
/// handlers through an argument list. Both routes must decide identically.
#[test]
fn borrowed_and_listed_arguments_decide_alike() {
    let s = TestServer::start();
    let mut c = s.conn();
    // Four rules make 19 arguments: an argument list, not a frame.
    let rules = [
        "LIMIT.ALL",
        "FIXED",
        "a",
        "2",
        "1m",
        "TOKEN",
        "b",
        "5",
        "1",
        "1s",
        "SLIDING",
        "c",
        "9",
        "1m",
        "GCRA",
        "d",
        "9",
        "1",
        "1s",
    ];
    let long: Vec<Value> = q(&mut c, &rules);
    assert_eq!(long.len(), 5);
    assert_eq!(long[0], Value::Int(1));
    // The first two rules alone (10 arguments) on the same keys: the same state, a frame.
    let short: Vec<Value> = q(&mut c, &rules[..10]);
    assert_eq!(short[0], Value::Int(1));
    // The fixed window of 2 is now spent, whichever route asks.
    let long: Vec<Value> = q(&mut c, &rules);
    assert_eq!(long[0], Value::Int(0));
    let fixed = line(&mut c, &["LIMIT.FIXED", "a", "2", "1m"]);
    assert_eq!(fixed[..3], [0, 2, 0]);
    // In MULTI (an argument list) and in a script (one too).
    let _: () = q(&mut c, &["MULTI"]);
    let _: () = q(&mut c, &["LIMIT.FIXED", "a", "2", "1m"]);
    let _: () = q(&mut c, &["INCR", "n"]);
    let tx: Vec<Value> = q(&mut c, &["EXEC"]);
    assert_eq!(tx[1], Value::Int(1));
    assert!(matches!(&tx[0], Value::Array(v) if v[0] == Value::Int(0)));
    let by_script: Vec<i64> = q(
        &mut c,
        &[
            "EVAL",
            "return redis.call('LIMIT.FIXED', KEYS[1], 2, '1m')",
            "1",
            "a",
        ],
    );
    assert_eq!(by_script[..3], [0, 2, 0]);
    // A request longer than 64 KiB is a list too; a short one for the same key a frame.
    let big = "7".repeat(70_000);
    let e = err(&mut c, &["INCRBY", "n", &big]);
    assert_eq!(e, "ERR value is not an integer or out of range");
    let _: () = q(&mut c, &["SET", "v", &big]);
    let got: String = q(&mut c, &["GET", "v"]);
    assert_eq!(got, big);
    let n: i64 = q(&mut c, &["INCRBY", "n", "41"]);
    assert_eq!(n, 42);
}
