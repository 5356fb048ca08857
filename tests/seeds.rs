//! The Redis limiter patterns from the user's seed documents (shared/seeds) that use
//! plain commands, run step by step through a real client. The Lua scripts of the seeds
//! are in tests/scripting_seeds.rs.

mod common;

use common::{q, TestServer};
use redis::{Connection, Value};

/// The server's clock in seconds (the patterns key counters by the current second).
fn server_secs(c: &mut Connection) -> i64 {
    let (s, _us): (i64, i64) = q(c, &["TIME"]);
    s
}

/// Seed 003 §1.1 (redis.io's INCR pattern 1): one counter per IP per second, created in
/// MULTI with INCR + EXPIRE 10, refused once it passes 10.
fn limit_api_call_per_second(c: &mut Connection, ip: &str) -> bool {
    let ts = server_secs(c);
    let keyname = format!("{ip}:{ts}");
    let current: Option<i64> = q(c, &["GET", &keyname]);
    if current.is_some_and(|n| n > 10) {
        return false;
    }
    let (_n, _ok): (i64, i64) = redis::pipe()
        .atomic()
        .cmd("INCR")
        .arg(&keyname)
        .cmd("EXPIRE")
        .arg(&keyname)
        .arg(10)
        .query(c)
        .unwrap();
    true
}

#[test]
fn seed_003_counter_per_ip_per_second() {
    let s = TestServer::start();
    let mut c = s.conn();
    // Align to the start of a second so that all 12 calls land in one second.
    let t0 = server_secs(&mut c);
    while server_secs(&mut c) == t0 {
        s.advance(10);
    }
    let results: Vec<bool> = (0..13)
        .map(|_| limit_api_call_per_second(&mut c, "1.2.3.4"))
        .collect();
    assert_eq!(results.iter().filter(|ok| **ok).count(), 11, "{results:?}");
    assert!(!results[12]);
    let keys: Vec<String> = q(&mut c, &["KEYS", "1.2.3.4:*"]);
    assert_eq!(keys.len(), 1);
    assert!(q::<i64>(&mut c, &["TTL", &keys[0]]) <= 10);
    // The next second starts a fresh counter; the old key expires by itself.
    s.advance(1000);
    assert!(limit_api_call_per_second(&mut c, "1.2.3.4"));
    s.advance(10_000);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", &keys[0]]), 0);
}

/// Seed 003 §1.2.1: a single counter; INCR, and EXPIRE 1 when it was created.
#[test]
fn seed_003_single_counter_with_expire_on_first_incr() {
    let s = TestServer::start();
    let mut c = s.conn();
    let mut allowed = 0;
    for _ in 0..15 {
        let current: Option<i64> = q(&mut c, &["GET", "10.0.0.1"]);
        if current.is_some_and(|n| n > 10) {
            continue;
        }
        let value: i64 = q(&mut c, &["INCR", "10.0.0.1"]);
        if value == 1 {
            q::<i64>(&mut c, &["EXPIRE", "10.0.0.1", "1"]);
        }
        allowed += 1;
    }
    assert_eq!(allowed, 11);
    assert_eq!(q::<i64>(&mut c, &["TTL", "10.0.0.1"]), 1);
    s.advance(1001);
    assert_eq!(q::<Option<i64>>(&mut c, &["GET", "10.0.0.1"]), None);
}

/// Seed 003 §1.2.2: the list variant with LLEN, EXISTS, MULTI RPUSH+EXPIRE and RPUSHX.
#[test]
fn seed_003_list_limiter_with_rpushx() {
    let s = TestServer::start();
    let mut c = s.conn();
    let ip = "192.168.1.100";
    let mut allowed = 0;
    for _ in 0..20 {
        let current: i64 = q(&mut c, &["LLEN", ip]);
        if current > 10 {
            continue;
        }
        if q::<i64>(&mut c, &["EXISTS", ip]) == 0 {
            let _: (i64, i64) = redis::pipe()
                .atomic()
                .cmd("RPUSH")
                .arg(ip)
                .arg(ip)
                .cmd("EXPIRE")
                .arg(ip)
                .arg(1)
                .query(&mut c)
                .unwrap();
        } else {
            q::<i64>(&mut c, &["RPUSHX", ip, ip]);
        }
        allowed += 1;
    }
    assert_eq!(allowed, 11);
    assert_eq!(q::<i64>(&mut c, &["LLEN", ip]), 11);
    // RPUSHX never creates the key, so once it expires nothing leaks.
    s.advance(1001);
    assert_eq!(q::<i64>(&mut c, &["RPUSHX", ip, ip]), 0);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", ip]), 0);
}

/// Seed 001: a counter per second (`key + timestamp`), EXPIRE 2 s on the first INCR.
#[test]
fn seed_001_per_second_keys_expire_after_two_seconds() {
    let s = TestServer::start();
    let mut c = s.conn();
    let ts = server_secs(&mut c);
    let key = format!("SYSTEM_FLOW_LIMIT{ts}");
    for i in 1..=5 {
        let n: i64 = q(&mut c, &["INCR", &key]);
        assert_eq!(n, i);
        if n == 1 {
            q::<i64>(&mut c, &["EXPIRE", &key, "2"]);
        }
    }
    assert_eq!(q::<i64>(&mut c, &["TTL", &key]), 2);
    // As in Redis, a key lives through the millisecond of its deadline: go one past it.
    s.advance(2001);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", &key]), 0);
}

/// Seed 002 (PHP): token bucket as JSON {num, time} under WATCH/MULTI/EXEC. Two clients
/// racing on the same key: the one whose watched key changed gets a null EXEC.
#[test]
fn seed_002_watch_multi_token_bucket() {
    let s = TestServer::start();
    let mut a = s.conn();
    let mut b = s.conn();
    let key = "42_minNum";
    let (init_num, expire) = (60.0_f64, 60.0_f64);
    let take =
        |c: &mut Connection, now: i64, interleave: Option<&mut Connection>| -> Option<bool> {
            q::<()>(c, &["WATCH", key]);
            let val: Option<String> = q(c, &["GET", key]);
            let new_val = match val {
                Some(v) => {
                    let num: f64 = v
                        .split("\"num\":")
                        .nth(1)?
                        .split([',', '}'])
                        .next()?
                        .parse()
                        .ok()?;
                    let time: i64 = v
                        .split("\"time\":")
                        .nth(1)?
                        .split('}')
                        .next()?
                        .parse()
                        .ok()?;
                    let new_num =
                        init_num.min((num - 1.0) + (init_num / expire) * (now - time) as f64);
                    if new_num <= 0.0 {
                        q::<()>(c, &["UNWATCH"]);
                        return Some(false);
                    }
                    format!("{{\"num\":{new_num},\"time\":{now}}}")
                }
                None => format!("{{\"num\":{init_num},\"time\":{now}}}"),
            };
            if let Some(other) = interleave {
                q::<()>(other, &["SET", key, "{\"num\":1,\"time\":0}"]);
            }
            let r: Value = redis::pipe()
                .atomic()
                .cmd("SET")
                .arg(key)
                .arg(&new_val)
                .query(c)
                .unwrap();
            Some(r != Value::Nil)
        };
    assert_eq!(take(&mut a, 1000, None), Some(true));
    assert_eq!(take(&mut a, 1000, None), Some(true));
    // b writes between a's WATCH and EXEC: a's transaction is discarded.
    assert_eq!(take(&mut a, 1000, Some(&mut b)), Some(false));
    assert_eq!(q::<String>(&mut a, &["GET", key]), "{\"num\":1,\"time\":0}");
}
