"""limits_check.py URI: the Python `limits` library's three strategies against one storage.

Fixed window, moving window and sliding window counter (each one of `limits`' Lua scripts
or MULTI paths), with a cost, a window-stats read and a clear. Prints one JSON line per
step; tests/clients/run.sh runs it against redis-server, Tollgate, and a Tollgate cluster
(`redis+cluster://`) and requires the same lines from all three.
"""

import json
import sys

from limits import parse, storage, strategies


def main(uri):
    st = storage.storage_from_string(uri)
    out = []
    for name, cls in [
        ("fixed", strategies.FixedWindowRateLimiter),
        ("moving", strategies.MovingWindowRateLimiter),
        ("sliding", strategies.SlidingWindowCounterRateLimiter),
    ]:
        limiter = cls(st)
        item = parse("3/minute")
        out.append([name, "hits", [limiter.hit(item, "user", name) for _ in range(5)]])
        out.append([name, "remaining", limiter.get_window_stats(item, "user", name).remaining])
        out.append([name, "test", limiter.test(item, "user", name)])
        hourly = parse("10/hour")
        out.append([name, "cost", [limiter.hit(hourly, "cost", name, cost=4) for _ in range(3)]])
        limiter.clear(item, "user", name)
        out.append([name, "after clear", limiter.hit(item, "user", name)])
    out.append(["storage check", st.check()])
    for line in out:
        print(json.dumps(line))


if __name__ == "__main__":
    main(sys.argv[1])
