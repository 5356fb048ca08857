//! GEO commands against a live redis-server 7.0.15 started by the test: the same points
//! (fixed-seed random, with clusters, the poles' and the antimeridian's edges) and the same
//! searches go to both servers in RESP2 and RESP3, and every reply, error and stored
//! sorted set must be the same.

mod common;
mod redis_support;

use common::{both, Rng, TestServer};
use redis::Connection;
use redis_support::RedisServer;

fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(str::to_string).collect()
}

/// Points: spread over the world, packed around a few centres (so that searches find
/// many), and on the edges of the coordinate ranges.
fn load_points(rng: &mut Rng, conns: &mut [&mut Connection]) -> Vec<String> {
    let centres = [(13.36, 38.11), (-73.98, 40.75), (179.9, -16.5), (0.0, 84.9)];
    let mut members = Vec::new();
    let mut batch = vec!["GEOADD".to_string(), "pts".to_string()];
    for i in 0..3000 {
        let (lon, lat) = match i % 4 {
            0 => (rng.float(-180.0, 180.0), rng.float(-85.0, 85.0)),
            _ => {
                let (clon, clat) = centres[rng.below(centres.len() as u64) as usize];
                let lon: f64 = rng.float(clon - 2.0, clon + 2.0).parse().unwrap();
                let lat: f64 = rng.float(clat - 1.0, clat + 1.0).parse().unwrap();
                (
                    format!("{:.6}", lon.clamp(-180.0, 180.0)),
                    format!("{:.6}", lat.clamp(-85.05, 85.05)),
                )
            }
        };
        let member = format!("p{i}");
        batch.extend([lon, lat, member.clone()]);
        members.push(member);
    }
    for (lon, lat, m) in [
        ("-180", "-85.05112878", "sw"),
        ("180", "85.05112878", "ne"),
        ("0", "0", "origin"),
    ] {
        batch.extend([lon.to_string(), lat.to_string(), m.to_string()]);
        members.push(m.to_string());
    }
    for c in conns.iter_mut() {
        let added = common::reply_text(c, &batch);
        assert_eq!(added, "int(3003)", "GEOADD");
    }
    members
}

fn random_search(rng: &mut Rng, members: &[String]) -> Vec<String> {
    let unit = ["m", "km", "mi", "ft", "KM"][rng.below(5) as usize];
    let size = |rng: &mut Rng| match unit {
        "m" | "ft" => rng.float(0.0, 500_000.0),
        _ => rng.float(0.0, 3000.0),
    };
    let member = members[rng.below(members.len() as u64) as usize].clone();
    let (lon, lat) = (rng.float(-180.0, 180.0), rng.float(-85.0, 85.0));
    let mut cmd: Vec<String> = match rng.below(4) {
        0 => vec![
            "GEORADIUS".into(),
            "pts".into(),
            lon,
            lat,
            size(rng),
            unit.into(),
        ],
        1 => vec![
            "GEORADIUSBYMEMBER_RO".into(),
            "pts".into(),
            member,
            size(rng),
            unit.into(),
        ],
        _ => {
            let mut c = vec!["GEOSEARCH".to_string(), "pts".to_string()];
            if rng.below(2) == 0 {
                c.extend(["FROMMEMBER".to_string(), member]);
            } else {
                c.extend(["FROMLONLAT".to_string(), lon, lat]);
            }
            if rng.below(2) == 0 {
                c.extend(["BYRADIUS".to_string(), size(rng), unit.to_string()]);
            } else {
                c.extend(["BYBOX".to_string(), size(rng), size(rng), unit.to_string()]);
            }
            c
        }
    };
    match rng.below(4) {
        0 => cmd.push("ASC".into()),
        1 => cmd.push("DESC".into()),
        _ => {}
    }
    if rng.below(2) == 0 {
        cmd.extend(["COUNT".to_string(), (1 + rng.below(20)).to_string()]);
        // ANY stops at the first COUNT points found: which ones depends on the scan order,
        // the same on both servers.
        if rng.below(3) == 0 {
            cmd.push("ANY".into());
        }
    }
    for opt in ["WITHDIST", "WITHCOORD", "WITHHASH"] {
        if rng.below(2) == 0 {
            cmd.push(opt.into());
        }
    }
    cmd
}

#[test]
fn random_searches_match_redis_in_resp2_and_resp3() {
    let redis = RedisServer::start();
    let tollgate = TestServer::start();
    let (mut r, mut t) = (redis.conn(), tollgate.conn());
    let mut r3 = redis::Client::open(format!("redis://127.0.0.1:{}/?protocol=resp3", redis.port))
        .unwrap()
        .get_connection()
        .unwrap();
    let mut t3 = tollgate.conn3();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let members = load_points(&mut rng, &mut [&mut r, &mut t]);
    let mut found = 0usize;
    for i in 0..400 {
        let cmd = random_search(&mut rng, &members);
        let reply = if i % 2 == 0 {
            both(&mut r, &mut t, &cmd)
        } else {
            both(&mut r3, &mut t3, &cmd)
        };
        found += reply.matches("bulk-string").count();
    }
    // The searches found points (a test of empty replies would prove little).
    assert!(found > 1000, "only {found} points found");
    let positions: Vec<String> = ["GEOPOS", "pts"]
        .iter()
        .map(|s| s.to_string())
        .chain(members.iter().step_by(7).cloned())
        .collect();
    both(&mut r, &mut t, &positions);
    both(&mut r3, &mut t3, &positions);
    let mut hashes = positions.clone();
    hashes[0] = "GEOHASH".into();
    both(&mut r, &mut t, &hashes);
    for pair in members.chunks(2).step_by(50) {
        if let [a, b] = pair {
            for unit in ["m", "km", "mi", "ft"] {
                let cmd: Vec<String> = ["GEODIST", "pts", a, b, unit]
                    .iter()
                    .map(|s| s.to_string())
                    .collect();
                both(&mut r, &mut t, &cmd);
            }
        }
    }
}

#[test]
fn stored_searches_match_redis() {
    let redis = RedisServer::start();
    let tollgate = TestServer::start();
    let (mut r, mut t) = (redis.conn(), tollgate.conn());
    let mut rng = Rng(42);
    let members = load_points(&mut rng, &mut [&mut r, &mut t]);
    for i in 0..60 {
        let member = &members[rng.below(members.len() as u64) as usize];
        let radius = rng.float(0.0, 800.0);
        let cmd = match i % 3 {
            0 => words(&format!(
                "GEORADIUSBYMEMBER pts {member} {radius} km STORE dst"
            )),
            1 => words(&format!(
                "GEORADIUSBYMEMBER pts {member} {radius} km COUNT 5 DESC STOREDIST dst"
            )),
            _ => words(&format!(
                "GEOSEARCHSTORE dst pts FROMMEMBER {member} BYBOX {radius} {radius} km STOREDIST"
            )),
        };
        both(&mut r, &mut t, &cmd);
        let stored = |c: &mut Connection| -> Vec<(String, f64)> {
            redis::cmd("ZRANGE")
                .arg("dst")
                .arg(0)
                .arg(-1)
                .arg("WITHSCORES")
                .query(c)
                .unwrap()
        };
        let (a, b) = (stored(&mut r), stored(&mut t));
        if i % 3 == 0 {
            // Geohash scores: exact.
            assert_eq!(a, b, "{cmd:?}");
        } else {
            // Distances: the trigonometry is the libm crate's, not glibc's (the same on
            // every replica whatever its C library), so the last bit may differ from
            // redis-server's; the members, their order and 12 digits may not.
            let names = |v: &[(String, f64)]| v.iter().map(|p| p.0.clone()).collect::<Vec<_>>();
            assert_eq!(names(&a), names(&b), "{cmd:?}");
            for ((_, x), (_, y)) in a.iter().zip(&b) {
                assert!(
                    (x - y).abs() <= 1e-12 * x.abs().max(1.0),
                    "{cmd:?}: {x} vs {y}"
                );
            }
        }
        both(&mut r, &mut t, &words("OBJECT ENCODING dst"));
    }
    // Nothing found: the destination is deleted.
    both(
        &mut r,
        &mut t,
        &words("GEOSEARCHSTORE dst pts FROMLONLAT 100 -50 BYRADIUS 1 m"),
    );
    assert_eq!(both(&mut r, &mut t, &words("EXISTS dst")), "int(0)");
}

#[test]
fn errors_match_redis() {
    let redis = RedisServer::start();
    let tollgate = TestServer::start();
    let (mut r, mut t) = (redis.conn(), tollgate.conn());
    for line in [
        "SET str x",
        "GEOADD g 13.361389 38.115556 Palermo 15.087269 37.502669 Catania",
        "GEOADD g 181 1 a",
        "GEOADD g 1 85.1 a",
        "GEOADD g nan 1 a",
        "GEOADD g xx nx 1 1 a",
        "GEOADD g 1 1 a 2",
        "GEOADD str 1 1 a",
        "GEOPOS str a",
        "GEODIST g Palermo Catania furlong",
        "GEODIST g Palermo Catania km km",
        "GEORADIUS g 15 37 -1 km",
        "GEORADIUS g 15 37 1 km COUNT 0",
        "GEORADIUS g 15 37 1 km ANY",
        "GEORADIUS g 15 37 1 km STORE d WITHDIST",
        "GEORADIUS_RO g 15 37 1 km STORE d",
        "GEORADIUSBYMEMBER g nope 1 km",
        "GEOSEARCH g FROMLONLAT 15 37",
        "GEOSEARCH g BYRADIUS 1 km",
        "GEOSEARCH g FROMLONLAT 15 37 BYBOX 1 -1 km",
        "GEOSEARCH g FROMLONLAT 15 37 BYRADIUS 1 km STOREDIST",
        "GEOSEARCHSTORE d g FROMLONLAT 15 37 BYRADIUS 1 km WITHCOORD",
        "GEOSEARCH str FROMLONLAT 15 37 BYRADIUS 1 km",
    ] {
        both(&mut r, &mut t, &words(line));
    }
}
