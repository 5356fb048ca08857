//! DUMP and RESTORE: a key's value in Redis's own serialization (see
//! [`crate::persistence::rdb`]), so values move between Redis and Tollgate in both
//! directions.
//!
//! RESTORE is an ordinary write: it depends only on the keyspace, its arguments and the
//! command's `now_ms` (a relative TTL counts from it), so in a cluster the payload is
//! replicated with the command and every node decodes it to the same value. IDLETIME and
//! FREQ are checked as Redis checks them and set the key's LRU time or LFU counter, the one
//! the eviction policy uses, as Redis does (that access information is per node and not
//! replicated state; see `store::eviction`).

use bytes::Bytes;

use super::args::{int, is, syntax_error, CmdResult, NOT_INTEGER};
use super::Ctx;
use crate::persistence::rdb::decode::{restore_payload, DecodeError, PayloadError};
use crate::persistence::rdb::encode::dump as dump_payload;
use crate::protocol::Reply;
use crate::store::zset::SortedSet;
use crate::store::Value;

use super::flags::{DENYOOM, READONLY, WRITE};

/// DUMP key
pub fn dump(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    let now = ctx.now_ms;
    match ctx.db().read(&a[1], now) {
        Some(entry) => Reply::Bulk(Bytes::from(dump_payload(&entry.value))),
        None => Reply::Nil,
    }
}

/// RESTORE key ttl serialized-value [REPLACE] [ABSTTL] [IDLETIME seconds] [FREQ frequency]
pub fn restore(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    super::strings::run(restore_inner(ctx, a))
}

fn restore_inner(ctx: &mut Ctx, a: &[Bytes]) -> CmdResult<Reply> {
    // Redis's order of checks: the options, the key's existence, the TTL, the payload.
    let mut replace = false;
    let mut absttl = false;
    let (mut idle, mut freq) = (None, None);
    let mut i = 4;
    while i < a.len() {
        let has_value = i + 1 < a.len();
        if is(&a[i], "replace") {
            replace = true;
        } else if is(&a[i], "absttl") {
            absttl = true;
        } else if is(&a[i], "idletime") && has_value && freq.is_none() {
            let v = int(&a[i + 1])?;
            if v < 0 {
                return Err(Reply::err("ERR Invalid IDLETIME value, must be >= 0"));
            }
            idle = Some(v);
            i += 1;
        } else if is(&a[i], "freq") && has_value && idle.is_none() {
            let v = int(&a[i + 1])?;
            if !(0..=255).contains(&v) {
                return Err(Reply::err(
                    "ERR Invalid FREQ value, must be >= 0 and <= 255",
                ));
            }
            freq = Some(v);
            i += 1;
        } else {
            return Err(syntax_error());
        }
        i += 1;
    }
    let now = ctx.now_ms;
    let key = &a[1];
    if !replace && ctx.db().contains(key, now) {
        return Err(Reply::err("BUSYKEY Target key name already exists."));
    }
    let ttl = super::args::parse_i64(&a[2]).ok_or_else(|| Reply::err(NOT_INTEGER))?;
    if ttl < 0 {
        return Err(Reply::err("ERR Invalid TTL value, must be >= 0"));
    }
    let value = match restore_payload(&a[3]) {
        // Encoded by the thresholds, as Redis encodes a loaded value.
        Ok(Value::Hash(h)) => Value::Hash(h.reencode(ctx.ks.encodings.hash())),
        Ok(Value::Set(s)) => Value::Set(s.reencode(ctx.ks.encodings.set())),
        Ok(Value::ZSet(z)) => {
            let limits = ctx.ks.encodings.zset();
            let fits = z.len() <= limits.entries && z.iter().all(|(m, _)| m.len() <= limits.value);
            Value::ZSet(SortedSet::from_snapshot_limited(!fits, z.iter(), limits))
        }
        Ok(v) => v,
        Err(PayloadError::Footer) => {
            return Err(Reply::err("ERR DUMP payload version or checksum are wrong"))
        }
        Err(PayloadError::Value(DecodeError::Unsupported(what))) => {
            return Err(Reply::err(format!(
                "ERR Bad data format: the payload holds a {what} value, which Tollgate does \
                 not store"
            )))
        }
        Err(PayloadError::Value(_)) => return Err(Reply::err("ERR Bad data format")),
    };
    let db = ctx.db();
    if replace {
        db.remove(key, now);
    }
    // Redis adds the command time to a relative TTL in 64-bit arithmetic, and a deadline
    // at or before now means the key expired already: nothing is stored (a replaced key
    // stays deleted).
    let deadline = match (ttl, absttl) {
        (0, _) => None,
        (t, true) => Some(t),
        (t, false) => Some(t.wrapping_add(now as i64)),
    };
    if let Some(at) = deadline {
        if at <= now as i64 {
            return Ok(Reply::ok());
        }
    }
    let at = deadline.map(|t| t as u64);
    db.modify(key, now, |_| (Some((value, at)), ()));
    db.hint_access(key, idle.map(|v| v as u64), freq.map(|v| v as u8));
    ctx.notify(crate::pubsub::notify::GENERIC, "restore", key);
    Ok(Reply::ok())
}

/// The DUMP/RESTORE rows of the command table.
pub const COMMANDS: &[super::CommandSpec] = &[
    crate::cmd!("dump", 2, READONLY, 1, 1, 1, dump),
    crate::cmd!("restore", -4, WRITE | DENYOOM, 1, 1, 1, restore),
];
