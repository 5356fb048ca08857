//! String and counter commands: GET, SET and its options, INCR family, APPEND, ranges.

use crate::pubsub::notify::{GENERIC, REMOVAL, STRING};
use bytes::Bytes;

use super::args::{
    self, int, is, syntax_error, wrongtype, CmdResult, MAX_STRING, NOT_FLOAT, NOT_INTEGER,
};
use super::keys::{expire_time_error, relative_deadline};
use super::Ctx;
use crate::protocol::Reply;
use crate::store::{Db, Entry, StrValue, Value};

/// The string at `key`: Ok(None) if absent, WRONGTYPE if another type. A read lookup
/// (counts a keyspace hit or miss).
pub fn get_str<'a>(db: &'a Db, key: &[u8], now_ms: u64) -> CmdResult<Option<&'a StrValue>> {
    str_of(db.read(key, now_ms))
}

/// [`get_str`] for a command that writes the key: counts no keyspace hit or miss.
fn lookup_str<'a>(db: &'a Db, key: &[u8], now_ms: u64) -> CmdResult<Option<&'a StrValue>> {
    str_of(db.get(key, now_ms))
}

fn str_of(entry: Option<&Entry>) -> CmdResult<Option<&StrValue>> {
    match entry {
        None => Ok(None),
        Some(Entry {
            value: Value::Str(s),
            ..
        }) => Ok(Some(s)),
        Some(_) => Err(wrongtype()),
    }
}

fn str_reply(s: Option<&StrValue>) -> Reply {
    s.map_or(Reply::Nil, |s| Reply::Bulk(s.to_bytes()))
}

/// GET key
pub fn get(ctx: &mut Ctx, a: &[&[u8]]) -> Reply {
    let now = ctx.now_ms;
    get_str(ctx.db(), a[1], now).map_or_else(|e| e, str_reply)
}

/// The expiry part of SET/GETEX options.
#[derive(Clone, Copy, PartialEq)]
enum Ttl {
    Unchanged,
    Keep,
    Persist,
    At(u64),
}

/// Parse `EX s | PX ms | EXAT s | PXAT ms` at `a[i]`; returns the deadline.
fn parse_ttl_option(name: &str, opt: &[u8], arg: &[u8], now: u64) -> CmdResult<u64> {
    let n = int(arg)?;
    let (seconds, absolute) = match opt.to_ascii_lowercase().as_slice() {
        b"ex" => (true, false),
        b"px" => (false, false),
        b"exat" => (true, true),
        _ => (false, true),
    };
    if n <= 0 || (seconds && n > i64::MAX / 1000) {
        return Err(expire_time_error(name));
    }
    let ms = if seconds { n * 1000 } else { n };
    if absolute {
        Ok(ms as u64)
    } else {
        relative_deadline(ms, now).ok_or_else(|| expire_time_error(name))
    }
}

/// SET key value [NX|XX] [GET] [EX s|PX ms|EXAT s|PXAT ms|KEEPTTL]
pub fn set(ctx: &mut Ctx, a: &[&[u8]]) -> Reply {
    run(set_inner(ctx, a))
}

fn set_inner(ctx: &mut Ctx, a: &[&[u8]]) -> CmdResult<Reply> {
    let now = ctx.now_ms;
    if a.len() == 3 {
        // Plain SET: no option can refuse it, so skip the lookups the options need.
        ctx.db().set(a[1], Value::string(a[2]));
        ctx.notify(STRING, "set", a[1]);
        return Ok(Reply::ok());
    }
    let (mut nx, mut xx, mut get) = (false, false, false);
    let mut ttl = Ttl::Unchanged;
    // Redis's order: the whole syntax first, then the expire time's value.
    let mut expire = None;
    let mut i = 3;
    while i < a.len() {
        let opt = a[i];
        let has_next = i + 1 < a.len();
        let unset = ttl == Ttl::Unchanged && expire.is_none();
        if is(opt, "nx") && !xx {
            nx = true;
        } else if is(opt, "xx") && !nx {
            xx = true;
        } else if is(opt, "get") {
            get = true;
        } else if is(opt, "keepttl") && unset {
            ttl = Ttl::Keep;
        } else if ["ex", "px", "exat", "pxat"].iter().any(|k| is(opt, k)) && unset && has_next {
            expire = Some((opt, a[i + 1]));
            i += 1;
        } else {
            return Err(syntax_error());
        }
        i += 1;
    }
    if let Some((opt, arg)) = expire {
        ttl = Ttl::At(parse_ttl_option("set", opt, arg, now)?);
    }
    let key = a[1];
    let db = ctx.db();
    // Only SET ... GET reads the old value (a read lookup, as Redis's getGenericCommand).
    let old_value = match get {
        true => get_str(db, key, now)?.map(StrValue::to_bytes),
        false => None,
    };
    let exists = db.contains(key, now);
    if (nx && exists) || (xx && !exists) {
        return Ok(if get {
            old_value.map_or(Reply::Nil, Reply::Bulk)
        } else {
            Reply::Nil
        });
    }
    let keep = match ttl {
        Ttl::Keep => db.get(key, now).and_then(Entry::expires_at),
        _ => None,
    };
    db.set(key, Value::string(a[2]));
    match ttl {
        Ttl::At(t) => {
            db.set_expiry(key, Some(t));
        }
        Ttl::Keep if keep.is_some() => {
            db.set_expiry(key, keep);
        }
        _ => {}
    }
    ctx.notify(STRING, "set", key);
    if matches!(ttl, Ttl::At(_)) {
        ctx.notify(GENERIC, "expire", key);
    }
    Ok(if get {
        old_value.map_or(Reply::Nil, Reply::Bulk)
    } else {
        Reply::ok()
    })
}

/// Flatten a command step's result into its reply.
pub fn run(r: CmdResult<Reply>) -> Reply {
    r.unwrap_or_else(|e| e)
}

/// SETNX key value
pub fn setnx(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    let now = ctx.now_ms;
    let db = ctx.db();
    if db.contains(&a[1], now) {
        return Reply::Integer(0);
    }
    db.set(&a[1], Value::string(&a[2]));
    ctx.notify(STRING, "set", &a[1]);
    Reply::Integer(1)
}

/// SETEX key seconds value / PSETEX key ms value
fn setex_generic(ctx: &mut Ctx, a: &[Bytes], unit_seconds: bool, name: &str) -> Reply {
    let now = ctx.now_ms;
    let opt = if unit_seconds { "ex" } else { "px" };
    let deadline = match parse_ttl_option(name, opt.as_bytes(), &a[2], now) {
        Ok(d) => d,
        Err(e) => return e,
    };
    let db = ctx.db();
    db.set(&a[1], Value::string(&a[3]));
    db.set_expiry(&a[1], Some(deadline));
    ctx.notify(STRING, "set", &a[1]);
    ctx.notify(GENERIC, "expire", &a[1]);
    Reply::ok()
}

/// SETEX key seconds value
pub fn setex(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    setex_generic(ctx, a, true, "setex")
}

/// PSETEX key milliseconds value
pub fn psetex(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    setex_generic(ctx, a, false, "psetex")
}

/// GETSET key value
pub fn getset(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    let now = ctx.now_ms;
    let db = ctx.db();
    let old = match get_str(db, &a[1], now) {
        Ok(v) => str_reply(v),
        Err(e) => return e,
    };
    db.set(&a[1], Value::string(&a[2]));
    ctx.notify(STRING, "set", &a[1]);
    old
}

/// GETDEL key
pub fn getdel(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    let now = ctx.now_ms;
    let db = ctx.db();
    let old = match get_str(db, &a[1], now) {
        Ok(v) => str_reply(v),
        Err(e) => return e,
    };
    if db.remove(&a[1], now).is_some() {
        ctx.notify(GENERIC | REMOVAL, "del", &a[1]);
    }
    old
}

/// GETEX key [EX s|PX ms|EXAT s|PXAT ms|PERSIST]
pub fn getex(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    let now = ctx.now_ms;
    let mut ttl = Ttl::Unchanged;
    // Redis's order: the syntax, then the key (a missing key answers nil whatever the
    // time says), then the expire time's value.
    let mut expire = None;
    let mut i = 2;
    while i < a.len() {
        let opt = &a[i];
        let unset = ttl == Ttl::Unchanged && expire.is_none();
        if is(opt, "persist") && unset {
            ttl = Ttl::Persist;
        } else if ["ex", "px", "exat", "pxat"].iter().any(|k| is(opt, k))
            && unset
            && i + 1 < a.len()
        {
            expire = Some((opt, &a[i + 1]));
            i += 1;
        } else {
            return syntax_error();
        }
        i += 1;
    }
    let db = ctx.db();
    let reply = match get_str(db, &a[1], now) {
        Ok(None) => return Reply::Nil,
        Ok(v) => str_reply(v),
        Err(e) => return e,
    };
    if let Some((opt, arg)) = expire {
        match parse_ttl_option("getex", opt, arg, now) {
            Ok(t) => ttl = Ttl::At(t),
            Err(e) => return e,
        }
    }
    let event = match ttl {
        Ttl::At(t) if t <= now => {
            db.remove(&a[1], now);
            Some((GENERIC | REMOVAL, "del"))
        }
        Ttl::At(t) => {
            db.set_expiry(&a[1], Some(t));
            Some((GENERIC, "expire"))
        }
        Ttl::Persist => {
            let had = db.get(&a[1], now).and_then(Entry::expires_at).is_some();
            db.set_expiry(&a[1], None);
            had.then_some((GENERIC, "persist"))
        }
        _ => None,
    };
    if let Some((class, event)) = event {
        ctx.notify(class, event, &a[1]);
    }
    reply
}

/// MGET key [key ...]
pub fn mget(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    let now = ctx.now_ms;
    let db = ctx.db();
    Reply::Array(
        a[1..]
            .iter()
            .map(|k| get_str(db, k, now).map_or(Reply::Nil, str_reply))
            .collect(),
    )
}

/// MSET key value [key value ...]
pub fn mset(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    if a.len().is_multiple_of(2) {
        return super::arity_error("mset");
    }
    for pair in a[1..].chunks(2) {
        ctx.db().set(&pair[0], Value::string(&pair[1]));
        ctx.notify(STRING, "set", &pair[0]);
    }
    Reply::ok()
}

/// MSETNX key value [key value ...]
pub fn msetnx(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    if a.len().is_multiple_of(2) {
        return super::arity_error("msetnx");
    }
    let now = ctx.now_ms;
    let db = ctx.db();
    if a[1..].chunks(2).any(|p| db.contains(&p[0], now)) {
        return Reply::Integer(0);
    }
    for pair in a[1..].chunks(2) {
        ctx.db().set(&pair[0], Value::string(&pair[1]));
        ctx.notify(STRING, "set", &pair[0]);
    }
    Reply::Integer(1)
}

/// Add `by` to the integer at `key` (creating it at 0), keeping its TTL.
pub fn incr_by(db: &mut Db, key: &[u8], by: i64, now: u64) -> CmdResult<i64> {
    // One keyspace lookup; the key keeps its deadline.
    db.modify(key, now, |entry| {
        let (current, deadline) = match entry {
            None => (0, None),
            Some(e) => {
                let current = match &e.value {
                    Value::Str(StrValue::Int(n)) => *n,
                    Value::Str(StrValue::Raw(b)) => match args::parse_i64(b) {
                        Some(n) => n,
                        None => return (None, Err(Reply::err(NOT_INTEGER))),
                    },
                    _ => return (None, Err(wrongtype())),
                };
                (current, e.expires_at())
            }
        };
        match current.checked_add(by) {
            Some(next) => (Some((Value::Str(StrValue::Int(next)), deadline)), Ok(next)),
            None => (
                None,
                Err(Reply::err("ERR increment or decrement would overflow")),
            ),
        }
    })
}

fn incr_reply(ctx: &mut Ctx, key: &[u8], by: i64) -> Reply {
    let now = ctx.now_ms;
    match incr_by(ctx.db(), key, by, now) {
        Ok(n) => {
            ctx.notify(STRING, "incrby", key);
            Reply::Integer(n)
        }
        Err(e) => e,
    }
}

/// INCR key
pub fn incr(ctx: &mut Ctx, a: &[&[u8]]) -> Reply {
    incr_reply(ctx, a[1], 1)
}

/// DECR key
pub fn decr(ctx: &mut Ctx, a: &[&[u8]]) -> Reply {
    incr_reply(ctx, a[1], -1)
}

/// INCRBY key increment
pub fn incrby(ctx: &mut Ctx, a: &[&[u8]]) -> Reply {
    match int(a[2]) {
        Ok(by) => incr_reply(ctx, a[1], by),
        Err(e) => e,
    }
}

/// DECRBY key decrement
pub fn decrby(ctx: &mut Ctx, a: &[&[u8]]) -> Reply {
    match int(a[2]) {
        Ok(i64::MIN) => Reply::err("ERR decrement would overflow"),
        Ok(by) => incr_reply(ctx, a[1], -by),
        Err(e) => e,
    }
}

/// INCRBYFLOAT key increment
pub fn incrbyfloat(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    let now = ctx.now_ms;
    let db = ctx.db();
    // Redis's order: the type, then the stored value, then the increment.
    let current = match lookup_str(db, &a[1], now) {
        Err(e) => return e,
        Ok(cur) => cur.map(StrValue::to_bytes),
    };
    let text = match crate::numbers::long_double::incr(current.as_deref(), &a[2]) {
        Ok(t) => Bytes::from(t),
        Err(crate::numbers::long_double::IncrError::NotFinite) => {
            return Reply::err("ERR increment would produce NaN or Infinity")
        }
        Err(_) => return Reply::err(NOT_FLOAT),
    };
    match db.get_mut(&a[1], now) {
        Some(e) => e.value = Value::string(&text),
        None => db.set(&a[1], Value::string(&text)),
    }
    ctx.notify(STRING, "incrbyfloat", &a[1]);
    Reply::Bulk(text)
}

/// APPEND key value
pub fn append(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    let now = ctx.now_ms;
    let db = ctx.db();
    let current = match lookup_str(db, &a[1], now) {
        Err(e) => return e,
        Ok(v) => v.map(StrValue::to_bytes),
    };
    let mut buf = current.map(|b| b.to_vec()).unwrap_or_default();
    if buf.len() + a[2].len() > MAX_STRING {
        return Reply::err("ERR string exceeds maximum allowed size (proto-max-bulk-len)");
    }
    buf.extend_from_slice(&a[2]);
    let len = buf.len() as i64;
    match db.get_mut(&a[1], now) {
        Some(e) => e.value = Value::string(buf),
        None => db.set(&a[1], Value::string(buf)),
    }
    ctx.notify(STRING, "append", &a[1]);
    Reply::Integer(len)
}

/// STRLEN key
pub fn strlen(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    let now = ctx.now_ms;
    match get_str(ctx.db(), &a[1], now) {
        Err(e) => e,
        Ok(v) => Reply::Integer(v.map_or(0, |s| s.len() as i64)),
    }
}

/// GETRANGE key start end
pub fn getrange(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    let now = ctx.now_ms;
    let (start, end) = match (int(&a[2]), int(&a[3])) {
        (Ok(s), Ok(e)) => (s, e),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    let s = match get_str(ctx.db(), &a[1], now) {
        Err(e) => return e,
        Ok(None) => return Reply::bulk(Bytes::new()),
        Ok(Some(s)) => s.to_bytes(),
    };
    let len = s.len() as i64;
    if start < 0 && end < 0 && start > end {
        return Reply::bulk(Bytes::new());
    }
    let mut start = if start < 0 {
        (len + start).max(0)
    } else {
        start
    };
    let mut end = if end < 0 { (len + end).max(0) } else { end };
    if end >= len {
        end = len - 1;
    }
    if start > end || len == 0 {
        start = 0;
        end = -1;
    }
    if end < start {
        return Reply::bulk(Bytes::new());
    }
    Reply::Bulk(s.slice(start as usize..=end as usize))
}

/// SETRANGE key offset value
pub fn setrange(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    let now = ctx.now_ms;
    let offset = match int(&a[2]) {
        Ok(o) if o >= 0 => o as usize,
        Ok(_) => return Reply::err("ERR offset is out of range"),
        Err(e) => return e,
    };
    let db = ctx.db();
    let current = match lookup_str(db, &a[1], now) {
        Err(e) => return e,
        Ok(v) => v.map(StrValue::to_bytes),
    };
    let value = &a[3];
    if value.is_empty() {
        return Reply::Integer(current.map_or(0, |c| c.len() as i64));
    }
    if offset.saturating_add(value.len()) > MAX_STRING {
        return Reply::err("ERR string exceeds maximum allowed size (proto-max-bulk-len)");
    }
    let mut buf = current.map(|b| b.to_vec()).unwrap_or_default();
    if buf.len() < offset + value.len() {
        buf.resize(offset + value.len(), 0);
    }
    buf[offset..offset + value.len()].copy_from_slice(value);
    let len = buf.len() as i64;
    match db.get_mut(&a[1], now) {
        Some(e) => e.value = Value::string(buf),
        None => db.set(&a[1], Value::string(buf)),
    }
    ctx.notify(STRING, "setrange", &a[1]);
    Reply::Integer(len)
}

use super::flags::{DENYOOM, FAST, READONLY, WRITE};

/// String commands.
pub const COMMANDS: &[super::CommandSpec] = &[
    crate::cmd!("get", 2, READONLY | FAST, 1, 1, 1, fast: get),
    crate::cmd!("set", -3, WRITE | DENYOOM, 1, 1, 1, fast: set),
    crate::cmd!("setnx", 3, WRITE | DENYOOM | FAST, 1, 1, 1, setnx),
    crate::cmd!("setex", 4, WRITE | DENYOOM, 1, 1, 1, setex),
    crate::cmd!("psetex", 4, WRITE | DENYOOM, 1, 1, 1, psetex),
    crate::cmd!("getset", 3, WRITE | DENYOOM | FAST, 1, 1, 1, getset),
    crate::cmd!("getdel", 2, WRITE | FAST, 1, 1, 1, getdel),
    crate::cmd!("getex", -2, WRITE | FAST, 1, 1, 1, getex),
    crate::cmd!("mget", -2, READONLY | FAST, 1, -1, 1, mget),
    crate::cmd!("mset", -3, WRITE | DENYOOM, 1, -1, 2, mset),
    crate::cmd!("msetnx", -3, WRITE | DENYOOM, 1, -1, 2, msetnx),
    crate::cmd!("incr", 2, WRITE | DENYOOM | FAST, 1, 1, 1, fast: incr),
    crate::cmd!("decr", 2, WRITE | DENYOOM | FAST, 1, 1, 1, fast: decr),
    crate::cmd!("incrby", 3, WRITE | DENYOOM | FAST, 1, 1, 1, fast: incrby),
    crate::cmd!("decrby", 3, WRITE | DENYOOM | FAST, 1, 1, 1, fast: decrby),
    crate::cmd!(
        "incrbyfloat",
        3,
        WRITE | DENYOOM | FAST,
        1,
        1,
        1,
        incrbyfloat
    ),
    crate::cmd!("append", 3, WRITE | DENYOOM | FAST, 1, 1, 1, append),
    crate::cmd!("strlen", 2, READONLY | FAST, 1, 1, 1, strlen),
    crate::cmd!("getrange", 4, READONLY, 1, 1, 1, getrange),
    crate::cmd!("substr", 4, READONLY, 1, 1, 1, getrange),
    crate::cmd!("setrange", 4, WRITE | DENYOOM, 1, 1, 1, setrange),
];
