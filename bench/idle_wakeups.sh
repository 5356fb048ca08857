#!/usr/bin/env bash
# Idle wake-ups a second: how often a server with no client wakes up, redis-server against
# Tollgate in each of its modes. A rate limiter runs on many hosts, mostly idle; each
# wake-up is a context switch and a little CPU on a host that has nothing to do.
#
# A wake-up is counted as a voluntary context switch of any of the server's threads (a
# sleep in epoll_wait, a futex or a timed wait that ended: every /proc/<pid>/task/*/status's
# voluntary_ctxt_switches; involuntary ones are preemptions, which another process's load
# adds), summed over IDLE_SECS seconds after the server has settled
# (SETTLE seconds after it first answers PING; a cluster after it has a leader). One line
# per server process with the total a second, then one line per thread name with its share
# (e.g. `tokio-rt-worker 10.0/s`). The counts hardly depend on the machine's load: a timer
# fires as often on a busy machine as on a quiet one.
#
# Modes (MODES, default all of them):
#   redis            redis-server, no persistence (its `hz 10` serverCron)
#   redis-aof        redis-server with appendonly yes, appendfsync everysec
#   memory           Tollgate in memory
#   durable          Tollgate with --data-dir (a one-voter Raft group, appendfsync always)
#   durable-everysec the same with --appendfsync everysec
#   cluster          three Tollgate nodes on this machine (--peers, appendfsync always):
#                    one line per node, the leader marked; the Raft heartbeat
#                    (--heartbeat-interval-ms, default 50) is a real need there
#
#   bench/idle_wakeups.sh
#   IDLE_SECS (default 10), SETTLE (default 2), PORT (default 6394; a cluster uses PORT,
#   PORT+1, PORT+2 and cluster ports PORT+10..PORT+12), TOLLGATE_BIN (skips the release
#   build), TOLLGATE_ARGS (extra options for every Tollgate process).
set -euo pipefail
cd "$(dirname "$0")/.."
IDLE_SECS=${IDLE_SECS:-10}
SETTLE=${SETTLE:-2}
PORT=${PORT:-6394}
MODES=${MODES:-redis redis-aof memory durable durable-everysec cluster}
# shellcheck source=bench/lib.sh
source bench/lib.sh
require_tools redis-server redis-cli python3
tollgate_binary
for p in "$PORT" $((PORT + 1)) $((PORT + 2)); do port_free "$p"; done
WORK=$(mktemp -d /tmp/bench-idle.XXXXXX)
PIDS=()
trap 'stop_all; rm -rf "$WORK"' EXIT

# snapshot <pid>...: one line per thread: pid, thread name, voluntary switches.
snapshot() {
  local pid t
  for pid in "$@"; do
    for t in /proc/"$pid"/task/*; do
      printf '%s %s ' "$pid" "$(tr -d ' ' <"$t"/comm)"
      awk '/^voluntary_ctxt/ { print $2 }' "$t"/status
    done 2>/dev/null
  done
}

# count <mode> <pid>...: the wake-ups a second of each process over IDLE_SECS.
count() {
  local mode=$1
  shift
  sleep "$SETTLE"
  snapshot "$@" >"$WORK/before"
  sleep "$IDLE_SECS"
  snapshot "$@" >"$WORK/after"
  local roles=""
  if [ "$mode" = cluster ]; then
    local i
    for i in 0 1 2; do
      roles="$roles $(redis-cli -p $((PORT + i)) RAFT.STATUS | tr -d '\r' | awk -F: '/^role:/ { print $2 }')"
    done
  fi
  python3 - "$mode" "$IDLE_SECS" "$WORK" "$roles" "$@" <<'PY'
import sys
from collections import defaultdict

mode, secs, work, roles = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4].split()
pids = sys.argv[5:]


def load(name):
    rows = defaultdict(lambda: defaultdict(int))
    for line in open(f"{work}/{name}"):
        f = line.split()
        if len(f) == 3:
            rows[f[0]][f[1]] += int(f[2])
    return rows


before, after = load("before"), load("after")
for i, pid in enumerate(pids):
    by_name = {n: after[pid][n] - before[pid].get(n, 0) for n in after[pid]}
    label = mode if len(pids) == 1 else f"{mode} node {i + 1} ({roles[i] if i < len(roles) else '?'})"
    print(f"{label:34} {sum(by_name.values()) / secs:6.1f} wake-ups/s")
    for name, n in sorted(by_name.items(), key=lambda kv: -kv[1]):
        if n:
            print(f"{'':36}{name:18} {n / secs:6.1f}/s")
PY
}

run() {
  local mode=$1
  PIDS=()
  case $mode in
    redis | redis-aof)
      local aof=(--appendonly no)
      [ "$mode" = redis-aof ] && aof=(--appendonly yes --appendfsync everysec --dir "$WORK")
      redis-server --port "$PORT" --save "" "${aof[@]}" >"$WORK/redis.log" 2>&1 &
      PIDS=($!)
      wait_ping -p "$PORT"
      ;;
    memory | durable | durable-everysec)
      local args=()
      [ "$mode" != memory ] && args=(--data-dir "$WORK/data-$mode")
      [ "$mode" = durable-everysec ] && args+=(--appendfsync everysec)
      # shellcheck disable=SC2086
      "$TOLLGATE_BIN" --port "$PORT" --log warn "${args[@]}" ${TOLLGATE_ARGS:-} \
        >"$WORK/$mode.log" 2>&1 &
      PIDS=($!)
      wait_ping -p "$PORT"
      ;;
    cluster)
      local peers="1@127.0.0.1:$((PORT + 10)),2@127.0.0.1:$((PORT + 11)),3@127.0.0.1:$((PORT + 12))"
      local i
      for i in 0 1 2; do
        # shellcheck disable=SC2086
        "$TOLLGATE_BIN" --port $((PORT + i)) --node-id $((i + 1)) --peers "$peers" \
          --cluster-port $((PORT + 10 + i)) --cluster-secret bench-idle-secret-0123456789 \
          --data-dir "$WORK/node-$i" --log warn ${TOLLGATE_ARGS:-} >"$WORK/node-$i.log" 2>&1 &
        PIDS+=($!)
      done
      for i in 0 1 2; do wait_ping -p $((PORT + i)); done
      for _ in $(seq 1 100); do
        redis-cli -p "$PORT" RAFT.STATUS 2>/dev/null | grep -q '^leader_id:[0-9]' && break
        sleep 0.2
      done
      ;;
    *) echo "unknown mode $mode" >&2; exit 1 ;;
  esac
  count "$mode" "${PIDS[@]}"
  stop_all
}

echo "idle wake-ups over ${IDLE_SECS} s (voluntary context switches, every thread)"
for mode in $MODES; do run "$mode"; done
