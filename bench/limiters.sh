#!/usr/bin/env bash
# Native limiters against their Redis equivalents, on this machine.
#
# Starts redis-server and Tollgate (release build) side by side and runs the same
# redis-benchmark load (50 clients, 10,000 random keys, unpipelined and -P 32):
#   - on Tollgate: CL.THROTTLE, every LIMIT.* command and INCREX;
#   - on Redis: INCR (the cheapest possible counter) and the token-bucket Lua script of
#     seed 003 section 5 via EVALSHA (the usual way to get a real limiter out of Redis).
# Each Tollgate row is printed with its ratio to Redis INCR and to Redis's Lua bucket.
# Then it measures memory per limiter key: INFO used_memory before/after creating
# 100,000 token buckets on each server (Tollgate LIMIT.TOKEN, Redis the Lua script's hash).
#
# This machine is noisy (Redis INCR alone varies by 30% from one run to the next), so each
# row is REPS rounds of Redis INCR then the Tollgate command, back to back; printed are the
# median rps of each side and the median of the rounds' ratios.
#
#   bench/limiters.sh [requests]        (default 200000 per run)
#   RPORT/TPORT/CLIENTS/REPS/PIPELINES/CARGO_TARGET_DIR override the defaults (REPS=3,
#   PIPELINES="1 32").
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-200000}
CLIENTS=${CLIENTS:-50}
REPS=${REPS:-3}
PIPELINES=${PIPELINES:-1 32}
RPORT=${RPORT:-6396}
TPORT=${TPORT:-6397}
KEYS_FOR_MEMORY=100000
if ! command -v redis-benchmark >/dev/null 2>&1; then
  apt-get update -qq && apt-get install -y -qq redis-server redis-tools >/dev/null
fi
cargo build --release -q
BIN="${CARGO_TARGET_DIR:-target}/release/tollgate"
# shellcheck source=bench/lib.sh
source bench/lib.sh
name_binary "$BIN"

# Never benchmark (or FLUSHALL) a server someone else already runs on these ports.
for port in $RPORT $TPORT; do
  if redis-cli -p "$port" ping >/dev/null 2>&1; then
    echo "port $port is already in use; set RPORT/TPORT to free ports" >&2
    exit 1
  fi
done
redis-server --port "$RPORT" --save "" --appendonly no >/tmp/bench-limiters-redis.log 2>&1 &
RPID=$!
"$BIN" --port "$TPORT" --log warn >/tmp/bench-limiters-tollgate.log 2>&1 &
TPID=$!
trap 'kill $RPID $TPID 2>/dev/null || true' EXIT
for port in $RPORT $TPORT; do
  for _ in $(seq 1 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
done
# Both must be ours and alive (a failed bind would leave a stranger answering).
kill -0 "$RPID" "$TPID" || { echo "a server failed to start; see /tmp/bench-limiters-*.log" >&2; exit 1; }
redis-cli -p "$RPORT" INFO server | grep -q "process_id:$RPID" || { echo "port $RPORT is not our redis-server" >&2; exit 1; }

# The token bucket of seed 003 section 5, verbatim (KEYS unused; state in token.bucket.<subject>).
BUCKET_LUA=$(cat tests/seeds/seed_003_token_bucket.lua)
SHA=$(redis-cli -p "$RPORT" SCRIPT LOAD "$BUCKET_LUA")
# A fixed `now` is fine for throughput; a large burst keeps every call on the admit path.
NOW_MS=$(($(date +%s) * 1000))

# rps <port> <pipeline> <command...> -> requests per second
rps() {
  local port=$1 pipeline=$2
  shift 2
  redis-benchmark -p "$port" -n "$N" -c "$CLIENTS" -P "$pipeline" -r 10000 --csv "$@" 2>/dev/null \
    | tail -n 1 | tr -d '"' | cut -d, -f2
}

ratio() { python3 -c "print(f'{$1/$2:.2f}x')"; }

# median <numbers...> -> their median (the lower middle one for an even count)
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

# shellcheck source=bench/limiter_rows.sh
source bench/limiter_rows.sh
declare -a ROWS=(
  "${LIMITER_ROWS[@]}"
  "LIMIT.INFO|LIMIT.INFO t:__rand_int__"
  "INCREX|INCREX x:__rand_int__ BYINT 1 UBOUND 1000000 EX 60 ENX"
  "INCR|INCR n:__rand_int__"
)

printf '%-14s %-4s %12s %12s %12s %10s %10s\n' \
  command pipe tollgate_rps redis_incr redis_lua vs_incr vs_lua
for P in $PIPELINES; do
  # shellcheck disable=SC2086
  LUA_RPS=$(rps "$RPORT" "$P" EVALSHA "$SHA" 0 __rand_int__ 1000000 1000 10 1 "$NOW_MS")
  for row in "${ROWS[@]}"; do
    name=${row%%|*}
    # Redis INCR is measured right before each Tollgate run, so that machine noise (this
    # is a shared 2-core machine) hits both sides of a ratio alike.
    incr=() tg=() ratios=()
    for _ in $(seq 1 "$REPS"); do
      i=$(rps "$RPORT" "$P" INCR n:__rand_int__)
      # shellcheck disable=SC2086
      t=$(rps "$TPORT" "$P" ${row#*|})
      [ -n "$t" ] && [ -n "$i" ] || break
      incr+=("$i") tg+=("$t") ratios+=("$(python3 -c "print($t / $i)")")
    done
    if [ "${#tg[@]}" -lt "$REPS" ]; then
      printf '%-14s %-4s %12s\n' "$name" "$P" failed
      continue
    fi
    t=$(median "${tg[@]}") INCR_RPS=$(median "${incr[@]}") r=$(median "${ratios[@]}")
    printf '%-14s %-4s %12s %12s %12s %10s %10s\n' "$name" "$P" "$t" "$INCR_RPS" "$LUA_RPS" \
      "$(ratio "$r" 1)" "$(ratio "$t" "$LUA_RPS")"
  done
done
echo "(medians of $REPS rounds; vs_incr is the median of the rounds' ratios; the INCR row on Tollgate is its plain counter, for reference)"

# Memory per limiter key: 100,000 distinct buckets, one request each, long refill
# periods so nothing expires while we measure.
used_memory() {
  redis-cli -p "$1" INFO memory | tr -d '\r' | awk -F: '$1 == "used_memory" { print $2 }'
}
resp_lines() {
  python3 - "$@" <<'PY'
import sys
n, args = int(sys.argv[1]), sys.argv[2:]
out = sys.stdout.buffer
for i in range(n):
    parts = [a.replace("{i}", str(i)).encode() for a in args]
    out.write(b"*%d\r\n" % len(parts))
    for p in parts:
        out.write(b"$%d\r\n%s\r\n" % (len(p), p))
PY
}
redis-cli -p "$TPORT" FLUSHALL >/dev/null
redis-cli -p "$RPORT" FLUSHALL >/dev/null
T0=$(used_memory "$TPORT")
resp_lines "$KEYS_FOR_MEMORY" LIMIT.TOKEN "bucket:{i}" 100 10 1h | redis-cli -p "$TPORT" --pipe >/dev/null
T1=$(used_memory "$TPORT")
R0=$(used_memory "$RPORT")
resp_lines "$KEYS_FOR_MEMORY" EVALSHA "$SHA" 0 "{i}" 100 3600000 10 1 "$NOW_MS" \
  | redis-cli -p "$RPORT" --pipe >/dev/null
R1=$(used_memory "$RPORT")
TK=$(redis-cli -p "$TPORT" DBSIZE)
RK=$(redis-cli -p "$RPORT" DBSIZE)
echo
printf '%-34s %8s %14s %14s\n' server keys used_memory_delta bytes_per_key
printf '%-34s %8s %14s %14s\n' "tollgate LIMIT.TOKEN" "$TK" "$((T1 - T0))" "$(((T1 - T0) / TK))"
printf '%-34s %8s %14s %14s\n' "redis Lua token bucket (hash)" "$RK" "$((R1 - R0))" "$(((R1 - R0) / RK))"
