//! Sorted-set algebra: ZUNION, ZINTER, ZDIFF, their STORE forms and ZINTERCARD, over
//! sorted sets and plain sets (whose members count with score 1), following Redis 7.0's
//! `zunionInterDiffGenericCommand`: the same argument rules and error texts, WEIGHTS and
//! AGGREGATE SUM|MIN|MAX with Redis's NaN conventions (a weighted score or a sum that is
//! NaN, as `inf + -inf` or `0 * inf`, counts as 0), inputs ordered by size for union and
//! intersection as Redis does.
//!
//! Results are ordered by (score, member bytes), as Redis's skiplist orders them, whatever
//! the order of the hash map members are gathered in: the determinism rule, and the reply
//! Redis gives. The STORE forms replace the destination whatever its type (deleting it when
//! the result is empty) and build the new sorted set from the ordered members in one pass
//! (`SortedSet::from_sorted`).

use bytes::Bytes;

use super::args::{self, int, is, syntax_error, CmdResult};
use super::strings::run;
use super::Ctx;
use crate::numbers::format_double;
use crate::protocol::Reply;
use crate::pubsub::notify::{GENERIC, REMOVAL, ZSET};
use crate::store::value::SetValue;
use crate::store::zset::SortedSet;
use crate::store::Value;

/// Which operation.
#[derive(Clone, Copy, PartialEq)]
enum Op {
    Union,
    Inter,
    Diff,
}

impl Op {
    fn store_event(self) -> &'static str {
        match self {
            Op::Union => "zunionstore",
            Op::Inter => "zinterstore",
            Op::Diff => "zdiffstore",
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

/// Redis's `zunionInterAggregate`: a sum that is NaN (`inf + -inf`) is 0; MIN and MAX keep
/// the target when the value does not compare (NaN).
fn aggregate(target: &mut f64, val: f64, how: Aggregate) {
    match how {
        Aggregate::Sum => {
            *target += val;
            if target.is_nan() {
                *target = 0.0;
            }
        }
        Aggregate::Min => {
            if val < *target {
                *target = val
            }
        }
        Aggregate::Max => {
            if val > *target {
                *target = val
            }
        }
    }
}

/// One input: a sorted set, a set (scores 1) or nothing (a missing key).
#[derive(Clone, Copy)]
enum Input<'a> {
    Missing,
    Set(&'a SetValue),
    ZSet(&'a SortedSet),
}

impl<'a> Input<'a> {
    fn len(&self) -> usize {
        match self {
            Input::Missing => 0,
            Input::Set(s) => s.len(),
            Input::ZSet(z) => z.len(),
        }
    }

    fn score(&self, member: &[u8]) -> Option<f64> {
        match self {
            Input::Missing => None,
            Input::Set(s) => s.contains(member).then_some(1.0),
            Input::ZSet(z) => z.score(member),
        }
    }

    fn for_each(&self, mut f: impl FnMut(&[u8], f64)) {
        match *self {
            Input::Missing => {}
            Input::Set(s) => s.iter().for_each(|m| f(&m, 1.0)),
            Input::ZSet(z) => z.iter().for_each(|(m, s)| f(m, s)),
        }
    }

    /// The same key named twice is the same value (Redis compares the objects).
    fn same(&self, other: &Input) -> bool {
        match (self, other) {
            (Input::Set(a), Input::Set(b)) => std::ptr::eq(*a, *b),
            (Input::ZSet(a), Input::ZSet(b)) => std::ptr::eq(*a, *b),
            _ => false,
        }
    }
}

/// A parsed call.
struct Request<'a> {
    keys: &'a [Bytes],
    weights: Vec<f64>,
    aggregate: Aggregate,
    with_scores: bool,
    limit: u64,
}

/// The command's shape: where numkeys is, whether it stores, whether it only counts.
#[derive(Clone, Copy)]
struct Shape {
    op: Op,
    store: bool,
    card_only: bool,
    name: &'static str,
}

/// `numkeys`, in Redis's order of checks: not an integer, below 1, more than the
/// arguments left.
fn parse_numkeys<'a>(a: &'a [Bytes], at: usize, name: &str) -> CmdResult<(&'a [Bytes], usize)> {
    let n = int(&a[at])?;
    if n < 1 {
        return Err(Reply::err(format!(
            "ERR at least 1 input key is needed for '{name}' command"
        )));
    }
    let first = at + 1;
    if n as u64 > (a.len() - first) as u64 {
        return Err(syntax_error());
    }
    let end = first + n as usize;
    Ok((&a[first..end], end))
}

/// The inputs (WRONGTYPE for a key that is neither a set nor a sorted set, checked before
/// the options, as Redis does).
fn lookup_inputs<'a>(ctx: &'a mut Ctx, keys: &[Bytes]) -> CmdResult<Vec<Input<'a>>> {
    let now = ctx.now_ms;
    let db = &ctx.ks.dbs[ctx.db];
    keys.iter()
        .map(|k| match db.read(k, now).map(|e| &e.value) {
            None => Ok(Input::Missing),
            Some(Value::ZSet(z)) => Ok(Input::ZSet(z)),
            Some(Value::Set(s)) => Ok(Input::Set(s)),
            Some(_) => Err(args::wrongtype()),
        })
        .collect()
}

/// The options after the keys, which end at `a[end]`.
fn parse_options<'a>(
    a: &'a [Bytes],
    keys: &'a [Bytes],
    end: usize,
    shape: Shape,
) -> CmdResult<Request<'a>> {
    let n = keys.len();
    let mut req = Request {
        keys,
        weights: vec![1.0; n],
        aggregate: Aggregate::Sum,
        with_scores: false,
        limit: 0,
    };
    let algebra = shape.op != Op::Diff && !shape.card_only;
    let mut j = end;
    while j < a.len() {
        let remaining = a.len() - j;
        let opt = &a[j];
        if algebra && remaining > n && is(opt, "weights") {
            for (i, w) in a[j + 1..j + 1 + n].iter().enumerate() {
                req.weights[i] = args::parse_f64(w)
                    .ok_or_else(|| Reply::err("ERR weight value is not a float"))?;
            }
            j += 1 + n;
        } else if algebra && remaining >= 2 && is(opt, "aggregate") {
            let v = &a[j + 1];
            req.aggregate = if is(v, "sum") {
                Aggregate::Sum
            } else if is(v, "min") {
                Aggregate::Min
            } else if is(v, "max") {
                Aggregate::Max
            } else {
                return Err(syntax_error());
            };
            j += 2;
        } else if !shape.store && !shape.card_only && is(opt, "withscores") {
            req.with_scores = true;
            j += 1;
        } else if shape.card_only && remaining >= 2 && is(opt, "limit") {
            // Redis's getPositiveLongFromObjectOrReply answers its message for a
            // non-integer too.
            req.limit = int(&a[j + 1])
                .ok()
                .and_then(|l| u64::try_from(l).ok())
                .ok_or_else(|| Reply::err("ERR LIMIT can't be negative"))?;
            j += 2;
        } else {
            return Err(syntax_error());
        }
    }
    Ok(req)
}

/// Order by (score, member bytes), as Redis's skiplist does; scores are never NaN here.
fn sort_by_score(items: &mut [(Bytes, f64)]) {
    items.sort_unstable_by(|a, b| {
        a.1.partial_cmp(&b.1)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then_with(|| a.0.cmp(&b.0))
    });
}

/// Inputs with their weights, smallest first (Redis sorts them by size for union and
/// intersection; a stable sort keeps equal sizes in the order given).
fn by_size<'a>(inputs: Vec<Input<'a>>, weights: &[f64]) -> Vec<(Input<'a>, f64)> {
    let mut v: Vec<(Input, f64)> = inputs.into_iter().zip(weights.iter().copied()).collect();
    v.sort_by_key(|(i, _)| i.len());
    v
}

fn union(inputs: Vec<Input>, req: &Request) -> Vec<(Bytes, f64)> {
    let inputs = by_size(inputs, &req.weights);
    let largest = inputs.last().map_or(0, |(i, _)| i.len());
    let mut acc: ahash::AHashMap<Bytes, f64> = ahash::AHashMap::with_capacity(largest);
    for (input, weight) in &inputs {
        input.for_each(|m, s| {
            let mut score = weight * s;
            if score.is_nan() {
                score = 0.0;
            }
            match acc.get_mut(m) {
                Some(acc_score) => aggregate(acc_score, score, req.aggregate),
                None => {
                    acc.insert(Bytes::copy_from_slice(m), score);
                }
            }
        });
    }
    let mut out: Vec<(Bytes, f64)> = acc.into_iter().collect();
    sort_by_score(&mut out);
    out
}

/// The members of the intersection with their aggregated scores, or only their count
/// (up to `limit`, 0: no limit) when `count_only`.
fn inter(inputs: Vec<Input>, req: &Request, count_only: bool) -> (Vec<(Bytes, f64)>, u64) {
    let inputs = by_size(inputs, &req.weights);
    let mut out = Vec::new();
    let mut count = 0u64;
    let (first, w0) = inputs[0];
    if first.len() == 0 {
        return (out, 0);
    }
    let mut done = false;
    first.for_each(|m, s| {
        if done {
            return;
        }
        let mut score = w0 * s;
        if score.is_nan() {
            score = 0.0;
        }
        for (other, w) in &inputs[1..] {
            let value = if other.same(&first) {
                Some(s)
            } else {
                other.score(m)
            };
            match value {
                Some(v) => aggregate(&mut score, v * w, req.aggregate),
                None => return,
            }
        }
        if count_only {
            count += 1;
            done = req.limit != 0 && count >= req.limit;
        } else {
            out.push((Bytes::copy_from_slice(m), score));
        }
    });
    if !count_only {
        sort_by_score(&mut out);
    }
    (out, count)
}

fn diff(inputs: Vec<Input>) -> Vec<(Bytes, f64)> {
    let first = inputs[0];
    if inputs[1..].iter().any(|i| i.same(&first)) {
        return Vec::new();
    }
    let mut out = Vec::new();
    first.for_each(|m, s| {
        if inputs[1..].iter().all(|i| i.score(m).is_none()) {
            out.push((Bytes::copy_from_slice(m), s));
        }
    });
    sort_by_score(&mut out);
    out
}

fn generic(ctx: &mut Ctx, a: &[Bytes], shape: Shape) -> Reply {
    run((|| {
        let at = if shape.store { 2 } else { 1 };
        let (keys, end) = parse_numkeys(a, at, shape.name)?;
        let resp = ctx.resp;
        let inputs = lookup_inputs(ctx, keys)?;
        let req = parse_options(a, keys, end, shape)?;
        debug_assert_eq!(req.keys.len(), inputs.len());
        let items = match shape.op {
            Op::Union => union(inputs, &req),
            Op::Inter if shape.card_only => {
                return Ok(Reply::Integer(inter(inputs, &req, true).1 as i64));
            }
            Op::Inter => inter(inputs, &req, false).0,
            Op::Diff => diff(inputs),
        };
        if shape.store {
            let dst = &a[1];
            let now = ctx.now_ms;
            if items.is_empty() {
                if ctx.db().remove(dst, now).is_some() {
                    ctx.notify(GENERIC | REMOVAL, "del", dst);
                }
                return Ok(Reply::Integer(0));
            }
            let z = SortedSet::from_sorted(items, ctx.ks.encodings.zset());
            let n = z.len() as i64;
            ctx.db().set(dst, Value::ZSet(z));
            ctx.notify(ZSET, shape.op.store_event(), dst);
            return Ok(Reply::Integer(n));
        }
        Ok(reply(resp, items, req.with_scores))
    })())
}

/// The members (with their scores): flat in RESP2, pairs in RESP3 (Redis's `addReplyDouble`
/// keeps `-0`, which a reply from the skiplist can carry).
fn reply(resp: u8, items: Vec<(Bytes, f64)>, with_scores: bool) -> Reply {
    if !with_scores {
        return Reply::Array(items.into_iter().map(|(m, _)| Reply::Bulk(m)).collect());
    }
    if resp >= 3 {
        return Reply::Array(
            items
                .into_iter()
                .map(|(m, s)| Reply::Array(vec![Reply::Bulk(m), Reply::Double(s)]))
                .collect(),
        );
    }
    let mut out = Vec::with_capacity(items.len() * 2);
    for (m, s) in items {
        out.push(Reply::Bulk(m));
        out.push(Reply::Bulk(Bytes::from(format_double(s))));
    }
    Reply::Array(out)
}

const fn shape(op: Op, store: bool, card_only: bool, name: &'static str) -> Shape {
    Shape {
        op,
        store,
        card_only,
        name,
    }
}

/// ZUNION numkeys key [key ...] [WEIGHTS weight ...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]
pub fn zunion(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    generic(ctx, a, shape(Op::Union, false, false, "zunion"))
}

/// ZUNIONSTORE destination numkeys key [key ...] [WEIGHTS weight ...] [AGGREGATE ...]
pub fn zunionstore(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    generic(ctx, a, shape(Op::Union, true, false, "zunionstore"))
}

/// ZINTER numkeys key [key ...] [WEIGHTS weight ...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]
pub fn zinter(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    generic(ctx, a, shape(Op::Inter, false, false, "zinter"))
}

/// ZINTERSTORE destination numkeys key [key ...] [WEIGHTS weight ...] [AGGREGATE ...]
pub fn zinterstore(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    generic(ctx, a, shape(Op::Inter, true, false, "zinterstore"))
}

/// ZINTERCARD numkeys key [key ...] [LIMIT limit]
pub fn zintercard(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    generic(ctx, a, shape(Op::Inter, false, true, "zintercard"))
}

/// ZDIFF numkeys key [key ...] [WITHSCORES]
pub fn zdiff(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    generic(ctx, a, shape(Op::Diff, false, false, "zdiff"))
}

/// ZDIFFSTORE destination numkeys key [key ...]
pub fn zdiffstore(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    generic(ctx, a, shape(Op::Diff, true, false, "zdiffstore"))
}

/// The keys of a STORE form: the destination, then the counted inputs (none when the
/// count does not parse).
fn store_keys(a: &[&[u8]]) -> Vec<Bytes> {
    let n = std::str::from_utf8(a.get(2).copied().unwrap_or_default())
        .ok()
        .and_then(|s| s.parse::<usize>().ok())
        .filter(|n| *n > 0);
    match n.and_then(|n| a.get(3..3 + n)) {
        Some(inputs) => std::iter::once(a[1])
            .chain(inputs.iter().copied())
            .map(Bytes::copy_from_slice)
            .collect(),
        None => Vec::new(),
    }
}

use super::flags::{DENYOOM, READONLY, WRITE};
use super::Keys;

const COUNTED: Keys = Keys::Counted {
    at: 1,
    optional: false,
};

/// Sorted-set algebra commands.
pub const COMMANDS: &[super::CommandSpec] = &[
    crate::cmd!("zunion", -3, READONLY, keys: COUNTED, zunion),
    crate::cmd!("zunionstore", -4, WRITE | DENYOOM, keys: Keys::Parsed { find: store_keys, first: 1 }, zunionstore),
    crate::cmd!("zinter", -3, READONLY, keys: COUNTED, zinter),
    crate::cmd!("zinterstore", -4, WRITE | DENYOOM, keys: Keys::Parsed { find: store_keys, first: 1 }, zinterstore),
    crate::cmd!("zintercard", -3, READONLY, keys: COUNTED, zintercard),
    crate::cmd!("zdiff", -3, READONLY, keys: COUNTED, zdiff),
    crate::cmd!("zdiffstore", -4, WRITE | DENYOOM, keys: Keys::Parsed { find: store_keys, first: 1 }, zdiffstore),
];
