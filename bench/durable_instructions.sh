#!/usr/bin/env bash
# CPU instructions per unpipelined write of a durable single Tollgate node and of redis-server
# with its append-only file, counted by callgrind: the whole server process (every thread,
# start-up and shutdown included) while redis-benchmark sends the same load (10 clients
# unless CLIENTS says, 10,000 random keys, -P 1 unless PIPELINE says), divided by the number
# of requests. Unlike
# throughput these counts hardly move when other work loads the machine. (Under valgrind the
# threads run one at a time, so about one write per Raft entry: per-entry costs weigh more
# here than under a real load.)
#
# Rows: INCR, SET and LIMIT.TOKEN on Tollgate (`--data-dir`), INCR and SET on Redis
# (`appendonly yes`), for each `appendfsync` in MODES. LIMIT.TOKEN's Redis column is Redis's
# INCR (the cheapest durable write it has; its Lua bucket costs far more).
#
#   bench/durable_instructions.sh [requests]     (default 20000 per row)
#   PORT/MODES/ROWS/PIPELINE/CLIENTS/CARGO_TARGET_DIR override the defaults (MODES="everysec",
#   ROWS="INCR SET LIMIT.TOKEN"); TOLLGATE_BIN=<binary> counts that binary without building
#   (e.g. a build of main, for a before/after comparison); REDIS=0 skips Redis's rows;
#   KEEP=<dir> keeps each run's callgrind file there (<server>-<mode>-<row>.cg, for
#   `callgrind_annotate --inclusive=yes`: where the instructions go, by function).
#   E.g. the `-P 32` LIMIT.TOKEN row: PIPELINE=32 CLIENTS=50 ROWS=LIMIT.TOKEN bash bench/durable_instructions.sh 200000
#   CACHE_SIM=1 runs callgrind with its cache and branch simulators (`--cache-sim=yes
#   --branch-sim=yes`, LL as bench/cache_misses.sh sizes it: 1 MB, one core's L2 here) and
#   prints, beside the instructions, first-level instruction (I1) and data (D1) misses,
#   last-level misses (LL: instruction and data) and mispredicted branches (conditional and
#   indirect) per request; bench/durable_breakdown.sh then splits them by task.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-20000}
PORT=${PORT:-6398}
MODES=${MODES:-everysec}
ROWS=${ROWS:-INCR SET LIMIT.TOKEN}
PIPELINE=${PIPELINE:-1}
CLIENTS=${CLIENTS:-10}
KEEP=${KEEP:-}
VG=(valgrind --tool=callgrind)
if [ "${CACHE_SIM:-0}" != 0 ]; then
  VG+=(--cache-sim=yes --branch-sim=yes "--LL=${LL:-1048576,16,64}")
fi
# shellcheck source=bench/lib.sh
source bench/lib.sh
require_tools valgrind callgrind_annotate redis-benchmark redis-server
tollgate_binary
port_free "$PORT"
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

# count <tollgate|redis> <appendfsync> <row> <command...> -> instructions per request
count() {
  local server=$1 mode=$2 row=$3 file="$OUT/cg.out"
  shift 3
  rm -rf "$file" "$OUT/data"
  mkdir -p "$OUT/data"
  if [ "$server" = tollgate ]; then
    "${VG[@]}" --callgrind-out-file="$file" "$TOLLGATE_BIN" --port "$PORT" \
      --data-dir "$OUT/data" --appendfsync "$mode" --log warn >/dev/null 2>&1 &
  else
    "${VG[@]}" --callgrind-out-file="$file" redis-server --port "$PORT" \
      --dir "$OUT/data" --save "" --appendonly yes --appendfsync "$mode" >/dev/null 2>&1 &
  fi
  local pid=$! ok
  for _ in $(seq 1 300); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
  ok=$(redis-benchmark -p "$PORT" -n "$N" -c "$CLIENTS" -P "$PIPELINE" -r 10000 --csv "$@" 2>/dev/null \
    | tail -n 1 | cut -d, -f1)
  redis-cli -p "$PORT" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
  wait "$pid" || true
  if [ "$ok" = '"test"' ] || [ -z "$ok" ]; then
    echo failed
    return
  fi
  if [ -n "$KEEP" ]; then
    mkdir -p "$KEEP"
    cp "$file" "$KEEP/$server-$mode-$row.cg"
  fi
  if [ "${CACHE_SIM:-0}" = 0 ]; then
    callgrind_per "$file" "$N" Ir
  else
    callgrind_per "$file" "$N" Ir I1mr D1mr+D1mw ILmr+DLmr+DLmw Bcm+Bim | tr ' ' /
  fi
}

W=10
[ "${CACHE_SIM:-0}" != 0 ] && W=30
printf "%-9s %-12s %${W}s %${W}s\n" fsync row redis tollgate
for mode in $MODES; do
  for row in $ROWS; do
    case $row in
      INCR) cmd="INCR n:__rand_int__" ;;
      SET) cmd="SET s:__rand_int__ xxx" ;;
      LIMIT.TOKEN) cmd="LIMIT.TOKEN t:__rand_int__ 1000000 1000 1s" ;;
      *) echo "unknown row $row" >&2; exit 1 ;;
    esac
    redis=-
    if [ "${REDIS:-1}" != 0 ]; then
      rcmd=$cmd
      [ "$row" = LIMIT.TOKEN ] && rcmd="INCR n:__rand_int__"
      # shellcheck disable=SC2086
      redis=$(count redis "$mode" "$row" $rcmd)
    fi
    # shellcheck disable=SC2086
    printf "%-9s %-12s %${W}s %${W}s\n" "$mode" "$row" "$redis" "$(count tollgate "$mode" "$row" $cmd)"
  done
done
echo "(instructions per request, callgrind, -P $PIPELINE, $CLIENTS clients, $N requests per row;"
echo " LIMIT.TOKEN's redis column is Redis's INCR)"
if [ "${CACHE_SIM:-0}" != 0 ]; then
  echo "(each column: instructions/I1 misses/D1 misses/LL misses/mispredicted branches per request)"
fi
