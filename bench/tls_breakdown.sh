#!/usr/bin/env bash
# Where a TLS server's instructions go per request, Tollgate against redis-server, counted
# (callgrind) instead of timed: the shared 2-core machine makes throughput noise.
#
# Both servers run TLS only (`--port 0 --tls-port`, client certificates checked, bench/lib.sh
# tls_workdir) under callgrind and get the bench/tls.sh load from redis-benchmark --tls
# (CLIENTS clients, random keys, -P PIPELINE). A second run of CLIENTS requests (one per
# connection: start-up, the handshakes, shutdown) is subtracted, so what is left is per
# request. Each function's own instructions go to one component (bench/callgrind_components.py
# has the patterns): the record crypto (AES-GCM), other crypto, crypto glue (OpenSSL's EVP
# layer), the TLS library (rustls / libssl), tokio-rustls, memcpy/memmove, the allocator,
# other libc, and Tollgate's command, protocol/connection and runtime (redis-server is
# stripped: its own code is one row). Then calls per request: TLS records sealed and opened
# (ring's seal/open, OpenSSL's EVP_Encrypt/DecryptUpdate), socket reads and writes (libc
# wrappers), and the callers of memcpy/memmove that cost the most (MEMCPY_CALLERS, Tollgate).
# Valgrind hides AVX-512 from both, so ring and OpenSSL run their AES-NI/AVX2 code here.
#
#   bench/tls_breakdown.sh
#   N (requests per counted run, default 20000), CLIENTS (50), PIPELINE (32), ROWS
#   ("INCR LIMIT.TOKEN"; LIMIT.TOKEN runs INCR on Redis; bench/lib.sh row_commands), PORT
#   (6397), TOLLGATE_BIN (skips the release build), SERVERS ("redis tollgate"),
#   MEMCPY_CALLERS (8), KEEP (a folder: the callgrind files are kept there for
#   callgrind_annotate), CLIENT=1 (count redis-benchmark instead, by the same components,
#   against each server run natively: what the client does per request of the row),
#   CACHE_SIM=1 (callgrind's cache simulator too: first-level and last-level data cache
#   misses per request, D1mr/D1mw/DLmr/DLmw; LL is the simulated last level, 1 MB as in
#   bench/cache_misses.sh, the L2 of one core here).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-20000}
CLIENTS=${CLIENTS:-50}
PIPELINE=${PIPELINE:-32}
ROWS=${ROWS:-INCR LIMIT.TOKEN}
PORT=${PORT:-6397}
SERVERS=${SERVERS:-redis tollgate}
MEMCPY_CALLERS=${MEMCPY_CALLERS:-8}
KEEP=${KEEP:-}
CLIENT=${CLIENT:-}
CACHE_SIM=${CACHE_SIM:-}
LL=${LL:-1048576,16,64}
# shellcheck source=bench/lib.sh
source bench/lib.sh
require_tools valgrind redis-benchmark redis-server redis-cli python3
tollgate_binary
port_free "$PORT"
tls_workdir bench-tls-breakdown

# counted <redis|tollgate> <out> <requests> <pipeline> <command...>: one callgrind run, of
# the server (or, with CLIENT=1, of redis-benchmark against the server run natively).
counted() {
  local server=$1 out=$2 n=$3 p=$4
  shift 4
  local wrap=(valgrind --tool=callgrind --callgrind-out-file="$out") cwrap=()
  if [ -n "$CACHE_SIM" ]; then wrap+=(--cache-sim=yes "--LL=$LL"); fi
  if [ -n "$CLIENT" ]; then cwrap=("${wrap[@]}") wrap=(); fi
  start_tls_server "$server" "${wrap[@]}"
  local pid=$SPID
  "${cwrap[@]}" redis-benchmark "${CLIENT_TLS[@]}" -p "$PORT" -n "$n" -c "$CLIENTS" -P "$p" \
    -r 100000 -q "$@" >/dev/null 2>&1
  redis-cli "${CLIENT_TLS[@]}" -p "$PORT" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
  wait "$pid" 2>/dev/null || true
  PIDS=()
}

for row in $ROWS; do
  row_commands "$row"
  for server in $SERVERS; do
    if [ "$server" = redis ]; then cmd=("${rcmd[@]}"); else cmd=("${tcmd[@]}"); fi
    full="$WORK/$server-$row${CLIENT:+-client}-full.out"
    base="$WORK/$server-$row${CLIENT:+-client}-base.out"
    counted "$server" "$full" "$N" "$PIPELINE" "${cmd[@]}"
    counted "$server" "$base" "$CLIENTS" 1 "${cmd[@]}"
    who=$server
    if [ -n "$CLIENT" ]; then who="redis-benchmark against $server"; fi
    echo "== $row -P $PIPELINE, $who (${cmd[*]}): instructions per request"
    callers=0
    if [ "$server" = tollgate ] && [ -z "$CLIENT" ]; then callers=$MEMCPY_CALLERS; fi
    python3 bench/callgrind_components.py "$full" "$base" $((N - CLIENTS)) memcpy-callers "$callers" |
      awk -F'\t' '{ printf "  %-72s %10s\n", $1, $2 }'
    if [ -n "$KEEP" ]; then cp "$full" "$base" "$KEEP/"; fi
  done
done
