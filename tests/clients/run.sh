#!/usr/bin/env bash
# Real client libraries against Tollgate, standalone and as a three-node cluster.
#
#   - ioredis 6 over RESP2 and RESP3, with rate-limiter-flexible's RateLimiterRedis,
#     BurstyRateLimiter and RateLimiterUnion (ioredis_standalone.js);
#   - node-redis (the `redis` package) over RESP2 and RESP3, with RateLimiterRedis on it
#     (node_redis_standalone.js);
#   - Python's `limits`: fixed window, moving window, sliding window counter (limits_check.py);
#   - ioredis over TLS with client certificates, against both servers with TLS only
#     (ioredis_tls.js);
#   - on a cluster: ioredis's Cluster client seeded with each node, rate-limiter-flexible and
#     `limits` (redis+cluster://) through it, redis-py's RedisCluster seeded with each node,
#     and an INCR loop through ioredis while the leader is killed;
#   - bottleneck's Redis datastore (Lua scripts that PUBLISH, SUBSCRIBEd clients): two shared
#     limiters, reservoir 6, then incrementReservoir(2) (bottleneck_check.js), standalone and
#     through a cluster follower.
#
# Standalone, every line the libraries print must be the same on Tollgate as on redis-server.
# Needs node/npm (the packages in package-lock.json, installed here with `npm ci`), Python's
# `limits` and redis-server. Run by .ci/run after the Rust tests.
set -euo pipefail
cd "$(dirname "$0")/../.."
HERE=tests/clients
cargo build -q
BIN=target/debug/tollgate
RPORT=${RPORT:-16420}
TPORT=${TPORT:-16421}
# TLS ports of redis-server and Tollgate for the ioredis TLS check.
RTLS=${RTLS:-16422}
TTLS=${TTLS:-16423}
# Client ports of the three cluster nodes, and their cluster ports (default: client + 10000);
# both are space-separated lists that the environment may override.
read -r -a CPORTS <<<"${CPORTS:-16431 16432 16433}"
read -r -a RAFT_PORTS <<<"${RAFT_PORTS:-$((CPORTS[0] + 10000)) $((CPORTS[1] + 10000)) $((CPORTS[2] + 10000))}"
SECRET=client-checks-secret-0123456789
if [ ! -d "$HERE/node_modules/ioredis" ]; then
  npm ci --prefix "$HERE" --silent --no-audit --no-fund
fi

WORK=$(mktemp -d /tmp/tollgate-clients.XXXXXX)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  # The cluster nodes are disowned (one is killed on purpose): wait for them by hand.
  for pid in "${PIDS[@]}"; do
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  done
  rm -rf "$WORK"
}
trap cleanup EXIT

wait_ping() {
  for _ in $(seq 1 100); do
    redis-cli -p "$1" ping >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "nothing answers on port $1" >&2
  return 1
}

# same <what> <redis output> <tollgate output>: the libraries saw the same on both servers.
same() {
  if diff -u "$2" "$3"; then
    echo "ok   $1 ($(wc -l <"$2") steps, same as redis-server)"
  else
    echo "FAIL $1: Tollgate differs from redis-server (diff above)" >&2
    exit 1
  fi
}

redis-server --port "$RPORT" --save "" --appendonly no >"$WORK/redis.log" 2>&1 &
PIDS+=($!)
"$BIN" --port "$TPORT" --log warn >"$WORK/tollgate.log" 2>&1 &
TPID=$!
PIDS+=($TPID)
wait_ping "$RPORT"
wait_ping "$TPORT"

for protocol in 2 3; do
  node "$HERE/ioredis_standalone.js" "$RPORT" "$protocol" redis >"$WORK/ioredis-redis-$protocol.txt"
  node "$HERE/ioredis_standalone.js" "$TPORT" "$protocol" >"$WORK/ioredis-tollgate-$protocol.txt"
  same "ioredis RESP$protocol + rate-limiter-flexible" \
    "$WORK/ioredis-redis-$protocol.txt" "$WORK/ioredis-tollgate-$protocol.txt"
  node "$HERE/node_redis_standalone.js" "$RPORT" "$protocol" redis >"$WORK/node-redis-redis-$protocol.txt"
  node "$HERE/node_redis_standalone.js" "$TPORT" "$protocol" >"$WORK/node-redis-tollgate-$protocol.txt"
  same "node-redis RESP$protocol + rate-limiter-flexible" \
    "$WORK/node-redis-redis-$protocol.txt" "$WORK/node-redis-tollgate-$protocol.txt"
done
node "$HERE/bottleneck_check.js" "$RPORT" >"$WORK/bottleneck-redis.txt"
node "$HERE/bottleneck_check.js" "$TPORT" >"$WORK/bottleneck-tollgate.txt"
same "bottleneck (ioredis datastore, two shared limiters)" \
  "$WORK/bottleneck-redis.txt" "$WORK/bottleneck-tollgate.txt"
python3 "$HERE/limits_check.py" "redis://127.0.0.1:$RPORT" >"$WORK/limits-redis.txt"
python3 "$HERE/limits_check.py" "redis://127.0.0.1:$TPORT" >"$WORK/limits-tollgate.txt"
same "python limits" "$WORK/limits-redis.txt" "$WORK/limits-tollgate.txt"
kill "$TPID"

# ioredis over TLS (`tls` option, client certificates) against both servers with TLS only;
# certificates made here with the openssl CLI.
bash "$HERE/../tls_support/make_certs.sh" "$WORK/tls" clients-ca
T=$WORK/tls
TLS_FILES=(--tls-cert-file "$T/server.crt" --tls-key-file "$T/server.key" --tls-ca-cert-file "$T/ca.crt")
redis-server --port 0 --tls-port "$RTLS" "${TLS_FILES[@]}" --save "" --appendonly no >"$WORK/redis-tls.log" 2>&1 &
PIDS+=($!)
"$BIN" --port 0 --tls-port "$TTLS" "${TLS_FILES[@]}" --log warn >"$WORK/tollgate-tls.log" 2>&1 &
TLS_PID=$!
PIDS+=($TLS_PID)
for port in "$RTLS" "$TTLS"; do
  for _ in $(seq 1 100); do
    redis-cli --tls --cacert "$T/ca.crt" --cert "$T/client.crt" --key "$T/client.key" -p "$port" ping >/dev/null 2>&1 && break
    sleep 0.1
  done
done
node "$HERE/ioredis_tls.js" "$RTLS" "$T/ca.crt" "$T/client.crt" "$T/client.key" >"$WORK/ioredis-tls-redis.txt"
node "$HERE/ioredis_tls.js" "$TTLS" "$T/ca.crt" "$T/client.crt" "$T/client.key" >"$WORK/ioredis-tls-tollgate.txt"
same "ioredis over TLS" "$WORK/ioredis-tls-redis.txt" "$WORK/ioredis-tls-tollgate.txt"
kill "$TLS_PID"

# A three-node cluster; node i has client port CPORTS[i] and cluster port RAFT_PORTS[i].
PEERS="1@127.0.0.1:${RAFT_PORTS[0]},2@127.0.0.1:${RAFT_PORTS[1]},3@127.0.0.1:${RAFT_PORTS[2]}"
NODE_PIDS=()
for i in 0 1 2; do
  "$BIN" --port "${CPORTS[$i]}" --node-id $((i + 1)) --peers "$PEERS" --cluster-secret "$SECRET" \
    --data-dir "$WORK/node-$((i + 1))" --log warn >"$WORK/node-$((i + 1)).log" 2>&1 &
  NODE_PIDS+=($!)
  PIDS+=($!)
  disown $!
done
for port in "${CPORTS[@]}"; do wait_ping "$port"; done
leader=
for _ in $(seq 1 100); do
  leader=$(redis-cli -p "${CPORTS[0]}" RAFT.STATUS 2>/dev/null | tr -d '\r' | awk -F: '$1 == "leader_id" {print $2}')
  [[ $leader =~ ^[123]$ ]] && break
  sleep 0.1
done
[[ $leader =~ ^[123]$ ]] || { echo "FAIL the cluster elected no leader" >&2; exit 1; }
LEADER_PORT=${CPORTS[$((leader - 1))]}
LEADER_PID=${NODE_PIDS[$((leader - 1))]}

node "$HERE/ioredis_cluster.js" check "$LEADER_PORT" "${CPORTS[@]}" >/dev/null
echo "ok   ioredis Cluster: each node sends it to the leader ($LEADER_PORT); commands, MULTI, rate-limiter-flexible"
python3 "$HERE/redis_py_cluster.py" "$LEADER_PORT" "${CPORTS[@]}"
echo "ok   redis-py RedisCluster: each node sends it to the leader; commands, pipeline, CL.THROTTLE"
python3 "$HERE/limits_check.py" "redis+cluster://127.0.0.1:${CPORTS[1]}" >"$WORK/limits-cluster.txt"
same "python limits through redis+cluster://" "$WORK/limits-redis.txt" "$WORK/limits-cluster.txt"
# bottleneck's two limiters on two followers: their Lua scripts go through the log, and each
# follower wakes its own SUBSCRIBEd client when it applies a publishing entry.
node "$HERE/bottleneck_check.js" "${CPORTS[$((leader % 3))]}" "${CPORTS[$(((leader + 1) % 3))]}" \
  >"$WORK/bottleneck-cluster.txt"
same "bottleneck, two limiters on two cluster followers" \
  "$WORK/bottleneck-redis.txt" "$WORK/bottleneck-cluster.txt"

# Kill the leader under an INCR loop: every acknowledged increment must survive.
result=$(node "$HERE/ioredis_cluster.js" failover "$LEADER_PID" "${CPORTS[@]}")
last=$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["last"])' "$result")
for i in 0 1 2; do
  [ "$((i + 1))" = "$leader" ] && continue
  value=$(redis-cli -p "${CPORTS[$i]}" GET ioredis:failover)
  if ! [[ $value =~ ^[0-9]+$ ]] || [ "$value" -lt "$last" ]; then
    echo "FAIL after the leader was killed, node $((i + 1)) has ioredis:failover=$value, but $last was acknowledged" >&2
    exit 1
  fi
done
echo "ok   ioredis Cluster across a leader kill: $result, the survivors hold every acknowledged INCR"
