#!/usr/bin/env bash
# Server work per blocking round trip (a client blocked in BLPOP, woken by another client's
# push; bench/blpop_pingpong.py), Tollgate against redis-server, counted, not timed:
#   instructions  server CPU instructions per round trip, by callgrind; the instructions
#                 either server spends idle over the same time (its timers: Redis's
#                 serverCron, about 1.2 million a second at hz 10) are measured first and
#                 subtracted (the second figure)
#   allocations   calls of the allocator's entry points per round trip (mimalloc's mi_malloc,
#                 mi_free, ... for Tollgate; malloc, free, ... for redis-server), counted from
#                 the round trips' dump's call records by bench/callgrind_allocs.py; not
#                 idle-subtracted (the idle timers allocate next to nothing, and under load
#                 callgrind may take the idle dump late, after some round trips ran);
#                 ALLOC_SITES=1 also lists them by calling function
#   syscalls, ctxsw, futex
#                 system calls, context switches and futex calls of every server thread per
#                 round trip (`perf stat -p`, the server run natively), when perf can count
#                 them (PERF=0 skips)
#   CACHE_SIM=1   also callgrind's cache and branch simulation (--cache-sim=yes
#                 --branch-sim=yes): per round trip, idle rate subtracted as for the
#                 instructions, I1 misses, D1 misses (reads + writes), LL misses (instruction
#                 + data), conditional branches and their mispredicts, indirect branches and
#                 their mispredicts. No hardware counters on this VM: this is how an IPC gap
#                 at equal instructions can be looked at. KEEP=<dir> keeps callgrind's files
#                 (<dir>/<server>.out, the round trips' dump) for
#                 `callgrind_annotate --sort=I1mr,D1mr,Bim,Bcm`.
#
#   bench/blocking_roundtrip.sh [round trips]      (default 2000)
#   PAIRS (default 0): 0 = one pair, A blocks in BLPOP q, B waits DELAY and RPUSHes (a round
#   trip = one pop); P > 0 = P pairs of clients ping-ponging LPUSH/BLPOP on their own two
#   lists (issue 19's row; a round trip = one woken pop; no DELAY).
#   PORT (default 6397), DELAY (seconds B waits before it pushes with one pair, default
#   0.005: under callgrind a server needs that long to block A), TOLLGATE_BIN (default:
#   build release).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-2000}
PORT=${PORT:-6397}
DELAY=${DELAY:-0.005}
PAIRS=${PAIRS:-0}
PERF=${PERF:-1}
source bench/lib.sh
require_tools valgrind callgrind_annotate callgrind_control redis-server redis-cli python3
tollgate_binary
port_free "$PORT"
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

total_of() {
  callgrind_annotate "$1" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }'
}

pingpong() {
  python3 bench/blpop_pingpong.py "$PORT" "$1" "$DELAY" "$PAIRS" >/dev/null
}

count() {
  local server=$1 file="$OUT/cg.out"
  rm -f "$OUT"/cg.out*
  local sim=()
  if [ "${CACHE_SIM:-0}" = 1 ]; then sim=(--cache-sim=yes --branch-sim=yes); fi
  start_callgrind_server "$server" "$file" "${sim[@]}"
  local pid=$SPID
  # Warm-up, then the idle rate over 5 s (dump 1), then the round trips (dump 2).
  pingpong 200
  callgrind_control -z "$pid" >/dev/null 2>&1
  sleep 5
  callgrind_control -d "$pid" >/dev/null 2>&1
  local start end
  start=$(date +%s.%N)
  pingpong "$N"
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
  local sites=()
  if [ "${ALLOC_SITES:-0}" = 1 ]; then sites=(sites); fi
  echo "$server: allocator calls per round trip:" \
    "$(python3 bench/callgrind_allocs.py "$file.2" "$N" "${sites[@]}")"
  if [ "${CACHE_SIM:-0}" = 1 ]; then
    if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp "$file.2" "$KEEP/$server.out"; fi
    python3 - "$server" "$N" "$start" "$end" "$(callgrind_events "$file.1")" "$(callgrind_events "$file.2")" <<'PY'
import sys
server, n, elapsed = sys.argv[1], int(sys.argv[2]), float(sys.argv[4]) - float(sys.argv[3])
idle, busy = [dict((kv.split("=")[0], int(kv.split("=")[1])) for kv in a.split()) for a in sys.argv[5:7]]
def per(*events):
    return sum(busy.get(e, 0) - idle.get(e, 0) / 5 * elapsed for e in events) / n
print(f"{server}: per round trip, idle rate subtracted: I1 misses {per('I1mr'):.1f}, "
      f"D1 misses {per('D1mr', 'D1mw'):.1f} (read {per('D1mr'):.1f}), "
      f"LL misses {per('ILmr', 'DLmr', 'DLmw'):.2f}, "
      f"cond branches {per('Bc'):.0f} mispredicted {per('Bcm'):.1f}, "
      f"indirect {per('Bi'):.0f} mispredicted {per('Bim'):.1f}")
PY
  fi
}

# kernel <server>: perf stat's counts of the natively run server over N round trips.
kernel() {
  local server=$1
  if [ "$server" = tollgate ]; then
    "$TOLLGATE_BIN" --port "$PORT" --log warn >/dev/null 2>&1 &
  else
    redis-server --port "$PORT" --save "" --appendonly no >/dev/null 2>&1 &
  fi
  local pid=$!
  for _ in $(seq 1 100); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
  pingpong 200
  perf stat -x, -e raw_syscalls:sys_enter,context-switches,syscalls:sys_enter_futex \
    -p "$pid" -o "$OUT/perf" &
  local perf=$!
  sleep 0.3
  pingpong "$N"
  kill -INT "$perf"
  wait "$perf" 2>/dev/null || true
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  python3 - "$OUT/perf" "$server" "$N" <<'PY'
import sys
counts = {}
for line in open(sys.argv[1]):
    f = line.strip().split(",")
    if len(f) > 2 and f[0].replace(".", "").isdigit():
        counts[f[2]] = float(f[0])
n = int(sys.argv[3])
print(f"{sys.argv[2]}: per round trip "
      f"{counts.get('raw_syscalls:sys_enter', 0) / n:.2f} syscalls, "
      f"{counts.get('context-switches', 0) / n:.3f} context switches, "
      f"{counts.get('syscalls:sys_enter_futex', 0) / n:.3f} futex")
PY
}

echo "round trips: $N, pairs: $PAIRS"
count redis
count tollgate
if [ "$PERF" = 1 ] && perf stat -e raw_syscalls:sys_enter true >/dev/null 2>&1; then
  kernel redis
  kernel tollgate
fi
