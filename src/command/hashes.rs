//! Hash commands: HSET and friends, field reads, HINCRBY/HINCRBYFLOAT, HSCAN and
//! HRANDFIELD. Hashes keep insertion order, so HGETALL/HKEYS/HVALS answer the order in
//! which fields were first set (as a small Redis hash does).

use bytes::Bytes;

use super::args::{self, int, is, read, syntax_error, CmdResult, NOT_FLOAT};
use super::collection::{exists_where, random_picks, scan_step, symmetric_int};
use super::collection::{update_live, update_notify, Rng};
use super::keys::parse_scan;
use super::strings::run;
use super::Ctx;
use crate::protocol::Reply;
use crate::pubsub::notify::{HASH, REMOVAL};
use crate::store::value::HashValue;

fn bulk(b: &[u8]) -> Reply {
    Reply::Bulk(Bytes::copy_from_slice(b))
}

/// The hash at `key`, a read lookup (counts a keyspace hit or miss).
fn read_hash<'a>(ctx: &'a mut Ctx, key: &[u8]) -> CmdResult<Option<&'a HashValue>> {
    let now = ctx.now_ms;
    read::<HashValue>(ctx.db(), key, now)
}

/// [`read_hash`] for a command that writes the key (no hit or miss counted).
fn lookup_hash<'a>(ctx: &'a mut Ctx, key: &[u8]) -> CmdResult<Option<&'a HashValue>> {
    let now = ctx.now_ms;
    super::args::lookup::<HashValue>(ctx.db(), key, now)
}

/// Set field/value pairs from `a[2..]`; returns how many fields were new.
fn set_pairs(ctx: &mut Ctx, a: &[&[u8]], name: &str) -> CmdResult<i64> {
    if !a.len().is_multiple_of(2) {
        return Err(super::arity_error(name));
    }
    let limits = ctx.ks.encodings.hash();
    let set = |h: &mut HashValue| {
        let pairs = a[2..].chunks_exact(2);
        Ok(pairs.filter(|p| h.insert(p[0], p[1], limits)).count() as i64)
    };
    // HSET and HMSET both fire `hset`, and signal the key, whether or not anything changed
    // (as Redis's `hsetCommand`). An existing hash: one keyspace lookup; an absent (or
    // expired) key takes `update_notify`'s path, which creates it.
    let event = |_: &i64| Some("hset");
    if let Some(added) = update_live::<HashValue, _>(ctx, a[1], HASH, event, set) {
        return added;
    }
    let added = update_notify::<HashValue, _>(ctx, a[1], true, HASH, event, set)?;
    Ok(added.unwrap_or(0))
}

/// HSET key field value [field value ...]
pub fn hset(ctx: &mut Ctx, a: &[&[u8]]) -> Reply {
    set_pairs(ctx, a, "hset").map_or_else(|e| e, Reply::Integer)
}

/// HMSET key field value [field value ...]
pub fn hmset(ctx: &mut Ctx, a: &[&[u8]]) -> Reply {
    set_pairs(ctx, a, "hmset").map_or_else(|e| e, |_| Reply::ok())
}

/// HSETNX key field value
pub fn hsetnx(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    run((|| {
        if lookup_hash(ctx, &a[1])?.is_some_and(|h| h.contains_key(&a[2])) {
            return Ok(Reply::Integer(0));
        }
        let limits = ctx.ks.encodings.hash();
        update_notify::<HashValue, _>(
            ctx,
            &a[1],
            true,
            HASH,
            |_| Some("hset"),
            |h| {
                h.insert(&a[2], &a[3], limits);
                Ok(())
            },
        )?;
        Ok(Reply::Integer(1))
    })())
}

/// HGET key field
pub fn hget(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    match read_hash(ctx, &a[1]) {
        Err(e) => e,
        Ok(h) => h.and_then(|h| h.get(&a[2])).map_or(Reply::Nil, bulk),
    }
}

/// HMGET key field [field ...]
pub fn hmget(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    match read_hash(ctx, &a[1]) {
        Err(e) => e,
        Ok(h) => Reply::Array(
            a[2..]
                .iter()
                .map(|f| h.and_then(|h| h.get(f)).map_or(Reply::Nil, bulk))
                .collect(),
        ),
    }
}

/// HGETALL key
pub fn hgetall(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    match read_hash(ctx, &a[1]) {
        Err(e) => e,
        Ok(h) => Reply::Map(
            h.into_iter()
                .flat_map(HashValue::iter)
                .map(|(f, v)| (bulk(f), bulk(v)))
                .collect(),
        ),
    }
}

/// HKEYS key
pub fn hkeys(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    match read_hash(ctx, &a[1]) {
        Err(e) => e,
        Ok(h) => Reply::Array(
            h.into_iter()
                .flat_map(|h| h.iter().map(|(f, _)| bulk(f)))
                .collect(),
        ),
    }
}

/// HVALS key
pub fn hvals(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    match read_hash(ctx, &a[1]) {
        Err(e) => e,
        Ok(h) => Reply::Array(
            h.into_iter()
                .flat_map(|h| h.iter().map(|(_, v)| bulk(v)))
                .collect(),
        ),
    }
}

/// HLEN key
pub fn hlen(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    match read_hash(ctx, &a[1]) {
        Err(e) => e,
        Ok(h) => Reply::Integer(h.map_or(0, |h| h.len() as i64)),
    }
}

/// HEXISTS key field
pub fn hexists(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    match read_hash(ctx, &a[1]) {
        Err(e) => e,
        Ok(h) => Reply::Integer(h.is_some_and(|h| h.contains_key(&a[2])) as i64),
    }
}

/// HSTRLEN key field
pub fn hstrlen(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    match read_hash(ctx, &a[1]) {
        Err(e) => e,
        Ok(h) => Reply::Integer(h.and_then(|h| h.get(&a[2])).map_or(0, |v| v.len() as i64)),
    }
}

/// HDEL key field [field ...]
pub fn hdel(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    let fields = &a[2..];
    run((|| {
        if !exists_where::<HashValue>(ctx, &a[1], |h| fields.iter().any(|f| h.contains_key(f)))? {
            return Ok(Reply::Integer(0));
        }
        let event = |n: &i64| (*n > 0).then_some("hdel");
        let removed =
            update_notify::<HashValue, _>(ctx, &a[1], false, HASH | REMOVAL, event, |h| {
                Ok(fields.iter().filter(|f| h.remove(f)).count() as i64)
            })?;
        Ok(Reply::Integer(removed.unwrap_or(0)))
    })())
}

/// Replace (or create) `field` with the result of `step` applied to its current value.
fn rewrite_field(
    ctx: &mut Ctx,
    key: &Bytes,
    field: &Bytes,
    step: impl FnOnce(Option<&[u8]>) -> CmdResult<Bytes>,
    event: &'static str,
) -> CmdResult<Bytes> {
    // Compute on a read first, so that an error creates nothing and fires no WATCH.
    let next = step(lookup_hash(ctx, key)?.and_then(|h| h.get(field)))?;
    let limits = ctx.ks.encodings.hash();
    update_notify::<HashValue, _>(
        ctx,
        key,
        true,
        HASH,
        |_| Some(event),
        |h| {
            h.insert(field, &next, limits);
            Ok(())
        },
    )?;
    Ok(next)
}

/// HINCRBY key field increment
pub fn hincrby(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    run((|| {
        let by = int(&a[3])?;
        let next = rewrite_field(
            ctx,
            &a[1],
            &a[2],
            |cur| {
                let cur = match cur {
                    None => 0,
                    Some(v) => args::parse_i64(v)
                        .ok_or_else(|| Reply::err("ERR hash value is not an integer"))?,
                };
                let next = cur
                    .checked_add(by)
                    .ok_or_else(|| Reply::err("ERR increment or decrement would overflow"))?;
                Ok(Bytes::from(next.to_string()))
            },
            "hincrby",
        )?;
        Ok(Reply::Integer(args::parse_i64(&next).unwrap_or_default()))
    })())
}

/// HINCRBYFLOAT key field increment
pub fn hincrbyfloat(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    use crate::numbers::long_double::{check, incr, Check, IncrError};
    run((|| {
        match check(&a[3]) {
            Check::Float => {}
            Check::NotFloat => return Err(Reply::err(NOT_FLOAT)),
            Check::NotFinite => return Err(Reply::err("ERR value is NaN or Infinity")),
        }
        let next = rewrite_field(
            ctx,
            &a[1],
            &a[2],
            |cur| match incr(cur, &a[3]) {
                Ok(text) => Ok(Bytes::from(text)),
                Err(IncrError::Current) => Err(Reply::err("ERR hash value is not a float")),
                Err(IncrError::NotFinite) => {
                    Err(Reply::err("ERR increment would produce NaN or Infinity"))
                }
                Err(IncrError::Increment) => Err(Reply::err(NOT_FLOAT)),
            },
            "hincrbyfloat",
        )?;
        Ok(Reply::Bulk(next))
    })())
}

/// HSCAN key cursor [MATCH pattern] [COUNT count]
pub fn hscan(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    run((|| {
        // Redis validates the cursor before the key and the options only if it exists.
        parse_scan(&a[..3], 2, false)?;
        let Some(h) = read_hash(ctx, &a[1])? else {
            return Ok(super::keys::scan_reply(0, Vec::new()));
        };
        let opts = parse_scan(a, 2, false)?;
        let (next, items) = scan_step(h.iter(), h.len(), &opts);
        let flat = items
            .into_iter()
            .flat_map(|(f, v)| [bulk(f), bulk(v)])
            .collect();
        Ok(super::keys::scan_reply(next, flat))
    })())
}

/// HRANDFIELD key [count [WITHVALUES]]
pub fn hrandfield(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    run((|| {
        let seed = ctx.seed;
        let count = match a.get(2) {
            None => None,
            Some(c) => Some(symmetric_int(c)?),
        };
        if a.len() > 4 || a.get(3).is_some_and(|w| !is(w, "withvalues")) {
            return Err(syntax_error());
        }
        let with_values = a.len() == 4;
        if with_values && count.is_some_and(|c| c.unsigned_abs() > i64::MAX as u64 / 2) {
            return Err(Reply::err("ERR value is out of range"));
        }
        let resp3 = ctx.resp >= 3;
        let h = read_hash(ctx, &a[1])?;
        let Some(count) = count else {
            let Some(h) = h.filter(|h| !h.is_empty()) else {
                return Ok(Reply::Nil);
            };
            let i = Rng::new(seed, &a[1], h.len()).below(h.len());
            return Ok(h.get_index(i).map_or(Reply::Nil, |(f, _)| bulk(f)));
        };
        let Some(h) = h else {
            return Ok(Reply::Array(Vec::new()));
        };
        let picks = random_picks(&mut Rng::new(seed, &a[1], h.len()), h.len(), count)?;
        // A compact hash is read once into an index instead of scanned per pick.
        let all: Vec<(&[u8], &[u8])> = if h.indexes_fast() {
            Vec::new()
        } else {
            h.iter().collect()
        };
        let at = |i: usize| {
            if h.indexes_fast() {
                h.get_index(i)
            } else {
                all.get(i).copied()
            }
        };
        let pairs = picks.into_iter().filter_map(at);
        Ok(Reply::Array(match (with_values, resp3) {
            (false, _) => pairs.map(|(f, _)| bulk(f)).collect(),
            (true, true) => pairs
                .map(|(f, v)| Reply::Array(vec![bulk(f), bulk(v)]))
                .collect(),
            (true, false) => pairs.flat_map(|(f, v)| [bulk(f), bulk(v)]).collect(),
        }))
    })())
}

use super::flags::{DENYOOM, FAST, RANDOM, READONLY, WRITE};

/// Hash commands.
pub const COMMANDS: &[super::CommandSpec] = &[
    crate::cmd!("hset", -4, WRITE | DENYOOM | FAST, 1, 1, 1, fast: hset),
    crate::cmd!("hsetnx", 4, WRITE | DENYOOM | FAST, 1, 1, 1, hsetnx),
    crate::cmd!("hmset", -4, WRITE | DENYOOM | FAST, 1, 1, 1, fast: hmset),
    crate::cmd!("hget", 3, READONLY | FAST, 1, 1, 1, hget),
    crate::cmd!("hmget", -3, READONLY | FAST, 1, 1, 1, hmget),
    crate::cmd!("hgetall", 2, READONLY, 1, 1, 1, hgetall),
    crate::cmd!("hkeys", 2, READONLY, 1, 1, 1, hkeys),
    crate::cmd!("hvals", 2, READONLY, 1, 1, 1, hvals),
    crate::cmd!("hlen", 2, READONLY | FAST, 1, 1, 1, hlen),
    crate::cmd!("hexists", 3, READONLY | FAST, 1, 1, 1, hexists),
    crate::cmd!("hstrlen", 3, READONLY | FAST, 1, 1, 1, hstrlen),
    crate::cmd!("hdel", -3, WRITE | FAST, 1, 1, 1, hdel),
    crate::cmd!("hincrby", 4, WRITE | DENYOOM | FAST, 1, 1, 1, hincrby),
    crate::cmd!(
        "hincrbyfloat",
        4,
        WRITE | DENYOOM | FAST,
        1,
        1,
        1,
        hincrbyfloat
    ),
    crate::cmd!("hscan", -3, READONLY | RANDOM, 1, 1, 1, hscan),
    crate::cmd!("hrandfield", -2, READONLY | RANDOM, 1, 1, 1, hrandfield),
];

#[cfg(test)]
mod tests {
    use super::super::collection::harness::{bulk, bulks, err, wrongtype, Client};
    use crate::protocol::Reply;

    fn c() -> Client {
        let mut c = Client::new();
        c.run("set str x");
        c.run("hset h a 1 b 2 c 3");
        c
    }

    #[test]
    fn hset_counts_new_fields_and_keeps_order() {
        let mut c = c();
        assert_eq!(c.run("hset h a 9 d 4"), Reply::Integer(1));
        assert_eq!(
            c.wire("hgetall h"),
            "*8\r\n$1\r\na\r\n$1\r\n9\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n$1\r\nd\r\n$1\r\n4\r\n"
        );
        c.resp = 3;
        assert!(c.wire("hgetall h").starts_with("%4\r\n"));
        assert_eq!(c.run("hkeys h"), bulks(&["a", "b", "c", "d"]));
        assert_eq!(c.run("hvals h"), bulks(&["9", "2", "3", "4"]));
        assert_eq!(c.run("hmset h e 5"), Reply::ok());
        assert_eq!(c.run("hlen h"), Reply::Integer(5));
    }

    #[test]
    fn hset_arity_and_type_errors() {
        let mut c = c();
        assert_eq!(
            c.run("hset h a"),
            err("ERR wrong number of arguments for 'hset' command")
        );
        assert_eq!(
            c.run("hset h a 1 b"),
            err("ERR wrong number of arguments for 'hset' command")
        );
        assert_eq!(
            c.run("hmset h a 1 b"),
            err("ERR wrong number of arguments for 'hmset' command")
        );
        assert_eq!(c.run("hset str a 1"), wrongtype());
        assert_eq!(c.run("hget str a"), wrongtype());
        assert_eq!(c.run("hgetall str"), wrongtype());
        assert_eq!(c.run("hlen str"), wrongtype());
        assert_eq!(c.run("hdel str a"), wrongtype());
        assert_eq!(c.run("hsetnx str a 1"), wrongtype());
        assert_eq!(c.run("hincrby str a 1"), wrongtype());
        assert_eq!(c.run("hrandfield str"), wrongtype());
        assert_eq!(c.run("hscan str 0"), wrongtype());
    }

    #[test]
    fn reads_of_fields() {
        let mut c = c();
        assert_eq!(c.run("hget h a"), bulk("1"));
        assert_eq!(c.run("hget h zz"), Reply::Nil);
        assert_eq!(c.run("hget nokey a"), Reply::Nil);
        assert_eq!(
            c.run("hmget h a zz c"),
            Reply::Array(vec![bulk("1"), Reply::Nil, bulk("3")])
        );
        assert_eq!(c.run("hmget nokey a"), Reply::Array(vec![Reply::Nil]));
        assert_eq!(c.run("hgetall nokey"), Reply::Map(vec![]));
        assert_eq!(c.run("hexists h a"), Reply::Integer(1));
        assert_eq!(c.run("hexists h z"), Reply::Integer(0));
        assert_eq!(c.run("hstrlen h a"), Reply::Integer(1));
        assert_eq!(c.run("hstrlen h z"), Reply::Integer(0));
        assert_eq!(c.run("hlen nokey"), Reply::Integer(0));
    }

    #[test]
    fn hsetnx_and_hdel() {
        let mut c = c();
        assert_eq!(c.run("hsetnx h a 5"), Reply::Integer(0));
        assert_eq!(c.run("hget h a"), bulk("1"));
        assert_eq!(c.run("hsetnx h z 5"), Reply::Integer(1));
        assert_eq!(c.run("hsetnx new f v"), Reply::Integer(1));
        assert_eq!(c.run("hdel h a zz a"), Reply::Integer(1));
        assert_eq!(c.run("hkeys h"), bulks(&["b", "c", "z"]));
        assert_eq!(c.run("hdel nokey a"), Reply::Integer(0));
        assert_eq!(c.run("hdel h b c z"), Reply::Integer(3));
        assert!(!c.exists("h"), "an emptied hash is deleted");
    }

    #[test]
    fn hincrby_rules() {
        let mut c = c();
        c.run("hset n f 1.5 big 9223372036854775807 s abc");
        assert_eq!(c.run("hincrby h a 10"), Reply::Integer(11));
        assert_eq!(c.run("hincrby h new -3"), Reply::Integer(-3));
        assert_eq!(
            c.run("hincrby h a x"),
            err("ERR value is not an integer or out of range")
        );
        assert_eq!(
            c.run("hincrby h a 1.5"),
            err("ERR value is not an integer or out of range")
        );
        assert_eq!(
            c.run("hincrby n f 1"),
            err("ERR hash value is not an integer")
        );
        assert_eq!(
            c.run("hincrby n s 1"),
            err("ERR hash value is not an integer")
        );
        assert_eq!(
            c.run("hincrby n big 1"),
            err("ERR increment or decrement would overflow")
        );
        assert_eq!(
            c.run("hincrby fresh f x"),
            err("ERR value is not an integer or out of range")
        );
        assert!(!c.exists("fresh"), "a failed write creates nothing");
    }

    #[test]
    fn hincrbyfloat_rules() {
        let mut c = c();
        c.run("hset n s abc i 10");
        assert_eq!(c.run("hincrbyfloat n i 0.5"), bulk("10.5"));
        assert_eq!(c.run("hincrbyfloat n new 5"), bulk("5"));
        assert_eq!(c.run("hincrbyfloat n new 1.0e1"), bulk("15"));
        assert_eq!(c.run("hget n new"), bulk("15"));
        assert_eq!(
            c.run("hincrbyfloat n i x"),
            err("ERR value is not a valid float")
        );
        assert_eq!(
            c.run("hincrbyfloat n i nan"),
            err("ERR value is not a valid float")
        );
        assert_eq!(
            c.run("hincrbyfloat n i inf"),
            err("ERR value is NaN or Infinity")
        );
        assert_eq!(
            c.run("hincrbyfloat n s 1"),
            err("ERR hash value is not a float")
        );
        c.run("hset n g inf");
        assert_eq!(
            c.run("hincrbyfloat n g 1"),
            err("ERR increment would produce NaN or Infinity")
        );
        assert_eq!(
            c.run("hincrbyfloat fresh f inf"),
            err("ERR value is NaN or Infinity")
        );
        assert!(!c.exists("fresh"));
    }

    #[test]
    fn hscan_small_and_errors() {
        let mut c = c();
        assert_eq!(
            c.run("hscan h 0"),
            Reply::Array(vec![bulk("0"), bulks(&["a", "1", "b", "2", "c", "3"])])
        );
        assert_eq!(
            c.run("hscan h 0 match b*"),
            Reply::Array(vec![bulk("0"), bulks(&["b", "2"])])
        );
        assert_eq!(c.run("hscan h x"), err("ERR invalid cursor"));
        assert_eq!(c.run("hscan nokey x"), err("ERR invalid cursor"));
        assert_eq!(c.run("hscan h 0 count 0"), err("ERR syntax error"));
        assert_eq!(c.run("hscan h 0 count"), err("ERR syntax error"));
        assert_eq!(
            c.run("hscan h 0 count x"),
            err("ERR value is not an integer or out of range")
        );
        // Options of a missing key are not looked at, as in Redis.
        assert_eq!(
            c.run("hscan nokey 0 count 0"),
            Reply::Array(vec![bulk("0"), bulks(&[])])
        );
        assert_eq!(
            c.run("hscan h 18446744073709551615"),
            Reply::Array(vec![bulk("0"), bulks(&["a", "1", "b", "2", "c", "3"])])
        );
        assert_eq!(
            c.run("hscan h 18446744073709551616"),
            err("ERR invalid cursor")
        );
    }

    #[test]
    fn hscan_large_hash_visits_every_field_once() {
        let mut c = Client::new();
        for i in 0..1000 {
            c.run(&format!("hset big f{i} {i}"));
        }
        let mut cursor = "0".to_string();
        let mut fields = Vec::new();
        loop {
            let Reply::Array(parts) = c.run(&format!("hscan big {cursor} count 20")) else {
                panic!("not an array");
            };
            let (Reply::Bulk(next), Reply::Array(items)) = (&parts[0], &parts[1]) else {
                panic!("bad shape");
            };
            for pair in items.chunks(2) {
                let (Reply::Bulk(f), Reply::Bulk(v)) = (&pair[0], &pair[1]) else {
                    panic!("bad pair");
                };
                assert_eq!(f[1..], v[..]);
                fields.push(f.clone());
            }
            cursor = String::from_utf8(next.to_vec()).unwrap();
            if cursor == "0" {
                break;
            }
        }
        fields.sort();
        fields.dedup();
        assert_eq!(fields.len(), 1000);
    }

    #[test]
    fn hrandfield_counts_and_shapes() {
        let mut c = c();
        assert_eq!(c.run("hrandfield nokey"), Reply::Nil);
        assert_eq!(c.run("hrandfield nokey 5"), bulks(&[]));
        assert_eq!(c.run("hrandfield h 0"), bulks(&[]));
        assert_eq!(c.run("hrandfield h 5"), bulks(&["a", "b", "c"]));
        assert_eq!(
            c.run("hrandfield h 3 withvalues"),
            bulks(&["a", "1", "b", "2", "c", "3"])
        );
        let Reply::Bulk(one) = c.run("hrandfield h") else {
            panic!()
        };
        assert!(["a", "b", "c"].contains(&std::str::from_utf8(&one).unwrap()));
        let Reply::Array(two) = c.run("hrandfield h 2") else {
            panic!()
        };
        assert_eq!(two.len(), 2);
        assert_ne!(two[0], two[1], "positive count picks distinct fields");
        let Reply::Array(many) = c.run("hrandfield h -10 withvalues") else {
            panic!()
        };
        assert_eq!(many.len(), 20);
        for pair in many.chunks(2) {
            let (Reply::Bulk(f), Reply::Bulk(v)) = (&pair[0], &pair[1]) else {
                panic!()
            };
            assert_eq!(
                c.run(&format!("hget h {}", std::str::from_utf8(f).unwrap())),
                Reply::Bulk(v.clone())
            );
        }
        c.resp = 3;
        assert!(c
            .wire("hrandfield h 2 withvalues")
            .starts_with("*2\r\n*2\r\n"));
        c.resp = 2;
        assert_eq!(
            c.run("hrandfield h x"),
            err("ERR value is not an integer or out of range")
        );
        assert_eq!(c.run("hrandfield h 1 foo"), err("ERR syntax error"));
        assert_eq!(
            c.run("hrandfield h 1 withvalues foo"),
            err("ERR syntax error")
        );
        assert_eq!(
            c.run("hrandfield h -9223372036854775808"),
            err("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807")
        );
        assert_eq!(
            c.run("hrandfield h 9223372036854775807 withvalues"),
            err("ERR value is out of range")
        );
        assert_eq!(
            c.run("hrandfield h -9223372036854775807"),
            err("ERR value is out of range")
        );
        assert_eq!(c.run("hrandfield nokey -9223372036854775807"), bulks(&[]));
    }

    /// One command of the encoding property test, on key `h`.
    fn hash_command() -> impl proptest::strategy::Strategy<Value = Vec<String>> {
        use proptest::prelude::*;
        let field = (0..8u8).prop_map(|i| format!("f{i}"));
        let value = prop_oneof![
            4 => (0..1000i64).prop_map(|n| n.to_string()),
            1 => Just("x".repeat(20)),
            1 => Just("1.5".to_string()),
        ];
        let pairs = proptest::collection::vec((field.clone(), value.clone()), 1..4);
        prop_oneof![
            3 => pairs.prop_map(|p| {
                let mut c = vec!["hset".to_string(), "h".to_string()];
                c.extend(p.into_iter().flat_map(|(f, v)| [f, v]));
                c
            }),
            1 => (field.clone(), value.clone()).prop_map(|(f, v)| vec!["hsetnx".into(), "h".into(), f, v]),
            1 => proptest::collection::vec(field.clone(), 1..3).prop_map(|fs| {
                let mut c = vec!["hdel".to_string(), "h".to_string()];
                c.extend(fs);
                c
            }),
            1 => (field.clone(), -5..5i64).prop_map(|(f, n)| vec!["hincrby".into(), "h".into(), f, n.to_string()]),
            1 => field.clone().prop_map(|f| vec!["hincrbyfloat".into(), "h".into(), f, "0.25".into()]),
            1 => field.clone().prop_map(|f| vec!["hget".into(), "h".into(), f]),
            1 => field.clone().prop_map(|f| vec!["hexists".into(), "h".into(), f]),
            1 => field.prop_map(|f| vec!["hstrlen".into(), "h".into(), f]),
            1 => Just(vec!["hgetall".into(), "h".into()]),
            1 => Just(vec!["hkeys".into(), "h".into()]),
            1 => Just(vec!["hvals".into(), "h".into()]),
            1 => Just(vec!["hlen".into(), "h".into()]),
            1 => Just(vec!["hscan".into(), "h".into(), "0".into()]),
            1 => Just(vec!["hrandfield".into(), "h".into(), "-5".into(), "withvalues".into()]),
            1 => Just(vec!["hrandfield".into(), "h".into(), "3".into()]),
        ]
    }

    fn encoding_of(c: &Client) -> Option<&'static str> {
        match &c.ks.dbs[0].get(b"h", c.now)?.value {
            crate::store::Value::Hash(h) => Some(h.encoding()),
            _ => None,
        }
    }

    proptest::proptest! {
        /// The same commands on a hash kept compact (up to 4 fields of up to 16 bytes) and
        /// on one that is always a table answer the same, and the compact one becomes a
        /// table exactly when Redis 7.0 converts: a set of a field or value longer than the
        /// value limit, or more fields than the entries limit after a set; never back.
        #[test]
        fn compact_and_table_hashes_answer_alike(cmds in proptest::collection::vec(hash_command(), 1..60)) {
            use crate::store::encoding::EncodingLimits;
            use crate::store::hash::HashLimits;
            let mut compact = Client::new();
            compact.ks.encodings.configure(&EncodingLimits { hash: HashLimits { entries: 4, value: 16 }, ..Default::default() });
            let mut table = Client::new();
            table.ks.encodings.configure(&EncodingLimits { hash: HashLimits { entries: 0, value: 0 }, ..Default::default() });
            let mut converted = false;
            for cmd in &cmds {
                let args: Vec<bytes::Bytes> = cmd.iter().map(|w| bytes::Bytes::from(w.clone())).collect();
                let before = table.run_args(&[bytes::Bytes::from("hgetall"), bytes::Bytes::from("h")]);
                let reply = compact.run_args(&args);
                proptest::prop_assert_eq!(&reply, &table.run_args(&args), "{:?}", cmd);
                let after = table.run_args(&[bytes::Bytes::from("hgetall"), bytes::Bytes::from("h")]);
                if !matches!(reply, Reply::Error(_)) && before != after {
                    // A write that changed the hash: what Redis checks on each set.
                    let set: Vec<&String> = match cmd[0].as_str() {
                        "hset" | "hsetnx" => cmd[2..].iter().collect(),
                        "hincrby" | "hincrbyfloat" => vec![&cmd[2]],
                        _ => vec![],
                    };
                    let Reply::Integer(len) = table.run("hlen h") else { panic!() };
                    let Reply::Bulk(new_value) = (if set.len() == 1 {
                        table.run(&format!("hget h {}", cmd[2]))
                    } else {
                        Reply::Bulk(bytes::Bytes::new())
                    }) else { panic!() };
                    if !set.is_empty() {
                        converted |= len > 4 || set.iter().any(|a| a.len() > 16) || new_value.len() > 16;
                    }
                }
                if !compact.exists("h") {
                    converted = false;
                }
                let want = compact.exists("h").then_some(if converted { "hashtable" } else { "listpack" });
                proptest::prop_assert_eq!(encoding_of(&compact), want, "{:?}", cmd);
                if compact.exists("h") {
                    proptest::prop_assert_eq!(encoding_of(&table), Some("hashtable"));
                }
            }
        }
    }

    #[test]
    fn hrandfield_is_deterministic_in_seed_and_key() {
        let mut c = Client::new();
        for i in 0..50 {
            c.run(&format!("hset h f{i} {i}"));
        }
        let first = c.run("hrandfield h 5");
        assert_eq!(c.run("hrandfield h 5"), first);
        let differs = (1..20).any(|t| {
            c.seed += t;
            c.run("hrandfield h 5") != first
        });
        assert!(differs, "picks vary with the seed");
    }
}
