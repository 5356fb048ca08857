#!/usr/bin/env bash
# Where a durable write's instructions go, by task and step, and how many times each task is
# woken per Raft entry: runs bench/durable_instructions.sh (callgrind over the whole server
# process while redis-benchmark sends the load, 50 unpipelined clients unless CLIENTS says)
# with its callgrind files kept, then prints bench/durable_components.py's rows for each:
# Tollgate's connection task, write batcher, openraft core, state-machine task, log writer
# thread, idle parking and the drop of the in-memory log; redis-server's event loop, command,
# AOF feed and AOF write. Counts, not timings: they hardly move with the machine's load.
#
#   bench/durable_breakdown.sh [requests]          (default 20000 per row)
#   MODES (default "always everysec"), ROWS (default "INCR"), PORT, CLIENTS, PIPELINE,
#   TOLLGATE_BIN, REDIS=0, CACHE_SIM=1 and CARGO_TARGET_DIR as bench/durable_instructions.sh
#   takes them (CACHE_SIM=1 adds each row's cache misses and mispredicted branches);
#   KEEP=<dir> keeps the callgrind files (default: a temporary directory).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-20000}
export MODES=${MODES:-always everysec}
export ROWS=${ROWS:-INCR}
export CLIENTS=${CLIENTS:-50}
export PORT=${PORT:-6398}
# shellcheck source=bench/lib.sh
source bench/lib.sh
require_tools python3
if [ -n "${KEEP:-}" ]; then
  DIR=$KEEP
else
  DIR=$(mktemp -d)
  trap 'rm -rf "$DIR"' EXIT
fi
KEEP=$DIR bash bench/durable_instructions.sh "$N"
echo
for mode in $MODES; do
  for row in $ROWS; do
    for server in redis tollgate; do
      file="$DIR/$server-$mode-$row.cg"
      [ -f "$file" ] || continue
      echo "== $server, appendfsync $mode, $row (instructions per request; indented rows are parts of the row above)"
      python3 bench/durable_components.py "$file" "$N"
      echo
    done
  done
done
