#!/usr/bin/env bash
# CPU instructions per key the active expiry deletes, counted by callgrind inside
# `tollgate::store::Db::delete_expired` (and what it calls: the deadline index's pass, the
# keyspace lookups and deletions, the `expired` events, the values' frees) and nothing
# else: loading the keys, the idle ticks and DBSIZE polls are not counted. For before/after
# comparisons of the expiry path (redis-server's binary here has no symbols, so no Redis
# row: its `activeExpireCycle` cannot be singled out).
#
#   bench/expiry_instructions.sh [keys]    (default 100000)
#   PORT and TOLLGATE_BIN override the defaults; KEEP=<file> keeps callgrind's output there.
#
# The keys (`SET e:<i> 17 PXAT <ms>`) get deadlines at the first millisecond of SPAN_S
# (default 2) whole seconds, the first DELAY_MS (default 15000 ms) or more after the load
# starts, so none is due while callgrind slows the load down, and the expiry cycle does not
# check keys of the current second before they are due (how often it would, with
# deadlines spread inside a second, follows valgrind's speed and moved the count by 15%
# between runs); the run ends when DBSIZE reads 0 (every key deleted by the active expiry:
# nothing reads them).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-100000}
PORT=${PORT:-16520}
SPAN_S=${SPAN_S:-2}
DELAY_MS=${DELAY_MS:-15000}
# shellcheck source=bench/lib.sh
source bench/lib.sh
require_tools valgrind callgrind_annotate redis-cli python3
tollgate_binary
port_free "$PORT"
OUT=$(mktemp -d)
trap 'redis-cli -p "$PORT" SHUTDOWN NOSAVE >/dev/null 2>&1 || true; [ -z "${KEEP:-}" ] || cp "$OUT/cg.out" "$KEEP"; rm -rf "$OUT"' EXIT

python3 - "$N" "$SPAN_S" "$DELAY_MS" >"$OUT/load.resp" <<'PY'
import sys, time
n, seconds, delay = map(int, sys.argv[1:])
base = (int(time.time() * 1000) + delay) // 1000 * 1000 + 1000
out = sys.stdout
for i in range(n):
    k, at = f"e:{i}", str(base + 1000 * (i * seconds // n))
    out.write(f"*5\r\n$3\r\nSET\r\n${len(k)}\r\n{k}\r\n$2\r\n17\r\n$4\r\nPXAT\r\n${len(at)}\r\n{at}\r\n")
PY

file="$OUT/cg.out"
start_callgrind_server tollgate "$file" --toggle-collect='tollgate::store::Db::delete_expired'
redis-cli -p "$PORT" --pipe <"$OUT/load.resp" >/dev/null
loaded=$(redis-cli -p "$PORT" dbsize)
if [ "$loaded" != "$N" ]; then
  echo "only $loaded of $N keys were there after the load (raise DELAY_MS)" >&2
  exit 1
fi
for _ in $(seq 1 600); do
  [ "$(redis-cli -p "$PORT" dbsize)" = 0 ] && break
  sleep 0.5
done
left=$(redis-cli -p "$PORT" dbsize)
expired=$(redis-cli -p "$PORT" info stats | tr -d '\r' | awk -F: '$1 == "expired_keys" {print $2}')
redis-cli -p "$PORT" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
wait "$SPID" || true
[ "$left" = 0 ] || { echo "$left keys were still there after 300 s" >&2; exit 1; }
total=$(callgrind_annotate "$file" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }')
case "$total" in
  '' | *[!0-9]*)
    echo "callgrind counted nothing inside Db::delete_expired (is it inlined in this build? it is" \
      "marked #[inline(never)] in src/store/mod.rs)" >&2
    exit 1
    ;;
esac
echo "keys $N, expired_keys $expired, instructions in Db::delete_expired: $total, per key: $((total / N))"
