//! Native limiter commands: `CL.THROTTLE` (redis-cell's command, reply for
//! reply), `INCREX` (Redis 8.8's bounded counter with expiry, the one-command
//! fixed window) and the `LIMIT.*` family over the algorithms in
//! [`crate::limiter`].
//!
//! Every limiter keeps its state in an ordinary key: the algorithm's compact
//! binary encoding stored as a string value, with a deadline at the moment the
//! limiter would be back to its initial state. So `TYPE` says `string`,
//! `TTL`/`DEL`/`SCAN`/`RENAME` work as on any key, and idle limiters free their
//! memory by expiring. A key holding another type, or a string that is not a
//! state of the expected algorithm, answers `WRONGTYPE`. Like every keyspace
//! command, these depend only on the keyspace, the arguments and `ctx.now_ms`.
//!
//! The `LIMIT.*` reply is one shape for every algorithm: RESP2
//! `[allowed 1|0, limit, remaining, retry_after_ms (-1 when allowed),
//! reset_after_ms]`; RESP3 a map with those five names, `allowed` as a RESP3
//! boolean. `LIMIT.ALL` answers `[verdict, line, line, ...]` (see
//! [`limit_all`] for its grammar).

use bytes::Bytes;

use super::args::{self, is, parse_i64, syntax_error, wrongtype, CmdResult, NOT_FLOAT};
use super::keys::{expire_time_error, relative_deadline};
use super::strings::run;
use super::Ctx;
use crate::limiter::{
    self, cell, concurrency, Algorithm, Codec, Decision, LimitError, Named, Outcome, Rule,
};
use crate::metrics::Decider;
use crate::protocol::Reply;
use crate::store::value::StrBytes;
use crate::store::{Db, Entry, StrValue, Value};

/// The error for a negative `COST`.
const COST_ERROR: &str = "ERR cost must be a non-negative integer";

// ---------------------------------------------------------------------------
// Replies and state storage shared by every limiter command
// ---------------------------------------------------------------------------

fn limit_error(e: LimitError) -> Reply {
    Reply::err(e.to_string())
}

/// A u64 as a RESP integer (saturating; no realistic limit reaches it).
fn sat(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The one limiter reply: a 5-integer array in RESP2, a map in RESP3.
fn decision_reply(d: &Decision, resp: u8) -> Reply {
    if resp >= 3 {
        Reply::Map(vec![
            (Reply::bulk("allowed"), Reply::Bool(d.allowed)),
            (Reply::bulk("limit"), Reply::Integer(sat(d.limit))),
            (Reply::bulk("remaining"), Reply::Integer(sat(d.remaining))),
            (
                Reply::bulk("retry_after_ms"),
                Reply::Integer(d.retry_after_ms),
            ),
            (
                Reply::bulk("reset_after_ms"),
                Reply::Integer(sat(d.reset_after_ms)),
            ),
        ])
    } else {
        Reply::Ints5([
            i64::from(d.allowed),
            sat(d.limit),
            sat(d.remaining),
            d.retry_after_ms,
            sat(d.reset_after_ms),
        ])
    }
}

/// Count a decision of `who` on `key` (charging `units` when allowed) where this server
/// counts them; changes no reply and no state.
#[inline]
fn count_decision(ctx: &Ctx, who: Decider, key: &[u8], allowed: bool, units: u64) {
    if let Some(metrics) = ctx.metrics {
        metrics.decisions.record(who, key, allowed, units);
    }
}

/// Runs `rule` with `cost` against the state stored at `key`, without copying it.
fn evaluate_stored(
    db: &Db,
    key: &[u8],
    rule: &Rule,
    cost: u64,
    now: u64,
) -> CmdResult<Outcome<Vec<u8>>> {
    let bytes = state_bytes(db.get(key, now))?;
    rule.evaluate_encoded(bytes, cost, now)
        .ok_or_else(wrongtype)
}

/// The bytes a limiter state is stored as: `None` when the key is absent, WRONGTYPE
/// for anything but a string of raw bytes (an integer string is never a state: every
/// encoding starts with a non-digit magic).
fn state_bytes(entry: Option<&Entry>) -> CmdResult<Option<&[u8]>> {
    match entry {
        None => Ok(None),
        Some(Entry {
            value: Value::Str(StrValue::Raw(b)),
            ..
        }) => Ok(Some(&b[..])),
        Some(_) => Err(wrongtype()),
    }
}

/// Decodes a stored state with `decode`; a string that is not one is WRONGTYPE.
fn decoded<S>(bytes: Option<&[u8]>, decode: fn(&[u8]) -> Option<S>) -> CmdResult<Option<S>> {
    bytes.map(|b| decode(b).ok_or_else(wrongtype)).transpose()
}

/// Stores an encoded state as a string value that expires once the limiter
/// is back to its initial state (see [`deadline_for`]). The key is known to be
/// absent or a limiter state (the caller read it with [`state_bytes`]).
fn save(db: &mut Db, key: &[u8], state: Vec<u8>, now: u64, ttl_ms: u64) {
    let written = update(db, key, now, |_| Ok((Some((state, ttl_ms)), ())));
    debug_assert!(written.is_ok());
}

/// A state written with what the limiter decided: the encoded state and its TTL.
type Write = Option<(Vec<u8>, u64)>;

/// Read-modify-write of one limiter key in a single keyspace lookup: `f` gets the
/// stored bytes (`None` when the key is absent or expired) and returns the state to
/// write, if any, with its TTL, plus its result. Keys of other types are WRONGTYPE.
fn update<T>(
    db: &mut Db,
    key: &[u8],
    now: u64,
    f: impl FnOnce(Option<&[u8]>) -> CmdResult<(Write, T)>,
) -> CmdResult<T> {
    db.modify(key, now, |entry| {
        let bytes = match state_bytes(entry) {
            Ok(bytes) => bytes,
            Err(e) => return (None, Err(e)),
        };
        let deadline = entry.and_then(Entry::expires_at);
        match f(bytes) {
            Err(e) => (None, Err(e)),
            Ok((None, out)) => (None, Ok(out)),
            Ok((Some((state, ttl_ms)), out)) => {
                let value = Value::Str(StrValue::Raw(StrBytes::new(&state)));
                (Some((value, deadline_for(deadline, now, ttl_ms))), Ok(out))
            }
        }
    })
}

/// The deadline of a limiter key written at `now` whose state is back to its initial
/// value after `ttl_ms`, given its current deadline: `now + ttl_ms` rounded up to
/// [`granule`].
///
/// The deadline moves only when it must: when it is earlier than needed (the state
/// would vanish while it still counts) or more than two granules later. Moving a
/// deadline costs two updates of the keyspace's deadline index, which dominated the
/// cost of a limiter call; with the rounding, successive calls on a key mostly leave
/// it alone. A key outlives its state by less than two granules (at most an eighth of
/// its TTL or 128 ms, whichever is larger, and under 2.1 s), and a state past its
/// reset decides like an absent one.
fn deadline_for(current: Option<u64>, now: u64, ttl_ms: u64) -> Option<u64> {
    let need = now.saturating_add(ttl_ms);
    let step = granule(ttl_ms);
    if current.is_some_and(|d| d >= need && d - need < 2 * step) {
        return current;
    }
    Some(need.checked_next_multiple_of(step).unwrap_or(need))
}

/// The rounding step of a limiter key's deadline: the largest power of two
/// at most `ttl_ms / 16`, between 64 and 1024 ms (short-lived states churn
/// their deadline fastest, and 128 ms of extra life costs nothing).
fn granule(ttl_ms: u64) -> u64 {
    let g = (ttl_ms / 16).clamp(64, 1024);
    1 << (63 - g.leading_zeros())
}

// ---------------------------------------------------------------------------
// Rate rules: the algorithms behind LIMIT.<NAME> and LIMIT.ALL
// ---------------------------------------------------------------------------

/// A count argument (limit, capacity, lease slots).
fn count(arg: &[u8]) -> CmdResult<u64> {
    limiter::count(arg).map_err(limit_error)
}

/// A duration: milliseconds, or digits with a unit (`ms`, `s`, `m`, `h`, `d`).
fn duration(arg: &[u8]) -> CmdResult<u64> {
    limiter::parse_duration(arg).map_err(limit_error)
}

/// A `COST`: a non-negative integer (0 peeks).
fn cost(arg: &[u8]) -> CmdResult<u64> {
    if let Some(n) = limiter::plain_u64(arg) {
        return Ok(n);
    }
    args::non_negative(arg, COST_ERROR).map(|n| n as u64)
}

/// At most this many options besides COST per algorithm ([`Algorithm::OPTIONS`]).
const MAX_OPTIONS: usize = 2;

/// A rule's options as given: its `COST`, and the values of the algorithm's own options
/// (`values[i]` for option `i`).
struct RuleOptions {
    cost: Option<u64>,
    values: [Option<u64>; MAX_OPTIONS],
}

impl RuleOptions {
    /// No option given (the usual call).
    const NONE: RuleOptions = RuleOptions {
        cost: None,
        values: [None; MAX_OPTIONS],
    };
}

/// Parses a rule's options, `COST n` and the algorithm's own (`names`), each at most
/// once and each taking a number.
fn rule_options(names: &[&str], opts: &[&[u8]]) -> CmdResult<RuleOptions> {
    let mut o = RuleOptions::NONE;
    let mut i = 0;
    while i < opts.len() {
        let (opt, value) = (&opts[i], opts.get(i + 1).ok_or_else(syntax_error)?);
        if is(opt, "cost") && o.cost.is_none() {
            o.cost = Some(cost(value)?);
        } else {
            let at = names.iter().position(|name| is(opt, name));
            match at.and_then(|at| o.values.get_mut(at)) {
                Some(slot @ None) => *slot = Some(count(value)?),
                _ => return Err(syntax_error()),
            }
        }
        i += 2;
    }
    Ok(o)
}

/// `LIMIT.<NAME> key args... [COST n] [option value]`: one rule of algorithm `P`, one key.
pub fn limit_rule<P: Algorithm>(ctx: &mut Ctx, a: &[&[u8]]) -> Reply {
    run(limit_one::<P>(ctx, a))
}

fn limit_one<P: Algorithm>(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult<Reply> {
    // The row's arity guarantees the key and the positional arguments.
    let (args, opts) = a[2..].split_at(P::ARGS);
    let o = if opts.is_empty() {
        RuleOptions::NONE
    } else {
        rule_options(P::OPTIONS, opts)?
    };
    let params = P::parse(args, &o.values[..P::OPTIONS.len()]).map_err(limit_error)?;
    let (now, resp) = (ctx.now_ms, ctx.resp);
    let cost = o.cost.unwrap_or(1);
    let decision = update(ctx.db(), a[1], now, |bytes| {
        let out = params
            .evaluate_encoded(bytes, cost, now)
            .ok_or_else(wrongtype)?;
        let write = out.new_state.map(|state| (state, out.ttl_ms));
        Ok((write, out.decision))
    })?;
    count_decision(
        ctx,
        Decider::Rule(<P::State as Named>::TAG),
        a[1],
        decision.allowed,
        cost,
    );
    Ok(decision_reply(&decision, resp))
}

// ---------------------------------------------------------------------------
// LIMIT.ALL
// ---------------------------------------------------------------------------

/// A parsed `LIMIT.ALL` call: each rule's key, rule and cost.
struct AllRules<'a> {
    rules: Vec<(&'a [u8], Rule, u64)>,
}

/// Parses `LIMIT.ALL`'s arguments (after the name):
/// `[COST n] <ALGO key args... [COST n] [PRECISION p]> ...`.
///
/// Each rule is an algorithm name (FIXED, SLIDING, LOG, TOKEN, LEAKY, GCRA: the
/// rate rules of [`limiter::RULES`]),
/// then exactly that algorithm's positional arguments (the key first), then
/// its options until the next algorithm name. Option keywords and algorithm
/// names are disjoint, and positional arguments are taken by count, so the
/// grammar is unambiguous whatever the keys are called. A leading `COST n`
/// applies to every rule without its own `COST`. Keys must be distinct.
fn parse_all<'a>(args: &[&'a [u8]]) -> CmdResult<AllRules<'a>> {
    let (mut i, mut default_cost) = (0, 1);
    if args.len() >= 2 && is(args[0], "cost") {
        default_cost = cost(args[1])?;
        i = 2;
    }
    // Every rule takes at least four arguments.
    let mut rules = Vec::with_capacity(args.len() / 4);
    while i < args.len() {
        let syntax = limiter::rule_syntax(args[i]).ok_or_else(|| {
            Reply::err(super::sanitize(&format!(
                "ERR unknown limiter algorithm '{}'",
                super::arg_text(args[i])
            )))
        })?;
        let start = i + 1;
        let end = start + 1 + syntax.args;
        if end > args.len() {
            return Err(syntax_error());
        }
        let mut next = end;
        while next < args.len() && limiter::rule_syntax(args[next]).is_none() {
            next += 1;
        }
        let o = rule_options(syntax.options, &args[end..next])?;
        let values = &o.values[..syntax.options.len()];
        let rule = (syntax.parse)(&args[start + 1..end], values).map_err(limit_error)?;
        rules.push((args[start], rule, o.cost.unwrap_or(default_cost)));
        i = next;
    }
    if rules.is_empty() {
        return Err(syntax_error());
    }
    if !distinct_keys(&rules) {
        return Err(Reply::err("ERR LIMIT.ALL rules must use distinct keys"));
    }
    Ok(AllRules { rules })
}

/// Whether no two rules name the same key (pairwise for the usual few rules,
/// by sorting for many).
fn distinct_keys(rules: &[(&[u8], Rule, u64)]) -> bool {
    if rules.len() <= 8 {
        return rules
            .iter()
            .enumerate()
            .all(|(i, a)| rules[i + 1..].iter().all(|b| a.0 != b.0));
    }
    let mut keys: Vec<&[u8]> = rules.iter().map(|r| r.0).collect();
    keys.sort_unstable();
    !keys.windows(2).any(|w| w[0] == w[1])
}

/// The keys a `LIMIT.ALL` call touches, in rule order (empty if it does not
/// parse): its keys are not at fixed positions, so the command table lists
/// none and a router that needs them calls this.
pub fn limit_all_keys(a: &[&[u8]]) -> Vec<Bytes> {
    parse_all(a.get(1..).unwrap_or_default())
        .map(|all| {
            all.rules
                .iter()
                .map(|r| Bytes::copy_from_slice(r.0))
                .collect()
        })
        .unwrap_or_default()
}

/// LIMIT.ALL [COST n] rule [rule ...], each rule `ALGO key args... [COST n] [PRECISION p]`.
///
/// All or nothing: every rule is evaluated; only if every one admits are all
/// the new states stored, otherwise nothing is written. The reply is
/// `[verdict, line, line, ...]`: the verdict 1/0 (a boolean in RESP3), then
/// one limiter line per rule in order. A rule that rejected shows its own
/// verdict and retry time; when the call was rejected, a rule that would
/// have admitted shows `allowed` with its current, unconsumed state.
pub fn limit_all(ctx: &mut Ctx, a: &[&[u8]]) -> Reply {
    run(limit_all_inner(ctx, a))
}

fn limit_all_inner(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult<Reply> {
    let all = parse_all(&a[1..])?;
    let (now, resp) = (ctx.now_ms, ctx.resp);
    let mut runs = Vec::with_capacity(all.rules.len());
    for (key, rule, rule_cost) in &all.rules {
        runs.push(evaluate_stored(ctx.db(), key, rule, *rule_cost, now)?);
    }
    let allowed = runs.iter().all(|r| r.decision.allowed);
    if let (Some(metrics), Some(first)) = (ctx.metrics, all.rules.first()) {
        let units = all
            .rules
            .iter()
            .map(|r| r.2)
            .fold(0u64, u64::saturating_add);
        metrics
            .decisions
            .record(Decider::All, first.0, allowed, units);
    }
    let db = ctx.db();
    let mut lines = Vec::with_capacity(runs.len() + 1);
    lines.push(if resp >= 3 {
        Reply::Bool(allowed)
    } else {
        Reply::Integer(i64::from(allowed))
    });
    for (&(key, rule, _), applied) in all.rules.iter().zip(runs) {
        let mut decision = applied.decision;
        if allowed {
            if let Some(state) = applied.new_state {
                save(db, key, state, now, applied.ttl_ms);
            }
        } else if decision.allowed {
            // Nothing was consumed (nor written): report the rule's untouched state.
            if let Ok(peek) = evaluate_stored(db, key, &rule, 0, now) {
                decision = peek.decision;
            }
        }
        lines.push(decision_reply(&decision, resp));
    }
    Ok(Reply::Array(lines))
}

// ---------------------------------------------------------------------------
// Concurrency slots, reset, info
// ---------------------------------------------------------------------------

/// LIMIT.ACQUIRE key limit lease id: take (or renew) a slot for `id`.
pub fn limit_acquire(ctx: &mut Ctx, a: &[&[u8]]) -> Reply {
    run(acquire_inner(ctx, a))
}

fn acquire_inner(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult<Reply> {
    let params = concurrency::Params::new(count(a[2])?, duration(a[3])?).map_err(limit_error)?;
    let (now, resp) = (ctx.now_ms, ctx.resp);
    let decision = update(ctx.db(), a[1], now, |bytes| {
        let out = concurrency::acquire_encoded(bytes, &params, a[4], now).ok_or_else(wrongtype)?;
        let write = out.new_state.map(|s| (s, out.ttl_ms));
        Ok((write, out.decision))
    })?;
    count_decision(ctx, Decider::Acquire, a[1], decision.allowed, 1);
    Ok(decision_reply(&decision, resp))
}

/// LIMIT.RELEASE key id: free `id`'s slot; 1 if it held a live lease, else 0.
pub fn limit_release(ctx: &mut Ctx, a: &[&[u8]]) -> Reply {
    run(release_inner(ctx, a))
}

fn release_inner(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult<Reply> {
    let now = ctx.now_ms;
    let key = a[1];
    let db = ctx.db();
    let Some(state) = decoded(state_bytes(db.get(key, now))?, concurrency::State::decode)? else {
        return Ok(Reply::Integer(0));
    };
    let r = concurrency::release(Some(&state), a[2], now);
    match r.new_state {
        Some(s) if s.is_empty() => {
            db.remove(key, now);
        }
        Some(s) => save(db, key, s.encode(), now, r.ttl_ms),
        None => {}
    }
    Ok(Reply::Integer(i64::from(r.released)))
}

/// LIMIT.RESET key: delete a limiter's state; 1 if there was one, 0 if absent.
pub fn limit_reset(ctx: &mut Ctx, a: &[&[u8]]) -> Reply {
    run(reset_inner(ctx, a))
}

fn reset_inner(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult<Reply> {
    let now = ctx.now_ms;
    let db = ctx.db();
    let Some(bytes) = state_bytes(db.get(a[1], now))? else {
        return Ok(Reply::Integer(0));
    };
    if limiter::decode_any(bytes).is_none() {
        return Err(wrongtype());
    }
    db.remove(a[1], now);
    Ok(Reply::Integer(1))
}

/// LIMIT.INFO key: `algorithm`, the state's fields and the key's `ttl_ms`
/// (-1 without a deadline) as a map; nil when the key is absent.
pub fn limit_info(ctx: &mut Ctx, a: &[&[u8]]) -> Reply {
    run(info_inner(ctx, a))
}

fn info_inner(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult<Reply> {
    let now = ctx.now_ms;
    let db = ctx.db();
    let entry = db.read(a[1], now);
    let Some(bytes) = state_bytes(entry)? else {
        return Ok(Reply::Nil);
    };
    let state = limiter::decode_any(bytes).ok_or_else(wrongtype)?;
    let ttl = entry
        .and_then(Entry::expires_at)
        .map_or(-1, |t| sat(t.saturating_sub(now)));
    let mut fields = vec![(Reply::bulk("algorithm"), Reply::bulk(state.name()))];
    fields.extend(
        state
            .info()
            .into_iter()
            .map(|(name, v)| (Reply::bulk(name), Reply::Integer(v))),
    );
    fields.push((Reply::bulk("ttl_ms"), Reply::Integer(ttl)));
    Ok(Reply::Map(fields))
}

// ---------------------------------------------------------------------------
// CL.THROTTLE
// ---------------------------------------------------------------------------

/// CL.THROTTLE key max_burst count_per_period period [quantity]: redis-cell's
/// arguments, error texts and 5-integer reply (in seconds), in every protocol.
pub fn cl_throttle(ctx: &mut Ctx, a: &[&[u8]]) -> Reply {
    run(throttle_inner(ctx, a))
}

fn throttle_inner(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult<Reply> {
    let (params, quantity) = cell::Params::parse_args(&a[1..]).map_err(limit_error)?;
    let now = ctx.now_ms;
    let reply = update(ctx.db(), a[1], now, |bytes| {
        let state = decoded(bytes, cell::State::decode)?;
        let t = cell::throttle(state.as_ref(), &params, quantity, now);
        let write = t.outcome.new_state.map(|s| (s.encode(), t.outcome.ttl_ms));
        Ok((write, t.reply))
    })?;
    // redis-cell's first reply integer: 0 allowed, 1 limited.
    count_decision(ctx, Decider::Throttle, a[1], reply[0] == 0, quantity);
    Ok(Reply::Ints5(reply))
}

// ---------------------------------------------------------------------------
// INCREX
// ---------------------------------------------------------------------------

/// INCREX's number kind: the default and BYINT count in i64, BYFLOAT in f64.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Num {
    Int(i64),
    Float(f64),
}

/// INCREX's options, as given (values still unparsed).
#[derive(Default)]
struct IncrexArgs<'a> {
    by: Option<(bool, &'a [u8])>,
    lbound: Option<&'a [u8]>,
    ubound: Option<&'a [u8]>,
    saturate: bool,
    expire: Option<(&'a [u8], &'a [u8])>,
    persist: bool,
    enx: bool,
}

/// Syntax pass: each option at most once, one expiration, ENX not with PERSIST.
fn parse_increx<'a>(a: &[&'a [u8]]) -> CmdResult<IncrexArgs<'a>> {
    let mut o = IncrexArgs::default();
    let mut i = 2;
    while i < a.len() {
        let opt = &a[i];
        let value = a.get(i + 1);
        match value {
            Some(v) if (is(opt, "byint") || is(opt, "byfloat")) && o.by.is_none() => {
                o.by = Some((is(opt, "byfloat"), v));
            }
            Some(v) if is(opt, "lbound") && o.lbound.is_none() => o.lbound = Some(v),
            Some(v) if is(opt, "ubound") && o.ubound.is_none() => o.ubound = Some(v),
            Some(v)
                if ["ex", "px", "exat", "pxat"].iter().any(|k| is(opt, k))
                    && o.expire.is_none()
                    && !o.persist =>
            {
                o.expire = Some((opt, v));
            }
            _ if is(opt, "saturate") && !o.saturate => {
                o.saturate = true;
                i += 1;
                continue;
            }
            _ if is(opt, "persist") && !o.persist && o.expire.is_none() && !o.enx => {
                o.persist = true;
                i += 1;
                continue;
            }
            _ if is(opt, "enx") && !o.enx && !o.persist => {
                o.enx = true;
                i += 1;
                continue;
            }
            _ => return Err(syntax_error()),
        }
        i += 2;
    }
    if o.enx && o.expire.is_none() {
        return Err(Reply::err("ERR ENX flag requires an expiration"));
    }
    Ok(o)
}

/// A float the way Redis's `string2ld` reads one: `inf` spelled out is
/// infinite, but a literal that overflows (`1e99999`) is not a valid float.
fn strict_float(b: &[u8]) -> Option<f64> {
    let v = args::parse_f64(b)?;
    let spelled_inf = b.iter().any(|c| c.eq_ignore_ascii_case(&b'i'));
    (v.is_finite() || spelled_inf).then_some(v)
}

/// Parses a bound in the increment's kind.
fn bound(arg: Option<&[u8]>, float: bool, name: &str) -> CmdResult<Option<Num>> {
    let Some(arg) = arg else {
        return Ok(None);
    };
    if float {
        strict_float(arg)
            .map(|v| Some(Num::Float(v)))
            .ok_or_else(|| Reply::err(format!("ERR {name} is not a valid float")))
    } else {
        parse_i64(arg)
            .map(|v| Some(Num::Int(v)))
            .ok_or_else(|| Reply::err(format!("ERR {name} is not an integer or out of range")))
    }
}

/// The absolute deadline an EX/PX/EXAT/PXAT option asks for.
fn increx_deadline(opt: &[u8], value: &[u8], now: u64) -> CmdResult<u64> {
    let n = args::int(value)?;
    let seconds = is(opt, "ex") || is(opt, "exat");
    let ms = if seconds {
        n.checked_mul(1000)
    } else {
        Some(n)
    };
    let ms = match ms {
        Some(ms) if n > 0 => ms,
        _ => return Err(expire_time_error("increx")),
    };
    if is(opt, "exat") || is(opt, "pxat") {
        Ok(ms as u64)
    } else {
        relative_deadline(ms, now).ok_or_else(|| expire_time_error("increx"))
    }
}

/// The outcome of INCREX's arithmetic: the value to reply (and store, if
/// `apply`), and the increment actually applied.
#[derive(Debug, PartialEq)]
struct Incremented {
    value: Num,
    delta: Num,
    apply: bool,
}

/// Integer INCREX: reject (or saturate) a result outside `[lb, ub]` or i64.
fn increment_int(old: i64, by: i64, lb: i64, ub: i64, saturate: bool) -> CmdResult<Incremented> {
    let result = old.checked_add(by);
    let target = match result {
        Some(r) if (lb..=ub).contains(&r) => r,
        _ if !saturate => {
            return Ok(Incremented {
                value: Num::Int(old),
                delta: Num::Int(0),
                apply: false,
            })
        }
        Some(r) if r > ub => ub,
        Some(_) => lb,
        None if by > 0 => ub,
        None => lb,
    };
    let delta = target
        .checked_sub(old)
        .ok_or_else(|| Reply::err("ERR applied increment would overflow"))?;
    Ok(Incremented {
        value: Num::Int(target),
        delta: Num::Int(delta),
        apply: true,
    })
}

/// Float INCREX: the same, with an infinite sum counting as past the type's limit.
fn increment_float(old: f64, by: f64, lb: f64, ub: f64, saturate: bool) -> CmdResult<Incremented> {
    let result = old + by;
    let above = result > ub || result == f64::INFINITY;
    let below = result < lb || result == f64::NEG_INFINITY;
    if (above || below) && !saturate {
        return Ok(Incremented {
            value: Num::Float(old),
            delta: Num::Float(0.0),
            apply: false,
        });
    }
    let target = if above {
        ub
    } else if below {
        lb
    } else {
        result
    };
    let delta = target - old;
    if !target.is_finite() || !delta.is_finite() {
        return Err(Reply::err("ERR applied increment would be Infinity"));
    }
    Ok(Incremented {
        value: Num::Float(target),
        delta: Num::Float(delta),
        apply: true,
    })
}

fn num_reply(n: Num, resp: u8) -> Reply {
    match n {
        Num::Int(v) => Reply::Integer(v),
        Num::Float(v) if resp >= 3 => Reply::Double(v),
        Num::Float(v) => Reply::Bulk(Bytes::from(args::human_float(v))),
    }
}

/// INCREX key [BYFLOAT f | BYINT n] [LBOUND lb] [UBOUND ub] [SATURATE]
/// [EX s | PX ms | EXAT s | PXAT ms | PERSIST] [ENX], as documented for Redis 8.8:
/// replies `[new value, applied increment]`; an out-of-bounds result is
/// skipped (`[current, 0]`, key and TTL untouched) unless SATURATE caps it.
pub fn increx(ctx: &mut Ctx, a: &[&[u8]]) -> Reply {
    run(increx_inner(ctx, a))
}

fn increx_inner(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult<Reply> {
    let o = parse_increx(a)?;
    let (now, resp) = (ctx.now_ms, ctx.resp);
    let float = o.by.is_some_and(|b| b.0);
    let by = match o.by {
        None => Num::Int(1),
        Some((false, v)) => Num::Int(
            parse_i64(v)
                .ok_or_else(|| Reply::err("ERR Increment is not an integer or out of range"))?,
        ),
        Some((true, v)) => match strict_float(v) {
            None => return Err(Reply::err("ERR Increment is not a valid float")),
            Some(f) if f.is_infinite() => {
                return Err(Reply::err("ERR BYFLOAT increment cannot be Infinity"))
            }
            Some(f) => Num::Float(f),
        },
    };
    let lb = bound(o.lbound, float, "LBOUND")?;
    let ub = bound(o.ubound, float, "UBOUND")?;
    let inverted = match (lb, ub) {
        (Some(Num::Int(l)), Some(Num::Int(u))) => l > u,
        (Some(Num::Float(l)), Some(Num::Float(u))) => l > u,
        _ => false,
    };
    if inverted {
        return Err(Reply::err("ERR LBOUND can't be greater than UBOUND"));
    }
    let deadline = o
        .expire
        .map(|(opt, v)| increx_deadline(opt, v, now))
        .transpose()?;
    let key = &a[1];
    let db = ctx.db();
    let (current, has_ttl) = match db.get(key, now) {
        None => (None, false),
        Some(e) => match &e.value {
            Value::Str(s) => (Some(s), e.expires_at().is_some()),
            _ => return Err(wrongtype()),
        },
    };
    let outcome = match by {
        Num::Int(by) => {
            let old = match current {
                None => 0,
                Some(StrValue::Int(n)) => *n,
                Some(StrValue::Raw(b)) => {
                    parse_i64(b).ok_or_else(|| Reply::err(args::NOT_INTEGER))?
                }
            };
            let lb = match lb {
                Some(Num::Int(l)) => l,
                _ => i64::MIN,
            };
            let ub = match ub {
                Some(Num::Int(u)) => u,
                _ => i64::MAX,
            };
            increment_int(old, by, lb, ub, o.saturate)?
        }
        Num::Float(by) => {
            let old = match current {
                None => 0.0,
                Some(StrValue::Int(n)) => *n as f64,
                Some(StrValue::Raw(b)) => strict_float(b).ok_or_else(|| Reply::err(NOT_FLOAT))?,
            };
            if old.is_infinite() {
                return Err(Reply::err("ERR value cannot be Infinity"));
            }
            let lb = match lb {
                Some(Num::Float(l)) => l,
                _ => -f64::MAX,
            };
            let ub = match ub {
                Some(Num::Float(u)) => u,
                _ => f64::MAX,
            };
            increment_float(old, by, lb, ub, o.saturate)?
        }
    };
    if outcome.apply {
        let value = match outcome.value {
            Num::Int(v) => Value::Str(StrValue::Int(v)),
            Num::Float(v) => Value::string(args::human_float(v)),
        };
        match db.get_mut(key, now) {
            Some(e) => e.value = value,
            None => db.set(key, value),
        }
        match deadline {
            Some(_) if o.enx && has_ttl => {}
            Some(t) if t <= now => {
                db.remove(key, now);
            }
            Some(t) => {
                db.set_expiry(key, Some(t));
            }
            None if o.persist => {
                db.set_expiry(key, None);
            }
            None => {}
        }
    }
    Ok(Reply::Array(vec![
        num_reply(outcome.value, resp),
        num_reply(outcome.delta, resp),
    ]))
}

use super::flags::{DENYOOM, FAST, READONLY, WRITE};

/// The limiter commands, with one `LIMIT.<NAME>` row per rate rule of
/// [`limiter::algorithms!`].
///
/// `cl.throttle` has arity -1 so that every wrong argument count gets
/// redis-cell's own usage error rather than Redis's arity error. The keys of
/// `limit.all` follow the rule grammar ([`limit_all_keys`]).
macro_rules! limiter_commands {
    (
        rules: $($rule:ident => $rm:ident $rtag:literal),+;
        others: $($other:ident => $om:ident $otag:literal),+;
    ) => {
        /// Limiter commands.
        pub const COMMANDS: &[super::CommandSpec] = &[
            crate::cmd!("cl.throttle", -1, WRITE | DENYOOM | FAST, 1, 1, 1, fast: cl_throttle),
            crate::cmd!("increx", -2, WRITE | DENYOOM | FAST, 1, 1, 1, fast: increx),
            $(
                crate::cmd!(
                    concat!("limit.", stringify!($rm)),
                    -2 - <limiter::$rm::Params as Algorithm>::ARGS as i32,
                    WRITE | DENYOOM | FAST,
                    1,
                    1,
                    1,
                    fast: limit_rule::<limiter::$rm::Params>
                ),
            )+
            crate::cmd!(
                "limit.all",
                -5,
                WRITE | DENYOOM,
                keys: super::Keys::Parsed { find: limit_all_keys, first: 0 },
                fast: limit_all
            ),
            crate::cmd!("limit.acquire", 5, WRITE | DENYOOM | FAST, 1, 1, 1, fast: limit_acquire),
            crate::cmd!("limit.release", 3, WRITE | FAST, 1, 1, 1, fast: limit_release),
            crate::cmd!("limit.reset", 2, WRITE | FAST, 1, 1, 1, fast: limit_reset),
            crate::cmd!("limit.info", 2, READONLY | FAST, 1, 1, 1, fast: limit_info),
        ];
    };
}

limiter::algorithms!(limiter_commands);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Keyspace;

    fn call(ks: &mut Keyspace, now: u64, resp: u8, line: &str) -> Reply {
        let args: Vec<Bytes> = line
            .split(' ')
            .map(|s| Bytes::copy_from_slice(s.as_bytes()))
            .collect();
        let mut ctx = Ctx {
            ks,
            db: 0,
            now_ms: now,
            now_us: now * 1000,
            seed: 0,
            resp,
            oom: false,
            scripts: None,
            metrics: None,
            user: None,
            monitored: false,
            error_counted: false,
        };
        super::super::execute(&mut ctx, &args)
    }

    fn ints(r: &Reply) -> Vec<i64> {
        match r {
            Reply::Ints5(items) => items.to_vec(),
            Reply::Array(items) => items
                .iter()
                .map(|i| match i {
                    Reply::Integer(n) => *n,
                    other => panic!("not an integer: {other:?}"),
                })
                .collect(),
            other => panic!("not an array: {other:?}"),
        }
    }

    #[test]
    fn all_grammar_takes_positionals_by_count_and_options_until_the_next_rule() {
        let args: Vec<&[u8]> =
            "COST 2 FIXED cost 10 1s SLIDING fixed 5 1m PRECISION 6 COST 1 TOKEN t 3 1 1s"
                .split(' ')
                .map(str::as_bytes)
                .collect();
        let all = parse_all(&args).unwrap();
        let keys: Vec<&[u8]> = all.rules.iter().map(|r| r.0).collect();
        assert_eq!(keys, [&b"cost"[..], b"fixed", b"t"]);
        let costs: Vec<u64> = all.rules.iter().map(|r| r.2).collect();
        assert_eq!(costs, [2, 1, 2]);
        assert!(matches!(all.rules[1].1, Rule::Sliding(p) if p.buckets() == 6));
        let mut full = vec![&b"limit.all"[..]];
        full.extend(&args);
        assert_eq!(limit_all_keys(&full).len(), 3);
        for bad in [
            "FIXED k 10",
            "FIXED k 10 1s COST",
            "FIXED k 10 1s PRECISION 2",
            "COST 1",
            "FIXED k 1 1s LOG k 1 1s",
            "CELL k 1 1 1",
        ] {
            let args: Vec<&[u8]> = bad.split(' ').map(str::as_bytes).collect();
            assert!(parse_all(&args).is_err(), "{bad}");
        }
    }

    #[test]
    fn every_rate_rule_has_its_command() {
        for r in limiter::RULES {
            let name = format!("limit.{}", r.name);
            let spec = super::super::lookup(name.as_bytes()).expect("a LIMIT.<NAME> row");
            assert_eq!(spec.name, name);
            assert_eq!(spec.arity, -2 - r.args as i32, "{name}");
        }
    }

    #[test]
    fn increx_arithmetic_follows_the_redis_tests() {
        let r = |old, by, lb, ub, sat| increment_int(old, by, lb, ub, sat).unwrap();
        assert_eq!(r(50, 5, i64::MIN, 30, false).value, Num::Int(50));
        assert_eq!(r(50, 5, i64::MIN, 30, true).delta, Num::Int(-20));
        assert_eq!(r(-50, -5, -30, i64::MAX, true).delta, Num::Int(20));
        let big = 9_223_372_036_854_775_800;
        assert_eq!(r(big, big, i64::MIN, i64::MAX, true).delta, Num::Int(7));
        assert!(!r(big, big, i64::MIN, i64::MAX, false).apply);
        assert_eq!(r(-big, -big, i64::MIN, i64::MAX, true).delta, Num::Int(-8));
        assert!(increment_int(big, 1, i64::MIN, i64::MIN, true).is_err());
        let f = |old, by, lb, ub, sat| increment_float(old, by, lb, ub, sat).unwrap();
        assert_eq!(
            f(10.0, 100.0, -f64::MAX, 42.5, true).delta,
            Num::Float(32.5)
        );
        assert_eq!(f(50.5, 5.5, -f64::MAX, 30.0, true).delta, Num::Float(-20.5));
        assert!(!f(10.0, 1.0, f64::NEG_INFINITY, f64::NEG_INFINITY, false).apply);
        assert!(increment_float(10.0, 1.0, f64::NEG_INFINITY, f64::NEG_INFINITY, true).is_err());
        assert!(!f(f64::MAX, f64::MAX, -f64::MAX, f64::MAX, false).apply);
        assert_eq!(strict_float(b"1e99999"), None);
        assert_eq!(strict_float(b"-inf"), Some(f64::NEG_INFINITY));
    }

    #[test]
    fn commands_run_against_a_keyspace() {
        let mut ks = Keyspace::default();
        let t = 1_700_000_000_000;
        assert_eq!(
            ints(&call(&mut ks, t, 2, "LIMIT.FIXED k 2 1s")),
            [1, 2, 1, -1, 1000]
        );
        assert_eq!(
            ints(&call(&mut ks, t, 2, "LIMIT.FIXED k 2 1s COST 2")),
            [0, 2, 1, 1000, 1000]
        );
        assert_eq!(
            ints(&call(&mut ks, t + 1000, 2, "LIMIT.FIXED k 2 1s COST 2")),
            [1, 2, 0, -1, 1000]
        );
        assert_eq!(
            call(&mut ks, t, 2, "LIMIT.LOG k 2 1s"),
            Reply::err(args::WRONGTYPE)
        );
        assert_eq!(
            ints(&call(&mut ks, t, 2, "CL.THROTTLE user123 15 30 60 1")),
            [0, 16, 15, -1, 2]
        );
        assert_eq!(
            call(&mut ks, t, 2, "CL.THROTTLE"),
            Reply::err("Cell error: Store error: Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]")
        );
        assert_eq!(
            ints(&call(&mut ks, t, 2, "INCREX c BYINT 5 UBOUND 4")),
            [0, 0]
        );
        assert_eq!(ks.dbs[0].len(), 2);
        match call(&mut ks, t, 3, "LIMIT.TOKEN tb 3 1 1s") {
            Reply::Map(pairs) => assert_eq!(pairs[0], (Reply::bulk("allowed"), Reply::Bool(true))),
            other => panic!("{other:?}"),
        }
    }
}
