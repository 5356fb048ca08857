#!/usr/bin/env bash
# Run a three-node Tollgate cluster on this machine.
#
#   deploy/local-cluster.sh start|stop|status [DATA_DIR]
#
# Client ports 7001-7003, cluster (Raft) ports 17001-17003, all on 127.0.0.1.
# Data (Raft log, snapshots, logs, pid files) under DATA_DIR (default ./data/local-cluster).
# The binary is $TOLLGATE_BIN, or target/release/tollgate built with `cargo build --release`.
# The cluster secret is $TOLLGATE_CLUSTER_SECRET (default: a fixed local-only secret).
set -euo pipefail

cmd=${1:-}
data=${2:-./data/local-cluster}
root=$(cd "$(dirname "$0")/.." && pwd)
secret=${TOLLGATE_CLUSTER_SECRET:-local-cluster-secret-change-me}
peers="1@127.0.0.1:17001,2@127.0.0.1:17002,3@127.0.0.1:17003"

usage() {
    echo "usage: $0 start|stop|status [DATA_DIR]" >&2
    exit 2
}

binary() {
    if [[ -n "${TOLLGATE_BIN:-}" ]]; then
        echo "$TOLLGATE_BIN"
        return
    fi
    (cd "$root" && cargo build --release --bin tollgate >&2)
    echo "$root/target/release/tollgate"
}

pid_of() {
    local f="$data/node-$1.pid"
    [[ -f "$f" ]] && kill -0 "$(cat "$f")" 2>/dev/null && cat "$f"
}

port_busy() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

start() {
    local bin
    bin=$(binary)
    mkdir -p "$data"
    for i in 1 2 3; do
        if pid=$(pid_of "$i"); then
            echo "node $i already running (pid $pid)"
            continue
        fi
        for p in $((7000 + i)) $((17000 + i)); do
            if port_busy "$p"; then
                echo "port $p is already in use; not starting node $i" >&2
                exit 1
            fi
        done
        "$bin" --bind 127.0.0.1 --port $((7000 + i)) --node-id "$i" --peers "$peers" \
            --cluster-port $((17000 + i)) --cluster-secret "$secret" \
            --data-dir "$data/node-$i" --appendfsync "${APPENDFSYNC:-always}" \
            >>"$data/node-$i.log" 2>&1 &
        echo $! >"$data/node-$i.pid"
        echo "node $i started (pid $!, client port $((7000 + i)), log $data/node-$i.log)"
    done
    # Wait (bounded) until a leader is elected.
    for _ in $(seq 1 50); do
        if command -v redis-cli >/dev/null &&
            redis-cli -p 7001 RAFT.STATUS 2>/dev/null | grep -q '^leader_id:[0-9]'; then
            redis-cli -p 7001 RAFT.STATUS | grep -E '^(role|leader_id|term):'
            return 0
        fi
        sleep 0.2
    done
    command -v redis-cli >/dev/null || return 0
    echo "no leader after 10 s; see $data/node-*.log" >&2
    exit 1
}

stop() {
    for i in 1 2 3; do
        if pid=$(pid_of "$i"); then
            kill "$pid"
            for _ in $(seq 1 50); do
                kill -0 "$pid" 2>/dev/null || break
                sleep 0.1
            done
            echo "node $i stopped"
        fi
        rm -f "$data/node-$i.pid"
    done
}

status() {
    for i in 1 2 3; do
        if pid=$(pid_of "$i"); then
            local role=""
            if command -v redis-cli >/dev/null; then
                role=$(redis-cli -p $((7000 + i)) RAFT.STATUS 2>/dev/null |
                    grep -E '^(role|leader_id|term|applied_index):' | tr -d '\r' | tr '\n' ' ')
            fi
            echo "node $i: running (pid $pid) $role"
        else
            echo "node $i: stopped"
        fi
    done
}

case "$cmd" in
start) start ;;
stop) stop ;;
status) status ;;
*) usage ;;
esac
