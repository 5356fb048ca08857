#!/usr/bin/env python3
"""Bounded random-command robustness checker: Tollgate against redis-server.

    fuzz.py REDIS_PORT TOLLGATE_PORT [--seed S] [--count N] [--seconds T] [--resp 2|3]
            [--skip LABEL]... [--raw-skip HEX] [--history]

Sends random calls (Tollgate's COMMAND LIST minus connection-level, blocking and
destructive commands; arguments from a pool of edge values: colliding keys, number and
duration extremes, option keywords, empty/long/binary strings, Lua scripts) to Tollgate,
and malformed RESP on separate raw sockets, until N calls or T seconds (defaults 20000,
60 s; the seed defaults to the clock and is printed).

FAILURE (exit status 1, with the last calls printed): no reply within 5 s, a dropped main
connection, a reply redis-py cannot parse, or a wrong PING/ECHO answer (desync), also
right after a raw payload.

Mismatches (reported, exit status 0): deterministic calls known to both servers also run
on redis-server, kept in step (a Tollgate-only write has its keys deleted on both; both
are reset every 200 calls), and replies, including error texts and raw-socket bytes, are
compared. A mismatch on a key with a TTL under 2 s is tagged "timing?".
--skip LABEL (a command or "COMMAND SUB") and --raw-skip HEX (bytes) get past a known bug;
--history shows each example's earlier successful calls on its keys.
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

# Never sent: connection state, shutdown, blocking, transactions, pub/sub, flushes, and
# PFSELFTEST (Redis's HyperLogLog self-test: 0.4 s in a release build, about 4 s in the debug
# build CI tests, too near this script's 5 s read timeout).
SKIP = {
    "PFSELFTEST",
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
    b"*1\r\n$-1\r\n", b"*1\r\n$abc\r\n", b"*abc\r\n", b"*3000000\r\n", b"*1\r\n$+1\r\n",
    b"*1\r\n$999999999999\r\n", b"*1\r\nfoo\r\n", b"*2\r\n$3\r\nGET\r\n:1\r\n",
    b"*1\r\n$" + b"9" * 70000 + b"\r\n", b"*" + b"1" * 70000, b"x" * 70000,
    b"PING \"unbalanced\r\n", b"ECHO 'a\r\n", b"ECHO \"a\"b\r\n", b"*1\r\n$ 3\r\nGET\r\n",
    b"*9223372036854775808\r\n", b"*1\r\n$9223372036854775808\r\n", b"*1\r\n\r\n",
    b"*-9223372036854775809\r\n", b"*2\r\n$1\r\na\r\n*\r\n",
]
RAW_OTHER = [  # valid, incomplete or odd-but-legal input: compared with redis-server
    b"*-1\r\n*1\r\n$4\r\nPING\r\n", b"*0\r\n*-5\r\nPING\r\n", b"*1\r\n$4\r\nPING",
    b"*1\r\n$4\r\nPI", b"*1\r\n$536870911\r\n", b"*2\r\n$4\r\nECHO\r\n$5\r\nab", b"*1",
    b"ECHO \"a\\x41b\\n\" 'c\\'d'\r\n", b"SET \"a b\" ''\r\nGET \"a b\"\r\n", b"\r\n\r\nPING\r\n",
    b"PING\n", b"   \r\n", b"*1\r\n$4\r\nPING\r\n" * 50, b"*1\r\n$0\r\n\r\n",
    b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n",
    b"ECHO \"\\xzz\"\r\n", b"*1\r\n$3\r\nPINGXX\r\n", b"\x00\xff\r\n", b"*1\r\n$4\r\nPING\n",
    b"ECHO \"a\"\x0bb\r\n", b"\xff\r\n",
    # Errors that quote an argument holding CR/LF must not break the reply stream.
    b"*2\r\n$6\r\nCLIENT\r\n$4\r\nx\r\ny\r\nPING\r\n",
    b"*4\r\n$8\r\nFUNCTION\r\n$4\r\nLOAD\r\n$3\r\na\nb\r\n$1\r\nx\r\nPING\r\n",
]
RAW_WAIT = 0.15  # seconds of silence after which a raw exchange is considered finished


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
        port = conn.connection_pool.connection_kwargs["port"]
        raise Failure("port %d: %s: %s" % (port, type(e).__name__, e))


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
        pairs = [sorted(map(repr, zip(x[::2], x[1::2]))) for x in (a, b)]
        return pairs[0] == pairs[1]
    if name in TTL_TOLERANCE and isinstance(a, int) and isinstance(b, int):
        return min(a, b) >= 0 and abs(a - b) <= TTL_TOLERANCE[name]
    return False


class Gen:
    """Random calls: a command name and a list of byte-string arguments."""

    def __init__(self, rng, names, arity):
        self.rng, self.names, self.arity = rng, names, arity

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
        elif r.random() < 0.4 and name in self.arity:
            # A plausible call: a key, then the arity's worth of members and small numbers.
            arity = self.arity[name]
            n = arity - 2 if arity > 0 else -arity - 2 + r.randint(0, 3)
            return name, [r.choice(KEYS)] + [r.choice(MEMBERS + SMALL_INTS) for _ in range(n)]
        elif r.random() < 0.75:
            args.append(r.choice(KEYS))
        n = r.randint(0, 8 - min(len(args), 8)) if r.random() < 0.5 else r.randint(0, 2)
        return name, args + [self.value() for _ in range(n)]


def raw_exchange(port, payload, wait):
    """Send payload on a fresh socket; return (bytes received, closed by server)."""
    data, chunk = b"", None
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        try:
            s.sendall(payload)
            s.settimeout(wait)
            while chunk != b"":
                chunk = s.recv(65536)
                data += chunk
        except (socket.timeout, TimeoutError):
            pass
        except (ConnectionResetError, BrokenPipeError):
            chunk = b""
    return data, chunk == b""


def encode(args):
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


def fmt(cmd):
    return " ".join(repr(a if len(a) <= 60 else a[:60] + b"...") for a in cmd)


class Fuzzer:
    def __init__(self, opt):
        self.opt = opt
        self.r, self.t = connect(opt.redis_port, opt.resp), connect(opt.tollgate_port, opt.resp)
        names = sorted(n.decode().upper() for n in self.t.execute_command("COMMAND", "LIST"))
        self.redis_names = {n.decode().upper() for n in self.r.execute_command("COMMAND", "LIST")}
        info = self.t.execute_command("COMMAND")
        self.writes = {e[0].decode().upper() for e in info if b"write" in e[2]}
        self.writes |= {"EVAL", "EVALSHA", "FCALL", "FUNCTION", "SCRIPT"}
        arity = {e[0].decode().upper(): e[1] for e in info if e[3] == 1}
        self.rng = random.Random(opt.seed)
        self.gen = Gen(self.rng, [n for n in names if n not in SKIP], arity)
        self.mismatches = collections.defaultdict(list)
        self.raw_kinds = set()
        self.last = collections.deque(maxlen=10)
        self.calls = self.compared = self.errors = 0
        self.history, self.volatile = [], set()

    def ping(self, after):
        try:
            pong = call(self.t, ["PING"])
        except Failure as e:
            pong = e
        if pong not in (b"PONG", "PONG"):
            raise Failure("PING answered %r %s" % (pong, after))

    def raw(self, payload, must_error):
        """Malformed RESP should get a protocol error or a close, and must not disturb the
        main connection; differences from redis-server are recorded."""
        if self.opt.raw_skip and self.opt.raw_skip in payload:
            return
        try:
            got = raw_exchange(self.opt.tollgate_port, payload, 2.0 if must_error else RAW_WAIT)
        except OSError as e:
            raise Failure("raw socket %r: %s" % (payload[:80], e))
        shown = repr(payload[:80])
        no_error = self.mismatches["(raw socket: no protocol error, no close within 2 s)"]
        if must_error and not got[1] and b"-ERR Protocol error" not in got[0] and \
                shown not in [m[0] for m in no_error]:
            no_error.append((shown, "-ERR Protocol error... or close", repr(got[0])))
        self.ping("after raw payload %r" % payload[:80])
        want = raw_exchange(self.opt.redis_port, payload, RAW_WAIT)
        kind = (want[0][:40], got[0][:40], want[1], got[1])  # one example per kind
        if got != want and kind not in self.raw_kinds:
            self.raw_kinds.add(kind)
            show = lambda x: repr((x[0][:200], "closed" if x[1] else "open"))
            self.mismatches["(raw socket)"].append((shown, show(want), show(got)))

    def reset(self):
        # First a malformed copy of a random call: the servers may parse it differently.
        name, args = self.gen.command()
        request = encode([name.encode()] + args)
        i = self.rng.randrange(len(request))
        how = self.rng.randrange(3)
        if how == 0:
            request = request[:i]
        else:
            junk = self.rng.choice([b"\r\n", b"-", b"99999", b"*", b"$", b"\x00", b"x", b"\r"])
            request = request[:i] + junk + request[i + (how == 1):]
        self.raw(request, False)
        for conn in (self.r, self.t):
            for reset in (["FLUSHALL"], ["SCRIPT", "FLUSH"], ["FUNCTION", "FLUSH"]):
                call(conn, reset)
        self.history = []  # (keys, command, redis reply, tollgate reply) since the reset
        self.volatile = set()  # keys given a TTL under 2 s: replies may race the expiry

    def step(self):
        while True:  # a call that --skip does not exclude
            name, args = self.gen.command()
            label = name + (" " + args[0].decode() if name in SUBCOMMANDS else "")
            if name not in self.opt.skip and label not in self.opt.skip:
                break
        cmd = [name.encode()] + args
        self.last.append(cmd)
        self.calls += 1
        got = call(self.t, cmd)
        self.errors += isinstance(got, Exception)
        keys = set(args) & set(KEYS)
        want = "(not sent)"
        if (name in self.redis_names and name not in NO_COMPARE and label not in NO_COMPARE
                and not name.startswith(NO_COMPARE_PREFIXES)):
            self.compared += 1
            want = call(self.r, cmd)
            racy = keys & self.volatile and not all(
                isinstance(x, Exception) and "WRONGTYPE" not in str(x) for x in (want, got))
            tag = label + (" [short TTL: timing?]" if racy else "")
            if not same(name, want, got) and len(self.mismatches[tag]) < 100:
                before = [h[1:] for h in self.history if keys & h[0] and "'error'" not in h[2]]
                self.mismatches[tag].append(
                    (fmt(cmd), repr(norm(want))[:300], repr(norm(got))[:300], before[-8:]))
        elif name in self.writes:
            # A Tollgate-only write: forget any key it may have changed, on both servers.
            touched = sorted({a for a in args if len(a) < 100})
            for conn in (self.r, self.t):
                if touched:
                    call(conn, [b"DEL"] + touched)
        self.history.append((keys, fmt(cmd), repr(norm(want))[:100], repr(norm(got))[:100]))
        if name in self.writes:
            for k in keys:
                ttl = call(self.t, [b"PTTL", k])
                if isinstance(ttl, int) and (0 <= ttl < 2000 or ttl == -2 and "EX" in name):
                    self.volatile.add(k)

    def run(self):
        start = time.time()
        for payload in RAW_ERROR:
            self.raw(payload, True)
        for payload in RAW_OTHER:
            self.raw(payload, False)
        while self.calls < self.opt.count and time.time() - start < self.opt.seconds:
            if self.calls % 200 == 0:
                self.reset()
            if self.calls % 500 == 0:
                self.ping("after %d calls" % self.calls)
            if self.calls % 50 == 0:
                nonce = b"nonce-%d" % self.calls
                got = call(self.t, ["ECHO", nonce])
                if got != nonce:
                    raise Failure("protocol desync: ECHO %r answered %r" % (nonce, got))
            self.step()
        self.ping("at the end")
        for payload in RAW_ERROR:
            self.raw(payload, True)
        return time.time() - start

    def report(self, seconds):
        print("calls: %d (error replies: %d, compared with redis: %d) in %.1f s, failures: 0, "
              "mismatching commands: %d" % (self.calls, self.errors, self.compared, seconds,
                                            len(self.mismatches)))
        for label in sorted(self.mismatches):
            examples = self.mismatches[label]
            print("MISMATCH %s (%d)" % (label, len(examples)))
            for cmd, want, got, *before in examples[:30 if label.startswith("(raw") else 3]:
                if self.opt.history and before and before[0]:
                    print("  after (same keys, since the last reset):")
                    for h in before[0]:
                        print("    %s  -> redis %s, tollgate %s" % h)
                print("  %s\n    redis:    %s\n    tollgate: %s" % (cmd, want, got))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("redis_port", type=int)
    ap.add_argument("tollgate_port", type=int)
    ap.add_argument("--seed", type=int, default=int(time.time() * 1000) % 10**9)
    ap.add_argument("--count", type=int, default=20000)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--resp", type=int, choices=(2, 3), default=2)
    ap.add_argument("--skip", action="append", default=[], metavar="LABEL")
    ap.add_argument("--raw-skip", type=bytes.fromhex, default=b"", metavar="HEX")
    ap.add_argument("--history", action="store_true")
    opt = ap.parse_args()
    print("seed %d (rerun with --seed %d)" % (opt.seed, opt.seed), flush=True)
    try:
        fuzzer = Fuzzer(opt)
    except redis.exceptions.RedisError as e:
        sys.exit("FAILURE: cannot read the command lists: %s" % e)
    try:
        seconds = fuzzer.run()
    except Failure as e:
        print("FAILURE after %d calls (seed %d): %s" % (fuzzer.calls, opt.seed, e))
        print("last commands (most recent last):")
        for c in fuzzer.last:
            print("  " + fmt(c))
        sys.exit(1)
    fuzzer.report(seconds)


if __name__ == "__main__":
    main()
