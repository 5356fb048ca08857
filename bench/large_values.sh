#!/usr/bin/env bash
# Large values filling memory: redis-benchmark SETs of DATA-byte values (default 200,000)
# to random keys (-r 100000, so memory grows by about N x DATA), 10 clients, against
# redis-server and Tollgate, one fresh server at a time, ROUNDS rounds alternating which
# goes first. Per run: requests/s, the server's CPU time and page faults while it ran
# (`perf stat -e task-clock,page-faults` on the server's pid; software counters, which
# load barely moves) and its RSS at the end. Then the medians, and Tollgate's rps as a
# ratio of Redis's. Made to show what transparent huge pages cost (`disable-thp`): with
# them, each first touch of 2 MiB zeroes it (500 faults for 1 GB instead of 200,000), and
# the CPU time moves with how hard the kernel has to look for free 2 MiB blocks.
#
#   bench/large_values.sh [requests]      (default 4000)
#   DATA (value bytes), ROUNDS (default 3), PORT (default 6420), TOLLGATE_BIN,
#   TOLLGATE_ARGS (e.g. "--disable-thp no")
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-4000}
DATA=${DATA:-200000}
ROUNDS=${ROUNDS:-3}
PORT=${PORT:-6420}
# shellcheck source=bench/lib.sh
source bench/lib.sh
require_tools redis-server redis-benchmark redis-cli perf
tollgate_binary
port_free "$PORT"
WORK=$(mktemp -d)
PIDS=()
trap 'stop_all; rm -rf "$WORK"' EXIT

# run <redis|tollgate> -> "rps cpu_ms faults rss_kb"
run() {
  if [ "$1" = redis ]; then
    redis-server --port "$PORT" --save "" --appendonly no >"$WORK/redis.log" 2>&1 &
  else
    # shellcheck disable=SC2086
    "$TOLLGATE_BIN" --port "$PORT" --log warn ${TOLLGATE_ARGS:-} >"$WORK/tollgate.log" 2>&1 &
  fi
  local pid=$!
  PIDS=("$pid")
  wait_ping -p "$PORT"
  perf stat -x, -e task-clock,page-faults -p "$pid" -o "$WORK/perf.csv" &
  local perf=$!
  sleep 0.3
  local rps
  rps=$(redis-benchmark -p "$PORT" -n "$N" -c 10 -r 100000 -d "$DATA" -t set --csv 2>/dev/null |
    tail -n +2 | tr -d '"' | cut -d, -f2)
  kill -INT "$perf"
  wait "$perf" 2>/dev/null || true
  local rss
  rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status")
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  local cpu faults
  cpu=$(awk -F, '$3 == "task-clock" || $3 ~ /^task-clock/ {printf "%.0f", $1}' "$WORK/perf.csv")
  faults=$(awk -F, '$3 ~ /^page-faults/ {print $1}' "$WORK/perf.csv")
  echo "$rps $cpu $faults $rss"
}

median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

printf '%-9s %6s %12s %10s %10s %10s\n' server round rps cpu_ms faults rss_kb
declare -A rps cpu faults rss
for round in $(seq 1 "$ROUNDS"); do
  order="redis tollgate"
  [ $((round % 2)) -eq 0 ] && order="tollgate redis"
  for s in $order; do
    read -r r c f m <<<"$(run "$s")"
    printf '%-9s %6s %12s %10s %10s %10s\n' "$s" "$round" "$r" "$c" "$f" "$m"
    rps[$s]+="$r " cpu[$s]+="$c " faults[$s]+="$f " rss[$s]+="$m "
  done
done
echo "medians of $ROUNDS rounds ($N SETs of $DATA bytes to random keys, 10 clients):"
for s in redis tollgate; do
  # shellcheck disable=SC2086
  printf '%-9s %6s %12s %10s %10s %10s\n' "$s" - "$(median ${rps[$s]})" "$(median ${cpu[$s]})" \
    "$(median ${faults[$s]})" "$(median ${rss[$s]})"
done
# shellcheck disable=SC2086
python3 -c "print(f'tollgate/redis rps: {$(median ${rps[tollgate]}) / $(median ${rps[redis]}):.2f}x')"
