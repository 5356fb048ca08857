#!/usr/bin/env bash
# Memory per idle client connection, redis-server against Tollgate, plaintext and TLS.
#
# For each server and transport: start the server alone (no persistence, maxclients above
# N), read its resident set (VmRSS, /proc/<pid>/status) and its heap in use (INFO memory's
# used_memory: Tollgate's counting allocator, Redis's jemalloc count), open N connections
# from one Python process (bench/conn_client.py: each connects, completes its TLS handshake
# when TLS, sends PING and reads +PONG), wait SETTLE seconds with all of them idle (Redis
# frees an idle client's query buffer from its clientsCron after 2 s), read both again, and
# print the growth divided by N:
#   rss_B/conn   resident bytes per connection (what the host pays; pages touched)
#   heap_B/conn  allocated bytes per connection (what the allocator hands out, touched or
#                not)
# Both are counts, not timings: the machine's load does not move them.
#
#   bench/conn_memory.sh
#   N (connections, default 10000; the shell's open-file limit must exceed it), SETTLE
#   (seconds idle before the second reading, default 3), PORT (default 6395), MODES
#   ("plain tls"), SERVERS ("redis tollgate"), TOLLGATE_BIN (skips the release build).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-10000}
SETTLE=${SETTLE:-3}
PORT=${PORT:-6395}
MODES=${MODES:-plain tls}
SERVERS=${SERVERS:-redis tollgate}
# shellcheck source=bench/lib.sh
source bench/lib.sh
require_tools redis-server redis-cli python3 openssl
tollgate_binary
port_free "$PORT"
if [ "$(ulimit -n)" -le $((N + 64)) ]; then
  ulimit -n $((N + 1024)) 2>/dev/null || {
    echo "the open-file limit ($(ulimit -n)) is below N + 64 = $((N + 64)); lower N" >&2
    exit 1
  }
fi
tls_workdir bench-conn-memory

rss() { awk '/^VmRSS:/ { print $2 * 1024 }' /proc/"$1"/status; }

# used <redis-cli args...>: INFO memory's used_memory.
used() { redis-cli "$@" info memory | tr -d '\r' | awk -F: '/^used_memory:/ { print $2 }'; }

run() {
  local server=$1 mode=$2 cli=(-p "$PORT") listen=(--port "$PORT")
  if [ "$mode" = tls ]; then
    cli=(-p "$PORT" "${CLIENT_TLS[@]}")
    listen=(--port 0 --tls-port "$PORT" "${TLS_FILES[@]}")
  fi
  if [ "$server" = tollgate ]; then
    "$TOLLGATE_BIN" "${listen[@]}" --maxclients $((N + 100)) --log warn >"$WORK/server.log" 2>&1 &
  else
    redis-server "${listen[@]}" --maxclients $((N + 100)) --save "" --appendonly no \
      >"$WORK/server.log" 2>&1 &
  fi
  local spid=$!
  PIDS=("$spid")
  wait_ping "${cli[@]}"
  sleep 1
  local rss0 heap0 rss1 heap1
  rss0=$(rss "$spid")
  heap0=$(used "${cli[@]}")
  local args=("$PORT" "$N")
  if [ "$mode" = tls ]; then args+=("$WORK/ca.crt" "$WORK/client.crt" "$WORK/client.key"); fi
  rm -f "$WORK/fifo" "$WORK/client.out"
  mkfifo "$WORK/fifo"
  python3 bench/conn_client.py "${args[@]}" <"$WORK/fifo" >"$WORK/client.out" &
  local cpid=$!
  exec 3>"$WORK/fifo"
  until grep -q ready "$WORK/client.out" 2>/dev/null; do
    kill -0 "$cpid" 2>/dev/null || { echo "the client stopped" >&2; exit 1; }
    sleep 0.5
  done
  sleep "$SETTLE"
  rss1=$(rss "$spid")
  heap1=$(used "${cli[@]}")
  exec 3>&-
  wait "$cpid" || true
  stop_all
  printf '%-8s %-5s %6d conns  rss %7.1f MiB -> %7.1f MiB  rss_B/conn %6d  heap_B/conn %6d\n' \
    "$server" "$mode" "$N" "$(echo "$rss0 / 1048576" | bc -l)" "$(echo "$rss1 / 1048576" | bc -l)" \
    $(((rss1 - rss0) / N)) $(((heap1 - heap0) / N))
}

for mode in $MODES; do
  for server in $SERVERS; do
    run "$server" "$mode"
  done
done
