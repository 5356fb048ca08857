#!/usr/bin/env bash
# CPU instructions per unpipelined write of a durable single Tollgate node and of redis-server
# with its append-only file, counted by callgrind: the whole server process (every thread,
# start-up and shutdown included) while redis-benchmark sends the same load (10 clients,
# 10,000 random keys, -P 1 unless PIPELINE says), divided by the number of requests. Unlike
# throughput these counts hardly move when other work loads the machine. (Under valgrind the
# threads run one at a time, so about one write per Raft entry: per-entry costs weigh more
# here than under a real load.)
#
# Rows: INCR, SET and LIMIT.TOKEN on Tollgate (`--data-dir`), INCR and SET on Redis
# (`appendonly yes`), for each `appendfsync` in MODES.
#
#   bench/durable_instructions.sh [requests]     (default 20000 per row)
#   PORT/MODES/ROWS/PIPELINE/CARGO_TARGET_DIR override the defaults (MODES="everysec",
#   ROWS="INCR SET LIMIT.TOKEN"); TOLLGATE_BIN=<binary> counts that binary without building
#   (e.g. a build of main, for a before/after comparison); REDIS=0 skips Redis's rows.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-20000}
PORT=${PORT:-6398}
MODES=${MODES:-everysec}
ROWS=${ROWS:-INCR SET LIMIT.TOKEN}
PIPELINE=${PIPELINE:-1}
# shellcheck source=bench/lib.sh
source bench/lib.sh
require_tools valgrind callgrind_annotate redis-benchmark redis-server
tollgate_binary
port_free "$PORT"
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

# count <tollgate|redis> <appendfsync> <command...> -> instructions per request
count() {
  local server=$1 mode=$2 file="$OUT/cg.out"
  shift 2
  rm -rf "$file" "$OUT/data"
  mkdir -p "$OUT/data"
  if [ "$server" = tollgate ]; then
    valgrind --tool=callgrind --callgrind-out-file="$file" "$TOLLGATE_BIN" --port "$PORT" \
      --data-dir "$OUT/data" --appendfsync "$mode" --log warn >/dev/null 2>&1 &
  else
    valgrind --tool=callgrind --callgrind-out-file="$file" redis-server --port "$PORT" \
      --dir "$OUT/data" --save "" --appendonly yes --appendfsync "$mode" >/dev/null 2>&1 &
  fi
  local pid=$! ok total
  for _ in $(seq 1 300); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
  ok=$(redis-benchmark -p "$PORT" -n "$N" -c 10 -P "$PIPELINE" -r 10000 --csv "$@" 2>/dev/null \
    | tail -n 1 | cut -d, -f1)
  redis-cli -p "$PORT" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
  wait "$pid" || true
  if [ "$ok" = '"test"' ] || [ -z "$ok" ]; then
    echo failed
    return
  fi
  total=$(callgrind_annotate "$file" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }')
  echo $((total / N))
}

printf '%-9s %-12s %10s %10s\n' fsync row redis tollgate
for mode in $MODES; do
  for row in $ROWS; do
    case $row in
      INCR) cmd="INCR n:__rand_int__" ;;
      SET) cmd="SET s:__rand_int__ xxx" ;;
      LIMIT.TOKEN) cmd="LIMIT.TOKEN t:__rand_int__ 1000000 1000 1s" ;;
      *) echo "unknown row $row" >&2; exit 1 ;;
    esac
    redis=-
    if [ "${REDIS:-1}" != 0 ] && [ "$row" != LIMIT.TOKEN ]; then
      # shellcheck disable=SC2086
      redis=$(count redis "$mode" $cmd)
    fi
    # shellcheck disable=SC2086
    printf '%-9s %-12s %10s %10s\n' "$mode" "$row" "$redis" "$(count tollgate "$mode" $cmd)"
  done
done
echo "(instructions per request, callgrind, -P $PIPELINE, 10 clients, $N requests per row)"
