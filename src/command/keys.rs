//! Generic key commands: DEL, EXISTS, TOUCH, TYPE, the EXPIRE/TTL family, RENAME, KEYS, SCAN,
//! RANDOMKEY, DBSIZE, FLUSHDB/FLUSHALL, SWAPDB, MOVE, COPY; plus SCAN cursors.

use crate::glob::glob_match;
use crate::pubsub::notify::{self, GENERIC, REMOVAL};
use bytes::Bytes;

use super::args::{db_index, int, is, parse_i64, syntax_error, CmdResult};
use super::Ctx;
use crate::protocol::Reply;
use crate::store::{DATABASES, SHARDS};

/// `ERR invalid expire time in '<cmd>' command`.
pub fn expire_time_error(name: &str) -> Reply {
    Reply::err(format!("ERR invalid expire time in '{name}' command"))
}

/// `now + ms` as a deadline, or None on overflow (Redis's invalid expire time).
pub fn relative_deadline(ms: i64, now: u64) -> Option<u64> {
    let now = i64::try_from(now).ok()?;
    let at = ms.checked_add(now)?;
    (at > 0).then_some(at as u64)
}

/// DEL key [key ...] and UNLINK key [key ...]
pub fn del(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    let now = ctx.now_ms;
    let mut n = 0;
    for k in &a[1..] {
        if ctx.db().remove(k, now).is_some() {
            ctx.notify(GENERIC | REMOVAL, "del", k);
            n += 1;
        }
    }
    Reply::Integer(n)
}

/// EXISTS key [key ...]: the number of the keys that exist (each key counted as often as
/// it is named). As in Redis, looking does not count as a use of the key for LRU/LFU.
pub fn exists(ctx: &mut Ctx, a: &[&[u8]]) -> Reply {
    let now = ctx.now_ms;
    let db = ctx.db();
    let n = a[1..]
        .iter()
        .filter(|k| db.read_untouched(k, now).is_some());
    Reply::Integer(n.count() as i64)
}

/// TOUCH key [key ...]: EXISTS that counts as a use of each key for LRU/LFU (OBJECT
/// IDLETIME restarts from 0, OBJECT FREQ may grow), as Redis's `lookupKeyRead`.
pub fn touch(ctx: &mut Ctx, a: &[&[u8]]) -> Reply {
    let now = ctx.now_ms;
    let db = ctx.db();
    Reply::Integer(a[1..].iter().filter(|k| db.read(k, now).is_some()).count() as i64)
}

/// TYPE key
pub fn type_(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    let now = ctx.now_ms;
    let name = ctx
        .db()
        .read_untouched(&a[1], now)
        .map_or("none", |e| e.value.type_name());
    Reply::Status(name.into())
}

struct ExpireSpec {
    name: &'static str,
    seconds: bool,
    absolute: bool,
}

fn expire_generic(ctx: &mut Ctx, a: &[&[u8]], spec: ExpireSpec) -> Reply {
    super::strings::run(expire_inner(ctx, a, spec))
}

fn expire_inner(ctx: &mut Ctx, a: &[&[u8]], spec: ExpireSpec) -> CmdResult<Reply> {
    let now = ctx.now_ms;
    // Redis's order: the options (and their conflicts) first, then the time.
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for opt in &a[3..] {
        match opt.to_ascii_lowercase().as_slice() {
            b"nx" => nx = true,
            b"xx" => xx = true,
            b"gt" => gt = true,
            b"lt" => lt = true,
            _ => {
                return Err(Reply::err(format!(
                    "ERR Unsupported option {}",
                    super::arg_text(opt)
                )))
            }
        }
    }
    if nx && (xx || gt || lt) {
        return Err(Reply::err(
            "ERR NX and XX, GT or LT options at the same time are not compatible",
        ));
    }
    if gt && lt {
        return Err(Reply::err(
            "ERR GT and LT options at the same time are not compatible",
        ));
    }
    let mut when = int(a[2])?;
    if spec.seconds {
        when = when
            .checked_mul(1000)
            .ok_or_else(|| expire_time_error(spec.name))?;
    }
    if !spec.absolute {
        when = when
            .checked_add(now as i64)
            .ok_or_else(|| expire_time_error(spec.name))?;
    }
    let db = ctx.db();
    let Some(entry) = db.get(a[1], now) else {
        return Ok(Reply::Integer(0));
    };
    let current = entry.expires_at().map(|t| t as i64);
    let refused = (nx && current.is_some())
        || (xx && current.is_none())
        || (gt && current.is_none_or(|c| when <= c))
        || (lt && current.is_some_and(|c| when >= c));
    if refused {
        return Ok(Reply::Integer(0));
    }
    if when <= now as i64 {
        db.remove(a[1], now);
        ctx.notify(GENERIC | REMOVAL, "del", a[1]);
    } else {
        db.set_expiry(a[1], Some(when as u64));
        ctx.notify(GENERIC, "expire", a[1]);
    }
    Ok(Reply::Integer(1))
}

/// EXPIRE key seconds [NX|XX|GT|LT]
pub fn expire(ctx: &mut Ctx, a: &[&[u8]]) -> Reply {
    expire_generic(
        ctx,
        a,
        ExpireSpec {
            name: "expire",
            seconds: true,
            absolute: false,
        },
    )
}

/// PEXPIRE key milliseconds [NX|XX|GT|LT]
pub fn pexpire(ctx: &mut Ctx, a: &[&[u8]]) -> Reply {
    expire_generic(
        ctx,
        a,
        ExpireSpec {
            name: "pexpire",
            seconds: false,
            absolute: false,
        },
    )
}

/// EXPIREAT key unix-seconds [NX|XX|GT|LT]
pub fn expireat(ctx: &mut Ctx, a: &[&[u8]]) -> Reply {
    expire_generic(
        ctx,
        a,
        ExpireSpec {
            name: "expireat",
            seconds: true,
            absolute: true,
        },
    )
}

/// PEXPIREAT key unix-ms [NX|XX|GT|LT]
pub fn pexpireat(ctx: &mut Ctx, a: &[&[u8]]) -> Reply {
    expire_generic(
        ctx,
        a,
        ExpireSpec {
            name: "pexpireat",
            seconds: false,
            absolute: true,
        },
    )
}

/// Which view of a key's deadline a TTL-family command reports.
#[derive(Clone, Copy)]
enum TtlView {
    Seconds,
    Millis,
    AtSeconds,
    AtMillis,
}

fn ttl_generic(ctx: &mut Ctx, a: &[&[u8]], view: TtlView) -> Reply {
    let now = ctx.now_ms;
    let Some(entry) = ctx.db().read_untouched(a[1], now) else {
        return Reply::Integer(-2);
    };
    let Some(at) = entry.expires_at() else {
        return Reply::Integer(-1);
    };
    let left = at.saturating_sub(now) as i64;
    Reply::Integer(match view {
        TtlView::Seconds => (left + 500) / 1000,
        TtlView::Millis => left,
        TtlView::AtSeconds => (at as i64 + 500) / 1000,
        TtlView::AtMillis => at as i64,
    })
}

/// TTL key
pub fn ttl(ctx: &mut Ctx, a: &[&[u8]]) -> Reply {
    ttl_generic(ctx, a, TtlView::Seconds)
}

/// PTTL key
pub fn pttl(ctx: &mut Ctx, a: &[&[u8]]) -> Reply {
    ttl_generic(ctx, a, TtlView::Millis)
}

/// EXPIRETIME key
pub fn expiretime(ctx: &mut Ctx, a: &[&[u8]]) -> Reply {
    ttl_generic(ctx, a, TtlView::AtSeconds)
}

/// PEXPIRETIME key
pub fn pexpiretime(ctx: &mut Ctx, a: &[&[u8]]) -> Reply {
    ttl_generic(ctx, a, TtlView::AtMillis)
}

/// PERSIST key
pub fn persist(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    let now = ctx.now_ms;
    let db = ctx.db();
    match db.get(&a[1], now).and_then(|e| e.expires_at()) {
        Some(_) => {
            db.set_expiry(&a[1], None);
            ctx.notify(GENERIC, "persist", &a[1]);
            Reply::Integer(1)
        }
        None => Reply::Integer(0),
    }
}

fn rename_generic(ctx: &mut Ctx, a: &[Bytes], nx: bool) -> Reply {
    let now = ctx.now_ms;
    let db = ctx.db();
    if !db.contains(&a[1], now) {
        return Reply::err("ERR no such key");
    }
    if a[1] == a[2] {
        return if nx { Reply::Integer(0) } else { Reply::ok() };
    }
    if nx && db.contains(&a[2], now) {
        return Reply::Integer(0);
    }
    if let Some(entry) = db.remove(&a[1], now) {
        db.remove(&a[2], now);
        db.insert(&a[2], entry);
        ctx.notify(GENERIC | REMOVAL, "rename_from", &a[1]);
        ctx.notify(GENERIC, "rename_to", &a[2]);
    }
    if nx {
        Reply::Integer(1)
    } else {
        Reply::ok()
    }
}

/// RENAME key newkey
pub fn rename(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    rename_generic(ctx, a, false)
}

/// RENAMENX key newkey
pub fn renamenx(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    rename_generic(ctx, a, true)
}

/// KEYS pattern
///
/// Shard by shard, each shard's keys in byte order: a shard's map iterates in an order
/// that depends on its history (a replica restored from a snapshot inserted its keys in
/// another order), and a script that acts on the first few keys must act alike everywhere.
pub fn keys(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    let now = ctx.now_ms;
    let pattern = &a[1];
    let all = pattern.as_ref() == b"*";
    let db = ctx.db();
    let mut out = Vec::new();
    let mut shard_keys = Vec::new();
    for shard in 0..SHARDS {
        shard_keys.extend(
            db.shard_entries(shard, now)
                .map(|(k, _)| k)
                .filter(|k| all || glob_match(pattern, k, false)),
        );
        shard_keys.sort_unstable_by(|x, y| x[..].cmp(&y[..]));
        out.extend(shard_keys.drain(..).map(|k| Reply::Bulk(k.to_bytes())));
    }
    Reply::Array(out)
}

/// Options shared by SCAN, HSCAN, SSCAN and ZSCAN.
pub struct ScanOptions {
    /// The cursor to continue from.
    pub cursor: u64,
    /// MATCH pattern.
    pub pattern: Option<Bytes>,
    /// COUNT hint.
    pub count: usize,
    /// TYPE filter (SCAN only).
    pub type_name: Option<String>,
}

/// Parse `cursor [MATCH p] [COUNT n] [TYPE t]` starting at `a[i]`.
pub fn parse_scan(a: &[Bytes], i: usize, allow_type: bool) -> CmdResult<ScanOptions> {
    let cursor = std::str::from_utf8(&a[i])
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .ok_or_else(|| Reply::err("ERR invalid cursor"))?;
    let mut opts = ScanOptions {
        cursor,
        pattern: None,
        count: 10,
        type_name: None,
    };
    let mut j = i + 1;
    while j < a.len() {
        let has_arg = j + 1 < a.len();
        if is(&a[j], "count") && has_arg {
            let n = int(&a[j + 1])?;
            if n < 1 {
                return Err(syntax_error());
            }
            opts.count = n as usize;
        } else if is(&a[j], "match") && has_arg {
            // As in Redis, `*` is no pattern at all (the glob would not match "").
            opts.pattern = Some(a[j + 1].clone()).filter(|p| p.as_ref() != b"*");
        } else if allow_type && is(&a[j], "type") && has_arg {
            opts.type_name = Some(String::from_utf8_lossy(&a[j + 1]).to_ascii_lowercase());
        } else {
            return Err(syntax_error());
        }
        j += 2;
    }
    Ok(opts)
}

/// The reply shape of every SCAN family command: `[next-cursor, [items...]]`.
pub fn scan_reply(next: u64, items: Vec<Reply>) -> Reply {
    Reply::Array(vec![Reply::bulk(next.to_string()), Reply::Array(items)])
}

/// SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]
///
/// The cursor is the index of the next shard to visit; one call visits whole shards
/// until it has looked at COUNT keys, so keys present for the whole scan come back once.
/// With the hasher keyed alike on every replica ([`crate::store::seed_key_hasher`]) and
/// each shard's keys sorted, a SCAN step answers the same on every replica.
pub fn scan(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    let now = ctx.now_ms;
    let opts = match parse_scan(a, 1, true) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let db = ctx.db();
    let mut shard = opts.cursor as usize;
    let mut seen = 0;
    let mut out = Vec::new();
    let mut shard_keys = Vec::new();
    while shard < SHARDS && seen < opts.count {
        for (k, e) in db.shard_entries(shard, now) {
            seen += 1;
            let type_ok = opts
                .type_name
                .as_deref()
                .is_none_or(|t| t == e.value.type_name());
            let match_ok = opts
                .pattern
                .as_ref()
                .is_none_or(|p| glob_match(p, k, false));
            if type_ok && match_ok {
                shard_keys.push(k);
            }
        }
        // In byte order within the shard, as KEYS does (the same reply on every replica).
        shard_keys.sort_unstable_by(|x, y| x[..].cmp(&y[..]));
        out.extend(shard_keys.drain(..).map(|k| Reply::Bulk(k.to_bytes())));
        shard += 1;
    }
    scan_reply(if shard >= SHARDS { 0 } else { shard as u64 }, out)
}

/// RANDOMKEY
pub fn randomkey(ctx: &mut Ctx, _a: &[Bytes]) -> Reply {
    let now = ctx.now_ms;
    let seed = ctx.seed;
    let db = ctx.db();
    if db.is_empty() {
        return Reply::Nil;
    }
    db.random_key(super::collection::mix(seed), now)
        .map_or(Reply::Nil, |k| Reply::Bulk(k.to_bytes()))
}

/// DBSIZE
pub fn dbsize(ctx: &mut Ctx, _a: &[Bytes]) -> Reply {
    Reply::Integer(ctx.db().len() as i64)
}

fn flush_option(a: &[Bytes]) -> CmdResult<()> {
    match a.get(1) {
        None => Ok(()),
        Some(o) if a.len() == 2 && (is(o, "async") || is(o, "sync")) => Ok(()),
        Some(_) => Err(syntax_error()),
    }
}

/// FLUSHDB [ASYNC|SYNC]
pub fn flushdb(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    if let Err(e) = flush_option(a) {
        return e;
    }
    let now = ctx.now_ms;
    ctx.db().clear(now);
    Reply::ok()
}

/// FLUSHALL [ASYNC|SYNC]
pub fn flushall(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    if let Err(e) = flush_option(a) {
        return e;
    }
    let now = ctx.now_ms;
    ctx.ks.dbs.iter_mut().for_each(|db| db.clear(now));
    Reply::ok()
}

/// SWAPDB index1 index2: both indexes are parsed (Redis's `getIntFromObjectOrReply`, an
/// integer within 32 bits, with SWAPDB's own texts) before either is checked against the
/// number of databases.
pub fn swapdb(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    let index = |arg: &[u8], which: &str| {
        parse_i64(arg)
            .filter(|&n| i32::try_from(n).is_ok())
            .ok_or_else(|| Reply::err(format!("ERR invalid {which} DB index")))
    };
    let (first, second) = match (index(&a[1], "first"), index(&a[2], "second")) {
        (Err(e), _) | (_, Err(e)) => return e,
        (Ok(x), Ok(y)) => (x, y),
    };
    let in_range = |n: i64| usize::try_from(n).ok().filter(|&n| n < DATABASES);
    let (Some(first), Some(second)) = (in_range(first), in_range(second)) else {
        return Reply::err("ERR DB index is out of range");
    };
    ctx.ks.swap_dbs(first, second, ctx.now_ms);
    Reply::ok()
}

/// MOVE key db
pub fn move_(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    let now = ctx.now_ms;
    let dst = match db_index(&a[2]) {
        Ok(d) => d,
        Err(e) => return e,
    };
    if dst == ctx.db {
        return Reply::err("ERR source and destination objects are the same");
    }
    let src = ctx.db;
    if !ctx.ks.dbs[src].contains(&a[1], now) || ctx.ks.dbs[dst].contains(&a[1], now) {
        return Reply::Integer(0);
    }
    match ctx.ks.dbs[src].remove(&a[1], now) {
        Some(entry) => {
            ctx.ks.dbs[dst].insert(&a[1], entry);
            notify::notify(&ctx.ks.pubsub, GENERIC | REMOVAL, "move_from", &a[1], src);
            notify::notify(&ctx.ks.pubsub, GENERIC, "move_to", &a[1], dst);
            Reply::Integer(1)
        }
        None => Reply::Integer(0),
    }
}

/// COPY source destination [DB destination-db] [REPLACE]
pub fn copy(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    let now = ctx.now_ms;
    let mut dst_db = ctx.db;
    let mut replace = false;
    let mut i = 3;
    while i < a.len() {
        if is(&a[i], "replace") {
            replace = true;
        } else if is(&a[i], "db") && i + 1 < a.len() {
            match db_index(&a[i + 1]) {
                Ok(d) => dst_db = d,
                Err(e) => return e,
            }
            i += 1;
        } else {
            return syntax_error();
        }
        i += 1;
    }
    if dst_db == ctx.db && a[1] == a[2] {
        return Reply::err("ERR source and destination objects are the same");
    }
    let Some(entry) = ctx.ks.dbs[ctx.db].read(&a[1], now).cloned() else {
        return Reply::Integer(0);
    };
    let dst = &mut ctx.ks.dbs[dst_db];
    if dst.contains(&a[2], now) {
        if !replace {
            return Reply::Integer(0);
        }
        dst.remove(&a[2], now);
    }
    dst.insert(&a[2], entry);
    notify::notify(&ctx.ks.pubsub, GENERIC, "copy_to", &a[2], dst_db);
    Reply::Integer(1)
}

use super::flags::{DENYOOM, FAST, RANDOM, READONLY, WRITE};

/// Generic key commands.
pub const COMMANDS: &[super::CommandSpec] = &[
    crate::cmd!("del", -2, WRITE, 1, -1, 1, del),
    crate::cmd!("unlink", -2, WRITE | FAST, 1, -1, 1, del),
    crate::cmd!("exists", -2, READONLY | FAST, 1, -1, 1, fast: exists),
    crate::cmd!("touch", -2, READONLY | FAST, 1, -1, 1, fast: touch),
    crate::cmd!("type", 2, READONLY | FAST, 1, 1, 1, type_),
    crate::cmd!("expire", -3, WRITE | FAST, 1, 1, 1, fast: expire),
    crate::cmd!("pexpire", -3, WRITE | FAST, 1, 1, 1, fast: pexpire),
    crate::cmd!("expireat", -3, WRITE | FAST, 1, 1, 1, fast: expireat),
    crate::cmd!("pexpireat", -3, WRITE | FAST, 1, 1, 1, fast: pexpireat),
    crate::cmd!("ttl", 2, READONLY | FAST, 1, 1, 1, fast: ttl),
    crate::cmd!("pttl", 2, READONLY | FAST, 1, 1, 1, fast: pttl),
    crate::cmd!("expiretime", 2, READONLY | FAST, 1, 1, 1, fast: expiretime),
    crate::cmd!("pexpiretime", 2, READONLY | FAST, 1, 1, 1, fast: pexpiretime),
    crate::cmd!("persist", 2, WRITE | FAST, 1, 1, 1, persist),
    crate::cmd!("rename", 3, WRITE, 1, 2, 1, rename),
    crate::cmd!("renamenx", 3, WRITE | FAST, 1, 2, 1, renamenx),
    crate::cmd!("keys", 2, READONLY, 0, 0, 0, keys),
    crate::cmd!("scan", -2, READONLY, 0, 0, 0, scan),
    crate::cmd!("randomkey", 1, READONLY | RANDOM, 0, 0, 0, randomkey),
    crate::cmd!("dbsize", 1, READONLY | FAST, 0, 0, 0, dbsize),
    crate::cmd!("flushdb", -1, WRITE, 0, 0, 0, flushdb),
    crate::cmd!("flushall", -1, WRITE, 0, 0, 0, flushall),
    crate::cmd!("swapdb", 3, WRITE | FAST, 0, 0, 0, swapdb),
    crate::cmd!("move", 3, WRITE | FAST, 1, 1, 1, move_),
    crate::cmd!("copy", -3, WRITE | DENYOOM, 1, 2, 1, copy),
];
