#!/usr/bin/env bash
# Where a ping-pong round trip's cost goes, counted on both sides of the socket, redis-server
# against Tollgate, with the compiled client (examples/blpop_pingpong.rs): per pop (one woken
# BLPOP), for the server process (all threads) and for the client process:
#   cpu_us      CPU time (user + system) per pop, `perf stat`'s task-clock; the server's
#               split into user and system time (/proc/<pid>/stat, clock ticks)
#   syscalls    system calls per pop, and of them epoll_wait, read (read + recvfrom) and
#               write (write + sendto + writev)
#   vol, invol  voluntary and involuntary context switches per pop (the server: every
#               thread's /proc/<pid>/task/*/status before and after; the client: its
#               rusage, /usr/bin/time); a voluntary one is a sleep in epoll_wait or a
#               futex, an involuntary one a preemption (e.g. by the process a write woke)
#   migr        CPU migrations per pop
#   pops/epoll_wait  pops per epoll_wait call (how many ready sockets one wake-up serves)
# No hardware counters (cycles, cache misses) on this VM: `perf stat -e cycles` reads "not
# supported"; bench/blocking_roundtrip.sh counts the servers' instructions under callgrind.
# CPU time per pop is the one timed figure here: a loaded machine moves it less than a rate,
# but it moves.
#
#   bench/pingpong_counts.sh [seconds]     (default 5 a run)
#   PAIRS (default 25), CLIENT_THREADS (default 1), PORT (default 6397), TOLLGATE_BIN
#   (default: build release), TOLLGATE_ARGS (extra server options, e.g. "--threads 2").
#   PY_PROCS=n: the Python client instead (bench/blpop_pingpong.py, n processes, as
#   bench/pubsub.sh's pingpong-pairs row runs it), PY_POPS pops in all (default 100000);
#   the client figures are then the n processes' sums. CLIENT_BIN=<binary>: that build of
#   examples/blpop_pingpong instead of building it (the same client for two server builds;
#   the example's dev-dependency features make its build recompile the tollgate crate).
#   THREADS=1: also one line per server thread (its name, CPU user + system in µs per pop
#   from /proc/<pid>/task/<tid>/stat, voluntary and involuntary context switches per pop),
#   and the server's idle wake-ups per second (every thread's voluntary switches over
#   IDLE_SECS, default 3, with no client connected, before the run).
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-5}
PAIRS=${PAIRS:-25}
CLIENT_THREADS=${CLIENT_THREADS:-1}
PORT=${PORT:-6397}
source bench/lib.sh
require_tools redis-server redis-cli perf python3
tollgate_binary
if [ -n "${CLIENT_BIN:-}" ]; then
  CLIENT=$CLIENT_BIN
else
  cargo build --release -q --example blpop_pingpong
  CLIENT="${CARGO_TARGET_DIR:-target}/release/examples/blpop_pingpong"
fi
port_free "$PORT"
OUT=$(mktemp -d)
PIDS=()
trap 'stop_all; rm -rf "$OUT"' EXIT

EVENTS=task-clock,cpu-migrations,raw_syscalls:sys_enter,syscalls:sys_enter_epoll_wait
EVENTS=$EVENTS,syscalls:sys_enter_read,syscalls:sys_enter_recvfrom
EVENTS=$EVENTS,syscalls:sys_enter_write,syscalls:sys_enter_sendto,syscalls:sys_enter_writev

# switches <pid>: the process's voluntary and involuntary context switches, all threads,
# then its user and system CPU time (clock ticks).
switches() {
  cat /proc/"$1"/task/*/status | awk '/^voluntary_ctxt/ { v += $2 } /^nonvoluntary_ctxt/ { n += $2 } END { printf "%d %d ", v, n }'
  sed 's/.*) //' /proc/"$1"/stat | awk '{ print $12, $13 }'
}

# threads <pid>: one line per thread: tid, name, user and system ticks, voluntary and
# involuntary context switches.
threads() {
  local t
  for t in /proc/"$1"/task/*; do
    printf '%s %s ' "${t##*/}" "$(tr -d ' ' <"$t"/comm)"
    sed 's/.*) //' "$t"/stat | awk '{ printf "%s %s ", $12, $13 }'
    awk '/^voluntary_ctxt/ { v = $2 } /^nonvoluntary_ctxt/ { n = $2 } END { print v, n }' "$t"/status
  done 2>/dev/null
}

run() {
  local server=$1
  # shellcheck disable=SC2086
  if [ "$server" = tollgate ]; then
    "$TOLLGATE_BIN" --port "$PORT" --log warn ${TOLLGATE_ARGS:-} >/dev/null 2>&1 &
  else
    redis-server --port "$PORT" --save "" --appendonly no >/dev/null 2>&1 &
  fi
  local pid=$!
  PIDS=("$pid")
  for _ in $(seq 1 100); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
  if [ -n "${THREADS:-}" ]; then
    threads "$pid" >"$OUT/idle_before"
    sleep "${IDLE_SECS:-3}"
    threads "$pid" >"$OUT/idle_after"
  fi
  "$CLIENT" "$PORT" 1 "$PAIRS" "$CLIENT_THREADS" >/dev/null
  local before after
  threads "$pid" >"$OUT/threads_before"
  before=$(switches "$pid")
  perf stat -x, -e "$EVENTS" -p "$pid" -o "$OUT/server" &
  local perf=$!
  sleep 0.2
  local start end
  start=$(date +%s.%N)
  if [ -n "${PY_PROCS:-}" ]; then
    perf stat -x, -e "$EVENTS" -o "$OUT/client" /usr/bin/time -f "%w %c" -o "$OUT/client_sw" \
      bash -c 'for _ in $(seq 1 "$1"); do python3 bench/blpop_pingpong.py "$2" "$3" 0 "$4" >/dev/null & done; wait' \
      _ "$PY_PROCS" "$PORT" $((PY_POPS / PY_PROCS)) $((PAIRS / PY_PROCS))
    end=$(date +%s.%N)
    python3 -c "print($((PY_POPS / PY_PROCS * PY_PROCS)) / ($end - $start))" >"$OUT/rate"
    echo "$end - $start" | bc >"$OUT/secs"
  else
    perf stat -x, -e "$EVENTS" -o "$OUT/client" /usr/bin/time -f "%w %c" -o "$OUT/client_sw" \
      "$CLIENT" "$PORT" "$SECS" "$PAIRS" "$CLIENT_THREADS" >"$OUT/rate"
    echo "$SECS" >"$OUT/secs"
  fi
  kill -INT "$perf"
  wait "$perf" 2>/dev/null || true
  after=$(switches "$pid")
  threads "$pid" >"$OUT/threads_after"
  stop_all
  python3 - "$server" "$OUT" "$(cat "$OUT/secs")" "$before" "$after" "$(cat "$OUT/client_sw")" "$(getconf CLK_TCK)" <<'PY'
import sys
server, out, secs = sys.argv[1], sys.argv[2], float(sys.argv[3])
before, after, client_sw = [list(map(int, a.split())) for a in sys.argv[4:7]]
tick_us = 1e6 / int(sys.argv[7])


def counts(path):
    c = {}
    for line in open(path):
        f = line.strip().split(",")
        if len(f) > 2 and f[0].replace(".", "").isdigit():
            c[f[2]] = float(f[0])
    return c


rate = float(open(f"{out}/rate").read())
pops = rate * secs
s, c = counts(f"{out}/server"), counts(f"{out}/client")


def row(name, k, vol, invol, user_sys=""):
    reads = k.get("syscalls:sys_enter_read", 0) + k.get("syscalls:sys_enter_recvfrom", 0)
    writes = sum(k.get(f"syscalls:sys_enter_{w}", 0) for w in ("write", "sendto", "writev"))
    sw = f"vol {vol / pops:.3f} invol {invol / pops:.3f}"
    print(f"{server:8} {name:6} cpu_us {k.get('task-clock', 0) * 1000 / pops:6.2f}{user_sys} "
          f"syscalls {k.get('raw_syscalls:sys_enter', 0) / pops:.2f} "
          f"(epoll_wait {k.get('syscalls:sys_enter_epoll_wait', 0) / pops:.3f} "
          f"read {reads / pops:.2f} write {writes / pops:.2f}) {sw} "
          f"migr {k.get('cpu-migrations', 0) / pops:.4f}"
          + (f" pops/epoll_wait {pops / max(k.get('syscalls:sys_enter_epoll_wait', 1), 1):.1f}"))


print(f"{server}: {rate:.0f} pops/s")
user = (after[2] - before[2]) * tick_us / pops
system = (after[3] - before[3]) * tick_us / pops
row("server", s, after[0] - before[0], after[1] - before[1], f" (user {user:.2f} sys {system:.2f})")
row("client", c, *client_sw)


def snapshot(name):
    rows = {}
    for line in open(f"{out}/{name}"):
        f = line.split()
        if len(f) == 6:
            rows[f[0]] = (f[1], *map(int, f[2:]))
    return rows


import os

if os.path.exists(f"{out}/threads_after"):
    if os.path.exists(f"{out}/idle_after"):
        b, a = snapshot("idle_before"), snapshot("idle_after")
        idle = sum(a[t][3] - b[t][3] for t in a if t in b)
        print(f"{server:8} idle   {idle / float(os.environ.get('IDLE_SECS', '3')):.1f} "
              "wake-ups/s (voluntary switches, all threads, no client)")
    b, a = snapshot("threads_before"), snapshot("threads_after")
    for t, (comm, user, system, vol, invol) in sorted(a.items()):
        b0 = b.get(t, (comm, 0, 0, 0, 0))
        print(f"{server:8} thread {comm:16} cpu_us {(user - b0[1] + system - b0[2]) * tick_us / pops:6.2f} "
              f"(user {(user - b0[1]) * tick_us / pops:.2f} sys {(system - b0[2]) * tick_us / pops:.2f}) "
              f"vol {(vol - b0[3]) / pops:.3f} invol {(invol - b0[4]) / pops:.3f}")
PY
}

PY_POPS=${PY_POPS:-100000}
if [ -n "${PY_PROCS:-}" ]; then
  echo "pairs: $PAIRS, Python client processes: $PY_PROCS, $PY_POPS pops a run"
else
  echo "pairs: $PAIRS, client threads: $CLIENT_THREADS, ${SECS} s a run"
fi
run redis
run tollgate
