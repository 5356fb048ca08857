#!/usr/bin/env bash
# CPU instructions per request, Tollgate against redis-server, counted by callgrind.
#
# Throughput on this shared 2-core machine moves by a third from one run to the next;
# instruction counts do not. Each server runs alone under valgrind's callgrind while
# redis-benchmark sends the same pipelined load (-P 32 unless PIPELINE says, 10 clients, 10,000 random keys),
# and the whole process's instruction count is divided by the number of requests. Both
# servers are counted the same way (user-space instructions of every thread, start-up and
# shutdown included: under 1% at the default request count). Kernel work (the socket
# calls) is not counted, and neither are cache misses: this complements bench/limiters.sh
# and bench/run.sh, it does not replace them.
#
# Rows: each Tollgate limiter command (the bench/limiters.sh load), Tollgate's INCR and
# GET, and on Redis INCR, GET and the token-bucket Lua script of seed 003 (EVALSHA). Each
# Tollgate row is printed with redis INCR's count divided by its own: 1.00x means the same
# work per request as Redis's cheapest counter, above 1 less. A second table counts
# the same command on both servers, printed as Redis's count divided by Tollgate's:
# collection writes (redis-benchmark's ZADD: random members into one large sorted set),
# PFADD of random elements into one HyperLogLog (sparse for its first ~1,800 calls, then
# dense: bench/run.sh's row), SETBIT of bit 7 of random keys (bench/run.sh's row), and
# redis-benchmark's own LPUSH, SADD, HSET, LPOP and SPOP tests with bench/run.sh's -r 100000
# (one list, set or hash that grows large; the pops' list and set are filled by N pushes
# or adds first, zeroing callgrind's counters after: callgrind_control -z).
#
#   bench/instructions.sh [requests]    (default 200000 per row)
#   PORT/CARGO_TARGET_DIR/TOLLGATE_BIN override the defaults; ONLY="INCR LIMIT.TOKEN" runs
#   just those Tollgate rows (and Redis's INCR row), e.g. for a before/after comparison.
#   PIPELINE=1 counts unpipelined requests (each client waits for every reply: the
#   event loop's and the runtime's work per request) instead of -P 32.
#   ACL_USER="~rl:* +incr +get +limit.token" runs the Tollgate rows as an ACL user with
#   those rules (created with ACL SETUSER after start-up, each client authenticated as
#   it: the cost of the ACL check); KEY_PREFIX=rl: puts a prefix before each Tollgate row's
#   key (for a user whose key patterns need one; use the same prefix for the default user's
#   run it is compared with). ACL_LOGIN=no creates the ACL_USER user but runs as the default
#   user: the baseline for the ACL check alone (ACL SETUSER builds the ACL tables once, about
#   14 million instructions, 70 per request at 200,000). Redis's rows always run as its
#   default user.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-200000}
PORT=${PORT:-6398}
PIPELINE=${PIPELINE:-32}
for tool in valgrind callgrind_annotate redis-benchmark redis-server; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    apt-get update -qq && apt-get install -y -qq valgrind redis-server redis-tools >/dev/null
    break
  fi
done
# shellcheck source=bench/lib.sh
source bench/lib.sh
tollgate_binary
port_free "$PORT"
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
NOW_MS=$(($(date +%s) * 1000))

# count <server: tollgate|redis> <command...> -> instructions per request
count() {
  local server=$1
  shift
  local file="$OUT/cg.out"
  rm -f "$file"
  start_callgrind_server "$server" "$file"
  local pid=$SPID
  local auth=()
  if [ "$server" = tollgate ] && [ -n "${ACL_USER:-}" ]; then
    # shellcheck disable=SC2086
    redis-cli -p "$PORT" ACL SETUSER bench reset on '>bench' $ACL_USER >/dev/null
    if [ "${ACL_LOGIN:-yes}" != no ]; then
      auth=(--user bench -a bench)
    fi
  fi
  if [ "${1:-}" = EVALSHA ]; then
    local sha
    sha=$(redis-cli -p "$PORT" SCRIPT LOAD "$(cat tests/seeds/seed_003_token_bucket.lua)")
    set -- EVALSHA "$sha" "${@:2}"
  fi
  if [ -n "${PREP:-}" ]; then
    # The prepared data's requests are not counted: callgrind's counters are zeroed after.
    # shellcheck disable=SC2086
    redis-benchmark -p "$PORT" -n "$N" -c 10 -P "$PIPELINE" -r "${RAND:-10000}" $PREP >/dev/null 2>&1
    callgrind_control -z "$pid" >/dev/null 2>&1
  fi
  local ok
  ok=$(redis-benchmark -p "$PORT" "${auth[@]}" -n "$N" -c 10 -P "$PIPELINE" -r "${RAND:-10000}" --csv "$@" 2>/dev/null | tail -n 1 | cut -d, -f1)
  redis-cli -p "$PORT" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
  wait "$pid" || true
  # A command that failed (an error reply stops redis-benchmark) has no result line.
  if [ "$ok" = '"test"' ] || [ -z "$ok" ]; then
    echo failed
    return
  fi
  if [ -n "${KEEP:-}" ]; then
    mkdir -p "$KEEP"
    cp "$file" "$KEEP/$server-${ROW_NAME:-$1}.cg"
  fi
  local total
  total=$(callgrind_annotate "$file" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }')
  echo $((total / N))
}

ratio() { python3 -c "print(f'{$1/$2:.2f}x')"; }

# A Tollgate row's command with KEY_PREFIX before its key (the word after the name).
prefixed() {
  local name=$1 key=$2
  shift 2
  echo "$name ${KEY_PREFIX:-}$key $*"
}

REDIS_INCR=$(count redis INCR n:__rand_int__)
if [ -z "${ONLY:-}" ]; then
  REDIS_GET=$(count redis GET n:__rand_int__)
  REDIS_LUA=$(count redis EVALSHA 0 __rand_int__ 1000000 1000 10 1 "$NOW_MS")
else
  REDIS_GET=skipped
  REDIS_LUA=$REDIS_INCR
fi
echo "redis-server, instructions per request at -P $PIPELINE: INCR $REDIS_INCR, GET $REDIS_GET, seed 003 Lua token bucket $REDIS_LUA"
echo
# shellcheck source=bench/limiter_rows.sh
source bench/limiter_rows.sh
declare -a ROWS=(
  "${LIMITER_ROWS[@]}"
  # LIMIT.TOKEN's row above expires each bucket 1 ms after its call, so its count follows
  # how many keys the expiry cycle deletes (which follows valgrind's speed); this bucket
  # refills one token an hour and never expires during a run: the hot path alone.
  "LIMIT.TOKEN-1h|LIMIT.TOKEN t:__rand_int__ 1000000 1 1h"
  "INCREX|INCREX x:__rand_int__ BYINT 1 UBOUND 1000000 EX 60 ENX"
  "INCR|INCR n:__rand_int__"
  "GET|GET n:__rand_int__"
)
printf '%-14s %14s %14s %10s %10s\n' command tollgate_instr redis_incr vs_incr vs_lua
for row in "${ROWS[@]}"; do
  name=${row%%|*}
  if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $name "* ]]; then
    continue
  fi
  # shellcheck disable=SC2086
  t=$(ROW_NAME=$name count tollgate $(prefixed ${row#*|}))
  if [ "$t" = failed ]; then
    printf '%-14s %14s\n' "$name" failed
    continue
  fi
  printf '%-14s %14s %14s %10s %10s\n' "$name" "$t" "$REDIS_INCR" \
    "$(ratio "$REDIS_INCR" "$t")" "$(ratio "$REDIS_LUA" "$t")"
done

# Collection commands, the same on both servers: NAME|-r|prepared data|command. The
# prepared data's command runs N times (not counted) before the counted one.
declare -a SAME=(
  "ZADD|10000||ZADD myzset __rand_int__ element:__rand_int__"
  "PFADD|10000||PFADD hll __rand_int__"
  "SETBIT|10000||SETBIT bits:__rand_int__ 7 1"
  # redis-benchmark's own LPUSH, SADD, HSET, LPOP and SPOP tests as bench/run.sh runs them
  # (-t, -r 100000): pushes onto one list that grows to N items, members added to one set
  # (86% of 100,000 distinct members after 200,000 adds), fields to one hash; the pops
  # take from a list of N items and from a set of about N members.
  "LPUSH|100000||LPUSH mylist xxx"
  "SADD|100000||SADD myset element:__rand_int__"
  "HSET|100000||HSET myhash element:__rand_int__ xxx"
  "LPOP|100000|LPUSH mylist xxx|LPOP mylist"
  "SPOP|1000000000|SADD myset element:__rand_int__|SPOP myset"
)
printed=
for row in "${SAME[@]}"; do
  IFS='|' read -r name rand prep cmd <<<"$row"
  if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $name "* ]]; then
    continue
  fi
  if [ -z "$printed" ]; then
    echo
    printf '%-14s %14s %14s %10s\n' command tollgate_instr redis_instr ratio
    printed=1
  fi
  # shellcheck disable=SC2086
  t=$(RAND=$rand PREP=$prep count tollgate $cmd)
  # shellcheck disable=SC2086
  r=$(RAND=$rand PREP=$prep count redis $cmd)
  if [ "$t" = failed ] || [ "$r" = failed ]; then
    printf '%-14s %14s %14s\n' "$name" "$t" "$r"
    continue
  fi
  printf '%-14s %14s %14s %10s\n' "$name" "$t" "$r" "$(ratio "$r" "$t")"
done
