//! SORT and SORT_RO: the elements of a list, set or sorted set, sorted numerically or
//! (ALPHA) by their bytes, by themselves or by weights read through a `BY` pattern,
//! with LIMIT, `GET` patterns (`#` for the element, `prefix*suffix` for a string key,
//! `prefix*suffix->field` for a hash field) and STORE into a list, following Redis 7.0's
//! `sortCommandGeneric`: the same option parsing, error texts, LIMIT clamping and
//! `nosort` (a BY pattern without `*`) shortcuts.
//!
//! Determinism: a numeric sort breaks ties by the elements' bytes, as Redis does, so it is
//! a total order. Redis leaves ties of an ALPHA sort BY a pattern (equal or missing
//! weights) to its unstable qsort; Tollgate sorts stably, so they keep the source's order
//! (list order, a set's insertion order, a sorted set's ascending order). ALPHA compares
//! bytes (`strcoll` in the C locale, which is what Redis runs with by default).
//!
//! BY and GET read keys that are not named as keys of the command (COMMAND GETKEYS lists
//! only the sorted key and the STORE destination): see the README's note on SORT in a
//! cluster.

use std::cmp::Ordering;

use bytes::Bytes;

use super::args::{self, int, is, syntax_error, CmdResult};
use super::strings::run;
use super::Ctx;
use crate::numbers::strtod;
use crate::protocol::Reply;
use crate::pubsub::notify::{GENERIC, LIST, REMOVAL};
use crate::store::{Db, Value};

/// A parsed SORT call.
struct Options<'a> {
    desc: bool,
    alpha: bool,
    limit: Option<(i64, i64)>,
    store: Option<&'a Bytes>,
    by: Option<&'a [u8]>,
    /// BY a pattern without `*`: no sorting at all.
    dont_sort: bool,
    gets: Vec<&'a [u8]>,
}

fn parse(a: &[Bytes], readonly: bool) -> CmdResult<Options<'_>> {
    let mut o = Options {
        desc: false,
        alpha: false,
        limit: None,
        store: None,
        by: None,
        dont_sort: false,
        gets: Vec::new(),
    };
    let mut j = 2;
    while j < a.len() {
        let left = a.len() - j - 1;
        let opt = &a[j];
        if is(opt, "asc") {
            o.desc = false;
        } else if is(opt, "desc") {
            o.desc = true;
        } else if is(opt, "alpha") {
            o.alpha = true;
        } else if is(opt, "limit") && left >= 2 {
            o.limit = Some((int(&a[j + 1])?, int(&a[j + 2])?));
            j += 2;
        } else if !readonly && is(opt, "store") && left >= 1 {
            o.store = Some(&a[j + 1]);
            j += 1;
        } else if is(opt, "by") && left >= 1 {
            let pattern = &a[j + 1][..];
            o.by = Some(pattern);
            o.dont_sort = !c_str(pattern).contains(&b'*');
            j += 1;
        } else if is(opt, "get") && left >= 1 {
            o.gets.push(&a[j + 1]);
            j += 1;
        } else {
            return Err(syntax_error());
        }
        j += 1;
    }
    Ok(o)
}

/// The bytes C's string functions see: up to the first NUL.
fn c_str(b: &[u8]) -> &[u8] {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    &b[..end]
}

/// Redis's `lookupKeyByPattern`: `#` is the element itself; otherwise the first `*` is
/// replaced by the element, and a non-empty `->field` after it reads that hash field.
/// None for a pattern without `*`, a missing key, a key of another type, a missing field.
fn lookup_by_pattern(db: &Db, now: u64, pattern: &[u8], elem: &Bytes) -> Option<Bytes> {
    let pat = c_str(pattern);
    if pat == b"#" {
        return Some(elem.clone());
    }
    let star = pat.iter().position(|&c| c == b'*')?;
    let after = &pattern[star + 1..];
    let field = c_str(after)
        .windows(2)
        .position(|w| w == b"->")
        .filter(|&at| at + 2 < c_str(after).len());
    let (suffix, field) = match field {
        Some(at) => (&after[..at], Some(&after[at + 2..])),
        None => (after, None),
    };
    let mut key = Vec::with_capacity(star + elem.len() + suffix.len());
    key.extend_from_slice(&pattern[..star]);
    key.extend_from_slice(elem);
    key.extend_from_slice(suffix);
    let entry = db.read(&key, now)?;
    match (&entry.value, field) {
        (Value::Str(s), None) => Some(s.to_bytes()),
        (Value::Hash(h), Some(f)) => h.get(f).map(Bytes::copy_from_slice),
        _ => None,
    }
}

/// A weight for a numeric sort, as Redis reads it with `strtod`: the whole text (up to a
/// NUL) must be a number, not NaN, not out of range; an empty text is 0.
fn weight(b: &[u8]) -> Option<f64> {
    let r = strtod(b);
    let rest_ok = b.get(r.len).is_none_or(|&c| c == 0);
    (rest_ok && !r.range_error && !r.value.is_nan()).then_some(r.value)
}

/// One element with what it sorts by.
struct Item {
    elem: Bytes,
    score: f64,
    /// The BY weight of an ALPHA sort (None: the key or field is missing).
    cmp: Option<Bytes>,
}

/// The elements of the value to sort, in the order SORT starts from: a list's order (or
/// reversed for DESC when not sorting), a set's order, a sorted set's ascending order (or
/// descending for DESC when not sorting).
fn elements(v: Option<&Value>, dont_sort: bool, desc: bool) -> CmdResult<Vec<Bytes>> {
    Ok(match v {
        None => Vec::new(),
        Some(Value::List(l)) if dont_sort && desc => {
            let mut v: Vec<Bytes> = l.iter().collect();
            v.reverse();
            v
        }
        Some(Value::List(l)) => l.iter().collect(),
        Some(Value::Set(s)) => s.iter().collect(),
        Some(Value::ZSet(z)) if dont_sort && desc => {
            let mut v: Vec<Bytes> = z.iter().map(|(m, _)| Bytes::copy_from_slice(m)).collect();
            v.reverse();
            v
        }
        Some(Value::ZSet(z)) => z.iter().map(|(m, _)| Bytes::copy_from_slice(m)).collect(),
        Some(_) => return Err(args::wrongtype()),
    })
}

/// Redis's LIMIT clamping: the first and last positions to output (`end < start`: none).
fn window(limit: Option<(i64, i64)>, len: usize) -> (i64, i64) {
    let len = len as i64;
    let (offset, count) = limit.unwrap_or((0, -1));
    let mut start = offset.max(0);
    let mut end = if count < 0 {
        len - 1
    } else {
        start.saturating_add(count) - 1
    };
    if start >= len {
        start = len - 1;
        end = len - 2;
    }
    if end >= len {
        end = len - 1;
    }
    (start, end)
}

fn sort_generic(ctx: &mut Ctx, a: &[Bytes], readonly: bool) -> Reply {
    run((|| {
        let mut o = parse(a, readonly)?;
        let now = ctx.now_ms;
        let in_script = ctx.scripts.is_none();
        let db = &ctx.ks.dbs[ctx.db];
        let value = db.read(&a[1], now).map(|e| &e.value);
        // Redis sorts a set that is not to be sorted when the result is stored or goes to a
        // script, so that replicas agree (Tollgate's set order is deterministic anyway).
        if o.dont_sort && matches!(value, Some(Value::Set(_))) && (o.store.is_some() || in_script) {
            o.dont_sort = false;
            o.alpha = true;
            o.by = None;
        }
        let elems = elements(value, o.dont_sort, o.desc)?;
        let (start, end) = window(o.limit, elems.len());
        let mut items: Vec<Item> = elems
            .into_iter()
            .map(|elem| Item {
                elem,
                score: 0.0,
                cmp: None,
            })
            .collect();
        if !o.dont_sort {
            let mut bad_score = false;
            for it in &mut items {
                let by = match o.by {
                    Some(p) => match lookup_by_pattern(db, now, p, &it.elem) {
                        Some(v) => v,
                        None => continue,
                    },
                    None => it.elem.clone(),
                };
                if o.alpha {
                    if o.by.is_some() {
                        it.cmp = Some(by);
                    }
                } else {
                    match weight(&by) {
                        Some(s) => it.score = s,
                        None => bad_score = true,
                    }
                }
            }
            if bad_score {
                return Err(Reply::err(
                    "ERR One or more scores can't be converted into double",
                ));
            }
            let (alpha, by, desc) = (o.alpha, o.by.is_some(), o.desc);
            items.sort_by(|x, y| {
                let c = compare(x, y, alpha, by);
                if desc {
                    c.reverse()
                } else {
                    c
                }
            });
        }
        let picked: &[Item] = if end >= start {
            &items[start as usize..=end as usize]
        } else {
            &[]
        };
        let mut out: Vec<Option<Bytes>> = Vec::new();
        for it in picked {
            if o.gets.is_empty() {
                out.push(Some(it.elem.clone()));
            }
            for g in &o.gets {
                out.push(lookup_by_pattern(db, now, g, &it.elem));
            }
        }
        let Some(dst) = o.store else {
            return Ok(Reply::Array(
                out.into_iter()
                    .map(|v| v.map_or(Reply::Nil, Reply::Bulk))
                    .collect(),
            ));
        };
        let n = out.len() as i64;
        if out.is_empty() {
            if ctx.db().remove(dst, now).is_some() {
                ctx.notify(GENERIC | REMOVAL, "del", dst);
            }
        } else {
            let list = out.into_iter().map(Option::unwrap_or_default).collect();
            ctx.db().set(dst, Value::List(list));
            ctx.notify(LIST, "sortstore", dst);
        }
        Ok(Reply::Integer(n))
    })())
}

/// Redis's `sortCompare` before DESC: numeric by score then element bytes; ALPHA BY a
/// pattern by the weights' bytes (a missing weight first); ALPHA alone by the elements'.
fn compare(x: &Item, y: &Item, alpha: bool, by: bool) -> Ordering {
    if !alpha {
        return x
            .score
            .partial_cmp(&y.score)
            .unwrap_or(Ordering::Equal)
            .then_with(|| x.elem.cmp(&y.elem));
    }
    if by {
        return match (&x.cmp, &y.cmp) {
            (None, None) => Ordering::Equal,
            (None, Some(_)) => Ordering::Less,
            (Some(_), None) => Ordering::Greater,
            (Some(a), Some(b)) => a.cmp(b),
        };
    }
    x.elem.cmp(&y.elem)
}

/// SORT key [BY pattern] [LIMIT offset count] [GET pattern ...] [ASC|DESC] [ALPHA]
/// [STORE destination]
pub fn sort(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    sort_generic(ctx, a, false)
}

/// SORT_RO key [BY pattern] [LIMIT offset count] [GET pattern ...] [ASC|DESC] [ALPHA]
pub fn sort_ro(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    sort_generic(ctx, a, true)
}

/// SORT's keys: the sorted key and the STORE destination (Redis's `sortGetKeys`: the
/// last STORE wins; LIMIT skips its two arguments, the other options one).
fn sort_keys(a: &[&[u8]]) -> Vec<Bytes> {
    let Some(key) = a.get(1) else {
        return Vec::new();
    };
    let mut keys = vec![Bytes::copy_from_slice(key)];
    let mut store = None;
    let mut j = 2;
    while j < a.len() {
        let opt = a[j];
        if opt.eq_ignore_ascii_case(b"limit") {
            j += 2;
        } else if opt.eq_ignore_ascii_case(b"get") || opt.eq_ignore_ascii_case(b"by") {
            j += 1;
        } else if opt.eq_ignore_ascii_case(b"store") {
            // Redis does not skip the destination, as SORT's parser does not either.
            store = a.get(j + 1).copied().or(store);
        }
        j += 1;
    }
    keys.extend(store.map(Bytes::copy_from_slice));
    keys
}

use super::flags::{DENYOOM, READONLY, WRITE};
use super::Keys;

/// SORT and SORT_RO.
pub const COMMANDS: &[super::CommandSpec] = &[
    crate::cmd!("sort", -2, WRITE | DENYOOM, keys: Keys::Parsed { find: sort_keys, first: 1 }, sort),
    crate::cmd!("sort_ro", -2, READONLY, 1, 1, 1, sort_ro),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_window_follows_redis() {
        assert_eq!(window(None, 3), (0, 2));
        assert_eq!(window(Some((1, 1)), 3), (1, 1));
        assert_eq!(window(Some((-5, 2)), 3), (0, 1));
        assert_eq!(window(Some((1, -1)), 3), (1, 2));
        assert_eq!(window(Some((5, 2)), 3), (2, 1));
        assert_eq!(window(Some((0, 0)), 3), (0, -1));
        assert_eq!(window(Some((i64::MAX, i64::MAX)), 3), (2, 1));
        assert_eq!(window(Some((1, i64::MAX)), 3), (1, 2));
        assert_eq!(window(None, 0), (-1, -2));
    }

    #[test]
    fn weights_parse_like_strtod() {
        assert_eq!(weight(b""), Some(0.0));
        assert_eq!(weight(b" 5"), Some(5.0));
        assert_eq!(weight(b"0x10"), Some(16.0));
        assert_eq!(weight(b"1e3"), Some(1000.0));
        assert_eq!(weight(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(weight(b"5 "), None);
        assert_eq!(weight(b"abc"), None);
        assert_eq!(weight(b"nan"), None);
        assert_eq!(weight(b"1e999"), None);
        assert_eq!(weight(b"7\0junk"), Some(7.0));
    }

    #[test]
    fn sort_keys_include_the_store_destination() {
        let k = |line: &str| {
            let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
            sort_keys(&args)
        };
        assert_eq!(k("sort l store d"), vec!["l", "d"]);
        assert_eq!(k("sort l by store get store store d2"), vec!["l", "d2"]);
        assert_eq!(k("sort l store d store"), vec!["l", "d"]);
        assert_eq!(k("sort l limit 0 1"), vec!["l"]);
    }
}
