//! HyperLogLog commands: PFADD, PFCOUNT, PFMERGE, PFDEBUG and PFSELFTEST, over string
//! values in Redis's own format (`hll_format`), so counts and stored bytes equal Redis's.
//!
//! PFCOUNT of one key writes the computed cardinality back into the value's header when
//! the cached one is invalid, as Redis does. Its row has Redis 7.0.15's flag, `READONLY`
//! (what COMMAND INFO shows), plus Tollgate's internal `LOGGED`: in a
//! cluster PFCOUNT goes through the Raft log like a write, so every replica updates the
//! cache at the same point and the stored bytes never differ between nodes. Standalone it
//! runs as any command.
//! Promotion from sparse to dense follows `hll-sparse-max-bytes` (the keyspace's copy of
//! the CONFIG setting).

use bytes::Bytes;

use super::args::{is, wrongtype, CmdResult};
use super::hll_format as hll;
use super::Ctx;
use crate::protocol::Reply;
use crate::pubsub::notify::STRING;
use crate::store::value::StrBytes;
use crate::store::{Db, Entry, StrValue, Value};

const INVALID: &str = "INVALIDOBJ Corrupted HLL object detected";
const NOT_HLL: &str = "WRONGTYPE Key is not a valid HyperLogLog string value.";

fn invalid(_: hll::Corrupted) -> Reply {
    Reply::err(INVALID)
}

/// The HyperLogLog at `key`: Ok(None) if absent; WRONGTYPE (Redis's two texts) if not a
/// string or not a valid HyperLogLog. Counts no keyspace hit or miss: Redis looks the key
/// up for writing in PFADD, PFDEBUG and for PFMERGE's destination; [`count_hll`] is the
/// read lookup of PFCOUNT and PFMERGE's sources.
fn read_hll<'a>(db: &'a Db, key: &[u8], now: u64) -> CmdResult<Option<&'a [u8]>> {
    hll_of(db.get(key, now))
}

/// [`read_hll`] as a read lookup (counts a keyspace hit or miss).
fn count_hll<'a>(db: &'a Db, key: &[u8], now: u64) -> CmdResult<Option<&'a [u8]>> {
    hll_of(db.read(key, now))
}

fn hll_of(entry: Option<&Entry>) -> CmdResult<Option<&[u8]>> {
    match entry {
        None => Ok(None),
        Some(Entry {
            value: Value::Str(StrValue::Raw(b)),
            ..
        }) if hll::is_valid(b) => Ok(Some(b.as_slice())),
        Some(Entry {
            value: Value::Str(_),
            ..
        }) => Err(Reply::err(NOT_HLL)),
        Some(_) => Err(wrongtype()),
    }
}

/// The stored bytes of a HyperLogLog already checked by [`read_hll`], for editing in
/// place (a dense one keeps its size).
fn stored_mut<'a>(db: &'a mut Db, key: &[u8], now: u64) -> &'a mut [u8] {
    match db.get_mut(key, now) {
        Some(Entry {
            value: Value::Str(s),
            ..
        }) => s.bytes_mut(0),
        _ => unreachable!("checked by read_hll"),
    }
}

fn store(db: &mut Db, key: &[u8], now: u64, bytes: &[u8]) {
    let value = Value::Str(StrValue::Raw(StrBytes::new(bytes)));
    match db.get_mut(key, now) {
        Some(e) => e.value = value,
        None => db.set(key, value),
    }
}

/// PFADD key [element ...]
pub fn pfadd(ctx: &mut Ctx, a: &[&[u8]]) -> Reply {
    let now = ctx.now_ms;
    let max = ctx.ks.hll_sparse_max_bytes;
    let key = a[1];
    let db = ctx.db();
    // The destination is read and checked once: a dense one is then edited in place, a
    // sparse one (or a new one) is rebuilt from this copy and stored.
    let (mut updated, sparse) = match read_hll(db, key, now) {
        Err(e) => return e,
        Ok(None) => (true, Some(hll::new_sparse())),
        // Nothing to raise: like Redis, the key is not touched (a WATCH stays clean).
        Ok(Some(s)) if s[4] == hll::DENSE && !raises_any(s, &a[2..]) => return Reply::Integer(0),
        Ok(Some(s)) if s[4] == hll::DENSE => (false, None),
        Ok(Some(s)) => (false, Some(s.to_vec())),
    };
    let result = if let Some(mut s) = sparse {
        let mut result = Ok(());
        for ele in &a[2..] {
            match hll::add(&mut s, ele, max) {
                Ok(changed) => updated |= changed,
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        if updated && result.is_ok() {
            hll::invalidate_cache(&mut s);
        }
        // Like Redis, registers set before a corruption was met stay set.
        store(db, key, now, &s);
        result
    } else {
        // The common case once a HyperLogLog is large: registers change in place.
        let s = stored_mut(db, key, now);
        for ele in &a[2..] {
            let (index, count) = hll::pattern(ele);
            updated |= hll::dense_set(&mut s[hll::HEADER..], index, count);
        }
        if updated {
            hll::invalidate_cache(s);
        }
        Ok(())
    };
    if let Err(e) = result {
        return invalid(e);
    }
    if updated {
        ctx.notify(STRING, "pfadd", key);
    }
    Reply::Integer(i64::from(updated))
}

/// Whether adding `elements` to the dense HyperLogLog `s` would raise a register.
fn raises_any(s: &[u8], elements: &[&[u8]]) -> bool {
    elements.iter().any(|ele| {
        let (index, count) = hll::pattern(ele);
        count > hll::dense_get(&s[hll::HEADER..], index)
    })
}

/// PFCOUNT key [key ...]
pub fn pfcount(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    run(pfcount_inner(ctx, a))
}

fn pfcount_inner(ctx: &mut Ctx, a: &[Bytes]) -> CmdResult<Reply> {
    let now = ctx.now_ms;
    let db = ctx.db();
    if a.len() > 2 {
        let mut max = vec![0u8; hll::REGISTERS];
        for key in &a[1..] {
            if let Some(s) = count_hll(db, key, now)? {
                hll::merge_into(&mut max, s).map_err(invalid)?;
            }
        }
        return Ok(Reply::Integer(hll::count_raw(&max) as i64));
    }
    let Some(s) = count_hll(db, &a[1], now)? else {
        return Ok(Reply::Integer(0));
    };
    if let Some(card) = hll::cached(s) {
        return Ok(Reply::Integer(card as i64));
    }
    let card = hll::count(s).map_err(invalid)?;
    hll::set_cache(stored_mut(db, &a[1], now), card);
    Ok(Reply::Integer(card as i64))
}

/// PFMERGE destkey [sourcekey ...]
pub fn pfmerge(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    run(pfmerge_inner(ctx, a))
}

fn pfmerge_inner(ctx: &mut Ctx, a: &[Bytes]) -> CmdResult<Reply> {
    let now = ctx.now_ms;
    let max_bytes = ctx.ks.hll_sparse_max_bytes;
    let db = ctx.db();
    let mut max = vec![0u8; hll::REGISTERS];
    let mut dense = false;
    // The destination is the first source, as in Redis; it is read and checked once.
    let mut dest = None;
    for (i, key) in a[1..].iter().enumerate() {
        if let Some(s) = count_hll(db, key, now)? {
            dense |= s[4] == hll::DENSE;
            hll::merge_into(&mut max, s).map_err(invalid)?;
            if i == 0 {
                dest = Some(s.to_vec());
            }
        }
    }
    let mut s = dest.unwrap_or_else(hll::new_sparse);
    if dense {
        hll::to_dense(&mut s).map_err(invalid)?;
    }
    for (i, &m) in max.iter().enumerate() {
        if m == 0 {
            continue;
        }
        if s[4] == hll::DENSE {
            hll::dense_set(&mut s[hll::HEADER..], i, m);
        } else {
            // Redis ignores a corruption met here (the sources were checked above).
            let _ = hll::sparse_set(&mut s, i, m, max_bytes);
        }
    }
    hll::invalidate_cache(&mut s);
    store(db, &a[1], now, &s);
    ctx.notify(STRING, "pfadd", &a[1]);
    Ok(Reply::ok())
}

/// PFDEBUG GETREG|DECODE|ENCODING|TODENSE key
pub fn pfdebug(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    run(pfdebug_inner(ctx, a))
}

fn pfdebug_inner(ctx: &mut Ctx, a: &[Bytes]) -> CmdResult<Reply> {
    let now = ctx.now_ms;
    let db = ctx.db();
    let key = &a[2];
    let Some(s) = read_hll(db, key, now)? else {
        return Err(Reply::err("ERR The specified key does not exist"));
    };
    let sub = super::arg_text(&a[1]).into_owned();
    let sparse = s[4] == hll::SPARSE;
    let arity = || {
        Reply::err(format!(
            "ERR Wrong number of arguments for the '{sub}' subcommand"
        ))
    };
    let densify = |db: &mut Db| -> CmdResult<Vec<u8>> {
        let mut v = read_hll(db, key, now)?.unwrap_or_default().to_vec();
        if v[4] == hll::SPARSE {
            hll::to_dense(&mut v).map_err(invalid)?;
            store(db, key, now, &v);
        }
        Ok(v)
    };
    if is(&a[1], "getreg") {
        if a.len() != 3 {
            return Err(arity());
        }
        let v = densify(db)?;
        Ok(Reply::Array(
            (0..hll::REGISTERS)
                .map(|i| Reply::Integer(i64::from(hll::dense_get(&v[hll::HEADER..], i))))
                .collect(),
        ))
    } else if is(&a[1], "decode") {
        if a.len() != 3 {
            return Err(arity());
        }
        if !sparse {
            return Err(Reply::err("ERR HLL encoding is not sparse"));
        }
        Ok(Reply::bulk(Bytes::from(hll::decode(s))))
    } else if is(&a[1], "encoding") {
        if a.len() != 3 {
            return Err(arity());
        }
        Ok(Reply::Status(
            if sparse { "sparse" } else { "dense" }.into(),
        ))
    } else if is(&a[1], "todense") {
        if a.len() != 3 {
            return Err(arity());
        }
        densify(db)?;
        Ok(Reply::Integer(i64::from(sparse)))
    } else {
        Err(Reply::err(format!(
            "ERR Unknown PFDEBUG subcommand '{sub}'"
        )))
    }
}

/// PFSELFTEST: Redis's self test of the register access and of the estimator (sparse and
/// dense agree; the error stays within bounds up to ten million elements). The random
/// elements come from the command's seed.
pub fn pfselftest(ctx: &mut Ctx, _a: &[Bytes]) -> Reply {
    let mut rng = super::collection::Rng::new(ctx.seed, b"pfselftest", 0);
    let max_bytes = ctx.ks.hll_sparse_max_bytes;
    let mut regs = vec![0u8; hll::DENSE_SIZE - hll::HEADER];
    let mut bytes = vec![0u8; hll::REGISTERS];
    for _ in 0..1000 {
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = (rng.next_u64() & 63) as u8;
            hll::dense_put(&mut regs, i, *b);
        }
        for (i, &b) in bytes.iter().enumerate() {
            let got = hll::dense_get(&regs, i);
            if got != b {
                return Reply::err(format!(
                    "TESTFAILED Register {i} should be {b} but is {got}"
                ));
            }
        }
    }
    let mut dense = hll::new_sparse();
    let _ = hll::to_dense(&mut dense);
    let mut sparse = hll::new_sparse();
    let relerr = 1.04 / (hll::REGISTERS as f64).sqrt();
    let seed = rng.next_u64();
    let mut checkpoint: u64 = 1;
    for j in 1..=10_000_000u64 {
        let ele = (j ^ seed).to_ne_bytes();
        let _ = hll::add(&mut dense, &ele, max_bytes);
        let _ = hll::add(&mut sparse, &ele, max_bytes);
        if j != checkpoint {
            continue;
        }
        if j < (max_bytes / 2) as u64 && sparse[4] != hll::SPARSE {
            return Reply::err("TESTFAILED sparse encoding not used");
        }
        let card = hll::count(&dense).unwrap_or(0);
        if hll::count(&sparse).ok() != Some(card) {
            return Reply::err("TESTFAILED dense/sparse disagree");
        }
        let abserr = checkpoint.abs_diff(card);
        let maxerr = if j == 10 {
            1
        } else {
            (relerr * 6.0 * checkpoint as f64).ceil() as u64
        };
        if abserr > maxerr {
            return Reply::err(format!(
                "TESTFAILED Too big error. card:{checkpoint} abserr:{abserr}"
            ));
        }
        checkpoint *= 10;
    }
    Reply::ok()
}

use super::flags::{ADMIN, DENYOOM, FAST, LOGGED, READONLY, WRITE};
use super::strings::run;

/// HyperLogLog commands.
pub const COMMANDS: &[super::CommandSpec] = &[
    crate::cmd!("pfadd", -2, WRITE | DENYOOM | FAST, 1, 1, 1, fast: pfadd),
    crate::cmd!("pfcount", -2, READONLY | LOGGED, 1, -1, 1, pfcount),
    crate::cmd!("pfmerge", -2, WRITE | DENYOOM, 1, -1, 1, pfmerge),
    crate::cmd!("pfdebug", 3, WRITE | DENYOOM | ADMIN, 2, 2, 1, pfdebug),
    crate::cmd!("pfselftest", 1, ADMIN, 0, 0, 0, pfselftest),
];
