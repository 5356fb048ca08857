//! Sequences of keyspace commands generated from fuzz input, applied with
//! `engine::apply_ops` on two fresh in-process states.
//!
//! The generator is dictionary-driven like `lua`: each input byte picks the next choice
//! (a command of the engine's own table, one of its options, an argument from a list of
//! edge values), so small inputs make commands that pass the arity and syntax checks and
//! reach the code behind them. Keys come from five names, so types collide (WRONGTYPE
//! paths) and each command sees the data the others left. Arguments are edge numbers (0,
//! -1, 2^31, 2^63-1, -2^63, 2^64, inf, nan, "-0", "", " 1", "0x10"), option keywords, lex
//! and score ranges, glob patterns, binary strings, small Lua scripts and function
//! libraries, and DUMP payloads (real ones, the last DUMP reply of the run, and corrupted
//! ones, some with a valid checksum so the decoder runs on them).
//!
//! A run is up to 30 commands in batches (a pipeline's batch, or a MULTI/EXEC block: a
//! batch whose commands run back to back under one stamp), each batch with its own
//! `Stamp` (time moves 0 ms to a day between batches, so keys expire and limiter windows
//! roll); some batches also carry what a cluster leader proposes besides commands (an
//! expiry purge, an eviction, the out-of-memory marker). It checks, each a panic:
//! 1. no reply is an "internal error" (the apply path turns a panic into one);
//! 2. a second fresh state given the same batches and stamps answers byte-identical
//!    replies and ends with a byte-identical keyspace snapshot (`store::snapshot::encode`:
//!    every key, value, order, encoding and deadline), the "replicas never diverge" rule;
//! 3. a third state that installs the second's Raft snapshot (`ReplicatedState`'s
//!    `snapshot` and `restore`: keyspace, scripts, functions, users) at a batch boundary
//!    the first input byte picks, then applies the remaining batches, answers the same
//!    (but for OBJECT IDLETIME and FREQ, which are each node's own) and ends with the same
//!    keyspace: a replica that caught up from a snapshot;
//! 4. the engine still answers a plain command afterwards.
//!
//! Memory stays bounded by the dictionaries, not by a setting: the engine's string-size
//! check is a constant (512 MB, Redis's `proto-max-bulk-len` default), so byte offsets
//! (SETRANGE), bit offsets (SETBIT, BITFIELD) stay below 4 MB of string except for the
//! values just past the limit that must be refused, and negative counts (SRANDMEMBER,
//! HRANDFIELD, ZRANDMEMBER repeat members |count| times, in Redis too) stay small except
//! for -2^63, which must be refused.

use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use parking_lot::Mutex;
use tollgate::command::{self, CommandSpec};
use tollgate::engine::replicated::ReplicatedState;
use tollgate::engine::{apply_ops, Op, Stamp, State};
use tollgate::persistence::rdb::crc64::crc64;
use tollgate::protocol::Reply;
use tollgate_raft::StateMachine;

/// Key names: few, so that commands meet each other's data and types.
const KEYS: &[&str] = &["a", "b", "c", "{a}d", "e"];

/// Numbers on the edges of i64, u64, i32, f64 and Redis's parsers.
const NUMBERS: &[&str] = &[
    "0",
    "1",
    "-1",
    "2",
    "3",
    "10",
    "-0",
    "",
    " 1",
    "1 ",
    "0x10",
    "+1",
    "01",
    "1.0",
    "1e3",
    "2147483647",
    "2147483648",
    "-2147483648",
    "4294967296",
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775808",
    "-9223372036854775809",
    "18446744073709551615",
    "18446744073709551616",
    "inf",
    "-inf",
    "+inf",
    "nan",
    "1e308",
    "-1e308",
    "1e309",
    "4.5",
    "-2.5",
    "0.1",
    "5e-324",
    "abc",
];

/// Counts and indexes: small ones, and huge ones that every command clamps or refuses.
/// Negative ones stay small (a negative RANDMEMBER count repeats members |count| times).
const COUNTS: &[&str] = &[
    "0",
    "1",
    "2",
    "3",
    "5",
    "-1",
    "-2",
    "-3",
    "-7",
    "10",
    "100",
    "1000",
    "2147483647",
    "2147483648",
    "4294967296",
    "9223372036854775807",
    "-9223372036854775808",
    "-9223372036854775807",
    "18446744073709551616",
    "-0",
    "",
    "x",
    "1.5",
];

/// Scores and floats.
const FLOATS: &[&str] = &[
    "0",
    "1",
    "-1",
    "2",
    "1.5",
    "-2.5",
    "3",
    "inf",
    "-inf",
    "+inf",
    "nan",
    "1e308",
    "-1e308",
    "1e309",
    "-0",
    "0.1",
    "5e-324",
    "",
    " 1",
    "0x10",
    "1e",
    "9007199254740993",
    "abc",
];

/// Values: numbers as strings, binary, empty, around the listpack value limit (64).
const VALUES: &[&str] = &[
    "x",
    "y",
    "1",
    "-5",
    "3.14",
    "",
    "9223372036854775807",
    "9223372036854775808",
    "-0",
    "inf",
    "\0\u{1}\u{7f}",
    "\u{ff}\u{fe}",
    "hello world",
    "0123456789012345678901234567890123456789012345678901234567890123456789",
    "12345678901234567890",
    "a\r\nb",
    "*",
];

/// Members and fields: a few names so that adds, removals and lookups meet.
const MEMBERS: &[&str] = &[
    "x",
    "y",
    "z",
    "1",
    "2",
    "-1",
    "",
    "0123456789012345678901234567890123456789012345678901234567890123456789",
    "\0",
    "a",
];

/// Glob patterns (KEYS, SCAN MATCH, SORT BY/GET, PUBSUB).
const PATTERNS: &[&str] = &[
    "*", "a*", "?", "[a-c]", "[^a]", "\\", "[", "[a-", "*{a}*", "\\*", "*x*", "#", "a->x", "*->y",
    "nosuch*", "",
];

/// Lex range bounds.
const LEX: &[&str] = &[
    "-", "+", "[a", "(a", "[x", "(z", "[", "(", "a", "[\u{ff}", "-x", "+x",
];

/// Score range bounds.
const RANGES: &[&str] = &[
    "0", "1", "-1", "(1", "(0", "-inf", "+inf", "(-inf", "(+inf", "inf", "nan", "(nan", "1e308",
    "(", "2.5", "x",
];

/// Byte offsets of SETRANGE: up to 4 MB, then the ones just past the 512 MB limit.
const OFFSETS: &[&str] = &[
    "0",
    "1",
    "5",
    "63",
    "64",
    "100",
    "65535",
    "4194303",
    "-1",
    "536870912",
    "2147483648",
    "9223372036854775807",
    "x",
];

/// Bit offsets of SETBIT/GETBIT: up to 4 MB of string, then the ones past 2^32 - 1.
const BIT_OFFSETS: &[&str] = &[
    "0",
    "1",
    "7",
    "8",
    "63",
    "100",
    "1000",
    "33554431",
    "-1",
    "4294967296",
    "9223372036854775807",
    "x",
];

/// BITFIELD types.
const BF_TYPES: &[&str] = &[
    "u8", "i8", "u1", "i1", "u16", "i32", "i64", "u63", "u64", "i65", "u0", "x8", "u", "U8",
];

/// BITFIELD offsets (`#n` counts in type widths: at most 64 * 100000 bits).
const BF_OFFSETS: &[&str] = &[
    "0",
    "1",
    "7",
    "#0",
    "#1",
    "#100000",
    "100",
    "33554431",
    "-1",
    "#-1",
    "4294967296",
    "#",
    "x",
];

/// Expiry amounts (seconds or milliseconds, relative or absolute).
const TIMES: &[&str] = &[
    "0",
    "1",
    "-1",
    "100",
    "3600",
    "1000000",
    "1000001",
    "1700000000",
    "1000000000000",
    "9223372036854775807",
    "9223372036854775",
    "-9223372036854775808",
    "x",
];

/// Limiter durations.
const DURATIONS: &[&str] = &[
    "1s",
    "100ms",
    "1m",
    "1h",
    "1d",
    "10",
    "0",
    "-1s",
    "9223372036854775807ms",
    "9223372036854775807d",
    "1x",
    "",
    "ms",
];

/// Database indexes.
const DBS: &[&str] = &["0", "1", "15", "16", "-1", "x"];

/// numkeys of EVAL, FCALL, ZUNION, LMPOP, ... (the keys follow as arguments).
const NUMKEYS: &[&str] = &["0", "1", "2", "3", "-1", "100", "x"];

/// Lua scripts for EVAL: the usual calls, replies of every type, errors, and what must
/// not depend on the node (random numbers, time, table iteration over string and number
/// keys, and over keys that are tables, functions or coroutines: this target's first
/// finding, fixed in Tollgate's Lua, which hashes and prints such objects by a creation
/// id instead of their address, vendor/lua-src/TOLLGATE.md).
const SCRIPTS: &[&str] = &[
    "return redis.call('GET', KEYS[1])",
    "return redis.call('INCR', KEYS[1])",
    "return redis.call('SET', KEYS[1], ARGV[1])",
    "return redis.pcall('LPUSH', KEYS[1], ARGV[1])",
    "return {1, 'two', {3, 4.5}, true, false}",
    "return redis.error_reply('MY err')",
    "return redis.status_reply('FINE')",
    "redis.setresp(3) return redis.call('HGETALL', KEYS[1])",
    "redis.setresp(3) return redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')",
    "return math.random(1, 1000000)",
    "return redis.call('TIME')",
    "return redis.call('RANDOMKEY')",
    "return redis.call('SPOP', KEYS[1])",
    "return redis.call('SRANDMEMBER', KEYS[1], -5)",
    "local r = {} for k in pairs({x = 1, y = 2, zz = 3, [1.5] = 4}) do r[#r + 1] = tostring(k) end return r",
    "local t = {} for i = 1, 8 do t[{}] = i end for _, v in pairs(t) do redis.call('RPUSH', KEYS[1], v) end return 1",
    "local t = {} for i = 1, 5 do t[function() return i end] = i t[coroutine.create(function() end)] = -i end local r = {} for k, v in pairs(t) do r[#r + 1] = tostring(k) .. '=' .. v end return r",
    "return redis.call('DEL', KEYS[1], KEYS[2])",
    "return redis.call('EVAL', 'return 1', 0)",
    "error('boom')",
    "return tostring(0/0)",
    "return 1/0",
    "return redis.call('LIMIT.TOKEN', KEYS[1], 10, 1, '1s')",
    "return redis.call('CL.THROTTLE', KEYS[1], 5, 10, 60)",
    "return redis.sha1hex(ARGV[1])",
    "return cjson.encode({a = {1, 2}, b = 'x'})",
    "",
    "return",
    "return redis.call('OBJECT', 'ENCODING', KEYS[1])",
    "return redis.call('SORT', KEYS[1], 'ALPHA')",
];

/// Scripts that fill a key past the listpack and intset limits (128 entries, 512
/// integers), so the large encodings and the conversions to them are reached too.
const FILLS: &[&str] = &[
    "for i = 1, 600 do redis.call('SADD', KEYS[1], i) end return redis.call('SCARD', KEYS[1])",
    "for i = 1, 200 do redis.call('ZADD', KEYS[1], i / 3, 'm' .. i) end return 1",
    "for i = 1, 200 do redis.call('HSET', KEYS[1], 'f' .. i, i) end return 1",
    "for i = 1, 200 do redis.call('RPUSH', KEYS[1], i) end return 1",
    "for i = 1, 200 do redis.call('PFADD', KEYS[1], i) end return 1",
    "for i = 1, 200 do redis.call('SADD', KEYS[1], 'm' .. i) end return 1",
];

/// Scripts that run the command given as their arguments.
const WRAPPERS: &[&str] = &[
    "return redis.pcall(unpack(ARGV))",
    "redis.setresp(3) return redis.pcall(unpack(ARGV))",
    "return {redis.pcall(unpack(ARGV))}",
    "redis.setresp(3) local r = redis.pcall(unpack(ARGV)) return cjson.encode({r})",
];

/// Function libraries for FUNCTION LOAD.
const LIBRARIES: &[&str] = &[
    "#!lua name=lib\nredis.register_function('f', function(keys, args) return redis.call('GET', keys[1]) end)",
    "#!lua name=lib\nredis.register_function('f', function(keys, args) return redis.call('INCR', keys[1]) end)\nredis.register_function{function_name='g', callback=function(keys, args) return math.random() end, flags={'no-writes'}}",
    "#!lua name=lib2\nredis.register_function('h', function(keys, args) return {1, {2, 'x'}} end)",
    "#!lua name=lib3\nlocal t = {} for i = 1, 6 do t[{}] = i end\nredis.register_function('k', function(keys, args) local r = {} for _, v in pairs(t) do r[#r + 1] = v end redis.call('SET', keys[1], table.concat(r, ',')) return r end)",
    "#!lua name=lib\nerror('x')",
    "#!lua name=bad\nreturn 1",
    "#!lua\nredis.register_function('f', function() end)",
    "x",
];

/// Function names for FCALL.
const FUNCTIONS: &[&str] = &["f", "g", "h", "i", "nosuch", ""];

/// Keywords that may come anywhere (arguments picked with `any`).
const KEYWORDS: &[&str] = &[
    "NX",
    "XX",
    "GT",
    "LT",
    "CH",
    "INCR",
    "WITHSCORES",
    "LIMIT",
    "BYSCORE",
    "BYLEX",
    "REV",
    "COUNT",
    "MATCH",
    "TYPE",
    "EX",
    "PX",
    "EXAT",
    "PXAT",
    "KEEPTTL",
    "GET",
    "WEIGHTS",
    "AGGREGATE",
    "SUM",
    "MIN",
    "MAX",
    "LEFT",
    "RIGHT",
    "BEFORE",
    "AFTER",
    "BY",
    "ALPHA",
    "STORE",
    "ASC",
    "DESC",
    "OVERFLOW",
    "WRAP",
    "SAT",
    "FAIL",
    "INCRBY",
    "SET",
    "REPLACE",
    "ABSTTL",
    "IDLETIME",
    "FREQ",
    "DB",
    "WITHVALUES",
    "RANK",
    "MAXLEN",
    "COST",
    "PRECISION",
    "BYTE",
    "BIT",
    "PERSIST",
    "IDX",
    "LEN",
    "MINMATCHLEN",
    "WITHMATCHLEN",
    "FLUSH",
    "ASYNC",
    "SYNC",
    "ENCODING",
    "FREQ",
    "REFCOUNT",
    "HELP",
    "STRING",
    "LIST",
    "ZSET",
    "HASH",
];

/// Command shapes: the name, the fixed arguments, and options of which 0 to 3 follow.
///
/// A shape is words separated by spaces. A lower-case word is a kind of argument (see
/// `arg`); anything else is a literal. `A|B` picks one of its alternatives; `a/b` is a
/// group; a trailing `+` repeats the word 1 to 3 times, `*` 0 to 3 times.
const SHAPES: &[(&str, &str, &[&str])] = &[
    // Strings.
    ("GET", "k", &[]),
    (
        "SET",
        "k v",
        &["NX|XX", "GET", "EX|PX|EXAT|PXAT t", "KEEPTTL", "EX|PX t"],
    ),
    ("SETNX", "k v", &[]),
    ("SETEX", "k t v", &[]),
    ("PSETEX", "k t v", &[]),
    ("GETSET", "k v", &[]),
    ("GETDEL", "k", &[]),
    ("GETEX", "k", &["EX|PX|EXAT|PXAT t", "PERSIST"]),
    ("MGET", "k+", &[]),
    ("MSET", "k/v+", &[]),
    ("MSETNX", "k/v+", &[]),
    ("INCR", "k", &[]),
    ("DECR", "k", &[]),
    ("INCRBY", "k n", &[]),
    ("DECRBY", "k n", &[]),
    ("INCRBYFLOAT", "k f", &[]),
    ("APPEND", "k v", &[]),
    ("STRLEN", "k", &[]),
    ("GETRANGE", "k n n", &[]),
    ("SUBSTR", "k n n", &[]),
    ("SETRANGE", "k off v", &[]),
    (
        "LCS",
        "k k",
        &["LEN", "IDX", "MINMATCHLEN c", "WITHMATCHLEN"],
    ),
    // Bitmaps.
    ("SETBIT", "k bitoff 0|1|2|x", &[]),
    ("GETBIT", "k bitoff", &[]),
    ("BITCOUNT", "k", &["n n", "n n BYTE|BIT"]),
    ("BITPOS", "k 0|1|2", &["n", "n n", "n n BYTE|BIT"]),
    ("BITOP", "AND|OR|XOR|NOT|NAND k k+", &[]),
    (
        "BITFIELD",
        "k",
        &[
            "GET bft bfo",
            "SET bft bfo n",
            "INCRBY bft bfo n",
            "OVERFLOW WRAP|SAT|FAIL|x",
            "SET bft bfo n",
        ],
    ),
    (
        "BITFIELD_RO",
        "k",
        &["GET bft bfo", "GET bft bfo", "SET bft bfo n"],
    ),
    // HyperLogLog.
    ("PFADD", "k m*", &[]),
    ("PFCOUNT", "k+", &[]),
    ("PFMERGE", "k k*", &[]),
    ("PFDEBUG", "GETREG|DECODE|ENCODING|TODENSE|x k", &[]),
    // Keys.
    ("DEL", "k+", &[]),
    ("UNLINK", "k+", &[]),
    ("EXISTS", "k+", &[]),
    ("TOUCH", "k+", &[]),
    ("TYPE", "k", &[]),
    ("EXPIRE", "k t", &["NX|XX|GT|LT"]),
    ("PEXPIRE", "k t", &["NX|XX|GT|LT"]),
    ("EXPIREAT", "k t", &["NX|XX|GT|LT"]),
    ("PEXPIREAT", "k t", &["NX|XX|GT|LT"]),
    ("TTL", "k", &[]),
    ("PTTL", "k", &[]),
    ("EXPIRETIME", "k", &[]),
    ("PEXPIRETIME", "k", &[]),
    ("PERSIST", "k", &[]),
    ("RENAME", "k k", &[]),
    ("RENAMENX", "k k", &[]),
    ("KEYS", "p", &[]),
    (
        "SCAN",
        "n",
        &["MATCH p", "COUNT c", "TYPE STRING|LIST|HASH|SET|ZSET|x"],
    ),
    ("RANDOMKEY", "", &[]),
    ("DBSIZE", "", &[]),
    ("FLUSHDB", "", &["ASYNC|SYNC"]),
    ("FLUSHALL", "", &["ASYNC|SYNC"]),
    ("SWAPDB", "db db", &[]),
    ("MOVE", "k db", &[]),
    ("COPY", "k k", &["DB db", "REPLACE"]),
    ("SELECT", "db", &[]),
    ("DUMP", "k", &[]),
    (
        "RESTORE",
        "k t payload",
        &["REPLACE", "ABSTTL", "IDLETIME n", "FREQ n"],
    ),
    ("OBJECT", "ENCODING|REFCOUNT|IDLETIME|FREQ k", &[]),
    ("OBJECT", "HELP", &[]),
    (
        "SORT",
        "k",
        &["ASC|DESC", "ALPHA", "LIMIT c c", "BY p", "GET p", "STORE k"],
    ),
    (
        "SORT_RO",
        "k",
        &["ASC|DESC", "ALPHA", "LIMIT c c", "BY p", "GET p"],
    ),
    // Hashes.
    ("HSET", "k m/v+", &[]),
    ("HSETNX", "k m v", &[]),
    ("HMSET", "k m/v+", &[]),
    ("HGET", "k m", &[]),
    ("HMGET", "k m+", &[]),
    ("HGETALL", "k", &[]),
    ("HKEYS", "k", &[]),
    ("HVALS", "k", &[]),
    ("HLEN", "k", &[]),
    ("HEXISTS", "k m", &[]),
    ("HSTRLEN", "k m", &[]),
    ("HDEL", "k m+", &[]),
    ("HINCRBY", "k m n", &[]),
    ("HINCRBYFLOAT", "k m f", &[]),
    ("HSCAN", "k n", &["MATCH p", "COUNT c"]),
    ("HRANDFIELD", "k", &["c", "c WITHVALUES"]),
    // Lists.
    ("LPUSH", "k v+", &[]),
    ("RPUSH", "k v+", &[]),
    ("LPUSHX", "k v+", &[]),
    ("RPUSHX", "k v+", &[]),
    ("LPOP", "k", &["c"]),
    ("RPOP", "k", &["c"]),
    ("LLEN", "k", &[]),
    ("LINDEX", "k c", &[]),
    ("LRANGE", "k c c", &[]),
    ("LSET", "k c v", &[]),
    ("LINSERT", "k BEFORE|AFTER|x v v", &[]),
    ("LREM", "k c v", &[]),
    ("LTRIM", "k c c", &[]),
    ("LPOS", "k v", &["RANK c", "COUNT c", "MAXLEN c"]),
    ("LMOVE", "k k LEFT|RIGHT LEFT|RIGHT", &[]),
    ("RPOPLPUSH", "k k", &[]),
    ("LMPOP", "nk k+ LEFT|RIGHT", &["COUNT c"]),
    // Blocking commands (in the engine their non-blocking form runs).
    ("BLPOP", "k+ f", &[]),
    ("BRPOP", "k+ f", &[]),
    ("BRPOPLPUSH", "k k f", &[]),
    ("BLMOVE", "k k LEFT|RIGHT LEFT|RIGHT f", &[]),
    ("BLMPOP", "f nk k+ LEFT|RIGHT", &["COUNT c"]),
    ("BZPOPMIN", "k+ f", &[]),
    ("BZPOPMAX", "k+ f", &[]),
    ("BZMPOP", "f nk k+ MIN|MAX", &["COUNT c"]),
    // Sets.
    ("SADD", "k m+", &[]),
    ("SREM", "k m+", &[]),
    ("SCARD", "k", &[]),
    ("SISMEMBER", "k m", &[]),
    ("SMISMEMBER", "k m+", &[]),
    ("SMEMBERS", "k", &[]),
    ("SMOVE", "k k m", &[]),
    ("SPOP", "k", &["c"]),
    ("SRANDMEMBER", "k", &["c"]),
    ("SINTER", "k+", &[]),
    ("SUNION", "k+", &[]),
    ("SDIFF", "k+", &[]),
    ("SINTERSTORE", "k k+", &[]),
    ("SUNIONSTORE", "k k+", &[]),
    ("SDIFFSTORE", "k k+", &[]),
    ("SINTERCARD", "nk k+", &["LIMIT c"]),
    ("SSCAN", "k n", &["MATCH p", "COUNT c"]),
    // Sorted sets.
    ("ZADD", "k f/m+", &["NX|XX", "GT|LT", "CH", "INCR"]),
    ("ZINCRBY", "k f m", &[]),
    ("ZREM", "k m+", &[]),
    ("ZCARD", "k", &[]),
    ("ZSCORE", "k m", &[]),
    ("ZMSCORE", "k m+", &[]),
    ("ZRANK", "k m", &["WITHSCORE"]),
    ("ZREVRANK", "k m", &["WITHSCORE"]),
    ("ZCOUNT", "k r r", &[]),
    ("ZLEXCOUNT", "k lex lex", &[]),
    ("ZRANGE", "k c c", &["REV", "WITHSCORES", "LIMIT c c"]),
    (
        "ZRANGE",
        "k r r BYSCORE",
        &["REV", "WITHSCORES", "LIMIT c c"],
    ),
    ("ZRANGE", "k lex lex BYLEX", &["REV", "LIMIT c c"]),
    (
        "ZRANGESTORE",
        "k k c c",
        &["REV", "BYSCORE", "BYLEX", "LIMIT c c"],
    ),
    ("ZRANGESTORE", "k k r r BYSCORE", &["REV", "LIMIT c c"]),
    ("ZREVRANGE", "k c c", &["WITHSCORES"]),
    ("ZRANGEBYSCORE", "k r r", &["WITHSCORES", "LIMIT c c"]),
    ("ZREVRANGEBYSCORE", "k r r", &["WITHSCORES", "LIMIT c c"]),
    ("ZRANGEBYLEX", "k lex lex", &["LIMIT c c"]),
    ("ZREVRANGEBYLEX", "k lex lex", &["LIMIT c c"]),
    ("ZREMRANGEBYSCORE", "k r r", &[]),
    ("ZREMRANGEBYLEX", "k lex lex", &[]),
    ("ZREMRANGEBYRANK", "k c c", &[]),
    ("ZPOPMIN", "k", &["c"]),
    ("ZPOPMAX", "k", &["c"]),
    ("ZMPOP", "nk k+ MIN|MAX", &["COUNT c"]),
    ("ZRANDMEMBER", "k", &["c", "c WITHSCORES"]),
    ("ZSCAN", "k n", &["MATCH p", "COUNT c"]),
    (
        "ZUNIONSTORE",
        "k nk k+",
        &["WEIGHTS f+", "AGGREGATE SUM|MIN|MAX|x"],
    ),
    (
        "ZINTERSTORE",
        "k nk k+",
        &["WEIGHTS f+", "AGGREGATE SUM|MIN|MAX|x"],
    ),
    ("ZDIFFSTORE", "k nk k+", &[]),
    (
        "ZUNION",
        "nk k+",
        &["WEIGHTS f+", "AGGREGATE SUM|MIN|MAX", "WITHSCORES"],
    ),
    (
        "ZINTER",
        "nk k+",
        &["WEIGHTS f+", "AGGREGATE SUM|MIN|MAX", "WITHSCORES"],
    ),
    ("ZDIFF", "nk k+", &["WITHSCORES"]),
    ("ZINTERCARD", "nk k+", &["LIMIT c"]),
    // Geo.
    ("GEOADD", "k lon/lat/m+", &["NX|XX", "CH"]),
    ("GEOPOS", "k m*", &[]),
    ("GEODIST", "k m m", &["M|KM|FT|MI|x"]),
    ("GEOHASH", "k m*", &[]),
    (
        "GEORADIUS",
        "k lon lat f M|KM|FT|MI",
        &[
            "WITHCOORD",
            "WITHDIST",
            "WITHHASH",
            "COUNT c",
            "ASC|DESC",
            "STORE|STOREDIST k",
        ],
    ),
    (
        "GEORADIUS_RO",
        "k lon lat f M|KM",
        &["WITHCOORD", "WITHDIST", "COUNT c ANY", "ASC|DESC"],
    ),
    (
        "GEORADIUSBYMEMBER",
        "k m f M|KM",
        &["WITHCOORD", "WITHDIST", "COUNT c", "STORE|STOREDIST k"],
    ),
    (
        "GEORADIUSBYMEMBER_RO",
        "k m f M|KM",
        &["WITHDIST", "COUNT c"],
    ),
    (
        "GEOSEARCH",
        "k FROMMEMBER/m|FROMLONLAT/lon/lat BYRADIUS/f/M|BYBOX/f/f/KM",
        &[
            "ASC|DESC",
            "COUNT c",
            "COUNT c ANY",
            "WITHCOORD",
            "WITHDIST",
            "WITHHASH",
        ],
    ),
    (
        "GEOSEARCHSTORE",
        "k k FROMMEMBER/m|FROMLONLAT/lon/lat BYRADIUS/f/M|BYBOX/f/f/KM",
        &["ASC|DESC", "COUNT c", "STOREDIST"],
    ),
    // Scripting.
    ("EVAL", "script nk k* v*", &[]),
    ("EVAL", "fill 1 k", &[]),
    ("EVAL_RO", "script nk k* v*", &[]),
    ("EVALSHA", "sha nk k* v*", &[]),
    ("EVALSHA_RO", "sha nk k* v*", &[]),
    ("SCRIPT", "LOAD script", &[]),
    ("SCRIPT", "EXISTS sha+", &[]),
    ("SCRIPT", "FLUSH", &["ASYNC|SYNC"]),
    ("FUNCTION", "LOAD lib", &[]),
    ("FUNCTION", "LOAD REPLACE lib", &[]),
    ("FUNCTION", "DELETE lib|lib2|nosuch", &[]),
    ("FUNCTION", "LIST", &["WITHCODE", "LIBRARYNAME p"]),
    ("FUNCTION", "FLUSH", &["ASYNC|SYNC"]),
    ("FUNCTION", "DUMP", &[]),
    ("FUNCTION", "RESTORE payload", &["FLUSH|APPEND|REPLACE"]),
    ("FCALL", "fn nk k* v*", &[]),
    ("FCALL_RO", "fn nk k* v*", &[]),
    // Limiters.
    ("LIMIT.FIXED", "k n dur", &["COST n"]),
    ("LIMIT.SLIDING", "k n dur", &["COST n", "PRECISION n"]),
    ("LIMIT.LOG", "k c dur", &["COST c"]),
    ("LIMIT.TOKEN", "k n n dur", &["COST n"]),
    ("LIMIT.LEAKY", "k n n dur", &["COST n"]),
    ("LIMIT.GCRA", "k n n dur", &["COST n"]),
    (
        "LIMIT.ALL",
        "FIXED/k/n/dur|SLIDING/k/n/dur|LOG/k/c/dur|TOKEN/k/n/n/dur|GCRA/k/n/n/dur+",
        &["COST n", "LEAKY k n n dur", "PRECISION n"],
    ),
    ("LIMIT.ACQUIRE", "k c t m", &[]),
    ("LIMIT.RELEASE", "k m", &[]),
    ("LIMIT.RESET", "k", &[]),
    ("LIMIT.INFO", "k", &[]),
    ("CL.THROTTLE", "k n n n", &["n"]),
    (
        "INCREX",
        "k",
        &[
            "BYINT n",
            "BYFLOAT f",
            "LBOUND n",
            "UBOUND n",
            "SATURATE",
            "EX|PX|EXAT|PXAT t",
            "PERSIST",
            "ENX",
        ],
    ),
    // Server and pub/sub commands the engine applies.
    ("PING", "", &["v"]),
    ("ECHO", "v", &[]),
    ("TIME", "", &[]),
    ("PUBLISH", "k v", &[]),
    ("SPUBLISH", "k v", &[]),
];

/// Commands in the engine's table the generator leaves out, with the reason.
pub const LEFT_OUT: &[(&str, &str)] = &[
    ("debug|panic-on-apply", "panics on purpose"),
    ("multi", "MULTI/EXEC blocks are batches of their own"),
    (
        "pfselftest",
        "takes no argument and runs Redis's fixed self-test: about a second per call",
    ),
];

/// DUMP payloads of real values (built once on a fresh state).
fn payloads() -> &'static [Bytes] {
    static PAYLOADS: OnceLock<Vec<Bytes>> = OnceLock::new();
    PAYLOADS.get_or_init(|| {
        let mut state = state();
        let long = "v".repeat(70);
        let setup: &[&[&str]] = &[
            &["SET", "s", "hello"],
            &["SET", "i", "12345"],
            &["SET", "big", "-9223372036854775808"],
            &["RPUSH", "l", "a", "1", "b"],
            &["RPUSH", "ll", &long, "x"],
            &["HSET", "h", "f", "1", "g", "x"],
            &["HSET", "hh", "f", &long],
            &["SADD", "si", "1", "2", "-70000"],
            &["SADD", "ss", "a", "b"],
            &["ZADD", "z", "1", "a", "2.5", "b", "-inf", "c"],
            &["ZADD", "zz", "1", &long],
            &["PFADD", "p", "a", "b", "c"],
            &["LIMIT.TOKEN", "t", "10", "1", "1s"],
            &["FUNCTION", "LOAD", LIBRARIES[0]],
        ];
        let mut ops: Vec<Op> = setup.iter().map(|c| command_op(c)).collect();
        let dumps = ops.len();
        for k in [
            "s", "i", "big", "l", "ll", "h", "hh", "si", "ss", "z", "zz", "p", "t",
        ] {
            ops.push(command_op(&["DUMP", k]));
        }
        ops.push(command_op(&["FUNCTION", "DUMP"]));
        let result = apply_ops(&mut state, 0, 2, &ops, stamp(0, 1));
        result
            .replies
            .unwrap_or_default()
            .into_iter()
            .skip(dumps)
            .filter_map(|r| match r {
                Reply::Bulk(b) => Some(b),
                _ => None,
            })
            .collect()
    })
}

fn command_op(args: &[&str]) -> Op {
    Op::Command(
        args.iter()
            .map(|a| Bytes::copy_from_slice(a.as_bytes()))
            .collect(),
        None,
    )
}

use crate::lua::Choices;

/// What the generator remembers of the run: the last bulk reply (a DUMP payload, a
/// SCRIPT LOAD sha) to feed back as an argument.
#[derive(Default)]
struct Memory {
    last_bulk: Option<Bytes>,
}

/// An argument of kind `kind` (a lower-case word of a shape), or the literal itself.
fn arg(c: &mut Choices, kind: &str, mem: &Memory) -> Bytes {
    let s = |v: &str| Bytes::copy_from_slice(v.as_bytes());
    match kind {
        "k" => s(c.pick(KEYS)),
        "n" => s(c.pick(NUMBERS)),
        "c" => s(c.pick(COUNTS)),
        "f" => s(c.pick(FLOATS)),
        "v" => s(c.pick(VALUES)),
        "m" => s(c.pick(MEMBERS)),
        "p" => s(c.pick(PATTERNS)),
        "lex" => s(c.pick(LEX)),
        "r" => s(c.pick(RANGES)),
        "off" => s(c.pick(OFFSETS)),
        "bitoff" => s(c.pick(BIT_OFFSETS)),
        "bft" => s(c.pick(BF_TYPES)),
        "bfo" => s(c.pick(BF_OFFSETS)),
        "t" => s(c.pick(TIMES)),
        "dur" => s(c.pick(DURATIONS)),
        "db" => s(c.pick(DBS)),
        "nk" => s(c.pick(NUMKEYS)),
        "lon" => s(c.pick(&[
            "0",
            "13.361389",
            "-180",
            "180",
            "180.1",
            "-0",
            "nan",
            "inf",
            "x",
        ])),
        "lat" => s(c.pick(&[
            "0",
            "38.115556",
            "85.05112878",
            "85.06",
            "-85.05112878",
            "nan",
            "x",
        ])),
        "script" => s(c.pick(SCRIPTS)),
        "sha" => match c.byte() % 4 {
            0 => mem.last_bulk.clone().unwrap_or_default(),
            1 => s("e0e1f9fabfc9d4800c877a703b823ac0578ff8db"),
            2 => s("x"),
            _ => sha1_of(c.pick(SCRIPTS)),
        },
        "fill" => s(c.pick(FILLS)),
        "lib" => s(c.pick(LIBRARIES)),
        "fn" => s(c.pick(FUNCTIONS)),
        "payload" => payload(c, mem),
        "any" => match c.byte() % 6 {
            0 => s(c.pick(NUMBERS)),
            1 => s(c.pick(VALUES)),
            2 => s(c.pick(KEYWORDS)),
            3 => s(c.pick(KEYS)),
            4 => s(c.pick(COUNTS)),
            _ => s(c.pick(MEMBERS)),
        },
        literal => s(literal),
    }
}

/// The SHA-1 of a script, as EVALSHA takes it (computed by the engine's own SCRIPT LOAD
/// on a scratch state, once per script).
fn sha1_of(script: &str) -> Bytes {
    static SHAS: OnceLock<Vec<Bytes>> = OnceLock::new();
    let shas = SHAS.get_or_init(|| {
        let mut state = state();
        let ops: Vec<Op> = SCRIPTS
            .iter()
            .map(|s| command_op(&["SCRIPT", "LOAD", s]))
            .collect();
        apply_ops(&mut state, 0, 2, &ops, stamp(0, 1))
            .replies
            .unwrap_or_default()
            .into_iter()
            .map(|r| match r {
                Reply::Bulk(b) => b,
                _ => Bytes::new(),
            })
            .collect()
    });
    let i = SCRIPTS.iter().position(|s| *s == script).unwrap_or(0);
    shas.get(i).cloned().unwrap_or_default()
}

/// A DUMP payload: a real one or the run's last bulk reply, as is or corrupted (a byte
/// changed, cut short, or a byte changed with the footer's checksum made valid again).
fn payload(c: &mut Choices, mem: &Memory) -> Bytes {
    let real = payloads();
    let base = match c.byte() % 4 {
        0 => mem.last_bulk.clone().unwrap_or_default(),
        _ if !real.is_empty() => real[usize::from(c.byte()) % real.len()].clone(),
        _ => Bytes::new(),
    };
    let mut p = base.to_vec();
    match c.byte() % 6 {
        0 | 1 => {}
        2 if !p.is_empty() => {
            let at = usize::from(c.byte()) % p.len();
            p[at] ^= c.byte() | 1;
        }
        3 => {
            let cut = usize::from(c.byte()) % (p.len() + 1);
            p.truncate(cut);
        }
        _ if p.len() > 10 => {
            // Corrupt the body, then seal it again: version and CRC64 of the rest.
            let body = p.len() - 10;
            let at = usize::from(c.byte()) % body;
            match c.byte() % 3 {
                0 => p[at] ^= c.byte() | 1,
                1 => p[at] = c.pick(&[0x00, 0x7f, 0x80, 0xbf, 0xc0, 0xfe, 0xff]),
                _ => {
                    let insert: &[u8] = c.pick(&[
                        &[0xff, 0xff, 0xff, 0x7f][..],
                        &[0x80, 0xff, 0xff, 0xff, 0xff],
                        &[0xc3, 0x40, 0x10],
                        &[0x00],
                    ]);
                    p.splice(at..at, insert.iter().copied());
                }
            }
            let body = p.len() - 8;
            let crc = crc64(&p[..body]);
            p[body..].copy_from_slice(&crc.to_le_bytes());
        }
        _ => {}
    }
    Bytes::from(p)
}

/// Append the arguments of one shape word (see `SHAPES`) to `out`.
fn word(c: &mut Choices, w: &str, mem: &Memory, out: &mut Vec<Bytes>) {
    let (body, reps) = match w.as_bytes().last() {
        Some(b'+') => (&w[..w.len() - 1], 1 + c.byte() % 3),
        Some(b'*') => (&w[..w.len() - 1], c.byte() % 4),
        _ => (w, 1),
    };
    for _ in 0..reps {
        let alternatives: Vec<&str> = body.split('|').collect();
        let chosen = if alternatives.len() > 1 {
            c.pick(&alternatives)
        } else {
            body
        };
        for part in chosen.split('/') {
            out.push(arg(c, part, mem));
        }
    }
}

/// One command: a shape's name, its fixed words, 0 to 3 of its options; sometimes an
/// argument too many or too few.
fn command(c: &mut Choices, mem: &Memory) -> Vec<Bytes> {
    let (name, fixed, options) = c.pick(SHAPES);
    let mut args = vec![Bytes::copy_from_slice(name.as_bytes())];
    for w in fixed.split_whitespace() {
        word(c, w, mem, &mut args);
    }
    if !options.is_empty() {
        for _ in 0..c.byte() % 4 {
            let option = c.pick(options);
            for w in option.split_whitespace() {
                word(c, w, mem, &mut args);
            }
        }
    }
    // (Not on 0: an input used up reads zeros.)
    if c.byte() % 16 == 15 {
        // The same command through a script: the Lua bridge converts its arguments and its
        // reply (RESP2 or RESP3) both ways.
        let wrapper = c.pick(WRAPPERS);
        let mut call = vec![
            Bytes::from_static(b"EVAL"),
            Bytes::from_static(wrapper.as_bytes()),
            Bytes::from_static(b"0"),
        ];
        call.extend(args);
        args = call;
    }
    match c.byte() % 32 {
        31 => {
            let extra = arg(c, "any", mem);
            args.push(extra);
        }
        30 if args.len() > 1 => {
            args.pop();
        }
        _ => {}
    }
    args
}

/// A generated run: the protocol and its batches with their stamps.
pub struct Run {
    /// 2 or 3.
    pub resp: u8,
    /// Each batch's operations and stamp.
    pub batches: Vec<(Vec<Op>, Stamp)>,
    /// Replies of each batch (from the state that generated the run).
    pub replies: Vec<Vec<Reply>>,
}

fn stamp(now_ms: u64, seed: u64) -> Stamp {
    Stamp {
        now_us: 1_700_000_000_000_000 + now_ms * 1000,
        seed,
    }
}

/// Most commands a run makes.
const MAX_COMMANDS: usize = 30;

/// Generate a run from `data` while applying it to `state` (a DUMP or SCRIPT LOAD reply
/// of one batch can be an argument of a later one).
pub fn generate(data: &[u8], state: &mut State) -> Run {
    let mut c = Choices { data, pos: 0 };
    let resp = if c.byte() & 1 == 0 { 2 } else { 3 };
    let mut mem = Memory::default();
    let mut run = Run {
        resp,
        batches: Vec::new(),
        replies: Vec::new(),
    };
    let mut now_ms = 0u64;
    let mut commands = 0;
    let mut db = 0;
    let print = std::env::var_os("TOLLGATE_FUZZ_PRINT").is_some();
    while !c.done() && commands < MAX_COMMANDS {
        // A batch of 1 to 4 commands (a pipeline's), or a MULTI/EXEC block of up to 8.
        let head = c.byte();
        let size = if head & 0x80 != 0 {
            1 + usize::from(head & 7)
        } else {
            1 + usize::from(head & 3)
        };
        let mut ops = Vec::with_capacity(size + 1);
        for _ in 0..size.min(MAX_COMMANDS - commands) {
            ops.push(Op::Command(command(&mut c, &mem), None));
            commands += 1;
        }
        // Sometimes what a cluster leader proposes besides commands: the keys its expiry
        // sampler found expired, keys evicted under maxmemory, or the out-of-memory state
        // for the commands that follow.
        match c.byte() % 16 {
            15 => {
                let keys = (0..1 + c.byte() % 3)
                    .map(|_| arg(&mut c, "k", &mem))
                    .collect();
                ops.push(Op::PurgeExpired { db: 0, keys });
            }
            14 => {
                let keys = (0..1 + c.byte() % 2)
                    .map(|_| arg(&mut c, "k", &mem))
                    .collect();
                ops.insert(0, Op::Evict { db: 0, keys });
            }
            13 => ops.insert(0, Op::OutOfMemory),
            _ => {}
        }
        now_ms += c.pick(&[0, 0, 1, 999, 1000, 1001, 60_000, 3_600_000, 86_400_000]);
        let st = stamp(now_ms, u64::from(c.byte()));
        if print {
            // Before applying, so a run that crashes or runs out of memory still shows it.
            for op in &ops {
                eprintln!("{}", op_line(op));
            }
        }
        let result = apply_ops(state, db, resp, &ops, st);
        db = result.db;
        let replies = result.replies.unwrap_or_default();
        for r in &replies {
            if let Reply::Bulk(b) = r {
                mem.last_bulk = Some(b.clone());
            }
        }
        run.batches.push((ops, st));
        run.replies.push(replies);
    }
    run
}

use crate::lua::internal_error;
pub use crate::lua::state;

/// Whether a command's reply is the node's own: OBJECT IDLETIME and FREQ read the access
/// time and counter each node keeps for eviction, which are not replicated state (a
/// restored key starts them afresh, as a key loaded from an RDB file does).
fn per_node(op: &Op) -> bool {
    match op {
        Op::Command(args, _) => {
            args.len() > 1
                && args[0].eq_ignore_ascii_case(b"object")
                && (args[1].eq_ignore_ascii_case(b"idletime")
                    || args[1].eq_ignore_ascii_case(b"freq"))
        }
        _ => false,
    }
}

/// A command as a line of quoted arguments.
fn op_line(op: &Op) -> String {
    match op {
        Op::Command(args, _) => args
            .iter()
            .map(|a| format!("{:?}", String::from_utf8_lossy(a)))
            .collect::<Vec<_>>()
            .join(" "),
        other => format!("{other:?}"),
    }
}

/// The run as text: one line per command, batches separated.
pub fn describe(run: &Run) -> String {
    let mut out = format!("RESP{}\n", run.resp);
    for (i, (ops, st)) in run.batches.iter().enumerate() {
        out.push_str(&format!(
            "-- batch {i} at +{} ms, seed {}\n",
            (st.now_us - stamp(0, 0).now_us) / 1000,
            st.seed
        ));
        let mut j = 0;
        for op in ops {
            out.push_str(&op_line(op));
            if !matches!(op, Op::Command(..)) {
                out.push('\n');
                continue;
            }
            j += 1;
            if let Some(r) = run.replies.get(i).and_then(|r| r.get(j - 1)) {
                out.push_str(&format!("\n    -> {r:?}"));
            }
            out.push('\n');
        }
    }
    out
}

/// Generate and apply the run for `data`, then check it (see the module's doc).
pub fn check(data: &[u8]) {
    let mut first = state();
    let run = generate(data, &mut first);
    if std::env::var_os("TOLLGATE_FUZZ_PRINT").is_some() {
        eprintln!("--- run:\n{}---", describe(&run));
    }
    for replies in &run.replies {
        if let Some(e) = replies.iter().find_map(internal_error) {
            panic!("internal error:\n{}\n--\n{e}", describe(&run));
        }
    }
    // The same batches on a second fresh state, as a replica applies them; at a cut the
    // input picks, a third state installs the second's Raft snapshot (keyspace, scripts,
    // functions, users) and applies the rest, as a replica that fell behind does.
    let second = Arc::new(Mutex::new(state()));
    let third = Arc::new(Mutex::new(state()));
    let cut = usize::from(data.first().copied().unwrap_or(0) >> 1) % (run.batches.len() + 1);
    let mut db = 0;
    for (i, (ops, st)) in run.batches.iter().enumerate() {
        if i == cut {
            let snapshot = ReplicatedState::new(second.clone()).snapshot();
            if let Err(e) = ReplicatedState::new(third.clone()).restore(&snapshot) {
                panic!(
                    "snapshot after batch {i} does not restore: {e}\n{}",
                    describe(&run)
                );
            }
        }
        let result = apply_ops(&mut second.lock(), db, run.resp, ops, *st);
        let replies = result.replies.unwrap_or_default();
        if replies != run.replies[i] {
            panic!(
                "replies differ in batch {i}:\n{}\n-- the second state answered:\n{replies:?}",
                describe(&run)
            );
        }
        if i >= cut {
            let restored = apply_ops(&mut third.lock(), db, run.resp, ops, *st);
            let restored = restored.replies.unwrap_or_default();
            let commands = ops.iter().filter(|op| matches!(op, Op::Command(..)));
            for (j, (r, op)) in restored.iter().zip(commands).enumerate() {
                if r != &run.replies[i][j] && !per_node(op) {
                    panic!(
                        "after a snapshot installed before batch {cut}, command {j} of batch \
                         {i} answers differently:\n{}\n-- the restored state answered:\n{r:?}",
                        describe(&run)
                    );
                }
            }
        }
        db = result.db;
    }
    let a = tollgate::store::snapshot::encode(&first.ks);
    assert!(
        a == tollgate::store::snapshot::encode(&second.lock().ks),
        "keyspaces differ after:\n{}",
        describe(&run)
    );
    if cut < run.batches.len() {
        assert!(
            a == tollgate::store::snapshot::encode(&third.lock().ks),
            "the keyspace restored before batch {cut} differs at the end:\n{}",
            describe(&run)
        );
    }
    // The engine still works.
    let end = run.batches.last().map_or(stamp(0, 0), |(_, st)| *st);
    let after = apply_ops(
        &mut first,
        0,
        2,
        &[
            command_op(&["SET", "fuzz:after", "1"]),
            command_op(&["INCR", "fuzz:after"]),
        ],
        stamp((end.now_us - stamp(0, 0).now_us) / 1000 + 1, 0),
    );
    let replies = after.replies.unwrap_or_default();
    assert_eq!(
        replies.get(1),
        Some(&Reply::Integer(2)),
        "after:\n{}",
        describe(&run)
    );
}

/// Engine commands (`runs_in_engine`) no shape names.
pub fn uncovered() -> Vec<&'static str> {
    let covered = |spec: &CommandSpec| {
        SHAPES
            .iter()
            .any(|(n, _, _)| n.eq_ignore_ascii_case(spec.name))
            || LEFT_OUT.iter().any(|(n, _)| *n == spec.name)
    };
    command::table::all()
        .filter(|spec| spec.runs_in_engine() && !covered(spec))
        .map(|spec| spec.name)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_engine_command_has_a_shape() {
        assert_eq!(uncovered(), Vec::<&str>::new());
    }

    #[test]
    fn shapes_name_commands_of_the_table() {
        for (name, _, _) in SHAPES {
            assert!(command::lookup(name.as_bytes()).is_some(), "{name}");
        }
    }

    #[test]
    fn payloads_are_real() {
        // 13 keys and the function library.
        assert_eq!(payloads().len(), 14);
    }

    #[test]
    fn runs_check() {
        for data in [
            &b"\x00"[..],
            b"\x01\x83\x05\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c",
            b"\x00\x00\x10\x20\x30\x40\x50\x60\x70\x80\x90\xa0\xb0\xc0\xd0\xe0\xf0",
        ] {
            check(data);
        }
    }
}
