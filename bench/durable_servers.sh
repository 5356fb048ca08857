# Sourced by bench/durable.sh and bench/durable_syscalls.sh: the redis-server (AOF) and
# durable Tollgate (--data-dir) pair both drive. Needs RPORT, TPORT and BIN set; sets WORK
# (a scratch folder, removed on exit), RPID and TPID.
for port in $RPORT $TPORT; do
  if redis-cli -p "$port" ping >/dev/null 2>&1; then
    echo "port $port is already in use; set RPORT/TPORT to free ports" >&2
    exit 1
  fi
done
WORK=$(mktemp -d)
RPID="" TPID=""
stop_servers() {
  for pid in $RPID $TPID; do kill "$pid" 2>/dev/null || true; done
  for pid in $RPID $TPID; do while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done; done
  RPID="" TPID=""
}
trap 'stop_servers; rm -rf "$WORK"' EXIT

# start_servers <always|everysec>: both servers from empty data folders with that fsync
# policy, once both answer PING (and the Tollgate one is ours, with that policy).
start_servers() {
  local mode=$1 port
  rm -rf "$WORK/redis" "$WORK/tollgate"
  mkdir -p "$WORK/redis"
  redis-server --port "$RPORT" --dir "$WORK/redis" --save "" --appendonly yes \
    --appendfsync "$mode" >"$WORK/redis.log" 2>&1 &
  RPID=$!
  "$BIN" --port "$TPORT" --data-dir "$WORK/tollgate" --appendfsync "$mode" --log warn \
    >"$WORK/tollgate.log" 2>&1 &
  TPID=$!
  for port in $RPORT $TPORT; do
    for _ in $(seq 1 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
  done
  kill -0 "$RPID" "$TPID" || { echo "a server failed to start; see $WORK/*.log" >&2; exit 1; }
  redis-cli -p "$TPORT" INFO persistence | grep -q "tollgate_appendfsync:$mode" \
    || { echo "port $TPORT is not our durable tollgate" >&2; exit 1; }
}
