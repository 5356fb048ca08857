//! Bitmaps, HyperLogLog and LCS against a live redis-server 7.0.15 started by the test:
//! the same calls (fixed-seed random bitmaps and operations, binary data) go to both
//! servers, and every reply, error and the stored bytes (GET) must be the same.

mod common;
mod redis_support;

use common::{both, Rng, TestServer};
use redis::Connection;
use redis_support::RedisServer;

fn args(parts: &[&str]) -> Vec<Vec<u8>> {
    parts.iter().map(|p| p.as_bytes().to_vec()).collect()
}

fn random_bitmap_call(rng: &mut Rng, key: &str) -> Vec<Vec<u8>> {
    let n = |rng: &mut Rng, m: u64| (rng.below(2 * m) as i64 - m as i64).to_string();
    let unit = |rng: &mut Rng| ["BIT", "BYTE"][rng.below(2) as usize].to_string();
    let parts: Vec<String> = match rng.below(9) {
        0 | 1 => vec![
            "SETBIT".into(),
            key.into(),
            rng.below(300).to_string(),
            rng.below(2).to_string(),
        ],
        2 => vec!["GETBIT".into(), key.into(), rng.below(300).to_string()],
        3 => vec![
            "BITCOUNT".into(),
            key.into(),
            n(rng, 300),
            n(rng, 300),
            unit(rng),
        ],
        4 => vec!["BITCOUNT".into(), key.into(), n(rng, 40), n(rng, 40)],
        5 => {
            let mut v = vec![
                "BITPOS".into(),
                key.into(),
                rng.below(2).to_string(),
                n(rng, 300),
            ];
            match rng.below(3) {
                0 => {}
                1 => v.push(n(rng, 300)),
                _ => {
                    v.push(n(rng, 300));
                    v.push(unit(rng));
                }
            }
            v
        }
        6 => vec![
            "BITOP".into(),
            ["AND", "OR", "XOR"][rng.below(3) as usize].into(),
            key.into(),
            "a".into(),
            "b".into(),
        ],
        7 => {
            let signed = rng.below(2) == 0;
            let bits = 1 + rng.below(if signed { 64 } else { 63 });
            let ty = format!("{}{bits}", if signed { "i" } else { "u" });
            let overflow = ["WRAP", "SAT", "FAIL"][rng.below(3) as usize];
            let value = (rng.next() as i64 >> rng.below(64)).to_string();
            vec![
                "BITFIELD".into(),
                key.into(),
                "OVERFLOW".into(),
                overflow.into(),
                ["SET", "INCRBY"][rng.below(2) as usize].into(),
                ty.clone(),
                rng.below(200).to_string(),
                value,
                "GET".into(),
                ty,
                format!("#{}", rng.below(10)),
            ]
        }
        _ => vec!["GET".into(), key.into()],
    };
    parts.into_iter().map(String::into_bytes).collect()
}

#[test]
fn random_bitmap_operations_match_redis() {
    let redis = RedisServer::start();
    let tollgate = TestServer::start();
    let (mut r, mut t) = (redis.conn(), tollgate.conn());
    let mut rng = Rng(0x5eed_b175);
    for round in 0..6 {
        both(&mut r, &mut t, &args(&["FLUSHALL"]));
        // Binary sources for BITOP, of different lengths.
        for key in ["a", "b"] {
            let len = rng.below(40 * (round + 1));
            let bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            both(&mut r, &mut t, &[b"SET".to_vec(), key.into(), bytes]);
        }
        for _ in 0..400 {
            let key = ["a", "b", "d"][rng.below(3) as usize];
            let call = random_bitmap_call(&mut rng, key);
            both(&mut r, &mut t, &call);
        }
        for key in ["a", "b", "d"] {
            both(&mut r, &mut t, &args(&["GET", key]));
        }
    }
}

#[test]
fn bitmap_offsets_past_512_mb_are_refused_and_the_last_one_works() {
    let redis = RedisServer::start();
    let tollgate = TestServer::start();
    let (mut r, mut t) = (redis.conn(), tollgate.conn());
    for cmd in [
        &["SETBIT", "k", "4294967296", "1"][..],
        &["GETBIT", "k", "4294967296"],
        &["BITFIELD", "k", "SET", "u8", "#536870912", "1"],
        &["BITFIELD", "k", "GET", "i64", "-1"],
        &["SETBIT", "k", "4294967295", "1"],
        &["STRLEN", "k"],
        &["BITCOUNT", "k"],
        &["BITPOS", "k", "1"],
        &["GETBIT", "k", "4294967295"],
    ] {
        both(&mut r, &mut t, &args(cmd));
    }
}

/// SETBIT and BITFIELD write in place through one lookup: on an expired key they start
/// from an empty string (no TTL left), a SETBIT that changes nothing leaves a WATCH clean
/// and one that changes a bit (or creates the key) makes EXEC fail, and the keyspace
/// events are Redis's (`expired`, `new`, `setbit`), on both servers alike.
#[test]
fn bit_writes_on_expired_and_watched_keys_match_redis() {
    let redis = RedisServer::start();
    let tollgate = TestServer::start();
    let (mut r, mut t) = (redis.conn(), tollgate.conn());
    for c in [&mut r, &mut t] {
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("notify-keyspace-events")
            .arg("KEAn")
            .query(c)
            .unwrap();
    }
    let mut rs = redis.conn();
    let mut ts = tollgate.conn();
    let mut rsub = rs.as_pubsub();
    let mut tsub = ts.as_pubsub();
    for sub in [&mut rsub, &mut tsub] {
        sub.psubscribe("__keyevent@0__:*").unwrap();
        sub.set_read_timeout(Some(std::time::Duration::from_millis(500)))
            .unwrap();
    }
    let step = |r: &mut Connection, t: &mut Connection, cmd: &[&str]| {
        both(r, t, &args(cmd));
    };
    for key in ["k", "f"] {
        step(&mut r, &mut t, &["SET", key, "abc", "PX", "1"]);
    }
    std::thread::sleep(std::time::Duration::from_millis(20));
    step(&mut r, &mut t, &["SETBIT", "k", "3", "1"]);
    step(&mut r, &mut t, &["BITFIELD", "f", "SET", "u8", "#2", "200"]);
    for key in ["k", "f"] {
        step(&mut r, &mut t, &["GET", key]);
        step(&mut r, &mut t, &["TTL", key]);
    }
    // WATCH stays clean when the bit already has the value; a change (or a new key)
    // makes EXEC fail.
    for (key, bit, value) in [("k", "3", "1"), ("k", "3", "0"), ("new", "100", "0")] {
        step(&mut r, &mut t, &["WATCH", key]);
        step(&mut r, &mut t, &["SETBIT", key, bit, value]);
        step(&mut r, &mut t, &["MULTI"]);
        step(&mut r, &mut t, &["PING"]);
        step(&mut r, &mut t, &["EXEC"]);
    }
    step(&mut r, &mut t, &["STRLEN", "new"]);
    // Every event, in order, until none comes for 500 ms (at most 100).
    let events = |sub: &mut redis::PubSub| -> Vec<String> {
        let mut out = Vec::new();
        while out.len() < 100 {
            match sub.get_message() {
                Ok(m) => out.push(format!(
                    "{} {}",
                    m.get_channel_name(),
                    m.get_payload::<String>().unwrap()
                )),
                Err(_) => break,
            }
        }
        out
    };
    let theirs = events(&mut rsub);
    assert!(theirs.iter().any(|e| e.ends_with(":new new")), "{theirs:?}");
    assert_eq!(events(&mut tsub), theirs);
}

/// PFADD of binary elements in growing batches (sparse, the promotion, dense), PFCOUNT's
/// cached cardinality, PFMERGE of sparse and dense: every reply and the stored bytes
/// equal Redis's at every step.
#[test]
fn hyperloglog_bytes_and_counts_match_redis() {
    let redis = RedisServer::start();
    let tollgate = TestServer::start();
    let (mut r, mut t) = (redis.conn(), tollgate.conn());
    let mut rng = Rng(0x1111_2222);
    for key in ["h1", "h2"] {
        let mut added = 0;
        while added < 20_000 {
            let batch = 1 + rng.below(if added < 2000 { 40 } else { 4000 });
            let mut call = vec![b"PFADD".to_vec(), key.as_bytes().to_vec()];
            for _ in 0..batch {
                let len = rng.below(12) as usize;
                call.push((0..len).map(|_| rng.next() as u8).collect());
            }
            both(&mut r, &mut t, &call);
            added += batch;
            both(&mut r, &mut t, &args(&["PFCOUNT", key]));
            both(&mut r, &mut t, &args(&["GET", key]));
        }
    }
    both(&mut r, &mut t, &args(&["PFADD", "small", "a", "b", "c"]));
    for call in [
        &["PFCOUNT", "h1", "h2", "small", "missing"][..],
        &["PFMERGE", "small", "h1"],
        &["GET", "small"],
        &["PFMERGE", "fresh", "small", "h2"],
        &["GET", "fresh"],
        &["PFCOUNT", "fresh"],
        &["GET", "fresh"],
    ] {
        both(&mut r, &mut t, &args(call));
    }
}

/// Values SET from Redis's bytes work on Tollgate; corrupted ones (random bytes written
/// into sparse and dense HyperLogLogs) get Redis's replies, and nothing crashes.
#[test]
fn corrupted_hyperloglogs_get_redis_s_answers() {
    let redis = RedisServer::start();
    let tollgate = TestServer::start();
    let (mut r, mut t) = (redis.conn(), tollgate.conn());
    let mut rng = Rng(0x0bad_cafe);
    for round in 0..300 {
        both(&mut r, &mut t, &args(&["DEL", "h", "m"]));
        let n = if round % 3 == 0 { 3000 } else { rng.below(300) };
        let mut call = args(&["PFADD", "h"]);
        call.extend((0..n).map(|i| format!("{round}:{i}").into_bytes()));
        both(&mut r, &mut t, &call);
        let bytes = match redis::cmd("GET").arg("h").query::<Vec<u8>>(&mut r) {
            Ok(b) => b,
            Err(e) => panic!("GET: {e}"),
        };
        for _ in 0..1 + rng.below(3) {
            let mut broken = bytes.clone();
            let at = rng.below(broken.len() as u64) as usize;
            broken[at] = rng.next() as u8;
            if rng.below(4) == 0 {
                broken.truncate(rng.below(broken.len() as u64) as usize);
            }
            both(&mut r, &mut t, &[b"SET".to_vec(), b"h".to_vec(), broken]);
            for call in [
                &["PFCOUNT", "h"][..],
                &["PFCOUNT", "h", "missing"],
                &["PFADD", "h", "x", "y", "z"],
                &["PFMERGE", "m", "h"],
                &["GET", "h"],
                &["GET", "m"],
            ] {
                both(&mut r, &mut t, &args(call));
            }
        }
    }
}

/// LCS of random strings over small alphabets (many equal-length answers, so the walk
/// back must be Redis's), with every option; and Redis's refusal of a table larger than
/// 512 MB, answered before anything is allocated.
#[test]
fn lcs_matches_redis() {
    let redis = RedisServer::start();
    let tollgate = TestServer::start();
    let (mut r, mut t) = (redis.conn(), tollgate.conn());
    let mut rng = Rng(0x0123_4567);
    for _ in 0..150 {
        let alphabet = 2 + rng.below(4);
        for key in ["a", "b"] {
            let len = rng.below(60);
            let s: Vec<u8> = (0..len).map(|_| b'a' + rng.below(alphabet) as u8).collect();
            both(&mut r, &mut t, &[b"SET".to_vec(), key.into(), s]);
        }
        let min = rng.below(5).to_string();
        for call in [
            &["LCS", "a", "b"][..],
            &["LCS", "a", "b", "LEN"],
            &["LCS", "a", "b", "IDX"],
            &["LCS", "b", "a", "IDX", "MINMATCHLEN", &min, "WITHMATCHLEN"],
        ] {
            both(&mut r, &mut t, &args(call));
        }
    }
    // The table is (len + 1)^2 cells of 4 bytes: 11,585^2 * 4 (strings of 11,584 bytes) is just
    // below 512 MB, 11,587^2 * 4 (these strings of 11,586) is above.
    let big = "x".repeat(11_586);
    both(&mut r, &mut t, &args(&["MSET", "a", &big, "b", &big]));
    both(&mut r, &mut t, &args(&["LCS", "a", "b", "LEN"]));
}
