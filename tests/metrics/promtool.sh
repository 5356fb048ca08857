#!/usr/bin/env bash
# `promtool check metrics` on a scrape of a standalone node and of each node of a
# three-node cluster, after a limiter load (README "Operations"). Ports: PORT (client,
# default 21950) and HTTP_PORT (default 21960), each node of the cluster the next ones;
# TOLLGATE_BIN overrides the debug binary.
set -euo pipefail
cd "$(dirname "$0")/../.."
PORT=${PORT:-21950}
HTTP_PORT=${HTTP_PORT:-21960}
BIN=${TOLLGATE_BIN:-target/debug/tollgate}
[ -x "$BIN" ] || cargo build -q
DIR=$(mktemp -d)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$DIR"
}
trap cleanup EXIT

wait_http() {
  for _ in $(seq 1 100); do
    curl -sf "http://127.0.0.1:$1/healthz" >/dev/null && return 0
    sleep 0.1
  done
  echo "no HTTP listener on $1" >&2
  exit 1
}

check() {
  local scrape="$DIR/scrape-$1.txt"
  curl -sf "http://127.0.0.1:$1/metrics" >"$scrape"
  promtool check metrics <"$scrape"
  grep -q '^tollgate_limiter_decisions_total{.*outcome="denied"' "$scrape"
  echo "promtool check metrics: ok ($(grep -vc '^#' "$scrape") series from port $1)"
}

# Standalone.
"$BIN" --port "$PORT" --http-port "$HTTP_PORT" --log warn >"$DIR/standalone.log" 2>&1 &
PIDS+=($!)
wait_http "$HTTP_PORT"
for _ in $(seq 1 15); do redis-cli -p "$PORT" LIMIT.TOKEN api:1 10 1 1h >/dev/null; done
redis-cli -p "$PORT" GET api:1 >/dev/null
check "$HTTP_PORT"

# A three-node cluster.
peers="1@127.0.0.1:$((PORT + 10001)),2@127.0.0.1:$((PORT + 10002)),3@127.0.0.1:$((PORT + 10003))"
for id in 1 2 3; do
  "$BIN" --port $((PORT + id)) --http-port $((HTTP_PORT + id)) --node-id "$id" \
    --peers "$peers" --cluster-secret promtool-check-secret-0123456789 \
    --data-dir "$DIR/node-$id" --log warn >"$DIR/node-$id.log" 2>&1 &
  PIDS+=($!)
done
for id in 1 2 3; do wait_http $((HTTP_PORT + id)); done
for _ in $(seq 1 100); do
  curl -sf "http://127.0.0.1:$((HTTP_PORT + 1))/readyz" >/dev/null && break
  sleep 0.1
done
for _ in $(seq 1 15); do redis-cli -p $((PORT + 1)) LIMIT.TOKEN api:1 10 1 1h >/dev/null; done
sleep 0.5
for id in 1 2 3; do check $((HTTP_PORT + id)); done
