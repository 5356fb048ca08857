#!/usr/bin/env python3
"""Bounded random-command robustness checker: Tollgate against redis-server.

Usage:
    fuzz.py REDIS_PORT TOLLGATE_PORT [--seed S] [--count N] [--seconds T] [--resp 2|3]

Sends random commands (names from Tollgate's COMMAND LIST, arguments drawn from a pool
of edge values: colliding key names, integer/float/duration extremes, option keywords,
empty/long/binary strings, small Lua scripts) to Tollgate, and also some malformed RESP
on separate raw sockets. Stops after N calls or T seconds, whichever comes first
(defaults: 20000 calls, 60 s; the seed defaults to the time and is printed).

FAILURE (exit status 1): Tollgate does not answer within 5 s, drops the main connection,
sends a reply redis-py cannot parse, or answers PING/ECHO wrongly (protocol desync).
Deterministic commands known to both servers also run on redis-server, whose keyspace
is kept in step (every call that may write goes to both; FLUSHALL on both every 200
calls); reply differences (value or error text) are reported as mismatches, which are
not fatal (exit status 0).
"""
import argparse
import collections
import hashlib
import random
import socket
import sys
import time

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

# Never sent: connection state, shutdown, blocking, transactions, pub/sub, flushes.
SKIP = {
    "SHUTDOWN", "DEBUG", "QUIT", "RESET", "SELECT", "AUTH", "HELLO", "MULTI", "EXEC",
    "DISCARD", "WATCH", "UNWATCH", "SUBSCRIBE", "UNSUBSCRIBE", "PSUBSCRIBE", "PUNSUBSCRIBE",
    "SSUBSCRIBE", "SUNSUBSCRIBE", "MONITOR", "SYNC", "PSYNC", "REPLICAOF", "SLAVEOF",
    "FAILOVER", "FLUSHALL", "FLUSHDB", "BLPOP", "BRPOP", "BLMOVE", "BRPOPLPUSH", "BLMPOP",
    "BZPOPMIN", "BZPOPMAX", "BZMPOP", "WAIT", "WAITAOF", "XREAD", "XREADGROUP", "SAVE",
    "BGSAVE", "BGREWRITEAOF", "ACL", "MIGRATE", "MODULE",
}
# Container commands: the subcommands we may send (others are dangerous or client-mode).
SUBCOMMANDS = {
    "CLIENT": ["ID", "GETNAME", "SETNAME", "LIST", "INFO", "SETINFO", "HELP", "NOSUCH"],
    "CONFIG": ["GET", "RESETSTAT", "HELP", "NOSUCH"],
    "COMMAND": ["COUNT", "INFO", "DOCS", "LIST", "GETKEYS", "HELP", "NOSUCH"],
    "MEMORY": ["USAGE", "STATS", "HELP", "NOSUCH"],
    "SCRIPT": ["LOAD", "EXISTS", "FLUSH", "HELP", "NOSUCH"],
    "FUNCTION": ["LOAD", "LIST", "DELETE", "FLUSH", "DUMP", "RESTORE", "STATS", "HELP",
                 "NOSUCH"],
    "CLUSTER": ["INFO", "NODES", "MYID", "SLOTS", "SHARDS", "KEYSLOT", "NOSUCH"],
}
# Run on Tollgate only: random or time-dependent output, or Tollgate-specific.
NO_COMPARE = {
    "RANDOMKEY", "SPOP", "SRANDMEMBER", "HRANDFIELD", "ZRANDMEMBER", "SCAN", "SSCAN",
    "HSCAN", "ZSCAN", "TIME", "INFO", "CLIENT", "MEMORY", "COMMAND", "OBJECT", "DEBUG",
    "INCREX", "CLUSTER", "CONFIG", "LASTSAVE", "FUNCTION DUMP",
}
NO_COMPARE_PREFIXES = ("LIMIT.", "CL.", "RAFT.")
UNORDERED = {"SMEMBERS", "SINTER", "SUNION", "SDIFF", "KEYS", "HKEYS", "HVALS"}
PAIRS = {"HGETALL"}
TTL_TOLERANCE = {"TTL": 1, "EXPIRETIME": 1, "PTTL": 50, "PEXPIRETIME": 50}

KEYS = [b"a", b"b", b"c", b"k1", b"{x}1", b"{x}2"]
MEMBERS = [b"f1", b"f2", b"m", b"v", b"a"]
SMALL_INTS = [b"0", b"1", b"2", b"3", b"5", b"10", b"100", b"-1", b"1000"]
INTS = [b"0", b"-1", b"1", b"2147483648", b"9223372036854775807", b"-9223372036854775808",
        b"18446744073709551616", b"9223372036854775808"]
FLOATS = [b"0.1", b"-0.0", b"1e308", b"1e400", b"inf", b"-inf", b"nan", b"1e", b"+inf",
          b"1.5", b"0x10"]
DURATIONS = [b"1ms", b"5s", b"2m", b"1h", b"1d", b"0s", b"-1s", b"99999999999d", b"250",
             b"1S", b"1.5s"]
KEYWORDS = [w.encode() for w in (
    "EX PX NX XX GT LT KEEPTTL GET LIMIT COUNT MATCH TYPE WITHSCORES BYSCORE BYLEX REV "
    "COST PRECISION FIXED SLIDING LOG TOKEN LEAKY GCRA BYINT BYFLOAT LBOUND UBOUND "
    "SATURATE ENX PERSIST EXAT PXAT CH INCR LEFT RIGHT BEFORE AFTER RANK MAXLEN REPLACE "
    "DB WITHCODE LIBRARYNAME ASYNC SYNC IDX").split()]
SPECIAL = [b"", b"x" * 10240, b"\x00\xff\r\n", b"*", b"a*", b"[a", b"(1", b"-", b"+",
           b"(", b"[", b"(inf"]
LIBRARY = (b"#!lua name=lib\nredis.register_function('f', function(keys, args) "
           b"return redis.call('incr', keys[1]) end)")
SCRIPTS = [s.encode() for s in (
    "return 1", "return redis.call('incr', KEYS[1])", "error('x')", "return {1,2,{3}}",
    "return redis.call('nosuch')", "return redis.call('set', KEYS[1], ARGV[1])",
    "return redis.pcall('hset', KEYS[1], 'f', 'v')", "return {err='My Error'}",
    "return redis.error_reply('E1 bad')", "return redis.status_reply('FINE')",
    "return 3.99", "return tostring(ARGV[1])", "return {1, nil, 3}", "return #KEYS + #ARGV",
    "return redis.call('get', KEYS[1])", "return redis.sha1hex(ARGV[1] or '')",
    "return 'unterminated", "return redis.call('lpush', KEYS[1], unpack(ARGV))",
    "return redis.call('expire', KEYS[1], ARGV[1])", "return math.huge", "return 0/0",
    "return cjson.decode('[1,2,[3]]')", "return redis.pcall('incrbyfloat', KEYS[1], ARGV[1])",
    "return redis.call('zadd', KEYS[1], ARGV[1], 'm')", "return {false, true, 'x'}",
    "local t = {} for i = 1, 300 do t[i] = i end return t",
    "redis.setresp(3) return redis.call('hgetall', KEYS[1])",
    "return redis.call('flushall')", "return redis.call('eval', 'return 1', 0)",
    "return tonumber(ARGV[1])", "return string.format('%d', ARGV[1])",
    "#!lua flags=no-writes\nreturn redis.call('set', 'a', 1)",
)] + [LIBRARY, b"#!lua name=bad\nreturn 1", b"#!lua name=lib\nsyntax error here"]
SHAS = [hashlib.sha1(s).hexdigest().encode() for s in SCRIPTS[:8]] + [b"0" * 40, b"nosuch"]
# Structured starts per command (k key, m member, i small int, I int, f float, d duration,
# a any); random extra arguments follow.
TEMPLATES = {
    "LIMIT.FIXED": "kid", "LIMIT.SLIDING": "kid", "LIMIT.LOG": "kid", "LIMIT.TOKEN": "kiid",
    "LIMIT.LEAKY": "kiid", "LIMIT.GCRA": "kiid", "LIMIT.ACQUIRE": "kidm",
    "LIMIT.RELEASE": "km", "CL.THROTTLE": "kiii", "INCREX": "k", "SET": "km", "HSET": "kmm",
    "ZADD": "kfm", "ZINCRBY": "kfm", "SADD": "km", "LPUSH": "km", "RPUSH": "km",
    "INCRBYFLOAT": "kf", "HINCRBYFLOAT": "kmf", "EXPIRE": "kI", "PEXPIRE": "kI",
    "ZRANGE": "kii", "ZRANGEBYSCORE": "kff", "LRANGE": "kii", "GETRANGE": "kII",
    "SETRANGE": "kim", "LPOS": "km", "LINSERT": "kamm", "LMOVE": "kkaa", "COPY": "kk",
    "RENAME": "kk", "SMOVE": "kkm", "INCRBY": "kI", "GETEX": "ka", "ZRANGESTORE": "kkii",
}
LIMITER_ALGOS = [b"FIXED", b"SLIDING", b"LOG", b"TOKEN", b"LEAKY", b"GCRA", b"NOSUCH"]

RAW_ERROR = [  # malformed requests: a protocol error (or a close) is expected
    b"*1\r\n$-1\r\n", b"*1\r\n$abc\r\n", b"*abc\r\n", b"*3000000\r\n",
    b"*1\r\n$999999999999\r\n", b"*1\r\nfoo\r\n", b"*2\r\n$3\r\nGET\r\n:1\r\n",
    b"*1\r\n$" + b"9" * 70000 + b"\r\n", b"*" + b"1" * 70000, b"x" * 70000,
    b"PING \"unbalanced\r\n", b"ECHO 'a\r\n", b"ECHO \"a\"b\r\n", b"*1\r\n$+1\r\n", b"*1\r\n$ 3\r\nGET\r\n",
    b"*9223372036854775808\r\n", b"*1\r\n$9223372036854775808\r\n", b"*-9223372036854775809\r\n",
]
RAW_OTHER = [  # valid, incomplete or odd-but-legal input: compared with redis-server
    b"*-1\r\n*1\r\n$4\r\nPING\r\n", b"*0\r\n*-5\r\nPING\r\n", b"*1\r\n$4\r\nPING",
    b"*1\r\n$4\r\nPI", b"*1\r\n$536870911\r\n", b"*2\r\n$4\r\nECHO\r\n$5\r\nab", b"*1",
    b"ECHO \"a\\x41b\\n\" 'c\\'d'\r\n", b"SET \"a b\" ''\r\nGET \"a b\"\r\n", b"\r\n\r\nPING\r\n",
    b"PING\n", b"   \r\n", b"*1\r\n$4\r\nPING\r\n" * 50, b"*1\r\n$0\r\n\r\n",
    b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n",
    b"ECHO \"\\xzz\"\r\n", b"*1\r\n$3\r\nPINGXX\r\n", b"\x00\xff\r\n", b"*1\r\n$4\r\nPING\n",
]


class Failure(Exception):
    pass


def connect(port, resp):
    conn = redis.Redis(port=port, socket_timeout=5, socket_connect_timeout=5,
                       retry=Retry(NoBackoff(), 0), protocol=resp)
    conn.response_callbacks.clear()  # compare the raw parsed replies
    return conn


def call(conn, args):
    """Reply (exceptions from the server are values); other errors raise Failure."""
    try:
        return conn.execute_command(*args)
    except redis.exceptions.ResponseError as e:
        return e
    except Exception as e:  # connection error, timeout, unparsable reply
        raise Failure("%s: %s" % (type(e).__name__, e))


def norm(v):
    if isinstance(v, Exception):
        return ("error", type(v).__name__, str(v))
    if isinstance(v, (list, tuple)):
        return [norm(x) for x in v]
    if isinstance(v, dict):
        return ("map", sorted((repr(norm(k)), repr(norm(x))) for k, x in v.items()))
    if isinstance(v, set):
        return ("set", sorted(repr(norm(x)) for x in v))
    if isinstance(v, float):
        return ("float", repr(v))
    return v


def same(name, a, b):
    a, b = norm(a), norm(b)
    if a == b:
        return True
    if name in UNORDERED and isinstance(a, list) and isinstance(b, list):
        return sorted(map(repr, a)) == sorted(map(repr, b))
    if name in PAIRS and isinstance(a, list) and isinstance(b, list):
        pairs = lambda x: sorted(repr(x[i:i + 2]) for i in range(0, len(x), 2))
        return pairs(a) == pairs(b)
    if name in TTL_TOLERANCE and isinstance(a, int) and isinstance(b, int):
        return min(a, b) >= 0 and abs(a - b) <= TTL_TOLERANCE[name]
    return False


class Gen:
    def __init__(self, rng, names):
        self.rng, self.names = rng, names

    def value(self, kind="a"):
        r = self.rng
        pools = {"k": KEYS, "m": MEMBERS, "i": SMALL_INTS, "I": INTS + SMALL_INTS,
                 "f": FLOATS + SMALL_INTS, "d": DURATIONS + SMALL_INTS}
        if kind != "a":
            return r.choice(pools[kind])
        x = r.random()
        for p, pool in ((0.22, KEYS), (0.34, MEMBERS), (0.52, SMALL_INTS), (0.62, INTS),
                        (0.70, FLOATS), (0.78, DURATIONS), (0.92, KEYWORDS)):
            if x < p:
                return r.choice(pool)
        return r.choice(SPECIAL + SCRIPTS[:3])

    def command(self):
        r = self.rng
        name = r.choice(self.names)
        args = []
        if name in SUBCOMMANDS:
            args.append(r.choice(SUBCOMMANDS[name]).encode())
            if args[0] == b"LOAD" or (args[0] == b"EXISTS" and name == "SCRIPT"):
                args.append(r.choice(SCRIPTS) if name == "SCRIPT" or r.random() < 0.5
                            else LIBRARY)
        elif name in ("EVAL", "EVAL_RO", "EVALSHA", "EVALSHA_RO", "FCALL", "FCALL_RO"):
            if name.startswith("EVALSHA"):
                args.append(r.choice(SHAS))
            elif name.startswith("EVAL"):
                args.append(r.choice(SCRIPTS))
            else:
                args.append(r.choice([b"f", b"nosuch", b""]))
            nk = r.choice([0, 1, 1, 2, None])
            args.append(str(nk).encode() if nk is not None else self.value())
            args += [r.choice(KEYS) for _ in range(nk or 0)]
        elif name == "LIMIT.ALL" and r.random() < 0.7:
            for _ in range(r.randint(1, 3)):
                algo = r.choice(LIMITER_ALGOS)
                args += [algo, r.choice(KEYS), self.value("i"), self.value("d")]
                if algo in (b"TOKEN", b"LEAKY", b"GCRA"):
                    args.insert(len(args) - 1, self.value("i"))
        elif name in TEMPLATES and r.random() < 0.7:
            args = [self.value(k) for k in TEMPLATES[name]]
        elif r.random() < 0.75:
            args.append(r.choice(KEYS))
        n = r.randint(0, 8 - min(len(args), 8)) if r.random() < 0.5 else r.randint(0, 2)
        args += [self.value() for _ in range(n)]
        return name, args


def raw_exchange(port, payload, wait):
    """Send payload on a fresh socket; return (bytes received, closed by server)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    data, closed = b"", False
    try:
        s.sendall(payload)
        s.settimeout(wait)
        while True:
            chunk = s.recv(65536)
            if not chunk:
                closed = True
                break
            data += chunk
    except (socket.timeout, TimeoutError):
        pass
    except (ConnectionResetError, BrokenPipeError):
        closed = True
    finally:
        s.close()
    return data, closed


def raw_check(rport, tport, payload, must_error, mismatches, main_conn, skip):
    """Malformed RESP should get a protocol error or a close, and must not disturb the
    main connection; differences from redis-server are recorded."""
    if skip and skip in payload:
        return
    try:
        got = raw_exchange(tport, payload, 2.0 if must_error else 0.3)
    except OSError as e:
        raise Failure("raw socket %r: %s" % (payload[:80], e))
    if must_error and not got[1] and b"-ERR Protocol error" not in got[0]:
        mismatches["(raw socket: no protocol error, no close within 2 s)"].append(
            (repr(payload[:80]), "-ERR Protocol error... or close", repr(got[0][:200])))
    try:
        pong = call(main_conn, ["PING"])
    except Failure as e:
        pong = e
    if pong not in (b"PONG", "PONG"):
        raise Failure("main connection PING got %r after raw payload %r" % (pong, payload[:80]))
    want = raw_exchange(rport, payload, 0.3)
    if got != want:
        mismatches["(raw socket)"].append(
            (repr(payload[:80]), repr((want[0][:200], "closed" if want[1] else "open")),
             repr((got[0][:200], "closed" if got[1] else "open"))))


def mutate(rng, payload):
    p = bytearray(payload)
    how = rng.randrange(3)
    if how == 0:
        return bytes(p[:rng.randrange(len(p))])
    if how == 1:
        p[rng.randrange(len(p))] = rng.choice(b"*$:+-\r\n0-9x\x00")
    else:
        i = rng.randrange(len(p))
        p[i:i] = rng.choice([b"\r\n", b"-", b"99999", b"*", b"$"])
    return bytes(p)


def encode(args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else a.encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def fmt(cmd):
    return " ".join(repr(a if len(a) <= 60 else a[:60] + b"...") for a in cmd)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("redis_port", type=int)
    ap.add_argument("tollgate_port", type=int)
    ap.add_argument("--seed", type=int, default=int(time.time() * 1000) % 10**9)
    ap.add_argument("--count", type=int, default=20000)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--resp", type=int, choices=(2, 3), default=2)
    ap.add_argument("--raw-skip", type=bytes.fromhex, default=b"", metavar="HEX",
                    help="skip raw payloads containing these bytes (a known bug)")
    opt = ap.parse_args()
    print("seed %d (rerun with --seed %d)" % (opt.seed, opt.seed), flush=True)
    rng = random.Random(opt.seed)
    r, t = connect(opt.redis_port, opt.resp), connect(opt.tollgate_port, opt.resp)
    names = sorted(n.decode().upper() for n in t.execute_command("COMMAND", "LIST"))
    redis_names = {n.decode().upper() for n in r.execute_command("COMMAND", "LIST")}
    names = [n for n in names if n not in SKIP]
    writes = {e[0].decode().upper() for e in t.execute_command("COMMAND")
              if b"write" in e[2]} | {"EVAL", "EVALSHA", "FCALL", "FUNCTION", "SCRIPT"}
    gen = Gen(rng, names)
    mismatches = collections.defaultdict(list)
    last = collections.deque(maxlen=10)
    calls, compared, start = 0, 0, time.time()

    def raw(payload, must_error):
        raw_check(opt.redis_port, opt.tollgate_port, payload, must_error, mismatches, t,
                  opt.raw_skip)

    try:
        for payload in RAW_ERROR:
            raw(payload, True)
        for payload in RAW_OTHER:
            raw(payload, False)
        for conn in (r, t):
            call(conn, ["FLUSHALL"])
        while calls < opt.count and time.time() - start < opt.seconds:
            if calls % 200 == 0:
                for conn in (r, t):
                    call(conn, ["FLUSHALL"])
            if calls % 500 == 0 and call(t, ["PING"]) not in (b"PONG", "PONG"):
                raise Failure("PING did not answer PONG")
            if calls % 50 == 0:
                nonce = b"nonce-%d" % calls
                got = call(t, ["ECHO", nonce])
                if got != nonce:
                    raise Failure("protocol desync: ECHO %r answered %r" % (nonce, got))
            if calls % 250 == 0:
                _, sample = gen.command()
                raw(mutate(rng, encode([rng.choice(names)] + sample)), False)
            name, args = gen.command()
            cmd = [name.encode()] + args
            last.append(cmd)
            calls += 1
            got = call(t, cmd)
            label = name + (" " + args[0].decode() if name in SUBCOMMANDS else "")
            comparable = (name in redis_names and name not in NO_COMPARE and
                          label not in NO_COMPARE and not name.startswith(NO_COMPARE_PREFIXES))
            if comparable:
                compared += 1
                want = call(r, cmd)
                if not same(name, want, got):
                    mismatches[label].append((fmt(cmd), repr(want)[:300], repr(got)[:300]))
            elif name in writes:
                # Tollgate-only write: forget any pool key it may have changed, on both sides.
                touched = sorted({a for a in args if a in KEYS})
                if touched:
                    for conn in (r, t):
                        call(conn, [b"DEL"] + touched)
        if call(t, ["PING"]) not in (b"PONG", "PONG"):
            raise Failure("PING did not answer PONG at the end")
        for payload in RAW_ERROR:
            raw(payload, True)
        if call(t, ["PING"]) not in (b"PONG", "PONG"):
            raise Failure("PING did not answer PONG after the raw payloads")
    except Failure as e:
        print("FAILURE after %d calls (seed %d): %s" % (calls, opt.seed, e))
        print("last commands (most recent last):")
        for c in last:
            print("  " + fmt(c))
        sys.exit(1)
    print("calls: %d (compared with redis: %d) in %.1f s, failures: 0, mismatching "
          "commands: %d" % (calls, compared, time.time() - start, len(mismatches)))
    for label in sorted(mismatches):
        examples = mismatches[label]
        print("MISMATCH %s (%d)" % (label, len(examples)))
        for cmd, want, got in examples[:3]:
            print("  %s\n    redis:    %s\n    tollgate: %s" % (cmd, want, got))
    sys.exit(0)


if __name__ == "__main__":
    main()
