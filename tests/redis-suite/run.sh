#!/usr/bin/env bash
# Redis 7.0.15's own Tcl test suite (../shared/redis-7.0.15-tests, unchanged) against a
# redis-server and a Tollgate started here, unit by unit, in the harness's external mode.
#
#   bash tests/redis-suite/run.sh [unit ...]      # default: the units listed in UNITS below
#
# Prints one row per unit with the tests each server passed, then the total, and fails when
# Tollgate passes fewer than THRESHOLD percent (default 95) of what redis-server passes.
# Tests listed in tests/redis-suite/skip.txt (with the reason for each) are skipped on
# Tollgate with the harness's own --skipfile, so that a test of a family Tollgate does not
# have does not stop the rest of its unit. redis-server runs them all, so a skipped test
# counts as not passed.
#
# Environment: SUITE (the suite's folder), RPORT / TPORT (ports, default 16460 / 16461),
# THRESHOLD, BASEPORT (the harness's own ports for Tollgate's side, and 64 below it for
# redis-server's side, which runs at the same time; default 21111, so that two runs on one
# machine can be kept apart), BIN (the tollgate binary; default target/debug/tollgate after `cargo build`),
# UNIT_TIMEOUT (seconds per unit and server, default 300), KEEP=1 keeps the logs.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
SUITE=${SUITE:-$ROOT/../shared/redis-7.0.15-tests}
RPORT=${RPORT:-16460}
TPORT=${TPORT:-16461}
THRESHOLD=${THRESHOLD:-95}
UNIT_TIMEOUT=${UNIT_TIMEOUT:-300}
BASEPORT=${BASEPORT:-21111}
UNITS=(
  unit/type/incr unit/type/string unit/type/hash unit/type/list unit/type/list-2
  unit/type/list-3 unit/type/set unit/type/zset unit/expire unit/keyspace unit/multi
  unit/protocol unit/scripting unit/functions unit/pubsub unit/pubsubshard unit/sort
  unit/dump unit/bitops unit/bitfield unit/hyperloglog unit/info unit/info-command
  unit/latency-monitor unit/acl unit/geo
)
[ $# -gt 0 ] && UNITS=("$@")

[ -x "$SUITE/runtest" ] && [ -d "$SUITE/tests/unit" ] ||
  { echo "Redis's Tcl suite is not at $SUITE (set SUITE to the redis-7.0.15-tests folder)" >&2; exit 2; }
command -v tclsh >/dev/null || { echo "tclsh is needed (Debian package tcl)" >&2; exit 2; }
command -v redis-server >/dev/null || { echo "redis-server is needed" >&2; exit 2; }
if [ -z "${BIN:-}" ]; then
  cargo build -q || exit 2
  BIN=$ROOT/target/debug/tollgate
fi

WORK=$(mktemp -d /tmp/tollgate-redis-suite.XXXXXX)
# One copy of the suite per server: the two run side by side (below) and the harness
# writes its temporary files inside its folder.
for side in redis tollgate; do
  cp -r "$SUITE"/. "$WORK/suite-$side"
  chmod -R u+w "$WORK/suite-$side"
done
# skip.txt: "test name or /regexp  |  reason"; the harness wants the names alone.
sed -e 's/[[:space:]]*|.*$//' -e '/^[[:space:]]*#/d' -e '/^[[:space:]]*$/d' \
  tests/redis-suite/skip.txt >"$WORK/skipfile"

PID=
stop_server() {
  if [ -n "$PID" ]; then
    kill "$PID" 2>/dev/null
    wait "$PID" 2>/dev/null
    PID=
  fi
}
REDIS_LOOP=
cleanup() {
  if [ -n "$REDIS_LOOP" ]; then
    kill "$REDIS_LOOP" 2>/dev/null
    wait "$REDIS_LOOP" 2>/dev/null
  fi
  stop_server
  [ -n "${KEEP:-}" ] && echo "logs kept in $WORK" || rm -rf "$WORK"
}
trap cleanup EXIT

wait_ready() {
  for _ in $(seq 1 100); do
    redis-cli -p "$1" ping >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "server on port $1 did not start" >&2
  return 1
}

# run_unit NAME PORT UNIT: start the server fresh, run the unit, print "passed failed".
run_unit() {
  local name=$1 port=$2 unit=$3 baseport=$4 log skip=()
  log="$WORK/${name}-${unit//\//_}"
  if [ "$name" = redis ]; then
    redis-server --port "$port" --save "" --appendonly no --daemonize no \
      --enable-debug-command yes >"$log.server" 2>&1 &
  else
    "$BIN" --port "$port" --enable-debug-command yes >"$log.server" 2>&1 &
    skip=(--skipfile "$WORK/skipfile")
  fi
  PID=$!
  wait_ready "$port" || { stop_server; echo "0 0"; return; }
  (cd "$WORK/suite-$name" && timeout "$UNIT_TIMEOUT" ./runtest --host 127.0.0.1 --port "$port" \
    --single "$unit" --tags -needs:debug --clients 1 --ignore-encoding --ignore-digest \
    "${skip[@]}" --timeout "$UNIT_TIMEOUT" --baseport "$baseport") >"$log.out" 2>&1
  stop_server
  local ok err
  ok=$(grep -c '\[.*ok.*\]:' "$log.out")
  err=$(grep -cE '\[.*(err|exception).*\]:' "$log.out")
  echo "$ok $err"
}

# redis-server's units run in a background loop beside Tollgate's (the harness mostly
# waits, so the two overlap on two cores; this halves the suite's time in CI). Each side
# has its own port, suite copy and harness ports (redis-server's 64 below Tollgate's).
(
  trap stop_server EXIT
  for unit in "${UNITS[@]}"; do
    [ -f "$WORK/suite-redis/tests/$unit.tcl" ] || continue
    read -r r_ok _ < <(run_unit redis "$RPORT" "$unit" $((BASEPORT - 64)))
    echo "$r_ok" >"$WORK/redis-ok-${unit//\//_}"
  done
) &
REDIS_LOOP=$!

declare -A t_ok_of t_err_of
for unit in "${UNITS[@]}"; do
  [ -f "$WORK/suite-tollgate/tests/$unit.tcl" ] || continue
  read -r t_ok_of[$unit] t_err_of[$unit] < <(run_unit tollgate "$TPORT" "$unit" "$BASEPORT")
done
wait "$REDIS_LOOP"
REDIS_LOOP=

printf '%-26s %8s %10s %8s\n' unit redis tollgate failed
total_r=0
total_t=0
for unit in "${UNITS[@]}"; do
  if [ ! -f "$WORK/suite-tollgate/tests/$unit.tcl" ]; then
    printf '%-26s %8s\n' "$unit" "absent"
    continue
  fi
  r_ok=$(cat "$WORK/redis-ok-${unit//\//_}" 2>/dev/null || echo 0)
  t_ok=${t_ok_of[$unit]}
  t_err=${t_err_of[$unit]}
  note=""
  if grep -q 'exception.*\]' "$WORK/tollgate-${unit//\//_}.out"; then
    note="(stopped: $(grep -m1 -A1 'exception.*\]' "$WORK/tollgate-${unit//\//_}.out" |
      tail -1 | cut -c1-60))"
  fi
  printf '%-26s %8d %10d %8d %s\n' "$unit" "$r_ok" "$t_ok" "$t_err" "$note"
  total_r=$((total_r + r_ok))
  total_t=$((total_t + t_ok))
done
pct=0
[ "$total_r" -gt 0 ] && pct=$((100 * total_t / total_r))
printf '%-26s %8d %10d   (%d%% of redis-server)\n' total "$total_r" "$total_t" "$pct"
if [ "$pct" -lt "$THRESHOLD" ]; then
  echo "Tollgate passes $pct% of what redis-server passes; the bar is $THRESHOLD%" >&2
  exit 1
fi
