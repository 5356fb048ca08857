#!/usr/bin/env bash
# A three-node Tollgate cluster (appendfsync always) against one redis-server, on this machine.
#
# 50 clients in total. Against the cluster they are spread over the three nodes: three
# redis-benchmark processes run in parallel (17 + 17 + 16 clients, one per node) and their
# throughputs are summed; followers forward writes to the leader, so this measures what a
# client sees from any node. Redis gets one redis-benchmark with all 50 clients.
# Rows: INCR and CL.THROTTLE on 10,000 random keys, unpipelined and with -P 32. Printed:
# requests/s, the ratio to Redis, and p50/p99 latency (for the cluster the worst p50/p99 of
# the three processes). Redis has no CL.THROTTLE (that is the redis-cell module), so both
# rows are compared with Redis INCR at the same pipelining: the cheapest possible counter.
#
# Redis runs without persistence (its fastest setting); every cluster write is fsynced on a
# majority before it is acknowledged, so the ratio includes the price of durability.
#
#   bench/cluster.sh [requests]        (default 100000 per row, split over the 3 nodes)
#   TOLLGATE_BIN=path skips the release build.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-100000}
CLIENTS=50
RPORT=16479
PORTS=(7101 7102 7103)
CPORTS=(17101 17102 17103)
SECRET=bench-cluster-secret-0123456789

if ! command -v redis-benchmark >/dev/null 2>&1; then
  echo "redis-benchmark is required (apt-get install redis-tools redis-server)" >&2
  exit 1
fi
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for port in $RPORT "${PORTS[@]}" "${CPORTS[@]}"; do
  if port_busy "$port"; then
    echo "port $port is already in use; this benchmark needs 16479, 7101-7103 and 17101-17103" >&2
    exit 1
  fi
done
# shellcheck source=bench/lib.sh
source bench/lib.sh
tollgate_binary # TOLLGATE_BIN, or the release build
BIN=$TOLLGATE_BIN

DATA=$(mktemp -d /tmp/bench-cluster.XXXXXX)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$DATA"
}
trap cleanup EXIT

redis-server --port "$RPORT" --save "" --appendonly no >"$DATA/redis.log" 2>&1 &
PIDS+=($!)
RPID=$!
PEERS="1@127.0.0.1:${CPORTS[0]},2@127.0.0.1:${CPORTS[1]},3@127.0.0.1:${CPORTS[2]}"
for i in 0 1 2; do
  "$BIN" --port "${PORTS[$i]}" --node-id $((i + 1)) --peers "$PEERS" \
    --cluster-port "${CPORTS[$i]}" --cluster-secret "$SECRET" \
    --data-dir "$DATA/node-$((i + 1))" --appendfsync always --log warn \
    >"$DATA/node-$((i + 1)).log" 2>&1 &
  PIDS+=($!)
done
for port in $RPORT "${PORTS[@]}"; do
  for _ in $(seq 1 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
done
redis-cli -p "$RPORT" INFO server | grep -q "process_id:$RPID" || { echo "port $RPORT is not our redis-server" >&2; exit 1; }
for _ in $(seq 1 100); do
  redis-cli -p "${PORTS[0]}" RAFT.STATUS 2>/dev/null | grep -q '^leader_id:[0-9]' && break
  sleep 0.1
done
redis-cli -p "${PORTS[0]}" RAFT.STATUS | grep -q '^leader_id:[0-9]' || { echo "cluster has no leader; see $DATA/node-*.log" >&2; exit 1; }

# One CSV data line -> "rps p50 p99".
csv_fields() { tail -n 1 | tr -d '"' | awk -F, '{print $2, $5, $7}'; }

# run_redis PIPELINE CMD... -> "rps p50 p99"
run_redis() {
  local p=$1; shift
  redis-benchmark -p "$RPORT" -c "$CLIENTS" -n "$N" -r 10000 -P "$p" --csv "$@" | csv_fields
}

# run_cluster PIPELINE CMD... -> "summed_rps worst_p50 worst_p99"
run_cluster() {
  local p=$1; shift
  local clients=(17 17 16) out=() bench=()
  for i in 0 1 2; do
    out[$i]="$DATA/bench-$i.csv"
    redis-benchmark -p "${PORTS[$i]}" -c "${clients[$i]}" -n $((N / 3)) -r 10000 -P "$p" --csv "$@" \
      >"${out[$i]}" &
    bench+=($!)
  done
  wait "${bench[@]}"
  for i in 0 1 2; do csv_fields <"${out[$i]}"; done |
    awk '{rps += $1; if ($2 > p50) p50 = $2; if ($3 > p99) p99 = $3} END {printf "%.0f %.3f %.3f\n", rps, p50, p99}'
}

printf '%-26s %12s %12s %8s %9s %9s %9s %9s\n' "row" "redis INCR" "cluster rps" "ratio" "r p50" "r p99" "c p50" "c p99"
for pipeline in 1 32; do
  read -r rrps rp50 rp99 < <(run_redis "$pipeline" INCR "counter:__rand_int__")
  for name in INCR CL.THROTTLE; do
    if [[ $name == INCR ]]; then
      cmd=(INCR "counter:__rand_int__")
    else
      cmd=(CL.THROTTLE "user:__rand_int__" 100 1000 60)
    fi
    read -r crps cp50 cp99 < <(run_cluster "$pipeline" "${cmd[@]}")
    ratio=$(awk -v a="$crps" -v b="$rrps" 'BEGIN {printf "%.2f", (b > 0 ? a / b : 0)}')
    printf '%-26s %12.0f %12.0f %8s %9s %9s %9s %9s\n' "$name -P $pipeline" "$rrps" "$crps" "$ratio" \
      "$rp50" "$rp99" "$cp50" "$cp99"
  done
done
echo "(latencies in ms; cluster: 3 nodes, appendfsync always, 50 clients over 3 nodes; redis: no persistence)"
