#!/usr/bin/env bash
# Server CPU instructions per blocking round trip (a client blocked in BLPOP, woken by
# another client's RPUSH; bench/blpop_pingpong.py), Tollgate against redis-server,
# counted by callgrind; the instructions either server spends idle over the same time (its
# timers: Redis's serverCron, about 1.2 million a second at hz 10) are measured first
# and subtracted.
#
#   bench/blocking_roundtrip.sh [round trips]      (default 2000)
#   PORT (default 6397), DELAY (seconds B waits before it pushes, default 0.005: under
#   callgrind a server needs that long to block A), TOLLGATE_BIN (default: build release).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-2000}
PORT=${PORT:-6397}
DELAY=${DELAY:-0.005}
source bench/lib.sh
require_tools valgrind callgrind_annotate callgrind_control redis-server redis-cli python3
tollgate_binary
port_free "$PORT"
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

total_of() {
  callgrind_annotate "$1" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }'
}

count() {
  local server=$1 file="$OUT/cg.out"
  rm -f "$OUT"/cg.out*
  start_callgrind_server "$server" "$file"
  local pid=$SPID
  # Warm-up, then the idle rate over 5 s (dump 1), then the round trips (dump 2).
  python3 bench/blpop_pingpong.py "$PORT" 200 "$DELAY"
  callgrind_control -z "$pid" >/dev/null 2>&1
  sleep 5
  callgrind_control -d "$pid" >/dev/null 2>&1
  local start end
  start=$(date +%s.%N)
  python3 bench/blpop_pingpong.py "$PORT" "$N" "$DELAY"
  end=$(date +%s.%N)
  callgrind_control -d "$pid" >/dev/null 2>&1
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  local idle busy
  idle=$(total_of "$file.1")
  busy=$(total_of "$file.2")
  python3 -c "
idle_rate = $idle / 5
elapsed = $end - $start
print(f'$server: {$busy / $N:.0f} instructions per round trip, '
      f'{($busy - idle_rate * elapsed) / $N:.0f} without the idle rate '
      f'({idle_rate:.0f}/s over {elapsed:.1f} s)')"
}

count redis
count tollgate
