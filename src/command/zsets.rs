//! Sorted-set commands: ZADD and its flags, ZINCRBY, ZREM, counts and scores, ranks,
//! the ZRANGE family (by rank, score or lex, forward or reversed, with LIMIT and
//! WITHSCORES, and ZRANGESTORE), the ZREMRANGEBY* family, ZPOPMIN/ZPOPMAX, ZSCAN and
//! ZRANDMEMBER. The value itself, its argument parsers and its score printer live in
//! `store::zset`.
//!
//! Scores are answered in Redis 7.0's form: a `%.17g` bulk string under RESP2 (what
//! clients and Lua scripts see: `0.1` prints as `0.10000000000000001`), a double under
//! RESP3.

use bytes::Bytes;

use super::args::{self, int, is, syntax_error, CmdResult};
use super::collection::{
    exists_where, pop_count, random_picks, symmetric_int, update_live, update_notify, Rng,
};
use super::keys::{parse_scan, scan_reply};
use super::strings::run;
use super::Ctx;
use crate::glob::glob_match;
use crate::numbers::format_double;
use crate::protocol::Reply;
use crate::pubsub::notify::{GENERIC, REMOVAL, ZSET};
use crate::store::zset::{
    normalize_range, parse_lex_bound, parse_score, parse_score_bound, AddFlags, AddOutcome,
    LexBound, ScoreBound, SortedSet, ZsetLimits, ERR_NAN_RESULT,
};
use crate::store::Value;

/// The sorted set at `key`, a read lookup (counts a keyspace hit or miss).
pub(super) fn read_zset<'a>(ctx: &'a mut Ctx, key: &[u8]) -> CmdResult<Option<&'a SortedSet>> {
    let now = ctx.now_ms;
    args::read::<SortedSet>(ctx.db(), key, now)
}

/// [`read_zset`] for a command that writes the key (no hit or miss counted).
fn lookup_zset<'a>(ctx: &'a mut Ctx, key: &[u8]) -> CmdResult<Option<&'a SortedSet>> {
    let now = ctx.now_ms;
    args::lookup::<SortedSet>(ctx.db(), key, now)
}

/// A score as Redis 7.0 replies it to a client speaking `resp`.
fn score_reply(resp: u8, score: f64) -> Reply {
    if resp >= 3 {
        Reply::Double(score)
    } else {
        Reply::Bulk(Bytes::from(format_double(score)))
    }
}

/// Members with their scores: flat `[m, s, ...]` in RESP2, `[[m, s], ...]` in RESP3.
fn pairs_reply<M: Member>(resp: u8, items: impl Iterator<Item = (M, f64)>) -> Reply {
    if resp >= 3 {
        Reply::Array(
            items
                .map(|(m, s)| Reply::Array(vec![m.bulk(), Reply::Double(s)]))
                .collect(),
        )
    } else {
        Reply::Array(
            items
                .flat_map(|(m, s)| [m.bulk(), score_reply(resp, s)])
                .collect(),
        )
    }
}

/// A member in a reply: popped members move in; members read from a set are copied (a
/// small set's members are bytes of its buffer).
trait Member {
    fn bulk(self) -> Reply;
}

impl Member for Bytes {
    fn bulk(self) -> Reply {
        Reply::Bulk(self)
    }
}

impl Member for &[u8] {
    fn bulk(self) -> Reply {
        Reply::Bulk(Bytes::copy_from_slice(self))
    }
}

/// The member of a `(member, score)` pair as a bulk reply.
fn bulk_member((m, _): (&[u8], f64)) -> Reply {
    m.bulk()
}

fn score_range(min: &[u8], max: &[u8]) -> CmdResult<(ScoreBound, ScoreBound)> {
    Ok((
        parse_score_bound(min).map_err(Reply::err)?,
        parse_score_bound(max).map_err(Reply::err)?,
    ))
}

fn lex_range(min: &[u8], max: &[u8]) -> CmdResult<(LexBound, LexBound)> {
    Ok((
        parse_lex_bound(min).map_err(Reply::err)?,
        parse_lex_bound(max).map_err(Reply::err)?,
    ))
}

/// ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...]
pub fn zadd(ctx: &mut Ctx, a: &[&[u8]]) -> Reply {
    run(zadd_inner(ctx, a))
}

fn zadd_inner(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult<Reply> {
    let mut flags = AddFlags::default();
    let mut ch = false;
    let mut i = 2;
    while let Some(opt) = a.get(i) {
        // Options are at most 4 letters: lower-case them on the stack (the score after
        // them, tried here first, must not cost an allocation).
        let mut lower = [0u8; 4];
        let Some(lower) = lower.get_mut(..opt.len()) else {
            break;
        };
        lower.copy_from_slice(opt);
        lower.make_ascii_lowercase();
        match &*lower {
            b"nx" => flags.nx = true,
            b"xx" => flags.xx = true,
            b"gt" => flags.gt = true,
            b"lt" => flags.lt = true,
            b"ch" => ch = true,
            b"incr" => flags.incr = true,
            _ => break,
        }
        i += 1;
    }
    let elements = &a[i..];
    if elements.is_empty() || !elements.len().is_multiple_of(2) {
        return Err(syntax_error());
    }
    if flags.nx && flags.xx {
        return Err(Reply::err(
            "ERR XX and NX options at the same time are not compatible",
        ));
    }
    if (flags.nx && (flags.gt || flags.lt)) || (flags.gt && flags.lt) {
        return Err(Reply::err(
            "ERR GT, LT, and/or NX options at the same time are not compatible",
        ));
    }
    if flags.incr && elements.len() > 2 {
        return Err(Reply::err(
            "ERR INCR option supports a single increment-element pair",
        ));
    }
    // Every score is parsed before anything changes: ZADD applies fully or not at all.
    // The usual call's few pairs stay on the stack (no allocation per request).
    let pairs = elements
        .chunks_exact(2)
        .map(|p| Ok((parse_score(p[0]).map_err(Reply::err)?, p[1])))
        .collect::<CmdResult<smallvec::SmallVec<[(f64, &[u8]); 4]>>>()?;
    apply_add(ctx, a[1], &pairs, flags, ch)
}

/// Apply validated ZADD pairs to `key` and build the ZADD / ZINCRBY reply.
fn apply_add(
    ctx: &mut Ctx,
    key: &[u8],
    pairs: &[(f64, &[u8])],
    flags: AddFlags,
    ch: bool,
) -> CmdResult<Reply> {
    let resp = ctx.resp;
    let limits = ctx.ks.encodings.zset();
    let event = |(added, updated, _): &(i64, i64, Option<f64>)| {
        (added + updated > 0).then_some(if flags.incr { "zincr" } else { "zadd" })
    };
    let reply = |(added, updated, last): (i64, i64, Option<f64>)| {
        if flags.incr {
            last.map_or(Reply::Nil, |s| score_reply(resp, s))
        } else {
            Reply::Integer(if ch { added + updated } else { added })
        }
    };
    // An existing set: one keyspace lookup and one hash of each member. The key is
    // signalled (WATCH) only when a member was added or its score changed, as Redis's
    // zaddGenericCommand does. An absent (or expired) key takes `update_notify`'s path,
    // which creates it unless XX.
    if let Some(outcome) = update_live::<SortedSet, _>(ctx, key, ZSET, event, |z| {
        add_pairs(z, pairs, flags, limits)
    }) {
        return outcome.map(reply);
    }
    let outcome = update_notify::<SortedSet, _>(ctx, key, !flags.xx, ZSET, event, |z| {
        add_pairs(z, pairs, flags, limits)
    })?;
    Ok(reply(outcome.unwrap_or((0, 0, None))))
}

/// Add ZADD's validated pairs to `z`: (members added, members updated, the last pair's
/// score for the INCR reply).
fn add_pairs(
    z: &mut SortedSet,
    pairs: &[(f64, &[u8])],
    flags: AddFlags,
    limits: ZsetLimits,
) -> CmdResult<(i64, i64, Option<f64>)> {
    let (mut added, mut updated, mut last) = (0, 0, None);
    for &(score, member) in pairs {
        match z.add_limited(member, score, flags, limits) {
            AddOutcome::Added { score } => {
                added += 1;
                last = Some(score);
            }
            AddOutcome::Updated { new, .. } => {
                updated += 1;
                last = Some(new);
            }
            AddOutcome::Unchanged { score } => last = Some(score),
            AddOutcome::Skipped => {}
            AddOutcome::NotANumber => return Err(Reply::err(ERR_NAN_RESULT)),
            // Only reachable at 2^32 members; Redis would run out of memory first.
            AddOutcome::Full => return Err(Reply::err("ERR sorted set is full")),
        }
    }
    Ok((added, updated, last))
}

/// ZINCRBY key increment member
pub fn zincrby(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    run((|| {
        // Redis runs ZINCRBY through ZADD's parser, which takes a ZADD flag in the
        // increment's place and then finds one argument where it wants pairs.
        const ZADD_FLAGS: [&str; 6] = ["nx", "xx", "gt", "lt", "ch", "incr"];
        if ZADD_FLAGS
            .iter()
            .any(|f| a[2].eq_ignore_ascii_case(f.as_bytes()))
        {
            return Err(Reply::err("ERR syntax error"));
        }
        let by = parse_score(&a[2]).map_err(Reply::err)?;
        let flags = AddFlags {
            incr: true,
            ..AddFlags::default()
        };
        apply_add(ctx, &a[1], &[(by, &a[3][..])], flags, false)
    })())
}

/// ZREM key member [member ...]
pub fn zrem(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    let members = &a[2..];
    run((|| {
        if !exists_where::<SortedSet>(ctx, &a[1], |z| members.iter().any(|m| z.contains(m)))? {
            return Ok(Reply::Integer(0));
        }
        let event = |n: &i64| (*n > 0).then_some("zrem");
        let removed =
            update_notify::<SortedSet, _>(ctx, &a[1], false, ZSET | REMOVAL, event, |z| {
                Ok(members.iter().filter(|m| z.remove(m).is_some()).count() as i64)
            })?;
        Ok(Reply::Integer(removed.unwrap_or(0)))
    })())
}

/// ZCARD key
pub fn zcard(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    match read_zset(ctx, &a[1]) {
        Err(e) => e,
        Ok(z) => Reply::Integer(z.map_or(0, |z| z.len() as i64)),
    }
}

/// ZSCORE key member
pub fn zscore(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    let resp = ctx.resp;
    match read_zset(ctx, &a[1]) {
        Err(e) => e,
        Ok(z) => z
            .and_then(|z| z.score(&a[2]))
            .map_or(Reply::Nil, |s| score_reply(resp, s)),
    }
}

/// ZMSCORE key member [member ...]
pub fn zmscore(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    let resp = ctx.resp;
    match read_zset(ctx, &a[1]) {
        Err(e) => e,
        Ok(z) => Reply::Array(
            a[2..]
                .iter()
                .map(|m| {
                    z.and_then(|z| z.score(m))
                        .map_or(Reply::Nil, |s| score_reply(resp, s))
                })
                .collect(),
        ),
    }
}

/// ZCOUNT key min max
pub fn zcount(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    run((|| {
        let (min, max) = score_range(&a[2], &a[3])?;
        let z = read_zset(ctx, &a[1])?;
        Ok(Reply::Integer(
            z.map_or(0, |z| z.count_in_score_range(min, max) as i64),
        ))
    })())
}

/// ZLEXCOUNT key min max
pub fn zlexcount(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    run((|| {
        let (min, max) = lex_range(&a[2], &a[3])?;
        let z = read_zset(ctx, &a[1])?;
        Ok(Reply::Integer(
            z.map_or(0, |z| z.count_in_lex_range(&min, &max) as i64),
        ))
    })())
}

fn rank_generic(ctx: &mut Ctx, a: &[Bytes], rev: bool) -> Reply {
    run((|| {
        if a.len() > 4 {
            return Err(super::arity_error(if rev { "zrevrank" } else { "zrank" }));
        }
        let with_score = match a.get(3) {
            None => false,
            Some(o) if is(o, "withscore") => true,
            Some(_) => return Err(syntax_error()),
        };
        let resp = ctx.resp;
        let missing = if with_score {
            Reply::NilArray
        } else {
            Reply::Nil
        };
        let Some(z) = read_zset(ctx, &a[1])? else {
            return Ok(missing);
        };
        let rank = if rev {
            z.rev_rank(&a[2])
        } else {
            z.rank(&a[2])
        };
        let (Some(rank), Some(score)) = (rank, z.score(&a[2])) else {
            return Ok(missing);
        };
        let rank = Reply::Integer(rank as i64);
        Ok(if with_score {
            Reply::Array(vec![rank, score_reply(resp, score)])
        } else {
            rank
        })
    })())
}

/// ZRANK key member [WITHSCORE] (WITHSCORE as in Redis 7.2)
pub fn zrank(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    rank_generic(ctx, a, false)
}

/// ZREVRANK key member [WITHSCORE] (WITHSCORE as in Redis 7.2)
pub fn zrevrank(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    rank_generic(ctx, a, true)
}

/// How a ZRANGE-family command selects members.
#[derive(Clone, Copy, PartialEq)]
enum By {
    Rank,
    Score,
    Lex,
}

/// What the ZRANGE-family command names fix in advance (the rest comes from options).
#[derive(Clone, Copy)]
struct RangeCommand {
    by: Option<By>,
    rev: Option<bool>,
    store: bool,
}

/// A parsed ZRANGE request; `a[src]` is the source key, `a[src+1]`/`a[src+2]` its range.
struct RangeRequest {
    by: By,
    rev: bool,
    with_scores: bool,
    offset: i64,
    limit: i64,
}

/// Parse the options after `key min max`, following Redis's `zrangeGenericCommand`.
fn parse_range(a: &[Bytes], src: usize, cmd: RangeCommand) -> CmdResult<RangeRequest> {
    let (mut by, mut rev) = (cmd.by, cmd.rev);
    let mut req = RangeRequest {
        by: By::Rank,
        rev: false,
        with_scores: false,
        offset: 0,
        limit: -1,
    };
    let mut j = src + 3;
    while j < a.len() {
        let opt = &a[j];
        if !cmd.store && is(opt, "withscores") {
            req.with_scores = true;
        } else if is(opt, "limit") && j + 2 < a.len() {
            req.offset = int(&a[j + 1])?;
            req.limit = int(&a[j + 2])?;
            j += 2;
        } else if rev.is_none() && is(opt, "rev") {
            rev = Some(true);
        } else if by.is_none() && is(opt, "bylex") {
            by = Some(By::Lex);
        } else if by.is_none() && is(opt, "byscore") {
            by = Some(By::Score);
        } else {
            return Err(syntax_error());
        }
        j += 1;
    }
    req.by = by.unwrap_or(By::Rank);
    req.rev = rev.unwrap_or(false);
    if req.limit != -1 && req.by == By::Rank {
        return Err(Reply::err(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ));
    }
    if req.with_scores && req.by == By::Lex {
        return Err(Reply::err(
            "ERR syntax error, WITHSCORES not supported in combination with BYLEX",
        ));
    }
    Ok(req)
}

/// The range bounds of a request, parsed (and validated) before the key is looked up.
enum Bounds {
    Rank(i64, i64),
    Score(ScoreBound, ScoreBound),
    Lex(LexBound, LexBound),
}

fn parse_bounds(a: &[Bytes], src: usize, req: &RangeRequest) -> CmdResult<Bounds> {
    let (mut lo, mut hi) = (&a[src + 1], &a[src + 2]);
    if req.rev && req.by != By::Rank {
        // BYSCORE/BYLEX ranges are given as `max min` when reversed.
        std::mem::swap(&mut lo, &mut hi);
    }
    Ok(match req.by {
        By::Rank => Bounds::Rank(int(lo)?, int(hi)?),
        By::Score => {
            let (min, max) = score_range(lo, hi)?;
            Bounds::Score(min, max)
        }
        By::Lex => {
            let (min, max) = lex_range(lo, hi)?;
            Bounds::Lex(min, max)
        }
    })
}

/// The members (with scores) a range request selects from `z`.
fn select<'a>(z: &'a SortedSet, b: &Bounds, req: &RangeRequest) -> Vec<(&'a [u8], f64)> {
    // Redis skips `offset` members one by one, so a negative offset skips them all,
    // and a negative count means no limit.
    let Ok(offset) = usize::try_from(req.offset) else {
        return Vec::new();
    };
    let count = usize::try_from(req.limit).ok();
    match b {
        Bounds::Rank(start, stop) => match normalize_range(*start, *stop, z.len()) {
            None => Vec::new(),
            Some((s, e)) if req.rev => z.rev_range_by_rank(s, e).collect(),
            Some((s, e)) => z.range_by_rank(s, e).collect(),
        },
        Bounds::Score(min, max) => z
            .range_by_score(*min, *max, req.rev, offset, count)
            .collect(),
        Bounds::Lex(min, max) => z.range_by_lex(min, max, req.rev, offset, count).collect(),
    }
}

fn range_generic(ctx: &mut Ctx, a: &[Bytes], cmd: RangeCommand) -> Reply {
    run((|| {
        let src = if cmd.store { 2 } else { 1 };
        let req = parse_range(a, src, cmd)?;
        let bounds = parse_bounds(a, src, &req)?;
        let resp = ctx.resp;
        if cmd.store {
            let picked: Vec<(Bytes, f64)> = match read_zset(ctx, &a[src])? {
                None => Vec::new(),
                Some(z) => select(z, &bounds, &req)
                    .into_iter()
                    .map(|(m, s)| (Bytes::copy_from_slice(m), s))
                    .collect(),
            };
            let n = store_zset(ctx, &a[1], picked);
            if n > 0 {
                ctx.notify(ZSET, "zrangestore", &a[1]);
            }
            return Ok(Reply::Integer(n));
        }
        let Some(z) = read_zset(ctx, &a[src])? else {
            return Ok(Reply::Array(Vec::new()));
        };
        let picked = select(z, &bounds, &req);
        Ok(if req.with_scores {
            pairs_reply(resp, picked.into_iter())
        } else {
            Reply::Array(picked.into_iter().map(bulk_member).collect())
        })
    })())
}

/// Replace `key` with a sorted set of `items` (deleting it when empty, keyspace event
/// `del`); returns its size. The caller fires its own event when the size is not 0.
pub(super) fn store_zset(ctx: &mut Ctx, key: &Bytes, items: Vec<(Bytes, f64)>) -> i64 {
    let now = ctx.now_ms;
    let limits = ctx.ks.encodings.zset();
    let db = ctx.db();
    if items.is_empty() {
        if db.remove(key, now).is_some() {
            ctx.notify(GENERIC | REMOVAL, "del", key);
        }
        return 0;
    }
    let mut z = SortedSet::new();
    for (m, s) in &items {
        z.insert_limited(m, *s, limits);
    }
    let n = z.len() as i64;
    db.set(key, Value::ZSet(z));
    n
}

const fn range_cmd(by: Option<By>, rev: Option<bool>) -> RangeCommand {
    RangeCommand {
        by,
        rev,
        store: false,
    }
}

/// ZRANGE key start stop [BYSCORE|BYLEX] [REV] [LIMIT offset count] [WITHSCORES]
pub fn zrange(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    range_generic(ctx, a, range_cmd(None, None))
}

/// ZRANGESTORE dst src min max [BYSCORE|BYLEX] [REV] [LIMIT offset count]
pub fn zrangestore(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    range_generic(
        ctx,
        a,
        RangeCommand {
            by: None,
            rev: None,
            store: true,
        },
    )
}

/// ZREVRANGE key start stop [WITHSCORES]
pub fn zrevrange(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    range_generic(ctx, a, range_cmd(Some(By::Rank), Some(true)))
}

/// ZRANGEBYSCORE key min max [WITHSCORES] [LIMIT offset count]
pub fn zrangebyscore(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    range_generic(ctx, a, range_cmd(Some(By::Score), Some(false)))
}

/// ZREVRANGEBYSCORE key max min [WITHSCORES] [LIMIT offset count]
pub fn zrevrangebyscore(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    range_generic(ctx, a, range_cmd(Some(By::Score), Some(true)))
}

/// ZRANGEBYLEX key min max [LIMIT offset count]
pub fn zrangebylex(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    range_generic(ctx, a, range_cmd(Some(By::Lex), Some(false)))
}

/// ZREVRANGEBYLEX key max min [LIMIT offset count]
pub fn zrevrangebylex(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    range_generic(ctx, a, range_cmd(Some(By::Lex), Some(true)))
}

fn remrange_generic(ctx: &mut Ctx, a: &[Bytes], by: By) -> Reply {
    let name = match by {
        By::Rank => "zremrangebyrank",
        By::Score => "zremrangebyscore",
        By::Lex => "zremrangebylex",
    };
    run((|| {
        let req = RangeRequest {
            by,
            rev: false,
            with_scores: false,
            offset: 0,
            limit: -1,
        };
        let bounds = parse_bounds(a, 1, &req)?;
        let hits = |z: &SortedSet| match &bounds {
            Bounds::Rank(s, e) => normalize_range(*s, *e, z.len()).is_some(),
            Bounds::Score(min, max) => z.count_in_score_range(*min, *max) > 0,
            Bounds::Lex(min, max) => z.count_in_lex_range(min, max) > 0,
        };
        if !exists_where::<SortedSet>(ctx, &a[1], hits)? {
            return Ok(Reply::Integer(0));
        }
        let event = |n: &usize| (*n > 0).then_some(name);
        let removed =
            update_notify::<SortedSet, _>(ctx, &a[1], false, ZSET | REMOVAL, event, |z| {
                Ok(match &bounds {
                    Bounds::Rank(s, e) => match normalize_range(*s, *e, z.len()) {
                        Some((s, e)) => z.remove_range_by_rank(s, e),
                        None => 0,
                    },
                    Bounds::Score(min, max) => z.remove_range_by_score(*min, *max),
                    Bounds::Lex(min, max) => z.remove_range_by_lex(min, max),
                })
            })?;
        Ok(Reply::Integer(removed.unwrap_or(0) as i64))
    })())
}

/// ZREMRANGEBYRANK key start stop
pub fn zremrangebyrank(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    remrange_generic(ctx, a, By::Rank)
}

/// ZREMRANGEBYSCORE key min max
pub fn zremrangebyscore(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    remrange_generic(ctx, a, By::Score)
}

/// ZREMRANGEBYLEX key min max
pub fn zremrangebylex(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    remrange_generic(ctx, a, By::Lex)
}

fn pop_generic(ctx: &mut Ctx, a: &[Bytes], max: bool) -> Reply {
    run((|| {
        let count = pop_count(a)?;
        if lookup_zset(ctx, &a[1])?.is_none() || count == Some(0) {
            return Ok(Reply::Array(Vec::new()));
        }
        let n = count.map_or(1, |c| usize::try_from(c).unwrap_or(usize::MAX));
        let event = |p: &Vec<(Bytes, f64)>| {
            (!p.is_empty()).then_some(if max { "zpopmax" } else { "zpopmin" })
        };
        let popped =
            update_notify::<SortedSet, _>(ctx, &a[1], false, ZSET | REMOVAL, event, |z| {
                Ok(if max { z.pop_max(n) } else { z.pop_min(n) })
            })?
            .unwrap_or_default();
        // RESP3 nests [member, score] pairs only when a count was given.
        let resp = ctx.resp;
        let items = popped.into_iter();
        Ok(if count.is_some() {
            pairs_reply(resp, items)
        } else {
            Reply::Array(
                items
                    .flat_map(|(m, s)| [m.bulk(), score_reply(resp, s)])
                    .collect(),
            )
        })
    })())
}

/// ZPOPMIN key [count]
pub fn zpopmin(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    pop_generic(ctx, a, false)
}

/// ZPOPMAX key [count]
pub fn zpopmax(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    pop_generic(ctx, a, true)
}

/// ZSCAN key cursor [MATCH pattern] [COUNT count]
pub fn zscan(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    run((|| {
        // Redis validates the cursor before the key and the options only if it exists.
        parse_scan(&a[..3], 2, false)?;
        let Some(z) = read_zset(ctx, &a[1])? else {
            return Ok(scan_reply(0, Vec::new()));
        };
        let opts = parse_scan(a, 2, false)?;
        let (next, items) = z.scan(opts.cursor, opts.count);
        let items = items
            .filter(|(m, _)| {
                opts.pattern
                    .as_ref()
                    .is_none_or(|p| glob_match(p, m, false))
            })
            .flat_map(|(m, s)| [m.bulk(), Reply::Bulk(Bytes::from(format_double(s)))])
            .collect();
        Ok(scan_reply(next, items))
    })())
}

/// ZRANDMEMBER key [count [WITHSCORES]]
pub fn zrandmember(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    run((|| {
        let seed = ctx.seed;
        let resp = ctx.resp;
        let count = a.get(2).map(|c| symmetric_int(c)).transpose()?;
        if a.len() > 4 || a.get(3).is_some_and(|w| !is(w, "withscores")) {
            return Err(syntax_error());
        }
        let with_scores = a.len() == 4;
        if with_scores && count.is_some_and(|c| c.unsigned_abs() > i64::MAX as u64 / 2) {
            return Err(Reply::err("ERR value is out of range"));
        }
        let z = read_zset(ctx, &a[1])?;
        let Some(count) = count else {
            let Some(z) = z.filter(|z| !z.is_empty()) else {
                return Ok(Reply::Nil);
            };
            let i = Rng::new(seed, &a[1], z.len()).below(z.len());
            return Ok(z.get_by_rank(i).map_or(Reply::Nil, bulk_member));
        };
        let Some(z) = z else {
            return Ok(Reply::Array(Vec::new()));
        };
        let picks = random_picks(&mut Rng::new(seed, &a[1], z.len()), z.len(), count)?;
        let items = picks.into_iter().filter_map(|i| z.get_by_rank(i));
        Ok(if with_scores {
            pairs_reply(resp, items)
        } else {
            Reply::Array(items.map(bulk_member).collect())
        })
    })())
}

/// ZMPOP numkeys key [key ...] MIN|MAX [COUNT count]: pops from the first non-empty
/// sorted set (the core is shared with BZMPOP: `blocking::mpop_zset`).
pub fn zmpop(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    super::blocking::mpop_zset(ctx, a, 1)
}

use super::flags::{DENYOOM, FAST, RANDOM, READONLY, WRITE};

/// Sorted-set commands.
pub const COMMANDS: &[super::CommandSpec] = &[
    crate::cmd!("zadd", -4, WRITE | DENYOOM | FAST, 1, 1, 1, fast: zadd),
    crate::cmd!("zincrby", 4, WRITE | DENYOOM | FAST, 1, 1, 1, zincrby),
    crate::cmd!("zrem", -3, WRITE | FAST, 1, 1, 1, zrem),
    crate::cmd!("zcard", 2, READONLY | FAST, 1, 1, 1, zcard),
    crate::cmd!("zscore", 3, READONLY | FAST, 1, 1, 1, zscore),
    crate::cmd!("zmscore", -3, READONLY | FAST, 1, 1, 1, zmscore),
    crate::cmd!("zcount", 4, READONLY | FAST, 1, 1, 1, zcount),
    crate::cmd!("zlexcount", 4, READONLY | FAST, 1, 1, 1, zlexcount),
    crate::cmd!("zrank", -3, READONLY | FAST, 1, 1, 1, zrank),
    crate::cmd!("zrevrank", -3, READONLY | FAST, 1, 1, 1, zrevrank),
    crate::cmd!("zrange", -4, READONLY, 1, 1, 1, zrange),
    crate::cmd!("zrangestore", -5, WRITE | DENYOOM, 1, 2, 1, zrangestore),
    crate::cmd!("zrevrange", -4, READONLY, 1, 1, 1, zrevrange),
    crate::cmd!("zrangebyscore", -4, READONLY, 1, 1, 1, zrangebyscore),
    crate::cmd!("zrevrangebyscore", -4, READONLY, 1, 1, 1, zrevrangebyscore),
    crate::cmd!("zrangebylex", -4, READONLY, 1, 1, 1, zrangebylex),
    crate::cmd!("zrevrangebylex", -4, READONLY, 1, 1, 1, zrevrangebylex),
    crate::cmd!("zremrangebyrank", 4, WRITE, 1, 1, 1, zremrangebyrank),
    crate::cmd!("zremrangebyscore", 4, WRITE, 1, 1, 1, zremrangebyscore),
    crate::cmd!("zremrangebylex", 4, WRITE, 1, 1, 1, zremrangebylex),
    crate::cmd!("zpopmin", -2, WRITE | FAST, 1, 1, 1, zpopmin),
    crate::cmd!("zpopmax", -2, WRITE | FAST, 1, 1, 1, zpopmax),
    crate::cmd!("zscan", -3, READONLY, 1, 1, 1, zscan),
    crate::cmd!("zrandmember", -2, READONLY | RANDOM, 1, 1, 1, zrandmember),
    crate::cmd!("zmpop", -4, WRITE, keys: super::Keys::Counted { at: 1, optional: false }, zmpop),
];

#[cfg(test)]
mod tests {
    use super::super::collection::harness::{bulk, bulks, err, wrongtype, Client};
    use crate::protocol::Reply;

    fn c() -> Client {
        let mut c = Client::new();
        c.run("set str x");
        c.run("zadd z 1 a 2 b 3 c");
        c
    }

    #[test]
    fn zadd_flags() {
        let mut c = c();
        assert_eq!(c.run("zadd z ch 5 a 2 b 7 new"), Reply::Integer(2));
        assert_eq!(c.run("zadd z xx ch 6 a 99 nope"), Reply::Integer(1));
        assert_eq!(c.run("zscore z nope"), Reply::Nil);
        assert_eq!(c.run("zadd z nx ch 100 a 8 new2"), Reply::Integer(1));
        assert_eq!(c.run("zscore z a"), bulk("6"));
        assert_eq!(c.run("zadd z gt ch 1 a 200 b"), Reply::Integer(1));
        assert_eq!(c.run("zadd z lt ch 1 c 300 b"), Reply::Integer(1));
        assert_eq!(
            c.run("zrange z 0 -1 withscores"),
            bulks(&["c", "1", "a", "6", "new", "7", "new2", "8", "b", "200"])
        );
        assert_eq!(c.run("zadd z xx gt incr 1 c"), bulk("2"));
        assert_eq!(c.run("zadd z xx lt incr 1 c"), Reply::Nil);
        assert_eq!(c.run("zadd z incr 0 c"), bulk("2"));
        assert_eq!(c.run("zadd z nx incr 1 c"), Reply::Nil);
        assert_eq!(c.run("zadd nokey xx 1 a"), Reply::Integer(0));
        assert_eq!(c.run("zadd nokey xx incr 1 a"), Reply::Nil);
        assert!(!c.exists("nokey"));
    }

    #[test]
    fn zadd_errors_change_nothing() {
        let mut c = c();
        assert_eq!(
            c.run("zadd z nx xx 1 a"),
            err("ERR XX and NX options at the same time are not compatible")
        );
        assert_eq!(
            c.run("zadd z nx gt 1 a"),
            err("ERR GT, LT, and/or NX options at the same time are not compatible")
        );
        assert_eq!(
            c.run("zadd z gt lt 1 a"),
            err("ERR GT, LT, and/or NX options at the same time are not compatible")
        );
        assert_eq!(
            c.run("zadd z incr 1 a 2 b"),
            err("ERR INCR option supports a single increment-element pair")
        );
        assert_eq!(
            c.run("zadd z 1"),
            err("ERR wrong number of arguments for 'zadd' command")
        );
        assert_eq!(c.run("zadd z 1 a 2"), err("ERR syntax error"));
        assert_eq!(c.run("zadd z xx nx 1"), err("ERR syntax error"));
        assert_eq!(
            c.run("zadd z 5 a x b"),
            err("ERR value is not a valid float")
        );
        assert_eq!(c.run("zadd z nan a"), err("ERR value is not a valid float"));
        assert_eq!(c.run("zscore z a"), bulk("1"), "no pair applied");
        assert_eq!(
            c.run("zadd fresh 1 a x b"),
            err("ERR value is not a valid float")
        );
        assert!(!c.exists("fresh"));
        assert_eq!(c.run("zadd z incr inf a"), bulk("inf"));
        assert_eq!(
            c.run("zadd z incr -inf a"),
            err("ERR resulting score is not a number (NaN)")
        );
        assert_eq!(
            c.run("zincrby z -inf a"),
            err("ERR resulting score is not a number (NaN)")
        );
        assert_eq!(c.run("zscore z a"), bulk("inf"));
        assert_eq!(c.run("zadd str 1 a"), wrongtype());
        assert_eq!(c.run("zincrby str 1 a"), wrongtype());
        assert_eq!(
            c.run("zincrby z x a"),
            err("ERR value is not a valid float")
        );
    }

    #[test]
    fn scores_print_like_redis_7_0() {
        let mut c = Client::new();
        c.run("zadd f 0.1 a 1e20 c 123456789012345678 d -0.0 e 1e-5 g 2.5 h");
        assert_eq!(c.run("zscore f a"), bulk("0.10000000000000001"));
        assert_eq!(c.run("zscore f c"), bulk("1e+20"));
        assert_eq!(c.run("zscore f d"), bulk("1.2345678901234568e+17"));
        assert_eq!(c.run("zscore f e"), bulk("0"));
        assert_eq!(c.run("zscore f g"), bulk("1.0000000000000001e-05"));
        assert_eq!(c.run("zincrby f 0.2 a"), bulk("0.30000000000000004"));
        assert_eq!(
            c.run("zmscore f h zz"),
            Reply::Array(vec![bulk("2.5"), Reply::Nil])
        );
        assert_eq!(c.run("zmscore nokey a"), Reply::Array(vec![Reply::Nil]));
        c.resp = 3;
        assert_eq!(c.run("zscore f h"), Reply::Double(2.5));
        assert_eq!(
            c.run("zrange f 0 1 withscores"),
            Reply::Array(vec![
                Reply::Array(vec![bulk("e"), Reply::Double(0.0)]),
                Reply::Array(vec![bulk("g"), Reply::Double(1e-5)]),
            ])
        );
    }

    #[test]
    fn counts_and_ranks() {
        let mut c = c();
        assert_eq!(c.run("zcard z"), Reply::Integer(3));
        assert_eq!(c.run("zcard nokey"), Reply::Integer(0));
        assert_eq!(c.run("zcount z (1 +inf"), Reply::Integer(2));
        assert_eq!(c.run("zcount z 2 1"), Reply::Integer(0));
        assert_eq!(
            c.run("zcount nokey x 1"),
            err("ERR min or max is not a float")
        );
        assert_eq!(c.run("zlexcount z - +"), Reply::Integer(3));
        assert_eq!(
            c.run("zlexcount nokey x y"),
            err("ERR min or max not valid string range item")
        );
        assert_eq!(c.run("zrank z c"), Reply::Integer(2));
        assert_eq!(c.run("zrevrank z c"), Reply::Integer(0));
        assert_eq!(c.run("zrank z zz"), Reply::Nil);
        assert_eq!(
            c.run("zrank z b withscore"),
            Reply::Array(vec![Reply::Integer(1), bulk("2")])
        );
        assert_eq!(c.run("zrank z zz withscore"), Reply::NilArray);
        assert_eq!(c.run("zrank z b withscores"), err("ERR syntax error"));
        assert_eq!(
            c.run("zrank z b withscore x"),
            err("ERR wrong number of arguments for 'zrank' command")
        );
        assert_eq!(c.run("zrank str a"), wrongtype());
        assert_eq!(c.run("zcard str"), wrongtype());
        assert_eq!(c.run("zrem z a zz"), Reply::Integer(1));
        assert_eq!(c.run("zrem z b c"), Reply::Integer(2));
        assert!(!c.exists("z"));
        assert_eq!(c.run("zrem nokey a"), Reply::Integer(0));
        assert_eq!(c.run("zrem str a"), wrongtype());
    }

    #[test]
    fn zrange_options() {
        let mut c = c();
        let lim =
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX";
        let lexws = "ERR syntax error, WITHSCORES not supported in combination with BYLEX";
        assert_eq!(c.run("zrange z 0 -1 limit 0 1"), err(lim));
        assert_eq!(c.run("zrange nokey 0 -1 limit 0 1"), err(lim));
        assert_eq!(c.run("zrange z a b bylex withscores"), err(lexws));
        assert_eq!(c.run("zrangebylex z [a [b withscores"), err(lexws));
        assert_eq!(
            c.run("zrange z 0 -1 byscore bylex"),
            err("ERR syntax error")
        );
        assert_eq!(c.run("zrange z 0 -1 rev rev"), err("ERR syntax error"));
        assert_eq!(c.run("zrangebyscore z 1 3 rev"), err("ERR syntax error"));
        assert_eq!(c.run("zrevrange z 0 -1 rev"), err("ERR syntax error"));
        assert_eq!(c.run("zrange z 0 -1 limit 0"), err("ERR syntax error"));
        assert_eq!(
            c.run("zrange z x 1"),
            err("ERR value is not an integer or out of range")
        );
        assert_eq!(
            c.run("zrangebyscore z x 3"),
            err("ERR min or max is not a float")
        );
        assert_eq!(
            c.run("zrangebylex z a b"),
            err("ERR min or max not valid string range item")
        );
        assert_eq!(c.run("zrange z (1 3 byscore"), bulks(&["b", "c"]));
        assert_eq!(c.run("zrange z 3 (1 byscore rev"), bulks(&["c", "b"]));
        assert_eq!(c.run("zrange z 0 -1 rev"), bulks(&["c", "b", "a"]));
        assert_eq!(c.run("zrevrange z 0 0 withscores"), bulks(&["c", "3"]));
        assert_eq!(
            c.run("zrange z 0 9223372036854775807"),
            bulks(&["a", "b", "c"])
        );
        assert_eq!(
            c.run("zrange z -9223372036854775808 -9223372036854775808"),
            bulks(&[])
        );
        assert_eq!(
            c.run("zrangebyscore z -inf +inf withscores limit 1 1"),
            bulks(&["b", "2"])
        );
        assert_eq!(
            c.run("zrevrangebyscore z +inf -inf limit 0 2"),
            bulks(&["c", "b"])
        );
        assert_eq!(c.run("zrangebyscore z -inf +inf limit -1 1"), bulks(&[]));
        assert_eq!(
            c.run("zrangebyscore z -inf +inf limit 1 -1"),
            bulks(&["b", "c"])
        );
        assert_eq!(c.run("zrangebyscore z -inf +inf limit 1 0"), bulks(&[]));
        assert_eq!(
            c.run("zrangebyscore z -inf +inf limit 9223372036854775807 9223372036854775807"),
            bulks(&[])
        );
        assert_eq!(c.run("zrange nokey 0 -1"), bulks(&[]));
        assert_eq!(c.run("zrange str 0 -1"), wrongtype());
        c.run("zadd l 0 a 0 b 0 c 0 d");
        assert_eq!(c.run("zrangebylex l [b (d"), bulks(&["b", "c"]));
        assert_eq!(c.run("zrevrangebylex l + - limit 1 2"), bulks(&["c", "b"]));
        assert_eq!(c.run("zrange l [d [b bylex rev"), bulks(&["d", "c", "b"]));
    }

    #[test]
    fn zrangestore_rules() {
        let mut c = c();
        assert_eq!(c.run("zrangestore dst z 0 1"), Reply::Integer(2));
        assert_eq!(
            c.run("zrange dst 0 -1 withscores"),
            bulks(&["a", "1", "b", "2"])
        );
        assert_eq!(
            c.run("zrangestore dst z 0 1 withscores"),
            err("ERR syntax error")
        );
        assert_eq!(
            c.run("zrangestore dst z (1 +inf byscore limit 0 1"),
            Reply::Integer(1)
        );
        assert_eq!(c.run("zrange dst 0 -1"), bulks(&["b"]));
        assert_eq!(c.run("zrangestore dst nokey 0 -1"), Reply::Integer(0));
        assert!(!c.exists("dst"));
        assert_eq!(c.run("zrangestore dst str 0 -1"), wrongtype());
        assert_eq!(c.run("zrangestore str z 0 0"), Reply::Integer(1));
        assert_eq!(c.run("type str"), Reply::Status("zset".into()));
        assert_eq!(
            c.run("zrangestore z z 1 1"),
            Reply::Integer(1),
            "the source may be the destination"
        );
        assert_eq!(c.run("zrange z 0 -1"), bulks(&["b"]));
    }

    #[test]
    fn zremrange_family() {
        let mut c = Client::new();
        c.run("zadd r 1 a 2 b 3 c 4 d 5 e 6 f");
        assert_eq!(c.run("zremrangebyrank r 0 0"), Reply::Integer(1));
        assert_eq!(c.run("zremrangebyrank r -1 -1"), Reply::Integer(1));
        assert_eq!(c.run("zremrangebyrank r 5 10"), Reply::Integer(0));
        assert_eq!(
            c.run("zremrangebyrank r -9223372036854775808 -9223372036854775808"),
            Reply::Integer(0)
        );
        assert_eq!(c.run("zremrangebyscore r (2 3"), Reply::Integer(1));
        assert_eq!(c.run("zrange r 0 -1"), bulks(&["b", "d", "e"]));
        assert_eq!(c.run("zremrangebylex r - +"), Reply::Integer(3));
        assert!(!c.exists("r"));
        assert_eq!(
            c.run("zremrangebyrank nokey x 1"),
            err("ERR value is not an integer or out of range")
        );
        assert_eq!(
            c.run("zremrangebyscore nokey x 1"),
            err("ERR min or max is not a float")
        );
        assert_eq!(
            c.run("zremrangebylex nokey x 1"),
            err("ERR min or max not valid string range item")
        );
        assert_eq!(c.run("zremrangebyrank nokey 0 1"), Reply::Integer(0));
        c.run("set str x");
        assert_eq!(c.run("zremrangebyscore str 0 1"), wrongtype());
    }

    #[test]
    fn pops() {
        let mut c = Client::new();
        c.run("zadd p 1 a 2 b 3 c 4 d");
        assert_eq!(c.run("zpopmin p"), bulks(&["a", "1"]));
        assert_eq!(c.run("zpopmax p"), bulks(&["d", "4"]));
        assert_eq!(c.run("zpopmin p 0"), bulks(&[]));
        assert_eq!(c.run("zpopmin nokey"), bulks(&[]));
        assert_eq!(
            c.run("zpopmin p -1"),
            err("ERR value is out of range, must be positive")
        );
        assert_eq!(c.run("zpopmin p 1 2"), err("ERR syntax error"));
        c.resp = 3;
        assert_eq!(
            c.run("zpopmin p 1"),
            Reply::Array(vec![Reply::Array(vec![bulk("b"), Reply::Double(2.0)])])
        );
        assert_eq!(
            c.run("zpopmax p"),
            Reply::Array(vec![bulk("c"), Reply::Double(3.0)])
        );
        assert!(!c.exists("p"));
    }

    #[test]
    fn zscan_and_zrandmember() {
        let mut c = Client::new();
        c.run("zadd sc 1 a 2 b 0.1 c");
        assert_eq!(
            c.run("zscan sc 0"),
            Reply::Array(vec![
                bulk("0"),
                bulks(&["c", "0.10000000000000001", "a", "1", "b", "2"])
            ])
        );
        assert_eq!(
            c.run("zscan sc 0 match a*"),
            Reply::Array(vec![bulk("0"), bulks(&["a", "1"])])
        );
        assert_eq!(c.run("zscan sc x"), err("ERR invalid cursor"));
        assert_eq!(c.run("zscan sc 0 count 0"), err("ERR syntax error"));
        assert_eq!(c.run("zrandmember nokey"), Reply::Nil);
        assert_eq!(c.run("zrandmember nokey 1"), bulks(&[]));
        assert_eq!(
            c.run("zrandmember sc 5 withscores"),
            bulks(&["c", "0.10000000000000001", "a", "1", "b", "2"])
        );
        let Reply::Array(many) = c.run("zrandmember sc -7") else {
            panic!()
        };
        assert_eq!(many.len(), 7);
        assert_eq!(
            c.run("zrandmember sc 9223372036854775807 withscores"),
            err("ERR value is out of range")
        );
        assert_eq!(c.run("zrandmember sc 1 foo"), err("ERR syntax error"));
    }

    #[test]
    fn large_zscan_returns_every_member_once() {
        let mut c = Client::new();
        for i in 0..500 {
            c.run(&format!("zadd big {} m{i}", i % 37));
        }
        let mut cursor = "0".to_string();
        let mut seen = Vec::new();
        loop {
            let Reply::Array(parts) = c.run(&format!("zscan big {cursor} count 25")) else {
                panic!()
            };
            let (Reply::Bulk(next), Reply::Array(items)) = (&parts[0], &parts[1]) else {
                panic!()
            };
            seen.extend(items.chunks(2).map(|p| p[0].clone()));
            cursor = String::from_utf8(next.to_vec()).unwrap();
            if cursor == "0" {
                break;
            }
        }
        let n = seen.len();
        seen.dedup();
        assert_eq!((n, seen.len()), (500, 500));
    }
}
