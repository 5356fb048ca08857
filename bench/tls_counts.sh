#!/usr/bin/env bash
# TLS work per request, Tollgate against redis-server, counted instead of timed (throughput
# on the shared 2-core machine is noise; these counts hardly move with the load).
#
# Both servers run TLS only (`--port 0 --tls-port`) with bench/tls.sh's certificates (client
# certificates checked) and get the same redis-benchmark --tls load (CLIENTS clients, random
# keys). Per row and pipeline depth, for each server:
#   instr   user-space instructions per request of the whole server process (callgrind, as
#           bench/instructions.sh counts them), with start-up, the CLIENTS handshakes and
#           shutdown taken out: a run of CLIENTS requests (one per connection) is counted
#           too and subtracted. Valgrind hides AVX-512 from both servers, so OpenSSL and
#           ring both run their AES-NI/AVX2 code here, not their AVX-512/VAES code.
#   sys     system calls per request of every thread (`perf stat` on the running server,
#           raw_syscalls:sys_enter), and of them
#   rd, wr  socket reads (read/recvfrom/readv/recvmsg) and writes (write/sendto/writev/
#           sendmsg) per request, epoll (epoll_wait/epoll_pwait) and futex per request;
#   cpu_us, ctxsw  CPU time (user and kernel, every thread) and context switches per
#           request, from the same `perf stat` (the CPU time grows with the machine's load:
#           compare the two servers of one run);
#   B/rd, B/wr  bytes per socket read / write (strace on a separate run: TLS records are
#           the bytes written; a write is one or more records).
# Then the protocol version and cipher suite each server negotiates with OpenSSL's default
# client (what redis-benchmark uses), from `openssl s_client`.
#
#   bench/tls_counts.sh
#   N (requests per counted run, default 20000), CLIENTS (50), PIPELINES ("1 32"), ROWS
#   ("SET GET INCR LIMIT.TOKEN"; LIMIT.TOKEN runs INCR on Redis; SET1K, not run unless
#   named, sets 1,000-byte values: at -P 32 a pipeline is about 34 KB, three TLS records
#   from redis-benchmark), PORT (6396),
#   TOLLGATE_BIN (skips the release build), SKIP="callgrind" or "strace" leaves those
#   columns out.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-20000}
CLIENTS=${CLIENTS:-50}
PIPELINES=${PIPELINES:-1 32}
ROWS=${ROWS:-SET GET INCR LIMIT.TOKEN}
PORT=${PORT:-6396}
SKIP=${SKIP:-}
# shellcheck source=bench/lib.sh
source bench/lib.sh
require_tools valgrind callgrind_annotate perf strace redis-benchmark redis-server openssl
tollgate_binary
port_free "$PORT"
tls_workdir bench-tls-counts
SPID=""
stop() {
  if [ -n "$SPID" ]; then
    kill "$SPID" 2>/dev/null || true
    wait "$SPID" 2>/dev/null || true
  fi
  SPID=""
}

# The server's pid under a wrapper (valgrind execs the server itself; strace forks it).
server_pid() {
  local pid
  pid=$(pgrep -n -P "$SPID" 2>/dev/null || true)
  echo "${pid:-$SPID}"
}

# load <requests> <pipeline> <command...>
load() {
  local n=$1 p=$2
  shift 2
  redis-benchmark "${CLIENT_TLS[@]}" -p "$PORT" -n "$n" -c "$CLIENTS" -P "$p" -r 100000 -q \
    "$@" >/dev/null 2>&1
}

shutdown_server() {
  redis-cli "${CLIENT_TLS[@]}" -p "$PORT" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
  wait "$SPID" 2>/dev/null || true
  SPID=""
}

# instructions <server> <requests> <pipeline> <command...>: the process's total.
instructions() {
  local server=$1 n=$2 p=$3
  shift 3
  rm -f "$WORK/cg.out"
  start_tls_server "$server" valgrind --tool=callgrind --callgrind-out-file="$WORK/cg.out"
  load "$n" "$p" "$@"
  shutdown_server
  callgrind_annotate "$WORK/cg.out" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }'
}

EVENTS=raw_syscalls:sys_enter
for s in read recvfrom readv recvmsg write sendto writev sendmsg epoll_wait epoll_pwait futex; do
  EVENTS=$EVENTS,syscalls:sys_enter_$s
done
EVENTS=$EVENTS,task-clock,context-switches

# syscalls <server> <pipeline> <command...>: "sys rd wr epoll futex cpu_us ctxsw" per request
# (cpu_us: CPU time of all the server's threads, user and kernel).
syscalls() {
  local server=$1 p=$2
  shift 2
  start_tls_server "$server"
  load $((N / 10)) "$p" "$@"
  perf stat -x, -e "$EVENTS" -p "$SPID" -o "$WORK/perf" -- \
    redis-benchmark "${CLIENT_TLS[@]}" -p "$PORT" -n "$N" -c "$CLIENTS" -P "$p" -r 100000 -q \
    "$@" >/dev/null 2>&1
  shutdown_server
  awk -F, -v n="$N" '
    $3 ~ /raw_syscalls/ {s = $1}
    $3 ~ /enter_(read|recvfrom|readv|recvmsg)$/ {rd += $1}
    $3 ~ /enter_(write|sendto|writev|sendmsg)$/ {wr += $1}
    $3 ~ /epoll/ {ep += $1} $3 ~ /futex/ {fx = $1}
    $3 ~ /task-clock/ {cpu = $1} $3 ~ /context-switches/ {cs = $1}
    END {printf "%.2f %.3f %.3f %.3f %.3f %.2f %.3f", s/n, rd/n, wr/n, ep/n, fx/n, cpu*1000/n, cs/n}
  ' "$WORK/perf"
}

# io_raw <server> <requests> <pipeline> <command...>: "reads bytes writes bytes" of the
# successful socket reads and writes (strace attached to every thread of the running server).
io_raw() {
  local server=$1 n=$2 p=$3
  shift 3
  start_tls_server "$server"
  strace -f -qq -e trace=read,recvfrom,readv,recvmsg,write,sendto,writev,sendmsg -e signal=none \
    -o "$WORK/strace" -p "$SPID" 2>/dev/null &
  local tracer=$!
  sleep 1
  load "$n" "$p" "$@"
  kill -INT "$tracer" 2>/dev/null || true
  wait "$tracer" 2>/dev/null || true
  shutdown_server
  python3 - "$WORK/strace" <<'EOF'
import re, sys
reads = [0, 0]; writes = [0, 0]
for line in open(sys.argv[1]):
    m = re.search(r'(?:^\d+\s+(\w+)\(|<\.\.\. (\w+) resumed>).*\)\s+=\s+(-?\d+)', line)
    if not m:
        continue
    name = m.group(1) or m.group(2)
    ret = int(m.group(3))
    # Socket I/O only: the runtime's eventfd wake-ups are 8-byte reads and writes (a TLS
    # record is at least 22 bytes).
    if ret <= 0 or ret == 8:
        continue
    acc = reads if name in ('read', 'recvfrom', 'readv', 'recvmsg') else writes
    acc[0] += 1; acc[1] += ret
print(reads[0], reads[1], writes[0], writes[1])
EOF
}

# io_bytes <server> <pipeline> <command...>: "bytes/read bytes/write" of the requests alone
# (a run of CLIENTS requests, the handshakes' reads and writes, subtracted).
io_bytes() {
  local server=$1 p=$2 full base
  shift 2
  full=$(io_raw "$server" $((N / 4)) "$p" "$@")
  base=$(io_raw "$server" "$CLIENTS" 1 "$@")
  python3 -c '
import sys
f = [int(x) for x in sys.argv[1].split()]; b = [int(x) for x in sys.argv[2].split()]
d = [x - y for x, y in zip(f, b)]
r = lambda c, n: f"{n / c:.0f}" if c > 0 else "-"
print(r(d[0], d[1]), r(d[2], d[3]))' "$full" "$base"
}

printf '%-12s %4s %-8s %9s %7s %6s %6s %6s %6s %6s %6s %6s %6s\n' row pipe server instr sys rd wr \
  epoll futex cpu_us ctxsw B/rd B/wr
for p in $PIPELINES; do
  for row in $ROWS; do
    case $row in
      SET) tcmd=(SET "key:__rand_int__" xxx) rcmd=("${tcmd[@]}") ;;
      GET) tcmd=(GET "key:__rand_int__") rcmd=("${tcmd[@]}") ;;
      INCR) tcmd=(INCR "n:__rand_int__") rcmd=("${tcmd[@]}") ;;
      SET1K) tcmd=(SET "key:__rand_int__" "$(head -c 1000 /dev/zero | tr '\0' v)") rcmd=("${tcmd[@]}") ;;
      LIMIT.TOKEN) tcmd=(LIMIT.TOKEN "bucket:__rand_int__" 100 10 1000) rcmd=(INCR "n:__rand_int__") ;;
      *) echo "unknown row $row" >&2; exit 1 ;;
    esac
    for server in redis tollgate; do
      if [ "$server" = redis ]; then cmd=("${rcmd[@]}"); else cmd=("${tcmd[@]}"); fi
      instr=-
      if [[ " $SKIP " != *" callgrind "* ]]; then
        full=$(instructions "$server" "$N" "$p" "${cmd[@]}")
        base=$(instructions "$server" "$CLIENTS" 1 "${cmd[@]}")
        instr=$(((full - base) / (N - CLIENTS)))
      fi
      read -r sys rd wr ep fx cpu cs <<<"$(syscalls "$server" "$p" "${cmd[@]}")"
      brd=- bwr=-
      if [[ " $SKIP " != *" strace "* ]]; then
        read -r brd bwr <<<"$(io_bytes "$server" "$p" "${cmd[@]}")"
      fi
      printf '%-12s %4s %-8s %9s %7s %6s %6s %6s %6s %6s %6s %6s %6s\n' "$row" "$p" "$server" \
        "$instr" "$sys" "$rd" "$wr" "$ep" "$fx" "$cpu" "$cs" "$brd" "$bwr"
    done
  done
done
echo "(per request; LIMIT.TOKEN's redis row runs INCR; instr without start-up and handshakes)"
echo
for server in redis tollgate; do
  start_tls_server "$server"
  openssl s_client -connect "127.0.0.1:$PORT" -CAfile "$WORK/ca.crt" -cert "$WORK/client.crt" \
    -key "$WORK/client.key" </dev/null 2>/dev/null >"$WORK/s_client" || true
  shutdown_server
  proto=$(awk '/^New, / {print $2}' "$WORK/s_client" | tr -d ,)
  cipher=$(awk '/^New, / {print $NF}' "$WORK/s_client")
  group=$(awk -F': ' '/^(Server Temp Key|Negotiated TLS1.3 group)/ {print $2; exit}' "$WORK/s_client")
  printf '%-8s negotiated with OpenSSL %s: %s %s, key exchange %s\n' "$server" \
    "$(openssl version | cut -d' ' -f2)" "$proto" "$cipher" "${group:-?}"
done
