//! List commands: pushes and pops at both ends, index and range access, LSET, LTRIM,
//! LREM, LINSERT, LPOS, and the non-blocking moves LMOVE/RPOPLPUSH. A list is one packed
//! buffer while small and a deque of packed chunks once large (`store::list`), so on a big
//! list both ends are O(1) and indexing scans at most one chunk.
//!
//! Indexes follow Redis: negative counts from the tail, and ranges are clamped to the
//! list before anything is allocated, so no argument can make a reply larger than the
//! list itself.

use bytes::Bytes;

use super::args::{self, int, is, syntax_error, CmdResult};
use super::collection::{exists_where, symmetric_int, update, update_live, update_notify};
use super::strings::run;
use super::Ctx;
use crate::protocol::Reply;
use crate::pubsub::notify::{GENERIC, LIST, REMOVAL};

type List = crate::store::value::ListValue;

/// Which end of a list.
#[derive(Clone, Copy, PartialEq)]
enum End {
    Head,
    Tail,
}

impl End {
    fn parse(arg: &[u8]) -> CmdResult<End> {
        if is(arg, "left") {
            Ok(End::Head)
        } else if is(arg, "right") {
            Ok(End::Tail)
        } else {
            Err(syntax_error())
        }
    }
}

/// The list at `key`, a read lookup (counts a keyspace hit or miss).
fn read_list<'a>(ctx: &'a mut Ctx, key: &[u8]) -> CmdResult<Option<&'a List>> {
    let now = ctx.now_ms;
    args::read::<List>(ctx.db(), key, now)
}

/// [`read_list`] for a command that writes the key (no hit or miss counted).
fn lookup_list<'a>(ctx: &'a mut Ctx, key: &[u8]) -> CmdResult<Option<&'a List>> {
    let now = ctx.now_ms;
    args::lookup::<List>(ctx.db(), key, now)
}

fn push(list: &mut List, end: End, v: &[u8]) {
    match end {
        End::Head => list.push_front(v),
        End::Tail => list.push_back(v),
    }
}

/// The keyspace event of a push at `end`.
fn push_event(end: End) -> &'static str {
    match end {
        End::Head => "lpush",
        End::Tail => "rpush",
    }
}

/// The keyspace event of a pop at `end`.
fn pop_event(end: End) -> &'static str {
    match end {
        End::Head => "lpop",
        End::Tail => "rpop",
    }
}

fn pop(list: &mut List, end: End) -> Option<Bytes> {
    match end {
        End::Head => list.pop_front(),
        End::Tail => list.pop_back(),
    }
}

/// Resolve a possibly negative index against a list of `len`: None if outside.
fn resolve(index: i64, len: usize) -> Option<usize> {
    let len = len as i64;
    let i = if index < 0 { len + index } else { index };
    (0..len).contains(&i).then_some(i as usize)
}

/// Clamp a Redis `start..=end` range (negative = from the tail) to a list of `len`:
/// None if it selects nothing. Never overflows: `len + i64` with `len >= 0` cannot.
fn clamp_range(start: i64, end: i64, len: usize) -> Option<(usize, usize)> {
    let n = len as i64;
    let start = if start < 0 { (n + start).max(0) } else { start };
    let end = if end < 0 { n + end } else { end };
    if start > end || start >= n {
        return None;
    }
    Some((start as usize, end.min(n - 1) as usize))
}

fn push_generic(ctx: &mut Ctx, a: &[&[u8]], end: End, create: bool) -> Reply {
    let event = |_: &i64| Some(push_event(end));
    let add = |l: &mut List| {
        for v in &a[2..] {
            push(l, end, v);
        }
        Ok(l.len() as i64)
    };
    // An existing list: one keyspace lookup. An absent (or expired) key takes
    // `update_notify`'s path, which creates it unless LPUSHX/RPUSHX.
    let len = match update_live::<List, _>(ctx, a[1], LIST, event, add) {
        Some(len) => len.map(Some),
        None => update_notify::<List, _>(ctx, a[1], create, LIST, event, add),
    };
    len.map_or_else(|e| e, |n| Reply::Integer(n.unwrap_or(0)))
}

/// LPUSH key element [element ...]
pub fn lpush(ctx: &mut Ctx, a: &[&[u8]]) -> Reply {
    push_generic(ctx, a, End::Head, true)
}

/// RPUSH key element [element ...]
pub fn rpush(ctx: &mut Ctx, a: &[&[u8]]) -> Reply {
    push_generic(ctx, a, End::Tail, true)
}

/// LPUSHX key element [element ...]
pub fn lpushx(ctx: &mut Ctx, a: &[&[u8]]) -> Reply {
    push_generic(ctx, a, End::Head, false)
}

/// RPUSHX key element [element ...]
pub fn rpushx(ctx: &mut Ctx, a: &[&[u8]]) -> Reply {
    push_generic(ctx, a, End::Tail, false)
}

fn pop_generic(ctx: &mut Ctx, a: &[Bytes], end: End) -> Reply {
    let name = if end == End::Head { "lpop" } else { "rpop" };
    if a.len() > 3 {
        return super::arity_error(name);
    }
    run((|| {
        let count = match a.get(2) {
            None => None,
            Some(c) => Some(
                args::non_negative(c, "ERR value is out of range, must be positive")
                    .map_err(|_| Reply::err("ERR value is out of range, must be positive"))?,
            ),
        };
        if lookup_list(ctx, &a[1])?.is_none() {
            return Ok(if count.is_some() {
                Reply::NilArray
            } else {
                Reply::Nil
            });
        }
        if count == Some(0) {
            return Ok(Reply::Array(Vec::new()));
        }
        let event = |p: &Vec<Bytes>| (!p.is_empty()).then_some(pop_event(end));
        let popped = update_notify::<List, _>(ctx, &a[1], false, LIST | REMOVAL, event, |l| {
            let n = usize::try_from(count.unwrap_or(1))
                .unwrap_or(usize::MAX)
                .min(l.len());
            Ok((0..n).filter_map(|_| pop(l, end)).collect::<Vec<_>>())
        })?
        .unwrap_or_default();
        Ok(match count {
            Some(_) => args::bulk_array(popped),
            None => popped.into_iter().next().map_or(Reply::Nil, Reply::Bulk),
        })
    })())
}

/// LPOP key [count]
pub fn lpop(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    pop_generic(ctx, a, End::Head)
}

/// RPOP key [count]
pub fn rpop(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    pop_generic(ctx, a, End::Tail)
}

/// LLEN key
pub fn llen(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    match read_list(ctx, &a[1]) {
        Err(e) => e,
        Ok(l) => Reply::Integer(l.map_or(0, |l| l.len() as i64)),
    }
}

/// LRANGE key start stop
pub fn lrange(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    run((|| {
        let (start, end) = (int(&a[2])?, int(&a[3])?);
        let Some(l) = read_list(ctx, &a[1])? else {
            return Ok(Reply::Array(Vec::new()));
        };
        Ok(match clamp_range(start, end, l.len()) {
            None => Reply::Array(Vec::new()),
            Some((s, e)) => args::bulk_array(l.range(s, e)),
        })
    })())
}

/// LINDEX key index
pub fn lindex(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    run((|| {
        // Redis looks the key up before parsing the index.
        let Some(l) = read_list(ctx, &a[1])? else {
            return Ok(Reply::Nil);
        };
        let i = int(&a[2])?;
        Ok(resolve(i, l.len())
            .and_then(|i| l.get(i))
            .map_or(Reply::Nil, Reply::Bulk))
    })())
}

/// LSET key index element
pub fn lset(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    run((|| {
        let Some(l) = lookup_list(ctx, &a[1])? else {
            return Err(Reply::err("ERR no such key"));
        };
        let i =
            resolve(int(&a[2])?, l.len()).ok_or_else(|| Reply::err("ERR index out of range"))?;
        update_notify::<List, _>(
            ctx,
            &a[1],
            false,
            LIST,
            |_| Some("lset"),
            |l| {
                if i < l.len() {
                    l.set(i, &a[3]);
                }
                Ok(())
            },
        )?;
        Ok(Reply::ok())
    })())
}

/// LTRIM key start stop
pub fn ltrim(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    run((|| {
        let (start, end) = (int(&a[2])?, int(&a[3])?);
        // Redis signals WATCH on every LTRIM of an existing list, even one that keeps all.
        update_notify::<List, _>(
            ctx,
            &a[1],
            false,
            LIST | REMOVAL,
            |_| Some("ltrim"),
            |l| {
                l.trim(clamp_range(start, end, l.len()));
                Ok(())
            },
        )?;
        Ok(Reply::ok())
    })())
}

/// LREM key count element
pub fn lrem(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    run((|| {
        let count = int(&a[2])?;
        let target = &a[3];
        if !exists_where::<List>(ctx, &a[1], |l| l.contains(target))? {
            return Ok(Reply::Integer(0));
        }
        let event = |n: &i64| (*n > 0).then_some("lrem");
        let removed = update_notify::<List, _>(ctx, &a[1], false, LIST | REMOVAL, event, |l| {
            Ok(l.edit(|l| remove_matches(l, target, count)))
        })?;
        Ok(Reply::Integer(removed.unwrap_or(0)))
    })())
}

/// LREM's removal: `count` matches of `target` from the head (negative: from the tail,
/// 0: all); returns how many went.
fn remove_matches(l: &mut std::collections::VecDeque<Bytes>, target: &Bytes, count: i64) -> i64 {
    {
        {
            let matches = l.iter().filter(|v| *v == target).count();
            let limit = match count {
                0 => matches,
                c => usize::try_from(c.unsigned_abs())
                    .unwrap_or(usize::MAX)
                    .min(matches),
            };
            // Removing the last `limit` of `matches` = keeping the first `matches - limit`.
            let mut skip = if count < 0 { matches - limit } else { 0 };
            let mut left = limit;
            l.retain(|v| {
                if v != target || left == 0 {
                    return true;
                }
                if skip > 0 {
                    skip -= 1;
                    return true;
                }
                left -= 1;
                false
            });
            limit as i64
        }
    }
}

/// LINSERT key BEFORE|AFTER pivot element
pub fn linsert(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    run((|| {
        let after = if is(&a[2], "after") {
            true
        } else if is(&a[2], "before") {
            false
        } else {
            return Err(syntax_error());
        };
        let Some(l) = lookup_list(ctx, &a[1])? else {
            return Ok(Reply::Integer(0));
        };
        let Some(at) = l.position(&a[3]) else {
            return Ok(Reply::Integer(-1));
        };
        let len = update_notify::<List, _>(
            ctx,
            &a[1],
            false,
            LIST,
            |_| Some("linsert"),
            |l| {
                l.edit(|l| l.insert(at + after as usize, a[4].clone()));
                Ok(l.len() as i64)
            },
        )?;
        Ok(Reply::Integer(len.unwrap_or(0)))
    })())
}

/// Options of LPOS.
struct PosOptions {
    rank: i64,
    count: Option<usize>,
    maxlen: usize,
}

fn parse_pos_options(a: &[Bytes]) -> CmdResult<PosOptions> {
    let mut o = PosOptions {
        rank: 1,
        count: None,
        maxlen: 0,
    };
    let mut i = 3;
    while i < a.len() {
        let Some(arg) = a.get(i + 1) else {
            return Err(syntax_error());
        };
        if is(&a[i], "rank") {
            o.rank = symmetric_int(arg)?;
            if o.rank == 0 {
                return Err(Reply::err(
                    "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list",
                ));
            }
        } else if is(&a[i], "count") {
            let n = args::non_negative(arg, "")
                .map_err(|_| Reply::err("ERR COUNT can't be negative"))?;
            o.count = Some(usize::try_from(n).unwrap_or(usize::MAX));
        } else if is(&a[i], "maxlen") {
            let n = args::non_negative(arg, "")
                .map_err(|_| Reply::err("ERR MAXLEN can't be negative"))?;
            o.maxlen = usize::try_from(n).unwrap_or(usize::MAX);
        } else {
            return Err(syntax_error());
        }
        i += 2;
    }
    Ok(o)
}

/// LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len]
pub fn lpos(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    run((|| {
        let o = parse_pos_options(a)?;
        let Some(l) = read_list(ctx, &a[1])? else {
            return Ok(if o.count.is_some() {
                Reply::Array(Vec::new())
            } else {
                Reply::Nil
            });
        };
        let scan_len = if o.maxlen == 0 {
            l.len()
        } else {
            o.maxlen.min(l.len())
        };
        // One pass over the MAXLEN window (a packed list is scanned, not indexed): its head
        // for a positive RANK, its tail for a negative one, searched from that end.
        let len = l.len();
        let positions: Box<dyn Iterator<Item = usize>> = if o.rank > 0 {
            Box::new(l.positions(&a[2], 0..scan_len).into_iter())
        } else {
            Box::new(l.positions(&a[2], len - scan_len..len).into_iter().rev())
        };
        let skip = usize::try_from(o.rank.unsigned_abs() - 1).unwrap_or(usize::MAX);
        let want = match o.count {
            None => 1,
            Some(0) => usize::MAX,
            Some(n) => n,
        };
        let hits: Vec<Reply> = positions
            .skip(skip)
            .take(want)
            .map(|i| Reply::Integer(i as i64))
            .collect();
        Ok(match o.count {
            Some(_) => Reply::Array(hits),
            None => hits.into_iter().next().unwrap_or(Reply::Nil),
        })
    })())
}

/// Pop from `src` at `from` and push onto `dst` at `to`; the reply is the moved element.
fn move_generic(ctx: &mut Ctx, src: &Bytes, dst: &Bytes, from: End, to: End) -> CmdResult<Reply> {
    if lookup_list(ctx, src)?.is_none() {
        return Ok(Reply::Nil);
    }
    lookup_list(ctx, dst)?;
    if src == dst {
        // Rotate in place: the key never empties, so it keeps its TTL.
        let moved = update::<List, _>(ctx, src, false, |l| {
            let v = pop(l, from);
            if let Some(v) = &v {
                push(l, to, v);
            }
            Ok(v)
        })?;
        let moved = moved.flatten();
        if moved.is_some() {
            ctx.notify(LIST, push_event(to), src);
            ctx.notify(LIST | REMOVAL, pop_event(from), src);
        }
        return Ok(moved.map_or(Reply::Nil, Reply::Bulk));
    }
    // Redis's order of events: the push on `dst`, the pop on `src`, then `del` if that
    // emptied it.
    let now = ctx.now_ms;
    let Some(v) = args::write::<List>(ctx.db(), src, now, false)?.and_then(|l| pop(l, from)) else {
        return Ok(Reply::Nil);
    };
    update_notify::<List, _>(
        ctx,
        dst,
        true,
        LIST,
        |_| Some(push_event(to)),
        |l| {
            push(l, to, &v);
            Ok(())
        },
    )?;
    ctx.notify(LIST | REMOVAL, pop_event(from), src);
    if ctx.db().remove_if_empty(src) {
        ctx.notify(GENERIC | REMOVAL, "del", src);
    }
    Ok(Reply::Bulk(v))
}

/// LMOVE source destination LEFT|RIGHT LEFT|RIGHT
pub fn lmove(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    run((|| {
        let (from, to) = (End::parse(&a[3])?, End::parse(&a[4])?);
        move_generic(ctx, &a[1], &a[2], from, to)
    })())
}

/// RPOPLPUSH source destination
pub fn rpoplpush(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    run(move_generic(ctx, &a[1], &a[2], End::Tail, End::Head))
}

/// LMPOP numkeys key [key ...] LEFT|RIGHT [COUNT count]: pops from the first non-empty
/// list (the core is shared with BLMPOP: `blocking::mpop_list`).
pub fn lmpop(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    super::blocking::mpop_list(ctx, a, 1)
}

use super::flags::{DENYOOM, FAST, READONLY, WRITE};

/// List commands.
pub const COMMANDS: &[super::CommandSpec] = &[
    crate::cmd!("lpush", -3, WRITE | DENYOOM | FAST, 1, 1, 1, fast: lpush),
    crate::cmd!("rpush", -3, WRITE | DENYOOM | FAST, 1, 1, 1, fast: rpush),
    crate::cmd!("lpushx", -3, WRITE | DENYOOM | FAST, 1, 1, 1, fast: lpushx),
    crate::cmd!("rpushx", -3, WRITE | DENYOOM | FAST, 1, 1, 1, fast: rpushx),
    crate::cmd!("lpop", -2, WRITE | FAST, 1, 1, 1, lpop),
    crate::cmd!("rpop", -2, WRITE | FAST, 1, 1, 1, rpop),
    crate::cmd!("llen", 2, READONLY | FAST, 1, 1, 1, llen),
    crate::cmd!("lrange", 4, READONLY, 1, 1, 1, lrange),
    crate::cmd!("lindex", 3, READONLY, 1, 1, 1, lindex),
    crate::cmd!("lset", 4, WRITE | DENYOOM, 1, 1, 1, lset),
    crate::cmd!("ltrim", 4, WRITE, 1, 1, 1, ltrim),
    crate::cmd!("lrem", 4, WRITE, 1, 1, 1, lrem),
    crate::cmd!("linsert", 5, WRITE | DENYOOM, 1, 1, 1, linsert),
    crate::cmd!("lpos", -3, READONLY, 1, 1, 1, lpos),
    crate::cmd!("lmove", 5, WRITE | DENYOOM, 1, 2, 1, lmove),
    crate::cmd!("rpoplpush", 3, WRITE | DENYOOM, 1, 2, 1, rpoplpush),
    crate::cmd!("lmpop", -4, WRITE, keys: super::Keys::Counted { at: 1, optional: false }, lmpop),
];

#[cfg(test)]
mod tests {
    use super::super::collection::harness::{bulk, bulks, err, wrongtype, Client};
    use crate::protocol::Reply;

    fn c() -> Client {
        let mut c = Client::new();
        c.run("set str x");
        c.run("rpush l a b c d");
        c
    }

    #[test]
    fn pushes() {
        let mut c = c();
        assert_eq!(c.run("lpush l z y"), Reply::Integer(6));
        assert_eq!(
            c.run("lrange l 0 -1"),
            bulks(&["y", "z", "a", "b", "c", "d"])
        );
        assert_eq!(c.run("rpushx l e"), Reply::Integer(7));
        assert_eq!(c.run("lpushx nokey a"), Reply::Integer(0));
        assert_eq!(c.run("rpushx nokey a"), Reply::Integer(0));
        assert!(!c.exists("nokey"));
        assert_eq!(c.run("lpush str a"), wrongtype());
        assert_eq!(c.run("lpushx str a"), wrongtype());
        assert_eq!(
            c.run("lpush l"),
            err("ERR wrong number of arguments for 'lpush' command")
        );
        assert_eq!(
            c.run("rpushx l"),
            err("ERR wrong number of arguments for 'rpushx' command")
        );
    }

    #[test]
    fn pops_and_their_null_rules() {
        let mut c = c();
        assert_eq!(c.run("lpop l"), bulk("a"));
        assert_eq!(c.run("rpop l"), bulk("d"));
        assert_eq!(c.run("lpop l 0"), bulks(&[]));
        assert_eq!(c.run("lpop nokey"), Reply::Nil);
        assert_eq!(c.run("lpop nokey 0"), Reply::NilArray);
        assert_eq!(c.run("rpop nokey 1"), Reply::NilArray);
        assert_eq!(c.wire("lpop nokey 1"), "*-1\r\n");
        assert_eq!(
            c.run("lpop l -1"),
            err("ERR value is out of range, must be positive")
        );
        assert_eq!(
            c.run("lpop l x"),
            err("ERR value is out of range, must be positive")
        );
        assert_eq!(
            c.run("lpop l 1 2"),
            err("ERR wrong number of arguments for 'lpop' command")
        );
        assert_eq!(c.run("lpop str"), wrongtype());
        assert_eq!(c.run("rpop l 9223372036854775807"), bulks(&["c", "b"]));
        assert!(!c.exists("l"), "an emptied list is deleted");
        c.run("rpush l a b c");
        assert_eq!(c.run("lpop l 2"), bulks(&["a", "b"]));
        c.resp = 3;
        assert_eq!(c.wire("lpop nokey 2"), "_\r\n");
    }

    #[test]
    fn ranges_never_overflow() {
        let mut c = c();
        assert_eq!(
            c.run("lrange l 0 9223372036854775807"),
            bulks(&["a", "b", "c", "d"])
        );
        assert_eq!(
            c.run("lrange l -9223372036854775808 -9223372036854775808"),
            bulks(&[])
        );
        assert_eq!(
            c.run("lrange l -9223372036854775808 9223372036854775807"),
            bulks(&["a", "b", "c", "d"])
        );
        assert_eq!(c.run("lrange l -2 -1"), bulks(&["c", "d"]));
        assert_eq!(c.run("lrange l -100 1"), bulks(&["a", "b"]));
        assert_eq!(c.run("lrange l 2 1"), bulks(&[]));
        assert_eq!(c.run("lrange l 4 10"), bulks(&[]));
        assert_eq!(c.run("lrange nokey 0 -1"), bulks(&[]));
        assert_eq!(
            c.run("lrange l x 1"),
            err("ERR value is not an integer or out of range")
        );
        assert_eq!(
            c.run("lrange nokey x 1"),
            err("ERR value is not an integer or out of range")
        );
        assert_eq!(c.run("lrange str 0 1"), wrongtype());
        assert_eq!(c.run("lindex l -1"), bulk("d"));
        assert_eq!(c.run("lindex l 4"), Reply::Nil);
        assert_eq!(c.run("lindex l -9223372036854775808"), Reply::Nil);
        assert_eq!(c.run("lindex l 9223372036854775807"), Reply::Nil);
        assert_eq!(
            c.run("lindex l x"),
            err("ERR value is not an integer or out of range")
        );
        assert_eq!(c.run("lindex nokey x"), Reply::Nil);
        assert_eq!(c.run("llen l"), Reply::Integer(4));
        assert_eq!(c.run("llen nokey"), Reply::Integer(0));
        assert_eq!(c.run("llen str"), wrongtype());
    }

    #[test]
    fn lset_and_ltrim() {
        let mut c = c();
        assert_eq!(c.run("lset l -1 z"), Reply::ok());
        assert_eq!(c.run("lindex l 3"), bulk("z"));
        assert_eq!(c.run("lset l 4 z"), err("ERR index out of range"));
        assert_eq!(
            c.run("lset l -9223372036854775808 z"),
            err("ERR index out of range")
        );
        assert_eq!(c.run("lset nokey 0 x"), err("ERR no such key"));
        assert_eq!(c.run("lset nokey x x"), err("ERR no such key"));
        assert_eq!(
            c.run("lset l x x"),
            err("ERR value is not an integer or out of range")
        );
        assert_eq!(c.run("lset str 0 x"), wrongtype());
        assert_eq!(c.run("ltrim l 1 -2"), Reply::ok());
        assert_eq!(c.run("lrange l 0 -1"), bulks(&["b", "c"]));
        assert_eq!(
            c.run("ltrim l -9223372036854775808 9223372036854775807"),
            Reply::ok()
        );
        assert_eq!(c.run("llen l"), Reply::Integer(2));
        assert_eq!(c.run("ltrim nokey 0 1"), Reply::ok());
        assert_eq!(
            c.run("ltrim nokey x 1"),
            err("ERR value is not an integer or out of range")
        );
        assert_eq!(c.run("ltrim str 0 1"), wrongtype());
        assert_eq!(c.run("ltrim l 5 10"), Reply::ok());
        assert!(!c.exists("l"));
    }

    #[test]
    fn lrem_from_either_end() {
        let mut c = Client::new();
        c.run("rpush l a b a c a");
        assert_eq!(c.run("lrem l 1 a"), Reply::Integer(1));
        assert_eq!(c.run("lrange l 0 -1"), bulks(&["b", "a", "c", "a"]));
        assert_eq!(c.run("lrem l -1 a"), Reply::Integer(1));
        assert_eq!(c.run("lrange l 0 -1"), bulks(&["b", "a", "c"]));
        c.run("rpush l a a");
        assert_eq!(c.run("lrem l -2 a"), Reply::Integer(2));
        assert_eq!(c.run("lrange l 0 -1"), bulks(&["b", "a", "c"]));
        assert_eq!(c.run("lrem l 0 zz"), Reply::Integer(0));
        assert_eq!(c.run("lrem l -9223372036854775808 a"), Reply::Integer(1));
        assert_eq!(c.run("lrem l 0 b"), Reply::Integer(1));
        assert_eq!(c.run("lrem l 0 c"), Reply::Integer(1));
        assert!(!c.exists("l"));
        assert_eq!(
            c.run("lrem l x a"),
            err("ERR value is not an integer or out of range")
        );
        assert_eq!(c.run("lrem nokey 0 a"), Reply::Integer(0));
    }

    #[test]
    fn linsert_rules() {
        let mut c = c();
        assert_eq!(c.run("linsert l before b x"), Reply::Integer(5));
        assert_eq!(c.run("linsert l AFTER d y"), Reply::Integer(6));
        assert_eq!(
            c.run("lrange l 0 -1"),
            bulks(&["a", "x", "b", "c", "d", "y"])
        );
        assert_eq!(c.run("linsert l before zz x"), Reply::Integer(-1));
        assert_eq!(c.run("linsert nokey before b x"), Reply::Integer(0));
        assert_eq!(c.run("linsert l middle b x"), err("ERR syntax error"));
        assert_eq!(c.run("linsert nokey middle b x"), err("ERR syntax error"));
        assert_eq!(c.run("linsert str before b x"), wrongtype());
        assert!(!c.exists("nokey"));
    }

    #[test]
    fn lpos_options() {
        let mut c = Client::new();
        c.run("rpush l a b a c a b");
        assert_eq!(c.run("lpos l a"), Reply::Integer(0));
        assert_eq!(c.run("lpos l a rank 2"), Reply::Integer(2));
        assert_eq!(c.run("lpos l a rank -1"), Reply::Integer(4));
        assert_eq!(c.run("lpos l a rank 4"), Reply::Nil);
        let ints = |v: &[i64]| Reply::Array(v.iter().map(|&i| Reply::Integer(i)).collect());
        assert_eq!(c.run("lpos l a count 0"), ints(&[0, 2, 4]));
        assert_eq!(c.run("lpos l a count 2 rank -1"), ints(&[4, 2]));
        assert_eq!(c.run("lpos l a rank 2 maxlen 2"), Reply::Nil);
        assert_eq!(c.run("lpos l b rank -1 maxlen 2"), Reply::Integer(5));
        assert_eq!(c.run("lpos l a count 5 maxlen 3"), ints(&[0, 2]));
        assert_eq!(c.run("lpos l zz"), Reply::Nil);
        assert_eq!(c.run("lpos l zz count 0"), ints(&[]));
        assert_eq!(c.run("lpos nokey a"), Reply::Nil);
        assert_eq!(c.run("lpos nokey a count 1"), ints(&[]));
        assert_eq!(c.run("lpos l a rank -9223372036854775807"), Reply::Nil);
        assert_eq!(c.run("lpos l a rank 0"), err("ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list"));
        assert_eq!(
            c.run("lpos l a rank x"),
            err("ERR value is not an integer or out of range")
        );
        assert_eq!(
            c.run("lpos l a rank -9223372036854775808"),
            err("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807")
        );
        assert_eq!(
            c.run("lpos l a count -1"),
            err("ERR COUNT can't be negative")
        );
        assert_eq!(
            c.run("lpos l a count x"),
            err("ERR COUNT can't be negative")
        );
        assert_eq!(
            c.run("lpos l a maxlen -1"),
            err("ERR MAXLEN can't be negative")
        );
        assert_eq!(c.run("lpos l a rank"), err("ERR syntax error"));
        assert_eq!(c.run("lpos l a foo 1"), err("ERR syntax error"));
    }

    #[test]
    fn lmove_and_rpoplpush() {
        let mut c = c();
        assert_eq!(c.run("lmove l l2 left right"), bulk("a"));
        assert_eq!(c.run("rpoplpush l l2"), bulk("d"));
        assert_eq!(c.run("lrange l2 0 -1"), bulks(&["d", "a"]));
        assert_eq!(c.run("lmove l l left right"), bulk("b"));
        assert_eq!(c.run("lrange l 0 -1"), bulks(&["c", "b"]));
        assert_eq!(c.run("lmove l l2 left middle"), err("ERR syntax error"));
        assert_eq!(c.run("lmove nokey str left right"), Reply::Nil);
        assert_eq!(c.run("lmove l str left right"), wrongtype());
        assert_eq!(
            c.run("lrange l 0 -1"),
            bulks(&["c", "b"]),
            "nothing moved on error"
        );
        assert_eq!(c.run("lmove str l left right"), wrongtype());
        c.run("rpush one x");
        c.run("pexpire one 5000");
        assert_eq!(c.run("rpoplpush one one"), bulk("x"));
        assert_eq!(
            c.run("pttl one"),
            Reply::Integer(5000),
            "rotation keeps the key and its TTL"
        );
        assert_eq!(c.run("rpoplpush l l3"), bulk("b"));
        assert_eq!(c.run("rpoplpush l l3"), bulk("c"));
        assert!(!c.exists("l"));
    }
}
