#!/usr/bin/env bash
# What the CLIENT does per unpipelined TLS request, against redis-server and against Tollgate
# (issue 17: on 2 cores the unpipelined `bench/tls.sh` rows run at redis-benchmark's pace, so
# a server that makes redis-benchmark work harder per request would lose throughput without
# using more CPU itself). Counted, not timed where it can be helped.
#
# Both servers run TLS only (`--port 0 --tls-port`), with bench/tls.sh's certificates (client
# certificates checked), Redis with `io-threads 1` (its default), Tollgate with its defaults,
# and get bench/tls.sh's load: CLIENTS clients (50), -P 1, random keys. Per row and server:
#
#   wire     from the server's sockets (`ss -ti` on its port, two snapshots taken during a
#            long run; requests counted from the bytes received): TCP segments sent and
#            received per request (a reply split over two writes or two records, or a
#            separate ACK, shows as more than 1.000) and bytes sent per request (one TLS
#            record: 22 bytes of framing and tag plus the reply)
#   cli_*    redis-benchmark itself, per request, over a run of N requests (medians of ROUNDS
#            rounds, Redis first in odd rounds and Tollgate first in even ones):
#            cli_us, usr, sys  its CPU time (perf stat task-clock; user and kernel parts)
#            sys      its system calls, and of them rd (read), eagain (reads that found
#                     nothing), wr (write), ep (epoll_wait: the replies per wake-up are 1/ep)
#                     and epctl (epoll_ctl)
#            ctxsw    its context switches (waits and preemptions)
#   srv_us   the server's CPU time per request in the same runs (/proc/<pid>/stat, every
#            thread, user + kernel), for scale
#   cli_instr  redis-benchmark's user-space instructions per request (callgrind on the
#            client, a run of N/5 requests less a run of CLIENTS requests, which takes out
#            start-up and the handshakes; the median of CG_RUNS such runs; SKIP=callgrind
#            leaves it out). Under valgrind the client is slow and the server always has the
#            replies ready, so this is the client's work on the bytes it gets, not its
#            wake-up pattern (the ep column); how many replies one wake-up finds still moves
#            a run by up to 5% (GET against either server: 16,600-18,900 in single runs).
# Then the protocol and cipher suite each server negotiates with OpenSSL's default client
# (redis-benchmark's), from `openssl s_client`.
#
#   bench/tls_client.sh
#   N (requests per counted run, default 100000), CLIENTS (50), ROUNDS (3), ROWS ("SET GET
#   INCR LIMIT.TOKEN"; LIMIT.TOKEN runs INCR on Redis, as in bench/tls.sh), CG_RUNS (3),
#   PORT (26600; Redis on PORT, Tollgate on PORT+1), TOLLGATE_BIN (skips the release
#   build), SKIP.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-100000}
CLIENTS=${CLIENTS:-50}
ROUNDS=${ROUNDS:-3}
ROWS=${ROWS:-SET GET INCR LIMIT.TOKEN}
PORT=${PORT:-26600}
SKIP=${SKIP:-}
CG_RUNS=${CG_RUNS:-3}
# shellcheck source=bench/lib.sh
source bench/lib.sh
require_tools perf valgrind callgrind_annotate ss redis-benchmark redis-server redis-cli \
  python3 openssl
tollgate_binary
port_free "$PORT"
port_free $((PORT + 1))
tls_workdir bench-tls-client
RPORT=$PORT TPORT=$((PORT + 1))
redis-server --port 0 --tls-port "$RPORT" "${TLS_FILES[@]}" --io-threads 1 --save "" \
  --appendonly no >"$WORK/redis.log" 2>&1 &
RPID=$!
"$TOLLGATE_BIN" --port 0 --tls-port "$TPORT" "${TLS_FILES[@]}" --log warn >"$WORK/tollgate.log" 2>&1 &
TPID=$!
PIDS=("$RPID" "$TPID")
for port in $RPORT $TPORT; do
  for _ in $(seq 1 100); do redis-cli "${CLIENT_TLS[@]}" -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
done
kill -0 "${PIDS[@]}" || { cat "$WORK"/*.log >&2; echo "a server failed to start" >&2; exit 1; }

# bench_args <port> <requests>: redis-benchmark's options for one run.
bench_args() { echo "${CLIENT_TLS[*]} -p $1 -c $CLIENTS -P 1 -r 100000 -q -n $2"; }

# request_bytes <command...>: the size of one TLS record carrying the command as
# redis-benchmark sends it (RESP array, random part 12 digits, 22 bytes of TLS 1.3 framing).
request_bytes() {
  python3 -c '
import sys
args = [a.replace("__rand_int__", "0" * 12) for a in sys.argv[1:]]
print(len(f"*{len(args)}\r\n") + sum(len(f"${len(a)}\r\n{a}\r\n") for a in args) + 22)' "$@"
}

# wire <port> <command...>: "segs_out segs_in bytes_out" per request, of the server's sockets
# on <port>, between two snapshots 2 and 6 seconds into a long run.
wire() {
  local port=$1 rb a z load
  shift
  rb=$(request_bytes "$@")
  snap() {
    ss -tinH state established "( sport = :$port )" | python3 -c '
import re, sys
t = sys.stdin.read()
g = lambda k: sum(int(x) for x in re.findall(rf"\b{k}:(\d+)", t))
print(g("segs_out"), g("segs_in"), g("bytes_received"), g("bytes_acked"))'
  }
  # shellcheck disable=SC2046
  redis-benchmark $(bench_args "$port" $((N * 10))) "$@" >/dev/null 2>&1 &
  load=$!
  sleep 2
  a=$(snap)
  sleep 4
  z=$(snap)
  kill "$load" 2>/dev/null || true
  wait "$load" 2>/dev/null || true
  python3 -c '
import sys
a = [int(x) for x in sys.argv[1].split()]; z = [int(x) for x in sys.argv[2].split()]
req = (z[2] - a[2]) / int(sys.argv[3])
if req <= 0:
    # The load (N * 10 requests) ended before the sample 2-6 s into it: with a small N.
    print("the wire sample saw no replies: raise N (N * 10 requests must outlast 6 s)",
          file=sys.stderr)
    print("- - -")
else:
    print(f"{(z[0] - a[0]) / req:.3f} {(z[1] - a[1]) / req:.3f} {(z[3] - a[3]) / req:.1f}")' "$a" "$z" "$rb"
}

CLIENT_EVENTS=task-clock,context-switches,raw_syscalls:sys_enter,syscalls:sys_enter_read
CLIENT_EVENTS=$CLIENT_EVENTS,syscalls:sys_enter_write,syscalls:sys_enter_epoll_wait
CLIENT_EVENTS=$CLIENT_EVENTS,syscalls:sys_enter_epoll_ctl
TICK=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# client <pid> <port> <command...>: "cli_us usr sys sys rd eagain wr ep epctl ctxsw srv_us"
# per request.
client() {
  local pid=$1 port=$2 t0 t1
  shift 2
  # shellcheck disable=SC2046
  redis-benchmark $(bench_args "$port" $((N / 10))) "$@" >/dev/null 2>&1
  t0=$(cpu_ticks "$pid")
  # shellcheck disable=SC2046
  perf stat -e "$CLIENT_EVENTS" -e syscalls:sys_exit_read --filter 'ret < 0' \
    -o "$WORK/client.perf" -- redis-benchmark $(bench_args "$port" "$N") "$@" >/dev/null 2>&1
  t1=$(cpu_ticks "$pid")
  awk -v n="$N" -v srv=$(((t1 - t0) * 1000000 / TICK)) '
    { gsub(",", "", $1) }
    $2 == "msec" && $3 == "task-clock" {cpu = $1 * 1000}
    $2 == "context-switches" {cs = $1}
    $2 ~ /raw_syscalls/ {s = $1}
    $2 ~ /sys_enter_read$/ {rd = $1}
    $2 ~ /sys_exit_read$/ {ea = $1}
    $2 ~ /sys_enter_write$/ {wr = $1}
    $2 ~ /sys_enter_epoll_wait$/ {ep = $1}
    $2 ~ /sys_enter_epoll_ctl$/ {ec = $1}
    $3 == "user" {usr = $1 * 1e6}
    $3 == "sys" {sy = $1 * 1e6}
    END {
      printf "%.2f %.2f %.2f %.3f %.3f %.4f %.3f %.4f %.3f %.4f %.2f\n", cpu / n, usr / n,
        sy / n, s / n, rd / n, ea / n, wr / n, ep / n, ec / n, cs / n, srv / n
    }' "$WORK/client.perf"
}

# client_instructions <port> <command...>: redis-benchmark's instructions per request.
client_instructions() {
  local port=$1 n=$((N / 5)) full base
  shift
  cg() {
    rm -f "$WORK/cg.out"
    # shellcheck disable=SC2046
    valgrind --tool=callgrind --callgrind-out-file="$WORK/cg.out" \
      redis-benchmark $(bench_args "$port" "$1") "${@:2}" >/dev/null 2>&1
    callgrind_annotate "$WORK/cg.out" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }'
  }
  base=$(cg "$CLIENTS" "$@")
  for _ in $(seq 1 "$CG_RUNS"); do
    full=$(cg "$n" "$@")
    echo $(((full - base) / (n - CLIENTS)))
  done | medians

}

medians() {
  python3 -c '
import statistics, sys
rows = [[float(x) for x in l.split()] for l in sys.stdin if l.strip()]
print(" ".join(f"{statistics.median(c):g}" for c in zip(*rows)))'
}

for port in $RPORT $TPORT; do
  printf 'port %s negotiates: ' "$port"
  openssl s_client -connect "127.0.0.1:$port" -CAfile "$WORK/ca.crt" -cert "$WORK/client.crt" \
    -key "$WORK/client.key" </dev/null 2>/dev/null | awk '/^New, /{print; exit}'
done
COLUMNS="segs_out segs_in B_out cli_us usr sys sys rd eagain wr ep epctl ctxsw srv_us cli_instr"
printf '%-12s %-8s' row server
for c in $COLUMNS; do printf ' %8s' "$c"; done
printf '\n'
for row in $ROWS; do
  row_commands "$row"
  : >"$WORK/redis.rounds"
  : >"$WORK/tollgate.rounds"
  for round in $(seq 1 "$ROUNDS"); do
    if [ $((round % 2)) = 1 ]; then
      client "$RPID" "$RPORT" "${rcmd[@]}" >>"$WORK/redis.rounds"
      client "$TPID" "$TPORT" "${tcmd[@]}" >>"$WORK/tollgate.rounds"
    else
      client "$TPID" "$TPORT" "${tcmd[@]}" >>"$WORK/tollgate.rounds"
      client "$RPID" "$RPORT" "${rcmd[@]}" >>"$WORK/redis.rounds"
    fi
  done
  for server in redis tollgate; do
    if [ "$server" = redis ]; then
      port=$RPORT cmd=("${rcmd[@]}")
    else
      port=$TPORT cmd=("${tcmd[@]}")
    fi
    instr=-
    [[ $SKIP == *callgrind* ]] || instr=$(client_instructions "$port" "${cmd[@]}")
    line="$(wire "$port" "${cmd[@]}") $(medians <"$WORK/$server.rounds") $instr"
    printf '%-12s %-8s' "$row" "$server"
    for v in $line; do printf ' %8s' "$v"; done
    printf '\n'
    echo "$line" >"$WORK/$server.line"
  done
  python3 -c '
import sys
r = sys.argv[2].split(); t = sys.argv[3].split()
def ratio(i):
    try:
        return f"{float(t[i]) / float(r[i]):.2f}x"
    except (ValueError, ZeroDivisionError, IndexError):
        return "-"
print(f"{sys.argv[1]:<12} tollgate/redis: client cpu_us {ratio(3)}, client syscalls {ratio(6)}, "
      f"client epoll_wait {ratio(10)}, client instructions {ratio(14)}, server cpu_us {ratio(13)}")
' "$row" "$(cat "$WORK/redis.line")" "$(cat "$WORK/tollgate.line")"
done
echo "(per request; client columns medians of $ROUNDS rounds of $N requests, $CLIENTS clients, -P 1;"
echo " LIMIT.TOKEN's redis row runs INCR; load average at the end: $(cut -d' ' -f1-3 /proc/loadavg))"
