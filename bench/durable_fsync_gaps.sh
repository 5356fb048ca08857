#!/usr/bin/env bash
# How `appendfsync always` paces the disk: a durable single Tollgate node and redis-server
# (`appendonly yes appendfsync always`) each take N unpipelined writes from CLIENTS clients
# while `perf trace` records every fdatasync of the server (its start and duration). Printed
# per server and row: fdatasyncs, requests per fdatasync, the median and mean fdatasync, and
# the median and mean *gap*, from one fdatasync's end to the next one's start: the time the
# disk waits on the server (its commit, apply, replies and the next group's hand-offs), with
# every client waiting for one of the two groups. Unlike throughput on a shared machine, the
# gap does not depend on how slow the disk is (it does grow with the machine's CPU load).
#
#   bench/durable_fsync_gaps.sh
#   RPORT/TPORT/CLIENTS/ROWS/N/TOLLGATE_BIN override the defaults (ROWS="INCR SET LIMIT.TOKEN",
#   N=10000 requests a row); without TOLLGATE_BIN the release binary is built and used.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh
CLIENTS=${CLIENTS:-50}
ROWS=${ROWS:-INCR SET LIMIT.TOKEN}
N=${N:-10000}
RPORT=${RPORT:-6398}
TPORT=${TPORT:-6399}
require_tools perf redis-server redis-benchmark python3
tollgate_binary
BIN=$TOLLGATE_BIN
# shellcheck source=bench/durable_servers.sh
source bench/durable_servers.sh
start_servers always

# gaps <name> <pid> <port> <command...>: one line for that server and row
gaps() {
  local name=$1 pid=$2 port=$3
  shift 3
  redis-benchmark -p "$port" -n $((N / 5)) -c "$CLIENTS" -r 10000 -q "$@" >/dev/null
  perf trace -e fdatasync -p "$pid" -o "$WORK/trace" -- \
    redis-benchmark -p "$port" -n "$N" -c "$CLIENTS" -r 10000 -q "$@" >/dev/null 2>&1
  python3 - "$name" "$WORK/trace" "$N" <<'PY'
import re, statistics as st, sys
name, path, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
# perf trace lines: "<ms since start> (<duration> ms): <comm>/<tid> fdatasync(...) = 0"
calls = sorted(
    (float(m.group(1)), float(m.group(2)))
    for line in open(path)
    if "fdatasync" in line
    for m in [re.match(r"\s*([\d.]+)\s+\(\s*([\d.]+)\s*ms\)", line)]
    if m
)
if len(calls) < 2:
    sys.exit(f"{name}: fewer than 2 fdatasyncs traced")
durations = [d for _, d in calls]
gaps = [b[0] - (a[0] + a[1]) for a, b in zip(calls, calls[1:])]
print(f"{name:<22} {len(calls):8d} {n / len(calls):9.1f} {st.median(durations):9.3f} "
      f"{st.mean(durations):9.3f} {st.median(gaps):9.3f} {st.mean(gaps):9.3f}")
PY
}

printf '%-22s %8s %9s %9s %9s %9s %9s\n' "server row" fsyncs req/fsync \
  fsync_med fsync_avg gap_med gap_avg
for row in $ROWS; do
  durable_row_commands "$row"
  # shellcheck disable=SC2086
  gaps "redis $row" "$RPID" "$RPORT" $rcmd
  # shellcheck disable=SC2086
  gaps "tollgate $row" "$TPID" "$TPORT" $tcmd
done
echo "(ms; gap = from one fdatasync's end to the next one's start; LIMIT.TOKEN's redis side runs INCR)"
