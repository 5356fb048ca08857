//! Lua programs generated from fuzz input, evaluated with EVAL through the real command
//! layer.
//!
//! The generator is dictionary-driven: each input byte picks the next choice (a statement
//! form, a library function, an argument from a list of edge values), so small inputs make
//! valid programs that reach the C boundary with the values that break it: counts and sizes
//! around 0, 2^31, 2^32, 2^53, 2^63, Lua's stack limit (8000), inf, nan, -0; format strings
//! with huge widths; patterns with many quantifiers; JSON and MessagePack that nest deep or
//! declare huge lengths; self-referencing tables. Every call runs under `pcall` so one error
//! does not hide the rest of the program, and the program returns its values, so reply
//! conversion is exercised too.

use bytes::Bytes;
use tollgate::engine::{apply_ops, Op, Stamp, State};
use tollgate::protocol::Reply;
use tollgate::scripting::{ScriptEngine, ScriptLimits};

/// Numbers that sit on the edges of the C types and Lua's limits.
const NUMBERS: &[&str] = &[
    "0", "1", "-1", "2", "3", "7", "8", "16", "31", "32", "33", "63", "64", "255", "256", "1000",
    "1001", "7990", "7999", "8000", "65535", "65536", "1e6", "2^31-1", "-2^31", "2^31", "2^32",
    "2^32+1", "-2^32", "2^53", "2^53+1", "2^63", "-2^63", "2^64", "1e308", "-1e308", "1/0", "-1/0",
    "0/0", "-0", "0.5", "-0.5", "1e-300", "5e-324", "2^31-2", "-2^31+1",
];

/// Small counts (for loops and repetitions that must stay cheap).
const SMALL: &[&str] = &[
    "0", "1", "2", "3", "15", "16", "17", "100", "255", "256", "1000",
];

/// Strings: plain, binary, format directives, struct formats, JSON and MessagePack.
const STRINGS: &[&str] = &[
    "''",
    "'a'",
    "'abc'",
    "'\\0'",
    "'\\255\\254'",
    "'%'",
    "'%d'",
    "'%s'",
    "'%99999d'",
    "'%99.99f'",
    "'%-099d'",
    "'%.99s'",
    "'%q'",
    "'%c%c'",
    "'%5.2s'",
    "'%#x'",
    "'%i'",
    "'i32'",
    "'i33'",
    "'c0'",
    "'bc0'",
    "'!8d'",
    "'<i4>I2'",
    "'s'",
    "'c2147483647'",
    "'i2147483648'",
    "'!3'",
    "'Xi'",
    "'[1,2,3]'",
    "'{\"a\":[1,{\"b\":null}]}'",
    "'[1e400, -1e400, 0x10, nan, inf]'",
    "'\"\\\\ud800\\\\udc00\"'",
    "'\"\\\\ud800\"'",
    "string.rep('[', 9000)",
    "string.rep('[', 900) .. string.rep(']', 900)",
    "string.rep('{\"a\":', 500) .. '1' .. string.rep('}', 500)",
    "'\\145\\192'",
    "string.rep('\\145', 9000) .. '\\192'",
    "'\\221\\255\\255\\255\\255'",
    "'\\223\\255\\255\\255\\255'",
    "'\\219\\255\\255\\255\\255'",
    "'\\207\\255\\255\\255\\255\\255\\255\\255\\255'",
    "'\\203\\127\\240\\0\\0\\0\\0\\0\\0'",
    "string.rep('\\192', 9000)",
    "string.rep('x', 70000)",
    "string.rep('\\0', 1000)",
];

/// Lua patterns, some deep.
const PATTERNS: &[&str] = &[
    "'a'",
    "'(a)'",
    "'()'",
    "'a?'",
    "'.-'",
    "'%b()'",
    "'%f[%w]'",
    "'[%a-z]+'",
    "'(((((((((((((((((((((((((((((((((a)))))))))))))))))))))))))))))))))'",
    "string.rep('a?', 6000)",
    "string.rep('a*', 4000)",
    "string.rep('(a)', 40)",
    "'%'",
    "'[a'",
    "'%1'",
];

/// Tables.
const TABLES: &[&str] = &[
    "{}",
    "{1, 2, 3}",
    "{a = 1, b = {2, 3}}",
    "{1/0, 0/0, -0}",
    "{[2^30] = 1}",
    "{[2^31] = 1}",
    "{[-1] = 1, [0] = 2}",
    "{[1.5] = 1}",
    "{{{{{{{{{{{{{{{{{{{{}}}}}}}}}}}}}}}}}}}}",
    "{err = 'x'}",
    "{ok = 'x'}",
    "{double = 1/0}",
    "{map = {a = 1, [2] = {}}}",
    "{set = {a = true}}",
    "{big_number = '123'}",
    "{verbatim_string = {format = 'txt', string = 'x'}}",
    "{cjson.null, true, false}",
];

/// What an argument slot takes.
#[derive(Clone, Copy)]
enum Arg {
    Num,
    Small,
    Str,
    Pat,
    Tab,
    Any,
}

/// Library functions with the kinds of their arguments.
const FUNCTIONS: &[(&str, &[Arg])] = {
    use Arg::*;
    &[
        ("unpack", &[Tab, Num, Num]),
        ("unpack", &[Tab, Num]),
        ("select", &[Num, Any, Any]),
        ("tostring", &[Num]),
        ("tonumber", &[Str, Num]),
        ("string.rep", &[Str, Num]),
        ("string.rep", &[Str, Small]),
        ("string.format", &[Str, Num]),
        ("string.format", &[Str, Str]),
        ("string.format", &[Str, Any, Any]),
        ("string.sub", &[Str, Num, Num]),
        ("string.byte", &[Str, Num, Num]),
        ("string.char", &[Num, Num]),
        ("string.find", &[Str, Pat, Num]),
        ("string.find", &[Str, Pat, Num, Any]),
        ("string.match", &[Str, Pat]),
        ("string.gsub", &[Str, Pat, Str, Num]),
        ("string.gmatch", &[Str, Pat]),
        ("string.reverse", &[Str]),
        ("string.upper", &[Str]),
        ("table.concat", &[Tab, Str, Num, Num]),
        ("table.insert", &[Tab, Any]),
        ("table.insert", &[Tab, Small, Any]),
        ("table.remove", &[Tab, Num]),
        ("table.sort", &[Tab]),
        ("table.getn", &[Tab]),
        ("table.maxn", &[Tab]),
        ("math.floor", &[Num]),
        ("math.fmod", &[Num, Num]),
        ("math.random", &[Num, Num]),
        ("math.frexp", &[Num]),
        ("math.ldexp", &[Num, Num]),
        ("cjson.encode", &[Any]),
        ("cjson.decode", &[Str]),
        ("cjson.encode_max_depth", &[Num]),
        ("cjson.decode_max_depth", &[Num]),
        ("cjson.encode_number_precision", &[Num]),
        ("cjson.encode_sparse_array", &[Any, Num, Num]),
        ("cjson.encode_invalid_numbers", &[Any]),
        ("cjson.decode_invalid_numbers", &[Any]),
        ("cmsgpack.pack", &[Any]),
        ("cmsgpack.pack", &[Any, Any, Any]),
        ("cmsgpack.unpack", &[Str]),
        ("cmsgpack.unpack_one", &[Str, Num]),
        ("cmsgpack.unpack_limit", &[Str, Num, Num]),
        ("struct.pack", &[Str, Num, Num]),
        ("struct.pack", &[Str, Str, Any]),
        ("struct.unpack", &[Str, Str, Num]),
        ("struct.size", &[Str]),
        ("bit.tohex", &[Num, Num]),
        ("bit.tobit", &[Num]),
        ("bit.band", &[Num, Num, Num]),
        ("bit.lshift", &[Num, Num]),
        ("bit.arshift", &[Num, Num]),
        ("bit.rol", &[Num, Num]),
        ("bit.bswap", &[Num]),
        ("redis.sha1hex", &[Any]),
        ("redis.error_reply", &[Any]),
        ("redis.status_reply", &[Any]),
        ("redis.setresp", &[Num]),
        ("redis.log", &[Num, Any, Any]),
    ]
};

/// `redis.call` / `redis.pcall` command shapes (arguments after the name).
const COMMANDS: &[(&str, &[Arg])] = {
    use Arg::*;
    &[
        ("'ECHO'", &[Any]),
        ("'SET'", &[Str, Any]),
        ("'GET'", &[Str]),
        ("'INCRBY'", &[Str, Num]),
        ("'INCRBYFLOAT'", &[Str, Num]),
        ("'EXPIRE'", &[Str, Num]),
        ("'LPUSH'", &[Str, Any, Any]),
        ("'LRANGE'", &[Str, Num, Num]),
        ("'HSET'", &[Str, Str, Any]),
        ("'HGETALL'", &[Str]),
        ("'ZADD'", &[Str, Num, Any]),
        ("'ZRANGE'", &[Str, Num, Num, Str]),
        ("'SETRANGE'", &[Str, Num, Str]),
        ("'GETRANGE'", &[Str, Num, Num]),
        ("'LIMIT.TOKEN'", &[Str, Num, Num, Str]),
        ("'CL.THROTTLE'", &[Str, Num, Num, Num, Num]),
        ("'TIME'", &[]),
        ("'DEL'", &[Any, Any]),
        ("'NOSUCHCOMMAND'", &[]),
    ]
};

/// Choices read from the input, one byte each (0 once the input is used up); the
/// `commands` target's generator reads its input the same way.
pub(crate) struct Choices<'a> {
    pub(crate) data: &'a [u8],
    pub(crate) pos: usize,
}

impl Choices<'_> {
    pub(crate) fn byte(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }

    pub(crate) fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[usize::from(self.byte()) % from.len()]
    }

    /// A choice that comes up for one byte value in `n`.
    pub(crate) fn one_in(&mut self, n: u8) -> bool {
        self.byte().is_multiple_of(n)
    }

    pub(crate) fn done(&self) -> bool {
        self.pos >= self.data.len()
    }
}

/// The program text for `data`.
pub fn program(data: &[u8]) -> String {
    let mut c = Choices { data, pos: 0 };
    let mut out = String::new();
    let mut vars = 0usize;
    while !c.done() && vars < 12 {
        let v = vars + 1;
        let stmt = match c.byte() % 8 {
            // A table that references itself, or one big string many times.
            0 => format!(
                "local v{v} = {{}} for i = 1, {} do v{v}[i] = {} end",
                c.pick(SMALL),
                if c.one_in(2) {
                    format!("v{v}")
                } else {
                    value(&mut c, Arg::Any, vars)
                }
            ),
            // A redis.call / redis.pcall.
            1 => {
                let (name, args) = c.pick(COMMANDS);
                let mut call = name.to_string();
                for &a in args {
                    call.push_str(", ");
                    call.push_str(&value(&mut c, a, vars));
                }
                let f = if c.one_in(2) { "call" } else { "pcall" };
                format!("local ok{v}, v{v} = pcall(redis.{f}, {call})")
            }
            // The gmatch iterator, called.
            2 => format!(
                "local ok{v}, v{v} = pcall(function() return string.gmatch({}, {})() end)",
                value(&mut c, Arg::Str, vars),
                value(&mut c, Arg::Pat, vars)
            ),
            // A library call.
            _ => {
                let (name, args) = c.pick(FUNCTIONS);
                let args: Vec<String> = args.iter().map(|&a| value(&mut c, a, vars)).collect();
                format!("local ok{v}, v{v} = pcall({name}, {})", args.join(", "))
            }
        };
        out.push_str(&stmt);
        out.push('\n');
        vars += 1;
    }
    let ret = match (vars, c.byte() % 3) {
        (0, _) => "return nil".to_string(),
        (n, 0) => format!("return v{n}"),
        (n, 1) => format!(
            "return {{{}}}",
            (1..=n)
                .map(|i| format!("v{i}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        (n, _) => format!("return cjson.encode({{v{n}}})"),
    };
    out.push_str(&ret);
    out
}

/// An argument of kind `kind`; sometimes an earlier variable instead.
fn value(c: &mut Choices, kind: Arg, vars: usize) -> String {
    if vars > 0 && c.one_in(5) {
        return format!("v{}", usize::from(c.byte()) % vars + 1);
    }
    match kind {
        Arg::Num => c.pick(NUMBERS).to_string(),
        Arg::Small => c.pick(SMALL).to_string(),
        Arg::Str => c.pick(STRINGS).to_string(),
        Arg::Pat => c.pick(PATTERNS).to_string(),
        Arg::Tab => c.pick(TABLES).to_string(),
        Arg::Any => match c.byte() % 6 {
            0 => c.pick(NUMBERS).to_string(),
            1 => c.pick(STRINGS).to_string(),
            2 => c.pick(TABLES).to_string(),
            3 => "nil".to_string(),
            4 => "true".to_string(),
            _ => "cjson.null".to_string(),
        },
    }
}

/// A fresh state whose Lua VMs have a 32 MiB cap (the server's is 256 MiB; a smaller cap
/// reaches "not enough memory" sooner, so runs stay fast). The `commands` target's states
/// too: no script there loops forever (nothing would kill it in-process: SCRIPT KILL comes
/// from another client).
pub fn state() -> State {
    let mut state = State::default();
    state.scripts = ScriptEngine::new(ScriptLimits {
        memory_bytes: 32 << 20,
    });
    state
}

/// Whether a reply (or anything nested in it) reports an internal error: a panic the
/// apply path or a C function caught.
pub(crate) fn internal_error(reply: &Reply) -> Option<&str> {
    match reply {
        Reply::Error(e) if e.contains("internal error") => Some(e),
        Reply::Array(items) | Reply::Set(items) => items.iter().find_map(internal_error),
        Reply::Map(pairs) => pairs
            .iter()
            .find_map(|(k, v)| internal_error(k).or_else(|| internal_error(v))),
        _ => None,
    }
}

/// Evaluate the program for `data` (the first byte picks RESP2 or RESP3 for the client).
pub fn check(data: &[u8]) {
    let Some((&head, rest)) = data.split_first() else {
        return;
    };
    let script = program(rest);
    if std::env::var_os("TOLLGATE_FUZZ_PRINT").is_some() {
        eprintln!("--- program (RESP{}):\n{script}\n---", 2 + (head & 1));
    }
    let resp = if head & 1 == 0 { 2 } else { 3 };
    let mut state = state();
    let ops = [
        Op::Command(
            vec![
                Bytes::from_static(b"EVAL"),
                Bytes::from(script.clone()),
                Bytes::from_static(b"0"),
            ],
            None,
        ),
        // The engine still works afterwards.
        Op::Command(
            vec![
                Bytes::from_static(b"EVAL"),
                Bytes::from_static(b"return redis.call('INCR', 'fuzz:after')"),
                Bytes::from_static(b"0"),
            ],
            None,
        ),
    ];
    let stamp = Stamp {
        now_us: 1_000_000_000,
        seed: 1,
    };
    let result = apply_ops(&mut state, 0, resp, &ops, stamp);
    let replies = result.replies.expect("no WATCH, so replies");
    if let Some(e) = replies.iter().find_map(internal_error) {
        panic!("internal error for script:\n{script}\n--\n{e}");
    }
    assert_eq!(replies[1], Reply::Integer(1), "after script:\n{script}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_are_valid_lua_that_runs() {
        // A few fixed inputs: every statement form and the three return forms.
        for data in [
            &b"\x00"[..],
            b"\x00\x03\x00\x05\x01\x02",
            b"\x01\x00\x07\x01\x01\x02\x03\x04\x05\x06\x07\x08\x01",
            b"\x00\x01\x04\x01\x02\x03\x04\x05\x06\x07\x02",
        ] {
            check(data);
        }
    }
}
