//! Set commands: membership, SPOP/SRANDMEMBER, the algebra (SINTER, SUNION, SDIFF and
//! their STORE forms, SINTERCARD), SMOVE and SSCAN.
//!
//! Sets iterate in their encoding's order (ascending for an intset, as Redis; insertion
//! order for a table: `store::set`), and SPOP picks by index with the deterministic
//! generator of `collection`, so the same SPOP removes the same members on every replica.

use bytes::Bytes;

use super::args::{self, is, syntax_error, CmdResult};
use super::collection::{exists_where, pop_count, random_picks, scan_step, symmetric_int};
use super::collection::{update_live, update_notify, Rng};
use super::keys::{parse_scan, scan_reply};
use super::strings::run;
use super::Ctx;
use crate::protocol::Reply;
use crate::pubsub::notify::{GENERIC, REMOVAL, SET};
use crate::store::value::SetValue;
use crate::store::Value;

fn read_set<'a>(ctx: &'a mut Ctx, key: &[u8]) -> CmdResult<Option<&'a SetValue>> {
    let now = ctx.now_ms;
    args::read::<SetValue>(ctx.db(), key, now)
}

fn set_reply(members: impl IntoIterator<Item = Bytes>) -> Reply {
    Reply::Set(members.into_iter().map(Reply::Bulk).collect())
}

/// SADD key member [member ...] (a `fast` row: the connection hands it the request's
/// frame, without an argument list; it keeps copies of the members, never the slices)
pub fn sadd(ctx: &mut Ctx, a: &[&[u8]]) -> Reply {
    let members = &a[2..];
    let limit = ctx.ks.encodings.set();
    let add = |s: &mut SetValue| Ok(members.iter().filter(|m| s.insert(m, limit)).count() as i64);
    // Adding only existing members changes nothing and fires no WATCH, as in Redis: the
    // event (and the signal) come only when a member was added.
    let event = |n: &i64| (*n > 0).then_some("sadd");
    run((|| {
        // An existing set: one keyspace lookup and one hash of each member. An absent (or
        // expired) key takes `update_notify`'s path, which creates it.
        if let Some(added) = update_live::<SetValue, _>(ctx, a[1], SET, event, add) {
            return added.map(Reply::Integer);
        }
        let added = update_notify::<SetValue, _>(ctx, a[1], true, SET, event, add)?;
        Ok(Reply::Integer(added.unwrap_or(0)))
    })())
}

/// SREM key member [member ...]
pub fn srem(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    let members = &a[2..];
    run((|| {
        if !exists_where::<SetValue>(ctx, &a[1], |s| members.iter().any(|m| s.contains(m)))? {
            return Ok(Reply::Integer(0));
        }
        let event = |n: &i64| (*n > 0).then_some("srem");
        let removed = update_notify::<SetValue, _>(ctx, &a[1], false, SET | REMOVAL, event, |s| {
            Ok(members.iter().filter(|m| s.remove(m)).count() as i64)
        })?;
        Ok(Reply::Integer(removed.unwrap_or(0)))
    })())
}

/// SMEMBERS key
pub fn smembers(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    read_set(ctx, &a[1]).map_or_else(|e| e, |s| set_reply(s.into_iter().flat_map(|s| s.iter())))
}

/// SISMEMBER key member
pub fn sismember(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    match read_set(ctx, &a[1]) {
        Err(e) => e,
        Ok(s) => Reply::Integer(s.is_some_and(|s| s.contains(&a[2])) as i64),
    }
}

/// SMISMEMBER key member [member ...]
pub fn smismember(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    match read_set(ctx, &a[1]) {
        Err(e) => e,
        Ok(s) => Reply::Array(
            a[2..]
                .iter()
                .map(|m| Reply::Integer(s.is_some_and(|s| s.contains(m)) as i64))
                .collect(),
        ),
    }
}

/// SCARD key
pub fn scard(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    match read_set(ctx, &a[1]) {
        Err(e) => e,
        Ok(s) => Reply::Integer(s.map_or(0, |s| s.len() as i64)),
    }
}

/// SPOP key [count]
pub fn spop(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    run((|| {
        let count = pop_count(a)?;
        let seed = ctx.seed;
        let key = &a[1];
        let now = ctx.now_ms;
        let Some(size) = args::lookup::<SetValue>(ctx.db(), key, now)?.map(|s| s.len()) else {
            return Ok(if count.is_some() {
                Reply::Set(Vec::new())
            } else {
                Reply::Nil
            });
        };
        if count == Some(0) {
            return Ok(Reply::Set(Vec::new()));
        }
        let want = count.map_or(1, |c| usize::try_from(c).unwrap_or(usize::MAX));
        let event = |p: &Vec<Bytes>| (!p.is_empty()).then_some("spop");
        let popped = update_notify::<SetValue, _>(ctx, key, false, SET | REMOVAL, event, |s| {
            if want >= size {
                // Popping everything answers the whole set in order, as Redis does.
                return Ok(std::mem::take(s).iter().collect());
            }
            let picks = Rng::new(seed, key, size).distinct(size, want);
            let members: Vec<Bytes> = picks.iter().filter_map(|&i| s.get_index(i)).collect();
            for m in &members {
                s.remove(m);
            }
            Ok(members)
        })?
        .unwrap_or_default();
        Ok(match count {
            Some(_) => Reply::Set(popped.into_iter().map(Reply::Bulk).collect()),
            None => popped.into_iter().next().map_or(Reply::Nil, Reply::Bulk),
        })
    })())
}

/// SRANDMEMBER key [count]
pub fn srandmember(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    run((|| {
        if a.len() > 3 {
            return Err(syntax_error());
        }
        let count = a.get(2).map(|c| symmetric_int(c)).transpose()?;
        let seed = ctx.seed;
        let s = read_set(ctx, &a[1])?;
        let Some(count) = count else {
            let Some(s) = s.filter(|s| !s.is_empty()) else {
                return Ok(Reply::Nil);
            };
            let i = Rng::new(seed, &a[1], s.len()).below(s.len());
            return Ok(s.get_index(i).map_or(Reply::Nil, Reply::Bulk));
        };
        let Some(s) = s else {
            return Ok(Reply::Array(Vec::new()));
        };
        let picks = random_picks(&mut Rng::new(seed, &a[1], s.len()), s.len(), count)?;
        Ok(args::bulk_array(
            picks.into_iter().filter_map(|i| s.get_index(i)),
        ))
    })())
}

/// Which set operation.
#[derive(Clone, Copy, PartialEq)]
enum Algebra {
    Inter,
    Union,
    Diff,
}

/// The sets at `keys` (None for absent keys), type-checking every key as Redis does.
fn load_sets<'a>(ctx: &'a mut Ctx, keys: &[Bytes]) -> CmdResult<Vec<Option<&'a SetValue>>> {
    let now = ctx.now_ms;
    let db: &'a crate::store::Db = ctx.db();
    keys.iter()
        .map(|k| args::read::<SetValue>(db, k, now))
        .collect()
}

/// Compute an intersection, union or difference, in the order of the sets it walks.
fn compute(sets: &[Option<&SetValue>], op: Algebra, limit: usize) -> Vec<Bytes> {
    match op {
        Algebra::Inter => {
            if sets.iter().any(Option::is_none) {
                return Vec::new();
            }
            let mut sets: Vec<&SetValue> = sets.iter().flatten().copied().collect();
            // Walk the smallest set (stable sort: ties keep argument order).
            sets.sort_by_key(|s| s.len());
            let Some((first, rest)) = sets.split_first() else {
                return Vec::new();
            };
            first
                .iter()
                .filter(|m| rest.iter().all(|s| s.contains(m)))
                .take(limit)
                .collect()
        }
        Algebra::Union => {
            let mut seen = std::collections::HashSet::new();
            sets.iter()
                .flatten()
                .flat_map(|s| s.iter())
                .filter(|m| seen.insert(m.clone()))
                .collect()
        }
        Algebra::Diff => {
            let Some(Some(first)) = sets.first() else {
                return Vec::new();
            };
            first
                .iter()
                .filter(|m| sets[1..].iter().flatten().all(|s| !s.contains(m)))
                .collect()
        }
    }
}

/// The result as Redis 7.0 builds it: the members added one by one to a new intset
/// (`sinterGenericCommand`, `sunionDiffGenericCommand`), so a result of few integers is
/// an intset and answers in ascending order.
fn algebra(ctx: &mut Ctx, keys: &[Bytes], op: Algebra) -> CmdResult<SetValue> {
    let limit = ctx.ks.encodings.set();
    let sets = load_sets(ctx, keys)?;
    Ok(SetValue::from_members(
        compute(&sets, op, usize::MAX),
        limit,
    ))
}

fn algebra_reply(ctx: &mut Ctx, a: &[Bytes], op: Algebra) -> Reply {
    if op == Algebra::Inter {
        // SINTER answers in the order it walks the smallest set, as Redis streams it.
        return load_sets(ctx, &a[1..])
            .map_or_else(|e| e, |sets| set_reply(compute(&sets, op, usize::MAX)));
    }
    algebra(ctx, &a[1..], op).map_or_else(|e| e, |s| set_reply(s.iter()))
}

fn algebra_store(ctx: &mut Ctx, a: &[Bytes], op: Algebra, event: &'static str) -> Reply {
    run((|| {
        let set = algebra(ctx, &a[2..], op)?;
        let n = set.len() as i64;
        let now = ctx.now_ms;
        let db = ctx.db();
        if set.is_empty() {
            if db.remove(&a[1], now).is_some() {
                ctx.notify(GENERIC | REMOVAL, "del", &a[1]);
            }
        } else {
            db.set(&a[1], Value::Set(set));
            ctx.notify(SET, event, &a[1]);
        }
        Ok(Reply::Integer(n))
    })())
}

/// SINTER key [key ...]
pub fn sinter(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    algebra_reply(ctx, a, Algebra::Inter)
}

/// SUNION key [key ...]
pub fn sunion(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    algebra_reply(ctx, a, Algebra::Union)
}

/// SDIFF key [key ...]
pub fn sdiff(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    algebra_reply(ctx, a, Algebra::Diff)
}

/// SINTERSTORE destination key [key ...]
pub fn sinterstore(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    algebra_store(ctx, a, Algebra::Inter, "sinterstore")
}

/// SUNIONSTORE destination key [key ...]
pub fn sunionstore(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    algebra_store(ctx, a, Algebra::Union, "sunionstore")
}

/// SDIFFSTORE destination key [key ...]
pub fn sdiffstore(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    algebra_store(ctx, a, Algebra::Diff, "sdiffstore")
}

/// Parse `numkeys key [key ...]` at `a[1..]` plus trailing `LIMIT n`, as SINTERCARD and
/// ZINTERCARD do; returns the keys and the limit (0 = none).
pub fn parse_card_args(a: &[Bytes]) -> CmdResult<(&[Bytes], usize)> {
    let numkeys = match args::parse_i64(&a[1]) {
        Some(n) if n > 0 => n as u64,
        _ => return Err(Reply::err("ERR numkeys should be greater than 0")),
    };
    let room = (a.len() - 2) as u64;
    if numkeys > room {
        return Err(Reply::err(
            "ERR Number of keys can't be greater than number of args",
        ));
    }
    let end = 2 + numkeys as usize;
    let mut limit = 0;
    let mut i = end;
    while i < a.len() {
        match a.get(i + 1) {
            Some(n) if is(&a[i], "limit") => {
                let n = args::non_negative(n, "")
                    .map_err(|_| Reply::err("ERR LIMIT can't be negative"))?;
                limit = usize::try_from(n).unwrap_or(usize::MAX);
            }
            _ => return Err(syntax_error()),
        }
        i += 2;
    }
    Ok((&a[2..end], limit))
}

/// SINTERCARD numkeys key [key ...] [LIMIT limit]
pub fn sintercard(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    run((|| {
        let (keys, limit) = parse_card_args(a)?;
        let sets = load_sets(ctx, keys)?;
        let limit = if limit == 0 { usize::MAX } else { limit };
        Ok(Reply::Integer(
            compute(&sets, Algebra::Inter, limit).len() as i64
        ))
    })())
}

/// SMOVE source destination member
pub fn smove(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    run((|| {
        let (src, dst, member) = (&a[1], &a[2], &a[3]);
        let now = ctx.now_ms;
        let db = ctx.db();
        if !db.contains(src, now) {
            return Ok(Reply::Integer(0));
        }
        let in_src = args::lookup::<SetValue>(db, src, now)?.is_some_and(|s| s.contains(member));
        let in_dst = args::lookup::<SetValue>(db, dst, now)?.is_some_and(|s| s.contains(member));
        if src == dst || !in_src {
            return Ok(Reply::Integer(in_src as i64));
        }
        let limit = ctx.ks.encodings.set();
        update_notify::<SetValue, _>(
            ctx,
            src,
            false,
            SET | REMOVAL,
            |_| Some("srem"),
            |s| Ok(s.remove(member)),
        )?;
        // As Redis: the destination changes (WATCH, the `sadd` event) only when the member
        // was not in it already.
        if in_dst {
            return Ok(Reply::Integer(1));
        }
        update_notify::<SetValue, _>(
            ctx,
            dst,
            true,
            SET,
            |_| Some("sadd"),
            |s| Ok(s.insert(member, limit)),
        )?;
        Ok(Reply::Integer(1))
    })())
}

/// SSCAN key cursor [MATCH pattern] [COUNT count]
pub fn sscan(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    run((|| {
        // Redis validates the cursor before the key and the options only if it exists.
        parse_scan(&a[..3], 2, false)?;
        let Some(s) = read_set(ctx, &a[1])? else {
            return Ok(scan_reply(0, Vec::new()));
        };
        let opts = parse_scan(a, 2, false)?;
        // A table is walked in place (only the step's members are copied into the reply);
        // an intset's members are formatted first. Redis answers an intset whole whatever
        // its size, like a listpack.
        let (next, items): (u64, Vec<Bytes>) = match s {
            SetValue::Table(t) => {
                let (next, items) = scan_step(t.iter().map(|m| (m, ())), t.len(), &opts);
                let items = items.into_iter().map(|(m, _)| Bytes::copy_from_slice(m));
                (next, items.collect())
            }
            SetValue::Ints(_) => {
                let members: Vec<Bytes> = s.iter().collect();
                let (next, items) = scan_step(members.iter().map(|m| (m, ())), 0, &opts);
                (next, items.into_iter().map(|(m, _)| m.clone()).collect())
            }
        };
        Ok(scan_reply(
            next,
            items.into_iter().map(Reply::Bulk).collect(),
        ))
    })())
}

use super::flags::{DENYOOM, FAST, RANDOM, READONLY, WRITE};

/// Set commands.
pub const COMMANDS: &[super::CommandSpec] = &[
    crate::cmd!("sadd", -3, WRITE | DENYOOM | FAST, 1, 1, 1, fast: sadd),
    crate::cmd!("srem", -3, WRITE | FAST, 1, 1, 1, srem),
    crate::cmd!("smembers", 2, READONLY, 1, 1, 1, smembers),
    crate::cmd!("sismember", 3, READONLY | FAST, 1, 1, 1, sismember),
    crate::cmd!("smismember", -3, READONLY | FAST, 1, 1, 1, smismember),
    crate::cmd!("scard", 2, READONLY | FAST, 1, 1, 1, scard),
    crate::cmd!("spop", -2, WRITE | FAST | RANDOM, 1, 1, 1, spop),
    crate::cmd!("srandmember", -2, READONLY | RANDOM, 1, 1, 1, srandmember),
    crate::cmd!("sinter", -2, READONLY, 1, -1, 1, sinter),
    crate::cmd!("sunion", -2, READONLY, 1, -1, 1, sunion),
    crate::cmd!("sdiff", -2, READONLY, 1, -1, 1, sdiff),
    crate::cmd!("sinterstore", -3, WRITE | DENYOOM, 1, -1, 1, sinterstore),
    crate::cmd!("sunionstore", -3, WRITE | DENYOOM, 1, -1, 1, sunionstore),
    crate::cmd!("sdiffstore", -3, WRITE | DENYOOM, 1, -1, 1, sdiffstore),
    crate::cmd!(
        "sintercard",
        -3,
        READONLY,
        keys: super::Keys::Counted {
            at: 1,
            optional: false
        },
        sintercard
    ),
    crate::cmd!("smove", 4, WRITE | FAST, 1, 2, 1, smove),
    crate::cmd!("sscan", -3, READONLY, 1, 1, 1, sscan),
];

#[cfg(test)]
mod tests {
    use super::super::collection::harness::{bulk, bulks, err, wrongtype, Client};
    use crate::protocol::Reply;

    fn c() -> Client {
        let mut c = Client::new();
        c.run("set str x");
        c.run("sadd s1 a b c d");
        c.run("sadd s2 c d e f");
        c
    }

    fn set(items: &[&str]) -> Reply {
        Reply::Set(items.iter().map(|s| bulk(s)).collect())
    }

    #[test]
    fn membership() {
        let mut c = c();
        assert_eq!(c.run("sadd s1 a e"), Reply::Integer(1));
        assert_eq!(c.run("smembers s1"), set(&["a", "b", "c", "d", "e"]));
        assert_eq!(c.run("sismember s1 b"), Reply::Integer(1));
        assert_eq!(c.run("sismember nokey b"), Reply::Integer(0));
        assert_eq!(
            c.run("smismember s1 b zz"),
            Reply::Array(vec![Reply::Integer(1), Reply::Integer(0)])
        );
        assert_eq!(
            c.run("smismember nokey a"),
            Reply::Array(vec![Reply::Integer(0)])
        );
        assert_eq!(c.run("scard s1"), Reply::Integer(5));
        assert_eq!(c.run("scard nokey"), Reply::Integer(0));
        assert_eq!(c.run("smembers nokey"), set(&[]));
        c.resp = 3;
        assert!(c.wire("smembers s1").starts_with("~5\r\n"));
        assert_eq!(c.run("srem s1 a zz a"), Reply::Integer(1));
        assert_eq!(c.run("srem s1 b c d e"), Reply::Integer(4));
        assert!(!c.exists("s1"));
        assert_eq!(c.run("srem nokey a"), Reply::Integer(0));
        for cmd in [
            "sadd str a",
            "srem str a",
            "smembers str",
            "sismember str a",
            "scard str",
            "spop str",
            "srandmember str 1",
            "sscan str 0",
        ] {
            assert_eq!(c.run(cmd), wrongtype(), "{cmd}");
        }
        assert_eq!(
            c.run("sadd s1"),
            err("ERR wrong number of arguments for 'sadd' command")
        );
    }

    #[test]
    fn spop_is_deterministic_and_removes() {
        let (mut a, mut b) = (c(), c());
        let pa = a.run("spop s1 2");
        assert_eq!(b.run("spop s1 2"), pa, "same state and time, same pick");
        let Reply::Set(popped) = pa else {
            panic!("SPOP with count replies a set")
        };
        assert_eq!(popped.len(), 2);
        assert_eq!(a.run("scard s1"), Reply::Integer(2));
        for m in &popped {
            let Reply::Bulk(m) = m else { panic!() };
            let m = std::str::from_utf8(m).unwrap();
            assert_eq!(a.run(&format!("sismember s1 {m}")), Reply::Integer(0));
        }
        assert_eq!(a.run("smembers s1"), b.run("smembers s1"));
        assert!(matches!(a.run("spop s1"), Reply::Bulk(_)));
        let Reply::Set(rest) = a.run("spop s1 10") else {
            panic!()
        };
        assert_eq!(rest.len(), 1);
        assert!(!a.exists("s1"), "an emptied set is deleted");
        // Different seeds pick differently somewhere.
        let mut firsts = std::collections::HashSet::new();
        for t in 0..20 {
            let mut c = c();
            c.seed += t;
            firsts.insert(format!("{:?}", c.run("spop s1")));
        }
        assert!(firsts.len() > 1);
    }

    #[test]
    fn spop_counts_and_errors() {
        let mut c = c();
        assert_eq!(c.run("spop s1 0"), set(&[]));
        assert_eq!(c.run("spop nokey 0"), set(&[]));
        assert_eq!(c.run("spop nokey 2"), set(&[]));
        assert_eq!(c.run("spop nokey"), Reply::Nil);
        assert_eq!(
            c.run("spop s1 -1"),
            err("ERR value is out of range, must be positive")
        );
        assert_eq!(
            c.run("spop s1 x"),
            err("ERR value is out of range, must be positive")
        );
        assert_eq!(c.run("spop s1 1 2"), err("ERR syntax error"));
        assert_eq!(c.run("scard s1"), Reply::Integer(4));
        assert_eq!(
            c.run("spop s1 9223372036854775807"),
            set(&["a", "b", "c", "d"])
        );
        assert!(!c.exists("s1"));
    }

    #[test]
    fn srandmember_counts() {
        let mut c = c();
        assert_eq!(c.run("srandmember s1 0"), bulks(&[]));
        assert_eq!(c.run("srandmember nokey -3"), bulks(&[]));
        assert_eq!(c.run("srandmember nokey"), Reply::Nil);
        assert_eq!(c.run("srandmember s1 10"), bulks(&["a", "b", "c", "d"]));
        let Reply::Array(two) = c.run("srandmember s1 2") else {
            panic!()
        };
        assert_eq!(two.len(), 2);
        assert_ne!(two[0], two[1]);
        let Reply::Array(many) = c.run("srandmember s1 -9") else {
            panic!()
        };
        assert_eq!(many.len(), 9);
        assert_eq!(
            c.run("srandmember s1 x"),
            err("ERR value is not an integer or out of range")
        );
        assert_eq!(c.run("srandmember s1 1 2"), err("ERR syntax error"));
        assert_eq!(
            c.run("srandmember s1 -9223372036854775808"),
            err("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807")
        );
        // Redis would stream 2^63 members; Tollgate refuses rather than allocate them.
        assert_eq!(
            c.run("srandmember s1 -9223372036854775807"),
            err("ERR value is out of range")
        );
        assert_eq!(
            c.run("scard s1"),
            Reply::Integer(4),
            "a read changes nothing"
        );
    }

    #[test]
    fn algebra() {
        let mut c = c();
        assert_eq!(c.run("sinter s1 s2"), set(&["c", "d"]));
        assert_eq!(c.run("sunion s1 s2"), set(&["a", "b", "c", "d", "e", "f"]));
        assert_eq!(c.run("sdiff s1 s2"), set(&["a", "b"]));
        assert_eq!(c.run("sinter s1 nokey"), set(&[]));
        assert_eq!(c.run("sdiff nokey s1"), set(&[]));
        assert_eq!(c.run("sunion nokey s2"), set(&["c", "d", "e", "f"]));
        assert_eq!(
            c.run("sinter nokey str"),
            wrongtype(),
            "every key is type-checked"
        );
        assert_eq!(c.run("sdiff str nokey"), wrongtype());
        assert_eq!(c.run("sunion s1 str"), wrongtype());
        assert_eq!(c.run("sinterstore d s1 s2"), Reply::Integer(2));
        assert_eq!(c.run("smembers d"), set(&["c", "d"]));
        assert_eq!(
            c.run("sunionstore str s1 s2"),
            Reply::Integer(6),
            "a destination of another type is replaced"
        );
        assert_eq!(
            c.run("sdiffstore s1 s1 s2"),
            Reply::Integer(2),
            "a source may be the destination"
        );
        assert_eq!(c.run("smembers s1"), set(&["a", "b"]));
        c.run("pexpire d 5000");
        assert_eq!(c.run("sinterstore d s1 nokey"), Reply::Integer(0));
        assert!(!c.exists("d"), "an empty result deletes the destination");
        assert_eq!(c.run("sinterstore d s1 s2 s3"), Reply::Integer(0));
        c.run("set t x");
        assert_eq!(c.run("sinterstore d s1 t"), wrongtype());
    }

    #[test]
    fn sintercard_rules() {
        let mut c = c();
        assert_eq!(c.run("sintercard 2 s1 s2"), Reply::Integer(2));
        assert_eq!(c.run("sintercard 2 s1 s2 limit 1"), Reply::Integer(1));
        assert_eq!(c.run("sintercard 2 s1 s2 LIMIT 0"), Reply::Integer(2));
        assert_eq!(c.run("sintercard 1 nokey"), Reply::Integer(0));
        assert_eq!(
            c.run("sintercard 0 s1"),
            err("ERR numkeys should be greater than 0")
        );
        assert_eq!(
            c.run("sintercard x s1"),
            err("ERR numkeys should be greater than 0")
        );
        assert_eq!(
            c.run("sintercard 3 s1 s2"),
            err("ERR Number of keys can't be greater than number of args")
        );
        assert_eq!(
            c.run("sintercard 9223372036854775807 s1"),
            err("ERR Number of keys can't be greater than number of args")
        );
        assert_eq!(c.run("sintercard 1 s1 s2"), err("ERR syntax error"));
        assert_eq!(c.run("sintercard 2 s1 s2 limit"), err("ERR syntax error"));
        assert_eq!(
            c.run("sintercard 2 s1 s2 limit -1"),
            err("ERR LIMIT can't be negative")
        );
        assert_eq!(
            c.run("sintercard 2 s1 s2 limit x"),
            err("ERR LIMIT can't be negative")
        );
        assert_eq!(c.run("sintercard 2 nokey str"), wrongtype());
    }

    #[test]
    fn smove_rules() {
        let mut c = c();
        assert_eq!(c.run("smove s1 s2 zz"), Reply::Integer(0));
        assert_eq!(c.run("smove s1 str a"), wrongtype());
        assert_eq!(c.run("smove s1 str zz"), wrongtype());
        assert_eq!(c.run("smove str s1 zz"), wrongtype());
        assert_eq!(c.run("smove nokey str a"), Reply::Integer(0));
        assert_eq!(c.run("smove s1 s1 zz"), Reply::Integer(0));
        assert_eq!(c.run("smove s1 s1 b"), Reply::Integer(1));
        assert_eq!(c.run("smove s1 s3 b"), Reply::Integer(1));
        assert_eq!(c.run("smembers s3"), set(&["b"]));
        assert_eq!(c.run("sismember s1 b"), Reply::Integer(0));
        c.run("sadd one x");
        assert_eq!(c.run("smove one s3 x"), Reply::Integer(1));
        assert!(!c.exists("one"));
    }

    #[test]
    fn sscan_rules() {
        let mut c = c();
        assert_eq!(
            c.run("sscan s1 0"),
            Reply::Array(vec![bulk("0"), bulks(&["a", "b", "c", "d"])])
        );
        assert_eq!(
            c.run("sscan s1 0 match [bc]"),
            Reply::Array(vec![bulk("0"), bulks(&["b", "c"])])
        );
        assert_eq!(c.run("sscan s1 x"), err("ERR invalid cursor"));
        assert_eq!(c.run("sscan s1 0 count 0"), err("ERR syntax error"));
        assert_eq!(
            c.run("sscan nokey 0 count 0"),
            Reply::Array(vec![bulk("0"), bulks(&[])])
        );
    }
}
