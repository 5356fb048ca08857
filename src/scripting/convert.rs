//! Conversions between Lua values and [`Reply`], following Redis's tables:
//! command replies become Lua values (`redisProtocolToLuaType`) in the protocol the
//! script selected with `redis.setresp`, and a script's return value becomes the
//! reply (`luaReplyToRedisReply`).

use std::ffi::c_int;

use bytes::Bytes;

use super::boundary;
use super::budget;
use super::lua::{
    f64_to_i64_c, ffi, lua_State, push_bytes, push_error_table, push_str, raw_get_str, raw_set_str,
    string_at,
};
use crate::protocol::{format_double, Reply};

/// Push the Lua value for a command reply, as seen by a script in protocol `resp`.
/// Tables are created empty and grown like Redis does, so `pairs` visits their keys
/// in the same order as in Redis.
pub(crate) unsafe fn push_reply(l: *mut lua_State, reply: &Reply, resp: u8) {
    boundary::deep(|| push_reply_value(l, reply, resp))
}

unsafe fn push_reply_value(l: *mut lua_State, reply: &Reply, resp: u8) {
    if ffi::lua_checkstack(l, 4) == 0 {
        // Redis panics here; a nil keeps the VM consistent.
        ffi::lua_pushnil(l);
        return;
    }
    let resp3 = resp >= 3;
    match reply {
        Reply::Status(s) => {
            ffi::lua_newtable(l);
            push_str(l, s);
            raw_set_str(l, -2, "ok");
        }
        Reply::Error(e) => push_command_error(l, e.as_bytes()),
        Reply::Integer(n) => ffi::lua_pushnumber(l, *n as f64),
        Reply::Bulk(b) => push_bytes(l, b),
        Reply::Nil | Reply::NilArray => {
            if resp3 {
                ffi::lua_pushnil(l)
            } else {
                ffi::lua_pushboolean(l, 0)
            }
        }
        // Commands never answer a push; a script would see it as an array.
        Reply::Array(items) | Reply::Push(items) => push_array(l, items.iter(), resp),
        Reply::Ints5(items) => {
            ffi::lua_newtable(l);
            for (j, n) in items.iter().enumerate() {
                ffi::lua_pushnumber(l, (j + 1) as f64);
                ffi::lua_pushnumber(l, *n as f64);
                ffi::lua_rawset(l, -3);
            }
        }
        Reply::Map(pairs) => {
            if resp3 {
                ffi::lua_newtable(l);
                ffi::lua_newtable(l);
                for (k, v) in pairs {
                    push_reply(l, k, resp);
                    push_reply(l, v, resp);
                    set_field(l);
                }
                raw_set_str(l, -2, "map");
            } else {
                push_array(l, pairs.iter().flat_map(|(k, v)| [k, v]), resp);
            }
        }
        Reply::Set(items) => {
            if resp3 {
                ffi::lua_newtable(l);
                ffi::lua_newtable(l);
                for item in items {
                    push_reply(l, item, resp);
                    ffi::lua_pushboolean(l, 1);
                    set_field(l);
                }
                raw_set_str(l, -2, "set");
            } else {
                push_array(l, items.iter(), resp);
            }
        }
        Reply::Double(d) => {
            if resp3 {
                ffi::lua_newtable(l);
                ffi::lua_pushnumber(l, *d);
                raw_set_str(l, -2, "double");
            } else {
                push_str(l, &format_double(*d));
            }
        }
        Reply::HumanDouble(d) => {
            let text = crate::numbers::format_human(*d);
            if resp3 {
                // Redis's Lua gets the double its RESP3 text parses to.
                ffi::lua_newtable(l);
                ffi::lua_pushnumber(l, text.parse().unwrap_or(*d));
                raw_set_str(l, -2, "double");
            } else {
                push_str(l, &text);
            }
        }
        Reply::Bool(b) => {
            if resp3 {
                ffi::lua_pushboolean(l, c_int::from(*b));
            } else {
                ffi::lua_pushnumber(l, if *b { 1.0 } else { 0.0 });
            }
        }
        Reply::BigNumber(s) => {
            if resp3 {
                ffi::lua_newtable(l);
                push_str(l, s);
                raw_set_str(l, -2, "big_number");
            } else {
                push_str(l, s);
            }
        }
        Reply::Verbatim(format, text) => {
            if resp3 {
                ffi::lua_newtable(l);
                ffi::lua_newtable(l);
                push_bytes(l, text);
                raw_set_str(l, -2, "string");
                push_str(l, format);
                raw_set_str(l, -2, "format");
                raw_set_str(l, -2, "verbatim_string");
            } else {
                push_bytes(l, text);
            }
        }
    }
}

/// Push the error table for a failed command: `{err="CODE msg", ignore_error_stats_update=true}`.
pub(crate) unsafe fn push_command_error(l: *mut lua_State, text: &[u8]) {
    let mut with_dash = Vec::with_capacity(text.len() + 1);
    if !text.starts_with(b"-") {
        with_dash.push(b'-');
    }
    with_dash.extend_from_slice(text);
    push_error_table(l, &with_dash);
    ffi::lua_pushboolean(l, 1);
    raw_set_str(l, -2, "ignore_error_stats_update");
}

unsafe fn push_array<'r>(l: *mut lua_State, items: impl Iterator<Item = &'r Reply>, resp: u8) {
    ffi::lua_newtable(l);
    for (j, item) in items.enumerate() {
        ffi::lua_pushnumber(l, (j + 1) as f64);
        push_reply(l, item, resp);
        ffi::lua_rawset(l, -3);
    }
}

/// `t[k] = v` for key and value on top (skipping keys Lua cannot store).
unsafe fn set_field(l: *mut lua_State) {
    let bad_key = match ffi::lua_type(l, -2) {
        ffi::LUA_TNIL => true,
        ffi::LUA_TNUMBER => ffi::lua_tonumber(l, -2).is_nan(),
        _ => false,
    };
    if bad_key {
        ffi::lua_pop(l, 2);
    } else {
        ffi::lua_rawset(l, -3);
    }
}

/// Replace CR and LF by spaces (Redis keeps protocol lines intact this way).
pub(crate) fn map_crlf(s: &[u8]) -> String {
    let mapped: Vec<u8> = s
        .iter()
        .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b })
        .collect();
    String::from_utf8_lossy(&mapped).into_owned()
}

/// An error reply text from a script value (`addReplyErrorFormat("-%s")`: trailing
/// CR/LF trimmed, inner ones mapped to spaces).
pub(crate) fn error_reply_text(s: &[u8]) -> String {
    let mut end = s.len();
    while end > 0 && matches!(s[end - 1], b'\r' | b'\n') {
        end -= 1;
    }
    map_crlf(&s[..end])
}

/// Convert the value on top of the stack to a reply and pop it. `script_resp` is the
/// protocol the script selected (it decides how booleans are returned). The reply is
/// a copy held outside Lua, so it counts against the VM's cap: `Err(())` when it would
/// need more than the VM has left (see `scripting::budget`).
pub(crate) unsafe fn pop_reply(
    l: *mut lua_State,
    script_resp: u8,
    nested: &mut NestedErrors,
) -> Result<Reply, ()> {
    let mut conv = Conversion {
        resp: script_resp,
        left: budget::free_bytes(l),
        over: false,
        nested: std::mem::take(nested),
    };
    let reply = conv.pop_nested(l, 0);
    *nested = conv.nested;
    if conv.over {
        Err(())
    } else {
        Ok(reply)
    }
}

/// The error tables found inside a script's reply (not at its top), which Redis counts
/// as it writes them (`luaReplyToRedisReply` → `afterErrorReply`): each error the script
/// made itself goes to errorstats, and the call is failed once for those; each error of
/// a `redis.pcall` (flagged `ignore_error_stats_update`, counted where it arose) makes
/// the call failed once more.
#[derive(Default, Debug, PartialEq)]
pub struct NestedErrors {
    /// The texts of the unflagged errors, in reply order.
    pub new: Vec<String>,
    /// How many flagged (already counted) errors.
    pub counted: u64,
}

impl NestedErrors {
    /// How many times the call counts as failed for these errors (Redis's
    /// `failed_calls`): once for any new error, once per already counted one.
    pub fn failures(&self) -> u64 {
        u64::from(!self.new.is_empty()) + self.counted
    }
}

/// Nesting beyond this is answered like Lua's own stack exhaustion ("reached lua stack
/// limit"; Redis reaches it at about 8,000 levels): it keeps the recursive encoding and
/// dropping of replies elsewhere in the server shallow.
const MAX_REPLY_DEPTH: usize = 1000;

/// Redis's reply where nesting goes past the Lua stack.
const LIMIT_ERROR: &str = "ERR reached lua stack limit";

/// One script reply being converted.
struct Conversion {
    /// The protocol the script selected.
    resp: u8,
    /// Bytes the reply may still take.
    left: usize,
    /// The reply needed more than the VM had left; the rest is skipped.
    over: bool,
    /// Error tables met below the top of the reply.
    nested: NestedErrors,
}

impl Conversion {
    /// Account for `bytes` more of the reply; false once over budget.
    fn take(&mut self, bytes: usize) -> bool {
        match self.left.checked_sub(bytes) {
            Some(left) if !self.over => {
                self.left = left;
                true
            }
            _ => {
                self.over = true;
                false
            }
        }
    }

    unsafe fn pop_nested(&mut self, l: *mut lua_State, depth: usize) -> Reply {
        // Every element counts, errors included: a wide table nested past the depth limit
        // would otherwise make an unbounded number of error replies.
        if !self.take(std::mem::size_of::<Reply>() + LIMIT_ERROR.len()) {
            ffi::lua_pop(l, 1);
            return Reply::Nil;
        }
        if depth > MAX_REPLY_DEPTH || ffi::lua_checkstack(l, 4) == 0 {
            ffi::lua_pop(l, 1);
            return Reply::err(LIMIT_ERROR);
        }
        let reply = match ffi::lua_type(l, -1) {
            ffi::LUA_TSTRING => {
                let s = string_at(l, -1).unwrap_or_default();
                if self.take(s.len()) {
                    Reply::Bulk(Bytes::copy_from_slice(s))
                } else {
                    Reply::Nil
                }
            }
            ffi::LUA_TBOOLEAN => {
                let b = ffi::lua_toboolean(l, -1) != 0;
                if self.resp == 2 {
                    if b {
                        Reply::Integer(1)
                    } else {
                        Reply::Nil
                    }
                } else {
                    Reply::Bool(b)
                }
            }
            ffi::LUA_TNUMBER => Reply::Integer(f64_to_i64_c(ffi::lua_tonumber(l, -1))),
            ffi::LUA_TTABLE => boundary::deep(|| self.table_reply(l, depth + 1)),
            _ => Reply::Nil,
        };
        ffi::lua_pop(l, 1);
        reply
    }

    /// The reply for the table on top (left on the stack).
    unsafe fn table_reply(&mut self, l: *mut lua_State, depth: usize) -> Reply {
        if only_sequence(l) {
            return self.array_reply(l, depth);
        }
        if raw_get_str(l, -1, "err") == ffi::LUA_TSTRING {
            let text = string_at(l, -1).unwrap_or_default();
            if !self.take(text.len()) {
                ffi::lua_pop(l, 1);
                return Reply::Nil;
            }
            let msg = error_reply_text(text);
            ffi::lua_pop(l, 1);
            if depth > 1 {
                let flagged = raw_get_str(l, -1, "ignore_error_stats_update") != ffi::LUA_TNIL
                    && ffi::lua_toboolean(l, -1) != 0;
                ffi::lua_pop(l, 1);
                if flagged {
                    self.nested.counted += 1;
                } else {
                    self.nested.new.push(msg.clone());
                }
            }
            return Reply::Error(msg);
        }
        ffi::lua_pop(l, 1);
        if raw_get_str(l, -1, "ok") == ffi::LUA_TSTRING {
            let text = string_at(l, -1).unwrap_or_default();
            if !self.take(text.len()) {
                ffi::lua_pop(l, 1);
                return Reply::Nil;
            }
            let s = map_crlf(text);
            ffi::lua_pop(l, 1);
            return Reply::Status(s);
        }
        ffi::lua_pop(l, 1);
        if raw_get_str(l, -1, "double") == ffi::LUA_TNUMBER {
            let d = ffi::lua_tonumber(l, -1);
            ffi::lua_pop(l, 1);
            return Reply::Double(d);
        }
        ffi::lua_pop(l, 1);
        if raw_get_str(l, -1, "big_number") == ffi::LUA_TSTRING {
            let text = string_at(l, -1).unwrap_or_default();
            if !self.take(text.len()) {
                ffi::lua_pop(l, 1);
                return Reply::Nil;
            }
            let s = map_crlf(text);
            ffi::lua_pop(l, 1);
            return Reply::BigNumber(s);
        }
        ffi::lua_pop(l, 1);
        if raw_get_str(l, -1, "verbatim_string") == ffi::LUA_TTABLE {
            let format = (raw_get_str(l, -1, "format") == ffi::LUA_TSTRING)
                .then(|| string_at(l, -1).unwrap_or_default());
            let text = (raw_get_str(l, -2, "string") == ffi::LUA_TSTRING)
                .then(|| string_at(l, -1).unwrap_or_default());
            let verbatim = match (format, text) {
                (Some(f), Some(t)) if self.take(t.len()) => Some(Reply::Verbatim(
                    verbatim_format(f),
                    Bytes::copy_from_slice(t),
                )),
                _ => None,
            };
            ffi::lua_pop(l, 3);
            if let Some(v) = verbatim {
                return v;
            }
        } else {
            ffi::lua_pop(l, 1);
        }
        if raw_get_str(l, -1, "map") == ffi::LUA_TTABLE {
            let mut pairs = Vec::new();
            ffi::lua_pushnil(l);
            while !self.over && ffi::lua_next(l, -2) != 0 {
                ffi::lua_pushvalue(l, -2);
                let k = self.pop_nested(l, depth);
                let v = self.pop_nested(l, depth);
                pairs.push((k, v));
            }
            // Cut short, the last key is still on the stack above the map.
            ffi::lua_pop(l, if self.over { 2 } else { 1 });
            return Reply::Map(pairs);
        }
        ffi::lua_pop(l, 1);
        if raw_get_str(l, -1, "set") == ffi::LUA_TTABLE {
            let mut items = Vec::new();
            ffi::lua_pushnil(l);
            while !self.over && ffi::lua_next(l, -2) != 0 {
                ffi::lua_pop(l, 1);
                ffi::lua_pushvalue(l, -1);
                items.push(self.pop_nested(l, depth));
            }
            // Cut short, the last key is still on the stack above the set.
            ffi::lua_pop(l, if self.over { 2 } else { 1 });
            return Reply::Set(items);
        }
        ffi::lua_pop(l, 1);
        self.array_reply(l, depth)
    }

    /// The array reply for the table on top (left on the stack): its items from 1 up to
    /// the first nil.
    unsafe fn array_reply(&mut self, l: *mut lua_State, depth: usize) -> Reply {
        let mut items = Vec::new();
        let mut j: c_int = 1;
        while !self.over {
            ffi::lua_rawgeti_(l, -1, j);
            if ffi::lua_type(l, -1) == ffi::LUA_TNIL {
                ffi::lua_pop(l, 1);
                break;
            }
            items.push(self.pop_nested(l, depth));
            j = match j.checked_add(1) {
                Some(n) => n,
                None => break,
            };
        }
        Reply::Array(items)
    }
}

/// Whether every key of the table on top is a positive integer up to its length (a
/// border, `#t`): then it has none of the named fields (`err`, `ok`, `map`...) and is an
/// array, found without looking each name up. `{1, 2, 3}` is; `{err = "x"}` is not.
unsafe fn only_sequence(l: *mut lua_State) -> bool {
    let n = ffi::lua_objlen(l, -1);
    if n == 0 {
        ffi::lua_pushnil(l);
    } else {
        // `t[n]` is not nil (a border), so `next` knows the key and cannot raise.
        ffi::lua_pushnumber(l, n as ffi::lua_Number);
    }
    if ffi::lua_next(l, -2) == 0 {
        return true;
    }
    ffi::lua_pop(l, 2);
    false
}

/// The verbatim format as the reply type stores it (Redis uses the first three bytes).
fn verbatim_format(f: &[u8]) -> &'static str {
    match f.get(..3) {
        Some(b"mkd") => "mkd",
        _ => "txt",
    }
}
