#!/usr/bin/env bash
# Simulated cache misses per request, Tollgate against redis-server, counted by callgrind's
# cache simulator (`--cache-sim=yes`).
#
# `perf` in this VM has no cycle or cache-miss counters, and instruction counts
# (bench/instructions.sh) miss what a large collection costs: a lookup in a set of 100,000
# members touches memory that no cache holds. Callgrind simulates a first-level data cache
# (D1) and a last-level cache (LL) and counts the misses of every load and store. The LL
# size defaults to 1 MB (`LL`, valgrind's `--LL=size,assoc,line`): the L2 of one core here
# (AMD EPYC, 2 MB over 2 instances), the level whose misses a 10 MB set pays on every
# lookup; the 32 MB L3 would hold both servers' sets whole and count nearly nothing.
#
# Each server runs alone under valgrind. The load first runs once uncounted (PREP: the
# same command, as bench/run.sh's first round grows the set), callgrind's counters are
# zeroed (callgrind_control -z), then the same load runs again, counted: the steady state
# of bench/run.sh's later rounds. PREP=no counts the first run instead (the set's growth).
# The counters are dumped (callgrind_control -d) before the server is shut down, so what
# SHUTDOWN frees is not counted.
#
#   bench/cache_misses.sh [requests] [redis-benchmark test]   (defaults 200000, sadd)
#   PORT/TOLLGATE_BIN/CLIENTS/PIPELINE/RAND/LL/PREP override the defaults; KEEP=<dir> keeps
#   callgrind's files there (redis.out, tollgate.out) for a per-function look:
#   callgrind_annotate --sort=DLmr,DLmw <dir>/tollgate.out
#   BRANCH=yes adds callgrind's branch predictor simulation (`--branch-sim=yes`): the
#   mispredicted conditional and indirect branches per request, in two columns (a build's code layout and
#   inlining show there, e.g. release profile against release profile; the simulator is a
#   generic 2-level predictor, not this CPU's). DURABLE=everysec (or always) runs both
#   servers durable: Tollgate with `--data-dir` and `--appendfsync DURABLE`, Redis with
#   `appendonly yes` and the same `appendfsync`, each in a fresh folder.
#   SERVER=tollgate counts Tollgate only (e.g. two builds with TOLLGATE_BIN, no Redis row).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-200000}
TEST=${2:-sadd}
PORT=${PORT:-6398}
CLIENTS=${CLIENTS:-50}
PIPELINE=${PIPELINE:-32}
RAND=${RAND:-100000}
LL=${LL:-1048576,16,64}
# shellcheck source=bench/lib.sh
source bench/lib.sh
require_tools valgrind callgrind_annotate callgrind_control redis-benchmark redis-server
tollgate_binary
port_free "$PORT"
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

# count <tollgate|redis> -> one line: instructions, D1 misses, LL data misses per request
count() {
  local file="$OUT/cg.out" server=$1
  rm -f "$file"
  local vg=(valgrind --tool=callgrind --cache-sim=yes "--LL=$LL" --callgrind-out-file="$file")
  [ "${BRANCH:-no}" != yes ] || vg+=(--branch-sim=yes)
  local durable=()
  if [ -n "${DURABLE:-}" ]; then
    rm -rf "$OUT/data" && mkdir -p "$OUT/data"
    if [ "$server" = tollgate ]; then
      durable=(--data-dir "$OUT/data" --appendfsync "$DURABLE")
    else
      durable=(--dir "$OUT/data" --appendonly yes --appendfsync "$DURABLE")
    fi
  else
    [ "$server" = tollgate ] || durable=(--appendonly no)
  fi
  if [ "$server" = tollgate ]; then
    "${vg[@]}" "$TOLLGATE_BIN" --port "$PORT" --log warn "${durable[@]}" >/dev/null 2>&1 &
  else
    "${vg[@]}" redis-server --port "$PORT" --save "" "${durable[@]}" >/dev/null 2>&1 &
  fi
  local pid=$!
  for _ in $(seq 1 300); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
  local load=(redis-benchmark -p "$PORT" -n "$N" -c "$CLIENTS" -P "$PIPELINE" -r "$RAND" -t "$TEST")
  if [ "${PREP:-yes}" != no ]; then
    "${load[@]}" >/dev/null 2>&1
    callgrind_control -z "$pid" >/dev/null 2>&1
  fi
  "${load[@]}" >/dev/null 2>&1
  # The counters are dumped before SHUTDOWN, whose freeing of the whole set would otherwise
  # be counted with the requests (~0.25 LL misses a SADD at 200,000 requests).
  rm -f "$file".*
  callgrind_control -d "$pid" >/dev/null 2>&1
  redis-cli -p "$PORT" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
  wait "$pid" || true
  local dump
  dump=$(ls "$file".* 2>/dev/null | head -1)
  [ -n "$dump" ] || { echo "callgrind wrote no dump for $server" >&2; exit 1; }
  mv "$dump" "$file"
  if [ -n "${KEEP:-}" ]; then
    mkdir -p "$KEEP" && cp "$file" "$KEEP/$server.out"
  fi
  # Branch columns read "-" without BRANCH=yes.
  callgrind_per "$file" "$N" Ir D1mr+D1mw DLmr+DLmw I1mr ILmr Bcm Bim
}

rows=()
if [ "${SERVER:-both}" != tollgate ]; then
  read -r RI RD1 RLL RI1 RLLI RBC RBI <<<"$(count redis)"
  rows+=(redis "$RI" "$RD1" "$RLL" "$RI1" "$RLLI" "$RBC" "$RBI")
fi
read -r TI TD1 TLL TI1 TLLI TBC TBI <<<"$(count tollgate)"
rows+=(tollgate "$TI" "$TD1" "$TLL" "$TI1" "$TLLI" "$TBC" "$TBI")
printf '%s -P %s, %s clients, -r %s, %s requests (LL %s%s), per request:\n' \
  "$TEST" "$PIPELINE" "$CLIENTS" "$RAND" "$N" "$LL" "${DURABLE:+, durable $DURABLE}"
printf '%-10s %12s %10s %10s %10s %10s %12s %12s\n' server instructions "D1 misses" "LL data" \
  "I1 misses" "LL instr" "cond mispr" "indir mispr"
printf '%-10s %12s %10s %10s %10s %10s %12s %12s\n' "${rows[@]}"
