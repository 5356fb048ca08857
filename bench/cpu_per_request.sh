#!/usr/bin/env bash
# CPU and kernel work per unpipelined request, Tollgate against redis-server, counted instead
# of timed (issues 17 and 19: throughput on the shared 2-core machine is noise, these counts
# hardly move with the load).
#
# Both servers run side by side (Redis with `io-threads 1`, its default; Tollgate with its
# defaults) and get the same redis-benchmark load in turn: CLIENTS clients (50), one request
# in flight each (-P 1 unless PIPELINE says), random keys. Per row and server, over a run of
# N requests after a warm-up of N/10:
#   cpu_us   CPU time of the whole server process (every thread, user + kernel), per request,
#            from /proc/<pid>/stat's utime + stime read before and after the run
#   usr/sys  its user and kernel parts
#   sys      system calls per request of every server thread (`perf stat`,
#            raw_syscalls:sys_enter), and of them
#   rd, wr   socket reads (read/recvfrom/readv/recvmsg) and writes (write/sendto/writev/
#            sendmsg), epoll (epoll_wait/epoll_pwait), ep0 (epoll_wait calls that returned
#            no event: wasted looks), epctl (epoll_ctl) and futex
#   ctxsw    context switches per request, and mig(rations) between CPUs
#   cli_us   CPU time per request of redis-benchmark itself (perf stat on it), and cli_ep its
#            epoll_wait calls per request: with one client process on a 2-core machine the
#            client is the bottleneck (it needs more CPU per request than either server), so
#            a server that makes the client wake more often costs throughput too.
# Each row is measured ROUNDS times, Redis first in odd rounds and Tollgate first in even ones;
# printed are the medians, then Tollgate's cpu_us and syscalls as a ratio of Redis's (below
# 1.00: Tollgate uses less). The CPU times grow with the machine's load: compare the two
# servers of one run, not runs of different times.
#
# Rows (ROWS): SETBIT (bit 7 of random keys), BITCOUNT (one 12.5 KB bitmap), PFADD (random
# elements into one HyperLogLog) and GET, as bench/run.sh sends them; TLS:GET, TLS:SET,
# TLS:INCR and TLS:LIMIT.TOKEN (Redis: INCR) on the TLS port with bench/tls.sh's certificates,
# as bench/tls.sh and bench/tls_counts.sh send them.
#
#   bench/cpu_per_request.sh
#   N (requests per counted run, default 200000), CLIENTS (50), PIPELINE (1), ROUNDS (3),
#   ROWS ("SETBIT BITCOUNT PFADD GET TLS:GET"), PORT (25400; the four servers use PORT to
#   PORT+3), TOLLGATE_BIN (skips the release build), TOLLGATE_ARGS (extra flags for Tollgate,
#   e.g. "--threads 2"), DURABLE (everysec or always: the plaintext pair runs durable, Redis
#   with `appendonly yes appendfsync DURABLE` and Tollgate with `--data-dir` and
#   `--appendfsync DURABLE`, each in a fresh folder; the TLS pair stays in memory).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-200000}
CLIENTS=${CLIENTS:-50}
PIPELINE=${PIPELINE:-1}
ROUNDS=${ROUNDS:-3}
ROWS=${ROWS:-SETBIT BITCOUNT PFADD GET TLS:GET}
PORT=${PORT:-25400}
read -r -a TOLLGATE_EXTRA <<<"${TOLLGATE_ARGS:-}"
# shellcheck source=bench/lib.sh
source bench/lib.sh
require_tools perf redis-benchmark redis-server redis-cli python3 openssl
tollgate_binary
for p in $((PORT)) $((PORT + 1)) $((PORT + 2)) $((PORT + 3)); do port_free "$p"; done
tls_workdir bench-cpu-per-request

# The four servers: plaintext Redis and Tollgate on PORT and PORT+1, TLS-only ones on PORT+2
# and PORT+3.
RPORT=$PORT TPORT=$((PORT + 1)) RTLS=$((PORT + 2)) TTLS=$((PORT + 3))
REDIS_DURABLE=(--appendonly no) TOLLGATE_DURABLE=()
case ${DURABLE:-} in
  "") ;;
  everysec | always)
    mkdir -p "$WORK/redis-aof"
    REDIS_DURABLE=(--appendonly yes --appendfsync "$DURABLE" --dir "$WORK/redis-aof")
    TOLLGATE_DURABLE=(--data-dir "$WORK/tollgate-data" --appendfsync "$DURABLE")
    ;;
  *) echo "DURABLE must be everysec or always" >&2; exit 1 ;;
esac
redis-server --port "$RPORT" --io-threads 1 --save "" "${REDIS_DURABLE[@]}" >"$WORK/redis.log" 2>&1 &
RPID=$!
"$TOLLGATE_BIN" --port "$TPORT" --log warn "${TOLLGATE_DURABLE[@]}" "${TOLLGATE_EXTRA[@]}" \
  >"$WORK/tollgate.log" 2>&1 &
TPID=$!
redis-server --port 0 --tls-port "$RTLS" "${TLS_FILES[@]}" --io-threads 1 --save "" \
  --appendonly no >"$WORK/redis-tls.log" 2>&1 &
RTPID=$!
"$TOLLGATE_BIN" --port 0 --tls-port "$TTLS" "${TLS_FILES[@]}" --log warn "${TOLLGATE_EXTRA[@]}" \
  >"$WORK/tollgate-tls.log" 2>&1 &
TTPID=$!
PIDS=("$RPID" "$TPID" "$RTPID" "$TTPID")
for port in $RPORT $TPORT; do
  for _ in $(seq 1 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
done
for port in $RTLS $TTLS; do
  for _ in $(seq 1 100); do redis-cli "${CLIENT_TLS[@]}" -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
done
kill -0 "${PIDS[@]}" || { cat "$WORK"/*.log >&2; echo "a server failed to start" >&2; exit 1; }
# The bitmap BITCOUNT counts: bench/run.sh's 12,500 bytes of a fixed pseudo-random pattern.
for port in $RPORT $TPORT; do
  python3 -c "import random, sys; r = random.Random(7); sys.stdout.buffer.write(bytes(r.randrange(256) for _ in range(12500)))" \
    | redis-cli -p "$port" -x set bits >/dev/null
done

EVENTS=raw_syscalls:sys_enter,context-switches,cpu-migrations
for s in read recvfrom readv recvmsg write sendto writev sendmsg epoll_wait epoll_pwait epoll_ctl futex; do
  EVENTS=$EVENTS,syscalls:sys_enter_$s
done
# epoll_wait calls that returned no event (a filter applies to the event before it).
EMPTY_POLLS=(-e syscalls:sys_exit_epoll_wait --filter 'ret == 0')
TICK=$(getconf CLK_TCK)

# cpu_ticks <pid>: "utime stime" of the whole process, in clock ticks.
cpu_ticks() { awk '{print $14, $15}' "/proc/$1/stat"; }

# measure <pid> <port> <tls:0|1> <command...>: one line of per-request counts
# "cpu_us usr_us sys_us sys rd wr epoll ep0 epctl futex ctxsw mig cli_us cli_ep".
measure() {
  local pid=$1 port=$2 tls=$3 u0 s0 u1 s1 perf
  shift 3
  local client=(-p "$port" -c "$CLIENTS" -P "$PIPELINE" -r 100000 -q)
  [ "$tls" = 1 ] && client=("${CLIENT_TLS[@]}" "${client[@]}")
  redis-benchmark "${client[@]}" -n $((N / 10)) "$@" >/dev/null 2>&1
  read -r u0 s0 <<<"$(cpu_ticks "$pid")"
  perf stat -x, -e "$EVENTS" "${EMPTY_POLLS[@]}" -p "$pid" -o "$WORK/server.perf" &
  perf=$!
  sleep 0.3
  perf stat -x, -e task-clock,syscalls:sys_enter_epoll_wait -o "$WORK/client.perf" -- \
    redis-benchmark "${client[@]}" -n "$N" "$@" >/dev/null 2>&1
  read -r u1 s1 <<<"$(cpu_ticks "$pid")"
  kill -INT "$perf"
  wait "$perf" 2>/dev/null || true
  awk -F, -v n="$N" -v tick="$TICK" -v du=$((u1 - u0)) -v ds=$((s1 - s0)) '
    FILENAME ~ /server/ && $3 ~ /raw_syscalls/ {s = $1}
    FILENAME ~ /server/ && $3 ~ /enter_(read|recvfrom|readv|recvmsg)$/ {rd += $1}
    FILENAME ~ /server/ && $3 ~ /enter_(write|sendto|writev|sendmsg)$/ {wr += $1}
    FILENAME ~ /server/ && $3 ~ /enter_epoll_(wait|pwait)$/ {ep += $1}
    FILENAME ~ /server/ && $3 ~ /exit_epoll_wait/ {e0 = $1}
    FILENAME ~ /server/ && $3 ~ /epoll_ctl/ {ec = $1}
    FILENAME ~ /server/ && $3 ~ /futex/ {fx = $1}
    FILENAME ~ /server/ && $3 ~ /context-switches/ {cs = $1}
    FILENAME ~ /server/ && $3 ~ /cpu-migrations/ {mg = $1}
    FILENAME ~ /client/ && $3 ~ /task-clock/ {cc = $1}
    FILENAME ~ /client/ && $3 ~ /epoll_wait/ {ce = $1}
    END {
      us = 1e6 / tick / n
      printf "%.2f %.2f %.2f %.3f %.3f %.3f %.3f %.4f %.3f %.3f %.3f %.4f %.2f %.3f\n",
        (du + ds) * us, du * us, ds * us, s / n, rd / n, wr / n, ep / n, e0 / n, ec / n, fx / n,
        cs / n, mg / n, cc * 1000 / n, ce / n
    }' "$WORK/server.perf" "$WORK/client.perf"
}

# median of each column over the rounds' lines on stdin
medians() {
  python3 -c '
import statistics, sys
rows = [[float(x) for x in l.split()] for l in sys.stdin if l.strip()]
print(" ".join(f"{statistics.median(c):g}" for c in zip(*rows)))'
}

COLUMNS="cpu_us usr_us sys_us sys rd wr epoll ep0 epctl futex ctxsw mig cli_us cli_ep"
printf '%-16s %-8s' row server
for c in $COLUMNS; do printf ' %7s' "$c"; done
printf '\n'
for row in $ROWS; do
  tls=0
  rpid=$RPID tpid=$TPID rport=$RPORT tport=$TPORT
  if [[ $row == TLS:* ]]; then
    tls=1 rpid=$RTPID tpid=$TTPID rport=$RTLS tport=$TTLS
  fi
  row_commands "${row#TLS:}"
  : >"$WORK/redis.rounds"
  : >"$WORK/tollgate.rounds"
  for round in $(seq 1 "$ROUNDS"); do
    if [ $((round % 2)) = 1 ]; then
      measure "$rpid" "$rport" "$tls" "${rcmd[@]}" >>"$WORK/redis.rounds"
      measure "$tpid" "$tport" "$tls" "${tcmd[@]}" >>"$WORK/tollgate.rounds"
    else
      measure "$tpid" "$tport" "$tls" "${tcmd[@]}" >>"$WORK/tollgate.rounds"
      measure "$rpid" "$rport" "$tls" "${rcmd[@]}" >>"$WORK/redis.rounds"
    fi
  done
  r=$(medians <"$WORK/redis.rounds")
  t=$(medians <"$WORK/tollgate.rounds")
  for server in redis tollgate; do
    if [ "$server" = redis ]; then line=$r; else line=$t; fi
    printf '%-16s %-8s' "$row" "$server"
    for v in $line; do printf ' %7s' "$v"; done
    printf '\n'
  done
  python3 -c '
import sys
r = [float(x) for x in sys.argv[2].split()]; t = [float(x) for x in sys.argv[3].split()]
ratio = lambda i: f"{t[i] / r[i]:.2f}x" if r[i] > 0 else "-"
print(f"{sys.argv[1]:<16} tollgate/redis: cpu_us {ratio(0)}, syscalls {ratio(3)}, client cpu_us {ratio(12)}")
' "$row" "$r" "$t"
done
echo "(per request, medians of $ROUNDS rounds of $N requests, $CLIENTS clients, -P $PIPELINE,"
if [ -n "${DURABLE:-}" ]; then pair="durable, appendfsync $DURABLE"; else pair="in memory"; fi
echo " plaintext pair $pair;"
echo " TLS:LIMIT.TOKEN's redis row runs INCR; cpu_us from /proc/<pid>/stat at $TICK ticks/s)"
