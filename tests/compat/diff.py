#!/usr/bin/env python3
"""Differential check: run the same commands against redis-server and Tollgate and
compare every reply (values, types and exact error texts).

Usage: diff.py REDIS_PORT TOLLGATE_PORT CASES_FILE...
A cases file holds blocks separated by blank lines; each block starts on a fresh FLUSHALL.
Lines are shell-quoted commands; a line starting with '#' is a comment; a line starting
with '~' is compared as an unordered collection (e.g. SMEMBERS); a line starting with
'%' is compared by the reply's type only (a value that reads the clock, such as OBJECT
IDLETIME, whose whole seconds may tick on one server and not on the other).
Exit status 1 if any reply differs.
"""
import shlex
import sys

import redis


def run(conn, args):
    try:
        return conn.execute_command(*args)
    except redis.exceptions.ResponseError as e:
        return "ERROR: " + str(e)
    except redis.exceptions.RedisError as e:
        return "CLIENT-ERROR: %s: %s" % (type(e).__name__, e)


def normalize(v, unordered):
    if unordered and isinstance(v, (list, set)):
        return sorted(repr(x) for x in v)
    return v


def main():
    rport, tport, files = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
    r = redis.Redis(port=rport)
    t = redis.Redis(port=tport)
    for conn in (r, t):
        # redis-py reshapes COMMAND replies (and fails on GETKEYS's); compare them raw.
        conn.response_callbacks.pop("COMMAND", None)
        # Its GEO callbacks turn replies into floats (hiding the exact text) or need the
        # options its own geo methods pass; compare the replies raw.
        for name in ("GEOPOS", "GEODIST", "GEOHASH", "GEORADIUS", "GEORADIUSBYMEMBER",
                     "GEORADIUS_RO", "GEORADIUSBYMEMBER_RO", "GEOSEARCH", "GEOSEARCHSTORE"):
            conn.response_callbacks.pop(name, None)
    failures = 0
    total = 0
    for path in files:
        blocks = open(path, encoding="utf-8").read().split("\n\n")
        for block in blocks:
            r.flushall()
            t.flushall()
            for line in block.splitlines():
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                unordered = line.startswith("~")
                type_only = line.startswith("%")
                args = shlex.split(line.lstrip("~%"))
                a, b = run(r, args), run(t, args)
                total += 1
                if type_only:
                    a, b = type(a).__name__, type(b).__name__
                if normalize(a, unordered) != normalize(b, unordered):
                    failures += 1
                    print("MISMATCH %s\n  redis:    %r\n  tollgate: %r" % (line, a, b))
    print("%d passed, %d failed" % (total - failures, failures))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
