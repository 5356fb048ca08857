#!/usr/bin/env bash
# Memory per small collection, side by side: RSS and INFO used_memory growth of redis-server
# and Tollgate after writing 100,000 small hashes (5 fields), sorted sets (10 members), sets
# (10 integers) and lists (10 items), each type into a fresh server. The seed limiters keep
# one such collection per client. The `ttl` row is 100,000 small counters with a TTL
# (`SET rl:ttl:<i> 17 PX 3600000`, a fixed window's key): what a key with a deadline
# costs, which a change to where the keyspace keeps deadlines must be measured on too.
#
#   bench/memory.sh [count]      (default 100000; RPORT/TPORT override the ports,
#   TOLLGATE_BIN the binary, which is then not built)
set -euo pipefail
cd "$(dirname "$0")/.."
COUNT=${1:-100000}
RPORT=${RPORT:-16379}
TPORT=${TPORT:-16380}
[ "${BUILD:-1}" = 0 ] || [ -n "${TOLLGATE_BIN:-}" ] || cargo build --release -q
# shellcheck source=bench/lib.sh
source bench/lib.sh
name_binary "${TOLLGATE_BIN:-target/release/tollgate}"
TMP=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$TMP"' EXIT

# The load as RESP, one file per type.
python3 - "$COUNT" "$TMP" <<'PY'
import sys
n, out = int(sys.argv[1]), sys.argv[2]
def resp(args):
    parts = [f"*{len(args)}\r\n"]
    for a in args:
        parts.append(f"${len(a)}\r\n{a}\r\n")
    return "".join(parts)
loads = {
    "hash": lambda i: ["HSET", f"rl:win:{i}", "cur", "17", "prev", "42", "start", "1700000000", "limit", "100", "window", "60"],
    "zset": lambda i: ["ZADD", f"rl:log:{i}"] + [x for j in range(10) for x in (str(1700000000000 + j), f"{1700000000000 + j}-{j}")],
    "set": lambda i: ["SADD", f"rl:set:{i}"] + [str(j * 7) for j in range(10)],
    "list": lambda i: ["RPUSH", f"rl:list:{i}"] + [f"item{j}" for j in range(10)],
    "ttl": lambda i: ["SET", f"rl:ttl:{i}", "17", "PX", "3600000"],
}
for name, f in loads.items():
    with open(f"{out}/{name}.resp", "w") as fh:
        for i in range(n):
            fh.write(resp(f(i)))
PY

rss() { awk '/VmRSS/ {print $2 * 1024}' "/proc/$1/status"; }
used() { redis-cli -p "$1" info memory | tr -d '\r' | awk -F: '$1 == "used_memory" {print $2}'; }

# measure <server> <type> -> "rss_growth used_growth"
measure() {
  local server=$1 type=$2 port pid
  if [ "$server" = redis ]; then
    port=$RPORT
    redis-server --port "$port" --save "" --appendonly no >/dev/null 2>&1 &
  else
    port=$TPORT
    "${TOLLGATE_BIN:-target/release/tollgate}" --port "$port" --log warn >/dev/null 2>&1 &
  fi
  pid=$!
  for _ in $(seq 1 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
  local r0 u0 r1 u1
  r0=$(rss $pid); u0=$(used "$port")
  redis-cli -p "$port" --pipe <"$TMP/$type.resp" >/dev/null
  sleep 1
  r1=$(rss $pid); u1=$(used "$port")
  kill "$pid"; wait "$pid" 2>/dev/null || true
  echo "$((r1 - r0)) $((u1 - u0))"
}

printf '%-6s %16s %16s %7s %16s %16s %7s\n' type redis_rss/key tollgate_rss/key ratio redis_used/key tollgate_used/key ratio
for type in hash zset set list ttl; do
  read -r rr ru < <(measure redis "$type")
  read -r tr tu < <(measure tollgate "$type")
  python3 - "$type" "$COUNT" "$rr" "$ru" "$tr" "$tu" <<'PY'
import sys
t, n, rr, ru, tr, tu = sys.argv[1], int(sys.argv[2]), *map(int, sys.argv[3:])
print(f"{t:<6} {rr/n:16.0f} {tr/n:16.0f} {tr/rr:6.2f}x {ru/n:16.0f} {tu/n:16.0f} {tu/ru:6.2f}x")
PY
done
