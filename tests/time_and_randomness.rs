//! Microsecond time and uniform, deterministic randomness, through real clients.
//!
//! `TIME` answers real microseconds, and each command of a pipelined batch runs a
//! microsecond after the one before, so go-redis/redis_rate's GCRA script (which keeps its
//! state in seconds with microseconds) decides as on redis-server, compared side by side.
//! SRANDMEMBER, HRANDFIELD, ZRANDMEMBER, SPOP and RANDOMKEY pass Redis's chi-square
//! distribution checks (unit/type/set and unit/type/hash: below 40 for 10 members).
mod common;
mod redis_support;

use std::collections::HashMap;

use common::{q, TestServer};
use redis_support::RedisServer;

const ALLOW_AT_MOST: &str = include_str!("fixtures/redis_rate_allow_at_most.lua");

/// Four pipelined `allowAtMost` calls (cost 3, burst 10, 10 per second) on a fresh key: the
/// `allowed` field of each.
fn allow_at_most_pipelined(c: &mut redis::Connection, key: &str) -> Vec<i64> {
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(ALLOW_AT_MOST)
        .query(c)
        .unwrap();
    let mut p = redis::pipe();
    for _ in 0..4 {
        p.cmd("EVALSHA")
            .arg(&sha)
            .arg(1)
            .arg(key)
            .arg(10)
            .arg(10)
            .arg(1)
            .arg(3);
    }
    let out: Vec<(i64, i64, String, String)> = p.query(c).unwrap();
    out.into_iter().map(|(allowed, ..)| allowed).collect()
}

#[test]
fn redis_rate_allow_at_most_decides_as_on_redis() {
    let redis = RedisServer::start();
    let tollgate = TestServer::start();
    let (mut r, mut t) = (redis.conn(), tollgate.conn());
    for trial in 0..20 {
        let key = format!("rate:{trial}");
        let on_redis = allow_at_most_pipelined(&mut r, &key);
        assert_eq!(on_redis, [3, 3, 3, 1], "redis-server itself");
        assert_eq!(
            allow_at_most_pipelined(&mut t, &key),
            on_redis,
            "trial {trial}"
        );
    }
}

#[test]
fn time_has_microseconds_and_pipelined_commands_see_it_pass() {
    let s = TestServer::start();
    let mut c = s.conn();
    let mut p = redis::pipe();
    for _ in 0..50 {
        p.cmd("TIME");
    }
    p.cmd("EVAL").arg("return redis.call('TIME')").arg(0);
    let times: Vec<(u64, u64)> = p.query(&mut c).unwrap();
    let micros: Vec<u64> = times.iter().map(|(s, us)| s * 1_000_000 + us).collect();
    assert!(times.iter().all(|(_, us)| *us < 1_000_000));
    assert!(
        micros.windows(2).all(|w| w[1] > w[0]),
        "each command of a pipeline runs later than the one before: {micros:?}"
    );
    assert!(
        times.iter().any(|(_, us)| us % 1000 != 0),
        "microseconds are not whole milliseconds: {times:?}"
    );
    // The next batch comes after all of them.
    let (secs, us): (u64, u64) = q(&mut c, &["TIME"]);
    assert!(secs * 1_000_000 + us > *micros.last().unwrap());
}

/// Redis's `chi_square_value` (tests/support/util.tcl): how far the counts of `draws` are
/// from uniform over the distinct values drawn.
fn chi_square(draws: &[String]) -> f64 {
    let mut counts: HashMap<&str, f64> = HashMap::new();
    for d in draws {
        *counts.entry(d).or_default() += 1.0;
    }
    let expected = (draws.len() / counts.len()) as f64;
    counts
        .values()
        .map(|n| (n - expected).powi(2) / expected)
        .sum()
}

/// Redis's SRANDMEMBER / HRANDFIELD histogram checks for one random-read command: a negative
/// count, then positive counts 8 and 2 repeated up to 1000 draws, over 10 members.
fn check_distribution(c: &mut redis::Connection, cmd: &str, key: &str) {
    let draws: Vec<String> = q(c, &[cmd, key, "-1000"]);
    assert_eq!(draws.len(), 1000);
    assert!(
        chi_square(&draws) < 40.0,
        "{cmd} -1000: {}",
        chi_square(&draws)
    );
    for size in [8, 2] {
        let mut all = Vec::new();
        for _ in 0..1000 / size {
            let picked: Vec<String> = q(c, &[cmd, key, &size.to_string()]);
            assert_eq!(picked.len(), size);
            all.extend(picked);
        }
        assert!(
            chi_square(&all) < 40.0,
            "{cmd} {size}: {}",
            chi_square(&all)
        );
    }
    // Pipelined calls (one batch) draw independently too.
    let mut p = redis::pipe();
    for _ in 0..500 {
        p.cmd(cmd).arg(key).arg(2);
    }
    let batched: Vec<Vec<String>> = p.query(c).unwrap();
    let all: Vec<String> = batched.into_iter().flatten().collect();
    assert!(
        chi_square(&all) < 40.0,
        "{cmd} pipelined: {}",
        chi_square(&all)
    );
}

#[test]
fn random_reads_are_uniform() {
    let s = TestServer::start();
    let mut c = s.conn();
    let members: Vec<String> = (0..10).map(|i| format!("m{i}")).collect();
    for m in &members {
        let _: i64 = q(&mut c, &["SADD", "s", m]);
        let _: i64 = q(&mut c, &["HSET", "h", m, "v"]);
        let _: i64 = q(&mut c, &["ZADD", "z", "1", m]);
    }
    check_distribution(&mut c, "SRANDMEMBER", "s");
    check_distribution(&mut c, "HRANDFIELD", "h");
    check_distribution(&mut c, "ZRANDMEMBER", "z");

    // SPOP of one member, put back each time.
    let mut popped = Vec::new();
    for _ in 0..1000 {
        let m: String = q(&mut c, &["SPOP", "s"]);
        let _: i64 = q(&mut c, &["SADD", "s", &m]);
        popped.push(m);
    }
    assert!(chi_square(&popped) < 40.0, "SPOP: {}", chi_square(&popped));

    // RANDOMKEY over ten keys.
    let _: () = q(&mut c, &["FLUSHALL"]);
    for m in &members {
        let _: () = q(&mut c, &["SET", m, "1"]);
    }
    let keys: Vec<String> = (0..1000).map(|_| q(&mut c, &["RANDOMKEY"])).collect();
    assert!(chi_square(&keys) < 40.0, "RANDOMKEY: {}", chi_square(&keys));
}

/// DEBUG FREEZE-TIME stops the wall clock's part of TIME: a frozen in-memory node's time moves
/// by a microsecond per command and by what DEBUG ADVANCE-TIME adds, nothing else; a bad
/// argument gets an error.
#[test]
fn debug_freeze_time_stops_the_clock_until_unfrozen() {
    let s = TestServer::start();
    let mut c = s.conn();
    let micros = |c: &mut redis::Connection| {
        let t: Vec<String> = q(c, &["TIME"]);
        t[0].parse::<u64>().unwrap() * 1_000_000 + t[1].parse::<u64>().unwrap()
    };
    s.freeze_time();
    let a = micros(&mut c);
    std::thread::sleep(std::time::Duration::from_millis(50));
    let b = micros(&mut c);
    assert!(b > a && b - a < 1000, "frozen: {a} then {b}");
    s.advance(2000);
    let after = micros(&mut c) - b;
    assert!(
        (1_999_000..2_001_000).contains(&after),
        "advanced by {after} µs"
    );
    let err = redis::cmd("DEBUG")
        .arg("FREEZE-TIME")
        .arg("maybe")
        .query::<()>(&mut c)
        .unwrap_err();
    assert!(err.to_string().contains("takes yes or no"), "{err}");
    let _: () = q(&mut c, &["DEBUG", "FREEZE-TIME", "no"]);
    let before = micros(&mut c);
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert!(micros(&mut c) - before >= 50_000);
}
