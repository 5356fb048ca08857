#!/usr/bin/env bash
# Kernel work per request of a durable single Tollgate node against redis-server with its
# append-only file, counted by `perf stat` on each server process while redis-benchmark sends
# the same load: system calls (all, and write/fsync/futex/epoll), context switches and CPU
# time per request. Unlike throughput, these counts hardly move when other work loads the
# machine, so they show where the durable path costs more than Redis even on a busy box.
#
# Rows: INCR, SET and LIMIT.TOKEN (Redis: INCR), 50 clients, unpipelined and -P 32, for
# `appendfsync everysec` and `always`. Each server is warmed up with the same command first.
#
#   bench/durable_syscalls.sh
#   RPORT/TPORT/CLIENTS/MODES/PIPELINES/ROWS/N/CARGO_TARGET_DIR override the defaults
#   (MODES="everysec always", PIPELINES="1 32", ROWS="INCR SET LIMIT.TOKEN", N=20000
#   requests per run). SKIP_BUILD=1 uses the release binary as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
CLIENTS=${CLIENTS:-50}
MODES=${MODES:-everysec always}
PIPELINES=${PIPELINES:-1 32}
ROWS=${ROWS:-INCR SET LIMIT.TOKEN}
N=${N:-20000}
RPORT=${RPORT:-6398}
TPORT=${TPORT:-6399}
command -v perf >/dev/null || { echo "perf is needed (apt-get install linux-perf)" >&2; exit 1; }
[ -n "${SKIP_BUILD:-}" ] || cargo build --release -q
BIN="${CARGO_TARGET_DIR:-target}/release/tollgate"
# shellcheck source=bench/lib.sh
source bench/lib.sh
name_binary "$BIN"
# shellcheck source=bench/durable_servers.sh
source "$(dirname "$0")/durable_servers.sh"
EVENTS=raw_syscalls:sys_enter,syscalls:sys_enter_write,syscalls:sys_enter_writev,syscalls:sys_enter_pwrite64
EVENTS=$EVENTS,syscalls:sys_enter_fsync,syscalls:sys_enter_fdatasync,syscalls:sys_enter_futex
EVENTS=$EVENTS,syscalls:sys_enter_epoll_wait,context-switches,task-clock

# measure <pid> <port> <pipeline> <command...>: one line of per-request counts
measure() {
  local pid=$1 port=$2 pipeline=$3 n=$N
  shift 3
  [ "$pipeline" = 1 ] || n=$((N * 10))
  redis-benchmark -p "$port" -n $((n / 10)) -c "$CLIENTS" -P "$pipeline" -r 10000 -q "$@" >/dev/null
  perf stat -x, -e "$EVENTS" -p "$pid" -o "$WORK/perf" -- \
    redis-benchmark -p "$port" -n "$n" -c "$CLIENTS" -P "$pipeline" -r 10000 -q "$@" >/dev/null
  awk -F, -v n="$n" '
    $3 ~ /raw_syscalls/ {s = $1} $3 ~ /enter_write$/ {w += $1} $3 ~ /enter_writev/ {w += $1}
    $3 ~ /pwrite64/ {w += $1} $3 ~ /fsync|fdatasync/ {f += $1} $3 ~ /futex/ {fx = $1}
    $3 ~ /epoll_wait/ {ep = $1} $3 ~ /context-switches/ {cs = $1} $3 ~ /task-clock/ {cpu = $1}
    END {printf "%8.2f %8.3f %8.4f %8.2f %8.2f %8.2f %8.2f", s/n, w/n, f/n, fx/n, ep/n, cs/n, cpu*1000/n}
  ' "$WORK/perf"
}

printf '%-9s %-12s %-4s %-8s %8s %8s %8s %8s %8s %8s %8s\n' fsync row pipe server \
  syscalls writes fsyncs futex epoll ctxsw cpu_us
for MODE in $MODES; do
  start_servers "$MODE"
  for P in $PIPELINES; do
    for row in $ROWS; do
      durable_row_commands "$row"
      # shellcheck disable=SC2086
      printf '%-9s %-12s %-4s %-8s %s\n' "$MODE" "$row" "$P" redis "$(measure "$RPID" "$RPORT" "$P" $rcmd)"
      # shellcheck disable=SC2086
      printf '%-9s %-12s %-4s %-8s %s\n' "$MODE" "$row" "$P" tollgate "$(measure "$TPID" "$TPORT" "$P" $tcmd)"
    done
  done
  stop_servers
done
echo "(per request; cpu_us = CPU time of all the server's threads; LIMIT.TOKEN's redis side runs INCR)"
