#!/usr/bin/env bash
# Side-by-side Lua scripting throughput: redis-server and Tollgate (release build) on this
# machine, the user's seed limiter scripts loaded with SCRIPT LOAD on both and driven by
# redis-benchmark EVALSHA with 50 clients, unpipelined and -P 32, keys spread over 10000
# values with __rand_int__. Prints Tollgate's requests/s as a ratio of Redis's.
#
#   bench/scripts.sh [requests]      (default 100000 per row and round)
#   ROUNDS=n (default 3): each row runs n times per server, alternating; medians are printed.
#
# Ports 16481 (redis) and 16482 (tollgate), or RPORT/TPORT; the script refuses to run if
# either is taken.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-100000}
ROUNDS=${ROUNDS:-3}
CLIENTS=${CLIENTS:-50}
RPORT=${RPORT:-16481}
TPORT=${TPORT:-16482}
for tool in redis-server redis-cli redis-benchmark python3; do
  command -v "$tool" >/dev/null 2>&1 || { echo "missing $tool" >&2; exit 1; }
done
port_taken() {
  python3 -c "import socket,sys; s=socket.socket(); sys.exit(0 if s.connect_ex(('127.0.0.1', $1)) == 0 else 1)"
}
for port in $RPORT $TPORT; do
  if port_taken "$port"; then echo "port $port is in use; refusing to run" >&2; exit 1; fi
done
cargo build --release -q
BIN=${CARGO_TARGET_DIR:-target}/release/tollgate
# shellcheck source=bench/lib.sh
source bench/lib.sh
name_binary "$BIN"
WORK=$(mktemp -d)
redis-server --port "$RPORT" --save "" --appendonly no >"$WORK/redis.log" 2>&1 &
RPID=$!
"$BIN" --port "$TPORT" --log warn >"$WORK/tollgate.log" 2>&1 &
TPID=$!
trap 'kill $RPID $TPID 2>/dev/null || true; rm -rf "$WORK"' EXIT
for port in $RPORT $TPORT; do
  for _ in $(seq 1 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
  redis-cli -p "$port" ping >/dev/null || { echo "server on $port did not start" >&2; exit 1; }
done

# Seed 003 §5: token bucket on a hash (HMGET / HMSET / PEXPIRE), verbatim.
cp tests/seeds/seed_003_token_bucket.lua "$WORK/token_bucket.lua"

# Seed 003 §4: sliding window counter on a hash (HEXISTS / HGETALL / HINCRBY), verbatim.
cp tests/seeds/seed_003_sliding_window.lua "$WORK/sliding_window.lua"

load() { # load <port> <file> -> sha
  redis-cli -p "$1" -x SCRIPT LOAD <"$2"
}
TB_SHA=$(load $RPORT "$WORK/token_bucket.lua")
SW_SHA=$(load $RPORT "$WORK/sliding_window.lua")
for f in token_bucket sliding_window; do
  want=$(load $RPORT "$WORK/$f.lua"); got=$(load $TPORT "$WORK/$f.lua")
  [ "$want" = "$got" ] || { echo "SCRIPT LOAD $f: redis $want, tollgate $got" >&2; exit 1; }
done
# One sanity call on each server: the same script and input give the same reply.
for sha in "$TB_SHA" "$SW_SHA"; do
  args=(EVALSHA "$sha" 0 check 100 1000 1 1 1700000000000)
  [ "$sha" = "$SW_SHA" ] && args=(EVALSHA "$sha" 0 check 100 60 10 1700000000)
  r=$(redis-cli -p $RPORT "${args[@]}"); t=$(redis-cli -p $TPORT "${args[@]}")
  [ "$r" = "$t" ] || { echo "replies differ for $sha: redis [$r] tollgate [$t]" >&2; exit 1; }
done

# rps <port> <pipeline> <args...> -> requests per second
rps() {
  local port=$1 p=$2; shift 2
  redis-benchmark -p "$port" -n "$N" -c "$CLIENTS" -P "$p" -r 10000 --csv "$@" 2>/dev/null \
    | tail -n +2 | tr -d '"' | cut -d, -f2
}

# median <numbers...> (empty if any run failed)
median() {
  python3 -c "import sys,statistics; v=sys.argv[1:]; print(statistics.median(map(float,v)) if v and all(v) else '')" "$@"
}

printf '%-16s %-8s %14s %14s %8s\n' script pipeline redis_rps tollgate_rps ratio
for P in 1 32; do
  for name in token_bucket sliding_window; do
    if [ "$name" = token_bucket ]; then
      # burst 100, one token per second, take 1, now fixed: mostly the allow path.
      args=(EVALSHA "$TB_SHA" 0 "user:__rand_int__" 100 1000 1 1 1700000000000)
    else
      # limit 100 per 60 s in 10 s buckets.
      args=(EVALSHA "$SW_SHA" 0 "api:__rand_int__" 100 60 10 1700000000)
    fi
    # Alternate the servers, ROUNDS times, so that machine noise hits both alike; each
    # side reports its median.
    rs=(); ts=()
    for _ in $(seq 1 "$ROUNDS"); do
      rs+=("$(rps $RPORT "$P" "${args[@]}")")
      ts+=("$(rps $TPORT "$P" "${args[@]}")")
    done
    r=$(median "${rs[@]}"); t=$(median "${ts[@]}")
    if [ -n "$r" ] && [ -n "$t" ]; then
      ratio=$(python3 -c "print(f'{$t/$r:.2f}x')")
    else
      ratio="-"
    fi
    printf '%-16s %-8s %14s %14s %8s\n' "$name" "$P" "${r:-failed}" "${t:-failed}" "$ratio"
  done
done
