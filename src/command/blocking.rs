//! Blocking pops: BLPOP, BRPOP, BRPOPLPUSH, BLMOVE, BLMPOP, BZPOPMIN, BZPOPMAX, BZMPOP.
//!
//! The keyspace handlers here never block: they pop from the first non-empty key (through
//! LPOP, RPOP, LMOVE, ZPOPMIN, ZPOPMAX, so the keyspace events are those commands') or
//! answer nil, which is what Redis answers inside MULTI and what a script's BLMPOP gets.
//! Blocking is the connection's business: each row's `client` handler
//! (`crate::server::blocking`) runs the handler once and, on nil, waits for one of the keys
//! to become ready (`crate::pubsub::blocking`) or for the timeout.

use bytes::Bytes;

use super::args::{self, is, syntax_error, CmdResult};
use super::strings::run;
use super::{lists, zsets, Ctx};
use crate::protocol::Reply;
use crate::server::blocking as conn;
use crate::store::value::ListValue;
use crate::store::zset::SortedSet;

/// A blocking command's timeout in milliseconds (0: wait forever), with Redis's errors:
/// seconds as a float, rounded up to a millisecond.
pub fn parse_timeout(arg: &[u8]) -> CmdResult<u64> {
    // Whole seconds of up to 9 digits (`0` most often), exactly what the float path below
    // gives for them, without its lowercased copy and float parse (about 350 instructions
    // a call, and a blocking command parses its timeout twice).
    if !arg.is_empty() && arg.len() <= 9 && arg.iter().all(u8::is_ascii_digit) {
        let secs = arg.iter().fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
        return Ok(secs * 1000);
    }
    timeout_from_float(arg)
}

/// [`parse_timeout`] through the float parse.
fn timeout_from_float(arg: &[u8]) -> CmdResult<u64> {
    let secs = args::parse_f64(arg)
        .filter(|v| !v.is_nan())
        .ok_or_else(|| Reply::err("ERR timeout is not a float or out of range"))?;
    let ms = (secs * 1000.0).ceil();
    // Redis casts to a long long: past its range (infinity included) the value is
    // negative on the machines Redis runs on.
    if !(0.0..9.223_372_036_854_775e18).contains(&ms) {
        return Err(Reply::err("ERR timeout is negative"));
    }
    Ok(ms as u64)
}

/// The first of `keys` holding a `T` (collections are never stored empty); WRONGTYPE for
/// a key of another type met on the way, as Redis checks them in order.
fn first_ready<T: args::Kind>(ctx: &mut Ctx, keys: &[Bytes]) -> CmdResult<Option<Bytes>> {
    let now = ctx.now_ms;
    for k in keys {
        if args::lookup::<T>(ctx.db(), k, now)?.is_some() {
            return Ok(Some(k.clone()));
        }
    }
    Ok(None)
}

/// `numkeys key [key ...]` of BLMPOP / BZMPOP starting at `a[at]`, then the direction
/// word (one of `words`, answered as its index) and `[COUNT count]`.
fn parse_mpop<'a>(
    a: &'a [Bytes],
    at: usize,
    words: [&str; 2],
) -> CmdResult<(&'a [Bytes], usize, Option<i64>)> {
    let numkeys = args::int(&a[at])
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| Reply::err("ERR numkeys should be greater than 0"))?;
    let first = at + 1;
    let end = usize::try_from(numkeys)
        .ok()
        .and_then(|n| first.checked_add(n))
        .filter(|&e| e < a.len())
        .ok_or_else(syntax_error)?;
    let dir = words
        .iter()
        .position(|w| is(&a[end], w))
        .ok_or_else(syntax_error)?;
    let mut count = None;
    let mut i = end + 1;
    while i < a.len() {
        if is(&a[i], "count") && count.is_none() && i + 1 < a.len() {
            let c = args::int(&a[i + 1])
                .ok()
                .filter(|c| *c > 0)
                .ok_or_else(|| Reply::err("ERR count should be greater than 0"))?;
            count = Some(c);
            i += 2;
        } else {
            return Err(syntax_error());
        }
    }
    Ok((&a[first..end], dir, count))
}

fn name(s: &'static str) -> Bytes {
    Bytes::from_static(s.as_bytes())
}

fn bpop_list(ctx: &mut Ctx, a: &[Bytes], pop: &'static str) -> Reply {
    run((|| {
        parse_timeout(&a[a.len() - 1])?;
        let Some(key) = first_ready::<ListValue>(ctx, &a[1..a.len() - 1])? else {
            return Ok(Reply::NilArray);
        };
        let args = [name(pop), key.clone()];
        let v = if pop == "lpop" {
            lists::lpop(ctx, &args)
        } else {
            lists::rpop(ctx, &args)
        };
        Ok(Reply::Array(vec![Reply::Bulk(key), v]))
    })())
}

/// BLPOP key [key ...] timeout
pub fn blpop(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    bpop_list(ctx, a, "lpop")
}

/// BRPOP key [key ...] timeout
pub fn brpop(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    bpop_list(ctx, a, "rpop")
}

/// BRPOPLPUSH source destination timeout
pub fn brpoplpush(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    run((|| {
        parse_timeout(&a[3])?;
        if first_ready::<ListValue>(ctx, &a[1..2])?.is_none() {
            return Ok(Reply::Nil);
        }
        Ok(lists::rpoplpush(
            ctx,
            &[name("rpoplpush"), a[1].clone(), a[2].clone()],
        ))
    })())
}

/// BLMOVE source destination LEFT|RIGHT LEFT|RIGHT timeout
pub fn blmove(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    run((|| {
        for end in &a[3..5] {
            if !is(end, "left") && !is(end, "right") {
                return Err(syntax_error());
            }
        }
        parse_timeout(&a[5])?;
        if first_ready::<ListValue>(ctx, &a[1..2])?.is_none() {
            return Ok(Reply::Nil);
        }
        let mut args = a[..5].to_vec();
        args[0] = name("lmove");
        Ok(lists::lmove(ctx, &args))
    })())
}

/// BLMPOP timeout numkeys key [key ...] LEFT|RIGHT [COUNT count]
pub fn blmpop(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    match parse_timeout(&a[1]) {
        Ok(_) => mpop_list(ctx, a, 2),
        Err(e) => e,
    }
}

/// LMPOP's core, `numkeys key [key ...] LEFT|RIGHT [COUNT count]` from `a[at]`: the first
/// non-empty list's popped elements as `[key, [elements]]`, or a nil array (LMPOP is
/// `mpop_list(ctx, a, 1)`).
pub fn mpop_list(ctx: &mut Ctx, a: &[Bytes], at: usize) -> Reply {
    run((|| {
        let (keys, dir, count) = parse_mpop(a, at, ["left", "right"])?;
        let Some(key) = first_ready::<ListValue>(ctx, keys)? else {
            return Ok(Reply::NilArray);
        };
        let count = Bytes::from(count.unwrap_or(1).to_string());
        let args = [name(["lpop", "rpop"][dir]), key.clone(), count];
        let popped = if dir == 0 {
            lists::lpop(ctx, &args)
        } else {
            lists::rpop(ctx, &args)
        };
        Ok(Reply::Array(vec![Reply::Bulk(key), popped]))
    })())
}

fn bzpop(ctx: &mut Ctx, a: &[Bytes], max: bool) -> Reply {
    run((|| {
        parse_timeout(&a[a.len() - 1])?;
        let Some(key) = first_ready::<SortedSet>(ctx, &a[1..a.len() - 1])? else {
            return Ok(Reply::NilArray);
        };
        let args = [name(if max { "zpopmax" } else { "zpopmin" }), key.clone()];
        let popped = if max {
            zsets::zpopmax(ctx, &args)
        } else {
            zsets::zpopmin(ctx, &args)
        };
        let mut out = vec![Reply::Bulk(key)];
        if let Reply::Array(items) = popped {
            out.extend(items);
        }
        Ok(Reply::Array(out))
    })())
}

/// BZPOPMIN key [key ...] timeout
pub fn bzpopmin(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    bzpop(ctx, a, false)
}

/// BZPOPMAX key [key ...] timeout
pub fn bzpopmax(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    bzpop(ctx, a, true)
}

/// BZMPOP timeout numkeys key [key ...] MIN|MAX [COUNT count]
pub fn bzmpop(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    match parse_timeout(&a[1]) {
        Ok(_) => mpop_zset(ctx, a, 2),
        Err(e) => e,
    }
}

/// ZMPOP's core, `numkeys key [key ...] MIN|MAX [COUNT count]` from `a[at]`: the first
/// non-empty sorted set's popped members as `[key, [[member, score], ...]]`, or a nil
/// array (ZMPOP is `mpop_zset(ctx, a, 1)`).
pub fn mpop_zset(ctx: &mut Ctx, a: &[Bytes], at: usize) -> Reply {
    run((|| {
        let (keys, dir, count) = parse_mpop(a, at, ["min", "max"])?;
        let Some(key) = first_ready::<SortedSet>(ctx, keys)? else {
            return Ok(Reply::NilArray);
        };
        let count = Bytes::from(count.unwrap_or(1).to_string());
        let args = [name(["zpopmin", "zpopmax"][dir]), key.clone(), count];
        let popped = if dir == 0 {
            zsets::zpopmin(ctx, &args)
        } else {
            zsets::zpopmax(ctx, &args)
        };
        // ZPOPMIN with a count answers flat pairs in RESP2; ZMPOP nests them in both.
        let pairs = match popped {
            Reply::Array(items) if ctx.resp < 3 => {
                let mut pairs = Vec::with_capacity(items.len() / 2);
                let mut it = items.into_iter();
                while let (Some(m), Some(s)) = (it.next(), it.next()) {
                    pairs.push(Reply::Array(vec![m, s]));
                }
                Reply::Array(pairs)
            }
            other => other,
        };
        Ok(Reply::Array(vec![Reply::Bulk(key), pairs]))
    })())
}

use super::flags::{BLOCKING, DENYOOM, FAST, NOSCRIPT, WRITE};
use super::Keys;

/// Blocking commands. Redis lets scripts call BLMPOP and BZMPOP (which then do not
/// block) but not the others.
pub const COMMANDS: &[super::CommandSpec] = &[
    crate::cmd!("blpop", -3, WRITE | NOSCRIPT | BLOCKING, 1, -2, 1, client: conn::list_keys_then_timeout, blpop),
    crate::cmd!("brpop", -3, WRITE | NOSCRIPT | BLOCKING, 1, -2, 1, client: conn::list_keys_then_timeout, brpop),
    crate::cmd!("brpoplpush", 4, WRITE | DENYOOM | NOSCRIPT | BLOCKING, 1, 2, 1, client: conn::list_source, brpoplpush),
    crate::cmd!("blmove", 6, WRITE | DENYOOM | NOSCRIPT | BLOCKING, 1, 2, 1, client: conn::list_source, blmove),
    crate::cmd!("blmpop", -5, WRITE | BLOCKING, keys: Keys::Counted { at: 2, optional: false }, client: conn::list_numkeys, blmpop),
    crate::cmd!("bzpopmin", -3, WRITE | NOSCRIPT | BLOCKING | FAST, 1, -2, 1, client: conn::zset_keys_then_timeout, bzpopmin),
    crate::cmd!("bzpopmax", -3, WRITE | NOSCRIPT | BLOCKING | FAST, 1, -2, 1, client: conn::zset_keys_then_timeout, bzpopmax),
    crate::cmd!("bzmpop", -5, WRITE | BLOCKING, keys: Keys::Counted { at: 2, optional: false }, client: conn::zset_numkeys, bzmpop),
];

#[cfg(test)]
mod tests {
    use super::{parse_timeout, timeout_from_float};

    #[test]
    fn whole_seconds_parse_as_the_float_path_does() {
        for arg in ["0", "1", "007", "10", "86400", "123456789", "999999999"] {
            assert_eq!(
                parse_timeout(arg.as_bytes()).ok(),
                timeout_from_float(arg.as_bytes()).ok(),
                "{arg}"
            );
        }
        assert_eq!(parse_timeout(b"0").ok(), Some(0));
        assert_eq!(parse_timeout(b"42").ok(), Some(42_000));
        assert_eq!(parse_timeout(b"1234567890").ok(), Some(1_234_567_890_000));
        assert_eq!(parse_timeout(b"0.0015").ok(), Some(2));
        for bad in ["", "-1", "1x", " 1", "abc", "nan"] {
            assert!(parse_timeout(bad.as_bytes()).is_err(), "{bad}");
        }
    }
}
