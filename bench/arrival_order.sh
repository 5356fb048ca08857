#!/usr/bin/env bash
# Requests that reach the server in order, run in that order? bench/arrival_order.py (an
# EXEC on one connection, then an LPUSH on another that touches the EXEC's watched key,
# issue 19) against redis-server and Tollgate, one after the other: the EXECs each aborted.
# Redis aborts none.
#
#   bench/arrival_order.sh [rounds]     (default 300; RUNS=n runs of them per server, default 3)
#   PORT (default 6398), TOLLGATE_BIN (default: build release).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-300}
RUNS=${RUNS:-3}
PORT=${PORT:-6398}
source bench/lib.sh
require_tools redis-server redis-cli python3
tollgate_binary
port_free "$PORT"
PIDS=()
trap stop_all EXIT

for server in redis tollgate; do
  if [ "$server" = tollgate ]; then
    "$TOLLGATE_BIN" --port "$PORT" --log warn >/dev/null 2>&1 &
  else
    redis-server --port "$PORT" --save "" --appendonly no >/dev/null 2>&1 &
  fi
  PIDS=($!)
  for _ in $(seq 1 100); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
  for _ in $(seq 1 "$RUNS"); do
    echo "$server: $(timeout 300 python3 bench/arrival_order.py "$PORT" "$ROUNDS")"
  done
  stop_all
done
